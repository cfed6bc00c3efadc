/* notice_queue.c -- notices from other threads to the loop (notice_queue.h):
 * a list under a mutex, and an eventfd to wake the loop. */
#include "sup/notice_queue.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER; /* guards g_head */
static struct queued_notice *g_head;
static int g_fd = -1;

int notice_queue_open(void)
{
    g_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    return g_fd < 0 ? -1 : 0;
}

void notice_queue_close(void)
{
    struct queued_notice *n;

    pthread_mutex_lock(&g_mu);
    while ((n = g_head) != NULL) {
        g_head = n->next;
        free(n);
    }
    pthread_mutex_unlock(&g_mu);
    if (g_fd >= 0)
        close(g_fd);
    g_fd = -1;
}

int notice_queue_fd(void)
{
    return g_fd;
}

void notice_queue_wake(void)
{
    uint64_t one = 1;
    if (g_fd >= 0 && write(g_fd, &one, sizeof one) < 0)
        (void)0; /* counter full: the loop is already woken */
}

void ckptrun_notice_post(enum ckptrun_notice_kind kind, int64_t deadline_ms,
                         const char *provider, ckptrun_notice_ack_fn ack, void *ack_user)
{
    struct queued_notice *n = calloc(1, sizeof *n);

    if (!n)
        return;
    n->kind = kind;
    n->deadline_ms = deadline_ms;
    snprintf(n->provider, sizeof n->provider, "%s", provider ? provider : "");
    n->ack = ack;
    n->ack_user = ack_user;
    pthread_mutex_lock(&g_mu);
    n->next = g_head;
    g_head = n;
    pthread_mutex_unlock(&g_mu);
    notice_queue_wake();
}

struct queued_notice *notice_queue_take(void)
{
    struct queued_notice *list;
    uint64_t cnt;

    if (g_fd >= 0 && read(g_fd, &cnt, sizeof cnt) < 0)
        (void)0; /* nothing to clear: woken by an earlier read */
    pthread_mutex_lock(&g_mu);
    list = g_head;
    g_head = NULL;
    pthread_mutex_unlock(&g_mu);
    return list;
}
