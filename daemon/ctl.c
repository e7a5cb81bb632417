// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ctl: the daemon end of the control channel (lib/ctl.h): the FUSE ioctl
 * handler for TWINFS_IOC_CTL on the mount's root directory, its
 * permission check, FITRIM (fstrim(8)) on any of its files, chattr and
 * lsattr's inode flags (fileattr), and the route that sends the lib's log
 * lines to the daemon's logger.
 *
 * The ioctl is a "restricted" one (its size is encoded in the command), so
 * the kernel fetches sizeof(struct twinfs_ctl_msg) bytes from the caller
 * before the request and copies back at most that many after it; we reply
 * with the JSON text and its NUL.  A negative result makes the caller's
 * ioctl(2) fail with that errno, the JSON (with "error") still copied out.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/statvfs.h>
#include <linux/fs.h>

#include "ctl.h"
#include "daemon_i.h"
#include "tlog.h"

static void lib_log(int level, const char *msg)
{
	tlog(level, "%s", msg);
}

void tfsd_ctl_log_init(void)
{
	tfs_set_log_fn(lib_log);
}

/* Only the user who mounted (the daemon runs as that user) and root.
 * Others can only get here through allow_other. */
static bool ctl_allowed(fuse_req_t req, const char *what)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);

	if (ctx->uid == 0 || ctx->uid == getuid())
		return true;
	tlog(LOG_NOTICE, "%s from uid %u refused", what, (unsigned)ctx->uid);
	return false;
}

/*
 * FITRIM, what fstrim(8) (and fstrim.timer) asks of a mounted file system
 * on any directory or file of it: the kernel forwards it to us (a
 * restricted ioctl, struct fstrim_range in and out).  It runs the trim of
 * twinfs-ctl trim and waits for it; the whole free space is trimmed
 * whatever range is asked (a superset is harmless), and range.len comes
 * back as the bytes discarded, which fstrim -v prints, but no more than
 * the range holds of the file system's size (statfs's f_blocks: the trim
 * also counts the free metadata area, which that size leaves out).  A
 * range ext4 and XFS refuse is EINVAL here too: shorter than a block,
 * starting past the end, or a minlen larger than the file system
 * (xfstests generic/260 and 288).  Devices that take no discard make it
 * EOPNOTSUPP, as the kernel's file systems say.
 */
static int fitrim_check(struct tfsd *d, const struct fstrim_range *r, uint64_t *size)
{
	struct statvfs st;
	int ret = tfs_statfs(d->fs, &st);

	if (ret < 0)
		return ret;
	*size = (uint64_t)st.f_blocks * st.f_frsize;
	if (r->len < st.f_frsize || r->start >= *size || r->minlen > *size)
		return -EINVAL;
	return 0;
}

