// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fspace: data-area groups of the v2 allocator (see fspace.h): allocation
 * and frees under one group's lock, loading a group's bitmap from its FREE
 * items on first use, evicting clean bitmaps past the budget (a clock over
 * the groups, so no global lock or list is touched per allocation), and
 * the deferred frees.
 *
 * The global free count is an atomic that fspace_get decrements before it
 * searches (a reservation of at most the request, as in alloc.c), so the
 * reserve holds under concurrency and a search that holds a reservation
 * always finds a free block somewhere.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bmap.h"
#include "fspace_i.h"
#include "super.h"

void fspace_sb_params(const struct super *sb, struct fspace_params *p)
{
	memset(p, 0, sizeof(*p));
	p->start = sb->node_start + sb->node_blocks;
	p->end = sb->total_blocks;
	p->gblocks = sb->gblocks;
	p->node_start = sb->node_start;
	p->nslots = sb->node_blocks / BNODE_BLOCKS;
	p->node_reserve = sb->node_reserve;
}

/* ---- loading and eviction ---- */

/* Evict clean, unpinned bitmaps (not @self's: its lock is held) until the
 * loaded bytes fit the budget.  Others' locks by trylock only. */
static void evict_some(struct fspace *fs, struct fs_group *self)
{
	uint64_t bytes = fs->gwords * 8;

	if (atomic_load(&fs->loaded_bytes) <= fs->p.budget)
		return;
	pthread_mutex_lock(&fs->evict_mu);
	for (uint64_t scan = 0; scan < 2 * fs->ngroups; scan++) {
		struct fs_group *g = &fs->groups[fs->hand];

		if (atomic_load(&fs->loaded_bytes) <= fs->p.budget)
			break;
		fs->hand = (fs->hand + 1) % fs->ngroups;
		if (g == self || !atomic_load(&g->loaded) || pthread_mutex_trylock(&g->mu))
			continue;
		/* Second chance for a group used since the hand last passed. */
		if (g->bm && !g->dirty && !g->in_ckpt && !atomic_exchange(&g->ref, false)) {
			free(g->bm);
			g->bm = NULL;
			atomic_store(&g->loaded, false);
			atomic_fetch_sub(&fs->loaded_bytes, bytes);
			atomic_fetch_sub(&fs->nloaded, 1);
			atomic_fetch_add(&fs->evictions, 1);
		}
		pthread_mutex_unlock(&g->mu);
	}
	pthread_mutex_unlock(&fs->evict_mu);
}

void fs_groups_trim(struct fspace *fs)
{
	evict_some(fs, NULL);
}

uint64_t fspace_loaded_bytes(struct fspace *fs)
{
	return atomic_load(&fs->loaded_bytes);
}

/* Clear the bits of FREE item @k in @bm (group @gi); -EUCLEAN when the item
 * is not inside the group or overlaps another. */
static int load_item(struct fspace *fs, uint64_t gi, uint64_t *bm, const struct bkey *k)
{
	uint64_t gs = fs->p.start + fs_gstart(fs, gi), len = fs_glen(fs, gi);
	uint64_t from = k->id - gs;

	if (k->type != FSK_FREE || !k->off || k->off > len - from)
		return -EUCLEAN;
	if (bm_count(bm, from, from + k->off) != k->off)
		return -EUCLEAN;
	bm_clear(bm, from, from + k->off);
	return 0;
}

int fs_tree_each(struct fspace *fs, const struct bkey *start, const struct bkey *end,
		 int (*fn)(void *ctx, const struct bkey *k, const void *val, unsigned len),
		 void *ctx)
{
	struct bt_iter it;
	struct bkey k;
	const void *val;
	unsigned len;
	int ret;

	ret = bt_iter_init(&it, &fs->tree, start);
	while (!ret) {
		ret = bt_iter_next(&it, &k, &val, &len);
		if (ret || bkey_cmp(&k, end) >= 0)
			break;
		ret = fn(ctx, &k, val, len);
	}
	bt_iter_free(&it);
	return ret == -ENOENT ? 0 : ret;
}

struct load_ctx {
	struct fspace *fs;
	uint64_t gi, *bm, nfree;
};

