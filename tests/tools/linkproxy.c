/*
 * linkproxy -- the latency and per-connection rate of an emulated link
 * (bench/link.sh): a TCP forwarder that holds every byte for half the round
 * trip in each direction and paces each connection, each direction, to a
 * rate of its own. The link's total rate is not its business: tc tbf on
 * the veth pair behind it caps that (this kernel has no netem, fq or sfq,
 * so latency and per-flow caps cannot come from qdiscs).
 *
 *   linkproxy --upstream ADDR:PORT [--listen ADDR:PORT] [--rtt-ms N]
 *             [--conn-rate BYTES_PER_S] [--queue BYTES] [--stats FILE]
 *
 * Listens on --listen (default 127.0.0.1:0, a free loopback port) and
 * prints "PORT <n>" on stdout once it accepts. Each accepted connection
 * gets one upstream connection and one thread that moves both directions:
 *  - a byte read at t leaves at t + rtt/2 (never before accept + rtt +
 *    rtt/2 for the client's first bytes: the TCP handshake a real client
 *    waits for before it sends);
 *  - each direction sends at most --conn-rate bytes/s (0: no cap), paced by
 *    a token bucket of 1 ms of burst;
 *  - each direction holds at most --queue bytes (default 8 MiB) that have
 *    arrived and not left: the window in flight, large enough that the
 *    delay alone never caps a connection below the link (8 MiB / 10 ms is
 *    800 MB/s).
 * End of stream is passed on (shutdown) once the bytes before it left; an
 * error on either side closes both. SIGTERM/SIGINT: print the totals
 * ("linkproxy: N connections, up U bytes, down D bytes, cpu C s") on
 * stderr and exit 0. --stats FILE keeps FILE one line of the same totals,
 * rewritten whenever a connection ends.
 *
 * Only addresses given on the command line are used; it resolves no name.
 * Built with the tests (target linkproxy); used by bench/run_link.sh and
 * tests/integration/test_link.sh.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SEGS 4096           /* reads queued per direction */
#define IO_MAX (256 * 1024) /* one read or write */

static struct sockaddr_in upstream;
static int64_t delay_ns, rtt_ns;
static double conn_rate; /* bytes/s per direction, 0: none */
static size_t queue_cap = 8u << 20;
static const char *stats_path;
static atomic_ullong n_conn, n_up, n_down;
static volatile sig_atomic_t stopping;
static pthread_mutex_t stats_mu = PTHREAD_MUTEX_INITIALIZER;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

struct seg {
    size_t len;
    int64_t release; /* when its bytes may leave */
};

/* One direction: src -> ring -> dst. */
struct dir {
    int src, dst;
    uint8_t *buf;
    size_t head, used; /* ring: bytes [head, head + used) mod queue_cap */
    struct seg seg[SEGS];
    unsigned s_head, s_n;
    int64_t not_before; /* the first bytes' earliest departure */
    int64_t pace;       /* virtual time the next byte may leave */
    int eof, shut;
    atomic_ullong *count;
};

struct conn {
    int cfd, ufd;
    int64_t accepted;
};

static void dir_init(struct dir *d, int src, int dst, int64_t not_before, atomic_ullong *count)
{
    memset(d, 0, sizeof *d);
    d->src = src;
    d->dst = dst;
    d->not_before = not_before;
    d->pace = now_ns();
    d->count = count;
}

/* The next moment the head segment may leave (INT64_MAX: nothing queued). */
static int64_t dir_ready_at(const struct dir *d)
{
    int64_t t;
    if (!d->s_n)
        return INT64_MAX;
    t = d->seg[d->s_head].release;
    if (conn_rate > 0 && d->pace - 1000000 > t)
        t = d->pace - 1000000; /* 1 ms of burst */
    return t;
}

/* Read what src has into the ring. -1: error (reset). */
static int dir_read(struct dir *d, int64_t now)
{
    size_t tail = (d->head + d->used) % queue_cap;
    size_t room = queue_cap - d->used, contig = queue_cap - tail;
    ssize_t r;
    if (contig > room)
        contig = room;
    if (contig > IO_MAX)
        contig = IO_MAX;
    r = read(d->src, d->buf + tail, contig);
    if (r == 0) {
        d->eof = 1;
        return 0;
    }
    if (r < 0)
        return errno == EAGAIN || errno == EINTR ? 0 : -1;
    {
        int64_t rel = now + delay_ns;
        unsigned k = (d->s_head + d->s_n) % SEGS;
        if (rel < d->not_before)
            rel = d->not_before;
        d->seg[k].len = (size_t)r;
        d->seg[k].release = rel;
        d->s_n++;
        d->used += (size_t)r;
    }
    return 0;
}

