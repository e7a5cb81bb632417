// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: a format-v2 file map as a cache of its EXTENT items (lib/extent_lazy.c, lib/extcache.c) on the in-memory node store: a randomized model test against an all-in-memory map (sets, clears small and huge near block 0, 2^36 and 2^51; lookups, walks, SEEK_DATA/SEEK_HOLE, dropped blocks and mapped counts), leaves read in on use and evicted under a tiny budget, changed leaves kept until a checkpoint wrote them, then evicted; a checkpoint that cuts and joins an item around one leaf while two threads read the leaves around it in (every block still right, reads redone, and the level-1 interior node of the second GiB freed and made again under them); interior nodes freed with their last leaf (one block a GiB over 250 GiB), but not while a clear they hold is not checkpointed; a trim while every leaf is changed looks at a bounded few, not all of them each time, and leaves read in under a whole-file lock (a checkpoint's) cost a few looks each, not 64, while clean leaves behind a run of changed ones kept whole still go at once; a node that cannot be read fails a lookup with -EIO and installs nothing. */
#include <errno.h>
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

#define INO 9u
#define MAXF EXTENT_MAX_FBLK
#define BUDGET 40000u		/* about 4 leaves */

#include "extmodel.h"

/* Changed leaves kept compact past the budget (the default) or full. */
static void model(bool compact)
{
	struct extcache_stats st;
	struct st s;

	setup(&s);
	extcache_set_compact(s.xc, compact);
	for (unsigned b = 0; b < 40; b++) {
		for (unsigned i = 0; i < 150; i++) {
			if (rnd() % 4)
				op_set(&s);
			else
				op_clear(&s);
			assert_int_equal(extent_mapped(&s.l), extent_mapped(&s.m));
			if (i % 8 == 0)
				cmp_point(&s.m, &s.l, rnd_fblk());
		}
		assert_int_equal(s.dl.n, s.dm.n);
		assert_int_equal(s.dl.h, s.dm.h);
		cmp_walk(&s.m, &s.l, 0, MAXF);
		checkpoint(&s);
		/* Read back through the cache, leaves coming and going. */
		for (unsigned i = 0; i < 60; i++)
			cmp_point(&s.m, &s.l, rnd_fblk());
		uint64_t f = rnd_fblk();

		cmp_walk(&s.m, &s.l, f, f + rnd() % 5000);
		if (b % 10 == 9) {	/* a remount: the map read from the tree alone */
			uint64_t mapped = extent_mapped(&s.l);

			extent_destroy(&s.l, NULL, NULL);
			extent_init_lazy(&s.l, s.xc, INO, NULL, mapped, false);
			cmp_walk(&s.m, &s.l, 0, MAXF);
		}
	}
	/* Truncate to 0 drops every block, resident or not. */
	assert_int_equal(extent_clear(&s.l, 0, MAXF, drop_cb, &s.dl), 0);
	extent_clear(&s.m, 0, MAXF, drop_cb, &s.dm);
	assert_int_equal(s.dl.n, s.dm.n);
	assert_int_equal(s.dl.h, s.dm.h);
	assert_int_equal(extent_mapped(&s.l), 0);
	extcache_stats(s.xc, &st);
	printf("extcache model%s: %llu faults (%llu empty), %llu evictions, %llu leaves left, "
	       "dirty leaves over the budget at %llu checkpoints, %llu compactions, "
	       "%llu expansions, %llu compact drops\n", compact ? " (compact)" : "",
	       (unsigned long long)st.faults, (unsigned long long)st.empty_faults,
	       (unsigned long long)st.evictions, (unsigned long long)st.leaves,
	       (unsigned long long)s.over, (unsigned long long)st.compactions,
	       (unsigned long long)st.expansions, (unsigned long long)st.compact_drops);
	assert_true(st.faults > 100 && st.evictions > 100 && s.over > 0);
	if (compact)
		assert_true(st.compactions > 100 && st.expansions > 10 && st.compact_drops > 10);
	else
		assert_int_equal(st.compactions, 0);
	teardown(&s);
}

