/*
 * vault_json: the strict JSON reader of minted values' answers
 * (vault_json.h). Whole grammar checked in one pass, depth bounded.
 */
#include <stdbool.h>
#include <string.h>

#include "util/text.h"
#include "vault/vault_json.h"

void
vault_json_ws(struct vault_json *r)
{
	while (r->p < r->end &&
	    (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
		r->p++;
}

static int
hex4(struct vault_json *r, unsigned *out)
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
esc_u(struct vault_json *r, uint8_t *o, size_t *n)
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
int
vault_json_str(struct vault_json *r, const char **s, size_t *len)
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
int
vault_json_num(struct vault_json *r, uint64_t *v)
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
lit(struct vault_json *r, const char *w)
{
	size_t n = strlen(w);

	if ((size_t)(r->end - r->p) < n || memcmp(r->p, w, n) != 0)
		return -1;
	r->p += n;
	return 0;
}

/* Any value, checked and skipped (strings decoded and dropped). */
int
vault_json_skip(struct vault_json *r, unsigned depth, unsigned max_depth)
{
	const char *s;
	size_t n, mark = r->off;
	uint64_t v;
	int rc;

	if (depth > max_depth || r->p >= r->end)
		return -1;
	switch (*r->p) {
	case '"':
		rc = vault_json_str(r, &s, &n);
		memset(r->buf + mark, 0, r->off - mark);
		r->off = mark;
		return rc;
	case '{':
	case '[': {
		uint8_t close = *r->p == '{' ? '}' : ']';
		bool obj = close == '}';

		r->p++;
		vault_json_ws(r);
		if (r->p < r->end && *r->p == close) {
			r->p++;
			return 0;
		}
		for (;;) {
			vault_json_ws(r);
			if (obj) {
				if (r->p >= r->end || *r->p != '"' ||
				    vault_json_skip(r, depth + 1, max_depth) ==
				        -1)
					return -1;
				vault_json_ws(r);
				if (r->p >= r->end || *r->p++ != ':')
					return -1;
				vault_json_ws(r);
			}
			if (vault_json_skip(r, depth + 1, max_depth) == -1)
				return -1;
			vault_json_ws(r);
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
		return vault_json_num(r, &v);
	}
}

int
vault_json_object(struct vault_json *r, vault_json_member_fn fn, void *arg)
{
	char key[VAULT_JSON_KEY_MAX + 1];
	const char *k;
	size_t kn, mark;

	vault_json_ws(r);
	if (r->p >= r->end || *r->p++ != '{')
		return -1;
	vault_json_ws(r);
	if (r->p < r->end && *r->p == '}') {
		r->p++;
		return 0;
	}
	for (;;) {
		vault_json_ws(r);
		mark = r->off;
		if (vault_json_str(r, &k, &kn) == -1)
			return -1;
		memcpy(
		    key, k, kn < VAULT_JSON_KEY_MAX ? kn : VAULT_JSON_KEY_MAX);
		key[kn < VAULT_JSON_KEY_MAX ? kn : VAULT_JSON_KEY_MAX] = '\0';
		memset(r->buf + mark, 0, kn);
		r->off = mark;
		vault_json_ws(r);
		if (r->p >= r->end || *r->p++ != ':')
			return -1;
		vault_json_ws(r);
		if (fn(arg, r, key, kn) == -1)
			return -1;
		vault_json_ws(r);
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
