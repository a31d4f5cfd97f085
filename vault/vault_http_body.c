/*
 * vault_http_body: an http credential source's answer (vault_http_body.h),
 * on the strict JSON reader the token answers share (vault_json.h:
 * bounded depth, strings decoded straight into the caller's buffer,
 * never a heap string freed unwiped).
 */
#include <stdbool.h>
#include <string.h>

#include "vault/vault_http_body.h"
#include "vault/vault_json.h"

/* ttl: a number, or a string of 1..10 digits; at most 2^31. */
static int
member_ttl(struct vault_json *r, struct vault_http_value *out)
{
	const char *s;
	size_t n, i, mark = r->off;
	uint64_t v = 0;

	if (r->p < r->end && *r->p == '"') {
		if (vault_json_str(r, &s, &n) == -1 || n == 0 || n > 10)
			return -1;
		for (i = 0; i < n; i++) {
			if (s[i] < '0' || s[i] > '9')
				return -1;
			v = v * 10 + (uint64_t)(s[i] - '0');
		}
		r->off = mark;
	} else if (vault_json_num(r, &v) == -1)
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

struct body_walk {
	struct vault_http_value *out;
	bool have_val, have_ttl;
};

/* "value" (a string) and "ttl" once each; anything else skipped. */
static int
body_member(void *arg, struct vault_json *r, const char *key, size_t klen)
{
	struct body_walk *w = arg;

	if (klen == 5 && memcmp(key, "value", 5) == 0) {
		if (w->have_val || r->p >= r->end || *r->p != '"' ||
		    vault_json_str(r, &w->out->val, &w->out->len) == -1)
			return -1;
		w->have_val = true;
		return 0;
	}
	if (klen == 3 && memcmp(key, "ttl", 3) == 0) {
		if (w->have_ttl || member_ttl(r, w->out) == -1)
			return -1;
		w->have_ttl = true;
		return 0;
	}
	return vault_json_skip(r, 1, VAULT_HTTP_DEPTH_MAX);
}

static int
object(struct vault_json *r, struct vault_http_value *out, struct err *e)
{
	struct body_walk w = {out, false, false};

	if (vault_json_object(r, body_member, &w) == -1 ||
	    (vault_json_ws(r), r->p != r->end)) {
		err_set(e, "source answer: not the JSON object expected");
		return -1;
	}
	if (!w.have_val) {
		err_set(e, "source answer: no value");
		return -1;
	}
	return 0;
}

int
vault_http_body_parse(const uint8_t *body, size_t n, enum policy_http_format f,
    char *buf, size_t cap, struct vault_http_value *out, struct err *e)
{
	struct vault_json r = {body, body + n, buf, 0, cap};

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
