// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * apply: metadata transactions.  meta_apply() turns one state record into
 * the in-memory state; it is the only code that changes metadata, used live
 * (meta_tx_commit) and by checkpoint load and log replay alike, so memory
 * and the log cannot disagree.
 *
 * meta_tx_commit() applies the records decoded from the transaction's own
 * buffer (exactly the bytes replay will see), appends the buffer to the log
 * and hands the physical blocks the records dropped to the allocator as
 * deferred frees, released when the transaction's seq is durable.
 *
 * meta_apply() takes no lock: live, the caller holds the locks of the
 * objects the records touch; replay is single-threaded.  Only the itable
 * insert/remove inside fs_inew/fs_ifree locks (the table lock).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bnode.h"
#include "dir.h"
#include "event.h"
#include "extpend.h"
#include "fs_i.h"
#include "inode_i.h"
#include "tlog.h"
#include "v2dirty.h"
#include "v2item.h"

void meta_tx_init(struct meta_tx *tx)
{
	log_buf_init(&tx->buf);
	tx->v2lost = false;
	tx->drops = NULL;
	tx->ndrops = tx->capdrops = 0;
}

void meta_tx_free(struct meta_tx *tx)
{
	log_buf_free(&tx->buf);
	free(tx->drops);
	tx->drops = NULL;
	tx->ndrops = tx->capdrops = 0;
}

int meta_tx_add(struct meta_tx *tx, const struct log_rec *r)
{
	return log_buf_add(&tx->buf, r);
}

/* extent_drop_fn collecting runs into a meta_tx.  If memory runs out the
 * run is leaked until the next mount (which rebuilds the allocator from the
 * metadata): never freed early, which is what matters. */
static void drop_collect(void *ctx, uint64_t phys, uint64_t n)
{
	struct meta_tx *tx = ctx;

	phys = EXTENT_PHYS(phys);
	if (tx->ndrops && tx->drops[tx->ndrops - 1].phys + tx->drops[tx->ndrops - 1].n == phys) {
		tx->drops[tx->ndrops - 1].n += n;
		return;
	}
	if (tx->ndrops == tx->capdrops) {
		size_t ncap = tx->capdrops ? tx->capdrops * 2 : 8;
		void *nd = realloc(tx->drops, ncap * sizeof(*tx->drops));
		if (!nd) {
			tfs_log(LOG_ERR, "out of memory: %llu blocks leaked until remount",
				(unsigned long long)n);
			return;
		}
		tx->drops = nd;
		tx->capdrops = ncap;
	}
	tx->drops[tx->ndrops].phys = phys;
	tx->drops[tx->ndrops].n = n;
	tx->ndrops++;
}

/* extent_drop_fn of a replay that keeps the allocator in step
 * (fs->replay_alloc): the record is durable, the blocks are free now. */
static void drop_put(void *ctx, uint64_t phys, uint64_t n)
{
	alloc_put(ctx, EXTENT_PHYS(phys), n);
}

struct same_ctx {
	uint64_t fblk, phys;		/* the record's mapping */
	struct alloc *a;
};

/* A run of the map that already maps to the record's blocks keeps its one
 * reference (extent_set drops nothing there): take back the one just
 * added. */
static int same_run(void *ctx, uint64_t fblk, uint64_t phys, uint32_t n,
		    const struct extent_ent *ents)
{
	struct same_ctx *c = ctx;

	(void)ents;
	if (EXTENT_PHYS(phys) == c->phys + (fblk - c->fblk))
		alloc_put(c->a, EXTENT_PHYS(phys), n);
	return 0;
}

/* Replay of LR_EXT_SET keeping the allocator in step: every block the
 * record maps gains a reference, except where the map has it already;
 * extent_set drops (drop_put) what it replaces.  A block outside the data
 * area is damage the full rebuild refuses too. */
static int ext_set_counted(struct tfs *fs, struct tfs_inode *ip, const struct log_rec *r)
{
	uint64_t p = EXTENT_PHYS(r->ext.phys);
	struct same_ctx c = { r->ext.fblk, p, fs->alloc };
	int ret;

	if (r->ext.fblk >= EXTENT_MAX_FBLK || r->ext.n > EXTENT_MAX_FBLK - r->ext.fblk)
		return -EFBIG;
	if (alloc_use(fs->alloc, p, r->ext.n))
		return -EUCLEAN;
	/* A walk that fails would leave a block a reference too many: fail
	 * the replay, as the set would on the same leaf. */
	ret = extent_walk(&ip->map, r->ext.fblk, r->ext.fblk + r->ext.n, same_run, &c);
	if (ret)
		return ret;
	ret = extent_set(&ip->map, r->ext.fblk, r->ext.n, r->ext.phys, r->ext.csums, drop_put,
			 fs->alloc);
	return ret;
}

