// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: range locks: disjoint writers run together, overlapping writers exclude, readers share, FIFO keeps writers from starving, a wait calls the block hook. */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "rangelock.h"
#include "tfs.h"

#define NT 4

/* ---- disjoint writers / sharing readers meet inside a barrier ---- */

struct meet {
	struct rangelock *rl;
	pthread_barrier_t *bar;
	uint64_t start, end;
	bool write;
};

static void *meet_thread(void *p)
{
	struct meet *m = p;
	struct rl_range r;

	rl_lock(m->rl, &r, m->start, m->end, m->write);
	/* Every thread holds its range here at once, or the barrier never opens. */
	pthread_barrier_wait(m->bar);
	rl_unlock(m->rl, &r);
	return NULL;
}

static void run_meet(struct rangelock *rl, struct meet *m, unsigned n)
{
	pthread_t th[NT];
	pthread_barrier_t bar;

	pthread_barrier_init(&bar, NULL, n);
	for (unsigned i = 0; i < n; i++) {
		m[i].rl = rl;
		m[i].bar = &bar;
		assert_int_equal(pthread_create(&th[i], NULL, meet_thread, &m[i]), 0);
	}
	for (unsigned i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&bar);
}

static void test_disjoint_writers(void **state)
{
	struct rangelock rl;
	struct meet m[NT];

	rl_init(&rl);
	for (unsigned i = 0; i < NT; i++)
		m[i] = (struct meet){ .start = i * 100, .end = i * 100 + 100, .write = true };
	m[NT - 1].end = RL_EOF;
	run_meet(&rl, m, NT);
	assert_int_equal(rl.max_writers, NT);
	assert_int_equal(rl.cur_writers, 0);
	assert_null(rl.head);
	assert_null(rl.tail);
	rl_destroy(&rl);
}

static void test_readers_share(void **state)
{
	struct rangelock rl;
	struct meet m[NT];

	rl_init(&rl);
	for (unsigned i = 0; i < NT; i++)
		m[i] = (struct meet){ .start = i * 10, .end = 1000, .write = false };
	run_meet(&rl, m, NT);
	assert_int_equal(rl.max_writers, 0);
	assert_null(rl.head);
	rl_destroy(&rl);
}

/* ---- overlapping requests exclude: occupancy counters checked inside ---- */

/* Two shapes: 16 blocks with a few threads (the plain list: fewer entries
 * than the index threshold), and 2048 blocks with the index built (ranges
 * held far away) where lengths straddle the 512-block hash span and bucket
 * boundaries, so hashed, big and whole-file requests meet. */
#define SPACE_MAX 2048
#define ITERS 3000
#define READER_UNIT 0x10000
#define FAR (1ull << 40)
#define NFAR 12

struct excl {
	struct rangelock rl;
	uint64_t space;
	_Atomic uint32_t occ[SPACE_MAX];	/* writers in low 16 bits, readers above */
	_Atomic int violations;
	_Atomic int writes_done;
};

struct excl_arg {
	struct excl *x;
	unsigned seed;
};

static void pick_range(struct excl *x, unsigned *seed, uint64_t *s, uint64_t *e)
{
	uint64_t len;

	if (x->space <= 16) {
		*s = (uint64_t)rand_r(seed) % x->space;
		*e = *s + 1 + (uint64_t)rand_r(seed) % (x->space - *s);
		return;
	}
	switch (rand_r(seed) % 10) {
	case 0: len = x->space; break;				/* big */
	case 1: case 2: len = 400 + rand_r(seed) % 300; break;	/* around the span */
	default: len = 1 + rand_r(seed) % 64; break;		/* hashed */
	}
	*s = (uint64_t)rand_r(seed) % x->space;
	if (*s + len > x->space)
		*s = x->space - len;
	/* Up to the ranges held far away, never into them: they stay held. */
	*e = rand_r(seed) % 20 == 0 ? FAR : *s + len;
}

