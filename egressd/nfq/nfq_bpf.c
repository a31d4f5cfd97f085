/*
 * nfq_bpf: the in-kernel judge's program and maps (nfq_bpf.h), loaded
 * with libbpf from the object the build embeds (nfq_bpf_obj.c).
 */

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "egressd/nfq/nfq_bpf.h"
#include "egressd/nfq/nfq_bpf_abi.h"

/* The compiled bpf/judge.bpf.c (the build's nfq_bpf_obj.c). */
extern const unsigned char nfq_bpf_obj[];
extern const size_t nfq_bpf_obj_len;

struct nfq_bpf {
	struct bpf_object *obj;
	int prog, verdicts, passed, stats;
	struct nfq_bpf_gen *gen; /* the mmapped "gen" map */
	size_t gen_len;
	int ncpus;
	struct ring_buffer *audit;
	/* the drain under way (nfq_bpf_audit_drain) */
	void (*audit_fn)(
	    void *arg, const struct nfq_bpf_tuple *f, const char *sni);
	void *audit_arg;
	size_t audit_n;
};

/* libbpf's own messages go nowhere: egressd's log is JSON lines, and
 * what failed is said in e. */
static int
nfq_bpf_quiet(enum libbpf_print_level l, const char *fmt, va_list ap)
{
	(void)l;
	(void)fmt;
	(void)ap;
	return 0;
}

/* One record of the audit ring: checked, then given to the drain's fn. */
static int
nfq_bpf_audit_cb(void *ctx, void *data, size_t size)
{
	struct nfq_bpf *b = ctx;
	struct nfq_bpf_audit a;

	if (size != sizeof(a) || b->audit_fn == NULL)
		return 0;
	memcpy(&a, data, sizeof(a));
	a.name[sizeof(a.name) - 1] = '\0';
	b->audit_fn(b->audit_arg, &a.t, a.name);
	b->audit_n++;
	return 0;
}

static int
nfq_bpf_map(struct nfq_bpf *b, const char *name, struct err *e)
{
	struct bpf_map *m = bpf_object__find_map_by_name(b->obj, name);
	int fd = m != NULL ? bpf_map__fd(m) : -1;

	if (fd < 0)
		err_set(e, "bpf: no map %s in the judge", name);
	return fd;
}

struct nfq_bpf *
nfq_bpf_new(struct err *e)
{
	struct nfq_bpf *b = calloc(1, sizeof(*b));
	struct bpf_program *p;
	long page = sysconf(_SC_PAGESIZE);
	int gen, audit, rc;

	if (b == NULL) {
		err_set(e, "bpf: out of memory");
		return NULL;
	}
	b->prog = -1;
	(void)libbpf_set_print(nfq_bpf_quiet);
	b->obj = bpf_object__open_mem(nfq_bpf_obj, nfq_bpf_obj_len, NULL);
	if (b->obj == NULL) {
		err_set(e, "bpf: the judge's object: %s", strerror(errno));
		goto fail;
	}
	if ((rc = bpf_object__load(b->obj)) != 0) {
		err_set(e, "bpf: loading the judge: %s", strerror(-rc));
		goto fail;
	}
	p = bpf_object__find_program_by_name(b->obj, "egressd_judge");
	if (p == NULL || (b->prog = bpf_program__fd(p)) < 0) {
		err_set(e, "bpf: no program in the judge");
		goto fail;
	}
	if ((b->verdicts = nfq_bpf_map(b, "verdicts", e)) < 0 ||
	    (b->passed = nfq_bpf_map(b, "passed", e)) < 0 ||
	    (b->stats = nfq_bpf_map(b, "stats", e)) < 0 ||
	    (gen = nfq_bpf_map(b, "gen", e)) < 0 ||
	    (audit = nfq_bpf_map(b, "audit", e)) < 0)
		goto fail;
	b->audit = ring_buffer__new(audit, nfq_bpf_audit_cb, b, NULL);
	if (b->audit == NULL) {
		err_set(e, "bpf: the audit ring: %s", strerror(errno));
		goto fail;
	}
	b->gen_len = (size_t)(page > 0 ? page : 4096);
	b->gen =
	    mmap(NULL, b->gen_len, PROT_READ | PROT_WRITE, MAP_SHARED, gen, 0);
	if (b->gen == MAP_FAILED) {
		b->gen = NULL;
		err_set(e, "bpf: mapping the generation: %s", strerror(errno));
		goto fail;
	}
	if ((b->ncpus = libbpf_num_possible_cpus()) <= 0) {
		err_set(e, "bpf: the number of CPUs: %s", strerror(-b->ncpus));
		goto fail;
	}
	return b;
fail:
	nfq_bpf_free(b);
	return NULL;
}

