/*
 * judge.bpf.c: the kernel's share of in-flight judging (docs/proxy.md,
 * "The judge in the kernel"). A BPF socket filter that nftables runs
 * (xt_bpf through nft_compat) on the packets of flows the ruleset marked
 * pending. It answers 1 ("pass") only when all of these hold, and 0
 * ("let the queue judge") otherwise:
 *
 *   - the packet is the flow's first payload: its sequence number is the
 *     one the origin's SYN-ACK acknowledged (this program reads the
 *     SYN-ACK on input: map "starts"), so the origin's stream starts
 *     with these bytes and no other segment of the flow can come before
 *     them. Not the client's SYN: a SYN the ruleset drops after it was
 *     seen (one with a Fast Open cookie), or a second one with another
 *     sequence number (raw sockets), would name a start the origin never
 *     took;
 *   - its payload is exactly one TLS record holding one whole
 *     ClientHello that tls_hello_parse() would accept (every check it
 *     makes is made here, or the packet goes to the queue) with a host
 *     name SNI and no ECH or ESNI;
 *   - egressd judged that SNI to that address and port allowed (map
 *     "verdicts") under the judge's current generation (map "gen") and
 *     within the address's lease.
 *
 * So the kernel never passes a hello the queue would refuse; it passes
 * only what egressd has already passed once, and egressd forgets every
 * such verdict at once whenever its judge could answer differently. The
 * flows it passes are remembered by SNI (map "passed") for egressd to
 * judge again when the policy changes.
 *
 * Built with clang -target bpf; the maps are declared BTF-style for
 * libbpf (nfq_bpf.c).
 */
#include <linux/bpf.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "egressd/nfq/nfq_bpf_abi.h"

char LICENSE[] SEC("license") = "GPL";

/* Allocated as egressd teaches (not 8,192 entries of ~300 bytes up
 * front: kernel memory, charged to egressd's cgroup). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NFQ_BPF_VERDICTS_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct nfq_bpf_vkey);
	__type(value, struct nfq_bpf_verdict);
} verdicts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, NFQ_BPF_STARTS_MAX);
	__type(key, struct nfq_bpf_tuple);
	__type(value, __u32);
} starts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, NFQ_BPF_PASSED_MAX);
	__type(key, struct nfq_bpf_tuple);
	__type(value, char[NFQ_BPF_NAME_LEN]);
} passed SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, NFQ_BPF_AUDIT_BYTES);
} audit SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct nfq_bpf_gen);
} gen SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NFQ_BPF_STATS);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

#define HMASK (NFQ_BPF_HELLO_MAX - 1)
/* A byte of the hello: o is checked against its length before, the
 * mask is for the verifier. */
#define B(o) ((__u32)h[(o)&HMASK])
#define U16(o) (B(o) << 8 | B((o) + 1))

/* The loops' bounds: what a hello has more of goes to the queue. */
#define EXTS_MAX 32
#define ALPN_MAX 8
#define COMP_MAX 16

#define TLS_EXT_SERVER_NAME 0
#define TLS_EXT_ALPN 16
#define TLS_EXT_SUPPORTED_VERSIONS 43
#define TLS_EXT_PRE_SHARED_KEY 41
#define TLS_EXT_ECH 0xfe0d
#define TLS_EXT_ESNI 0xffce

struct pkt {
	struct nfq_bpf_tuple t;
	__u32 seq, ack;
	__u32 poff, plen; /* the payload */
	__u8 flags;
};

static __always_inline void
count(__u32 k)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &k);

	if (v != NULL)
		*v += 1;
}

/* The flow passed, for egressd's log. No wakeup: egressd drains the
 * ring on its tick, so a passed hello costs it nothing in between. */
static __always_inline void
audit_pass(const struct nfq_bpf_tuple *t, const char *name)
{
	struct nfq_bpf_audit *a = bpf_ringbuf_reserve(&audit, sizeof(*a), 0);

	if (a == NULL) {
		count(NFQ_BPF_UNLOGGED);
		return;
	}
	__builtin_memcpy(&a->t, t, sizeof(a->t));
	__builtin_memcpy(a->name, name, sizeof(a->name));
	bpf_ringbuf_submit(a, BPF_RB_NO_WAKEUP);
}

