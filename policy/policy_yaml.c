/*
 * policy_yaml: libyaml events into the shared parse tree, and the file
 * loader that picks the reader.
 *
 * Accepted is one document of block or flow YAML. Refused: anchors and
 * aliases (no reference bombs, no hidden sharing), explicit tags, more
 * than one document, nesting deeper than POLICY_DEPTH_MAX. Plain scalars
 * are typed like YAML 1.2's core schema: null/~/empty, true/false,
 * numbers; everything else (including yes/no/on/off) is a string. Quoted
 * scalars are always strings.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "policy/policy_int.h"
#include "util/fileread.h"
#include "util/secmem.h"

struct yr {
	const char *name;
	struct policy_diag *d;
	struct pnode *stack[POLICY_DEPTH_MAX + 1];
	unsigned depth;
	struct pnode *root;
	size_t nodes, errs;
	unsigned docs;
};

static void __attribute__((format(printf, 3, 4)))
yr_err(struct yr *y, const yaml_mark_t *m, const char *fmt, ...)
{
	va_list ap;

	y->errs++;
	va_start(ap, fmt);
	policy_diag_vadd(y->d, y->name, m ? (unsigned)m->line + 1 : 0,
	    m ? (unsigned)m->column + 1 : 0, fmt, ap);
	va_end(ap);
}

static bool
all_digits(const char *s, size_t n)
{
	size_t i;

	if (n == 0)
		return false;
	for (i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

/* [-+]? digits ( . digits? )? ( [eE] [-+]? digits )? */
static bool
is_number(const char *s, size_t n)
{
	size_t i = 0, st;

	if (i < n && (s[i] == '-' || s[i] == '+'))
		i++;
	st = i;
	while (i < n && s[i] >= '0' && s[i] <= '9')
		i++;
	if (i == st)
		return false;
	if (i < n && s[i] == '.') {
		i++;
		while (i < n && s[i] >= '0' && s[i] <= '9')
			i++;
	}
	if (i < n && (s[i] == 'e' || s[i] == 'E')) {
		i++;
		if (i < n && (s[i] == '-' || s[i] == '+'))
			i++;
		if (!all_digits(s + i, n - i))
			return false;
		return true;
	}
	return i == n;
}

static enum pnode_type
plain_type(const char *s, size_t n)
{
	static const char *const nulls[] = {"", "~", "null", "Null", "NULL"};
	static const char *const bools[] = {
	    "true", "True", "TRUE", "false", "False", "FALSE"};
	size_t i;

	for (i = 0; i < sizeof(nulls) / sizeof(nulls[0]); i++)
		if (n == strlen(nulls[i]) && memcmp(s, nulls[i], n) == 0)
			return PNODE_NULL;
	for (i = 0; i < sizeof(bools) / sizeof(bools[0]); i++)
		if (n == strlen(bools[i]) && memcmp(s, bools[i], n) == 0)
			return PNODE_BOOL;
	return is_number(s, n) ? PNODE_NUM : PNODE_STR;
}

/* Attaches a finished node to the open container (or makes it the root). */
static int
yr_attach(struct yr *y, struct pnode *n)
{
	if (y->depth == 0) {
		if (y->root != NULL) {
			policy_node_free(n);
			return -1;
		}
		y->root = n;
		return 0;
	}
	if (policy_node_add(y->stack[y->depth - 1], n) == -1) {
		policy_node_free(n);
		return -1;
	}
	return 0;
}

static struct pnode *
yr_node(struct yr *y, enum pnode_type t, const yaml_mark_t *m)
{
	if (++y->nodes > POLICY_NODES_MAX) {
		yr_err(y, m, "document has too many values");
		return NULL;
	}
	return policy_node_new(
	    t, (unsigned)m->line + 1, (unsigned)m->column + 1);
}

static void
yr_props(struct yr *y, const yaml_mark_t *m, const yaml_char_t *anchor,
    const yaml_char_t *tag, bool implicit)
{
	if (anchor != NULL)
		yr_err(y, m, "anchors and aliases are not allowed");
	if (tag != NULL && !implicit)
		yr_err(y, m, "tags are not allowed");
}

static int
yr_scalar(struct yr *y, const yaml_event_t *ev)
{
	const char *v = (const char *)ev->data.scalar.value;
	size_t n = ev->data.scalar.length;
	bool plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
	struct pnode *node;

	yr_props(y, &ev->start_mark, ev->data.scalar.anchor,
	    ev->data.scalar.tag,
	    ev->data.scalar.plain_implicit || ev->data.scalar.quoted_implicit);
	if (n > POLICY_SCALAR_MAX) {
		yr_err(y, &ev->start_mark, "scalar longer than %u bytes",
		    POLICY_SCALAR_MAX);
		return 0;
	}
	if (memchr(v, '\0', n) != NULL) {
		yr_err(y, &ev->start_mark, "NUL byte in scalar");
		return 0;
	}
	node =
	    yr_node(y, plain ? plain_type(v, n) : PNODE_STR, &ev->start_mark);
	if (node == NULL)
		return -1;
	if ((node->str = strndup(v, n)) == NULL) {
		policy_node_free(node);
		return -1;
	}
	node->len = n;
	return yr_attach(y, node);
}