/* Every node unreadable: a lookup that must read fails with -EIO, installs
 * nothing, and works once the nodes read again; resident leaves still
 * answer meanwhile. */
static void test_eio(void **state)
{
	struct extent_ent e;
	struct extcache_stats st;
	uint64_t cs[64] = { 0 };
	struct st s;

	(void)state;
	setup(&s);
	for (uint64_t f = 0; f < 200000; f += 1000)
		assert_int_equal(extent_set(&s.l, f, 64, s.nextphys += 64, cs, NULL, NULL), 0);
	checkpoint(&s);
	extcache_set_budget(s.xc, 0);
	extcache_stats(s.xc, &st);
	assert_int_equal(st.leaves, 0);
	/* A cold cache, then every node's bytes flipped. */
	bt_close(&s.e.t);
	bcache_destroy(s.e.cache);
	assert_int_equal(bcache_create(8 * BNODE_SIZE, &s.e.cache), 0);
	assert_int_equal(bt_open(&s.e.t, &s.e.ms.store, s.e.cache, 5, bt_uuid, &s.root), 0);
	for (size_t i = 0; i < s.e.ms.cap; i++)
		if (s.e.ms.node[i])
			((uint8_t *)s.e.ms.node[i])[100] ^= 0xff;
	assert_int_equal(extent_lookup(&s.l, 5000, &e), -EIO);
	assert_int_equal(e.phys, 0);
	assert_int_equal(extent_set(&s.l, 7000, 1, 99, NULL, NULL, NULL), -EIO);
	assert_int_equal(extent_walk(&s.l, 0, MAXF, seen_run, &(struct seen){ 0 }), -EIO);
	extcache_stats(s.xc, &st);
	assert_int_equal(st.leaves, 0);
	assert_true(st.fault_errors >= 2);
	for (size_t i = 0; i < s.e.ms.cap; i++)
		if (s.e.ms.node[i])
			((uint8_t *)s.e.ms.node[i])[100] ^= 0xff;
	assert_int_equal(extent_lookup(&s.l, 5000, &e), 0);
	assert_int_equal(extent_lookup(&s.l, 5064, &e), -ENOENT);
	teardown(&s);
}

/* fallocate's pattern: changed leaves far past the budget and a trim after
 * every piece.  Until a checkpoint commits none of them is clean, so a trim
 * looks at a bounded number of the oldest leaves (SCAN_MAX, 64, in
 * lib/extcache.c), not at every leaf each time: that scan was 79% of the
 * daemon's CPU while fallocating 3.5 TiB.  The trim after the commit still
 * evicts down to the budget (checkpoint() asserts it). */
static void test_model(void **state)
{
	(void)state;
	model(true);
}

static void test_model_full(void **state)
{
	(void)state;
	model(false);
}

/*
 * The pattern compaction is for: a fallocated span (200 leaves, one item
 * in the tree), then one written block in each leaf.  The changed leaves
 * past the budget are kept compact (a few hundred bytes, not 8 KiB), a
 * walk reads them without expanding them, a set or an edge clear expands
 * one, a whole clear drops its runs; the checkpoint writes them from their
 * compact form and, once committed, they go.  Every block, every dropped
 * block and the mapped counts against the in-memory model, before and
 * after, and after a remount.
 */
#define CY_LEAVES 200u

