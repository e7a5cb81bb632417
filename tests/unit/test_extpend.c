// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: -o lazyreplay's pending extent records (lib/extpend.c) against an eager map: random sets, clears (small, over 16+ leaves) and re-sets of the same blocks near block 0, 2^36 and 2^51, kept pending as the mount's replay keeps them, with lookups, walks and SEEK_DATA/SEEK_HOLE in between (the sorted-then-add path) and a pend_max small enough that some fall back to an apply at once; ended by a checkpoint, a truncate to 0 or applying all: the mappings, mapped counts and the blocks handed back to the allocator (count and a hash) equal the eager map's.  Then 4 readers applying pending pieces at once under shared range locks while leaves are evicted.  Fails with one leaf's pieces applied in reverse, or without same_run's correction of an unwritten block written in place (review of session 36).  Then read-ahead: pieces over 3,000 map leaves applied on a cold cache read their tree leaves ahead (btree.prefetched), and a checkpoint's put inside its change of the file's items while a reader applies another leaf's pieces must not deadlock (review of session 38). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <unistd.h>

#include "bt_memstore.h"
#include "btree.h"
#include "extcache.h"
#include "extent.h"
#include "rangelock.h"
#include "v2ext.h"
#include "extpend.h"
#include "alloc_v2.h"
#include "ckpt_v2.h"

#define INO 9u
#define MAXF EXTENT_MAX_FBLK
#define BUDGET 40000u		/* about 4 leaves */
#define LEAF_BLOCKS 512u	/* EXT_FAN (extent_i.h): blocks of a map leaf */

#include "extmodel.h"

/* ---- extpend against the eager model ---- */

struct same_c {
	uint64_t fblk, phys;
	struct drops *d;
};

static int same_cb(void *ctx, uint64_t fblk, uint64_t phys, uint32_t n,
		   const struct extent_ent *ents)
{
	struct same_c *c = ctx;

	(void)ents;
	if (EXTENT_PHYS(phys) == c->phys + (fblk - c->fblk))
		drop_cb(c->d, EXTENT_PHYS(phys), n);
	return 0;
}

/* apply.c's ext_set_counted (the use is the same on both sides: not counted) */
static int set_counted(struct extent_map *m, uint64_t f, uint32_t n, uint64_t phys,
		       const uint64_t *cs, struct drops *d)
{
	struct same_c c = { f, EXTENT_PHYS(phys), d };

	extent_walk(m, f, f + n, same_cb, &c);
	return extent_set(m, f, n, phys, cs, drop_cb, d);
}

static unsigned kept, fell;

static void rop_set(struct st *s, uint64_t f, uint32_t n, uint64_t phys, const uint64_t *cs)
{
	if (f + n > MAXF)
		n = (uint32_t)(MAXF - f);
	if (extpend_add(&s->l, f, n, phys, cs, drop_cb, &s->dl) == 0)
		kept++;
	else {
		fell++;
		assert_int_equal(set_counted(&s->l, f, n, phys, cs, &s->dl), 0);
	}
	assert_int_equal(set_counted(&s->m, f, n, phys, cs, &s->dm), 0);
}

static void rop_clear(struct st *s, uint64_t f, uint64_t n)
{
	if (extpend_add(&s->l, f, n, 0, NULL, drop_cb, &s->dl) == 0)
		kept++;
	else {
		fell++;
		assert_int_equal(extent_clear(&s->l, f, n, drop_cb, &s->dl), 0);
	}
	assert_int_equal(extent_clear(&s->m, f, n, drop_cb, &s->dm), 0);
}

