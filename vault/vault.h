/*
 * vault: the Credential Vault's runtime (issue 18, contract §4). One
 * struct vault is one revision: the bindings of a policy snapshot and the
 * secret values of its credentials, the values only in a locked secmem
 * arena (mlock, MADV_DONTDUMP, guard pages, wiped on free). The proxy asks
 * it, per request on a terminated connection, what to inject
 * (vault_decide), and sweeps the responses of such connections with a
 * streaming redactor.
 *
 * Pure: no sockets, no event loop, no logging; the only I/O is reading
 * file-source credentials in vault_new. Not thread-safe (one event loop).
 * No function returns a secret except as rendered header lines in
 * struct vault_inject (arena memory, wiped by vault_inject_clear) and as
 * the masked stream the redactor emits; no error message ever holds one.
 *
 * Placeholder substitutions (contract §4 "substitutions", vault_subst.c)
 * are applied by the proxy on an injected request through vault_subst:
 * the rewritten piece is the only other form in which a value leaves the
 * vault (a malloc'd buffer the caller wipes once it is sent). A
 * passthrough binding injects no line and only substitutes.
 */
#ifndef EGRESSD_VAULT_H
#define EGRESSD_VAULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/policy.h"
#include "policy/policy_binding.h"
#include "util/err.h"

/*
 * Bounds. The rendered forms of every value (vault_redact.c) are the
 * redactor's patterns, whole or in pieces (VAULT_PIECE_MIN); the forms'
 * bytes together are at most VAULT_PATTERN_BYTES_MAX and the patterns
 * at most VAULT_PATTERNS_MAX (vault_new fails beyond: some 100 bytes of
 * locked arena each). The arena holds the values, the patterns and
 * VAULT_LINES_INFLIGHT rendered injections at once (a vault_decide
 * beyond that fails: clear each vault_inject as soon as its lines are
 * written out).
 */
#define VAULT_PATTERN_BYTES_MAX (8u << 20)
#define VAULT_PATTERNS_MAX (1u << 20)
#define VAULT_LINES_INFLIGHT 64u
#define VAULT_LINES_ARENA_MAX (16u << 20) /* arena bytes for lines */
/* remove[]: one name per customHeaders header, proxy-authorization and
 * the VAULT_OVERRIDE_HEADERS method-override headers. */
#define VAULT_OVERRIDE_HEADERS 3u
#define VAULT_REMOVE_MAX (POLICY_BINDING_LIST_MAX + 1 + VAULT_OVERRIDE_HEADERS)
#define VAULT_METHOD_MAX 32 /* longer method tokens match no binding */

struct vault;
struct vault_bind;

/*
 * Values kept after a rotation: a new revision also redacts the values
 * of the revision before it that it no longer holds (a credential
 * rotated, replaced or deleted), the most recent VAULT_RETIRED_MAX, so
 * an origin that returns a key it saw before the rotation (an error
 * message, a request log) still has it masked. Retired values are only
 * redaction patterns: never injected, never substituted. They live as
 * long as the revisions that carry them, in the same arena.
 */
#define VAULT_RETIRED_MAX 16u

/*
 * Builds one revision from p (takes its own policy_ref; released when the
 * last reference goes), and carries the retired values of prev (the
 * revision in force until now, borrowed; NULL at start-up): prev's values
 * p no longer has, most recent first (prev's own, then prev's retired),
 * while they fit VAULT_RETIRED_MAX and VAULT_PATTERN_BYTES_MAX (a full
 * set drops the oldest, never fails the build). Every credential's value
 * is exported (inline) or read (file source) into the arena. File sources
 * are read like the API token file: through links (a Kubernetes Secret
 * volume's files are links into ..data/), owned by root or egressd's user
 * and writable by no one else, and so are the directories of the link and
 * of its target (FILEREAD_OWNED | FILEREAD_DIRS); one trailing "\n" or
 * "\r\n" is dropped. A value must be 1..POLICY_SECRET_MAX bytes without
 * CR, LF or NUL (a githubApp binding's privateKey, a PEM never written
 * into a header, may hold CR and LF). NULL and e on failure; e names the
 * credential (and the file), never a value.
 */
