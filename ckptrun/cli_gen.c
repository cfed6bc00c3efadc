/*
 * cli_gen.c -- the manual page and the bash and zsh completions, generated
 * from cli.c's table (`ckptrun __generate man|bash|zsh`, cli_generate in
 * cli.h): the build runs the ckptrun it just linked, so none of them can
 * drift from the options ckptrun takes.
 */
#include "cli.h"

#include <stdio.h>
#include <string.h>

/* The subcommands as one shell `case` pattern: run|recover|... */
static void cmd_pattern(FILE *f)
{
    for (int i = 0; i < CMD__COUNT; i++)
        fprintf(f, "%s%s", i ? "|" : "", cli_cmds[i].name);
}

/* ---- manual page ------------------------------------------------------------------ */

/* roff-escape one line of text: backslashes, hyphens (as \-, so options
 * copy and paste), and a leading '.' or '\'' that would be a request. */
static void roff_line(FILE *f, const char *s, size_t n)
{
    if (n && (s[0] == '.' || s[0] == '\''))
        fputs("\\&", f);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\\')
            fputs("\\e", f);
        else if (s[i] == '-')
            fputs("\\-", f);
        else
            fputc(s[i], f);
    }
    fputc('\n', f);
}

static void roff_text(FILE *f, const char *s)
{
    roff_line(f, s, strlen(s));
}

/* Escaped text inside a line (no newline): hyphens, backslashes, quotes. */
static void roff_inline(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '-')
            fputs("\\-", f);
        else if (*s == '\\')
            fputs("\\e", f);
        else if (*s == '"')
            fputs("\\(dq", f);
        else
            fputc(*s, f);
    }
}

/* A command's description: paragraphs (.PP); runs of lines indented by two
 * spaces are kept as they are (.nf/.fi). */
static void roff_paragraphs(FILE *f, const char *text)
{
    const char *p = text;
    int pre = 0, para = 1;
    while (*p) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 0) {
            if (pre) {
                fputs(".fi\n", f);
                pre = 0;
            }
            para = 1;
        } else {
            int indented = n > 2 && p[0] == ' ' && p[1] == ' ';
            if (indented && !pre) {
                fputs(".PP\n.nf\n", f);
                pre = 1;
                para = 0;
            } else if (!indented && pre) {
                fputs(".fi\n", f);
                pre = 0;
                para = 1;
            }
            if (para) {
                fputs(".PP\n", f);
                para = 0;
            }
            roff_line(f, p, n);
        }
        p += n + (e ? 1 : 0);
    }
    if (pre)
        fputs(".fi\n", f);
}

static void roff_opt(FILE *f, const struct cli_opt *o)
{
    fputs(".TP\n", f);
    if (o->short_name)
        fprintf(f, "\\fB\\-%c\\fR, ", o->short_name);
    fputs("\\fB\\-\\-", f);
    roff_inline(f, o->name);
    fputs("\\fR", f);
    if (o->arg)
        fprintf(f, " \\fI%s\\fR", o->arg);
    fputc('\n', f);
    roff_text(f, o->help);
    if (o->env || o->dflt) {
        char extra[300];
        snprintf(extra, sizeof extra, "%s%s%s%s%s%s", o->env ? "Environment: " : "",
                 o->env ? o->env : "", o->env && o->dflt ? ". " : "",
                 o->dflt ? "Default: " : "", o->dflt ? o->dflt : "", ".");
        fputs(".br\n", f);
        roff_text(f, extra);
    }
}

