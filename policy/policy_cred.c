/*
 * policy_cred: the credential object (policy_cred.h): its life time and
 * the accessors of policy.h. policy_cred_walk.c fills it from the file.
 *
 * A credential's value is kept in a private buffer, wiped with
 * secmem_wipe when freed, never formatted into a message and never
 * returned by a getter.
 */
#include <stdlib.h>
#include <string.h>

#include "policy/policy_cred.h"
#include "policy/policy_cred_http_int.h"
#include "util/secmem.h"

/* ---- lifetimes and accessors ---- */

void
policy_credential_free(struct policy_credential *c)
{
	if (c == NULL)
		return;
	secmem_arena_free(c->arena); /* wipes the value */
	policy_cred_http_free(c->http);
	free(c->name);
	free(c->path);
	free(c);
}

int
policy_credential_set_value(
    struct policy_credential *c, const uint8_t *v, size_t n)
{
	struct err e;

	secmem_arena_free(c->arena);
	c->value = NULL;
	c->vlen = 0;
	/* One page or a few: the value and the arena's own header. */
	if ((c->arena = secmem_arena_new(n + 64, &e)) == NULL ||
	    (c->value = secmem_alloc(c->arena, n)) == NULL)
		return -1;
	memcpy(c->value, v, n);
	c->vlen = n;
	return 0;
}

struct policy_credential *
policy_credential_dup(const struct policy_credential *c)
{
	struct policy_credential *d = calloc(1, sizeof(*d));

	if (d == NULL)
		return NULL;
	d->source = c->source;
	d->loc = c->loc;
	if ((d->name = strdup(c->name)) == NULL ||
	    (c->path != NULL && (d->path = strdup(c->path)) == NULL) ||
	    (c->http != NULL &&
	        (d->http = policy_cred_http_dup(c->http)) == NULL) ||
	    (c->value != NULL &&
	        policy_credential_set_value(d, c->value, c->vlen) == -1)) {
		policy_credential_free(d);
		return NULL;
	}
	return d;
}

const char *
policy_credential_name(const struct policy_credential *c)
{
	return c->name;
}

bool
policy_credential_listed(
    struct policy_credential *const *v, size_t n, const char *name)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(v[i]->name, name) == 0)
			return true;
	return false;
}

const struct policy_cred_http *
policy_credential_http(const struct policy_credential *c)
{
	return c->source == POLICY_CRED_HTTP ? c->http : NULL;
}

enum policy_cred_source
policy_credential_source(const struct policy_credential *c)
{
	return c->source;
}

const char *
policy_credential_path(const struct policy_credential *c)
{
	return c->path;
}

int
policy_credential_export(const struct policy_credential *c,
    int (*sink)(void *arg, const uint8_t *value, size_t len), void *arg)
{
	if (c == NULL || c->source != POLICY_CRED_INLINE || c->value == NULL)
		return -1;
	return sink(arg, c->value, c->vlen);
}