void
nfq_bpf_free(struct nfq_bpf *b)
{
	if (b == NULL)
		return;
	if (b->gen != NULL)
		munmap(b->gen, b->gen_len);
	ring_buffer__free(b->audit);
	/* the nftables rule holds the program (and it its maps) for as
	 * long as the rule lives */
	bpf_object__close(b->obj);
	free(b);
}

int
nfq_bpf_prog_fd(const struct nfq_bpf *b)
{
	return b->prog;
}

void
nfq_bpf_set_gen(struct nfq_bpf *b, uint64_t gen)
{
	__atomic_store_n(&b->gen->gen, gen, __ATOMIC_RELEASE);
}

/* The map's key for name at addr:port; -1 when none can be. */
static int
nfq_bpf_vkey_make(struct nfq_bpf_vkey *k, const char *name, int family,
    const uint8_t *addr, uint16_t port)
{
	size_t n = strlen(name);

	if (n == 0 || n >= NFQ_BPF_NAME_LEN || (family != 4 && family != 6))
		return -1;
	memset(k, 0, sizeof(*k));
	k->family = (uint8_t)family;
	k->port = port;
	memcpy(k->addr, addr, family == 4 ? 4 : 16);
	memcpy(k->name, name, n);
	return 0;
}

int
nfq_bpf_remember(struct nfq_bpf *b, const char *name, int family,
    const uint8_t *addr, uint16_t port, uint64_t gen, uint64_t until_ms,
    struct err *e)
{
	struct nfq_bpf_vkey k;
	struct nfq_bpf_verdict v;

	if (nfq_bpf_vkey_make(&k, name, family, addr, port) < 0) {
		err_set(e, "bpf: a verdict it cannot hold");
		return -1;
	}
	v.gen = gen;
	v.until_ns =
	    until_ms > UINT64_MAX / 1000000 ? UINT64_MAX : until_ms * 1000000;
	if (bpf_map_update_elem(b->verdicts, &k, &v, BPF_ANY) < 0) {
		err_set(e, "bpf: remembering a verdict: %s", strerror(errno));
		return -1;
	}
	return 0;
}

void
nfq_bpf_forget(struct nfq_bpf *b, const char *name, int family,
    const uint8_t *addr, uint16_t port)
{
	struct nfq_bpf_vkey k;

	/* ENOENT: never taught, or already gone */
	if (nfq_bpf_vkey_make(&k, name, family, addr, port) == 0)
		(void)bpf_map_delete_elem(b->verdicts, &k);
}

size_t
nfq_bpf_passed_each(struct nfq_bpf *b,
    bool (*fn)(void *arg, const struct nfq_bpf_tuple *f, const char *sni),
    void *arg)
{
	struct nfq_bpf_tuple *gone, k, next;
	char name[NFQ_BPF_NAME_LEN];
	size_t n = 0, i, seen = 0;
	void *prev = NULL;

	gone = calloc(NFQ_BPF_PASSED_MAX, sizeof(*gone));
	if (gone == NULL)
		return 0;
	while (seen++ < NFQ_BPF_PASSED_MAX &&
	    bpf_map_get_next_key(b->passed, prev, &next) == 0) {
		k = next;
		prev = &k;
		if (bpf_map_lookup_elem(b->passed, &k, name) < 0)
			continue;
		name[sizeof(name) - 1] = '\0';
		if (fn(arg, &k, name))
			gone[n++] = k;
	}
	/* deleted after the walk: a delete under it restarts it */
	for (i = 0; i < n; i++)
		(void)bpf_map_delete_elem(b->passed, &gone[i]);
	free(gone);
	return n;
}

size_t
nfq_bpf_audit_drain(struct nfq_bpf *b,
    void (*fn)(void *arg, const struct nfq_bpf_tuple *f, const char *sni),
    void *arg)
{
	b->audit_fn = fn;
	b->audit_arg = arg;
	b->audit_n = 0;
	/* reads the mmapped ring: no syscall when it is empty */
	(void)ring_buffer__consume(b->audit);
	b->audit_fn = NULL;
	return b->audit_n;
}

void
nfq_bpf_counts(const struct nfq_bpf *b, uint64_t *passed, uint64_t *missed,
    uint64_t *unlogged)
{
	uint64_t *v = calloc((size_t)b->ncpus, sizeof(*v));
	uint64_t *out[NFQ_BPF_STATS] = {passed, missed, unlogged};
	uint32_t k;
	int c;

	*passed = *missed = *unlogged = 0;
	if (v == NULL)
		return;
	for (k = 0; k < NFQ_BPF_STATS; k++) {
		if (bpf_map_lookup_elem(b->stats, &k, v) < 0)
			continue;
		for (c = 0; c < b->ncpus; c++)
			*out[k] += v[c];
	}
	free(v);
}
