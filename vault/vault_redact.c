/*
 * vault_redact: the patterns of a vault (every value in each rendered
 * form), the multi-pattern matcher over them, the streaming
 * length-preserving redactor of response bodies and the "[REDACTED]"
 * rewriting of header values (vault.h).
 *
 * The matcher: patterns sorted by first byte, longest first; a probe of
 * a 64 KiB-bit table of the first two bytes rejects almost every position
 * at once; the candidates of a position's first byte are then compared
 * with memcmp, and the first (longest) that matches covers its bytes. A
 * position is never skipped after a match, so overlapping occurrences are
 * all covered. Cost per byte: one or two table probes where no pattern
 * starts; at worst the patterns sharing the first bytes (their number
 * bounded by VAULT_PATTERNS_MAX). Not constant time (the compared
 * bytes are the response's, and an origin timing egressd's redaction
 * learns at most where its own bytes begin a secret's rendered form).
 *
 * In front of it, streams use a skip filter (Wu-Manber with blocks of
 * B = VAULT_SKIP_BLOCK bytes, hashed): with win the shortest pattern's
 * length (capped), a window of win bytes looks at its last B; if they
 * (their hash) occur in no pattern's first win bytes at an offset j, no
 * pattern starts within the next win - B - j positions (win - B + 1 if
 * they occur nowhere), and the window moves on that far without probing
 * them. A pattern that starts at position i ends its first win bytes
 * with a block of shift 0 at window i, so no start is ever skipped.
 * Random bytes and text that shares little with the forms move by up to
 * win - B + 1 (9 with pieces of 12) per probe. Header
 * values and whole response heads use the filter too: a head in which
 * nothing matches costs a few probes and no allocation.
 *
 * Streams are scanned in place (vault_redact_scan): the caller's bytes
 * are read where they are (an evbuffer's chains) and the caller is told
 * span by span what to send, so clean bytes are never copied by the
 * redactor; it copies only the bytes it must hold (at most the longest
 * pattern - 1) and, for windows that cross from one piece into the next,
 * at most twice that into a seam. The copying interface (feed, flush,
 * finish) is the same scan over one piece.
 */
#include <stdlib.h>
#include <string.h>

#include "vault/vault_int.h"

#define REDACTED "[REDACTED]"
/* The skip filter's window: patterns shorter than the minimum turn it off
 * (the probes would cost more than they save); the maximum keeps shifts
 * in a byte. */
#define VAULT_SKIP_WIN_MIN 4u
#define VAULT_SKIP_WIN_MAX 255u
/* The filter's lanes (scan_lanes): how many, their chunks (a share of
 * the piece, within these bounds; offsets in a chunk are 16 bits), and
 * the candidates a lane ahead queues before it waits. */
#define VAULT_SCAN_LANES 4u
#define VAULT_SCAN_LANE_MIN 1024u
#define VAULT_SCAN_LANE_MAX 16384u
#define VAULT_SCAN_QUEUE 256u

/* ---- the matcher ---- */

static int
pat_cmp(const void *a, const void *b)
{
	const struct vault_pat *x = a, *y = b;
	int c;

	if (x->p[0] != y->p[0])
		return x->p[0] < y->p[0] ? -1 : 1;
	if (x->len != y->len)
		return x->len > y->len ? -1 : 1;
	c = memcmp(x->p, y->p, x->len);
	return c;
}

/*
 * The skip filter's key of the VAULT_SKIP_BLOCK (4) bytes at b, hashed to
 * VAULT_SKIP_BITS: the patterns are pieces of every form, so every block
 * of a form is some piece's block at every offset; with two-byte blocks
 * a few dozen values marked most of the 64 Ki keys, with four hashed to
 * 2^20 they mark a few percent.
 */
static inline unsigned
skip_block(const uint8_t *b)
{
	uint32_t x;

	memcpy(&x, b, sizeof(x));
	return (unsigned)((x * 0x9e3779b1u) >> (32 - VAULT_SKIP_BITS));
}

/*
 * How far a window whose last block hashes to k may move: far when no
 * pattern holds the block in its first win bytes (a bit in a 128 KiB
 * map, what clean text mostly meets), else its shift (0: probe).
 */
static inline uint8_t
skip_at(const uint64_t *hit, const uint8_t *shift, uint8_t far, unsigned k)
{
	return (hit[k >> 6] >> (k & 63) & 1) ? shift[k] : far;
}