static void test_compact_cycle(void **state)
{
	uint64_t ph = 1u << 20, cs[2] = { 0x1234, 0x5678 };
	struct extcache_stats a, b;
	struct st s;

	(void)state;
	setup(&s);
	assert_int_equal(extent_set(&s.l, 512, CY_LEAVES * 512, ph | EXTENT_UNWRITTEN, NULL,
				    drop_cb, &s.dl), 0);
	extent_set(&s.m, 512, CY_LEAVES * 512, ph | EXTENT_UNWRITTEN, NULL, drop_cb, &s.dm);
	checkpoint(&s);
	for (uint64_t k = 1; k <= CY_LEAVES; k++) {
		uint64_t f = k * 512 + rnd() % 511;

		cs[0] = rnd() | 1;
		assert_int_equal(extent_set(&s.l, f, 2, s.nextphys, cs, drop_cb, &s.dl), 0);
		extent_set(&s.m, f, 2, s.nextphys, cs, drop_cb, &s.dm);
		s.nextphys += 2;
	}
	extcache_stats(s.xc, &a);
	printf("extcache compact: %llu changed leaves, %llu compact in %llu bytes, %llu full\n",
	       (unsigned long long)CY_LEAVES, (unsigned long long)a.compact,
	       (unsigned long long)a.compact_bytes, (unsigned long long)a.leaves);
	assert_true(a.compact >= CY_LEAVES - 10);
	assert_true(a.compact_bytes <= a.compact * 256);
	assert_true(a.leaves * 8192 <= 2 * BUDGET);
	/* A walk (the checkpoint's too) reads them as they are. */
	cmp_walk(&s.m, &s.l, 0, MAXF);
	for (uint64_t k = 1; k <= CY_LEAVES; k += 7)
		cmp_walk(&s.m, &s.l, k * 512 + 100, k * 512 + 900);
	extcache_stats(s.xc, &b);
	assert_int_equal(b.expansions, a.expansions);
	assert_int_equal(b.compact, a.compact);
	/* A lookup, a set, an edge clear expand; a whole clear drops. */
	cmp_point(&s.m, &s.l, 3 * 512 + 17);
	cs[0] = 77;
	assert_int_equal(extent_set(&s.l, 5 * 512 + 9, 1, s.nextphys, cs, drop_cb, &s.dl), 0);
	extent_set(&s.m, 5 * 512 + 9, 1, s.nextphys++, cs, drop_cb, &s.dm);
	assert_int_equal(extent_clear(&s.l, 7 * 512 + 300, 400, drop_cb, &s.dl), 0);
	extent_clear(&s.m, 7 * 512 + 300, 400, drop_cb, &s.dm);
	assert_int_equal(extent_clear(&s.l, 11 * 512, 512, drop_cb, &s.dl), 0);
	extent_clear(&s.m, 11 * 512, 512, drop_cb, &s.dm);
	extcache_stats(s.xc, &b);
	assert_true(b.expansions >= a.expansions + 3);
	assert_int_equal(s.dl.n, s.dm.n);
	assert_int_equal(s.dl.h, s.dm.h);
	assert_int_equal(extent_mapped(&s.l), extent_mapped(&s.m));
	cmp_walk(&s.m, &s.l, 0, MAXF);
	checkpoint(&s);
	extcache_set_budget(s.xc, 0);
	extcache_stats(s.xc, &b);
	assert_int_equal(b.compact, 0);
	assert_int_equal(b.compact_bytes, 0);
	assert_true(b.compact_drops >= CY_LEAVES - 20);
	cmp_walk(&s.m, &s.l, 0, MAXF);
	for (uint64_t k = 1; k <= CY_LEAVES; k += 3)
		cmp_point(&s.m, &s.l, k * 512 + rnd() % 512);
	extcache_set_budget(s.xc, BUDGET);
	uint64_t mapped = extent_mapped(&s.l);

	extent_destroy(&s.l, NULL, NULL);
	extent_init_lazy(&s.l, s.xc, INO, NULL, mapped, false);
	cmp_walk(&s.m, &s.l, 0, MAXF);
	teardown(&s);
}

