// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Description: writer and checker for the kill -9 loop.
 *   killwriter write FILE ACKFILE SEED   write numbered 4 KiB records (and
 *       some odd-sized appends), fsync/fdatasync every few records, and after
 *       each sync append "acked N" to ACKFILE (outside the mount); runs until
 *       an I/O error (the daemon was killed).
 *   killwriter write-dsync FILE ACKFILE SEED   the same through an O_DSYNC
 *       open, with no fsync: every write is acknowledged when it returns.
 *   killwriter check FILE ACKFILE SEED   every record up to the last acked
 *       one must read back exactly.
 * Record i lives at offset i * 4096 and is a pure function of (SEED, i).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REC 4096

static void fill(uint8_t *p, uint64_t seed, uint64_t i)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull ^ (i + 1) * 0xbf58476d1ce4e5b9ull;

	for (size_t o = 0; o < REC; o += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(p + o, &x, 8);
	}
	snprintf((char *)p, 64, "seed %llu record %llu", (unsigned long long)seed,
		 (unsigned long long)i);
}

static int do_write(const char *path, const char *ack, uint64_t seed, bool dsync)
{
	static uint8_t buf[REC * 8];
	int fd = open(path, O_RDWR | O_CREAT | (dsync ? O_DSYNC : 0), 0644);
	FILE *a = fopen(ack, "a");
	uint64_t i = 0, acked = 0, x = seed | 1;
	unsigned maxn = 8;

	if (fd < 0 || !a) {
		perror("open");
		return 1;
	}
	setvbuf(a, NULL, _IONBF, 0);
	for (;;) {
		const char *what;
		unsigned n;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		n = 1 + x % maxn;	/* records per write */
		for (unsigned k = 0; k < n; k++)
			fill(buf + k * REC, seed, i + k);
		/* an overwrite of an earlier record now and then: same content,
		 * but a new copy-on-write block */
		if (i > 8 && x % 5 == 0) {
			uint64_t j = (x >> 8) % i;
			uint8_t old[REC];

			fill(old, seed, j);
			if (pwrite(fd, old, REC, (off_t)(j * REC)) != REC) {
				what = "overwrite";
				goto stop;
			}
		}
		ssize_t w = pwrite(fd, buf, n * REC, (off_t)(i * REC));
		if (w != (ssize_t)(n * REC)) {
			/* a short write is a success for what it wrote: the next
			 * call reports the reason */
			if (w > 0) {
				i += (uint64_t)w / REC;
				continue;
			}
			what = "write";
			goto stop;
		}
		i += n;
		if (dsync)
			;	/* durable when pwrite returned */
		else if ((x >> 20) % 3 == 0)
			continue;	/* not synced yet */
		else if (((x >> 24) & 1 ? fsync(fd) : fdatasync(fd)) != 0) {
			what = "fsync";
			goto stop;
		}
		fprintf(a, "acked %llu\n", (unsigned long long)i);
		acked = i;
		continue;
stop:
		/* Out of space with big writes: go on one record at a time from
		 * the last acknowledged one (what failed may be lost), so the
		 * file system fills to its last block. */
		if (errno == ENOSPC && maxn > 1) {
			maxn = 1;
			i = acked;
			continue;
		}
		/* killed underneath or out of space: expected, reported */
		fprintf(stderr, "stopped: %s: %s\n", what, strerror(errno));
		break;
	}
	return 0;
}

static int do_check(const char *path, const char *ack, uint64_t seed)
{
	FILE *a = fopen(ack, "r");
	unsigned long long v, acked = 0;
	uint8_t want[REC], got[REC];
	int fd;

	while (a && fscanf(a, "acked %llu\n", &v) == 1)
		acked = v;
	if (a)
		fclose(a);
	if (!acked)
		return 0;
	fd = open(path, O_RDONLY);
	if (fd < 0) {
		fprintf(stderr, "%s: %s (%llu records were acknowledged)\n", path, strerror(errno),
			acked);
		return 1;
	}
	for (uint64_t i = 0; i < acked; i++) {
		ssize_t r = pread(fd, got, REC, (off_t)(i * REC));

		fill(want, seed, i);
		if (r != REC || memcmp(got, want, REC)) {
			fprintf(stderr, "%s: record %llu of %llu acknowledged is %s\n", path,
				(unsigned long long)i, acked, r != REC ? "short" : "wrong");
			return 1;
		}
	}
	close(fd);
	printf("%s: %llu acknowledged records intact\n", path, acked);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: %s write|write-dsync|check FILE ACKFILE SEED\n", argv[0]);
		return 2;
	}
	if (!strcmp(argv[1], "write") || !strcmp(argv[1], "write-dsync"))
		return do_write(argv[2], argv[3], strtoull(argv[4], NULL, 0),
				!strcmp(argv[1], "write-dsync"));
	return do_check(argv[2], argv[3], strtoull(argv[4], NULL, 0));
}
