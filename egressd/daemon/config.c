#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "egressd/daemon/config.h"
#include "egressd/nft/nft.h"
#include "util/addr.h"
#include "util/fileread.h"
#include "util/secmem.h"

static const char *const config_vault_compressed_names[] = {
    [CONFIG_VAULT_COMPRESSED_REFUSE] = "refuse",
    [CONFIG_VAULT_COMPRESSED_DECODE] = "decode",
};

static int
config_parse_vault_compressed(const char *s, enum config_vault_compressed *out)
{
	size_t i;

	for (i = 0; i < sizeof(config_vault_compressed_names) /
	         sizeof(config_vault_compressed_names[0]);
	     i++)
		if (strcmp(s, config_vault_compressed_names[i]) == 0) {
			*out = (enum config_vault_compressed)i;
			return 0;
		}
	return -1;
}

const char *
config_vault_compressed_name(enum config_vault_compressed v)
{
	return (unsigned)v < sizeof(config_vault_compressed_names) /
	            sizeof(config_vault_compressed_names[0])
	    ? config_vault_compressed_names[v]
	    : "?";
}

void
config_init(struct config *c)
{
	memset(c, 0, sizeof(*c));
	c->mode = CONFIG_MODE_DNS_NFT;
	c->api.listen_tcp = strdup(EGRESSD_DEFAULT_HTTP_ADDR);
	c->rules_dir = strdup(EGRESSD_DEFAULT_RULES_DIR);
	c->trust_dir = strdup(EGRESSD_DEFAULT_TRUST_DIR);
	c->state_dir = strdup(EGRESSD_DEFAULT_STATE_DIR);
	c->api.max_rules = EGRESSD_DEFAULT_MAX_RULES;
	c->learned_max = EGRESSD_DEFAULT_LEARNED_MAX;
	c->policy_file_max = POLICY_FILE_MAX;
	c->dns_port = EGRESSD_DEFAULT_DNS_PORT;
	c->dns_timeout_s = EGRESSD_DEFAULT_DNS_TIMEOUT_S;
	c->dns_probe_interval_s = EGRESSD_DEFAULT_PROBE_INTERVAL_S;
	c->mark = EGRESSD_DEFAULT_MARK;
	c->proxy_port = EGRESSD_DEFAULT_PROXY_PORT;
	c->proxy_conns_max = EGRESSD_DEFAULT_PROXY_CONNS_MAX;
	c->proxy_buffer_mb = EGRESSD_DEFAULT_PROXY_BUFFER_MB;
	c->proxy_head_timeout_s = EGRESSD_DEFAULT_PROXY_HEAD_TIMEOUT_S;
	c->log_level = EGRESSD_DEFAULT_LOG_LEVEL;
	(void)config_parse_vault_compressed(
	    EGRESSD_DEFAULT_VAULT_COMPRESSED, &c->vault_compressed);
	(void)config_parse_pt_judge(
	    EGRESSD_DEFAULT_PASSTHROUGH_JUDGE, &c->pt_judge);
	c->queue_num = EGRESSD_DEFAULT_QUEUE_NUM;
}

static void
config_wipe_token(struct config *c)
{
	if (c->api.token != NULL) {
		secmem_wipe(c->api.token, strlen(c->api.token));
		free(c->api.token);
		c->api.token = NULL;
	}
}

void
config_clear(struct config *c)
{
	free(c->policy_file);
	free(c->rules_json);
	free(c->rules_dir);
	free(c->api.listen_tcp);
	free(c->api.listen_unix);
	free(c->api.tls_cert);
	free(c->api.tls_key);
	config_wipe_token(c);
	free(c->token_file);
	free(c->dns_upstreams);
	free(c->dns_probe);
	config_strlist_clear(&c->nameserver_exempt);
	config_strlist_clear(&c->doh_blocklist);
	config_strlist_clear(&c->unknown_env);
	free(c->trust_dir);
	free(c->state_dir);
	free(c->ca_key_file);
	free(c->ca_cert_file);
	free(c->ca_bundle);
	free(c->deny_webhook);
	config_uproxy_clear(&c->uproxy);
	free(c->sandbox_id);
	free(c->log_file);
	free(c->failpoint);
	config_compat_clear(c);
	memset(c, 0, sizeof(*c));
}

const char *
config_mode_name(enum config_mode m)
{
	return m == CONFIG_MODE_DNS ? "dns" : "dns+nft";
}

/* Replaces *dst with a copy of src; rejects control bytes and overlong. */
static int
config_set_str(char **dst, const char *src, const char *what, struct err *e)
{
	size_t i, n = strnlen(src, CONFIG_VALUE_MAX + 1);
	char *copy;

	if (n > CONFIG_VALUE_MAX) {
		err_set(e, "%s: value longer than %d bytes", what,
		    CONFIG_VALUE_MAX);
		return -1;
	}
	for (i = 0; i < n; i++) {
		if ((unsigned char)src[i] < 0x20 || src[i] == 0x7f) {
			err_set(e, "%s: control character in value", what);
			return -1;
		}
	}
	if ((copy = strdup(src)) == NULL) {
		err_set(e, "%s: out of memory", what);
		return -1;
	}
	free(*dst);
	*dst = copy;
	return 0;
}

