// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: scrub finds and repairs bad copies (offline bit flips, zeroed blocks, checkpoint table and payload, online through the fault backend), names unrecoverable blocks by path and offset, counts per device across remounts, logs rate-limited, resumes after a remount from its cursor, cancels; ctl replies and the JSON codec. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "ctl.h"
#include "fs_i.h"
#include "inode_i.h"
#include "json.h"
#include "scrub.h"
#include "testlib.h"
#include "tlog.h"

#define IMG_SIZE (128ull << 20)
#define NIMG 2
#define BS 4096u

static char img[NIMG][TL_PATH_MAX];
static const char *devs[NIMG];

/* ---- log capture ---- */

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char log_lines[256][512];
static unsigned nlog;

static void capture(int level, const char *msg)
{
	pthread_mutex_lock(&log_mu);
	if (nlog < 256)
		snprintf(log_lines[nlog++], sizeof(log_lines[0]), "%s", msg);
	pthread_mutex_unlock(&log_mu);
}

static unsigned log_count(const char *a, const char *b)
{
	unsigned n = 0;

	pthread_mutex_lock(&log_mu);
	for (unsigned i = 0; i < nlog; i++)
		if (strstr(log_lines[i], a) && (!b || strstr(log_lines[i], b)))
			n++;
	pthread_mutex_unlock(&log_mu);
	return n;
}

/* ---- fixtures ---- */

static int setup(void **state)
{
	tl_mk_images(img, devs, NIMG, "tfs_scrub", IMG_SIZE);
	tfs_set_log_fn(capture);
	nlog = 0;
	return 0;
}

static int teardown(void **state)
{
	tl_rm_images(img, NIMG);
	tfs_set_log_fn(NULL);
	return 0;
}

static void format2(void)
{
	tl_format(devs, NIMG, NULL);
}

static struct tfs *mount_fault(const char *fault)
{
	struct tfs_opts o;

	tl_mount_opts(&o, devs, NIMG);
	o.fault = fault;
	return tl_mount(&o);
}

static struct tfs *mount2(void)
{
	return mount_fault(NULL);
}

/* Device index of image i (format numbers them in order; check anyway). */
static unsigned dev_of(struct tfs *fs, int i)
{
	for (unsigned d = 0; d < fs->mirror.ndevs; d++)
		if (fs->mirror.devs[d] && !strcmp(fs->mirror.devs[d]->path, img[i]))
			return d;
	fail_msg("image %s not mounted", img[i]);
	return 0;
}

static uint64_t put_file(struct tfs *fs, uint64_t parent, const char *name, size_t len,
			 unsigned seed)
{
	struct tfs_cred c = { .uid = getuid(), .gid = getgid() };
	struct tfs_file *f = NULL;
	struct stat st;
	uint8_t *buf = malloc(len);

	assert_non_null(buf);
	tl_pattern(buf, len, seed);
	assert_int_equal(tfs_create(fs, parent, name, S_IFREG | 0644, O_RDWR | O_TRUNC, &c,
				    &st, &f), 0);
	for (size_t off = 0; off < len; off += TFS_IO_MAX) {
		size_t k = len - off < TFS_IO_MAX ? len - off : TFS_IO_MAX;

		assert_int_equal(tfs_pwrite(f, buf + off, k, (off_t)off, 0), (ssize_t)k);
	}
	assert_int_equal(tfs_release(f), 0);
	tfs_forget(fs, st.st_ino, 1);
	free(buf);
	return st.st_ino;
}

static uint64_t mkdir1(struct tfs *fs, uint64_t parent, const char *name)
{
	struct tfs_cred c = { .uid = getuid(), .gid = getgid() };
	struct stat st;

	assert_int_equal(tfs_mkdir(fs, parent, name, 0755, &c, &st), 0);
	tfs_forget(fs, st.st_ino, 1);
	return st.st_ino;
}

static uint64_t phys_of(struct tfs *fs, uint64_t ino, uint64_t fblk)
{
	struct tfs_inode *ip = fs_iget(fs, ino);
	struct extent_ent e;

	assert_non_null(ip);
	extent_get(&ip->map, fblk, &e);
	assert_true(e.phys != 0);
	return EXTENT_PHYS(e.phys);
}

enum { C_FLIP, C_ZERO, C_GARBAGE };

