/*
 * xml.c -- expat front end; see xml.h for the limits.
 */
#include "xml.h"

#include <expat.h>
#include <stdlib.h>
#include <string.h>

#define DEPTH_MAX 16
#define PATH_MAX_LEN 256
#define TEXT_MAX (64 * 1024)

struct pstate {
    XML_Parser p;
    ckpt_xml_cb cb;
    void *user;
    char path[PATH_MAX_LEN];
    size_t plen;
    size_t marks[DEPTH_MAX];   /* path length before each open element */
    int depth;
    char *text;
    size_t tlen;
    int bad;
};

static void stop(struct pstate *s)
{
    s->bad = 1;
    XML_StopParser(s->p, XML_FALSE);
}

static void on_start(void *u, const XML_Char *name, const XML_Char **attrs)
{
    struct pstate *s = u;
    const char *local = strrchr(name, ':');
    size_t n;

    (void)attrs;
    if (s->bad)
        return;
    local = local ? local + 1 : name;
    n = strlen(local);
    if (s->depth >= DEPTH_MAX || s->plen + n + 2 > PATH_MAX_LEN) {
        stop(s);
        return;
    }
    s->marks[s->depth++] = s->plen;
    if (s->plen)
        s->path[s->plen++] = '/';
    memcpy(s->path + s->plen, local, n + 1);
    s->plen += n;
    s->tlen = 0;                /* text of the innermost element only */
}

static void on_end(void *u, const XML_Char *name)
{
    struct pstate *s = u;

    (void)name;
    if (s->bad || s->depth == 0)
        return;
    s->text[s->tlen] = '\0';
    if (s->cb(s->user, s->path, s->text, s->tlen)) {
        stop(s);
        return;
    }
    s->tlen = 0;
    s->plen = s->marks[--s->depth];
    s->path[s->plen] = '\0';
}

static void on_text(void *u, const XML_Char *t, int len)
{
    struct pstate *s = u;

    if (s->bad || len < 0)
        return;
    if (s->tlen + (size_t)len > TEXT_MAX) {
        stop(s);
        return;
    }
    memcpy(s->text + s->tlen, t, (size_t)len);
    s->tlen += (size_t)len;
}

static void on_doctype(void *u, const XML_Char *name, const XML_Char *sysid,
                       const XML_Char *pubid, int has_internal)
{
    (void)name; (void)sysid; (void)pubid; (void)has_internal;
    /* Store replies never carry a DTD; one that does is not to be trusted. */
    stop(u);
}

ckpt_status ckpt__xml_parse(const char *doc, size_t len, ckpt_xml_cb cb, void *user)
{
    struct pstate s;
    ckpt_status st = CKPT_OK;

    memset(&s, 0, sizeof(s));
    s.cb = cb;
    s.user = user;
    s.text = malloc(TEXT_MAX + 1);
    s.p = XML_ParserCreate("UTF-8");
    if (!s.text || !s.p) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    XML_SetUserData(s.p, &s);
    XML_SetElementHandler(s.p, on_start, on_end);
    XML_SetCharacterDataHandler(s.p, on_text);
    XML_SetStartDoctypeDeclHandler(s.p, on_doctype);
    if (len > (size_t)0x7fffffff) {
        st = CKPT_E_CORRUPT;
        goto out;
    }
    if (XML_Parse(s.p, doc ? doc : "", (int)len, XML_TRUE) == XML_STATUS_ERROR ||
        s.bad)
        st = CKPT_E_CORRUPT;
out:
    if (s.p)
        XML_ParserFree(s.p);
    free(s.text);
    return st;
}

int ckpt__xml_escape_append(char **buf, size_t *len, size_t *cap, const char *s)
{
    int rc = 0;

    for (; *s; s++) {
        const char *rep = NULL;
        char one[2] = { *s, 0 };
        size_t n;
        switch (*s) {
        case '&': rep = "&amp;"; break;
        case '<': rep = "&lt;"; break;
        case '>': rep = "&gt;"; break;
        case '"': rep = "&quot;"; break;
        case '\'': rep = "&apos;"; break;
        default: rep = one; break;
        }
        n = strlen(rep);
        if (*len + n + 1 > *cap) {
            size_t nc = *cap ? *cap * 2 : 256;
            char *nb;
            while (nc < *len + n + 1)
                nc *= 2;
            nb = realloc(*buf, nc);
            if (!nb) {
                rc = -1;
                goto out;
            }
            *buf = nb;
            *cap = nc;
        }
        memcpy(*buf + *len, rep, n);
        *len += n;
        (*buf)[*len] = '\0';
    }
out:
    return rc;
}

int ckpt__xml_raw_append(char **buf, size_t *len, size_t *cap, const char *s)
{
    size_t n = strlen(s);
    int rc = 0;

    if (*len + n + 1 > *cap) {
        size_t nc = *cap ? *cap * 2 : 256;
        char *nb;
        while (nc < *len + n + 1)
            nc *= 2;
        nb = realloc(*buf, nc);
        if (!nb) {
            rc = -1;
            goto out;
        }
        *buf = nb;
        *cap = nc;
    }
    memcpy(*buf + *len, s, n + 1);
    *len += n;
out:
    return rc;
}

struct find {
    const char *path;
    char *out;
    size_t outlen;
    int found;
};

static int find_cb(void *u, const char *path, const char *text, size_t len)
{
    struct find *f = u;

    if (!f->found && strcmp(path, f->path) == 0 && len + 1 <= f->outlen) {
        memcpy(f->out, text, len + 1);
        f->found = 1;
    }
    return 0;
}

int ckpt__xml_find(const char *doc, size_t len, const char *path, char *out, size_t outlen)
{
    struct find f = { path, out, outlen, 0 };

    if (!doc || !len)
        return 0;
    ckpt__xml_parse(doc, len, find_cb, &f);
    return f.found;
}
