/*
 * policy_cred_http_walk: the keys of an http credential source
 * (policy_cred_http.h) for the credential walk's source map (obj points
 * at the struct policy_credential *; the settings are made on the first
 * key), and its YAML.
 */
#ifndef EGRESSD_POLICY_CRED_HTTP_WALK_H
#define EGRESSD_POLICY_CRED_HTTP_WALK_H

#include "policy/policy_cred_http.h"

struct pwalk;
struct pnode;
struct ybuf;

int policy_cred_http_walk_url(
    struct pwalk *w, const struct pnode *v, void *obj);
int policy_cred_http_walk_method(
    struct pwalk *w, const struct pnode *v, void *obj);
int policy_cred_http_walk_format(
    struct pwalk *w, const struct pnode *v, void *obj);
int policy_cred_http_walk_ttl(
    struct pwalk *w, const struct pnode *v, void *obj);
int policy_cred_http_walk_max_stale(
    struct pwalk *w, const struct pnode *v, void *obj);
int policy_cred_http_walk_private(
    struct pwalk *w, const struct pnode *v, void *obj);
int policy_cred_http_walk_headers(
    struct pwalk *w, const struct pnode *v, void *obj);
/* The source map's YAML, from "\n    source:" on. */
void policy_cred_http_yaml(struct ybuf *b, const struct policy_cred_http *h);

#endif
