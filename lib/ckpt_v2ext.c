// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ckpt_v2ext: a checkpoint's EXTENT items of one changed range of a file
 * (ckpt_v2_put_extents, ckpt_v2.h), out of ckpt_v2.c so that file stays
 * the checkpoint's order: where the map holds the range in memory, the
 * blocks whose mapping (physical block, unwritten flag, csum) differs from
 * the tree's items are cut out and the map's runs written in, each block's
 * reference following in the accounting.  Blocks the tree already maps as
 * the map does keep their items: random writes over a whole file change
 * every chunk but few blocks, and a checkpoint rewriting all of its items
 * held the file's range lock for hundreds of milliseconds.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_v2.h"
#include "btree.h"
#include "ckpt_v2.h"
#include "extcache.h"
#include "extent.h"
#include "v2ext.h"
#include "v2item.h"

struct put_ext {
	struct btree *t;
	struct alloc_v2 *av;
	uint64_t ino;
	struct extent_map *map;
	uint64_t *csums;		/* V2_EXT_MAX_BLOCKS */
	int err;			/* of an accounting change in put_drop */
	int64_t dmapped;		/* change of the blocks the items map */
	bool all;			/* rewrite every block (no compare) */
	uint64_t kept, rewritten;	/* mapped blocks left, blocks written */
	struct extent_ent *tw, *mw;	/* PUT_WIN blocks: the tree's, the map's */
	uint64_t ahead_to;		/* put_piece read ahead to here */
};

/* Blocks compared at a time. */
#define PUT_WIN 1024u

/* Blocks an item's cut or delete unmapped lose their reference. */
static void put_drop(void *ctx, uint64_t phys, uint64_t n)
{
	struct put_ext *p = ctx;
	int ret = p->av ? alloc_v2_ref(p->av, phys, n, -1) : 0;

	if (ret && !p->err)
		p->err = ret;
}

/* One run of the map into the hole put_piece made, through v2ext_set: it
 * continues the item before when file and physical blocks join (and the
 * one after, whole), so a contiguous run is one item however the map's
 * leaves and the checkpoints cut it (written: at most V2_EXT_MAX_BLOCKS
 * blocks an item, their csums; unwritten: up to V2EXT_UNWRITTEN_MAX). */
static int put_run(void *ctx, uint64_t fblk, uint64_t phys, uint32_t n,
		   const struct extent_ent *ents)
{
	struct put_ext *p = ctx;
	bool unwritten = (phys & EXTENT_UNWRITTEN) != 0;

	for (uint32_t off = 0; off < n; ) {
		uint32_t k = n - off;
		int64_t d = 0;
		int ret;

		if (!unwritten && k > V2_EXT_MAX_BLOCKS)
			k = V2_EXT_MAX_BLOCKS;
		for (uint32_t i = 0; !unwritten && i < k; i++)
			p->csums[i] = ents[off + i].csum;
		ret = v2ext_set(p->t, p->ino, fblk + off, k, phys + off,
				unwritten ? NULL : p->csums, put_drop, p, &d);
		p->dmapped += d;
		if (ret == 0)
			ret = p->err;
		if (ret == 0 && p->av)
			ret = alloc_v2_ref(p->av, EXTENT_PHYS(phys) + off, k, +1);
		if (ret)
			return ret;
		off += k;
	}
	return 0;
}

/* Blocks [from, to) the map holds in memory: the tree's items there cut
 * out (v2ext_clear: an item reaching in from either side is cut at the
 * edge), then the map's runs written into the hole. */
static int put_range(struct put_ext *p, uint64_t from, uint64_t to)
{
	struct extent_cache *xc = p->map->xc;
	int64_t d = 0;
	int ret;

	if (from >= to)
		return 0;
	if (!p->all)
		p->rewritten += to - from;
	/* Items reaching out of the range are cut and joined: readers of
	 * the blocks around it (shared range locks, as ours is) wait. */
	if (xc)
		extcache_src_changing(xc, p->ino);
	ret = v2ext_clear(p->t, p->ino, from, to - from, put_drop, p, &d);
	p->dmapped += d;
	if (ret == 0)
		ret = p->err;
	if (ret == 0)
		ret = extent_walk_applied(p->map, from, to, put_run, p);
	if (xc)
		extcache_src_changed(xc, p->ino);
	return ret;
}

