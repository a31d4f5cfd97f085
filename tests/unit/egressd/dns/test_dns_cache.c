/* Unit tests for egressd/dns/dns_cache.c: TTL expiry, LRU order, caps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "dns_testpk.h"
#include "egressd/dns/dns_cache.h"

struct fake_clock {
	uint64_t now_ms;
};

static uint64_t
fake_now(void *arg)
{
	return ((struct fake_clock *)arg)->now_ms;
}

static void
key_for(struct dns_cache_key *k, const char *name, uint16_t qtype)
{
	uint8_t w[256];
	size_t n = pk_wire_name(name, w);

	assert_int_equal(dns_cache_key_make(k, w, n, qtype, 1, 0), 0);
}

static void
test_put_get_and_expiry(void **state)
{
	struct fake_clock clk = {.now_ms = 1000};
	struct dns_cache *c = dns_cache_new(16, 0, fake_now, &clk);
	struct dns_cache_key k;
	const uint8_t msg[] = "answer-bytes";
	const uint8_t *got;
	size_t len = 0;
	uint32_t age = 99;

	(void)state;
	assert_non_null(c);
	key_for(&k, "www.example.com", 1);
	assert_null(dns_cache_get(c, &k, &len, &age, NULL));
	assert_true(dns_cache_put(c, &k, msg, sizeof(msg), 10));
	got = dns_cache_get(c, &k, &len, &age, NULL);
	assert_non_null(got);
	assert_int_equal(len, sizeof(msg));
	assert_memory_equal(got, msg, sizeof(msg));
	assert_int_equal(age, 0);

	clk.now_ms += 4500;
	got = dns_cache_get(c, &k, &len, &age, NULL);
	assert_non_null(got);
	assert_int_equal(age, 4);

	clk.now_ms += 5499; /* 9.999 s after insert: still there */
	assert_non_null(dns_cache_get(c, &k, &len, &age, NULL));
	assert_int_equal(age, 9);
	clk.now_ms += 1; /* exactly 10 s: expired and removed */
	assert_null(dns_cache_get(c, &k, &len, &age, NULL));
	assert_int_equal(dns_cache_count(c), 0);
	assert_int_equal(dns_cache_bytes(c), 0);
	dns_cache_free(c);
}

static void
test_key_case_type_flags(void **state)
{
	struct fake_clock clk = {.now_ms = 0};
	struct dns_cache *c = dns_cache_new(16, 0, fake_now, &clk);
	struct dns_cache_key k1, k2, k3, k4;
	uint8_t w[256];
	size_t n, len;
	uint32_t age;
	const uint8_t a[] = "A", b[] = "B";

	(void)state;
	n = pk_wire_name("WwW.ExAmple.COM", w);
	assert_int_equal(dns_cache_key_make(&k1, w, n, 1, 1, 0), 0);
	key_for(&k2, "www.example.com", 1);
	key_for(&k3, "www.example.com", 28);
	n = pk_wire_name("www.example.com", w);
	assert_int_equal(
	    dns_cache_key_make(&k4, w, n, 1, 1, DNS_CACHE_KEY_DO), 0);

	assert_true(dns_cache_put(c, &k1, a, sizeof(a), 60));
	/* Case-insensitive: k2 finds what k1 stored. */
	assert_non_null(dns_cache_get(c, &k2, &len, &age, NULL));
	/* Different qtype or flags: miss. */
	assert_null(dns_cache_get(c, &k3, &len, &age, NULL));
	assert_null(dns_cache_get(c, &k4, &len, &age, NULL));
	/* Replacing keeps one entry. */
	assert_true(dns_cache_put(c, &k2, b, sizeof(b), 60));
	assert_int_equal(dns_cache_count(c), 1);
	assert_memory_equal(
	    dns_cache_get(c, &k1, &len, &age, NULL), b, sizeof(b));
	dns_cache_free(c);
}

static void
test_lru_eviction_by_count(void **state)
{
	struct fake_clock clk = {.now_ms = 0};
	struct dns_cache *c = dns_cache_new(3, 0, fake_now, &clk);
	struct dns_cache_key k[4];
	const uint8_t m[] = "x";
	size_t len;
	uint32_t age;

	(void)state;
	key_for(&k[0], "a.test", 1);
	key_for(&k[1], "b.test", 1);
	key_for(&k[2], "c.test", 1);
	key_for(&k[3], "d.test", 1);
	assert_true(dns_cache_put(c, &k[0], m, sizeof(m), 60));
	assert_true(dns_cache_put(c, &k[1], m, sizeof(m), 60));
	assert_true(dns_cache_put(c, &k[2], m, sizeof(m), 60));
	/* Touch a: b becomes least recently used. */
	assert_non_null(dns_cache_get(c, &k[0], &len, &age, NULL));
	assert_true(dns_cache_put(c, &k[3], m, sizeof(m), 60));
	assert_int_equal(dns_cache_count(c), 3);
	assert_null(dns_cache_get(c, &k[1], &len, &age, NULL));
	assert_non_null(dns_cache_get(c, &k[0], &len, &age, NULL));
	assert_non_null(dns_cache_get(c, &k[2], &len, &age, NULL));
	assert_non_null(dns_cache_get(c, &k[3], &len, &age, NULL));
	assert_int_equal(dns_cache_evictions(c), 1);
	dns_cache_free(c);
}