/* -o lazyreplay: the record kept pending on the file's map (extpend.h)
 * instead of read into its leaves; a set's blocks are marked used now, the
 * blocks it replaces are dropped when it is applied.  1: not kept (no room,
 * a clear over many leaves), apply it now, which applies what is pending
 * there first. */
static int ext_pend(struct tfs *fs, struct tfs_inode *ip, const struct log_rec *r)
{
	int ret;

	if (!fs->lazyreplay || !ip->map.xc)
		return 1;
	if (r->type == LR_EXT_CLEAR) {
		if (r->clr.fblk >= EXTENT_MAX_FBLK || !r->clr.n)
			return 1;
		ret = extpend_add(&ip->map, r->clr.fblk, r->clr.n, 0, NULL, drop_put, fs->alloc);
		return ret ? 1 : 0;
	}
	if (r->ext.fblk >= EXTENT_MAX_FBLK || r->ext.n > EXTENT_MAX_FBLK - r->ext.fblk ||
	    !r->ext.n)
		return 1;
	ret = extpend_add(&ip->map, r->ext.fblk, r->ext.n, r->ext.phys, r->ext.csums, drop_put,
			  fs->alloc);
	if (ret)
		return 1;
	return alloc_use(fs->alloc, EXTENT_PHYS(r->ext.phys), r->ext.n) ? -EUCLEAN : 0;
}

/* A record names an object that does not exist: fine during replay (a
 * checkpoint snapshot may lack objects later records touch), a bug live. */
static int missing(struct tfs *fs)
{
	return fs->replaying ? 0 : -EUCLEAN;
}

#define FS_INO_LIMIT (1ull << 62)

static void bump_next_ino(struct tfs *fs, uint64_t ino)
{
	uint64_t cur = atomic_load(&fs->next_ino);
	while (cur <= ino && !atomic_compare_exchange_weak(&fs->next_ino, &cur, ino + 1))
		;
}

/* Hostile images: inode 0 is no inode, a number near 2^64 would wrap
 * next_ino (and hand out the root's number again), the root must be a
 * directory. */
static int inode_rec_ok(const struct log_inode *li)
{
	if (!li->ino || li->ino >= FS_INO_LIMIT)
		return -EUCLEAN;
	if (li->ino == TFS_ROOT_INO && !S_ISDIR(li->mode))
		return -EUCLEAN;
	return 0;
}

/* The inode @ip (in the table or about to be) takes the record's state. */
static int inode_fill(struct tfs *fs, struct tfs_inode *ip, const struct log_inode *li)
{
	if (li->target_len) {
		if (!ip->symlink || strlen(ip->symlink) != li->target_len ||
		    memcmp(ip->symlink, li->target, li->target_len)) {
			char *t = strndup(li->target, li->target_len);
			if (!t)
				return -ENOMEM;
			free(ip->symlink);
			ip->symlink = t;
		}
	} else if (ip->symlink) {
		free(ip->symlink);
		ip->symlink = NULL;
	}
	if (S_ISDIR(li->mode) && !ip->dir) {
		ip->dir = dir_new();
		if (!ip->dir)
			return -ENOMEM;
	}
	ip->mode = li->mode;
	ip->uid = li->uid;
	ip->gid = li->gid;
	ip->nlink = li->nlink;
	__atomic_store_n(&ip->flags, li->flags, __ATOMIC_RELAXED);	/* inode_flags_relaxed */
	ip->rdev = li->rdev;
	ip->gen = li->gen;
	ip->parent = li->parent;
	atomic_store(&ip->size, li->size);
	ip->atime = fs_ns_ts(li->atime_ns);
	ip->mtime = fs_ns_ts(li->mtime_ns);
	ip->ctime = fs_ns_ts(li->ctime_ns);
	ip->btime = fs_ns_ts(li->btime_ns);
	bump_next_ino(fs, li->ino);
	return 0;
}

/* The inode of a record: 0, or -ENOENT (missing() decides), or on a lazily
 * loaded format v2 mount -EIO/-ENOMEM from reading it in. */
