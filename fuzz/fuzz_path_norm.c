/*
 * Fuzzes policy_path_normalize(), whose output the binding matcher judges
 * and the proxy forwards. Input: the raw path bytes. Invariants:
 *  - a refusal always says why;
 *  - an accepted path yields a NUL-terminated result of the stated length,
 *    starting with '/', never longer than the input, with no "." or ".."
 *    segment, only pchar bytes and '/', every escape "%XY" in upper-case
 *    hex and none of an unreserved byte;
 *  - normalizing the result again gives the same bytes;
 *  - input holding NUL, a backslash, '?', '#', or an encoded '/', '\' or
 *    NUL (any case) is always refused: those are the bypass forms;
 *  - an accepted result has no segment starting with "." or ".." and a
 *    parameter (';' or "%3B"), no "%25" (then any "25"s) before the hex
 *    of '.', '/', '\', ';', '?', '#' or NUL, and no "%C0" or "%C1": what
 *    a server stripping parameters or decoding twice would resolve.
 */
#include <ctype.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "fuzz/fuzz_check.h"
#include "policy/policy_path.h"

#define FZ_PATH_MAX (POLICY_REQ_PATH_MAX + 64)

static bool
unreserved(unsigned char c)
{
	return isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

static bool
pchar_or_slash(unsigned char c)
{
	return unreserved(c) || strchr("!$&'()*+,;=:@/", c) != NULL;
}

static bool
must_refuse(const uint8_t *d, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (d[i] == 0 || d[i] == '\\' || d[i] == '?' || d[i] == '#')
			return true;
		if (d[i] == '%' && i + 2 < n) {
			char x[3] = {(char)d[i + 1], (char)d[i + 2], 0};
			if (strcasecmp(x, "2f") == 0 ||
			    strcasecmp(x, "5c") == 0 || strcmp(x, "00") == 0)
				return true;
		}
	}
	return false;
}

/* The dot segment with a parameter that starts at out[i], if any. */
static bool
dot_param_at(const char *out, size_t len, size_t i)
{
	size_t d = 0;

	while (i + d < len && d < 2 && out[i + d] == '.')
		d++;
	if (d == 0 || i + d >= len)
		return false;
	return out[i + d] == ';' ||
	    (i + d + 2 < len && strncasecmp(out + i + d, "%3b", 3) == 0);
}

/* A second decode of out[i..] would give a byte the normalizer resolves
 * or refuses. */
static bool
reencoded_at(const char *out, size_t len, size_t i)
{
	static const char bad[] = "2e2f5c3b3f2300";
	size_t j, k;

	if (i + 2 >= len || strncmp(out + i, "%25", 3) != 0)
		return false;
	for (j = i + 3; j + 1 < len && strncmp(out + j, "25", 2) == 0;)
		j += 2;
	if (j + 1 >= len)
		return false;
	for (k = 0; k < sizeof(bad) - 1; k += 2)
		if (strncasecmp(out + j, bad + k, 2) == 0)
			return true;
	return false;
}

static void
check_shape(const char *out, size_t len)
{
	size_t i, seg = 0;

	check(len >= 1 && out[0] == '/');
	for (i = 0; i <= len; i++) {
		unsigned char c = (unsigned char)out[i];

		if (i == seg)
			check(!dot_param_at(out, len, i));
		if (i == len || c == '/') {
			if (i > 0) {
				size_t sl = i - seg;
				check(!(sl == 1 && out[seg] == '.'));
				check(!(sl == 2 && out[seg] == '.' &&
				    out[seg + 1] == '.'));
			}
			seg = i + 1;
			continue;
		}
		if (c == '%') {
			check(i + 2 < len);
			check(!reencoded_at(out, len, i));
			check(strncmp(out + i, "%C0", 3) != 0 &&
			    strncmp(out + i, "%C1", 3) != 0);
			check(isxdigit((unsigned char)out[i + 1]) &&
			    !islower((unsigned char)out[i + 1]));
			check(isxdigit((unsigned char)out[i + 2]) &&
			    !islower((unsigned char)out[i + 2]));
			{
				char x[3] = {out[i + 1], out[i + 2], 0};
				check(!unreserved(
				    (unsigned char)strtoul(x, NULL, 16)));
			}
			i += 2;
			continue;
		}
		check(pchar_or_slash(c));
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char out[FZ_PATH_MAX + 1], again[FZ_PATH_MAX + 1];
	struct err e = {""}, e2 = {""};
	size_t n = 0, n2 = 0;

	if (size > FZ_PATH_MAX)
		return 0;
	if (policy_path_normalize(
	        (const char *)data, size, out, sizeof(out), &n, &e) != 0) {
		check(e.msg[0] != '\0');
		return 0;
	}
	check(!must_refuse(data, size));
	check(n <= size && strlen(out) == n);
	check_shape(out, n);
	check(
	    policy_path_normalize(out, n, again, sizeof(again), &n2, &e2) == 0);
	check(n2 == n && memcmp(out, again, n) == 0);
	return 0;
}
