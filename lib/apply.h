/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * apply.h: metadata transactions (apply.c).  meta_apply() is the only
 * mutator of the metadata, live (meta_tx_commit) and in replay alike.
 */
#ifndef TWINFS_APPLY_H
#define TWINFS_APPLY_H

#include <stddef.h>
#include <stdint.h>

#include "log.h"

struct tfs;

struct meta_tx {
	struct log_buf buf;
	/* runs of physical blocks the records dropped: freed when durable */
	struct { uint64_t phys, n; } *drops;
	size_t ndrops, capdrops;
	/* A format-v2 note of it failed (v2dirty.h): the checkpoint's
	 * rebuild waits until it is appended (meta_tx_commit). */
	bool v2lost;
};
void meta_tx_init(struct meta_tx *tx);
void meta_tx_free(struct meta_tx *tx);
int meta_tx_add(struct meta_tx *tx, const struct log_rec *r);
/* Apply every record to memory (collecting dropped blocks), append to the
 * log, defer the drops to the returned seq.  Caller holds the locks of the
 * objects the records touch. */
int meta_tx_commit(struct tfs *fs, struct meta_tx *tx, uint64_t *seq);
/* Apply one record (replay and live). */
int meta_apply(struct tfs *fs, const struct log_rec *r, struct meta_tx *drops);
/* Format v2: note what @r changes (v2dirty.h), as meta_apply does; a
 * checkpoint rebuilding its set from the log passes h->into.  -ENOMEM
 * when the note could not be kept. */
struct v2d_how;
int meta_v2_note(struct tfs *fs, const struct log_rec *r, const struct v2d_how *h);
/* Format v2: node slots a checkpoint writes rewriting @ip's xattrs (NULL:
 * none) with one more of @namelen/@vallen (0: none) at worst, for the
 * node gate (fs.c) and the notes.  Caller holds @ip's lock. */
struct tfs_inode;
uint64_t meta_v2_xattr_slots(const struct tfs_inode *ip, size_t namelen, size_t vallen);
/* Apply an LR_INODE, LR_XATTR_SET or LR_EXT_SET record read from the
 * INODES tree to @ip, an inode not in the table yet (the format v2 inode
 * cache fills it before it inserts it: icache.c).  Notes nothing. */
struct tfs_inode;
int meta_fill(struct tfs *fs, struct tfs_inode *ip, const struct log_rec *r);

#endif
