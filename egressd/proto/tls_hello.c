/*
 * tls_hello: ClientHello peek (see tls_hello.h). RFC 8446 4.1.2 and 5.1,
 * RFC 6066 3 (server_name), RFC 7301 3.1 (ALPN).
 */
#include "egressd/proto/tls_hello.h"
#include "util/addr.h"

#include <arpa/inet.h>
#include <string.h>

#define TLS_CT_HANDSHAKE 22
#define TLS_HS_CLIENT_HELLO 1
#define TLS_HS_HEADER_LEN 4
#define TLS_EXT_PRE_SHARED_KEY 41

/* A bounded reader over one span of the message. */
struct rd {
	const uint8_t *p;
	size_t n;
};

static bool
rd_u8(struct rd *r, unsigned *v)
{
	if (r->n < 1)
		return false;
	*v = r->p[0];
	r->p++;
	r->n--;
	return true;
}

static bool
rd_u16(struct rd *r, unsigned *v)
{
	if (r->n < 2)
		return false;
	*v = (unsigned)r->p[0] << 8 | r->p[1];
	r->p += 2;
	r->n -= 2;
	return true;
}

/* The next len bytes as a sub-reader. */
static bool
rd_sub(struct rd *r, size_t len, struct rd *sub)
{
	if (r->n < len)
		return false;
	sub->p = r->p;
	sub->n = len;
	r->p += len;
	r->n -= len;
	return true;
}

/* A vector with a 1- or 2-byte length prefix; empty allowed only if min is
 * 0. */
static bool
rd_vec(struct rd *r, int width, size_t min, struct rd *sub)
{
	unsigned len;

	if (!(width == 1 ? rd_u8(r, &len) : rd_u16(r, &len)))
		return false;
	return len >= min && rd_sub(r, len, sub);
}

static bool
is_grease(unsigned v)
{
	/* RFC 8701: 0x0a0a, 0x1a1a, ... 0xfafa */
	return (v & 0x0f0f) == 0x0a0a && (v >> 8) == (v & 0xff);
}

static bool
all_digits(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return n != 0;
}

/*
 * The host_name as a host name: LDH labels (and '_', which real names
 * use), 1-63 bytes each, 253 bytes in all after one trailing dot is
 * removed. An IPv4 or IPv6 literal (or a name whose last label is numeric
 * or 0x-hex, which inet_aton would take as an address) is flagged.
 */
static int
sni_take(struct tls_hello *h, const uint8_t *name, size_t n, struct err *e)
{
	char buf[TLS_HELLO_SNI_MAX + 2];
	size_t i, label = 0, last = 0;
	bool colon = false;

	if (n != 0 && name[n - 1] == '.')
		n--;
	if (n == 0 || n > TLS_HELLO_SNI_MAX) {
		err_set(e, "ClientHello: server_name of %zu bytes", n);
		return -1;
	}
	for (i = 0; i < n; i++) {
		uint8_t c = name[i];

		if (c >= 'A' && c <= 'Z')
			c = (uint8_t)(c - 'A' + 'a');
		if (c == '.') {
			if (label == 0) {
				err_set(e,
				    "ClientHello: server_name has an "
				    "empty label");
				return -1;
			}
			label = 0;
			last = i + 1;
		} else if (c == ':') {
			colon = true;
		} else if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		               c == '-' || c == '_')) {
			err_set(e,
			    "ClientHello: server_name byte 0x%02x at offset "
			    "%zu is not a host name character",
			    name[i], i);
			return -1;
		} else if (++label > 63) {
			err_set(e,
			    "ClientHello: server_name label longer "
			    "than 63 bytes");
			return -1;
		}
		buf[i] = (char)c;
	}
	if (label == 0 && !colon) {
		/* "a.." less its one trailing dot */
		err_set(e, "ClientHello: server_name has an empty label");
		return -1;
	}
	buf[n] = '\0';
	if (colon) {
		struct addr a6;

		if (!addr_parse_ip(buf, n, &a6) || a6.family != AF_INET6) {
			err_set(e,
			    "ClientHello: server_name has ':' but is "
			    "no IPv6 address");
			return -1;
		}
		h->sni_is_ip = true;
	} else {
		const char *tld = buf + last;
		size_t tn = n - last;
		bool hex = tn > 2 && tld[0] == '0' && tld[1] == 'x';

		for (i = 2; hex && i < tn; i++)
			hex = (tld[i] >= '0' && tld[i] <= '9') ||
			    (tld[i] >= 'a' && tld[i] <= 'f');
		h->sni_is_ip = all_digits(tld, tn) || hex;
	}
	memcpy(h->sni, buf, n + 1);
	h->has_sni = true;
	return 0;
}

