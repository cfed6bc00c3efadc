/* thread.c -- threads that take no signal (ckpt_common.h). */
#include <signal.h>

#include "ckpt_common.h"

int ckpt__thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
    sigset_t all, old;
    int rc;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(t, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}
