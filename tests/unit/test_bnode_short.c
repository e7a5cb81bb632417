// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: short nodes (format v2, SUPER_INCOMPAT_V2_SHORT_NODES): a node seals with nb, the fewest 4 KiB blocks holding its heads and values; its folded image verifies with the csum over those blocks only (bytes past them are ignored), unfolds back to the node byte for byte; a flipped byte inside nb, a wrong or non-minimal nb, a nonzero byte between the parts and a whole node in a short format (or the reverse) are all refused; the csum of the node in memory is the folded image's. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bnode.h"
#include "csum.h"

static const uint8_t uuid[16] = { 1, 2, 3 };

#define ADDR 4096u
#define GEN 7u

/* A leaf with @n items of @vlen bytes each. */
static void leaf(uint8_t *n, unsigned items, unsigned vlen)
{
	uint8_t v[BNODE_MAX_VAL];

	bnode_init(n, 0, ADDR, GEN, 1, uuid);
	for (unsigned i = 0; i < items; i++) {
		struct bkey k = { 10 + i, 1, i };

		memset(v, (int)(i + 1), vlen);
		bnode_leaf_insert(n, i, &k, v, vlen);
	}
}

static struct bptr ptr_of(uint64_t csum)
{
	return (struct bptr){ .addr = ADDR, .gen = GEN, .csum = csum };
}

/* The blocks the items take: nb is the fewest (1 for an empty node). */
static void test_nb_minimal(void **state)
{
	static const unsigned cases[][3] = {
		/* items, vlen, nb */
		{ 0, 0, 1 },	  { 1, 10, 1 },	    { 10, 300, 1 }, { 11, 300, 1 },
		{ 13, 300, 2 },	  { 40, 300, 4 },   { 20, 380, 2 }, { 30, 380, 3 },
	};
	uint8_t *n = NULL;

	(void)state;
	assert_int_equal(posix_memalign((void **)&n, 4096, BNODE_SIZE), 0);
	for (unsigned c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		unsigned used, nb;

		leaf(n, cases[c][0], cases[c][1]);
		used = BNODE_HDR + bnode_used(n);
		nb = (used + 4095) / 4096;
		assert_int_equal(bnode_fold_blocks(n), nb ? nb : 1);
		assert_int_equal(bnode_fold_blocks(n), cases[c][2]);
		bnode_seal_short(n);
		assert_int_equal(bnode_nb(n), cases[c][2]);
		assert_int_equal(bnode_check(n, NULL, 0), 0);
	}
	free(n);
}

/* Seal, fold, garbage past nb, verify, unfold: the same node. */
static void roundtrip(uint8_t *n, uint8_t *img)
{
	uint8_t *keep;
	struct bptr p;
	unsigned nb;

	assert_int_equal(posix_memalign((void **)&keep, 4096, BNODE_SIZE), 0);
	p = ptr_of(bnode_seal_short(n));
	assert_true(bnode_matches(n, &p));	/* the node in memory, folded on the fly */
	memcpy(keep, n, BNODE_SIZE);
	nb = bnode_fold(n, img);
	assert_int_equal(nb, bnode_nb(n));
	assert_int_equal(csum_buf(img + 8, nb * 4096 - 8, ADDR), p.csum);
	/* Bytes past nb blocks: another node's old copy, not this one's. */
	memset(img + nb * 4096, 0xa5, BNODE_SIZE - nb * 4096);
	assert_true(bnode_copy_matches(img, &p, true));
	assert_false(bnode_copy_matches(img, &p, false));
	bnode_unfold(img);
	assert_memory_equal(img, keep, BNODE_SIZE);
	assert_int_equal(bnode_check(img, NULL, 0), 0);
	free(keep);
}

static void test_roundtrip(void **state)
{
	uint8_t *n = NULL, *img = NULL;

	(void)state;
	assert_int_equal(posix_memalign((void **)&n, 4096, BNODE_SIZE), 0);
	assert_int_equal(posix_memalign((void **)&img, 4096, BNODE_SIZE), 0);
	for (unsigned items = 0; items < 60; items += 7) {
		leaf(n, items, 250);
		roundtrip(n, img);
	}
	/* An internal node: pointers only, no values. */
	bnode_init(n, 1, ADDR, GEN, 1, uuid);
	for (unsigned i = 0; i < 150; i++) {
		struct bkey k = { i, 0, 0 };
		struct bptr c = { 8192 + 4 * i, GEN, i, 0 };

		bnode_ptr_insert(n, i, &k, &c);
	}
	roundtrip(n, img);
	assert_int_equal(bnode_nb(n), 2);
	free(n);
	free(img);
}

/* Every byte inside the image counts; a wrong nb, a nonzero byte between
 * the parts (with a csum that matches it) and the other format fail. */
static void test_refused(void **state)
{
	uint8_t *n = NULL, *img = NULL;
	struct bptr p;
	unsigned nb;

	(void)state;
	assert_int_equal(posix_memalign((void **)&n, 4096, BNODE_SIZE), 0);
	assert_int_equal(posix_memalign((void **)&img, 4096, BNODE_SIZE), 0);
	leaf(n, 20, 300);		/* 96 + 20 * 320 = 6496 bytes: 2 blocks */
	p = ptr_of(bnode_seal_short(n));
	nb = bnode_fold(n, img);
	assert_int_equal(nb, 2);
	for (unsigned at = 8; at < nb * 4096; at += 509) {
		img[at] ^= 0x10;
		assert_false(bnode_copy_matches(img, &p, true));
		img[at] ^= 0x10;
	}
	assert_true(bnode_copy_matches(img, &p, true));
	/* nb 3 or 1 with a csum made for it: not the fewest, or too few. */
	for (unsigned bad = 1; bad <= 4; bad += 2) {
		struct bptr q;

		bnode_fold(n, img);
		img[60] = (uint8_t)bad;
		if (bad > nb) {	/* the values end at bad * 4096 */
			memmove(img + bad * 4096 - 6400, img + nb * 4096 - 6400, 6400);
			memset(img + nb * 4096 - 6400, 0, (bad - nb) * 4096);
		}
		q = ptr_of(csum_buf(img + 8, bad * 4096 - 8, ADDR));
		memcpy(img, &q.csum, 8);	/* little-endian hosts */
		assert_false(bnode_copy_matches(img, &q, true));
	}
	/* A nonzero byte in the gap, csum made to match: refused. */
	bnode_fold(n, img);
	img[96 + 20 * 20 + 5] = 1;
	p = ptr_of(csum_buf(img + 8, nb * 4096 - 8, ADDR));
	memcpy(img, &p.csum, 8);
	assert_false(bnode_copy_matches(img, &p, true));
	/* A whole node (nb 0) where short ones are expected, and back. */
	p = ptr_of(bnode_seal(n));
	assert_int_equal(bnode_nb(n), 0);
	assert_true(bnode_copy_matches(n, &p, false));
	assert_false(bnode_copy_matches(n, &p, true));
	/* The node in memory with a stale nb: bnode_check says so. */
	p = ptr_of(bnode_seal_short(n));
	n[60] = 3;
	assert_int_equal(bnode_check(n, NULL, 0), -EUCLEAN);
	n[60] = 5;
	assert_int_equal(bnode_check(n, NULL, 0), -EUCLEAN);
	free(n);
	free(img);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nb_minimal),
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
