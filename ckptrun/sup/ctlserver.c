/* ctlserver.c -- see ctlserver.h. */
#include "sup/ctlserver.h"
#include "base/runlog.h"
#include "sup/proctree.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

struct client {
    int fd;                   /* -1 = free slot */
    int hello;                /* sent "hello" (libckpt) */
    int helper;               /* sent "helper" (writes its own files) */
    int signals;              /* turns SIGTERM/SIGINT into stops: told `stopping` */
    int trusted;              /* of the job: our descendant, or presented the key */
    int warned;               /* an untrusted message was logged */
    int told_stopping, acked; /* ctl_stopping sent / acknowledged */
    int pid;                  /* SO_PEERCRED at accept, or hello's */
    size_t len;
    char buf[CTL_MAX_LINE + 1];
};

struct ctl {
    int lfd;
    char dir[256];
    char path[300];
    char key[33];             /* 128 random bits, hex */
    struct client cl[CTL_MAX_CLIENTS];
};

static int kind_of(const struct client *cl)
{
    return cl->hello ? CTL_KIND_LIB : cl->helper ? CTL_KIND_FILES : 0;
}

const char *ctl_key(const struct ctl *c)
{
    return c->key;
}

int ctl_open(struct ctl **out, char *path, size_t n)
{
    struct ctl *c = calloc(1, sizeof *c);
    struct sockaddr_un sa;
    const char *base = getenv("XDG_RUNTIME_DIR");
    int rc = -1;

    *out = NULL;
    if (!c)
        goto out;
    c->lfd = -1;
    for (int i = 0; i < CTL_MAX_CLIENTS; i++)
        c->cl[i].fd = -1;
    /* A private directory: nobody else can connect, and the socket path is
     * not predictable for a pre-planted file. */
    if (!base || !*base || access(base, W_OK | X_OK) != 0)
        base = getenv("TMPDIR");
    if (!base || !*base || access(base, W_OK | X_OK) != 0)
        base = "/tmp";
    snprintf(c->dir, sizeof c->dir, "%s/ckptrun-XXXXXX", base);
    {
        unsigned char raw[16];
        if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw) {
            log_msg(LOG_ERROR, "control", "cannot draw the socket key: %s", strerror(errno));
            goto out;
        }
        for (int i = 0; i < 16; i++)
            snprintf(c->key + 2 * i, 3, "%02x", raw[i]);
    }
    if (!mkdtemp(c->dir)) {
        log_msg(LOG_ERROR, "control", "cannot create a private directory in %s: %s", base,
                strerror(errno));
        c->dir[0] = '\0';
        goto out;
    }
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    if ((size_t)snprintf(c->path, sizeof c->path, "%s/ctl", c->dir) >= sizeof sa.sun_path ||
        strlen(c->path) + 1 > n) {
        log_msg(LOG_ERROR, "control", "socket path %s too long", c->path);
        errno = ENAMETOOLONG;
        goto out;
    }
    memcpy(sa.sun_path, c->path, strlen(c->path) + 1);
    c->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->lfd < 0 || bind(c->lfd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(c->lfd, 16) != 0) {
        log_msg(LOG_ERROR, "control", "cannot listen on %s: %s", c->path, strerror(errno));
        goto out;
    }
    snprintf(path, n, "%s", c->path);
    *out = c;
    c = NULL;
    rc = 0;
out:
    ctl_close(c);
    return rc;
}

static void drop(struct client *cl)
{
    if (cl->fd >= 0)
        close(cl->fd);
    memset(cl, 0, sizeof *cl);
    cl->fd = -1;
}

void ctl_close(struct ctl *c)
{
    if (!c)
        return;
    for (int i = 0; i < CTL_MAX_CLIENTS; i++)
        drop(&c->cl[i]);
    if (c->lfd >= 0) {
        close(c->lfd);
        unlink(c->path);
    }
    if (c->dir[0])
        rmdir(c->dir);
    free(c);
}

