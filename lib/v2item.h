/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * v2item: the items of the format-v2 trees (docs/FORMAT.md, "Trees and
 * items"): their keys and the codec of every value.  Not used by mount yet;
 * mkfs -O v2 and fsck use it.
 *
 * Values are little-endian, field by field, and have exactly one valid
 * encoding: every decoder checks the length the fields imply, every range,
 * the order of the entries of a list and the key the value sits under, and
 * returns -EUCLEAN on anything else (the bytes come from a device and are
 * fuzzed: tests/fuzz/fuzz_v2item.c).  Decoded pointers (names, inline
 * values, csums) point into the value: unaligned, not NUL-terminated.
 *
 * The INODE value is the fixed part of version 1's INODE record body
 * (log_inode_put/get in logrec.c), one codec for both formats.
 *
 * Names are found by hash56(name): XXH3-64 of the name seeded with the file
 * system's hash_seed (random at mkfs, in the superblock, so nobody can make
 * names collide without knowing it), top 8 bits cleared.  Names whose hashes
 * collide share one item, a list sorted by name.
 *
 * Functions return 0 or -errno.
 */
#ifndef TWINFS_V2ITEM_H
#define TWINFS_V2ITEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bnode.h"
#include "log.h"

/* Tree ids (a node's owner). */
enum v2_tree {
	V2_TREE_INODES = 1,
	V2_TREE_REFCOUNT = 2,
	V2_TREE_FREE = 3,
	V2_NTREES = 3,
};

/* Item types (a key's type byte). */
enum v2_type {
	V2_INODE = 1,		/* (ino, 1, 0) */
	V2_SYMLINK = 2,		/* (ino, 2, chunk) */
	V2_DIRENT = 3,		/* (dir, 3, hash56(name)) */
	V2_DIRINDEX = 4,	/* (dir, 4, cookie) */
	V2_XATTR = 5,		/* (ino, 5, hash56(name)) */
	V2_XCHUNK = 6,		/* (ino, 6, vid << 16 | chunk) */
	V2_ORPHAN = 7,		/* (0, 7, ino): inode ino has link count 0 */
	V2_EXTENT = 8,		/* (ino, 8, first file block) */
	V2_REFCOUNT = 16,	/* (phys, 16, 0) */
	V2_FREE = 17,		/* (start, 17, n) */
	V2_GROUP = 18,		/* (0, 18, group): its summary */
	V2_NODEMAP = 19,	/* (0, 19, chunk): node slot bits */
};

#define V2_HASH_MASK ((1ull << 56) - 1)
#define V2_PHYS_LIMIT (1ull << 48)	/* block numbers below: 1 EiB devices */
#define V2_FBLK_LIMIT (1ull << 51)	/* file blocks below: bytes < 2^63 */

uint64_t v2_hash56(uint64_t seed, const char *name, size_t len);

/* Key builders. */
struct bkey v2_key_inode(uint64_t ino);
struct bkey v2_key_symlink(uint64_t ino, unsigned chunk);
struct bkey v2_key_dirent(uint64_t dir, uint64_t hash);
struct bkey v2_key_dirindex(uint64_t dir, uint64_t cookie);
struct bkey v2_key_xattr(uint64_t ino, uint64_t hash);
struct bkey v2_key_xchunk(uint64_t ino, uint64_t vid, unsigned chunk);
struct bkey v2_key_extent(uint64_t ino, uint64_t fblk);
struct bkey v2_key_orphan(uint64_t ino);
struct bkey v2_key_refcount(uint64_t phys);
struct bkey v2_key_free(uint64_t start, uint64_t n);

/* ---- INODE: the version 1 INODE body, target in SYMLINK items, then
 * in->mapped (the blocks the inode's EXTENT items map: 0 unless a regular
 * file, at most V2_FBLK_LIMIT) ---- */
#define V2_INODE_LEN (LOG_INODE_BODY + 8)	/* + mapped u64 */
/* -EINVAL for a field decode would refuse. */
int v2_inode_encode(const struct log_inode *in, uint8_t out[V2_INODE_LEN]);
int v2_inode_decode(const struct bkey *k, const void *val, unsigned len, struct log_inode *in);

/* ---- SYMLINK: target bytes [2048 n, 2048 n + 2048) ---- */
#define V2_SYMLINK_CHUNK 2048u
/* Chunks of a target of @target_len bytes, and the length of chunk @n
 * (0: no such chunk). */
unsigned v2_symlink_chunks(uint32_t target_len);
unsigned v2_symlink_chunk_len(uint32_t target_len, unsigned n);
/* Alone: 1..2048 bytes, chunk < 2; @target_len nonzero: exactly the length
 * chunk n of that target has. */
int v2_symlink_check(const struct bkey *k, unsigned len, uint32_t target_len);

/* ---- DIRENT (a list of entries) and DIRINDEX (one entry) ---- */
struct v2_dirent {
	uint64_t ino;
	uint8_t dtype;			/* DT_* of the child */
	uint16_t namelen;
	const char *name;
};
#define V2_DIRENT_HDR 11u		/* ino u64, dtype u8, namelen u16 */
#define V2_COOKIE_FIRST 2ull		/* 0 and 1 are "." and ".." */
/* @t is the DT_* of some file type (IFTODT of a mode twinfs makes). */
bool v2_dtype_ok(uint8_t t);
/* The next entry of a list at *pos (start at 0): 1 and *e, 0 at the end. */
int v2_dirent_next(const void *val, unsigned len, unsigned *pos, struct v2_dirent *e);
/* The whole DIRENT item: 1.. entries, names valid, hashing to k->off,
 * strictly ascending, no byte left over. */
