// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: allocator: exhaustion, reuse, contiguity, reference counts, deferred frees, reserve, full-run guarantee, threads. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "alloc.h"

#define GROUP 32768u		/* alloc.c: minimum group size */

/* A bitmap of handed-out blocks to catch double allocation. */
struct seen {
	uint64_t base, n;
	uint8_t *bits;
};

static void seen_init(struct seen *s, uint64_t base, uint64_t n)
{
	s->base = base;
	s->n = n;
	s->bits = calloc(n, 1);
	assert_non_null(s->bits);
}

static void seen_add(struct seen *s, uint64_t blk, uint64_t got)
{
	assert_true(blk >= s->base);
	assert_true(blk + got <= s->base + s->n);
	for (uint64_t i = 0; i < got; i++) {
		assert_int_equal(s->bits[blk - s->base + i], 0);
		s->bits[blk - s->base + i] = 1;
	}
}

static void fill_all(struct alloc *a, uint64_t start, uint64_t end)
{
	assert_int_equal(alloc_use(a, start, end - start), 0);
	assert_int_equal(alloc_free_blocks(a), 0);
}

static void test_exhaust_and_reuse(void **state)
{
	const uint64_t start = 100, n = 70000;
	struct alloc *a;
	struct seen s;
	uint64_t blk, got, total = 0;
	int ret;

	assert_int_equal(alloc_create(start, start + n, 0, &a), 0);
	assert_int_equal(alloc_total_blocks(a), n);
	assert_int_equal(alloc_free_blocks(a), n);
	seen_init(&s, start, n);
	for (uint64_t i = 0; (ret = alloc_get(a, 1000, i, ALLOC_DATA, &blk, &got)) == 0; i++) {
		assert_true(got >= 1 && got <= 1000);
		seen_add(&s, blk, got);
		assert_int_equal(alloc_refs(a, blk), 1);
		total += got;
	}
	assert_int_equal(ret, -ENOSPC);
	assert_int_equal(total, n);
	assert_int_equal(alloc_free_blocks(a), 0);
	assert_int_equal(alloc_get(a, 1, 0, ALLOC_META, &blk, &got), -ENOSPC);

	/* A freed run is found again, whole. */
	alloc_put(a, start + 5000, 10);
	assert_int_equal(alloc_free_blocks(a), 10);
	assert_int_equal(alloc_refs(a, start + 5000), 0);
	assert_int_equal(alloc_get(a, 10, 7, ALLOC_DATA, &blk, &got), 0);
	assert_int_equal(blk, start + 5000);
	assert_int_equal(got, 10);
	assert_int_equal(alloc_errors(a), 0);
	free(s.bits);
	alloc_destroy(a);
}

static void test_contiguous(void **state)
{
	struct alloc *a;
	uint64_t blk, got, blk2, got2;

	assert_int_equal(alloc_create(1, 200001, 0, &a), 0);
	assert_int_equal(alloc_get(a, 4096, 3, ALLOC_DATA, &blk, &got), 0);
	assert_int_equal(got, 4096);
	/* The next request with the same hint continues right after it. */
	assert_int_equal(alloc_get(a, 100, 3, ALLOC_DATA, &blk2, &got2), 0);
	assert_int_equal(got2, 100);
	assert_int_equal(blk2, blk + 4096);
	for (uint64_t i = 0; i < got; i++)
		assert_int_equal(alloc_refs(a, blk + i), 1);
	assert_int_equal(alloc_free_blocks(a), 200000 - 4196);
	assert_int_equal(alloc_get(a, 0, 0, ALLOC_DATA, &blk, &got), -EINVAL);
	alloc_destroy(a);
}

