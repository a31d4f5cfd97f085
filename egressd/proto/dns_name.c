/*
 * dns_name: DNS names, pure (see dns_wire.h): wire decoding with
 * backward-only compression pointers and the label map that says where a
 * pointer may land, presentation form both ways, comparison, and the
 * reverse (PTR) names of addresses.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "egressd/proto/dns_wire.h"
#include "egressd/proto/dns_wire_int.h"
#include "util/text.h"

static uint8_t
lower(uint8_t c)
{
	return (uint8_t)text_lower(c);
}

/* ---- names ---- */

static bool
lm_get(const struct label_map *lm, size_t off)
{
	return (lm->bits[off >> 3] & (1u << (off & 7))) != 0;
}

static void
lm_set(struct label_map *lm, size_t off)
{
	lm->bits[off >> 3] |= (uint8_t)(1u << (off & 7));
}

/* dns_name_decode, plus the label map when lm is not NULL. */
int
dns_name_decode_lm(const uint8_t *msg, size_t len, size_t *off,
    struct dns_name *n, struct label_map *lm)
{
	size_t pos = *off, seg = *off, end = 0;
	unsigned chase = 0;
	bool jumped = false;

	n->len = 0;
	n->labels = 0;
	for (;;) {
		if (pos >= len)
			return -1;
		uint8_t c = msg[pos];
		if (lm != NULL && !jumped)
			lm_set(lm, pos);
		if (c == 0) {
			if (n->len + 1 > DNS_NAME_WIRE_MAX)
				return -1;
			n->wire[n->len++] = 0;
			if (!jumped)
				end = pos + 1;
			break;
		}
		if ((c & 0xc0) == 0xc0) {
			if (pos + 1 >= len)
				return -1;
			size_t target =
			    ((size_t)(c & 0x3f) << 8) | msg[pos + 1];
			/* Backwards only, and never into the header. */
			if (target >= seg || target < DNS_HEADER_LEN)
				return -1;
			if (lm != NULL && !lm_get(lm, target))
				return -1;
			if (++chase > DNS_PTR_CHASE_MAX)
				return -1;
			if (!jumped)
				end = pos + 2;
			jumped = true;
			pos = seg = target;
			continue;
		}
		if ((c & 0xc0) != 0)
			return -1; /* 0x40 extended, 0x80 reserved */
		/* c <= 63 here; +1 keeps room for the root label. */
		if (pos + 1 + c > len || n->len + 1 + c + 1 > DNS_NAME_WIRE_MAX)
			return -1;
		memcpy(n->wire + n->len, msg + pos, 1 + (size_t)c);
		n->len += 1 + c;
		n->labels++;
		pos += 1 + (size_t)c;
	}
	*off = end;
	return 0;
}

int
dns_name_decode(const uint8_t *msg, size_t len, size_t *off, struct dns_name *n)
{
	return dns_name_decode_lm(msg, len, off, n, NULL);
}

/*
 * Marks the labels of an uncompressed name inside opaque rdata
 * (msg[start..end)) as pointer targets, if it is one entirely.
 */
void
dns_name_mark_plain(
    const uint8_t *msg, size_t start, size_t end, struct label_map *lm)
{
	size_t pos = start;

	while (pos < end && pos - start < DNS_NAME_WIRE_MAX) {
		if (msg[pos] == 0) {
			for (size_t p = start; p <= pos;
			     p += 1 + (size_t)msg[p])
				lm_set(lm, p);
			return;
		}
		if (msg[pos] > DNS_LABEL_MAX)
			return;
		pos += 1 + (size_t)msg[pos];
	}
}

/*
 * Validates an uncompressed wire name in buf[0..cap) and returns its
 * length, or 0 if it is not one.
 */
size_t
dns_name_wire_len(const uint8_t *buf, size_t cap)
{
	size_t pos = 0;

	while (pos < cap && pos < DNS_NAME_WIRE_MAX) {
		uint8_t c = buf[pos];
		if (c == 0)
			return pos + 1;
		if (c > DNS_LABEL_MAX)
			return 0;
		pos += 1 + (size_t)c;
	}
	return 0;
}

