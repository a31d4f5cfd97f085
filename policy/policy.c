/*
 * policy: snapshot lifetimes, diagnostics, assembly and the matchers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy_int.h"
#include "policy/policy_parts.h"
#include "util/coalesce.h"
#include "util/refcnt.h"

/* ---- diagnostics ---- */

void
policy_diag_init(struct policy_diag *d)
{
	memset(d, 0, sizeof(*d));
}

void
policy_diag_clear(struct policy_diag *d)
{
	size_t i;

	if (d == NULL)
		return;
	for (i = 0; i < d->n; i++)
		free(d->msgs[i]);
	free(d->msgs);
	policy_diag_init(d);
}

void
policy_diag_vadd(struct policy_diag *d, const char *name, unsigned line,
    unsigned col, const char *fmt, va_list ap)
{
	char msg[ERR_MSG_MAX], full[ERR_MSG_MAX];
	char **nm;
	int n;

	if (d == NULL)
		return;
	if (d->n >= POLICY_DIAG_MAX) {
		d->truncated = true;
		return;
	}
	(void)vsnprintf(msg, sizeof(msg), fmt, ap);
	/* A cut message is still a message: truncation is accepted. */
	if (line > 0)
		n = snprintf(
		    full, sizeof(full), "%s:%u:%u: %s", name, line, col, msg);
	else
		n = snprintf(full, sizeof(full), "%s: %s", name, msg);
	if (n < 0)
		return;
	if ((nm = realloc(d->msgs, (d->n + 1) * sizeof(*nm))) == NULL) {
		d->truncated = true;
		return;
	}
	d->msgs = nm;
	if ((d->msgs[d->n] = strdup(full)) == NULL) {
		d->truncated = true;
		return;
	}
	d->n++;
}

void
policy_diag_add(struct policy_diag *d, const char *name, unsigned line,
    unsigned col, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	policy_diag_vadd(d, name, line, col, fmt, ap);
	va_end(ap);
}

void
policy_diag_to_err(const struct policy_diag *d, struct err *e)
{
	size_t i, o = 0;
	char buf[ERR_MSG_MAX];

	buf[0] = '\0';
	for (i = 0; d != NULL && i < d->n; i++) {
		int n = snprintf(buf + o, sizeof(buf) - o, "%s%s",
		    i ? "; " : "", d->msgs[i]);
		if (n < 0 || (size_t)n >= sizeof(buf) - o)
			break;
		o += (size_t)n;
	}
	if (d != NULL && d->truncated && o + 6 < sizeof(buf))
		(void)snprintf(buf + o, sizeof(buf) - o, "; ...");
	if (buf[0] == '\0')
		(void)snprintf(buf, sizeof(buf), "invalid policy");
	err_set(e, "%s", buf);
}

/* ---- shared operator configuration ---- */

const char *
policy_files_intern(char **files, size_t *nfiles, const char *name)
{
	size_t i;

	if (name == NULL)
		return NULL;
	for (i = 0; i < *nfiles; i++)
		if (strcmp(files[i], name) == 0)
			return files[i];
	if (*nfiles == POLICY_FILES_MAX)
		return NULL;
	if ((files[*nfiles] = strdup(name)) == NULL)
		return NULL;
	return files[(*nfiles)++];
}

static void
files_free(char **files, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(files[i]);
}

struct policy_overlays *
policy_overlays_new(void)
{
	struct policy_overlays *o = calloc(1, sizeof(*o));

	if (o == NULL)
		return NULL;
	o->refs = 1;
	if (policy_overlays_index(o) == -1) {
		policy_overlays_unref(o);
		return NULL;
	}
	return o;
}

static void
intern_rules(struct policy_overlays *o, struct policy_rule *r, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		r[i].loc.file =
		    policy_files_intern(o->files, &o->nfiles, r[i].loc.file);
}

int
policy_overlays_index(struct policy_overlays *o)
{
	intern_rules(o, o->deny, o->ndeny);
	intern_rules(o, o->allow, o->nallow);
	intern_rules(o, o->log_skip, o->nlog_skip);
	policy_layer_free(o->ldeny);
	policy_layer_free(o->lallow);
	policy_layer_free(o->llog_skip);
	o->ldeny = policy_layer_build(o->deny, o->ndeny);
	o->lallow = policy_layer_build(o->allow, o->nallow);
	o->llog_skip = policy_layer_build(o->log_skip, o->nlog_skip);
	return o->ldeny == NULL || o->lallow == NULL || o->llog_skip == NULL
	    ? -1
	    : 0;
}

