// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * attr: setattr, the one operation that spans the namespace's metadata and
 * the data path: a size change truncates or extends the file (file.c)
 * before the attributes are logged.  It sits above both, so namei.c does
 * not call into the data path.
 */
#include <errno.h>
#include <string.h>

#include "acl.h"
#include "fs_i.h"

/* The size part of a setattr: 0 or -errno. */
static int set_size(struct tfs *fs, struct tfs_inode *ip, const struct stat *in,
		    int to_set)
{
	uint32_t mode;

	if (!(to_set & TFS_SET_SIZE))
		return 0;
	inode_lock(ip);
	mode = inode_mode(ip);
	inode_unlock(ip);
	if (S_ISDIR(mode))
		return -EISDIR;
	if (!S_ISREG(mode))
		return -EINVAL;
	if (in->st_size < 0)
		return -EINVAL;
	/* Takes the range lock and the inode lock itself. */
	return file_truncate(fs, ip, (uint64_t)in->st_size);
}

/* Everything else, as one LR_INODE; the new attributes into *out. */
static int set_attrs(struct tfs *fs, struct tfs_inode *ip, const struct stat *in,
		     int to_set, struct stat *out)
{
	struct meta_tx tx;
	uint64_t seq;
	struct log_rec r, xr;
	uint8_t aclbuf[ACL_XATTR_MAX];
	int64_t now = fs_ts_ns(fs_now());
	int ret;

	meta_tx_init(&tx);
	inode_lock(ip);
	fs_iencode(ip, &r);
	struct log_inode *li = &r.inode;
	if (to_set & TFS_SET_MODE)
		li->mode = (inode_mode(ip) & S_IFMT) | (in->st_mode & 07777);
	if (to_set & TFS_SET_UID)
		li->uid = in->st_uid;
	if (to_set & TFS_SET_GID)
		li->gid = in->st_gid;
	if (to_set & TFS_SET_ATIME_NOW)
		li->atime_ns = now;
	else if (to_set & TFS_SET_ATIME)
		li->atime_ns = fs_ts_ns(in->st_atim);
	if (to_set & TFS_SET_MTIME_NOW)
		li->mtime_ns = now;
	else if (to_set & TFS_SET_MTIME)
		li->mtime_ns = fs_ts_ns(in->st_mtim);
	else if (to_set & TFS_SET_SIZE)
		li->mtime_ns = now;	/* truncate(2) always sets mtime */
	li->ctime_ns = (to_set & TFS_SET_CTIME) ? fs_ts_ns(in->st_ctim) : now;
	ret = meta_tx_add(&tx, &r);
	/* posix_acl_chmod: the access ACL follows, in the same transaction,
	 * with ACLs off too: a mount with them on enforces what is stored,
	 * and must not find an ACL granting what a chmod took away. */
	if (!ret && (to_set & TFS_SET_MODE)) {
		acl_chmod_rec(ip, li->mode, aclbuf, &xr);
		if (xr.type)
			ret = meta_tx_add(&tx, &xr);
	}
	if (!ret)
		ret = meta_tx_commit(fs, &tx, &seq);
	/* Writes begun before this one publish without their mtime: the
	 * record order in the log gives replay the same. */
	if (!ret && (to_set & (TFS_SET_MTIME | TFS_SET_MTIME_NOW)))
		inode_mtime_bump(ip);
	if (!ret && out)
		fs_istat(ip, out);
	inode_unlock(ip);
	meta_tx_free(&tx);
	return ret;
}

/* Format v2: the node slots a chmod's rewrite of @ip's access ACL (same
 * size) takes at worst: those of its xattrs, plus 1 for the rounding. */
static uint64_t acl_slots(struct tfs *fs, struct tfs_inode *ip, int to_set)
{
	uint64_t slots = 0;

	if (!fs->v2 || !(to_set & TFS_SET_MODE))
		return 0;
	inode_lock(ip);
	for (const struct xattr *x = inode_xattrs(ip); x; x = x->next)
		if (!strcmp(x->name, ACL_XATTR_ACCESS))
			slots = meta_v2_xattr_slots(ip, 0, 0) + 1;
	inode_unlock(ip);
	return slots;
}

