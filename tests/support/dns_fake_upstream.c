/* dns_fake_upstream: see dns_fake_upstream.h. */
#include "dns_fake_upstream.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dns_testpk.h"

/* Wire name at msg[off] (uncompressed) -> lowercase dotted text. */
static size_t
fake_name_text(const uint8_t *msg, size_t len, size_t off, char *out)
{
	size_t o = 0;

	while (off < len && msg[off] != 0) {
		size_t n = msg[off++], i;

		if (o != 0)
			out[o++] = '.';
		for (i = 0; i < n && off < len && o < 250; i++) {
			char ch = (char)msg[off++];

			out[o++] = (ch >= 'A' && ch <= 'Z') ? ch + 32 : ch;
		}
	}
	out[o] = '\0';
	return off + 1;
}

void
fake_add(struct fake_upstream *f, const char *owner, uint16_t type,
    uint32_t ttl, const void *rdata, uint16_t rdlen)
{
	struct fake_rr *r = &f->rr[f->nrr++];

	snprintf(r->owner, sizeof(r->owner), "%s", owner);
	r->type = type;
	r->ttl = ttl;
	memcpy(r->rdata, rdata, rdlen);
	r->rdlen = rdlen;
}

void
fake_add_a(
    struct fake_upstream *f, const char *owner, const char *ip, uint32_t ttl)
{
	uint8_t a[16];

	if (strchr(ip, ':') != NULL) {
		inet_pton(AF_INET6, ip, a);
		fake_add(f, owner, 28, ttl, a, 16);
	} else {
		inet_pton(AF_INET, ip, a);
		fake_add(f, owner, 1, ttl, a, 4);
	}
}

void
fake_add_cname(struct fake_upstream *f, const char *owner, const char *target,
    uint32_t ttl)
{
	uint8_t w[256];
	size_t n = pk_wire_name(target, w);

	fake_add(f, owner, 5, ttl, w, (uint16_t)n);
}

static void
fake_put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static uint32_t
fake_rnd(struct fake_upstream *f)
{
	f->seed = f->seed * 1103515245u + 12345u;
	return f->seed >> 8;
}

/*
 * Well-framed but hostile answer records after the question at out[o]:
 * owners on and off the chain, internal and public addresses, CNAMEs and
 * DNAMEs into allowed, denied and looping names, HTTPS with hints.
 */
