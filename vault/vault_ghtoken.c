/*
 * vault_ghtoken: a GitHub installation token's answer (vault_ghtoken.h),
 * on vault_json.c's strict reader.
 */
#include <string.h>

#include "vault/vault_ghtoken.h"
#include "vault/vault_json.h"
#include "vault/vault_token.h"

#define PFX "installation token response: "

/* n digits at s as a number, or -1. */
static int
digits(const char *s, size_t n)
{
	int v = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v;
}

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian; H. Hinnant's). */
static int64_t
days_from_civil(int y, int m, int d)
{
	int64_t era, yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

static int
month_days(int y, int m)
{
	static const int md[] = {
	    31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;

	return m == 2 && leap ? 29 : md[m - 1];
}

/* The zone after the seconds (and fraction): "Z" or +HH:MM / -HH:MM, in
 * seconds east of UTC; -1 when malformed. */
static int
zone(const char *s, size_t n, int *east)
{
	int hh, mm;

	if (n == 1 && (s[0] == 'Z' || s[0] == 'z')) {
		*east = 0;
		return 0;
	}
	if (n != 6 || (s[0] != '+' && s[0] != '-') || s[3] != ':' ||
	    (hh = digits(s + 1, 2)) < 0 || (mm = digits(s + 4, 2)) < 0 ||
	    hh > 23 || mm > 59)
		return -1;
	*east = (s[0] == '-' ? -1 : 1) * (hh * 3600 + mm * 60);
	return 0;
}

int
vault_ghtoken_time(const char *s, size_t n, int64_t *out)
{
	int y, mo, d, h, mi, sec, east;
	size_t i = 19;

	if (n < 20 || s[4] != '-' || s[7] != '-' ||
	    (s[10] != 'T' && s[10] != 't') || s[13] != ':' || s[16] != ':')
		return -1;
	if ((y = digits(s, 4)) < 1970 || (mo = digits(s + 5, 2)) < 1 ||
	    mo > 12 || (d = digits(s + 8, 2)) < 1 || d > month_days(y, mo) ||
	    (h = digits(s + 11, 2)) < 0 || h > 23 ||
	    (mi = digits(s + 14, 2)) < 0 || mi > 59 ||
	    (sec = digits(s + 17, 2)) < 0 || sec > 60)
		return -1;
	if (s[i] == '.') { /* a fraction: 1..9 digits, dropped */
		size_t f0 = ++i;

		while (i < n && s[i] >= '0' && s[i] <= '9')
			i++;
		if (i == f0 || i - f0 > 9)
			return -1;
	}
	if (zone(s + i, n - i, &east) == -1)
		return -1;
	if (sec == 60) /* a leap second reads as the next one */
		sec = 59;
	*out =
	    days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec - east;
	return 0;
}

/* One member's value (key kn bytes at k); seen: bit 0 token, 1 expiry. */
static int
member(struct vault_json *r, const char *k, size_t kn, struct vault_ghtoken *t,
    unsigned *seen, struct err *e)
{
	unsigned bit = kn == 5 && memcmp(k, "token", 5) == 0 ? 1u
	    : kn == 10 && memcmp(k, "expires_at", 10) == 0   ? 2u
	                                                     : 0u;
	size_t mark = r->off, n;
	const char *s;

	if (bit == 0)
		return vault_json_skip(r, 1, VAULT_GHTOKEN_DEPTH_MAX);
	if (*seen & bit) {
		err_set(e, PFX "a member twice");
		return -1;
	}
	*seen |= bit;
	if (vault_json_str(r, &s, &n) == -1)
		return -1;
	if (bit == 2) {
		int rc = vault_ghtoken_time(s, n, &t->expires_at);

		memset(r->buf + mark, 0, n);
		r->off = mark;
		if (rc == -1)
			err_set(e, PFX "expires_at is not an ISO 8601 time");
		return rc;
	}
	if (!vault_token_ok(s, n)) {
		err_set(e, PFX "token is not 1 to %u visible ASCII bytes",
		    VAULT_TOKEN_MAX);
		return -1;
	}
	t->token = s;
	t->token_len = n;
	return 0;
}

struct ghtoken_walk {
	struct vault_ghtoken *t;
	unsigned *seen;
	struct err *e;
};

static int
ghtoken_member(void *arg, struct vault_json *r, const char *key, size_t klen)
{
	struct ghtoken_walk *w = arg;

	return member(r, key, klen, w->t, w->seen, w->e);
}

int
vault_ghtoken_parse(const uint8_t *body, size_t n, char *buf, size_t cap,
    struct vault_ghtoken *t, struct err *e)
{
	struct vault_json r = {body, body + n, buf, 0, cap};
	unsigned seen = 0;

	memset(t, 0, sizeof(*t));
	err_clear(e);
	if (n > VAULT_GHTOKEN_BODY_MAX || cap < n) {
		err_set(
		    e, PFX "body larger than %u bytes", VAULT_GHTOKEN_BODY_MAX);
		return -1;
	}
	struct ghtoken_walk w = {t, &seen, e};

	if (vault_json_object(&r, ghtoken_member, &w) == -1 ||
	    (vault_json_ws(&r), r.p != r.end)) {
		if (e->msg[0] == '\0')
			err_set(e, PFX "not one JSON object");
		goto fail;
	}
	if (!(seen & 1u)) {
		err_set(e, PFX "no token");
		goto fail;
	}
	if (!(seen & 2u)) {
		err_set(e, PFX "no expires_at");
		goto fail;
	}
	return 0;
fail:
	t->token = NULL;
	t->token_len = 0;
	return -1;
}