/*
 * Read-ahead of the tree's leaves under the pieces: put_piece looks up the
 * tree's items window by window, and a leaf the cache lost was read then,
 * one at a time.  The pieces are taken AHEAD_PIECES at a time, the leaves
 * under them (the first AHEAD_BLOCKS of each) read together
 * (bt_prefetch_ranges: up to AHEAD_LEAVES, by the caller and the
 * read-ahead pool), then the pieces written; put_piece reads ahead the
 * rest of a longer piece AHEAD_BLOCKS at a time.  Best effort: a leaf it
 * did not read is read by the lookup.
 */
#define AHEAD_PIECES 128u
#define AHEAD_BLOCKS 65536u
#define AHEAD_LEAVES 256u	/* scattered pieces: a leaf each, or more */

/* The leaves under blocks [f, f + AHEAD_BLOCKS) of a long piece. */
static void put_ahead(struct put_ext *p, uint64_t f, uint64_t to)
{
	uint64_t e = to - f > AHEAD_BLOCKS ? f + AHEAD_BLOCKS : to;
	struct bkey lo = v2_key_extent(p->ino, f), hi = v2_key_extent(p->ino, e - 1);

	(void)bt_prefetch_range(p->t, &lo, &hi, AHEAD_LEAVES);
	p->ahead_to = e;
}

struct win {
	struct extent_ent *e;
	uint64_t w0;
};

/* A run of the tree or the map into its window (walks are bounded by it). */
static int win_run(void *ctx, uint64_t fblk, uint64_t phys, uint32_t n,
		   const struct extent_ent *ents)
{
	struct win *w = ctx;

	(void)phys;
	memcpy(w->e + (fblk - w->w0), ents, n * sizeof(*ents));
	return 0;
}

static int first_run(void *ctx, uint64_t fblk, uint64_t phys, uint32_t n,
		     const struct extent_ent *ents)
{
	(void)phys;
	(void)n;
	(void)ents;
	*(uint64_t *)ctx = fblk;
	return 1;
}

/* The first block >= @f below @to either the tree or the map maps (@to
 * when none): the blocks before it are holes in both. */
static int next_data(struct put_ext *p, uint64_t f, uint64_t to, uint64_t *out)
{
	uint64_t nm = to, nt;
	int ret = v2ext_next_data(p->t, p->ino, f, &nt);

	if (ret == 0) {
		ret = extent_walk_applied(p->map, f, to, first_run, &nm);
		ret = ret == 1 ? 0 : ret;
	}
	*out = nt < nm ? nt : nm;
	return ret;
}

/* Block @i of the window the same in the tree and the map: the same
 * physical block with the same flag, the same csum (both 0 for a hole and
 * for an unwritten block). */
static bool same(const struct put_ext *p, uint32_t i)
{
	return p->tw[i].phys == p->mw[i].phys && p->tw[i].csum == p->mw[i].csum;
}

/* One part of the range the map holds in memory: compared with the tree's
 * items a window at a time, and only the maximal runs of blocks that
 * differ rewritten (put_range), so unchanged blocks keep their items and
 * their references (the drop and the +1 a rewrite makes cancel) and no
 * leaf is copied for them.  A rewrite of [a, b) changes no block outside
 * it (a cut item's tail keeps its mapping), so the windows after it read
 * the tree as it was. */
static int put_piece(void *ctx, uint64_t from, uint64_t to)
{
	struct put_ext *p = ctx;
	uint64_t ds = from, de = from;	/* blocks that differ, not yet written */
	int ret = 0;

	if (p->all)
		return put_range(p, from, to);
	for (uint64_t f = from; ret == 0 && f < to;) {
		struct win tw = { p->tw, 0 }, mw = { p->mw, 0 };
		uint64_t e;

		ret = next_data(p, f, to, &f);
		if (ret || f >= to)
			break;
		if (f >= from + AHEAD_BLOCKS && f >= p->ahead_to)
			put_ahead(p, f, to);
		e = to - f > PUT_WIN ? f + PUT_WIN : to;
		tw.w0 = mw.w0 = f;
		memset(p->tw, 0, PUT_WIN * sizeof(*p->tw));
		memset(p->mw, 0, PUT_WIN * sizeof(*p->mw));
		ret = v2ext_walk(p->t, p->ino, f, e, win_run, &tw);
		if (ret == 0)
			ret = extent_walk_applied(p->map, f, e, win_run, &mw);
		for (; ret == 0 && f < e; f++) {
			if (same(p, (uint32_t)(f - tw.w0))) {
				p->kept += p->tw[f - tw.w0].phys != 0;
				continue;
			}
			if (f != de) {
				ret = put_range(p, ds, de);
				ds = f;
			}
			de = f + 1;
		}
	}
	return ret ? ret : put_range(p, ds, de);
}