void
policy_overlays_unref(struct policy_overlays *o)
{
	if (o == NULL || !refcnt_dec(&o->refs))
		return;
	policy_layer_free(o->ldeny);
	policy_layer_free(o->lallow);
	policy_layer_free(o->llog_skip);
	policy_rules_free(o->deny, o->ndeny);
	policy_rules_free(o->allow, o->nallow);
	policy_rules_free(o->log_skip, o->nlog_skip);
	files_free(o->files, o->nfiles);
	free(o);
}

void
policy_config_dns_defaults(struct policy_dns *dns)
{
	memset(dns, 0, sizeof(*dns));
	dns->timeout_ms = POLICY_DNS_TIMEOUT_MS_DEFAULT;
	dns->ttl_min = POLICY_DNS_TTL_MIN_DEFAULT;
	dns->ttl_max = POLICY_DNS_TTL_MAX_DEFAULT;
	dns->negative_ttl = POLICY_DNS_NEGATIVE_TTL_DEFAULT;
	dns->private_answers = POLICY_PRIVATE_DROP;
	dns->cname_mode = POLICY_CNAME_STRICT;
}

struct policy_config *
policy_config_new(void)
{
	struct policy_config *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return NULL;
	c->refs = 1;
	policy_config_dns_defaults(&c->dns);
	if ((c->linfra = policy_layer_build(NULL, 0)) == NULL) {
		free(c);
		return NULL;
	}
	return c;
}

void
policy_config_unref(struct policy_config *c)
{
	size_t i;

	if (c == NULL || !refcnt_dec(&c->refs))
		return;
	policy_layer_free(c->linfra);
	policy_rules_free(c->infra, c->ninfra);
	for (i = 0; i < c->dns.nupstreams; i++)
		free(c->dns.upstreams[i]);
	free(c->dns.upstreams);
	free(c->proxy.intercept_ports);
	for (i = 0; i < c->ncredentials; i++)
		policy_credential_free(c->credentials[i]);
	free(c->credentials);
	for (i = 0; i < c->nbindings; i++)
		policy_binding_free(c->bindings[i]);
	free(c->bindings);
	free(c->cred_rev);
	free(c->bind_rev);
	files_free(c->files, c->nfiles);
	free(c);
}

/* ---- snapshots ---- */

static void
index_free(struct policy_index *ix)
{
	if (ix == NULL)
		return;
	policy_layer_free(ix->user);
	policy_layer_free(ix->user_all);
	policy_overlays_unref(ix->ov);
	policy_config_unref(ix->cfg);
	policy_config_unref(ix->vault);
	free(ix->all_creds);
	free(ix->all_binds);
	files_free(ix->files, ix->nfiles);
	free(ix);
}

/* Operator's items first, then the vault's (the order the load-time
 * check reports overlaps in). */
static int
index_join_vault(struct policy_index *ix)
{
	const struct policy_config *c = ix->cfg, *v = ix->vault;

	ix->all_creds =
	    calloc(c->ncredentials + v->ncredentials + 1, sizeof(void *));
	ix->all_binds = calloc(c->nbindings + v->nbindings + 1, sizeof(void *));
	if (ix->all_creds == NULL || ix->all_binds == NULL)
		return -1;
	if (c->ncredentials > 0)
		memcpy(ix->all_creds, c->credentials,
		    c->ncredentials * sizeof(void *));
	if (v->ncredentials > 0)
		memcpy(ix->all_creds + c->ncredentials, v->credentials,
		    v->ncredentials * sizeof(void *));
	if (c->nbindings > 0)
		memcpy(
		    ix->all_binds, c->bindings, c->nbindings * sizeof(void *));
	if (v->nbindings > 0)
		memcpy(ix->all_binds + c->nbindings, v->bindings,
		    v->nbindings * sizeof(void *));
	return 0;
}

/* Counts the request rules; builds the full view when a deny request
 * rule makes it differ from the host-level one. */
static int
index_requests(struct policy_index *ix, const struct policy_rule *r, size_t n)
{
	size_t i, ndeny = 0;

	for (i = 0; i < n; i++)
		if (policy_rule_is_request(&r[i])) {
			ix->nrequest++;
			ndeny += r[i].action == POLICY_DENY;
		}
	if (ndeny == 0)
		return 0;
	ix->user_all = policy_layer_build_all(r, n);
	return ix->user_all == NULL ? -1 : 0;
}

