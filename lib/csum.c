// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * csum: XXH3-64 over data blocks and metadata buffers.  A data block is
 * seeded with its physical block number so a block that landed at the wrong
 * address, or a stale block left behind by a lost write, fails to verify.
 */
#include <xxhash.h>

#include "csum.h"

uint64_t csum_block(const void *data, uint64_t phys)
{
	return XXH3_64bits_withSeed(data, TFS_BLOCK_SIZE, phys);
}

uint64_t csum_buf(const void *data, size_t len, uint64_t seed)
{
	return XXH3_64bits_withSeed(data, len, seed);
}