void
dns_name_set(struct dns_name *n, const uint8_t *wire, size_t len)
{
	size_t pos = 0;

	memcpy(n->wire, wire, len);
	n->len = (uint16_t)len;
	n->labels = 0;
	while (pos < len && wire[pos] != 0) {
		n->labels++;
		pos += 1 + (size_t)wire[pos];
	}
}

/* Bytes written as themselves (letters, digits, '-', '_'); the rest is
 * escaped as \DDD. A table: this runs on every byte of every query's
 * name (the policy's and the log's presentation form). */
static const bool pres_plain[256] = {
    ['0' ... '9'] = true,
    ['A' ... 'Z'] = true,
    ['a' ... 'z'] = true,
    ['-'] = true,
    ['_'] = true,
};

int
dns_name_to_pres(
    const struct dns_name *n, unsigned flags, char *buf, size_t cap)
{
	/* OR-ed into an upper-case letter to lower it; 0 keeps the case */
	const uint8_t fold = (flags & DNS_PRES_LOWER) ? 0x20 : 0;
	size_t pos = 0, o = 0;

	if (cap == 0)
		return -1;
	while (pos < n->len && n->wire[pos] != 0) {
		uint8_t l = n->wire[pos++];
		if (o > 0) {
			if (o + 1 >= cap)
				return -1;
			buf[o++] = '.';
		}
		/* The usual label: all of it inside the name and room for
		 * even every byte escaped: no bound to check per byte. */
		if (pos + l <= n->len && o + 4 * (size_t)l < cap) {
			const uint8_t *w = n->wire + pos, *end = w + l;

			for (; w < end && pres_plain[*w]; w++)
				buf[o++] =
				    (char)(*w >= 'A' && *w <= 'Z' ? *w | fold
				                                  : *w);
			/* the rest of the label (escapes) as below */
			l = (uint8_t)(end - w);
			pos = (size_t)(w - n->wire);
		}
		for (uint8_t i = 0; i < l && pos < n->len; i++, pos++) {
			uint8_t c = n->wire[pos];
			if (pres_plain[c]) {
				if (o + 1 >= cap)
					return -1;
				buf[o++] =
				    (char)(c >= 'A' && c <= 'Z' ? c | fold : c);
			} else {
				if (o + 4 >= cap)
					return -1;
				buf[o++] = '\\';
				buf[o++] = (char)('0' + c / 100);
				buf[o++] = (char)('0' + (c / 10) % 10);
				buf[o++] = (char)('0' + c % 10);
			}
		}
	}
	buf[o] = '\0';
	return (int)o;
}

/* Decodes one possibly escaped character of s at *i. */
static int
pres_char(const char *s, size_t slen, size_t *i, uint8_t *c)
{
	if (s[*i] != '\\') {
		*c = (uint8_t)s[(*i)++];
		return 0;
	}
	if (*i + 1 >= slen)
		return -1;
	if (s[*i + 1] < '0' || s[*i + 1] > '9') {
		*c = (uint8_t)s[*i + 1];
		*i += 2;
		return 0;
	}
	unsigned v = 0;
	for (size_t k = 1; k <= 3; k++) {
		if (*i + k >= slen || s[*i + k] < '0' || s[*i + k] > '9')
			return -1;
		v = v * 10 + (unsigned)(s[*i + k] - '0');
	}
	if (v > 255)
		return -1;
	*c = (uint8_t)v;
	*i += 4;
	return 0;
}

