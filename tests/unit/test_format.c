/* test_format.c -- the store format: manifests, HEAD, keys and id sets: round trip,
 * damage, hostile input. */
#include "format/itemset.h"
#include "test_util.h"
#include "format/envelope.h"
#include "format/gcrecord.h"
#include "format/head.h"
#include "base/idset.h"
#include "format/manifest.h"
#include "run/globalckpt.h"

static void make_manifest(struct ckpt_manifest *m)
{
    memset(m, 0, sizeof *m);
    m->step = 12345678901234ull; /* above 2^32: must survive JSON */
    m->seq = 7;
    m->epoch = 3;
    m->time_ms = 1700000000000;
    m->world_size = 1;
    m->chunk_bytes = 1 << 20;
    m->new_bytes = 999;
    m->writer = strdup("host:1");
    m->parent = strdup("manifests/00000000000000000006_00000000000000000001_0000000003.ckm");
    m->nitems = 2;
    m->items = calloc(2, sizeof *m->items);
    m->items[0].name = strdup("weights");
    m->items[0].size = (1 << 20) + 5;
    m->items[0].elem_size = 2;
    m->items[0].nchunks = 2;
    m->items[0].chunks = calloc(2, sizeof(struct ckpt_chunk_ref));
    m->items[0].chunks[0].raw_len = 1 << 20;
    m->items[0].chunks[0].stored_len = 1000;
    m->items[0].chunks[0].id[0] = 0xab;
    m->items[0].chunks[1].raw_len = 5;
    m->items[0].chunks[1].stored_len = 53;
    m->items[0].chunks[1].id[15] = 0xcd;
    m->items[1].name = strdup("checkpoint-100/model.bin");
    m->items[1].kind = CKPT_ITEM_FILE;
    m->items[1].mode = 0640;
}

static void test_manifest_roundtrip(void **state)
{
    struct ckpt_manifest m, d;
    char *buf, err[CKPT_ERR_MAX];
    size_t len;
    (void)state;
    make_manifest(&m);
    assert_int_equal(ckpt__manifest_encode(&m, &buf, &len), CKPT_OK);
    assert_int_equal(ckpt__manifest_decode(buf, len, &d, err), CKPT_OK);
    assert_true(d.step == m.step);
    assert_int_equal(d.seq, 7);
    assert_int_equal(d.epoch, 3);
    assert_int_equal(d.nitems, 2);
    assert_string_equal(d.items[1].name, "checkpoint-100/model.bin");
    assert_int_equal(d.items[1].kind, CKPT_ITEM_FILE);
    assert_int_equal(d.items[1].mode, 0640);
    assert_int_equal(d.items[0].elem_size, 2);
    assert_memory_equal(d.items[0].chunks, m.items[0].chunks, 2 * sizeof(struct ckpt_chunk_ref));
    assert_string_equal(d.parent, m.parent);
    ckpt__manifest_free(&d);

    /* any single flipped byte is detected */
    for (size_t i = 0; i < len; i++) {
        buf[i] ^= 0x01;
        assert_int_not_equal(ckpt__manifest_decode(buf, len, &d, err), CKPT_OK);
        buf[i] ^= 0x01;
    }
    /* any truncation is detected */
    for (size_t l = 0; l < len; l += 3)
        assert_int_not_equal(ckpt__manifest_decode(buf, l, &d, err), CKPT_OK);
    free(buf);
    ckpt__manifest_free(&m);
}

/* Chunks in packs survive the round trip; a manifest without packs stays
 * format 1 (readable by older readers), one with packs is format 2. */
static void test_manifest_packs_roundtrip(void **state)
{
    struct ckpt_manifest m, d;
    struct ckpt_idlist objs;
    char *buf, err[CKPT_ERR_MAX];
    size_t len;
    (void)state;
    make_manifest(&m);
    assert_int_equal(ckpt__manifest_encode(&m, &buf, &len), CKPT_OK);
    assert_non_null(strstr(buf, "\"format\":1,"));
    free(buf);
    m.npacks = 1;
    m.packs = calloc(1, sizeof *m.packs);
    m.packs[0].id[3] = 0x77;
    m.packs[0].size = 2053;
    m.items[0].chunks[1].pack = 1;
    m.items[0].chunks[1].off = 2000;
    assert_int_equal(ckpt__manifest_encode(&m, &buf, &len), CKPT_OK);
    assert_non_null(strstr(buf, "\"format\":2,"));
    assert_int_equal(ckpt__manifest_decode(buf, len, &d, err), CKPT_OK);
    assert_int_equal(d.version, 2);
    assert_int_equal(d.npacks, 1);
    assert_memory_equal(d.packs, m.packs, sizeof *m.packs);
    assert_memory_equal(d.items[0].chunks, m.items[0].chunks, 2 * sizeof(struct ckpt_chunk_ref));
    /* what the manifest needs: one pack and one chunk object */
    assert_int_equal(ckpt__manifest_objects(&d, &objs), 0);
    assert_int_equal(objs.n, 2);
    assert_int_equal(objs.kind[0], CKPT_OBJ_PACK);
    assert_int_equal(objs.size[0], 2053);
    assert_int_equal(objs.kind[1], CKPT_OBJ_CHUNK);
    assert_int_equal(objs.size[1], 1000);
    ckpt__idlist_free(&objs);
    ckpt__manifest_free(&d);
    ckpt__manifest_free(&m);
    free(buf);
}