struct policy_rule *
policy_rules_dup(const struct policy *p)
{
	struct policy_rule *v = calloc(p->nrules + 1, sizeof(*v));
	size_t i;

	if (v == NULL)
		return NULL;
	for (i = 0; i < p->nrules; i++)
		if (policy_rule_copy(&v[i], &p->rules[i]) == -1) {
			policy_rules_free(v, i);
			return NULL;
		}
	return v;
}

struct policy *
policy_assemble(enum policy_action def, bool user_empty,
    struct policy_rule *rules, size_t nrules, struct policy_overlays *ov,
    struct policy_config *cfg, struct policy_config *vault, const char *source,
    uint64_t revision)
{
	struct policy *p = calloc(1, sizeof(*p));
	struct policy_index *ix = calloc(1, sizeof(*ix));
	size_t i;

	if (ov == NULL)
		ov = policy_overlays_new();
	if (cfg == NULL)
		cfg = policy_config_new();
	if (p == NULL || ix == NULL || ov == NULL || cfg == NULL)
		goto out_free;
	ix->ov = ov;
	ix->cfg = cfg;
	ix->vault = vault;
	vault = NULL;
	p->index = ix;
	p->rules = rules;
	p->nrules = nrules;
	rules = NULL;
	for (i = 0; i < p->nrules; i++)
		p->rules[i].loc.file = policy_files_intern(
		    ix->files, &ix->nfiles, p->rules[i].loc.file);
	if ((ix->user = policy_layer_build(p->rules, p->nrules)) == NULL ||
	    index_requests(ix, p->rules, p->nrules) == -1)
		goto out_policy;
	if ((p->source = strdup(source ? source : "")) == NULL)
		goto out_policy;
	p->refs = 1;
	p->revision = revision;
	p->default_action = def;
	p->user_empty = user_empty;
	p->always_deny = ov->deny;
	p->nalways_deny = ov->ndeny;
	p->always_allow = ov->allow;
	p->nalways_allow = ov->nallow;
	p->log_skip = ov->log_skip;
	p->nlog_skip = ov->nlog_skip;
	p->infra = cfg->infra;
	p->ninfra = cfg->ninfra;
	p->dns = cfg->dns;
	p->proxy = cfg->proxy;
	p->credentials = cfg->credentials;
	p->ncredentials = cfg->ncredentials;
	p->bindings = cfg->bindings;
	p->nbindings = cfg->nbindings;
	if (ix->vault != NULL) {
		if (index_join_vault(ix) == -1)
			goto out_policy;
		p->credentials = ix->all_creds;
		p->ncredentials += ix->vault->ncredentials;
		p->bindings = ix->all_binds;
		p->nbindings += ix->vault->nbindings;
	}
	return p;
out_policy:
	p->refs = 1;
	policy_unref(p);
	return NULL;
out_free:
	policy_rules_free(rules, nrules);
	policy_overlays_unref(ov);
	policy_config_unref(cfg);
	policy_config_unref(vault);
	free(ix);
	free(p);
	return NULL;
}

struct policy *
policy_new_deny_all(void)
{
	return policy_assemble(
	    POLICY_DENY, true, NULL, 0, NULL, NULL, NULL, "default", 0);
}

struct policy *
policy_ref(struct policy *p)
{
	if (p != NULL)
		refcnt_inc(&p->refs);
	return p;
}

void
policy_unref(struct policy *p)
{
	if (p == NULL || !refcnt_dec(&p->refs))
		return;
	index_free(p->index);
	policy_rules_free(p->rules, p->nrules);
	free(p->source);
	free(p);
}

const char *
policy_mode_name(const struct policy *p)
{
	if (p == NULL)
		return "deny_all";
	if (p->nrules > 0)
		return "enforcing";
	return p->default_action == POLICY_ALLOW ? "allow_all" : "deny_all";
}

/* ---- matching ---- */

static enum policy_action
decide(const struct policy_rule *r, const struct policy_rule **rule)
{
	if (rule != NULL)
		*rule = r;
	return r->action;
}

static enum policy_action
deny_invalid(const struct policy_rule **rule)
{
	if (rule != NULL)
		*rule = NULL;
	return POLICY_DENY;
}

/* ---- what a name may reach (rules with ports or protocols) ---- */

#define REACH_UND_MAX 512 /* undecided ranges per protocol during a walk */

struct rset {
	struct policy_port_range v[REACH_UND_MAX];
	size_t n;
};

