// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * extent_lazy: a file's map as a cache of its EXTENT items (format v2;
 * extcache.h).  The radix trees of extent.c with a third state per slot:
 * NULL is "not resident" (the tree knows), EXT_EMPTY "resident and all
 * holes" (no node), anything else a node.  Interior nodes are installed as
 * in extent.c (compare-and-swap) and freed by a clear that covers them,
 * or (level 1, one per GiB of span) by the evictor with their last leaf
 * (extcache.c inner_evict); leaves are read in by the first user
 * (extent_set, extent_lookup, the edges of a clear), installed with
 * compare-and-swap (the loser of a race frees its copy: only users of the
 * same leaf meet) and evicted by extcache.c when clean.  Walks, SEEK_DATA/SEEK_HOLE and whole-leaf clears
 * ask the source for every stretch that is not resident (consecutive ones
 * as one call) and read nothing in.
 *
 * Every read of the source goes through src_walk/src_next: the checkpoint
 * rewrites the items of the ranges the map holds while readers (shared
 * range locks, as the checkpoint's) read the items around them, and an
 * item cut or joined there passes through states that are wrong for the
 * blocks outside.  A read that met such a change (extcache_src_changing)
 * is redone from where it was; one that starts during it waits.
 *
 * The tiny leaf (blocks below EXTENT_TINY_FBLK) is a plain array as in
 * extent.c, read in like a leaf but never evicted.
 *
 * A leaf slot may hold a compact leaf (extent_i.h): users that need the
 * entries (lookups, sets, a clear of part of it) expand it in place, walks
 * read a copy of it, a clear of all of it drops its runs.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "extent_i.h"
#include "tfs.h"

#define TINY_BYTES (EXTENT_TINY_FBLK * sizeof(struct extent_ent))

/* The part of [lo, hi) that tree @top (EXT_TOP_LOW/HIGH, or -1: tiny)
 * holds: the trees' ranges were widened in extent.c, never the source's. */
static void clamp(int top, uint64_t *lo, uint64_t *hi)
{
	uint64_t a = top < 0 ? 0 : top == EXT_TOP_LOW ? EXTENT_TINY_FBLK : EXTENT_LOW_FBLK;
	uint64_t b = top < 0 ? EXTENT_TINY_FBLK : top == EXT_TOP_LOW ? EXTENT_LOW_FBLK
								     : EXTENT_MAX_FBLK;

	if (*lo < a)
		*lo = a;
	if (*hi > b)
		*hi = b;
	if (*hi < *lo)
		*hi = *lo;
}

/* Nonzero: the epoch this thread's changes are stamped with instead of
 * the current one (extlz_stamp_as). */
static __thread uint64_t stamp_as;

void extlz_stamp_as(uint64_t epoch)
{
	stamp_as = epoch;
}

static uint64_t stamp_epoch(struct extent_map *m)
{
	return stamp_as ? stamp_as : atomic_load(&m->xc->epoch);
}

static void stamp(struct extent_map *m, struct ext_leaf *l)
{
	uint64_t e = stamp_epoch(m), cur = atomic_load(&l->stamp);

	while (cur < e && !atomic_compare_exchange_weak(&l->stamp, &cur, e))
		;
}

static void stamp_inner(struct extent_map *m, struct ext_inner *n)
{
	uint64_t e = stamp_epoch(m), cur = atomic_load(&n->stamp);

	while (cur < e && !atomic_compare_exchange_weak(&n->stamp, &cur, e))
		;
}

/* ---- reading the source: redone where a change met it ---- */

struct srcw {
	struct extent_cache *xc;
	uint64_t ino, stamp;
	uint64_t done;			/* runs before this were passed on */
	extent_run_fn cb;
	void *ctx;
	bool again;			/* the items changed: walk again from done */
	bool stopped;			/* cb's nonzero value ends the walk */
};

/* A run of the source, passed on (from where the walk is: a walk redone
 * meets the start of its item again) if no change began since the walk
 * did: then it, and the holes before it, are as the items were. */
static int srcw_run(void *ctx, uint64_t fblk, uint64_t phys, uint32_t n,
		    const struct extent_ent *ents)
{
	struct srcw *w = ctx;
	uint64_t skip;
	int ret;

	if (!extcache_src_same(w->xc, w->ino, w->stamp)) {
		w->again = true;
		return 1;
	}
	if (fblk + n <= w->done)
		return 0;
	skip = fblk < w->done ? w->done - fblk : 0;
	w->done = fblk + n;
	ret = w->cb(w->ctx, fblk + skip, phys + skip, (uint32_t)(n - skip), ents + skip);
	w->stopped = ret != 0;
	return ret;
}

/* The source's runs of file @ino in [lo, hi), each once and in order, as
 * the items were between changes (extcache_src_changing). */
static int src_walk(struct extent_cache *xc, uint64_t ino, uint64_t lo, uint64_t hi,
		    extent_run_fn cb, void *ctx)
{
	struct srcw w = { .xc = xc, .ino = ino, .done = lo, .cb = cb, .ctx = ctx };
	int ret;

	for (;;) {
		w.stamp = extcache_src_begin(xc, ino);
		w.again = false;
		ret = xc->src.walk(xc->src.ctx, ino, w.done, hi, srcw_run, &w);
		/* No run after a change began: the end (or the error) seen
		 * may still be the change's. */
		if (!w.again && (w.stopped || extcache_src_same(xc, ino, w.stamp)))
			return ret;
	}
}

/* SEEK_DATA (@data) or SEEK_HOLE of the source, as for src_walk. */
static int src_next(struct extent_cache *xc, uint64_t ino, uint64_t fblk, bool data,
		    uint64_t *out)
{
	for (;;) {
		uint64_t stamp = extcache_src_begin(xc, ino);
		int ret = data ? xc->src.next_data(xc->src.ctx, ino, fblk, out)
			       : xc->src.next_hole(xc->src.ctx, ino, fblk, out);

		if (extcache_src_same(xc, ino, stamp))
			return ret;
	}
}

/* ---- reading a leaf in ---- */

struct fill {
	struct extent_ent *ents;
	uint64_t base, cap, n;
};

static int fill_run(void *ctx, uint64_t fblk, uint64_t phys, uint32_t n,
		    const struct extent_ent *ents)
{
	struct fill *f = ctx;

	(void)phys;
	if (fblk < f->base || fblk - f->base > f->cap || n > f->cap - (fblk - f->base))
		return -EUCLEAN;	/* a run the walk was not asked for */
	memcpy(&f->ents[fblk - f->base], ents, n * sizeof(*ents));
	f->n += n;
	return 0;
}

/*
 * Read the leaf of *p (span [base, base + size), of tree @top) in from the
 * source and install it unless somebody else installed something first;
 * a leaf holding nothing becomes EXT_EMPTY.  0 or -errno (nothing
 * installed).
 */
static int fault(struct extent_map *m, void **p, uint64_t base, int top)
{
	struct extent_cache *xc = m->xc;
	size_t size = top < 0 ? TINY_BYTES : sizeof(struct ext_leaf);
	uint64_t lo = base, hi = base + (top < 0 ? EXTENT_TINY_FBLK : EXT_FAN);
	struct fill f = { .base = base, .cap = top < 0 ? EXTENT_TINY_FBLK : EXT_FAN };
	void *expected = NULL;
	int ret;

	/* The tree read may wait out a checkpoint's commit (the tree lock):
	 * a /dev/fuse reader hands its turn on first. */
	tfs_may_block();
	f.ents = calloc(1, size);
	if (!f.ents)
		return -ENOMEM;
	clamp(top, &lo, &hi);
	ret = src_walk(xc, m->ino, lo, hi, fill_run, &f);
	if (ret) {
		free(f.ents);
		atomic_fetch_add(&xc->fault_errors, 1);
		return ret < 0 ? ret : -EIO;
	}
	atomic_fetch_add(&xc->faults, 1);
	if (!f.n) {
		free(f.ents);
		atomic_fetch_add(&xc->empty_faults, 1);
		__atomic_compare_exchange_n(p, &expected, EXT_EMPTY, false, __ATOMIC_ACQ_REL,
					    __ATOMIC_ACQUIRE);
		return 0;
	}
	if (top >= 0) {
		struct ext_leaf *l = (struct ext_leaf *)f.ents;

		l->m = m;
		l->slot = p;
		l->base = base;
	}
	if (!__atomic_compare_exchange_n(p, &expected, f.ents, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		free(f.ents);
		return 0;
	}
	if (top >= 0)
		extcache_leaf_in(xc, (struct ext_leaf *)f.ents);
	return 0;
}

/* A new interior node, its slots all @fill, stamped @stamp; NULL: -ENOMEM. */
static struct ext_inner *inner_new(void *fill, uint64_t stamp)
{
	struct ext_inner *n = malloc(sizeof(*n));

	if (!n)
		return NULL;
	for (unsigned i = 0; i < EXT_FAN; i++)
		n->s[i] = fill;
	atomic_init(&n->stamp, stamp);
	return n;
}

/* Install interior node @n at *p if it still holds @expected (else free
 * it: somebody else installed one); counted with the cache. */
static void inner_install(struct extent_map *m, void **p, void *expected, struct ext_inner *n)
{
	if (!__atomic_compare_exchange_n(p, &expected, n, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE))
		free(n);
	else
		atomic_fetch_add(&m->xc->inner, 1);
}

/* Replace EXT_EMPTY at *p by a node of holes (interior: of EXT_EMPTY
 * slots, as dirty as the slot was, so stamped now; a leaf listed with the
 * cache). */
static int unempty(struct extent_map *m, void **p, int lvl, uint64_t base, int top)
{
	void *fresh, *expected = EXT_EMPTY;

	if (top >= 0 && lvl) {
		struct ext_inner *n = inner_new(EXT_EMPTY, atomic_load(&m->xc->epoch));

		if (!n)
			return -ENOMEM;
		inner_install(m, p, EXT_EMPTY, n);
		return 0;
	}
	fresh = calloc(1, top < 0 ? TINY_BYTES : sizeof(struct ext_leaf));
	if (!fresh)
		return -ENOMEM;
	if (top >= 0) {
		struct ext_leaf *l = fresh;

		l->m = m;
		l->slot = p;
		l->base = base;
	}
	if (!__atomic_compare_exchange_n(p, &expected, fresh, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		free(fresh);
		return 0;
	}
	if (top >= 0)
		extcache_leaf_in(m->xc, fresh);
	return 0;
}

/* A missing interior node at *p: an empty one (its children not resident). */
static int install_interior(struct extent_map *m, void **p)
{
	struct ext_inner *n = inner_new(NULL, 0);

	if (!n)
		return -ENOMEM;
	inner_install(m, p, NULL, n);
	return 0;
}

/*
 * The resident entries of block @fblk's leaf: *ents (the leaf's first
 * entry is block *base) and *cap entries in it.  Reads the leaf in when it
 * is not resident.  Returns 0, 1 when the block is a known hole without a
 * leaf (only when !create: with create, holes get a leaf), or -errno.
 */
static int get_leaf(struct extent_map *m, uint64_t fblk, bool create, struct extent_ent **ents,
		    uint64_t *base, unsigned *cap)
{
	bool low = fblk < EXTENT_LOW_FBLK, tiny = fblk < EXTENT_TINY_FBLK;
	int top = tiny ? -1 : low ? EXT_TOP_LOW : EXT_TOP_HIGH;
	void **p = tiny ? &m->tiny : low ? &m->root : &m->high;
	int ret = 0;

	for (int lvl = tiny ? 0 : top; !ret;) {
		void *node = ext_load(p);
		uint64_t b = lvl ? 0 : tiny ? 0 : fblk & ~(uint64_t)(EXT_FAN - 1);

		if (node == EXT_EMPTY) {
			if (!create)
				return 1;
			ret = unempty(m, p, lvl, b, top);
		} else if (ext_is_compact(node)) {
			ret = extcache_expand(m->xc, p, node);
		} else if (!node) {
			ret = lvl ? install_interior(m, p) : fault(m, p, b, top);
		} else if (lvl) {
			p = &((void **)node)[ext_slot(fblk, lvl)];
			lvl--;
		} else {
			*ents = node;
			*base = b;
			*cap = tiny ? EXTENT_TINY_FBLK : EXT_FAN;
			if (!tiny)
				atomic_store_explicit(&((struct ext_leaf *)node)->ref, true,
						      memory_order_relaxed);
			return 0;
		}
	}
	return ret;
}

int extlz_lookup(struct extent_map *m, uint64_t fblk, struct extent_ent *out)
{
	struct extent_ent *ents;
	uint64_t base;
	unsigned cap;
	int ret = fblk < EXTENT_MAX_FBLK ? get_leaf(m, fblk, false, &ents, &base, &cap) : 1;

	if (ret == 0) {
		*out = ents[fblk - base];
		if (out->phys)
			return 0;
	}
	out->phys = 0;
	out->csum = 0;
	return ret < 0 ? ret : -ENOENT;
}

int extlz_set(struct extent_map *m, uint64_t fblk, uint32_t n, uint64_t phys,
	      const void *csums, extent_drop_fn drop, void *ctx)
{
	struct ext_dropper d = { drop, ctx, 0, 0 };
	const unsigned char *cs = csums;
	int64_t delta = 0;
	int ret = 0;

	for (uint32_t i = 0; i < n;) {
		uint64_t f = fblk + i, base;
		struct extent_ent *ents, *e, *end;
		unsigned cap;

		ret = get_leaf(m, f, true, &ents, &base, &cap);
		if (ret)
			break;
		for (e = &ents[f - base], end = ents + cap; e < end && i < n; e++, i++) {
			uint64_t np = phys + i, c = 0;

			if (cs)
				memcpy(&c, cs + (size_t)i * sizeof(c), sizeof(c));
			/* The same physical block again keeps its reference. */
			if (e->phys && EXTENT_PHYS(e->phys) != EXTENT_PHYS(np))
				ext_drop_run(&d, e->phys, 1);
			else if (!e->phys)
				delta++;
			e->phys = np;
			e->csum = c;
		}
		if (f >= EXTENT_TINY_FBLK)
			stamp(m, (struct ext_leaf *)ents);
	}
	ext_mapped_add(m, delta);
	ext_drop_flush(&d);
	return ret;
}

/* ---- clear ---- */

struct clr {
	struct extent_map *m;
	struct ext_dropper d;
	uint64_t cleared;
	int top;			/* tree being cleared (clamp) */
	bool destroy;			/* map going away: no source reads without drop */
};

static int src_drop_run(void *ctx, uint64_t fblk, uint64_t phys, uint32_t n,
			const struct extent_ent *ents)
{
	struct clr *c = ctx;

	(void)fblk;
	(void)ents;
	ext_drop_run(&c->d, phys, n);
	c->cleared += n;
	return 0;
}

/* Blocks [lo, hi) that are not resident: the tree's, dropped and counted. */
static int src_drop(struct clr *c, uint64_t lo, uint64_t hi)
{
	struct extent_cache *xc = c->m->xc;

	if (c->destroy && !c->d.fn)
		return 0;
	clamp(c->top, &lo, &hi);
	if (lo >= hi)
		return 0;
	int ret = src_walk(xc, c->m->ino, lo, hi, src_drop_run, c);

	/* A map going away does not stop: blocks it could not read leak
	 * (fsck finds them) rather than stay mapped by nothing. */
	return c->destroy ? 0 : ret;
}

static void clear_ents(struct clr *c, struct extent_ent *ents, uint64_t from, uint64_t to)
{
	for (uint64_t j = from; j < to; j++) {
		if (ents[j].phys) {
			ext_drop_run(&c->d, ents[j].phys, 1);
			c->cleared++;
		}
		ents[j].phys = 0;
		ents[j].csum = 0;
	}
}

/* A whole leaf (or the tiny one) at *p goes: EXT_EMPTY in its place,
 * which the tree lacks until a checkpoint: its level-1 node is stamped. */
static int clear_whole_leaf(struct clr *c, void **p, uint64_t base, uint64_t hi)
{
	void *l;

	if (c->top < 0) {
		l = __atomic_exchange_n(p, EXT_EMPTY, __ATOMIC_ACQ_REL);
	} else {
		stamp_inner(c->m, inner_of(p, base));
		l = extcache_leaf_take(c->m->xc, p, EXT_EMPTY);
	}
	if (l == EXT_EMPTY)
		return 0;
	if (ext_is_compact(l)) {	/* out of the cache now: its runs */
		struct ext_compact *cp = ext_compact_of(l);

		for (uint32_t r = 0; r < cp->nruns; r++) {
			ext_drop_run(&c->d, cp->r[r].phys, cp->r[r].n);
			c->cleared += cp->r[r].n;
		}
		free(cp);
		return 0;
	}
	if (!l) {	/* not resident (evicted meanwhile): the tree's */
		int ret = src_drop(c, base, hi);

		if (ret == 0)
			__atomic_store_n(p, EXT_EMPTY, __ATOMIC_RELEASE);
		return ret;
	}
	clear_ents(c, l, 0, hi - base);
	free(l);
	return 0;
}

/*
 * Clear [from, to) inside the slot *p (level @lvl, first block @base).  A
 * span cleared whole becomes EXT_EMPTY (its nodes freed, what was not
 * resident dropped from the tree's view); a leaf cut at an edge is read in.
 */
static int clear_node(struct clr *c, void **p, int lvl, uint64_t base, uint64_t from,
		      uint64_t to)
{
	uint64_t span = c->top < 0 ? EXTENT_TINY_FBLK : ext_span(lvl);
	bool whole = from == base && to == base + span;
	void *node = ext_load(p);
	int ret = 0;

	if (node == EXT_EMPTY)
		return 0;
	if (!lvl && whole)
		return clear_whole_leaf(c, p, base, base + span);
	if (!lvl) {
		/* Cut at an edge: read in (the caller's range lock keeps it). */
		while (ext_is_compact(node)) {
			ret = extcache_expand(c->m->xc, p, node);
			if (ret)
				return ret;
			node = ext_load(p);
		}
		if (!node) {
			ret = fault(c->m, p, base, c->top);
			node = ext_load(p);
			if (ret || node == EXT_EMPTY)
				return ret;
		}
		clear_ents(c, node, from - base, to - base);
		if (c->top >= 0)
			stamp(c->m, node);
		return 0;
	}
	if (!node && whole) {
		ret = src_drop(c, from, to);
		if (ret == 0)
			__atomic_store_n(p, EXT_EMPTY, __ATOMIC_RELEASE);
		return ret;
	}
	if (!node) {
		ret = install_interior(c->m, p);
		node = ext_load(p);
	}
	uint64_t cs = ext_span(lvl - 1);
	void **slots = node;

	for (uint64_t i = (from - base) / cs; ret == 0 && i <= (to - 1 - base) / cs; i++) {
		uint64_t cb = base + i * cs;

		ret = clear_node(c, &slots[i], lvl - 1, cb, from > cb ? from : cb,
				 to < cb + cs ? to : cb + cs);
	}
	if (ret == 0 && whole) {
		__atomic_store_n(p, EXT_EMPTY, __ATOMIC_RELEASE);
		inner_free(c->m->xc, node);
	}
	return ret;
}

int extlz_clear(struct extent_map *m, uint64_t fblk, uint64_t n, extent_drop_fn drop, void *ctx,
		bool destroy)
{
	uint64_t to = n > EXTENT_MAX_FBLK - fblk ? EXTENT_MAX_FBLK : fblk + n;
	struct clr c = { .m = m, .d = { drop, ctx, 0, 0 }, .destroy = destroy };
	int ret = 0;

	/* The evictor frees interior nodes under xc->mu, without the range
	 * lock a destroy does not take: from here on it leaves them to us. */
	if (destroy) {
		pthread_mutex_lock(&m->xc->mu);
		m->dying = true;
		pthread_mutex_unlock(&m->xc->mu);
	}

	if (fblk < EXTENT_TINY_FBLK) {
		c.top = -1;
		ret = clear_node(&c, &m->tiny, 0, 0, fblk,
				 to < EXTENT_TINY_FBLK ? to : EXTENT_TINY_FBLK);
	}
	/* Widened as in extent.c: the trees hold nothing outside their range. */
	if (ret == 0 && fblk < EXTENT_LOW_FBLK && to > EXTENT_TINY_FBLK) {
		c.top = EXT_TOP_LOW;
		ret = clear_node(&c, &m->root, EXT_TOP_LOW, 0, fblk <= EXTENT_TINY_FBLK ? 0 : fblk,
				 to < EXTENT_LOW_FBLK ? to : EXTENT_LOW_FBLK);
	}
	if (ret == 0 && to > EXTENT_LOW_FBLK) {
		c.top = EXT_TOP_HIGH;
		ret = clear_node(&c, &m->high, EXT_TOP_HIGH, 0,
				 fblk <= EXTENT_LOW_FBLK ? 0 : fblk,
				 to == EXTENT_MAX_FBLK ? ext_span(EXT_TOP_HIGH) : to);
	}
	ext_mapped_add(m, -(int64_t)c.cleared);
	ext_drop_flush(&c.d);
	return ret;
}

/* ---- visiting a range: resident leaves, empty spans, the rest ---- */

struct lzv;
typedef int (*lzv_leaf_fn)(struct lzv *v, const struct extent_ent *ents, uint64_t base,
			   uint64_t lo, uint64_t hi);
typedef int (*lzv_span_fn)(struct lzv *v, uint64_t lo, uint64_t hi);

/* What to call for each part of the range, in file order; a callback's
 * nonzero value stops the visit and is returned.  Consecutive parts that
 * are not resident are merged into one call of nonres. */
struct lzv {
	struct extent_map *m;
	lzv_leaf_fn leaf;
	lzv_span_fn empty;		/* may be NULL */
	lzv_span_fn nonres;
	uint64_t plo, phi;		/* not resident, not yet passed on */
	/* for the callers */
	extent_run_fn cb;
	extent_piece_fn piece;
	void *ctx;
	uint64_t found;
	uint64_t qlo, qhi;		/* resident piece not yet passed on */
	struct extent_ent *copy;	/* EXT_FAN: a compact leaf's entries */
	bool shape_only;		/* leaf ignores the entries (resident) */
};

static int lzv_flush(struct lzv *v)
{
	uint64_t lo = v->plo, hi = v->phi;

	v->plo = v->phi = 0;
	return hi > lo ? v->nonres(v, lo, hi) : 0;
}

static int lzv_nonres(struct lzv *v, uint64_t lo, uint64_t hi)
{
	int r = 0;

	if (v->phi > v->plo && v->phi == lo) {
		v->phi = hi;
		return 0;
	}
	r = lzv_flush(v);
	v->plo = lo;
	v->phi = hi;
	return r;
}

/* The slot @p, a leaf's, holds the compact leaf @node: its entries to
 * the leaf callback; *moved when the slot no longer held it. */
static int lzv_compact(struct lzv *v, void **p, void *node, uint64_t base, uint64_t from,
		       uint64_t to, bool *moved)
{
	*moved = false;
	/* Resident either way, compact or expanded, and the caller's range
	 * lock keeps it from being dropped (trim_compact tries it): no copy. */
	if (v->shape_only)
		return v->leaf(v, NULL, base, from, to);
	if (!v->copy) {
		v->copy = malloc(EXT_FAN * sizeof(*v->copy));
		if (!v->copy)
			return -ENOMEM;
	}
	/* Expanded or dropped meanwhile: what the slot holds now. */
	if (extcache_compact_read(v->m->xc, p, node, v->copy)) {
		*moved = true;
		return 0;
	}
	return v->leaf(v, v->copy, base, from, to);
}

static int lzv_node(struct lzv *v, void **p, int lvl, uint64_t base, uint64_t from,
		    uint64_t to)
{
	void *node = ext_load(p);
	int r;

	if (!node)
		return lzv_nonres(v, from, to);
	r = lzv_flush(v);
	if (r)
		return r;
	if (node == EXT_EMPTY)
		return v->empty ? v->empty(v, from, to) : 0;
	if (ext_is_compact(node)) {
		bool moved;

		r = lzv_compact(v, p, node, base, from, to, &moved);
		return moved ? lzv_node(v, p, lvl, base, from, to) : r;
	}
	if (!lvl)
		return v->leaf(v, node, base, from, to);

	uint64_t cs = ext_span(lvl - 1);
	void **slots = node;

	for (uint64_t i = (from - base) / cs; i <= (to - 1 - base) / cs; i++) {
		uint64_t cb = base + i * cs;

		r = lzv_node(v, &slots[i], lvl - 1, cb, from > cb ? from : cb,
			     to < cb + cs ? to : cb + cs);
		if (r)
			return r;
	}
	return 0;
}

static int lzv_map_(struct lzv *v, uint64_t from, uint64_t to)
{
	struct extent_map *m = v->m;
	int r = 0;

	if (to > EXTENT_MAX_FBLK)
		to = EXTENT_MAX_FBLK;
	if (from >= to)
		return 0;
	if (from < EXTENT_TINY_FBLK)
		r = lzv_node(v, &m->tiny, 0, 0, from,
			     to < EXTENT_TINY_FBLK ? to : EXTENT_TINY_FBLK);
	if (from < EXTENT_TINY_FBLK)
		from = EXTENT_TINY_FBLK;
	if (!r && from < EXTENT_LOW_FBLK && from < to)
		r = lzv_node(v, &m->root, EXT_TOP_LOW, 0, from,
			     to < EXTENT_LOW_FBLK ? to : EXTENT_LOW_FBLK);
	if (!r && to > EXTENT_LOW_FBLK)
		r = lzv_node(v, &m->high, EXT_TOP_HIGH, 0,
			     from > EXTENT_LOW_FBLK ? from : EXTENT_LOW_FBLK, to);
	return r ? r : lzv_flush(v);
}

static int lzv_map(struct lzv *v, uint64_t from, uint64_t to)
{
	int r = lzv_map_(v, from, to);

	free(v->copy);
	v->copy = NULL;
	return r;
}

/* walk */

static int walk_leaf(struct lzv *v, const struct extent_ent *leaf, uint64_t base, uint64_t lo,
		     uint64_t hi)
{
	for (uint64_t f = lo; f < hi;) {
		const struct extent_ent *e = &leaf[f - base];
		uint64_t n = 1;
		int r;

		if (!e->phys) {
			f++;
			continue;
		}
		while (f + n < hi && e[n].phys && e[n].phys == e->phys + n)
			n++;
		r = v->cb(v->ctx, f, e->phys, (uint32_t)n, e);
		if (r)
			return r;
		f += n;
	}
	return 0;
}

static int walk_nonres(struct lzv *v, uint64_t lo, uint64_t hi)
{
	struct extent_cache *xc = v->m->xc;

	return src_walk(xc, v->m->ino, lo, hi, v->cb, v->ctx);
}

int extlz_walk(struct extent_map *m, uint64_t from, uint64_t to, extent_run_fn cb, void *ctx)
{
	struct lzv v = { .m = m, .leaf = walk_leaf, .nonres = walk_nonres, .cb = cb, .ctx = ctx };

	return lzv_map(&v, from, to);
}

/* next data / next hole: an error of the source answers "here" (the
 * lookup of that block then fails rather than data be skipped) */

static int data_leaf(struct lzv *v, const struct extent_ent *leaf, uint64_t base, uint64_t lo,
		     uint64_t hi)
{
	for (uint64_t f = lo; f < hi; f++) {
		if (leaf[f - base].phys) {
			v->found = f;
			return 1;
		}
	}
	return 0;
}

static int data_nonres(struct lzv *v, uint64_t lo, uint64_t hi)
{
	struct extent_cache *xc = v->m->xc;
	uint64_t d = lo;

	if (src_next(xc, v->m->ino, lo, true, &d) || d < lo)
		d = lo;
	if (d >= hi)
		return 0;
	v->found = d;
	return 1;
}

uint64_t extlz_next_data(struct extent_map *m, uint64_t fblk)
{
	struct lzv v = { .m = m, .leaf = data_leaf, .nonres = data_nonres,
			 .found = EXTENT_MAX_FBLK };

	lzv_map(&v, fblk, EXTENT_MAX_FBLK);
	return v.found;
}

static int hole_leaf(struct lzv *v, const struct extent_ent *leaf, uint64_t base, uint64_t lo,
		     uint64_t hi)
{
	for (uint64_t f = lo; f < hi; f++) {
		if (!leaf[f - base].phys) {
			v->found = f;
			return 1;
		}
	}
	return 0;
}

static int hole_empty(struct lzv *v, uint64_t lo, uint64_t hi)
{
	(void)hi;
	v->found = lo;
	return 1;
}

static int hole_nonres(struct lzv *v, uint64_t lo, uint64_t hi)
{
	struct extent_cache *xc = v->m->xc;
	uint64_t h = lo;

	if (src_next(xc, v->m->ino, lo, false, &h) || h < lo)
		h = lo;
	if (h >= hi)
		return 0;
	v->found = h;
	return 1;
}

uint64_t extlz_next_hole(struct extent_map *m, uint64_t fblk)
{
	struct lzv v = { .m = m, .leaf = hole_leaf, .empty = hole_empty, .nonres = hole_nonres,
			 .found = EXTENT_MAX_FBLK };

	lzv_map(&v, fblk, EXTENT_MAX_FBLK);
	return v.found;
}

/* resident pieces (the checkpoint's) */

static int piece_leaf(struct lzv *v, const struct extent_ent *leaf, uint64_t base, uint64_t lo,
		      uint64_t hi)
{
	(void)leaf;
	(void)base;
	return v->empty(v, lo, hi);
}

static int piece_span(struct lzv *v, uint64_t lo, uint64_t hi)
{
	if (v->qhi > v->qlo && v->qhi == lo) {
		v->qhi = hi;
		return 0;
	}
	int r = v->qhi > v->qlo ? v->piece(v->ctx, v->qlo, v->qhi) : 0;

	v->qlo = lo;
	v->qhi = hi;
	return r;
}

static int piece_nonres(struct lzv *v, uint64_t lo, uint64_t hi)
{
	(void)v;
	(void)lo;
	(void)hi;
	return 0;
}

int extlz_resident(struct extent_map *m, uint64_t from, uint64_t to, extent_piece_fn cb,
		   void *ctx)
{
	struct lzv v = { .m = m, .leaf = piece_leaf, .empty = piece_span, .nonres = piece_nonres,
			 .piece = cb, .ctx = ctx, .shape_only = true };
	int r = lzv_map(&v, from, to);

	return r ? r : v.qhi > v.qlo ? cb(ctx, v.qlo, v.qhi) : 0;
}

