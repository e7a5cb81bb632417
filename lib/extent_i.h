/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * extent_i.h: what extent.c and extcache.c share about a format-v2 map's
 * leaves (nobody else includes it).
 *
 * A leaf of a lazy map (extent.h: struct extent_map with xc set) is a
 * struct ext_leaf: its 512 entries first (extent.c hands out pointers into
 * them), then what the cache needs to evict it: the map and the slot that
 * holds it, its first block, and the epoch of its last change (stamp).  A
 * leaf is clean when the checkpoint of its stamp's epoch, or a later one,
 * has committed (stamp <= xc->committed): the tree then holds exactly what
 * it holds, and it may go (the slot back to NULL: not resident).
 */
#ifndef TWINFS_EXTENT_I_H
#define TWINFS_EXTENT_I_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "extcache.h"
#include "extcompact.h"
#include "extent.h"

#define EXT_FAN 512u

/* A slot whose whole span is known to hold no mapped block (a clear, or
 * a fault that found nothing): a hole without a node, never faulted. */
#define EXT_EMPTY ((void *)1)

/*
 * A leaf slot may also hold a changed leaf kept compact (extcompact.h)
 * while nobody uses it: its pointer with bit 1 set.  Only the evictor
 * makes one (under xc->mu, with the leaf's range locked), and it is read
 * and replaced only under xc->mu after checking the slot still holds it
 * (extcache_expand, extcache_compact_read, extcache_leaf_take): users find
 * it under their range lock, but users of the same leaf under shared range
 * locks may expand it, and the evictor may drop it once clean, without
 * their lock.
 */
#define EXT_COMPACT_TAG ((uintptr_t)2)

static inline bool ext_is_compact(const void *p)
{
	return ((uintptr_t)p & EXT_COMPACT_TAG) != 0;
}

static inline struct ext_compact *ext_compact_of(void *p)
{
	return (struct ext_compact *)((uintptr_t)p & ~EXT_COMPACT_TAG);
}

struct ext_leaf {
	struct extent_ent e[EXT_FAN];
	struct extent_map *m;
	void **slot;			/* where the map holds it */
	uint64_t base;			/* first block of its span */
	_Atomic uint64_t stamp;		/* epoch of its last change; 0: as read */
	atomic_bool ref;		/* used since the evictor last looked */
	struct ext_link link;		/* the cache's list, under xc->mu */
};

/*
 * An interior node of a lazy map: its slots first (walks index them as an
 * array of pointers), then the epoch of the last change that made one of
 * them EXT_EMPTY (a clear; or the node made from an EXT_EMPTY slot).  A
 * level-1 node (one per 2^18 blocks, 1 GiB, of a file's span) whose slots
 * are all NULL or EXT_EMPTY and whose stamp is committed says nothing the
 * tree does not: the evictor frees it when its last leaf goes
 * (extcache.c inner_evict), so interior nodes follow the resident leaves,
 * not the span of the file.
 */
struct ext_inner {
	void *s[EXT_FAN];
	_Atomic uint64_t stamp;		/* 0: nothing EXT_EMPTY that the tree lacks */
};

#define EXTCACHE_CHG_STRIPES 64

struct extent_cache {
	pthread_mutex_t mu;		/* leaf: the list */
	struct extent_src src;
	struct ext_list full;		/* full leaves (struct ext_leaf) */
	struct ext_list small;		/* compact leaves (struct ext_compact) */
	bool compact;			/* keep unused changed leaves compact */
	_Atomic uint64_t compacts, compact_bytes;	/* resident compact leaves */
	_Atomic uint64_t compactions, expansions, compact_drops;
	_Atomic uint64_t budget;	/* bytes of leaves kept at most (clean ones go) */
	_Atomic uint64_t leaves, faults, empty_faults, evictions, fault_errors;
	_Atomic uint64_t inner;		/* interior nodes of lazy maps (ext_inner) */
	_Atomic uint64_t inner_freed;	/* of them, freed by the evictor */
	_Atomic uint64_t scanned;	/* leaves the evictor looked at */
	_Atomic uint64_t counted;	/* evictions told to memtrim (give_back) */
	_Atomic uint64_t epoch;		/* changes now belong to this one */
	_Atomic uint64_t committed;	/* epochs up to this are in the tree */
	uint64_t swept;			/* under mu: committed at the last full
					 * trim that left no clean leaf behind
					 * (UINT64_MAX: none yet / budget changed) */
	/* Under mu: bounded trims put off once they went round the list
	 * freeing nothing (trim_in): the leaves they looked at since one
	 * freed a leaf, leaves in before the next trim, the wait after the
	 * next futile one, and the commit they were counted from. */
	uint64_t idle_looks;
	unsigned idle_skip, idle_next;
	uint64_t idle_at;
	void (*pressure)(void *ctx);	/* ask for a checkpoint (may be NULL) */
	void *pressure_ctx;
	atomic_bool pressure_sent;	/* asked since the last commit */
	/* Changes of the source's items (extcache_src_changing), by stripe
	 * of inode numbers: how many are under way (chg_mu) and a count
	 * bumped as each starts and ends, which a read compares. */
	pthread_mutex_t chg_mu;		/* leaf */
	pthread_cond_t chg_cv;
	unsigned chg_active[EXTCACHE_CHG_STRIPES];
	_Atomic uint64_t chg_gen[EXTCACHE_CHG_STRIPES];
	_Atomic uint64_t src_redone;
	/* Pending extent records of the maps (extpend.h): the maps holding
	 * some, listed under pend_mu (taken before a map's pend lock), and
	 * their count and bytes against pend_max. */
	pthread_mutex_t pend_mu;
	struct ext_pend *pend_list;
	_Atomic uint64_t pend_pieces, pend_bytes, pend_applied, pend_max;
};

