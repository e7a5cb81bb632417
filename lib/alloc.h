/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * alloc: free-space allocator over the data area [start, end) in blocks.
 *
 * Free space is not stored on disk by this module: at mount every block the
 * metadata references is marked with alloc_use() and the rest is free
 * (format v2: alloc_v2.c writes its changes into the trees and can fill it
 * from them, see the change tracking below).  Blocks can be
 * shared (copy_file_range reflinks), so a block carries a reference count:
 * one bit in a bitmap for the common single owner (in chunks that cost no
 * memory while all free or all used), and a hash table for the few blocks
 * with more than one.
 *
 * The area is split into allocation groups, each with its own lock and
 * cursor, so parallel writers allocate without contending; a caller passes a
 * hint (e.g. its inode number) to keep one file's blocks together.
 *
 * Deferred frees: copy-on-write drops old blocks in a metadata record with a
 * log sequence number; the blocks become reusable only when that sequence
 * is durable (alloc_release_durable), so a crash can never find them
 * overwritten while the durable metadata still points at them.
 *
 * alloc_get() returns the full @want whenever a free run that long exists
 * anywhere (hint group first, then the others, then across group
 * boundaries), so checkpoints get contiguous space; otherwise the longest
 * free run of one group.
 *
 * A reserve (alloc_create's reserve) is kept for metadata (checkpoints,
 * the write-intent bitmap): the last `reserve` blocks of the area, which
 * ALLOC_DATA never allocates from.  Being one region rather than a count,
 * it still holds a contiguous run for a checkpoint when copy-on-write churn
 * has left the full data area fragmented into single blocks (a full file
 * system must still mount: mount writes a checkpoint).
 *
 * Thread-safe.  Functions return 0 or -errno.
 */
#ifndef TWINFS_ALLOC_H
#define TWINFS_ALLOC_H

#include <stddef.h>
#include <stdint.h>

struct alloc;

enum alloc_kind { ALLOC_DATA = 0, ALLOC_META = 1 };

int alloc_create(uint64_t start, uint64_t end, uint64_t reserve, struct alloc **out);
void alloc_destroy(struct alloc *a);

/* Allocate between 1 and @want contiguous blocks (as many as a free run
 * near the hint gives); *blk and *got receive the run.  -ENOSPC when none. */
int alloc_get(struct alloc *a, uint64_t want, uint64_t hint, int kind,
	      uint64_t *blk, uint64_t *got);
/* Drop one reference from each block of the run; a block whose count
 * reaches zero is free again at once (or pending: alloc_retry_frees). */
void alloc_put(struct alloc *a, uint64_t blk, uint64_t n);
/* Add one reference to each block of the run (free blocks become used with
 * count 1).  Used at mount to rebuild the map, and by reflink. */
int alloc_use(struct alloc *a, uint64_t blk, uint64_t n);
/* Reference count of one block (0 = free). */
uint32_t alloc_refs(struct alloc *a, uint64_t blk);
/* Take exactly [blk, blk + n) if every block of it is free; -EBUSY if one
 * is in use, -ENOSPC if the free count does not allow it, -EINVAL if the
 * run leaves the data area or the reserve (it must lie in one of them). */
int alloc_claim(struct alloc *a, uint64_t blk, uint64_t n);
/* Bounds [*start, *end) of the metadata reserve; -ENOENT without one. */
int alloc_reserve_range(struct alloc *a, uint64_t *start, uint64_t *end);

/* alloc_put() the run once log sequence @seq is durable. */
int alloc_defer(struct alloc *a, uint64_t blk, uint64_t n, uint64_t seq);
void alloc_release_durable(struct alloc *a, uint64_t durable_seq);
/* Release every deferred free regardless of sequence (unmount after the
 * final commit). */
void alloc_release_all(struct alloc *a);

/*
 * Discard.  With a hook set (before any free; cleared, with NULL, only
 * when no other thread frees any more), blocks that a release
 * (alloc_release_durable/_all, alloc_put_discard) leaves without a
 * reference are not freed but "held": still marked used, so no allocation
 * can hand them out and have them written while their discard is in
 * flight, and passed to fn(ctx, blk, n), which returns 0 when it took the
 * run (and will alloc_unhold it after discarding) or nonzero to have it
 * freed at once.  fn is called under a group lock: it may only queue.
 * alloc_get waits for unholds rather than failing with ENOSPC while
 * blocks are held.
 */
void alloc_set_discard(struct alloc *a, int (*fn)(void *ctx, uint64_t blk, uint64_t n),
		       void *ctx);
/* alloc_put, with freed blocks going through the hook (if set): for runs
 * freed once metadata that stopped referencing them is durable. */
