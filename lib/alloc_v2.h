/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * alloc_v2: the state of alloc.c (the allocator at runtime) on disk in
 * format v2: the reference counts of shared runs in the refcount tree
 * (owner 2, REFCOUNT items) and the used map in the free-space tree
 * (through fspace).  Both follow what changed: alloc.c records its changes
 * (alloc_track), and each write takes them, so a checkpoint costs the
 * blocks changed since the previous one, not the shared or used blocks.
 *
 * In a v2 checkpoint, at its quiet point (the refcount changes must be
 * those of the metadata being checkpointed), after the inodes tree's
 * changes and before fspace_commit:
 *
 *     bt_begin(refs, gen);                  (if not open already)
 *     alloc_v2_write_refs(v);
 *     bt_commit(refs, &root, &freed, &n);   (freed joins fspace_commit's frees)
 *     alloc_v2_sync_free(v);
 *     fspace_commit(fs, gen', frees, nfrees, &froot);
 *     ... superblock with both roots durable ...
 *     alloc_v2_refs_done(v); bt_release(...); fspace_commit_done(fs);
 *
 * and on any failure before the superblock: bt_abort(refs),
 * alloc_v2_refs_abort(v), fspace_commit_abort(fs) (if it committed).
 * alloc_v2_sync_free needs no abort: what it copied stays in fspace's
 * memory, changed, until a commit of it is done.
 *
 * The allocator and fspace must cover the same data area (alloc_create's
 * [start, end) = fspace's [start, end)).  Not thread-safe itself (one
 * checkpoint at a time); the allocator may be used by any thread meanwhile.
 * Functions return 0 or -errno.
 */
#ifndef TWINFS_ALLOC_V2_H
#define TWINFS_ALLOC_V2_H

#include <stddef.h>
#include <stdint.h>

#include "alloc.h"
#include "btree.h"
#include "fspace.h"

struct alloc_v2;

struct alloc_v2_stats {
	uint64_t ref_items_read;	/* REFCOUNT items read by writes */
	uint64_t ref_items_written;	/* inserted, replaced or deleted */
	uint64_t ref_blocks;		/* blocks whose counts the writes looked at */
	uint64_t used_words;		/* used-map words handed to fspace */
	uint64_t refs_changed;		/* block references alloc_v2_ref changed */
};

/* Start tracking @a's changes (alloc_track) for the refcount tree @refs
 * (owner V2_TREE_REFCOUNT, opened by the caller) and @fs. */
int alloc_v2_create(struct alloc *a, struct fspace *fs, struct btree *refs,
		    struct alloc_v2 **out);
void alloc_v2_destroy(struct alloc_v2 *v);

/* Read every REFCOUNT item into the allocator (alloc_set_refs): mount,
 * when the allocator is not rebuilt from the extents.  -EUCLEAN for an
 * item that does not decode or overlaps the previous one. */
int alloc_v2_load_refs(struct alloc_v2 *v);
/* Mount without walking the extents: fill an allocator just created
 * (nothing in use) from the trees, the used map from fspace's groups (every
 * group's FREE items are read once; clean groups are evicted again under
 * fspace's budget), then the counts (alloc_v2_load_refs); the changes this
 * records are dropped (the trees hold them).  Before the allocator is
 * shared between threads. */
int alloc_v2_load(struct alloc_v2 *v);
/* The same from the trees into another allocator @a (nothing in use, no
 * change dropped): mount fills the allocator of the live file system so. */
int alloc_v2_load_other(struct alloc_v2 *v, struct alloc *a);

/*
 * The allocator of an alloc_v2 may follow the references of the trees'
 * EXTENT items exactly (ckpt_v2.c, FORMAT.md "Free space"): the checkpoint
 * calls alloc_v2_ref(+1) for every block of an item it inserts and (-1)
 * for every block of an item it deletes, as it changes them.  Each change
 * is journaled until alloc_v2_refs_kept (the INODES tree's transaction
 * was committed) or alloc_v2_refs_undo (it was aborted: every change is
 * taken back, newest first).  -EUCLEAN: a -1 of a block counted free.
 */
int alloc_v2_ref(struct alloc_v2 *v, uint64_t blk, uint64_t n, int sign);
void alloc_v2_refs_kept(struct alloc_v2 *v);
/* Bytes the journal of reference changes holds (any thread, no lock). */
uint64_t alloc_v2_mem_bytes(struct alloc_v2 *v);
void alloc_v2_refs_undo(struct alloc_v2 *v);

/* Compare the used maps and reference counts of @a and @b over [s, e):
 * 0 when equal; -ESRCH with the first block that differs in *blk and its
 * counts in *ca, *cb; -ENOMEM. */
int alloc_v2_compare(struct alloc *a, struct alloc *b, uint64_t s, uint64_t e, uint64_t *blk,
		     uint32_t *ca, uint32_t *cb);

/* Write the reference counts changed since the last write into @refs'
 * open transaction: for each changed run, the REFCOUNT items there become
 * the maximal runs of equal counts >= 2 (FORMAT.md), reading only the
 * items that overlap or touch it. */
int alloc_v2_write_refs(struct alloc_v2 *v);
/* The transaction holding the writes was published / dropped (the
 * changes then count as changed again). */
void alloc_v2_refs_done(struct alloc_v2 *v);
void alloc_v2_refs_abort(struct alloc_v2 *v);

/* Make fspace's map of the chunks the allocator changed since the last
 * sync equal to the allocator's used map (held and deferred blocks are
 * used), so the next fspace_commit writes FREE items for those only. */
int alloc_v2_sync_free(struct alloc_v2 *v);

void alloc_v2_stats(struct alloc_v2 *v, struct alloc_v2_stats *st);

#endif
