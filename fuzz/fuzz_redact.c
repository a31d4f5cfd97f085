/*
 * Fuzzes the streaming redactor (vault_redact.c) and the header
 * rewriting. The vault holds either a fixed set of values (ASCII with
 * every character the forms escape, UTF-8, a tab, and a basic
 * credential) or one to three values taken from the input; the rest of
 * the input is a response body, fed in pieces cut at fuzz-chosen
 * offsets, with or without a flush after each. The patterns are computed
 * here, from the contract (vault.h), not with the vault's code: the
 * forms (the value, "Bearer " + value, base64 in both alphabets at the
 * three alignments, hex in both cases, five percent-encodings, four JSON
 * escapings; for the basic value also of its decoded "user:password" and
 * password), each whole when its secret part is at most VAULT_PIECE_MIN
 * bytes, else every run of VAULT_PIECE_MIN of that part, and short base64
 * forms with one line break inside. Invariants:
 *  - the output has the input's length and equals a naive reference that
 *    masks every occurrence of every pattern in the whole input with '*';
 *  - no pattern occurs in the output: no run of VAULT_PIECE_MIN bytes of
 *    any form of any value, for any split of any input (no value here
 *    contains '*');
 *  - after each feed at most vault_redact_holdback() bytes are held, and
 *    after a flush the held bytes are a proper prefix of some pattern;
 *  - the same redactor gives the same output for a second stream;
 *  - the in-place interface (vault_redact_scan), in writes of one or two
 *    pieces cut at the same offsets, gives that output too, names every
 *    byte of the caller's once and in order, and never reads a byte again
 *    once it named it (the caller overwrites each at once);
 *  - vault_redact_header returns NULL (length 0) exactly when no pattern
 *    occurs, otherwise the input with each maximal covered run replaced by
 *    "[REDACTED]", and no pattern occurs in it outside those replacements.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_check.h"
#include "policy/policy.h"
#include "vault/vault.h"

#define FZ_BODY_MAX 65536 /* large feeds: many skip windows per piece */
#define FZ_CUTS_MAX 16
#define FZ_VALUES_MAX 3
#define FZ_VALUE_MAX 24
/* The model's patterns and their bytes (the fixed set, with the basic
 * value's decoded forms, is the largest). */
#define FZ_PATS_MAX 65536
#define FZ_POOL_MAX (1u << 20)
#define FZ_FORM_MAX (64 * 6 + 16) /* one form's bytes, at most */

/* The fixed set: the characters every form escapes, UTF-8, a tab; and a
 * basic credential (base64 of "alice:s3cret-pass-42"). */
static const char *const fixed_values[] = {
    "sk-live-4f3c2a1b0e9d8c7b6a5f4e3d2c1b0a99",
    "a/b c+d\"e\\f",
    "p\xc3\xa4ss w\xc3\xb6rd/\xe2\x82\xac",
    "tab\there<&>'=?;:@",
    "ghp_R2D2c3poBB8x",
    "YWxpY2U6czNjcmV0LXBhc3MtNDI=",
};
#define NFIXED (sizeof(fixed_values) / sizeof(fixed_values[0]))
#define FIXED_BASIC 5 /* the one a basic binding uses */

struct pat {
	uint32_t off, len; /* bytes in the model's pool */
};

/* Every pattern the redactor must mask, with a lookup by first two
 * bytes (the reference is naive but must not take minutes). */
struct model {
	uint8_t pool[FZ_POOL_MAX];
	size_t used;
	struct pat pats[FZ_PATS_MAX];
	size_t npats;
	uint32_t order[FZ_PATS_MAX]; /* by key, then index */
	uint32_t start[65537]; /* order[start[k], start[k+1]): key k */
	bool one[256]; /* a pattern of one byte */
};

static const uint8_t *
pat_p(const struct model *m, size_t k)
{
	return m->pool + m->pats[k].off;
}

/* A form being built (its bytes are then copied into the pool). */
struct form {
	uint8_t p[FZ_FORM_MAX];
	size_t n;
};

/* ---- the forms, from the contract ---- */

static void
put(struct form *t, const void *p, size_t n)
{
	check(t->n + n <= sizeof(t->p));
	memcpy(t->p + t->n, p, n);
	t->n += n;
}

