/*
 * policy_ybuf: YAML output buffer (policy_ybuf.h). Non-ASCII is written
 * as escapes so that no reader folds it.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy_ybuf.h"
#include "util/secmem.h"
#include "util/utf8.h"

/*
 * Room for more than need bytes after b->n. The buffer may hold a
 * credential value (policy_cred_yaml): it moves by copy and wipe, never
 * realloc, so no stale copy is left in freed memory.
 */
static bool
yb_grow(struct ybuf *b, size_t need)
{
	size_t cap = b->cap ? b->cap : 1024;
	char *ns;

	if (b->cap - b->n > need)
		return true;
	while (cap - b->n <= need)
		cap *= 2;
	if ((ns = malloc(cap)) == NULL) {
		b->oom = true;
		return false;
	}
	if (b->s != NULL) {
		memcpy(ns, b->s, b->n);
		secmem_wipe(b->s, b->cap);
		free(b->s);
	}
	b->s = ns;
	b->cap = cap;
	return true;
}

void
policy_ybuf_put(struct ybuf *b, const void *p, size_t n)
{
	if (b->oom || !yb_grow(b, n))
		return;
	memcpy(b->s + b->n, p, n);
	b->n += n;
	b->s[b->n] = '\0';
}

void
policy_ybuf_free(struct ybuf *b)
{
	if (b->s != NULL)
		secmem_wipe(b->s, b->cap);
	free(b->s);
	b->s = NULL;
	b->n = b->cap = 0;
}

void
policy_ybuf_printf(struct ybuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->oom)
		return;
	for (;;) {
		size_t room = b->cap - b->n;
		va_start(ap, fmt);
		n = vsnprintf(b->s ? b->s + b->n : NULL, room, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->oom = true;
			return;
		}
		if ((size_t)n < room) {
			b->n += (size_t)n;
			return;
		}
		if (!yb_grow(b, (size_t)n))
			return;
	}
}

void
policy_ybuf_quoted(struct ybuf *b, const char *s)
{
	policy_ybuf_printf(b, "\"");
	while (*s != '\0') {
		unsigned char c = (unsigned char)*s;
		uint32_t cp;
		size_t k;
		if (c == '"' || c == '\\')
			policy_ybuf_printf(b, "\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			policy_ybuf_printf(b, "\\u%04x", c);
		else if (c < 0x80)
			policy_ybuf_printf(b, "%c", c);
		else if ((k = utf8_decode((const unsigned char *)s,
		              strnlen(s, 4), &cp)) > 0) {
			/* Escaped: YAML folds some code points (NEL, LS, PS). */
			policy_ybuf_printf(b,
			    cp > 0xffff ? "\\U%08lx" : "\\u%04lx",
			    (unsigned long)cp);
			s += k;
			continue;
		} else
			policy_ybuf_printf(b, "\\x%02x", c);
		s++;
	}
	policy_ybuf_printf(b, "\"");
}

/* Escapes written byte by byte with policy_ybuf_put: no printf-style function
 * ever sees the value. */
static void
yb_hex(struct ybuf *b, char kind, uint32_t v, unsigned digits)
{
	static const char hex[] = "0123456789abcdef";
	char out[10];
	unsigned i;

	out[0] = '\\';
	out[1] = kind;
	for (i = 0; i < digits; i++)
		out[2 + i] = hex[(v >> (4 * (digits - 1 - i))) & 0xf];
	policy_ybuf_put(b, out, 2 + digits);
}

void
policy_ybuf_quoted_secret(struct ybuf *b, const uint8_t *v, size_t n)
{
	size_t i = 0, k;
	uint32_t cp;

	policy_ybuf_put(b, "\"", 1);
	while (i < n) {
		uint8_t c = v[i];
		if (c == '"' || c == '\\') {
			char esc[2] = {'\\', (char)c};
			policy_ybuf_put(b, esc, 2);
		} else if (c < 0x20 || c == 0x7f)
			yb_hex(b, 'u', c, 4);
		else if (c < 0x80)
			policy_ybuf_put(b, &v[i], 1);
		else if ((k = utf8_decode(v + i, n - i < 4 ? n - i : 4, &cp)) >
		    0) {
			if (cp > 0xffff)
				yb_hex(b, 'U', cp, 8);
			else
				yb_hex(b, 'u', cp, 4);
			i += k;
			continue;
		} else
			yb_hex(b, 'x', c, 2);
		i++;
	}
	policy_ybuf_put(b, "\"", 1);
}

void
policy_ybuf_auth_key(struct ybuf *b, const char *key, const char *s)
{
	if (s == NULL)
		return;
	policy_ybuf_printf(b, "      %s: ", key);
	policy_ybuf_quoted(b, s);
	policy_ybuf_printf(b, "\n");
}
