// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: fuzz the superblock decoder: any 4096 bytes either decode to a
 * superblock whose geometry is consistent, or are refused; never a crash. */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "super.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t buf[4096];
	struct super sb;
	char why[256];

	memset(buf, 0, sizeof(buf));
	if (size)	/* libFuzzer passes the empty input as NULL */
		memcpy(buf, data, size < sizeof(buf) ? size : sizeof(buf));
	for (unsigned slot = 0; slot < 2; slot++) {
		if (super_decode(buf, slot, &sb, why, sizeof(why)) != 0)
			continue;
		/* Whatever decodes must be safe to use: the checks mount relies on. */
		assert(sb.block_size == 4096);
		assert(sb.ndevs >= 1 && sb.ndevs <= DEV_MAX);
		assert(sb.dev_index < sb.ndevs);
		assert(sb.log_start + sb.log_blocks <= sb.total_blocks);
		assert(sb.log_head_pos < sb.log_blocks);
		assert(memchr(sb.label, 0, sizeof(sb.label)) != NULL);
		if (sb.version == SUPER_VERSION_V2) {
			/* the trees' roots are nodes inside the node area */
			assert(sb.node_start >= sb.data_start && sb.node_blocks % BNODE_BLOCKS == 0);
			assert(sb.node_blocks && sb.node_start + sb.node_blocks <= sb.total_blocks);
			assert(!sb.ckpt_blocks && sb.tree_gen);
			/* what fspace_open needs: a data area after the node
			 * area, groups of a multiple of 64, a reserve below nslots */
			assert(sb.node_start + sb.node_blocks < sb.total_blocks);
			assert(sb.free_blocks <= sb.total_blocks - sb.node_start - sb.node_blocks);
			assert(sb.gblocks && sb.gblocks % 64 == 0);
			assert(sb.node_reserve < sb.node_blocks / BNODE_BLOCKS);
			for (unsigned i = 0; i < SUPER_V2_TREES; i++) {
				const struct broot *r = &sb.roots[i];

				assert(!r->ptr.addr || (r->ptr.addr >= sb.node_start &&
					r->ptr.addr + BNODE_BLOCKS <= sb.node_start + sb.node_blocks &&
					r->ptr.gen <= sb.tree_gen && r->level < BNODE_MAX_LEVEL));
			}
		} else {
			assert(sb.version == SUPER_VERSION && !sb.tree_gen && !sb.node_blocks);
		}
		/* Re-encoding a decoded superblock gives one that decodes again. */
		uint8_t again[4096];
		struct super sb2;
		super_encode(&sb, slot, again);
		assert(super_decode(again, slot, &sb2, why, sizeof(why)) == 0);
		/* Version 2 has exactly one encoding: the same bytes. */
		if (sb.version == SUPER_VERSION_V2)
			assert(memcmp(again, buf, sizeof(buf)) == 0);
	}
	return 0;
}

void fuzz_make_seeds(void (*emit)(const void *p, size_t len));
void fuzz_make_seeds(void (*emit)(const void *p, size_t len))
{
	struct super sb;
	uint8_t buf[4096];

	memset(&sb, 0, sizeof(sb));
	super_layout(&sb, 1u << 19);
	sb.ndevs = 2;
	sb.generation = 7;
	strcpy(sb.label, "seed");
	super_encode(&sb, 1, buf);
	emit(buf, sizeof(buf));
	sb.dev_index = 1;
	sb.generation = 8;
	super_encode(&sb, 0, buf);
	emit(buf, sizeof(buf));
	/* version 2: three trees in a node area */
	sb.version = SUPER_VERSION_V2;
	sb.incompat = SUPER_INCOMPAT_V2_MAPPED;
	sb.tree_gen = 3;
	sb.hash_seed = 0x9e3779b97f4a7c15ull;
	sb.node_start = sb.data_start;
	sb.node_blocks = 1024;
	sb.free_blocks = sb.total_blocks - sb.node_start - sb.node_blocks;
	sb.gblocks = 1u << 18;
	sb.node_reserve = 16;
	for (unsigned i = 0; i < SUPER_V2_TREES; i++)
		sb.roots[i] = (struct broot){ { sb.node_start + 4 * i, 1 + i, 0x77 * i, 0 }, i };
	super_encode(&sb, 0, buf);
	emit(buf, sizeof(buf));
	sb.roots[2] = (struct broot){ { 0, 0, 0, 0 }, 0 };
	super_encode(&sb, 0, buf);
	emit(buf, sizeof(buf));
}