static void
put_c(struct form *t, uint8_t c)
{
	put(t, &c, 1);
}

static void
add_pat(struct model *m, const uint8_t *p, size_t n)
{
	check(n > 0 && m->npats < FZ_PATS_MAX && m->used + n <= FZ_POOL_MAX);
	memcpy(m->pool + m->used, p, n);
	m->pats[m->npats].off = (uint32_t)m->used;
	m->pats[m->npats].len = (uint32_t)n;
	m->used += n;
	m->npats++;
}

/* A form whose first pl bytes are fixed text: whole when its secret part
 * is at most VAULT_PIECE_MIN bytes, else every VAULT_PIECE_MIN-byte run
 * of that part, and the fixed text with the first run. */
static void
add_form(struct model *m, const uint8_t *p, size_t n, size_t pl)
{
	size_t i;

	if (n <= pl)
		return;
	if (n - pl <= VAULT_PIECE_MIN) {
		add_pat(m, p, n);
		return;
	}
	/* the fixed text and the first piece: a whole "Bearer v" stays
	 * masked whole */
	if (pl > 0)
		add_pat(m, p, pl + VAULT_PIECE_MIN);
	for (i = pl; i + VAULT_PIECE_MIN <= n; i++)
		add_pat(m, p + i, VAULT_PIECE_MIN);
}

/* p[0..n) with one "\n" or "\r\n" after each of its first n - 1 bytes. */
static void
add_wrapped(struct model *m, const uint8_t *p, size_t n)
{
	static const char *const brk[] = {"\n", "\r\n"};
	struct form t;
	size_t j, k;

	for (k = 0; k < 2; k++)
		for (j = 1; j < n; j++) {
			t.n = 0;
			put(&t, p, j);
			put(&t, brk[k], strlen(brk[k]));
			put(&t, p + j, n - j);
			add_pat(m, t.p, t.n);
		}
}

/*
 * base64 of the value after `align` bytes of a 3-byte group: encode
 * align zero bytes and the value (bit by bit, the tail zero-padded, no
 * '='), keep the characters from the first whose bits are all the
 * value's. det: the characters before the tail.
 */
static void
b64(struct model *m, const uint8_t *v, size_t n, const char *al, size_t align)
{
	struct form t;
	size_t i, bits = 0, k = 0, d0 = (8 * align + 5) / 6, det, j;
	uint32_t acc = 0;

	det = 8 * (align + n) / 6 - d0;
	if (align != 0 && det < VAULT_FORM_MIN)
		return;
	t.n = 0;
	for (i = 0; i < align + n; i++) {
		acc = acc << 8 | (i < align ? 0 : v[i - align]);
		bits += 8;
		while (bits >= 6) {
			if (k++ >= d0)
				put_c(&t, (uint8_t)al[acc >> (bits - 6) & 63]);
			bits -= 6;
		}
	}
	if (bits > 0)
		put_c(&t, (uint8_t)al[acc << (6 - bits) & 63]);
	add_form(m, t.p, t.n, 0);
	/* wrapped: a form shorter than two pieces, whole or each piece,
	 * with a line break in */
	if (t.n <= VAULT_PIECE_MIN)
		add_wrapped(m, t.p, t.n);
	else if (t.n < 2 * VAULT_PIECE_MIN)
		for (j = 0; j + VAULT_PIECE_MIN <= t.n; j++)
			add_wrapped(m, t.p + j, VAULT_PIECE_MIN);
	/* the value inside a longer string: no tail */
	if (t.n > det && det >= VAULT_FORM_MIN && t.n <= VAULT_PIECE_MIN) {
		add_pat(m, t.p, det);
		add_wrapped(m, t.p, det);
	}
}

static void
hex(struct model *m, const uint8_t *v, size_t n, const char *digits)
{
	struct form t;
	size_t i;

	if (2 * n < VAULT_FORM_MIN)
		return;
	t.n = 0;
	for (i = 0; i < n; i++) {
		put_c(&t, (uint8_t)digits[v[i] >> 4]);
		put_c(&t, (uint8_t)digits[v[i] & 15]);
	}
	add_form(m, t.p, t.n, 0);
}