static void pend_round(uint64_t seed, uint64_t maxb, int end)
{
	struct st s;
	uint64_t cs[600];

	rs = seed;
	setup(&s);
	extcache_set_compact(s.xc, seed & 1);
	/* a base the tree holds */
	for (unsigned i = 0; i < 100; i++)
		op_set(&s);
	checkpoint(&s);
	extent_destroy(&s.l, NULL, NULL);
	extent_init_lazy(&s.l, s.xc, INO, NULL, extent_mapped(&s.m), false);
	extpend_set_max(s.xc, maxb);
	for (unsigned i = 0; i < 3000; i++) {
		unsigned op = rnd() % 16;
		uint64_t f = rnd_fblk();

		if (op < 8) {
			uint32_t n = 1 + (uint32_t)(rnd() % (rnd() % 4 ? 16 : 600));
			uint64_t phys = s.nextphys;
			bool unw = rnd() % 5 == 0;

			for (uint32_t k = 0; k < n; k++)
				cs[k] = rnd();
			s.nextphys += n;
			rop_set(&s, f, n, unw ? phys | EXTENT_UNWRITTEN : phys, unw ? NULL : cs);
		} else if (op < 10) {
			/* an unwritten block written in place: the same block again */
			struct extent_ent e;

			if (extent_lookup(&s.m, f, &e) == 0 && e.phys) {
				cs[0] = rnd();
				rop_set(&s, f, 1, EXTENT_PHYS(e.phys), cs);
			}
		} else if (op < 13) {
			rop_clear(&s, f, rnd() % 8 ? 1 + rnd() % 1500 : MAXF - f);
		} else if (op < 14) {
			/* a user of the map during the replay (a deletion elsewhere,
			 * a long clear): compare where it looks */
			cmp_point(&s.m, &s.l, f);
		} else if (op < 15 && rnd() % 4 == 0) {
			cmp_walk(&s.m, &s.l, f, f + rnd() % 3000);
		}
	}
	if (end == 0) {
		checkpoint(&s);
		assert_false(extpend_any(&s.l));
	} else if (end == 1) {
		assert_int_equal(extent_clear(&s.l, 0, MAXF, drop_cb, &s.dl), 0);
		extent_clear(&s.m, 0, MAXF, drop_cb, &s.dm);
	} else {
		assert_int_equal(extpend_apply_all(s.xc), 0);
	}
	assert_int_equal(s.dl.n, s.dm.n);
	assert_int_equal(s.dl.h, s.dm.h);
	assert_int_equal(extent_mapped(&s.l), extent_mapped(&s.m));
	cmp_walk(&s.m, &s.l, 0, MAXF);
	for (unsigned i = 0; i < 300; i++)
		cmp_point(&s.m, &s.l, rnd_fblk());
	if (end == 0) {
		/* read back from the tree alone */
		uint64_t mapped = extent_mapped(&s.l);

		extent_destroy(&s.l, NULL, NULL);
		extent_init_lazy(&s.l, s.xc, INO, NULL, mapped, false);
		cmp_walk(&s.m, &s.l, 0, MAXF);
	}
	teardown(&s);
}

static void test_pend(void **state)
{
	(void)state;
	for (uint64_t seed = 1; seed <= 12; seed++)
		for (int end = 0; end < 3; end++)
			pend_round(seed * 0x9e3779b97f4a7c15ull, seed % 3 == 0 ? 20000 : 1ull << 30, end);
	printf("extpend review: %u kept, %u fell back\n", kept, fell);
}

/* ---- review: readers applying pieces at once (a rescue mount serves
 * before any checkpoint) ---- */
struct rd {
	struct st *s;
	struct rangelock *rl;
	uint64_t seed;
	unsigned bad;
};

static void *reader(void *arg)
{
	struct rd *r = arg;
	uint64_t x = r->seed;

	for (unsigned i = 0; i < 4000; i++) {
		struct extent_ent a, b;
		struct rl_range g;
		uint64_t f;

		x ^= x << 13; x ^= x >> 7; x ^= x << 17;
		f = zone[x % 3] + (x >> 8) % ZONE_SPAN;
		rl_lock(r->rl, &g, f, f + 1, false);
		int r1 = extent_lookup(&r->s->l, f, &b);
		int r2 = extent_lookup(&r->s->m, f, &a);
		rl_unlock(r->rl, &g);
		if (r1 != r2 || a.phys != b.phys || a.csum != b.csum)
			r->bad++;
	}
	return NULL;
}

