// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: fsck on temp images: clean fs, hand-corrupted structures (through meta transactions), bad data/checkpoint/superblock copies, stale device, not-twinfs and in-use devices; -n reports (4), -y fixes (1), a second run is clean (0). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "dir.h"
#include "fs_i.h"
#include "inode_i.h"
#include "fsck.h"
#include "testlib.h"

#define IMG_SIZE (96ull << 20)
#define NIMG 2

static char img[NIMG][TL_PATH_MAX];
static const char *devs[NIMG];

static int setup(void **state)
{
	tl_mk_images(img, devs, NIMG, "tfs_fsck", IMG_SIZE);
	return 0;
}

static int teardown(void **state)
{
	tl_rm_images(img, NIMG);
	return 0;
}

static struct tfs *mount_n(unsigned n)
{
	struct tfs_opts o;

	tl_mount_opts(&o, devs, n);
	o.degraded = n < NIMG;
	return tl_mount(&o);
}

static struct tfs *format_mount(void)
{
	tl_format(devs, NIMG, NULL);
	return mount_n(NIMG);
}

/* Runs fsck; *out (if not NULL) gets the report, to free. */
static int run_fsck(int mode, char **out)
{
	return tl_fsck(devs, NIMG, mode, tl_backend(), out);
}

/* -n finds @want (exit 4), -y fixes (exit 1), then -n and -y are clean. */
static void check_fixed(const char *want)
{
	char *out;

	assert_int_equal(run_fsck(FSCK_CHECK, &out), FSCK_EXIT_UNCORRECTED);
	if (!strstr(out, want))
		fail_msg("fsck -n output lacks \"%s\":\n%s", want, out);
	free(out);
	assert_int_equal(run_fsck(FSCK_REPAIR, &out), FSCK_EXIT_FIXED);
	assert_non_null(strstr(out, want));
	free(out);
	assert_int_equal(run_fsck(FSCK_CHECK, &out), FSCK_EXIT_OK);
	free(out);
	assert_int_equal(run_fsck(FSCK_REPAIR, NULL), FSCK_EXIT_OK);
}

static uint64_t put_file(struct tfs *fs, uint64_t parent, const char *name, size_t len,
			 unsigned seed)
{
	struct tfs_cred c = { .uid = getuid(), .gid = getgid() };
	struct tfs_file *f = NULL;
	struct stat st;
	uint8_t *buf = malloc(len ? len : 1);

	assert_non_null(buf);
	tl_pattern(buf, len, seed);
	assert_int_equal(tfs_create(fs, parent, name, S_IFREG | 0644, O_RDWR | O_TRUNC, &c,
				    &st, &f), 0);
	assert_int_equal(tfs_pwrite(f, buf, len, 0, 0), (ssize_t)len);
	assert_int_equal(tfs_release(f), 0);
	tfs_forget(fs, st.st_ino, 1);
	free(buf);
	return st.st_ino;
}

static void check_file(struct tfs *fs, uint64_t parent, const char *name, size_t len,
		       unsigned seed)
{
	struct tfs_file *f = NULL;
	struct stat st;
	uint8_t *want = malloc(len), *got = malloc(len + 4096);

	tl_pattern(want, len, seed);
	assert_int_equal(tfs_lookup(fs, parent, name, &st), 0);
	assert_int_equal(tfs_open(fs, st.st_ino, O_RDONLY, &f), 0);
	assert_int_equal(tfs_pread(f, got, len + 4096, 0), (ssize_t)len);
	assert_memory_equal(got, want, len);
	assert_int_equal(tfs_release(f), 0);
	tfs_forget(fs, st.st_ino, 1);
	free(want);
	free(got);
}

/* A small tree: /d/sub, /d/f1 (3 blocks), /f2 (+ hard link /d/f2link),
 * /sym, /d/clone sharing f1's blocks (reflink). */
