/*
 * special_ranges: the table (see special_ranges.h for who uses it how).
 *
 * The rule for each row: stripped from answers and dropped by nft (SD)
 * when the registry says it is not globally reachable, or it is a cloud
 * metadata/platform address, or it is multicast or reserved (no sandbox
 * flow goes there, and a DNS answer pointing there is a rebinding or
 * fake-IP trick). Left open (OPEN) when it is globally reachable anycast
 * or a relay, and for the documentation ranges: they are special-purpose
 * but the test bed's "internet" (docs/testing.md), so the fake origins
 * must stay reachable and resolvable. A row only documents when a larger
 * row covers it (the metadata /32s): it names the address for the tests.
 *
 * Sources: IANA IPv4 Special-Purpose Address Registry and IPv6
 * Special-Purpose Address Registry (RFC 6890 and the RFCs named per row),
 * the IANA multicast and IPv6 address space registries, and each cloud's
 * own documentation of its metadata service.
 */
#include <string.h>

#include "egressd/proto/special_ranges.h"

#define SD (SPECIAL_STRIP | SPECIAL_DROP)
#define OPEN 0u

#define V4(a, b, c, d, len, fl, text)                                          \
	{                                                                      \
		4, len, {a, b, c, d}, fl, text                                 \
	}

const struct special_range special_ranges[] = {
    /* ---- IPv4 special-purpose registry ---- */
    /* RFC 791: "this network"; Linux connects 0.0.0.0 to the host */
    V4(0, 0, 0, 0, 8, SD, "0.0.0.0/8"),
    V4(10, 0, 0, 0, 8, SD, "10.0.0.0/8"), /* RFC 1918: node, cluster */
    /* RFC 6598 shared address space (CGNAT; Alibaba's metadata) */
    V4(100, 64, 0, 0, 10, SD, "100.64.0.0/10"),
    /* RFC 1122 loopback; in nft the `oif lo` rule accepts local
     * traffic first, so the set only meets its IPv6 spellings */
    V4(127, 0, 0, 0, 8, SD, "127.0.0.0/8"),
    V4(169, 254, 0, 0, 16, SD, "169.254.0.0/16"), /* RFC 3927 */
    V4(172, 16, 0, 0, 12, SD, "172.16.0.0/12"), /* RFC 1918 */
    /* RFC 6890 IETF protocol assignments: DS-Lite, NAT64 discovery
     * (192.0.0.170/171), Oracle Classic metadata; the two anycast /32s
     * in it (PCP .9, TURN .10) no sandbox needs: whole /24 */
    V4(192, 0, 0, 0, 24, SD, "192.0.0.0/24"),
    /* RFC 5737 TEST-NET-1: documentation, the test bed */
    V4(192, 0, 2, 0, 24, OPEN, "192.0.2.0/24"),
    /* RFC 7535 AS112-v4, RFC 7450 AMT: globally reachable anycast */
    V4(192, 31, 196, 0, 24, OPEN, "192.31.196.0/24"),
    V4(192, 52, 193, 0, 24, OPEN, "192.52.193.0/24"),
    /* RFC 7526: deprecated 6to4 relay anycast, relays on the internet */
    V4(192, 88, 99, 0, 24, OPEN, "192.88.99.0/24"),
    V4(192, 168, 0, 0, 16, SD, "192.168.0.0/16"), /* RFC 1918 */
    /* RFC 7534 AS112 direct delegation: globally reachable */
    V4(192, 175, 48, 0, 24, OPEN, "192.175.48.0/24"),
    /* RFC 2544 benchmarking: unrouted, and fake-IP DNS proxies use it */
    V4(198, 18, 0, 0, 15, SD, "198.18.0.0/15"),
    /* RFC 5737 TEST-NET-2 and -3: documentation, the test bed */
    V4(198, 51, 100, 0, 24, OPEN, "198.51.100.0/24"),
    V4(203, 0, 113, 0, 24, OPEN, "203.0.113.0/24"),
    /* RFC 5771 multicast (IANA multicast address space registry) */
    V4(224, 0, 0, 0, 4, SD, "224.0.0.0/4"),
    /* RFC 1112 reserved, with RFC 919 limited broadcast 255.255.255.255 */
    V4(240, 0, 0, 0, 4, SD, "240.0.0.0/4"),
    /* ---- cloud metadata and platform addresses ---- */
    /* IMDS of AWS, GCP, Azure, OpenStack, Oracle, DigitalOcean,
     * Hetzner (each cloud's metadata documentation); in 169.254/16 */
    V4(169, 254, 169, 254, 32, SD, "169.254.169.254/32"),
    /* AWS ECS task metadata and credentials endpoint */
    V4(169, 254, 170, 2, 32, SD, "169.254.170.2/32"),
    /* Tencent Cloud metadata (metadata.tencentyun.com) */
    V4(169, 254, 0, 23, 32, SD, "169.254.0.23/32"),
    /* Alibaba Cloud ECS metadata; in 100.64/10 */
    V4(100, 100, 100, 200, 32, SD, "100.100.100.200/32"),
    /* Azure WireServer (platform DNS, DHCP, health probes, agent
     * channel): the one metadata address outside every range above */
    V4(168, 63, 129, 16, 32, SD, "168.63.129.16/32"),
    /* Oracle Cloud Classic metadata; in 192.0.0/24 */
    V4(192, 0, 0, 192, 32, SD, "192.0.0.192/32"),

    /* ---- IPv6 special-purpose registry ---- */
    /* (the IPv4 spellings ::ffff:0:0/96, 64:ff9b::/96, 2002::/16 and
     * the deprecated ::/96 are forms below, not rows: their addresses
     * are judged by the IPv4 address they spell) */
    {6, 128, {0}, SD, "::/128"}, /* RFC 4291 unspecified */
    {6, 128, {[15] = 1}, SD, "::1/128"}, /* RFC 4291 loopback */
    /* RFC 8215 local-use translation: its /96 form is judged by the
     * IPv4 address; any other prefix length is unknown: fail closed */
    {6, 48, {0, 0x64, 0xff, 0x9b, 0, 1}, SD, "64:ff9b:1::/48"},
    {6, 64, {0x01}, SD, "100::/64"}, /* RFC 6666 discard-only */
    /* RFC 4380 Teredo: see SPECIAL_TEREDO */
    {6, 32, {0x20, 0x01}, SPECIAL_DROP | SPECIAL_TEREDO, "2001::/32"},
    /* RFC 5180 benchmarking, the twin of 198.18/15 */
    {6, 48, {0x20, 0x01, 0, 0x02}, SD, "2001:2::/48"},
    /* RFC 7450 AMT, RFC 7535 AS112-v6: globally reachable */
    {6, 32, {0x20, 0x01, 0, 0x03}, OPEN, "2001:3::/32"},
    {6, 48, {0x20, 0x01, 0, 0x04, 0x01, 0x12}, OPEN, "2001:4:112::/48"},
    /* RFC 4843 ORCHID: deprecated, never routed */
    {6, 28, {0x20, 0x01, 0, 0x10}, SD, "2001:10::/28"},
    /* RFC 7343 ORCHIDv2: globally reachable */
    {6, 28, {0x20, 0x01, 0, 0x20}, OPEN, "2001:20::/28"},
    /* RFC 3849 documentation: the test bed */
    {6, 32, {0x20, 0x01, 0x0d, 0xb8}, OPEN, "2001:db8::/32"},
    /* RFC 7534 AS112 direct delegation: globally reachable */
    {6, 48, {0x26, 0x20, 0, 0x4f, 0x80}, OPEN, "2620:4f:8000::/48"},
    {6, 20, {0x3f, 0xff}, OPEN, "3fff::/20"}, /* RFC 9637 documentation */
    {6, 16, {0x5f, 0x00}, SD, "5f00::/16"}, /* RFC 9602 SRv6 SIDs */
    /* RFC 4193 unique local: node and cluster networks */
    {6, 7, {0xfc}, SD, "fc00::/7"},
    {6, 10, {0xfe, 0x80}, SD, "fe80::/10"}, /* RFC 4291 link-local */
    /* RFC 3879 deprecated site-local (IPv6 address space registry) */
    {6, 10, {0xfe, 0xc0}, SD, "fec0::/10"},
    /* RFC 4291 multicast; nft accepts ND and MLD reports before */
    {6, 8, {0xff}, SD, "ff00::/8"},
    /* ---- cloud metadata (all in fc00::/7) ---- */
    /* AWS IMDS, Route 53 Resolver, Amazon Time Sync over IPv6 */
    {6, 128, {0xfd, 0, 0x0e, 0xc2, [14] = 0x02, [15] = 0x54}, SD,
        "fd00:ec2::254/128"},
    {6, 128, {0xfd, 0, 0x0e, 0xc2, [14] = 0x02, [15] = 0x53}, SD,
        "fd00:ec2::253/128"},
    {6, 128, {0xfd, 0, 0x0e, 0xc2, [14] = 0x01, [15] = 0x23}, SD,
        "fd00:ec2::123/128"},
    /* GCP metadata server over IPv6 */
    {6, 128, {0xfd, 0x20, 0, 0xce, [14] = 0x02, [15] = 0x54}, SD,
        "fd20:ce::254/128"},
};