static void test_readers(void **state)
{
	struct rangelock rl;
	struct st s;
	uint64_t cs[600];
	pthread_t t[4];
	struct rd r[4];
	unsigned bad = 0;

	(void)state;
	rs = 77;
	setup(&s);
	rl_init(&rl);
	for (unsigned i = 0; i < 100; i++)
		op_set(&s);
	checkpoint(&s);
	extent_destroy(&s.l, NULL, NULL);
	extent_init_lazy(&s.l, s.xc, INO, &rl, extent_mapped(&s.m), false);
	extpend_set_max(s.xc, 1ull << 30);
	for (unsigned i = 0; i < 3000; i++) {
		uint64_t f = rnd_fblk();
		uint32_t n = 1 + (uint32_t)(rnd() % 16);

		if (rnd() % 4) {
			for (uint32_t k = 0; k < n; k++)
				cs[k] = rnd();
			rop_set(&s, f, n, s.nextphys, cs);
			s.nextphys += n;
		} else {
			rop_clear(&s, f, n);
		}
	}
	for (int i = 0; i < 4; i++) {
		r[i] = (struct rd){ &s, &rl, 1000 + i, 0 };
		pthread_create(&t[i], NULL, reader, &r[i]);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		bad += r[i].bad;
	}
	assert_int_equal(bad, 0);
	assert_int_equal(extpend_apply_all(s.xc), 0);
	assert_int_equal(s.dl.n, s.dm.n);
	assert_int_equal(s.dl.h, s.dm.h);
	cmp_walk(&s.m, &s.l, 0, MAXF);
	extent_destroy(&s.l, NULL, NULL);
	rl_destroy(&rl);
	extent_init(&s.l);
	teardown(&s);
}

/* ---- read-ahead: the tree leaves under pieces of many map leaves are
 * read together, not one per fault ---- */
static pthread_t main_thread;
static _Atomic unsigned reads_main, reads_pool;

static void count_hook(struct memstore *ms, const struct bptr *p)
{
	(void)ms;
	(void)p;
	if (pthread_equal(pthread_self(), main_thread))
		reads_main++;
	else
		reads_pool++;
}

static void test_ahead(void **state)
{
	struct bcache_stats cst;
	struct st s;
	uint64_t cs[256], pf0;
	const unsigned nleaf = 3000;	/* map leaves with 256 blocks, then a piece */

	(void)state;
	rs = 5;
	setup(&s);
	bcache_set_budget(s.e.cache, 64u << 20);
	for (unsigned i = 0; i < nleaf; i++) {
		for (unsigned k = 0; k < 256; k++)
			cs[k] = rnd();
		assert_int_equal(extent_set(&s.l, EXTENT_TINY_FBLK + (uint64_t)i * LEAF_BLOCKS, 256,
					    s.nextphys, cs, drop_cb, &s.dl), 0);
		s.nextphys += 256;
	}
	checkpoint(&s);
	/* cold: no map leaf in memory, no tree node cached */
	extent_destroy(&s.l, NULL, NULL);
	extent_init_lazy(&s.l, s.xc, INO, NULL, nleaf, false);
	bcache_set_budget(s.e.cache, 0);
	bcache_set_budget(s.e.cache, 64u << 20);
	extpend_set_max(s.xc, 1ull << 30);
	for (unsigned i = 0; i < nleaf; i++) {
		cs[0] = rnd();
		assert_int_equal(extpend_add(&s.l, EXTENT_TINY_FBLK + (uint64_t)i * LEAF_BLOCKS + 1, 1,
					     s.nextphys++, cs, drop_cb, &s.dl), 0);
	}
	main_thread = pthread_self();
	reads_main = reads_pool = 0;
	s.e.ms.read_hook = count_hook;
	pf0 = atomic_load(&s.e.t.prefetched);
	assert_int_equal(extpend_apply_all(s.xc), 0);
	s.e.ms.read_hook = NULL;
	bcache_stats(s.e.cache, &cst);
	pf0 = atomic_load(&s.e.t.prefetched) - pf0;
	printf("read-ahead: %u reads (%u by the applier, %u by the pool), %" PRIu64
	       " read ahead, %" PRIu64 " nodes cached\n", reads_main + reads_pool, reads_main,
	       reads_pool, pf0, cst.nodes);
	/* 3,000 items of 256 csums: hundreds of leaves, each read once, and
	 * (but for the first) read ahead, several at once, not one per fault
	 * (without the read-ahead: none) */
	assert_true(reads_main + reads_pool >= 100);
	assert_true(pf0 * 10 >= (uint64_t)(reads_main + reads_pool) * 9);
	assert_true(reads_pool > 0);
	assert_true(reads_main + reads_pool <= cst.nodes + 2);
	for (unsigned i = 0; i < nleaf; i++) {
		struct extent_ent e;
		uint64_t f = EXTENT_TINY_FBLK + (uint64_t)i * LEAF_BLOCKS;

		assert_int_equal(extent_lookup(&s.l, f, &e), 0);
		assert_int_equal(EXTENT_PHYS(e.phys), 1000 + 256 * (uint64_t)i);
		assert_int_equal(extent_lookup(&s.l, f + 1, &e), 0);
		assert_int_equal(EXTENT_PHYS(e.phys), 1000 + 256 * (uint64_t)nleaf + i);
		assert_int_equal(extent_lookup(&s.l, f + 2, &e), 0);
		assert_int_equal(EXTENT_PHYS(e.phys), 1000 + 256 * (uint64_t)i + 2);
	}
	extent_destroy(&s.l, NULL, NULL);
	extent_init(&s.l);
	teardown(&s);
}