static int load_one(void *ctx, const struct bkey *k, const void *val, unsigned len)
{
	struct load_ctx *l = ctx;

	(void)val;
	l->nfree += k->off;
	return len ? -EUCLEAN : load_item(l->fs, l->gi, l->bm, k);
}

/* Read group @gi's FREE items into @bm (all set on entry); *nfree gets
 * the blocks they free. */
static int read_group(struct fspace *fs, uint64_t gi, uint64_t *bm, uint64_t *nfree)
{
	uint64_t gs = fs->p.start + fs_gstart(fs, gi), ge = gs + fs_glen(fs, gi);
	struct load_ctx l = { fs, gi, bm, 0 };
	int ret;

	ret = fs_tree_each(fs, &(struct bkey){ gs, FSK_FREE, 0 }, &(struct bkey){ ge, 0, 0 },
			   load_one, &l);
	*nfree = l.nfree;
	return ret;
}

/* Make group @gi's bitmap resident.  Under its mu (the tree read, on a
 * cache miss a device read, happens under it: only this group waits). */
int fs_group_load(struct fspace *fs, uint64_t gi)
{
	struct fs_group *g = &fs->groups[gi];
	uint64_t len = fs_glen(fs, gi), nfree = len, *bm;
	int ret = 0;

	if (!atomic_load(&g->ref))
		atomic_store(&g->ref, true);
	if (g->bm)
		return 0;
	bm = malloc(fs->gwords * 8);
	if (!bm)
		return -ENOMEM;
	memset(bm, g->ondisk ? 0xff : 0, fs->gwords * 8);
	if (g->ondisk)
		ret = read_group(fs, gi, bm, &nfree);
	if (!ret && nfree != atomic_load(&g->free))
		ret = -EUCLEAN;	/* the items disagree with the summary */
	if (ret) {
		free(bm);
		atomic_fetch_add(&fs->errors, 1);
		return ret;
	}
	/* Bits past a short last group read as used: scans need no tail. */
	if (len & 63)
		bm[len >> 6] |= ~0ull << (len & 63);
	g->bm = bm;
	atomic_store(&g->loaded, true);
	atomic_fetch_add(&fs->loaded_bytes, fs->gwords * 8);
	atomic_fetch_add(&fs->nloaded, 1);
	atomic_fetch_add(&fs->loads, 1);
	evict_some(fs, g);
	return 0;
}

/* ---- searching a loaded group (under its mu) ---- */

/*
 * A free run of @want from the cursor, wrapping.  Returns want (run at
 * *rs) or, when there is none, the longest run (possibly 0), which becomes
 * the group's maxrun.
 */
static uint64_t group_search(struct fspace *fs, uint64_t gi, uint64_t want, uint64_t *rs)
{
	struct fs_group *g = &fs->groups[gi];
	uint64_t best = bm_find_run(g->bm, 0, fs_glen(fs, gi), g->cursor, want, rs);

	if (best < want)
		atomic_store(&g->maxrun, best);
	return best;
}

static void group_take(struct fspace *fs, uint64_t gi, uint64_t rs, uint64_t n)
{
	struct fs_group *g = &fs->groups[gi];

	bm_set(g->bm, rs, rs + n);
	atomic_store(&g->free, atomic_load(&g->free) - n);
	g->cursor = rs + n < fs_glen(fs, gi) ? rs + n : 0;
	fs_group_mark(g, rs, rs + n);
}

static uint64_t group_bound(struct fs_group *g)
{
	uint64_t m = atomic_load(&g->maxrun), f = atomic_load(&g->free);

	return m < f ? m : f;
}

/* Lock group @gi, load it and search for @want; take what it finds when
 * it is the full @want or @any.  Returns the blocks taken (0: none). */
static int try_group(struct fspace *fs, uint64_t gi, uint64_t want, bool any, uint64_t *blk,
		     uint64_t *got)
{
	struct fs_group *g = &fs->groups[gi];
	uint64_t rs, n = 0;
	int ret;

	pthread_mutex_lock(&g->mu);
	ret = fs_group_load(fs, gi);
	if (!ret) {
		n = group_search(fs, gi, want, &rs);
		if (n == want || (any && n)) {
			group_take(fs, gi, rs, n);
			*blk = fs->p.start + fs_gstart(fs, gi) + rs;
		} else {
			n = 0;
		}
	}
	pthread_mutex_unlock(&g->mu);
	*got = n;
	return ret;
}

