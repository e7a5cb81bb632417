// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: format-v2 extent items (lib/v2ext.c) on the in-memory node store: a randomized model test against extent.c (written, unwritten and in-place sets, small and huge clears, near block 0, 2^36 and 2^51; lookups, SEEK_DATA/SEEK_HOLE, walks, dropped blocks and mapped counts after every step; commits, aborts, reopen on a cold cache), item counts (sequential 4k writes, fallocate of a TiB and more), bounds. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bt_memstore.h"
#include "btree.h"
#include "extent.h"
#include "v2ext.h"
#include "v2item.h"

#define INO 7u
#define MAXF EXTENT_MAX_FBLK

static uint64_t rs = 0x2545f4914f6cdd1dull;

static uint64_t rnd(void)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return rs;
}

/* ---- dropped blocks: runs, compared as sets of blocks ---- */

struct runs {
	struct run { uint64_t a, n; } *r;
	size_t n, cap;
};

static void runs_add(struct runs *s, uint64_t a, uint64_t n)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 64;
		s->r = realloc(s->r, s->cap * sizeof(*s->r));
		assert_non_null(s->r);
	}
	s->r[s->n++] = (struct run){ a, n };
}

static void drop_cb(void *ctx, uint64_t phys, uint64_t n)
{
	assert_true(n > 0);
	runs_add(ctx, phys, n);
}

static int run_cmp(const void *x, const void *y)
{
	const struct run *a = x, *b = y;

	return a->a < b->a ? -1 : a->a > b->a;
}

/* Sort and merge touching runs; no block may be in two runs. */
static void runs_norm(struct runs *s)
{
	size_t o = 0;

	if (!s->n)
		return;		/* r may be NULL: qsort must not see it */
	qsort(s->r, s->n, sizeof(*s->r), run_cmp);
	for (size_t i = 0; i < s->n; i++) {
		if (o && s->r[o - 1].a + s->r[o - 1].n > s->r[i].a)
			fail_msg("block %llu dropped twice", (unsigned long long)s->r[i].a);
		if (o && s->r[o - 1].a + s->r[o - 1].n == s->r[i].a)
			s->r[o - 1].n += s->r[i].n;
		else
			s->r[o++] = s->r[i];
	}
	s->n = o;
}

/* The same blocks in both (then emptied); returns how many. */
static uint64_t runs_equal(struct runs *a, struct runs *b)
{
	uint64_t blocks = 0;

	runs_norm(a);
	runs_norm(b);
	assert_int_equal(a->n, b->n);
	for (size_t i = 0; i < a->n; i++) {
		assert_int_equal(a->r[i].a, b->r[i].a);
		assert_int_equal(a->r[i].n, b->r[i].n);
		blocks += a->r[i].n;
	}
	a->n = b->n = 0;
	return blocks;
}

/* ---- what a walk shows: maximal runs and a hash of (block, csum) ---- */

struct seen {
	struct runs r;			/* a = file block; phys in p[] */
	uint64_t *p;
	uint64_t h, blocks;
};

static uint64_t mix(uint64_t x)
{
	x ^= x >> 31;
	x *= 0x7fb5d329728ea185ull;
	x ^= x >> 27;
	x *= 0x81dadef4bc2dd44dull;
	return x ^ (x >> 33);
}

static int seen_run(void *ctx, uint64_t fblk, uint64_t phys, uint32_t n,
		    const struct extent_ent *ents)
{
	struct seen *s = ctx;
	struct run *last = s->r.n ? &s->r.r[s->r.n - 1] : NULL;

	for (uint32_t i = 0; i < n; i++) {
		assert_int_equal(ents[i].phys, phys + i);
		s->h += mix((fblk + i) ^ mix(ents[i].csum));
	}
	s->blocks += n;
	if (last && last->a + last->n == fblk && s->p[s->r.n - 1] + last->n == phys) {
		last->n += n;
		return 0;
	}
	runs_add(&s->r, fblk, n);
	s->p = realloc(s->p, s->r.cap * sizeof(*s->p));
	assert_non_null(s->p);
	s->p[s->r.n - 1] = phys;
	return 0;
}

static void seen_free(struct seen *s)
{
	free(s->r.r);
	free(s->p);
}

