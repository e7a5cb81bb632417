// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * alloc: the free-space allocator of the data area.
 *
 * Owns the in-memory block map: one bit per block (set = at least one
 * reference), a per-group hash of the extra references of shared blocks,
 * the allocation groups (lock, free count, cursor) and the list of deferred
 * frees.  Nothing here is persistent; format v1's mount rebuilds it with
 * alloc_use().  For format v2 (alloc_v2.c), alloc_track() makes it record
 * what changed since the last take: the chunks of the used map (one bit per
 * CHG_BLOCKS blocks, atomic) and, per group, the runs of blocks whose count
 * above 1 changed (under the group's lock).
 *
 * The block map is chunked (alloc_i.h): a chunk of CH_BLOCKS blocks whose
 * blocks are all free or all used has no words, so the map's memory grows
 * with the mixed parts of the area, not with its size or use (a fully used
 * 4 TiB area would hold 128 MiB of words).  A change that leaves a chunk
 * mixed gives it words (its group's spare, kept when another chunk became
 * uniform, or malloc), one that makes it uniform takes them back, and a
 * set or clear covering a chunk whole flips it without words.  Groups
 * start at multiples of CH_BLOCKS, so every chunk belongs to exactly one
 * group and that group's lock protects it (every reader of the map holds
 * it: words are freed under it).  Scans skip a uniform chunk at once and
 * whole words (all-used or all-free) inside a mixed one.
 *
 * The global free count is an atomic that alloc_get() decrements *before*
 * searching (a reservation of at most the request), so the reserve check and
 * the count are exact under concurrency and a search that holds a
 * reservation always finds at least one free block.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_i.h"
#include "alloc_map.h"
#include "bmap.h"

#define AG_MIN_BLOCKS 32768u
#define AG_MAX 8u

/* ---- the test hook: failing chunk-word allocations ---- */

void alloc_fail_words(uint64_t after, uint64_t count)
{
	atomic_store(&wfail_n, 0);
	atomic_store(&wfail_seen, 0);
	atomic_store(&wfail_from, after);
	atomic_store(&wfail_n, count);
}

/* ---- extra reference table (per group, under its lock) ---- */

static inline uint64_t ref_hash(uint64_t key)
{
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdull;
	key ^= key >> 33;
	return key;
}

static struct ref_ent *ref_find(struct ag *g, uint64_t blk)
{
	if (!g->nrefs)
		return NULL;
	uint64_t key = blk + 1, mask = g->refcap - 1;
	for (uint64_t i = ref_hash(key) & mask;; i = (i + 1) & mask) {
		if (g->refs[i].key == key)
			return &g->refs[i];
		if (!g->refs[i].key)
			return NULL;
	}
}

static void ref_insert_slot(struct ref_ent *tab, uint64_t cap, uint64_t key, uint32_t extra)
{
	uint64_t mask = cap - 1;
	uint64_t i = ref_hash(key) & mask;
	while (tab[i].key)
		i = (i + 1) & mask;
	tab[i].key = key;
	tab[i].extra = extra;
}

/* Make room for @more new keys at load <= 1/2.  0 or -ENOMEM. */
static int ref_reserve(struct ag *g, uint64_t more)
{
	uint64_t need = g->nrefs + more;
	if (need * 2 <= g->refcap)
		return 0;
	uint64_t cap = g->refcap ? g->refcap : 16;
	while (cap < need * 2)
		cap *= 2;
	struct ref_ent *tab = calloc(cap, sizeof(*tab));
	if (!tab)
		return -ENOMEM;
	for (uint64_t i = 0; i < g->refcap; i++)
		if (g->refs[i].key)
			ref_insert_slot(tab, cap, g->refs[i].key, g->refs[i].extra);
	free(g->refs);
	g->refs = tab;
	g->refcap = cap;
	return 0;
}

/* Caller has reserved room. */
static void ref_inc(struct ag *g, uint64_t blk)
{
	struct ref_ent *e = ref_find(g, blk);
	if (e) {
		if (e->extra < UINT32_MAX - 1)
			e->extra++;
		return;
	}
	ref_insert_slot(g->refs, g->refcap, blk + 1, 1);
	g->nrefs++;
}

/* Remove slot @e with backward-shift deletion (keeps probe chains intact). */
static void ref_remove(struct ag *g, struct ref_ent *e)
{
	uint64_t mask = g->refcap - 1;
	uint64_t i = (uint64_t)(e - g->refs), j = i;
	for (;;) {
		j = (j + 1) & mask;
		if (!g->refs[j].key)
			break;
		uint64_t home = ref_hash(g->refs[j].key) & mask;
		/* may j's entry move to i?  Only if home is not in (i, j] cyclically. */
		bool between = i <= j ? (home > i && home <= j) : (home > i || home <= j);
		if (between)
			continue;
		g->refs[i] = g->refs[j];
		i = j;
	}
	g->refs[i].key = 0;
	g->refs[i].extra = 0;
	g->nrefs--;
}

/* ---- groups ---- */

/*
 * Find a free run of @want in @g starting the search at the cursor and
 * wrapping.  Returns want (run at *rs) or, when there is none, the longest
 * run (possibly 0) and records it as the group's maxrun.  Under g->mu.
 */
