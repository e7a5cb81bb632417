/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * inode.h: the seam in front of the inode metadata.  Outside the metadata
 * core (inode_i.h says which files) an inode is an opaque handle:
 *
 *	struct tfs_inode *ip;
 *	int ret = inode_get(fs, ino, &ip);	// 0, -ENOENT, -EIO, -ENOMEM
 *	if (ret)
 *		return ret;
 *	inode_lock(ip);
 *	mode = inode_mode(ip);
 *	inode_unlock(ip);
 *	inode_put(fs, ip);
 *
 * A handle keeps the inode's memory alive, not the inode: an unlinked inode
 * whose last lookup and open go away is still deleted (its blocks freed,
 * the table forgets it) while handles remain, and later inode_get()s say
 * -ENOENT.  What keeps an inode from deletion is a kernel lookup
 * (inode_lookup_add) or an open (inode_open_add, dropped by fs_iput_open),
 * as before.  Changes go through meta_apply() (apply.c) only.
 *
 * On version 1 the in-memory table backs every call, so nothing fails but
 * a missing inode; on a format v2 mount the inode cache (inode_cache.c)
 * faults inodes in here from the INODES tree and may return -EIO, -EUCLEAN
 * or -ENOMEM, which callers pass on.  A miss may read a device: never call
 * inode_get for an inode not held on an I/O completion thread.
 *
 * Field accessors: the caller holds the inode lock (inode_lock) unless the
 * comment says otherwise.
 */
#ifndef TWINFS_INODE_H
#define TWINFS_INODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include "extent.h"

struct tfs;
struct tfs_inode;	/* inode_i.h: metadata core only */
struct dir;
struct rangelock;
struct log_rec;

/* One extended attribute of an inode's list (xattr.c reads it under the
 * inode lock; apply.c changes it). */
struct xattr {
	struct xattr *next;
	char *name;
	void *val;
	uint32_t vallen;
};

/* ---- handles ---- */
/* A counted handle to inode @ino: 0, or -ENOENT if there is none (or it is
 * being deleted).  Put it with inode_put(). */
int inode_get(struct tfs *fs, uint64_t ino, struct tfs_inode **out);
/* inode_get of a number a walk found (icursor, the checkpoint's set), not
 * a name or a handle: on format v2, while deaths since the checkpoint are
 * not all known (v2dirty.h, V2D_UNSURE), a read-in fails with -ENOMEM
 * rather than bring back a deleted inode. */
int inode_get_walk(struct tfs *fs, uint64_t ino, struct tfs_inode **out);
/* inode_get without reading anything in: -ENOENT when @ino is not in
 * memory (format v2: not resident; ckpt_v2_peek reads it from the tree). */
int inode_get_resident(struct tfs *fs, uint64_t ino, struct tfs_inode **out);
/* Whether inode @ino is there (a get and a put). */
bool inode_exists(struct tfs *fs, uint64_t ino);
/* Another handle to an inode the caller holds one of. */
struct tfs_inode *inode_grab(struct tfs_inode *ip);
/* Drop a handle (NULL is fine); the last one frees a deleted inode's memory.
 * Takes no lock but a deleted inode's teardown: callable under any lock. */
void inode_put(struct tfs *fs, struct tfs_inode *ip);

/* ---- lock and fields ---- */
void inode_lock(struct tfs_inode *ip);
/* inode_lock unless another thread holds it: 0, or -EBUSY (not taken), for
 * a thread that must not wait (the I/O completion thread). */
int inode_trylock(struct tfs_inode *ip);
void inode_unlock(struct tfs_inode *ip);
/* Log record @seq touched the inode (lock held): the newest one is kept. */
void inode_note_seq(struct tfs_inode *ip, uint64_t seq);
uint64_t inode_ino(const struct tfs_inode *ip);		/* no lock: fixed */
uint32_t inode_mode(const struct tfs_inode *ip);
uint32_t inode_nlink(const struct tfs_inode *ip);
uint32_t inode_uid(const struct tfs_inode *ip);
uint32_t inode_gid(const struct tfs_inode *ip);
uint32_t inode_flags(const struct tfs_inode *ip);
/* -EPERM when @ip (lock held) is immutable, or append-only and @append
 * (what an append-only inode refuses too): chattr's +i and +a (tfs.h). */
