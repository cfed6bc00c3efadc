/* test_config.c -- struct ckpt_config + the environment -> a context's
 * settings (libckpt/src/api/config.c): defaults, the zeroed struct, version
 * gating of the fields in reserved slots, the config over the environment,
 * refusals, and the defaults that depend on the store. */
#include "test_util.h"
#include "api/config.h"
#include "format/codec.h"
#include "core/ctx.h"
#if defined(CKPT_WITH_S3) || defined(CKPT_WITH_AZURE)
#include "retry.h"
#endif

/* Every variable the module reads: each test starts without them. */
static const char *const vars[] = {
    "CKPT_STORE", "CKPT_RUN", "CKPT_CODEC", "CKPT_CHUNK_BYTES", "CKPT_WORKERS",
    "CKPT_KEEP", "CKPT_INTERVAL", "CKPT_EPOCH", "CKPT_PACK_BYTES", "CKPT_CONNECTIONS",
    "CKPT_RESTORE_SYNC", "CKPT_RETRY_BUDGET_MS", "CKPT_SOCKET", "CKPT_LOG",
};

static int clean_env(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    setenv("CKPT_RUN", "cfgtest", 1);
    return 0;
}

static const struct ckpt_store_ops file_ops = { .scheme = "file" };
static const struct ckpt_store_ops s3_ops = { .scheme = "s3" };
/* Stores as their backends declare themselves (test_store_caps checks the
 * real declarations): a local disk, and an object store. */
static struct ckpt_store file_store = {
    .ops = &file_ops,
    .caps = { .flags = CKPT_STORE_CONDITIONAL | CKPT_STORE_RANGES, .chunk_bytes = 4u << 20 } };
static struct ckpt_store s3_store = {
    .ops = &s3_ops,
    .caps = { .flags = CKPT_STORE_CONDITIONAL | CKPT_STORE_RANGES | CKPT_STORE_PACKS |
                       CKPT_STORE_LATENCY_BOUND,
              .chunk_bytes = 8u << 20 } };

static void resolve_ok(const struct ckpt_config *cfg, struct ckpt_settings *s)
{
    char err[CKPT_ERR_MAX];
    ckpt_status st = ckpt__config_resolve(cfg, s, err);
    if (st)
        fail_msg("refused: %s (%s)", ckpt_strerror(st), err);
}

/* Refused with CKPT_E_CONFIG and a reason naming `what`. */
static void refused(const struct ckpt_config *cfg, const char *what)
{
    struct ckpt_settings s;
    char err[CKPT_ERR_MAX];
    ckpt_status st = ckpt__config_resolve(cfg, &s, err);
    if (st != CKPT_E_CONFIG || !strstr(err, what))
        fail_msg("expected CKPT_E_CONFIG naming %s, got %s: '%s'", what, ckpt_strerror(st), err);
}

static void assert_defaults(const struct ckpt_settings *s)
{
    assert_null(s->log_fn);
    assert_int_equal(s->log_level, CKPT_LOG_INFO);
    assert_null(s->store_url);
    assert_string_equal(s->run, "cfgtest");
    assert_int_equal(s->codec, CKPT_CODEC_ZSTD);
    assert_int_equal(s->level, 1);
    assert_int_equal(s->chunk_bytes, 0); /* by store */
    assert_int_equal(s->workers, 0);     /* by store */
    assert_int_equal(s->staging_max, 0);
    assert_int_equal(s->keep, 3);
    assert_int_equal(s->on_busy, CKPT_BUSY_WAIT);
    assert_int_equal(s->interval_ms, 0);
    assert_int_equal(s->epoch, 0);
    assert_int_equal(s->pinned_max, 64u << 20);
    assert_false(s->pack_given);
    assert_false(s->restore_sync);
    assert_int_equal(s->store_cfg.connections, 0);
    assert_int_equal(s->store_cfg.retry_budget_ms, 0);
    assert_null(s->control_socket);
}

/* NULL, CKPT_CONFIG_INIT and a zeroed struct (= {0}, memset) are the same
 * defaults, the log level included: version 0's log_level 0 is INFO, not
 * CKPT_LOG_DEBUG (which is 0). */
