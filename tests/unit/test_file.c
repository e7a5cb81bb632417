// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: the data path (lib/file.c) on two mirrored image files: unaligned I/O against a model, copy-on-write and deferred frees, reflink copies, ENOSPC, per-mirror checksums, read repair, parallel disjoint writers, a randomized model test across remounts, and the fsync hint (small writes before each fsync go FUA, so the fsync needs no flush). */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "discard.h"
#include "file_env.h"

/* ---- unaligned reads and writes against a model ---- */

/* false when @backend is refused here (env_init printed why). */
static bool rw_edges(const char *backend)
{
	static const struct { uint64_t off, len; } w[] = {
		{ 0, 1 }, { 4095, 2 }, { 4096, 4096 }, { 100, 5000 }, { 8191, 1 },
		{ 12288 + 17, MiB }, { 3 * MiB, MiB }, { 5 * MiB + 1, 123 },
		{ 7 * MiB + 4000, 200 },		/* past EOF: a hole before it */
		{ 2 * MiB - 1, 2 }, { 64, 4096 - 128 }, { 0, MiB },
	};
	uint64_t msize = 8 * MiB, size = 0;
	uint8_t *model = calloc(1, msize), *src = malloc(MiB), *b = malloc(MiB);
	struct tfs_file *f;
	struct env e;

	if (env_init(&e, backend, 128ull * MiB)) {
		free(model);
		free(src);
		free(b);
		return false;
	}
	f = mkfile(&e, "edges");
	for (size_t k = 0; k < sizeof(w) / sizeof(w[0]); k++) {
		fill_pattern(src, w[k].len, (unsigned)k + 1);
		pwrite_ok(f, src, w[k].len, (off_t)w[k].off);
		memcpy(model + w[k].off, src, w[k].len);
		if (w[k].off + w[k].len > size)
			size = w[k].off + w[k].len;
		check_model(f, model, size);
		/* Reads at every edge: within a block, across, at and past EOF. */
		{
			uint64_t at = size > 3 ? size - 3 : 0;

			assert_int_equal(tfs_pread(f, b, 10, (off_t)at), (ssize_t)(size - at));
			assert_memory_equal(b, model + at, size - at);
		}
		assert_int_equal(tfs_pread(f, b, 10, -1), -EINVAL);
		assert_int_equal(tfs_pread(f, b, 10, (off_t)size), 0);
		assert_int_equal(tfs_pread(f, b, 10, (off_t)size + 5000), 0);
		if (size >= 4097) {	/* across a block boundary */
			assert_int_equal(tfs_pread(f, b, 2, 4095), 2);
			assert_memory_equal(b, model + 4095, 2);
		}
	}
	/* The hole before the last extending write has no blocks. */
	assert_int_equal(ent(f, 6 * MiB / BS).phys, 0);
	/* tfs_read gives the data at buf + data_off. */
	{
		void *buf;
		size_t doff;
		ssize_t n = tfs_read(f, 4097, 100, &buf, &doff);

		assert_int_equal(n, 100);
		assert_int_equal(doff, 1);
		assert_memory_equal((uint8_t *)buf + doff, model + 4097, 100);
		tfs_buf_put(e.fs, buf);
		n = tfs_read(f, (off_t)size, 100, &buf, &doff);
		assert_int_equal(n, 0);
		tfs_buf_put(e.fs, buf);
	}
	assert_true(check_raw(&e, f) > 0);
	tfs_release(f);
	env_remount(&e);
	f = reopen(&e, "edges");
	check_model(f, model, size);
	assert_true(check_raw(&e, f) > 0);
	tfs_release(f);
	env_fini(&e);
	free(model);
	free(src);
	free(b);
	return true;
}

/* One test per backend, so a refused one shows as skipped, not passed. */
static void test_rw_edges_file(void **state)
{
	assert_true(rw_edges("file"));
}

static void test_rw_edges_aio(void **state)
{
	if (!rw_edges("aio"))
		skip();
}

static void test_rw_edges_uring(void **state)
{
	if (!rw_edges("uring"))
		skip();
}

/* ---- open/create semantics ---- */

