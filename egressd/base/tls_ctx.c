#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "egressd/base/tls_ctx.h"

void
tls_ctx_error(char *buf, size_t cap)
{
	unsigned long code = ERR_get_error();

	if (code == 0)
		(void)snprintf(buf, cap, "unknown TLS error");
	else
		ERR_error_string_n(code, buf, cap);
	ERR_clear_error();
}

SSL_CTX *
tls_ctx_new(bool server, struct err *e)
{
	SSL_CTX *ctx =
	    SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
	char why[256];

	if (ctx == NULL ||
	    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) {
		tls_ctx_error(why, sizeof(why));
		err_set(
		    e, "TLS %s context: %s", server ? "server" : "client", why);
		SSL_CTX_free(ctx);
		return NULL;
	}
	SSL_CTX_set_options(
	    ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
	return ctx;
}

/* Adds every certificate of one PEM file; returns how many. */
static size_t
tls_ctx_trust_file(X509_STORE *st, const char *path)
{
	FILE *f = fopen(path, "re");
	X509 *x;
	size_t n = 0;

	if (f == NULL)
		return 0;
	while ((x = PEM_read_X509(f, NULL, NULL, NULL)) != NULL) {
		if (X509_STORE_add_cert(st, x) == 1)
			n++;
		X509_free(x);
	}
	ERR_clear_error(); /* end of file, duplicates */
	fclose(f);
	return n;
}

static int
tls_ctx_trust_dir(
    X509_STORE *st, const char *dir, size_t *ncerts, struct err *e)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char path[4096];
	size_t files = 0;

	if (d == NULL) {
		err_set(e, "trust directory %s: %s", dir, strerror(errno));
		return -1;
	}
	while ((de = readdir(d)) != NULL && files < TLS_CTX_TRUST_FILES_MAX) {
		if (de->d_name[0] == '.')
			continue; /* also ..data of a Kubernetes volume: its
			             files are linked from the top */
		if (snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >=
		    (int)sizeof(path))
			continue;
		files++;
		*ncerts += tls_ctx_trust_file(st, path);
	}
	closedir(d);
	return 0;
}

int
tls_ctx_trust(
    SSL_CTX *ctx, const char *trust_dir, size_t *ncerts, struct err *e)
{
	char why[256];
	size_t n = 0;

	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	if (trust_dir == NULL) {
		if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
			tls_ctx_error(why, sizeof(why));
			err_set(e, "default trust: %s", why);
			return -1;
		}
	} else {
		if (tls_ctx_trust_dir(
		        SSL_CTX_get_cert_store(ctx), trust_dir, &n, e) == -1)
			return -1;
		if (n == 0) {
			err_set(e, "trust directory %s holds no certificate",
			    trust_dir);
			return -1;
		}
	}
	if (ncerts != NULL)
		*ncerts = n;
	return 0;
}
