/*
 * supervise.c -- `ckptrun [run] -- COMMAND`: restore, start the child under
 * the keeper (keeper.h: the job's process group and subreaper, so no process
 * of the tree outlives us), and drive one event loop (signalfd, timerfd,
 * inotify, control socket, commit results, notices, the keeper's reports)
 * until the child and every process of its tree are gone.
 *
 * Stops (SIGTERM, scheduler or cloud notice) have a deadline D: by default
 * now + --grace, else the notice's deadline less a safety margin. The time
 * to D is split: up to the last third (at most --grace) is the child's to
 * exit after SIGTERM; before that, the final checkpoint is requested and
 * awaited. SIGKILL goes to the whole tree at D. So a child that ignores
 * requests is still gone by D, and ckptrun always finishes before the
 * deadline. A SIGTERM or SIGINT that reached the job's processes directly
 * (the keeper reports one its group got; libckpt and the Python helper
 * report one they took as a stop) starts the same stop; clients that take
 * signals as stops are told `stopping` before ckptrun's own signal. Ctrl-C
 * (SIGINT), and a plain SIGTERM under SLURM, are the user's stop: state
 * `stopped`, exit 128 + the signal.
 *
 * Lease (docs/recover.md): before anything else the supervisor takes the
 * run's lease, fences HEAD at the new epoch, and hands the epoch to the
 * child (CKPT_EPOCH) and to its own commit context. A thread renews the
 * lease every TTL/3; when renewal is refused (another runner took the run)
 * or cannot succeed before expiry, the loop stops committing, stops the
 * child and exits 74. A normal end releases the lease.
 */
#include "ckptrun.h"
#include "commit.h"
#include "ctlserver.h"
#include "keeper.h"
#include "lease.h"
#include "log.h"
#include "notice_sink.h"
#include "parse.h"
#include "proctree.h"
#include "record.h"
#include "store.h"
#include "watch.h"
#if defined(CKPT_WITH_S3) || defined(CKPT_WITH_AZURE)
#include "retry.h"
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* The notices module is optional at link time (see notice_sink.h). */
int ckptrun_notice_start(const struct ckptrun_notice_cfg *cfg) __attribute__((weak));
void ckptrun_notice_stop(void) __attribute__((weak));

#define STOP_MARGIN_MS 5000       /* kept free before a notice's deadline */
#define STOP_SETTLE_MS 2000       /* settle time while a stop waits for an entry */
#define STOPPING_ACK_MS 1000     /* longest wait for `stopping` acknowledgements */
#define MAX_PFDS (8 + CTL_MAX_CLIENTS + 1)

/* How a stop request reached the child, and so what answers it: CH_SOCKET
 * a libckpt commit (`committed`), CH_SIGNAL and CH_FILES (the request over
 * the socket to processes that write their own files, the Python helper)
 * the commit of an entry written after the stop began. */
enum channel { CH_NONE, CH_SIGNAL, CH_SOCKET, CH_FILES };
enum phase { P_RUN, P_CKPT, P_TERM, P_KILL };

/* Notices posted from other threads: a tiny queue under a mutex, with an
 * eventfd to wake the loop. */
struct notice {
    struct notice *next;
    enum ckptrun_notice_kind kind;
    int64_t deadline_ms;
    char provider[32];
    ckptrun_notice_ack_fn ack;
    void *ack_user;
};
static pthread_mutex_t g_nmu = PTHREAD_MUTEX_INITIALIZER;
static struct notice *g_nhead;
static int g_nfd = -1;

void ckptrun_notice_post(enum ckptrun_notice_kind kind, int64_t deadline_ms,
                         const char *provider, ckptrun_notice_ack_fn ack, void *ack_user)
{
    struct notice *n = calloc(1, sizeof *n);
    uint64_t one = 1;

    if (!n)
        return;
    n->kind = kind;
    n->deadline_ms = deadline_ms;
    snprintf(n->provider, sizeof n->provider, "%s", provider ? provider : "");
    n->ack = ack;
    n->ack_user = ack_user;
    pthread_mutex_lock(&g_nmu);
    n->next = g_nhead;
    g_nhead = n;
    pthread_mutex_unlock(&g_nmu);
    if (g_nfd >= 0 && write(g_nfd, &one, sizeof one) < 0)
        (void)0; /* counter full: the loop is already woken */
}

/* The lease renewal thread: the loop must never wait on a store's latency
 * or retries, and a renewal must not wait on the loop. It owns the lease
 * while it runs (lease.h: one thread at a time); the loop learns of a loss
 * through `lost` and a wake-up of the notice eventfd. */
struct renewer {
    struct lease *l;
    pthread_t thr;
    pthread_mutex_t mu;
    pthread_cond_t cv;        /* on CLOCK_MONOTONIC */
    int running, stop, lost;
    int64_t next;             /* mono ms of the next renewal */
    char why[CKPT_ERR_MAX];
};

struct sup {
    struct opts *o;
    enum sup_mode mode;
    struct lease *lease;
    struct renewer rn;
    uint64_t epoch;
    int lease_lost;           /* stop committing: another runner holds the run */
    int lease_told;           /* the `lease acquired` event was logged */
    char stale_holder[256];   /* taken over from this dead holder on this host */
    char dir[PATH_MAX];
    struct record *rec;
    struct watch *w;
    struct ctl *ctl;
    char sock[300];
    int sfd, tfd;
    sigset_t mask;

    struct keeper kp;         /* the job's process tree (keeper.h) */
    pid_t child, pgid;        /* COMMAND; the job's process group (the keeper's) */
    int child_alive;
    int child_sigint;         /* COMMAND died of SIGINT or exited 130 */
    int child_sigterm;        /* COMMAND died of SIGTERM or exited 143 */
    int child_code;           /* exit code as a shell reports it */
    int tty;                  /* gave the terminal to the child */
    int resumed;
    uint64_t restored_step;

    int64_t last_step;        /* last committed step of the run, -1 none */
    double last_commit_s;     /* duration of the last commit, for codec choice */
    uint64_t preemptions;
    int64_t started_ms;
    uint64_t req_id;
    int64_t next_periodic;    /* mono ms, 0 = off */
    int64_t watch_due;        /* mono ms, -1 = none */

    /* Stop. */
    enum phase phase;
    char stop_reason[32];     /* a copy: signal_name() reuses one buffer */
    char stop_provider[32];
    enum channel via;
    int64_t t0, ckpt_end, deadline; /* mono ms */
    int64_t drain_deadline;   /* stop after the child exited: mono ms, 0 none */
    int ever_connected;       /* a process sent hello at some point */
    int ever_saving;          /* the child's libckpt sends "saving" messages */
    int child_writes;         /* the child commits checkpoints itself */
    int final_done, final_ok;
    int user_stop;            /* Ctrl-C, or a plain SIGTERM under SLURM: state `stopped` */
    int job_signalled;        /* the stop's signal also reached the job's processes */
    int warned;               /* a scheduler's warning signal (SIGUSR1/SIGXCPU) came */
    int term_sig;             /* what ends the child after the final checkpoint */
    int no_kill;              /* a user interrupt: no SIGKILL, the child ends itself */
    int64_t term_due;         /* mono ms: send term_sig (awaiting `stopping` acks), 0 none */
    int term_sent;
    int64_t t_accept;         /* mono ms: entries changed since answer the stop */
    int64_t last_changed;     /* newest changed_mono of a committed watched entry, -1 */
    int saw_saving;
    uint64_t await_step;
    int failed_since_stop;
    struct notice *acks;      /* notices waiting for the final result */
};

/* ---- helpers ------------------------------------------------------------- */

static cJSON *fields(void) { return cJSON_CreateObject(); }

static void event(struct sup *s, int level, const char *name, cJSON *f, int to_record)
{
    log_event(level, name, f);
    if (to_record && s->rec)
        record_event(s->rec, name, f);
    cJSON_Delete(f);
}

static void set_state(struct sup *s, const char *state)
{
    if (s->rec)
        record_set_state(s->rec, state, s->last_step, s->preemptions, s->started_ms);
}

static void note_commit(struct sup *s, uint64_t step, double seconds)
{
    if ((int64_t)step > s->last_step)
        s->last_step = (int64_t)step;
    s->last_commit_s = seconds;
    watch_note_step(s->w, step);
}

/* Send the request signal to the processes of the job that handle it
 * (keeper.h: COMMAND if it does, else the topmost handler in each branch,
 * never one of their descendants). @return the number signalled; the pids
 * are logged. */
static int signal_handlers(struct sup *s, int sig, char *pids_txt, size_t n)
{
    int pids[64], cnt;
    size_t at = 0;

    pids_txt[0] = '\0';
    if (s->kp.alive)
        cnt = keeper_signal_handlers(&s->kp, sig, pids, 64);
    else /* no keeper (it died): COMMAND alone, if it still handles it */
        cnt = pt_catches(s->child, sig) == 1 && kill(s->child, sig) == 0 ? (pids[0] = s->child, 1)
                                                                         : 0;
    for (int i = 0; i < cnt && at + 12 < n; i++)
        at += (size_t)snprintf(pids_txt + at, n - at, "%s%d", i ? "," : "", pids[i]);
    return cnt < 0 ? 0 : cnt;
}

/* Ask the child for a checkpoint through the best channel it has.
 * `except` is a control client that already asked itself (it took the
 * stop's signal): -1 none, -2 every client that turns signals into stops
 * (the job's process group got the signal); `self` the channel such a
 * client is (CH_NONE when none). */
