/* sup_seam.c -- the real seam (sup_seam.h): the system's clocks, and the
 * functions of child.h, ctlserver.h, watch.h and nodesync.h themselves. */
#include "sup/sup_seam.h"
#include "sup/child.h"
#include "sup/ctlserver.h"
#include "nodes/nodesync.h"
#include "watch/watch.h"
#include "ckpt_common.h"

static int64_t sys_mono_ms(void *user)
{
    (void)user;
    return ckpt__mono_ms(); /* CLOCK_MONOTONIC: the timerfd's clock too */
}

static int64_t sys_now_ms(void *user)
{
    (void)user;
    return ckpt__now_ms();
}

const struct sup_seam sup_seam_system = {
    .clock = { sys_mono_ms, sys_now_ms, NULL },
    .signal_group = child_signal_group,
    .kill_all = child_kill_all,
    .signal_handlers = child_signal_handlers,
    .finish_tree = child_finish_tree,
    .ctl_connected = ctl_connected,
    .ctl_helpers = ctl_helpers,
    .ctl_signal_clients = ctl_signal_clients,
    .ctl_unacked = ctl_unacked,
    .ctl_request = ctl_request,
    .ctl_stopping = ctl_stopping,
    .watch_stopping = watch_stopping,
    .watch_pause = watch_pause,
    .watch_set_settle = watch_set_settle,
    .watch_next_codec = watch_next_codec,
    .watch_busy = watch_busy,
    .watch_has_step = watch_has_step,
    .watch_child_exit = watch_child_exit,
    .watch_note_step = watch_note_step,
    .watch_uncommitted = watch_uncommitted,
    .nodes_view = nodesync_view,
    .nodes_post_stop = nodesync_post_stop,
    .nodes_write_empty = nodesync_write_empty,
    .nodes_fast = nodesync_fast,
};