static size_t
fake_hostile(struct fake_upstream *f, uint8_t *out, size_t o, size_t cap)
{
	static const char *const names[] = {"x.allowed.test", "evil.test",
	    "loop.allowed.test", "allowed.test", "deep.evil.test"};
	static const uint8_t v4[][4] = {{10, 1, 2, 3}, {127, 0, 0, 1},
	    {169, 254, 169, 254}, {192, 168, 0, 1}, {100, 64, 0, 1},
	    {203, 0, 113, 10}, {198, 51, 100, 7}, {0, 0, 0, 0}};
	static const uint16_t types[] = {
	    1, 1, 1, 28, 28, 5, 5, 39, 65, 6, 16, 2, 12};
	size_t nrr = 1 + fake_rnd(f) % 6, i, k;
	uint16_t an = 0;

	for (i = 0; i < nrr; i++) {
		uint8_t rd[300];
		size_t rdlen = 0, wl;
		uint16_t type = types[fake_rnd(f) % (sizeof(types) / 2)];
		uint32_t ttl = fake_rnd(f) % 100000;

		if (o + 300 + 270 > cap)
			break;
		if (fake_rnd(f) % 3 != 0) {
			out[o++] = 0xc0; /* the question name */
			out[o++] = 12;
		} else {
			o += pk_wire_name(names[fake_rnd(f) % 5], out + o);
		}
		switch (type) {
		case 1:
			if (fake_rnd(f) % 2)
				memcpy(rd, v4[fake_rnd(f) % 8], 4);
			else
				for (k = 0; k < 4; k++)
					rd[k] = (uint8_t)fake_rnd(f);
			rdlen = 4;
			break;
		case 28:
			memset(rd, 0, 16);
			switch (fake_rnd(f) % 4) {
			case 0: /* ::ffff:10.1.2.3 */
				rd[10] = rd[11] = 0xff;
				memcpy(rd + 12, v4[0], 4);
				break;
			case 1: /* fd00::1 */
				rd[0] = 0xfd;
				rd[15] = 1;
				break;
			case 2: /* 2001:db8::10 */
				rd[0] = 0x20;
				rd[1] = 0x01;
				rd[2] = 0x0d;
				rd[3] = 0xb8;
				rd[15] = 0x10;
				break;
			default:
				for (k = 0; k < 16; k++)
					rd[k] = (uint8_t)fake_rnd(f);
			}
			rdlen = 16;
			break;
		case 5:
		case 39:
		case 2:
		case 12:
			rdlen = pk_wire_name(names[fake_rnd(f) % 5], rd);
			break;
		case 65: /* 1 . ipv4hint=<addr> [ech=0102] */
			rd[0] = 0;
			rd[1] = 1;
			rd[2] = 0;
			rd[3] = 0;
			rd[4] = 4;
			rd[5] = 0;
			rd[6] = 4;
			memcpy(rd + 7, v4[fake_rnd(f) % 8], 4);
			rdlen = 11;
			if (fake_rnd(f) % 2) {
				static const uint8_t ech[] = {0, 5, 0, 2, 1, 2};

				memcpy(rd + rdlen, ech, sizeof(ech));
				rdlen += sizeof(ech);
			}
			break;
		default:
			rdlen = fake_rnd(f) % 24;
			for (k = 0; k < rdlen; k++)
				rd[k] = (uint8_t)fake_rnd(f);
		}
		fake_put16(out + o, type);
		fake_put16(out + o + 2, 1);
		out[o + 4] = (uint8_t)(ttl >> 24);
		out[o + 5] = (uint8_t)(ttl >> 16);
		out[o + 6] = (uint8_t)(ttl >> 8);
		out[o + 7] = (uint8_t)ttl;
		fake_put16(out + o + 8, (uint16_t)rdlen);
		o += 10;
		memcpy(out + o, rd, rdlen);
		o += rdlen;
		an++;
		(void)wl;
	}
	fake_put16(out + 6, an);
	return o;
}

/*
 * Builds the answer: header from the query, question copied, then every
 * table RR in the chain of the question name (CNAMEs followed) whose type
 * matches qtype or is a CNAME. Returns the length.
 */