/* How far the window at i may move (0: probe i). */
static inline uint8_t
skip_shift(const struct vault_match *m, const uint8_t *p, size_t i)
{
	return skip_at(m->hit, m->shift, m->far,
	    skip_block(p + i + m->win - VAULT_SKIP_BLOCK));
}

/* The skip filter's shifts (see the top of the file). */
static void
skip_build(struct vault_match *m)
{
	size_t i, j, min = SIZE_MAX;

	for (i = 0; i < m->npats; i++)
		if (m->pats[i].len < min)
			min = m->pats[i].len;
	m->win = 0;
	if (m->npats == 0 || min < VAULT_SKIP_WIN_MIN)
		return;
	m->win = min < VAULT_SKIP_WIN_MAX ? min : VAULT_SKIP_WIN_MAX;
	m->far = (uint8_t)(m->win - VAULT_SKIP_BLOCK + 1);
	memset(m->hit, 0, sizeof(m->hit));
	memset(m->shift, m->far, sizeof(m->shift));
	for (i = 0; i < m->npats; i++) {
		const uint8_t *p = m->pats[i].p;

		for (j = 0; j + VAULT_SKIP_BLOCK <= m->win; j++) {
			unsigned k = skip_block(p + j);
			uint8_t sh = (uint8_t)(m->win - VAULT_SKIP_BLOCK - j);

			m->hit[k >> 6] |= (uint64_t)1 << (k & 63);
			if (sh < m->shift[k])
				m->shift[k] = sh;
		}
	}
}

size_t
vault_redact_arena_need(const struct vault_cred *c, size_t n)
{
	struct vault_forms f;
	size_t i;

	/* the build's own code, counting: exact before duplicates go */
	memset(&f, 0, sizeof(f));
	for (i = 0; i < n; i++) {
		vault_forms_cred(&f, &c[i]);
		if (f.off > VAULT_PATTERN_BYTES_MAX ||
		    f.npats > VAULT_PATTERNS_MAX)
			return SIZE_MAX;
	}
	/* The tables, the pattern array twice (by first byte and by
	 * group), the group slots (at most 4 per pattern), and each
	 * allocation's header. */
	return f.off + sizeof(struct vault_match) +
	    2 * (f.npats + 1) * sizeof(struct vault_pat) +
	    4 * (f.npats + 1) * sizeof(struct vault_grp) + 4096;
}

/* a[0..n) == b[0..n)? Inline, a word at a time: a candidate that
 * shares a pattern's first bytes (a near miss) usually differs a few
 * words on, and a call to memcmp would cost more than the compare. */
static inline bool
same(const uint8_t *a, const uint8_t *b, size_t n)
{
	uint64_t x, y;

	for (; n >= 8; a += 8, b += 8, n -= 8) {
		memcpy(&x, a, 8);
		memcpy(&y, b, 8);
		if (x != y)
			return false;
	}
	for (; n > 0; a++, b++, n--)
		if (*a != *b)
			return false;
	return true;
}

/* The group key of the q bytes at w (q <= 8). */
static inline uint64_t
grp_key(const uint8_t *w, size_t q)
{
	uint64_t k = 0;
	size_t i;

	if (q == 8) {
		memcpy(&k, w, 8);
		return k;
	}
	for (i = 0; i < q; i++)
		k |= (uint64_t)w[i] << (8 * i);
	return k;
}

static inline size_t
grp_slot(uint64_t key, size_t mask)
{
	return (size_t)((key * 0x9e3779b97f4a7c15ull) >> 32) & mask;
}

/* Byte order (a prefix first): patterns that share their first q bytes
 * end up next to each other, whatever q. */
static int
lex_cmp(const void *a, const void *b)
{
	const struct vault_pat *x = a, *y = b;
	int c = memcmp(x->p, y->p, x->len < y->len ? x->len : y->len);

	if (c != 0)
		return c;
	return x->len < y->len ? -1 : x->len > y->len;
}

/* Longest first (within a group). */
static int
len_cmp(const void *a, const void *b)
{
	const struct vault_pat *x = a, *y = b;

	return x->len > y->len ? -1 : x->len < y->len;
}

/* The groups of m's patterns (see struct vault_match). 0, or -1 when the
 * arena is full. */
