#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "util/addr.h"

bool
addr_parse_ip(const char *s, size_t n, struct addr *out)
{
	char buf[INET6_ADDRSTRLEN + 1];

	if (n == 0 || n >= sizeof(buf) || memchr(s, '\0', n) != NULL)
		return false;
	memcpy(buf, s, n);
	buf[n] = '\0';
	memset(out, 0, sizeof(*out));
	if (inet_pton(AF_INET, buf, out->a) == 1)
		out->family = AF_INET;
	else if (inet_pton(AF_INET6, buf, out->a) == 1)
		out->family = AF_INET6;
	else
		return false;
	return true;
}

/* Strict decimal: digits only, no sign, no leading zero, at most max. */
static bool
parse_dec(const char *s, unsigned max, unsigned *out)
{
	unsigned long v = 0;

	if (*s == '\0' || (s[0] == '0' && s[1] != '\0'))
		return false;
	for (; *s != '\0'; s++) {
		if (*s < '0' || *s > '9')
			return false;
		v = v * 10 + (unsigned)(*s - '0');
		if (v > max)
			return false;
	}
	*out = (unsigned)v;
	return true;
}

int
addr_parse_hostport(const char *s, uint16_t default_port, unsigned flags,
    struct addr *out, uint16_t *port, struct err *e)
{
	const char *host = s, *p = NULL, *colon;
	size_t hl;
	unsigned v;

	if (s[0] == '[') {
		const char *rb = strchr(s, ']');

		if (rb == NULL) {
			err_set(e, "\"%.64s\": missing ']'", s);
			return -1;
		}
		host = s + 1;
		hl = (size_t)(rb - host);
		if (rb[1] == ':')
			p = rb + 2;
		else if (rb[1] != '\0') {
			err_set(e, "\"%.64s\": junk after ']'", s);
			return -1;
		}
		if (!addr_parse_ip(host, hl, out) || out->family != AF_INET6) {
			err_set(e, "\"%.64s\": not an IPv6 address literal", s);
			return -1;
		}
	} else {
		colon = strchr(s, ':');
		/* Two colons: a bare IPv6 literal, which cannot carry a port. */
		if (colon != NULL && strchr(colon + 1, ':') != NULL)
			colon = NULL;
		hl = colon != NULL ? (size_t)(colon - s) : strlen(s);
		if (colon != NULL)
			p = colon + 1;
		if (!addr_parse_ip(host, hl, out)) {
			err_set(e,
			    "\"%.64s\": not an IP address literal (hostnames "
			    "are not accepted)",
			    s);
			return -1;
		}
	}
	if ((flags & ADDR_V4_ONLY) && out->family != AF_INET) {
		err_set(e, "\"%.64s\": not an IPv4 address", s);
		return -1;
	}
	if ((flags & ADDR_V6_ONLY) && out->family != AF_INET6) {
		err_set(e, "\"%.64s\": not an IPv6 address", s);
		return -1;
	}
	if (p == NULL) {
		if (flags & ADDR_PORT_REQUIRED) {
			err_set(e, "\"%.64s\": missing port", s);
			return -1;
		}
		*port = default_port;
		return 0;
	}
	if (p[0] == '\0' || strspn(p, "0123456789") != strlen(p)) {
		err_set(e, "\"%.64s\": the port is not a decimal number", s);
		return -1;
	}
	if (!parse_dec(p, 65535, &v) ||
	    (v == 0 && !(flags & ADDR_PORT_ZERO_OK))) {
		err_set(e, "\"%.64s\": port out of range %d..65535", s,
		    (flags & ADDR_PORT_ZERO_OK) ? 0 : 1);
		return -1;
	}
	*port = (uint16_t)v;
	return 0;
}

unsigned
addr_bits(const struct addr *a)
{
	return a->family == AF_INET ? 32 : 128;
}

int
addr_parse_cidr(const char *s, struct addr *out, unsigned *plen, struct err *e)
{
	const char *slash = strchr(s, '/');
	size_t hl = slash != NULL ? (size_t)(slash - s) : strlen(s);

	if (!addr_parse_ip(s, hl, out)) {
		err_set(e, "\"%.64s\": not an IP address or CIDR", s);
		return -1;
	}
	*plen = addr_bits(out);
	if (slash != NULL && !parse_dec(slash + 1, addr_bits(out), plen)) {
		err_set(e, "\"%.64s\": prefix length must be 0 to %u", s,
		    addr_bits(out));
		return -1;
	}
	return 0;
}

void
addr_mask(struct addr *a, unsigned plen)
{
	unsigned i, w = addr_bits(a) / 8;

	for (i = 0; i < w; i++) {
		if (plen >= 8 * (i + 1))
			continue;
		if (plen <= 8 * i)
			a->a[i] = 0;
		else
			a->a[i] &= (uint8_t)(0xff00u >> (plen - 8 * i));
	}
}

socklen_t
addr_to_sockaddr(
    const struct addr *a, uint16_t port, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (a->family == AF_INET) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)ss;

		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
		memcpy(&s4->sin_addr, a->a, 4);
		return sizeof(*s4);
	}
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

	s6->sin6_family = AF_INET6;
	s6->sin6_port = htons(port);
	memcpy(&s6->sin6_addr, a->a, 16);
	return sizeof(*s6);
}

int
addr_from_sockaddr(const struct sockaddr *sa, struct addr *out, uint16_t *port)
{
	memset(out, 0, sizeof(*out));
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;

		out->family = AF_INET;
		memcpy(out->a, &s4->sin_addr, 4);
		if (port != NULL)
			*port = ntohs(s4->sin_port);
		return 0;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;

		out->family = AF_INET6;
		memcpy(out->a, &s6->sin6_addr, 16);
		if (port != NULL)
			*port = ntohs(s6->sin6_port);
		return 0;
	}
	return -1;
}

void
addr_format(const struct addr *a, char *buf, size_t cap)
{
	if (cap == 0)
		return;
	if (inet_ntop(a->family, a->a, buf, (socklen_t)cap) == NULL)
		buf[0] = '\0';
}

void
addr_format_port(const struct addr *a, uint16_t port, char *buf, size_t cap)
{
	char ip[INET6_ADDRSTRLEN];

	addr_format(a, ip, sizeof(ip));
	(void)snprintf(buf, cap, a->family == AF_INET6 ? "[%s]:%u" : "%s:%u",
	    ip, (unsigned)port);
}
