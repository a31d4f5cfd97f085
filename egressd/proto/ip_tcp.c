/*
 * ip_tcp: IPv4/IPv6 + TCP headers of a queued packet (ip_tcp.h).
 */

#include <string.h>

#include "egressd/proto/ip_tcp.h"

#define IP4_HDR_MIN 20
#define IP6_HDR_LEN 40
#define TCP_HDR_MIN 20
#define PROTO_TCP 6

static uint16_t
be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t
be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | p[3];
}

/* The network header: out's addresses, *off and *end of the TCP segment
 * inside pkt. */
static int
ip_tcp_net(const uint8_t *pkt, size_t n, struct ip_tcp *out, size_t *off,
    size_t *end, struct err *e)
{
	size_t ihl, tot;

	if (n < 1) {
		err_set(e, "empty packet");
		return -1;
	}
	if (pkt[0] >> 4 == 4) {
		ihl = (size_t)(pkt[0] & 0x0f) * 4;
		if (n < IP4_HDR_MIN || ihl < IP4_HDR_MIN || ihl > n) {
			err_set(e, "short IPv4 header");
			return -1;
		}
		tot = be16(pkt + 2);
		/* MF set or an offset: a fragment */
		if ((be16(pkt + 6) & 0x3fff) != 0) {
			err_set(e, "IPv4 fragment");
			return -1;
		}
		if (pkt[9] != PROTO_TCP) {
			err_set(e, "not TCP");
			return -1;
		}
		out->family = 4;
		memcpy(out->src, pkt + 12, 4);
		memcpy(out->dst, pkt + 16, 4);
		*off = ihl;
	} else if (pkt[0] >> 4 == 6) {
		if (n < IP6_HDR_LEN) {
			err_set(e, "short IPv6 header");
			return -1;
		}
		tot = IP6_HDR_LEN + (size_t)be16(pkt + 4);
		if (pkt[6] != PROTO_TCP) {
			err_set(e, "IPv6 extension header or not TCP");
			return -1;
		}
		out->family = 6;
		memcpy(out->src, pkt + 8, 16);
		memcpy(out->dst, pkt + 24, 16);
		*off = IP6_HDR_LEN;
	} else {
		err_set(e, "not IPv4 or IPv6");
		return -1;
	}
	if (tot > n || tot < *off) {
		err_set(e, "IP length disagrees with the packet");
		return -1;
	}
	*end = tot;
	return 0;
}

int
ip_tcp_parse(const uint8_t *pkt, size_t n, struct ip_tcp *out, struct err *e)
{
	size_t off, end, doff;

	memset(out, 0, sizeof(*out));
	if (ip_tcp_net(pkt, n, out, &off, &end, e) < 0)
		return -1;
	if (end - off < TCP_HDR_MIN) {
		err_set(e, "short TCP header");
		return -1;
	}
	doff = (size_t)(pkt[off + 12] >> 4) * 4;
	if (doff < TCP_HDR_MIN || doff > end - off) {
		err_set(e, "bad TCP data offset");
		return -1;
	}
	out->sport = be16(pkt + off);
	out->dport = be16(pkt + off + 2);
	out->seq = be32(pkt + off + 4);
	out->flags = pkt[off + 13];
	out->data = pkt + off + doff;
	out->len = end - off - doff;
	return 0;
}
