// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * extent: the in-memory per-file block map (see extent.h).
 *
 * Two radix trees of 512-way interior nodes (4 KiB of pointers) above
 * leaves of 512 struct extent_ent (8 KiB), 9 bits of the file block per
 * level.  The low tree (m->root) has four levels and maps blocks below
 * EXTENT_LOW_FBLK (2^36, 256 TiB): every ordinary file lives there and pays
 * three pointer hops per lookup.  The high tree (m->high) has six levels,
 * indexed by the whole block number, and holds only blocks from 2^36 up to
 * EXTENT_MAX_FBLK (2^51, offsets up to 2^63 - 1): the kernel accepts writes
 * out there and must not lose them, but they are rare enough that the extra
 * hops and nodes are only paid by the files that use them.  Nothing below
 * 2^36 is ever in the high tree and nothing at or above 2^51 anywhere, so a
 * range to clear there may be widened to the whole tree.
 *
 * Blocks below EXTENT_TINY_FBLK (32: files up to 128 KiB) live in neither
 * tree but in m->tiny, one leaf of 32 entries (512 bytes).  Most files are
 * that small, and a whole low-tree path costs 20 KiB (three interior nodes
 * and a leaf): allocating and first touching that memory was a third of the
 * daemon's CPU time when tar extracted small files.  The low tree never
 * holds a block below 32, so like the high tree it may be cleared over a
 * widened range.  Runs (extent_walk) break at block 32 as at every leaf.
 *
 * Concurrency: a missing node is installed with compare-and-swap (the loser
 * frees its copy), so writers to disjoint ranges share no lock and readers
 * walk the tree without one.  Entries themselves are plain memory: the
 * caller's range lock keeps readers and writers of the same block apart.
 * Nodes are freed only by extent_clear()/extent_destroy() and only when the
 * node's whole span lies inside the cleared range, which the caller holds
 * exclusively, so nobody can be looking at a freed node.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "extent.h"
#include "extent_i.h"
#include "extpend.h"
#include "rangelock.h"

#define LVL_BITS 9
#define FAN (1u << LVL_BITS)
#define TOP_LOW 3		/* level of the low tree's root; leaves are level 0 */
#define TOP_HIGH 5		/* level of the high tree's root: 54 bits >= 51 */
#define NONE UINT64_MAX

/* Blocks covered by one node (or leaf) at level @lvl. */
static inline uint64_t span_of(int lvl)
{
	return 1ull << (LVL_BITS * (lvl + 1));
}

static inline unsigned slot_of(uint64_t fblk, int lvl)
{
	return (unsigned)(fblk >> (LVL_BITS * lvl)) & (FAN - 1);
}