/* v2ext_walk over [from, to) shows what extent_walk shows. */
static void cmp_walk(struct btree *t, const struct extent_map *m, uint64_t from, uint64_t to)
{
	struct seen a = { 0 }, b = { 0 };
	uint64_t cnt;

	assert_int_equal(extent_walk(m, from, to, seen_run, &a), 0);
	assert_int_equal(v2ext_walk(t, INO, from, to, seen_run, &b), 0);
	assert_int_equal(a.r.n, b.r.n);
	for (size_t i = 0; i < a.r.n; i++) {
		assert_int_equal(a.r.r[i].a, b.r.r[i].a);
		assert_int_equal(a.r.r[i].n, b.r.r[i].n);
		assert_int_equal(a.p[i], b.p[i]);
	}
	assert_int_equal(a.h, b.h);
	assert_int_equal(v2ext_count(t, INO, from, to, &cnt), 0);
	assert_int_equal(cnt, a.blocks);
	seen_free(&a);
	seen_free(&b);
}

static void cmp_point(struct btree *t, const struct extent_map *m, uint64_t f)
{
	struct extent_ent a, b;
	uint64_t x;

	assert_int_equal(v2ext_lookup(t, INO, f, &b), extent_lookup(m, f, &a));
	assert_int_equal(a.phys, b.phys);
	assert_int_equal(a.csum, b.csum);
	assert_int_equal(v2ext_next_data(t, INO, f, &x), 0);
	assert_int_equal(x, extent_next_data(m, f));
	assert_int_equal(v2ext_next_hole(t, INO, f, &x), 0);
	assert_int_equal(x, extent_next_hole(m, f));
}

/* ---- the model test ---- */

/* Where the operations land: the start, the 2^36 line of extent.c's two
 * trees, the end of the file blocks. */
#define ZONE_SPAN 60000u
static const uint64_t zone[] = { 0, EXTENT_LOW_FBLK - ZONE_SPAN / 2, MAXF - ZONE_SPAN };

struct mstate {
	struct extent_map m;
	struct runs dm, dv;		/* dropped by the model, by v2ext */
	uint64_t nextphys;
	uint64_t last_end, last_phys;	/* the last set, for sequential ones */
	unsigned sets, clears, inplace, huge;
};

static uint64_t rnd_fblk(void)
{
	return zone[rnd() % 3] + rnd() % ZONE_SPAN;
}

static uint64_t rnd_len(uint64_t f)
{
	unsigned r = (unsigned)(rnd() % 100);
	uint64_t n = r < 60 ? 1 + rnd() % 16 : r < 90 ? 1 + rnd() % 300 : 1 + rnd() % 1500;

	return n < MAXF - f ? n : MAXF - f;
}

/* One set, through both; compares drops and the mapped count; returns
 * the blocks dropped. */
static uint64_t both_set(struct btree *t, struct mstate *s, uint64_t f, uint32_t n, uint64_t phys,
		     const uint64_t *cs)
{
	uint64_t before = extent_mapped(&s->m);
	int64_t d;

	assert_int_equal(extent_set(&s->m, f, n, phys, cs, drop_cb, &s->dm), 0);
	assert_int_equal(v2ext_set(t, INO, f, n, phys, cs, drop_cb, &s->dv, &d), 0);
	assert_int_equal((int64_t)(extent_mapped(&s->m) - before), d);
	s->last_end = f + n;
	s->last_phys = EXTENT_PHYS(phys) + n;
	return runs_equal(&s->dm, &s->dv);
}

static void op_set(struct btree *t, struct mstate *s)
{
	unsigned r = (unsigned)(rnd() % 100);
	bool unwritten = r < 30;
	uint64_t f = rnd_fblk(), n = rnd_len(f), phys = s->nextphys;
	uint64_t cs[1500];

	if (r >= 30 && r < 55 && s->last_end < MAXF) {	/* sequential: may merge */
		f = s->last_end;
		n = 1 + rnd() % 64;
		n = n < MAXF - f ? n : MAXF - f;
		if (s->last_phys == s->nextphys)
			phys = s->last_phys;
	}
	if (unwritten && rnd() % 10 == 0) {	/* a big fallocate (RAM of the model bounds it) */
		n = 1 + rnd() % (1u << 18);
		n = n < MAXF - f ? n : MAXF - f;
		s->huge++;
	}
	for (uint64_t i = 0; !unwritten && i < n; i++)
		cs[i] = rnd();
	s->nextphys = phys + n + (rnd() % 3 == 0);
	both_set(t, s, f, (uint32_t)n, phys | (unwritten ? EXTENT_UNWRITTEN : 0),
		 unwritten ? NULL : cs);
	s->sets++;
}

