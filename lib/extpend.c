// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * extpend: pending extent records of lazy maps (extpend.h).  A map's
 * pieces are one array in arrival order, each inside one leaf (the tiny
 * leaf, or 512 blocks of a radix tree); the first apply of a range sorts
 * it by leaf, stably, so the pieces of one leaf stay in log order and a
 * range finds its leaves by binary search.  The pieces of all maps of a
 * cache are counted there (bytes against the bound the mount sets), and
 * the maps holding some are listed there, for the checkpoint's last look.
 *
 * Pieces are added only by the mount's replay (one thread); they are
 * applied under the map's pend lock by whichever user of the map comes
 * first, so two users of the same leaf (shared range locks) never apply a
 * piece twice, and a user that found none in its range needs no lock:
 * nothing is added after the replay.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "extent_i.h"
#include "tfs.h"
#include "extpend.h"
#include "tlog.h"

struct pend_piece {
	uint64_t fblk;
	uint64_t phys;			/* 0: a clear */
	uint64_t *csums;		/* n of them, or NULL */
	uint64_t seq;			/* arrival: the order inside a leaf */
	uint32_t n;
	bool done;
};

struct ext_pend {
	pthread_mutex_t mu;		/* below: taken before any lock of the map's leaves */
	struct pend_piece *v;
	size_t n, cap;
	bool sorted;			/* v is in leaf order (then seq) */
	size_t ahead_from, ahead_to;	/* v[] read ahead last (read_ahead) */
	_Atomic size_t left;		/* pieces not applied; read without mu */
	extent_drop_fn drop;
	void *dctx;
	struct extent_map *m;
	struct ext_pend *next, **pprev;	/* xc->pend_list, under xc->pend_mu */
};

/* A clear reaching more leaves than this is applied at once (a truncate
 * covers the whole file: its pieces would be one a leaf). */
#define PEND_CLEAR_LEAVES 16

static uint64_t leaf_of(uint64_t f)
{
	return f < EXTENT_TINY_FBLK ? 0 : 1 + f / EXT_FAN;
}

static uint64_t leaf_end(uint64_t f)
{
	uint64_t e = f < EXTENT_TINY_FBLK ? EXTENT_TINY_FBLK : (f / EXT_FAN + 1) * EXT_FAN;

	return e > EXTENT_MAX_FBLK ? EXTENT_MAX_FBLK : e;
}

static uint64_t piece_bytes(const struct pend_piece *pc)
{
	return sizeof(*pc) + (pc->csums ? (uint64_t)pc->n * sizeof(uint64_t) : 0);
}

struct same_ctx {
	uint64_t fblk, phys;		/* the piece's mapping */
	extent_drop_fn drop;
	void *dctx;
};

/* A block the map already maps to the piece's block keeps its one
 * reference (extent_set drops nothing there): the replay's alloc_use of it
 * goes back. */
static int same_run(void *ctx, uint64_t fblk, uint64_t phys, uint32_t n,
		    const struct extent_ent *ents)
{
	struct same_ctx *c = ctx;

	(void)ents;
	if (EXTENT_PHYS(phys) == c->phys + (fblk - c->fblk))
		c->drop(c->dctx, EXTENT_PHYS(phys), n);
	return 0;
}

/* One piece into the map: its leaf read in first (the lookup), so the
 * walk and the set meet it in memory and a failure changes nothing. */
static int apply_piece(struct ext_pend *p, struct pend_piece *pc)
{
	struct extent_map *m = p->m;
	struct extent_cache *xc = m->xc;
	int ret;

	if (pc->phys) {
		struct extent_ent e;
		struct same_ctx c = { pc->fblk, EXTENT_PHYS(pc->phys), p->drop, p->dctx };

		ret = extlz_lookup(m, pc->fblk, &e);
		if (ret && ret != -ENOENT)
			return ret;
		ret = extlz_walk(m, pc->fblk, pc->fblk + pc->n, same_run, &c);
		if (ret == 0)
			ret = extlz_set(m, pc->fblk, pc->n, pc->phys, pc->csums, p->drop, p->dctx);
	} else {
		ret = extlz_clear(m, pc->fblk, pc->n, p->drop, p->dctx, false);
	}
	if (ret)
		return ret;
	atomic_fetch_sub(&xc->pend_bytes, piece_bytes(pc));
	atomic_fetch_sub(&xc->pend_pieces, 1);
	atomic_fetch_add(&xc->pend_applied, 1);
	free(pc->csums);
	pc->csums = NULL;
	pc->done = true;
	atomic_fetch_sub(&p->left, 1);
	return 0;
}

