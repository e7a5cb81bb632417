// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: degraded mounts, a mirror failing under writes (and a crash before any checkpoint records it), rebuild of a returning device (dirty regions only), replace under a writer, crash during a rebuild, a rebuild target that is not the member (refused) or holds foreign blocks (verified and rewritten). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fs_i.h"
#include "inode_i.h"
#include "rebuild.h"
#include "testlib.h"
#include "tlog.h"

#define IMG_SIZE (128ull << 20)
#define MIB (1u << 20)

static char img[3][TL_PATH_MAX];	/* two members and a spare for replace */

static void mk_image(char *path)
{
	tl_mk_image(path, "tfs_rebuild", IMG_SIZE);
}

static int setup(void **state)
{
	const char *d[3];

	tl_mk_images(img, d, 3, "tfs_rebuild", IMG_SIZE);
	tl_format(d, 2, NULL);
	return 0;
}

static int teardown(void **state)
{
	char away[200];

	for (int i = 0; i < 3; i++) {
		snprintf(away, sizeof(away), "%s.away", img[i]);
		unlink(away);
		unlink(img[i]);
	}
	return 0;
}

static int try_mount(const char *const *devs, unsigned n, bool degraded, const char *fault,
		     struct tfs **fs, char *err, size_t errlen)
{
	struct tfs_opts o;

	tl_mount_opts(&o, devs, n);
	o.degraded = degraded;
	o.fault = fault;
	o.bounce_bufs = 16;
	return tfs_mount(&o, fs, err, errlen);
}

static struct tfs *mount_devs(const char *a, const char *b, bool degraded, const char *fault)
{
	const char *devs[2] = { a, b };
	struct tfs *fs = NULL;
	char err[256] = "";
	int ret = try_mount(devs, b ? 2 : 1, degraded, fault, &fs, err, sizeof(err));

	if (ret)
		fprintf(stderr, "mount: %s\n", err);
	assert_int_equal(ret, 0);
	return fs;
}

static int put_file_ret(struct tfs *fs, const char *name, size_t len, unsigned seed)
{
	struct tfs_cred c = { .uid = getuid(), .gid = getgid() };
	struct tfs_file *f = NULL;
	struct stat st;
	uint8_t *buf = malloc(len);
	ssize_t w = 0;
	int ret;

	assert_non_null(buf);
	tl_pattern(buf, len, seed);
	ret = tfs_create(fs, TFS_ROOT_INO, name, S_IFREG | 0644, O_RDWR | O_TRUNC, &c, &st, &f);
	if (ret == 0) {
		for (size_t off = 0; off < len && w >= 0; off += MIB)
			w = tfs_pwrite(f, buf + off, len - off < MIB ? len - off : MIB, (off_t)off, 0);
		tfs_release(f);
		tfs_forget(fs, st.st_ino, 1);
		ret = w < 0 ? (int)w : 0;
	}
	free(buf);
	return ret;
}

static void put_file(struct tfs *fs, const char *name, size_t len, unsigned seed)
{
	assert_int_equal(put_file_ret(fs, name, len, seed), 0);
}

static void check_file(struct tfs *fs, const char *name, size_t len, unsigned seed)
{
	uint8_t *want = malloc(len), *got = malloc(len);
	struct tfs_file *f = NULL;
	struct stat st;

	assert_non_null(want);
	assert_non_null(got);
	tl_pattern(want, len, seed);
	assert_int_equal(tfs_lookup(fs, TFS_ROOT_INO, name, &st), 0);
	assert_int_equal((size_t)st.st_size, len);
	assert_int_equal(tfs_open(fs, st.st_ino, O_RDONLY, &f), 0);
	for (size_t off = 0; off < len; off += MIB) {
		size_t n = len - off < MIB ? len - off : MIB;

		assert_int_equal(tfs_pread(f, got + off, n, (off_t)off), (ssize_t)n);
	}
	assert_memory_equal(want, got, len);
	tfs_release(f);
	tfs_forget(fs, st.st_ino, 1);
	free(want);
	free(got);
}

