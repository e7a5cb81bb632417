// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: extent map: set/get/clear with drop runs, sparse far blocks, next data/hole, walk runs, small-file leaf, random model check, parallel writers. */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "extent.h"

#define U EXTENT_UNWRITTEN

/* Records every drop call. */
struct drops {
	unsigned n;
	uint64_t phys[64], len[64];
	uint64_t total;
};

static void rec_drop(void *ctx, uint64_t phys, uint64_t n)
{
	struct drops *d = ctx;
	if (d->n < 64) {
		d->phys[d->n] = phys;
		d->len[d->n] = n;
	}
	d->n++;
	d->total += n;
}

static void test_set_get(void **state)
{
	struct extent_map m;
	struct extent_ent e;
	unsigned char buf[10 * 8 + 1];

	extent_init(&m);
	/* csums at an odd address, as inside a log record. */
	for (uint64_t i = 0; i < 10; i++) {
		uint64_t c = 0xabc0000 + i;
		memcpy(buf + 1 + i * 8, &c, 8);
	}
	assert_int_equal(extent_set(&m, 100, 10, 5000, buf + 1, NULL, NULL), 0);
	assert_int_equal(extent_mapped(&m), 10);
	for (uint64_t i = 0; i < 10; i++) {
		extent_get(&m, 100 + i, &e);
		assert_int_equal(e.phys, 5000 + i);
		assert_int_equal(e.csum, 0xabc0000 + i);
	}
	extent_get(&m, 99, &e);
	assert_int_equal(e.phys, 0);
	extent_get(&m, 110, &e);
	assert_int_equal(e.phys, 0);
	extent_get(&m, 1ull << 30, &e);
	assert_int_equal(e.phys, 0);
	extent_get(&m, EXTENT_MAX_FBLK + 5, &e);
	assert_int_equal(e.phys, 0);

	assert_int_equal(extent_set(&m, EXTENT_MAX_FBLK - 1, 2, 1, NULL, NULL, NULL), -EFBIG);
	assert_int_equal(extent_set(&m, 1, 1, 0, NULL, NULL, NULL), -EINVAL);
	assert_int_equal(extent_set(&m, 1, 0, 7, NULL, NULL, NULL), 0);
	assert_int_equal(extent_set(&m, EXTENT_MAX_FBLK - 1, 1, 77, NULL, NULL, NULL), 0);
	extent_get(&m, EXTENT_MAX_FBLK - 1, &e);
	assert_int_equal(e.phys, 77);
	assert_int_equal(e.csum, 0);
	assert_int_equal(extent_mapped(&m), 11);

	/* The fallible lookup: 0 for a mapped block, -ENOENT and a zeroed
	 * entry for a hole (inside a leaf, in no leaf, past the end). */
	assert_int_equal(extent_lookup(&m, 105, &e), 0);
	assert_int_equal(e.phys, 5005);
	assert_int_equal(e.csum, 0xabc0005);
	e.phys = e.csum = 9;
	assert_int_equal(extent_lookup(&m, 110, &e), -ENOENT);
	assert_int_equal(e.phys, 0);
	assert_int_equal(e.csum, 0);
	assert_int_equal(extent_lookup(&m, 1ull << 30, &e), -ENOENT);
	assert_int_equal(extent_lookup(&m, EXTENT_MAX_FBLK + 5, &e), -ENOENT);
	assert_int_equal(extent_lookup(&m, EXTENT_MAX_FBLK - 1, &e), 0);

	struct drops d = { 0 };
	extent_destroy(&m, rec_drop, &d);
	assert_int_equal(d.total, 11);
	assert_int_equal(d.n, 2);
	assert_int_equal(d.phys[0], 5000);
	assert_int_equal(d.len[0], 10);
	assert_int_equal(d.phys[1], 77);
	assert_int_equal(extent_mapped(&m), 0);
	assert_null(m.root);
}