static enum channel deliver_request(struct sup *s, const char *reason, int64_t deadline_unix,
                                    const char *codec, int except, enum channel self)
{
    enum channel ch = CH_NONE;
    char pids[800] = "";
    cJSON *f = fields();

    s->req_id++;
    if (except == -2 && self == CH_NONE)
        self = ctl_signal_clients(s->ctl, CTL_KIND_LIB) ? CH_SOCKET
               : ctl_signal_clients(s->ctl, CTL_KIND_FILES) ? CH_FILES : CH_NONE;
    if (ctl_connected(s->ctl)) {
        if (ctl_request(s->ctl, reason, deadline_unix, codec, s->req_id,
                        CTL_KIND_LIB | CTL_KIND_FILES, except) > 0 || self == CH_SOCKET)
            ch = CH_SOCKET;
    } else if (!s->o->sig && ctl_helpers(s->ctl)) {
        /* Processes that write their own files, reachable over the socket
         * (the Python helper): the answer is an entry written after the
         * request, as with a signal. */
        if (ctl_request(s->ctl, reason, deadline_unix, codec, s->req_id, CTL_KIND_FILES,
                        except) > 0 || self == CH_FILES)
            ch = CH_FILES;
    } else if (self != CH_NONE) {
        ch = self;
    }
    if (ch == CH_NONE && s->o->sig && s->child_alive && !s->ever_connected) {
        /* A child that connected once (libckpt) gets no signal after it
         * disconnects: it closed its context (ckpt_close at the end of
         * training), and a signal it no longer handles could kill it. */
        if (signal_handlers(s, s->o->sig, pids, sizeof pids) > 0)
            ch = CH_SIGNAL;
        else
            log_msg(LOG_WARN, "request", "the command does not handle %s now (no process of "
                    "its tree does: still starting, or exiting): not sent, it would kill it",
                    signal_name(s->o->sig));
    }
    if (f) {
        cJSON_AddStringToObject(f, "reason", reason);
        cJSON_AddStringToObject(f, "via", ch == CH_SOCKET || ch == CH_FILES ? "socket"
                                         : ch == CH_SIGNAL ? signal_name(s->o->sig) : "none");
        if (pids[0])
            cJSON_AddStringToObject(f, "pids", pids);
        if (deadline_unix)
            cJSON_AddNumberToObject(f, "deadline_ms", (double)deadline_unix);
        if (codec)
            cJSON_AddStringToObject(f, "codec", codec);
    }
    event(s, ch == CH_NONE ? LOG_DEBUG : LOG_INFO, "request", f, 0);
    return ch;
}

/* ---- lease ------------------------------------------------------------- */

static void wake_loop(void)
{
    uint64_t one = 1;
    if (g_nfd >= 0 && write(g_nfd, &one, sizeof one) < 0)
        (void)0; /* counter full: the loop is already woken */
}

static void *renew_main(void *arg)
{
    struct renewer *r = arg;
    const int64_t every = (int64_t)lease_ttl_ms(r->l) / 3;
    char err[CKPT_ERR_MAX];

    pthread_mutex_lock(&r->mu);
    r->next = mono_ms() + every;
    while (!r->stop) {
        int64_t now = mono_ms(), next = r->next;
        ckpt_status st;
        if (now < next) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_sec += (next - now) / 1000;
            ts.tv_nsec += ((next - now) % 1000) * 1000000L;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&r->cv, &r->mu, &ts);
            continue;
        }
        pthread_mutex_unlock(&r->mu);
        err[0] = '\0';
        st = lease_renew(r->l, err);
        pthread_mutex_lock(&r->mu);
        if (st == CKPT_OK) {
            r->next = mono_ms() + every;
            continue;
        }
        if (st == CKPT_E_FENCED || now_ms() >= lease_expires_ms(r->l)) {
            /* Refused, or no renewal got through before expiry: another
             * runner may hold the run now, so ours must stop committing. */
            if (st == CKPT_E_FENCED)
                snprintf(r->why, sizeof r->why, "%s",
                         err[0] ? err : "the lease was taken over by another runner");
            else
                snprintf(r->why, sizeof r->why, "it expired before a renewal got through (%s%s%.400s)",
                         ckpt_strerror(st), err[0] ? ": " : "", err);
            r->lost = 1;
            wake_loop();
            break;
        }
        /* Transient: retry soon, until expiry. */
        log_msg(LOG_WARN, "lease", "renewal failed (%s%s%s); retrying", ckpt_strerror(st),
                err[0] ? ": " : "", err);
        r->next = mono_ms() + (every / 10 < 1000 ? every / 10 : 1000);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

static int renewer_start(struct renewer *r, struct lease *l)
{
    pthread_condattr_t ca;
    int rc = -1;

    r->l = l;
    pthread_mutex_init(&r->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&r->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&r->thr, NULL, renew_main, r) != 0) {
        pthread_mutex_destroy(&r->mu);
        pthread_cond_destroy(&r->cv);
        goto out;
    }
    r->running = 1;
    rc = 0;
out:
    return rc;
}

static void renewer_stop(struct renewer *r)
{
    if (!r->running)
        return;
    pthread_mutex_lock(&r->mu);
    r->stop = 1;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->thr, NULL);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    r->running = 0;
}

/* Renew now: a commit was refused as fenced, which a takeover does -- but
 * so does a `ckptrun gc` rewriting HEAD. The renewal tells them apart:
 * refused means the lease is gone. */
