/*
 * notice_glue.h -- the supervisor's side of the cloud notices: start the
 * poller (notice.h) for --notice and --metadata-url, whose notices arrive
 * in the supervisor's queue (notice_queue.h), and stop it at exit.
 *
 * The supervisor calls ckptrun_notice_start() once, before starting the
 * child, and ckptrun_notice_stop() at exit, which joins the poller's
 * threads and those acknowledging Azure events.
 */
#ifndef CKPTRUN_NOTICE_GLUE_H
#define CKPTRUN_NOTICE_GLUE_H

struct ckptrun_notice_cfg {
    const char *mode;          /* --notice: a word of NOTICE_MODES (notice.h) */
    const char *metadata_url;  /* --metadata-url or NULL */
    int verbosity;             /* -1 quiet, 0, 1 verbose */
};

/* @return 0 (polling, or nothing to poll on this machine), -1 on a bad
 * configuration (the supervisor exits 78). */
int ckptrun_notice_start(const struct ckptrun_notice_cfg *cfg);
void ckptrun_notice_stop(void);

#endif
