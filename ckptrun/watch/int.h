/*
 * watch/int.h -- the watcher's insides (watch.h), shared by its files:
 *   watch.c          open, close, the tick, the child's exit, results
 *   watch/events.c   inotify and the preload shim's file events
 *   watch/judge.c    completeness of an entry
 *   watch/plan.c     the next snapshot, queued for the commit thread
 *   watch/commit.c   the commit thread and what its results settle
 *   watch/links.c    symbolic links of the directory
 *   watch/writers.c  writers of an entry, from /proc
 *   watch/entry.c    entries, inotify watches, signatures, the step counter
 *   watch/steps.c    whose step an entry has: saved(), trainer_state.json,
 *                    its name, or the counter
 * Each file's own functions are its header (watch/<file>.h); this one is
 * the state they share. Everything runs on the supervisor's thread except
 * watch/commit.c's worker, which touches only the queue (under mu) and its
 * context.
 */
#ifndef CKPTRUN_WATCH_INT_H
#define CKPTRUN_WATCH_INT_H

#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "watch/commit_files.h"

#define MAX_ENTRIES 4096
#define MAX_WATCHES 8192
#define MAX_DEPTH 16
/* Paths built from the directory (< PATH_MAX) and a name (< 256). */
#define PBUF (PATH_MAX + 512)

#define CLOSE_MS 300        /* a close is judged this long after it happened */
#define LINK_QUIET_MS 300   /* links are read once unchanged this long */
#define LINK_WAIT_MAX_MS 1000 /* ... or after this long, if they never stop */
#define QUIET_MAX_MS 2000   /* after a marker: min(settle, this) with no change */
#define WSCAN_MS 100        /* while a file entry is written: look for its writers */
#define WRITER_POLL_MS 250  /* someone holds it open for writing: look again */
#define MAX_WRITERS 4
#define MAX_MOVES 64
#define MAX_MARKS 64        /* files/ marks read at start */
#define STUCK_MIN_MS 1000
#define MAX_CLAIMS 64       /* saved() reports remembered (newest kept) */
#define STATE_MAX_BYTES (16 << 20) /* a trainer_state.json larger is not read */

enum kind { K_FILE, K_DIR, K_LINK };
enum trigger { T_NONE, T_RENAMED, T_MARKER, T_CLOSE };
/* Where an entry's step comes from, weakest first: the trainer's word wins
 * wherever it gives one (docs/ckptrun.md, "Step"). */
enum step_from { SF_COUNTER, SF_NAME, SF_STATE, SF_SAVED };

/* What an entry looks like on disk; equal signatures = nothing changed. */
struct sig {
    struct commit_print p;    /* files as a commit reads them */
    uint64_t link_hash;       /* symbolic links: where they point */
    int has_marker;
    uint64_t shape;           /* directories: the names of its files, with its
                                 step's number made '#' (order-free hash) */
};

struct wpid {
    pid_t pid;
    unsigned long long start; /* /proc/PID/stat starttime: PIDs are reused */
};

/* What became of a writer, as far as /proc tells. */
enum fate { F_ALIVE, F_EXITED, F_KILLED, F_GONE };

struct entry {
    char name[256];
    enum kind kind;
    int in_use;
    uint64_t gen;             /* instance: a name deleted and made again is new */
    int64_t changed;          /* mono ms of the last change seen */
    int64_t sig_at;           /* when sig was computed */
    int touched;              /* an event since then */
    struct sig sig;           /* as last computed */
    int sig_ok;               /* the last walk saw everything (nothing vanished) */
    enum trigger trigger;     /* completion evidence waiting to be judged */
    int64_t trig_at;
    int fresh;                /* never complete: events may have been missed, a
                                 marker already there counts */
    int removing;             /* lost a file or directory: never complete again
                                 unless its marker is written again */
    int torn;                 /* its last close was its writer dying or being
                                 stopped: settling never completes it */
    int ok;                   /* ok_sig is a complete version (while sig == ok_sig) */
    struct sig ok_sig;
    int64_t ok_at;
    int done;                 /* done_sig was committed */
    struct sig done_sig;
    int failed;               /* failed_sig failed to commit: retried once changed */
    struct sig failed_sig;
    uint64_t step;            /* the trainer's (saved(), trainer_state.json, the
                                 name), or the counter at completion */
    int numbered;             /* step is the trainer's: not a counter value */
    enum step_from step_from;
    uint64_t name_step;       /* the number in its name, if name_numbered */
    int name_numbered;
    int restep;               /* saved() gave this version another step after it
                                 was complete: committed (again) at it */
    struct wpid wp[MAX_WRITERS]; /* writers seen while it was written (files) */
    int nwp;
    int writing;              /* modified since its last close */
    int close_killed;         /* a writer of it was seen killed at its close */
    int64_t wscan;
    char *link;               /* K_LINK: readlink text */
};

