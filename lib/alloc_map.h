/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * alloc_map: alloc.c's used map in chunks (struct achunk, alloc_i.h):
 * giving a chunk words when a change leaves it mixed and taking them back
 * when it becomes uniform, range sets and clears, frees that wait for
 * words (pend_*: a free must never lose blocks), and the scans of
 * bmap.h over the chunks (a chunk without words in O(1)).  Everything
 * here runs under the lock of the group holding the chunk.  Included by
 * alloc.c only: inline, as the data path runs through it.
 */
#ifndef TWINFS_ALLOC_MAP_H
#define TWINFS_ALLOC_MAP_H

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_i.h"
#include "bmap.h"

/*
 * Test hook (alloc_fail_words, TWINFS_ALLOC_WORDS_FAIL): the chunk-word
 * allocations numbered [wfail_from, wfail_from + wfail_n) fail.  One
 * relaxed load while off.  (Only alloc.c includes this header.)
 */
static _Atomic uint64_t wfail_n, wfail_seen, wfail_from;

static inline bool words_fail(void)
{
	uint64_t k, from;

	if (!atomic_load_explicit(&wfail_n, memory_order_relaxed))
		return false;
	k = atomic_fetch_add(&wfail_seen, 1);
	from = atomic_load(&wfail_from);
	return k >= from && k - from < atomic_load(&wfail_n);
}

/* Chunk @c (uniform now) gives its words to its group's spares. */
static inline void ch_drop_words(struct alloc *a, struct ag *g, struct achunk *c)
{
	uint64_t *w = c->w;

	if (!w)
		return;
	c->w = NULL;
	atomic_fetch_sub(&a->wchunks, 1);
	if (g->nspare < AG_SPARE) {
		g->spare[g->nspare++] = w;
		return;
	}
	free(w);
	atomic_fetch_sub(&a->bm_bytes, CH_WORDS * 8);
}

/* A spare for each chunk about to become mixed; 0 or -ENOMEM. */
static inline int spares_ensure(struct alloc *a, struct ag *g, unsigned need)
{
	while (g->nspare < need) {
		uint64_t *w = words_fail() ? NULL : malloc(CH_WORDS * 8);

		if (!w)
			return -ENOMEM;
		atomic_fetch_add(&a->bm_bytes, CH_WORDS * 8);
		g->spare[g->nspare++] = w;
	}
	return 0;
}

/* Give chunk @c words holding its uniform value.  0 or -ENOMEM. */
static inline int ch_materialize(struct alloc *a, struct ag *g, struct achunk *c)
{
	if (c->w)
		return 0;
	if (spares_ensure(a, g, 1))
		return -ENOMEM;
	c->w = g->spare[--g->nspare];
	atomic_fetch_add(&a->wchunks, 1);
	memset(c->w, c->used ? 0xff : 0, CH_WORDS * 8);
	return 0;
}

/* A chunk that became uniform gives its words back. */
static inline void ch_settle(struct alloc *a, struct ag *g, struct achunk *c)
{
	if (!c->used || c->used == CH_BLOCKS)
		ch_drop_words(a, g, c);
}

/* Would setting (@set) or clearing [from, to) of chunk @ci leave it mixed
 * while it has no words? */
static inline bool ch_needs_words(const struct alloc *a, uint64_t ci, uint64_t from,
				  uint64_t to, bool set)
{
	const struct achunk *c = &a->ch[ci];
	uint64_t cs = ci << CH_SHIFT;

	if (c->w || (from <= cs && to >= cs + CH_BLOCKS))
		return false;
	return set ? c->used != CH_BLOCKS : c->used != 0;
}

/*
 * Make sure a set or clear of [from, to) (inside group @g) cannot fail:
 * only the chunks at its two ends can become mixed, the ones between are
 * covered whole and flip.  0 or -ENOMEM, nothing changed.
 */
static inline int range_prepare(struct alloc *a, struct ag *g, uint64_t from, uint64_t to,
				bool set)
{
	uint64_t c0 = from >> CH_SHIFT, c1 = (to - 1) >> CH_SHIFT;
	unsigned need;

	if (from >= to)
		return 0;
	need = ch_needs_words(a, c0, from, to, set);
	if (c1 != c0)
		need += ch_needs_words(a, c1, from, to, set);
	return spares_ensure(a, g, need);
}

/* Set or clear [from, to) of words @w; returns the bits that changed
 * (all of them when @all_change: no counting on the data path). */
static inline uint64_t words_apply(uint64_t *w, uint64_t from, uint64_t to, bool set,
				   bool all_change)
{
	uint64_t n = 0;

	if (all_change)
		n = to - from;
	while (from < to) {
		uint64_t m = word_mask(from, to), *p = &w[from >> 6];

		if (!all_change)
			n += (uint64_t)__builtin_popcountll(set ? ~*p & m : *p & m);
		*p = set ? *p | m : *p & ~m;
		from = ((from >> 6) + 1) << 6;
	}
	return n;
}