static void renewer_kick(struct renewer *r)
{
    if (!r->running)
        return;
    pthread_mutex_lock(&r->mu);
    r->next = 0;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static int renewer_lost(struct renewer *r, char *why, size_t n)
{
    int lost = 0;
    if (!r->running)
        return 0;
    pthread_mutex_lock(&r->mu);
    lost = r->lost;
    if (lost)
        snprintf(why, n, "%s", r->why);
    pthread_mutex_unlock(&r->mu);
    return lost;
}

static void signal_group(struct sup *s, int sig)
{
    if (s->pgid > 0 && kill(-s->pgid, sig) != 0 && errno != ESRCH)
        log_msg(LOG_WARN, "signal", "kill(-%d, %s): %s", (int)s->pgid, signal_name(sig),
                strerror(errno));
}

static void finish_acks(struct sup *s)
{
    while (s->acks) {
        struct notice *n = s->acks;
        s->acks = n->next;
        if (n->ack)
            n->ack(n->ack_user, s->final_ok, s->last_step < 0 ? 0 : (uint64_t)s->last_step);
        free(n);
    }
}

static void final_result(struct sup *s, int ok)
{
    if (s->final_done)
        return;
    s->final_done = 1;
    s->final_ok = ok;
    cJSON *f = fields();
    if (f) {
        cJSON_AddBoolToObject(f, "committed", ok);
        if (s->last_step >= 0)
            cJSON_AddNumberToObject(f, "step", (double)s->last_step);
    }
    event(s, ok ? LOG_INFO : LOG_WARN, "final", f, 0);
    finish_acks(s);
}

/* SIGKILL to the whole job: the keeper kills every process of its tree
 * (also those outside the process group); without it, the group. */
static void kill_all(struct sup *s)
{
    if (s->w)
        watch_stopping(s->w);
    if (s->kp.alive)
        keeper_kill(&s->kp);
    else
        signal_group(s, SIGKILL);
}

static void send_term(struct sup *s)
{
    if (s->term_sent)
        return;
    s->term_sent = 1;
    s->term_due = 0;
    if (s->child_alive) {
        if (s->w)
            watch_stopping(s->w); /* what is closed from now on may be torn */
        signal_group(s, s->term_sig);
    }
}

/* The final checkpoint is settled (or the time for it is up): end the
 * child. Clients that turn signals into stops are first told `stopping`
 * (docs/CONTROL.md) so that the signal that follows takes its default
 * effect at once; their acknowledgements are awaited at most a second. */
static void enter_term(struct sup *s)
{
    int told;

    if (s->phase >= P_TERM)
        return;
    s->phase = P_TERM;
    if (!s->child_alive)
        return;
    if (s->no_kill && s->via == CH_NONE) {
        /* A user's interrupt that reached the child directly, and nothing
         * else to wait for: it ends (or not) as it would without us. */
        s->term_sent = 1;
        return;
    }
    cJSON *f = fields();
    if (f) {
        cJSON_AddStringToObject(f, "signal", signal_name(s->term_sig));
        if (!s->no_kill)
            cJSON_AddNumberToObject(f, "kill_in_ms", (double)(s->deadline - mono_ms()));
    }
    event(s, LOG_INFO, "terminate", f, 0);
    told = ctl_stopping(s->ctl, s->stop_reason, signal_name(s->term_sig));
    if (told > 0) {
        int64_t due = mono_ms() + STOPPING_ACK_MS;
        s->term_due = due < s->deadline || s->no_kill ? due : s->deadline;
    } else {
        send_term(s);
    }
}

/* The run now belongs to another runner: commit nothing more (fencing
 * refuses it anyway), leave its record alone, stop the child now. */
static void lease_lost(struct sup *s, const char *why)
{
    cJSON *f;

    if (s->lease_lost)
        return;
    s->lease_lost = 1;
    log_msg(LOG_ERROR, "lease", "lease on run %s (epoch %" PRIu64 ") lost: %s; committing "
            "nothing more, stopping the child, exit %d",
            s->o->run, s->epoch, why, EXIT_STOPPED_LOST);
    if ((f = fields())) {
        cJSON_AddStringToObject(f, "action", "lost");
        cJSON_AddNumberToObject(f, "epoch", (double)s->epoch);
        cJSON_AddStringToObject(f, "detail", why);
    }
    event(s, LOG_DEBUG, "lease", f, 1);
    if (s->w)
        watch_pause(s->w);
    if (s->phase == P_RUN) {
        s->t0 = mono_ms();
        s->deadline = s->t0 + (int64_t)s->o->grace_ms;
        snprintf(s->stop_reason, sizeof s->stop_reason, "lease-lost");
    } else if (s->deadline > mono_ms() + (int64_t)s->o->grace_ms) {
        s->deadline = mono_ms() + (int64_t)s->o->grace_ms;
    }
    enter_term(s);
}

/* ---- stop ---------------------------------------------------------------- */

/* What started a stop. */
struct cause {
    const char *reason;       /* "SIGTERM", "SIGUSR1", "SIGXCPU", "SIGINT", "notice" */
    int64_t deadline_unix;    /* 0: now + --grace */
    const char *provider;     /* notices */
    int except;               /* control client that asked itself (deliver_request) */
    enum channel self;        /* ... and its channel */
    int64_t since_mono;       /* when the signal reached the job, 0 unknown */
    int job;                  /* the signal reached the job's processes directly */
};

/* An entry written since the stop's signal reached the job may already
 * have been committed (a trainer that saved before we even heard of it):
 * that is the final checkpoint. */
static void check_answered(struct sup *s)
{
    if (s->phase == P_CKPT && (s->via == CH_SIGNAL || s->via == CH_FILES) &&
        s->last_changed >= 0 && s->last_changed >= s->t_accept) {
        final_result(s, 1);
        enter_term(s);
    }
}

static void begin_stop(struct sup *s, const struct cause *c)
{
    int64_t now = mono_ms(), d, total, killwin;
    const char *codec = NULL, *reason = c->reason;
    int user = 0;
    cJSON *f;

    if (c->deadline_unix > 0)
        d = now + (c->deadline_unix - now_ms()) - STOP_MARGIN_MS;
    else
        d = now + (int64_t)s->o->grace_ms;
    if (d < now + 1000)
        d = now + 1000; /* a deadline already past: still give SIGTERM a second */
    if (!s->child_alive && s->phase == P_RUN) {
        /* The child already ended by itself; only commits are left. They
         * get until the deadline; the outcome stays the child's. */
        s->drain_deadline = d;
        log_msg(LOG_INFO, "stop", "%s after the child exited: finishing commits", reason);
        return;
    }
    if (s->phase != P_RUN) {
        /* Already stopping: a nearer deadline shortens it, nothing else
         * (but the job's own processes may have got the signal too). */
        if (d < s->deadline && !s->no_kill) {
            s->deadline = d;
#if defined(CKPT_WITH_S3) || defined(CKPT_WITH_AZURE)
            ckpt_retry_set_deadline(d);
#endif
            if (s->ckpt_end > d)
                s->ckpt_end = d;
        }
        s->job_signalled |= c->job;
        if (c->since_mono > 0 && c->since_mono < s->t_accept && c->since_mono > s->t0 - 60000)
            s->t_accept = c->since_mono;
        log_msg(LOG_INFO, "stop", "already stopping (%s)", reason);
        check_answered(s);
        return;
    }
    /* Ctrl-C is the user stopping the run; so is a plain SIGTERM under
     * SLURM (scancel): the scheduler warns with --signal (SIGUSR1/SIGXCPU)
     * before a time limit or preemption, and a requeued job resumes anyway.
     * Stopped runs are not resumed by `recover`. */
    if (strcmp(reason, "SIGINT") == 0) {
        user = 1;
        s->term_sig = SIGINT;
        s->no_kill = 1; /* let the interrupt proceed; the child decides */
    } else if (strcmp(reason, "SIGTERM") == 0 && getenv("SLURM_JOB_ID") && !s->warned) {
        user = 1;
    }
    s->user_stop = user;
    s->job_signalled = c->job;
    total = d - now;
    killwin = total / 3;
    if (killwin > (int64_t)s->o->grace_ms)
        killwin = (int64_t)s->o->grace_ms;
    s->t0 = now;
    s->t_accept = c->since_mono > 0 && c->since_mono < now && c->since_mono > now - 60000
                      ? c->since_mono : now;
    s->deadline = d;
    s->ckpt_end = d - killwin;
#if defined(CKPT_WITH_S3) || defined(CKPT_WITH_AZURE)
    ckpt_retry_set_deadline(d); /* the store's retries end with the stop (retry.h) */
#endif
    snprintf(s->stop_reason, sizeof s->stop_reason, "%s", reason);
    snprintf(s->stop_provider, sizeof s->stop_provider, "%s", c->provider ? c->provider : "");
    s->phase = P_CKPT;
    if (!user)
        s->preemptions++;
    /* A short budget takes a faster codec for this one save. */
    if (s->o->codec != CKPT_CODEC_NONE && s->o->codec != CKPT_CODEC_LZ4) {
        int64_t budget = s->ckpt_end - now;
        if (budget < 3000)
            codec = "none";
        else if (budget < 15000 || (s->last_commit_s > 0 && s->last_commit_s * 1500 > budget))
            codec = "lz4";
    }
    if ((f = fields())) {
        cJSON_AddStringToObject(f, "reason", reason);
        if (c->provider && *c->provider)
            cJSON_AddStringToObject(f, "provider", c->provider);
        if (user)
            cJSON_AddBoolToObject(f, "user", 1);
        if (c->deadline_unix > 0)
            cJSON_AddNumberToObject(f, "deadline_ms", (double)c->deadline_unix);
        cJSON_AddNumberToObject(f, "budget_ms", (double)total);
        if (s->last_step >= 0)
            cJSON_AddNumberToObject(f, "last_step", (double)s->last_step);
    }
    event(s, LOG_INFO, "stop", f, 1);
    watch_set_settle(s->w, s->o->settle_ms < STOP_SETTLE_MS ? s->o->settle_ms : STOP_SETTLE_MS);
    if (codec)
        watch_next_codec(s->w, strcmp(codec, "none") == 0 ? CKPT_CODEC_NONE : CKPT_CODEC_LZ4);
    s->via = s->child_alive ? deliver_request(s, "stop", now_ms() + (s->ckpt_end - now), codec,
                                              c->except, c->self)
                            : CH_NONE;
    if (s->via == CH_NONE) {
        /* Nothing can reach the child: the final checkpoint is what is
         * complete already plus the commits in flight. Stop it at once. */
        enter_term(s);
    }
    check_answered(s);
}

/* A stop from a signal: ckptrun's own (SIGTERM, SIGUSR1, SIGXCPU, SIGINT),
 * the job's process group's (the keeper saw it: job = 1, every process
 * that turns signals into stops got it too), or one a client process took
 * as a stop and reported (from_slot). */
static void stop_on_signal(struct sup *s, int sig, int job, int from_slot, enum channel self,
                           int64_t since_mono)
{
    char reason[16];
    struct cause c = { reason, 0, NULL, -1, CH_NONE, since_mono, job };

    /* a copy: signal_name() reuses one buffer */
    snprintf(reason, sizeof reason, "%s", signal_name(sig));
    if (job && from_slot < 0)
        c.except = -2;
    else if (from_slot >= 0) {
        c.except = from_slot;
        c.self = self;
    }
    if (sig == SIGUSR1 || sig == SIGXCPU) {
        /* Batch schedulers (SLURM --signal, LSF, PBS) warn this way ahead
         * of the time limit: a stop with --lead to go. */
        s->warned = 1;
        c.deadline_unix = now_ms() + (int64_t)s->o->lead_ms + STOP_MARGIN_MS;
    }
    begin_stop(s, &c);
}

static void handle_notice(struct sup *s, struct notice *n)
{
    cJSON *f = fields();
    if (f) {
        cJSON_AddStringToObject(f, "kind", n->kind == CKPTRUN_NOTICE_REBALANCE ? "rebalance"
                                          : n->kind == CKPTRUN_NOTICE_MAINTENANCE ? "maintenance"
                                          : "preempt");
        cJSON_AddStringToObject(f, "provider", n->provider);
        if (n->deadline_ms)
            cJSON_AddNumberToObject(f, "deadline_ms", (double)n->deadline_ms);
    }
    event(s, LOG_INFO, "notice", f, 1);
    if (n->kind == CKPTRUN_NOTICE_REBALANCE) {
        deliver_request(s, "rebalance", 0, NULL, -1, CH_NONE);
        if (n->ack)
            n->ack(n->ack_user, 0, s->last_step < 0 ? 0 : (uint64_t)s->last_step);
        free(n);
        return;
    }
    n->next = s->acks;
    s->acks = n;
    {
        struct cause c = { "notice", n->deadline_ms, n->provider, -1, CH_NONE, 0, 0 };
        begin_stop(s, &c);
    }
    if (s->final_done)
        finish_acks(s);
}

/* ---- child --------------------------------------------------------------- */

/* Build the child's environment: ours, with the CKPT_* variables replaced. */
static char **child_env(struct sup *s, const char *preload)
{
    static const char *const ours[] = { "CKPT_SOCKET=", "CKPT_DIR=", "CKPT_STORE=", "CKPT_RUN=",
                                        "CKPT_SIGNAL=", "CKPT_RESUMED=", "CKPT_STEP=",
                                        "CKPT_CODEC=", "CKPT_KEEP=", "LD_PRELOAD=",
                                        "CKPT_EPOCH=", "CKPT_SOCKET_KEY=", NULL };
    size_t n = 0, k = 0;
    char **env, buf[PATH_MAX + 64];

    for (char **e = environ; *e; e++)
        n++;
    env = calloc(n + 16, sizeof *env);
    if (!env)
        return NULL;
    for (char **e = environ; *e; e++) {
        int skip = 0;
        for (int i = 0; ours[i]; i++)
            if (strncmp(*e, ours[i], strlen(ours[i])) == 0)
                skip = 1;
        if (!skip)
            env[k++] = *e; /* borrowed: environ outlives the fork */
    }
#define ADD(...)                                                                  \
    do {                                                                          \
        snprintf(buf, sizeof buf, __VA_ARGS__);                                   \
        if (!(env[k++] = strdup(buf)))                                            \
            goto oom;                                                             \
    } while (0)
    if (s->sock[0]) {
        ADD("CKPT_SOCKET=%s", s->sock);
        ADD("CKPT_SOCKET_KEY=%s", ctl_key(s->ctl)); /* for processes outside our tree */
    }
    ADD("CKPT_DIR=%s", s->dir);
    ADD("CKPT_STORE=%s", s->o->store);
    ADD("CKPT_RUN=%s", s->o->run);
    ADD("CKPT_SIGNAL=%s", s->o->sig ? signal_name(s->o->sig) : "none");
    ADD("CKPT_RESUMED=%d", s->resumed);
    if (s->resumed)
        ADD("CKPT_STEP=%" PRIu64, s->restored_step);
    if (s->o->codec_str)
        ADD("CKPT_CODEC=%s", s->o->codec_str);
    ADD("CKPT_KEEP=%u", s->o->keep);
    if (s->epoch)
        ADD("CKPT_EPOCH=%" PRIu64, s->epoch); /* the child's commits carry our lease epoch */
    if (preload) {
        const char *old = getenv("LD_PRELOAD");
        ADD("LD_PRELOAD=%s%s%s", preload, old && *old ? ":" : "", old && *old ? old : "");
    }
#undef ADD
    return env;
oom:
    return NULL; /* leaks a few strings on the way to exit */
}

/* Where the preload shim lives: next to our library directory. */
static int find_preload(char *out, size_t n)
{
    static const char *const rel[] = { "../lib/libckpt_preload.so", "../lib64/libckpt_preload.so",
                                       "../lib/x86_64-linux-gnu/libckpt_preload.so",
                                       "../lib/aarch64-linux-gnu/libckpt_preload.so", NULL };
    char exe[PATH_MAX], *slash;
    const char *env = getenv("CKPT_PRELOAD_LIB");
    ssize_t l;
    int rc = -1;

    if (env && *env) {
        snprintf(out, n, "%s", env);
        rc = access(out, R_OK) == 0 ? 0 : -1;
        goto out;
    }
    if ((l = readlink("/proc/self/exe", exe, sizeof exe - 1)) < 0)
        goto out;
    exe[l] = '\0';
    if (!(slash = strrchr(exe, '/')))
        goto out;
    *slash = '\0';
    for (int i = 0; rel[i] && rc != 0; i++) {
        char p[PATH_MAX + 64];
        snprintf(p, sizeof p, "%s/%s", exe, rel[i]);
        if (access(p, R_OK) == 0 && realpath(p, out))
            rc = 0;
    }
out:
    return rc;
}

/* Start COMMAND under the keeper (keeper.h), in the keeper's process
 * group, which gets the terminal's foreground. @return 0, or -1 when
 * nothing could be started (errno); an exec failure is logged and leaves a
 * child that exits 127. */
static int spawn(struct sup *s, char **env)
{
    int exec_err = 0;

    if (keeper_start(&s->kp, s->o->args, env, s->tty, &exec_err) != 0)
        return -1;
    s->child = s->kp.child;
    s->pgid = s->kp.pid;
    s->child_alive = 1;
    if (s->tty && tcsetpgrp(STDIN_FILENO, s->pgid) != 0)
        log_msg(LOG_DEBUG, "tty", "tcsetpgrp: %s", strerror(errno));
    if (exec_err) {
        log_error("cannot run '%s': %s", s->o->args[0], strerror(exec_err));
        errno = exec_err;
        return -1; /* the child exits 127; its exit is reported */
    }
    return 0;
}

/* COMMAND ended (reported by the keeper, or reaped by us if the keeper
 * died). Leftover processes of the job (a metrics uploader, a daemon it
 * started) get SIGTERM now and SIGKILL after --grace (in a stop: by the
 * deadline). */
static void child_exited(struct sup *s, pid_t pid, int st)
{
    cJSON *f;

    if (!s->child_alive)
        return;
    s->child_alive = 0;
    s->child_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    s->child_sigint = (WIFSIGNALED(st) && WTERMSIG(st) == SIGINT) ||
                      (WIFEXITED(st) && WEXITSTATUS(st) == 128 + SIGINT);
    s->child_sigterm = (WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM) ||
                       (WIFEXITED(st) && WEXITSTATUS(st) == 128 + SIGTERM);
    if ((f = fields())) {
        cJSON_AddNumberToObject(f, "pid", (double)pid);
        cJSON_AddNumberToObject(f, "code", s->child_code);
        if (WIFSIGNALED(st))
            cJSON_AddStringToObject(f, "signal", signal_name(WTERMSIG(st)));
    }
    event(s, LOG_INFO, "child-exit", f, 0);
    /* A clean exit leaves no writer: what is still settling is done;
     * after any exit the links are read again (watch.h). */
    if (s->w)
        watch_child_exit(s->w, s->child_code);
    if (s->tty)
        tcsetpgrp(STDIN_FILENO, getpgrp());
    if (s->kp.alive) {
        int64_t grace = (int64_t)s->o->grace_ms;
        if (s->phase != P_RUN && s->deadline - mono_ms() < grace)
            grace = s->deadline - mono_ms();
        if (s->phase == P_KILL)
            keeper_kill(&s->kp);
        else
            keeper_finish(&s->kp, grace > 0 ? (unsigned)grace : 0);
    }
}

/* Ctrl-Z stopped the child: hand the terminal back and stop ourselves so
 * the shell sees the job stopped; on `fg` give it back and continue the
 * child. */
static void child_stopped(struct sup *s)
{
    if (!s->tty)
        return;
    tcsetpgrp(STDIN_FILENO, getpgrp());
    kill(getpid(), SIGSTOP);
    tcsetpgrp(STDIN_FILENO, s->pgid);
    signal_group(s, SIGCONT);
}

static void reap(struct sup *s)
{
    int st;
    pid_t pid;

    /* Every child: the keeper, hooks, and (as PID 1 or subreaper) orphans;
     * COMMAND itself only if the keeper died before it. */
    while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
        if (pid == s->kp.pid && s->kp.alive) {
            s->kp.alive = 0;
            if (s->child_alive && !WIFEXITED(st))
                log_msg(LOG_WARN, "keeper", "the job's keeper (pid %d) was killed (%s): its "
                        "processes are no longer tracked", (int)pid,
                        WIFSIGNALED(st) ? signal_name(WTERMSIG(st)) : "?");
        } else if (pid == s->child) {
            child_exited(s, pid, st); /* re-parented to us: the keeper is gone */
        }
    }
}