static void test_open_create(void **state)
{
	struct tfs_file *f, *g;
	struct stat st;
	struct env e;
	uint8_t b[100];

	env_init(&e, "file", 128ull * MiB);
	f = mkfile(&e, "a");
	memset(b, 'x', sizeof(b));
	pwrite_ok(f, b, sizeof(b), 0);
	assert_int_equal(tfs_create(e.fs, TFS_ROOT_INO, "a", 0644, O_RDWR | O_CREAT | O_EXCL,
				    &e.cred, &st, &g), -EEXIST);
	/* Existing name without O_EXCL: the same file, truncated with O_TRUNC. */
	assert_int_equal(tfs_create(e.fs, TFS_ROOT_INO, "a", 0644, O_RDWR | O_TRUNC,
				    &e.cred, &st, &g), 0);
	assert_int_equal(st.st_ino, tfs_file_ino(f));
	assert_int_equal(st.st_size, 0);
	assert_int_equal(fsize(f), 0);
	tfs_release(g);
	assert_int_equal(tfs_mkdir(e.fs, TFS_ROOT_INO, "d", 0755, &e.cred, &st), 0);
	assert_int_equal(tfs_open(e.fs, st.st_ino, O_RDONLY, &g), -EISDIR);
	assert_int_equal(tfs_create(e.fs, TFS_ROOT_INO, "d", 0644, O_RDWR, &e.cred, &st, &g),
			 -EISDIR);
	/* Writes need a writable handle; O_APPEND writes go to the end. */
	assert_int_equal(tfs_open(e.fs, tfs_file_ino(f), O_RDONLY, &g), 0);
	assert_int_equal(tfs_pwrite(g, b, 10, 0, 0), -EBADF);
	tfs_release(g);
	pwrite_ok(f, b, 10, 0);
	assert_int_equal(tfs_open(e.fs, tfs_file_ino(f), O_WRONLY | O_APPEND, &g), 0);
	assert_int_equal(tfs_pwrite(g, "yz", 2, 0, 0), 2);
	assert_int_equal(fsize(f), 12);
	assert_int_equal(tfs_pread(f, b, 100, 0), 12);
	assert_memory_equal(b + 10, "yz", 2);
	tfs_release(g);
	tfs_release(f);
	env_fini(&e);
}

/* ---- copy-on-write and deferred frees ---- */

static void test_cow(void **state)
{
	uint8_t *b = malloc(2 * BS);
	struct extent_ent e1, e2, b1;
	struct tfs_file *f;
	struct env e;

	env_init(&e, "file", 128ull * MiB);
	f = mkfile(&e, "cow");
	fill_pattern(b, 2 * BS, 1);
	pwrite_ok(f, b, 2 * BS, 0);
	assert_int_equal(log_commit(e.fs->log, UINT64_MAX), 0);
	e1 = ent(f, 0);
	b1 = ent(f, 1);
	assert_true(e1.phys != 0);
	assert_int_equal(alloc_refs(e.fs->alloc, e1.phys), 1);

	/* A 1-byte overwrite moves the whole block, keeping its other bytes. */
	pwrite_ok(f, "Q", 1, 10);
	b[10] = 'Q';
	e2 = ent(f, 0);
	assert_true(e2.phys != 0 && e2.phys != e1.phys);
	assert_true(e2.csum != e1.csum);
	assert_int_equal(ent(f, 1).phys, b1.phys);	/* untouched block stays */
	/* The old block is still allocated until the commit is durable... */
	assert_int_equal(alloc_refs(e.fs->alloc, e1.phys), 1);
	assert_int_equal(alloc_refs(e.fs->alloc, e2.phys), 1);
	assert_int_equal(log_commit(e.fs->log, UINT64_MAX), 0);
	discard_flush(e.fs);	/* held until its discard is done */
	/* ...and free afterwards. */
	assert_int_equal(alloc_refs(e.fs->alloc, e1.phys), 0);
	assert_int_equal(alloc_refs(e.fs->alloc, e2.phys), 1);
	check_model(f, b, 2 * BS);
	/* O_DSYNC: durable on return. */
	assert_int_equal(tfs_pwrite(f, "R", 1, 11, O_DSYNC), 1);
	b[11] = 'R';
	assert_true(log_durable_seq(e.fs->log) >= f->ip->last_seq);
	tfs_release(f);
	env_remount(&e);
	f = reopen(&e, "cow");
	check_model(f, b, 2 * BS);
	tfs_release(f);
	env_fini(&e);
	free(b);
}

/* A crash before the commit leaves the old content (copy-on-write); an
 * O_DSYNC write survives one. */