int
dns_name_from_pres(const char *s, struct dns_name *n, struct err *e)
{
	size_t i = 0, slen = strnlen(s, DNS_NAME_PRES_MAX);
	size_t lpos, ll = 0;

	n->len = 0;
	n->labels = 0;
	if (slen >= DNS_NAME_PRES_MAX) {
		err_set(e, "name text longer than %d", DNS_NAME_PRES_MAX - 1);
		return -1;
	}
	if (slen == 0 || (slen == 1 && s[0] == '.')) {
		n->wire[n->len++] = 0;
		return 0;
	}
	lpos = n->len++;
	while (i < slen) {
		uint8_t c;
		if (s[i] == '.') {
			if (ll == 0) {
				err_set(e, "empty label");
				return -1;
			}
			n->wire[lpos] = (uint8_t)ll;
			n->labels++;
			ll = 0;
			if (++i == slen)
				goto root; /* trailing dot */
			/* A new label needs its length byte; the root too. */
			if (n->len + 1 >= DNS_NAME_WIRE_MAX)
				goto toolong;
			lpos = n->len++;
			continue;
		}
		if (pres_char(s, slen, &i, &c) == -1) {
			err_set(e, "bad escape");
			return -1;
		}
		if (ll == DNS_LABEL_MAX) {
			err_set(e, "label longer than %d", DNS_LABEL_MAX);
			return -1;
		}
		if (n->len + 1 >= DNS_NAME_WIRE_MAX)
			goto toolong;
		n->wire[n->len++] = c;
		ll++;
	}
	if (ll == 0) {
		err_set(e, "empty label");
		return -1;
	}
	n->wire[lpos] = (uint8_t)ll;
	n->labels++;
root:
	n->wire[n->len++] = 0;
	return 0;
toolong:
	err_set(e, "name longer than %d", DNS_NAME_WIRE_MAX);
	return -1;
}

#define BYTES(c) ((uint64_t)(c)*0x0101010101010101ULL)

/*
 * a and b spell the same name but for the case of ASCII letters: each
 * byte pair is equal, or differs in bit 5 alone where a's byte is a
 * letter (so is b's). Length bytes (<= 63) never pass as letters. Eight
 * bytes at a time: a 0x20-randomizing client's spelling never matches
 * the cached one, so this runs on every such answer (bench/README.md).
 * Not inlined: dns_name_equal's usual path (memcmp) stays a leaf without
 * this loop's registers to save (+30 instructions a cached answer).
 */
static __attribute__((noinline)) bool
fold_equal(const uint8_t *a, const uint8_t *b, size_t n)
{
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		uint64_t wa, wb, x, t, letter;

		memcpy(&wa, a + i, 8);
		memcpy(&wb, b + i, 8);
		x = wa ^ wb;
		if (x == 0)
			continue;
		if ((x & ~BYTES(0x20)) != 0)
			return false;
		/* Bit 7 of a byte of letter: (a | 0x20) in 'a'..'z'. t's bytes
		 * are <= 0x7f, so no sum carries into the next byte. */
		t = (wa | BYTES(0x20)) & BYTES(0x7f);
		letter = (t + BYTES(0x80 - 'a')) &
		    ~(t + BYTES(0x80 - 'z' - 1)) & ~wa & BYTES(0x80);
		/* bit 5 of each differing byte must have a letter's bit 7 */
		if (((x << 2) & ~letter) != 0)
			return false;
	}
	for (; i < n; i++) {
		uint8_t x = a[i] ^ b[i], l = a[i] | 0x20;

		if (x != 0 && (x != 0x20 || l < 'a' || l > 'z'))
			return false;
	}
	return true;
}

bool
dns_name_equal(const struct dns_name *a, const struct dns_name *b)
{
	if (a->len != b->len)
		return false;
	/* The usual case (the same spelling) without folding. */
	if (memcmp(a->wire, b->wire, a->len) == 0)
		return true;
	return fold_equal(a->wire, b->wire, a->len);
}

/* Offset in a of the suffix that has b's length, if on a label start. */
bool
dns_name_suffix_at(const struct dns_name *a, size_t blen, size_t *at)
{
	size_t pos = 0;

	if (blen > a->len)
		return false;
	while (pos < a->len) {
		if (a->len - pos == blen) {
			*at = pos;
			return true;
		}
		if (a->wire[pos] == 0)
			break;
		pos += 1 + (size_t)a->wire[pos];
	}
	return false;
}