static int find(struct tfs *fs, uint64_t ino, struct tfs_inode **ip)
{
	return fs_ifind(fs, ino, ip);
}

static int apply_inode(struct tfs *fs, const struct log_inode *li)
{
	struct tfs_inode *ip;
	int ret = inode_rec_ok(li);

	if (ret)
		return ret;
	ret = find(fs, li->ino, &ip);
	if (ret && ret != -ENOENT)
		return ret;
	/* No operation changes an inode's type (numbers are never reused). */
	if (ret == 0 && ((ip->mode ^ li->mode) & S_IFMT))
		return -EUCLEAN;
	if (ret) {
		ip = fs_inew(fs, li->ino);
		if (!ip)
			return -ENOMEM;
	}
	return inode_fill(fs, ip, li);
}

static struct xattr *xattr_find(struct tfs_inode *ip, const char *name, size_t len,
				struct xattr ***prevp)
{
	struct xattr **pp = &ip->xattrs;

	for (; *pp; pp = &(*pp)->next) {
		if (strlen((*pp)->name) == len && !memcmp((*pp)->name, name, len)) {
			if (prevp)
				*prevp = pp;
			return *pp;
		}
	}
	return NULL;
}

static int apply_xattr_set(struct tfs_inode *ip, const struct log_rec *r)
{
	void *val = malloc(r->xattr.vallen ? r->xattr.vallen : 1);

	if (!val)
		return -ENOMEM;
	if (r->xattr.vallen)	/* an empty value may come with a NULL pointer */
		memcpy(val, r->xattr.val, r->xattr.vallen);
	struct xattr *x = xattr_find(ip, r->xattr.name, r->xattr.namelen, NULL);
	if (!x) {
		x = calloc(1, sizeof(*x));
		char *name = strndup(r->xattr.name, r->xattr.namelen);
		if (!x || !name) {
			free(x);
			free(name);
			free(val);
			return -ENOMEM;
		}
		x->name = name;
		/* Append: listxattr shows names in creation order. */
		struct xattr **pp = &ip->xattrs;
		while (*pp)
			pp = &(*pp)->next;
		*pp = x;
	}
	free(x->val);
	x->val = val;
	x->vallen = r->xattr.vallen;
	return 0;
}

static void apply_xattr_del(struct tfs_inode *ip, const struct log_rec *r)
{
	struct xattr **pp;
	struct xattr *x = xattr_find(ip, r->xattr.name, r->xattr.namelen, &pp);

	if (!x)
		return;		/* state record: already gone is the same state */
	*pp = x->next;
	free(x->name);
	free(x->val);
	free(x);
}

static uint64_t ext_grow(const struct log_rec *r)
{
	if (r->type != LR_EXT_SET)
		return v2d_ext_grow(0, false, false);
	return v2d_ext_grow(r->ext.n, true, r->ext.phys & EXTENT_UNWRITTEN);
}

/*
 * Format v2: what a checkpoint writes for an inode whose xattrs changed
 * (ckpt_v2.c put_xattrs): every XATTR and XCHUNK item of the inode, one
 * key range, deleted and put back from memory.  In node slots:
 *  - XATTR_EDGE: the leaves at the range's two ends and the siblings they
 *    merge with as it empties, and the leaf the first item goes into;
 *  - the items' bytes (heads included) at half a node each, as the gate
 *    counts grown EXTENT items (FS_NODE_GROW_BYTES): a value's XCHUNK
 *    items go in ascending keys, so each split they make keeps all but
 *    the last item where it was (btree.c split_point), a leaf left with
 *    at least BNODE_USABLE minus two items of at most BNODE_MAX_VAL +
 *    BNODE_ITEM bytes: half of BNODE_USABLE.  XATTR items go in hash
 *    order and a half split may leave as little as an eighth of a node
 *    on one side, so this is an estimate, not a bound, for many small
 *    values: the checkpoint checks it (dirty.checkpoint_slots_over).
 * The inode's INODE item sorts just before the range and is counted by
 * the caller.
 */
#define XATTR_EDGE 5

static uint64_t xattr_bytes(size_t namelen, size_t vallen)
{
	uint64_t chunks = vallen > V2_XATTR_INLINE_MAX ? v2_xchunk_count((uint32_t)vallen) : 0;

	return (1 + chunks) * BNODE_ITEM + V2_XATTR_HDR + namelen + vallen;
}

