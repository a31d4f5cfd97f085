/*
 * Fuzzes the binding matcher with path normalization: a policy of up to
 * eight bindings drawn from fixed pools of hosts (exact and wildcard) and
 * path patterns, with fuzz-chosen schemes and methods, loaded by the real
 * YAML loader; then one request (scheme, port, method, host, raw path)
 * through policy_path_normalize, policy_binding_match and vault_decide.
 * Every answer is compared with a naive model written here from the
 * contract (policy_binding.h), not from the matcher's code:
 *  - the policy loads exactly when no two bindings can tie by the naive
 *    overlap rule (schemes and methods intersect, some pair of hosts of the
 *    same kind meets, some pair of path patterns meets); a refusal names
 *    the overlap;
 *  - a loaded policy never answers AMBIGUOUS, and the naive model finds
 *    no tie on the request either;
 *  - ONE names the binding the naive model picks, NONE when it picks none;
 *  - INVALID only for a host outside the pool of valid names (then with a
 *    reason); a raw path that is not already normal is INVALID;
 *  - an accepted path equals a naive RFC 3986 §5.2.4 normalization (after
 *    decoding encoded unreserved bytes), starts with '/' and holds no "//",
 *    "/./" or "/../" and no trailing "/." or "/..";
 *  - vault_decide agrees: TRACE/TRACK to a bound host 403, a path that
 *    does not normalize 400 when bound (no norm_path), otherwise INJECTED
 *    exactly when the model picks a binding, with its name and the bearer
 *    line, and never AMBIGUOUS.
 */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "fuzz/fuzz_check.h"
#include "policy/policy.h"
#include "policy/policy_binding.h"
#include "policy/policy_path.h"
#include "vault/vault.h"

#define FZ_BINDINGS 8
#define FZ_YAML_MAX 8192
#define FZ_HOST_MAX 300

/* Binding hosts; every one is covered by an allow rule of the policy. */
static const char *const bhosts[] = {"api.example.com", "*.example.com",
    "*.api.example.com", "example.com", "a.b.example.com", "*.b.example.com",
    "test.org", "*.test.org"};
#define NBHOSTS (sizeof(bhosts) / sizeof(bhosts[0]))

/* Path patterns, all normalized: exact, or a prefix ending in a star. */
static const char *const bpaths[] = {"/*", "/v1/*", "/v1/chat", "/v1/chat/*",
    "/v1", "/admin", "/v1/", "/v1/models", "/a%20b*", "/v1/chat/x"};
#define NBPATHS (sizeof(bpaths) / sizeof(bpaths[0]))

/* Request hosts: valid names (some only after folding), and others. */
static const char *const rhosts_valid[] = {"api.example.com", "x.example.com",
    "x.api.example.com", "example.com", "a.b.example.com", "x.b.example.com",
    "test.org", "x.test.org", "API.Example.COM", "api.example.com.",
    "y.x.api.example.com", "evil.com", "api.example.com.evil.com",
    "xexample.com", "b.example.com", "x.y.test.org", "EXAMPLE.com."};
#define NRHOSTS_VALID (sizeof(rhosts_valid) / sizeof(rhosts_valid[0]))

static const char *const methods[] = {"GET", "HEAD", "POST", "PUT", "PATCH",
    "DELETE", "OPTIONS", "get", "TRACE", "track", "CONNECT", "GETX", "",
    "POST "};
#define NMETHODS (sizeof(methods) / sizeof(methods[0]))
/* The bit each binding method name stands for (index in methods[]). */
#define NBMETHODS 7

struct bspec {
	unsigned hosts; /* bits into bhosts */
	unsigned paths; /* bits into bpaths; 0: none named (bpaths[0]) */
	unsigned methods; /* bits 0..6; 0: none named (the default) */
	unsigned schemes; /* 1 https, 2 http; 0: none named (https) */
};

struct rd {
	const uint8_t *p;
	size_t n;
};

