/* itemset.c -- the rules a checkpoint's item set keeps, checked whole when
 * a manifest is read and before a save (itemset.h): unique names, no item
 * also the directory of another, links that land on items of the same
 * checkpoint (docs/FORMAT.md, "Links"). */
#include <stdlib.h>
#include <string.h>

#include "format/itemset.h"
#include "format/manifest_data.h"
#include "base/util.h"

int ckpt__target_valid(const char *t)
{
    size_t len = t ? strlen(t) : 0;
    return len > 0 && len <= CKPT_TARGET_MAX && t[0] != '/' && ckpt__text_valid(t, len);
}

/* ---- whole-manifest checks ------------------------------------------------------
 * Names are sorted once (bytewise, as strcmp orders them); then "is there an
 * item under the directory P" is a binary search for the range of names
 * starting with "P/", and a prefix count of non-link items tells whether a
 * file lives there. O(n log n) for any number of items and links. */
struct sorted_names {
    const struct ckpt_mitem **v; /* by name */
    size_t *files;               /* files[i]: non-link items among v[0..i) */
    size_t n;
};

static int cmp_item_name(const void *a, const void *b)
{
    return strcmp((*(const struct ckpt_mitem *const *)a)->name,
                  (*(const struct ckpt_mitem *const *)b)->name);
}

/* strcmp(name, key) where key is p[0..plen) followed by c (c != 0) or by
 * nothing (c == 0); only the sign matters. */
static int cmp_key(const char *name, const char *p, size_t plen, char c)
{
    int r = strncmp(name, p, plen);
    if (r)
        return r;
    if (!c)
        return name[plen] ? 1 : 0;
    if (name[plen] != c)
        return (unsigned char)name[plen] < (unsigned char)c ? -1 : 1;
    return name[plen + 1] ? 1 : 0;
}

/* First index whose name is >= key (see cmp_key). */
static size_t lower_bound(const struct sorted_names *s, const char *p, size_t plen, char c)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cmp_key(s->v[mid]->name, p, plen, c) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The item named exactly p[0..plen), or NULL. */
static const struct ckpt_mitem *find_exact(const struct sorted_names *s, const char *p,
                                           size_t plen)
{
    size_t i = lower_bound(s, p, plen, 0);
    return i < s->n && cmp_key(s->v[i]->name, p, plen, 0) == 0 ? s->v[i] : NULL;
}

/* Items under the directory p[0..plen) ("p/..."): *all of any kind, the
 * return value counts the non-link ones. */
static size_t count_under(const struct sorted_names *s, const char *p, size_t plen, size_t *all)
{
    /* names starting with "p/" are those from "p/" up to "p0" ('0' follows '/') */
    size_t lo = lower_bound(s, p, plen, '/'), hi = lower_bound(s, p, plen, '0');
    if (all)
        *all = hi - lo;
    return s->files[hi] - s->files[lo];
}

/* Resolve link `it` lexically from its own directory and check where it
 * lands (docs/FORMAT.md, "Links"). 0, else -1 with the reason in err. */