static void on_keeper(struct sup *s);

/* ---- event sources --------------------------------------------------------- */

/* The child saves through libckpt: its checkpoints are the run's, and a
 * run has a single writer, so the watcher stands down. (The preload shim
 * alone never saves: with it, the watcher keeps committing files.) */
static void child_writes(struct sup *s)
{
    if (s->child_writes)
        return;
    s->child_writes = 1;
    watch_pause(s->w);
    log_msg(LOG_INFO, "watch", "the child commits through libckpt: entries of %s are no "
            "longer committed by ckptrun", s->dir);
}

static void on_ctl(void *user, const struct ctl_event *ev)
{
    struct sup *s = user;
    cJSON *f = fields();

    switch (ev->type) {
    case CTL_HELLO:
        s->ever_connected = 1;
        if (f) {
            cJSON_AddNumberToObject(f, "pid", ev->pid);
            cJSON_AddNumberToObject(f, "items", (double)ev->items);
        }
        event(s, LOG_INFO, "connect", f, 0);
        return;
    case CTL_HELPER:
        if (f) {
            cJSON_AddNumberToObject(f, "pid", ev->pid);
            cJSON_AddStringToObject(f, "kind", "helper");
        }
        event(s, LOG_INFO, "connect", f, 0);
        return;
    case CTL_GONE:
        if (f)
            cJSON_AddNumberToObject(f, "pid", ev->pid);
        event(s, LOG_INFO, "disconnect", f, 0);
        if (s->term_due && !s->term_sent && ctl_unacked(s->ctl) == 0)
            send_term(s);
        return;
    case CTL_SIGNAL:
        /* A process of the job took a SIGTERM or SIGINT that reached it
         * directly as a stop: it saves at its next safe point. */
        if (f) {
            cJSON_AddNumberToObject(f, "pid", ev->pid);
            cJSON_AddStringToObject(f, "signal", ev->signal);
        }
        event(s, LOG_INFO, "child-signal", f, 0);
        stop_on_signal(s, strcmp(ev->signal, "SIGINT") == 0 ? SIGINT : SIGTERM, 1, ev->client,
                       ev->kind == CTL_KIND_LIB ? CH_SOCKET : CH_FILES, ev->mono_ms);
        return;
    case CTL_STOPPING_ACK:
        cJSON_Delete(f);
        if (s->term_due && !s->term_sent && ctl_unacked(s->ctl) == 0)
            send_term(s);
        return;
    case CTL_SAVING:
        s->ever_saving = 1;
        child_writes(s);
        if (s->phase != P_RUN && !s->saw_saving) {
            s->saw_saving = 1;
            s->await_step = ev->step;
        }
        if (f)
            cJSON_AddNumberToObject(f, "step", (double)ev->step);
        event(s, LOG_DEBUG, "saving", f, 0);
        return;
    case CTL_COMMITTED:
        child_writes(s);
        note_commit(s, ev->step, ev->seconds);
        if (f) {
            cJSON_AddNumberToObject(f, "step", (double)ev->step);
            cJSON_AddNumberToObject(f, "bytes", (double)ev->bytes);
            cJSON_AddNumberToObject(f, "stored", (double)ev->stored);
            cJSON_AddNumberToObject(f, "ratio", ev->stored ? (double)(int64_t)((double)ev->bytes / (double)ev->stored * 100) / 100.0 : 0);
            cJSON_AddNumberToObject(f, "mb_s", ev->seconds > 0 ? (double)(int64_t)((double)ev->bytes / 1e6 / ev->seconds * 10) / 10.0 : 0);
            cJSON_AddNumberToObject(f, "seconds", ev->seconds);
            cJSON_AddStringToObject(f, "source", "socket");
        }
        event(s, LOG_INFO, "commit", f, 1);
        /* The answer to the stop request is the save that started after it
         * ("saving" after the request); a save already in flight then holds
         * older state. Without "saving" messages, any commit after it. */
        if (s->phase != P_RUN && s->via == CH_SOCKET &&
            (s->saw_saving ? ev->step == s->await_step : !s->ever_saving)) {
            final_result(s, 1);
            enter_term(s);
        }
        return;
    case CTL_FAILED:
        if (f) {
            cJSON_AddNumberToObject(f, "step", (double)ev->step);
            cJSON_AddStringToObject(f, "error", ev->error);
            cJSON_AddStringToObject(f, "detail", ev->detail);
        }
        event(s, LOG_WARN, "commit-failed", f, 1);
        if (ev->error && strcmp(ev->error, ckpt_strerror(CKPT_E_FENCED)) == 0)
            renewer_kick(&s->rn); /* a takeover? the renewal says */
        if (s->phase != P_RUN && s->via == CH_SOCKET &&
            (s->saw_saving ? ev->step == s->await_step : !s->ever_saving)) {
            final_result(s, 0);
            enter_term(s);
        }
        return;
    case CTL_FILE:
        cJSON_Delete(f);
        watch_file_event(s->w, ev->path, ev->file_event);
        return;
    }
    cJSON_Delete(f);
}

