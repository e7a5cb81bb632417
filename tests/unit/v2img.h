/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Description: v2img.h: format-v2 images for the fsck tests (test_fsck_v2,
 * test_fsck_v2_meta): two file images formatted with mkfs -O v2, fsck run
 * into a string, and changes to the inode tree and free space committed
 * through btree + fspace with a new superblock, as mount will make them.
 * Failures are cmocka assertions.  Include after <cmocka.h>.
 */
#ifndef TWINFS_V2IMG_H
#define TWINFS_V2IMG_H

#include <stdbool.h>
#include <stdint.h>

#include "bcache.h"
#include "bstore.h"
#include "btree.h"
#include "fsck.h"
#include "fspace.h"
#include "mirror.h"
#include "super.h"
#include "v2item.h"

#define V2IMG_N 2

/* Make the images (64 MiB each, tag in their names) and format them v2;
 * 0 or -1 (cmocka setup). */
int v2img_setup(const char *tag);
void v2img_teardown(void);
/* The image paths (V2IMG_N), to mount them. */
const char *const *v2img_devs(void);
/* fsck in @mode; *out gets the report (free it). */
int v2img_fsck(int mode, char **out);
/* fsck in @mode must return @rc and print @want (NULL: anything). */
void v2img_expect_mode(int mode, int rc, const char *want);
/* The same with -n. */
void v2img_expect(int rc, const char *want);

/* The store on both images and the free space (fspace) of the current
 * roots: trees change through fspace_node_store, as mount will do it. */
struct img2 {
	struct dev_backend *be;
	struct dev *d[V2IMG_N];
	struct mirror m;
	struct bstore_mirror s;
	struct bcache *c;
	struct fspace *fs;
	struct super sb;
};

void img_open(struct img2 *x);
void img_close(struct img2 *x);
/* Write x->sb to both images (slot by generation). */
void write_supers(struct img2 *x);
/* Commit the items (if any) into the inode tree and the free space, a
 * superblock naming the new roots (generation + 1, free_blocks from
 * fspace) on both images; then close. */
void img_commit(struct img2 *x, const struct bkey *k, const void *const *v,
		const unsigned *len, unsigned n);

/* A batch of inode-tree changes: inserts (len >= 0) and deletes. */
#define V2B_MAX 64
struct v2batch {
	struct bkey k[V2B_MAX];
	uint8_t *v[V2B_MAX];	/* malloc'd copies; NULL: delete */
	unsigned len[V2B_MAX];
	unsigned n;
	uint64_t top_ino;	/* largest inode inserted */
};
void v2b_put(struct v2batch *b, struct bkey k, const void *v, unsigned len);
void v2b_del(struct v2batch *b, struct bkey k);
void v2b_inode(struct v2batch *b, uint64_t ino, uint32_t mode, uint32_t nlink, uint64_t parent);
/* The DIRENT item of one name (alone under its hash) and/or its DIRINDEX
 * item at @cookie. */
void v2b_dirent(struct v2batch *b, uint64_t seed, uint64_t dir, const char *name, uint64_t ino,
		uint8_t dtype);
void v2b_dirindex(struct v2batch *b, uint64_t dir, uint64_t cookie, const char *name,
		  uint64_t ino, uint8_t dtype);
/* An extent of @n blocks at @phys (unwritten: no csums); the INODE item
 * of @ino put earlier in the batch, if any, counts them (mapped). */
void v2b_extent(struct v2batch *b, uint64_t ino, uint64_t fblk, uint64_t phys, uint32_t n);
/* Commit the batch (and any fspace changes made on x->fs), raise next_ino
 * above every inode inserted, write the superblocks, close. */
void v2b_commit(struct img2 *x, struct v2batch *b);
/* The same into tree @owner (V2_TREE_REFCOUNT: REFCOUNT items). */
void v2b_commit_tree(struct img2 *x, uint64_t owner, struct v2batch *b);

#endif
