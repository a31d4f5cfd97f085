/*
 * daemon_nft: nftables wired to the daemon: the module's options from the
 * configuration, the start in two steps around the resolver's, the
 * self-check, the resolver's learn hooks, the flow cut after every
 * commit and the periodic renew (with the restore of a flushed table).
 */
#include <string.h>
#include <sys/socket.h>

#include "egressd/api/api.h"
#include "egressd/base/log.h"
#include "egressd/daemon/config.h"
#include "egressd/daemon/daemon_int.h"
#include "egressd/dns/dns.h"
#include "egressd/nft/nft.h"
#include "policy/policy.h"
#include "util/addr.h"
#include "util/now.h"

/*
 * The resolver's learn hook: every address of an answer goes into the
 * learned sets, in batches of NFT_LEARN_BATCH_MAX, before the answer is
 * released.
 */
int
daemon_nft_learn_cb(void *arg, const char *qname,
    const struct dns_learn_addr *a, size_t n, struct err *e)
{
	struct egressd *d = egressd_arg(arg);
	struct nft_learn_addr batch[NFT_LEARN_BATCH_MAX];
	size_t i, k;

	if (d->nft == NULL)
		return 0;
	for (i = 0; i < n; i += k) {
		for (k = 0; k < NFT_LEARN_BATCH_MAX && i + k < n; k++) {
			const struct dns_learn_addr *s = &a[i + k];
			batch[k].family = (uint8_t)s->family;
			memcpy(batch[k].addr, s->addr, sizeof(batch[k].addr));
			batch[k].ttl = s->ttl;
			batch[k].name = qname;
		}
		if (nft_learn(d->nft, batch, k, e) == -1) {
			log_error(d->log, "nft.learn_failed",
			    LOG_S("name", qname), LOG_S("error", e->msg));
			return -1;
		}
	}
	return 0;
}

/*
 * The asynchronous learn hook (what the resolver uses): the answer is
 * released from done once its transaction's ack arrived.
 */
uint64_t
daemon_nft_learn_submit_cb(void *arg, const char *qname,
    const struct dns_learn_addr *a, size_t n,
    void (*done)(void *done_arg, int rc, const char *why), void *done_arg,
    struct err *e)
{
	struct egressd *d = egressd_arg(arg);
	struct nft_learn_addr batch[NFT_LEARN_BATCH_MAX];
	uint64_t ticket;
	size_t i;

	if (n > NFT_LEARN_BATCH_MAX) {
		err_set(e, "nft: %zu addresses in one answer (max %d)", n,
		    NFT_LEARN_BATCH_MAX);
		return 0;
	}
	for (i = 0; i < n; i++) {
		batch[i].family = (uint8_t)a[i].family;
		memcpy(batch[i].addr, a[i].addr, sizeof(batch[i].addr));
		batch[i].ttl = a[i].ttl;
		batch[i].name = qname;
	}
	ticket = nft_learn_submit(d->nft, batch, n, qname, done, done_arg, e);
	if (ticket == 0)
		log_error(d->log, "nft.learn_failed", LOG_S("name", qname),
		    LOG_S("error", e->msg));
	return ticket;
}

void
daemon_nft_learn_cancel_cb(void *arg, uint64_t ticket)
{
	struct egressd *d = egressd_arg(arg);

	nft_learn_cancel(d->nft, ticket);
}

/*
 * The API port the sandbox must never reach, parsed as the API parses its
 * listen address (an address it cannot parse fails the API's start, so
 * egressd never runs with that port unprotected). *on_lo: the listener
 * takes connections to 127.0.0.1, what execd's relay dials: 127.0.0.1,
 * 0.0.0.0, or :: (which the API opens dual-stack).
 */