struct vault *vault_new(
    const struct policy *p, const struct vault *prev, struct err *e);
/* Another reference (a connection keeping its revision across a swap). */
struct vault *vault_ref(struct vault *v);
/* Drops a reference; the last one wipes the arena and unrefs the policy.
 * NULL is a no-op. */
void vault_free(struct vault *v);
size_t vault_nbindings(const struct vault *v);
/* Retired values the revision redacts (0..VAULT_RETIRED_MAX). */
size_t vault_nretired(const struct vault *v);
/* The policy snapshot the vault was built from (borrowed). */
const struct policy *vault_policy(const struct vault *v);
/* False when the kernel refused to lock the arena in memory (mlock:
 * RLIMIT_MEMLOCK without CAP_IPC_LOCK), so its values may be swapped
 * out. The daemon says so (vault.mlock_failed) or fails to start. */
bool vault_locked(const struct vault *v);

/*
 * Could any binding match a request to host on port (443 → https, 80 →
 * http, any other port: false)? host is folded and one trailing dot
 * dropped first; an invalid name or an address literal is never bound.
 * The proxy terminates TLS exactly then.
 */
bool vault_host_bound(const struct vault *v, const char *host, uint16_t port);

struct vault_req {
	unsigned scheme; /* POLICY_SCHEME_HTTPS / _HTTP */
	const char *host; /* = SNI, lowercase */
	uint16_t port; /* 0: the scheme's default */
	const char *method;
	size_t method_len;
	const char *path; /* raw origin-form path, query split off */
	size_t path_len;
	/* The raw query, after '?' and without it; NULL or 0: none. */
	const char *query;
	size_t query_len;
};

enum vault_decision {
	VAULT_NO_MATCH, /* forward untouched (norm_path if set) */
	VAULT_INJECTED, /* remove[] then add lines (passthrough: no lines) */
	VAULT_AMBIGUOUS, /* answer status (403), forward nothing */
	VAULT_REFUSED, /* answer status (400 or 403), forward nothing */
	/* an oauth2 binding (binding) holds no fresh access token: forward
	 * nothing yet; mint one (vault_oauth.h) and decide again on the
	 * revision that holds it */
	VAULT_MINT,
};

struct vault_inject {
	enum vault_decision decision;
	/* VAULT_REFUSED/AMBIGUOUS: 400 (path refused by
	 * policy_path_normalize: %2e%2e is resolved, but %2f %5c %00, a
	 * backslash, "//", "..;" are refused; or a request that would be
	 * injected names "_method" in its query) or 403 (ambiguous; TRACE
	 * or TRACK, any case, to a bound host). 0 otherwise. */
	int status;
	/* Fixed text, safe to log and to send. Always set. */
	const char *reason;
	/* The binding's name (borrowed from the policy), NULL if none. */
	const char *binding;
	/* The normalized path (malloc'd, not secret): what to forward. NULL
	 * when the path did not normalize and the host is not bound (then
	 * NO_MATCH: forward the request as it came) and for REFUSED 400. */
	char *norm_path;
	size_t norm_path_len;
	/*
	 * Header names (lowercase, static or borrowed from the vault) the
	 * proxy removes from the client's request before adding lines: every
	 * header the injection writes, and proxy-authorization always (on
	 * every decision, NO_MATCH included). VAULT_INJECTED also removes
	 * x-http-method-override, x-http-method and x-method-override:
	 * frameworks that honour them would run a binding scoped to GET as
	 * a POST or a DELETE. Deduplicated.
	 */
	const char *remove[VAULT_REMOVE_MAX];
	size_t nremove;
	/* "Name: value\r\n"... NUL-terminated, in the vault's arena (secret).
	 * NULL/0 when nothing is written. */
	char *lines;
	size_t lines_len;
	/* VAULT_INJECTED: the POLICY_SUBST_* surfaces some substitution of
	 * the binding lists (0: none; vault_subst would change nothing). */
	unsigned subst_in;
	/* The binding (vault_subst reads its substitutions); NULL unless
	 * VAULT_INJECTED. */
	const struct vault_bind *bind;
	/* VAULT_INJECTED by an awsSigV4 binding: no lines yet; the proxy
	 * signs the request as it forwards it (vault_aws_sign), which
	 * writes lines, may rewrite norm_path and sets query. */
	bool sign;
	/* The query to forward instead of the client's (malloc'd, not
	 * secret; "" for none), NULL: the client's as it came. */
	char *query;
	size_t query_len;
};

