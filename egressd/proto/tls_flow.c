/*
 * tls_flow: a ClientHello from queued TCP segments (tls_flow.h).
 */

#include <string.h>

#include "egressd/proto/tls_flow.h"

void
tls_flow_init(struct tls_flow *f, uint8_t *buf, size_t cap)
{
	memset(f, 0, sizeof(*f));
	f->buf = buf;
	f->cap = cap;
}

/* Folds the segment into the contiguous bytes: -1 on a conflict or when
 * it would pass cap. */
static int
tls_flow_fold(struct tls_flow *f, uint32_t seq, const uint8_t *data, size_t n,
    struct err *e)
{
	/* Sequence arithmetic modulo 2^32: offset of seq from start. */
	uint32_t rel = seq - f->start;
	size_t have, take;

	if (rel > (uint32_t)f->cap) {
		/* before start (a wrapped, huge offset) or past the bound:
		 * the first segment fixed start, output is in order, so
		 * nothing real lands here */
		err_set(e, "segment outside the hello's window");
		return -1;
	}
	if ((size_t)rel > f->len)
		return 0; /* a gap: wait for the resend */
	have = f->len - rel;
	take = n < have ? n : have;
	if (memcmp(f->buf + rel, data, take) != 0) {
		err_set(e, "retransmission differs from the bytes judged");
		return -1;
	}
	if (n > have) {
		if (rel + n > f->cap) {
			err_set(e, "hello longer than %zu bytes", f->cap);
			return -1;
		}
		memcpy(f->buf + f->len, data + have, n - have);
		f->len = rel + n;
	}
	return 0;
}

enum tls_flow_rc
tls_flow_add(struct tls_flow *f, uint32_t seq, const uint8_t *data, size_t n,
    struct tls_hello *out, struct err *e)
{
	/* no bytes (an ACK, a FIN): nothing changes */
	if (n == 0)
		return TLS_FLOW_MORE;
	if (!f->started) {
		f->started = true;
		f->start = seq;
	}
	if (tls_flow_fold(f, seq, data, n, e) < 0)
		return TLS_FLOW_BAD;
	if (f->len == 0)
		return TLS_FLOW_MORE;
	switch (tls_hello_parse(f->buf, f->len, out, e)) {
	case TLS_HELLO_OK:
		return TLS_FLOW_OK;
	case TLS_HELLO_MORE:
		if (f->len == f->cap) {
			err_set(e, "hello longer than %zu bytes", f->cap);
			return TLS_FLOW_BAD;
		}
		return TLS_FLOW_MORE;
	case TLS_HELLO_NOT_TLS:
		err_set(e, "not TLS");
		return TLS_FLOW_NOT_TLS;
	case TLS_HELLO_BAD:
		break;
	}
	return TLS_FLOW_BAD;
}
