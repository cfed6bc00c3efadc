/*
 * fuzz_notice.c -- fuzz target for the notice reply and time parsers.
 *
 * The first byte picks the parser, the rest is the reply body. Built with
 * -fsanitize=fuzzer it is a libFuzzer target; built with
 * -DFUZZ_REPLAY_MAIN it is a driver that replays the files named on the
 * command line (or every file in the directories named), so the corpus runs
 * under ctest without a fuzzing engine.
 *
 * Invariants checked beyond "no crash": a result is -1, 0 or 1; a notice has
 * a deadline that is 0 only for a rebalance; the strings are terminated.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "notice/notice.h"
#include "notice/provider.h"
#include "notice/parse.h"
#include "notice/aws.h"
#include "notice/gcp.h"
#include "notice/azure.h"
#include "notice/aliyun.h"
#include "notice/tencent.h"
#include "notice/table.h"

#define NOW_MS 1505722800000LL /* fixed clock: results must not depend on the run */

typedef int (*parser)(const char *, size_t, int64_t, struct notice_event *);

static int time_iso(const char *s, size_t n, int64_t now, struct notice_event *ev)
{
    int64_t ms;
    (void)now;
    (void)ev;
    return notice_parse_iso8601(s, n, &ms) == 0 ? 0 : -1;
}
static int time_rfc(const char *s, size_t n, int64_t now, struct notice_event *ev)
{
    int64_t ms;
    (void)now;
    (void)ev;
    return notice_parse_rfc1123(s, n, &ms) == 0 ? 0 : -1;
}
static int time_tc(const char *s, size_t n, int64_t now, struct notice_event *ev)
{
    int64_t ms;
    (void)now;
    (void)ev;
    return notice_parse_tencent(s, n, &ms) == 0 ? 0 : -1;
}

/* Providers added after the first five are reached through the table. */
static int volcengine(const char *s, size_t n, int64_t now, struct notice_event *ev)
{
    return notice_provider_find("volcengine")->paths[0].parse(s, n, now, ev);
}

/* Indexed by the input's first byte: new entries go at the end, so every
 * corpus file keeps its parser. */
static const struct {
    parser fn;
    int reply; /* a reply parser: *ev is checked too */
} parsers[] = {
    { notice_parse_aws_action, 1 },
    { notice_parse_aws_termtime, 1 },
    { notice_parse_aws_rebalance, 1 },
    { notice_parse_gcp_preempted, 1 },
    { notice_parse_gcp_maintenance, 1 },
    { notice_parse_azure, 1 },
    { notice_parse_aliyun, 1 },
    { notice_parse_tencent_reply, 1 },
    { time_iso, 0 },
    { time_rfc, 0 },
    { time_tc, 0 },
    { volcengine, 1 }, /* 11 */
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct notice_event ev;
    char *copy;
    int r;
    size_t which;

    if (size < 1)
        return 0;
    which = data[0] % (sizeof parsers / sizeof parsers[0]);
    /* An exact-size heap copy lets ASan catch any read past the body. */
    copy = malloc(size - 1 ? size - 1 : 1);
    if (!copy)
        return 0;
    memcpy(copy, data + 1, size - 1);
    memset(&ev, 0x5a, sizeof ev);
    r = parsers[which].fn(copy, size - 1, NOW_MS, &ev);
    if (r < -1 || r > 1)
        abort();
    if (parsers[which].reply) {
        if (!memchr(ev.detail, 0, sizeof ev.detail) || !memchr(ev.id, 0, sizeof ev.id))
            abort();
        if (r == 1 && ev.deadline_ms == 0 && ev.kind != NOTICE_REBALANCE)
            abort();
    }
    free(copy);
    return 0;
}

#ifdef FUZZ_REPLAY_MAIN
static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    long n;
    int ret = -1;
    if (!f)
        goto out;
    if (fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET))
        goto out;
    buf = malloc((size_t)n + 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n)
        goto out;
    LLVMFuzzerTestOneInput(buf, (size_t)n);
    ret = 0;
out:
    if (ret)
        fprintf(stderr, "cannot read %s\n", path);
    free(buf);
    if (f)
        fclose(f);
    return ret;
}

int main(int argc, char **argv)
{
    int i, files = 0, bad = 0;
    for (i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            DIR *d = opendir(argv[i]);
            struct dirent *e;
            while (d && (e = readdir(d))) {
                char p[4096];
                if (e->d_name[0] == '.')
                    continue;
                snprintf(p, sizeof p, "%s/%s", argv[i], e->d_name);
                bad |= run_file(p);
                files++;
            }
            if (d)
                closedir(d);
        } else {
            bad |= run_file(argv[i]);
            files++;
        }
    }
    printf("replayed %d inputs\n", files);
    return bad || files == 0 ? 1 : 0;
}
#endif
