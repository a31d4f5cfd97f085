/*
 * vault_http: credentials whose source is http (policy_cred_http.h,
 * issue 38 item 4). Their values are the vault's like any credential's
 * (in the arena, redacted in every form, a replaced one retired so it is
 * still masked), but egressd fetches them: the vault renders the request
 * (its headers may carry secrets: a literal value of the operator's or
 * another credential's), the proxy sends it (egressd/proxy/proxy_fetch.c)
 * and hands the value to vault_http_set, which makes the revision that
 * holds it.
 *
 * Freshness: a value fetched at t with refresh period ttl (the store's
 * "ttl", capped by the policy's; else the policy's; else
 * POLICY_HTTP_TTL_DEFAULT) is due for a refresh at t + ttl and stays in
 * use, while refreshes fail, until t + ttl + maxStale. A credential
 * without a value yet, or past that, makes vault_decide refuse the
 * requests that need it: VAULT_REFUSED, 502, never unauthenticated.
 * A new revision of the same policy (vault_new with prev) carries prev's
 * fetched value of each http credential whose settings did not change.
 */
#ifndef EGRESSD_VAULT_HTTP_H
#define EGRESSD_VAULT_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/policy_cred_http.h"
#include "util/err.h"
#include "vault/vault.h"

#define VAULT_HTTP_REQ_MAX (320u << 10) /* a request's head */

struct vault_http_req {
	const char *credential; /* borrowed from the policy */
	const struct policy_cred_http *h; /* its settings (host, port, ...) */
	/* "GET target HTTP/1.1" to the end of the head, Connection: close.
	 * Secret (header values): malloc'd, wiped by
	 * vault_http_request_clear. */
	uint8_t *bytes;
	size_t len;
};

/* The request of the http credential named cred: its method and target,
 * Host, User-Agent, Connection: close, the policy's headers (literal, or another
 * credential's value), Content-Length: 0 for POST. 0, or -1 and e (no
 * such http credential, a header's credential without a value, out of
 * memory). */
int vault_http_request(const struct vault *v, const char *cred,
    struct vault_http_req *out, struct err *e);
void vault_http_request_clear(struct vault_http_req *out);

struct vault_http_state {
	bool have; /* a value is held */
	uint64_t fetched_ms; /* when (the vault's clock) */
	uint64_t due_ms; /* when to refresh it */
	uint64_t until_ms; /* when it stops being used */
};
/* The state of the http credential named cred: 0, or -1 (none such). */
int vault_http_state(
    const struct vault *v, const char *cred, struct vault_http_state *st);

/* vault_http_set (vault.h) makes the revision holding a fetched value. */
/* Does nv's value of http credential cred differ from v's? */
bool vault_http_changed(
    const struct vault *nv, const struct vault *v, const char *cred);

/* The clock of v's freshness (now_mono_ms unless a test set one). */
uint64_t vault_http_now(const struct vault *v);

#endif