/* A scratch copy of an image: mounting it alone (degraded) writes a
 * superblock that marks the other member stale, which must not touch the
 * real set. */
static void copy_image(const char *from, char *to)
{
	int in = open(from, O_RDONLY), out;
	off_t left = (off_t)IMG_SIZE;

	mk_image(to);
	out = open(to, O_WRONLY);
	assert_true(in >= 0 && out >= 0);
	while (left > 0) {
		ssize_t n = copy_file_range(in, NULL, out, NULL, (size_t)left, 0);

		assert_true(n > 0);
		left -= n;
	}
	close(in);
	close(out);
}

/* Every block of every file reads back verified from this image alone. */
static void check_alone(const char *path, const char *const *names, const size_t *lens,
			const unsigned *seeds, unsigned n)
{
	char tmp[64];
	struct tfs *fs;

	copy_image(path, tmp);
	fs = mount_devs(tmp, NULL, true, NULL);
	for (unsigned i = 0; i < n; i++)
		check_file(fs, names[i], lens[i], seeds[i]);
	assert_int_equal(tfs_unmount(fs), 0);
	unlink(tmp);
}

static int wait_done(struct tfs *fs)
{
	return rebuild_wait(fs);
}

/* ---- log capture ---- */

static _Atomic int failed_lines;

static void count_log(int level, const char *msg)
{
	if (strstr(msg, "device failed"))
		atomic_fetch_add(&failed_lines, 1);
}

/* ---- tests ---- */

/* A missing device: refused without -o degraded, with a message naming its
 * path and uuid; with it the file system serves from the other one; the
 * device is stale afterwards and "rebuild" brings it back. */
static void test_missing_at_mount(void **state)
{
	char away[200], err[256] = "", u[40];
	const char *devs[2] = { img[0], img[1] };
	struct rebuild_status st;
	struct tfs *fs = NULL;
	int ret;

	fs = mount_devs(img[0], img[1], false, NULL);
	put_file(fs, "before", 3 * MIB, 1);
	/* the uuid the message must name */
	for (int i = 0; i < 16; i++)
		snprintf(u + 2 * i, 3, "%02x", fs->sb.dev_uuids[1][i]);
	assert_int_equal(tfs_unmount(fs), 0);

	snprintf(away, sizeof(away), "%s.away", img[1]);
	assert_int_equal(rename(img[1], away), 0);
	ret = try_mount(devs, 2, false, NULL, &fs, err, sizeof(err));
	assert_int_equal(ret, -ENODEV);
	assert_non_null(strstr(err, img[1]));
	assert_non_null(strstr(err, "uuid"));
	assert_non_null(strstr(err, "degraded"));
	/* uuid printed with dashes: compare its first 8 hex digits */
	assert_non_null(strstr(err, (u[8] = '\0', u)));

	fs = mount_devs(img[0], img[1], true, NULL);
	assert_int_equal(atomic_load(&fs->mirror.state[1]), MDEV_MISSING);
	assert_int_equal(mirror_insync(&fs->mirror), 1);
	check_file(fs, "before", 3 * MIB, 1);
	put_file(fs, "during", 2 * MIB, 2);
	assert_int_equal(tfs_unmount(fs), 0);

	assert_int_equal(rename(away, img[1]), 0);
	/* Back, but stale: not without -o degraded. */
	ret = try_mount(devs, 2, false, NULL, &fs, err, sizeof(err));
	assert_int_equal(ret, -ENODEV);
	assert_non_null(strstr(err, "stale"));
	fs = mount_devs(img[0], img[1], true, NULL);
	assert_int_equal(atomic_load(&fs->mirror.state[1]), MDEV_STALE);
	assert_int_equal(rebuild_start(fs, img[1], err, sizeof(err)), 0);
	assert_int_equal(wait_done(fs), RB_DONE);
	rebuild_get_status(fs, &st);
	/* "during" (512 blocks) and checkpoints, not "before" (768 more) */
	assert_true(st.copied_blocks >= 512);
	assert_true(st.copied_blocks < 512 + 768);
	assert_int_equal(atomic_load(&fs->mirror.state[1]), MDEV_OK);
	assert_int_equal(mirror_dirty_count(&fs->mirror), 0);
	assert_int_equal(tfs_unmount(fs), 0);

	/* In sync on disk: mounts without -o degraded; the rebuilt one alone
	 * holds everything. */
	fs = mount_devs(img[0], img[1], false, NULL);
	assert_int_equal(tfs_unmount(fs), 0);
	{
		const char *names[] = { "before", "during" };
		size_t lens[] = { 3 * MIB, 2 * MIB };
		unsigned seeds[] = { 1, 2 };

		check_alone(img[1], names, lens, seeds, 2);
	}
}

