/*
 * tls_ca: the CA and its leaf certificates (see tls_ca.h).
 */
#include "egressd/proxy/tls_ca.h"
#include "util/fileread.h"
#include "util/fdwrite.h"
#include "util/hash.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#define CA_BUCKETS 2048 /* a power of two, > TLS_CA_CACHE_MAX */
#define LEAF_RENEW_S 86400 /* re-mint a cached leaf with less left */
#define CLOCK_SKEW_S 3600

struct leaf {
	struct leaf *next; /* hash chain */
	struct leaf *newer, *older; /* LRU */
	X509 *x;
	time_t not_after;
	char name[];
};

struct tls_ca {
	EVP_PKEY *key; /* the CA's */
	X509 *cert;
	EVP_PKEY *leaf_key;
	struct leaf *buckets[CA_BUCKETS];
	struct leaf *newest, *oldest;
	size_t nleaves;
	unsigned long minted;
};

/* The first OpenSSL error, for a message (no key material in them). */
static const char *
ossl_reason(void)
{
	unsigned long code = ERR_get_error();
	const char *r = code ? ERR_reason_error_string(code) : NULL;

	ERR_clear_error();
	return r != NULL ? r : "unknown error";
}

static EVP_PKEY *
gen_p256(struct err *e)
{
	EVP_PKEY *k = EVP_EC_gen("P-256");

	if (k == NULL)
		err_set(
		    e, "cannot generate an ECDSA P-256 key: %s", ossl_reason());
	return k;
}

static int
add_ext(X509 *x, X509V3_CTX *ctx, int nid, const char *value, struct err *e)
{
	X509_EXTENSION *ex = X509V3_EXT_conf_nid(NULL, ctx, nid, value);

	if (ex == NULL || !X509_add_ext(x, ex, -1)) {
		X509_EXTENSION_free(ex);
		err_set(e, "certificate extension %s: %s", OBJ_nid2sn(nid),
		    ossl_reason());
		return -1;
	}
	X509_EXTENSION_free(ex);
	return 0;
}

static int
rand_serial(X509 *x)
{
	BIGNUM *bn = BN_new();
	int ok = bn != NULL &&
	    BN_rand(bn, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) &&
	    BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) != NULL;

	BN_free(bn);
	return ok ? 0 : -1;
}

/* A certificate for pub, signed by (issuer, ikey); issuer NULL: self. */
static X509 *
make_cert(const char *cn, EVP_PKEY *pub, X509 *issuer, EVP_PKEY *ikey,
    long days, const char *const *exts, const int *nids, size_t nexts,
    struct err *e)
{
	X509 *x = X509_new();
	X509_NAME *name;
	X509V3_CTX ctx;
	size_t i;

	if (x == NULL || !X509_set_version(x, 2) || rand_serial(x) < 0 ||
	    X509_gmtime_adj(X509_getm_notBefore(x), -CLOCK_SKEW_S) == NULL ||
	    X509_time_adj_ex(X509_getm_notAfter(x), (int)days, 0, NULL) ==
	        NULL ||
	    !X509_set_pubkey(x, pub))
		goto fail;
	name = X509_get_subject_name(x);
	/* a CN holds 64 bytes at most; the SAN is what clients check */
	if (strlen(cn) <= 64 &&
	    !X509_NAME_add_entry_by_txt(
	        name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0))
		goto fail;
	if (issuer == NULL &&
	    !X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
	        (const unsigned char *)"egressd", -1, -1, 0))
		goto fail;
	if (!X509_set_issuer_name(
	        x, issuer ? X509_get_subject_name(issuer) : name))
		goto fail;
	X509V3_set_ctx(&ctx, issuer ? issuer : x, x, NULL, NULL, 0);
	for (i = 0; i < nexts; i++)
		if (add_ext(x, &ctx, nids[i], exts[i], e) < 0) {
			X509_free(x);
			return NULL;
		}
	if (X509_sign(x, ikey, EVP_sha256()) <= 0)
		goto fail;
	return x;
fail:
	err_set(e, "cannot build a certificate: %s", ossl_reason());
	X509_free(x);
	return NULL;
}

static X509 *
make_ca_cert(EVP_PKEY *key, struct err *e)
{
	static const int nids[] = {
	    NID_basic_constraints, NID_key_usage, NID_subject_key_identifier};
	static const char *const exts[] = {"critical,CA:TRUE,pathlen:0",
	    "critical,keyCertSign,cRLSign", "hash"};

	return make_cert("egressd sandbox CA", key, NULL, key, TLS_CA_DAYS,
	    exts, nids, 3, e);
}

