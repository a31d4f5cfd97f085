/*
 * policy_ybuf: the growing output buffer of the canonical YAML writers
 * (policy_serial.c for rules and settings, policy_cred_yaml.c for
 * credentials and bindings). Calls nothing of the policy library.
 */
#ifndef EGRESSD_POLICY_YBUF_H
#define EGRESSD_POLICY_YBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ybuf {
	char *s;
	size_t n, cap;
	bool oom; /* set once an allocation failed; later writes do nothing */
};

void policy_ybuf_printf(struct ybuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* A double-quoted scalar (JSON-compatible escapes). */
void policy_ybuf_quoted(struct ybuf *b, const char *s);
/* "      key: \"s\"\n" — an optional key of a binding's auth block (the
 * six-space indent the writers give it); nothing when s is NULL. */
void policy_ybuf_auth_key(struct ybuf *b, const char *key, const char *s);
/* n raw bytes (kept NUL-terminated). */
void policy_ybuf_put(struct ybuf *b, const void *p, size_t n);
/* A credential value as a double-quoted scalar, escaped without any
 * printf-style function. */
void policy_ybuf_quoted_secret(struct ybuf *b, const uint8_t *v, size_t n);
/* Wipes and frees the buffer (it may hold a credential value). */
void policy_ybuf_free(struct ybuf *b);

#endif