int inode_may_change(const struct tfs_inode *ip, bool append);
uint64_t inode_rdev(const struct tfs_inode *ip);
uint64_t inode_generation(const struct tfs_inode *ip);
uint64_t inode_parent(const struct tfs_inode *ip);	/* directories: ".." */
uint64_t inode_size(const struct tfs_inode *ip);		/* no lock: atomic */
struct timespec inode_atime(const struct tfs_inode *ip);
struct timespec inode_mtime(const struct tfs_inode *ip);
struct timespec inode_ctime(const struct tfs_inode *ip);
struct timespec inode_btime(const struct tfs_inode *ip);
/* Symlink target (NUL-terminated) or NULL. */
const char *inode_symlink(const struct tfs_inode *ip);
/* The entries of a directory, NULL for anything else.  A directory's dir
 * never changes while it lives, so testing for NULL needs no lock. */
struct dir *inode_dir(const struct tfs_inode *ip);
const struct xattr *inode_xattrs(const struct tfs_inode *ip);
/* Blocks mapped (st_blocks / 8); no lock: atomic. */
uint64_t inode_mapped(const struct tfs_inode *ip);
/* The mapped count the kernel was last told (tfs_blocks_seen); no lock. */
uint64_t inode_seen_mapped(const struct tfs_inode *ip);
void inode_set_seen_mapped(struct tfs_inode *ip, uint64_t mapped);
/* How many times a setattr set mtime explicitly (no lock: atomic).  A
 * write reads it when it starts; inode_mtime_bump, under the inode lock
 * with the setattr's record. */
uint32_t inode_mtime_gen(const struct tfs_inode *ip);
void inode_mtime_bump(struct tfs_inode *ip);
/* A regular file's range lock (rangelock.h); held around extent lookups. */
struct rangelock *inode_rl(struct tfs_inode *ip);
void fs_istat(struct tfs_inode *ip, struct stat *st);	/* caller holds the lock */
/* The same, for a reply the kernel may drop (SETATTR: fuse_flush_times
 * ignores the attributes), so the st_blocks it holds is not noted. */
void fs_istat_unseen(struct tfs_inode *ip, struct stat *st);
void fs_iencode(struct tfs_inode *ip, struct log_rec *r); /* LR_INODE of current state */

/* ---- a regular file's block map (caller holds the range lock) ---- */
/* The entry of file block @fblk: 0, -ENOENT for a hole (*out zeroed), or,
 * once the map is on disk (format v2), -EIO when it cannot be read. */
int inode_extent_lookup(struct tfs_inode *ip, uint64_t fblk, struct extent_ent *out);
/* First mapped block >= fblk, or EXTENT_MAX_FBLK. */
uint64_t inode_next_data(struct tfs_inode *ip, uint64_t fblk);
/* First unmapped block >= fblk, or EXTENT_MAX_FBLK. */
uint64_t inode_next_hole(struct tfs_inode *ip, uint64_t fblk);
/* extent_walk() over the inode's map; 0, cb's value, or -errno. */
int inode_extent_walk(struct tfs_inode *ip, uint64_t from, uint64_t to, extent_run_fn cb,
		      void *ctx);

/* ---- references that keep an inode from deletion (idelete.c drops them) ---- */
void inode_lookup_add(struct tfs_inode *ip, uint64_t n);	/* kernel lookups */
void inode_open_add(struct tfs_inode *ip);			/* an open handle */

/* ---- the table (inode.c): metadata core only ---- */
/* The inode without a handle, NULL if absent: for apply.c and the holders
 * of locks that keep it alive (replay, checkpoint, fsck). */
struct tfs_inode *fs_iget(struct tfs *fs, uint64_t ino);
/* The same with the error: 0, -ENOENT, or on a lazily loaded format v2
 * mount what reading the inode in gave (-EIO, -ENOMEM, -EUCLEAN).  An
 * inode read in without a handle may be dropped by the next miss of
 * another thread: the caller holds it (a handle) or runs alone (replay). */
int fs_ifind(struct tfs *fs, uint64_t ino, struct tfs_inode **out);
/* Create an empty in-memory inode and insert it (apply of LR_INODE). */
struct tfs_inode *fs_inew(struct tfs *fs, uint64_t ino);
/* Remove from the table and drop its blocks through @drop; the memory goes
 * with the last handle. */
