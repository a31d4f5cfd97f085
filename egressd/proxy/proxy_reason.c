/*
 * Names of reasons, states and decode outcomes, and what a refusal
 * sends (a TLS alert, an HTTP status).
 */

#include "egressd/proxy/proxy_int.h"
static const char *const proxy_reason_names[PROXY_NREASONS] = {
    [PROXY_OK] = "done",
    [PROXY_NO_SNI] = "no_sni",
    [PROXY_SNI_IP] = "sni_ip",
    [PROXY_ESNI] = "esni",
    [PROXY_NAME_DENIED] = "name_denied",
    [PROXY_ADDR_MISMATCH] = "addr_mismatch",
    [PROXY_BAD_HELLO] = "bad_hello",
    [PROXY_BAD_REQUEST] = "bad_request",
    [PROXY_NO_HOST] = "no_host",
    [PROXY_PORT_MISMATCH] = "port_mismatch",
    [PROXY_UNSUPPORTED] = "unsupported",
    [PROXY_NO_DST] = "no_original_dst",
    [PROXY_HELLO_TIMEOUT] = "hello_timeout",
    [PROXY_CONNECT_FAILED] = "connect_failed",
    [PROXY_CONNECT_TIMEOUT] = "connect_timeout",
    [PROXY_IDLE] = "idle",
    [PROXY_CLIENT_ERROR] = "client_error",
    [PROXY_UPSTREAM_ERROR] = "upstream_error",
    [PROXY_SHUTDOWN] = "shutdown",
    [PROXY_MISDIRECTED] = "misdirected",
    [PROXY_VAULT_MISROUTED] = "vault_misrouted",
    [PROXY_MEMORY] = "memory",
    [PROXY_UPSTREAM_PROXY] = "upstream_proxy",
    [PROXY_UPSTREAM_TLS] = "upstream_tls",
    [PROXY_CLIENT_TLS] = "client_tls",
    [PROXY_VAULT_REFUSED] = "vault_refused",
    [PROXY_VAULT_AMBIGUOUS] = "vault_ambiguous",
    [PROXY_VAULT_UNSAFE] = "vault_unsafe",
    [PROXY_POLICY_CHANGED] = "policy_changed",
    [PROXY_VAULT_COMPRESSED] = "vault_compressed",
    [PROXY_VAULT_DECODE] = "vault_decode_failed",
    [PROXY_HEAD_TIMEOUT] = "head_timeout",
    [PROXY_REQUEST_DENIED] = "request_denied",
    [PROXY_VAULT_TOKEN] = "vault_token",
};

static const char *const proxy_state_names[PROXY_NSTATES] = {
    [PROXY_ST_PEEK] = "peek",
    [PROXY_ST_CONNECT] = "connect",
    [PROXY_ST_RELAY] = "relay",
    [PROXY_ST_REFUSE] = "refuse",
};

const char *
proxy_reason_name(enum proxy_reason r)
{
	return (unsigned)r < PROXY_NREASONS && proxy_reason_names[r] != NULL
	    ? proxy_reason_names[r]
	    : "?";
}

const char *
proxy_compressed_name(enum proxy_compressed c)
{
	static const char *const names[] = {
	    [PROXY_COMPRESSED_DECODED] = "decoded",
	    [PROXY_COMPRESSED_REFUSED] = "refused",
	    [PROXY_COMPRESSED_FAILED] = "failed",
	};

	return (unsigned)c < sizeof(names) / sizeof(names[0]) ? names[c] : "?";
}

const char *
proxy_state_name(enum proxy_state s)
{
	return (unsigned)s < PROXY_NSTATES ? proxy_state_names[s] : "?";
}

void
proxy_tls_alert(enum proxy_reason r, uint8_t out[7])
{
	/* RFC 8446 6: level fatal; decode_error for what does not parse,
	 * unrecognized_name for a missing or unusable SNI, access_denied
	 * for what the policy refuses. */
	uint8_t desc;

	switch (r) {
	case PROXY_BAD_HELLO:
		desc = 50;
		break;
	case PROXY_NO_SNI:
	case PROXY_SNI_IP:
	case PROXY_ESNI:
		desc = 112;
		break;
	default:
		desc = 49;
		break;
	}
	out[0] = 21; /* alert */
	out[1] = 3;
	out[2] = 3;
	out[3] = 0;
	out[4] = 2;
	out[5] = 2; /* fatal */
	out[6] = desc;
}

int
proxy_http_status(enum proxy_reason r)
{
	switch (r) {
	case PROXY_BAD_REQUEST:
	case PROXY_NO_HOST:
		return 400;
	case PROXY_UNSUPPORTED:
		return 501;
	case PROXY_MISDIRECTED:
	case PROXY_VAULT_MISROUTED:
		return 421;
	case PROXY_UPSTREAM_TLS:
	case PROXY_UPSTREAM_PROXY:
	case PROXY_CONNECT_FAILED:
	case PROXY_CONNECT_TIMEOUT:
	case PROXY_VAULT_COMPRESSED:
	case PROXY_VAULT_DECODE:
	case PROXY_VAULT_TOKEN:
		return 502;
	default:
		return 403;
	}
}
