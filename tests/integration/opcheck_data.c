// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Description: opcheck_data: the data-path checks of opcheck (reads and writes at odd
 * offsets, O_DIRECT, truncate, fallocate and hole punching, SEEK_DATA and
 * SEEK_HOLE, copy_file_range, fsync and O_SYNC), run by the driver in
 * opcheck.c in its directory under the mount.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/falloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "opcheck.h"

int t_rw_offsets(void)
{
	static const struct { off_t off; size_t len; } w[] = {
		{ 1, 1 }, { 4095, 2 }, { 4097, 8191 }, { 12345, 100000 },
		{ MiB + 7, MiB - 3 }, { 3000000, 5 }, { 0, 1 }, { 8190, 4 },
		{ 2 * MiB - 1, 2 },
	};
	static const struct { off_t off; size_t len; } r[] = {
		{ 0, 1 }, { 3, 5000 }, { 4095, 4097 }, { 123456, 999999 },
		{ 2999999, 100 }, { 3000004, 10 }, { 0, 4 * MiB },
	};
	size_t max = 3000005;
	uint8_t *model = xmalloc(4 * MiB), *b = xmalloc(4 * MiB), *got = xmalloc(4 * MiB);
	struct stat st;
	int fd = SYS(open(P("f"), O_CREAT | O_RDWR, 0644));

	for (size_t i = 0; i < sizeof(w) / sizeof(w[0]); i++) {
		fill(b, w[i].len, (uint64_t)w[i].off, (unsigned)i + 1);
		memcpy(model + w[i].off, b, w[i].len);
		CHECK(write_full(fd, b, w[i].len, w[i].off) == (ssize_t)w[i].len,
		      "pwrite %zu at %ld: %s", w[i].len, (long)w[i].off, strerror(errno));
	}
	SYS(fstat(fd, &st));
	CHECK((size_t)st.st_size == max, "size %ld, want %zu", (long)st.st_size, max);
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++) {
			size_t want = r[i].off >= (off_t)max ? 0 :
				      r[i].off + r[i].len > max ? max - (size_t)r[i].off : r[i].len;
			ssize_t n = read_full(fd, got, r[i].len, r[i].off);
			CHECK(n == (ssize_t)want, "pass %d: pread %zu at %ld gave %zd, want %zu",
			      pass, r[i].len, (long)r[i].off, n, want);
			long d = diff_at(model + r[i].off, got, want);
			CHECK(d < 0, "pass %d: pread %zu at %ld differs at file offset %ld", pass,
			      r[i].len, (long)r[i].off, (long)r[i].off + d);
		}
		/* Second pass through a fresh open. */
		SYS(close(fd));
		fd = SYS(open(P("f"), O_RDWR));
	}
	/* read(2)/write(2) use and move the file position. */
	SYS(lseek(fd, 10, SEEK_SET));
	CHECK(read(fd, got, 10) == 10 && memcmp(got, model + 10, 10) == 0, "read at pos 10");
	CHECK(lseek(fd, 0, SEEK_CUR) == 20, "position after read");
	SYS(close(fd));
	free(model);
	free(b);
	free(got);
	return 0;
}

int t_direct(void)
{
	static const struct { off_t off; size_t len; } w[] = {
		{ 0, MiB }, { 300 * 4096, 64 * KiB }, { 4096, 4096 }, { 5 * MiB, 2 * MiB },
		{ MiB - 4096, 8192 },
	};
	uint8_t *model = xmalloc(8 * MiB), *b = xmalloc(2 * MiB), *got = xmalloc(8 * MiB);
	int fd = SYS(open(P("d"), O_CREAT | O_RDWR | O_DIRECT, 0644));
	struct stat st;

	for (size_t i = 0; i < sizeof(w) / sizeof(w[0]); i++) {
		fill(b, w[i].len, (uint64_t)w[i].off, (unsigned)i + 10);
		memcpy(model + w[i].off, b, w[i].len);
		CHECK(write_full(fd, b, w[i].len, w[i].off) == (ssize_t)w[i].len,
		      "O_DIRECT pwrite %zu at %ld: %s", w[i].len, (long)w[i].off,
		      strerror(errno));
	}
	SYS(fstat(fd, &st));
	CHECK(st.st_size == 7 * MiB, "size %ld after O_DIRECT writes", (long)st.st_size);
	CHECK(read_full(fd, got, 8 * MiB, 0) == 7 * MiB, "O_DIRECT read of the file");
	long d = diff_at(model, got, 7 * MiB);
	CHECK(d < 0, "O_DIRECT read differs at %ld", d);
	CHECK(read_full(fd, got, 64 * KiB, 300 * 4096) == 64 * KiB &&
	      memcmp(got, model + 300 * 4096, 64 * KiB) == 0, "O_DIRECT read at 300 blocks");
	SYS(fdatasync(fd));
	SYS(close(fd));
	/* The same bytes through a buffered open. */
	fd = SYS(open(P("d"), O_RDONLY));
	memset(got, 0xff, 8 * MiB);
	CHECK(read_full(fd, got, 8 * MiB, 0) == 7 * MiB, "buffered read after O_DIRECT");
	d = diff_at(model, got, 7 * MiB);
	CHECK(d < 0, "buffered read after O_DIRECT writes differs at %ld", d);
	SYS(close(fd));
	free(model);
	free(b);
	free(got);
	return 0;
}