int v2_dirent_check(uint64_t hseed, const struct bkey *k, const void *val, unsigned len);
/* Find by name: 0 and *e, or -ENOENT. */
int v2_dirent_find(const void *val, unsigned len, const char *name, uint16_t namelen,
		   struct v2_dirent *e);
/* Insert into a list of *len bytes in a buffer of cap (BNODE_MAX_VAL):
 * -EEXIST, -E2BIG (the item would not fit a node), -EINVAL. */
int v2_dirent_add(void *val, unsigned *len, unsigned cap, const struct v2_dirent *e);
/* Remove by name; *len 0 means the item goes.  -ENOENT. */
int v2_dirent_del(void *val, unsigned *len, const char *name, uint16_t namelen);
/* DIRINDEX value: exactly one entry (same bytes as in a DIRENT list). */
int v2_dirindex_encode(const struct v2_dirent *e, void *out, unsigned cap, unsigned *len);
int v2_dirindex_decode(const struct bkey *k, const void *val, unsigned len, struct v2_dirent *e);

/* ---- XATTR (a list of entries) and XCHUNK ---- */
struct v2_xattr {
	uint16_t namelen;
	uint32_t vallen;		/* the whole value, 0..65536 */
	uint64_t vid;			/* 0: inline; else its XCHUNK items' id */
	const char *name;
	const void *val;		/* inline value, NULL when chunked */
};
#define V2_XATTR_HDR 14u		/* namelen u16, vallen u32, vid u64 */
#define V2_XATTR_INLINE_MAX 1024u	/* values above go to XCHUNK items */
#define V2_XCHUNK_SIZE 4000u		/* bytes per chunk (the last: the rest) */
#define V2_VID_LIMIT (1ull << 40)
int v2_xattr_next(const void *val, unsigned len, unsigned *pos, struct v2_xattr *x);
int v2_xattr_check(uint64_t hseed, const struct bkey *k, const void *val, unsigned len);
int v2_xattr_find(const void *val, unsigned len, const char *name, uint16_t namelen,
		  struct v2_xattr *x);
int v2_xattr_add(void *val, unsigned *len, unsigned cap, const struct v2_xattr *x);
int v2_xattr_del(void *val, unsigned *len, const char *name, uint16_t namelen);
unsigned v2_xchunk_count(uint32_t vallen);
unsigned v2_xchunk_len(uint32_t vallen, unsigned chunk);
/* Alone: vid nonzero, 1..V2_XCHUNK_SIZE bytes, chunk < v2_xchunk_count(65536). */
int v2_xchunk_check(const struct bkey *k, unsigned len);

/* ---- EXTENT ---- */
struct v2_extent {
	uint64_t phys;			/* first physical block */
	uint32_t n;			/* blocks */
	bool unwritten;			/* reads as zeros; no csums */
	const void *csums;		/* written: n little-endian u64s */
};
#define V2_EXT_UNWRITTEN (1ull << 63)
#define V2_EXT_MAX_BLOCKS 256u		/* a written run: 1 MiB of csums per item */
#define V2_EXT_HDR 16u			/* phys u64, n u32, flags u32 */
/* Written: csums is n host u64s here (stored little-endian). */
int v2_extent_encode(uint64_t fblk, const struct v2_extent *e, void *out, unsigned cap,
		     unsigned *len);
int v2_extent_decode(const struct bkey *k, const void *val, unsigned len, struct v2_extent *e);
uint64_t v2_extent_csum(const struct v2_extent *e, unsigned i);

/* ---- REFCOUNT and FREE ---- */
#define V2_REFCOUNT_LEN 8u
int v2_refcount_encode(uint64_t phys, uint32_t n, uint32_t refs, uint8_t out[V2_REFCOUNT_LEN]);
int v2_refcount_decode(const struct bkey *k, const void *val, unsigned len, uint32_t *n,
		       uint32_t *refs);
/* FREE: no value; blocks [k->id, k->id + k->off) are free. */
int v2_free_decode(const struct bkey *k, unsigned len, uint64_t *start, uint64_t *n);

/* GROUP: free u64, maxrun u64, nextents u64 (fspace.c writes it):
 * free 0 exactly when maxrun and nextents are 0, maxrun <= free, and the
 * nextents runs fit in free blocks beside the longest one.  NODEMAP: 2048
 * bytes of slot bits, never all zero.  Both under key id 0; the group and
 * chunk numbers are checked against the geometry by fspace_verify. */
#define V2_GROUP_LEN 24u
#define V2_NODEMAP_LEN 2048u
int v2_group_decode(const struct bkey *k, const void *val, unsigned len, uint64_t *free,
		    uint64_t *maxrun, uint64_t *nextents);
int v2_nodemap_check(const struct bkey *k, const void *val, unsigned len);

/* ORPHAN: no value, key id 0, off the inode number (1 .. BKEY_OFF_MAX):
 * an inode whose link count is 0 (unlinked while open), so mount finds
 * what to reclaim without a walk of every inode. */
int v2_orphan_check(const struct bkey *k, unsigned len);

/* Any item of tree @owner: the type belongs to the tree and its value
 * decodes.  0 or -EUCLEAN with a reason. */
int v2_item_check(uint64_t owner, uint64_t hseed, const struct bkey *k, const void *val,
		  unsigned len, char *why, size_t whylen);

#endif
