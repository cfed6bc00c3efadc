/* runlog.c -- see runlog.h. */
#include "base/runlog.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#define HELD_MAX 32 /* library error messages kept while held */

static int g_json;
static int g_verbosity;
static int g_tty = -1;     /* stderr is a terminal (-1: not looked yet) */
static int g_color;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
/* the status line as drawn (g_lock) */
static char g_status[512];
static size_t g_status_len;
/* library errors kept while held (g_lock) */
static int g_hold;
static char *g_held[HELD_MAX];
static size_t g_nheld, g_dropped;
static char *g_final; /* the command's error line, once said */

static void lib_flush(const char *final_msg, int keep);
static int about(const char *msg, const char *final_msg);

static void look_at_terminal(void)
{
    const char *term = getenv("TERM");
    if (g_tty >= 0)
        return;
    g_tty = isatty(STDERR_FILENO);
    /* https://no-color.org: present and not empty disables colour */
    g_color = g_tty && !(getenv("NO_COLOR") && *getenv("NO_COLOR")) &&
              !(term && strcmp(term, "dumb") == 0);
}

void log_setup(int json, int verbosity)
{
    g_json = json;
    g_verbosity = verbosity;
    look_at_terminal();
}

int log_json_enabled(void) { return g_json; }
int log_quiet(void) { return g_verbosity < 0; }

int log_interactive(void)
{
    look_at_terminal();
    return g_tty && !g_json && g_verbosity >= 0;
}

char *iso_time(int64_t unix_ms, char *buf, size_t n)
{
    time_t t = (time_t)(unix_ms / 1000);
    struct tm tm;
    size_t len;
    gmtime_r(&t, &tm);
    len = strftime(buf, n, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + len, n - len, ".%03dZ", (int)((unix_ms % 1000 + 1000) % 1000));
    return buf;
}

char *ago(int64_t t_ms, int64_t now, char *buf, size_t n)
{
    int64_t d = now - t_ms, a = d < 0 ? -d : d;
    char v[32];
    if (a < 2000) {
        snprintf(buf, n, "just now");
        return buf;
    }
    if (a < 120000)
        snprintf(v, sizeof v, "%lld s", (long long)(a / 1000));
    else if (a < 2 * 3600000LL)
        snprintf(v, sizeof v, "%lld min", (long long)(a / 60000));
    else if (a < 2 * 86400000LL)
        snprintf(v, sizeof v, "%lld h", (long long)(a / 3600000));
    else
        snprintf(v, sizeof v, "%lld days", (long long)(a / 86400000));
    snprintf(buf, n, d >= 0 ? "%s ago" : "in %s", v);
    return buf;
}

/* ---- the status line (g_lock held) ------------------------------------------ */

static void status_erase(void)
{
    if (!g_status_len)
        return;
    fprintf(stderr, "\r%*s\r", (int)g_status_len, "");
}

static void status_draw(void)
{
    if (g_status[0])
        fputs(g_status, stderr);
    g_status_len = strlen(g_status);
    fflush(stderr);
}

void log_status(const char *text)
{
    struct winsize ws;
    size_t width = 80;

    if (!log_interactive())
        return;
    if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 10)
        width = ws.ws_col;
    pthread_mutex_lock(&g_lock);
    status_erase();
    /* never wider than the terminal: a wrapped line cannot be redrawn */
    snprintf(g_status, sizeof g_status, "%.*s", (int)(width - 1), text ? text : "");
    status_draw();
    pthread_mutex_unlock(&g_lock);
}

/* ---- lines ---------------------------------------------------------------------- */

static const char *level_word(int level)
{
    return level == LOG_WARN ? "warn" : "error";
}

static void put_level(FILE *f, int level)
{
    if (g_color)
        fprintf(f, "%s%s\033[0m", level == LOG_WARN ? "\033[33m" : "\033[1;31m",
                level_word(level));
    else
        fputs(level_word(level), f);
}

/* A line is composed in memory and reaches stderr in one write, so the
 * child's output (same terminal or pipe) never lands inside it. */
static FILE *line_open(char **buf, size_t *len)
{
    FILE *m = open_memstream(buf, len);
    return m ? m : stderr; /* out of memory: piece by piece, as before */
}

static void line_put(FILE *m, char **buf, size_t *len)
{
    if (m == stderr)
        return;
    if (fclose(m) == 0 && *buf) /* fclose sets *buf and *len */
        fwrite(*buf, 1, *len, stderr);
    free(*buf);
}

