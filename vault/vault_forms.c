/*
 * vault_forms: the rendered forms of a value (vault.h, "Redaction") and
 * the redactor's patterns made of them, whole or in pieces of
 * VAULT_PIECE_MIN; the byte encoders the substitutions share. The
 * matcher over the patterns is vault_redact.c's.
 */
#include <stdlib.h>
#include <string.h>

#include "util/text.h"
#include "util/utf8.h"
#include "vault/vault_int.h"

/*
 * The patterns of one value are pieces of its rendered forms: a form
 * whose secret part (what the value's bytes determine; not fixed text
 * such as "Bearer ") is at most VAULT_PIECE_MIN bytes is one pattern,
 * whole; a longer one gives each of its VAULT_PIECE_MIN-byte windows.
 * Patterns point into the forms' buffer (nothing is copied), except
 * short base64 forms with a line break in (form_wrapped), which need
 * bytes of their own. With buf NULL nothing is written: the same code counts the bytes
 * and patterns exactly (vault_redact_arena_need), so the arena and the
 * pattern array are sized for what the build will make.
 */

/* Where byte o of the buffer goes (NULL when counting). */
static inline uint8_t *
fat(struct vault_forms *f, size_t o)
{
	return f->buf != NULL ? f->buf + o : NULL;
}

static inline void
fput(struct vault_forms *f, size_t o, uint8_t c)
{
	if (f->buf != NULL)
		f->buf[o] = c;
}

static void
pat_add(struct vault_forms *f, size_t at, size_t len)
{
	if (f->pats != NULL) {
		if (f->npats == f->pcap)
			return; /* cannot happen: the count pass sized it */
		f->pats[f->npats].p = f->buf + at;
		f->pats[f->npats].len = len;
	}
	f->npats++;
}

/* The patterns of the form at [st, end) whose first pl bytes are fixed
 * text: whole, or the windows of its secret part. */
static void
form_pieces(struct vault_forms *f, size_t st, size_t end, size_t pl)
{
	size_t i;

	if (end - st - pl <= VAULT_PIECE_MIN) {
		pat_add(f, st, end - st);
		return;
	}
	for (i = st + pl; i + VAULT_PIECE_MIN <= end; i++)
		pat_add(f, i, VAULT_PIECE_MIN);
}

/* Ends the form that started at st and now ends at end (a form with no
 * secret byte adds nothing). */
static void
form_end(struct vault_forms *f, size_t st, size_t end, size_t pl)
{
	if (end - st <= pl) {
		if (f->buf != NULL)
			secmem_wipe(f->buf + st, end - st);
		return;
	}
	form_pieces(f, st, end, pl);
	f->off = end;
}

static void
form_raw(struct vault_forms *f, const char *prefix, const uint8_t *v, size_t n)
{
	size_t pl = strlen(prefix), o = f->off;

	if (f->buf != NULL) {
		memcpy(f->buf + o, prefix, pl);
		memcpy(f->buf + o + pl, v, n);
	}
	form_end(f, o, o + pl + n, pl);
}

/* The len bytes at from with one line break ("\n", "\r\n") after each
 * of their first len - 1: 2 (len - 1) patterns. */
static void
wrap_all(struct vault_forms *f, size_t from, size_t len)
{
	static const char *const brk[] = {"\n", "\r\n"};
	size_t o = f->off, j, k, bl;

	for (k = 0; k < 2; k++)
		for (j = 1; j < len; j++) {
			bl = strlen(brk[k]);
			if (f->buf != NULL) {
				memmove(f->buf + o, f->buf + from, j);
				memcpy(f->buf + o + j, brk[k], bl);
				memmove(f->buf + o + j + bl, f->buf + from + j,
				    len - j);
			}
			pat_add(f, o, len + bl);
			o += len + bl;
		}
	f->off = o;
}