const size_t special_nranges =
    sizeof(special_ranges) / sizeof(special_ranges[0]);

/* The IPv6 spellings (special_ranges.h), prefix then the IPv4 address. */
static const struct {
	uint8_t prefix[12];
	uint8_t off; /* bytes of prefix; the IPv4 address follows */
} forms[SPECIAL_FORMS] = {
    {{0, 0x64, 0xff, 0x9b}, 12}, /* RFC 6052 NAT64 64:ff9b::/96 */
    {{0x20, 0x02}, 2}, /* RFC 3056 6to4 2002::/16 */
    {{[10] = 0xff, [11] = 0xff}, 12}, /* RFC 4291 mapped ::ffff:0:0/96 */
    {{0}, 12}, /* RFC 4291 compatible ::/96 (deprecated) */
    {{[8] = 0xff, [9] = 0xff}, 12}, /* RFC 2765 SIIT ::ffff:0:0:0/96 */
    {{0, 0x64, 0xff, 0x9b, 0, 1}, 12}, /* RFC 8215 64:ff9b:1::/96 */
};

/* a and b agree on the first len bits. */
static bool
bits_eq(const uint8_t *a, const uint8_t *b, unsigned len)
{
	unsigned full = len / 8, rest = len % 8;

	if (memcmp(a, b, full) != 0)
		return false;
	return rest == 0 ||
	    ((a[full] ^ b[full]) & (uint8_t)(0xff00u >> rest)) == 0;
}