/* Seal hand-written JSON so only the semantic checks can reject it. */
static ckpt_status decode_json(const char *json, char *err)
{
    size_t len;
    char *buf = ckpt__envelope_seal(json, &len);
    struct ckpt_manifest m;
    ckpt_status st = ckpt__manifest_decode(buf, len, &m, err);
    free(buf);
    if (st == CKPT_OK)
        ckpt__manifest_free(&m);
    return st;
}

#define HDR "{\"format\":1,\"kind\":\"manifest\",\"step\":\"1\",\"seq\":\"1\",\"epoch\":\"0\"," \
            "\"time_ms\":1,\"rank\":0,\"world_size\":1,\"chunk_bytes\":1048576,"            \
            "\"new_bytes\":0,\"writer\":\"w\",\"items\":"
#define ID "\"00112233445566778899aabbccddeeff\""

static void test_manifest_hostile(void **state)
{
    char err[CKPT_ERR_MAX];
    (void)state;
    assert_int_equal(decode_json(HDR "[]}", err), CKPT_OK);
    assert_int_equal(decode_json(HDR "[{\"name\":\"a\",\"kind\":\"mem\",\"size\":4,\"elem\":0,"
                                     "\"mode\":384,\"chunks\":[[" ID ",4,60]]}]}", err),
                     CKPT_OK);
    /* names escaping the target */
    const char *bad_names[] = { "../x", "/etc/passwd", "a/../../b", "a//b", "", ".", "a/",
                                "x\\y", "a b" };
    for (size_t i = 0; i < sizeof bad_names / sizeof *bad_names; i++) {
        char json[1024];
        snprintf(json, sizeof json,
                 HDR "[{\"name\":\"%s\",\"kind\":\"mem\",\"size\":0,\"elem\":0,\"mode\":384,"
                     "\"chunks\":[]}]}", bad_names[i]);
        assert_int_equal(decode_json(json, err), CKPT_E_CORRUPT);
    }
    /* sizes that do not add up, bad ids, wrong types, duplicates */
    const char *bad[] = {
        HDR "[{\"name\":\"a\",\"kind\":\"mem\",\"size\":5,\"elem\":0,\"mode\":384,\"chunks\":[[" ID ",4,60]]}]}",
        HDR "[{\"name\":\"a\",\"kind\":\"mem\",\"size\":4,\"elem\":0,\"mode\":384,\"chunks\":[[\"zz\",4,60]]}]}",
        HDR "[{\"name\":\"a\",\"kind\":\"mem\",\"size\":4,\"elem\":3,\"mode\":384,\"chunks\":[[" ID ",4,60]]}]}",
        HDR "[{\"name\":\"a\",\"kind\":\"pipe\",\"size\":4,\"elem\":0,\"mode\":384,\"chunks\":[[" ID ",4,60]]}]}",
        HDR "[{\"name\":\"a\",\"kind\":\"mem\",\"size\":-4,\"elem\":0,\"mode\":384,\"chunks\":[]}]}",
        HDR "[{\"name\":\"a\",\"kind\":\"mem\",\"size\":4,\"elem\":0,\"mode\":384,\"chunks\":[[" ID ",4,2]]}]}",
        HDR "[{\"name\":\"a\",\"kind\":\"mem\",\"size\":4,\"elem\":0,\"mode\":384,\"chunks\":[[" ID ",4.5,60]]}]}",
        HDR "[{\"name\":\"a\",\"kind\":\"mem\",\"size\":0,\"elem\":0,\"mode\":384,\"chunks\":[]},"
            "{\"name\":\"a\",\"kind\":\"mem\",\"size\":0,\"elem\":0,\"mode\":384,\"chunks\":[]}]}",
        HDR "7}",
        "{\"format\":1,\"kind\":\"manifest\"}",
        "[1,2,3]",
        "{\"format\":1,\"kind\":\"manifest\",\"step\":\"-1\",\"seq\":\"1\",\"epoch\":\"0\",\"items\":[]}",
        "{\"format\":1,\"kind\":\"manifest\",\"step\":\"99999999999999999999999\",\"seq\":\"1\"}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(decode_json(bad[i], err), CKPT_E_CORRUPT);
    /* format 2: chunks in packs, [id, raw, stored, pack, offset] */
#define HDR2 "{\"format\":2,\"kind\":\"manifest\",\"step\":\"1\",\"seq\":\"1\",\"epoch\":\"0\"," \
             "\"time_ms\":1,\"rank\":0,\"world_size\":1,\"chunk_bytes\":1048576,"          \
             "\"new_bytes\":0,\"writer\":\"w\",\"packs\":[[" ID ",200]],\"items\":"
#define ITEM(tuple) "[{\"name\":\"a\",\"kind\":\"mem\",\"size\":4,\"elem\":0,\"mode\":384," \
                    "\"chunks\":[" tuple "]}]}"
    {
        size_t len;
        char *buf = ckpt__envelope_seal(HDR2 ITEM("[" ID ",4,60,0,140]"), &len);
        struct ckpt_manifest pm;
        assert_int_equal(ckpt__manifest_decode(buf, len, &pm, err), CKPT_OK);
        assert_int_equal(pm.npacks, 1);
        assert_int_equal(pm.packs[0].size, 200);
        assert_int_equal(pm.items[0].chunks[0].pack, 1);
        assert_int_equal(pm.items[0].chunks[0].off, 140);
        ckpt__manifest_free(&pm);
        free(buf);
    }
    assert_int_equal(decode_json(HDR2 ITEM("[" ID ",4,60]"), err), CKPT_OK); /* own object */
    const char *bad2[] = {
        HDR2 ITEM("[" ID ",4,60,1,0]"),          /* no pack 1 */
        HDR2 ITEM("[" ID ",4,60,0,141]"),        /* ends past the pack */
        HDR2 ITEM("[" ID ",4,60,-1,0]"),
        HDR2 ITEM("[" ID ",4,60,0,1.5]"),
        HDR2 ITEM("[" ID ",4,60,0]"),            /* 4 fields */
        HDR ITEM("[" ID ",4,60,0,0]"),           /* a pack reference in format 1 */
        "{\"format\":1,\"kind\":\"manifest\",\"step\":\"1\",\"seq\":\"1\",\"epoch\":\"0\","
        "\"time_ms\":1,\"rank\":0,\"world_size\":1,\"chunk_bytes\":1048576,\"new_bytes\":0,"
        "\"writer\":\"w\",\"packs\":[[" ID ",200]],\"items\":[]}", /* packs in format 1 */
        "{\"format\":2,\"kind\":\"manifest\",\"step\":\"1\",\"seq\":\"1\",\"epoch\":\"0\","
        "\"time_ms\":1,\"rank\":0,\"world_size\":1,\"chunk_bytes\":1048576,\"new_bytes\":0,"
        "\"writer\":\"w\",\"packs\":[[\"zz\",200]],\"items\":[]}", /* bad pack id */
        "{\"format\":2,\"kind\":\"manifest\",\"step\":\"1\",\"seq\":\"1\",\"epoch\":\"0\","
        "\"time_ms\":1,\"rank\":0,\"world_size\":1,\"chunk_bytes\":1048576,\"new_bytes\":0,"
        "\"writer\":\"w\",\"packs\":[[" ID ",2]],\"items\":[]}", /* smaller than a header */
    };
    for (size_t i = 0; i < sizeof bad2 / sizeof *bad2; i++)
        assert_int_equal(decode_json(bad2[i], err), CKPT_E_CORRUPT);
    /* a newer format is refused with a clear status, not misread */
    assert_int_equal(decode_json("{\"format\":5,\"kind\":\"manifest\"}", err), CKPT_E_UNSUPPORTED);
    assert_non_null(strstr(err, "newer"));
    /* garbage without an envelope */
    struct ckpt_manifest m;
    assert_int_equal(ckpt__manifest_decode("hello", 5, &m, err), CKPT_E_CORRUPT);
    assert_int_equal(ckpt__manifest_decode("", 0, &m, err), CKPT_E_CORRUPT);
}


/* Format 3: link items and names outside the old alphabet. A manifest
 * that uses neither stays format 1 or 2; one that does is format 3, and a
 * format-1/2 manifest with either is damaged, not misread. */
#define HDR3 "{\"format\":3,\"kind\":\"manifest\",\"step\":\"1\",\"seq\":\"1\",\"epoch\":\"0\"," \
             "\"time_ms\":1,\"rank\":0,\"world_size\":1,\"chunk_bytes\":1048576,"          \
             "\"new_bytes\":0,\"writer\":\"w\",\"items\":"
#define FILEI(n) "{\"name\":\"" n "\",\"kind\":\"file\",\"size\":4,\"elem\":0,\"mode\":384," \
                 "\"chunks\":[[" ID ",4,60]]}"
#define LINKI(n, t) "{\"name\":\"" n "\",\"kind\":\"link\",\"target\":\"" t "\",\"size\":0," \
                    "\"elem\":0,\"mode\":511,\"chunks\":[]}"

static void test_links_format3(void **state)
{
    struct ckpt_manifest m, d;
    char *buf, err[CKPT_ERR_MAX];
    size_t len;
    (void)state;
    make_manifest(&m);
    m.items = realloc(m.items, 3 * sizeof *m.items);
    memset(&m.items[2], 0, sizeof m.items[2]);
    m.nitems = 3;
    m.items[2].name = strdup("last.ckpt");
    m.items[2].kind = CKPT_ITEM_LINK;
    m.items[2].mode = 0777;
    m.items[2].target = strdup("checkpoint-100/model.bin");
    assert_int_equal(ckpt__manifest_format(&m), 3);
    assert_int_equal(ckpt__manifest_encode(&m, &buf, &len), CKPT_OK);
    assert_non_null(strstr(buf, "\"format\":3,"));
    assert_int_equal(ckpt__manifest_decode(buf, len, &d, err), CKPT_OK);
    assert_int_equal(d.version, 3);
    assert_int_equal(d.items[2].kind, CKPT_ITEM_LINK);
    assert_string_equal(d.items[2].target, "checkpoint-100/model.bin");
    assert_int_equal(d.items[2].nchunks, 0);
    ckpt__manifest_free(&d);
    free(buf);
    /* a link to a directory of items, through "..", with "." and a
     * trailing slash on a directory */
    free(m.items[2].name);
    m.items[2].name = strdup("checkpoint-100/sub/up");
    free(m.items[2].target);
    m.items[2].target = strdup("../../checkpoint-100/./");
    assert_int_equal(ckpt__manifest_check(&m, err), CKPT_E_CORRUPT); /* its own directory */
    free(m.items[2].target);
    m.items[2].target = strdup("../model.bin");
    assert_int_equal(ckpt__manifest_check(&m, err), CKPT_OK);
    ckpt__manifest_free(&m);

    /* targets that must be refused: absolute, escaping, dangling, to a
     * link, through a file or a link, at the top, a file named as a
     * directory, control characters, not UTF-8 */
    const char *bad[] = {
        HDR3 "[" FILEI("a") "," LINKI("l", "/etc/passwd") "]}",
        HDR3 "[" FILEI("a") "," LINKI("l", "../a") "]}",
        HDR3 "[" FILEI("d/a") "," LINKI("d/l", "../../d/a") "]}",
        HDR3 "[" FILEI("a") "," LINKI("l", "b") "]}",
        HDR3 "[" FILEI("a") "," LINKI("l", "m") "," LINKI("m", "a") "]}",
        HDR3 "[" FILEI("a") "," FILEI("d/b") "," LINKI("l", "a/../d/b") "]}",
        HDR3 "[" FILEI("d/b") "," LINKI("m", "d") "," LINKI("l", "m/b") "]}",
        HDR3 "[" FILEI("a") "," LINKI("l", ".") "]}",
        HDR3 "[" FILEI("a") "," LINKI("l", "x/..") "]}",
        HDR3 "[" FILEI("a") "," LINKI("l", "a/") "]}",
        HDR3 "[" FILEI("a") "," LINKI("l", "") "]}",
        HDR3 "[" FILEI("a") "," LINKI("l", "a\\u0007") "]}",
        HDR3 "[" FILEI("a") "," LINKI("l", "\\u00ff") "]}",
        HDR3 "[" FILEI("a") "," LINKI("d/l", "..") "]}",
        HDR3 "[" FILEI("a") ",{\"name\":\"l\",\"kind\":\"link\",\"size\":0,\"elem\":0,"
             "\"mode\":511,\"chunks\":[]}]}",                       /* no target */
        HDR3 "[" FILEI("a") ",{\"name\":\"l\",\"kind\":\"link\",\"target\":\"a\",\"size\":4,"
             "\"elem\":0,\"mode\":511,\"chunks\":[[" ID ",4,60]]}]}", /* a link with bytes */
        HDR "[" FILEI("a") "," LINKI("l", "a") "]}",               /* a link in format 1 */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        if (decode_json(bad[i], err) != CKPT_E_CORRUPT)
            fail_msg("case %zu decoded: %s", i, bad[i]);
    }
    const char *good[] = {
        HDR3 "[" FILEI("a") "," LINKI("l", "a") "]}",
        HDR3 "[" FILEI("d/a") "," LINKI("l", "d") "]}",
        HDR3 "[" FILEI("d/a") "," LINKI("l", "d/") "]}",
        HDR3 "[" FILEI("d/a") "," FILEI("e/b") "," LINKI("e/l", "../d//a") "]}",
        HDR3 "[" FILEI("d/a") "," LINKI("e/l", "./../d/a") "]}",
    };
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        if (decode_json(good[i], err) != CKPT_OK)
            fail_msg("case %zu refused (%s): %s", i, err, good[i]);
}

/* Any real file name works (format 3); the old alphabet stays format 1. */
static void test_names_format3(void **state)
{
    char err[CKPT_ERR_MAX];
    (void)state;
    const char *names[] = { "model bin+x.bin", "r\xc3\xa9sum\xc3\xa9.txt",
                            "\xe6\xa8\xa1\xe5\x9e\x8b v2.pt", "a\\b", "x:y;z'q\"" };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        struct ckpt_manifest m, d;
        char *buf;
        size_t len;
        make_manifest(&m);
        free(m.items[1].name);
        m.items[1].name = strdup(names[i]);
        assert_true(ckpt__name_valid(names[i]));
        assert_false(ckpt__name_legacy(names[i]));
        assert_int_equal(ckpt__manifest_encode(&m, &buf, &len), CKPT_OK);
        assert_non_null(strstr(buf, "\"format\":3,"));
        assert_int_equal(ckpt__manifest_decode(buf, len, &d, err), CKPT_OK);
        assert_string_equal(d.items[1].name, names[i]);
        ckpt__manifest_free(&d);
        free(buf);
        ckpt__manifest_free(&m);
    }
    const char *bad[] = { "a\nb", "a\tb", "\x7f", "a\xc2\x85", "\xc0\xaf", "\xed\xa0\x80",
                          "\xf4\x90\x80\x80", "\xe6\xa8", "a/./b", "a//b", "./a" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (ckpt__name_valid(bad[i]))
            fail_msg("name %zu accepted", i);
    /* segments up to 255 bytes, names up to 4095 */
    char longname[5000];
    memset(longname, 'a', 256);
    longname[256] = '\0';
    assert_false(ckpt__name_valid(longname));
    longname[255] = '/';
    memset(longname + 256, 'b', 200);
    longname[456] = '\0';
    assert_true(ckpt__name_valid(longname));
    assert_false(ckpt__name_legacy(longname));
}

/* A name that is also the directory of another cannot be restored (one
 * would be a file, the other needs it as a directory): refused at decode,
 * so verify and restore agree. Names differing after the prefix by a
 * character sorting before '/' must not hide the conflict. */
static void test_item_is_directory(void **state)
{
    char err[CKPT_ERR_MAX];
    (void)state;
    assert_int_equal(decode_json(HDR "[" FILEI("data") "," FILEI("data/a.bin") "]}", err),
                     CKPT_E_CORRUPT);
    assert_non_null(strstr(err, "directory"));
    assert_int_equal(decode_json(HDR "[" FILEI("data/a.bin") "," FILEI("data-x") ","
                                 FILEI("data.y") "," FILEI("data") "]}", err),
                     CKPT_E_CORRUPT);
    assert_int_equal(decode_json(HDR "[" FILEI("data/a.bin") "," FILEI("data-x") ","
                                 FILEI("data.y") "," FILEI("dat") "]}", err),
                     CKPT_OK);
}

/* The fixtures kept in the fuzz corpus: every format this version wrote
 * still reads, and the hostile ones stay refused. */
static void test_corpus_fixtures(void **state)
{
    const char *src = getenv("CKPT_SRC");
    const struct { const char *file; ckpt_status manifest, head; } fx[] = {
        { "manifest-valid-0", CKPT_OK, CKPT_E_CORRUPT },
        { "manifest-valid-1", CKPT_OK, CKPT_E_CORRUPT },
        { "manifest-packs-v2", CKPT_OK, CKPT_E_CORRUPT },
        { "manifest-links-v3", CKPT_OK, CKPT_E_CORRUPT },
        { "manifest-names-v3", CKPT_OK, CKPT_E_CORRUPT },
        { "manifest-link-absolute", CKPT_E_CORRUPT, CKPT_E_CORRUPT },
        { "manifest-link-escape", CKPT_E_CORRUPT, CKPT_E_CORRUPT },
        { "manifest-link-dangling", CKPT_E_CORRUPT, CKPT_E_CORRUPT },
        { "manifest-link-to-link", CKPT_E_CORRUPT, CKPT_E_CORRUPT },
        { "manifest-item-is-dir", CKPT_E_CORRUPT, CKPT_E_CORRUPT },
        { "head-valid", CKPT_E_CORRUPT, CKPT_OK },
        { "head-v3", CKPT_E_CORRUPT, CKPT_OK },
        { "head-damaged-gc", CKPT_E_CORRUPT, CKPT_OK },
        { "head-commit-order-v1", CKPT_E_CORRUPT, CKPT_OK },
        { "gc-record", CKPT_E_CORRUPT, CKPT_E_CORRUPT },
        { "manifest-part-r0-v4", CKPT_OK, CKPT_E_CORRUPT },
        { "manifest-part-r1-v4", CKPT_OK, CKPT_E_CORRUPT },
        { "commit-ranks-v4", CKPT_E_CORRUPT, CKPT_E_CORRUPT },
        { "head-ranks-v4", CKPT_E_CORRUPT, CKPT_OK },
    };
    (void)state;
    if (!src)
        skip();
    for (size_t i = 0; i < sizeof fx / sizeof *fx; i++) {
        char path[1024], err[CKPT_ERR_MAX], buf[1 << 16];
        struct ckpt_manifest m;
        struct ckpt_head h;
        size_t n;
        snprintf(path, sizeof path, "%s/tests/fuzz/corpus/manifest/%s", src, fx[i].file);
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        if (ckpt__manifest_decode(buf, n, &m, err) != fx[i].manifest)
            fail_msg("%s: manifest verdict differs (%s)", fx[i].file, err);
        if (fx[i].manifest == CKPT_OK)
            ckpt__manifest_free(&m);
        if (!strcmp(fx[i].file, "gc-record")) {
            struct ckpt_gc_victims v = { 0 };
            uint64_t bits = 0;
            uint8_t id[CKPT_ID_LEN];
            assert_int_equal(ckpt__gc_record_decode(buf, n, &v, err), CKPT_OK);
            assert_int_equal(ckpt__unhex("00112233445566778899aabbccddeeff", id, CKPT_ID_LEN), 0);
            assert_true(ckpt__idset_get(&v.objs, id, &bits) && bits == 1u << CKPT_OBJ_CHUNK);
            assert_int_equal(v.nmanifests, 1);
            ckpt__gc_victims_free(&v);
        }
        if (ckpt__head_decode(buf, n, &h, err) != fx[i].head)
            fail_msg("%s: HEAD verdict differs (%s)", fx[i].file, err);
        if (fx[i].head == CKPT_OK) {
            /* entries in the resume order, whatever order they were written in */
            for (size_t k = 1; k < h.n; k++)
                assert_true(h.entries[k - 1].step >= h.entries[k].step);
            if (!strcmp(fx[i].file, "head-damaged-gc")) {
                assert_int_equal(h.rev, 12);
                assert_int_equal(h.ndamaged, 1);
                assert_int_equal(h.damaged[0].step, 400);
                assert_int_equal(h.ngc, 1);
            }
            ckpt__head_free(&h);
        }
    }
}

static void test_head_roundtrip(void **state)
{
    struct ckpt_head h = { 0 }, d;
    struct ckpt_head_entry e[2] = {
        { "manifests/00000000000000000002_00000000000000000020_0000000000.ckm", 20, 2, 0, 0, 0 },
        { "manifests/00000000000000000001_00000000000000000010_0000000000.ckm", 10, 1, 0, 0, 0 },
    };
    char *buf, err[CKPT_ERR_MAX];
    size_t len;
    (void)state;
    h.seq = 2;
    h.step = 20;
    h.n = 2;
    h.entries = e;
    assert_int_equal(ckpt__head_encode(&h, &buf, &len), CKPT_OK);
    assert_int_equal(ckpt__head_decode(buf, len, &d, err), CKPT_OK);
    assert_int_equal(d.n, 2);
    assert_string_equal(d.entries[1].manifest, e[1].manifest);
    assert_int_equal(d.entries[0].step, 20);
    ckpt__head_free(&d);
    for (size_t i = 0; i < len; i++) {
        buf[i] ^= 0x20;
        assert_int_not_equal(ckpt__head_decode(buf, len, &d, err), CKPT_OK);
        buf[i] ^= 0x20;
    }
    free(buf);
    /* entries must point inside manifests/ */
    const char *evil = "{\"format\":1,\"kind\":\"head\",\"seq\":\"1\",\"step\":\"1\",\"epoch\":\"0\","
                       "\"time_ms\":0,\"retained\":[{\"manifest\":\"../../etc/x\",\"step\":\"1\","
                       "\"seq\":\"1\"}]}";
    buf = ckpt__envelope_seal(evil, &len);
    assert_int_equal(ckpt__head_decode(buf, len, &d, err), CKPT_E_CORRUPT);
    free(buf);
}

static void test_names_and_keys(void **state)
{
    (void)state;
    assert_true(ckpt__name_valid("checkpoint-100/model.safetensors"));
    assert_true(ckpt__name_valid("epoch=1-step=300.ckpt"));
    assert_false(ckpt__name_valid("../a"));
    assert_false(ckpt__name_valid("a/.."));
    assert_false(ckpt__name_valid("/a"));
    assert_false(ckpt__name_valid(NULL));
    assert_true(ckpt_key_valid("run/chunks/ab/abcd"));
    assert_false(ckpt_key_valid("run/../x"));
    assert_false(ckpt_key_valid("/run"));
    assert_false(ckpt_key_valid("run//x"));
    assert_false(ckpt_key_valid("run/x/"));
    assert_false(ckpt_key_valid("run/a b"));
    char k[256];
    ckpt__manifest_key("r", 1, 2, 3, 0xabc, k, sizeof k);
    assert_string_equal(k, "r/manifests/00000000000000000001_00000000000000000002_0000000003_"
                           "00000abc.ckm");
}

/* Keys of a run's objects and the id sets built from them. */
static void test_object_keys_and_sets(void **state)
{
    uint8_t id[CKPT_ID_LEN], back[CKPT_ID_LEN], other[CKPT_ID_LEN] = { 1 };
    struct ckpt_idset set;
    char key[256], *big;
    cJSON *root;
    uint64_t v;
    (void)state;
    for (int i = 0; i < CKPT_ID_LEN; i++)
        id[i] = (uint8_t)(0xa0 + i);
    ckpt__object_key("r", CKPT_OBJ_PACK, id, key, sizeof key);
    assert_string_equal(key, "r/packs/a0/a0a1a2a3a4a5a6a7a8a9aaabacadaeaf");
    ckpt__chunk_key("r", id, key, sizeof key);
    assert_string_equal(key, "r/chunks/a0/a0a1a2a3a4a5a6a7a8a9aaabacadaeaf");
    assert_int_equal(ckpt__key_id(key, back), 0);
    assert_memory_equal(back, id, CKPT_ID_LEN);
    assert_int_equal(ckpt__key_id("r/chunks/a0/a0a1", back), -1);
    assert_int_equal(ckpt__key_id("r/gc/A0A1A2A3A4A5A6A7A8A9AAABACADAEAF", back), -1);

    /* an object set holds a bit per kind of object with an id */
    ckpt__idset_init(&set);
    assert_false(ckpt__objset_has(&set, id, CKPT_OBJ_CHUNK));
    assert_int_equal(ckpt__objset_add(&set, id, CKPT_OBJ_PACK), 0);
    assert_false(ckpt__objset_has(&set, id, CKPT_OBJ_CHUNK));
    assert_true(ckpt__objset_has(&set, id, CKPT_OBJ_PACK));
    assert_int_equal(ckpt__objset_add(&set, id, CKPT_OBJ_CHUNK), 0);
    assert_true(ckpt__objset_has(&set, id, CKPT_OBJ_CHUNK));
    /* an update never adds */
    assert_int_equal(ckpt__idset_update(&set, id, 42), 1);
    assert_true(ckpt__idset_get(&set, id, &v) && v == 42);
    assert_int_equal(ckpt__idset_update(&set, other, 1), 0);
    assert_int_equal(set.n, 1);
    ckpt__idset_free(&set);

    /* a sealed record larger than its bound is refused before it is parsed */
    big = ckpt__envelope_seal("{\"kind\":\"head\"}", &(size_t){ 0 });
    assert_int_equal(ckpt__envelope_parse(big, strlen(big), 8, "HEAD", &root, key),
                     CKPT_E_CORRUPT);
    assert_null(root);
    assert_non_null(strstr(key, "HEAD too large"));
    assert_int_equal(ckpt__envelope_parse(big, strlen(big), 1024, "HEAD", &root, key), CKPT_OK);
    assert_true(cJSON_IsObject(root));
    cJSON_Delete(root);
    free(big);
}

static ckpt_status read_fixture(const char *name, char *buf, size_t cap, size_t *n)
{
    const char *src = getenv("CKPT_SRC");
    char path[1024];
    FILE *f;
    /* *n is the caller's to read whatever happens: no size is 0 bytes */
    *n = 0;
    snprintf(path, sizeof path, "%s/tests/fuzz/corpus/manifest/%s", src, name);
    f = fopen(path, "rb");
    if (!f)
        return CKPT_E_NOENT;
    *n = fread(buf, 1, cap, f);
    fclose(f);
    return CKPT_OK;
}

/* Format 4: a 2-rank global checkpoint as written (two part manifests, the
 * commit record, HEAD): the parts compose into each rank's view, the
 * replicated item assembled from both; parts that disagree do not. */
static void test_ranks_format4(void **state)
{
    static char buf[3][1 << 16];
    size_t n[3];
    struct ckpt_commit_rec rec;
    struct ckpt_manifest p[2], gm;
    struct ckpt_head h;
    char err[CKPT_ERR_MAX];
    const char *keys[2];
    (void)state;
    if (!getenv("CKPT_SRC"))
        skip();
    assert_int_equal(read_fixture("commit-ranks-v4", buf[0], sizeof buf[0], &n[0]), CKPT_OK);
    assert_int_equal(read_fixture("manifest-part-r0-v4", buf[1], sizeof buf[1], &n[1]), CKPT_OK);
    assert_int_equal(read_fixture("manifest-part-r1-v4", buf[2], sizeof buf[2], &n[2]), CKPT_OK);
    assert_int_equal(ckpt__commit_rec_decode(buf[0], n[0], &rec, err), CKPT_OK);
    assert_int_equal(rec.world_size, 2);
    assert_int_equal(rec.nrep, 1);
    assert_string_equal(rec.rep_names[0], "weights");
    for (unsigned view = 0; view < 2; view++) {
        for (int r = 0; r < 2; r++) {
            assert_int_equal(ckpt__manifest_decode(buf[1 + r], n[1 + r], &p[r], err), CKPT_OK);
            assert_int_equal(p[r].version, 4);
            assert_int_equal(p[r].rank, (unsigned)r);
            keys[r] = rec.parts[r];
        }
        assert_int_equal(ckpt__parts_compose(p, 2, keys, &rec, view, &gm, err), CKPT_OK);
        assert_int_equal(gm.world_size, 2);
        assert_int_equal(gm.rank, view);
        assert_int_equal(gm.nitems, 2);  /* weights (assembled) and this rank's shard */
        assert_int_equal(gm.nothers, 1); /* the other rank's shard */
        assert_string_equal(gm.items[0].name, "weights");
        assert_int_equal(gm.items[0].nchunks, 2);
        assert_int_equal(gm.nparts, 2);
        {
            struct ckpt_idlist ids;
            assert_int_equal(ckpt__manifest_objects(&gm, &ids), 0);
            assert_int_equal(ids.n, 6); /* 2 shards x 2 chunks, 2 weights chunks */
            assert_int_equal(ids.nkeys, 2);
            ckpt__idlist_free(&ids);
        }
        ckpt__manifest_free(&gm);
        ckpt__manifest_free(&p[0]);
        ckpt__manifest_free(&p[1]);
    }
    /* a part that says other bytes for the replicated item */
    assert_int_equal(ckpt__manifest_decode(buf[1], n[1], &p[0], err), CKPT_OK);
    assert_int_equal(ckpt__manifest_decode(buf[2], n[2], &p[1], err), CKPT_OK);
    p[1].items[1].digest ^= 1;
    assert_int_equal(ckpt__parts_compose(p, 2, keys, &rec, 0, &gm, err), CKPT_E_CORRUPT);
    assert_non_null(strstr(err, "replicated item weights"));
    ckpt__manifest_free(&p[0]);
    ckpt__manifest_free(&p[1]);
    /* parts that agree on the digest but whose chunk ids do not hash to it */
    assert_int_equal(ckpt__manifest_decode(buf[1], n[1], &p[0], err), CKPT_OK);
    assert_int_equal(ckpt__manifest_decode(buf[2], n[2], &p[1], err), CKPT_OK);
    p[1].items[1].chunks[0].id[0] ^= 1;
    assert_int_equal(ckpt__parts_compose(p, 2, keys, &rec, 0, &gm, err), CKPT_E_CORRUPT);
    assert_non_null(strstr(err, "do not match its digest"));
    ckpt__manifest_free(&p[0]);
    ckpt__manifest_free(&p[1]);
    /* a part of another rank in rank 1's place */
    assert_int_equal(ckpt__manifest_decode(buf[1], n[1], &p[0], err), CKPT_OK);
    assert_int_equal(ckpt__manifest_decode(buf[1], n[1], &p[1], err), CKPT_OK);
    assert_int_equal(ckpt__parts_compose(p, 2, keys, &rec, 0, &gm, err), CKPT_E_CORRUPT);
    ckpt__manifest_free(&p[0]);
    ckpt__manifest_free(&p[1]);
    /* HEAD names the record, format 4, with the world size */
    assert_int_equal(read_fixture("head-ranks-v4", buf[1], sizeof buf[1], &n[1]), CKPT_OK);
    assert_int_equal(ckpt__head_decode(buf[1], n[1], &h, err), CKPT_OK);
    assert_int_equal(h.version, 4);
    assert_int_equal(h.entries[0].world_size, 2);
    assert_true(ckpt__is_commit_key(h.entries[0].manifest));
    ckpt__head_free(&h);
    ckpt__commit_rec_free(&rec);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_manifest_roundtrip),
        cmocka_unit_test(test_manifest_packs_roundtrip),
        cmocka_unit_test(test_manifest_hostile),
        cmocka_unit_test(test_links_format3),
        cmocka_unit_test(test_names_format3),
        cmocka_unit_test(test_item_is_directory),
        cmocka_unit_test(test_corpus_fixtures),
        cmocka_unit_test(test_ranks_format4),
        cmocka_unit_test(test_head_roundtrip),
        cmocka_unit_test(test_names_and_keys),
        cmocka_unit_test(test_object_keys_and_sets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
