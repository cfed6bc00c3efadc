/*
 * objops.c -- the store operations of the object-store core (objstore.h),
 * the same for every HTTP object store; the dialect supplies the wire
 * details.
 */
#include "objops.h"
#include "objstore.h"
#include "backend.h"
#include "digest.h"
#include "xml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OBJ(st) ((struct ckpt_obj *)(st))

/* ---- put ----------------------------------------------------------------- */

/* A conditional put was refused after an earlier attempt of it failed
 * without a definite answer (reset, timeout, 5xx): that attempt may have
 * been applied, and the refusal is then our own write seen again. If the
 * object now holds exactly our bytes (its digest says so), the put
 * succeeded. On a refusal the original error detail stands. */
static ckpt_status settle_ambiguous(struct ckpt_obj *o, const char *fk, const void *buf,
                                    size_t len, char *etag_out)
{
    ckpt_status st = CKPT_E_PRECONDITION;
    struct ckpt_http_resp resp;
    char herr[CKPT_ERR_MAX];
    struct ckpt_obj_rq rq = { .method = "HEAD", .key = fk };

    if (ckpt__obj_call(o, &rq, &resp, herr) == CKPT_OK &&
        o->d->holds(&resp, buf ? buf : "", len) == 1) {
        st = CKPT_OK;
        ckpt__obj_etag(o, &resp, etag_out);
        ckpt__obj_log(o, CKPT_LOG_INFO,
                      "%s: conditional put of %s had landed before a "
                      "failed attempt",
                      o->tag, fk);
    }
    ckpt__http_resp_free(&resp);
    return st;
}

static ckpt_status put_part(struct ckpt_obj *o, struct ckpt_obj_parts *mp, size_t i,
                            const void *buf, size_t n, char *err)
{
    ckpt_status st;
    struct ckpt_http_resp resp;
    char *query = o->d->part_query(mp, i);

    if (!query)
        return CKPT_E_NOMEM;
    {
        struct ckpt_obj_rq rq = { .method = "PUT", .key = mp->key, .query = query,
                                  .body = buf, .len = n };
        st = ckpt__obj_call(o, &rq, &resp, err);
    }
    if (st == CKPT_OK && o->d->multipart->part_etag &&
        !ckpt__http_header(&resp, "ETag", mp->tags[i], CKPT_ETAG_MAX)) {
        st = CKPT_E_CORRUPT;
        ckpt__seterr(err, "%s multipart: part %zu without ETag", o->tag, i + 1);
    }
    ckpt__http_resp_free(&resp);
    free(query);
    return st;
}

/* The request that ends an upload: the list of its parts (struct
 * ckpt_obj_multipart says how it is written). */
static ckpt_status end_parts(struct ckpt_obj *o, struct ckpt_obj_parts *mp, const void *buf,
                             size_t len, const struct ckpt_put_opts *opts, char *etag_out,
                             char *err)
{
    const struct ckpt_obj_multipart *m = o->d->multipart;
    ckpt_status st = CKPT_E_NOMEM;
    struct ckpt_http_resp resp;
    char *xml = NULL, *query = NULL, num[32], md5[25];
    char extra[CKPT_OBJ_LINE_MAX], cond[CKPT_OBJ_LINE_MAX];
    const char *hdrs[2];
    size_t xlen = 0, xcap = 0, nh = 0, i;
    int bad = ckpt__xml_raw_append(&xml, &xlen, &xcap, m->list_open);

    memset(&resp, 0, sizeof(resp));
    for (i = 0; i < mp->n && !bad; i++) {
        snprintf(num, sizeof(num), "%zu", i + 1);
        bad = ckpt__xml_raw_append(&xml, &xlen, &xcap, m->item_open) ||
              (m->number_close && (ckpt__xml_raw_append(&xml, &xlen, &xcap, num) ||
                                   ckpt__xml_raw_append(&xml, &xlen, &xcap, m->number_close))) ||
              ckpt__xml_escape_append(&xml, &xlen, &xcap, mp->tags[i]) ||
              ckpt__xml_raw_append(&xml, &xlen, &xcap, m->item_close);
    }
    if (bad || ckpt__xml_raw_append(&xml, &xlen, &xcap, m->list_close) ||
        asprintf(&query, "%s%s", m->end_query, mp->id ? mp->id : "") < 0) {
        query = NULL;
        goto out;
    }
    if (m->md5_header) {
        /* the whole object's digest, so later GETs can be checked */
        ckpt__md5_base64(buf, len, md5);
        snprintf(extra, sizeof(extra), "%s: %s", m->md5_header, md5);
        hdrs[nh++] = extra;
    }
    if (o->d->cond_header(o, opts, cond, sizeof(cond)))
        hdrs[nh++] = cond;
    {
        struct ckpt_obj_rq rq = { .method = m->end_method, .key = mp->key, .query = query,
                                  .hdrs = hdrs, .nhdrs = nh, .body = xml, .len = xlen,
                                  .body_error_check = m->end_check };
        st = ckpt__obj_call(o, &rq, &resp, err);
    }
    if (st != CKPT_OK || !etag_out)
        goto out;
    if (!m->etag_path) {
        ckpt__obj_etag(o, &resp, etag_out);
        goto out;
    }
    etag_out[0] = '\0';
    if (resp.body)
        ckpt__xml_find(resp.body, resp.len, m->etag_path, etag_out, CKPT_ETAG_MAX);
    if (o->d->etag_header)
        ckpt__http_header(&resp, o->d->etag_header, etag_out, CKPT_ETAG_MAX);
out:
    ckpt__http_resp_free(&resp);
    free(xml);
    free(query);
    return st;
}

