/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * extcache: the bounded cache of file map leaves of a format-v2 mount.
 *
 * In version 2 a regular file's map (extent.h) is a cache of its EXTENT
 * items: a leaf (512 blocks) that is not resident is read from the items
 * of its range on first use (lookup, set, clear of part of it) through
 * @src (ckpt_v2.c wraps v2ext.h over the INODES tree), and installed with
 * compare-and-swap, so only users of that leaf meet; a leaf whose range
 * holds nothing costs no memory at all.  Walks, SEEK_DATA/SEEK_HOLE and
 * clears of whole leaves ask the tree for the ranges that are not
 * resident instead of reading them in.
 *
 * A changed leaf is stamped with the current epoch (extcache_epoch_begin
 * starts a new one before a checkpoint takes its set of changes); once the
 * checkpoint of that epoch committed (extcache_committed) the leaf is
 * clean and may be evicted when the resident leaves pass the budget:
 * the thread that faulted a leaf in evicts clean ones, oldest first
 * (second chance), each under a try of its file's range lock over the
 * leaf, so nobody is inside a leaf that goes.  Dirty leaves stay until
 * their checkpoint, which writes them from memory.  The budget counts the
 * maps' interior nodes too (4 KiB each, one per GiB of a file's span at
 * level 1): a level-1 node goes with the last leaf under it, so they grow
 * with what is resident, not with the size of the files.
 *
 * Locking: xc->mu guards the list only (a leaf lock: it is held while
 * trying range locks, never waiting for one).
 */
#ifndef TWINFS_EXTCACHE_H
#define TWINFS_EXTCACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "extent.h"

#define EXTCACHE_DEFAULT_BUDGET (64ull << 20)

/* Where leaves come from: a file's mapped blocks, as v2ext.h gives them.
 * Every call returns 0 or -errno (-EIO when a node cannot be read). */
struct extent_src {
	void *ctx;
	int (*walk)(void *ctx, uint64_t ino, uint64_t from, uint64_t to, extent_run_fn cb,
		    void *cbctx);
	int (*next_data)(void *ctx, uint64_t ino, uint64_t fblk, uint64_t *out);
	int (*next_hole)(void *ctx, uint64_t ino, uint64_t fblk, uint64_t *out);
	/* Read ahead what the walks of block ranges [lo[i], hi[i]) (n of
	 * them, ascending, apart) will need; best effort, the number read
	 * or -errno.  NULL: no read-ahead. */
	int (*prefetch)(void *ctx, uint64_t ino, const uint64_t *lo, const uint64_t *hi, size_t n);
};

struct extcache_stats {
	uint64_t budget;		/* bytes */
	uint64_t leaves, bytes;		/* resident */
	uint64_t compact, compact_bytes;	/* resident compact leaves (in the budget) */
	uint64_t compactions;		/* changed leaves made compact */
	uint64_t expansions;		/* compact leaves made full again by a user */
	uint64_t compact_drops;		/* compact leaves dropped once clean */
	uint64_t inner_bytes;		/* interior nodes above them (in the budget) */
	uint64_t inner_freed;		/* interior nodes the evictor freed */
	uint64_t faults;		/* leaves read from the tree */
	uint64_t empty_faults;		/* of them, leaves that held nothing */
	uint64_t evictions;
	uint64_t scanned;		/* leaves the evictor looked at */
	uint64_t fault_errors;		/* reads that failed (-EIO ...) */
	uint64_t src_redone;		/* source reads redone: items changed under them */
};

int extcache_create(const struct extent_src *src, uint64_t budget, struct extent_cache **out);
/* Every map using it must be gone. */
void extcache_destroy(struct extent_cache *xc);
/* Bytes of resident leaves to keep at most (dirty ones stay regardless). */
void extcache_set_budget(struct extent_cache *xc, uint64_t bytes);
/* Whether changed leaves nobody uses are kept compact (off by default:
 * -o compact_dirty). */
void extcache_set_compact(struct extent_cache *xc, bool on);
/* @fn(@ctx) is called (once until the next checkpoint commits) when the
 * changed leaves alone hold twice the budget: a checkpoint makes them
 * clean.  It runs on the thread that read a leaf in: it must only wake. */
void extcache_set_pressure(struct extent_cache *xc, void (*fn)(void *ctx), void *ctx);
/* Evict clean leaves until the budget holds (as far as range locks let):
 * a full sweep after each checkpoint commit (or budget change, or a sweep
 * that found clean leaves busy), else a bounded look at the oldest ones. */
void extcache_trim(struct extent_cache *xc);
void extcache_stats(struct extent_cache *xc, struct extcache_stats *st);
/* Bytes of resident leaves and the interior nodes above them past the
 * budget, without a lock: changed leaves, which only a checkpoint lets go
 * (the dirty budget, fs.c, counts them), and clean ones the next trim
 * drops. */
uint64_t extcache_over(struct extent_cache *xc);

/*
 * The source's items of file @ino are about to change (the checkpoint
 * rewrites the ranges the map holds; items reaching out of them are cut
 * and joined, so the tree passes through states that are wrong for the
 * blocks around them).  Until extcache_src_changed, a read of @ino's items
 * (a leaf read in, a walk, SEEK_DATA/SEEK_HOLE of what is not resident)
 * waits, and one that met the change is redone from where it was.  The
 * thread that changes may read its own changes.  Pairs nest per thread.
 */
void extcache_src_changing(struct extent_cache *xc, uint64_t ino);
void extcache_src_changed(struct extent_cache *xc, uint64_t ino);

/* A checkpoint is about to take its set of changes: changes from now on
 * belong to the next one.  Returns the epoch the checkpoint covers. */
uint64_t extcache_epoch_begin(struct extent_cache *xc);
/* The checkpoint of @epoch is durable: leaves changed in it are clean. */
void extcache_committed(struct extent_cache *xc, uint64_t epoch);

#endif
