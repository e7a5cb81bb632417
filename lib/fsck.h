/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fsck: the offline checker and repairer behind fsck.twinfs.
 *
 * It checks, with the file system unmounted: every superblock slot of every
 * device, the checkpoint (table and payload) and the log chunks on every
 * device copy, the structure after load + replay (reachability, link counts,
 * directory entries, "..", blocks referenced twice, extents inside the data
 * area) and the checksum of every data block on every device copy.
 *
 * Repairs are made to the loaded metadata in memory (in -n mode too, which
 * then only reports them) and, in -y/-p mode, persisted by writing a fresh
 * checkpoint through the mount code; bad data copies are rewritten from a
 * verified copy.  Exit codes are e2fsck's.
 */
#ifndef TWINFS_FSCK_H
#define TWINFS_FSCK_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "dev.h"

enum fsck_mode {
	FSCK_CHECK = 0,		/* -n: report only, devices opened read-only */
	FSCK_REPAIR,		/* -y: repair everything that can be */
	FSCK_PREEN,		/* -p: repair only what a crash or a bad copy explains */
};

enum fsck_exit {
	FSCK_EXIT_OK = 0,		/* clean */
	FSCK_EXIT_FIXED = 1,		/* errors found, all corrected */
	FSCK_EXIT_UNCORRECTED = 4,	/* errors left */
	FSCK_EXIT_OPERROR = 8,		/* usage, not twinfs, cannot open, in use */
};

struct fsck_opts {
	const char *const *devs;
	unsigned ndevs;
	int mode;			/* enum fsck_mode */
	bool verbose;
	const char *backend;		/* NULL: auto */
	FILE *out;			/* report lines; NULL: stdout */
	/* As in struct tfs_opts: fsck.twinfs sets v1_optin ("--format=1") and
	 * a format 1 file system is refused (FSCK_EXIT_OPERROR, nothing read
	 * past the superblocks) unless v1 is set.  NULL: both formats. */
	const char *v1_optin;
	bool v1;
};

struct fsck_devsum {
	char path[256];
	uint64_t blocks;		/* data + checkpoint blocks verified on this copy */
	uint64_t bad;			/* of those, copies that did not verify or read */
	uint64_t repaired;		/* bad copies rewritten */
};

struct fsck_result {
	uint64_t inodes, dirs, files, symlinks, special;
	uint64_t data_blocks;		/* distinct physical blocks referenced */
	uint64_t shared_blocks;		/* of those, referenced more than once */
	uint64_t errors;		/* problems found */
	uint64_t fixed;			/* of those, corrected on disk */
	uint64_t unrecoverable;		/* data blocks no copy verifies */
	unsigned ndevs;
	struct fsck_devsum dev[DEV_MAX];
};

/* Runs the whole check; returns the exit code (enum fsck_exit).  res may be
 * NULL.  Every message goes to o->out, one line each. */
int fsck_run(const struct fsck_opts *o, struct fsck_result *res);

#endif
