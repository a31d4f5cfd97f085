/*
 * daemon_wire: the deny webhook, the resolver and the transparent proxy
 * wired to the daemon: each module's options from the configuration and
 * the hooks through which it asks the daemon (the policy in force, the
 * proxy's judge, the vault in force).
 */
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "egressd/base/log.h"
#include "egressd/base/uproxy.h"
#include "egressd/daemon/config.h"
#include "egressd/daemon/daemon_int.h"
#include "egressd/daemon/webhook.h"
#include "egressd/dns/dns.h"
#include "egressd/nft/nft.h"
#include "egressd/nfq/nfq.h"
#include "egressd/proxy/proxy.h"
#include "policy/policy.h"
#include "util/addr.h"
#include "vault/vault.h"

struct policy *
daemon_wire_policy_get_cb(void *arg)
{
	struct egressd *d = egressd_arg(arg);

	return d->policy;
}

static void
egressd_on_deny_cb(void *arg, const char *qname, const char *reason)
{
	struct egressd *d = egressd_arg(arg);

	webhook_notify(d->webhook, qname, reason);
}

/*
 * The upstream proxy (config_uproxy.h): the credential moves into its
 * own secret arena here. Said once at start, without the credential.
 */
int
daemon_wire_uproxy(struct egressd *d, struct err *e)
{
	const struct config_uproxy *cu = &d->cfg->uproxy;
	char via[ADDR_TEXT_MAX];

	if (!cu->on)
		return 0;
	d->uproxy = uproxy_new(&cu->addr, cu->port,
	    cu->by_address ? UPROXY_BY_ADDRESS : UPROXY_BY_NAME, cu->auth,
	    cu->auth_len, e);
	if (d->uproxy == NULL) {
		err_prefix(e, "OPENSANDBOX_EGRESS_UPSTREAM_PROXY");
		return -1;
	}
	uproxy_describe(d->uproxy, via, sizeof(via));
	log_info(d->log, "uproxy.configured", LOG_S("via", via),
	    LOG_B("auth", uproxy_has_auth(d->uproxy)),
	    LOG_S("connect_by", cu->by_address ? "address" : "name"),
	    LOG_B("locked", uproxy_locked(d->uproxy)));
	return 0;
}

/*
 * The deny webhook's target comes from operator configuration only and its
 * traffic is egressd's own (marked): the sandbox policy neither has to
 * allow it nor lets the sandbox reach it. Its host must be an IP literal:
 * egressd does not resolve its own notification target.
 */
int
daemon_wire_webhook(struct egressd *d, struct err *e)
{
	const struct config *c = d->cfg;
	struct webhook_url u;
	struct sockaddr_storage ss;
	struct addr a;
	socklen_t sl;

	if (c->deny_webhook == NULL || c->deny_webhook[0] == '\0')
		return 0;
	if (webhook_parse_url(c->deny_webhook, &u, e) == -1)
		goto fail;
	if (!addr_parse_ip(u.host, strlen(u.host), &a)) {
		err_set(e, "host \"%s\" must be an IP address literal", u.host);
		goto fail;
	}
	sl = addr_to_sockaddr(&a, u.port, &ss);
	d->webhook = webhook_new(d->base, &u, (struct sockaddr *)&ss, sl,
	    c->mark, c->sandbox_id, d->uproxy, d->log, e);
	if (d->webhook == NULL)
		goto fail;
	return 0;
fail:
	err_prefix(e, "OPENSANDBOX_EGRESS_DENY_WEBHOOK");
	return -1;
}

/* A credential goes only to an address the resolver learned for its
 * binding's host itself (proxy.h, "learned"): IP rules do not count. */
static bool
egressd_proxy_learned_cb(void *arg, const char *name, const struct addr *dst)
{
	struct egressd *d = egressd_arg(arg);
	const char *names[NFT_NAMES_PER_ADDR];
	size_t i, n;

	if (d->nft == NULL)
		return false;
	n = nft_learned_lookup(d->nft, dst->family == AF_INET ? 4 : 6, dst->a,
	    names, NFT_NAMES_PER_ADDR);
	for (i = 0; i < n; i++)
		if (strcmp(names[i], name) == 0)
			return true;
	return false;
}