static uint64_t group_search(struct alloc *a, struct ag *g, uint64_t want, uint64_t *rs)
{
	uint64_t best = cbm_find_run(a, g->gstart, g->gend, g->cursor, want, rs);

	if (best < want)
		g->maxrun = best;
	return best;
}

/* Mark [rs, rs+n) used (all free, range_prepare'd) in group @g.  Under g->mu. */
static void group_take_prepared(struct alloc *a, struct ag *g, uint64_t rs, uint64_t n)
{
	range_apply(a, g, rs, rs + n, true, true);
	g->free -= n;
	g->cursor = rs + n < g->gend ? rs + n : g->gstart;
	chg_mark(a, rs, rs + n);
}

/* group_take_prepared, preparing first: 0 or -ENOMEM (nothing taken). */
static int group_take(struct alloc *a, struct ag *g, uint64_t rs, uint64_t n)
{
	int ret = range_prepare(a, g, rs, rs + n, true);

	if (!ret)
		group_take_prepared(a, g, rs, n);
	return ret;
}

static uint64_t group_bound(struct ag *g)
{
	return g->maxrun < g->free ? g->maxrun : g->free;
}

/*
 * Blocks in [pos, end) of @g were freed: raise maxrun to cover the longest
 * run they can have formed (bounded by the used blocks around the range),
 * so a nearly full group is not rescanned after every free.  The scans are
 * capped; past the cap the bound becomes unknown.  Under g->mu.
 */
#define WIDEN_CAP (1ull << 18)
static void group_widen(struct alloc *a, struct ag *g, uint64_t pos, uint64_t end)
{
	if (g->maxrun == RUN_UNKNOWN)
		return;
	uint64_t lo_lim = pos - g->gstart > WIDEN_CAP ? pos - WIDEN_CAP : g->gstart;
	uint64_t hi_lim = g->gend - end > WIDEN_CAP ? end + WIDEN_CAP : g->gend;
	uint64_t lo = cbm_prev_one_end(a, lo_lim, pos);
	uint64_t hi = cbm_next_one(a, end, hi_lim);
	if ((lo == lo_lim && lo_lim > g->gstart) || (hi == hi_lim && hi_lim < g->gend))
		g->maxrun = RUN_UNKNOWN;
	else if (hi - lo > g->maxrun)
		g->maxrun = hi - lo;
}

/* Take [pos, end) across the groups it covers (all locked, free): every
 * group's part is prepared before any changes.  0 or -ENOMEM. */
static int take_across(struct alloc *a, uint64_t pos, uint64_t end)
{
	for (uint64_t p = pos; p < end;) {
		struct ag *g = &a->groups[group_of(a, p)];
		uint64_t e = g->gend < end ? g->gend : end;

		if (range_prepare(a, g, p, e, true))
			return -ENOMEM;
		p = e;
	}
	while (pos < end) {
		struct ag *g = &a->groups[group_of(a, pos)];
		uint64_t e = g->gend < end ? g->gend : end;

		group_take_prepared(a, g, pos, e - pos);
		pos = e;
	}
	return 0;
}

/*
 * A run of @want across group boundaries (only when no group holds one by
 * itself: large requests such as checkpoints).  Takes every group lock in
 * ascending order.  Returns 0 and the run start, -ENOSPC or -ENOMEM.
 */
static int search_across(struct alloc *a, uint64_t want, uint64_t *rs)
{
	int ret = -ENOSPC;
	uint64_t open = 0, ostart = 0;

	for (unsigned i = 0; i < a->ngroups; i++)
		pthread_mutex_lock(&a->groups[i].mu);
	for (unsigned i = 0; i < a->ngroups; i++) {
		struct ag *g = &a->groups[i];
		if (!open)
			ostart = g->gstart;
		uint64_t head = cbm_next_one(a, g->gstart, g->gend) - g->gstart;
		if (open + head >= want) {
			*rs = ostart;
			ret = 0;
			break;
		}
		if (head == g->gend - g->gstart) {
			open += head;
			continue;
		}
		ostart = cbm_prev_one_end(a, g->gstart, g->gend);
		open = g->gend - ostart;
	}
	if (!ret)
		ret = take_across(a, *rs, *rs + want);
	for (unsigned i = a->ngroups; i-- > 0;)
		pthread_mutex_unlock(&a->groups[i].mu);
	return ret;
}

/*
 * Can a run of @want cross a group boundary?  Needs two neighbours whose
 * bounds add up to it, or a wholly free group (which may sit in the middle
 * of a longer run).  Keeps a nearly full area from taking every group lock
 * on each failing request.
 */
static bool may_span(struct alloc *a, uint64_t want)
{
	uint64_t prev = 0;
	bool ok = false;

	for (unsigned i = 0; i < a->ngroups && !ok; i++) {
		struct ag *g = &a->groups[i];
		pthread_mutex_lock(&g->mu);
		uint64_t b = group_bound(g);
		ok = g->free == g->gend - g->gstart || (i && prev + b >= want);
		pthread_mutex_unlock(&g->mu);
		prev = b;
	}
	return ok;
}

/* ---- API ---- */

