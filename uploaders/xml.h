/*
 * xml.h -- a small expat front end for the store replies (S3 and Azure XML).
 *
 * The reply is hostile input: documents with a DOCTYPE are refused (no entity
 * tricks), nesting is limited to 16 levels, an element path to 256 bytes and
 * one element's text to 64 KiB; anything beyond is CKPT_E_CORRUPT.
 */
#ifndef CKPT_XML_H
#define CKPT_XML_H
#include <stddef.h>
#include "ckpt.h"

/* Called at each element's end with its path from the root, names joined by
 * '/' without namespaces' prefixes (e.g. "ListBucketResult/Contents/Key"),
 * and its text content (NUL-terminated). Return nonzero to stop (the parse
 * then returns CKPT_E_CORRUPT unless the callback set its own status). */
typedef int (*ckpt_xml_cb)(void *user, const char *path, const char *text,
                           size_t len);

ckpt_status ckpt__xml_parse(const char *doc, size_t len, ckpt_xml_cb cb, void *user);

/* Append `s` escaped for XML text to a malloc'd buffer (*buf, *len, *cap).
 * @return 0, or -1 on allocation failure. */
int ckpt__xml_escape_append(char **buf, size_t *len, size_t *cap, const char *s);

/* Append `s` verbatim (markup). @return 0, or -1 on allocation failure. */
int ckpt__xml_raw_append(char **buf, size_t *len, size_t *cap, const char *s);

/* The text of the first element with exactly `path`, copied into out.
 * @return 1 if found (and it fit). Handy for <Error><Code>. */
int ckpt__xml_find(const char *doc, size_t len, const char *path, char *out, size_t outlen);
#endif
