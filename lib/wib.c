// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * wib: the on-disk write-intent bitmap.  While a device is out of sync the
 * mirror (mirror.h) marks every region written; each checkpoint writes the
 * bitmap to newly allocated metadata blocks (checksummed, seeded from the
 * fs uuid) and the superblock points at it, so after a crash or remount a
 * rebuild (rebuild.c) still copies only the regions the device missed.
 * Owns the region size, the bitmap's blocks and its load at mount.
 *
 * Called under ckpt_mu (wib_write, wib_put) or single-threaded at mount.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs_i.h"
#include "le.h"
#include "tlog.h"
#include "wib.h"

#define BS TFS_BLOCK_SIZE
#define WIB_MIN_SHIFT 8u		/* 1 MiB regions at least */
#define WIB_MAX_BLOCKS 8u		/* the bitmap fits in 32 KiB */
#define WIB_SEED_XOR 0x776962ull	/* "wib" */

static uint64_t wib_seed(const struct tfs *fs)
{
	return le64_get(fs->sb.fs_uuid) ^ WIB_SEED_XOR;
}

/* Region size: at least 1 MiB, larger only when the bitmap would exceed
 * WIB_MAX_BLOCKS. */
unsigned wib_region_shift(uint64_t data_blocks)
{
	unsigned s = WIB_MIN_SHIFT;

	while ((data_blocks >> s) > (uint64_t)WIB_MAX_BLOCKS * BS * 8)
		s++;
	return s;
}

static uint64_t bitmap_blocks(const struct mirror *m)
{
	return (m->trk_nregions + BS * 8 - 1) / (BS * 8);
}

/* ---- mount ---- */

void wib_note_replay(struct tfs *fs, uint64_t phys, uint64_t n)
{
	if (mirror_insync(&fs->mirror) < fs->mirror.ndevs)
		mirror_mark(&fs->mirror, phys, n);
}

/* Read and verify the persisted bitmap from the first in-sync device whose
 * copy verifies.  -EUCLEAN if none does. */
static int load_bits(struct tfs *fs)
{
	const struct super *sb = &fs->sb;
	uint64_t nw = (fs->mirror.trk_nregions + 63) / 64, *words;
	uint8_t *buf;
	int ret = -EUCLEAN;

	if (sb->wib_blocks < bitmap_blocks(&fs->mirror) || sb->wib_shift != fs->mirror.trk_shift)
		return -EUCLEAN;
	if (posix_memalign((void **)&buf, BS, (size_t)sb->wib_blocks * BS))
		return -ENOMEM;
	words = malloc(nw * sizeof(*words));
	if (!words) {
		free(buf);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < fs->mirror.ndevs; i++) {
		if (atomic_load(&fs->mirror.state[i]) != MDEV_OK)
			continue;
		if (mirror_read_dev(&fs->mirror, i, sb->wib_start, buf, sb->wib_blocks) < 0)
			continue;
		if (csum_buf(buf, (size_t)sb->wib_blocks * BS, wib_seed(fs)) != sb->wib_csum)
			continue;
		for (uint64_t w = 0; w < nw; w++)
			words[w] = le64_get(buf + w * 8);
		mirror_bits_set(&fs->mirror, words);
		ret = 0;
		break;
	}
	free(words);
	free(buf);
	return ret;
}

int wib_mount_load(struct tfs *fs, char *err, size_t errlen)
{
	struct super *sb = &fs->sb;
	int ret;

	if (sb->wib_start) {
		ret = alloc_use(fs->alloc, sb->wib_start, sb->wib_blocks);
		if (ret < 0) {
			snprintf(err, errlen, "write-intent bitmap lies outside the data area");
			return -EUCLEAN;
		}
	}
	if (mirror_insync(&fs->mirror) == fs->mirror.ndevs)
		return 0;
	if (sb->wib_start && load_bits(fs) < 0) {
		/* What the stale device missed is unknown: all of it. */
		tfs_log(LOG_WARNING, "write-intent bitmap unreadable: a rebuild will copy "
			"every allocated block");
		mirror_mark_all(&fs->mirror);
	}
	/* Written after (or with) the bitmap, so it does not cover them. */
	if (sb->ckpt_blocks)
		mirror_mark(&fs->mirror, sb->ckpt_start, sb->ckpt_blocks);
	if (sb->wib_start)
		mirror_mark(&fs->mirror, sb->wib_start, sb->wib_blocks);
	return 0;
}

/* ---- checkpoint hooks ---- */

int wib_write(struct tfs *fs, struct wib_loc *w)
{
	struct mirror *m = &fs->mirror;
	uint64_t nb, blk, got, nw;
	uint8_t *buf;
	int ret;

	memset(w, 0, sizeof(*w));
	w->shift = m->trk_shift;
	if (!m->trk_bits || mirror_dirty_count(m) == 0)
		return 0;
	nb = bitmap_blocks(m);
	nw = (m->trk_nregions + 63) / 64;
	/* The data area first: in the reserve the bitmap would sit where the
	 * next checkpoint goes (see ckpt_alloc), which then would not fit. */
	ret = alloc_get(fs->alloc, nb, 0, ALLOC_DATA, &blk, &got);
	if (ret == 0 && got < nb) {
		alloc_put(fs->alloc, blk, got);
		ret = -ENOSPC;
	}
	if (ret < 0) {
		ret = alloc_get(fs->alloc, nb, 0, ALLOC_META, &blk, &got);
		if (ret < 0)
			return ret;
		if (got < nb) {
			alloc_put(fs->alloc, blk, got);
			return -ENOSPC;
		}
	}
	if (posix_memalign((void **)&buf, BS, nb * BS)) {
		alloc_put(fs->alloc, blk, nb);
		return -ENOMEM;
	}
	memset(buf, 0, nb * BS);
	{
		uint64_t *words = malloc(nw * sizeof(*words));

		if (!words) {
			free(buf);
			alloc_put(fs->alloc, blk, nb);
			return -ENOMEM;
		}
		mirror_bits_get(m, words);
		for (uint64_t i = 0; i < nw; i++)
			le64_put(buf + i * 8, words[i]);
		free(words);
	}
	ret = mirror_write(m, blk, buf, (uint32_t)nb);
	if (ret < 0) {
		free(buf);
		alloc_put(fs->alloc, blk, nb);
		return ret;
	}
	w->start = blk;
	w->blocks = (uint32_t)nb;
	w->csum = csum_buf(buf, nb * BS, wib_seed(fs));
	free(buf);
	return 0;
}

void wib_put(struct tfs *fs, uint64_t start, uint32_t blocks)
{
	if (start && blocks)
		alloc_put(fs->alloc, start, blocks);
}