static int
grp_build(struct secmem_arena *a, struct vault_match *m)
{
	size_t min = SIZE_MAX, i, j, ngrp = 0, slots = 4, h;

	m->q = 0;
	for (i = 0; i < m->npats; i++)
		if (m->pats[i].len < min)
			min = m->pats[i].len;
	if (m->npats == 0 || min < 4)
		return 0;
	m->q = min < 8 ? min : 8;
	m->gpats = secmem_alloc(a, m->npats * sizeof(*m->gpats));
	if (m->gpats == NULL)
		return -1;
	memcpy(m->gpats, m->pats, m->npats * sizeof(*m->gpats));
	qsort(m->gpats, m->npats, sizeof(*m->gpats), lex_cmp);
	for (i = 0; i < m->npats; i++)
		if (i == 0 ||
		    memcmp(m->gpats[i - 1].p, m->gpats[i].p, m->q) != 0)
			ngrp++;
	while (slots < 2 * ngrp)
		slots *= 2;
	if ((m->grp = secmem_alloc(a, slots * sizeof(*m->grp))) == NULL)
		return -1;
	m->gmask = slots - 1;
	for (i = 0; i < m->npats; i = j) {
		uint64_t key = grp_key(m->gpats[i].p, m->q);

		for (j = i + 1; j < m->npats &&
		     memcmp(m->gpats[i].p, m->gpats[j].p, m->q) == 0;
		     j++)
			;
		qsort(m->gpats + i, j - i, sizeof(*m->gpats), len_cmp);
		for (h = grp_slot(key, m->gmask); m->grp[h].end != 0;
		     h = (h + 1) & m->gmask)
			;
		m->grp[h].key = key;
		m->grp[h].first = (uint32_t)i;
		m->grp[h].end = (uint32_t)j;
	}
	return 0;
}

int
vault_redact_build(struct vault *v, struct err *e)
{
	struct vault_match *m;
	struct vault_forms f;
	size_t i, j;

	v->m = NULL;
	if (v->nall == 0)
		return 0;
	/* a counting pass sizes the buffers, then the same code fills
	 * them */
	memset(&f, 0, sizeof(f));
	for (i = 0; i < v->nall; i++)
		vault_forms_cred(&f, &v->creds[i]);
	f.cap = f.off;
	f.pcap = f.npats;
	f.off = f.npats = 0;
	m = secmem_alloc(v->arena, sizeof(*m));
	f.buf = secmem_alloc(v->arena, f.cap);
	f.pats = secmem_alloc(v->arena, f.pcap * sizeof(*f.pats));
	if (m == NULL || f.buf == NULL || f.pats == NULL) {
		secmem_free(v->arena, m);
		secmem_free(v->arena, f.buf);
		secmem_free(v->arena, f.pats);
		err_set(e, "secret arena full (redaction patterns)");
		return -1;
	}
	for (i = 0; i < v->nall; i++)
		vault_forms_cred(&f, &v->creds[i]);
	qsort(f.pats, f.npats, sizeof(*f.pats), pat_cmp);
	/* Unique. */
	for (i = j = 0; i < f.npats; i++)
		if (j == 0 || pat_cmp(&f.pats[j - 1], &f.pats[i]) != 0)
			f.pats[j++] = f.pats[i];
	f.npats = j;
	m->blob = f.buf;
	m->pats = f.pats;
	m->npats = f.npats;
	m->maxlen = 0;
	for (i = 0; i < m->npats; i++) {
		const struct vault_pat *pt = &m->pats[i];

		if (pt->len > m->maxlen)
			m->maxlen = pt->len;
		if (pt->len == 1)
			m->one[pt->p[0]] = 1;
		else {
			unsigned k = (unsigned)pt->p[0] << 8 | pt->p[1];

			m->pair[k >> 3] |= (uint8_t)(1u << (k & 7));
		}
	}
	skip_build(m);
	if (grp_build(v->arena, m) == -1) {
		err_set(e, "secret arena full (redaction groups)");
		return -1;
	}
	/* start[c]: first pattern whose first byte is >= c. */
	for (i = 0, j = 0; i < 257; i++) {
		while (j < m->npats && m->pats[j].p[0] < i)
			j++;
		m->start[i] = (uint32_t)j;
	}
	v->m = m;
	return 0;
}

/* The group of the patterns that begin with w's first q bytes, or NULL
 * (w has at least q bytes). */
static inline const struct vault_grp *
grp_find(const struct vault_match *m, const uint8_t *w)
{
	uint64_t key = grp_key(w, m->q);
	const struct vault_grp *g;
	size_t h;

	for (h = grp_slot(key, m->gmask);; h = (h + 1) & m->gmask) {
		g = &m->grp[h];
		if (g->end == 0)
			return NULL;
		if (g->key == key)
			return g;
	}
}

