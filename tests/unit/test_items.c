/* test_items.c -- the listing APIs of `ckptrun ls` (ckpt.h, "Administration"):
 * ckpt_items() on a checkpoint of a region, files and a link (kinds,
 * sizes, stored bytes adding up to ckpt_list's, the step asked for), and
 * ckpt_head_parse() on the HEADs of the fixtures and on damage. */
#define TEST_STORE_FIXTURE
#include "test_util.h"
#include "ckpt.h"

struct got {
    char name[8][64], target[64];
    ckpt_item_kind kind[8];
    uint64_t size[8], stored[8], chunks[8];
    unsigned part[8];
    int replicated[8];
    size_t n;
};

static int item_cb(void *user, const struct ckpt_item_info *it)
{
    struct got *g = user;
    assert_true(g->n < 8);
    snprintf(g->name[g->n], sizeof g->name[0], "%s", it->name);
    g->kind[g->n] = it->kind;
    g->size[g->n] = it->size;
    g->stored[g->n] = it->stored_bytes;
    g->chunks[g->n] = it->chunks;
    g->part[g->n] = it->part;
    g->replicated[g->n] = it->replicated;
    if (it->target)
        snprintf(g->target, sizeof g->target, "%s", it->target);
    g->n++;
    return 0;
}

static int info_cb(void *user, const struct ckpt_info *i)
{
    if (i->step == 2)
        *(uint64_t *)user = i->stored_bytes;
    return 0;
}

static size_t find(const struct got *g, const char *name)
{
    for (size_t i = 0; i < g->n; i++)
        if (strcmp(g->name[i], name) == 0)
            return i;
    fail_msg("item %s not listed", name);
    return 0;
}

static void test_items(void **state)
{
    struct ckpt_config cfg = CKPT_CONFIG_INIT;
    struct ckpt_ctx *ctx = NULL;
    static uint8_t region[200000], zeros[70000];
    char path[800];
    struct got g;
    uint64_t listed = 0, sum = 0;
    FILE *f;
    (void)state;

    for (size_t i = 0; i < sizeof region; i++)
        region[i] = (uint8_t)(i * 2654435761u >> 13);
    snprintf(path, sizeof path, "%s/w.bin", g_dir);
    f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(zeros, 1, sizeof zeros, f), sizeof zeros);
    fclose(f);
    cfg.store = g_url;
    cfg.run = "items";
    cfg.chunk_bytes = 64 << 10;
    cfg.no_control = 1;
    assert_int_equal(ckpt_open(&cfg, &ctx), CKPT_OK);
    assert_int_equal(ckpt_protect(ctx, "state", region, sizeof region), CKPT_OK);
    assert_int_equal(ckpt_protect_file(ctx, "ck/w.bin", path), CKPT_OK);
    assert_int_equal(ckpt_protect_link(ctx, "last", "ck/w.bin"), CKPT_OK);
    assert_int_equal(ckpt_save(ctx, 1), CKPT_OK);
    assert_int_equal(ckpt_wait(ctx), CKPT_OK);
    region[0] ^= 1;
    assert_int_equal(ckpt_save(ctx, 2), CKPT_OK);
    assert_int_equal(ckpt_wait(ctx), CKPT_OK);

    memset(&g, 0, sizeof g);
    assert_int_equal(ckpt_items(ctx, 2, CKPT_PART_ALL, item_cb, &g), CKPT_OK);
    assert_int_equal(g.n, 3);
    size_t s = find(&g, "state"), w = find(&g, "ck/w.bin"), l = find(&g, "last");
    assert_int_equal(g.kind[s], CKPT_KIND_REGION);
    assert_int_equal(g.size[s], sizeof region);
    assert_int_equal(g.chunks[s], 4); /* 200000 bytes in 64 KiB chunks */
    assert_int_equal(g.kind[w], CKPT_KIND_FILE);
    assert_int_equal(g.size[w], sizeof zeros);
    /* 70000 zeros: two chunks, 64 KiB and 4464 bytes */
    assert_int_equal(g.chunks[w], 2);
    assert_true(g.stored[w] > 0 && g.stored[w] < 2000); /* zeros compress */
    assert_int_equal(g.kind[l], CKPT_KIND_LINK);
    assert_int_equal((int)g.size[l], 0);
    assert_int_equal((int)g.chunks[l], 0);
    assert_string_equal(g.target, "ck/w.bin");
    for (size_t i = 0; i < g.n; i++) {
        assert_int_equal(g.part[i], 0);
        assert_int_equal(g.replicated[i], 0);
        sum += g.stored[i];
    }
    /* no chunk shared between items here: the items' stored bytes are the
     * checkpoint's */
    assert_int_equal(ckpt_list(ctx, info_cb, &listed), CKPT_OK);
    assert_int_equal(sum, listed);
    /* the newest, and a step that is not there */
    memset(&g, 0, sizeof g);
    assert_int_equal(ckpt_items(ctx, CKPT_STEP_LATEST, CKPT_PART_ALL, item_cb, &g), CKPT_OK);
    assert_int_equal(g.n, 3);
    assert_int_equal(ckpt_items(ctx, 7, CKPT_PART_ALL, item_cb, &g), CKPT_E_NOENT);
    assert_non_null(strstr(ckpt_errmsg(ctx), "no committed checkpoint at step 7"));
    assert_int_equal(ckpt_items(ctx, 2, CKPT_PART_ALL, NULL, &g), CKPT_E_INVAL);
    assert_int_equal(ckpt_items(NULL, 2, CKPT_PART_ALL, item_cb, &g), CKPT_E_INVAL);
    ckpt_close(ctx);
}