/* Upstreams: flags/env win, then the policy file's dns.upstreams. */
/*
 * The proxy's decision for a name at the original destination: the name
 * must be allowed for TCP to that port, and the destination must be an
 * address the resolver learned for exactly that name (the shared-IP and
 * fronting defence: an allowed name does not open another name's
 * address), unless an explicit IP/CIDR rule allows the address itself.
 */
static enum proxy_reason
egressd_proxy_judge_cb(
    void *arg, const char *name, const struct addr *dst, uint16_t port)
{
	struct egressd *d = egressd_arg(arg);
	struct policy_reach reach;
	struct addr lit;
	int fam;

	fam = dst->family == AF_INET ? 4 : 6;
	if (addr_parse_ip(name, strlen(name), &lit))
		return lit.family == dst->family &&
		        memcmp(lit.a, dst->a, fam == 4 ? 4 : 16) == 0 &&
		        policy_addr_explicitly_allowed(
		            d->policy, fam, dst->a, POLICY_PROTO_TCP, port)
		    ? PROXY_OK
		    : PROXY_SNI_IP;
	if (policy_match_domain_reach(d->policy, name, NULL, &reach) !=
	        POLICY_ALLOW ||
	    !policy_reach_allows(&reach, POLICY_PROTO_TCP, port))
		return PROXY_NAME_DENIED;
	if (policy_addr_explicitly_allowed(
	        d->policy, fam, dst->a, POLICY_PROTO_TCP, port))
		return PROXY_OK;
	return egressd_proxy_learned_cb(arg, name, dst) ? PROXY_OK
	                                                : PROXY_ADDR_MISMATCH;
}

/* What egressd_proxy_judge_cb reads moves: a policy swapped in, or a
 * learned address gone or a name dropped from one. Both counts only
 * grow, so their sum moves whenever either does. Anything that judge
 * comes to read must move this too: the proxy keeps an allowed verdict
 * for as long as it stays (proxy.h, judge_gen). */
static uint64_t
egressd_proxy_judge_gen_cb(void *arg)
{
	struct egressd *d = egressd_arg(arg);

	return d->policy_gen + (d->nft != NULL ? nft_learned_gen(d->nft) : 0);
}

/* Terminate when a binding of the vault in force could match sni on
 * port (the scheme follows the port), or when request rules name it:
 * its requests are judged one by one (issue 37). */
static bool
egressd_proxy_terminate_cb(void *arg, const char *sni, uint16_t port)
{
	struct egressd *d = egressd_arg(arg);

	return (d->vault != NULL && vault_host_bound(d->vault, sni, port)) ||
	    policy_host_has_request_rules(d->policy, sni, port);
}

/*
 * Can this daemon enforce p? Request rules judge requests in the
 * proxy: without it, or on a host MITMPROXY_IGNORE_HOSTS keeps out of
 * it, they would let every request through, so a policy with them is
 * refused (fail closed) rather than half enforced.
 */
int
daemon_wire_enforceable(
    const struct config *cfg, const struct policy *p, struct err *e)
{
	const struct policy_rule *r;
	const char *ign = NULL;
	size_t i;

	if (!policy_has_request_rules(p))
		return 0;
	for (i = 0; i < p->nrules; i++) {
		r = &p->rules[i];
		if (!policy_rule_is_request(r) ||
		    (cfg->proxy_transparent &&
		        (ign = config_compat_ignored(cfg, r->target)) == NULL))
			continue;
		if (ign != NULL)
			err_set(e,
			    "methods and paths on %s need its TLS terminated, "
			    "but it matches \"%s\" of "
			    "OPENSANDBOX_EGRESS_MITMPROXY_IGNORE_HOSTS",
			    r->display, ign);
		else
			err_set(e,
			    "methods and paths need the transparent proxy "
			    "(--proxy): without it requests to %s could not "
			    "be judged",
			    r->display);
		if (r->loc.file != NULL && r->loc.line > 0)
			err_prefix(e, "%s:%u:%u", r->loc.file, r->loc.line,
			    r->loc.col);
		else
			err_prefix(e, "egress rule %zu", i);
		return -1;
	}
	return 0;
}

/* The policy in force, lent (proxy.h, "policy_get"). */
static struct policy *
egressd_proxy_policy_cb(void *arg)
{
	return egressd_arg(arg)->policy;
}