/* ---- a checkpoint's put of one range while a reader applies pieces of
 * another (review of session 38) ---- */
int alloc_v2_ref(struct alloc_v2 *v, uint64_t blk, uint64_t n, int sign)
{
	(void)v;
	(void)blk;
	(void)n;
	(void)sign;
	return 0;	/* the put below passes no allocator */
}

static pthread_mutex_t hk_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hk_cv = PTHREAD_COND_INITIALIZER;
static int hk_state;		/* 0 armed, 1 checkpoint held in the hook, 2 go on */
static pthread_t hk_thread;

/* The checkpoint's first node allocation is its first copy-on-write,
 * inside put_range's extcache_src_changing: it waits there. */
static void hold_alloc(struct memstore *ms)
{
	(void)ms;
	if (!pthread_equal(pthread_self(), hk_thread))
		return;
	pthread_mutex_lock(&hk_mu);
	if (hk_state == 0) {
		hk_state = 1;
		pthread_cond_broadcast(&hk_cv);
		while (hk_state != 2)
			pthread_cond_wait(&hk_cv, &hk_mu);
	}
	pthread_mutex_unlock(&hk_mu);
}

struct hk_put {
	struct st *s;
	uint64_t from, to;
	int ret;
	_Atomic bool done;
};

static void *hk_ckpt(void *arg)
{
	struct hk_put *h = arg;
	int64_t d;

	h->ret = ckpt_v2_put_extents(&h->s->e.t, NULL, INO, &h->s->l, h->from, h->to, &d, NULL);
	atomic_store(&h->done, true);
	return NULL;
}

struct hk_rd {
	struct st *s;
	uint64_t f;
	int ret;
	_Atomic bool done;
};

static void *hk_reader(void *arg)
{
	struct hk_rd *r = arg;
	struct extent_ent e;

	r->ret = extent_lookup(&r->s->l, r->f, &e);
	atomic_store(&r->done, true);
	return NULL;
}

static bool wait_done(_Atomic bool *done, unsigned ms)
{
	for (unsigned i = 0; i < ms / 10 && !atomic_load(done); i++)
		usleep(10000);
	return atomic_load(done);
}

/* The reader applies pieces of leaf B (holding the pieces' lock) and its
 * fault waits for the checkpoint's change of the file's items to end; the
 * checkpoint, inside that change (put_range), walked the map with
 * extent_walk, which waited for the pieces' lock: neither went on. */
