/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Description: extmodel.h: what the format-v2 map tests compare a lazy map
 * (lib/extent_lazy.c, read through v2ext) with an all-in-memory model by:
 * a xorshift generator, the blocks a map drops summed as a count and a
 * hash, the source over the test's tree, walks and points compared, and
 * file blocks drawn near 0, EXTENT_LOW_FBLK and the top of the range
 * (test_extcache, test_extpend).  The state both tests run on (struct st:
 * a model and a lazy map over one tree), its set and clear steps, its
 * checkpoint, setup and teardown.  The includer defines INO, MAXF and
 * BUDGET and includes cmocka.h, extent.h, extcache.h and v2ext.h first.
 */
#ifndef TWINFS_EXTMODEL_H
#define TWINFS_EXTMODEL_H

static uint64_t rs = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return rs;
}

/* ---- dropped blocks, compared as sums (count and a hash of blocks) ---- */

struct drops {
	uint64_t n, h;
};

static uint64_t mix(uint64_t x)
{
	x ^= x >> 31;
	x *= 0x7fb5d329728ea185ull;
	x ^= x >> 27;
	return x ^ (x >> 33);
}

static void drop_cb(void *ctx, uint64_t phys, uint64_t n)
{
	struct drops *d = ctx;

	for (uint64_t i = 0; i < n; i++)
		d->h += mix(phys + i);
	d->n += n;
}

/* ---- the source: v2ext over the test's tree ---- */

static int s_walk(void *ctx, uint64_t ino, uint64_t from, uint64_t to, extent_run_fn cb, void *c)
{
	return v2ext_walk(ctx, ino, from, to, cb, c);
}

static int s_data(void *ctx, uint64_t ino, uint64_t f, uint64_t *out)
{
	return v2ext_next_data(ctx, ino, f, out);
}

static int s_hole(void *ctx, uint64_t ino, uint64_t f, uint64_t *out)
{
	return v2ext_next_hole(ctx, ino, f, out);
}

/* ---- comparing the lazy map with the model ---- */

struct seen {
	uint64_t h, blocks;
};

static int seen_run(void *ctx, uint64_t fblk, uint64_t phys, uint32_t n,
		    const struct extent_ent *ents)
{
	struct seen *s = ctx;

	for (uint32_t i = 0; i < n; i++) {
		assert_int_equal(ents[i].phys, phys + i);
		s->h += mix((fblk + i) ^ mix(ents[i].phys) ^ mix(mix(ents[i].csum)));
	}
	s->blocks += n;
	return 0;
}

#define ZONE_SPAN 40000u
static const uint64_t zone[] = { 0, EXTENT_LOW_FBLK - ZONE_SPAN / 2, MAXF - ZONE_SPAN };

static void cmp_walk(const struct extent_map *m, const struct extent_map *l, uint64_t from,
		     uint64_t to)
{
	struct seen a = { 0 }, b = { 0 };

	assert_int_equal(extent_walk(m, from, to, seen_run, &a), 0);
	assert_int_equal(extent_walk(l, from, to, seen_run, &b), 0);
	assert_int_equal(a.blocks, b.blocks);
	assert_int_equal(a.h, b.h);
}

static void cmp_point(const struct extent_map *m, const struct extent_map *l, uint64_t f)
{
	struct extent_ent a, b;

	assert_int_equal(extent_lookup(l, f, &b), extent_lookup(m, f, &a));
	assert_int_equal(a.phys, b.phys);
	assert_int_equal(a.csum, b.csum);
	assert_int_equal(extent_next_data(l, f), extent_next_data(m, f));
	assert_int_equal(extent_next_hole(l, f), extent_next_hole(m, f));
}

static uint64_t rnd_fblk(void)
{
	return zone[rnd() % 3] + rnd() % ZONE_SPAN;
}

/* ---- the maps under test: a model and a lazy map on one tree ---- */

struct st {
	struct env e;
	struct broot root;
	uint64_t gen;
	struct extent_cache *xc;
	struct extent_map m, l;		/* model, lazy */
	struct drops dm, dl;
	uint64_t nextphys;
	uint64_t over;			/* times the dirty leaves passed the budget */
};