static void test_crash_cow(void **state)
{
	uint8_t *v1 = malloc(3 * BS), *v2 = malloc(3 * BS);
	struct tfs_file *f;
	struct env e;

	env_init(&e, "file", 128ull * MiB);
	f = mkfile(&e, "c");
	fill_pattern(v1, 3 * BS, 1);
	fill_pattern(v2, 3 * BS, 2);
	pwrite_ok(f, v1, 3 * BS, 0);
	assert_int_equal(log_commit(e.fs->log, UINT64_MAX), 0);
	pwrite_ok(f, v2 + 100, 2 * BS, 100);		/* not committed */
	assert_int_equal(file_truncate(e.fs, f->ip, 50), 0);	/* nor this */
	tfs_release(f);
	tfs_abandon(e.fs);	/* a crash: nothing more is written */
	e.fs = live_fs = NULL;
	assert_int_equal(env_mount(&e), 0);
	f = reopen(&e, "c");
	check_model(f, v1, 3 * BS);
	check_raw(&e, f);
	assert_int_equal(tfs_pwrite(f, v2 + 100, 2 * BS, 100, O_DSYNC), 2 * BS);
	memcpy(v1 + 100, v2 + 100, 2 * BS);
	tfs_release(f);
	tfs_abandon(e.fs);	/* a crash: nothing more is written */
	e.fs = live_fs = NULL;
	assert_int_equal(env_mount(&e), 0);
	f = reopen(&e, "c");
	check_model(f, v1, 3 * BS);
	check_raw(&e, f);
	tfs_release(f);
	env_fini(&e);
	free(v1);
	free(v2);
}

/* ---- copy_file_range ---- */

static void test_copy_range(void **state)
{
	size_t len = 16 * BS + 100;
	uint8_t *m = malloc(len), *mb, *b = malloc(64 * BS);
	struct tfs_file *a, *c;
	uint64_t p0;
	struct env e;

	env_init(&e, "file", 128ull * MiB);
	a = mkfile(&e, "a");
	c = mkfile(&e, "c");
	fill_pattern(m, len, 9);
	pwrite_ok(a, m, len, 0);
	assert_int_equal(log_commit(e.fs->log, UINT64_MAX), 0);
	p0 = ent(a, 0).phys;
	/* Whole file: every block shared, the partial EOF block too. */
	assert_int_equal(tfs_copy_range(a, 0, c, 0, 1 << 30), (ssize_t)len);
	check_model(c, m, len);
	for (uint64_t i = 0; i <= 16; i++) {
		assert_int_equal(ent(c, i).phys, ent(a, i).phys);
		assert_int_equal(alloc_refs(e.fs->alloc, ent(a, i).phys), 2);
	}
	/* Writing the copy leaves the source intact. */
	pwrite_ok(c, "W", 1, 5);
	assert_true(ent(c, 0).phys != p0);
	check_model(a, m, len);
	assert_int_equal(alloc_refs(e.fs->alloc, p0), 2);
	assert_int_equal(log_commit(e.fs->log, UINT64_MAX), 0);
	assert_int_equal(alloc_refs(e.fs->alloc, p0), 1);
	mb = malloc(64 * BS);
	memcpy(mb, m, len);
	mb[5] = 'W';
	check_model(c, mb, len);

	/* Unaligned: copied, with a hole created before it. */
	assert_int_equal(tfs_copy_range(a, 100, c, 20 * BS + 5, 10000), 10000);
	memset(mb + len, 0, 20 * BS + 5 - len);
	memcpy(mb + 20 * BS + 5, m + 100, 10000);
	check_model(c, mb, 20 * BS + 5 + 10000);
	/* Past the source EOF: clamped. */
	assert_int_equal(tfs_copy_range(a, (off_t)len, c, 0, 10), 0);
	assert_int_equal(tfs_copy_range(a, (off_t)len - 10, c, 0, 100), 10);
	memcpy(mb, m + len - 10, 10);

	/* Same file, overlapping, both directions (memmove semantics). */
	memcpy(b, m, len);
	assert_int_equal(tfs_copy_range(a, 0, a, 2 * BS, 8 * BS), 8 * BS);
	memmove(b + 2 * BS, b, 8 * BS);
	check_model(a, b, len);
	assert_int_equal(tfs_copy_range(a, 3 * BS + 7, a, 10, 6 * BS), 6 * BS);
	memmove(b + 10, b + 3 * BS + 7, 6 * BS);
	check_model(a, b, len);
	assert_int_equal(tfs_copy_range(a, 5, a, 9, 3 * BS), 3 * BS);
	memmove(b + 9, b + 5, 3 * BS);
	check_model(a, b, len);
	tfs_release(a);
	tfs_release(c);
	env_remount(&e);
	a = reopen(&e, "a");
	c = reopen(&e, "c");
	check_model(a, b, len);
	check_model(c, mb, 20 * BS + 5 + 10000);
	assert_true(check_raw(&e, c) > 0);
	tfs_release(a);
	tfs_release(c);
	env_fini(&e);
	free(m);
	free(mb);
	free(b);
}