/* Objects above part_min go up in parts, sequentially in the caller's
 * thread (callers bring the parallelism); a begun upload that fails is
 * aborted where the service keeps parts. */
static ckpt_status put_parts(struct ckpt_obj *o, const char *fk, const uint8_t *buf,
                             size_t len, const struct ckpt_put_opts *opts, char *etag_out,
                             char *err)
{
    const struct ckpt_obj_dialect *d = o->d;
    ckpt_status st = CKPT_OK;
    struct ckpt_obj_parts mp;
    size_t part = o->part_size, i;

    memset(&mp, 0, sizeof(mp));
    mp.key = fk;
    /* Grow the part size for very large objects. */
    if ((len + part - 1) / part > d->multipart->max_parts)
        part = (len + d->multipart->max_parts - 1) / d->multipart->max_parts;
    mp.n = (len + part - 1) / part;
    mp.tags = calloc(mp.n, sizeof(*mp.tags));
    if (!mp.tags) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    if (d->parts_begin) {
        st = d->parts_begin(o, &mp, err);
        if (st != CKPT_OK)
            goto out;
    }
    for (i = 0; i < mp.n && st == CKPT_OK; i++) {
        size_t off = i * part, n = len - off < part ? len - off : part;
        st = put_part(o, &mp, i, buf + off, n, err);
    }
    if (st == CKPT_OK)
        st = end_parts(o, &mp, buf, len, opts, etag_out, err);
    if (st != CKPT_OK && d->parts_abort)
        d->parts_abort(o, &mp);
out:
    free(mp.tags);
    free(mp.id);
    return st;
}

ckpt_status ckpt__obj_put(struct ckpt_store *st_, const char *key, const void *buf, size_t len,
                          const struct ckpt_put_opts *opts, char *etag_out, char *err)
{
    struct ckpt_obj *o = OBJ(st_);
    static const struct ckpt_put_opts plain = { CKPT_PUT_PLAIN, NULL, 0 };
    ckpt_status st;
    struct ckpt_http_resp resp;
    char extra[4][CKPT_OBJ_LINE_MAX], cond[CKPT_OBJ_LINE_MAX], *fk = NULL;
    const char *hdrs[5];
    size_t nh, i;
    int ambiguous = 0;

    memset(&resp, 0, sizeof(resp));
    if (!opts)
        opts = &plain;
    st = ckpt__store_prefixed_key(o->prefix, key, &fk, err);
    if (st != CKPT_OK)
        goto out;
    if (opts->cond == CKPT_PUT_IF_MATCH && (!opts->if_match || !*opts->if_match)) {
        st = CKPT_E_INVAL;
        ckpt__seterr(err, "If-Match put without an etag");
        goto out;
    }
    if (len > o->part_min) {
        st = put_parts(o, fk, buf, len, opts, etag_out, err);
        goto out;
    }
    nh = o->d->put_headers(o, extra);
    for (i = 0; i < nh; i++)
        hdrs[i] = extra[i];
    if (o->d->cond_header(o, opts, cond, sizeof(cond)))
        hdrs[nh++] = cond;
    {
        struct ckpt_obj_rq rq = { .method = "PUT", .key = fk, .hdrs = hdrs, .nhdrs = nh,
                                  .body = buf ? buf : "", .len = len,
                                  .ambiguous = &ambiguous };
        st = ckpt__obj_call(o, &rq, &resp, err);
    }
    if (st == CKPT_OK)
        ckpt__obj_etag(o, &resp, etag_out);
    else if (st == CKPT_E_PRECONDITION && ambiguous && o->verify)
        st = settle_ambiguous(o, fk, buf, len, etag_out);
out:
    ckpt__http_resp_free(&resp);
    free(fk);
    return st;
}

