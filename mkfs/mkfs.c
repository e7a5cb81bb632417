// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * mkfs.twinfs: command-line front end of tfs_format().  Parses the options,
 * formats 1..TFS_DEV_MAX devices as one file system (one copy of every block per
 * device) and prints a summary read back from the first device's superblock,
 * so what the user sees is what is on disk, not what we meant to write.
 *
 * Exit codes: 0 success, 1 the format (or the read-back) failed, 2 usage.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfs.h"

#define PROG "mkfs.twinfs"

static void usage(FILE *out)
{
	fprintf(out, "usage: " PROG " [-L label] [-f] [-O v2|v1|[^]short_nodes|pieces,...] DEV...   "
		"(1 to %d devices)\n",
		TFS_DEV_MAX);
}

static void help(void)
{
	usage(stdout);
	printf("Format DEV... (block devices or image files) as one twinfs file system\n"
	       "keeping a copy of every block on each device.\n"
	       "  -L label  file system label (at most 63 bytes)\n"
	       "  -f        overwrite a device that already holds a file system\n"
	       "  -O v2     format v2, metadata in on-disk trees (the default)\n"
	       "  -O v1     DEPRECATED: format v1, metadata in memory; twinfs and\n"
	       "            fsck.twinfs open it only with format=1 (for tests and to\n"
	       "            copy data off); it goes away in a later release\n"
	       "  -O ^short_nodes  v2 writing every tree node whole (16 KiB), as\n"
	       "            before short nodes; -O short_nodes (the default) writes\n"
	       "            only the 4 KiB blocks a node uses\n"
	       "  -O pieces EXPERIMENTAL: v2 whose tree pointers name leaf pieces\n"
	       "            (this version reads them and writes whole bases only)\n"
	       "            (-O takes a comma-separated list and may be repeated)\n"
	       "  -h        this help\n");
}

/* -O's list: a format (v1, v2) and v2's features ([^]short_nodes, pieces);
 * *@nodes is set when a node feature was named (v1 has none). */
static int parse_features(const char *arg, struct tfs_format_opts *o, bool *nodes)
{
	char *buf = strdup(arg), *save = NULL;
	int ret = 0;

	if (!buf) {
		fprintf(stderr, PROG ": -O: out of memory\n");
		return -ENOMEM;
	}
	for (char *f = strtok_r(buf, ",", &save); f && ret == 0; f = strtok_r(NULL, ",", &save)) {
		if (!strcmp(f, "v2") || !strcmp(f, "v1")) {
			o->v2 = !strcmp(f, "v2");
		} else if (!strcmp(f, "short_nodes") || !strcmp(f, "^short_nodes")) {
			o->no_short_nodes = f[0] == '^';
			*nodes = true;
		} else if (!strcmp(f, "pieces")) {
			o->pieces = true;
			*nodes = true;
		} else {
			fprintf(stderr, PROG ": -O: unknown format or feature '%s' (v1, v2, "
				"short_nodes, ^short_nodes, pieces)\n", f);
			ret = -EINVAL;
		}
	}
	free(buf);
	return ret;
}

static void format_uuid(const uint8_t u[16], char out[37])
{
	static const char hex[] = "0123456789abcdef";
	char *p = out;

	for (int i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			*p++ = '-';
		*p++ = hex[u[i] >> 4];
		*p++ = hex[u[i] & 15];
	}
	*p = '\0';
}

/* Human size with two decimals: GiB from 1 GiB up, MiB below. */
static void format_size(uint64_t bytes, char *out, size_t len)
{
	if (bytes >= (1ull << 30))
		snprintf(out, len, "%.2f GiB", (double)bytes / (double)(1ull << 30));
	else
		snprintf(out, len, "%.2f MiB", (double)bytes / (double)(1ull << 20));
}

static void print_summary(const struct tfs_format_info *sb, const char *const *devs, unsigned n)
{
	char uuid[37], usable[32], total[32];
	uint64_t bs = sb->block_size ? sb->block_size : 4096;
	uint64_t data_blocks = sb->total_blocks > sb->data_start ?
			       sb->total_blocks - sb->data_start : 0;

	format_uuid(sb->fs_uuid, uuid);
	format_size(data_blocks * bs, usable, sizeof(usable));
	format_size(sb->total_blocks * bs, total, sizeof(total));

	printf("twinfs file system created\n");
	if (sb->version == 2)
		printf("  format:  v2\n  nodes:   %s%s\n",
		       sb->short_nodes ? "short (only the 4 KiB blocks a node uses are written)"
				       : "whole (16 KiB each; -O ^short_nodes)",
		       sb->pieces ? ", leaf pieces (experimental)" : "");
	else
		printf("  format:  v1 (deprecated: twinfs mounts it only with -o format=1)\n");
	printf("  UUID:    %s\n", uuid);
	printf("  label:   %s\n", sb->label[0] ? sb->label : "(none)");
	printf("  size:    %s usable (%s per device, %" PRIu64 " blocks of %" PRIu64 " bytes)\n",
	       usable, total, sb->total_blocks, bs);
	printf("  copies:  %u%s\n", sb->ndevs,
	       sb->ndevs == 1 ? " (single, no redundancy)" :
	       sb->ndevs == 2 ? " (RAID1)" : "");
	printf("  devices:");
	for (unsigned i = 0; i < n; i++)
		printf(" %s", devs[i]);
	printf("\n");
}

int main(int argc, char **argv)
{
	struct tfs_format_opts o = { .label = NULL, .force = false, .backend = NULL, .v2 = true };
	char err[512] = "";
	struct tfs_format_info sb;
	int opt, ret;
	bool nodes = false;	/* -O named a node feature */

	static const struct option longopts[] = {
		{ "label", required_argument, NULL, 'L' },
		{ "force", no_argument, NULL, 'f' },
		{ "format", required_argument, NULL, 'O' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};

	while ((opt = getopt_long(argc, argv, "L:fO:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'L':
			if (strlen(optarg) > TFS_LABEL_MAX) {
				fprintf(stderr, PROG ": label longer than %d bytes\n",
					TFS_LABEL_MAX);
				usage(stderr);
				return 2;
			}
			o.label = optarg;
			break;
		case 'f':
			o.force = true;
			break;
		case 'O':
			if (parse_features(optarg, &o, &nodes) < 0) {
				usage(stderr);
				return 2;
			}
			break;
		case 'h':
			help();
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}

	if (nodes && !o.v2) {
		fprintf(stderr, PROG ": -O: short_nodes, ^short_nodes and pieces are features of format v2, "
			"not v1\n");
		usage(stderr);
		return 2;
	}
	unsigned n = (unsigned)(argc - optind);
	if (n < 1 || n > TFS_DEV_MAX) {
		if (n > TFS_DEV_MAX)
			fprintf(stderr, PROG ": at most %d devices\n", TFS_DEV_MAX);
		usage(stderr);
		return 2;
	}
	const char *const *devs = (const char *const *)&argv[optind];

	ret = tfs_format(devs, n, &o, err, sizeof(err));
	if (ret < 0) {
		fprintf(stderr, PROG ": %s\n", err[0] ? err : strerror(-ret));
		return 1;
	}

	ret = tfs_format_info(devs[0], &sb, err, sizeof(err));
	if (ret < 0) {
		fprintf(stderr, PROG ": %s\n", err[0] ? err : strerror(-ret));
		return 1;
	}
	print_summary(&sb, devs, n);
	return 0;
}