/* Send what may leave now. -1: error. */
static int dir_write(struct dir *d, int64_t now)
{
    while (d->s_n && dir_ready_at(d) <= now) {
        struct seg *s = &d->seg[d->s_head];
        size_t n = s->len, contig = queue_cap - d->head;
        ssize_t w;
        if (n > contig)
            n = contig;
        if (n > IO_MAX)
            n = IO_MAX;
        if (conn_rate > 0) {
            /* pieces of 1/1000 s of the rate keep the pace smooth */
            size_t piece = (size_t)(conn_rate / 1000) + 1;
            if (piece < 1460)
                piece = 1460;
            if (n > piece)
                n = piece;
        }
        w = send(d->dst, d->buf + d->head, n, MSG_NOSIGNAL);
        if (w < 0)
            return errno == EAGAIN || errno == EINTR ? 0 : -1;
        atomic_fetch_add(d->count, (unsigned long long)w);
        d->head = (d->head + (size_t)w) % queue_cap;
        d->used -= (size_t)w;
        s->len -= (size_t)w;
        if (!s->len) {
            d->s_head = (d->s_head + 1) % SEGS;
            d->s_n--;
        }
        if (conn_rate > 0) {
            if (d->pace < now - 1000000)
                d->pace = now - 1000000;
            d->pace += (int64_t)((double)w * 1e9 / conn_rate);
        }
        if ((size_t)w < n)
            break; /* the socket is full: wait for POLLOUT */
    }
    if (d->eof && !d->used && !d->shut) {
        shutdown(d->dst, SHUT_WR);
        d->shut = 1;
    }
    return 0;
}

static void write_stats(void)
{
    char tmp[4096];
    FILE *f;
    if (!stats_path)
        return;
    pthread_mutex_lock(&stats_mu);
    snprintf(tmp, sizeof tmp, "%s.tmp", stats_path);
    f = fopen(tmp, "w");
    if (f) {
        fprintf(f, "connections %llu up %llu down %llu\n", atomic_load(&n_conn), atomic_load(&n_up),
                atomic_load(&n_down));
        if (fclose(f) == 0)
            rename(tmp, stats_path);
    }
    pthread_mutex_unlock(&stats_mu);
}

static void *conn_main(void *arg)
{
    struct conn *c = arg;
    struct dir d[2];
    int64_t first = c->accepted + rtt_ns + delay_ns;

    dir_init(&d[0], c->cfd, c->ufd, first, &n_up);
    dir_init(&d[1], c->ufd, c->cfd, 0, &n_down);
    d[0].buf = malloc(queue_cap);
    d[1].buf = malloc(queue_cap);
    if (!d[0].buf || !d[1].buf)
        goto out;
    for (;;) {
        struct pollfd p[4];
        int np = 0, ix[4];
        int64_t now = now_ns(), next = INT64_MAX;
        struct timespec ts, *tp = NULL;

        if (d[0].shut && d[1].shut)
            break;
        for (int i = 0; i < 2; i++) {
            int64_t r = dir_ready_at(&d[i]);
            if (!d[i].eof && d[i].used < queue_cap && d[i].s_n < SEGS) {
                p[np] = (struct pollfd){ .fd = d[i].src, .events = POLLIN };
                ix[np++] = i;
            }
            if (r <= now) {
                p[np] = (struct pollfd){ .fd = d[i].dst, .events = POLLOUT };
                ix[np++] = 2 + i;
            } else if (r < next) {
                next = r;
            }
        }
        if (next != INT64_MAX) { /* to the nanosecond: delays of 1 ms matter */
            ts.tv_sec = (time_t)((next - now) / 1000000000);
            ts.tv_nsec = (long)((next - now) % 1000000000);
            tp = &ts;
        }
        if (np == 0 && !tp)
            break; /* both ended */
        if (ppoll(p, (nfds_t)np, tp, NULL) < 0 && errno != EINTR)
            break;
        now = now_ns();
        for (int k = 0; k < np; k++) {
            int i = ix[k] & 1;
            if (!p[k].revents)
                continue;
            if (ix[k] < 2) {
                if (dir_read(&d[i], now) < 0)
                    goto out;
            } else if (p[k].revents & (POLLERR | POLLHUP) && !(p[k].revents & POLLOUT)) {
                goto out;
            }
        }
        for (int i = 0; i < 2; i++)
            if (dir_write(&d[i], now) < 0)
                goto out;
    }
out:
    close(c->cfd);
    close(c->ufd);
    free(d[0].buf);
    free(d[1].buf);
    free(c);
    write_stats();
    return NULL;
}

