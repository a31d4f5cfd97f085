/* dns_testpk: see dns_testpk.h. */
#include "dns_testpk.h"

#include <stdlib.h>
#include <string.h>

void
pk_u8(struct pk *p, uint8_t v)
{
	if (p->n < PK_MAX)
		p->b[p->n++] = v;
}

void
pk_u16(struct pk *p, uint16_t v)
{
	pk_u8(p, (uint8_t)(v >> 8));
	pk_u8(p, (uint8_t)v);
}

void
pk_u32(struct pk *p, uint32_t v)
{
	pk_u16(p, (uint16_t)(v >> 16));
	pk_u16(p, (uint16_t)v);
}

void
pk_bytes(struct pk *p, const void *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		pk_u8(p, ((const uint8_t *)v)[i]);
}

size_t
pk_wire_name(const char *pres, uint8_t *out)
{
	size_t o = 0;
	const char *p = pres;

	while (*p != '\0') {
		const char *dot = strchr(p, '.');
		size_t n = dot != NULL ? (size_t)(dot - p) : strlen(p);

		out[o++] = (uint8_t)n;
		memcpy(out + o, p, n);
		o += n;
		p += n;
		if (*p == '.')
			p++;
	}
	out[o++] = 0;
	return o;
}

/* The wire form of s in a buffer of its own (caller frees), so pk_name
 * and pk_name_ptr share pk_wire_name; aborts when out of memory. */
static uint8_t *
pk_wire_dup(const char *s, size_t *n)
{
	uint8_t *w = malloc(strlen(s) + 2);

	if (w == NULL)
		abort();
	*n = pk_wire_name(s, w);
	return w;
}

void
pk_name(struct pk *p, const char *s)
{
	size_t n;
	uint8_t *w = pk_wire_dup(s, &n);

	pk_bytes(p, w, n);
	free(w);
}

void
pk_name_ptr(struct pk *p, const char *labels, uint16_t off)
{
	size_t n;
	uint8_t *w = pk_wire_dup(labels != NULL ? labels : "", &n);

	pk_bytes(p, w, n - 1); /* without the root label */
	free(w);
	pk_u16(p, (uint16_t)(0xc000u | off));
}

void
pk_hdr(struct pk *p, uint16_t id, uint16_t flags, uint16_t qd, uint16_t an,
    uint16_t ns, uint16_t ar)
{
	p->n = 0;
	pk_u16(p, id);
	pk_u16(p, flags);
	pk_u16(p, qd);
	pk_u16(p, an);
	pk_u16(p, ns);
	pk_u16(p, ar);
}

void
pk_question(struct pk *p, const char *name, uint16_t type)
{
	pk_name(p, name);
	pk_u16(p, type);
	pk_u16(p, 1);
}

/* Type, class IN, ttl, and a placeholder rdlength; returns its offset. */
size_t
pk_rr_fixed(struct pk *p, uint16_t type, uint32_t ttl)
{
	pk_u16(p, type);
	pk_u16(p, 1);
	pk_u32(p, ttl);
	pk_u16(p, 0);
	return p->n - 2;
}

void
pk_rdlen_end(struct pk *p, size_t at)
{
	size_t l = p->n - at - 2;
	p->b[at] = (uint8_t)(l >> 8);
	p->b[at + 1] = (uint8_t)l;
}

/* Owner = pointer to the question name at offset 12. */
void
pk_a(struct pk *p, uint16_t owner_off, uint32_t ttl, uint8_t a, uint8_t b,
    uint8_t c, uint8_t d)
{
	pk_u16(p, (uint16_t)(0xc000u | owner_off));
	size_t at = pk_rr_fixed(p, 1, ttl);
	pk_u8(p, a);
	pk_u8(p, b);
	pk_u8(p, c);
	pk_u8(p, d);
	pk_rdlen_end(p, at);
}

void
pk_aaaa(struct pk *p, uint16_t owner_off, uint32_t ttl, const uint8_t v6[16])
{
	pk_u16(p, (uint16_t)(0xc000u | owner_off));
	size_t at = pk_rr_fixed(p, 28, ttl);
	pk_bytes(p, v6, 16);
	pk_rdlen_end(p, at);
}

/* OPT: udp size, ext rcode, version, flags, no options. */
void
pk_opt(struct pk *p, uint16_t udp, uint8_t ext, uint8_t ver, uint16_t flags)
{
	pk_u8(p, 0);
	pk_u16(p, 41);
	pk_u16(p, udp);
	pk_u8(p, ext);
	pk_u8(p, ver);
	pk_u16(p, flags);
	pk_u16(p, 0);
}

void
pk_set_u16(struct pk *p, size_t at, uint16_t v)
{
	p->b[at] = (uint8_t)(v >> 8);
	p->b[at + 1] = (uint8_t)v;
}
