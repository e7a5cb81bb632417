// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: alloc_bench: nanoseconds per alloc_get + alloc_put pair on a 16 GiB area (4 KiB blocks), from 1..N threads, each with its own hint: "churn" keeps the area half full of short runs (1..16 blocks) and frees a random held run for each one taken; "fill" takes 256-block runs until the area is full, then frees them all.  Prints the median of several runs of the threads' mean CPU time per pair (thread CPU clock: steadier than wall time on a shared machine).  Not a test: a tool for the allocator's data path figures (docs/MODULES.md). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"

#define AREA (1ull << 22)	/* 16 GiB of 4 KiB blocks */
#define RING 4096

struct worker {
	struct alloc *a;
	unsigned id, nthreads, ops;
	int fill;
	pthread_barrier_t *start;
	double ns;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void *churn(void *p)
{
	struct worker *w = p;
	struct { uint64_t blk, n; } *ring = calloc(RING, sizeof(*ring));
	unsigned seed = w->id + 1, held = 0;
	uint64_t blk, got;
	double t0;

	/* Half of this thread's share of the area, in short runs. */
	while (held < RING) {
		if (alloc_get(w->a, (uint64_t)(rand_r(&seed) % 16) + 1, w->id, 0, &blk, &got))
			break;
		ring[held].blk = blk;
		ring[held++].n = got;
	}
	pthread_barrier_wait(w->start);
	t0 = now();
	for (unsigned i = 0; i < w->ops; i++) {
		unsigned k = (unsigned)rand_r(&seed) % held;

		alloc_put(w->a, ring[k].blk, ring[k].n);
		if (alloc_get(w->a, (uint64_t)(rand_r(&seed) % 16) + 1, w->id, 0, &blk, &got))
			abort();
		ring[k].blk = blk;
		ring[k].n = got;
	}
	w->ns = (now() - t0) / w->ops;
	for (unsigned k = 0; k < held; k++)
		alloc_put(w->a, ring[k].blk, ring[k].n);
	free(ring);
	return NULL;
}

static void *fill(void *p)
{
	struct worker *w = p;
	uint64_t max = AREA / 256 / w->nthreads + 1, n = 0, blk, got;
	uint64_t *runs = malloc(max * 2 * sizeof(*runs));
	double t0;

	pthread_barrier_wait(w->start);
	t0 = now();
	while (n < max && alloc_get(w->a, 256, w->id, 0, &blk, &got) == 0) {
		runs[2 * n] = blk;
		runs[2 * n++ + 1] = got;
	}
	for (uint64_t i = 0; i < n; i++)
		alloc_put(w->a, runs[2 * i], runs[2 * i + 1]);
	w->ns = (now() - t0) / (double)(n ? n : 1);
	free(runs);
	return NULL;
}

static int dcmp(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return a < b ? -1 : a > b;
}

int main(int argc, char **argv)
{
	int fillmode = argc > 1 && !strcmp(argv[1], "fill");
	unsigned maxthreads = argc > 2 ? (unsigned)atoi(argv[2]) : 2, rounds = 5;

	for (unsigned nt = 1; nt <= maxthreads; nt *= 2) {
		double med[16];

		for (unsigned r = 0; r < rounds; r++) {
			struct worker w[16];
			pthread_t th[16];
			pthread_barrier_t start;
			struct alloc *a;
			double sum = 0;

			if (alloc_create(0, AREA, 0, &a))
				return 1;
			pthread_barrier_init(&start, NULL, nt);
			for (unsigned i = 0; i < nt; i++) {
				w[i] = (struct worker){ a, i, nt, 2000000, fillmode, &start, 0 };
				pthread_create(&th[i], NULL, fillmode ? fill : churn, &w[i]);
			}
			for (unsigned i = 0; i < nt; i++) {
				pthread_join(th[i], NULL);
				sum += w[i].ns;
			}
			med[r] = sum / nt;
			pthread_barrier_destroy(&start);
			alloc_destroy(a);
		}
		qsort(med, rounds, sizeof(med[0]), dcmp);
		printf("%s threads=%u ns_per_get_put=%.1f (min %.1f max %.1f)\n",
		       fillmode ? "fill" : "churn", nt, med[rounds / 2], med[0], med[rounds - 1]);
	}
	return 0;
}
