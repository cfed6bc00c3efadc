/* events.c -- a save's events, to the log and to ckptrun (events.h). The
 * wire fields are docs/CONTROL.md's; integers are written whole (a JSON
 * double would round steps and byte counts past 2^53). */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "control/control.h"
#include "core/ctx.h"
#include "control/events.h"

static int add_u64(cJSON *o, const char *k, uint64_t v)
{
    char buf[24];
    snprintf(buf, sizeof buf, "%" PRIu64, v);
    return cJSON_AddRawToObject(o, k, buf) != NULL;
}

static void event_to_log(struct ckpt_ctx *ctx, const struct ckpt_event *ev)
{
    switch (ev->type) {
    case CKPT_EVENT_SAVING:
        ckpt__log(&ctx->log, CKPT_LOG_DEBUG, "save", "step %" PRIu64 ": snapshot taken",
                  ev->step);
        break;
    case CKPT_EVENT_COMMITTED:
        ckpt__log(&ctx->log, CKPT_LOG_INFO, "commit",
                  "step %" PRIu64 " committed: %" PRIu64 " bytes, %" PRIu64 " new stored "
                  "(%.2fx), %.2f s, %.1f MB/s",
                  ev->step, ev->raw_bytes, ev->new_bytes,
                  ev->new_bytes ? (double)ev->raw_bytes / (double)ev->new_bytes : 0.0,
                  ev->seconds,
                  ev->seconds > 0 ? (double)ev->raw_bytes / 1e6 / ev->seconds : 0.0);
        break;
    case CKPT_EVENT_FAILED:
        ckpt__log(&ctx->log, CKPT_LOG_ERROR, "save", "step %" PRIu64 " not committed: %s (%s)",
                  ev->step, ev->detail ? ev->detail : "", ckpt_strerror(ev->status));
        break;
    }
}

/* The event as ckptrun reads it; NULL without memory. */
static char *wire_line(const struct ckpt_event *ev)
{
    static const char *const types[] = { "saving", "committed", "failed" };
    cJSON *o = cJSON_CreateObject();
    char *line = NULL, secs[32];
    int ok = o && cJSON_AddStringToObject(o, "type", types[ev->type]) &&
             add_u64(o, "step", ev->step);
    if (ok && ev->type == CKPT_EVENT_COMMITTED) {
        snprintf(secs, sizeof secs, "%.3f", ev->seconds);
        ok = add_u64(o, "seq", ev->seq) && add_u64(o, "bytes", ev->raw_bytes) &&
             add_u64(o, "stored", ev->new_bytes) && cJSON_AddRawToObject(o, "seconds", secs) &&
             cJSON_AddStringToObject(o, "manifest", ev->manifest ? ev->manifest : "");
    } else if (ok && ev->type == CKPT_EVENT_FAILED) {
        ok = cJSON_AddStringToObject(o, "error", ckpt_strerror(ev->status)) != NULL;
    }
    if (ok)
        line = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return line;
}

void ckpt__event(struct ckpt_ctx *ctx, const struct ckpt_event *ev)
{
    char *line;
    event_to_log(ctx, ev);
    if (!ctx->control)
        return;
    line = wire_line(ev);
    if (line)
        ckpt__control_send(ctx->control, line);
    else
        ckpt__log(&ctx->log, CKPT_LOG_WARN, "control", "out of memory: event of step %" PRIu64
                  " not sent to ckptrun", ev->step);
    free(line);
}