int
special_v4_of(
    const uint8_t a6[16], size_t nforms, uint8_t v4[4], unsigned *base)
{
	size_t i;

	for (i = 0; i < nforms && i < SPECIAL_FORMS; i++)
		if (memcmp(a6, forms[i].prefix, forms[i].off) == 0) {
			memcpy(v4, a6 + forms[i].off, 4);
			*base = 8u * forms[i].off;
			return (int)i;
		}
	return -1;
}

void
special_v6_form(const uint8_t v4[4], unsigned len, size_t form, uint8_t out[16],
    uint8_t *outlen)
{
	memset(out, 0, 16);
	if (form >= SPECIAL_FORMS)
		form = SPECIAL_FORM_COMPAT;
	memcpy(out, forms[form].prefix, forms[form].off);
	memcpy(out + forms[form].off, v4, 4);
	*outlen = (uint8_t)(8u * forms[form].off + (len > 32 ? 32 : len));
}

static unsigned
v4_flags(const uint8_t *a)
{
	uint32_t x = (uint32_t)a[0] << 24 | (uint32_t)a[1] << 16 |
	    (uint32_t)a[2] << 8 | a[3];
	unsigned f = 0;
	size_t i;

	/*
	 * bits_eq as one masked compare of 32-bit words: every A record
	 * of every answer walks the whole table, and bits_eq's memcmp call
	 * per row was ~1k instructions an address.
	 */
	for (i = 0; i < special_nranges; i++) {
		const struct special_range *r = &special_ranges[i];
		uint32_t ra, mask;

		if (r->family != 4)
			continue;
		ra = (uint32_t)r->addr[0] << 24 | (uint32_t)r->addr[1] << 16 |
		    (uint32_t)r->addr[2] << 8 | r->addr[3];
		mask = r->len == 0 ? 0
		    : r->len >= 32 ? ~(uint32_t)0
		                   : ~(uint32_t)0 << (32 - r->len);
		if (((x ^ ra) & mask) == 0)
			f |= r->flags;
	}
	return f;
}

/* Teredo: server in bytes 4-7, client in 12-15 with its bits inverted. */
static unsigned
teredo_flags(const uint8_t *a)
{
	uint8_t client[4];
	size_t i;

	for (i = 0; i < 4; i++)
		client[i] = (uint8_t)~a[12 + i];
	return (v4_flags(a + 4) | v4_flags(client)) & SPECIAL_STRIP;
}

