// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * namei: the namespace operations (lookup, create, link, unlink, rmdir,
 * rename, readlink, getattr, setattr; readdir is in readdir.c).
 *
 * Every namespace change holds fs->ns_lock for the whole operation, so the
 * shape of the tree (directory contents, nlink, a directory's parent) is
 * stable while it checks and builds its transaction; it also locks the
 * inodes whose records it writes, because lookups, readdir, getattr and the
 * data path do not take ns_lock, only inode locks.  Those readers lock a
 * directory and then one of its entries, so a namespace change locks its
 * inodes in an order compatible with that (see lock_inodes()).
 *
 * log_wait_space() and the node gate are called before ns_lock: a
 * checkpoint needs ns_lock.
 * An inode whose last name goes away is deleted (under the same ns_lock)
 * once nothing references it; usually the kernel still does, and the delete
 * happens at its forget.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl.h"
#include "dir.h"
#include "fs_i.h"
#include "v2item.h"

#define TFS_LINK_MAX 65000

/* Generation numbers for new inodes (inode numbers are never reused, so a
 * per-process counter is enough to tell incarnations apart). */
static _Atomic uint64_t gen_counter = 1;

static int check_name(const char *name, size_t *lenp)
{
	size_t len = strnlen(name, TFS_NAME_MAX + 1);

	if (len == 0)
		return -EINVAL;
	if (len > TFS_NAME_MAX)
		return -ENAMETOOLONG;
	if (memchr(name, '/', len))
		return -EINVAL;
	*lenp = len;
	return 0;
}

static bool is_dot(const char *name, size_t len)
{
	return len == 1 && name[0] == '.';
}

static bool is_dotdot(const char *name, size_t len)
{
	return len == 2 && name[0] == '.' && name[1] == '.';
}

static void stat_inode(struct tfs_inode *ip, struct stat *st)
{
	if (!st)
		return;
	inode_lock(ip);
	fs_istat(ip, st);
	inode_unlock(ip);
}

/* Start a namespace change: wait for log room and (format v2) node room,
 * reserving the @slots it adds at worst (FS_NS_*) into *r, -ENOSPC if a
 * change that adds a name (@grow) finds none; then take ns_lock. */
static int ns_begin(struct tfs *fs, bool grow, uint64_t slots, struct fs_resv *r)
{
	r->touch = r->other = 0;
	if (fs->readonly)
		return -EROFS;
	if (fs->log) {
		int ret = log_wait_space(fs->log);
		if (!ret)
			ret = fs_node_reserve_slots(fs, grow, slots, r);
		if (ret)
			return ret;
	}
	pthread_mutex_lock(&fs->ns_lock);
	return 0;
}

/* The change is noted (or failed): its reservation goes back. */
static void ns_end(struct tfs *fs, struct fs_resv *r)
{
	pthread_mutex_unlock(&fs->ns_lock);
	fs_node_release(fs, r);
}

/*
 * The directory a namespace change works in, looked up under ns_lock (which
 * keeps it from going away): 0, -ENOENT if it is gone, -ENOTDIR if it is not
 * a directory.  *pp is a handle to put (NULL if -ENOENT).  It takes no inode lock: the caller
 * first looks up the children it changes, then locks them with the parent
 * in lock_inodes()'s order.
 */
static int parent_dir(struct tfs *fs, uint64_t ino, struct tfs_inode **pp)
{
	int ret = inode_get(fs, ino, pp);

	if (ret)
		return ret;
	return inode_dir(*pp) ? 0 : -ENOTDIR;
}

/* ---- locking a set of inodes under ns_lock ---- */

/* Distance from the root; ns_lock keeps every directory's parent stable. */
static unsigned depth(struct tfs *fs, struct tfs_inode *ip)
{
	unsigned d = 0;

	ip = inode_grab(ip);
	while (inode_ino(ip) != TFS_ROOT_INO && d < (1u << 20)) {
		struct tfs_inode *up;
		int ret = inode_get(fs, inode_parent(ip), &up);

		inode_put(fs, ip);
		d++;
		if (ret)
			return d;
		ip = up;
	}
	inode_put(fs, ip);
	return d;
}

struct lockset {
	struct tfs_inode *ip[4];
	uint64_t key[4];
	unsigned n;
};

/*
 * Lookups and readdir lock a directory, then one of its entries, so every
 * namespace change must lock a parent before a child, both as the tree is
 * now and as it will be (a renamed directory becomes the child of p2).
 * Order: the parents the operation names (p1, p2) before the children (c1,
 * c2) -- the caller has checked that no child is an ancestor of a parent --
 * and within each group directories by depth (a parent is shallower than
 * its subdirectory), then the rest by inode number (the order the data path
 * uses for two files).
 */
static void lock_inodes(struct tfs *fs, struct lockset *ls, struct tfs_inode *p1,
			struct tfs_inode *p2, struct tfs_inode *c1, struct tfs_inode *c2)
{
	struct tfs_inode *in[4] = { p1, p2, c1, c2 };

	ls->n = 0;
	for (unsigned i = 0; i < 4; i++) {
		bool dup = !in[i];
		for (unsigned j = 0; j < ls->n && !dup; j++)
			dup = ls->ip[j] == in[i];
		if (dup)
			continue;
		ls->ip[ls->n] = in[i];
		ls->key[ls->n] = (uint64_t)(i >= 2) << 32 |
				 (inode_dir(in[i]) ? depth(fs, in[i]) : UINT32_MAX);
		ls->n++;
	}
	for (unsigned i = 1; i < ls->n; i++) {	/* insertion sort of <= 4 */
		for (unsigned j = i; j > 0; j--) {
			struct tfs_inode *x = ls->ip[j - 1], *y = ls->ip[j];
			bool swap = ls->key[j - 1] > ls->key[j] ||
				    (ls->key[j - 1] == ls->key[j] && inode_ino(x) > inode_ino(y));
			if (!swap)
				break;
			uint64_t k = ls->key[j - 1];
			ls->ip[j - 1] = y;
			ls->ip[j] = x;
			ls->key[j - 1] = ls->key[j];
			ls->key[j] = k;
		}
	}
	for (unsigned i = 0; i < ls->n; i++)
		inode_lock(ls->ip[i]);
}

static void unlock_inodes(struct lockset *ls)
{
	for (unsigned i = ls->n; i-- > 0;)
		inode_unlock(ls->ip[i]);
	ls->n = 0;
}

/* inode_may_change with @ip's own lock: for the checks that come before
 * an operation takes its locks, where the kernel's own file systems make
 * them (may_delete: EPERM before ENOTEMPTY, EISDIR and the like). */
static int may_change(struct tfs_inode *ip, bool append)
{
	int ret;

	inode_lock(ip);
	ret = inode_may_change(ip, append);
	inode_unlock(ip);
	return ret;
}

/* ---- building transactions ---- */

/* The new state of up to four inodes, one LR_INODE each (a state record
 * replaces the whole inode, so two records for one inode would lose the
 * first one's change). */
struct ichanges {
	struct tfs_inode *ip[4];
	struct log_rec r[4];
	unsigned n;
};

static struct log_inode *ichange(struct ichanges *v, struct tfs_inode *ip)
{
	for (unsigned i = 0; i < v->n; i++)
		if (v->ip[i] == ip)
			return &v->r[i].inode;
	v->ip[v->n] = ip;
	fs_iencode(ip, &v->r[v->n]);
	return &v->r[v->n++].inode;
}

static int ichanges_add(struct meta_tx *tx, struct ichanges *v)
{
	for (unsigned i = 0; i < v->n; i++) {
		int ret = meta_tx_add(tx, &v->r[i]);
		if (ret)
			return ret;
	}
	return 0;
}

static int add_dent(struct meta_tx *tx, int type, uint64_t parent, const char *name,
		    size_t len, uint64_t ino)
{
	struct log_rec r = { .type = (uint16_t)type };

	r.dent.parent = parent;
	r.dent.ino = ino;
	r.dent.namelen = (uint16_t)len;
	r.dent.name = name;
	return meta_tx_add(tx, &r);
}

/* Parent directory touched by a name change: mtime and ctime, nlink delta. */
static void touch_dir(struct ichanges *v, struct tfs_inode *dp, int64_t now, int dnlink)
{
	struct log_inode *li = ichange(v, dp);

	li->mtime_ns = li->ctime_ns = now;
	li->nlink = (uint32_t)((int64_t)li->nlink + dnlink);
}

static int commit(struct tfs *fs, struct meta_tx *tx)
{
	uint64_t seq;
	return meta_tx_commit(fs, tx, &seq);
}

/* ---- lookup and attributes ---- */

int tfs_lookup(struct tfs *fs, uint64_t parent, const char *name, struct stat *st)
{
	size_t len;
	int ret = check_name(name, &len);
	struct tfs_inode *pip, *cip;
	uint64_t ino;

	if (ret)
		return ret;
	if (is_dot(name, len)) {
		/* Only the kernel's export code asks for "." (open_by_handle_at
		 * after it dropped the inode, so it holds no reference): the
		 * inode itself, of any type, unless it was deleted (-ENOENT:
		 * the handle is stale).  Under ns_lock, which every delete
		 * holds, so an inode being created (not yet named) or deleted
		 * is never half seen. */
		pthread_mutex_lock(&fs->ns_lock);
		ret = inode_get(fs, parent, &pip);
		if (!ret && inode_nlink(pip) == 0) {
			ret = -ENOENT;
		} else if (!ret) {
			inode_lock(pip);
			fs_istat(pip, st);
			inode_lookup_add(pip, 1);
			inode_unlock(pip);
		}
		pthread_mutex_unlock(&fs->ns_lock);
		inode_put(fs, pip);
		return ret;
	}
	ret = inode_get(fs, parent, &pip);
	if (ret)
		return ret;

	if (is_dotdot(name, len)) {
		/* The parent's parent: a child-to-parent lock order is not
		 * allowed, so hold ns_lock to keep it from going away. */
		pthread_mutex_lock(&fs->ns_lock);
		ret = -ENOTDIR;
		if (inode_dir(pip)) {
			ret = inode_get(fs, inode_ino(pip) == TFS_ROOT_INO ? TFS_ROOT_INO :
					inode_parent(pip), &cip);
			if (!ret) {
				inode_lock(cip);
				fs_istat(cip, st);
				inode_lookup_add(cip, 1);
				inode_unlock(cip);
				inode_put(fs, cip);
			}
		}
		pthread_mutex_unlock(&fs->ns_lock);
		inode_put(fs, pip);
		return ret;
	}

	inode_lock(pip);
	if (!inode_dir(pip)) {
		ret = -ENOTDIR;
	} else if (dir_lookup(inode_dir(pip), name, len, &ino)) {
		ret = -ENOENT;
	} else if (inode_get(fs, ino, &cip)) {
		ret = -EUCLEAN;
	} else {
		/* Holding the parent keeps the name, so the child cannot be
		 * deleted before its reference is counted. */
		if (cip == pip) {
			ret = -EUCLEAN;
		} else {
			inode_lock(cip);
			fs_istat(cip, st);
			inode_lookup_add(cip, 1);
			inode_unlock(cip);
		}
		inode_put(fs, cip);
	}
	inode_unlock(pip);
	inode_put(fs, pip);
	return ret;
}

int tfs_getattr(struct tfs *fs, uint64_t ino, struct stat *st)
{
	struct tfs_inode *ip;
	int ret = inode_get(fs, ino, &ip);

	if (ret)
		return ret;
	stat_inode(ip, st);
	inode_put(fs, ip);
	return 0;
}

/* The noted value is the one sent, taken before it is noted: a change
 * in between makes tfs_blocks_stale true, never false. */
void tfs_blocks_seen(struct tfs *fs, const struct stat *st)
{
	struct tfs_inode *ip;

	if (!S_ISREG(st->st_mode) || inode_get(fs, st->st_ino, &ip))
		return;
	inode_set_seen_mapped(ip, (uint64_t)st->st_blocks / 8);
	inode_put(fs, ip);
}

bool tfs_blocks_stale(struct tfs *fs, uint64_t ino)
{
	struct tfs_inode *ip;
	bool stale;

	if (inode_get(fs, ino, &ip))
		return true;
	stale = inode_mapped(ip) != inode_seen_mapped(ip);
	inode_put(fs, ip);
	return stale;
}

ssize_t tfs_readlink(struct tfs *fs, uint64_t ino, char *buf, size_t size)
{
	struct tfs_inode *ip;
	ssize_t ret = inode_get(fs, ino, &ip);

	if (ret)
		return ret;
	inode_lock(ip);
	if (!S_ISLNK(inode_mode(ip)) || !inode_symlink(ip)) {
		ret = -EINVAL;
	} else {
		size_t len = strlen(inode_symlink(ip));
		memcpy(buf, inode_symlink(ip), len < size ? len : size);
		ret = (ssize_t)len;
	}
	inode_unlock(ip);
	inode_put(fs, ip);
	return ret;
}

/* ---- creating ---- */

/* An ACL a new inode inherits, in its create's transaction. */
static int add_acl(struct meta_tx *tx, uint64_t ino, const char *name, const void *val,
		   uint32_t len)
{
	struct log_rec r = xattr_set_rec(ino, name, strlen(name), val, len);

	return meta_tx_add(tx, &r);
}

/* ns_begin for a create, which takes the umask or the parent's default
 * ACL (*mode, *ai: logged with the inode, so never a file with the masked
 * mode but not its ACL) and reserves the node slots of both. */
static int create_begin(struct tfs *fs, uint64_t parent, mode_t *mode, size_t tlen,
			const struct tfs_cred *c, struct acl_inherit *ai, struct fs_resv *resv)
{
	uint64_t slots = FS_NS_CREATE + FS_NS_SYMLINK_CHUNK * v2_symlink_chunks(tlen);
	uint32_t imode = (uint32_t)*mode;
	int ret = acl_inherit(fs, parent, &imode, c ? c->umask : 0, ai);

	if (ret)
		return ret;
	*mode = (mode_t)imode;
	if (ai->access)
		slots += meta_v2_xattr_slots(NULL, strlen(ACL_XATTR_ACCESS), ai->alen);
	if (ai->dflt)
		slots += meta_v2_xattr_slots(NULL, strlen(ACL_XATTR_DEFAULT), ai->dlen);
	ret = ns_begin(fs, true, slots, resv);
	if (ret)
		acl_inherit_free(ai);
	return ret;
}

/* The LR_INODE record of a new inode under @pip (its number allocated
 * here): owned by @c (root without), the group of a setgid @pip (BSD
 * semantics, and a subdirectory inherits the bit), one name (a directory
 * two) or none (@orphan: O_TMPFILE). */
static uint64_t new_inode_rec(struct tfs *fs, struct tfs_inode *pip, mode_t mode, dev_t rdev,
			      const char *target, size_t tlen, const struct tfs_cred *c,
			      bool orphan, int64_t now, struct log_rec *r)
{
	struct log_inode *li = &r->inode;

	*r = (struct log_rec){ .type = LR_INODE };
	li->ino = fs_ialloc(fs);
	li->uid = c ? c->uid : 0;
	li->gid = c ? c->gid : 0;
	if (inode_mode(pip) & S_ISGID) {
		li->gid = inode_gid(pip);
		if (S_ISDIR(mode))
			mode |= S_ISGID;
	}
	li->mode = (uint32_t)mode;
	li->nlink = orphan ? 0 : S_ISDIR(mode) ? 2 : 1;
	li->parent = S_ISDIR(mode) ? inode_ino(pip) : 0;
	li->rdev = (S_ISCHR(mode) || S_ISBLK(mode)) ? (uint64_t)rdev : 0;
	li->size = tlen;
	li->gen = atomic_fetch_add(&gen_counter, 1);
	li->atime_ns = li->mtime_ns = li->ctime_ns = li->btime_ns = now;
	li->target = target;
	li->target_len = (uint32_t)tlen;
	return li->ino;
}

/* The checks of a new name and its mode; *tlen gets a symlink's length. */
static int create_args(const char *name, mode_t *mode, const char *target, size_t *tlen)
{
	size_t len;
	int ret = name ? check_name(name, &len) : 0;

	if (ret)
		return ret;
	if (name && (is_dot(name, len) || is_dotdot(name, len)))
		return -EEXIST;
	if (!(*mode & S_IFMT))
		*mode |= S_IFREG;
	switch (*mode & S_IFMT) {
	case S_IFREG: case S_IFDIR: case S_IFLNK: case S_IFIFO:
	case S_IFSOCK: case S_IFCHR: case S_IFBLK:
		break;
	default:
		return -EINVAL;
	}
	if (!name && !S_ISREG(*mode))
		return -EINVAL;
	*tlen = 0;
	if (S_ISLNK(*mode)) {
		if (!target)
			return -EINVAL;
		*tlen = strlen(target);
		if (!*tlen)
			return -ENOENT;
		if (*tlen > LOG_SYMLINK_MAX)
			return -ENAMETOOLONG;
	}
	return 0;
}

/* @name NULL: an O_TMPFILE inode, with no name and no link (an orphan from
 * the start: the mount after a crash deletes it unless a link named it),
 * which leaves @parent unchanged. */
int namei_create(struct tfs *fs, uint64_t parent, const char *name, mode_t mode,
		 dev_t rdev, const char *target, const struct tfs_cred *c,
		 struct tfs_inode **ipp)
{
	struct fs_resv resv;
	size_t len = name ? strlen(name) : 0, tlen;
	int ret = create_args(name, &mode, target, &tlen);

	if (ret)
		return ret;
	struct acl_inherit ai;

	ret = create_begin(fs, parent, &mode, tlen, c, &ai, &resv);
	if (ret)
		return ret;

	struct tfs_inode *pip = NULL;
	struct meta_tx tx;
	struct ichanges v = { .n = 0 };
	struct lockset ls = { .n = 0 };
	uint64_t ino;

	meta_tx_init(&tx);
	ret = parent_dir(fs, parent, &pip);
	if (ret)
		goto out;
	lock_inodes(fs, &ls, pip, NULL, NULL, NULL);
	if (inode_nlink(pip) == 0) {		/* removed while the kernel holds it */
		ret = -ENOENT;
		goto out;
	}
	/* chattr +i refuses new names; +a takes them, and O_TMPFILE adds none */
	ret = name ? inode_may_change(pip, false) : 0;
	if (ret)
		goto out;
	if (name && !dir_lookup(inode_dir(pip), name, len, &ino)) {
		ret = -EEXIST;
		goto out;
	}
	if (S_ISDIR(mode) && inode_nlink(pip) >= TFS_LINK_MAX) {
		ret = -EMLINK;
		goto out;
	}

	int64_t now = fs_ts_ns(fs_now());
	struct log_rec r;

	ino = new_inode_rec(fs, pip, mode, rdev, target, tlen, c, !name, now, &r);
	ret = meta_tx_add(&tx, &r);
	if (!ret && ai.access)
		ret = add_acl(&tx, ino, ACL_XATTR_ACCESS, ai.access, ai.alen);
	if (!ret && ai.dflt)
		ret = add_acl(&tx, ino, ACL_XATTR_DEFAULT, ai.dflt, ai.dlen);
	if (name) {
		if (!ret)
			ret = add_dent(&tx, LR_DENT_SET, inode_ino(pip), name, len, ino);
		touch_dir(&v, pip, now, S_ISDIR(mode) ? 1 : 0);
	}
	if (!ret)
		ret = ichanges_add(&tx, &v);
	if (!ret)
		ret = commit(fs, &tx);
	if (!ret) {
		struct tfs_inode *ip;

		if (inode_get(fs, ino, &ip)) {
			ret = -EUCLEAN;
		} else {
			/* The caller gets the handle: the lookup keeps the
			 * inode from deletion, not in memory (format v2: once
			 * a checkpoint wrote it, the cache may drop it). */
			inode_lookup_add(ip, 1);
			*ipp = ip;
		}
	}
out:
	unlock_inodes(&ls);
	ns_end(fs, &resv);
	inode_put(fs, pip);
	meta_tx_free(&tx);
	acl_inherit_free(&ai);
	return ret;
}

static int create_stat(struct tfs *fs, uint64_t parent, const char *name, mode_t mode,
		       dev_t rdev, const char *target, const struct tfs_cred *c,
		       struct stat *st)
{
	struct tfs_inode *ip;
	int ret = namei_create(fs, parent, name, mode, rdev, target, c, &ip);

	if (!ret) {
		stat_inode(ip, st);
		inode_put(fs, ip);
	}
	return ret;
}

int tfs_mknod(struct tfs *fs, uint64_t parent, const char *name, mode_t mode, dev_t rdev,
	      const struct tfs_cred *c, struct stat *st)
{
	if (S_ISDIR(mode) || S_ISLNK(mode))
		return -EINVAL;
	return create_stat(fs, parent, name, mode, rdev, NULL, c, st);
}

/* A regular file, opened: O_CREAT of open(2) (and an existing name opened
 * like open(2) without it, unless O_EXCL). */
int tfs_create(struct tfs *fs, uint64_t parent, const char *name, mode_t mode, int flags,
	       const struct tfs_cred *c, struct stat *st, struct tfs_file **f)
{
	struct tfs_inode *ip = NULL;
	int ret;

	for (int tries = 0; tries < 8; tries++) {
		struct stat tmp;

		ret = namei_create(fs, parent, name, S_IFREG | (mode & 07777), 0, NULL, c, &ip);
		if (ret == 0) {
			/* New and empty: no truncate needed. */
			ret = file_open_ip(fs, ip, flags & ~O_TRUNC, f);
			break;
		}
		/* Format v2's node gate refuses creates before it looks at the
		 * name: an existing one is opened all the same, as below (it
		 * needs no room), or is EEXIST for O_EXCL. */
		if (ret != -EEXIST && ret != -ENOSPC)
			return ret;
		if ((flags & O_EXCL) && ret == -EEXIST)
			return ret;
		/* Existing name: open it like open(2) without O_CREAT.  The lookup
		 * adds the kernel reference create promises; a handle keeps the
		 * inode in memory until the open counts (format v2 drops an
		 * inode only a kernel lookup holds). */
		int why = ret;

		ret = tfs_lookup(fs, parent, name, &tmp);
		if (ret == -ENOENT && why == -ENOSPC)
			return why;	/* a new name: no room for it */
		if (ret == -ENOENT)
			continue;	/* unlinked meanwhile: create again */
		if (ret)
			return ret;
		if (flags & O_EXCL) {
			tfs_forget(fs, tmp.st_ino, 1);
			return -EEXIST;
		}
		ret = inode_get(fs, tmp.st_ino, &ip);
		if (ret) {
			ip = NULL;
			tfs_forget(fs, tmp.st_ino, 1);
			continue;	/* deleted meanwhile */
		}
		ret = file_open_ip(fs, ip, flags, f);
		break;
	}
	if (ret == 0)
		stat_inode(ip, st);
	else if (ip)
		tfs_forget(fs, inode_ino(ip), 1);
	if (ip)
		inode_put(fs, ip);
	return ret;
}

/* O_TMPFILE: a regular file with no name, opened (namei_create's orphan);
 * link(2) may name it later (the kernel sends that link only for a file
 * opened without O_EXCL, I_LINKABLE). */
int tfs_tmpfile(struct tfs *fs, uint64_t parent, mode_t mode, int flags,
		const struct tfs_cred *c, struct stat *st, struct tfs_file **f)
{
	struct tfs_inode *ip;
	int ret = namei_create(fs, parent, NULL, S_IFREG | (mode & 07777), 0, NULL, c, &ip);

	if (ret)
		return ret;
	ret = file_open_ip(fs, ip, flags & ~O_TRUNC, f);
	if (!ret)
		stat_inode(ip, st);
	else
		tfs_forget(fs, inode_ino(ip), 1);	/* no name, no user: deleted */
	inode_put(fs, ip);
	return ret;
}

int tfs_mkdir(struct tfs *fs, uint64_t parent, const char *name, mode_t mode,
	      const struct tfs_cred *c, struct stat *st)
{
	return create_stat(fs, parent, name, S_IFDIR | (mode & 07777), 0, NULL, c, st);
}

int tfs_symlink(struct tfs *fs, uint64_t parent, const char *name, const char *target,
		const struct tfs_cred *c, struct stat *st)
{
	return create_stat(fs, parent, name, S_IFLNK | 0777, 0, target, c, st);
}

int tfs_link(struct tfs *fs, uint64_t ino, uint64_t newparent, const char *newname,
	     struct stat *st)
{
	struct fs_resv resv;
	size_t len;
	int ret = check_name(newname, &len);

	if (ret)
		return ret;
	if (is_dot(newname, len) || is_dotdot(newname, len))
		return -EEXIST;
	ret = ns_begin(fs, true, FS_NS_LINK, &resv);
	if (ret)
		return ret;

	struct tfs_inode *ip = NULL, *pip = NULL;
	struct meta_tx tx;
	struct ichanges v = { .n = 0 };
	struct lockset ls = { .n = 0 };
	uint64_t other;

	meta_tx_init(&tx);
	ret = inode_get(fs, ino, &ip);
	if (!ret)
		ret = parent_dir(fs, newparent, &pip);
	if (ret)
		goto out;
	if (inode_dir(ip)) {
		ret = -EPERM;
		goto out;
	}
	lock_inodes(fs, &ls, pip, NULL, ip, NULL);
	/* An inode without a name may get one: the kernel refuses the link of
	 * an unlinked file (ENOENT) unless it is an O_TMPFILE one (I_LINKABLE),
	 * and an inode the kernel holds is not deleted under us (ns_lock). */
	if (inode_nlink(pip) == 0) {
		ret = -ENOENT;
		goto out;
	}
	ret = inode_may_change(pip, false);
	if (!ret)
		ret = inode_may_change(ip, true);
	if (ret)
		goto out;
	if (!dir_lookup(inode_dir(pip), newname, len, &other)) {
		ret = -EEXIST;
		goto out;
	}
	if (inode_nlink(ip) >= TFS_LINK_MAX) {
		ret = -EMLINK;
		goto out;
	}

	int64_t now = fs_ts_ns(fs_now());
	struct log_inode *li = ichange(&v, ip);

	li->nlink++;
	li->ctime_ns = now;
	touch_dir(&v, pip, now, 0);
	ret = add_dent(&tx, LR_DENT_SET, inode_ino(pip), newname, len, inode_ino(ip));
	if (!ret)
		ret = ichanges_add(&tx, &v);
	if (!ret)
		ret = commit(fs, &tx);
	if (!ret) {
		inode_lookup_add(ip, 1);
		if (st)
			fs_istat(ip, st);
	}
out:
	unlock_inodes(&ls);
	ns_end(fs, &resv);
	inode_put(fs, ip);
	inode_put(fs, pip);
	meta_tx_free(&tx);
	return ret;
}

/* ---- removing ---- */

static int remove_name(struct tfs *fs, uint64_t parent, const char *name, bool isdir)
{
	struct fs_resv resv;
	size_t len;
	int ret = check_name(name, &len);

	if (ret)
		return ret;
	if (is_dot(name, len) || is_dotdot(name, len))
		return isdir ? (is_dot(name, len) ? -EINVAL : -ENOTEMPTY) : -EISDIR;
	ret = ns_begin(fs, false, FS_NS_UNLINK, &resv);
	if (ret)
		return ret;

	struct tfs_inode *pip = NULL, *cip = NULL;
	struct meta_tx tx;
	struct ichanges v = { .n = 0 };
	struct lockset ls = { .n = 0 };
	uint64_t ino;

	meta_tx_init(&tx);
	ret = parent_dir(fs, parent, &pip);
	if (ret)
		goto out;
	if (dir_lookup(inode_dir(pip), name, len, &ino)) {
		ret = -ENOENT;
		goto out;
	}
	if (inode_get(fs, ino, &cip)) {
		ret = -EUCLEAN;
		goto out;
	}
	ret = may_change(pip, true);		/* chattr +i, +a */
	if (!ret)
		ret = may_change(cip, true);
	if (ret)
		goto out;
	if (isdir && !inode_dir(cip)) {
		ret = -ENOTDIR;
		goto out;
	}
	if (!isdir && inode_dir(cip)) {
		ret = -EISDIR;
		goto out;
	}
	if (isdir && dir_count(inode_dir(cip))) {
		ret = -ENOTEMPTY;
		goto out;
	}
	lock_inodes(fs, &ls, pip, NULL, cip, NULL);

	int64_t now = fs_ts_ns(fs_now());
	struct log_inode *li = ichange(&v, cip);

	li->nlink = isdir ? 0 : li->nlink - 1;
	li->ctime_ns = now;
	touch_dir(&v, pip, now, isdir ? -1 : 0);
	ret = add_dent(&tx, LR_DENT_DEL, inode_ino(pip), name, len, ino);
	if (!ret)
		ret = ichanges_add(&tx, &v);
	if (!ret)
		ret = commit(fs, &tx);
	unlock_inodes(&ls);
	if (!ret)
		fs_imaybe_delete_locked(fs, cip);
out:
	unlock_inodes(&ls);
	ns_end(fs, &resv);
	inode_put(fs, cip);
	inode_put(fs, pip);
	meta_tx_free(&tx);
	return ret;
}

int tfs_unlink(struct tfs *fs, uint64_t parent, const char *name)
{
	return remove_name(fs, parent, name, false);
}

int tfs_rmdir(struct tfs *fs, uint64_t parent, const char *name)
{
	return remove_name(fs, parent, name, true);
}

/* ---- rename ---- */

/* Whether @anc is @ip or one of its ancestors (ns_lock held). */
static bool is_ancestor(struct tfs *fs, struct tfs_inode *anc, struct tfs_inode *ip)
{
	bool found = false;

	ip = inode_grab(ip);
	for (unsigned n = 0; n < (1u << 20); n++) {
		struct tfs_inode *up;

		if (ip == anc)
			found = true;
		if (found || inode_ino(ip) == TFS_ROOT_INO ||
		    inode_get(fs, inode_parent(ip), &up))
			break;
		inode_put(fs, ip);
		ip = up;
	}
	inode_put(fs, ip);
	return found;
}

/* The two names of a rename and what they resolve to (ns_lock held). */
struct rename_op {
	const char *name, *newname;
	size_t len, nlen;
	unsigned flags;
	bool exchange;
	struct tfs_inode *p1, *p2, *c1, *c2;	/* c2: NULL when newname is free */
};

static int rename_check_args(struct rename_op *r)
{
	int ret;

	if ((r->flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT)) ||
	    (r->exchange && (r->flags & (RENAME_NOREPLACE | RENAME_WHITEOUT))))
		return -EINVAL;
	ret = check_name(r->name, &r->len);
	if (!ret)
		ret = check_name(r->newname, &r->nlen);
	if (ret)
		return ret;
	if (is_dot(r->name, r->len) || is_dotdot(r->name, r->len) ||
	    is_dot(r->newname, r->nlen) || is_dotdot(r->newname, r->nlen))
		return -EINVAL;
	return 0;
}

