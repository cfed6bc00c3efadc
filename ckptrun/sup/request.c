/* request.c -- checkpoint requests to the child (request.h). */
#include "sup/request.h"
#include "sup/ctlserver.h"
#include "base/runlog.h"
#include "base/parse.h"
#include "sup/sup.h"
#include "sup/sup_log.h"
#include "sup/sup_report.h"

enum channel request_checkpoint(struct sup *s, const char *reason, int64_t deadline_unix,
                                const char *codec, int except, enum channel self)
{
    enum channel ch = CH_NONE;
    char pids[800] = "";
    cJSON *f = sup_fields();

    s->req_id++;
    if (except == -2 && self == CH_NONE)
        self = s->seam->ctl_signal_clients(s->ctl, CTL_KIND_LIB)     ? CH_SOCKET
               : s->seam->ctl_signal_clients(s->ctl, CTL_KIND_FILES) ? CH_FILES
                                                                     : CH_NONE;
    if (s->seam->ctl_connected(s->ctl)) {
        if (s->seam->ctl_request(s->ctl, reason, deadline_unix, codec, s->req_id,
                                 CTL_KIND_LIB | CTL_KIND_FILES, except) > 0 ||
            self == CH_SOCKET)
            ch = CH_SOCKET;
    } else if (!s->o->sig && s->seam->ctl_helpers(s->ctl)) {
        /* Processes that write their own files, reachable over the socket
         * (the Python helper): the answer is an entry written after the
         * request, as with a signal. */
        if (s->seam->ctl_request(s->ctl, reason, deadline_unix, codec, s->req_id, CTL_KIND_FILES,
                                 except) > 0 ||
            self == CH_FILES)
            ch = CH_FILES;
    } else if (self != CH_NONE) {
        ch = self;
    }
    if (ch == CH_NONE && s->o->sig && s->ch.alive && !s->ever_connected) {
        /* A child that connected once (libckpt) gets no signal after it
         * disconnects: it closed its context (ckpt_close at the end of
         * training), and a signal it no longer handles could kill it. */
        if (s->seam->signal_handlers(&s->ch, s->o->sig, pids, sizeof pids) > 0)
            ch = CH_SIGNAL;
        else
            log_msg(LOG_WARN, "request",
                    "the command does not handle %s now (no process of "
                    "its tree does: still starting, or exiting): not sent, it would kill it",
                    ckpt__signal_name(s->o->sig));
    }
    if (f) {
        cJSON_AddStringToObject(f, "reason", reason);
        cJSON_AddStringToObject(f, "via",
                                ch == CH_SOCKET || ch == CH_FILES ? "socket"
                                : ch == CH_SIGNAL                 ? ckpt__signal_name(s->o->sig)
                                                                  : "none");
        if (pids[0])
            cJSON_AddStringToObject(f, "pids", pids);
        if (deadline_unix)
            cJSON_AddNumberToObject(f, "deadline_ms", (double)deadline_unix);
        if (codec)
            cJSON_AddStringToObject(f, "codec", codec);
    }
    sup_event(s, ch == CH_NONE ? LOG_DEBUG : LOG_INFO, "request", f, 0);
    /* No way at all to ask this trainer (a --signal without a handler was
     * said above): a user must hear of it, once (sup_report.h). */
    if (ch == CH_NONE && !s->o->sig && !s->ever_connected && !s->rep.ever_helper && s->ch.alive)
        sup_report_unreachable(s, reason);
    return ch;
}
