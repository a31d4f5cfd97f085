/*
 * config_uproxy: the upstream proxy's settings (issue 39, item 3), parsed
 * apart from config.c's table so that file stays one concept under its
 * size bound; config.c hands these keys over and calls the finish step.
 *
 *   OPENSANDBOX_EGRESS_UPSTREAM_PROXY / --upstream-proxy
 *     http://IP[:port][/]  (IPv6 as [v6]; port 80 when absent). A host
 *     name is refused (egressd does not resolve its own way out; the
 *     same rule as the DNS upstreams and the webhook), so is https://
 *     (TLS to the proxy is not done), userinfo (a URL gets logged: the
 *     credential goes in _AUTH), a path, query or fragment. "" = none.
 *   OPENSANDBOX_EGRESS_UPSTREAM_PROXY_AUTH
 *     the complete Proxy-Authorization value sent on each CONNECT (the
 *     reference's meaning), e.g. "Basic dXNlcjpwYXNz". A secret: copied
 *     into a secret arena (secmem.h), wiped from the environment's memory
 *     by config_from_env, never logged; main() drops this copy once the
 *     daemon holds its own (uproxy.h). No flag takes it on the command line (every user can
 *     read /proc/PID/cmdline).
 *   EGRESSD_UPSTREAM_PROXY_AUTH_FILE / --upstream-proxy-auth-file
 *     the same value from a file (one line; the owner checks of the token
 *     file); wins over the variable.
 *   EGRESSD_UPSTREAM_PROXY_CONNECT / --upstream-proxy-connect
 *     name (default) | address: what the CONNECT target names.
 * A credential without a proxy, or a proxy without the transparent proxy
 * (nothing of the sandbox's would go through it), is refused at start.
 */
#ifndef EGRESSD_CONFIG_UPROXY_H
#define EGRESSD_CONFIG_UPROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/addr.h"
#include "util/err.h"

struct config;
struct secmem_arena;

struct config_uproxy {
	bool on;
	struct addr addr;
	uint16_t port;
	bool by_address; /* CONNECT names the judged address */
	struct secmem_arena *arena; /* holds auth */
	char *auth; /* the Proxy-Authorization value (secret) or NULL */
	size_t auth_len;
	char *auth_file;
};

int config_uproxy_set_url(
    struct config_uproxy *u, const char *v, const char *what, struct err *e);
int config_uproxy_set_auth(
    struct config_uproxy *u, const char *v, const char *what, struct err *e);
int config_uproxy_set_auth_file(
    struct config_uproxy *u, const char *v, const char *what, struct err *e);
int config_uproxy_set_connect(
    struct config_uproxy *u, const char *v, const char *what, struct err *e);
/* The file read, and the settings checked together (proxy_on: the
 * transparent proxy is on). */
int config_uproxy_finish(struct config_uproxy *u, bool proxy_on, struct err *e);
/* Frees and wipes (again: a no-op). */
void config_uproxy_clear(struct config_uproxy *u);

#endif