void fs_ifree(struct tfs *fs, struct tfs_inode *ip, extent_drop_fn drop, void *ctx);
uint64_t fs_ialloc(struct tfs *fs);	/* next free inode number */
/* Every inode in the table, in table order, as handles in a malloc'ed
 * array: put each with inode_put and free the array (NULL when empty).
 * Takes the table lock shared.  fs_isnapshot_inos, the numbers only.  0 or
 * -ENOMEM. */
int fs_isnapshot(struct tfs *fs, struct tfs_inode ***out, size_t *nout);
void fs_isnapshot_put(struct tfs *fs, struct tfs_inode **v, size_t n);	/* puts and frees */
int fs_isnapshot_inos(struct tfs *fs, uint64_t **out, size_t *nout);
/* Mount/unmount (fs.c): init sets up fs->itab (lock and buckets);
 * destroy frees every inode without dropping blocks, and the table. */
int fs_itable_init(struct tfs *fs);
void fs_itable_destroy(struct tfs *fs);
uint64_t fs_ninodes(struct tfs *fs);	/* inodes of the fs (v1: the table's); no lock */

/* ---- every inode, one at a time (inode_cache.c) ---- */
/* A cursor over every inode number in ascending order: the resident ones
 * and, on a lazily loaded format v2 mount, those of the INODES tree that
 * are not deleted, read a leaf at a time.  Only numbers: get each with
 * inode_get (which may say -ENOENT: deleted since).  Memory: the resident
 * inodes' numbers. */
struct icursor {
	uint64_t *res;			/* resident numbers, sorted */
	size_t nres, i;
	uint64_t last;			/* last number returned */
	uint64_t tnext;			/* the tree's next number > last */
	bool tree_end, tree_valid;
};
int icursor_init(struct tfs *fs, struct icursor *c);
/* 0 and *ino, -ENOENT at the end, or -EIO/-ENOMEM. */
int icursor_next(struct tfs *fs, struct icursor *c, uint64_t *ino);
void icursor_free(struct icursor *c);
/* The inode cache's counters (lazy format v2; zeros otherwise). */
struct icache_stats {
	uint64_t resident, max, faults, evictions;
	uint64_t absent;		/* fault-ins that read the trees and found nothing */
	uint64_t stubs;			/* dropped inodes the kernel holds lookups of */
	uint64_t stub_bytes;		/* the stub table's memory */
	uint64_t prefetch_reads;	/* node reads icache_prefetch made */
	bool lazy;
};
void icache_stats(struct tfs *fs, struct icache_stats *st);
/* About to read these inodes (a readdir batch): those not resident are
 * read ahead from the trees, several node reads at once (lazy format v2;
 * nothing otherwise).  @inos is reordered.  Best effort, no error: a
 * fault-in reads what this did not.  Not on an I/O completion thread. */
void icache_prefetch(struct tfs *fs, uint64_t *inos, size_t n);
/* Mount counted the file system's inodes (fs_ninodes from here on). */
void icache_set_total(struct tfs *fs, uint64_t n);
/* Drop clean inodes until the cache is within its budget (after a
 * checkpoint made inodes clean). */
void icache_trim(struct tfs *fs);
/* Resident inodes past the budget (0 when not lazy), without a lock:
 * mostly changed ones, which stay until a checkpoint wrote them. */
uint64_t icache_over(struct tfs *fs);

/* ---- deleting (idelete.c) ---- */
/* Delete an inode whose nlink is 0 once it has no lookups and no opens.
 * The caller must know ip is still alive: a count dropped outside ns_lock
 * can race with another dropper that deletes first, so drop nopen with
 * fs_iput_open() instead of nopen-- followed by this. */
void fs_imaybe_delete(struct tfs *fs, struct tfs_inode *ip);
/* Drop one open reference (file release) under ns_lock and delete the
 * inode if that was the last reference to an unlinked inode. */
void fs_iput_open(struct tfs *fs, struct tfs_inode *ip);
/* The same with fs->ns_lock already held (and no inode lock). */
void fs_imaybe_delete_locked(struct tfs *fs, struct tfs_inode *ip);

#endif