int t_truncate(void)
{
	uint8_t *b = xmalloc(256 * KiB), *got = xmalloc(256 * KiB), *zero = xmalloc(256 * KiB);
	struct stat st;
	int fd = SYS(open(P("t"), O_CREAT | O_RDWR, 0644));

	fill(b, 200000, 0, 3);
	CHECK(write_full(fd, b, 200000, 0) == 200000, "write");
	SYS(ftruncate(fd, 5000));
	SYS(fstat(fd, &st));
	CHECK(st.st_size == 5000, "size %ld after shrink", (long)st.st_size);
	SYS(ftruncate(fd, 150000));
	SYS(fstat(fd, &st));
	CHECK(st.st_size == 150000, "size %ld after grow", (long)st.st_size);
	CHECK(read_full(fd, got, 256 * KiB, 0) == 150000, "read after grow");
	CHECK(memcmp(got, b, 5000) == 0, "data below the cut changed");
	long d = diff_at(got + 5000, zero, 150000 - 5000);
	CHECK(d < 0, "old data reappeared past the cut at %ld", 5000 + d);
	SYS(fsync(fd));
	SYS(close(fd));
	/* Path-based truncate. */
	SYS(truncate(P("t"), 4096));
	SYS(stat(P("t"), &st));
	CHECK(st.st_size == 4096, "size %ld after truncate(2)", (long)st.st_size);
	SYS(truncate(P("t"), 0));
	SYS(stat(P("t"), &st));
	CHECK(st.st_size == 0 && st.st_blocks == 0, "size %ld blocks %ld after truncate to 0",
	      (long)st.st_size, (long)st.st_blocks);
	free(b);
	free(got);
	free(zero);
	return 0;
}