/* The longest pattern matching at w (with avail bytes there), or 0. */
static inline size_t
match_at(const struct vault_match *m, const uint8_t *w, size_t avail)
{
	uint8_t c = w[0];
	uint32_t k, end = m->start[c + 1];

	if (m->start[c] == end)
		return 0;
	if (avail >= 2 && !m->one[c]) {
		unsigned b = (unsigned)c << 8 | w[1];

		if (!(m->pair[b >> 3] & (1u << (b & 7))))
			return 0;
	}
	if (m->q != 0 && avail >= m->q) {
		const struct vault_grp *g = grp_find(m, w);

		if (g == NULL)
			return 0;
		for (k = g->first; k < g->end; k++) {
			const struct vault_pat *pt = &m->gpats[k];

			if (pt->len <= avail &&
			    same(pt->p + m->q, w + m->q, pt->len - m->q))
				return pt->len;
		}
		return 0;
	}
	for (k = m->start[c]; k < end; k++) {
		const struct vault_pat *pt = &m->pats[k];

		if (pt->len <= avail && memcmp(pt->p, w, pt->len) == 0)
			return pt->len;
	}
	return 0;
}

/* Starts below the result have the whole skip window in p[0..plen)
 * (0: no filter); at most to. */
static inline size_t
skip_limit(const struct vault_match *m, size_t plen, size_t to)
{
	if (m->win == 0 || plen < m->win)
		return 0;
	return plen - m->win + 1 < to ? plen - m->win + 1 : to;
}

/* The first start from i on the skip filter cannot rule out (or the
 * first at or past fast). */
static inline size_t
skip_to(const struct vault_match *m, const uint8_t *p, size_t i, size_t fast)
{
	uint8_t sh;

	while (i < fast && (sh = skip_shift(m, p, i)) != 0)
		i += sh;
	return i;
}

/* Does some pattern occur in p[0..n)? */
static bool
match_any(const struct vault_match *m, const uint8_t *p, size_t n)
{
	size_t i = 0, fast = skip_limit(m, n, n);

	while ((i = skip_to(m, p, i, fast)) < n) {
		if (match_at(m, p + i, n - i) != 0)
			return true;
		i++;
	}
	return false;
}

bool
vault_redact_any(const struct vault *v, const void *p, size_t n)
{
	return v->m != NULL && n > 0 && match_any(v->m, p, n);
}

size_t
vault_redact_holdback(const struct vault *v)
{
	return v->m != NULL && v->m->maxlen > 0 ? v->m->maxlen - 1 : 0;
}

/* ---- streams ---- */

/*
 * A redactor holds the bytes whose starts it has not tried yet: at most
 * maxlen - 1 of them, a pattern may begin there and end in bytes still
 * to come. A scan reads "the stream": the held bytes, then the caller's
 * pieces, in place; positions below are offsets into it. Starts [0, s)
 * are tried (s depends on the mode), [0, s) is released as spans (clean
 * or masked, in order), and [s, t) is copied into held for the next scan.
 * Windows that cross from one piece into the next are tried in seam, a
 * copy of at most 2 (maxlen - 1) bytes around the boundary.
 */
struct vault_redactor {
	const struct vault *v;
	size_t cap; /* maxlen - 1 */
	size_t h; /* held bytes at held[0..h) */
	size_t mend; /* bytes [0, mend) of the next stream are covered */
	uint8_t *seam; /* 2 cap bytes, after held */
	uint8_t held[]; /* cap bytes */
};

struct vault_redactor *
vault_redactor_new(const struct vault *v)
{
	size_t cap = vault_redact_holdback(v);
	struct vault_redactor *r = malloc(sizeof(*r) + 3 * cap + 1);

	if (r == NULL)
		return NULL;
	r->v = v;
	r->cap = cap;
	r->h = 0;
	r->mend = 0;
	r->seam = r->held + cap;
	return r;
}

/* One scan: the stream is held[0..h) then seg[0..nseg). */
struct scan {
	struct vault_redactor *r;
	const struct vault_match *m;
	const struct vault_seg *seg;
	size_t nseg;
	size_t t; /* bytes in the stream */
	size_t rel; /* bytes released */
	size_t rk, ro; /* byte rel is piece rk's byte ro (0: held) */
	size_t cs, ce; /* the cover run: [cs, ce) */
	vault_span_fn out;
	void *arg;
};

static const uint8_t *
piece(const struct scan *sc, size_t k, size_t *n)
{
	if (k == 0) {
		*n = sc->r->h;
		return sc->r->held;
	}
	*n = sc->seg[k - 1].n;
	return sc->seg[k - 1].p;
}

