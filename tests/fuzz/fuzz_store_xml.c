/* fuzz_store_xml.c -- the XML front end the object stores read replies with
 * (uploaders/xml.c): any input must parse or be refused, within the limits,
 * without crashing or reading out of bounds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "xml.h"

static int visit(void *user, const char *path, const char *text, size_t len)
{
    size_t *total = user;

    /* Touch what the backends touch: the whole path and the whole text. */
    *total += strlen(path) + len + (len ? (unsigned char)text[len - 1] : 0);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t total = 0;
    char code[128];
    char *buf = NULL, *esc = NULL;
    size_t elen = 0, ecap = 0;

    ckpt__xml_parse((const char *)data, size, visit, &total);
    ckpt__xml_find((const char *)data, size, "Error/Code", code, sizeof(code));
    buf = malloc(size + 1);
    if (buf) {
        memcpy(buf, data, size);
        buf[size] = '\0';
        ckpt__xml_escape_append(&esc, &elen, &ecap, buf);
    }
    free(esc);
    free(buf);
    return 0;
}