/* Find both parents and both children; 0 or -errno. */
static int rename_resolve(struct tfs *fs, struct rename_op *r, uint64_t parent,
			  uint64_t newparent)
{
	uint64_t ino1, ino2;
	int ret, ret2;

	ret = parent_dir(fs, parent, &r->p1);
	ret2 = parent_dir(fs, newparent, &r->p2);
	if (!ret || ret2 == -ENOENT)	/* a missing parent wins over a non-directory */
		ret = ret2;
	if (ret)
		return ret;
	if (dir_lookup(inode_dir(r->p1), r->name, r->len, &ino1))
		return -ENOENT;
	if (inode_get(fs, ino1, &r->c1))
		return -EUCLEAN;
	if (!dir_lookup(inode_dir(r->p2), r->newname, r->nlen, &ino2)) {
		if (inode_get(fs, ino2, &r->c2))
			return -EUCLEAN;
	}
	return 0;
}

static void rename_put(struct tfs *fs, struct rename_op *r)
{
	inode_put(fs, r->p1);
	inode_put(fs, r->p2);
	inode_put(fs, r->c1);
	inode_put(fs, r->c2);
}

/*
 * What POSIX and renameat2 refuse, before any lock: 0, -errno, or 1 when
 * there is nothing to do (two names of one inode).
 */
