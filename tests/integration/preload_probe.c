/*
 * preload_probe.c -- an "unmodified program" for test_preload.py.
 *
 * It knows nothing of ckpt: it opens, writes, closes and renames files and
 * handles (or not) signals the way ordinary programs do. The test runs it
 * under LD_PRELOAD=libckpt_preload.so with a fake ckptrun and checks what the
 * shim reported. Each mode prints a line per milestone on stdout and waits
 * for a line on stdin where the test has to look at something in between.
 *
 *   preload_probe nohandler          raise CKPT_SIGNAL with no handler: lives
 *   preload_probe handler            own sigaction handler still runs
 *   preload_probe signal             own signal() handler still runs
 *   preload_probe write PATH         write half, wait, write rest, close
 *   preload_probe fwrite PATH        same with fopen/fwrite/fclose
 *   preload_probe openat DIR NAME    openat() relative to a directory fd
 *   preload_probe rename FROM TO     create FROM outside, rename to TO
 *   preload_probe fork PATH          child and parent each write PATH.<who>
 *   preload_probe exec PATH          exec itself in `write PATH` mode
 *   preload_probe threads DIR N      N threads each write DIR/t<i>.bin
 *   preload_probe closeall A B       write A, close every fd, reuse the
 *                                    numbers with a pipe, write B; report
 *                                    whether any byte reached the pipe
 *   preload_probe loop DIR N         N writes outside CKPT_DIR (no messages)
 *   preload_probe misc DIR OUT       creat, __open_2, openat64, renameat2,
 *                                    renameat, an fd reused after a raw close
 *   preload_probe api                the in-process API: global context,
 *                                    a signal makes ckpt_should_save() true
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* What _FORTIFY_SOURCE builds call; declared here so this file needs no
 * fortified build to exercise them. */
int __open_2(const char *path, int flags);

static volatile sig_atomic_t g_got;

static void on_sig(int sig)
{
    (void)sig;
    g_got++;
}

static void wait_line(void)
{
    char buf[64];
    if (!fgets(buf, sizeof buf, stdin))
        exit(3);
}

static void say(const char *s)
{
    printf("%s\n", s);
    fflush(stdout);
}

static int write_fd_file(const char *path, int pause)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
        perror(path);
        return 1;
    }
    if (write(fd, "half", 4) != 4)
        return 1;
    if (pause) {
        say("half");
        wait_line();
    }
    if (write(fd, "-done", 5) != 5)
        return 1;
    if (close(fd) != 0)
        return 1;
    say("closed");
    return 0;
}

/* The shim's in-process API, found as a program would: by name. */
static int take_request(void)
{
    int (*take)(void) = (int (*)(void))dlsym(RTLD_DEFAULT,
                                             "ckpt_preload_take_request");
    return take ? take() : -1;
}

static int sig_from_env(void)
{
    const char *s = getenv("CKPT_SIGNAL");
    return (s && strcmp(s, "SIGUSR2") == 0) ? SIGUSR2 : SIGUSR1;
}

