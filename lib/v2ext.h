/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * v2ext: a file's extent map in format v2, as EXTENT items (ino, 8, first
 * file block) of the inodes tree (docs/FORMAT.md, "Extents"): the
 * operations of extent.h on a struct btree instead of a map in RAM.  Every
 * call reads the items through the tree (its bounded node cache), so the
 * memory it takes does not grow with the file or the file system.
 *
 * Items of one file never overlap.  A written item maps 1..256 blocks with
 * one checksum each, an unwritten one (fallocate) up to 2^32 - 1 blocks with
 * none.  A set or clear splits the items it cuts at either end (a new item
 * at the cut), deletes the ones it covers, and a set writes its run as items
 * of at most the limit, merged with the item just before it and the one just
 * after it when file and physical blocks are contiguous, the kind (written
 * or unwritten) is the same and the result stays within the limit (the
 * following item only whole).  So a sequential write in 4 KiB pieces makes
 * one item per 1 MiB, and the cost of a call follows the items in its range
 * plus its two neighbours, never the file.
 *
 * Changes go into the open transaction of @t (bt_begin; the caller commits).
 * A failure other than -EFBIG/-EINVAL before anything changed poisons it
 * (btree.h): the caller aborts, and must forget the blocks drop was told
 * about by the failed call (extent_set's contract: some blocks may be set).
 *
 * Locking: the tree keeps its own structure safe; for one file, a set or
 * clear changes items outside its range (the cut and merged neighbours), so
 * the caller holds the file's map exclusively for a set or clear and shared
 * for lookups and walks.  Files are independent of each other.
 *
 * st_blocks: the tree cannot count a file's mapped blocks without reading
 * all its items (v2ext_count does, for fsck).  Set and clear return the
 * change in mapped blocks (*dmapped) so the caller keeps the count with the
 * inode (a field of its INODE item, written with it).
 *
 * Functions return 0 or -errno: -EIO/-ENOMEM from the tree, -EUCLEAN for an
 * item that does not decode.
 */
#ifndef TWINFS_V2EXT_H
#define TWINFS_V2EXT_H

#include <stdint.h>

#include "btree.h"
#include "extent.h"

/* The longest unwritten item (its n is a u32). */
#define V2EXT_UNWRITTEN_MAX 0xffffffffull

/* Look up one block: 0, or -ENOENT for a hole (*out zeroed), or an error.
 * out->phys carries EXTENT_UNWRITTEN; the csum of an unwritten block is 0. */
int v2ext_lookup(struct btree *t, uint64_t ino, uint64_t fblk, struct extent_ent *out);

/* First mapped block >= fblk, or EXTENT_MAX_FBLK (*out). */
int v2ext_next_data(struct btree *t, uint64_t ino, uint64_t fblk, uint64_t *out);
/* First hole >= fblk, at most EXTENT_MAX_FBLK (*out). */
int v2ext_next_hole(struct btree *t, uint64_t ino, uint64_t fblk, uint64_t *out);

/* Visit the mapped blocks of [from, to) in file order as extent_walk does:
 * cb(ctx, fblk, phys, n, ents).  A run lies inside one item and is at most
 * 256 blocks (ents is a buffer of the call), so callers must not assume
 * maximal runs.  Stops and returns cb's value if nonzero. */
int v2ext_walk(struct btree *t, uint64_t ino, uint64_t from, uint64_t to, extent_run_fn cb,
	       void *ctx);

/* The extent cache's source (extcache.h) over @t's EXTENT items: the walk
 * and the SEEK_DATA/HOLE searches above. */
struct extent_src;
void v2ext_source(struct btree *t, struct extent_src *src);

/* Map [fblk, fblk+n) to [phys, phys+n) (phys may carry EXTENT_UNWRITTEN) with
 * csums[i] (unaligned host u64s, NULL: zero; ignored when unwritten), as
 * extent_set: each replaced block is dropped except where the new block is
 * the same physical block (an unwritten block written in place keeps its
 * reference).  *dmapped (may be NULL) gets the change in mapped blocks.
 * -EFBIG past EXTENT_MAX_FBLK; -EINVAL for ino 0, phys 0 or past 2^48. */
int v2ext_set(struct btree *t, uint64_t ino, uint64_t fblk, uint32_t n, uint64_t phys,
	      const void *csums, extent_drop_fn drop, void *ctx, int64_t *dmapped);

/* Make [fblk, fblk+n) a hole (n may be huge: truncate passes
 * EXTENT_MAX_FBLK); drops every block it unmaps. */
int v2ext_clear(struct btree *t, uint64_t ino, uint64_t fblk, uint64_t n, extent_drop_fn drop,
		void *ctx, int64_t *dmapped);

/* Mapped blocks in [from, to), reading every item there (fsck, tests). */
int v2ext_count(struct btree *t, uint64_t ino, uint64_t from, uint64_t to, uint64_t *n);

#endif
