/* replay_main.c -- runs a fuzz target over every file of a corpus directory
 * without a fuzzing engine, so ctest replays the corpus on every build.
 * Build the same target with -fsanitize=fuzzer (and without this file) to
 * fuzz for real: see docs/testing.md. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv)
{
    int n = 0;
    for (int a = 1; a < argc; a++) {
        DIR *d = opendir(argv[a]);
        struct dirent *de;
        if (!d) {
            perror(argv[a]);
            return 1;
        }
        while ((de = readdir(d))) {
            char path[4096];
            FILE *f;
            uint8_t *buf;
            long len;
            if (de->d_name[0] == '.')
                continue;
            snprintf(path, sizeof path, "%s/%s", argv[a], de->d_name);
            f = fopen(path, "rb");
            if (!f)
                continue;
            fseek(f, 0, SEEK_END);
            len = ftell(f);
            fseek(f, 0, SEEK_SET);
            buf = malloc(len > 0 ? (size_t)len : 1);
            if (buf && fread(buf, 1, (size_t)len, f) == (size_t)len) {
                LLVMFuzzerTestOneInput(buf, (size_t)len);
                n++;
            }
            free(buf);
            fclose(f);
        }
        closedir(d);
    }
    printf("replayed %d inputs\n", n);
    return n > 0 ? 0 : 1;
}