/*
 * A base64 form of len bytes at st, wrapped (MIME: 76 columns, PEM: 64;
 * CRLF or LF): no run of VAULT_PIECE_MIN of its bytes with one line break
 * inside may pass. A run across a break at form offset b is cut when the
 * form has VAULT_PIECE_MIN bytes before b (a piece on the line before,
 * with lines of at least VAULT_PIECE_MIN bytes) or after b (a piece on
 * the line after): always when len >= 2 VAULT_PIECE_MIN. A shorter form
 * is also matched with a break after any of its bytes: whole when at
 * most VAULT_PIECE_MIN, else each piece so.
 */
static void
form_wrapped(struct vault_forms *f, size_t st, size_t len)
{
	size_t i;

	if (len <= VAULT_PIECE_MIN)
		wrap_all(f, st, len);
	else if (len < 2 * VAULT_PIECE_MIN)
		for (i = st; i + VAULT_PIECE_MIN <= st + len; i++)
			wrap_all(f, i, VAULT_PIECE_MIN);
}

/*
 * The base64 of the value when it begins `align` bytes into a 3-byte
 * group of some longer string (align 0: the value encoded alone, or on
 * a group boundary): only the characters all of whose six bits come
 * from the value (the first ones mix in the bytes before it), then the
 * tail character zero-padded (what the encoding of the value at the end
 * of the string ends with; '=' not included, so padded occurrences match
 * too). Patterns: the whole (with tail) and, when the tail exists and
 * there are at least VAULT_FORM_MIN characters before it, those alone
 * (the value in the middle of a string), or the pieces of the whole;
 * each wrapped too (form_wrapped). At align 1 and 2 a form of fewer than
 * VAULT_FORM_MIN determined characters is left out: a few characters of
 * base64 occur in every base64 text.
 */
