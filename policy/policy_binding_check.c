/*
 * policy_binding_check: the cross checks of a snapshot's bindings
 * (contract §4), run by the loaders (every problem reported at its
 * binding) and by the API on a mutation's result (the first problem):
 * every referenced credential exists, every host is covered by what the
 * DNS policy really allows, and no two bindings overlap (the definition of
 * overlap is the matcher's, policy_binding_match.c).
 */
#include <stdio.h>
#include <string.h>

#include "policy/policy_binding_int.h"
#include "policy/policy_cred.h"
#include "policy/policy_cred_http.h"
#include "policy/policy_github.h"
#include "policy/policy_oauth2.h"
#include "policy/policy_walk.h"

/* A deny rule of these lists naming something under *.suffix. Deny
 * request rules do not count: they deny requests, not the host. */
static const struct policy_rule *
deny_below(const struct policy_rule *r, size_t n, const char *suffix)
{
	size_t i;

	for (i = 0; i < n; i++) {
		const char *t = r[i].target;
		if (r[i].action != POLICY_DENY ||
		    policy_rule_is_request(&r[i]) ||
		    (r[i].kind != POLICY_TARGET_DOMAIN &&
		        r[i].kind != POLICY_TARGET_WILDCARD))
			continue;
		if (r[i].kind == POLICY_TARGET_WILDCARD)
			t += 2;
		if (policy_name_below(t, suffix) ||
		    (r[i].kind == POLICY_TARGET_WILDCARD &&
		        strcmp(t, suffix) == 0))
			return &r[i];
	}
	return NULL;
}

static bool
wildcard_covered(const struct policy *p, const char *suffix, struct err *e)
{
	char probe[POLICY_NAME_MAX + 2];
	const struct policy_rule *r = NULL, *d;

	/* Any label decides like any other unless a rule names it. */
	if ((size_t)snprintf(probe, sizeof(probe), "x.%s", suffix) >=
	    sizeof(probe))
		return false;
	if (policy_match_domain(p, probe, &r) != POLICY_ALLOW || r == NULL ||
	    r->kind != POLICY_TARGET_WILDCARD ||
	    !(strcmp(r->target + 2, suffix) == 0 ||
	        policy_name_below(suffix, r->target + 2))) {
		err_set(e,
		    "binding host \"*.%s\" is not covered by an "
		    "explicit wildcard allow rule",
		    suffix);
		return false;
	}
	if ((d = deny_below(p->always_deny, p->nalways_deny, suffix)) ||
	    (d = deny_below(p->rules, p->nrules, suffix))) {
		err_set(e, "binding host \"*.%s\" is partly denied by \"%s\"",
		    suffix, d->display);
		return false;
	}
	return true;
}

bool
policy_host_covered(const struct policy *p, const char *host, struct err *e)
{
	const struct policy_rule *r = NULL;

	if (p == NULL || host == NULL)
		return false;
	if (host[0] == '*' && host[1] == '.')
		return wildcard_covered(p, host + 2, e);
	if (policy_match_domain(p, host, &r) == POLICY_ALLOW && r != NULL)
		return true;
	err_set(e,
	    "binding host \"%.255s\" is not covered by an explicit "
	    "allow rule",
	    host);
	return false;
}

static int
binding_refs(
    const struct policy *p, const struct policy_binding *b, struct err *e)
{
	const char *missing =
	    policy_binding_unknown_cred(b, p->credentials, p->ncredentials);

	if (missing == NULL)
		return 0;
	err_set(e, "binding \"%s\" references unknown credential \"%s\"",
	    b->name, missing);
	return -1;
}

/* An http source's references: its url host covered by an explicit
 * allow rule, its header credentials known and not http themselves. */
