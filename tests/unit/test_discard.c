// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: discard queue: runs are batched, sorted and merged; nothing is issued before the batching delay unless flushed; teardown hands back unissued runs; with the allocator, a deferred free is discarded only once its sequence is durable, and its blocks cannot be allocated until the discard has finished; trim holds free runs the same way. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "alloc.h"
#include "discard.h"

#define MAXCALLS 64

/* What the queue did, in order.  Under mu. */
struct rec {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct { uint64_t blk, n; uint32_t refs; } issued[MAXCALLS];
	struct { uint64_t blk, n; bool discarded; } done[MAXCALLS];
	unsigned nissued, ndone;
	bool gate;		/* issue blocks while set */
	struct alloc *a;	/* optional: done unholds here */
	_Atomic unsigned seq;	/* event order: issue end, done, allocation */
	unsigned issue_seq, alloc_seq;
};

static int rec_issue(void *ctx, uint64_t blk, uint64_t n)
{
	struct rec *r = ctx;

	pthread_mutex_lock(&r->mu);
	r->issued[r->nissued].blk = blk;
	r->issued[r->nissued].n = n;
	r->issued[r->nissued].refs = r->a ? alloc_refs(r->a, blk) : 0;
	r->nissued++;
	pthread_cond_broadcast(&r->cv);
	while (r->gate)
		pthread_cond_wait(&r->cv, &r->mu);
	r->issue_seq = ++r->seq;
	pthread_mutex_unlock(&r->mu);
	return 0;
}

static void rec_done(void *ctx, uint64_t blk, uint64_t n, bool discarded)
{
	struct rec *r = ctx;

	pthread_mutex_lock(&r->mu);
	r->done[r->ndone].blk = blk;
	r->done[r->ndone].n = n;
	r->done[r->ndone].discarded = discarded;
	r->ndone++;
	pthread_mutex_unlock(&r->mu);
	if (r->a)
		alloc_unhold(r->a, blk, n);
}

static const struct discard_q_ops rec_ops = { .issue = rec_issue, .done = rec_done };

static void rec_init(struct rec *r)
{
	memset(r, 0, sizeof(*r));
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
}

static unsigned nissued(struct rec *r)
{
	pthread_mutex_lock(&r->mu);
	unsigned n = r->nissued;
	pthread_mutex_unlock(&r->mu);
	return n;
}

static void test_batch_merge(void **state)
{
	struct discard_q *q;
	struct discard_q_stats st;
	struct rec r;

	rec_init(&r);
	assert_int_equal(discard_q_create(&rec_ops, &r, 200, &q), 0);
	/* Out of order, touching: [5,15) in three pieces, and [20,21). */
	assert_int_equal(discard_q_add(q, 10, 2), 0);
	assert_int_equal(discard_q_add(q, 20, 1), 0);
	assert_int_equal(discard_q_add(q, 12, 3), 0);
	assert_int_equal(discard_q_add(q, 5, 5), 0);
	/* The batching delay: nothing may go out early. */
	usleep(30 * 1000);
	assert_int_equal(nissued(&r), 0);
	discard_q_flush(q);
	assert_int_equal(r.nissued, 2);
	assert_int_equal(r.issued[0].blk, 5);
	assert_int_equal(r.issued[0].n, 10);
	assert_int_equal(r.issued[1].blk, 20);
	assert_int_equal(r.issued[1].n, 1);
	assert_int_equal(r.ndone, 2);
	assert_true(r.done[0].discarded && r.done[1].discarded);
	discard_q_get_stats(q, &st);
	assert_int_equal(st.batches, 1);
	assert_int_equal(st.runs_in, 4);
	assert_int_equal(st.discarded_blocks, 11);
	assert_int_equal(st.queued_blocks, 0);

	/* Without a flush the worker goes by itself after the delay. */
	assert_int_equal(discard_q_add(q, 100, 4), 0);
	for (int i = 0; i < 200 && nissued(&r) < 3; i++)
		usleep(10 * 1000);
	assert_int_equal(nissued(&r), 3);
	discard_q_destroy(q, true);
}

static void test_teardown(void **state)
{
	struct discard_q *q;
	struct rec r;

	rec_init(&r);
	assert_int_equal(discard_q_create(&rec_ops, &r, 10000, &q), 0);
	assert_int_equal(discard_q_add(q, 7, 1), 0);
	assert_int_equal(discard_q_add(q, 9, 1), 0);
	/* abandon: runs come back (the allocator must get them) unissued */
	discard_q_destroy(q, false);
	assert_int_equal(r.nissued, 0);
	assert_int_equal(r.ndone, 2);
	assert_false(r.done[0].discarded);
	assert_false(r.done[1].discarded);

	rec_init(&r);
	assert_int_equal(discard_q_create(&rec_ops, &r, 10000, &q), 0);
	assert_int_equal(discard_q_add(q, 7, 1), 0);
	/* unmount: what is queued is issued before the worker stops */
	discard_q_destroy(q, true);
	assert_int_equal(r.nissued, 1);
	assert_true(r.done[0].discarded);
}

static int hook(void *ctx, uint64_t blk, uint64_t n)
{
	return discard_q_add(ctx, blk, n);
}

