/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * logcont: the log_id each mount writes under, and -o lazyreplay's
 * continuation: a mount after a crash that serves without writing a
 * checkpoint first.  The replayed log stays the journal of what it holds
 * (its space reserved, its head unchanged) and new chunks go on after its
 * end under a new log_id that the superblock names with that end
 * (SUPER_INCOMPAT_V2_LOG_CONT, FORMAT.md "Log continuation"); the next
 * checkpoint (ckpt_v2_write) ends the continuation.  Functions return 0
 * or -errno.
 */
#ifndef TWINFS_LOGCONT_H
#define TWINFS_LOGCONT_H

#include <stdbool.h>
#include <stdint.h>

struct tfs;

/* A new log_id for this mount (or fsck -y's commit), after the newest one
 * the superblock names; any continuation is over (the checkpoint that
 * follows names the new log_id and head). */
void logcont_new_log_id(struct tfs *fs);

/* Whether the mount that replayed up to @next_seq may continue the log
 * instead of writing a checkpoint first. */
bool logcont_may(struct tfs *fs, uint64_t next_seq);

/* The continuation in fs->sb: the replayed log ends at (@end_pos,
 * @next_seq), the new log_id follows the old one.  Before the log is
 * opened (its writer takes that log_id); logcont_commit makes it durable
 * before any chunk is written. */
void logcont_begin(struct tfs *fs, uint64_t end_pos, uint64_t next_seq);
int logcont_commit(struct tfs *fs);

#endif