static int rename_check(struct tfs *fs, const struct rename_op *r)
{
	struct tfs_inode *c1 = r->c1, *c2 = r->c2;

	if (c2 == c1)
		return (r->flags & RENAME_NOREPLACE) ? -EEXIST : 1;
	if ((r->flags & RENAME_NOREPLACE) && c2)
		return -EEXIST;
	if (r->exchange && !c2)
		return -ENOENT;
	/* No directory into its own subtree. */
	if ((inode_dir(c1) && is_ancestor(fs, c1, r->p2)) ||
	    (r->exchange && inode_dir(c2) && is_ancestor(fs, c2, r->p1)))
		return -EINVAL;
	if (c2 && !r->exchange) {
		if (inode_dir(c1) && !inode_dir(c2))
			return -ENOTDIR;
		if (!inode_dir(c1) && inode_dir(c2))
			return -EISDIR;
		if (inode_dir(c2) && dir_count(inode_dir(c2)))
			return -ENOTEMPTY;
	}
	return 0;
}

/* chattr's +i and +a: neither inode may move or be replaced, nor a name
 * leave a directory that has either flag; an append-only directory takes
 * the new name. */
static int rename_flags_ok(const struct rename_op *r)
{
	int ret = may_change(r->p1, true);

	if (!ret)
		ret = may_change(r->p2, r->c2 != NULL);
	if (!ret)
		ret = may_change(r->c1, true);
	if (!ret && r->c2)
		ret = may_change(r->c2, true);
	return ret;
}

