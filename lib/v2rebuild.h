/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * v2rebuild: when v2dirty lost a note for want of memory (v2dirty.h), the
 * format-v2 checkpoint rebuilds the set it took from the log, which holds
 * every change since the last checkpoint (docs/FORMAT.md "Checkpoint").
 */
#ifndef TWINFS_V2REBUILD_H
#define TWINFS_V2REBUILD_H

#include <stddef.h>

struct btree;
struct tfs;
struct tfs_inode;
struct v2d_ino;
struct v2d_set;
struct v2dirty;

/* If a note of @d was lost: every record from the log's head (this
 * superblock's) to its end noted again into @set, the set the checkpoint
 * took, and *vec (freed and made again) lists it anew in inode order.
 * The set then holds every change since the last checkpoint (records past
 * the barrier too: writing those inodes from memory is what any
 * checkpoint does).  0 at once without a lost note; -errno (the set is
 * incomplete: the checkpoint gives it back). */
int v2rebuild_set(struct tfs *fs, struct v2dirty *d, struct v2d_set *set, struct v2d_ino ***vec,
		  size_t *n);
/* A rebuilt set knows no cookie of the entries its names had: every
 * DIRINDEX item of directory @dp whose name @e noted and which memory no
 * longer holds at that cookie is deleted from @t.  A walk of the
 * directory's index, only after a lost note (V2D_REINDEX). */
int v2rebuild_reindex(struct btree *t, struct tfs_inode *dp, const struct v2d_ino *e);

#endif
