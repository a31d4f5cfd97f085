/*
 * vault_token: the token endpoint's JSON answer (vault_token.h). A small
 * strict JSON reader of its own rather than jansson's: the tokens are
 * decoded straight into the caller's (arena) buffer, never into a heap
 * string freed unwiped, and the whole grammar is checked, every member
 * skipped or kept, in one pass with a bounded depth.
 */
#include <string.h>
#include <strings.h>

#include "util/text.h"
#include "vault/vault_token.h"

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

/* One \u escape (with its low surrogate) as UTF-8 into o (or counted). */
static int
esc_u(struct jr *r, uint8_t *o, size_t *n)
{
	unsigned cp, lo;

	if (hex4(r, &cp) == -1)
		return -1;
	if (cp >= 0xdc00 && cp <= 0xdfff)
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

/*
 * A string at r->p (its opening quote), decoded into r->buf at r->off
 * (*s, *len). The decoded form is never longer than the encoded one, so
 * a buf as long as the body always holds every string.
 */
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
	r->p++;
	for (;;) {
		if (r->p >= r->end || *r->p < 0x20)
			return -1;
		if (*r->p == '"')
			break;
		if (*r->p != '\\') {
			tmp[0] = *r->p++;
			n = 1;
		} else {
			if (++r->p >= r->end)
				return -1;
			if (*r->p == 'u') {
				r->p++;
				if (esc_u(r, tmp, &n) == -1)
					return -1;
			} else if (*r->p != '\0' &&
			    (x = strchr(esc_in, *r->p)) != NULL) {
				tmp[0] = (uint8_t)esc_out[x - esc_in];
				n = 1;
				r->p++;
			} else
				return -1;
		}
		if (r->cap - r->off < n)
			return -1;
		memcpy(r->buf + r->off, tmp, n);
		r->off += n;
	}
	r->p++;
	*s = r->buf + start;
	*len = r->off - start;
	return 0;
}

/* A JSON number (RFC 8259 §6); its integer value in *v when it is a
 * non-negative integer up to 2^31 (else *v = UINT64_MAX). */
static int
num(struct jr *r, uint64_t *v)
{
	const uint8_t *s = r->p;
	bool intg = true;

	*v = 0;
	if (r->p < r->end && *r->p == '-') {
		intg = false;
		r->p++;
	}
	if (r->p >= r->end || *r->p < '0' || *r->p > '9')
		return -1;
	if (*r->p == '0' && r->p + 1 < r->end && r->p[1] >= '0' &&
	    r->p[1] <= '9')
		return -1;
	for (; r->p < r->end && *r->p >= '0' && *r->p <= '9'; r->p++)
		if (*v <= (1ull << 31))
			*v = *v * 10 + (uint64_t)(*r->p - '0');
	if (r->p < r->end && *r->p == '.') {
		intg = false;
		if (++r->p >= r->end || *r->p < '0' || *r->p > '9')
			return -1;
		while (r->p < r->end && *r->p >= '0' && *r->p <= '9')
			r->p++;
	}
	if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
		intg = false;
		if (++r->p < r->end && (*r->p == '+' || *r->p == '-'))
			r->p++;
		if (r->p >= r->end || *r->p < '0' || *r->p > '9')
			return -1;
		while (r->p < r->end && *r->p >= '0' && *r->p <= '9')
			r->p++;
	}
	if (!intg || *v > (1ull << 31) || r->p == s)
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