static int
cred_http_check(
    const struct policy *p, const struct policy_credential *c, struct err *e)
{
	const struct policy_cred_http *h = policy_credential_http(c);
	size_t i, j;

	if (h == NULL)
		return 0;
	/* egressd's own fetch goes only where the policy allows by name,
	 * like an oauth2 tokenUrl: its resolver answers nothing else */
	if (!policy_host_covered(p, h->host, e)) {
		err_prefix(e, "credential \"%s\": http source url", c->name);
		return -1;
	}
	for (i = 0; i < h->nheaders; i++) {
		const char *n = h->headers[i].credential;

		if (n == NULL)
			continue;
		for (j = 0; j < p->ncredentials; j++)
			if (strcmp(p->credentials[j]->name, n) == 0)
				break;
		if (j == p->ncredentials) {
			err_set(e,
			    "credential \"%s\": header \"%s\" references "
			    "unknown credential \"%s\"",
			    c->name, h->headers[i].name, n);
			return -1;
		}
		if (p->credentials[j]->source == POLICY_CRED_HTTP) {
			err_set(e,
			    "credential \"%s\": header \"%s\" names http "
			    "credential \"%s\" (inline or file only)",
			    c->name, h->headers[i].name, n);
			return -1;
		}
	}
	return 0;
}

/* A githubApp binding's API host is allowed by name (egressd's own token
 * request goes only there), and its private key is read from a file: a
 * PEM's lines cannot be an inline value, and an operator's key file is
 * where GitHub's download goes. */
static int
github_check(
    const struct policy *p, const struct policy_github *g, struct err *e)
{
	size_t i;

	if (!policy_host_covered(p, g->host, e)) {
		err_prefix(e, "githubApp apiUrl");
		return -1;
	}
	for (i = 0; i < p->ncredentials; i++)
		if (strcmp(policy_credential_name(p->credentials[i]),
		        g->private_key) == 0 &&
		    policy_credential_source(p->credentials[i]) !=
		        POLICY_CRED_FILE) {
			err_set(e,
			    "githubApp privateKey \"%s\" must be a file "
			    "credential (a PEM key)",
			    g->private_key);
			return -1;
		}
	return 0;
}

/* Runs every check; reports each problem through report(). */
static int
check_all(const struct policy *p,
    void (*report)(void *arg, unsigned line, unsigned col, const struct err *e),
    void *arg)
{
	struct err e;
	size_t i, j, k;
	int rc = 0;

	for (i = 0; i < p->nbindings; i++) {
		const struct policy_binding *b = p->bindings[i];
		if (binding_refs(p, b, &e) == -1) {
			report(arg, b->line, b->col, &e);
			rc = -1;
		}
		for (k = 0; k < b->hosts.n; k++)
			if (!policy_host_covered(p, b->hosts.v[k], &e)) {
				report(arg, b->line, b->col, &e);
				rc = -1;
			}
		/* egressd's own token request goes only where the policy
		 * allows by name, like the binding's requests */
		if (b->oauth2 != NULL &&
		    !policy_host_covered(p, b->oauth2->host, &e)) {
			err_prefix(&e, "oauth2 tokenUrl");
			report(arg, b->line, b->col, &e);
			rc = -1;
		}
		if (b->github != NULL && github_check(p, b->github, &e) == -1) {
			report(arg, b->line, b->col, &e);
			rc = -1;
		}
		for (j = 0; j < i; j++)
			if (policy_bindings_overlap(p->bindings[j], b)) {
				err_set(&e,
				    "bindings \"%s\" and \"%s\" can "
				    "match the same request",
				    p->bindings[j]->name, b->name);
				report(arg, b->line, b->col, &e);
				rc = -1;
			}
	}
	for (i = 0; i < p->ncredentials; i++)
		if (cred_http_check(p, p->credentials[i], &e) == -1) {
			report(arg, p->credentials[i]->loc.line,
			    p->credentials[i]->loc.col, &e);
			rc = -1;
		}
	return rc;
}

static void
report_first(void *arg, unsigned line, unsigned col, const struct err *e)
{
	struct err *out = arg;

	(void)line;
	(void)col;
	if (out != NULL && out->msg[0] == '\0')
		err_set(out, "%s", e->msg);
}

int
policy_check_bindings(const struct policy *p, struct err *e)
{
	err_clear(e);
	return check_all(p, report_first, e);
}

static void
report_diag(void *arg, unsigned line, unsigned col, const struct err *e)
{
	struct pnode at = {.line = line, .col = col};

	policy_walk_err(arg, &at, "%s", e->msg);
}

void
policy_binding_check_walk(struct pwalk *w, const struct policy *p)
{
	(void)check_all(p, report_diag, w);
}
