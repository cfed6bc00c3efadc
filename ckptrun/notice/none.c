/*
 * notice/none.c -- the poller's transport in a build without libcurl
 * (notice/net.h): nothing to poll with. notice_available() says so, and
 * notice_start() and notice_probe() then poll nothing: a provider asked for
 * by name is told once that this build cannot poll it, and `auto` finds
 * nothing to poll, as on a machine with no known vendor. The table, the
 * reply parsers and doctor's hints are there all the same.
 */
#include "notice/int.h"
#include "notice/net.h"

#include <stdio.h>
#include <string.h>

#define NO_CURL "cloud notices need libcurl, which this build lacks"

int notice_available(void)
{
    return 0;
}

struct ckpt_http *notice_http_new(void)
{
    return NULL;
}

void notice_http_cancel(struct ckpt_http *h)
{
    (void)h;
}

void notice_http_free(struct ckpt_http *h)
{
    (void)h;
}

int notice_http(struct ckpt_http *h, const char *method, const char *url, const char *const *hdrs,
                const char *body, long timeout_ms, size_t max, struct notice_reply *r)
{
    (void)h, (void)method, (void)url, (void)hdrs, (void)body, (void)timeout_ms, (void)max;
    memset(r, 0, sizeof *r);
    snprintf(r->err, sizeof r->err, NO_CURL);
    r->unreachable = 1;
    return -1;
}

struct ckpt_imds *notice_imds(const char *base)
{
    (void)base;
    return NULL;
}

int notice_imds_get(struct ckpt_imds *m, const char *path, long timeout_ms, size_t max,
                    struct notice_reply *r)
{
    (void)m;
    return notice_http(NULL, "GET", path, NULL, NULL, timeout_ms, max, r);
}