/* Text value: integers without a fraction, strings quoted only when they
 * hold a space or quote, so lines stay greppable and unambiguous. */
static void put_text_value(FILE *f, const cJSON *v)
{
    if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        if (d == floor(d) && fabs(d) < 9e15)
            fprintf(f, "%.0f", d);
        else
            fprintf(f, "%.2f", d);
    } else if (cJSON_IsString(v)) {
        const char *s = v->valuestring;
        if (*s && !strpbrk(s, " \t\"=\n")) {
            fputs(s, f);
        } else {
            fputc('"', f);
            for (; *s; s++) {
                if (*s == '"' || *s == '\\')
                    fputc('\\', f);
                fputc(*s == '\n' ? ' ' : *s, f);
            }
            fputc('"', f);
        }
    } else if (cJSON_IsBool(v)) {
        fputs(cJSON_IsTrue(v) ? "true" : "false", f);
    } else {
        char *s = cJSON_PrintUnformatted(v);
        fputs(s ? s : "?", f);
        free(s);
    }
}

/* One JSON line: time, event, level first (readers look at the head),
 * then `fields`, then `msg` when given. g_lock held. */
static void put_json(const char *event, int level, const cJSON *fields, const char *msg)
{
    char ts[40];
    const cJSON *it;
    cJSON *o = cJSON_CreateObject();
    char *s = NULL;

    if (o) {
        cJSON_AddStringToObject(o, "time", iso_time(ckpt__now_ms(), ts, sizeof ts));
        cJSON_AddStringToObject(o, "event", event);
        if (level >= LOG_WARN)
            cJSON_AddStringToObject(o, "level", level_word(level));
        for (it = fields ? fields->child : NULL; it; it = it->next)
            cJSON_AddItemToObject(o, it->string ? it->string : "?", cJSON_Duplicate(it, 1));
        if (msg)
            cJSON_AddStringToObject(o, "msg", msg);
        s = cJSON_PrintUnformatted(o);
    }
    fprintf(stderr, "%s\n", s ? s : "{\"event\":\"log-oom\"}");
    free(s);
    cJSON_Delete(o);
}

void log_event(int level, const char *event, const cJSON *fields)
{
    char ts[40];
    const cJSON *it;

    if ((g_verbosity < 0 && level < LOG_WARN) || (g_verbosity < 1 && level < LOG_INFO))
        return;
    look_at_terminal();
    pthread_mutex_lock(&g_lock);
    status_erase();
    if (g_json) {
        put_json(event, level, fields, NULL);
    } else {
        char *buf = NULL;
        size_t len = 0;
        FILE *m = line_open(&buf, &len);
        fprintf(m, "ckptrun: %s %s", iso_time(ckpt__now_ms(), ts, sizeof ts), event);
        if (level >= LOG_WARN) {
            fputs(" level=", m);
            put_level(m, level);
        }
        for (it = fields ? fields->child : NULL; it; it = it->next) {
            fprintf(m, " %s=", it->string ? it->string : "?");
            put_text_value(m, it);
        }
        fputc('\n', m);
        line_put(m, &buf, &len);
    }
    status_draw();
    pthread_mutex_unlock(&g_lock);
}

void log_msg(int level, const char *event, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    cJSON *o = cJSON_CreateObject();

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (o)
        cJSON_AddStringToObject(o, "msg", msg);
    log_event(level, event, o);
    cJSON_Delete(o);
}