/* A device starts failing in the middle of a write load: every write still
 * succeeds, the failure is logged once, and the surviving device alone
 * holds every acknowledged write. */
static void test_fail_mid_write(void **state)
{
	struct dev_fault_rule r = {
		.dev_idx = 1, .op = -1, .kind = DEV_FAULT_ERROR, .err = EIO, .count = -1,
	};
	const char *names[12];
	char namebuf[12][16];
	size_t lens[12];
	unsigned seeds[12];
	struct tfs *fs;

	atomic_store(&failed_lines, 0);
	tfs_set_log_fn(count_log);
	fs = mount_devs(img[0], img[1], false, "");
	for (unsigned i = 0; i < 12; i++) {
		snprintf(namebuf[i], sizeof(namebuf[i]), "f%u", i);
		names[i] = namebuf[i];
		lens[i] = MIB + i * 4096 + 100;
		seeds[i] = 10 + i;
		if (i == 5)
			assert_int_equal(dev_fault_add_rule(fs->be, &r), 0);
		put_file(fs, names[i], lens[i], seeds[i]);
		if (i % 3 == 2)
			assert_int_equal(tfs_syncfs(fs), 0);
	}
	assert_int_equal(tfs_syncfs(fs), 0);
	assert_int_equal(atomic_load(&fs->mirror.state[1]), MDEV_FAILED);
	assert_int_equal(atomic_load(&failed_lines), 1);
	for (unsigned i = 0; i < 12; i++)
		check_file(fs, names[i], lens[i], seeds[i]);
	/* The failure reached the superblock of the survivor. */
	assert_int_equal(tfs_unmount(fs), 0);
	tfs_set_log_fn(NULL);

	check_alone(img[0], names, lens, seeds, 12);
	{
		const char *devs[2] = { img[0], img[1] };
		char err[256] = "";

		assert_int_equal(try_mount(devs, 2, false, NULL, &fs, err, sizeof(err)), -ENODEV);
		assert_non_null(strstr(err, "stale"));
	}
	/* Bring it back for the next tests. */
	fs = mount_devs(img[0], img[1], true, NULL);
	assert_int_equal(rebuild_start(fs, "1", (char[200]){ 0 }, 200), 0);
	assert_int_equal(wait_done(fs), RB_DONE);
	assert_int_equal(tfs_unmount(fs), 0);
}

/* A device fails on a write (or the fsync's cache flush) and the machine
 * crashes before any checkpoint could record it (ckpt_mu held: none can
 * run).  The crash is the images as they are right after the acknowledged
 * writes and fsync.  The returning device must not be taken as current:
 * the survivor's superblock already says it is stale.  A rebuild then
 * brings it back complete. */
