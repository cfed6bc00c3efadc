/* status.c -- status names, retry classes, version. */
#include "ckpt.h"

const char *ckpt_strerror(ckpt_status st)
{
    switch (st) {
    case CKPT_OK: return "success";
    case CKPT_E_INVAL: return "invalid argument";
    case CKPT_E_NOMEM: return "out of memory";
    case CKPT_E_NOENT: return "not found";
    case CKPT_E_IO: return "I/O error";
    case CKPT_E_CORRUPT: return "data failed its integrity check";
    case CKPT_E_SIZE: return "region size differs from the checkpoint";
    case CKPT_E_EXISTS: return "already exists";
    case CKPT_E_PRECONDITION: return "conditional write refused";
    case CKPT_E_AUTH: return "store refused the credentials (or none found)";
    case CKPT_E_UNREACHABLE: return "store unreachable";
    case CKPT_E_TRANSIENT: return "transient store failure";
    case CKPT_E_THROTTLED: return "store throttled the request";
    case CKPT_E_UNSUPPORTED: return "unsupported in this build or store";
    case CKPT_E_BUSY: return "a save is still in flight";
    case CKPT_E_CONFIG: return "bad configuration";
    case CKPT_E_FENCED: return "another runner took over this run";
    case CKPT_E_NOSPACE: return "no space left (see the detail: store or local disk)";
    case CKPT_E_UNSAFE: return "stored name escapes the target directory";
    case CKPT_E_CUDA: return "CUDA error";
    case CKPT_E_MISMATCH: return "protected items differ from the checkpoint";
    case CKPT_E_INTERNAL: return "internal error";
    case CKPT_E_PERM: return "permission denied or read-only file system";
    case CKPT_E_CHANGED: return "a protected file changed while it was saved";
    }
    return "unknown status";
}

ckpt_status_class ckpt_status_classify(ckpt_status st)
{
    switch (st) {
    case CKPT_OK: return CKPT_CLASS_OK;
    case CKPT_E_TRANSIENT: case CKPT_E_UNREACHABLE: return CKPT_CLASS_RETRYABLE;
    case CKPT_E_THROTTLED: return CKPT_CLASS_THROTTLED;
    case CKPT_E_CORRUPT: return CKPT_CLASS_CORRUPT;
    case CKPT_E_INVAL: case CKPT_E_CONFIG: case CKPT_E_EXISTS: case CKPT_E_SIZE:
    case CKPT_E_MISMATCH: return CKPT_CLASS_USAGE;
    default: return CKPT_CLASS_PERMANENT;
    }
}

unsigned ckpt_version_number(void) { return CKPT_VERSION_NUMBER; }
const char *ckpt_version_string(void) { return CKPT_VERSION_STRING; }
