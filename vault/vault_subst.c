/*
 * vault_subst: placeholder substitutions (vault.h, contract §4). Bytes in,
 * bytes out: the proxy hands a piece of an injected request (the path,
 * the query, a header value, a body) and gets it back with the binding's
 * placeholders replaced by the values, encoded for the surface.
 *
 * Two passes over the piece: the first measures the result (so the bound
 * is checked before anything is allocated), the second writes it. Values
 * are read from the arena and written straight into the result, encoded
 * byte by byte: no value is ever formatted or copied elsewhere.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/text.h"
#include "vault/vault_int.h"

/*
 * The encoding of c for surface s at o (o may be NULL: the length only):
 * the forms vault_redact.c renders (percent upper-case, JSON without
 * "\/"), through its own encoders, so echoes of a substituted piece are
 * masked.
 */
static size_t
enc_byte(enum vault_surface s, uint8_t c, uint8_t *o)
{
	switch (s) {
	case VAULT_SURFACE_PATH:
	case VAULT_SURFACE_QUERY:
		return vault_enc_pct(c, 0, "", o);
	case VAULT_SURFACE_FORM:
		return vault_enc_pct(c, VAULT_PCT_PLUS, "", o);
	case VAULT_SURFACE_JSON:
		return vault_enc_json(c, 0, o);
	case VAULT_SURFACE_HEADER:
	case VAULT_SURFACE_NONE:
		break;
	}
	if (o != NULL)
		o[0] = c;
	return 1;
}

static unsigned
surface_bit(enum vault_surface s)
{
	switch (s) {
	case VAULT_SURFACE_PATH:
		return POLICY_SUBST_PATH;
	case VAULT_SURFACE_QUERY:
		return POLICY_SUBST_QUERY;
	case VAULT_SURFACE_HEADER:
		return POLICY_SUBST_HEADER;
	case VAULT_SURFACE_JSON:
	case VAULT_SURFACE_FORM:
		return POLICY_SUBST_BODY;
	case VAULT_SURFACE_NONE:
		break;
	}
	return 0;
}

/* Surfaces a client percent-encodes: a placeholder's bytes may arrive
 * there as %XX (Python's urlencode writes "{{KEY}}" as
 * "%7B%7BKEY%7D%7D"). */
static bool
pct_surface(enum vault_surface s)
{
	return s == VAULT_SURFACE_PATH || s == VAULT_SURFACE_QUERY ||
	    s == VAULT_SURFACE_FORM;
}

/*
 * How many bytes of p[0..n) spell sub's placeholder on surface s, 0 if
 * they do not. On a percent-encoded surface each placeholder byte may be
 * itself or %XX (hex in either case; an escape that decodes to another
 * byte is not that byte, even when it is '%'), and in a form a space may
 * be '+'. Linear: no backtracking.
 */
static size_t
ph_len_at(const struct vault_sub *sub, enum vault_surface s, const uint8_t *p,
    size_t n)
{
	size_t i = 0, j;

	if (!pct_surface(s))
		return sub->phlen <= n && memcmp(sub->ph, p, sub->phlen) == 0
		    ? sub->phlen
		    : 0;
	for (j = 0; j < sub->phlen; j++) {
		uint8_t want = (uint8_t)sub->ph[j];

		if (i >= n)
			return 0;
		if (p[i] == '%' && n - i >= 3 &&
		    text_hexbyte((const char *)p + i + 1) == want)
			i += 3;
		else if (p[i] == want ||
		    (s == VAULT_SURFACE_FORM && want == ' ' && p[i] == '+'))
			i++;
		else
			return 0;
	}
	return i;
}

/* The substitution of surface s (bit) whose placeholder starts at p (n
 * bytes left), the longest first, and the bytes it spans (*len); NULL if
 * none. */
static const struct vault_sub *
sub_at(const struct vault_bind *vb, enum vault_surface s, unsigned bit,
    const uint8_t *p, size_t n, size_t *len)
{
	size_t i;

	for (i = 0; i < vb->nsubs; i++) {
		const struct vault_sub *sub = &vb->subs[i];

		if ((sub->in & bit) && (*len = ph_len_at(sub, s, p, n)) > 0)
			return sub;
	}
	return NULL;
}

/*
 * One pass: the length of the result (o NULL), or the result written at
 * o. *hits counts the placeholders replaced. Measuring stops encoding
 * values once past max (the caller refuses anything beyond it), so the
 * cost is bounded by n + max whatever the values' lengths.
 */