/* Take up to @want from the free count, honouring the reserve for data. */
static uint64_t reserve_count(struct fspace *fs, uint64_t want, int kind)
{
	uint64_t f = atomic_load(&fs->nfree), take;

	do {
		uint64_t floor = kind == FSPACE_META ? 0 : fs->p.reserve;

		if (f <= floor)
			return 0;
		take = f - floor < want ? f - floor : want;
	} while (!atomic_compare_exchange_weak(&fs->nfree, &f, f - take));
	return take;
}

/* The longest run of the group with the best bound; each failed try
 * lowers a bound to the truth, so this ends. */
static int get_longest(struct fspace *fs, uint64_t take, uint64_t first, uint64_t *blk,
		       uint64_t *got)
{
	int ret = 0;

	*got = 0;
	for (uint64_t tries = 0; !*got && !ret && tries <= 2 * fs->ngroups; tries++) {
		uint64_t best = UINT64_MAX, bb = 0;

		for (uint64_t k = 0; k < fs->ngroups; k++) {
			uint64_t gi = (first + k) % fs->ngroups;
			uint64_t b = group_bound(&fs->groups[gi]);

			if (b > bb) {
				bb = b;
				best = gi;
			}
		}
		if (best == UINT64_MAX)
			break;
		ret = try_group(fs, best, take, true, blk, got);
	}
	return ret;
}

/* Might a run of @want start in group @g0's tail?  From the bounds alone
 * (no lock, no load): the tail, wholly free groups, then a head. */
static bool may_span(struct fspace *fs, uint64_t g0, uint64_t want)
{
	uint64_t s = group_bound(&fs->groups[g0]);

	for (uint64_t k = g0 + 1; s && s < want && k < fs->ngroups; k++) {
		struct fs_group *g = &fs->groups[k];

		if (atomic_load(&g->free) != fs_glen(fs, k))
			return s + group_bound(g) >= want;
		s += fs_glen(fs, k);
	}
	return s >= want;
}

/* With groups [g0, *g1] locked and loaded: the free blocks from the tail
 * of g0 on; *g1 is the last group the run reaches. */
static int span_cover(struct fspace *fs, uint64_t g0, uint64_t want, uint64_t *g1,
		      uint64_t *cover, uint64_t *rs)
{
	uint64_t len = fs_glen(fs, g0);
	int ret;

	*rs = bm_prev_one_end(fs->groups[g0].bm, 0, len);
	*cover = len - *rs;
	for (*g1 = g0; *cover && *cover < want && *g1 + 1 < fs->ngroups;) {
		uint64_t k = ++*g1, head;

		pthread_mutex_lock(&fs->groups[k].mu);
		ret = fs_group_load(fs, k);
		if (ret) {
			pthread_mutex_unlock(&fs->groups[k].mu);
			--*g1;
			return ret;
		}
		head = bm_next_one(fs->groups[k].bm, 0, fs_glen(fs, k));
		*cover += head;
		if (head < fs_glen(fs, k))
			break;
	}
	return 0;
}

/* Take @want blocks from group-relative @rs of g0 on, across groups. */
static void span_take(struct fspace *fs, uint64_t g0, uint64_t rs, uint64_t want)
{
	for (uint64_t gi = g0; want; gi++, rs = 0) {
		uint64_t n = fs_glen(fs, gi) - rs < want ? fs_glen(fs, gi) - rs : want;

		group_take(fs, gi, rs, n);
		want -= n;
	}
}

/*
 * A run of @want across group boundaries, only when no group holds one:
 * large requests on a fragmented area.  Locks the groups of a candidate
 * in ascending order (as fspace_claim does).
 */
