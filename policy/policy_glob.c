/*
 * policy_glob: the path patterns of request rules (policy_glob.h).
 *
 * A star never crosses a '/' (but the trailing one), so a pattern and a
 * path are compared segment by segment: the pattern's segments must line
 * up one to one with the path's, and within a segment a '*'-only glob is
 * matched greedily, each literal piece at its leftmost place (for globs
 * without '?' that placement is always a solution when one exists). No
 * backtracking: each path byte is looked at a bounded number of times,
 * so a hostile path costs linear time against any checked pattern.
 */
#include <string.h>

#include "policy/policy_glob.h"
#include "policy/policy_path.h"

int
policy_glob_check(const char *pat, struct err *e)
{
	char norm[POLICY_GLOB_MAX + 1];
	size_t n, i, stars = 0;
	struct err pe;

	if (pat == NULL || pat[0] != '/') {
		err_set(e, "path pattern must start with '/'");
		return -1;
	}
	if ((n = strlen(pat)) > POLICY_GLOB_MAX) {
		err_set(
		    e, "path pattern longer than %d bytes", POLICY_GLOB_MAX);
		return -1;
	}
	for (i = 0; i < n; i++) {
		if (pat[i] == '?' || pat[i] == '#') {
			err_set(e,
			    "'%c' in path pattern (a pattern matches the path "
			    "only, never the query or fragment)",
			    pat[i]);
			return -1;
		}
		if (pat[i] != '*')
			continue;
		/* "**" would read as a globstar it is not: a trailing '*'
		 * already crosses segments, any other stays in one. */
		if (pat[i + 1] == '*') {
			err_set(e,
			    "\"**\" in path pattern (a trailing '*' "
			    "matches across segments, any other '*' "
			    "within one)");
			return -1;
		}
		stars++;
	}
	if (stars > POLICY_GLOB_STARS_MAX) {
		err_set(e, "more than %d '*' in path pattern",
		    POLICY_GLOB_STARS_MAX);
		return -1;
	}
	/* '*' is a pchar: the normalizer keeps it and judges the rest. */
	if (policy_path_normalize(pat, n, norm, sizeof(norm), NULL, &pe) ==
	    -1) {
		err_set(e, "path pattern: %s", pe.msg);
		return -1;
	}
	if (strcmp(norm, pat) != 0) {
		err_set(e,
		    "path pattern \"%.200s\" is not in normal form: write "
		    "\"%.200s\"",
		    pat, norm);
		return -1;
	}
	return 0;
}

/* s[0..sn) at or after from holds lit[0..ln): its leftmost place or NULL. */
static const char *
find(const char *s, size_t sn, const char *lit, size_t ln)
{
	if (ln == 0)
		return s;
	return memmem(s, sn, lit, ln);
}

/*
 * One segment: p[0..pn) (no '/', stars within) against s[0..sn). open:
 * the segment is followed by the pattern's trailing '*', so anything may
 * follow what p matches (the caller ignores the rest of the path).
 */
static bool
seg_match(const char *p, size_t pn, const char *s, size_t sn, bool open)
{
	const char *star = memchr(p, '*', pn), *pe = p + pn, *se = s + sn;
	const char *last;
	size_t ln;

	if (star == NULL) {
		if (open)
			return sn >= pn && memcmp(p, s, pn) == 0;
		return sn == pn && memcmp(p, s, pn) == 0;
	}
	/* the literal head before the first star is anchored at the start */
	ln = (size_t)(star - p);
	if (sn < ln || memcmp(p, s, ln) != 0)
		return false;
	s += ln;
	p = star + 1;
	/* closed: the literal tail after the last star is anchored at the
	 * end, and the middle pieces must fit between head and tail */
	last = memrchr(p - 1, '*', (size_t)(pe - p) + 1);
	if (!open) {
		ln = (size_t)(pe - last - 1);
		if ((size_t)(se - s) < ln || memcmp(last + 1, se - ln, ln) != 0)
			return false;
		se -= ln;
		pe = last;
	}
	/* the pieces between stars, each at its leftmost place */
	while (p < pe) {
		const char *q = memchr(p, '*', (size_t)(pe - p));
		const char *hit;

		if (q == NULL)
			q = pe;
		ln = (size_t)(q - p);
		if ((hit = find(s, (size_t)(se - s), p, ln)) == NULL)
			return false;
		s = hit + ln;
		p = q + 1;
	}
	return true;
}

/*
 * The literal head (everything before the first star) is compared byte
 * by byte first: it decides most mismatches of a host's many rules at
 * once. Then segment by segment from the head's last '/', scanning the
 * path only as far as the pattern needs: never a strlen of the path,
 * which may be long and is compared with every rule of its host.
 */
bool
policy_glob_match(const char *pat, const char *path)
{
	const char *pn, *sn, *seg = pat;

	if (pat == NULL || path == NULL)
		return false;
	for (; *pat != '\0' && *pat != '*' && *pat == *path; pat++, path++)
		if (*pat == '/')
			seg = pat + 1;
	if (*pat == '\0')
		return *path == '\0';
	if (*pat != '*')
		return false;
	/* back to the start of the star's segment, in both */
	path -= pat - seg;
	pat = seg;
	for (;;) {
		pn = strchrnul(pat, '/');
		sn = strchrnul(path, '/');
		if (*pn == '\0') /* the pattern's last segment */
			break;
		if (*sn == '\0' ||
		    !seg_match(pat, (size_t)(pn - pat), path,
		        (size_t)(sn - path), false))
			return false;
		pat = pn + 1;
		path = sn + 1;
	}
	/* a star at the very end: a prefix match, the path's rest is free */
	if (pn > pat && pn[-1] == '*')
		return seg_match(pat, (size_t)(pn - pat) - 1, path,
		    (size_t)(sn - path), true);
	return *sn == '\0' &&
	    seg_match(
	        pat, (size_t)(pn - pat), path, (size_t)(sn - path), false);
}