static uint16_t
egressd_api_port(const struct config *cfg, bool *on_lo)
{
	static const uint8_t zero[16], lo4[4] = {127, 0, 0, 1};
	struct sockaddr_storage ss;
	socklen_t len;
	struct addr a;
	uint16_t port;

	*on_lo = false;
	if (cfg->api.listen_tcp == NULL || cfg->api.listen_tcp[0] == '\0' ||
	    api_parse_addr(cfg->api.listen_tcp, &ss, &len, NULL) == -1 ||
	    addr_from_sockaddr((const struct sockaddr *)&ss, &a, &port) == -1)
		return 0;
	if (a.family == AF_INET)
		*on_lo = memcmp(a.a, lo4, 4) == 0 || memcmp(a.a, zero, 4) == 0;
	else
		*on_lo = memcmp(a.a, zero, 16) == 0;
	return port;
}

/*
 * --api-loopback-uid: the one uid whose loopback sockets reach the API
 * port (docs/security.md). Refused when the API does not listen where
 * execd's relay dials; root only as the operator named it, said loudly.
 */
static int
egressd_api_uid(const struct egressd *d, uint16_t api_port, bool on_lo,
    struct nft_opts *o, struct err *e)
{
	const struct config *c = d->cfg;

	if (!c->api_loopback_uid_set)
		return 0;
	if (api_port == 0 || !on_lo) {
		err_set(e,
		    "--api-loopback-uid: the TCP API (%s) does not take "
		    "connections to 127.0.0.1, where execd's relay connects",
		    c->api.listen_tcp != NULL ? c->api.listen_tcp : "off");
		return -1;
	}
	o->api_uid_port = api_port;
	o->api_uid = c->api_loopback_uid;
	return 0;
}

/* Adds port to an nft port list unless present (sets refuse duplicates). */
static void
egressd_add_port(uint16_t *v, size_t *n, uint16_t port)
{
	size_t i;

	for (i = 0; i < *n; i++)
		if (v[i] == port)
			return;
	if (*n < NFT_PORTS_MAX)
		v[(*n)++] = port;
}

static int
egressd_nft_opts(const struct egressd *d, struct nft_opts *o, struct err *e)
{
	const struct config *c = d->cfg;
	bool api_on_lo;
	uint16_t api_port = egressd_api_port(c, &api_on_lo);
	size_t i;

	nft_opts_init(o);
	o->mark = c->mark;
	o->dns_port = c->dns_port;
	o->learned_max = c->learned_max;
	/* The proxy binds before the first batch (daemon_wire_proxy), so
	 * the redirect never points at a closed port. */
	o->proxy_port = c->proxy_transparent ? c->proxy_port : 0;
	if (c->uproxy.on) {
		o->uproxy_family = c->uproxy.addr.family == AF_INET ? 4 : 6;
		memcpy(o->uproxy_addr, c->uproxy.addr.a,
		    addr_bits(&c->uproxy.addr) / 8);
		o->uproxy_port = c->uproxy.port;
	}
	for (i = 0; i < c->nintercept_ports; i++)
		egressd_add_port(o->intercept_ports, &o->nintercept_ports,
		    c->intercept_ports[i]);
	o->nprotected_ports = 0;
	if (api_port != 0)
		o->protected_ports[o->nprotected_ports++] = api_port;
	for (i = 0;
	     i < c->nprotected_ports && o->nprotected_ports < NFT_PORTS_MAX;
	     i++)
		if (c->protected_ports[i] != api_port)
			o->protected_ports[o->nprotected_ports++] =
			    c->protected_ports[i];
	/* pinned inbound ports: the API's own port is one (the lifecycle
	 * server reaches it on the pod IP; its socket carries no mark) */
	o->ninbound_ports = 0;
	for (i = 0; i < c->ninbound_ports; i++)
		egressd_add_port(
		    o->inbound_ports, &o->ninbound_ports, c->inbound_ports[i]);
	if (o->ninbound_ports != 0 && api_port != 0)
		egressd_add_port(
		    o->inbound_ports, &o->ninbound_ports, api_port);
	if (egressd_api_uid(d, api_port, api_on_lo, o, e) == -1)
		return -1;
	o->block_doh_443 = c->block_doh_443;
	if (c->nameserver_exempt.n > NFT_ADDRS_MAX ||
	    c->doh_blocklist.n > NFT_ADDRS_MAX) {
		err_set(e, "more than %d nameserver-exempt or DoH addresses",
		    NFT_ADDRS_MAX);
		return -1;
	}
	for (i = 0; i < c->nameserver_exempt.n; i++)
		if (nft_parse_prefix(c->nameserver_exempt.v[i],
		        &o->ns_exempt[o->nns_exempt++], e) == -1)
			return -1;
	for (i = 0; i < c->doh_blocklist.n; i++)
		if (nft_parse_prefix(c->doh_blocklist.v[i],
		        &o->doh_block[o->ndoh_block++], e) == -1)
			return -1;
	return 0;
}