/*
 * Matches rq per contract §4 (policy_binding_match on the normalized
 * path; exact host beats wildcard) and renders: bearer → "Authorization:
 * Bearer v", basic → "Authorization: Basic v" (v already base64), apiKey
 * → "{name}: v", customHeaders → one line per header, passthrough → no
 * line. Header names are written as the binding spells them.
 * When injecting, the proxy should also send "Accept-Encoding: identity"
 * (issue 18 §7); that is not part of lines.
 * A request that would be injected is REFUSED (400) instead when its
 * query has a parameter whose name is "_method" (Rails, Laravel,
 * Symfony, method-override for Express read it as the method to run):
 * parameters split at '&' and ';', the name up to '=', percent-decoded
 * ('+' as a space), leading spaces dropped and ' ', '.' and '[' read
 * as '_' (PHP's mangling of names), compared without case. The
 * binding matched the request line's method, and the origin must run
 * that one.
 * 0 with *out filled (clear it with vault_inject_clear whatever the
 * decision), or -1 and e when memory ran out (the arena too: more than
 * VAULT_LINES_INFLIGHT injections held): forward nothing then (503).
 */
int vault_decide(struct vault *v, const struct vault_req *rq,
    struct vault_inject *out, struct err *e);
/*
 * vault_decide for a request whose host the caller found bound already
 * (vault_host_bound(v, rq->host, rq->port) true: the proxy asks before
 * it fills rq), so the host is not normalized and looked up again. A
 * wrong "bound" widens nothing: no binding matches an unbound host.
 */
int vault_decide_bound(struct vault *v, const struct vault_req *rq,
    struct vault_inject *out, struct err *e);
/* Wipes and frees lines, frees norm_path, zeroes *out. */
void vault_inject_clear(struct vault *v, struct vault_inject *out);

/*
 * awsSigV4 (vault_aws.c, issue 38). A request an awsSigV4 binding
 * matches is decided VAULT_INJECTED with sign set, its remove[] holding
 * authorization, x-amz-date, x-amz-security-token and
 * x-amz-content-sha256 (the sandbox's signature, whatever fake key made
 * it, never goes on), unless its query is presigned
 * (vault_sigv4_presigned: REFUSED 403). The proxy then calls
 * vault_aws_sign with what it forwards, and the request is signed as
 * AWS specifies (vault_sigv4.h): the canonical URI of norm_path (for S3
 * norm_path is rewritten into that form, so what is signed is what is
 * sent), the canonical query (forwarded instead of the client's), the
 * headers host, x-amz-date, x-amz-content-sha256, x-amz-security-token
 * when the binding has a session token, and those of the client's that
 * vault_aws_header_signed names; the payload hash of body, or
 * UNSIGNED-PAYLOAD (or S3's STREAMING-UNSIGNED-PAYLOAD-TRAILER) where
 * the proxy says so (S3 over TLS only: the caller decides, see
 * VAULT_AWS_BODY_MAX). The region and service are the
 * binding's or the host's (policy_aws_scope).
 */
#define VAULT_AWS_BODY_MAX VAULT_SUBST_BODY_MAX /* bytes hashed, at most */

struct vault_sigv4_hdr;

struct vault_aws_req {
	const char *host; /* the Host value forwarded: name, ":port" if any */
	const char *name; /* the host name alone (the scope's source) */
	const char *method;
	size_t method_len;
	const char *query; /* the client's raw query; NULL: none */
	size_t query_len;
	/* The client's headers vault_aws_header_signed names, as sent. */
	const struct vault_sigv4_hdr *h;
	size_t nh;
	const void *body; /* hashed unless payload is set */
	size_t blen;
	/* NULL: the SHA-256 of body; else VAULT_SIGV4_UNSIGNED or
	 * VAULT_SIGV4_UNSIGNED_TRAILER (vault_sigv4.h), taken as it is */
	const char *payload;
	int64_t now; /* seconds since the epoch (UTC) */
};

