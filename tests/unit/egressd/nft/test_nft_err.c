/*
 * nft_err: a kernel or runtime without (all of) nftables, met through
 * injected netlink errors. The acks are built byte for byte as the kernel
 * sends them (NLMSG_ERROR, capped, extended-ack TLVs) against the real
 * ruleset batch egressd sends at start, so each case is the refusal an
 * operator would see on such a node: the message named, the errno, the
 * kernel's words and what to do — and never a batch taken as applied.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/netlink.h>

#include <cmocka.h>

#include "egressd/nft/nft.h"
#include "egressd/proto/nft_err.h"
#include "ts_policy.h"

static const char *policy_json =
    "{\"defaultAction\":\"deny\",\"egress\":["
    "{\"action\":\"allow\",\"target\":\"a.example\"},"
    "{\"action\":\"allow\",\"target\":\"198.51.100.0/24\","
    "\"ports\":[443],\"protocols\":[\"tcp\"]}]}";

struct fx {
	struct policy *p;
	struct nft_batch *b;
	size_t n;
};

static int
fx_setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct nft_opts o;
	struct err e;

	assert_non_null(f);
	f->p = ts_policy_json(policy_json);
	nft_opts_init(&o);
	if (nft_build_ruleset(f->p, &o, NULL, &f->b, &e) != 0)
		fail_msg("build: %s", e.msg);
	f->n = nft_batch_nmsgs(f->b);
	*state = f;
	return 0;
}

static int
fx_teardown(void **state)
{
	struct fx *f = *state;

	nft_batch_free(f->b);
	policy_unref(f->p);
	free(f);
	return 0;
}

/* Index of the first message whose label starts with prefix. */
static size_t
msg_index(const struct fx *f, const char *prefix)
{
	for (size_t i = 0; i < f->n; i++)
		if (strncmp(nft_batch_msg_label(f->b, i), prefix,
		        strlen(prefix)) == 0)
			return i;
	fail_msg("no message labelled %s", prefix);
	return 0;
}

/*
 * Appends one NLMSG_ERROR as the kernel writes it with NETLINK_CAP_ACK and
 * NETLINK_EXT_ACK: the echoed header only, then the text and offset TLVs.
 */
static size_t
put_ack(uint8_t *buf, size_t at, uint32_t seq, int error, const char *text,
    int offs)
{
	struct nlmsghdr *nlh = (struct nlmsghdr *)(buf + at);
	struct nlmsgerr *me;
	size_t len = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(*me));

	memset(nlh, 0, NLMSG_HDRLEN + sizeof(*me));
	nlh->nlmsg_type = NLMSG_ERROR;
	nlh->nlmsg_seq = seq;
	nlh->nlmsg_flags = NLM_F_CAPPED;
	me = (struct nlmsgerr *)(buf + at + NLMSG_HDRLEN);
	me->error = -error;
	me->msg.nlmsg_len = sizeof(me->msg);
	me->msg.nlmsg_seq = seq;
	if (text != NULL || offs >= 0)
		nlh->nlmsg_flags |= NLM_F_ACK_TLVS;
	if (text != NULL) {
		struct nlattr *a = (struct nlattr *)(buf + at + len);
		size_t tl = strlen(text) + 1;

		a->nla_type = NLMSGERR_ATTR_MSG;
		a->nla_len = (uint16_t)(NLA_HDRLEN + tl);
		memcpy((uint8_t *)a + NLA_HDRLEN, text, tl);
		len += NLA_ALIGN(a->nla_len);
	}
	if (offs >= 0) {
		struct nlattr *a = (struct nlattr *)(buf + at + len);
		uint32_t v = (uint32_t)offs;

		a->nla_type = NLMSGERR_ATTR_OFFS;
		a->nla_len = NLA_HDRLEN + sizeof(v);
		memcpy((uint8_t *)a + NLA_HDRLEN, &v, sizeof(v));
		len += NLA_ALIGN(a->nla_len);
	}
	nlh->nlmsg_len = (uint32_t)len;
	return at + len;
}

#define BASE 0x7ffffff0u /* sequence numbers wrap inside the batch */
#define BUF_MAX (1u << 20)

/* Every message acked, errs[i] (0 = accepted) as the kernel would. */
static int
run_acks(const struct fx *f, const int *errs, const char *text, char *msg,
    size_t msglen)
{
	uint8_t *buf = calloc(1, BUF_MAX);
	struct nft_acks a;
	struct err e;
	size_t len = 0;
	bool done;
	int rc;

	assert_non_null(buf);
	for (size_t i = 0; i < f->n; i++)
		len = put_ack(buf, len, BASE + 1 + (uint32_t)i,
		    errs != NULL ? errs[i] : 0,
		    errs != NULL && errs[i] != 0 ? text : NULL, -1);
	nft_acks_init(&a, BASE, f->n);
	done = nft_acks_feed(&a, buf, len);
	assert_true(done);
	memset(&e, 0, sizeof(e));
	rc = nft_acks_result(&a, nft_batch_msg_label(f->b, a.bad), &e);
	(void)snprintf(msg, msglen, "%s", rc == 0 ? "" : e.msg);
	free(buf);
	return rc;
}

