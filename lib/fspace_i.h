/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fspace internals, shared by fspace.c (data groups: allocation, loads,
 * eviction, deferred frees), fspace_node.c (the node map and the node
 * stores) and fspace_tree.c (open and commit: the free-space tree).
 */
#ifndef TWINFS_FSPACE_I_H
#define TWINFS_FSPACE_I_H

#include <pthread.h>
#include <stdatomic.h>

#include "fspace.h"

/* One group's summary: always in memory (128 bytes). */
struct fs_group {
	pthread_mutex_t mu;
	/* Below: under mu; the atomics are also read without it to choose a
	 * group (a stale value only costs a search). */
	uint64_t *bm;			/* loaded bitmap (set = used), or NULL */
	uint64_t cursor;		/* next search starts here (group-relative) */
	_Atomic uint64_t free;		/* exact */
	_Atomic uint64_t maxrun;	/* upper bound of the longest free run */
	_Atomic bool loaded;		/* bm != NULL, for the eviction scan */
	_Atomic bool ref;		/* used since the clock hand passed */
	bool dirty;			/* changed since its last snapshot */
	bool in_ckpt;			/* a commit writes its snapshot: pinned */
	bool ondisk;			/* has items; else wholly free, no items */
	uint64_t dlo, dhi;		/* blocks changed since the snapshot */
	uint64_t ck_lo, ck_hi;		/* ... in the snapshot a commit writes */
	uint64_t nextents;		/* its FREE items in the open transaction */
	uint64_t ck_next;		/* ... in the last commit (an abort's) */
} __attribute__((aligned(64)));

_Static_assert(sizeof(struct fs_group) == 128, "a group summary is 128 bytes");

/* Blocks [lo, hi) of group @g changed (under its mu). */
static inline void fs_group_mark(struct fs_group *g, uint64_t lo, uint64_t hi)
{
	if (!g->dirty || lo < g->dlo)
		g->dlo = lo;
	if (!g->dirty || hi > g->dhi)
		g->dhi = hi;
	g->dirty = true;
}

struct fs_defer {
	uint64_t blk, n, seq;
};

struct fs_nodemap {
	pthread_mutex_t mu;		/* leaf: everything below */
	uint64_t start, nslots, reserve;
	uint64_t *bm;			/* 1 bit per slot, set = used */
	uint64_t nused, cursor;
	uint64_t nchunks;
	bool *cdirty;			/* chunk changed since the commit looked */
	uint64_t *chash;		/* hash of the chunk's item in the tree, 0: none */
	uint64_t *chash_ok;		/* ... as of the last successful commit */
	uint64_t errors;		/* frees of free slots */
	/* Slots held for a discard (fspace.h): set here and in bm (no
	 * allocation takes them), written as free.  NULL until the first
	 * hold; cv: an unhold, for allocations that found only held slots. */
	uint64_t *hb;
	uint64_t nheld;
	pthread_cond_t cv;
	/* nused - nheld, stored under mu at every change and read without
	 * it (fspace_nodes_used: the node gate asks it before every write). */
	_Atomic uint64_t used_pub;
};

/* nm->mu held: publish what fspace_nodes_used answers. */
static inline void fs_nodemap_pub(struct fs_nodemap *nm)
{
	atomic_store_explicit(&nm->used_pub, nm->nused - nm->nheld, memory_order_relaxed);
}

struct fspace {
	struct fspace_params p;
	uint64_t total, ngroups, gwords;	/* gwords: bitmap words per group */
	struct bstore *io;
	struct bstore nstore, fstore;	/* other trees' store; the free tree's */
	struct btree tree;
	struct fs_nodemap nm;
	_Atomic uint64_t nfree;		/* free blocks minus reservations */
	_Atomic uint64_t loaded_bytes, nloaded, loads, evictions, errors;

	pthread_mutex_t evict_mu;	/* the clock hand */
	uint64_t hand;

	pthread_mutex_t defer_mu;	/* leaf */
	struct fs_defer *defer;
	size_t ndefer, defercap;
	_Atomic uint64_t deferred;

	pthread_mutex_t commit_mu;	/* one commit at a time; below */
	uint64_t *carry;		/* own freed nodes not yet released */
	size_t ncarry;
	bool committing;		/* committed, not yet done/aborted */
	/* Sorted slots: those the open commit frees (its last map round),
	 * and those the last published one freed, which the tree of the
	 * older superblock slot still uses (fallback_known: a commit was
	 * published since open).  The discard hook (fspace_set_node_discard). */
	uint64_t *freeing, *fallback;
	size_t nfreeing, nfallback;
	bool fallback_known;
	int (*dfn)(void *ctx, uint64_t addr, uint64_t n);
	void *dctx;
	uint64_t commits, items_written, items_read;

	struct fs_group *groups;
};

static inline uint64_t fs_gstart(const struct fspace *fs, uint64_t gi)
{
	return gi * fs->p.gblocks;
}

static inline uint64_t fs_glen(const struct fspace *fs, uint64_t gi)
{
	uint64_t s = fs_gstart(fs, gi);

	return fs->total - s < fs->p.gblocks ? fs->total - s : fs->p.gblocks;
}

/* fspace.c */
int fs_group_load(struct fspace *fs, uint64_t gi);
/* Evict clean, unpinned group bitmaps past the budget (fspace.c). */
void fs_groups_trim(struct fspace *fs);
/* fn(ctx, ...) for each item of the free-space tree in [start, end),
 * until it returns nonzero (that is returned). */
int fs_tree_each(struct fspace *fs, const struct bkey *start, const struct bkey *end,
		 int (*fn)(void *ctx, const struct bkey *k, const void *val, unsigned len),
		 void *ctx);

/* fspace_node.c */
int fs_nodemap_init(struct fspace *fs);
void fs_nodemap_destroy(struct fspace *fs);
/* Chunk @c's value (FSPACE_MAP_BYTES) with the sorted @pend slots as free;
 * returns its hash (0 when all free).  Under nm.mu. */
uint64_t fs_nodemap_chunk(struct fspace *fs, uint64_t c, const uint64_t *pend, size_t npend,
			  uint8_t *val);
/* Load chunk @c from an item's value. */
int fs_nodemap_load(struct fspace *fs, uint64_t c, const uint8_t *val, unsigned len);
bool fs_node_slot(const struct fspace *fs, uint64_t addr, uint64_t *slot);

/* fspace_node.c: a commit was published (under commit_mu, after its freed
 * nodes went back): hold and hand to the discard hook the slots of the
 * previous fallback still free; the ones this commit freed are the new. */
void fs_node_published(struct fspace *fs);

#endif
