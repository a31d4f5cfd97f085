/*
 * policy_path: the strict normalizer of request paths. Its output is what
 * the binding matcher compares against (policy_binding.h), and what the
 * proxy should forward, so that egressd and the upstream judge one path.
 *
 * Pure: bytes and a bound in, bytes or an error out.
 */
#ifndef EGRESSD_POLICY_PATH_H
#define EGRESSD_POLICY_PATH_H

#include <stddef.h>

#include "util/err.h"

#define POLICY_REQ_PATH_MAX 8192 /* bytes of a request path, raw */

/*
 * Normalizes the path of an origin-form request target (the query split
 * off by the caller) into out:
 * - it must start with '/', hold at most POLICY_REQ_PATH_MAX bytes, and
 *   only RFC 3986 pchar bytes and '/': no NUL, control, space, backslash,
 *   '?', '#', non-ASCII or other delimiters;
 * - percent-encodings must be "%XY" with two hex digits; an encoded
 *   unreserved byte (ALPHA DIGIT - . _ ~) is decoded, every other one is
 *   kept with upper-case hex; an encoded '/', '\\' or NUL is refused
 *   (their meaning differs between servers);
 * - empty segments ("//") are refused except the last one (a trailing
 *   '/'), and so is a segment that starts with "." or ".." followed by
 *   ';' or "%3B" (either case, "%2e;" too): ".;", "..;x", "..%3B",
 *   ".%3b": servers that strip path parameters before resolving dot
 *   segments (Tomcat, Spring) read "/..;/" as "/../";
 * - what a server that percent-decodes twice would resolve differently is
 *   refused, anywhere in the path (before dot segments are removed):
 *   "%25", after any further "25"s, followed by the hex of '.', '/',
 *   '\\', ';', '?', '#' or NUL in either case ("%252e", "%252F",
 *   "%25252e", "%253B"; "%25%32%65" is "%252e" once decoded, so it is
 *   refused too). "%25" before anything else stays ("100%25" is fine);
 * - "%C0" and "%C1" are refused: lead bytes of overlong UTF-8 encodings
 *   of ASCII ("%C0%AE" is '.' to a lax decoder), never valid UTF-8;
 * - dot segments ("." and "..", also when encoded: %2e%2e) are removed per
 *   RFC 3986 §5.2.4 (".." at the root stays at the root).
 * out gets the result NUL-terminated, *outlen (may be NULL) its length;
 * the result is never longer than the input, so outsize len + 1 always
 * suffices. Returns 0, or -1 with the reason in e (output undefined).
 * Normalizing the output again gives the same bytes.
 */
int policy_path_normalize(const char *in, size_t len, char *out, size_t outsize,
    size_t *outlen, struct err *e);

#endif
