/*
 * notice/probe.c -- run the notice poller by hand and print what it sees.
 *
 *   notice_probe [-p MODE] [-u METADATA_URL]
 *                [-d DMI_DIR] [-i POLL_MS] [-t SECONDS] [-a] [-q]
 *
 * MODE is a word of NOTICE_MODES (notice.h): auto, a provider, or none.
 * Prints one line per notice ("notice KIND PROVIDER deadline_in_ms=N id=... detail")
 * and, without -q, the poller's log on stderr. -a acknowledges each notice
 * that has an id (Azure). Exits after -t seconds (default: until SIGINT) with
 * status 0 if at least one notice arrived, else 1.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "notice/notice.h"
#include "notice/probe.h"

static volatile sig_atomic_t done;
static volatile sig_atomic_t got;
static int quiet, do_ack;
static pthread_mutex_t ack_mu = PTHREAD_MUTEX_INITIALIZER;
static char pending_ack[128]; /* guarded by ack_mu */

static void on_sig(int s)
{
    (void)s;
    done = 1;
}

static const char *kind_name(enum notice_kind k)
{
    return k == NOTICE_TERMINATE ? "terminate" : k == NOTICE_REBALANCE ? "rebalance" : "maintenance";
}

static void on_event(void *user, const struct notice_event *ev)
{
    struct timespec ts;
    long long now;
    (void)user;
    clock_gettime(CLOCK_REALTIME, &ts);
    now = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    printf("notice %s %s deadline_in_ms=%lld id=%s %s\n", kind_name(ev->kind), ev->provider,
           ev->deadline_ms ? (long long)ev->deadline_ms - now : 0LL, ev->id[0] ? ev->id : "-",
           ev->detail);
    fflush(stdout);
    if (ev->id[0]) { /* acknowledged from main: a callback must not block on the network */
        pthread_mutex_lock(&ack_mu);
        snprintf(pending_ack, sizeof pending_ack, "%s", ev->id);
        pthread_mutex_unlock(&ack_mu);
    }
    got = 1;
}

static void on_log(void *user, ckpt_log_level lv, const char *subject, const char *msg)
{
    static const char *const names[] = {"debug", "info", "warn", "error", "off"};
    (void)user;
    if (!quiet)
        fprintf(stderr, "notice_probe: %s %s: %s\n", names[lv <= CKPT_LOG_OFF ? lv : 4], subject, msg);
}

int main(int argc, char **argv)
{
    struct notice_config cfg = NOTICE_CONFIG_INIT;
    struct notice_poller *p = NULL;
    long secs = 0;
    int c, ret = 1;
    time_t end;

    cfg.provider = "auto";
    while ((c = getopt(argc, argv, "p:u:d:i:t:aq")) != -1) {
        switch (c) {
        case 'p': cfg.provider = optarg; break;
        case 'u': cfg.metadata_url = optarg; break;
        case 'd': cfg.dmi_dir = optarg; break;
        case 'i': cfg.poll_interval_ms = strtol(optarg, NULL, 10); break;
        case 't': secs = strtol(optarg, NULL, 10); break;
        case 'a': do_ack = 1; break;
        case 'q': quiet = 1; break;
        default:
            fprintf(stderr, "usage: %s [-p PROVIDER] [-u URL] [-d DMI_DIR] [-i MS] [-t S] [-a] [-q]\n",
                    argv[0]);
            return 64;
        }
    }
    cfg.cb = on_event;
    cfg.log_fn = on_log;
    signal(SIGINT, on_sig);
    signal(SIGTERM, on_sig);
    if (notice_start(&cfg, &p)) {
        fprintf(stderr, "notice_probe: bad configuration\n");
        return 64;
    }
    fprintf(stderr, "notice_probe: provider %s\n", notice_provider(p));
    end = time(NULL) + secs;
    while (!done && (secs == 0 || time(NULL) < end)) {
        char id[128];
        usleep(100000);
        pthread_mutex_lock(&ack_mu);
        snprintf(id, sizeof id, "%s", pending_ack);
        pending_ack[0] = '\0';
        pthread_mutex_unlock(&ack_mu);
        if (do_ack && id[0]) {
            printf("ack %s %s\n", id, notice_ack(p, id) == 0 ? "ok" : "failed");
            fflush(stdout);
        }
    }
    ret = got ? 0 : 1;
    notice_stop(p);
    return ret;
}