uint64_t meta_v2_xattr_slots(const struct tfs_inode *ip, size_t namelen, size_t vallen)
{
	uint64_t bytes = namelen ? xattr_bytes(namelen, vallen) : 0;

	for (const struct xattr *x = ip ? inode_xattrs(ip) : NULL; x; x = x->next)
		bytes += xattr_bytes(strlen(x->name), x->vallen);
	return XATTR_EDGE + (bytes + BNODE_USABLE / 2 - 1) / (BNODE_USABLE / 2);
}

/* Format v2: note what @r changes for the next checkpoint (v2dirty.h),
 * before it is applied (a removed name's cookie is still there), into
 * the open set (@h NULL or h->into NULL) or, for a checkpoint rebuilding
 * its set from the log, into h->into (no cookie: the directory is
 * rescanned).  -ENOMEM when the change could not be kept. */
int meta_v2_note(struct tfs *fs, const struct log_rec *r, const struct v2d_how *h)
{
	struct v2dirty *d = fs->v2dirty;
	struct tfs_inode *ip;
	uint64_t ino, cookie = 0, n;

	switch (r->type) {
	case LR_INODE:
		return v2d_note_inode(d, r->inode.ino, V2D_INODE, h);
	case LR_INODE_DEL:
		return v2d_note_inode(d, r->del.ino, V2D_DEAD, h);
	case LR_DENT_DEL:
		if (h && h->into)
			ip = NULL;
		else if (find(fs, r->dent.parent, &ip))
			ip = NULL;
		if (ip && ip->dir)
			(void)dir_lookup_cookie(ip->dir, r->dent.name, r->dent.namelen, &ino,
						&cookie);
		/* fall through */
	case LR_DENT_SET:
		return v2d_note_name(d, r->dent.parent, r->dent.name, r->dent.namelen, cookie, h);
	case LR_EXT_SET:
		return v2d_note_ext(d, r->ext.ino, r->ext.fblk, r->ext.n, ext_grow(r), h);
	case LR_EXT_CLEAR:
		n = r->clr.fblk < EXTENT_MAX_FBLK ? EXTENT_MAX_FBLK - r->clr.fblk : 0;
		return v2d_note_ext(d, r->clr.ino, r->clr.fblk, r->clr.n < n ? r->clr.n : n,
				    ext_grow(r), h);
	case LR_XATTR_SET:
	case LR_XATTR_DEL:
		/* Live, the inode's lock is held: its xattrs as they are plus
		 * the record's.  A rebuild from the log takes no inode lock:
		 * the record's alone (an estimate the checkpoint only checks). */
		if ((h && h->into) || find(fs, r->xattr.ino, &ip))
			ip = NULL;
		return v2d_note_xattr(d, r->xattr.ino,
				      meta_v2_xattr_slots(ip, r->xattr.namelen,
						     r->type == LR_XATTR_SET ? r->xattr.vallen : 0),
				      h);
	default:
		return 0;
	}
}

/* The live note of @r.  A record that will be in the log (a transaction,
 * @drops->v2lost counts it open until its append; the mount's replay)
 * may lose its note: the checkpoint rebuilds from the log.  One that
 * never is (drops NULL: the mount's orphan deletion, fsck's repairs) must
 * not: the change is refused (-ENOMEM) before anything is applied. */
static int v2_note(struct tfs *fs, const struct log_rec *r, struct meta_tx *drops)
{
	struct v2d_how h = { .txlost = drops && !fs->replaying ? &drops->v2lost : NULL };
	int ret = meta_v2_note(fs, r, &h);

	return ret && !drops ? ret : 0;
}

/* LR_EXT_SET's block range: a hostile phys near 2^63 would carry into the
 * unwritten flag (phys + i with the flag set and block 0 underneath).
 * Blocks outside the data area are left to the allocator rebuild at mount
 * (refused there) and to fsck, which must load them. */
static int ext_rec_ok(const struct log_rec *r)
{
	uint64_t p = EXTENT_PHYS(r->ext.phys);

	return !p || p >= EXTENT_UNWRITTEN - r->ext.n ? -EUCLEAN : 0;
}