/* Write an unwritten (or written) run again at its own physical blocks:
 * nothing is dropped. */
static void op_inplace(struct btree *t, struct mstate *s)
{
	uint64_t f = extent_next_data(&s->m, rnd_fblk()), cs[300], n = 0;
	struct extent_ent e, x;

	if (f >= MAXF || extent_lookup(&s->m, f, &e))
		return;
	uint64_t want = 1 + rnd() % 300;
	while (n < want && f + n < MAXF && !extent_lookup(&s->m, f + n, &x) &&
	       EXTENT_PHYS(x.phys) == EXTENT_PHYS(e.phys) + n) {
		cs[n] = rnd();
		n++;
	}
	assert_int_equal(both_set(t, s, f, (uint32_t)n, EXTENT_PHYS(e.phys), cs), 0);
	s->inplace++;
}

static void op_clear(struct btree *t, struct mstate *s)
{
	uint64_t f = rnd_fblk(), n, before = extent_mapped(&s->m);
	unsigned r = (unsigned)(rnd() % 100);
	int64_t d;

	n = r < 94 ? rnd_len(f) : r < 97 ? 1 + rnd() % MAXF : MAXF;
	if (r >= 94)
		s->huge++;
	extent_clear(&s->m, f, n, drop_cb, &s->dm);
	assert_int_equal(v2ext_clear(t, INO, f, n, drop_cb, &s->dv, &d), 0);
	assert_int_equal((int64_t)(extent_mapped(&s->m) - before), d);
	runs_equal(&s->dm, &s->dv);
	s->clears++;
}

static void model_step(struct btree *t, struct mstate *s, unsigned step)
{
	unsigned r = (unsigned)(rnd() % 100);

	if (r < 60)
		op_set(t, s);
	else if (r < 75)
		op_inplace(t, s);
	else
		op_clear(t, s);
	for (int i = 0; i < 4; i++) {
		uint64_t f = rnd_fblk();

		cmp_point(t, &s->m, f);
		if (s->last_end < MAXF)
			cmp_point(t, &s->m, s->last_end - (i & 1));
	}
	if (step % 16 == 0) {
		uint64_t f = rnd_fblk();

		cmp_walk(t, &s->m, f, f + 1 + rnd() % 2000);
	}
}

static int copy_run(void *ctx, uint64_t fblk, uint64_t phys, uint32_t n,
		    const struct extent_ent *ents)
{
	uint64_t cs[512];

	for (uint32_t i = 0; i < n; i++)
		cs[i] = ents[i].csum;
	return extent_set(ctx, fblk, n, phys, cs, NULL, NULL);
}

static void copy_map(struct extent_map *dst, const struct extent_map *src)
{
	extent_destroy(dst, NULL, NULL);
	extent_init(dst);
	assert_int_equal(extent_walk(src, 0, MAXF, copy_run, dst), 0);
}

/* The tree on @r, read through a cold cache of 8 nodes, equals @m. */
static void check_cold(struct memstore *ms, const struct broot *r, const struct extent_map *m)
{
	struct bcache *c;
	struct btree t;

	assert_int_equal(bcache_create(8 * BNODE_SIZE, &c), 0);
	assert_int_equal(bt_open(&t, &ms->store, c, 5, bt_uuid, r), 0);
	cmp_walk(&t, m, 0, MAXF);
	for (int i = 0; i < 20; i++)
		cmp_point(&t, m, rnd_fblk());
	assert_int_equal(bt_verify(&t, NULL, NULL), 0);
	bt_close(&t);
	bcache_destroy(c);
}

/* Items of the files before and after INO, which nothing may touch. */
static void put_fences(struct btree *t)
{
	uint64_t cs[4] = { 1, 2, 3, 4 };

	for (uint64_t ino = INO - 1; ino <= INO + 1; ino += 2) {
		assert_int_equal(v2ext_set(t, ino, 0, 4, 900, cs, NULL, NULL, NULL), 0);
		assert_int_equal(v2ext_set(t, ino, MAXF - 1, 1, 910 | EXTENT_UNWRITTEN, NULL, NULL,
					   NULL, NULL), 0);
	}
}