static void fitrim(fuse_req_t req, const void *in_buf, size_t in_bufsz, size_t out_bufsz)
{
	struct tfsd *d = fuse_req_userdata(req);
	struct fstrim_range r;
	uint64_t bytes = 0, size;
	int ret;

	if (!ctl_allowed(req, "FITRIM")) {
		fuse_reply_err(req, EPERM);
		return;
	}
	if (!in_buf || in_bufsz < sizeof(r) || out_bufsz < sizeof(r)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	memcpy(&r, in_buf, sizeof(r));
	ret = fitrim_check(d, &r, &size);
	if (ret == 0)
		ret = tfs_trim(d->fs, &bytes);
	if (ret < 0) {
		fuse_reply_err(req, -ret);
		return;
	}
	if (r.len > size - r.start)
		r.len = size - r.start;
	if (r.len > bytes)
		r.len = bytes;
	fuse_reply_ioctl(req, 0, &r, sizeof(r));
}

/* The flags twinfs keeps (tfs.h TFS_FL_*) as xfs_io's FS_XFLAG_* bits. */
static const struct { uint32_t fl, xfl; } xflag_map[] = {
	{ TFS_FL_IMMUTABLE, FS_XFLAG_IMMUTABLE }, { TFS_FL_APPEND, FS_XFLAG_APPEND },
	{ TFS_FL_NODUMP, FS_XFLAG_NODUMP }, { TFS_FL_NOATIME, FS_XFLAG_NOATIME },
};

static uint32_t fl_to_xflags(uint32_t fl)
{
	uint32_t x = 0;

	for (size_t i = 0; i < sizeof(xflag_map) / sizeof(xflag_map[0]); i++)
		if (fl & xflag_map[i].fl)
			x |= xflag_map[i].xfl;
	return x;
}

/* -1: an xflag twinfs does not keep. */
static int64_t xflags_to_fl(uint32_t x)
{
	uint32_t fl = 0;

	for (size_t i = 0; i < sizeof(xflag_map) / sizeof(xflag_map[0]); i++)
		if (x & xflag_map[i].xfl) {
			fl |= xflag_map[i].fl;
			x &= ~xflag_map[i].xfl;
		}
	return x ? -1 : (int64_t)fl;
}

/* The flags changed the ctime, which the kernel does not know: drop its
 * cached attributes (not the pages) so the next stat asks. */
static void fileattr_set_done(struct tfsd *d, fuse_ino_t ino, int ret)
{
	if (ret == 0)
		fuse_lowlevel_notify_inval_inode(d->se, ino, -1, 0);
}

/*
 * chattr and lsattr (FS_IOC_GETFLAGS/SETFLAGS: an int, 4 bytes through
 * FUSE whatever the command's size says) and xfs_io's chattr and lsattr
 * (FS_IOC_FSGETXATTR/FSSETXATTR: struct fsxattr).  They reach us only
 * from the kernel's fileattr code, which has checked that the caller owns
 * the file and, to change immutable or append-only, has
 * CAP_LINUX_IMMUTABLE.  lib keeps and enforces the flags (tfs.h).
 */
static bool fileattr(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, const void *in,
		     size_t insz, size_t outsz)
{
	struct tfsd *d = fuse_req_userdata(req);
	struct fsxattr fx;
	uint32_t fl;
	int64_t nfl;
	int ret;

	switch (cmd) {
	case (unsigned int)FS_IOC_GETFLAGS:
	case (unsigned int)FS_IOC_FSGETXATTR:
		ret = tfs_getflags(d->fs, ino, &fl);
		if (ret < 0) {
			fuse_reply_err(req, -ret);
		} else if (cmd == (unsigned int)FS_IOC_GETFLAGS) {
			if (outsz < sizeof(fl))
				fuse_reply_err(req, EINVAL);
			else
				fuse_reply_ioctl(req, 0, &fl, sizeof(fl));
		} else if (outsz < sizeof(fx)) {
			fuse_reply_err(req, EINVAL);
		} else {
			memset(&fx, 0, sizeof(fx));
			fx.fsx_xflags = fl_to_xflags(fl);
			fuse_reply_ioctl(req, 0, &fx, sizeof(fx));
		}
		return true;
	case (unsigned int)FS_IOC_SETFLAGS:
		if (!in || insz < sizeof(fl)) {
			fuse_reply_err(req, EINVAL);
			return true;
		}
		memcpy(&fl, in, sizeof(fl));
		ret = tfs_setflags(d->fs, ino, fl);
		fileattr_set_done(d, ino, ret);
		fuse_reply_ioctl(req, ret < 0 ? ret : 0, NULL, 0);
		return true;
	case (unsigned int)FS_IOC_FSSETXATTR:
		if (!in || insz < sizeof(fx)) {
			fuse_reply_err(req, EINVAL);
			return true;
		}
		memcpy(&fx, in, sizeof(fx));
		nfl = xflags_to_fl(fx.fsx_xflags);
		/* No extent size hints, project ids or CoW sizes here. */
		if (nfl < 0 || fx.fsx_extsize || fx.fsx_projid || fx.fsx_cowextsize)
			ret = -EOPNOTSUPP;
		else
			ret = tfs_setflags(d->fs, ino, (uint32_t)nfl);
		fileattr_set_done(d, ino, ret);
		fuse_reply_ioctl(req, ret < 0 ? ret : 0, NULL, 0);
		return true;
	}
	return false;
}

void tfsd_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg,
		struct fuse_file_info *fi, unsigned flags, const void *in_buf, size_t in_bufsz,
		size_t out_bufsz)
{
	struct tfsd *d = fuse_req_userdata(req);
	char *line, *out;
	size_t n;
	int ret;

	if (cmd == (unsigned int)FITRIM) {
		fitrim(req, in_buf, in_bufsz, out_bufsz);
		return;
	}
	if (fileattr(req, ino, cmd, in_buf, in_bufsz, out_bufsz))
		return;
	/* Not ours, or not on the root: what any file system says to an
	 * ioctl it does not know. */
	if (cmd != (unsigned int)TWINFS_IOC_CTL || ino != FUSE_ROOT_ID) {
		fuse_reply_err(req, ENOTTY);
		return;
	}
	if (!ctl_allowed(req, "control request")) {
		fuse_reply_err(req, EPERM);
		return;
	}
	if (!in_buf || in_bufsz == 0 || out_bufsz == 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	n = strnlen(in_buf, in_bufsz);
	line = malloc(n + 1);
	out = malloc(TWINFS_CTL_MAX);
	if (!line || !out) {
		free(line);
		free(out);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	memcpy(line, in_buf, n);
	line[n] = '\0';
	ret = tfs_ctl(d->fs, line, out, out_bufsz < TWINFS_CTL_MAX ? out_bufsz : TWINFS_CTL_MAX);
	tlog(LOG_DEBUG, "control: '%s' -> %d", line, ret);
	fuse_reply_ioctl(req, ret < 0 ? ret : 0, out, strlen(out) + 1);
	free(line);
	free(out);
}
