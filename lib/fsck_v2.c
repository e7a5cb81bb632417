// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fsck_v2: the check of a format-v2 image (what mkfs.twinfs writes).
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
 *   - free space through fspace (the allocator mount will use, opened on
 *     the geometry the superblock records): fspace_verify (FREE items
 *     inside one group, maximal, counted exactly by their GROUP summary;
 *     NODEMAP chunks inside the node area), its free count against the
 *     superblock's free_blocks, and the node map against the trees: every
 *     node reachable from the three roots is marked used and every used
 *     slot is such a node (nodes are recorded as the walk reads them
 *     through a store that wraps the mirror's);
 *   - every node named by one pointer only (a root or one parent: the
 *     recording store reads the pointers of each node the first time it
 *     reads it);
 *   - what the items mean together (fsck_v2_meta.c): names, link counts,
 *     orphans, extents against the refcount and free-space trees; and the
 *     POSIX ACL xattrs against the mode (fsck_v2_acl.c).  Their repairs
 *     are committed here (commit_repairs) as a checkpoint would;
 *   - the metadata log after the checkpoint, read as mount replays it
 *     (check_log);
 *   - every data block's copies against the EXTENT items' checksums,
 *     and where the log changes a file, its newest record's
 *     (fsck_v2_data.c);
 *   - a stale device: every live node, written data block and the log
 *     after the checkpoint compared there and, with -y/-p, brought up to
 *     date from the in-sync copies, then recorded in sync
 *     (fsck_v2_stale.c).
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

#include "bmap.h"
#include "format_v2.h"
#include "fsck_v2_i.h"

#define V2_FSCK_CACHE (64u << 20)
#define V2_FSCK_MAX_ITEM_LINES 20	/* then one line with the count */
#define V2_FSCK_MAX_MAP_LINES 10	/* node map disagreements, then a count */

static const char *const tree_name[V2_NTREES + 1] = { "?", "inodes", "refcounts", "free space" };

/* One more reference to the node at @addr (from the node at @from, or a
 * root when 0): a second one is reported (a node is never shared: freeing
 * it through one tree would free it under the other). */
static void point_at(struct v2ck *v, uint64_t addr, uint64_t from)
{
	uint64_t slot = (addr - v->sb->node_start) / BNODE_BLOCKS;

	if (addr < v->sb->node_start || slot >= v->nslots)
		return;		/* bt_verify reports the pointer */
	if (!bm_count(v->pointed, slot, slot + 1)) {
		bm_set(v->pointed, slot, slot + 1);
		return;
	}
	v->twice++;
	if (from)
		fsck_hard_problem(v->c, "node %llu is referenced twice (again by node %llu)",
				  (unsigned long long)addr, (unsigned long long)from);
	else
		fsck_hard_problem(v->c, "node %llu is referenced twice (again by a tree root)",
				  (unsigned long long)addr);
}

/* The recording store: reads go to the mirror's store, and every node read
 * intact is marked in reached.  Each node the walks reach is read at least
 * once (its first visit misses the cache), so after bt_verify of the three
 * trees reached holds exactly the nodes they reference.  fsck runs one
 * thread: no lock. */
static int rec_read(void *ctx, const struct bptr *p, void *buf, struct bpiece_chain *chain)
{
	struct v2ck *v = ctx;
	uint64_t a = p->addr, slot = (a - v->sb->node_start) / BNODE_BLOCKS;
	int ret;

	ret = v->s.store.ops->read(v->s.store.ctx, p, buf, chain);
	if (ret == 0 && a >= v->sb->node_start && (a - v->sb->node_start) % BNODE_BLOCKS == 0 &&
	    slot < v->nslots && !bm_count(v->reached, slot, slot + 1)) {
		char why[128];
		bool sound = bnode_check(buf, why, sizeof(why)) == 0;

		bm_set(v->reached, slot, slot + 1);
		v2stale_node(v, p, buf);
		/* Its first read: the children it names (a cache miss reads
		 * a node again, never with its pointers counted twice).  A
		 * node whose structure is bad is left to bt_verify. */
		for (unsigned i = 0; sound && bnode_level(buf) && i < bnode_nritems(buf); i++) {
			struct bptr c;

			bnode_ptr(buf, i, &c);
			point_at(v, c.addr, a);
		}
	}
	return ret;
}

static int rec_write(void *ctx, uint64_t addr, const void *buf)
{
	struct v2ck *v = ctx;

	return v->s.store.ops->write(v->s.store.ctx, addr, buf);
}

static int rec_flush(void *ctx)
{
	struct v2ck *v = ctx;

	return v->s.store.ops->flush ? v->s.store.ops->flush(v->s.store.ctx) : 0;
}

static int rec_alloc(void *ctx, uint64_t *addr)
{
	(void)ctx;
	(void)addr;
	return -EROFS;		/* fsck changes no tree */
}

static void rec_free(void *ctx, uint64_t addr)
{
	(void)ctx;
	(void)addr;
}

static const struct bstore_ops rec_ops = {
	.read = rec_read, .write = rec_write, .flush = rec_flush,
	.alloc = rec_alloc, .free = rec_free,
};

/* Open the devices fsck.c found usable at their slots in the mirror (a
 * stale one as MDEV_STALE: never read from, brought up to date by
 * fsck_v2_stale.c).  0 or an exit code. */
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
		/* As mount refuses it: the maps below are sized by the
		 * superblock's geometry, which a damaged (but verifying)
		 * superblock could make anything. */
		if (v->d[i]->size / TFS_BLOCK_SIZE < v->sb->total_blocks) {
			fsck_hard_problem(c, "%s: truncated: %llu blocks, the file system needs "
					  "%llu", usable[i],
					  (unsigned long long)(v->d[i]->size / TFS_BLOCK_SIZE),
					  (unsigned long long)v->sb->total_blocks);
			return FSCK_EXIT_UNCORRECTED;
		}
		if (dsb.dev_index < v->sb->ndevs)
			mdevs[dsb.dev_index] = v->d[i];
	}
	ret = v2stale_open(v, mdevs);
	if (ret == 0)
		ret = mirror_init(&v->m, v->be, mdevs, v->sb->ndevs);
	for (unsigned d = 0; ret == 0 && d < v->sb->ndevs; d++)
		if (mdevs[d] && v->sb->dev_state[d])
			atomic_store(&v->m.state[d], MDEV_STALE);
	if (ret == 0)
		ret = bstore_mirror_init(&v->s, &v->m, v->sb->node_start,
					 v->sb->node_blocks / BNODE_BLOCKS);
	if (ret == 0)
		ret = bcache_create(V2_FSCK_CACHE, &v->cache);
	v->nslots = v->sb->node_blocks / BNODE_BLOCKS;
	v->reached = calloc((v->nslots + 63) / 64, 8);
	v->pointed = calloc((v->nslots + 63) / 64, 8);
	if (ret == 0 && (!v->reached || !v->pointed))
		ret = -ENOMEM;
	if (ret == 0)
		ret = v2m_init(v);
	if (ret == 0)
		ret = v2acl_init(v);
	super_node_format(v->sb, &v->s.store);
	v->rec = (struct bstore){ .ops = &rec_ops, .ctx = v,
				  .short_nodes = v->s.store.short_nodes,
				  .pieces = v->s.store.pieces };
	if (ret < 0) {
		fsck_say(c, "cannot set up the node store: %s", strerror(-ret));
		return FSCK_EXIT_OPERROR;
	}
	v->m.no_repair = !c->fix;
	v->s.all_copies = true;
	c->be = v->be;
	c->devs = v->m.devs;
	c->ndevs = v->m.ndevs;
	c->mir = &v->m;
	c->res->ndevs = v->sb->ndevs;
	for (unsigned i = 0; i < v->sb->ndevs; i++)
		if (mdevs[i] || !c->res->dev[i].path[0])	/* v2stale_open names one it left out */
			snprintf(c->res->dev[i].path, sizeof(c->res->dev[i].path), "%s",
				 mdevs[i] ? mdevs[i]->path : "(missing)");
	return 0;
}