/* Copies in opposite directions at once: the two inodes are locked in ino
 * order, so this finishes (a deadlock would hang until the test timeout). */
struct xcopy { struct tfs_file *in, *out; int err; };

static void *xcopy_thread(void *arg)
{
	struct xcopy *x = arg;

	for (int i = 0; i < 50; i++)
		if (tfs_copy_range(x->in, (i % 4) * BS, x->out, (i % 3) * BS + 1, 3 * BS) !=
		    3 * BS)
			x->err = 1;
	return NULL;
}

static void test_copy_range_crossed(void **state)
{
	uint8_t *m = malloc(8 * BS);
	struct xcopy x[2];
	struct tfs_file *a, *c;
	pthread_t t[2];
	struct env e;

	env_init(&e, "file", 128ull * MiB);
	a = mkfile(&e, "a");
	c = mkfile(&e, "c");
	fill_pattern(m, 8 * BS, 1);
	pwrite_ok(a, m, 8 * BS, 0);
	pwrite_ok(c, m, 8 * BS, 0);
	x[0] = (struct xcopy){ a, c, 0 };
	x[1] = (struct xcopy){ c, a, 0 };
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&t[i], NULL, xcopy_thread, &x[i]), 0);
	for (int i = 0; i < 2; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(x[i].err, 0);
	}
	check_raw(&e, a);
	check_raw(&e, c);
	tfs_release(a);
	tfs_release(c);
	env_fini(&e);
	free(m);
}

/* ---- ENOSPC ---- */

static void test_enospc(void **state)
{
	uint8_t *src = malloc(MiB), *b = malloc(MiB);
	struct tfs_file *f;
	uint64_t written = 0, before;
	struct env e;
	ssize_t r;

	env_init(&e, "file", 64ull * MiB);
	f = mkfile(&e, "big");
	fill_pattern(src, MiB, 5);
	for (int i = 0; i < 200; i++) {
		r = tfs_pwrite(f, src, MiB, (off_t)written, 0);
		if (r < 0)
			break;
		assert_int_equal(r, MiB);
		written += MiB;
	}
	assert_int_equal(r, -ENOSPC);
	assert_true(written >= 16 * MiB);
	/* Nothing half-applied: size, content and free space unchanged. */
	before = alloc_free_blocks(e.fs->alloc);
	assert_int_equal(tfs_pwrite(f, src, MiB, (off_t)written, 0), -ENOSPC);
	assert_int_equal(alloc_free_blocks(e.fs->alloc), before);
	assert_int_equal(fsize(f), written);
	assert_int_equal(tfs_pread(f, b, MiB, (off_t)written - MiB), MiB);
	assert_memory_equal(b, src, MiB);
	/* An overwrite needs new blocks too (copy-on-write). */
	assert_int_equal(tfs_pwrite(f, src, MiB, 0, 0), -ENOSPC);
	{
		uint64_t ino = tfs_file_ino(f);

		tfs_release(f);
		assert_int_equal(tfs_unlink(e.fs, TFS_ROOT_INO, "big"), 0);
		tfs_forget(e.fs, ino, 1);	/* create's kernel reference */
	}
	f = mkfile(&e, "again");
	pwrite_ok(f, src, MiB, 0);	/* the deferred frees are released on demand */
	check_model(f, src, MiB);
	tfs_release(f);
	env_fini(&e);
	free(src);
	free(b);
}

/* ---- read repair and unrecoverable blocks ---- */

static bool raw_ok(struct env *e, int d, uint64_t phys, uint64_t csum)
{
	uint8_t *b = aligned_alloc(BS, BS);
	int fd = open(e->img[d], O_RDONLY);
	bool ok;

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, b, BS, (off_t)(phys * BS)), BS);
	ok = csum_block(b, phys) == csum;
	close(fd);
	free(b);
	return ok;
}

static void corrupt(struct env *e, int d, uint64_t phys)
{
	int fd = open(e->img[d], O_RDWR);
	uint8_t x;

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &x, 1, (off_t)(phys * BS + 77)), 1);
	x ^= 0x10;
	assert_int_equal(pwrite(fd, &x, 1, (off_t)(phys * BS + 77)), 1);
	close(fd);
}