static void on_result(struct sup *s, struct watch_result *r)
{
    cJSON *f;

    if (r->res.st == CKPT_OK) {
        note_commit(s, r->res.step, r->res.seconds);
        if (r->changed_mono > s->last_changed)
            s->last_changed = r->changed_mono;
        if (s->rec)
            record_mark_files(s->rec, r->res.step, (const char *const *)r->entries, r->nentries);
        f = commit_fields(&r->res, "watch");
        if (f)
            cJSON_AddStringToObject(f, "entry", r->entry);
        event(s, LOG_INFO, "commit", f, 1);
    } else {
        if (s->phase != P_RUN)
            s->failed_since_stop = 1;
        if ((f = fields())) {
            cJSON_AddStringToObject(f, "entry", r->entry);
            cJSON_AddNumberToObject(f, "step", (double)r->res.step);
            cJSON_AddStringToObject(f, "error", ckpt_strerror(r->res.st));
            cJSON_AddStringToObject(f, "detail", r->res.detail);
        }
        event(s, LOG_WARN, "commit-failed", f, 1);
        if (r->res.st == CKPT_E_FENCED)
            renewer_kick(&s->rn); /* a takeover? the renewal says */
    }
    /* A signal-aware trainer's answer to the stop request: an entry written
     * (last changed) after the request -- or after the stop's signal reached
     * the job, when the trainer took it itself; one that was only settling
     * then is older state. */
    if (s->phase != P_RUN && (s->via == CH_SIGNAL || s->via == CH_FILES) &&
        r->changed_mono >= s->t_accept) {
        final_result(s, r->res.st == CKPT_OK);
        enter_term(s);
    }
}

/* Reports of the keeper (keeper.h). */
static void on_keeper(struct sup *s)
{
    struct keeper_msg m;
    int r;

    while ((r = keeper_read(&s->kp, &m)) > 0) {
        switch (m.type) {
        case KR_EXIT:
            child_exited(s, m.pid, m.value);
            break;
        case KR_STOPPED:
            child_stopped(s);
            break;
        case KR_SIGNAL:
            /* The job's process group got SIGTERM (kill -TERM -PGID, a
             * scheduler or systemd signalling every process) or SIGINT
             * (Ctrl-C on the terminal, which the job holds): a stop, as if
             * it had been sent to us. */
            if (m.value == SIGTERM || m.value == SIGINT) {
                cJSON *f = fields();
                if (f) {
                    cJSON_AddStringToObject(f, "signal", signal_name(m.value));
                    cJSON_AddNumberToObject(f, "sender", m.pid);
                }
                event(s, LOG_INFO, "group-signal", f, 0);
                stop_on_signal(s, m.value, 1, -1, CH_NONE, mono_ms());
            }
            break;
        default:
            break;
        }
    }
    if (r < 0) {
        /* The keeper exited: every report is read. */
        close(s->kp.rep_fd);
        s->kp.rep_fd = -1;
    }
}

static void on_signal(struct sup *s, int sig)
{
    cJSON *f;

    switch (sig) {
    case SIGCHLD:
        reap(s);
        break;
    case SIGTERM:
    case SIGUSR1:
    case SIGXCPU:
        stop_on_signal(s, sig, 0, -1, CH_NONE, 0);
        break;
    case SIGUSR2:
        deliver_request(s, "manual", 0, NULL, -1, CH_NONE);
        break;
    case SIGINT:
    case SIGHUP:
    case SIGQUIT:
        if ((f = fields()))
            cJSON_AddStringToObject(f, "signal", signal_name(sig));
        event(s, LOG_INFO, "forward", f, 0);
        signal_group(s, sig);
        /* SIGINT is the user interrupting the run: the job's processes got
         * it now (those that turn it into a stop ask themselves). */
        if (sig == SIGINT)
            stop_on_signal(s, SIGINT, 1, -1, CH_NONE, mono_ms());
        break;
    default:
        break;
    }
}

/* ---- setup ------------------------------------------------------------------ */

struct newest_files {
    struct sup *s;
    uint64_t steps[64];
    int n;
};

static int collect_steps(void *user, const struct ckpt_info *info)
{
    struct newest_files *nf = user;
    nf->steps[nf->n++] = info->step;
    return nf->n == (int)(sizeof nf->steps / sizeof nf->steps[0]);
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    return (flag == FTW_DP ? rmdir(path) : unlink(path)) == 0 || errno == ENOENT ? 0 : -1;
}

static int rm_rf(const char *path)
{
    return nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* Restore checkpoint `step` into a hidden staging directory inside `dir`
 * (same file system; hidden names are never watched entries), then move
 * each top-level entry into place. A restore that fails half-way leaves
 * nothing behind for the trainer to trip over, and the trainer never sees a
 * partly restored entry. An entry of the same name already there is
 * replaced: the committed one is the truth. */
static ckpt_status restore_staged(struct ckpt_ctx *ctx, uint64_t step, const char *dir,
                                  uint64_t *got)
{
    char stage[PATH_MAX + 64], from[PATH_MAX + 320], to[PATH_MAX + 256];
    DIR *d = NULL;
    struct dirent *de;
    ckpt_status st;

    snprintf(stage, sizeof stage, "%s/.ckptrun-restore-XXXXXX", dir);
    if (!mkdtemp(stage)) {
        log_msg(LOG_WARN, "restore", "cannot create a staging directory in %s: %s", dir,
                strerror(errno));
        st = CKPT_E_IO;
        goto out;
    }
    st = ckpt_restore_dir(ctx, step, stage, got);
    if (st != CKPT_OK)
        goto out;
    if (!(d = opendir(stage))) {
        st = CKPT_E_IO;
        goto out;
    }
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        snprintf(from, sizeof from, "%s/%s", stage, de->d_name);
        snprintf(to, sizeof to, "%s/%s", dir, de->d_name);
        if (rename(from, to) != 0) {
            /* A non-empty directory or a file/dir mismatch is in the way. */
            if (rm_rf(to) != 0 || rename(from, to) != 0) {
                log_msg(LOG_WARN, "restore", "cannot move %s into place: %s", to, strerror(errno));
                st = CKPT_E_IO;
                goto out;
            }
        }
    }
out:
    if (d)
        closedir(d);
    if (stage[0] && strstr(stage, "XXXXXX") == NULL)
        rm_rf(stage);
    return st;
}

/* Restore the newest committed checkpoint of files (marked in the record)
 * into CKPT_DIR, falling back past damaged ones. @return 0 or an exit code. */
