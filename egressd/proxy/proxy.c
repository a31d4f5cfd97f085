/*
 * The proxy object: its TLS contexts, descriptor budget, creation,
 * teardown and the status the daemon reads.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "egressd/base/defaults.h"
#include "egressd/proxy/proxy_pool.h"
#include "egressd/proxy/proxy_tls.h"
#include "egressd/proxy/tls_ca.h"
#include "egressd/proxy/proxy_int.h"

/*
 * Termination's pieces: the CA (generated on first start), the bundle
 * for the sandbox, both TLS contexts. The state directory is made if
 * missing (0755: the bundle in it is public; ca.key is 0600 itself).
 */
static int
proxy_tls_open(struct proxy *p, const struct proxy_opts *o, struct err *e)
{
	char bundle[4096];
	size_t ncerts = 0;

	if (mkdir(o->state_dir, 0755) == -1 && errno != EEXIST) {
		err_set(
		    e, "state directory %s: %s", o->state_dir, strerror(errno));
		return -1;
	}
	if ((p->ca = tls_ca_open(
	         o->state_dir, o->ca_key_file, o->ca_cert_file, e)) == NULL) {
		err_prefix(e, "proxy CA");
		return -1;
	}
	if (o->ca_bundle != NULL && o->ca_bundle[0] != '\0') {
		if (snprintf(bundle, sizeof(bundle), "%s", o->ca_bundle) >=
		    (int)sizeof(bundle)) {
			err_set(e, "CA bundle path too long");
			return -1;
		}
	} else if (snprintf(bundle, sizeof(bundle), "%s/%s", o->state_dir,
	               PROXY_BUNDLE_FILE) >= (int)sizeof(bundle)) {
		err_set(e, "state directory path too long");
		return -1;
	}
	if (tls_ca_export_bundle(p->ca, NULL, bundle, e) == -1) {
		err_prefix(e, "CA bundle");
		return -1;
	}
	if ((p->sctx = proxy_tls_server_ctx(e)) == NULL ||
	    (p->cctx = proxy_tls_client_ctx(
	         o->trust_dir, o->ssl_insecure, &ncerts, e)) == NULL)
		return -1;
	if ((p->sess = tls_sess_new()) == NULL ||
	    (p->pool = proxy_pool_new(p->base, 0, 0)) == NULL) {
		err_set(e, "TLS session cache: out of memory");
		return -1;
	}
	log_info(p->log, "proxy.tls_ready", LOG_S("state_dir", o->state_dir),
	    LOG_S("bundle", bundle),
	    LOG_S("trust_dir", o->trust_dir ? o->trust_dir : "default"),
	    LOG_U("trust_certs", ncerts), LOG_B("insecure", o->ssl_insecure));
	return 0;
}

/*
 * Descriptors for the cap: the soft RLIMIT_NOFILE is raised to what
 * conns_max connections and the reserve take (and the hard limit with
 * it, which needs CAP_SYS_RESOURCE), else to the hard limit. A limit
 * that still falls short lowers the cap rather than let accept and
 * connect fail with EMFILE under load; the reserve then shrinks to at
 * most half the limit so a tiny limit still leaves some connections.
 * Logged either way (proxy.nofile), a shortfall as a warning.
 */
