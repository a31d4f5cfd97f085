/*
 * ip_tcp: the IPv4/IPv6 and TCP headers of one packet as the kernel queues
 * it (NFQUEUE, output hook): the flow it belongs to, its sequence number
 * and its payload. Pure and strict: bytes in, struct out; a packet this
 * cannot read with certainty (a fragment, an IPv6 extension header, a
 * length that disagrees) is an error, and the caller refuses the flow
 * (fail closed) rather than guess where the payload starts.
 */
#ifndef EGRESSD_IP_TCP_H
#define EGRESSD_IP_TCP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define IP_TCP_SYN 0x02
#define IP_TCP_RST 0x04
#define IP_TCP_FIN 0x01

struct ip_tcp {
	int family; /* 4 or 6 */
	uint8_t src[16], dst[16]; /* network order; IPv4 in the first 4 */
	uint16_t sport, dport; /* host order */
	uint32_t seq; /* host order */
	uint8_t flags; /* TCP flags byte */
	const uint8_t *data; /* the TCP payload, inside the input */
	size_t len;
};

/* 0, or -1 with e (no input bytes copied into it). */
int ip_tcp_parse(
    const uint8_t *pkt, size_t n, struct ip_tcp *out, struct err *e);

#endif