static void test_trim_bounded(void **state)
{
	struct extcache_stats a, b;
	uint64_t cs[8] = { 0 };
	struct st s;

	(void)state;
	setup(&s);
	extcache_set_compact(s.xc, false);	/* the full leaves' scan */
	for (uint64_t i = 0; i < 400; i++)
		assert_int_equal(extent_set(&s.l, i * 512, 8, s.nextphys += 8, cs, NULL, NULL), 0);
	extcache_stats(s.xc, &a);
	assert_true(a.bytes > 10 * BUDGET);
	for (int i = 0; i < 100; i++)
		extcache_trim(s.xc);
	extcache_stats(s.xc, &b);
	assert_int_equal(b.leaves, a.leaves);	/* all changed: none may go */
	printf("extcache trims of %llu changed leaves: %llu looked at in 100 trims\n",
	       (unsigned long long)a.leaves, (unsigned long long)(b.scanned - a.scanned));
	/* the first trim sweeps them all once (nothing swept yet) */
	assert_true(b.scanned - a.scanned <= 99 * 64 + 2 * a.leaves + 1);
	checkpoint(&s);
	extcache_stats(s.xc, &a);
	assert_true(a.evictions > 300);
	/* Nothing committed since that sweep: a trim looks at few again. */
	extcache_trim(s.xc);
	extcache_stats(s.xc, &b);
	assert_true(b.scanned - a.scanned <= 64);
	teardown(&s);
}

/*
 * A checkpoint holds its file's whole range lock (shared) while it reads
 * the file's leaves in: none of them may go meanwhile, and each fault's
 * bounded trim looked at 64 of them for nothing.  A trim that moved nothing
 * now puts the next ones off: about one look per fault, not 64.  Once the
 * lock is gone they go again.
 */
static void test_trim_busy(void **state)
{
	struct extcache_stats a, b;
	uint64_t cs[8] = { 0 }, faults, scanned;
	struct extent_ent e;
	struct rangelock rl;
	struct rl_range r;
	struct st s;

	(void)state;
	setup(&s);
	rl_init(&rl);
	extent_destroy(&s.l, NULL, NULL);
	extent_init_lazy(&s.l, s.xc, INO, &rl, 0, false);
	for (uint64_t i = 0; i < 600; i++)
		assert_int_equal(extent_set(&s.l, i * 512, 8, s.nextphys += 8, cs, NULL, NULL), 0);
	checkpoint(&s);		/* clean, and trimmed to the budget */
	extcache_stats(s.xc, &a);
	rl_lock(&rl, &r, 0, RL_EOF, false);
	for (uint64_t i = 0; i < 400; i++)
		assert_int_equal(extent_lookup(&s.l, i * 512 + 3, &e), 0);
	extcache_stats(s.xc, &b);
	faults = b.faults - a.faults;
	scanned = b.scanned - a.scanned;
	printf("extcache: %llu leaves read in under a whole-file lock: %llu looked at, "
	       "%llu evicted, %llu resident\n", (unsigned long long)faults,
	       (unsigned long long)scanned, (unsigned long long)(b.evictions - a.evictions),
	       (unsigned long long)b.leaves);
	assert_true(faults >= 390);
	assert_int_equal(b.evictions, a.evictions);	/* none could go */
	assert_true(scanned <= 6 * faults);		/* 64 each: 25,000 */
	rl_unlock(&rl, &r);
	/* Unlocked: the next faults' trims bring the cache back down. */
	for (uint64_t i = 400; i < 600; i++)
		assert_int_equal(extent_lookup(&s.l, i * 512 + 3, &e), 0);
	extcache_stats(s.xc, &b);
	printf("extcache: after 200 more faults unlocked, %llu resident (%llu bytes)\n",
	       (unsigned long long)b.leaves, (unsigned long long)b.bytes);
	assert_true(b.bytes <= 2 * BUDGET);
	extent_destroy(&s.l, NULL, NULL);
	extent_init_lazy(&s.l, s.xc, INO, NULL, 0, false);
	teardown(&s);
	rl_destroy(&rl);
}

