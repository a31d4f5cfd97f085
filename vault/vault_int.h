/*
 * vault_int: what vault.c, vault_forms.c, vault_redact.c and vault_subst.c
 * share (struct vault). Not for other modules.
 */
#ifndef EGRESSD_VAULT_INT_H
#define EGRESSD_VAULT_INT_H

#include "util/secmem.h"
#include "vault/vault.h"

#define VAULT_MAGIC 0x7661756cu /* "vaul" */

struct vault_cred {
	const char *name; /* borrowed from the policy */
	char *val; /* arena, NUL-terminated */
	size_t len;
	/* A basic binding uses it: the value is base64 of "user:password",
	 * and the redactor masks those decoded too (kept when retired). */
	bool basic;
	/* An oauth2 access or refresh token egressd was given (not a
	 * policy credential): retired ones are capped (VAULT_RETIRED_MINTED). */
	bool minted;
	/* An http source's value (vault_http.c): when it was fetched, is
	 * due for a refresh and stops being used (the vault's clock). Until
	 * the first fetch, val is "" and len 0: no pattern, never sent. */
	uint64_t fetched_ms, due_ms, until_ms;
};

/* One substitution of a binding (vault_subst.c). */
struct vault_sub {
	const char *ph; /* the placeholder, borrowed from the policy */
	size_t phlen;
	const struct vault_cred *c;
	unsigned in; /* POLICY_SUBST_* */
};

struct vault_bind {
	const struct policy_binding *b; /* borrowed from the policy */
	/* Lowercase names of the headers the auth writes (malloc'd). */
	char **lower;
	size_t nlower;
	/* The credential of each line written, in order. */
	const struct vault_cred **creds;
	size_t ncreds;
	size_t render_len; /* bytes of the rendered lines, NUL excluded */
	/* Substitutions, longest placeholder first (malloc'd). */
	struct vault_sub *subs;
	size_t nsubs;
	unsigned subst_in; /* union of their surfaces */
	/* awsSigV4 (vault_aws.c): the key id, the secret key, the session
	 * token (NULL: none); region and service as the binding states
	 * them (NULL: from the request's host). */
	const struct vault_cred *aws_id, *aws_secret, *aws_token;
	const char *aws_region, *aws_service;
	/* oauth2 (vault_oauth.c): the client secret and refresh token
	 * credentials (NULL when not named), the access token held (NULL:
	 * none yet) and a refresh token the server rotated (NULL: the
	 * credential's is current), both in v->creds[ncreds, nlive); when
	 * the token is due for renewal and when it expires (monotonic). */
	const struct vault_cred *secret, *refresh;
	const struct vault_cred *tok, *rtok;
	uint64_t tok_due_ms, tok_expires_ms;
	/* githubApp (vault_github.c): the App's private key (a PEM
	 * credential) and the token's Basic form for git,
	 * base64("x-access-token:<token>"), minted beside tok */
	const struct vault_cred *key, *tok_basic;
};

/* The skip filter's blocks (vault_redact.c skip_block): bytes, and the
 * bits of their hash (the shift table's size). */
#define VAULT_SKIP_BLOCK 4u
#define VAULT_SKIP_BITS 20u

/* A redaction pattern: len bytes at p (in the arena). */
struct vault_pat {
	const uint8_t *p;
	size_t len;
};

/* The patterns that share their first q bytes (vault_redact.c). */
struct vault_grp {
	uint64_t key; /* those bytes (grp_key) */
	uint32_t first, end; /* gpats[first, end), longest first; end 0: free */
};

/* Matcher tables, all in the arena (they reveal bytes of the values). */
struct vault_match {
	uint8_t *blob; /* every pattern's bytes */
	struct vault_pat *pats; /* sorted: first byte, then longest first */
	size_t npats;
	uint32_t start[257]; /* pats of first byte c: [start[c], start[c+1]) */
	uint8_t one[256]; /* a pattern of length 1 starts with c */
	uint8_t
	    pair[65536 / 8]; /* bit (c0 << 8 | c1): some pattern starts so */
	size_t maxlen;
	/*
	 * The skip filter (vault_redact.c): win is the window, the shortest
	 * pattern's length capped at VAULT_SKIP_WIN_MAX, 0 when shorter than
	 * VAULT_SKIP_WIN_MIN (then every position is probed). For k the
	 * hash of the window's last VAULT_SKIP_BLOCK bytes (skip_block): bit
	 * k of hit is set when some pattern holds such a block in its first
	 * win bytes, and then shift[k] says how far the window may move (0:
	 * some pattern may start at its first byte); else it moves far
	 * (win - VAULT_SKIP_BLOCK + 1). The map (128 KiB) is what clean
	 * bytes meet; the table (1 MiB), only the blocks of the forms.
	 */
	size_t win;
	uint64_t hit[(1u << VAULT_SKIP_BITS) / 64];
	uint8_t shift[1u << VAULT_SKIP_BITS];
	uint8_t far;
	/*
	 * Candidates by their first q bytes (the shortest pattern's length,
	 * at most 8; 0 when shorter than 4: then every pattern of the first
	 * byte is compared): a probe compares only the patterns that begin
	 * with the bytes at hand. Open addressing, gmask + 1 slots.
	 */
	size_t q;
	struct vault_pat *gpats;
	struct vault_grp *grp;
	size_t gmask;
};