static int area_create(uint64_t start, uint64_t end, uint64_t reserve, struct alloc **out)
{
	if (end <= start)
		return -EINVAL;
	uint64_t total = end - start;
	unsigned ng = total / AG_MIN_BLOCKS > AG_MAX ? AG_MAX : (unsigned)(total / AG_MIN_BLOCKS);
	if (!ng)
		ng = 1;

	struct alloc *a = calloc(1, sizeof(*a) + ng * sizeof(struct ag));
	if (!a)
		return -ENOMEM;
	a->nchunks = (total + CH_BLOCKS - 1) >> CH_SHIFT;
	a->ch = calloc(a->nchunks, sizeof(*a->ch));
	if (!a->ch) {
		free(a);
		return -ENOMEM;
	}
	/* Bits past the end read as used so word scans need no special tail. */
	if (total & (CH_BLOCKS - 1)) {
		struct achunk *c = &a->ch[a->nchunks - 1];
		uint64_t in = total & (CH_BLOCKS - 1);

		c->w = malloc(CH_WORDS * 8);
		if (!c->w) {
			free(a->ch);
			free(a);
			return -ENOMEM;
		}
		memset(c->w, 0, CH_WORDS * 8);
		words_apply(c->w, in, CH_BLOCKS, true, true);
		c->used = (uint32_t)(CH_BLOCKS - in);
		atomic_init(&a->bm_bytes, CH_WORDS * 8);
		atomic_init(&a->wchunks, 1);
	}

	a->start = start;
	a->end = end;
	a->total = total;
	a->reserve = reserve;
	a->ngroups = ng;
	/* Whole chunks: every chunk is under exactly one group's lock
	 * (ng <= total / CH_BLOCKS, so gsize >= CH_BLOCKS). */
	a->gsize = ng > 1 ? (total / ng) & ~(CH_BLOCKS - 1) : total;
	atomic_init(&a->nfree, total);
	atomic_init(&a->errors, 0);
	atomic_init(&a->held, 0);
	atomic_init(&a->unholds, 0);
	pthread_mutex_init(&a->defer_mu, NULL);
	pthread_mutex_init(&a->hold_mu, NULL);
	pthread_cond_init(&a->hold_cv, NULL);
	for (unsigned i = 0; i < ng; i++) {
		struct ag *g = &a->groups[i];
		pthread_mutex_init(&g->mu, NULL);
		g->gstart = i * a->gsize;
		g->gend = i + 1 == ng ? total : (i + 1) * a->gsize;
		g->free = g->gend - g->gstart;
		g->cursor = g->gstart;
		g->maxrun = RUN_UNKNOWN;
	}
	*out = a;
	return 0;
}

static void area_destroy(struct alloc *a)
{
	if (!a)
		return;
	for (unsigned i = 0; i < a->ngroups; i++) {
		pthread_mutex_destroy(&a->groups[i].mu);
		free(a->groups[i].refs);
		free(a->groups[i].rchg);
		free(a->groups[i].pendx);
		for (unsigned k = 0; k < a->groups[i].nspare; k++)
			free(a->groups[i].spare[k]);
	}
	for (uint64_t c = 0; c < a->nchunks; c++)
		free(a->ch[c].w);
	free(a->ch);
	free(a->chg);
	pthread_mutex_destroy(&a->defer_mu);
	pthread_mutex_destroy(&a->hold_mu);
	pthread_cond_destroy(&a->hold_cv);
	free(a->defer);
	free(a);
}

/* Take up to @want from the free count, honouring the reserve for data. */
static uint64_t reserve_count(struct alloc *a, uint64_t want, int kind)
{
	uint64_t f = atomic_load(&a->nfree), take;
	do {
		uint64_t floor = kind == ALLOC_META ? 0 : a->reserve;
		if (f <= floor)
			return 0;
		take = f - floor < want ? f - floor : want;
	} while (!atomic_compare_exchange_weak(&a->nfree, &f, f - take));
	return take;
}

static int area_get(struct alloc *a, uint64_t want, uint64_t hint, int kind,
	      uint64_t *blk, uint64_t *got)
{
	if (!want)
		return -EINVAL;
	uint64_t take = reserve_count(a, want, kind);
	if (!take)
		return -ENOSPC;

	unsigned first = (unsigned)(hint % a->ngroups);
	uint64_t rs = 0, n = 0;
	int err = 0;

	/* 1: a full run, hint group first. */
	for (unsigned k = 0; k < a->ngroups && !n && !err; k++) {
		struct ag *g = &a->groups[(first + k) % a->ngroups];
		pthread_mutex_lock(&g->mu);
		if (group_bound(g) >= take && group_search(a, g, take, &rs) == take) {
			err = group_take(a, g, rs, take);
			n = err ? 0 : take;
		}
		pthread_mutex_unlock(&g->mu);
	}
	/* 2: a full run spanning groups, if the bounds leave room for one. */
	if (!n && !err && take > 1 && a->ngroups > 1 && may_span(a, take)) {
		err = search_across(a, take, &rs);
		n = err ? 0 : take;
		err = err == -ENOSPC ? 0 : err;
	}
	/*
	 * 3: the longest run of the group with the best bound.  Our reservation
	 * guarantees a free block exists, so some bound is >= 1; each failed
	 * try lowers a bound to the truth, so this ends.
	 */
	while (!n && !err) {
		struct ag *best = NULL;
		uint64_t bb = 0;
		for (unsigned k = 0; k < a->ngroups; k++) {
			struct ag *g = &a->groups[(first + k) % a->ngroups];
			pthread_mutex_lock(&g->mu);
			uint64_t b = group_bound(g);
			pthread_mutex_unlock(&g->mu);
			if (b > bb) {
				bb = b;
				best = g;
			}
		}
		if (!best)
			break;
		pthread_mutex_lock(&best->mu);
		n = group_search(a, best, take, &rs);
		if (n && (err = group_take(a, best, rs, n)))
			n = 0;
		pthread_mutex_unlock(&best->mu);
	}
	if (n < take)
		atomic_fetch_add(&a->nfree, take - n);
	if (!n)
		return err ? err : -ENOSPC;
	*blk = a->start + rs;
	*got = n;
	return 0;
}

