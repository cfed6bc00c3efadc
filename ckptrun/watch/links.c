/* watch/links.c -- the symbolic links of CKPT_DIR: where each points, and
 * when it can be part of a snapshot (watch/int.h). A link into the
 * directory is restored as a link to the restored file; one that points
 * outside is committed as the file it points to. */
#include "watch/int.h"
#include "watch/entry.h"
#include "watch/links.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A target text libckpt stores as is: relative, no empty, "." or ".."
 * component (so it names the path it resolves to, lexically). */
static int link_text_clean(const char *t)
{
    if (!*t || *t == '/')
        return 0;
    for (const char *s = t;;) {
        size_t n = strcspn(s, "/");
        if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
            return 0;
        s += n;
        if (!*s)
            return 1;
        s++;
    }
}

/* Where a link of the directory points. L_INSIDE: into a file or
 * directory entry `*target` (or something inside one); *copy says whether it
 * is committed as what it points to rather than as a link item (a link item
 * needs a clean relative text naming the real path, landing on a file or on
 * a directory holding files). L_OUTSIDE: anywhere else that exists,
 * committed as what it points to. L_NONE: dangling. */
static enum link_class link_class(struct watch *w, const struct entry *l, struct entry **target,
                                  int *copy)
{
    char p[PBUF], real[PATH_MAX], first[256];
    const char *rel;
    size_t n = strlen(w->dir);
    struct entry *t;
    struct stat sb;

    *target = NULL;
    *copy = 1;
    entry_path(w, l, p, sizeof p);
    if (!l->link || !realpath(p, real) || stat(real, &sb) != 0)
        return L_NONE;
    if (strncmp(real, w->dir, n) != 0 || real[n] != '/')
        return L_OUTSIDE;
    rel = real + n + 1;
    snprintf(first, sizeof first, "%.*s", (int)strcspn(rel, "/"), rel);
    t = find_entry(w, first);
    if (!t || t->kind == K_LINK || t == l)
        return L_OUTSIDE; /* a temporary name, or not seen yet */
    *target = t;
    if (link_text_clean(l->link) && strcmp(l->link, rel) == 0) {
        struct commit_print cp = { 0 };
        *copy = !(S_ISREG(sb.st_mode) ||
                  (S_ISDIR(sb.st_mode) && commit_print_path(real, &cp, NULL, NULL) == 0 &&
                   cp.files > 0));
    }
    return L_INSIDE;
}

/* Can link `l` be part of a snapshot now? A link into the directory goes
 * with its target entry once that is complete (*target); a link to outside
 * once what it points to has not changed for the quiet time (a log growing
 * behind a link never holds a commit back); a dangling one never. */
enum link_class link_member(struct watch *w, const struct entry *l, int64_t now,
                                   struct entry **target, int *copy)
{
    enum link_class c = link_class(w, l, target, copy);
    if (c == L_INSIDE && !includable(*target))
        c = L_NONE;
    if (c == L_OUTSIDE && (l->sig.p.files == 0 || now - l->changed < (int64_t)quiet_ms(w)))
        c = L_NONE;
    return c;
}

/* Have the links changed since the newest snapshot committed? Only a link
 * made, removed or re-pointed counts (its target changing does not), and a
 * link that cannot be part of a snapshot yet waits. */
int links_changed_vs_head(struct watch *w, int64_t now)
{
    for (size_t i = 0; i < w->nent; i++) {
        struct entry *l = &w->ent[i], *t;
        int found = 0, copy;
        if (!l->in_use || l->kind != K_LINK || link_member(w, l, now, &t, &copy) == L_NONE)
            continue;
        for (size_t k = 0; k < w->nhead && !found; k++)
            if (w->head[k].is_link && strcmp(w->head[k].name, l->name) == 0) {
                if (w->head[k].sig.link_hash != l->sig.link_hash)
                    return 1;
                found = 1;
            }
        if (!found)
            return 1;
    }
    for (size_t k = 0; k < w->nhead; k++) {
        struct entry *l;
        if (!w->head[k].is_link)
            continue;
        l = find_entry(w, w->head[k].name);
        if (!l || l->kind != K_LINK)
            return 1; /* removed (and not made again) */
    }
    return 0;
}
