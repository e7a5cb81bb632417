/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * wib.h: persistence of the write-intent bitmap (wib.c): which regions a
 * device that is out of sync missed, kept across checkpoints and crashes.
 * Functions return 0 or -errno.
 */
#ifndef TWINFS_WIB_H
#define TWINFS_WIB_H

#include <stddef.h>
#include <stdint.h>

struct tfs;

/* Region size (log2 blocks) for a data area of data_blocks: at least
 * 1 MiB, larger only when the bitmap would exceed its block budget. */
unsigned wib_region_shift(uint64_t data_blocks);

/* ---- mount (mount.c) ---- */
/* Mark a replayed extent's blocks dirty when a device is out of sync. */
void wib_note_replay(struct tfs *fs, uint64_t phys, uint64_t n);
/* After the allocator is rebuilt: hold the bitmap blocks, load the bitmap. */
int wib_mount_load(struct tfs *fs, char *err, size_t errlen);

/* ---- checkpoint hooks (ckpt.c, under ckpt_mu) ---- */
struct wib_loc {
	uint64_t start;
	uint32_t blocks, shift;
	uint64_t csum;
};
/* Write the bitmap (if any region is dirty) to new blocks; the checkpoint's
 * flush makes it durable.  *w gets its location (start 0: none). */
int wib_write(struct tfs *fs, struct wib_loc *w);
/* Give back bitmap blocks (the new ones after a failure, the previous ones
 * after the flip). */
void wib_put(struct tfs *fs, uint64_t start, uint32_t blocks);

#endif