static void test_repair(void **state)
{
	uint8_t *m = malloc(8 * BS), *b = malloc(8 * BS);
	struct extent_ent e3, e5;
	struct tfs_file *f;
	uint64_t repaired = 0;
	struct env e;
	int i;

	env_init(&e, "file", 128ull * MiB);
	f = mkfile(&e, "r");
	fill_pattern(m, 8 * BS, 11);
	pwrite_ok(f, m, 8 * BS, 0);
	tfs_release(f);
	env_umount(&e);
	assert_int_equal(env_mount(&e), 0);
	f = reopen(&e, "r");
	e3 = ent(f, 3);
	e5 = ent(f, 5);
	/* One bad copy: every read returns good data; the copy is rewritten
	 * once a read lands on it (reads rotate over the mirrors). */
	corrupt(&e, 0, e5.phys);
	assert_false(raw_ok(&e, 0, e5.phys, e5.csum));
	for (i = 0; i < 8 && !raw_ok(&e, 0, e5.phys, e5.csum); i++) {
		assert_int_equal(tfs_pread(f, b, BS, 5 * BS), BS);
		assert_memory_equal(b, m + 5 * BS, BS);
	}
	assert_true(raw_ok(&e, 0, e5.phys, e5.csum));
	assert_true(raw_ok(&e, 1, e5.phys, e5.csum));
	for (unsigned d = 0; d < 2; d++)
		repaired += atomic_load(&e.fs->mirror.ctr[d].repaired);
	assert_true(repaired >= 1);
	/* Both copies bad: that block fails with EIO, the others read fine. */
	corrupt(&e, 0, e3.phys);
	corrupt(&e, 1, e3.phys);
	assert_int_equal(tfs_pread(f, b, BS, 3 * BS), -EIO);
	assert_int_equal(tfs_pread(f, b, 100, 3 * BS + 5), -EIO);
	assert_int_equal(tfs_pread(f, b, 3 * BS, 0), 3 * BS);
	assert_memory_equal(b, m, 3 * BS);
	assert_int_equal(tfs_pread(f, b, 4 * BS, 4 * BS), 4 * BS);
	assert_memory_equal(b, m + 4 * BS, 4 * BS);
	/* A sub-block write over the lost block cannot read-modify-write it. */
	assert_int_equal(tfs_pwrite(f, "x", 1, 3 * BS, 0), -EIO);
	/* A whole-block write replaces it. */
	pwrite_ok(f, m + 3 * BS, BS, 3 * BS);
	check_model(f, m, 8 * BS);
	tfs_release(f);
	env_fini(&e);
	free(m);
	free(b);
}

/* A write no mirror takes fails cleanly: nothing allocated, nothing
 * published, the old content still there. */
static void test_write_error(void **state)
{
	uint8_t *m = malloc(4 * BS), *b = malloc(4 * BS);
	struct dev_fault_rule r = { .dev_idx = -1, .op = DEV_WRITE, .kind = DEV_FAULT_ERROR,
				    .err = EIO, .count = -1 };
	struct extent_ent e0;
	struct tfs_file *f;
	uint64_t before;
	struct env e;

	env_init(&e, "file", 128ull * MiB);
	e.fault = "dev=any,op=read,count=0";	/* the fault backend, idle */
	env_remount(&e);
	f = mkfile(&e, "w");
	fill_pattern(m, 4 * BS, 21);
	pwrite_ok(f, m, 4 * BS, 0);
	e0 = ent(f, 0);
	before = alloc_free_blocks(e.fs->alloc);
	/* Every data-area write fails on both devices (the log is before it). */
	r.off = e.fs->sb.data_start * BS;
	r.len = 128ull * MiB - r.off;
	assert_int_equal(dev_fault_add_rule(e.fs->be, &r), 0);
	assert_int_equal(tfs_pwrite(f, "abc", 3, 10, 0), -EIO);
	/* No device takes writes any more: the file system turned read-only
	 * and refuses every later change up front. */
	assert_true(tfs_unusable(e.fs));
	assert_int_equal(tfs_pwrite(f, m, 2 * BS, 3 * BS, 0), -EROFS);
	assert_int_equal(alloc_free_blocks(e.fs->alloc), before);
	assert_int_equal(ent(f, 0).phys, e0.phys);
	assert_int_equal(fsize(f), 4 * BS);
	assert_int_equal(ent(f, 3).phys != 0, 1);
	assert_int_equal(ent(f, 4).phys, 0);
	dev_fault_clear(e.fs->be);
	tfs_release(f);
	/* The devices are failed now: leave without a checkpoint. */
	tfs_abandon(e.fs);
	e.fs = NULL;
	live_fs = NULL;
	env_fini(&e);
	free(m);
	free(b);
}

/* ---- parallel writers to disjoint ranges of one file ---- */

#define NTHR 4
#define REGION (MiB)
#define CHUNK (64 * 1024)

