// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * logcont: new log_ids and the log continuation of -o lazyreplay
 * (logcont.h).  Why a continuation needs its own log_id: chunks the
 * crashed mount left past the replayed end (a torn one, one only one
 * mirror got, stale ones of an earlier lap) must never be read as new
 * ones; the superblock says exactly where the old log ends, so a later
 * replay switches log_id there (log_replay_pre) and never looks beyond.
 */
#include <pthread.h>

#include "fs_i.h"
#include "logcont.h"
#include "mirror.h"
#include "sbcommit.h"

/* Each mount writes its records under a new log_id, so chunks an earlier
 * mount left beyond the replay end can never be taken for ours.  A mount
 * writes none before its new superblock is durable, so one log_id is never
 * written by two mounts unless that superblock was lost (damage). */
void logcont_new_log_id(struct tfs *fs)
{
	/* After a continuation the newest log_id is the continuation's. */
	fs->sb.log_id = fs_next_log_id(fs, super_live_log_id(&fs->sb));
	super_log_cont_clear(&fs->sb);
}

/*
 * -o lazyreplay: may this mount serve without a checkpoint, going on with
 * the log after the replayed one under a new log_id (a continuation)?
 * Only the plain case: format v2, something replayed, no continuation
 * pending already (a second crash before a checkpoint: the mount writes
 * one, as without the option), every device in sync (the write-intent
 * bitmap and stale marks stay the checkpoint's business) and no orphan
 * reclaimed (its deletion is in memory only, not in the log the next
 * replay reads).
 */
bool logcont_may(struct tfs *fs, uint64_t next_seq)
{
	return fs->lazyreplay && fs->v2 && !super_log_cont(&fs->sb) &&
	       next_seq > fs->sb.log_head_seq && !fs->mount_orphans &&
	       mirror_insync(&fs->mirror) == fs->mirror.ndevs;
}

/*
 * The continued mount's one write before any chunk: the superblock keeps
 * the old head and log_id (the replayed log stays the journal of what it
 * holds, its space reserved) and names where it ended and the log_id the
 * new chunks carry, so a later replay reads the old log up to exactly
 * there and the new one after, never a stale or torn chunk of the old log
 * beyond its end (mirrors may differ there).  Durable before the first
 * new chunk: sbc_commit flushes.
 */
void logcont_begin(struct tfs *fs, uint64_t end_pos, uint64_t next_seq)
{
	fs->sb.incompat |= SUPER_INCOMPAT_V2_LOG_CONT;
	fs->sb.cont_pos = end_pos;
	fs->sb.cont_seq = next_seq;
	fs->sb.cont_log_id = fs_next_log_id(fs, fs->sb.log_id);
}

int logcont_commit(struct tfs *fs)
{
	int ret;

	/* The old log, up to cont_seq, must be durable on the devices before
	 * a superblock that names its end is: the replay may have rewritten
	 * its last chunk onto devices that lacked it, and the crashed mount's
	 * own writes may sit in a device's volatile cache (a kill -9 does not
	 * lose them, a power cut would).  sbc_commit flushes only after the
	 * superblocks, so a device that reorders could make the superblock
	 * durable first, and a mount after a power cut there would find the
	 * old log ending before cont_seq and refuse it as damage. */
	mirror_flush(&fs->mirror);
	pthread_mutex_lock(&fs->ckpt_mu);
	ret = sbc_commit(fs);
	pthread_mutex_unlock(&fs->ckpt_mu);
	fs->mount_continued = ret == 0;
	return ret;
}

