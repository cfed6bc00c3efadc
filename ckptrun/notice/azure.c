/*
 * notice/azure.c -- Azure Scheduled Events (notice/provider.h): Preempt and
 * Terminate stop the VM at NotBefore (Preempt: at least 30 s), Reboot and
 * Redeploy are maintenance, Freeze is ignored. Only events naming this VM
 * count (an availability set shows its peers' events too), and an event is
 * acknowledged (StartRequests) only after the final checkpoint committed.
 */
#include "notice/int.h"
#include "notice/report.h"
#include "notice/net.h"
#include "notice/parse.h"
#include "notice/azure.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define AZURE_WINDOW_MS 30000 /* Preempt's documented minimum */
#define AZURE_BLANK_MS 30000  /* ... assumed when NotBefore is blank (started) */
#define AZURE_POLL_MS 1000
#define AZURE_TIMEOUT_MS 120000 /* the first call can take up to 2 minutes */
#define NAME_TIMEOUT_MS 3000
#define ACK_TIMEOUT_MS 5000
#define BODY_MAX_AZURE 65536 /* a document listing many events */
#define AZURE_EVENTS "/metadata/scheduledevents?api-version=2020-07-01"

/* ---- replies ---------------------------------------------------------------- */

static int names_vm(const cJSON *e, const char *vm)
{
    const cJSON *r, *res = cJSON_GetObjectItemCaseSensitive(e, "Resources");
    if (!vm)
        return 1;
    if (!cJSON_IsArray(res))
        return 1; /* no list: the event is for this VM */
    cJSON_ArrayForEach(r,
                       res) if (cJSON_IsString(r) && strcasecmp(r->valuestring, vm) == 0) return 1;
    return 0;
}

int notice_parse_azure_for(const char *body, size_t len, int64_t now_ms, const char *vm,
                           struct notice_event *ev)
{
    int ret = -1, malformed = 0, n = 0;
    cJSON *j = NULL;
    const cJSON *events, *e;
    struct notice_event best;
    char why[192] = "";

    notice_ev_reset(ev);
    best = *ev;
    if (!body || !len) {
        ret = notice_ev_bad(ev, "scheduledevents: empty reply");
        goto out;
    }
    j = cJSON_ParseWithLength(body, len);
    events = cJSON_IsObject(j) ? cJSON_GetObjectItemCaseSensitive(j, "Events") : NULL;
    if (!cJSON_IsArray(events)) {
        ret = notice_ev_bad(ev, "scheduledevents: no Events array");
        goto out;
    }
    cJSON_ArrayForEach(e, events)
    {
        const char *type = notice_json_str(e, "EventType", 32);
        const char *id = notice_json_str(e, "EventId", sizeof ev->id - 1);
        const char *nb = notice_json_str(e, "NotBefore", 64);
        const char *status = notice_json_str(e, "EventStatus", 32);
        enum notice_kind kind;
        int64_t t;

        if (!cJSON_IsObject(e) || !type) {
            malformed = 1;
            snprintf(why, sizeof why, "event without EventType");
            continue;
        }
        if (strcmp(type, "Preempt") == 0 || strcmp(type, "Terminate") == 0)
            kind = NOTICE_TERMINATE;
        else if (strcmp(type, "Reboot") == 0 || strcmp(type, "Redeploy") == 0)
            kind = NOTICE_MAINTENANCE;
        else
            continue; /* Freeze: a pause of seconds, the process survives */
        if (!names_vm(e, vm))
            continue;
        if (!id || !id[0] || !nb) {
            malformed = 1;
            snprintf(why, sizeof why, "%s event without EventId or NotBefore", type);
            continue;
        }
        if (status && strcmp(status, "Scheduled") != 0 && strcmp(status, "Started") != 0)
            continue; /* e.g. "Canceled" (u): nothing to do */
        if (!nb[0]) {
            /* Blank once started: act now, assuming the documented minimum. */
            t = now_ms + AZURE_BLANK_MS;
        } else if (notice_parse_rfc1123(nb, strlen(nb), &t)) {
            malformed = 1;
            snprintf(why, sizeof why, "%s event %s: NotBefore not a time", type, id);
            continue;
        } else if (notice_stale(t, now_ms)) {
            malformed = 1;
            snprintf(why, sizeof why, "%s event %s: stale NotBefore %s ignored", type, id, nb);
            continue;
        }
        /* Prefer a terminating event, then the earliest deadline. */
        if (n == 0 || (kind == NOTICE_TERMINATE && best.kind != NOTICE_TERMINATE) ||
            (kind == best.kind && t < best.deadline_ms)) {
            best.kind = kind;
            best.deadline_ms = t;
            snprintf(best.id, sizeof best.id, "%s", id);
            snprintf(best.detail, sizeof best.detail, "scheduledevents %s %s NotBefore \"%s\"",
                     type, id, nb);
        }
        n++;
    }
    if (n > 0) {
        *ev = best;
        ret = 1;
    } else if (malformed) {
        snprintf(ev->detail, sizeof ev->detail, "scheduledevents: %s", why);
        ret = -1;
    } else {
        ret = 0;
    }
out:
    cJSON_Delete(j);
    return ret;
}

