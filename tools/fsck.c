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

static void usage(FILE *f)
{
	fprintf(f,
		"usage: fsck.twinfs [-n|-y|-p] [-v] [-B backend] DEV...\n"
		"  -n  check only, change nothing (the default)\n"
		"  -y  repair everything that can be repaired\n"
		"  -p  repair only what is safe (bad mirror copies, orphans, link counts)\n"
		"  -a  same as -p\n"
		"  -v  verbose\n"
		"  -B  I/O backend: auto, uring, aio, file\n"
		"exit: 0 clean, 1 errors corrected, 4 errors left, 8 operational error\n");
}

int main(int argc, char **argv)
{
	struct fsck_opts o = { .mode = FSCK_CHECK };
	int opt, modes = 0;

	while ((opt = getopt(argc, argv, "nypafvB:h")) != -1) {
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
	return fsck_run(&o, NULL);
}
