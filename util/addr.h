/*
 * addr: the one parser of IP address text (literals, ip:port, CIDR) and
 * the one sockaddr builder. Hostnames are never accepted: what egressd
 * listens on or talks to is configured as addresses, so no lookup can be
 * steered. Pure; messages name the text (cut to 64 bytes), not what it
 * was for (callers prefix that).
 */
#ifndef EGRESSD_ADDR_H
#define EGRESSD_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "util/err.h"

struct addr {
	int family; /* AF_INET or AF_INET6 */
	uint8_t a[16]; /* network order; the first 4 bytes for AF_INET */
};

/* Longest text of addr_format(): "[v6]:65535". */
#define ADDR_TEXT_MAX 56

/* s[0..n) is exactly an IPv4 or IPv6 literal (no brackets, zone or port). */
bool addr_parse_ip(const char *s, size_t n, struct addr *out);

/* How addr_parse_hostport() treats the port. */
#define ADDR_PORT_REQUIRED 0x1u /* "ip" alone is an error */
#define ADDR_PORT_ZERO_OK 0x2u /* ":0" accepted (let the kernel pick) */
#define ADDR_V4_ONLY 0x4u
#define ADDR_V6_ONLY 0x8u

/*
 * "1.2.3.4", "1.2.3.4:53", "[2001:db8::1]", "[2001:db8::1]:53" or a bare
 * "2001:db8::1" (no port possible) into *out and *port (default_port when
 * absent).
 */
int addr_parse_hostport(const char *s, uint16_t default_port, unsigned flags,
    struct addr *out, uint16_t *port, struct err *e);

/*
 * "ip" or "ip/len" into *out and *plen (the full width when there is no
 * "/len"; len is decimal, at most the width). Host bits below the prefix
 * are kept: addr_mask() clears them where a caller wants that.
 */
int addr_parse_cidr(
    const char *s, struct addr *out, unsigned *plen, struct err *e);

/* Bits of the address width: 32 or 128. */
unsigned addr_bits(const struct addr *a);
/* Clears the bits below plen. */
void addr_mask(struct addr *a, unsigned plen);

/* *ss (zeroed first) for a and port; returns its length. */
socklen_t addr_to_sockaddr(
    const struct addr *a, uint16_t port, struct sockaddr_storage *ss);
/* The reverse; -1 for a family other than AF_INET and AF_INET6. */
int addr_from_sockaddr(
    const struct sockaddr *sa, struct addr *out, uint16_t *port);

/* "1.2.3.4:53" / "[2001:db8::1]:53" into buf (ADDR_TEXT_MAX fits). */
void addr_format_port(
    const struct addr *a, uint16_t port, char *buf, size_t cap);
/* The literal alone. */
void addr_format(const struct addr *a, char *buf, size_t cap);

#endif
