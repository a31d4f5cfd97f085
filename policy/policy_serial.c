/*
 * policy_serial: the user policy as GET /policy returns it (JSON), and the
 * canonical YAML of a whole snapshot (docs/policy.md). The YAML is
 * block style, keys in schema order, every string double-quoted; it
 * parses back to the same model (secret values excepted: an inline
 * credential is written with the value "[REDACTED]").
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy_binding_int.h"
#include "policy/policy_int.h"
#include "policy/policy_ybuf.h"
#include "util/secmem.h"
#include "util/utf8.h"

static const char *
action_name(enum policy_action a)
{
	return a == POLICY_ALLOW ? "allow" : "deny";
}

static json_t *
ports_json(const struct policy_rule *r)
{
	json_t *a = json_array();
	char buf[16];
	size_t i;

	for (i = 0; a != NULL && i < r->nports; i++) {
		const struct policy_port_range *pr = &r->ports[i];
		json_t *v;
		if (pr->lo == pr->hi)
			v = json_integer(pr->lo);
		else {
			(void)snprintf(
			    buf, sizeof(buf), "%u-%u", pr->lo, pr->hi);
			v = json_string(buf);
		}
		if (json_array_append_new(a, v) == -1) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

static json_t *
protocols_json(unsigned protos)
{
	static const struct {
		unsigned bit;
		const char *name;
	} names[] = {{POLICY_PROTO_TCP, "tcp"}, {POLICY_PROTO_UDP, "udp"},
	    {POLICY_PROTO_ICMP, "icmp"}};
	json_t *a = json_array();
	size_t i;

	for (i = 0; a != NULL && i < 3; i++)
		if ((protos & names[i].bit) &&
		    json_array_append_new(a, json_string(names[i].name)) ==
		        -1) {
			json_decref(a);
			return NULL;
		}
	return a;
}

/* Methods and paths, as stored (paths are in normal form already). */
static json_t *
strs_json(char *const *v, size_t n)
{
	json_t *a = json_array();
	size_t i;

	for (i = 0; a != NULL && i < n; i++)
		if (json_array_append_new(a, json_string(v[i])) == -1) {
			json_decref(a);
			return NULL;
		}
	return a;
}

static json_t *
rule_json(const struct policy_rule *r)
{
	json_t *o = json_object();

	if (o == NULL ||
	    json_object_set_new(
	        o, "action", json_string(action_name(r->action))) == -1 ||
	    json_object_set_new(o, "target", json_string(r->display)) == -1)
		goto out_free;
	if (r->nports > 0 &&
	    json_object_set_new(o, "ports", ports_json(r)) == -1)
		goto out_free;
	if ((r->protocols & POLICY_PROTO_ALL) != POLICY_PROTO_ALL &&
	    json_object_set_new(o, "protocols", protocols_json(r->protocols)) ==
	        -1)
		goto out_free;
	if (r->nmethods > 0 &&
	    json_object_set_new(
	        o, "methods", strs_json(r->methods, r->nmethods)) == -1)
		goto out_free;
	if (r->npaths > 0 &&
	    json_object_set_new(o, "paths", strs_json(r->paths, r->npaths)) ==
	        -1)
		goto out_free;
	return o;
out_free:
	json_decref(o);
	return NULL;
}

char *
policy_user_to_json(const struct policy *p)
{
	json_t *o = json_object(), *eg = json_array();
	char *s = NULL;
	size_t i;

	if (o == NULL || eg == NULL || p == NULL)
		goto out_free;
	if (json_object_set_new(o, "defaultAction",
	        json_string(action_name(p->default_action))) == -1)
		goto out_free;
	for (i = 0; i < p->nrules; i++)
		if (json_array_append_new(eg, rule_json(&p->rules[i])) == -1)
			goto out_free;
	if (json_object_set_new(o, "egress", eg) == -1) {
		eg = NULL;
		goto out_free;
	}
	eg = NULL;
	s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
out_free:
	json_decref(eg);
	json_decref(o);
	return s;
}

/* ---- canonical YAML ---- */

static void
yaml_strs(struct ybuf *b, const char *key, char *const *v, size_t n)
{
	size_t i;

	if (n == 0)
		return;
	policy_ybuf_printf(b, "    %s: [", key);
	for (i = 0; i < n; i++) {
		policy_ybuf_printf(b, "%s", i ? ", " : "");
		policy_ybuf_quoted(b, v[i]);
	}
	policy_ybuf_printf(b, "]\n");
}

