/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fspace: the free-space allocator of format v2 (not used by mount yet),
 * persisted in the free-space tree (owner 3, docs/FORMAT.md "Free space").
 *
 * Two areas, each with its own map:
 *
 *   data area [start, end) in blocks: split into groups of gblocks blocks.
 *     Every group has a small summary that stays in memory (free count, an
 *     upper bound of its longest free run, its lock); its bitmap is loaded
 *     from the group's FREE items on first use and evicted again, clean,
 *     when the loaded bitmaps pass the budget.  Allocation takes only the
 *     group's lock (no tree lock): the tree is read when a group loads and
 *     written at the checkpoint (fspace_commit), which turns each group
 *     changed since the last one into FREE item changes.  Memory: the
 *     summaries (sizeof(struct fs_group), 128 bytes, per group: 128 KiB per
 *     TiB with the default 1 GiB groups) + the budget + the bitmaps of
 *     groups changed since the last checkpoint (gblocks / 8 bytes each).
 *
 *   node area [node_start, node_start + nslots * BNODE_BLOCKS): the slots of
 *     every tree node.  A bitmap of all slots stays in memory (1 bit per
 *     16 KiB slot: 8 KiB per GiB of node area) and is persisted as NODEMAP
 *     items of the free-space tree.  Tree nodes never come from the data
 *     area, so updating the free-space tree never allocates from a group it
 *     is writing, never loads a group, and takes no group lock: no
 *     recursion.  fspace_node_store() is the node store the other trees use.
 *
 * Crash safety.  The tree holds, at each checkpoint, the state of that
 * checkpoint: a block freed by copy-on-write (fspace_defer) is reused only
 * after its free is durable (fspace_release_durable), and tree nodes a
 * commit stops referencing (the other trees' bt_commit lists, passed to
 * fspace_commit, and the free-space tree's own) are written as free in that
 * same commit but stay allocated in memory until the superblock naming it
 * is durable (bt_release, fspace_commit_done).  A crash reopens the last
 * committed root: never a block both free and referenced.  Blocks
 * allocated but not yet referenced by the checkpoint's metadata are
 * written as used (the integration step frees them through log replay or
 * fsck; see FORMAT.md).
 *
 * Shared blocks (reflink) are not counted here: a block is used or free.
 * Reference counts go into the refcount tree (owner 2, alloc_v2.c, which
 * also persists alloc.c's used map here with fspace_set_words).
 *
 * Thread-safe.  Lock order: fs->commit_mu, then group mus in ascending
 * order (one, or the groups of a run across boundaries: fspace_claim and
 * fspace_get), then fs->evict_mu (other groups only by trylock), then the
 * free-space tree's lock (a group load reads the tree under its group's
 * mu), then the node map's nm.mu and defer_mu (leaves).  fspace_commit takes each group's
 * mu only to copy its bitmap, never while it changes the tree.
 *
 * Functions return 0 or -errno.
 */
#ifndef TWINFS_FSPACE_H
#define TWINFS_FSPACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bcache.h"
#include "bstore.h"
#include "btree.h"

#define FSPACE_OWNER 3			/* the free-space tree */
#define FSK_FREE 17			/* (start, 17, n): [start, start + n) free */
#define FSK_GROUP 18			/* (0, 18, group): its summary */
#define FSK_NODEMAP 19			/* (0, 19, chunk): node slot bits */
#define FSPACE_GROUP_DEFAULT (1ull << 18)	/* 1 GiB of 4 KiB blocks */
#define FSPACE_MAP_BYTES 2048u		/* NODEMAP value: 16384 slots */
#define FSPACE_MAP_SLOTS (FSPACE_MAP_BYTES * 8u)

enum fspace_kind { FSPACE_DATA = 0, FSPACE_META = 1 };

struct fspace_params {
	uint64_t start, end;		/* data area, blocks; start > 0 */
	uint64_t gblocks;		/* blocks per group (multiple of 64); 0: default */
	uint64_t reserve;		/* free data blocks FSPACE_DATA leaves */
	uint64_t node_start, nslots;	/* node area */
	uint64_t node_reserve;		/* free slots only the free-space tree takes */
	uint64_t budget;		/* bytes of loaded group bitmaps; those
					 * changed since the last commit are
					 * pinned and may take it past */
};

struct fspace;

struct fspace_stats {
	uint64_t ngroups, loaded, dirty;	/* groups */
	uint64_t summary_bytes;		/* the fixed part: group summaries + node map */
	uint64_t loaded_bytes;		/* group bitmaps in memory */
	uint64_t loads, evictions;
	uint64_t commits, items_written;	/* tree inserts + deletes by commits */
	uint64_t items_read;		/* FREE items commits read to compare */
	uint64_t errors;		/* frees of free blocks, failed loads */
};

/*
 * Open the free space the tree @root names (NULL or addr 0: a new file
 * system, everything free).  Reads the group summaries and the node map
 * only (a few nodes per TiB), never a FREE item.  @io reads, writes and
 * flushes nodes (its alloc/free are not used); @c caches them.
 */
int fspace_open(struct bstore *io, struct bcache *c, const uint8_t fs_uuid[16],
		const struct fspace_params *p, const struct broot *root, struct fspace **out);
/* The geometry a version 2 superblock records (mkfs, mount, fsck):
 * the data area after the node area, to the end of the devices. */
struct super;
void fspace_sb_params(const struct super *sb, struct fspace_params *p);

/* Drops everything not committed (a crash, for tests) and frees the memory. */
void fspace_close(struct fspace *fs);

/* ---- data blocks ---- */
/* Allocate 1..@want contiguous blocks: the full @want when a free run that
 * long exists (in the hint's group first, then the others, then across
 * group boundaries), else the longest run of the group with the longest
 * one.  -ENOSPC; -EIO/-ENOMEM (a group load). */
int fspace_get(struct fspace *fs, uint64_t want, uint64_t hint, int kind, uint64_t *blk,
	       uint64_t *got);
/* Free a run now (nothing durable references it).  A block already free
 * is counted in errors and left. */
int fspace_put(struct fspace *fs, uint64_t blk, uint64_t n);
/* Take exactly [blk, blk + n) if all of it is free (log replay):
 * -EBUSY if a block is in use, -EINVAL outside the data area. */
int fspace_claim(struct fspace *fs, uint64_t blk, uint64_t n);
/* 1 free, 0 used, or -errno. */
int fspace_is_free(struct fspace *fs, uint64_t blk);
/* fspace_put the run once log sequence @seq is durable. */
int fspace_defer(struct fspace *fs, uint64_t blk, uint64_t n, uint64_t seq);
/* 0 or the first error of a put (its entry stays queued). */
int fspace_release_durable(struct fspace *fs, uint64_t durable_seq);
int fspace_release_all(struct fspace *fs);
uint64_t fspace_free_blocks(struct fspace *fs);
uint64_t fspace_deferred_blocks(struct fspace *fs);
/* The data area [*start, *end). */
void fspace_data_area(struct fspace *fs, uint64_t *start, uint64_t *end);
/* Make the used bits of [blk, blk + 64 nwords) exactly @used (bit i % 64
 * of used[i / 64]: block blk + i in use), whatever they were: another
 * allocator's map persisted through this one (alloc_v2.c).  blk - start a
 * multiple of 64; bits past the area's end are ignored.  Only the words
 * that differ mark their group changed.  -EINVAL; -EIO/-ENOMEM (a load). */
int fspace_set_words(struct fspace *fs, uint64_t blk, size_t nwords, const uint64_t *used);
/* The used bits of [blk, blk + 64 nwords) into @used (the reverse of
 * fspace_set_words; blocks past the area's end read as used). */
int fspace_get_words(struct fspace *fs, uint64_t blk, size_t nwords, uint64_t *used);

/* The used blocks of the data area as maximal runs, in order, to
 * @fn(@ctx, first block, count); runs go across group boundaries.  A group
 * its summary shows wholly used or wholly free is not loaded (no FREE item
 * read), so a mostly full or mostly empty area costs a few calls whatever
 * its size; only groups that are mixed load their bitmap.  Stops at @fn's
 * first nonzero return, which it returns; -EIO/-ENOMEM/-EUCLEAN (a load). */
typedef int (*fspace_run_fn)(void *ctx, uint64_t blk, uint64_t n);
int fspace_used_runs(struct fspace *fs, fspace_run_fn fn, void *ctx);

/* ---- tree nodes ---- */
/* The store other trees use: @io's read/write/flush, slots of the node map
 * (leaving node_reserve free). */
struct bstore *fspace_node_store(struct fspace *fs);
bool fspace_node_used(struct fspace *fs, uint64_t addr);
uint64_t fspace_nodes_used(struct fspace *fs);

/*
 * Discarding freed nodes.  The nodes a published commit freed are the
 * tree the older superblock slot names: what mount -o rescue and fsck
 * fall back to when the newest superblock is damaged on every device.
 * They keep their content until the next commit is published; then those
 * of them still free (none of the next commit's nodes went there) are no
 * tree's nodes any more: they are held (marked used in memory, so no
 * allocation hands them out while their discard runs, written as free)
 * and passed to fn(ctx, addr, n blocks), which returns 0 when it took the
 * run (and fspace_node_unholds it once discarded) or nonzero to have it
 * freed at once.  fn is called under commit_mu: it may only queue.  A node
 * allocation that finds only held slots waits for unholds.  Held slots
 * count as free in fspace_node_used and fspace_nodes_used.  @fn NULL:
 * none (set before the first commit, cleared before the queue goes).
 */
void fspace_set_node_discard(struct fspace *fs, int (*fn)(void *ctx, uint64_t addr, uint64_t n),
			     void *ctx);
/* Hold the first run of free slots at or after block @from (at most
 * @max slots) that the fallback does not use, for trim: 0 with *addr and
 * *n (blocks); -ENOENT when there is none; -EAGAIN when the fallback's
 * nodes are not known (no commit published since open); -ENOMEM. */
int fspace_node_hold_free(struct fspace *fs, uint64_t from, uint64_t max, uint64_t *addr,
			  uint64_t *n);
/* Free a held run again (its discard is done or abandoned). */
void fspace_node_unhold(struct fspace *fs, uint64_t addr, uint64_t n);
uint64_t fspace_nodes_held(struct fspace *fs);

/* ---- checkpoint ---- */
/*
 * Write every change since the last commit into the free-space tree in a
 * transaction of generation @gen (above every earlier one), with the
 * @nfrees node addresses the other trees' bt_commit listed (and the free
 * tree's own) written as free; *root gets the root to publish.  Then,
 * once a superblock naming it is durable: bt_release the other trees'
 * lists and call fspace_commit_done; if it is never published,
 * fspace_commit_abort.  Only the groups and node map chunks that changed
 * are written, and of those only the items that differ.  Call it at the
 * checkpoint's quiet point, when no other tree has a transaction open: a
 * node slot allocated meanwhile is written as used and, after a crash,
 * leaked.  -EBUSY while the previous commit is neither done nor aborted.
 */
int fspace_commit(struct fspace *fs, uint64_t gen, const uint64_t *frees, size_t nfrees,
		  struct broot *root);
void fspace_commit_done(struct fspace *fs);
void fspace_commit_abort(struct fspace *fs);

void fspace_stats(struct fspace *fs, struct fspace_stats *st);
/* Bytes of group bitmaps in memory (any thread, no lock).  The bitmaps of
 * groups a checkpoint changed stay pinned until it is done; then
 * fspace_commit_done evicts the clean ones past the budget. */
uint64_t fspace_loaded_bytes(struct fspace *fs);
/* Check every item of the committed-or-open tree against FORMAT.md: FREE
 * items inside one group, maximal (never touching), in a group with a
 * summary that counts them exactly; node map chunks inside the area and
 * never all free.  Reads the whole tree (fsck, tests).  0 or -EUCLEAN with
 * a reason in why. */
int fspace_verify(struct fspace *fs, char *why, size_t whylen);
/* The free-space tree itself (bt_verify in tests and fsck). */
struct btree *fspace_tree(struct fspace *fs);

#endif
