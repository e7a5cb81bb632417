/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * sbcommit.h: the superblock commit (sbcommit.c).  Owns writing the
 * superblock to every healthy device and flushing it: the generation, the
 * device states and error counters, the last durable superblock and the
 * emergency write that records a failed device as stale before a write is
 * acknowledged, and the mark a rebuild or replace target gets in its own
 * superblock before its first block.  Every other superblock field
 * belongs to a service that fills it: the checkpoint (ckpt.c) sets its own
 * fields in fs->sb before calling sbc_commit, the others register a fill
 * callback once at mount (sbc_register) and are called on every commit.  The commit never names
 * the services, so they may call it (and the checkpoint) without a circle.
 * Functions return 0 or -errno.
 */
#ifndef TWINFS_SBCOMMIT_H
#define TWINFS_SBCOMMIT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "super.h"

struct tfs;

/* Fills the caller's own fields of @sb (under fs->ckpt_mu; may take the
 * service's own locks, which rank above sbc.mu, never sbc.mu itself). */
typedef void (*sbc_fill_fn)(void *ctx, struct super *sb);

#define SBC_MAX_FILL 8

struct sbc {
	/* Serializes superblock writes: sbc_commit holds it around its
	 * writes, sbc_persist_stale around the emergency write.  A leaf lock
	 * (only device I/O under it), so a writer holding its range lock may
	 * take it to record a failed device. */
	pthread_mutex_t mu;
	/* Under mu: the superblock last written and flushed, plus a replace's
	 * new member (what the emergency write repeats: fs->sb may already
	 * name a checkpoint not durable yet), and the highest generation ever
	 * written. */
	struct super last;
	uint64_t gen;
	/* Bit i set when last says device i is stale; written under mu, read
	 * lock-free by the write path's fast check. */
	_Atomic uint32_t stale;
	/* Registered at mount, before any commit; read under ckpt_mu. */
	struct { sbc_fill_fn fn; void *ctx; } fill[SBC_MAX_FILL];
	unsigned nfill;
};

void sbc_init(struct sbc *c);		/* fs_new */
void sbc_destroy(struct sbc *c);	/* fs_free */

/* At mount, after mirror_init, fs->sb as read from the devices: it is the
 * durable superblock; install the mirror's on_degraded hook. */
void sbc_mount(struct tfs *fs);

/* A service's fill callback, called by every sbc_commit in registration
 * order.  At mount, single-threaded.  0, or -ENOSPC when the table is full. */
int sbc_register(struct tfs *fs, sbc_fill_fn fn, void *ctx);

/*
 * Commit fs->sb: run the fill callbacks, then write it with the next
 * generation and the current device states to every healthy device and
 * flush, again until the set of stale devices stops changing (a device that
 * fails meanwhile is recorded stale on the others).  The caller holds
 * fs->ckpt_mu and has flushed everything the new superblock points at.
 * 0, or -EIO when no device took it (fs->sb is then the caller's to undo).
 */
int sbc_commit(struct tfs *fs);

/* Record every device not in sync as stale in a superblock on every
 * healthy device (same checkpoint and log head as the last durable one,
 * generation + 1) and flush, unless it already says so.  Takes only
 * sbc.mu: safe from a writer holding range and inode locks.  0, or -EIO if
 * no device took it. */
int sbc_persist_stale(struct tfs *fs);

/*
 * Before a rebuild or replace writes anything to its target @d (slot
 * @slot, not in sync, not yet installed in the mirror): the target's own
 * superblock records it stale.  The last durable superblock with
 * dev_state[@slot] = 1, this device's index and uuid (@uuid: a replace's
 * new member; NULL: the slot's), one generation below the durable one (an
 * in-sync device always wins the choice of the newest), into both slots,
 * flushed.  Until a checkpoint after the run completes writes it in sync,
 * a crash leaves a device that mount and fsck refuse alone.  Takes sbc.mu.
 * 0 or -errno.
 */
int sbc_mark_target(struct tfs *fs, unsigned slot, struct dev *d, const uint8_t *uuid);

/* A replace wrote @uuid as member @slot (stale until rebuilt): the next
 * emergency superblock must name it.  Caller holds fs->ckpt_mu. */
void sbc_note_member(struct tfs *fs, unsigned slot, const uint8_t uuid[16]);

#endif
