/* fuzz_manifest.c -- manifests, HEAD objects and gc records come from the
 * store: hostile. (A dictionary of their field names: manifest.dict.) */
#include <stdlib.h>
#include <string.h>
#include "format/envelope.h"
#include "format/gcrecord.h"
#include "run/globalckpt.h"
#include "format/head.h"
#include "format/manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ckpt_manifest m;
    struct ckpt_head h;
    char err[CKPT_ERR_MAX];
    char *copy;
    size_t clen;
    if (ckpt__manifest_decode(data, size, &m, err) == CKPT_OK) {
        /* whatever decodes must re-encode and decode to the same shape */
        char *buf;
        size_t len;
        if (ckpt__manifest_encode(&m, &buf, &len) == CKPT_OK) {
            struct ckpt_manifest m2;
            if (ckpt__manifest_decode(buf, len, &m2, err) != CKPT_OK || m2.nitems != m.nitems ||
                m2.version != ckpt__manifest_format(&m))
                abort();
            for (size_t i = 0; i < m.nitems; i++)
                if (strcmp(m2.items[i].name, m.items[i].name) ||
                    m2.items[i].kind != m.items[i].kind ||
                    (m.items[i].kind == CKPT_ITEM_LINK &&
                     strcmp(m2.items[i].target, m.items[i].target)))
                    abort();
            ckpt__manifest_free(&m2);
            free(buf);
        }
        ckpt__manifest_free(&m);
    }
    if (ckpt__head_decode(data, size, &h, err) == CKPT_OK) {
        /* HEAD too: what decodes re-encodes to the same entries, in order */
        char *buf;
        size_t len;
        if (ckpt__head_encode(&h, &buf, &len) == CKPT_OK) {
            struct ckpt_head h2;
            if (ckpt__head_decode(buf, len, &h2, err) != CKPT_OK || h2.n != h.n ||
                h2.ndamaged != h.ndamaged || h2.ngc != h.ngc || h2.rev != h.rev)
                abort();
            for (size_t i = 0; i < h.n; i++)
                if (strcmp(h2.entries[i].manifest, h.entries[i].manifest) ||
                    (i && h.entries[i].step > h.entries[i - 1].step))
                    abort(); /* the resume order: highest step first */
            ckpt__head_free(&h2);
            free(buf);
        }
        ckpt__head_free(&h);
    }
    {
        /* commit records of multi-rank checkpoints (format 4): what decodes
         * re-encodes to the same parts and replicated digests */
        struct ckpt_commit_rec r;
        if (ckpt__commit_rec_decode(data, size, &r, err) == CKPT_OK) {
            char *buf;
            size_t len;
            if (ckpt__commit_rec_encode(&r, &buf, &len) == CKPT_OK) {
                struct ckpt_commit_rec r2;
                if (ckpt__commit_rec_decode(buf, len, &r2, err) != CKPT_OK ||
                    r2.world_size != r.world_size || r2.nrep != r.nrep || r2.step != r.step)
                    abort();
                for (size_t i = 0; i < r.world_size; i++)
                    if (strcmp(r2.parts[i], r.parts[i]))
                        abort();
                for (size_t i = 0; i < r.nrep; i++)
                    if (strcmp(r2.rep_names[i], r.rep_names[i]) ||
                        r2.rep_digests[i] != r.rep_digests[i])
                        abort();
                ckpt__commit_rec_free(&r2);
                free(buf);
            }
            ckpt__commit_rec_free(&r);
        }
    }
    {
        struct ckpt_gc_victims v = { 0 };
        ckpt__gc_record_decode(data, size, &v, err);
        ckpt__gc_victims_free(&v);
    }
    /* also try the input as a bare JSON body, sealed, to reach the checks */
    copy = malloc(size + 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    copy[size] = '\0';
    char *sealed = ckpt__envelope_seal(copy, &clen);
    if (sealed) {
        if (ckpt__manifest_decode(sealed, clen, &m, err) == CKPT_OK)
            ckpt__manifest_free(&m);
        if (ckpt__head_decode(sealed, clen, &h, err) == CKPT_OK)
            ckpt__head_free(&h);
        {
            struct ckpt_gc_victims v = { 0 };
            ckpt__gc_record_decode(sealed, clen, &v, err);
            ckpt__gc_victims_free(&v);
        }
        free(sealed);
    }
    free(copy);
    return 0;
}
