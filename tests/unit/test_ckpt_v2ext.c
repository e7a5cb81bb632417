// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: a checkpoint's EXTENT items of a changed range (lib/ckpt_v2ext.c): a randomized model puts a map changed by writes, overwrites in place with new csums, punches, unwritten ranges and long runs across the item limit, once the old way (every block cut out and written again, ckpt_v2_put_extents_all) and once the new way (only the blocks that differ) from the same starting tree; every block's mapping and csum, the reference changes per physical block and the mapped count must be the same, and the tree must then map what the map maps. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "alloc_v2.h"
#include "bt_memstore.h"
#include "btree.h"
#include "ckpt_v2.h"
#include "extent.h"
#include "v2ext.h"
#include "v2item.h"

#define INO 7u
#define NF 3000u		/* file blocks the model uses (plus a far zone) */
#define FAR (EXTENT_LOW_FBLK - 600u)	/* a second zone, across a map boundary */
#define NPHYS (1u << 16)	/* physical blocks the model allocates from */

static uint64_t rs = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return rs;
}

/* The counting stub of the accounting: the change of each block's
 * references in the put being checked. */
static int32_t *refd;

int alloc_v2_ref(struct alloc_v2 *v, uint64_t blk, uint64_t n, int sign)
{
	(void)v;
	for (uint64_t i = 0; i < n; i++) {
		assert_true(blk + i > 0 && blk + i < NPHYS);
		refd[blk + i] += sign;
	}
	return 0;
}

static uint64_t nextphys = 1;

/* n fresh blocks: mostly following the last ones (runs join across
 * checkpoints), sometimes elsewhere or reused (the tree keeps no count). */
static uint64_t alloc_phys(uint32_t n)
{
	uint64_t p;

	if (rnd() % 4 == 0)
		nextphys = 1 + rnd() % (NPHYS - 2048);
	if (nextphys + n >= NPHYS)
		nextphys = 1;
	p = nextphys;
	nextphys += n;
	return p;
}

static uint64_t zone_fblk(uint64_t f)
{
	return (rnd() % 8 == 0) ? FAR + f % 1200 : f;
}

/* One change to the map in [0, NF) or the far zone. */
static void model_op(struct extent_map *m)
{
	uint64_t csums[700];
	uint64_t f = zone_fblk(rnd() % NF);
	unsigned r = rnd() % 100;
	uint32_t n = r < 60 ? 1 + rnd() % 8 : 1 + rnd() % 700;

	uint64_t end = f < FAR ? NF : FAR + 1200;

	if (f + n > end)
		n = (uint32_t)(end - f);
	for (uint32_t i = 0; i < n; i++)
		csums[i] = rnd() | 1;
	if (r < 55) {			/* a write to fresh blocks */
		assert_int_equal(extent_set(m, f, n, alloc_phys(n), csums, NULL, NULL), 0);
	} else if (r < 75) {		/* in place: the same blocks, new csums */
		for (uint32_t i = 0; i < n; i++) {
			struct extent_ent e;

			extent_get(m, f + i, &e);
			if (!e.phys)
				continue;
			e.phys = EXTENT_PHYS(e.phys);
			e.csum = rnd() % 16 == 0 ? e.csum : csums[i];
			assert_int_equal(extent_set1(m, f + i, &e, NULL, NULL), 0);
		}
	} else if (r < 85) {		/* fallocate */
		assert_int_equal(extent_set(m, f, n, alloc_phys(n) | EXTENT_UNWRITTEN, NULL,
					    NULL, NULL), 0);
	} else if (r < 95) {		/* punch */
		assert_int_equal(extent_clear(m, f, n, NULL, NULL), 0);
	} else {			/* a rewrite of what is there: no change */
		for (uint32_t i = 0; i < n; i++) {
			struct extent_ent e;

			extent_get(m, f + i, &e);
			assert_int_equal(extent_set1(m, f + i, &e, NULL, NULL), 0);
		}
	}
}

/* What a put left: the tree's blocks in both zones, the references, dmapped. */
struct result {
	struct extent_ent *b;		/* NF + 1200 */
	int32_t *refd;
	int64_t dmapped;
	uint64_t items;
};

static int fill(void *ctx, uint64_t fblk, uint64_t phys, uint32_t n,
		const struct extent_ent *ents)
{
	struct extent_ent *b = ctx;

	(void)phys;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t f = fblk + i;

		b[f < FAR ? f : NF + (f - FAR)] = ents[i];
	}
	return 0;
}

