/*
 * policy_int: declarations shared by the policy library's own .c files.
 * Nothing outside policy/ includes this header; the public contract is
 * policy.h (and policy_binding.h, policy_path.h).
 *
 * Who calls whom inside the library (callers left, callees right; the
 * graph has no cycle, and a new call must not make one: a file never calls
 * a file that calls it, directly or not):
 *
 *   policy_yaml          -> policy_schema, policy_mutate, policy_node, policy
 *   policy_json          -> policy_node, policy
 *   policy_mutate        -> policy_schema, policy_json, policy_node,
 *                           policy_target, policy
 *   policy_overlay       -> policy_yaml, policy_binding_check, policy_index,
 *                           policy_target, policy
 *   policy_schema        -> policy_walk, policy_cred_walk,
 *                           policy_binding_walk, policy_binding_check,
 *                           policy_glob, policy_index, policy_node,
 *                           policy_target, policy
 *   policy_serial        -> policy_cred_yaml, policy_ybuf, policy
 *   policy_cred_yaml     -> policy_cred, policy_binding, policy_ybuf
 *   policy_binding_check -> policy_binding_match (the overlap), policy_cred,
 *                           policy_walk, policy_target,
 *                           policy (policy_match_domain)
 *   policy_binding_walk  -> policy_cred_walk (names), policy_walk,
 *                           policy_binding, policy_target
 *   policy_binding_match -> policy_binding, policy_path, policy_target
 *   policy_request       -> policy_index, policy_glob, policy_path,
 *                           policy_target
 *   policy_cred_walk     -> policy_cred, policy_walk
 *   policy_walk          -> policy_node, policy (diagnostics)
 *   policy               -> policy_cred, policy_binding (a config's free),
 *                           policy_index, policy_target
 *   policy_index         -> policy_target
 *   policy_glob          -> policy_path
 *   leaves: policy_node, policy_target, policy_cred, policy_binding,
 *           policy_path, policy_ybuf.
 *
 * Each of those files declares its internal functions in its own header
 * (policy_walk.h, policy_ybuf.h, policy_cred.h, policy_binding_int.h); this
 * one holds the parse tree, targets, layers, the shared configuration and
 * the snapshot assembly. (policy_glob.h and policy_path.h are public:
 * the proxy normalizes paths, the fuzzers check patterns.)
 */
#ifndef EGRESSD_POLICY_INT_H
#define EGRESSD_POLICY_INT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/policy.h"

/* Bounds of the internal structures. */
#define POLICY_PORTS_MAX 64 /* port entries of one rule */
#define POLICY_NODES_MAX (1u << 20) /* parse-tree nodes of one document */
#define POLICY_SCALAR_MAX 65536 /* bytes of one scalar */
#define POLICY_FILES_MAX 8 /* distinct file names of one snapshot */
#define POLICY_LINE_MAX 1024 /* one line of an always-rules file */

/* ---- parse tree shared by the JSON and YAML readers ---- */

enum pnode_type {
	PNODE_NULL,
	PNODE_BOOL,
	PNODE_NUM,
	PNODE_STR,
	PNODE_SEQ,
	PNODE_MAP,
};

struct pnode {
	enum pnode_type type;
	unsigned line, col;
	char *str; /* scalars: decoded text, NUL-terminated */
	size_t len;
	struct pnode **kids; /* SEQ: items; MAP: key, value, key, value... */
	size_t nkids;
	size_t cap;
};

struct pnode *policy_node_new(
    enum pnode_type type, unsigned line, unsigned col);
void policy_node_free(struct pnode *n);
int policy_node_add(struct pnode *parent, struct pnode *kid);
const char *policy_node_type_name(enum pnode_type t);

/*
 * Readers: bytes in, tree out. On a syntax error they return NULL and add
 * one diagnostic. An input that is empty or only whitespace yields a
 * PNODE_NULL root.
 */
