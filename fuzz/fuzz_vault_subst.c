/*
 * Fuzzes vault_subst(), which rewrites pieces of a sandbox's request
 * (path, query, header values, bodies) with secret values. Input: byte 0
 * picks the binding (bit 3: the passthrough one) and the surface (low
 * bits), byte 1 the bound (0xff: VAULT_SUBST_HEAD_MAX, else 16 * byte), the
 * rest is the piece. Invariants, against a reference written here
 * independently (naive scan, longest placeholder first, snprintf
 * encoders):
 *  - NONE exactly when no placeholder of the surface occurs (on path,
 *    query and form also percent-encoded, byte by byte, or with '+' for
 *    a space in a form); DONE gives
 *    the reference's bytes; TOO_LARGE exactly when they exceed the bound;
 *    REFUSED exactly for a header value the reference fills with CR, LF or
 *    NUL; every failure says why;
 *  - a header value never comes out holding CR, LF or NUL;
 *  - what the redactor makes of a result holds no value in the surface's
 *    encoding (an origin echoing the piece leaks nothing).
 */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_check.h"
#include "policy/policy.h"
#include "vault/vault.h"

#define VAL_K "a/b c+d~e\"f\\g\th&i=j\xc3\xa9"
#define VAL_P "plain-P"
#define FZ_PIECE_MAX (64u << 10)

static const char pol[] =
    "defaultAction: deny\n"
    "egress:\n"
    "  - {action: allow, target: api.example.com}\n"
    "  - {action: allow, target: pass.example.org}\n"
    "credentials:\n"
    "  - {name: k, source: {type: inline, value: \"a/b c+d~e\\\"f\\\\g\\th&"
    "i=j\xc3\xa9\"}}\n"
    "  - {name: p, source: {type: inline, value: plain-P}}\n"
    "bindings:\n"
    "  - name: api\n"
    "    match: {hosts: [api.example.com]}\n"
    "    auth:\n"
    "      type: bearer\n"
    "      credential: p\n"
    "      substitutions:\n"
    "        - {credential: k, placeholder: PH_K, in: [path, query, header, "
    "body]}\n"
    "        - {credential: p, placeholder: PH_K_LONG, in: [header, body]}\n"
    "        - {credential: p, placeholder: HDRONLY, in: [header]}\n"
    "  - name: pass\n"
    "    match: {hosts: [pass.example.org]}\n"
    "    auth:\n"
    "      type: passthrough\n"
    "      substitutions:\n"
    "        - {credential: p, placeholder: '{{P}}', in: [header, query]}\n";

/* The reference's view of the bindings, longest placeholder first. */
struct ref_sub {
	const char *ph, *val;
	unsigned in;
};
static const struct ref_sub api_subs[] = {
    {"PH_K_LONG", VAL_P, POLICY_SUBST_HEADER | POLICY_SUBST_BODY},
    {"HDRONLY", VAL_P, POLICY_SUBST_HEADER},
    {"PH_K", VAL_K,
        POLICY_SUBST_PATH | POLICY_SUBST_QUERY | POLICY_SUBST_HEADER |
            POLICY_SUBST_BODY},
};
static const struct ref_sub pass_subs[] = {
    {"{{P}}", VAL_P, POLICY_SUBST_HEADER | POLICY_SUBST_QUERY},
};

static const enum vault_surface surfaces[] = {VAULT_SURFACE_PATH,
    VAULT_SURFACE_QUERY, VAULT_SURFACE_HEADER, VAULT_SURFACE_JSON,
    VAULT_SURFACE_FORM, VAULT_SURFACE_NONE};
static const unsigned surface_bits[] = {POLICY_SUBST_PATH, POLICY_SUBST_QUERY,
    POLICY_SUBST_HEADER, POLICY_SUBST_BODY, POLICY_SUBST_BODY, 0};

struct buf {
	char *p;
	size_t n, cap;
};

