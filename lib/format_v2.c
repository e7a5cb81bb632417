// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * format_v2: the format-v2 part of mkfs (mkfs.twinfs -O v2, experimental;
 * mount refuses such an image for now).  tfs_format (format.c) does the
 * checks and opens the devices, takes the superblock from format_v2_super,
 * then calls format_v2_write, which writes
 * on every device (after format.c cleared the superblock slots and the log
 * start): the trees through the node store on the mirror (lib/bstore.c) and the B+tree
 * (lib/btree.c), and superblock generation 1 naming their roots:
 *
 *   inodes (1)      the root directory's INODE item ("." and ".." are not
 *                   entries: ".." is the INODE's parent field, as in v1);
 *   refcounts (2)   empty (root address 0);
 *   free space (3)  what fspace (lib/fspace*.c) commits for a new file
 *                   system: the NODEMAP items marking the nodes of all
 *                   three trees (no GROUP or FREE item: a group without
 *                   a summary is wholly free).
 *
 * Nodes go to the node area, which starts the data area (see
 * docs/FORMAT.md "Device layout of version 2"); every node is allocated
 * through fspace_node_store, so the node map the free-space tree persists
 * marks exactly the nodes mkfs wrote, as it will for every commit after.
 * Errors leave one line in err.  Nothing here is used by mount.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bcache.h"
#include "bstore.h"
#include "btree.h"
#include "format_v2.h"
#include "fspace.h"
#include "fs_i.h"
#include "tlog.h"
#include "v2item.h"

#define V2_NODE_MIN_BLOCKS 1024ull		/* 256 nodes, 4 MiB */
#define V2_NODE_MAX_BLOCKS (1ull << 24)		/* 64 GiB */
#define V2_MKFS_CACHE (8u << 20)
#define V2_NODE_RESERVE_DIV 16		/* 1/16 of the slots for the free tree */

uint64_t format_v2_node_blocks(uint64_t total_blocks)
{
	uint64_t nb = total_blocks / 32;

	if (nb < V2_NODE_MIN_BLOCKS)
		nb = V2_NODE_MIN_BLOCKS;
	if (nb > V2_NODE_MAX_BLOCKS)
		nb = V2_NODE_MAX_BLOCKS;
	return nb & ~(uint64_t)(BNODE_BLOCKS - 1);
}

/* The new superblock: layout, node area, free count, fresh uuids, log_id
 * and hash seed; roots filled in later. */
int format_v2_super(struct super *sb, unsigned n, uint64_t total,
		    const struct tfs_format_opts *o, char *err, size_t errlen)
{
	int ret;

	memset(sb, 0, sizeof(*sb));
	super_layout(sb, total);
	sb->version = SUPER_VERSION_V2;
	sb->incompat = SUPER_INCOMPAT_V2_MAPPED;
	if (!o->no_short_nodes)
		sb->incompat |= SUPER_INCOMPAT_V2_SHORT_NODES;
	if (o->pieces && o->no_short_nodes) {
		tfs_seterr(err, errlen, "pieces need short nodes");
		return -EINVAL;
	}
	if (o->pieces)
		sb->incompat |= SUPER_INCOMPAT_V2_PIECES;
	sb->ndevs = n;
	ret = fs_fill_random(sb->fs_uuid, sizeof(sb->fs_uuid));
	for (unsigned i = 0; ret == 0 && i < n; i++)
		ret = fs_fill_random(sb->dev_uuids[i], 16);
	if (ret == 0)
		ret = fs_random_u64_nonzero(&sb->log_id);
	if (ret == 0)
		ret = fs_fill_random(&sb->hash_seed, sizeof(sb->hash_seed));
	if (ret < 0) {
		tfs_seterr(err, errlen, "getrandom: %s", strerror(-ret));
		return ret;
	}
	if (o->label)
		snprintf(sb->label, sizeof(sb->label), "%s", o->label);
	sb->ctime_ns = (uint64_t)fs_ts_ns(fs_now());
	sb->generation = 1;
	sb->tree_gen = 1;
	sb->state = SUPER_CLEAN;
	sb->log_head_seq = 1;
	sb->next_ino = TFS_ROOT_INO + 1;
	sb->inodes = 1;		/* the root directory's */
	sb->node_start = sb->data_start;
	sb->node_blocks = format_v2_node_blocks(total);
	if (sb->node_blocks >= total - sb->node_start) {
		tfs_seterr(err, errlen, "device too small for format v2");
		return -ENOSPC;
	}
	sb->free_blocks = total - sb->node_start - sb->node_blocks;
	sb->gblocks = FSPACE_GROUP_DEFAULT;
	sb->node_reserve = sb->node_blocks / BNODE_BLOCKS / V2_NODE_RESERVE_DIV;
	return 0;
}