/* IPv4 or IPv6 (no extension header), then TCP. 0 when read. */
static __always_inline int
read_pkt(struct __sk_buff *skb, struct pkt *p)
{
	__u8 ip[40], tcp[14];
	__u32 l4, tot;

	if (bpf_skb_load_bytes(skb, 0, ip, 20) < 0)
		return -1;
	if ((ip[0] >> 4) == 4) {
		l4 = (ip[0] & 15) * 4;
		tot = (__u32)ip[2] << 8 | ip[3];
		if (l4 < 20 || ip[9] != 6 || (ip[6] & 0x3f) != 0 || ip[7] != 0)
			return -1; /* not TCP, or a fragment */
		p->t.family = 4;
		__builtin_memcpy(p->t.src, ip + 12, 4);
		__builtin_memcpy(p->t.dst, ip + 16, 4);
	} else if ((ip[0] >> 4) == 6) {
		if (bpf_skb_load_bytes(skb, 0, ip, 40) < 0 || ip[6] != 6)
			return -1;
		l4 = 40;
		tot = 40 + ((__u32)ip[4] << 8 | ip[5]);
		if (tot == 40)
			return -1; /* a jumbogram */
		p->t.family = 6;
		__builtin_memcpy(p->t.src, ip + 8, 16);
		__builtin_memcpy(p->t.dst, ip + 24, 16);
	} else
		return -1;
	if (tot > skb->len || bpf_skb_load_bytes(skb, l4, tcp, 14) < 0)
		return -1;
	p->t.sport = (__u16)(tcp[0] << 8 | tcp[1]);
	p->t.dport = (__u16)(tcp[2] << 8 | tcp[3]);
	p->seq = (__u32)tcp[4] << 24 | (__u32)tcp[5] << 16 |
	    (__u32)tcp[6] << 8 | tcp[7];
	p->ack = (__u32)tcp[8] << 24 | (__u32)tcp[9] << 16 |
	    (__u32)tcp[10] << 8 | tcp[11];
	p->flags = tcp[13];
	p->poff = l4 + (tcp[12] >> 4) * 4;
	if ((tcp[12] >> 4) < 5 || p->poff > tot)
		return -1;
	p->plen = tot - p->poff;
	return 0;
}

/* take_name's walk over the name, one byte a step (bpf_loop: the
 * verifier checks a step once, not 253 times over). */
struct name_walk {
	struct nfq_bpf_vkey k; /* its name filled */
	__u32 o; /* where the name starts in the hello */
	__u32 label, digits, hex, tld, bad;
};

/* exts' walk, one extension a step. The types seen are kept in
 * SEEN_SLOTS slots (type + 1, by a hash of the type): the same type
 * twice is refused as tls_hello refuses it, and two types in one slot
 * leave the hello to the queue. The hash puts the types browsers,
 * curl, Go, Python and Node send (GREASE values included) in slots of
 * their own. */
#define SEEN_SLOTS 128
struct ext_walk {
	__u16 seen[SEEN_SLOTS];
	__u32 o, end, no, nn;
	__u32 psk, sni, bad, done;
};

/* What is too big for the stack (the packet's hello, read whole, and
 * the key its name becomes) and the walks' state, kept where the
 * verifier does not follow each value (the stack's would have it check
 * every step for every offset). Per CPU: a program runs to its end on
 * one. */
struct scratch {
	__u8 h[NFQ_BPF_HELLO_MAX];
	struct name_walk w;
	struct ext_walk x;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scratch);
} scratch SEC(".maps");

static __always_inline struct scratch *
scr(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&scratch, &zero);
}

static long
name_step(__u64 i, void *arg)
{
	struct scratch *s = scr();
	struct name_walk *w;
	const __u8 *h;
	__u32 c;

	(void)arg;
	if (s == NULL)
		return 1;
	w = &s->w;
	h = s->h;
	if (i >= 253) {
		w->bad = 1;
		return 1;
	}
	c = B(w->o + (__u32)i);
	if (c >= 'A' && c <= 'Z')
		c += 'a' - 'A';
	if (c == '.') {
		if (w->label == 0) {
			w->bad = 1;
			return 1;
		}
		w->label = 0;
		w->tld = (__u32)i + 1;
		w->digits = w->hex = 0;
	} else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	    c == '-' || c == '_') {
		if (++w->label > 63) {
			w->bad = 1;
			return 1;
		}
		w->digits += c >= '0' && c <= '9';
		/* the last label "0x" and hex digits: an IPv4 literal */
		if (w->label == 2)
			w->hex = B(w->o + (__u32)i - 1) == '0' && c == 'x';
		else if (w->label > 2 && w->hex)
			w->hex =
			    (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
	} else {
		w->bad = 1; /* ':' too: an IPv6 literal, or nothing */
		return 1;
	}
	w->k.name[i & 255] = (char)c;
	return 0;
}

/*
 * tls_hello.c's sni_take on the name at h[o..o+n): lowercased into
 * w->k.name, one trailing dot dropped. 0 for a host name; -1 for
 * anything it would refuse or flag (an IP literal: the queue decides
 * those).
 */
