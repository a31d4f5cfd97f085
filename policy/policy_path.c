/*
 * policy_path: the strict request path normalizer (policy_path.h).
 *
 * Two passes over a copy in out: the first checks every byte and decodes
 * the percent-encodings of unreserved bytes (so "%2e%2e" is ".." for the
 * second pass, as it is for servers that decode before resolving), the
 * second removes dot segments (RFC 3986 §5.2.4) in place. Neither pass
 * lengthens the text, so writing stays behind reading.
 */
#include <stdbool.h>
#include <string.h>

#include "policy/policy_path.h"
#include "util/text.h"

/* RFC 3986 pchar without pct-encoded, plus '/'. */
static bool
path_char(unsigned char c)
{
	/* c != 0 first: strchr() finds a set's terminator, so a raw NUL
	 * would pass as a path character. */
	return text_unreserved(c) ||
	    (c != '\0' && strchr("!$&'()*+,;=:@/", c) != NULL);
}

static int
bad_byte(unsigned char c, struct err *e)
{
	if (c == '\0')
		err_set(e, "NUL in path");
	else if (c == '\\')
		err_set(e, "backslash in path");
	else if (c == '?' || c == '#')
		err_set(e, "query or fragment in path (split it off first)");
	else if (c < 0x20 || c == 0x7f)
		err_set(e, "control character in path");
	else if (c >= 0x80)
		err_set(e, "non-ASCII byte in path (percent-encode it)");
	else
		err_set(e, "invalid character '%c' in path", c);
	return -1;
}

/* Pass 1: check and decode into out; returns the length or -1. */
static long
decode(const char *in, size_t len, char *out, struct err *e)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t i, o = 0;

	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)in[i];
		int hi, lo;
		if (c != '%') {
			if (!path_char(c))
				return bad_byte(c, e);
			out[o++] = (char)c;
			continue;
		}
		if (i + 2 >= len) {
			err_set(e, "truncated percent-encoding in path");
			return -1;
		}
		if ((hi = text_hexval((unsigned char)in[i + 1])) < 0 ||
		    (lo = text_hexval((unsigned char)in[i + 2])) < 0) {
			err_set(e, "invalid percent-encoding in path");
			return -1;
		}
		c = (unsigned char)(hi << 4 | lo);
		i += 2;
		if (c == '/' || c == '\\' || c == '\0') {
			err_set(e, "encoded %s in path",
			    c == '/'        ? "slash"
			        : c == '\\' ? "backslash"
			                    : "NUL");
			return -1;
		}
		if (text_unreserved(c))
			out[o++] = (char)c;
		else {
			out[o++] = '%';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 0xf];
		}
	}
	out[o] = '\0';
	return (long)o;
}

/* Pass 2: dot segments out, in place; returns the new length or -1. */
static long
remove_dots(char *s, size_t n, struct err *e)
{
	size_t r = 1, o = 1; /* s[0] is '/' and stays */

	while (r <= n) {
		size_t end = r, sl;
		while (end < n && s[end] != '/')
			end++;
		sl = end - r;
		bool last = end >= n;
		if (sl == 0 && !last) {
			err_set(e, "empty segment (\"//\") in path");
			return -1;
		}
		if ((sl >= 2 && s[r] == '.' && s[r + 1] == ';') ||
		    (sl >= 3 && s[r] == '.' && s[r + 1] == '.' &&
		        s[r + 2] == ';')) {
			err_set(e, "dot segment with parameters in path");
			return -1;
		}
		if (sl == 1 && s[r] == '.') {
			/* "." : nothing (a last one leaves the '/'). */
		} else if (sl == 2 && s[r] == '.' && s[r + 1] == '.') {
			/* ".." : drop the last output segment. */
			if (o > 1) {
				o--; /* the '/' before the next segment */
				while (o > 1 && s[o - 1] != '/')
					o--;
			}
		} else {
			memmove(s + o, s + r, sl);
			o += sl;
			if (!last)
				s[o++] = '/';
		}
		r = end + 1;
	}
	s[o] = '\0';
	return (long)o;
}

int
policy_path_normalize(const char *in, size_t len, char *out, size_t outsize,
    size_t *outlen, struct err *e)
{
	long n;

	if (in == NULL || out == NULL) {
		err_set(e, "no path");
		return -1;
	}
	if (len > POLICY_REQ_PATH_MAX) {
		err_set(e, "path longer than %d bytes", POLICY_REQ_PATH_MAX);
		return -1;
	}
	if (outsize < len + 1) {
		err_set(e, "path output buffer too small");
		return -1;
	}
	if (len == 0 || in[0] != '/') {
		err_set(e, "path must start with '/'");
		return -1;
	}
	if ((n = decode(in, len, out, e)) < 0 ||
	    (n = remove_dots(out, (size_t)n, e)) < 0)
		return -1;
	if (outlen != NULL)
		*outlen = (size_t)n;
	return 0;
}
