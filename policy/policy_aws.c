/*
 * policy_aws: region and signing name of an AWS host (policy_aws.h).
 * The host is split into labels under "amazonaws.com"; the last label
 * must be a region (or, for S3, "s3-REGION"), the one before it names
 * the endpoint.
 */
#include <stdio.h>
#include <string.h>

#include "policy/policy_aws.h"

#define AWS_SUFFIX ".amazonaws.com"
#define AWS_LABELS_MAX 8 /* labels before the suffix that are looked at */

static bool
lower_alpha(char c)
{
	return c >= 'a' && c <= 'z';
}

static bool
digit(char c)
{
	return c >= '0' && c <= '9';
}

/* A region of n bytes at s: groups of [a-z] joined by '-', then '-' and
 * digits. */
static bool
region_ok(const char *s, size_t n)
{
	size_t i = 0, groups = 0;

	if (n == 0 || n > POLICY_AWS_REGION_MAX)
		return false;
	while (i < n && lower_alpha(s[i])) {
		while (i < n && lower_alpha(s[i]))
			i++;
		groups++;
		if (i == n || s[i] != '-')
			return false;
		i++;
	}
	if (groups < 2 || i == n)
		return false;
	for (; i < n; i++)
		if (!digit(s[i]))
			return false;
	return true;
}

bool
policy_aws_region_ok(const char *s)
{
	return s != NULL && region_ok(s, strlen(s));
}

static bool
service_ok(const char *s, size_t n)
{
	size_t i;

	if (n == 0 || n > POLICY_AWS_SERVICE_MAX || !lower_alpha(s[0]))
		return false;
	for (i = 0; i < n; i++)
		if (!lower_alpha(s[i]) && !digit(s[i]) && s[i] != '-')
			return false;
	return true;
}

bool
policy_aws_service_ok(const char *s)
{
	return s != NULL && service_ok(s, strlen(s));
}

/* Endpoint prefixes AWS signs under another name (botocore's
 * signingName of those services). */
static const char *const signing_names[][2] = {
    {"bedrock-runtime", "bedrock"},
    {"bedrock-agent-runtime", "bedrock"},
    {"bedrock-agent", "bedrock"},
    {"email", "ses"},
    {"s3-control", "s3"},
};

static void
put(char *dst, size_t cap, const char *s, size_t n)
{
	(void)snprintf(dst, cap, "%.*s", (int)n, s);
}

static void
put_service(char *service, const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < sizeof(signing_names) / sizeof(signing_names[0]); i++)
		if (strlen(signing_names[i][0]) == n &&
		    memcmp(signing_names[i][0], s, n) == 0) {
			put(service, POLICY_AWS_SERVICE_MAX + 1,
			    signing_names[i][1], strlen(signing_names[i][1]));
			return;
		}
	put(service, POLICY_AWS_SERVICE_MAX + 1, s, n);
}

struct label {
	const char *p;
	size_t n;
};

static bool
label_is(const struct label *l, const char *s)
{
	return l->n == strlen(s) && memcmp(l->p, s, l->n) == 0;
}

/* The labels of h[0..n), the last AWS_LABELS_MAX of them, into l (last
 * label last); their count. */
static size_t
split(const char *h, size_t n, struct label *l)
{
	struct label all[AWS_LABELS_MAX];
	size_t k = 0, i, start = n;

	for (i = n; i-- > 0;) {
		if (h[i] != '.' && i > 0)
			continue;
		if (k == AWS_LABELS_MAX)
			break;
		if (h[i] == '.') {
			all[k].p = h + i + 1;
			all[k].n = start - i - 1;
		} else {
			all[k].p = h;
			all[k].n = start;
		}
		k++;
		start = i;
	}
	for (i = 0; i < k; i++)
		l[i] = all[k - 1 - i];
	return k;
}

static bool
scope_s3(const struct label *l, size_t k, char *region, char *service)
{
	const struct label *last = &l[k - 1];

	if (label_is(last, "s3")) {
		put(region, POLICY_AWS_REGION_MAX + 1, "us-east-1", 9);
	} else if (last->n > 3 && memcmp(last->p, "s3-", 3) == 0 &&
	    region_ok(last->p + 3, last->n - 3)) {
		put(region, POLICY_AWS_REGION_MAX + 1, last->p + 3,
		    last->n - 3);
	} else if (k >= 2 && region_ok(last->p, last->n) &&
	    (label_is(&l[k - 2], "s3") ||
	        (k >= 3 && label_is(&l[k - 2], "dualstack") &&
	            label_is(&l[k - 3], "s3")))) {
		put(region, POLICY_AWS_REGION_MAX + 1, last->p, last->n);
	} else
		return false;
	put(service, POLICY_AWS_SERVICE_MAX + 1, "s3", 2);
	return true;
}

bool
policy_aws_scope(const char *host, char *region, char *service)
{
	struct label l[AWS_LABELS_MAX];
	size_t n, sl = strlen(AWS_SUFFIX), k;

	if (host == NULL)
		return false;
	if (host[0] == '*' && host[1] == '.')
		host += 2;
	n = strlen(host);
	if (n <= sl || strcmp(host + n - sl, AWS_SUFFIX) != 0)
		return false;
	if ((k = split(host, n - sl, l)) == 0)
		return false;
	if (scope_s3(l, k, region, service))
		return true;
	if (k < 2 || !region_ok(l[k - 1].p, l[k - 1].n) ||
	    !service_ok(l[k - 2].p, l[k - 2].n))
		return false;
	put(region, POLICY_AWS_REGION_MAX + 1, l[k - 1].p, l[k - 1].n);
	put_service(service, l[k - 2].p, l[k - 2].n);
	return true;
}
