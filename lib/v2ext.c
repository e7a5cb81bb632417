// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * v2ext: a file's extent map as EXTENT items of a format-v2 tree (see
 * v2ext.h for the rules).  Everything is built on three steps through the
 * tree's public calls: the item holding a block (the last key <= it, by
 * iterating backwards from the key after it), the items starting in a
 * range (iterating forwards), and writing one item.  An item is decoded
 * into a struct xitem (its csums copied out of the iterator's leaf), so
 * the tree may change while we hold it.
 */
#include <errno.h>
#include <stdlib.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "extcache.h"
#include "v2ext.h"
#include "v2item.h"

/* One decoded item. */
struct xitem {
	uint64_t off;			/* first file block (the key's off) */
	uint64_t phys;			/* first physical block, no flag */
	uint64_t n;
	bool unwritten;
	uint64_t csums[V2_EXT_MAX_BLOCKS];	/* host order; written items only */
};

#define VAL_MAX (V2_EXT_HDR + 8u * V2_EXT_MAX_BLOCKS)

static uint64_t xend(const struct xitem *x)
{
	return x->off + x->n;
}

static uint64_t min64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static uint64_t item_max(bool unwritten)
{
	return unwritten ? V2EXT_UNWRITTEN_MAX : V2_EXT_MAX_BLOCKS;
}

static bool is_ext(const struct bkey *k, uint64_t ino)
{
	return k->id == ino && k->type == V2_EXTENT;
}

static int load(const struct bkey *k, const void *val, unsigned len, struct xitem *x)
{
	struct v2_extent e;
	int ret = v2_extent_decode(k, val, len, &e);

	if (ret)
		return ret;
	x->off = k->off;
	x->phys = e.phys;
	x->n = e.n;
	x->unwritten = e.unwritten;
	for (unsigned i = 0; !e.unwritten && i < e.n; i++)
		x->csums[i] = v2_extent_csum(&e, i);
	return 0;
}

static int store(struct btree *t, uint64_t ino, const struct xitem *x)
{
	uint8_t val[VAL_MAX];
	struct v2_extent e = { x->phys, (uint32_t)x->n, x->unwritten, x->csums };
	struct bkey k = v2_key_extent(ino, x->off);
	unsigned len;
	int ret = v2_extent_encode(x->off, &e, val, sizeof(val), &len);

	return ret ? ret : bt_insert(t, &k, val, len);
}

/* @out = blocks [from, to) of @x. */
static void slice(const struct xitem *x, uint64_t from, uint64_t to, struct xitem *out)
{
	out->off = from;
	out->phys = x->phys + (from - x->off);
	out->n = to - from;
	out->unwritten = x->unwritten;
	if (!x->unwritten)
		memmove(out->csums, x->csums + (from - x->off), out->n * sizeof(uint64_t));
}

/* The next item of the file starting below @to: 1 and *x, 0 past them. */
static int scan_next(struct bt_iter *it, uint64_t ino, uint64_t to, struct xitem *x)
{
	struct bkey k;
	const void *v;
	unsigned len;
	int ret = bt_iter_next(it, &k, &v, &len);

	if (ret == -ENOENT)
		return 0;
	if (ret)
		return ret;
	if (!is_ext(&k, ino) || k.off >= to)
		return 0;
	ret = load(&k, v, len, x);
	return ret ? ret : 1;
}

/* Open @it at key (ino, from) and read the item before it: 1 and *x when
 * that item holds from, 2 and *x when it is the file's and ends at or
 * before from, 0 otherwise.  The iterator's next item is then the first
 * at or after from.  The caller frees @it whatever this returns. */
static int head_item(struct bt_iter *it, struct btree *t, uint64_t ino, uint64_t from,
		     struct xitem *x)
{
	struct bkey start = v2_key_extent(ino, from), k;
	const void *v;
	unsigned len;
	int ret = bt_iter_init(it, t, &start);

	x->off = x->n = 0;
	if (!ret)
		ret = bt_iter_prev(it, &k, &v, &len);
	if (ret == -ENOENT || (!ret && !is_ext(&k, ino)))
		return 0;
	if (!ret)
		ret = load(&k, v, len, x);
	return ret ? ret : xend(x) > from ? 1 : 2;
}

/* The item holding block @f (< EXTENT_MAX_FBLK): 1 and *x, 0 for a hole. */
static int floor_item(struct btree *t, uint64_t ino, uint64_t f, struct xitem *x)
{
	struct bt_iter it;
	int ret = head_item(&it, t, ino, f + 1, x);

	bt_iter_free(&it);
	return ret <= 0 ? ret : xend(x) > f;
}

/* Call fn for every item meeting [from, to) with the part [a, b) inside. */
typedef int (*visit_fn)(void *arg, const struct xitem *x, uint64_t a, uint64_t b);

static int visit(struct btree *t, uint64_t ino, uint64_t from, uint64_t to, visit_fn fn,
		 void *arg)
{
	struct xitem x;
	struct bt_iter it;
	int ret;

	if (to > EXTENT_MAX_FBLK)
		to = EXTENT_MAX_FBLK;
	if (from >= to)
		return 0;
	ret = head_item(&it, t, ino, from, &x);
	if (ret == 1) {
		ret = fn(arg, &x, from, min64(xend(&x), to));
		from = min64(xend(&x), to);
	} else if (ret > 0) {
		ret = 0;
	}
	/* An iterator that lost its leaf to a change re-finds its place by
	 * key: an item changed meanwhile may start before @from.  Parts are
	 * passed on in order, never twice (the caller's range lock or
	 * extcache's change rule keep the items it relies on). */
	while (!ret && (ret = scan_next(&it, ino, to, &x)) == 1) {
		if (xend(&x) <= from)
			continue;
		ret = fn(arg, &x, x.off > from ? x.off : from, min64(xend(&x), to));
		from = min64(xend(&x), to);
	}
	bt_iter_free(&it);
	return ret;
}

/* ---- lookups ---- */

int v2ext_lookup(struct btree *t, uint64_t ino, uint64_t fblk, struct extent_ent *out)
{
	struct xitem x;
	int ret;

	out->phys = 0;
	out->csum = 0;
	if (fblk >= EXTENT_MAX_FBLK)
		return -ENOENT;
	ret = floor_item(t, ino, fblk, &x);
	if (ret <= 0)
		return ret ? ret : -ENOENT;
	out->phys = (x.phys + (fblk - x.off)) | (x.unwritten ? EXTENT_UNWRITTEN : 0);
	out->csum = x.unwritten ? 0 : x.csums[fblk - x.off];
	return 0;
}

static int first_start(void *arg, const struct xitem *x, uint64_t a, uint64_t b)
{
	(void)x;
	(void)b;
	*(uint64_t *)arg = a;
	return 1;
}

int v2ext_next_data(struct btree *t, uint64_t ino, uint64_t fblk, uint64_t *out)
{
	int ret;

	*out = EXTENT_MAX_FBLK;
	ret = visit(t, ino, fblk, EXTENT_MAX_FBLK, first_start, out);
	return ret < 0 ? ret : 0;
}

/* Follows items while each starts where the previous one ended. */
static int contiguous(void *arg, const struct xitem *x, uint64_t a, uint64_t b)
{
	uint64_t *f = arg;

	if (a != *f)
		return 1;
	(void)x;
	*f = b;
	return 0;
}

int v2ext_next_hole(struct btree *t, uint64_t ino, uint64_t fblk, uint64_t *out)
{
	int ret;

	*out = fblk < EXTENT_MAX_FBLK ? fblk : EXTENT_MAX_FBLK;
	ret = visit(t, ino, *out, EXTENT_MAX_FBLK, contiguous, out);
	return ret < 0 ? ret : 0;
}

struct walk_arg {
	extent_run_fn cb;
	void *ctx;
};

static int walk_item(void *arg, const struct xitem *x, uint64_t a, uint64_t b)
{
	struct walk_arg *w = arg;
	struct extent_ent ents[V2_EXT_MAX_BLOCKS];
	uint64_t flag = x->unwritten ? EXTENT_UNWRITTEN : 0;

	while (a < b) {
		uint32_t k = (uint32_t)min64(b - a, V2_EXT_MAX_BLOCKS);
		uint64_t i0 = a - x->off;
		int ret;

		for (uint32_t i = 0; i < k; i++) {
			ents[i].phys = (x->phys + i0 + i) | flag;
			ents[i].csum = x->unwritten ? 0 : x->csums[i0 + i];
		}
		ret = w->cb(w->ctx, a, ents[0].phys, k, ents);
		if (ret)
			return ret;
		a += k;
	}
	return 0;
}

int v2ext_walk(struct btree *t, uint64_t ino, uint64_t from, uint64_t to, extent_run_fn cb,
	       void *ctx)
{
	struct walk_arg w = { cb, ctx };

	return visit(t, ino, from, to, walk_item, &w);
}

static int count_item(void *arg, const struct xitem *x, uint64_t a, uint64_t b)
{
	(void)x;
	*(uint64_t *)arg += b - a;
	return 0;
}

int v2ext_count(struct btree *t, uint64_t ino, uint64_t from, uint64_t to, uint64_t *n)
{
	*n = 0;
	return visit(t, ino, from, to, count_item, n);
}

/* ---- changes ---- */

/* What a punch replaces [from, to) with: nothing (nphys 0) or the run a
 * set maps there, whose blocks are not dropped where they are the same. */
struct punch {
	extent_drop_fn drop;
	void *ctx;
	uint64_t nfblk, nphys;
	uint64_t removed;		/* mapped blocks unmapped */
	bool have_left;
	struct xitem left;		/* ends at from after the punch */
};

/* Blocks [a, b) of @x are unmapped. */
static void gone(struct punch *p, const struct xitem *x, uint64_t a, uint64_t b)
{
	uint64_t op = x->phys + (a - x->off);

	p->removed += b - a;
	/* Both runs are linear, so they share every block or none. */
	if (p->nphys && op == p->nphys + (a - p->nfblk))
		return;
	if (p->drop)
		p->drop(p->ctx, op, b - a);
}

/* Unmap [from, to): cut the item holding from, delete the ones starting
 * inside, cut the last one at to.  p->left gets the item that ends at from
 * afterwards, if any (the one a set may join). */
static int punch(struct btree *t, uint64_t ino, uint64_t from, uint64_t to, struct punch *p)
{
	struct xitem x, tail;
	struct bt_iter it;
	struct bkey k;
	bool done = false;
	int ret = head_item(&it, t, ino, from, &x);

	if (ret == 1) {
		uint64_t end = xend(&x);

		gone(p, &x, from, min64(end, to));
		ret = 0;
		if (end > to) {
			slice(&x, to, end, &tail);
			ret = store(t, ino, &tail);
		}
		x.n = from - x.off;
		if (!ret)
			ret = store(t, ino, &x);
		done = end >= to;
	}
	if (ret > 0) {
		ret = 0;
		p->have_left = xend(&x) == from;
		p->left = x;
	}
	while (!ret && !done && (ret = scan_next(&it, ino, to, &x)) == 1) {
		uint64_t end = xend(&x);

		gone(p, &x, x.off, min64(end, to));
		k = v2_key_extent(ino, x.off);
		ret = bt_delete(t, &k);
		if (!ret && end > to) {
			slice(&x, to, end, &tail);
			ret = store(t, ino, &tail);
		}
		done = end >= to;
	}
	bt_iter_free(&it);
	return ret;
}

/* @x ends where [f, ...) at @phys of this kind starts, and has room. */
static bool joins(const struct xitem *x, uint64_t f, uint64_t phys, bool unwritten)
{
	return xend(x) == f && x->phys + x->n == phys && x->unwritten == unwritten &&
	       x->n < item_max(unwritten);
}

/* The item at @f, if any, joins the end of *pend whole: absorb it. */
static int merge_next(struct btree *t, uint64_t ino, uint64_t f, struct xitem *pend)
{
	struct bkey k = v2_key_extent(ino, f);
	uint8_t val[VAL_MAX];
	struct xitem nx;
	unsigned len;
	int ret;

	if (f >= EXTENT_MAX_FBLK)
		return 0;
	ret = bt_lookup(t, &k, val, sizeof(val), &len);
	if (ret)
		return ret == -ENOENT ? 0 : ret;
	ret = load(&k, val, len, &nx);
	if (ret || !joins(pend, f, nx.phys, nx.unwritten) ||
	    pend->n + nx.n > item_max(nx.unwritten))
		return ret;
	if (!nx.unwritten)
		memcpy(pend->csums + pend->n, nx.csums, nx.n * sizeof(uint64_t));
	pend->n += nx.n;
	return bt_delete(t, &k);
}

/* Write [fblk, fblk+n) -> phys into the hole punch left: items of at most
 * the limit, the first one continuing the item before when it joins. */
static int place(struct btree *t, uint64_t ino, uint64_t fblk, uint64_t n, uint64_t phys,
		 bool unwritten, const uint8_t *csums, struct punch *pu)
{
	uint64_t max = item_max(unwritten);
	struct xitem *pend = &pu->left;	/* the item before, when it joins */
	bool have = pu->have_left && joins(pend, fblk, phys, unwritten);
	int ret;

	for (uint64_t i = 0; i < n;) {
		uint64_t k;

		if (!have) {
			pend->off = fblk + i;
			pend->phys = phys + i;
			pend->n = 0;
			pend->unwritten = unwritten;
			have = true;
		}
		k = min64(max - pend->n, n - i);
		if (!unwritten && csums)
			memcpy(pend->csums + pend->n, csums + i * 8, k * 8);
		else if (!unwritten)
			memset(pend->csums + pend->n, 0, k * 8);
		pend->n += k;
		i += k;
		if (i < n) {		/* full: the rest starts a new item */
			ret = store(t, ino, pend);
			if (ret)
				return ret;
			have = false;
		}
	}
	ret = merge_next(t, ino, fblk + n, pend);
	return ret ? ret : store(t, ino, pend);
}

int v2ext_set(struct btree *t, uint64_t ino, uint64_t fblk, uint32_t n, uint64_t phys,
	      const void *csums, extent_drop_fn drop, void *ctx, int64_t *dmapped)
{
	bool unwritten = phys & EXTENT_UNWRITTEN;
	uint64_t p0 = EXTENT_PHYS(phys);
	struct punch pu = { .drop = drop, .ctx = ctx, .nfblk = fblk, .nphys = p0 };
	int ret;

	if (dmapped)
		*dmapped = 0;
	if (!n)
		return 0;
	if (fblk >= EXTENT_MAX_FBLK || n > EXTENT_MAX_FBLK - fblk)
		return -EFBIG;
	if (!ino || !p0 || p0 >= V2_PHYS_LIMIT || n > V2_PHYS_LIMIT - p0)
		return -EINVAL;	/* items no decoder would take back */
	ret = punch(t, ino, fblk, fblk + n, &pu);
	if (!ret)
		ret = place(t, ino, fblk, n, p0, unwritten, csums, &pu);
	if (!ret && dmapped)
		*dmapped = (int64_t)n - (int64_t)pu.removed;
	return ret;
}

int v2ext_clear(struct btree *t, uint64_t ino, uint64_t fblk, uint64_t n, extent_drop_fn drop,
		void *ctx, int64_t *dmapped)
{
	struct punch pu = { .drop = drop, .ctx = ctx };
	uint64_t to;
	int ret;

	if (dmapped)
		*dmapped = 0;
	if (fblk >= EXTENT_MAX_FBLK || !n)
		return 0;
	to = n > EXTENT_MAX_FBLK - fblk ? EXTENT_MAX_FBLK : fblk + n;
	ret = punch(t, ino, fblk, to, &pu);
	if (!ret && dmapped)
		*dmapped = -(int64_t)pu.removed;
	return ret;
}

/* The source of the files' map leaves (extcache.h): their EXTENT items. */
static int src_walk(void *ctx, uint64_t ino, uint64_t from, uint64_t to, extent_run_fn cb,
		    void *cbctx)
{
	return v2ext_walk(ctx, ino, from, to, cb, cbctx);
}

static int src_next_data(void *ctx, uint64_t ino, uint64_t fblk, uint64_t *out)
{
	return v2ext_next_data(ctx, ino, fblk, out);
}

static int src_next_hole(void *ctx, uint64_t ino, uint64_t fblk, uint64_t *out)
{
	return v2ext_next_hole(ctx, ino, fblk, out);
}

/* The leaves holding the items of the ranges, up to SRC_AHEAD_LEAVES of
 * them read at once (bt_prefetch_ranges).  The item holding a range's
 * first block may start in the leaf before: the lookup reads that one. */
#define SRC_AHEAD_LEAVES 128	/* extpend's 64 map leaves: one tree leaf each, or two */

static int src_prefetch(void *ctx, uint64_t ino, const uint64_t *lo, const uint64_t *hi, size_t n)
{
	struct bkey *k = malloc(2 * n * sizeof(*k));
	int ret;

	if (!k)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		k[i] = v2_key_extent(ino, lo[i]);
		k[n + i] = v2_key_extent(ino, hi[i] - 1);
	}
	ret = bt_prefetch_ranges(ctx, k, k + n, n, SRC_AHEAD_LEAVES);
	free(k);
	return ret;
}

void v2ext_source(struct btree *t, struct extent_src *src)
{
	*src = (struct extent_src){ t, src_walk, src_next_data, src_next_hole, src_prefetch };
}
