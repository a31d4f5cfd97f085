/*
 * vault_token: the token endpoint's JSON answer (vault_token.h), read
 * with vault_json.c's strict reader rather than jansson's: the tokens
 * are decoded straight into the caller's (arena) buffer, never into a
 * heap string freed unwiped, and the whole grammar is checked, every
 * member skipped or kept, in one pass with a bounded depth.
 */
#include <string.h>
#include <strings.h>

#include "vault/vault_json.h"
#include "vault/vault_token.h"

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

bool
vault_token_ok(const char *s, size_t n)
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
member_expires(struct vault_json *r, struct seen *sn)
{
	const char *s;
	size_t n, i, mark = r->off;

	if (r->p < r->end && *r->p == '"') {
		if (vault_json_str(r, &s, &n) == -1 || n == 0 || n > 10)
			return -1;
		sn->expires = 0;
		for (i = 0; i < n; i++) {
			if (s[i] < '0' || s[i] > '9')
				return -1;
			sn->expires = sn->expires * 10 + (uint64_t)(s[i] - '0');
		}
		r->off = mark;
	} else if (vault_json_num(r, &sn->expires) == -1)
		return -1;
	return sn->expires == 0 || sn->expires > (1ull << 31) ? -1 : 0;
}

static int
member(struct vault_json *r, enum member m, struct vault_token *t,
    struct seen *sn, struct err *e)
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
		return vault_json_skip(r, 1, VAULT_TOKEN_DEPTH_MAX);
	default:
		break;
	}
	if (vault_json_str(r, &s, &n) == -1)
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
	if (!vault_token_ok(s, n)) {
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

struct token_walk {
	struct vault_token *t;
	struct seen *sn;
	struct err *e;
};

static int
token_member(void *arg, struct vault_json *r, const char *key, size_t klen)
{
	struct token_walk *w = arg;

	return member(r, member_of(key, klen), w->t, w->sn, w->e);
}

int
vault_token_parse(const uint8_t *body, size_t n, char *buf, size_t cap,
    struct vault_token *t, struct err *e)
{
	struct vault_json r = {body, body + n, buf, 0, cap};
	struct seen sn = {0, false, 0};

	memset(t, 0, sizeof(*t));
	err_clear(e);
	if (n > VAULT_TOKEN_BODY_MAX || cap < n) {
		err_set(e, "token response: body larger than %u bytes",
		    VAULT_TOKEN_BODY_MAX);
		return -1;
	}
	struct token_walk w = {t, &sn, e};

	if (vault_json_object(&r, token_member, &w) == -1 ||
	    (vault_json_ws(&r), r.p != r.end)) {
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