static void gen_man(FILE *f, const char *version)
{
    fprintf(f, ".\\\" ckptrun(1) -- generated from ckptrun/cli.c by `ckptrun __generate man`;\n"
               ".\\\" edit the table there, not this file.\n"
               ".TH CKPTRUN 1 \"\" \"ckpt %s\" \"User Commands\"\n"
               ".SH NAME\nckptrun \\- checkpoint and resume training on spot instances\n"
               ".SH SYNOPSIS\n", version);
    for (int i = 0; i < CMD__COUNT; i++) {
        fprintf(f, ".B ckptrun%s%s\n", i == CMD_RUN ? " [run]" : " ",
                i == CMD_RUN ? "" : cli_cmds[i].name);
        roff_text(f, cli_cmds[i].usage);
        fputs(".br\n", f);
    }
    fputs(".SH DESCRIPTION\n", f);
    roff_text(f, "ckptrun supervises a training command on a spot or preemptible machine "
                 "and keeps its checkpoints in a store (a directory, S3, GCS or Azure Blob); "
                 "it also administers the store. Reference: docs/ckptrun.md.");
    fputs(".SH COMMANDS\n", f);
    for (int i = 0; i < CMD__COUNT; i++) {
        fprintf(f, ".SS \"ckptrun %s ", cli_cmds[i].name);
        roff_inline(f, cli_cmds[i].usage);
        fputs("\"\n", f);
        roff_text(f, cli_cmds[i].summary);
        roff_paragraphs(f, cli_cmds[i].text);
        fputs(".PP\nOptions:\n.RS\n", f);
        for (size_t k = 0; k < cli_nopts; k++)
            if ((cli_opts[k].cmds & CMDBIT(i)) && cli_opts[k].cmds != CMD_ALL)
                roff_opt(f, &cli_opts[k]);
        fputs(".RE\n", f);
        roff_paragraphs(f, cli_cmds[i].exit);
    }
    fputs(".SH COMMON OPTIONS\n", f);
    for (size_t k = 0; k < cli_nopts; k++)
        if (cli_opts[k].cmds == CMD_ALL)
            roff_opt(f, &cli_opts[k]);
    fputs(".SH CONVENTIONS\n", f);
    roff_paragraphs(f, cli_conventions);
    fputs(".SH ENVIRONMENT\n", f);
    roff_text(f, "Each variable is the fallback of the option named; a bad value there is "
                 "configuration (exit 78), the same value on the command line usage (exit 64).");
    for (size_t k = 0; k < cli_nopts; k++) {
        if (!cli_opts[k].env)
            continue;
        fprintf(f, ".TP\n.B %s\n", cli_opts[k].env);
        fputs("\\fB\\-\\-", f);
        roff_inline(f, cli_opts[k].name);
        fputs("\\fR\n", f);
    }
    fputs(".TP\n.B NO_COLOR\nwhen set, no colour on a terminal either\n", f);
    fputs(".SH EXIT STATUS\n", f);
    roff_paragraphs(f, cli_exit_common);
    fputs(".SH SEE ALSO\n", f);
    roff_text(f, "docs/ckptrun.md, docs/doctor.md, docs/recover.md, docs/stores.md and "
                 "docs/FORMAT.md in the ckpt sources; ckpt.h for the library.");
}

/* ---- completions -------------------------------------------------------------------- */

static void gen_bash(FILE *f)
{
    fputs("# bash completion for ckptrun -- generated from ckptrun/cli.c by\n"
          "# `ckptrun __generate bash`; edit the table there, not this file.\n"
          "_ckptrun() {\n"
          "    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n"
          "    local cmd=run i\n"
          "    COMPREPLY=()\n"
          "    if ((COMP_CWORD > 1)); then\n"
          "        case ${COMP_WORDS[1]} in\n"
          "            ", f);
    cmd_pattern(f);
    fputs(") cmd=${COMP_WORDS[1]} ;;\n"
          "        esac\n"
          "    fi\n"
          "    for ((i = 1; i < COMP_CWORD; i++)); do\n"
          "        if [[ ${COMP_WORDS[i]} == -- ]]; then\n"
          "            # the training command and its arguments\n"
          "            if ((i == COMP_CWORD - 1)); then\n"
          "                COMPREPLY=($(compgen -c -- \"$cur\"))\n"
          "            else\n"
          "                COMPREPLY=($(compgen -f -- \"$cur\"))\n"
          "            fi\n"
          "            return 0\n"
          "        fi\n"
          "    done\n"
          "    case $prev in\n", f);
    for (size_t k = 0; k < cli_nopts; k++) {
        const struct cli_opt *o = &cli_opts[k];
        if (!o->arg)
            continue;
        fprintf(f, "        --%s)\n            ", o->name);
        if (!o->values)
            fputs("return 0 ;;\n", f);
        else if (!strcmp(o->values, "@dir"))
            fputs("COMPREPLY=($(compgen -d -- \"$cur\")); return 0 ;;\n", f);
        else if (!strcmp(o->values, "@file"))
            fputs("COMPREPLY=($(compgen -f -- \"$cur\")); return 0 ;;\n", f);
        else
            fprintf(f, "COMPREPLY=($(compgen -W \"%s\" -- \"$cur\")); return 0 ;;\n", o->values);
    }
    fputs("    esac\n"
          "    if [[ $cur == -* ]]; then\n"
          "        case $cmd in\n", f);
    for (int i = 0; i < CMD__COUNT; i++) {
        fprintf(f, "            %s) COMPREPLY=($(compgen -W \"", cli_cmds[i].name);
        for (size_t k = 0, first = 1; k < cli_nopts; k++)
            if (cli_opts[k].cmds & CMDBIT(i)) {
                fprintf(f, "%s--%s", first ? "" : " ", cli_opts[k].name);
                first = 0;
            }
        fputs(i == CMD_RUN || i == CMD_RECOVER ? " --" : "", f);
        fputs("\" -- \"$cur\")) ;;\n", f);
    }
    fputs("        esac\n"
          "        return 0\n"
          "    fi\n"
          "    if ((COMP_CWORD == 1)); then\n"
          "        COMPREPLY=($(compgen -W \"", f);
    for (int i = 0; i < CMD__COUNT; i++)
        fprintf(f, "%s ", cli_cmds[i].name);
    fputs("help\" -- \"$cur\"))\n"
          "        return 0\n"
          "    fi\n"
          "    case $cmd in\n"
          "        save) COMPREPLY=($(compgen -f -- \"$cur\")) ;;\n"
          "        restore) COMPREPLY=($(compgen -d -- \"$cur\")) ;;\n"
          "    esac\n"
          "    return 0\n"
          "}\n"
          "complete -F _ckptrun ckptrun\n", f);
}

