/*
 * The table of special-purpose ranges is the one source of the DNS
 * rebinding classifier and of the nft internal sets: for every row, its
 * first, a middle and its last address, and (IPv4 rows) each of their
 * IPv6 spellings, the resolver strips it iff the row says SPECIAL_STRIP
 * and nft drops it iff it says SPECIAL_DROP, judged three ways for nft:
 * nft_addr_internal_(), membership in the internal4/6 sets of the batch
 * the pure builder makes, and (as root, in a private network namespace)
 * `nft get element` on the live kernel table. An operator always-allow
 * of a row opens it for both. No packet is sent anywhere.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "egressd/proto/dns_wire.h"
#include "egressd/nft/nft.h"
#include "egressd/nft/nft_bounds.h"
#include "egressd/nft/nft_elems.h"
#include "egressd/proto/special_ranges.h"
#include "egressd/base/stats.h"
#include "policy/policy.h"

#define NSAMPLES 3 /* first, middle, last */

static bool have_netns;

static unsigned
width(int family)
{
	return family == 4 ? 4 : 16;
}

/* First, middle and last address of a row. */
static void
samples(const struct special_range *r, uint8_t out[NSAMPLES][16])
{
	unsigned w = width(r->family), i, b;

	memset(out, 0, NSAMPLES * 16);
	memcpy(out[0], r->addr, w);
	memcpy(out[1], r->addr, w);
	memcpy(out[2], r->addr, w);
	if (r->len < 8 * w) /* middle: the first host bit set */
		out[1][r->len / 8] |= (uint8_t)(0x80u >> (r->len % 8));
	for (i = 0; i < w; i++)
		for (b = 0; b < 8; b++)
			if (8 * i + b >= r->len)
				out[2][i] |= (uint8_t)(0x80u >> b);
}

/* ---- the internal sets of a described batch ---- */

struct ivl {
	uint8_t lo[16], hi[16]; /* inclusive */
};

struct sets {
	struct ivl *v[2];
	size_t n[2];
};

static int
hex_bytes(const char *tok, size_t len, uint8_t *out, unsigned w)
{
	unsigned i, x;

	if (len < 2 * w)
		return -1;
	for (i = 0; i < w; i++) {
		if (sscanf(tok + 2 * i, "%2x", &x) != 1)
			return -1;
		out[i] = (uint8_t)x;
	}
	return 0;
}

/* "x - 1" over w bytes. */
static void
dec(uint8_t *x, unsigned w)
{
	int i = (int)w - 1;

	while (i >= 0 && x[i]-- == 0)
		i--;
}

/* Intervals of every NEWSETELEM line of set name: "lo hi(end) lo ..." */
static void
parse_set(
    const char *desc, const char *name, unsigned w, struct ivl **v, size_t *n)
{
	char key[64];
	const char *p = desc;
	size_t cap = 0;

	snprintf(key, sizeof(key), "NEWSETELEM %s ", name);
	*v = NULL;
	*n = 0;
	while ((p = strstr(p, key)) != NULL) {
		const char *q = p + strlen(key);
		const char *eol = strchr(q, '\n');

		if (eol == NULL)
			eol = q + strlen(q);
		while (q < eol && *q != '[') {
			const char *sp = strchr(q, ' ');
			size_t len = sp != NULL && sp < eol ? (size_t)(sp - q)
			                                    : (size_t)(eol - q);
			bool end =
			    len > 5 && memcmp(q + len - 5, "(end)", 5) == 0;

			if (*n == cap) {
				cap = cap ? 2 * cap : 64;
				*v = realloc(*v, cap * sizeof(**v));
				assert_non_null(*v);
			}
			if (!end) {
				memset(&(*v)[*n], 0, sizeof(**v));
				assert_int_equal(
				    hex_bytes(q, len, (*v)[*n].lo, w), 0);
				memset(
				    (*v)[*n].hi, 0xff, w); /* to the top ... */
				(*n)++;
			} else { /* ... unless an end follows (exclusive) */
				assert_true(*n > 0);
				assert_int_equal(
				    hex_bytes(q, len, (*v)[*n - 1].hi, w), 0);
				dec((*v)[*n - 1].hi, w);
			}
			q += len;
			while (q < eol && *q == ' ')
				q++;
		}
		p = eol;
	}
}