/* Releases the stream up to upto (> sc->rel or nothing), masked or
 * clean, one span per piece. */
static void
release_to(struct scan *sc, size_t upto, bool masked)
{
	while (sc->rel < upto) {
		size_t n, take;
		const uint8_t *p = piece(sc, sc->rk, &n);

		if (sc->ro == n) {
			sc->rk++;
			sc->ro = 0;
			continue;
		}
		take =
		    n - sc->ro < upto - sc->rel ? n - sc->ro : upto - sc->rel;
		sc->out(sc->arg, masked ? NULL : p + sc->ro, take,
		    (masked ? VAULT_SPAN_MASKED : 0) |
		        (sc->rk == 0 ? VAULT_SPAN_HELD : 0));
		sc->rel += take;
		sc->ro += take;
	}
}

/*
 * A match at q of l bytes. The run before it is released once q starts
 * past its end: no later start reads the bytes before q.
 */
static void
cover(struct scan *sc, size_t q, size_t l)
{
	if (q > sc->ce) {
		release_to(sc, sc->cs, false);
		release_to(sc, sc->ce, true);
		sc->cs = q;
	}
	if (q + l > sc->ce)
		sc->ce = q + l;
}

static inline void
probe(struct scan *sc, const uint8_t *p, size_t plen, size_t i, size_t base)
{
	size_t l = match_at(sc->m, p + i, plen - i);

	if (l != 0)
		cover(sc, base + i, l);
}

/* A lane of the filter that runs ahead (scan_lanes): its chunk [start,
 * end), how far it got, and the candidates it found (offsets from
 * start), to be probed once the lanes before it are through. */
struct lane {
	size_t start, cur, end;
	size_t n;
	uint16_t q[VAULT_SCAN_QUEUE];
};

static inline bool
lane_runs(const struct lane *l)
{
	return l->cur < l->end && l->n < VAULT_SCAN_QUEUE;
}

/* One step of the filter in a lane ahead: skip, or queue a candidate. */
static inline void
lane_step(const struct vault_match *m, const uint8_t *p, struct lane *l)
{
	uint8_t sh = skip_shift(m, p, l->cur);

	if (sh != 0)
		l->cur += sh;
	else
		l->q[l->n++] = (uint16_t)(l->cur++ - l->start);
}

/* How many steps of at most mv bytes, from cur on, all start below end. */
static inline size_t
steps_left(size_t cur, size_t end, size_t mv)
{
	return cur < end ? (end - cur - 1) / mv + 1 : 0;
}

/*
 * A lane ahead's step at *c (the cursor in a local: the compiler keeps it
 * in a register, which a store through l would not let it), with the
 * window's last bytes at pw + *c and the shift table sht.
 */
static inline __attribute__((always_inline)) void
lane_step_at(const uint8_t *pw, const uint64_t *hit, const uint8_t *sht,
    uint8_t far, size_t *c, struct lane *l)
{
	uint8_t sh = skip_at(hit, sht, far, skip_block(pw + *c));

	if (sh != 0)
		*c += sh;
	else
		l->q[l->n++] = (uint16_t)((*c)++ - l->start);
}

/*
 * j steps of the probing lane (from a; returned) and of the three lanes
 * ahead, none of which any test needs to stop (scan_lanes computed j).
 * The hot loop of the redactor: cursors and tables in locals.
 */
static size_t
lanes_batch(struct scan *sc, const uint8_t *p, size_t plen, size_t base,
    size_t a, struct lane *ln, size_t j)
{
	const uint8_t *pw = p + sc->m->win - VAULT_SKIP_BLOCK;
	const uint64_t *hit = sc->m->hit;
	const uint8_t *sht = sc->m->shift;
	uint8_t far = sc->m->far;
	size_t c0 = ln[0].cur, c1 = ln[1].cur, c2 = ln[2].cur;
	uint8_t sh;

	_Static_assert(VAULT_SCAN_LANES == 4, "lanes_batch steps three ahead");
	while (j-- > 0) {
		if ((sh = skip_at(hit, sht, far, skip_block(pw + a))) != 0)
			a += sh;
		else
			probe(sc, p, plen, a++, base);
		lane_step_at(pw, hit, sht, far, &c0, &ln[0]);
		lane_step_at(pw, hit, sht, far, &c1, &ln[1]);
		lane_step_at(pw, hit, sht, far, &c2, &ln[2]);
	}
	ln[0].cur = c0;
	ln[1].cur = c1;
	ln[2].cur = c2;
	return a;
}

