/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * file_i.h: private to the data path, shared by file.c (open, read, write,
 * truncate, fallocate, lseek) and reflink.c (copy_file_range).  The block
 * reader, the locked writer and the transaction helpers live in file.c;
 * reflink.c builds its copies from them.  Not for daemon/.
 */
#ifndef TWINFS_FILE_I_H
#define TWINFS_FILE_I_H

#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
	return atomic_load(&ip->size);
}

static inline bool file_writable(int flags)
{
	return (flags & O_ACCMODE) == O_WRONLY || (flags & O_ACCMODE) == O_RDWR;
}

/*
 * Add an LR_INODE for @ip and commit @tx under ip->lock.  The size and times
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
 * The halves of file_write_locked around the device writes.  stage: read
 * the edge blocks, copy the caller's bytes in (the one copy), place and
 * checksum (cw then says where buf's blocks go).  publish, once every run of
 * @cw is on the mirrors: the extent and inode records, committed (the
 * blocks are given back on failure).  Both under the range lock.
 */
int file_write_stage(struct tfs *fs, struct tfs_inode *ip, uint64_t off, size_t len,
		     tfs_fill_fn fill, void *ctx, uint8_t *buf, struct cow *cw);
int file_write_publish(struct tfs *fs, struct tfs_inode *ip, uint64_t off, size_t len,
		       struct cow *cw, uint64_t *seq);

/*
 * The start of every write: the argument checks, a bounce buffer and log
 * space (before any lock), then the range lock over the written blocks, or
 * the whole inode exclusively when the write extends the file or appends.
 * 0: locked (@r), *bufp held, *uoffp is where the write goes (EOF for
 * O_APPEND); 1: len is 0, nothing held; -errno: nothing held.
 */
int file_write_enter(struct tfs_file *f, off_t off, size_t len, struct rl_range *r,
		     uint64_t *uoffp, uint8_t **bufp);

/* Write [off, off + len) copy-on-write with the range lock already held over
 * its blocks (whole inode exclusively if it extends the file); buf is a
 * bounce buffer. */
int file_write_locked(struct tfs *fs, struct tfs_inode *ip, uint64_t off, size_t len,
		      tfs_fill_fn fill, void *ctx, uint8_t *buf, uint64_t *seq);

#endif