/*
 * Opens path for reading. A key must be root's or egressd's, writable and
 * readable by no one else: whoever can read it can mint certificates the
 * sandbox trusts.
 */
static FILE *
open_checked(const char *path, bool secret, bool follow, struct err *e)
{
	unsigned flags = (secret ? FILEREAD_OWNED | FILEREAD_PRIVATE : 0) |
	    (follow ? 0 : FILEREAD_NOFOLLOW);
	int fd = fileread_open(path, flags, e);
	FILE *f;

	if (fd < 0) {
		err_prefix(e, "%s", path);
		return NULL;
	}
	if ((f = fdopen(fd, "r")) == NULL) {
		err_set(e, "%s: cannot read: %s", path, strerror(errno));
		close(fd);
	}
	return f;
}

static EVP_PKEY *
read_key(const char *path, bool follow, struct err *e)
{
	FILE *f = open_checked(path, true, follow, e);
	EVP_PKEY *k;

	if (f == NULL)
		return NULL;
	k = PEM_read_PrivateKey(f, NULL, NULL, NULL);
	fclose(f);
	if (k == NULL)
		err_set(
		    e, "%s: not a PEM private key (%s)", path, ossl_reason());
	return k;
}

static X509 *
read_cert(const char *path, bool follow, struct err *e)
{
	FILE *f = open_checked(path, false, follow, e);
	X509 *x;

	if (f == NULL)
		return NULL;
	x = PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	if (x == NULL)
		err_set(
		    e, "%s: not a PEM certificate (%s)", path, ossl_reason());
	return x;
}

/*
 * Writes a new file at path with mode, never replacing one: a temporary
 * file, fsync, then link(2) (which fails if path exists) and unlink.
 */
static int
write_new(
    const char *path, mode_t mode, EVP_PKEY *key, X509 *cert, struct err *e)
{
	char tmp[4096];
	FILE *f;
	int fd, ok;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >=
	    (int)sizeof(tmp)) {
		err_set(e, "path too long: %s", path);
		return -1;
	}
	(void)unlink(tmp);
	fd = open(
	    tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0 || (f = fdopen(fd, "w")) == NULL) {
		err_set(e, "cannot create %s: %s", tmp, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	ok = key ? PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL)
	         : PEM_write_X509(f, cert);
	ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
	if (fclose(f) != 0)
		ok = 0;
	if (!ok || link(tmp, path) < 0) {
		err_set(e, "cannot write %s: %s", path,
		    ok ? strerror(errno) : "write failed");
		(void)unlink(tmp);
		return -1;
	}
	(void)unlink(tmp);
	return 0;
}

static int
ca_from_state(struct tls_ca *ca, const char *dir, struct err *e)
{
	char kp[4096], cp[4096];
	struct stat st;
	bool have_key, have_cert;

	if (snprintf(kp, sizeof(kp), "%s/%s", dir, TLS_CA_KEY_FILE) >=
	        (int)sizeof(kp) ||
	    snprintf(cp, sizeof(cp), "%s/%s", dir, TLS_CA_CERT_FILE) >=
	        (int)sizeof(cp)) {
		err_set(e, "state directory path too long");
		return -1;
	}
	have_key = lstat(kp, &st) == 0;
	have_cert = lstat(cp, &st) == 0;
	if (have_cert && !have_key) {
		err_set(e,
		    "%s exists without %s: restore the key or remove the "
		    "certificate (sandboxes trusting it must get the new one)",
		    cp, kp);
		return -1;
	}
	if (!have_key) {
		if ((ca->key = gen_p256(e)) == NULL ||
		    write_new(kp, 0600, ca->key, NULL, e) < 0)
			return -1;
	} else if ((ca->key = read_key(kp, false, e)) == NULL) {
		return -1;
	}
	if (have_cert)
		return (ca->cert = read_cert(cp, false, e)) == NULL ? -1 : 0;
	/* first start, or a start interrupted between the two writes */
	if ((ca->cert = make_ca_cert(ca->key, e)) == NULL ||
	    write_new(cp, 0644, NULL, ca->cert, e) < 0)
		return -1;
	return 0;
}

static int
ca_check(struct tls_ca *ca, const char *what, struct err *e)
{
	if (X509_check_private_key(ca->cert, ca->key) != 1) {
		err_set(
		    e, "%s: the CA certificate does not match its key", what);
		return -1;
	}
	if (X509_check_ca(ca->cert) == 0) {
		err_set(e, "%s: the certificate is not a CA certificate", what);
		return -1;
	}
	if (X509_cmp_current_time(X509_get0_notAfter(ca->cert)) <= 0) {
		err_set(e, "%s: the CA certificate has expired", what);
		return -1;
	}
	return 0;
}

