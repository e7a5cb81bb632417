// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: the bounce pool hands out distinct 4096-aligned buffers, exactly count of them, and bounce_get blocks until a put; kept buffers are served first, the others' pages are given back after a burst. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "bounce.h"

static void test_alignment_and_count(void **state)
{
	static const size_t sizes[] = { 1, 4096, 5000, 65536 };
	size_t s;

	for (s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		struct bounce_pool *p;
		void *bufs[16];
		size_t len, bsz;
		char *base;
		unsigned i, j;

		assert_int_equal(bounce_pool_create(sizes[s], 16, &p), 0);
		bsz = bounce_buf_size(p);
		assert_true(bsz >= sizes[s]);
		assert_int_equal(bsz % 4096, 0);
		base = bounce_base(p, &len);
		assert_int_equal(len, bsz * 16);
		for (i = 0; i < 16; i++) {
			bufs[i] = bounce_tryget(p);
			assert_non_null(bufs[i]);
			assert_int_equal((uintptr_t)bufs[i] % 4096, 0);
			assert_true((char *)bufs[i] >= base);
			assert_true((char *)bufs[i] + bsz <= base + len);
			memset(bufs[i], (int)i, bsz);	/* must be writable */
			for (j = 0; j < i; j++)
				assert_ptr_not_equal(bufs[i], bufs[j]);
		}
		/* Exactly count buffers. */
		assert_null(bounce_tryget(p));
		bounce_put(p, bufs[3]);
		assert_ptr_equal(bounce_tryget(p), bufs[3]);
		for (i = 0; i < 16; i++)
			bounce_put(p, bufs[i]);
		bounce_pool_destroy(p);
	}
}

static void test_create_rejects(void **state)
{
	struct bounce_pool *p;

	assert_int_equal(bounce_pool_create(0, 4, &p), -EINVAL);
	assert_int_equal(bounce_pool_create(4096, 0, &p), -EINVAL);
}

struct putter {
	struct bounce_pool *p;
	void *buf;
	volatile int put_done;
};

static void *put_later(void *arg)
{
	struct putter *pt = arg;

	usleep(200 * 1000);
	pt->put_done = 1;
	__sync_synchronize();
	bounce_put(pt->p, pt->buf);
	return NULL;
}

static void test_get_waits_for_put(void **state)
{
	struct putter pt = { 0 };
	struct bounce_pool *p;
	struct timespec t0, t1;
	pthread_t th;
	void *a, *b, *got;
	double ms;

	assert_int_equal(bounce_pool_create(4096, 2, &p), 0);
	a = bounce_get(p);
	b = bounce_get(p);
	assert_non_null(a);
	assert_non_null(b);
	assert_null(bounce_tryget(p));

	pt.p = p;
	pt.buf = b;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(pthread_create(&th, NULL, put_later, &pt), 0);
	got = bounce_get(p);		/* must block until the put */
	clock_gettime(CLOCK_MONOTONIC, &t1);
	__sync_synchronize();
	assert_true(pt.put_done);
	assert_ptr_equal(got, b);
	ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
	assert_true(ms >= 150.0);
	pthread_join(th, NULL);

	bounce_put(p, a);
	bounce_put(p, got);
	bounce_pool_destroy(p);
}

/* Kept buffers are served first and keep their bytes; the others give
 * their pages back at the second trim after the burst that took them (the
 * first sees the burst as going on), and only once. */
static void test_keep_and_trim(void **state)
{
	struct bounce_pool *p;
	unsigned char *b[8];
	size_t bsz, klen;
	char *base;
	unsigned i;

	(void)state;
	assert_int_equal(bounce_pool_create(65536, 8, &p), 0);
	bounce_pool_keep(p, 2);
	bsz = bounce_buf_size(p);
	base = bounce_base(p, NULL);
	assert_ptr_equal(bounce_kept_base(p, &klen), base);
	assert_int_equal(klen, 2 * bsz);
	for (i = 0; i < 8; i++) {
		b[i] = bounce_get(p);
		/* The first two are the kept ones, at the mapping's start. */
		assert_int_equal((size_t)((char *)b[i] - base) / bsz < 2, i < 2);
		memset(b[i], 0xa5, bsz);
	}
	for (i = 0; i < 8; i++)
		bounce_put(p, b[i]);
	assert_int_equal(bounce_pool_trim(p), 0);
	assert_int_equal(bounce_pool_trim(p), 6);
	assert_int_equal(bounce_pool_trim(p), 0);
	assert_int_equal(bounce_trimmed(p), 6);
	for (i = 0; i < 8; i++)
		assert_int_equal(b[i][bsz - 1], i < 2 ? 0xa5 : 0);
	/* A burst in progress at a trim keeps its buffers. */
	b[0] = bounce_get(p);
	b[1] = bounce_get(p);
	b[2] = bounce_get(p);
	assert_true((size_t)((char *)b[2] - base) / bsz >= 2);
	b[2][0] = 1;
	bounce_put(p, b[2]);
	assert_int_equal(bounce_pool_trim(p), 0);
	b[2] = bounce_get(p);
	bounce_put(p, b[2]);
	assert_int_equal(bounce_pool_trim(p), 0);
	assert_int_equal(b[2][0], 1);
	assert_int_equal(bounce_pool_trim(p), 1);
	bounce_put(p, b[0]);
	bounce_put(p, b[1]);
	bounce_pool_destroy(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_alignment_and_count),
		cmocka_unit_test(test_create_rejects),
		cmocka_unit_test(test_get_waits_for_put),
		cmocka_unit_test(test_keep_and_trim),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