static size_t
fake_respond(struct fake_upstream *f, const uint8_t *q, size_t qlen, bool tcp,
    uint8_t *out, size_t cap)
{
	char qname[256], cur[256];
	size_t qend, o, i, hops;
	uint16_t qtype, an = 0;

	if (qlen < 12)
		return 0;
	qend = fake_name_text(q, qlen, 12, qname);
	if (qend + 4 > qlen)
		return 0;
	qtype = (uint16_t)(q[qend] << 8 | q[qend + 1]);
	qend += 4;
	if (f->nlog < FAKE_LOG_MAX)
		snprintf(f->log[f->nlog++], 256, "%s", qname);
	f->last_id = (uint16_t)(q[0] << 8 | q[1]);
	f->last_had_opt = q[11] != 0;
	if (f->mode == FAKE_DROP)
		return 0;
	memcpy(out, q, qend);
	out[2] = 0x80 | (q[2] & 0x01); /* QR, RD copied */
	out[3] = 0x80; /* RA */
	fake_put16(out + 6, 0);
	fake_put16(out + 8, 0);
	fake_put16(out + 10, 0);
	o = qend;
	if (f->mode == FAKE_HOSTILE)
		return fake_hostile(f, out, o, cap);
	if (f->mode == FAKE_GARBAGE) {
		size_t gn, gi;

		f->seed = f->seed * 1103515245u + 12345u;
		gn = (f->seed >> 8) % 300;
		for (gi = 0; gi < 3; gi++) { /* AN/NS/AR counts, small */
			f->seed = f->seed * 1103515245u + 12345u;
			fake_put16(
			    out + 6 + 2 * gi, (uint16_t)((f->seed >> 9) % 6));
		}
		for (gi = 0; gi < gn && o < cap; gi++) {
			f->seed = f->seed * 1103515245u + 12345u;
			/* Mostly small bytes: lengths, pointers, types. */
			out[o++] = (uint8_t)((f->seed >> 16) %
			    ((f->seed & 0x100) ? 256 : 20));
		}
		if ((f->seed & 0x3000) == 0)
			out[3] |= 3; /* sometimes NXDOMAIN */
		return o;
	}
	if (f->mode == FAKE_RCODE) {
		out[3] |= (uint8_t)(f->rcode & 0xf);
		return o;
	}
	if (f->mode == FAKE_TC && !tcp) {
		out[2] |= 0x02;
		return o;
	}
	snprintf(cur, sizeof(cur), "%s", qname);
	for (hops = 0; hops < 8; hops++) {
		bool moved = false;

		for (i = 0; i < f->nrr; i++) {
			struct fake_rr *r = &f->rr[i];
			uint8_t w[256];
			size_t wl;

			if (strcasecmp(r->owner, cur) != 0)
				continue;
			if (r->type != qtype && r->type != 5 && qtype != 255)
				continue;
			wl = pk_wire_name(r->owner, w);
			if (o + wl + 10 + r->rdlen > cap)
				break;
			memcpy(out + o, w, wl);
			o += wl;
			fake_put16(out + o, r->type);
			fake_put16(out + o + 2, 1);
			out[o + 4] = (uint8_t)(r->ttl >> 24);
			out[o + 5] = (uint8_t)(r->ttl >> 16);
			out[o + 6] = (uint8_t)(r->ttl >> 8);
			out[o + 7] = (uint8_t)r->ttl;
			fake_put16(out + o + 8, r->rdlen);
			o += 10;
			memcpy(out + o, r->rdata, r->rdlen);
			o += r->rdlen;
			an++;
			if (r->type == 5 && qtype != 5) {
				fake_name_text(r->rdata, r->rdlen, 0, cur);
				moved = true;
			}
		}
		if (!moved)
			break;
	}
	fake_put16(out + 6, an);
	if (an == 0 && f->nxdomain_if_empty) {
		/* NXDOMAIN with an SOA for "test." (TTL 60, minimum 30). */
		static const uint8_t soa[] = {4, 't', 'e', 's', 't', 0, 0, 6, 0,
		    1, 0, 0, 0, 60, 0, 24, 1, 'n', 0, 1, 'h', 0, 0, 0, 0, 1, 0,
		    0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 30};

		out[3] |= 3;
		memcpy(out + o, soa, sizeof(soa));
		o += sizeof(soa);
		fake_put16(out + 8, 1);
	}
	return o;
}

struct fake_delayed {
	int fd;
	struct sockaddr_storage ss;
	socklen_t sl;
	size_t len;
	uint8_t out[4096];
};

static void
fake_delayed_cb(evutil_socket_t fd, short what, void *arg)
{
	struct fake_delayed *dl = arg;

	(void)fd;
	(void)what;
	(void)sendto(
	    dl->fd, dl->out, dl->len, 0, (struct sockaddr *)&dl->ss, dl->sl);
	free(dl);
}

static void
fake_udp_cb(evutil_socket_t fd, short what, void *arg)
{
	struct fake_upstream *f = arg;
	uint8_t q[4096], out[4096];
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	ssize_t n;
	size_t olen;

	(void)what;
	while ((n = recvfrom(
	            fd, q, sizeof(q), 0, (struct sockaddr *)&ss, &sl)) > 0) {
		f->udp_queries++;
		olen = fake_respond(f, q, (size_t)n, false, out, sizeof(out));
		if (olen > 0 && f->delay_ms > 0) {
			struct fake_delayed *dl = calloc(1, sizeof(*dl));
			struct timeval tv = {f->delay_ms / 1000,
			    (long)(f->delay_ms % 1000) * 1000};

			dl->fd = fd;
			dl->ss = ss;
			dl->sl = sl;
			dl->len = olen;
			memcpy(dl->out, out, olen);
			event_base_once(
			    f->base, -1, EV_TIMEOUT, fake_delayed_cb, dl, &tv);
		} else if (olen > 0) {
			(void)sendto(
			    fd, out, olen, 0, (struct sockaddr *)&ss, sl);
		}
		sl = sizeof(ss);
	}
}

