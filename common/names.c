/* names.c -- run names (ckpt_common.h). */
#include <string.h>

#include "ckpt_common.h"

static int name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == '-';
}

int ckpt__run_name_ok(const char *name, int creating)
{
    size_t n = name ? strlen(name) : 0;
    int ok = 0;

    if (n == 0 || n > (creating ? CKPT_RUN_NAME_MAX_NEW : CKPT_RUN_NAME_MAX_OPEN))
        goto out;
    if (!strcmp(name, ".") || !strcmp(name, ".."))
        goto out;
    if (creating && name[0] == '.')
        goto out;
    for (size_t i = 0; i < n; i++)
        if (!name_char(name[i]))
            goto out;
    ok = 1;
out:
    return ok;
}

int ckpt__name_sanitize(const char *in, char *out, size_t n)
{
    size_t j = 0;
    int rc = -1;

    while (*in == '.')
        in++;
    for (; *in && j + 1 < n && j < CKPT_RUN_NAME_MAX_NEW; in++)
        out[j++] = name_char(*in) ? *in : '_';
    if (*in || j == 0)
        goto out; /* too long, or nothing left */
    out[j] = '\0';
    rc = 0;
out:
    return rc;
}