static __always_inline int
take_name(const __u8 *h, __u32 o, __u32 n, struct name_walk *w)
{
	if (n != 0 && B(o + n - 1) == '.')
		n--;
	if (n == 0 || n > 253)
		return -1;
	w->o = o;
	if (bpf_loop(n, name_step, NULL, 0) != (long)n || w->bad ||
	    w->label == 0)
		return -1;
	if (w->digits == n - w->tld || (w->hex && n - w->tld > 2))
		return -1; /* an IP literal */
	return 0;
}

/* server_name's body at h[o..o+n): one host_name. *no, *nn: the name. */
static __always_inline int
ext_server_name(const __u8 *h, __u32 o, __u32 n, __u32 *no, __u32 *nn)
{
	__u32 list, len;

	if (n < 2)
		return -1;
	list = U16(o);
	/* one entry only: RFC 6066 allows no second host_name, and no
	 * other name type exists (tls_hello refuses both) */
	if (list < 1 || list != n - 2 || list < 3 || B(o + 2) != 0)
		return -1;
	len = U16(o + 3);
	if (len < 1 || len != list - 3)
		return -1;
	*no = o + 5;
	*nn = len;
	return 0;
}

/* ALPN's body: a list of at least 2 bytes of non-empty names. */
static __always_inline int
ext_alpn(const __u8 *h, __u32 o, __u32 n)
{
	__u32 list, i, at;

	if (n < 2)
		return -1;
	list = U16(o);
	if (list < 2 || list != n - 2)
		return -1;
	at = o + 2;
	for (i = 0; i < ALPN_MAX; i++) {
		__u32 l;

		if (at == o + n)
			return 0;
		l = B(at);
		if (l < 1 || at + 1 + l > o + n)
			return -1;
		at += 1 + l;
	}
	return at == o + n ? 0 : -1;
}

/* supported_versions' body: a 1-byte length, at least 2, even. */
static __always_inline int
ext_versions(const __u8 *h, __u32 o, __u32 n)
{
	__u32 list;

	if (n < 1)
		return -1;
	list = B(o);
	return list >= 2 && list == n - 1 && list % 2 == 0 ? 0 : -1;
}

static long
ext_step(__u64 i, void *arg)
{
	struct scratch *s = scr();
	struct ext_walk *w;
	const __u8 *h;
	__u32 j, type, len, o, end;

	(void)arg;
	(void)i;
	if (s == NULL)
		return 1;
	w = &s->x;
	h = s->h;
	o = w->o;
	end = w->end;
	if (o == end) {
		w->done = 1;
		return 1;
	}
	if (o + 4 > end || w->psk || end > NFQ_BPF_HELLO_MAX)
		goto bad;
	type = U16(o);
	len = U16(o + 2);
	o += 4;
	if (len > end - o)
		goto bad;
	j = (type * 503 >> 5) & (SEEN_SLOTS - 1);
	if (w->seen[j] != 0)
		goto bad; /* twice, or a slot shared */
	w->seen[j] = (__u16)(type + 1);
	if (type == TLS_EXT_SERVER_NAME) {
		if (ext_server_name(h, o, len, &w->no, &w->nn) < 0)
			goto bad;
		w->sni = 1;
	} else if (type == TLS_EXT_ALPN) {
		if (ext_alpn(h, o, len) < 0)
			goto bad;
	} else if (type == TLS_EXT_SUPPORTED_VERSIONS) {
		if (ext_versions(h, o, len) < 0)
			goto bad;
	} else if (type == TLS_EXT_ECH || type == TLS_EXT_ESNI)
		goto bad;
	else if (type == TLS_EXT_PRE_SHARED_KEY)
		w->psk = 1;
	w->o = o + len;
	return 0;
bad:
	w->bad = 1;
	return 1;
}

/*
 * The extensions at h[o..end): tls_hello.c's parse_extensions. *no, *nn:
 * the SNI. 0 for a hello with an SNI and without ECH or ESNI; more than
 * EXTS_MAX extensions are the queue's.
 */
static __always_inline int
exts(struct ext_walk *w, __u32 o, __u32 end, __u32 *no, __u32 *nn)
{
	__builtin_memset(w, 0, sizeof(*w));
	w->o = o;
	w->end = end;
	bpf_loop(EXTS_MAX + 1, ext_step, NULL, 0);
	if (!w->done || w->bad || !w->sni)
		return -1;
	*no = w->no;
	*nn = w->nn;
	return 0;
}