int t_fallocate(void)
{
	uint8_t *b = xmalloc(MiB), *got = xmalloc(MiB), *zero = xmalloc(MiB);
	struct stat st;
	blkcnt_t blocks;
	int fd = SYS(open(P("f"), O_CREAT | O_RDWR, 0644));

	/* Mode 0 extends the size; the range reads as zeros. */
	SYS(fallocate(fd, 0, 0, MiB));
	SYS(fstat(fd, &st));
	CHECK(st.st_size == MiB, "size %ld after fallocate", (long)st.st_size);
	CHECK(st.st_blocks >= MiB / 512, "st_blocks %ld after fallocate of 1 MiB",
	      (long)st.st_blocks);
	CHECK(read_full(fd, got, MiB, 0) == MiB && memcmp(got, zero, MiB) == 0,
	      "fallocated range does not read as zeros");
	/* KEEP_SIZE past EOF allocates without changing the size. */
	blocks = st.st_blocks;
	SYS(fallocate(fd, FALLOC_FL_KEEP_SIZE, MiB, MiB));
	SYS(fstat(fd, &st));
	CHECK(st.st_size == MiB, "KEEP_SIZE changed the size to %ld", (long)st.st_size);
	CHECK(st.st_blocks >= blocks + MiB / 512, "st_blocks %ld after KEEP_SIZE, was %ld",
	      (long)st.st_blocks, (long)blocks);
	/* A write into the preallocated range. */
	fill(b, 8192, 4096, 12);
	CHECK(write_full(fd, b, 8192, 4096) == 8192, "write into fallocated range");
	CHECK(read_full(fd, got, 16384, 0) == 16384, "read");
	CHECK(memcmp(got, zero, 4096) == 0 && memcmp(got + 4096, b, 8192) == 0 &&
	      memcmp(got + 12288, zero, 4096) == 0, "write into fallocated range reads wrong");
	SYS(close(fd));

	/* PUNCH_HOLE frees blocks and reads back zeros; the rest is intact. */
	CHECK(write_pattern_file(P("p"), MiB, 13) == 0, "write p");
	fd = SYS(open(P("p"), O_RDWR));
	SYS(fsync(fd));
	SYS(fstat(fd, &st));
	blocks = st.st_blocks;
	CHECK(blocks >= MiB / 512, "st_blocks %ld for 1 MiB written", (long)blocks);
	SYS(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 256 * KiB, 256 * KiB));
	/* Unaligned punch: partial blocks are zeroed, not freed. */
	SYS(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 700001, 5000));
	SYS(fsync(fd));
	SYS(fstat(fd, &st));
	CHECK(st.st_size == MiB, "punch changed the size to %ld", (long)st.st_size);
	CHECK(st.st_blocks <= blocks - 256 * KiB / 512, "st_blocks %ld after punching 256 KiB, was %ld",
	      (long)st.st_blocks, (long)blocks);
	fill(b, MiB, 0, 13);
	memset(b + 256 * KiB, 0, 256 * KiB);
	memset(b + 700001, 0, 5000);
	CHECK(read_full(fd, got, MiB, 0) == MiB, "read after punch");
	long d = diff_at(b, got, MiB);
	CHECK(d < 0, "content after punch differs at %ld", d);
	/* Punch past EOF is fine and changes nothing. */
	SYS(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 2 * MiB, MiB));
	SYS(fstat(fd, &st));
	CHECK(st.st_size == MiB, "punch past EOF changed the size");

	/* ZERO_RANGE: unaligned inside the file, then KEEP_SIZE past EOF
	 * (allocates, size kept), then across EOF (the size grows). */
	SYS(fallocate(fd, FALLOC_FL_ZERO_RANGE, 100001, 200000));
	memset(b + 100001, 0, 200000);
	SYS(fstat(fd, &st));
	blocks = st.st_blocks;
	SYS(fallocate(fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, MiB, 256 * KiB));
	SYS(fsync(fd));
	SYS(fstat(fd, &st));
	CHECK(st.st_size == MiB, "ZERO_RANGE|KEEP_SIZE changed the size to %ld", (long)st.st_size);
	CHECK(st.st_blocks >= blocks + 256 * KiB / 512,
	      "st_blocks %ld after ZERO_RANGE|KEEP_SIZE of 256 KiB past EOF, was %ld",
	      (long)st.st_blocks, (long)blocks);
	SYS(fallocate(fd, FALLOC_FL_ZERO_RANGE, MiB - 5000, 10000));
	memset(b + MiB - 5000, 0, 5000);
	SYS(fstat(fd, &st));
	CHECK(st.st_size == MiB + 5000, "size %ld after ZERO_RANGE across EOF", (long)st.st_size);
	CHECK(read_full(fd, got, MiB, 0) == MiB, "read after ZERO_RANGE");
	d = diff_at(b, got, MiB);
	CHECK(d < 0, "content after ZERO_RANGE differs at %ld", d);
	CHECK(read_full(fd, got, 5000, MiB) == 5000 && memcmp(got, zero, 5000) == 0,
	      "ZERO_RANGE past the old EOF does not read as zeros");
	SYS(close(fd));

	/* st_blocks counts what is allocated: a sparse file is small. */
	fd = SYS(open(P("sparse"), O_CREAT | O_RDWR, 0644));
	CHECK(write_full(fd, "x", 1, 1L << 30) == 1, "write at 1 GiB");
	SYS(fsync(fd));
	/* With -o writeback_cache the kernel keeps its cached attributes
	 * after writeback until they time out (1 s). */
	for (int i = 0; i < 30; i++) {
		SYS(fstat(fd, &st));
		if (st.st_blocks > 0)
			break;
		usleep(100000);
	}
	CHECK(st.st_size == (1L << 30) + 1, "sparse size %ld", (long)st.st_size);
	CHECK(st.st_blocks > 0 && st.st_blocks <= 64, "sparse file st_blocks %ld",
	      (long)st.st_blocks);
	SYS(close(fd));
	free(b);
	free(got);
	free(zero);
	return 0;
}