void log_error(const char *fmt, ...)
{
    char msg[1536];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* one line, whatever the detail carried */
    for (char *p = msg; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    /* The library's messages this line is about are not said twice, and
     * those that still come (a background job's view of the same failure)
     * are judged against it too. */
    int holding;
    pthread_mutex_lock(&g_lock);
    free(g_final);
    g_final = strdup(msg);
    holding = g_hold;
    pthread_mutex_unlock(&g_lock);
    lib_flush(msg, holding);
    look_at_terminal();
    pthread_mutex_lock(&g_lock);
    status_erase();
    g_status[0] = '\0';
    g_status_len = 0;
    if (g_json) {
        put_json("error", LOG_ERROR, NULL, msg);
    } else {
        char *buf = NULL;
        size_t len = 0;
        FILE *m = line_open(&buf, &len);
        fputs("ckptrun: ", m);
        put_level(m, LOG_ERROR);
        fprintf(m, ": %s\n", msg);
        line_put(m, &buf, &len);
    }
    fflush(stderr);
    pthread_mutex_unlock(&g_lock);
}

void log_result(const char *command, const cJSON *fields, const char *fmt, ...)
{
    char msg[4096]; /* run's last line holds a whole command line */
    va_list ap;
    cJSON *f;

    if (g_verbosity < 0)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    f = fields ? cJSON_Duplicate(fields, 1) : cJSON_CreateObject();
    if (f && !cJSON_GetObjectItemCaseSensitive(f, "command"))
        cJSON_AddStringToObject(f, "command", command);
    pthread_mutex_lock(&g_lock);
    status_erase();
    g_status[0] = '\0';
    g_status_len = 0;
    if (g_json)
        put_json("result", LOG_INFO, f, msg);
    else
        fprintf(stderr, "ckptrun: %s: %s\n", command, msg);
    fflush(stderr);
    pthread_mutex_unlock(&g_lock);
    cJSON_Delete(f);
}

/* ---- the library's messages ---------------------------------------------------------- */

ckpt_log_level log_lib_level(void)
{
    return g_verbosity > 0 ? CKPT_LOG_DEBUG : CKPT_LOG_WARN;
}

static void lib_line(int lv, const char *subject, const char *msg)
{
    cJSON *o = cJSON_CreateObject();
    if (o) {
        cJSON_AddStringToObject(o, "subject", subject ? subject : "");
        cJSON_AddStringToObject(o, "msg", msg ? msg : "");
    }
    log_event(lv, "lib", o);
    cJSON_Delete(o);
}

void log_lib(void *user, ckpt_log_level level, const char *subject, const char *msg)
{
    int lv = level == CKPT_LOG_DEBUG ? LOG_DEBUG
           : level == CKPT_LOG_INFO  ? LOG_INFO
           : level == CKPT_LOG_WARN  ? LOG_WARN : LOG_ERROR;
    (void)user;
    if (lv >= LOG_WARN) {
        int kept = 0;
        pthread_mutex_lock(&g_lock);
        if (g_final && about(msg ? msg : "", g_final)) {
            kept = 1; /* a background job's view of the error already said */
        } else if (g_hold) {
            char *line = NULL;
            if (g_nheld < HELD_MAX &&
                asprintf(&line, "%s\t%s", subject ? subject : "", msg ? msg : "") >= 0)
                g_held[g_nheld++] = line;
            else
                g_dropped++;
            kept = 1;
        }
        pthread_mutex_unlock(&g_lock);
        if (kept)
            return;
    }
    /* Library info chatter is debug for the CLI: ckptrun logs its own
     * commit lines with the figures users want. */
    lib_line(lv == LOG_INFO ? LOG_DEBUG : lv, subject, msg);
}

void log_lib_hold(void)
{
    pthread_mutex_lock(&g_lock);
    g_hold = 1;
    pthread_mutex_unlock(&g_lock);
}

/* Whether a library message is about what `final_msg` says: contained in
 * it, or ending in the same detail (its last ": " segment, curl's text,
 * "expected X, found Y") when that is specific enough. */
static int about(const char *msg, const char *final_msg)
{
    const char *seg = final_msg ? strrchr(final_msg, ':') : NULL;
    seg = seg && strlen(seg + 1) >= 12 ? seg + 2 : NULL;
    return final_msg && (strstr(final_msg, msg) || (seg && strstr(msg, seg)));
}

/* Print the held messages not about `final_msg` (NULL: the command's
 * error, if it logged one); keep holding when `keep`. */
static void lib_flush(const char *final_msg, int keep)
{
    char *held[HELD_MAX], *last = NULL;
    size_t n, dropped;

    pthread_mutex_lock(&g_lock);
    n = g_nheld;
    dropped = g_dropped;
    memcpy(held, g_held, n * sizeof held[0]);
    g_nheld = g_dropped = 0;
    g_hold = keep;
    if (!final_msg && g_final)
        final_msg = last = strdup(g_final);
    pthread_mutex_unlock(&g_lock);
    for (size_t i = 0; i < n; i++) {
        char *tab = strchr(held[i], '\t');
        const char *msg = tab ? tab + 1 : held[i];
        if (tab)
            *tab = '\0';
        if (!about(msg, final_msg))
            lib_line(LOG_WARN, held[i], msg);
        free(held[i]);
    }
    if (dropped)
        log_msg(LOG_WARN, "lib", "%zu more library messages not shown", dropped);
    free(last);
}

void log_lib_release(const char *final_msg)
{
    lib_flush(final_msg, 0);
}