static bool
is_unreserved(uint8_t c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
	    (c >= 'A' && c <= 'Z') || strchr("-._~", c) != NULL;
}

static void
pct(struct form *t, const uint8_t *v, size_t n, bool lower, bool plus,
    const char *keep)
{
	const char *hex = lower ? "0123456789abcdef" : "0123456789ABCDEF";
	size_t i;

	for (i = 0; i < n; i++) {
		if (v[i] != 0 && (is_unreserved(v[i]) || strchr(keep, v[i])))
			put_c(t, v[i]);
		else if (plus && v[i] == ' ')
			put_c(t, '+');
		else {
			put_c(t, '%');
			put_c(t, (uint8_t)hex[v[i] / 16]);
			put_c(t, (uint8_t)hex[v[i] % 16]);
		}
	}
}

/* A well-formed UTF-8 sequence at v (RFC 3629 table 3-7): its length
 * and code point, or 0. */
static size_t
utf8_at(const uint8_t *v, size_t n, uint32_t *cp)
{
	uint8_t c = v[0], lo = 0x80, hi = 0xbf;
	size_t len, i;

	if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4;
	else
		return 0;
	if (c == 0xe0)
		lo = 0xa0;
	if (c == 0xed)
		hi = 0x9f;
	if (c == 0xf0)
		lo = 0x90;
	if (c == 0xf4)
		hi = 0x8f;
	if (n < len || v[1] < lo || v[1] > hi)
		return 0;
	*cp = c & (len == 2 ? 0x1f : len == 3 ? 0x0f : 0x07);
	for (i = 1; i < len; i++) {
		if (i > 1 && (v[i] < 0x80 || v[i] > 0xbf))
			return 0;
		*cp = *cp << 6 | (v[i] & 0x3f);
	}
	return len;
}

/* flags: 1 '/' as "\/", 2 non-ASCII as \uXXXX (surrogate pairs above
 * the BMP), 4 <, >, & as \u00XX. */
static void
json(struct form *t, const uint8_t *v, size_t n, unsigned flags)
{
	/* the short escapes of this form ('/' only with flag 1); every
	 * other control byte, '\n' and '\r' too, is \u00XX */
	static const char *const esc['\\' + 1] = {['"'] = "\\\"",
	    ['\\'] = "\\\\",
	    ['\b'] = "\\b",
	    ['\f'] = "\\f",
	    ['\t'] = "\\t",
	    ['/'] = "\\/"};
	size_t i, k;
	uint32_t cp;
	char x[16];

	for (i = 0; i < n; i++) {
		if ((flags & 2) && v[i] >= 0x80 &&
		    (k = utf8_at(v + i, n - i, &cp)) > 0) {
			if (cp > 0xffff)
				snprintf(x, sizeof(x), "\\u%04x\\u%04x",
				    0xd800 + ((cp - 0x10000) >> 10),
				    0xdc00 + ((cp - 0x10000) & 0x3ff));
			else
				snprintf(x, sizeof(x), "\\u%04x", cp);
			put(t, x, strlen(x));
			i += k - 1;
			continue;
		}
		if ((flags & 4) && strchr("<>&", v[i]) != NULL && v[i] != 0) {
			snprintf(x, sizeof(x), "\\u%04x", v[i]);
			put(t, x, 6);
			continue;
		}
		if (v[i] < sizeof(esc) / sizeof(esc[0]) && esc[v[i]] != NULL &&
		    (v[i] != '/' || (flags & 1)))
			put(t, esc[v[i]], 2);
		else if (v[i] < 0x20) {
			snprintf(x, sizeof(x), "\\u%04x", v[i]);
			put(t, x, 6);
		} else
			put_c(t, v[i]);
	}
}

