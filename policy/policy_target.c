/*
 * Targets and names: normalization of DNS names, parsing of rule targets
 * (domain, "*." wildcard, IP address, CIDR), a rule's copy and release,
 * and the per-rule predicates (ports, request rule).
 *
 * Name rules (docs/policy.md "Normalization"): ASCII only (IDNs must be
 * written in punycode, "xn--..."), letters, digits, '-' and '_'; labels of
 * 1..63 bytes that neither start nor end with '-'; at most 253 bytes
 * without the trailing dot, which is dropped; upper case is folded to
 * lower case. '*' is only allowed as a whole leading label "*.".
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy_int.h"
#include "util/addr.h"
#include "util/grow.h"

#define LABEL_MAX 63

static bool
name_char_ok(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
	    c == '_';
}

static int
label_check(const char *l, size_t n, struct err *e)
{
	if (n == 0) {
		err_set(e, "empty label");
		return -1;
	}
	if (n > LABEL_MAX) {
		err_set(e, "label longer than %d bytes", LABEL_MAX);
		return -1;
	}
	if (l[0] == '-' || l[n - 1] == '-') {
		err_set(e, "label starts or ends with '-'");
		return -1;
	}
	return 0;
}

static int
name_bad_char(unsigned char c, struct err *e)
{
	if (c >= 0x80)
		err_set(e, "non-ASCII name: write it in punycode (xn--...)");
	else if (c == '*')
		err_set(e, "'*' is only allowed as a leading \"*.\"");
	else if (c < 0x20 || c == 0x7f)
		err_set(e, "control character in name");
	else
		err_set(e, "invalid character '%c' in name", c);
	return -1;
}

int
policy_name_norm(const char *in, size_t inlen, char *out, size_t outlen,
    bool allow_wild, struct err *e)
{
	size_t i, o = 0, lstart = 0;

	if (inlen > 0 && in[inlen - 1] == '.')
		inlen--;
	if (inlen == 0) {
		err_set(e, "empty name");
		return -1;
	}
	if (allow_wild && inlen >= 2 && in[0] == '*' && in[1] == '.') {
		if (outlen < 3)
			goto too_long;
		out[o++] = '*';
		out[o++] = '.';
		i = 2;
		lstart = 2;
	} else
		i = 0;
	if (inlen > POLICY_NAME_MAX + (i == 2 ? 2 : 0))
		goto too_long;
	for (; i < inlen; i++) {
		unsigned char c = (unsigned char)in[i];
		if (c >= 'A' && c <= 'Z')
			c = (unsigned char)(c - 'A' + 'a');
		if (c == '.') {
			if (label_check(out + lstart, o - lstart, e) == -1)
				return -1;
			lstart = o + 1;
		} else if (!name_char_ok(c))
			return name_bad_char(c, e);
		if (o + 1 >= outlen)
			goto too_long;
		out[o++] = (char)c;
	}
	if (label_check(out + lstart, o - lstart, e) == -1)
		return -1;
	out[o] = '\0';
	return 0;
too_long:
	err_set(e, "name longer than %d bytes", POLICY_NAME_MAX);
	return -1;
}

int
policy_name_normalize(const char *in, char *out, size_t outlen, struct err *e)
{
	if (in == NULL || out == NULL || outlen == 0) {
		err_set(e, "no name");
		return -1;
	}
	return policy_name_norm(in, strlen(in), out, outlen, true, e);
}

static int
prefix_to_text(
    const struct policy_prefix *p, bool cidr, char *out, size_t outlen)
{
	char buf[INET6_ADDRSTRLEN];

	if (inet_ntop(p->family == 4 ? AF_INET : AF_INET6, p->addr, buf,
	        sizeof(buf)) == NULL)
		return -1;
	int n = cidr ? snprintf(out, outlen, "%s/%u", buf, p->len)
	             : snprintf(out, outlen, "%s", buf);
	return n < 0 || (size_t)n >= outlen ? -1 : 0;
}

/* 1: parsed as an address or CIDR; 0: not one; -1: malformed CIDR. */
static int
target_addr(const char *in, struct policy_rule *r, struct err *e)
{
	const char *slash = strchr(in, '/');
	struct addr a;
	unsigned len;

	if (!addr_parse_ip(in, slash ? (size_t)(slash - in) : strlen(in), &a)) {
		if (slash != NULL) {
			err_set(e, "malformed CIDR \"%s\"", in);
			return -1;
		}
		return 0;
	}
	if (addr_parse_cidr(in, &a, &len, e) == -1) {
		err_set(e, "invalid prefix length in \"%s\"", in);
		return -1;
	}
	addr_mask(&a, len);
	memset(&r->prefix, 0, sizeof(r->prefix));
	r->prefix.family = a.family == AF_INET ? 4 : 6;
	r->prefix.len = (uint8_t)len;
	memcpy(r->prefix.addr, a.a, sizeof(r->prefix.addr));
	r->kind = slash != NULL ? POLICY_TARGET_CIDR : POLICY_TARGET_IP;
	return 1;
}

