/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * discard: giving freed blocks back to the devices (TRIM).  BLKDISCARD on
 * block devices, a punched hole in image files, nothing where neither
 * works (dev_discard_probe, said once in the log and in status).
 *
 * Two parts.  A queue (discard_q_*) with one worker thread: runs go in
 * from the allocator's release hook (alloc_set_discard), are batched for a
 * moment, sorted and merged, discarded and handed back (done).  Nothing is
 * discarded on a FUSE worker or an I/O completion thread.  And the glue
 * for a mounted file system (discard_start/stop/free, the trim job and
 * its ctl commands).
 *
 * The safety rule: a block is discarded only once the metadata that freed
 * it is durable on every device.  The allocator guarantees it: its release
 * hook runs only for deferred frees whose log sequence is durable (and for
 * an old checkpoint once the superblock naming the new one is), and the
 * blocks stay marked used until done() unholds them, so no allocation can
 * hand them out and have them written while their discard is in flight.
 *
 * Functions return 0 or -errno.
 */
#ifndef TWINFS_DISCARD_H
#define TWINFS_DISCARD_H

#include <stdbool.h>
#include <stdint.h>

struct tfs;
struct jbuf;

/* ---- the queue ---- */

struct discard_q;

struct discard_q_ops {
	/* Discard [blk, blk + n) (blocks).  0 or -errno (counted). */
	int (*issue)(void *ctx, uint64_t blk, uint64_t n);
	/* The run is finished with (discarded, or not when @discarded is
	 * false because the queue is being torn down): free it. */
	void (*done)(void *ctx, uint64_t blk, uint64_t n, bool discarded);
};

struct discard_q_stats {
	uint64_t queued_blocks;		/* waiting or in the worker's hands */
	uint64_t discarded_blocks;	/* issued successfully */
	uint64_t runs_in;		/* runs added */
	uint64_t runs_issued;		/* merged runs issued */
	uint64_t batches;
	uint64_t errors;
};

/* Start the worker; it waits @delay_ms after the first run of a batch so
 * neighbours freed together are merged into one discard. */
int discard_q_create(const struct discard_q_ops *ops, void *ctx, unsigned delay_ms,
		     struct discard_q **out);
/* Queue a run (the allocator's hook: may be called under its group
 * locks; takes only the queue's leaf lock).  -ENOMEM, -ESHUTDOWN. */
int discard_q_add(struct discard_q *q, uint64_t blk, uint64_t n);
/* Issue what is queued now, without the batching delay, and wait until
 * the worker is idle. */
void discard_q_flush(struct discard_q *q);
/* Stop the worker: queued runs are issued when @issue, else only done. */
void discard_q_destroy(struct discard_q *q, bool issue);
void discard_q_get_stats(struct discard_q *q, struct discard_q_stats *st);

/* ---- a mounted file system ---- */

/* Probe every device (one log line each), and with @on hook the
 * allocator to the queue.  Before the first free of the mount. */
int discard_start(struct tfs *fs, bool on);
/* Issue every queued discard and stop (unmount, after the last release). */
void discard_stop(struct tfs *fs);
/* Stop without issuing (abandon, failed mount); frees everything. */
void discard_free(struct tfs *fs);
/* Stop the trim and the node queue without issuing, before format v2's
 * trees are freed (fs_free); discard_free does the rest. */
void discard_nodes_free(struct tfs *fs);
/* Wait until everything released so far has been discarded (tests). */
void discard_flush(struct tfs *fs);
void discard_stats_json(struct tfs *fs, struct jbuf *j);

/* Trim: discard every free block, in a background thread, holding each
 * run so the allocator cannot hand it out meanwhile (format v2: the free
 * node slots too, but the fallback tree's).  -EBUSY if one runs. */
int discard_trim_start(struct tfs *fs);
void discard_trim_status_json(struct tfs *fs, struct jbuf *j);

#endif