static void test_overwrite_drop(void **state)
{
	struct extent_map m;
	struct extent_ent e;
	struct drops d = { 0 };

	extent_init(&m);
	assert_int_equal(extent_set(&m, 100, 10, 5000, NULL, rec_drop, &d), 0);
	assert_int_equal(d.n, 0);
	assert_int_equal(extent_set(&m, 105, 10, 9000, NULL, rec_drop, &d), 0);
	assert_int_equal(d.n, 1);
	assert_int_equal(d.phys[0], 5005);
	assert_int_equal(d.len[0], 5);
	assert_int_equal(extent_mapped(&m), 15);

	/* Non-consecutive old blocks give separate drops, in file order. */
	memset(&d, 0, sizeof(d));
	e.phys = 50;
	e.csum = 1;
	assert_int_equal(extent_set1(&m, 200, &e, rec_drop, &d), 0);
	e.phys = 60;
	assert_int_equal(extent_set1(&m, 201, &e, rec_drop, &d), 0);
	e.phys = 61;
	assert_int_equal(extent_set1(&m, 202, &e, rec_drop, &d), 0);
	assert_int_equal(d.n, 0);
	assert_int_equal(extent_set(&m, 199, 5, 700, NULL, rec_drop, &d), 0);
	assert_int_equal(d.n, 2);
	assert_int_equal(d.phys[0], 50);
	assert_int_equal(d.len[0], 1);
	assert_int_equal(d.phys[1], 60);
	assert_int_equal(d.len[1], 2);
	assert_int_equal(extent_mapped(&m), 20);

	/* Unwritten: the flag is stripped for drop; same block written in place is not dropped. */
	memset(&d, 0, sizeof(d));
	assert_int_equal(extent_set(&m, 300, 4, U | 400, NULL, rec_drop, &d), 0);
	extent_get(&m, 301, &e);
	assert_int_equal(e.phys, U | 401);
	uint64_t cs[2] = { 11, 12 };
	assert_int_equal(extent_set(&m, 301, 2, 401, cs, rec_drop, &d), 0);
	assert_int_equal(d.n, 0);
	extent_get(&m, 302, &e);
	assert_int_equal(e.phys, 402);
	assert_int_equal(e.csum, 12);
	assert_int_equal(extent_set(&m, 300, 4, 800, NULL, rec_drop, &d), 0);
	assert_int_equal(d.n, 1);
	assert_int_equal(d.phys[0], 400);
	assert_int_equal(d.len[0], 4);
	assert_int_equal(extent_mapped(&m), 24);

	/* set1 with phys 0 punches a hole. */
	memset(&d, 0, sizeof(d));
	e.phys = 0;
	assert_int_equal(extent_set1(&m, 300, &e, rec_drop, &d), 0);
	assert_int_equal(d.n, 1);
	assert_int_equal(d.phys[0], 800);
	assert_int_equal(extent_mapped(&m), 23);

	/* Partial clear. */
	memset(&d, 0, sizeof(d));
	extent_clear(&m, 102, 5, rec_drop, &d);
	assert_int_equal(d.n, 2);
	assert_int_equal(d.phys[0], 5002);
	assert_int_equal(d.len[0], 3);
	assert_int_equal(d.phys[1], 9000);
	assert_int_equal(d.len[1], 2);
	assert_int_equal(extent_mapped(&m), 18);
	extent_get(&m, 101, &e);
	assert_int_equal(e.phys, 5001);
	extent_get(&m, 104, &e);
	assert_int_equal(e.phys, 0);
	extent_get(&m, 107, &e);
	assert_int_equal(e.phys, 9002);
	extent_destroy(&m, NULL, NULL);
}