int
config_parse_hostport(const char *s, uint16_t default_port,
    struct config_hostport *out, struct err *e)
{
	struct addr a;

	memset(out, 0, sizeof(*out));
	if (addr_parse_hostport(s, default_port, 0, &a, &out->port, e) == -1)
		return -1;
	out->family = a.family;
	memcpy(out->addr, a.a, sizeof(out->addr));
	addr_format_port(&a, out->port, out->text, sizeof(out->text));
	return 0;
}

static int
config_set_upstreams(
    struct config *c, const char *s, const char *what, struct err *e)
{
	struct config_strlist l = {NULL, 0};
	struct config_hostport *v = NULL;
	size_t i;

	if (config_split(s, &l, what, e) == -1)
		return -1;
	if (l.n > 0 && (v = calloc(l.n, sizeof(*v))) == NULL) {
		err_set(e, "%s: out of memory", what);
		goto fail;
	}
	for (i = 0; i < l.n; i++) {
		if (config_parse_hostport(l.v[i],
		        EGRESSD_DEFAULT_DNS_UPSTREAM_PORT, &v[i], e) == -1) {
			err_prefix(e, "%s", what);
			goto fail;
		}
	}
	free(c->dns_upstreams);
	c->dns_upstreams = v;
	c->ndns_upstreams = l.n;
	config_strlist_clear(&l);
	return 0;
fail:
	free(v);
	config_strlist_clear(&l);
	return -1;
}

static int
config_set_ip_list(struct config_strlist *dst, const char *s, bool cidr_ok,
    const char *what, struct err *e)
{
	struct config_strlist l = {NULL, 0};
	size_t i;

	if (config_split(s, &l, what, e) == -1)
		return -1;
	for (i = 0; i < l.n; i++) {
		struct addr a;
		unsigned plen;

		if ((!cidr_ok && strchr(l.v[i], '/') != NULL) ||
		    addr_parse_cidr(l.v[i], &a, &plen, e) == -1)
			goto bad;
	}
	config_strlist_clear(dst);
	*dst = l;
	return 0;
bad:
	err_set(e, "%s: \"%.64s\" is not an IP %sliteral", what, l.v[i],
	    cidr_ok ? "or CIDR " : "");
	config_strlist_clear(&l);
	return -1;
}

static int
config_set_mode(
    struct config *c, const char *s, const char *what, struct err *e)
{
	if (strcmp(s, "dns+nft") == 0 || strcmp(s, "") == 0)
		c->mode = CONFIG_MODE_DNS_NFT;
	else if (strcmp(s, "dns") == 0)
		c->mode = CONFIG_MODE_DNS;
	else {
		err_set(
		    e, "%s: \"%.64s\" is not a mode (dns, dns+nft)", what, s);
		return -1;
	}
	return 0;
}

static int
config_set_http_addr(
    struct config *c, const char *s, const char *what, struct err *e)
{
	struct config_hostport hp;
	char buf[CONFIG_VALUE_MAX + 8];

	if (*s != '\0') {
		/* ":18080" means every address. */
		if (s[0] == ':') {
			(void)snprintf(buf, sizeof(buf), "[::]%s", s);
			if (config_parse_hostport(buf, 0, &hp, e) == -1 ||
			    hp.port == 0)
				goto bad;
		} else if (config_parse_hostport(s, 0, &hp, e) == -1 ||
		    hp.port == 0)
			goto bad;
	}
	return config_set_str(&c->api.listen_tcp, s, what, e);
bad:
	err_set(
	    e, "%s: \"%.64s\" is not HOST:PORT, [V6]:PORT or :PORT", what, s);
	return -1;
}

/*
 * A token a client can send: printable ASCII, no space at either end.
 * HTTP trims a field value's edges and forbids control bytes, so any
 * other token would lock every client out (a Secret updated to " "
 * would have done so); such a token is refused and the one in force
 * stays.
 */
