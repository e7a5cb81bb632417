// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * remount: `mount -o remount,ro MNT` (and back to rw) on a mounted twinfs.
 * mount(8) runs the helper for a FUSE type on a remount too, so it reaches
 * us as `twinfs DEV MNT -o ...,remount,...`: instead of starting a second
 * daemon we ask the kernel to change the mount's flags (FUSE's reconfigure
 * takes ro/rw and the per-mount flags; the daemon serving it is not
 * involved) and exit.  Flags the options do not name are kept as the
 * mount has them now (statvfs), as mount(8) does for other file systems.
 * Needs CAP_SYS_ADMIN: fusermount3 has no remount, so a user who mounted
 * without root unmounts and mounts again.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/statvfs.h>

#include "daemon_i.h"

/* The per-mount flags statvfs reports and mount(2) takes. */
static const struct {
	const char *on, *off;
	unsigned long st, ms;
} flag_opts[] = {
	{ "ro", "rw", ST_RDONLY, MS_RDONLY },
	{ "nosuid", "suid", ST_NOSUID, MS_NOSUID },
	{ "nodev", "dev", ST_NODEV, MS_NODEV },
	{ "noexec", "exec", ST_NOEXEC, MS_NOEXEC },
	{ "noatime", "atime", ST_NOATIME, MS_NOATIME },
	{ "nodiratime", "diratime", ST_NODIRATIME, MS_NODIRATIME },
	{ "relatime", "norelatime", ST_RELATIME, MS_RELATIME },
	{ "sync", "async", ST_SYNCHRONOUS, MS_SYNCHRONOUS },
};

/* Apply one -o list to *@flags; true if it says "remount". */
static bool scan_opts(const char *list, unsigned long *flags)
{
	char *copy = strdup(list), *save = NULL, *tok;
	bool remount = false;

	if (!copy)
		return false;
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (!strcmp(tok, "remount"))
			remount = true;
		for (size_t i = 0; i < sizeof(flag_opts) / sizeof(flag_opts[0]); i++) {
			if (!strcmp(tok, flag_opts[i].on))
				*flags |= flag_opts[i].ms;
			else if (!strcmp(tok, flag_opts[i].off))
				*flags &= ~flag_opts[i].ms;
		}
	}
	free(copy);
	return remount;
}

/* The flags the mount at @mnt has now, as mount(2) flags. */
static int current_flags(const char *mnt, unsigned long *flags)
{
	struct statvfs sv;

	if (statvfs(mnt, &sv) < 0)
		return -errno;
	*flags = 0;
	for (size_t i = 0; i < sizeof(flag_opts) / sizeof(flag_opts[0]); i++)
		if (sv.f_flag & flag_opts[i].st)
			*flags |= flag_opts[i].ms;
	return 0;
}

/* One line; 1, the exit code.  A user who cannot even look at the mount
 * point (EACCES) is told what the kernel would tell him a moment later. */
static int remount_error(const char *mnt, int e)
{
	if (e == EPERM || e == EACCES)
		fprintf(stderr, "twinfs: remount of %s needs root (CAP_SYS_ADMIN); "
				"unmount and mount it again instead\n", mnt);
	else
		fprintf(stderr, "twinfs: remount of %s failed: %s\n", mnt, strerror(e));
	return 1;
}

int tfsd_remount(int argc, char *argv[])
{
	const char *mnt = NULL;
	unsigned long flags = 0;
	bool remount = false;
	int npos = 0, ret;

	/* First pass: is it a remount, and where?  The mount point is the
	 * second argument that is not an option (the first is DEV).  The
	 * flags it gathers are thrown away: the second pass starts from the
	 * mount's own. */
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "-o") && i + 1 < argc) {
			remount |= scan_opts(argv[++i], &flags);
		} else if (!strncmp(a, "-o", 2)) {
			remount |= scan_opts(a + 2, &flags);
		} else if (a[0] != '-' && ++npos == 2) {
			mnt = a;
		}
	}
	if (!remount)
		return -1;
	if (!mnt) {
		fprintf(stderr, "twinfs: remount: no mount point given\n");
		return 2;
	}
	/* Second pass over the current flags: the options change them. */
	ret = current_flags(mnt, &flags);
	if (ret < 0)
		return remount_error(mnt, -ret);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-o") && i + 1 < argc)
			scan_opts(argv[++i], &flags);
		else if (!strncmp(argv[i], "-o", 2))
			scan_opts(argv[i] + 2, &flags);
	}
	if (mount(NULL, mnt, NULL, MS_REMOUNT | flags, NULL) < 0)
		return remount_error(mnt, errno);
	return 0;
}
