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
#include "util/utf8.h"

void
yb_printf(struct ybuf *b, const char *fmt, ...)
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
		size_t cap = b->cap ? b->cap : 1024;
		while (cap - b->n <= (size_t)n)
			cap *= 2;
		char *ns = realloc(b->s, cap);
		if (ns == NULL) {
			b->oom = true;
			return;
		}
		b->s = ns;
		b->cap = cap;
	}
}

void
yb_quoted(struct ybuf *b, const char *s)
{
	yb_printf(b, "\"");
	while (*s != '\0') {
		unsigned char c = (unsigned char)*s;
		uint32_t cp;
		size_t k;
		if (c == '"' || c == '\\')
			yb_printf(b, "\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			yb_printf(b, "\\u%04x", c);
		else if (c < 0x80)
			yb_printf(b, "%c", c);
		else if ((k = utf8_decode((const unsigned char *)s,
		              strnlen(s, 4), &cp)) > 0) {
			/* Escaped: YAML folds some code points (NEL, LS, PS). */
			yb_printf(b, cp > 0xffff ? "\\U%08lx" : "\\u%04lx",
			    (unsigned long)cp);
			s += k;
			continue;
		} else
			yb_printf(b, "\\x%02x", c);
		s++;
	}
	yb_printf(b, "\"");
}