static int get_across(struct fspace *fs, uint64_t want, uint64_t *blk, uint64_t *got)
{
	*got = 0;
	for (uint64_t g0 = 0; g0 + 1 < fs->ngroups && !*got; g0++) {
		uint64_t g1 = g0, cover = 0, rs = 0;
		int ret;

		if (!may_span(fs, g0, want))
			continue;
		pthread_mutex_lock(&fs->groups[g0].mu);
		ret = fs_group_load(fs, g0);
		if (!ret)
			ret = span_cover(fs, g0, want, &g1, &cover, &rs);
		if (!ret && cover >= want) {
			span_take(fs, g0, rs, want);
			*blk = fs->p.start + fs_gstart(fs, g0) + rs;
			*got = want;
		}
		for (uint64_t gi = g1 + 1; gi-- > g0;)
			pthread_mutex_unlock(&fs->groups[gi].mu);
		if (ret)
			return ret;
	}
	return 0;
}

int fspace_get(struct fspace *fs, uint64_t want, uint64_t hint, int kind, uint64_t *blk,
	       uint64_t *got)
{
	uint64_t take, first = hint % fs->ngroups, n = 0;
	int ret = 0;

	if (!want)
		return -EINVAL;
	take = reserve_count(fs, want, kind);
	if (!take)
		return -ENOSPC;
	/* 1: a full run, hint group first; the bounds skip groups without
	 * loading them. */
	for (uint64_t k = 0; k < fs->ngroups && !n && !ret; k++) {
		uint64_t gi = (first + k) % fs->ngroups;

		if (group_bound(&fs->groups[gi]) >= take)
			ret = try_group(fs, gi, take, false, blk, &n);
	}
	/* 2: a full run across groups. */
	if (!n && !ret && take > 1 && fs->ngroups > 1)
		ret = get_across(fs, take, blk, &n);
	/* 3: the longest run there is. */
	if (!n && !ret)
		ret = get_longest(fs, take, first, blk, &n);
	if (n < take)
		atomic_fetch_add(&fs->nfree, take - n);
	if (ret)
		return ret;
	if (!n)
		return -ENOSPC;
	*got = n;
	return 0;
}

/* ---- frees and claims ---- */

static bool in_data(const struct fspace *fs, uint64_t blk, uint64_t n)
{
	return n && blk >= fs->p.start && blk < fs->p.end && n <= fs->p.end - blk;
}

/* A free made [pos, end) free in group @gi: its run may have grown. */
static void widen(struct fspace *fs, uint64_t gi, uint64_t pos, uint64_t end)
{
	struct fs_group *g = &fs->groups[gi];
	uint64_t lo, hi;

	/* No run is longer than the free count: the bound holds as it is. */
	if (atomic_load(&g->maxrun) >= atomic_load(&g->free))
		return;
	lo = bm_prev_one_end(g->bm, 0, pos);
	hi = bm_next_one(g->bm, end, fs_glen(fs, gi));
	if (hi - lo > atomic_load(&g->maxrun))
		atomic_store(&g->maxrun, hi - lo);
}

/* Free the used blocks of group-relative [pos, end) in @gi; returns the
 * blocks freed (the rest were free already). */
static int put_in_group(struct fspace *fs, uint64_t gi, uint64_t pos, uint64_t end,
			uint64_t *freed)
{
	struct fs_group *g = &fs->groups[gi];
	int ret;

	pthread_mutex_lock(&g->mu);
	ret = fs_group_load(fs, gi);
	if (!ret) {
		*freed = bm_count(g->bm, pos, end);
		bm_clear(g->bm, pos, end);
		atomic_store(&g->free, atomic_load(&g->free) + *freed);
		widen(fs, gi, pos, end);
		fs_group_mark(g, pos, end);
	}
	pthread_mutex_unlock(&g->mu);
	return ret;
}

int fspace_put(struct fspace *fs, uint64_t blk, uint64_t n)
{
	uint64_t pos, end;

	if (!in_data(fs, blk, n)) {
		atomic_fetch_add(&fs->errors, 1);
		return -EINVAL;
	}
	pos = blk - fs->p.start;
	end = pos + n;
	while (pos < end) {
		uint64_t gi = pos / fs->p.gblocks, gs = fs_gstart(fs, gi);
		uint64_t e = gs + fs_glen(fs, gi) < end ? gs + fs_glen(fs, gi) : end, freed = 0;
		int ret = put_in_group(fs, gi, pos - gs, e - gs, &freed);

		if (ret)
			return ret;
		atomic_fetch_add(&fs->nfree, freed);
		if (freed < e - pos)
			atomic_fetch_add(&fs->errors, e - pos - freed);
		pos = e;
	}
	return 0;
}

