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
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "extent.h"
#include "rangelock.h"

struct dir;		/* dir.h */
struct tfs;

#define ITABLE_FAULT_STRIPES 64

/*
 * The slot of @ino in a table of @size (a power of two, at least 2) slots:
 * Fibonacci hashing, which keeps the top bits of the product.  The bits
 * right above 32 spread poorly: 65,536 consecutive numbers met only 15,064
 * of 131,072 buckets there (chains of 4 and more), against all of them here.
 */
static inline size_t ino_slot(uint64_t ino, size_t size)
{
	return (size_t)((ino * 0x9E3779B97F4A7C15ull) >> (64 - __builtin_ctzll(size)));
}

/* The in-memory inode table: a power-of-two chained hash keyed by inode
 * number (fs->itab).  Format v2 puts its bounded cache here. */
/* One slot of a stub table: key 0 is a free slot.  stub_counts: the inode
 * number and the kernel's count; stub_ones: the number / 64 + 1 and a bit
 * per inode of those 64 whose count is 1. */
struct istub {
	uint64_t key, val;
};

/* An open-addressed table of cap slots (a power of two, or 0 and no
 * memory) holding n keys. */
struct stubtab {
	struct istub *s;
	size_t cap, n;
};

struct itable {
	pthread_rwlock_t lock;		/* protects the buckets and the chains */
	struct tfs_inode **b;		/* NULL until the first inode */
	size_t size;			/* power of two */
	_Atomic uint64_t n;		/* inodes in the table */
	/* Format v2 mounted lazily (icache.c): a miss faults the inode in
	 * from the INODES tree and clean inodes are dropped beyond max. */
	bool lazy;
	uint64_t max;			/* resident inodes the budget allows */
	/* The resident directories' entries, in inodes (icost): the clock
	 * keeps n + dir_cost within max, so a listing that faults in
	 * thousands of directories does not hold all their names. */
	_Atomic uint64_t dir_cost;
	int (*fill)(struct tfs *fs, struct tfs_inode *ip);		/* icache_fill_fn */
	int (*next)(struct tfs *fs, uint64_t after, uint64_t *ino);	/* icache_next_fn */
	int (*prefetch)(struct tfs *fs, const uint64_t *inos, size_t n);	/* icache_prefetch_fn; NULL: none */
	_Atomic uint64_t prefetch_reads;
	size_t hand;			/* the clock's bucket (under lock) */
	_Atomic uint64_t faults, evictions;
	_Atomic uint64_t absent;	/* fills that found no inode */
	_Atomic int64_t total;		/* inodes of the file system (lazy) */
	/* No inode above this number is in the trees (icache_enable,
	 * icache_raise_tree_max): its fault-in reads nothing. */
	_Atomic uint64_t tree_max;
	/* Lookup stubs (inode_cache.c): the kernel's lookup count of each
	 * inode dropped while the kernel held it, under the table lock.  A
	 * count of 1 (nearly all: one create, one lookup) is a bit in
	 * stub_ones, 64 consecutive numbers a slot; a larger count is a slot
	 * of its own in stub_counts.  A number has a stub only while it is
	 * not in the table, and then in one of the two only.  nstubs: both. */
	struct stubtab stub_ones, stub_counts;
	_Atomic uint64_t nstubs;
	/* Fault-ins of one inode number are serialized by its stripe: an
	 * inode is read only while it is in no table and nobody else reads it. */
	pthread_mutex_t fault_mu[ITABLE_FAULT_STRIPES];
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
	_Atomic bool used;		/* the inode cache's clock bit (icache.c) */
	/* What its fault-in counted in itab->dir_cost (a directory's entries,
	 * ICACHE_DIR_ENTS to an inode), taken back when it leaves the table. */
	uint32_t icost;

	pthread_mutex_t lock;		/* protects everything below except where noted */
	uint32_t mode, uid, gid, nlink, flags;
	uint64_t rdev, gen;
	uint64_t parent;		/* directories: for ".." */
	_Atomic uint64_t size;		/* written under lock; read lock-free by the data path */
	struct timespec atime, mtime, ctime, btime;
	/* Bumped (under lock) by every setattr that sets mtime; a write
	 * notes it when it starts and its publish leaves mtime alone if it
	 * moved (inode_mtime_gen).  Memory only. */
	_Atomic uint32_t mtime_gen;
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

/* ---- inside the metadata core: inode.c and the inode cache ---- */
struct tfs;
/* A new inode outside any table (one reference, the table's to be). */
struct tfs_inode *inode_alloc(uint64_t ino);
/* Free an inode's memory (no handle left), its blocks through @drop. */
void inode_release_mem(struct tfs_inode *ip, extent_drop_fn drop, void *ctx);
/* The table's inode @ino or NULL; the caller holds fs->itab->lock. */
struct tfs_inode *itable_find(struct tfs *fs, uint64_t ino);
/* Insert @ip (absent); the caller holds the lock for writing.  false
 * without memory. */
bool itable_insert(struct tfs *fs, struct tfs_inode *ip);

/* ---- the format v2 inode cache (inode_cache.c) ---- */
/* Fill @ip (not in the table) from the trees: 0, -ENOENT (no such inode),
 * -EIO, -EUCLEAN, -ENOMEM.  Runs in the caller's thread with no table lock. */
typedef int (*icache_fill_fn)(struct tfs *fs, struct tfs_inode *ip);
/* The first inode number > @after the trees hold: 0, -ENOENT at the end. */
typedef int (*icache_next_fn)(struct tfs *fs, uint64_t after, uint64_t *ino);
/* Read ahead the tree nodes of @n inodes (sorted, none resident): the
 * number of nodes read, or -errno. */
typedef int (*icache_prefetch_fn)(struct tfs *fs, const uint64_t *inos, size_t n);
void icache_set_prefetch(struct tfs *fs, icache_prefetch_fn prefetch);
/* Count @nread node reads (a read-ahead's result; < 0: none) in the stats. */
void icache_prefetched(struct tfs *fs, int nread);
/* The trees back the table from here: fill and next as above; lazy: a
 * miss faults the inode in and clean inodes beyond @max are dropped.
 * @tree_max: the trees hold no inode numbered above it. */
void icache_enable(struct tfs *fs, icache_fill_fn fill, icache_next_fn next, bool lazy,
		   uint64_t max, uint64_t tree_max);
/* The trees may hold inodes up to @ino from now on (never lowers): called
 * before a checkpoint puts one in. */
void icache_raise_tree_max(struct tfs *fs, uint64_t ino);
/* Read inode @ino in (a miss of the table): 0 and *out (with a handle
 * when @handle), or -ENOENT/-EIO/-EUCLEAN/-ENOMEM.  Never with a table
 * lock held; never on an I/O completion thread. */
int icache_fault(struct tfs *fs, uint64_t ino, bool handle, bool walk, struct tfs_inode **out);
/* FORGET of @n lookups of @ino (idelete.c) when it is not in the table: a
 * stub's count drops (the stub goes at 0) and true; false when @ino is
 * resident (or the mount not lazy): the caller drops the inode's count. */
bool icache_forget(struct tfs *fs, uint64_t ino, uint64_t n);

#endif
