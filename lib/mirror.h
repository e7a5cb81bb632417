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
 * Write-intent tracking (mirror_track_init): the data area is split into
 * regions of 2^shift blocks; every mirror_write into a region while some
 * device is not in sync sets the region's bit, so a returning device needs
 * only the dirty regions (rebuild.c persists the bitmap at checkpoints).
 * A REBUILDING device receives every write but serves reads only for
 * regions already copied (below sync_cursor) or, for a rebuild (not a
 * replace), regions whose bit is clear; a write is acknowledged only on
 * in-sync (OK) devices.  The rebuild copies one region at a time inside a
 * window that writes wait for (mirror_sync_window), so a copy never lays
 * old content over a newer write.
 *
 * All functions return 0 or -errno.  Buffers are 4096-aligned.
 */
#ifndef TWINFS_MIRROR_H
#define TWINFS_MIRROR_H

#include <stdatomic.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdint.h>

#include "dev.h"
#include "tlog.h"

#define MIRROR_READ_ERR_LIMIT 32
#define MIRROR_LOST_MAX 256u	/* distinct losses remembered (struct mirror) */

enum mirror_dev_state {
	MDEV_OK = 0,
	MDEV_MISSING,		/* absent at mount (-o degraded) */
	MDEV_FAILED,		/* failed while mounted */
	MDEV_STALE,		/* present, but missed writes (superblock says so) */
	MDEV_REBUILDING,	/* gets writes; reads only from copied regions */
};

/* "ok", "missing", "failed", "stale", "rebuilding" (status output). */
const char *mirror_state_name(int state);

#define MIRROR_BUSY_BUCKETS 256u

struct mirror_counters {
	_Atomic uint64_t read_err;
	_Atomic uint64_t write_err;
	_Atomic uint64_t flush_err;
	/* Each counts objects: a data block (4 KiB) or a tree node (one,
	 * whatever its size); a loss once until rewritten (mirror_lost.c). */
	_Atomic uint64_t csum_err;	/* copies that did not verify */
	_Atomic uint64_t repaired;	/* bad copies rewritten from a good one */
	_Atomic uint64_t unrecoverable;	/* blocks/nodes no copy verified */
	/* Reads issued to the device and their bytes (memory only, not in
	 * the superblock): shows how reads spread over the mirrors. */
	_Atomic uint64_t reads;
	_Atomic uint64_t read_bytes;
};

/* A device's error counters (mirror_clear_counters). */
struct mirror_errs {
	uint64_t read_err, write_err, flush_err, csum_err, repaired, unrecoverable;
};

/* What mirror_event() counts and logs (rate limited per device and kind). */
enum mirror_event_kind {
	MEV_READ_ERR,
	MEV_WRITE_ERR,
	MEV_FLUSH_ERR,
	MEV_CSUM_ERR,
	MEV_REPAIRED,
	MEV_UNRECOVERABLE,
	MEV_KINDS
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
	/* Called (with on_state_ctx) by mirror_write and mirror_flush before
	 * they acknowledge (return 0) while some device is not in sync: it
	 * returns only once every such device is durably recorded stale (fs:
	 * sbc_persist_stale writes the superblocks), so no crash can make a
	 * device that missed an acknowledged write look current.  Runs in the
	 * caller's thread, holding whatever locks the caller holds.  Nonzero:
	 * the write is not acknowledged (its error is returned).  May be NULL. */
	int (*on_degraded)(void *ctx);
	/* Called (with on_state_ctx) when a read found no copy of @blk that
	 * verifies and that was logged (rate-limited like the log line): for
	 * the unrecoverable event.  Must not block.  May be NULL. */
	void (*on_unrecoverable)(void *ctx, unsigned dev, uint64_t blk);
	/* Rescue mount: bad copies met on reads are not rewritten. */
	bool no_repair;
	struct tlog_rl rl[DEV_MAX][MEV_KINDS];	/* log rate limits */

	/* Lost blocks (mirror_lost.c): the address (a data block, or a
	 * node's first block) of each loss counted unrecoverable, and the
	 * device it was counted on, until it is written again, repaired or
	 * cleared.  A read that meets a known loss again counts nothing (no
	 * checksum error, no unrecoverable, no log line): the counters count
	 * damage, not retries.  When the table is full a loss is counted
	 * every time, as before.  lost_mu is a leaf lock; nlost is read
	 * lock-free by the write path. */
	pthread_mutex_t lost_mu;
	_Atomic unsigned nlost;
	struct { uint64_t blk; unsigned dev; } lost[MIRROR_LOST_MAX];

	/* The path each slot was mounted from (absolute when the daemon
	 * mounted it; a replace swaps in the new one): it
	 * names a missing device in events and status and is where rebuild
	 * reopens it.  Kept here, below both the events and the rebuild
	 * service, so neither calls the other for it.  path_mu (a leaf
	 * lock) guards the pointers: a replace swaps one while an event or
	 * status copies it. */
	pthread_mutex_t path_mu;
	char *slot_path[DEV_MAX];		/* NULL: not known */

