/* sup_nodes.c -- the supervisor as one node of a job (sup_nodes.h). */
#include "sup/sup_nodes.h"
#include "base/fsutil.h"
#include "record/lease.h"
#include "sup/notice_queue.h"
#include "opts.h"
#include "record/record.h"
#include "base/runlog.h"
#include "sup/sup.h"
#include "sup/sup_log.h"
#include "watch/watch.h"
#include "ckpt_store.h"
#include "sup/stop.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How long a node other than 0 waits for node 0 to take the lease: node 0
 * may be restoring, or its start may lag (srun starts nodes together,
 * Kubernetes pods may come minutes apart). */
#define JOIN_WAIT_MS (10 * 60 * 1000)
/* An empty part is written for a step once another node's part of it is
 * this old and still nothing of that step is in CKPT_DIR: a node that
 * saves a step writes it within this of the others (docs/multirank.md). */
#define EMPTY_AFTER_MS 2000
/* A node whose trainer is gone during a stop (it could not be asked, or
 * ended) stays this long for the other nodes' parts of the stop's step,
 * then as long as any step is pending (until the stop's deadline). */
#define STOP_PARTS_WAIT_MS 8000

int sup_nodes_resolve(struct sup *s)
{
    return nodes_resolve(s->o, &s->nid);
}

int sup_nodes_claim(struct sup *s, int *rc)
{
    if (s->nid.rank == 0) {
        s->cl.job = s->nid.job;
        if (claim_lease(s->rec, s->o, s->recover, &s->cl, rc))
            return 1;
    } else {
        uint64_t epoch = 0;
        if (nodes_join_lease(s->rec, s->o, &s->nid, JOIN_WAIT_MS, &epoch, rc))
            return 1;
        s->cl.epoch = epoch;
    }
    record_set_node(s->rec, s->nid.rank, s->nid.nnodes);
    return 0;
}

void sup_nodes_config(const struct sup *s, struct ckpt_config *cfg)
{
    if (s->nid.nnodes <= 1)
        return;
    cfg->world_size = s->nid.nnodes;
    cfg->rank = s->nid.rank;
    cfg->rank_flags = CKPT_RANKS_STORE;
}

struct newest {
    int any;
    uint64_t step;
    unsigned world;
};

static int newest_cb(void *user, const struct ckpt_info *info)
{
    struct newest *n = user;
    n->any = 1;
    n->step = info->step;
    n->world = info->world_size ? info->world_size : 1;
    return 1;
}

/* As prestart.c's staged restore: into a hidden directory of CKPT_DIR,
 * then each top-level entry moved into place. */