static int by_leaf(const void *a, const void *b)
{
	const struct pend_piece *x = a, *y = b;
	uint64_t lx = leaf_of(x->fblk), ly = leaf_of(y->fblk);

	if (lx != ly)
		return lx < ly ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Under p->mu: all applied, the array starts over. */
static void reset_if_done(struct ext_pend *p)
{
	if (atomic_load(&p->left))
		return;
	p->n = 0;
	p->sorted = false;
	p->ahead_from = p->ahead_to = 0;
}

/*
 * Read-ahead.  Applying a piece reads its leaf in (the source's items, a
 * tree leaf read when the node cache lost it), one leaf after the other:
 * the checkpoint after a lazy replay applied hundreds of thousands of
 * pieces that way, a range (a write's few blocks) at a time.  So the
 * ranges of the next AHEAD_LEAVES distinct map leaves with pieces are
 * handed to the source's read-ahead together, past the range asked for:
 * every piece is applied by the next checkpoint if not before, in this
 * order, and that checkpoint compares each changed leaf with the tree's
 * items, so what is read ahead is read once anyway.  Whether a map leaf is
 * in memory is not looked at: past the caller's range lock its interior
 * nodes may be freed meanwhile; the read-ahead skips cached tree leaves.
 * [ahead_from, ahead_to) of v[] is what was read ahead last.
 */
#define AHEAD_LEAVES 64

struct ahead {
	uint64_t lo[AHEAD_LEAVES], hi[AHEAD_LEAVES];
	size_t n;
};

static void ahead_span(struct ahead *a, uint64_t lo, uint64_t hi)
{
	if (a->n && a->hi[a->n - 1] == lo) {
		a->hi[a->n - 1] = hi;
		return;
	}
	a->lo[a->n] = lo;
	a->hi[a->n] = hi;
	a->n++;
}

/* Under p->mu: read ahead for the pieces from v[a] on; returns the index
 * past the pieces it covered. */
static size_t read_ahead(struct ext_pend *p, size_t a)
{
	struct extent_map *m = p->m;
	const struct extent_src *src = &m->xc->src;
	struct ahead *ah;
	size_t leaves = 0;
	uint64_t last = UINT64_MAX;

	if (!src->prefetch || !(ah = malloc(sizeof(*ah))))
		return p->n;
	ah->n = 0;
	for (; a < p->n; a++) {
		uint64_t l = leaf_of(p->v[a].fblk), f = p->v[a].fblk, s;

		if (p->v[a].done || l == last)
			continue;
		if (leaves == AHEAD_LEAVES)
			break;
		last = l;
		leaves++;
		s = f < EXTENT_TINY_FBLK ? 0 : f / EXT_FAN * EXT_FAN;
		if (f >= EXTENT_TINY_FBLK && s < EXTENT_TINY_FBLK)
			s = EXTENT_TINY_FBLK;
		ahead_span(ah, s, leaf_end(f));
	}
	if (leaves > 1) {
		tfs_may_block();	/* node reads: hand the reader turn on */
		(void)src->prefetch(src->ctx, m->ino, ah->lo, ah->hi, ah->n);
	}
	free(ah);
	return a;
}

/* Under p->mu: the pieces of leaves [lo, hi] (leaf_of numbers), in leaf
 * order. */
static int apply_leaves(struct ext_pend *p, uint64_t lo, uint64_t hi)
{
	size_t a = 0, b;
	int ret = 0;

	if (!atomic_load(&p->left))
		return 0;
	if (!p->sorted) {
		qsort(p->v, p->n, sizeof(*p->v), by_leaf);
		p->sorted = true;
		p->ahead_from = p->ahead_to = 0;	/* indices moved */
	}
	for (b = p->n; a < b;) {
		size_t mid = a + (b - a) / 2;

		if (leaf_of(p->v[mid].fblk) < lo)
			a = mid + 1;
		else
			b = mid;
	}
	for (; a < p->n && leaf_of(p->v[a].fblk) <= hi; a++) {
		if (p->v[a].done)
			continue;
		if (a < p->ahead_from || a >= p->ahead_to) {
			p->ahead_from = a;
			p->ahead_to = read_ahead(p, a);
		}
		ret = apply_piece(p, &p->v[a]);
		if (ret)
			break;
	}
	reset_if_done(p);
	return ret;
}

static struct ext_pend *pend_new(struct extent_map *m, extent_drop_fn drop, void *ctx)
{
	struct extent_cache *xc = m->xc;
	struct ext_pend *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	pthread_mutex_init(&p->mu, NULL);
	p->m = m;
	p->drop = drop;
	p->dctx = ctx;
	pthread_mutex_lock(&xc->pend_mu);
	p->next = xc->pend_list;
	if (p->next)
		p->next->pprev = &p->next;
	p->pprev = &xc->pend_list;
	xc->pend_list = p;
	pthread_mutex_unlock(&xc->pend_mu);
	return p;
}

/* Under p->mu: room for @k more pieces. */
static int reserve(struct ext_pend *p, size_t k)
{
	if (p->n + k <= p->cap)
		return 0;
	size_t ncap = p->cap ? p->cap * 2 : 64;

	while (ncap < p->n + k)
		ncap *= 2;
	void *nv = realloc(p->v, ncap * sizeof(*p->v));
	if (!nv)
		return -ENOMEM;
	p->v = nv;
	p->cap = ncap;
	return 0;
}

int extpend_add(struct extent_map *m, uint64_t fblk, uint64_t n, uint64_t phys,
		const void *csums, extent_drop_fn drop, void *ctx)
{
	struct extent_cache *xc = m->xc;
	uint64_t to, leaves, bytes;
	struct ext_pend *p;
	size_t n0;
	int ret = 0;

	if (!xc || !n || fblk >= EXTENT_MAX_FBLK)
		return -EINVAL;
	to = n > EXTENT_MAX_FBLK - fblk ? EXTENT_MAX_FBLK : fblk + n;
	leaves = leaf_of(to - 1) - leaf_of(fblk) + 1;
	if (!phys && leaves > PEND_CLEAR_LEAVES)
		return -E2BIG;
	bytes = leaves * sizeof(struct pend_piece) + (phys ? (to - fblk) * sizeof(uint64_t) : 0);
	if (atomic_load(&xc->pend_bytes) + bytes > atomic_load(&xc->pend_max))
		return -ENOSPC;
	p = m->pend;
	if (!p) {
		p = pend_new(m, drop, ctx);
		if (!p)
			return -ENOMEM;
		m->pend = p;
	}
	pthread_mutex_lock(&p->mu);
	/* Sorted by an apply during the replay (a deletion, a long clear):
	 * what is left goes in now, so the array is in arrival order again. */
	if (p->sorted) {
		ret = apply_leaves(p, 0, UINT64_MAX);
		reset_if_done(p);
	}
	n0 = p->n;
	if (ret == 0)
		ret = reserve(p, (size_t)leaves);
	for (uint64_t f = fblk; ret == 0 && f < to;) {
		uint64_t e = leaf_end(f) < to ? leaf_end(f) : to;
		struct pend_piece *pc = &p->v[p->n];

		*pc = (struct pend_piece){ .fblk = f, .phys = phys ? phys + (f - fblk) : 0,
					   .seq = p->n, .n = (uint32_t)(e - f) };
		if (phys && csums) {
			pc->csums = malloc((e - f) * sizeof(uint64_t));
			if (!pc->csums) {
				ret = -ENOMEM;
				break;
			}
			memcpy(pc->csums, (const unsigned char *)csums + (f - fblk) * sizeof(uint64_t),
			       (e - f) * sizeof(uint64_t));
		}
		atomic_fetch_add(&xc->pend_bytes, piece_bytes(pc));
		atomic_fetch_add(&xc->pend_pieces, 1);
		atomic_fetch_add(&p->left, 1);
		p->n++;
		f = e;
	}
	/* A record half kept: its pieces go again (none was applied: the
	 * array is in arrival order), the caller applies it at once. */
	if (ret) {
		while (p->n > n0) {
			struct pend_piece *pc = &p->v[--p->n];

			atomic_fetch_sub(&xc->pend_bytes, piece_bytes(pc));
			atomic_fetch_sub(&xc->pend_pieces, 1);
			atomic_fetch_sub(&p->left, 1);
			free(pc->csums);
		}
	}
	pthread_mutex_unlock(&p->mu);
	return ret;
}

int extpend_apply(struct extent_map *m, uint64_t from, uint64_t to)
{
	struct ext_pend *p = m->pend;
	int ret;

	if (!p || !atomic_load(&p->left))
		return 0;
	if (to > EXTENT_MAX_FBLK)
		to = EXTENT_MAX_FBLK;
	if (from >= to)
		return 0;
	pthread_mutex_lock(&p->mu);
	ret = apply_leaves(p, leaf_of(from), leaf_of(to - 1));
	pthread_mutex_unlock(&p->mu);
	return ret;
}

bool extpend_any(const struct extent_map *m)
{
	return m->pend && atomic_load(&m->pend->left);
}

/* The file is going (extpend_release with apply) and some pieces could not
 * be applied: each set left holds the reference the replay took on its
 * blocks (alloc_use); applied, it would have gone into the map and the
 * destroy's clear would have dropped it.  Drop it here.  What the sets
 * would have replaced stays in the map for that clear; a leaf it cannot
 * read either leaks its blocks until fsck, as it says. */
static void drop_unapplied(struct ext_pend *p, int err)
{
	uint64_t blocks = 0;

	for (size_t i = 0; i < p->n; i++) {
		if (p->v[i].done || !p->v[i].phys || !p->drop)
			continue;
		p->drop(p->dctx, p->v[i].phys, p->v[i].n);
		blocks += p->v[i].n;
	}
	tfs_log(LOG_WARNING, "deleting inode %llu: its pending map records could not be "
		"applied (%s); %llu blocks they mapped were freed, blocks of map leaves "
		"that cannot be read stay allocated until fsck -y",
		(unsigned long long)p->m->ino, strerror(-err), (unsigned long long)blocks);
}

int extpend_release(struct extent_map *m, bool apply)
{
	struct ext_pend *p = m->pend;
	struct extent_cache *xc = m->xc;
	int ret = 0;

	if (!p)
		return 0;
	if (apply)
		ret = extpend_apply(m, 0, EXTENT_MAX_FBLK);
	if (ret)	/* a leaf unreadable: the sets left own their blocks still */
		drop_unapplied(p, ret);
	pthread_mutex_lock(&xc->pend_mu);
	*p->pprev = p->next;
	if (p->next)
		p->next->pprev = p->pprev;
	pthread_mutex_unlock(&xc->pend_mu);
	for (size_t i = 0; i < p->n; i++) {
		if (p->v[i].done)
			continue;
		atomic_fetch_sub(&xc->pend_bytes, piece_bytes(&p->v[i]));
		atomic_fetch_sub(&xc->pend_pieces, 1);
		free(p->v[i].csums);
	}
	free(p->v);
	pthread_mutex_destroy(&p->mu);
	free(p);
	m->pend = NULL;
	return ret;
}

/* @fn on every map of @xc with pieces pending, each under its mu (xc's
 * pend_mu held throughout), until one fails. */
static int each_pend(struct extent_cache *xc, int (*fn)(struct ext_pend *p, void *c), void *c)
{
	int ret = 0;

	if (!xc || !atomic_load(&xc->pend_pieces))
		return 0;
	pthread_mutex_lock(&xc->pend_mu);
	for (struct ext_pend *p = xc->pend_list; p && ret == 0; p = p->next) {
		pthread_mutex_lock(&p->mu);
		ret = fn(p, c);
		pthread_mutex_unlock(&p->mu);
	}
	pthread_mutex_unlock(&xc->pend_mu);
	return ret;
}

static int apply_all_fn(struct ext_pend *p, void *c)
{
	(void)c;
	return apply_leaves(p, 0, UINT64_MAX);
}

int extpend_apply_all(struct extent_cache *xc)
{
	return each_pend(xc, apply_all_fn, NULL);
}

struct note_ctx {
	extpend_note_fn note;
	void *ctx;
};

static int note_fn(struct ext_pend *p, void *c)
{
	struct note_ctx *nc = c;
	int ret = 0;

	for (size_t i = 0; i < p->n && ret == 0; i++)
		if (!p->v[i].done)
			ret = nc->note(nc->ctx, p->m->ino, p->v[i].fblk, p->v[i].n);
	return ret;
}

int extpend_note_late(struct extent_cache *xc, extpend_note_fn note, void *ctx)
{
	struct note_ctx nc = { note, ctx };

	return each_pend(xc, note_fn, &nc);
}

bool extpend_late(struct extent_cache *xc, uint64_t *late)
{
	uint64_t n = xc ? atomic_load(&xc->pend_pieces) : 0;

	*late += n;
	return n != 0;
}

void extpend_stats(struct extent_cache *xc, uint64_t *pieces, uint64_t *bytes,
		   uint64_t *applied)
{
	*pieces = xc ? atomic_load(&xc->pend_pieces) : 0;
	*bytes = xc ? atomic_load(&xc->pend_bytes) : 0;
	*applied = xc ? atomic_load(&xc->pend_applied) : 0;
}

void extpend_set_max(struct extent_cache *xc, uint64_t bytes)
{
	if (xc)
		atomic_store(&xc->pend_max, bytes);
}
