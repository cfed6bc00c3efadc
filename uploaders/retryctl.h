/* retryctl.h -- the process-wide state of the stores' retries: whether
 * any store answered, the deadline and the observer that
 * ckpt_retry_set_deadline/ckpt_retry_set_observer (ckpt_store.h, public)
 * set. Read by the retry loop (retry.c). Thread-safe (atomics). */
#ifndef CKPT_RETRYCTL_H
#define CKPT_RETRYCTL_H

#include <stdint.h>

#include "ckpt_store.h"

/* Process-wide state, thread-safe (atomics).
 * ckpt__retry_answered(): 1 once any store replied in this process (set by
 * ckpt__retry_classify for every HTTP reply). ckpt__retry_reset_answered()
 * is for tests. */
int ckpt__retry_answered(void);
void ckpt__retry_reset_answered(void);
/* For retry.c: mark that a store replied; the deadline set with
 * ckpt_retry_set_deadline (0: none); the observer (NULL: none). */
void ckpt__retry_mark_answered(void);
int64_t ckpt__retry_deadline(void);
ckpt_retry_observer ckpt__retry_observer(void);

#endif