/* ---- get, head ------------------------------------------------------------ */

ckpt_status ckpt__obj_get(struct ckpt_store *st_, const char *key, size_t max_len, unsigned flags,
                          void **buf_out, size_t *len_out, char *etag_out, char *err)
{
    struct ckpt_obj *o = OBJ(st_);
    ckpt_status st;
    struct ckpt_http_resp resp;
    char *fk = NULL;

    memset(&resp, 0, sizeof(resp));
    *buf_out = NULL;
    *len_out = 0;
    st = ckpt__store_prefixed_key(o->prefix, key, &fk, err);
    if (st != CKPT_OK)
        goto out;
    {
        /* Error replies are small; a body bigger than max_len is refused
         * rather than buffered. */
        struct ckpt_obj_rq rq = { .method = "GET", .key = fk,
                                  .max_body = max_len ? max_len : 1,
                                  .digest_check = o->verify &&
                                                  !(flags & CKPT_GET_SELF_CHECKED) };
        st = ckpt__obj_call(o, &rq, &resp, err);
    }
    if (st != CKPT_OK)
        goto out;
    if (resp.body_overflow) {
        st = CKPT_E_CORRUPT;
        ckpt__seterr(err, "%s %s/%s: object larger than %zu bytes", o->tag, o->container, fk,
                     max_len);
        goto out;
    }
    ckpt__obj_etag(o, &resp, etag_out);
    st = ckpt__http_resp_take_body(&resp, buf_out, len_out);
out:
    ckpt__http_resp_free(&resp);
    free(fk);
    return st;
}

ckpt_status ckpt__obj_get_range(struct ckpt_store *st_, const char *key, uint64_t off, size_t len,
                                unsigned flags, void *dst, const struct ckpt_range_watch *watch,
                                char *err)
{
    struct ckpt_obj *o = OBJ(st_);
    ckpt_status st;
    struct ckpt_http_resp resp;
    char *fk = NULL, range[80];
    const char *hdrs[1] = { range };

    (void)flags; /* a range has no digest of its own: the caller verifies */
    memset(&resp, 0, sizeof(resp));
    if (len == 0)
        return CKPT_E_INVAL;
    st = ckpt__store_prefixed_key(o->prefix, key, &fk, err);
    if (st != CKPT_OK)
        goto out;
    snprintf(range, sizeof(range), "%s: bytes=%llu-%llu", o->d->range_header,
             (unsigned long long)off, (unsigned long long)(off + len - 1));
    {
        struct ckpt_obj_rq rq = { .method = "GET", .key = fk, .hdrs = hdrs, .nhdrs = 1,
                                  .max_body = len, .dst = dst, .watch = watch };
        st = ckpt__obj_call(o, &rq, &resp, err);
    }
    if (st != CKPT_OK)
        goto out;
    /* 206 with exactly the bytes asked for; a server that ignored the range
     * (200, the whole object) or cut it short is refused, not trusted. */
    if (resp.status != 206 || resp.body_overflow) {
        st = CKPT_E_CORRUPT;
        ckpt__seterr(err, "%s %s/%s: range %llu+%zu answered with HTTP %ld%s", o->tag, o->container,
                     fk, (unsigned long long)off, len, resp.status,
                     resp.body_overflow ? " and more bytes" : "");
        goto out;
    }
    if (resp.len != len) {
        st = CKPT_E_CORRUPT;
        ckpt__seterr(err, "%s %s/%s: range %llu+%zu: %zu bytes came back", o->tag, o->container, fk,
                     (unsigned long long)off, len, resp.len);
    }
out:
    ckpt__http_resp_free(&resp);
    free(fk);
    return st;
}