static void populate(struct tfs *fs, uint64_t *f1, uint64_t *f2)
{
	struct tfs_cred c = { .uid = getuid(), .gid = getgid() };
	struct tfs_file *in = NULL, *outf = NULL;
	struct stat st;
	uint64_t d;

	assert_int_equal(tfs_mkdir(fs, TFS_ROOT_INO, "d", 0755, &c, &st), 0);
	d = st.st_ino;
	assert_int_equal(tfs_mkdir(fs, d, "sub", 0755, &c, &st), 0);
	*f1 = put_file(fs, d, "f1", 3 * 4096, 1);
	*f2 = put_file(fs, TFS_ROOT_INO, "f2", 5000, 2);
	assert_int_equal(tfs_link(fs, *f2, d, "f2link", &st), 0);
	assert_int_equal(tfs_symlink(fs, TFS_ROOT_INO, "sym", "d/f1", &c, &st), 0);
	assert_int_equal(tfs_open(fs, *f1, O_RDONLY, &in), 0);
	assert_int_equal(tfs_create(fs, d, "clone", S_IFREG | 0644, O_RDWR, &c, &st, &outf), 0);
	assert_int_equal(tfs_copy_range(in, 0, outf, 0, 3 * 4096), 3 * 4096);
	tfs_release(in);
	tfs_release(outf);
}

static uint64_t lookup_ino(struct tfs *fs, uint64_t parent, const char *name)
{
	struct stat st;

	assert_int_equal(tfs_lookup(fs, parent, name, &st), 0);
	tfs_forget(fs, st.st_ino, 1);
	return st.st_ino;
}

static void commit_rec(struct tfs *fs, const struct log_rec *r)
{
	struct meta_tx tx;

	meta_tx_init(&tx);
	assert_int_equal(meta_tx_add(&tx, r), 0);
	assert_int_equal(meta_tx_commit(fs, &tx, NULL), 0);
	meta_tx_free(&tx);
}

static void commit_inode(struct tfs *fs, uint64_t ino, uint32_t nlink, uint64_t parent)
{
	struct tfs_inode *ip = fs_iget(fs, ino);
	struct log_rec r;

	assert_non_null(ip);
	fs_iencode(ip, &r);
	r.inode.nlink = nlink;
	r.inode.parent = parent;
	commit_rec(fs, &r);
}

static void finish(struct tfs *fs)
{
	assert_int_equal(tfs_checkpoint(fs), 0);
	assert_int_equal(tfs_unmount(fs), 0);
}

/* A crash after a checkpoint: nothing of the unmount happens (open files
 * unlinked stay orphans). */
static void crash(struct tfs *fs)
{
	assert_int_equal(tfs_checkpoint(fs), 0);
	tfs_abandon(fs);
}

static uint64_t phys_of(struct tfs *fs, uint64_t ino, uint64_t fblk)
{
	struct extent_ent e;

	extent_get(&fs_iget(fs, ino)->map, fblk, &e);
	assert_true(e.phys != 0);
	return EXTENT_PHYS(e.phys);
}

static void test_clean(void **state)
{
	struct tfs *fs = format_mount();
	uint64_t f1, f2;
	char *out;

	populate(fs, &f1, &f2);
	assert_int_equal(tfs_unmount(fs), 0);
	assert_int_equal(run_fsck(FSCK_CHECK, &out), FSCK_EXIT_OK);
	assert_non_null(strstr(out, "0 errors found"));
	assert_non_null(strstr(out, "(3 shared)"));	/* the reflinked blocks */
	free(out);
	assert_int_equal(run_fsck(FSCK_REPAIR, NULL), FSCK_EXIT_OK);
	assert_int_equal(run_fsck(FSCK_PREEN, NULL), FSCK_EXIT_OK);
}

static void test_link_count(void **state)
{
	struct tfs *fs = format_mount();
	uint64_t f1, f2;

	populate(fs, &f1, &f2);
	commit_inode(fs, f2, 5, 0);
	finish(fs);
	check_fixed("/f2: link count 5, should be 2");
	fs = mount_n(NIMG);
	assert_int_equal(fs_iget(fs, f2)->nlink, 2);
	tfs_unmount(fs);
}