static int restore_latest(struct sup *s, struct ckpt_ctx *ctx)
{
    struct newest_files nf = { .s = s };
    ckpt_status st;
    int rc = 0, nbad = 0;
    uint64_t bad[sizeof nf.steps / sizeof nf.steps[0]];

    st = ckpt_list(ctx, collect_steps, &nf);
    if (st != CKPT_OK) {
        log_error("cannot list checkpoints of run %s in %s: %s %s", s->o->run, s->o->store,
                  ckpt_strerror(st), ckpt_errmsg(ctx));
        rc = exit_code_for_status(st);
        goto out;
    }
    if (nf.n > 0)
        s->last_step = (int64_t)nf.steps[0];
    for (int i = 0; i < nf.n; i++) {
        uint64_t got = 0;
        int m = record_has_files(s->rec, nf.steps[i]);
        if (m < 0) {
            log_error("cannot read the run record of %s", s->o->run);
            rc = EXIT_UNAVAILABLE;
            goto out;
        }
        if (m == 0)
            continue; /* a checkpoint of memory regions: libckpt's business */
        st = restore_staged(ctx, nf.steps[i], s->dir, &got);
        if (st == CKPT_E_CORRUPT)
            bad[nbad++] = nf.steps[i]; /* damaged: out of the resume order below */
        if (st == CKPT_OK) {
            s->resumed = 1;
            s->restored_step = got;
            cJSON *f = fields();
            if (f) {
                cJSON_AddNumberToObject(f, "step", (double)got);
                cJSON_AddStringToObject(f, "dir", s->dir);
            }
            event(s, LOG_INFO, "restore", f, 0);
            goto out;
        }
        if (st != CKPT_E_CORRUPT) {
            /* Not damage (libckpt calls a missing part damage too): the
             * store or this machine failed. An older checkpoint would hit
             * the same wall, or resume the trainer below an intact one it
             * could never resume past: stop, starting nothing. */
            int local = st == CKPT_E_IO || st == CKPT_E_NOSPACE || st == CKPT_E_PERM ||
                        st == CKPT_E_UNSAFE || st == CKPT_E_NOMEM;
            log_error("cannot restore step %" PRIu64 " of run %s into %s (%s%s: %s); not "
                      "starting the command", nf.steps[i], s->o->run, s->dir,
                      local ? "this machine: " : "the store: ", ckpt_strerror(st),
                      ckpt_errmsg(ctx));
            rc = local ? EXIT_CONFIG : exit_code_for_status(st);
            goto out;
        }
        log_msg(LOG_WARN, "fallback", "checkpoint at step %" PRIu64 " cannot be restored (%s: %s); "
                "trying an older one", nf.steps[i], ckpt_strerror(st), ckpt_errmsg(ctx));
    }
out:
    /* the lease holder drops what it found damaged from the resume order, so
     * the trainer's commits from here on resume (docs/FORMAT.md, HEAD) */
    if (nbad && rc == 0 && ckpt_mark_damaged(ctx, bad, (size_t)nbad) != CKPT_OK)
        log_msg(LOG_WARN, "fallback", "cannot mark the damaged checkpoints: %s", ckpt_errmsg(ctx));
    return rc;
}