static void fail_then_crash(int op)
{
	struct dev_fault_rule r = {
		.dev_idx = 1, .op = op, .kind = DEV_FAULT_ERROR, .err = EIO, .count = -1,
	};
	const char *names[] = { "pre", "mid" };
	size_t lens[] = { 2 * MIB, 3 * MIB + 100 };
	unsigned seeds[] = { 60, 61 };
	char crash[2][64], err[256] = "";
	const char *cdevs[2] = { crash[0], crash[1] };
	struct tfs *fs;

	fs = mount_devs(img[0], img[1], false, "");
	put_file(fs, "pre", lens[0], seeds[0]);
	assert_int_equal(tfs_checkpoint(fs), 0);	/* both in sync on disk */

	pthread_mutex_lock(&fs->ckpt_mu);
	assert_int_equal(dev_fault_add_rule(fs->be, &r), 0);
	put_file(fs, "mid", lens[1], seeds[1]);
	assert_int_equal(tfs_syncfs(fs), 0);
	assert_int_equal(atomic_load(&fs->mirror.state[1]), MDEV_FAILED);
	copy_image(img[0], crash[0]);
	copy_image(img[1], crash[1]);
	pthread_mutex_unlock(&fs->ckpt_mu);
	tfs_abandon(fs);

	/* Device 1 works again but missed "mid": refused without -o degraded. */
	assert_int_equal(try_mount(cdevs, 2, false, NULL, &fs, err, sizeof(err)), -ENODEV);
	assert_non_null(strstr(err, "stale"));
	fs = mount_devs(crash[0], crash[1], true, NULL);
	assert_int_equal(atomic_load(&fs->mirror.state[1]), MDEV_STALE);
	check_file(fs, "pre", lens[0], seeds[0]);
	check_file(fs, "mid", lens[1], seeds[1]);
	/* What it missed is dirty (replayed from the log), "pre" is not. */
	assert_true(mirror_dirty_count(&fs->mirror) > 0);
	assert_int_equal(rebuild_start(fs, "1", err, sizeof(err)), 0);
	assert_int_equal(wait_done(fs), RB_DONE);
	assert_int_equal(atomic_load(&fs->mirror.state[1]), MDEV_OK);
	assert_int_equal(tfs_unmount(fs), 0);

	fs = mount_devs(crash[0], crash[1], false, NULL);
	assert_int_equal(tfs_unmount(fs), 0);
	check_alone(crash[0], names, lens, seeds, 2);
	check_alone(crash[1], names, lens, seeds, 2);

	/* The crashed set, in sync again, is the one the next tests use,
	 * without these files (the replace test fills the images). */
	fs = mount_devs(crash[0], crash[1], false, NULL);
	assert_int_equal(tfs_unlink(fs, TFS_ROOT_INO, "pre"), 0);
	assert_int_equal(tfs_unlink(fs, TFS_ROOT_INO, "mid"), 0);
	assert_int_equal(tfs_unmount(fs), 0);
	for (int i = 0; i < 2; i++) {
		unlink(img[i]);
		memcpy(img[i], crash[i], sizeof(img[i]));
	}
}

static void test_fail_then_crash(void **state)
{
	fail_then_crash(DEV_WRITE);
}

static void test_flush_fail_then_crash(void **state)
{
	fail_then_crash(DEV_FLUSH);
}

static uint64_t file_regions(struct tfs *fs, const char *name, bool *seen)
{
	struct stat st;
	struct tfs_inode *ip;
	uint64_t n = 0, blocks;

	assert_int_equal(tfs_lookup(fs, TFS_ROOT_INO, name, &st), 0);
	ip = fs_iget(fs, st.st_ino);
	assert_non_null(ip);
	blocks = ((uint64_t)st.st_size + 4095) / 4096;
	for (uint64_t f = 0; f < blocks; f++) {
		struct extent_ent e;
		uint64_t r;

		extent_get(&ip->map, f, &e);
		r = mirror_region_of(&fs->mirror, EXTENT_PHYS(e.phys));
		assert_true(r != UINT64_MAX);
		if (!seen[r]) {
			seen[r] = true;
			n++;
		}
	}
	tfs_forget(fs, st.st_ino, 1);
	return n;
}

/* A device out while one file is written gets that file's regions and
 * nothing of the 16 MiB written before. */
