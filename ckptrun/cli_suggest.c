/*
 * cli_suggest.c -- "did you mean": what a mistyped subcommand or option of
 * ckptrun's command line resembles (cli.h), from the tables of cli.c and
 * the one edit distance of parse.c.
 */
#include "cli.h"
#include "base/parse.h"
#include "cli_suggest.h"

#include <stdlib.h>
#include <string.h>

const char *cli_suggest(const char *word)
{
    /* Words other tools use for the same thing (rclone, restic, git). */
    static const struct { const char *word, *is; } alias[] = {
        { "list", "ls" }, { "snapshots", "ls" }, { "version", "--version" },
        { "help", "--help" }, { "check", "verify" }, { "fsck", "verify" },
        { "prune", "gc" }, { "forget", "gc" }, { "backup", "save" }, { "push", "save" },
        { "commit", "save" }, { "get", "restore" }, { "pull", "restore" },
        { "info", "status" }, { "stat", "status" }, { "resume", "recover" },
        { "supervise", "run" }, { "exec", "run" },
    };
    const char *names[CMD__COUNT];
    size_t best;

    for (size_t i = 0; i < sizeof alias / sizeof alias[0]; i++)
        if (strcmp(word, alias[i].word) == 0)
            return alias[i].is;
    for (int i = 0; i < CMD__COUNT; i++)
        names[i] = cli_cmds[i].name;
    return suggest_closest(word, names, CMD__COUNT, &best, 1) ? names[best] : NULL;
}

/* Append the options at idx[0..n) to buf: "--a, --b or --c", or with
 * `more` (others left out) "--a, --b, --c, ...". */
static void join_opts(char *buf, size_t size, const size_t *idx, size_t n, int more)
{
    size_t len = strlen(buf);
    for (size_t i = 0; i < n && len < size; i++) {
        const char *sep = i == 0 ? "" : i + 1 == n && !more ? " or " : ", ";
        snprintf(buf + len, size - len, "%s--%s", sep, cli_opts[idx[i]].name);
        len += strlen(buf + len);
    }
    if (more && len < size)
        snprintf(buf + len, size - len, ", ...");
}

int cli_suggest_option(const char *arg, int cmd, char *buf, size_t size)
{
    const char **names = NULL;
    size_t idx[3], n = 0, wl, dashes = strspn(arg, "-");
    int rc = 0, other = 0;
    char word[80];

    buf[0] = '\0';
    wl = strcspn(arg + dashes, "=");
    if (dashes == 0 || dashes > 2 || wl == 0 || wl >= sizeof word)
        goto out;
    memcpy(word, arg + dashes, wl);
    word[wl] = '\0';
    if (dashes == 2) {
        /* getopt_long takes an unambiguous prefix: one it refused is either
         * a prefix of several options or no option at all */
        size_t all = 0;
        for (size_t i = 0; i < cli_nopts; i++)
            if (strncmp(cli_opts[i].name, word, wl) == 0 && (cli_opts[i].cmds & CMDBIT(cmd)) &&
                all++ < 3)
                idx[n++] = i;
        if (all > 1) {
            snprintf(buf, size, "it could be ");
            join_opts(buf, size, idx, n, all > n);
            rc = 2;
            goto out;
        }
        n = 0;
    }
    if (!(names = calloc(cli_nopts, sizeof *names)))
        goto out;
    /* the options of this command first, then any (getopt accepts them all) */
    for (other = 0; other < 2 && n == 0; other++) {
        for (size_t i = 0; i < cli_nopts; i++)
            names[i] = other || (cli_opts[i].cmds & CMDBIT(cmd)) ? cli_opts[i].name : NULL;
        n = suggest_closest(word, names, cli_nopts, idx, 3);
        /* a single dash before a whole long option's name ("-store") */
        for (size_t i = 0; i < cli_nopts && dashes == 1 && n == 0; i++)
            if (names[i] && strcmp(names[i], word) == 0)
                idx[n++] = i;
    }
    other--; /* the pass that found them */
    if (n == 0 || (dashes == 1 && wl < 2))
        goto out;
    snprintf(buf, size, "did you mean ");
    join_opts(buf, size, idx, n, 0);
    strncat(buf, "?", size - strlen(buf) - 1);
    if (other) {
        /* an option of other commands: say which takes it */
        int c = 0;
        while (c < CMD__COUNT && !(cli_opts[idx[0]].cmds & CMDBIT(c)))
            c++;
        if (c < CMD__COUNT && strlen(buf) < size)
            snprintf(buf + strlen(buf), size - strlen(buf), " (an option of ckptrun %s)",
                     cli_cmds[c].name);
    }
    if (dashes == 1)
        strncat(buf, " (long options take two dashes)", size - strlen(buf) - 1);
    rc = 1;
out:
    free(names);
    return rc;
}