static void corrupt(int i, uint64_t blk, int how)
{
	uint8_t b[BS];
	int fd = open(img[i], O_RDWR);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, b, BS, (off_t)(blk * BS)), BS);
	if (how == C_FLIP)
		b[1234] ^= 0x10;
	else if (how == C_ZERO)
		memset(b, 0, BS);
	else
		for (unsigned k = 0; k < BS; k++)
			b[k] = (uint8_t)(rand() ^ b[k] ^ 0x5a);
	assert_int_equal(pwrite(fd, b, BS, (off_t)(blk * BS)), BS);
	assert_int_equal(fsync(fd), 0);
	close(fd);
}

static bool copies_equal(uint64_t blk)
{
	uint8_t a[BS], b[BS];
	int fa = open(img[0], O_RDONLY), fb = open(img[1], O_RDONLY);

	assert_true(fa >= 0 && fb >= 0);
	assert_int_equal(pread(fa, a, BS, (off_t)(blk * BS)), BS);
	assert_int_equal(pread(fb, b, BS, (off_t)(blk * BS)), BS);
	close(fa);
	close(fb);
	return memcmp(a, b, BS) == 0;
}

static struct scrub_status scrub_run(struct tfs *fs)
{
	struct scrub_status st;

	assert_int_equal(scrub_start(fs, 0), 0);
	assert_int_equal(scrub_wait(fs), 0);
	assert_int_equal(scrub_get_status(fs, &st), 0);
	assert_int_equal(st.state, SCRUB_FINISHED);
	return st;
}

struct ctr_snap {
	uint64_t csum, rep, unrec, rerr;
};

static struct ctr_snap ctr(struct tfs *fs, unsigned d)
{
	struct ctr_snap s = {
		atomic_load(&fs->mirror.ctr[d].csum_err), atomic_load(&fs->mirror.ctr[d].repaired),
		atomic_load(&fs->mirror.ctr[d].unrecoverable),
		atomic_load(&fs->mirror.ctr[d].read_err),
	};
	return s;
}

/* ---- offline corruption ---- */