static void test_dangling_entry(void **state)
{
	struct tfs *fs = format_mount();
	struct log_rec r = { .type = LR_DENT_SET };
	uint64_t f1, f2, ino;

	populate(fs, &f1, &f2);
	r.dent.parent = TFS_ROOT_INO;
	r.dent.ino = 987654;
	r.dent.name = "ghost";
	r.dent.namelen = 5;
	commit_rec(fs, &r);
	finish(fs);
	check_fixed("/ghost: entry (inode 987654) names a missing inode");
	fs = mount_n(NIMG);
	assert_int_equal(dir_lookup(fs_iget(fs, TFS_ROOT_INO)->dir, "ghost", 5, &ino), -ENOENT);
	tfs_unmount(fs);
}

static void test_unreachable_and_orphan(void **state)
{
	struct tfs *fs = format_mount();
	struct log_rec r;
	uint64_t f1, f2, lost, orphan, lf, ino;
	char name[32];

	populate(fs, &f1, &f2);
	lost = fs_ialloc(fs);
	orphan = fs_ialloc(fs);
	fs_iencode(fs_iget(fs, f2), &r);
	r.inode.ino = lost;
	r.inode.nlink = 1;
	commit_rec(fs, &r);
	r.inode.ino = orphan;
	r.inode.nlink = 0;
	commit_rec(fs, &r);
	crash(fs);

	check_fixed("unreachable file inode");
	fs = mount_n(NIMG);
	assert_null(fs_iget(fs, orphan));
	assert_int_equal(dir_lookup(fs_iget(fs, TFS_ROOT_INO)->dir, "lost+found", 10, &lf), 0);
	snprintf(name, sizeof(name), "#%llu", (unsigned long long)lost);
	assert_int_equal(dir_lookup(fs_iget(fs, lf)->dir, name, strlen(name), &ino), 0);
	assert_int_equal(ino, lost);
	assert_int_equal(fs_iget(fs, TFS_ROOT_INO)->nlink, 4);	/* ., d, lost+found */
	tfs_unmount(fs);
}

static void test_orphan_preen(void **state)
{
	struct tfs *fs = format_mount();
	struct log_rec r;
	uint64_t f1, f2, orphan;
	char *out;

	populate(fs, &f1, &f2);
	orphan = fs_ialloc(fs);
	fs_iencode(fs_iget(fs, f2), &r);
	r.inode.ino = orphan;
	r.inode.nlink = 0;
	commit_rec(fs, &r);
	crash(fs);
	/* An orphan is what a crash leaves: -n notes it without calling it an
	 * error (exit 0), the next mount or -p reclaims it. */
	assert_int_equal(run_fsck(FSCK_CHECK, &out), FSCK_EXIT_OK);
	assert_non_null(strstr(out, "note: orphan file inode"));
	assert_non_null(strstr(out, "0 errors found"));
	free(out);
	assert_int_equal(run_fsck(FSCK_PREEN, &out), FSCK_EXIT_FIXED);
	assert_non_null(strstr(out, "orphan file inode"));
	free(out);
	assert_int_equal(run_fsck(FSCK_CHECK, NULL), FSCK_EXIT_OK);
}

static char mount_log[4096];

static void keep_log(int level, const char *msg)
{
	size_t n = strlen(mount_log);

	snprintf(mount_log + n, sizeof(mount_log) - n, "%s\n", msg);
}

/* Files deleted while open: a crash leaves them as orphans, which fsck -n
 * only notes (exit 0) and the next mount reclaims, saying so once.  A
 * clean unmount leaves none, whether their handles were released (the
 * kernel may still hold a reference) or never were. */
