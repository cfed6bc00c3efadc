/* signame.c -- signal names (ckpt_common.h). */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "ckpt_common.h"

static const struct {
    const char *name; /* with its "SIG" */
    int sig;
} signames[] = {
    { "SIGHUP", SIGHUP },
    { "SIGINT", SIGINT },
    { "SIGQUIT", SIGQUIT },
    { "SIGUSR1", SIGUSR1 },
    { "SIGUSR2", SIGUSR2 },
    { "SIGTERM", SIGTERM },
    { "SIGXCPU", SIGXCPU },
    { "SIGWINCH", SIGWINCH },
    { "SIGPWR", SIGPWR },
    { "SIGURG", SIGURG },
    { "SIGALRM", SIGALRM },
    { "SIGCONT", SIGCONT },
    /* named in logs only: ckpt__parse_signal refuses KILL and STOP */
    { "SIGKILL", SIGKILL },
    { "SIGSEGV", SIGSEGV },
    { "SIGABRT", SIGABRT },
    { "SIGBUS", SIGBUS },
    { "SIGFPE", SIGFPE },
    { "SIGILL", SIGILL },
    { "SIGPIPE", SIGPIPE },
    { "SIGTRAP", SIGTRAP },
    { "SIGSTOP", SIGSTOP },
    { "SIGTSTP", SIGTSTP },
};

int ckpt__parse_signal(const char *s, int *sig)
{
    unsigned long n = 0;
    int rc = -1;

    if (!s || !*s)
        goto out;
    if (strcasecmp(s, "none") == 0) {
        *sig = 0;
        rc = 0;
        goto out;
    }
    if (s[0] >= '0' && s[0] <= '9') {
        for (const char *p = s; *p; p++) {
            if (*p < '0' || *p > '9' || n > 64)
                goto out;
            n = n * 10 + (unsigned long)(*p - '0');
        }
        if (n < 1 || n > 64 || n == SIGKILL || n == SIGSTOP)
            goto out;
        *sig = (int)n;
        rc = 0;
        goto out;
    }
    if (strncasecmp(s, "SIG", 3) == 0)
        s += 3;
    for (size_t i = 0; i < sizeof signames / sizeof signames[0]; i++)
        if (strcasecmp(s, signames[i].name + 3) == 0 && signames[i].sig != SIGKILL &&
            signames[i].sig != SIGSTOP) {
            *sig = signames[i].sig;
            rc = 0;
            break;
        }
out:
    return rc;
}

const char *ckpt__signal_name(int sig)
{
    static __thread char buf[16];
    if (sig == 0)
        return "none";
    for (size_t i = 0; i < sizeof signames / sizeof signames[0]; i++)
        if (signames[i].sig == sig)
            return signames[i].name;
    snprintf(buf, sizeof buf, "%d", sig);
    return buf;
}
