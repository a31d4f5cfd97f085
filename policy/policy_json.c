/*
 * policy_json: a strict RFC 8259 reader producing the shared parse tree
 * with a line and column for every value, so that schema errors in JSON
 * point at the offending value just as they do in YAML (jansson keeps no
 * positions). Pure: bytes and a bound in, tree or one error out.
 *
 * Rejected: invalid UTF-8, raw control characters in strings, "\u0000",
 * lone surrogates, nesting deeper than POLICY_DEPTH_MAX, trailing bytes.
 * Duplicate keys are reported by the schema walk, not here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy_int.h"
#include "util/secmem.h"
#include "util/text.h"
#include "util/utf8.h"

struct jr {
	const char *b;
	size_t len, pos;
	unsigned line, col;
	unsigned depth;
	size_t nodes;
	char msg[ERR_MSG_MAX];
	unsigned eline, ecol;
};

static struct pnode *jr_value(struct jr *j);

static void __attribute__((format(printf, 2, 3)))
jr_fail(struct jr *j, const char *fmt, ...)
{
	va_list ap;

	if (j->msg[0] != '\0')
		return;
	va_start(ap, fmt);
	(void)vsnprintf(j->msg, sizeof(j->msg), fmt, ap);
	va_end(ap);
	j->eline = j->line;
	j->ecol = j->col;
}

static int
jr_peek(const struct jr *j)
{
	return j->pos < j->len ? (unsigned char)j->b[j->pos] : -1;
}

static void
jr_adv(struct jr *j)
{
	if (j->b[j->pos] == '\n') {
		j->line++;
		j->col = 1;
	} else
		j->col++;
	j->pos++;
}

static void
jr_ws(struct jr *j)
{
	int c;

	while ((c = jr_peek(j)) == ' ' || c == '\t' || c == '\n' || c == '\r')
		jr_adv(j);
}

static struct pnode *
jr_node(struct jr *j, enum pnode_type t)
{
	struct pnode *n;

	if (++j->nodes > POLICY_NODES_MAX) {
		jr_fail(j, "document has too many values");
		return NULL;
	}
	if ((n = policy_node_new(t, j->line, j->col)) == NULL)
		jr_fail(j, "out of memory");
	return n;
}

static int
jr_lit(struct jr *j, const char *word)
{
	size_t n = strlen(word);

	if (j->len - j->pos < n || memcmp(j->b + j->pos, word, n) != 0) {
		jr_fail(j, "invalid literal");
		return -1;
	}
	while (n-- > 0)
		jr_adv(j);
	return 0;
}

static long
jr_hex4(struct jr *j)
{
	long v = 0;
	int i, h;

	for (i = 0; i < 4; i++) {
		if ((h = text_hexval(jr_peek(j))) < 0) {
			jr_fail(j, "invalid \\u escape");
			return -1;
		}
		v = v * 16 + h;
		jr_adv(j);
	}
	return v;
}

static long
jr_uescape(struct jr *j)
{
	long hi = jr_hex4(j), lo;

	if (hi < 0)
		return -1;
	if (hi >= 0xdc00 && hi <= 0xdfff)
		goto lone;
	if (hi < 0xd800 || hi > 0xdbff)
		return hi == 0 ? (jr_fail(j, "\\u0000 in string"), -1) : hi;
	if (jr_peek(j) != '\\')
		goto lone;
	jr_adv(j);
	if (jr_peek(j) != 'u')
		goto lone;
	jr_adv(j);
	if ((lo = jr_hex4(j)) < 0)
		return -1;
	if (lo < 0xdc00 || lo > 0xdfff)
		goto lone;
	return 0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00);
lone:
	jr_fail(j, "lone surrogate in \\u escape");
	return -1;
}

static int
jr_escape(struct jr *j, char *o, size_t *on)
{
	static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
	const char *p;
	int c;

	jr_adv(j); /* backslash */
	if ((c = jr_peek(j)) == 'u') {
		jr_adv(j);
		long cp = jr_uescape(j);
		if (cp < 0)
			return -1;
		*on += utf8_encode(o + *on, (uint32_t)cp);
		return 0;
	}
	if (c <= 0 || (p = strchr(from, c)) == NULL) {
		jr_fail(j, "invalid escape in string");
		return -1;
	}
	o[(*on)++] = to[p - from];
	jr_adv(j);
	return 0;
}

