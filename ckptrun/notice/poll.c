/* notice/poll.c -- the polling loop providers share, and their session
 * tokens (notice/int.h). A provider describes its paths, headers and token
 * (notice/provider.h); this loop asks for each path every round, hands 200
 * replies to its parser and logs every other answer once per condition. */
#include "notice/int.h"
#include "notice/report.h"
#include "notice/poll.h"
#include "notice/net.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOKEN_RETRY_MS 60000 /* after a refused token PUT: ask again later */

/* Holds a session token when the server gives one; goes without when the
 * PUT is refused (a server that does not require one, e.g. Alibaba's normal
 * mode), asking again a minute later. */
static void session_token(struct nwatch *w)
{
    struct notice_poller *p = w->p;
    const struct notice_token *tk = p->prov->token;
    char url[BASE_MAX + 64], ttl[128];
    const char *hdrs[2] = { ttl, NULL };
    struct notice_reply r;
    size_t n;

    if (ckpt__mono_ms() < w->token_renew_ms)
        return; /* held and fresh, or recently refused: wait before asking again */
    w->token[0] = '\0';
    w->token_renew_ms = ckpt__mono_ms() + TOKEN_RETRY_MS;
    snprintf(url, sizeof url, "%s%s", p->base, tk->path);
    snprintf(ttl, sizeof ttl, "%s: %ld", tk->ttl_header, tk->ttl_s);
    if (notice_http(p->http, "PUT", url, hdrs, "", p->prov->timeout_ms, 1024, &r))
        return;
    n = r.len;
    while (n && (r.body[n - 1] == '\n' || r.body[n - 1] == '\r' || r.body[n - 1] == ' '))
        n--;
    if (r.status == 200 && n > 0 && n < sizeof w->token && !memchr(r.body, '\n', n) &&
        !memchr(r.body, '\r', n)) {
        memcpy(w->token, r.body, n);
        w->token[n] = '\0';
        w->token_renew_ms = ckpt__mono_ms() + (tk->ttl_s - 60) * 1000LL; /* a minute early */
    }
    free(r.body);
}

void notice_poll_headers(struct nwatch *w, const char **hv, char *tokh, size_t tokcap)
{
    const struct notice_provider *pv = w->p->prov;
    size_t n = 0;
    for (size_t i = 0; pv->headers && pv->headers[i] && n + 2 < NOTICE_HDRS_MAX; i++)
        hv[n++] = pv->headers[i];
    if (pv->token) {
        session_token(w);
        if (w->token[0]) {
            snprintf(tokh, tokcap, "%s: %s", pv->token->header, w->token);
            hv[n++] = tokh;
        }
    }
    hv[n] = NULL;
}

static int fetch_http(struct nwatch *w, const char *path, struct notice_reply *r)
{
    struct notice_poller *p = w->p;
    const char *hv[NOTICE_HDRS_MAX];
    char url[BASE_MAX + 256], tokh[TOKEN_MAX + 80];
    notice_poll_headers(w, hv, tokh, sizeof tokh);
    snprintf(url, sizeof url, "%s%s", p->base, path);
    return notice_http(p->http, "GET", url, hv, NULL, p->prov->timeout_ms, p->prov->body_max, r);
}

void notice_poll_paths(struct nwatch *w)
{
    struct notice_poller *p = w->p;
    const struct notice_provider *pv = p->prov;
    do {
        if (pv->before_round)
            pv->before_round(w);
        for (unsigned i = 0; i < pv->npaths && !atomic_load(&p->stop); i++) {
            const struct notice_path *path = &pv->paths[i];
            struct notice_reply r;
            int bad = pv->fetch ? pv->fetch(w, path->path, &r) : fetch_http(w, path->path, &r);
            if (bad) {
                free(r.body);
                if (atomic_load(&p->stop))
                    break; /* aborted by notice_stop: not a failure */
                notice_cond_fail(w, (int)i, "%s: %s", path->label,
                                 r.err[0] ? r.err : "request failed");
                if (r.unreachable)
                    break; /* the other paths would time out the same way */
                continue;
            }
            if (r.status == 200) {
                struct notice_event ev;
                int64_t now = ckpt__now_ms();
                int k = pv->parse ? pv->parse(w, i, r.body, r.len, now, &ev)
                                  : path->parse(r.body, r.len, now, &ev);
                notice_result(w, (int)i, k, &ev);
            } else if (r.status == 404 && pv->quiet_404) {
                notice_cond_ok(w, (int)i); /* no notice */
            } else {
                if (pv->token && (r.status == 401 || r.status == 403)) {
                    /* Token expired, revoked or newly required: get one now. */
                    w->token[0] = '\0';
                    w->token_renew_ms = 0;
                }
                notice_cond_fail(w, (int)i, "%s: HTTP %ld", path->label, r.status);
            }
            free(r.body);
        }
    } while (!notice_nap(p, notice_poll_interval(p, pv->poll_ms)));
}
