// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ckpt_v2: mount a format v2 image and write its checkpoints into the trees
 * (ckpt_v2.h, FORMAT.md "Mounting version 2"); it reads and fills tfs_inode.
 *
 * Load.  The node store on the mirror (bstore_mirror), the node cache, fspace
 * over the free-space tree (its node store is where the INODES tree's nodes
 * come from and go back to), the INODES tree.  Every item is turned into what
 * version 1's checkpoint holds and applied the same way: INODE (with its
 * SYMLINK chunks) as LR_INODE, XATTR (with XCHUNK items) as LR_XATTR_SET,
 * EXTENT as LR_EXT_SET, all through meta_apply; DIRINDEX items go into the
 * directory with their cookie (dir_set_at), so readdir cookies stay what they
 * were; DIRENT items are the name index of the same entries and are not needed
 * in memory.  Items sort by inode and the INODE item comes first, so every
 * inode exists before its other items. Then the log is replayed on top exactly
 * as in version 1 (mount.c), with the changes noted for the next checkpoint.
 * The accounting is loaded from the free-space and refcount trees, and so is
 * fs->alloc (ckpt_v2_load_alloc, before the replay, which keeps it in step).
 *
 * Checkpoint.  Under ckpt_mu: the log barrier (everything up to seq is
 * applied), then the set of changes (v2dirty) is taken, so every record up to
 * seq is in it; one transaction of the INODES tree writes the items of those
 * inodes from memory, under ns_lock and each inode's range lock and lock, as
 * version 1 serializes them: INODE and SYMLINK items, all XATTR and XCHUNK
 * items of an inode whose xattrs changed, the DIRENT list and DIRINDEX item of
 * every name set or removed (DIRINDEX of removed cookies deleted), EXTENT
 * items of the changed ranges (ckpt_v2_put_extents), every item of a deleted
 * inode deleted; each EXTENT item deleted or inserted takes or gives its
 * blocks a reference in the accounting (ca, alloc_v2_ref), which thus counts
 * exactly the tree's EXTENT items.  Then ckpt_v2_sync_data_space (the
 * accounting into the free-space and refcount trees), bt_commit, fspace_commit
 * with the freed nodes, the write-intent bitmap, a flush, the superblock
 * (roots, tree_gen, ckpt_seq, log head, free_blocks) through sbc_commit, then
 * bt_release, fspace_commit_done and the log trimmed.  A failure before the
 * superblock gives the set of changes back (the log still holds them all);
 * nodes a commit freed whose superblock never became durable stay allocated
 * until the next commit that is (pending).
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "alloc_v2.h"
#include "bcache.h"
#include "bstore.h"
#include "btree.h"
#include "ckpt_v2.h"
#include "dir.h"
#include "extcache.h"
#include "extpend.h"
#include "fs_i.h"
#include "fspace.h"
#include "inode_i.h"
#include "sbcommit.h"
#include "v2dirty.h"
#include "v2ext.h"
#include "v2rebuild.h"
#include "v2item.h"
#include "v2prefetch.h"
#include "tlog.h"
#include "wib.h"

#define V2_DEL_BATCH 256		/* keys collected before deleting them */
#define V2_PART_SHARE 2			/* part commits at dirty_soft / this pinned */
#define V2_PART_MIN 64			/* nodes, at least */

struct ckpt_v2 {
	struct bstore_mirror s;		/* nodes on the mirror */
	bool s_init;
	struct bcache *cache;
	struct fspace *fsp;
	struct btree itree;		/* INODES */
	bool itree_open;
	struct btree rtree;		/* REFCOUNT */
	bool rtree_open;
	/* The references of the INODES tree's EXTENT items (not fs->alloc,
	 * whose map also holds blocks of writes not logged yet and frees
	 * not durable yet): loaded from the free-space and refcount trees,
	 * changed by the checkpoint as it changes EXTENT items
	 * (alloc_v2_ref), written back into those trees (alloc_v2.h). */
	struct alloc *ca;
	struct alloc_v2 *av;
	struct broot rroot;		/* REFCOUNT root of the open commit */
	struct v2dirty dirty;
	bool dirty_init;
	/* Nodes commits freed whose superblock is not durable yet (under
	 * ckpt_mu). */
	uint64_t *pending;
	size_t npending;
	/* The newest generation a commit used (under ckpt_mu): a commit
	 * whose superblock failed used one the superblock does not show. */
	uint64_t last_gen;
	/* INODE items in the INODES tree as memory has it (the committed
	 * tree plus a commit whose superblock failed), and the change the
	 * open transaction made (under ckpt_mu): the superblock's inodes. */
	uint64_t inodes;
	int64_t dinodes;
	/* The open INODES transaction's generation (under ckpt_mu), and the
	 * node cache's dirty bytes past which it is committed part way
	 * (commit_part). */
	uint64_t gen;
	uint64_t part_bytes;
};

/* ---- setup ---- */

void ckpt_v2_free(struct tfs *fs)
{
	struct ckpt_v2 *v = fs->v2;

	if (!v)
		return;
	fs->v2dirty = NULL;
	fs->dirty_nodes = NULL;		/* the cache goes below */
	fs->v2acct = NULL;
	fs->v2fsp = NULL;
	fs->v2av = NULL;
	if (v->av)
		alloc_v2_destroy(v->av);
	if (v->ca)
		alloc_destroy(v->ca);
	if (v->rtree_open)
		bt_close(&v->rtree);
	if (v->itree_open)
		bt_close(&v->itree);
	if (v->fsp)
		fspace_close(v->fsp);
	if (v->cache)
		bcache_destroy(v->cache);
	if (v->s_init)
		bstore_mirror_destroy(&v->s);
	if (v->dirty_init)
		v2d_destroy(&v->dirty);
	free(v->pending);
	free(v);
	fs->v2 = NULL;
}

/* An allocator over fs->alloc's area with the same reserve (so their
 * chunks of the used map line up), nothing in use. */