static int area_use(struct alloc *a, uint64_t blk, uint64_t n)
{
	if (blk < a->start || blk > a->end || n > a->end - blk)
		return -EINVAL;
	uint64_t pos = blk - a->start, end = pos + n;

	while (pos < end) {
		struct ag *g = &a->groups[group_of(a, pos)];
		uint64_t gend = g->gend < end ? g->gend : end;

		pthread_mutex_lock(&g->mu);
		uint64_t shared = 0;
		for (uint64_t p = cbm_next_one(a, pos, gend); p < gend; p = next_word_one(a, p, gend))
			shared += (uint64_t)__builtin_popcountll(cw_get(a, p >> 6) & word_mask(p, gend));
		int ret = shared ? ref_reserve(g, shared) : 0;
		if (!ret)
			ret = range_prepare(a, g, pos, gend, true);
		if (ret) {
			pthread_mutex_unlock(&g->mu);
			return ret;
		}
		for (uint64_t p = shared ? cbm_next_one(a, pos, gend) : gend; p < gend;
		     p = next_word_one(a, p, gend)) {
			uint64_t used = cw_get(a, p >> 6) & word_mask(p, gend);

			while (used) {
				uint64_t b = a->start + ((p & ~63ull) | (uint64_t)__builtin_ctzll(used));

				ref_inc(g, b);
				rchg_mark(a, g, b);
				used &= used - 1;
			}
		}
		uint64_t newly = range_apply(a, g, pos, gend, true, false);
		struct alloc_run pr;

		while (g->npend && pend_take(a, g, pos, gend, &pr)) {
			for (uint64_t b = a->start + pr.blk; b < a->start + pr.blk + pr.n; b++) {
				struct ref_ent *r = ref_find(g, b);	/* not shared after all */

				if (r && !--r->extra)
					ref_remove(g, r);
			}
		}
		if (newly)
			chg_mark(a, pos, gend);
		g->free -= newly;
		pthread_mutex_unlock(&g->mu);
		atomic_fetch_sub(&a->nfree, newly);
		pos = gend;
	}
	return 0;
}

static uint32_t area_refs(struct alloc *a, uint64_t blk)
{
	if (blk < a->start || blk >= a->end)
		return 0;
	uint64_t off = blk - a->start;
	struct ag *g = &a->groups[group_of(a, off)];
	uint32_t r = 0;

	pthread_mutex_lock(&g->mu);
	if (cbm_test(a, off)) {
		struct ref_ent *e = ref_find(g, blk);
		r = 1 + (e ? e->extra : 0);
	}
	pthread_mutex_unlock(&g->mu);
	return r;
}

/* A free that finds no memory for the words of a chunk it would leave
 * mixed waits in the group's pend list (pend_add). */
static uint64_t clear_or_pend(struct alloc *a, struct ag *g, uint64_t rs, uint64_t n)
{
	uint64_t changed;

	if (range_change(a, g, rs, rs + n, false, &changed) == 0)
		return changed;
	pend_add(a, g, rs, n);
	return 0;
}

/*
 * Hand [rs, rs + n) (area-relative, last references, bits still set) to
 * top's discard hook; a run it refuses is freed now.  Returns the blocks
 * freed.  Under g->mu: the hook only queues (a leaf lock).
 */
static uint64_t hold_run(struct alloc *top, struct alloc *a, struct ag *g, uint64_t rs,
			 uint64_t n)
{
	if (!n)
		return 0;
	/* Counted before it is queued, so the unhold never comes first. */
	atomic_fetch_add(&top->held, n);
	if (top->discard_fn(top->discard_ctx, a->start + rs, n) == 0)
		return 0;
	atomic_fetch_sub(&top->held, n);
	return clear_or_pend(a, g, rs, n);
}

/* Blocks the last references of a put leave: held (run [*rs, *rs + *rn)
 * grown, handed to hold_run when it ends) or, without @top, freed. */
struct put_acc {
	uint64_t freed, bad, rs, rn;
};

static void put_hold(struct alloc *top, struct alloc *a, struct ag *g, struct put_acc *pa,
		     uint64_t b, uint64_t n)
{
	if (pa->rn && pa->rs + pa->rn == b) {
		pa->rn += n;
		return;
	}
	pa->freed += hold_run(top, a, g, pa->rs, pa->rn);
	pa->rs = b;
	pa->rn = n;
}

/*
 * Put chunk @c whole when that needs no words: its group has no shared
 * blocks, and the chunk is uniform (or freed without a hook).  Returns
 * false when it must go word by word.
 */
