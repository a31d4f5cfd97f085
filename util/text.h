/*
 * text: character classes of the wire formats egressd parses (HTTP, JSON,
 * DNS names). Locale-free: <ctype.h> depends on the locale and takes an
 * int that must be an unsigned char, which parsers of hostile bytes get
 * wrong.
 */
#ifndef EGRESSD_TEXT_H
#define EGRESSD_TEXT_H

#include <stddef.h>

/* The value of one hex digit (either case), or -1. */
static inline int
text_hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* The byte two hex digits at p spell (a percent-escape's "XY"), or -1
 * if either is not one. p[0] and p[1] must be readable. */
static inline int
text_hexbyte(const char *p)
{
	int hi = text_hexval((unsigned char)p[0]);
	int lo = text_hexval((unsigned char)p[1]);

	return hi < 0 || lo < 0 ? -1 : hi << 4 | lo;
}

/* RFC 3986 unreserved: ALPHA DIGIT - . _ ~ */
static inline int
text_unreserved(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
	    c == '~';
}

/* s[0..n) without leading and trailing spaces and tabs (HTTP's OWS). */
static inline void
text_trim_ows(const char **s, size_t *n)
{
	while (*n > 0 && (**s == ' ' || **s == '\t')) {
		(*s)++;
		(*n)--;
	}
	while (*n > 0 && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t'))
		(*n)--;
}

/* ASCII lower case; every other byte unchanged. */
static inline int
text_lower(int c)
{
	return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

#endif