static void snapshot(struct btree *t, struct result *r)
{
	memset(r->b, 0, (NF + 1200) * sizeof(*r->b));
	assert_int_equal(v2ext_walk(t, INO, 0, EXTENT_MAX_FBLK, fill, r->b), 0);
	assert_int_equal(bt_verify(t, &r->items, NULL), 0);
}

typedef int (*put_fn)(struct btree *, struct alloc_v2 *, uint64_t, struct extent_map *,
		      uint64_t, uint64_t, int64_t *, struct ckpt_v2_putcount *);

static struct ckpt_v2_putcount pc;	/* of the new way */

static void put(struct btree *t, put_fn fn, struct extent_map *m, uint64_t from, uint64_t to,
		struct result *r)
{
	struct alloc_v2 *av = (struct alloc_v2 *)&nextphys;	/* only passed to the stub */
	uint64_t before, after;

	refd = r->refd;
	memset(refd, 0, NPHYS * sizeof(*refd));
	assert_int_equal(v2ext_count(t, INO, 0, EXTENT_MAX_FBLK, &before), 0);
	assert_int_equal(fn(t, av, INO, m, from, to, &r->dmapped, &pc), 0);
	assert_int_equal(v2ext_count(t, INO, 0, EXTENT_MAX_FBLK, &after), 0);
	assert_int_equal((int64_t)(after - before), r->dmapped);
	snapshot(t, r);
}

static void result_init(struct result *r)
{
	r->b = calloc(NF + 1200, sizeof(*r->b));
	r->refd = calloc(NPHYS, sizeof(*r->refd));
	assert_non_null(r->b);
	assert_non_null(r->refd);
}

static void result_free(struct result *r)
{
	free(r->b);
	free(r->refd);
}

static void test_model(void **state)
{
	const unsigned ROUNDS = 3000;
	struct broot root = { 0 };
	struct result a, b, m;
	struct extent_map map = { 0 };
	struct env e;
	uint64_t gen = 1, fewer = 0;

	(void)state;
	result_init(&a);
	result_init(&b);
	result_init(&m);
	extent_init(&map);
	env_open(&e, 64 * BNODE_SIZE);
	for (unsigned round = 0; round < ROUNDS; round++) {
		unsigned ops = 1 + rnd() % (round % 50 == 0 ? 200 : 12);
		uint64_t from = 0, to = EXTENT_MAX_FBLK;

		for (unsigned i = 0; i < ops; i++)
			model_op(&map);
		if (rnd() % 3 == 0) {	/* a range that covers both zones only */
			from = 0;
			to = FAR + 1200 + rnd() % 5000;
		}
		assert_int_equal(bt_begin(&e.t, gen++), 0);
		put(&e.t, ckpt_v2_put_extents_all, &map, from, to, &a);
		bt_abort(&e.t);
		assert_int_equal(bt_begin(&e.t, gen++), 0);
		put(&e.t, ckpt_v2_put_extents, &map, from, to, &b);
		commit_release(&e.t, &root);

		assert_memory_equal(a.b, b.b, (NF + 1200) * sizeof(*a.b));
		assert_memory_equal(a.refd, b.refd, NPHYS * sizeof(*a.refd));
		assert_int_equal(a.dmapped, b.dmapped);
		assert_true(b.items >= a.items);	/* boundaries may stay where they were */
		fewer += b.items > a.items;
		/* The tree maps what the map maps. */
		memset(m.b, 0, (NF + 1200) * sizeof(*m.b));
		assert_int_equal(extent_walk(&map, 0, EXTENT_MAX_FBLK, fill, m.b), 0);
		assert_memory_equal(m.b, b.b, (NF + 1200) * sizeof(*m.b));
	}
	printf("ckpt_v2ext model: %u rounds, %llu with more items than a full rewrite makes; "
	       "%llu mapped blocks kept, %llu rewritten\n", ROUNDS, (unsigned long long)fewer,
	       (unsigned long long)pc.kept, (unsigned long long)pc.rewritten);
	assert_true(pc.kept > pc.rewritten);
	assert_true(fewer > 0);		/* the model reaches kept boundaries */
	extent_destroy(&map, NULL, NULL);
	env_close(&e);
	result_free(&a);
	result_free(&b);
	result_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_model),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