/* The vault in force, lent (daemon.h, "Hooks"). */
static struct vault *
egressd_proxy_vault_cb(void *arg)
{
	struct egressd *d = egressd_arg(arg);

	return d->vault;
}

/* An oauth2 token minted by the proxy: the revision holding it is the
 * one in force (a commit builds the next from it, carrying the token). */
static void
egressd_proxy_vault_minted_cb(void *arg, struct vault *v)
{
	struct egressd *d = egressd_arg(arg);

	vault_free(d->vault);
	d->vault = vault_ref(v);
}

/* With the proxy on, every answer loses its ECH keys (clients then send
 * a plain SNI the proxy can judge). */
static bool
egressd_intercepted_cb(void *arg, const char *name)
{
	struct egressd *d = egressd_arg(arg);

	(void)name;
	return d->proxy != NULL;
}

/* The start-up vault's arena is not locked (vault_locked): said once,
 * with the limit that refused it; fatal with --vault-require-mlock. */
static int
egressd_vault_unlocked(struct egressd *d, struct err *e)
{
	bool fatal = d->cfg->vault_require_mlock;
	struct rlimit rl;

	if (getrlimit(RLIMIT_MEMLOCK, &rl) == -1)
		rl.rlim_cur = 0;
	if (!fatal) {
		log_warn(d->log, "vault.mlock_failed",
		    LOG_U("memlock_limit", rl.rlim_cur), LOG_B("fatal", false),
		    LOG_S("effect", "credential values may be swapped out"));
		return 0;
	}
	log_error(d->log, "vault.mlock_failed",
	    LOG_U("memlock_limit", rl.rlim_cur), LOG_B("fatal", true));
	err_set(e,
	    "credential vault: mlock refused (RLIMIT_MEMLOCK %llu bytes) "
	    "and --vault-require-mlock is set: give egressd CAP_IPC_LOCK "
	    "or a larger memlock limit",
	    (unsigned long long)rl.rlim_cur);
	return -1;
}

int
daemon_wire_proxy(struct egressd *d, struct err *e)
{
	const struct config *c = d->cfg;
	struct proxy_opts o;
	struct proxy_hooks h;

	if (!c->proxy_transparent)
		return 0;
	if ((d->vault = vault_new(d->policy, NULL, e)) == NULL) {
		err_prefix(e, "credential vault");
		return -1;
	}
	if (!vault_locked(d->vault) && egressd_vault_unlocked(d, e) == -1)
		return -1;
	memset(&o, 0, sizeof(o));
	memset(&h, 0, sizeof(h));
	o.port = c->proxy_port;
	o.conns_max = c->proxy_conns_max;
	o.buf_max = c->proxy_buffer_mb << 20;
	o.head_ms = c->proxy_head_timeout_s * 1000;
	o.mark = c->mark;
	o.state_dir = c->state_dir;
	o.ca_bundle = c->ca_bundle;
	o.ca_key_file = c->ca_key_file;
	o.ca_cert_file = c->ca_cert_file;
	o.trust_dir = c->trust_dir;
	o.ssl_insecure = c->ssl_insecure;
	o.vault_decode = c->vault_compressed == CONFIG_VAULT_COMPRESSED_DECODE;
	o.upstream = d->uproxy;
	h.judge = egressd_proxy_judge_cb;
	h.judge_gen = egressd_proxy_judge_gen_cb;
	h.terminate = egressd_proxy_terminate_cb;
	h.vault_get = egressd_proxy_vault_cb;
	h.vault_minted = egressd_proxy_vault_minted_cb;
	h.learned = egressd_proxy_learned_cb;
	h.policy_get = egressd_proxy_policy_cb;
	h.arg = d;
	if ((d->proxy = proxy_new(d->base, &o, &h, d->log, e)) == NULL)
		return -1;
	log_info(
	    d->log, "proxy.listening", LOG_U("port", proxy_port(d->proxy)));
	return 0;
}