static void test_clear_sparse(void **state)
{
	struct extent_map m;
	struct drops d = { 0 };
	const uint64_t far = 1ull << 35, tib200 = 200ull << 28;
	struct extent_ent e;

	extent_init(&m);
	assert_int_equal(extent_set(&m, 0, 4, 10, NULL, NULL, NULL), 0);
	assert_int_equal(extent_set(&m, far, 1, 20, NULL, NULL, NULL), 0);
	assert_int_equal(extent_set(&m, tib200, 1, 30, NULL, NULL, NULL), 0);
	assert_int_equal(extent_mapped(&m), 6);
	assert_int_equal(extent_next_data(&m, 4), far);
	assert_int_equal(extent_next_data(&m, far + 1), tib200);
	assert_int_equal(extent_next_data(&m, tib200 + 1), EXTENT_MAX_FBLK);

	/* Truncate to 4 blocks: huge n, absent subtrees skipped. */
	extent_clear(&m, 4, EXTENT_MAX_FBLK, rec_drop, &d);
	assert_int_equal(d.n, 2);
	assert_int_equal(d.phys[0], 20);
	assert_int_equal(d.phys[1], 30);
	assert_int_equal(extent_mapped(&m), 4);
	extent_get(&m, 3, &e);
	assert_int_equal(e.phys, 13);
	extent_get(&m, far, &e);
	assert_int_equal(e.phys, 0);
	assert_int_equal(extent_next_data(&m, 4), EXTENT_MAX_FBLK);

	/* Truncate to 0 with n beyond the map: everything goes, tree freed. */
	memset(&d, 0, sizeof(d));
	extent_clear(&m, 0, UINT64_MAX, rec_drop, &d);
	assert_int_equal(d.total, 4);
	assert_int_equal(extent_mapped(&m), 0);
	assert_null(m.root);
	extent_clear(&m, 0, UINT64_MAX, rec_drop, &d);
	extent_clear(&m, EXTENT_MAX_FBLK, 10, rec_drop, &d);
	assert_int_equal(d.total, 4);

	/* Many far-apart single blocks, cleared in one call. */
	for (uint64_t i = 0; i < 2000; i++)
		assert_int_equal(extent_set(&m, i * 33554467ull, 1, 1000 + i, NULL, NULL, NULL), 0);
	memset(&d, 0, sizeof(d));
	extent_clear(&m, 0, EXTENT_MAX_FBLK, rec_drop, &d);
	assert_int_equal(d.total, 2000);
	assert_int_equal(d.n, 1);	/* consecutive phys in file order coalesce */
	assert_null(m.root);
	extent_destroy(&m, NULL, NULL);
}

static void test_next(void **state)
{
	struct extent_map m;

	extent_init(&m);
	assert_int_equal(extent_next_data(&m, 0), EXTENT_MAX_FBLK);
	assert_int_equal(extent_next_hole(&m, 0), 0);
	assert_int_equal(extent_next_hole(&m, 12345), 12345);
	assert_int_equal(extent_set(&m, 10, 1014, 100, NULL, NULL, NULL), 0);	/* [10,1024) */
	assert_int_equal(extent_set(&m, 5000, 3, U | 7, NULL, NULL, NULL), 0);
	assert_int_equal(extent_next_data(&m, 0), 10);
	assert_int_equal(extent_next_data(&m, 10), 10);
	assert_int_equal(extent_next_data(&m, 600), 600);
	assert_int_equal(extent_next_data(&m, 1024), 5000);
	assert_int_equal(extent_next_data(&m, 5003), EXTENT_MAX_FBLK);
	assert_int_equal(extent_next_hole(&m, 0), 0);
	assert_int_equal(extent_next_hole(&m, 10), 1024);
	assert_int_equal(extent_next_hole(&m, 511), 1024);
	assert_int_equal(extent_next_hole(&m, 5001), 5003);
	assert_int_equal(extent_next_hole(&m, EXTENT_MAX_FBLK), EXTENT_MAX_FBLK);
	/* A full leaf followed by a missing one: the hole is at the leaf boundary. */
	extent_clear(&m, 0, 10, NULL, NULL);
	assert_int_equal(extent_set(&m, 0, 10, 50, NULL, NULL, NULL), 0);
	assert_int_equal(extent_next_hole(&m, 0), 1024);
	extent_destroy(&m, NULL, NULL);
}

struct runs {
	unsigned n;
	uint64_t f[32], p[32], len[32];
	int stop_at;
};

static int rec_run(void *ctx, uint64_t fblk, uint64_t phys, uint32_t n,
		   const struct extent_ent *ents)
{
	struct runs *r = ctx;
	/* ents must be the n entries themselves. */
	for (uint32_t i = 0; i < n; i++)
		if (ents[i].phys != phys + i || ents[i].csum != (fblk + i) * 3)
			return -1000;
	if (r->n < 32) {
		r->f[r->n] = fblk;
		r->p[r->n] = phys;
		r->len[r->n] = n;
	}
	r->n++;
	return r->stop_at && (int)r->n == r->stop_at ? 42 : 0;
}