/*
 * Established flows to what the policy in force denies are cut in passes
 * (one conntrack dump, at most NFT_CT_DELETE_MAX deletions each) on the
 * event loop (nft_cut_start: the dump read and the deletes sent in
 * slices), so DNS and the API are served throughout; the first starts
 * before the update is answered, the next when one ends with candidates
 * left, until none remains. Never fails the update: the rules already
 * block new connections.
 */
static void egressd_cut_done(
    void *arg, int rc, size_t cut, bool more, const char *why);

static void
egressd_cut_failed(struct egressd *d, const char *why)
{
	log_error(d->log, "nft.flows_cut_failed",
	    LOG_S("trigger", d->cut_trigger), LOG_U("cut", d->cut_total),
	    LOG_U("passes", d->cut_passes), LOG_S("error", why));
	d->cut_total = d->cut_passes = 0;
}

static void
egressd_cut_pass(struct egressd *d)
{
	struct err e = {""};

	if (nft_cut_start(d->cut, d->policy, egressd_cut_done, d, &e) == -1)
		egressd_cut_failed(d, e.msg);
}

static void
egressd_cut_done(void *arg, int rc, size_t cut, bool more, const char *why)
{
	struct egressd *d = egressd_arg(arg);

	d->cut_total += cut;
	d->cut_passes++;
	if (rc == -1) {
		egressd_cut_failed(d, why);
		return;
	}
	if (more && d->cut_passes < NFT_CT_CUT_PASSES_MAX) {
		egressd_cut_pass(d);
		return;
	}
	if (more) {
		egressd_cut_failed(d, "flows still to cut after the last pass");
		return;
	}
	log_info(d->log, "nft.flows_cut", LOG_S("trigger", d->cut_trigger),
	    LOG_U("cut", d->cut_total), LOG_U("passes", d->cut_passes),
	    LOG_U("revision", d->cut_revision));
	d->cut_total = d->cut_passes = 0;
}

void
daemon_nft_cut_flows(struct egressd *d, const char *trigger)
{
	/* a pass under way is superseded: this one judges against the
	 * newer policy (what was cut stays cut) */
	nft_cut_abort(d->cut);
	d->cut_total = d->cut_passes = 0;
	d->cut_trigger = trigger;
	d->cut_revision = d->policy->revision;
	egressd_cut_pass(d);
}

/*
 * What the exception lets in, at start; root's loudly: every process of
 * the pod running as root (the workload's too, where it may) has it. And
 * execd is a relay anyone in the pod can ask: unless its port is
 * protected too (--protect-port), a sandbox process holding the token
 * reaches the API through it (docs/security.md).
 */
static void
egressd_api_uid_log(const struct egressd *d, const struct nft_opts *o)
{
	if (o->api_uid_port == 0)
		return;
	if (o->api_uid == 0)
		log_warn(d->log, "api.loopback_uid", LOG_U("uid", 0),
		    LOG_U("port", o->api_uid_port),
		    LOG_S("effect",
		        "every root process of the pod, the sandbox's "
		        "included, reaches the API on loopback; only the "
		        "token guards it"));
	else
		log_info(d->log, "api.loopback_uid", LOG_U("uid", o->api_uid),
		    LOG_U("port", o->api_uid_port),
		    LOG_S("effect",
		        "processes of this uid (and root, which can become "
		        "it) reach the API on loopback; the token still "
		        "guards it"));
	if (d->cfg->nprotected_ports == 0)
		log_warn(d->log, "api.loopback_uid_unguarded",
		    LOG_S("effect",
		        "no --protect-port: a sandbox process that reaches "
		        "execd's port can have execd relay it to the API "
		        "(the token still needed); protect execd's port"));
}