static unsigned
rd_byte(struct rd *r)
{
	unsigned c;

	if (r->n == 0)
		return 0;
	c = r->p[0];
	r->p++;
	r->n--;
	return c;
}

/* ---- the naive model ---- */

static unsigned
eff_methods(const struct bspec *b)
{
	return b->methods != 0 ? b->methods : 0x3du; /* GET POST PUT PATCH
	                                                DELETE */
}

static unsigned
eff_schemes(const struct bspec *b)
{
	return b->schemes != 0 ? b->schemes : 1u;
}

static bool
is_wild(const char *h)
{
	return h[0] == '*';
}

/* host lies strictly below suffix. */
static bool
below(const char *host, const char *suffix)
{
	size_t n = strlen(host), s = strlen(suffix);

	return n > s + 1 && host[n - s - 1] == '.' &&
	    memcmp(host + n - s, suffix, s) == 0;
}

static bool
hosts_meet(const char *a, const char *b)
{
	if (is_wild(a) != is_wild(b))
		return false;
	if (!is_wild(a))
		return strcmp(a, b) == 0;
	a += 2;
	b += 2;
	return strcmp(a, b) == 0 || below(a, b) || below(b, a);
}

static bool
starts(const char *s, const char *prefix, size_t n)
{
	return strlen(s) >= n && memcmp(s, prefix, n) == 0;
}

static bool
paths_meet(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	bool pa = a[la - 1] == '*', pb = b[lb - 1] == '*';

	if (!pa && !pb)
		return strcmp(a, b) == 0;
	if (pa && !pb)
		return starts(b, a, la - 1);
	if (!pa && pb)
		return starts(a, b, lb - 1);
	return starts(a, b, lb - 1) || starts(b, a, la - 1);
}

static bool
naive_overlap(const struct bspec *a, const struct bspec *b)
{
	unsigned pa = a->paths ? a->paths : 1u, pb = b->paths ? b->paths : 1u;
	bool hosts = false, paths = false;
	size_t i, j;

	if (!(eff_schemes(a) & eff_schemes(b)) ||
	    !(eff_methods(a) & eff_methods(b)))
		return false;
	for (i = 0; i < NBHOSTS; i++)
		for (j = 0; j < NBHOSTS; j++)
			if ((a->hosts >> i & 1) && (b->hosts >> j & 1) &&
			    hosts_meet(bhosts[i], bhosts[j]))
				hosts = true;
	for (i = 0; i < NBPATHS; i++)
		for (j = 0; j < NBPATHS; j++)
			if ((pa >> i & 1) && (pb >> j & 1) &&
			    paths_meet(bpaths[i], bpaths[j]))
				paths = true;
	return hosts && paths;
}

/* 0 none, 1 wildcard, 2 exact: how b matches the request. */
static int
naive_level(const struct bspec *b, unsigned scheme, unsigned port, int method,
    const char *host, const char *path)
{
	unsigned ps = b->paths ? b->paths : 1u;
	int best = 0;
	size_t i;

	if (!(eff_schemes(b) & scheme) ||
	    (port != 0 && port != (scheme == 1 ? 443u : 80u)))
		return 0;
	if (method < 0 || method >= NBMETHODS ||
	    !(eff_methods(b) >> method & 1))
		return 0;
	for (i = 0; i < NBPATHS; i++) {
		const char *p = bpaths[i];
		size_t l = strlen(p);

		if (!(ps >> i & 1))
			continue;
		if (p[l - 1] == '*' ? starts(path, p, l - 1)
		                    : strcmp(p, path) == 0)
			break;
	}
	if (i == NBPATHS)
		return 0;
	for (i = 0; i < NBHOSTS; i++) {
		const char *h = bhosts[i];

		if (!(b->hosts >> i & 1))
			continue;
		if (!is_wild(h) && strcmp(h, host) == 0)
			best = 2;
		else if (is_wild(h) && below(host, h + 2) && best < 1)
			best = 1;
	}
	return best;
}