/* The next chunk (cs bytes) from *next on (empty at fast) for l. */
static inline void
lane_init(struct lane *l, size_t *next, size_t fast, size_t cs)
{
	l->start = l->cur = *next;
	l->end = fast - *next > cs ? *next + cs : fast;
	l->n = 0;
	*next = l->end;
}

/*
 * The skip filter over [from, fast) in lanes: each step of the filter is
 * a load that depends on the one before, so one lane waits on memory
 * most of the time; lanes a chunk apart overlap their waits. Lane a
 * probes its candidates at once; the lanes ahead, one chunk each, only
 * queue theirs (they come after all of a's, so matches stay in order)
 * and stop when the queue is full. When a reaches the next lane's
 * chunk, that lane's candidates are probed, a goes on where it stopped,
 * and the lane takes the next chunk after the last. Returns where the
 * caller goes on: every start below it was probed or ruled out.
 */
static size_t
scan_lanes(struct scan *sc, const uint8_t *p, size_t plen, size_t from,
    size_t fast, size_t base)
{
	const struct vault_match *m = sc->m;
	struct lane ln[VAULT_SCAN_LANES - 1], *l;
	size_t a = from, aend, next, h = 0, k, cs, j;
	/* the most a step moves */
	size_t mv = m->win - VAULT_SKIP_BLOCK + 1;
	uint8_t sh;

	/* a share each, so that the lanes run side by side to the end */
	cs = (fast - from + VAULT_SCAN_LANES - 1) / VAULT_SCAN_LANES;
	if (cs < VAULT_SCAN_LANE_MIN)
		cs = VAULT_SCAN_LANE_MIN;
	if (cs > VAULT_SCAN_LANE_MAX)
		cs = VAULT_SCAN_LANE_MAX;
	aend = next = fast - from > cs ? from + cs : fast;
	for (k = 0; k < VAULT_SCAN_LANES - 1; k++)
		lane_init(&ln[k], &next, fast, cs);
	for (;;) {
		/* batches of steps that no test needs to stop: none can
		 * take a past aend, a lane past its end or queue */
		while ((j = steps_left(a, aend, mv)) != 0) {
			for (k = 0; k < VAULT_SCAN_LANES - 1; k++) {
				size_t jl =
				    steps_left(ln[k].cur, ln[k].end, mv);

				if (jl > VAULT_SCAN_QUEUE - ln[k].n)
					jl = VAULT_SCAN_QUEUE - ln[k].n;
				if (jl < j)
					j = jl;
			}
			if (j == 0)
				break;
			a = lanes_batch(sc, p, plen, base, a, ln, j);
		}
		while (a < aend) {
			if ((sh = skip_shift(m, p, a)) != 0)
				a += sh;
			else
				probe(sc, p, plen, a++, base);
			for (k = 0; k < VAULT_SCAN_LANES - 1; k++)
				if (lane_runs(&ln[k]))
					lane_step(m, p, &ln[k]);
		}
		l = &ln[h];
		if (l->start == l->end)
			return a; /* no chunk left */
		for (k = 0; k < l->n; k++)
			probe(sc, p, plen, l->start + l->q[k], base);
		/* [start, cur) is done by l, [start, a) ruled out by a */
		if (l->cur > a)
			a = l->cur;
		aend = l->end;
		lane_init(l, &next, fast, cs);
		h = (h + 1) % (VAULT_SCAN_LANES - 1);
	}
}

/* Tries starts [from, to) of p[0..plen), stream bytes from base on
 * (plen: as far as the stream goes or at least maxlen past to). */
static void
scan_run(struct scan *sc, const uint8_t *p, size_t plen, size_t from, size_t to,
    size_t base)
{
	const struct vault_match *m = sc->m;
	size_t i = from, fast = skip_limit(m, plen, to);

	/* lanes for two of their chunks or more */
	if (fast > from && fast - from >= 2 * VAULT_SCAN_LANE_MIN)
		i = scan_lanes(sc, p, plen, from, fast, base);
	while ((i = skip_to(m, p, i, fast)) < to)
		probe(sc, p, plen, i++, base);
}

/* Copies the stream's bytes [from, from + n) into dst (n bytes there). */
static void
gather(const struct scan *sc, size_t from, size_t n, uint8_t *dst)
{
	size_t k, o = 0, pn;
	const uint8_t *p;

	for (k = 0; n > 0 && k <= sc->nseg; k++) {
		p = piece(sc, k, &pn);
		if (from >= o + pn) {
			o += pn;
			continue;
		}
		{
			size_t at = from - o, take = pn - at < n ? pn - at : n;

			memcpy(dst, p + at, take);
			dst += take;
			from += take;
			n -= take;
			o += pn;
		}
	}
}