static void
proxy_nofile(struct proxy *p)
{
	struct rlimit rl, want;
	rlim_t need, reserve;
	size_t asked = p->o.conns_max, fit;
	const char *how = "enough";

	need = (rlim_t)asked * PROXY_FDS_PER_CONN + 2 * PROXY_PIPES_MAX +
	    PROXY_FD_RESERVE;
	if (getrlimit(RLIMIT_NOFILE, &rl) == -1)
		return;
	if (rl.rlim_cur < need) {
		want.rlim_cur = need;
		want.rlim_max =
		    rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need
		    ? rl.rlim_max
		    : need;
		if (setrlimit(RLIMIT_NOFILE, &want) == 0) {
			how = want.rlim_max != rl.rlim_max ? "raised_hard"
			                                   : "raised";
			rl = want;
		} else {
			rl.rlim_cur = rl.rlim_max;
			if (setrlimit(RLIMIT_NOFILE, &rl) == -1 ||
			    getrlimit(RLIMIT_NOFILE, &rl) == -1)
				return;
			how = "short";
		}
	}
	if (rl.rlim_cur >= need) {
		log_info(p->log, "proxy.nofile", LOG_S("outcome", how),
		    LOG_U("nofile", (uint64_t)rl.rlim_cur),
		    LOG_U("needed", (uint64_t)need), LOG_U("conns_max", asked));
		return;
	}
	reserve = 2 * PROXY_PIPES_MAX + PROXY_FD_RESERVE;
	if (reserve > rl.rlim_cur / 2)
		reserve = rl.rlim_cur / 2;
	fit = (size_t)((rl.rlim_cur - reserve) / PROXY_FDS_PER_CONN);
	if (fit == 0)
		fit = 1;
	p->o.conns_max = fit < asked ? fit : asked;
	log_warn(p->log, "proxy.nofile", LOG_S("outcome", how),
	    LOG_U("nofile", (uint64_t)rl.rlim_cur),
	    LOG_U("needed", (uint64_t)need), LOG_U("conns_asked", asked),
	    LOG_U("conns_max", p->o.conns_max));
}

struct proxy *
proxy_new(struct event_base *base, const struct proxy_opts *o,
    const struct proxy_hooks *h, struct log *lg, struct err *e)
{
	struct proxy *p;
	const char *l4 = o->listen4 ? o->listen4 : "127.0.0.1";
	const char *l6 = o->listen6 ? o->listen6 : "::1";

	if (h == NULL || h->judge == NULL) {
		err_set(e, "proxy: no judge hook");
		return NULL;
	}
	if ((p = calloc(1, sizeof(*p))) == NULL) {
		err_set(e, "proxy: out of memory");
		return NULL;
	}
	p->magic = PROXY_MAGIC;
	p->cli_read_cb = proxy_connect_cli_read_cb;
	p->cli_write_cb = proxy_relay_write_cb;
	p->cli_event_cb = proxy_connect_cli_event_cb;
	p->base = base;
	p->log = lg;
	p->h = *h;
	p->o = *o;
	/* borrowed strings are not kept */
	p->o.listen4 = p->o.listen6 = NULL;
	p->o.state_dir = p->o.trust_dir = NULL;
	p->o.ca_key_file = p->o.ca_cert_file = NULL;
	if (p->o.conns_max == 0)
		p->o.conns_max = EGRESSD_DEFAULT_PROXY_CONNS_MAX;
	if (p->o.buf_max == 0)
		p->o.buf_max = (size_t)EGRESSD_DEFAULT_PROXY_BUFFER_MB << 20;
	proxy_nofile(p);
	if (p->o.hello_ms == 0)
		p->o.hello_ms = PROXY_HELLO_MS;
	if (p->o.connect_ms == 0)
		p->o.connect_ms = PROXY_CONNECT_MS;
	if (p->o.idle_ms == 0)
		p->o.idle_ms = PROXY_IDLE_MS;
	if (p->o.head_ms == 0)
		p->o.head_ms = PROXY_HEAD_MS;
	p->port = o->port;
	TAILQ_INIT(&p->settle);
	LIST_INIT(&p->mints);
	p->mint_done_cb = proxy_relay_mint_done;
	p->settle_ev = event_new(base, -1, 0, proxy_conn_settle_cb, p);
	p->reap_ev = event_new(base, -1, 0, proxy_conn_reap_cb, p);
	if (p->settle_ev == NULL || p->reap_ev == NULL) {
		if (p->settle_ev != NULL)
			event_free(p->settle_ev);
		if (p->reap_ev != NULL)
			event_free(p->reap_ev);
		err_set(e, "proxy: out of memory");
		free(p);
		return NULL;
	}
	log_limiter_init(&p->lim, PROXY_LOG_RATE, 2 * PROXY_LOG_RATE, 1000);
	p->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (o->state_dir != NULL && proxy_tls_open(p, o, e) == -1) {
		proxy_free(p);
		return NULL;
	}
	if ((l4[0] != '\0' && proxy_listen(p, AF_INET, l4, e) == -1) ||
	    (l6[0] != '\0' && proxy_listen(p, AF_INET6, l6, e) == -1) ||
	    proxy_source_start(p, e) == -1) {
		proxy_free(p);
		return NULL;
	}
	return p;
}