static void set_cs(struct extent_map *m, uint64_t f, uint32_t n, uint64_t p)
{
	uint64_t cs[1024];
	assert_true(n <= 1024);
	for (uint32_t i = 0; i < n; i++)
		cs[i] = (f + i) * 3;
	assert_int_equal(extent_set(m, f, n, p, cs, NULL, NULL), 0);
}

static void test_walk(void **state)
{
	struct extent_map m;
	struct runs r = { 0 };

	extent_init(&m);
	set_cs(&m, 0, 10, 100);
	set_cs(&m, 10, 10, 110);	/* continues the run */
	set_cs(&m, 20, 5, 130);		/* phys gap */
	set_cs(&m, 25, 5, U | 135);	/* phys consecutive but unwritten */
	set_cs(&m, 30, 5, U | 140);	/* continues it, across the tiny leaf's end */
	set_cs(&m, 36, 2, 141);		/* file gap */
	set_cs(&m, 500, 30, 1000);	/* crosses the leaf boundary at 512 */
	set_cs(&m, 1ull << 33, 1, 9);
	assert_int_equal(extent_walk(&m, 0, EXTENT_MAX_FBLK, rec_run, &r), 0);
	uint64_t ef[] = { 0, 20, 25, 32, 36, 500, 512, 1ull << 33 };
	uint64_t ep[] = { 100, 130, U | 135, U | 142, 141, 1000, 1012, 9 };
	uint64_t el[] = { 20, 5, 7, 3, 2, 12, 18, 1 };
	assert_int_equal(r.n, 8);
	for (unsigned i = 0; i < 8; i++) {
		assert_int_equal(r.f[i], ef[i]);
		assert_int_equal(r.p[i], ep[i]);
		assert_int_equal(r.len[i], el[i]);
	}

	/* Sub-range walks cut runs at the edges. */
	memset(&r, 0, sizeof(r));
	assert_int_equal(extent_walk(&m, 5, 22, rec_run, &r), 0);
	assert_int_equal(r.n, 2);
	assert_int_equal(r.f[0], 5);
	assert_int_equal(r.p[0], 105);
	assert_int_equal(r.len[0], 15);
	assert_int_equal(r.f[1], 20);
	assert_int_equal(r.len[1], 2);
	memset(&r, 0, sizeof(r));
	assert_int_equal(extent_walk(&m, 40, 500, rec_run, &r), 0);
	assert_int_equal(r.n, 0);
	assert_int_equal(extent_walk(&m, 10, 10, rec_run, &r), 0);
	assert_int_equal(r.n, 0);

	/* A nonzero return stops the walk and is returned. */
	memset(&r, 0, sizeof(r));
	r.stop_at = 3;
	assert_int_equal(extent_walk(&m, 0, EXTENT_MAX_FBLK, rec_run, &r), 42);
	assert_int_equal(r.n, 3);
	extent_destroy(&m, NULL, NULL);
}

/*
 * A small file's map is one small leaf: tar -x of small files paid 20 KiB
 * per file for a low-tree path (three interior nodes and a leaf), and
 * allocating and first touching that memory was a third of the daemon's
 * CPU time.  Files of 32 blocks and below now cost one 512-byte leaf; the
 * trees come only with blocks past that.
 */
