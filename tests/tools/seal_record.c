/* seal_record -- what a hostile (or broken) store can do to a record of a
 * run: its JSON edited and sealed again, the checksum right, the content
 * not. Tests edit a manifest's or HEAD's JSON with the tools they have and
 * seal it with this (XXH64, as every record of docs/FORMAT.md).
 *
 *   seal_record < TEXT > RECORD    TEXT: the JSON (a trailing newline is
 *                                  dropped); RECORD: TEXT + "\n#xxh64:..\n" */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/envelope.h"

int main(void)
{
    size_t cap = 1 << 16, n = 0, len, r;
    char *text = malloc(cap + 1), *sealed;
    while (text && (r = fread(text + n, 1, cap - n, stdin)) > 0) {
        n += r;
        if (n == cap) {
            char *t = realloc(text, 2 * cap + 1);
            if (!t)
                break;
            text = t;
            cap *= 2;
        }
    }
    if (!text || ferror(stdin)) {
        fprintf(stderr, "seal_record: cannot read the text\n");
        return 1;
    }
    while (n > 0 && text[n - 1] == '\n')
        n--;
    text[n] = '\0';
    sealed = ckpt__envelope_seal(text, &len);
    if (!sealed || fwrite(sealed, 1, len, stdout) != len) {
        fprintf(stderr, "seal_record: cannot write the record\n");
        return 1;
    }
    free(sealed);
    free(text);
    return 0;
}