static void zeroed_config_is_the_defaults(void **state)
{
    struct ckpt_config init = CKPT_CONFIG_INIT, braces = { 0 }, mem;
    struct ckpt_settings a, b, c, d;
    (void)state;
    memset(&mem, 0, sizeof mem);
    assert_int_equal(CKPT_LOG_DEBUG, 0); /* why the rule is needed */
    resolve_ok(NULL, &a);
    resolve_ok(&init, &b);
    resolve_ok(&braces, &c);
    resolve_ok(&mem, &d);
    assert_defaults(&a);
    assert_defaults(&b);
    assert_defaults(&c);
    assert_defaults(&d);
    assert_memory_equal(&a, &b, sizeof a);
    assert_memory_equal(&a, &c, sizeof a);
    assert_memory_equal(&a, &d, sizeof a);
}

/* The log level is taken as given in a struct that has a version: a
 * program built against 0.1.0 asking for debug logging still gets it. */
static void log_level_zero_is_debug_only_with_a_version(void **state)
{
    struct ckpt_config cfg = CKPT_CONFIG_INIT;
    struct ckpt_settings s;
    (void)state;
    cfg.log_level = CKPT_LOG_DEBUG;
    resolve_ok(&cfg, &s);
    assert_int_equal(s.log_level, CKPT_LOG_DEBUG);
    cfg.version = 100; /* 0.1.0 */
    resolve_ok(&cfg, &s);
    assert_int_equal(s.log_level, CKPT_LOG_DEBUG);
    cfg.version = 0;
    resolve_ok(&cfg, &s);
    assert_int_equal(s.log_level, CKPT_LOG_INFO);
    cfg.log_level = CKPT_LOG_ERROR; /* any other level is read as set */
    resolve_ok(&cfg, &s);
    assert_int_equal(s.log_level, CKPT_LOG_ERROR);
}

/* The fields in the reserved slots are read only from the version that
 * added them: a struct of 0.1.0 (or a zeroed one) may hold anything there. */
static void slot_fields_are_read_by_version(void **state)
{
    struct ckpt_config cfg = CKPT_CONFIG_INIT;
    struct ckpt_settings s;
    (void)state;
    cfg.pack_bytes = 12345;        /* out of range if read */
    cfg.connections = 100000;
    cfg.restore_sync = 7;
    cfg.retry_budget_ms = 42;
    cfg.slot4_ = &cfg;             /* slots 4..7: not read below version 300 */
    cfg.slot7_ = &cfg;
    for (unsigned v = 0; v < CKPT_CONFIG_SINCE_SLOTS; v += 100) {
        cfg.version = v;
        resolve_ok(&cfg, &s);
        assert_false(s.pack_given);
        assert_int_equal(s.store_cfg.connections, 0);
        assert_false(s.restore_sync);
        assert_int_equal(s.store_cfg.retry_budget_ms, 0);
    }
    cfg.version = CKPT_CONFIG_SINCE_SLOTS;
    refused(&cfg, "pack_bytes");
    cfg.pack_bytes = 1u << 20;
    refused(&cfg, "connections");
    cfg.connections = 32;
    refused(&cfg, "restore_sync");
    cfg.restore_sync = 1;
    resolve_ok(&cfg, &s);
    assert_true(s.pack_given);
    assert_int_equal(s.pack_bytes, 1u << 20);
    assert_int_equal(s.store_cfg.connections, 32);
    assert_true(s.restore_sync);
    assert_int_equal(s.store_cfg.retry_budget_ms, 42);
    assert_int_equal(s.world_size, 1);
    cfg.version = CKPT_VERSION_NUMBER; /* this header's: slots 4..7 are read */
    refused(&cfg, "rank_flags");
    cfg.slot4_ = NULL;
    cfg.slot7_ = NULL;
    resolve_ok(&cfg, &s);
    assert_int_equal(s.store_cfg.connections, 32);
}

/* A field that is set wins over its variable; zero means the variable,
 * then the default. */