static void *thread_main(void *arg)
{
    const char *path = arg;
    for (int i = 0; i < 20; i++) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || write(fd, "x", 1) != 1 || close(fd) != 0)
            return (void *)1;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    const char *mode = argv[1];

    if (strcmp(mode, "nohandler") == 0) {
        struct sigaction old;
        sigaction(sig_from_env(), NULL, &old);
        /* The program sees the default it expects, not the shim's. */
        if (old.sa_handler != SIG_DFL)
            return 4;
        raise(sig_from_env());
        printf("alive take=%d\n", take_request());
        printf("again take=%d\n", take_request());
        return 0;
    }
    if (strcmp(mode, "handler") == 0 || strcmp(mode, "signal") == 0) {
        int sig = sig_from_env();
        if (mode[0] == 'h') {
            struct sigaction sa, old;
            memset(&sa, 0, sizeof sa);
            sa.sa_handler = on_sig;
            sigemptyset(&sa.sa_mask);
            if (sigaction(sig, &sa, NULL) != 0)
                return 4;
            if (sigaction(sig, NULL, &old) != 0 || old.sa_handler != on_sig)
                return 5; /* must see its own handler back */
        } else {
            if (signal(sig, on_sig) == SIG_ERR)
                return 4;
            if (signal(sig, on_sig) != on_sig)
                return 5;
        }
        raise(sig);
        raise(sig);
        printf("alive got=%d take=%d\n", (int)g_got, take_request());
        /* Back to the default: the shim still keeps the process alive. */
        signal(sig, SIG_DFL);
        raise(sig);
        printf("dfl got=%d\n", (int)g_got);
        return 0;
    }
    if (strcmp(mode, "write") == 0 && argc == 3)
        return write_fd_file(argv[2], 1);
    if (strcmp(mode, "fwrite") == 0 && argc == 3) {
        FILE *f = fopen(argv[2], "w");
        if (!f || fputs("half", f) < 0 || fflush(f) != 0)
            return 1;
        say("half");
        wait_line();
        if (fputs("-done", f) < 0 || fclose(f) != 0)
            return 1;
        say("closed");
        return 0;
    }
    if (strcmp(mode, "openat") == 0 && argc == 4) {
        int dfd = open(argv[2], O_RDONLY | O_DIRECTORY);
        if (dfd < 0)
            return 1;
        int fd = openat(dfd, argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || write(fd, "x", 1) != 1 || close(fd) != 0)
            return 1;
        close(dfd);
        say("closed");
        return 0;
    }
    if (strcmp(mode, "rename") == 0 && argc == 4) {
        if (write_fd_file(argv[2], 0) != 0)
            return 1;
        if (rename(argv[2], argv[3]) != 0) {
            perror("rename");
            return 1;
        }
        say("renamed");
        return 0;
    }
    if (strcmp(mode, "fork") == 0 && argc == 3) {
        char p[4096];
        pid_t pid = fork();
        if (pid < 0)
            return 1;
        snprintf(p, sizeof p, "%s.%s", argv[2], pid == 0 ? "child" : "parent");
        if (pid == 0)
            _exit(write_fd_file(p, 0));
        int st;
        if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
            WEXITSTATUS(st) != 0)
            return 1;
        return write_fd_file(p, 0);
    }
    if (strcmp(mode, "exec") == 0 && argc == 3) {
        char *args[] = { argv[0], "write", argv[2], NULL };
        execv("/proc/self/exe", args);
        perror("execv");
        return 1;
    }
    if (strcmp(mode, "threads") == 0 && argc == 4) {
        int n = atoi(argv[3]);
        pthread_t t[64];
        char paths[64][4096];
        if (n < 1 || n > 64)
            return 2;
        for (int i = 0; i < n; i++) {
            snprintf(paths[i], sizeof paths[i], "%s/t%d.bin", argv[2], i);
            if (pthread_create(&t[i], NULL, thread_main, paths[i]) != 0)
                return 1;
        }
        for (int i = 0; i < n; i++) {
            void *r;
            pthread_join(t[i], &r);
            if (r)
                return 1;
        }
        say("joined");
        return 0;
    }
    if (strcmp(mode, "closeall") == 0 && argc == 4) {
        int p[2];
        char buf[256];
        if (write_fd_file(argv[2], 0) != 0)
            return 1;
        /* Like a daemon: every fd goes, the shim's socket included. */
        for (int fd = 3; fd < 1024; fd++)
            close(fd);
        /* Take the freed numbers (the socket's among them) with pipes. */
        int ends[16][2], n = 0;
        for (; n < 16; n++)
            if (pipe2(ends[n], O_NONBLOCK) != 0)
                break;
        if (write_fd_file(argv[3], 0) != 0)
            return 1;
        long leaked = 0;
        for (int i = 0; i < n; i++) {
            ssize_t r;
            while ((r = read(ends[i][0], buf, sizeof buf)) > 0)
                leaked += r;
        }
        (void)p;
        printf("leaked=%ld\n", leaked);
        return 0;
    }
    if (strcmp(mode, "misc") == 0 && argc == 4) {
        char p[4096], q[4096];
        int fd;
        /* 1. creat */
        snprintf(p, sizeof p, "%s/creat.bin", argv[2]);
        if ((fd = creat(p, 0600)) < 0 || close(fd) != 0)
            return 1;
        /* 2. __open_2 on an existing file (no mode argument) */
        if ((fd = __open_2(p, O_WRONLY)) < 0 || close(fd) != 0)
            return 1;
        /* 3. openat64 relative to AT_FDCWD */
        if (chdir(argv[2]) != 0)
            return 1;
        if ((fd = openat64(AT_FDCWD, "at64.bin", O_RDWR | O_CREAT, 0600)) < 0 ||
            close(fd) != 0)
            return 1;
        /* 4. renameat2 and renameat from outside into CKPT_DIR */
        snprintf(p, sizeof p, "%s/r2", argv[3]);
        if ((fd = open(p, O_WRONLY | O_CREAT, 0600)) < 0 || close(fd) != 0)
            return 1;
        snprintf(q, sizeof q, "%s/renameat2.bin", argv[2]);
        if (renameat2(AT_FDCWD, p, AT_FDCWD, q, RENAME_NOREPLACE) != 0)
            return 1;
        int odir = open(argv[3], O_RDONLY | O_DIRECTORY);
        if ((fd = openat(odir, "r3", O_WRONLY | O_CREAT, 0600)) < 0 ||
            close(fd) != 0)
            return 1;
        int cdir = open(argv[2], O_RDONLY | O_DIRECTORY);
        if (renameat(odir, "r3", cdir, "renameat.bin") != 0)
            return 1;
        /* 5. a tracked fd closed behind the shim's back (raw syscall), its
         * number then reused for a file outside: nothing may be sent for
         * either. */
        if ((fd = open("raw.bin", O_WRONLY | O_CREAT, 0600)) < 0)
            return 1;
        syscall(SYS_close, fd);
        snprintf(p, sizeof p, "%s/reuse.bin", argv[3]);
        int fd2 = open(p, O_WRONLY | O_CREAT, 0600);
        if (fd2 != fd || close(fd2) != 0)
            return 1;
        close(odir);
        close(cdir);
        say("done");
        return 0;
    }
    if (strcmp(mode, "api") == 0) {
        /* Found by name, as a program not linked with libckpt would. */
        struct ckpt_ctx;
        struct ckpt_ctx *(*get)(void) =
            (struct ckpt_ctx * (*)(void)) dlsym(RTLD_DEFAULT, "ckpt_preload_ctx");
        int (*should)(struct ckpt_ctx *) =
            (int (*)(struct ckpt_ctx *))dlsym(RTLD_DEFAULT, "ckpt_should_save");
        if (!get || !should)
            return 6;
        struct ckpt_ctx *ctx = get();
        if (!ctx || get() != ctx)
            return 7; /* one global context */
        printf("before=%d\n", should(ctx));
        raise(sig_from_env());
        int after = should(ctx); /* in order: arguments are not */
        int take = take_request();
        int cleared = should(ctx);
        printf("after=%d take=%d cleared=%d\n", after, take, !cleared);
        return 0;
    }
    if (strcmp(mode, "loop") == 0 && argc == 4) {
        int n = atoi(argv[3]);
        char path[4096];
        snprintf(path, sizeof path, "%s/loop.bin", argv[2]);
        for (int i = 0; i < n; i++) {
            int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
            if (fd < 0 || write(fd, "x", 1) != 1 || close(fd) != 0)
                return 1;
        }
        say("done");
        return 0;
    }
    return 2;
}