/* content-type, content-md5 and x-amz-* but the four removed: the
 * client's headers a signature covers (S3 wants every x-amz-* signed). */
bool vault_aws_header_signed(const char *name, size_t n);
/* Whether vi (VAULT_INJECTED, sign) signs for S3: no double-encoded
 * path, and UNSIGNED-PAYLOAD is acceptable over TLS. */
bool vault_aws_is_s3(const struct vault_inject *vi, const char *name);
/*
 * Signs for vi (from vault_decide on v, sign set): vi->lines gets the
 * Authorization, X-Amz-Date, X-Amz-Content-Sha256 (and
 * X-Amz-Security-Token) lines in the arena. 0 (decided: still
 * VAULT_INJECTED, or REFUSED with status and reason when the request
 * cannot be signed: too many headers, a query or path out of bounds);
 * -1 and e when memory ran out.
 */
int vault_aws_sign(struct vault *v, struct vault_inject *vi,
    const struct vault_aws_req *rq, struct err *e);

/*
 * Placeholder substitutions (vault_subst.c). On a VAULT_INJECTED request,
 * every substitution {credential, placeholder, in} of the matched binding
 * replaces each occurrence of the literal placeholder with the credential's
 * value, on the surfaces it lists only, encoded for the surface:
 * - VAULT_SURFACE_PATH, _QUERY: percent-encoded, every byte but the RFC
 *   3986 unreserved ones (ALPHA DIGIT - . _ ~) as "%XY" (upper-case hex);
 * - VAULT_SURFACE_HEADER: the raw value; a header value that would hold
 *   CR, LF or NUL after substitution is refused (the request is answered
 *   400 and nothing is forwarded). Headers vault_subst_header_ok refuses
 *   are never substituted;
 * - VAULT_SURFACE_JSON (body, application/json or a "+json" type): JSON
 *   string escaping ('"', '\\' and control bytes escaped; the placeholder
 *   is expected inside a JSON string);
 * - VAULT_SURFACE_FORM (body, application/x-www-form-urlencoded): form
 *   encoding (unreserved kept, space as '+', the rest "%XY").
 * These are byte for byte forms the redactor masks (the value percent-
 * and JSON-encoded), so an origin echoing a substituted piece back is
 * redacted like an injected header. Occurrences are found left to right,
 * the longest placeholder first where several start at one byte; a
 * replaced value is never scanned again. Placeholders are not secret.
 *
 * On the percent-encoded surfaces (path, query, form) a placeholder byte
 * may also come as %XX (either case), and a form's space as '+': clients
 * encode placeholders like "{{KEY}}" there.
 *
 * Bodies: only a body of at most VAULT_SUBST_BODY_MAX bytes, without a
 * Content-Encoding, of a JSON or form type (vault_subst_body_surface) is
 * rewritten; the proxy holds it whole (a chunked one decoded, without a
 * trailer section) and sends it with a Content-Length. Larger,
 * compressed, multipart or other bodies are forwarded as they came
 * (placeholders included).
 */
#define VAULT_SUBST_BODY_MAX (1u << 20) /* body bytes rewritten, at most */
/* What substitutions may make of one request: a body at most
 * VAULT_SUBST_BODY_OUT_MAX bytes, the path, query and header values
 * together at most VAULT_SUBST_HEAD_MAX; beyond, the request is refused. */
#define VAULT_SUBST_BODY_OUT_MAX (4u << 20)
#define VAULT_SUBST_HEAD_MAX (256u << 10)

enum vault_surface {
	VAULT_SURFACE_NONE, /* a body left alone */
	VAULT_SURFACE_PATH,
	VAULT_SURFACE_QUERY,
	VAULT_SURFACE_HEADER,
	VAULT_SURFACE_JSON,
	VAULT_SURFACE_FORM,
};

