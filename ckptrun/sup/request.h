/*
 * request.h -- asking the child for a checkpoint through the best channel
 * it has: the control socket (libckpt, or processes that write their own
 * files: the Python helper), else the request signal (--signal) to the
 * processes of the job that handle it. Once the child has connected to the
 * socket, requests go over the socket only, never as a signal.
 */
#ifndef CKPTRUN_REQUEST_H
#define CKPTRUN_REQUEST_H

#include <stdint.h>
#include "sup/sup.h"

struct sup;

/* Request a checkpoint for `reason` ("stop", "periodic", "manual",
 * "rebalance") by deadline_unix (Unix ms, 0 none), with `codec` (NULL: the
 * run's). `except` is a control client that already asked itself (it took
 * the stop's signal): -1 none, -2 every client that turns signals into
 * stops (the job's process group got the signal); `self` the channel such
 * a client is (CH_NONE when none). Logged as event `request`.
 * @return the channel that carries it (CH_NONE: none could). */
enum channel request_checkpoint(struct sup *s, const char *reason, int64_t deadline_unix,
                                const char *codec, int except, enum channel self);

#endif
