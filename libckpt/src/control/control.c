/* control.c -- the libckpt side of the control socket (docs/CONTROL.md).
 *
 * One connection per context, one reader thread. The connection says
 * `hello` with the run's key (CKPT_SOCKET_KEY: ckptrun trusts only the
 * job's processes), and whether this process turns SIGTERM/SIGINT into
 * stops (signals.c); such a signal is reported (`signal`) before any later
 * message of the connection, so ckptrun sees it before the `saving` of the
 * save it causes. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "format/codec.h"
#include "control/control.h"
#include "control/ctlwire.h"
#include "core/ctx.h"
#include "ckpt_common.h"
#include "ckpt_store.h"
#include "control/signals.h"

struct ckpt_control {
    struct ckpt_ctx *ctx;
    int fd;
    int wake[2];             /* close() wakes the reader */
    int sigfd;               /* signals.c: a signal to report, -1 none */
    pthread_t reader;
    pthread_mutex_t wmu;     /* one writer at a time */
};

static int send_locked(struct ckpt_control *c, const char *json_line);

/* Report signals taken as stops; caller holds wmu. */
static void flush_signals(struct ckpt_control *c)
{
    int sig;
    long long when;
    struct ckpt_ctl_msg m;

    while (ckpt__signals_take(&sig, &when)) {
        ckpt__ctl_begin(&m, "signal");
        ckpt__ctl_str(&m, "signal", sig == SIGTERM ? "SIGTERM" : "SIGINT");
        ckpt__ctl_int(&m, "pid", getpid());
        ckpt__ctl_int(&m, "mono_ms", when);
        if (ckpt__ctl_end(&m, false) == 0)
            send_locked(c, m.buf);
        ckpt__log(&c->ctx->log, CKPT_LOG_INFO, "control",
                  "%s taken as a stop: checkpoint requested", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    }
}

static void handle_line(struct ckpt_control *c, const char *line, size_t len)
{
    cJSON *o = cJSON_ParseWithLength(line, len);
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(o, "type");
    if (!cJSON_IsObject(o) || !cJSON_IsString(type))
        goto out;
    if (!strcmp(type->valuestring, "request")) {
        const cJSON *codec = cJSON_GetObjectItemCaseSensitive(o, "codec");
        const cJSON *reason = cJSON_GetObjectItemCaseSensitive(o, "reason");
        ckpt_codec cd = CKPT_CODEC_DEFAULT;
        int lvl;
        if (cJSON_IsString(codec) && ckpt__parse_codec(codec->valuestring, &cd, &lvl))
            cd = CKPT_CODEC_DEFAULT;
        if (cJSON_IsString(reason) && strcmp(reason->valuestring, "stop") == 0 &&
            ckpt__signals_taken()) {
            /* The stop's signal reached us too and asked for the final
             * save already: one save answers both. */
            ckpt__log(&c->ctx->log, CKPT_LOG_DEBUG, "control", "stop request: already saving");
            goto out;
        }
        ckpt__log(&c->ctx->log, CKPT_LOG_INFO, "control", "checkpoint requested (%s)",
                  cJSON_IsString(reason) ? reason->valuestring : "?");
        if (cJSON_IsString(reason) && strcmp(reason->valuestring, "stop") == 0)
            ckpt__signals_stop_requested(); /* a job-wide SIGTERM after it: the same stop */
        {
            /* a stop's deadline bounds the store's retries (ckpt_store.h) */
            const cJSON *dl = cJSON_GetObjectItemCaseSensitive(o, "deadline_ms");
            if (cJSON_IsNumber(dl) && dl->valuedouble > 0)
                ckpt_retry_set_deadline(ckpt__mono_ms() +
                                        ((int64_t)dl->valuedouble - ckpt__now_ms()));
        }
        ckpt__request(c->ctx, cd);
    } else if (!strcmp(type->valuestring, "stopping")) {
        /* ckptrun ends us next (after the final checkpoint): its signal
         * must take effect. Acknowledged once set. */
        struct ckpt_ctl_msg ack;
        ckpt__signals_stopping();
        ckpt__ctl_begin(&ack, "stopping");
        ckpt__ctl_int(&ack, "pid", getpid());
        if (ckpt__ctl_end(&ack, false) == 0)
            ckpt__control_send(c, ack.buf);
    } else if (!strcmp(type->valuestring, "epoch")) {
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, "epoch");
        if (cJSON_IsNumber(e) && e->valuedouble >= 0)
            atomic_store(&c->ctx->epoch, (uint64_t)e->valuedouble);
    }
out:
    cJSON_Delete(o);
}