static void
test_all_accepted(void **state)
{
	const struct fx *f = *state;
	char msg[512];

	assert_int_equal(run_acks(f, NULL, NULL, msg, sizeof(msg)), 0);
}

/* Acks one read at a time, the last one missing: not settled, not ok. */
static void
test_split_reads_and_missing_ack(void **state)
{
	const struct fx *f = *state;
	uint8_t buf[256];
	struct nft_acks a;

	nft_acks_init(&a, BASE, f->n);
	for (size_t i = 0; i + 1 < f->n; i++) {
		size_t len =
		    put_ack(buf, 0, BASE + 1 + (uint32_t)i, 0, NULL, -1);

		assert_false(nft_acks_feed(&a, buf, len));
	}
	assert_int_equal(a.acked, f->n - 1);
	/* a stale ack of an earlier batch and a non-error message: ignored */
	assert_false(nft_acks_feed(
	    &a, buf, put_ack(buf, 0, BASE - 3, EPERM, "old", -1)));
	((struct nlmsghdr *)buf)->nlmsg_type = NLMSG_DONE;
	assert_false(nft_acks_feed(&a, buf, NLMSG_HDRLEN + 20));
	assert_true(nft_acks_feed(
	    &a, buf, put_ack(buf, 0, BASE + (uint32_t)f->n, 0, NULL, -1)));
	assert_int_equal(a.bad, (size_t)-1);
}

/* No CAP_NET_ADMIN: nfnetlink refuses the whole batch at its begin. */
static void
test_no_cap_net_admin(void **state)
{
	const struct fx *f = *state;
	uint8_t buf[256];
	struct nft_acks a;
	struct err e;

	nft_acks_init(&a, BASE, f->n);
	assert_true(
	    nft_acks_feed(&a, buf, put_ack(buf, 0, BASE, EPERM, NULL, -1)));
	assert_int_equal(
	    nft_acks_result(&a, nft_batch_msg_label(f->b, a.bad), &e), -1);
	assert_non_null(strstr(e.msg, "refused the batch"));
	assert_non_null(strstr(e.msg, strerror(EPERM)));
	assert_non_null(strstr(e.msg, "CAP_NET_ADMIN"));
}

/* nfnetlink without the nf_tables subsystem: EOPNOTSUPP on the begin. */
static void
test_no_nf_tables(void **state)
{
	const struct fx *f = *state;
	uint8_t buf[256];
	struct nft_acks a;
	struct err e;

	nft_acks_init(&a, BASE, f->n);
	assert_true(nft_acks_feed(
	    &a, buf, put_ack(buf, 0, BASE, EOPNOTSUPP, NULL, -1)));
	assert_int_equal(
	    nft_acks_result(&a, nft_batch_msg_label(f->b, a.bad), &e), -1);
	assert_non_null(strstr(e.msg, "no nf_tables"));
	assert_non_null(strstr(e.msg, "nothing can be enforced"));
}

/* A kernel without the nat chain type: the redirect chain is refused. */
static void
test_no_nat_chain(void **state)
{
	const struct fx *f = *state;
	size_t k = msg_index(f, "NEWCHAIN " NFT_CHAIN_NAT);
	int *errs = calloc(f->n, sizeof(*errs));
	char msg[512], want[64];

	assert_non_null(errs);
	errs[k] = ENOENT;
	assert_int_equal(run_acks(f, errs, NULL, msg, sizeof(msg)), -1);
	(void)snprintf(want, sizeof(want), "message %zu of %zu (NEWCHAIN %s)",
	    k + 1, f->n, NFT_CHAIN_NAT);
	assert_non_null(strstr(msg, want));
	assert_non_null(strstr(msg, "nft_chain_nat"));
	free(errs);
}

/* A missing expression module; the kernel's own words are kept, and the
 * first refused message is reported even when later ones failed too. */
static void
test_missing_expression(void **state)
{
	const struct fx *f = *state;
	size_t k = msg_index(f, "NEWRULE");
	int *errs = calloc(f->n, sizeof(*errs));
	char msg[512];

	assert_non_null(errs);
	errs[k] = EOPNOTSUPP;
	errs[f->n - 1] = ENOENT;
	assert_int_equal(
	    run_acks(f, errs, "Unknown expression type", msg, sizeof(msg)), -1);
	assert_non_null(strstr(msg, nft_batch_msg_label(f->b, k)));
	assert_non_null(strstr(msg, ": Unknown expression type"));
	assert_non_null(strstr(msg, "nft_ct"));
	free(errs);
}