static inline void *load_ptr(void *const *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

/* Install a zeroed node of @size bytes at *p unless one is there; the
 * node at *p, or NULL when out of memory. */
static void *install(void **p, size_t size)
{
	void *fresh = calloc(1, size);
	void *expected = NULL;

	if (!fresh)
		return NULL;
	if (__atomic_compare_exchange_n(p, &expected, fresh, false, __ATOMIC_ACQ_REL,
					__ATOMIC_ACQUIRE))
		return fresh;
	free(fresh);
	return expected;
}

/* The entry of @fblk (< EXTENT_MAX_FBLK) and in *room how many entries
 * from it on share its leaf; NULL when absent (and !create) or out of
 * memory. */
static struct extent_ent *get_ent(struct extent_map *m, uint64_t fblk, int create,
				  unsigned *room)
{
	bool low = fblk < EXTENT_LOW_FBLK;
	void **p = low ? &m->root : &m->high;

	if (fblk < EXTENT_TINY_FBLK) {
		struct extent_ent *tiny = load_ptr(&m->tiny);

		if (!tiny && create)
			tiny = install(&m->tiny, EXTENT_TINY_FBLK * sizeof(struct extent_ent));
		*room = EXTENT_TINY_FBLK - (unsigned)fblk;
		return tiny ? &tiny[fblk] : NULL;
	}
	for (int lvl = low ? TOP_LOW : TOP_HIGH;; lvl--) {
		void *node = load_ptr(p);
		if (!node) {
			if (!create)
				return NULL;
			node = install(p, lvl ? FAN * sizeof(void *)
					      : FAN * sizeof(struct extent_ent));
			if (!node)
				return NULL;
		}
		if (!lvl) {
			*room = FAN - slot_of(fblk, 0);
			return &((struct extent_ent *)node)[slot_of(fblk, 0)];
		}
		p = &((void **)node)[slot_of(fblk, lvl)];
	}
}

/* Coalesces dropped blocks into physical runs before calling drop. */
struct dropper {
	extent_drop_fn fn;
	void *ctx;
	uint64_t start, n;
};

static void drop_flush(struct dropper *d)
{
	if (d->n && d->fn)
		d->fn(d->ctx, d->start, d->n);
	d->n = 0;
}

static void drop_add(struct dropper *d, uint64_t phys)
{
	phys = EXTENT_PHYS(phys);
	if (d->n && phys == d->start + d->n) {
		d->n++;
		return;
	}
	drop_flush(d);
	d->start = phys;
	d->n = 1;
}

void extent_init(struct extent_map *m)
{
	m->tiny = NULL;
	m->root = NULL;
	m->high = NULL;
	atomic_init(&m->mapped, 0);
	m->xc = NULL;
	m->rl = NULL;
	m->ino = 0;
	m->dying = false;
	m->pend = NULL;
}

void extent_init_lazy(struct extent_map *m, struct extent_cache *xc, uint64_t ino,
		      struct rangelock *rl, uint64_t mapped, bool fresh)
{
	extent_init(m);
	m->xc = xc;
	m->rl = rl;
	m->ino = ino;
	atomic_init(&m->mapped, mapped);
	if (fresh) {
		m->tiny = EXT_EMPTY;
		m->root = EXT_EMPTY;
		m->high = EXT_EMPTY;
	}
}

void extent_count_mapped(struct extent_map *m, uint64_t n)
{
	atomic_fetch_add_explicit(&m->mapped, n, memory_order_relaxed);
}

static void mapped_add(struct extent_map *m, int64_t delta)
{
	if (delta > 0)
		atomic_fetch_add_explicit(&m->mapped, (uint64_t)delta, memory_order_relaxed);
	else if (delta < 0)
		atomic_fetch_sub_explicit(&m->mapped, (uint64_t)-delta, memory_order_relaxed);
}

int extent_set(struct extent_map *m, uint64_t fblk, uint32_t n, uint64_t phys,
	       const void *csums, extent_drop_fn drop, void *ctx)
{
	if (!n)
		return 0;
	if (fblk >= EXTENT_MAX_FBLK || n > EXTENT_MAX_FBLK - fblk)
		return -EFBIG;
	if (!EXTENT_PHYS(phys))
		return -EINVAL;
	if (m->xc) {
		int ret = extpend_apply(m, fblk, fblk + n);

		return ret ? ret : extlz_set(m, fblk, n, phys, csums, drop, ctx);
	}

	struct dropper d = { drop, ctx, 0, 0 };
	const unsigned char *cs = csums;
	int64_t delta = 0;
	int ret = 0;

	for (uint32_t i = 0; i < n;) {
		uint64_t f = fblk + i;
		unsigned room;
		struct extent_ent *e = get_ent(m, f, 1, &room);
		if (!e) {
			ret = -ENOMEM;
			break;
		}
		for (struct extent_ent *end = e + room; e < end && i < n; e++, i++) {
			uint64_t np = phys + i, c = 0;
			if (cs)
				memcpy(&c, cs + (size_t)i * sizeof(c), sizeof(c));
			/*
			 * The same physical block again (an unwritten block
			 * written in place) keeps its one reference: dropping
			 * it would free a block that is still mapped.
			 */
			if (e->phys && EXTENT_PHYS(e->phys) != EXTENT_PHYS(np))
				drop_add(&d, e->phys);
			else if (!e->phys)
				delta++;
			e->phys = np;
			e->csum = c;
		}
	}
	mapped_add(m, delta);
	drop_flush(&d);
	return ret;
}

int extent_set1(struct extent_map *m, uint64_t fblk, const struct extent_ent *e,
		extent_drop_fn drop, void *ctx)
{
	if (fblk >= EXTENT_MAX_FBLK)
		return -EFBIG;
	if (!e->phys)
		return extent_clear(m, fblk, 1, drop, ctx);
	return extent_set(m, fblk, 1, e->phys, &e->csum, drop, ctx);
}

/*
 * Clear [from, to) inside the node at *p (level @lvl, first block @base);
 * free the node when its whole span is cleared.  Returns the number of
 * entries that were mapped.
 */
static uint64_t clear_node(void **p, int lvl, uint64_t base, uint64_t from, uint64_t to,
			   struct dropper *d)
{
	void *node = load_ptr(p);
	uint64_t cleared = 0;

	if (!node)
		return 0;
	if (!lvl) {
		struct extent_ent *leaf = node;
		for (uint64_t j = from - base; j < to - base; j++) {
			if (leaf[j].phys) {
				drop_add(d, leaf[j].phys);
				cleared++;
			}
			leaf[j].phys = 0;
			leaf[j].csum = 0;
		}
	} else {
		uint64_t cs = span_of(lvl - 1);
		void **slots = node;
		for (uint64_t i = (from - base) / cs; i <= (to - 1 - base) / cs; i++) {
			uint64_t cb = base + i * cs;
			if (!load_ptr(&slots[i]))
				continue;
			cleared += clear_node(&slots[i], lvl - 1, cb, from > cb ? from : cb,
					      to < cb + cs ? to : cb + cs, d);
		}
	}
	if (from == base && to == base + span_of(lvl)) {
		__atomic_store_n(p, NULL, __ATOMIC_RELEASE);
		free(node);
	}
	return cleared;
}

/* Clear [from, to) of the tiny leaf, freeing it when that is all of it;
 * returns the number of entries that were mapped. */
static uint64_t clear_tiny(struct extent_map *m, uint64_t from, uint64_t to,
			   struct dropper *d)
{
	struct extent_ent *tiny = load_ptr(&m->tiny);
	uint64_t cleared = 0;

	if (!tiny)
		return 0;
	for (uint64_t j = from; j < to; j++) {
		if (tiny[j].phys) {
			drop_add(d, tiny[j].phys);
			cleared++;
		}
		tiny[j].phys = 0;
		tiny[j].csum = 0;
	}
	if (from == 0 && to == EXTENT_TINY_FBLK) {
		__atomic_store_n(&m->tiny, NULL, __ATOMIC_RELEASE);
		free(tiny);
	}
	return cleared;
}

int extent_clear(struct extent_map *m, uint64_t fblk, uint64_t n, extent_drop_fn drop,
		 void *ctx)
{
	if (fblk >= EXTENT_MAX_FBLK || !n)
		return 0;
	if (m->xc) {
		int ret = extpend_apply(m, fblk, n > EXTENT_MAX_FBLK - fblk ? EXTENT_MAX_FBLK
									: fblk + n);

		return ret ? ret : extlz_clear(m, fblk, n, drop, ctx, false);
	}
	uint64_t to = n > EXTENT_MAX_FBLK - fblk ? EXTENT_MAX_FBLK : fblk + n;
	struct dropper d = { drop, ctx, 0, 0 };
	uint64_t cleared = 0;

	if (fblk < EXTENT_TINY_FBLK)
		cleared += clear_tiny(m, fblk, to < EXTENT_TINY_FBLK ? to : EXTENT_TINY_FBLK, &d);
	/* The low tree is widened over the tiny leaf's blocks likewise. */
	if (fblk < EXTENT_LOW_FBLK && to > EXTENT_TINY_FBLK)
		cleared += clear_node(&m->root, TOP_LOW, 0, fblk <= EXTENT_TINY_FBLK ? 0 : fblk,
				      to < EXTENT_LOW_FBLK ? to : EXTENT_LOW_FBLK, &d);
	if (to > EXTENT_LOW_FBLK) {
		/* Widened over what the high tree never holds, so a clear to
		 * the end frees its nodes (and its root) too. */
		uint64_t lo = fblk <= EXTENT_LOW_FBLK ? 0 : fblk;
		uint64_t hi = to == EXTENT_MAX_FBLK ? span_of(TOP_HIGH) : to;

		cleared += clear_node(&m->high, TOP_HIGH, 0, lo, hi, &d);
	}

	mapped_add(m, -(int64_t)cleared);
	drop_flush(&d);
	return 0;
}

void extent_destroy(struct extent_map *m, extent_drop_fn drop, void *ctx)
{
	if (m->xc) {
		struct rl_range r;
		bool lock = drop && m->pend && m->rl;

		/* A file deleted drops its blocks as the records left them;
		 * memory torn down (no drop) accounts nothing.  Applying them
		 * reads leaves in under interior nodes that only the range
		 * lock keeps the evictor off (extcache.c inner_evict): held
		 * shared, as every user of the map holds it.  Nobody else
		 * holds it: the file has no name and no open left. */
		if (lock)
			rl_lock(m->rl, &r, 0, RL_EOF, false);
		(void)extpend_release(m, drop != NULL);
		if (lock)
			rl_unlock(m->rl, &r);
		(void)extlz_clear(m, 0, EXTENT_MAX_FBLK, drop, ctx, true);
	}
	else
		extent_clear(m, 0, EXTENT_MAX_FBLK, drop, ctx);
	extent_init(m);
}

int extent_lookup(const struct extent_map *m, uint64_t fblk, struct extent_ent *out)
{
	struct extent_ent *e = NULL;
	unsigned room;

	if (m->xc) {
		int ret = fblk < EXTENT_MAX_FBLK ? extpend_apply((struct extent_map *)m, fblk,
								   fblk + 1) : 0;

		if (ret) {
			out->phys = 0;
			out->csum = 0;
			return ret;
		}
		return extlz_lookup((struct extent_map *)m, fblk, out);
	}
	if (fblk < EXTENT_MAX_FBLK)
		e = get_ent((struct extent_map *)m, fblk, 0, &room);
	if (e) {
		*out = *e;
		if (out->phys)
			return 0;
	}
	out->phys = 0;
	out->csum = 0;
	return -ENOENT;
}

void extent_get(const struct extent_map *m, uint64_t fblk, struct extent_ent *out)
{
	(void)extent_lookup(m, fblk, out);
}

/*
 * Call fn for every present leaf meeting [from, to) in file order with the
 * part [lo, hi) of it in range; stops at fn's first nonzero return.
 */
typedef int (*leaf_fn)(void *arg, const struct extent_ent *leaf, uint64_t base,
		       uint64_t lo, uint64_t hi);

static int visit(void *node, int lvl, uint64_t base, uint64_t from, uint64_t to,
		 leaf_fn fn, void *arg)
{
	if (!lvl)
		return fn(arg, node, base, from, to);
	uint64_t cs = span_of(lvl - 1);
	void **slots = node;
	for (uint64_t i = (from - base) / cs; i <= (to - 1 - base) / cs; i++) {
		void *child = load_ptr(&slots[i]);
		uint64_t cb = base + i * cs;
		if (!child)
			continue;
		int r = visit(child, lvl - 1, cb, from > cb ? from : cb,
			      to < cb + cs ? to : cb + cs, fn, arg);
		if (r)
			return r;
	}
	return 0;
}

static int visit_map(const struct extent_map *m, uint64_t from, uint64_t to, leaf_fn fn,
		     void *arg)
{
	void *tiny = load_ptr((void *const *)&m->tiny);
	void *root = load_ptr((void *const *)&m->root);
	void *high = load_ptr((void *const *)&m->high);
	int r = 0;

	if (to > EXTENT_MAX_FBLK)
		to = EXTENT_MAX_FBLK;
	if (from >= to)
		return 0;
	if (tiny && from < EXTENT_TINY_FBLK)
		r = fn(arg, tiny, 0, from, to < EXTENT_TINY_FBLK ? to : EXTENT_TINY_FBLK);
	if (from < EXTENT_TINY_FBLK)
		from = EXTENT_TINY_FBLK;
	if (!r && root && from < EXTENT_LOW_FBLK && from < to)
		r = visit(root, TOP_LOW, 0, from, to < EXTENT_LOW_FBLK ? to : EXTENT_LOW_FBLK,
			  fn, arg);
	if (!r && high && to > EXTENT_LOW_FBLK)
		r = visit(high, TOP_HIGH, 0, from > EXTENT_LOW_FBLK ? from : EXTENT_LOW_FBLK,
			  to, fn, arg);
	return r;
}

static int first_data(void *arg, const struct extent_ent *leaf, uint64_t base, uint64_t lo,
		      uint64_t hi)
{
	for (uint64_t f = lo; f < hi; f++) {
		if (leaf[f - base].phys) {
			*(uint64_t *)arg = f;
			return 1;
		}
	}
	return 0;
}

uint64_t extent_next_data(const struct extent_map *m, uint64_t fblk)
{
	uint64_t found = EXTENT_MAX_FBLK;

	if (m->xc) {
		if (extpend_apply((struct extent_map *)m, fblk, EXTENT_MAX_FBLK))
			return fblk;	/* the lookup there fails too */
		return extlz_next_data((struct extent_map *)m, fblk);
	}
	visit_map(m, fblk, EXTENT_MAX_FBLK, first_data, &found);
	return found;
}

/* First hole >= from inside the node at level lvl starting at base, or NONE. */
static uint64_t hole_in(void *node, int lvl, uint64_t base, uint64_t from)
{
	if (!node)
		return from;
	if (!lvl) {
		const struct extent_ent *leaf = node;
		for (uint64_t j = from - base; j < FAN; j++)
			if (!leaf[j].phys)
				return base + j;
		return NONE;
	}
	uint64_t cs = span_of(lvl - 1);
	void **slots = node;
	for (uint64_t i = (from - base) / cs; i < FAN; i++) {
		uint64_t cb = base + i * cs;
		uint64_t r = hole_in(load_ptr(&slots[i]), lvl - 1, cb, from > cb ? from : cb);
		if (r != NONE)
			return r;
	}
	return NONE;
}

uint64_t extent_next_hole(const struct extent_map *m, uint64_t fblk)
{
	uint64_t r = NONE;

	if (fblk >= EXTENT_MAX_FBLK)
		return EXTENT_MAX_FBLK;
	if (m->xc) {
		if (extpend_apply((struct extent_map *)m, fblk, EXTENT_MAX_FBLK))
			return fblk;
		return extlz_next_hole((struct extent_map *)m, fblk);
	}
	if (fblk < EXTENT_TINY_FBLK) {
		const struct extent_ent *tiny = load_ptr((void *const *)&m->tiny);

		for (; fblk < EXTENT_TINY_FBLK; fblk++)
			if (!tiny || !tiny[fblk].phys)
				return fblk;
	}
	if (fblk < EXTENT_LOW_FBLK)
		r = hole_in(load_ptr((void *const *)&m->root), TOP_LOW, 0, fblk);
	if (r == NONE)
		r = hole_in(load_ptr((void *const *)&m->high), TOP_HIGH, 0,
			    fblk > EXTENT_LOW_FBLK ? fblk : EXTENT_LOW_FBLK);
	return r == NONE || r > EXTENT_MAX_FBLK ? EXTENT_MAX_FBLK : r;
}

struct walk_arg {
	extent_run_fn cb;
	void *ctx;
};

/* Runs never cross a leaf, so ents always points at n contiguous entries. */
static int walk_leaf(void *arg, const struct extent_ent *leaf, uint64_t base, uint64_t lo,
		     uint64_t hi)
{
	struct walk_arg *w = arg;
	uint64_t f = lo;

	while (f < hi) {
		const struct extent_ent *e = &leaf[f - base];
		if (!e->phys) {
			f++;
			continue;
		}
		uint64_t n = 1;
		while (f + n < hi) {
			uint64_t p = e[n].phys;
			if (!p || p != e->phys + n)
				break;	/* same flag and consecutive phys in one compare */
			n++;
		}
		int r = w->cb(w->ctx, f, e->phys, (uint32_t)n, e);
		if (r)
			return r;
		f += n;
	}
	return 0;
}

int extent_walk_applied(const struct extent_map *m, uint64_t from, uint64_t to,
			extent_run_fn cb, void *ctx)
{
	struct walk_arg w = { cb, ctx };

	if (m->xc)
		return extlz_walk((struct extent_map *)m, from, to, cb, ctx);
	return visit_map(m, from, to, walk_leaf, &w);
}

int extent_walk(const struct extent_map *m, uint64_t from, uint64_t to, extent_run_fn cb,
		void *ctx)
{
	int ret = m->xc ? extpend_apply((struct extent_map *)m, from, to) : 0;

	return ret ? ret : extent_walk_applied(m, from, to, cb, ctx);
}

int extent_resident(struct extent_map *m, uint64_t from, uint64_t to, extent_piece_fn cb,
		    void *ctx)
{
	if (to > EXTENT_MAX_FBLK)
		to = EXTENT_MAX_FBLK;
	if (from >= to)
		return 0;
	if (m->xc) {
		/* A checkpoint writes what memory holds: the records pending
		 * in the range go in first (their leaves become resident).
		 * They are in its set (the replay noted each), so they are
		 * its epoch's changes (the one it took: one checkpoint at a
		 * time), clean when it commits: stamped with the current
		 * epoch, the leaves would stay to the next checkpoint. */
		int ret;

		if (m->pend)
			extlz_stamp_as(atomic_load(&m->xc->epoch) - 1);
		ret = extpend_apply(m, from, to);
		extlz_stamp_as(0);

		return ret ? ret : extlz_resident(m, from, to, cb, ctx);
	}
	return cb(ctx, from, to);
}