static void run_hook(struct sup *s, const char *cmd, const char *state, int code)
{
    char buf[32];
    pid_t pid;
    int st;

    if (!cmd || !*cmd)
        return;
    /* Our own environment: we are about to exit, and the child's copy was
     * built separately. */
    setenv("CKPT_RUN", s->o->run, 1);
    setenv("CKPT_STATE", state, 1);
    if (s->last_step >= 0) {
        snprintf(buf, sizeof buf, "%" PRId64, s->last_step);
        setenv("CKPT_STEP", buf, 1);
    } else {
        unsetenv("CKPT_STEP");
    }
    snprintf(buf, sizeof buf, "%d", code);
    setenv("CKPT_EXIT", buf, 1);
    log_msg(LOG_INFO, "hook", "%s", cmd);
    pid = fork();
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    if (pid < 0 || waitpid(pid, &st, 0) != pid)
        log_msg(LOG_WARN, "hook", "cannot run hook: %s", strerror(errno));
    else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        log_msg(LOG_WARN, "hook", "hook exited with %d",
                WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}

static void arm_timer(struct sup *s)
{
    int64_t due = -1, cands[5] = { s->next_periodic, s->watch_due, -1, -1, -1 };
    struct itimerspec its;

    if (s->phase == P_CKPT)
        cands[2] = s->ckpt_end;
    if (s->phase == P_CKPT || (s->phase == P_TERM && (!s->no_kill || !s->child_alive)) ||
        (s->phase == P_KILL && !s->child_alive))
        cands[3] = s->deadline;
    if (s->term_due && !s->term_sent)
        cands[4] = s->term_due;
    for (int i = 0; i < 5; i++)
        if (cands[i] > 0 && (due < 0 || cands[i] < due))
            due = cands[i];
    if (s->drain_deadline && (due < 0 || s->drain_deadline < due))
        due = s->drain_deadline;
    memset(&its, 0, sizeof its);
    if (due > 0) {
        if (due <= mono_ms())
            due = mono_ms() + 1; /* zero would disarm */
        its.it_value.tv_sec = due / 1000;
        its.it_value.tv_nsec = (due % 1000) * 1000000;
    }
    timerfd_settime(s->tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

static void on_timer(struct sup *s)
{
    int64_t now = mono_ms();
    uint64_t ticks;

    if (read(s->tfd, &ticks, sizeof ticks) < 0)
        (void)0; /* spurious wake-up; the checks below are idempotent */
    if (s->next_periodic > 0 && now >= s->next_periodic) {
        if (s->phase == P_RUN && s->child_alive)
            deliver_request(s, "periodic", 0, NULL, -1, CH_NONE);
        s->next_periodic = now + (int64_t)s->o->interval_ms;
    }
    if (s->phase == P_CKPT && now >= s->ckpt_end) {
        log_msg(LOG_WARN, "stop", "no checkpoint committed in time; stopping the child");
        enter_term(s);
    }
    if (s->term_due && !s->term_sent && now >= s->term_due) {
        log_msg(LOG_DEBUG, "stop", "%d client(s) did not acknowledge `stopping` in time",
                ctl_unacked(s->ctl));
        send_term(s);
    }
    if (s->phase == P_TERM && now >= s->deadline && !(s->no_kill && s->child_alive)) {
        s->phase = P_KILL;
        if (s->child_alive) {
            log_msg(LOG_WARN, "kill", "child did not exit in time: SIGKILL to every process "
                    "of the job (group %d)", (int)s->pgid);
            kill_all(s);
        }
    }
}

/* Done when the child is gone, commits are finished and no process of the
 * job is left (or, during a stop, the deadline has come). */
static int loop_done(struct sup *s)
{
    int tree_left = s->kp.alive || s->kp.rep_fd >= 0;
    if (s->child_alive)
        return 0;
    if (!watch_busy(s->w) && !tree_left)
        return 1;
    if (s->drain_deadline && mono_ms() >= s->drain_deadline && !tree_left)
        return 1;
    return s->phase != P_RUN && mono_ms() >= s->deadline;
}

static const char *fmt_ms(int64_t ms, char *buf, size_t n)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    if (ms <= 0 || !gmtime_r(&t, &tm) || !strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm))
        snprintf(buf, n, "never");
    return buf;
}

/* The loop is over (the deadline may have cut it short): nothing of the
 * job may outlive us. The keeper SIGKILLs what is left; wait briefly for
 * it (processes in uninterruptible sleep can take a moment). */
static void end_tree(struct sup *s)
{
    int64_t until = mono_ms() + 2000;

    if (!s->kp.alive)
        return;
    keeper_kill(&s->kp);
    while (s->kp.alive && mono_ms() < until) {
        struct timespec ts = { 0, 10 * 1000000L };
        reap(s);
        if (s->kp.alive)
            nanosleep(&ts, NULL);
    }
    if (s->kp.alive)
        log_msg(LOG_WARN, "exit", "processes of the job are still exiting; the keeper (pid %d) "
                "kills them after we exit", (int)s->kp.pid);
}

/* recover: a completed run needs nothing (one GET). @return 1 when the
 * caller must exit with *rc, 0 to go on. */
static int check_completed(struct sup *s, int *rc)
{
    cJSON *run = NULL;
    ckpt_status st = record_read_run(s->rec, &run);
    const cJSON *state, *step;
    char t[40];
    int done = 0;

    if (st == CKPT_OK) {
        state = cJSON_GetObjectItemCaseSensitive(run, "state");
        step = cJSON_GetObjectItemCaseSensitive(run, "last_step");
        int stopped = cJSON_IsString(state) && strcmp(state->valuestring, "stopped") == 0;
        if (stopped && !s->o->resume_stopped) {
            /* Its user stopped it (Ctrl-C, scancel): a cron line must not
             * start again what the user ended. */
            char sb[32] = "none";
            if (cJSON_IsNumber(step))
                snprintf(sb, sizeof sb, "%.0f", step->valuedouble);
            log_msg(LOG_INFO, "recover", "run %s was stopped by its user (last step %s, at %s): "
                    "nothing to do (--resume-stopped resumes it)", s->o->run, sb,
                    fmt_ms((int64_t)cJSON_GetNumberValue(
                               cJSON_GetObjectItemCaseSensitive(run, "updated_ms")), t, sizeof t));
            *rc = 0;
            done = 1;
        } else if (cJSON_IsString(state) && strcmp(state->valuestring, "completed") == 0) {
            char sb[32] = "none";
            if (cJSON_IsNumber(step))
                snprintf(sb, sizeof sb, "%.0f", step->valuedouble);
            log_msg(LOG_INFO, "recover", "run %s is completed (last step %s, at %s): nothing "
                    "to do", s->o->run, sb,
                    fmt_ms((int64_t)cJSON_GetNumberValue(
                               cJSON_GetObjectItemCaseSensitive(run, "updated_ms")), t, sizeof t));
            *rc = 0;
            done = 1;
        }
    } else if (st != CKPT_E_NOENT && st != CKPT_E_CORRUPT) {
        /* NOENT: a new run, started below; CORRUPT: the lease decides */
        log_error("cannot read the run record of %s in %s: %s", s->o->run, s->o->store,
                  ckpt_strerror(st));
        *rc = exit_code_for_status(st);
        done = 1;
    }
    cJSON_Delete(run);
    return done;
}

/* Take the run's lease. @return 1 when the caller must exit with *rc (held
 * elsewhere: recover 0, run EXIT_LEASE_HELD; store errors), 0 when held. */
static int take_lease(struct sup *s, int *rc)
{
    struct lease_info other;
    char err[CKPT_ERR_MAX] = "", hb[40], ex[40], desc[700];
    int64_t now;
    ckpt_status st;
    int stop = 1;

    if (lease_open(record_store(s->rec), s->o->run, s->o->lease_ms, NULL, &s->lease) != CKPT_OK) {
        log_error("out of memory");
        *rc = EXIT_CONFIG;
        goto out;
    }
    st = lease_acquire(s->lease, &other, err);
    if (st == CKPT_E_EXISTS || st == CKPT_E_PRECONDITION) {
        now = now_ms();
        if (other.holder[0])
            snprintf(desc, sizeof desc, "held by %s (epoch %" PRIu64 "), last heartbeat %s "
                     "(%llds ago), expires %s", other.holder, other.epoch,
                     fmt_ms(other.heartbeat_ms, hb, sizeof hb),
                     (long long)((now - other.heartbeat_ms) / 1000),
                     fmt_ms(other.expires_ms, ex, sizeof ex));
        else
            snprintf(desc, sizeof desc, "taken by another runner just now");
        if (s->mode == SUP_RECOVER) {
            log_msg(LOG_INFO, "recover", "run %s is %s: nothing to do", s->o->run, desc);
            *rc = 0;
        } else {
            log_error("run %s is %s: refusing to start a second runner; stop that one, wait "
                      "for its lease to expire, or use `ckptrun recover`", s->o->run, desc);
            *rc = EXIT_LEASE_HELD;
        }
        goto out;
    }
    if (st != CKPT_OK) {
        log_error("cannot take the lease of run %s in %s: %s%s%s", s->o->run, s->o->store,
                  ckpt_strerror(st), err[0] ? ": " : "", err);
        *rc = exit_code_for_status(st);
        goto out;
    }
    s->epoch = lease_epoch(s->lease);
    if (lease_took_stale(s->lease)) {
        /* A runner of this run died on this machine (killed, or the job
         * was requeued after a hard kill): its lease would only have kept
         * the run waiting until the expiry. */
        log_msg(LOG_INFO, "lease", "run %s was held by %s (epoch %" PRIu64 "), whose process "
                "(pid %d on this host) is gone: lease taken over at once", s->o->run,
                other.holder, other.epoch, other.pid);
        snprintf(s->stale_holder, sizeof s->stale_holder, "%s", other.holder);
    }
    stop = 0;
out:
    return stop;
}

/* Rewrite HEAD at our epoch so that the previous holder, should it still
 * be alive (frozen, partitioned), can no longer commit. */
static int fence_run(struct sup *s, struct ckpt_ctx *ctx, int *rc)
{
    ckpt_status st = CKPT_E_PRECONDITION;

    /* HEAD changing under us: a stale writer's last commit; try again */
    for (int i = 0; i < 5 && st == CKPT_E_PRECONDITION; i++)
        st = ckpt_fence(ctx, s->epoch);
    if (st != CKPT_OK) {
        log_error("cannot fence run %s at epoch %" PRIu64 ": %s %s", s->o->run, s->epoch,
                  ckpt_strerror(st), ckpt_errmsg(ctx));
        *rc = exit_code_for_status(st);
    }
    return st != CKPT_OK;
}

int cmd_run(struct opts *o)
{
    return supervise(o, SUP_RUN);
}

int supervise(struct opts *o, enum sup_mode mode)
{
    struct sup sv, *s = &sv;
    struct ckpt_ctx *ctx = NULL;
    struct ckpt_config cfg;
    char err[CKPT_ERR_MAX] = "", preload[PATH_MAX], why[CKPT_ERR_MAX];
    char **env = NULL;
    cJSON *prev = NULL, *f;
    ckpt_status st;
    int rc = 0, started = 0, notices = 0;
    const char *state = "failed";

    memset(s, 0, sizeof *s);
    s->o = o;
    s->mode = mode;
    s->sfd = s->tfd = -1;
    s->kp.cmd_fd = s->kp.rep_fd = -1;
    s->last_step = -1;
    s->last_changed = -1;
    s->term_sig = SIGTERM;
    s->watch_due = -1;
    s->started_ms = now_ms();
    if (o->nargs < 1) {
        log_error("no command to run: ckptrun [run] [OPTIONS] -- COMMAND [ARG...]");
        rc = EXIT_USAGE;
        goto out;
    }
    if (o->preload && find_preload(preload, sizeof preload) != 0) {
        log_error("--preload: libckpt_preload.so not found next to ckptrun "
                  "(set CKPT_PRELOAD_LIB to its path)");
        rc = EXIT_CONFIG;
        goto out;
    }
    /* Block the signals we handle before anything can send them; they are
     * read from the signalfd. The child unblocks everything before exec. */
    sigemptyset(&s->mask);
    sigaddset(&s->mask, SIGCHLD);
    sigaddset(&s->mask, SIGTERM);
    sigaddset(&s->mask, SIGINT);
    sigaddset(&s->mask, SIGHUP);
    sigaddset(&s->mask, SIGQUIT);
    sigaddset(&s->mask, SIGUSR1);
    sigaddset(&s->mask, SIGUSR2);
    sigaddset(&s->mask, SIGXCPU);
    if (sigprocmask(SIG_BLOCK, &s->mask, NULL) != 0 ||
        (s->sfd = signalfd(-1, &s->mask, SFD_NONBLOCK | SFD_CLOEXEC)) < 0 ||
        (s->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)) < 0 ||
        (g_nfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
        log_error("cannot set up signals/timers: %s", strerror(errno));
        rc = EXIT_CONFIG;
        goto out;
    }
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTTOU, SIG_IGN); /* tcsetpgrp from the background */
    if (getpid() != 1)
        prctl(PR_SET_CHILD_SUBREAPER, 1); /* orphans of the job come to us */

    st = record_open(o->store, o->run, &s->rec, err);
    if (st != CKPT_OK) {
        log_error("cannot open store %s: %s%s%s", o->store, ckpt_strerror(st), err[0] ? ": " : "",
                  err);
        rc = exit_code_for_status(st);
        goto out;
    }
    /* recover with nothing to do costs a GET of RUN and one of LEASE, and
     * touches nothing (not even CKPT_DIR): it runs every minute. */
    if (mode == SUP_RECOVER && check_completed(s, &rc))
        goto out;
    if (take_lease(s, &rc))
        goto out;
    /* The run may have completed between our look and the lease. */
    if (mode == SUP_RECOVER && check_completed(s, &rc))
        goto out;
    record_set_epoch(s->rec, s->epoch);
    if (mkdir_owner(o->dir) != 0 || access(o->dir, W_OK | X_OK) != 0) {
        log_error("checkpoint directory %s is not usable: %s", o->dir, strerror(errno));
        rc = EXIT_CONFIG;
        goto out;
    }
    if (!realpath(o->dir, s->dir)) {
        log_error("checkpoint directory %s: %s", o->dir, strerror(errno));
        rc = EXIT_CONFIG;
        goto out;
    }
    opts_to_config(o, &cfg);
    cfg.epoch = s->epoch; /* our own commits carry the epoch too */
    st = ckpt_open(&cfg, &ctx);
    if (st != CKPT_OK) {
        log_error("cannot open store %s (run %s): %s", o->store, o->run, ckpt_strerror(st));
        rc = exit_code_for_status(st);
        goto out;
    }
    if (fence_run(s, ctx, &rc))
        goto out;
    /* Renew from now on: a restore or a long start must not let it lapse. */
    if (renewer_start(&s->rn, s->lease) != 0) {
        log_error("cannot start the lease renewal thread");
        rc = EXIT_CONFIG;
        goto out;
    }
    if ((rc = restore_latest(s, ctx)) != 0)
        goto out;
    if (record_start_writer(s->rec) != 0) {
        log_error("cannot start the record writer thread");
        rc = EXIT_CONFIG;
        goto out;
    }
    if ((f = fields())) {
        cJSON_AddStringToObject(f, "action", "acquired");
        cJSON_AddStringToObject(f, "holder", lease_holder(s->lease));
        cJSON_AddNumberToObject(f, "epoch", (double)s->epoch);
        cJSON_AddNumberToObject(f, "ttl_ms", (double)lease_ttl_ms(s->lease));
        if (s->stale_holder[0])
            cJSON_AddStringToObject(f, "stale_holder", s->stale_holder);
    }
    event(s, LOG_INFO, "lease", f, 1);
    s->lease_told = 1;
    if (record_read_run(s->rec, &prev) == CKPT_OK)
        s->preemptions = (uint64_t)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(prev, "preemptions"));
    if (watch_open(&s->w, s->dir, o->marker, o->settle_ms, ctx, s->rec) != 0) {
        rc = EXIT_CONFIG;
        goto out;
    }
    ctx = NULL; /* owned by the watcher now */
    if (s->last_step >= 0)
        watch_note_step(s->w, (uint64_t)s->last_step);
    if (ctl_open(&s->ctl, s->sock, sizeof s->sock) != 0) {
        rc = EXIT_CONFIG;
        goto out;
    }
    if (ckptrun_notice_start) {
        struct ckptrun_notice_cfg nc = { o->notice, o->metadata_url, o->verbosity };
        if (ckptrun_notice_start(&nc) != 0) {
            log_error("--notice %s: cannot watch for notices", o->notice ? o->notice : "auto");
            rc = EXIT_CONFIG;
            goto out;
        }
        notices = 1;
    }
    if (!(env = child_env(s, o->preload ? preload : NULL))) {
        log_error("out of memory");
        rc = EXIT_CONFIG;
        goto out;
    }
    s->tty = isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp();
    set_state(s, "running");
    if (spawn(s, env) != 0 && !s->child_alive) {
        log_error("cannot start '%s' (the keeper of its process tree: %s)", o->args[0],
                  strerror(errno));
        rc = EXIT_CONFIG;
        goto out;
    }
    started = 1;
    watch_set_pgid(s->w, s->pgid);
    if ((f = fields())) {
        cJSON *a = cJSON_AddArrayToObject(f, "command");
        for (int i = 0; a && i < o->nargs; i++)
            cJSON_AddItemToArray(a, cJSON_CreateString(o->args[i]));
        cJSON_AddNumberToObject(f, "child_pid", (double)s->child);
        cJSON_AddStringToObject(f, "run", o->run);
        cJSON_AddBoolToObject(f, "resumed", s->resumed);
        if (s->resumed)
            cJSON_AddNumberToObject(f, "step", (double)s->restored_step);
    }
    event(s, LOG_INFO, "start", f, 1);
    if (o->interval_ms)
        s->next_periodic = mono_ms() + (int64_t)o->interval_ms;

    while (!loop_done(s)) {
        struct pollfd pf[MAX_PFDS];
        int n = 0;
        if (watch_dirty(s->w) || (s->watch_due >= 0 && mono_ms() >= s->watch_due))
            s->watch_due = watch_tick(s->w);
        if (loop_done(s))
            break;
        arm_timer(s);
        pf[n++] = (struct pollfd){ .fd = s->sfd, .events = POLLIN };
        pf[n++] = (struct pollfd){ .fd = s->tfd, .events = POLLIN };
        pf[n++] = (struct pollfd){ .fd = watch_inotify_fd(s->w), .events = POLLIN };
        pf[n++] = (struct pollfd){ .fd = watch_result_fd(s->w), .events = POLLIN };
        pf[n++] = (struct pollfd){ .fd = g_nfd, .events = POLLIN };
        pf[n++] = (struct pollfd){ .fd = s->kp.rep_fd, .events = POLLIN }; /* -1: ignored */
        int nbase = n;
        ctl_pollfds(s->ctl, pf, &n, MAX_PFDS);
        if (poll(pf, (nfds_t)n, -1) < 0) {
            if (errno == EINTR)
                continue;
            log_msg(LOG_ERROR, "poll", "%s", strerror(errno));
            break;
        }
        if (pf[0].revents) {
            struct signalfd_siginfo si;
            while (read(s->sfd, &si, sizeof si) == (ssize_t)sizeof si)
                on_signal(s, (int)si.ssi_signo);
        }
        if (pf[2].revents)
            watch_handle_inotify(s->w);
        if (pf[3].revents) {
            struct watch_result *r;
            while ((r = watch_take_result(s->w)) != NULL) {
                on_result(s, r);
                watch_result_free(r);
            }
        }
        if (pf[4].revents) {
            uint64_t cnt;
            struct notice *list;
            if (read(g_nfd, &cnt, sizeof cnt) < 0)
                (void)0;
            pthread_mutex_lock(&g_nmu);
            list = g_nhead;
            g_nhead = NULL;
            pthread_mutex_unlock(&g_nmu);
            while (list) {
                struct notice *nx = list->next;
                handle_notice(s, list);
                list = nx;
            }
            if (renewer_lost(&s->rn, why, sizeof why))
                lease_lost(s, why);
        }
        if (pf[5].revents)
            on_keeper(s);
        ctl_handle(s->ctl, pf + nbase, n - nbase, on_ctl, s);
        if (pf[1].revents)
            on_timer(s);
    }

    end_tree(s);
    /* Outcome. */
    if (!s->lease_lost && renewer_lost(&s->rn, why, sizeof why))
        lease_lost(s, why);
    if (s->lease_lost) {
        /* Whatever the child did, the run is another runner's now. */
        rc = EXIT_STOPPED_LOST;
        state = "lost";
    } else if (s->phase >= P_TERM ||
               (s->phase != P_RUN && (s->job_signalled || s->user_stop || s->child_sigterm))) {
        /* Stopped: by us, or by the stop's own signal, which reached the
         * child directly (kill -TERM of the whole job, Ctrl-C) -- whatever
         * code it then exited with is the stop's consequence; and a child
         * that died of SIGTERM while we were stopping it. */
        if (!s->final_done)
            final_result(s, s->via == CH_NONE && !s->failed_since_stop && !watch_busy(s->w) &&
                                s->last_step >= 0);
        if (s->user_stop) {
            rc = 128 + s->term_sig; /* 130 for Ctrl-C, 143 for scancel */
            state = "stopped";
        } else {
            rc = s->final_ok ? EXIT_STOPPED_OK : EXIT_STOPPED_LOST;
            state = "preempted";
        }
    } else if (s->phase == P_RUN && s->child_sigint) {
        /* Interrupted by a SIGINT we never saw (not through our terminal
         * or our signals): the user stopped it all the same. */
        rc = 128 + SIGINT;
        state = "stopped";
    } else {
        rc = s->child_code;
        state = rc == 0 ? "completed" : "failed";
        if (s->phase != P_RUN && !s->final_done)
            final_result(s, 0);
    }
    if (watch_busy(s->w))
        log_msg(LOG_WARN, "exit", "a commit was still in flight at the deadline; abandoned");
    if ((f = fields())) {
        cJSON_AddStringToObject(f, "state", state);
        cJSON_AddNumberToObject(f, "code", rc);
        if (s->phase != P_RUN) {
            cJSON_AddStringToObject(f, "stop", s->stop_reason);
            if (s->stop_provider[0])
                cJSON_AddStringToObject(f, "provider", s->stop_provider);
        }
        if (s->last_step >= 0)
            cJSON_AddNumberToObject(f, "last_step", (double)s->last_step);
    }
    event(s, LOG_INFO, "exit", f, 1);
    if (!s->lease_lost)
        set_state(s, state); /* RUN is the new holder's to write */
