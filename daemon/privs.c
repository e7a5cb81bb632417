// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * privs: clearing suid/sgid when an unprivileged user changes a file, by
 * the kernel's rules (fs/attr.c, setattr_should_drop_suidgid and
 * setattr_should_drop_sgid in 6.x): suid always goes; sgid goes if group
 * execute is set, or if the user is neither in the file's group nor has
 * CAP_FSETID.  Whoever has CAP_FSETID keeps both.  The daemon cannot see
 * capabilities: the kernel says in WRITE (7.33 on) and, under
 * FUSE_HANDLE_KILLPRIV_V2, in OPEN with O_TRUNC whether the caller lacks
 * it (fuseio.c tfsd_note_request); elsewhere uid 0 stands in for it.
 *
 * Without FUSE_HANDLE_KILLPRIV_V2 (fuseio.c asks for it; older kernels
 * lack it) the kernel decides this itself at write(2), truncate, fallocate
 * and chown time, with the writer's credentials, and asks the file system
 * with a SETATTR.  But FUSE (fuse_setattr without handle_killpriv) only turns the
 * request into a mode change for suid, and for sgid together with group
 * execute: for a 2666 file written by an outsider it sends a SETATTR with
 * nothing to set (or only the size, for a truncate; or the owner, for a
 * chown), and the bit survived.  So the daemon applies the rules to those
 * SETATTRs, from the requester's uid, gid and supplementary groups.  The
 * writeback cache's WRITEs come from the kernel (pid 0) with no writer
 * behind them: the SETATTR at write(2) time has done the work.  Direct
 * WRITEs and O_TRUNC opens carry the writer and apply the rules themselves.
 * With FUSE_HANDLE_KILLPRIV_V2 the kernel sends no such SETATTR: every
 * WRITE and FALLOCATE from a writer applies the rules (privs_write_kill; buffered writes to a file with bits to clear come
 * through, not from the writeback cache), a truncate or chown SETATTR as
 * before, and a privileged chown clears what the kernel would have.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "daemon_i.h"

/* 1 if the requester is in group @gid, 0 if not, -errno if its groups
 * cannot be read (the process is gone). */
static int req_in_group(fuse_req_t req, gid_t gid)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);
	gid_t small[32], *g = small;
	int n, cap = 32, ret = 0;

	if (c->gid == gid)
		return 1;
	for (;;) {
		n = fuse_req_getgroups(req, cap, g);
		if (n <= cap)
			break;
		if (g != small)
			free(g);
		cap = n;
		g = malloc((size_t)cap * sizeof(*g));
		if (!g)
			return -ENOMEM;
	}
	if (n < 0)
		ret = n;
	for (int i = 0; i < n && !ret; i++)
		if (g[i] == gid)
			ret = 1;
	if (g != small)
		free(g);
	return ret;
}

/* Whether the kernel's rules drop sgid of a file in group @gid with @mode
 * for this requester (assumed without CAP_FSETID).  Groups that cannot be
 * read count as "not in the group": a bit wrongly kept is a privilege. */
static bool drop_sgid(fuse_req_t req, mode_t mode, gid_t gid)
{
	if (!(mode & S_ISGID))
		return false;
	return (mode & S_IXGRP) || req_in_group(req, gid) <= 0;
}

/* The requester stands for a user without CAP_FSETID: as the kernel says
 * in the request where it does (fuseio.c), else uid 0 stands for it. */
bool privs_unprivileged(fuse_req_t req)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);
	int k = tfsd_req_kill();

	if (k >= 0)
		return k;
	return c->uid != 0 && c->pid != 0;
}

bool privs_acl_kill_sgid(fuse_req_t req, gid_t gid)
{
	return privs_unprivileged(req) && req_in_group(req, gid) <= 0;
}

mode_t privs_kill_bits(fuse_req_t req, const struct stat *st)
{
	mode_t kill;

	if (!privs_unprivileged(req) || S_ISDIR(st->st_mode))
		return 0;
	kill = st->st_mode & S_ISUID;
	if (drop_sgid(req, st->st_mode, st->st_gid))
		kill |= S_ISGID;
	return kill;
}

/*
 * chown by a privileged user: the kernel (chown_common) clears suid always
 * and sgid with group execute, root's chown included.  Without
 * FUSE_HANDLE_KILLPRIV_V2 FUSE sent that as a mode change; with it the
 * SETATTR carries the owner only and the rest is ours.
 */
static void chown_kill_privileged(fuse_req_t req, const struct stat *cur, struct stat *attr,
				  int *to_set)
{
	const struct tfsd *d = fuse_req_userdata(req);
	mode_t kill = cur->st_mode & S_ISUID;

	if (!atomic_load(&d->killpriv_v2) || (*to_set & FUSE_SET_ATTR_MODE) ||
	    !(*to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)))
		return;
	if ((cur->st_mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP))
		kill |= S_ISGID;
	if (kill) {
		attr->st_mode = cur->st_mode & ~kill;
		*to_set |= FUSE_SET_ATTR_MODE;
	}
}

