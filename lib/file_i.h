/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * file_i.h: private to the data path, shared by file.c (open, read,
 * truncate, fallocate, lseek), file_write.c (the write pipeline),
 * file_async.c (its threads, job caches and the asynchronous read) and
 * reflink.c (copy_file_range).  The block reader and the transaction
 * helpers live in file.c, the locked writer in file_write.c; reflink.c
 * builds its copies from them.  Not for daemon/.
 */
#ifndef TWINFS_FILE_I_H
#define TWINFS_FILE_I_H

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fs_i.h"

#define BS TFS_BLOCK_SIZE
#define FILE_IO_BLOCKS (TFS_IO_MAX / TFS_BLOCK_SIZE + 1)	/* blocks one I/O can touch */
/* The largest file: the kernel's MAX_LFS_FILESIZE, which is what a FUSE
 * mount lets through (its last block is EXTENT_MAX_FBLK - 1). */
#define MAX_BYTES ((uint64_t)INT64_MAX)
_Static_assert(((MAX_BYTES + 1) >> TFS_BLOCK_SHIFT) == EXTENT_MAX_FBLK,
	       "the extent map covers the largest file");

/* Which timestamps an inode record refreshes. */
#define T_MTIME 1
#define T_CTIME 2

static inline uint64_t file_div_up(uint64_t a, uint64_t b)
{
	return (a + b - 1) / b;
}

static inline uint64_t file_isize(const struct tfs_inode *ip)
{
	return inode_size(ip);
}

/*
 * The map entry of file block @fblk with a hole as a zeroed entry (caller
 * holds a range lock over it): 0, or the lookup's error (-EIO once the map
 * is on disk), which the caller passes on: a block that cannot be looked up
 * is never read as a hole.  *e is zeroed on error too.
 */
static inline int file_extent(struct tfs_inode *ip, uint64_t fblk, struct extent_ent *e)
{
	int ret = inode_extent_lookup(ip, fblk, e);

	if (ret == -ENOENT)
		return 0;
	if (ret)
		memset(e, 0, sizeof(*e));
	return ret;
}

static inline bool file_writable(int flags)
{
	return (flags & O_ACCMODE) == O_WRONLY || (flags & O_ACCMODE) == O_RDWR;
}

/*
 * Add an LR_INODE for @ip and commit @tx under the inode lock.  The size and times
 * go through the record, never by hand: meta_tx_commit applies it to memory.
 * @size is the new size if @exact, else a lower bound (max with the current).
 */
int file_commit_inode(struct tfs *fs, struct tfs_inode *ip, struct meta_tx *tx,
		      uint64_t size, bool exact, int times, uint64_t *seq);

/* Add an LR_EXT_CLEAR of file blocks [fblk, fblk + n) of @ino to @tx. */
int file_clear_rec(struct meta_tx *tx, uint64_t ino, uint64_t fblk, uint64_t n);

/*
 * The plan of a read of file blocks [fblk, fblk + nblk) into buf (caller
 * holds a range lock over them): holes and unwritten blocks are zeroed in
 * buf, and each run of consecutive physical blocks (at most FILE_IO_BLOCKS)
 * goes to fn with its first block's offset in the read; csums[off..off+n)
 * then holds the run's expected checksums (csums has room for nblk).
 * Stops at, and returns, fn's first nonzero result.
 */
typedef int (*file_run_fn)(void *ctx, uint32_t off, uint64_t phys, uint32_t n);
int file_read_runs(struct tfs_inode *ip, uint64_t fblk, uint32_t nblk, uint8_t *buf,
		   uint64_t *csums, file_run_fn fn, void *ctx);

/* Read file blocks [fblk, fblk + nblk) into buf (caller holds a range lock
 * over them): holes and unwritten blocks read as zeros.  -EIO if a block
 * has no good copy. */
int file_read_blocks(struct tfs *fs, struct tfs_inode *ip, uint64_t fblk, uint32_t nblk,
		     uint8_t *buf);

/*
 * The runs holding the staged blocks [fblk, fblk + nblk): newly allocated
 * (fresh), or the block's own unwritten (fallocated) block, which is written
 * in place: it holds no data anyone can read (a crash before the commit
 * still reads it as zeros), and reusing it is what makes fallocate's
 * reservation worth anything under copy-on-write.
 */
