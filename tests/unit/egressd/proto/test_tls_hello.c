/*
 * tls_hello: real ClientHellos of curl, openssl, python and node (captured
 * from loopback into fuzz/corpus/tls_hello/) and the generated cases of
 * fuzz/tls_hello_corpus_gen.py, each with what the proxy must see.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "corpus_file.h"

#include "egressd/proto/tls_hello.h"

struct want {
	const char *file;
	enum tls_hello_rc rc;
	const char *sni; /* NULL: no SNI */
	bool ip, ech, esni;
	const char *alpn; /* one protocol that must be offered, or NULL */
	const char *err; /* a substring of the error, for BAD */
};

static const struct want cases[] = {
    {"curl_a_test", TLS_HELLO_OK, "a.test", false, false, false, "http/1.1",
        NULL},
    {"curl_http11", TLS_HELLO_OK, "api.example.com", false, false, false,
        "http/1.1", NULL},
    {"curl_ip", TLS_HELLO_OK, NULL, false, false, false, NULL, NULL},
    {"openssl_alpn", TLS_HELLO_OK, "pypi.org", false, false, false, "h2", NULL},
    {"openssl_tls12", TLS_HELLO_OK, "github.com", false, false, false, NULL,
        NULL},
    {"openssl_nosni", TLS_HELLO_OK, NULL, false, false, false, NULL, NULL},
    {"python_ssl", TLS_HELLO_OK, "files.pythonhosted.org", false, false, false,
        NULL, NULL},
    {"node_tls", TLS_HELLO_OK, "registry.npmjs.org", false, false, false,
        "http/1.1", NULL},
    {"gen_basic", TLS_HELLO_OK, "api.example.com", false, false, false, "h2",
        NULL},
    {"gen_split_1", TLS_HELLO_OK, "api.example.com", false, false, false, "h2",
        NULL},
    {"gen_split_7", TLS_HELLO_OK, "api.example.com", false, false, false,
        "http/1.1", NULL},
    {"gen_split_100_then_appdata", TLS_HELLO_OK, "api.example.com", false,
        false, false, "h2", NULL},
    {"gen_no_ext_tls10", TLS_HELLO_OK, NULL, false, false, false, NULL, NULL},
    {"gen_no_sni", TLS_HELLO_OK, NULL, false, false, false, "http/1.1", NULL},
    {"gen_ech", TLS_HELLO_OK, "cloudflare-ech.com", false, true, false, NULL,
        NULL},
    {"gen_ech_nosni", TLS_HELLO_OK, NULL, false, true, false, NULL, NULL},
    {"gen_esni", TLS_HELLO_OK, "a.test", false, false, true, NULL, NULL},
    {"gen_sni_ipv4", TLS_HELLO_OK, "203.0.113.5", true, false, false, NULL,
        NULL},
    {"gen_sni_ipv6", TLS_HELLO_OK, "2001:db8::1", true, false, false, NULL,
        NULL},
    {"gen_sni_inet_aton", TLS_HELLO_OK, "0x7f.1", true, false, false, NULL,
        NULL},
    {"gen_sni_case_dot", TLS_HELLO_OK, "api.example.com", false, false, false,
        NULL, NULL},
    {"gen_sni_underscore", TLS_HELLO_OK, "_dmarc.a.test", false, false, false,
        NULL, NULL},
    {"gen_alpn_nul", TLS_HELLO_OK, "a.test", false, false, false, "http/1.1",
        NULL},
    {"gen_alpn_many", TLS_HELLO_OK, "a.test", false, false, false, "p7", NULL},
    {"gen_big_padding", TLS_HELLO_OK, "a.test", false, false, false, NULL,
        NULL},
    {"gen_truncated_half", TLS_HELLO_MORE, NULL, false, false, false, NULL,
        NULL},
    {"gen_http_get", TLS_HELLO_NOT_TLS, NULL, false, false, false, NULL,
        "not a TLS handshake"},
    {"gen_bad_record_type", TLS_HELLO_NOT_TLS, NULL, false, false, false, NULL,
        "first byte 0x15"},
    {"gen_bad_sni_nul", TLS_HELLO_BAD, NULL, false, false, false, NULL,
        "byte 0x00"},
    {"gen_bad_sni_two", TLS_HELLO_BAD, NULL, false, false, false, NULL,
        "more than one host_name"},
    {"gen_bad_sni_type", TLS_HELLO_BAD, NULL, false, false, false, NULL,
        "unknown name type"},
    {"gen_bad_sni_empty_label", TLS_HELLO_BAD, NULL, false, false, false, NULL,
        "empty label"},
    {"gen_bad_sni_long_label", TLS_HELLO_BAD, NULL, false, false, false, NULL,
        "longer than 63"},
    {"gen_bad_sni_254", TLS_HELLO_BAD, NULL, false, false, false, NULL,
        "server_name of 254 bytes"},
    {"gen_bad_dup_ext", TLS_HELLO_BAD, NULL, false, false, false, NULL,
        "extension 0 sent twice"},
    {"gen_bad_psk_not_last", TLS_HELLO_BAD, NULL, false, false, false, NULL,
        "pre_shared_key"},
    {"gen_bad_ext_len", TLS_HELLO_BAD, NULL, false, false, false, NULL, NULL},
    {"gen_bad_record_ver", TLS_HELLO_BAD, NULL, false, false, false, NULL,
        "record version 2.0"},
    {"gen_bad_interleaved", TLS_HELLO_BAD, NULL, false, false, false, NULL,
        "record of type 20"},
    {"gen_bad_not_clienthello", TLS_HELLO_BAD, NULL, false, false, false, NULL,
        "not a ClientHello"},
    {"gen_bad_trailing_in_record", TLS_HELLO_BAD, NULL, false, false, false,
        NULL, "bytes after the ClientHello"},
    {"gen_bad_sslv3", TLS_HELLO_BAD, NULL, false, false, false, NULL, "0x0300"},
    {"gen_bad_no_null_comp", TLS_HELLO_BAD, NULL, false, false, false, NULL,
        "null compression"},
    {"gen_bad_sid_33", TLS_HELLO_BAD, NULL, false, false, false, NULL,
        "session_id"},
    {"gen_bad_odd_suites", TLS_HELLO_BAD, NULL, false, false, false, NULL,
        "cipher_suites"},
    {"gen_bad_too_big", TLS_HELLO_BAD, NULL, false, false, false, NULL,
        "at most 32768"},
};