/* Standard base64 decoding of a fixed value (it is valid). */
static size_t
unb64(const char *s, uint8_t *out)
{
	static const char al[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t o = 0, bits = 0;
	uint32_t acc = 0;

	for (; *s != '\0' && *s != '='; s++) {
		acc = acc << 6 | (uint32_t)(strchr(al, *s) - al);
		bits += 6;
		if (bits >= 8) {
			out[o++] = (uint8_t)(acc >> (bits - 8));
			bits -= 8;
		}
	}
	return o;
}

static void
model_add(struct model *m, const uint8_t *v, size_t n)
{
	static const char std[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	static const char url[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	struct form t[11];
	size_t a, k;

	memset(t, 0, sizeof(t));
	put(&t[0], v, n);
	put(&t[1], "Bearer ", 7);
	put(&t[1], v, n);
	pct(&t[2], v, n, false, false, "");
	pct(&t[3], v, n, true, false, "");
	pct(&t[4], v, n, false, true, "");
	pct(&t[5], v, n, false, false, "/");
	pct(&t[6], v, n, false, false, "!'()*");
	json(&t[7], v, n, 0);
	json(&t[8], v, n, 1);
	json(&t[9], v, n, 2);
	json(&t[10], v, n, 4);
	for (k = 0; k < 11; k++)
		add_form(m, t[k].p, t[k].n, k == 1 ? 7 : 0);
	for (a = 0; a < 3; a++) {
		b64(m, v, n, std, a);
		b64(m, v, n, url, a);
	}
	hex(m, v, n, "0123456789abcdef");
	hex(m, v, n, "0123456789ABCDEF");
}

/* A basic credential's value: its forms, and those of the decoded
 * "user:password" and of the password alone. */
static void
model_add_basic(struct model *m, const char *val)
{
	uint8_t dec[64];
	size_t dn = unb64(val, dec);
	const uint8_t *colon = memchr(dec, ':', dn);

	model_add(m, (const uint8_t *)val, strlen(val));
	model_add(m, dec, dn);
	check(colon != NULL);
	model_add(m, colon + 1, (size_t)(dec + dn - colon - 1));
}

static unsigned
key_of(const uint8_t *p)
{
	return (unsigned)p[0] << 8 | p[1];
}

static const struct model *sort_m;

static int
order_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	unsigned kx = key_of(pat_p(sort_m, x)), ky = key_of(pat_p(sort_m, y));

	if (kx != ky)
		return kx < ky ? -1 : 1;
	return x < y ? -1 : x > y;
}

/* The lookup (after the last model_add). Patterns of one byte are only
 * in one[]. */
static void
model_index(struct model *m)
{
	size_t k, no = 0, key;

	memset(m->one, 0, sizeof(m->one));
	for (k = 0; k < m->npats; k++) {
		if (m->pats[k].len == 1)
			m->one[pat_p(m, k)[0]] = true;
		else
			m->order[no++] = (uint32_t)k;
	}
	sort_m = m;
	qsort(m->order, no, sizeof(m->order[0]), order_cmp);
	for (key = 0, k = 0; key <= 65536; key++) {
		while (k < no && key_of(pat_p(m, m->order[k])) < key)
			k++;
		m->start[key] = (uint32_t)k;
	}
}

/* Calls fn for every occurrence of every pattern in b[0..n). */
static void
occurrences(const struct model *m, const uint8_t *b, size_t n,
    void (*fn)(void *arg, size_t at, size_t len), void *arg)
{
	size_t i;
	uint32_t k;

	for (i = 0; i < n; i++) {
		if (m->one[b[i]])
			fn(arg, i, 1);
		if (i + 1 >= n)
			break;
		for (k = m->start[key_of(b + i)];
		     k < m->start[key_of(b + i) + 1]; k++) {
			const struct pat *t = &m->pats[m->order[k]];

			if (i + t->len <= n &&
			    memcmp(b + i, m->pool + t->off, t->len) == 0)
				fn(arg, i, t->len);
		}
	}
}

static void
cover_fn(void *arg, size_t at, size_t len)
{
	memset((uint8_t *)arg + at, 1, len);
}

/* Every byte of every occurrence of every pattern, in the whole input. */
static void
cover(const struct model *m, const uint8_t *in, size_t n, uint8_t *cov)
{
	memset(cov, 0, n);
	occurrences(m, in, n, cover_fn, cov);
}

/* ---- the vault ---- */

static size_t
json_value(char *out, size_t cap, const uint8_t *v, size_t n)
{
	size_t o = 0, i;

	for (i = 0; i < n; i++) {
		if (v[i] == '"' || v[i] == '\\')
			o += (size_t)snprintf(out + o, cap - o, "\\%c", v[i]);
		else if (v[i] < 0x20)
			o +=
			    (size_t)snprintf(out + o, cap - o, "\\u%04x", v[i]);
		else
			o += (size_t)snprintf(out + o, cap - o, "%c", v[i]);
		check(o < cap);
	}
	return o;
}

/* A vault of the values; value basic (nv or more: none) is the
 * credential of a basic binding. */
static struct vault *
vault_of(
    const uint8_t *const *vals, const size_t *lens, size_t nv, size_t basic)
{
	char buf[4096], val[512];
	struct policy_diag d;
	struct policy *p;
	struct vault *v;
	struct err e;
	size_t o, i;

	o = (size_t)snprintf(buf, sizeof(buf), "{\"credentials\": [");
	for (i = 0; i < nv; i++) {
		json_value(val, sizeof(val), vals[i], lens[i]);
		o += (size_t)snprintf(buf + o, sizeof(buf) - o,
		    "%s{\"name\": \"c%zu\", \"source\": {\"type\": "
		    "\"inline\", \"value\": \"%s\"}}",
		    i ? ", " : "", i, val);
		check(o < sizeof(buf));
	}
	o += (size_t)snprintf(buf + o, sizeof(buf) - o, "]");
	if (basic < nv)
		o += (size_t)snprintf(buf + o, sizeof(buf) - o,
		    ", \"egress\": [{\"action\": \"allow\", \"target\": "
		    "\"api.example.com\"}], \"bindings\": [{\"name\": \"b\", "
		    "\"match\": {\"hosts\": [\"api.example.com\"]}, \"auth\": "
		    "{\"type\": \"basic\", \"credential\": \"c%zu\"}}]",
		    basic);
	o += (size_t)snprintf(buf + o, sizeof(buf) - o, "}");
	check(o < sizeof(buf));
	policy_diag_init(&d);
	p = policy_parse_json(buf, o, "fuzz", &d);
	if (p == NULL)
		fprintf(stderr, "%s\n%s\n", buf, d.n ? d.msgs[0] : "");
	check(p != NULL);
	policy_diag_clear(&d);
	v = vault_new(p, NULL, &e);
	if (v == NULL)
		fprintf(stderr, "vault_new: %s\n", e.msg);
	check(v != NULL);
	policy_unref(p);
	return v;
}

/* ---- streams ---- */

struct sink {
	uint8_t buf[FZ_BODY_MAX];
	size_t n;
};

static void
sink_emit(void *arg, const uint8_t *p, size_t n)
{
	struct sink *s = arg;

	check(n > 0 && s->n + n <= sizeof(s->buf));
	memcpy(s->buf + s->n, p, n);
	s->n += n;
}

/* Is in[0..n) a proper prefix of some pattern? */
static bool
pending(const struct model *m, const uint8_t *in, size_t n)
{
	size_t k;

	for (k = 0; k < m->npats; k++)
		if (m->pats[k].len > n && memcmp(pat_p(m, k), in, n) == 0)
			return true;
	return false;
}

static void
stream(struct vault_redactor *r, const struct model *m, size_t hold,
    const uint8_t *in, size_t n, const size_t *cuts, size_t ncuts, bool flush,
    struct sink *s)
{
	size_t at = 0, i;

	s->n = 0;
	for (i = 0; i <= ncuts; i++) {
		size_t end = i < ncuts ? cuts[i] : n;

		vault_redact_feed(r, in + at, end - at, sink_emit, s);
		check(s->n <= end && end - s->n <= hold);
		if (flush) {
			vault_redact_flush(r, sink_emit, s);
			check(s->n <= end);
			if (s->n < end)
				check(pending(m, in + s->n, end - s->n));
		}
		at = end;
	}
	vault_redact_finish(r, sink_emit, s);
	check(s->n == n);
}

/*
 * The in-place interface (vault_redact_scan) as the proxy drives it: the
 * cuts in turn end a write (one scan, FLUSH or MORE) and split a write
 * into two pieces; the caller consumes its bytes as the spans name them
 * and overwrites them at once with '*' runs and a form's bytes (a byte
 * read again after its span would show), each clean span points at the
 * first unconsumed byte, and a scan consumes its whole write.
 */
struct caller {
	struct sink *s;
	const struct model *m;
	uint8_t *front;
	size_t left;
};

static void
caller_span(void *arg, const uint8_t *p, size_t n, unsigned flags)
{
	struct caller *c = arg;
	struct sink *s = c->s;
	const uint8_t *t = pat_p(c->m, 0);
	size_t i, tn = c->m->pats[0].len;

	check(n > 0);
	if (!(flags & VAULT_SPAN_KEPT)) {
		check(s->n + n <= sizeof(s->buf));
		if (flags & VAULT_SPAN_MASKED)
			memset(s->buf + s->n, '*', n);
		else
			memcpy(s->buf + s->n, p, n);
		s->n += n;
	}
	if (flags & VAULT_SPAN_HELD) {
		check(!(flags & VAULT_SPAN_KEPT));
		return;
	}
	check(n <= c->left);
	check((flags & (VAULT_SPAN_KEPT | VAULT_SPAN_MASKED)) ? p == NULL
	                                                      : p == c->front);
	for (i = 0; i < n; i++)
		c->front[i] = t[i % tn];
	c->front += n;
	c->left -= n;
}

static void
stream_scan(struct vault_redactor *r, const struct model *m, size_t hold,
    const uint8_t *in, size_t n, const size_t *cuts, size_t ncuts, bool flush,
    struct sink *s)
{
	static uint8_t buf[FZ_BODY_MAX];
	struct caller c = {s, m, NULL, 0};
	struct vault_seg seg[2];
	size_t at = 0, i = 0, nseg, end;

	memcpy(buf, in, n);
	s->n = 0;
	while (at <= n) {
		nseg = 0;
		end = i < ncuts ? cuts[i++] : n;
		seg[nseg].p = buf + at;
		seg[nseg++].n = end - at;
		if (i < ncuts && end < n) {
			size_t e2 = cuts[i++];

			seg[nseg].p = buf + end;
			seg[nseg++].n = e2 - end;
			end = e2;
		}
		c.front = buf + at;
		c.left = end - at;
		vault_redact_scan(r, seg, nseg,
		    flush ? VAULT_REDACT_FLUSH : VAULT_REDACT_MORE, caller_span,
		    &c);
		check(c.left == 0);
		check(s->n <= end && end - s->n <= hold);
		if (flush && s->n < end)
			check(pending(m, in + s->n, end - s->n));
		if (end == n)
			break;
		at = end;
	}
	c.front = buf + n;
	c.left = 0;
	vault_redact_scan(r, NULL, 0, VAULT_REDACT_END, caller_span, &c);
	check(s->n == n);
}

static void
found_fn(void *arg, size_t at, size_t len)
{
	(void)arg;
	(void)at;
	(void)len;
	check(!"a pattern in the output");
}

/* No pattern in out[0..n): no run of VAULT_PIECE_MIN bytes of any form
 * (no whole short form), with or without one line break in base64. */
static void
check_no_form(const struct model *m, const uint8_t *out, size_t n)
{
	occurrences(m, out, n, found_fn, NULL);
}

struct ins_arg {
	const uint8_t *ins;
};

/* An occurrence in a rewritten header must overlap an inserted
 * "[REDACTED]". */
static void
ins_fn(void *arg, size_t at, size_t len)
{
	const struct ins_arg *a = arg;
	size_t j;

	for (j = 0; j < len && !a->ins[at + j]; j++)
		;
	check(j < len);
}

static void
check_header(const struct vault *v, const struct model *m, const uint8_t *in,
    size_t n, const uint8_t *cov)
{
	static char want[FZ_BODY_MAX * 10 + 1];
	static uint8_t ins[FZ_BODY_MAX * 10];
	size_t i, o = 0, hl = 1;
	bool any = false;
	char *h;

	for (i = 0; i < n; i++) {
		if (!cov[i]) {
			want[o] = (char)in[i];
			ins[o++] = 0;
		} else if (i == 0 || !cov[i - 1]) {
			memcpy(want + o, "[REDACTED]", 10);
			memset(ins + o, 1, 10);
			o += 10;
			any = true;
		}
	}
	h = vault_redact_header(v, (const char *)in, n, &hl);
	if (!any) {
		check(h == NULL && hl == 0);
		return;
	}
	check(h != NULL && hl == o && h[o] == '\0');
	check(memcmp(h, want, o) == 0);
	/* Whatever form the result holds, it holds only thanks to an
	 * inserted "[REDACTED]". */
	{
		struct ins_arg a = {ins};

		occurrences(m, (const uint8_t *)h, o, ins_fn, &a);
	}
	free(h);
}

static int
size_cmp(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;

	return x < y ? -1 : x > y;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct vault *fixed;
	static struct model fixed_model, dm;
	static struct sink s1, s2;
	static uint8_t cov[FZ_BODY_MAX], want[FZ_BODY_MAX];
	uint8_t vals[FZ_VALUES_MAX][FZ_VALUE_MAX];
	const uint8_t *vp[FZ_VALUES_MAX];
	size_t lens[FZ_VALUES_MAX], cuts[FZ_CUTS_MAX], ncuts, nv, i, j, n;
	const struct model *m;
	struct vault_redactor *r;
	struct vault *v;
	const uint8_t *in;
	unsigned flags;
	bool flush;

	if (size < 2)
		return 0;
	if (fixed == NULL) {
		const uint8_t *fv[NFIXED];
		size_t fl[NFIXED];

		for (i = 0; i < NFIXED; i++) {
			fv[i] = (const uint8_t *)fixed_values[i];
			fl[i] = strlen(fixed_values[i]);
			if (i == FIXED_BASIC)
				model_add_basic(&fixed_model, fixed_values[i]);
			else
				model_add(&fixed_model, fv[i], fl[i]);
		}
		model_index(&fixed_model);
		fixed = vault_of(fv, fl, NFIXED, FIXED_BASIC);
	}
	flags = *data++;
	size--;
	nv = flags & 3;
	flush = flags & 4;
	ncuts = (flags >> 3) % (FZ_CUTS_MAX + 1);
	/* The values: printable or control bytes, never NUL, CR, LF or '*'
	 * (an all-'*' mask could otherwise spell a value). */
	for (i = 0; i < nv; i++) {
		if (size == 0)
			return 0;
		lens[i] = 1 + data[0] % FZ_VALUE_MAX;
		data++;
		size--;
		if (size < lens[i])
			return 0;
		for (j = 0; j < lens[i]; j++) {
			uint8_t c = data[j] & 0x7f;

			if (c == 0 || c == '\r' || c == '\n' || c == '*')
				c = '_';
			vals[i][j] = c;
		}
		vp[i] = vals[i];
		data += lens[i];
		size -= lens[i];
	}
	if (size < 2 * ncuts)
		return 0;
	n = size - 2 * ncuts;
	if (n > FZ_BODY_MAX)
		return 0;
	for (i = 0; i < ncuts; i++)
		cuts[i] =
		    (size_t)(data[2 * i] | data[2 * i + 1] << 8) % (n + 1);
	qsort(cuts, ncuts, sizeof(cuts[0]), size_cmp);
	in = data + 2 * ncuts;

	if (nv == 0) {
		v = fixed;
		m = &fixed_model;
	} else {
		dm.npats = dm.used = 0;
		for (i = 0; i < nv; i++)
			model_add(&dm, vp[i], lens[i]);
		model_index(&dm);
		v = vault_of(vp, lens, nv, SIZE_MAX);
		m = &dm;
	}
	check((r = vault_redactor_new(v)) != NULL);
	cover(m, in, n, cov);
	for (i = 0; i < n; i++)
		want[i] = cov[i] ? '*' : in[i];

	stream(r, m, vault_redact_holdback(v), in, n, cuts, ncuts, flush, &s1);
	check(memcmp(s1.buf, want, n) == 0);
	check_no_form(m, s1.buf, n);
	/* The same redactor, a second stream in one piece. */
	stream(r, m, vault_redact_holdback(v), in, n, NULL, 0, false, &s2);
	check(memcmp(s2.buf, want, n) == 0);
	/* And in place, in writes of one or two pieces. */
	stream_scan(
	    r, m, vault_redact_holdback(v), in, n, cuts, ncuts, flush, &s2);
	check(memcmp(s2.buf, want, n) == 0);
	check_no_form(m, s2.buf, n);
	vault_redactor_free(r);

	check_header(v, m, in, n, cov);
	if (v != fixed)
		vault_free(v);
	return 0;
}
