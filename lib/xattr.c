// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * xattr: extended attributes.  An inode's attributes are a short list of
 * (name, value) in memory (struct xattr, protected by the inode's lock);
 * every change is one transaction: LR_XATTR_SET or LR_XATTR_DEL plus the
 * inode's new ctime.  Names are 1..255 bytes, values up to 64 KiB, as on
 * Linux (the kernel checks permissions; we check the namespace).  Per
 * inode, the name list must fit XATTR_LIST_MAX and the values together
 * XATTR_VALUES_MAX (see xattr_room).  POSIX ACLs (fs->acl) are two
 * xattrs of the system namespace whose access one moves the mode with it,
 * in the same transaction (acl.h).
 */
#include <errno.h>
#include <linux/limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "acl.h"
#include "fs_i.h"
#include "v2dirty.h"

#define XATTR_NAME_MAX_LEN 255
/* All values of one inode together.  Format v1 keeps them in memory and
 * writes them into every checkpoint, so they must stay small next to the
 * data; 1 MiB is 16 values of the largest size. */
#define XATTR_VALUES_MAX (1u << 20)

static int check_xname(const char *name, size_t *lenp)
{
	size_t len = strnlen(name, XATTR_NAME_MAX_LEN + 1);

	if (len == 0 || len > XATTR_NAME_MAX_LEN)
		return -ERANGE;	/* what setxattr(2)/getxattr(2) return */
	*lenp = len;
	return 0;
}

static const struct xattr *xfind(struct tfs_inode *ip, const char *name, size_t len)
{
	for (const struct xattr *x = inode_xattrs(ip); x; x = x->next)
		if (strlen(x->name) == len && !memcmp(x->name, name, len))
			return x;
	return NULL;
}

/*
 * -ENOSPC (as ext4) unless setting @namelen/@vallen (replacing @old, or
 * adding a name if NULL) keeps the inode's name list within XATTR_LIST_MAX,
 * the most listxattr(2) can ever return: past it every listxattr fails
 * with E2BIG and the names cannot even be found to remove them; and its
 * values within XATTR_VALUES_MAX.  Caller holds the inode lock.
 */
static int xattr_room(struct tfs_inode *ip, const struct xattr *old, size_t namelen,
		      size_t vallen)
{
	size_t names = old ? 0 : namelen + 1, vals = vallen;

	for (const struct xattr *x = inode_xattrs(ip); x; x = x->next) {
		names += strlen(x->name) + 1;
		if (x != old)
			vals += x->vallen;
	}
	return names > XATTR_LIST_MAX || vals > XATTR_VALUES_MAX ? -ENOSPC : 0;
}

/* One xattr change (or none: @xr NULL), the inode's ctime and its mode
 * @mode (an access ACL's); caller holds the inode lock. */
static int xattr_commit(struct tfs *fs, struct tfs_inode *ip, const struct log_rec *xr,
			uint32_t mode)
{
	struct meta_tx tx;
	struct log_rec r;
	uint64_t seq;
	int ret = 0;

	meta_tx_init(&tx);
	fs_iencode(ip, &r);
	r.inode.ctime_ns = fs_ts_ns(fs_now());
	r.inode.mode = mode;
	if (xr)
		ret = meta_tx_add(&tx, xr);
	if (!ret)
		ret = meta_tx_add(&tx, &r);
	if (!ret)
		ret = meta_tx_commit(fs, &tx, &seq);
	meta_tx_free(&tx);
	return ret;
}

/* Log room, and (format v2) the node slots the change of @ip's xattrs
 * (adding one of @namelen/@vallen, or none) makes the next checkpoint
 * write, reserved into *r until fs_node_release (after its commit, or
 * once it failed).  @grow: a set, which -ENOSPC refuses when the node
 * area is short; a remove goes on.  Called before the inode lock: a
 * checkpoint takes inode locks. */
static int xattr_begin(struct tfs *fs, bool grow, struct tfs_inode *ip, size_t namelen,
		       size_t vallen, struct fs_resv *r)
{
	uint64_t slots, noted;
	int ret;

	r->touch = r->other = 0;
	if (fs->readonly)
		return -EROFS;
	ret = fs->log ? log_wait_space(fs->log) : 0;
	if (ret || !fs->log || !fs->v2)
		return ret;
	inode_lock(ip);
	slots = meta_v2_xattr_slots(ip, namelen, vallen);
	inode_unlock(ip);
	/* What the open set counts for the inode already is counted; one
	 * more for the rounding when two changes of it race. */
	noted = v2d_xslots(fs->v2dirty, inode_ino(ip));
	slots = (slots > noted ? slots - noted : 0) + 1;
	return fs_node_reserve_slots(fs, grow, slots + FS_NS_INODE, r);
}

/*
 * An ACL name's checks (the kernel made them already; lib callers are
 * held to them too).  Without fs->acl both names are EOPNOTSUPP: storing
 * an ACL as a plain xattr would leave the mode unchanged while cp -a,
 * tar and rsync believe they set it (they fall back to chmod then).
 */
static int acl_check(struct tfs *fs, struct tfs_inode *ip, const char *name,
		     const void *val, size_t size)
{
	uint32_t mode;

	if (!fs->acl)
		return -EOPNOTSUPP;
	if (acl_valid(val, size))
		return -EINVAL;
	inode_lock(ip);
	mode = inode_mode(ip);
	inode_unlock(ip);
	if (S_ISLNK(mode))
		return -EOPNOTSUPP;
	/* set_posix_acl's rule: only directories have a default ACL */
	if (!strcmp(name, ACL_XATTR_DEFAULT) && !S_ISDIR(mode))
		return -EACCES;
	return 0;
}

struct log_rec xattr_set_rec(uint64_t ino, const char *name, size_t namelen, const void *val,
			     size_t size)
{
	struct log_rec r = { .type = LR_XATTR_SET };

	r.xattr.ino = ino;
	r.xattr.namelen = (uint16_t)namelen;
	r.xattr.name = name;
	r.xattr.vallen = (uint32_t)size;
	r.xattr.val = size ? val : "";
	return r;
}

/*
 * The record that sets @name to @val; with an access ACL, *mode takes its
 * permission bits (and loses S_ISGID on TFS_XATTR_KILL_SGID) and an ACL
 * the mode says all of is not kept: the record deletes a stored one, or
 * there is none (the result's type 0).  Caller holds the inode lock.
 */
static struct log_rec set_rec(struct tfs_inode *ip, uint64_t ino, const char *name,
			      size_t len, const void *val, size_t size, int flags,
			      uint32_t *mode)
{
	struct log_rec r = xattr_set_rec(ino, name, len, val, size);

	if (strcmp(name, ACL_XATTR_ACCESS))
		return r;
	if (flags & TFS_XATTR_KILL_SGID)
		*mode &= ~(uint32_t)S_ISGID;
	if (!acl_equiv_mode(val, size, mode)) {
		r.type = xfind(ip, name, len) ? LR_XATTR_DEL : 0;
		r.xattr.vallen = 0;
		r.xattr.val = NULL;
	}
	return r;
}

static int setxattr_ip(struct tfs *fs, struct tfs_inode *ip, uint64_t ino, const char *name,
		       const void *val, size_t size, int flags)
{
	struct fs_resv resv;
	size_t len;
	int ret;

	if (flags & ~(XATTR_CREATE | XATTR_REPLACE | TFS_XATTR_KILL_SGID))
		return -EINVAL;
	ret = check_xname(name, &len);
	if (ret)
		return ret;
	if (acl_name(name)) {
		ret = acl_check(fs, ip, name, val, size);
		if (ret)
			return ret;
	} else if (strncmp(name, "user.", 5) && strncmp(name, "trusted.", 8) &&
		   strncmp(name, "security.", 9)) {
		/* FUSE hands us every name; a local file system knows only
		 * these namespaces and refuses the rest ("foo.bar",
		 * "system.x"). */
		return -EOPNOTSUPP;
	}
	if (size > LOG_XATTR_VAL_MAX)
		return -E2BIG;
	ret = xattr_begin(fs, true, ip, len, size, &resv);
	if (ret)
		return ret;

	inode_lock(ip);
	const struct xattr *x = xfind(ip, name, len);
	if (x && (flags & XATTR_CREATE)) {
		ret = -EEXIST;
	} else if (!x && (flags & XATTR_REPLACE)) {
		ret = -ENODATA;
	} else if ((ret = xattr_room(ip, x, len, size)) == 0) {
		uint32_t mode = inode_mode(ip);
		struct log_rec r = set_rec(ip, ino, name, len, val, size, flags, &mode);

		ret = xattr_commit(fs, ip, r.type ? &r : NULL, mode);
	}
	inode_unlock(ip);
	fs_node_release(fs, &resv);	/* noted, or failed */
	return ret;
}

int tfs_setxattr(struct tfs *fs, uint64_t ino, const char *name, const void *val,
		 size_t size, int flags)
{
	struct tfs_inode *ip;
	int ret = inode_get(fs, ino, &ip);

	if (ret)
		return ret;
	inode_lock(ip);
	ret = inode_may_change(ip, true);
	inode_unlock(ip);
	if (!ret)
		ret = setxattr_ip(fs, ip, ino, name, val, size, flags);
	inode_put(fs, ip);
	return ret;
}

/*
 * Read-only statistic of a regular file, for the concurrency test: the most
 * non-overlapping write range locks ever held on it at once (rangelock.h's
 * max_writers), in decimal.  Writers hold their range lock across the
 * device writes and the commit, so a value above 1 proves disjoint writers
 * really overlapped inside the file system.  Not listed by listxattr.
 */
#define TFS_XATTR_MAX_WRITERS "user.twinfs.max_writers"

static ssize_t max_writers_xattr(struct tfs_inode *ip, void *buf, size_t size)
{
	char v[24];
	uint32_t mode;
	int n;

	inode_lock(ip);
	mode = inode_mode(ip);
	inode_unlock(ip);
	if (!S_ISREG(mode))
		return -ENODATA;
	struct rangelock *rl = inode_rl(ip);

	pthread_mutex_lock(&rl->mu);	/* a leaf lock: nothing is taken under it */
	n = snprintf(v, sizeof(v), "%u", rl->max_writers);
	pthread_mutex_unlock(&rl->mu);
	if (size == 0)
		return n;
	if (size < (size_t)n)
		return -ERANGE;
	memcpy(buf, v, (size_t)n);
	return n;
}

static ssize_t getxattr_ip(struct tfs *fs, struct tfs_inode *ip, uint64_t ino,
			   const char *name, void *buf, size_t size)
{
	size_t len;
	ssize_t ret;

	ret = check_xname(name, &len);
	if (ret)
		return ret;
	if (!strcmp(name, TFS_XATTR_MAX_WRITERS))
		return max_writers_xattr(ip, buf, size);
	inode_lock(ip);
	const struct xattr *x = xfind(ip, name, len);
	if (!x) {
		ret = -ENODATA;
	} else if (size == 0) {
		ret = x->vallen;
	} else if (size < x->vallen) {
		ret = -ERANGE;
	} else {
		memcpy(buf, x->val, x->vallen);
		ret = x->vallen;
	}
	inode_unlock(ip);
	return ret;
}

ssize_t tfs_getxattr(struct tfs *fs, uint64_t ino, const char *name, void *buf, size_t size)
{
	struct tfs_inode *ip;
	ssize_t ret = inode_get(fs, ino, &ip);

	if (ret)
		return ret;
	ret = getxattr_ip(fs, ip, ino, name, buf, size);
	inode_put(fs, ip);
	return ret;
}

static ssize_t listxattr_ip(struct tfs *fs, struct tfs_inode *ip, uint64_t ino, char *buf,
			    size_t size)
{
	size_t total = 0;
	ssize_t ret;

	inode_lock(ip);
	for (const struct xattr *x = inode_xattrs(ip); x; x = x->next)
		total += strlen(x->name) + 1;
	if (size == 0) {
		ret = (ssize_t)total;
	} else if (size < total) {
		ret = -ERANGE;
	} else {
		char *p = buf;
		for (const struct xattr *x = inode_xattrs(ip); x; x = x->next) {
			size_t n = strlen(x->name) + 1;
			memcpy(p, x->name, n);
			p += n;
		}
		ret = (ssize_t)total;
	}
	inode_unlock(ip);
	return ret;
}

ssize_t tfs_listxattr(struct tfs *fs, uint64_t ino, char *buf, size_t size)
{
	struct tfs_inode *ip;
	ssize_t ret = inode_get(fs, ino, &ip);

	if (ret)
		return ret;
	ret = listxattr_ip(fs, ip, ino, buf, size);
	inode_put(fs, ip);
	return ret;
}

static int removexattr_ip(struct tfs *fs, struct tfs_inode *ip, uint64_t ino,
			  const char *name)
{
	struct fs_resv resv;
	size_t len;
	int ret;

	ret = check_xname(name, &len);
	if (ret)
		return ret;
	ret = xattr_begin(fs, false, ip, 0, 0, &resv);
	if (ret)
		return ret;
	inode_lock(ip);
	if (!xfind(ip, name, len)) {
		ret = -ENODATA;
	} else {
		struct log_rec r = { .type = LR_XATTR_DEL };
		r.xattr.ino = ino;
		r.xattr.namelen = (uint16_t)len;
		r.xattr.name = name;
		ret = xattr_commit(fs, ip, &r, inode_mode(ip));
	}
	inode_unlock(ip);
	fs_node_release(fs, &resv);
	return ret;
}

int tfs_removexattr(struct tfs *fs, uint64_t ino, const char *name)
{
	struct tfs_inode *ip;
	int ret = inode_get(fs, ino, &ip);

	if (ret)
		return ret;
	inode_lock(ip);
	ret = inode_may_change(ip, true);
	inode_unlock(ip);
	if (!ret)
		ret = removexattr_ip(fs, ip, ino, name);
	inode_put(fs, ip);
	return ret;
}

/* ---- ACLs with the mode (fs_i.h) ---- */

static const struct xattr *xfind_name(struct tfs_inode *ip, const char *name)
{
	return xfind(ip, name, strlen(name));
}

void acl_inherit_free(struct acl_inherit *ai)
{
	free(ai->access);
	free(ai->dflt);
	ai->access = ai->dflt = NULL;
}

/* posix_acl_create: the parent's default ACL, read before the create
 * takes ns_lock (a default ACL set meanwhile is as if set after). */
int acl_inherit(struct tfs *fs, uint64_t parent, uint32_t *mode, mode_t umask,
		struct acl_inherit *ai)
{
	struct tfs_inode *pip;
	const struct xattr *x;
	int ret = 0;

	memset(ai, 0, sizeof(*ai));
	if (fs->acl && !S_ISLNK(*mode) && inode_get(fs, parent, &pip) == 0) {
		inode_lock(pip);
		x = S_ISDIR(inode_mode(pip)) ? xfind_name(pip, ACL_XATTR_DEFAULT) : NULL;
		if (x && !acl_valid(x->val, x->vallen)) {
			ai->dflt = malloc(x->vallen);
			ai->access = malloc(x->vallen);
			if (ai->dflt && ai->access) {
				memcpy(ai->dflt, x->val, x->vallen);
				memcpy(ai->access, x->val, x->vallen);
				ai->alen = ai->dlen = x->vallen;
			} else {
				ret = -ENOMEM;
			}
		}
		inode_unlock(pip);
		inode_put(fs, pip);
	}
	if (ret || !ai->dflt) {
		acl_inherit_free(ai);
		if (!S_ISLNK(*mode))
			*mode &= ~(uint32_t)(umask & 0777);
		return ret;
	}
	if (!acl_create_masq(ai->access, ai->alen, mode)) {
		free(ai->access);
		ai->access = NULL;
		ai->alen = 0;
	}
	if (!S_ISDIR(*mode)) {
		free(ai->dflt);
		ai->dflt = NULL;
		ai->dlen = 0;
	}
	return 0;
}

void acl_chmod_rec(struct tfs_inode *ip, uint32_t mode, void *buf, struct log_rec *r)
{
	const struct xattr *x = xfind_name(ip, ACL_XATTR_ACCESS);

	memset(r, 0, sizeof(*r));
	if (!x || acl_valid(x->val, x->vallen))
		return;
	memcpy(buf, x->val, x->vallen);
	acl_chmod(buf, x->vallen, mode);
	if (!memcmp(buf, x->val, x->vallen))
		return;
	*r = xattr_set_rec(inode_ino(ip), ACL_XATTR_ACCESS, strlen(ACL_XATTR_ACCESS), buf,
			   x->vallen);
}
