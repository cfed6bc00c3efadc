/* log.c -- see log.h. */
#include "log.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int g_json;
static int g_verbosity;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

void log_setup(int json, int verbosity)
{
    g_json = json;
    g_verbosity = verbosity;
}

int log_json_enabled(void) { return g_json; }

int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
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

void log_event(int level, const char *event, const cJSON *fields)
{
    char ts[40];
    const cJSON *it;

    if ((g_verbosity < 0 && level < LOG_WARN) || (g_verbosity < 1 && level < LOG_INFO))
        return;
    iso_time(now_ms(), ts, sizeof ts);
    pthread_mutex_lock(&g_lock);
    if (g_json) {
        /* time and event first, for readers that look at the head. */
        cJSON *o = cJSON_CreateObject();
        char *s = NULL;
        if (o) {
            cJSON_AddStringToObject(o, "time", ts);
            cJSON_AddStringToObject(o, "event", event);
            for (it = fields ? fields->child : NULL; it; it = it->next)
                cJSON_AddItemToObject(o, it->string ? it->string : "?",
                                      cJSON_Duplicate(it, 1));
            if (level >= LOG_WARN)
                cJSON_AddStringToObject(o, "level", level == LOG_WARN ? "warn" : "error");
            s = cJSON_PrintUnformatted(o);
        }
        fprintf(stderr, "%s\n", s ? s : "{\"event\":\"log-oom\"}");
        free(s);
        cJSON_Delete(o);
    } else {
        fprintf(stderr, "ckptrun: %s %s", ts, event);
        if (level >= LOG_WARN)
            fprintf(stderr, " level=%s", level == LOG_WARN ? "warn" : "error");
        for (it = fields ? fields->child : NULL; it; it = it->next) {
            fprintf(stderr, " %s=", it->string ? it->string : "?");
            put_text_value(stderr, it);
        }
        fputc('\n', stderr);
    }
    fflush(stderr);
    pthread_mutex_unlock(&g_lock);
}

void log_msg(int level, const char *event, const char *fmt, ...)
{
    char msg[1024];
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
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&g_lock);
    if (g_json) {
        char ts[40];
        cJSON *o = cJSON_CreateObject();
        char *s = NULL;
        if (o) {
            cJSON_AddStringToObject(o, "time", iso_time(now_ms(), ts, sizeof ts));
            cJSON_AddStringToObject(o, "event", "error");
            cJSON_AddStringToObject(o, "msg", msg);
            s = cJSON_PrintUnformatted(o);
        }
        fprintf(stderr, "%s\n", s ? s : msg);
        free(s);
        cJSON_Delete(o);
    } else {
        fprintf(stderr, "ckptrun: %s\n", msg);
    }
    fflush(stderr);
    pthread_mutex_unlock(&g_lock);
}

ckpt_log_level log_lib_level(void)
{
    return g_verbosity > 0 ? CKPT_LOG_DEBUG : CKPT_LOG_WARN;
}

void log_lib(void *user, ckpt_log_level level, const char *subject, const char *msg)
{
    cJSON *o = cJSON_CreateObject();
    int lv = level == CKPT_LOG_DEBUG ? LOG_DEBUG
           : level == CKPT_LOG_INFO  ? LOG_INFO
           : level == CKPT_LOG_WARN  ? LOG_WARN : LOG_ERROR;
    (void)user;
    if (o) {
        cJSON_AddStringToObject(o, "subject", subject ? subject : "");
        cJSON_AddStringToObject(o, "msg", msg ? msg : "");
    }
    /* Library info chatter is debug for the CLI: ckptrun logs its own
     * commit lines with the figures users want. */
    log_event(lv == LOG_INFO ? LOG_DEBUG : lv, "lib", o);
    cJSON_Delete(o);
}
