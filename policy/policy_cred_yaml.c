/*
 * policy_cred_yaml: the credentials and bindings sections of the canonical
 * YAML (policy_serial.c writes the rest). An inline credential's value is
 * never written: "[REDACTED]" stands for it.
 */
#include <stdio.h>

#include "policy/policy_binding_int.h"
#include "policy/policy_cred.h"
#include "policy/policy_cred_http_walk.h"
#include "policy/policy_github_walk.h"
#include "policy/policy_oauth2_walk.h"
#include "policy/policy_ybuf.h"

static void
yaml_strs(struct ybuf *b, const char *key, const struct bstrs *s)
{
	size_t i;

	policy_ybuf_printf(b, "      %s: [", key);
	for (i = 0; i < s->n; i++) {
		policy_ybuf_printf(b, "%s", i ? ", " : "");
		policy_ybuf_quoted(b, s->v[i]);
	}
	policy_ybuf_printf(b, "]\n");
}

/* The bits of mask as a flow list of their names, in bit order. */
static void
yaml_bits(struct ybuf *b, unsigned mask, const char *(*name)(unsigned bit))
{
	const char *sep = "";
	unsigned k;

	policy_ybuf_printf(b, "[");
	for (k = 0; name(1u << k) != NULL; k++)
		if (mask & (1u << k)) {
			policy_ybuf_printf(b, "%s\"%s\"", sep, name(1u << k));
			sep = ", ";
		}
	policy_ybuf_printf(b, "]\n");
}

static void
yaml_match(struct ybuf *b, const struct policy_binding *x)
{

	policy_ybuf_printf(b, "    match:\n      schemes: [%s%s%s]\n",
	    (x->schemes & POLICY_SCHEME_HTTPS) ? "\"https\"" : "",
	    (x->schemes & POLICY_SCHEME_HTTPS) &&
	            (x->schemes & POLICY_SCHEME_HTTP)
	        ? ", "
	        : "",
	    (x->schemes & POLICY_SCHEME_HTTP) ? "\"http\"" : "");
	yaml_strs(b, "hosts", &x->hosts);
	policy_ybuf_printf(b, "      methods: ");
	yaml_bits(b, x->methods, policy_method_name);
	yaml_strs(b, "paths", &x->paths);
}

static void
yaml_subst(struct ybuf *b, const struct bsubst *s)
{
	policy_ybuf_printf(b, "        - credential: ");
	policy_ybuf_quoted(b, s->credential);
	policy_ybuf_printf(b, "\n          placeholder: ");
	policy_ybuf_quoted(b, s->placeholder);
	policy_ybuf_printf(b, "\n          in: ");
	yaml_bits(b, s->in, policy_subst_in_name);
}

/* awsSigV4's keys: the credentials' names and the scope it states. */
static void
yaml_aws(struct ybuf *b, const struct baws *a)
{
	const char *const keys[] = {"accessKeyId", "secretAccessKey",
	    "sessionToken", "region", "service"};
	const char *const vals[] = {
	    a->akid, a->secret, a->token, a->region, a->service};
	size_t i;

	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		policy_ybuf_auth_key(b, keys[i], vals[i]);
}

static void
yaml_auth(struct ybuf *b, const struct policy_binding *x)
{
	size_t i;

	policy_ybuf_printf(b, "    auth:\n      type: \"%s\"\n",
	    policy_auth_type_name(x->auth));
	if (x->credential != NULL) {
		policy_ybuf_printf(b, "      credential: ");
		policy_ybuf_quoted(b, x->credential);
		policy_ybuf_printf(b, "\n");
	}
	if (x->header != NULL) {
		policy_ybuf_printf(b, "      name: ");
		policy_ybuf_quoted(b, x->header);
		policy_ybuf_printf(b, "\n");
	}
	if (x->nheaders > 0)
		policy_ybuf_printf(b, "      headers:\n");
	for (i = 0; i < x->nheaders; i++) {
		policy_ybuf_printf(b, "        - name: ");
		policy_ybuf_quoted(b, x->headers[i].name);
		policy_ybuf_printf(b, "\n          credential: ");
		policy_ybuf_quoted(b, x->headers[i].credential);
		policy_ybuf_printf(b, "\n");
	}
	if (x->nsubst > 0)
		policy_ybuf_printf(b, "      substitutions:\n");
	for (i = 0; i < x->nsubst; i++)
		yaml_subst(b, &x->subst[i]);
	yaml_aws(b, &x->aws);
	policy_oauth2_yaml(b, x->oauth2);
	policy_github_yaml(b, x->github);
}

/* The operator's own inline value goes back into the operator's own
 * file, escaped byte by byte (no printf-style function sees it). */
static int
put_value(void *arg, const uint8_t *value, size_t len)
{
	policy_ybuf_quoted_secret(arg, value, len);
	return 0;
}

void
policy_cred_yaml(struct ybuf *b, const struct policy *p)
{
	/* The operator's own: the API's vault is never written to disk. */
	const struct policy_config *cfg = p->index->cfg;
	size_t i;

	if (cfg->ncredentials > 0)
		policy_ybuf_printf(b, "credentials:\n");
	for (i = 0; i < cfg->ncredentials; i++) {
		const struct policy_credential *c = cfg->credentials[i];
		policy_ybuf_printf(b, "  - name: ");
		policy_ybuf_quoted(b, policy_credential_name(c));
		if (policy_credential_source(c) == POLICY_CRED_FILE) {
			policy_ybuf_printf(b,
			    "\n    source:\n      type: \"file\"\n"
			    "      path: ");
			policy_ybuf_quoted(b, policy_credential_path(c));
			policy_ybuf_printf(b, "\n");
		} else if (policy_credential_source(c) == POLICY_CRED_HTTP)
			policy_cred_http_yaml(b, policy_credential_http(c));
		else {
			policy_ybuf_printf(b,
			    "\n    source:\n      type: \"inline\"\n"
			    "      value: ");
			(void)policy_credential_export(c, put_value, b);
			policy_ybuf_put(b, "\n", 1);
		}
	}
	if (cfg->nbindings > 0)
		policy_ybuf_printf(b, "bindings:\n");
	for (i = 0; i < cfg->nbindings; i++) {
		policy_ybuf_printf(b, "  - name: ");
		policy_ybuf_quoted(b, cfg->bindings[i]->name);
		policy_ybuf_printf(b, "\n");
		yaml_match(b, cfg->bindings[i]);
		yaml_auth(b, cfg->bindings[i]);
	}
}