static void
fake_tcp_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct fake_conn *c = arg;
	struct fake_upstream *f = c->owner;
	static uint8_t out[70000];
	ssize_t n;

	(void)what;
	n = read(fd, c->buf + c->have, sizeof(c->buf) - c->have);
	if (n <= 0) {
		event_free(c->ev);
		close(fd);
		c->fd = -1;
		c->ev = NULL;
		c->have = 0;
		return;
	}
	c->have += (size_t)n;
	while (c->have >= 2) {
		size_t mlen = (size_t)(c->buf[0] << 8 | c->buf[1]), olen;

		if (c->have < 2 + mlen)
			break;
		f->tcp_queries++;
		olen = fake_respond(
		    f, c->buf + 2, mlen, true, out + 2, sizeof(out) - 2);
		if (olen > 0) {
			fake_put16(out, (uint16_t)olen);
			(void)write(fd, out, olen + 2);
		}
		memmove(c->buf, c->buf + 2 + mlen, c->have - 2 - mlen);
		c->have -= 2 + mlen;
	}
}

static void
fake_accept_cb(evutil_socket_t fd, short what, void *arg)
{
	struct fake_upstream *f = arg;
	int cfd;
	size_t i;

	(void)what;
	cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (cfd < 0)
		return;
	for (i = 0; i < FAKE_CONN_MAX; i++)
		if (f->conns[i].fd < 0)
			break;
	if (i == FAKE_CONN_MAX) {
		close(cfd);
		return;
	}
	f->conns[i].fd = cfd;
	f->conns[i].have = 0;
	f->conns[i].ev = event_new(
	    f->base, cfd, EV_READ | EV_PERSIST, fake_tcp_read_cb, &f->conns[i]);
	event_add(f->conns[i].ev, NULL);
}

/* Starts a fake on 127.0.0.1 (port 0 = ephemeral). NULL on failure. */
struct fake_upstream *
fake_upstream_new(struct event_base *base, uint16_t port)
{
	struct fake_upstream *f = calloc(1, sizeof(*f));
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	int one = 1, tries;
	size_t i;

	if (f == NULL)
		return NULL;
	f->base = base;
	for (i = 0; i < FAKE_CONN_MAX; i++) {
		f->conns[i].fd = -1;
		f->conns[i].owner = f;
	}
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons(port);
	/*
	 * The ephemeral UDP port may be taken on the TCP side (by another
	 * test's connection): try again with another one.
	 */
	for (tries = 0;; tries++) {
		if (tries == 64)
			abort();
		sin.sin_port = htons(port);
		f->ufd = socket(
		    AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (f->ufd < 0 ||
		    bind(f->ufd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
			abort();
		sl = sizeof(sin);
		getsockname(f->ufd, (struct sockaddr *)&sin, &sl);
		f->port = ntohs(sin.sin_port);
		f->tfd = socket(
		    AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (f->tfd < 0)
			abort();
		setsockopt(f->tfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(f->tfd, (struct sockaddr *)&sin, sizeof(sin)) == 0 &&
		    listen(f->tfd, 16) == 0)
			break;
		close(f->tfd);
		close(f->ufd);
		if (port != 0)
			abort();
	}
	f->uev = event_new(base, f->ufd, EV_READ | EV_PERSIST, fake_udp_cb, f);
	f->tev =
	    event_new(base, f->tfd, EV_READ | EV_PERSIST, fake_accept_cb, f);
	event_add(f->uev, NULL);
	event_add(f->tev, NULL);
	return f;
}

void
fake_upstream_free(struct fake_upstream *f)
{
	size_t i;

	if (f == NULL)
		return;
	for (i = 0; i < FAKE_CONN_MAX; i++)
		if (f->conns[i].fd >= 0) {
			event_free(f->conns[i].ev);
			close(f->conns[i].fd);
		}
	event_free(f->uev);
	event_free(f->tev);
	close(f->ufd);
	close(f->tfd);
	free(f);
}

/* "127.0.0.1:port" of the fake. */
void
fake_upstream_addr(const struct fake_upstream *f, char *buf, size_t cap)
{
	snprintf(buf, cap, "127.0.0.1:%u", f->port);
}

/* Was name (lowercase) ever asked? */
bool
fake_saw(const struct fake_upstream *f, const char *name)
{
	size_t i;

	for (i = 0; i < f->nlog; i++)
		if (strcmp(f->log[i], name) == 0)
			return true;
	return false;
}
