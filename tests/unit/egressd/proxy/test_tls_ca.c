/*
 * tls_ca: the CA generated in a state directory (modes, reuse, half
 * states, refusals), leaves that verify for their name only, the bounded
 * cache, the exported bundle, and a real TLS handshake in memory between a
 * server using a minted leaf and a client trusting only the bundle.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "egressd/proxy/tls_ca.h"

static char dir[64];

static int
setup(void **state)
{
	(void)state;
	strcpy(dir, "/tmp/egressd-tls-ca.XXXXXX");
	return mkdtemp(dir) == NULL ? -1 : 0;
}

static int
teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void
path(char *out, const char *name)
{
	snprintf(out, 256, "%s/%s", dir, name);
}

static mode_t
mode_of(const char *name)
{
	char p[256];
	struct stat st;

	path(p, name);
	assert_int_equal(stat(p, &st), 0);
	return st.st_mode & 0777;
}

/* Verifies leaf against the CA (or a bundle file) for host. */
static int
verify(X509 *ca, const char *bundle, X509 *leaf, const char *host)
{
	X509_STORE *st = X509_STORE_new();
	X509_STORE_CTX *ctx = X509_STORE_CTX_new();
	X509_VERIFY_PARAM *vp;
	int ok;

	assert_non_null(st);
	assert_non_null(ctx);
	if (ca != NULL)
		assert_int_equal(X509_STORE_add_cert(st, ca), 1);
	if (bundle != NULL)
		assert_int_equal(X509_STORE_load_file(st, bundle), 1);
	assert_int_equal(X509_STORE_CTX_init(ctx, st, leaf, NULL), 1);
	X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_SERVER);
	vp = X509_STORE_CTX_get0_param(ctx);
	X509_VERIFY_PARAM_set1_host(vp, host, 0);
	ok = X509_verify_cert(ctx);
	X509_STORE_CTX_free(ctx);
	X509_STORE_free(st);
	return ok;
}

static void
test_generate_and_reuse(void **state)
{
	struct tls_ca *ca, *again;
	struct err e;

	(void)state;
	ca = tls_ca_open(dir, NULL, NULL, &e);
	if (ca == NULL)
		fail_msg("open: %s", e.msg);
	assert_int_equal(mode_of(TLS_CA_KEY_FILE), 0600);
	assert_int_equal(mode_of(TLS_CA_CERT_FILE), 0644);
	assert_int_equal(X509_check_ca(tls_ca_cert(ca)), 1);
	again = tls_ca_open(dir, NULL, NULL, &e);
	assert_non_null(again);
	/* the same CA: sandboxes keep trusting it across restarts */
	assert_int_equal(X509_cmp(tls_ca_cert(ca), tls_ca_cert(again)), 0);
	tls_ca_free(again);
	tls_ca_free(ca);
}

static void
test_leaves(void **state)
{
	struct tls_ca *ca;
	struct err e;
	X509 *a, *b, *a2;
	char name[300];
	unsigned long m;
	int i;

	(void)state;
	ca = tls_ca_open(dir, NULL, NULL, &e);
	assert_non_null(ca);
	a = tls_ca_leaf(ca, "a.test", &e);
	assert_non_null(a);
	assert_int_equal(verify(tls_ca_cert(ca), NULL, a, "a.test"), 1);
	assert_int_equal(verify(tls_ca_cert(ca), NULL, a, "b.test"), 0);
	assert_int_equal(X509_check_host(a, "a.test", 0, 0, NULL), 1);
	assert_int_equal(X509_check_ca(a), 0);
	/* cached: the same object, nothing minted */
	m = tls_ca_minted(ca);
	assert_ptr_equal(tls_ca_leaf(ca, "a.test", &e), a);
	assert_int_equal(tls_ca_minted(ca), m);
	b = tls_ca_leaf(ca, "b.test", &e);
	assert_non_null(b);
	assert_int_equal(verify(tls_ca_cert(ca), NULL, b, "b.test"), 1);
	/* a 200-byte name has no CN but its SAN */
	memset(name, 'a', 60);
	strcpy(name + 60, ".");
	memset(name + 61, 'b', 60);
	strcpy(name + 121, ".");
	memset(name + 122, 'c', 60);
	strcpy(name + 182, ".example.com");
	a2 = tls_ca_leaf(ca, name, &e);
	assert_non_null(a2);
	assert_int_equal(verify(tls_ca_cert(ca), NULL, a2, name), 1);
	/* not host names: refused, nothing minted */
	m = tls_ca_minted(ca);
	assert_null(tls_ca_leaf(ca, "A.test", &e));
	assert_null(tls_ca_leaf(ca, "a.test,DNS:evil.test", &e));
	assert_null(tls_ca_leaf(ca, "", &e));
	assert_null(tls_ca_leaf(ca, "a.test.", &e));
	assert_int_equal(tls_ca_minted(ca), m);
	/* the cache is bounded: after TLS_CA_CACHE_MAX other names, a.test
	 * is minted again */
	for (i = 0; i < TLS_CA_CACHE_MAX; i++) {
		snprintf(name, sizeof(name), "n%d.test", i);
		assert_non_null(tls_ca_leaf(ca, name, &e));
	}
	m = tls_ca_minted(ca);
	assert_non_null(tls_ca_leaf(ca, "a.test", &e));
	assert_int_equal(tls_ca_minted(ca), m + 1);
	tls_ca_free(ca);
}

