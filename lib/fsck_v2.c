// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fsck_v2: the check of a format-v2 image (experimental; mkfs -O v2).
 * fsck.c has already read and compared the superblocks of every device
 * (scan_supers) and calls fsck_v2_run with the newest one; this file checks
 * what v2 has so far, without the mount code (which refuses v2):
 *
 *   - every tree (inodes, refcounts, free space) with bt_verify: node
 *     checksums seeded with the address, generations and key ranges through
 *     every parent pointer, node structure, levels, owner and fs_uuid;
 *   - every item decoded with the strict decoders (v2item.c), in the tree
 *     its type belongs to;
 *   - the root directory's INODE item exists and is a directory;
 *   - every other item of the inodes tree follows its inode's INODE item
 *     and fits it (entries in directories, extents in regular files, the
 *     symlink chunks its target length gives, all of them);
 *   - FREE items lie in the data area after the node area, do not overlap,
 *     and add up to the superblock's free_blocks.
 *
 * Nodes are read through the node store on the mirror (bstore.c), which
 * tries every copy: a bad copy on one device is counted in the mirror's
 * counters and, with -y or -p, rewritten from a good one (with -n the
 * mirror is no_repair and the devices are opened read-only).  Those counts
 * become the report's bad/repaired copies and errors/fixed, as for data.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bcache.h"
#include "bstore.h"
#include "btree.h"
#include "fsck_i.h"
#include "v2item.h"

#define V2_FSCK_CACHE (64u << 20)
#define V2_FSCK_MAX_ITEM_LINES 20	/* then one line with the count */

static const char *const tree_name[V2_NTREES + 1] = { "?", "inodes", "refcounts", "free space" };

struct v2ck {
	struct fck *c;
	const struct super *sb;
	struct mirror m;
	struct bstore_mirror s;
	struct bcache *cache;
	struct dev_backend *be;
	struct dev *d[DEV_MAX];
	unsigned bad_items;
	bool root_seen;
	uint64_t free_end, free_sum;	/* FREE items so far */
	uint64_t nodes;			/* nodes verified (every copy) */
	/* The inode whose items the walk is in (items sort by inode, its
	 * INODE item first): what the others must agree with. */
	uint64_t cur_ino;		/* 0: none yet */
	uint32_t cur_mode, cur_tlen;
	unsigned cur_chunks;		/* SYMLINK items seen */
	bool tree_bad[V2_NTREES + 1];	/* could not be walked */
};

/* Open the devices fsck.c found usable at their slots in the mirror (a
 * stale one is left out, as mount would).  0 or an exit code. */
static int v2_open(struct v2ck *v, const char *const *usable, unsigned nusable)
{
	struct fck *c = v->c;
	char err[512], why[256];
	struct dev *mdevs[DEV_MAX] = { 0 };
	struct super dsb;
	int ret;

	ret = fs_backend_create(c->o->backend, NULL, &v->be, err, sizeof(err));
	if (ret < 0) {
		fsck_say(c, "%s", err);
		return FSCK_EXIT_OPERROR;
	}
	for (unsigned i = 0; i < nusable; i++) {
		ret = dev_open(usable[i], !c->fix, &v->d[i], err, sizeof(err));
		if (ret == 0)
			ret = dev_backend_attach(v->be, v->d[i]);
		if (ret == 0)
			ret = super_read_dev(v->be, v->d[i], &dsb, NULL, why, sizeof(why));
		if (ret < 0) {
			fsck_say(c, "%s: cannot open: %s", usable[i], ret == -EBUSY ?
				 "in use (mounted?)" : strerror(-ret));
			return FSCK_EXIT_OPERROR;
		}
		if (dsb.dev_index < v->sb->ndevs && !v->sb->dev_state[dsb.dev_index])
			mdevs[dsb.dev_index] = v->d[i];
	}
	ret = mirror_init(&v->m, v->be, mdevs, v->sb->ndevs);
	if (ret == 0)
		ret = bstore_mirror_init(&v->s, &v->m, v->sb->node_start,
					 v->sb->node_blocks / BNODE_BLOCKS);
	if (ret == 0)
		ret = bcache_create(V2_FSCK_CACHE, &v->cache);
	if (ret < 0) {
		fsck_say(c, "cannot set up the node store: %s", strerror(-ret));
		return FSCK_EXIT_OPERROR;
	}
	v->m.no_repair = !c->fix;
	v->s.all_copies = true;
	c->res->ndevs = v->sb->ndevs;
	for (unsigned i = 0; i < v->sb->ndevs; i++)
		snprintf(c->res->dev[i].path, sizeof(c->res->dev[i].path), "%s",
			 mdevs[i] ? mdevs[i]->path : "(missing)");
	return 0;
}

static void v2_close(struct v2ck *v)
{
	if (v->cache)
		bcache_destroy(v->cache);
	bstore_mirror_destroy(&v->s);
	if (v->be)
		dev_backend_destroy(v->be);
	for (unsigned i = 0; i < DEV_MAX; i++)
		dev_close(v->d[i]);
}