struct pnode *policy_json_read(
    const char *buf, size_t len, const char *name, struct policy_diag *d);
struct pnode *policy_yaml_read(
    const char *buf, size_t len, const char *name, struct policy_diag *d);

/*
 * Reads a regular file of at most max bytes (NUL-terminated copy in *out;
 * the buffer is sized by the file, not by max). A missing file sets
 * *missing and adds no diagnostic.
 */
int policy_read_file(const char *path, size_t max, char **out, size_t *outlen,
    bool *missing, struct policy_diag *d);

void policy_diag_vadd(struct policy_diag *d, const char *name, unsigned line,
    unsigned col, const char *fmt, va_list ap)
    __attribute__((format(printf, 5, 0)));

/* ---- targets ---- */

/*
 * Parses a rule target into r (kind, target, display, prefix). Returns 0
 * or -1 with a message in e. Does not touch the other fields of r.
 */
int policy_target_parse(const char *in, struct policy_rule *r, struct err *e);
/* Name normalization; allow_wild accepts one leading "*.". */
int policy_name_norm(const char *in, size_t inlen, char *out, size_t outlen,
    bool allow_wild, struct err *e);
void policy_rule_clear(struct policy_rule *r);
int policy_rule_copy(struct policy_rule *dst, const struct policy_rule *src);
bool policy_rule_restricted(const struct policy_rule *r);

/* ---- compiled layers ---- */

struct policy_layer; /* domain hash tables + prefix tries of one rule list */

/* The host-level view: every rule but the deny request rules. */
struct policy_layer *policy_layer_build(
    const struct policy_rule *rules, size_t n);
/* Every rule, deny request rules included (the request matcher's view). */
struct policy_layer *policy_layer_build_all(
    const struct policy_rule *rules, size_t n);
void policy_layer_free(struct policy_layer *l);
/* Index of the first matching rule or -1 (its action in *act, whether it
 * has port/protocol limits in *restricted; both may be NULL). name is
 * normalized. */
long policy_layer_match_name(const struct policy_layer *l, const char *name,
    size_t len, enum policy_action *act, bool *restricted);
long policy_layer_match_addr(const struct policy_layer *l, int family,
    const uint8_t *addr, unsigned proto, uint16_t port);
/* Name rules restricted to ports or protocols in l. */
size_t policy_layer_nrestricted(const struct policy_layer *l);
/* Calls fn with the index of every rule of l matching name (normalized),
 * in list order, until fn returns false. Returns the number of calls. */
size_t policy_layer_each_name(const struct policy_layer *l, const char *name,
    size_t len, bool (*fn)(void *arg, size_t i), void *arg);

/*
 * Operator configuration shared (by reference) between a snapshot and
 * the snapshots that API mutations derive from it.
 */
struct policy_overlays {
	unsigned refs;
	struct policy_rule *deny, *allow, *log_skip;
	size_t ndeny, nallow, nlog_skip;
	/* The first n*_file rules came from the policy file itself, the
	 * rest from the always-rules directory (replaced on reload). */
	size_t ndeny_file, nallow_file, nlog_skip_file;
	struct policy_layer *ldeny, *lallow, *llog_skip;
	char *files[POLICY_FILES_MAX];
	size_t nfiles;
};

struct policy_config {
	unsigned refs;
	struct policy_rule *infra;
	size_t ninfra;
	struct policy_layer *linfra;
	struct policy_dns dns;
	struct policy_proxy proxy;
	struct policy_credential **credentials;
	size_t ncredentials;
	struct policy_binding **bindings;
	size_t nbindings;
	char *files[POLICY_FILES_MAX];
	size_t nfiles;
	/*
	 * Set only on the configuration that is the API's credential vault
	 * (policy_apicreds.c): its revision and each item's (parallel to
	 * credentials and bindings; NULL when there are none).
	 */
	uint64_t vault_revision;
	uint64_t *cred_rev, *bind_rev;
};

