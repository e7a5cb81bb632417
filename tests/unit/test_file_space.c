// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: file space management (lib/file.c) on two mirrored image files: truncate shrinking and growing (tail zeroed copy-on-write, remount), fallocate (unwritten reservations used in place, ENOSPC, ranges over one 64 MiB piece, the space a write or fallocate would take), hole punching and SEEK_DATA/SEEK_HOLE. */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "file_env.h"

/* ---- truncate ---- */

static void test_truncate(void **state)
{
	uint8_t *m = malloc(4 * BS), *b = malloc(4 * BS);
	struct extent_ent e1;
	struct tfs_file *f;
	struct env e;

	env_init(&e, "file", 128ull * MiB);
	f = mkfile(&e, "t");
	memset(m, 0xAA, 3 * BS);
	pwrite_ok(f, m, 3 * BS, 0);
	e1 = ent(f, 1);
	assert_int_equal(file_truncate(e.fs, f->ip, 5000), 0);
	assert_int_equal(fsize(f), 5000);
	/* The last block was copied with its tail zeroed; the rest dropped. */
	assert_true(ent(f, 1).phys != 0 && ent(f, 1).phys != e1.phys);
	assert_int_equal(ent(f, 2).phys, 0);
	assert_int_equal(tfs_pread(f, b, 4 * BS, 0), 5000);
	assert_memory_equal(b, m, 5000);
	/* Growing exposes zeros, never the old bytes. */
	assert_int_equal(file_truncate(e.fs, f->ip, 3 * BS + 10), 0);
	memset(m + 5000, 0, 3 * BS + 10 - 5000);
	check_model(f, m, 3 * BS + 10);
	assert_int_equal(ent(f, 2).phys, 0);
	/* Extending write after a shrink inside a block. */
	assert_int_equal(file_truncate(e.fs, f->ip, 100), 0);
	pwrite_ok(f, "zz", 2, 200);
	memset(m + 100, 0, 100);
	memcpy(m + 200, "zz", 2);
	check_model(f, m, 202);
	assert_int_equal(file_truncate(e.fs, f->ip, 0), 0);
	assert_int_equal(ent(f, 0).phys, 0);
	assert_int_equal(extent_mapped(&f->ip->map), 0);
	assert_int_equal(file_truncate(e.fs, f->ip, 3 * BS), 0);
	memset(m, 0, 3 * BS);
	pwrite_ok(f, "k", 1, 5000);
	m[5000] = 'k';
	tfs_release(f);
	env_remount(&e);
	f = reopen(&e, "t");
	check_model(f, m, 3 * BS);
	tfs_release(f);
	env_fini(&e);
	free(m);
	free(b);
}

/* ---- fallocate, punch, SEEK_DATA / SEEK_HOLE ---- */