struct pw {
	struct tfs_file *f;
	pthread_barrier_t *bar;
	int id;
	int err;
};

static void *pw_thread(void *arg)
{
	struct pw *p = arg;
	uint8_t *b = malloc(CHUNK);
	struct rangelock *rl = &p->f->ip->rl;

	pthread_barrier_wait(p->bar);
	/* Bounded: keep writing until two writers were seen inside at once. */
	for (int it = 0; it < 400; it++) {
		unsigned mw;
		off_t off = (off_t)p->id * REGION + (off_t)(it % (REGION / CHUNK)) * CHUNK;

		memset(b, (int)(p->id * 16 + (it % 16)), CHUNK);
		if (tfs_pwrite(p->f, b, CHUNK, off, 0) != CHUNK)
			p->err = 1;
		pthread_mutex_lock(&rl->mu);
		mw = rl->max_writers;
		pthread_mutex_unlock(&rl->mu);
		if (mw > 1 && it >= (int)(REGION / CHUNK))
			break;
	}
	/* Final pattern over the whole region, in unaligned pieces. */
	memset(b, 0x80 + p->id, CHUNK);
	for (size_t o = 0, n; o < REGION; o += n) {
		n = o == 0 ? 1000 : CHUNK;
		if (n > REGION - o)
			n = REGION - o;
		if (tfs_pwrite(p->f, b, n, (off_t)(p->id * REGION + o), 0) != (ssize_t)n)
			p->err = 1;
	}
	free(b);
	return NULL;
}

static void test_parallel_writers(void **state)
{
	uint8_t *m = malloc(NTHR * REGION);
	pthread_t t[NTHR];
	struct pw p[NTHR];
	pthread_barrier_t bar;
	struct tfs_file *f;
	struct env e;

	env_init(&e, "file", 128ull * MiB);
	f = mkfile(&e, "par");
	memset(m, 0, NTHR * REGION);
	pwrite_ok(f, m, NTHR * REGION, 0);	/* every later write is non-extending */
	pthread_barrier_init(&bar, NULL, NTHR);
	for (int i = 0; i < NTHR; i++) {
		p[i] = (struct pw){ .f = f, .bar = &bar, .id = i };
		assert_int_equal(pthread_create(&t[i], NULL, pw_thread, &p[i]), 0);
	}
	for (int i = 0; i < NTHR; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(p[i].err, 0);
	}
	pthread_barrier_destroy(&bar);
	assert_true(f->ip->rl.max_writers > 1);
	for (int i = 0; i < NTHR; i++)
		memset(m + (size_t)i * REGION, 0x80 + i, REGION);
	check_model(f, m, NTHR * REGION);
	tfs_release(f);
	env_remount(&e);
	f = reopen(&e, "par");
	check_model(f, m, NTHR * REGION);
	tfs_release(f);
	env_fini(&e);
	free(m);
}

/* ---- readers, writers, extenders and truncates at once ---- */

/* Writers write whole blocks of one byte value; readers check that every
 * block they see is uniform (a torn or half-published block is not). */
struct crw {
	struct tfs_file *f;
	int id, err;
	unsigned seed;
};

static void *crw_thread(void *arg)
{
	struct crw *c = arg;
	uint8_t *b = malloc(8 * BS);

	for (int it = 0; it < 300; it++) {
		unsigned r = rand_r(&c->seed);
		uint64_t blk = r % 96, n = 1 + (r >> 8) % 8;

		if (c->id < 2) {		/* writers (some extend) */
			memset(b, 1 + (int)(r % 250), n * BS);
			if (tfs_pwrite(c->f, b, n * BS, (off_t)(blk * BS), 0) != (ssize_t)(n * BS))
				c->err = 1;
		} else if (c->id < 4) {		/* readers */
			ssize_t got = tfs_pread(c->f, b, n * BS, (off_t)(blk * BS));

			if (got < 0 || got % BS)
				c->err = 2;
			for (ssize_t k = 0; k < got; k += BS)
				for (size_t i = 1; i < BS; i++)
					if (b[k + i] != b[k]) {
						c->err = 3;
						break;
					}
		} else if (it % 10 == 0) {	/* truncate to whole blocks */
			if (file_truncate(c->f->fs, c->f->ip, (r % 100) * BS))
				c->err = 4;
		} else if (it % 10 == 5) {
			if (tfs_fallocate(c->f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					  (off_t)(blk * BS), (off_t)(n * BS)))
				c->err = 5;
		}
	}
	free(b);
	return NULL;
}