static void test_ckpt_reader(void **state)
{
	const uint64_t fa = EXTENT_TINY_FBLK + 10 * LEAF_BLOCKS, fb = fa + 4000 * LEAF_BLOCKS;
	struct hk_put c = { 0 };
	struct hk_rd r = { 0 };
	pthread_t tc, tr;
	uint64_t cs[4] = { 1, 2, 3, 4 };
	struct extent_ent e;
	struct st s;

	(void)state;
	setup(&s);
	bcache_set_budget(s.e.cache, 64u << 20);
	assert_int_equal(extent_set(&s.l, fa, 4, 5000, cs, drop_cb, &s.dl), 0);
	assert_int_equal(extent_set(&s.l, fb, 4, 6000, cs, drop_cb, &s.dl), 0);
	checkpoint(&s);
	/* the mount after a crash: nothing in memory, a piece in each leaf */
	extent_destroy(&s.l, NULL, NULL);
	extent_init_lazy(&s.l, s.xc, INO, NULL, 8, false);
	extpend_set_max(s.xc, 1ull << 30);
	assert_int_equal(extpend_add(&s.l, fa + 1, 1, 7000, cs, drop_cb, &s.dl), 0);
	assert_int_equal(extpend_add(&s.l, fb + 1, 1, 7001, cs, drop_cb, &s.dl), 0);
	/* leaf A applied first, as a checkpoint's first pass does */
	assert_int_equal(extent_lookup(&s.l, fa + 1, &e), 0);
	assert_int_equal(EXTENT_PHYS(e.phys), 7000);
	bcache_set_budget(s.e.cache, 0);	/* the reader's fault reads */
	bcache_set_budget(s.e.cache, 64u << 20);

	assert_int_equal(bt_begin(&s.e.t, s.gen++), 0);
	c = (struct hk_put){ .s = &s, .from = fa, .to = fa + LEAF_BLOCKS };
	hk_state = 0;
	s.e.ms.alloc_hook = hold_alloc;
	pthread_create(&tc, NULL, hk_ckpt, &c);
	hk_thread = tc;
	pthread_mutex_lock(&hk_mu);
	while (hk_state != 1)
		pthread_cond_wait(&hk_cv, &hk_mu);
	pthread_mutex_unlock(&hk_mu);
	/* the checkpoint is inside its change of INO's items: a reader of B */
	r = (struct hk_rd){ .s = &s, .f = fb + 1 };
	pthread_create(&tr, NULL, hk_reader, &r);
	usleep(200000);		/* it holds the pieces' lock, its fault waits */
	pthread_mutex_lock(&hk_mu);
	hk_state = 2;
	pthread_cond_broadcast(&hk_cv);
	pthread_mutex_unlock(&hk_mu);
	if (!wait_done(&c.done, 10000) || !wait_done(&r.done, 10000)) {
		fprintf(stderr, "checkpoint %s, reader %s after 10 s: deadlock\n",
			atomic_load(&c.done) ? "done" : "stuck", atomic_load(&r.done) ? "done" : "stuck");
		fail();		/* the threads stay stuck: the process ends here */
	}
	pthread_join(tc, NULL);
	pthread_join(tr, NULL);
	s.e.ms.alloc_hook = NULL;
	assert_int_equal(c.ret, 0);
	assert_int_equal(r.ret, 0);
	commit_release(&s.e.t, &s.root);
	assert_int_equal(extent_lookup(&s.l, fb + 1, &e), 0);
	assert_int_equal(EXTENT_PHYS(e.phys), 7001);
	extent_destroy(&s.l, NULL, NULL);
	extent_init(&s.l);
	teardown(&s);
}

/* ---- review of session 40: a deleted file's pending pieces are applied
 * by extent_destroy, which no caller calls under the file's range lock;
 * the evictor's guard against freeing an interior node someone is inside
 * is that range lock.  A fault of the piece's leaf (tree I/O) under a
 * level-1 node whose other leaf is clean let a trim meanwhile evict that
 * leaf and free the node: the fault then installed its leaf into freed
 * memory (ASan: heap-use-after-free) and the replaced block was put twice
 * (by the piece, then by the destroy's clear reading the tree). ---- */
static struct extent_cache *dl_xc;
static uint64_t dl_at;		/* a walk over this block trims with no budget, once */
static uint64_t dl_eio;		/* a walk over this block fails */
static int (*dl_walk)(void *, uint64_t, uint64_t, uint64_t, extent_run_fn, void *);

static int dl_hook(void *ctx, uint64_t ino, uint64_t from, uint64_t to, extent_run_fn cb,
		   void *c)
{
	if (dl_eio && from <= dl_eio && dl_eio < to)
		return -EIO;
	if (dl_at && from <= dl_at && dl_at < to) {
		dl_at = 0;
		extcache_set_budget(dl_xc, 0);	/* trims: a second chance */
		extcache_trim(dl_xc);		/* and this one evicts */
		struct extcache_stats xs;

		extcache_stats(dl_xc, &xs);
		if (xs.inner_freed)	/* the fault goes on into the freed node */
			fail_msg("an interior node was freed under the fault of a destroy");
	}
	return dl_walk(ctx, ino, from, to, cb, c);
}

static unsigned dl_drops[3];	/* the three blocks, by phys - 5000 */

static void dl_drop(void *ctx, uint64_t phys, uint64_t n)
{
	(void)ctx;
	for (uint64_t i = 0; i < n; i++)
		if (phys + i >= 5000 && phys + i < 5003)
			dl_drops[phys + i - 5000]++;
}