/*
 * The hello at h[0..n): one record, one ClientHello filling it. *no, *nn:
 * its SNI. tls_hello.c's record_at, reassembled and parse_body.
 */
static __always_inline int
hello(struct scratch *s, __u32 n, __u32 *no, __u32 *nn)
{
	const __u8 *h = s->h;
	__u32 rlen, hlen, o, v, i, comp, null = 0;

	if (n < 9 || B(0) != 22 || B(1) != 3 || B(2) > 4)
		return -1;
	rlen = U16(3);
	if (rlen != n - 5 || B(5) != 1)
		return -1;
	hlen = B(6) << 16 | B(7) << 8 | B(8);
	if (hlen + 4 != rlen)
		return -1;
	o = 9;
	if (n < o + 35)
		return -1;
	v = U16(o);
	if (v < 0x0301 || v > 0x0304)
		return -1;
	o += 34;
	v = B(o); /* legacy_session_id */
	if (v > 32 || o + 1 + v + 2 > n)
		return -1;
	o += 1 + v;
	v = U16(o); /* cipher_suites */
	if (v < 2 || v % 2 != 0 || o + 2 + v + 1 > n)
		return -1;
	o += 2 + v;
	comp = B(o);
	if (comp < 1 || comp > COMP_MAX || o + 1 + comp > n)
		return -1;
	for (i = 0; i < COMP_MAX; i++)
		if (i < comp && B(o + 1 + i) == 0)
			null = 1;
	if (!null)
		return -1;
	o += 1 + comp;
	if (o == n || o + 2 > n)
		return -1; /* no extensions: no SNI */
	if (U16(o) != n - o - 2)
		return -1;
	return exts(&s->x, o + 2, n, no, nn);
}

/* The verdict for k: egressd's, still valid. */
static __always_inline int
allowed(const struct nfq_bpf_vkey *k)
{
	const struct nfq_bpf_verdict *v = bpf_map_lookup_elem(&verdicts, k);
	const struct nfq_bpf_gen *g;
	__u32 zero = 0;

	if (v == NULL || (g = bpf_map_lookup_elem(&gen, &zero)) == NULL)
		return 0;
	return v->gen == *(volatile const __u64 *)&g->gen &&
	    bpf_ktime_get_ns() < v->until_ns;
}

SEC("socket")
int
egressd_judge(struct __sk_buff *skb)
{
	struct scratch *s;
	struct name_walk *w;
	struct pkt p;
	__u32 no = 0, nn = 0, *next;
	__u64 len;
	__u8 *h;

	__builtin_memset(&p, 0, sizeof(p));
	if (read_pkt(skb, &p) < 0)
		return 0;
	if ((p.flags & 0x12) == 0x12) {
		/* the origin's SYN-ACK (input): the client's stream starts at
		 * what it acknowledges; the flow in its original direction */
		struct nfq_bpf_tuple t;

		__builtin_memset(&t, 0, sizeof(t));
		t.family = p.t.family;
		__builtin_memcpy(t.src, p.t.dst, 16);
		__builtin_memcpy(t.dst, p.t.src, 16);
		t.sport = p.t.dport;
		t.dport = p.t.sport;
		bpf_map_update_elem(&starts, &t, &p.ack, BPF_ANY);
		return 0;
	}
	if (p.plen == 0 || p.plen > NFQ_BPF_HELLO_MAX ||
	    (p.flags & 0x07) != 0) /* SYN, FIN or RST with data */
		return 0;
	next = bpf_map_lookup_elem(&starts, &p.t);
	if (next == NULL || *next != p.seq)
		return 0;
	if ((s = scr()) == NULL)
		return 0;
	h = s->h;
	w = &s->w;
	len = p.plen;
	/* bounded in the register the helper takes, for the verifier */
	asm volatile("" : "+r"(len));
	if (len < 1 || len > NFQ_BPF_HELLO_MAX ||
	    bpf_skb_load_bytes(skb, p.poff, h, len) < 0)
		return 0;
	if (hello(s, (__u32)len, &no, &nn) < 0)
		return 0;
	__builtin_memset(w, 0, sizeof(*w));
	if (take_name(h, no, nn, w) < 0)
		return 0;
	w->k.family = p.t.family;
	w->k.port = p.t.dport;
	__builtin_memcpy(w->k.addr, p.t.dst, 16);
	if (!allowed(&w->k)) {
		count(NFQ_BPF_MISSED);
		return 0;
	}
	bpf_map_update_elem(&passed, &p.t, w->k.name, BPF_ANY);
	bpf_map_delete_elem(&starts, &p.t);
	count(NFQ_BPF_PASSED);
	audit_pass(&p.t, w->k.name);
	return 1;
}