static void test_offline_repair(void **state)
{
	struct tfs *fs;
	uint64_t ia, ib, ic, dir;
	uint64_t pa[3], pb[6], pc, pboth, ck_table, ck_pay;
	unsigned d0, d1;
	struct ctr_snap c0, c1, n0, n1;
	struct scrub_status st;
	uint64_t bino, boff;
	char path[256];
	uint8_t *buf;
	struct tfs_file *f;

	format2();
	fs = mount2();
	dir = mkdir1(fs, TFS_ROOT_INO, "d");
	ia = put_file(fs, TFS_ROOT_INO, "a", 1048576 + 123, 1);
	ib = put_file(fs, dir, "b", 300 * 1024, 2);
	ic = put_file(fs, dir, "c", 64 * 1024, 3);
	pa[0] = phys_of(fs, ia, 0);
	pa[1] = phys_of(fs, ia, 100);
	pa[2] = phys_of(fs, ia, 256);
	for (int k = 0; k < 5; k++)
		pb[k] = phys_of(fs, ib, 10 + (uint64_t)k);
	pboth = phys_of(fs, ib, 40);
	pc = phys_of(fs, ic, 3);
	assert_int_equal(tfs_unmount(fs), 0);

	/* Image 1: a flipped bit, a zeroed block, garbage in the tail block,
	 * five zeroed blocks; image 0: one flip; both: one block. */
	corrupt(1, pa[0], C_FLIP);
	corrupt(1, pa[1], C_ZERO);
	corrupt(1, pa[2], C_GARBAGE);
	for (int k = 0; k < 5; k++)
		corrupt(1, pb[k], C_ZERO);
	corrupt(0, pc, C_FLIP);
	corrupt(0, pboth, C_FLIP);
	corrupt(1, pboth, C_ZERO);

	fs = mount2();
	d0 = dev_of(fs, 0);
	d1 = dev_of(fs, 1);
	/* The current checkpoint, online: its table and a payload block. */
	ck_table = fs->sb.ckpt_start;
	ck_pay = fs->sb.ckpt_start + 1;
	assert_true(fs->sb.ckpt_blocks >= 2);
	corrupt(1, ck_table, C_FLIP);
	corrupt(1, ck_pay, C_ZERO);

	c0 = ctr(fs, d0);
	c1 = ctr(fs, d1);
	nlog = 0;
	st = scrub_run(fs);
	n0 = ctr(fs, d0);
	n1 = ctr(fs, d1);

	/* dev 1: 3 + 5 data blocks + the table + the payload block repaired,
	 * plus its bad copy of the both-bad block. */
	assert_int_equal(n1.csum - c1.csum, 11);
	assert_int_equal(n1.rep - c1.rep, 10);
	assert_int_equal(n0.csum - c0.csum, 2);
	assert_int_equal(n0.rep - c0.rep, 1);
	assert_int_equal((n0.unrec + n1.unrec) - (c0.unrec + c1.unrec), 1);
	assert_int_equal(st.csum_err, 13);
	assert_int_equal(st.repaired, 11);
	assert_int_equal(st.unrecoverable, 1);
	assert_int_equal(st.read_err, 0);
	assert_true(st.bytes_done >= st.bytes_total && st.bytes_total > 0);

	/* Named by path and offset. */
	assert_int_equal(st.nbad, 1);
	assert_int_equal(scrub_get_bad(fs, 0, &bino, &boff, path, sizeof(path)), 0);
	assert_int_equal(bino, ib);
	assert_int_equal(boff, 40 * BS);
	assert_string_equal(path, "/d/b");

	/* Repaired on disk, byte for byte. */
	for (int k = 0; k < 3; k++)
		assert_true(copies_equal(pa[k]));
	for (int k = 0; k < 5; k++)
		assert_true(copies_equal(pb[k]));
	assert_true(copies_equal(pc));
	assert_true(copies_equal(ck_table));
	assert_true(copies_equal(ck_pay));
	assert_false(copies_equal(pboth));

	/* One line per device and kind, not one per block. */
	assert_int_equal(log_count("checksum mismatch", img[1]), 1);
	assert_int_equal(log_count("repaired", img[1]), 1);
	assert_true(log_count("unrecoverable block: /d/b offset 163840", NULL) == 1);

	/* The file reads back right except the destroyed block (EIO). */
	buf = malloc(300 * 1024);
	assert_non_null(buf);
	assert_int_equal(tfs_open(fs, ib, O_RDONLY, &f), 0);
	assert_int_equal(tfs_pread(f, buf, 40 * BS, 0), 40 * BS);
	{
		uint8_t *want = malloc(300 * 1024);

		assert_non_null(want);
		tl_pattern(want, 300 * 1024, 2);
		assert_memory_equal(buf, want, 40 * BS);
		assert_int_equal(tfs_pread(f, buf, BS, 40 * BS), -EIO);
		assert_int_equal(tfs_pread(f, buf, 300 * 1024 - 41 * BS, 41 * BS),
				 300 * 1024 - 41 * BS);
		assert_memory_equal(buf, want + 41 * BS, 300 * 1024 - 41 * BS);
		/* Rewriting the block replaces it (copy-on-write). */
		assert_int_equal(tfs_release(f), 0);
		assert_int_equal(tfs_open(fs, ib, O_RDWR, &f), 0);
		assert_int_equal(tfs_pwrite(f, want + 40 * BS, BS, 40 * BS, 0), BS);
		free(want);
	}
	assert_int_equal(tfs_release(f), 0);
	free(buf);

	/* Scrub again: everything clean now. */
	st = scrub_run(fs);
	assert_int_equal(st.csum_err, 0);
	assert_int_equal(st.repaired, 0);
	assert_int_equal(st.unrecoverable, 0);
	assert_int_equal(st.nbad, 0);

	/* Counters survive a remount. */
	n0 = ctr(fs, d0);
	n1 = ctr(fs, d1);
	assert_int_equal(tfs_unmount(fs), 0);
	fs = mount2();
	c0 = ctr(fs, dev_of(fs, 0));
	c1 = ctr(fs, dev_of(fs, 1));
	assert_memory_equal(&c0, &n0, sizeof(c0));
	assert_memory_equal(&c1, &n1, sizeof(c1));
	/* ... and so does the last scrub's summary. */
	assert_int_equal(scrub_get_status(fs, &st), 0);
	assert_int_equal(st.state, SCRUB_FINISHED);
	assert_int_equal(tfs_unmount(fs), 0);
}

/* ---- online faults ---- */