static void test_rebuild_counts(void **state)
{
	struct dev_fault_rule r = {
		.dev_idx = 1, .op = DEV_WRITE, .kind = DEV_FAULT_ERROR, .err = EIO, .count = -1,
	};
	struct rebuild_status st;
	char err[200] = "";
	bool *seen;
	uint64_t want;
	struct tfs *fs;

	fs = mount_devs(img[0], img[1], false, "");
	put_file(fs, "old", 16 * MIB, 30);
	assert_int_equal(tfs_checkpoint(fs), 0);
	assert_int_equal(mirror_dirty_count(&fs->mirror), 0);

	assert_int_equal(dev_fault_add_rule(fs->be, &r), 0);
	put_file(fs, "new", 2 * MIB, 31);
	assert_int_equal(atomic_load(&fs->mirror.state[1]), MDEV_FAILED);
	assert_int_equal(tfs_syncfs(fs), 0);
	dev_fault_clear(fs->be);	/* the device works again */

	seen = calloc(fs->mirror.trk_nregions, 1);
	assert_non_null(seen);
	want = file_regions(fs, "new", seen);
	/* Everything dirty is "new" or checkpoint/bitmap blocks written while
	 * it was out; none of "old" unless it shares a region with those. */
	assert_true(mirror_dirty_count(&fs->mirror) >= want);
	assert_true(mirror_dirty_count(&fs->mirror) <= want + 3);

	assert_int_equal(rebuild_start(fs, img[1], err, sizeof(err)), 0);
	assert_int_equal(wait_done(fs), RB_DONE);
	rebuild_get_status(fs, &st);
	assert_true(st.regions_total >= want && st.regions_total <= want + 3);
	assert_int_equal(st.regions_done, st.regions_total);
	assert_true(st.copied_blocks >= 512);
	/* at most the regions visited, far from the 4096 blocks of "old" */
	assert_true(st.copied_blocks <= st.regions_total * 256);
	assert_true(st.copied_blocks < 4096);
	assert_true(st.verified_blocks >= 512);
	assert_int_equal(st.fixed_blocks, 0);
	free(seen);
	assert_int_equal(tfs_unmount(fs), 0);

	{
		const char *names[] = { "old", "new" };
		size_t lens[] = { 16 * MIB, 2 * MIB };
		unsigned seeds[] = { 30, 31 };

		check_alone(img[1], names, lens, seeds, 2);
	}
}

struct writer {
	struct tfs *fs;
	_Atomic bool stop;
	unsigned n;
	int err;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	char name[32];

	while (!atomic_load(&w->stop) && w->n < 200) {
		snprintf(name, sizeof(name), "w%u", w->n);
		w->err = put_file_ret(w->fs, name, 300 * 1024 + w->n, 100 + w->n);
		if (w->err)
			break;
		w->n++;
	}
	return NULL;
}

/* Replace a member by a new image while a writer runs; both mirrors end
 * verified and the new image alone holds every file. */
static void test_replace_under_writer(void **state)
{
	struct writer w = { 0 };
	struct rebuild_status st;
	pthread_t thr;
	char err[200] = "";
	struct tfs *fs;

	fs = mount_devs(img[0], img[1], false, NULL);
	put_file(fs, "base", 8 * MIB, 40);
	w.fs = fs;
	rebuild_set_rate(fs, 0);
	assert_int_equal(pthread_create(&thr, NULL, writer_main, &w), 0);
	usleep(20000);
	assert_int_equal(rebuild_replace(fs, img[1], img[2], false, err, sizeof(err)), 0);
	assert_int_equal(atomic_load(&fs->mirror.state[1]), MDEV_REBUILDING);
	/* A second one is refused while this one runs. */
	assert_int_equal(rebuild_replace(fs, img[0], img[1], false, err, sizeof(err)), -EBUSY);
	assert_int_equal(wait_done(fs), RB_DONE);
	usleep(20000);
	atomic_store(&w.stop, true);
	pthread_join(thr, NULL);
	assert_int_equal(w.err, 0);
	assert_true(w.n > 0);
	rebuild_get_status(fs, &st);
	assert_int_equal(st.kind, SUPER_RB_REPLACE);
	assert_true(st.copied_blocks >= 2048);
	assert_int_equal(atomic_load(&fs->mirror.state[1]), MDEV_OK);
	assert_string_equal(fs->mirror.devs[1]->path, img[2]);
	assert_int_equal(tfs_syncfs(fs), 0);
	for (unsigned i = 0; i < w.n; i++) {
		char name[32];

		snprintf(name, sizeof(name), "w%u", i);
		check_file(fs, name, 300 * 1024 + i, 100 + i);
	}
	assert_int_equal(tfs_unmount(fs), 0);

	/* The old image is no longer a member; the new one is. */
	{
		const char *devs[2] = { img[0], img[1] };

		assert_int_equal(try_mount(devs, 2, false, NULL, &fs, err, sizeof(err)), -EINVAL);
		assert_non_null(strstr(err, "no longer a member"));
	}
	/* Each image alone holds (and verifies) every block. */
	for (int k = 0; k < 2; k++) {
		char tmp[64];
		struct tfs *f1;

		copy_image(k ? img[2] : img[0], tmp);
		f1 = mount_devs(tmp, NULL, true, NULL);

		check_file(f1, "base", 8 * MIB, 40);
		for (unsigned i = 0; i < w.n; i++) {
			char name[32];

			snprintf(name, sizeof(name), "w%u", i);
			check_file(f1, name, 300 * 1024 + i, 100 + i);
		}
		assert_int_equal(tfs_unmount(f1), 0);
		unlink(tmp);
	}
	/* Swap names so img[1] is a member again for the next test. */
	{
		char t[64];

		memcpy(t, img[1], 64);
		memcpy(img[1], img[2], 64);
		memcpy(img[2], t, 64);
	}
}