static bool put_chunk(struct alloc *top, struct alloc *a, struct ag *g, struct achunk *c,
		      uint64_t cs, struct put_acc *pa)
{
	if (g->nrefs || (top && c->w && c->used))
		return false;
	pa->bad += CH_BLOCKS - c->used;
	if (!c->used)
		return true;
	if (top) {
		put_hold(top, a, g, pa, cs, CH_BLOCKS);
		return true;
	}
	pa->freed += c->used;
	c->used = 0;
	ch_drop_words(a, g, c);
	return true;
}

/* Drop a reference to every block of [p, e) (inside one word of group @g). */
static void put_word(struct alloc *top, struct alloc *a, struct ag *g, struct put_acc *pa,
		     uint64_t p, uint64_t e)
{
	uint64_t m = word_mask(p, e), wv = cw_get(a, p >> 6);
	uint64_t last = wv & m;

	pa->bad += (uint64_t)__builtin_popcountll(~wv & m);
	for (uint64_t u = last; u && g->nrefs; u &= u - 1) {
		uint64_t bit = (uint64_t)__builtin_ctzll(u);
		struct ref_ent *r = ref_find(g, a->start + ((p & ~63ull) | bit));

		if (r) {	/* shared: only a reference goes */
			rchg_mark(a, g, r->key - 1);
			if (!--r->extra)
				ref_remove(g, r);
			last &= ~(1ull << bit);
		}
	}
	if (!top) {
		uint64_t k = (uint64_t)__builtin_popcountll(last);

		if (word_clear(a, g, p >> 6, last, k) == 0)
			pa->freed += k;
		else
			pend_bits(a, g, p >> 6, last);
		return;
	}
	while (last) {
		/* the run of set bits from the lowest one, within the word */
		uint64_t bit = (uint64_t)__builtin_ctzll(last), rest = ~(last >> bit);
		uint64_t k = rest ? (uint64_t)__builtin_ctzll(rest) : 64 - bit;

		last = k == 64 ? 0 : last & ~(((1ull << k) - 1) << bit);
		put_hold(top, a, g, pa, (p & ~63ull) | bit, k);
	}
}

/*
 * Drop a reference to every block of [blk, blk + n) in area @a.  A block
 * losing its last is freed, or, when @top is given (its discard hook set),
 * held for a discard (hold_run).  A block not in use counts an error.
 */
static void area_put(struct alloc *top, struct alloc *a, uint64_t blk, uint64_t n)
{
	if (blk < a->start || blk > a->end || n > a->end - blk) {
		atomic_fetch_add(&a->errors, 1);
		return;
	}
	uint64_t pos = blk - a->start, end = pos + n;

	while (pos < end) {
		struct ag *g = &a->groups[group_of(a, pos)];
		uint64_t gend = g->gend < end ? g->gend : end;
		struct put_acc pa = { 0 };
		uint64_t freed, bad;

		pthread_mutex_lock(&g->mu);
		for (uint64_t p = pos; p < gend;) {
			uint64_t cs = p & ~(CH_BLOCKS - 1), ce = cs + CH_BLOCKS;
			uint64_t e = gend < ce ? gend : ce;

			if (p == cs && e == ce && put_chunk(top, a, g, &a->ch[p >> CH_SHIFT], cs, &pa)) {
				p = ce;
				continue;
			}
			for (; p < e; p = ((p >> 6) + 1) << 6)
				put_word(top, a, g, &pa, p, e);
			p = e;
		}
		freed = pa.freed + hold_run(top, a, g, pa.rs, pa.rn);
		bad = pa.bad;
		if (g->npend)	/* memory this put gave back may serve them */
			pend_retry(a, g);
		if (freed) {
			g->free += freed;
			group_widen(a, g, pos, gend);
			chg_mark(a, pos, gend);
		}
		pthread_mutex_unlock(&g->mu);
		atomic_fetch_add(&a->nfree, freed);
		if (bad)
			atomic_fetch_add(&a->errors, bad);
		pos = gend;
	}
}

/*
 * The first free run at or after area-relative @from, at most @max long:
 * mark it used and return it in *rs, *n.  -ENOENT when there is none,
 * -EBUSY (with *rs, *n the run skipped) when every free block is promised
 * to allocations under way.
 */
static int area_take_free(struct alloc *a, uint64_t from, uint64_t max, uint64_t *rs, uint64_t *n)
{
	for (unsigned gi = from < a->total ? group_of(a, from) : a->ngroups; gi < a->ngroups; gi++) {
		struct ag *g = &a->groups[gi];
		uint64_t pos = from > g->gstart ? from : g->gstart;
		int ret = -ENOENT;

		pthread_mutex_lock(&g->mu);
		uint64_t z = g->free ? cbm_next_zero(a, pos, g->gend) : g->gend;
		if (z < g->gend) {
			uint64_t cap = g->gend - z < max ? g->gend : z + max;
			uint64_t o = cbm_next_one(a, z, cap);
			uint64_t take = reserve_count(a, o - z, ALLOC_META), done;

			*rs = z;
			*n = take ? take : o - z;
			ret = take ? 0 : -EBUSY;
			/* not group_take: the allocation cursor stays */
			if (take && range_change(a, g, z, z + take, true, &done)) {
				atomic_fetch_add(&a->nfree, take);
				ret = -ENOMEM;
			} else if (take) {
				g->free -= take;
				chg_mark(a, z, z + take);
			}
		}
		pthread_mutex_unlock(&g->mu);
		if (ret != -ENOENT)
			return ret;
	}
	return -ENOENT;
}

