// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: concurrent O_DSYNC writers and fsync callers share group commits (fewer log chunks than waits), and every acknowledged write survives a crash that drops everything neither flushed nor written FUA (fault-backend journal replayed up to each device's last flush, plus its FUA writes). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fs_i.h"

#define BS 4096u
#define NT 8
#define PER_THREAD 32		/* blocks each writer owns */
#define ROUNDS 40		/* writes per writer */
#define IMG_SIZE (128u << 20)

struct writer {
	pthread_t th;
	struct tfs_file *f;
	unsigned id;
	bool async;			/* through tfs_write_async */
	uint32_t acked[PER_THREAD];	/* version of each block once acknowledged */
	int err;
	/* async: callbacks still to come, under mu */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned pending;
};

static uint64_t word(unsigned blk, uint32_t ver)
{
	return (uint64_t)blk << 32 | ver;
}

struct wreq {
	struct writer *w;
	unsigned i;
	uint32_t n;
};

static int fill_copy(void *ctx, void *dst, size_t len)
{
	memcpy(dst, ctx, len);
	return 0;
}

/* Runs on the completion or syncer thread. */
static void write_cb(void *arg, ssize_t res)
{
	struct wreq *r = arg;
	struct writer *w = r->w;

	pthread_mutex_lock(&w->mu);
	if (res != BS)
		w->err = -EIO;
	else if (r->n > w->acked[r->i])
		w->acked[r->i] = r->n;	/* acknowledged: must survive */
	w->pending--;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	free(r);
}

static void wait_pending(struct writer *w, unsigned max)
{
	pthread_mutex_lock(&w->mu);
	while (w->pending > max)
		pthread_cond_wait(&w->cv, &w->mu);
	pthread_mutex_unlock(&w->mu);
}

/* Every write O_DSYNC, so nothing but the writes' own group commits makes
 * them durable: odd writers keep up to 8 in flight (the buffer is copied
 * before tfs_write_async returns), even ones one at a time. */
static void *writer_run_async(void *arg)
{
	struct writer *w = arg;
	uint64_t *b = malloc(BS);
	unsigned depth = w->id & 1 ? 8 : 0;

	for (uint32_t n = 1; n <= ROUNDS && !w->err && b; n++) {
		unsigned i = (n * 7 + w->id) % PER_THREAD;
		unsigned blk = w->id * PER_THREAD + i;
		struct wreq *r = malloc(sizeof(*r));

		if (!r) {
			w->err = -ENOMEM;
			break;
		}
		*r = (struct wreq){ .w = w, .i = i, .n = n };
		for (unsigned k = 0; k < BS / 8; k++)
			b[k] = word(blk, n);
		pthread_mutex_lock(&w->mu);
		w->pending++;
		pthread_mutex_unlock(&w->mu);
		tfs_write_async(w->f, (off_t)blk * BS, BS, fill_copy, b, O_DSYNC, write_cb, r);
		wait_pending(w, depth);
	}
	wait_pending(w, 0);
	free(b);
	return NULL;
}

static void *writer_run(void *arg)
{
	struct writer *w = arg;
	uint64_t *b = malloc(BS);

	for (uint32_t n = 1; n <= ROUNDS && !w->err && b; n++) {
		unsigned i = (n * 7 + w->id) % PER_THREAD;
		unsigned blk = w->id * PER_THREAD + i;
		/* Odd writers use O_DSYNC, even ones a plain write + fsync. */
		bool dsync = w->id & 1;

		for (unsigned k = 0; k < BS / 8; k++)
			b[k] = word(blk, n);
		if (tfs_pwrite(w->f, b, BS, (off_t)blk * BS, dsync ? O_DSYNC : 0) != BS)
			w->err = -EIO;
		else if (!dsync && tfs_fsync(w->f->fs, tfs_file_ino(w->f), true))
			w->err = -EIO;
		else
			w->acked[i] = n;	/* acknowledged: must survive */
	}
	free(b);
	return NULL;
}

static int copy_file(const char *from, const char *to)
{
	char *buf = malloc(1 << 20);
	int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_TRUNC);
	ssize_t n;
	int ret = 0;

	if (!buf || in < 0 || out < 0)
		ret = -1;
	while (!ret && (n = read(in, buf, 1 << 20)) > 0)
		if (write(out, buf, (size_t)n) != n)
			ret = -1;
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	free(buf);
	return ret;
}

