/*
 * fault_store.h -- a store wrapper for tests: it forwards every operation to
 * the store it wraps, counts the calls, and at the Nth call of an operation
 * (optionally only for keys containing a given text) fails it, delays it,
 * pauses it until the test releases it, or runs a hook of the test (before
 * or after the real call). Rules are checked in the order they were added;
 * the first rule that matches a call acts on it.
 *
 *   struct fault_store *fs = fault_wrap(&ctx->store);   // ctx's store, wrapped
 *   fault_add(fs, &(struct fault_rule){ .op = FAULT_PUT, .key_has = "/chunks/",
 *                                       .nth = 2, .act = FAULT_FAIL,
 *                                       .status = CKPT_E_TRANSIENT });
 *
 * The wrapper is closed (with the store it wraps) by ckpt_store_close(), so
 * a context closes it as its own store. Thread-safe: the library calls the
 * store from its workers.
 */
#ifndef FAULT_STORE_H
#define FAULT_STORE_H

#include "ckpt_store.h"

enum fault_op {
    FAULT_PUT,
    FAULT_GET,
    FAULT_GET_RANGE,
    FAULT_HEAD,
    FAULT_LIST,
    FAULT_DEL,
    FAULT_BARRIER,
    FAULT_NOPS
};

enum fault_action {
    FAULT_FAIL,  /* return `status` (with "injected fault" in err), no real call */
    FAULT_DELAY, /* sleep delay_ms, then the real call */
    FAULT_PAUSE, /* block until fault_release(); fault_wait_paused() sees it */
    FAULT_HOOK   /* call hook(user, key) before the real call (after it with .after) */
};

struct fault_rule {
    enum fault_op op;
    const char *key_has;  /* NULL: any key; list: the prefix; del: any of the keys */
    unsigned nth;         /* the first matching call it acts on (1-based; 0 = 1) */
    unsigned count;       /* how many matching calls from the nth on (0 = 1, ~0u = all) */
    enum fault_action act;
    ckpt_status status;   /* FAULT_FAIL */
    unsigned delay_ms;    /* FAULT_DELAY */
    void (*hook)(void *user, const char *key); /* FAULT_HOOK */
    void *user;
    int after;            /* FAULT_HOOK/FAULT_PAUSE: after the real call, not before */
};

struct fault_store;

/* Replace *slot (a store handle) by a wrapper around it. @return the wrapper. */
struct fault_store *fault_wrap(struct ckpt_store **slot);
/* Make the wrapper a store that cannot tell the bytes it sent (its ops'
 * `sent` NULL), as a backend without the count is. Before any use. */
void fault_hide_sent(struct fault_store *fs);
/* Add a rule (copied; key_has must stay valid). @return its index. */
int fault_add(struct fault_store *fs, const struct fault_rule *r);
/* Drop every rule (paused calls are released). */
void fault_clear(struct fault_store *fs);
/* Calls of `op` so far (every call, matched or not). */
unsigned fault_calls(struct fault_store *fs, enum fault_op op);
/* Times rule `rule` has acted. */
unsigned fault_hits(struct fault_store *fs, int rule);
/* Wait (up to timeout_ms) until a call is paused by rule `rule`. @return 0,
 * or -1 on timeout. */
int fault_wait_paused(struct fault_store *fs, int rule, unsigned timeout_ms);
/* Let the calls paused by rule `rule` go on (and later ones pass). */
void fault_release(struct fault_store *fs, int rule);

#endif