static int
jr_strbody(struct jr *j, struct pnode *n)
{
	size_t cap = 64, on = 0, k;
	char *o = malloc(cap), *no;
	int c;

	if (o == NULL)
		goto oom;
	jr_adv(j); /* opening quote */
	while ((c = jr_peek(j)) != '"') {
		if (on + 8 > cap) {
			if (cap >= POLICY_SCALAR_MAX) {
				jr_fail(j, "string longer than %u bytes",
				    POLICY_SCALAR_MAX);
				goto out_free;
			}
			/* Moved by copy and wipe, never realloc: the string
			 * may be a credential value (an API body), and a
			 * realloc that moves it leaves the old bytes in freed
			 * memory. */
			if ((no = malloc(cap * 2)) == NULL)
				goto oom;
			memcpy(no, o, on);
			secmem_wipe(o, cap);
			free(o);
			o = no;
			cap *= 2;
		}
		if (c < 0) {
			jr_fail(j, "unterminated string");
			goto out_free;
		}
		if (c < 0x20) {
			jr_fail(j, "control character in string");
			goto out_free;
		}
		if (c == '\\') {
			if (jr_escape(j, o, &on) == -1)
				goto out_free;
			continue;
		}
		k = utf8_decode((const unsigned char *)j->b + j->pos,
		    j->len - j->pos, NULL);
		if (k == 0) {
			jr_fail(j, "invalid UTF-8 in string");
			goto out_free;
		}
		while (k-- > 0) {
			o[on++] = j->b[j->pos];
			jr_adv(j);
		}
	}
	jr_adv(j);
	o[on] = '\0';
	n->str = o;
	n->len = on;
	return 0;
oom:
	jr_fail(j, "out of memory");
out_free:
	if (o != NULL)
		secmem_wipe(o, cap);
	free(o);
	return -1;
}

static struct pnode *
jr_string(struct jr *j)
{
	struct pnode *n = jr_node(j, PNODE_STR);

	if (n != NULL && jr_strbody(j, n) == -1) {
		policy_node_free(n);
		return NULL;
	}
	return n;
}

static bool
isdig(int c)
{
	return c >= '0' && c <= '9';
}

static int
jr_digits(struct jr *j)
{
	if (!isdig(jr_peek(j))) {
		jr_fail(j, "invalid number");
		return -1;
	}
	while (isdig(jr_peek(j)))
		jr_adv(j);
	return 0;
}

static struct pnode *
jr_number(struct jr *j)
{
	struct pnode *n = jr_node(j, PNODE_NUM);
	size_t start = j->pos;

	if (n == NULL)
		return NULL;
	if (jr_peek(j) == '-')
		jr_adv(j);
	if (jr_peek(j) == '0')
		jr_adv(j);
	else if (jr_digits(j) == -1)
		goto out_free;
	if (jr_peek(j) == '.') {
		jr_adv(j);
		if (jr_digits(j) == -1)
			goto out_free;
	}
	if (jr_peek(j) == 'e' || jr_peek(j) == 'E') {
		jr_adv(j);
		if (jr_peek(j) == '+' || jr_peek(j) == '-')
			jr_adv(j);
		if (jr_digits(j) == -1)
			goto out_free;
	}
	if (j->pos - start > 64) {
		jr_fail(j, "number too long");
		goto out_free;
	}
	n->len = j->pos - start;
	if ((n->str = strndup(j->b + start, n->len)) == NULL) {
		jr_fail(j, "out of memory");
		goto out_free;
	}
	return n;
out_free:
	policy_node_free(n);
	return NULL;
}

static int
jr_expect(struct jr *j, int c, const char *what)
{
	jr_ws(j);
	if (jr_peek(j) != c) {
		jr_fail(j, "expected %s", what);
		return -1;
	}
	jr_adv(j);
	return 0;
}