/*
 * nftables in two steps around the resolver's start: the netlink handle
 * first (the resolver's learn hook needs it), the ruleset only once the
 * resolver's sockets are bound, so that a query redirected the instant
 * the ruleset is in force queues in a socket instead of meeting a closed
 * port. Until the apply nothing is redirected, and nothing is filtered by
 * egressd either: that is the namespace as egressd found it.
 */
int
daemon_nft_open(struct egressd *d, struct err *e)
{
	struct nft_opts o;

	if (d->cfg->mode == CONFIG_MODE_DNS) {
		(void)snprintf(d->nft_why, sizeof(d->nft_why),
		    "nftables disabled by mode dns");
		return 0;
	}
	if (egressd_nft_opts(d, &o, e) == -1)
		return -1;
	egressd_api_uid_log(d, &o);
	if ((d->nft = nft_new(&o, &d->stats, e)) == NULL)
		return -1;
	if (nft_attach(d->nft, d->base, e) == -1)
		return -1;
	if ((d->renew = nft_renew_new(d->nft, d->base, e)) == NULL)
		return -1;
	if ((d->cut = nft_cut_new(d->nft, d->base, e)) == NULL)
		return -1;
	return 0;
}

/* The self-check's hand-over: queries that arrived with its probes. */
struct egressd_held {
	struct egressd *d;
	size_t n;
};

static void
egressd_selfcheck_query_cb(void *arg, int family, const uint8_t *msg,
    size_t len, const struct sockaddr *peer, socklen_t peerlen)
{
	struct egressd_held *h = arg;

	if (h->d->magic != EGRESSD_MAGIC)
		abort();
	h->n++;
	dns_udp_input(h->d->dns, family, msg, len, peer, peerlen);
}

int
daemon_nft_enforce(struct egressd *d, struct err *e)
{
	struct egressd_held held = {.d = d};
	struct nft_selfcheck_io io;
	uint64_t t0;

	if (d->nft == NULL)
		return 0;
	if (nft_apply_policy(d->nft, d->policy, e) == -1) {
		err_prefix(e, "nft apply");
		return -1;
	}
	log_info(d->log, "nft.applied", LOG_U("revision", d->policy->revision),
	    LOG_S("trigger", "start"));
	if (nft_learned_cap(d->nft) < d->cfg->learned_max)
		log_warn(d->log, "nft.learned_size",
		    LOG_U("want", d->cfg->learned_max),
		    LOG_U("kernel", nft_learned_cap(d->nft)),
		    LOG_S("reason", "kernel_kept_set_size"));
	/*
	 * On the resolver's own sockets: what the sandbox sent since the
	 * apply is in them, ahead of the probes, and is answered, not lost.
	 */
	memset(&io, 0, sizeof(io));
	io.fd4 = dns_udp_fd(d->dns, AF_INET);
	io.fd6 = dns_udp_fd(d->dns, AF_INET6);
	io.foreign = egressd_selfcheck_query_cb;
	io.arg = &held;
	t0 = now_mono_us();
	if (io.fd4 < 0 && io.fd6 < 0) {
		err_set(e, "nft self-check: no resolver UDP socket");
		return -1;
	}
	if (nft_selfcheck(d->nft, &io, e) == -1) {
		err_prefix(e, "nft self-check");
		return -1;
	}
	log_info(d->log, "nft.selfcheck_passed",
	    LOG_U("us", now_mono_us() - t0), LOG_B("ipv4", io.fd4 >= 0),
	    LOG_B("ipv6", io.fd6 >= 0), LOG_U("queries", held.n));
	/* Flows from before this start (a restart, a policy file changed
	 * while egressd was down) meet the policy in force too. After the
	 * check: a conntrack dump takes milliseconds, the queries held in the
	 * resolver's sockets need not wait for it. */
	daemon_nft_cut_flows(d, "start");
	d->selfcheck_ok = true;
	d->nft_ok = true;
	return 0;
}

