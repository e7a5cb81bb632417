/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * btree: a copy-on-write B+tree of format v2 (not used by mount yet), over
 * a node store (bstore.h) and a node cache (bcache.h).  Keys are struct
 * bkey, values 0..BNODE_MAX_VAL bytes, copied in and out: nothing outside
 * holds a pointer into a cached node.
 *
 * Transactions.  bt_begin(gen) opens one; any thread may then insert and
 * delete (they join it, as operations join a checkpoint).  The first change
 * to a node of an older generation copies it to a newly allocated address
 * ("CoW"), and its parent, up to the root, so the committed root and every
 * node it reaches stay untouched.  bt_commit writes only the nodes this
 * transaction made, children before parents (a parent pointer carries its
 * child's csum), flushes the store and returns the new root: the caller
 * publishes it (superblock), makes that durable, and only then gives back
 * the addresses bt_commit listed as freed (bt_release).  A crash at any
 * point leaves the old root, or the new one, whole.  bt_abort drops the
 * transaction's nodes (their addresses are free at once: nothing durable
 * points at them) and returns to the committed root.  An error inside an
 * insert or delete other than -ENOENT/-EINVAL/-E2BIG poisons the
 * transaction: later calls return that error until bt_abort.
 *
 * Locking.  Writers to disjoint leaves run in parallel; only commit and
 * abort stop the tree.  The locks, in the order they are taken (never an
 * earlier one while holding a later one):
 *
 *   1. t->lock, the barrier (rwlock, writer-preferring).  Every lookup,
 *      insert, delete and iterator step holds it shared; bt_begin,
 *      bt_commit, bt_abort and bt_verify take it exclusive, so they see a
 *      quiet tree (commit waits for the operations in flight and new ones
 *      wait for it: that is the quiesce of a checkpoint, not a lock of the
 *      data path).  in_trans, tgen, committed and the dirty nodes' csums
 *      change only under it exclusive.
 *   2. t->root_lock (rwlock), the lock above the root node: every descent
 *      holds it shared until the root node is locked; t->root changes only
 *      under it exclusive (a copy, grow or shrink of the root, the first
 *      node), which a change takes only when it must change the root.
 *   3. Node locks (bcache_node.lock, rwlock, writer-preferring).  A thread
 *      waits for a node lock only while holding locks on the node's
 *      ancestors (the path from the root, in key order), so levels
 *      strictly decrease along every wait and no cycle can form.  The two
 *      locks out of that order are try locks: a node just made (nothing
 *      points at it yet, so it is free) and a sibling a delete merges with
 *      (its parent held exclusive; when busy, the delete lets go of
 *      everything, waits for the sibling holding nothing, and restarts).
 *      - A lookup or iterator step locks shared hand over hand: the child
 *        is locked before the parent is let go, so at most two at a time.
 *      - A change first tries the same with only the leaf exclusive: when
 *        the leaf is already the transaction's own and needs no split or
 *        merge, that is all it holds.  Otherwise it restarts taking one
 *        more level exclusive (bcachefs's intent), up to the root: holding
 *        a node exclusive, it copies its child if an older generation
 *        wrote it (the parent's pointer changes), and lets go of every
 *        ancestor once a node is its own and cannot split (room for one
 *        more pointer or item) or underflow (stays a quarter full after
 *        losing one) because of what happens below.  So a writer holds
 *        exactly the nodes it may change, and writers to disjoint leaves
 *        meet only while one of them copies or splits a shared ancestor,
 *        which happens once per node per transaction (a copy) or once per
 *        few hundred inserts (a split).  A delete locks the siblings its
 *        merges will use (parent held) before it changes anything.
 *      A restart lets go of everything; it happens on a lock the walk
 *      would need out of order (the parent of a node it locked exclusive,
 *      a busy sibling) and on a cache miss.  Each restart for order raises
 *      the level where exclusive locking starts, so a change restarts at
 *      most once per level for that.
 *   4. t->mu (dirty and freed lists), the cache's mu, the store's locks:
 *      leaves.
 *
 * A node read (cache miss) holds no node lock and no root lock: the
 * descent lets go of everything, reads the node into the cache (verified,
 * checked, pinned for the rest of the operation), and starts again from
 * the root.  It holds the barrier shared, so a commit waits for it, but
 * no change to any leaf does.  Node I/O for a cache miss runs in the
 * caller's thread: callers must not be I/O completion threads.  The
 * store's alloc and free are called from several threads at once.
 *
 * A reader sees every change of the open transaction as soon as the change
 * lets go of its leaf; an iterator copies one leaf at a time under its
 * lock, and searches again when any change was made since (seq).
 *
 * Functions return 0 or -errno (-ENOENT: no such key).
 */
#ifndef TWINFS_BTREE_H
#define TWINFS_BTREE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bcache.h"
#include "bnode.h"
#include "bstore.h"

/* A root as a superblock holds it; addr 0: the empty tree. */
struct broot {
	struct bptr ptr;
	unsigned level;
};

struct btree {
	struct bstore *store;
	struct bcache *cache;
	uint64_t owner;			/* tree id, in every node */
	uint8_t fs_uuid[16];
	pthread_rwlock_t lock;		/* the barrier (see above) */
	/* Below: under lock exclusive to change. */
	struct broot committed;		/* last committed (or opened) root */
	bool in_trans;
	uint64_t tgen;			/* the open transaction's generation */
	pthread_rwlock_t root_lock;
	struct broot root;		/* current (root_lock); == committed outside a transaction */
	_Atomic int terr;		/* poisoned transaction */
	pthread_mutex_t mu;		/* leaf: the two lists below */
	struct bcache_node **dirty;	/* nodes made by the transaction (a ref each) */
	size_t ndirty, dirty_cap;
	uint64_t *freed;		/* committed nodes it stopped referencing */
	size_t nfreed, freed_cap;
	/* Nodes of a generation >= young_gen (0: none) are referenced by
	 * nothing durable (bt_set_young): those the transaction stopped
	 * referencing are freed by its commit, not listed in freed. */
	uint64_t young_gen;
	uint64_t *young;
	size_t nyoung, young_cap;
	_Atomic uint64_t seq;		/* bumped by every change (iterators) */
	/* Statistics. */
	_Atomic uint64_t cows, splits, merges, rebalances, written;
	_Atomic uint64_t splits_lvl[BNODE_MAX_LEVEL];	/* splits of a node at each level */
	_Atomic uint64_t written_lvl[BNODE_MAX_LEVEL];	/* nodes written at each level */
	_Atomic uint64_t written_blocks;	/* 4 KiB blocks they took (short nodes: nb) */
	_Atomic uint64_t prefetched;	/* leaves read ahead (btree_prefetch.c) */
};

/* A tree's statistics since bt_open, added into @s (bt_stats_add). */
struct bt_stats {
	uint64_t cows, splits, merges, rebalances, written, written_blocks, prefetched;
	uint64_t splits_lvl[BNODE_MAX_LEVEL], written_lvl[BNODE_MAX_LEVEL];
};
void bt_stats_add(struct btree *t, struct bt_stats *s);

/* Open the tree @root names (NULL or addr 0: empty).  Nothing is read
 * until used. */
int bt_open(struct btree *t, struct bstore *s, struct bcache *c, uint64_t owner,
	    const uint8_t fs_uuid[16], const struct broot *root);
/* Aborts an open transaction. */
void bt_close(struct btree *t);

/* Copy the value of @k into val (cap bytes); *len gets its length.
 * -ENOENT; -EOVERFLOW (nothing copied) when cap is too small. */
int bt_lookup(struct btree *t, const struct bkey *k, void *val, unsigned cap, unsigned *len);

/* @gen must be above every generation in the tree (the caller's checkpoint
 * counter); -EBUSY when a transaction is open, -EINVAL for gen. */
int bt_begin(struct btree *t, uint64_t gen);
/* Insert, or replace the value of an existing key.  -E2BIG past
 * BNODE_MAX_VAL, -EINVAL outside a transaction or for k->off past
 * BKEY_OFF_MAX. */
int bt_insert(struct btree *t, const struct bkey *k, const void *val, unsigned len);
int bt_delete(struct btree *t, const struct bkey *k);
/* Write the transaction's nodes, flush; *root gets the new root and
 * *freed (malloc'd, the caller frees it) the *nfreed addresses to give
 * back with bt_release once *root is durably published. */
int bt_commit(struct btree *t, struct broot *root, uint64_t **freed, size_t *nfreed);
void bt_abort(struct btree *t);
/* Outside a transaction: every node of generation >= @gen (0: none) is
 * referenced by nothing durable (no superblock on disk names a tree that
 * reaches it), so a commit that stops referencing one frees it at once
 * instead of listing it (a checkpoint's part commits, ckpt_v2.c). */
void bt_set_young(struct btree *t, uint64_t gen);
/* Free the addresses bt_commit listed (through the store) and forget
 * their cached copies. */
void bt_release(struct btree *t, const uint64_t *freed, size_t n);
/* What bt_commit would list as freed if it ran now: the committed nodes
 * the open transaction stopped referencing so far (malloc'd copy, the
 * caller frees it; NULL and 0 when there are none).  The free-space tree
 * (fspace.c) persists its own freed nodes as free in the same commit.
 * -ENOMEM. */
int bt_trans_freed(struct btree *t, uint64_t **freed, size_t *n);

/* Read ahead (btree_prefetch.c): the leaves holding @keys (sorted
 * ascending) that are not cached are read into the cache, several at
 * once, at most @max of them.  Best effort: a lookup that follows reads
 * whatever this did not.  The number read, or -errno.  Node I/O in the
 * caller's thread and a few of its own: not on an I/O completion thread. */
int bt_prefetch(struct btree *t, const struct bkey *keys, size_t nkeys, size_t max);
/* The same for the leaves holding keys in [lo, hi]. */
int bt_prefetch_range(struct btree *t, const struct bkey *lo, const struct bkey *hi, size_t max);
/* The same for the ranges [lo[i], hi[i]], sorted ascending and apart. */
int bt_prefetch_ranges(struct btree *t, const struct bkey *lo, const struct bkey *hi, size_t n,
		       size_t max);

/*
 * Iteration.  After bt_iter_init(start), next returns the first item >=
 * start and prev the last item < start; after an item was returned, next
 * returns the first item above it and prev the last one below it.  The
 * returned key and value stay valid until the next call; the iterator holds
 * a copy of the leaf and searches again when the tree changed.  -ENOENT at
 * either end.
 */
struct bt_iter {
	struct btree *t;
	struct bkey pos;
	bool started;			/* pos was returned */
	bool have;			/* leaf holds the leaf of pos, as of seq */
	unsigned idx;
	uint64_t seq;
	void *leaf;			/* BNODE_SIZE */
};
int bt_iter_init(struct bt_iter *it, struct btree *t, const struct bkey *start);
int bt_iter_next(struct bt_iter *it, struct bkey *k, const void **val, unsigned *len);
int bt_iter_prev(struct bt_iter *it, struct bkey *k, const void **val, unsigned *len);
void bt_iter_free(struct bt_iter *it);

/* Walk every node reachable from the current root and check structure,
 * key ranges, parent pointers (generation; csum for clean nodes) and
 * levels; *nitems and *nnodes (may be NULL) count them.  0 or -EUCLEAN/-EIO. */
int bt_verify(struct btree *t, uint64_t *nitems, uint64_t *nnodes);

#endif
