/*
 * notice_none.c -- notice.h in a build without libcurl: cloud notices need
 * libcurl, so nothing is polled. The reply parsers (notice_parse.c) are
 * there all the same. A provider asked for by name is told once that this
 * build cannot poll it; `auto` finds nothing to poll, as on a machine with
 * no known vendor.
 */
#include "notice.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct notice_poller {
    const char *provider;     /* always "none" */
};

int notice_available(void)
{
    return 0;
}

int notice_start(const struct notice_config *cfg, struct notice_poller **out)
{
    const char *prov;
    struct notice_poller *p;

    if (!cfg || !out)
        return -1;
    *out = NULL;
    prov = cfg->provider && *cfg->provider ? cfg->provider : "auto";
    if (!notice_mode_valid(prov) || !(p = calloc(1, sizeof *p)))
        return -1;
    p->provider = "none";
    if (strcmp(prov, "auto") != 0 && strcmp(prov, "none") != 0 && cfg->log_fn) {
        char msg[200];
        snprintf(msg, sizeof msg, "%s: cloud notices need libcurl, which this build lacks: "
                 "not polling (rely on --interval and signals)", prov);
        cfg->log_fn(cfg->log_user, CKPT_LOG_WARN, "notice", msg);
    }
    *out = p;
    return 0;
}

const char *notice_provider(const struct notice_poller *p)
{
    (void)p;
    return "none";
}

int notice_ack(struct notice_poller *p, const char *event_id)
{
    (void)event_id;
    return p ? 0 : -1;
}

void notice_stop(struct notice_poller *p)
{
    free(p);
}

int notice_probe(const struct notice_config *cfg, long timeout_ms,
                 struct notice_probe_result *r)
{
    const char *prov;

    (void)timeout_ms;
    if (!cfg || !r)
        return -1;
    memset(r, 0, sizeof *r);
    prov = cfg->provider && *cfg->provider ? cfg->provider : "auto";
    if (!notice_mode_valid(prov))
        return -1;
    r->provider = "none";
    r->token = -2;
    snprintf(r->how, sizeof r->how, "this build has no cloud-notice support (no libcurl)");
    snprintf(r->detail, sizeof r->detail, "cloud notices need libcurl");
    return 0;
}