static void test_small_file_memory(void **state)
{
	struct extent_map m[64];
	size_t before = mallinfo2().uordblks;

	for (unsigned i = 0; i < 64; i++) {
		extent_init(&m[i]);
		set_cs(&m[i], 0, 15, 1000 + i * 100);
		set_cs(&m[i], 31, 1, 9000 + i);
	}
	/* 1 KiB per file leaves room for the allocator's headers. */
	assert_true(mallinfo2().uordblks - before <= 64 * 1024);
	assert_null(m[0].root);

	/* Past the tiny leaf: both, and a run split at its end. */
	struct runs r = { 0 };
	set_cs(&m[0], 31, 3, 500);
	assert_non_null(m[0].root);
	assert_int_equal(extent_mapped(&m[0]), 18);
	assert_int_equal(extent_walk(&m[0], 0, EXTENT_MAX_FBLK, rec_run, &r), 0);
	assert_int_equal(r.n, 3);
	assert_int_equal(r.f[1], 31);
	assert_int_equal(r.len[1], 1);
	assert_int_equal(r.f[2], 32);
	assert_int_equal(r.p[2], 501);
	assert_int_equal(r.len[2], 2);
	assert_int_equal(extent_next_hole(&m[0], 0), 15);
	assert_int_equal(extent_next_hole(&m[0], 31), 34);
	assert_int_equal(extent_next_data(&m[0], 15), 31);

	/* A clear from inside the tiny leaf to the end frees the low tree
	 * too, and the whole clear frees the leaf. */
	struct drops d = { 0 };
	extent_clear(&m[0], 20, EXTENT_MAX_FBLK, rec_drop, &d);
	assert_null(m[0].root);
	assert_non_null(m[0].tiny);
	assert_int_equal(d.total, 3);
	assert_int_equal(extent_mapped(&m[0]), 15);
	for (unsigned i = 0; i < 64; i++) {
		extent_clear(&m[i], 0, EXTENT_MAX_FBLK, NULL, NULL);
		assert_null(m[i].tiny);
		assert_int_equal(extent_mapped(&m[i]), 0);
	}
}

/* ---- randomized model check ---- */

/* Offsets the kernel lets through a FUSE mount: 2^49, 2^50, 2^62 and the
 * last block below 2^63 (byte offsets; block = offset / 4096). */
static void test_top_of_range(void **state)
{
	const uint64_t f49 = 1ull << 37, f50 = 1ull << 38, f62 = 1ull << 50;
	const uint64_t last = EXTENT_MAX_FBLK - 1, low = EXTENT_LOW_FBLK;
	struct extent_map m;
	struct drops d = { 0 };
	struct extent_ent e;
	uint64_t cs[4];
	const uint64_t far[4] = { f49, f50, f62, last };
	const uint64_t farp[4] = { 200, 300, 400, U | 500 };

	assert_true(EXTENT_MAX_FBLK * 4096 - 1 == (uint64_t)INT64_MAX);
	extent_init(&m);
	/* A run across the boundary of the two trees; csums as rec_run wants. */
	for (uint64_t i = 0; i < 4; i++)
		cs[i] = (low - 2 + i) * 3;
	assert_int_equal(extent_set(&m, low - 2, 4, 100, cs, NULL, NULL), 0);
	for (int i = 0; i < 4; i++) {
		e.phys = farp[i];
		e.csum = far[i] * 3;
		assert_int_equal(extent_set1(&m, far[i], &e, NULL, NULL), 0);
	}
	assert_int_equal(extent_set(&m, last, 2, 600, NULL, NULL, NULL), -EFBIG);
	assert_int_equal(extent_set(&m, EXTENT_MAX_FBLK, 1, 600, NULL, NULL, NULL), -EFBIG);
	assert_int_equal(extent_mapped(&m), 8);
	for (uint64_t i = 0; i < 4; i++) {
		extent_get(&m, low - 2 + i, &e);
		assert_int_equal(e.phys, 100 + i);
		assert_int_equal(e.csum, (low - 2 + i) * 3);
	}
	extent_get(&m, f62, &e);
	assert_int_equal(e.phys, 400);
	extent_get(&m, last, &e);
	assert_int_equal(e.phys, U | 500);
	extent_get(&m, f62 + 1, &e);
	assert_int_equal(e.phys, 0);

	assert_int_equal(extent_next_data(&m, 0), low - 2);
	assert_int_equal(extent_next_data(&m, low + 2), f49);
	assert_int_equal(extent_next_data(&m, f49 + 1), f50);
	assert_int_equal(extent_next_data(&m, f50 + 1), f62);
	assert_int_equal(extent_next_data(&m, f62 + 1), last);
	assert_int_equal(extent_next_data(&m, last + 1), EXTENT_MAX_FBLK);
	assert_int_equal(extent_next_hole(&m, low - 2), low + 2);
	assert_int_equal(extent_next_hole(&m, f62), f62 + 1);
	assert_int_equal(extent_next_hole(&m, last), EXTENT_MAX_FBLK);

	/* The walk sees both trees in file order; a run splits at the
	 * boundary (a leaf boundary). */
	struct runs r = { 0 };
	assert_int_equal(extent_walk(&m, 0, EXTENT_MAX_FBLK, rec_run, &r), 0);
	assert_int_equal(r.n, 6);
	assert_int_equal(r.f[0], low - 2);
	assert_int_equal(r.len[0], 2);
	assert_int_equal(r.f[1], low);
	assert_int_equal(r.p[1], 102);
	assert_int_equal(r.f[4], f62);
	assert_int_equal(r.f[5], last);
	assert_int_equal(r.p[5], U | 500);

	/* Truncate to 2^50 bytes + 1 block: the last two go, 2^49 and 2^50 stay. */
	extent_clear(&m, f50 + 1, EXTENT_MAX_FBLK, rec_drop, &d);
	assert_int_equal(d.total, 2);
	assert_int_equal(d.phys[0], 400);
	assert_int_equal(d.phys[1], 500);	/* dropped without the unwritten flag */
	assert_int_equal(extent_next_data(&m, f49 + 1), f50);
	assert_int_equal(extent_next_data(&m, f50 + 1), EXTENT_MAX_FBLK);
	assert_non_null(m.high);
	/* Truncate below the boundary: the high tree is freed whole. */
	memset(&d, 0, sizeof(d));
	extent_clear(&m, low - 1, EXTENT_MAX_FBLK, rec_drop, &d);
	assert_int_equal(d.total, 5);
	assert_null(m.high);
	assert_int_equal(extent_mapped(&m), 1);
	extent_destroy(&m, rec_drop, &d);
	assert_int_equal(d.total, 6);
	assert_null(m.root);
	assert_null(m.high);
}