static void test_open_unlinked(void **state)
{
	struct tfs_cred c = { .uid = getuid(), .gid = getgid() };
	enum { NF = 300 };
	struct tfs_file **f = calloc(NF, sizeof(*f));
	uint8_t buf[4096];
	char *out, name[32];
	struct stat st;
	struct tfs *fs;

	assert_non_null(f);
	memset(buf, 0x5a, sizeof(buf));
	for (int round = 0; round < 2; round++) {
		bool clean = round == 1;

		fs = format_mount();
		for (int i = 0; i < NF; i++) {
			snprintf(name, sizeof(name), "gone%d", i);
			assert_int_equal(tfs_create(fs, TFS_ROOT_INO, name, S_IFREG | 0644,
						    O_RDWR, &c, &st, &f[i]), 0);
			assert_int_equal(tfs_pwrite(f[i], buf, sizeof(buf), 0, 0),
					 (ssize_t)sizeof(buf));
			assert_int_equal(tfs_unlink(fs, TFS_ROOT_INO, name), 0);
		}
		/* half closed before the end (the kernel never sent their
		 * forget), half still open */
		for (int i = 0; i < NF / 2; i++)
			assert_int_equal(tfs_release(f[i]), 0);
		if (clean) {
			assert_int_equal(tfs_unmount(fs), 0);
		} else {
			assert_int_equal(tfs_syncfs(fs), 0);
			crash(fs);
		}
		/* What the process would have lost: the open files and, for
		 * the clean round, their inode handles, the last reference
		 * to inodes the unmount deleted (a crash tears the table
		 * down with every inode still in it). */
		for (int i = NF / 2; i < NF; i++) {
			if (clean)
				inode_put(NULL, f[i]->ip);
			free(f[i]);
		}

		assert_int_equal(run_fsck(FSCK_CHECK, &out), FSCK_EXIT_OK);
		if (clean && strstr(out, "orphan"))
			fail_msg("a clean unmount left orphans:\n%.2000s", out);
		if (!clean && !strstr(out, "note: orphan file inode"))
			fail_msg("fsck -n does not note the orphans:\n%.2000s", out);
		free(out);

		mount_log[0] = '\0';
		tfs_set_log_fn(keep_log);
		fs = mount_n(NIMG);
		tfs_set_log_fn(NULL);
		if (!clean && !strstr(mount_log, "reclaimed 300 orphan inodes (1228800 bytes)"))
			fail_msg("mount did not say what it reclaimed:\n%s", mount_log);
		if (clean && strstr(mount_log, "orphan"))
			fail_msg("orphans after a clean unmount:\n%s", mount_log);
		assert_int_equal(tfs_unmount(fs), 0);
		assert_int_equal(run_fsck(FSCK_CHECK, NULL), FSCK_EXIT_OK);
	}
	free(f);
}

static void test_extent_outside(void **state)
{
	struct tfs *fs = format_mount();
	struct log_rec r = { .type = LR_EXT_SET };
	uint64_t f1, f2, csums[2] = { 1, 2 };
	char *out;

	populate(fs, &f1, &f2);
	r.ext.ino = f2;
	r.ext.fblk = 7;
	r.ext.phys = fs->sb.total_blocks + 100;
	r.ext.n = 2;
	r.ext.csums = csums;
	commit_rec(fs, &r);
	r.ext.fblk = 9;
	r.ext.phys = 3;	/* in the reserved blocks after the superblocks */
	r.ext.n = 1;
	commit_rec(fs, &r);
	finish(fs);
	/* Such metadata cannot even be mounted. */
	{
		struct tfs_opts o = { .devs = devs, .ndevs = NIMG, .backend = tl_backend() };
		char err[256];

		assert_int_equal(tfs_mount(&o, &fs, err, sizeof(err)), -EUCLEAN);
	}
	/* -p does not guess: it leaves the unexpected for -y. */
	assert_int_equal(run_fsck(FSCK_PREEN, &out), FSCK_EXIT_UNCORRECTED);
	assert_non_null(strstr(out, "UNEXPECTED INCONSISTENCY"));
	free(out);
	assert_int_equal(run_fsck(FSCK_CHECK, &out), FSCK_EXIT_UNCORRECTED);
	assert_non_null(strstr(out, "/f2: offset 36864: 1 block(s) at 3 outside the data area"));
	free(out);
	check_fixed("/f2: offset 28672: 2 block(s)");
	fs = mount_n(NIMG);
	check_file(fs, TFS_ROOT_INO, "f2", 5000, 2);
	tfs_unmount(fs);
}