static void
test_no_set_type(void **state)
{
	const struct fx *f = *state;
	size_t k = msg_index(f, "NEWSET");
	int *errs = calloc(f->n, sizeof(*errs));
	char msg[512];

	assert_non_null(errs);
	errs[k] = EOPNOTSUPP;
	assert_int_equal(run_acks(f, errs, NULL, msg, sizeof(msg)), -1);
	assert_non_null(strstr(msg, "NEWSET"));
	assert_non_null(strstr(msg, "set type this kernel lacks"));
	free(errs);
}

/* The socket itself: gVisor answers EPROTONOSUPPORT, seccomp EPERM. */
static void
test_socket_hints(void **state)
{
	(void)state;
	assert_non_null(
	    strstr(nft_err_hint(NFT_ERR_SOCKET, NULL, EPROTONOSUPPORT),
	        "no netfilter netlink"));
	assert_non_null(
	    strstr(nft_err_hint(NFT_ERR_SOCKET, NULL, EPERM), "seccomp"));
	assert_string_equal(nft_err_hint(NFT_ERR_SOCKET, NULL, EMFILE), "");
	/* a GET's ENOENT means "absent", not "no nftables" */
	assert_string_equal(nft_err_hint(NFT_ERR_GET, NULL, ENOENT), "");
	assert_non_null(
	    strstr(nft_err_hint(NFT_ERR_GET, NULL, EPERM), "CAP_NET_ADMIN"));
	assert_non_null(strstr(
	    nft_err_hint(NFT_ERR_GET, NULL, EOPNOTSUPP), "no nf_tables"));
	/* an errno with nothing to add gets nothing, not a wrong guess */
	assert_string_equal(nft_err_hint(NFT_ERR_MSG, "NEWRULE x", EBUSY), "");
	assert_string_equal(nft_err_hint(NFT_ERR_MSG, "NEWCHAINX", ENOENT), "");
	assert_non_null(strstr(
	    nft_err_hint(NFT_ERR_MSG, "NEWSETELEM x", ENOSPC), "kernel limit"));
	assert_non_null(
	    strstr(nft_err_hint(NFT_ERR_MSG, "NEWTABLE egressd", EAFNOSUPPORT),
	        "inet family"));
}

/* The kernel's offset TLV, and acks too short to hold an nlmsgerr. */
static void
test_ext_ack_and_garbage(void **state)
{
	const struct fx *f = *state;
	uint8_t buf[512];
	struct nft_acks a;
	struct err e;
	size_t len;
	char text[16];
	int offs;

	len = put_ack(buf, 0, BASE + 2, EINVAL, "bad", 24);
	nft_err_ext_ack(
	    (const struct nlmsghdr *)buf, text, sizeof(text), &offs);
	assert_string_equal(text, "bad");
	assert_int_equal(offs, 24);
	nft_acks_init(&a, BASE, f->n);
	assert_false(nft_acks_feed(&a, buf, len));
	assert_int_equal(
	    nft_acks_result(&a, nft_batch_msg_label(f->b, a.bad), &e), -1);
	assert_non_null(strstr(e.msg, "(bad attribute at byte 24)"));

	/* truncated: header claims an error but carries no nlmsgerr */
	memset(buf, 0, sizeof(buf));
	((struct nlmsghdr *)buf)->nlmsg_len = NLMSG_HDRLEN;
	((struct nlmsghdr *)buf)->nlmsg_type = NLMSG_ERROR;
	((struct nlmsghdr *)buf)->nlmsg_seq = BASE;
	nft_acks_init(&a, BASE, f->n);
	assert_false(nft_acks_feed(&a, buf, NLMSG_HDRLEN));
	assert_int_equal(a.batch_errno, 0);
	/* random bytes: no crash, never settled as accepted */
	srand(7);
	for (int round = 0; round < 2000; round++) {
		for (size_t i = 0; i < sizeof(buf); i++)
			buf[i] = (uint8_t)rand();
		nft_acks_init(&a, BASE, f->n);
		if (nft_acks_feed(&a, buf, (size_t)(rand() % (int)sizeof(buf))))
			assert_true(a.batch_errno != 0 || a.acked >= f->n);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_all_accepted),
	    cmocka_unit_test(test_split_reads_and_missing_ack),
	    cmocka_unit_test(test_no_cap_net_admin),
	    cmocka_unit_test(test_no_nf_tables),
	    cmocka_unit_test(test_no_nat_chain),
	    cmocka_unit_test(test_missing_expression),
	    cmocka_unit_test(test_no_set_type),
	    cmocka_unit_test(test_socket_hints),
	    cmocka_unit_test(test_ext_ack_and_garbage),
	};

	return cmocka_run_group_tests(tests, fx_setup, fx_teardown);
}