bool
dns_name_is_subdomain(const struct dns_name *a, const struct dns_name *b)
{
	size_t at;

	if (!dns_name_suffix_at(a, b->len, &at))
		return false;
	for (size_t i = 0; i < b->len; i++)
		if (lower(a->wire[at + i]) != lower(b->wire[i]))
			return false;
	return true;
}

bool
dns_name_is_localhost(const struct dns_name *n)
{
	static const uint8_t lh[] = "\011localhost";
	struct dns_name l;

	dns_name_set(&l, lh, sizeof(lh)); /* includes the NUL root label */
	return dns_name_is_subdomain(n, &l);
}

/* ---- reverse names ---- */

static bool
label_is(const uint8_t *lab, const char *s)
{
	size_t sl = strlen(s);

	if (lab[0] != sl)
		return false;
	for (size_t i = 0; i < sl; i++)
		if (lower(lab[1 + i]) != (uint8_t)s[i])
			return false;
	return true;
}

bool
dns_ptr_name_parse(const struct dns_name *n, int *family, uint8_t addr[16])
{
	const uint8_t *lab[DNS_NAME_LABELS_MAX];
	size_t nl = 0, pos = 0;

	while (pos < n->len && n->wire[pos] != 0 && nl < DNS_NAME_LABELS_MAX) {
		lab[nl++] = n->wire + pos;
		pos += 1 + (size_t)n->wire[pos];
	}
	if (nl == 6 && label_is(lab[4], "in-addr") &&
	    label_is(lab[5], "arpa")) {
		for (size_t i = 0; i < 4; i++) {
			const uint8_t *l = lab[i];
			unsigned v = 0;
			if (l[0] < 1 || l[0] > 3 || (l[0] > 1 && l[1] == '0'))
				return false;
			for (size_t k = 1; k <= l[0]; k++) {
				if (l[k] < '0' || l[k] > '9')
					return false;
				v = v * 10 + (unsigned)(l[k] - '0');
			}
			if (v > 255)
				return false;
			addr[3 - i] = (uint8_t)v;
		}
		*family = 4;
		return true;
	}
	if (nl == 34 && label_is(lab[32], "ip6") && label_is(lab[33], "arpa")) {
		uint8_t tmp[16] = {0};
		for (size_t i = 0; i < 32; i++) {
			int h;
			if (lab[i][0] != 1 || (h = text_hexval(lab[i][1])) < 0)
				return false;
			size_t nib = 31 - i; /* nibble index from the left */
			tmp[nib / 2] |= (uint8_t)(nib % 2 ? h : h << 4);
		}
		memcpy(addr, tmp, 16);
		*family = 6;
		return true;
	}
	return false;
}

void
dns_ptr_name_make(int family, const uint8_t *addr, struct dns_name *n)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;

	if (family == 4 || family == AF_INET) {
		for (int i = 3; i >= 0; i--) {
			uint8_t v = addr[i];
			uint8_t d[3];
			size_t nd = 0;
			if (v >= 100)
				d[nd++] = (uint8_t)('0' + v / 100);
			if (v >= 10)
				d[nd++] = (uint8_t)('0' + (v / 10) % 10);
			d[nd++] = (uint8_t)('0' + v % 10);
			n->wire[o++] = (uint8_t)nd;
			memcpy(n->wire + o, d, nd);
			o += nd;
		}
		static const char arpa4[] = "\007in-addr\004arpa";
		memcpy(n->wire + o, arpa4, sizeof(arpa4) - 1);
		o += sizeof(arpa4) - 1;
	} else {
		for (int i = 15; i >= 0; i--) {
			n->wire[o++] = 1;
			n->wire[o++] = (uint8_t)hex[addr[i] & 0xf];
			n->wire[o++] = 1;
			n->wire[o++] = (uint8_t)hex[addr[i] >> 4];
		}
		static const char arpa6[] = "\003ip6\004arpa";
		memcpy(n->wire + o, arpa6, sizeof(arpa6) - 1);
		o += sizeof(arpa6) - 1;
	}
	n->wire[o++] = 0;
	dns_name_set(n, n->wire, o);
}
