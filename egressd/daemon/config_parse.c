/*
 * config_parse: the value parsers every settings file of the daemon
 * shares (config.c, config_compat.c): booleans, numbers, ports, lists.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "egressd/daemon/config.h"

void
config_strlist_clear(struct config_strlist *l)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

int
config_parse_bool(const char *s, bool *out, const char *what, struct err *e)
{
	if (strcasecmp(s, "1") == 0 || strcasecmp(s, "true") == 0 ||
	    strcasecmp(s, "yes") == 0 || strcasecmp(s, "on") == 0)
		*out = true;
	else if (strcasecmp(s, "0") == 0 || strcasecmp(s, "false") == 0 ||
	    strcasecmp(s, "no") == 0 || strcasecmp(s, "off") == 0 || *s == '\0')
		*out = false;
	else {
		err_set(
		    e, "%s: \"%.64s\" is not a boolean (true/false)", what, s);
		return -1;
	}
	return 0;
}

int
config_parse_uint(const char *s, unsigned long long min, unsigned long long max,
    unsigned long long *out, const char *what, struct err *e)
{
	char *end;
	unsigned long long v;

	errno = 0;
	if (*s == '\0' || *s == '-' || *s == '+' || *s == ' ') {
		err_set(e, "%s: \"%.64s\" is not a number", what, s);
		return -1;
	}
	v = strtoull(s, &end, 0);
	if (errno != 0 || *end != '\0') {
		err_set(e, "%s: \"%.64s\" is not a number", what, s);
		return -1;
	}
	if (v < min || v > max) {
		err_set(e, "%s: %llu is out of range %llu..%llu", what, v, min,
		    max);
		return -1;
	}
	*out = v;
	return 0;
}

/* Splits s on commas and blanks; empty items are skipped. */
int
config_split(
    const char *s, struct config_strlist *out, const char *what, struct err *e)
{
	struct config_strlist l = {NULL, 0};
	const char *p = s;

	while (*p != '\0') {
		size_t n;
		while (*p == ',' || *p == ' ' || *p == '\t')
			p++;
		n = strcspn(p, ", \t");
		if (n == 0)
			break;
		if (l.n == CONFIG_LIST_MAX) {
			err_set(e, "%s: more than %d entries", what,
			    CONFIG_LIST_MAX);
			goto fail;
		}
		char **nv = realloc(l.v, (l.n + 1) * sizeof(*nv));
		if (nv == NULL)
			goto oom;
		l.v = nv;
		if ((l.v[l.n] = strndup(p, n)) == NULL)
			goto oom;
		l.n++;
		p += n;
	}
	config_strlist_clear(out);
	*out = l;
	return 0;
oom:
	err_set(e, "%s: out of memory", what);
fail:
	config_strlist_clear(&l);
	return -1;
}

int
config_set_port(uint16_t *dst, const char *s, const char *what, struct err *e)
{
	unsigned long long v;

	if (config_parse_uint(s, 1, 65535, &v, what, e) == -1)
		return -1;
	*dst = (uint16_t)v;
	return 0;
}
