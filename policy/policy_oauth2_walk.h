/*
 * policy_oauth2_walk: the oauth2 auth keys as the binding walker and the
 * writer see them (policy_oauth2_walk.c). The key functions are struct
 * pkey functions of the auth mapping; obj points at the struct
 * policy_binding * being walked (its oauth2 part is made on the first
 * key).
 */
#ifndef EGRESSD_POLICY_OAUTH2_WALK_H
#define EGRESSD_POLICY_OAUTH2_WALK_H

#include "policy/policy_binding_int.h"
#include "policy/policy_oauth2_int.h"

int policy_oauth2_walk_grant(struct pwalk *w, const struct pnode *v, void *obj);
int policy_oauth2_walk_url(struct pwalk *w, const struct pnode *v, void *obj);
int policy_oauth2_walk_client_id(
    struct pwalk *w, const struct pnode *v, void *obj);
int policy_oauth2_walk_secret(
    struct pwalk *w, const struct pnode *v, void *obj);
int policy_oauth2_walk_refresh(
    struct pwalk *w, const struct pnode *v, void *obj);
int policy_oauth2_walk_scopes(
    struct pwalk *w, const struct pnode *v, void *obj);
int policy_oauth2_walk_audience(
    struct pwalk *w, const struct pnode *v, void *obj);
int policy_oauth2_walk_client_auth(
    struct pwalk *w, const struct pnode *v, void *obj);
/* After the auth mapping: oauth2 has what its grant needs, any other
 * type has none of these keys (errors at v, the auth mapping). */
void policy_oauth2_shape(
    struct pwalk *w, const struct pnode *v, const struct policy_binding *b);
/* The keys of o under "auth:" (policy_cred_yaml.c). */
void policy_oauth2_yaml(struct ybuf *b, const struct policy_oauth2 *o);

#endif
