// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Description: conccheck: O_DIRECT writer threads for concurrency.sh, through a real
 * kernel mount.
 *
 *   conccheck disjoint FILE THREADS WRITES  each thread overwrites 4k blocks
 *                                           of its own region of FILE
 *   conccheck torn FILE THREADS WRITES      every thread writes 4k and 16k
 *                                           whole-block versions to the same
 *                                           64 blocks while readers check them
 *   conccheck verify FILE                   every block is one writer's version
 *
 * A block version is 512 copies of one 64-bit word (block << 40 | writer <<
 * 32 | sequence), so a block mixing two writes, or a block at the wrong
 * place, shows.  FILE must already hold (at least) the bytes written: the
 * writes never extend it, so they can run in parallel.  Exit 0 or 1.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BS 4096
#define WORDS (BS / 8)
#define REGION_BLOCKS 256	/* disjoint: blocks per thread */
#define SHARED_BLOCKS 64	/* torn: the contested blocks */

static const char *path;
static int nwrites;
static volatile int stop_readers;
static volatile int failed;

static void fill(uint64_t *b, uint64_t blk, unsigned writer, uint32_t seq)
{
	uint64_t w = blk << 40 | (uint64_t)(writer & 0xff) << 32 | seq;

	for (int i = 0; i < WORDS; i++)
		b[i] = w;
}

/* 0 if the block at @blk is one whole version (or never written: zeros
 * from a fresh file are allowed when @allow_zero). */
static int check(const uint64_t *b, uint64_t blk, int allow_zero)
{
	for (int i = 1; i < WORDS; i++)
		if (b[i] != b[0]) {
			fprintf(stderr, "conccheck: block %llu torn: word %d %#llx vs word 0 %#llx\n",
				(unsigned long long)blk, i, (unsigned long long)b[i],
				(unsigned long long)b[0]);
			return -1;
		}
	if (b[0] == 0 && allow_zero)
		return 0;
	if (b[0] >> 40 != blk) {
		fprintf(stderr, "conccheck: block %llu holds block %llu's data\n",
			(unsigned long long)blk, (unsigned long long)(b[0] >> 40));
		return -1;
	}
	return 0;
}

static int open_direct(int flags)
{
	int fd = open(path, flags | O_DIRECT);

	if (fd < 0)
		fprintf(stderr, "conccheck: open %s: %s\n", path, strerror(errno));
	return fd;
}

struct thr {
	pthread_t th;
	unsigned id;
	int torn;
};

static void *writer(void *arg)
{
	struct thr *t = arg;
	uint64_t *b;
	uint64_t seed = 0x9e3779b97f4a7c15ull * (t->id + 1);
	int fd = open_direct(O_WRONLY);

	if (fd < 0 || posix_memalign((void **)&b, BS, 4 * BS)) {
		failed = 1;
		return NULL;
	}
	for (int n = 0; n < nwrites && !failed; n++) {
		uint64_t blk;
		int nb = 1;

		seed ^= seed << 13;
		seed ^= seed >> 7;
		seed ^= seed << 17;
		if (t->torn) {
			nb = (seed >> 20) & 1 ? 4 : 1;		/* 4k and 16k writes */
			blk = (seed >> 24) % (SHARED_BLOCKS - nb + 1);
		} else {
			blk = (uint64_t)t->id * REGION_BLOCKS + (seed >> 24) % REGION_BLOCKS;
		}
		for (int i = 0; i < nb; i++)
			fill(b + (size_t)i * WORDS, blk + (uint64_t)i, t->id, (uint32_t)n + 1);
		if (pwrite(fd, b, (size_t)nb * BS, (off_t)(blk * BS)) != nb * BS) {
			fprintf(stderr, "conccheck: pwrite: %s\n", strerror(errno));
			failed = 1;
		}
	}
	free(b);
	close(fd);
	return NULL;
}

/* Readers during the torn run: a read may see any version, never a mix. */
static void *reader(void *arg)
{
	uint64_t *b;
	int fd = open_direct(O_RDONLY);
	uint64_t blk = 0;

	if (fd < 0 || posix_memalign((void **)&b, BS, BS)) {
		failed = 1;
		return NULL;
	}
	while (!stop_readers && !failed) {
		if (pread(fd, b, BS, (off_t)(blk * BS)) != BS || check(b, blk, 1))
			failed = 1;
		blk = (blk + 7) % SHARED_BLOCKS;
	}
	free(b);
	close(fd);
	return NULL;
}

static int verify(void)
{
	int fd = open_direct(O_RDONLY);
	uint64_t *b;
	off_t size;

	if (fd < 0 || posix_memalign((void **)&b, BS, BS))
		return 1;
	size = lseek(fd, 0, SEEK_END);
	for (uint64_t blk = 0; (off_t)(blk * BS) < size; blk++) {
		if (pread(fd, b, BS, (off_t)(blk * BS)) != BS) {
			fprintf(stderr, "conccheck: pread block %llu: %s\n",
				(unsigned long long)blk, strerror(errno));
			return 1;
		}
		if (check(b, blk, 1))
			return 1;
	}
	free(b);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	struct thr *w, r[2];
	int nt, torn;

	if (argc == 3 && !strcmp(argv[1], "verify")) {
		path = argv[2];
		return verify();
	}
	if (argc != 5 || (strcmp(argv[1], "disjoint") && strcmp(argv[1], "torn"))) {
		fprintf(stderr, "usage: conccheck disjoint|torn FILE THREADS WRITES | verify FILE\n");
		return 2;
	}
	torn = !strcmp(argv[1], "torn");
	path = argv[2];
	nt = atoi(argv[3]);
	nwrites = atoi(argv[4]);
	if (nt < 1 || nt > 255 || nwrites < 1)
		return 2;
	w = calloc((size_t)nt, sizeof(*w));
	if (!w)
		return 1;
	if (torn)
		for (int i = 0; i < 2; i++)
			pthread_create(&r[i].th, NULL, reader, &r[i]);
	for (int i = 0; i < nt; i++) {
		w[i].id = (unsigned)i + 1;
		w[i].torn = torn;
		if (pthread_create(&w[i].th, NULL, writer, &w[i])) {
			fprintf(stderr, "conccheck: pthread_create failed\n");
			return 1;
		}
	}
	for (int i = 0; i < nt; i++)
		pthread_join(w[i].th, NULL);
	stop_readers = 1;
	if (torn)
		for (int i = 0; i < 2; i++)
			pthread_join(r[i].th, NULL);
	free(w);
	if (failed)
		return 1;
	return verify();
}