static void test_fallocate_seek(void **state)
{
	uint8_t *m = calloc(1, 64 * BS), *b = malloc(BS);
	struct tfs_file *f;
	uint64_t before;
	struct env e;

	env_init(&e, "file", 128ull * MiB);
	f = mkfile(&e, "fa");
	assert_int_equal(tfs_fallocate(f, FALLOC_FL_COLLAPSE_RANGE, 0, BS), -EOPNOTSUPP);
	assert_int_equal(tfs_fallocate(f, FALLOC_FL_PUNCH_HOLE, 0, BS), -EOPNOTSUPP);
	before = alloc_free_blocks(e.fs->alloc);
	assert_int_equal(tfs_fallocate(f, FALLOC_FL_KEEP_SIZE, 0, MiB), 0);
	assert_int_equal(fsize(f), 0);
	assert_int_equal(before - alloc_free_blocks(e.fs->alloc), MiB / BS);
	assert_true(ent(f, 0).phys & EXTENT_UNWRITTEN);
	assert_int_equal(ent(f, 0).csum, 0);
	/* Mode 0 extends the size; the new range reads as zeros. */
	assert_int_equal(tfs_fallocate(f, 0, 0, 2 * MiB + 1), 0);
	assert_int_equal(fsize(f), 2 * MiB + 1);
	assert_int_equal(before - alloc_free_blocks(e.fs->alloc), 2 * MiB / BS + 1);
	assert_int_equal(tfs_pread(f, b, BS, 100), BS);
	assert_memory_equal(b, m, BS);
	/* Writes into unwritten blocks use them in place (the reservation
	 * holds): same physical blocks, no new allocation, flag gone. */
	{
		uint64_t p3 = EXTENT_PHYS(ent(f, 3).phys), p5 = EXTENT_PHYS(ent(f, 5).phys);

		before = alloc_free_blocks(e.fs->alloc);
		fill_pattern(m + 3 * BS, 2 * BS, 7);
		pwrite_ok(f, m + 3 * BS, 2 * BS, 3 * BS);
		fill_pattern(m + 5 * BS + 100, 10, 8);
		pwrite_ok(f, m + 5 * BS + 100, 10, 5 * BS + 100);
		assert_int_equal(ent(f, 3).phys, p3);
		assert_int_equal(ent(f, 5).phys, p5);
		assert_int_equal(alloc_free_blocks(e.fs->alloc), before);
		assert_int_equal(log_commit(e.fs->log, UINT64_MAX), 0);
		assert_int_equal(alloc_refs(e.fs->alloc, p3), 1);
		assert_int_equal(alloc_free_blocks(e.fs->alloc), before);
		assert_int_equal(tfs_pread(f, b, BS, 5 * BS), BS);
		assert_memory_equal(b, m + 5 * BS, BS);
		assert_true(check_raw(&e, f) >= 6);
		memset(m, 0, 64 * BS);
	}
	/* Too much: a clean ENOSPC with nothing allocated. */
	before = alloc_free_blocks(e.fs->alloc);
	assert_int_equal(tfs_fallocate(f, 0, 0, 1ll << 30), -ENOSPC);
	assert_int_equal(alloc_free_blocks(e.fs->alloc), before);
	assert_int_equal(fsize(f), 2 * MiB + 1);
	assert_int_equal(file_truncate(e.fs, f->ip, 0), 0);

	/* Sparse: data in blocks 10-11 and 20, size 64 blocks. */
	assert_int_equal(file_truncate(e.fs, f->ip, 64 * BS), 0);
	fill_pattern(m + 10 * BS, 2 * BS, 3);
	fill_pattern(m + 20 * BS, BS, 4);
	pwrite_ok(f, m + 10 * BS, 2 * BS, 10 * BS);
	pwrite_ok(f, m + 20 * BS, BS, 20 * BS);
	assert_int_equal(tfs_lseek(f, 0, SEEK_DATA), 10 * BS);
	assert_int_equal(tfs_lseek(f, 10 * BS + 5, SEEK_DATA), 10 * BS + 5);
	assert_int_equal(tfs_lseek(f, 10 * BS, SEEK_HOLE), 12 * BS);
	assert_int_equal(tfs_lseek(f, 13 * BS, SEEK_DATA), 20 * BS);
	assert_int_equal(tfs_lseek(f, 0, SEEK_HOLE), 0);
	assert_int_equal(tfs_lseek(f, 21 * BS, SEEK_DATA), -ENXIO);
	assert_int_equal(tfs_lseek(f, 21 * BS, SEEK_HOLE), 21 * BS);
	assert_int_equal(tfs_lseek(f, 64 * BS, SEEK_HOLE), -ENXIO);
	assert_int_equal(tfs_lseek(f, 64 * BS, SEEK_DATA), -ENXIO);
	assert_int_equal(tfs_lseek(f, 77, SEEK_SET), 77);
	/* EOF counts as a hole. */
	pwrite_ok(f, m + 20 * BS, BS, 63 * BS);
	memcpy(m + 63 * BS, m + 20 * BS, BS);
	assert_int_equal(tfs_lseek(f, 63 * BS, SEEK_HOLE), 64 * BS);

	/* Punch: partial edges zeroed copy-on-write, whole blocks unmapped. */
	assert_int_equal(tfs_fallocate(f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				       10 * BS + 100, BS + 50), 0);
	memset(m + 10 * BS + 100, 0, BS + 50);
	check_model(f, m, 64 * BS);
	assert_true(ent(f, 10).phys != 0 && ent(f, 11).phys != 0);
	assert_int_equal(tfs_fallocate(f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				       9 * BS, 3 * BS), 0);
	memset(m + 9 * BS, 0, 3 * BS);
	assert_int_equal(ent(f, 10).phys, 0);
	assert_int_equal(ent(f, 11).phys, 0);
	assert_int_equal(tfs_lseek(f, 0, SEEK_DATA), 20 * BS);
	/* Within one block. */
	assert_int_equal(tfs_fallocate(f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				       20 * BS + 7, 9), 0);
	memset(m + 20 * BS + 7, 0, 9);
	assert_int_equal(fsize(f), 64 * BS);
	check_model(f, m, 64 * BS);
	tfs_release(f);
	env_remount(&e);
	f = reopen(&e, "fa");
	check_model(f, m, 64 * BS);
	assert_true(check_raw(&e, f) > 0);
	tfs_release(f);
	env_fini(&e);
	free(m);
	free(b);
}

