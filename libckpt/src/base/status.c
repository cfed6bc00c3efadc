/* status.c -- status messages, names and retry classes, all made from
 * CKPT_STATUS_MAP (ckpt.h); the library's version. */
#include "ckpt.h"

const char *ckpt_strerror(ckpt_status st)
{
    switch (st) {
#define MESSAGE(name, value, cls, msg) case CKPT_##name: return msg;
        CKPT_STATUS_MAP(MESSAGE)
#undef MESSAGE
    }
    return "unknown status";
}

const char *ckpt_status_name(ckpt_status st)
{
    switch (st) {
#define NAME(name, value, cls, msg) case CKPT_##name: return "CKPT_" #name;
        CKPT_STATUS_MAP(NAME)
#undef NAME
    }
    return "unknown";
}

ckpt_status_class ckpt_status_classify(ckpt_status st)
{
    switch (st) {
#define CLASS(name, value, cls, msg) case CKPT_##name: return CKPT_CLASS_##cls;
        CKPT_STATUS_MAP(CLASS)
#undef CLASS
    }
    return CKPT_CLASS_PERMANENT;
}

unsigned ckpt_version_number(void) { return CKPT_VERSION_NUMBER; }
const char *ckpt_version_string(void) { return CKPT_VERSION_STRING; }