static int
ext_server_name(struct tls_hello *h, struct rd *x, struct err *e)
{
	struct rd list, name;
	unsigned type;

	if (!rd_vec(x, 2, 1, &list) || x->n != 0) {
		err_set(e, "ClientHello: malformed server_name extension");
		return -1;
	}
	while (list.n != 0) {
		if (!rd_u8(&list, &type) || !rd_vec(&list, 2, 1, &name)) {
			err_set(e, "ClientHello: malformed server_name entry");
			return -1;
		}
		/* RFC 6066: one name per type; host_name is the only type */
		if (type != 0 || h->has_sni) {
			err_set(e, "ClientHello: server_name list with %s",
			    type != 0 ? "an unknown name type"
			              : "more than one host_name");
			return -1;
		}
		if (sni_take(h, name.p, name.n, e) < 0)
			return -1;
	}
	return 0;
}

static int
ext_alpn(struct tls_hello *h, struct rd *x, struct err *e)
{
	struct rd list, proto;

	if (!rd_vec(x, 2, 2, &list) || x->n != 0) {
		err_set(e, "ClientHello: malformed ALPN extension");
		return -1;
	}
	h->has_alpn = true;
	while (list.n != 0) {
		if (!rd_vec(&list, 1, 1, &proto)) {
			err_set(e, "ClientHello: malformed ALPN protocol name");
			return -1;
		}
		/* kept only whole and without NUL, so a comparison can never
		 * be fooled by a truncated name */
		if (h->nalpn < TLS_HELLO_ALPN_MAX &&
		    proto.n <= TLS_HELLO_ALPN_LEN_MAX &&
		    memchr(proto.p, '\0', proto.n) == NULL) {
			memcpy(h->alpn[h->nalpn], proto.p, proto.n);
			h->alpn[h->nalpn][proto.n] = '\0';
		}
		h->nalpn++;
	}
	return 0;
}

static int
ext_supported_versions(struct tls_hello *h, struct rd *x, struct err *e)
{
	struct rd list;
	unsigned v;

	if (!rd_vec(x, 1, 2, &list) || x->n != 0 || list.n % 2 != 0) {
		err_set(e, "ClientHello: malformed supported_versions");
		return -1;
	}
	while (rd_u16(&list, &v))
		if (!is_grease(v) && v > h->max_version)
			h->max_version = (uint16_t)v;
	return 0;
}

