/* watch/links.h -- symbolic links of the directory (watch/links.c; the watcher's insides:
 * watch/int.h). Supervisor's thread only. */
#ifndef CKPTRUN_WATCH_LINKS_H
#define CKPTRUN_WATCH_LINKS_H

#include <stddef.h>
#include <stdint.h>

#include "watch/int.h"

enum link_class { L_NONE, L_INSIDE, L_OUTSIDE };
/* Can link `l` be part of a snapshot now, and as what (*target: the entry
 * it points into; *copy: committed as what it points to)? */
enum link_class link_member(struct watch *w, const struct entry *l, int64_t now,
                            struct entry **target, int *copy);
/* Have the links changed since the newest snapshot committed? */
int links_changed_vs_head(struct watch *w, int64_t now);

#endif
