/* notice/net.c -- the poller's and the probe's transport (notice/net.h):
 * HTTP on the shared client (http.h) and the shared IMDSv2 client, in a
 * build with libcurl (notice/none.c otherwise). */
#include "notice/int.h"
#include "ckpt_http.h"
#include "notice/net.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_HDRS 8

int notice_available(void)
{
    return 1;
}

struct ckpt_http *notice_http_new(void)
{
    /* Metadata never goes through a proxy (DESIGN.md §3); a handful of
     * requests at once at most (GCP's two long polls, an acknowledgement). */
    struct ckpt_http_opts o = { .max_handles = 4, .connect_timeout_ms = CONNECT_MS, .no_proxy = 1 };
    return ckpt__http_new(&o);
}

/* The ETag of a reply, kept only if it is a plain token: it goes back into
 * a URL. */
void notice_http_cancel(struct ckpt_http *h)
{
    ckpt__http_cancel(h);
}

void notice_http_free(struct ckpt_http *h)
{
    ckpt__http_free(h);
}

static void plain_etag(const struct ckpt_http_resp *resp, char *out, size_t n)
{
    char v[160];
    size_t i;

    out[0] = '\0';
    if (!ckpt__http_header(resp, "ETag", v, sizeof v) || strlen(v) >= n)
        return;
    for (i = 0; v[i]; i++)
        if (!((v[i] >= '0' && v[i] <= '9') || (v[i] >= 'a' && v[i] <= 'z') ||
              (v[i] >= 'A' && v[i] <= 'Z') || v[i] == '-' || v[i] == '_'))
            return;
    memcpy(out, v, i + 1);
}

int notice_http(struct ckpt_http *h, const char *method, const char *url, const char *const *hdrs,
                const char *body, long timeout_ms, size_t max, struct notice_reply *r)
{
    const char *hv[MAX_HDRS];
    struct ckpt_http_req req;
    struct ckpt_http_resp resp;
    void *b = NULL;
    ckpt_status st;
    size_t nh = 0;
    int ret = -1;

    memset(r, 0, sizeof *r);
    memset(&req, 0, sizeof req);
    for (size_t i = 0; hdrs && hdrs[i] && nh < MAX_HDRS; i++)
        hv[nh++] = hdrs[i];
    req.method = method;
    req.url = url;
    req.headers = hv;
    req.nheaders = nh;
    req.body = body;
    req.body_len = body ? strlen(body) : 0;
    req.max_body = max;
    st = ckpt__http_do_within(h, &req, timeout_ms, &resp);
    if (st != CKPT_OK) {
        /* the fixed text, not curl's detail ("... after 12 ms"): a poller
         * logs a failing condition once, until it changes */
        snprintf(r->err, sizeof r->err, "%s",
                 resp.curl_code ? ckpt__http_reason(resp.curl_code) : ckpt_strerror(st));
        r->unreachable = st == CKPT_E_UNREACHABLE;
        goto out;
    }
    if (resp.body_overflow) {
        /* capped, never truncated: a partial document is no document */
        snprintf(r->err, sizeof r->err, "reply body over %zu bytes", max);
        goto out;
    }
    if (ckpt__http_resp_take_body(&resp, &b, &r->len) != CKPT_OK) {
        snprintf(r->err, sizeof r->err, "out of memory");
        goto out;
    }
    r->body = b;
    r->status = resp.status;
    plain_etag(&resp, r->etag, sizeof r->etag);
    ret = 0;
out:
    ckpt__http_resp_free(&resp);
    return ret;
}

struct ckpt_imds *notice_imds(const char *base)
{
    return ckpt__imds_shared(base);
}

int notice_imds_get(struct ckpt_imds *m, const char *path, long timeout_ms, size_t max,
                    struct notice_reply *r)
{
    char err[512] = "", *body = NULL;
    size_t len = 0;
    long code = 0;
    ckpt_status st = ckpt__imds_get(m, path, timeout_ms, max, &body, &len, &code, err);

    memset(r, 0, sizeof *r);
    if (st != CKPT_OK) {
        free(body);
        snprintf(r->err, sizeof r->err, "%s", err[0] ? err : "request failed");
        r->unreachable = st == CKPT_E_UNREACHABLE;
        return -1;
    }
    r->status = code;
    r->body = body;
    r->len = len;
    return 0;
}