/*
 * The tick forgets expired learned elements, renews those in use, and
 * restores a flushed table. Renewal keeps an address a live flow uses
 * learned (new connections of an HTTP/2 pool, a client caching DNS past
 * the TTL), so the tick must come round within a lease: every half of
 * the policy's dns.ttlMax, between 500 ms and 10 s
 * (nft_renew_interval_ms).
 */
#define EGRESSD_RENEW_WINDOW_S 30

static uint32_t
egressd_renew_interval_ms(const struct egressd *d)
{
	if (d->nft == NULL)
		return NFT_RENEW_MS_MAX;
	return nft_renew_interval_ms(nft_learned_ttl_max(d->nft));
}

/* -1 only on a bad timeval or a dead base (the loop is ending). */
static int
egressd_renew_arm(struct egressd *d, uint32_t ms)
{
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};

	d->renew_interval_ms = ms;
	return event_add(d->ev_renew, &tv);
}

static void
egressd_renewed_cb(void *arg, int rc, size_t renewed, const char *why)
{
	struct egressd *d = arg;

	if (rc == -1)
		log_warn(d->log, "nft.renew_failed", LOG_S("error", why));
	else if (renewed > 0)
		log_debug(d->log, "nft.renewed", LOG_U("count", renewed));
}

static void
egressd_renew_tick(struct egressd *d)
{
	struct err e = {""};

	if (d->nft == NULL)
		return;
	/*
	 * Another root tool in the namespace may flush the ruleset (an
	 * iptables-nft restore, a careless "nft flush ruleset"): put ours
	 * back at once rather than leave egress open until the next change.
	 */
	if (nft_table_present(d->nft, &e) == 0) {
		log_error(d->log, "nft.table_missing",
		    LOG_U("revision", d->policy->revision));
		if (nft_apply_policy(d->nft, d->policy, &e) == -1)
			log_error(d->log, "nft.apply_failed",
			    LOG_S("trigger", "table_missing"),
			    LOG_S("error", e.msg));
		else
			log_warn(d->log, "nft.table_restored",
			    LOG_U("revision", d->policy->revision));
		err_clear(&e);
	}
	(void)nft_expire_tick(d->nft);
	/* a dump still under way (a huge table) covers this tick too */
	if (d->renew == NULL || nft_renew_busy(d->renew))
		return;
	if (nft_renew_start(d->renew, EGRESSD_RENEW_WINDOW_S,
	        egressd_renewed_cb, d, &e) == -1)
		log_warn(d->log, "nft.renew_failed", LOG_S("error", e.msg));
}

static void
egressd_renew_cb(evutil_socket_t fd, short what, void *arg)
{
	struct egressd *d = egressd_arg(arg);

	(void)fd;
	(void)what;
	egressd_renew_tick(d);
	(void)egressd_renew_arm(d, egressd_renew_interval_ms(d));
}

int
daemon_nft_arm_renew(struct egressd *d, struct err *e)
{
	if ((d->ev_renew = event_new(d->base, -1, 0, egressd_renew_cb, d)) ==
	        NULL ||
	    egressd_renew_arm(d, egressd_renew_interval_ms(d)) == -1) {
		err_set(e, "cannot register renew timer");
		return -1;
	}
	return 0;
}

void
daemon_nft_follow_ttl(struct egressd *d)
{
	uint32_t ms;

	if (d->ev_renew == NULL)
		return;
	/*
	 * Only a shorter interval re-arms: a longer one waits for the tick
	 * (which re-arms with it), so policy changes more often than the
	 * interval cannot hold the tick off.
	 */
	ms = egressd_renew_interval_ms(d);
	if (ms < d->renew_interval_ms)
		(void)egressd_renew_arm(d, ms);
}