static size_t
subst_pass(const struct vault_bind *vb, enum vault_surface s, unsigned bit,
    const uint8_t *in, size_t n, size_t max, uint8_t *o, size_t *hits)
{
	uint8_t first[256];
	size_t i = 0, len = 0, k, span = 0;

	memset(first, 0, sizeof(first));
	for (k = 0; k < vb->nsubs; k++)
		if (vb->subs[k].in & bit) {
			first[(uint8_t)vb->subs[k].ph[0]] = 1;
			if (pct_surface(s))
				first['%'] = 1;
			if (s == VAULT_SURFACE_FORM && vb->subs[k].ph[0] == ' ')
				first['+'] = 1;
		}
	*hits = 0;
	while (i < n) {
		const struct vault_sub *sub = first[in[i]]
		    ? sub_at(vb, s, bit, in + i, n - i, &span)
		    : NULL;

		if (sub == NULL) {
			if (o != NULL)
				o[len] = in[i];
			len++;
			i++;
			continue;
		}
		for (k = 0; k < sub->c->len && (o != NULL || len <= max); k++)
			len += enc_byte(s, (uint8_t)sub->c->val[k],
			    o != NULL ? o + len : NULL);
		i += span;
		(*hits)++;
	}
	return len;
}

enum vault_subst_rc
vault_subst(const struct vault *v, const struct vault_inject *vi,
    enum vault_surface s, const void *in, size_t n, size_t max, uint8_t **out,
    size_t *outlen, struct err *e)
{
	const struct vault_bind *vb = vi->bind;
	unsigned bit = surface_bit(s);
	size_t len, hits, i;
	uint8_t *buf;

	(void)v;
	*out = NULL;
	*outlen = 0;
	if (vi->decision != VAULT_INJECTED || vb == NULL || bit == 0 ||
	    !(vi->subst_in & bit) || n == 0)
		return VAULT_SUBST_NONE;
	if (bit == POLICY_SUBST_BODY && n > VAULT_SUBST_BODY_MAX)
		return VAULT_SUBST_NONE;
	len = subst_pass(vb, s, bit, in, n, max, NULL, &hits);
	if (hits == 0)
		return VAULT_SUBST_NONE;
	if (len > max) {
		err_set(e, "placeholder substitution exceeds %zu bytes", max);
		return VAULT_SUBST_TOO_LARGE;
	}
	if ((buf = malloc(len + 1)) == NULL) {
		err_set(e, "out of memory");
		return VAULT_SUBST_NOMEM;
	}
	(void)subst_pass(vb, s, bit, in, n, max, buf, &hits);
	if (s == VAULT_SURFACE_HEADER)
		for (i = 0; i < len; i++)
			if (buf[i] == '\r' || buf[i] == '\n' ||
			    buf[i] == '\0') {
				vault_subst_free(buf, len);
				err_set(e,
				    "a header value would hold CR, LF or NUL "
				    "after placeholder substitution");
				return VAULT_SUBST_REFUSED;
			}
	buf[len] = '\0';
	*out = buf;
	*outlen = len;
	return VAULT_SUBST_DONE;
}

void
vault_subst_free(uint8_t *out, size_t len)
{
	if (out == NULL)
		return;
	secmem_wipe(out, len);
	free(out);
}

static bool
ieq(const char *s, size_t n, const char *lit)
{
	return strlen(lit) == n && strncasecmp(s, lit, n) == 0;
}

enum vault_surface
vault_subst_body_surface(
    const char *ctype, size_t ctype_len, const char *cenc, size_t cenc_len)
{
	const char *semi;
	size_t n;

	if (cenc != NULL) {
		text_trim_ows(&cenc, &cenc_len);
		if (!ieq(cenc, cenc_len, "identity"))
			return VAULT_SURFACE_NONE;
	}
	if (ctype == NULL)
		return VAULT_SURFACE_NONE;
	semi = memchr(ctype, ';', ctype_len);
	n = semi != NULL ? (size_t)(semi - ctype) : ctype_len;
	text_trim_ows(&ctype, &n);
	if (ieq(ctype, n, "application/json"))
		return VAULT_SURFACE_JSON;
	if (ieq(ctype, n, "application/x-www-form-urlencoded"))
		return VAULT_SURFACE_FORM;
	/* application/<subtype>+json (RFC 6839 structured syntax suffix) */
	if (n > 17 && strncasecmp(ctype, "application/", 12) == 0 &&
	    strncasecmp(ctype + n - 5, "+json", 5) == 0 &&
	    memchr(ctype + 12, '/', n - 12) == NULL)
		return VAULT_SURFACE_JSON;
	return VAULT_SURFACE_NONE;
}

bool
vault_subst_header_ok(const char *name, size_t n)
{
	/* contract §4's reserved names, which no injection writes either */
	static const char *const never[] = {"host", "content-length",
	    "content-type", "transfer-encoding", "connection", "upgrade", "te",
	    "trailer", "proxy-authorization", "proxy-authenticate", "forwarded",
	    "x-forwarded-for", "x-forwarded-host", "x-forwarded-proto"};
	size_t i;

	for (i = 0; i < sizeof(never) / sizeof(never[0]); i++)
		if (ieq(name, n, never[i]))
			return false;
	return true;
}