int t_seek(void)
{
	uint8_t *b = xmalloc(64 * KiB);
	int fd = SYS(open(P("f"), O_CREAT | O_RDWR, 0644));
	off_t end = MiB + 64 * KiB;

	fill(b, 64 * KiB, 0, 14);
	CHECK(write_full(fd, b, 64 * KiB, 0) == 64 * KiB, "write");
	CHECK(write_full(fd, b, 64 * KiB, MiB) == 64 * KiB, "write");
	SYS(fsync(fd));
	CHECK(lseek(fd, 0, SEEK_DATA) == 0, "SEEK_DATA 0 = %ld", (long)lseek(fd, 0, SEEK_DATA));
	CHECK(lseek(fd, 0, SEEK_HOLE) == 64 * KiB, "SEEK_HOLE 0 = %ld",
	      (long)lseek(fd, 0, SEEK_HOLE));
	CHECK(lseek(fd, 100, SEEK_HOLE) == 64 * KiB, "SEEK_HOLE 100 = %ld",
	      (long)lseek(fd, 100, SEEK_HOLE));
	CHECK(lseek(fd, 64 * KiB, SEEK_DATA) == MiB, "SEEK_DATA 64K = %ld",
	      (long)lseek(fd, 64 * KiB, SEEK_DATA));
	CHECK(lseek(fd, 70000, SEEK_HOLE) == 70000, "SEEK_HOLE inside a hole = %ld",
	      (long)lseek(fd, 70000, SEEK_HOLE));
	CHECK(lseek(fd, MiB, SEEK_HOLE) == end, "SEEK_HOLE 1M = %ld (EOF %ld)",
	      (long)lseek(fd, MiB, SEEK_HOLE), (long)end);
	FAILS(lseek(fd, end, SEEK_DATA), ENXIO);
	FAILS(lseek(fd, end + 1, SEEK_HOLE), ENXIO);
	/* A punched hole shows up. */
	SYS(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 16 * KiB, 16 * KiB));
	CHECK(lseek(fd, 0, SEEK_HOLE) == 16 * KiB, "SEEK_HOLE after punch = %ld",
	      (long)lseek(fd, 0, SEEK_HOLE));
	CHECK(lseek(fd, 16 * KiB, SEEK_DATA) == 32 * KiB, "SEEK_DATA after punch = %ld",
	      (long)lseek(fd, 16 * KiB, SEEK_DATA));
	/* Growing the size by truncate adds a hole at the end. */
	SYS(ftruncate(fd, 2 * MiB));
	CHECK(lseek(fd, MiB, SEEK_HOLE) == end, "SEEK_HOLE after grow = %ld",
	      (long)lseek(fd, MiB, SEEK_HOLE));
	FAILS(lseek(fd, end, SEEK_DATA), ENXIO);
	SYS(close(fd));
	/* Data not yet written back (the writeback cache, a shared mapping)
	 * is data too: the kernel does not flush before asking us. */
	fd = SYS(open(P("g"), O_CREAT | O_RDWR, 0644));
	SYS(ftruncate(fd, 256 * KiB));
	CHECK(write_full(fd, b, 4 * KiB, 300 * KiB) == 4 * KiB, "write");
	CHECK(lseek(fd, 0, SEEK_DATA) == 300 * KiB, "SEEK_DATA unsynced write past EOF = %ld",
	      (long)lseek(fd, 0, SEEK_DATA));
	/* Direct-I/O opens (-o writethrough) map too (mmap.sh). */
	uint8_t *m = mmap(NULL, 256 * KiB, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(m != MAP_FAILED, "mmap: %s", strerror(errno));
	m[100 * KiB] = 1;
	CHECK(lseek(fd, 0, SEEK_DATA) == 100 * KiB, "SEEK_DATA unsynced mmap store = %ld",
	      (long)lseek(fd, 0, SEEK_DATA));
	SYS(munmap(m, 256 * KiB));
	SYS(close(fd));
	free(b);
	return 0;
}