enum vault_subst_rc {
	VAULT_SUBST_NOMEM = -1, /* out of memory: forward nothing (503) */
	VAULT_SUBST_NONE = 0, /* no placeholder there: forward in as it is */
	VAULT_SUBST_DONE = 1, /* *out holds the rewritten piece */
	VAULT_SUBST_REFUSED = 2, /* a header value with CR, LF or NUL: 400 */
	VAULT_SUBST_TOO_LARGE = 3, /* the rewrite exceeds max: 413 / 431 */
};

/*
 * The body surface of a request: ctype/ctype_len its one Content-Type
 * value, cenc/cenc_len its Content-Encoding (NULL when absent; "identity"
 * counts as absent). JSON for application/json and application/...+json,
 * FORM for application/x-www-form-urlencoded (media types case-
 * insensitive, parameters ignored), NONE for anything else: no or
 * several types (the caller passes NULL), multipart, any encoding.
 */
enum vault_surface vault_subst_body_surface(
    const char *ctype, size_t ctype_len, const char *cenc, size_t cenc_len);
/* False for the header names substitutions never touch (case-insensitive):
 * those that frame the request or name its host (contract §4's reserved
 * names: host, content-length, transfer-encoding, ...). */
bool vault_subst_header_ok(const char *name, size_t n);
/*
 * Rewrites in[0..n), a piece of surface s of the request vi was decided
 * for (borrows v and vi, which must be the pair vault_decide filled).
 * VAULT_SUBST_DONE: *out (malloc'd, secret: the caller wipes it, e.g. with
 * vault_subst_free, once it is sent) holds *outlen bytes. NONE when vi is
 * not VAULT_INJECTED, no substitution of its binding lists the surface,
 * no placeholder occurs, or a body surface's n exceeds
 * VAULT_SUBST_BODY_MAX. TOO_LARGE when the result would exceed max bytes;
 * REFUSED for a header value holding CR, LF or NUL after substitution;
 * NOMEM. e says why (never a value) for the last three.
 */
enum vault_subst_rc vault_subst(const struct vault *v,
    const struct vault_inject *vi, enum vault_surface s, const void *in,
    size_t n, size_t max, uint8_t **out, size_t *outlen, struct err *e);
/* Wipes and frees a vault_subst result; NULL is a no-op. */
void vault_subst_free(uint8_t *out, size_t len);

/*
 * Redaction (vault_redact.c). The patterns come from every secret value
 * of the vault (all credentials, retired ones too) in each rendered
 * form: the value; "Bearer v"; its base64, standard and URL alphabets,
 * at each of the three alignments (the value anywhere in a longer
 * encoded string: the characters all of whose bits are the value's,
 * then the zero-padded tail; unpadded, so padded occurrences match too;
 * at alignments 1 and 2 only with VAULT_FORM_MIN such characters or
 * more), also wrapped at line breaks (MIME, PEM; form_wrapped below);
 * its hex, lower and upper case (values of VAULT_FORM_MIN / 2 bytes or
 * more); its percent-encoded forms (upper- and lower-case hex; '+' for
 * space; '/' or "!'()*" kept) and its JSON-escaped forms ("\/" for '/'
 * or not, \uXXXX for non-ASCII or for < > &), each when it differs from
 * the raw value. For a credential a basic binding uses (its value is
 * base64 of "user:password"), the decoded "user:password" and the
 * password alone, each in all those forms too.
 *
 * Pieces: a form whose secret part (without fixed text such as
 * "Bearer ") is longer than VAULT_PIECE_MIN bytes is matched by each of
 * its VAULT_PIECE_MIN-byte runs, so a value read back in slices (Range,
 * pagination, substring APIs, truncated messages) loses every run of
 * VAULT_PIECE_MIN bytes of any of its forms; a shorter form is matched
 * whole. Why 12: a run of 12 of a key's characters carries some 72 bits
 * (base64 or an API key's alphabet; 48 in hex): no text meets one by
 * chance, so pieces cost no false positives, and the holdback of a
 * stream shrinks to 18 bytes ("Bearer v" of a longer value is matched as
 * "Bearer " and its first piece, then the value's pieces: whole). Shorter
 * slices pass: an origin that hands back 11 bytes at a time is beyond
 * any redactor (docs/security.md). The cost: a public run of 12 inside
 * a value (a key prefix such as "sk-ant-api03-", 13 bytes) is masked
 * wherever it occurs, in documentation and error text too; that hides
 * only text naming the key's kind, never data the sandbox needs.
 * Matching is byte-exact; every occurrence is covered, overlapping ones
 * included.
 *
 * The matcher is a first-byte table (candidates sorted longest first)
 * behind a two-byte bitmap, then a table of the patterns by their first
 * (up to 8) bytes: one table probe per byte of response that starts no
 * pattern; at most the patterns sharing those bytes otherwise (bounded
 * by VAULT_PATTERNS_MAX). Streams put a skip filter in front (Wu-Manber,
 * four-byte blocks hashed to VAULT_SKIP_BITS, a 128 KiB map of those
 * the forms hold and a 1 MiB shift table for them):
 * where the response shares little with the forms, one probe per up to
 * (shortest pattern - 3) bytes. Tables and patterns live in the arena.
 */