static void
test_byte_cap(void **state)
{
	struct fake_clock clk = {.now_ms = 0};
	/* Room for about three 1000-byte messages plus overhead. */
	struct dns_cache *c = dns_cache_new(100, 3600, fake_now, &clk);
	struct dns_cache_key k;
	uint8_t big[1000], huge[5000];
	char name[32];
	int i;
	size_t len;
	uint32_t age;

	(void)state;
	memset(big, 'b', sizeof(big));
	memset(huge, 'h', sizeof(huge));
	for (i = 0; i < 10; i++) {
		snprintf(name, sizeof(name), "n%d.test", i);
		key_for(&k, name, 1);
		assert_true(dns_cache_put(c, &k, big, sizeof(big), 60));
		assert_true(dns_cache_bytes(c) <= 3600);
	}
	assert_true(dns_cache_count(c) < 4);
	assert_true(dns_cache_count(c) >= 2);
	/* The newest survived, the oldest did not. */
	key_for(&k, "n9.test", 1);
	assert_non_null(dns_cache_get(c, &k, &len, &age, NULL));
	key_for(&k, "n0.test", 1);
	assert_null(dns_cache_get(c, &k, &len, &age, NULL));
	/* Larger than the whole cap: refused, nothing evicted for it. */
	key_for(&k, "huge.test", 1);
	i = (int)dns_cache_count(c);
	assert_false(dns_cache_put(c, &k, huge, sizeof(huge), 60));
	assert_int_equal((int)dns_cache_count(c), i);
	dns_cache_free(c);
}

static void
test_ttl_zero_and_cap(void **state)
{
	struct fake_clock clk = {.now_ms = 0};
	struct dns_cache *c = dns_cache_new(4, 0, fake_now, &clk);
	struct dns_cache_key k;
	const uint8_t m[] = "m";
	size_t len;
	uint32_t age;

	(void)state;
	key_for(&k, "z.test", 1);
	assert_false(dns_cache_put(c, &k, m, sizeof(m), 0));
	assert_false(dns_cache_put(c, &k, m, 0, 10));
	assert_true(dns_cache_put(c, &k, m, sizeof(m), 0xffffffffu));
	clk.now_ms = (uint64_t)DNS_CACHE_TTL_MAX * 1000u - 1;
	assert_non_null(dns_cache_get(c, &k, &len, &age, NULL));
	clk.now_ms += 1;
	assert_null(dns_cache_get(c, &k, &len, &age, NULL));
	dns_cache_free(c);
	dns_cache_free(NULL);
}

static void
test_key_too_long(void **state)
{
	struct dns_cache_key k;
	uint8_t w[300];

	(void)state;
	memset(w, 1, sizeof(w));
	assert_int_equal(dns_cache_key_make(&k, w, sizeof(w), 1, 1, 0), -1);
	assert_int_equal(dns_cache_key_make(&k, w, 0, 1, 1, 0), -1);
}

static void
test_many_entries_stay_bounded(void **state)
{
	struct fake_clock clk = {.now_ms = 0};
	struct dns_cache *c = dns_cache_new(500, 0, fake_now, &clk);
	struct dns_cache_key k;
	char name[48];
	uint8_t m[64];
	int i;

	(void)state;
	memset(m, 0, sizeof(m));
	for (i = 0; i < 20000; i++) {
		snprintf(name, sizeof(name), "h%d.flood.test", i);
		key_for(&k, name, 1);
		dns_cache_put(c, &k, m, sizeof(m), 30);
		clk.now_ms += 3;
	}
	assert_int_equal(dns_cache_count(c), 500);
	dns_cache_flush(c);
	assert_int_equal(dns_cache_count(c), 0);
	assert_int_equal(dns_cache_bytes(c), 0);
	dns_cache_free(c);
}

static void
test_memo(void **state)
{
	struct fake_clock clk = {.now_ms = 0};
	struct dns_cache *c = dns_cache_new(4, 0, fake_now, &clk);
	struct dns_cache_key k;
	struct dns_cache_memo *m, *m2 = NULL;
	const uint8_t msg[] = "m";
	size_t len;
	uint32_t age;

	(void)state;
	key_for(&k, "memo.test", 1);
	m = dns_cache_put(c, &k, msg, sizeof(msg), 60);
	assert_non_null(m);
	assert_int_equal(m->tag, 0);
	assert_int_equal(m->until_ms, 0);
	m->tag = 7;
	m->until_ms = 1234;
	assert_non_null(dns_cache_get(c, &k, &len, &age, &m2));
	assert_ptr_equal(m, m2);
	assert_int_equal(m2->tag, 7);
	assert_int_equal(m2->until_ms, 1234);
	/* A new answer for the key starts with a clean note. */
	m = dns_cache_put(c, &k, msg, sizeof(msg), 60);
	assert_int_equal(m->tag, 0);
	assert_null(dns_cache_put(c, &k, msg, sizeof(msg), 0));
	/* Dropping removes it; dropping again is harmless. */
	dns_cache_drop(c, &k);
	assert_null(dns_cache_get(c, &k, &len, &age, NULL));
	assert_int_equal(dns_cache_count(c), 0);
	dns_cache_drop(c, &k);
	dns_cache_free(c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_put_get_and_expiry),
	    cmocka_unit_test(test_key_case_type_flags),
	    cmocka_unit_test(test_lru_eviction_by_count),
	    cmocka_unit_test(test_byte_cap),
	    cmocka_unit_test(test_ttl_zero_and_cap),
	    cmocka_unit_test(test_key_too_long),
	    cmocka_unit_test(test_many_entries_stay_bounded),
	    cmocka_unit_test(test_memo),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