void
proxy_free(struct proxy *p)
{
	size_t i;

	if (p == NULL)
		return;
	if (p->magic != PROXY_MAGIC)
		abort();
	p->paused = true; /* closes must not re-enable the listeners */
	while (p->conns != NULL)
		proxy_conn_close(p->conns, PROXY_SHUTDOWN);
	proxy_conn_reap_cb(-1, 0, p); /* nothing up the stack holds them */
	proxy_source_free_all(p);
	proxy_mint_free_all(p);
	for (i = 0; i < p->nl; i++) {
		event_free(p->l[i].ev);
		close(p->l[i].fd);
	}
	if (p->reserve_fd != -1)
		close(p->reserve_fd);
	while (p->nfree > 0) {
		p->nfree--;
		close(p->pipe_free[p->nfree][0]);
		close(p->pipe_free[p->nfree][1]);
	}
	proxy_pool_free(p->pool);
	if (p->settle_ev != NULL)
		event_free(p->settle_ev);
	if (p->reap_ev != NULL)
		event_free(p->reap_ev);
	SSL_CTX_free(p->sctx);
	SSL_CTX_free(p->cctx);
	tls_sess_free(p->sess);
	tls_ca_free(p->ca);
	p->magic = 0;
	free(p);
}

uint16_t
proxy_port(const struct proxy *p)
{
	return p->port;
}

/* A pass-through connection to a name that now has request rules: its
 * requests go by unseen, so it cannot stay. */
static bool
proxy_rejudge_unjudgeable(struct proxy *p, const struct proxy_conn *c)
{
	struct policy *pol;

	if (c->proto != PROTO_TLS || c->tls.term || p->h.policy_get == NULL ||
	    (pol = p->h.policy_get(p->h.arg)) == NULL)
		return false;
	return policy_host_has_request_rules(pol, c->name, c->dport);
}

size_t
proxy_rejudge(struct proxy *p)
{
	struct proxy_conn *c, *next;
	size_t closed = 0;

	/* idle upstream connections are not judged again: dialled anew if
	 * still allowed */
	(void)proxy_pool_flush(p->pool);
	for (c = p->conns; c != NULL; c = next) {
		next = c->next;
		/* compiled from the old snapshot, which it keeps alive */
		policy_host_rules_free(c->relay.rules);
		c->relay.rules = NULL;
		c->judged = false; /* hooks.judge_gen moved too */
		if ((c->st != PROXY_ST_CONNECT && c->st != PROXY_ST_RELAY) ||
		    c->refused || c->name[0] == '\0')
			continue;
		if (p->h.judge(p->h.arg, c->name, &c->dst, c->dport) ==
		        PROXY_OK &&
		    !proxy_rejudge_unjudgeable(p, c))
			continue;
		proxy_conn_close(c, PROXY_POLICY_CHANGED);
		closed++;
	}
	return closed;
}

void
proxy_status(const struct proxy *p, struct proxy_status *st)
{
	const struct proxy_conn *c;

	*st = p->st;
	st->paused = p->paused;
	st->upstream_idle = proxy_pool_count(p->pool);
	/* bytes of open connections count too */
	for (c = p->conns; c != NULL; c = c->next) {
		st->up_bytes += c->up_bytes;
		st->down_bytes += c->down_bytes;
	}
}
