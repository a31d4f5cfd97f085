/*
 * nft_describe: a batch decoded back with libnftnl's own parsers, one
 * line per message. Tests compare it with golden files; it is also what
 * a dry run prints.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>

#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/object.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>
#include "egressd/nft/nft.h"
#include "egressd/nft/nft_batch.h"
#include "egressd/nft/nft_bounds.h"

static const char *
msg_name(uint16_t t)
{
	switch (t) {
	case NFT_MSG_NEWTABLE:
		return "NEWTABLE";
	case NFT_MSG_DELTABLE:
		return "DELTABLE";
	case NFT_MSG_NEWCHAIN:
		return "NEWCHAIN";
	case NFT_MSG_DELCHAIN:
		return "DELCHAIN";
	case NFT_MSG_NEWRULE:
		return "NEWRULE";
	case NFT_MSG_DELRULE:
		return "DELRULE";
	case NFT_MSG_NEWSET:
		return "NEWSET";
	case NFT_MSG_DELSET:
		return "DELSET";
	case NFT_MSG_NEWSETELEM:
		return "NEWSETELEM";
	case NFT_MSG_DELSETELEM:
		return "DELSETELEM";
	case NFT_MSG_NEWOBJ:
		return "NEWOBJ";
	default:
		return "?";
	}
}

static void
hex(FILE *f, const uint8_t *p, uint32_t n)
{
	uint32_t i;

	for (i = 0; i < n; i++)
		fprintf(f, "%02x", p[i]);
}

/* Attribute walks without libmnl's macros (they cast away const). */
static const struct nlattr *
attr_at(const void *p)
{
	return (const struct nlattr *)p;
}

static bool
attr_in(const struct nlattr *a, const void *end)
{
	return mnl_attr_ok(a, (int)((const uint8_t *)end - (const uint8_t *)a));
}

static const void *
nest_end(const struct nlattr *nest)
{
	return (const uint8_t *)mnl_attr_get_payload(nest) +
	    mnl_attr_get_payload_len(nest);
}

/*
 * Elements parsed by hand: libnftnl's parser accepts only NFTA_LIST_ELEM
 * as the nested type, while builders (libnftnl's own included) number
 * the elements 1, 2, 3... and the kernel takes any type.
 */
static void
desc_elem(FILE *f, const struct nlattr *el)
{
	const struct nlattr *a, *k;

	fputc(' ', f);
	for (a = attr_at(mnl_attr_get_payload(el)); attr_in(a, nest_end(el));
	     a = mnl_attr_next(a)) {
		if (mnl_attr_get_type(a) != NFTA_SET_ELEM_KEY)
			continue;
		for (k = attr_at(mnl_attr_get_payload(a));
		     attr_in(k, nest_end(a)); k = mnl_attr_next(k))
			if (mnl_attr_get_type(k) == NFTA_DATA_VALUE)
				hex(f, mnl_attr_get_payload(k),
				    mnl_attr_get_payload_len(k));
	}
	for (a = attr_at(mnl_attr_get_payload(el)); attr_in(a, nest_end(el));
	     a = mnl_attr_next(a)) {
		if (mnl_attr_get_type(a) == NFTA_SET_ELEM_FLAGS &&
		    mnl_attr_get_payload_len(a) == 4 &&
		    (ntohl(mnl_attr_get_u32(a)) & NFT_SET_ELEM_INTERVAL_END))
			fputs("(end)", f);
		if (mnl_attr_get_type(a) == NFTA_SET_ELEM_TIMEOUT &&
		    mnl_attr_get_payload_len(a) == 8)
			fprintf(f, "(timeout %llums)",
			    (unsigned long long)be64toh(mnl_attr_get_u64(a)));
	}
}

static void
desc_elems(FILE *f, const struct nlmsghdr *nlh)
{
	const struct nlattr *a, *el;
	const void *first = (const uint8_t *)mnl_nlmsg_get_payload(nlh) +
	    MNL_ALIGN(sizeof(struct nfgenmsg));
	const void *end = (const uint8_t *)nlh + nlh->nlmsg_len;

	for (a = attr_at(first); attr_in(a, end); a = mnl_attr_next(a))
		if (mnl_attr_get_type(a) == NFTA_SET_ELEM_LIST_SET)
			fprintf(f, " %s", mnl_attr_get_str(a));
	for (a = attr_at(first); attr_in(a, end); a = mnl_attr_next(a)) {
		if (mnl_attr_get_type(a) != NFTA_SET_ELEM_LIST_ELEMENTS)
			continue;
		for (el = attr_at(mnl_attr_get_payload(a));
		     attr_in(el, nest_end(a)); el = mnl_attr_next(el))
			desc_elem(f, el);
	}
}