/* ---- the public API: the data area plus the metadata reserve ---- */

int alloc_create(uint64_t start, uint64_t end, uint64_t reserve, struct alloc **out)
{
	const char *env = getenv("TWINFS_ALLOC_WORDS_FAIL");
	unsigned long long after, count;
	struct alloc *a;
	int ret;

	if (end <= start)
		return -EINVAL;
	if (env && sscanf(env, "%llu,%llu", &after, &count) == 2)
		alloc_fail_words(after, count);
	if (!reserve || reserve >= end - start)
		return area_create(start, end, reserve, out);
	ret = area_create(start, end - reserve, 0, &a);
	if (ret)
		return ret;
	ret = area_create(end - reserve, end, 0, &a->tail);
	if (ret) {
		area_destroy(a);
		return ret;
	}
	*out = a;
	return 0;
}

void alloc_destroy(struct alloc *a)
{
	if (!a)
		return;
	if (a->tail)
		area_destroy(a->tail);
	area_destroy(a);
}

/*
 * Metadata takes the reserve first and the data area after it, keeping the
 * longer run: a full run from either satisfies the "full run if one exists
 * anywhere" rule.
 */
static int alloc_get_now(struct alloc *a, uint64_t want, uint64_t hint, int kind,
			 uint64_t *blk, uint64_t *got)
{
	uint64_t tb = 0, tg = 0;
	int ret;

	if (kind != ALLOC_META || !a->tail)
		return area_get(a, want, hint, kind, blk, got);
	if (area_get(a->tail, want, 0, ALLOC_META, &tb, &tg) < 0)
		tg = 0;
	if (tg >= want) {
		*blk = tb;
		*got = tg;
		return 0;
	}
	ret = area_get(a, want, hint, ALLOC_META, blk, got);
	if (!ret && *got >= want) {
		if (tg)
			area_put(NULL, a->tail, tb, tg);
		return 0;
	}
	if (tg && (ret || tg > *got)) {
		if (!ret)
			area_put(NULL, a, *blk, *got);
		*blk = tb;
		*got = tg;
		return 0;
	}
	if (tg)
		area_put(NULL, a->tail, tb, tg);
	return ret;
}

/* Exactly [blk, blk + n) or nothing.  Takes the groups it covers in
 * ascending order, like search_across. */
static int area_claim(struct alloc *a, uint64_t blk, uint64_t n)
{
	if (!n || blk < a->start || blk > a->end || n > a->end - blk)
		return -EINVAL;
	uint64_t take = reserve_count(a, n, ALLOC_META);
	if (take < n) {
		atomic_fetch_add(&a->nfree, take);
		return -ENOSPC;
	}
	uint64_t pos = blk - a->start, end = pos + n;
	unsigned g0 = group_of(a, pos), g1 = group_of(a, end - 1);
	int ret = 0;

	for (unsigned i = g0; i <= g1; i++)
		pthread_mutex_lock(&a->groups[i].mu);
	if (cbm_next_one(a, pos, end) != end)
		ret = -EBUSY;
	else
		ret = take_across(a, pos, end);
	for (unsigned i = g1 + 1; i-- > g0;)
		pthread_mutex_unlock(&a->groups[i].mu);
	if (ret)
		atomic_fetch_add(&a->nfree, n);
	return ret;
}

/*
 * Blocks held for a discard are free space a moment away: rather than
 * fail with ENOSPC while some are held, wait for an unhold and try again
 * (the discard worker never waits for an allocation, so this ends).
 */
int alloc_get(struct alloc *a, uint64_t want, uint64_t hint, int kind,
	      uint64_t *blk, uint64_t *got)
{
	for (;;) {
		uint64_t gen;
		int ret;

		gen = atomic_load(&a->unholds);
		ret = alloc_get_now(a, want, hint, kind, blk, got);
		if (ret == -ENOSPC && alloc_retry_frees(a))
			ret = alloc_get_now(a, want, hint, kind, blk, got);
		if (ret != -ENOSPC || !atomic_load(&a->held))
			return ret;
		pthread_mutex_lock(&a->hold_mu);
		while (atomic_load(&a->unholds) == gen)
			pthread_cond_wait(&a->hold_cv, &a->hold_mu);
		pthread_mutex_unlock(&a->hold_mu);
	}
}

void alloc_set_discard(struct alloc *a, int (*fn)(void *ctx, uint64_t blk, uint64_t n),
		       void *ctx)
{
	a->discard_fn = fn;
	a->discard_ctx = ctx;
}

/* area_put on the top area and the tail, [blk, blk + n) split between
 * them; @top as for area_put. */
static void put_split(struct alloc *a, struct alloc *top, uint64_t blk, uint64_t n)
{
	uint64_t ts = tail_start(a);

	if (n > UINT64_MAX - blk || blk + n <= ts) {
		area_put(top, a, blk, n);
	} else if (blk >= ts) {
		area_put(top, a->tail, blk, n);
	} else {
		area_put(top, a, blk, ts - blk);
		area_put(top, a->tail, ts, blk + n - ts);
	}
}