static ckpt_status parse_fixture(const char *name, struct ckpt_head_info *h)
{
    const char *src = getenv("CKPT_SRC");
    char path[1024], buf[1 << 16];
    size_t n;
    FILE *f;
    snprintf(path, sizeof path, "%s/tests/fuzz/corpus/manifest/%s", src, name);
    f = fopen(path, "rb");
    assert_non_null(f);
    n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    return ckpt_head_parse(buf, n, h);
}

static void test_head_parse(void **state)
{
    struct ckpt_head_info h;
    const char *bad_sum = "{\"format\":9,\"kind\":\"head\"}\n#xxh64:0000000000000000\n";
    (void)state;
    if (!getenv("CKPT_SRC"))
        skip();
    assert_int_equal(parse_fixture("head-ranks-v4", &h), CKPT_OK);
    assert_int_equal(h.step, 40);
    assert_int_equal(h.checkpoints, 1);
    assert_int_equal(h.format, 4);
    assert_int_equal(h.epoch, 3);
    assert_int_equal(h.time_ms, 1796218732887);
    assert_int_equal(parse_fixture("head-damaged-gc", &h), CKPT_OK);
    assert_true(h.damaged > 0);
    /* not a HEAD, a manifest, garbage */
    assert_int_equal(parse_fixture("manifest-valid-0", &h), CKPT_E_CORRUPT);
    assert_int_equal(parse_fixture("garbage", &h), CKPT_E_CORRUPT);
    assert_int_equal(ckpt_head_parse("", 0, &h), CKPT_E_CORRUPT);
    /* a text whose checksum does not match it */
    assert_int_equal(ckpt_head_parse(bad_sum, strlen(bad_sum), &h), CKPT_E_CORRUPT);
    assert_int_equal(ckpt_head_parse(NULL, 1, &h), CKPT_E_INVAL);
    assert_int_equal(ckpt_head_parse(bad_sum, 1, NULL), CKPT_E_INVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_items),
        cmocka_unit_test(test_head_parse),
    };
    return cmocka_run_group_tests(tests, store_setup, store_teardown);
}