/* A crash in the middle of a replace: the new device is still stale on
 * disk (its own superblock says so: mounted alone, even -o degraded, it
 * is refused as a replace that did not finish), the next mount resumes
 * the copy from the saved cursor without -o degraded, and it finishes. */
static void test_crash_mid_rebuild(void **state)
{
	struct rebuild_status st;
	char err[200] = "";
	struct tfs *fs;
	uint64_t done;

	fs = mount_devs(img[0], img[1], false, NULL);
	/* room: drop what the earlier tests wrote */
	for (unsigned i = 0; i < 200; i++) {
		char name[32];

		snprintf(name, sizeof(name), "w%u", i);
		tfs_unlink(fs, TFS_ROOT_INO, name);
	}
	tfs_unlink(fs, TFS_ROOT_INO, "old");
	assert_int_equal(tfs_syncfs(fs), 0);
	put_file(fs, "big", 16 * MIB, 50);
	rebuild_set_rate(fs, 24ull * MIB);	/* ~5 s for the whole device */
	/* img[2] is the member the replace test retired: a twinfs, so only
	 * with force. */
	assert_int_equal(rebuild_replace(fs, img[1], img[2], false, err, sizeof(err)), -EEXIST);
	assert_non_null(strstr(err, "--force"));
	assert_int_equal(rebuild_replace(fs, img[1], img[2], true, err, sizeof(err)), 0);
	do {
		usleep(10000);
		rebuild_get_status(fs, &st);
	} while (st.state == RB_RUNNING && st.regions_done < st.regions_total / 3);
	assert_int_equal(st.state, RB_RUNNING);
	/* Read first: the checkpoint records this cursor or a later one. */
	done = atomic_load(&fs->mirror.sync_cursor);
	assert_int_equal(tfs_checkpoint(fs), 0);
	assert_true(done > 0);
	tfs_abandon(fs);

	/* The new image alone is not current. */
	{
		const char *d1[1] = { img[2] };

		assert_int_not_equal(try_mount(d1, 1, true, NULL, &fs, err, sizeof(err)), 0);
		assert_non_null(strstr(err, "did not finish"));
	}
	fs = mount_devs(img[0], img[2], false, NULL);
	assert_int_equal(atomic_load(&fs->mirror.state[1]), MDEV_REBUILDING);
	assert_true(atomic_load(&fs->mirror.sync_cursor) >= done);
	put_file(fs, "after", MIB, 51);
	assert_int_equal(wait_done(fs), RB_DONE);
	rebuild_get_status(fs, &st);
	assert_int_equal(st.kind, SUPER_RB_REPLACE);
	assert_int_equal(atomic_load(&fs->mirror.state[1]), MDEV_OK);
	assert_int_equal(tfs_unmount(fs), 0);
	{
		const char *names[] = { "big", "after" };
		size_t lens[] = { 16 * MIB, MIB };
		unsigned seeds[] = { 50, 51 };

		check_alone(img[2], names, lens, seeds, 2);
		check_alone(img[0], names, lens, seeds, 2);
	}
}

