/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * bmap: word-at-a-time scans of a block bitmap (bit set = in use), shared
 * by the v1 allocator (alloc.c) and the v2 one (fspace.c).  Scans skip
 * whole words, so a nearly full or nearly empty area is not walked bit by
 * bit.  No locking: the caller owns the words it touches.
 */
#ifndef TWINFS_BMAP_H
#define TWINFS_BMAP_H

#include <stdint.h>

static inline uint64_t word_mask(uint64_t from, uint64_t to)
{
	/* bits [from & 63, to - (from & ~63)) of the word holding @from; to > from */
	uint64_t lo = from & 63, hi = to - (from & ~63ull);
	uint64_t m = ~0ull << lo;
	if (hi < 64)
		m &= (1ull << hi) - 1;
	return m;
}

/* First bit in [pos, end) that is set once xor-ed with @flip, or end. */
static inline uint64_t bm_next(const uint64_t *bm, uint64_t pos, uint64_t end, uint64_t flip)
{
	while (pos < end) {
		uint64_t w = pos >> 6;
		uint64_t bits = (bm[w] ^ flip) & (~0ull << (pos & 63));
		if (bits) {
			uint64_t r = (w << 6) + (uint64_t)__builtin_ctzll(bits);
			return r < end ? r : end;
		}
		pos = (w + 1) << 6;
	}
	return end;
}

/* First clear bit in [pos, end), or end. */
static inline uint64_t bm_next_zero(const uint64_t *bm, uint64_t pos, uint64_t end)
{
	return bm_next(bm, pos, end, ~0ull);
}

/* First set bit in [pos, end), or end. */
static inline uint64_t bm_next_one(const uint64_t *bm, uint64_t pos, uint64_t end)
{
	return bm_next(bm, pos, end, 0);
}

/* Last set bit in [lo, pos) plus one, or lo: the start of the free run ending at pos. */
static inline uint64_t bm_prev_one_end(const uint64_t *bm, uint64_t lo, uint64_t pos)
{
	while (pos > lo) {
		uint64_t w = (pos - 1) >> 6;
		uint64_t bits = bm[w];
		uint64_t top = pos - (w << 6);	/* 1..64 bits of this word are below pos */
		if (top < 64)
			bits &= (1ull << top) - 1;
		if (bits) {
			uint64_t r = (w << 6) + 64 - (uint64_t)__builtin_clzll(bits);
			return r > lo ? r : lo;
		}
		pos = w << 6;
	}
	return lo;
}

static inline void bm_set(uint64_t *bm, uint64_t from, uint64_t to)
{
	while (from < to) {
		uint64_t m = word_mask(from, to);
		bm[from >> 6] |= m;
		from = ((from >> 6) + 1) << 6;
	}
}

static inline void bm_clear(uint64_t *bm, uint64_t from, uint64_t to)
{
	while (from < to) {
		uint64_t m = word_mask(from, to);
		bm[from >> 6] &= ~m;
		from = ((from >> 6) + 1) << 6;
	}
}

/* A map's bm_next: the first bit in [pos, end) set once xor-ed with flip.
 * run_find's callers pass a constant, so the call inlines. */
typedef uint64_t (*bm_next_fn)(const void *map, uint64_t pos, uint64_t end, uint64_t flip);

/*
 * A run of @want clear bits of @map (scanned with @next) in [lo, hi), searching from @cursor to hi and
 * then from lo to the cursor.  Returns want (the run at *rs) or, when there
 * is none, the longest run (possibly 0) at *rs.  A run found after the
 * wrap may reach past the cursor (up to hi).
 */
static inline uint64_t run_find(bm_next_fn next, const void *map, uint64_t lo, uint64_t hi,
				uint64_t cursor, uint64_t want, uint64_t *rs)
{
	uint64_t best = 0, bs = lo;
	uint64_t from[2] = { cursor, lo }, limit[2] = { hi, cursor };

	for (int pass = 0; pass < 2; pass++) {
		uint64_t pos = from[pass];

		while (pos < limit[pass]) {
			uint64_t z = next(map, pos, limit[pass], ~0ull), cap, o;

			if (z >= limit[pass])
				break;
			cap = hi - z < want ? hi : z + want;
			o = next(map, z, cap, 0);
			if (o - z >= want) {
				*rs = z;
				return want;
			}
			if (o - z > best) {
				best = o - z;
				bs = z;
			}
			pos = o;
		}
	}
	*rs = bs;
	return best;
}

static inline uint64_t bm_next_map(const void *map, uint64_t pos, uint64_t end, uint64_t flip)
{
	return bm_next(map, pos, end, flip);
}

static inline uint64_t bm_find_run(const uint64_t *bm, uint64_t lo, uint64_t hi,
				   uint64_t cursor, uint64_t want, uint64_t *rs)
{
	return run_find(bm_next_map, bm, lo, hi, cursor, want, rs);
}

/* Set bits in [from, to). */
static inline uint64_t bm_count(const uint64_t *bm, uint64_t from, uint64_t to)
{
	uint64_t n = 0;

	while (from < to) {
		n += (uint64_t)__builtin_popcountll(bm[from >> 6] & word_mask(from, to));
		from = ((from >> 6) + 1) << 6;
	}
	return n;
}

#endif
