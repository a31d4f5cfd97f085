/*
 * The resolver pipeline in-process: a dns instance on a loopback ephemeral
 * port, fake upstreams in the same event loop, a fake learn hook that
 * records calls, and policies built with policy_parse_json. Clients are
 * plain sockets speaking raw DNS, so every byte the resolver sends is
 * checked by this file, not by a library.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "dns_fake_upstream.h"
#include "dns_testpk.h"
#include "egressd/dns/dns.h"
#include "egressd/proto/dns_wire.h"
#include "ts_policy.h"
#include "util/now.h"

#define LEARN_MAX 32

struct learn_call {
	char qname[256];
	size_t n;
	struct dns_learn_addr a[8];
	bool answer_waiting; /* the client socket already had the answer */
};

struct ctx {
	struct event_base *base;
	struct log lg;
	int logfd;
	struct stats st;
	struct fake_upstream *f1, *f2;
	struct policy *pol;
	struct dns *dns;
	/* learn hook */
	struct learn_call calls[LEARN_MAX];
	size_t ncalls;
	bool learn_fail;
	unsigned client_answers; /* answers the test clients received */
	bool intercept_all;
	int client_fd; /* the UDP client of ask_udp, -1 outside it */
	bool fake_clock; /* the resolver's clock: real, or fake_ms */
	uint64_t fake_ms;
	/* asynchronous learn hook: one pending submit, completed by a timer */
	void (*pend_done)(void *, int, const char *);
	void *pend_arg;
	uint64_t pend_ticket, cancelled;
	int async_rc;
	unsigned submits;
	bool answer_before_done; /* the client had the answer before done */
	struct event *pend_ev;
};

/* ---- hooks ---- */

static struct policy *
hook_policy(void *arg)
{
	return ((struct ctx *)arg)->pol;
}

static int
hook_learn(void *arg, const char *qname, const struct dns_learn_addr *addrs,
    size_t n, struct err *e)
{
	struct ctx *c = arg;
	struct learn_call *lc;
	size_t i;

	if (c->learn_fail) {
		err_set(e, "nft said no");
		return -1;
	}
	if (c->ncalls >= LEARN_MAX)
		return 0;
	lc = &c->calls[c->ncalls++];
	snprintf(lc->qname, sizeof(lc->qname), "%s", qname);
	lc->n = n;
	for (i = 0; i < n && i < 8; i++)
		lc->a[i] = addrs[i];
	if (c->client_fd >= 0) {
		uint8_t b[1];

		lc->answer_waiting =
		    recv(c->client_fd, b, 1, MSG_PEEK | MSG_DONTWAIT) >= 0;
	}
	return 0;
}

static void
hook_done_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ctx *c = arg;
	void (*done)(void *, int, const char *) = c->pend_done;

	(void)fd;
	(void)what;
	if (done == NULL)
		return;
	if (c->client_fd >= 0) {
		uint8_t b[1];

		c->answer_before_done =
		    recv(c->client_fd, b, 1, MSG_PEEK | MSG_DONTWAIT) >= 0;
	}
	c->pend_done = NULL;
	c->pend_ticket = 0;
	done(c->pend_arg, c->async_rc, c->async_rc ? "nft said no" : NULL);
}

/* Asynchronous learn: completes 30 ms later from the loop. */
static uint64_t
hook_learn_submit(void *arg, const char *qname,
    const struct dns_learn_addr *addrs, size_t n,
    void (*done)(void *, int, const char *), void *done_arg, struct err *e)
{
	struct ctx *c = arg;
	struct timeval tv = {0, 30000};

	(void)qname;
	(void)addrs;
	(void)n;
	(void)e;
	assert_null(c->pend_done); /* one at a time in these tests */
	c->submits++;
	c->pend_done = done;
	c->pend_arg = done_arg;
	c->pend_ticket = 1000 + c->submits;
	if (c->pend_ev == NULL)
		c->pend_ev = evtimer_new(c->base, hook_done_cb, c);
	evtimer_add(c->pend_ev, &tv);
	return c->pend_ticket;
}

static void
hook_learn_cancel(void *arg, uint64_t ticket)
{
	struct ctx *c = arg;

	if (ticket == c->pend_ticket) {
		c->cancelled = ticket;
		c->pend_done = NULL;
	}
}

static uint64_t
hook_clock(void *arg)
{
	struct ctx *c = arg;

	return c->fake_clock ? c->fake_ms : now_mono_ms();
}

static bool
hook_intercepted(void *arg, const char *name)
{
	(void)name;
	return ((struct ctx *)arg)->intercept_all;
}

/* ---- setup ---- */

static const char base_policy[] =
    "{\"defaultAction\":\"deny\",\"egress\":["
    "{\"action\":\"allow\",\"target\":\"allowed.test\"},"
    "{\"action\":\"allow\",\"target\":\"*.allowed.test\"},"
    "{\"action\":\"allow\",\"target\":\"*.cdn.test\"},"
    "{\"action\":\"allow\",\"target\":\"10.8.0.0/16\"}"
    "],\"alwaysAllow\":[\"10.9.9.0/24\"],\"dns\":{\"negativeTtl\":42}}";

/* Swaps the snapshot the getter hands out, as the daemon does. */
static void
set_policy(struct ctx *c, const char *json)
{
	policy_unref(c->pol);
	c->pol = NULL;
	c->pol = ts_policy_json(json);
}

/*
 * A resolver on 127.0.0.1 (any port) in front of the fake upstreams fs,
 * with the test's hooks: the synchronous learn hook, or with async the
 * asynchronous one (learn_submit, learn_cancel) as the daemon wires it.
 */
static void
start_dns_with(struct ctx *c, struct fake_upstream **fs, size_t n,
    unsigned timeout_ms, unsigned attempt_ms, bool async)
{
	char addrs[4][64];
	const char *v[4];
	struct dns_opts o;
	struct dns_hooks h;
	struct err e;
	size_t i;

	for (i = 0; i < n; i++) {
		fake_upstream_addr(fs[i], addrs[i], sizeof(addrs[i]));
		v[i] = addrs[i];
	}
	memset(&o, 0, sizeof(o));
	o.listen4 = "127.0.0.1";
	o.listen6 = "";
	o.port = 0;
	o.upstreams = v;
	o.nupstreams = n;
	o.timeout_ms = timeout_ms;
	o.attempt_timeout_ms = attempt_ms;
	memset(&h, 0, sizeof(h));
	h.policy_get = hook_policy;
	h.learn = hook_learn; /* unused when learn_submit is set */
	if (async) {
		h.learn_submit = hook_learn_submit;
		h.learn_cancel = hook_learn_cancel;
	} else {
		h.intercepted = hook_intercepted;
	}
	h.clock_ms = hook_clock;
	h.arg = c;
	c->dns = dns_new(c->base, &o, &h, &c->lg, &c->st, &e);
	if (c->dns == NULL)
		fail_msg("dns_new: %s", e.msg);
}

static void
start_dns(struct ctx *c, struct fake_upstream **fs, size_t n,
    unsigned timeout_ms, unsigned attempt_ms)
{
	start_dns_with(c, fs, n, timeout_ms, attempt_ms, false);
}

/* start_dns with the asynchronous learn hook instead of learn. */
static void
start_dns_async(struct ctx *c, struct fake_upstream **fs, size_t n)
{
	start_dns_with(c, fs, n, 2000, 500, true);
}

static int
setup(void **state)
{
	struct ctx *c = calloc(1, sizeof(*c));

	c->base = event_base_new();
	c->logfd = memfd_create("dnslog", 0);
	log_init(&c->lg, c->logfd, LOG_DEBUG);
	c->f1 = fake_upstream_new(c->base, 0);
	c->f2 = fake_upstream_new(c->base, 0);
	c->pol = ts_policy_json(base_policy);
	c->client_fd = -1;
	*state = c;
	return 0;
}

static int
teardown(void **state)
{
	struct ctx *c = *state;

	dns_free(c->dns);
	if (c->pend_ev != NULL)
		event_free(c->pend_ev);
	fake_upstream_free(c->f1);
	fake_upstream_free(c->f2);
	policy_unref(c->pol);
	log_clear(&c->lg);
	close(c->logfd);
	event_base_free(c->base);
	free(c);
	return 0;
}

/* The whole log so far. */
static char *
log_text(struct ctx *c)
{
	static char buf[1 << 16];
	ssize_t n = pread(c->logfd, buf, sizeof(buf) - 1, 0);

	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

/* ---- clients ---- */

/* A query as a stub would send it. */
static size_t
make_query(
    uint8_t *out, uint16_t id, const char *name, uint16_t qtype, bool edns)
{
	size_t o = 0;

	out[o++] = (uint8_t)(id >> 8);
	out[o++] = (uint8_t)id;
	out[o++] = 0x01; /* RD */
	out[o++] = 0x00;
	out[o++] = 0;
	out[o++] = 1;
	memset(out + o, 0, 6);
	out[o + 5] = edns ? 1 : 0;
	o += 6;
	o += pk_wire_name(name, out + o);
	out[o++] = (uint8_t)(qtype >> 8);
	out[o++] = (uint8_t)qtype;
	out[o++] = 0;
	out[o++] = 1;
	if (edns) {
		static const uint8_t opt[] = {
		    0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 0};

		memcpy(out + o, opt, sizeof(opt));
		o += sizeof(opt);
	}
	return o;
}

static int
client_udp(struct ctx *c)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	struct sockaddr_in sin;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons(dns_port(c->dns));
	assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	return fd;
}