static void test_refcounts(void **state)
{
	struct alloc *a;
	uint64_t blk, got;

	assert_int_equal(alloc_create(10, 1010, 0, &a), 0);
	assert_int_equal(alloc_get(a, 4, 0, ALLOC_DATA, &blk, &got), 0);
	assert_int_equal(got, 4);
	/* Share the middle two twice (two reflinks). */
	assert_int_equal(alloc_use(a, blk + 1, 2), 0);
	assert_int_equal(alloc_use(a, blk + 1, 2), 0);
	assert_int_equal(alloc_refs(a, blk), 1);
	assert_int_equal(alloc_refs(a, blk + 1), 3);
	assert_int_equal(alloc_refs(a, blk + 2), 3);
	assert_int_equal(alloc_free_blocks(a), 996);

	alloc_put(a, blk, 4);
	assert_int_equal(alloc_refs(a, blk), 0);
	assert_int_equal(alloc_refs(a, blk + 1), 2);
	assert_int_equal(alloc_refs(a, blk + 3), 0);
	assert_int_equal(alloc_free_blocks(a), 998);
	alloc_put(a, blk + 1, 2);
	assert_int_equal(alloc_refs(a, blk + 1), 1);
	assert_int_equal(alloc_free_blocks(a), 998);
	alloc_put(a, blk + 1, 2);
	assert_int_equal(alloc_refs(a, blk + 1), 0);
	assert_int_equal(alloc_free_blocks(a), 1000);
	assert_int_equal(alloc_errors(a), 0);

	/* Double free: ignored, counted, the count does not move. */
	alloc_put(a, blk, 2);
	assert_int_equal(alloc_errors(a), 2);
	assert_int_equal(alloc_free_blocks(a), 1000);
	alloc_put(a, 5000, 1);
	assert_int_equal(alloc_errors(a), 3);
	assert_int_equal(alloc_use(a, 1009, 2), -EINVAL);

	/* Many shared blocks: exercises the table's growth and deletion. */
	assert_int_equal(alloc_use(a, 10, 1000), 0);
	assert_int_equal(alloc_use(a, 10, 1000), 0);
	assert_int_equal(alloc_use(a, 10, 500), 0);
	for (uint64_t b = 10; b < 1010; b++)
		assert_int_equal(alloc_refs(a, b), b < 510 ? 3 : 2);
	for (uint64_t b = 10; b < 1010; b += 2)
		alloc_put(a, b, 1);
	for (uint64_t b = 10; b < 1010; b++)
		assert_int_equal(alloc_refs(a, b), (b < 510 ? 3 : 2) - ((b & 1) == 0));
	alloc_put(a, 10, 1000);
	alloc_put(a, 10, 1000);
	for (uint64_t b = 10; b < 1010; b++)
		assert_int_equal(alloc_refs(a, b), b < 510 && (b & 1));
	assert_int_equal(alloc_free_blocks(a), 750);
	assert_int_equal(alloc_errors(a), 3 + 250);
	alloc_destroy(a);
}

static void test_deferred(void **state)
{
	struct alloc *a;
	uint64_t blk, got;

	assert_int_equal(alloc_create(0, 100, 0, &a), 0);
	assert_int_equal(alloc_get(a, 30, 0, ALLOC_DATA, &blk, &got), 0);
	assert_int_equal(got, 30);
	assert_int_equal(alloc_defer(a, blk, 10, 5), 0);
	assert_int_equal(alloc_defer(a, blk + 10, 10, 10), 0);
	assert_int_equal(alloc_defer(a, blk + 20, 10, 7), 0);
	assert_int_equal(alloc_deferred_blocks(a), 30);

	alloc_release_durable(a, 4);
	assert_int_equal(alloc_free_blocks(a), 70);
	assert_int_equal(alloc_refs(a, blk), 1);
	alloc_release_durable(a, 7);
	assert_int_equal(alloc_free_blocks(a), 90);
	assert_int_equal(alloc_refs(a, blk), 0);
	assert_int_equal(alloc_refs(a, blk + 20), 0);
	assert_int_equal(alloc_refs(a, blk + 10), 1);
	assert_int_equal(alloc_deferred_blocks(a), 10);
	alloc_release_durable(a, 9);
	assert_int_equal(alloc_free_blocks(a), 90);
	assert_int_equal(alloc_defer(a, blk + 10, 0, 1), 0);

	assert_int_equal(alloc_use(a, 50, 5), 0);
	assert_int_equal(alloc_defer(a, 50, 5, 1000), 0);
	alloc_release_all(a);
	assert_int_equal(alloc_free_blocks(a), 100);
	assert_int_equal(alloc_deferred_blocks(a), 0);
	assert_int_equal(alloc_errors(a), 0);
	alloc_destroy(a);
}

static void test_reserve(void **state)
{
	struct alloc *a;
	uint64_t blk, got, data = 0, meta = 0;

	assert_int_equal(alloc_create(1, 1001, 100, &a), 0);
	assert_int_equal(alloc_reserve_blocks(a), 100);
	/* One big data request stops at the reserve. */
	assert_int_equal(alloc_get(a, 2000, 0, ALLOC_DATA, &blk, &got), 0);
	assert_int_equal(got, 900);
	alloc_put(a, blk, got);
	while (alloc_get(a, 7, 1, ALLOC_DATA, &blk, &got) == 0)
		data += got;
	assert_int_equal(data, 900);
	assert_int_equal(alloc_free_blocks(a), 100);
	assert_int_equal(alloc_get(a, 1, 1, ALLOC_DATA, &blk, &got), -ENOSPC);
	while (alloc_get(a, 7, 1, ALLOC_META, &blk, &got) == 0)
		meta += got;
	assert_int_equal(meta, 100);
	assert_int_equal(alloc_free_blocks(a), 0);
	alloc_destroy(a);
}