static int
parse_extensions(struct tls_hello *h, struct rd *r, struct err *e)
{
	uint8_t seen[65536 / 8];
	struct rd exts, x;
	unsigned type;
	bool psk_seen = false;

	if (r->n == 0)
		return 0; /* TLS <= 1.2 may send none */
	if (!rd_vec(r, 2, 0, &exts) || r->n != 0) {
		err_set(e,
		    "ClientHello: extensions length does not match "
		    "the message");
		return -1;
	}
	memset(seen, 0, sizeof(seen));
	while (exts.n != 0) {
		if (!rd_u16(&exts, &type) || !rd_vec(&exts, 2, 0, &x)) {
			err_set(e, "ClientHello: truncated extension");
			return -1;
		}
		if (seen[type / 8] & (1u << (type % 8))) {
			err_set(
			    e, "ClientHello: extension %u sent twice", type);
			return -1;
		}
		if (psk_seen) {
			err_set(e,
			    "ClientHello: pre_shared_key is not the "
			    "last extension");
			return -1;
		}
		seen[type / 8] |= (uint8_t)(1u << (type % 8));
		h->nexts++;
		switch (type) {
		case TLS_EXT_SERVER_NAME:
			if (ext_server_name(h, &x, e) < 0)
				return -1;
			break;
		case TLS_EXT_ALPN:
			if (ext_alpn(h, &x, e) < 0)
				return -1;
			break;
		case TLS_EXT_SUPPORTED_VERSIONS:
			if (ext_supported_versions(h, &x, e) < 0)
				return -1;
			break;
		case TLS_EXT_ECH:
			h->has_ech = true;
			break;
		case TLS_EXT_ESNI:
			h->has_esni = true;
			break;
		case TLS_EXT_PRE_SHARED_KEY:
			psk_seen = true;
			break;
		default:
			break;
		}
	}
	return 0;
}

/* The ClientHello body (after the 4-byte handshake header). */
static int
parse_body(struct tls_hello *h, const uint8_t *p, size_t n, struct err *e)
{
	struct rd r = {p, n}, v;
	unsigned ver, m;
	bool null_comp = false;

	if (!rd_u16(&r, &ver) || !rd_sub(&r, 32, &v)) {
		err_set(e, "ClientHello: truncated header");
		return -1;
	}
	if (ver < 0x0301 || ver > 0x0304) {
		err_set(e,
		    "ClientHello: client_version 0x%04x is not TLS "
		    "1.0-1.3",
		    ver);
		return -1;
	}
	h->legacy_version = h->max_version = (uint16_t)ver;
	if (!rd_vec(&r, 1, 0, &v) || v.n > 32) {
		err_set(e, "ClientHello: malformed legacy_session_id");
		return -1;
	}
	if (!rd_vec(&r, 2, 2, &v) || v.n % 2 != 0) {
		err_set(e, "ClientHello: malformed cipher_suites");
		return -1;
	}
	if (!rd_vec(&r, 1, 1, &v)) {
		err_set(e, "ClientHello: malformed compression_methods");
		return -1;
	}
	while (rd_u8(&v, &m))
		null_comp |= m == 0;
	if (!null_comp) {
		err_set(e, "ClientHello: no null compression method");
		return -1;
	}
	return parse_extensions(h, &r, e);
}

/*
 * The record header at buf[off]: a handshake record of a sane version and
 * length, whole in buf (*rlen: its length). TLS_HELLO_OK, TLS_HELLO_MORE,
 * or TLS_HELLO_BAD with e.
 */
static enum tls_hello_rc
record_at(
    const uint8_t *buf, size_t len, size_t off, size_t *rlen, struct err *e)
{
	if (len - off < TLS_RECORD_HEADER_LEN)
		return TLS_HELLO_MORE;
	if (buf[off] != TLS_CT_HANDSHAKE) {
		err_set(e, "TLS record of type %u inside the ClientHello",
		    buf[off]);
		return TLS_HELLO_BAD;
	}
	if (buf[off + 1] != 3 || buf[off + 2] > 4) {
		err_set(
		    e, "TLS record version %u.%u", buf[off + 1], buf[off + 2]);
		return TLS_HELLO_BAD;
	}
	*rlen = (size_t)buf[off + 3] << 8 | buf[off + 4];
	if (*rlen == 0 || *rlen > TLS_RECORD_PLAINTEXT_MAX) {
		err_set(e, "TLS record of %zu bytes", *rlen);
		return TLS_HELLO_BAD;
	}
	if (len - off - TLS_RECORD_HEADER_LEN < *rlen)
		return TLS_HELLO_MORE;
	return TLS_HELLO_OK;
}