void alloc_put_discard(struct alloc *a, uint64_t blk, uint64_t n);
/* Hold the first free run at or after @from (at most @max blocks), for
 * trim: 0 with *blk, *n; -EBUSY (*blk, *n: the run, not held) when the
 * free blocks are all promised to allocations under way; -ENOENT when no
 * free block lies at or after @from. */
int alloc_hold_free(struct alloc *a, uint64_t from, uint64_t max, uint64_t *blk, uint64_t *n);
/* Free a held run (its discard is done or abandoned). */
void alloc_unhold(struct alloc *a, uint64_t blk, uint64_t n);
uint64_t alloc_held_blocks(struct alloc *a);

uint64_t alloc_free_blocks(struct alloc *a);	/* includes the reserve and held blocks */
uint64_t alloc_total_blocks(struct alloc *a);
uint64_t alloc_reserve_blocks(struct alloc *a);
/* Puts of free blocks (double frees) and out-of-range puts, ignored but
 * counted: nonzero means a reference-counting bug somewhere. */
uint64_t alloc_errors(struct alloc *a);
/* Blocks waiting in the deferred-free list. */
uint64_t alloc_deferred_blocks(struct alloc *a);
/*
 * Frees never lose blocks for want of memory: a free whose blocks would
 * leave a chunk of the map mixed and finds no memory for its words keeps
 * them used, pending (a short list per group, in place), and they are
 * freed by the next put in their group, by an alloc_get that would fail
 * with ENOSPC, or by alloc_retry_frees (format v2 calls it at each
 * checkpoint, before it writes the used map).  Only when the list cannot
 * grow either are blocks lost (counted with alloc_errors).
 * alloc_retry_frees returns the blocks it freed.
 */
uint64_t alloc_pending_blocks(struct alloc *a);
uint64_t alloc_retry_frees(struct alloc *a);
/* Test hook: the chunk-word allocations numbered [after, after + count)
 * from now fail (count 0: none; process-wide).  Every alloc_create reads
 * it from TWINFS_ALLOC_WORDS_FAIL="after,count" too, counting anew. */
void alloc_fail_words(uint64_t after, uint64_t count);
/* Memory of the block map's words: 4 KiB for each chunk of 32768 blocks
 * that is partly used (all free or all used costs none), plus a few
 * spares per group; 16 bytes per chunk of index come on top. */
uint64_t alloc_bitmap_bytes(struct alloc *a);
/* Chunks that have words (the mixed ones, and a partial last one). */
uint64_t alloc_bitmap_chunks(struct alloc *a);

/*
 * Change tracking, for format v2's on-disk state (alloc_v2.c).  After
 * alloc_track (before the allocator is shared between threads; it cannot
 * be turned off) every change is recorded until taken: the reference
 * counts above 1 that changed (alloc_take_ref_changes) and the chunks of
 * the used map that changed (alloc_take_used_changes).  A take returns
 * the runs sorted and merged, absolute blocks, malloc'd (free() them; NULL
 * and 0 when nothing changed).  Changes racing with a take are recorded
 * for the next one.  -ENOMEM.
 */
struct alloc_run {
	uint64_t blk, n;
};
int alloc_track(struct alloc *a);
int alloc_take_ref_changes(struct alloc *a, struct alloc_run **runs, size_t *n);
/* Record runs as changed again (a write of them that was aborted). */
void alloc_mark_ref_changes(struct alloc *a, const struct alloc_run *runs, size_t n);
/* Runs cover whole chunks of 4096 blocks (of the data area and of the
 * reserve: each area's chunks start at its first block), cut at the
 * area's end. */
int alloc_take_used_changes(struct alloc *a, struct alloc_run **runs, size_t *n);
/* Record runs as changed again (a sync of them that failed). */
void alloc_mark_used_changes(struct alloc *a, const struct alloc_run *runs, size_t n);
/* The used map of [blk, blk + 64 nwords): bit i % 64 of out[i / 64] set
 * when block blk + i has a reference, held for a discard included;
 * blocks outside the allocator read as used. */
void alloc_used_words(struct alloc *a, uint64_t blk, size_t nwords, uint64_t *out);
/* alloc_refs of the n blocks from blk into out[n]: one lock per group. */
void alloc_refs_run(struct alloc *a, uint64_t blk, uint64_t n, uint32_t *out);
/* Set the reference count of every block of the run to @refs (>= 1): a
 * free block becomes used.  Records no change (the loader of the refcount
 * tree: the tree holds it already).  -EINVAL outside, -ENOMEM. */
int alloc_set_refs(struct alloc *a, uint64_t blk, uint64_t n, uint32_t refs);

#endif