static void config_beats_environment(void **state)
{
    struct ckpt_config cfg = CKPT_CONFIG_INIT;
    struct ckpt_settings s;
    (void)state;
    setenv("CKPT_STORE", "file:///nowhere", 1);
    setenv("CKPT_CODEC", "lz4", 1);
    setenv("CKPT_CHUNK_BYTES", "131072", 1);
    setenv("CKPT_WORKERS", "3", 1);
    setenv("CKPT_KEEP", "5", 1);
    setenv("CKPT_INTERVAL", "90s", 1);
    setenv("CKPT_EPOCH", "9", 1);
    setenv("CKPT_PACK_BYTES", "4M", 1);
    setenv("CKPT_CONNECTIONS", "4", 1);
    setenv("CKPT_RESTORE_SYNC", "1", 1);
    setenv("CKPT_RETRY_BUDGET_MS", "5000", 1);

    resolve_ok(&cfg, &s); /* all from the environment */
    assert_string_equal(s.store_url, "file:///nowhere");
    assert_string_equal(s.run, "cfgtest");
    assert_int_equal(s.codec, CKPT_CODEC_LZ4);
    assert_int_equal(s.chunk_bytes, 131072);
    assert_int_equal(s.workers, 3);
    assert_int_equal(s.keep, 5);
    assert_int_equal(s.interval_ms, 90000);
    assert_int_equal(s.epoch, 9);
    assert_true(s.pack_given);
    assert_int_equal(s.pack_bytes, 4u << 20);
    assert_int_equal(s.store_cfg.connections, 4);
    assert_true(s.restore_sync);
    assert_int_equal(s.store_cfg.retry_budget_ms, 0); /* the store reads the variable */

    cfg.store = "file:///elsewhere";
    cfg.run = "given";
    cfg.codec = CKPT_CODEC_ZSTD;
    cfg.codec_level = 7;
    cfg.chunk_bytes = 1u << 20;
    cfg.workers = 2;
    cfg.keep = 1;
    cfg.interval_ms = 250;
    cfg.epoch = 4;
    cfg.pack_bytes = CKPT_PACK_NONE;
    cfg.connections = 32;
    cfg.restore_sync = -1;
    cfg.retry_budget_ms = 700;
    resolve_ok(&cfg, &s);
    assert_string_equal(s.store_url, "file:///elsewhere");
    assert_string_equal(s.run, "given");
    assert_int_equal(s.codec, CKPT_CODEC_ZSTD);
    assert_int_equal(s.level, 7);
    assert_int_equal(s.chunk_bytes, 1u << 20);
    assert_int_equal(s.workers, 2);
    assert_int_equal(s.keep, 1);
    assert_int_equal(s.interval_ms, 250);
    assert_int_equal(s.epoch, 4);
    assert_true(s.pack_given);
    assert_int_equal(s.pack_bytes, 0);
    assert_int_equal(s.store_cfg.connections, 32);
    assert_false(s.restore_sync);
    assert_int_equal(s.store_cfg.retry_budget_ms, 700);
#if defined(CKPT_WITH_S3) || defined(CKPT_WITH_AZURE)
    {
        /* and the store's retry policy takes it over CKPT_RETRY_BUDGET_MS */
        struct ckpt_retry_policy p;
        ckpt__retry_policy_init_budget(&p, s.store_cfg.retry_budget_ms);
        assert_int_equal(p.budget_ms, 700);
        ckpt__retry_policy_init_budget(&p, 0);
        assert_int_equal(p.budget_ms, 5000);
    }
#endif

    /* CKPT_PACK_BYTES=0 and CKPT_RESTORE_SYNC=0 are answers too */
    cfg = (struct ckpt_config)CKPT_CONFIG_INIT;
    setenv("CKPT_PACK_BYTES", "0", 1);
    setenv("CKPT_RESTORE_SYNC", "0", 1);
    resolve_ok(&cfg, &s);
    assert_true(s.pack_given);
    assert_int_equal(s.pack_bytes, 0);
    assert_false(s.restore_sync);
    cfg.restore_sync = 1;
    resolve_ok(&cfg, &s);
    assert_true(s.restore_sync);
}

/* Values out of range are refused before anything is opened, each with
 * its reason. */
