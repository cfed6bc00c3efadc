/* claim.c -- the run's lease and fencing (claim.h). */
#include "sup/claim.h"
#include "record/lease.h"
#include "base/runlog.h"
#include "opts.h"
#include "record/record.h"
#include "ckpt_store.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static const char *fmt_ms(int64_t ms, char *buf, size_t n)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    if (ms <= 0 || !gmtime_r(&t, &tm) || !strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm))
        snprintf(buf, n, "never");
    return buf;
}

int claim_nothing_to_do(struct record *rec, const struct opts *o, int *rc)
{
    cJSON *run = NULL;
    ckpt_status st = record_read_run(rec, &run);
    const cJSON *state, *step;
    char t[40];
    int done = 0;

    if (st == CKPT_OK) {
        state = cJSON_GetObjectItemCaseSensitive(run, "state");
        step = cJSON_GetObjectItemCaseSensitive(run, "last_step");
        int stopped = cJSON_IsString(state) && strcmp(state->valuestring, "stopped") == 0;
        if (stopped && !o->resume_stopped) {
            /* Its user stopped it (Ctrl-C, scancel): a cron line must not
             * start again what the user ended. */
            char sb[32] = "none";
            if (cJSON_IsNumber(step))
                snprintf(sb, sizeof sb, "%.0f", step->valuedouble);
            log_msg(LOG_INFO, "recover", "run %s was stopped by its user (last step %s, at %s): "
                    "nothing to do (--resume-stopped resumes it)", o->run, sb,
                    fmt_ms((int64_t)cJSON_GetNumberValue(
                               cJSON_GetObjectItemCaseSensitive(run, "updated_ms")), t, sizeof t));
            *rc = 0;
            done = 1;
        } else if (cJSON_IsString(state) && strcmp(state->valuestring, "completed") == 0) {
            char sb[32] = "none";
            if (cJSON_IsNumber(step))
                snprintf(sb, sizeof sb, "%.0f", step->valuedouble);
            log_msg(LOG_INFO, "recover", "run %s is completed (last step %s, at %s): nothing "
                    "to do", o->run, sb,
                    fmt_ms((int64_t)cJSON_GetNumberValue(
                               cJSON_GetObjectItemCaseSensitive(run, "updated_ms")), t, sizeof t));
            *rc = 0;
            done = 1;
        }
    } else if (st != CKPT_E_NOENT && st != CKPT_E_CORRUPT) {
        /* NOENT: a new run, started below; CORRUPT: the lease decides */
        log_error("cannot read the run record of %s in %s: %s", o->run, o->store,
                  ckpt_strerror(st));
        *rc = exit_code_for_status(st);
        done = 1;
    }
    cJSON_Delete(run);
    return done;
}

int claim_lease(struct record *rec, const struct opts *o, int recover, struct claim *c, int *rc)
{
    struct lease_info other;
    char err[CKPT_ERR_MAX] = "", hb[40], ex[40], desc[700];
    int64_t now;
    ckpt_status st;
    int stop = 1;

    if (lease_open(record_store(rec), o->run, o->lease_ms, NULL, &c->lease) != CKPT_OK) {
        log_error("out of memory");
        *rc = EXIT_CONFIG;
        goto out;
    }
    if (c->job)
        lease_set_job(c->lease, c->job);
    st = lease_acquire(c->lease, &other, err);
    if (st == CKPT_E_EXISTS || st == CKPT_E_PRECONDITION) {
        now = ckpt__now_ms();
        if (other.holder[0])
            snprintf(desc, sizeof desc, "held by %s (epoch %" PRIu64 "), last heartbeat %s "
                     "(%llds ago), expires %s", other.holder, other.epoch,
                     fmt_ms(other.heartbeat_ms, hb, sizeof hb),
                     (long long)((now - other.heartbeat_ms) / 1000),
                     fmt_ms(other.expires_ms, ex, sizeof ex));
        else
            snprintf(desc, sizeof desc, "taken by another runner just now");
        if (recover) {
            log_msg(LOG_INFO, "recover", "run %s is %s: nothing to do", o->run, desc);
            *rc = 0;
        } else {
            log_error("run %s is %s: refusing to start a second runner; stop that one, wait "
                      "for its lease to expire, or use `ckptrun recover`", o->run, desc);
            *rc = EXIT_LEASE_HELD;
        }
        goto out;
    }
    if (st != CKPT_OK) {
        log_error("cannot take the lease of run %s in %s: %s%s%s", o->run, o->store,
                  ckpt_strerror(st), err[0] ? ": " : "", err);
        *rc = exit_code_for_status(st);
        goto out;
    }
    c->epoch = lease_epoch(c->lease);
    if (lease_took_stale(c->lease)) {
        /* A runner of this run died on this machine (killed, or the job
         * was requeued after a hard kill): its lease would only have kept
         * the run waiting until the expiry. */
        log_msg(LOG_INFO, "lease", "run %s was held by %s (epoch %" PRIu64 "), whose process "
                "(pid %d on this host) is gone: lease taken over at once", o->run,
                other.holder, other.epoch, other.pid);
        snprintf(c->stale_holder, sizeof c->stale_holder, "%s", other.holder);
    }
    stop = 0;
out:
    return stop;
}

int claim_fence(struct ckpt_ctx *ctx, const char *run, uint64_t epoch, int *rc)
{
    ckpt_status st = CKPT_E_PRECONDITION;

    /* HEAD changing under us: a stale writer's last commit; try again */
    for (int i = 0; i < 5 && st == CKPT_E_PRECONDITION; i++)
        st = ckpt_fence(ctx, epoch);
    if (st != CKPT_OK) {
        log_error("cannot fence run %s at epoch %" PRIu64 ": %s %s", run, epoch,
                  ckpt_strerror(st), ckpt_errmsg(ctx));
        *rc = exit_code_for_status(st);
    }
    return st != CKPT_OK;
}
