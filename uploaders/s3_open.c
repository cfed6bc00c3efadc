/*
 * s3_open.c -- opening an s3:// or gs:// store: credentials (creds_aws.h),
 * region, endpoint and addressing style, the checksum, multipart and
 * encryption settings, and whether conditional writes are enforced.
 *
 * gs:// uses https://storage.googleapis.com, path-style, region "auto",
 * keys GOOGLE_ACCESS_KEY_ID/GOOGLE_SECRET_ACCESS_KEY (else the AWS env and
 * profile chain, never the EC2 role).
 */
#include "s3.h"
#include "backend.h"
#include "objops.h"
#include "digest.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct ckpt_store_ops s3_ops = CKPT_OBJ_OPS("s3");
static const struct ckpt_store_ops gs_ops = CKPT_OBJ_OPS("gs");

static int host_is_ip_or_local(const char *host, int *loopback)
{
    char h[256];
    size_t n;
    int ip = 1;
    const char *p;

    /* Strip the port (and brackets of an IPv6 literal). */
    if (host[0] == '[') {
        n = strcspn(host + 1, "]");
        snprintf(h, sizeof(h), "%.*s", (int)n, host + 1);
        *loopback = strcmp(h, "::1") == 0;
        return 1;
    }
    n = strcspn(host, ":");
    snprintf(h, sizeof(h), "%.*s", (int)n, host);
    for (p = h; *p; p++)
        if (!isdigit((unsigned char)*p) && *p != '.')
            ip = 0;
    *loopback = strncmp(h, "127.", 4) == 0 || strcmp(h, "localhost") == 0;
    return ip || strcmp(h, "localhost") == 0;
}

/* Endpoint and addressing style; *loopback for a local test peer. */
static ckpt_status endpoint(struct s3 *s, const struct ckpt_aws_profile *prof, int *loopback,
                            char *err)
{
    const char *ep;
    ckpt_status st;

    if (s->gcs) {
        ep = getenv("CKPT_GS_ENDPOINT");   /* tests only */
        if (!ep || !*ep)
            ep = "https://storage.googleapis.com";
        s->path_style = 1;
    } else {
        ep = ckpt__aws_endpoint(prof);
        s->path_style = prof->path_style;
    }
    if (ep) {
        st = ckpt__obj_endpoint(&s->o, ep, err);
        if (st != CKPT_OK)
            return st;
        if ((strcmp(s->o.ep_scheme, "https") != 0 && strcmp(s->o.ep_scheme, "http") != 0) ||
            !*s->o.ep_host) {
            ckpt__seterr(err, "bad endpoint URL: %s", ep);
            return CKPT_E_CONFIG;
        }
        if (host_is_ip_or_local(s->o.ep_host, loopback))
            s->path_style = 1;   /* no virtual host on an IP address */
    } else {
        s->default_ep = 1;
        s->o.ep_scheme = strdup("https");
        s->o.ep_host = strdup("");
        s->o.ep_path = strdup("");
        if (!s->o.ep_scheme || !s->o.ep_host || !s->o.ep_path)
            return CKPT_E_NOMEM;
    }
    /* A dotted bucket name does not match the wildcard certificate. */
    if (strchr(s->o.container, '.') && strcmp(s->o.ep_scheme, "https") == 0)
        s->path_style = 1;
    return CKPT_OK;
}

/* The checksum an object PUT carries. Content-MD5 is what every
 * S3-compatible service checks; AWS also checks x-amz-checksum-crc32c,
 * which costs ~1/30 of the CPU (ISA-L): the default on AWS's own
 * endpoints, md5 elsewhere, CKPT_S3_CHECKSUM=md5|crc32c|auto to choose. */
static ckpt_status checksum(struct s3 *s, char *err)
{
    const char *v = getenv("CKPT_S3_CHECKSUM");
    char crcbuf[9];
    int have_crc = ckpt__crc32c_base64("", 0, crcbuf);

    if (!v || !*v || strcmp(v, "auto") == 0) {
        size_t hl = strlen(s->o.ep_host);
        s->crc32c = !s->gcs && have_crc &&
                    (s->default_ep ||
                     (hl > 14 && strcmp(s->o.ep_host + hl - 14, ".amazonaws.com") == 0));
    } else if (strcmp(v, "md5") == 0) {
        s->crc32c = 0;
    } else if (strcmp(v, "crc32c") == 0 && !s->gcs && have_crc) {
        s->crc32c = 1;
    } else {
        ckpt__seterr(err, "CKPT_S3_CHECKSUM='%.40s': expected md5, crc32c or auto%s", v,
                     strcmp(v, "crc32c") ? ""
                     : s->gcs            ? " (gs:// takes md5 only)"
                                         : " (this build has no ISA-L: md5 only)");
        return CKPT_E_CONFIG;
    }
    return CKPT_OK;
}