static int check_link(const struct sorted_names *s, const struct ckpt_mitem *it, char *err)
{
    char path[CKPT_NAME_MAX + 1];
    const char *t = it->target, *slash = strrchr(it->name, '/');
    size_t len = slash ? (size_t)(slash - it->name) : 0, all;
    int trailing = 0;

    if (!ckpt__target_valid(t)) {
        ckpt__seterr(err, "link %s: target must be a relative path of UTF-8 text without "
                          "control characters", it->name);
        return -1;
    }
    memcpy(path, it->name, len);
    while (*t) {
        const char *e = strchr(t, '/');
        size_t sl = e ? (size_t)(e - t) : strlen(t);
        const char *next = t + sl + (e ? 1 : 0);
        int final = 1;
        /* the segment is final when only empty or "." segments follow */
        for (const char *q = next; *q;) {
            const char *qe = strchr(q, '/');
            size_t ql = qe ? (size_t)(qe - q) : strlen(q);
            if (ql && !(ql == 1 && q[0] == '.')) {
                final = 0;
                break;
            }
            q += ql + (qe ? 1 : 0);
        }
        if (sl == 0 || (sl == 1 && t[0] == '.')) {
            /* nothing */
        } else if (sl == 2 && t[0] == '.' && t[1] == '.') {
            if (len == 0) {
                ckpt__seterr(err, "link %s: target %.200s leaves the checkpoint", it->name,
                             it->target);
                return -1;
            }
            while (len > 0 && path[len - 1] != '/')
                len--;
            if (len > 0)
                len--; /* the slash */
        } else {
            if (len + (len ? 1 : 0) + sl > CKPT_NAME_MAX) {
                ckpt__seterr(err, "link %s: target %.200s names no item of the checkpoint",
                             it->name, it->target);
                return -1;
            }
            if (len)
                path[len++] = '/';
            memcpy(path + len, t, sl);
            len += sl;
            /* a directory on the way must be one the restore creates: one
             * holding items of this checkpoint (never a link or a file, which
             * the kernel would resolve differently from this walk) */
            if (!final && (count_under(s, path, len, &all), all == 0)) {
                ckpt__seterr(err, "link %s: target %.200s goes through %.*s, which is not a "
                                  "directory of the checkpoint", it->name, it->target,
                             (int)len, path);
                return -1;
            }
        }
        if (final && e)
            trailing = 1; /* "name/" or "name/.": the kernel wants a directory */
        t = next;
    }
    if (len == 0) {
        ckpt__seterr(err, "link %s: target %.200s points at the top of the checkpoint",
                     it->name, it->target);
        return -1;
    }
    if (!strncmp(it->name, path, len) && (it->name[len] == '/' || it->name[len] == '\0')) {
        ckpt__seterr(err, "link %s: target %.200s points at the link itself or a directory "
                          "holding it", it->name, it->target);
        return -1;
    }
    {
        const struct ckpt_mitem *hit = find_exact(s, path, len);
        if (hit && hit->kind == CKPT_ITEM_LINK) {
            ckpt__seterr(err, "link %s: target %.200s is another link", it->name, it->target);
            return -1;
        }
        if (hit && !trailing)
            return 0;
        if (!hit && count_under(s, path, len, NULL) > 0)
            return 0;
    }
    ckpt__seterr(err, "link %s: target %.200s names no item of the checkpoint (dangling)",
                 it->name, it->target);
    return -1;
}

ckpt_status ckpt__manifest_check(const struct ckpt_manifest *m, char *err)
{
    struct sorted_names s = { NULL, NULL, m->nitems };
    ckpt_status st = CKPT_E_CORRUPT;
    size_t i;

    if (m->nitems == 0)
        return CKPT_OK;
    s.v = malloc(m->nitems * sizeof *s.v);
    s.files = malloc((m->nitems + 1) * sizeof *s.files);
    if (!s.v || !s.files) {
        st = CKPT_E_NOMEM;
        ckpt__seterr(err, "out of memory checking %zu item names", m->nitems);
        goto out;
    }
    for (i = 0; i < m->nitems; i++)
        s.v[i] = &m->items[i];
    qsort(s.v, s.n, sizeof *s.v, cmp_item_name);
    s.files[0] = 0;
    for (i = 0; i < s.n; i++)
        s.files[i + 1] = s.files[i] + (s.v[i]->kind != CKPT_ITEM_LINK);
    for (i = 0; i < s.n; i++) {
        const char *name = s.v[i]->name;
        size_t nl = strlen(name), all;
        if (i + 1 < s.n && !strcmp(name, s.v[i + 1]->name)) {
            ckpt__seterr(err, "duplicate item %.300s", name);
            goto out;
        }
        /* restore makes a file of every item: none can also be a directory */
        count_under(&s, name, nl, &all);
        if (all) {
            ckpt__seterr(err, "item %.200s is also the directory of item %.200s", name,
                         s.v[lower_bound(&s, name, nl, '/')]->name);
            goto out;
        }
    }
    for (i = 0; i < s.n; i++)
        if (s.v[i]->kind == CKPT_ITEM_LINK && check_link(&s, s.v[i], err))
            goto out;
    st = CKPT_OK;
out:
    free(s.v);
    free(s.files);
    return st;
}