struct rwalk {
	const struct policy_rule *rules; /* of the layer being walked */
	struct policy_reach *out;
	struct rset und[2]; /* tcp, udp: not decided yet */
	struct rset dec; /* scratch */
	bool und_icmp, und_other;
	const struct policy_rule *first[2]; /* [action]: first deciding */
};

static void
rset_push(struct rset *s, unsigned lo, unsigned hi)
{
	/* full: the range stays undecided or unallowed, never opened */
	if (s->n == REACH_UND_MAX)
		return;
	s->v[s->n].lo = (uint16_t)lo;
	s->v[s->n].hi = (uint16_t)hi;
	s->n++;
}

static int
prange_cmp(const void *a, const void *b)
{
	const struct policy_port_range *x = a, *y = b;

	return coalesce_cmp(
	    (uint32_t)x->lo << 16 | x->hi, (uint32_t)y->lo << 16 | y->hi);
}

/* Overlapping or adjacent ranges merge. */
static bool
prange_absorb(void *kept, const void *next, void *arg)
{
	const struct policy_port_range *x = next;

	(void)arg;
	return coalesce_u16(
	    &((struct policy_port_range *)kept)->hi, x->lo, x->hi);
}

/* Sorts and merges v in place. */
static size_t
prange_norm(struct policy_port_range *v, size_t n)
{
	return coalesce(v, n, sizeof(*v), prange_cmp, prange_absorb, NULL);
}

/* und minus c stays in und; und and c goes to dec. c sorted, merged. */
static void
rset_split(struct rset *und, const struct policy_port_range *c, size_t nc,
    struct rset *dec)
{
	struct policy_port_range u[REACH_UND_MAX];
	size_t i, j, n = und->n;

	memcpy(u, und->v, n * sizeof(u[0]));
	und->n = 0;
	dec->n = 0;
	for (i = 0; i < n; i++) {
		unsigned cur = u[i].lo, hi = u[i].hi;

		for (j = 0; j < nc && cur <= hi; j++) {
			unsigned a, b;

			if (c[j].hi < cur)
				continue;
			if (c[j].lo > hi)
				break;
			if (c[j].lo > cur)
				rset_push(und, cur, c[j].lo - 1u);
			a = c[j].lo > cur ? c[j].lo : cur;
			b = c[j].hi < hi ? c[j].hi : hi;
			rset_push(dec, a, b);
			cur = b + 1;
		}
		if (cur <= hi)
			rset_push(und, cur, hi);
	}
}

static void
reach_add(struct policy_reach *r, int k, unsigned lo, unsigned hi)
{
	struct policy_port_range *v = k == 0 ? r->tcp : r->udp;
	size_t *n = k == 0 ? &r->ntcp : &r->nudp;

	if (*n == POLICY_REACH_RANGES_MAX) {
		*n = prange_norm(v, *n);
		if (*n == POLICY_REACH_RANGES_MAX)
			return; /* left out: fail closed */
	}
	v[*n].lo = (uint16_t)lo;
	v[*n].hi = (uint16_t)hi;
	(*n)++;
}

static bool
rwalk_open(const struct rwalk *w)
{
	return w->und[0].n != 0 || w->und[1].n != 0 || w->und_icmp ||
	    w->und_other;
}

static bool
reach_rule_cb(void *arg, size_t i)
{
	static const unsigned bit[2] = {POLICY_PROTO_TCP, POLICY_PROTO_UDP};
	struct rwalk *w = arg;
	const struct policy_rule *r = &w->rules[i];
	struct policy_port_range c[POLICY_PORTS_MAX], all = {0, 65535};
	const struct policy_port_range *cv = &all;
	bool allow = r->action == POLICY_ALLOW, decided = false;
	size_t nc = 1, k, j;

	if (r->nports != 0 && r->nports <= POLICY_PORTS_MAX) {
		memcpy(c, r->ports, r->nports * sizeof(c[0]));
		nc = prange_norm(c, r->nports);
		cv = c;
	}
	for (k = 0; k < 2; k++) {
		if (!(r->protocols & bit[k]) || w->und[k].n == 0)
			continue;
		rset_split(&w->und[k], cv, nc, &w->dec);
		decided |= w->dec.n != 0;
		for (j = 0; allow && j < w->dec.n; j++)
			reach_add(
			    w->out, (int)k, w->dec.v[j].lo, w->dec.v[j].hi);
	}
	if ((r->protocols & POLICY_PROTO_ICMP) && w->und_icmp) {
		w->und_icmp = false;
		w->out->icmp = allow;
		decided = true;
	}
	if ((r->protocols & POLICY_PROTO_ALL) == POLICY_PROTO_ALL &&
	    r->nports == 0 && w->und_other) {
		w->und_other = false;
		w->out->other = allow;
		decided = true;
	}
	if (decided && w->first[r->action] == NULL)
		w->first[r->action] = r;
	return rwalk_open(w);
}

