// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fsck_tree: the structure passes of fsck (fsck_i.h) over the loaded
 * metadata: the inode index they work from (rebuilt before each pass, so a
 * pass sees the repairs of the passes before it), inodes on their own,
 * directory entries, reachability (orphans go to lost+found), link counts
 * and "..".  Repairs are applied in memory with meta_apply(); the driver
 * decides whether a checkpoint persists them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dir.h"
#include "fsck_i.h"

/* ---- inode index ---- */

static int ient_cmp(const void *a, const void *b)
{
	const struct ient *x = a, *y = b;

	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

static struct ient *ifind(struct fck *c, uint64_t ino)
{
	struct ient key = { .ino = ino };

	if (!c->niv)	/* format 2 keeps no index: "<inode N>" */
		return NULL;
	return bsearch(&key, c->iv, c->niv, sizeof(*c->iv), ient_cmp);
}

int fsck_build_index(struct fck *c)
{
	struct tfs_inode **v = NULL;
	size_t n = 0;
	int ret;

	free(c->iv);
	c->iv = NULL;
	c->niv = 0;
	ret = fs_isnapshot(c->fs, &v, &n);	/* offline: nothing deletes them */
	if (ret < 0)
		return ret;
	c->iv = calloc(n ? n : 1, sizeof(*c->iv));
	if (!c->iv) {
		fs_isnapshot_put(c->fs, v, n);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		c->iv[i] = (struct ient){ .ino = v[i]->ino, .ip = v[i] };
	fs_isnapshot_put(c->fs, v, n);	/* the table keeps them (offline) */
	c->niv = n;
	qsort(c->iv, n, sizeof(*c->iv), ient_cmp);

	for (size_t i = 0; i < n; i++) {
		struct tfs_inode *dp = c->iv[i].ip;
		struct dir_ent e;

		if (!S_ISDIR(dp->mode) || !dp->dir)
			continue;
		for (uint64_t ck = 2; dir_next(dp->dir, ck, &e) == 0; ck = e.cookie + 1) {
			struct ient *t = ifind(c, e.ino);

			if (!t)
				continue;
			t->nent++;
			if (!t->eparent) {
				t->eparent = dp->ino;
				t->ename = e.name;
				t->enamelen = e.namelen;
			}
			if (S_ISDIR(t->ip->mode))
				c->iv[i].nsub++;
		}
	}
	return 0;
}

/* "/a/b/c" for inodes reachable by names, "<inode N>/rest" otherwise. */
const char *fsck_ipath(struct fck *c, uint64_t ino, char *buf, size_t len)
{
	const char *names[256];
	uint16_t lens[256];
	unsigned depth = 0;
	uint64_t cur = ino, top = 0;
	size_t o = 0;

	while (cur != TFS_ROOT_INO && depth < 256) {
		struct ient *e = ifind(c, cur);

		if (!e || !e->eparent) {
			top = cur;
			break;
		}
		names[depth] = e->ename;
		lens[depth] = e->enamelen;
		depth++;
		cur = e->eparent;
	}
	if (top)
		o = (size_t)snprintf(buf, len, "<inode %llu>", (unsigned long long)top);
	if (!depth && !top)
		snprintf(buf, len, "/");
	while (depth-- > 0 && o + 1 < len) {
		int w = snprintf(buf + o, len - o, "/%.*s", (int)lens[depth], names[depth]);

		if (w < 0)
			break;
		o += (size_t)w;
	}
	return buf;
}

static int apply(struct fck *c, const struct log_rec *r)
{
	int ret = meta_apply(c->fs, r, NULL);

	if (ret < 0)
		fsck_say(c, "applying a repair failed: %s", strerror(-ret));
	return ret;
}

static int set_dent(struct fck *c, uint16_t type, uint64_t parent, const char *name,
		    size_t namelen, uint64_t ino)
{
	struct log_rec r = { .type = type };

	r.dent.parent = parent;
	r.dent.ino = ino;
	r.dent.namelen = (uint16_t)namelen;
	r.dent.name = name;
	return apply(c, &r);
}

static int set_inode(struct fck *c, struct tfs_inode *ip, uint32_t nlink, uint64_t parent)
{
	struct log_rec r;

	fs_iencode(ip, &r);
	r.inode.nlink = nlink;
	if (S_ISDIR(ip->mode))
		r.inode.parent = parent;
	return apply(c, &r);
}

int fsck_clear_blocks(struct fck *c, uint64_t ino, uint64_t fblk, uint64_t n)
{
	struct log_rec r = { .type = LR_EXT_CLEAR };

	r.clr.ino = ino;
	r.clr.fblk = fblk;
	r.clr.n = n;
	return apply(c, &r);
}

/* ---- pass 1: inodes on their own ---- */

struct bad_run {
	uint64_t fblk, n, phys;
};

struct range_ctx {
	struct fck *c;
	struct bad_run *v;
	size_t n, cap;
};

static bool phys_ok(const struct super *sb, uint64_t p)
{
	if (p < sb->data_start || p >= sb->total_blocks)
		return false;
	if (sb->wib_start && p >= sb->wib_start && p < sb->wib_start + sb->wib_blocks)
		return false;	/* the write-intent bitmap */
	return !(sb->ckpt_blocks && p >= sb->ckpt_start && p < sb->ckpt_start + sb->ckpt_blocks);
}

static int range_run(void *ctx, uint64_t fblk, uint64_t phys, uint32_t n,
		     const struct extent_ent *ents)
{
	struct range_ctx *rc = ctx;
	const struct super *sb = &rc->c->fs->sb;

	for (uint32_t i = 0; i < n; i++) {
		uint64_t p = EXTENT_PHYS(phys) + i;

		if (phys_ok(sb, p))
			continue;
		if (rc->n && rc->v[rc->n - 1].fblk + rc->v[rc->n - 1].n == fblk + i &&
		    rc->v[rc->n - 1].phys + rc->v[rc->n - 1].n == p) {
			rc->v[rc->n - 1].n++;
			continue;
		}
		if (rc->n == rc->cap) {
			size_t nc = rc->cap ? rc->cap * 2 : 16;
			struct bad_run *nv = realloc(rc->v, nc * sizeof(*nv));

			if (!nv)
				return -ENOMEM;
			rc->v = nv;
			rc->cap = nc;
		}
		rc->v[rc->n++] = (struct bad_run){ .fblk = fblk + i, .n = 1, .phys = p };
	}
	return 0;
}

int fsck_pass_inodes(struct fck *c)
{
	char path[FSCK_PATH_MAX];
	struct ient *root = ifind(c, TFS_ROOT_INO);
	int ret;

	if (!root || !S_ISDIR(root->ip->mode)) {
		struct log_rec r;
		struct timespec now = fs_now();

		fsck_meta_problem(c, false, "root directory %s: creating an empty one",
				  root ? "is not a directory" : "missing");
		memset(&r, 0, sizeof(r));
		r.type = LR_INODE;
		r.inode.ino = TFS_ROOT_INO;
		r.inode.parent = TFS_ROOT_INO;
		r.inode.mode = S_IFDIR | 0755;
		r.inode.nlink = 2;
		r.inode.gen = 1;
		r.inode.atime_ns = r.inode.mtime_ns = r.inode.ctime_ns = r.inode.btime_ns =
			fs_ts_ns(now);
		if (root)
			fsck_clear_blocks(c, TFS_ROOT_INO, 0, EXTENT_MAX_FBLK);
		ret = apply(c, &r);
		if (ret < 0)
			return ret;
		ret = fsck_build_index(c);
		if (ret < 0)
			return ret;
	}

	for (size_t i = 0; i < c->niv; i++) {
		struct tfs_inode *ip = c->iv[i].ip;
		uint32_t t = ip->mode & S_IFMT;

		if (t != S_IFREG && t != S_IFDIR && t != S_IFLNK && t != S_IFCHR &&
		    t != S_IFBLK && t != S_IFIFO && t != S_IFSOCK) {
			struct log_rec r = { .type = LR_INODE_DEL };

			fsck_meta_problem(c, false,
					  "%s: inode %llu has an invalid type (mode 0%o): "
					  "deleting it", fsck_ipath(c, ip->ino, path, sizeof(path)),
					  (unsigned long long)ip->ino, ip->mode);
			r.del.ino = ip->ino;
			c->iv[i].ip = NULL;
			ret = apply(c, &r);
			if (ret < 0)
				return ret;
			continue;
		}
		if (t != S_IFREG && extent_mapped(&ip->map)) {
			fsck_meta_problem(c, false, "%s: inode %llu is not a regular file but maps "
					  "%llu data blocks: unmapping them",
					  fsck_ipath(c, ip->ino, path, sizeof(path)),
					  (unsigned long long)ip->ino,
					  (unsigned long long)extent_mapped(&ip->map));
			fsck_clear_blocks(c, ip->ino, 0, EXTENT_MAX_FBLK);
			continue;
		}
		if (t == S_IFREG) {
			struct range_ctx rc = { .c = c };

			ret = extent_walk(&ip->map, 0, EXTENT_MAX_FBLK, range_run, &rc);
			for (size_t k = 0; ret == 0 && k < rc.n; k++) {
				fsck_meta_problem(c, false,
						  "%s: offset %llu: %llu block(s) at %llu outside "
						  "the data area or in metadata: unmapping them (data lost)",
						  fsck_ipath(c, ip->ino, path, sizeof(path)),
						  (unsigned long long)(rc.v[k].fblk * TFS_BLOCK_SIZE),
						  (unsigned long long)rc.v[k].n,
						  (unsigned long long)rc.v[k].phys);
				ret = fsck_clear_blocks(c, ip->ino, rc.v[k].fblk, rc.v[k].n);
			}
			free(rc.v);
			if (ret < 0)
				return ret;
		}
	}
	return fsck_build_index(c);
}

/* ---- pass 2: directory entries ---- */

struct dent_fix {
	uint64_t parent;
	char name[LOG_NAME_MAX + 1];
	uint16_t namelen;
};

static bool name_ok(const char *n, size_t len)
{
	if (!len || len > LOG_NAME_MAX || memchr(n, '/', len) || memchr(n, '\0', len))
		return false;
	return !(len == 1 && n[0] == '.') && !(len == 2 && n[0] == '.' && n[1] == '.');
}

int fsck_pass_dents(struct fck *c)
{
	struct dent_fix *fx = NULL;
	size_t nfx = 0, cap = 0;
	char path[FSCK_PATH_MAX];
	int ret = 0;

	/* Two rounds: directories named by more than one entry keep the entry
	 * in the directory their ".." names; the second round drops the rest. */
	for (int round = 0; round < 2; round++) {
		for (size_t i = 0; i < c->niv; i++) {
			struct tfs_inode *dp = c->iv[i].ip;
			struct dir_ent e;

			if (!S_ISDIR(dp->mode) || !dp->dir)
				continue;
			for (uint64_t ck = 2; dir_next(dp->dir, ck, &e) == 0; ck = e.cookie + 1) {
				struct ient *t = ifind(c, e.ino);
				const char *why = NULL;

				if (round == 0) {
					if (!name_ok(e.name, e.namelen))
						why = "has an invalid name";
					else if (!t)
						why = "names a missing inode";
					else if (e.ino == TFS_ROOT_INO)
						why = "names the root directory";
					else if (S_ISDIR(t->ip->mode) && t->ip->parent == dp->ino) {
						if (t->reach)	/* already kept one */
							why = "is a second link to a directory";
						t->reach = true;
					}
				} else if (t && e.ino != TFS_ROOT_INO && S_ISDIR(t->ip->mode) &&
					   t->ip->parent != dp->ino && name_ok(e.name, e.namelen)) {
					if (t->reach)
						why = "is a second link to a directory";
					t->reach = true;
				}
				if (!why)
					continue;
				fsck_meta_problem(c, false,
						  "%s/%.*s: entry (inode %llu) %s: removing it",
						  dp->ino == TFS_ROOT_INO ? ""
						     : fsck_ipath(c, dp->ino, path, sizeof(path)),
						  (int)e.namelen, e.name, (unsigned long long)e.ino,
						  why);
				if (nfx == cap) {
					size_t nc = cap ? cap * 2 : 16;
					struct dent_fix *nv = realloc(fx, nc * sizeof(*nv));

					if (!nv) {
						free(fx);
						return -ENOMEM;
					}
					fx = nv;
					cap = nc;
				}
				fx[nfx].parent = dp->ino;
				fx[nfx].namelen = e.namelen;
				memcpy(fx[nfx].name, e.name, e.namelen);
				nfx++;
			}
		}
	}
	for (size_t i = 0; i < c->niv; i++)
		c->iv[i].reach = false;
	for (size_t i = 0; ret == 0 && i < nfx; i++)
		ret = set_dent(c, LR_DENT_DEL, fx[i].parent, fx[i].name, fx[i].namelen, 0);
	free(fx);
	if (ret < 0)
		return ret;
	return fsck_build_index(c);
}

/* ---- pass 3: reachability, orphans, lost+found ---- */

static int reach(struct fck *c)
{
	uint64_t *q = malloc((c->niv + 1) * sizeof(*q));
	size_t qh = 0, qt = 0;
	struct ient *r = ifind(c, TFS_ROOT_INO);

	if (!q)
		return -ENOMEM;
	for (size_t i = 0; i < c->niv; i++)
		c->iv[i].reach = false;
	if (r) {
		r->reach = true;
		q[qt++] = r->ino;
	}
	while (qh < qt) {
		struct ient *d = ifind(c, q[qh++]);
		struct dir_ent e;

		if (!d || !S_ISDIR(d->ip->mode) || !d->ip->dir)
			continue;
		for (uint64_t ck = 2; dir_next(d->ip->dir, ck, &e) == 0; ck = e.cookie + 1) {
			struct ient *t = ifind(c, e.ino);

			if (!t || t->reach)
				continue;
			t->reach = true;
			q[qt++] = t->ino;
		}
	}
	free(q);
	return 0;
}

/* The lost+found directory, created if needed; 0 if it cannot be. */
static uint64_t lost_found(struct fck *c)
{
	static const char lf[] = "lost+found";
	struct tfs *fs = c->fs;
	struct tfs_inode *root = fs_iget(fs, TFS_ROOT_INO);
	struct log_rec r;
	uint64_t ino;
	struct timespec now = fs_now();

	if (dir_lookup(root->dir, lf, sizeof(lf) - 1, &ino) == 0) {
		struct tfs_inode *ip = fs_iget(fs, ino);

		return ip && S_ISDIR(ip->mode) ? ino : 0;
	}
	ino = fs_ialloc(fs);
	memset(&r, 0, sizeof(r));
	r.type = LR_INODE;
	r.inode.ino = ino;
	r.inode.parent = TFS_ROOT_INO;
	r.inode.mode = S_IFDIR | 0700;
	r.inode.uid = root->uid;
	r.inode.gid = root->gid;
	r.inode.nlink = 2;
	r.inode.gen = 1;
	r.inode.atime_ns = r.inode.mtime_ns = r.inode.ctime_ns = r.inode.btime_ns = fs_ts_ns(now);
	if (apply(c, &r) < 0 || set_dent(c, LR_DENT_SET, TFS_ROOT_INO, lf, sizeof(lf) - 1,
					 ino) < 0 ||
	    set_inode(c, root, root->nlink + 1, root->parent) < 0)
		return 0;
	fsck_say(c, "created /lost+found");
	return ino;
}

static int move_to_lf(struct fck *c, struct tfs_inode *ip)
{
	uint64_t lf = lost_found(c), tmp;
	struct tfs_inode *lp = lf ? fs_iget(c->fs, lf) : NULL;
	char name[32];
	int len;

	if (!lp)
		return -ENOSPC;
	len = snprintf(name, sizeof(name), "#%llu", (unsigned long long)ip->ino);
	if (dir_lookup(lp->dir, name, (size_t)len, &tmp) == 0)
		return -EEXIST;
	if (set_dent(c, LR_DENT_SET, lf, name, (size_t)len, ip->ino) < 0)
		return -EIO;
	if (S_ISDIR(ip->mode)) {
		if (set_inode(c, ip, ip->nlink, lf) < 0 || set_inode(c, lp, lp->nlink + 1,
								     lp->parent) < 0)
			return -EIO;
	}
	return 0;
}

static const char *kind(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: return "file";
	case S_IFDIR: return "directory";
	case S_IFLNK: return "symlink";
	default: return "special file";
	}
}

int fsck_pass_reach(struct fck *c)
{
	char path[FSCK_PATH_MAX];
	int ret;

	for (size_t round = 0; round < c->niv + 16; round++) {
		size_t nun = 0, done = 0;
		struct ient *cycle = NULL;

		ret = reach(c);
		if (ret < 0)
			return ret;
		for (size_t i = 0; i < c->niv; i++) {
			struct ient *e = &c->iv[i];
			struct log_rec r = { .type = LR_INODE_DEL };

			if (e->reach)
				continue;
			nun++;
			if (e->nent) {
				if (S_ISDIR(e->ip->mode) && !cycle)
					cycle = e;
				continue;
			}
			done++;
			if (e->ip->nlink == 0) {
				/* Unlinked while open when the file system
				 * stopped: normal crash state that the next
				 * mount reclaims, like a journal to replay.
				 * -n notes it (not an error); -y/-p reclaim it
				 * (counted as a correction, exit 1). */
				if (c->fix)
					fsck_meta_problem(c, true,
							  "orphan %s inode %llu (no name, link "
							  "count 0): reclaiming it",
							  kind(e->ip->mode),
							  (unsigned long long)e->ino);
				else
					fsck_say(c, "note: orphan %s inode %llu (no name, link "
						 "count 0, open when the file system stopped): "
						 "the next mount reclaims it", kind(e->ip->mode),
						 (unsigned long long)e->ino);
				r.del.ino = e->ino;
				ret = apply(c, &r);
				if (ret < 0)
					return ret;
				continue;
			}
			fsck_meta_problem(c, false,
					  "unreachable %s inode %llu (link count %u): moving it "
					  "to /lost+found/#%llu", kind(e->ip->mode),
					  (unsigned long long)e->ino, e->ip->nlink,
					  (unsigned long long)e->ino);
			ret = move_to_lf(c, e->ip);
			if (ret < 0) {
				fsck_say(c, "cannot move inode %llu to /lost+found: %s",
					 (unsigned long long)e->ino, strerror(-ret));
				return ret;
			}
		}
		if (!nun)
			return 0;
		if (!done && cycle) {
			/* Directories naming each other in a loop cut off from the
			 * root: detach one, it goes to lost+found next round. */
			fsck_meta_problem(c, false,
					  "%s: directory inode %llu is in a loop cut off from "
					  "the root: detaching it",
					  fsck_ipath(c, cycle->ino, path, sizeof(path)),
					  (unsigned long long)cycle->ino);
			ret = set_dent(c, LR_DENT_DEL, cycle->eparent, cycle->ename,
				       cycle->enamelen, 0);
			if (ret < 0)
				return ret;
		} else if (!done) {
			return 0;	/* only files in unreachable places: nothing to cut */
		}
		ret = fsck_build_index(c);
		if (ret < 0)
			return ret;
	}
	return 0;
}

/* ---- pass 4: link counts and ".." ---- */

int fsck_pass_counts(struct fck *c)
{
	char path[FSCK_PATH_MAX];
	int ret = 0;

	for (size_t i = 0; ret == 0 && i < c->niv; i++) {
		struct ient *e = &c->iv[i];
		struct tfs_inode *ip = e->ip;
		uint32_t want = S_ISDIR(ip->mode) ? 2 + e->nsub : e->nent;
		uint64_t parent = ip->parent;

		if (S_ISDIR(ip->mode)) {
			uint64_t wantp = ip->ino == TFS_ROOT_INO ? TFS_ROOT_INO : e->eparent;

			if (wantp && parent != wantp) {
				fsck_meta_problem(c, false,
						  "%s: \"..\" names inode %llu, not its parent "
						  "%llu", fsck_ipath(c, ip->ino, path,
								     sizeof(path)),
						  (unsigned long long)parent,
						  (unsigned long long)wantp);
				parent = wantp;
			}
		}
		if (ip->nlink != want)
			fsck_meta_problem(c, true, "%s: link count %u, should be %u",
					  fsck_ipath(c, ip->ino, path,
						     sizeof(path)), ip->nlink, want);
		if (ip->nlink != want || parent != ip->parent)
			ret = set_inode(c, ip, want, parent);
	}
	return ret;
}
