/* notice/report.h -- what a polling thread reports: its log (once per condition), naps that end on
 * stop, delivery (notice/report.c). */
#ifndef CKPTRUN_NOTICE_REPORT_H
#define CKPTRUN_NOTICE_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "notice/int.h"

void notice_log(struct notice_poller *p, ckpt_log_level lv, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A failing condition, logged once until it changes or clears. */
void notice_cond_fail(struct nwatch *w, int slot, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void notice_cond_ok(struct nwatch *w, int slot);
/* 1 when a and b tell the same condition: equal but for the digits of
 * durations ("after 0 ms" / "after 3 ms", as libcurl words a refusal). */
int notice_same_condition(const char *a, const char *b);
/* Sleep up to ms. @return 1 when the poller is stopping. */
int notice_nap(struct notice_poller *p, long ms);
/* The poll interval: the configured one, else the provider's `dflt`. */
long notice_poll_interval(const struct notice_poller *p, long dflt);
/* Hand a notice to the callback, at most once (notice.h, Guarantees). */
void notice_deliver(struct notice_poller *p, struct notice_event *ev);
/* Act on a parser's result `r` for the path in `slot`: log a bad reply
 * once, clear the condition and deliver a notice otherwise. */
void notice_result(struct nwatch *w, int slot, int r, struct notice_event *ev);
/* Run a parser on a 200 body and act on the result. */
void notice_handle(struct nwatch *w, int slot, notice_parser parse, const char *body, size_t len);

#endif