out:
    finish_acks(s);
    renewer_stop(&s->rn);
    /* The record lands before the lease is released (a recover that takes
     * it over must see `completed`), and both before hooks run: a hook may
     * read the record (ckptrun status) or power the machine off. */
    record_drain(s->rec);
    if (s->epoch && !s->lease_lost) {
        st = lease_release(s->lease, err);
        if (st != CKPT_OK)
            log_msg(LOG_WARN, "lease", "cannot release the lease of run %s (it expires by "
                    "itself): %s %s", o->run, ckpt_strerror(st), err);
        if ((f = fields())) {
            cJSON_AddStringToObject(f, "action", st == CKPT_OK ? "released" : "release-failed");
            cJSON_AddNumberToObject(f, "epoch", (double)s->epoch);
        }
        /* a start that failed early says only why it failed */
        event(s, s->lease_told ? LOG_INFO : LOG_DEBUG, "lease", f, s->lease_told);
    }
    lease_close(s->lease);
    s->lease = NULL;
    record_close(s->rec);
    s->rec = NULL;
    if (started) {
        if (strcmp(state, "completed") == 0)
            run_hook(s, o->on_complete, state, rc);
        else if (strcmp(state, "preempted") == 0)
            run_hook(s, o->on_preempt, state, rc);
        else if (strcmp(state, "stopped") != 0) /* a user's stop runs no hook */
            run_hook(s, o->on_failure, state, rc);
    }
    if (ckptrun_notice_stop && notices)
        ckptrun_notice_stop();
    ctl_close(s->ctl);
    if (s->w)
        watch_close(s->w, !watch_busy(s->w));
    ckpt_close(ctx);
    record_close(s->rec);
    cJSON_Delete(prev);
    if (env) {
        /* Only our strdup'd entries are freed (the rest belong to environ). */
        for (char **e = env; *e; e++)
            if (strncmp(*e, "CKPT_", 5) == 0 || strncmp(*e, "LD_PRELOAD=", 11) == 0) {
                int ours = 1;
                for (char **g = environ; *g; g++)
                    if (*g == *e)
                        ours = 0;
                if (ours)
                    free(*e);
            }
        free(env);
    }
    keeper_close(&s->kp); /* a keeper still there kills what is left */
    if (s->sfd >= 0)
        close(s->sfd);
    if (s->tfd >= 0)
        close(s->tfd);
    return rc;
}