static void test_concurrent_rw(void **state)
{
	struct crw c[5];
	pthread_t t[5];
	struct tfs_file *f;
	struct env e;

	env_init(&e, "file", 128ull * MiB);
	f = mkfile(&e, "crw");
	for (int i = 0; i < 5; i++) {
		c[i] = (struct crw){ .f = f, .id = i, .seed = 1000u + (unsigned)i };
		assert_int_equal(pthread_create(&t[i], NULL, crw_thread, &c[i]), 0);
	}
	for (int i = 0; i < 5; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(c[i].err, 0);
	}
	/* Every mapped block still verifies on both images. */
	check_raw(&e, f);
	tfs_release(f);
	env_fini(&e);
}

/* ---- randomized model test ---- */

#define RM_MAX (3 * MiB)

static uint64_t rnd_state;

static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

static uint64_t rnd_len(void)
{
	switch (rnd() % 4) {
	case 0: return 1 + rnd() % 64;
	case 1: return 1 + rnd() % (2 * BS);
	case 2: return BS * (1 + rnd() % 16);
	default: return 1 + rnd() % (256 * 1024);
	}
}

static uint64_t rnd_off(void)
{
	uint64_t o = rnd() % RM_MAX;

	return rnd() % 3 ? o : o / BS * BS;
}

static void random_model(unsigned seed, int nops)
{
	uint8_t *m = calloc(1, RM_MAX + MiB), *src = malloc(MiB), *b = malloc(MiB);
	uint64_t size = 0;
	struct tfs_file *f;
	struct env e;

	rnd_state = 0x9E3779B97F4A7C15ull * seed;
	env_init(&e, "file", 128ull * MiB);
	/* The default background commit, as mounted for real. */
	e.commit_ms = 0;
	env_remount(&e);
	f = mkfile(&e, "rnd");
	for (int op = 0; op < nops; op++) {
		uint64_t off = rnd_off(), len = rnd_len();
		unsigned k = (unsigned)(rnd() % 100);

		if (off + len > RM_MAX)
			len = RM_MAX - off;
		if (len == 0)
			continue;
		if (k < 40) {
			fill_pattern(src, len, (unsigned)op);
			pwrite_ok(f, src, len, (off_t)off);
			memcpy(m + off, src, len);
			if (off + len > size)
				size = off + len;
		} else if (k < 70) {
			uint64_t want = size > off ? size - off : 0;
			ssize_t r = tfs_pread(f, b, len, (off_t)off);

			if (want > len)
				want = len;
			assert_int_equal(r, (ssize_t)want);
			assert_memory_equal(b, m + off, want);
		} else if (k < 78) {
			uint64_t ns = rnd() % 4 ? off : off / 2;

			assert_int_equal(file_truncate(e.fs, f->ip, ns), 0);
			if (ns < size)
				memset(m + ns, 0, size - ns);
			size = ns;
		} else if (k < 86) {
			assert_int_equal(tfs_fallocate(f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
						       (off_t)off, (off_t)len), 0);
			if (off < size)
				memset(m + off, 0, (off + len > size ? size : off + len) - off);
		} else if (k < 93) {
			int mode = rnd() % 2 ? 0 : FALLOC_FL_KEEP_SIZE;
			bool zero = rnd() % 2;

			if (zero)
				mode |= FALLOC_FL_ZERO_RANGE;
			assert_int_equal(tfs_fallocate(f, mode, (off_t)off, (off_t)len), 0);
			if (zero && off < size)
				memset(m + off, 0, (off + len > size ? size : off + len) - off);
			if (!(mode & FALLOC_FL_KEEP_SIZE) && off + len > size)
				size = off + len;
		} else {
			uint64_t soff = rnd_off();
			ssize_t r;

			if (rnd() % 2)
				off = soff % BS + off / BS * BS;	/* shareable */
			if (off + len > RM_MAX)
				len = RM_MAX - off;
			r = tfs_copy_range(f, (off_t)soff, f, (off_t)off, len);
			if (soff >= size)
				len = 0;
			else if (soff + len > size)
				len = size - soff;
			assert_int_equal(r, (ssize_t)len);
			memmove(m + off, m + soff, len);
			if (len && off + len > size)
				size = off + len;
		}
		assert_int_equal(fsize(f), size);
		if (op == nops / 2) {
			check_model(f, m, size);
			tfs_release(f);
			env_remount(&e);
			f = reopen(&e, "rnd");
		}
	}
	check_model(f, m, size);
	tfs_release(f);
	env_remount(&e);
	f = reopen(&e, "rnd");
	check_model(f, m, size);
	check_raw(&e, f);
	tfs_release(f);
	env_fini(&e);
	free(m);
	free(src);
	free(b);
}