struct policy_index {
	struct policy_layer *user;
	/*
	 * Request rules (issue 37): how many user rules are request rules,
	 * and the user rules' layer with every rule for the request matcher
	 * (user itself, which leaves out deny request rules, when there are
	 * none: then both views are the same and this one is not built).
	 */
	size_t nrequest;
	struct policy_layer *user_all; /* NULL: use user */
	struct policy_overlays *ov;
	struct policy_config *cfg; /* the operator's file */
	/*
	 * The API's credential vault (credentials and bindings only), NULL
	 * when none exists. With one, the snapshot's credentials and
	 * bindings arrays are all_creds/all_binds: the operator's first, then
	 * the vault's (borrowed from the two configs, the arrays owned here).
	 */
	struct policy_config *vault;
	struct policy_credential **all_creds;
	struct policy_binding **all_binds;
	char *files[POLICY_FILES_MAX]; /* names user rules' locs point to */
	size_t nfiles;
};

struct policy_overlays *policy_overlays_new(void);
void policy_overlays_unref(struct policy_overlays *o);
/* Interns the rules' file names into o->files and (re)builds the three
 * layers from the lists; 0, or -1 on out of memory (o still unref-able). */
int policy_overlays_index(struct policy_overlays *o);
struct policy_config *policy_config_new(void);
void policy_config_unref(struct policy_config *c);
void policy_config_dns_defaults(struct policy_dns *dns);

/* Interns a file name in a pool; NULL when the pool is full. */
const char *policy_files_intern(char **files, size_t *nfiles, const char *name);

/*
 * Assembles a snapshot from user rules (taken over) and shared operator
 * configuration (referenced, may be NULL for empty), plus the API's
 * credential vault (referenced, NULL for none). Compiles the index.
 * Returns NULL only on allocation failure (rules and references are
 * released then).
 */
struct policy *policy_assemble(enum policy_action def, bool user_empty,
    struct policy_rule *rules, size_t nrules, struct policy_overlays *ov,
    struct policy_config *cfg, struct policy_config *vault, const char *source,
    uint64_t revision);
/* A copy of p's user rules (NULL when out of memory). */
struct policy_rule *policy_rules_dup(const struct policy *p);

/* Frees an array of rules. */
void policy_rules_free(struct policy_rule *rules, size_t n);

/* A rule list being built (loaders, overlays); v is the caller's to free
 * with policy_rules_free(v, n) or to hand on. */
struct policy_rvec {
	struct policy_rule *v;
	size_t n, cap;
};

/* Appends *r (moved in: its strings now belong to rv); 0 or -1 (out of
 * memory, r untouched). */
int policy_rvec_push(struct policy_rvec *rv, const struct policy_rule *r);

enum policy_schema {
	POLICY_SCHEMA_FILE, /* every top-level key */
	POLICY_SCHEMA_USER, /* defaultAction and egress only (API bodies) */
};

/*
 * Builds a snapshot from a parse tree. Returns NULL with diagnostics when
 * anything is invalid. A NULL root, an empty string or an empty mapping
 * is the deny-all reset (user_empty).
 */
struct policy *policy_from_tree(const struct pnode *root, const char *name,
    enum policy_schema schema, struct policy_diag *d);
/* One of the readers above. */
typedef struct pnode *(*policy_reader)(
    const char *buf, size_t len, const char *name, struct policy_diag *d);
/* read, then policy_from_tree() with the file schema: the body of
 * policy_parse_json() and policy_parse_yaml(). */
struct policy *policy_parse_with(policy_reader read, const char *buf,
    size_t len, const char *name, struct policy_diag *d);
/* Parses one rule list item (PATCH bodies); 0 or -1 with diagnostics. */
int policy_rules_from_tree(const struct pnode *seq, const char *name,
    struct policy_rule **rules, size_t *nrules, struct policy_diag *d);

#endif