/* Tries starts [0, s): in place where a start's window lies in its
 * piece (or the piece ends the stream), in seam where it crosses. */
static void
scan_pieces(struct scan *sc, size_t s)
{
	size_t k, o = 0, n, ml = sc->m->maxlen;
	const uint8_t *p;

	for (k = 0; k <= sc->nseg && o < s; k++, o += n) {
		size_t end, de, q1;

		p = piece(sc, k, &n);
		if (n == 0)
			continue;
		end = o + n;
		q1 = end < s ? end : s;
		/* in place: windows inside the piece (i + ml <= end) */
		de = end == sc->t ? q1 : (n >= ml ? end - ml + 1 : o);
		if (de > q1)
			de = q1;
		if (de > o)
			scan_run(sc, p, n, 0, de - o, o);
		if (de < q1) {
			size_t sl =
			    q1 - 1 + ml < sc->t ? q1 - 1 + ml - de : sc->t - de;

			gather(sc, de, sl, sc->r->seam);
			scan_run(sc, sc->r->seam, sl, 0, q1 - de, de);
		}
	}
}

/* Could the avail bytes at w still become a match (a longer pattern
 * starts with them)? */
static bool
match_pending(const struct vault_match *m, const uint8_t *w, size_t avail)
{
	uint8_t c = w[0];
	uint32_t k, end = m->start[c + 1];

	if (m->start[c] == end)
		return false;
	if (avail >= 2 && !m->one[c]) {
		unsigned b = (unsigned)c << 8 | w[1];

		if (!(m->pair[b >> 3] & (1u << (b & 7))))
			return false;
	}
	if (m->q != 0 && avail >= m->q) {
		const struct vault_grp *g = grp_find(m, w);

		if (g == NULL)
			return false;
		for (k = g->first; k < g->end; k++) {
			const struct vault_pat *pt = &m->gpats[k];

			if (pt->len > avail &&
			    same(pt->p + m->q, w + m->q, avail - m->q))
				return true;
		}
		return false;
	}
	for (k = m->start[c]; k < end; k++) {
		const struct vault_pat *pt = &m->pats[k];

		if (pt->len > avail && memcmp(pt->p, w, avail) == 0)
			return true;
	}
	return false;
}

/* FLUSH: the first start from which the rest of the stream may still
 * begin a match (t if none). Starts with maxlen bytes ahead never may. */
static size_t
flush_point(struct scan *sc)
{
	size_t ml = sc->m->maxlen, s0 = sc->t >= ml ? sc->t - ml + 1 : 0, i;

	gather(sc, s0, sc->t - s0, sc->r->seam);
	for (i = s0; i < sc->t; i++)
		if (match_pending(sc->m, sc->r->seam + (i - s0), sc->t - i))
			return i;
	return sc->t;
}

void
vault_redact_scan(struct vault_redactor *r, const struct vault_seg *seg,
    size_t nseg, enum vault_redact_mode mode, vault_span_fn out, void *arg)
{
	struct scan sc;
	size_t k, s, o, pos, base;

	memset(&sc, 0, sizeof(sc));
	sc.r = r;
	sc.m = r->v->m;
	sc.seg = seg;
	sc.nseg = nseg;
	sc.out = out;
	sc.arg = arg;
	sc.t = r->h;
	for (k = 0; k < nseg; k++)
		sc.t += seg[k].n;
	if (sc.m == NULL) {
		/* nothing to find: every byte as it is (nothing is held) */
		release_to(&sc, sc.t, false);
		return;
	}
	switch (mode) {
	case VAULT_REDACT_MORE:
		s = sc.t >= sc.m->maxlen ? sc.t - sc.m->maxlen + 1 : 0;
		break;
	case VAULT_REDACT_FLUSH:
		s = flush_point(&sc);
		break;
	default:
		s = sc.t;
		break;
	}
	sc.ce = r->mend;
	scan_pieces(&sc, s);
	if (sc.ce > sc.cs) {
		release_to(&sc, sc.cs, false);
		release_to(&sc, sc.ce < s ? sc.ce : s, true);
	}
	release_to(&sc, s, false);
	r->mend = sc.ce > s ? sc.ce - s : 0;
	/* [s, t) is held from now on: the held part moves to the front,
	 * the caller's part is copied and reported as kept */
	pos = r->h > s ? r->h : s;
	base = r->h;
	o = 0;
	if (s < r->h) {
		memmove(r->held, r->held + s, r->h - s);
		o = r->h - s;
	}
	for (k = 0; k < nseg; base += seg[k].n, k++) {
		size_t at, take;

		if (pos >= base + seg[k].n)
			continue;
		at = pos - base;
		take = seg[k].n - at;
		memcpy(r->held + o, seg[k].p + at, take);
		out(arg, NULL, take, VAULT_SPAN_KEPT);
		o += take;
		pos += take;
	}
	r->h = o;
	if (mode == VAULT_REDACT_END) {
		secmem_wipe(r->held, 3 * r->cap);
		r->h = 0;
		r->mend = 0;
	}
}