static void bad_values_are_refused_with_a_reason(void **state)
{
    struct ckpt_config cfg = CKPT_CONFIG_INIT;
    struct ckpt_settings s;
    char err[CKPT_ERR_MAX];
    (void)state;
#define REFUSE_FIELD(field, value, what)                                       \
    do {                                                                       \
        cfg = (struct ckpt_config)CKPT_CONFIG_INIT;                            \
        cfg.field = value;                                                     \
        refused(&cfg, what);                                                   \
    } while (0)
    REFUSE_FIELD(codec, (ckpt_codec)9, "codec");
    REFUSE_FIELD(codec_level, 20, "zstd level");
    REFUSE_FIELD(codec_level, -3, "zstd level");
    REFUSE_FIELD(chunk_bytes, 1000, "chunk size");
    REFUSE_FIELD(chunk_bytes, (size_t)128 << 20, "chunk size");
    REFUSE_FIELD(on_busy, (ckpt_busy_policy)2, "on_busy");
    REFUSE_FIELD(log_level, (ckpt_log_level)5, "log_level");
    REFUSE_FIELD(run, "a/b", "run name");
    REFUSE_FIELD(pack_bytes, 1000, "pack_bytes");
    REFUSE_FIELD(pack_bytes, (size_t)2 << 30, "pack_bytes");
    REFUSE_FIELD(connections, 257, "connections");
    REFUSE_FIELD(restore_sync, 2, "restore_sync");
    REFUSE_FIELD(restore_sync, -2, "restore_sync");
#undef REFUSE_FIELD
    cfg = (struct ckpt_config)CKPT_CONFIG_INIT;
    cfg.codec = CKPT_CODEC_LZ4;
    cfg.codec_level = 40; /* a level means nothing to lz4 */
    resolve_ok(&cfg, &s);

    static const struct {
        const char *var, *value;
    } bad_env[] = {
        { "CKPT_CODEC", "zstd:22" },    { "CKPT_CODEC", "gzip" },
        { "CKPT_INTERVAL", "soon" },    { "CKPT_PACK_BYTES", "1k" },
        { "CKPT_PACK_BYTES", "2G" },    { "CKPT_CONNECTIONS", "0" },
        { "CKPT_CONNECTIONS", "many" }, { "CKPT_RESTORE_SYNC", "yes" },
        { "CKPT_RUN", ".." },           { "CKPT_CHUNK_BYTES", "1024" },
    };
    for (size_t i = 0; i < sizeof bad_env / sizeof bad_env[0]; i++) {
        clean_env(NULL);
        setenv(bad_env[i].var, bad_env[i].value, 1);
        cfg = (struct ckpt_config)CKPT_CONFIG_INIT;
        /* the chunk size message names the size, the others the variable */
        refused(&cfg, strcmp(bad_env[i].var, "CKPT_CHUNK_BYTES") == 0   ? "chunk size"
                      : strcmp(bad_env[i].var, "CKPT_RUN") == 0         ? "run name"
                                                                        : bad_env[i].var);
    }
    clean_env(NULL);

    /* another major version: not read at all */
    cfg = (struct ckpt_config)CKPT_CONFIG_INIT;
    cfg.version = 10000;
    assert_int_equal(ckpt__config_resolve(&cfg, &s, err), CKPT_E_INVAL);
    assert_non_null(strstr(err, "10000"));
}

/* The defaults that depend on the store: packs, larger chunks and more
 * workers where each request is a round trip. */