static void test_random_model(void **state)
{
	random_model(1, 10000);
	random_model(2, 10000);
}

/* ---- the fsync hint: small writes before each fsync go FUA ---- */

/* Flushes and FUA writes that reached device @d. */
static void flush_counts(struct env *e, int d, uint64_t *flushes, uint64_t *fua)
{
	uint64_t c[3];

	dev_fault_counts(e->fs->be, d, c);
	*fua = dev_fault_fua_writes(e->fs->be, d);
	*flushes = c[DEV_FLUSH];
}

/* @rounds of @writes 4 KiB appends then an fsync (as the daemon calls it:
 * tfs_file_synced, then the commit); adds each device's explicit flushes
 * and FUA writes to fl[] and fua[]. */
static void append_fsync(struct env *e, struct tfs_file *f, unsigned rounds, unsigned writes,
			 uint64_t fl[2], uint64_t fua[2])
{
	uint64_t f0[2], u0[2], f1, u1;
	uint8_t b[BS];

	for (int d = 0; d < 2; d++)
		flush_counts(e, d, &f0[d], &u0[d]);
	for (unsigned r = 0; r < rounds; r++) {
		for (unsigned w = 0; w < writes; w++) {
			fill_pattern(b, BS, r * writes + w);
			pwrite_ok(f, b, BS, (off_t)fsize(f));
		}
		tfs_file_synced(f);
		assert_int_equal(tfs_fsync(e->fs, tfs_file_ino(f), false), 0);
	}
	for (int d = 0; d < 2; d++) {
		flush_counts(e, d, &f1, &u1);
		fl[d] = f1 - f0[d];
		fua[d] = u1 - u0[d];
	}
}

/* A write-ahead log's pattern (one small append, then fsync) costs its
 * fsyncs no device flush: the appends go FUA, so each commit's log chunk
 * follows with nothing to flush first.  A file written in bulk before its
 * fsync keeps plain writes and one flush per fsync. */
static void test_fsync_fua_hint(void **state)
{
	uint64_t fl[2], fua[2];
	struct tfs_file *f, *g;
	struct env e;

	(void)state;
	env_init(&e, "file", 128ull * MiB);
	e.fault = "dev=any,op=read,count=0";	/* the fault backend, idle: it counts */
	e.commit_ms = 3600000;			/* no background commit in between */
	env_remount(&e);
	f = mkfile(&e, "wal");
	g = mkfile(&e, "bulk");
	append_fsync(&e, f, 1, 1, fl, fua);	/* learns the pattern */
	append_fsync(&e, f, 8, 1, fl, fua);
	for (int d = 0; d < 2; d++) {
		assert_int_equal(fl[d], 0);
		assert_int_equal(fua[d], 8 + 8);	/* the appends and the log chunks */
	}
	append_fsync(&e, g, 1, 8, fl, fua);
	append_fsync(&e, g, 4, 8, fl, fua);
	for (int d = 0; d < 2; d++) {
		assert_int_equal(fl[d], 4);
		assert_int_equal(fua[d], 4);		/* the log chunks only */
	}
	/* Back to the small pattern: FUA again from the fsync after it. */
	append_fsync(&e, g, 1, 1, fl, fua);
	append_fsync(&e, g, 3, 1, fl, fua);
	for (int d = 0; d < 2; d++)
		assert_int_equal(fl[d], 0);
	tfs_release(f);
	tfs_release(g);
	env_fini(&e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_rw_edges_file, teardown),
		cmocka_unit_test_teardown(test_rw_edges_aio, teardown),
		cmocka_unit_test_teardown(test_rw_edges_uring, teardown),
		cmocka_unit_test_teardown(test_open_create, teardown),
		cmocka_unit_test_teardown(test_cow, teardown),
		cmocka_unit_test_teardown(test_crash_cow, teardown),
		cmocka_unit_test_teardown(test_copy_range, teardown),
		cmocka_unit_test_teardown(test_copy_range_crossed, teardown),
		cmocka_unit_test_teardown(test_enospc, teardown),
		cmocka_unit_test_teardown(test_repair, teardown),
		cmocka_unit_test_teardown(test_write_error, teardown),
		cmocka_unit_test_teardown(test_parallel_writers, teardown),
		cmocka_unit_test_teardown(test_concurrent_rw, teardown),
		cmocka_unit_test_teardown(test_random_model, teardown),
		cmocka_unit_test_teardown(test_fsync_fua_hint, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