void privs_setattr(fuse_req_t req, const struct stat *cur, struct stat *attr, int *to_set)
{
	const int kills = FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID;
	mode_t kill;

	/* chown_common kills on every type but directories (a fifo's or a
	 * device node's suid too); a write or truncate reaches only
	 * regular files. */
	if (S_ISDIR(cur->st_mode))
		return;
	if (!privs_unprivileged(req)) {
		chown_kill_privileged(req, cur, attr, to_set);
		return;
	}
	if (*to_set & FUSE_SET_ATTR_MODE) {
		/*
		 * A mode the kernel computed to kill suid (and sgid with group
		 * execute), or a chmod.  A chmod by an owner outside the
		 * group has had sgid stripped by the kernel already, so
		 * sgid left on for such a requester is the kernel's kill,
		 * which did not know the rest of the rule.  The group is
		 * the file's current one: a chown's kill is decided before
		 * the group changes.
		 */
		if ((attr->st_mode & S_ISGID) && !(attr->st_mode & S_IXGRP) &&
		    drop_sgid(req, attr->st_mode, cur->st_gid))
			attr->st_mode &= ~S_ISGID;
		return;
	}
	/* Nothing to set (file_remove_privs for a write or fallocate), a
	 * truncate or a chown: each kills what the rules say.  A SETATTR of
	 * times only (utimes, the writeback cache's times) kills nothing. */
	if (*to_set && !(*to_set & kills))
		return;
	kill = privs_kill_bits(req, cur);
	if (kill) {
		attr->st_mode = cur->st_mode & ~kill;
		*to_set |= FUSE_SET_ATTR_MODE;
	}
}

/*
 * Clear suid/sgid before a write or fallocate (or after an open with
 * O_TRUNC) by the kernel's rules (privs.c).  Without
 * FUSE_HANDLE_KILLPRIV_V2 the kernel asks for it with a SETATTR for
 * buffered writes and fallocate, but not for direct writes (FOPEN_DIRECT_IO
 * skips file_remove_privs); with it (fuseio.c) it asks for nothing and
 * sends writes that must clear bits through, from the writer.  For the
 * writeback cache's WRITEs (from the kernel, pid 0) it is nothing.
 */
int privs_write_kill(fuse_req_t req, fuse_ino_t ino)
{
	struct tfs *fs = req_fs(req);
	struct stat st, out;
	mode_t kill;
	int ret;

	if (!privs_unprivileged(req))
		return 0;
	ret = tfs_getattr(fs, ino, &st);
	if (ret < 0)
		return ret;
	kill = privs_kill_bits(req, &st);
	if (!kill)
		return 0;
	/*
	 * Only the bits, cleared from the mode the inode has under its lock:
	 * an async direct write reaches us after the kernel dropped the
	 * inode's i_rwsem (fuse_direct_IO returns -EIOCBQUEUED with the
	 * WRITE still queued), so a chmod can land between the getattr above
	 * and this; writing back st's whole mode would undo it.  The decision
	 * itself used st: a chmod in between that sets g+x leaves sgid to
	 * that chmod's own rules, as if the write came first.
	 */
	st.st_mode = kill;
	ret = tfs_setattr(fs, ino, &st, TFS_SET_KILL, NULL, &out);
	/* The kernel caches the old mode: make it ask again (a negative
	 * offset drops the attributes only, so no page lock is taken). */
	if (ret == 0)
		fuse_lowlevel_notify_inval_inode(req_d(req)->se, ino, -1, 0);
	return ret;
}

/*
 * A write removes security.capability, whoever writes: the kernel's rule
 * (cap_inode_need_killpriv) does not look at the writer, and ext4 and
 * tmpfs drop it on O_DIRECT writes too.  For writes through the page
 * cache the kernel does it (file_remove_privs sends a REMOVEXATTR, then
 * marks the inode S_NOSEC), with or without FUSE_HANDLE_KILLPRIV_V2; a
 * FOPEN_DIRECT_IO open skips file_remove_privs, so for direct writes it is
 * ours.  Before the data: a crash between the two loses the capability,
 * never leaves it on contents it was not granted for.  The lookup is in
 * memory (lib/xattr.c), no transaction unless there is one to remove.
 */
int privs_direct_write_kill_caps(struct tfs *fs, fuse_ino_t ino)
{
	static const char caps[] = "security.capability";
	ssize_t n = tfs_getxattr(fs, ino, caps, NULL, 0);

	if (n == -ENODATA)
		return 0;
	if (n < 0)
		return (int)n;
	n = tfs_removexattr(fs, ino, caps);
	return n == -ENODATA ? 0 : (int)n;	/* a racing writer removed it */
}
