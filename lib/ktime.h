/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ktime: the clock for every timestamp twinfs sets, the same as the
 * kernel's.  On the default mount the kernel stamps some times itself (a
 * buffered write with the writeback cache sets mtime and ctime) and twinfs
 * stamps the rest (create, mkdir, rename, unlink, setattr, xattrs); mixing
 * CLOCK_REALTIME with the kernel's coarser clock made later changes carry
 * earlier times, which make and rsync get wrong.
 */
#ifndef TWINFS_KTIME_H
#define TWINFS_KTIME_H

#include <time.h>

/* What the kernel's current_time() would give a FUSE inode now: exact,
 * one probe (two system calls).  For namespace and attribute changes. */
struct timespec ktime_now(void);

/* The coarse clock alone: no later than a kernel stamp taken after it, but
 * it may trail one taken just before it (see ktime.c).  For the write path,
 * where the probe would cost more than it is worth. */
struct timespec ktime_coarse(void);

#endif
