// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Description: a libFuzzer-compatible driver for builds without clang: runs
 * the seeds the target makes with the real encoders and every file of a
 * corpus directory (or - for none), then a bounded number of mutations of them
 * (bit flips, byte sets, truncations, splices) from a fixed seed.
 *   fuzz_X CORPUS_DIR [ITERATIONS]
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Each target provides seeds made with the real encoders. */
void fuzz_make_seeds(void (*emit)(const void *p, size_t len));

#define MAXSEEDS 256
#define MAXLEN (1 << 16)

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint8_t *seeds[MAXSEEDS];
static size_t lens[MAXSEEDS];
static unsigned n;

static void add_seed(const void *p, size_t len)
{
	if (n == MAXSEEDS || len > MAXLEN)
		return;
	seeds[n] = malloc(MAXLEN);
	memcpy(seeds[n], p, len);
	lens[n] = len;
	LLVMFuzzerTestOneInput(seeds[n], lens[n]);
	n++;
}

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

int main(int argc, char **argv)
{
	static uint8_t buf[MAXLEN];
	long iters = argc > 2 ? atol(argv[2]) : 20000;

	if (argc < 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR|- [ITERATIONS]\n", argv[0]);
		return 2;
	}
	fuzz_make_seeds(add_seed);
	DIR *d = strcmp(argv[1], "-") ? opendir(argv[1]) : NULL;
	struct dirent *e;
	while (d && (e = readdir(d)) && n < MAXSEEDS) {
		char path[4096];
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", argv[1], e->d_name);
		FILE *f = fopen(path, "rb");
		if (!f)
			continue;
		seeds[n] = malloc(MAXLEN);
		lens[n] = fread(seeds[n], 1, MAXLEN, f);
		fclose(f);
		LLVMFuzzerTestOneInput(seeds[n], lens[n]);
		n++;
	}
	if (d)
		closedir(d);
	if (!n) {
		seeds[0] = calloc(1, MAXLEN);
		lens[0] = 64;
		n = 1;
	}
	for (long i = 0; i < iters; i++) {
		unsigned s = next() % n;
		size_t len = lens[s];
		memcpy(buf, seeds[s], len);
		unsigned muts = 1 + next() % 8;
		for (unsigned m = 0; m < muts && len; m++) {
			switch (next() % 5) {
			case 0: buf[next() % len] ^= 1u << (next() % 8); break;
			case 1: buf[next() % len] = (uint8_t)next(); break;
			case 2: len = next() % (len + 1); break;
			case 3: { /* splice another seed's tail */
				unsigned o = next() % n;
				size_t at = next() % (len + 1), from = lens[o] ? next() % lens[o] : 0;
				size_t cp = lens[o] - from;
				if (at + cp > MAXLEN)
					cp = MAXLEN - at;
				memcpy(buf + at, seeds[o] + from, cp);
				len = at + cp;
				break;
			}
			default: { /* interesting values at an aligned spot */
				static const uint32_t v[] = { 0, 1, 0xff, 0xffff, 0x7fffffff, 0xffffffff, 4096, 255, 256 };
				size_t at = (next() % (len / 4 + 1)) * 4;
				if (at + 4 <= len)
					memcpy(buf + at, &v[next() % 9], 4);
			}
			}
		}
		LLVMFuzzerTestOneInput(buf, len);
	}
	printf("%ld executions on %u seeds: no crash\n", iters + n, n);
	return 0;
}