static bool
in_set(const struct ivl *v, size_t n, const uint8_t *a, unsigned w)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (memcmp(v[i].lo, a, w) <= 0 && memcmp(a, v[i].hi, w) <= 0)
			return true;
	return false;
}

/* The batch of p, decoded. */
static char *
describe(const struct policy *p)
{
	struct nft_batch *b;
	struct nft_opts o;
	struct err e;
	char *s;

	nft_opts_init(&o);
	if (nft_build_ruleset(p, &o, NULL, &b, &e) != 0)
		fail_msg("build: %s", e.msg);
	s = nft_batch_describe(b);
	assert_non_null(s);
	nft_batch_free(b);
	return s;
}

static void
load_internal(struct sets *st)
{
	struct policy *p = policy_new_deny_all();
	char *s;

	assert_non_null(p);
	s = describe(p);
	policy_unref(p);
	parse_set(s, "internal4", 4, &st->v[0], &st->n[0]);
	parse_set(s, "internal6", 16, &st->v[1], &st->n[1]);
	assert_true(st->n[0] > 0 && st->n[1] > 0);
	free(s);
}

static void
free_sets(struct sets *st)
{
	free(st->v[0]);
	free(st->v[1]);
}

static bool
batch_drops(const struct sets *st, int family, const uint8_t *a)
{
	return in_set(st->v[family == 4 ? 0 : 1], st->n[family == 4 ? 0 : 1], a,
	    width(family));
}

static const char *
fmt(int family, const uint8_t *a, char *buf)
{
	return inet_ntop(
	    family == 4 ? AF_INET : AF_INET6, a, buf, INET6_ADDRSTRLEN);
}

/* ---- the table itself ---- */

static void
test_rows_well_formed(void **state)
{
	size_t i;
	bool doc[4] = {false};

	(void)state;
	assert_true(special_nranges > 30);
	for (i = 0; i < special_nranges; i++) {
		const struct special_range *r = &special_ranges[i];
		char text[64], *slash;
		uint8_t a[16] = {0}, s[NSAMPLES][16];

		assert_true(r->family == 4 || r->family == 6);
		assert_true(r->len <= 8 * width(r->family));
		/* the lists cannot disagree: a row is stripped and dropped,
		 * or open to both, or Teredo (dropped whole, stripped by
		 * what it embeds) */
		if (r->flags != (SPECIAL_STRIP | SPECIAL_DROP) &&
		    r->flags != 0 &&
		    r->flags != (SPECIAL_DROP | SPECIAL_TEREDO))
			fail_msg("%s: flags %#x", r->text, r->flags);
		/* the bytes are what the text says, host bits zero */
		snprintf(text, sizeof(text), "%s", r->text);
		slash = strchr(text, '/');
		assert_non_null(slash);
		*slash = '\0';
		assert_int_equal(atoi(slash + 1), r->len);
		assert_int_equal(
		    inet_pton(r->family == 4 ? AF_INET : AF_INET6, text, a), 1);
		assert_memory_equal(a, r->addr, width(r->family));
		samples(r, s);
		assert_memory_equal(s[0], r->addr, 16);
		if (strcmp(r->text, "192.0.2.0/24") == 0 ||
		    strcmp(r->text, "198.51.100.0/24") == 0 ||
		    strcmp(r->text, "203.0.113.0/24") == 0 ||
		    strcmp(r->text, "2001:db8::/32") == 0) {
			/* the test bed's internet stays usable */
			assert_int_equal(r->flags, 0);
			doc[r->text[0] == '1' ? (r->text[4] == '0' ? 0 : 1)
			        : r->text[0] == '2' && r->text[1] == '0' &&
			            r->text[2] == '3'
			        ? 2
			        : 3] = true;
		}
	}
	assert_true(doc[0] && doc[1] && doc[2] && doc[3]);
}