/* A missing device's path that now holds something else (another twinfs,
 * a symlink to the other member): a rebuild named by slot number or by
 * path refuses it, and the device stays missing.  The genuine member back,
 * but with blocks outside the regions it missed overwritten: the rebuild
 * verifies every block on it, rewrites the foreign ones, and the image
 * alone then holds every file. */
static void test_foreign_target(void **state)
{
	char f[2][TL_PATH_MAX], other[TL_PATH_MAX], away[TL_PATH_MAX + 8], err[512] = "";
	const char *d[2], *od[1] = { other };
	const char *names[] = { "old", "new" };
	size_t lens[] = { 8 * MIB, MIB };
	unsigned seeds[] = { 70, 71 };
	struct rebuild_status st;
	struct tfs *fs;
	uint8_t *junk;
	int fd;

	tl_mk_images(f, d, 2, "tfs_rbforeign", IMG_SIZE);
	tl_format(d, 2, NULL);
	fs = mount_devs(f[0], f[1], false, NULL);
	put_file(fs, names[0], lens[0], seeds[0]);
	assert_int_equal(tfs_unmount(fs), 0);

	snprintf(away, sizeof(away), "%s.away", f[1]);
	assert_int_equal(rename(f[1], away), 0);
	fs = mount_devs(f[0], f[1], true, NULL);
	put_file(fs, names[1], lens[1], seeds[1]);
	tl_mk_image(other, "tfs_rbforeign", IMG_SIZE);
	tl_format(od, 1, NULL);
	assert_int_equal(rename(other, f[1]), 0);
	assert_int_equal(rebuild_start(fs, "1", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "not a device of this twinfs"));
	assert_int_equal(rebuild_start(fs, f[1], err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, f[1]));
	assert_int_equal(atomic_load(&fs->mirror.state[1]), MDEV_MISSING);
	assert_int_equal(rebuild_start(fs, "5", err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "no device slot 5"));
	assert_int_equal(unlink(f[1]), 0);
	assert_int_equal(symlink(f[0], f[1]), 0);
	assert_int_equal(rebuild_start(fs, "1", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "is device 0"));
	assert_int_equal(atomic_load(&fs->mirror.state[1]), MDEV_MISSING);
	assert_int_equal(tfs_unmount(fs), 0);

	/* Past the log (16 MiB here): where "old" lives, a clean region for
	 * the rebuild. */
	assert_int_equal(unlink(f[1]), 0);
	assert_int_equal(rename(away, f[1]), 0);
	junk = malloc(32 * MIB);
	assert_non_null(junk);
	tl_pattern(junk, 32 * MIB, 99);
	fd = open(f[1], O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, junk, 32 * MIB, 17 * MIB), 32 * MIB);
	close(fd);
	free(junk);
	fs = mount_devs(f[0], f[1], true, NULL);
	assert_int_equal(atomic_load(&fs->mirror.state[1]), MDEV_STALE);
	assert_int_equal(rebuild_start(fs, "1", err, sizeof(err)), 0);
	assert_int_equal(wait_done(fs), RB_DONE);
	rebuild_get_status(fs, &st);
	assert_true(st.fixed_blocks >= 1024);
	assert_true(st.verified_blocks >= 2048 + 256);
	assert_int_equal(atomic_load(&fs->mirror.state[1]), MDEV_OK);
	assert_int_equal(tfs_unmount(fs), 0);
	check_alone(f[1], names, lens, seeds, 2);
	tl_rm_images(f, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_missing_at_mount),
		cmocka_unit_test(test_fail_mid_write),
		cmocka_unit_test(test_fail_then_crash),
		cmocka_unit_test(test_flush_fail_then_crash),
		cmocka_unit_test(test_rebuild_counts),
		cmocka_unit_test(test_replace_under_writer),
		cmocka_unit_test(test_crash_mid_rebuild),
		cmocka_unit_test(test_foreign_target),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
