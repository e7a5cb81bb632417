// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Description: the "full file system" writer of issue 16 item 4.
 *   fillcheck write FILE MIB [CHUNK]   write MIB MiB in CHUNK-byte write(2)
 *       calls (default 1 MiB, buffered, O_TRUNC), checking every return;
 *       stop at the first error, fsync, read everything back.  Prints
 *       "acked BYTES" and "write_error NAME" (or "write_error none"), then
 *       fails (exit 1) unless the writer stopped on ENOSPC from write(2)
 *       itself, fsync succeeded and every acknowledged byte reads back.
 *   fillcheck check FILE BYTES          the first BYTES read back exactly
 *       (after a remount).
 * Byte i of the file is a pure function of i.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MiB (1u << 20)

static void fill(uint8_t *p, uint64_t off, size_t len)
{
	/* 8-byte words of a hash of their offset (len and off multiples of 8) */
	for (size_t i = 0; i < len; i += 8) {
		uint64_t x = (off + i) * 0x9e3779b97f4a7c15ull;

		x ^= x >> 29;
		x *= 0xbf58476d1ce4e5b9ull;
		x ^= x >> 32;
		memcpy(p + i, &x, 8);
	}
}

/* 0 when the first @bytes of @fd hold the pattern. */
static int verify(int fd, uint64_t bytes)
{
	static uint8_t got[MiB], want[MiB];
	uint64_t off = 0, bad = 0;

	while (off < bytes) {
		size_t n = bytes - off < MiB ? (size_t)(bytes - off) : MiB;
		ssize_t r = pread(fd, got, n, (off_t)off);

		if (r != (ssize_t)n) {
			fprintf(stderr, "read at %llu: %s\n", (unsigned long long)off,
				r < 0 ? strerror(errno) : "short read");
			return 1;
		}
		fill(want, off, (n + 7) & ~(size_t)7);
		if (memcmp(got, want, n)) {
			if (!bad)
				fprintf(stderr, "first bad MiB at offset %llu\n",
					(unsigned long long)off);
			bad++;
		}
		off += n;
	}
	if (bad) {
		fprintf(stderr, "%llu of %llu acknowledged MiB read back wrong\n",
			(unsigned long long)bad, (unsigned long long)((bytes + MiB - 1) / MiB));
		return 1;
	}
	return 0;
}

static int do_write(const char *path, uint64_t mib, size_t chunk)
{
	uint8_t *buf = malloc(chunk);
	uint64_t acked = 0, total = mib * MiB;
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644), err = 0, ret = 0;

	if (fd < 0 || !buf || !chunk || chunk % 8) {
		fprintf(stderr, "%s: %s\n", path, fd < 0 ? strerror(errno) : "bad chunk size");
		return 2;
	}
	while (acked < total) {
		ssize_t n;

		fill(buf, acked, chunk);
		n = write(fd, buf, chunk);
		if (n < 0) {
			err = errno;
			break;
		}
		/* a short write is an acknowledgement of n bytes; go on from
		 * there (the next call gets the error) */
		acked += (uint64_t)n;
		if (acked % 8) {
			fprintf(stderr, "short write of %zd bytes: not 8-byte aligned\n", n);
			return 2;
		}
	}
	printf("acked %llu\n", (unsigned long long)acked);
	printf("write_error %s\n", err ? strerrorname_np(err) : "none");
	fflush(stdout);
	if (err != ENOSPC) {
		fprintf(stderr, "write(2) did not fail with ENOSPC but with %s\n",
			err ? strerror(err) : "nothing");
		ret = 1;
	}
	if (fsync(fd) < 0) {
		fprintf(stderr, "fsync after %llu acknowledged bytes: %s\n",
			(unsigned long long)acked, strerror(errno));
		ret = 1;
	}
	if (verify(fd, acked))
		ret = 1;
	close(fd);
	free(buf);
	return ret;
}

int main(int argc, char **argv)
{
	if (argc >= 4 && !strcmp(argv[1], "write"))
		return do_write(argv[2], strtoull(argv[3], NULL, 0),
				argc > 4 ? strtoul(argv[4], NULL, 0) : MiB);
	if (argc == 4 && !strcmp(argv[1], "check")) {
		int fd = open(argv[2], O_RDONLY);

		if (fd < 0) {
			perror(argv[2]);
			return 2;
		}
		return verify(fd, strtoull(argv[3], NULL, 0));
	}
	fprintf(stderr, "usage: fillcheck write FILE MIB [CHUNK] | check FILE BYTES\n");
	return 2;
}
