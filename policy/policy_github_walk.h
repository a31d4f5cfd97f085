/*
 * policy_github_walk: the githubApp auth keys as the binding walker and
 * the writer see them (policy_github_walk.c). The key functions are
 * struct pkey functions of the auth mapping; obj points at the struct
 * policy_binding * being walked (its github part is made on the first
 * key, with the default apiUrl).
 */
#ifndef EGRESSD_POLICY_GITHUB_WALK_H
#define EGRESSD_POLICY_GITHUB_WALK_H

#include "policy/policy_binding_int.h"
#include "policy/policy_github_int.h"

int policy_github_walk_app_id(
    struct pwalk *w, const struct pnode *v, void *obj);
int policy_github_walk_installation(
    struct pwalk *w, const struct pnode *v, void *obj);
int policy_github_walk_key(struct pwalk *w, const struct pnode *v, void *obj);
int policy_github_walk_url(struct pwalk *w, const struct pnode *v, void *obj);
int policy_github_walk_repos(struct pwalk *w, const struct pnode *v, void *obj);
int policy_github_walk_perms(struct pwalk *w, const struct pnode *v, void *obj);
int policy_github_walk_form(struct pwalk *w, const struct pnode *v, void *obj);
/* After the auth mapping: githubApp has appId, installationId and
 * privateKey; any other type has none of these keys (errors at v). */
void policy_github_shape(
    struct pwalk *w, const struct pnode *v, const struct policy_binding *b);
/* The keys of g under "auth:" (policy_cred_yaml.c). */
void policy_github_yaml(struct ybuf *b, const struct policy_github *g);

#endif
