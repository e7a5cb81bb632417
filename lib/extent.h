/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * extent: a file's map from file block to (physical block, checksum).
 *
 * On disk a file's map is a list of extent records (file block, physical
 * start, length, one checksum per block: see log.h).  In memory it is a
 * radix tree of 512-way nodes (four levels below 2^36 blocks, six above)
 * whose leaves hold one
 * struct extent_ent per file block: O(1) lookup and update, and writers to
 * disjoint ranges touch disjoint leaf entries, so they need no common lock
 * (interior nodes are installed with compare-and-swap).  The caller's range
 * lock (rangelock.h) keeps a reader and a writer of the same block apart.
 *
 * File blocks below 2^51: byte offsets up to 2^63 - 1, the kernel's largest
 * file (MAX_LFS_FILESIZE), which FUSE lets through and the page cache
 * acknowledges before twinfs sees the data.  Functions return 0 or -errno.
 */
#ifndef TWINFS_EXTENT_H
#define TWINFS_EXTENT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define EXTENT_MAX_FBLK (1ull << 51)
/* Blocks below this live in the shallow tree (see extent.c). */
#define EXTENT_LOW_FBLK (1ull << 36)
/* Blocks below this live in one small leaf of their own (see extent.c). */
#define EXTENT_TINY_FBLK 32u

/* An allocated block that has never been written (fallocate): reads as
 * zeros without touching the device; its csum is 0.  The flag is part of
 * phys in memory and in LR_EXT_SET records. */
#define EXTENT_UNWRITTEN (1ull << 63)
#define EXTENT_PHYS(p) ((p) & ~EXTENT_UNWRITTEN)

struct extent_ent {
	uint64_t phys;		/* 0 = hole (block 0 is never data); may carry EXTENT_UNWRITTEN */
	uint64_t csum;
};

struct extent_cache;
struct ext_pend;
struct rangelock;

struct extent_map {
	void *tiny;		/* leaf of blocks below EXTENT_TINY_FBLK, installed with CAS */
	void *root;		/* radix root below EXTENT_LOW_FBLK, installed with CAS */
	void *high;		/* radix root from EXTENT_LOW_FBLK on (usually NULL) */
	_Atomic uint64_t mapped;	/* number of non-hole blocks (st_blocks) */
	/* Format v2 (extcache.h): the map is a cache of the file's EXTENT
	 * items, read in by leaf and evicted under @xc's budget; NULL: all
	 * of it in memory (version 1, tests). */
	struct extent_cache *xc;
	struct rangelock *rl;	/* the file's range lock, tried by the evictor */
	uint64_t ino;		/* the file, for the source */
	bool dying;		/* lazy: being destroyed, under xc->mu (the
				 * evictor then frees no interior node) */
	/* Lazy: extent records the mount's replay left pending (extpend.h),
	 * applied by every entry below for the leaves it reaches; NULL: none
	 * were ever kept. */
	struct ext_pend *pend;
};

/* Called for each physical block a set/clear replaces; @n consecutive
 * physical blocks starting at @phys (runs are coalesced where possible). */
typedef void (*extent_drop_fn)(void *ctx, uint64_t phys, uint64_t n);

void extent_init(struct extent_map *m);
/* A map whose leaves are read from @xc's source for file @ino when used
 * (format v2); @mapped: its blocks mapped in the tree (st_blocks).  @rl
 * (may be NULL when nothing runs in parallel) is the range lock users of
 * the map hold; every lookup, set, clear and walk below may then also fail
 * with the source's error (-EIO) or -ENOMEM.  @fresh: a file the tree
 * has no items of (created since): nothing is ever read. */
void extent_init_lazy(struct extent_map *m, struct extent_cache *xc, uint64_t ino,
		      struct rangelock *rl, uint64_t mapped, bool fresh);
/* Add @n to a lazy map's count of mapped blocks (its items were counted
 * while mounting, not read). */
void extent_count_mapped(struct extent_map *m, uint64_t n);
/* Frees the tree; calls drop for every mapped block if drop != NULL (for a
 * lazy map those the tree holds too).  The map is then an empty one of
 * version 1 (xc NULL). */
void extent_destroy(struct extent_map *m, extent_drop_fn drop, void *ctx);