static ckpt_status settings(struct s3 *s, const struct ckpt_store_config *cfg, char *err)
{
    if (cfg) {
        if (cfg->storage_class && !(s->storage_class = strdup(cfg->storage_class)))
            return CKPT_E_NOMEM;
        if (cfg->sse && !(s->sse = strdup(cfg->sse)))
            return CKPT_E_NOMEM;
        if (cfg->sse_kms_key_id && !(s->kms_key = strdup(cfg->sse_kms_key_id)))
            return CKPT_E_NOMEM;
    }
    if (s->gcs && s->sse) {
        ckpt__seterr(err, "server-side encryption settings (--sse, CKPT_S3_SSE) are for "
                          "s3://; GCS encrypts every object with Google-managed or bucket "
                          "default keys");
        return CKPT_E_CONFIG;
    }
    /* With SSE-KMS the ETag is not the MD5 of the content. */
    s->o.verify = !(s->sse && strcmp(s->sse, "aws:kms") == 0) && !s->gcs;
    return CKPT_OK;
}

ckpt_status ckpt__store_s3_open(const char *url, const struct ckpt_store_config *cfg,
                                struct ckpt_store **out, char *err)
{
    ckpt_status st;
    struct s3 *s = NULL;
    struct ckpt_aws_profile prof;
    const char *v;
    int loopback = 0, gcs, conditional;

    memset(&prof, 0, sizeof(prof));
    *out = NULL;
    if (!url || (strncmp(url, "s3://", 5) != 0 && strncmp(url, "gs://", 5) != 0)) {
        ckpt__seterr(err, "not an s3:// or gs:// URL");
        st = CKPT_E_CONFIG;
        goto out;
    }
    gcs = url[0] == 'g';
    s = calloc(1, sizeof(*s));
    if (!s) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    s->gcs = gcs;
    st = ckpt__obj_open(&s->o, gcs ? &gs_ops : &s3_ops, gcs ? &ckpt_gs_dialect : &ckpt_s3_dialect,
                        gcs ? "gs" : "s3", url, "bucket", cfg, err);
    if (st != CKPT_OK)
        goto out;
    ckpt__aws_profile_load(&prof);
    ckpt__aws_keys_static(gcs, &prof, &s->keys, s->o.base.cred_source,
                          sizeof(s->o.base.cred_source));
    s->region = strdup(gcs ? "auto" : ckpt__aws_region(&prof));
    if (!s->region) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    st = endpoint(s, &prof, &loopback, err);
    if (st != CKPT_OK)
        goto out;
    /* The instance role last, for s3:// only. */
    if (!s->keys.ak && !gcs) {
        pthread_mutex_lock(&s->o.mu);
        st = ckpt__aws_keys_role(&s->keys, s->o.base.cred_source, sizeof(s->o.base.cred_source),
                                 err);
        pthread_mutex_unlock(&s->o.mu);
        if (st != CKPT_OK)
            goto out;
    }
    if (!s->keys.ak || !s->keys.sk) {
        ckpt__seterr(err, "no credentials found for %s (environment, profile%s)", url,
                     gcs ? "" : ", instance role");
        st = CKPT_E_AUTH;
        goto out;
    }
    /* Conditional writes: AWS S3, GCS and most services enforce them; the
     * local test peer s3rver ignores them, so loopback endpoints default to
     * "not enforced" (override with CKPT_S3_CONDITIONAL=0|1). */
    conditional = !loopback;
    v = getenv("CKPT_S3_CONDITIONAL");
    if (v && (*v == '0' || *v == '1'))
        conditional = *v == '1';
    if (conditional)
        s->o.base.caps.flags |= CKPT_STORE_CONDITIONAL;
    st = checksum(s, err);
    if (st == CKPT_OK)
        st = settings(s, cfg, err);
    if (st != CKPT_OK)
        goto out;
    ckpt__obj_parts_config(&s->o, "CKPT_S3_PART_SIZE", 1024 * 1024, "CKPT_S3_MULTIPART_MIN");
    s->o.page_size = 1000;   /* ListObjectsV2's most */
    st = ckpt__obj_start(&s->o, cfg);
    if (st != CKPT_OK)
        goto out;
    if (s->default_ep)
        snprintf(s->o.base.endpoint, sizeof(s->o.base.endpoint), "https://s3.%.64s.amazonaws.com "
                 "(region %.64s)", s->region, s->region);
    else
        snprintf(s->o.base.endpoint, sizeof(s->o.base.endpoint), "%s://%.150s%.60s (region %.30s)",
                 s->o.ep_scheme, s->o.ep_host, s->o.ep_path, s->region);
    ckpt__obj_log(&s->o, CKPT_LOG_DEBUG, "%s: bucket %s prefix '%s' region %s %s-style%s", s->o.tag,
                  s->o.container, s->o.prefix, s->region, s->path_style ? "path" : "virtual-host",
                  conditional ? "" : ", conditional puts not enforced");
    *out = &s->o.base;
    s = NULL;
out:
    ckpt__aws_profile_free(&prof);
    ckpt__obj_close(s ? &s->o.base : NULL);
    return st;
}