/*
 * Every row, three addresses each, and every IPv6 spelling of the IPv4
 * ones: the resolver and nft (three ways) follow the row's flags.
 */
static void
check_addr(const struct sets *st, const struct special_range *r, int family,
    const uint8_t *a)
{
	char buf[INET6_ADDRSTRLEN];
	bool strip = (r->flags & SPECIAL_STRIP) != 0;
	bool drop = (r->flags & SPECIAL_DROP) != 0;

	if (r->flags & SPECIAL_TEREDO) {
		/* stripped iff the server or the client IPv4 is */
		uint8_t client[4];
		size_t k;

		for (k = 0; k < 4; k++)
			client[k] = (uint8_t)~a[12 + k];
		strip = dns_addr_is_internal(4, a + 4) ||
		    dns_addr_is_internal(4, client);
	}
	if (dns_addr_is_internal(family, a) != strip)
		fail_msg("%s (%s): resolver strips: %d, table: %d", r->text,
		    fmt(family, a, buf), !strip, strip);
	if (nft_addr_internal_(family, a) != drop)
		fail_msg("%s (%s): nft_addr_internal_: %d, table: %d", r->text,
		    fmt(family, a, buf), !drop, drop);
	if (batch_drops(st, family, a) != drop)
		fail_msg("%s (%s): in the batch's internal set: %d, table: %d",
		    r->text, fmt(family, a, buf), !drop, drop);
}

static void
test_every_row_both_ways(void **state)
{
	struct sets st;
	size_t i, j, k, nchecked = 0;

	(void)state;
	load_internal(&st);
	for (i = 0; i < special_nranges; i++) {
		const struct special_range *r = &special_ranges[i];
		uint8_t s[NSAMPLES][16], a6[16], len6;

		samples(r, s);
		for (j = 0; j < NSAMPLES; j++) {
			check_addr(&st, r, r->family, s[j]);
			nchecked++;
			if (r->family != 4)
				continue;
			for (k = 0; k < SPECIAL_FORMS; k++) {
				special_v6_form(s[j], 32, k, a6, &len6);
				assert_int_equal(len6, k == 1 ? 48 : 128);
				check_addr(&st, r, 6, a6);
				nchecked++;
			}
		}
	}
	print_message("%zu addresses of %zu rows\n", nchecked, special_nranges);
	free_sets(&st);
}

/* The spellings the resolver decodes are the ones nft twins. */
static void
test_forms(void **state)
{
	static const char *const spell[SPECIAL_FORMS] = {"64:ff9b::a00:1",
	    "2002:a00:1::", "::ffff:10.0.0.1", "::10.0.0.1",
	    "::ffff:0:10.0.0.1", "64:ff9b:1::a00:1"};
	const uint8_t ten[4] = {10, 0, 0, 1};
	uint8_t a6[16], b6[16], v4[4], len6;
	unsigned base;
	size_t k;

	(void)state;
	for (k = 0; k < SPECIAL_FORMS; k++) {
		assert_int_equal(inet_pton(AF_INET6, spell[k], a6), 1);
		special_v6_form(ten, 8, k, b6, &len6);
		assert_int_equal(len6, k == 1 ? 24 : 104);
		assert_int_equal(
		    special_v4_of(a6, SPECIAL_FORMS, v4, &base), (int)k);
		assert_memory_equal(v4, ten, 4);
		assert_int_equal(base + 8, len6);
		/* the user-rule twins are the first SPECIAL_FORMS_RULE */
		assert_int_equal(
		    special_v4_of(a6, SPECIAL_FORMS_RULE, v4, &base) >= 0,
		    k < SPECIAL_FORMS_RULE);
	}
	/* local-use NAT64 outside its /96 form: dropped and stripped as a
	 * whole; a public IPv4 address in the form is neither */
	assert_int_equal(inet_pton(AF_INET6, "64:ff9b:1:1::cb00:710b", a6), 1);
	assert_true(nft_addr_internal_(6, a6) && dns_addr_is_internal(6, a6));
	assert_int_equal(inet_pton(AF_INET6, "64:ff9b:1::cb00:710b", a6), 1);
	assert_false(nft_addr_internal_(6, a6) || dns_addr_is_internal(6, a6));
}

