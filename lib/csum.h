/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * csum: XXH3-64 checksums for data blocks and metadata.
 *
 * A data block's checksum is seeded with its physical block number, so a
 * block written to the wrong place (or a stale block left by a lost write)
 * does not verify where the metadata says it should be.
 */
#ifndef TWINFS_CSUM_H
#define TWINFS_CSUM_H

#include <stddef.h>
#include <stdint.h>

#define TFS_BLOCK_SIZE 4096u
#define TFS_BLOCK_SHIFT 12

/* Checksum of one TFS_BLOCK_SIZE block that lives at physical block @phys. */
uint64_t csum_block(const void *data, uint64_t phys);

/* Checksum of an arbitrary buffer with an explicit seed. */
uint64_t csum_buf(const void *data, size_t len, uint64_t seed);

#endif