/* One tree with the given items, committed at generation 1: *root. */
static int v2_tree(struct bstore *s, struct bcache *c, const struct super *sb, uint64_t owner,
		   const struct bkey *k, const void *val, unsigned len, struct broot *root)
{
	struct btree t;
	uint64_t *freed = NULL;
	size_t nfreed = 0;
	int ret;

	ret = bt_open(&t, s, c, owner, sb->fs_uuid, NULL);
	if (ret)
		return ret;
	ret = bt_begin(&t, sb->tree_gen);
	if (ret == 0)
		ret = bt_insert(&t, k, val, len);
	if (ret == 0)
		ret = bt_commit(&t, root, &freed, &nfreed);
	else
		bt_abort(&t);
	free(freed);		/* nothing was committed before: nothing to free */
	bt_close(&t);
	return ret;
}

/* The free-space tree last: its node map marks the nodes of the two
 * trees committed before it and its own (fspace_commit writes the map
 * until it no longer changes); free_blocks is what fspace counts. */
static int v2_free_tree(struct fspace *fs, struct super *sb)
{
	int ret;

	ret = fspace_commit(fs, sb->tree_gen, NULL, 0, &sb->roots[V2_TREE_FREE - 1]);
	if (ret)
		return ret;
	fspace_commit_done(fs);
	sb->free_blocks = fspace_free_blocks(fs);
	return 0;
}

static int v2_root_inode(const struct super *sb, uint8_t ival[V2_INODE_LEN])
{
	struct log_inode in;

	memset(&in, 0, sizeof(in));
	in.ino = TFS_ROOT_INO;
	in.parent = TFS_ROOT_INO;
	in.mode = S_IFDIR | 0755;
	in.uid = geteuid();
	in.gid = getegid();
	in.nlink = 2;
	in.gen = 1;
	in.atime_ns = in.mtime_ns = in.ctime_ns = in.btime_ns = (int64_t)sb->ctime_ns;
	return v2_inode_encode(&in, ival);
}

static int v2_trees(struct mirror *m, struct super *sb, char *err, size_t errlen)
{
	struct bstore_mirror s;
	struct fspace_params fp;
	struct fspace *fs = NULL;
	struct bcache *c = NULL;
	uint8_t ival[V2_INODE_LEN];
	struct bkey k;
	int ret;

	fspace_sb_params(sb, &fp);
	ret = bstore_mirror_init(&s, m, sb->node_start, fp.nslots);
	super_node_format(sb, &s.store);
	if (ret == 0)
		ret = bcache_create(V2_MKFS_CACHE, &c);
	if (ret == 0)
		ret = fspace_open(&s.store, c, sb->fs_uuid, &fp, NULL, &fs);
	if (ret < 0) {
		tfs_seterr(err, errlen, "cannot set up the node store: %s", strerror(-ret));
		goto out;
	}
	ret = v2_root_inode(sb, ival);
	k = v2_key_inode(TFS_ROOT_INO);
	if (ret == 0)
		ret = v2_tree(fspace_node_store(fs), c, sb, V2_TREE_INODES, &k, ival,
			      sizeof(ival), &sb->roots[V2_TREE_INODES - 1]);
	/* The refcount tree is empty: roots[V2_TREE_REFCOUNT - 1] stays 0. */
	if (ret == 0)
		ret = v2_free_tree(fs, sb);
	if (ret < 0)
		tfs_seterr(err, errlen, "cannot write the trees: %s", strerror(-ret));
out:
	if (fs)
		fspace_close(fs);
	if (c)
		bcache_destroy(c);
	bstore_mirror_destroy(&s);
	return ret;
}

/* Superblock generation 1 on every device (slot 1), flushed. */
static int v2_supers(struct dev_backend *be, struct dev **d, unsigned n, struct super *sb,
		     char *err, size_t errlen)
{
	int ret = 0;

	for (unsigned i = 0; ret == 0 && i < n; i++) {
		sb->dev_index = i;
		memcpy(sb->dev_uuid, sb->dev_uuids[i], 16);
		ret = super_write_dev(be, d[i], sb);
		if (ret == 0)
			ret = dev_flush(be, d[i]);
		if (ret < 0)
			tfs_seterr(err, errlen, "%s: cannot write the superblock: %s", d[i]->path,
				   strerror(-ret));
	}
	return ret;
}

int format_v2_write(struct dev_backend *be, struct dev **d, struct mirror *m, struct super *sb,
		    char *err, size_t errlen)
{
	int ret;

	ret = v2_trees(m, sb, err, errlen);
	if (ret == 0 && mirror_healthy(m) != m->ndevs) {
		ret = -EIO;
		tfs_seterr(err, errlen, "cannot write to the devices: %s", strerror(-ret));
	}
	if (ret == 0)
		ret = v2_supers(be, d, m->ndevs, sb, err, errlen);
	return ret;
}
