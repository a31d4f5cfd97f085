/*
 * dns_upstream_parse: the upstream side's pure part (see dns_upstream.h).
 * Addresses from the configuration and from resolv.conf, and the bytes of
 * a query sent upstream. No sockets, no event loop, no c-ares.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "egressd/dns/dns_upstream.h"
#include "util/addr.h"
#include "util/fileread.h"

/* ---- parsing (pure) ---- */

int
dns_upstream_parse(const char *s, struct dns_upstream_addr *out, struct err *e)
{
	struct addr a;

	if (s == NULL || *s == '\0') {
		err_set(e, "empty upstream");
		return -1;
	}
	if (strlen(s) >= DNS_UPSTREAM_TEXT_MAX) {
		err_set(e, "upstream too long");
		return -1;
	}
	memset(out, 0, sizeof(*out));
	if (addr_parse_hostport(s, EGRESSD_DEFAULT_DNS_UPSTREAM_PORT, 0, &a,
	        &out->port, e) == -1)
		return -1;
	out->family = a.family;
	memcpy(out->addr, a.a, sizeof(out->addr));
	addr_format_port(&a, out->port, out->text, sizeof(out->text));
	return 0;
}

int
dns_upstream_parse_list(const char *const *v, size_t n,
    struct dns_upstream_addr *out, size_t max, size_t *nout, struct err *e)
{
	size_t i;

	*nout = 0;
	if (n > max) {
		err_set(e, "too many upstreams (%zu, max %zu)", n, max);
		return -1;
	}
	for (i = 0; i < n; i++)
		if (dns_upstream_parse(v[i], &out[i], e) < 0)
			return -1;
	*nout = n;
	return 0;
}

int
dns_upstream_parse_resolv_conf(const char *buf, size_t len,
    struct dns_upstream_addr *out, size_t max, size_t *nout, struct err *e)
{
	size_t off = 0;
	bool have_err = false;
	struct err first;

	*nout = 0;
	err_clear(&first);
	while (off < len) {
		const char *line = buf + off;
		const char *nl = memchr(line, '\n', len - off);
		size_t ll = nl != NULL ? (size_t)(nl - line) : len - off;
		char tmp[DNS_UPSTREAM_TEXT_MAX + 16];
		char *p, *word;
		struct err le;

		off += ll + (nl != NULL ? 1 : 0);
		if (ll >= sizeof(tmp))
			continue; /* no valid nameserver line is that long */
		memcpy(tmp, line, ll);
		tmp[ll] = '\0';
		p = tmp;
		while (*p == ' ' || *p == '\t')
			p++;
		if (strncmp(p, "nameserver", 10) != 0 ||
		    (p[10] != ' ' && p[10] != '\t'))
			continue;
		p += 10;
		while (*p == ' ' || *p == '\t')
			p++;
		word = p;
		while (*p != '\0' && *p != ' ' && *p != '\t' && *p != '\r' &&
		    *p != '#' && *p != ';')
			p++;
		*p = '\0';
		if (*nout >= max)
			break;
		if (dns_upstream_parse(word, &out[*nout], &le) < 0) {
			if (!have_err) {
				first = le;
				have_err = true;
			}
			continue;
		}
		/* resolv.conf never carries a port: "ip:port" is not glibc's. */
		if (out[*nout].port != EGRESSD_DEFAULT_DNS_UPSTREAM_PORT) {
			if (!have_err) {
				err_set(&first, "%s: ports are not valid here",
				    word);
				have_err = true;
			}
			continue;
		}
		(*nout)++;
	}
	if (*nout == 0) {
		if (have_err)
			err_set(e, "no usable nameserver: %s", first.msg);
		else
			err_set(e, "no nameserver lines");
		return -1;
	}
	return 0;
}

int
dns_upstream_from_resolv_conf(const char *path, struct dns_upstream_addr *out,
    size_t max, size_t *nout, struct err *e)
{
	char *buf;
	size_t got;
	int rc;

	*nout = 0;
	if (fileread_all(path, DNS_RESOLV_CONF_MAX, 0, &buf, &got, e) == -1) {
		err_prefix(e, "%s", path);
		return -1;
	}
	rc = dns_upstream_parse_resolv_conf(buf, got, out, max, nout, e);
	if (rc < 0)
		err_prefix(e, "%s", path);
	free(buf);
	return rc;
}

bool
dns_upstream_addr_is_loopback(const struct dns_upstream_addr *a)
{
	static const uint8_t v6lo[16] = {[15] = 1};

	if (a->family == AF_INET)
		return a->addr[0] == 127;
	return memcmp(a->addr, v6lo, 16) == 0;
}

int
dns_upstream_query_build(const uint8_t *name_wire, size_t name_len,
    uint16_t qtype, uint16_t qclass, bool cd, bool dnssec_ok, uint8_t *out,
    size_t cap, size_t *outlen)
{
	size_t need = 12 + name_len + 4 + 11;
	uint16_t flags = 0x0100; /* RD */
	uint8_t *p = out;

	if (name_len == 0 || name_len > 255 || cap < need)
		return -1;
	if (cd)
		flags |= 0x0010;
	memset(p, 0, 12);
	p[2] = (uint8_t)(flags >> 8);
	p[3] = (uint8_t)flags;
	p[5] = 1; /* QDCOUNT */
	p[11] = 1; /* ARCOUNT: the OPT */
	p += 12;
	memcpy(p, name_wire, name_len);
	p += name_len;
	*p++ = (uint8_t)(qtype >> 8);
	*p++ = (uint8_t)qtype;
	*p++ = (uint8_t)(qclass >> 8);
	*p++ = (uint8_t)qclass;
	/* OPT: root owner, type 41, class = udp size, ttl = ext/ver/flags. */
	*p++ = 0;
	*p++ = 0;
	*p++ = 41;
	*p++ = (uint8_t)(DNS_UPSTREAM_EDNS_SIZE >> 8);
	*p++ = (uint8_t)(DNS_UPSTREAM_EDNS_SIZE & 0xff);
	*p++ = 0;
	*p++ = 0;
	*p++ = dnssec_ok ? 0x80 : 0;
	*p++ = 0;
	*p++ = 0;
	*p++ = 0;
	*outlen = need;
	return 0;
}