#define VAULT_PIECE_MIN 12u
/* Forms new in issue 34 (shifted base64, hex) need this many characters
 * determined by the value: fewer would occur in ordinary text. */
#define VAULT_FORM_MIN 8u
/*
 * Wrapped base64 (vault_redact.c form_wrapped): no run of VAULT_PIECE_MIN
 * bytes of a base64 form with one line break ("\n" or "\r\n") inside
 * passes, in lines of at least VAULT_PIECE_MIN bytes (MIME 76, PEM 64): a
 * form of fewer than 2 VAULT_PIECE_MIN bytes is also a pattern (whole or
 * in pieces) with the break in, and in a longer one a piece of it lies on
 * one side of the break or the other.
 */

struct vault_redactor;

/* Per response stream; borrows v (which must outlive it). NULL when out
 * of memory. Small: it holds at most vault_redact_holdback(v) bytes of
 * the stream, plus twice that for windows across pieces. */
struct vault_redactor *vault_redactor_new(const struct vault *v);

/*
 * The in-place interface: the caller keeps the response bytes (e.g. in
 * an evbuffer's chains) and the redactor reads them where they are and
 * tells the caller, in stream order, what to do with each span of them:
 * - flags 0: n clean bytes of the caller's input (p points at them):
 *   send them as they are (move them, no copy needed);
 * - VAULT_SPAN_MASKED: n bytes covered by a match (p is NULL): send n
 *   '*' instead (drop the caller's bytes when not VAULT_SPAN_HELD);
 * - VAULT_SPAN_HELD (with or without MASKED): bytes the redactor held
 *   from an earlier scan, not the caller's input: copy them from p;
 * - VAULT_SPAN_KEPT: n bytes of the caller's input the redactor copied
 *   to hold them (p is NULL): consume them, send nothing.
 * Every byte of seg[] is in exactly one span without VAULT_SPAN_HELD,
 * held spans come first. The callback may consume the caller's bytes of
 * a span at once (the redactor never reads a byte again once it is in a
 * span) but must not move the bytes that follow it: dropping bytes from
 * the front of an evbuffer (evbuffer_remove_buffer, evbuffer_drain)
 * leaves the rest where it is.
 * Modes: MORE (bytes follow: hold the last longest-pattern - 1), FLUSH
 * (the origin paused: release all that cannot begin a match), END (the
 * stream ended: release everything; r can then start a new stream).
 */
#define VAULT_SPAN_MASKED 0x1u
#define VAULT_SPAN_HELD 0x2u
#define VAULT_SPAN_KEPT 0x4u
enum vault_redact_mode {
	VAULT_REDACT_MORE,
	VAULT_REDACT_FLUSH,
	VAULT_REDACT_END,
};
struct vault_seg {
	const uint8_t *p;
	size_t n;
};
typedef void (*vault_span_fn)(
    void *arg, const uint8_t *p, size_t n, unsigned flags);