/* Lock and load the groups [g0, g1] in ascending order; on failure the
 * locked ones are unlocked. */
static int lock_groups(struct fspace *fs, uint64_t g0, uint64_t g1)
{
	for (uint64_t gi = g0; gi <= g1; gi++) {
		int ret;

		pthread_mutex_lock(&fs->groups[gi].mu);
		ret = fs_group_load(fs, gi);
		if (ret) {
			for (uint64_t u = g0; u <= gi; u++)
				pthread_mutex_unlock(&fs->groups[u].mu);
			return ret;
		}
	}
	return 0;
}

static int claim_locked(struct fspace *fs, uint64_t pos, uint64_t end)
{
	uint64_t g0 = pos / fs->p.gblocks, g1 = (end - 1) / fs->p.gblocks;
	uint64_t f = atomic_load(&fs->nfree), n = end - pos;

	for (uint64_t gi = g0; gi <= g1; gi++) {
		uint64_t gs = fs_gstart(fs, gi), ge = gs + fs_glen(fs, gi);
		uint64_t a = pos > gs ? pos : gs, b = end < ge ? end : ge;

		if (bm_count(fs->groups[gi].bm, a - gs, b - gs))
			return -EBUSY;
	}
	do {
		if (f < n)
			return -ENOSPC;	/* promised to allocations under way */
	} while (!atomic_compare_exchange_weak(&fs->nfree, &f, f - n));
	for (uint64_t gi = g0; gi <= g1; gi++) {
		uint64_t gs = fs_gstart(fs, gi), ge = gs + fs_glen(fs, gi);
		uint64_t a = pos > gs ? pos : gs, b = end < ge ? end : ge;
		struct fs_group *g = &fs->groups[gi];

		bm_set(g->bm, a - gs, b - gs);
		atomic_store(&g->free, atomic_load(&g->free) - (b - a));
		fs_group_mark(g, a - gs, b - gs);
	}
	return 0;
}

int fspace_claim(struct fspace *fs, uint64_t blk, uint64_t n)
{
	uint64_t pos, end, g0, g1;
	int ret;

	if (!in_data(fs, blk, n))
		return -EINVAL;
	pos = blk - fs->p.start;
	end = pos + n;
	g0 = pos / fs->p.gblocks;
	g1 = (end - 1) / fs->p.gblocks;
	ret = lock_groups(fs, g0, g1);
	if (ret)
		return ret;
	ret = claim_locked(fs, pos, end);
	for (uint64_t gi = g1 + 1; gi-- > g0;)
		pthread_mutex_unlock(&fs->groups[gi].mu);
	return ret;
}

int fspace_is_free(struct fspace *fs, uint64_t blk)
{
	uint64_t pos, gi;
	struct fs_group *g;
	int ret;

	if (!in_data(fs, blk, 1))
		return -EINVAL;
	pos = blk - fs->p.start;
	gi = pos / fs->p.gblocks;
	g = &fs->groups[gi];
	pthread_mutex_lock(&g->mu);
	ret = fs_group_load(fs, gi);
	if (!ret)
		ret = !bm_count(g->bm, pos - fs_gstart(fs, gi), pos - fs_gstart(fs, gi) + 1);
	pthread_mutex_unlock(&g->mu);
	return ret;
}

uint64_t fspace_free_blocks(struct fspace *fs)
{
	uint64_t n = 0;

	for (uint64_t gi = 0; gi < fs->ngroups; gi++)
		n += atomic_load(&fs->groups[gi].free);
	return n;
}

/* ---- deferred frees ---- */

int fspace_defer(struct fspace *fs, uint64_t blk, uint64_t n, uint64_t seq)
{
	int ret = 0;

	if (!in_data(fs, blk, n))
		return -EINVAL;
	pthread_mutex_lock(&fs->defer_mu);
	if (fs->ndefer == fs->defercap) {
		size_t cap = fs->defercap ? fs->defercap * 2 : 64;
		struct fs_defer *d = realloc(fs->defer, cap * sizeof(*d));

		if (d) {
			fs->defer = d;
			fs->defercap = cap;
		} else {
			ret = -ENOMEM;
		}
	}
	if (!ret) {
		fs->defer[fs->ndefer++] = (struct fs_defer){ blk, n, seq };
		atomic_fetch_add(&fs->deferred, n);
	}
	pthread_mutex_unlock(&fs->defer_mu);
	return ret;
}