/* The directory entries and inode changes of the rename, into @tx and @v
 * (inodes locked).  0 or -errno. */
static int rename_changes(const struct rename_op *r, struct meta_tx *tx, struct ichanges *v)
{
	struct tfs_inode *p1 = r->p1, *p2 = r->p2, *c1 = r->c1, *c2 = r->c2;
	bool cross = p1 != p2;
	int64_t now = fs_ts_ns(fs_now());
	struct log_inode *l1 = ichange(v, c1), *l2;
	int ret;

	l1->ctime_ns = now;
	touch_dir(v, p1, now, 0);
	touch_dir(v, p2, now, 0);
	if (r->exchange) {
		l2 = ichange(v, c2);
		l2->ctime_ns = now;
		ret = add_dent(tx, LR_DENT_SET, inode_ino(p1), r->name, r->len, inode_ino(c2));
		if (!ret)
			ret = add_dent(tx, LR_DENT_SET, inode_ino(p2), r->newname, r->nlen, inode_ino(c1));
		if (cross && inode_dir(c2)) {
			l2->parent = inode_ino(p1);
			touch_dir(v, p2, now, -1);
			touch_dir(v, p1, now, 1);
		}
	} else {
		ret = add_dent(tx, LR_DENT_SET, inode_ino(p2), r->newname, r->nlen, inode_ino(c1));
		if (!ret)
			ret = add_dent(tx, LR_DENT_DEL, inode_ino(p1), r->name, r->len, inode_ino(c1));
		if (c2) {	/* the replaced inode loses this name */
			l2 = ichange(v, c2);
			l2->nlink = inode_dir(c2) ? 0 : l2->nlink - 1;
			l2->ctime_ns = now;
			if (inode_dir(c2))
				touch_dir(v, p2, now, -1);
		}
	}
	if (cross && inode_dir(c1)) {
		l1->parent = inode_ino(p2);
		touch_dir(v, p1, now, -1);
		touch_dir(v, p2, now, 1);
	}
	return ret;
}