static void *excl_thread(void *p)
{
	struct excl_arg *a = p;
	struct excl *x = a->x;

	for (int it = 0; it < ITERS; it++) {
		uint64_t s, e, top;
		bool w = rand_r(&a->seed) % 3 != 0;
		uint32_t unit = w ? 1 : READER_UNIT;
		struct rl_range r;

		pick_range(x, &a->seed, &s, &e);
		top = e < x->space ? e : x->space;
		rl_lock(&x->rl, &r, s, e, w);
		for (uint64_t b = s; b < top; b++) {
			uint32_t old = atomic_fetch_add(&x->occ[b], unit);
			if (w ? old != 0 : (old & 0xffff) != 0)
				atomic_fetch_add(&x->violations, 1);
		}
		sched_yield();	/* widen the window for a wrong overlap */
		for (uint64_t b = s; b < top; b++)
			atomic_fetch_sub(&x->occ[b], unit);
		if (w)
			atomic_fetch_add(&x->writes_done, 1);
		rl_unlock(&x->rl, &r);
	}
	return NULL;
}

static void run_excl(uint64_t space, bool indexed)
{
	struct excl *x = calloc(1, sizeof(*x));
	struct rl_range far[NFAR];
	pthread_t th[NT];
	struct excl_arg a[NT];

	assert_non_null(x);
	rl_init(&x->rl);
	x->space = space;
	if (indexed)
		for (unsigned i = 0; i < NFAR; i++)
			rl_lock(&x->rl, &far[i], FAR + i * 4096, FAR + i * 4096 + 1 + i * 100, true);
	for (unsigned i = 0; i < NT; i++) {
		a[i].x = x;
		a[i].seed = 17 + i;
		assert_int_equal(pthread_create(&th[i], NULL, excl_thread, &a[i]), 0);
	}
	for (unsigned i = 0; i < NT; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(atomic_load(&x->violations), 0);
	assert_true(atomic_load(&x->writes_done) > 0);
	assert_int_equal(x->rl.cur_writers, indexed ? NFAR : 0);
	assert_true(indexed == (x->rl.chain != NULL));
	if (indexed)
		for (unsigned i = 0; i < NFAR; i++)
			rl_unlock(&x->rl, &far[i]);
	assert_int_equal(x->rl.cur_writers, 0);
	assert_null(x->rl.head);
	assert_null(x->rl.big);
	rl_destroy(&x->rl);
	free(x);
}

static void test_overlap_excludes(void **state)
{
	run_excl(16, false);
}

static void test_overlap_excludes_indexed(void **state)
{
	run_excl(SPACE_MAX, true);
}

/* ---- FIFO: a writer behind readers is not overtaken by later readers ---- */

struct fifo {
	struct rangelock *rl;
	struct rl_range r;
	uint64_t start, end;
	bool write;
	char tag;
	char *order;
	_Atomic int *pos;
	_Atomic bool done;
};

static void *fifo_thread(void *p)
{
	struct fifo *f = p;

	rl_lock(f->rl, &f->r, f->start, f->end, f->write);
	f->order[atomic_fetch_add(f->pos, 1)] = f->tag;
	rl_unlock(f->rl, &f->r);
	atomic_store(&f->done, true);
	return NULL;
}

/* Wait (without timing assumptions) until @f's request is queued in the
 * lock's list, or already done (a broken lock: the asserts that follow fail). */
static void wait_queued(struct rangelock *rl, struct fifo *f)
{
	struct rl_range *r = &f->r;

	while (!atomic_load(&f->done)) {
		bool found = false;
		pthread_mutex_lock(&rl->mu);
		for (struct rl_range *e = rl->head; e; e = e->next)
			found |= e == r;
		pthread_mutex_unlock(&rl->mu);
		if (found)
			return;
		sched_yield();
	}
}

static bool is_granted(struct rangelock *rl, struct rl_range *r)
{
	pthread_mutex_lock(&rl->mu);
	bool g = r->granted;
	pthread_mutex_unlock(&rl->mu);
	return g;
}

static void run_fifo(bool indexed)
{
	struct rangelock rl;
	struct rl_range r1, r3, far[NFAR];
	char order[8] = { 0 };
	_Atomic int pos = 0;
	pthread_t tw, tr, tx;
	struct fifo w = { .rl = &rl, .start = 5, .end = 6, .write = true, .tag = 'W',
			  .order = order, .pos = &pos };
	struct fifo r2 = { .rl = &rl, .start = 0, .end = 10, .write = false, .tag = 'R',
			   .order = order, .pos = &pos };
	struct fifo x = { .rl = &rl, .start = 0, .end = 15, .write = true, .tag = 'X',
			  .order = order, .pos = &pos };

	rl_init(&rl);
	if (indexed)
		for (unsigned i = 0; i < NFAR; i++)
			rl_lock(&rl, &far[i], FAR + i * 4096, FAR + i * 4096 + 1, false);
	rl_lock(&rl, &r1, 0, 10, false);
	assert_true(r1.granted);

	assert_int_equal(pthread_create(&tw, NULL, fifo_thread, &w), 0);
	wait_queued(&rl, &w);
	assert_int_equal(pthread_create(&tr, NULL, fifo_thread, &r2), 0);
	wait_queued(&rl, &r2);
	assert_int_equal(pthread_create(&tx, NULL, fifo_thread, &x), 0);
	wait_queued(&rl, &x);
	/* The writer waits for r1; the later reader waits for the writer. */
	assert_false(atomic_load(&w.done) || is_granted(&rl, &w.r));
	assert_false(atomic_load(&r2.done) || is_granted(&rl, &r2.r));
	assert_false(atomic_load(&x.done) || is_granted(&rl, &x.r));

	/* A later request that conflicts with nobody ahead passes at once. */
	rl_lock(&rl, &r3, 20, indexed ? FAR : RL_EOF, true);
	assert_true(r3.granted);
	assert_int_equal(rl.cur_writers, 1);
	rl_unlock(&rl, &r3);

	rl_unlock(&rl, &r1);
	pthread_join(tw, NULL);
	pthread_join(tr, NULL);
	pthread_join(tx, NULL);
	assert_string_equal(order, "WRX");
	assert_true(indexed == (rl.chain != NULL));
	if (indexed)
		for (unsigned i = 0; i < NFAR; i++)
			rl_unlock(&rl, &far[i]);
	assert_null(rl.head);
	assert_int_equal(rl.cur_writers, 0);
	rl_destroy(&rl);
}

static void test_fifo(void **state)
{
	run_fifo(false);
}

static void test_fifo_indexed(void **state)
{
	run_fifo(true);
}

/* ---- a locker that must wait says so first (tfs_set_block_hook) ---- */

static _Atomic unsigned hook_calls;

static void count_hook(void)
{
	atomic_fetch_add(&hook_calls, 1);
}

struct hook_arg {
	struct rangelock *rl;
	_Atomic bool got;
};

static void *hook_thread(void *p)
{
	struct hook_arg *a = p;
	struct rl_range r;

	rl_lock(a->rl, &r, 0, 10, false);
	atomic_store(&a->got, true);
	rl_unlock(a->rl, &r);
	return NULL;
}

/* The daemon hands its /dev/fuse reader token on in the hook: a reader
 * that waits for a writer without calling it would keep every other
 * request unread for as long as the writer holds its range. */
static void test_wait_calls_hook(void **state)
{
	struct rangelock rl;
	struct rl_range w, r;
	struct hook_arg a = { .rl = &rl };
	pthread_t th;

	(void)state;
	rl_init(&rl);
	tfs_set_block_hook(count_hook);
	/* Granted at once: no call. */
	rl_lock(&rl, &r, 0, 10, false);
	rl_unlock(&rl, &r);
	assert_int_equal(atomic_load(&hook_calls), 0);

	rl_lock(&rl, &w, 5, 6, true);
	assert_int_equal(pthread_create(&th, NULL, hook_thread, &a), 0);
	for (unsigned i = 0; i < 2000 && atomic_load(&hook_calls) == 0; i++)
		usleep(1000);
	/* Called before the wait, and the reader is still waiting. */
	assert_int_equal(atomic_load(&hook_calls), 1);
	assert_false(atomic_load(&a.got));
	rl_unlock(&rl, &w);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_true(atomic_load(&a.got));
	assert_int_equal(atomic_load(&hook_calls), 1);
	tfs_set_block_hook(NULL);
	rl_destroy(&rl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_disjoint_writers),
		cmocka_unit_test(test_readers_share),
		cmocka_unit_test(test_overlap_excludes),
		cmocka_unit_test(test_overlap_excludes_indexed),
		cmocka_unit_test(test_fifo),
		cmocka_unit_test(test_fifo_indexed),
		cmocka_unit_test(test_wait_calls_hook),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