/* Blocks fa and fb of file INO mapped to 5000 and 5001 in two leaves
 * under one level-1 node, checkpointed; walks go through dl_hook. */
static void dl_setup(struct st *s, struct extent_src *src, struct rangelock *rl, uint64_t fa,
		     uint64_t fb)
{
	uint64_t cs = 42;

	memset(s, 0, sizeof(*s));
	s->gen = 1;
	env_open(&s->e, 8 * BNODE_SIZE);
	*src = (struct extent_src){ &s->e.t, s_walk, s_data, s_hole, NULL };
	v2ext_source(&s->e.t, src);
	dl_walk = src->walk;
	src->walk = dl_hook;
	assert_int_equal(extcache_create(src, BUDGET, &s->xc), 0);
	dl_xc = s->xc;
	extent_init(&s->m);
	rl_init(rl);
	extent_init_lazy(&s->l, s->xc, INO, rl, 0, false);
	assert_int_equal(extent_set(&s->l, fa, 1, 5000, &cs, NULL, NULL), 0);
	assert_int_equal(extent_set(&s->l, fb, 1, 5001, &cs, NULL, NULL), 0);
	checkpoint(s);
}

static void test_destroy_pending(void **state)
{
	const uint64_t fa = 600, fb = 1100;	/* map leaves 1 and 2: one level-1 node */
	struct extcache_stats xs;
	struct extent_src src;
	struct extent_ent e;
	struct rangelock rl;
	struct rl_range g;
	uint64_t cs = 42;
	struct st s;

	(void)state;
	dl_setup(&s, &src, &rl, fa, fb);
	/* cold, then the leaf of fa read in by a reader: clean, resident */
	extent_destroy(&s.l, NULL, NULL);
	extent_init_lazy(&s.l, s.xc, INO, &rl, 2, false);
	rl_lock(&rl, &g, fa, fa + 1, false);
	assert_int_equal(extent_lookup(&s.l, fa, &e), 0);
	rl_unlock(&rl, &g);
	assert_int_equal(EXTENT_PHYS(e.phys), 5000);
	/* the replay kept a record over fb pending: fb now maps 5002 */
	extpend_set_max(s.xc, 1ull << 30);
	assert_int_equal(extpend_add(&s.l, fb, 1, 5002, &cs, dl_drop, NULL), 0);
	/* the file is deleted: its pieces applied, its blocks dropped */
	dl_at = fb;
	extent_destroy(&s.l, dl_drop, NULL);
	assert_int_equal(dl_at, 0);	/* the hook ran inside the fault */
	extcache_stats(s.xc, &xs);
	assert_int_equal(xs.inner_freed, 0);	/* nothing freed under the destroy */
	for (int i = 0; i < 3; i++)
		assert_int_equal(dl_drops[i], 1);	/* each block put once */
	rl_destroy(&rl);
	extent_init(&s.l);
	teardown(&s);
}

/* The destroy cannot read the leaf a pending set is in (EIO): the set's
 * own blocks, which the replay marked used, are dropped all the same (a
 * leak until fsck before session 41); the readable leaf's block is
 * dropped by the clear; the unreadable leaf's old block cannot be known. */
static void test_destroy_unreadable(void **state)
{
	const uint64_t fa = 600, fb = 1100;
	struct extent_src src;
	struct rangelock rl;
	uint64_t cs = 42;
	struct st s;

	(void)state;
	memset(dl_drops, 0, sizeof(dl_drops));
	dl_setup(&s, &src, &rl, fa, fb);
	extent_destroy(&s.l, NULL, NULL);
	extent_init_lazy(&s.l, s.xc, INO, &rl, 2, false);
	extpend_set_max(s.xc, 1ull << 30);
	assert_int_equal(extpend_add(&s.l, fb, 1, 5002, &cs, dl_drop, NULL), 0);
	dl_eio = fb;
	extent_destroy(&s.l, dl_drop, NULL);
	dl_eio = 0;
	assert_int_equal(dl_drops[0], 1);
	assert_int_equal(dl_drops[2], 1);	/* the set's own block */
	rl_destroy(&rl);
	extent_init(&s.l);
	teardown(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pend),
		cmocka_unit_test(test_readers),
		cmocka_unit_test(test_ahead),
		cmocka_unit_test(test_ckpt_reader),
		cmocka_unit_test(test_destroy_pending),
		cmocka_unit_test(test_destroy_unreadable),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
