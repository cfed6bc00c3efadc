/* notice/probe.c -- the one-shot probe of `ckptrun doctor` (notice.h):
 * the provider as the poller would find it, its session token and one
 * request to its notice path, all from its table entry; no thread, no
 * callback. */
#include "notice/int.h"
#include "notice/table.h"
#include "notice/poll.h"
#include "notice/net.h"
#include "notice/probe.h"
#include "notice/notice.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define PROBE_TOKEN_TTL_S 60 /* a short-lived token: the probe needs it for one GET */
#define PROBE_BODY_MAX 65536 /* any reply a provider may send: judged, not refused */

/* The token PUT: r->token and r->token_status; the header line into tokh
 * when one was obtained. */
static void probe_token(struct ckpt_http *http, const struct notice_token *tk, long timeout_ms,
                        struct notice_probe_result *r, char *tokh, size_t cap)
{
    struct notice_reply rep;
    char url[BASE_MAX + 64], ttl[128];
    const char *th[2] = { ttl, NULL };

    snprintf(url, sizeof url, "%s%s", r->base, tk->path);
    snprintf(ttl, sizeof ttl, "%s: %d", tk->ttl_header, PROBE_TOKEN_TTL_S);
    if (notice_http(http, "PUT", url, th, NULL, timeout_ms, 1024, &rep)) {
        r->token = -1;
        snprintf(r->detail, sizeof r->detail, "token PUT: %.200s", rep.err);
        return;
    }
    {
        size_t n = rep.len;
        r->token_status = rep.status;
        while (n > 0 && (rep.body[n - 1] == '\n' || rep.body[n - 1] == '\r'))
            n--;
        if (rep.status == 200 && n > 0 && n < 512 && !memchr(rep.body, '\n', n) &&
            !memchr(rep.body, '\r', n)) {
            r->token = 1;
            snprintf(tokh, cap, "%s: %.*s", tk->header, (int)n, rep.body);
        } else if (rep.status == 403 || rep.status == 404 || rep.status == 405) {
            r->token = 0;
        } else {
            r->token = -1;
        }
    }
    free(rep.body);
}

int notice_probe(const struct notice_config *cfg, long timeout_ms, struct notice_probe_result *r)
{
    struct ckpt_http *http = NULL;
    struct notice_reply rep;
    const struct notice_provider *pv;
    const struct notice_path *path;
    char url[BASE_MAX + 160], tokh[TOKEN_MAX + 80] = "";
    const char *prov, *hdrs[NOTICE_HDRS_MAX];
    size_t nh = 0;
    int64_t t0;

    if (!cfg || !r)
        return -1;
    memset(r, 0, sizeof *r);
    r->token = -2;
    prov = cfg->provider && *cfg->provider ? cfg->provider : "auto";
    if (!notice_mode_valid(prov))
        return -1;
    if (!notice_available()) {
        r->provider = "none";
        snprintf(r->how, sizeof r->how, "this build has no cloud-notice support (no libcurl)");
        snprintf(r->detail, sizeof r->detail, "cloud notices need libcurl");
        return 0;
    }
    if (strcmp(prov, "auto") == 0)
        prov = notice_detect(cfg->dmi_dir ? cfg->dmi_dir : "/sys/class/dmi/id", NULL, NULL, r->how,
                             sizeof r->how);
    else
        snprintf(r->how, sizeof r->how, "forced by --notice %s", prov);
    r->provider = notice_provider_name(prov);
    if (!(pv = notice_provider_find(prov)))
        return 0; /* "none": never touch the network without a provider */
    if (pv->off_env && getenv(pv->off_env) && strcasecmp(getenv(pv->off_env), "true") == 0) {
        /* notice_start() polls nothing then, whatever the URL: say so. */
        snprintf(r->detail, sizeof r->detail, "%s=true: not polled", pv->off_env);
        return 0;
    }
    if (cfg->metadata_url) {
        if (notice_base_of(cfg->metadata_url, r->base, sizeof r->base)) {
            snprintf(r->detail, sizeof r->detail, "--metadata-url is not http(s)://host[:port]");
            return 0;
        }
    } else {
        const char *e = pv->base_env ? getenv(pv->base_env) : NULL;
        if (!e || !*e || notice_base_of(e, r->base, sizeof r->base))
            snprintf(r->base, sizeof r->base, "%s", pv->base);
    }
    if (!(http = notice_http_new())) {
        snprintf(r->detail, sizeof r->detail, "libcurl could not be initialised");
        return 0;
    }
    for (size_t i = 0; pv->headers && pv->headers[i] && nh + 2 < NOTICE_HDRS_MAX; i++)
        hdrs[nh++] = pv->headers[i];
    if (pv->token) {
        probe_token(http, pv->token, timeout_ms, r, tokh, sizeof tokh);
        if (tokh[0])
            hdrs[nh++] = tokh;
    }
    hdrs[nh] = NULL;
    path = &pv->paths[0];
    snprintf(url, sizeof url, "%s%s", r->base, path->path);
    t0 = ckpt__mono_ms();
    if (notice_http(http, "GET", url, hdrs, NULL, timeout_ms, PROBE_BODY_MAX, &rep)) {
        r->latency_ms = (long)(ckpt__mono_ms() - t0);
        snprintf(r->detail, sizeof r->detail, "%.60s: %.180s", path->path, rep.err);
        goto out;
    }
    r->latency_ms = (long)(ckpt__mono_ms() - t0);
    r->reachable = 1;
    r->status = rep.status;
    if (rep.status == 200) {
        struct notice_event ev;
        int k = path->parse(rep.body, rep.len, ckpt__now_ms(), &ev);
        r->pending = k > 0;
        if (k != 0)
            snprintf(r->detail, sizeof r->detail, "%s", ev.detail);
    }
    free(rep.body);
out:
    notice_http_free(http);
    return 0;
}