static bool
config_token_ok(const char *s, size_t n)
{
	size_t i;

	if (n > 0 && (s[0] == ' ' || s[n - 1] == ' '))
		return false;
	for (i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
			return false;
	return true;
}

#define CONFIG_TOKEN_BAD                                                       \
	"token must be printable ASCII without spaces at either end"

static int
config_set_token(
    struct config *c, const char *s, const char *what, struct err *e)
{
	size_t n = strnlen(s, CONFIG_TOKEN_MAX + 1);

	if (n > CONFIG_TOKEN_MAX) {
		err_set(e, "%s: token longer than %d bytes", what,
		    CONFIG_TOKEN_MAX);
		return -1;
	}
	if (!config_token_ok(s, n)) {
		err_set(e, "%s: %s", what, CONFIG_TOKEN_BAD);
		return -1;
	}
	config_wipe_token(c);
	if (n == 0)
		return 0;
	if ((c->api.token = strndup(s, n)) == NULL) {
		err_set(e, "%s: out of memory", what);
		return -1;
	}
	return 0;
}

/* Replaces a port list (protected, inbound) with a comma-separated one. */
static int
config_set_ports(
    uint16_t *dst, size_t *ndst, const char *s, const char *what, struct err *e)
{
	struct config_strlist l = {NULL, 0};
	uint16_t ports[CONFIG_PORTS_MAX];
	size_t i;

	if (config_split(s, &l, what, e) == -1)
		return -1;
	if (l.n > CONFIG_PORTS_MAX) {
		err_set(e, "%s: more than %d ports", what, CONFIG_PORTS_MAX);
		goto fail;
	}
	for (i = 0; i < l.n; i++)
		if (config_set_port(&ports[i], l.v[i], what, e) == -1)
			goto fail;
	memcpy(dst, ports, l.n * sizeof(ports[0]));
	*ndst = l.n;
	config_strlist_clear(&l);
	return 0;
fail:
	config_strlist_clear(&l);
	return -1;
}

enum config_key {
	K_MODE,
	K_RULES,
	K_POLICY_FILE,
	K_HTTP_ADDR,
	K_TOKEN,
	K_MAX_RULES,
	K_POLICY_FILE_MAX,
	K_NS_EXEMPT,
	K_WEBHOOK,
	K_SANDBOX_ID,
	K_BLOCK_DOH,
	K_DOH_LIST,
	K_UPSTREAM,
	K_UPSTREAM_TIMEOUT,
	K_PROBE,
	K_PROBE_INTERVAL,
	K_LOG_LEVEL,
	K_TRANSPARENT,
	K_PROXY_PORT,
	K_PROXY_CONNS_MAX,
	K_PROXY_BUFFER_MAX,
	K_PROXY_HEAD_TIMEOUT,
	K_INTERCEPT_PORTS,
	K_STATE_DIR,
	K_CA_KEY,
	K_CA_CERT,
	K_CA_BUNDLE,
	K_TRUST_DIR,
	K_SSL_INSECURE,
	K_TOKEN_FILE,
	K_API_SOCKET,
	K_API_TLS_CERT,
	K_API_TLS_KEY,
	K_RULES_DIR,
	K_LOG_FILE,
	K_DNS_PORT,
	K_MARK,
	K_LEARNED_MAX,
	K_TEARDOWN,
	K_INSECURE_NO_TOKEN,
	K_FAILPOINT,
	K_PROTECTED_PORTS,
	K_INBOUND_PORTS,
	K_VAULT_COMPRESSED,
	K_PT_JUDGE,
	K_KERNEL_JUDGE,
	K_UPROXY,
	K_UPROXY_AUTH,
	K_UPROXY_AUTH_FILE,
	K_UPROXY_CONNECT,
	K_VAULT_REQUIRE_MLOCK,
	K_API_LOOPBACK_UID,
};

/*
 * How the settings that are one field each are stored: a string, a boolean,
 * a port, or a whole number in [min, max] in a field of that size. The
 * others (CF_OWN) have their own code in config_set.
 */
enum config_field_kind { CF_OWN, CF_STR, CF_BOOL, CF_PORT, CF_UINT };

struct config_field {
	enum config_field_kind kind;
	size_t off, size;
	unsigned long long min, max;
};

#define CF_AT(m) offsetof(struct config, m), sizeof(((struct config *)0)->m)

static const struct config_field config_fields[] = {
    [K_RULES] = {CF_STR, CF_AT(rules_json), 0, 0},
    [K_POLICY_FILE] = {CF_STR, CF_AT(policy_file), 0, 0},
    [K_MAX_RULES] = {CF_UINT, CF_AT(api.max_rules), 0, POLICY_FILE_RULES_MAX},
    [K_POLICY_FILE_MAX] = {CF_UINT, CF_AT(policy_file_max),
        EGRESSD_POLICY_FILE_MAX_MIN, POLICY_FILE_CEILING},
    [K_SANDBOX_ID] = {CF_STR, CF_AT(sandbox_id), 0, 0},
    [K_BLOCK_DOH] = {CF_BOOL, CF_AT(block_doh_443), 0, 0},
    [K_UPSTREAM_TIMEOUT] = {CF_UINT, CF_AT(dns_timeout_s), 1,
        EGRESSD_DNS_TIMEOUT_S_MAX},
    [K_PROBE] = {CF_STR, CF_AT(dns_probe), 0, 0},
    [K_PROBE_INTERVAL] = {CF_UINT, CF_AT(dns_probe_interval_s), 1,
        EGRESSD_PROBE_INTERVAL_S_MAX},
    [K_TRANSPARENT] = {CF_BOOL, CF_AT(proxy_transparent), 0, 0},
    [K_PROXY_PORT] = {CF_PORT, CF_AT(proxy_port), 0, 0},
    [K_PROXY_CONNS_MAX] = {CF_UINT, CF_AT(proxy_conns_max), 1,
        EGRESSD_PROXY_CONNS_MAX_MAX},
    [K_PROXY_BUFFER_MAX] = {CF_UINT, CF_AT(proxy_buffer_mb), 1,
        EGRESSD_PROXY_BUFFER_MB_MAX},
    [K_PROXY_HEAD_TIMEOUT] = {CF_UINT, CF_AT(proxy_head_timeout_s), 1,
        EGRESSD_PROXY_HEAD_TIMEOUT_S_MAX},
    [K_STATE_DIR] = {CF_STR, CF_AT(state_dir), 0, 0},
    [K_CA_KEY] = {CF_STR, CF_AT(ca_key_file), 0, 0},
    [K_CA_CERT] = {CF_STR, CF_AT(ca_cert_file), 0, 0},
    [K_CA_BUNDLE] = {CF_STR, CF_AT(ca_bundle), 0, 0},
    [K_TRUST_DIR] = {CF_STR, CF_AT(trust_dir), 0, 0},
    [K_SSL_INSECURE] = {CF_BOOL, CF_AT(ssl_insecure), 0, 0},
    [K_TOKEN_FILE] = {CF_STR, CF_AT(token_file), 0, 0},
    [K_API_SOCKET] = {CF_STR, CF_AT(api.listen_unix), 0, 0},
    [K_API_TLS_CERT] = {CF_STR, CF_AT(api.tls_cert), 0, 0},
    [K_API_TLS_KEY] = {CF_STR, CF_AT(api.tls_key), 0, 0},
    [K_RULES_DIR] = {CF_STR, CF_AT(rules_dir), 0, 0},
    [K_LOG_FILE] = {CF_STR, CF_AT(log_file), 0, 0},
    [K_DNS_PORT] = {CF_PORT, CF_AT(dns_port), 0, 0},
    [K_MARK] = {CF_UINT, CF_AT(mark), 1, UINT32_MAX},
    [K_LEARNED_MAX] = {CF_UINT, CF_AT(learned_max), NFT_LEARNED_MAX_MIN,
        NFT_LEARNED_MAX_LIMIT},
    [K_TEARDOWN] = {CF_BOOL, CF_AT(teardown_on_exit), 0, 0},
    [K_INSECURE_NO_TOKEN] = {CF_BOOL, CF_AT(api.insecure_no_token), 0, 0},
    [K_FAILPOINT] = {CF_STR, CF_AT(failpoint), 0, 0},
    [K_VAULT_REQUIRE_MLOCK] = {CF_BOOL, CF_AT(vault_require_mlock), 0, 0},
};

/* Stores n (checked against the field's range) in a field of size bytes. */
static void
config_store_uint(void *dst, size_t size, unsigned long long n)
{
	uint16_t u16 = (uint16_t)n;
	uint32_t u32 = (uint32_t)n;
	uint64_t u64 = n;

	switch (size) {
	case sizeof(u16):
		memcpy(dst, &u16, size);
		break;
	case sizeof(u32):
		memcpy(dst, &u32, size);
		break;
	case sizeof(u64):
		memcpy(dst, &u64, size);
		break;
	default:
		abort(); /* a config_fields entry of another size */
	}
}

/* A setting of one field, as its entry in config_fields says. */
static int
config_set_field(struct config *c, const struct config_field *f, const char *v,
    const char *what, struct err *e)
{
	char *dst = (char *)c + f->off;
	unsigned long long n;

	switch (f->kind) {
	case CF_STR:
		return config_set_str((char **)(void *)dst, v, what, e);
	case CF_BOOL:
		return config_parse_bool(v, (bool *)(void *)dst, what, e);
	case CF_PORT:
		return config_set_port((uint16_t *)(void *)dst, v, what, e);
	case CF_UINT:
		if (config_parse_uint(v, f->min, f->max, &n, what, e) == -1)
			return -1;
		config_store_uint(dst, f->size, n);
		return 0;
	case CF_OWN:
		break;
	}
	err_set(e, "%s: unknown setting", what);
	return -1;
}

static int
config_set(struct config *c, enum config_key k, const char *v, const char *what,
    struct err *e)
{
	switch (k) {
	case K_MODE:
		return config_set_mode(c, v, what, e);
	case K_HTTP_ADDR:
		return config_set_http_addr(c, v, what, e);
	case K_TOKEN:
		return config_set_token(c, v, what, e);
	case K_NS_EXEMPT:
		return config_set_ip_list(
		    &c->nameserver_exempt, v, false, what, e);
	case K_WEBHOOK:
		if (*v != '\0' && strncmp(v, "http://", 7) != 0 &&
		    strncmp(v, "https://", 8) != 0) {
			err_set(
			    e, "%s: must be an http:// or https:// URL", what);
			return -1;
		}
		return config_set_str(&c->deny_webhook, v, what, e);
	case K_DOH_LIST:
		return config_set_ip_list(&c->doh_blocklist, v, true, what, e);
	case K_UPSTREAM:
		return config_set_upstreams(c, v, what, e);
	case K_LOG_LEVEL:
		if (log_level_parse(v, &c->log_level) == -1) {
			err_set(e,
			    "%s: \"%.64s\" is not a level (debug, info, "
			    "warn, error)",
			    what, v);
			return -1;
		}
		return 0;
	case K_PROTECTED_PORTS:
		return config_set_ports(
		    c->protected_ports, &c->nprotected_ports, v, what, e);
	case K_INBOUND_PORTS:
		return config_set_ports(
		    c->inbound_ports, &c->ninbound_ports, v, what, e);
	case K_INTERCEPT_PORTS:
		return config_set_ports(
		    c->intercept_ports, &c->nintercept_ports, v, what, e);
	case K_API_LOOPBACK_UID:
		return config_api_uid_set(c, v, what, e);
	case K_UPROXY:
		return config_uproxy_set_url(&c->uproxy, v, what, e);
	case K_UPROXY_AUTH:
		return config_uproxy_set_auth(&c->uproxy, v, what, e);
	case K_UPROXY_AUTH_FILE:
		return config_uproxy_set_auth_file(&c->uproxy, v, what, e);
	case K_UPROXY_CONNECT:
		return config_uproxy_set_connect(&c->uproxy, v, what, e);
	case K_KERNEL_JUDGE:
		return config_set_kernel_judge(c, v, what, e);
	case K_PT_JUDGE:
		return config_set_pt_judge(c, v, what, e);
	case K_VAULT_COMPRESSED:
		if (config_parse_vault_compressed(v, &c->vault_compressed) ==
		    -1) {
			err_set(e,
			    "%s: \"%.64s\" is not a mode (refuse, decode)",
			    what, v);
			return -1;
		}
		return 0;
	default:
		break;
	}
	if ((size_t)k >= sizeof(config_fields) / sizeof(config_fields[0])) {
		err_set(e, "%s: unknown setting", what);
		return -1;
	}
	return config_set_field(c, &config_fields[k], v, what, e);
}

struct config_env {
	const char *name;
	enum config_key key;
};

static const struct config_env config_envs[] = {
    {"OPENSANDBOX_EGRESS_MODE", K_MODE},
    {"OPENSANDBOX_EGRESS_RULES", K_RULES},
    {"OPENSANDBOX_EGRESS_POLICY_FILE", K_POLICY_FILE},
    {"OPENSANDBOX_EGRESS_HTTP_ADDR", K_HTTP_ADDR},
    {"OPENSANDBOX_EGRESS_TOKEN", K_TOKEN},
    {"OPENSANDBOX_EGRESS_MAX_RULES", K_MAX_RULES},
    {"OPENSANDBOX_EGRESS_NAMESERVER_EXEMPT", K_NS_EXEMPT},
    {"OPENSANDBOX_EGRESS_DENY_WEBHOOK", K_WEBHOOK},
    {"OPENSANDBOX_EGRESS_SANDBOX_ID", K_SANDBOX_ID},
    {"OPENSANDBOX_EGRESS_BLOCK_DOH_443", K_BLOCK_DOH},
    {"OPENSANDBOX_EGRESS_DOH_BLOCKLIST", K_DOH_LIST},
    {"OPENSANDBOX_EGRESS_DNS_UPSTREAM", K_UPSTREAM},
    {"OPENSANDBOX_EGRESS_DNS_UPSTREAM_TIMEOUT", K_UPSTREAM_TIMEOUT},
    {"OPENSANDBOX_EGRESS_DNS_UPSTREAM_PROBE", K_PROBE},
    {"OPENSANDBOX_EGRESS_DNS_UPSTREAM_PROBE_INTERVAL_SEC", K_PROBE_INTERVAL},
    {"OPENSANDBOX_EGRESS_LOG_LEVEL", K_LOG_LEVEL},
    {"OPENSANDBOX_EGRESS_MITMPROXY_TRANSPARENT", K_TRANSPARENT},
    {"OPENSANDBOX_EGRESS_MITMPROXY_PORT", K_PROXY_PORT},
    {"OPENSANDBOX_EGRESS_MITMPROXY_UPSTREAM_TRUST_DIR", K_TRUST_DIR},
    {"OPENSANDBOX_EGRESS_MITMPROXY_SSL_INSECURE", K_SSL_INSECURE},
    {"OPENSANDBOX_EGRESS_UPSTREAM_PROXY", K_UPROXY},
    {"OPENSANDBOX_EGRESS_UPSTREAM_PROXY_AUTH", K_UPROXY_AUTH},
    {"EGRESSD_UPSTREAM_PROXY_AUTH_FILE", K_UPROXY_AUTH_FILE},
    {"EGRESSD_UPSTREAM_PROXY_CONNECT", K_UPROXY_CONNECT},
    {"EGRESSD_API_TOKEN_FILE", K_TOKEN_FILE},
    {"EGRESSD_API_SOCKET", K_API_SOCKET},
    {"EGRESSD_API_TLS_CERT", K_API_TLS_CERT},
    {"EGRESSD_API_TLS_KEY", K_API_TLS_KEY},
    {"EGRESSD_API_INSECURE_NO_TOKEN", K_INSECURE_NO_TOKEN},
    {"EGRESSD_API_LOOPBACK_UID", K_API_LOOPBACK_UID},
    {"EGRESSD_RULES_DIR", K_RULES_DIR},
    {"EGRESSD_LOG_FILE", K_LOG_FILE},
    {"EGRESSD_DNS_PORT", K_DNS_PORT},
    {"EGRESSD_MARK", K_MARK},
    {"EGRESSD_LEARNED_MAX", K_LEARNED_MAX},
    {"EGRESSD_TEARDOWN_ON_EXIT", K_TEARDOWN},
    {"EGRESSD_TEST_FAILPOINT", K_FAILPOINT},
    {"EGRESSD_PROTECTED_PORTS", K_PROTECTED_PORTS},
    {"EGRESSD_INBOUND_PORTS", K_INBOUND_PORTS},
    {"EGRESSD_INTERCEPT_PORTS", K_INTERCEPT_PORTS},
    {"EGRESSD_PROXY_CONNS_MAX", K_PROXY_CONNS_MAX},
    {"EGRESSD_PROXY_BUFFER_MAX", K_PROXY_BUFFER_MAX},
    {"EGRESSD_PROXY_HEAD_TIMEOUT", K_PROXY_HEAD_TIMEOUT},
    {"EGRESSD_STATE_DIR", K_STATE_DIR},
    {"EGRESSD_CA_KEY_FILE", K_CA_KEY},
    {"EGRESSD_CA_CERT_FILE", K_CA_CERT},
    {"EGRESSD_CA_BUNDLE", K_CA_BUNDLE},
    {"EGRESSD_POLICY_FILE_MAX", K_POLICY_FILE_MAX},
    {"EGRESSD_VAULT_COMPRESSED", K_VAULT_COMPRESSED},
    {"EGRESSD_PASSTHROUGH_JUDGE", K_PT_JUDGE},
    {"EGRESSD_KERNEL_JUDGE", K_KERNEL_JUDGE},
    {"EGRESSD_VAULT_REQUIRE_MLOCK", K_VAULT_REQUIRE_MLOCK},
};

int
config_from_env(struct config *c, char *const *envp, struct err *e)
{
	size_t i;

	for (; envp != NULL && *envp != NULL; envp++) {
		const char *kv = *envp, *eq = strchr(kv, '=');
		size_t nl;
		bool known = false;

		if (eq == NULL)
			continue;
		nl = (size_t)(eq - kv);
		switch (config_compat_env(c, kv, nl, eq + 1, e)) {
		case -1:
			return -1;
		case 1:
			continue;
		}
		for (i = 0; i < sizeof(config_envs) / sizeof(config_envs[0]);
		     i++) {
			const struct config_env *ce = &config_envs[i];
			if (strlen(ce->name) != nl ||
			    strncmp(ce->name, kv, nl) != 0)
				continue;
			known = true;
			if (config_set(c, ce->key, eq + 1, ce->name, e) == -1)
				return -1;
			/* a secret: copied, so gone from what
			 * /proc/PID/environ shows */
			if (ce->key == K_UPROXY_AUTH || ce->key == K_TOKEN)
				secmem_wipe(*envp + nl + 1, strlen(eq + 1));
		}
		/*
		 * A typo in our own namespace must not pass unnoticed, but
		 * tools around egressd use EGRESSD_* names too (EGRESSD_BIN):
		 * remember it for a start-up warning rather than fail.
		 */
		if (!known && nl > 8 && strncmp(kv, "EGRESSD_", 8) == 0 &&
		    c->unknown_env.n < CONFIG_LIST_MAX) {
			char **nv = realloc(c->unknown_env.v,
			    (c->unknown_env.n + 1) * sizeof(*nv));
			if (nv == NULL) {
				err_set(e, "out of memory");
				return -1;
			}
			c->unknown_env.v = nv;
			if ((nv[c->unknown_env.n] =
			            strndup(kv, nl > 64 ? 64 : nl)) == NULL) {
				err_set(e, "out of memory");
				return -1;
			}
			c->unknown_env.n++;
		}
	}
	return 0;
}

/*
 * The command line, one row a flag. F_KEY sets a config_key like its
 * environment variable does (wiped from argv when secret: the token must
 * not stay in /proc/PID/cmdline); F_TRUE sets a bool; F_LIST collects
 * every occurrence and replaces the key's whole list once, after the
 * loop (--dns-upstream); F_PORT adds one port per occurrence, the first
 * replacing the list the environment gave.
 */
enum config_flag_kind { F_KEY, F_TRUE, F_LIST, F_PORT };

struct config_flag {
	const char *name;
	enum config_flag_kind kind;
	enum config_key key; /* F_KEY, F_LIST */
	size_t off; /* F_TRUE: the bool; F_PORT: the port array */
	size_t off_n; /* F_PORT: its count */
	bool secret;
};

#define CF_KEY(n, k)                                                           \
	{                                                                      \
		n, F_KEY, k, 0, 0, false                                       \
	}
#define CF_TRUE(n, field)                                                      \
	{                                                                      \
		n, F_TRUE, 0, offsetof(struct config, field), 0, false         \
	}
#define CF_PORT(n, arr, cnt)                                                   \
	{                                                                      \
		n, F_PORT, 0, offsetof(struct config, arr),                    \
		    offsetof(struct config, cnt), false                        \
	}

static const struct config_flag config_flags[] = {
    CF_KEY("policy", K_POLICY_FILE),
    CF_TRUE("check", check),
    CF_KEY("mode", K_MODE),
    CF_KEY("rules-dir", K_RULES_DIR),
    CF_KEY("http-addr", K_HTTP_ADDR),
    CF_KEY("api-socket", K_API_SOCKET),
    CF_KEY("api-tls-cert", K_API_TLS_CERT),
    CF_KEY("api-tls-key", K_API_TLS_KEY),
    CF_KEY("api-token-file", K_TOKEN_FILE),
    {"api-token", F_KEY, K_TOKEN, 0, 0, true},
    CF_TRUE("api-insecure-no-token", api.insecure_no_token),
    CF_KEY("api-loopback-uid", K_API_LOOPBACK_UID),
    CF_KEY("max-rules", K_MAX_RULES),
    CF_KEY("policy-file-max", K_POLICY_FILE_MAX),
    {"dns-upstream", F_LIST, K_UPSTREAM, 0, 0, false},
    CF_KEY("dns-port", K_DNS_PORT),
    CF_KEY("dns-timeout", K_UPSTREAM_TIMEOUT),
    CF_KEY("mark", K_MARK),
    CF_KEY("learned-max", K_LEARNED_MAX),
    CF_TRUE("teardown-on-exit", teardown_on_exit),
    CF_KEY("sandbox-id", K_SANDBOX_ID),
    CF_KEY("log-level", K_LOG_LEVEL),
    CF_KEY("log-file", K_LOG_FILE),
    CF_PORT("protect-port", protected_ports, nprotected_ports),
    CF_PORT("inbound-port", inbound_ports, ninbound_ports),
    CF_TRUE("proxy", proxy_transparent),
    CF_KEY("proxy-port", K_PROXY_PORT),
    CF_KEY("proxy-conns-max", K_PROXY_CONNS_MAX),
    CF_KEY("proxy-buffer-max", K_PROXY_BUFFER_MAX),
    CF_KEY("proxy-head-timeout", K_PROXY_HEAD_TIMEOUT),
    CF_PORT("intercept-port", intercept_ports, nintercept_ports),
    CF_KEY("vault-compressed", K_VAULT_COMPRESSED),
    CF_KEY("passthrough-judge", K_PT_JUDGE),
    CF_KEY("kernel-judge", K_KERNEL_JUDGE),
    CF_KEY("upstream-proxy", K_UPROXY),
    CF_KEY("upstream-proxy-auth-file", K_UPROXY_AUTH_FILE),
    CF_KEY("upstream-proxy-connect", K_UPROXY_CONNECT),
    CF_TRUE("vault-require-mlock", vault_require_mlock),
    CF_KEY("state-dir", K_STATE_DIR),
    CF_KEY("ca-key", K_CA_KEY),
    CF_KEY("ca-cert", K_CA_CERT),
    CF_KEY("ca-bundle", K_CA_BUNDLE),
    CF_KEY("trust-dir", K_TRUST_DIR),
    CF_TRUE("ssl-insecure", ssl_insecure),
    CF_TRUE("version", version),
    CF_TRUE("help", help),
};

#define CONFIG_NFLAGS (sizeof(config_flags) / sizeof(config_flags[0]))
#define CONFIG_FLAG_VAL 256 /* getopt value of config_flags[0] */

/* Appends v to the comma-separated *list. */
static int
config_list_append(char **list, const char *v, const char *what, struct err *e)
{
	size_t ol = *list ? strlen(*list) : 0, al = strlen(v);
	char *n = realloc(*list, ol + al + 2);

	if (n == NULL) {
		err_set(e, "%s: out of memory", what);
		return -1;
	}
	*list = n;
	if (ol > 0)
		n[ol++] = ',';
	memcpy(n + ol, v, al + 1);
	return 0;
}

static int
config_flag_apply(struct config *c, const struct config_flag *f, char *v,
    bool *seen, char **list, struct err *e)
{
	char what[64];
	uint16_t p, *ports;
	size_t *n;

	(void)snprintf(what, sizeof(what), "--%s", f->name);
	switch (f->kind) {
	case F_KEY:
		if (config_set(c, f->key, v, what, e) == -1)
			return -1;
		if (f->secret)
			secmem_wipe(v, strlen(v));
		return 0;
	case F_TRUE:
		*(bool *)(void *)((char *)c + f->off) = true;
		return 0;
	case F_LIST:
		*seen = true;
		return config_list_append(list, v, what, e);
	case F_PORT:
		ports = (uint16_t *)(void *)((char *)c + f->off);
		n = (size_t *)(void *)((char *)c + f->off_n);
		if (config_set_port(&p, v, what, e) == -1)
			return -1;
		if (!*seen)
			*n = 0;
		*seen = true;
		if (*n == CONFIG_PORTS_MAX) {
			err_set(e, "%s: more than %d ports", what,
			    CONFIG_PORTS_MAX);
			return -1;
		}
		ports[(*n)++] = p;
		return 0;
	}
	return -1;
}

int
config_from_args(struct config *c, int argc, char *const *argv, struct err *e)
{
	struct option opts[CONFIG_NFLAGS + 1];
	bool seen[CONFIG_NFLAGS] = {false};
	char *lists[CONFIG_NFLAGS] = {NULL};
	size_t i;
	int ch, rc = -1;

	for (i = 0; i < CONFIG_NFLAGS; i++) {
		opts[i].name = config_flags[i].name;
		opts[i].has_arg = config_flags[i].kind == F_TRUE
		    ? no_argument
		    : required_argument;
		opts[i].flag = NULL;
		opts[i].val = CONFIG_FLAG_VAL + (int)i;
	}
	memset(&opts[CONFIG_NFLAGS], 0, sizeof(opts[0]));
	optind = 0; /* glibc: full reinitialization, tests call us often */
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
		if (ch == ':') {
			err_set(e, "%.64s: missing value", argv[optind - 1]);
			goto out;
		}
		if (ch < CONFIG_FLAG_VAL ||
		    ch >= CONFIG_FLAG_VAL + (int)CONFIG_NFLAGS) {
			err_set(e, "%.64s: unknown option (see --help)",
			    argv[optind - 1]);
			goto out;
		}
		i = (size_t)(ch - CONFIG_FLAG_VAL);
		if (config_flag_apply(c, &config_flags[i], optarg, &seen[i],
		        &lists[i], e) == -1)
			goto out;
	}
	if (optind < argc) {
		err_set(
		    e, "%.64s: unexpected argument (see --help)", argv[optind]);
		goto out;
	}
	/* A list flag given at all replaces the environment's list whole. */
	for (i = 0; i < CONFIG_NFLAGS; i++) {
		char what[64];

		if (config_flags[i].kind != F_LIST || !seen[i])
			continue;
		(void)snprintf(
		    what, sizeof(what), "--%s", config_flags[i].name);
		if (config_set(c, config_flags[i].key, lists[i], what, e) == -1)
			goto out;
	}
	rc = 0;
out:
	for (i = 0; i < CONFIG_NFLAGS; i++)
		free(lists[i]);
	return rc;
}

