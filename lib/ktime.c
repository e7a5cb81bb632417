// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ktime: the kernel's file time (see ktime.h).
 *
 * The kernel's current_time() on a FUSE inode (not a multigrain file
 * system) is ktime_get_coarse_real_ts64_mg(): the coarse clock, which is
 * what CLOCK_REALTIME_COARSE reads, raised to the "multigrain floor" when
 * that is later.  The floor is the last fine-grained ctime a multigrain
 * file system (ext4, xfs, btrfs, tmpfs) handed out; during a tick it often
 * runs ahead of the coarse clock (measured here: 1% of reads), so a file the
 * daemon created with the coarse time could still look older than one the
 * kernel wrote just before.  Userspace cannot read the floor, but a pipe's
 * inode is stamped with current_time(): setting its mtime to UTIME_NOW and
 * reading it back gives exactly the kernel's time.  Concurrent callers
 * share one pipe without a lock: whatever stamp they read back was taken
 * after their own call began, never before.
 */
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ktime.h"

static int probe_fd = -1;
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;

static void probe_init(void)
{
	int p[2];

	/* Only the inode matters; without it we fall back to the coarse clock. */
	if (pipe2(p, O_CLOEXEC) == 0) {
		close(p[1]);
		probe_fd = p[0];
	}
}

static int ts_cmp(struct timespec a, struct timespec b)
{
	if (a.tv_sec != b.tv_sec)
		return a.tv_sec < b.tv_sec ? -1 : 1;
	return a.tv_nsec < b.tv_nsec ? -1 : a.tv_nsec > b.tv_nsec;
}

struct timespec ktime_coarse(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME_COARSE, &ts);
	return ts;
}

struct timespec ktime_now(void)
{
	static const struct timespec now[2] = { { 0, UTIME_OMIT }, { 0, UTIME_NOW } };
	struct timespec c = ktime_coarse();
	struct stat st;

	pthread_once(&probe_once, probe_init);
	if (probe_fd >= 0 && futimens(probe_fd, now) == 0 && fstat(probe_fd, &st) == 0 &&
	    ts_cmp(st.st_mtim, c) > 0)
		return st.st_mtim;
	return c;
}