ckpt_status ckpt__obj_head(struct ckpt_store *st_, const char *key, uint64_t *size, char *etag_out,
                           char *err)
{
    struct ckpt_obj *o = OBJ(st_);
    ckpt_status st;
    struct ckpt_http_resp resp;
    char *fk = NULL, cl[64];

    memset(&resp, 0, sizeof(resp));
    st = ckpt__store_prefixed_key(o->prefix, key, &fk, err);
    if (st != CKPT_OK)
        goto out;
    {
        struct ckpt_obj_rq rq = { .method = "HEAD", .key = fk };
        st = ckpt__obj_call(o, &rq, &resp, err);
    }
    if (st != CKPT_OK)
        goto out;
    if (size)
        *size =
            ckpt__http_header(&resp, "Content-Length", cl, sizeof(cl)) ? strtoull(cl, NULL, 10) : 0;
    ckpt__obj_etag(o, &resp, etag_out);
out:
    ckpt__http_resp_free(&resp);
    free(fk);
    return st;
}

/* ---- list ------------------------------------------------------------------ */

struct list_state {
    char entry[256], key[256], size[256], mtime[256], next[256], truncated[256];
    const struct ckpt_obj_listing *l;
    const char *prefix;
    size_t plen;
    ckpt_list_cb cb;
    void *user;
    int stopped;
    int more;                 /* IsTruncated */
    char token[2048];
    char name[2048];
    uint64_t bytes;
    int64_t mtime_ms;
};

static int list_cb(void *u, const char *path, const char *text, size_t len)
{
    struct list_state *ls = u;

    if (strcmp(path, ls->key) == 0) {
        snprintf(ls->name, sizeof(ls->name), "%s", len < sizeof(ls->name) ? text : "");
    } else if (strcmp(path, ls->size) == 0) {
        ls->bytes = strtoull(text, NULL, 10);
    } else if (strcmp(path, ls->mtime) == 0) {
        int64_t t = ls->l->time_s(text);
        ls->mtime_ms = t > 0 ? t * 1000 : 0;
    } else if (strcmp(path, ls->entry) == 0) {
        if (ls->name[0] && strncmp(ls->name, ls->prefix, ls->plen) == 0 &&
            ls->name[ls->plen]) {
            struct ckpt_obj_info oi = { ls->name + ls->plen, ls->bytes, ls->mtime_ms };
            if (ls->cb(ls->user, &oi)) {
                ls->stopped = 1;
                return 1;
            }
        }
        ls->name[0] = '\0';
        ls->bytes = 0;
        ls->mtime_ms = 0;
    } else if (strcmp(path, ls->truncated) == 0) {
        ls->more = strcmp(text, "true") == 0;
    } else if (strcmp(path, ls->next) == 0) {
        if (len >= sizeof(ls->token))
            return 1;
        memcpy(ls->token, text, len + 1);
    }
    return 0;
}

static void list_init(struct list_state *ls, const struct ckpt_obj *o)
{
    const struct ckpt_obj_listing *l = o->d->listing;

    ls->l = l;
    ls->prefix = o->prefix;
    ls->plen = strlen(o->prefix);
    snprintf(ls->entry, sizeof(ls->entry), "%s/%s", l->root, l->entry);
    snprintf(ls->key, sizeof(ls->key), "%s/%s/%s", l->root, l->entry, l->key);
    snprintf(ls->size, sizeof(ls->size), "%s/%s/%s", l->root, l->entry, l->size);
    snprintf(ls->mtime, sizeof(ls->mtime), "%s/%s/%s", l->root, l->entry, l->mtime);
    snprintf(ls->next, sizeof(ls->next), "%s/%s", l->root, l->next);
    /* no such element: pages follow while a token is given */
    snprintf(ls->truncated, sizeof(ls->truncated), "%s%s%s", l->truncated ? l->root : "",
             l->truncated ? "/" : "", l->truncated ? l->truncated : "");
}