static void
put(struct buf *b, const char *s, size_t n)
{
	if (b->n + n + 1 > b->cap) {
		b->cap = (b->n + n + 1) * 2;
		b->p = realloc(b->p, b->cap);
		check(b->p != NULL);
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
}

/* The value encoded for surface s, the way the contract describes it. */
static void
ref_encode(struct buf *b, enum vault_surface s, const char *v)
{
	char t[8];

	for (; *v != '\0'; v++) {
		unsigned char c = (unsigned char)*v;
		bool unres = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		    (c >= '0' && c <= '9') || strchr("-._~", c) != NULL;

		if (s == VAULT_SURFACE_HEADER ||
		    (s == VAULT_SURFACE_JSON && c >= 0x20 && c != '"' &&
		        c != '\\') ||
		    (s != VAULT_SURFACE_JSON && unres))
			put(b, v, 1);
		else if (s == VAULT_SURFACE_FORM && c == ' ')
			put(b, "+", 1);
		else if (s == VAULT_SURFACE_JSON && (c == '"' || c == '\\')) {
			put(b, "\\", 1);
			put(b, v, 1);
		} else if (s == VAULT_SURFACE_JSON && c == '\t')
			put(b, "\\t", 2);
		else if (s == VAULT_SURFACE_JSON)
			put(b, t, (size_t)snprintf(t, sizeof(t), "\\u%04x", c));
		else
			put(b, t, (size_t)snprintf(t, sizeof(t), "%%%02X", c));
	}
}

/* One input byte at in[0..n) as the surface's decoder reads it: the byte,
 * or on path, query and form a %XX escape (strtoul over a copy), or a
 * form's '+' as a space, whichever equals want; how many input bytes that
 * took, 0 when none does. */
static size_t
ref_byte(enum vault_surface s, const uint8_t *in, size_t n, char want)
{
	bool pct = s == VAULT_SURFACE_PATH || s == VAULT_SURFACE_QUERY ||
	    s == VAULT_SURFACE_FORM;
	char hex[3] = {0, 0, 0}, *end;

	if (n == 0)
		return 0;
	if (pct && in[0] == '%' && n >= 3 && isxdigit(in[1]) &&
	    isxdigit(in[2])) {
		hex[0] = (char)in[1];
		hex[1] = (char)in[2];
		if ((unsigned char)strtoul(hex, &end, 16) ==
		    (unsigned char)want)
			return 3;
	}
	if ((char)in[0] == want)
		return 1;
	if (s == VAULT_SURFACE_FORM && in[0] == '+' && want == ' ')
		return 1;
	return 0;
}

static size_t
ref_subst(struct buf *b, const struct ref_sub *subs, size_t nsubs, unsigned bit,
    enum vault_surface s, const uint8_t *in, size_t n)
{
	size_t i = 0, k, hits = 0, j, at, step;

	while (i < n) {
		for (k = 0; k < nsubs; k++) {
			const char *ph = subs[k].ph;

			if (!(subs[k].in & bit))
				continue;
			for (j = 0, at = i; ph[j] != '\0'; j++, at += step)
				if ((step = ref_byte(
				         s, in + at, n - at, ph[j])) == 0)
					break;
			if (ph[j] == '\0')
				break;
		}
		if (k == nsubs) {
			put(b, (const char *)in + i, 1);
			i++;
			continue;
		}
		ref_encode(b, s, subs[k].val);
		i = at;
		hits++;
	}
	return hits;
}

struct sink {
	struct buf b;
};

static void
sink_emit(void *arg, const uint8_t *p, size_t n)
{
	put(&((struct sink *)arg)->b, (const char *)p, n);
}

static bool
contains(const char *h, size_t hn, const char *needle, size_t nn)
{
	size_t i;

	for (i = 0; nn <= hn && i <= hn - nn; i++)
		if (memcmp(h + i, needle, nn) == 0)
			return true;
	return false;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct vault *v;
	static struct vault_inject api, pass;
	struct vault_req rq = {
	    POLICY_SCHEME_HTTPS, NULL, 0, "GET", 3, "/", 1, NULL, 0};
	const struct vault_inject *vi;
	const struct ref_sub *subs;
	size_t nsubs, hits, max, outlen, i;
	enum vault_surface s;
	unsigned bit, sel;
	struct buf ref = {NULL, 0, 0};
	uint8_t *out;
	enum vault_subst_rc rc;
	struct err e = {""};

	if (v == NULL) {
		struct policy_diag d;
		struct policy *p;

		policy_diag_init(&d);
		p = policy_parse_yaml(pol, strlen(pol), "fuzz", &d);
		check(p != NULL);
		policy_diag_clear(&d);
		check((v = vault_new(p, NULL, &e)) != NULL);
		policy_unref(p);
		rq.host = "api.example.com";
		check(vault_decide(v, &rq, &api, &e) == 0);
		rq.host = "pass.example.org";
		check(vault_decide(v, &rq, &pass, &e) == 0);
		check(api.decision == VAULT_INJECTED &&
		    pass.decision == VAULT_INJECTED);
	}
	if (size < 2 || size - 2 > FZ_PIECE_MAX)
		return 0;
	sel = data[0] & 7u;
	if (sel >= sizeof(surfaces) / sizeof(surfaces[0]))
		sel = 5;
	s = surfaces[sel];
	bit = surface_bits[sel];
	vi = data[0] & 8u ? &pass : &api;
	subs = data[0] & 8u ? pass_subs : api_subs;
	nsubs = data[0] & 8u ? 1 : sizeof(api_subs) / sizeof(api_subs[0]);
	max = data[1] == 0xff ? VAULT_SUBST_HEAD_MAX : 16u * data[1];
	data += 2;
	size -= 2;

	rc = vault_subst(v, vi, s, data, size, max, &out, &outlen, &e);
	hits = ref_subst(&ref, subs, nsubs, bit, s, data, size);
	if (rc != VAULT_SUBST_DONE)
		check(out == NULL && outlen == 0);
	if (rc != VAULT_SUBST_NONE && rc != VAULT_SUBST_DONE)
		check(e.msg[0] != '\0');
	if (hits == 0 || bit == 0) {
		check(rc == VAULT_SUBST_NONE);
		goto out;
	}
	if (ref.n > max) {
		check(rc == VAULT_SUBST_TOO_LARGE);
		goto out;
	}
	if (s == VAULT_SURFACE_HEADER &&
	    (memchr(ref.p, '\r', ref.n) != NULL ||
	        memchr(ref.p, '\n', ref.n) != NULL ||
	        memchr(ref.p, '\0', ref.n) != NULL)) {
		check(rc == VAULT_SUBST_REFUSED);
		goto out;
	}
	check(rc == VAULT_SUBST_DONE);
	check(outlen == ref.n && memcmp(out, ref.p, outlen) == 0);
	{
		struct vault_redactor *r = vault_redactor_new(v);
		struct sink sk = {{NULL, 0, 0}};
		struct buf enc;
		const char *vals[] = {VAL_K, VAL_P};

		check(r != NULL);
		vault_redact_feed(r, out, outlen, sink_emit, &sk);
		vault_redact_finish(r, sink_emit, &sk);
		vault_redactor_free(r);
		check(sk.b.n == outlen);
		for (i = 0; i < 2; i++) {
			enc.p = NULL;
			enc.n = enc.cap = 0;
			ref_encode(&enc, s, vals[i]);
			check(!contains(sk.b.p, sk.b.n, enc.p, enc.n));
			free(enc.p);
		}
		free(sk.b.p);
	}
	vault_subst_free(out, outlen);
out:
	free(ref.p);
	return 0;
}