/* Put every deferred free with seq <= @upto; one that fails goes back on
 * the list. */
static int release_upto(struct fspace *fs, uint64_t upto)
{
	struct fs_defer *out = NULL;
	size_t nout = 0;
	int ret = 0;

	pthread_mutex_lock(&fs->defer_mu);
	for (size_t i = 0; i < fs->ndefer; i++)
		nout += fs->defer[i].seq <= upto;
	if (nout)
		out = malloc(nout * sizeof(*out));
	if (nout && !out) {
		pthread_mutex_unlock(&fs->defer_mu);
		return -ENOMEM;
	}
	nout = 0;
	for (size_t i = 0; i < fs->ndefer;) {
		if (fs->defer[i].seq <= upto) {
			out[nout++] = fs->defer[i];
			fs->defer[i] = fs->defer[--fs->ndefer];
		} else {
			i++;
		}
	}
	pthread_mutex_unlock(&fs->defer_mu);
	for (size_t i = 0; i < nout; i++) {
		int r = fspace_put(fs, out[i].blk, out[i].n);

		atomic_fetch_sub(&fs->deferred, out[i].n);
		if (r && !ret)
			ret = r;
		if (r && r != -EINVAL)	/* a load failed: try again later */
			fspace_defer(fs, out[i].blk, out[i].n, out[i].seq);
	}
	free(out);
	return ret;
}

int fspace_release_durable(struct fspace *fs, uint64_t durable_seq)
{
	return release_upto(fs, durable_seq);
}

int fspace_release_all(struct fspace *fs)
{
	return release_upto(fs, UINT64_MAX);
}

uint64_t fspace_deferred_blocks(struct fspace *fs)
{
	return atomic_load(&fs->deferred);
}

void fspace_data_area(struct fspace *fs, uint64_t *start, uint64_t *end)
{
	*start = fs->p.start;
	*end = fs->p.end;
}

/* fspace_set_words inside group @gi: its words [w0, w0 + n) become @used. */
static int set_words_group(struct fspace *fs, uint64_t gi, uint64_t w0, size_t n,
			   const uint64_t *used)
{
	struct fs_group *g = &fs->groups[gi];
	uint64_t len = fs_glen(fs, gi), lo = UINT64_MAX, hi = 0, taken = 0, freed = 0;
	int ret;

	pthread_mutex_lock(&g->mu);
	ret = fs_group_load(fs, gi);
	for (size_t i = 0; i < n && !ret; i++) {
		uint64_t w = w0 + i, nw = used[i];

		if ((w << 6) + 64 > len)	/* past a short group's end: used */
			nw |= ~0ull << (len & 63);
		if (nw == g->bm[w])
			continue;
		taken += (uint64_t)__builtin_popcountll(nw & ~g->bm[w]);
		freed += (uint64_t)__builtin_popcountll(g->bm[w] & ~nw);
		g->bm[w] = nw;
		lo = lo < w << 6 ? lo : w << 6;
		hi = (w << 6) + 64 < len ? (w << 6) + 64 : len;
	}
	if (!ret && hi) {
		atomic_store(&g->free, atomic_load(&g->free) + freed - taken);
		atomic_fetch_add(&fs->nfree, freed - taken);
		if (freed)
			widen(fs, gi, lo, hi);
		fs_group_mark(g, lo, hi);
	}
	pthread_mutex_unlock(&g->mu);
	return ret;
}

