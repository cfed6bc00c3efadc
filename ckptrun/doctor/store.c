/* doctor/store.c -- store, store-rw and conditional: the credentials work, and the lease is
 * enforced (doctor/store.h). */
#include "doctor/store.h"
#include "doctor/report.h"
#include "base/runlog.h"
#include "opts.h"
#include "base/parse.h"
#include "ckpt_store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *store_advice(const struct doctor *d, ckpt_status st)
{
    if (strncmp(d->o->store, "file://", 7) == 0) {
        /* a local path: what is wrong is on this machine */
        switch (st) {
        case CKPT_E_PERM:
            return "this user cannot create files there: fix the directory's owner or "
                   "permissions (or a read-only mount), or choose another --store "
                   "file:///PATH";
        case CKPT_E_NOSPACE:
            return "the file system of the store is full: free space or choose another "
                   "--store";
        case CKPT_E_IO:
        case CKPT_E_NOENT:
        case CKPT_E_EXISTS:
            return "the store's path must be a directory (ckptrun creates it when "
                   "missing): remove or rename what is in the way, or choose another "
                   "--store file:///PATH";
        case CKPT_E_CONFIG:
        case CKPT_E_INVAL:
            return "write the store as file:///absolute/path";
        default:
            return "see docs/stores.md";
        }
    }
    switch (st) {
    case CKPT_E_AUTH:
        return "fix the credentials: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE or "
               "the instance role (s3://, gs://), AZURE_STORAGE_CONNECTION_STRING or "
               "AZURE_STORAGE_ACCOUNT + KEY/SAS (az://); see docs/stores.md";
    case CKPT_E_CONFIG:
    case CKPT_E_NOENT:
        return "check the store URL, bucket/container name (it must exist), region and "
               "endpoint";
    case CKPT_E_UNREACHABLE:
    case CKPT_E_TRANSIENT:
    case CKPT_E_THROTTLED:
        return "the store does not answer: check the endpoint, DNS, proxy (HTTPS_PROXY) and "
               "the network path from this instance";
    case CKPT_E_NOSPACE:
        return "the store (or its disk) is full";
    case CKPT_E_PERM:
        return "the credentials are accepted but may not write here: check the policy (or "
               "SAS permissions) for this bucket/container and prefix";
    default:
        return "see docs/stores.md";
    }
}

/* Lower the store's retry budget and stall timeout so one operation cannot
 * eat the whole --budget (this process's environment only). */
static void cap_env_ms(const char *var, int64_t cap)
{
    const char *v = getenv(var);
    char buf[32];
    if (v && *v && atoll(v) > 0 && atoll(v) <= cap)
        return;
    snprintf(buf, sizeof buf, "%lld", (long long)cap);
    setenv(var, buf, 1);
}

void fill_random(uint8_t *b, size_t n, uint64_t seed)
{
    uint64_t s = seed | 1;
    for (size_t i = 0; i + 8 <= n; i += 8) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        memcpy(b + i, &s, 8);
    }
}

static int collect_key(void *user, const struct ckpt_obj_info *obj)
{
    cJSON *arr = user;
    if (cJSON_GetArraySize(arr) >= 1000)
        return 1;
    cJSON_AddItemToArray(arr, cJSON_CreateString(obj->key));
    return 0;
}

void clean_prefix(struct doctor *d, const char *prefix)
{
    cJSON *arr = cJSON_CreateArray();
    const char *keys[1000];
    size_t n = 0;
    char err[CKPT_ERR_MAX];

    if (!arr)
        return;
    if (d->st->ops->list(d->st, prefix, collect_key, arr, err) == CKPT_OK) {
        cJSON *it;
        cJSON_ArrayForEach(it, arr)
            if (n < 1000)
                keys[n++] = it->valuestring;
        if (n)
            d->st->ops->del(d->st, keys, n, err);
    }
    cJSON_Delete(arr);
}

