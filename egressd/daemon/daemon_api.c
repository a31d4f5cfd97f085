/*
 * daemon_api: the control API wired to the daemon: its options from the
 * configuration, the hooks through which it reads and changes what is in
 * force (mutations go to the commit queue, daemon_commit.c), readiness,
 * and the token file's rotation.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "egressd/api/api.h"
#include "egressd/base/log.h"
#include "egressd/daemon/config.h"
#include "egressd/daemon/daemon_int.h"
#include "egressd/dns/dns.h"
#include "policy/policy.h"
#include "util/secmem.h"

/*
 * A rotated token file (a Secret update) takes effect at the next reload;
 * a file that cannot be read now keeps the token in force (fail closed:
 * auth never turns off), and says so.
 */
void
daemon_api_reload_token(struct egressd *d, const char *why)
{
	char buf[CONFIG_TOKEN_MAX + 2];
	struct err e = {""};

	if (d->cfg->token_file == NULL || d->api == NULL)
		return;
	if (config_token_read(d->cfg->token_file, buf, sizeof(buf), &e) < 0) {
		secmem_wipe(buf, sizeof(buf)); /* what was read before */
		log_error(d->log, "api.token_reload_failed",
		    LOG_S("trigger", why), LOG_S("error", e.msg));
		return;
	}
	if (!api_token_is(d->api, buf)) {
		if (api_set_token(d->api, buf, &e) < 0)
			log_error(d->log, "api.token_reload_failed",
			    LOG_S("trigger", why), LOG_S("error", e.msg));
		else
			log_info(d->log, "api.token_rotated",
			    LOG_S("trigger", why),
			    LOG_S("path", d->cfg->token_file));
	}
	secmem_wipe(buf, sizeof(buf));
}

/*
 * Writes need the proxy that injects (contract §4: 412 before it is
 * ready) and verified upstreams: a secret never goes to an origin whose
 * certificate was not checked.
 */
static bool
egressd_api_vault_writable_cb(void *arg, char *why, size_t whylen)
{
	struct egressd *d = egressd_arg(arg);

	if (d->proxy == NULL) {
		(void)snprintf(why, whylen, "credential proxy is not ready");
		return false;
	}
	if (d->cfg->ssl_insecure) {
		(void)snprintf(why, whylen,
		    "credential vault writes are refused while upstream TLS "
		    "verification is off (--ssl-insecure)");
		return false;
	}
	return true;
}

/* A mutation must not leave a binding (the file's or the vault's)
 * uncovered, nor ask what this daemon cannot enforce (request rules
 * without the proxy). */
static int
egressd_api_vault_check_cb(void *arg, const struct policy *next, struct err *e)
{
	struct egressd *d = egressd_arg(arg);

	if (daemon_wire_enforceable(d->cfg, next, e) == -1)
		return -1;
	return policy_check_bindings(next, e);
}

/* The operator's rules for the API's bindings (config_compat.c). */
static int
egressd_api_vault_rules_cb(void *arg, const struct policy *next, struct err *e)
{
	struct egressd *d = egressd_arg(arg);

	return config_compat_bindings(d->cfg, next, true, e);
}

static const char *
egressd_api_mode_cb(void *arg)
{
	struct egressd *d = egressd_arg(arg);

	return d->nft_ok ? "dns+nft" : "dns";
}

/* Ready only when everything this mode promises is really in place. */
static bool
egressd_api_ready_cb(void *arg, char *why, size_t whylen)
{
	struct egressd *d = egressd_arg(arg);
	const char *dwhy = NULL;

	if (d->cfg->mode == CONFIG_MODE_DNS_NFT && !d->nft_ok) {
		(void)snprintf(why, whylen, "nft not ready");
		return false;
	}
	if (d->cfg->mode == CONFIG_MODE_DNS_NFT && !d->selfcheck_ok) {
		(void)snprintf(why, whylen, "nft self-check not passed");
		return false;
	}
	if (d->dns == NULL || !dns_ready(d->dns, &dwhy)) {
		(void)snprintf(why, whylen, "dns not ready: %s",
		    dwhy ? dwhy : "not started");
		return false;
	}
	return true;
}

/* /v1/status: the daemon's side, rendered by the API. */
static void
egressd_api_status_cb(void *arg, struct api_status *st)
{
	daemon_status_fill(egressd_arg(arg), st);
}

/* /metrics: refreshed right before the API renders d->stats. */
static void
egressd_api_metrics_refresh_cb(void *arg)
{
	daemon_status_refresh_metrics(egressd_arg(arg));
}

int
daemon_api_start(struct egressd *d, struct err *e)
{
	const struct config *c = d->cfg;
	struct api_opts o;
	struct api_hooks h;

	if ((c->api.listen_tcp == NULL || c->api.listen_tcp[0] == '\0') &&
	    c->api.listen_unix == NULL) {
		log_warn(d->log, "api.disabled");
		d->api_ok = true;
		return 0;
	}
	/* The configuration's own api_opts, plus what is not configuration. */
	o = c->api;
	memset(&h, 0, sizeof(h));
	o.start_time_s = (uint64_t)time(NULL);
	o.log = d->log;
	o.stats = &d->stats;
	h.policy_get = daemon_wire_policy_get_cb;
	h.mutate = daemon_commit_mutate;
	h.policy_apicreds_check = egressd_api_vault_check_cb;
	h.vault_writable = egressd_api_vault_writable_cb;
	h.vault_check = egressd_api_vault_rules_cb;
	h.ready = egressd_api_ready_cb;
	h.status = egressd_api_status_cb;
	h.enforcement_mode = egressd_api_mode_cb;
	h.metrics_refresh = egressd_api_metrics_refresh_cb;
	h.arg = d;
	if ((d->api = api_new(d->base, &o, &h, e)) == NULL) {
		err_prefix(e, "control API");
		return -1;
	}
	d->api_ok = true;
	return 0;
}
