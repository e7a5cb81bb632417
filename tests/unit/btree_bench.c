// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: btree_bench: inserts per second into one B+tree transaction from 1..N threads, each on its own key range (random order inside it), on the in-memory store; prints the median of several runs.  Mode "fresh" times inserts of new keys (splits, new nodes); "replace" first inserts the keys untimed, then times inserting them again in the same transaction (leaves already the transaction's own: the locking path alone).  Not a test: a tool for the parallel-writer figures (docs/MODULES.md). */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <cmocka.h>

#include "bcache.h"
#include "bnode.h"
#include "bstore.h"
#include "bt_memstore.h"
#include "btree.h"

static const uint8_t uuid[16] = { 7 };

struct worker {
	struct btree *t;
	unsigned id, n;
	bool replace;
	pthread_barrier_t *start, *timed;
	int ret;
};

static void insert_all(struct worker *w)
{
	uint64_t x = 0x9e3779b97f4a7c15ull * (w->id + 1);
	uint8_t v[64];

	memset(v, (int)w->id, sizeof(v));
	for (unsigned i = 0; i < w->n && !w->ret; i++) {
		struct bkey k = { w->id + 1, 1, 0 };

		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		k.off = x % (1u << 30);
		w->ret = bt_insert(w->t, &k, v, sizeof(v));
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	pthread_barrier_wait(w->start);
	if (w->replace)
		insert_all(w);
	pthread_barrier_wait(w->timed);
	insert_all(w);
	return NULL;
}

/* CPU seconds of the whole process (every thread). */
static double cpu(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* One run: @nth threads insert @n keys each; inserts per second, and
 * *us the CPU microseconds per insert. */
static double run(unsigned nth, unsigned n, bool replace, double *us)
{
	struct worker w[16];
	pthread_t th[16];
	pthread_barrier_t start, timed;
	struct memstore ms;
	struct bcache *c;
	struct btree t;
	double t0, dt, c0;

	mem_init(&ms);
	if (bcache_create(1u << 30, &c) || bt_open(&t, &ms.store, c, 1, uuid, NULL) ||
	    bt_begin(&t, 1))
		exit(1);
	pthread_barrier_init(&start, NULL, nth + 1);
	pthread_barrier_init(&timed, NULL, nth + 1);
	for (unsigned i = 0; i < nth; i++) {
		w[i] = (struct worker){ &t, i, n, replace, &start, &timed, 0 };
		pthread_create(&th[i], NULL, worker_main, &w[i]);
	}
	pthread_barrier_wait(&start);
	pthread_barrier_wait(&timed);
	t0 = now();
	c0 = cpu();
	for (unsigned i = 0; i < nth; i++) {
		pthread_join(th[i], NULL);
		if (w[i].ret)
			exit(2);
	}
	dt = now() - t0;
	*us = (cpu() - c0) * 1e6 / (nth * (double)n);
	pthread_barrier_destroy(&start);
	pthread_barrier_destroy(&timed);
	bt_abort(&t);
	bt_close(&t);
	bcache_destroy(c);
	mem_destroy(&ms);
	return nth * (double)n / dt;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* btree_bench THREADS KEYS_PER_THREAD RUNS [fresh|replace] */
int main(int argc, char **argv)
{
	unsigned nth = argc > 1 ? atoi(argv[1]) : 1, n = argc > 2 ? atoi(argv[2]) : 200000;
	unsigned runs = argc > 3 ? atoi(argv[3]) : 5;
	bool replace = argc > 4 && !strcmp(argv[4], "replace");
	double r[64], us[64];

	if (!nth || nth > 16 || !runs || runs > 64)
		return 1;
	for (unsigned i = 0; i < runs; i++)
		r[i] = run(nth, n, replace, &us[i]);
	qsort(r, runs, sizeof(r[0]), cmp);
	qsort(us, runs, sizeof(us[0]), cmp);
	printf("%s threads %u keys/thread %u runs %u: median %.0f inserts/s (min %.0f max %.0f), "
	       "median %.2f CPU us/insert\n", replace ? "replace" : "fresh", nth, n, runs,
	       r[runs / 2], r[0], r[runs - 1], us[runs / 2]);
	return 0;
}