static void
test_refusals(void **state)
{
	char kp[256], cp[256], cmd[600];
	struct err e;
	struct tls_ca *ca;
	FILE *f;

	(void)state;
	path(kp, TLS_CA_KEY_FILE);
	path(cp, TLS_CA_CERT_FILE);
	assert_non_null(ca = tls_ca_open(dir, NULL, NULL, &e));
	tls_ca_free(ca);
	/* a key others can read */
	assert_int_equal(chmod(kp, 0644), 0);
	assert_null(tls_ca_open(dir, NULL, NULL, &e));
	assert_non_null(strstr(e.msg, "readable by group or others"));
	assert_int_equal(chmod(kp, 0600), 0);
	/* a key without its certificate: the certificate is made again */
	snprintf(cmd, sizeof(cmd), "mv '%s' '%s.saved'", cp, cp);
	assert_int_equal(system(cmd), 0);
	assert_non_null(ca = tls_ca_open(dir, NULL, NULL, &e));
	tls_ca_free(ca);
	/* a certificate without its key: refused, nothing replaced */
	snprintf(cmd, sizeof(cmd), "mv '%s' '%s.saved'", kp, kp);
	assert_int_equal(system(cmd), 0);
	assert_null(tls_ca_open(dir, NULL, NULL, &e));
	assert_non_null(strstr(e.msg, "exists without"));
	/* a corrupt key */
	assert_non_null(f = fopen(kp, "w"));
	fputs("-----BEGIN PRIVATE KEY-----\nnot base64\n", f);
	fclose(f);
	assert_int_equal(chmod(kp, 0600), 0);
	assert_null(tls_ca_open(dir, NULL, NULL, &e));
	assert_non_null(strstr(e.msg, "not a PEM private key"));
	/* operator files: a mismatched pair is refused, and a key without
	 * a certificate */
	snprintf(cmd, sizeof(cmd), "mv -f '%s.saved' '%s'", kp, kp);
	assert_int_equal(system(cmd), 0);
	assert_null(tls_ca_open(NULL, kp, NULL, &e));
	assert_non_null(ca = tls_ca_open(NULL, kp, cp, &e));
	tls_ca_free(ca);
	{
		char od[128], okp[256];

		snprintf(od, sizeof(od), "%s/other", dir);
		assert_int_equal(mkdir(od, 0700), 0);
		assert_non_null(ca = tls_ca_open(od, NULL, NULL, &e));
		tls_ca_free(ca);
		snprintf(okp, sizeof(okp), "%s/%s", od, TLS_CA_KEY_FILE);
		assert_null(tls_ca_open(NULL, okp, cp, &e));
		assert_non_null(strstr(e.msg, "does not match"));
	}
}

/* Pumps bytes between two memory-BIO TLS endpoints until both are done. */
static int
handshake(SSL *c, SSL *s)
{
	int i, rc = -1, cd = 0, sd = 0;

	for (i = 0; i < 100 && !(cd && sd); i++) {
		if (!cd) {
			int r = SSL_do_handshake(c);

			if (r == 1)
				cd = 1;
			else if (SSL_get_error(c, r) != SSL_ERROR_WANT_READ)
				return -1;
		}
		if (!sd) {
			int r = SSL_do_handshake(s);

			if (r == 1)
				sd = 1;
			else if (SSL_get_error(s, r) != SSL_ERROR_WANT_READ)
				return -1;
		}
	}
	if (cd && sd)
		rc = 0;
	return rc;
}

