/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fsck_i.h: private to the fsck files.  fsck.c: reporting, the superblock,
 * checkpoint and log copies, and the driver (fsck_run); fsck_tree.c: the
 * inode index and the structure passes 1-4; fsck_data.c: pass 5 (blocks
 * referenced twice) and the data checksums on every copy.
 *
 * Single-threaded: nothing else uses the loaded file system.
 */
#ifndef TWINFS_FSCK_I_H
#define TWINFS_FSCK_I_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "fs_i.h"
#include "inode_i.h"
#include "fsck.h"

#define FSCK_RUN_BLOCKS 256u		/* blocks per device read (1 MiB) */
#define FSCK_PATH_MAX 4096

/* One inode in the index a pass works from. */
struct ient {
	uint64_t ino;
	struct tfs_inode *ip;
	uint32_t nent;		/* directory entries naming it (from any directory) */
	uint32_t nsub;		/* directories: entries in it naming a directory */
	uint64_t eparent;	/* a directory holding an entry for it (0: none) */
	const char *ename;	/* that entry's name (valid until the entry goes) */
	uint16_t enamelen;
	bool reach;
};

/* One reference from a file block to a physical block. */
struct bref {
	uint64_t phys;		/* without the unwritten flag */
	uint64_t csum;
	uint64_t ino, fblk;
	bool unwritten;
	bool cleared;
};

struct fck {
	const struct fsck_opts *o;
	FILE *out;
	struct fsck_result *res;
	struct tfs *fs;		/* format 1: the offline mount */
	/* The devices the data and copy checks read (format 1: the mount's,
	 * format 2: fsck_v2.c's mirror); devs[d] NULL when missing or left
	 * out; mir's counters get the repairs. */
	struct dev_backend *be;
	struct dev **devs;
	unsigned ndevs;
	struct mirror *mir;
	bool fix;		/* -y or -p */
	bool unsafe;		/* a repair -p may not make was needed */
	uint64_t meta_fixes;	/* problems whose repair needs the new checkpoint */
	uint64_t left;		/* problems that stay */
	bool need_ckpt;		/* metadata copies damaged: write a new checkpoint */
	bool slots_bad;		/* a superblock slot damaged: rewrite both */
	bool stale[DEV_MAX];	/* device marked stale */
	uint64_t stale_unfixed[DEV_MAX]; /* its blocks that could not be brought up to date */
	bool missing[DEV_MAX];	/* device index absent */

	struct ient *iv;
	size_t niv;
	struct bref *refs;
	size_t nrefs, caprefs;
	uint64_t walk_ino;	/* extent walk context */
};

/* ---- reporting (fsck.c) ---- */
/* One line to the report. */
void fsck_say(struct fck *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A structural problem whose repair is in memory until the checkpoint;
 * !safe: one -p may not repair. */
void fsck_meta_problem(struct fck *c, bool safe, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* A problem nothing here can fix. */
void fsck_hard_problem(struct fck *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* ---- one device's copy (fsck.c) ---- */
int fsck_read_dev(struct fck *c, unsigned d, uint64_t blk, void *buf, uint32_t n);
int fsck_write_dev(struct fck *c, unsigned d, uint64_t blk, const void *buf, uint32_t n);

/* ---- inode index and structure passes (fsck_tree.c) ---- */
/* (Re)build c->iv from the inode table, with who names each inode. */
int fsck_build_index(struct fck *c);
/* "/a/b/c" for inodes reachable by names, "<inode N>/rest" otherwise. */
const char *fsck_ipath(struct fck *c, uint64_t ino, char *buf, size_t len);
/* Make n file blocks from fblk a hole (in memory, like every repair). */
int fsck_clear_blocks(struct fck *c, uint64_t ino, uint64_t fblk, uint64_t n);
int fsck_pass_inodes(struct fck *c);	/* 1: inodes on their own */
int fsck_pass_dents(struct fck *c);	/* 2: directory entries */
int fsck_pass_reach(struct fck *c);	/* 3: reachability, orphans, lost+found */
int fsck_pass_counts(struct fck *c);	/* 4: link counts and ".." */

/* ---- blocks and data (fsck_data.c) ---- */
int fsck_pass_blocks(struct fck *c);	/* 5: blocks referenced twice */
int fsck_pass_data(struct fck *c);	/* checksums of every data copy */
/* One FSCK_RUN_BLOCKS buffer per present device; 0 or -ENOMEM. */
int fsck_data_bufs(struct fck *c, uint8_t *bufs[DEV_MAX]);
void fsck_data_bufs_free(uint8_t *bufs[DEV_MAX]);
/* Check n <= FSCK_RUN_BLOCKS blocks of consecutive physical addresses
 * (run[i]->phys = run[0]->phys + i), each against its csum, on every
 * device copy: one read per device, bad copies reported (by inode and
 * offset) and, with -y/-p, rewritten from one that verifies; no copy
 * verifying is an error left. */
void fsck_data_run(struct fck *c, const struct bref *const *run, uint32_t n,
		   uint8_t *const *bufs);
/* -y/-p: flush what fsck_data_run rewrote. */
void fsck_data_flush(struct fck *c);

/* ---- format v2 (fsck_v2.c) ---- */
/* Check a format-v2 image whose newest superblock is @sb on the devices
 * scan_supers found usable; problems are counted in c->res.  0 or an exit
 * code (8) after printing why. */
int fsck_v2_run(struct fck *c, const char *const *usable, unsigned nusable,
		const struct super *sb);

#endif
