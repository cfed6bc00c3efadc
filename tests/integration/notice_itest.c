/*
 * notice_itest.c -- drives the notice poller against tests/tools/metadata_mock.py.
 *
 * Usage: notice_itest MOCK_SCRIPT [imds|PROVIDER...] (all without one)
 * Starts one mock per provider on 127.0.0.1 (port 0), switches notices and
 * hostile replies on through the mock's control endpoints and checks what
 * the poller delivers: exactly one event with the right kind and deadline,
 * nothing for hostile or stale replies, tokens renewed, Azure acknowledged
 * only through notice_ack(). Only loopback is ever contacted.
 */
#include <curl/curl.h>
#include <cjson/cJSON.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ckpt_common.h"
#include "ckpt_http.h"
#include "notice/notice.h"

static const char *mock_script;
static int failures, checks;

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        checks++;                                                              \
        if (!(cond)) {                                                         \
            failures++;                                                        \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);    \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
        }                                                                      \
    } while (0)

/* ---- events --------------------------------------------------------------- */

#define MAXEV 16
static pthread_mutex_t ev_mu = PTHREAD_MUTEX_INITIALIZER;
static struct notice_event evs[MAXEV];
static int64_t ev_at[MAXEV];
static int nev;
static int nwarn; /* warnings logged, guarded by ev_mu */

static void on_event(void *user, const struct notice_event *ev)
{
    (void)user;
    pthread_mutex_lock(&ev_mu);
    if (nev < MAXEV) {
        evs[nev] = *ev;
        ev_at[nev] = ckpt__now_ms();
    }
    nev++;
    pthread_mutex_unlock(&ev_mu);
}

static int events(void)
{
    int n;
    pthread_mutex_lock(&ev_mu);
    n = nev;
    pthread_mutex_unlock(&ev_mu);
    return n;
}

static void reset_events(void)
{
    pthread_mutex_lock(&ev_mu);
    nev = 0;
    memset(evs, 0, sizeof evs);
    pthread_mutex_unlock(&ev_mu);
}

static int warnings(void)
{
    int n;
    pthread_mutex_lock(&ev_mu);
    n = nwarn;
    nwarn = 0;
    pthread_mutex_unlock(&ev_mu);
    return n;
}

static int wait_events(int n, long ms)
{
    int64_t end = ckpt__now_ms() + ms;
    while (events() < n && ckpt__now_ms() < end)
        usleep(20000);
    return events();
}

static void on_log(void *user, ckpt_log_level lv, const char *subject, const char *msg)
{
    (void)user;
    if (lv >= CKPT_LOG_WARN) {
        pthread_mutex_lock(&ev_mu);
        nwarn++;
        pthread_mutex_unlock(&ev_mu);
    }
    if (getenv("NOTICE_ITEST_VERBOSE"))
        fprintf(stderr, "  log[%d] %s: %s\n", (int)lv, subject, msg);
}

/* ---- the mock ------------------------------------------------------------- */

struct mock {
    pid_t pid;
    int port;
    char base[64];
};