/*
 * Set or clear [from, to) (inside group @g, range_prepare'd): a chunk
 * covered whole flips without words.  Returns the bits that changed;
 * @all_change: the caller knows every bit changes (they were all free).
 */
static inline uint64_t range_apply(struct alloc *a, struct ag *g, uint64_t from, uint64_t to,
				   bool set, bool all_change)
{
	uint64_t changed = 0;

	while (from < to) {
		struct achunk *c = &a->ch[from >> CH_SHIFT];
		uint64_t cs = from & ~(CH_BLOCKS - 1), e = to < cs + CH_BLOCKS ? to : cs + CH_BLOCKS;

		if (from == cs && e == cs + CH_BLOCKS) {
			changed += set ? CH_BLOCKS - c->used : c->used;
			c->used = set ? CH_BLOCKS : 0;
			ch_drop_words(a, g, c);
		} else if (c->w || ch_fill(c) != (set ? ~0ull : 0)) {
			uint64_t n;

			if (ch_materialize(a, g, c))
				abort();	/* range_prepare made room */
			n = words_apply(c->w, from - cs, e - cs, set, all_change);
			c->used = set ? c->used + (uint32_t)n : c->used - (uint32_t)n;
			changed += n;
			ch_settle(a, g, c);
		}
		from = e;
	}
	return changed;
}

/* range_prepare + range_apply: 0 (*changed set) or -ENOMEM. */
static inline int range_change(struct alloc *a, struct ag *g, uint64_t from, uint64_t to,
			       bool set, uint64_t *changed)
{
	int ret = range_prepare(a, g, from, to, set);

	if (!ret)
		*changed = range_apply(a, g, from, to, set, false);
	return ret;
}

/* ---- frees waiting for words (struct ag's pend lists) ---- */

static inline struct alloc_run *pend_at(struct ag *g, size_t i)
{
	return i < AG_PEND ? &g->pend[i] : &g->pendx[i - AG_PEND];
}

/*
 * Blocks [rs, rs + n) (area-relative, last references gone, bits set)
 * could not be cleared for want of words: keep them for pend_retry.  Joins
 * the last run when they touch it (a large free pends one run per chunk
 * edge at most); past AG_PEND runs the list grows by malloc, 16 bytes a
 * run against the 4 KiB a chunk's words cost.  Only when that fails too
 * are the blocks lost (counted with the errors, as before).  Under g->mu.
 */
static inline void pend_add(struct alloc *a, struct ag *g, uint64_t rs, uint64_t n)
{
	struct alloc_run *last = g->npend ? pend_at(g, g->npend - 1) : NULL;

	if (last && last->blk + last->n == rs) {
		last->n += n;
	} else if (last && rs + n == last->blk) {
		last->blk = rs;
		last->n += n;
	} else {
		if (g->npend >= AG_PEND + g->pendxcap) {
			size_t cap = g->pendxcap ? g->pendxcap * 2 : 16;
			struct alloc_run *x = realloc(g->pendx, cap * sizeof(*x));

			if (!x) {
				atomic_fetch_add(&a->errors, n);
				return;
			}
			g->pendx = x;
			g->pendxcap = cap;
		}
		*pend_at(g, g->npend++) = (struct alloc_run){ rs, n };
	}
	atomic_fetch_add(&a->pending, n);
}

/* pend_add each run of set bits of @m in word @wi. */
static inline void pend_bits(struct alloc *a, struct ag *g, uint64_t wi, uint64_t m)
{
	while (m) {
		uint64_t bit = (uint64_t)__builtin_ctzll(m), rest = ~(m >> bit);
		uint64_t k = rest ? (uint64_t)__builtin_ctzll(rest) : 64 - bit;

		m = k == 64 ? 0 : m & ~(((1ull << k) - 1) << bit);
		pend_add(a, g, (wi << 6) | bit, k);
	}
}

/*
 * Clear what @g's pend list holds, last run first, until memory runs
 * short again: freed and counted, as a put would.  Returns the blocks
 * freed.  Under g->mu.
 */
static inline uint64_t pend_retry(struct alloc *a, struct ag *g)
{
	uint64_t freed = 0;

	while (g->npend) {
		struct alloc_run *r = pend_at(g, g->npend - 1);
		uint64_t changed;

		if (range_change(a, g, r->blk, r->blk + r->n, false, &changed))
			break;
		chg_mark(a, r->blk, r->blk + r->n);
		atomic_fetch_sub(&a->pending, r->n);
		freed += changed;
		g->npend--;
	}
	if (freed) {
		g->free += freed;
		g->maxrun = RUN_UNKNOWN;
		atomic_fetch_add(&a->nfree, freed);
	}
	if (!g->npend && g->pendx) {
		free(g->pendx);
		g->pendx = NULL;
		g->pendxcap = 0;
	}
	return freed;
}