/* Reads of the source for file @ino: _begin waits out a change under way
 * and returns the stamp that _same compares once the read is done (false:
 * redo it). */
uint64_t extcache_src_begin(struct extent_cache *xc, uint64_t ino);
bool extcache_src_same(struct extent_cache *xc, uint64_t ino, uint64_t stamp);

/* A leaf now in its slot: counted and listed; then clean leaves over the
 * budget go (never @l itself). */
void extcache_leaf_in(struct extent_cache *xc, struct ext_leaf *l);
/* Under xc->mu, the leaf in *slot (if any, full or compact) unlisted and
 * *slot set to @repl: the leaf for the caller to free (a compact one
 * tagged), or what the slot held (NULL: evicted meanwhile, EXT_EMPTY). */
void *extcache_leaf_take(struct extent_cache *xc, void **slot, void *repl);
/* The compact leaf @tagged found in *slot (by a user holding its range
 * lock) made a full leaf again, in its place: 0 (also when the slot no
 * longer holds it: look again) or -ENOMEM. */
int extcache_expand(struct extent_cache *xc, void **slot, void *tagged);
/* Its entries copied to @out (EXT_FAN of them): 0, or 1 when the slot no
 * longer holds it (look again). */
int extcache_compact_read(struct extent_cache *xc, void **slot, void *tagged,
			  struct extent_ent *out);

/* ---- shared by extent.c and extent_lazy.c ---- */

#define EXT_LVL_BITS 9
#define EXT_TOP_LOW 3		/* level of the low tree's root; leaves are level 0 */
#define EXT_TOP_HIGH 5		/* level of the high tree's root: 54 bits >= 51 */

/* Blocks covered by one node (or leaf) at level @lvl. */
static inline uint64_t ext_span(int lvl)
{
	return 1ull << (EXT_LVL_BITS * (lvl + 1));
}

static inline unsigned ext_slot(uint64_t fblk, int lvl)
{
	return (unsigned)(fblk >> (EXT_LVL_BITS * lvl)) & (EXT_FAN - 1);
}

static inline void *ext_load(void *const *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

/* Coalesces dropped blocks into physical runs before calling drop. */
struct ext_dropper {
	extent_drop_fn fn;
	void *ctx;
	uint64_t start, n;
};

static inline void ext_drop_flush(struct ext_dropper *d)
{
	if (d->n && d->fn)
		d->fn(d->ctx, d->start, d->n);
	d->n = 0;
}

static inline void ext_drop_run(struct ext_dropper *d, uint64_t phys, uint64_t n)
{
	phys = EXTENT_PHYS(phys);
	if (d->n && phys == d->start + d->n) {
		d->n += n;
		return;
	}
	ext_drop_flush(d);
	d->start = phys;
	d->n = n;
}

static inline void ext_mapped_add(struct extent_map *m, int64_t delta)
{
	if (delta > 0)
		atomic_fetch_add_explicit(&m->mapped, (uint64_t)delta, memory_order_relaxed);
	else if (delta < 0)
		atomic_fetch_sub_explicit(&m->mapped, (uint64_t)-delta, memory_order_relaxed);
}

/* The level-1 node holding leaf slot @slot (of the leaf of block @base). */
static inline struct ext_inner *inner_of(void **slot, uint64_t base)
{
	return (struct ext_inner *)(slot - ext_slot(base, 1));
}

static inline void inner_free(struct extent_cache *xc, void *node)
{
	atomic_fetch_sub(&xc->inner, 1);
	free(node);
}

/* Bytes of the leaves, full and compact. */
static inline uint64_t extcache_leaf_bytes(struct extent_cache *xc)
{
	return atomic_load(&xc->leaves) * sizeof(struct ext_leaf) +
	       atomic_load(&xc->compact_bytes);
}

/* Bytes the budget counts: the leaves and the interior nodes above them. */
static inline uint64_t extcache_bytes(struct extent_cache *xc)
{
	return extcache_leaf_bytes(xc) + atomic_load(&xc->inner) * sizeof(struct ext_inner);
}

/* extent_lazy.c: the operations of a map with xc set. */
int extlz_set(struct extent_map *m, uint64_t fblk, uint32_t n, uint64_t phys,
	      const void *csums, extent_drop_fn drop, void *ctx);
int extlz_clear(struct extent_map *m, uint64_t fblk, uint64_t n, extent_drop_fn drop, void *ctx,
		bool destroy);
int extlz_lookup(struct extent_map *m, uint64_t fblk, struct extent_ent *out);
/* This thread's changes from now on stamped with @epoch (0: the current
 * one again): a checkpoint applying pending records (extpend.h) to ranges
 * it writes stamps them with its own epoch, so the leaves are clean once
 * it commits, as leaves the replay changed are. */
void extlz_stamp_as(uint64_t epoch);
uint64_t extlz_next_data(struct extent_map *m, uint64_t fblk);
uint64_t extlz_next_hole(struct extent_map *m, uint64_t fblk);
int extlz_walk(struct extent_map *m, uint64_t from, uint64_t to, extent_run_fn cb, void *ctx);
int extlz_resident(struct extent_map *m, uint64_t from, uint64_t to, extent_piece_fn cb,
		   void *ctx);

#endif