static void test_crosslink(void **state)
{
	struct tfs *fs = format_mount();
	struct log_rec r = { .type = LR_EXT_SET };
	uint64_t f1, f2, csum = 0x1234;
	struct extent_ent e;

	populate(fs, &f1, &f2);
	/* f2's second block points at f1's first, with a checksum of its own. */
	r.ext.ino = f2;
	r.ext.fblk = 1;
	r.ext.phys = phys_of(fs, f1, 0);
	r.ext.n = 1;
	r.ext.csums = &csum;
	commit_rec(fs, &r);
	finish(fs);
	check_fixed("/f2: offset 4096: block");
	fs = mount_n(NIMG);
	extent_get(&fs_iget(fs, f2)->map, 1, &e);
	assert_int_equal(e.phys, 0);		/* the wrong reference went */
	check_file(fs, lookup_ino(fs, TFS_ROOT_INO, "d"), "f1", 3 * 4096, 1);
	tfs_unmount(fs);
}

static void test_dotdot(void **state)
{
	struct tfs *fs = format_mount();
	uint64_t f1, f2, d, sub;

	populate(fs, &f1, &f2);
	d = lookup_ino(fs, TFS_ROOT_INO, "d");
	sub = lookup_ino(fs, d, "sub");
	commit_inode(fs, sub, 2, TFS_ROOT_INO);
	finish(fs);
	check_fixed("/d/sub: \"..\" names inode 1");
	fs = mount_n(NIMG);
	assert_int_equal(fs_iget(fs, sub)->parent, d);
	tfs_unmount(fs);
}

/* Corrupt raw blocks in an image. */
static void garble(const char *path, uint64_t blk, unsigned n)
{
	uint8_t buf[4096];
	int fd = open(path, O_RDWR);

	assert_true(fd >= 0);
	for (unsigned i = 0; i < n; i++) {
		memset(buf, 0xa5 + i, sizeof(buf));
		assert_int_equal(pwrite(fd, buf, sizeof(buf), (off_t)((blk + i) * 4096)), 4096);
	}
	close(fd);
}

static void read_raw(const char *path, uint64_t blk, void *buf)
{
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, buf, 4096, (off_t)(blk * 4096)), 4096);
	close(fd);
}

static void test_data_one_copy(void **state)
{
	struct tfs *fs = format_mount();
	uint64_t f1, f2, p[3];
	uint8_t a[4096], b[4096];
	char *out;

	populate(fs, &f1, &f2);
	for (int i = 0; i < 3; i++)
		p[i] = phys_of(fs, f1, (uint64_t)i);
	assert_int_equal(tfs_unmount(fs), 0);
	garble(img[0], p[1], 1);
	garble(img[1], p[2], 1);

	assert_int_equal(run_fsck(FSCK_CHECK, &out), FSCK_EXIT_UNCORRECTED);
	/* f1 or its clone (same blocks) is named, with the offset and the image */
	assert_true(strstr(out, "/d/f1: offset 4096") || strstr(out, "/d/clone: offset 4096"));
	assert_true(strstr(out, "offset 8192"));
	assert_non_null(strstr(out, img[0]));
	free(out);
	assert_int_equal(run_fsck(FSCK_PREEN, &out), FSCK_EXIT_FIXED);
	assert_non_null(strstr(out, "rewritten from a good copy"));
	free(out);
	read_raw(img[0], p[1], a);
	read_raw(img[1], p[1], b);
	assert_memory_equal(a, b, 4096);
	read_raw(img[0], p[2], a);
	read_raw(img[1], p[2], b);
	assert_memory_equal(a, b, 4096);
	assert_int_equal(run_fsck(FSCK_CHECK, NULL), FSCK_EXIT_OK);
	fs = mount_n(NIMG);
	check_file(fs, lookup_ino(fs, TFS_ROOT_INO, "d"), "f1", 3 * 4096, 1);
	check_file(fs, lookup_ino(fs, TFS_ROOT_INO, "d"), "clone", 3 * 4096, 1);
	/* the repairs were counted on the device that had the bad copy */
	assert_int_equal(fs->sb.stats[0].repaired, 1);
	assert_int_equal(fs->sb.stats[1].repaired, 1);
	tfs_unmount(fs);
}

