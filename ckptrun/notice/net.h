/* notice/net.h -- the transport of metadata requests: HTTP on the shared client and the IMDSv2
 * client (net.c with libcurl; none.c, which has nothing to poll with, implements the same functions
 * without it) (notice/net.c or notice/none.c). */
#ifndef CKPTRUN_NOTICE_NET_H
#define CKPTRUN_NOTICE_NET_H

#include <stddef.h>
#include <stdint.h>

#include "notice/types.h"

struct ckpt_http;
struct ckpt_imds;
struct notice_reply;

/* A transport for metadata requests: never through a proxy, quick to
 * connect. @return NULL when out of memory (or no libcurl). */
struct ckpt_http *notice_http_new(void);
/* Aborts the requests in flight (a long poll ends now). NULL-safe. */
void notice_http_cancel(struct ckpt_http *h);
void notice_http_free(struct ckpt_http *h);
/* One request: hdrs is NULL-terminated (may be NULL), body may be NULL.
 * A body larger than `max` is no body: an error. @return 0 with r->status
 * and r->body (free it), or -1 with r->err. */
int notice_http(struct ckpt_http *h, const char *method, const char *url, const char *const *hdrs,
                const char *body, long timeout_ms, size_t max, struct notice_reply *r);
/* The process's shared IMDSv2 client (ckpt_http.h) for `base` (NULL: its
 * own default and AWS_EC2_METADATA_SERVICE_ENDPOINT). @return NULL when
 * instance metadata is disabled (AWS_EC2_METADATA_DISABLED) or there is no
 * transport. */
struct ckpt_imds *notice_imds(const char *base);
/* One GET through it, as notice_http. */
int notice_imds_get(struct ckpt_imds *m, const char *path, long timeout_ms, size_t max,
                    struct notice_reply *r);

/* 1 when this build polls cloud metadata (it has libcurl), else 0. */
int notice_available(void);

#endif
