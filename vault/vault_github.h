/*
 * vault_github: what egressd sends a githubApp binding's API to mint an
 * installation token (issue 38 item 3), rendered by the vault since it
 * holds the App's private key, and how the token is written into the
 * requests it serves.
 *
 * The JWT (RFC 7519, RS256 per RFC 7518 §3.3): header
 * {"alg":"RS256","typ":"JWT"}, claims {"iat":now-60,"exp":now+540,
 * "iss":"<appId>"} (GitHub allows at most 10 minutes and advises the
 * minute back for clock drift), base64url without padding, signed with
 * the private key by OpenSSL's EVP. The key lives in the vault's arena
 * as the credential's PEM text; it is parsed into an EVP_PKEY only for
 * one signature and freed right after (OpenSSL clears the key's numbers
 * as it frees them), so no long-lived copy sits in the ordinary heap,
 * outside the locked, undumped arena. A mint is once an hour: the parse
 * costs nothing that matters. (During the parse and the signature the
 * key is in OpenSSL's memory too; its PEM decoder's buffers are
 * OpenSSL's to clear.)
 */
#ifndef EGRESSD_VAULT_GITHUB_H
#define EGRESSD_VAULT_GITHUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/policy_github.h"
#include "util/err.h"

#define VAULT_GITHUB_JWT_BACK_S 60 /* iat: now - this (clock drift) */
#define VAULT_GITHUB_JWT_LIFE_S 540 /* exp: now + this (GitHub: <= 600) */
#define VAULT_GITHUB_KEY_BITS_MIN 2048
/* An installation token is renewed a tenth of its lifetime before it
 * expires, at most this long before (5 minutes of an hour's token). */
#define VAULT_GITHUB_MARGIN_MAX_MS 300000u
#define VAULT_GITHUB_REQ_MAX (64u << 10) /* head, JWT and JSON body */
#define VAULT_GITHUB_USER "x-access-token" /* git's Basic user name */

/* Does pem[0..n) hold an unencrypted RSA private key of at least
 * VAULT_GITHUB_KEY_BITS_MIN bits? 0, or -1 and e (never a byte of it). */
int vault_github_key_check(const char *pem, size_t n, struct err *e);
/*
 * The App's JWT for now_s (seconds since the epoch) signed with pem's
 * key: malloc'd into *out (*len bytes, NUL-terminated; secret: the
 * caller wipes it). 0, or -1 and e.
 */
int vault_github_jwt(const char *pem, size_t n, const char *app_id,
    int64_t now_s, char **out, size_t *len, struct err *e);
/*
 * The installation-token request of a githubApp binding (g its settings,
 * pem[0..n) its key) at now_s: "POST {base}/app/installations/{id}/
 * access_tokens" with Authorization: Bearer <JWT>, Accept:
 * application/vnd.github+json, and {"repositories":[...],
 * "permissions":{...}} when the binding narrows the token; Connection:
 * close. malloc'd into *out (*len bytes; secret: the caller wipes it).
 * 0, or -1 and e.
 */
int vault_github_request(const char *pem, size_t n,
    const struct policy_github *g, int64_t now_s, uint8_t **out, size_t *len,
    struct err *e);
/* base64("x-access-token:" tok) into out (cap bytes, NUL-terminated):
 * its length, 0 when cap is too small. */
size_t vault_github_basic(const char *tok, size_t n, char *out, size_t cap);
/* The Basic form's length for a token of n bytes (without the NUL). */
size_t vault_github_basic_len(size_t n);
/*
 * Is the request to normalized path p[0..n) written in git's Basic form?
 * bearer/basic: as the binding says; auto: git smart HTTP (a path ending
 * "/info/refs", "/git-upload-pack" or "/git-receive-pack") and Git LFS
 * (a path holding "/info/lfs/") are, the rest (the REST API) is not.
 */
bool vault_github_basic_for(
    enum policy_github_form form, const char *p, size_t n);

#endif
