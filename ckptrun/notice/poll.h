/* notice/poll.h -- the shared polling loop, session tokens (notice/poll.c). */
#ifndef CKPTRUN_NOTICE_POLL_H
#define CKPTRUN_NOTICE_POLL_H

#include <stddef.h>
#include <stdint.h>

#include "notice/int.h"

/* The shared loop: each round, prov->before_round, then every path in turn
 * (prov->fetch or HTTP with the provider's headers and token), until the
 * poller stops. */
void notice_poll_paths(struct nwatch *w);
/* The headers of a request of `w`'s provider: its own, then its session
 * token when it has one (asked for, renewed and dropped as needed).
 * `hv` holds at least NOTICE_HDRS_MAX entries, `tokh` the token line. */
#define NOTICE_HDRS_MAX 8
void notice_poll_headers(struct nwatch *w, const char **hv, char *tokh, size_t tokcap);

#endif