struct wmap {
    int wd;
    char entry[256];          /* top-level entry name; "" = the root */
};

/* One part of a snapshot: an entry, or a link. */
struct member {
    char name[256];
    uint64_t gen;
    int link_item;            /* committed as a link (ckpt_protect_link) */
    int is_link;              /* a symbolic link of the directory */
    struct sig sig;
};

struct watch_job {
    struct watch_job *next;
    uint64_t step;
    int head;                 /* the newest state, not an older step's fix-up */
    enum step_from step_from; /* of the entry that gave the step */
    int64_t completed;
    int64_t changed;
    char entry[256];
    size_t n;
    struct commit_src *src;   /* paths/names/link malloc'd */
    struct member *m;         /* n, parallel to src */
    struct commit_print expect;
};

struct head_item {
    char name[256];
    int is_link;
    struct sig sig;
};

/* A saved(path, step) report: that version of the entry is complete, at
 * that step. */
struct claim {
    char name[256];
    uint64_t step;
    struct sig sig;
    uint64_t gen;             /* the entry's instance when reported */
    int waiting;              /* a process still wrote in it when reported (another
                                 rank): that instance, once they are done */
    int in_use;
};

struct move {
    uint32_t cookie;
    char entry[256];
    uint64_t gen;
};

struct watch {
    char dir[PATH_MAX];
    char marker[256];
    uint64_t settle_ms;
    int ifd;
    int pipe_r, pipe_w;
    pid_t pgid;
    pid_t self;
    uint64_t counter;         /* next step for names without a number */
    uint64_t gen_next;
    int dirty;                /* something to look at before the next due time */
    int paused;               /* the child commits the run itself: hands off */
    int child_alive, child_clean;
    int64_t stop_at;          /* ckptrun signals the child's group from then on */
    int64_t links_changed;    /* a symbolic link was made, removed or re-pointed */
    int jobs_out;             /* queued or in flight, not yet taken (main thread) */
    int64_t links_failed;     /* links_changed when a snapshot for it failed */
    int64_t wait_since;       /* a snapshot has been waiting for quiet links since */
    int64_t stuck_since;      /* pending entries and no commit since */
    int stuck_told;
    int saved_mode;           /* the child reports its saves (saved()) */
    struct claim claims[MAX_CLAIMS];
    uint64_t claims_next;     /* the slot after the newest report */
    uint64_t shape;           /* of the newest complete directory with a marker */
    int have_shape;
    uint64_t top;             /* highest step the run holds (store, commits) */
    int have_top;
    int back_told;            /* warned once of a trainer's step going back */
    int last_look;            /* the tick of watch_stopping, before the signal */
    struct entry *ent;
    size_t nent;
    struct wmap *wm;
    size_t nwm;
    struct move mv[MAX_MOVES];
    size_t nmv;
    struct head_item *head;   /* the newest snapshot committed */
    size_t nhead;
    int have_head;

    /* Shared with the worker: guarded by mu. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct watch_job *qhead, *qtail;
    int busy;                 /* queued + in flight */
    int stop;

    /* Worker only (and ckpt_request, which is thread-safe). */
    struct ckpt_ctx *ctx;
    pthread_t thr;
    int thr_started;
};

#endif
