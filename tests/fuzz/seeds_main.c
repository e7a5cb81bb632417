// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Description: with libFuzzer, the binary is also its own seed maker:
 * `fuzz_X -twinfs_seeds=DIR` writes the seeds made with the real encoders
 * into DIR (libFuzzer ignores flags it does not know; we catch this one in
 * LLVMFuzzerInitialize and exit).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fuzz_make_seeds(void (*emit)(const void *p, size_t len));
int LLVMFuzzerInitialize(int *argc, char ***argv);

static const char *seed_dir;
static unsigned seed_no;

static void write_seed(const void *p, size_t len)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/seed%u", seed_dir, seed_no++);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(p, 1, len, f) != len) {
		perror(path);
		exit(1);
	}
	fclose(f);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	for (int i = 1; i < *argc; i++) {
		if (strncmp((*argv)[i], "-twinfs_seeds=", 14) == 0) {
			seed_dir = (*argv)[i] + 14;
			fuzz_make_seeds(write_seed);
			exit(0);
		}
	}
	return 0;
}