int notice_parse_azure(const char *body, size_t len, int64_t now_ms, struct notice_event *ev)
{
    return notice_parse_azure_for(body, len, now_ms, NULL, ev);
}

/* ---- polling ---------------------------------------------------------------- */

static const char *const azure_hdrs[] = { "Metadata: true", NULL };

struct azure_state { /* the one watch's own */
    char vm[128];    /* this VM's name, "" until known */
    int64_t vm_retry_ms;
};

static int azure_dmi(const struct notice_dmi *d)
{
    /* a Hyper-V guest; Azure's fixed asset tag when present */
    return strcasestr(d->vendor, "Microsoft Corporation") &&
           (strstr(d->asset_tag, "7783-7084-3265-9085-8269-3286-77") ||
            strcasestr(d->product, "Virtual Machine"));
}

/* The VM's name, read once (retried every minute until known). */
static void azure_vm_name(struct nwatch *w)
{
    struct notice_poller *p = w->p;
    struct azure_state *st = p->state;
    char url[BASE_MAX + 128];
    struct notice_reply r;
    size_t i;

    if (st->vm[0] || ckpt__mono_ms() < st->vm_retry_ms)
        return;
    st->vm_retry_ms = ckpt__mono_ms() + 60000;
    snprintf(url, sizeof url,
             "%s/metadata/instance/compute/name?api-version=2021-02-01&format=text", p->base);
    if (notice_http(p->http, "GET", url, azure_hdrs, NULL, NAME_TIMEOUT_MS, 256, &r))
        return;
    if (r.status == 200 && r.len > 0 && r.len < sizeof st->vm) {
        for (i = 0; i < r.len; i++)
            if ((unsigned char)r.body[i] <= 0x20 || (unsigned char)r.body[i] >= 0x7f)
                break;
        if (i == r.len) {
            memcpy(st->vm, r.body, r.len + 1);
            notice_log(p, CKPT_LOG_DEBUG, "azure: VM name %s", st->vm);
        }
    }
    free(r.body);
}

static int azure_parse(struct nwatch *w, unsigned i, const char *body, size_t len, int64_t now,
                       struct notice_event *ev)
{
    const struct azure_state *st = w->p->state;
    (void)i;
    return notice_parse_azure_for(body, len, now, st->vm[0] ? st->vm : NULL, ev);
}

static int azure_ack(struct notice_poller *p, const char *event_id)
{
    int ret = -1;
    cJSON *root = NULL, *arr, *obj;
    char *body = NULL, url[BASE_MAX + 128];
    static const char *const hdrs[] = { "Metadata: true", "Content-Type: application/json", NULL };
    struct notice_reply r = { 0 };

    /* Built with cJSON so any character in the id is escaped properly. */
    root = cJSON_CreateObject();
    arr = root ? cJSON_AddArrayToObject(root, "StartRequests") : NULL;
    obj = arr ? cJSON_CreateObject() : NULL;
    if (!obj)
        goto out;
    cJSON_AddItemToArray(arr, obj);
    if (!cJSON_AddStringToObject(obj, "EventId", event_id))
        goto out;
    body = cJSON_PrintUnformatted(root);
    if (!body)
        goto out;
    snprintf(url, sizeof url, "%s%s", p->base, AZURE_EVENTS);
    if (notice_http(p->http, "POST", url, hdrs, body, ACK_TIMEOUT_MS, BODY_MAX_SMALL, &r)) {
        notice_log(p, CKPT_LOG_WARN, "azure: acknowledging %s failed: %s", event_id, r.err);
        goto out;
    }
    if (r.status < 200 || r.status > 299) {
        notice_log(p, CKPT_LOG_WARN, "azure: acknowledging %s: HTTP %ld", event_id, r.status);
        goto out;
    }
    notice_log(p, CKPT_LOG_INFO, "azure: acknowledged event %s", event_id);
    ret = 0;
out:
    free(r.body);
    cJSON_free(body);
    cJSON_Delete(root);
    return ret;
}

static const struct notice_path azure_paths[] = {
    { AZURE_EVENTS, "scheduledevents", notice_parse_azure },
};

const struct notice_provider notice_azure = {
    .name = "azure",
    .title = "Azure spot VMs (Scheduled Events)",
    .dmi_match = azure_dmi,
    .base = "http://169.254.169.254",
    .headers = azure_hdrs,
    .paths = azure_paths,
    .npaths = 1,
    .poll_ms = AZURE_POLL_MS,
    .timeout_ms = AZURE_TIMEOUT_MS,
    .body_max = BODY_MAX_AZURE,
    .hints = {
        .window_ms = AZURE_WINDOW_MS,
        .detect_ms = AZURE_POLL_MS,
        .window_src = "Azure Preempt event",
        .window_note = "at least 30 s (NotBefore of the event)",
        .slow_start = "Azure's first Scheduled Events call can take up to 2 minutes while the "
                      "service starts; ckptrun keeps polling: run doctor again in a minute",
        .temp_mounts = (const char *const[]){"/mnt", "/mnt/resource", NULL},
        .temp_what = "Azure's temporary resource disk: lost when the VM is deallocated",
    },
    .state_size = sizeof(struct azure_state),
    .before_round = azure_vm_name,
    .parse = azure_parse,
    .ack = azure_ack,
};
