/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * alloc_map: alloc.c's used map in chunks (struct achunk, alloc_i.h):
 * giving a chunk words when a change leaves it mixed and taking them back
 * when it becomes uniform, range sets and clears, and the scans of
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
		uint64_t *w = malloc(CH_WORDS * 8);

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