static void test_full_run(void **state)
{
	const uint64_t n = 4 * GROUP;
	struct alloc *a;
	uint64_t blk, got;

	assert_int_equal(alloc_create(0, n, 0, &a), 0);
	fill_all(a, 0, n);
	/* Group 0 (the hint's) is fragmented; group 2 holds the only long run. */
	for (uint64_t b = 1; b < GROUP; b += 2)
		alloc_put(a, b, 1);
	alloc_put(a, 2 * GROUP + 1234, 5000);
	assert_int_equal(alloc_get(a, 5000, 0, ALLOC_META, &blk, &got), 0);
	assert_int_equal(blk, 2 * GROUP + 1234);
	assert_int_equal(got, 5000);

	/* A run spanning groups 1 and 2 is found too. */
	alloc_put(a, 2 * GROUP - 3000, 6000);
	assert_int_equal(alloc_get(a, 6000, 0, ALLOC_META, &blk, &got), 0);
	assert_int_equal(blk, 2 * GROUP - 3000);
	assert_int_equal(got, 6000);
	/* Spanning three groups. */
	alloc_put(a, 2 * GROUP - 10, GROUP + 20);
	assert_int_equal(alloc_get(a, GROUP + 20, 3, ALLOC_META, &blk, &got), 0);
	assert_int_equal(blk, 2 * GROUP - 10);
	assert_int_equal(got, GROUP + 20);

	/* No run long enough: the longest one anywhere. */
	alloc_put(a, 3 * GROUP + 100, 7);
	alloc_put(a, GROUP + 100, 5);
	assert_int_equal(alloc_get(a, 100, 0, ALLOC_DATA, &blk, &got), 0);
	assert_int_equal(blk, 3 * GROUP + 100);
	assert_int_equal(got, 7);
	assert_int_equal(alloc_get(a, 100, 0, ALLOC_DATA, &blk, &got), 0);
	assert_int_equal(blk, GROUP + 100);
	assert_int_equal(got, 5);
	for (uint64_t i = 0; i < GROUP / 2; i++) {
		assert_int_equal(alloc_get(a, 100, i, ALLOC_DATA, &blk, &got), 0);
		assert_int_equal(got, 1);
		assert_int_equal(blk & 1, 1);
		assert_true(blk < GROUP);
	}
	assert_int_equal(alloc_get(a, 100, 0, ALLOC_DATA, &blk, &got), -ENOSPC);
	assert_int_equal(alloc_errors(a), 0);
	alloc_destroy(a);
}

/* A nearly full large area (256 GiB of 4 KiB blocks): must not crawl. */
static void test_large_nearly_full(void **state)
{
	const uint64_t n = 1ull << 26;
	struct alloc *a;
	uint64_t blk, got;

	assert_int_equal(alloc_create(1, n + 1, 0, &a), 0);
	fill_all(a, 1, n + 1);
	alloc_put(a, n - 5, 3);
	alloc_put(a, n / 3, 1);
	for (int i = 0; i < 1000; i++) {
		assert_int_equal(alloc_get(a, 256, (uint64_t)i, ALLOC_DATA, &blk, &got), 0);
		assert_int_equal(alloc_free_blocks(a), 4 - got);
		alloc_put(a, blk, got);
	}
	assert_int_equal(alloc_get(a, 256, 0, ALLOC_DATA, &blk, &got), 0);
	assert_int_equal(blk, n - 5);
	assert_int_equal(got, 3);
	alloc_destroy(a);
}

/* ---- threads ---- */

#define NTHREADS 4
#define TAREA (3 * GROUP + 777)

struct tshared {
	struct alloc *a;
	_Atomic uint8_t owner[TAREA];	/* 0 = not handed out, else thread id + 1 */
	_Atomic int failures;
	_Atomic uint64_t held;
};

struct targ {
	struct tshared *sh;
	unsigned id;
};

