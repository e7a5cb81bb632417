// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ckpt_v2ext: a checkpoint's EXTENT items of one changed range of a file
 * (ckpt_v2_put_extents, ckpt_v2.h), out of ckpt_v2.c so that file stays
 * the checkpoint's order: the tree's items where the map holds the range
 * in memory are cut out and the map's runs written in, each block's
 * reference following in the accounting.
 */
#include <errno.h>
#include <stdlib.h>

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
};

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

/* One part of the range the map holds in memory: the tree's items there
 * cut out (v2ext_clear: an item reaching in from either side is cut at
 * the edge), then the map's runs written into the hole. */
static int put_piece(void *ctx, uint64_t from, uint64_t to)
{
	struct put_ext *p = ctx;
	struct extent_cache *xc = p->map->xc;
	int64_t d = 0;
	int ret;

	/* Items reaching out of the piece are cut and joined: readers of
	 * the blocks around it (shared range locks, as ours is) wait. */
	if (xc)
		extcache_src_changing(xc, p->ino);
	ret = v2ext_clear(p->t, p->ino, from, to - from, put_drop, p, &d);
	p->dmapped += d;
	if (ret == 0)
		ret = p->err;
	if (ret == 0)
		ret = extent_walk(p->map, from, to, put_run, p);
	if (xc)
		extcache_src_changed(xc, p->ino);
	return ret;
}

/* Items are rewritten where the map holds the blocks in memory (its
 * changed leaves stay resident until this checkpoint: extcache.h); the
 * rest of the range the tree already holds as it is. */
int ckpt_v2_put_extents(struct btree *t, struct alloc_v2 *av, uint64_t ino,
			struct extent_map *map, uint64_t from, uint64_t to, int64_t *dmapped)
{
	struct put_ext p = { .t = t, .av = av, .ino = ino, .map = map };
	int ret = 0;

	*dmapped = 0;
	if (from >= EXTENT_MAX_FBLK)
		return 0;
	if (to > EXTENT_MAX_FBLK)
		to = EXTENT_MAX_FBLK;
	p.csums = malloc(V2_EXT_MAX_BLOCKS * sizeof(*p.csums));
	if (!p.csums)
		ret = -ENOMEM;
	if (ret == 0)
		ret = extent_resident(map, from, to, put_piece, &p);
	free(p.csums);
	*dmapped = p.dmapped;
	return ret;
}