static void
test_bundle_and_handshake(void **state)
{
	char bundle[256], roots[256];
	struct tls_ca *ca;
	struct err e;
	SSL_CTX *cctx, *sctx;
	SSL *c, *s;
	BIO *c2s, *s2c;
	X509 *leaf;
	FILE *f;

	(void)state;
	assert_non_null(ca = tls_ca_open(dir, NULL, NULL, &e));
	/* a stand-in for the system roots: another CA */
	path(roots, "roots.pem");
	{
		char od[256];
		struct tls_ca *other;

		snprintf(od, sizeof(od), "%s/roots", dir);
		assert_int_equal(mkdir(od, 0700), 0);
		assert_non_null(other = tls_ca_open(od, NULL, NULL, &e));
		assert_non_null(f = fopen(roots, "w"));
		PEM_write_X509(f, tls_ca_cert(other));
		fclose(f);
		tls_ca_free(other);
	}
	path(bundle, "bundle.pem");
	if (tls_ca_export_bundle(ca, roots, bundle, &e) < 0)
		fail_msg("export: %s", e.msg);
	assert_int_equal(mode_of("bundle.pem"), 0644);
	/* a restart finds it as it was written: left alone (same inode);
	 * any difference (content, a mode, a link in its place) rewrites it */
	{
		struct stat a, b;
		char ln[256];

		assert_int_equal(stat(bundle, &a), 0);
		if (tls_ca_export_bundle(ca, roots, bundle, &e) < 0)
			fail_msg("export again: %s", e.msg);
		assert_int_equal(stat(bundle, &b), 0);
		assert_int_equal(a.st_ino, b.st_ino);
		assert_non_null(f = fopen(bundle, "a"));
		fputs("junk\n", f);
		fclose(f);
		if (tls_ca_export_bundle(ca, roots, bundle, &e) < 0)
			fail_msg("export over junk: %s", e.msg);
		assert_int_equal(stat(bundle, &a), 0);
		assert_int_not_equal(a.st_ino, b.st_ino);
		assert_int_equal(a.st_size, b.st_size);
		assert_int_equal(chmod(bundle, 0600), 0);
		if (tls_ca_export_bundle(ca, roots, bundle, &e) < 0)
			fail_msg("export over 0600: %s", e.msg);
		assert_int_equal(mode_of("bundle.pem"), 0644);
		/* a link to a copy with the same bytes is replaced by a file */
		path(ln, "bundle.copy");
		assert_int_equal(rename(bundle, ln), 0);
		assert_int_equal(symlink(ln, bundle), 0);
		if (tls_ca_export_bundle(ca, roots, bundle, &e) < 0)
			fail_msg("export over a link: %s", e.msg);
		assert_int_equal(lstat(bundle, &a), 0);
		assert_true(S_ISREG(a.st_mode));
		assert_int_equal(unlink(ln), 0);
	}
	assert_non_null(leaf = tls_ca_leaf(ca, "api.example.com", &e));
	assert_int_equal(verify(NULL, bundle, leaf, "api.example.com"), 1);
	assert_int_equal(verify(NULL, roots, leaf, "api.example.com"), 0);

	sctx = SSL_CTX_new(TLS_server_method());
	cctx = SSL_CTX_new(TLS_client_method());
	assert_non_null(sctx);
	assert_non_null(cctx);
	assert_int_equal(SSL_CTX_use_certificate(sctx, leaf), 1);
	assert_int_equal(SSL_CTX_use_PrivateKey(sctx, tls_ca_leaf_key(ca)), 1);
	assert_int_equal(SSL_CTX_load_verify_locations(cctx, bundle, NULL), 1);
	SSL_CTX_set_verify(cctx, SSL_VERIFY_PEER, NULL);
	c = SSL_new(cctx);
	s = SSL_new(sctx);
	SSL_set1_host(c, "api.example.com");
	SSL_set_tlsext_host_name(c, "api.example.com");
	c2s = BIO_new(BIO_s_bio());
	s2c = BIO_new(BIO_s_bio());
	BIO_make_bio_pair(c2s, s2c);
	SSL_set_bio(c, c2s, c2s);
	SSL_set_bio(s, s2c, s2c);
	SSL_set_connect_state(c);
	SSL_set_accept_state(s);
	assert_int_equal(handshake(c, s), 0);
	assert_int_equal(SSL_get_verify_result(c), X509_V_OK);
	SSL_free(c);
	SSL_free(s);
	/* a client checking another name refuses the leaf */
	c = SSL_new(cctx);
	s = SSL_new(sctx);
	SSL_set1_host(c, "other.example.com");
	c2s = BIO_new(BIO_s_bio());
	s2c = BIO_new(BIO_s_bio());
	BIO_make_bio_pair(c2s, s2c);
	SSL_set_bio(c, c2s, c2s);
	SSL_set_bio(s, s2c, s2c);
	SSL_set_connect_state(c);
	SSL_set_accept_state(s);
	assert_int_equal(handshake(c, s), -1);
	SSL_free(c);
	SSL_free(s);
	SSL_CTX_free(cctx);
	SSL_CTX_free(sctx);
	tls_ca_free(ca);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(
	        test_generate_and_reuse, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_leaves, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_bundle_and_handshake, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