static void test_online_fault(void **state)
{
	struct tfs *fs;
	uint64_t ino, p0;
	struct scrub_status st;
	struct dev_fault_rule r;
	unsigned d1;
	struct ctr_snap c1, n1;
	uint8_t *buf, *want;
	struct tfs_file *f;

	format2();
	fs = mount_fault("");
	ino = put_file(fs, TFS_ROOT_INO, "f", 256 * 1024, 9);
	p0 = phys_of(fs, ino, 0);
	/* The file was written in one piece: its 64 blocks are contiguous. */
	assert_int_equal(phys_of(fs, ino, 63), p0 + 63);
	d1 = dev_of(fs, 1);
	c1 = ctr(fs, d1);

	/* Every block device 1 returns for blocks 8..15 comes back flipped,
	 * once. */
	r = (struct dev_fault_rule){ .dev_idx = (int)d1, .op = DEV_READ,
				     .off = (p0 + 8) * BS, .len = 8 * BS,
				     .kind = DEV_FAULT_CORRUPT, .count = 1 };
	assert_int_equal(dev_fault_add_rule(fs->be, &r), 0);
	st = scrub_run(fs);
	n1 = ctr(fs, d1);
	assert_int_equal(st.csum_err, 8);
	assert_int_equal(st.repaired, 8);
	assert_int_equal(st.unrecoverable, 0);
	assert_int_equal(n1.csum - c1.csum, 8);
	assert_int_equal(n1.rep - c1.rep, 8);

	/* A read error on device 1: its whole chunk is rewritten from 0. */
	r = (struct dev_fault_rule){ .dev_idx = (int)d1, .op = DEV_READ,
				     .off = (p0 + 20) * BS, .len = BS,
				     .kind = DEV_FAULT_ERROR, .err = EIO, .count = 1 };
	assert_int_equal(dev_fault_add_rule(fs->be, &r), 0);
	st = scrub_run(fs);
	assert_int_equal(st.read_err, 1);
	assert_true(st.repaired >= 1);
	assert_int_equal(st.unrecoverable, 0);
	assert_int_equal(ctr(fs, d1).rerr - n1.rerr, 1);

	/* Foreground reads still return the right bytes throughout. */
	buf = malloc(256 * 1024);
	want = malloc(256 * 1024);
	assert_true(buf && want);
	tl_pattern(want, 256 * 1024, 9);
	assert_int_equal(tfs_open(fs, ino, O_RDONLY, &f), 0);
	assert_int_equal(tfs_pread(f, buf, 256 * 1024, 0), 256 * 1024);
	assert_memory_equal(buf, want, 256 * 1024);
	assert_int_equal(tfs_release(f), 0);
	free(buf);
	free(want);

	st = scrub_run(fs);
	assert_int_equal(st.csum_err + st.read_err + st.unrecoverable, 0);
	assert_int_equal(tfs_unmount(fs), 0);
}

/* ---- resume and cancel ---- */

