/* fuzz_manifest.c -- manifests and HEAD objects come from the store: hostile. */
#include <stdlib.h>
#include <string.h>
#include "internal.h"

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
    if (ckpt__head_decode(data, size, &h, err) == CKPT_OK)
        ckpt__head_free(&h);
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
        free(sealed);
    }
    free(copy);
    return 0;
}
