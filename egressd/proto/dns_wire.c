/*
 * dns_wire: DNS message parsing and building, pure (see dns_wire.h).
 *
 * Every read is bounded by the message length passed in; names are
 * decoded with backward-only compression pointers (each pointer must land
 * strictly before the segment it was found in, and after the header), so
 * decoding always terminates; re-encoding compresses only exact byte
 * matches, so the case of every name survives a round trip.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "egressd/proto/dns_wire.h"
#include "egressd/proto/special_ranges.h"
#include "util/text.h"

/* Names compressed against per encoded message. */
#define DNS_COMPRESS_MAX 256
/* Largest offset a compression pointer can carry. */
#define DNS_PTR_OFF_MAX 0x3fff
/* Fixed part of an RR after its owner: type, class, ttl, rdlen. */
#define DNS_RR_FIXED_LEN 10
/* Fixed part of a question after its name: type, class. */
#define DNS_Q_FIXED_LEN 4
/* RRSIG/SIG rdata before the signer name (type .. key tag). */
#define DNS_RRSIG_FIXED_LEN 18
/* SVCB/HTTPS rdata before the target name (priority). */
#define DNS_SVCB_FIXED_LEN 2
/* SOA rdata after the two names: serial refresh retry expire minimum. */
#define DNS_SOA_FIXED_LEN 20

static uint16_t
rd16(const uint8_t *p)
{
	return (uint16_t)((p[0] << 8) | p[1]);
}

static uint32_t
rd32(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
	    ((uint32_t)p[2] << 8) | p[3];
}

static void
wr16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void
wr32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint8_t
lower(uint8_t c)
{
	return (uint8_t)text_lower(c);
}

/* ---- names ---- */

/*
 * Compression pointers may only land on a label (or the root) of a name
 * decoded earlier in place: the question, an owner, or a name inside
 * rdata whose layout is known. So a name is never assembled from bytes
 * that are something else (a TTL, an rdlength, the middle of a label), and
 * rewriting TTLs in place can never change a name.
 */
struct label_map {
	uint8_t bits[DNS_MSG_MAX / 8 + 1];
};

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
static int
name_decode_lm(const uint8_t *msg, size_t len, size_t *off, struct dns_name *n,
    struct label_map *lm)
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
	return name_decode_lm(msg, len, off, n, NULL);
}

/*
 * Marks the labels of an uncompressed name inside opaque rdata
 * (msg[start..end)) as pointer targets, if it is one entirely.
 */