/* RENAME_WHITEOUT (overlayfs's upper layer): in the same transaction the
 * old name becomes a whiteout, a character device 0:0 of mode 0 owned by
 * @c, as the kernel's own file systems make it (shmem_whiteout). */
static int rename_whiteout(struct tfs *fs, const struct rename_op *r,
			   const struct tfs_cred *c, struct meta_tx *tx)
{
	struct log_rec wr;
	uint64_t ino = new_inode_rec(fs, r->p1, S_IFCHR, 0, NULL, 0, c, false,
				     fs_ts_ns(fs_now()), &wr);
	int ret = meta_tx_add(tx, &wr);

	return ret ? ret : add_dent(tx, LR_DENT_SET, inode_ino(r->p1), r->name, r->len, ino);
}

int tfs_rename(struct tfs *fs, uint64_t parent, const char *name, uint64_t newparent,
	       const char *newname, unsigned flags)
{
	return tfs_rename_cred(fs, parent, name, newparent, newname, flags, NULL);
}

int tfs_rename_cred(struct tfs *fs, uint64_t parent, const char *name, uint64_t newparent,
		    const char *newname, unsigned flags, const struct tfs_cred *c)
{
	bool whiteout = flags & RENAME_WHITEOUT;
	struct rename_op r = { .name = name, .newname = newname, .flags = flags,
			       .exchange = flags & RENAME_EXCHANGE };
	struct meta_tx tx;
	struct ichanges v = { .n = 0 };
	struct lockset ls = { .n = 0 };
	struct fs_resv resv;
	int ret;

	ret = rename_check_args(&r);
	if (ret)
		return ret;
	ret = ns_begin(fs, whiteout, FS_NS_RENAME + (whiteout ? FS_NS_CREATE : 0), &resv);
	if (ret)
		return ret;
	meta_tx_init(&tx);
	ret = rename_resolve(fs, &r, parent, newparent);
	if (!ret)
		ret = rename_flags_ok(&r);
	if (!ret)
		ret = rename_check(fs, &r);
	if (ret)
		goto out;
	lock_inodes(fs, &ls, r.p1, r.p2, r.c1, r.c2);
	if (inode_nlink(r.p2) == 0) {
		ret = -ENOENT;
		goto out;
	}
	if (r.p1 != r.p2 && inode_dir(r.c1) && !(r.exchange && inode_dir(r.c2)) &&
	    inode_nlink(r.p2) >= TFS_LINK_MAX) {
		ret = -EMLINK;
		goto out;
	}
	ret = rename_changes(&r, &tx, &v);
	if (!ret && whiteout)
		ret = rename_whiteout(fs, &r, c, &tx);
	if (!ret)
		ret = ichanges_add(&tx, &v);
	if (!ret)
		ret = commit(fs, &tx);
	unlock_inodes(&ls);
	if (!ret && r.c2 && !r.exchange)
		fs_imaybe_delete_locked(fs, r.c2);
out:
	unlock_inodes(&ls);
	ns_end(fs, &resv);
	rename_put(fs, &r);
	meta_tx_free(&tx);
	return ret > 0 ? 0 : ret;	/* 1: nothing to do */
}