/* Adds kid (NULL: its reader failed) to parent, which takes it; a kid
 * that cannot be added is freed. */
static int
jr_add(struct jr *j, struct pnode *parent, struct pnode *kid)
{
	if (kid == NULL)
		return -1;
	if (policy_node_add(parent, kid) == -1) {
		policy_node_free(kid);
		jr_fail(j, "out of memory");
		return -1;
	}
	return 0;
}

static int
jr_member(struct jr *j, struct pnode *map)
{
	jr_ws(j);
	if (jr_peek(j) != '"') {
		jr_fail(j, "expected a string key");
		return -1;
	}
	if (jr_add(j, map, jr_string(j)) == -1 ||
	    jr_expect(j, ':', "':' after key") == -1)
		return -1;
	return jr_add(j, map, jr_value(j));
}

static int
jr_item(struct jr *j, struct pnode *seq)
{
	return jr_add(j, seq, jr_value(j));
}

/* Objects and arrays: one loop, members or items. */
static struct pnode *
jr_container(struct jr *j, bool map)
{
	struct pnode *n = jr_node(j, map ? PNODE_MAP : PNODE_SEQ);
	int close = map ? '}' : ']';

	if (n == NULL)
		return NULL;
	if (++j->depth > POLICY_DEPTH_MAX) {
		jr_fail(j, "nesting deeper than %d", POLICY_DEPTH_MAX);
		goto out_free;
	}
	jr_adv(j);
	jr_ws(j);
	if (jr_peek(j) == close) {
		jr_adv(j);
		j->depth--;
		return n;
	}
	for (;;) {
		if ((map ? jr_member(j, n) : jr_item(j, n)) == -1)
			goto out_free;
		jr_ws(j);
		if (jr_peek(j) == close)
			break;
		if (jr_peek(j) != ',') {
			jr_fail(j, "expected ',' or '%c'", close);
			goto out_free;
		}
		jr_adv(j);
	}
	jr_adv(j);
	j->depth--;
	return n;
out_free:
	policy_node_free(n);
	return NULL;
}

static struct pnode *
jr_word(struct jr *j, enum pnode_type t, const char *word)
{
	struct pnode *n = jr_node(j, t);

	if (n == NULL)
		return NULL;
	if (jr_lit(j, word) == -1 ||
	    (t != PNODE_NULL && (n->str = strdup(word)) == NULL)) {
		jr_fail(j, "invalid literal");
		policy_node_free(n);
		return NULL;
	}
	n->len = n->str ? strlen(n->str) : 0;
	return n;
}

static struct pnode *
jr_value(struct jr *j)
{
	int c;

	jr_ws(j);
	switch ((c = jr_peek(j))) {
	case '{':
		return jr_container(j, true);
	case '[':
		return jr_container(j, false);
	case '"':
		return jr_string(j);
	case 't':
		return jr_word(j, PNODE_BOOL, "true");
	case 'f':
		return jr_word(j, PNODE_BOOL, "false");
	case 'n':
		return jr_word(j, PNODE_NULL, "null");
	case -1:
		jr_fail(j, "unexpected end of input");
		return NULL;
	default:
		if (c == '-' || isdig(c))
			return jr_number(j);
		jr_fail(j, "unexpected character");
		return NULL;
	}
}

struct pnode *
policy_json_read(
    const char *buf, size_t len, const char *name, struct policy_diag *d)
{
	struct jr j = {.b = buf, .len = len, .line = 1, .col = 1};
	struct pnode *root;

	/* A UTF-8 byte order mark is tolerated at the start. */
	if (len >= 3 && memcmp(buf, "\xef\xbb\xbf", 3) == 0)
		j.pos = 3;
	jr_ws(&j);
	if (j.pos == len)
		return policy_node_new(PNODE_NULL, 1, 1);
	if ((root = jr_value(&j)) != NULL) {
		jr_ws(&j);
		if (j.pos == len)
			return root;
		jr_fail(&j, "trailing characters after the document");
		policy_node_free(root);
	}
	policy_diag_add(d, name, j.eline, j.ecol, "%s", j.msg);
	return NULL;
}