/* Sends q over UDP, runs the loop until an answer or max_ms. */
static ssize_t
ask_udp(struct ctx *c, const uint8_t *q, size_t qlen, uint8_t *ans, size_t cap,
    unsigned max_ms)
{
	int fd = client_udp(c);
	uint64_t end = now_mono_ms() + max_ms;
	ssize_t n = -1;

	assert_int_equal(send(fd, q, qlen, 0), (ssize_t)qlen);
	c->client_fd = fd;
	while (now_mono_ms() < end) {
		event_base_loop(c->base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
		n = recv(fd, ans, cap, 0);
		if (n >= 0)
			break;
	}
	c->client_fd = -1;
	close(fd);
	if (n >= 0)
		c->client_answers++;
	return n;
}

static int
client_tcp(struct ctx *c)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sin;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons(dns_port(c->dns));
	assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	fcntl(fd, F_SETFL, O_NONBLOCK);
	return fd;
}

static void
tcp_send(int fd, const uint8_t *q, size_t qlen)
{
	uint8_t buf[1024];

	buf[0] = (uint8_t)(qlen >> 8);
	buf[1] = (uint8_t)qlen;
	memcpy(buf + 2, q, qlen);
	assert_int_equal(write(fd, buf, qlen + 2), (ssize_t)(qlen + 2));
}