struct tls_ca *
tls_ca_open(const char *state_dir, const char *key_file, const char *cert_file,
    struct err *e)
{
	struct tls_ca *ca = calloc(1, sizeof(*ca));
	int rc;

	if (ca == NULL) {
		err_set(e, "out of memory");
		return NULL;
	}
	if ((key_file == NULL) != (cert_file == NULL)) {
		err_set(e,
		    "a CA key file needs its certificate file and the "
		    "other way round");
		goto fail;
	}
	if (key_file != NULL) {
		/* operator files may be links (Kubernetes Secret volumes) */
		ca->key = read_key(key_file, true, e);
		ca->cert = ca->key ? read_cert(cert_file, true, e) : NULL;
		rc = ca->cert ? ca_check(ca, cert_file, e) : -1;
	} else if (state_dir == NULL) {
		err_set(e, "no state directory for the CA");
		rc = -1;
	} else {
		rc = ca_from_state(ca, state_dir, e);
		if (rc == 0)
			rc = ca_check(ca, state_dir, e);
	}
	if (rc < 0 || (ca->leaf_key = gen_p256(e)) == NULL)
		goto fail;
	return ca;
fail:
	tls_ca_free(ca);
	return NULL;
}

static void
leaf_unlink(struct tls_ca *ca, struct leaf *l)
{
	if (l->newer)
		l->newer->older = l->older;
	else
		ca->newest = l->older;
	if (l->older)
		l->older->newer = l->newer;
	else
		ca->oldest = l->newer;
	l->newer = l->older = NULL;
}

static void
leaf_front(struct tls_ca *ca, struct leaf *l)
{
	l->older = ca->newest;
	l->newer = NULL;
	if (ca->newest)
		ca->newest->newer = l;
	ca->newest = l;
	if (ca->oldest == NULL)
		ca->oldest = l;
}

/* The sandbox picks the names, but a chain is at most the whole cache
 * (TLS_CA_CACHE_MAX), so collisions cost time, never memory. */
static size_t
name_bucket(const char *s)
{
	return (size_t)(hash_fnv1a(s, strlen(s)) & (CA_BUCKETS - 1));
}

static void
leaf_drop(struct tls_ca *ca, struct leaf *l)
{
	struct leaf **pp = &ca->buckets[name_bucket(l->name)];

	while (*pp != l)
		pp = &(*pp)->next;
	*pp = l->next;
	leaf_unlink(ca, l);
	X509_free(l->x);
	free(l);
	ca->nleaves--;
}

void
tls_ca_free(struct tls_ca *ca)
{
	if (ca == NULL)
		return;
	while (ca->oldest != NULL)
		leaf_drop(ca, ca->oldest);
	EVP_PKEY_free(ca->key);
	EVP_PKEY_free(ca->leaf_key);
	X509_free(ca->cert);
	free(ca);
}

X509 *
tls_ca_cert(const struct tls_ca *ca)
{
	return ca->cert;
}

EVP_PKEY *
tls_ca_leaf_key(const struct tls_ca *ca)
{
	return ca->leaf_key;
}

unsigned long
tls_ca_minted(const struct tls_ca *ca)
{
	return ca->minted;
}

/* Only host-name bytes reach the SAN text (its syntax has ',' and ':'). */
static bool
sni_ok(const char *s)
{
	size_t n = strlen(s), i;

	if (n == 0 || n > 253)
		return false;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') ||
		        (s[i] >= '0' && s[i] <= '9') || s[i] == '-' ||
		        s[i] == '_' || s[i] == '.'))
			return false;
	return s[0] != '.' && s[n - 1] != '.';
}