/* "1.2.3.256" is neither an address nor a host name: no numeric TLDs. */
static bool
last_label_numeric(const char *name)
{
	const char *l = strrchr(name, '.');

	l = l ? l + 1 : name;
	for (; *l != '\0'; l++)
		if (*l < '0' || *l > '9')
			return false;
	return true;
}

int
policy_target_parse(const char *in, struct policy_rule *r, struct err *e)
{
	char norm[POLICY_NAME_MAX + 8];
	int rc;

	if (in == NULL || *in == '\0') {
		err_set(e, "empty target");
		return -1;
	}
	if ((rc = target_addr(in, r, e)) == -1)
		return -1;
	if (rc == 1) {
		if (prefix_to_text(&r->prefix, r->kind == POLICY_TARGET_CIDR,
		        norm, sizeof(norm)) == -1) {
			err_set(e, "cannot format address");
			return -1;
		}
	} else {
		if (policy_name_norm(
		        in, strlen(in), norm, sizeof(norm), true, e) == -1) {
			err_prefix(e, "malformed target \"%.255s\"", in);
			return -1;
		}
		if (last_label_numeric(norm)) {
			err_set(e,
			    "malformed target \"%.255s\": not an IP "
			    "address and not a domain",
			    in);
			return -1;
		}
		memset(&r->prefix, 0, sizeof(r->prefix));
		r->kind = norm[0] == '*' ? POLICY_TARGET_WILDCARD
		                         : POLICY_TARGET_DOMAIN;
	}
	r->target = strdup(norm);
	r->display = strdup(in);
	if (r->target == NULL || r->display == NULL) {
		free(r->target);
		free(r->display);
		r->target = r->display = NULL;
		err_set(e, "out of memory");
		return -1;
	}
	return 0;
}

static void
strv_free(char **v, size_t n)
{
	size_t i;

	for (i = 0; v != NULL && i < n; i++)
		free(v[i]);
	free(v);
}

/* A copy of v[0..n) (NULL for n == 0); -1 when out of memory. */
static int
strv_copy(char ***dst, char *const *v, size_t n)
{
	size_t i;

	*dst = NULL;
	if (n == 0)
		return 0;
	if ((*dst = calloc(n, sizeof(**dst))) == NULL)
		return -1;
	for (i = 0; i < n; i++)
		if (((*dst)[i] = strdup(v[i])) == NULL) {
			strv_free(*dst, i);
			*dst = NULL;
			return -1;
		}
	return 0;
}

void
policy_rule_clear(struct policy_rule *r)
{
	if (r == NULL)
		return;
	free(r->target);
	free(r->display);
	free(r->ports);
	strv_free(r->methods, r->nmethods);
	strv_free(r->paths, r->npaths);
	memset(r, 0, sizeof(*r));
}

int
policy_rule_copy(struct policy_rule *dst, const struct policy_rule *src)
{
	int rm, rp;

	*dst = *src;
	dst->target = strdup(src->target);
	dst->display = strdup(src->display);
	dst->ports = NULL;
	if (src->nports > 0) {
		dst->ports = calloc(src->nports, sizeof(*dst->ports));
		if (dst->ports != NULL)
			memcpy(dst->ports, src->ports,
			    src->nports * sizeof(*dst->ports));
	}
	rm = strv_copy(&dst->methods, src->methods, src->nmethods);
	rp = strv_copy(&dst->paths, src->paths, src->npaths);
	if (rm == -1)
		dst->nmethods = 0;
	if (rp == -1)
		dst->npaths = 0;
	if (dst->target == NULL || dst->display == NULL ||
	    (src->nports > 0 && dst->ports == NULL) || rm == -1 || rp == -1) {
		policy_rule_clear(dst);
		return -1;
	}
	return 0;
}

int
policy_rvec_push(struct policy_rvec *rv, const struct policy_rule *r)
{
	if (grow_array(&rv->v, &rv->cap, rv->n + 1, sizeof(*rv->v), 16) == -1)
		return -1;
	rv->v[rv->n++] = *r;
	return 0;
}

void
policy_rules_free(struct policy_rule *rules, size_t n)
{
	size_t i;

	if (rules == NULL)
		return;
	for (i = 0; i < n; i++)
		policy_rule_clear(&rules[i]);
	free(rules);
}

bool
policy_rule_restricted(const struct policy_rule *r)
{
	return r->nports > 0 ||
	    (r->protocols & POLICY_PROTO_ALL) != POLICY_PROTO_ALL;
}

bool
policy_rule_is_request(const struct policy_rule *r)
{
	return r->nmethods > 0 || r->npaths > 0;
}

/*
 * proto 0 or port 0 mean "any": the query does not care, so a restriction
 * on that dimension does not exclude the rule.
 */
bool
policy_rule_port_ok(const struct policy_rule *r, unsigned proto, uint16_t port)
{
	size_t i;

	if (proto != 0 && (r->protocols & proto) == 0)
		return false;
	if (port == 0 || r->nports == 0 || proto == POLICY_PROTO_ICMP)
		return true;
	for (i = 0; i < r->nports; i++)
		if (port >= r->ports[i].lo && port <= r->ports[i].hi)
			return true;
	return false;
}