/* The symlink target of the inode the walk leaves is whole. */
static void end_inode(struct v2ck *v)
{
	if (v->cur_ino && v->cur_chunks != v2_symlink_chunks(v->cur_tlen))
		fsck_hard_problem(v->c, "inode %llu: symlink target has %u of its %u chunks",
				  (unsigned long long)v->cur_ino, v->cur_chunks,
				  v2_symlink_chunks(v->cur_tlen));
}

static void count_inode(struct v2ck *v, const struct bkey *k, const void *val, unsigned len)
{
	struct fsck_result *r = v->c->res;
	struct log_inode in;

	if (v2_inode_decode(k, val, len, &in))
		return;
	end_inode(v);
	v->cur_ino = in.ino;
	v->cur_mode = in.mode;
	v->cur_tlen = in.target_len;
	v->cur_chunks = 0;
	r->inodes++;
	if (S_ISDIR(in.mode))
		r->dirs++;
	else if (S_ISREG(in.mode))
		r->files++;
	else if (S_ISLNK(in.mode))
		r->symlinks++;
	else
		r->special++;
	if (in.ino == TFS_ROOT_INO) {
		v->root_seen = true;
		if (!S_ISDIR(in.mode))
			fsck_hard_problem(v->c, "the root inode is not a directory");
	}
}

/* Any other item of the inodes tree: it follows its inode's INODE item
 * and fits that inode (entries in directories, extents in files, the
 * symlink chunks a target of that length has, in order). */
static void check_owned(struct v2ck *v, const struct bkey *k, unsigned len)
{
	const char *bad = NULL;

	if (k->id != v->cur_ino)
		bad = "no INODE item";
	else if ((k->type == V2_DIRENT || k->type == V2_DIRINDEX) && !S_ISDIR(v->cur_mode))
		bad = "a directory entry in an inode that is not a directory";
	else if (k->type == V2_EXTENT && !S_ISREG(v->cur_mode))
		bad = "an extent in an inode that is not a regular file";
	else if (k->type == V2_SYMLINK &&
		 (k->off != v->cur_chunks || v2_symlink_check(k, len, v->cur_tlen)))
		bad = "a symlink chunk the target length does not have";
	if (k->type == V2_SYMLINK && k->id == v->cur_ino)
		v->cur_chunks++;
	if (bad)
		fsck_hard_problem(v->c, "tree inodes: item (%llu, %u, %llu): %s",
				  (unsigned long long)k->id, k->type, (unsigned long long)k->off,
				  bad);
}

/* FREE items come sorted by start: each must begin after the previous
 * one's end and stay in the data area after the node area. */
static void count_free(struct v2ck *v, const struct bkey *k)
{
	uint64_t lo = v->sb->node_start + v->sb->node_blocks, start, n;

	if (v2_free_decode(k, 0, &start, &n))
		return;
	if (start < lo || start < v->free_end || n > v->sb->total_blocks - start)
		fsck_hard_problem(v->c, "free space: blocks %llu..%llu overlap the node area, "
				  "another free run or the end of the device",
				  (unsigned long long)start, (unsigned long long)(start + n - 1));
	v->free_end = start + n;
	v->free_sum += n;
}

static void check_item(struct v2ck *v, uint64_t owner, const struct bkey *k, const void *val,
		       unsigned len)
{
	char why[200];

	if (v2_item_check(owner, v->sb->hash_seed, k, val, len, why, sizeof(why))) {
		if (++v->bad_items <= V2_FSCK_MAX_ITEM_LINES) {
			fsck_hard_problem(v->c, "tree %s: %s", tree_name[owner], why);
		} else {
			v->c->res->errors++;
			v->c->left++;
		}
		return;
	}
	if (k->type == V2_INODE)
		count_inode(v, k, val, len);
	else if (owner == V2_TREE_INODES)
		check_owned(v, k, len);
	else if (k->type == V2_FREE)
		count_free(v, k);
}

/* One tree: structure, then every item. */
static void check_tree(struct v2ck *v, uint64_t owner)
{
	struct fck *c = v->c;
	uint64_t nitems = 0, nnodes = 0;
	struct bt_iter it;
	struct btree t;
	struct bkey k;
	const void *val;
	unsigned len;
	int ret;

	ret = bt_open(&t, &v->s.store, v->cache, owner, v->sb->fs_uuid, &v->sb->roots[owner - 1]);
	if (ret) {
		fsck_hard_problem(c, "tree %s: cannot open: %s", tree_name[owner], strerror(-ret));
		return;
	}
	ret = bt_verify(&t, &nitems, &nnodes);
	if (ret) {
		fsck_hard_problem(c, "tree %s: %s", tree_name[owner],
				  ret == -EIO ? "a node no copy holds intact: unrecoverable"
					      : "structure damaged (node, key order or pointer)");
		v->tree_bad[owner] = true;
		goto out;
	}
	v->nodes += nnodes;
	if (c->o->verbose)
		fsck_say(c, "tree %s: %llu items in %llu nodes", tree_name[owner],
			 (unsigned long long)nitems, (unsigned long long)nnodes);
	ret = bt_iter_init(&it, &t, &bkey_min);
	while (ret == 0 && (ret = bt_iter_next(&it, &k, &val, &len)) == 0)
		check_item(v, owner, &k, val, len);
	if (ret != -ENOENT)
		v->tree_bad[owner] = true;
	if (ret != -ENOENT)
		fsck_hard_problem(c, "tree %s: walk stopped: %s", tree_name[owner], strerror(-ret));
	bt_iter_free(&it);
out:
	bt_close(&t);
}