int
daemon_wire_dns(struct egressd *d, struct err *e)
{
	const struct config *c = d->cfg;
	const char *ups[DNS_UPSTREAMS_MAX];
	struct dns_opts o;
	struct dns_hooks h;
	size_t i, n = 0;

	memset(&o, 0, sizeof(o));
	memset(&h, 0, sizeof(h));
	if (c->ndns_upstreams > DNS_UPSTREAMS_MAX ||
	    d->policy->dns.nupstreams > DNS_UPSTREAMS_MAX) {
		err_set(e, "more than %d DNS upstreams", DNS_UPSTREAMS_MAX);
		return -1;
	}
	if (c->ndns_upstreams > 0)
		for (i = 0; i < c->ndns_upstreams; i++)
			ups[n++] = c->dns_upstreams[i].text;
	else
		for (i = 0; i < d->policy->dns.nupstreams; i++)
			ups[n++] = d->policy->dns.upstreams[i];
	o.port = c->dns_port;
	o.mark = c->mark;
	o.upstreams = ups;
	o.nupstreams = n;
	o.timeout_ms = c->dns_timeout_s * 1000;
	o.attempt_timeout_ms = o.timeout_ms < DNS_UPSTREAM_ATTEMPT_MS_DEFAULT
	    ? o.timeout_ms
	    : DNS_UPSTREAM_ATTEMPT_MS_DEFAULT;
	o.probe_name = c->dns_probe;
	o.probe_interval_ms = c->dns_probe_interval_s * 1000;
	h.policy_get = daemon_wire_policy_get_cb;
	h.learn = d->nft != NULL ? daemon_nft_learn_cb : NULL;
	h.learn_submit = d->nft != NULL ? daemon_nft_learn_submit_cb : NULL;
	h.learn_cancel = d->nft != NULL ? daemon_nft_learn_cancel_cb : NULL;
	h.on_deny = d->webhook != NULL ? egressd_on_deny_cb : NULL;
	h.intercepted = c->proxy_transparent ? egressd_intercepted_cb : NULL;
	h.arg = d;
	if ((d->dns = dns_new(d->base, &o, &h, d->log, &d->stats, e)) == NULL) {
		err_prefix(e, "resolver");
		return -1;
	}
	d->dns_ok = true;
	return 0;
}

/*
 * The policy file may change dns.upstreams; flags and environment win
 * over it, so only follow the file when they named none.
 */
void
daemon_wire_follow_upstreams(
    struct egressd *d, const struct policy *old, const struct policy *next)
{
	struct err e = {""};
	size_t i;
	bool same = old->dns.nupstreams == next->dns.nupstreams;

	if (d->dns == NULL || d->cfg->ndns_upstreams > 0)
		return;
	for (i = 0; same && i < next->dns.nupstreams; i++)
		same =
		    strcmp(old->dns.upstreams[i], next->dns.upstreams[i]) == 0;
	if (same)
		return;
	if (dns_set_upstreams(d->dns, (const char *const *)next->dns.upstreams,
	        next->dns.nupstreams, &e) == -1)
		log_error(
		    d->log, "dns.upstreams_failed", LOG_S("error", e.msg));
	else
		log_info(d->log, "dns.upstreams_changed",
		    LOG_U("count", next->dns.nupstreams));
}

/* In-flight judging asks what the proxy would (proxy_peek.c): the
 * same judge, its refusal named like the proxy's. */
static const char *
egressd_nfq_judge_cb(
    void *arg, const char *name, const struct addr *dst, uint16_t port)
{
	enum proxy_reason r = egressd_proxy_judge_cb(arg, name, dst, port);

	return r == PROXY_OK ? NULL : proxy_reason_name(r);
}

/* The TCP ports judged in flight (the queue's, the in-kernel judge's). */
static const uint16_t egressd_nfq_ports[] = {443};
#define EGRESSD_NFQ_NPORTS                                                     \
	(sizeof(egressd_nfq_ports) / sizeof(egressd_nfq_ports[0]))

/* How long judge's "allowed" for name at dst:port holds at most, for the
 * in-kernel judge: an address an IP rule allows, until the judge's
 * generation moves; a learned one, until its lease ends. */
static uint64_t
egressd_nfq_until_cb(
    void *arg, const char *name, const struct addr *dst, uint16_t port)
{
	struct egressd *d = egressd_arg(arg);
	int fam = dst->family == AF_INET ? 4 : 6;

	(void)name;
	if (policy_addr_explicitly_allowed(
	        d->policy, fam, dst->a, POLICY_PROTO_TCP, port))
		return UINT64_MAX;
	return d->nft != NULL ? nft_learned_until(d->nft, fam, dst->a) : 0;
}