static ssize_t copy_all(int in, off_t oin, int out, off_t oout, size_t len)
{
	size_t done = 0;

	while (done < len) {
		loff_t a = oin + (off_t)done, b = oout + (off_t)done;
		ssize_t r = copy_file_range(in, &a, out, &b, len - done, 0);
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		done += (size_t)r;
	}
	return (ssize_t)done;
}

int t_copy_range(void)
{
	size_t len = 8 * MiB + 100;
	uint8_t *want = xmalloc(len), *got = xmalloc(len);
	uint64_t before = 0, after = 0;
	int in, out;

	CHECK(write_pattern_file(P("src"), len, 15) == 0, "write src");
	fill(want, len, 0, 15);
	in = SYS(open(P("src"), O_RDONLY));
	CHECK(settled_free(in, &before) == 0, "statfs");
	/* Whole aligned blocks: shared, so free space barely moves. */
	out = SYS(open(P("dst"), O_CREAT | O_RDWR, 0644));
	CHECK(copy_all(in, 0, out, 0, 8 * MiB) == 8 * MiB, "copy_file_range 8 MiB: %s",
	      strerror(errno));
	SYS(fsync(out));
	CHECK(settled_free(out, &after) == 0, "statfs");
	CHECK(after >= before || before - after < 2 * MiB, "aligned copy of 8 MiB used %" PRIu64 " KiB (blocks "
	      "not shared)", (before - after) / 1024);
	CHECK(read_full(out, got, len, 0) == 8 * MiB, "read dst");
	long d = diff_at(want, got, 8 * MiB);
	CHECK(d < 0, "aligned copy differs at %ld", d);
	/* Writing the copy does not change the source (copy-on-write). */
	CHECK(write_full(out, "XXXX", 4, 4096) == 4, "write dst");
	CHECK(check_pattern_file(P("src"), len, 15) == 0, "source changed by a write to the copy");
	SYS(close(out));

	/* Unaligned edges, into the middle of an existing file. */
	out = SYS(open(P("dst2"), O_CREAT | O_RDWR, 0644));
	CHECK(write_pattern_file(P("dst2"), 200000, 16) == 0, "write dst2");
	uint8_t *model = xmalloc(200000);
	fill(model, 200000, 0, 16);
	memcpy(model + 5000, want + 1000, 70000);
	CHECK(copy_all(in, 1000, out, 5000, 70000) == 70000, "copy_file_range unaligned: %s",
	      strerror(errno));
	CHECK(read_full(out, got, 300000, 0) == 200000, "read dst2");
	d = diff_at(model, got, 200000);
	CHECK(d < 0, "unaligned copy differs at %ld", d);
	/* Copy past the source's EOF is short. */
	CHECK(copy_all(in, (off_t)len - 10, out, 0, 100) == 10, "copy across EOF not short");
	SYS(close(out));
	SYS(close(in));
	free(model);
	free(want);
	free(got);
	return 0;
}

int t_sync(void)
{
	int fd = SYS(open(P("f"), O_CREAT | O_RDWR, 0644));
	struct stat st;
	CHECK(write(fd, "data", 4) == 4, "write");
	SYS(fsync(fd));
	/* The written-back block counts at once (du after fsync). */
	SYS(fstat(fd, &st));
	CHECK(st.st_blocks > 0, "st_blocks %ld after fsync", (long)st.st_blocks);
	CHECK(write(fd, "more", 4) == 4, "write");
	SYS(fdatasync(fd));
	SYS(syncfs(fd));
	SYS(close(fd));
	/* O_SYNC / O_DSYNC writes. */
	fd = SYS(open(P("g"), O_CREAT | O_RDWR | O_DSYNC, 0644));
	CHECK(write(fd, "dsync", 5) == 5, "O_DSYNC write");
	SYS(close(fd));
	fd = SYS(open(P("h"), O_CREAT | O_RDWR | O_SYNC, 0644));
	CHECK(write(fd, "sync", 4) == 4, "O_SYNC write");
	SYS(close(fd));
	/* fsync of a directory (fsyncdir). */
	int dfd = SYS(open(P("."), O_RDONLY | O_DIRECTORY));
	SYS(fsync(dfd));
	SYS(fdatasync(dfd));
	SYS(close(dfd));
	return 0;
}