/* The copying interface on top of vault_redact_scan: masked spans as
 * '*', held and clean bytes as they are, kept ones not at all. */
struct emit_ctx {
	void (*emit)(void *arg, const uint8_t *p, size_t n);
	void *arg;
};

static void
emit_span(void *arg, const uint8_t *p, size_t n, unsigned flags)
{
	const struct emit_ctx *ec = arg;
	uint8_t stars[256];

	if (flags & VAULT_SPAN_KEPT)
		return;
	if (!(flags & VAULT_SPAN_MASKED)) {
		ec->emit(ec->arg, p, n);
		return;
	}
	memset(stars, '*', sizeof(stars));
	while (n > 0) {
		size_t k = n < sizeof(stars) ? n : sizeof(stars);

		ec->emit(ec->arg, stars, k);
		n -= k;
	}
}

static void
redact_copying(struct vault_redactor *r, const uint8_t *in, size_t n,
    enum vault_redact_mode mode,
    void (*emit)(void *arg, const uint8_t *p, size_t n), void *arg)
{
	struct emit_ctx ec = {emit, arg};
	struct vault_seg seg = {in, n};

	vault_redact_scan(r, &seg, n > 0 ? 1 : 0, mode, emit_span, &ec);
}

void
vault_redact_feed(struct vault_redactor *r, const uint8_t *in, size_t n,
    void (*emit)(void *arg, const uint8_t *p, size_t n), void *arg)
{
	if (n > 0)
		redact_copying(r, in, n, VAULT_REDACT_MORE, emit, arg);
}

void
vault_redact_finish(struct vault_redactor *r,
    void (*emit)(void *arg, const uint8_t *p, size_t n), void *arg)
{
	redact_copying(r, NULL, 0, VAULT_REDACT_END, emit, arg);
}

void
vault_redact_flush(struct vault_redactor *r,
    void (*emit)(void *arg, const uint8_t *p, size_t n), void *arg)
{
	redact_copying(r, NULL, 0, VAULT_REDACT_FLUSH, emit, arg);
}

void
vault_redactor_free(struct vault_redactor *r)
{
	if (r == NULL)
		return;
	secmem_wipe(r->held, 3 * r->cap);
	free(r);
}

/* ---- header values ---- */

char *
vault_redact_header(
    const struct vault *v, const char *value, size_t n, size_t *outlen)
{
	const struct vault_match *m = v->m;
	const uint8_t *in = (const uint8_t *)value;
	size_t i, l, mend = 0, len = 0, o = 0;
	uint8_t *cov;
	char *out;
	bool any = false;

	*outlen = 0;
	/* most values hold nothing: found out without an allocation */
	if (m == NULL || n == 0 || !match_any(m, in, n))
		return NULL;
	if ((cov = calloc(n, 1)) == NULL) {
		*outlen = SIZE_MAX;
		return NULL;
	}
	for (i = 0; i < n; i++) {
		if ((l = match_at(m, in + i, n - i)) != 0 && i + l > mend)
			mend = i + l;
		if (i < mend) {
			cov[i] = 1;
			any = true;
		}
	}
	if (!any) {
		free(cov);
		return NULL;
	}
	for (i = 0; i < n; i++)
		if (!cov[i])
			len++;
		else if (i == 0 || !cov[i - 1])
			len += sizeof(REDACTED) - 1;
	if ((out = malloc(len + 1)) == NULL) {
		free(cov);
		*outlen = SIZE_MAX;
		return NULL;
	}
	for (i = 0; i < n; i++) {
		if (!cov[i]) {
			out[o++] = value[i];
		} else if (i == 0 || !cov[i - 1]) {
			memcpy(out + o, REDACTED, sizeof(REDACTED) - 1);
			o += sizeof(REDACTED) - 1;
		}
	}
	out[o] = '\0';
	free(cov);
	*outlen = o;
	return out;
}
