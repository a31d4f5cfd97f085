/*
 * policy_ybuf: the growing output buffer of the canonical YAML writers
 * (policy_serial.c for rules and settings, policy_cred_yaml.c for
 * credentials and bindings). Calls nothing of the policy library.
 */
#ifndef EGRESSD_POLICY_YBUF_H
#define EGRESSD_POLICY_YBUF_H

#include <stdbool.h>
#include <stddef.h>

struct ybuf {
	char *s;
	size_t n, cap;
	bool oom; /* set once an allocation failed; later writes do nothing */
};

void yb_printf(struct ybuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* A double-quoted scalar (JSON-compatible escapes). */
void yb_quoted(struct ybuf *b, const char *s);

#endif