void alloc_put_discard(struct alloc *a, uint64_t blk, uint64_t n)
{
	put_split(a, a->discard_fn ? a : NULL, blk, n);
}

int alloc_hold_free(struct alloc *a, uint64_t from, uint64_t max, uint64_t *blk, uint64_t *n)
{
	uint64_t ts = tail_start(a), rs;
	int ret = -ENOENT;

	if (!max)
		return -EINVAL;
	if (from < a->start)
		from = a->start;
	if (from < a->end) {
		ret = area_take_free(a, from - a->start, max, &rs, n);
		if (ret != -ENOENT)
			*blk = a->start + rs;
	}
	if (ret == -ENOENT && a->tail) {
		struct alloc *t = a->tail;

		ret = area_take_free(t, from > ts ? from - ts : 0, max, &rs, n);
		if (ret != -ENOENT)
			*blk = t->start + rs;
	}
	if (!ret)
		atomic_fetch_add(&a->held, *n);
	return ret;
}

void alloc_unhold(struct alloc *a, uint64_t blk, uint64_t n)
{
	alloc_put(a, blk, n);
	atomic_fetch_sub(&a->held, n);
	atomic_fetch_add(&a->unholds, 1);
	pthread_mutex_lock(&a->hold_mu);
	pthread_cond_broadcast(&a->hold_cv);
	pthread_mutex_unlock(&a->hold_mu);
}

uint64_t alloc_held_blocks(struct alloc *a)
{
	return atomic_load(&a->held);
}

int alloc_use(struct alloc *a, uint64_t blk, uint64_t n)
{
	uint64_t ts = tail_start(a);
	int ret;

	if (n > UINT64_MAX - blk || blk + n <= ts)
		return area_use(a, blk, n);
	if (blk >= ts)
		return area_use(a->tail, blk, n);
	ret = area_use(a, blk, ts - blk);
	return ret ? ret : area_use(a->tail, ts, blk + n - ts);
}

void alloc_put(struct alloc *a, uint64_t blk, uint64_t n)
{
	put_split(a, NULL, blk, n);
}

uint32_t alloc_refs(struct alloc *a, uint64_t blk)
{
	return blk >= tail_start(a) ? area_refs(a->tail, blk) : area_refs(a, blk);
}

int alloc_defer(struct alloc *a, uint64_t blk, uint64_t n, uint64_t seq)
{
	if (!n)
		return 0;
	pthread_mutex_lock(&a->defer_mu);
	if (a->ndefer == a->defercap) {
		size_t cap = a->defercap ? a->defercap * 2 : 64;
		struct defer_ent *d = realloc(a->defer, cap * sizeof(*d));
		if (!d) {
			pthread_mutex_unlock(&a->defer_mu);
			return -ENOMEM;
		}
		a->defer = d;
		a->defercap = cap;
	}
	a->defer[a->ndefer++] = (struct defer_ent){ blk, n, seq };
	pthread_mutex_unlock(&a->defer_mu);
	return 0;
}

/*
 * Move the entries with seq <= @upto out of the list under the lock, then
 * put them without it (alloc_put takes group locks; keeping the two locks
 * apart means deferring never waits on allocation).
 */
static void release_upto(struct alloc *a, uint64_t upto)
{
	pthread_mutex_lock(&a->defer_mu);
	size_t keep = 0, nrel = 0;
	for (size_t i = 0; i < a->ndefer; i++)
		nrel += a->defer[i].seq <= upto;
	struct defer_ent *rel = nrel ? malloc(nrel * sizeof(*rel)) : NULL;
	if (nrel && !rel) {
		/* No memory for the side list: put under the lock instead. */
		for (size_t i = 0; i < a->ndefer; i++) {
			if (a->defer[i].seq <= upto)
				alloc_put_discard(a, a->defer[i].blk, a->defer[i].n);
			else
				a->defer[keep++] = a->defer[i];
		}
		a->ndefer = keep;
		pthread_mutex_unlock(&a->defer_mu);
		return;
	}
	nrel = 0;
	for (size_t i = 0; i < a->ndefer; i++) {
		if (a->defer[i].seq <= upto)
			rel[nrel++] = a->defer[i];
		else
			a->defer[keep++] = a->defer[i];
	}
	a->ndefer = keep;
	pthread_mutex_unlock(&a->defer_mu);

	for (size_t i = 0; i < nrel; i++)
		alloc_put_discard(a, rel[i].blk, rel[i].n);
	free(rel);
}

void alloc_release_durable(struct alloc *a, uint64_t durable_seq)
{
	release_upto(a, durable_seq);
}

void alloc_release_all(struct alloc *a)
{
	release_upto(a, UINT64_MAX);
}

uint64_t alloc_free_blocks(struct alloc *a)
{
	/* Held blocks are free space whose discard is still in flight. */
	return atomic_load(&a->nfree) + (a->tail ? atomic_load(&a->tail->nfree) : 0) +
	       atomic_load(&a->held);
}

uint64_t alloc_total_blocks(struct alloc *a)
{
	return a->total + (a->tail ? a->tail->total : 0);
}