struct cow {
	uint64_t fblk;
	uint32_t nblk, nruns;
	struct { uint64_t phys; uint32_t off, n; bool fresh; } runs[FILE_IO_BLOCKS];
	uint64_t csums[FILE_IO_BLOCKS];
};

/* Give back the fresh blocks of @cw (before anything points at them). */
void file_cow_put(struct tfs *fs, struct cow *cw);
/* After a failed commit: give back the fresh blocks the map does not point
 * to.  Caller holds the range lock over them. */
void file_cow_undo(struct tfs *fs, struct tfs_inode *ip, struct cow *cw);
/* Allocate (or reuse unwritten) blocks for file blocks [fblk, fblk + nblk)
 * and checksum buf's blocks for them into @cw.  Caller holds the range lock.
 * On error nothing stays allocated. */
int file_cow_place(struct tfs *fs, struct tfs_inode *ip, uint64_t fblk, uint32_t nblk,
		   const uint8_t *buf, struct cow *cw);

/*
 * A write's publish: file_commit_inode of a size lower bound @end that
 * refreshes ctime, and mtime unless a setattr set mtime since the write
 * began (inode_mtime_gen then differs from the @mtime_gen the write noted:
 * POSIX, a utimens after a write keeps its time).  With @nowait (a thread
 * that must not wait, the I/O completion thread): -EAGAIN, with nothing
 * done, when the inode lock is taken or the log has no room for @tx
 * without a commit.
 */
int file_commit_write(struct tfs *fs, struct tfs_inode *ip, struct meta_tx *tx, uint64_t end,
		      uint32_t mtime_gen, bool nowait, uint64_t *seq);

/* Add an LR_EXT_SET per run of a placed @cw to @tx. */
int file_cow_records(struct meta_tx *tx, uint64_t ino, const struct cow *cw);

/* Write every run of a placed @cw to every mirror (each run to all mirrors
 * at once).  On error the fresh blocks are given back. */
int file_cow_write(struct tfs *fs, const uint8_t *buf, struct cow *cw);

/* ---- the data path's threads and kept jobs (file_async.c) ---- */

/* Work handed to a queue thread: fn(item, ret) runs there. */
struct fa_item {
	struct fa_item *next;
	uint64_t seq;			/* syncer: durable up to this first */
	void (*fn)(struct fa_item *it, int ret);
};

/*
 * One thread and its FIFO, started on first use: the syncer (group commit
 * of O_DSYNC writes and fsyncs: one log commit up to the highest seq
 * queued, then ret is its result) or the worker (everything the I/O
 * completion thread must not wait for: degraded writes, metadata commits
 * that need a log commit first, read repair; ret is 0).  mu is a leaf.
 */
struct fa_queue {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct fa_item *head, **tail;
	unsigned long busy;		/* rounds still to run (tfs_drain waits for 0) */
	bool stop, running;
	pthread_t thr;
	const char *name;
	struct tfs *fs;
	void (*round)(struct fa_queue *q, struct fa_item *list);
};

/* Finished jobs kept for reuse: they carry placement tables of 8 to 20
 * KiB, past malloc's fast path, and W1 makes 30,000 a second.  mu: leaf. */
struct jcache {
	pthread_mutex_t mu;
	void *head;
	unsigned n;
};

/* fs->fa: the data path's state (set up by file_async_init). */
struct file_async {
	struct fa_queue sync, work;
	struct jcache wjc, rjc;		/* write and read jobs */
};

void *file_jc_get(struct jcache *c, size_t size);	/* contents are garbage */
void file_jc_put(struct jcache *c, void *p);
/* Queue @it for the syncer / the worker (run here if it cannot start). */
void file_sync_add(struct tfs *fs, struct fa_item *it);
/* Lead the syncer's next round on the caller's thread if it has none to
 * run (true: call file_sync_inline_done after the commit). */
bool file_sync_try_inline(struct tfs *fs);
void file_sync_inline_done(struct tfs *fs);
void file_work_add(struct tfs *fs, struct fa_item *it);

/* Write [off, off + len) copy-on-write with the range lock already held over
 * its blocks (whole inode exclusively if it extends the file); buf is a
 * bounce buffer. */
int file_write_locked(struct tfs *fs, struct tfs_inode *ip, uint64_t off, size_t len,
		      tfs_fill_fn fill, void *ctx, uint8_t *buf, uint64_t *seq);

#endif