static void test_data_both_copies(void **state)
{
	struct tfs *fs = format_mount();
	uint64_t f1, f2, p;
	char *out;

	populate(fs, &f1, &f2);
	p = phys_of(fs, f2, 1);
	assert_int_equal(tfs_unmount(fs), 0);
	garble(img[0], p, 1);
	garble(img[1], p, 1);
	assert_int_equal(run_fsck(FSCK_CHECK, &out), FSCK_EXIT_UNCORRECTED);
	assert_non_null(strstr(out, "/f2: offset 4096"));
	assert_non_null(strstr(out, "unrecoverable"));
	free(out);
	assert_int_equal(run_fsck(FSCK_REPAIR, &out), FSCK_EXIT_UNCORRECTED);
	assert_non_null(strstr(out, "/f2: offset 4096"));
	free(out);
}

static void test_metadata_copies(void **state)
{
	struct tfs *fs = format_mount();
	uint64_t f1, f2, ckpt;
	char *out;

	populate(fs, &f1, &f2);
	assert_int_equal(tfs_unmount(fs), 0);
	fs = mount_n(NIMG);
	ckpt = fs->sb.ckpt_start;
	tfs_abandon(fs);	/* superblock still points at that checkpoint */
	garble(img[1], ckpt + 1, 1);	/* first payload block */
	garble(img[0], 0, 1);		/* superblock slot 0 */
	assert_int_equal(run_fsck(FSCK_CHECK, &out), FSCK_EXIT_UNCORRECTED);
	assert_non_null(strstr(out, "checkpoint blocks damaged"));
	assert_non_null(strstr(out, "superblock slot 0"));
	free(out);
	assert_int_equal(run_fsck(FSCK_PREEN, NULL), FSCK_EXIT_FIXED);
	assert_int_equal(run_fsck(FSCK_CHECK, NULL), FSCK_EXIT_OK);
}

static void test_stale_device(void **state)
{
	struct tfs *fs = format_mount();
	uint64_t f1, f2;

	populate(fs, &f1, &f2);
	assert_int_equal(tfs_unmount(fs), 0);
	fs = mount_n(1);	/* second device missing: it goes stale */
	put_file(fs, TFS_ROOT_INO, "late", 64 * 1024, 9);
	assert_int_equal(tfs_unmount(fs), 0);

	check_fixed("stale");
	fs = mount_n(NIMG);	/* not degraded: both in sync again */
	check_file(fs, TFS_ROOT_INO, "late", 64 * 1024, 9);
	tfs_unmount(fs);
	/* and the second device alone holds everything */
	devs[0] = img[1];
	fs = mount_n(1);
	check_file(fs, TFS_ROOT_INO, "late", 64 * 1024, 9);
	tfs_abandon(fs);
	devs[0] = img[0];
}

static void test_operational(void **state)
{
	struct tfs *fs;
	char *out;

	/* not formatted */
	assert_int_equal(run_fsck(FSCK_CHECK, &out), FSCK_EXIT_OPERROR);
	assert_non_null(strstr(out, "not a twinfs device"));
	free(out);
	fs = format_mount();
	assert_int_equal(run_fsck(FSCK_CHECK, &out), FSCK_EXIT_OPERROR);
	assert_non_null(strstr(out, "in use (mounted?)"));
	free(out);
	assert_int_equal(run_fsck(FSCK_REPAIR, NULL), FSCK_EXIT_OPERROR);
	tfs_unmount(fs);
	assert_int_equal(run_fsck(FSCK_CHECK, NULL), FSCK_EXIT_OK);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_clean, setup, teardown),
		cmocka_unit_test_setup_teardown(test_link_count, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dangling_entry, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unreachable_and_orphan, setup, teardown),
		cmocka_unit_test_setup_teardown(test_orphan_preen, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_unlinked, setup, teardown),
		cmocka_unit_test_setup_teardown(test_extent_outside, setup, teardown),
		cmocka_unit_test_setup_teardown(test_crosslink, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dotdot, setup, teardown),
		cmocka_unit_test_setup_teardown(test_data_one_copy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_data_both_copies, setup, teardown),
		cmocka_unit_test_setup_teardown(test_metadata_copies, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stale_device, setup, teardown),
		cmocka_unit_test_setup_teardown(test_operational, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