static void store_defaults(void **state)
{
    struct ckpt_config cfg = CKPT_CONFIG_INIT;
    struct ckpt_settings s;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned local = ncpu < 1 ? 1 : ncpu > 8 ? 8 : (unsigned)ncpu;
    (void)state;

    resolve_ok(&cfg, &s);
    ckpt__config_fit_store(&s, &file_store);
    assert_int_equal(s.chunk_bytes, CKPT_DEFAULT_CHUNK);
    assert_int_equal(s.workers, local);
    assert_int_equal(s.pack_bytes, 0);
    assert_int_equal(s.pack_inflight, local < 2 ? 1 : local / 2);

    resolve_ok(&cfg, &s);
    ckpt__config_fit_store(&s, &s3_store);
    assert_int_equal(s.chunk_bytes, CKPT_DEFAULT_CHUNK_REMOTE);
    assert_int_equal(s.workers, local < 8 ? 8 : local);
    assert_int_equal(s.pack_bytes, CKPT_DEFAULT_PACK);

    /* connections set the workers of an object store (at most 64) */
    cfg.connections = 200;
    resolve_ok(&cfg, &s);
    ckpt__config_fit_store(&s, &s3_store);
    assert_int_equal(s.workers, 64);
    assert_int_equal(s.pack_inflight, 32);
    resolve_ok(&cfg, &s);
    ckpt__config_fit_store(&s, &file_store);
    assert_int_equal(s.workers, local);

    /* what was given stays */
    cfg.workers = 5;
    cfg.chunk_bytes = 1u << 20;
    cfg.pack_bytes = CKPT_PACK_NONE;
    resolve_ok(&cfg, &s);
    ckpt__config_fit_store(&s, &s3_store);
    assert_int_equal(s.workers, 5);
    assert_int_equal(s.chunk_bytes, 1u << 20);
    assert_int_equal(s.pack_bytes, 0);
    cfg.pack_bytes = 1u << 20;
    resolve_ok(&cfg, &s);
    ckpt__config_fit_store(&s, &file_store);
    assert_int_equal(s.pack_bytes, 1u << 20);
}

/* Through ckpt_open(): the settings reach the context; a refusal is
 * reported by ckpt_errmsg(NULL); a zeroed config logs no debug lines. */
static int g_debug_lines, g_lines;
static void count_log(void *user, ckpt_log_level level, const char *subject, const char *msg)
{
    (void)user;
    (void)subject;
    (void)msg;
    g_lines++;
    if (level == CKPT_LOG_DEBUG)
        g_debug_lines++;
}

static void open_uses_the_settings(void **state)
{
    struct ckpt_config cfg = CKPT_CONFIG_INIT, zero;
    struct ckpt_ctx *ctx;
    char *dir = test_tmpdir(), url[700];
    (void)state;
    snprintf(url, sizeof url, "file://%s/store", dir);

    cfg.store = url;
    cfg.pack_bytes = 1u << 20;
    cfg.restore_sync = 1;
    cfg.log_fn = count_log;
    cfg.log_level = CKPT_LOG_DEBUG;
    g_debug_lines = 0;
    assert_int_equal(ckpt_open(&cfg, &ctx), CKPT_OK);
    assert_int_equal(ctx->pack_bytes, 1u << 20);
    assert_true(ctx->restore_sync);
    assert_int_equal(ctx->chunk_bytes, CKPT_DEFAULT_CHUNK);
    assert_string_equal(ctx->run, "cfgtest");
    ckpt_close(ctx);
    assert_true(g_debug_lines > 0);

    memset(&zero, 0, sizeof zero);
    zero.store = url;
    zero.log_fn = count_log;
    g_debug_lines = 0;
    assert_int_equal(ckpt_open(&zero, &ctx), CKPT_OK);
    ckpt_close(ctx);
    assert_int_equal(g_debug_lines, 0);

    cfg.pack_bytes = 77;
    g_lines = 0;
    assert_int_equal(ckpt_open(&cfg, &ctx), CKPT_E_CONFIG);
    assert_null(ctx);
    assert_non_null(strstr(ckpt_errmsg(NULL), "pack_bytes"));
    assert_true(g_lines > 0); /* logged where the caller asked */

    cfg.pack_bytes = 0;
    cfg.version = 20000;
    assert_int_equal(ckpt_open(&cfg, &ctx), CKPT_E_INVAL);
    assert_null(ctx);
    assert_non_null(strstr(ckpt_errmsg(NULL), "major version"));
    test_rmrf(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(zeroed_config_is_the_defaults, clean_env),
        cmocka_unit_test_setup(log_level_zero_is_debug_only_with_a_version, clean_env),
        cmocka_unit_test_setup(slot_fields_are_read_by_version, clean_env),
        cmocka_unit_test_setup(config_beats_environment, clean_env),
        cmocka_unit_test_setup(bad_values_are_refused_with_a_reason, clean_env),
        cmocka_unit_test_setup(store_defaults, clean_env),
        cmocka_unit_test_setup(open_uses_the_settings, clean_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
