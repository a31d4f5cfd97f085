/*
 * policy_path: the strict request path normalizer (policy_path.h).
 *
 * Two passes over a copy in out: the first checks every byte and decodes
 * the percent-encodings of unreserved bytes (so "%2e%2e" is ".." for the
 * second pass, as it is for servers that decode before resolving), the
 * second removes dot segments (RFC 3986 §5.2.4) in place. Neither pass
 * lengthens the text, so writing stays behind reading. Between them a
 * check refuses what only a server that decodes again would read as a
 * dot, a separator or a parameter.
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
		int x;
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
		if ((x = text_hexbyte(in + i + 1)) < 0) {
			err_set(e, "invalid percent-encoding in path");
			return -1;
		}
		c = (unsigned char)x;
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

/*
 * The bytes whose escape, reached by decoding once more, would change
 * how a server that decodes twice splits or resolves the path: a dot
 * segment or a separator this normalizer never saw ('.', '/', '\\'),
 * a path parameter (';'), an end of the path ('?', '#', NUL).
 */
static bool
reencoded_byte(unsigned char c)
{
	return c == '.' || c == '/' || c == '\\' || c == ';' || c == '?' ||
	    c == '#' || c == '\0';
}

/*
 * Check of pass 1's output (escapes there are upper-case, their digits
 * literal or decoded): refuses "%25" followed, after any further "25"s,
 * by two hex digits of a reencoded_byte ("%252e", "%25252F", "%253b" from
 * "%25%32%65" too), and "%C0" / "%C1" (the lead byte of an overlong
 * UTF-8 form of ASCII: "%C0%AE" is '.' to a lax decoder).
 */
static int
check_reencoded(const char *s, size_t n, struct err *e)
{
	size_t i, j;
	int x;

	for (i = 0; i + 2 < n; i++) {
		if (s[i] != '%')
			continue;
		if (s[i + 1] == 'C' && (s[i + 2] == '0' || s[i + 2] == '1')) {
			err_set(e, "overlong UTF-8 in path");
			return -1;
		}
		if (s[i + 1] != '2' || s[i + 2] != '5')
			continue;
		for (j = i + 3; j + 1 < n && s[j] == '2' && s[j + 1] == '5';)
			j += 2;
		if (j + 1 < n && (x = text_hexbyte(s + j)) >= 0 &&
		    reencoded_byte((unsigned char)x)) {
			err_set(e,
			    "double-encoded dot, separator or "
			    "parameter in path");
			return -1;
		}
	}
	return 0;
}

/* Does the segment s[0..sl) start with "." or ".." and a path parameter
 * (';' or its escape)? Servers that strip parameters before resolving
 * (Tomcat, Spring: "/..;/" is "/../") would see a dot segment. */
static bool
dot_params(const char *s, size_t sl)
{
	size_t d = 0;

	while (d < sl && d < 2 && s[d] == '.')
		d++;
	if (d == 0 || d == sl)
		return false;
	return s[d] == ';' ||
	    (sl - d >= 3 && s[d] == '%' && s[d + 1] == '3' &&
	        (s[d + 2] == 'B' || s[d + 2] == 'b'));
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
		if (dot_params(s + r, sl)) {
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
	    check_reencoded(out, (size_t)n, e) == -1 ||
	    (n = remove_dots(out, (size_t)n, e)) < 0)
		return -1;
	if (outlen != NULL)
		*outlen = (size_t)n;
	return 0;
}