/*
 * Changed leaves that cannot be made compact (every block with its own
 * checksum) stay until their checkpoint; clean leaves read in behind a
 * long run of them must still go at once, not pile up while the trims
 * wait: putting the trims off is only for when nothing in the whole list
 * can go.
 */
static void test_trim_stuck_run(void **state)
{
	static uint64_t cs[512];
	struct extcache_stats a, b;
	struct extent_ent e;
	struct st s;

	(void)state;
	setup(&s);
	for (unsigned i = 0; i < 512; i++)
		cs[i] = 0x9e3779b97f4a7c15ull * (i + 1);
	for (uint64_t i = 0; i < 300; i++)	/* clean, in the tree */
		assert_int_equal(extent_set(&s.l, (1000 + i) * 512, 8, s.nextphys += 8, cs, NULL,
					    NULL), 0);
	checkpoint(&s);
	for (uint64_t i = 0; i < 300; i++)	/* changed, kept whole */
		assert_int_equal(extent_set(&s.l, i * 512, 512, s.nextphys += 512, cs, NULL, NULL), 0);
	extcache_stats(s.xc, &a);
	for (uint64_t i = 0; i < 300; i++)
		assert_int_equal(extent_lookup(&s.l, (1000 + i) * 512 + 1, &e), 0);
	extcache_stats(s.xc, &b);
	printf("extcache: %llu changed leaves kept whole, then %llu clean ones read in: "
	       "%llu resident, %llu looked at\n", (unsigned long long)a.leaves,
	       (unsigned long long)(b.faults - a.faults), (unsigned long long)b.leaves,
	       (unsigned long long)(b.scanned - a.scanned));
	assert_true(a.leaves >= 295 && b.faults - a.faults >= 295);
	assert_true(b.leaves <= a.leaves + 70);
	checkpoint(&s);
	teardown(&s);
}

/*
 * The checkpoint rewrites a changed leaf's items while readers (a shared
 * range lock each, as the checkpoint's own) read the leaves around it in
 * from the tree.  One fallocated run of 300,000 blocks is one item; the
 * writer changes blocks of one leaf in its middle and checkpoints them,
 * which cuts that item in three and joins it again, over and over.  Every
 * block the readers look up, walk or seek outside that leaf must still be
 * the run's.  Without the change rule (EXTCACHE_NO_CHANGE_RULE=1) a reader
 * met an item starting before the leaf it read in (a daemon crashed in
 * fill_run), or a gap where the cut item was between delete and insert.
 */
#define RLO 1000u
#define RHI (RLO + 300000u)
#define PLO (512u * 293u)		/* the written leaf */
#define PHI (PLO + 512u)
#define P0 5000000u			/* RLO's physical block */

struct race {
	struct st *s;
	struct rangelock rl;
	atomic_bool stop;
	atomic_uint_fast64_t reads, bad;
};