static bool read_super(int i, struct super *out)
{
	uint8_t *b = malloc(2 * BS);
	struct super s[2];
	int ok[2], fd = open(img[i], O_RDONLY);

	assert_true(b && fd >= 0);
	assert_int_equal(pread(fd, b, 2 * BS, 0), 2 * BS);
	close(fd);
	for (int k = 0; k < 2; k++)
		ok[k] = super_decode(b + k * BS, (unsigned)k, &s[k], NULL, 0) == 0;
	free(b);
	if (!ok[0] && !ok[1])
		return false;
	*out = ok[0] && (!ok[1] || s[0].generation > s[1].generation) ? s[0] : s[1];
	return true;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

static void test_resume_cancel(void **state)
{
	const uint64_t big = 24ull << 20;
	struct tfs *fs;
	struct scrub_status st;
	struct super sb = { 0 };
	uint64_t ino, done_at_unmount;
	int waited = 0;

	format2();
	fs = mount2();
	ino = put_file(fs, TFS_ROOT_INO, "big", big, 5);
	put_file(fs, TFS_ROOT_INO, "small", 8192, 6);

	/* 8 MiB/s: a 24 MiB pass takes 3 s; stop it at a third. */
	assert_int_equal(scrub_start(fs, 8 << 20), 0);
	assert_int_equal(scrub_start(fs, 0), -EBUSY);
	do {
		sleep_ms(50);
		assert_int_equal(scrub_get_status(fs, &st), 0);
	} while (st.bytes_done < (8u << 20) && ++waited < 400);
	assert_int_equal(st.state, SCRUB_RUNNING);
	/* the rate limit holds (one chunk of slack) */
	assert_true(st.rate_bps < 1.5 * (8 << 20) + 2.0 * SCRUB_CHUNK * BS / st.elapsed_s);
	assert_int_equal(tfs_unmount(fs), 0);

	/* The cursor is in the superblock, inside the big file. */
	assert_true(read_super(0, &sb));
	assert_int_equal(sb.scrub.state, SUPER_SCRUB_RUNNING);
	assert_int_equal(sb.scrub.ino, ino);
	assert_true(sb.scrub.fblk > 0);
	assert_true(sb.scrub.bytes_done >= (8u << 20));
	done_at_unmount = sb.scrub.bytes_done;

	/* Remount: it goes on from there by itself, not from 0. */
	fs = mount2();
	assert_int_equal(scrub_set_rate(fs, 0), 0);
	assert_int_equal(scrub_wait(fs), 0);
	assert_int_equal(scrub_get_status(fs, &st), 0);
	assert_int_equal(st.state, SCRUB_FINISHED);
	assert_true(st.resumed);
	assert_true(st.bytes_done >= big);
	/* this run read the rest (plus the new checkpoint), not everything */
	assert_true(st.bytes_run <= big + (1u << 20) - done_at_unmount + (2u << 20));
	assert_true(st.bytes_run < big);
	assert_int_equal(st.csum_err, 0);

	/* Cancel: ends as canceled and does not come back at mount. */
	assert_int_equal(scrub_cancel(fs), -ENOENT);
	assert_int_equal(scrub_start(fs, 4 << 20), 0);
	sleep_ms(300);
	assert_int_equal(scrub_cancel(fs), 0);
	assert_int_equal(scrub_wait(fs), 0);
	assert_int_equal(scrub_get_status(fs, &st), 0);
	assert_int_equal(st.state, SCRUB_CANCELED);
	assert_true(st.bytes_done < big);
	assert_int_equal(tfs_unmount(fs), 0);
	fs = mount2();
	assert_int_equal(scrub_get_status(fs, &st), 0);
	assert_int_equal(st.state, SCRUB_CANCELED);
	assert_false(st.resumed);
	assert_int_equal(st.bytes_run, 0);
	assert_int_equal(tfs_unmount(fs), 0);
}

/* ---- paths, ctl, json ---- */

static void test_paths_ctl(void **state)
{
	struct tfs_cred c = { .uid = getuid(), .gid = getgid() };
	struct tfs *fs;
	struct tfs_file *f;
	struct stat st;
	uint64_t d1, d2, ino, ck, ckbytes;
	char path[256], *out = malloc(TWINFS_CTL_MAX);
	struct jv *v;
	const struct jv *devsv;

	assert_non_null(out);
	format2();
	fs = mount2();
	d1 = mkdir1(fs, TFS_ROOT_INO, "x");
	d2 = mkdir1(fs, d1, "y z");
	ino = put_file(fs, d2, "file", 100, 1);
	assert_int_equal(scrub_ino_path(fs, ino, path, sizeof(path)), 0);
	assert_string_equal(path, "/x/y z/file");
	assert_int_equal(scrub_ino_path(fs, TFS_ROOT_INO, path, sizeof(path)), 0);
	assert_string_equal(path, "/");
	/* open, then unlinked: no name left */
	assert_int_equal(tfs_create(fs, TFS_ROOT_INO, "gone", S_IFREG | 0644, O_RDWR, &c, &st,
				    &f), 0);
	assert_int_equal(tfs_unlink(fs, TFS_ROOT_INO, "gone"), 0);
	assert_int_equal(scrub_ino_path(fs, st.st_ino, path, sizeof(path)), 0);
	snprintf(out, 64, "<ino %llu>", (unsigned long long)st.st_ino);
	assert_string_equal(path, out);
	assert_int_equal(tfs_release(f), 0);
	tfs_forget(fs, st.st_ino, 1);

	/* status */
	assert_int_equal(tfs_ctl(fs, "status", out, TWINFS_CTL_MAX), 0);
	assert_int_equal(jv_parse(out, &v), 0);
	assert_string_equal(jv_str(v, "state", ""), "HEALTHY");
	assert_int_equal(jv_u64(v, "format_version", 0), 1);
	devsv = jv_get(v, "devices");
	assert_int_equal(jv_len(devsv), 2);
	assert_string_equal(jv_str(devsv->child, "state", ""), "ONLINE");
	assert_string_equal(jv_str(devsv->child, "path", ""), img[0]);
	assert_int_equal(jv_u64(devsv->child, "csum_errors", 99), 0);
	assert_true(jv_u64(v, "size_bytes", 0) > jv_u64(v, "free_bytes", UINT64_MAX));
	assert_string_equal(jv_str(v, "scrub.state", ""), "none");
	jv_free(v);

	/* stats, scrub */
	assert_int_equal(tfs_ctl(fs, "stats", out, TWINFS_CTL_MAX), 0);
	assert_int_equal(jv_parse(out, &v), 0);
	assert_true(jv_u64(v, "log.appends", 0) > 0);
	/* checkpoint cost since mount: each one counted with its blocks */
	ck = jv_u64(v, "checkpoint.writes", 0);
	ckbytes = jv_u64(v, "checkpoint.written_bytes", 0);
	assert_true(ck >= 1);			/* mount writes one */
	assert_true(ckbytes >= ck * TFS_BLOCK_SIZE);
	jv_free(v);
	assert_int_equal(tfs_checkpoint(fs), 0);
	assert_int_equal(tfs_ctl(fs, "stats", out, TWINFS_CTL_MAX), 0);
	assert_int_equal(jv_parse(out, &v), 0);
	assert_int_equal(jv_u64(v, "checkpoint.writes", 0), ck + 1);
	assert_int_equal(jv_u64(v, "checkpoint.written_bytes", 0),
			 ckbytes + jv_u64(v, "checkpoint.blocks", 0) * TFS_BLOCK_SIZE);
	jv_free(v);
	assert_int_equal(tfs_ctl(fs, "scrub start rate=1x", out, TWINFS_CTL_MAX), -EINVAL);
	assert_non_null(strstr(out, "\"error\""));
	assert_int_equal(tfs_ctl(fs, "scrub cancel", out, TWINFS_CTL_MAX), -ENOENT);
	assert_non_null(strstr(out, "no scrub is running"));
	assert_int_equal(tfs_ctl(fs, "frobnicate", out, TWINFS_CTL_MAX), -EINVAL);
	assert_int_equal(tfs_ctl(fs, "scrub start rate=100M", out, TWINFS_CTL_MAX), 0);
	assert_int_equal(jv_parse(out, &v), 0);
	assert_int_equal(jv_u64(v, "rate_limit", 0), 100u << 20);
	jv_free(v);
	assert_int_equal(scrub_wait(fs), 0);
	assert_int_equal(tfs_ctl(fs, "scrub status", out, TWINFS_CTL_MAX), 0);
	assert_int_equal(jv_parse(out, &v), 0);
	assert_string_equal(jv_str(v, "state", ""), "finished");
	assert_true(jv_num(v, "percent", 0) == 100.0);
	jv_free(v);
	/* a reply that does not fit is an error, never a cut document */
	assert_int_equal(tfs_ctl(fs, "status", out, 100), -EOVERFLOW);
	assert_int_equal(jv_parse(out, &v), 0);
	jv_free(v);
	assert_int_equal(tfs_unmount(fs), 0);
	free(out);
}

static void test_json(void **state)
{
	char b[256];
	struct jbuf j;
	struct jv *v;

	jb_init(&j, b, sizeof(b));
	jb_obj_begin(&j, NULL);
	jb_str(&j, "s", "a\"b\\\n\x01");
	jb_u64(&j, "u", UINT64_MAX);
	jb_arr_begin(&j, "a");
	jb_i64(&j, NULL, -3);
	jb_bool(&j, NULL, true);
	jb_null(&j, NULL);
	jb_arr_end(&j);
	jb_obj_end(&j);
	assert_int_equal(jb_finish(&j), 0);
	assert_int_equal(jv_parse(b, &v), 0);
	assert_string_equal(jv_str(v, "s", ""), "a\"b\\\n\x01");
	assert_true(jv_u64(v, "u", 0) == UINT64_MAX);
	assert_int_equal(jv_len(jv_get(v, "a")), 3);
	jv_free(v);

	jb_init(&j, b, 16);
	jb_obj_begin(&j, NULL);
	jb_str(&j, "long", "this does not fit in sixteen bytes");
	jb_obj_end(&j);
	assert_int_equal(jb_finish(&j), -EOVERFLOW);
	assert_true(strlen(b) < 16);

	assert_int_equal(jv_parse("{\"a\":1,}", &v), -EINVAL);
	assert_int_equal(jv_parse("[1 2]", &v), -EINVAL);
	assert_int_equal(jv_parse("\"\\u00e9\"", &v), 0);
	assert_string_equal(v->str, "\xc3\xa9");
	jv_free(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_json),
		cmocka_unit_test_setup_teardown(test_offline_repair, setup, teardown),
		cmocka_unit_test_setup_teardown(test_online_fault, setup, teardown),
		cmocka_unit_test_setup_teardown(test_resume_cancel, setup, teardown),
		cmocka_unit_test_setup_teardown(test_paths_ctl, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
