/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * alloc internals, shared by alloc.c (the allocator) and alloc_track.c
 * (taking the changes it records for format v2; above alloc.c).
 */
#ifndef TWINFS_ALLOC_I_H
#define TWINFS_ALLOC_I_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include "alloc.h"

#define CHG_SHIFT 12u			/* used-map change chunks: 4096 blocks */

/*
 * The used map in chunks of CH_BLOCKS blocks (4 KiB of words each), so
 * that it costs memory only where it is mixed: a chunk whose blocks are
 * all free or all used holds no words, only its count.  Bits past the
 * area's end read as used (they are set in the last chunk, which is thus
 * never all free and keeps its words unless it is all used).
 */
#define CH_SHIFT 15u
#define CH_BLOCKS (1ull << CH_SHIFT)
#define CH_WORDS (CH_BLOCKS / 64)
#define AG_SPARE 2u			/* chunk words a group keeps for reuse */
#define AG_PEND 8u			/* pending frees a group keeps in place */
#define RUN_UNKNOWN UINT64_MAX		/* struct ag's maxrun: no bound known */

struct achunk {
	uint64_t *w;			/* CH_WORDS words, or NULL: uniform */
	uint32_t used;			/* set bits: 0 or CH_BLOCKS when uniform */
};

/* Extra references (count - 1) of one shared block; key = blk + 1, 0 = empty. */
struct ref_ent {
	uint64_t key;
	uint32_t extra;
};

struct ag {
	pthread_mutex_t mu;
	/* Everything below, and the bitmap words of [gstart, gend), under mu. */
	uint64_t gstart, gend;		/* block offsets relative to the area start */
	uint64_t free;
	uint64_t cursor;		/* next search starts here */
	uint64_t maxrun;		/* upper bound of the longest free run; reset on frees */
	size_t npend;			/* runs in the pend list (below) */
	struct ref_ent *refs;		/* open addressing, linear probing */
	uint64_t nrefs, refcap;		/* refcap is 0 or a power of two */
	/* Tracking: runs whose extra references changed, absolute blocks,
	 * in the order they changed; rchg_all: a run was lost (no memory),
	 * the whole group counts as changed. */
	struct alloc_run *rchg;
	size_t nrchg, rchgcap;
	bool rchg_all;
	/* Words of chunks that became uniform, for the next one that
	 * becomes mixed (no malloc while a group churns). */
	uint64_t *spare[AG_SPARE];
	unsigned nspare;
	/* Frees waiting for memory (alloc_map.h, pend_*): area-relative runs
	 * whose last references are gone but whose bits are still set,
	 * because a chunk they leave mixed found no words.  Nothing can
	 * allocate them meanwhile; a later put in the group, a failing
	 * alloc_get and alloc_retry_frees (each v2 checkpoint) clear them.
	 * The first AG_PEND in place, so that a pend needs no memory; more
	 * in pendx (malloc'd, only when those are full). */
	struct alloc_run pend[AG_PEND];
	struct alloc_run *pendx;
	size_t pendxcap;
} __attribute__((aligned(64)));

struct defer_ent {
	uint64_t blk, n, seq;
};

struct alloc {
	uint64_t start, end, total, reserve;
	/* The metadata reserve: the last `reserve` blocks are a nested
	 * allocator only ALLOC_META may use, so a checkpoint always finds a
	 * contiguous run however fragmented a full data area is.  NULL in the
	 * nested one (and when there is no reserve). */
	struct alloc *tail;
	/* Bit i = block start + i is used.  A chunk (its words and count)
	 * belongs to the group holding it and is under that group's mu:
	 * groups start at multiples of CH_BLOCKS. */
	struct achunk *ch;
	uint64_t nchunks;
	_Atomic uint64_t bm_bytes;	/* chunk words allocated (spares included) */
	_Atomic uint64_t wchunks;	/* chunks with words */
	unsigned ngroups;
	uint64_t gsize;			/* blocks per group but the last */
	_Atomic uint64_t nfree;		/* free blocks minus outstanding reservations */
	_Atomic uint64_t errors;	/* double frees, out-of-range puts */
	_Atomic uint64_t pending;	/* blocks in the groups' pend lists */
	_Atomic uint64_t *chg;		/* tracking: changed used-map chunks, or NULL */

	pthread_mutex_t defer_mu;
	/* under defer_mu */
	struct defer_ent *defer;
	size_t ndefer, defercap;

	/*
	 * Discard (top level only): blocks a release frees are handed to
	 * discard_fn still marked used ("held"), so nothing can allocate and
	 * write them while their discard is in flight; alloc_unhold frees
	 * them.  discard_fn is set before any release and cleared only when
	 * no other thread frees blocks any more (alloc_set_discard).
	 */
	int (*discard_fn)(void *ctx, uint64_t blk, uint64_t n);
	void *discard_ctx;
	_Atomic uint64_t held;		/* blocks held for a discard */
	pthread_mutex_t hold_mu;	/* leaf lock for waiting on hold_cv */
	pthread_cond_t hold_cv;		/* an unhold happened */
	/* Unholds so far: read lock-free by every alloc_get (no global lock
	 * on the data path), bumped before hold_cv is broadcast under
	 * hold_mu, and compared under hold_mu by a waiter, so no wakeup is
	 * lost. */
	_Atomic uint64_t unholds;

	struct ag groups[];
};

/* The uniform value of a chunk without words, as a word. */
static inline uint64_t ch_fill(const struct achunk *c)
{
	return c->used ? ~0ull : 0;
}

/* Word @wi of the used map.  Under the lock of the group holding it. */
static inline uint64_t cw_get(const struct alloc *a, uint64_t wi)
{
	const struct achunk *c = &a->ch[wi / CH_WORDS];

	return c->w ? c->w[wi % CH_WORDS] : ch_fill(c);
}

static inline unsigned group_of(const struct alloc *a, uint64_t off)
{
	uint64_t gi = off / a->gsize;
	return gi >= a->ngroups ? a->ngroups - 1 : (unsigned)gi;
}

static inline uint64_t tail_start(const struct alloc *a)
{
	return a->tail ? a->tail->start : UINT64_MAX;
}

/* ---- change tracking (alloc_track) ---- */

/* Used-map blocks [pos, end) (area-relative) changed. */
static inline void chg_mark(struct alloc *a, uint64_t pos, uint64_t end)
{
	if (!a->chg || pos >= end)
		return;
	for (uint64_t c = pos >> CHG_SHIFT; c <= (end - 1) >> CHG_SHIFT; c++)
		if (!(atomic_load(&a->chg[c >> 6]) & (1ull << (c & 63))))
			atomic_fetch_or(&a->chg[c >> 6], 1ull << (c & 63));
}

/* Block @blk's extra references changed.  Under g->mu. */
static inline void rchg_mark(struct alloc *a, struct ag *g, uint64_t blk)
{
	struct alloc_run *last = g->nrchg ? &g->rchg[g->nrchg - 1] : NULL;

	if (!a->chg || g->rchg_all)
		return;
	if (last && blk >= last->blk && blk <= last->blk + last->n) {
		last->n += blk == last->blk + last->n;	/* inside it: recorded */
		return;
	}
	if (g->nrchg == g->rchgcap) {
		size_t cap = g->rchgcap ? g->rchgcap * 2 : 16;
		struct alloc_run *r = realloc(g->rchg, cap * sizeof(*r));

		if (!r) {
			g->rchg_all = true;
			return;
		}
		g->rchg = r;
		g->rchgcap = cap;
	}
	g->rchg[g->nrchg++] = (struct alloc_run){ blk, 1 };
}

#endif