int
config_token_read(const char *path, char *buf, size_t cap, struct err *e)
{
	ssize_t n;

	/*
	 * Whoever can rewrite the token file can reconfigure egressd. Read
	 * through links (a Kubernetes Secret's files are links into its
	 * ..data directory): the target, and the directories holding the
	 * link and the target, pass the owner check instead.
	 */
	n = fileread_buf(path, buf, cap, FILEREAD_OWNED | FILEREAD_DIRS, e);
	if (n == -1 && errno == EFBIG) {
		err_set(e, "%s: token longer than %d bytes", path,
		    CONFIG_TOKEN_MAX);
		return -1;
	}
	if (n == -1) {
		err_prefix(e, "%s: token file", path);
		return -1;
	}
	if ((size_t)n > CONFIG_TOKEN_MAX) {
		secmem_wipe(buf, cap);
		err_set(e, "%s: token longer than %d bytes", path,
		    CONFIG_TOKEN_MAX);
		return -1;
	}
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		buf[--n] = '\0';
	if (n == 0 || memchr(buf, '\n', (size_t)n) != NULL) {
		secmem_wipe(buf, cap);
		err_set(e, "%s: token file must hold one non-empty line", path);
		return -1;
	}
	if (!config_token_ok(buf, (size_t)n)) {
		secmem_wipe(buf, cap);
		err_set(e, "%s: %s", path, CONFIG_TOKEN_BAD);
		return -1;
	}
	return (int)n;
}