ckpt_status ckpt__obj_list(struct ckpt_store *st_, const char *prefix, ckpt_list_cb cb, void *user,
                           char *err)
{
    struct ckpt_obj *o = OBJ(st_);
    const struct ckpt_obj_listing *l = o->d->listing;
    ckpt_status st = CKPT_OK;
    struct ckpt_http_resp resp;
    struct list_state ls;
    char *fp = NULL, *fp_enc = NULL, *tok_enc = NULL, *query = NULL;

    memset(&resp, 0, sizeof(resp));
    memset(&ls, 0, sizeof(ls));
    list_init(&ls, o);
    ls.cb = cb;
    ls.user = user;
    if (asprintf(&fp, "%s%s", o->prefix, prefix ? prefix : "") < 0) {
        fp = NULL;
        st = CKPT_E_NOMEM;
        goto out;
    }
    fp_enc = ckpt__uri_encode(fp, strlen(fp), 0);
    if (!fp_enc) {
        st = CKPT_E_NOMEM;
        goto out;
    }
    for (;;) {
        int more;
        free(query);
        query = NULL;
        free(tok_enc);
        tok_enc = NULL;
        if (ls.token[0] && !(tok_enc = ckpt__uri_encode(ls.token, strlen(ls.token), 0))) {
            st = CKPT_E_NOMEM;
            goto out;
        }
        if (asprintf(&query, "%s&prefix=%s&%s=%u%s%s%s%s", l->query, fp_enc, l->page_param,
                     o->page_size, tok_enc ? "&" : "", tok_enc ? l->token_param : "",
                     tok_enc ? "=" : "", tok_enc ? tok_enc : "") < 0) {
            query = NULL;
            st = CKPT_E_NOMEM;
            goto out;
        }
        {
            struct ckpt_obj_rq rq = { .method = "GET", .query = query,
                                      .max_body = l->max_body };
            st = ckpt__obj_call(o, &rq, &resp, err);
        }
        if (st != CKPT_OK)
            goto out;
        ls.more = 0;
        ls.token[0] = '\0';
        st = ckpt__xml_parse(resp.body, resp.len, list_cb, &ls);
        ckpt__http_resp_free(&resp);
        if (ls.stopped) {
            st = CKPT_OK;
            goto out;
        }
        if (st != CKPT_OK) {
            ckpt__seterr(err, "%s list %s: malformed reply", o->tag, fp);
            goto out;
        }
        more = l->truncated ? ls.more : ls.token[0] != '\0';
        if (!more)
            break;
        if (!ls.token[0]) {
            st = CKPT_E_CORRUPT;
            ckpt__seterr(err, "%s list %s: truncated page without a continuation token", o->tag,
                         fp);
            goto out;
        }
    }
out:
    ckpt__http_resp_free(&resp);
    free(fp);
    free(fp_enc);
    free(tok_enc);
    free(query);
    return st;
}

/* ---- delete, barrier -------------------------------------------------------- */

static ckpt_status del_one(struct ckpt_obj *o, const char *key, char *err)
{
    ckpt_status st;
    struct ckpt_http_resp resp;
    char *fk = NULL;

    if (asprintf(&fk, "%s%s", o->prefix, key) < 0)
        return CKPT_E_NOMEM;
    {
        struct ckpt_obj_rq rq = { .method = "DELETE", .key = fk };
        st = ckpt__obj_call(o, &rq, &resp, err);
    }
    if (st == CKPT_E_NOENT)
        st = CKPT_OK;
    ckpt__http_resp_free(&resp);
    free(fk);
    return st;
}

ckpt_status ckpt__obj_del(struct ckpt_store *st_, const char *const *keys, size_t n, char *err)
{
    struct ckpt_obj *o = OBJ(st_);
    const struct ckpt_obj_dialect *d = o->d;
    ckpt_status st = CKPT_OK;
    size_t i;

    for (i = 0; i < n; i++) {
        if (!keys[i] || !ckpt_key_valid(keys[i])) {
            ckpt__seterr(err, "invalid key");
            return CKPT_E_INVAL;
        }
    }
    if (!d->del_batch) {
        for (i = 0; i < n && st == CKPT_OK; i++)
            st = del_one(o, keys[i], err);
        return st;
    }
    for (i = 0; i < n && st == CKPT_OK; i += d->del_batch_max)
        st = d->del_batch(o, keys + i, n - i < d->del_batch_max ? n - i : d->del_batch_max,
                          err);
    return st;
}

ckpt_status ckpt__obj_barrier(struct ckpt_store *st_, char *err)
{
    (void)st_;
    (void)err;
    /* Every put is durable when it returns: nothing is deferred. */
    return CKPT_OK;
}

uint64_t ckpt__obj_sent(struct ckpt_store *st_)
{
    /* the transport counts every request body: puts, their parts and
     * retries (taken back when they fail) */
    return ckpt__http_sent(OBJ(st_)->http);
}