int alloc_claim(struct alloc *a, uint64_t blk, uint64_t n)
{
	uint64_t ts = tail_start(a);

	if (n > UINT64_MAX - blk)
		return -EINVAL;
	if (blk + n <= ts)
		return area_claim(a, blk, n);
	if (blk >= ts)
		return area_claim(a->tail, blk, n);
	return -EINVAL;
}

int alloc_reserve_range(struct alloc *a, uint64_t *start, uint64_t *end)
{
	if (!a->tail)
		return -ENOENT;
	*start = a->tail->start;
	*end = a->tail->end;
	return 0;
}

uint64_t alloc_reserve_blocks(struct alloc *a)
{
	return a->tail ? a->tail->total : a->reserve;
}

uint64_t alloc_errors(struct alloc *a)
{
	return atomic_load(&a->errors) + (a->tail ? atomic_load(&a->tail->errors) : 0);
}

uint64_t alloc_pending_blocks(struct alloc *a)
{
	return atomic_load(&a->pending) + (a->tail ? atomic_load(&a->tail->pending) : 0);
}

uint64_t alloc_retry_frees(struct alloc *a)
{
	uint64_t freed = 0;

	for (struct alloc *ar = a; ar && alloc_pending_blocks(a); ar = ar->tail) {
		for (unsigned i = 0; i < ar->ngroups && atomic_load(&ar->pending); i++) {
			struct ag *g = &ar->groups[i];

			pthread_mutex_lock(&g->mu);
			freed += pend_retry(ar, g);
			pthread_mutex_unlock(&g->mu);
		}
	}
	return freed;
}

uint64_t alloc_bitmap_bytes(struct alloc *a)
{
	return atomic_load(&a->bm_bytes) + (a->tail ? atomic_load(&a->tail->bm_bytes) : 0);
}

uint64_t alloc_bitmap_chunks(struct alloc *a)
{
	return atomic_load(&a->wchunks) + (a->tail ? atomic_load(&a->tail->wchunks) : 0);
}

uint64_t alloc_deferred_blocks(struct alloc *a)
{
	uint64_t n = 0;
	pthread_mutex_lock(&a->defer_mu);
	for (size_t i = 0; i < a->ndefer; i++)
		n += a->defer[i].n;
	pthread_mutex_unlock(&a->defer_mu);
	return n;
}

/* ---- format v2: reference counts by run (alloc_v2.c) ---- */

void alloc_refs_run(struct alloc *a, uint64_t blk, uint64_t n, uint32_t *out)
{
	uint64_t end = blk + n;

	memset(out, 0, n * sizeof(*out));
	for (struct alloc *ar = a; ar; ar = ar->tail) {
		uint64_t s = blk > ar->start ? blk : ar->start, e = end < ar->end ? end : ar->end;

		while (s < e) {
			struct ag *g = &ar->groups[group_of(ar, s - ar->start)];
			uint64_t ge = ar->start + g->gend < e ? ar->start + g->gend : e;

			pthread_mutex_lock(&g->mu);
			for (uint64_t b = s; b < ge; b++) {
				uint64_t off = b - ar->start;
				struct ref_ent *r;

				if (!cbm_test(ar, off))
					continue;
				r = ref_find(g, b);
				out[b - blk] = 1 + (r ? r->extra : 0);
			}
			pthread_mutex_unlock(&g->mu);
			s = ge;
		}
	}
}

/* alloc_set_refs inside one group of area @a.  Under g->mu. */
static int set_refs_group(struct alloc *a, struct ag *g, uint64_t s, uint64_t e, uint32_t refs)
{
	uint64_t newly = 0;
	int ret = refs > 1 ? ref_reserve(g, e - s) : 0;

	if (!ret)
		ret = range_change(a, g, s - a->start, e - a->start, true, &newly);
	for (uint64_t b = s; b < e && !ret && (refs > 1 || g->nrefs); b++) {
		struct ref_ent *r = ref_find(g, b);

		if (r && refs > 1)
			r->extra = refs - 1;
		else if (r)
			ref_remove(g, r);
		else if (refs > 1) {
			ref_insert_slot(g->refs, g->refcap, b + 1, refs - 1);
			g->nrefs++;
		}
	}
	g->free -= newly;
	atomic_fetch_sub(&a->nfree, newly);
	return ret;
}

int alloc_set_refs(struct alloc *a, uint64_t blk, uint64_t n, uint32_t refs)
{
	uint64_t end = blk + n;
	int ret = 0;

	if (!refs || n > UINT64_MAX - blk || blk < a->start || end > (a->tail ? a->tail->end : a->end))
		return -EINVAL;
	for (struct alloc *ar = a; ar && !ret; ar = ar->tail) {
		uint64_t s = blk > ar->start ? blk : ar->start, e = end < ar->end ? end : ar->end;

		while (s < e && !ret) {
			struct ag *g = &ar->groups[group_of(ar, s - ar->start)];
			uint64_t ge = ar->start + g->gend < e ? ar->start + g->gend : e;

			pthread_mutex_lock(&g->mu);
			ret = set_refs_group(ar, g, s, ge, refs);
			pthread_mutex_unlock(&g->mu);
			s = ge;
		}
	}
	return ret;
}