/* A range larger than one fallocate piece (64 MiB), around existing data. */
static void test_fallocate_large(void **state)
{
	uint64_t n = 80 * MiB / BS, before, data;
	uint8_t b[BS];
	struct tfs_file *f;
	struct env e;

	env_init(&e, "file", 128ull * MiB);
	f = mkfile(&e, "big");
	memset(b, 0x5a, sizeof(b));
	pwrite_ok(f, b, BS, 17000 * BS);	/* straddles the piece boundary region */
	data = ent(f, 17000).phys;
	before = alloc_free_blocks(e.fs->alloc);
	assert_int_equal(tfs_fallocate(f, FALLOC_FL_KEEP_SIZE, 0, (off_t)(n * BS)), 0);
	assert_int_equal(before - alloc_free_blocks(e.fs->alloc), n - 1);
	assert_int_equal(extent_mapped(&f->ip->map), n);
	assert_int_equal(fsize(f), 17001 * BS);
	assert_int_equal(ent(f, 17000).phys, data);
	assert_true(ent(f, 16384).phys & EXTENT_UNWRITTEN);
	assert_true(ent(f, n - 1).phys & EXTENT_UNWRITTEN);
	assert_int_equal(ent(f, n).phys, 0);
	tfs_release(f);
	env_remount(&e);
	f = reopen(&e, "big");
	assert_int_equal(extent_mapped(&f->ip->map), n);
	assert_true(ent(f, n - 1).phys & EXTENT_UNWRITTEN);
	assert_int_equal(tfs_pread(f, b, BS, 17000 * BS), BS);
	assert_int_equal(b[0], 0x5a);
	/* Truncating drops the preallocation past EOF too. */
	assert_int_equal(file_truncate(e.fs, f->ip, 0), 0);
	assert_int_equal(extent_mapped(&f->ip->map), 0);
	tfs_release(f);
	env_fini(&e);
}

/* tfs_space_need: what the low-space admission counts.  A write takes a
 * block for every block it touches (copy-on-write) but the fallocated,
 * never written ones; a fallocate one for every hole. */
static void test_space_need(void **state)
{
	uint8_t b[2 * BS];
	struct tfs_file *f;
	uint64_t need;
	struct env e;

	env_init(&e, "file", 128ull * MiB);
	f = mkfile(&e, "need");
	memset(b, 0x33, sizeof(b));
	pwrite_ok(f, b, 2 * BS, 0);				/* blocks 0, 1 written */
	assert_int_equal(tfs_fallocate(f, FALLOC_FL_KEEP_SIZE, 4 * BS, 4 * BS), 0);	/* 4..7 */
	/* Holes. */
	assert_int_equal(tfs_space_need(f, 10 * BS, 3 * BS, false, &need), 0);
	assert_int_equal(need, 3 * BS);
	assert_int_equal(tfs_space_need(f, 10 * BS, 3 * BS, true, &need), 0);
	assert_int_equal(need, 3 * BS);
	/* Written blocks: a write copies them, a fallocate leaves them. */
	assert_int_equal(tfs_space_need(f, 0, 2 * BS, false, &need), 0);
	assert_int_equal(need, 2 * BS);
	assert_int_equal(tfs_space_need(f, 0, 2 * BS, true, &need), 0);
	assert_int_equal(need, 0);
	/* Fallocated, never written: nothing either way, partial blocks too. */
	assert_int_equal(tfs_space_need(f, 4 * BS + 100, 3 * BS, false, &need), 0);
	assert_int_equal(need, 0);
	assert_int_equal(tfs_space_need(f, 4 * BS, 4 * BS, true, &need), 0);
	assert_int_equal(need, 0);
	/* Mixed: blocks 1 (written), 2, 3 (holes), 4 (unwritten). */
	assert_int_equal(tfs_space_need(f, BS + 1, 3 * BS, false, &need), 0);
	assert_int_equal(need, 3 * BS);
	assert_int_equal(tfs_space_need(f, BS + 1, 3 * BS, true, &need), 0);
	assert_int_equal(need, 2 * BS);
	/* Once written, a fallocated block is copied on the next write. */
	pwrite_ok(f, b, BS, 5 * BS);
	assert_int_equal(tfs_space_need(f, 4 * BS, 4 * BS, false, &need), 0);
	assert_int_equal(need, BS);
	assert_int_equal(tfs_space_need(f, -1, BS, false, &need), -EINVAL);
	assert_int_equal(tfs_space_need(f, 0, 0, false, &need), -EINVAL);
	tfs_release(f);
	env_fini(&e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_truncate, teardown),
		cmocka_unit_test_teardown(test_fallocate_seek, teardown),
		cmocka_unit_test_teardown(test_fallocate_large, teardown),
		cmocka_unit_test_teardown(test_space_need, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