static void
desc_table(FILE *f, const struct nlmsghdr *nlh)
{
	struct nftnl_table *x = nftnl_table_alloc();

	if (x != NULL && nftnl_table_nlmsg_parse(nlh, x) == 0)
		fprintf(f, " %s flags %u",
		    nftnl_table_get_str(x, NFTNL_TABLE_NAME),
		    nftnl_table_is_set(x, NFTNL_TABLE_FLAGS)
		        ? nftnl_table_get_u32(x, NFTNL_TABLE_FLAGS)
		        : 0);
	nftnl_table_free(x);
}

static void
desc_chain(FILE *f, const struct nlmsghdr *nlh)
{
	struct nftnl_chain *x = nftnl_chain_alloc();

	if (x != NULL && nftnl_chain_nlmsg_parse(nlh, x) == 0) {
		fprintf(f, " %s", nftnl_chain_get_str(x, NFTNL_CHAIN_NAME));
		if (nftnl_chain_is_set(x, NFTNL_CHAIN_HOOKNUM))
			fprintf(f, " type %s hook %u prio %d policy %u",
			    nftnl_chain_get_str(x, NFTNL_CHAIN_TYPE),
			    nftnl_chain_get_u32(x, NFTNL_CHAIN_HOOKNUM),
			    nftnl_chain_get_s32(x, NFTNL_CHAIN_PRIO),
			    nftnl_chain_get_u32(x, NFTNL_CHAIN_POLICY));
	}
	nftnl_chain_free(x);
}

static void
desc_rule(FILE *f, const struct nlmsghdr *nlh, char *line)
{
	struct nftnl_rule *x = nftnl_rule_alloc();
	char *p;

	if (x != NULL && nftnl_rule_nlmsg_parse(nlh, x) == 0) {
		nftnl_rule_snprintf(
		    line, NFT_DESC_LINE_MAX, x, NFTNL_OUTPUT_DEFAULT, 0);
		/* one line: libnftnl puts each expression on its own */
		for (p = line; *p != '\0'; p++)
			if (*p == '\n')
				*p = ' ';
		fprintf(f, " %s", line);
	}
	nftnl_rule_free(x);
}

static void
desc_set(FILE *f, const struct nlmsghdr *nlh)
{
	struct nftnl_set *x = nftnl_set_alloc();

	if (x != NULL && nftnl_set_nlmsg_parse(nlh, x) == 0) {
		fprintf(f, " %s", nftnl_set_get_str(x, NFTNL_SET_NAME));
		if (nftnl_set_is_set(x, NFTNL_SET_KEY_LEN))
			fprintf(f, " keylen %u flags 0x%x",
			    nftnl_set_get_u32(x, NFTNL_SET_KEY_LEN),
			    nftnl_set_get_u32(x, NFTNL_SET_FLAGS));
	}
	nftnl_set_free(x);
}

static void
desc_obj(FILE *f, const struct nlmsghdr *nlh)
{
	struct nftnl_obj *x = nftnl_obj_alloc();

	if (x != NULL && nftnl_obj_nlmsg_parse(nlh, x) == 0)
		fprintf(f, " %s type %u", nftnl_obj_get_str(x, NFTNL_OBJ_NAME),
		    nftnl_obj_get_u32(x, NFTNL_OBJ_TYPE));
	nftnl_obj_free(x);
}

static void
desc_one(FILE *f, const struct nlmsghdr *nlh, char *line)
{
	uint16_t t = NFNL_MSG_TYPE(nlh->nlmsg_type);

	fprintf(f, "%s", msg_name(t));
	switch (t) {
	case NFT_MSG_NEWTABLE:
	case NFT_MSG_DELTABLE:
		desc_table(f, nlh);
		break;
	case NFT_MSG_NEWCHAIN:
	case NFT_MSG_DELCHAIN:
		desc_chain(f, nlh);
		break;
	case NFT_MSG_NEWRULE:
	case NFT_MSG_DELRULE:
		desc_rule(f, nlh, line);
		break;
	case NFT_MSG_NEWSET:
	case NFT_MSG_DELSET:
		desc_set(f, nlh);
		break;
	case NFT_MSG_NEWSETELEM:
	case NFT_MSG_DELSETELEM:
		desc_elems(f, nlh);
		break;
	case NFT_MSG_NEWOBJ:
		desc_obj(f, nlh);
		break;
	default:
		break;
	}
	fprintf(f, " [flags 0x%x]\n", nlh->nlmsg_flags);
}

char *
nft_batch_describe(const struct nft_batch *b)
{
	char *out = NULL, *line;
	size_t outlen = 0, i;
	FILE *f;

	line = malloc(NFT_DESC_LINE_MAX);
	if (line == NULL)
		return NULL;
	f = open_memstream(&out, &outlen);
	if (f == NULL) {
		free(line);
		return NULL;
	}
	for (i = 0; i < b->nmsgs; i++)
		desc_one(f, (const struct nlmsghdr *)(b->buf + b->msgs[i].off),
		    line);
	fclose(f);
	free(line);
	return out;
}
