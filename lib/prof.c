// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * prof: the data-path phase counters of prof.h (bench/micro.c reads them).
 */
#include "prof.h"

bool prof_enabled;
struct prof_ctr prof_ctr[PROF_NPHASES];

const char *const prof_name[PROF_NPHASES] = {
	[PROF_BOUNCE] = "bounce buffer wait",
	[PROF_LOGSPACE] = "log space wait",
	[PROF_RANGELOCK] = "range lock wait",
	[PROF_RMW_READ] = "edge block read",
	[PROF_COPY] = "bounce copy",
	[PROF_ALLOC] = "block allocation",
	[PROF_CSUM] = "checksum (xxh3)",
	[PROF_DEV_WRITE] = "device write (mirrors)",
	[PROF_META] = "metadata (inode lock + apply + log append)",
	[PROF_SYNC] = "group commit wait (O_DSYNC)",
};

void prof_reset(void)
{
	for (int i = 0; i < PROF_NPHASES; i++) {
		atomic_store(&prof_ctr[i].ns, 0);
		atomic_store(&prof_ctr[i].calls, 0);
	}
}