/*
 * The handshake message reassembled so far (have bytes of msg): 1 when it
 * is a whole ClientHello, 0 when more is needed, -1 with e when it is not
 * a ClientHello, too long, or followed by other bytes.
 */
static int
reassembled(const uint8_t *msg, size_t have, struct err *e)
{
	size_t need;

	if (have < TLS_HS_HEADER_LEN)
		return 0;
	if (msg[0] != TLS_HS_CLIENT_HELLO) {
		err_set(e, "handshake message %u is not a ClientHello", msg[0]);
		return -1;
	}
	need = TLS_HS_HEADER_LEN +
	    ((size_t)msg[1] << 16 | (size_t)msg[2] << 8 | msg[3]);
	if (need > TLS_HS_HEADER_LEN + TLS_HELLO_MSG_MAX) {
		err_set(e, "ClientHello of %zu bytes (at most %u)",
		    need - TLS_HS_HEADER_LEN, TLS_HELLO_MSG_MAX);
		return -1;
	}
	if (have > need) {
		/* a client sends nothing else in its first
		 * flight's handshake records */
		err_set(e, "bytes after the ClientHello in its record");
		return -1;
	}
	return have == need ? 1 : 0;
}

enum tls_hello_rc
tls_hello_parse(
    const uint8_t *buf, size_t len, struct tls_hello *out, struct err *e)
{
	uint8_t msg[TLS_HS_HEADER_LEN + TLS_HELLO_MSG_MAX];
	const uint8_t *whole = NULL;
	size_t off = 0, have = 0, need = 0;
	enum tls_hello_rc rc;
	int done;

	memset(out, 0, sizeof(*out));
	if (len != 0 && buf[0] != TLS_CT_HANDSHAKE) {
		err_set(e, "not a TLS handshake record (first byte 0x%02x)",
		    buf[0]);
		return TLS_HELLO_NOT_TLS;
	}
	/* Records until the handshake message is whole. */
	for (;;) {
		size_t rlen, take;

		if ((rc = record_at(buf, len, off, &rlen, e)) != TLS_HELLO_OK)
			return rc;
		off += TLS_RECORD_HEADER_LEN;
		if (have == 0 && rlen >= TLS_HS_HEADER_LEN) {
			/* the common case: the whole message in one record */
			need = TLS_HS_HEADER_LEN +
			    ((size_t)buf[off + 1] << 16 |
			        (size_t)buf[off + 2] << 8 | buf[off + 3]);
			if (buf[off] == TLS_HS_CLIENT_HELLO &&
			    need <= TLS_HS_HEADER_LEN + TLS_HELLO_MSG_MAX &&
			    need == rlen) {
				whole = buf + off;
				have = need;
				off += rlen;
				break;
			}
		}
		take = rlen;
		if (have + take > sizeof(msg)) {
			err_set(e, "ClientHello longer than %u bytes",
			    TLS_HELLO_MSG_MAX);
			return TLS_HELLO_BAD;
		}
		memcpy(msg + have, buf + off, take);
		have += take;
		off += rlen;
		if ((done = reassembled(msg, have, e)) < 0)
			return TLS_HELLO_BAD;
		if (done > 0) {
			whole = msg;
			break;
		}
	}
	/* both ways out of the loop checked whole[0] == TLS_HS_CLIENT_HELLO */
	if (parse_body(out, whole + TLS_HS_HEADER_LEN, have - TLS_HS_HEADER_LEN,
	        e) < 0) {
		memset(out, 0, sizeof(*out));
		return TLS_HELLO_BAD;
	}
	out->consumed = off;
	return TLS_HELLO_OK;
}

bool
tls_hello_offers_alpn(const struct tls_hello *h, const char *proto)
{
	size_t i,
	    n = h->nalpn < TLS_HELLO_ALPN_MAX ? h->nalpn : TLS_HELLO_ALPN_MAX;

	for (i = 0; i < n; i++)
		if (strcmp(h->alpn[i], proto) == 0)
			return true;
	return false;
}