/* Reads the token file: one line, trailing newline stripped. */
static int
config_read_token_file(struct config *c, struct err *e)
{
	char buf[CONFIG_TOKEN_MAX + 2];
	int rc;

	if (config_token_read(c->token_file, buf, sizeof(buf), e) < 0)
		return -1;
	rc = config_set_token(c, buf, "--api-token-file", e);
	secmem_wipe(buf, sizeof(buf));
	return rc;
}

int
config_finish(struct config *c, struct err *e)
{
	if (c->token_file != NULL && config_read_token_file(c, e) == -1)
		return -1;
	if (c->api.token != NULL) {
		size_t i, n = strlen(c->api.token);
		for (i = 0; i < n; i++) {
			unsigned char ch = (unsigned char)c->api.token[i];
			if (ch <= 0x20 || ch == 0x7f) {
				err_set(e,
				    "API token: must not contain "
				    "blanks or control characters");
				return -1;
			}
		}
	}
	if (c->ssl_insecure && !c->proxy_transparent) {
		/* Harmless, but say nothing: the proxy is off anyway. */
	}
	if (c->proxy_transparent && c->mode == CONFIG_MODE_DNS) {
		err_set(e,
		    "the transparent proxy needs mode dns+nft (the "
		    "redirect to it is an nftables rule)");
		return -1;
	}
	if ((c->api.tls_cert == NULL) != (c->api.tls_key == NULL)) {
		err_set(e, "--api-tls-cert and --api-tls-key go together");
		return -1;
	}
	if (config_uproxy_finish(&c->uproxy, c->proxy_transparent, e) == -1)
		return -1;
	if ((c->ca_key_file == NULL) != (c->ca_cert_file == NULL)) {
		err_set(e, "--ca-key and --ca-cert go together");
		return -1;
	}
	if (c->api_loopback_uid_set && config_api_uid_check(c, e) == -1)
		return -1;
	if (c->proxy_port == c->dns_port) {
		err_set(e, "proxy port and DNS port must differ (both %u)",
		    c->dns_port);
		return -1;
	}
	return config_compat_finish(c, e);
}
