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
		/* Re-encoding a decoded superblock gives one that decodes again. */
		uint8_t again[4096];
		struct super sb2;
		super_encode(&sb, slot, again);
		assert(super_decode(again, slot, &sb2, why, sizeof(why)) == 0);
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
}