static int parse_addr(const char *s, struct sockaddr_in *a)
{
    char host[64];
    const char *colon = strrchr(s, ':');
    char *end;
    long port;
    if (!colon || (size_t)(colon - s) >= sizeof host)
        return -1;
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    port = strtol(colon + 1, &end, 10);
    if (*end || port < 0 || port > 65535)
        return -1;
    memset(a, 0, sizeof *a);
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)port);
    return inet_pton(AF_INET, host, &a->sin_addr) == 1 ? 0 : -1;
}

static void on_signal(int sig)
{
    (void)sig;
    stopping = 1;
}

static void nodelay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

int main(int argc, char **argv)
{
    struct sockaddr_in listen_addr;
    socklen_t alen = sizeof listen_addr;
    struct sigaction sa;
    struct rusage ru;
    int lfd, one = 1, have_up = 0;

    parse_addr("127.0.0.1:0", &listen_addr);
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "--upstream") && parse_addr(v, &upstream) == 0)
            have_up = 1;
        else if (!strcmp(a, "--listen") && parse_addr(v, &listen_addr) == 0)
            ;
        else if (!strcmp(a, "--rtt-ms"))
            rtt_ns = (int64_t)(atof(v) * 1e6);
        else if (!strcmp(a, "--conn-rate"))
            conn_rate = atof(v);
        else if (!strcmp(a, "--queue"))
            queue_cap = (size_t)atol(v);
        else if (!strcmp(a, "--stats"))
            stats_path = v;
        else {
            fprintf(stderr, "linkproxy: bad option %s %s\n", a, v);
            return 64;
        }
    }
    if (!have_up || queue_cap < 65536 || rtt_ns < 0 || conn_rate < 0) {
        fprintf(stderr, "usage: linkproxy --upstream ADDR:PORT [--listen ADDR:PORT] "
                        "[--rtt-ms N] [--conn-rate BYTES_PER_S] [--queue BYTES] [--stats F]\n");
        return 64;
    }
    delay_ns = rtt_ns / 2;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal; /* no SA_RESTART: poll() returns */
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&listen_addr, sizeof listen_addr) < 0 ||
        listen(lfd, 128) < 0 || getsockname(lfd, (struct sockaddr *)&listen_addr, &alen) < 0) {
        perror("linkproxy: listen");
        return 1;
    }
    printf("PORT %d\n", ntohs(listen_addr.sin_port));
    fflush(stdout);
    write_stats();
    while (!stopping) {
        struct pollfd p = { .fd = lfd, .events = POLLIN };
        struct conn *c;
        pthread_t th;
        pthread_attr_t at;
        int cfd, ufd;
        if (poll(&p, 1, 500) <= 0)
            continue;
        cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (cfd < 0)
            continue;
        ufd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (ufd < 0 || connect(ufd, (struct sockaddr *)&upstream, sizeof upstream) < 0) {
            if (ufd >= 0)
                close(ufd);
            close(cfd); /* the client sees the store unreachable */
            continue;
        }
        nodelay(cfd);
        nodelay(ufd);
        c = calloc(1, sizeof *c);
        if (!c) {
            close(cfd);
            close(ufd);
            continue;
        }
        c->cfd = cfd;
        c->ufd = ufd;
        c->accepted = now_ns();
        atomic_fetch_add(&n_conn, 1);
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&th, &at, conn_main, c) != 0) {
            close(cfd);
            close(ufd);
            free(c);
        }
        pthread_attr_destroy(&at);
    }
    getrusage(RUSAGE_SELF, &ru);
    write_stats();
    fprintf(stderr, "linkproxy: %llu connections, up %llu bytes, down %llu bytes, cpu %.2f s\n",
            atomic_load(&n_conn), atomic_load(&n_up), atomic_load(&n_down),
            (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
                (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6);
    return 0;
}
