/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * mirror: N-way RAID1 over the attached devices.  Writes go to every healthy
 * device in one concurrent batch; reads pick one healthy device (round
 * robin over the healthy ones), verify every block against the checksum its parent holds,
 * and on a mismatch or read error try the other copies, return the good one
 * and rewrite the bad copy in place (same block, same content: safe under
 * copy-on-write).  A block no copy verifies is reported -EIO; the caller
 * keeps serving everything else.
 *
 * Device state: a write error fails the device at once (its copy is now
 * stale); read errors fail it after MIRROR_READ_ERR_LIMIT errors.  A failed
 * or missing device gets no more I/O.  Counters are per device.
 *
 * All functions return 0 or -errno.  Buffers are 4096-aligned.
 */
#ifndef TWINFS_MIRROR_H
#define TWINFS_MIRROR_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "dev.h"

#define MIRROR_READ_ERR_LIMIT 32

enum mirror_dev_state {
	MDEV_OK = 0,
	MDEV_MISSING,		/* absent at mount (-o degraded) */
	MDEV_FAILED,		/* failed while mounted */
};

struct mirror_counters {
	_Atomic uint64_t read_err;
	_Atomic uint64_t write_err;
	_Atomic uint64_t flush_err;
	_Atomic uint64_t csum_err;	/* blocks that did not verify */
	_Atomic uint64_t repaired;	/* bad copies rewritten from a good one */
	_Atomic uint64_t unrecoverable;	/* blocks no copy verified */
};

struct mirror {
	struct dev_backend *be;
	unsigned ndevs;
	struct dev *devs[DEV_MAX];		/* NULL when missing */
	_Atomic int state[DEV_MAX];		/* enum mirror_dev_state */
	struct mirror_counters ctr[DEV_MAX];
	_Atomic unsigned rr;			/* read spreading: next pick */
	/* Called once when a device changes state (for logging); may be NULL. */
	void (*on_state)(void *ctx, unsigned dev, int state, int err);
	void *on_state_ctx;
};

/* devs[i] may be NULL (missing device).  The backend must already have every
 * non-NULL device attached. */
int mirror_init(struct mirror *m, struct dev_backend *be, struct dev **devs, unsigned n);
unsigned mirror_healthy(const struct mirror *m);

/* Write nblk blocks at physical block blk to every healthy device at once.
 * 0 when every device still healthy afterwards has the data; -EIO when no
 * device took it. */
int mirror_write(struct mirror *m, uint64_t blk, const void *buf, uint32_t nblk);

/* Verified read of nblk blocks; csums[i] is the expected csum_block() of
 * block blk+i.  Repairs bad copies.  Returns 0, or -EIO if at least one
 * block could not be recovered; then *bad (if not NULL) gets a bitmap of the
 * unrecoverable blocks (bit i = block i; only the first 64 are tracked, the
 * rest set bit 63) and their bytes in buf are zeroed. */
int mirror_read(struct mirror *m, uint64_t blk, void *buf, uint32_t nblk,
		const uint64_t *csums, uint64_t *bad);

/* Unverified read/write of one device (superblocks, log, scrub). */
int mirror_read_dev(struct mirror *m, unsigned dev, uint64_t blk, void *buf, uint32_t nblk);
int mirror_write_dev(struct mirror *m, unsigned dev, uint64_t blk, const void *buf, uint32_t nblk);

/* Flush the volatile cache of every healthy device, concurrently. */
int mirror_flush(struct mirror *m);

/* Mark a device failed (logged once through on_state). */
void mirror_fail_dev(struct mirror *m, unsigned dev, int err);

#endif