static void check_fences(struct btree *t)
{
	for (uint64_t ino = INO - 1; ino <= INO + 1; ino += 2) {
		uint64_t n;

		assert_int_equal(v2ext_count(t, ino, 0, MAXF, &n), 0);
		assert_int_equal(n, 5);
	}
}

static void test_model(void **state)
{
	struct mstate s = { .nextphys = 1000 };
	struct extent_map committed;
	struct broot root = { 0 };
	struct env e;
	uint64_t gen = 1, nitems, maxitems = 0;
	unsigned aborts = 0, step = 0, maxlevel = 0;
	const unsigned BATCHES = 80, BATCH = 200;

	(void)state;
	extent_init(&s.m);
	extent_init(&committed);
	env_open(&e, 16 * BNODE_SIZE);	/* small: nodes are evicted and read again */
	assert_int_equal(bt_begin(&e.t, gen++), 0);
	put_fences(&e.t);
	commit_release(&e.t, &root);
	for (unsigned b = 0; b < BATCHES; b++) {
		assert_int_equal(bt_begin(&e.t, gen++), 0);
		for (unsigned i = 0; i < BATCH; i++)
			model_step(&e.t, &s, step++);
		assert_int_equal(bt_verify(&e.t, &nitems, NULL), 0);
		maxitems = nitems > maxitems ? nitems : maxitems;
		maxlevel = e.t.root.level > maxlevel ? e.t.root.level : maxlevel;
		cmp_walk(&e.t, &s.m, 0, MAXF);
		check_fences(&e.t);
		if (b % 6 == 5) {
			bt_abort(&e.t);
			copy_map(&s.m, &committed);
			cmp_walk(&e.t, &s.m, 0, MAXF);
			aborts++;
			continue;
		}
		commit_release(&e.t, &root);
		copy_map(&committed, &s.m);
		check_cold(&e.ms, &root, &s.m);
		if (b % 4 == 0) {	/* reopen the committed root on a cold cache */
			bt_close(&e.t);
			bcache_destroy(e.cache);
			assert_int_equal(bcache_create(16 * BNODE_SIZE, &e.cache), 0);
			assert_int_equal(bt_open(&e.t, &e.ms.store, e.cache, 5, bt_uuid, &root), 0);
		}
	}
	/* Truncate to 0 empties the file and leaves its neighbours. */
	assert_int_equal(bt_begin(&e.t, gen++), 0);
	extent_clear(&s.m, 0, MAXF, drop_cb, &s.dm);
	assert_int_equal(v2ext_clear(&e.t, INO, 0, MAXF, drop_cb, &s.dv, NULL), 0);
	runs_equal(&s.dm, &s.dv);
	assert_int_equal(bt_verify(&e.t, &nitems, NULL), 0);
	assert_int_equal(nitems, 4);
	check_fences(&e.t);
	commit_release(&e.t, &root);
	printf("v2ext model: %u steps (%u sets, %u in place, %u clears, %u huge), %u aborts, "
	       "%llu items at most, root level %u at most\n", step, s.sets, s.inplace, s.clears,
	       s.huge, aborts, (unsigned long long)maxitems, maxlevel);
	assert_true(s.inplace > 100 && s.huge > 100 && maxlevel >= 1);
	extent_destroy(&s.m, NULL, NULL);
	extent_destroy(&committed, NULL, NULL);
	free(s.dm.r);
	free(s.dv.r);
	env_close(&e);
}

/* ---- item counts ---- */

static uint64_t items(struct btree *t)
{
	uint64_t n;

	assert_int_equal(bt_verify(t, &n, NULL), 0);
	return n;
}

static uint64_t dropped_sum(const struct runs *r)
{
	uint64_t s = 0;

	for (size_t i = 0; i < r->n; i++)
		s += r->r[i].n;
	return s;
}

/* A 1 MiB sequential write in 4 KiB pieces is one item; the next MiB a
 * second; an overwrite inside cuts one into three. */