static void
reach_set(struct policy_reach *r, bool all)
{
	r->all = all;
	r->none = !all;
	r->ntcp = r->nudp = all ? 1 : 0;
	r->tcp[0].lo = r->udp[0].lo = 0;
	r->tcp[0].hi = r->udp[0].hi = 65535;
	r->icmp = r->other = all;
}

/* The whole walk: every matching rule of every layer, then the default. */
static enum policy_action
reach_walk(const struct policy *p, const char *n, size_t len,
    const struct policy_rule **rule, struct policy_reach *out)
{
	const struct policy_index *ix = p->index;
	const struct policy_layer *lv[4] = {
	    ix->ov->ldeny, ix->ov->lallow, ix->cfg->linfra, ix->user};
	const struct policy_rule *rv[4] = {
	    ix->ov->deny, ix->ov->allow, ix->cfg->infra, p->rules};
	struct rwalk *w = calloc(1, sizeof(*w));
	enum policy_action act;
	size_t l, k, j;

	if (w == NULL) {
		reach_set(out, false);
		return deny_invalid(rule);
	}
	memset(out, 0, sizeof(*out));
	w->out = out;
	for (k = 0; k < 2; k++)
		rset_push(&w->und[k], 0, 65535);
	w->und_icmp = w->und_other = true;
	for (l = 0; l < 4 && rwalk_open(w); l++) {
		w->rules = rv[l];
		(void)policy_layer_each_name(lv[l], n, len, reach_rule_cb, w);
	}
	if (p->default_action == POLICY_ALLOW) {
		for (k = 0; k < 2; k++)
			for (j = 0; j < w->und[k].n; j++)
				reach_add(out, (int)k, w->und[k].v[j].lo,
				    w->und[k].v[j].hi);
		out->icmp |= w->und_icmp;
		out->other |= w->und_other;
	}
	out->ntcp = prange_norm(out->tcp, out->ntcp);
	out->nudp = prange_norm(out->udp, out->nudp);
	out->none =
	    out->ntcp == 0 && out->nudp == 0 && !out->icmp && !out->other;
	out->all = out->ntcp == 1 && out->tcp[0].lo == 0 &&
	    out->tcp[0].hi == 65535 && out->nudp == 1 && out->udp[0].lo == 0 &&
	    out->udp[0].hi == 65535 && out->icmp && out->other;
	act = out->none ? POLICY_DENY : POLICY_ALLOW;
	if (rule != NULL)
		*rule = w->first[act];
	free(w);
	return act;
}

static enum policy_action
match_domain(const struct policy *p, const char *name,
    const struct policy_rule **rule, struct policy_reach *reach)
{
	char n[POLICY_NAME_MAX + 2];
	const struct policy_index *ix;
	const struct policy_rule *r = NULL;
	struct policy_reach *tmp = NULL;
	enum policy_action act = POLICY_DENY;
	bool lim = false;
	size_t len;
	long i;

	if (p == NULL || name == NULL ||
	    policy_name_norm(name, strlen(name), n, sizeof(n), false, NULL) ==
	        -1) {
		if (reach != NULL)
			reach_set(reach, false);
		return deny_invalid(rule);
	}
	ix = p->index;
	len = strlen(n);
	/* The first matching rule decides everything unless it has a limit:
	 * one lookup per label, as before there were limits on names, and
	 * the rule itself is not read (its action and limit bit ride in the
	 * table). */
	if ((i = policy_layer_match_name(ix->ov->ldeny, n, len, &act, &lim)) >=
	    0)
		r = &ix->ov->deny[i];
	else if ((i = policy_layer_match_name(
	              ix->ov->lallow, n, len, &act, &lim)) >= 0)
		r = &ix->ov->allow[i];
	else if ((i = policy_layer_match_name(
	              ix->cfg->linfra, n, len, &act, &lim)) >= 0)
		r = &ix->cfg->infra[i];
	else if ((i = policy_layer_match_name(ix->user, n, len, &act, &lim)) >=
	    0)
		r = &p->rules[i];
	if (r == NULL || !lim) {
		if (r == NULL)
			act = p->default_action;
		if (reach != NULL)
			reach_set(reach, act == POLICY_ALLOW);
		if (rule != NULL)
			*rule = r;
		return act;
	}
	if (reach == NULL) {
		tmp = malloc(sizeof(*tmp));
		if (tmp == NULL)
			return deny_invalid(rule);
		reach = tmp;
	}
	act = reach_walk(p, n, len, rule, reach);
	free(tmp);
	return act;
}

