/*
 * The Credential Vault on the proxy's HTTP/1.1 relay: the one interface
 * the relay (proxy_relay.c) and the close path (proxy_conn.c) call.
 * Requests: inject a credential, substitute placeholders, rewrite
 * (proxy_vault_inject.c). Responses: redact, decode, trailers
 * (proxy_vault_redact.c). The stage never refuses, closes or changes a
 * connection's state itself: it answers with a code and the relay acts
 * on it. Its state is c->vault (proxy_int.h); inside egressd/proxy/ only.
 */
#ifndef EGRESSD_PROXY_PROXY_VAULT_H
#define EGRESSD_PROXY_PROXY_VAULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "egressd/proxy/proxy.h"

struct evbuffer;
struct http_head;
struct proxy_conn;
struct vault;
struct err;

/*
 * A judged request head h (end bytes at the start of in) to a host a
 * binding could match: the vault decides. 0: forward the head as it
 * came (*used: a vault reference when the origin is a bound one, so its
 * response is redacted; NULL otherwise); 1: the rewritten request went
 * to the origin, *body_taken bytes of body with it (drain end +
 * *body_taken), and *used holds a vault reference for the response's
 * redaction; 2: its body is to be substituted and not all here: call
 * again once in holds *wait bytes; 3: its oauth2 binding has no fresh
 * token: the request waits for one (c->vault.mint; nothing is consumed,
 * proxy_relay_mint_done takes it up again); -1: refused (*status,
 * *why); -2: out of memory. When the body is pulled up, h is parsed
 * again.
 */
int proxy_vault_request(struct proxy_conn *c, struct http_head *h,
    const char *name, struct evbuffer *in, size_t end, struct vault **used,
    uint64_t *body_taken, size_t *wait, int *status, enum proxy_reason *why);

/* Whether the body held for substitution (c->vault.hold_end) is all in
 * in (len bytes), or past what is held for it: judge the request again. */
bool proxy_vault_hold_ready(
    struct proxy_conn *c, struct evbuffer *in, size_t len);

/* What proxy_vault_response says of a response head. */
enum proxy_vault_rc {
	PROXY_VAULT_RC_INTERIM, /* a 1xx, sent redacted: the final one follows */
	PROXY_VAULT_RC_DONE, /* sent redacted, no body: the response is done */
	PROXY_VAULT_RC_BODY, /* sent (or held) redacted; its body follows */
	PROXY_VAULT_RC_COMPRESSED, /* compressed, not decodable: refuse 502 */
	PROXY_VAULT_RC_UNSAFE, /* a head that cannot be redacted: refuse 502 */
	PROXY_VAULT_RC_NOMEM, /* out of memory */
};

/*
 * A response head h (end bytes of buf) to a request of a bound origin:
 * judged, sent redacted (or held while its body is decoded), its body's
 * redaction set up. The caller drains the head.
 */
enum proxy_vault_rc proxy_vault_response(struct proxy_conn *c,
    const struct http_head *h, const char *buf, size_t end, struct err *e);

/*
 * Body bytes of a redacted response, from in, redacted toward the
 * client (*done at its end). 0; -1 bad framing (e), -2 out of memory,
 * -3 the decoding failed (e).
 */
int proxy_vault_body(
    struct proxy_conn *c, struct evbuffer *in, bool *done, struct err *e);

/* The response's redaction state freed (its kept trailers wiped). */
void proxy_vault_clear(struct proxy_conn *c);

/* One vault.compressed line and its counter. */
void proxy_vault_log_compressed(
    struct proxy_conn *c, enum proxy_compressed o, const char *reason);

#endif
