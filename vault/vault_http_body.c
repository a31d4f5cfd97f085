/*
 * vault_http_body: an http credential source's answer (vault_http_body.h).
 * The JSON reader is vault_token.c's (strict, bounded depth, strings
 * decoded straight into the caller's buffer, never a heap string freed
 * unwiped), kept to what this answer needs.
 * TODO: one shared reader for vault_token.c and this file once the
 * githubApp branch (which reads a third answer) has landed.
 */
#include <stdbool.h>
#include <string.h>

#include "util/text.h"
#include "vault/vault_http_body.h"

struct jr {
	const uint8_t *p, *end;
	char *buf; /* decoded strings go here */
	size_t off, cap;
};

static void
ws(struct jr *r)
{
	while (r->p < r->end &&
	    (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
		r->p++;
}

static int
hex4(struct jr *r, unsigned *out)
{
	unsigned v = 0;
	int i, d;

	if (r->end - r->p < 4)
		return -1;
	for (i = 0; i < 4; i++) {
		if ((d = text_hexval(r->p[i])) < 0)
			return -1;
		v = v << 4 | (unsigned)d;
	}
	r->p += 4;
	*out = v;
	return 0;
}

/* One \u escape (with its low surrogate) as UTF-8 into o. */
static int
esc_u(struct jr *r, uint8_t *o, size_t *n)
{
	unsigned cp, lo;

	if (hex4(r, &cp) == -1 || (cp >= 0xdc00 && cp <= 0xdfff))
		return -1;
	if (cp >= 0xd800 && cp <= 0xdbff) {
		if (r->end - r->p < 2 || r->p[0] != '\\' || r->p[1] != 'u')
			return -1;
		r->p += 2;
		if (hex4(r, &lo) == -1 || lo < 0xdc00 || lo > 0xdfff)
			return -1;
		cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
	}
	if (cp < 0x80) {
		o[0] = (uint8_t)cp;
		*n = 1;
	} else if (cp < 0x800) {
		o[0] = (uint8_t)(0xc0 | cp >> 6);
		o[1] = (uint8_t)(0x80 | (cp & 0x3f));
		*n = 2;
	} else if (cp < 0x10000) {
		o[0] = (uint8_t)(0xe0 | cp >> 12);
		o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (uint8_t)(0x80 | (cp & 0x3f));
		*n = 3;
	} else {
		o[0] = (uint8_t)(0xf0 | cp >> 18);
		o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3f));
		o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
		o[3] = (uint8_t)(0x80 | (cp & 0x3f));
		*n = 4;
	}
	return 0;
}

/* A string at r->p, decoded into r->buf at r->off (never longer than
 * its encoding: a buf as long as the body holds every string). */
static int
str(struct jr *r, const char **s, size_t *len)
{
	static const char esc_in[] = "\"\\/bfnrt",
	                  esc_out[] = "\"\\/\b\f\n\r\t";
	size_t start = r->off, n;
	uint8_t tmp[4];
	const char *x;

	if (r->p >= r->end || *r->p != '"')
		return -1;
	for (r->p++;; r->off += n) {
		if (r->p >= r->end || *r->p < 0x20)
			return -1;
		if (*r->p == '"')
			break;
		n = 1;
		if (*r->p != '\\')
			tmp[0] = *r->p++;
		else if (++r->p < r->end && *r->p == 'u') {
			r->p++;
			if (esc_u(r, tmp, &n) == -1)
				return -1;
		} else if (r->p < r->end && *r->p != '\0' &&
		    (x = strchr(esc_in, *r->p)) != NULL) {
			tmp[0] = (uint8_t)esc_out[x - esc_in];
			r->p++;
		} else
			return -1;
		if (r->cap - r->off < n)
			return -1;
		memcpy(r->buf + r->off, tmp, n);
	}
	r->p++;
	*s = r->buf + start;
	*len = r->off - start;
	return 0;
}

static bool
digit(const uint8_t *p, const uint8_t *end)
{
	return p < end && *p >= '0' && *p <= '9';
}

/* A JSON number; *v its value when a non-negative integer up to 2^31,
 * else UINT64_MAX. */
static int
num(struct jr *r, uint64_t *v)
{
	bool intg = true;

	*v = 0;
	if (r->p < r->end && *r->p == '-') {
		intg = false;
		r->p++;
	}
	if (!digit(r->p, r->end) || (*r->p == '0' && digit(r->p + 1, r->end)))
		return -1;
	for (; digit(r->p, r->end); r->p++)
		if (*v <= (1ull << 31))
			*v = *v * 10 + (uint64_t)(*r->p - '0');
	if (r->p < r->end && *r->p == '.') {
		intg = false;
		if (!digit(++r->p, r->end))
			return -1;
		while (digit(r->p, r->end))
			r->p++;
	}
	if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
		intg = false;
		if (++r->p < r->end && (*r->p == '+' || *r->p == '-'))
			r->p++;
		if (!digit(r->p, r->end))
			return -1;
		while (digit(r->p, r->end))
			r->p++;
	}
	if (!intg || *v > (1ull << 31))
		*v = UINT64_MAX;
	return 0;
}

static int
lit(struct jr *r, const char *w)
{
	size_t n = strlen(w);

	if ((size_t)(r->end - r->p) < n || memcmp(r->p, w, n) != 0)
		return -1;
	r->p += n;
	return 0;
}

static int skip(struct jr *r, unsigned depth);