static int mock_start(struct mock *m, const char *provider)
{
    int fds[2], ret = -1;
    FILE *f = NULL;
    char line[64];

    memset(m, 0, sizeof *m);
    if (pipe(fds))
        return -1;
    m->pid = fork();
    if (m->pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execl("/usr/bin/python3", "python3", mock_script, "--provider", provider, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    f = fdopen(fds[0], "r");
    if (!f)
        goto out;
    if (fgets(line, sizeof line, f) && sscanf(line, "PORT %d", &m->port) == 1) {
        snprintf(m->base, sizeof m->base, "http://127.0.0.1:%d", m->port);
        ret = 0;
    }
out:
    if (f)
        fclose(f);
    else
        close(fds[0]);
    return ret;
}

static void mock_stop(struct mock *m)
{
    if (m->pid > 0) {
        kill(m->pid, SIGTERM);
        waitpid(m->pid, NULL, 0);
    }
    m->pid = 0;
}

static size_t sink(char *d, size_t sz, size_t nm, void *u)
{
    char **s = u;
    size_t n = sz * nm, old = *s ? strlen(*s) : 0;
    char *nb = realloc(*s, old + n + 1);
    if (!nb)
        return 0;
    memcpy(nb + old, d, n);
    nb[old + n] = '\0';
    *s = nb;
    return n;
}

/* Calls a control endpoint; returns the parsed JSON state (caller frees). */
static cJSON *ctl(struct mock *m, const char *what)
{
    char url[512], *body = NULL;
    cJSON *j = NULL;
    CURL *c = curl_easy_init();
    snprintf(url, sizeof url, "%s/_mock/%s", m->base, what);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
    if (curl_easy_perform(c) == CURLE_OK && body)
        j = cJSON_Parse(body);
    curl_easy_cleanup(c);
    free(body);
    if (!j)
        fprintf(stderr, "control %s failed\n", what);
    return j;
}

static void ctl0(struct mock *m, const char *what)
{
    cJSON_Delete(ctl(m, what));
}

static double counter(struct mock *m, const char *name)
{
    cJSON *j = ctl(m, "state");
    cJSON *c = j ? cJSON_GetObjectItem(cJSON_GetObjectItem(j, "counters"), name) : NULL;
    double v = cJSON_IsNumber(c) ? c->valuedouble : 0;
    cJSON_Delete(j);
    return v;
}

/* Wait until the mock's counter `name` reaches `min` (or ms pass).
 * @return its value. */
static double wait_counter(struct mock *m, const char *name, double min, long ms)
{
    int64_t end = ckpt__now_ms() + ms;
    double v;
    while ((v = counter(m, name)) < min && ckpt__now_ms() < end)
        usleep(20000);
    return v;
}

static int nacks(struct mock *m, const char *id)
{
    cJSON *j = ctl(m, "state"), *a, *x;
    int n = 0;
    a = j ? cJSON_GetObjectItem(j, "acks") : NULL;
    cJSON_ArrayForEach(x, a)
        if (cJSON_IsString(x) && (!id || strcmp(x->valuestring, id) == 0))
            n++;
    cJSON_Delete(j);
    return n;
}

static struct notice_poller *start(const char *provider, struct mock *m, long interval_ms)
{
    struct notice_config cfg = NOTICE_CONFIG_INIT;
    struct notice_poller *p = NULL;
    cfg.provider = provider;
    cfg.metadata_url = m->base;
    cfg.dmi_dir = "/nonexistent";
    cfg.cb = on_event;
    cfg.log_fn = on_log;
    cfg.poll_interval_ms = interval_ms;
    reset_events();
    CHECK(notice_start(&cfg, &p) == 0 && p, "notice_start %s", provider);
    return p;
}

static void stop_quickly(struct notice_poller *p, long max_ms, const char *what)
{
    int64_t t0 = ckpt__now_ms();
    notice_stop(p);
    CHECK(ckpt__now_ms() - t0 <= max_ms, "%s: notice_stop took %lld ms", what,
          (long long)(ckpt__now_ms() - t0));
}

static void random_pause(void)
{
    usleep(200000 + (unsigned)(rand() % 1300) * 1000);
}

/* Switches a notice on at a random moment and expects exactly one event. */
static void one_notice(const char *provider, struct mock *m, const char *ctlq,
                       enum notice_kind kind, int64_t deadline_from_set_ms, int64_t tol_ms)
{
    struct notice_poller *p = start(provider, m, 200);
    int64_t set_at;
    random_pause();
    CHECK(events() == 0, "%s %s: event before the notice", provider, ctlq);
    set_at = ckpt__now_ms();
    ctl0(m, ctlq);
    CHECK(wait_events(1, 6000) == 1, "%s %s: no event", provider, ctlq);
    usleep(1200000); /* it keeps being served: still one event */
    CHECK(events() == 1, "%s %s: %d events", provider, ctlq, events());
    if (events() >= 1) {
        CHECK(evs[0].kind == kind, "%s %s: kind %d", provider, ctlq, (int)evs[0].kind);
        CHECK(evs[0].provider && strcmp(evs[0].provider, provider) == 0, "provider");
        if (deadline_from_set_ms > 0) {
            int64_t want = set_at + deadline_from_set_ms, got = evs[0].deadline_ms;
            CHECK(got > want - tol_ms && got < want + tol_ms,
                  "%s %s: deadline off by %lld ms", provider, ctlq, (long long)(got - want));
        } else if (deadline_from_set_ms == 0) {
            CHECK(evs[0].deadline_ms == 0, "%s: deadline should be 0", provider);
        }
    }
    stop_quickly(p, 2500, provider);
    ctl0(m, "clear");
}

/* Serves each hostile mode for a while and expects no event and a quick stop. */
static void hostile_modes(const char *provider, struct mock *m)
{
    static const char *const modes[] = {"garbage", "huge", "badjson", "wrongtype", "500",
                                        "pasttime", "badtime", "slow"};
    size_t i;
    for (i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        char q[64];
        struct notice_poller *p;
        snprintf(q, sizeof q, "hostile?mode=%s", modes[i]);
        ctl0(m, q);
        warnings();
        p = start(provider, m, 200);
        usleep(strcmp(modes[i], "slow") == 0 ? 2500000 : 1200000);
        CHECK(events() == 0, "%s hostile %s: %d events", provider, modes[i], events());
        stop_quickly(p, 2500, modes[i]);
        {
            /* Logged, but once per failing path, not once per poll. */
            int nw = warnings();
            CHECK(nw <= 3, "%s hostile %s: %d warnings", provider, modes[i], nw);
            CHECK(nw >= 1 || strcmp(modes[i], "slow") == 0, "%s hostile %s: not logged",
                  provider, modes[i]);
        }
        ctl0(m, "clear");
    }
}

/* Nothing listening: no event, logged once, quick stop. */
static void refused(const char *provider)
{
    struct mock closed;
    struct notice_poller *p;
    int nw;
    memset(&closed, 0, sizeof closed);
    snprintf(closed.base, sizeof closed.base, "http://127.0.0.1:9"); /* discard: not served */
    warnings();
    p = start(provider, &closed, 100);
    usleep(1000000);
    CHECK(events() == 0, "%s refused: events", provider);
    stop_quickly(p, 2500, "refused");
    nw = warnings();
    CHECK(nw >= 1 && nw <= 2, "%s refused: %d warnings", provider, nw);
}

/* ---- providers ------------------------------------------------------------ */

static void test_aws(void)
{
    struct mock m, m2;
    struct notice_poller *p;
    double before;

    printf("aws\n");
    refused("aws");
    if (mock_start(&m, "aws")) {
        CHECK(0, "mock aws did not start");
        return;
    }
    one_notice("aws", &m, "notice?kind=terminate&in=120", NOTICE_TERMINATE, 120000, 2000);
    one_notice("aws", &m, "notice?kind=stop&in=110", NOTICE_TERMINATE, 110000, 2000);
    one_notice("aws", &m, "notice?kind=terminate&in=100&legacy=only", NOTICE_TERMINATE, 100000, 2000);
    CHECK(strstr(evs[0].detail, "termination-time") != NULL, "legacy path: %s", evs[0].detail);
    one_notice("aws", &m, "notice?kind=rebalance", NOTICE_REBALANCE, 0, 0);

    /* hibernate: no warning to act on, the process's memory is kept */
    p = start("aws", &m, 200);
    ctl0(&m, "notice?kind=hibernate&in=0");
    usleep(1000000);
    CHECK(events() == 0, "hibernate gave an event");
    notice_stop(p);
    ctl0(&m, "clear");

    /* Tokens that expire early (server-side cap) and revoked tokens: 401 ->
     * renewed, notices still arrive. */
    ctl0(&m, "config?ttl_cap=1&revoke=1");
    before = counter(&m, "tokens_issued");
    p = start("aws", &m, 200);
    /* the capped tokens expire while it polls: it has taken a second one */
    wait_counter(&m, "tokens_issued", before + 2, 6000);
    {
        double refused = counter(&m, "unauthorized");
        ctl0(&m, "config?revoke=1");
        wait_counter(&m, "unauthorized", refused + 1, 3000); /* the revoked one, refused */
    }
    ctl0(&m, "notice?kind=terminate&in=120");
    CHECK(wait_events(1, 5000) == 1, "no event with expiring tokens");
    CHECK(counter(&m, "unauthorized") > 0, "mock never answered 401");
    CHECK(counter(&m, "tokens_issued") >= before + 2, "token not renewed after 401");
    notice_stop(p);
    ctl0(&m, "clear");
    ctl0(&m, "config?ttl_cap=");

    hostile_modes("aws", &m);
    mock_stop(&m);

    /* Renewal before expiry: a fresh client (new base URL) with a 2 s TTL. */
    if (mock_start(&m2, "aws") == 0) {
        setenv("CKPT_IMDS_TOKEN_TTL_S", "2", 1);
        p = start("aws", &m2, 200);
        usleep(3500000);
        unsetenv("CKPT_IMDS_TOKEN_TTL_S");
        CHECK(counter(&m2, "tokens_issued") >= 3, "token not renewed before expiry (%g)",
              counter(&m2, "tokens_issued"));
        CHECK(counter(&m2, "unauthorized") == 0, "401 despite renewal");
        notice_stop(p);
        mock_stop(&m2);
    }
    /* IMDSv1 fallback when the token PUT answers 405. */
    if (mock_start(&m2, "aws") == 0) {
        ctl0(&m2, "config?token=v1only");
        one_notice("aws", &m2, "notice?kind=terminate&in=120", NOTICE_TERMINATE, 120000, 2000);
        CHECK(counter(&m2, "gets_without_token") > 0, "no IMDSv1 GET");
        mock_stop(&m2);
    }
    /* AWS_EC2_METADATA_DISABLED: nothing polled. */
    if (mock_start(&m2, "aws") == 0) {
        setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
        p = start("aws", &m2, 200);
        CHECK(strcmp(notice_provider(p), "none") == 0, "disabled IMDS still polled");
        usleep(500000);
        CHECK(counter(&m2, "requests") == 0, "requests despite AWS_EC2_METADATA_DISABLED");
        notice_stop(p);
        unsetenv("AWS_EC2_METADATA_DISABLED");
        mock_stop(&m2);
    }
}

static void test_gcp(void)
{
    struct mock m;
    struct notice_poller *p;
    double before;

    printf("gcp\n");
    refused("gcp");
    if (mock_start(&m, "gcp")) {
        CHECK(0, "mock gcp did not start");
        return;
    }
    /* GCP gives no time: deadline = delivery + 30 s. */
    one_notice("gcp", &m, "notice?kind=terminate", NOTICE_TERMINATE, 30000, 2500);
    one_notice("gcp", &m, "notice?kind=maintenance", NOTICE_MAINTENANCE, 60000, 2500);
    CHECK(counter(&m, "gcp_missing_header") == 0, "request without Metadata-Flavor");

    /* Long-poll: few requests while nothing changes, and a quick stop. */
    before = counter(&m, "gcp_preempted");
    p = start("gcp", &m, 1000);
    before = wait_counter(&m, "gcp_preempted", before + 1, 3000); /* the first is waiting */
    usleep(3000000);
    CHECK(counter(&m, "gcp_preempted") - before <= 1, "not long-polling: %g requests",
          counter(&m, "gcp_preempted") - before);
    stop_quickly(p, 1800, "gcp long-poll");

    hostile_modes("gcp", &m);
    mock_stop(&m);
}

static void test_azure(void)
{
    struct mock m;
    struct notice_poller *p;
    const char *id = "602d9444-d2cd-49c7-8624-8643e7171297";

    printf("azure\n");
    refused("azure");
    if (mock_start(&m, "azure")) {
        CHECK(0, "mock azure did not start");
        return;
    }
    /* Deadline from NotBefore; ack only through notice_ack(). */
    p = start("azure", &m, 200);
    random_pause();
    {
        int64_t set_at = ckpt__now_ms();
        ctl0(&m, "notice?kind=terminate&in=120");
        CHECK(wait_events(1, 6000) == 1, "azure: no event");
        usleep(1200000);
        CHECK(events() == 1, "azure: %d events", events());
        CHECK(evs[0].kind == NOTICE_TERMINATE, "azure kind");
        CHECK(strcmp(evs[0].id, id) == 0, "azure id %s", evs[0].id);
        CHECK(llabs(evs[0].deadline_ms - (set_at + 120000)) < 2000, "azure deadline off by %lld",
              (long long)(evs[0].deadline_ms - (set_at + 120000)));
        CHECK(nacks(&m, NULL) == 0, "acknowledged without notice_ack");
        CHECK(notice_ack(p, evs[0].id) == 0, "notice_ack failed");
        CHECK(nacks(&m, id) == 1, "ack not recorded");
        CHECK(counter(&m, "azure_missing_header") == 0, "request without Metadata: true");
    }
    notice_stop(p);
    ctl0(&m, "clear");

    one_notice("azure", &m, "notice?kind=terminate&in=blank", NOTICE_TERMINATE, -1, 0);
    CHECK(llabs(evs[0].deadline_ms - (ev_at[0] + 30000)) < 1500, "blank NotBefore -> now+30 s");
    one_notice("azure", &m, "notice?kind=maintenance&in=300", NOTICE_MAINTENANCE, 300000, 2000);

    /* An event for another VM of the availability set is not ours. */
    p = start("azure", &m, 200);
    ctl0(&m, "notice?kind=terminate&in=120&vm=vm7");
    usleep(1500000);
    CHECK(events() == 0, "azure: event for another VM delivered");
    notice_stop(p);
    ctl0(&m, "clear");

    hostile_modes("azure", &m);
    CHECK(nacks(&m, NULL) == 1, "extra acks");
    mock_stop(&m);
}

static void test_aliyun(void)
{
    struct mock m;
    struct notice_poller *p;

    printf("aliyun\n");
    refused("aliyun");
    if (mock_start(&m, "aliyun")) {
        CHECK(0, "mock aliyun did not start");
        return;
    }
    one_notice("aliyun", &m, "notice?kind=terminate&in=300", NOTICE_TERMINATE, 300000, 2000);
    CHECK(counter(&m, "gets_with_token") > 0, "aliyun: token not used");
    /* Hardened mode switched on and every token revoked: 403 -> new token. */
    ctl0(&m, "config?token=required&revoke=1");
    {
        double got = counter(&m, "gets_with_token");
        p = start("aliyun", &m, 200);
        wait_counter(&m, "gets_with_token", got + 1, 5000); /* it holds a token */
    }
    ctl0(&m, "config?revoke=1");
    ctl0(&m, "notice?kind=terminate&in=300");
    CHECK(wait_events(1, 6000) == 1, "aliyun hardened: no event");
    notice_stop(p);
    ctl0(&m, "clear");
    hostile_modes("aliyun", &m);
    mock_stop(&m);
}

static void test_tencent(void)
{
    struct mock m;
    printf("tencent\n");
    refused("tencent");
    if (mock_start(&m, "tencent")) {
        CHECK(0, "mock tencent did not start");
        return;
    }
    one_notice("tencent", &m, "notice?kind=terminate&in=120", NOTICE_TERMINATE, 120000, 2000);
    hostile_modes("tencent", &m);
    mock_stop(&m);
}

/* The time's form is not documented: each form ckptrun accepts gives the
 * same deadline; 404 and an empty reply are both "no notice", unlogged. */
static void test_volcengine(void)
{
    static const char *const fmts[] = { "isoz", "space", "epoch", "offset" };
    struct mock m;
    struct notice_poller *p;
    double before;
    size_t i;

    printf("volcengine\n");
    refused("volcengine");
    if (mock_start(&m, "volcengine")) {
        CHECK(0, "mock volcengine did not start");
        return;
    }
    for (i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
        char q[96];
        snprintf(q, sizeof q, "notice?kind=terminate&in=300&fmt=%s", fmts[i]);
        /* whole seconds in every form: up to 1 s early */
        one_notice("volcengine", &m, q, NOTICE_TERMINATE, 300000, 2000);
        CHECK(strstr(evs[0].detail, "spot_instance_termination_time") != NULL, "%s: detail %s",
              fmts[i], evs[0].detail);
    }
    for (i = 0; i < 2; i++) {
        ctl0(&m, i ? "config?none=empty" : "config?none=404");
        warnings();
        before = counter(&m, "volcengine_gets");
        p = start("volcengine", &m, 100);
        CHECK(wait_counter(&m, "volcengine_gets", before + 3, 5000) >= before + 3,
              "volcengine not polled");
        CHECK(events() == 0, "no notice (%s): %d events", i ? "empty" : "404", events());
        notice_stop(p);
        CHECK(warnings() == 0, "no notice (%s) logged as a failure", i ? "empty" : "404");
    }
    hostile_modes("volcengine", &m);
    mock_stop(&m);
}

/* ---- the IMDS client on its own (also used by the S3 credential chain) ---- */

struct getter {
    struct ckpt_imds *m;
    int ok;
};

static void *getter_main(void *arg)
{
    struct getter *g = arg;
    int i;
    for (i = 0; i < 20; i++) {
        char *body = NULL, err[512] = "";
        size_t len = 0;
        long code = 0;
        if (ckpt__imds_get(g->m, "/latest/meta-data/spot/instance-action", 2000, 4096, &body, &len,
                           &code, err) == CKPT_OK &&
            code == 404)
            g->ok++;
        free(body);
    }
    return NULL;
}

static void test_imds(void)
{
    struct mock m;
    struct ckpt_imds *a, *b;
    char *body = NULL, err[512] = "", url[96];
    size_t len = 0;
    long code = 0;
    ckpt_status st;
    int i;

    printf("imds\n");
    if (mock_start(&m, "aws")) {
        CHECK(0, "mock aws did not start");
        return;
    }
    /* One client per base URL, trailing slashes ignored. */
    snprintf(url, sizeof url, "%s/", m.base);
    a = ckpt__imds_shared(m.base);
    b = ckpt__imds_shared(url);
    CHECK(a && a == b, "one shared client per base URL");
    /* The endpoint variable applies when no base is given. */
    setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", m.base, 1);
    CHECK(ckpt__imds_shared(NULL) == a, "AWS_EC2_METADATA_SERVICE_ENDPOINT ignored");
    unsetenv("AWS_EC2_METADATA_SERVICE_ENDPOINT");
    setenv("AWS_EC2_METADATA_DISABLED", "TRUE", 1);
    CHECK(ckpt__imds_shared(m.base) == NULL, "AWS_EC2_METADATA_DISABLED ignored");
    unsetenv("AWS_EC2_METADATA_DISABLED");

    /* Concurrent callers share one token. */
    {
        struct getter g[8];
        pthread_t th[8];
        for (i = 0; i < 8; i++) {
            g[i].m = a;
            g[i].ok = 0;
            pthread_create(&th[i], NULL, getter_main, &g[i]);
        }
        for (i = 0; i < 8; i++) {
            pthread_join(th[i], NULL);
            CHECK(g[i].ok == 20, "thread %d: %d/20 GETs", i, g[i].ok);
        }
        CHECK(counter(&m, "tokens_issued") == 1, "%g tokens for 160 GETs",
              counter(&m, "tokens_issued"));
        CHECK(counter(&m, "unauthorized") == 0, "401 with a shared token");
    }
    /* Body cap: a reply over max_len is refused, not truncated. */
    ctl0(&m, "hostile?mode=huge");
    st = ckpt__imds_get(a, "/latest/meta-data/spot/instance-action", 2000, 4096, &body, &len, &code,
                        err);
    CHECK(st == CKPT_E_CORRUPT && body == NULL, "huge body: status %d", (int)st);
    ctl0(&m, "clear");
    /* Revoked token: 401, renewed, same call succeeds. */
    ctl0(&m, "config?revoke=1");
    st = ckpt__imds_get(a, "/latest/meta-data/spot/instance-action", 2000, 4096, &body, &len, &code,
                        err);
    CHECK(st == CKPT_OK && code == 404, "after revoke: status %d HTTP %ld", (int)st, code);
    free(body);
    body = NULL;
    CHECK(counter(&m, "tokens_issued") == 2, "token not renewed after 401");
    mock_stop(&m);

    /* Token PUT refused with 403: IMDSv1. */
    if (mock_start(&m, "aws") == 0) {
        ctl0(&m, "config?token=forbidden");
        a = ckpt__imds_shared(m.base);
        st = ckpt__imds_get(a, "/latest/meta-data/spot/instance-action", 2000, 4096, &body, &len,
                            &code, err);
        CHECK(st == CKPT_OK && code == 404, "v1 after 403: status %d HTTP %ld", (int)st, code);
        CHECK(counter(&m, "gets_without_token") == 1, "no tokenless GET");
        free(body);
        body = NULL;
        mock_stop(&m);
    }
    /* A 500 on a GET is a reply; a 500 on the token PUT is an error, never a
     * silent downgrade to IMDSv1. */
    if (mock_start(&m, "aws") == 0) {
        ctl0(&m, "config?token=required");
        setenv("CKPT_IMDS_TOKEN_TTL_S", "0", 1); /* ignored: out of range */
        a = ckpt__imds_shared(m.base);
        unsetenv("CKPT_IMDS_TOKEN_TTL_S");
        ctl0(&m, "hostile?mode=500"); /* notice paths only: token PUT still works */
        st = ckpt__imds_get(a, "/latest/meta-data/spot/instance-action", 2000, 4096, &body, &len,
                            &code, err);
        CHECK(st == CKPT_OK && code == 500, "HTTP 500 is a reply: %d %ld", (int)st, code);
        free(body);
        body = NULL;
        ctl0(&m, "config?token=error500&revoke=1");
        st = ckpt__imds_get(a, "/latest/meta-data/spot/instance-action", 2000, 4096, &body, &len,
                            &code, err);
        CHECK(st == CKPT_E_TRANSIENT && !body, "token PUT 500: status %d", (int)st);
        CHECK(counter(&m, "gets_without_token") == 0, "fell back to IMDSv1 on a 500");
        mock_stop(&m);
    }
    /* Nothing listening: unreachable, quickly. */
    {
        int64_t t0 = ckpt__now_ms();
        a = ckpt__imds_shared(m.base); /* the mock just stopped: port closed */
        st = ckpt__imds_get(a, "/latest/meta-data/spot/instance-action", 1000, 4096, &body, &len,
                            &code, err);
        CHECK(st == CKPT_E_UNREACHABLE && err[0], "closed port: status %d", (int)st);
        CHECK(ckpt__now_ms() - t0 < 3000, "closed port took %lld ms",
              (long long)(ckpt__now_ms() - t0));
    }
}

/* One test per provider of the table, and the IMDS client's. */
static const struct {
    const char *name;
    void (*run)(void);
} suites[] = {
    { "imds", test_imds },
    { "aws", test_aws },
    { "gcp", test_gcp },
    { "azure", test_azure },
    { "aliyun", test_aliyun },
    { "tencent", test_tencent },
    { "volcengine", test_volcengine },
};
#define NSUITES (sizeof suites / sizeof suites[0])

int main(int argc, char **argv)
{
    int i, all = argc < 3;
    if (argc < 2) {
        fprintf(stderr, "usage: %s MOCK_SCRIPT [imds|PROVIDER...]\n", argv[0]);
        return 2;
    }
    mock_script = argv[1];
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    /* Proxies in the environment must not matter: the poller ignores them. */
    setenv("http_proxy", "http://127.0.0.1:9", 1);
    setenv("HTTP_PROXY", "http://127.0.0.1:9", 1);
    for (i = all ? 0 : 2; i < (all ? (int)NSUITES : argc); i++) {
        const char *pv = all ? suites[i].name : argv[i];
        size_t k = 0;
        while (k < NSUITES && strcmp(pv, suites[k].name) != 0)
            k++;
        /* a provider of the table without a test here fails, not passes */
        CHECK(k < NSUITES, "no test for provider '%s'", pv);
        if (k < NSUITES)
            suites[k].run();
    }
    printf("%d checks, %d failures\n", checks, failures);
    curl_global_cleanup();
    return failures ? 1 : 0;
}
