/*
 * retryctl.c -- the process-wide controls of the stores' retries
 * (ckpt_store.h: ckpt_retry_set_deadline, ckpt_retry_set_observer; retryctl.h).
 * Built whatever backends are compiled in, so a caller sets them without
 * knowing whether any store here retries (the file store never does).
 */
#include <stdatomic.h>

#include "retryctl.h"

static atomic_int g_answered;           /* some store replied */
static atomic_llong g_deadline_ms;      /* a stop's deadline, 0 none */
static _Atomic(ckpt_retry_observer) g_observer;

int ckpt__retry_answered(void)
{
    return atomic_load(&g_answered);
}

void ckpt__retry_reset_answered(void)
{
    atomic_store(&g_answered, 0);
}

void ckpt__retry_mark_answered(void)
{
    atomic_store(&g_answered, 1);
}

void ckpt_retry_set_deadline(int64_t mono_ms)
{
    long long cur = atomic_load(&g_deadline_ms);
    if (mono_ms == 0) {
        atomic_store(&g_deadline_ms, 0);
        return;
    }
    while ((cur == 0 || mono_ms < cur) &&
           !atomic_compare_exchange_weak(&g_deadline_ms, &cur, (long long)mono_ms))
        ;
}

int64_t ckpt__retry_deadline(void)
{
    return atomic_load(&g_deadline_ms);
}

void ckpt_retry_set_observer(ckpt_retry_observer fn)
{
    atomic_store(&g_observer, fn);
}

ckpt_retry_observer ckpt__retry_observer(void)
{
    return atomic_load(&g_observer);
}