void ctl_pollfds(struct ctl *c, struct pollfd *fds, int *n, int max)
{
    if (*n < max)
        fds[(*n)++] = (struct pollfd){ .fd = c->lfd, .events = POLLIN };
    for (int i = 0; i < CTL_MAX_CLIENTS && *n < max; i++)
        if (c->cl[i].fd >= 0)
            fds[(*n)++] = (struct pollfd){ .fd = c->cl[i].fd, .events = POLLIN };
}

static double jnum(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) && v->valuedouble >= 0 ? v->valuedouble : 0;
}

static const char *jstr(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static int jbool(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsTrue(v) || (cJSON_IsNumber(v) && v->valuedouble != 0) ||
           (cJSON_IsArray(v) && cJSON_GetArraySize(v) > 0);
}

/* One line from a client. Unknown types and fields are ignored (forward
 * compatibility); a line that is not a JSON object is logged and skipped. */
static void handle_line(struct ctl *c, int slot, const char *line, size_t len, ctl_event_fn fn,
                        void *user)
{
    cJSON *j = cJSON_ParseWithLength(line, len);
    struct client *cl = &c->cl[slot];
    struct ctl_event ev;
    const char *type;

    if (!cJSON_IsObject(j)) {
        log_msg(LOG_WARN, "control", "malformed message from client %d ignored", slot);
        goto out;
    }
    if (!cl->trusted) {
        const char *key = jstr(j, "key");
        if (strlen(key) == strlen(c->key) && strcmp(key, c->key) == 0) {
            cl->trusted = 1;
        } else {
            /* A same-user process outside the job: a forged `committed`
             * would become the run's final step. */
            if (!cl->warned)
                log_msg(LOG_WARN, "control", "messages from pid %d ignored: not a process of "
                        "the job and no valid key (CKPT_SOCKET_KEY)", cl->pid);
            cl->warned = 1;
            goto out;
        }
    }
    memset(&ev, 0, sizeof ev);
    ev.client = slot;
    type = jstr(j, "type");
    ev.step = (uint64_t)jnum(j, "step");
    if (strcmp(type, "hello") == 0) {
        ev.type = CTL_HELLO;
        ev.pid = (int)jnum(j, "pid");
        ev.items = (uint64_t)jnum(j, "items");
        cl->hello = 1;
        cl->signals = jbool(j, "signals");
        cl->pid = ev.pid;
    } else if (strcmp(type, "helper") == 0) {
        ev.type = CTL_HELPER;
        ev.pid = (int)jnum(j, "pid");
        cl->helper = 1;
        cl->signals = jbool(j, "signals");
        cl->pid = ev.pid;
    } else if (strcmp(type, "saving") == 0) {
        ev.type = CTL_SAVING;
    } else if (strcmp(type, "committed") == 0) {
        ev.type = CTL_COMMITTED;
        ev.seq = (uint64_t)jnum(j, "seq");
        ev.bytes = (uint64_t)jnum(j, "bytes");
        ev.stored = (uint64_t)jnum(j, "stored");
        ev.seconds = jnum(j, "seconds");
    } else if (strcmp(type, "failed") == 0) {
        ev.type = CTL_FAILED;
        ev.error = jstr(j, "error");
        ev.detail = jstr(j, "detail");
    } else if (strcmp(type, "file") == 0) {
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(j, "step");
        ev.type = CTL_FILE;
        ev.path = jstr(j, "path");
        ev.file_event = jstr(j, "event");
        /* saved(path, step): a whole number (a JSON number is a double:
         * up to 2^53 exactly); anything else is no step. From any client
         * of the job: the helper, the preload shim, libckpt's (hello). */
        ev.has_step = cJSON_IsNumber(st) && st->valuedouble >= 0 &&
                      st->valuedouble <= 9007199254740992.0 &&
                      (double)(uint64_t)st->valuedouble == st->valuedouble;
        ev.step = ev.has_step ? (uint64_t)st->valuedouble : 0;
        if (!ev.path[0])
            goto out;
    } else if (strcmp(type, "signal") == 0) {
        ev.type = CTL_SIGNAL;
        ev.signal = jstr(j, "signal");
        ev.pid = (int)jnum(j, "pid");
        ev.mono_ms = (int64_t)jnum(j, "mono_ms");
        if (strcmp(ev.signal, "SIGTERM") != 0 && strcmp(ev.signal, "SIGINT") != 0)
            goto out;
    } else if (strcmp(type, "stopping") == 0) {
        ev.type = CTL_STOPPING_ACK;
        ev.pid = cl->pid;
        if (!cl->told_stopping || cl->acked)
            goto out;
        cl->acked = 1;
    } else {
        goto out;
    }
    ev.kind = kind_of(cl);
    fn(user, &ev);
out:
    cJSON_Delete(j);
}

static void read_client(struct ctl *c, int slot, ctl_event_fn fn, void *user)
{
    struct client *cl = &c->cl[slot];
    ssize_t r;

    for (;;) {
        r = recv(cl->fd, cl->buf + cl->len, CTL_MAX_LINE - cl->len, MSG_DONTWAIT);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (r <= 0)
            goto gone;
        cl->len += (size_t)r;
        for (;;) {
            char *nl = memchr(cl->buf, '\n', cl->len);
            size_t ll;
            if (!nl)
                break;
            ll = (size_t)(nl - cl->buf);
            handle_line(c, slot, cl->buf, ll, fn, user);
            if (cl->fd < 0)
                return;
            memmove(cl->buf, nl + 1, cl->len - ll - 1);
            cl->len -= ll + 1;
        }
        if (cl->len == CTL_MAX_LINE) {
            log_msg(LOG_WARN, "control", "client %d sent a line over %d bytes: disconnected",
                    slot, CTL_MAX_LINE);
            goto gone;
        }
    }
    return;
gone:
    {
        struct ctl_event ev = { .type = CTL_GONE, .client = slot, .pid = cl->pid,
                                .kind = kind_of(cl) };
        drop(cl);
        if (ev.kind)
            fn(user, &ev);
    }
}

void ctl_handle(struct ctl *c, const struct pollfd *fds, int n, ctl_event_fn fn, void *user)
{
    for (int k = 0; k < n; k++) {
        if (!fds[k].revents)
            continue;
        if (fds[k].fd == c->lfd) {
            int fd;
            while ((fd = accept4(c->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                int slot = -1;
                for (int i = 0; i < CTL_MAX_CLIENTS; i++)
                    if (c->cl[i].fd < 0) {
                        slot = i;
                        break;
                    }
                if (slot < 0) {
                    log_msg(LOG_WARN, "control", "too many connections; refused one");
                    close(fd);
                    continue;
                }
                {
                    struct client *cl = &c->cl[slot];
                    struct ucred cr;
                    socklen_t crl = sizeof cr;
                    memset(cl, 0, sizeof *cl);
                    cl->fd = fd;
                    /* The peer as it connected: a process of the job descends
                     * from us (the keeper is our child and every orphan of
                     * the job is re-parented to it). */
                    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crl) == 0 && cr.pid > 0) {
                        cl->pid = (int)cr.pid;
                        cl->trusted = pt_descends((int)cr.pid, (int)getpid()) &&
                                      (int)cr.pid != (int)getpid();
                    }
                }
            }
            continue;
        }
        for (int i = 0; i < CTL_MAX_CLIENTS; i++)
            if (c->cl[i].fd == fds[k].fd) {
                read_client(c, i, fn, user);
                break;
            }
    }
}

int ctl_connected(const struct ctl *c)
{
    int n = 0;
    for (int i = 0; c && i < CTL_MAX_CLIENTS; i++)
        n += c->cl[i].fd >= 0 && c->cl[i].hello;
    return n;
}

int ctl_helpers(const struct ctl *c)
{
    int n = 0;
    for (int i = 0; c && i < CTL_MAX_CLIENTS; i++)
        n += c->cl[i].fd >= 0 && c->cl[i].helper && !c->cl[i].hello;
    return n;
}

/* Send one line to the clients for which want(cl) holds. */
static int send_to(struct ctl *c, cJSON *j, int (*want)(const struct client *, const void *),
                   const void *arg, int mark_stopping)
{
    char *s = cJSON_PrintUnformatted(j);
    size_t len;
    int sent = 0;

    if (!s)
        return 0;
    len = strlen(s);
    s[len++] = '\n'; /* replaces the NUL: the buffer is len+1 long */
    for (int i = 0; i < CTL_MAX_CLIENTS; i++) {
        struct client *cl = &c->cl[i];
        if (cl->fd < 0 || !want(cl, arg))
            continue;
        /* Messages are tiny; a peer whose buffer is full is not reading and
         * would not act on it anyway. */
        if (send(cl->fd, s, len, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)len) {
            sent++;
            if (mark_stopping) {
                cl->told_stopping = 1;
                cl->acked = 0;
            }
        } else {
            log_msg(LOG_WARN, "control", "message not delivered to client %d (pid %d): %s", i,
                    cl->pid, strerror(errno));
        }
    }
    free(s);
    return sent;
}

struct req_sel {
    int kinds, except;
    const struct client *base;
};

static int want_request(const struct client *cl, const void *arg)
{
    const struct req_sel *r = arg;
    /* -2: the job's process group got the stop's signal; clients that turn
     * it into a stop asked themselves */
    return (kind_of(cl) & r->kinds) && cl - r->base != r->except &&
           !(r->except == -2 && cl->signals);
}

static int want_stopping(const struct client *cl, const void *arg)
{
    (void)arg;
    return kind_of(cl) && cl->signals;
}

int ctl_stopping(struct ctl *c, const char *reason, const char *signal)
{
    cJSON *j = cJSON_CreateObject();
    int n = 0;
    if (!c || !j)
        goto out;
    cJSON_AddStringToObject(j, "type", "stopping");
    cJSON_AddStringToObject(j, "reason", reason ? reason : "");
    cJSON_AddStringToObject(j, "signal", signal);
    n = send_to(c, j, want_stopping, NULL, 1);
out:
    cJSON_Delete(j);
    return n;
}

int ctl_signal_clients(const struct ctl *c, int kinds)
{
    int n = 0;
    for (int i = 0; c && i < CTL_MAX_CLIENTS; i++)
        n += c->cl[i].fd >= 0 && c->cl[i].signals && (kind_of(&c->cl[i]) & kinds);
    return n;
}

int ctl_unacked(const struct ctl *c)
{
    int n = 0;
    for (int i = 0; c && i < CTL_MAX_CLIENTS; i++)
        n += c->cl[i].fd >= 0 && c->cl[i].told_stopping && !c->cl[i].acked;
    return n;
}

int ctl_request(struct ctl *c, const char *reason, int64_t deadline_ms, const char *codec,
                uint64_t id, int kinds, int except)
{
    cJSON *j = cJSON_CreateObject();
    struct req_sel sel = { kinds, except, c ? c->cl : NULL };
    int sent = 0;

    if (!c || !j)
        goto out;
    cJSON_AddStringToObject(j, "type", "request");
    cJSON_AddStringToObject(j, "reason", reason);
    cJSON_AddNumberToObject(j, "deadline_ms", (double)(deadline_ms > 0 ? deadline_ms : 0));
    if (codec)
        cJSON_AddStringToObject(j, "codec", codec);
    cJSON_AddNumberToObject(j, "id", (double)id);
    sent = send_to(c, j, want_request, &sel, 0);
out:
    cJSON_Delete(j);
    return sent;
}
