// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ctl: the daemon end of the control channel (lib/ctl.h): the FUSE ioctl
 * handler for TWINFS_IOC_CTL on the mount's root directory, its
 * permission check, and the route that sends the lib's log lines to the
 * daemon's logger.
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

void tfsd_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg,
		struct fuse_file_info *fi, unsigned flags, const void *in_buf, size_t in_bufsz,
		size_t out_bufsz)
{
	struct tfsd *d = fuse_req_userdata(req);
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	char *line, *out;
	size_t n;
	int ret;

	/* Not ours, or not on the root: what any file system says to an
	 * ioctl it does not know. */
	if (cmd != (unsigned int)TWINFS_IOC_CTL || ino != FUSE_ROOT_ID) {
		fuse_reply_err(req, ENOTTY);
		return;
	}
	/* Only the user who mounted (the daemon runs as that user) and root.
	 * Others can only get here through allow_other. */
	if (ctx->uid != 0 && ctx->uid != getuid()) {
		tlog(LOG_NOTICE, "control request from uid %u refused", (unsigned)ctx->uid);
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