/*
 * A use of blocks that wait (alloc_use: a reference comes back, e.g. the
 * accounting copy's +1 for a block a -1 left waiting) takes them off the
 * list: one overlap of [from, to) with a run, removed, in *out; false
 * when none is left.  Their bits are set already: the caller's use counted
 * them as shared, and must take that extra reference back.  Under g->mu.
 */
static inline bool pend_take(struct alloc *a, struct ag *g, uint64_t from, uint64_t to,
			     struct alloc_run *out)
{
	for (size_t i = 0; i < g->npend; i++) {
		struct alloc_run *r = pend_at(g, i);
		uint64_t re = r->blk + r->n, os = r->blk > from ? r->blk : from;
		uint64_t oe = re < to ? re : to;

		if (os >= oe)
			continue;
		*out = (struct alloc_run){ os, oe - os };
		atomic_fetch_sub(&a->pending, oe - os);
		if (os == r->blk && oe == re) {
			*r = *pend_at(g, --g->npend);
		} else if (os == r->blk) {
			*r = (struct alloc_run){ oe, re - oe };
		} else {
			r->n = os - r->blk;
			if (oe < re) {	/* split: the right part anew */
				atomic_fetch_sub(&a->pending, re - oe);
				pend_add(a, g, oe, re - oe);
			}
		}
		return true;
	}
	return false;
}

/* Clear bits @m (all set, @k of them) of word @wi.  0 or -ENOMEM. */
static inline int word_clear(struct alloc *a, struct ag *g, uint64_t wi, uint64_t m, uint64_t k)
{
	struct achunk *c = &a->ch[wi / CH_WORDS];

	if (!m)
		return 0;
	if (ch_materialize(a, g, c))
		return -ENOMEM;
	c->w[wi % CH_WORDS] &= ~m;
	c->used -= (uint32_t)k;
	ch_settle(a, g, c);
	return 0;
}

/* bm_next over the chunks: a chunk without words costs O(1). */
static inline uint64_t cbm_next(const struct alloc *a, uint64_t pos, uint64_t end, uint64_t flip)
{
	while (pos < end) {
		const struct achunk *c = &a->ch[pos >> CH_SHIFT];
		uint64_t cs = pos & ~(CH_BLOCKS - 1), e = end < cs + CH_BLOCKS ? end : cs + CH_BLOCKS;

		if (c->w) {
			uint64_t r = bm_next(c->w, pos - cs, e - cs, flip);

			if (r < e - cs)
				return cs + r;
		} else if (ch_fill(c) ^ flip) {
			return pos;
		}
		pos = e;
	}
	return end;
}

static inline uint64_t cbm_next_zero(const struct alloc *a, uint64_t pos, uint64_t end)
{
	return cbm_next(a, pos, end, ~0ull);
}

static inline uint64_t cbm_next_one(const struct alloc *a, uint64_t pos, uint64_t end)
{
	return cbm_next(a, pos, end, 0);
}

/* bm_prev_one_end over the chunks. */
static inline uint64_t cbm_prev_one_end(const struct alloc *a, uint64_t lo, uint64_t pos)
{
	while (pos > lo) {
		uint64_t ci = (pos - 1) >> CH_SHIFT, cs = ci << CH_SHIFT, l = lo > cs ? lo : cs;
		const struct achunk *c = &a->ch[ci];

		if (c->w) {
			uint64_t r = bm_prev_one_end(c->w, l - cs, pos - cs);

			if (r > l - cs)
				return cs + r;
		} else if (c->used) {
			return pos;
		}
		pos = l;
	}
	return lo;
}

/* bm_find_run over the chunks (bmap.h's run_find with cbm_next). */
static inline uint64_t cbm_next_map(const void *a, uint64_t pos, uint64_t end, uint64_t flip)
{
	return cbm_next(a, pos, end, flip);
}

static inline uint64_t cbm_find_run(const struct alloc *a, uint64_t lo, uint64_t hi,
				    uint64_t cursor, uint64_t want, uint64_t *rs)
{
	return run_find(cbm_next_map, a, lo, hi, cursor, want, rs);
}

/* The first set bit at or after the word following @p's, or @end. */
static inline uint64_t next_word_one(const struct alloc *a, uint64_t p, uint64_t end)
{
	p = ((p >> 6) + 1) << 6;
	return p < end ? cbm_next_one(a, p, end) : end;
}

static inline bool cbm_test(const struct alloc *a, uint64_t off)
{
	return cw_get(a, off >> 6) & (1ull << (off & 63));
}

#endif