static void v2_close(struct v2ck *v)
{
	if (v->fs)
		fspace_close(v->fs);	/* before the cache its nodes are in */
	if (v->cache)
		bcache_destroy(v->cache);
	v2m_free(v);
	v2acl_free(v);
	v2data_free(v);
	v2stale_free(v);
	bstore_mirror_destroy(&v->s);
	free(v->reached);
	free(v->pointed);
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
	if (owner == V2_TREE_REFCOUNT)
		v->shared_items++;
	if (k->type == V2_INODE)
		count_inode(v, k, val, len);
	else if (owner == V2_TREE_INODES && k->type != V2_ORPHAN)	/* key id 0 */
		check_owned(v, k, len);
	v2m_item(v, owner, k, val, len);
	if (owner == V2_TREE_INODES &&
	    (k->type == V2_INODE || k->type == V2_XATTR || k->type == V2_XCHUNK))
		v2acl_item(v, k, val, len);
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

	ret = bt_open(&t, &v->rec, v->cache, owner, v->sb->fs_uuid, &v->sb->roots[owner - 1]);
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

/* The node map against the nodes the walks read (only when all three
 * trees were walked whole: otherwise reached is short).  A node of a tree
 * marked free would be handed out and overwritten; a used slot no tree
 * reaches is leaked. */
static void check_node_map(struct v2ck *v, struct fspace *fs)
{
	uint64_t bad = 0;

	for (uint64_t s = 0; s < v->nslots; s++) {
		uint64_t addr = v->sb->node_start + s * BNODE_BLOCKS;
		bool reached = bm_count(v->reached, s, s + 1);

		if (reached == fspace_node_used(fs, addr))
			continue;
		if (++bad <= V2_FSCK_MAX_MAP_LINES) {
			fsck_hard_problem(v->c, "free space: node %llu %s",
					  (unsigned long long)addr, reached ?
					  "belongs to a tree but is free in the node map" :
					  "is used in the node map but no tree reaches it");
		} else {
			v->c->res->errors++;
			v->c->left++;
		}
	}
	if (bad > V2_FSCK_MAX_MAP_LINES)
		fsck_say(v->c, "... %llu node map slots wrong in all", (unsigned long long)bad);
}

/* Free space as the allocator sees it: fspace opened on the superblock's
 * geometry and free-space root, fspace_verify, its free count, its node
 * map. */
static void check_free_space(struct v2ck *v)
{
	struct fspace_params p;
	struct fspace *fs;
	char why[256] = "";
	int ret;

	fspace_sb_params(v->sb, &p);
	ret = fspace_open(&v->rec, v->cache, v->sb->fs_uuid, &p, &v->sb->roots[V2_TREE_FREE - 1],
			  &fs);
	if (ret) {
		fsck_hard_problem(v->c, "free space: cannot open: %s", ret == -EUCLEAN ?
				  "a damaged group summary or node map item" : strerror(-ret));
		return;
	}
	ret = fspace_verify(fs, why, sizeof(why));
	if (ret)
		fsck_hard_problem(v->c, "free space: %s", ret == -EUCLEAN ? why : strerror(-ret));
	else if (fspace_free_blocks(fs) != v->sb->free_blocks)
		fsck_hard_problem(v->c, "free space: the tree counts %llu free blocks, the "
				  "superblock %llu", (unsigned long long)fspace_free_blocks(fs),
				  (unsigned long long)v->sb->free_blocks);
	if (v->c->o->verbose)
		fsck_say(v->c, "free space: %llu free blocks, %llu of %llu node slots used",
			 (unsigned long long)fspace_free_blocks(fs),
			 (unsigned long long)fspace_nodes_used(fs), (unsigned long long)v->nslots);
	if (!v->tree_bad[V2_TREE_INODES] && !v->tree_bad[V2_TREE_REFCOUNT])
		check_node_map(v, fs);
	if (ret)
		fspace_close(fs);	/* no data checks or repairs on it */
	else
		v->fs = fs;
}

/* Bad node copies found (and rewritten) on each device, from the
 * mirror's counters (one per node: bstore.h): reported like bad data
 * copies. */
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
 * slots of every in-sync device are rewritten (a damaged or missing slot,
 * a device behind), with the node copies found and repaired added to the
 * counters, as a v1 repair keeps them, and every in-sync device (a stale
 * one fsck_v2_stale.c brought up to date) recorded so.  A device still
 * stale is not written, as version 1 leaves it.  The trees are
 * unchanged. */
static int rewrite_supers(struct v2ck *v, const struct super *base)
{
	struct super sb = *base;
	int ret = 0;

	if (v->cont_cut)
		super_log_cont_clear(&sb);
	for (unsigned d = 0; d < sb.ndevs; d++) {
		sb.stats[d].csum_err += atomic_load(&v->m.ctr[d].csum_err);
		sb.stats[d].read_err += atomic_load(&v->m.ctr[d].read_err);
		sb.stats[d].repaired += atomic_load(&v->m.ctr[d].repaired);
		sb.stats[d].unrecoverable += atomic_load(&v->m.ctr[d].unrecoverable);
		if (v->m.devs[d] && atomic_load(&v->m.state[d]) == MDEV_OK)
			sb.dev_state[d] = 0;
	}
	for (unsigned round = 0; ret == 0 && round < 2; round++) {
		sb.generation++;
		for (unsigned d = 0; ret == 0 && d < sb.ndevs; d++) {
			struct dev *dev = v->m.devs[d];

			if (!dev || atomic_load(&v->m.state[d]) != MDEV_OK)
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

/* -y, or -p when every repair is one a crash explains: the repairs
 * fsck_v2_meta.c recorded, in one transaction of generation tree_gen + 1
 * on the inodes tree and the free space (its node map and groups), as a
 * checkpoint commits them: nodes written and flushed, then the superblocks
 * naming the new roots, and only then the replaced nodes given back. */
static int commit_repairs(struct v2ck *v)
{
	struct super sb = *v->sb;
	uint64_t gen = sb.tree_gen + 1, *freed = NULL;
	size_t nfreed = 0;
	struct btree t;
	int ret;

	ret = bt_open(&t, fspace_node_store(v->fs), v->cache, V2_TREE_INODES, sb.fs_uuid,
		      &sb.roots[V2_TREE_INODES - 1]);
	if (ret)
		return ret;
	ret = bt_begin(&t, gen);
	if (ret == 0)
		ret = v2m_apply(v, &t);
	if (ret == 0)
		ret = bt_commit(&t, &sb.roots[V2_TREE_INODES - 1], &freed, &nfreed);
	if (ret == 0)
		ret = fspace_commit(v->fs, gen, freed, nfreed, &sb.roots[V2_TREE_FREE - 1]);
	if (ret == 0) {
		sb.tree_gen = gen;
		if (v->next_ino > sb.next_ino)
			sb.next_ino = v->next_ino;
		sb.inodes = v->inodes;
		sb.free_blocks = fspace_free_blocks(v->fs);
		ret = rewrite_supers(v, &sb);
		if (ret == 0) {
			bt_release(&t, freed, nfreed);
			fspace_commit_done(v->fs);
		} else {
			fspace_commit_abort(v->fs);
		}
	}
	free(freed);
	bt_close(&t);	/* aborts the transaction after an error */
	return ret;
}

/* What the repairs come to: written (fixed), refused by -p, or left. */
static void finish(struct v2ck *v)
{
	struct fck *c = v->c;
	int ret;

	if (c->fix && c->o->mode == FSCK_PREEN && c->unsafe) {
		fsck_say(c, "UNEXPECTED INCONSISTENCY: run fsck.twinfs -y (or -n to see it all)");
		c->left += c->meta_fixes;
	} else if (c->fix && v2m_pending(v)) {
		ret = v->fs ? commit_repairs(v) : -EUCLEAN;
		if (ret == 0) {
			c->res->fixed += c->meta_fixes + v->synced;
		} else {
			fsck_say(c, "cannot write the repairs: %s", ret == -EUCLEAN ?
				 "the free-space tree is damaged" : strerror(-ret));
			c->left += c->meta_fixes;
		}
	} else if (c->fix && (c->meta_fixes || c->res->fixed || v->synced) &&
		   rewrite_supers(v, v->sb) == 0) {
		/* The superblock problems fsck.c found (slots, generations)
		 * are mended by rewriting them; repaired node copies are
		 * counted there, and stale devices brought up to date
		 * recorded in sync. */
		c->res->fixed += c->meta_fixes + v->synced;
	} else {
		c->left += c->meta_fixes;
	}
}

struct logscan {
	struct v2ck *v;
	uint64_t n;
};

static int log_rec_note(void *ctx, const struct log_rec *r)
{
	struct logscan *ls = ctx;

	ls->n++;
	v2data_note(ls->v, r);
	v2acl_note(ls->v, r);
	return 0;
}

#define V2_LOST_INOS 8		/* inodes named in the loss report */

struct lostinos {
	uint64_t ino[V2_LOST_INOS];
	unsigned n;
	bool more;
};

static void lost_ino(struct lostinos *li, uint64_t ino)
{
	for (unsigned i = 0; i < li->n; i++)
		if (li->ino[i] == ino)
			return;
	if (li->n < V2_LOST_INOS)
		li->ino[li->n++] = ino;
	else
		li->more = true;
}

/* The inodes a lost record changes (a name: its directory and its inode). */
static int lost_rec(void *ctx, const struct log_rec *r)
{
	struct lostinos *li = ctx;

	switch (r->type) {
	case LR_INODE:
		lost_ino(li, r->inode.ino);
		break;
	case LR_INODE_DEL:
		lost_ino(li, r->del.ino);
		break;
	case LR_DENT_SET:
	case LR_DENT_DEL:
		lost_ino(li, r->dent.parent);
		lost_ino(li, r->dent.ino);
		break;
	case LR_EXT_SET:
		lost_ino(li, r->ext.ino);
		break;
	case LR_EXT_CLEAR:
		lost_ino(li, r->clr.ino);
		break;
	default:
		lost_ino(li, r->xattr.ino);
		break;
	}
	return 0;
}

/* The log cannot go on past transaction @next (a chunk damaged on every
 * device, or a newer log a lost superblock began): say what the loss
 * drops, and with -y accept it as version 1's fsck does, by erasing the
 * header of every chunk from @next on (log_forget_from), so the next mount
 * replays up to the damage and finds no later chunk to refuse for; the
 * superblocks are rewritten by finish().  -p leaves it (not a repair a
 * crash explains).  Returns whether the log was cut. */
static bool cut_log(struct v2ck *v, const struct log_geom *g, uint64_t next, bool damaged)
{
	struct fck *c = v->c;
	uint64_t last;
	struct lostinos li = { .n = 0 };
	struct log_lost lost;
	char inos[V2_LOST_INOS * 24 + 16] = "";
	size_t o = 0;
	int ret;

	ret = log_lost(&v->m, g, next, lost_rec, &li, &lost);
	if (ret < 0) {
		fsck_say(c, "log: cannot read the chunks after transaction %llu: %s",
			 (unsigned long long)next, strerror(-ret));
		memset(&lost, 0, sizeof(lost));
	}
	for (unsigned i = 0; i < li.n && o < sizeof(inos); i++)
		o += (size_t)snprintf(inos + o, sizeof(inos) - o, "%s%llu", i ? ", " : "",
				      (unsigned long long)li.ino[i]);
	if (li.more && o < sizeof(inos))
		snprintf(inos + o, sizeof(inos) - o, ", ...");
	last = lost.last_seq >= next ? lost.last_seq : next;
	fsck_say(c, "log: %s transactions %llu to %llu (%llu acknowledged transactions lost%s; "
		 "%llu records in %llu later chunks%s%s)",
		 c->fix && c->o->mode == FSCK_REPAIR ? "cutting the log there drops" :
		 "accepting the loss (fsck.twinfs -y) drops",
		 (unsigned long long)next, (unsigned long long)last,
		 (unsigned long long)(last - next + 1),
		 damaged ? ", the damaged chunk's unreadable" : "",
		 (unsigned long long)lost.records, (unsigned long long)lost.chunks,
		 li.n ? ", changing inodes " : "", inos);
	if (!c->fix || c->o->mode != FSCK_REPAIR)
		return false;
	ret = log_forget_from(&v->m, g, next);
	if (ret < 0) {
		fsck_say(c, "cannot erase the log beyond the damage: %s", strerror(-ret));
		c->meta_fixes--;
		c->left++;
	}
	/* Cut inside the log a continued mount went on from (-o
	 * lazyreplay): that log now ends before cont_seq, which a mount
	 * refuses as damage, and the continuation's chunks are erased with
	 * the rest; the superblocks finish() writes name the old log alone. */
	if (ret == 0 && super_log_cont(v->sb) && next < v->sb->cont_seq)
		v->cont_cut = true;
	return ret == 0;
}

/* The metadata log after the checkpoint, read as mount replays it (its
 * records not applied: the trees checked are the checkpoint's; the file
 * blocks they change go to v2data_note).  A chunk no copy holds intact
 * with later ones after it, or a log going on past what the superblock
 * knows, makes mount refuse: an error here too, which -y accepts as
 * version 1's fsck does (cut_log). */
static void check_log(struct v2ck *v)
{
	struct fck *c = v->c;
	struct log_geom g;
	struct logscan ls = { .v = v };
	uint64_t end = 0, next = 0;
	int ret;

	/* With a continuation (-o lazyreplay): both segments, as mount. */
	super_log_geom(v->sb, &g);
	ret = log_replay(&v->m, &g, log_rec_note, &ls, &end, &next);
	v->lg = g;
	v->log_end = end;
	v->log_next = next;
	v->log_ok = ret == 0;
	if (ret == -EBADMSG || ret == -ESTALE) {
		/* As version 1 says it (mount.c's note_damage). */
		if (ret == -EBADMSG)
			fsck_meta_problem(c, false, "metadata damaged on every device: metadata "
					  "log chunk at block %llu (transaction %llu) is damaged "
					  "on every device and later transactions exist",
					  (unsigned long long)(v->sb->log_start + end),
					  (unsigned long long)next);
		else
			fsck_meta_problem(c, false, "metadata damaged on every device: the "
					  "metadata log goes on past what the superblock knows "
					  "(transaction %llu on): the newest superblock or "
					  "checkpoint is lost", (unsigned long long)next);
		v->log_ok = cut_log(v, &g, next, ret == -EBADMSG);
	} else if (ret < 0) {
		fsck_hard_problem(c, "cannot read the metadata log: %s", strerror(-ret));
		v->log_unread = true;
	} else if (c->o->verbose) {
		fsck_say(c, "log: %llu records after the checkpoint", (unsigned long long)ls.n);
	}
}

int fsck_v2_run(struct fck *c, const char *const *usable, unsigned nusable,
		const struct super *sb)
{
	struct v2ck v = { .c = c, .sb = sb };
	int rc;

	fsck_say(c, "format v2: checking the superblocks, trees, items, log and data copies");
	rc = v2_open(&v, usable, nusable);
	if (rc) {
		v2_close(&v);
		return rc;
	}
	for (uint64_t owner = 1; owner <= V2_NTREES; owner++)
		if (sb->roots[owner - 1].ptr.addr)
			point_at(&v, sb->roots[owner - 1].ptr.addr, 0);
	for (uint64_t owner = 1; owner <= V2_NTREES; owner++)
		check_tree(&v, owner);
	end_inode(&v);
	v2acl_end(&v);
	if (v.bad_items > V2_FSCK_MAX_ITEM_LINES)
		fsck_say(c, "... %u bad items in all", v.bad_items);
	if (!v.root_seen && !v.tree_bad[V2_TREE_INODES])
		fsck_hard_problem(c, "the root directory's inode is missing");
	if (!v.tree_bad[V2_TREE_FREE])
		check_free_space(&v);
	v2m_check(&v);
	node_copies(&v);
	check_log(&v);
	v2acl_report(&v);
	v2data_check(&v);
	v2stale_finish(&v);
	finish(&v);
	v2_close(&v);
	return 0;
}
