/*
 * imds.h -- one AWS EC2 instance-metadata (IMDSv2) client per process.
 *
 * Shared by the S3 credential chain (instance-role credentials) and the AWS
 * spot-notice poller: whichever asks first creates it; the token is fetched
 * once (PUT /latest/api/token, TTL 21600 s) and renewed before it expires,
 * on 401, and falls back to IMDSv1 only if the token PUT answers 403/404/405.
 * Metadata requests never go through a proxy. Thread-safe.
 */
#ifndef CKPT_IMDS_H
#define CKPT_IMDS_H
#include <stddef.h>
#include "ckpt.h"

struct ckpt_imds;

/* The process-wide client for `base_url` ("http://169.254.169.254" when NULL,
 * or AWS_EC2_METADATA_SERVICE_ENDPOINT when set). Never freed before exit.
 * NULL when AWS_EC2_METADATA_DISABLED=true. */
struct ckpt_imds *ckpt_imds_shared(const char *base_url);

/* GET `path` (e.g. "/latest/meta-data/spot/instance-action") with the token.
 * On a reply, *http_status is set and the body (NUL-terminated, at most
 * max_len bytes, else CKPT_E_CORRUPT) is returned malloc'd in *body.
 * `err` (CKPT_ERR_MAX bytes, or NULL) gets the detail of a failure.
 * A 401 drops the token and retries once with a fresh one.
 * @return CKPT_OK for any HTTP reply to the GET (check *http_status),
 *         CKPT_E_UNREACHABLE on connect failure / timeout,
 *         CKPT_E_TRANSIENT / CKPT_E_AUTH when the token PUT answers 5xx / a
 *         4xx other than 403-405 (the GET is then not sent),
 *         CKPT_E_CORRUPT body over max_len, CKPT_E_INVAL, CKPT_E_NOMEM. */
ckpt_status ckpt_imds_get(struct ckpt_imds *m, const char *path, long timeout_ms,
                          size_t max_len, char **body, size_t *len,
                          long *http_status, char *err);
#endif
