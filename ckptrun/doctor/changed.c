/* doctor/changed.c -- changed: how much of the state a final save sends (doctor/changed.h). */
#include "doctor/changed.h"
#include "doctor/report.h"
#include "base/runlog.h"
#include "opts.h"
#include "base/parse.h"

#include <stdio.h>

/* Up to 8 checkpoints, newest first (check_changed). */
static int newest_rows(void *user, const struct ckpt_info *info)
{
    struct { struct ckpt_info *v; unsigned n; } *c = user;
    c->v[c->n++] = *info;
    return c->n >= 8;
}

/* How much of the state changes between checkpoints: what a final save
 * has to compress and send. --changed says it; else the run's own
 * checkpoints show it (new bytes / stored bytes of each but the oldest
 * retained, the largest share); else all of it, as in full training, where
 * every weight and optimizer moment moves every step. */
void check_changed(struct doctor *d)
{
    struct ckpt_config cfg = CKPT_CONFIG_INIT;
    struct ckpt_ctx *ctx = NULL;
    struct ckpt_info rows[8];
    struct { struct ckpt_info *v; unsigned n; } c = { rows, 0 };
    double worst = 0;

    if (d->changed_known) {
        doctor_add(d, "changed", V_OK, NULL, "%.1f%% of the state changes between checkpoints (%s)",
            d->changed * 100.0, d->changed_src);
        return;
    }
    d->changed = 1.0;
    if (d->store_ok) {
        cfg.store = d->o->store;
        cfg.run = d->o->run;
        cfg.no_control = 1;
        cfg.log_fn = log_lib;
        cfg.log_level = CKPT_LOG_ERROR;
        if (ckpt_open(&cfg, &ctx) == CKPT_OK)
            ckpt_list(ctx, newest_rows, &c); /* newest first, at most 8 */
        ckpt_close(ctx);
    }
    for (unsigned i = 0; i + 1 < c.n; i++) /* the oldest listed was all new */
        if (rows[i].stored_bytes) {
            double f = (double)rows[i].new_bytes / (double)rows[i].stored_bytes;
            worst = f > worst ? f : worst;
        }
    if (c.n >= 2) {
        d->changed = worst > 0.001 ? worst : 0.001;
        d->changed_known = 1;
        snprintf(d->changed_src, sizeof d->changed_src,
                 "measured on run %.100s: the most new data any of its last %u checkpoints "
                 "stored", d->o->run, c.n - 1);
        doctor_add(d, "changed", V_OK, NULL, "%.1f%% of the state changes between checkpoints (%s)",
            d->changed * 100.0, d->changed_src);
    } else {
        snprintf(d->changed_src, sizeof d->changed_src, "assumed: full training changes every "
                 "weight and optimizer state between checkpoints");
        doctor_add(
            d, "changed", V_OK, NULL,
            "all of the state changes between checkpoints (%s; pass "
            "--changed for a frozen-backbone or LoRA run, or run doctor once the run has two "
            "checkpoints)%s",
            d->changed_src,
            d->store_ok ? ""
                        : "; the run's own checkpoints were not read: the store does not work");
    }
}