/* Text inside a single-quoted zsh word, with `special` characters
 * backslash-quoted for _arguments/_describe: the brackets of an option's
 * explanation, the colons of a message, an action or a _describe entry. */
static void zsh_text(FILE *f, const char *s, const char *special)
{
    for (; *s; s++) {
        if (*s == '\'')
            fputs("'\\''", f);
        else {
            if (*s == '\\' || strchr(special, *s))
                fputc('\\', f);
            fputc(*s, f);
        }
    }
}

static void gen_zsh(FILE *f)
{
    fputs("#compdef ckptrun\n"
          "# zsh completion for ckptrun -- generated from ckptrun/cli.c by\n"
          "# `ckptrun __generate zsh`; edit the table there, not this file.\n"
          "_ckptrun() {\n"
          "  local -a cmds\n"
          "  cmds=(\n", f);
    for (int i = 0; i < CMD__COUNT; i++) {
        fprintf(f, "    '%s:", cli_cmds[i].name);
        zsh_text(f, cli_cmds[i].summary, ":");
        fputs("'\n", f);
    }
    fputs("  )\n"
          "  if (( CURRENT == 2 )) && [[ $words[2] != -* ]]; then\n"
          "    _describe -t commands 'ckptrun command' cmds\n"
          "    _command_names -e\n"
          "    return\n"
          "  fi\n"
          "  local cmd=run\n"
          "  case $words[2] in\n"
          "    ", f);
    cmd_pattern(f);
    fputs(") cmd=$words[2]; shift words; (( CURRENT-- )) ;;\n"
          "  esac\n"
          "  case $cmd in\n", f);
    for (int i = 0; i < CMD__COUNT; i++) {
        fprintf(f, "    %s)\n      _arguments -S \\\n", cli_cmds[i].name);
        for (size_t k = 0; k < cli_nopts; k++) {
            const struct cli_opt *o = &cli_opts[k];
            if (!(o->cmds & CMDBIT(i)))
                continue;
            for (int form = 0; form < (o->short_name ? 2 : 1); form++) {
                if (form == 0)
                    fprintf(f, "        '--%s%s[", o->name, o->arg ? "=" : "");
                else
                    fprintf(f, "        '-%c[", o->short_name);
                zsh_text(f, o->help, "[]");
                fputs("]", f);
                if (o->arg) {
                    fputs(":", f);
                    zsh_text(f, o->arg, ":");
                    fputs(":", f);
                    if (o->values && !strcmp(o->values, "@dir"))
                        fputs("_files -/", f);
                    else if (o->values && !strcmp(o->values, "@file"))
                        fputs("_files", f);
                    else if (o->values) {
                        fputs("(", f);
                        zsh_text(f, o->values, ":");
                        fputs(")", f);
                    }
                }
                fputs("' \\\n", f);
            }
        }
        if (i == CMD_RUN || i == CMD_RECOVER)
            fputs("        '*::training command:_normal'\n", f);
        else if (i == CMD_SAVE)
            fputs("        '*:path:_files'\n", f);
        else if (i == CMD_RESTORE)
            fputs("        ':directory:_files -/'\n", f);
        else
            fputs("        \n", f);
        fputs("      ;;\n", f);
    }
    fputs("  esac\n"
          "}\n"
          "_ckptrun \"$@\"\n", f);
}

int cli_generate(FILE *f, const char *kind, const char *version)
{
    if (!strcmp(kind, "man"))
        gen_man(f, version);
    else if (!strcmp(kind, "bash"))
        gen_bash(f);
    else if (!strcmp(kind, "zsh"))
        gen_zsh(f);
    else
        return -1;
    return 0;
}