static int
hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static bool
unreserved(int c)
{
	return isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

/*
 * The model's normalizer, only for inputs the real one accepted: decode
 * encoded unreserved bytes, upper-case the other escapes, then a stack of
 * segments. Returns the length written to out.
 */
static size_t
naive_normalize(const uint8_t *in, size_t n, char *out)
{
	static char dec[POLICY_REQ_PATH_MAX + 1];
	static size_t segs[POLICY_REQ_PATH_MAX], lens[POLICY_REQ_PATH_MAX];
	size_t i, d = 0, nseg = 0, o = 0, s;
	bool trail = false;

	for (i = 0; i < n; i++) {
		if (in[i] == '%') {
			int c = hexval(in[i + 1]) << 4 | hexval(in[i + 2]);

			if (unreserved(c))
				dec[d++] = (char)c;
			else {
				dec[d++] = '%';
				dec[d++] = (char)toupper(in[i + 1]);
				dec[d++] = (char)toupper(in[i + 2]);
			}
			i += 2;
		} else
			dec[d++] = (char)in[i];
	}
	/* dec[0] is '/'; segments are what lies between slashes. */
	for (i = 1; i <= d; i = s + 1) {
		size_t l;

		for (s = i; s < d && dec[s] != '/'; s++)
			;
		l = s - i;
		trail = false;
		if (l == 1 && dec[i] == '.')
			trail = true;
		else if (l == 2 && dec[i] == '.' && dec[i + 1] == '.') {
			if (nseg > 0)
				nseg--;
			trail = true;
		} else {
			segs[nseg] = i;
			lens[nseg++] = l;
		}
	}
	for (i = 0; i < nseg; i++) {
		out[o++] = '/';
		memcpy(out + o, dec + segs[i], lens[i]);
		o += lens[i];
	}
	if (o == 0 || trail)
		out[o++] = '/';
	out[o] = '\0';
	return o;
}

static void
check_norm_shape(const char *p, size_t n)
{
	check(n >= 1 && p[0] == '/' && strlen(p) == n);
	check(strstr(p, "//") == NULL);
	check(strstr(p, "/./") == NULL && strstr(p, "/../") == NULL);
	check(!(n >= 2 && strcmp(p + n - 2, "/.") == 0));
	check(!(n >= 3 && strcmp(p + n - 3, "/..") == 0));
}

/* ---- the policy ---- */

static size_t
yaml_list(char *y, size_t cap, size_t o, const char *key,
    const char *const *pool, size_t npool, unsigned bits)
{
	size_t i;
	bool first = true;

	o += (size_t)snprintf(y + o, cap - o, "%s: [", key);
	for (i = 0; i < npool; i++)
		if (bits >> i & 1) {
			o += (size_t)snprintf(y + o, cap - o, "%s'%s'",
			    first ? "" : ", ", pool[i]);
			first = false;
		}
	return o + (size_t)snprintf(y + o, cap - o, "]");
}

static size_t
policy_text(char *y, size_t cap, const struct bspec *bs, size_t nb)
{
	static const char *const schemes[] = {"https", "http"};
	size_t o, i;

	o = (size_t)snprintf(y, cap,
	    "defaultAction: deny\n"
	    "egress:\n"
	    "  - {action: allow, target: example.com}\n"
	    "  - {action: allow, target: '*.example.com'}\n"
	    "  - {action: allow, target: test.org}\n"
	    "  - {action: allow, target: '*.test.org'}\n"
	    "credentials:\n"
	    "  - {name: k, source: {type: inline, value: s3cr3t-K}}\n"
	    "bindings:\n");
	for (i = 0; i < nb; i++) {
		o += (size_t)snprintf(
		    y + o, cap - o, "  - name: b%zu\n    match: {", i);
		o = yaml_list(y, cap, o, "hosts", bhosts, NBHOSTS, bs[i].hosts);
		if (bs[i].paths) {
			o += (size_t)snprintf(y + o, cap - o, ", ");
			o = yaml_list(
			    y, cap, o, "paths", bpaths, NBPATHS, bs[i].paths);
		}
		if (bs[i].methods) {
			o += (size_t)snprintf(y + o, cap - o, ", ");
			o = yaml_list(y, cap, o, "methods", methods, NBMETHODS,
			    bs[i].methods);
		}
		if (bs[i].schemes) {
			o += (size_t)snprintf(y + o, cap - o, ", ");
			o = yaml_list(
			    y, cap, o, "schemes", schemes, 2, bs[i].schemes);
		}
		o += (size_t)snprintf(y + o, cap - o,
		    "}\n    auth: {type: bearer, credential: k}\n");
	}
	check(o < cap);
	return o;
}

/* ---- the request ---- */

struct req {
	unsigned scheme, port;
	int method; /* index into methods[] */
	char host[FZ_HOST_MAX + 1];
	bool host_valid; /* from rhosts_valid */
	char folded[FZ_HOST_MAX + 1]; /* the model's normalized host */
	const uint8_t *path;
	size_t path_len;
};

static void
read_request(struct rd *r, struct req *q)
{
	unsigned c = rd_byte(r), hs, i;
	static const unsigned ports[] = {0, 443, 80, 8443};

	q->scheme = c & 1 ? POLICY_SCHEME_HTTP : POLICY_SCHEME_HTTPS;
	q->port = ports[c >> 1 & 3];
	q->method = (int)(rd_byte(r) % NMETHODS);
	hs = rd_byte(r);
	if (hs < 0xf0) {
		snprintf(q->host, sizeof(q->host), "%s",
		    rhosts_valid[hs % NRHOSTS_VALID]);
		q->host_valid = true;
	} else {
		/* Raw host bytes, length-prefixed (no NUL: a C string). */
		size_t l = rd_byte(r) % 64;

		for (i = 0; i < l && r->n > 0; i++) {
			unsigned b = rd_byte(r);

			q->host[i] = (char)(b ? b : 'x');
		}
		q->host[i] = '\0';
		q->host_valid = false;
	}
	/* The model: fold, drop one trailing dot. */
	for (i = 0; q->host[i] != '\0'; i++)
		q->folded[i] = (char)tolower((unsigned char)q->host[i]);
	q->folded[i] = '\0';
	if (i > 0 && q->folded[i - 1] == '.')
		q->folded[i - 1] = '\0';
	q->path = r->p;
	q->path_len = r->n;
}

/* The model's pick: -1 none, -2 a tie, else the binding's index. */
static int
model_pick(
    const struct bspec *bs, size_t nb, const struct req *q, const char *path)
{
	int best = 0, pick = -1, l;
	size_t i, ties = 0;

	for (i = 0; i < nb; i++) {
		l = naive_level(
		    &bs[i], q->scheme, q->port, q->method, q->folded, path);
		if (l == 0 || l < best)
			continue;
		if (l > best) {
			best = l;
			pick = (int)i;
			ties = 1;
		} else
			ties++;
	}
	return ties > 1 ? -2 : pick;
}

/*
 * vault_decide on the raw request. pick: the binding the matcher and the
 * model agreed on for the normalized path (-1 none; -3 the host was not
 * judgeable).
 */
static void
check_decide(struct policy *p, const struct bspec *bs, size_t nb,
    const struct req *q, bool norm_ok, const char *norm, size_t norm_len,
    int pick)
{
	static const char bearer[] = "Authorization: Bearer s3cr3t-K\r\n";
	struct vault_inject out;
	struct vault_req vr;
	struct vault *v;
	struct err e = {""};
	const char *m = methods[q->method];
	bool bound = false, echo;
	unsigned port;
	size_t i;

	if ((v = vault_new(p, NULL, &e)) == NULL) {
		fprintf(stderr, "vault_new: %s\n", e.msg);
		check(v != NULL);
	}
	vr.scheme = q->scheme;
	vr.host = q->host;
	vr.port = (uint16_t)q->port;
	vr.method = m;
	vr.method_len = strlen(m);
	vr.path = (const char *)q->path;
	vr.path_len = q->path_len;
	vr.query = NULL;
	vr.query_len = 0;
	check(vault_decide(v, &vr, &out, &e) == 0);
	check(out.reason != NULL);
	check(out.decision != VAULT_AMBIGUOUS);
	/* proxy-authorization is always removed. */
	for (i = 0; i < out.nremove; i++)
		if (strcmp(out.remove[i], "proxy-authorization") == 0)
			break;
	check(i < out.nremove);
	port = q->port ? q->port : q->scheme == POLICY_SCHEME_HTTPS ? 443 : 80;
	/* Bound by the model: some binding of the port's scheme names the
	 * host (a raw host: whatever the vault says, the rest must agree). */
	for (i = 0; i < nb && q->host_valid; i++) {
		unsigned sch = port == 443 ? 1u : port == 80 ? 2u : 0u;
		size_t k;

		if (!(eff_schemes(&bs[i]) & sch))
			continue;
		for (k = 0; k < NBHOSTS; k++) {
			const char *h = bhosts[k];

			if ((bs[i].hosts >> k & 1) &&
			    (is_wild(h) ? below(q->folded, h + 2)
			                : strcmp(q->folded, h) == 0))
				bound = true;
		}
	}
	if (q->host_valid)
		check(bound == vault_host_bound(v, q->host, (uint16_t)port));
	else
		bound = vault_host_bound(v, q->host, (uint16_t)port);
	echo = strcasecmp(m, "TRACE") == 0 || strcasecmp(m, "TRACK") == 0;
	if (bound && echo) {
		check(out.decision == VAULT_REFUSED && out.status == 403);
		goto out;
	}
	if (!norm_ok) {
		check(out.norm_path == NULL);
		check(out.decision == (bound ? VAULT_REFUSED : VAULT_NO_MATCH));
		if (bound)
			check(out.status == 400);
		goto out;
	}
	check(out.norm_path != NULL && out.norm_path_len == norm_len &&
	    memcmp(out.norm_path, norm, norm_len + 1) == 0);
	if (pick < 0) {
		check(out.decision == VAULT_NO_MATCH);
	} else {
		char name[16];

		snprintf(name, sizeof(name), "b%d", pick);
		check(out.decision == VAULT_INJECTED);
		check(out.binding != NULL && strcmp(out.binding, name) == 0);
		check(out.lines != NULL && out.lines_len == strlen(bearer) &&
		    memcmp(out.lines, bearer, out.lines_len) == 0);
	}
	if (out.decision == VAULT_INJECTED)
		check(out.status == 0 && out.lines != NULL);
	else
		check(out.lines == NULL);
out:
	vault_inject_clear(v, &out);
	vault_free(v);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char yaml[FZ_YAML_MAX];
	static char norm[POLICY_REQ_PATH_MAX + 1],
	    model[POLICY_REQ_PATH_MAX + 1];
	struct rd r = {data, size};
	struct bspec bs[FZ_BINDINGS];
	struct policy_diag d;
	struct policy *p;
	struct req q;
	struct policy_request prq;
	const struct policy_binding *out = NULL;
	struct err e = {""};
	enum policy_bind_result res;
	unsigned mask = rd_byte(&r);
	size_t nb = 0, i, j, ylen, norm_len = 0;
	bool overlap = false, norm_ok;
	int pick;

	for (i = 0; i < FZ_BINDINGS; i++) {
		if (!(mask >> i & 1))
			continue;
		bs[nb].hosts = rd_byte(&r);
		if (bs[nb].hosts == 0)
			bs[nb].hosts = 1u << i;
		bs[nb].paths =
		    (rd_byte(&r) | rd_byte(&r) << 8) & ((1u << NBPATHS) - 1);
		bs[nb].methods = rd_byte(&r) & 0x7f;
		bs[nb].schemes = rd_byte(&r) & 3;
		nb++;
	}
	read_request(&r, &q);
	if (q.path_len > POLICY_REQ_PATH_MAX)
		return 0;
	for (i = 0; i < nb; i++)
		for (j = 0; j < i; j++)
			overlap = overlap || naive_overlap(&bs[i], &bs[j]);

	ylen = policy_text(yaml, sizeof(yaml), bs, nb);
	policy_diag_init(&d);
	p = policy_parse_yaml(yaml, ylen, "fuzz", &d);
	if (p == NULL) {
		/* Refused: only for an overlap, and saying so. */
		if (!overlap || d.n == 0)
			fprintf(stderr, "refused:\n%s\n%s\n", yaml,
			    d.n ? d.msgs[0] : "(no diagnostic)");
		check(overlap && d.n > 0);
		for (i = 0; i < d.n; i++)
			check(strstr(d.msgs[i], "can match the same request") !=
			    NULL);
		policy_diag_clear(&d);
		return 0;
	}
	policy_diag_clear(&d);
	if (overlap)
		fprintf(stderr, "loaded with an overlap:\n%s\n", yaml);
	check(!overlap);

	/* The path: the real normalizer against the model's. */
	norm_ok = policy_path_normalize((const char *)q.path, q.path_len, norm,
	              sizeof(norm), &norm_len, &e) == 0;
	if (norm_ok) {
		size_t ml = naive_normalize(q.path, q.path_len, model);

		check_norm_shape(norm, norm_len);
		if (ml != norm_len || memcmp(model, norm, ml) != 0)
			fprintf(stderr, "normalized \"%s\", model \"%s\"\n",
			    norm, model);
		check(ml == norm_len && memcmp(model, norm, ml) == 0);
	} else
		check(e.msg[0] != '\0');

	prq.scheme = q.scheme;
	prq.host = q.host;
	prq.port = (uint16_t)q.port;
	prq.method = methods[q.method];
	/* The raw path (as a C string) is judgeable only when normal. */
	if (q.path_len > 0 && memchr(q.path, '\0', q.path_len) == NULL) {
		static char raw[POLICY_REQ_PATH_MAX + 1];

		memcpy(raw, q.path, q.path_len);
		raw[q.path_len] = '\0';
		prq.path = raw;
		res = policy_binding_match(p, &prq, &out, &e);
		check(res != POLICY_BIND_AMBIGUOUS);
		if (!norm_ok || strcmp(raw, norm) != 0)
			check(res == POLICY_BIND_INVALID);
	}
	pick = -3;
	if (norm_ok) {
		e.msg[0] = '\0';
		prq.path = norm;
		res = policy_binding_match(p, &prq, &out, &e);
		check(res != POLICY_BIND_AMBIGUOUS);
		if (res == POLICY_BIND_INVALID) {
			/* Only a raw host may be unjudgeable. */
			check(e.msg[0] != '\0' && !q.host_valid);
			check(out == NULL);
		} else {
			/* The name was accepted: the model's folding is the
			 * matcher's, so the model decides. */
			pick = model_pick(bs, nb, &q, norm);
			check(pick != -2);
			if (pick == -1)
				check(res == POLICY_BIND_NONE && out == NULL);
			else {
				char name[16];

				snprintf(name, sizeof(name), "b%d", pick);
				check(res == POLICY_BIND_ONE && out != NULL);
				check(strcmp(policy_binding_name(out), name) ==
				    0);
			}
		}
	}
	check_decide(p, bs, nb, &q, norm_ok, norm, norm_len, pick);
	policy_unref(p);
	return 0;
}
