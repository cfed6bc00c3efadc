/*
 * creds_aws.c -- AWS credentials, region and endpoint (creds_aws.h): the
 * environment, the INI profile files, the EC2 instance role.
 */
#include "creds_aws.h"
#include "backend.h"
#include "digest.h"
#include "ckpt_http.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROLE_PATH "/latest/meta-data/iam/security-credentials/"
#define ROLE_TIMEOUT_MS 2000
#define ROLE_FALLBACK_TTL_S 900  /* an Expiration we cannot read */

void ckpt__aws_keys_free(struct ckpt_aws_keys *k)
{
    ckpt__wipe_free(k->ak);
    ckpt__wipe_free(k->sk);
    ckpt__wipe_free(k->token);
    k->ak = k->sk = k->token = NULL;
    k->expiry = 0;
}

int64_t ckpt__aws_time(const char *s)
{
    struct tm tm;

    memset(&tm, 0, sizeof(tm));
    if (!s || !strptime(s, "%Y-%m-%dT%H:%M:%S", &tm))
        return 0;
    return (int64_t)timegm(&tm);
}

/* ---- profiles ---------------------------------------------------------------- */

void ckpt__aws_profile_free(struct ckpt_aws_profile *p)
{
    ckpt__wipe_free(p->ak);
    ckpt__wipe_free(p->sk);
    ckpt__wipe_free(p->token);
    free(p->region);
    free(p->endpoint);
    free(p->s3_endpoint);
    memset(p, 0, sizeof(*p));
}