X509 *
tls_ca_leaf(struct tls_ca *ca, const char *sni, struct err *e)
{
	static const int nids[] = {NID_basic_constraints, NID_key_usage,
	    NID_ext_key_usage, NID_subject_key_identifier,
	    NID_authority_key_identifier, NID_subject_alt_name};
	const char *exts[6] = {"critical,CA:FALSE", "critical,digitalSignature",
	    "serverAuth", "hash", "keyid:always", NULL};
	char san[8 + 254];
	struct leaf *l, **bucket;
	time_t now = time(NULL);
	size_t n;
	X509 *x;

	if (!sni_ok(sni)) {
		err_set(e,
		    "cannot mint a certificate for a name that is not "
		    "a lowercase host name");
		return NULL;
	}
	bucket = &ca->buckets[name_bucket(sni)];
	for (l = *bucket; l != NULL; l = l->next)
		if (strcmp(l->name, sni) == 0)
			break;
	if (l != NULL && l->not_after - now > LEAF_RENEW_S) {
		leaf_unlink(ca, l);
		leaf_front(ca, l);
		return l->x;
	}
	if (l != NULL)
		leaf_drop(ca, l);
	snprintf(san, sizeof(san), "DNS:%s", sni);
	exts[5] = san;
	x = make_cert(sni, ca->leaf_key, ca->cert, ca->key, TLS_CA_LEAF_DAYS,
	    exts, nids, 6, e);
	if (x == NULL)
		return NULL;
	ca->minted++;
	n = strlen(sni);
	if ((l = calloc(1, sizeof(*l) + n + 1)) == NULL) {
		X509_free(x);
		err_set(e, "out of memory");
		return NULL;
	}
	memcpy(l->name, sni, n + 1);
	l->x = x;
	l->not_after = now + (time_t)TLS_CA_LEAF_DAYS * 86400;
	l->next = *bucket;
	*bucket = l;
	leaf_front(ca, l);
	if (++ca->nleaves > TLS_CA_CACHE_MAX)
		leaf_drop(ca, ca->oldest);
	return x;
}

/* Does path already hold exactly want[0..n), as a regular file of
 * ours with mode 0644 (what a previous export left)? */
static bool
bundle_same(const char *path, const char *want, size_t n)
{
	struct stat st;
	char buf[65536];
	size_t off = 0;
	ssize_t r;
	bool same = false;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return false;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    st.st_uid == geteuid() && (st.st_mode & 07777) == 0644 &&
	    (size_t)st.st_size == n) {
		same = true;
		while (same && off < n) {
			r = read(fd, buf, sizeof(buf));
			if (r <= 0 || (size_t)r > n - off ||
			    memcmp(buf, want + off, (size_t)r) != 0)
				same = false;
			else
				off += (size_t)r;
		}
		/* nothing beyond n (the file grew since fstat) */
		same = same && read(fd, buf, 1) == 0;
	}
	close(fd);
	return same;
}

int
tls_ca_export_bundle(const struct tls_ca *ca, const char *system_bundle,
    const char *path, struct err *e)
{
	const char *sys =
	    system_bundle ? system_bundle : X509_get_default_cert_file();
	char tmp[4096], *roots = NULL, *want = NULL, *pem;
	size_t rlen = 0, n, off;
	long plen;
	BIO *mem = NULL;
	int fd = -1, rc = -1;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >=
	    (int)sizeof(tmp)) {
		err_set(e, "path too long: %s", path);
		return -1;
	}
	if (fileread_all(sys, TLS_BUNDLE_ROOTS_MAX, 0, &roots, &rlen, e) ==
	    -1) {
		err_prefix(e, "cannot read the system roots %s", sys);
		return -1;
	}
	if ((mem = BIO_new(BIO_s_mem())) == NULL ||
	    !PEM_write_bio_X509(mem, ca->cert) ||
	    (plen = BIO_get_mem_data(mem, &pem)) <= 0) {
		err_set(e, "cannot encode the CA certificate");
		goto out;
	}
	/* the roots file may lack a final newline */
	n = rlen + 1 + (size_t)plen;
	if ((want = malloc(n)) == NULL) {
		err_set(e, "out of memory");
		goto out;
	}
	memcpy(want, roots, rlen);
	off = rlen;
	if (rlen > 0 && roots[rlen - 1] != '\n')
		want[off++] = '\n';
	memcpy(want + off, pem, (size_t)plen);
	n = off + (size_t)plen;
	/* A restart finds the bundle it wrote: no write, no fsync (the
	 * start's one disk flush, and it can take long on a busy node). */
	if (bundle_same(path, want, n)) {
		rc = 0;
		goto out;
	}
	(void)unlink(tmp);
	fd = open(
	    tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		err_set(e, "cannot create %s: %s", tmp, strerror(errno));
		goto out;
	}
	/* the mode is 0644 whatever the umask: the sandbox reads it */
	if (fdwrite_all(fd, want, n) == -1 || fchmod(fd, 0644) == -1 ||
	    fsync(fd) == -1 || close(fd) == -1 || rename(tmp, path) == -1) {
		err_set(e, "cannot write %s: %s", path, strerror(errno));
		(void)unlink(tmp);
		fd = -1;
		goto out;
	}
	fd = -1;
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	BIO_free(mem);
	free(want);
	free(roots);
	return rc;
}