static void mktmp(char *path)
{
	int fd;

	strcpy(path, "/tmp/tfs_gcommit_XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, IMG_SIZE), 0);
	close(fd);
}

static int mount_imgs(char img[2][64], const char *fault, struct tfs **fs)
{
	const char *devs[2] = { img[0], img[1] };
	struct tfs_opts o = { .devs = devs, .ndevs = 2, .backend = "file",
			      .commit_ms = 600000, .fault = fault };
	char err[256] = "";
	int ret = tfs_mount(&o, fs, err, sizeof(err));

	if (ret)
		fprintf(stderr, "mount: %s: %s\n", strerror(-ret), err);
	return ret;
}

static void group_commit_durable(bool async)
{
	char img[2][64], crash[2][64];
	const char *devs[2];
	struct tfs_format_opts fo = { .label = "g", .backend = "file" };
	struct writer w[NT];
	struct log_stats s0, s1;
	struct tfs_cred c = { .uid = 0, .gid = 0 };
	struct tfs_file *f;
	struct stat st;
	struct tfs *fs;
	char err[256] = "";
	uint8_t *zero = calloc(1, NT * PER_THREAD * BS);
	uint64_t *b = malloc(BS);
	const struct dev_fault_rec *j;
	size_t nj, last_flush[2] = { 0, 0 };
	bool flushed[2] = { false, false };
	uint64_t waits, chunks;

	for (int i = 0; i < 2; i++) {
		mktmp(img[i]);
		mktmp(crash[i]);
		devs[i] = img[i];
	}
	assert_int_equal(tfs_format(devs, 2, &fo, err, sizeof(err)), 0);
	assert_int_equal(mount_imgs(img, "", &fs), 0);
	assert_int_equal(tfs_create(fs, TFS_ROOT_INO, "f", 0644, O_RDWR, &c, &st, &f), 0);
	/* Prewritten and durable: the writers overwrite (copy-on-write). */
	assert_int_equal(tfs_pwrite(f, zero, NT * PER_THREAD * BS, 0, 0), NT * PER_THREAD * BS);
	assert_int_equal(tfs_fsync(fs, tfs_file_ino(f), false), 0);

	/* The crash images start from what the devices hold now; the journal
	 * has every write and flush from here on. */
	dev_fault_record(fs->be, true);
	for (int i = 0; i < 2; i++)
		assert_int_equal(copy_file(img[i], crash[i]), 0);
	log_get_stats(fs->log, &s0);
	memset(w, 0, sizeof(w));
	for (unsigned i = 0; i < NT; i++) {
		w[i].f = f;
		w[i].id = i;
		w[i].async = async;
		pthread_mutex_init(&w[i].mu, NULL);
		pthread_cond_init(&w[i].cv, NULL);
		assert_int_equal(pthread_create(&w[i].th, NULL,
						async ? writer_run_async : writer_run, &w[i]), 0);
	}
	for (unsigned i = 0; i < NT; i++) {
		pthread_join(w[i].th, NULL);
		assert_int_equal(w[i].err, 0);
		pthread_cond_destroy(&w[i].cv);
		pthread_mutex_destroy(&w[i].mu);
	}
	/* The fault backend runs the asynchronous path for real (emulated
	 * batches), or this test would check the synchronous one twice. */
	assert_true(dev_async_supported(fs->be));
	log_get_stats(fs->log, &s1);
	waits = s1.commits - s0.commits;
	chunks = s1.chunks - s0.chunks;
	print_message("group commit: %llu durability waits, %llu log chunks\n",
		      (unsigned long long)waits, (unsigned long long)chunks);
	/* Each of the NT * ROUNDS writes was durable when it returned (checked
	 * below through the crash images); a write another leader's chunk had
	 * already covered returns without waiting, so "waits" can be fewer.
	 * Sharing shows as fewer chunk writes than durable writes. */
	assert_true(waits > 0);
	assert_true(chunks < NT * ROUNDS);

	/* Crash: keep each device's writes up to its last flush and its FUA
	 * writes (O_DSYNC data, log chunks: durable once complete, nothing
	 * else made durable by them), drop the rest. */
	j = dev_fault_journal(fs->be, &nj);
	for (size_t k = 0; k < nj; k++)
		if ((j[k].op == DEV_FLUSH || j[k].fua) && j[k].dev_idx >= 0 && j[k].dev_idx < 2) {
			if (j[k].op == DEV_FLUSH)
				last_flush[j[k].dev_idx] = k;
			flushed[j[k].dev_idx] = true;
		}
	for (int d = 0; d < 2; d++) {
		int fd = open(crash[d], O_WRONLY);

		assert_true(fd >= 0);
		assert_true(flushed[d]);
		for (size_t k = 0; k < nj; k++)
			if (j[k].op == DEV_WRITE && j[k].dev_idx == d &&
			    (k < last_flush[d] || j[k].fua))
				assert_int_equal(pwrite(fd, j[k].data, j[k].len, (off_t)j[k].off),
						 (ssize_t)j[k].len);
		close(fd);
	}
	tfs_release(f);
	tfs_abandon(fs);

	assert_int_equal(mount_imgs(crash, NULL, &fs), 0);
	assert_int_equal(tfs_lookup(fs, TFS_ROOT_INO, "f", &st), 0);
	assert_int_equal(tfs_open(fs, st.st_ino, O_RDONLY, &f), 0);
	for (unsigned i = 0; i < NT; i++)
		for (unsigned k = 0; k < PER_THREAD; k++) {
			unsigned blk = i * PER_THREAD + k;
			uint64_t want = w[i].acked[k] ? word(blk, w[i].acked[k]) : 0;

			assert_int_equal(tfs_pread(f, b, BS, (off_t)blk * BS), BS);
			for (unsigned x = 0; x < BS / 8; x++)
				if (b[x] != want)
					fail_msg("block %u word %u: %#llx, acknowledged %#llx", blk, x,
						 (unsigned long long)b[x], (unsigned long long)want);
		}
	tfs_release(f);
	tfs_forget(fs, st.st_ino, 1);
	assert_int_equal(tfs_unmount(fs), 0);
	for (int i = 0; i < 2; i++) {
		unlink(img[i]);
		unlink(crash[i]);
	}
	free(zero);
	free(b);
}

static void test_group_commit_durable(void **state)
{
	(void)state;
	group_commit_durable(false);
}

/* The same through tfs_write_async (the daemon's write path): the metadata
 * commit runs on the completion thread and O_DSYNC writes are called back
 * by the syncer only after their group commit. */
static void test_group_commit_durable_async(void **state)
{
	(void)state;
	group_commit_durable(true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_group_commit_durable),
		cmocka_unit_test(test_group_commit_durable_async),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