#define RANGE 65536u
#define NOPS 100000u

/* First file block the model covers: at 0, across the boundary of the
 * shallow tree, and at the very top of the range. */
static uint64_t mbase;

struct model {
	uint64_t phys[RANGE], csum[RANGE];
	uint8_t *dropped;	/* per issued phys */
	uint64_t nphys;
	uint64_t bad, drops;
};

static void model_drop(void *ctx, uint64_t phys, uint64_t n)
{
	struct model *md = ctx;
	for (uint64_t i = 0; i < n; i++) {
		uint64_t p = phys + i;
		if ((phys & U) || p >= md->nphys || md->dropped[p])
			md->bad++;
		else
			md->dropped[p] = 1;
	}
	md->drops += n;
}

static uint64_t model_expect_drop(struct model *md, uint64_t f, uint64_t newp)
{
	uint64_t old = md->phys[f];
	return old && EXTENT_PHYS(old) != EXTENT_PHYS(newp);
}

static int model_walk_cb(void *ctx, uint64_t fblk, uint64_t phys, uint32_t n,
			 const struct extent_ent *ents)
{
	struct model *md = ctx;
	if (fblk < mbase || fblk - mbase + n > RANGE || !n)
		return 1;
	fblk -= mbase;
	for (uint32_t i = 0; i < n; i++) {
		if (md->phys[fblk + i] != phys + i || ents[i].csum != md->csum[fblk + i])
			return 2;
		md->phys[fblk + i] |= 1ull << 62;	/* visited mark, removed below */
	}
	/* Maximality within a leaf: the previous entry must not continue this run. */
	if (fblk % 512 && fblk + mbase != EXTENT_TINY_FBLK && md->phys[fblk - 1] && (md->phys[fblk - 1] & ~(1ull << 62)) + 1 == phys)
		return 3;
	return 0;
}

