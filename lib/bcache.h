/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * bcache: a bounded cache of B+tree nodes (format v2), by node address.
 *
 * Each entry holds one BNODE_SIZE buffer (4096-aligned, ready for O_DIRECT).
 * A byte budget bounds the clean entries: inserting past it evicts clean,
 * unreferenced entries, least recently used first.  Referenced entries
 * (bcache_get/bcache_new until bcache_put) and dirty ones (pinned until the
 * transaction that made them commits or aborts) are never evicted; they may
 * take the cache past its budget, which bcache_stats shows (the caller's
 * dirty budget triggers a commit before that matters).
 *
 * One cache serves every tree of a store (addresses are unique there).
 * Locking: c->mu (a leaf lock) guards the table, the LRU and the counters.
 * The bytes of a node are the tree's business (btree.h says who may change
 * them); the cache only guarantees an entry stays put while referenced.
 *
 * Functions return 0 or -errno.
 */
#ifndef TWINFS_BCACHE_H
#define TWINFS_BCACHE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bpiece.h"

struct bcache;

struct bcache_node {
	uint64_t addr;
	void *buf;			/* BNODE_SIZE bytes */
	/* Format v2 with pieces: what the node's chain on disk says (set by
	 * the read that filled buf, or the seal that wrote it as a base; zeros
	 * otherwise), for the next piece to append to.  The tree's, like buf. */
	struct bpiece_chain chain;
	/* The tree's per-node lock (btree.h says who takes it and how); the
	 * cache only makes it with the entry and destroys it with the memory. */
	pthread_rwlock_t lock;
	/* Below: under the cache's mu. */
	unsigned refs;
	bool dirty;
	bool hashed;			/* in the table (false after bcache_forget) */
	struct bcache_node *hnext;
	struct bcache_node *lru_prev, *lru_next;	/* clean and unreferenced only */
};

struct bcache_stats {
	uint64_t budget, bytes, dirty_bytes;
	uint64_t max_bytes, max_dirty_bytes;	/* the most since made */
	uint64_t nodes, hits, misses, evictions;
	uint64_t spares_cold;		/* entries kept for reuse, their pages given back */
};

int bcache_create(uint64_t budget_bytes, struct bcache **out);
/* Every entry must be unreferenced. */
void bcache_destroy(struct bcache *c);
/* A new budget; clean unreferenced entries past it leave now (the hash
 * table keeps the size it was made with). */
void bcache_set_budget(struct bcache *c, uint64_t budget_bytes);

/* The entry for @addr with a reference, or NULL (a miss). */
struct bcache_node *bcache_get(struct bcache *c, uint64_t addr);
/* A new, unhashed entry with a reference and an uninitialized buffer;
 * -ENOMEM. */
int bcache_alloc(struct bcache *c, uint64_t addr, struct bcache_node **out);
/* Hash an entry from bcache_alloc (filled by the caller).  When another
 * thread inserted the same address meanwhile, *n is freed and replaced by
 * that entry (referenced). */
void bcache_insert(struct bcache *c, struct bcache_node **n);
void bcache_put(struct bcache *c, struct bcache_node *n);
/* One more reference to an entry the caller holds. */
void bcache_hold(struct bcache *c, struct bcache_node *n);
/* Dirty entries are pinned (never evicted). */
void bcache_set_dirty(struct bcache *c, struct bcache_node *n, bool dirty);
/* Take the entry out of the table (its address was freed or it is being
 * thrown away); the memory goes with the last reference. */
void bcache_forget(struct bcache *c, struct bcache_node *n);
/* Forget the clean entry of @addr if cached (its address was freed, so a
 * reused address never hits a stale copy; a reader still holding it keeps
 * its memory until bcache_put). */
void bcache_drop_addr(struct bcache *c, uint64_t addr);
void bcache_stats(struct bcache *c, struct bcache_stats *st);
/* Bytes of dirty entries now (what a transaction pins). */
uint64_t bcache_dirty_bytes(struct bcache *c);

#endif