void vault_redact_scan(struct vault_redactor *r, const struct vault_seg *seg,
    size_t nseg, enum vault_redact_mode mode, vault_span_fn out, void *arg);

/*
 * The copying interface (vault_redact_scan with one piece):
 * consumes in[0..n) and calls emit with output bytes: the input with
 * every byte covered by a match replaced by '*' (length-preserving, so
 * Content-Length and chunk sizes stay valid). Holds back at most the
 * longest pattern's length - 1 bytes, so a match split across feeds is
 * still caught. The emitted buffer is valid during the call only.
 */
void vault_redact_feed(struct vault_redactor *r, const uint8_t *in, size_t n,
    void (*emit)(void *arg, const uint8_t *p, size_t n), void *arg);
/* Flushes the held bytes (the stream ended); r can be fed again. */
void vault_redact_finish(struct vault_redactor *r,
    void (*emit)(void *arg, const uint8_t *p, size_t n), void *arg);
/*
 * Emits every held byte that can no longer start a match (no pattern
 * begins with the bytes from it to the end of what is held), masked as
 * needed; keeps the rest. For streams that pause (SSE, long polls): the
 * client gets what was sent, minus only a possible secret's beginning.
 */
void vault_redact_flush(struct vault_redactor *r,
    void (*emit)(void *arg, const uint8_t *p, size_t n), void *arg);
/* Wipes and frees; NULL is a no-op. */
void vault_redactor_free(struct vault_redactor *r);
/* The most bytes a feed may hold back (longest pattern - 1). */
size_t vault_redact_holdback(const struct vault *v);

/* Does any pattern occur in p[0..n)? (A response head with none is
 * forwarded as it came.) */
bool vault_redact_any(const struct vault *v, const void *p, size_t n);

/*
 * Header (and trailer) values: each maximal run of bytes covered by
 * matches becomes "[REDACTED]". A malloc'd new string (NUL-terminated,
 * length in *outlen) or NULL when nothing matched (or out of memory:
 * then *outlen is SIZE_MAX and the caller drops the header).
 */
char *vault_redact_header(
    const struct vault *v, const char *value, size_t n, size_t *outlen);

/*
 * OAuth2 (issue 38): an oauth2 binding's access token, and a refresh
 * token its server rotated, are values of the revision like a
 * credential's (in the arena, redacted in every form), minted by
 * egressd: vault_decide answers VAULT_MINT while the binding holds none
 * or the one it holds is due for renewal (vault_oauth.h says when), and
 * vault_mint makes the revision that holds a fresh one. A new revision
 * of the same policy (vault_new with prev) carries prev's minted values
 * of each binding whose oauth2 settings and credential values did not
 * change; a replaced token is retired like a rotated credential (at most
 * VAULT_RETIRED_MINTED of the retired values are minted ones, so short-
 * lived tokens never push an operator's rotated key out).
 */
#define VAULT_RETIRED_MINTED 4u
struct vault_token;
/*
 * A new revision: v's (borrowed) values and minted values, with the
 * binding named binding holding t's access token (and t's refresh token
 * when the server rotated it), fresh from now_ms (the revision's clock)
 * for t's lifetime. NULL and e (never a value) on failure.
 */
struct vault *vault_mint(const struct vault *v, const char *binding,
    const struct vault_token *t, uint64_t now_ms, struct err *e);
/*
 * HTTP credential sources (vault_http.h): a new revision: v's values, with the http credential named cred
 * holding val[0..len) fetched at now_ms (the vault's clock), refreshed
 * after ttl_s (0: the policy's or the default; capped by the policy's).
 * The value it replaces is retired (still redacted). NULL and e (never
 * a value) on failure.
 */
struct vault *vault_http_set(const struct vault *v, const char *cred,
    const char *val, size_t len, uint32_t ttl_s, uint64_t now_ms,
    struct err *e);
/* The clock that says whether a minted token is due (now_mono_ms by
 * default; tests step their own). Revisions made from v keep it. */
void vault_set_clock(struct vault *v, uint64_t (*clock)(void *), void *arg);

#endif