struct getter {
	struct alloc *a;
	struct rec *r;
	uint64_t blk, got;
	int ret;
	atomic_bool finished;
};

static void *get_main(void *arg)
{
	struct getter *g = arg;

	g->ret = alloc_get(g->a, 1, 0, ALLOC_DATA, &g->blk, &g->got);
	g->r->alloc_seq = ++g->r->seq;
	atomic_store(&g->finished, true);
	return NULL;
}

static void test_durable_then_discard_then_reuse(void **state)
{
	struct discard_q *q;
	struct alloc *a;
	struct rec r;
	uint64_t blk, got, total = 0;
	struct getter g = { 0 };
	pthread_t t;

	rec_init(&r);
	assert_int_equal(alloc_create(0, 64, 0, &a), 0);
	r.a = a;
	assert_int_equal(discard_q_create(&rec_ops, &r, 0, &q), 0);
	alloc_set_discard(a, hook, q);
	while (total < 64) {
		assert_int_equal(alloc_get(a, 64, 0, ALLOC_DATA, &blk, &got), 0);
		total += got;
	}

	/* Freed by metadata with sequence 5: nothing happens before 5 is durable. */
	assert_int_equal(alloc_defer(a, 8, 4, 5), 0);
	alloc_release_durable(a, 4);
	discard_q_flush(q);
	assert_int_equal(r.nissued, 0);
	assert_int_equal(alloc_refs(a, 8), 1);

	/* Durable: the discard goes out while the blocks are still used. */
	pthread_mutex_lock(&r.mu);
	r.gate = true;
	pthread_mutex_unlock(&r.mu);
	alloc_release_durable(a, 5);
	pthread_mutex_lock(&r.mu);
	while (!r.nissued)
		pthread_cond_wait(&r.cv, &r.mu);
	pthread_mutex_unlock(&r.mu);
	assert_int_equal(r.issued[0].blk, 8);
	assert_int_equal(r.issued[0].n, 4);
	assert_int_equal(r.issued[0].refs, 1);
	assert_int_equal(alloc_held_blocks(a), 4);
	assert_int_equal(alloc_free_blocks(a), 4);	/* held blocks count as free */

	/* An allocation now waits for the discard instead of taking (and
	 * writing) a block being discarded, or failing with ENOSPC. */
	g.a = a;
	g.r = &r;
	assert_int_equal(pthread_create(&t, NULL, get_main, &g), 0);
	usleep(50 * 1000);
	assert_false(atomic_load(&g.finished));
	pthread_mutex_lock(&r.mu);
	r.gate = false;
	pthread_cond_broadcast(&r.cv);
	pthread_mutex_unlock(&r.mu);
	pthread_join(t, NULL);
	assert_int_equal(g.ret, 0);
	assert_true(g.blk >= 8 && g.blk < 12);
	assert_true(r.issue_seq < r.alloc_seq);
	assert_int_equal(alloc_held_blocks(a), 0);

	/* A shared block: dropping one of two references discards nothing. */
	assert_int_equal(alloc_use(a, 20, 1), 0);
	assert_int_equal(alloc_defer(a, 20, 1, 6), 0);
	alloc_release_durable(a, 6);
	discard_q_flush(q);
	assert_int_equal(r.nissued, 1);
	assert_int_equal(alloc_refs(a, 20), 1);

	discard_q_destroy(q, true);
	assert_int_equal(alloc_errors(a), 0);
	alloc_destroy(a);
}

static void test_trim_hold(void **state)
{
	struct alloc *a;
	uint64_t blk, n, b2, g2;

	assert_int_equal(alloc_create(100, 200, 20, &a), 0);
	assert_int_equal(alloc_use(a, 100, 10), 0);
	assert_int_equal(alloc_use(a, 115, 65), 0);
	/* free: [110,115) in the data area and the whole reserve [180,200) */
	assert_int_equal(alloc_hold_free(a, 0, 3, &blk, &n), 0);
	assert_int_equal(blk, 110);
	assert_int_equal(n, 3);
	assert_int_equal(alloc_refs(a, 110), 1);
	assert_int_equal(alloc_hold_free(a, blk + n, 100, &b2, &g2), 0);
	assert_int_equal(b2, 113);
	assert_int_equal(g2, 2);
	alloc_unhold(a, b2, g2);
	assert_int_equal(alloc_hold_free(a, 115, 100, &b2, &g2), 0);
	assert_int_equal(b2, 180);
	assert_int_equal(g2, 20);
	alloc_unhold(a, b2, g2);
	assert_int_equal(alloc_hold_free(a, 200, 100, &b2, &g2), -ENOENT);
	/* the held run is not handed out */
	assert_int_equal(alloc_get(a, 5, 0, ALLOC_DATA, &b2, &g2), 0);
	assert_true(b2 >= 113 && b2 + g2 <= 115);
	alloc_unhold(a, blk, n);
	assert_int_equal(alloc_refs(a, 110), 0);
	assert_int_equal(alloc_held_blocks(a), 0);
	assert_int_equal(alloc_errors(a), 0);
	alloc_destroy(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_batch_merge),
		cmocka_unit_test(test_teardown),
		cmocka_unit_test(test_durable_then_discard_then_reuse),
		cmocka_unit_test(test_trim_hold),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
