/* doctor/throughput.c -- upload and download: the link to the store, measured
 * (doctor/throughput.h). */
#include "doctor/throughput.h"
#include "doctor/report.h"
#include "doctor/store.h"
#include "base/runlog.h"
#include "opts.h"
#include "base/parse.h"
#include "ckpt_store.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct xfer {
    struct doctor *d;
    const uint8_t *buf;
    size_t obj;
    unsigned nobj;
    int download;
    atomic_uint next;
    atomic_uint done;
    atomic_int failed;
    ckpt_status first_err;
    int64_t deadline;
};

static void *xfer_worker(void *arg)
{
    struct xfer *x = arg;
    char key[512], err[CKPT_ERR_MAX];
    unsigned i;

    while ((i = atomic_fetch_add(&x->next, 1)) < x->nobj && ckpt__mono_ms() < x->deadline &&
           !atomic_load(&x->failed)) {
        ckpt_status st;
        snprintf(key, sizeof key, "%schunk-%03u", x->d->prefix, i);
        if (x->download) {
            void *b = NULL;
            size_t l = 0;
            st = ckpt_store_get(x->d->st, key, x->obj, &b, &l, NULL, err);
            free(b);
        } else {
            st = ckpt_store_put(x->d->st, key, x->buf, x->obj, NULL, NULL, err);
        }
        if (st != CKPT_OK) {
            if (atomic_exchange(&x->failed, 1) == 0)
                x->first_err = st;
            break;
        }
        atomic_fetch_add(&x->done, 1);
    }
    return NULL;
}

/* Moves nobj objects of obj bytes in parallel. @return the seconds taken
 * (objects done in x->done). */
