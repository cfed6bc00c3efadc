/* hooks.c -- the outcome hooks (hooks.h). */
#include "sup/hooks.h"
#include "base/runlog.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

void hook_run(const char *cmd, const char *run, const char *state, int64_t last_step, int code)
{
    char buf[32];
    pid_t pid;
    int st;

    if (!cmd || !*cmd)
        return;
    /* Our own environment: we are about to exit, and the child's copy was
     * built separately. */
    setenv("CKPT_RUN", run, 1);
    setenv("CKPT_STATE", state, 1);
    if (last_step >= 0) {
        snprintf(buf, sizeof buf, "%" PRId64, last_step);
        setenv("CKPT_STEP", buf, 1);
    } else {
        unsetenv("CKPT_STEP");
    }
    snprintf(buf, sizeof buf, "%d", code);
    setenv("CKPT_EXIT", buf, 1);
    log_msg(LOG_INFO, "hook", "%s", cmd);
    pid = fork();
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    if (pid < 0 || waitpid(pid, &st, 0) != pid)
        log_msg(LOG_WARN, "hook", "cannot run hook: %s", strerror(errno));
    else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        log_msg(LOG_WARN, "hook", "hook exited with %d",
                WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}