static void
test_corpus_cases(void **state)
{
	static uint8_t buf[1 << 17];
	struct tls_hello h;
	struct err e;
	size_t i, n;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct want *w = &cases[i];
		enum tls_hello_rc rc;

		n = corpus_file("tls_hello", w->file, buf, sizeof(buf));
		err_clear(&e);
		rc = tls_hello_parse(buf, n, &h, &e);
		if (rc != w->rc)
			fail_msg("%s: rc %d, want %d (%s)", w->file, rc, w->rc,
			    e.msg);
		if (w->err != NULL && strstr(e.msg, w->err) == NULL)
			fail_msg("%s: error '%s' lacks '%s'", w->file, e.msg,
			    w->err);
		if (rc != TLS_HELLO_OK)
			continue;
		if (w->sni == NULL) {
			if (h.has_sni)
				fail_msg(
				    "%s: unexpected SNI %s", w->file, h.sni);
		} else if (!h.has_sni || strcmp(h.sni, w->sni) != 0) {
			fail_msg(
			    "%s: SNI '%s', want '%s'", w->file, h.sni, w->sni);
		}
		if (h.sni_is_ip != w->ip || h.has_ech != w->ech ||
		    h.has_esni != w->esni)
			fail_msg("%s: ip/ech/esni %d/%d/%d", w->file,
			    h.sni_is_ip, h.has_ech, h.has_esni);
		if (w->alpn != NULL && !tls_hello_offers_alpn(&h, w->alpn))
			fail_msg("%s: ALPN %s not offered", w->file, w->alpn);
	}
}

/* Byte by byte, as a slow client's segments arrive: MORE until whole. */
static void
test_every_segment_boundary(void **state)
{
	static uint8_t buf[1 << 16];
	struct tls_hello h;
	struct err e;
	size_t i, n;

	(void)state;
	n = corpus_file("tls_hello", "curl_a_test", buf, sizeof(buf));
	for (i = 0; i < n; i++)
		assert_int_equal(
		    tls_hello_parse(buf, i, &h, &e), TLS_HELLO_MORE);
	assert_int_equal(tls_hello_parse(buf, n, &h, &e), TLS_HELLO_OK);
	assert_int_equal(h.consumed, n);
	n = corpus_file(
	    "tls_hello", "gen_split_100_then_appdata", buf, sizeof(buf));
	assert_int_equal(tls_hello_parse(buf, n, &h, &e), TLS_HELLO_OK);
	/* the early-data record after the hello is not consumed */
	assert_int_equal(h.consumed, n - (5 + 5));
}

/* A real hello offers TLS 1.3 through supported_versions. */
static void
test_versions(void **state)
{
	static uint8_t buf[1 << 16];
	struct tls_hello h;
	struct err e;
	size_t n;

	(void)state;
	n = corpus_file("tls_hello", "curl_a_test", buf, sizeof(buf));
	assert_int_equal(tls_hello_parse(buf, n, &h, &e), TLS_HELLO_OK);
	assert_int_equal(h.legacy_version, 0x0303);
	assert_int_equal(h.max_version, 0x0304);
	n = corpus_file("tls_hello", "openssl_tls12", buf, sizeof(buf));
	assert_int_equal(tls_hello_parse(buf, n, &h, &e), TLS_HELLO_OK);
	assert_int_equal(h.max_version, 0x0303);
	n = corpus_file("tls_hello", "gen_alpn_many", buf, sizeof(buf));
	assert_int_equal(tls_hello_parse(buf, n, &h, &e), TLS_HELLO_OK);
	assert_int_equal(h.nalpn, 12);
	assert_false(tls_hello_offers_alpn(&h, "p11")); /* beyond the kept 8 */
	n = corpus_file("tls_hello", "gen_alpn_nul", buf, sizeof(buf));
	assert_int_equal(tls_hello_parse(buf, n, &h, &e), TLS_HELLO_OK);
	assert_false(tls_hello_offers_alpn(&h, "h2")); /* "h2\0x" is not h2 */
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_corpus_cases),
	    cmocka_unit_test(test_every_segment_boundary),
	    cmocka_unit_test(test_versions),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