static void model_check(struct extent_map *m, struct model *md)
{
	uint64_t mapped = 0;
	struct extent_ent e;

	for (uint64_t f = 0; f < RANGE; f++) {
		extent_get(m, mbase + f, &e);
		assert_int_equal(e.phys, md->phys[f]);
		assert_int_equal(e.csum, md->phys[f] ? md->csum[f] : 0);
		mapped += md->phys[f] != 0;
	}
	assert_int_equal(extent_mapped(m), mapped);
	assert_int_equal(extent_walk(m, 0, EXTENT_MAX_FBLK, model_walk_cb, md), 0);
	for (uint64_t f = 0; f < RANGE; f++) {
		/* every mapped block visited exactly by the walk */
		assert_true(!md->phys[f] || (md->phys[f] & (1ull << 62)));
		md->phys[f] &= ~(1ull << 62);
	}
}

static void run_model(uint64_t base)
{
	struct model *md = calloc(1, sizeof(*md));
	struct extent_map m;
	unsigned seed = 12345;

	assert_non_null(md);
	md->dropped = calloc(NOPS * 64 + 16, 1);
	assert_non_null(md->dropped);
	md->nphys = 1;	/* phys 0 is the hole */
	mbase = base;
	extent_init(&m);

	for (unsigned op = 0; op < NOPS; op++) {
		unsigned kind = (unsigned)rand_r(&seed) % 10;
		uint64_t f = (uint64_t)rand_r(&seed) % RANGE;
		uint64_t n = (uint64_t)rand_r(&seed) % 64 + 1, expect = 0, before = md->drops;
		if (f + n > RANGE)
			n = RANGE - f;

		if (kind < 6) {
			uint64_t p = md->nphys, cs[64];
			uint64_t flag = rand_r(&seed) % 4 == 0 ? U : 0;
			md->nphys += n;
			for (uint64_t i = 0; i < n; i++) {
				cs[i] = (uint64_t)rand_r(&seed) << 20 | i;
				expect += model_expect_drop(md, f + i, p + i);
				md->phys[f + i] = flag | (p + i);
				md->csum[f + i] = cs[i];
			}
			assert_int_equal(extent_set(&m, base + f, (uint32_t)n, flag | p, cs,
						    model_drop, md), 0);
		} else if (kind < 8) {
			/* Write an unwritten block in place, or clear the flag on a written one. */
			struct extent_ent e = { md->phys[f] & ~U, 99 };
			if (!e.phys)
				continue;
			md->phys[f] = e.phys;
			md->csum[f] = 99;
			assert_int_equal(extent_set1(&m, base + f, &e, model_drop, md), 0);
		} else {
			if (kind == 9 && op % 50 == 0)
				n = RANGE - f;	/* truncate-like */
			for (uint64_t i = 0; i < n; i++) {
				expect += md->phys[f + i] != 0;
				md->phys[f + i] = 0;
				md->csum[f + i] = 0;
			}
			extent_clear(&m, base + f, kind == 9 && op % 50 == 0 ? EXTENT_MAX_FBLK : n,
				     model_drop, md);
		}
		assert_int_equal(md->drops - before, expect);
		assert_int_equal(md->bad, 0);

		if (op % 97 == 0) {
			uint64_t q = (uint64_t)rand_r(&seed) % RANGE, d = q, h = q;
			while (d < RANGE && !md->phys[d])
				d++;
			while (h < RANGE && md->phys[h])
				h++;
			assert_int_equal(extent_next_data(&m, base + q),
					 d < RANGE ? base + d : EXTENT_MAX_FBLK);
			assert_int_equal(extent_next_hole(&m, base + q), base + h);
		}
		if (op % 20000 == 19999)
			model_check(&m, md);
	}
	model_check(&m, md);

	/* Destroy drops everything still mapped: every issued block dropped exactly once. */
	extent_destroy(&m, model_drop, md);
	assert_int_equal(md->bad, 0);
	for (uint64_t p = 1; p < md->nphys; p++)
		assert_int_equal(md->dropped[p], 1);
	assert_null(m.root);
	assert_null(m.high);
	free(md->dropped);
	free(md);
}

static void test_random_model(void **state)
{
	run_model(0);
}

/* The same model across the boundary between the two trees... */
static void test_random_model_boundary(void **state)
{
	run_model(EXTENT_LOW_FBLK - RANGE / 2);
}