static void
form_base64(
    struct vault_forms *f, const uint8_t *v, size_t n, bool url, unsigned align)
{
	static const char std[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	static const char safe[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	const char *al = url ? safe : std;
	size_t st = f->off, o = st, bits = 8 * (align + n), d0, det, k, len;
	uint32_t acc = 0;
	size_t have = 0, i;

	/* first character whose bits are all the value's: ceil(8a / 6) */
	d0 = (8 * align + 5) / 6;
	det = bits / 6 - d0;
	if (align != 0 && det < VAULT_FORM_MIN)
		return;
	/* bit by bit, six at a time over (align zero bytes, the value),
	 * the characters from d0 on */
	k = 0;
	for (i = 0; i < align + n; i++) {
		acc = acc << 8 | (i < align ? 0 : v[i - align]);
		have += 8;
		while (have >= 6) {
			if (k++ >= d0)
				fput(f, o++,
				    (uint8_t)al[acc >> (have - 6) & 63]);
			have -= 6;
		}
	}
	if (have > 0)
		fput(f, o++, (uint8_t)al[acc << (6 - have) & 63]);
	len = o - st;
	if (len == 0)
		return;
	f->off = o;
	form_pieces(f, st, o, 0);
	form_wrapped(f, st, len);
	if (len > det && det >= VAULT_FORM_MIN && len <= VAULT_PIECE_MIN) {
		/* without the tail: the value inside a longer string */
		pat_add(f, st, det);
		form_wrapped(f, st, det);
	}
}

/* Hex, as hexdump tools and digests print bytes (lower or upper case);
 * left out for values of fewer than VAULT_FORM_MIN / 2 bytes. */
static void
form_hex(struct vault_forms *f, const uint8_t *v, size_t n, bool upper)
{
	const char *hex = upper ? "0123456789ABCDEF" : "0123456789abcdef";
	size_t o = f->off, i;

	if (2 * n < VAULT_FORM_MIN)
		return;
	for (i = 0; i < n; i++) {
		fput(f, o++, (uint8_t)hex[v[i] >> 4]);
		fput(f, o++, (uint8_t)hex[v[i] & 15]);
	}
	form_end(f, f->off, o, 0);
}

size_t
vault_enc_pct(uint8_t c, unsigned flags, const char *keep, uint8_t *o)
{
	const char *hex =
	    (flags & VAULT_PCT_LOWER) ? "0123456789abcdef" : "0123456789ABCDEF";

	if (text_unreserved(c) || (c != 0 && strchr(keep, c) != NULL)) {
		if (o != NULL)
			o[0] = c;
		return 1;
	}
	if ((flags & VAULT_PCT_PLUS) && c == ' ') {
		if (o != NULL)
			o[0] = '+';
		return 1;
	}
	if (o != NULL) {
		o[0] = '%';
		o[1] = (uint8_t)hex[c >> 4];
		o[2] = (uint8_t)hex[c & 15];
	}
	return 3;
}

/* Percent-encoding of every byte but the unreserved ones and those in
 * keep (what common encoders leave alone: "/" for Python's quote,
 * "!'()*" for JavaScript's encodeURIComponent). */
static void
form_percent(struct vault_forms *f, const uint8_t *v, size_t n, unsigned flags,
    const char *keep)
{
	size_t st = f->off, o = st, i;

	for (i = 0; i < n; i++)
		o += vault_enc_pct(v[i], flags, keep, fat(f, o));
	form_end(f, st, o, 0);
}

/* non-ASCII as \uXXXX (Python's json.dumps): whole code points, so
 * not a flag of the byte encoder */
#define JSON_ASCII 0x2u

/* "\uXXXX" at o (o may be NULL: the length only). */
static size_t
json_u(uint8_t *o, uint32_t cp)
{
	static const char hex[] = "0123456789abcdef";
	int k;

	if (o == NULL)
		return 6;
	o[0] = '\\';
	o[1] = 'u';
	for (k = 0; k < 4; k++)
		o[2 + k] = (uint8_t)hex[(cp >> (12 - 4 * k)) & 15];
	return 6;
}

size_t
vault_enc_json(uint8_t c, unsigned flags, uint8_t *o)
{
	char esc = 0;

	if ((flags & VAULT_JSON_HTML) && (c == '<' || c == '>' || c == '&'))
		return json_u(o, c);
	switch (c) {
	case '"':
		esc = '"';
		break;
	case '\\':
		esc = '\\';
		break;
	case '\b':
		esc = 'b';
		break;
	case '\f':
		esc = 'f';
		break;
	case '\t':
		esc = 't';
		break;
	case '/':
		esc = (flags & VAULT_JSON_SLASH) ? '/' : 0;
		break;
	default:
		break;
	}
	if (esc != 0) {
		if (o != NULL) {
			o[0] = '\\';
			o[1] = (uint8_t)esc;
		}
		return 2;
	}
	if (c < 0x20)
		return json_u(o, c);
	if (o != NULL)
		o[0] = c;
	return 1;
}

/* JSON string escaping (RFC 8259 §7), minimal, plus what the flags ask
 * for (VAULT_JSON_*, JSON_ASCII). */
static void
form_json(struct vault_forms *f, const uint8_t *v, size_t n, unsigned flags)
{
	size_t st = f->off, o = st, i, k;
	uint32_t cp;

	for (i = 0; i < n; i++) {
		if ((flags & JSON_ASCII) && v[i] >= 0x80 &&
		    (k = utf8_decode(v + i, n - i, &cp)) > 0) {
			if (cp > 0xffff) {
				cp -= 0x10000;
				o += json_u(fat(f, o), 0xd800 | (cp >> 10));
				o += json_u(fat(f, o), 0xdc00 | (cp & 0x3ff));
			} else
				o += json_u(fat(f, o), cp);
			i += k - 1;
			continue;
		}
		o += vault_enc_json(v[i], flags, fat(f, o));
	}
	form_end(f, st, o, 0);
}

static bool
has_byte(const uint8_t *v, size_t n, uint8_t c)
{
	return memchr(v, c, n) != NULL;
}

static bool
has_any(const uint8_t *v, size_t n, const char *set)
{
	for (; *set != '\0'; set++)
		if (has_byte(v, n, (uint8_t)*set))
			return true;
	return false;
}

static bool
has_high(const uint8_t *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (v[i] >= 0x80)
			return true;
	return false;
}

/* Every form of one value; duplicates are dropped after sorting. */
static void
vault_forms(struct vault_forms *f, const uint8_t *v, size_t n)
{
	unsigned a;

	form_raw(f, "", v, n);
	/* "Bearer v", whole for a short value; for a longer one "Bearer "
	 * and the value's first piece (its other pieces are the value's
	 * own): an echoed Authorization value is masked whole, prefix too */
	form_raw(f, "Bearer ", v, n <= VAULT_PIECE_MIN ? n : VAULT_PIECE_MIN);
	for (a = 0; a < 3; a++) {
		form_base64(f, v, n, false, a);
		form_base64(f, v, n, true, a);
	}
	form_hex(f, v, n, false);
	form_hex(f, v, n, true);
	form_percent(f, v, n, 0, "");
	form_percent(f, v, n, VAULT_PCT_LOWER, "");
	if (has_byte(v, n, ' '))
		form_percent(f, v, n, VAULT_PCT_PLUS, "");
	if (has_byte(v, n, '/'))
		form_percent(f, v, n, 0, "/");
	if (has_any(v, n, "!'()*"))
		form_percent(f, v, n, 0, "!'()*");
	form_json(f, v, n, 0);
	if (has_byte(v, n, '/'))
		form_json(f, v, n, VAULT_JSON_SLASH);
	if (has_high(v, n))
		form_json(f, v, n, JSON_ASCII);
	if (has_any(v, n, "<>&"))
		form_json(f, v, n, VAULT_JSON_HTML);
}

/* Bytes of a basic credential's value decoded, at most. */
#define VAULT_BASIC_DECODED_MAX (POLICY_SECRET_MAX / 4 * 3 + 3)

/*
 * Standard base64 (RFC 4648 §4, '=' padding optional) into out: its
 * length, or 0 (out wiped) when in is not base64.
 */
static size_t
b64_decode(const uint8_t *in, size_t n, uint8_t *out)
{
	uint32_t acc = 0;
	size_t bits = 0, o = 0, i;
	const char *al =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const char *c;

	while (n > 0 && in[n - 1] == '=')
		n--;
	if (n % 4 == 1)
		return 0;
	for (i = 0; i < n; i++) {
		if (in[i] == 0 || (c = strchr(al, in[i])) == NULL) {
			secmem_wipe(out, o); /* what was decoded so far */
			return 0;
		}
		acc = acc << 6 | (uint32_t)(c - al);
		bits += 6;
		if (bits >= 8) {
			out[o++] = (uint8_t)(acc >> (bits - 8));
			bits -= 8;
		}
	}
	return o;
}

/*
 * A value's forms; for a basic credential (base64 of "user:password",
 * RFC 7617) also those of the decoded "user:password" and of the
 * password alone: an origin greeting "hello alice:pw" or echoing the
 * password it checked gives the value back decoded.
 */
void
vault_forms_cred(struct vault_forms *f, const struct vault_cred *c)
{
	uint8_t dec[VAULT_BASIC_DECODED_MAX];
	const uint8_t *colon;
	size_t dn;

	if (c->len == 0) /* an http source not fetched yet: nothing */
		return;
	vault_forms(f, (const uint8_t *)c->val, c->len);
	if (!c->basic || c->len > POLICY_SECRET_MAX ||
	    (dn = b64_decode((const uint8_t *)c->val, c->len, dec)) == 0)
		return;
	vault_forms(f, dec, dn);
	colon = memchr(dec, ':', dn);
	if (colon != NULL && colon + 1 < dec + dn)
		vault_forms(f, colon + 1, (size_t)(dec + dn - colon - 1));
	secmem_wipe(dec, dn);
}