static uint32_t
lcg(uint32_t *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 8;
}

/*
 * Random addresses, biased towards the rows and the forms: the batch's
 * sets hold exactly the SPECIAL_DROP addresses of special_addr_flags(),
 * and the resolver strips exactly its SPECIAL_STRIP ones.
 */
static void
test_random_agree(void **state)
{
	struct sets st;
	uint32_t seed = 4242;
	size_t i, k, ndrop = 0;

	(void)state;
	load_internal(&st);
	for (i = 0; i < 100000; i++) {
		const struct special_range *r =
		    &special_ranges[lcg(&seed) % special_nranges];
		int family = i % 2 == 0 ? 4 : 6;
		uint8_t a[16] = {0}, v4[4];
		unsigned fl;

		for (k = 0; k < 16; k++)
			a[k] = (uint8_t)lcg(&seed);
		if (i % 3 == 0 && r->family == family) /* inside a row */
			for (k = 0; k < r->len; k++)
				a[k / 8] =
				    (uint8_t)((a[k / 8] & ~(0x80u >> (k % 8))) |
				        (r->addr[k / 8] & (0x80u >> (k % 8))));
		if (family == 6 && i % 5 == 1) { /* a form */
			memcpy(v4, a, 4);
			if (r->family == 4)
				memcpy(v4, r->addr, 4);
			special_v6_form(v4, 32, lcg(&seed) % SPECIAL_FORMS, a,
			    (uint8_t[]){0});
			if (i % 7 == 0) /* 64:ff9b:1::/48 outside the /96 */
				a[5 + lcg(&seed) % 7] |= 0x10;
		}
		fl = special_addr_flags(family, a);
		ndrop += (fl & SPECIAL_DROP) != 0;
		assert_int_equal(
		    batch_drops(&st, family, a), (fl & SPECIAL_DROP) != 0);
		assert_int_equal(
		    nft_addr_internal_(family, a), (fl & SPECIAL_DROP) != 0);
		assert_int_equal(
		    dns_addr_is_internal(family, a), (fl & SPECIAL_STRIP) != 0);
	}
	assert_true(ndrop > 10000);
	free_sets(&st);
}

/*
 * An operator always-allow of a row opens it for both: the resolver keeps
 * answers in it (policy_addr_operator_allowed(), what dns.c asks), and
 * nft accepts it in an always_allow set whose rule comes before the
 * internal rule.
 */
static void
test_operator_opens(void **state)
{
	size_t i, j, nrows = 0;

	(void)state;
	for (i = 0; i < special_nranges; i++) {
		const struct special_range *r = &special_ranges[i];
		char json[256], set[32], *s, *line, *at;
		struct policy_diag d;
		uint8_t smp[NSAMPLES][16];
		struct ivl *v;
		struct policy *p;
		size_t n;
		long allow_at, internal_at;

		if ((r->flags & SPECIAL_STRIP) == 0 || r->len == 0)
			continue;
		snprintf(json, sizeof(json),
		    "{\"defaultAction\":\"deny\",\"alwaysAllow\":[\"%s\"]}",
		    r->text);
		policy_diag_init(&d);
		p = policy_parse_json(json, strlen(json), "test", &d);
		if (p == NULL)
			fail_msg("%s: does not load", json);
		policy_diag_clear(&d);
		samples(r, smp);
		for (j = 0; j < NSAMPLES; j++)
			assert_true(
			    policy_addr_operator_allowed(p, r->family, smp[j]));
		s = describe(p);
		policy_unref(p);
		/* the always_allow rule's set, and the rule order */
		line = strstr(s, "name always_allow");
		assert_non_null(line);
		internal_at = strstr(s, "name internal") - s;
		allow_at = line - s;
		assert_true(allow_at < internal_at);
		while (line > s && line[-1] != '\n')
			line--;
		at = strstr(line, "lookup reg 1 set ");
		assert_non_null(at);
		assert_int_equal(sscanf(at, "lookup reg 1 set %31s", set), 1);
		parse_set(s, set, width(r->family), &v, &n);
		for (j = 0; j < NSAMPLES; j++)
			assert_true(in_set(v, n, smp[j], width(r->family)));
		free(v);
		free(s);
		nrows++;
	}
	assert_true(nrows > 20);
}