int fspace_set_words(struct fspace *fs, uint64_t blk, size_t nwords, const uint64_t *used)
{
	uint64_t pos, end;

	if (blk < fs->p.start || blk >= fs->p.end || (blk - fs->p.start) & 63)
		return -EINVAL;
	pos = blk - fs->p.start;
	end = pos + 64 * (uint64_t)nwords < fs->total ? pos + 64 * (uint64_t)nwords : fs->total;
	while (pos < end) {
		uint64_t gi = pos / fs->p.gblocks, gs = fs_gstart(fs, gi);
		uint64_t e = gs + fs_glen(fs, gi) < end ? gs + fs_glen(fs, gi) : end;
		int ret = set_words_group(fs, gi, (pos - gs) >> 6, (e - pos + 63) >> 6,
					  used + ((pos - (blk - fs->p.start)) >> 6));

		if (ret)
			return ret;
		pos = e;
	}
	return 0;
}

int fspace_get_words(struct fspace *fs, uint64_t blk, size_t nwords, uint64_t *used)
{
	uint64_t pos, end;

	if (blk < fs->p.start || blk >= fs->p.end || (blk - fs->p.start) & 63)
		return -EINVAL;
	memset(used, 0xff, nwords * 8);
	pos = blk - fs->p.start;
	end = pos + 64 * (uint64_t)nwords < fs->total ? pos + 64 * (uint64_t)nwords : fs->total;
	while (pos < end) {
		uint64_t gi = pos / fs->p.gblocks, gs = fs_gstart(fs, gi);
		uint64_t e = gs + fs_glen(fs, gi) < end ? gs + fs_glen(fs, gi) : end;
		struct fs_group *g = &fs->groups[gi];
		int ret;

		pthread_mutex_lock(&g->mu);
		ret = fs_group_load(fs, gi);
		if (!ret)
			memcpy(used + ((pos - (blk - fs->p.start)) >> 6), g->bm + ((pos - gs) >> 6),
			       ((e - pos + 63) >> 6) * 8);
		pthread_mutex_unlock(&g->mu);
		if (ret)
			return ret;
		pos = e;
	}
	return 0;
}

/* Run [*rs, *rs + *rn) grows by [s, s + n) when they touch; else it goes
 * to @fn and [s, s + n) starts the next. */
static int run_add(fspace_run_fn fn, void *ctx, uint64_t *rs, uint64_t *rn, uint64_t s,
		   uint64_t n)
{
	int ret = 0;

	if (*rn && *rs + *rn == s) {
		*rn += n;
		return 0;
	}
	if (*rn)
		ret = fn(ctx, *rs, *rn);
	*rs = s;
	*rn = n;
	return ret;
}

/* The used runs of mixed group @gi (its bitmap copied into @bm under its
 * mu, scanned outside it) through run_add. */
static int group_runs(struct fspace *fs, uint64_t gi, uint64_t *bm, fspace_run_fn fn, void *ctx,
		      uint64_t *rs, uint64_t *rn)
{
	struct fs_group *g = &fs->groups[gi];
	uint64_t len = fs_glen(fs, gi), base = fs->p.start + fs_gstart(fs, gi), pos = 0;
	int ret;

	pthread_mutex_lock(&g->mu);
	ret = fs_group_load(fs, gi);
	if (!ret)
		memcpy(bm, g->bm, fs->gwords * 8);
	pthread_mutex_unlock(&g->mu);
	while (!ret && pos < len) {
		uint64_t s = bm_next_one(bm, pos, len), e = bm_next_zero(bm, s, len);

		if (s < e)
			ret = run_add(fn, ctx, rs, rn, base + s, e - s);
		pos = e;
	}
	return ret;
}

int fspace_used_runs(struct fspace *fs, fspace_run_fn fn, void *ctx)
{
	uint64_t rs = 0, rn = 0, *bm = NULL;
	int ret = 0;

	for (uint64_t gi = 0; gi < fs->ngroups && !ret; gi++) {
		uint64_t len = fs_glen(fs, gi), nfree = atomic_load(&fs->groups[gi].free);

		if (nfree == len)
			continue;
		if (nfree == 0) {
			ret = run_add(fn, ctx, &rs, &rn, fs->p.start + fs_gstart(fs, gi), len);
			continue;
		}
		if (!bm && !(bm = malloc(fs->gwords * 8)))
			ret = -ENOMEM;
		if (!ret)
			ret = group_runs(fs, gi, bm, fn, ctx, &rs, &rn);
	}
	free(bm);
	if (!ret && rn)
		ret = fn(ctx, rs, rn);
	return ret;
}
