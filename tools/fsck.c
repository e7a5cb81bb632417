// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fsck.twinfs: command line of the offline checker (lib/fsck.c does the
 * work).  Exit codes as e2fsck: 0 clean, 1 errors corrected, 4 errors left,
 * 8 operational error (usage, not twinfs, cannot open, in use).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsck.h"
#include "tlog.h"

static int log_max = LOG_ERR;	/* lib log lines shown: up to this level */

/* The report says what was found; the lib's own lines (a checksum mismatch
 * met while loading, or with -n the refused rewrite of a bad copy) would
 * only repeat it or mislead, so they are shown with -v only, except errors
 * while repairing. */
static void lib_log(int level, const char *msg)
{
	if (level <= log_max)
		fprintf(stderr, "fsck.twinfs: %s\n", msg);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: fsck.twinfs [-n|-y|-p] [-v] [-B backend] [--format=1] DEV...\n"
		"  -n  check only, change nothing (the default)\n"
		"  -y  repair everything that can be repaired\n"
		"  -p  repair only what is safe (bad mirror copies, orphans, link counts)\n"
		"  -a  same as -p\n"
		"  -v  verbose\n"
		"  -B  I/O backend: auto, uring, aio, file\n"
		"  --format=1  check a format 1 file system (deprecated; refused without it)\n"
		"exit: 0 clean, 1 errors corrected, 4 errors left, 8 operational error\n");
}

int main(int argc, char **argv)
{
	struct fsck_opts o = { .mode = FSCK_CHECK };
	int opt, modes = 0;
	static const struct option longopts[] = {
		{ "format", required_argument, NULL, 'F' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};

	o.v1_optin = "--format=1";
	while ((opt = getopt_long(argc, argv, "nypafvB:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'n':
			o.mode = FSCK_CHECK;
			modes++;
			break;
		case 'y':
			o.mode = FSCK_REPAIR;
			modes++;
			break;
		case 'p':
		case 'a':
			o.mode = FSCK_PREEN;
			modes++;
			break;
		case 'f':	/* e2fsck's "force": every run is a full check */
			break;
		case 'v':
			o.verbose = true;
			break;
		case 'B':
			o.backend = optarg;
			break;
		case 'F':
			if (strcmp(optarg, "1") && strcmp(optarg, "2")) {
				fprintf(stderr, "fsck.twinfs: --format=%s: expected 1 or 2\n",
					optarg);
				return FSCK_EXIT_OPERROR;
			}
			o.v1 = !strcmp(optarg, "1");
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return FSCK_EXIT_OPERROR;
		}
	}
	if (modes > 1) {
		fprintf(stderr, "fsck.twinfs: -n, -y and -p exclude each other\n");
		return FSCK_EXIT_OPERROR;
	}
	if (optind >= argc) {
		usage(stderr);
		return FSCK_EXIT_OPERROR;
	}
	o.devs = (const char *const *)(argv + optind);
	o.ndevs = (unsigned)(argc - optind);
	o.out = stdout;
	if (o.verbose)
		log_max = LOG_DEBUG;
	else if (o.mode == FSCK_CHECK)
		log_max = -1;
	tfs_set_log_fn(lib_log);
	return fsck_run(&o, NULL);
}