/* Bad node copies found (and rewritten) on each device, from the
 * mirror's counters: reported like bad data copies. */
static void node_copies(struct v2ck *v)
{
	struct fck *c = v->c;
	uint64_t unrec = 0;

	/* An unrecoverable node is counted on one device: say it for all. */
	for (unsigned d = 0; d < v->m.ndevs; d++)
		unrec += atomic_load(&v->m.ctr[d].unrecoverable);

	for (unsigned d = 0; d < v->m.ndevs; d++) {
		uint64_t bad = atomic_load(&v->m.ctr[d].csum_err) + atomic_load(&v->m.ctr[d].read_err);
		uint64_t fixed = atomic_load(&v->m.ctr[d].repaired);

		if (v->m.devs[d])
			c->res->dev[d].blocks += v->nodes * BNODE_BLOCKS;
		bad /= BNODE_BLOCKS;
		fixed /= BNODE_BLOCKS;
		if (!bad)
			continue;
		c->res->dev[d].bad += bad;
		c->res->dev[d].repaired += fixed;
		c->res->errors += bad;
		c->res->fixed += fixed;
		c->left += bad - fixed;
		fsck_say(c, "%s: %llu bad node copies: %s", c->res->dev[d].path,
			 (unsigned long long)bad,
			 fixed == bad ? "rewritten from a good copy" :
			 !c->fix ? "not fixed (-n)" :
			 unrec ? "some have no good copy on any device" :
			 "REWRITE FAILED");
	}
}

/* -y/-p: write the superblock again, generation + 1 then + 2 so both
 * slots of every present device are rewritten (a damaged or missing slot,
 * a device behind), with the node copies found and repaired added to the
 * counters, as a v1 repair keeps them.  The trees are unchanged. */
static int rewrite_supers(struct v2ck *v)
{
	struct super sb = *v->sb;
	int ret = 0;

	for (unsigned d = 0; d < sb.ndevs; d++) {
		sb.stats[d].csum_err += atomic_load(&v->m.ctr[d].csum_err);
		sb.stats[d].read_err += atomic_load(&v->m.ctr[d].read_err);
		sb.stats[d].repaired += atomic_load(&v->m.ctr[d].repaired);
		sb.stats[d].unrecoverable += atomic_load(&v->m.ctr[d].unrecoverable);
	}
	for (unsigned round = 0; ret == 0 && round < 2; round++) {
		sb.generation++;
		for (unsigned d = 0; ret == 0 && d < sb.ndevs; d++) {
			struct dev *dev = v->m.devs[d];

			if (!dev)
				continue;
			sb.dev_index = d;
			memcpy(sb.dev_uuid, sb.dev_uuids[d], 16);
			ret = super_write_dev(v->be, dev, &sb);
			if (ret == 0)
				ret = dev_flush(v->be, dev);
		}
	}
	if (ret < 0)
		fsck_say(v->c, "cannot rewrite the superblocks: %s", strerror(-ret));
	return ret;
}

int fsck_v2_run(struct fck *c, const char *const *usable, unsigned nusable,
		const struct super *sb)
{
	struct v2ck v = { .c = c, .sb = sb };
	int rc;

	fsck_say(c, "format v2 (experimental): checking the superblocks, trees and items");
	rc = v2_open(&v, usable, nusable);
	if (rc) {
		v2_close(&v);
		return rc;
	}
	for (uint64_t owner = 1; owner <= V2_NTREES; owner++)
		check_tree(&v, owner);
	end_inode(&v);
	if (v.bad_items > V2_FSCK_MAX_ITEM_LINES)
		fsck_say(c, "... %u bad items in all", v.bad_items);
	if (!v.root_seen && !v.tree_bad[V2_TREE_INODES])
		fsck_hard_problem(c, "the root directory's inode is missing");
	if (!v.tree_bad[V2_TREE_FREE] && v.free_sum != sb->free_blocks)
		fsck_hard_problem(c, "free space: the tree lists %llu blocks, the superblock %llu",
				  (unsigned long long)v.free_sum,
				  (unsigned long long)sb->free_blocks);
	node_copies(&v);
	/* The superblock problems fsck.c found (slots, generations) are
	 * mended by rewriting them; repaired node copies are counted there. */
	if (c->fix && (c->meta_fixes || c->res->fixed) && rewrite_supers(&v) == 0)
		c->res->fixed += c->meta_fixes;
	else
		c->left += c->meta_fixes;
	v2_close(&v);
	return 0;
}