/* The in-kernel judge's generation: the proxy's judge_gen, but for
 * learned entries that expired (nft_verdict_gen): a verdict taught for
 * one holds until its lease, no longer. */
static uint64_t
egressd_nfq_gen_cb(void *arg)
{
	struct egressd *d = egressd_arg(arg);

	return d->policy_gen + (d->nft != NULL ? nft_verdict_gen(d->nft) : 0);
}

/* Names a policy dropped, or the mirror cleared (the table deleted
 * under egressd): the verdicts the kernel holds are void
 * (nft_on_verdict_gen; a single name leaving an address is forgotten
 * alone, egressd_nfq_forget_cb). */
static void
egressd_nfq_verdict_gen_cb(void *arg)
{
	struct egressd *d = egressd_arg(arg);

	if (d->nfq != NULL)
		nfq_judge_moved(d->nfq);
}

/* fn on the mirror's name and address (family 4 or 6, network order)
 * at each judged port, with the queue in place. */
static void
egressd_nfq_each_port(void *arg, const char *name, int family,
    const uint8_t *addr,
    void (*fn)(
        struct nfq *q, const char *name, const struct addr *dst, uint16_t port))
{
	struct egressd *d = egressd_arg(arg);
	struct addr dst;
	size_t i;

	if (d->nfq == NULL)
		return;
	memset(&dst, 0, sizeof(dst));
	dst.family = family == 4 ? AF_INET : AF_INET6;
	memcpy(dst.a, addr, family == 4 ? 4 : 16);
	for (i = 0; i < EGRESSD_NFQ_NPORTS; i++)
		fn(d->nfq, name, &dst, egressd_nfq_ports[i]);
}

/* An answer's address learned: the in-kernel judge may pass its first
 * connection too (nfq_teach judges it first). */
static void
egressd_nfq_learned_cb(
    void *arg, const char *name, int family, const uint8_t *addr)
{
	egressd_nfq_each_port(arg, name, family, addr, nfq_teach);
}

/* A name left a learned address before its lease (pushed out by newer
 * names, or the address evicted): the kernel forgets that pair alone
 * (nft_on_forget), every other verdict stands. */
static void
egressd_nfq_forget_cb(
    void *arg, const char *name, int family, const uint8_t *addr)
{
	egressd_nfq_each_port(arg, name, family, addr, nfq_forget);
}

/* The in-kernel judge's table, when its program loaded; else (or when
 * the kernel refuses the table) the queue judges alone, said. */
static void
egressd_nfq_kernel(struct egressd *d)
{
	struct nfq_status st;
	struct err e = {""};
	int fd = nfq_kernel_fd(d->nfq);

	if (fd >= 0 && nft_kjudge_install(d->nft, fd, &e) < 0)
		nfq_kernel_off(d->nfq, e.msg);
	nfq_status(d->nfq, &st);
	log_info(d->log, "passthrough.kernel_judge",
	    LOG_S("judge", st.kernel ? "bpf" : "queue"),
	    LOG_S("why", st.kernel_why));
}

/* A flow refused because its name must be terminated: its address
 * joins the hold set, so that the client's retry meets the proxy. */
static void
egressd_nfq_hold_cb(void *arg, const struct addr *dst)
{
	struct egressd *d = egressd_arg(arg);
	struct err e = {""};

	if (d->nft != NULL &&
	    nft_hold(d->nft, dst->family == AF_INET ? 4 : 6, dst->a, &e) < 0)
		log_error(d->log, "nft.hold_failed", LOG_S("error", e.msg));
}

/* The proxy path, said with why (never silently weaker). */
static int
egressd_nfq_fallback(struct egressd *d, const char *why, struct err *e)
{
	(void)snprintf(d->pt_why, sizeof(d->pt_why), "%s", why);
	if (d->cfg->pt_judge == CONFIG_PT_QUEUE) {
		err_set(e, "--passthrough-judge queue: %s", why);
		return -1;
	}
	log_info(d->log, "passthrough.judge", LOG_S("path", d->pt_path),
	    LOG_S("why", why));
	return 0;
}

/*
 * Pass-through TLS judged in flight (nfq.h) when asked and the kernel
 * can: the queue verdict nft takes, and the queue bound; else the proxy
 * path, said in the log and the status (fatal when queue was forced).
 */
