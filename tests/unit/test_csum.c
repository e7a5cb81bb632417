// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: csum_block/csum_buf are XXH3-64 seeded with the block address, and any bit flip or address change alters them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <xxhash.h>

#include "csum.h"

static unsigned char blk[TFS_BLOCK_SIZE];

static void fill(void)
{
	size_t i;

	for (i = 0; i < sizeof(blk); i++)
		blk[i] = (unsigned char)(i * 31 + 7);
}

static void test_matches_xxh3(void **state)
{
	static const uint64_t seeds[] = { 0, 1, 4096, 0xdeadbeefcafeULL, UINT64_MAX };
	size_t i;

	fill();
	for (i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
		assert_int_equal(csum_block(blk, seeds[i]),
				 XXH3_64bits_withSeed(blk, sizeof(blk), seeds[i]));
		assert_int_equal(csum_buf(blk, 100, seeds[i]),
				 XXH3_64bits_withSeed(blk, 100, seeds[i]));
	}
	/* csum_block covers exactly one block, as csum_buf of 4096 bytes. */
	assert_int_equal(csum_block(blk, 9), csum_buf(blk, TFS_BLOCK_SIZE, 9));
}

static void test_seed_changes_value(void **state)
{
	uint64_t phys;

	fill();
	/* A block read from the wrong address must not verify. */
	for (phys = 0; phys < 64; phys++)
		assert_int_not_equal(csum_block(blk, phys), csum_block(blk, phys + 1));
	assert_int_not_equal(csum_buf(blk, 10, 0), csum_buf(blk, 10, 1));
}

static void test_bit_flip_changes_value(void **state)
{
	uint64_t ref;
	size_t byte;
	int bit;

	fill();
	ref = csum_block(blk, 77);
	for (byte = 0; byte < sizeof(blk); byte += 511) {
		for (bit = 0; bit < 8; bit++) {
			blk[byte] ^= (unsigned char)(1u << bit);
			assert_int_not_equal(csum_block(blk, 77), ref);
			blk[byte] ^= (unsigned char)(1u << bit);
		}
	}
	/* Last byte too: the hash must cover the whole block. */
	blk[sizeof(blk) - 1] ^= 0x80;
	assert_int_not_equal(csum_block(blk, 77), ref);
	blk[sizeof(blk) - 1] ^= 0x80;
	assert_int_equal(csum_block(blk, 77), ref);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_matches_xxh3),
		cmocka_unit_test(test_seed_changes_value),
		cmocka_unit_test(test_bit_flip_changes_value),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
