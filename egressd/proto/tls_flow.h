/*
 * tls_flow: a ClientHello reassembled from the TCP segments of one flow
 * that the kernel queued to egressd (in-flight judging, docs/proxy.md).
 * Pure: segments (sequence number, bytes) in, tls_hello_parse()'s answer
 * out; the caller owns the buffer (cap bytes, TLS_FLOW_BYTES_MAX is
 * enough for any hello tls_hello accepts).
 *
 * The first payload segment fixes where the stream starts. A segment
 * wholly before the contiguous end is a retransmission (its bytes must
 * equal what was kept: TLS_FLOW_CONFLICT otherwise, a parser differential
 * with the origin); one that overlaps the end contributes its new bytes;
 * one beyond the end leaves a gap and adds nothing (the sender resends
 * it: output is in order, so a gap means the kernel dropped a segment).
 */
#ifndef EGRESSD_TLS_FLOW_H
#define EGRESSD_TLS_FLOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "egressd/proto/tls_hello.h"
#include "util/err.h"

/* Records carrying a maximal hello: its bytes and one header per full
 * record of it, plus one. */
#define TLS_FLOW_BYTES_MAX                                                     \
	(TLS_HELLO_MSG_MAX + 4 +                                               \
	    TLS_RECORD_HEADER_LEN *                                            \
	        (TLS_HELLO_MSG_MAX / TLS_RECORD_PLAINTEXT_MAX + 2))

enum tls_flow_rc {
	TLS_FLOW_OK = 0, /* *out holds the hello */
	TLS_FLOW_MORE, /* a prefix: wait for more segments */
	TLS_FLOW_NOT_TLS,
	TLS_FLOW_BAD, /* malformed hello, conflicting retransmission, or
	                 more bytes than the buffer holds; e says which */
};

struct tls_flow {
	uint8_t *buf; /* the caller's, cap bytes */
	size_t cap;
	size_t len; /* contiguous bytes from the start */
	uint32_t start; /* sequence number of buf[0] */
	bool started;
};

void tls_flow_init(struct tls_flow *f, uint8_t *buf, size_t cap);
enum tls_flow_rc tls_flow_add(struct tls_flow *f, uint32_t seq,
    const uint8_t *data, size_t n, struct tls_hello *out, struct err *e);

#endif
