/*
 * s3.h -- the S3/GCS backend's handle, shared by its dialect (s3.c) and its
 * opening (s3_open.c); private to uploaders/.
 */
#ifndef CKPT_S3_H
#define CKPT_S3_H

#include "creds_aws.h"
#include "objstore.h"

struct s3 {
    struct ckpt_obj o;
    int gcs;                 /* gs://: GCS through its XML API */
    int default_ep;          /* AWS's own endpoint: the host follows the region */
    int path_style;          /* bucket in the path, not in the host name */
    int crc32c;              /* object PUTs carry x-amz-checksum-crc32c, not MD5 */
    char *storage_class, *sse, *kms_key;
    /* guarded by o.mu: learnt or refreshed after open */
    char *region;
    struct ckpt_aws_keys keys;
};

#define S3(o) ((struct s3 *)(o))

extern const struct ckpt_obj_dialect ckpt_s3_dialect, ckpt_gs_dialect;

#endif