static void test_sequential(void **state)
{
	struct env e;
	struct extent_ent x;
	struct runs d = { 0 };
	uint64_t cs;
	int64_t dm;

	(void)state;
	env_open(&e, 64 * BNODE_SIZE);
	assert_int_equal(bt_begin(&e.t, 1), 0);
	for (uint64_t i = 0; i < 256; i++) {
		cs = i * 3 + 1;
		assert_int_equal(v2ext_set(&e.t, INO, i, 1, 5000 + i, &cs, NULL, NULL, &dm), 0);
		assert_int_equal(dm, 1);
	}
	assert_int_equal(items(&e.t), 1);
	for (uint64_t i = 256; i < 512; i++) {
		cs = i * 3 + 1;
		assert_int_equal(v2ext_set(&e.t, INO, i, 1, 5000 + i, &cs, NULL, NULL, NULL), 0);
	}
	assert_int_equal(items(&e.t), 2);
	for (uint64_t i = 0; i < 512; i++) {
		assert_int_equal(v2ext_lookup(&e.t, INO, i, &x), 0);
		assert_int_equal(x.phys, 5000 + i);
		assert_int_equal(x.csum, i * 3 + 1);
	}
	cs = 77;
	assert_int_equal(v2ext_set(&e.t, INO, 100, 1, 90000, &cs, drop_cb, &d, &dm), 0);
	assert_int_equal(dm, 0);
	assert_int_equal(d.n, 1);
	assert_int_equal(d.r[0].a, 5100);
	assert_int_equal(items(&e.t), 4);
	/* Written back at its old block it joins both sides again. */
	cs = 301;
	assert_int_equal(v2ext_set(&e.t, INO, 100, 1, 5100, &cs, drop_cb, &d, NULL), 0);
	assert_int_equal(items(&e.t), 2);
	/* Written backwards, block by block: every piece joins its right
	 * neighbour whole while the item has room. */
	for (uint64_t i = 256; i-- > 0;) {
		cs = i;
		assert_int_equal(v2ext_set(&e.t, INO, 1000 + i, 1, 20000 + i, &cs, NULL, NULL,
					   NULL), 0);
	}
	assert_int_equal(items(&e.t), 3);
	/* One call of 600 blocks: items of 256, 256, 88. */
	assert_int_equal(v2ext_set(&e.t, INO, 4000, 600, 30000, NULL, NULL, NULL, NULL), 0);
	assert_int_equal(items(&e.t), 6);
	commit_release(&e.t, &(struct broot){ 0 });
	free(d.r);
	env_close(&e);
}

/* A fallocated TiB is one item however it is set, written blocks inside
 * it cut it, and 2^34 blocks take five items. */
static void test_fallocate(void **state)
{
	const uint64_t TIB = 1ull << 28, P = 1ull << 30;
	struct env e;
	struct runs d = { 0 };
	struct extent_ent x;
	uint64_t cs = 5, at, n;
	int64_t dm;

	(void)state;
	env_open(&e, 64 * BNODE_SIZE);
	assert_int_equal(bt_begin(&e.t, 1), 0);
	assert_int_equal(v2ext_set(&e.t, INO, 0, (uint32_t)TIB, P | EXTENT_UNWRITTEN, NULL, NULL,
				   NULL, &dm), 0);
	assert_int_equal(dm, (int64_t)TIB);
	assert_int_equal(items(&e.t), 1);
	/* One block written in place: no drop, three items. */
	assert_int_equal(v2ext_set(&e.t, INO, TIB / 2, 1, P + TIB / 2, &cs, drop_cb, &d, &dm), 0);
	assert_int_equal(d.n, 0);
	assert_int_equal(dm, 0);
	assert_int_equal(items(&e.t), 3);
	assert_int_equal(v2ext_lookup(&e.t, INO, TIB / 2, &x), 0);
	assert_int_equal(x.phys, P + TIB / 2);
	assert_int_equal(x.csum, 5);
	assert_int_equal(v2ext_lookup(&e.t, INO, TIB / 2 + 1, &x), 0);
	assert_int_equal(x.phys, (P + TIB / 2 + 1) | EXTENT_UNWRITTEN);
	assert_int_equal(v2ext_next_hole(&e.t, INO, 0, &at), 0);
	assert_int_equal(at, TIB);
	assert_int_equal(v2ext_next_data(&e.t, INO, TIB, &at), 0);
	assert_int_equal(at, MAXF);
	assert_int_equal(v2ext_count(&e.t, INO, 0, MAXF, &n), 0);
	assert_int_equal(n, TIB);
	/* Truncate to half: the tail goes, dropped whole. */
	assert_int_equal(v2ext_clear(&e.t, INO, TIB / 4, MAXF, drop_cb, &d, &dm), 0);
	assert_int_equal(dm, -(int64_t)(TIB - TIB / 4));
	assert_int_equal(dropped_sum(&d), TIB - TIB / 4);
	assert_int_equal(items(&e.t), 1);
	assert_int_equal(v2ext_clear(&e.t, INO, 0, MAXF, NULL, NULL, NULL), 0);
	assert_int_equal(items(&e.t), 0);

	/* In 16 calls of contiguous blocks: still one item. */
	for (uint64_t i = 0; i < 16; i++)
		assert_int_equal(v2ext_set(&e.t, INO, i * (TIB / 16), (uint32_t)(TIB / 16),
					   (P + i * (TIB / 16)) | EXTENT_UNWRITTEN, NULL, NULL, NULL,
					   NULL), 0);
	assert_int_equal(items(&e.t), 1);
	assert_int_equal(v2ext_clear(&e.t, INO, 0, MAXF, NULL, NULL, NULL), 0);
	/* 2^34 blocks (64 TiB) in calls of 2^30: items of 2^32 - 1 at most. */
	for (uint64_t i = 0; i < 16; i++)
		assert_int_equal(v2ext_set(&e.t, INO, MAXF - (16 - i) * (1ull << 30), 1u << 30,
					   (P + (i << 30)) | EXTENT_UNWRITTEN, NULL, NULL, NULL,
					   NULL), 0);
	assert_int_equal(items(&e.t), 5);
	assert_int_equal(v2ext_count(&e.t, INO, 0, MAXF, &n), 0);
	assert_int_equal(n, 1ull << 34);
	assert_int_equal(v2ext_next_hole(&e.t, INO, MAXF - (1ull << 34), &at), 0);
	assert_int_equal(at, MAXF);
	commit_release(&e.t, &(struct broot){ 0 });
	free(d.r);
	env_close(&e);
}