static void *alloc_thread(void *p)
{
	struct targ *ta = p;
	struct tshared *sh = ta->sh;
	unsigned seed = ta->id * 7919 + 1;
	struct { uint64_t blk, n; } runs[256];
	unsigned nruns = 0;

	for (int it = 0; it < 20000; it++) {
		uint64_t want = (uint64_t)(rand_r(&seed) % 64) + 1, blk, got;
		if (nruns < 256 && alloc_get(sh->a, want, ta->id, ALLOC_DATA, &blk, &got) == 0) {
			for (uint64_t i = 0; i < got; i++) {
				uint8_t z = 0;
				if (!atomic_compare_exchange_strong(&sh->owner[blk + i], &z,
								    (uint8_t)(ta->id + 1)))
					atomic_fetch_add(&sh->failures, 1);
			}
			runs[nruns].blk = blk;
			runs[nruns].n = got;
			nruns++;
		} else if (nruns) {
			unsigned k = (unsigned)rand_r(&seed) % nruns;
			for (uint64_t i = 0; i < runs[k].n; i++)
				atomic_store(&sh->owner[runs[k].blk + i], 0);
			alloc_put(sh->a, runs[k].blk, runs[k].n);
			runs[k] = runs[--nruns];
		}
	}
	/* Keep what is held, then take everything left: the area must be exhausted exactly. */
	uint64_t blk, got, held = 0;
	for (unsigned k = 0; k < nruns; k++)
		held += runs[k].n;
	while (alloc_get(sh->a, 64, ta->id, ALLOC_DATA, &blk, &got) == 0) {
		for (uint64_t i = 0; i < got; i++) {
			uint8_t z = 0;
			if (!atomic_compare_exchange_strong(&sh->owner[blk + i], &z,
							    (uint8_t)(ta->id + 1)))
				atomic_fetch_add(&sh->failures, 1);
		}
		held += got;
	}
	atomic_fetch_add(&sh->held, held);
	return NULL;
}

static void test_threads(void **state)
{
	struct tshared *sh = calloc(1, sizeof(*sh));
	pthread_t th[NTHREADS];
	struct targ ta[NTHREADS];

	assert_non_null(sh);
	assert_int_equal(alloc_create(0, TAREA, 0, &sh->a), 0);
	for (unsigned i = 0; i < NTHREADS; i++) {
		ta[i].sh = sh;
		ta[i].id = i;
		assert_int_equal(pthread_create(&th[i], NULL, alloc_thread, &ta[i]), 0);
	}
	for (unsigned i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(atomic_load(&sh->failures), 0);
	assert_int_equal(atomic_load(&sh->held), TAREA);
	assert_int_equal(alloc_free_blocks(sh->a), 0);
	for (uint64_t b = 0; b < TAREA; b++) {
		assert_int_not_equal(atomic_load(&sh->owner[b]), 0);
		assert_int_equal(alloc_refs(sh->a, b), 1);
	}
	assert_int_equal(alloc_errors(sh->a), 0);
	alloc_destroy(sh->a);
	free(sh);
}

/* A full, fragmented data area (copy-on-write churn leaves single free
 * blocks) still leaves the metadata reserve one contiguous run: mount and
 * every checkpoint need one. */
static void test_meta_reserve_contiguous(void **state)
{
	const uint64_t start = 1000, total = 10000, reserve = 1000;
	uint64_t *blks = malloc(total * sizeof(*blks)), n = 0, b, got;
	struct alloc *a;

	(void)state;
	assert_non_null(blks);
	assert_int_equal(alloc_create(start, start + total, reserve, &a), 0);
	while (alloc_get(a, 1, n, ALLOC_DATA, &b, &got) == 0)
		blks[n++] = b;
	assert_int_equal(n, total - reserve);
	for (uint64_t i = 0; i < n; i += 2)
		alloc_put(a, blks[i], 1);
	/* Data takes every block it may again: what is left is scattered. */
	while (alloc_get(a, 1, 7, ALLOC_DATA, &b, &got) == 0)
		;
	assert_int_equal(alloc_get(a, 900, 0, ALLOC_META, &b, &got), 0);
	assert_int_equal(got, 900);
	assert_true(b >= start + total - reserve);
	alloc_put(a, b, got);
	alloc_destroy(a);
	free(blks);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_meta_reserve_contiguous),
		cmocka_unit_test(test_exhaust_and_reuse),
		cmocka_unit_test(test_contiguous),
		cmocka_unit_test(test_refcounts),
		cmocka_unit_test(test_deferred),
		cmocka_unit_test(test_reserve),
		cmocka_unit_test(test_full_run),
		cmocka_unit_test(test_large_nearly_full),
		cmocka_unit_test(test_threads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