static void
yaml_rule(struct ybuf *b, const struct policy_rule *r, bool with_action)
{
	size_t i;

	policy_ybuf_printf(b, "  - target: ");
	policy_ybuf_quoted(b, r->display);
	policy_ybuf_printf(b, "\n");
	if (with_action)
		policy_ybuf_printf(
		    b, "    action: \"%s\"\n", action_name(r->action));
	if (r->nports > 0) {
		policy_ybuf_printf(b, "    ports: [");
		for (i = 0; i < r->nports; i++) {
			const struct policy_port_range *pr = &r->ports[i];
			if (pr->lo == pr->hi)
				policy_ybuf_printf(
				    b, "%s%u", i ? ", " : "", pr->lo);
			else
				policy_ybuf_printf(b, "%s\"%u-%u\"",
				    i ? ", " : "", pr->lo, pr->hi);
		}
		policy_ybuf_printf(b, "]\n");
	}
	if ((r->protocols & POLICY_PROTO_ALL) != POLICY_PROTO_ALL) {
		static const char *const names[] = {"tcp", "udp", "icmp"};
		const char *sep = "";
		policy_ybuf_printf(b, "    protocols: [");
		for (i = 0; i < 3; i++)
			if (r->protocols & (1u << i)) {
				policy_ybuf_printf(
				    b, "%s\"%s\"", sep, names[i]);
				sep = ", ";
			}
		policy_ybuf_printf(b, "]\n");
	}
	yaml_strs(b, "methods", r->methods, r->nmethods);
	yaml_strs(b, "paths", r->paths, r->npaths);
}

static void
yaml_rules(struct ybuf *b, const char *key, const struct policy_rule *r,
    size_t n, bool with_action)
{
	size_t i;

	if (n == 0)
		return;
	policy_ybuf_printf(b, "%s:\n", key);
	for (i = 0; i < n; i++)
		yaml_rule(b, &r[i], with_action);
}

static void
yaml_dns(struct ybuf *b, const struct policy_dns *d)
{
	size_t i;

	policy_ybuf_printf(b, "dns:\n");
	if (d->nupstreams > 0) {
		policy_ybuf_printf(b, "  upstreams:\n");
		for (i = 0; i < d->nupstreams; i++) {
			policy_ybuf_printf(b, "    - ");
			policy_ybuf_quoted(b, d->upstreams[i]);
			policy_ybuf_printf(b, "\n");
		}
	}
	policy_ybuf_printf(b,
	    "  timeoutMs: %u\n  ttlMin: %u\n  ttlMax: %u\n"
	    "  negativeTtl: %u\n  privateAnswers: \"%s\"\n  cname: \"%s\"\n",
	    d->timeout_ms, (unsigned)d->ttl_min, (unsigned)d->ttl_max,
	    (unsigned)d->negative_ttl,
	    d->private_answers == POLICY_PRIVATE_ALLOW ? "allow" : "drop",
	    d->cname_mode == POLICY_CNAME_ALLOW_CHAINS ? "allow-chains"
	                                               : "strict");
}

static void
yaml_proxy(struct ybuf *b, const struct policy_proxy *px)
{
	size_t i;

	if (px->nintercept_ports == 0)
		return;
	policy_ybuf_printf(b, "proxy:\n  interceptPorts: [");
	for (i = 0; i < px->nintercept_ports; i++)
		policy_ybuf_printf(
		    b, "%s%u", i ? ", " : "", px->intercept_ports[i]);
	policy_ybuf_printf(b, "]\n");
}

/* Nothing but defaults outside the user policy: "{}" says it all. */
static bool
only_defaults(const struct policy *p, const struct policy_overlays *ov)
{
	struct policy_dns def;

	policy_config_dns_defaults(&def);
	return ov->ndeny_file + ov->nallow_file + ov->nlog_skip_file +
	        p->ninfra + p->ncredentials + p->nbindings + p->dns.nupstreams +
	        p->proxy.nintercept_ports ==
	    0 &&
	    p->dns.timeout_ms == def.timeout_ms &&
	    p->dns.ttl_min == def.ttl_min && p->dns.ttl_max == def.ttl_max &&
	    p->dns.negative_ttl == def.negative_ttl &&
	    p->dns.private_answers == def.private_answers &&
	    p->dns.cname_mode == def.cname_mode;
}

char *
policy_to_yaml(const struct policy *p)
{
	struct ybuf b = {0};
	const struct policy_overlays *ov;

	if (p == NULL)
		return NULL;
	ov = p->index->ov;
	policy_ybuf_printf(&b, "# egressd policy, canonical form\n");
	if (p->user_empty && only_defaults(p, ov)) {
		policy_ybuf_printf(&b, "{}\n");
		return b.oom ? (free(b.s), NULL) : b.s;
	}
	policy_ybuf_printf(
	    &b, "defaultAction: \"%s\"\n", action_name(p->default_action));
	yaml_rules(&b, "egress", p->rules, p->nrules, true);
	/* Only the overlay rules of the policy file itself: the always-rules
	 * directory's part is re-read from the directory, and writing it
	 * here would duplicate it on every persist and reload. */
	yaml_rules(&b, "alwaysDeny", p->always_deny, ov->ndeny_file, false);
	yaml_rules(&b, "alwaysAllow", p->always_allow, ov->nallow_file, false);
	yaml_rules(&b, "infra", p->infra, p->ninfra, false);
	yaml_rules(&b, "logSkip", p->log_skip, ov->nlog_skip_file, false);
	yaml_dns(&b, &p->dns);
	yaml_proxy(&b, &p->proxy);
	policy_cred_yaml(&b, p);
	if (b.oom) {
		policy_ybuf_free(&b);
		return NULL;
	}
	return b.s;
}

void
policy_yaml_free(char *yaml)
{
	if (yaml != NULL)
		secmem_wipe(yaml, strlen(yaml));
	free(yaml);
}