/* Map file blocks [fblk, fblk+n) to physical [phys, phys+n) with csums[i].
 * csums may be unaligned (it points into log records): read it with memcpy;
 * NULL means all zero.  The map holds one reference per mapped entry: the
 * caller's reference to each new block passes to the map, and each replaced
 * entry's block is dropped -- except where the new entry has the same
 * physical block (an unwritten block written in place), which keeps its
 * reference and is not dropped.  -EFBIG past EXTENT_MAX_FBLK, -EINVAL for
 * phys 0, -ENOMEM (some blocks may be set). */
int extent_set(struct extent_map *m, uint64_t fblk, uint32_t n, uint64_t phys,
	       const void *csums, extent_drop_fn drop, void *ctx);
/* Set one block (e->phys 0: make it a hole). */
int extent_set1(struct extent_map *m, uint64_t fblk, const struct extent_ent *e,
		extent_drop_fn drop, void *ctx);
/* Make [fblk, fblk+n) a hole; n may be huge (truncate: EXTENT_MAX_FBLK).
 * Absent subtrees are skipped; nodes whose whole span is cleared are freed,
 * so the caller must hold the range exclusively (no reader inside it). */
int extent_clear(struct extent_map *m, uint64_t fblk, uint64_t n,
		 extent_drop_fn drop, void *ctx);
/* Look up one block: 0, or -ENOENT for a hole (*out zeroed).  In memory
 * nothing else fails; the format v2 map read from disk will add -EIO, so
 * callers pass any other error on. */
int extent_lookup(const struct extent_map *m, uint64_t fblk, struct extent_ent *out);
/* The same where a hole is just phys 0 and nothing can fail: for the unit
 * tests' look at an in-memory map only; lib/ goes through extent_lookup
 * (the data path through inode_extent_lookup, file_extent in file_i.h). */
void extent_get(const struct extent_map *m, uint64_t fblk, struct extent_ent *out);

/* First mapped block >= fblk, or EXTENT_MAX_FBLK. Skips empty subtrees.
 * (A lazy map whose source fails answers fblk itself, in both: the lookup
 * there fails then.) */
uint64_t extent_next_data(const struct extent_map *m, uint64_t fblk);
/* First hole >= fblk (EXTENT_MAX_FBLK never, practically). */
uint64_t extent_next_hole(const struct extent_map *m, uint64_t fblk);

/* Visit mapped blocks in [from, to) in file order as runs where both file
 * and physical blocks are consecutive and the EXTENT_UNWRITTEN flag is the
 * same (phys carries the flag): cb(ctx, fblk, phys, n, ents) with
 * ents[0..n) the entries.  A run never crosses a leaf boundary (block
 * EXTENT_TINY_FBLK, then every 512 blocks: ents is contiguous), so callers
 * merging runs must not assume maximal ones.  Stops and returns cb's value if nonzero. */
typedef int (*extent_run_fn)(void *ctx, uint64_t fblk, uint64_t phys, uint32_t n,
			     const struct extent_ent *ents);
int extent_walk(const struct extent_map *m, uint64_t from, uint64_t to,
		extent_run_fn cb, void *ctx);

/* extent_walk for a caller that had [from, to)'s pending pieces applied
 * (extent_resident does; nothing adds any after the mount's replay): it
 * does not look at them, so it never waits for a user applying others.
 * The checkpoint walks so while readers of the file's items wait for it
 * (extcache_src_changing): a reader applying a piece elsewhere in the
 * file held the pieces' lock while its fault waited for the checkpoint,
 * and the checkpoint's walk waited for that lock. */
int extent_walk_applied(const struct extent_map *m, uint64_t from, uint64_t to,
			extent_run_fn cb, void *ctx);

/* The parts of [from, to) a lazy map holds in memory (resident leaves and
 * spans known to be holes), merged where they touch, in file order: what a
 * checkpoint writes; the rest the tree holds as it is.  A map of version 1
 * is one piece. */
typedef int (*extent_piece_fn)(void *ctx, uint64_t from, uint64_t to);
int extent_resident(struct extent_map *m, uint64_t from, uint64_t to, extent_piece_fn cb,
		    void *ctx);

static inline uint64_t extent_mapped(const struct extent_map *m)
{
	return atomic_load_explicit(&m->mapped, memory_order_relaxed);
}

#endif