static int apply_dent(struct tfs *fs, const struct log_rec *r, struct tfs_inode *ip)
{
	int ret;

	if (!ip->dir)
		return -EUCLEAN;
	/* no name for the root, for nothing, or for the directory itself */
	if (r->type == LR_DENT_SET && (!r->dent.ino || r->dent.ino >= FS_INO_LIMIT ||
				       r->dent.ino == TFS_ROOT_INO ||
				       r->dent.ino == r->dent.parent))
		return -EUCLEAN;
	if (r->type == LR_DENT_SET)
		return dir_set(ip->dir, r->dent.name, r->dent.namelen, r->dent.ino);
	ret = dir_del(ip->dir, r->dent.name, r->dent.namelen);
	/* Replay may delete a name the snapshot never had. */
	if (ret == -ENOENT && fs->replaying)
		ret = 0;
	return ret;
}

/* The inode a record other than LR_INODE changes; false for no record. */
static bool rec_ino(const struct log_rec *r, uint64_t *ino)
{
	switch (r->type) {
	case LR_INODE_DEL:
		*ino = r->del.ino;
		return true;
	case LR_DENT_SET:
	case LR_DENT_DEL:
		*ino = r->dent.parent;
		return true;
	case LR_EXT_SET:
		*ino = r->ext.ino;
		return true;
	case LR_EXT_CLEAR:
		*ino = r->clr.ino;
		return true;
	case LR_XATTR_SET:
	case LR_XATTR_DEL:
		*ino = r->xattr.ino;
		return true;
	default:
		return false;
	}
}

int meta_apply(struct tfs *fs, const struct log_rec *r, struct meta_tx *drops)
{
	extent_drop_fn drop = NULL;
	void *dctx = drops;
	struct tfs_inode *ip;
	uint64_t ino;
	int ret;

	/* Replay: the allocator is rebuilt from the final state afterwards,
	 * or (format v2, loaded from the trees) kept in step now. */
	if (drops && !fs->replaying)
		drop = drop_collect;
	if (fs->replaying && fs->replay_alloc) {
		drop = drop_put;
		dctx = fs->alloc;
	}
	if (fs->v2dirty) {
		ret = v2_note(fs, r, drops);
		if (ret)
			return ret;
	}
	if (r->type == LR_INODE)
		return apply_inode(fs, &r->inode);
	if (r->type == LR_EXT_SET && ext_rec_ok(r))
		return -EUCLEAN;
	if (!rec_ino(r, &ino))
		return -EUCLEAN;
	ret = find(fs, ino, &ip);
	if (ret == -ENOENT)
		return missing(fs);
	if (ret)
		return ret;

	switch (r->type) {
	case LR_INODE_DEL:
		if (ip->ino == TFS_ROOT_INO)
			return -EUCLEAN;
		fs_ifree(fs, ip, drop, dctx);
		return 0;
	case LR_DENT_SET:
	case LR_DENT_DEL:
		return apply_dent(fs, r, ip);
	case LR_EXT_SET:
		if (fs->replaying && fs->replay_alloc) {
			ret = ext_pend(fs, ip, r);
			return ret <= 0 ? ret : ext_set_counted(fs, ip, r);
		}
		return extent_set(&ip->map, r->ext.fblk, r->ext.n, r->ext.phys, r->ext.csums,
				  drop, drops);
	case LR_EXT_CLEAR:
		if (fs->replaying && fs->replay_alloc) {
			ret = ext_pend(fs, ip, r);
			if (ret <= 0)
				return ret;
		}
		return extent_clear(&ip->map, r->clr.fblk, r->clr.n, drop, dctx);
	case LR_XATTR_SET:
		return apply_xattr_set(ip, r);
	case LR_XATTR_DEL:
		apply_xattr_del(ip, r);
		return 0;
	default:
		return -EUCLEAN;
	}
}

int meta_fill(struct tfs *fs, struct tfs_inode *ip, const struct log_rec *r)
{
	int ret;

	switch (r->type) {
	case LR_INODE:
		ret = inode_rec_ok(&r->inode);
		if (ret == 0 && ip->mode && ((ip->mode ^ r->inode.mode) & S_IFMT))
			ret = -EUCLEAN;
		return ret ? ret : inode_fill(fs, ip, &r->inode);
	case LR_XATTR_SET:
		return apply_xattr_set(ip, r);
	case LR_EXT_SET:
		if (ext_rec_ok(r))
			return -EUCLEAN;
		return extent_set(&ip->map, r->ext.fblk, r->ext.n, r->ext.phys, r->ext.csums,
				  NULL, NULL);
	default:
		return -EUCLEAN;
	}
}

/* Inodes a transaction touched, to stamp last_seq on after the append. */
#define TOUCH_INLINE 8