static void *reader_main(void *arg)
{
    struct ckpt_control *c = arg;
    char buf[8192];
    size_t have = 0;
    for (;;) {
        struct pollfd p[3] = { { c->fd, POLLIN, 0 }, { c->wake[0], POLLIN, 0 },
                               { c->sigfd, POLLIN, 0 } };
        ssize_t r;
        if (poll(p, c->sigfd >= 0 ? 3 : 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[1].revents)
            break;
        if (c->sigfd >= 0 && p[2].revents) {
            pthread_mutex_lock(&c->wmu);
            flush_signals(c);
            pthread_mutex_unlock(&c->wmu);
            if (!(p[0].revents))
                continue;
        }
        r = read(c->fd, buf + have, sizeof buf - have);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break; /* ckptrun went away: carry on standalone */
        have += (size_t)r;
        for (;;) {
            char *nl = memchr(buf, '\n', have);
            if (!nl)
                break;
            handle_line(c, buf, (size_t)(nl - buf));
            have -= (size_t)(nl + 1 - buf);
            memmove(buf, nl + 1, have);
        }
        if (have == sizeof buf)
            have = 0; /* an over-long line: drop it */
    }
    return NULL;
}

ckpt_status ckpt__control_open(struct ckpt_ctx *ctx, const char *path)
{
    struct ckpt_control *c;
    struct ckpt_ctl_msg hello;
    char key[CKPT_CTL_KEY_MAX];
    ckpt_status st = CKPT_E_UNREACHABLE;
    int signals;
    c = calloc(1, sizeof *c);
    if (!c)
        return CKPT_E_NOMEM;
    c->ctx = ctx;
    c->wake[0] = c->wake[1] = -1;
    c->sigfd = -1;
    c->fd = ckpt__ctl_socket(0);
    if (c->fd < 0)
        goto fail;
    if (ckpt__ctl_connect(c->fd, path) != 0) {
        st = errno == ENAMETOOLONG ? CKPT_E_CONFIG : CKPT_E_UNREACHABLE;
        goto fail;
    }
    if (pipe2(c->wake, O_CLOEXEC) != 0)
        goto fail;
    pthread_mutex_init(&c->wmu, NULL);
    /* Before the reader starts (it polls the signal pipe) and before
     * hello (which says whether we take the signals). */
    signals = ckpt__signals_install(ctx);
    c->sigfd = signals ? ckpt__signals_wake_fd() : -1;
    if (ckpt__thread_start(&c->reader, reader_main, c) != 0) {
        if (signals)
            ckpt__signals_uninstall(ctx);
        pthread_mutex_destroy(&c->wmu);
        goto fail;
    }
    ctx->control = c;
    ckpt__ctl_key(key);
    ckpt__ctl_begin(&hello, "hello");
    ckpt__ctl_int(&hello, "proto", 1);
    ckpt__ctl_int(&hello, "pid", getpid());
    ckpt__ctl_str(&hello, "run", ctx->run);
    ckpt__ctl_int(&hello, "items", (long long)ctx->nitems);
    ckpt__ctl_bool(&hello, "signals", signals);
    ckpt__ctl_str(&hello, "key", key);
    if (ckpt__ctl_end(&hello, false) == 0)
        ckpt__control_send(c, hello.buf);
    return CKPT_OK;
fail:
    if (c->fd >= 0)
        close(c->fd);
    if (c->wake[0] >= 0) {
        close(c->wake[0]);
        close(c->wake[1]);
    }
    free(c);
    return st;
}

/* Caller holds wmu. @return 0 sent, -1 not (too long, or ckptrun gone). */
static int send_locked(struct ckpt_control *c, const char *json_line)
{
    size_t len = strlen(json_line);
    char buf[CKPT_CTL_MSG_MAX];
    if (len + 1 > sizeof buf)
        return -1;
    memcpy(buf, json_line, len);
    buf[len++] = '\n';
    /* one write of the whole line; a failure means ckptrun is gone */
    return ckpt__ctl_send(c->fd, buf, len);
}

/* send_locked under wmu, signals first. */
static int send_one(struct ckpt_control *c, const char *json_line)
{
    int rc;
    pthread_mutex_lock(&c->wmu);
    /* A signal taken as a stop goes first: ckptrun must learn of it before
     * the `saving` of the save it caused. */
    if (c->sigfd >= 0)
        flush_signals(c);
    rc = send_locked(c, json_line);
    pthread_mutex_unlock(&c->wmu);
    return rc;
}

void ckpt__control_send(struct ckpt_control *c, const char *json_line)
{
    /* nobody to report a failure to: ckptrun is gone */
    (void)send_one(c, json_line);
}

ckpt_status ckpt__control_report_file(struct ckpt_control *c, const char *path, uint64_t step)
{
    struct ckpt_ctl_msg m;
    char key[CKPT_CTL_KEY_MAX], abs[CKPT_CTL_MSG_MAX];

    if (path[0] != '/') {
        /* ckptrun matches absolute paths under CKPT_DIR */
        char cwd[CKPT_CTL_MSG_MAX];
        if (!getcwd(cwd, sizeof cwd) ||
            (size_t)snprintf(abs, sizeof abs, "%s/%s", cwd, path) >= sizeof abs) {
            ckpt__set_ctx_err(c->ctx, "%s: path too long to report", path);
            return CKPT_E_INVAL;
        }
        path = abs;
    }
    ckpt__ctl_key(key);
    ckpt__ctl_begin(&m, "file");
    ckpt__ctl_str(&m, "path", path);
    ckpt__ctl_str(&m, "event", "renamed");
    ckpt__ctl_int(&m, "step", (long long)step);
    if (key[0])
        ckpt__ctl_str(&m, "key", key);
    if (ckpt__ctl_end(&m, false) != 0) {
        ckpt__set_ctx_err(c->ctx, "%s: path too long for a control message (%d bytes)", path,
                          CKPT_CTL_MSG_MAX);
        return CKPT_E_INVAL;
    }
    if (send_one(c, m.buf) != 0) {
        ckpt__set_ctx_err(c->ctx, "ckptrun's control socket: %s: %s not reported", strerror(errno),
                          path);
        return CKPT_E_UNREACHABLE;
    }
    return CKPT_OK;
}

void ckpt__control_close(struct ckpt_control *c)
{
    if (!c)
        return;
    /* The program is done with the library (typically about to exit): its
     * signals are its own again. */
    ckpt__signals_uninstall(c->ctx);
    if (write(c->wake[1], "x", 1) < 0) {
        /* the reader also ends when the socket closes */
    }
    shutdown(c->fd, SHUT_RDWR);
    pthread_join(c->reader, NULL);
    close(c->fd);
    close(c->wake[0]);
    close(c->wake[1]);
    pthread_mutex_destroy(&c->wmu);
    free(c);
}