struct vault {
	unsigned magic;
	unsigned refs;
	struct policy *p;
	struct secmem_arena *arena;
	/* creds[0, ncreds): the policy's credentials; [ncreds, nlive):
	 * oauth2 tokens minted (name: the binding's); [nlive, nall):
	 * retired values (name NULL), redacted only */
	struct vault_cred *creds;
	size_t ncreds, nlive, nall;
	struct vault_bind *binds;
	size_t nbinds;
	struct vault_match *m; /* arena; NULL when there are no values */
	uint64_t (*clock)(void *); /* minted tokens' freshness */
	void *clock_arg;
};

/*
 * The byte encoders of the rendered forms (vault_forms.c), shared with
 * the substitutions (vault_subst.c) so a substituted piece is, by
 * construction, in a form the redactor masks. Each writes the encoding
 * of c at o (when o is not NULL) and returns its length (at most 6).
 */
#define VAULT_PCT_LOWER 0x1u /* lower-case hex digits */
#define VAULT_PCT_PLUS 0x2u /* a space as '+' (forms) */
size_t vault_enc_pct(uint8_t c, unsigned flags, const char *keep, uint8_t *o);
#define VAULT_JSON_SLASH 0x1u /* '/' as "\/" */
#define VAULT_JSON_HTML 0x4u /* <, >, & as \u003c... (Go's json.Marshal) */
size_t vault_enc_json(uint8_t c, unsigned flags, uint8_t *o);

/*
 * The patterns of the forms of credential c (vault_forms.c) appended to
 * f: the forms' bytes at buf[off..] (cap bytes in all), the patterns at
 * pats[npats..] (pcap in all), pointing into buf. With buf and pats NULL
 * nothing is written and off and npats count what would be: the sizes a
 * build needs, exactly (before duplicates are dropped).
 */
struct vault_forms {
	uint8_t *buf; /* arena; NULL: count only */
	size_t off, cap;
	struct vault_pat *pats; /* arena (NULL when counting) */
	size_t npats, pcap;
};
void vault_forms_cred(struct vault_forms *f, const struct vault_cred *c);

/* Builds v->m from v->creds (vault_redact.c): 0, or -1 and e. */
int vault_redact_build(struct vault *v, struct err *e);
/* Bytes the matcher of these credentials needs in the arena (an upper
 * bound), or SIZE_MAX beyond VAULT_PATTERN_BYTES_MAX. */
size_t vault_redact_arena_need(const struct vault_cred *c, size_t n);

/* The header name of line i of binding vb, as the binding spells it, and
 * the prefix of its value ("Bearer ", "Basic " or none) (vault.c). */
const char *vault_line_name(const struct vault_bind *vb, size_t i);
const char *vault_line_prefix(const struct vault_bind *vb);

/* An awsSigV4 binding's part of the build (vault_aws.c): its
 * credentials found among creds[0..n), the headers it removes and
 * writes into vb->lower (lower_dup'd; room for VAULT_AWS_REMOVED),
 * render_len sized for its lines. 0, or -1 and e (a reference the
 * loader should have refused, a secret key too long to sign with, out
 * of memory). */
#define VAULT_AWS_REMOVED 4u
int vault_aws_bind(struct vault_bind *vb, const struct vault_cred *creds,
    size_t n, struct err *e);
/* A token to put in force in one binding (vault_mint). */
struct vault_token;
struct vault_oauth_mint {
	const char *binding;
	const struct vault_token *t;
	uint64_t now_ms;
};
/*
 * v's minted values (vault_oauth.c), into v->creds[nlive...] and the
 * oauth2 bindings' vault_bind (secret, refresh, tok, rtok, due times),
 * before bind_init: prev's for each binding of the same name whose
 * settings and credential values did not change, mint's token (and
 * rotated refresh token) in its binding. 0, or -1 and e.
 */
int vault_oauth_carry(struct vault *v, const struct vault *prev,
    const struct vault_oauth_mint *mint, struct err *e);
/* The vault_bind of the binding named name, NULL if none (vault_oauth.c). */
const struct vault_bind *vault_oauth_bind(
    const struct vault *v, const char *name);

/* A value fetched for one http credential (vault_http_set). */
struct vault_http_fetched {
	const char *cred;
	const char *val;
	size_t len;
	uint32_t ttl_s;
	uint64_t now_ms;
};
/*
 * The value of http credential c (policy credential pc) in v's arena
 * (vault_http.c): prev's when prev has one of that name and the same
 * settings, else none yet (""). 0, or -1 and e.
 */
int vault_http_carry(struct vault *v, struct vault_cred *c,
    const struct policy_credential *pc, const struct vault *prev,
    struct err *e);
/* hf's value put in its credential of v (values copied already): 0, or
 * -1 and e. */
int vault_http_apply(
    struct vault *v, const struct vault_http_fetched *hf, struct err *e);
/* A fixed text when a credential vb uses is an http source's without a
 * value in use now (none yet, or past maxStale), else NULL. */
const char *vault_http_unusable(
    const struct vault *v, const struct vault_bind *vb);

#endif