/* Reads one framed answer; -1 on timeout, 0 on EOF. */
static ssize_t
tcp_recv(struct ctx *c, int fd, uint8_t *ans, size_t cap, unsigned max_ms)
{
	static uint8_t buf[70000];
	static size_t have;
	static int for_fd = -1;
	uint64_t end = now_mono_ms() + max_ms;

	if (for_fd != fd) {
		have = 0;
		for_fd = fd;
	}
	while (now_mono_ms() < end) {
		ssize_t n;

		if (have >= 2) {
			size_t mlen = (size_t)(buf[0] << 8 | buf[1]);

			if (have >= 2 + mlen) {
				assert_true(mlen <= cap);
				memcpy(ans, buf + 2, mlen);
				memmove(buf, buf + 2 + mlen, have - 2 - mlen);
				have -= 2 + mlen;
				c->client_answers++;
				return (ssize_t)mlen;
			}
		}
		event_base_loop(c->base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
		n = read(fd, buf + have, sizeof(buf) - have);
		if (n == 0)
			return 0;
		if (n > 0)
			have += (size_t)n;
	}
	return -1;
}

/* ---- answer inspection (with the wire layer's own parser) ---- */

struct parsed {
	struct dns_msg *m;
	unsigned rcode;
	size_t an, ns;
};

static void
parse_answer(const uint8_t *buf, size_t len, struct parsed *p)
{
	struct err e;

	p->m = dns_msg_new();
	if (dns_msg_parse(p->m, buf, len, &e) < 0)
		fail_msg("answer does not parse: %s", e.msg);
	p->rcode = p->m->rcode;
	p->an = p->m->count[DNS_SEC_ANSWER];
	p->ns = p->m->count[DNS_SEC_AUTHORITY];
}

static bool
has_rr(const struct parsed *p, uint16_t type, const char *ip)
{
	uint8_t a[16];
	size_t i, alen = type == DNS_TYPE_A ? 4 : 16;

	if (ip != NULL)
		inet_pton(type == DNS_TYPE_A ? AF_INET : AF_INET6, ip, a);
	for (i = 0; i < p->m->nrr; i++) {
		const struct dns_rr *rr = &p->m->rr[i];

		if (rr->type != type)
			continue;
		if (ip == NULL)
			return true;
		if (rr->rdlen == alen &&
		    memcmp(dns_msg_rr_rdata(p->m, i), a, alen) == 0)
			return true;
	}
	return false;
}

static uint32_t
rr_ttl(const struct parsed *p, uint16_t type)
{
	size_t i;

	for (i = 0; i < p->m->nrr; i++)
		if (p->m->rr[i].type == type)
			return p->m->rr[i].ttl;
	return 0xffffffffu;
}

static void
parsed_free(struct parsed *p)
{
	dns_msg_free(p->m);
}

/* ---- tests ---- */

static void
test_denied_nxdomain_soa_not_forwarded(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[] = {c->f1};
	uint8_t q[512], ans[4096];
	size_t ql;
	ssize_t n;
	struct parsed p;

	fake_add_a(c->f1, "secret-data.evil.test", "203.0.113.66", 300);
	start_dns(c, fs, 1, 2000, 500);
	ql = make_query(q, 0x1234, "secret-data.evil.test", DNS_TYPE_A, true);
	n = ask_udp(c, q, ql, ans, sizeof(ans), 2000);
	assert_true(n > 0);
	parse_answer(ans, (size_t)n, &p);
	assert_int_equal(p.m->id, 0x1234);
	assert_int_equal(p.rcode, DNS_RCODE_NXDOMAIN);
	assert_int_equal(p.an, 0);
	assert_int_equal(p.ns, 1);
	assert_true(has_rr(&p, DNS_TYPE_SOA, NULL));
	assert_int_equal(rr_ttl(&p, DNS_TYPE_SOA), 42);
	assert_true(p.m->edns.present);
	parsed_free(&p);
	/* Never reached the upstream (no exfiltration), nothing learned. */
	assert_int_equal(c->f1->udp_queries + c->f1->tcp_queries, 0);
	assert_int_equal(c->ncalls, 0);
	assert_int_equal(c->st.dns_denied, 1);
	assert_int_equal(c->st.dns_queries, 1);
	assert_non_null(strstr(log_text(c), "\"ev\":\"dns.deny\""));
	assert_non_null(strstr(log_text(c), "secret-data.evil.test"));
}

static void
test_deny_log_deduplicated(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[] = {c->f1};
	uint8_t q[512], ans[512];
	size_t ql;
	int i;
	const char *t, *s;
	int lines = 0;

	start_dns(c, fs, 1, 2000, 500);
	ql = make_query(q, 7, "same.evil.test", DNS_TYPE_A, false);
	for (i = 0; i < 20; i++)
		assert_true(ask_udp(c, q, ql, ans, sizeof(ans), 1000) > 0);
	assert_int_equal(c->st.dns_denied, 20);
	t = log_text(c);
	for (s = t; (s = strstr(s, "\"ev\":\"dns.deny\"")) != NULL; s++)
		lines++;
	assert_int_equal(lines, 1);
}

static void
test_allowed_forwarded_learn_before_reply(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[] = {c->f1};
	uint8_t q[512], ans[4096];
	size_t ql;
	ssize_t n;
	struct parsed p;

	fake_add_a(c->f1, "www.allowed.test", "203.0.113.10", 300);
	fake_add_a(c->f1, "www.allowed.test", "203.0.113.11", 300);
	start_dns(c, fs, 1, 2000, 500);
	ql = make_query(q, 0xbeef, "www.allowed.test", DNS_TYPE_A, true);
	n = ask_udp(c, q, ql, ans, sizeof(ans), 2000);
	assert_true(n > 0);
	parse_answer(ans, (size_t)n, &p);
	assert_int_equal(p.m->id, 0xbeef);
	assert_int_equal(p.rcode, DNS_RCODE_NOERROR);
	assert_int_equal(p.an, 2);
	assert_true(has_rr(&p, DNS_TYPE_A, "203.0.113.10"));
	assert_true(has_rr(&p, DNS_TYPE_A, "203.0.113.11"));
	parsed_free(&p);
	assert_int_equal(c->f1->udp_queries, 1);
	assert_true(fake_saw(c->f1, "www.allowed.test"));
	/* Learned once, both addresses, before the client had the answer. */
	assert_int_equal(c->ncalls, 1);
	assert_string_equal(c->calls[0].qname, "www.allowed.test");
	assert_int_equal(c->calls[0].n, 2);
	assert_int_equal(c->calls[0].a[0].family, 4);
	/* Leased for the answer's TTL plus the slack. */
	assert_int_equal(c->calls[0].a[0].ttl, 300 + DNS_LEARN_SLACK_S);
	/* The answer was not yet on the client's socket when learning ran. */
	assert_false(c->calls[0].answer_waiting);
	assert_int_equal(c->st.dns_allowed, 1);
	assert_int_equal(c->st.dns_cache_misses, 1);
}

static void
test_learn_fails_servfail(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[] = {c->f1};
	uint8_t q[512], ans[4096];
	size_t ql;
	ssize_t n;
	struct parsed p;

	fake_add_a(c->f1, "www.allowed.test", "203.0.113.10", 300);
	start_dns(c, fs, 1, 2000, 500);
	c->learn_fail = true;
	ql = make_query(q, 5, "www.allowed.test", DNS_TYPE_A, false);
	n = ask_udp(c, q, ql, ans, sizeof(ans), 2000);
	assert_true(n > 0);
	parse_answer(ans, (size_t)n, &p);
	assert_int_equal(p.rcode, DNS_RCODE_SERVFAIL);
	assert_int_equal(p.an, 0);
	parsed_free(&p);
	assert_int_equal(c->st.dns_servfail, 1);
	assert_non_null(strstr(log_text(c), "dns.learn_failed"));
	/* Once learning works again the (cached) answer is released. */
	c->learn_fail = false;
	n = ask_udp(c, q, ql, ans, sizeof(ans), 2000);
	parse_answer(ans, (size_t)n, &p);
	assert_int_equal(p.rcode, DNS_RCODE_NOERROR);
	assert_true(has_rr(&p, DNS_TYPE_A, "203.0.113.10"));
	parsed_free(&p);
	assert_int_equal(c->ncalls, 1);
}

static void
test_internal_addresses_stripped(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[] = {c->f1};
	uint8_t q[512], ans[4096];
	size_t ql, i;
	ssize_t n;
	struct parsed p;

	fake_add_a(c->f1, "rebind.allowed.test", "203.0.113.10", 300);
	fake_add_a(c->f1, "rebind.allowed.test", "169.254.169.254", 300);
	fake_add_a(c->f1, "rebind.allowed.test", "127.0.0.1", 300);
	fake_add_a(c->f1, "rebind.allowed.test", "192.168.1.1", 300);
	fake_add_a(c->f1, "rebind.allowed.test", "10.9.9.9", 300);
	fake_add_a(c->f1, "rebind.allowed.test", "10.8.1.1", 300);
	fake_add_a(
	    c->f1, "rebind6.allowed.test", "::ffff:169.254.169.254", 300);
	fake_add_a(c->f1, "rebind6.allowed.test", "fd00:ec2::254", 300);
	fake_add_a(c->f1, "rebind6.allowed.test", "2001:db8::10", 300);
	start_dns(c, fs, 1, 2000, 500);

	ql = make_query(q, 1, "rebind.allowed.test", DNS_TYPE_A, false);
	n = ask_udp(c, q, ql, ans, sizeof(ans), 2000);
	parse_answer(ans, (size_t)n, &p);
	assert_int_equal(p.rcode, DNS_RCODE_NOERROR);
	assert_true(has_rr(&p, DNS_TYPE_A, "203.0.113.10"));
	/* 10.9.9.0/24 is allowed by the operator (alwaysAllow): kept; the
	 * user's CIDR allow of 10.8.0.0/16 does not exempt 10.8.1.1. */
	assert_true(has_rr(&p, DNS_TYPE_A, "10.9.9.9"));
	assert_false(has_rr(&p, DNS_TYPE_A, "10.8.1.1"));
	assert_false(has_rr(&p, DNS_TYPE_A, "169.254.169.254"));
	assert_false(has_rr(&p, DNS_TYPE_A, "127.0.0.1"));
	assert_false(has_rr(&p, DNS_TYPE_A, "192.168.1.1"));
	assert_int_equal(p.an, 2);
	parsed_free(&p);
	assert_int_equal(c->st.dns_private_stripped, 4);
	/* Only the kept ones were learned. */
	assert_int_equal(c->ncalls, 1);
	assert_int_equal(c->calls[0].n, 2);
	for (i = 0; i < c->calls[0].n; i++)
		assert_int_not_equal(c->calls[0].a[i].addr[0], 169);

	ql = make_query(q, 2, "rebind6.allowed.test", DNS_TYPE_AAAA, false);
	n = ask_udp(c, q, ql, ans, sizeof(ans), 2000);
	parse_answer(ans, (size_t)n, &p);
	assert_true(has_rr(&p, DNS_TYPE_AAAA, "2001:db8::10"));
	assert_false(has_rr(&p, DNS_TYPE_AAAA, "::ffff:169.254.169.254"));
	assert_false(has_rr(&p, DNS_TYPE_AAAA, "fd00:ec2::254"));
	assert_int_equal(p.an, 1);
	parsed_free(&p);
	assert_int_equal(c->calls[1].a[0].family, 6);
}

static void
test_private_answers_allow(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[] = {c->f1};
	uint8_t q[512], ans[4096];
	size_t ql;
	ssize_t n;
	struct parsed p;

	set_policy(c,
	    "{\"defaultAction\":\"deny\",\"egress\":[{\"action\":\"allow\","
	    "\"target\":\"*.allowed.test\"}],"
	    "\"dns\":{\"privateAnswers\":\"allow\"}}");
	fake_add_a(c->f1, "intra.allowed.test", "192.168.1.1", 300);
	start_dns(c, fs, 1, 2000, 500);
	ql = make_query(q, 1, "intra.allowed.test", DNS_TYPE_A, false);
	n = ask_udp(c, q, ql, ans, sizeof(ans), 2000);
	parse_answer(ans, (size_t)n, &p);
	assert_true(has_rr(&p, DNS_TYPE_A, "192.168.1.1"));
	parsed_free(&p);
	assert_int_equal(c->st.dns_private_stripped, 0);
}

static void
test_cname_to_denied_nxdomain(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[] = {c->f1};
	uint8_t q[512], ans[4096];
	size_t ql;
	ssize_t n;
	struct parsed p;

	fake_add_cname(c->f1, "alias.allowed.test", "target.evil.test", 300);
	fake_add_a(c->f1, "target.evil.test", "203.0.113.99", 300);
	fake_add_cname(c->f1, "ok.allowed.test", "edge.cdn.test", 300);
	fake_add_a(c->f1, "edge.cdn.test", "203.0.113.50", 300);
	start_dns(c, fs, 1, 2000, 500);

	ql = make_query(q, 9, "alias.allowed.test", DNS_TYPE_A, false);
	n = ask_udp(c, q, ql, ans, sizeof(ans), 2000);
	parse_answer(ans, (size_t)n, &p);
	assert_int_equal(p.rcode, DNS_RCODE_NXDOMAIN);
	assert_int_equal(p.an, 0);
	assert_false(has_rr(&p, DNS_TYPE_A, "203.0.113.99"));
	parsed_free(&p);
	assert_int_equal(c->st.dns_cname_denied, 1);
	assert_int_equal(c->ncalls, 0);
	assert_non_null(strstr(log_text(c), "target.evil.test"));

	/* A chain through allowed names is fine and learned for the qname. */
	ql = make_query(q, 10, "ok.allowed.test", DNS_TYPE_A, false);
	n = ask_udp(c, q, ql, ans, sizeof(ans), 2000);
	parse_answer(ans, (size_t)n, &p);
	assert_int_equal(p.rcode, DNS_RCODE_NOERROR);
	assert_true(has_rr(&p, DNS_TYPE_CNAME, NULL));
	assert_true(has_rr(&p, DNS_TYPE_A, "203.0.113.50"));
	parsed_free(&p);
	assert_int_equal(c->ncalls, 1);
	assert_string_equal(c->calls[0].qname, "ok.allowed.test");
}

/* The EDE of an answer: its code, and its text in text (cap 65). */
static int
answer_ede(const uint8_t *ans, ssize_t n, char *text)
{
	struct dns_ede_seen seen;

	assert_true(n > 0);
	if (dns_wire_ede(ans, (size_t)n, &seen) != 1)
		return -1;
	memcpy(text, seen.text, seen.text_len + 1);
	return seen.code;
}

/*
 * Every answer egressd refuses on its own says why to a client that sent
 * EDNS (RFC 8914): a denied name, a CNAME into one, no policy at all,
 * a class it does not serve. A client without EDNS gets no OPT at all.
 */
static void
test_denied_carries_ede(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[] = {c->f1};
	uint8_t q[512], ans[4096];
	char text[DNS_EDE_TEXT_MAX + 1];
	size_t ql;
	ssize_t n;
	struct parsed p;
	struct policy *keep;

	fake_add_cname(c->f1, "alias.allowed.test", "target.evil.test", 300);
	fake_add_a(c->f1, "target.evil.test", "203.0.113.99", 300);
	start_dns(c, fs, 1, 2000, 500);

	ql = make_query(q, 1, "secret.evil.test", DNS_TYPE_A, true);
	n = ask_udp(c, q, ql, ans, sizeof(ans), 2000);
	parse_answer(ans, (size_t)n, &p);
	assert_int_equal(p.rcode, DNS_RCODE_NXDOMAIN);
	assert_true(has_rr(&p, DNS_TYPE_SOA, NULL));
	assert_true(p.m->edns.present);
	parsed_free(&p);
	assert_int_equal(answer_ede(ans, n, text), DNS_EDE_BLOCKED);
	assert_string_equal(text, "egressd: denied by policy");

	/* Without EDNS: NXDOMAIN, no OPT, no EDE. */
	ql = make_query(q, 2, "secret.evil.test", DNS_TYPE_A, false);
	n = ask_udp(c, q, ql, ans, sizeof(ans), 2000);
	parse_answer(ans, (size_t)n, &p);
	assert_int_equal(p.rcode, DNS_RCODE_NXDOMAIN);
	assert_false(p.m->edns.present);
	parsed_free(&p);
	assert_int_equal(answer_ede(ans, n, text), -1);

	ql = make_query(q, 3, "alias.allowed.test", DNS_TYPE_A, true);
	n = ask_udp(c, q, ql, ans, sizeof(ans), 2000);
	assert_int_equal(ans[3] & 0x0f, DNS_RCODE_NXDOMAIN);
	assert_int_equal(answer_ede(ans, n, text), DNS_EDE_BLOCKED);
	assert_string_equal(text, "egressd: CNAME target denied by policy");

	/* Class CH (version.bind): REFUSED, 21 Not Supported. */
	ql = make_query(q, 4, "version.bind", DNS_TYPE_TXT, true);
	q[ql - 11 - 1] = 3; /* qclass CH, before the OPT record */
	n = ask_udp(c, q, ql, ans, sizeof(ans), 2000);
	assert_int_equal(ans[3] & 0x0f, DNS_RCODE_REFUSED);
	assert_int_equal(answer_ede(ans, n, text), DNS_EDE_NOT_SUPPORTED);
	assert_string_equal(text, "egressd: only class IN is served");

	/* No policy in force: fail closed, and say so. */
	keep = c->pol;
	c->pol = NULL;
	ql = make_query(q, 5, "www.allowed.test", DNS_TYPE_A, true);
	n = ask_udp(c, q, ql, ans, sizeof(ans), 2000);
	c->pol = keep;
	assert_int_equal(ans[3] & 0x0f, DNS_RCODE_NXDOMAIN);
	assert_int_equal(answer_ede(ans, n, text), DNS_EDE_BLOCKED);
	assert_string_equal(text, "egressd: no policy in force");
	assert_int_equal(c->f1->udp_queries + c->f1->tcp_queries, 1);
}

static void
test_id_and_0x20_case_preserved(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[] = {c->f1};
	uint8_t q[512], ans[4096];
	size_t ql;
	ssize_t n;
	int round;

	fake_add_a(c->f1, "www.allowed.test", "203.0.113.10", 300);
	start_dns(c, fs, 1, 2000, 500);
	for (round = 0; round < 2; round++) { /* upstream, then cache */
		uint16_t id = round == 0 ? 0xa1b2 : 0x0c0d;
		const char *spelled =
		    round == 0 ? "wWw.AlLoWeD.tEsT" : "WWW.allowed.TEST";

		ql = make_query(q, id, spelled, DNS_TYPE_A, false);
		n = ask_udp(c, q, ql, ans, sizeof(ans), 2000);
		assert_true(n > (ssize_t)ql - 4);
		assert_int_equal(ans[0] << 8 | ans[1], id);
		/* The question comes back byte for byte. */
		assert_memory_equal(ans + 12, q + 12, ql - 12);
		assert_true(ans[2] & 0x80);
	}
	assert_int_equal(c->f1->udp_queries, 1);
	assert_int_equal(c->st.dns_cache_hits, 1);
}

static void
test_cache_hit_no_upstream_ttl_aged(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[] = {c->f1};
	uint8_t q[512], ans[4096];
	size_t ql;
	ssize_t n;
	struct parsed p;

	c->fake_clock = true;
	c->fake_ms = 1000000;
	fake_add_a(c->f1, "www.allowed.test", "203.0.113.10", 300);
	start_dns(c, fs, 1, 2000, 500);
	ql = make_query(q, 1, "www.allowed.test", DNS_TYPE_A, false);
	assert_true(ask_udp(c, q, ql, ans, sizeof(ans), 2000) > 0);
	c->fake_ms += 100500; /* 100.5 s in the cache */
	c->f1->mode = FAKE_DROP; /* a hit must not need it */
	n = ask_udp(c, q, ql, ans, sizeof(ans), 2000);
	assert_true(n > 0);
	parse_answer(ans, (size_t)n, &p);
	assert_true(has_rr(&p, DNS_TYPE_A, "203.0.113.10"));
	assert_int_equal(rr_ttl(&p, DNS_TYPE_A), 200);
	parsed_free(&p);
	assert_int_equal(c->f1->udp_queries, 1);
	assert_int_equal(c->st.dns_cache_hits, 1);
	/* The lease of the first learn (302 s) still covers 200 s: no nft. */
	assert_int_equal(c->ncalls, 1);
	/* Expired after 300 s: asked again, learned again. */
	c->fake_ms += 200000;
	c->f1->mode = FAKE_ANSWER;
	n = ask_udp(c, q, ql, ans, sizeof(ans), 2000);
	assert_true(n > 0);
	assert_int_equal(c->f1->udp_queries, 2);
	assert_int_equal(c->ncalls, 2);
}

static void
test_cache_hit_relearns_when_lease_short(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[] = {c->f1};
	uint8_t q[512], ans[4096];
	size_t ql;
	ssize_t n;
	struct parsed p;

	/* dns.ttlMax 10: clients get 8 s, leases are 10 s. */
	set_policy(c,
	    "{\"defaultAction\":\"deny\",\"egress\":[{\"action\":\"allow\","
	    "\"target\":\"*.allowed.test\"}],\"dns\":{\"ttlMin\":1,\"ttlMax\":"
	    "10}}");
	c->fake_clock = true;
	c->fake_ms = 5000000;
	fake_add_a(c->f1, "www.allowed.test", "203.0.113.10", 300);
	start_dns(c, fs, 1, 2000, 500);
	ql = make_query(q, 1, "www.allowed.test", DNS_TYPE_A, false);
	n = ask_udp(c, q, ql, ans, sizeof(ans), 2000);
	parse_answer(ans, (size_t)n, &p);
	assert_int_equal(rr_ttl(&p, DNS_TYPE_A), 10 - DNS_LEARN_SLACK_S);
	parsed_free(&p);
	assert_int_equal(c->ncalls, 1);
	assert_int_equal(c->calls[0].a[0].ttl, 10);
	/* 1.5 s later the 10 s lease still outlives a new 8 s answer. */
	c->fake_ms += 1500;
	assert_int_equal(c->st.dns_learn_memo_skips, 0);
	assert_true(ask_udp(c, q, ql, ans, sizeof(ans), 2000) > 0);
	assert_int_equal(c->ncalls, 1);
	assert_int_equal(c->st.dns_learn_memo_skips, 1);
	/* 2.5 s after the learn it would not: learned again. */
	c->fake_ms += 1000;
	assert_true(ask_udp(c, q, ql, ans, sizeof(ans), 2000) > 0);
	assert_int_equal(c->ncalls, 2);
	assert_int_equal(c->st.dns_learn_memo_skips, 1);
	/* A new policy snapshot: learned again even within the lease. */
	set_policy(c,
	    "{\"defaultAction\":\"deny\",\"egress\":[{\"action\":\"allow\","
	    "\"target\":\"*.allowed.test\"}],\"dns\":{\"ttlMin\":1,\"ttlMax\":"
	    "10}}");
	/*
	 * As the daemon does on every swap: the memo is tied to pointer and
	 * revision, and malloc may hand the new snapshot the old address.
	 */
	c->pol->revision++;
	assert_true(ask_udp(c, q, ql, ans, sizeof(ans), 2000) > 0);
	assert_int_equal(c->ncalls, 3);
	assert_int_equal(c->f1->udp_queries, 1);
	assert_true(ask_udp(c, q, ql, ans, sizeof(ans), 2000) > 0);
	assert_int_equal(c->ncalls, 3);
	/*
	 * A full learned set evicted something (any address: the counter
	 * does not say which): the next hit learns again, then skips.
	 */
	c->st.nft_learned_evicted++;
	assert_true(ask_udp(c, q, ql, ans, sizeof(ans), 2000) > 0);
	assert_int_equal(c->ncalls, 4);
	assert_true(ask_udp(c, q, ql, ans, sizeof(ans), 2000) > 0);
	assert_int_equal(c->ncalls, 4);
	assert_int_equal(c->f1->udp_queries, 1);
}

static void
test_tiny_ttl_max_learns_every_hit(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[] = {c->f1};
	uint8_t q[512], ans[4096];
	size_t ql;

	/* dns.ttlMax 1: no room for slack; every hit must refresh. */
	set_policy(c,
	    "{\"defaultAction\":\"deny\",\"egress\":[{\"action\":\"allow\","
	    "\"target\":\"*.allowed.test\"}],\"dns\":{\"ttlMin\":1,"
	    "\"ttlMax\":1}}");
	c->fake_clock = true;
	c->fake_ms = 7000000;
	fake_add_a(c->f1, "www.allowed.test", "203.0.113.10", 300);
	start_dns(c, fs, 1, 2000, 500);
	ql = make_query(q, 1, "www.allowed.test", DNS_TYPE_A, false);
	assert_true(ask_udp(c, q, ql, ans, sizeof(ans), 2000) > 0);
	c->fake_ms += 300;
	assert_true(ask_udp(c, q, ql, ans, sizeof(ans), 2000) > 0);
	assert_int_equal(c->ncalls, 2);
	assert_int_equal(c->f1->udp_queries, 1);
}

static void
test_long_ttl_clamped_to_lease_max(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[] = {c->f1};
	uint8_t q[512], ans[4096];
	size_t ql;
	ssize_t n;
	struct parsed p;

	/* Without dns.ttlMax, a day-long TTL must not outlive the lease. */
	fake_add_a(c->f1, "www.allowed.test", "203.0.113.10", 86400);
	start_dns(c, fs, 1, 2000, 500);
	ql = make_query(q, 1, "www.allowed.test", DNS_TYPE_A, false);
	n = ask_udp(c, q, ql, ans, sizeof(ans), 2000);
	parse_answer(ans, (size_t)n, &p);
	assert_int_equal(
	    rr_ttl(&p, DNS_TYPE_A), DNS_LEARN_LEASE_MAX_S - DNS_LEARN_SLACK_S);
	parsed_free(&p);
	assert_int_equal(c->calls[0].a[0].ttl, DNS_LEARN_LEASE_MAX_S);
}

static void
test_cache_hit_rechecks_policy(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[] = {c->f1};
	uint8_t q[512], ans[4096];
	size_t ql;
	ssize_t n;
	struct parsed p;

	fake_add_a(c->f1, "www.allowed.test", "203.0.113.10", 300);
	start_dns(c, fs, 1, 2000, 500);
	ql = make_query(q, 1, "www.allowed.test", DNS_TYPE_A, false);
	assert_true(ask_udp(c, q, ql, ans, sizeof(ans), 2000) > 0);
	/* Policy tightened: the cached answer must not leak out. */
	set_policy(c, "{\"defaultAction\":\"deny\",\"egress\":[]}");
	n = ask_udp(c, q, ql, ans, sizeof(ans), 2000);
	parse_answer(ans, (size_t)n, &p);
	assert_int_equal(p.rcode, DNS_RCODE_NXDOMAIN);
	parsed_free(&p);
	assert_int_equal(c->ncalls, 1);
}

static void
test_policy_swap_while_in_flight(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[] = {c->f1};
	uint8_t q[512], ans[4096];
	size_t ql;
	ssize_t n = -1;
	int fd;
	uint64_t end;

	fake_add_a(c->f1, "www.allowed.test", "203.0.113.10", 300);
	start_dns(c, fs, 1, 2000, 500);
	c->f1->mode = FAKE_DROP; /* hold the query in flight */
	fd = client_udp(c);
	ql = make_query(q, 1, "www.allowed.test", DNS_TYPE_A, false);
	assert_int_equal(send(fd, q, ql, 0), (ssize_t)ql);
	end = now_mono_ms() + 50;
	while (now_mono_ms() < end)
		event_base_loop(c->base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	assert_int_equal(c->f1->udp_queries, 1);
	/* The daemon swaps and drops its reference: ours keeps it alive. */
	set_policy(c, base_policy);
	c->f1->mode = FAKE_ANSWER;
	end = now_mono_ms() + 2000;
	while (now_mono_ms() < end && n < 0) {
		event_base_loop(c->base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
		n = recv(fd, ans, sizeof(ans), 0);
	}
	close(fd);
	/* c-ares retransmitted after the attempt timeout, or failed over. */
	assert_true(n > 0);
}

/*
 * More queries waiting for upstreams than DNS_INFLIGHT_MAX: the excess is
 * SERVFAIL at once and counted in dns_overload.
 */
static void
test_inflight_cap_counts_overload(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[] = {c->f1};
	uint8_t q[512], ans[512];
	size_t ql, i, servfail = 0;
	int fd, j;
	char name[64];

	start_dns(c, fs, 1, 5000, 5000);
	c->f1->mode = FAKE_DROP; /* everything stays in flight */
	fd = client_udp(c);
	for (i = 0; i < DNS_INFLIGHT_MAX + 40; i++) {
		snprintf(name, sizeof(name), "q%zu.allowed.test", i);
		ql = make_query(q, (uint16_t)i, name, DNS_TYPE_A, false);
		assert_int_equal(send(fd, q, ql, 0), (ssize_t)ql);
		/* Keep the resolver's socket buffer from overflowing. */
		if (i % 16 == 15)
			for (j = 0; j < 4; j++)
				event_base_loop(
				    c->base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
		while (recv(fd, ans, sizeof(ans), MSG_DONTWAIT) >= 12)
			if ((ans[3] & 0x0f) == DNS_RCODE_SERVFAIL)
				servfail++;
	}
	for (j = 0; j < 50; j++)
		event_base_loop(c->base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	while (recv(fd, ans, sizeof(ans), MSG_DONTWAIT) >= 12)
		if ((ans[3] & 0x0f) == DNS_RCODE_SERVFAIL)
			servfail++;
	close(fd);
	assert_true(c->st.dns_overload > 0);
	assert_true(c->st.dns_overload <= 40);
	assert_int_equal(servfail, c->st.dns_overload);
}

/*
 * Issue #16 item 12: an answer in flight while the policy tightens is
 * judged by the policy in force when it comes back: NXDOMAIN, nothing
 * learned. (An answer allowed by both is released as usual.)
 */
static void
test_tightening_while_in_flight(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[] = {c->f1};
	uint8_t q[512], ans[4096];
	size_t ql;
	ssize_t n = -1;
	struct parsed p;
	int fd;
	uint64_t end;

	fake_add_a(c->f1, "www.allowed.test", "203.0.113.10", 300);
	fake_add_a(c->f1, "x.cdn.test", "203.0.113.11", 300);
	start_dns(c, fs, 1, 2000, 3000);
	c->f1->delay_ms = 300; /* the answer is on its way meanwhile */
	fd = client_udp(c);
	ql = make_query(q, 7, "www.allowed.test", DNS_TYPE_A, false);
	assert_int_equal(send(fd, q, ql, 0), (ssize_t)ql);
	ql = make_query(q, 8, "x.cdn.test", DNS_TYPE_A, false);
	assert_int_equal(send(fd, q, ql, 0), (ssize_t)ql);
	end = now_mono_ms() + 100;
	while (now_mono_ms() < end)
		event_base_loop(c->base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	assert_int_equal(c->f1->udp_queries, 2);
	set_policy(c,
	    "{\"defaultAction\":\"deny\",\"egress\":["
	    "{\"action\":\"allow\",\"target\":\"*.cdn.test\"}]}");
	while (n < 0 || ans[1] != 7) {
		end = now_mono_ms() + 2000;
		n = -1;
		while (now_mono_ms() < end && n < 0) {
			event_base_loop(c->base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
			n = recv(fd, ans, sizeof(ans), MSG_DONTWAIT);
		}
		assert_true(n > 0);
		parse_answer(ans, (size_t)n, &p);
		if (ans[1] == 8)
			assert_int_equal(p.rcode, DNS_RCODE_NOERROR);
		else
			assert_int_equal(p.rcode, DNS_RCODE_NXDOMAIN);
		parsed_free(&p);
	}
	close(fd);
	/* At most the still-allowed name was learned, never the other. */
	assert_true(c->ncalls <= 1);
	if (c->ncalls == 1)
		assert_string_equal(c->calls[0].qname, "x.cdn.test");
}

static void
test_tc_retry_over_tcp_and_udp_truncation(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[] = {c->f1};
	uint8_t q[512], ans[8192];
	size_t ql;
	ssize_t n;
	struct parsed p;
	char ip[32];
	int i, fd;

	/* 60 A records: ~1 KB, too big for a client without EDNS. */
	for (i = 0; i < 60; i++) {
		snprintf(ip, sizeof(ip), "203.0.113.%d", i + 1);
		fake_add_a(c->f1, "big.allowed.test", ip, 300);
	}
	c->f1->mode = FAKE_TC;
	start_dns(c, fs, 1, 2000, 1000);
	ql = make_query(q, 77, "big.allowed.test", DNS_TYPE_A, false);
	n = ask_udp(c, q, ql, ans, sizeof(ans), 2000);
	assert_true(n > 0);
	/* Upstream said TC over UDP, egressd asked again over TCP. */
	assert_int_equal(c->f1->udp_queries, 1);
	assert_int_equal(c->f1->tcp_queries, 1);
	/* The client (512 bytes) gets TC=1 and no records. */
	assert_true(n <= 512);
	assert_true(ans[2] & 0x02);
	assert_int_equal(ans[0] << 8 | ans[1], 77);
	/* Learned anyway? No: nothing was released. */
	/* Over TCP it gets everything, from the cache. */
	fd = client_tcp(c);
	tcp_send(fd, q, ql);
	n = tcp_recv(c, fd, ans, sizeof(ans), 2000);
	assert_true(n > 512);
	parse_answer(ans, (size_t)n, &p);
	assert_int_equal(p.an, 60);
	assert_false(ans[2] & 0x02);
	parsed_free(&p);
	close(fd);
	assert_int_equal(c->f1->tcp_queries, 1);
	/* With EDNS 1232 the client takes it over UDP directly. */
	ql = make_query(q, 78, "big.allowed.test", DNS_TYPE_A, true);
	n = ask_udp(c, q, ql, ans, sizeof(ans), 2000);
	assert_true(n > 512 && n <= 1232);
	assert_false(ans[2] & 0x02);
}

static void
test_upstream_down_servfail_within_timeout(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[] = {c->f1};
	uint8_t q[512], ans[512];
	size_t ql;
	ssize_t n;
	uint64_t t0;

	c->f1->mode = FAKE_DROP;
	start_dns(c, fs, 1, 600, 200);
	ql = make_query(q, 3, "www.allowed.test", DNS_TYPE_A, false);
	t0 = now_mono_ms();
	n = ask_udp(c, q, ql, ans, sizeof(ans), 3000);
	assert_true(n > 0);
	assert_int_equal(ans[3] & 0x0f, DNS_RCODE_SERVFAIL);
	assert_true(now_mono_ms() - t0 < 900);
	assert_true(now_mono_ms() - t0 >= 190);
	assert_int_equal(c->st.dns_servfail, 1);
	assert_true(c->st.dns_upstream_failures >= 1);
}

static void
test_failover_to_second_upstream(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[] = {c->f1, c->f2};
	uint8_t q[512], ans[512];
	size_t ql;
	ssize_t n;
	struct parsed p;

	c->f1->mode = FAKE_DROP;
	fake_add_a(c->f2, "www.allowed.test", "203.0.113.20", 300);
	start_dns(c, fs, 2, 3000, 200);
	ql = make_query(q, 3, "www.allowed.test", DNS_TYPE_A, false);
	n = ask_udp(c, q, ql, ans, sizeof(ans), 3000);
	assert_true(n > 0);
	parse_answer(ans, (size_t)n, &p);
	assert_true(has_rr(&p, DNS_TYPE_A, "203.0.113.20"));
	parsed_free(&p);
	assert_int_equal(c->f1->udp_queries, 1);
	assert_int_equal(c->f2->udp_queries, 1);
}

static void
test_formerr_qdcount_2_and_garbage(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[] = {c->f1};
	uint8_t q[512], ans[512];
	size_t ql, i;
	ssize_t n;
	unsigned seed = 12345;

	start_dns(c, fs, 1, 500, 200);
	/* Two questions: FORMERR. */
	ql = make_query(q, 0x4242, "www.allowed.test", DNS_TYPE_A, false);
	q[5] = 2;
	ql += pk_wire_name("x.allowed.test", q + ql);
	memcpy(q + ql, "\0\1\0\1", 4);
	ql += 4;
	n = ask_udp(c, q, ql, ans, sizeof(ans), 1000);
	assert_true(n >= 12);
	assert_int_equal(ans[0] << 8 | ans[1], 0x4242);
	assert_int_equal(ans[3] & 0x0f, DNS_RCODE_FORMERR);
	assert_int_equal(c->st.dns_formerr, 1);
	/* Opcode != QUERY: NOTIMP. */
	ql = make_query(q, 0x4243, "www.allowed.test", DNS_TYPE_A, false);
	q[2] |= 0x10; /* opcode 2 (STATUS) */
	n = ask_udp(c, q, ql, ans, sizeof(ans), 1000);
	assert_true(n >= 12);
	assert_int_equal(ans[3] & 0x0f, DNS_RCODE_NOTIMP);
	/* Garbage of every length: answered or dropped, never a crash. */
	for (i = 0; i < 300; i++) {
		int fd = client_udp(c);
		size_t len = i % 80, k;

		for (k = 0; k < len; k++) {
			seed = seed * 1103515245u + 12345u;
			q[k] = (uint8_t)(seed >> 16);
		}
		if (len > 2)
			q[2] &= 0x7f; /* mostly "queries" */
		(void)send(fd, q, len, 0);
		event_base_loop(c->base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
		close(fd);
	}
	/* A response sent to us is dropped, not answered (no loops). */
	ql = make_query(q, 1, "www.allowed.test", DNS_TYPE_A, false);
	q[2] |= 0x80;
	assert_true(ask_udp(c, q, ql, ans, sizeof(ans), 200) < 0);
	/* Still serving. */
	ql = make_query(q, 0x5151, "still.evil.test", DNS_TYPE_A, false);
	n = ask_udp(c, q, ql, ans, sizeof(ans), 1000);
	assert_true(n > 0);
	assert_int_equal(ans[3] & 0x0f, DNS_RCODE_NXDOMAIN);
}

static void
test_garbage_upstream_answers(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[] = {c->f1};
	uint8_t q[512], ans[4096];
	char name[64];
	size_t ql, k;
	ssize_t n;
	int i, servfail = 0;
	unsigned before;
	struct parsed p;

	c->f1->mode = FAKE_GARBAGE;
	c->f1->seed = 4242;
	start_dns(c, fs, 1, 1000, 300);
	for (i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "g%d.allowed.test", i);
		ql = make_query(q, (uint16_t)i, name, DNS_TYPE_A, i % 2 == 0);
		n = ask_udp(c, q, ql, ans, sizeof(ans), 2000);
		/* Always an answer, always well-formed, always ours. */
		assert_true(n >= 12);
		parse_answer(ans, (size_t)n, &p);
		assert_int_equal(p.m->id, (uint16_t)i);
		if (p.rcode == DNS_RCODE_SERVFAIL)
			servfail++;
		/* Nothing internal ever gets out. */
		for (k = 0; k < p.m->nrr; k++) {
			const struct dns_rr *rr = &p.m->rr[k];

			if (rr->type == DNS_TYPE_A && rr->rdlen == 4)
				assert_false(dns_addr_is_internal(
				    4, dns_msg_rr_rdata(p.m, k)));
			if (rr->type == DNS_TYPE_AAAA && rr->rdlen == 16)
				assert_false(dns_addr_is_internal(
				    6, dns_msg_rr_rdata(p.m, k)));
		}
		parsed_free(&p);
	}
	assert_true(servfail > 0);
	/* A malformed answer is not kept: asking again goes upstream. */
	c->f1->seed = 4242; /* g0's garbage again */
	before = c->f1->udp_queries;
	ql = make_query(q, 1, "g0.allowed.test", DNS_TYPE_A, true);
	n = ask_udp(c, q, ql, ans, sizeof(ans), 2000);
	assert_true(n >= 12);
	if ((ans[3] & 0x0f) == DNS_RCODE_SERVFAIL)
		assert_true(c->f1->udp_queries > before);
}

static void
test_hostile_upstream_answers(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[] = {c->f1};
	uint8_t q[512], ans[8192];
	char name[64], pres[DNS_NAME_PRES_MAX];
	size_t ql, k;
	ssize_t n;
	int i, rc[16] = {0}, with_addr = 0;
	struct parsed p;
	struct dns_svcb sv;
	struct err e;

	c->f1->mode = FAKE_HOSTILE;
	c->f1->seed = 777;
	start_dns(c, fs, 1, 1000, 300);
	for (i = 0; i < 400; i++) {
		uint16_t qt = i % 3 == 0 ? DNS_TYPE_AAAA
		    : i % 3 == 1         ? DNS_TYPE_A
		                         : DNS_TYPE_HTTPS;

		snprintf(name, sizeof(name), "h%d.allowed.test", i);
		ql = make_query(q, (uint16_t)(i + 1), name, qt, i % 2 == 0);
		n = ask_udp(c, q, ql, ans, sizeof(ans), 2000);
		assert_true(n >= 12);
		parse_answer(ans, (size_t)n, &p);
		assert_int_equal(p.m->id, (uint16_t)(i + 1));
		rc[p.rcode & 15]++;
		for (k = 0; k < p.m->nrr; k++) {
			const struct dns_rr *rr = &p.m->rr[k];
			const uint8_t *rd = dns_msg_rr_rdata(p.m, k);
			struct dns_name nm;

			/* No internal address, in records or hints. */
			if (rr->type == DNS_TYPE_A) {
				assert_false(dns_addr_is_internal(4, rd));
				with_addr++;
			}
			if (rr->type == DNS_TYPE_AAAA) {
				assert_false(dns_addr_is_internal(6, rd));
				with_addr++;
			}
			if (rr->type == DNS_TYPE_HTTPS &&
			    dns_svcb_parse(rd, rr->rdlen, rr->type, &sv, &e) ==
			        0 &&
			    sv.nv4 > 0)
				assert_false(dns_addr_is_internal(4, sv.v4[0]));
			/* No alias into a denied name. */
			if (rr->type == DNS_TYPE_CNAME &&
			    rr->section == DNS_SEC_ANSWER) {
				memcpy(nm.wire, rd, rr->rdlen);
				nm.len = rr->rdlen;
				assert_true(
				    dns_name_to_pres(&nm, DNS_PRES_LOWER, pres,
				        sizeof(pres)) >= 0);
				assert_null(strstr(pres, "evil.test"));
			}
		}
		parsed_free(&p);
	}
	/* The generator reached every outcome. */
	assert_true(rc[DNS_RCODE_NOERROR] > 0);
	assert_true(rc[DNS_RCODE_NXDOMAIN] > 0); /* CNAME into evil.test */
	assert_true(with_addr > 0);
	assert_true(c->st.dns_private_stripped > 0);
	assert_true(c->st.dns_cname_denied > 0);
}

static void
test_localhost_and_own_ptr_local(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[] = {c->f1};
	uint8_t q[512], ans[512];
	size_t ql;
	ssize_t n;
	struct parsed p;

	start_dns(c, fs, 1, 500, 200);
	ql = make_query(q, 1, "localhost", DNS_TYPE_A, false);
	n = ask_udp(c, q, ql, ans, sizeof(ans), 1000);
	parse_answer(ans, (size_t)n, &p);
	assert_true(has_rr(&p, DNS_TYPE_A, "127.0.0.1"));
	parsed_free(&p);
	ql = make_query(q, 2, "foo.LOCALHOST", DNS_TYPE_AAAA, false);
	n = ask_udp(c, q, ql, ans, sizeof(ans), 1000);
	parse_answer(ans, (size_t)n, &p);
	assert_true(has_rr(&p, DNS_TYPE_AAAA, "::1"));
	parsed_free(&p);
	ql = make_query(q, 3, "1.0.0.127.in-addr.arpa", DNS_TYPE_PTR, false);
	n = ask_udp(c, q, ql, ans, sizeof(ans), 1000);
	parse_answer(ans, (size_t)n, &p);
	assert_int_equal(p.rcode, DNS_RCODE_NOERROR);
	assert_true(has_rr(&p, DNS_TYPE_PTR, NULL));
	parsed_free(&p);
	/* Other reverse names follow policy: denied here, not forwarded. */
	ql = make_query(q, 4, "10.113.0.203.in-addr.arpa", DNS_TYPE_PTR, false);
	n = ask_udp(c, q, ql, ans, sizeof(ans), 1000);
	assert_int_equal(ans[3] & 0x0f, DNS_RCODE_NXDOMAIN);
	assert_int_equal(c->f1->udp_queries, 0);
	assert_int_equal(c->st.dns_local, 3);
}

static void
test_tcp_pipelined_out_of_order(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[] = {c->f1};
	uint8_t q[512], ans[4096];
	size_t ql;
	ssize_t n;
	int fd, i;
	bool seen[3] = {false, false, false};

	fake_add_a(c->f1, "www.allowed.test", "203.0.113.10", 300);
	start_dns(c, fs, 1, 2000, 500);
	fd = client_tcp(c);
	/* 1: forwarded (slow path); 2: denied (instant); 3: localhost. */
	ql = make_query(q, 101, "www.allowed.test", DNS_TYPE_A, false);
	tcp_send(fd, q, ql);
	ql = make_query(q, 102, "nope.evil.test", DNS_TYPE_A, false);
	tcp_send(fd, q, ql);
	ql = make_query(q, 103, "localhost", DNS_TYPE_A, false);
	tcp_send(fd, q, ql);
	for (i = 0; i < 3; i++) {
		unsigned id;

		n = tcp_recv(c, fd, ans, sizeof(ans), 2000);
		assert_true(n >= 12);
		id = (unsigned)(ans[0] << 8 | ans[1]);
		assert_true(id >= 101 && id <= 103);
		seen[id - 101] = true;
		if (i == 0) /* the upstream one cannot be first */
			assert_int_not_equal(id, 101);
	}
	assert_true(seen[0] && seen[1] && seen[2]);
	assert_int_equal(c->f1->tcp_queries, 1); /* TCP in, TCP out */
	assert_int_equal(c->f1->udp_queries, 0);
	close(fd);
}

static void
test_tcp_caps(void **state)
{
	struct ctx *c = *state;
	struct dns_opts o;
	struct dns_hooks h;
	char addr[64];
	const char *v[1];
	uint8_t q[512], ans[512];
	size_t ql;
	ssize_t n;
	int fds[4], fd, i;
	struct err e;
	struct dns_status st;

	fake_upstream_addr(c->f1, addr, sizeof(addr));
	v[0] = addr;
	memset(&o, 0, sizeof(o));
	o.listen4 = "127.0.0.1";
	o.listen6 = "";
	o.upstreams = v;
	o.nupstreams = 1;
	o.tcp_conns_max = 2;
	o.tcp_queries_max = 3;
	o.tcp_idle_ms = 300;
	memset(&h, 0, sizeof(h));
	h.policy_get = hook_policy;
	h.arg = c;
	c->dns = dns_new(c->base, &o, &h, &c->lg, &c->st, &e);
	assert_non_null(c->dns);

	/* Per-connection query cap: the 4th query is never answered. */
	fd = client_tcp(c);
	ql = make_query(q, 1, "a.evil.test", DNS_TYPE_A, false);
	for (i = 0; i < 4; i++)
		tcp_send(fd, q, ql);
	for (i = 0; i < 3; i++)
		assert_true(tcp_recv(c, fd, ans, sizeof(ans), 1000) > 0);
	assert_int_equal(tcp_recv(c, fd, ans, sizeof(ans), 1000), 0);
	close(fd);

	/* Connection cap: the third concurrent client is closed at once. */
	for (i = 0; i < 3; i++) {
		fds[i] = client_tcp(c);
		{
			uint64_t end = now_mono_ms() + 50;

			while (now_mono_ms() < end)
				event_base_loop(
				    c->base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
		}
	}
	dns_status(c->dns, &st);
	assert_int_equal(st.tcp_conns, 2);
	tcp_send(fds[2], q, ql);
	assert_int_equal(tcp_recv(c, fds[2], ans, sizeof(ans), 500), 0);
	/* Idle timeout: the others are closed after 300 ms of silence. */
	n = tcp_recv(c, fds[0], ans, sizeof(ans), 1500);
	assert_int_equal(n, 0);
	n = tcp_recv(c, fds[1], ans, sizeof(ans), 500);
	assert_int_equal(n, 0);
	for (i = 0; i < 3; i++)
		close(fds[i]);
	dns_status(c->dns, &st);
	assert_int_equal(st.tcp_conns, 0);
}

static void
test_garbage_over_tcp_closes(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[] = {c->f1};
	uint8_t ans[512];
	int fd;

	start_dns(c, fs, 1, 500, 200);
	fd = client_tcp(c);
	/* Length 3: shorter than a header. */
	assert_int_equal(write(fd, "\0\3abc", 5), 5);
	assert_int_equal(tcp_recv(c, fd, ans, sizeof(ans), 1000), 0);
	close(fd);
}

static void
test_ech_stripped_for_intercepted(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[] = {c->f1};
	/* HTTPS 1 . alpn=h2 ech=0x0102 ipv4hint=203.0.113.5 */
	static const uint8_t https_rd[] = {0, 1, 0, 0, 1, 0, 3, 2, 'h', '2', 0,
	    4, 0, 4, 203, 0, 113, 5, 0, 5, 0, 2, 1, 2};
	uint8_t q[512], ans[4096];
	size_t ql;
	ssize_t n;
	struct parsed p;
	size_t i;
	struct dns_svcb sv;
	struct err e;

	fake_add(c->f1, "svc.allowed.test", DNS_TYPE_HTTPS, 300, https_rd,
	    sizeof(https_rd));
	start_dns(c, fs, 1, 2000, 500);
	c->intercept_all = true;
	ql = make_query(q, 1, "svc.allowed.test", DNS_TYPE_HTTPS, false);
	n = ask_udp(c, q, ql, ans, sizeof(ans), 2000);
	parse_answer(ans, (size_t)n, &p);
	assert_int_equal(p.an, 1);
	for (i = 0; i < p.m->nrr; i++)
		if (p.m->rr[i].type == DNS_TYPE_HTTPS) {
			assert_int_equal(
			    dns_svcb_parse(dns_msg_rr_rdata(p.m, i),
			        p.m->rr[i].rdlen, DNS_TYPE_HTTPS, &sv, &e),
			    0);
			assert_false(sv.has_ech);
			assert_int_equal(sv.nv4, 1);
		}
	parsed_free(&p);
	/* The hint was learned like an address. */
	assert_int_equal(c->ncalls, 1);
	assert_int_equal(c->calls[0].a[0].addr[3], 5);
}

static void
test_status_and_ready(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[] = {c->f1, c->f2};
	struct dns_status st;
	const char *why = "x";

	start_dns(c, fs, 2, 500, 200);
	dns_status(c->dns, &st);
	assert_true(st.udp4 && st.tcp4);
	assert_false(st.udp6);
	assert_int_equal(st.nupstreams, 2);
	assert_int_equal(st.nhealthy, 2);
	assert_int_not_equal(st.port, 0);
	assert_true(dns_ready(c->dns, &why));
	assert_null(why);
	assert_false(dns_ready(NULL, &why));
}

static void
test_bad_upstreams_rejected(void **state)
{
	struct ctx *c = *state;
	struct dns_opts o;
	struct dns_hooks h;
	struct err e;
	const char *host[] = {"dns.example.com"};
	const char *loop[] = {"127.0.0.1:15353"};

	memset(&o, 0, sizeof(o));
	memset(&h, 0, sizeof(h));
	o.listen4 = "127.0.0.1";
	o.listen6 = "";
	o.upstreams = host;
	o.nupstreams = 1;
	assert_null(dns_new(c->base, &o, &h, &c->lg, &c->st, &e));
	assert_non_null(strstr(e.msg, "hostnames"));
	/* Our own listener as upstream: a loop. */
	o.port = 15353;
	o.upstreams = loop;
	c->dns = dns_new(c->base, &o, &h, &c->lg, &c->st, &e);
	if (c->dns != NULL)
		fail_msg("accepted own listener as upstream");
	assert_non_null(strstr(e.msg, "own listener"));
	/* Missing resolv.conf and no upstreams: refused with the path. */
	o.port = 0;
	o.upstreams = NULL;
	o.nupstreams = 0;
	o.resolv_conf = "/nonexistent/resolv.conf";
	assert_null(dns_new(c->base, &o, &h, &c->lg, &c->st, &e));
	assert_non_null(strstr(e.msg, "/nonexistent/resolv.conf"));
}

static void
test_set_upstreams_reload(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[] = {c->f1};
	uint8_t q[512], ans[512];
	size_t ql;
	ssize_t n;
	struct parsed p;
	char addr[64];
	const char *v[1];
	struct err e;

	fake_add_a(c->f1, "www.allowed.test", "203.0.113.10", 300);
	fake_add_a(c->f2, "www.allowed.test", "203.0.113.20", 300);
	start_dns(c, fs, 1, 2000, 500);
	ql = make_query(q, 1, "www.allowed.test", DNS_TYPE_A, false);
	n = ask_udp(c, q, ql, ans, sizeof(ans), 2000);
	parse_answer(ans, (size_t)n, &p);
	assert_true(has_rr(&p, DNS_TYPE_A, "203.0.113.10"));
	parsed_free(&p);
	fake_upstream_addr(c->f2, addr, sizeof(addr));
	v[0] = addr;
	assert_int_equal(dns_set_upstreams(c->dns, v, 1, &e), 0);
	n = ask_udp(c, q, ql, ans, sizeof(ans), 2000);
	parse_answer(ans, (size_t)n, &p);
	/* Cache flushed, new upstream asked. */
	assert_true(has_rr(&p, DNS_TYPE_A, "203.0.113.20"));
	parsed_free(&p);
	v[0] = "not-an-ip";
	assert_int_equal(dns_set_upstreams(c->dns, v, 1, &e), -1);
}

/* The asynchronous learn hook: the answer leaves only from done. */
static void
test_async_learn(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[] = {c->f1};
	uint8_t q[512], ans[4096];
	size_t ql;
	ssize_t n;
	struct parsed p;

	fake_add_a(c->f1, "www.allowed.test", "203.0.113.10", 300);
	fake_add_a(c->f1, "b.allowed.test", "203.0.113.11", 300);
	start_dns_async(c, fs, 1);
	ql = make_query(q, 7, "www.allowed.test", DNS_TYPE_A, false);
	n = ask_udp(c, q, ql, ans, sizeof(ans), 2000);
	assert_true(n > 0);
	parse_answer(ans, (size_t)n, &p);
	assert_int_equal(p.rcode, DNS_RCODE_NOERROR);
	assert_true(has_rr(&p, DNS_TYPE_A, "203.0.113.10"));
	parsed_free(&p);
	assert_int_equal(c->submits, 1);
	assert_false(c->answer_before_done);
	/* The memo was written from done: a hit needs no learn. */
	n = ask_udp(c, q, ql, ans, sizeof(ans), 2000);
	assert_true(n > 0);
	assert_int_equal(c->submits, 1);
	/* An eviction since: learned again, and the memo written again. */
	c->st.nft_learned_evicted += 3;
	assert_true(ask_udp(c, q, ql, ans, sizeof(ans), 2000) > 0);
	assert_int_equal(c->submits, 2);
	assert_true(ask_udp(c, q, ql, ans, sizeof(ans), 2000) > 0);
	assert_int_equal(c->submits, 2);
	/* A failed learn: SERVFAIL, never the answer. */
	c->async_rc = -1;
	ql = make_query(q, 8, "b.allowed.test", DNS_TYPE_A, false);
	n = ask_udp(c, q, ql, ans, sizeof(ans), 2000);
	assert_true(n > 0);
	parse_answer(ans, (size_t)n, &p);
	assert_int_equal(p.rcode, DNS_RCODE_SERVFAIL);
	assert_int_equal(p.an, 0);
	parsed_free(&p);
	assert_non_null(strstr(log_text(c), "dns.learn_failed"));
	/* A policy swapped in while learning that denies the name wins. */
	c->async_rc = 0;
	ql = make_query(q, 9, "b.allowed.test", DNS_TYPE_A, false);
	{
		int fd = client_udp(c);
		uint64_t end = now_mono_ms() + 2000;

		assert_int_equal(send(fd, q, ql, 0), (ssize_t)ql);
		while (c->pend_done == NULL && now_mono_ms() < end)
			event_base_loop(c->base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
		assert_non_null(c->pend_done);
		set_policy(c,
		    "{\"defaultAction\":\"deny\",\"egress\":[{\"action\":"
		    "\"allow\",\"target\":\"www.allowed.test\"}]}");
		n = -1;
		while (now_mono_ms() < end) {
			event_base_loop(c->base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
			n = recv(fd, ans, sizeof(ans), MSG_DONTWAIT);
			if (n >= 0)
				break;
		}
		close(fd);
		assert_true(n > 0);
		parse_answer(ans, (size_t)n, &p);
		assert_int_equal(p.rcode, DNS_RCODE_SERVFAIL);
		parsed_free(&p);
	}
	/* Pending at shutdown: cancelled, never called back. */
	ql = make_query(q, 10, "www.allowed.test", DNS_TYPE_AAAA, false);
	fake_add_a(c->f1, "www.allowed.test", "2001:db8::10", 300);
	{
		int fd = client_udp(c);
		uint64_t end = now_mono_ms() + 2000;

		assert_int_equal(send(fd, q, ql, 0), (ssize_t)ql);
		while (c->pend_done == NULL && now_mono_ms() < end)
			event_base_loop(c->base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
		assert_non_null(c->pend_done);
		close(fd);
	}
	dns_free(c->dns);
	c->dns = NULL;
	assert_int_equal(c->cancelled, 1000 + c->submits);
}

int
main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
	    T(test_denied_nxdomain_soa_not_forwarded),
	    T(test_deny_log_deduplicated),
	    T(test_allowed_forwarded_learn_before_reply),
	    T(test_learn_fails_servfail),
	    T(test_async_learn),
	    T(test_internal_addresses_stripped),
	    T(test_private_answers_allow),
	    T(test_cname_to_denied_nxdomain),
	    T(test_denied_carries_ede),
	    T(test_id_and_0x20_case_preserved),
	    T(test_cache_hit_no_upstream_ttl_aged),
	    T(test_cache_hit_relearns_when_lease_short),
	    T(test_long_ttl_clamped_to_lease_max),
	    T(test_tiny_ttl_max_learns_every_hit),
	    T(test_cache_hit_rechecks_policy),
	    T(test_policy_swap_while_in_flight),
	    T(test_tightening_while_in_flight),
	    T(test_inflight_cap_counts_overload),
	    T(test_tc_retry_over_tcp_and_udp_truncation),
	    T(test_upstream_down_servfail_within_timeout),
	    T(test_failover_to_second_upstream),
	    T(test_formerr_qdcount_2_and_garbage),
	    T(test_garbage_upstream_answers),
	    T(test_hostile_upstream_answers),
	    T(test_localhost_and_own_ptr_local),
	    T(test_tcp_pipelined_out_of_order),
	    T(test_tcp_caps),
	    T(test_garbage_over_tcp_closes),
	    T(test_ech_stripped_for_intercepted),
	    T(test_status_and_ready),
	    T(test_bad_upstreams_rejected),
	    T(test_set_upstreams_reload),
	};
#undef T

	return cmocka_run_group_tests(tests, NULL, NULL);
}