static uint64_t race_rnd(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static uint64_t want(uint64_t f)
{
	return (P0 + f - RLO) | EXTENT_UNWRITTEN;
}

static int race_run(void *ctx, uint64_t fblk, uint64_t phys, uint32_t n,
		    const struct extent_ent *ents)
{
	struct race *r = ctx;

	for (uint32_t i = 0; i < n; i++)
		if ((fblk + i < PLO || fblk + i >= PHI) &&
		    (ents[i].phys != want(fblk + i) || phys + i != want(fblk + i)))
			atomic_fetch_add(&r->bad, 1);
	return 0;
}

static void *race_reader(void *arg)
{
	struct race *r = arg;
	uint64_t x = 0x1234567 + (uint64_t)pthread_self();

	while (!atomic_load(&r->stop)) {
		uint64_t f = RLO + race_rnd(&x) % (RHI - RLO);
		struct extent_ent e;
		struct rl_range lr;

		unsigned op = (unsigned)(race_rnd(&x) % 4);

		if (f >= PLO && f < PHI)
			continue;
		/* A search holds its range to the end, as lseek does: the
		 * leaves it passes must not be evicted under it. */
		rl_lock(&r->rl, &lr, f, op == 1 ? RL_EOF : f + 2048, false);
		switch (op) {
		case 0:
			extent_walk(&r->s->l, f, f + 2048, race_run, r);
			break;
		case 1:
			if (f >= PHI && extent_next_hole(&r->s->l, f) != RHI)
				atomic_fetch_add(&r->bad, 1);
			break;
		default:
			if (extent_lookup(&r->s->l, f, &e) || e.phys != want(f))
				atomic_fetch_add(&r->bad, 1);
		}
		rl_unlock(&r->rl, &lr);
		atomic_fetch_add(&r->reads, 1);
	}
	return NULL;
}

static void test_race(void **state)
{
	struct extcache_stats st;
	struct race r = { 0 };
	pthread_t th[2];
	uint64_t cs[1] = { 77 };
	struct st s;

	(void)state;
	setup(&s);
	r.s = &s;
	rl_init(&r.rl);
	extent_destroy(&s.l, NULL, NULL);
	extent_init_lazy(&s.l, s.xc, INO, &r.rl, 0, false);
	assert_int_equal(extent_set(&s.l, RLO, RHI - RLO, want(RLO), NULL, NULL, NULL), 0);
	checkpoint(&s);
	extcache_set_budget(s.xc, 4 * 8300);	/* a few leaves */
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&th[i], NULL, race_reader, &r), 0);
	/* 3000 rounds, more while the readers made fewer than 3000 reads. */
	for (unsigned round = 0; round < 3000 || (atomic_load(&r.reads) < 3000 && round < 300000);
	     round++) {
		struct piece_ctx p = { &s, 0 };
		uint64_t epoch, reads = atomic_load(&r.reads);
		struct rl_range lr;

		/* A checkpoint is not back to back with the next one: let a
		 * read finish between rounds (at most 10 ms), or a slow reader
		 * (TSan) is redone for ever and the readers starve. */
		for (int k = 0; k < 500 && atomic_load(&r.reads) == reads; k++)
			usleep(20);
		rl_lock(&r.rl, &lr, PLO, PHI, true);
		if (round % 3 == 2)	/* back to the run: the items join again */
			assert_int_equal(extent_set(&s.l, PLO, 512, want(PLO), NULL, NULL, NULL), 0);
		else
			assert_int_equal(extent_set(&s.l, PLO + round % 512, 1, 9000000 + round,
						    cs, NULL, NULL), 0);
		rl_unlock(&r.rl, &lr);
		epoch = extcache_epoch_begin(s.xc);
		rl_lock(&r.rl, &lr, 0, RL_EOF, false);
		assert_int_equal(bt_begin(&s.e.t, s.gen++), 0);
		assert_int_equal(extent_resident(&s.l, PLO, PHI, put_piece, &p), 0);
		commit_release(&s.e.t, &s.root);
		rl_unlock(&r.rl, &lr);
		extcache_committed(s.xc, epoch);
	}
	atomic_store(&r.stop, true);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	extcache_stats(s.xc, &st);
	printf("extcache race: %llu reads, %llu faults, %llu reads redone, %llu wrong, "
	       "%llu interior nodes freed under them\n",
	       (unsigned long long)r.reads, (unsigned long long)st.faults,
	       (unsigned long long)st.src_redone, (unsigned long long)r.bad,
	       (unsigned long long)st.inner_freed);
	assert_int_equal(r.bad, 0);
	assert_true(r.reads >= 3000 && st.faults > 1000);
	assert_true(st.inner_freed > 0);	/* the second GiB's node, under the readers */
	extent_destroy(&s.l, NULL, NULL);
	extent_init_lazy(&s.l, s.xc, INO, NULL, 0, false);
	teardown(&s);
	rl_destroy(&r.rl);
}