/* Any value, checked and skipped (strings decoded and dropped). */
static int
skip(struct jr *r, unsigned depth)
{
	const char *s;
	size_t n, mark = r->off;
	uint64_t v;
	int rc;

	if (depth > VAULT_TOKEN_DEPTH_MAX || r->p >= r->end)
		return -1;
	switch (*r->p) {
	case '"':
		rc = str(r, &s, &n);
		memset(r->buf + mark, 0, r->off - mark);
		r->off = mark;
		return rc;
	case '{':
	case '[': {
		uint8_t close = *r->p == '{' ? '}' : ']';
		bool obj = close == '}';

		r->p++;
		ws(r);
		if (r->p < r->end && *r->p == close) {
			r->p++;
			return 0;
		}
		for (;;) {
			ws(r);
			if (obj) {
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

/* ---- the members ---- */

enum member { M_ACCESS, M_TYPE, M_EXPIRES, M_REFRESH, M_ERROR, M_OTHER };

static enum member
member_of(const char *k, size_t n)
{
	static const char *const names[] = {"access_token", "token_type",
	    "expires_in", "refresh_token", "error"};
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strlen(names[i]) == n && memcmp(k, names[i], n) == 0)
			return (enum member)i;
	return M_OTHER;
}

/* A token: 1..VAULT_TOKEN_MAX bytes of %x21-7E. */
static bool
token_ok(const char *s, size_t n)
{
	size_t i;

	if (n == 0 || n > VAULT_TOKEN_MAX)
		return false;
	for (i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e)
			return false;
	return true;
}

static const char *
error_code(const char *s, size_t n)
{
	static const char *const codes[] = {"invalid_request", "invalid_client",
	    "invalid_grant", "unauthorized_client", "unsupported_grant_type",
	    "invalid_scope"};
	size_t i;

	for (i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
		if (strlen(codes[i]) == n && memcmp(s, codes[i], n) == 0)
			return codes[i];
	return "other";
}

struct seen {
	unsigned bits;
	bool bearer;
	uint64_t expires;
};

/* expires_in: a number, or a string of 1..10 digits. */
static int
member_expires(struct jr *r, struct seen *sn)
{
	const char *s;
	size_t n, i, mark = r->off;

	if (r->p < r->end && *r->p == '"') {
		if (str(r, &s, &n) == -1 || n == 0 || n > 10)
			return -1;
		sn->expires = 0;
		for (i = 0; i < n; i++) {
			if (s[i] < '0' || s[i] > '9')
				return -1;
			sn->expires = sn->expires * 10 + (uint64_t)(s[i] - '0');
		}
		r->off = mark;
	} else if (num(r, &sn->expires) == -1)
		return -1;
	return sn->expires == 0 || sn->expires > (1ull << 31) ? -1 : 0;
}

static int
member(struct jr *r, enum member m, struct vault_token *t, struct seen *sn,
    struct err *e)
{
	const char *s;
	size_t n, mark = r->off;

	if (m != M_OTHER && (sn->bits & 1u << m)) {
		err_set(e, "token response: a member twice");
		return -1;
	}
	if (m != M_OTHER)
		sn->bits |= 1u << m;
	switch (m) {
	case M_EXPIRES:
		if (member_expires(r, sn) == -1) {
			err_set(e,
			    "token response: expires_in is not a "
			    "number of seconds");
			return -1;
		}
		return 0;
	case M_OTHER:
		return skip(r, 1);
	default:
		break;
	}
	if (str(r, &s, &n) == -1)
		return -1;
	if (m == M_TYPE || m == M_ERROR) { /* not kept in buf */
		if (m == M_TYPE)
			sn->bearer = n == 6 && strncasecmp(s, "bearer", 6) == 0;
		else
			t->error = error_code(s, n);
		memset(r->buf + mark, 0, n);
		r->off = mark;
		return 0;
	}
	if (!token_ok(s, n)) {
		err_set(e,
		    "token response: %s is not 1 to %u visible ASCII "
		    "bytes",
		    m == M_ACCESS ? "access_token" : "refresh_token",
		    VAULT_TOKEN_MAX);
		return -1;
	}
	if (m == M_ACCESS) {
		t->access = s;
		t->access_len = n;
	} else {
		t->refresh = s;
		t->refresh_len = n;
	}
	return 0;
}

static int
object(struct jr *r, struct vault_token *t, struct seen *sn, struct err *e)
{
	const char *k;
	size_t kn, mark;

	ws(r);
	if (r->p >= r->end || *r->p++ != '{')
		return -1;
	ws(r);
	if (r->p < r->end && *r->p == '}') {
		r->p++;
		return 0;
	}
	for (;;) {
		ws(r);
		mark = r->off;
		if (str(r, &k, &kn) == -1)
			return -1;
		enum member m = member_of(k, kn);
		r->off = mark; /* the key's bytes are not kept */
		ws(r);
		if (r->p >= r->end || *r->p++ != ':')
			return -1;
		ws(r);
		if (member(r, m, t, sn, e) == -1)
			return -1;
		ws(r);
		if (r->p >= r->end)
			return -1;
		if (*r->p == '}') {
			r->p++;
			return 0;
		}
		if (*r->p++ != ',')
			return -1;
	}
}

int
vault_token_parse(const uint8_t *body, size_t n, char *buf, size_t cap,
    struct vault_token *t, struct err *e)
{
	struct jr r = {body, body + n, buf, 0, cap};
	struct seen sn = {0, false, 0};

	memset(t, 0, sizeof(*t));
	err_clear(e);
	if (n > VAULT_TOKEN_BODY_MAX || cap < n) {
		err_set(e, "token response: body larger than %u bytes",
		    VAULT_TOKEN_BODY_MAX);
		return -1;
	}
	if (object(&r, t, &sn, e) == -1 || (ws(&r), r.p != r.end)) {
		if (e->msg[0] == '\0')
			err_set(e, "token response: not one JSON object");
		goto fail;
	}
	if (t->access == NULL) {
		err_set(e, "token response: no access_token");
		goto fail;
	}
	if (!sn.bearer) {
		err_set(e, "token response: token_type is not Bearer");
		goto fail;
	}
	t->expires_in = !(sn.bits & 1u << M_EXPIRES) ? VAULT_TOKEN_TTL_DEFAULT
	    : sn.expires > VAULT_TOKEN_TTL_MAX       ? VAULT_TOKEN_TTL_MAX
	                                             : (uint32_t)sn.expires;
	return 0;
fail:
	t->access = t->refresh = NULL;
	t->access_len = t->refresh_len = 0;
	return -1;
}