static int make_accounting(struct tfs *fs, struct alloc **out)
{
	uint64_t rs = 0, re = 0;

	if (alloc_reserve_range(fs->alloc, &rs, &re) == -ENOENT)
		rs = re = 0;
	return alloc_create(fs->sb.node_start + fs->sb.node_blocks, fs->sb.total_blocks, re - rs,
			    out);
}

static int v2_open(struct tfs *fs, uint64_t node_cache)
{
	const struct super *sb = &fs->sb;
	struct fspace_params fp;
	struct ckpt_v2 *v;
	int ret;

	v = calloc(1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	fs->v2 = v;
	v->inodes = sb->inodes;
	fspace_sb_params(sb, &fp);
	fp.budget = node_cache / 16;	/* clean group bitmaps kept (dbudget.c) */
	ret = v2d_init(&v->dirty);
	if (ret)
		return ret;
	v->dirty_init = true;
	ret = bstore_mirror_init(&v->s, &fs->mirror, sb->node_start, fp.nslots);
	if (ret)
		return ret;
	v->s_init = true;
	super_node_format(sb, &v->s.store);
	ret = bcache_create(node_cache, &v->cache);
	if (ret == 0)
		ret = fspace_open(&v->s.store, v->cache, sb->fs_uuid, &fp,
				  &sb->roots[V2_TREE_FREE - 1], &v->fsp);
	if (ret == 0)
		ret = bt_open(&v->itree, fspace_node_store(v->fsp), v->cache, V2_TREE_INODES,
			      sb->fs_uuid, &sb->roots[V2_TREE_INODES - 1]);
	if (ret == 0)
		v->itree_open = true;
	if (ret == 0) {
		struct extent_src src;

		v2ext_source(&v->itree, &src);
		ret = extcache_create(&src, EXTCACHE_DEFAULT_BUDGET, &fs->xc);
	}
	if (ret == 0)
		ret = bt_open(&v->rtree, fspace_node_store(v->fsp), v->cache, V2_TREE_REFCOUNT,
			      sb->fs_uuid, &sb->roots[V2_TREE_REFCOUNT - 1]);
	if (ret == 0)
		v->rtree_open = true;
	if (ret == 0)
		ret = make_accounting(fs, &v->ca);
	if (ret == 0)
		ret = alloc_v2_create(v->ca, v->fsp, &v->rtree, &v->av);
	if (ret == 0)
		ret = alloc_v2_load(v->av);
	return ret;
}

int ckpt_v2_load_alloc(struct tfs *fs)
{
	return alloc_v2_load_other(fs->v2->av, fs->alloc);
}

/* ---- load ---- */

/* The value of @k, which must be exactly @want bytes, into buf. */
static int lookup_exact(struct btree *t, const struct bkey *k, void *buf, unsigned want)
{
	unsigned len;
	int ret = bt_lookup(t, k, buf, want, &len);

	if (ret == -ENOENT || ret == -EOVERFLOW || (ret == 0 && len != want))
		return -EUCLEAN;
	return ret;
}

static int load_inode(struct tfs *fs, struct btree *t, struct tfs_inode *ip, const struct bkey *k,
		      const void *val, unsigned len)
{
	struct log_rec r = { .type = LR_INODE };
	char *target = NULL;
	int ret;

	ret = v2_inode_decode(k, val, len, &r.inode);
	if (ret)
		return ret;
	if (r.inode.target_len) {
		unsigned n = v2_symlink_chunks(r.inode.target_len);

		if (!S_ISLNK(r.inode.mode) || r.inode.target_len > LOG_SYMLINK_MAX)
			return -EUCLEAN;
		target = malloc(r.inode.target_len);
		if (!target)
			return -ENOMEM;
		for (unsigned c = 0; ret == 0 && c < n; c++) {
			struct bkey sk = v2_key_symlink(k->id, c);

			ret = lookup_exact(t, &sk, target + c * V2_SYMLINK_CHUNK,
					   v2_symlink_chunk_len(r.inode.target_len, c));
		}
		r.inode.target = target;
	}
	if (ret == 0)
		ret = meta_fill(fs, ip, &r);
	free(target);
	if (ret == 0) {
		/* Its map is the tree's: read by leaf when used; its count of
		 * mapped blocks is the INODE item's, so no EXTENT item is
		 * read to fill it. */
		extent_init_lazy(&ip->map, fs->xc, ip->ino, &ip->rl, 0, false);
		extent_count_mapped(&ip->map, r.inode.mapped);
	}
	return ret;
}

static int load_xattrs(struct tfs *fs, struct btree *t, struct tfs_inode *ip,
		       const struct bkey *k, const void *val, unsigned len)
{
	struct log_rec r = { .type = LR_XATTR_SET };
	struct v2_xattr x;
	unsigned pos = 0;
	int ret;

	while ((ret = v2_xattr_next(val, len, &pos, &x)) == 1) {
		uint8_t *buf = NULL;

		r.xattr.ino = k->id;
		r.xattr.namelen = x.namelen;
		r.xattr.name = x.name;
		r.xattr.vallen = x.vallen;
		r.xattr.val = x.val;
		if (x.vid) {
			buf = malloc(x.vallen ? x.vallen : 1);
			if (!buf)
				return -ENOMEM;
			for (unsigned c = 0; ret >= 0 && c < v2_xchunk_count(x.vallen); c++) {
				struct bkey ck = v2_key_xchunk(k->id, x.vid, c);

				ret = lookup_exact(t, &ck, buf + (size_t)c * V2_XCHUNK_SIZE,
						   v2_xchunk_len(x.vallen, c));
			}
			r.xattr.val = buf;
		}
		if (ret >= 0)
			ret = meta_fill(fs, ip, &r);
		free(buf);
		if (ret < 0)
			return ret;
	}
	return ret;
}

static int load_dirindex(struct tfs_inode *dp, const struct bkey *k, const void *val,
			 unsigned len)
{
	struct v2_dirent e;
	int ret;

	ret = v2_dirindex_decode(k, val, len, &e);
	if (ret)
		return ret;
	if (!dp->dir || e.ino == TFS_ROOT_INO || e.ino == k->id || e.ino >= (1ull << 62))
		return -EUCLEAN;
	/* The child's type (fsck holds it to the child's mode): a plain
	 * readdir hands it out without reading the child in.  A value no
	 * mode has is kept as unknown, and readdir reads the child. */
	ret = dir_set_at(dp->dir, e.name, e.namelen, e.ino, k->off,
			 v2_dtype_ok(e.dtype) ? e.dtype : DT_UNKNOWN);
	return ret == -EEXIST ? -EUCLEAN : ret;
}

/* One item of @ip other than its extents; the INODE item comes first. */
static int load_item(struct tfs *fs, struct btree *t, struct tfs_inode *ip,
		     const struct bkey *k, const void *val, unsigned len, bool first)
{
	if (first != (k->type == V2_INODE))
		return first ? -ENOENT : -EUCLEAN;
	switch (k->type) {
	case V2_INODE:
		return load_inode(fs, t, ip, k, val, len);
	case V2_DIRINDEX:
		return load_dirindex(ip, k, val, len);
	case V2_XATTR:
		return load_xattrs(fs, t, ip, k, val, len);
	case V2_SYMLINK:	/* read with their INODE */
	case V2_XCHUNK:		/* read with their XATTR */
	case V2_DIRENT:		/* the name index of the DIRINDEX entries */
		return 0;
	default:
		return -EUCLEAN;
	}
}

/* icache_fill_fn: inode @ip's items from the INODES tree, as the full load
 * of step 3 applied them: INODE (+SYMLINK, the mapped count), XATTR
 * (+XCHUNK), a directory's DIRINDEX entries with their cookies.  Its
 * EXTENT items are not read (the map reads them by leaf when used). */
static int v2_fill(struct tfs *fs, struct tfs_inode *ip)
{
	struct bkey lo = { .id = ip->ino, .type = 0, .off = 0 }, k;
	struct btree *t = &fs->v2->itree;
	struct bt_iter it;
	const void *val;
	unsigned len;
	bool first = true;
	int ret;

	ret = bt_iter_init(&it, t, &lo);
	if (ret)
		return ret;
	while ((ret = bt_iter_next(&it, &k, &val, &len)) == 0 && k.id == ip->ino &&
	       k.type < V2_EXTENT) {
		ret = load_item(fs, t, ip, &k, val, len, first);
		if (ret)
			break;
		if (first && ip->dir) {
			struct bkey at = { .id = ip->ino, .type = V2_DIRINDEX, .off = 0 };

			/* Its entries, the leaves together; past its DIRENT
			 * items, which are not read (the name index, as many
			 * bytes again: a cold listing read them for nothing). */
			icache_prefetched(fs, v2_prefetch_dir(t, ip->ino));
			bt_iter_free(&it);
			ret = bt_iter_init(&it, t, &at);
			if (ret)
				return ret;
		}
		first = false;
	}
	bt_iter_free(&it);
	if (ret == 0 || ret == -ENOENT)
		ret = first ? -ENOENT : 0;
	return ret;
}

/* icache_next_fn: the first INODE key with a number > @after. */
static int v2_next_ino(struct tfs *fs, uint64_t after, uint64_t *ino)
{
	struct bt_iter it;
	const void *val;
	unsigned len;
	struct bkey k;
	int ret;

	for (;;) {
		struct bkey lo = { .id = after + 1, .type = 0, .off = 0 };

		if (after == UINT64_MAX)
			return -ENOENT;
		ret = bt_iter_init(&it, &fs->v2->itree, &lo);
		if (ret)
			return ret;
		ret = bt_iter_next(&it, &k, &val, &len);
		bt_iter_free(&it);
		if (ret)
			return ret;
		if (k.type == V2_INODE) {
			*ino = k.id;
			return 0;
		}
		after = k.id;	/* items without an INODE item: fsck's business */
	}
}

static int v2_prefetch(struct tfs *fs, const uint64_t *inos, size_t n)	/* icache_prefetch_fn */
{
	return v2_prefetch_inodes(&fs->v2->itree, inos, n);
}

int ckpt_v2_peek(struct tfs *fs, uint64_t ino, struct v2_peek *out, extent_run_fn cb, void *ctx)
{
	struct bkey k = v2_key_inode(ino), lo = v2_key_extent(ino, 0);
	uint8_t ival[V2_INODE_LEN];
	struct log_inode li;
	struct bt_iter it;
	const void *val;
	unsigned len;
	int ret;

	ret = bt_lookup(&fs->v2->itree, &k, ival, sizeof(ival), &len);
	if (ret == 0)
		ret = v2_inode_decode(&k, ival, len, &li);
	if (ret)
		return ret == -EOVERFLOW ? -EUCLEAN : ret;
	out->mode = li.mode;
	out->nlink = li.nlink;
	out->mapped = li.mapped;
	if (!cb)
		return 0;
	ret = bt_iter_init(&it, &fs->v2->itree, &lo);
	if (ret)
		return ret;
	while ((ret = bt_iter_next(&it, &k, &val, &len)) == 0 && k.id == ino &&
	       k.type == V2_EXTENT) {
		struct v2_extent e;

		ret = v2_extent_decode(&k, val, len, &e);
		if (ret == 0)
			ret = cb(ctx, k.off, e.phys | (e.unwritten ? EXTENT_UNWRITTEN : 0), e.n, NULL);
		if (ret)
			break;
	}
	bt_iter_free(&it);
	return ret == -ENOENT ? 0 : ret;
}

int ckpt_v2_orphans(struct tfs *fs, uint64_t **inos, size_t *n)
{
	struct bkey lo = v2_key_orphan(0), k;
	uint64_t *v = NULL;
	size_t cap = 0;
	struct bt_iter it;
	const void *val;
	unsigned len;
	int ret;

	*inos = NULL;
	*n = 0;
	ret = bt_iter_init(&it, &fs->v2->itree, &lo);
	if (ret)
		return ret;
	while ((ret = bt_iter_next(&it, &k, &val, &len)) == 0 && k.id == 0 &&
	       k.type == V2_ORPHAN) {
		ret = v2_orphan_check(&k, len);
		if (ret)
			break;
		if (*n == cap) {
			uint64_t *p = realloc(v, (cap = cap ? 2 * cap : 64) * sizeof(*v));

			if (!p) {
				ret = -ENOMEM;
				break;
			}
			v = p;
		}
		v[(*n)++] = k.off;
	}
	bt_iter_free(&it);
	if (ret == 0 || ret == -ENOENT) {
		*inos = v;
		return 0;
	}
	free(v);
	*n = 0;
	return ret;
}

int ckpt_v2_max_ino(struct tfs *fs, uint64_t *ino)
{
	struct bkey hi = { .id = UINT64_MAX, .type = UINT8_MAX, .off = BKEY_OFF_MAX }, k;
	struct bt_iter it;
	const void *val;
	unsigned len;
	int ret;

	*ino = 0;
	ret = bt_iter_init(&it, &fs->v2->itree, &hi);
	if (ret)
		return ret;
	ret = bt_iter_prev(&it, &k, &val, &len);
	bt_iter_free(&it);
	if (ret == 0)
		*ino = k.id;
	return ret == -ENOENT ? 0 : ret;
}

struct btree *ckpt_v2_inodes(struct tfs *fs)
{
	return &fs->v2->itree;
}

struct btree *ckpt_v2_refs(struct tfs *fs)
{
	return &fs->v2->rtree;
}

/* Every inode into the table (fsck: offline, the whole tree checked). */
static int load_all(struct tfs *fs)
{
	uint64_t ino = 0;
	int ret;

	while ((ret = v2_next_ino(fs, ino, &ino)) == 0) {
		struct tfs_inode *ip;

		ret = icache_fault(fs, ino, false, true, &ip);
		if (ret)
			return ret;
	}
	return ret == -ENOENT ? 0 : ret;
}

/* TWINFS_V2_PART_NODES=n (tests: the crash explorer, the kill loop)
 * commits part way after every n dirty nodes. */
static uint64_t part_bytes(const struct tfs *fs)
{
	const char *env = getenv("TWINFS_V2_PART_NODES");
	uint64_t b = fs->dirty_soft / V2_PART_SHARE;

	if (env && atoi(env) > 0)
		return (uint64_t)atoi(env) * BNODE_SIZE;
	return b < V2_PART_MIN * BNODE_SIZE ? V2_PART_MIN * BNODE_SIZE : b;
}

/* TWINFS_V2_CKPT_PAUSE_MS=n (tests: v2ckptlog.sh) holds a checkpoint n ms
 * between taking its set of changes and writing them, so that operations
 * land in between. */
static void test_pause(void)
{
	const char *env = getenv("TWINFS_V2_CKPT_PAUSE_MS");

	if (env && atoi(env) > 0)
		nanosleep(&(struct timespec){ .tv_sec = atoi(env) / 1000,
					      .tv_nsec = atoi(env) % 1000 * 1000000L }, NULL);
}

int ckpt_v2_load(struct tfs *fs)
{
	uint64_t cache = fs->cache_bytes ? fs->cache_bytes : TFS_CACHE_DEFAULT;
	uint64_t max, node_base;
	int ret;

	/* A quarter each for resident inodes and the files' map leaves, the
	 * rest for tree nodes. */
	node_base = cache - 2 * (cache / TFS_CACHE_INODE_SHARE);
	ret = v2_open(fs, node_base);
	if (ret)
		return ret;
	/* The tree's largest number (one descent): numbers above it were
	 * made since the last checkpoint, and the replay's creates of them
	 * read nothing in (icache_raise_tree_max). */
	ret = ckpt_v2_max_ino(fs, &max);
	if (ret)
		return ret;
	extcache_set_budget(fs->xc, cache / TFS_CACHE_INODE_SHARE);
	extcache_set_compact(fs->xc, fs->compact_dirty);
	/* -o lazyreplay: the replay's pending records are held to what the
	 * map leaves may take, so at most doubling that budget. */
	extpend_set_max(fs->xc, fs->lazyreplay ? cache / TFS_CACHE_INODE_SHARE : 0);
	fs_dirty_setup(fs, cache, fs->v2->cache, node_base);
	fs->v2->part_bytes = part_bytes(fs);
	icache_enable(fs, v2_fill, v2_next_ino, fs->v2_lazy,
		      cache / TFS_CACHE_INODE_SHARE / TFS_CACHE_INODE_COST, max);
	icache_set_prefetch(fs, v2_prefetch);
	/* The count without a walk: the replay's creates and deletes keep it
	 * (fs_inew, fs_ifree), as they keep the tree's at the checkpoint. */
	icache_set_total(fs, fs->sb.inodes);
	if (!fs->v2_lazy) {
		ret = load_all(fs);
		if (ret)
			return ret;
	} else if (!inode_exists(fs, TFS_ROOT_INO)) {
		return -EUCLEAN;
	}
	/* From here on (log replay included) every change is noted for the
	 * next checkpoint. */
	fs->v2dirty = &fs->v2->dirty;
	fs->v2acct = fs->v2->ca;
	fs->v2fsp = fs->v2->fsp;
	fs->v2av = fs->v2->av;
	return 0;
}

/* ---- checkpoint: items of one inode ---- */

/* One EXTENT item's blocks lose (sign -1) or gain (+1) a reference in the
 * trees' accounting (@av; NULL: none). */
static int ref_item(struct alloc_v2 *av, const struct bkey *k, const void *val, unsigned len,
		    int sign)
{
	struct v2_extent e;
	int ret;

	if (!av || k->type != V2_EXTENT)
		return 0;
	ret = v2_extent_decode(k, val, len, &e);
	return ret ? ret : alloc_v2_ref(av, e.phys, e.n, sign);
}

/* Delete every item with a key in [lo, hi); the blocks of its EXTENT
 * items lose their reference in @av's accounting (NULL: none), and
 * *dinodes (NULL: none) one for each INODE item. */
static int del_range(struct btree *t, const struct bkey *lo, const struct bkey *hi,
		     struct alloc_v2 *av, int64_t *dinodes)
{
	struct bkey keys[V2_DEL_BATCH];
	int ret;

	for (;;) {
		struct bt_iter it;
		const void *val;
		unsigned len, n = 0;
		struct bkey k;

		ret = bt_iter_init(&it, t, lo);
		if (ret)
			return ret;
		while (n < V2_DEL_BATCH && (ret = bt_iter_next(&it, &k, &val, &len)) == 0 &&
		       bkey_cmp(&k, hi) < 0) {
			keys[n++] = k;
			if (dinodes)
				*dinodes -= k.type == V2_INODE;
			ret = ref_item(av, &k, val, len, -1);
			if (ret)
				break;
		}
		bt_iter_free(&it);
		if (ret && ret != -ENOENT)
			return ret;
		for (unsigned i = 0; i < n; i++) {
			ret = bt_delete(t, &keys[i]);
			if (ret)
				return ret;
		}
		if (n < V2_DEL_BATCH)
			return 0;
	}
}

/* The ORPHAN item of @ino present exactly when @orphan (an inode of a
 * number past what a key's off holds has none: unmount reclaims it). */
static int put_orphan(struct btree *t, uint64_t ino, bool orphan)
{
	struct bkey k = v2_key_orphan(ino);
	unsigned len;
	int ret;

	if (ino > BKEY_OFF_MAX)
		return 0;
	if (orphan)
		return bt_insert(t, &k, "", 0);
	ret = bt_lookup(t, &k, NULL, 0, &len);
	if (ret == 0)
		ret = bt_delete(t, &k);
	return ret == -ENOENT ? 0 : ret;
}

/* The INODE item from memory, with @mapped: the blocks the tree's EXTENT
 * items of the inode map once this transaction's changes are in; a new
 * item counts in *dinodes, and the ORPHAN item follows the link count. */
static int put_inode(struct btree *t, struct tfs_inode *ip, uint64_t mapped, int64_t *dinodes)
{
	uint8_t ival[V2_INODE_LEN];
	struct log_rec r;
	struct bkey k = v2_key_inode(ip->ino);
	unsigned len;
	bool had;
	int ret;

	memset(&r, 0, sizeof(r));
	fs_iencode(ip, &r);
	r.inode.mapped = S_ISREG(r.inode.mode) ? mapped : 0;
	ret = v2_inode_encode(&r.inode, ival);
	if (ret == 0) {
		ret = bt_lookup(t, &k, NULL, 0, &len);
		had = ret == -EOVERFLOW;
		ret = had || ret == -ENOENT ? 0 : ret;
	}
	if (ret == 0)
		ret = bt_insert(t, &k, ival, sizeof(ival));
	if (ret == 0 && !had)
		(*dinodes)++;
	/* A new inode with a name has no ORPHAN item to remove. */
	if (ret == 0 && (had || !r.inode.nlink))
		ret = put_orphan(t, ip->ino, !r.inode.nlink);
	for (unsigned c = 0; ret == 0 && c < v2_symlink_chunks(r.inode.target_len); c++) {
		k = v2_key_symlink(ip->ino, c);
		ret = bt_insert(t, &k, r.inode.target + c * V2_SYMLINK_CHUNK,
				v2_symlink_chunk_len(r.inode.target_len, c));
	}
	return ret;
}

/* Every XATTR and XCHUNK item of @ip rewritten from memory. */
static int put_xattrs(struct btree *t, uint64_t hseed, struct tfs_inode *ip, uint8_t *buf)
{
	struct bkey lo = { .id = ip->ino, .type = V2_XATTR, .off = 0 };
	struct bkey hi = { .id = ip->ino, .type = V2_XCHUNK + 1, .off = 0 };
	uint64_t vid = 0;
	int ret;

	ret = del_range(t, &lo, &hi, NULL, NULL);
	for (struct xattr *x = ip->xattrs; ret == 0 && x; x = x->next) {
		uint16_t nl = (uint16_t)strlen(x->name);
		struct v2_xattr xe = { .namelen = nl, .vallen = x->vallen, .name = x->name };
		struct bkey k = v2_key_xattr(ip->ino, v2_hash56(hseed, x->name, nl));
		unsigned len = 0;

		if (x->vallen > V2_XATTR_INLINE_MAX)
			xe.vid = ++vid;
		else
			xe.val = x->val;
		ret = bt_lookup(t, &k, buf, BNODE_MAX_VAL, &len);
		if (ret == -ENOENT) {
			len = 0;
			ret = 0;
		}
		if (ret == 0)
			ret = v2_xattr_add(buf, &len, BNODE_MAX_VAL, &xe);
		if (ret == 0)
			ret = bt_insert(t, &k, buf, len);
		for (unsigned c = 0; ret == 0 && xe.vid && c < v2_xchunk_count(x->vallen); c++) {
			k = v2_key_xchunk(ip->ino, xe.vid, c);
			ret = bt_insert(t, &k, (const uint8_t *)x->val + (size_t)c * V2_XCHUNK_SIZE,
					v2_xchunk_len(x->vallen, c));
		}
	}
	return ret;
}

/* The mapped count of inode @ino's INODE item in @t (0: none yet). */
static int tree_mapped(struct btree *t, uint64_t ino, uint64_t *mapped)
{
	uint8_t ival[V2_INODE_LEN];
	struct bkey k = v2_key_inode(ino);
	struct log_inode li;
	unsigned len;
	int ret = bt_lookup(t, &k, ival, sizeof(ival), &len);

	*mapped = 0;
	if (ret == -ENOENT)
		return 0;
	if (ret == 0)
		ret = v2_inode_decode(&k, ival, len, &li);
	if (ret == 0)
		*mapped = li.mapped;
	return ret == -EOVERFLOW ? -EUCLEAN : ret;
}

/* Has the open transaction pinned enough nodes for a part commit?  The
 * node cache's clean budget follows (the dirty budget counts the pins). */
static bool part_due(struct tfs *fs, struct ckpt_v2 *v)
{
	fs_dirty_refit(fs);
	return bcache_dirty_bytes(v->cache) >= v->part_bytes;
}

static int add_pending(struct ckpt_v2 *v, const uint64_t *freed, size_t n);

/* Part way through the INODES tree's transaction (ckpt_mu and ns_lock
 * held, no item half changed), when part_due: the tree is committed in
 * memory, so its nodes are written and become clean and evictable instead
 * of pinning the node cache until the end (nothing durable references
 * them until a superblock names the tree, after the last commit's flush),
 * and the next transaction opens at the next generation.  The accounting
 * keeps the reference changes of the items committed, the nodes the
 * commit freed wait for the superblock with the other pending ones.  A
 * later failure returns to this tree in memory, which the next checkpoint
 * rewrites from memory, as after a failed fspace_commit. */
static int commit_part(struct tfs *fs, struct ckpt_v2 *v)
{
	uint64_t *freed = NULL;
	size_t nfreed = 0;
	struct broot root;
	int ret;

	ret = bt_commit(&v->itree, &root, &freed, &nfreed);
	if (ret)
		return ret;
	alloc_v2_refs_kept(v->av);
	v->inodes += (uint64_t)v->dinodes;
	v->dinodes = 0;
	v->last_gen = v->gen;
	ret = add_pending(v, freed, nfreed);
	free(freed);
	atomic_fetch_add(&fs->ckpt_parts, 1);
	if (ret == 0)
		ret = bt_begin(&v->itree, ++v->gen);
	fs_dirty_refit(fs);
	return ret;
}

/* Everything @e says changed about one inode, as memory has it now.
 * Holds the inode's range lock (regular files) and its lock. */
static int put_one(struct tfs *fs, struct ckpt_v2 *v, const struct v2d_ino *e, uint8_t *buf)
{
	struct btree *t = &v->itree;
	struct alloc_v2 *av = v->av;
	struct bkey lo = { .id = e->ino, .type = 0, .off = 0 };
	struct bkey hi = { .id = e->ino + 1, .type = 0, .off = 0 };
	struct tfs_inode *ip;
	struct rl_range r;
	uint64_t mapped = 0;
	bool reg;
	int ret = 0;

	/* Deleted (numbers are never reused); any other read-in failure (-EIO,
	 * -ENOMEM, a death lost: v2dirty.h) fails the checkpoint. */
	ret = inode_get_walk(fs, e->ino, &ip);
	if (ret == -ENOENT) {
		ret = del_range(t, &lo, &hi, av, &v->dinodes);
		return ret ? ret : put_orphan(t, e->ino, false);
	}
	if (ret)
		return ret;
	pthread_mutex_lock(&ip->lock);
	reg = S_ISREG(ip->mode);
	pthread_mutex_unlock(&ip->lock);
	if (reg)
		rl_lock(&ip->rl, &r, 0, RL_EOF, false);
	pthread_mutex_lock(&ip->lock);
	/* The INODE item's mapped count follows its EXTENT items in the tree
	 * (what it held plus what this transaction changed), not memory's
	 * count, which may already hold changes of records after seq. */
	if (reg && ((e->flags & V2D_INODE) || e->next))
		ret = tree_mapped(t, ip->ino, &mapped);
	if (ret == 0 && (e->flags & V2D_XATTR))
		ret = put_xattrs(t, fs->sb.hash_seed, ip, buf);
	if (ret == 0)
		ret = ckpt_v2_put_names(fs, t, ip, e, buf);
	for (size_t i = 0; ret == 0 && reg && i < e->next; i++) {
		struct ckpt_v2_putcount pc = { 0, 0 };
		int64_t d;

		ret = ckpt_v2_put_extents(t, av, ip->ino, &ip->map, e->ext[i].from,
					  e->ext[i].to, &d, &pc);
		atomic_fetch_add(&fs->ckpt_ext_kept, pc.kept);
		atomic_fetch_add(&fs->ckpt_ext_rewritten, pc.rewritten);
		mapped = d < 0 && (uint64_t)-d > mapped ? 0 : mapped + (uint64_t)d;
		/* A part commit inside one file's ranges: its INODE item
		 * first, so the tree committed has its mapped count right. */
		if (ret == 0 && i + 1 < e->next && part_due(fs, v)) {
			ret = put_inode(t, ip, mapped, &v->dinodes);
			if (ret == 0)
				ret = commit_part(fs, v);
		}
	}
	if (ret == 0 && ((e->flags & V2D_INODE) || (reg && e->next)))
		ret = put_inode(t, ip, mapped, &v->dinodes);
	pthread_mutex_unlock(&ip->lock);
	if (reg)
		rl_unlock(&ip->rl, &r);
	inode_put(fs, ip);
	return ret;
}

/* The INODES tree's transaction is dropped: so are the reference changes
 * its EXTENT items made. */
static void abort_itree(struct ckpt_v2 *v)
{
	bt_abort(&v->itree);
	alloc_v2_refs_undo(v->av);
	v->dinodes = 0;
}

/* The INODES tree's transaction: every changed inode's items, committed
 * part way (commit_part) as often as its nodes ask; v->gen is the last
 * one's generation. */
static int put_changes(struct tfs *fs, struct ckpt_v2 *v, struct v2d_ino **vec, size_t n,
		       uint64_t gen)
{
	uint8_t *buf = malloc(BNODE_MAX_VAL);
	int ret;

	if (!buf)
		return -ENOMEM;
	/* Nodes above the durable superblock's generation (part commits, a
	 * checkpoint whose superblock failed) are free once not referenced. */
	bt_set_young(&v->itree, fs->sb.tree_gen + 1);
	ret = bt_begin(&v->itree, gen);
	if (ret) {
		free(buf);
		return ret;
	}
	v->gen = gen;
	pthread_mutex_lock(&fs->ns_lock);
	for (size_t i = 0; ret == 0 && i < n; i++) {
		ret = put_one(fs, v, vec[i], buf);
		if (ret == 0 && i + 1 < n && part_due(fs, v))
			ret = commit_part(fs, v);
	}
	pthread_mutex_unlock(&fs->ns_lock);
	free(buf);
	if (ret)
		abort_itree(v);
	return ret;
}

/* The data area into the trees, at the checkpoint's point: the shared
 * counts alloc.c changed as REFCOUNT items (a transaction of the refcount
 * tree at @gen, committed here, its freed nodes joining the pending ones),
 * then its used map into fspace for the chunks that changed, so
 * fspace_commit writes their FREE items.  The INODES tree's transaction is
 * open; on failure the caller aborts it. */
int ckpt_v2_sync_data_space(struct tfs *fs, uint64_t gen)
{
	struct ckpt_v2 *v = fs->v2;
	uint64_t *freed = NULL;
	size_t nfreed = 0;
	int ret;

	ret = bt_begin(&v->rtree, gen);
	if (ret)
		return ret;
	ret = alloc_v2_write_refs(v->av);
	if (ret) {
		bt_abort(&v->rtree);
		alloc_v2_refs_abort(v->av);
		return ret;
	}
	ret = bt_commit(&v->rtree, &v->rroot, &freed, &nfreed);
	if (ret) {
		bt_abort(&v->rtree);
		alloc_v2_refs_abort(v->av);
		return ret;
	}
	ret = add_pending(v, freed, nfreed);
	free(freed);
	if (ret == 0)
		ret = alloc_v2_sync_free(v->av);
	if (ret)
		alloc_v2_refs_abort(v->av);
	return ret;
}

/* ---- checkpoint: commit ---- */

static int add_pending(struct ckpt_v2 *v, const uint64_t *freed, size_t n)
{
	uint64_t *p;

	if (!n)
		return 0;
	p = realloc(v->pending, (v->npending + n) * sizeof(*p));
	if (!p)
		return -ENOMEM;
	memcpy(p + v->npending, freed, n * sizeof(*p));
	v->pending = p;
	v->npending += n;
	return 0;
}

/* Blocks the trees' nodes took on disk so far (checkpoint.written_bytes). */
static uint64_t blocks_written(struct ckpt_v2 *v)
{
	return atomic_load(&v->itree.written_blocks) + atomic_load(&v->rtree.written_blocks) +
	       atomic_load(&fspace_tree(v->fsp)->written_blocks);
}

/* Commit the trees and publish them; ckpt_mu held, the INODES tree's
 * transaction open.  0 once the superblock naming them is durable; the
 * blocks written since @w0 (before the part commits) count in
 * checkpoint.written_bytes. */
static int commit_trees(struct tfs *fs, struct ckpt_v2 *v, uint64_t gen, uint64_t seq,
			uint64_t pos, uint64_t w0)
{
	struct broot iroot, froot;
	struct wib_loc wib = { 0 };
	uint64_t *freed = NULL;
	size_t nfreed = 0;
	struct super old;
	int ret;

	ret = ckpt_v2_sync_data_space(fs, gen);
	if (ret) {
		abort_itree(v);
		return ret;
	}
	ret = bt_commit(&v->itree, &iroot, &freed, &nfreed);
	if (ret) {
		abort_itree(v);
		return ret;
	}
	/* The accounting follows the tree in memory (see below). */
	alloc_v2_refs_kept(v->av);
	v->inodes += (uint64_t)v->dinodes;
	v->dinodes = 0;
	/* The tree in memory is the new one from here: its changes stay in
	 * it whether or not this superblock makes it. */
	ret = add_pending(v, freed, nfreed);
	free(freed);
	if (ret == 0)
		ret = fspace_commit(v->fsp, gen, v->pending, v->npending, &froot);
	if (ret) {
		alloc_v2_refs_abort(v->av);
		return ret;
	}
	/* The trees were written from memory, which already holds changes of
	 * records after seq (operations between the barrier and the moment
	 * put_changes reached their inodes): those records must be durable
	 * before a superblock names trees with their effects, or a crash
	 * keeps half of an operation (a directory's link count without its
	 * new entry).  Every such record was appended by now: its writer held
	 * the lock put_changes took (ns_lock, the inode's) until it was. */
	ret = log_commit(fs->log, UINT64_MAX);
	if (ret == 0)
		ret = wib_write(fs, &wib);
	if (ret == 0)
		ret = mirror_flush(&fs->mirror);
	if (ret) {
		wib_put(fs, wib.start, wib.blocks);
		fspace_commit_abort(v->fsp);
		alloc_v2_refs_abort(v->av);
		return ret;
	}
	old = fs->sb;
	fs->sb.roots[V2_TREE_INODES - 1] = iroot;
	fs->sb.roots[V2_TREE_FREE - 1] = froot;
	fs->sb.roots[V2_TREE_REFCOUNT - 1] = v->rroot;
	fs->sb.tree_gen = gen;
	fs->sb.ckpt_seq = seq;
	fs->sb.log_head_pos = pos;
	fs->sb.log_head_seq = seq + 1;
	/* A continuation (-o lazyreplay) ends here: the head is in the
	 * continued log or at its start, so the log from it is the live one. */
	fs->sb.log_id = super_live_log_id(&fs->sb);
	super_log_cont_clear(&fs->sb);
	fs->sb.next_ino = atomic_load(&fs->next_ino);
	fs->sb.inodes = v->inodes;
	fs->sb.free_blocks = fspace_free_blocks(v->fsp);
	fs->sb.wib_start = wib.start;
	fs->sb.wib_blocks = wib.blocks;
	fs->sb.wib_shift = wib.start ? wib.shift : 0;
	fs->sb.wib_csum = wib.csum;
	/* A transaction failed half way while memory was read (apply.c) */
	ret = atomic_load(&fs->unlogged) ? -EROFS : sbc_commit(fs);
	if (ret) {
		fs->sb = old;
		wib_put(fs, wib.start, wib.blocks);
		fspace_commit_abort(v->fsp);
		alloc_v2_refs_abort(v->av);
		return ret;
	}
	bt_release(&v->itree, v->pending, v->npending);
	v->npending = 0;
	fspace_commit_done(v->fsp);
	alloc_v2_refs_done(v->av);
	wib_put(fs, old.wib_start, old.wib_blocks);
	atomic_fetch_add(&fs->ckpt_written_blocks, blocks_written(v) - w0);
	return 0;
}

/* Nodes of the INODES and REFCOUNT trees written so far: the slots past
 * the free-space tree's reserve a checkpoint takes. */
static uint64_t tree_nodes_written(struct ckpt_v2 *v)
{
	return atomic_load(&v->itree.written) + atomic_load(&v->rtree.written);
}

/* The node gate counts on a checkpoint writing at most the slots its
 * arithmetic gives the set it took (fs_node_need_of): stats, and a warning
 * when one wrote more (the gate's margin is all that was left). */
static void slots_check(struct tfs *fs, uint64_t est, uint64_t used)
{
	atomic_store(&fs->ckpt_slots_estimated, est);
	atomic_store(&fs->ckpt_slots_used, used);
	if (used <= est)
		return;
	if (atomic_fetch_add(&fs->ckpt_slots_over, 1) < 10)
		tfs_log(LOG_WARNING, "checkpoint wrote %llu node slots, the node gate "
			"counted %llu: please report this", (unsigned long long)used,
			(unsigned long long)est);
}

int ckpt_v2_write(struct tfs *fs)
{
	struct ckpt_v2 *v = fs->v2;
	struct v2d_ino **vec = NULL;
	struct v2d_set set;
	uint64_t seq, pos, gen, epoch, w0, est, newn, t0;
	size_t n = 0;
	int ret;

	pthread_mutex_lock(&fs->ckpt_mu);
	atomic_store(&fs->ckpt_busy, true);
	/* Before the part commits: their nodes are this checkpoint's too. */
	w0 = blocks_written(v);
	ret = log_barrier(fs->log, &seq, &pos);
	if (ret < 0)
		goto out;
	/* Before the take: a change noted after it stamps its leaf with a
	 * later epoch, so the leaf stays until a checkpoint has it. */
	epoch = extcache_epoch_begin(fs->xc);
	/* After the barrier: every record up to seq has noted its change. */
	ret = v2d_take(&v->dirty, &set, &vec, &n);
	if (ret < 0)
		goto out;
	ret = v2rebuild_set(fs, &v->dirty, &set, &vec, &n);
	if (ret < 0)
		goto give_back;
	test_pause();
	est = fs_node_need_of(set.bytes - set.tbytes, set.touch, set.grow, set.other,
			      ckpt_v2_nodes_used(fs), &newn) + FS_NODE_MARGIN;
	t0 = tree_nodes_written(v);
	gen = (v->last_gen > fs->sb.tree_gen ? v->last_gen : fs->sb.tree_gen) + 1;
	/* Before any item goes in: every inode the set names was made
	 * below next_ino. */
	icache_raise_tree_max(fs, atomic_load(&fs->next_ino) - 1);
	ret = put_changes(fs, v, vec, n, gen);
	if (ret)
		goto give_back;
	/* -o lazyreplay: every record the mount's replay kept pending is in a range
	 * the set names (the replay noted each), so the changes above applied them
	 * all.  One left would be lost with the log this checkpoint frees: noted,
	 * and redone (-EAGAIN) with the set given back: the redo applies it. */
	if (extpend_late(fs->xc, &fs->mount_pend_late)) {
		abort_itree(v);
		ret = extpend_note_late(fs->xc, v2d_note_late, &v->dirty);
		ret = ret ? ret : -EAGAIN;
		goto give_back;
	}
	gen = v->gen;		/* past the part commits */
	v->last_gen = gen;
	ret = commit_trees(fs, v, gen, seq, pos, w0);
	if (ret) {
		/* A tree committed in memory keeps the changes; the log keeps
		 * them too until a superblock names a tree that holds them. */
		goto give_back;
	}
	log_set_head(fs->log, pos, seq + 1);
	atomic_fetch_add(&fs->ckpt_writes, 1);
	slots_check(fs, est, tree_nodes_written(v) - t0);
	extcache_committed(fs->xc, epoch);
	v2d_release(&v->dirty, &set);
	goto out;
give_back:
	v2d_give_back(&v->dirty, &set);
out:
	free(vec);
	atomic_store(&fs->ckpt_busy, false);
	pthread_mutex_unlock(&fs->ckpt_mu);
	if (ret == 0) {
		icache_trim(fs);	/* what it wrote may leave memory now */
		extcache_trim(fs->xc);	/* leaves it wrote may go now */
	}
	fs_dirty_ckpt_end(fs);	/* after the trims: writers waiting recount */
	return ret;
}

bool ckpt_v2_node_block(struct tfs *fs, uint64_t blk)
{
	const struct super *sb = &fs->sb;
	struct ckpt_v2 *v = fs->v2;

	if (!v || !v->fsp || blk < sb->node_start || blk - sb->node_start >= sb->node_blocks)
		return false;
	return fspace_node_used(v->fsp, blk - (blk - sb->node_start) % BNODE_BLOCKS);
}

uint64_t ckpt_v2_nodes_used(struct tfs *fs)
{
	return fs->v2fsp ? fspace_nodes_used(fs->v2fsp) : 0;
}

bool ckpt_v2_node_cache_stats(struct tfs *fs, struct bcache_stats *st)
{
	struct ckpt_v2 *v = fs->v2;

	if (!v || !v->cache)
		return false;
	bcache_stats(v->cache, st);
	return true;
}
