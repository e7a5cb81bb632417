// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: v2ext_bench: one thread, a file of BLOCKS blocks, extent.c's RAM map against v2ext's EXTENT items on the in-memory store with a warm cache (1 GiB budget, one open transaction, as between checkpoints): sequential 4k sets (each joins the item before it), random 4k overwrites (each cuts an item in three), random lookups; rates per CPU second of the thread (the machine is shared); each round runs both maps back to back, the median of ROUNDS is printed with the ratio.  Not a test: the figures of docs/MODULES.md. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "bt_memstore.h"
#include "btree.h"
#include "extent.h"
#include "v2ext.h"

#define INO 9u

/* The thread's CPU time: on a machine this shared, wall-clock rates
 * mostly measure the other processes. */
static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t xs = 88172645463325252ull;

static uint64_t rnd(void)
{
	xs ^= xs << 13;
	xs ^= xs >> 7;
	xs ^= xs << 17;
	return xs;
}

/* The map under test: extent.c (t NULL) or v2ext on t. */
struct map {
	struct extent_map m;
	struct btree *t;
};

static int set1(struct map *mp, uint64_t f, uint64_t phys)
{
	uint64_t cs = phys * 31;

	if (!mp->t)
		return extent_set(&mp->m, f, 1, phys, &cs, NULL, NULL);
	return v2ext_set(mp->t, INO, f, 1, phys, &cs, NULL, NULL, NULL);
}

static int get1(struct map *mp, uint64_t f, struct extent_ent *e)
{
	return mp->t ? v2ext_lookup(mp->t, INO, f, e) : extent_lookup(&mp->m, f, e);
}

/* Rates (operations per CPU second) of the three phases on @mp. */
static void phases(struct map *mp, uint64_t blocks, uint64_t nrand, double rate[3])
{
	struct extent_ent e;
	uint64_t phys = 1u << 20;
	double t0 = now();

	for (uint64_t f = 0; f < blocks; f++)
		if (set1(mp, f, phys++))
			exit(2);
	rate[0] = blocks / (now() - t0);
	xs = 88172645463325252ull;
	t0 = now();
	for (uint64_t i = 0; i < nrand; i++)
		if (set1(mp, rnd() % blocks, phys++))
			exit(3);
	rate[1] = nrand / (now() - t0);
	t0 = now();
	for (uint64_t i = 0; i < nrand; i++)
		if (get1(mp, rnd() % blocks, &e))
			exit(4);
	rate[2] = nrand / (now() - t0);
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* v2ext_bench BLOCKS RANDOM_OPS ROUNDS */
int main(int argc, char **argv)
{
	uint64_t blocks = argc > 1 ? strtoull(argv[1], NULL, 0) : 262144;
	uint64_t nrand = argc > 2 ? strtoull(argv[2], NULL, 0) : 100000;
	unsigned rounds = argc > 3 ? atoi(argv[3]) : 5;
	static const char *const name[3] = { "sequential 4k sets", "random 4k overwrites",
					     "random lookups" };
	double r[2][3][64];

	if (!blocks || !rounds || rounds > 64)
		return 1;
	for (unsigned k = 0; k < rounds; k++) {
		struct map ram = { .t = NULL }, tree;
		struct memstore ms;
		struct bcache *c;
		struct btree t;
		uint64_t items;
		double rate[3];

		extent_init(&ram.m);
		phases(&ram, blocks, nrand, rate);
		for (int p = 0; p < 3; p++)
			r[0][p][k] = rate[p];
		extent_destroy(&ram.m, NULL, NULL);

		mem_init(&ms);
		if (bcache_create(1u << 30, &c) || bt_open(&t, &ms.store, c, 1, bt_uuid, NULL) ||
		    bt_begin(&t, 1))
			return 1;
		tree.t = &t;
		phases(&tree, blocks, nrand, rate);
		for (int p = 0; p < 3; p++)
			r[1][p][k] = rate[p];
		if (k == 0 && !bt_verify(&t, &items, NULL))
			printf("v2ext: %llu items for %llu blocks after the random overwrites\n",
			       (unsigned long long)items, (unsigned long long)blocks);
		bt_abort(&t);
		bt_close(&t);
		bcache_destroy(c);
		mem_destroy(&ms);
	}
	printf("%-22s %14s %14s %8s   (per CPU second; medians of %u rounds, %llu blocks, "
	       "%llu random ops)\n", "", "extent.c", "v2ext", "ratio", rounds, (unsigned long long)blocks,
	       (unsigned long long)nrand);
	for (int p = 0; p < 3; p++) {
		qsort(r[0][p], rounds, sizeof(double), cmp);
		qsort(r[1][p], rounds, sizeof(double), cmp);
		printf("%-22s %14.0f %14.0f %8.3f\n", name[p], r[0][p][rounds / 2],
		       r[1][p][rounds / 2], r[1][p][rounds / 2] / r[0][p][rounds / 2]);
	}
	return 0;
}
