/* store.c -- the scheme table (CKPT_STORE_SCHEME_MAP, ckpt_store.h), opening
 * a store by its URL (the backends' constructors are in backend.h) and the
 * settings every store reads from the environment. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "ckpt_store.h"
#include "ckpt_common.h"
#if defined(CKPT_WITH_S3) || defined(CKPT_WITH_AZURE)
#include "ckpt_http.h"
#endif

char *ckpt_store_default_url(char *buf, size_t len)
{
    const char *xdg = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
    int n;
    if (xdg && xdg[0] == '/')
        n = snprintf(buf, len, "file://%s/ckpt", xdg);
    else if (home && home[0] == '/')
        n = snprintf(buf, len, "file://%s/.local/share/ckpt", home);
    else
        return NULL;
    return n > 0 && (size_t)n < len ? buf : NULL;
}

/* Storage classes whose objects cannot be read back without a restore
 * request first: a checkpoint there is not a checkpoint. */
static int class_unreadable(const char *c)
{
    return !strcmp(c, "GLACIER") || !strcmp(c, "DEEP_ARCHIVE");
}

/* Zero/NULL fields of `in` from the environment (ckptrun's --storage-class,
 * --sse, --sse-kms-key-id, --max-rate and --connections set these for
 * itself and for the trainer it starts), checked. */
static ckpt_status config_from_env(const struct ckpt_store_config *in, int s3,
                                   struct ckpt_store_config *c, char *err)
{
    const char *v;
    if (in)
        *c = *in;
    else
        memset(c, 0, sizeof *c);
    if (!s3) { /* the S3 settings mean nothing elsewhere: not read, not checked */
        c->storage_class = c->sse = c->sse_kms_key_id = NULL;
    } else {
        if (!c->storage_class && (v = getenv("CKPT_S3_STORAGE_CLASS")) && *v)
            c->storage_class = v;
        if (!c->sse && (v = getenv("CKPT_S3_SSE")) && *v)
            c->sse = v;
        if (!c->sse_kms_key_id && (v = getenv("CKPT_S3_SSE_KMS_KEY_ID")) && *v)
            c->sse_kms_key_id = v;
    }
    if (!c->max_rate_bps && (v = getenv("CKPT_MAX_RATE")) && *v &&
        ckpt__parse_size(v, &c->max_rate_bps, NULL) != 0) {
        ckpt__seterr(err,
                     "CKPT_MAX_RATE='%.40s': expected bytes per second "
                     "like 50M or 1G",
                     v);
        return CKPT_E_CONFIG;
    }
    if (!c->connections && (v = getenv("CKPT_CONNECTIONS")) && *v) {
        char *end;
        unsigned long n = strtoul(v, &end, 10);
        if (*end || n < 1 || n > 256) {
            ckpt__seterr(err, "CKPT_CONNECTIONS='%.40s': expected 1..256", v);
            return CKPT_E_CONFIG;
        }
        c->connections = (unsigned)n;
    }
    if (c->storage_class) {
        size_t i, n = strlen(c->storage_class);
        for (i = 0; i < n; i++)
            if (!(isupper((unsigned char)c->storage_class[i]) || c->storage_class[i] == '_'))
                break;
        if (n == 0 || n > 40 || i < n || class_unreadable(c->storage_class)) {
            ckpt__seterr(err, "storage class '%.40s': %s", c->storage_class,
                         i < n || n == 0 || n > 40
                             ? "expected an S3 class name like STANDARD_IA or "
                               "INTELLIGENT_TIERING"
                             : "objects there must be restored before they can be read; "
                               "use GLACIER_IR for instant retrieval");
            return CKPT_E_CONFIG;
        }
    }
    if (c->sse_kms_key_id && !c->sse)
        c->sse = "aws:kms"; /* a key id means SSE-KMS */
    if (c->sse && strcmp(c->sse, "AES256") && strcmp(c->sse, "aws:kms")) {
        ckpt__seterr(err,
                     "server-side encryption '%.40s': expected AES256 "
                     "(SSE-S3) or aws:kms (SSE-KMS)",
                     c->sse);
        return CKPT_E_CONFIG;
    }
    if (c->sse_kms_key_id && strcmp(c->sse, "aws:kms")) {
        ckpt__seterr(err, "a KMS key id needs SSE-KMS (aws:kms), not %s", c->sse);
        return CKPT_E_CONFIG;
    }
    return CKPT_OK;
}

static ckpt_log_fn notice_fn;
static void *notice_user;

void ckpt_store_set_notice_log(ckpt_log_fn fn, void *user)
{
    notice_user = user;
    notice_fn = fn;
}

#if defined(CKPT_WITH_S3) || defined(CKPT_WITH_AZURE)
/* Once per process: a plain-http endpoint off this machine carries the
 * requests, session tokens and signatures in clear (docs/stores.md). */
static ckpt_status opened(ckpt_status st, struct ckpt_store *const *out,
                          const struct ckpt_store_config *c)
{
    const struct ckpt_store *s = st == CKPT_OK ? *out : NULL; /* after the open, not before */
    ckpt_log_fn fn = c->log_fn && c->log_level <= CKPT_LOG_WARN ? c->log_fn : notice_fn;
    void *user = c->log_fn && c->log_level <= CKPT_LOG_WARN ? c->log_user : notice_user;
    if (s && fn && ckpt__http_cleartext_remote(s->endpoint) && ckpt__http_cleartext_first()) {
        char msg[400];
        snprintf(msg, sizeof msg, "endpoint %.*s is plain http and not on this machine: "
                 "requests, signatures and any session token travel unencrypted "
                 "(use https://)", (int)strcspn(s->endpoint, " "), s->endpoint);
        fn(user, CKPT_LOG_WARN, "store", msg);
    }
    return st;
}
#endif