/* ...and against the last block a file can have (offset 2^63 - 1). */
static void test_random_model_top(void **state)
{
	run_model(EXTENT_MAX_FBLK - RANGE);
}

/* ---- parallel writers on disjoint, interleaved ranges ---- */

#define PTHREADS 4
#define PSTRIPE 7
#define PBLOCKS 40000u
/* Areas far apart so threads race to install interior nodes at every level. */
static const uint64_t parea[] = { 0, 1ull << 27, 3ull << 27, (1ull << 35) + 999 };

struct pshared {
	struct extent_map m;
	_Atomic uint64_t dropped;
	_Atomic int errors;
};

struct parg {
	struct pshared *sh;
	unsigned id;
};

static void par_drop(void *ctx, uint64_t phys, uint64_t n)
{
	struct pshared *sh = ctx;
	atomic_fetch_add(&sh->dropped, n);
}

static void *par_writer(void *p)
{
	struct parg *pa = p;
	struct pshared *sh = pa->sh;

	for (int pass = 0; pass < 2; pass++) {
		for (unsigned a = 0; a < sizeof(parea) / sizeof(parea[0]); a++) {
			for (uint64_t off = pa->id * PSTRIPE; off < PBLOCKS; off += PTHREADS * PSTRIPE) {
				uint64_t cs[PSTRIPE], f = parea[a] + off;
				uint32_t n = PBLOCKS - off < PSTRIPE ? (uint32_t)(PBLOCKS - off) : PSTRIPE;
				for (uint32_t i = 0; i < n; i++)
					cs[i] = f + i;
				uint64_t phys = (uint64_t)pass << 40 | (a << 30) | (off + 1);
				if (extent_set(&sh->m, f, n, phys, cs, par_drop, sh))
					atomic_fetch_add(&sh->errors, 1);
			}
		}
	}
	return NULL;
}

static void test_parallel(void **state)
{
	struct pshared *sh = calloc(1, sizeof(*sh));
	pthread_t th[PTHREADS];
	struct parg pa[PTHREADS];
	const unsigned nareas = sizeof(parea) / sizeof(parea[0]);

	assert_non_null(sh);
	extent_init(&sh->m);
	for (unsigned i = 0; i < PTHREADS; i++) {
		pa[i].sh = sh;
		pa[i].id = i;
		assert_int_equal(pthread_create(&th[i], NULL, par_writer, &pa[i]), 0);
	}
	for (unsigned i = 0; i < PTHREADS; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(atomic_load(&sh->errors), 0);
	assert_int_equal(extent_mapped(&sh->m), (uint64_t)nareas * PBLOCKS);
	/* The second pass replaced every first-pass block exactly once. */
	assert_int_equal(atomic_load(&sh->dropped), (uint64_t)nareas * PBLOCKS);
	for (unsigned a = 0; a < nareas; a++) {
		for (uint64_t off = 0; off < PBLOCKS; off++) {
			struct extent_ent e;
			extent_get(&sh->m, parea[a] + off, &e);
			assert_int_equal(e.phys, 1ull << 40 | ((uint64_t)a << 30) | (off + 1));
			assert_int_equal(e.csum, parea[a] + off);
		}
		assert_int_equal(extent_next_hole(&sh->m, parea[a]), parea[a] + PBLOCKS);
	}
	atomic_store(&sh->dropped, 0);
	extent_destroy(&sh->m, par_drop, sh);
	assert_int_equal(atomic_load(&sh->dropped), (uint64_t)nareas * PBLOCKS);
	free(sh);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_set_get),
		cmocka_unit_test(test_overwrite_drop),
		cmocka_unit_test(test_clear_sparse),
		cmocka_unit_test(test_next),
		cmocka_unit_test(test_walk),
		cmocka_unit_test(test_small_file_memory),
		cmocka_unit_test(test_random_model),
		cmocka_unit_test(test_random_model_boundary),
		cmocka_unit_test(test_random_model_top),
		cmocka_unit_test(test_top_of_range),
		cmocka_unit_test(test_parallel),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