/* Bounds: past the last file block, ino 0, phys 0 or past 2^48; nothing changes. */
static void test_bounds(void **state)
{
	struct env e;
	struct extent_ent x;
	uint64_t cs = 1, at;

	(void)state;
	env_open(&e, 16 * BNODE_SIZE);
	assert_int_equal(bt_begin(&e.t, 1), 0);
	assert_int_equal(v2ext_set(&e.t, INO, MAXF - 1, 1, 10, &cs, NULL, NULL, NULL), 0);
	assert_int_equal(v2ext_set(&e.t, INO, MAXF - 1, 2, 10, &cs, NULL, NULL, NULL), -EFBIG);
	assert_int_equal(v2ext_set(&e.t, INO, MAXF, 1, 10, &cs, NULL, NULL, NULL), -EFBIG);
	assert_int_equal(v2ext_set(&e.t, INO, 5, 1, 0, &cs, NULL, NULL, NULL), -EINVAL);
	assert_int_equal(v2ext_set(&e.t, 0, 5, 1, 10, &cs, NULL, NULL, NULL), -EINVAL);
	assert_int_equal(v2ext_set(&e.t, INO, 5, 1, EXTENT_UNWRITTEN, NULL, NULL, NULL, NULL),
			 -EINVAL);
	assert_int_equal(v2ext_set(&e.t, INO, 5, 2, V2_PHYS_LIMIT - 1, &cs, NULL, NULL, NULL),
			 -EINVAL);
	assert_int_equal(items(&e.t), 1);
	assert_int_equal(v2ext_lookup(&e.t, INO, MAXF - 1, &x), 0);
	assert_int_equal(v2ext_lookup(&e.t, INO, MAXF, &x), -ENOENT);
	assert_int_equal(v2ext_next_data(&e.t, INO, 0, &at), 0);
	assert_int_equal(at, MAXF - 1);
	assert_int_equal(v2ext_next_hole(&e.t, INO, MAXF - 1, &at), 0);
	assert_int_equal(at, MAXF);
	assert_int_equal(v2ext_next_data(&e.t, INO, MAXF, &at), 0);
	assert_int_equal(at, MAXF);
	assert_int_equal(v2ext_lookup(&e.t, INO + 1, MAXF - 1, &x), -ENOENT);
	commit_release(&e.t, &(struct broot){ 0 });
	env_close(&e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sequential),
		cmocka_unit_test(test_fallocate),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_model),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