int
daemon_wire_nfq(struct egressd *d, struct err *e)
{
	struct nfq_opts o;
	struct nfq_hooks h;
	struct nfq_status st;
	struct err why = {""};
	enum nft_queue_kind k;

	d->pt_path = "proxy";
	if (d->cfg->pt_judge == CONFIG_PT_PROXY)
		return egressd_nfq_fallback(d, "--passthrough-judge proxy", e);
	if (d->nft == NULL || d->proxy == NULL) {
		/* no proxy: TLS is not intercepted at all */
		if (d->proxy == NULL)
			d->pt_path = "none";
		return egressd_nfq_fallback(
		    d, "needs nftables and the transparent proxy", e);
	}
	/* a flow judged in flight goes straight to its origin: where the
	 * network is reached only through an upstream proxy, only the
	 * proxy path (which tunnels) can carry it */
	if (d->cfg->uproxy.on)
		return egressd_nfq_fallback(d,
		    "an upstream proxy carries every flow (--upstream-proxy)",
		    e);
	k = nft_queue_probe(d->nft, d->cfg->queue_num, &why);
	if (k == NFT_QUEUE_NONE)
		return egressd_nfq_fallback(d, why.msg, e);
	memset(&o, 0, sizeof(o));
	memset(&h, 0, sizeof(h));
	o.queue_num = d->cfg->queue_num;
	o.kernel_judge = !d->cfg->kernel_judge_off;
	h.judge = egressd_nfq_judge_cb;
	h.held = egressd_proxy_terminate_cb;
	h.hold = egressd_nfq_hold_cb;
	h.gen = egressd_nfq_gen_cb;
	h.until = egressd_nfq_until_cb;
	h.arg = d;
	if ((d->nfq = nfq_new(d->base, &o, &h, d->log, &why)) == NULL)
		return egressd_nfq_fallback(d, why.msg, e);
	nft_set_queue(d->nft, k, d->cfg->queue_num, egressd_nfq_ports,
	    EGRESSD_NFQ_NPORTS);
	nft_on_verdict_gen(d->nft, egressd_nfq_verdict_gen_cb, d);
	nft_on_learned(d->nft, egressd_nfq_learned_cb, d);
	nft_on_forget(d->nft, egressd_nfq_forget_cb, d);
	egressd_nfq_kernel(d);
	nfq_status(d->nfq, &st);
	d->pt_path = "queue";
	(void)snprintf(
	    d->pt_why, sizeof(d->pt_why), "%s", nft_queue_kind_name(k));
	log_info(d->log, "passthrough.judge", LOG_S("path", d->pt_path),
	    LOG_S("verdict", nft_queue_kind_name(k)),
	    LOG_U("queue", d->cfg->queue_num),
	    LOG_B("conntrack_glue", st.conntrack_glue));
	return 0;
}

/* One flow nfq_rejudge hands over: its conntrack entry marked refused
 * (the cut of judged flows; ENOENT when it ended is no error). */
static void
egressd_nfq_cut_cb(void *arg, const struct nfq_flow_id *id)
{
	struct egressd *d = arg;
	struct nft_ct_flow f;
	struct err e = {""};

	memset(&f, 0, sizeof(f));
	f.family = (uint8_t)id->family;
	f.proto = IPPROTO_TCP;
	memcpy(f.src, id->src, sizeof(f.src));
	memcpy(f.dst, id->dst, sizeof(f.dst));
	f.sport = id->sport;
	f.dport = id->dport;
	f.judged = true;
	if (nft_cut_flow(d->nft, &f, &e) < 0)
		log_warn(d->log, "nfq.rejudge_failed", LOG_S("error", e.msg));
}

/*
 * After a commit, the flows judged in flight are judged again by name,
 * as proxy_rejudge does for the proxy's connections: the conntrack cut
 * judged them by address only.
 */
void
daemon_nfq_rejudge(struct egressd *d, uint64_t revision)
{
	size_t n;

	if (d->nfq == NULL || d->nft == NULL)
		return;
	n = nfq_rejudge(d->nfq, egressd_nfq_cut_cb, d);
	if (n > 0)
		log_info(d->log, "nfq.rejudged", LOG_U("closed", n),
		    LOG_U("revision", revision));
}
