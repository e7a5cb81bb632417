/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * xops: the FUSE operations that only forward to lib and reply: statfs,
 * access and the xattr calls (the open/read/write/directory ops, which
 * keep per-open state, are in ops.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include <fuse_lowlevel.h>

#include "daemon_i.h"

void tfsd_op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv;
	int ret = tfs_statfs(req_fs(req), &sv);

	if (ret < 0)
		reply_err(req, ret);
	else
		fuse_reply_statfs(req, &sv);
}

void tfsd_op_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	/* default_permissions: the kernel has checked the mode bits. */
	struct stat st;

	reply_err(req, tfs_getattr(req_fs(req), ino, &st));
}

/* ---- xattrs ---- */

/*
 * Setting an access ACL clears S_ISGID by the file's group, read here
 * before lib takes the inode lock.  It cannot race with a chown: the
 * kernel sends this SETXATTR under the inode's i_rwsem (vfs_set_acl takes
 * inode_lock around ->set_acl, and fuse_set_acl waits for our reply), and
 * a chown's SETATTR is sent under the same lock (chown_common), as is a
 * chmod's (chmod_common).  So no request that changes the group or the
 * mode of this inode is between our getattr and the set; the daemon
 * changes the group on no other path.  What can land meanwhile is a
 * write's kill (privs_write_kill, async direct writes run without
 * i_rwsem), which only clears bits: clearing sgid after it is the same.
 */
void tfsd_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			size_t size, int flags)
{
	struct stat st;

	flags &= ~TFS_XATTR_KILL_SGID;	/* ours alone to set */
	if (!strcmp(name, "system.posix_acl_access") &&
	    tfs_getattr(req_fs(req), ino, &st) == 0 && (st.st_mode & S_ISGID) &&
	    privs_acl_kill_sgid(req, st.st_gid))
		flags |= TFS_XATTR_KILL_SGID;
	reply_err(req, tfs_setxattr(req_fs(req), ino, name, value, size, flags));
}

/* Shared by getxattr and listxattr: size 0 asks for the length. */
static void reply_xattr_result(fuse_req_t req, ssize_t n, const char *buf, size_t size)
{
	if (n < 0)
		reply_err(req, n);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
}

void tfsd_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	char *buf = NULL;
	ssize_t n = -ENOMEM;

	if (size && !(buf = malloc(size)))
		goto out;
	n = tfs_getxattr(req_fs(req), ino, name, buf, size);
out:
	reply_xattr_result(req, n, buf, size);
	free(buf);
}

void tfsd_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	char *buf = NULL;
	ssize_t n = -ENOMEM;

	if (size && !(buf = malloc(size)))
		goto out;
	n = tfs_listxattr(req_fs(req), ino, buf, size);
out:
	reply_xattr_result(req, n, buf, size);
	free(buf);
}

void tfsd_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	reply_err(req, tfs_removexattr(req_fs(req), ino, name));
}