/*
 * Interior nodes follow the resident leaves, not the file's span: one
 * block a GiB (a level-1 node each) over 200 GiB of the low tree and 50 of
 * the high one; once checkpointed and evicted, the level-1 nodes go with
 * their last leaf and every block reads back from the tree.  A level-1
 * node whose slot a clear made EXT_EMPTY stays until a checkpoint wrote
 * the clear, even when its last leaf goes: freed, the block would read
 * back from the tree, which still maps it.
 */
#define GIB_BLKS (1ull << 18)

static uint64_t inner_f(unsigned i)
{
	return i < 200 ? 1000 + i * GIB_BLKS : EXTENT_LOW_FBLK + 7 + (i - 200) * GIB_BLKS;
}

static void test_inner(void **state)
{
	struct extcache_stats st;
	struct extent_ent e;
	uint64_t cs[1] = { 5 }, a, b;
	struct st s;

	(void)state;
	setup(&s);
	for (unsigned i = 0; i < 250; i++)
		assert_int_equal(extent_set(&s.l, inner_f(i), 1, 7000 + i, cs, NULL, NULL), 0);
	extcache_stats(s.xc, &st);
	assert_true(st.inner_bytes >= 250 * 4096);
	checkpoint(&s);
	extcache_set_budget(s.xc, 0);
	extcache_stats(s.xc, &st);
	printf("extcache inner: %llu leaves, %llu bytes of interior nodes, %llu freed\n",
	       (unsigned long long)st.leaves, (unsigned long long)st.inner_bytes,
	       (unsigned long long)st.inner_freed);
	assert_int_equal(st.leaves, 0);
	assert_true(st.inner_freed >= 250);
	assert_true(st.inner_bytes <= 8 * 4200);	/* the levels above: a few */
	for (unsigned i = 0; i < 250; i++) {
		assert_int_equal(extent_lookup(&s.l, inner_f(i), &e), 0);
		assert_int_equal(e.phys, 7000 + i);
		assert_int_equal(extent_lookup(&s.l, inner_f(i) + 1, &e), -ENOENT);
	}
	/* A (clean, resident) and B (cleared whole) in one level-1 node. */
	extcache_set_budget(s.xc, BUDGET);
	a = inner_f(5);
	b = inner_f(5) + 512;
	assert_int_equal(extent_set(&s.l, b, 1, 9999, cs, NULL, NULL), 0);
	checkpoint(&s);
	extcache_set_budget(s.xc, 1 << 20);
	assert_int_equal(extent_lookup(&s.l, a, &e), 0);
	assert_int_equal(extent_lookup(&s.l, b, &e), 0);
	assert_int_equal(e.phys, 9999);
	extcache_stats(s.xc, &st);
	assert_int_equal(st.leaves, 2);
	assert_int_equal(extent_clear(&s.l, b & ~511ull, 512, NULL, NULL), 0);
	extcache_set_budget(s.xc, 0);
	extcache_trim(s.xc);	/* A was just used: its second chance */
	extcache_stats(s.xc, &st);
	assert_int_equal(st.leaves, 0);
	assert_int_equal(extent_lookup(&s.l, b, &e), -ENOENT);
	assert_int_equal(extent_lookup(&s.l, a, &e), 0);
	assert_int_equal(e.phys, 7005);
	checkpoint(&s);
	extcache_set_budget(s.xc, 0);
	assert_int_equal(extent_lookup(&s.l, b, &e), -ENOENT);
	teardown(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_eio),
		cmocka_unit_test(test_model),
		cmocka_unit_test(test_model_full),
		cmocka_unit_test(test_compact_cycle),
		cmocka_unit_test(test_trim_bounded),
		cmocka_unit_test(test_trim_busy),
		cmocka_unit_test(test_trim_stuck_run),
		cmocka_unit_test(test_race),
		cmocka_unit_test(test_inner),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