static int
yr_open(struct yr *y, const yaml_event_t *ev, bool map)
{
	struct pnode *n;

	if (map)
		yr_props(y, &ev->start_mark, ev->data.mapping_start.anchor,
		    ev->data.mapping_start.tag,
		    ev->data.mapping_start.implicit);
	else
		yr_props(y, &ev->start_mark, ev->data.sequence_start.anchor,
		    ev->data.sequence_start.tag,
		    ev->data.sequence_start.implicit);
	if (y->depth >= POLICY_DEPTH_MAX) {
		yr_err(y, &ev->start_mark, "nesting deeper than %d",
		    POLICY_DEPTH_MAX);
		return -1;
	}
	if ((n = yr_node(y, map ? PNODE_MAP : PNODE_SEQ, &ev->start_mark)) ==
	    NULL)
		return -1;
	y->stack[y->depth++] = n;
	return 0;
}

static int
yr_close(struct yr *y)
{
	if (y->depth == 0)
		return -1;
	return yr_attach(y, y->stack[--y->depth]);
}

/* 1: stream ended, 0: go on, -1: stop. */
static int
yr_event(struct yr *y, const yaml_event_t *ev)
{
	struct pnode *n;

	switch (ev->type) {
	case YAML_STREAM_END_EVENT:
		return 1;
	case YAML_DOCUMENT_START_EVENT:
		if (++y->docs > 1) {
			yr_err(y, &ev->start_mark, "more than one document");
			return -1;
		}
		return 0;
	case YAML_SCALAR_EVENT:
		return yr_scalar(y, ev);
	case YAML_SEQUENCE_START_EVENT:
		return yr_open(y, ev, false);
	case YAML_MAPPING_START_EVENT:
		return yr_open(y, ev, true);
	case YAML_SEQUENCE_END_EVENT:
	case YAML_MAPPING_END_EVENT:
		return yr_close(y);
	case YAML_ALIAS_EVENT:
		yr_err(
		    y, &ev->start_mark, "anchors and aliases are not allowed");
		/* keep the tree's shape: the alias becomes a null */
		if ((n = yr_node(y, PNODE_NULL, &ev->start_mark)) == NULL)
			return -1;
		return yr_attach(y, n);
	default:
		return 0;
	}
}

static void
yr_syntax(struct yr *y, const yaml_parser_t *p)
{
	yaml_mark_t m = p->problem_mark;

	if (p->context != NULL)
		yr_err(y, &m, "%s %s", p->problem ? p->problem : "syntax error",
		    p->context);
	else
		yr_err(y, &m, "%s", p->problem ? p->problem : "syntax error");
}

static void
yr_cleanup(struct yr *y)
{
	while (y->depth > 0)
		policy_node_free(y->stack[--y->depth]);
	policy_node_free(y->root);
	y->root = NULL;
}

struct pnode *
policy_yaml_read(
    const char *buf, size_t len, const char *name, struct policy_diag *d)
{
	struct yr y = {.name = name, .d = d};
	yaml_parser_t p;
	yaml_event_t ev;
	int rc = 0;

	if (!yaml_parser_initialize(&p)) {
		policy_diag_add(d, name, 0, 0, "out of memory");
		return NULL;
	}
	yaml_parser_set_input_string(&p, (const unsigned char *)buf, len);
	while (rc == 0) {
		if (!yaml_parser_parse(&p, &ev)) {
			yr_syntax(&y, &p);
			rc = -1;
			break;
		}
		rc = yr_event(&y, &ev);
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&p);
	if (rc == -1 && y.errs == 0)
		policy_diag_add(d, name, 0, 0, "out of memory");
	if (rc == -1 || y.errs > 0) {
		yr_cleanup(&y);
		return NULL;
	}
	if (y.root == NULL)
		return policy_node_new(PNODE_NULL, 1, 1);
	return y.root;
}

struct policy *
policy_parse_yaml(
    const char *buf, size_t len, const char *name, struct policy_diag *d)
{
	return policy_parse_with(policy_yaml_read, buf, len, name, d);
}

int
policy_read_file(const char *path, size_t max, char **out, size_t *outlen,
    bool *missing, struct policy_diag *d)
{
	struct err e;

	*missing = false;
	if (fileread_all(path, max, 0, out, outlen, &e) == 0)
		return 0;
	*missing = errno == ENOENT;
	if (errno == EFBIG)
		policy_diag_add(d, path, 0, 0,
		    "larger than %zu bytes (the policy file limit; see "
		    "--policy-file-max)",
		    max);
	else if (!*missing)
		policy_diag_add(d, path, 0, 0, "%s", e.msg);
	return -1;
}

struct policy *
policy_load_file_max(const char *path, size_t max, struct policy_diag *d)
{
	struct policy *p;
	bool missing;
	char *buf;
	size_t len, i;

	if (max == 0)
		max = POLICY_FILE_MAX;
	if (max > POLICY_FILE_CEILING)
		max = POLICY_FILE_CEILING;
	if (policy_read_file(path, max, &buf, &len, &missing, d) == -1) {
		if (missing)
			policy_diag_add(d, path, 0, 0, "no such file");
		return NULL;
	}
	for (i = 0; i < len && strchr(" \t\r\n", buf[i]) != NULL; i++)
		;
	/* JSON gets the strict JSON reader (exact JSON errors). */
	if (i < len && (buf[i] == '{' || buf[i] == '['))
		p = policy_parse_json(buf, len, path, d);
	else
		p = policy_parse_yaml(buf, len, path, d);
	/* The text holds the inline credential values. */
	secmem_wipe(buf, len);
	free(buf);
	return p;
}

struct policy *
policy_load_file(const char *path, struct policy_diag *d)
{
	return policy_load_file_max(path, POLICY_FILE_MAX, d);
}