static ckpt_status restore_part(struct ckpt_ctx *ctx, uint64_t step, const char *dir,
                                uint64_t *got)
{
    char stage[PATH_MAX + 64], from[PATH_MAX + 320], to[PATH_MAX + 256];
    DIR *d = NULL;
    struct dirent *de;
    ckpt_status st;

    snprintf(stage, sizeof stage, "%s/.ckptrun-restore-XXXXXX", dir);
    if (!mkdtemp(stage))
        return CKPT_E_IO;
    /* In a context of rank K of N, libckpt restores part K of the global
     * step (with its replicated items). */
    st = ckpt_restore_dir(ctx, step, stage, got);
    if (st == CKPT_OK && !(d = opendir(stage)))
        st = CKPT_E_IO;
    while (st == CKPT_OK && (de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        snprintf(from, sizeof from, "%s/%s", stage, de->d_name);
        snprintf(to, sizeof to, "%s/%s", dir, de->d_name);
        if (rename(from, to) != 0 && (rm_rf(to) != 0 || rename(from, to) != 0))
            st = CKPT_E_IO;
    }
    if (d)
        closedir(d);
    rm_rf(stage);
    return st;
}

int sup_nodes_prestart(struct sup *s, struct ckpt_ctx *ctx)
{
    struct newest n = { 0, 0, 0 };
    ckpt_status st;
    uint64_t got = 0;
    cJSON *f;

    st = ckpt_list(ctx, newest_cb, &n);
    if (st != CKPT_OK) {
        log_error("cannot list checkpoints of run %s in %s: %s %s", s->o->run, s->o->store,
                  ckpt_strerror(st), ckpt_errmsg(ctx));
        return exit_code_for_status(st);
    }
    s->last_step = n.any ? (int64_t)n.step : -1;
    if (!n.any)
        return 0;
    if (n.world != s->nid.nnodes) {
        log_error("the newest checkpoint of run %s (step %" PRIu64 ") was written by %u "
                  "node(s); this job has %u (--nnodes): %s. Resume it with %u nodes, or "
                  "restore its parts by hand", s->o->run, n.step,
                  n.world, s->nid.nnodes, ckpt_strerror(CKPT_E_WORLD), n.world);
        return EXIT_CONFIG;
    }
    st = restore_part(ctx, CKPT_STEP_LATEST, s->dir, &got);
    if (st == CKPT_E_NOENT) /* this node's part was empty: nothing to write */
        st = CKPT_OK;
    if (st != CKPT_OK) {
        log_error("cannot restore node %u's part of step %" PRIu64 " of run %s into %s: %s %s; "
                  "not starting the command", s->nid.rank, n.step, s->o->run, s->dir,
                  ckpt_strerror(st), ckpt_errmsg(ctx));
        return st == CKPT_E_WORLD ? EXIT_CONFIG : exit_code_for_status(st);
    }
    s->resumed = 1;
    s->restored_step = got ? got : n.step;
    if ((f = cJSON_CreateObject())) {
        cJSON_AddNumberToObject(f, "step", (double)s->restored_step);
        cJSON_AddNumberToObject(f, "node", s->nid.rank);
        cJSON_AddStringToObject(f, "dir", s->dir);
    }
    log_event(LOG_INFO, "restore", f);
    cJSON_Delete(f);
    return 0;
}

struct stale_stops {
    const char *keep;         /* relative key of this generation's stop */
    struct ckpt_strv keys;
};

static int stale_cb(void *user, const struct ckpt_obj_info *obj)
{
    struct stale_stops *ss = user;
    if (strcmp(obj->key, ss->keep) == 0)
        return 0;
    return ckpt__strv_push(&ss->keys, obj->key) != 0; /* no memory: stop listing */
}

/* Node 0 of a new generation holds the lease: the stop objects of earlier
 * generations are over (their nodes are fenced) and go. */
static void remove_old_stops(struct sup *s)
{
    struct ckpt_store *st = record_store(s->rec);
    struct stale_stops ss = { 0 };
    char keep[512], prefix[300], err[CKPT_ERR_MAX] = "";

    nodesync_stop_key(keep, sizeof keep, s->o->run, s->nid.job, s->cl.epoch);
    snprintf(prefix, sizeof prefix, "%s/stops/", s->o->run);
    ss.keep = keep;
    if (st->ops->list(st, prefix, stale_cb, &ss, err) == CKPT_OK && ss.keys.n &&
        st->ops->del(st, (const char *const *)ss.keys.v, ss.keys.n, err) != CKPT_OK)
        log_msg(LOG_DEBUG, "nodes", "cannot remove old stop objects: %s", err);
    ckpt__strv_free(&ss.keys);
}

int sup_nodes_start(struct sup *s)
{
    struct ckpt_config cfg;
    struct nodesync_cfg nc;
    ckpt_status st;

    s->part_step = -1;
    if (s->nid.nnodes <= 1)
        return 0;
    opts_to_config(s->o, &cfg);
    cfg.epoch = s->cl.epoch;
    cfg.no_control = 1;
    sup_nodes_config(s, &cfg);
    memset(&nc, 0, sizeof nc);
    st = ckpt_open(&cfg, &nc.ctx);
    if (st != CKPT_OK) {
        log_error("cannot open store %s (run %s) for node %u: %s %s", s->o->store, s->o->run,
                  s->nid.rank, ckpt_strerror(st), ckpt_errmsg(NULL));
        return exit_code_for_status(st);
    }
    if (s->nid.rank == 0)
        remove_old_stops(s);
    nc.st = record_store(s->rec);
    nc.run = s->o->run;
    nc.job = s->nid.job;
    nc.epoch = s->cl.epoch;
    nc.rank = s->nid.rank;
    nc.nnodes = s->nid.nnodes;
    nc.wake = notice_queue_wake;
    if (nodesync_start(&s->ns, &nc) != 0) {
        log_error("cannot start the nodes' thread");
        return EXIT_CONFIG;
    }
    s->nv.global_step = -1;
    s->stop_begun = sup_nodes_stop_begun;
    return 0;
}

/* Another node's stop, read from the store: this node's own. */
static void remote_stop(struct sup *s)
{
    char provider[128];
    struct stop_cause c;
    int64_t age;

    s->remote_stop_taken = 1;
    if (s->nv.stop_node == s->nid.rank)
        return; /* our own, written when it began here */
    snprintf(provider, sizeof provider, "node %u: %s", s->nv.stop_node, s->nv.stop_reason);
    memset(&c, 0, sizeof c);
    c.reason = "node-stop";
    c.provider = provider;
    c.deadline_unix = s->nv.stop_deadline_ms;
    c.except = -1;
    c.self = CH_NONE;
    c.remote = s->nv.stop_user ? 2 : 1;
    /* Entries written since the stop began on its node answer it here too
     * (the ranks may have agreed and saved before this node polled it). */
    age = sup_now_ms(s) - s->nv.stop_time_ms;
    if (s->nv.stop_time_ms > 0 && age >= 0 && age < 60000)
        c.since_mono = sup_mono_ms(s) - age;
    log_msg(LOG_INFO, "nodes", "stop from node %u (%s): stopping this node too",
            s->nv.stop_node, s->nv.stop_reason);
    stop_begin(s, &c);
}

/* An empty part answers a stop when the step it fills was first written
 * (by another node) after the stop began, on whichever node it began. */
static void empty_answers(struct sup *s)
{
    if (s->stop.phase != P_RUN && s->nv.empty_done && s->nv.empty_done == s->empty_asked &&
        s->empty_asked_first_ms >= s->stop_ref_ms)
        stop_node_part(s, s->nv.empty_done, 0, 1);
}

/* Steps another node wrote a part of and this node has nothing of: its
 * empty part, once its own directory shows nothing of that step. */
static void empty_parts(struct sup *s)
{
    int64_t now = sup_now_ms(s);

    for (int i = 0; i < s->nv.npending; i++) {
        const struct nodesync_pending *p = &s->nv.pending[i];
        if (p->mine || p->step <= s->empty_asked || p->have == 0)
            continue;
        if ((s->part_step >= 0 && (uint64_t)s->part_step == p->step) ||
            now - p->first_ms < EMPTY_AFTER_MS || s->seam->watch_busy(s->w) ||
            s->seam->watch_has_step(s->w, p->step))
            continue;
        s->empty_asked = p->step;
        s->empty_asked_first_ms = p->first_ms;
        s->seam->nodes_write_empty(s->ns, p->step);
    }
}

void sup_nodes_on_wake(struct sup *s)
{
    struct nodesync_view prev = s->nv;
    cJSON *f;

    if (!s->ns)
        return;
    s->seam->nodes_view(s->ns, &s->nv);
    if (s->nv.lost && !s->lease_lost) {
        stop_lease_lost(s, s->nv.lost_why);
        return;
    }
    if (s->nv.commit_error[0] && strcmp(s->nv.commit_error, prev.commit_error) != 0)
        log_msg(LOG_WARN, "nodes", "cannot commit the global step %s", s->nv.commit_error);
    if (s->nv.global_step > s->last_step) {
        s->last_step = s->nv.global_step;
        s->seam->watch_note_step(s->w, (uint64_t)s->last_step);
        if ((f = sup_fields())) {
            cJSON_AddNumberToObject(f, "step", (double)s->last_step);
            cJSON_AddNumberToObject(f, "nodes", s->nid.nnodes);
        }
        sup_event(s, LOG_INFO, "global-commit", f, s->nid.rank == 0);
        stop_global_commit(s);
    }
    if (s->nv.empty_done > prev.empty_done) {
        if ((int64_t)s->nv.empty_done > s->part_step)
            s->part_step = (int64_t)s->nv.empty_done;
        empty_answers(s);
    }
    if (s->nv.stop_seen && !s->remote_stop_taken)
        remote_stop(s);
    empty_parts(s);
}

void sup_nodes_stop_begun(struct sup *s, const struct stop_cause *c, int64_t deadline_unix)
{
    char reason[96];

    if (!s->ns)
        return;
    s->stop_ref_ms = s->stop.t_wall;
    s->stop_global0 = s->last_step;
    if (c->remote && s->nv.stop_time_ms > 0 && s->nv.stop_time_ms < s->stop_ref_ms)
        s->stop_ref_ms = s->nv.stop_time_ms;
    s->seam->nodes_fast(s->ns, 1);
    /* The job may have saved for this stop before this node heard of it
     * (its ranks agreed on another node's request): the part it wrote
     * since, or the empty part it filled in, answers it here. */
    if (s->part_step >= 0 && s->last_changed >= s->stop.t_accept)
        stop_node_part(s, (uint64_t)s->part_step, s->last_changed, 0);
    empty_answers(s);
    if (c->remote)
        return;
    snprintf(reason, sizeof reason, "%s%s%s", c->reason, c->provider && *c->provider ? " " : "",
             c->provider ? c->provider : "");
    s->seam->nodes_post_stop(s->ns, reason, deadline_unix, s->stop.user);
}

int sup_nodes_settling(struct sup *s)
{
    int64_t now = sup_mono_ms(s), until;

    if (!s->ns || s->lease_lost)
        return 0;
    if (!s->child_end_mono) {
        s->child_end_mono = now;
        s->seq_at_end = s->nv.seq;
    }
    until = s->stop.phase != P_RUN ? s->stop.deadline : s->child_end_mono + (int64_t)s->o->grace_ms;
    if (now >= until)
        return 0;
    if (s->nv.seq < s->seq_at_end + 2)
        return 1; /* no whole poll yet since the child ended */
    if (s->nv.npending > 0)
        return 1;
    /* A stop: the other nodes' trainers may still be saving the step this
     * node's part (an empty one, its trainer gone) must fill in. */
    return s->stop.phase != P_RUN && now < s->stop.t0 + STOP_PARTS_WAIT_MS &&
           !s->stop.final_done && s->last_step <= s->stop_global0;
}

void sup_nodes_on_part(struct sup *s, uint64_t step, int64_t changed_mono, int ok)
{
    if (!ok) {
        if (s->stop.phase != P_RUN)
            s->stop.failed_since_stop = 1;
        return;
    }
    if ((int64_t)step > s->part_step)
        s->part_step = (int64_t)step;
    stop_node_part(s, step, changed_mono, 0);
}

void sup_nodes_close(struct sup *s)
{
    nodesync_close(s->ns);
    s->ns = NULL;
}