struct ahead {
	uint64_t ino;
	struct bkey *lo, *hi;		/* AHEAD_PIECES */
	size_t n;
	uint64_t end;			/* where the pieces taken end */
};

#define AHEAD_FULL 1			/* ahead_piece's stop (not an errno) */

static int ahead_piece(void *ctx, uint64_t from, uint64_t to)
{
	struct ahead *a = ctx;

	a->lo[a->n] = v2_key_extent(a->ino, from);
	a->hi[a->n] = v2_key_extent(a->ino, to - from > AHEAD_BLOCKS ? from + AHEAD_BLOCKS - 1 : to - 1);
	a->n++;
	a->end = to;
	return a->n == AHEAD_PIECES ? AHEAD_FULL : 0;
}

/* The pieces of [from, to), AHEAD_PIECES at a time, their leaves read
 * ahead of put_piece. */
static int put_pieces(struct put_ext *p, uint64_t from, uint64_t to)
{
	struct ahead a = { .ino = p->ino };
	int ret = 0;

	a.lo = malloc(AHEAD_PIECES * sizeof(*a.lo));
	a.hi = malloc(AHEAD_PIECES * sizeof(*a.hi));
	if (!a.lo || !a.hi) {	/* no read-ahead then */
		free(a.lo);
		free(a.hi);
		return extent_resident(p->map, from, to, put_piece, p);
	}
	while (ret == 0 && from < to) {
		a.n = 0;
		a.end = to;
		ret = extent_resident(p->map, from, to, ahead_piece, &a);
		if (ret == AHEAD_FULL)
			ret = 0;
		else if (ret == 0)
			a.end = to;	/* every piece to the end taken */
		if (ret == 0 && a.n > 0)
			(void)bt_prefetch_ranges(p->t, a.lo, a.hi, a.n, AHEAD_LEAVES);
		if (ret == 0)
			ret = extent_resident(p->map, from, a.end, put_piece, p);
		from = a.end;
	}
	free(a.lo);
	free(a.hi);
	return ret;
}

static int put_extents(struct btree *t, struct alloc_v2 *av, uint64_t ino,
		       struct extent_map *map, uint64_t from, uint64_t to, int64_t *dmapped,
		       struct ckpt_v2_putcount *pc, bool all)
{
	struct put_ext p = { .t = t, .av = av, .ino = ino, .map = map, .all = all };
	int ret = 0;

	*dmapped = 0;
	if (from >= EXTENT_MAX_FBLK)
		return 0;
	if (to > EXTENT_MAX_FBLK)
		to = EXTENT_MAX_FBLK;
	p.csums = malloc(V2_EXT_MAX_BLOCKS * sizeof(*p.csums));
	p.tw = malloc(PUT_WIN * sizeof(*p.tw));
	p.mw = malloc(PUT_WIN * sizeof(*p.mw));
	if (!p.csums || !p.tw || !p.mw)
		ret = -ENOMEM;
	if (ret == 0)
		ret = put_pieces(&p, from, to);
	free(p.csums);
	free(p.tw);
	free(p.mw);
	*dmapped = p.dmapped;
	if (pc) {
		pc->kept += p.kept;
		pc->rewritten += p.rewritten;
	}
	return ret;
}

/* Items are rewritten where the map holds the blocks in memory (its
 * changed leaves stay resident until this checkpoint: extcache.h) and
 * differs from them; the rest of the range the tree already holds as it
 * is. */
int ckpt_v2_put_extents(struct btree *t, struct alloc_v2 *av, uint64_t ino,
			struct extent_map *map, uint64_t from, uint64_t to, int64_t *dmapped,
			struct ckpt_v2_putcount *pc)
{
	return put_extents(t, av, ino, map, from, to, dmapped, pc, false);
}

int ckpt_v2_put_extents_all(struct btree *t, struct alloc_v2 *av, uint64_t ino,
			    struct extent_map *map, uint64_t from, uint64_t to, int64_t *dmapped,
			    struct ckpt_v2_putcount *pc)
{
	return put_extents(t, av, ino, map, from, to, dmapped, pc, true);
}
