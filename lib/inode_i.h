/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * inode_i.h: the layout of an in-memory inode.  Private to the metadata
 * core: inode.c (table, handles, accessors), apply.c (the only mutator),
 * ckpt.c (serialization) and fsck*.c (offline checks).  Everybody else goes
 * through the handles and accessors of inode.h, which is the seam the
 * on-disk format v2 and its bounded inode cache plug into: a cache can
 * fault an inode in on inode_get() and write it back after inode_put()
 * without touching the callers.  tests/unit/inodeseam.py (suite unit)
 * fails when another lib/ or daemon/ file includes this header or
 * dereferences an inode.
 */
#ifndef TWINFS_INODE_I_H
#define TWINFS_INODE_I_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "extent.h"
#include "rangelock.h"

struct dir;		/* dir.h */

/* The in-memory inode table: a power-of-two chained hash keyed by inode
 * number (fs->itab).  Format v2 puts its bounded cache here. */
struct itable {
	pthread_rwlock_t lock;		/* protects the buckets and the chains */
	struct tfs_inode **b;		/* NULL until the first inode */
	size_t size;			/* power of two */
	_Atomic uint64_t n;		/* inodes in the table */
};
struct xattr;		/* inode.h */

struct tfs_inode {
	uint64_t ino;
	struct tfs_inode *hnext;	/* table chain, protected by fs->itab->lock */
	/* Handles (inode_get/inode_put) plus one for the table while the
	 * inode is in it: the memory goes when the last one is put.
	 * dead is set (under the table lock) when the inode leaves the table. */
	_Atomic uint32_t refs;
	_Atomic bool dead;

	pthread_mutex_t lock;		/* protects everything below except where noted */
	uint32_t mode, uid, gid, nlink, flags;
	uint64_t rdev, gen;
	uint64_t parent;		/* directories: for ".." */
	_Atomic uint64_t size;		/* written under lock; read lock-free by the data path */
	struct timespec atime, mtime, ctime, btime;
	char *symlink;			/* symlink target, NUL-terminated */
	struct xattr *xattrs;
	struct dir *dir;		/* directories */
	uint64_t last_seq;		/* newest log seq touching this inode */

	struct extent_map map;		/* regular files; entries under the rangelock */
	/* The st_blocks / 8 the daemon last sent the kernel, which may hold
	 * it cached (tfs_blocks_seen, tfs_blocks_stale). */
	_Atomic uint64_t seen_mapped;
	struct rangelock rl;		/* regular files */

	_Atomic uint64_t nlookup;	/* kernel references */
	_Atomic uint32_t nopen;		/* open handles */
};

#endif