/* The members or items of an object or array at r->p, skipped. */
static int
skip_nest(struct jr *r, unsigned depth)
{
	uint8_t close = *r->p == '{' ? '}' : ']';

	r->p++;
	ws(r);
	if (r->p < r->end && *r->p == close) {
		r->p++;
		return 0;
	}
	for (;;) {
		ws(r);
		if (close == '}') {
			if (r->p >= r->end || *r->p != '"' ||
			    skip(r, depth + 1) == -1)
				return -1;
			ws(r);
			if (r->p >= r->end || *r->p++ != ':')
				return -1;
			ws(r);
		}
		if (skip(r, depth + 1) == -1)
			return -1;
		ws(r);
		if (r->p >= r->end)
			return -1;
		if (*r->p == close) {
			r->p++;
			return 0;
		}
		if (*r->p++ != ',')
			return -1;
	}
}

/* Any value, checked and skipped (strings decoded and wiped). */
static int
skip(struct jr *r, unsigned depth)
{
	const char *s;
	size_t n, mark = r->off;
	uint64_t v;
	int rc;

	if (depth > VAULT_HTTP_DEPTH_MAX || r->p >= r->end)
		return -1;
	switch (*r->p) {
	case '"':
		rc = str(r, &s, &n);
		memset(r->buf + mark, 0, r->off - mark);
		r->off = mark;
		return rc;
	case '{':
	case '[':
		return skip_nest(r, depth);
	case 't':
		return lit(r, "true");
	case 'f':
		return lit(r, "false");
	case 'n':
		return lit(r, "null");
	default:
		return num(r, &v);
	}
}

/* ttl: a number, or a string of 1..10 digits; at most 2^31. */
static int
member_ttl(struct jr *r, struct vault_http_value *out)
{
	const char *s;
	size_t n, i, mark = r->off;
	uint64_t v = 0;

	if (r->p < r->end && *r->p == '"') {
		if (str(r, &s, &n) == -1 || n == 0 || n > 10)
			return -1;
		for (i = 0; i < n; i++) {
			if (s[i] < '0' || s[i] > '9')
				return -1;
			v = v * 10 + (uint64_t)(s[i] - '0');
		}
		r->off = mark;
	} else if (num(r, &v) == -1)
		return -1;
	if (v > (1ull << 31))
		return -1;
	out->ttl_s = v == 0 ? 1 : (uint32_t)v;
	return 0;
}

/* The value: 1..POLICY_SECRET_MAX bytes without CR, LF or NUL. */
static bool
value_ok(const char *s, size_t n)
{
	return n > 0 && n <= POLICY_SECRET_MAX && memchr(s, '\r', n) == NULL &&
	    memchr(s, '\n', n) == NULL && memchr(s, '\0', n) == NULL;
}

static int
object(struct jr *r, struct vault_http_value *out, struct err *e)
{
	bool have_val = false, have_ttl = false;
	const char *k;
	size_t kn, mark;

	ws(r);
	if (r->p >= r->end || *r->p++ != '{')
		goto bad;
	ws(r);
	if (r->p < r->end && *r->p == '}') {
		r->p++;
		goto none;
	}
	for (;;) {
		ws(r);
		mark = r->off;
		if (str(r, &k, &kn) == -1)
			goto bad;
		r->off = mark; /* the key is not kept */
		ws(r);
		if (r->p >= r->end || *r->p++ != ':')
			goto bad;
		ws(r);
		if (kn == 5 && memcmp(k, "value", 5) == 0) {
			if (have_val || r->p >= r->end || *r->p != '"' ||
			    str(r, &out->val, &out->len) == -1)
				goto bad;
			have_val = true;
		} else if (kn == 3 && memcmp(k, "ttl", 3) == 0) {
			if (have_ttl || member_ttl(r, out) == -1)
				goto bad;
			have_ttl = true;
		} else if (skip(r, 1) == -1)
			goto bad;
		ws(r);
		if (r->p >= r->end)
			goto bad;
		if (*r->p == '}')
			break;
		if (*r->p++ != ',')
			goto bad;
	}
	r->p++;
	ws(r);
	if (r->p != r->end)
		goto bad;
	if (!have_val)
		goto none;
	return 0;
bad:
	err_set(e, "source answer: not the JSON object expected");
	return -1;
none:
	err_set(e, "source answer: no value");
	return -1;
}

int
vault_http_body_parse(const uint8_t *body, size_t n, enum policy_http_format f,
    char *buf, size_t cap, struct vault_http_value *out, struct err *e)
{
	struct jr r = {body, body + n, buf, 0, cap};

	memset(out, 0, sizeof(*out));
	if (n > VAULT_HTTP_BODY_MAX || cap < n) {
		err_set(e, "source answer: larger than %u bytes",
		    VAULT_HTTP_BODY_MAX);
		return -1;
	}
	if (f == POLICY_HTTP_RAW) {
		if (n > 0 && body[n - 1] == '\n')
			n--;
		if (n > 0 && body[n - 1] == '\r')
			n--;
		memcpy(buf, body, n);
		out->val = buf;
		out->len = n;
	} else if (object(&r, out, e) == -1)
		return -1;
	if (!value_ok(out->val, out->len)) {
		err_set(e,
		    "source answer: the value must be 1 to %u bytes without "
		    "CR, LF or NUL",
		    POLICY_SECRET_MAX);
		return -1;
	}
	return 0;
}