	/* Write-intent bitmap; trk_bits == NULL: not tracking (mkfs, tests). */
	uint64_t trk_base, trk_end;		/* tracked blocks [base, end) */
	unsigned trk_shift;			/* log2(blocks per region) */
	uint64_t trk_nregions;
	_Atomic uint64_t *trk_bits;		/* set lock-free, freed at unmount */

	/* Rebuild synchronization.  sync_dev/sync_all/sync_cursor are
	 * published before the device becomes MDEV_REBUILDING. */
	_Atomic int sync_dev;			/* device being rebuilt, -1: none */
	_Atomic bool sync_all;			/* replace: every region is missing */
	_Atomic uint64_t sync_cursor;		/* regions below are copied */
	pthread_mutex_t sync_mu;		/* leaf lock: waits on win */
	pthread_cond_t sync_cv;
	/* Region being copied (UINT64_MAX: none); stored under sync_mu, read
	 * lock-free by writers after they count themselves in busy[]. */
	_Atomic uint64_t win;
	_Atomic unsigned busy[MIRROR_BUSY_BUCKETS];	/* in-flight writes by region hash */
};

/* devs[i] may be NULL (missing device).  The backend must already have every
 * non-NULL device attached. */
int mirror_init(struct mirror *m, struct dev_backend *be, struct dev **devs, unsigned n);
unsigned mirror_healthy(const struct mirror *m);

/* Slot paths (see struct mirror).  set stores a copy of @path (NULL:
 * forget it), 0 or -ENOMEM; get copies it into @out, false when none is
 * known; free forgets them all (unmount). */
int mirror_slot_path_set(struct mirror *m, unsigned dev, const char *path);
bool mirror_slot_path(struct mirror *m, unsigned dev, char *out, size_t outlen);
void mirror_slot_paths_free(struct mirror *m);

/* Write nblk blocks at physical block blk to every healthy device at once.
 * 0 when every device still healthy afterwards has the data (and, through
 * on_degraded, every other one is durably recorded stale); -EIO when no
 * device took it. */
int mirror_write(struct mirror *m, uint64_t blk, const void *buf, uint32_t nblk);
/* The same, each copy durable when it completes (dev_io.fua): a write and
 * a flush in one device round trip.  Earlier writes still need
 * mirror_flush. */
int mirror_write_fua(struct mirror *m, uint64_t blk, const void *buf, uint32_t nblk);

/*
 * mirror_write in two halves, for callers that run the I/O themselves
 * (asynchronously): begin fills w->ios[0..w->n) (0, or -EIO with nothing to
 * submit and nothing to end); after the I/O, end does the accounting and
 * returns what mirror_write would have.  @submit_ret is the batch's issue
 * error (0 when every ios[i].res is set).  Between the two the write counts
 * as in flight for the rebuild window, so end must always follow begin.
 */
struct mirror_wr {
	struct dev_io ios[DEV_MAX];
	unsigned slot[DEV_MAX];
	bool insync[DEV_MAX];
	unsigned n;
	uint64_t blk, r0, r1;
	uint32_t nblk;
	bool counted;
};
int mirror_write_begin(struct mirror *m, uint64_t blk, const void *buf, uint32_t nblk,
		       struct mirror_wr *w);
int mirror_write_end(struct mirror *m, struct mirror_wr *w, int submit_ret);
/* mirror_write_end without calling on_degraded, for a thread that must not
 * wait (the I/O completion thread): MIRROR_ACK_DEGRADED when the write may
 * only be acknowledged after mirror_ack_degraded() returns 0. */
#define MIRROR_ACK_DEGRADED 1
int mirror_write_end_noack(struct mirror *m, struct mirror_wr *w, int submit_ret);
int mirror_ack_degraded(struct mirror *m);
/* Instead of end, when the I/O was never issued. */
void mirror_write_cancel(struct mirror *m, struct mirror_wr *w);

/* Verified read of nblk blocks; csums[i] is the expected csum_block() of
 * block blk+i.  Repairs bad copies.  Returns 0, or -EIO if at least one
 * block could not be recovered; then *bad (if not NULL) gets a bitmap of the
 * unrecoverable blocks (bit i = block i; only the first 64 are tracked, the
 * rest set bit 63) and their bytes in buf are zeroed. */
int mirror_read(struct mirror *m, uint64_t blk, void *buf, uint32_t nblk,
		const uint64_t *csums, uint64_t *bad);
/* The device a read of [blk, blk + nblk) goes to first (the rotation
 * mirror_read uses), or -1 when no device may serve it.  For callers that
 * issue the read themselves (mirror_read_dev, which counts it in the
 * device's reads) and fall back to mirror_read when the copy does not
 * verify. */
int mirror_read_pick(struct mirror *m, uint64_t blk, uint32_t nblk);

/* A read of at least this many blocks is split over the readable copies. */
#define MIRROR_SPLIT_MIN 32u

struct mirror_piece {
	unsigned dev;
	uint32_t off, n;	/* blocks [blk + off, blk + off + n) */
};

