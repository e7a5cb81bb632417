// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Description: direct opens next to buffered opens and shared maps of one file.
 *   mixcheck direct FILE      exit 0 if a writable O_DSYNC open of FILE
 *       writes around the page cache (the daemon made it a direct open), 3
 *       if its writes landed in the page cache.
 *   mixcheck big FILE         the same for an O_WRONLY open (no O_DSYNC) of
 *       FILE once it is FSX_SIZE long (twinfs -o direct_writers=1M).
 *   mixcheck fsx FILE SEED OPS    an fsx-like random run: writes through an
 *       O_DSYNC open, a buffered open and a MAP_SHARED map of the buffered
 *       open, truncates down and back up, msync and fsync, each checked
 *       against an in-memory model by reads through every view (the
 *       O_DSYNC fd, the buffered fd, the map); at the end the file is read
 *       back with O_DIRECT, which bypasses the page cache.
 *   mixcheck fsxbig FILE SEED OPS    the same with an O_WRONLY open of the
 *       FSX_SIZE-long file (a big file's writer) in place of the O_DSYNC one;
 *       reads go through the buffered fd and the map.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define FSX_SIZE (1u << 20)	/* the file's size; truncates go back up to it */
#define PG 4096u

static int fail(const char *what, long a, long b)
{
	fprintf(stderr, "mixcheck: %s (%ld, %ld): %s\n", what, a, b, strerror(errno));
	return 1;
}

/* Resident page-cache pages of @fd's file in [0, len), through a fresh map. */
static long resident(int fd, size_t len)
{
	unsigned char vec[64];
	void *p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	long n = 0;

	if (p == MAP_FAILED || len / PG > sizeof(vec) || mincore(p, len, vec))
		return -1;
	for (size_t i = 0; i < len / PG; i++)
		n += vec[i] & 1;
	munmap(p, len);
	return n;
}

/* big: an O_WRONLY open of an FSX_SIZE-long file; else O_DSYNC.  Reads
 * residency through a read-only open made first: opening drops no pages
 * (twinfs keeps the cache), and a write-only fd cannot be mapped. */
static int cmd_direct(const char *path, bool big)
{
	static char buf[16 * PG];
	int rfd, fd;
	long n;

	if (big && truncate(path, FSX_SIZE) && (errno != ENOENT ||
	    close(open(path, O_WRONLY | O_CREAT, 0644)) || truncate(path, FSX_SIZE)))
		return fail("truncate", 0, 0);
	fd = big ? open(path, O_WRONLY) : open(path, O_RDWR | O_CREAT | O_TRUNC | O_DSYNC, 0644);
	rfd = open(path, O_RDONLY);
	memset(buf, 'd', sizeof(buf));
	if (fd < 0 || rfd < 0 || pwrite(fd, buf, sizeof(buf), 0) != (ssize_t)sizeof(buf))
		return fail(big ? "big file write" : "O_DSYNC write", 0, 0);
	n = resident(rfd, sizeof(buf));
	if (n < 0)
		return fail("mincore", 0, 0);
	close(fd);
	close(rfd);
	printf("direct: %ld of %zu pages written through %s are in the page cache\n", n,
	       sizeof(buf) / PG, big ? "a big file's O_WRONLY open" : "O_DSYNC");
	return n ? 3 : 0;
}

static uint64_t rnd_x;

static uint64_t rnd(uint64_t n)
{
	rnd_x ^= rnd_x << 13;
	rnd_x ^= rnd_x >> 7;
	rnd_x ^= rnd_x << 17;
	return rnd_x % n;
}

struct views {
	int sfd, bfd;		/* O_DSYNC (or a big file's writer), buffered */
	bool wronly;		/* sfd is O_WRONLY */
	uint8_t *map;		/* MAP_SHARED of bfd */
	uint8_t *model, *tmp;
};

/* Every byte of [off, off + len) through all three views. */
static int check(struct views *v, size_t off, size_t len, long op)
{
	int fds[2] = { v->sfd, v->bfd };

	for (int k = v->wronly; k < 2; k++) {
		if (pread(fds[k], v->tmp, len, (off_t)off) != (ssize_t)len)
			return fail(k ? "buffered read" : "O_DSYNC read", op, (long)off);
		for (size_t i = 0; i < len; i++)
			if (v->tmp[i] != v->model[off + i]) {
				fprintf(stderr, "mixcheck: op %ld: %s fd reads %#x at %zu, want %#x\n",
					op, k ? "buffered" : "O_DSYNC", v->tmp[i], off + i,
					v->model[off + i]);
				return 1;
			}
	}
	for (size_t i = 0; i < len; i++)
		if (v->map[off + i] != v->model[off + i]) {
			fprintf(stderr, "mixcheck: op %ld: map reads %#x at %zu, want %#x\n", op,
				v->map[off + i], off + i, v->model[off + i]);
			return 1;
		}
	return 0;
}

static int one_op(struct views *v, long op)
{
	size_t off = rnd(FSX_SIZE), len = 1 + rnd(rnd(4) ? 3 * PG : 64 * 1024);
	uint8_t fillb = (uint8_t)(op * 37 + 1);

	if (off + len > FSX_SIZE)
		len = FSX_SIZE - off;
	unsigned what = (unsigned)rnd(8);

	switch (what) {
	case 0: case 1:		/* O_DSYNC write */
	case 2: case 3:		/* buffered write */
		memset(v->tmp, fillb, len);
		if (pwrite(what < 2 ? v->sfd : v->bfd, v->tmp, len, (off_t)off) != (ssize_t)len)
			return fail(what < 2 ? "O_DSYNC write" : "buffered write", op, (long)off);
		memset(v->model + off, fillb, len);
		break;
	case 4: case 5:		/* store through the map */
		memset(v->map + off, fillb, len);
		memset(v->model + off, fillb, len);
		if (rnd(2) && msync(v->map, FSX_SIZE, MS_SYNC))
			return fail("msync", op, 0);
		break;
	case 6:			/* truncate down and back up: the tail reads zero */
		if (ftruncate(rnd(2) ? v->sfd : v->bfd, (off_t)off) ||
		    ftruncate(v->bfd, FSX_SIZE))
			return fail("truncate", op, (long)off);
		memset(v->model + off, 0, FSX_SIZE - off);
		len = FSX_SIZE - off;
		break;
	default:
		if ((rnd(2) ? fsync(v->bfd) : fdatasync(v->sfd)))
			return fail("fsync", op, 0);
		break;
	}
	return check(v, off, len, op);
}

static int direct_readback(const char *path, const uint8_t *model)
{
	uint8_t *buf;
	int fd = open(path, O_RDONLY | O_DIRECT);

	if (fd < 0 || posix_memalign((void **)&buf, PG, FSX_SIZE))
		return fail("O_DIRECT open", 0, 0);
	if (pread(fd, buf, FSX_SIZE, 0) != FSX_SIZE)
		return fail("O_DIRECT read", 0, 0);
	for (size_t i = 0; i < FSX_SIZE; i++)
		if (buf[i] != model[i]) {
			fprintf(stderr, "mixcheck: O_DIRECT read back %#x at %zu, want %#x\n",
				buf[i], i, model[i]);
			return 1;
		}
	close(fd);
	free(buf);
	return 0;
}

static int cmd_fsx(const char *path, uint64_t seed, long ops, bool big)
{
	struct views v;
	int ret = 0;

	rnd_x = seed * 0x9e3779b97f4a7c15ull | 1;
	v.wronly = big;
	v.bfd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (v.bfd < 0 || ftruncate(v.bfd, FSX_SIZE))
		return fail("setup", 0, 0);
	/* A big file's writer: opened once the file is FSX_SIZE long. */
	v.sfd = open(path, big ? O_WRONLY : O_RDWR | O_DSYNC);
	v.model = calloc(1, FSX_SIZE);
	v.tmp = malloc(FSX_SIZE);
	if (v.sfd < 0 || !v.model || !v.tmp)
		return fail("setup", 0, 0);
	v.map = mmap(NULL, FSX_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, v.bfd, 0);
	if (v.map == MAP_FAILED)
		return fail("mmap", 0, 0);
	for (long op = 0; op < ops && !ret; op++) {
		ret = one_op(&v, op);
		if (!ret && op % 64 == 63)
			ret = check(&v, 0, FSX_SIZE, op);
	}
	if (!ret && msync(v.map, FSX_SIZE, MS_SYNC))
		ret = fail("msync", ops, 0);
	munmap(v.map, FSX_SIZE);
	close(v.sfd);
	close(v.bfd);
	if (!ret)
		ret = direct_readback(path, v.model);
	if (!ret)
		printf("fsx: %ld operations, every view agreed with the model\n", ops);
	free(v.model);
	free(v.tmp);
	return ret;
}

int main(int argc, char **argv)
{
	if (argc == 3 && (!strcmp(argv[1], "direct") || !strcmp(argv[1], "big")))
		return cmd_direct(argv[2], !strcmp(argv[1], "big"));
	if (argc == 5 && (!strcmp(argv[1], "fsx") || !strcmp(argv[1], "fsxbig")))
		return cmd_fsx(argv[2], strtoull(argv[3], NULL, 0), atol(argv[4]),
			       !strcmp(argv[1], "fsxbig"));
	fprintf(stderr, "usage: %s direct|big FILE | fsx|fsxbig FILE SEED OPS\n", argv[0]);
	return 2;
}