static void
lm_mark_plain(
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
static size_t
name_wire_len(const uint8_t *buf, size_t cap)
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

static void
name_set(struct dns_name *n, const uint8_t *wire, size_t len)
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

static bool
pres_plain(uint8_t c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '-' || c == '_';
}

int
dns_name_to_pres(
    const struct dns_name *n, unsigned flags, char *buf, size_t cap)
{
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
		for (uint8_t i = 0; i < l && pos < n->len; i++, pos++) {
			uint8_t c = n->wire[pos];
			if (pres_plain(c)) {
				if (o + 1 >= cap)
					return -1;
				buf[o++] =
				    (char)((flags & DNS_PRES_LOWER) ? lower(c)
				                                    : c);
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

bool
dns_name_equal(const struct dns_name *a, const struct dns_name *b)
{
	if (a->len != b->len)
		return false;
	/* Length bytes are <= 63, so folding them is harmless. */
	for (size_t i = 0; i < a->len; i++)
		if (lower(a->wire[i]) != lower(b->wire[i]))
			return false;
	return true;
}

/* Offset in a of the suffix that has b's length, if on a label start. */
static bool
suffix_at(const struct dns_name *a, size_t blen, size_t *at)
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

	if (!suffix_at(a, b->len, &at))
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

	name_set(&l, lh, sizeof(lh)); /* includes the NUL root label */
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
	name_set(n, n->wire, o);
}

/* How a type's rdata carries names. */
enum rd_kind {
	RD_OPAQUE = 0,
	RD_NAME, /* one name */
	RD_2NAMES, /* MINFO, RP */
	RD_SOA, /* 2 names + 20 */
	RD_U16_NAME, /* MX, AFSDB, RT, KX */
	RD_U16_2NAMES, /* PX */
	RD_SRV, /* 6 bytes + name */
	RD_NAPTR, /* 4 bytes + 3 strings + name */
};

static enum rd_kind
rd_kind(uint16_t type)
{
	switch (type) {
	case DNS_TYPE_NS:
	case 3: /* MD */
	case 4: /* MF */
	case DNS_TYPE_CNAME:
	case 7: /* MB */
	case 8: /* MG */
	case 9: /* MR */
	case DNS_TYPE_PTR:
	case DNS_TYPE_DNAME:
		return RD_NAME;
	case 14: /* MINFO */
	case 17: /* RP */
		return RD_2NAMES;
	case DNS_TYPE_SOA:
		return RD_SOA;
	case DNS_TYPE_MX:
	case 18: /* AFSDB */
	case 21: /* RT */
	case 36: /* KX */
		return RD_U16_NAME;
	case 26: /* PX */
		return RD_U16_2NAMES;
	case DNS_TYPE_SRV:
		return RD_SRV;
	case 35: /* NAPTR */
		return RD_NAPTR;
	}
	return RD_OPAQUE;
}

/* Names in these types may be compressed on output (RFC 3597 s4). */
static bool
rd_compressible(uint16_t type)
{
	switch (type) {
	case DNS_TYPE_NS:
	case 3:
	case 4:
	case DNS_TYPE_CNAME:
	case DNS_TYPE_SOA:
	case 7:
	case 8:
	case 9:
	case DNS_TYPE_PTR:
	case 14:
	case DNS_TYPE_MX:
		return true;
	}
	return false;
}

/* ---- raw message walking ---- */

/* Skips a question at *off; fills q if non-NULL. */
static int
skip_question(const uint8_t *msg, size_t len, size_t *off,
    struct dns_question *q, struct label_map *lm)
{
	struct dns_name tmp;
	struct dns_name *n = q ? &q->name : &tmp;

	if (name_decode_lm(msg, len, off, n, lm) == -1)
		return -1;
	if (len - *off < DNS_Q_FIXED_LEN)
		return -1;
	if (q != NULL) {
		q->qtype = rd16(msg + *off);
		q->qclass = rd16(msg + *off + 2);
	}
	*off += DNS_Q_FIXED_LEN;
	return 0;
}

/* Where one RR sits in a raw message. */
struct rr_pos {
	size_t owner_off;
	size_t fixed_off; /* type */
	size_t rdata_off;
	uint16_t type, rclass, rdlen;
	uint32_t ttl;
	unsigned section;
	bool owner_root;
};

/*
 * Walks one RR's rdata: checks its layout for the types whose names are
 * expanded (and A/AAAA lengths), marks name labels in lm when given, and
 * appends the decoded rdata to m's arena when m is not NULL.
 */
struct rd_walk {
	struct dns_msg *m; /* NULL: check only */
	struct label_map *lm; /* NULL: no marking */
	const uint8_t *msg;
	size_t len, o, end;
};

static int
arena_put(struct dns_msg *m, const void *p, size_t n, uint32_t *at)
{
	if (DNS_MSG_ARENA_MAX - m->arena_used < n)
		return -1;
	*at = (uint32_t)m->arena_used;
	if (n > 0)
		memcpy(m->arena + m->arena_used, p, n);
	m->arena_used += n;
	return 0;
}

static int
rd_fixed(struct rd_walk *w, size_t n)
{
	uint32_t at;

	if (w->end - w->o < n)
		return -1;
	if (w->m != NULL && arena_put(w->m, w->msg + w->o, n, &at) == -1)
		return -1;
	w->o += n;
	return 0;
}

static int
rd_name(struct rd_walk *w)
{
	struct dns_name n;
	uint32_t at;

	if (w->o >= w->end ||
	    name_decode_lm(w->msg, w->len, &w->o, &n, w->lm) == -1 ||
	    w->o > w->end)
		return -1;
	if (w->m != NULL)
		return arena_put(w->m, n.wire, n.len, &at);
	return 0;
}

/* A <character-string>: length byte and bytes. */
static int
rd_string(struct rd_walk *w)
{
	if (w->o >= w->end)
		return -1;
	return rd_fixed(w, 1 + (size_t)w->msg[w->o]);
}

/* Uncompressed names inside rdata kept opaque: still pointer targets. */
static void
rd_mark_opaque(struct rd_walk *w, uint16_t type)
{
	size_t o = w->o, rdlen = w->end - w->o;

	switch (type) {
	case 24: /* SIG */
	case 46: /* RRSIG: signer after 18 fixed bytes */
		if (rdlen > DNS_RRSIG_FIXED_LEN)
			lm_mark_plain(
			    w->msg, o + DNS_RRSIG_FIXED_LEN, w->end, w->lm);
		break;
	case 30: /* NXT */
	case 47: /* NSEC: next owner first */
		lm_mark_plain(w->msg, o, w->end, w->lm);
		break;
	case DNS_TYPE_SVCB:
	case DNS_TYPE_HTTPS: /* target after the priority */
		if (rdlen > DNS_SVCB_FIXED_LEN)
			lm_mark_plain(
			    w->msg, o + DNS_SVCB_FIXED_LEN, w->end, w->lm);
		break;
	}
}

static int
rd_walk(struct rd_walk *w, const struct rr_pos *rp)
{
	int r = 0;

	if (rp->rclass == DNS_CLASS_IN &&
	    ((rp->type == DNS_TYPE_A && rp->rdlen != 4) ||
	        (rp->type == DNS_TYPE_AAAA && rp->rdlen != 16)))
		return -1;
	switch (rd_kind(rp->type)) {
	case RD_OPAQUE:
		if (w->lm != NULL)
			rd_mark_opaque(w, rp->type);
		r = rd_fixed(w, rp->rdlen);
		break;
	case RD_NAME:
		r = rd_name(w);
		break;
	case RD_2NAMES:
		r = rd_name(w) == 0 ? rd_name(w) : -1;
		break;
	case RD_SOA:
		if (rd_name(w) == -1 || rd_name(w) == -1)
			return -1;
		r = rd_fixed(w, DNS_SOA_FIXED_LEN);
		break;
	case RD_U16_NAME:
		r = rd_fixed(w, 2) == 0 ? rd_name(w) : -1;
		break;
	case RD_U16_2NAMES:
		if (rd_fixed(w, 2) == -1 || rd_name(w) == -1)
			return -1;
		r = rd_name(w);
		break;
	case RD_SRV:
		r = rd_fixed(w, 6) == 0 ? rd_name(w) : -1;
		break;
	case RD_NAPTR:
		if (rd_fixed(w, 4) == -1 || rd_string(w) == -1 ||
		    rd_string(w) == -1 || rd_string(w) == -1)
			return -1;
		r = rd_name(w);
		break;
	}
	return r == -1 || w->o != w->end ? -1 : 0;
}

/* Decodes rdata into the arena, expanding names. */
static int
rd_decode(struct dns_msg *m, const uint8_t *msg, size_t len,
    const struct rr_pos *rp, uint32_t *at, uint16_t *outlen)
{
	struct rd_walk w = {
	    m, NULL, msg, len, rp->rdata_off, rp->rdata_off + rp->rdlen};
	size_t start = m->arena_used;

	*at = (uint32_t)start;
	if (rd_walk(&w, rp) == -1 || m->arena_used - start > UINT16_MAX)
		return -1;
	*outlen = (uint16_t)(m->arena_used - start);
	return 0;
}

/* Parses one RR at *off (owner, fixed part, rdata layout). */
static int
next_rr(const uint8_t *msg, size_t len, size_t *off, struct rr_pos *rp,
    struct label_map *lm)
{
	struct dns_name owner;

	rp->owner_off = *off;
	if (name_decode_lm(msg, len, off, &owner, lm) == -1)
		return -1;
	rp->owner_root = owner.len == 1;
	if (len - *off < DNS_RR_FIXED_LEN)
		return -1;
	rp->fixed_off = *off;
	rp->type = rd16(msg + *off);
	rp->rclass = rd16(msg + *off + 2);
	rp->ttl = rd32(msg + *off + 4);
	rp->rdlen = rd16(msg + *off + 8);
	*off += DNS_RR_FIXED_LEN;
	if (len - *off < rp->rdlen)
		return -1;
	rp->rdata_off = *off;
	*off += rp->rdlen;
	struct rd_walk w = {NULL, lm, msg, len, rp->rdata_off, *off};
	return rd_walk(&w, rp);
}

/* Iterates the RRs of a raw message, all sections in order. */
struct rr_iter {
	const uint8_t *msg;
	size_t len, off;
	unsigned sec, left[3];
	struct label_map lm;
};

/* Checks the header and question (at most one; stored in q if given). */
static int
rr_iter_init(struct rr_iter *it, const uint8_t *msg, size_t len,
    struct dns_question *q, bool *have_q)
{
	it->msg = msg;
	it->len = len;
	it->off = DNS_HEADER_LEN;
	it->sec = 0;
	memset(&it->lm, 0, sizeof(it->lm));
	if (have_q != NULL)
		*have_q = false;
	if (len < DNS_HEADER_LEN || len > DNS_MSG_MAX)
		return -1;
	uint16_t qd = rd16(msg + 4);
	it->left[0] = rd16(msg + 6);
	it->left[1] = rd16(msg + 8);
	it->left[2] = rd16(msg + 10);
	if (qd > 1)
		return -1;
	if (qd == 1) {
		if (skip_question(msg, len, &it->off, q, &it->lm) == -1)
			return -1;
		if (have_q != NULL)
			*have_q = true;
	}
	return 0;
}

/* 1: *rp is the next RR; 0: done (no trailing bytes); -1: malformed. */
static int
rr_iter_next(struct rr_iter *it, struct rr_pos *rp)
{
	while (it->sec < 3 && it->left[it->sec] == 0)
		it->sec++;
	if (it->sec == 3)
		return it->off == it->len ? 0 : -1;
	if (next_rr(it->msg, it->len, &it->off, rp, &it->lm) == -1)
		return -1;
	rp->section = it->sec;
	it->left[it->sec]--;
	return 1;
}

/* ---- client queries ---- */

static int
parse_opt(const uint8_t *msg, const struct rr_pos *rp, struct dns_edns *ed)
{
	size_t o = rp->rdata_off, end = rp->rdata_off + rp->rdlen;

	if (ed->present || !rp->owner_root || rp->section != DNS_SEC_ADDITIONAL)
		return -1;
	/* Options must be well-formed even though they are not kept. */
	while (o < end) {
		if (end - o < 4)
			return -1;
		size_t ol = rd16(msg + o + 2);
		o += 4;
		if (end - o < ol)
			return -1;
		o += ol;
	}
	ed->present = true;
	ed->udp_size = rp->rclass;
	ed->ext_rcode = (uint8_t)(rp->ttl >> 24);
	ed->version = (uint8_t)(rp->ttl >> 16);
	ed->flags = (uint16_t)rp->ttl;
	return 0;
}

/* Finds the OPT record of a query; -1 if any section is malformed. */
static int
query_edns(const uint8_t *msg, size_t len, struct dns_edns *ed)
{
	struct rr_iter it;
	struct rr_pos rp;
	int r;

	if (rr_iter_init(&it, msg, len, NULL, NULL) == -1)
		return -1;
	while ((r = rr_iter_next(&it, &rp)) == 1)
		if (rp.type == DNS_TYPE_OPT && parse_opt(msg, &rp, ed) == -1)
			return -1;
	return r;
}

enum dns_query_status
dns_query_parse(const uint8_t *msg, size_t len, struct dns_query *q)
{
	size_t off = DNS_HEADER_LEN;

	memset(q, 0, sizeof(*q));
	if (len < DNS_HEADER_LEN || len > DNS_MSG_MAX)
		return DNS_QUERY_DROP;
	q->id = rd16(msg);
	q->flags = rd16(msg + 2);
	q->opcode = (q->flags >> 11) & 0xf;
	if (q->flags & DNS_FLAG_QR)
		return DNS_QUERY_DROP;
	uint16_t qd = rd16(msg + 4);
	if (qd == 1 && skip_question(msg, len, &off, &q->question, NULL) == 0)
		q->have_question = true;
	if (q->opcode != DNS_OPCODE_QUERY)
		return DNS_QUERY_NOTIMP;
	if (qd != 1 || !q->have_question) {
		q->have_question = false;
		return DNS_QUERY_FORMERR;
	}
	if (query_edns(msg, len, &q->edns) == -1) {
		memset(&q->edns, 0, sizeof(q->edns));
		return DNS_QUERY_FORMERR;
	}
	if (q->edns.present && q->edns.version > 0)
		return DNS_QUERY_BADVERS;
	return DNS_QUERY_OK;
}

const char *
dns_query_status_str(enum dns_query_status st)
{
	switch (st) {
	case DNS_QUERY_OK:
		return "ok";
	case DNS_QUERY_DROP:
		return "drop";
	case DNS_QUERY_FORMERR:
		return "formerr";
	case DNS_QUERY_NOTIMP:
		return "notimp";
	case DNS_QUERY_BADVERS:
		return "badvers";
	}
	return "unknown";
}

size_t
dns_query_udp_limit(const struct dns_query *q)
{
	if (!q->edns.present)
		return DNS_UDP_CLASSIC_MAX;
	if (q->edns.udp_size < DNS_EDNS_UDP_MIN)
		return DNS_EDNS_UDP_MIN;
	if (q->edns.udp_size > DNS_EDNS_UDP_SIZE)
		return DNS_EDNS_UDP_SIZE;
	return q->edns.udp_size;
}

/* ---- a bounded writer ---- */

struct wbuf {
	uint8_t *buf;
	size_t cap, len;
	bool overflow;
};

static bool
wb_room(struct wbuf *w, size_t n)
{
	if (w->overflow || w->cap - w->len < n) {
		w->overflow = true;
		return false;
	}
	return true;
}

static void
wb_put(struct wbuf *w, const void *p, size_t n)
{
	if (n == 0 || !wb_room(w, n))
		return;
	memcpy(w->buf + w->len, p, n);
	w->len += n;
}

static void
wb_u16(struct wbuf *w, uint16_t v)
{
	uint8_t b[2];

	wr16(b, v);
	wb_put(w, b, sizeof(b));
}

static void
wb_u32(struct wbuf *w, uint32_t v)
{
	uint8_t b[4];

	wr32(b, v);
	wb_put(w, b, sizeof(b));
}

/* ---- response builders ---- */

/* Header + question of a response to q; counts filled in later. */
static void
reply_start(struct wbuf *w, const struct dns_query *q, unsigned rcode,
    uint16_t extra_flags)
{
	uint16_t flags = DNS_FLAG_QR | DNS_FLAG_RA | extra_flags |
	    (uint16_t)(q->opcode << 11) |
	    (q->flags & (DNS_FLAG_RD | DNS_FLAG_CD)) | (uint16_t)(rcode & 0xf);

	wb_u16(w, q->id);
	wb_u16(w, flags);
	wb_u16(w, q->have_question ? 1 : 0);
	wb_u16(w, 0);
	wb_u16(w, 0);
	wb_u16(w, 0);
	if (q->have_question) {
		wb_put(w, q->question.name.wire, q->question.name.len);
		wb_u16(w, q->question.qtype);
		wb_u16(w, q->question.qclass);
	}
}

static void
reply_counts(struct wbuf *w, unsigned an, unsigned ns, unsigned ar)
{
	if (w->overflow)
		return;
	wr16(w->buf + 6, (uint16_t)an);
	wr16(w->buf + 8, (uint16_t)ns);
	wr16(w->buf + 10, (uint16_t)ar);
}

/* Our OPT record, if the client sent one or the rcode needs it. */
static unsigned
reply_opt(struct wbuf *w, const struct dns_query *q, unsigned rcode)
{
	if (!q->edns.present && rcode <= 0xf)
		return 0;
	wb_put(w, "", 1); /* root owner */
	wb_u16(w, DNS_TYPE_OPT);
	wb_u16(w, DNS_EDNS_UDP_SIZE);
	wb_u32(w,
	    ((uint32_t)(rcode >> 4) << 24) |
	        (uint32_t)(q->edns.flags & DNS_EDNS_FLAG_DO));
	wb_u16(w, 0);
	return 1;
}

static int
reply_finish(struct wbuf *w, size_t *outlen, struct err *e)
{
	if (w->overflow) {
		err_set(e, "response does not fit %zu bytes", w->cap);
		return -1;
	}
	*outlen = w->len;
	return 0;
}

int
dns_build_error(const struct dns_query *q, unsigned rcode, uint8_t *out,
    size_t cap, size_t *outlen, struct err *e)
{
	struct wbuf w = {out, cap, 0, false};

	if (rcode > 0xfff) {
		err_set(e, "rcode %u out of range", rcode);
		return -1;
	}
	reply_start(&w, q, rcode, 0);
	unsigned ar = reply_opt(&w, q, rcode);
	reply_counts(&w, 0, 0, ar);
	return reply_finish(&w, outlen, e);
}

int
dns_build_truncated(const struct dns_query *q, uint8_t *out, size_t cap,
    size_t *outlen, struct err *e)
{
	struct wbuf w = {out, cap, 0, false};

	reply_start(&w, q, DNS_RCODE_NOERROR, DNS_FLAG_TC);
	unsigned ar = reply_opt(&w, q, DNS_RCODE_NOERROR);
	reply_counts(&w, 0, 0, ar);
	return reply_finish(&w, outlen, e);
}

/* Pointer to the question name, which always sits at the header's end. */
#define DNS_QNAME_PTR (0xc000u | DNS_HEADER_LEN)

static void
put_soa(struct wbuf *w, const struct dns_query *q, uint32_t neg_ttl)
{
	struct dns_name mname, rname;

	/* Constant, valid presentation names: these cannot fail. */
	(void)dns_name_from_pres(DNS_SOA_MNAME, &mname, NULL);
	(void)dns_name_from_pres(DNS_SOA_RNAME, &rname, NULL);
	wb_u16(w, DNS_QNAME_PTR);
	wb_u16(w, DNS_TYPE_SOA);
	wb_u16(w, q->question.qclass);
	wb_u32(w, neg_ttl);
	wb_u16(w, (uint16_t)(mname.len + rname.len + DNS_SOA_FIXED_LEN));
	wb_put(w, mname.wire, mname.len);
	wb_put(w, rname.wire, rname.len);
	wb_u32(w, DNS_SOA_SERIAL);
	wb_u32(w, DNS_SOA_REFRESH);
	wb_u32(w, DNS_SOA_RETRY);
	wb_u32(w, DNS_SOA_EXPIRE);
	wb_u32(w, neg_ttl);
}

int
dns_build_negative(const struct dns_query *q, unsigned rcode, uint32_t neg_ttl,
    uint8_t *out, size_t cap, size_t *outlen, struct err *e)
{
	struct wbuf w = {out, cap, 0, false};

	if (!q->have_question) {
		err_set(e, "negative answer needs a question");
		return -1;
	}
	if (rcode != DNS_RCODE_NXDOMAIN && rcode != DNS_RCODE_NOERROR) {
		err_set(e, "negative answer rcode %u", rcode);
		return -1;
	}
	reply_start(&w, q, rcode, 0);
	put_soa(&w, q, neg_ttl);
	unsigned ar = reply_opt(&w, q, rcode);
	reply_counts(&w, 0, 1, ar);
	return reply_finish(&w, outlen, e);
}

int
dns_build_answer(const struct dns_query *q, const struct dns_local_rr *rrs,
    size_t n, uint8_t *out, size_t cap, size_t *outlen, struct err *e)
{
	struct wbuf w = {out, cap, 0, false};

	if (!q->have_question) {
		err_set(e, "answer needs a question");
		return -1;
	}
	if (n > DNS_MSG_RR_MAX) {
		err_set(e, "too many records");
		return -1;
	}
	reply_start(&w, q, DNS_RCODE_NOERROR, 0);
	for (size_t i = 0; i < n; i++) {
		if (rrs[i].rdlen > sizeof(rrs[i].rdata)) {
			err_set(e, "rdata length %u", rrs[i].rdlen);
			return -1;
		}
		wb_u16(&w, DNS_QNAME_PTR);
		wb_u16(&w, rrs[i].type);
		wb_u16(&w, q->question.qclass);
		wb_u32(&w, rrs[i].ttl);
		wb_u16(&w, rrs[i].rdlen);
		wb_put(&w, rrs[i].rdata, rrs[i].rdlen);
	}
	unsigned ar = reply_opt(&w, q, DNS_RCODE_NOERROR);
	reply_counts(&w, (unsigned)n, 0, ar);
	return reply_finish(&w, outlen, e);
}

int
dns_build_localhost(const struct dns_query *q, uint32_t ttl, uint8_t *out,
    size_t cap, size_t *outlen, struct err *e)
{
	static const uint8_t v4[4] = {127, 0, 0, 1};
	static const uint8_t v6[16] = {[15] = 1};
	struct dns_local_rr rr[2];
	size_t n = 0;

	if (!q->have_question || !dns_name_is_localhost(&q->question.name)) {
		err_set(e, "not a localhost name");
		return -1;
	}
	uint16_t t = q->question.qtype;
	if (q->question.qclass == DNS_CLASS_IN) {
		if (t == DNS_TYPE_A || t == DNS_TYPE_ANY) {
			memset(&rr[n], 0, sizeof(rr[n]));
			rr[n].type = DNS_TYPE_A;
			rr[n].ttl = ttl;
			memcpy(rr[n].rdata, v4, sizeof(v4));
			rr[n++].rdlen = sizeof(v4);
		}
		if (t == DNS_TYPE_AAAA || t == DNS_TYPE_ANY) {
			memset(&rr[n], 0, sizeof(rr[n]));
			rr[n].type = DNS_TYPE_AAAA;
			rr[n].ttl = ttl;
			memcpy(rr[n].rdata, v6, sizeof(v6));
			rr[n++].rdlen = sizeof(v6);
		}
	}
	if (n == 0)
		return dns_build_negative(
		    q, DNS_RCODE_NOERROR, ttl, out, cap, outlen, e);
	return dns_build_answer(q, rr, n, out, cap, outlen, e);
}

/* ---- decoded messages ---- */

struct dns_msg *
dns_msg_new(void)
{
	struct dns_msg *m = malloc(sizeof(*m));

	if (m != NULL) {
		m->nrr = 0;
		m->arena_used = 0;
	}
	return m;
}

void
dns_msg_free(struct dns_msg *m)
{
	free(m);
}

/* Decodes one RR into m (the OPT record into m->edns). */
static int
msg_add_rr(struct dns_msg *m, const uint8_t *msg, size_t len,
    const struct rr_pos *rp, struct err *e)
{
	struct dns_name owner;
	size_t off = rp->owner_off;

	if (rp->type == DNS_TYPE_OPT) {
		if (parse_opt(msg, rp, &m->edns) == -1) {
			err_set(e, "bad or duplicate OPT record");
			return -1;
		}
		return 0;
	}
	if (m->nrr >= DNS_MSG_RR_MAX) {
		err_set(e, "more than %d records", DNS_MSG_RR_MAX);
		return -1;
	}
	struct dns_rr *rr = &m->rr[m->nrr];
	if (dns_name_decode(msg, len, &off, &owner) == -1 ||
	    arena_put(m, owner.wire, owner.len, &rr->owner_off) == -1) {
		err_set(e, "message too large to decode");
		return -1;
	}
	rr->owner_len = owner.len;
	rr->section = (uint8_t)rp->section;
	rr->type = rp->type;
	rr->rclass = rp->rclass;
	rr->ttl = rp->ttl;
	if (rd_decode(m, msg, len, rp, &rr->rdata_off, &rr->rdlen) == -1) {
		err_set(e, "bad rdata of type %u", rp->type);
		return -1;
	}
	m->count[rp->section]++;
	m->nrr++;
	return 0;
}

int
dns_msg_parse(struct dns_msg *m, const uint8_t *msg, size_t len, struct err *e)
{
	struct rr_iter it;
	struct rr_pos rp;
	int r;

	m->nrr = 0;
	m->arena_used = 0;
	m->rcode = 0;
	memset(m->count, 0, sizeof(m->count));
	memset(&m->edns, 0, sizeof(m->edns));
	memset(&m->question, 0, sizeof(m->question));
	m->have_question = false;
	if (len < DNS_HEADER_LEN || len > DNS_MSG_MAX) {
		err_set(e, "message length %zu", len);
		return -1;
	}
	m->id = rd16(msg);
	m->flags = rd16(msg + 2);
	if (rr_iter_init(&it, msg, len, &m->question, &m->have_question) ==
	    -1) {
		err_set(e, "bad question section");
		return -1;
	}
	while ((r = rr_iter_next(&it, &rp)) == 1)
		if (msg_add_rr(m, msg, len, &rp, e) == -1)
			return -1;
	if (r == -1) {
		err_set(e, "malformed record or trailing bytes");
		return -1;
	}
	m->rcode = (m->flags & 0xfu) | ((unsigned)m->edns.ext_rcode << 4);
	return 0;
}

void
dns_msg_rr_owner(const struct dns_msg *m, size_t i, struct dns_name *n)
{
	name_set(n, m->arena + m->rr[i].owner_off, m->rr[i].owner_len);
}

const uint8_t *
dns_msg_rr_rdata(const struct dns_msg *m, size_t i)
{
	return m->arena + m->rr[i].rdata_off;
}

/* ---- encoding with compression ---- */

struct ctab_ent {
	const uint8_t *wire; /* suffix bytes, stable while encoding */
	uint16_t len;
	uint16_t off;
};

struct enc {
	struct wbuf w;
	size_t n;
	struct ctab_ent ent[DNS_COMPRESS_MAX];
};

static void
put_name(struct enc *c, const uint8_t *wire, size_t len, bool compress)
{
	size_t pos = 0, match = len, moff = 0;

	/* Longest previously written suffix that matches exactly. */
	if (compress) {
		for (pos = 0; pos < len && wire[pos] != 0;
		     pos += 1 + (size_t)wire[pos]) {
			for (size_t i = 0; i < c->n; i++) {
				if (c->ent[i].len == len - pos &&
				    memcmp(c->ent[i].wire, wire + pos,
				        len - pos) == 0) {
					match = pos;
					moff = c->ent[i].off;
					break;
				}
			}
			if (match != len)
				break;
		}
	}
	/* Labels before the match are written in place and remembered. */
	for (pos = 0; pos < match && wire[pos] != 0;
	     pos += 1 + (size_t)wire[pos]) {
		if (c->n < DNS_COMPRESS_MAX && c->w.len <= DNS_PTR_OFF_MAX &&
		    !c->w.overflow) {
			c->ent[c->n].wire = wire + pos;
			c->ent[c->n].len = (uint16_t)(len - pos);
			c->ent[c->n].off = (uint16_t)c->w.len;
			c->n++;
		}
		wb_put(&c->w, wire + pos, 1 + (size_t)wire[pos]);
	}
	if (match != len)
		wb_u16(&c->w, (uint16_t)(0xc000u | moff));
	else
		wb_put(&c->w, "", 1);
}

/* Writes one decoded rdata, compressing names where allowed. */
static void
put_rdata(struct enc *c, const struct dns_rr *rr, const uint8_t *rd)
{
	size_t o = 0, nl;
	bool comp = rd_compressible(rr->type);
	enum rd_kind k = rd_kind(rr->type);

	if (!comp) {
		wb_put(&c->w, rd, rr->rdlen);
		return;
	}
	/* The arena holds valid uncompressed names: parse() checked them. */
	if (k == RD_U16_NAME) {
		wb_put(&c->w, rd, 2);
		o = 2;
	}
	nl = name_wire_len(rd + o, rr->rdlen - o);
	put_name(c, rd + o, nl, true);
	o += nl;
	if (k == RD_2NAMES || k == RD_SOA) {
		nl = name_wire_len(rd + o, rr->rdlen - o);
		put_name(c, rd + o, nl, true);
		o += nl;
	}
	wb_put(&c->w, rd + o, rr->rdlen - o);
}

int
dns_msg_encode(const struct dns_msg *m, uint8_t *out, size_t cap,
    size_t *outlen, struct err *e)
{
	struct enc *c;
	unsigned counts[3] = {0, 0, 0};

	if (m->rcode > 0xf && !m->edns.present) {
		err_set(e, "extended rcode %u without OPT", m->rcode);
		return -1;
	}
	if (cap > DNS_MSG_MAX)
		cap = DNS_MSG_MAX;
	if ((c = malloc(sizeof(*c))) == NULL) {
		err_set(e, "out of memory");
		return -1;
	}
	c->w = (struct wbuf){out, cap, 0, false};
	c->n = 0;
	wb_u16(&c->w, m->id);
	wb_u16(&c->w, (uint16_t)((m->flags & ~0xfu) | (m->rcode & 0xf)));
	wb_u16(&c->w, m->have_question ? 1 : 0);
	wb_u16(&c->w, 0);
	wb_u16(&c->w, 0);
	wb_u16(&c->w, 0);
	if (m->have_question) {
		put_name(c, m->question.name.wire, m->question.name.len, true);
		wb_u16(&c->w, m->question.qtype);
		wb_u16(&c->w, m->question.qclass);
	}
	for (unsigned s = 0; s < 3; s++) {
		for (size_t i = 0; i < m->nrr; i++) {
			const struct dns_rr *rr = &m->rr[i];
			if (rr->section != s)
				continue;
			put_name(
			    c, m->arena + rr->owner_off, rr->owner_len, true);
			wb_u16(&c->w, rr->type);
			wb_u16(&c->w, rr->rclass);
			wb_u32(&c->w, rr->ttl);
			size_t lenpos = c->w.len;
			wb_u16(&c->w, 0);
			put_rdata(c, rr, m->arena + rr->rdata_off);
			if (c->w.overflow)
				break;
			wr16(out + lenpos, (uint16_t)(c->w.len - lenpos - 2));
			counts[s]++;
		}
	}
	if (m->edns.present) {
		wb_put(&c->w, "", 1);
		wb_u16(&c->w, DNS_TYPE_OPT);
		wb_u16(&c->w, m->edns.udp_size);
		wb_u32(&c->w,
		    ((uint32_t)(m->rcode >> 4) << 24) |
		        ((uint32_t)m->edns.version << 16) | m->edns.flags);
		wb_u16(&c->w, 0);
		counts[2]++;
	}
	bool overflow = c->w.overflow;
	size_t n = c->w.len;
	free(c);
	if (overflow || counts[0] > UINT16_MAX || counts[1] > UINT16_MAX ||
	    counts[2] > UINT16_MAX) {
		err_set(e, "encoded message does not fit %zu bytes", cap);
		return -1;
	}
	wr16(out + 6, (uint16_t)counts[0]);
	wr16(out + 8, (uint16_t)counts[1]);
	wr16(out + 10, (uint16_t)counts[2]);
	*outlen = n;
	return 0;
}

bool
dns_msg_equal(const struct dns_msg *a, const struct dns_msg *b)
{
	if (a->id != b->id || a->flags != b->flags || a->rcode != b->rcode ||
	    a->have_question != b->have_question || a->nrr != b->nrr)
		return false;
	if (a->have_question &&
	    (a->question.name.len != b->question.name.len ||
	        memcmp(a->question.name.wire, b->question.name.wire,
	            a->question.name.len) != 0 ||
	        a->question.qtype != b->question.qtype ||
	        a->question.qclass != b->question.qclass))
		return false;
	if (a->edns.present != b->edns.present)
		return false;
	if (a->edns.present &&
	    (a->edns.udp_size != b->edns.udp_size ||
	        a->edns.version != b->edns.version ||
	        a->edns.flags != b->edns.flags))
		return false;
	for (size_t i = 0; i < a->nrr; i++) {
		const struct dns_rr *x = &a->rr[i], *y = &b->rr[i];
		if (x->section != y->section || x->type != y->type ||
		    x->rclass != y->rclass || x->ttl != y->ttl ||
		    x->owner_len != y->owner_len || x->rdlen != y->rdlen)
			return false;
		if (memcmp(a->arena + x->owner_off, b->arena + y->owner_off,
		        x->owner_len) != 0 ||
		    memcmp(a->arena + x->rdata_off, b->arena + y->rdata_off,
		        x->rdlen) != 0)
			return false;
	}
	return true;
}

bool
dns_msg_question_matches(const struct dns_msg *m, const struct dns_question *q)
{
	return m->have_question && m->question.qtype == q->qtype &&
	    m->question.qclass == q->qclass &&
	    dns_name_equal(&m->question.name, &q->name);
}

/* ---- chains ---- */

int
dns_chain_index(const struct dns_msg *m, const struct dns_chain *c,
    const struct dns_name *n)
{
	if (dns_name_equal(&m->question.name, n))
		return 0;
	for (size_t i = 0; i < c->n; i++)
		if (dns_name_equal(&c->link[i].to, n))
			return (int)i + 1;
	return -1;
}

static bool
chain_seen(const struct dns_msg *m, const struct dns_chain *c,
    const struct dns_name *n)
{
	return dns_chain_index(m, c, n) >= 0;
}

bool
dns_chain_contains(const struct dns_msg *m, const struct dns_chain *c,
    const struct dns_name *name)
{
	return chain_seen(m, c, name);
}

/*
 * Replaces the suffix `owner` of `cur` by `target`: the DNAME
 * substitution of RFC 6672. -1 if the result is too long.
 */
static int
dname_subst(const struct dns_name *cur, const struct dns_name *owner,
    const struct dns_name *target, struct dns_name *out)
{
	size_t at;

	if (!suffix_at(cur, owner->len, &at))
		return -1;
	if (at + target->len > DNS_NAME_WIRE_MAX)
		return -1;
	memcpy(out->wire, cur->wire, at);
	memcpy(out->wire + at, target->wire, target->len);
	name_set(out, out->wire, at + target->len);
	return 0;
}

int
dns_msg_chain(const struct dns_msg *m, struct dns_chain *c, struct err *e)
{
	struct dns_name cur;

	c->n = 0;
	if (!m->have_question) {
		err_set(e, "no question");
		return -1;
	}
	cur = m->question.name;
	for (;;) {
		struct dns_name next = {.len = 0}, owner, tgt;
		size_t ncname = 0;
		bool have_dname = false;
		uint16_t type = 0;

		for (size_t i = 0; i < m->nrr; i++) {
			const struct dns_rr *rr = &m->rr[i];
			if (rr->section != DNS_SEC_ANSWER)
				continue;
			if (rr->type != DNS_TYPE_CNAME &&
			    rr->type != DNS_TYPE_DNAME)
				continue;
			dns_msg_rr_owner(m, i, &owner);
			name_set(&tgt, dns_msg_rr_rdata(m, i), rr->rdlen);
			if (rr->type == DNS_TYPE_CNAME &&
			    dns_name_equal(&owner, &cur)) {
				/* Two aliases for one name: which would the
				 * client follow? Refuse to guess. */
				if (ncname > 0 &&
				    !dns_name_equal(&next, &tgt)) {
					err_set(e, "conflicting CNAME records");
					return -1;
				}
				ncname++;
				next = tgt;
				type = DNS_TYPE_CNAME;
			} else if (rr->type == DNS_TYPE_DNAME && ncname == 0 &&
			    !have_dname && !dns_name_equal(&owner, &cur) &&
			    dns_name_is_subdomain(&cur, &owner)) {
				if (dname_subst(&cur, &owner, &tgt, &next) ==
				    -1) {
					err_set(e, "DNAME result too long");
					return -1;
				}
				have_dname = true;
				type = DNS_TYPE_DNAME;
			}
		}
		if (ncname == 0 && !have_dname)
			return 0;
		if (chain_seen(m, c, &next)) {
			err_set(e, "alias loop");
			return -1;
		}
		if (c->n >= DNS_CHAIN_MAX) {
			err_set(e, "alias chain longer than %d", DNS_CHAIN_MAX);
			return -1;
		}
		c->link[c->n].type = type;
		c->link[c->n].from = cur;
		c->link[c->n].to = next;
		c->n++;
		cur = next;
	}
}

/* ---- SVCB ---- */

/*
 * An ipv4hint or ipv6hint value: vl bytes of w-byte addresses appended to
 * dst (the bytes of DNS_SVCB_HINT_MAX rows of w, *n used); the rest past the cap
 * sets hints_truncated. -1 when vl is no whole, non-zero number of them.
 */
static int
svc_hints(const uint8_t *v, uint16_t vl, size_t w, uint8_t *dst, size_t *n,
    struct dns_svcb *s)
{
	if (vl == 0 || vl % w != 0)
		return -1;
	for (size_t i = 0; i < vl / w; i++) {
		if (*n >= DNS_SVCB_HINT_MAX) {
			s->hints_truncated = true;
			break;
		}
		memcpy(dst + w * (*n)++, v + w * i, w);
	}
	return 0;
}

int
dns_svcb_parse(const uint8_t *rd, size_t rdlen, uint16_t type,
    struct dns_svcb *s, struct err *e)
{
	size_t o = 2, nl;
	int last = -1;

	memset(s, 0, sizeof(*s));
	s->type = type;
	if (rdlen < 3) {
		err_set(e, "SVCB rdata too short");
		return -1;
	}
	s->priority = rd16(rd);
	if ((nl = name_wire_len(rd + o, rdlen - o)) == 0) {
		err_set(e, "SVCB target is not an uncompressed name");
		return -1;
	}
	name_set(&s->target, rd + o, nl);
	o += nl;
	while (o < rdlen) {
		if (rdlen - o < 4) {
			err_set(e, "SVCB param truncated");
			return -1;
		}
		uint16_t key = rd16(rd + o), vl = rd16(rd + o + 2);
		o += 4;
		if ((int)key <= last || rdlen - o < vl) {
			err_set(e, "SVCB params out of order or truncated");
			return -1;
		}
		last = key;
		const uint8_t *v = rd + o;
		switch (key) {
		case DNS_SVC_MANDATORY:
			if (vl == 0 || vl % 2 != 0)
				goto bad;
			break;
		case DNS_SVC_IPV4HINT:
			if (svc_hints(v, vl, 4, (uint8_t *)s->v4, &s->nv4, s) ==
			    -1)
				goto bad;
			break;
		case DNS_SVC_IPV6HINT:
			if (svc_hints(
			        v, vl, 16, (uint8_t *)s->v6, &s->nv6, s) == -1)
				goto bad;
			break;
		case DNS_SVC_ECH:
			s->has_ech = true;
			break;
		case DNS_SVC_PORT:
			if (vl != 2)
				goto bad;
			break;
		}
		o += vl;
	}
	return 0;
bad:
	err_set(e, "SVCB param %d has a bad length", last);
	return -1;
}

/* ---- answers and TTLs ---- */

bool
dns_msg_min_ttl(const struct dns_msg *m, uint32_t *ttl)
{
	bool have = false, positive = false;
	uint32_t min = UINT32_MAX, soa = UINT32_MAX;

	for (size_t i = 0; i < m->nrr; i++) {
		const struct dns_rr *rr = &m->rr[i];
		if (rr->section == DNS_SEC_ANSWER) {
			if (rr->ttl < min)
				min = rr->ttl;
			have = true;
			if (m->have_question &&
			    (rr->type == m->question.qtype ||
			        m->question.qtype == DNS_TYPE_ANY))
				positive = true;
		} else if (rr->section == DNS_SEC_AUTHORITY &&
		    rr->type == DNS_TYPE_SOA &&
		    rr->rdlen >= DNS_SOA_FIXED_LEN) {
			uint32_t smin =
			    rd32(dns_msg_rr_rdata(m, i) + rr->rdlen - 4);
			uint32_t v = rr->ttl < smin ? rr->ttl : smin;
			if (v < soa)
				soa = v;
		}
	}
	bool negative = (m->rcode == DNS_RCODE_NXDOMAIN) ||
	    (m->rcode == DNS_RCODE_NOERROR && !positive);
	if (negative && soa != UINT32_MAX) {
		if (soa < min)
			min = soa;
		have = true;
	}
	if (have)
		*ttl = min;
	return have;
}

int
dns_answer_info(
    const struct dns_msg *m, struct dns_answer_info *ai, struct err *e)
{
	ai->rcode = m->rcode;
	ai->tc = (m->flags & DNS_FLAG_TC) != 0;
	ai->naddr = 0;
	ai->nsvcb = 0;
	ai->addr_truncated = false;
	ai->svcb_truncated = false;
	if (dns_msg_chain(m, &ai->chain, e) == -1)
		return -1;
	for (size_t i = 0; i < m->nrr; i++) {
		const struct dns_rr *rr = &m->rr[i];
		struct dns_name owner;
		if (rr->section != DNS_SEC_ANSWER || rr->rclass != DNS_CLASS_IN)
			continue;
		if (rr->type != DNS_TYPE_A && rr->type != DNS_TYPE_AAAA &&
		    rr->type != DNS_TYPE_HTTPS && rr->type != DNS_TYPE_SVCB)
			continue;
		dns_msg_rr_owner(m, i, &owner);
		int ci = dns_chain_index(m, &ai->chain, &owner);
		if (ci < 0)
			continue;
		if (rr->type == DNS_TYPE_A || rr->type == DNS_TYPE_AAAA) {
			if (ai->naddr >= DNS_ANSWER_ADDR_MAX) {
				ai->addr_truncated = true;
				continue;
			}
			struct dns_addr *a = &ai->addr[ai->naddr++];
			memset(a, 0, sizeof(*a));
			a->family = rr->type == DNS_TYPE_A ? 4 : 6;
			memcpy(a->addr, dns_msg_rr_rdata(m, i), rr->rdlen);
			a->ttl = rr->ttl;
			a->source = rr->type;
			a->owner = (uint8_t)ci;
			continue;
		}
		if (ai->nsvcb >= DNS_SVCB_MAX) {
			ai->svcb_truncated = true;
			continue;
		}
		if (dns_svcb_parse(dns_msg_rr_rdata(m, i), rr->rdlen, rr->type,
		        &ai->svcb[ai->nsvcb], e) == -1)
			return -1;
		ai->svcb[ai->nsvcb++].ttl = rr->ttl;
	}
	ai->have_ttl = dns_msg_min_ttl(m, &ai->ttl);
	return 0;
}

/* ---- in-place helpers ---- */

void
dns_wire_set_id(uint8_t *msg, size_t len, uint16_t id)
{
	if (len >= 2)
		wr16(msg, id);
}

int
dns_wire_copy_qname_case(uint8_t *msg, size_t len, const struct dns_question *q)
{
	size_t off = DNS_HEADER_LEN;
	struct dns_name n;

	if (len < DNS_HEADER_LEN || rd16(msg + 4) != 1)
		return -1;
	if (dns_name_decode(msg, len, &off, &n) == -1)
		return -1;
	/* Uncompressed in place iff it consumed exactly its wire length. */
	if (off - DNS_HEADER_LEN != n.len || !dns_name_equal(&n, &q->name))
		return -1;
	memcpy(msg + DNS_HEADER_LEN, q->name.wire, q->name.len);
	return 0;
}

int
dns_wire_age_ttls(uint8_t *msg, size_t len, uint32_t elapsed)
{
	struct rr_iter it;
	struct rr_pos rp;
	int r;

	/* Validate first so that a bad message is left untouched. */
	if (rr_iter_init(&it, msg, len, NULL, NULL) == -1)
		return -1;
	while ((r = rr_iter_next(&it, &rp)) == 1)
		;
	if (r == -1)
		return -1;
	(void)rr_iter_init(&it, msg, len, NULL, NULL);
	while (rr_iter_next(&it, &rp) == 1) {
		if (rp.type == DNS_TYPE_OPT)
			continue;
		wr32(msg + rp.fixed_off + 4,
		    rp.ttl > elapsed ? rp.ttl - elapsed : 0);
	}
	return 0;
}

int
dns_wire_min_ttl(const uint8_t *msg, size_t len, bool *have, uint32_t *ttl)
{
	struct rr_iter it;
	struct rr_pos rp;
	struct dns_question q;
	bool haveq, positive = false;
	uint32_t min = UINT32_MAX, soa = UINT32_MAX;
	uint8_t ext = 0;
	int r;

	*have = false;
	*ttl = 0;
	if (rr_iter_init(&it, msg, len, &q, &haveq) == -1)
		return -1;
	while ((r = rr_iter_next(&it, &rp)) == 1) {
		if (rp.type == DNS_TYPE_OPT) {
			ext = (uint8_t)(rp.ttl >> 24);
		} else if (rp.section == DNS_SEC_ANSWER) {
			if (rp.ttl < min)
				min = rp.ttl;
			*have = true;
			if (haveq &&
			    (rp.type == q.qtype || q.qtype == DNS_TYPE_ANY))
				positive = true;
		} else if (rp.section == DNS_SEC_AUTHORITY &&
		    rp.type == DNS_TYPE_SOA && rp.rdlen >= DNS_SOA_FIXED_LEN) {
			/* MINIMUM is the last field whatever the names are. */
			uint32_t smin = rd32(msg + rp.rdata_off + rp.rdlen - 4);
			uint32_t v = rp.ttl < smin ? rp.ttl : smin;
			if (v < soa)
				soa = v;
		}
	}
	if (r == -1) {
		*have = false;
		return -1;
	}
	unsigned rcode = (rd16(msg + 2) & 0xfu) | ((unsigned)ext << 4);
	bool negative = rcode == DNS_RCODE_NXDOMAIN ||
	    (rcode == DNS_RCODE_NOERROR && !positive);
	if (negative && soa != UINT32_MAX) {
		if (soa < min)
			min = soa;
		*have = true;
	}
	if (*have)
		*ttl = min;
	return 0;
}

/* ---- TCP framing ---- */

enum dns_tcp_frame
dns_tcp_frame(const uint8_t *buf, size_t avail, size_t *msglen)
{
	if (avail < DNS_TCP_PREFIX_LEN)
		return DNS_TCP_NEED_MORE;
	size_t l = rd16(buf);
	if (l < DNS_HEADER_LEN)
		return DNS_TCP_BAD;
	if (avail - DNS_TCP_PREFIX_LEN < l)
		return DNS_TCP_NEED_MORE;
	*msglen = l;
	return DNS_TCP_MSG;
}

int
dns_tcp_prefix(uint8_t out[DNS_TCP_PREFIX_LEN], size_t len)
{
	if (len > DNS_MSG_MAX)
		return -1;
	wr16(out, (uint16_t)len);
	return 0;
}

/* ---- address classification (the table: special_ranges.c) ---- */

static bool
all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != 0)
			return false;
	return true;
}

size_t
dns_addr_embedded_v4(const uint8_t a[16], uint8_t v4[DNS_EMBEDDED_V4_MAX][4])
{
	unsigned base;
	int form = special_v4_of(a, SPECIAL_FORMS, v4[0], &base);

	if (form == SPECIAL_FORM_COMPAT && all_zero(a + 12, 3) && a[15] <= 1)
		return 0; /* :: and ::1 are classified on their own */
	if (form >= 0)
		return 1;
	if (a[0] == 0x20 && a[1] == 0x01 && a[2] == 0 && a[3] == 0) {
		/* Teredo: server, then the client with its bits inverted. */
		memcpy(v4[0], a + 4, 4);
		for (size_t i = 0; i < 4; i++)
			v4[1][i] = (uint8_t)~a[12 + i];
		return 2;
	}
	return 0;
}

bool
dns_addr_is_internal(int family, const uint8_t *addr)
{
	if (family == AF_INET)
		family = 4;
	else if (family == AF_INET6)
		family = 6;
	return (special_addr_flags(family, addr) & SPECIAL_STRIP) != 0;
}