struct apply_ctx {
	struct tfs *fs;
	struct meta_tx *tx;
	uint64_t inl[TOUCH_INLINE];
	uint64_t *touched;
	size_t ntouched, cap;
};

static void touch(struct apply_ctx *c, uint64_t ino)
{
	for (size_t i = 0; i < c->ntouched; i++)
		if (c->touched[i] == ino)
			return;
	if (c->ntouched == c->cap) {
		size_t ncap = c->cap * 2;
		uint64_t *n = c->touched == c->inl ? malloc(ncap * sizeof(*n))
						   : realloc(c->touched, ncap * sizeof(*n));
		if (!n)
			return;	/* last_seq is a hint for fsync; stale is only slower */
		if (c->touched == c->inl)
			memcpy(n, c->inl, sizeof(c->inl));
		c->touched = n;
		c->cap = ncap;
	}
	c->touched[c->ntouched++] = ino;
}

static int apply_cb(void *ctx, const struct log_rec *r)
{
	struct apply_ctx *c = ctx;
	int ret = meta_apply(c->fs, r, c->tx);

	if (ret)
		return ret;
	switch (r->type) {
	case LR_INODE:
		touch(c, r->inode.ino);
		break;
	case LR_DENT_SET:
	case LR_DENT_DEL:
		touch(c, r->dent.parent);
		break;
	case LR_EXT_SET:
		touch(c, r->ext.ino);
		break;
	case LR_EXT_CLEAR:
		touch(c, r->clr.ino);
		break;
	case LR_XATTR_SET:
	case LR_XATTR_DEL:
		touch(c, r->xattr.ino);
		break;
	default:
		break;
	}
	return 0;
}

/* A transaction failed in memory: read-only, and no checkpoint writes
 * memory from now on (fs->unlogged, ckpt_write), so none frees log space
 * either: the log's space waiters get EROFS.  Logged, and the fs_failed
 * event sent, by the first failure only. */
static void stop_ckpts(struct tfs *fs, const char *what, int err)
{
	bool was = atomic_exchange(&fs->unlogged, true);

	fs->readonly = true;
	if (fs->log)
		log_stop_waits(fs->log);
	if (was)
		return;
	tfs_log(LOG_ERR, "%s failed (%s); the file system is now read-only", what,
		strerror(-err));
	event_fs_failed(fs, what, err);
}

int meta_tx_commit(struct tfs *fs, struct meta_tx *tx, uint64_t *seq)
{
	struct apply_ctx c = { .fs = fs, .tx = tx, .cap = TOUCH_INLINE };
	uint64_t s = 0;
	int ret;

	if (fs->readonly)
		return -EROFS;
	if (!tx->buf.len) {
		if (seq)
			*seq = 0;
		return 0;
	}
	c.touched = c.inl;
	/* Apply the encoded bytes, not the caller's structs: this is exactly
	 * what replay will apply. */
	ret = log_decode(tx->buf.p, tx->buf.len, apply_cb, &c);
	if (ret) {
		/* A partly applied transaction: memory no longer matches the log.
		 * Stop changing anything rather than checkpoint a half state. */
		stop_ckpts(fs, "applying a metadata transaction", ret);
		goto out;
	}
	if (fs->log) {
		ret = log_append(fs->log, &tx->buf, &s);
		if (ret) {
			stop_ckpts(fs, "a metadata log append", ret);
			goto out;	/* the drops leak: never reuse what may be referenced */
		}
	}
	if (fs->alloc)
		for (size_t i = 0; i < tx->ndrops; i++)
			alloc_defer(fs->alloc, tx->drops[i].phys, tx->drops[i].n, s);
	tx->ndrops = 0;
	/* The caller holds the locks of these inodes (those deleted in this tx
	 * are gone from the table). */
	for (size_t i = 0; i < c.ntouched; i++) {
		struct tfs_inode *ip = fs_iget(fs, c.touched[i]);	/* resident: held */
		if (ip && s > ip->last_seq)
			ip->last_seq = s;
	}
	if (seq)
		*seq = s;
out:
	/* Appended, or never will be (read-only): a checkpoint waiting to
	 * rebuild from the log may read it now. */
	if (tx->v2lost) {
		tx->v2lost = false;
		v2d_tx_logged(fs->v2dirty);
	}
	if (c.touched != c.inl)
		free(c.touched);
	return ret;
}
