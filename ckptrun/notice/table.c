/* notice/table.c -- the provider table built from NOTICE_PROVIDER_LIST
 * (notice.h), and what is read from it: names, DMI detection, doctor's
 * hints (notice/provider.h). Nothing here touches the network. */
#include "notice/int.h"
#include "notice/table.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define DECLARE_(name) extern const struct notice_provider notice_##name;
NOTICE_PROVIDER_LIST(DECLARE_)
#undef DECLARE_

#define ENTRY_(name) &notice_##name,
const struct notice_provider *const notice_providers[] = { NOTICE_PROVIDER_LIST(ENTRY_) NULL };
#undef ENTRY_

const struct notice_provider *notice_provider_find(const char *name)
{
    for (int i = 0; name && notice_providers[i]; i++)
        if (strcmp(name, notice_providers[i]->name) == 0)
            return notice_providers[i];
    return NULL;
}

const char *notice_provider_name(const char *name)
{
    const struct notice_provider *pv = notice_provider_find(name);
    if (pv)
        return pv->name;
    return name && strcmp(name, "none") == 0 ? "none" : NULL;
}

int notice_mode_valid(const char *mode)
{
    return mode && (strcmp(mode, "auto") == 0 || notice_provider_name(mode) != NULL);
}

const struct notice_hints *notice_hints(const char *provider)
{
    const struct notice_provider *pv = notice_provider_find(provider);
    return pv ? &pv->hints : NULL;
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

void notice_dmi_read(const char *dir, struct notice_dmi *d)
{
    read_dmi(dir, "sys_vendor", d->vendor, sizeof d->vendor);
    read_dmi(dir, "product_name", d->product, sizeof d->product);
    read_dmi(dir, "bios_vendor", d->bios_vendor, sizeof d->bios_vendor);
    read_dmi(dir, "bios_version", d->bios_version, sizeof d->bios_version);
    read_dmi(dir, "chassis_asset_tag", d->asset_tag, sizeof d->asset_tag);
}

const char *notice_detect(const char *dir, ckpt_log_fn log_fn, void *log_user, char *how,
                          size_t how_cap)
{
    struct notice_dmi d;
    char msg[512];
    const char *prov = "none";

    notice_dmi_read(dir, &d);
    /* The first provider in the table's order whose DMI test says so. */
    for (int i = 0; notice_providers[i]; i++)
        if (notice_providers[i]->dmi_match && notice_providers[i]->dmi_match(&d)) {
            prov = notice_providers[i]->name;
            break;
        }
    if (how) {
        if (!d.vendor[0] && !d.product[0])
            snprintf(how, how_cap, "no DMI information in %.120s", dir);
        else if (strcmp(prov, "none") == 0)
            snprintf(how, how_cap, "DMI sys_vendor \"%.60s\" product \"%.60s\": no known provider",
                     d.vendor, d.product);
        else
            snprintf(how, how_cap, "DMI sys_vendor \"%.60s\" product \"%.60s\"", d.vendor,
                     d.product);
    }
    if (log_fn) {
        snprintf(msg, sizeof msg, "auto: DMI vendor \"%.60s\" product \"%.60s\" -> %s", d.vendor,
                 d.product, prov);
        log_fn(log_user, CKPT_LOG_DEBUG, "notice", msg);
    }
    return prov;
}