/* mirror_read_pick for a read the caller may issue in pieces: a read of
 * MIRROR_SPLIT_MIN blocks or more is cut into one piece per readable copy
 * (at most @max), each from another device, so one large read keeps every
 * mirror busy; a shorter one is a single piece from the rotation.  Returns
 * the number of pieces, 0 when no device may serve the range. */
unsigned mirror_read_split(struct mirror *m, uint64_t blk, uint32_t nblk,
			   struct mirror_piece *p, unsigned max);
/* The rest of mirror_read after the caller read [blk, blk + nblk) from
 * @dev itself (res: 0 or its -errno): verify, fall back to the other
 * copies, repair, count; same result as mirror_read. */
int mirror_read_done(struct mirror *m, unsigned dev, int res, uint64_t blk, void *buf,
		     uint32_t nblk, const uint64_t *csums, uint64_t *bad);

/* Unverified read/write of one device (superblocks, log, scrub). */
int mirror_read_dev(struct mirror *m, unsigned dev, uint64_t blk, void *buf, uint32_t nblk);
int mirror_write_dev(struct mirror *m, unsigned dev, uint64_t blk, const void *buf, uint32_t nblk);

/* Flush the volatile cache of every healthy device, concurrently (a device
 * whose flush fails is failed, and recorded stale through on_degraded
 * before 0 is returned). */
int mirror_flush(struct mirror *m);

/* Add n to device dev's counter for kind and log it, at most one line per
 * device and kind per TLOG_RL_INTERVAL_S (blk: first block concerned).
 * Used by the read path here and by scrub, so both share the limits. */
void mirror_event(struct mirror *m, unsigned dev, int kind, uint64_t blk, uint64_t n);

/* Zero device @dev's error counters (reads and read_bytes stay) and
 * forget the losses counted on it, so a block still lost is counted again
 * when next met; @old (may be NULL) gets what the counters were.  The
 * superblock keeps them until the caller commits one. */
void mirror_clear_counters(struct mirror *m, unsigned dev, struct mirror_errs *old);
/* mirror_event's filter (mirror_lost.c): true when the event is about a
 * loss already counted (MEV_CSUM_ERR, MEV_UNRECOVERABLE) and must count
 * nothing; an MEV_UNRECOVERABLE not known yet is remembered, an
 * MEV_REPAIRED forgets its range. */
bool mirror_lost_seen(struct mirror *m, unsigned dev, int kind, uint64_t blk, uint64_t n);
/* Forget the losses in [blk, blk + n): it is being written anew. */
void mirror_lost_forget(struct mirror *m, uint64_t blk, uint64_t n);

/* Mark a device failed (logged once through on_state).  Works on OK and
 * REBUILDING devices. */
void mirror_fail_dev(struct mirror *m, unsigned dev, int err);

/* Devices in sync (MDEV_OK). */
unsigned mirror_insync(const struct mirror *m);

/* ---- write-intent tracking (see the top) ---- */
/* Track blocks [base, end) in regions of 2^shift blocks. 0 or -ENOMEM. */
int mirror_track_init(struct mirror *m, uint64_t base, uint64_t end, unsigned shift);
void mirror_track_free(struct mirror *m);
/* Mark the regions of [blk, blk+n) dirty (blocks outside are ignored). */
void mirror_mark(struct mirror *m, uint64_t blk, uint64_t n);
bool mirror_region_dirty(const struct mirror *m, uint64_t region);
uint64_t mirror_dirty_count(const struct mirror *m);
void mirror_mark_all(struct mirror *m);
void mirror_clear_all(struct mirror *m);
/* Snapshot / restore the bitmap as little-endian u64 words
 * (ceil(nregions / 64) of them). */
void mirror_bits_get(const struct mirror *m, uint64_t *words);
void mirror_bits_set(struct mirror *m, const uint64_t *words);
/* Region of block blk (UINT64_MAX outside the tracked area). */
uint64_t mirror_region_of(const struct mirror *m, uint64_t blk);

/* ---- rebuild support ---- */
/* Copy window: region to copy next (UINT64_MAX: none).  Returns when no
 * write into that region is in flight; new ones wait until the window
 * moves. */
void mirror_sync_window(struct mirror *m, uint64_t region);
/* Whether device @dev may serve reads of blocks [blk, blk+n). */
bool mirror_dev_readable(struct mirror *m, unsigned dev, uint64_t blk, uint32_t n);
/* Install @d in slot @dev (a replacement, or the same device reopened)
 * and make it MDEV_REBUILDING from region @cursor on.  The previous
 * struct dev is left to the caller (it may still have I/O in flight: keep
 * it open until unmount). */
void mirror_start_sync(struct mirror *m, unsigned dev, struct dev *d, bool all,
		       uint64_t cursor);
void mirror_set_cursor(struct mirror *m, uint64_t cursor);
/* The copy is done and verified: REBUILDING -> OK.  false if the device
 * failed meanwhile. */
bool mirror_finish_sync(struct mirror *m, unsigned dev);
/* Stop syncing (cancel/failure); the device becomes @state if it was
 * still REBUILDING. */
void mirror_end_sync(struct mirror *m, int state);

#endif
