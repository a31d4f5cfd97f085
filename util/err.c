#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/err.h"

void
err_set(struct err *e, const char *fmt, ...)
{
	va_list ap;

	if (e == NULL)
		return;
	va_start(ap, fmt);
	(void)vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
}

void
err_prefix(struct err *e, const char *fmt, ...)
{
	char old[ERR_MSG_MAX], pre[ERR_MSG_MAX];
	va_list ap;

	if (e == NULL)
		return;
	memcpy(old, e->msg, sizeof(old));
	va_start(ap, fmt);
	(void)vsnprintf(pre, sizeof(pre), fmt, ap);
	va_end(ap);
	/* Truncation is intended: the message stays one bounded line. */
	size_t pl = strnlen(pre, sizeof(pre) - 1);
	if (pl > sizeof(e->msg) - 3)
		pl = sizeof(e->msg) - 3;
	memcpy(e->msg, pre, pl);
	memcpy(e->msg + pl, ": ", 2);
	size_t room = sizeof(e->msg) - pl - 3;
	size_t ol = strnlen(old, room);
	memcpy(e->msg + pl + 2, old, ol);
	e->msg[pl + 2 + ol] = '\0';
}

void
err_clear(struct err *e)
{
	if (e != NULL)
		e->msg[0] = '\0';
}