/* ---- the live kernel table ---- */

/* `nft get element` of one address: true if the set holds it. */
static bool
kernel_has(const char *set, int family, const uint8_t *a)
{
	char cmd[256], buf[INET6_ADDRSTRLEN];

	snprintf(cmd, sizeof(cmd),
	    "nft get element inet egressd %s '{ %s }' >/dev/null 2>&1", set,
	    fmt(family, a, buf));
	return system(cmd) == 0;
}

static void
kernel_check(const struct special_range *r, int family, const uint8_t *a)
{
	char buf[INET6_ADDRSTRLEN];
	bool drop = (r->flags & SPECIAL_DROP) != 0;

	if (kernel_has(family == 4 ? "internal4" : "internal6", family, a) !=
	    drop)
		fail_msg("%s (%s): in the kernel's internal set: %d, table: %d",
		    r->text, fmt(family, a, buf), !drop, drop);
}

static void
test_kernel_sets(void **state)
{
	struct nft_opts o;
	struct stats st;
	struct policy *p;
	struct nft *n;
	struct err e;
	size_t i, j, k, nchecked = 0;

	(void)state;
	if (!have_netns)
		skip();
	if (system("nft delete table inet egressd 2>/dev/null") == -1)
		fail_msg("system");
	memset(&st, 0, sizeof(st));
	nft_opts_init(&o);
	if ((n = nft_new(&o, &st, &e)) == NULL)
		fail_msg("nft_new: %s", e.msg);
	p = policy_new_deny_all();
	assert_non_null(p);
	if (nft_apply_policy(n, p, &e) != 0)
		fail_msg("apply: %s", e.msg);
	policy_unref(p);
	for (i = 0; i < special_nranges; i++) {
		const struct special_range *r = &special_ranges[i];
		uint8_t s[NSAMPLES][16], a6[16], len6;

		samples(r, s);
		for (j = 0; j < NSAMPLES; j++) {
			kernel_check(r, r->family, s[j]);
			nchecked++;
			if (r->family != 4)
				continue;
			for (k = 0; k < SPECIAL_FORMS; k++) {
				special_v6_form(s[j], 32, k, a6, &len6);
				kernel_check(r, 6, a6);
				nchecked++;
			}
		}
	}
	print_message("%zu addresses looked up in the kernel\n", nchecked);
	assert_int_equal(nft_teardown(n, &e), 0);
	nft_free(n);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rows_well_formed),
	    cmocka_unit_test(test_every_row_both_ways),
	    cmocka_unit_test(test_forms),
	    cmocka_unit_test(test_random_agree),
	    cmocka_unit_test(test_operator_opens),
	    cmocka_unit_test(test_kernel_sets),
	};

	if (geteuid() != 0)
		fprintf(stderr,
		    "test_special_ranges: not root: the kernel "
		    "case is skipped\n");
	else if (unshare(CLONE_NEWNET) != 0)
		fprintf(stderr,
		    "test_special_ranges: unshare(CLONE_NEWNET): %s: the "
		    "kernel case is skipped\n",
		    strerror(errno));
	else if (system("ip link set lo up") != 0)
		fprintf(stderr, "test_special_ranges: no lo: skipped\n");
	else
		have_netns = true;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
