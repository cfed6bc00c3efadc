/* notice_net.c -- HTTP, provider detection and metadata addresses for the
 * poller and the probe (notice_int.h). */
#include "notice_int.h"
#include "ckpt_http.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define MAX_HDRS 8

struct ckpt_http *notice_http_new(void)
{
    /* Metadata never goes through a proxy (DESIGN.md §3); a handful of
     * requests at once at most (GCP's two long polls, an acknowledgement). */
    struct ckpt_http_opts o = { .max_handles = 4, .connect_timeout_ms = CONNECT_MS,
                                .no_proxy = 1 };
    return ckpt_http_new(&o);
}

/* The ETag of a reply, kept only if it is a plain token: it goes back into
 * a URL. */
static void plain_etag(const struct ckpt_http_resp *resp, char *out, size_t n)
{
    char v[160];
    size_t i;

    out[0] = '\0';
    if (!ckpt_http_header(resp, "ETag", v, sizeof v) || strlen(v) >= n)
        return;
    for (i = 0; v[i]; i++)
        if (!((v[i] >= '0' && v[i] <= '9') || (v[i] >= 'a' && v[i] <= 'z') ||
              (v[i] >= 'A' && v[i] <= 'Z') || v[i] == '-' || v[i] == '_'))
            return;
    memcpy(out, v, i + 1);
}

int notice_http(struct ckpt_http *h, const char *method, const char *url,
                const char *const *hdrs, const char *body, long timeout_ms, size_t max,
                struct notice_reply *r)
{
    const char *hv[MAX_HDRS];
    struct ckpt_http_req req;
    struct ckpt_http_resp resp;
    void *b = NULL;
    ckpt_status st;
    size_t nh = 0;
    int ret = -1;

    memset(r, 0, sizeof *r);
    memset(&req, 0, sizeof req);
    for (size_t i = 0; hdrs && hdrs[i] && nh < MAX_HDRS; i++)
        hv[nh++] = hdrs[i];
    req.method = method;
    req.url = url;
    req.headers = hv;
    req.nheaders = nh;
    req.body = body;
    req.body_len = body ? strlen(body) : 0;
    req.max_body = max;
    st = ckpt_http_do_within(h, &req, timeout_ms, &resp);
    if (st != CKPT_OK) {
        /* the fixed text, not curl's detail ("... after 12 ms"): a poller
         * logs a failing condition once, until it changes */
        snprintf(r->err, sizeof r->err, "%s",
                 resp.curl_code ? ckpt_http_reason(resp.curl_code) : ckpt_strerror(st));
        goto out;
    }
    if (resp.body_overflow) {
        /* capped, never truncated: a partial document is no document */
        snprintf(r->err, sizeof r->err, "reply body over %zu bytes", max);
        goto out;
    }
    if (ckpt_http_resp_take_body(&resp, &b, &r->len) != CKPT_OK) {
        snprintf(r->err, sizeof r->err, "out of memory");
        goto out;
    }
    r->body = b;
    r->status = resp.status;
    plain_etag(&resp, r->etag, sizeof r->etag);
    ret = 0;
out:
    ckpt_http_resp_free(&resp);
    return ret;
}

static void read_dmi(const char *dir, const char *name, char *out, size_t cap)
{
    char path[512];
    int fd;
    ssize_t n;
    out[0] = '\0';
    snprintf(path, sizeof path, "%s/%s", dir, name);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    n = read(fd, out, cap - 1);
    close(fd);
    /* sysfs values end in a newline; keep one clean line for matching/logs */
    while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == ' ' || out[n - 1] == '\r'))
        n--;
    out[n > 0 ? n : 0] = '\0';
}

const char *notice_detect(const char *dir, ckpt_log_fn log_fn, void *log_user, char *how,
                          size_t how_cap)
{
    char vendor[256], product[256], bios[256], biosver[256], asset[256], msg[512];
    const char *prov = "none";

    read_dmi(dir, "sys_vendor", vendor, sizeof vendor);
    read_dmi(dir, "product_name", product, sizeof product);
    read_dmi(dir, "bios_vendor", bios, sizeof bios);
    read_dmi(dir, "bios_version", biosver, sizeof biosver);
    read_dmi(dir, "chassis_asset_tag", asset, sizeof asset);
    if (strcasestr(vendor, "Amazon") || strcasestr(bios, "Amazon") ||
        strcasestr(biosver, "amazon")) /* older Xen instances say Xen, bios "x.amazon" */
        prov = "aws";
    else if (strcasestr(vendor, "Google") || strcasestr(product, "Google"))
        prov = "gcp";
    else if (strcasestr(vendor, "Microsoft Corporation") &&
             (strstr(asset, "7783-7084-3265-9085-8269-3286-77") ||
              strcasestr(product, "Virtual Machine")))
        prov = "azure"; /* Hyper-V guest; Azure's fixed asset tag when present */
    else if (strcasestr(vendor, "Alibaba") || strcasestr(product, "Alibaba Cloud"))
        prov = "aliyun";
    else if (strcasestr(vendor, "Tencent") || strcasestr(product, "Tencent"))
        prov = "tencent";
    if (how) {
        if (!vendor[0] && !product[0])
            snprintf(how, how_cap, "no DMI information in %.120s", dir);
        else if (strcmp(prov, "none") == 0)
            snprintf(how, how_cap, "DMI sys_vendor \"%.60s\" product \"%.60s\": no known provider",
                     vendor, product);
        else
            snprintf(how, how_cap, "DMI sys_vendor \"%.60s\" product \"%.60s\"", vendor, product);
    }
    if (log_fn) {
        snprintf(msg, sizeof msg, "auto: DMI vendor \"%.60s\" product \"%.60s\" -> %s",
                 vendor, product, prov);
        log_fn(log_user, CKPT_LOG_DEBUG, "notice", msg);
    }
    return prov;
}

int notice_base_of(const char *url, char *out, size_t cap)
{
    const char *a;
    size_t n;
    if (strncmp(url, "http://", 7) == 0)
        a = url + 7;
    else if (strncmp(url, "https://", 8) == 0)
        a = url + 8;
    else
        return -1;
    n = strcspn(a, "/?#");
    if (n == 0 || (size_t)(a - url) + n >= cap || memchr(a, '@', n) || a[n - 1] == ':')
        return -1; /* no host, no credentials in a metadata URL, no empty port */
    {
        /* Only host[:port] characters: the result is pasted into URLs. */
        size_t i;
        for (i = 0; i < n; i++)
            if (!((a[i] >= '0' && a[i] <= '9') || (a[i] >= 'a' && a[i] <= 'z') ||
                  (a[i] >= 'A' && a[i] <= 'Z') || strchr(".-:[]", a[i])))
                return -1;
    }
    memcpy(out, url, (size_t)(a - url) + n);
    out[(a - url) + n] = '\0';
    return 0;
}

const char *notice_default_base(const char *provider)
{
    return strcmp(provider, "gcp") == 0      ? "http://metadata.google.internal"
           : strcmp(provider, "aliyun") == 0 ? "http://100.100.100.200"
           : strcmp(provider, "tencent") == 0 ? "http://metadata.tencentyun.com"
                                              : "http://169.254.169.254"; /* aws, azure */
}