/*
 * What chattr's +i and +a refuse of a setattr: every change of an
 * immutable inode; of an append-only one mode, owner, size and times set
 * to a given value (utime(2) with times; "now" is allowed).  Through FUSE
 * the last is told by an atime given without "now": the kernel's
 * writeback cache sends the mtime and ctime it kept after an append with
 * no atime, which an utimensat() of the mtime alone looks like, so that
 * one goes through.
 */
static int setattr_allowed(struct tfs_inode *ip, int to_set)
{
	bool explicit_time = (to_set & TFS_SET_ATIME) && !(to_set & TFS_SET_ATIME_NOW);
	int ret;

	inode_lock(ip);
	ret = inode_may_change(ip, explicit_time ||
			       (to_set & (TFS_SET_MODE | TFS_SET_UID | TFS_SET_GID | TFS_SET_SIZE)));
	inode_unlock(ip);
	return ret;
}

int tfs_setattr(struct tfs *fs, uint64_t ino, const struct stat *in, int to_set,
		struct tfs_file *f, struct stat *out)
{
	struct tfs_inode *ip;
	int ret = inode_get(fs, ino, &ip);

	if (ret)
		return ret;
	if (!to_set) {
		if (out) {
			inode_lock(ip);
			fs_istat(ip, out);
			inode_unlock(ip);
		}
	} else if (fs->readonly) {
		ret = -EROFS;
	} else if (!(ret = setattr_allowed(ip, to_set))) {
		struct fs_resv resv = { 0 };

		ret = set_size(fs, ip, in, to_set);
		if (!ret && fs->log)
			ret = log_wait_space(fs->log);
		/* Its INODE item, until noted (never refused: it adds nothing);
		 * and a chmod's rewrite of the access ACL. */
		if (!ret && fs->log)
			ret = fs_node_reserve_slots(fs, false, FS_NS_INODE + acl_slots(fs, ip, to_set),
						    &resv);
		if (!ret)
			ret = set_attrs(fs, ip, in, to_set, out);
		fs_node_release(fs, &resv);
	}
	inode_put(fs, ip);
	return ret;
}

int tfs_getflags(struct tfs *fs, uint64_t ino, uint32_t *flags)
{
	struct tfs_inode *ip;
	int ret = inode_get(fs, ino, &ip);

	if (ret)
		return ret;
	inode_lock(ip);
	*flags = inode_flags(ip) & TFS_FL_KEPT;
	inode_unlock(ip);
	inode_put(fs, ip);
	return 0;
}

/* The flags and ctime, one LR_INODE, as any attribute change. */
int tfs_setflags(struct tfs *fs, uint64_t ino, uint32_t flags)
{
	struct fs_resv resv = { 0 };
	struct tfs_inode *ip;
	struct meta_tx tx;
	struct log_rec r;
	uint64_t seq;
	int ret;

	if (flags & ~TFS_FL_KEPT)
		return -EOPNOTSUPP;
	if (fs->readonly)
		return -EROFS;
	ret = inode_get(fs, ino, &ip);
	if (ret)
		return ret;
	if (fs->log)
		ret = log_wait_space(fs->log);
	if (!ret && fs->log)
		ret = fs_node_reserve_slots(fs, false, FS_NS_INODE, &resv);
	if (!ret) {
		meta_tx_init(&tx);
		inode_lock(ip);
		fs_iencode(ip, &r);
		r.inode.flags = flags;
		r.inode.ctime_ns = fs_ts_ns(fs_now());
		ret = meta_tx_add(&tx, &r);
		if (!ret)
			ret = meta_tx_commit(fs, &tx, &seq);
		inode_unlock(ip);
		meta_tx_free(&tx);
	}
	fs_node_release(fs, &resv);
	inode_put(fs, ip);
	return ret;
}