unsigned
special_addr_flags(int family, const uint8_t *addr)
{
	unsigned f = 0, base = 0;
	uint8_t v4[4];
	int form;
	size_t i;

	if (family == 4)
		return v4_flags(addr) & (SPECIAL_STRIP | SPECIAL_DROP);
	if (family != 6)
		return SPECIAL_STRIP | SPECIAL_DROP; /* fail closed */
	form = special_v4_of(addr, SPECIAL_FORMS, v4, &base);
	if (form >= 0)
		f = v4_flags(v4) & (SPECIAL_STRIP | SPECIAL_DROP);
	for (i = 0; i < special_nranges; i++) {
		const struct special_range *r = &special_ranges[i];

		if (r->family != 6 || !bits_eq(addr, r->addr, r->len))
			continue;
		if (form >= 0 && r->len <= base)
			continue; /* a row holding the form: the form decides */
		f |= r->flags & (SPECIAL_STRIP | SPECIAL_DROP);
		if (r->flags & SPECIAL_TEREDO)
			f |= teredo_flags(addr);
	}
	return f;
}

static void
span_of(const uint8_t *addr, unsigned len, unsigned w, struct special_span *s)
{
	unsigned i;

	memset(s, 0, sizeof(*s));
	for (i = 0; i < w; i++) {
		unsigned keep = len >= 8 * (i + 1) ? 8
		    : len > 8 * i                  ? len - 8 * i
		                                   : 0;
		uint8_t mask = (uint8_t)(0xff00u >> keep);

		s->lo[i] = addr[i] & mask;
		s->hi[i] = (uint8_t)(addr[i] | (uint8_t)~mask);
	}
}

/* x -= 1 / x += 1 over 16 bytes (callers never wrap). */
static void
dec16(uint8_t *x)
{
	int i = 15;

	while (i >= 0 && x[i]-- == 0)
		i--;
}

static void
inc16(uint8_t *x)
{
	int i = 15;

	while (i >= 0 && ++x[i] == 0)
		i--;
}

static bool
push(struct special_span *out, size_t max, size_t *n,
    const struct special_span *s)
{
	if (*n >= max)
		return false;
	out[(*n)++] = *s;
	return true;
}

/* A SPECIAL_DROP IPv6 row without the form it may hold (at most one). */
static bool
v6_row_spans(const struct special_range *r, struct special_span *out,
    size_t max, size_t *n)
{
	struct special_span s, f, part;
	uint8_t pfx[16] = {0};
	size_t i, held = SPECIAL_FORMS;

	span_of(r->addr, r->len, 16, &s);
	for (i = 0; i < SPECIAL_FORMS; i++) {
		memcpy(pfx, forms[i].prefix, forms[i].off);
		if (8u * forms[i].off < r->len ||
		    !bits_eq(pfx, r->addr, r->len))
			continue;
		if (held != SPECIAL_FORMS)
			return false; /* two forms in one row: not supported */
		held = i;
	}
	if (held == SPECIAL_FORMS)
		return push(out, max, n, &s);
	memset(pfx, 0, sizeof(pfx));
	memcpy(pfx, forms[held].prefix, forms[held].off);
	span_of(pfx, 8u * forms[held].off, 16, &f);
	if (memcmp(f.lo, s.lo, 16) > 0) {
		part = s;
		memcpy(part.hi, f.lo, 16);
		dec16(part.hi);
		if (!push(out, max, n, &part))
			return false;
	}
	if (memcmp(f.hi, s.hi, 16) < 0) {
		part = s;
		memcpy(part.lo, f.hi, 16);
		inc16(part.lo);
		if (!push(out, max, n, &part))
			return false;
	}
	return true;
}

long
special_drop_spans(int family, struct special_span *out, size_t max)
{
	struct special_span s;
	uint8_t a6[16], len6;
	size_t i, k, n = 0;

	for (i = 0; i < special_nranges; i++) {
		const struct special_range *r = &special_ranges[i];

		if ((r->flags & SPECIAL_DROP) == 0)
			continue;
		if (family == 4 && r->family == 4) {
			span_of(r->addr, r->len, 4, &s);
			if (!push(out, max, &n, &s))
				return -1;
		} else if (family == 6 && r->family == 6) {
			if (!v6_row_spans(r, out, max, &n))
				return -1;
		} else if (family == 6 && r->family == 4) {
			for (k = 0; k < SPECIAL_FORMS; k++) {
				special_v6_form(r->addr, r->len, k, a6, &len6);
				span_of(a6, len6, 16, &s);
				if (!push(out, max, &n, &s))
					return -1;
			}
		}
	}
	return (long)n;
}