static double run_xfer(struct xfer *x)
{
    pthread_t th[MAX_THREADS];
    unsigned n = x->nobj < MAX_THREADS ? x->nobj : MAX_THREADS, started = 0;
    int64_t t = ckpt__mono_ms();

    for (unsigned i = 0; i < n; i++)
        if (pthread_create(&th[i], NULL, xfer_worker, x) == 0)
            started++;
    if (!started)
        xfer_worker(x);
    for (unsigned i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    return (double)(ckpt__mono_ms() - t) / 1000.0;
}

void check_throughput(struct doctor *d)
{
    uint8_t *buf = NULL;
    size_t obj;
    uint64_t cap = PROBE_MAX;
    const char *ov = getenv("CKPT_DOCTOR_PROBE_BYTES");
    char key[512], err[CKPT_ERR_MAX], b1[32], b2[32];
    const char **keys = NULL;
    double secs, first_bps;
    int64_t share, t;
    struct xfer x;
    unsigned nobj;
    ckpt_status st;

    /* Nothing here runs without a store that took a write and gave it
     * back (store-rw; skipped itself when the store did not open). */
    if (!d->store_ok || !d->st) {
        doctor_skip(d, "upload", "store-rw");
        doctor_skip(d, "download", "upload");
        goto out;
    }
    if (doctor_left_ms(d) <= 1000) {
        doctor_add(d, "upload", V_WARN, "rerun with a larger --budget",
                   "not measured: budget spent");
        doctor_skip(d, "download", "upload");
        goto out;
    }
    obj = ckpt_store_can(d->st, CKPT_STORE_PACKS) ? PROBE_OBJ_REMOTE : PROBE_OBJ;
    /* A smaller bound may be asked for (tests, metered links); never more. */
    if (ov && *ov && ckpt__parse_size(ov, &cap, NULL) == 0 && cap > PROBE_MAX)
        cap = PROBE_MAX;
    if (cap < 64 * 1024)
        cap = 64 * 1024;
    if (obj > cap)
        obj = (size_t)cap;
    buf = malloc(obj);
    if (!buf) {
        doctor_add(d, "upload", V_WARN, NULL, "out of memory for the probe");
        doctor_skip(d, "download", "upload");
        goto out;
    }
    fill_random(buf, obj, 0x5eed ^ (uint64_t)getpid()); /* incompressible, like chunks */

    /* First a 256 KiB object alone: a rough rate that sizes the parallel
     * probe so it ends inside its share of the budget. */
    snprintf(key, sizeof key, "%sfirst", d->prefix);
    t = ckpt__mono_ms();
    st = ckpt_store_put(d->st, key, buf, obj < (256u << 10) ? obj : (256u << 10), NULL, NULL, err);
    secs = (double)(ckpt__mono_ms() - t) / 1000.0;
    if (st != CKPT_OK) {
        doctor_add(d, "upload", V_FAIL, store_advice(d, st), "probe upload failed: %s (%s)", err,
                   ckpt_strerror(st));
        doctor_skip(d, "download", "upload");
        goto out;
    }
    d->sent += obj < (256u << 10) ? obj : (256u << 10);
    first_bps = (double)(obj < (256u << 10) ? obj : (256u << 10)) / (secs > 0.001 ? secs : 0.001);
    share = doctor_left_ms(d) * 2 / 5;
    nobj = (unsigned)(cap / obj);
    {
        /* Sized as if parallel uploads were no faster than one (a shared
         * uplink): the probe then ends inside its share, or early. */
        double fit = first_bps * ((double)share / 1000.0) / (double)obj;
        if (fit < nobj)
            nobj = fit < 1 ? 1 : (unsigned)fit;
    }
    if (first_bps * ((double)share / 1000.0) < (double)obj) {
        /* Even one chunk would not fit in the share: measure with what does. */
        obj = (size_t)(first_bps * ((double)share / 1000.0) / 2);
        if (obj < 64 * 1024)
            obj = 64 * 1024;
        nobj = 1;
    }
    memset(&x, 0, sizeof x);
    x.d = d;
    x.buf = buf;
    x.obj = obj;
    x.nobj = nobj;
    x.deadline = ckpt__mono_ms() + share;
    secs = run_xfer(&x);
    d->sent += (uint64_t)atomic_load(&x.done) * obj;
    if (atomic_load(&x.failed)) {
        doctor_add(d, "upload", V_FAIL, store_advice(d, x.first_err), "parallel upload failed: %s",
                   ckpt_strerror(x.first_err));
        goto cleanup;
    }
    if (atomic_load(&x.done) == 0) {
        doctor_add(d, "upload", V_WARN, "rerun with a larger --budget",
            "not measured: the budget was spent");
        doctor_skip(d, "download", "upload");
        goto cleanup;
    }
    d->up_bps = (double)atomic_load(&x.done) * (double)obj / (secs > 0.001 ? secs : 0.001);
    doctor_add(d, "upload", V_OK, NULL, "%s/s (%u x %s objects, %u in parallel, %.1f s)",
               doctor_mb(d->up_bps, b1, sizeof b1), atomic_load(&x.done),
               ckpt__fmt_bytes(obj, b2, sizeof b2), nobj < MAX_THREADS ? nobj : MAX_THREADS, secs);

    /* Download what was uploaded, the way a restore reads chunks. */
    x.nobj = atomic_load(&x.done);
    atomic_store(&x.next, 0);
    atomic_store(&x.done, 0);
    x.download = 1;
    x.deadline = ckpt__mono_ms() + doctor_left_ms(d) * 2 / 3;
    secs = run_xfer(&x);
    d->received += (uint64_t)atomic_load(&x.done) * obj;
    if (atomic_load(&x.failed))
        doctor_add(d, "download", V_WARN, store_advice(d, x.first_err), "download failed: %s",
                   ckpt_strerror(x.first_err));
    else if (atomic_load(&x.done) == 0)
        doctor_add(d, "download", V_WARN, "rerun with a larger --budget",
            "not measured: the budget was spent");
    else {
        d->down_bps = (double)atomic_load(&x.done) * (double)obj / (secs > 0.001 ? secs : 0.001);
        doctor_add(d, "download", V_OK, NULL, "%s/s (%u objects, %.1f s)", doctor_mb(d->down_bps, b1, sizeof b1),
            atomic_load(&x.done), secs);
    }
cleanup:
    keys = calloc(nobj + 1, sizeof *keys);
    if (keys) {
        char (*names)[512] = calloc(nobj + 1, sizeof *names);
        if (names) {
            for (unsigned i = 0; i < nobj; i++) {
                snprintf(names[i], sizeof names[i], "%schunk-%03u", d->prefix, i);
                keys[i] = names[i];
            }
            snprintf(names[nobj], sizeof names[nobj], "%sfirst", d->prefix);
            keys[nobj] = names[nobj];
            d->st->ops->del(d->st, keys, nobj + 1, err);
            free(names);
        }
    }
out:
    free(keys);
    free(buf);
}
