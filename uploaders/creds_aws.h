/*
 * creds_aws.h -- where the S3/GCS stores find their credentials and
 * settings (creds_aws.c), private to uploaders/. First match wins:
 *  GOOGLE_ACCESS_KEY_ID/GOOGLE_SECRET_ACCESS_KEY (gs:// only), then
 *  AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/AWS_SESSION_TOKEN, then the
 *  profile AWS_PROFILE (default "default") in AWS_SHARED_CREDENTIALS_FILE
 *  (~/.aws/credentials) and AWS_CONFIG_FILE (~/.aws/config, "[profile
 *  NAME]"), then (s3:// only) the EC2 instance role through IMDSv2
 *  (ckpt_http.h, IMDS). The profile also gives the region, the endpoint and the S3
 *  addressing style, as the AWS CLI reads them.
 *
 * Secrets are wiped when freed. Nothing here logs. The functions read the
 * environment and files and are otherwise thread-safe (no shared state).
 */
#ifndef CKPT_CREDS_AWS_H
#define CKPT_CREDS_AWS_H

#include <stddef.h>
#include <stdint.h>
#include "ckpt.h"

/* A key pair, with a session token for temporary credentials. */
struct ckpt_aws_keys {
    char *ak, *sk, *token;    /* malloc'd; token may be NULL */
    int64_t expiry;           /* Unix s when they expire; 0 = static */
};
void ckpt__aws_keys_free(struct ckpt_aws_keys *k); /* wipes; NULL-safe fields */

/* One profile as the AWS INI files give it. */
struct ckpt_aws_profile {
    char *ak, *sk, *token, *region, *endpoint, *s3_endpoint;
    int path_style;           /* s3 = / addressing_style = path */
    char name[128];           /* profile name, for diagnostics */
    char ak_file[256];        /* the file the key pair came from */
};
/* Read the section `section` (the name inside the brackets) of one INI file
 * into p; a value already set is kept (first wins); a missing file is no
 * error. Nested "s3 =" blocks give addressing_style and endpoint_url. */
void ckpt__aws_profile_read(const char *file, const char *section, struct ckpt_aws_profile *p);
/* The profile named by AWS_PROFILE from the credentials and config files. */
void ckpt__aws_profile_load(struct ckpt_aws_profile *p);
void ckpt__aws_profile_free(struct ckpt_aws_profile *p);

/* The static part of the chain (environment, then the profile, whose keys
 * are then moved into k). `source` (n bytes) says where they came from.
 * @return 1 when a key pair was found, else 0 (k untouched). */
int ckpt__aws_keys_static(int gcs, struct ckpt_aws_profile *p, struct ckpt_aws_keys *k,
                          char *source, size_t n);
/* The instance role's temporary credentials from IMDSv2, replacing k's on
 * success; `source` (n bytes) names the role.
 * @return CKPT_OK, CKPT_E_AUTH (no role, no metadata service; detail in
 *         err), CKPT_E_NOMEM. */
ckpt_status ckpt__aws_keys_role(struct ckpt_aws_keys *k, char *source, size_t n, char *err);

/* The region: AWS_REGION, AWS_DEFAULT_REGION, the profile, "us-east-1". */
const char *ckpt__aws_region(const struct ckpt_aws_profile *p);
/* The S3 endpoint URL: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's
 * s3 endpoint_url, its endpoint_url; NULL = AWS's own. */
const char *ckpt__aws_endpoint(const struct ckpt_aws_profile *p);

/* An ISO 8601 UTC time as AWS writes it ("2024-05-01T12:00:00Z", fractions
 * ignored) in Unix s; 0 when unparsable. */
int64_t ckpt__aws_time(const char *s);

#endif