enum policy_action
policy_match_domain(
    const struct policy *p, const char *name, const struct policy_rule **rule)
{
	return match_domain(p, name, rule, NULL);
}

enum policy_action
policy_match_domain_reach(const struct policy *p, const char *name,
    const struct policy_rule **rule, struct policy_reach *reach)
{
	return match_domain(p, name, rule, reach);
}

static bool
ranges_have(const struct policy_port_range *v, size_t n, uint16_t port)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (port >= v[i].lo && port <= v[i].hi)
			return true;
	return false;
}

bool
policy_reach_allows(
    const struct policy_reach *reach, unsigned proto, uint16_t port)
{
	if (reach->all)
		return true;
	if (reach->none)
		return false;
	switch (proto) {
	case POLICY_PROTO_TCP:
		return ranges_have(reach->tcp, reach->ntcp, port);
	case POLICY_PROTO_UDP:
		return ranges_have(reach->udp, reach->nudp, port);
	case POLICY_PROTO_ICMP:
		return reach->icmp;
	default:
		return reach->other;
	}
}

bool
policy_reach_equal(const struct policy_reach *a, const struct policy_reach *b)
{
	if (a->all || b->all || a->none || b->none)
		return a->all == b->all && a->none == b->none;
	return a->icmp == b->icmp && a->other == b->other &&
	    a->ntcp == b->ntcp && a->nudp == b->nudp &&
	    memcmp(a->tcp, b->tcp, a->ntcp * sizeof(a->tcp[0])) == 0 &&
	    memcmp(a->udp, b->udp, a->nudp * sizeof(a->udp[0])) == 0;
}

enum policy_action
policy_match_addr(const struct policy *p, int family, const uint8_t *addr,
    unsigned proto, uint16_t port, const struct policy_rule **rule)
{
	const struct policy_index *ix;
	long i;

	if (p == NULL || addr == NULL || (family != 4 && family != 6))
		return deny_invalid(rule);
	ix = p->index;
	i = policy_layer_match_addr(ix->ov->ldeny, family, addr, proto, port);
	if (i >= 0)
		return decide(&ix->ov->deny[i], rule);
	i = policy_layer_match_addr(ix->ov->lallow, family, addr, proto, port);
	if (i >= 0)
		return decide(&ix->ov->allow[i], rule);
	i = policy_layer_match_addr(ix->cfg->linfra, family, addr, proto, port);
	if (i >= 0)
		return decide(&ix->cfg->infra[i], rule);
	i = policy_layer_match_addr(ix->user, family, addr, proto, port);
	if (i >= 0)
		return decide(&p->rules[i], rule);
	if (rule != NULL)
		*rule = NULL;
	return p->default_action;
}

bool
policy_addr_explicitly_allowed(const struct policy *p, int family,
    const uint8_t *addr, unsigned proto, uint16_t port)
{
	const struct policy_rule *r = NULL;

	return policy_match_addr(p, family, addr, proto, port, &r) ==
	    POLICY_ALLOW &&
	    r != NULL;
}

bool
policy_addr_operator_allowed(
    const struct policy *p, int family, const uint8_t *addr)
{
	const struct policy_rule *r = NULL;

	/* proto 0, port 0: every rule of a layer counts, so an always-deny
	 * rule covering addr for some port decides first (deny). */
	if (policy_match_addr(p, family, addr, 0, 0, &r) != POLICY_ALLOW ||
	    r == NULL)
		return false;
	return r->origin == POLICY_ORIGIN_ALWAYS_ALLOW ||
	    r->origin == POLICY_ORIGIN_INFRA;
}

bool
policy_log_skip(const struct policy *p, const char *name)
{
	char n[POLICY_NAME_MAX + 2];

	/* Asked on every denial: with no log_skip rule (the usual case) no
	 * name can match, so it is not normalized (match_domain did that
	 * already, and a name that fails there fails here: false). */
	if (p == NULL || name == NULL || p->index->ov->nlog_skip == 0 ||
	    policy_name_norm(name, strlen(name), n, sizeof(n), false, NULL) ==
	        -1)
		return false;
	return policy_layer_match_name(
	           p->index->ov->llog_skip, n, strlen(n), NULL, NULL) >= 0;
}