void check_store(struct doctor *d)
{
    struct ckpt_store_config cfg;
    char err[CKPT_ERR_MAX] = "", key[512], host[128], hs[128], etag[CKPT_ETAG_MAX];
    uint8_t small[4096];
    void *back = NULL;
    size_t blen = 0;
    ckpt_status st;
    int64_t t;
    const char *src;
    struct ckpt_put_opts cond = { CKPT_PUT_IF_NONE_MATCH, NULL, 0 };
    const char *del1[1];

    cap_env_ms("CKPT_RETRY_BUDGET_MS", doctor_left_ms(d) / 4 > 2000 ? doctor_left_ms(d) / 4 : 2000);
    cap_env_ms("CKPT_HTTP_STALL_MS", doctor_left_ms(d) / 4 > 2000 ? doctor_left_ms(d) / 4 : 2000);
    /* The retry budget is only checked after the minimum number of
     * attempts, whose backoff alone could outlast ours: fewer attempts and
     * shorter sleeps (a diagnosis needs to know, not to ride it out). */
    cap_env_ms("CKPT_RETRY_ATTEMPTS", 5);
    cap_env_ms("CKPT_RETRY_CAP_MS", 2000);
    memset(&cfg, 0, sizeof cfg);
    cfg.connections = 16;
    cfg.log_fn = log_lib;
    cfg.log_level = log_lib_level();
    st = ckpt_store_open(d->o->store, &cfg, &d->st, err);
    if (st != CKPT_OK) {
        doctor_add(d, "store", V_FAIL, store_advice(d, st), "cannot open %s: %s (%s)", d->o->store,
                   err[0] ? err : ckpt_strerror(st), ckpt_strerror(st));
        d->st = NULL;
        doctor_skip(d, "store-rw", "store");
        doctor_skip(d, "conditional", "store");
        goto out;
    }
    src = d->st->cred_source[0] ? d->st->cred_source : "none needed";
    doctor_add(d, "store", V_OK, NULL, "%s%s%s, credentials: %s", d->o->store,
        d->st->endpoint[0] ? " via " : "", d->st->endpoint, src);

    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "host");
    host[sizeof host - 1] = '\0';
    if (ckpt__name_sanitize(host, hs, sizeof hs) != 0)
        snprintf(hs, sizeof hs, "host");
    snprintf(d->prefix, sizeof d->prefix, "%s/.doctor/%.60s-%ld/", d->o->run, hs, (long)getpid());

    /* Write, read back, delete, and check it is gone. */
    fill_random(small, sizeof small, (uint64_t)getpid());
    snprintf(key, sizeof key, "%sprobe", d->prefix);
    t = ckpt__mono_ms();
    st = ckpt_store_put(d->st, key, small, sizeof small, NULL, NULL, err);
    d->rtt_ms = (double)(ckpt__mono_ms() - t);
    if (st == CKPT_OK) {
        d->sent += sizeof small;
        st = ckpt_store_get(d->st, key, sizeof small, &back, &blen, NULL, err);
        if (st == CKPT_OK && (blen != sizeof small || memcmp(back, small, blen) != 0)) {
            st = CKPT_E_CORRUPT;
            snprintf(err, sizeof err, "read back %zu bytes that differ from those written", blen);
        }
        d->received += blen;
    }
    if (st == CKPT_OK) {
        del1[0] = key;
        st = d->st->ops->del(d->st, del1, 1, err);
    }
    if (st == CKPT_OK) {
        uint64_t sz;
        ckpt_status h = d->st->ops->head(d->st, key, &sz, NULL, err);
        if (h != CKPT_E_NOENT) {
            st = h == CKPT_OK ? CKPT_E_INTERNAL : h;
            if (h == CKPT_OK)
                snprintf(err, sizeof err, "the probe object is still there after its delete");
        }
    }
    free(back);
    back = NULL;
    if (st != CKPT_OK) {
        if (st == CKPT_E_AUTH)
            doctor_add(d, "store-rw", V_FAIL, store_advice(d, st),
                       "the store refused the credentials from %s: %s", src, err);
        else
            doctor_add(d, "store-rw", V_FAIL, store_advice(d, st),
                       "write/read/delete of %s failed: %s (%s)", key, err[0] ? err : "-",
                       ckpt_strerror(st));
        doctor_skip(d, "conditional", "store-rw");
        goto out;
    }
    d->store_ok = 1;
    doctor_add(d, "store-rw", V_OK, NULL, "wrote, read back and deleted %sprobe (put %.0f ms)",
        d->prefix, d->rtt_ms);
    /* Only now that the store answers (a dead one would spend the budget
     * twice): remove what an interrupted doctor left under RUN/.doctor/. */
    snprintf(key, sizeof key, "%s/.doctor/", d->o->run);
    clean_prefix(d, key);

    /* Conditional writes: what the backend says, then checked. */
    if (!ckpt_store_can(d->st, CKPT_STORE_CONDITIONAL)) {
        doctor_add(d, "conditional", V_WARN,
            "run one instance per run (the cron `recover` line checks the lease, but cannot "
            "exclude a race); for MinIO and other enforcing services set CKPT_S3_CONDITIONAL=1",
            "not enforced by this store: the lease is best effort and HEAD fencing cannot stop "
            "a runner that lost its lease");
        goto out;
    }
    snprintf(key, sizeof key, "%scond", d->prefix);
    st = ckpt_store_put(d->st, key, small, 16, &cond, etag, err);
    if (st == CKPT_OK) {
        d->sent += 32;
        st = ckpt_store_put(d->st, key, small + 16, 16, &cond, etag, err);
        del1[0] = key;
        d->st->ops->del(d->st, del1, 1, err);
        if (st == CKPT_E_PRECONDITION)
            doctor_add(d, "conditional", V_OK, NULL,
                "enforced (a second create-only write was refused): one live runner per run, "
                "HEAD fenced against a runner that lost its lease");
        else if (st == CKPT_OK)
            doctor_add(d, "conditional", V_WARN,
                "this store ignores If-None-Match: set CKPT_S3_CONDITIONAL=0 so ckpt does not "
                "rely on it, and run one instance per run",
                "the store claims conditional writes but accepted a second create-only write");
        else
            doctor_add(d, "conditional", V_WARN, store_advice(d, st),
                       "second conditional write failed: %s", ckpt_strerror(st));
    } else {
        doctor_add(d, "conditional", V_WARN, store_advice(d, st),
                   "conditional write failed: %s (%s)", err, ckpt_strerror(st));
    }
out:
    return;
}