static char *trim(char *s)
{
    char *e;

    while (isspace((unsigned char)*s))
        s++;
    e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

static void set_once(char **dst, const char *v)
{
    if (!*dst && v && *v)
        *dst = strdup(v);
}

void ckpt__aws_profile_read(const char *file, const char *want, struct ckpt_aws_profile *p)
{
    FILE *f = fopen(file, "r");
    char line[4096];
    int in_sec = 0, in_s3 = 0;

    if (!f)
        return;
    while (fgets(line, sizeof(line), f)) {
        int indented = line[0] == ' ' || line[0] == '\t';
        char *t = trim(line), *eq, *k, *v;

        if (!*t || *t == '#' || *t == ';')
            continue;
        if (*t == '[') {
            char *end = strchr(t, ']');
            if (end)
                *end = '\0';
            in_sec = strcmp(trim(t + 1), want) == 0;
            in_s3 = 0;
            continue;
        }
        if (!in_sec)
            continue;
        eq = strchr(t, '=');
        if (!eq)
            continue;
        *eq = '\0';
        k = trim(t);
        v = trim(eq + 1);
        if (!indented)
            in_s3 = 0;
        if (!indented && strcmp(k, "s3") == 0 && !*v) {
            in_s3 = 1;
            continue;
        }
        if (indented && in_s3) {
            if (strcmp(k, "addressing_style") == 0)
                p->path_style = strcmp(v, "path") == 0 ? 1 : p->path_style;
            else if (strcmp(k, "endpoint_url") == 0)
                set_once(&p->s3_endpoint, v);
            continue;
        }
        if (strcmp(k, "aws_access_key_id") == 0) {
            if (!p->ak && *v)
                snprintf(p->ak_file, sizeof(p->ak_file), "%s", file);
            set_once(&p->ak, v);
        } else if (strcmp(k, "aws_secret_access_key") == 0) {
            set_once(&p->sk, v);
        } else if (strcmp(k, "aws_session_token") == 0) {
            set_once(&p->token, v);
        } else if (strcmp(k, "region") == 0) {
            set_once(&p->region, v);
        } else if (strcmp(k, "endpoint_url") == 0) {
            set_once(&p->endpoint, v);
        }
    }
    /* Secrets were in `line`: do not leave them on the stack. */
    ckpt__wipe(line, sizeof(line));
    fclose(f);
}

void ckpt__aws_profile_load(struct ckpt_aws_profile *p)
{
    const char *name = getenv("AWS_PROFILE");
    const char *home = getenv("HOME");
    const char *cf = getenv("AWS_SHARED_CREDENTIALS_FILE");
    const char *cfg = getenv("AWS_CONFIG_FILE");
    char path[4096], sec[512];

    if (!name || !*name)
        name = "default";
    snprintf(p->name, sizeof(p->name), "%s", name);
    if (cf && *cf) {
        ckpt__aws_profile_read(cf, name, p);
    } else if (home) {
        snprintf(path, sizeof(path), "%s/.aws/credentials", home);
        ckpt__aws_profile_read(path, name, p);
    }
    /* In the config file, named profiles are "[profile NAME]". */
    if (strcmp(name, "default") == 0)
        snprintf(sec, sizeof(sec), "default");
    else
        snprintf(sec, sizeof(sec), "profile %s", name);
    if (cfg && *cfg) {
        ckpt__aws_profile_read(cfg, sec, p);
    } else if (home) {
        snprintf(path, sizeof(path), "%s/.aws/config", home);
        ckpt__aws_profile_read(path, sec, p);
    }
}

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* The first of four values that is set and not empty, else NULL. */
static const char *first(const char *a, const char *b, const char *c, const char *d)
{
    const char *v[4] = { a, b, c, d };

    for (int i = 0; i < 4; i++)
        if (v[i] && *v[i])
            return v[i];
    return NULL;
}

const char *ckpt__aws_region(const struct ckpt_aws_profile *p)
{
    const char *v = first(getenv("AWS_REGION"), getenv("AWS_DEFAULT_REGION"), p->region, NULL);
    return v ? v : "us-east-1";
}

const char *ckpt__aws_endpoint(const struct ckpt_aws_profile *p)
{
    return first(getenv("AWS_ENDPOINT_URL_S3"), getenv("AWS_ENDPOINT_URL"), p->s3_endpoint,
                 p->endpoint);
}

/* ---- the chain ---------------------------------------------------------------- */

int ckpt__aws_keys_static(int gcs, struct ckpt_aws_profile *p, struct ckpt_aws_keys *k,
                          char *source, size_t n)
{
    const char *v;

    if (gcs && getenv("GOOGLE_ACCESS_KEY_ID") && getenv("GOOGLE_SECRET_ACCESS_KEY")) {
        k->ak = strdup(getenv("GOOGLE_ACCESS_KEY_ID"));
        k->sk = strdup(getenv("GOOGLE_SECRET_ACCESS_KEY"));
        snprintf(source, n, "environment (GOOGLE_ACCESS_KEY_ID)");
    } else if (env("AWS_ACCESS_KEY_ID") && getenv("AWS_SECRET_ACCESS_KEY")) {
        k->ak = strdup(getenv("AWS_ACCESS_KEY_ID"));
        k->sk = strdup(getenv("AWS_SECRET_ACCESS_KEY"));
        if ((v = env("AWS_SESSION_TOKEN")) != NULL)
            k->token = strdup(v);
        snprintf(source, n, "environment (AWS_ACCESS_KEY_ID%s)",
                 k->token ? ", AWS_SESSION_TOKEN" : "");
    } else if (p->ak && p->sk) {
        snprintf(source, n, "profile '%.100s' in %.120s", p->name, p->ak_file);
        k->ak = p->ak;
        k->sk = p->sk;
        k->token = p->token;
        p->ak = p->sk = p->token = NULL;
    } else {
        return 0;
    }
    return 1;
}

ckpt_status ckpt__aws_keys_role(struct ckpt_aws_keys *k, char *source, size_t n, char *err)
{
    ckpt_status st = CKPT_E_AUTH;
    struct ckpt_imds *m = ckpt__imds_shared(NULL);
    char *body = NULL, path[512], role[256];
    size_t len = 0;
    long http = 0;
    cJSON *j = NULL;
    const char *ak, *sk, *tok, *exp;

    if (!m) {
        ckpt__seterr(err, "no credentials: env, profile empty and instance metadata "
                          "disabled");
        goto out;
    }
    if (ckpt__imds_get(m, ROLE_PATH, ROLE_TIMEOUT_MS, 4096, &body, &len, &http, NULL) != CKPT_OK ||
        http != 200 || !body || !*body) {
        ckpt__seterr(err, "no credentials: env, profile empty and no instance role");
        goto out;
    }
    snprintf(role, sizeof(role), "%.*s", (int)strcspn(body, "\r\n"), body);
    snprintf(source, n, "instance role '%.100s' (IMDSv2)", role);
    free(body);
    body = NULL;
    snprintf(path, sizeof(path), ROLE_PATH "%s", role);
    if (ckpt__imds_get(m, path, ROLE_TIMEOUT_MS, 64 * 1024, &body, &len, &http, NULL) != CKPT_OK ||
        http != 200 || !body) {
        ckpt__seterr(err, "instance role credentials unavailable (HTTP %ld)", http);
        goto out;
    }
    j = cJSON_ParseWithLength(body, len);
    ak = cJSON_GetStringValue(cJSON_GetObjectItem(j, "AccessKeyId"));
    sk = cJSON_GetStringValue(cJSON_GetObjectItem(j, "SecretAccessKey"));
    tok = cJSON_GetStringValue(cJSON_GetObjectItem(j, "Token"));
    exp = cJSON_GetStringValue(cJSON_GetObjectItem(j, "Expiration"));
    if (!ak || !sk || !*ak || !*sk) {
        ckpt__seterr(err, "instance role credentials malformed");
        goto out;
    }
    ckpt__aws_keys_free(k);
    k->ak = strdup(ak);
    k->sk = strdup(sk);
    k->token = tok && *tok ? strdup(tok) : NULL;
    k->expiry = ckpt__aws_time(exp);
    if (!k->expiry)
        k->expiry = (int64_t)time(NULL) + ROLE_FALLBACK_TTL_S;
    st = k->ak && k->sk ? CKPT_OK : CKPT_E_NOMEM;
out:
    if (body) {
        ckpt__wipe(body, len);
        free(body);
    }
    cJSON_Delete(j);
    return st;
}