/* ---- schemes (CKPT_STORE_SCHEME_MAP) ------------------------------------------ */

/* One open function per backend, named open_<backend> after the map's
 * column: the URL is known to have the scheme's prefix. */
static ckpt_status open_FILE(const char *url, const struct ckpt_store_config *cfg,
                             struct ckpt_store **out, char *err)
{
    if (url[7] != '/') {
        ckpt__seterr(err, "file store URL must be file:///absolute/path: %.400s", url);
        return CKPT_E_CONFIG;
    }
    return ckpt__store_file_open(url + 7, cfg, out, err);
}

static ckpt_status open_S3(const char *url, const struct ckpt_store_config *cfg,
                           struct ckpt_store **out, char *err)
{
#ifdef CKPT_WITH_S3
    return opened(ckpt__store_s3_open(url, cfg, out, err), out, cfg);
#else
    (void)cfg, (void)out;
    ckpt__seterr(err, "%.*s:// stores are not compiled into this build", (int)strcspn(url, ":"),
                 url);
    return CKPT_E_UNSUPPORTED;
#endif
}

static ckpt_status open_AZURE(const char *url, const struct ckpt_store_config *cfg,
                              struct ckpt_store **out, char *err)
{
#ifdef CKPT_WITH_AZURE
    return opened(ckpt__store_az_open(url, cfg, out, err), out, cfg);
#else
    (void)cfg, (void)out;
    ckpt__seterr(err, "%.*s:// stores are not compiled into this build", (int)strcspn(url, ":"),
                 url);
    return CKPT_E_UNSUPPORTED;
#endif
}

/* Per backend: compiled in, and which settings it reads. */
#define FLAGS_FILE CKPT_SCHEME_BUILT
#ifdef CKPT_WITH_S3
#define FLAGS_S3 (CKPT_SCHEME_BUILT | CKPT_SCHEME_S3_SETTINGS)
#else
#define FLAGS_S3 CKPT_SCHEME_S3_SETTINGS
#endif
#ifdef CKPT_WITH_AZURE
#define FLAGS_AZURE CKPT_SCHEME_BUILT
#else
#define FLAGS_AZURE 0u
#endif

typedef ckpt_status (*open_fn)(const char *, const struct ckpt_store_config *,
                               struct ckpt_store **, char *);
#define ROW_(name, form, backend, what) { #name, form, what, FLAGS_##backend },
static const struct ckpt_store_scheme schemes[] = { CKPT_STORE_SCHEME_MAP(ROW_) };
#undef ROW_
#define OPEN_(name, form, backend, what) open_##backend,
static const open_fn openers[] = { CKPT_STORE_SCHEME_MAP(OPEN_) };
#undef OPEN_
#define NSCHEMES (sizeof schemes / sizeof schemes[0])

const struct ckpt_store_scheme *ckpt_store_scheme_at(size_t i)
{
    return i < NSCHEMES ? &schemes[i] : NULL;
}

/* The row whose "name://" starts url, or -1. */
static int scheme_index(const char *url)
{
    for (size_t i = 0; url && i < NSCHEMES; i++) {
        size_t n = strlen(schemes[i].name);
        if (!strncmp(url, schemes[i].name, n) && !strncmp(url + n, "://", 3))
            return (int)i;
    }
    return -1;
}

const struct ckpt_store_scheme *ckpt_store_scheme_known(const char *url)
{
    int i = scheme_index(url);
    const char *rest;
    if (i < 0)
        return NULL;
    rest = url + strlen(schemes[i].name) + 3;
    if (openers[i] == open_FILE ? rest[0] != '/' : !rest[0] || rest[0] == '/')
        return NULL;
    return &schemes[i];
}

char *ckpt_store_url_forms(char *buf, size_t len)
{
    size_t at = 0;
    if (!len)
        return buf;
    buf[0] = '\0';
    for (size_t i = 0; i < NSCHEMES && at < len; i++) {
        int n = snprintf(buf + at, len - at, "%s%s", i == 0 ? "" : i + 1 < NSCHEMES ? ", " : " or ",
                         schemes[i].form);
        if (n < 0)
            break;
        at += (size_t)n;
    }
    return buf;
}

ckpt_status ckpt_store_open(const char *url, const struct ckpt_store_config *cfg_in,
                            struct ckpt_store **out, char *err)
{
    char def[4096], forms[256];
    struct ckpt_store_config cfgv;
    ckpt_status cst;
    int i;
    *out = NULL;
    i = scheme_index(url);
    cst = config_from_env(cfg_in, i >= 0 && (schemes[i].flags & CKPT_SCHEME_S3_SETTINGS),
                          &cfgv, err);
    if (cst)
        return cst;
    if (!url || !*url) {
        url = ckpt_store_default_url(def, sizeof def);
        if (!url) {
            ckpt__seterr(err, "no store given and neither XDG_DATA_HOME nor "
                              "HOME is an absolute path");
            return CKPT_E_CONFIG;
        }
        i = scheme_index(url);
    }
    if (i < 0) {
        ckpt__seterr(err, "unknown store URL '%.400s' (expected %s)", url,
                     ckpt_store_url_forms(forms, sizeof forms));
        return CKPT_E_CONFIG;
    }
    return openers[i](url, &cfgv, out, err);
}

void ckpt_store_close(struct ckpt_store *st)
{
    if (st)
        st->ops->close(st);
}