static inline void op_set(struct st *s)
{
	uint64_t f = rnd_fblk(), cs[600];
	uint32_t n = 1 + (uint32_t)(rnd() % (rnd() % 4 ? 16 : 600));
	uint64_t phys = s->nextphys;

	if (f + n > MAXF)
		n = (uint32_t)(MAXF - f);
	for (uint32_t i = 0; i < n; i++)
		cs[i] = rnd();
	bool unwritten = rnd() % 5 == 0;

	if (unwritten)
		phys |= EXTENT_UNWRITTEN;	/* no csums (fallocate) */
	s->nextphys += n;
	assert_int_equal(extent_set(&s->l, f, n, phys, unwritten ? NULL : cs, drop_cb, &s->dl),
			 extent_set(&s->m, f, n, phys, unwritten ? NULL : cs, drop_cb, &s->dm));
}

static inline void op_clear(struct st *s)
{
	uint64_t f = rnd_fblk(), n = rnd() % 8 ? 1 + rnd() % 1500 : MAXF;

	assert_int_equal(extent_clear(&s->l, f, n, drop_cb, &s->dl),
			 extent_clear(&s->m, f, n, drop_cb, &s->dm));
}

/* ---- the checkpoint: what the map holds in memory into the tree ---- */

static inline int put_run(void *ctx, uint64_t fblk, uint64_t phys, uint32_t n,
		   const struct extent_ent *ents)
{
	uint64_t cs[EXTENT_TINY_FBLK > 512 ? EXTENT_TINY_FBLK : 512];

	for (uint32_t i = 0; i < n; i++)
		cs[i] = ents[i].csum;
	return v2ext_set(ctx, INO, fblk, n, phys, cs, NULL, NULL, NULL);
}

struct piece_ctx {
	struct st *s;
	unsigned pieces;
};

/* As ckpt_v2.c's: readers of the blocks around the piece wait or redo. */
static inline int put_piece(void *ctx, uint64_t from, uint64_t to)
{
	struct piece_ctx *p = ctx;
	int ret;

	if (!getenv("EXTCACHE_NO_CHANGE_RULE"))	/* to see test_race fail */
		extcache_src_changing(p->s->xc, INO);
	ret = v2ext_clear(&p->s->e.t, INO, from, to - from, NULL, NULL, NULL);
	p->pieces++;
	if (ret == 0)
		ret = extent_walk(&p->s->l, from, to, put_run, &p->s->e.t);
	if (!getenv("EXTCACHE_NO_CHANGE_RULE"))
		extcache_src_changed(p->s->xc, INO);
	return ret;
}

static inline void checkpoint(struct st *s)
{
	uint64_t epoch = extcache_epoch_begin(s->xc);
	struct piece_ctx p = { s, 0 };
	struct extcache_stats st;

	assert_int_equal(bt_begin(&s->e.t, s->gen++), 0);
	assert_int_equal(extent_resident(&s->l, 0, MAXF, put_piece, &p), 0);
	commit_release(&s->e.t, &s->root);
	extcache_stats(s->xc, &st);
	if (st.bytes > BUDGET)
		s->over++;	/* changed leaves stayed past the budget */
	extcache_committed(s->xc, epoch);
	extcache_trim(s->xc);
	extcache_stats(s->xc, &st);
	assert_true(st.bytes <= BUDGET);
}

static inline void setup(struct st *s)
{
	struct extent_src src;

	memset(s, 0, sizeof(*s));
	s->gen = 1;
	s->nextphys = 1000;
	env_open(&s->e, 8 * BNODE_SIZE);
	/* v2ext's own read-ahead (bt_prefetch_ranges) under the maps too */
	src = (struct extent_src){ &s->e.t, s_walk, s_data, s_hole, NULL };
	v2ext_source(&s->e.t, &src);
	assert_int_equal(extcache_create(&src, BUDGET, &s->xc), 0);
	extent_init(&s->m);
	extent_init_lazy(&s->l, s->xc, INO, NULL, 0, false);
	extcache_set_compact(s->xc, true);	/* -o compact_dirty: the new path */
}

static inline void teardown(struct st *s)
{
	extent_destroy(&s->l, NULL, NULL);
	extent_destroy(&s->m, NULL, NULL);
	extcache_destroy(s->xc);
	env_close(&s->e);
}

#endif
