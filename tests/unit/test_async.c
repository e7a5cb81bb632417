// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: the asynchronous data path on the real io_uring completion threads (tfs_write_async, tfs_read_async, tfs_fsync_async): one thread keeps many writes in flight, concurrent writers and readers see exactly the model, same-range writes land in call order, a corrupt copy read asynchronously is repaired, fsync calls back only once the log is durable (on the caller's thread when the syncer is idle), and the completion thread never runs a log commit, a superblock write or a read repair (they go to the worker) while a write acknowledged under a failed device is durable with the device recorded stale before the acknowledgement. */
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

#include "file_env.h"

#define NT 4
#define REGION (4 * MiB)	/* per writer thread */
#define WRITES 300
#define DEPTH 16

struct waiter {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned pending;
	unsigned errors;
};

static void waiter_init(struct waiter *w)
{
	memset(w, 0, sizeof(*w));
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
}

static void waiter_fini(struct waiter *w)
{
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
}

static void waiter_add(struct waiter *w)
{
	pthread_mutex_lock(&w->mu);
	w->pending++;
	pthread_mutex_unlock(&w->mu);
}

static void waiter_done(struct waiter *w, bool ok)
{
	pthread_mutex_lock(&w->mu);
	if (!ok)
		w->errors++;
	w->pending--;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

static void waiter_wait(struct waiter *w, unsigned max)
{
	pthread_mutex_lock(&w->mu);
	while (w->pending > max)
		pthread_cond_wait(&w->cv, &w->mu);
	pthread_mutex_unlock(&w->mu);
}

struct wreq {
	struct waiter *w;
	size_t len;
};

static int fill_copy(void *ctx, void *dst, size_t len)
{
	memcpy(dst, ctx, len);
	return 0;
}

static void write_cb(void *arg, ssize_t res)
{
	struct wreq *r = arg;

	waiter_done(r->w, res == (ssize_t)r->len);
	free(r);
}

static void async_write(struct tfs_file *f, struct waiter *w, const void *src, size_t len,
			off_t off, int flags)
{
	struct wreq *r = malloc(sizeof(*r));

	assert_non_null(r);
	r->w = w;
	r->len = len;
	waiter_add(w);
	tfs_write_async(f, off, len, fill_copy, (void *)src, flags, write_cb, r);
}

struct rreq {
	struct waiter *w;
	struct tfs *fs;
	const uint8_t *want;
	size_t len;
};

static void read_cb(void *arg, ssize_t res, void *buf, size_t data_off)
{
	struct rreq *r = arg;
	bool ok = res == (ssize_t)r->len &&
		  memcmp((uint8_t *)buf + data_off, r->want, r->len) == 0;

	if (buf)
		tfs_buf_put(r->fs, buf);
	waiter_done(r->w, ok);
	free(r);
}

static void async_read(struct tfs_file *f, struct waiter *w, const uint8_t *want, size_t len,
		       off_t off)
{
	struct rreq *r = malloc(sizeof(*r));

	assert_non_null(r);
	*r = (struct rreq){ .w = w, .fs = f->fs, .want = want, .len = len };
	waiter_add(w);
	tfs_read_async(f, off, len, read_cb, r);
}

/* Bad copies rewritten so far, on every device. */
static uint64_t repaired(struct tfs *fs)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < fs->mirror.ndevs; i++)
		n += atomic_load(&fs->mirror.ctr[i].repaired);
	return n;
}

/* @n asynchronous reads of [0, len) at once, each returning model. */
static void reads_ok(struct tfs_file *f, const uint8_t *model, size_t len, unsigned n)
{
	struct waiter w;

	waiter_init(&w);
	for (unsigned k = 0; k < n; k++)
		async_read(f, &w, model, len, 0);
	waiter_wait(&w, 0);
	assert_int_equal(w.errors, 0);
	waiter_fini(&w);
}

/* One thread, no waiting between writes: several are in flight at once,
 * which only an asynchronous path allows (the range lock counts them). */
static void test_one_thread_in_flight(void **state)
{
	struct env e;
	struct tfs_file *f;
	struct waiter w;
	uint8_t *model = malloc(64 * BS);

	if (env_init(&e, "uring", 256 * MiB))
		skip();
	assert_true(dev_async_supported(e.fs->be));
	f = mkfile(&e, "f");
	fill_pattern(model, 64 * BS, 1);
	pwrite_ok(f, model, 64 * BS, 0);	/* not extending below: range locks */
	fill_pattern(model, 64 * BS, 2);
	atomic_store(&f->ip->rl.max_writers, 0);
	waiter_init(&w);
	for (unsigned i = 0; i < 64; i++)
		async_write(f, &w, model + (size_t)i * BS, BS, (off_t)i * BS, 0);
	waiter_wait(&w, 0);
	assert_int_equal(w.errors, 0);
	print_message("max writers in flight from one thread: %u\n", f->ip->rl.max_writers);
	assert_true(f->ip->rl.max_writers > 1);
	check_model(f, model, 64 * BS);
	assert_int_equal(check_raw(&e, f), 2 * 64);
	waiter_fini(&w);
	tfs_release(f);
	env_fini(&e);
	free(model);
}

struct thr {
	pthread_t th;
	struct tfs_file *f;
	unsigned id;
	uint8_t *model;		/* this thread's region */
	struct waiter w;
};

static void *writer(void *arg)
{
	struct thr *t = arg;
	unsigned seed = t->id * 7919 + 1;
	uint8_t *src = malloc(256 * 1024);

	for (unsigned n = 0; n < WRITES && src; n++) {
		size_t len = 1 + rand_r(&seed) % (256 * 1024);
		size_t off = (size_t)rand_r(&seed) % (REGION - len);
		int flags = n % 16 == 0 ? O_DSYNC : 0;

		fill_pattern(src, len, seed);
		/* Overlapping writes of one thread are ordered by the range
		 * lock in call order, so the model is plain memcpy order. */
		memcpy(t->model + off, src, len);
		async_write(t->f, &t->w, src, len, (off_t)((size_t)t->id * REGION + off), flags);
		waiter_wait(&t->w, DEPTH);
	}
	waiter_wait(&t->w, 0);
	/* Reads of the same region, many in flight. */
	for (unsigned n = 0; n < WRITES && src; n++) {
		size_t len = 1 + rand_r(&seed) % (300 * 1024);
		size_t off = (size_t)rand_r(&seed) % (REGION - len);

		async_read(t->f, &t->w, t->model + off, len, (off_t)((size_t)t->id * REGION + off));
		waiter_wait(&t->w, DEPTH);
	}
	waiter_wait(&t->w, 0);
	free(src);
	return NULL;
}

static void test_threads_model(void **state)
{
	struct env e;
	struct tfs_file *f;
	struct thr t[NT];
	uint8_t *model = calloc(NT, REGION);

	if (env_init(&e, "uring", 512 * MiB))
		skip();
	f = mkfile(&e, "f");
	pwrite_ok(f, model, (size_t)NT * REGION, 0);
	for (unsigned i = 0; i < NT; i++) {
		t[i].f = f;
		t[i].id = i;
		t[i].model = model + (size_t)i * REGION;
		waiter_init(&t[i].w);
		assert_int_equal(pthread_create(&t[i].th, NULL, writer, &t[i]), 0);
	}
	for (unsigned i = 0; i < NT; i++) {
		pthread_join(t[i].th, NULL);
		assert_int_equal(t[i].w.errors, 0);
		waiter_fini(&t[i].w);
	}
	check_model(f, model, (uint64_t)NT * REGION);
	check_raw(&e, f);
	/* And after a remount: every write was committed before it called back. */
	tfs_release(f);
	env_remount(&e);
	f = reopen(&e, "f");
	check_model(f, model, (uint64_t)NT * REGION);
	tfs_release(f);
	env_fini(&e);
	free(model);
}

/* A copy corrupted on disk: the asynchronous read still returns the right
 * bytes (through mirror_read's fallback) and repairs the bad copy. */
static void test_read_repairs(void **state)
{
	struct env e;
	struct tfs_file *f;
	uint8_t *model = malloc(8 * BS), *junk = malloc(BS);
	uint64_t rep0;
	int fd;

	if (env_init(&e, "uring", 256 * MiB))
		skip();
	f = mkfile(&e, "f");
	fill_pattern(model, 8 * BS, 3);
	pwrite_ok(f, model, 8 * BS, 0);
	assert_int_equal(tfs_fsync(e.fs, tfs_file_ino(f), false), 0);
	memset(junk, 0x5a, BS);
	/* Both reads of block 3 (the rotation may pick either copy) find
	 * one bad copy: corrupt each image's copy in turn. */
	for (int d = 0; d < 2; d++) {
		fd = open(e.img[d], O_WRONLY);
		assert_true(fd >= 0);
		assert_int_equal(pwrite(fd, junk, BS, (off_t)(ent(f, 3).phys * BS)), BS);
		close(fd);
		rep0 = repaired(e.fs);
		reads_ok(f, model, 8 * BS, 2);
		assert_true(repaired(e.fs) > rep0);
	}
	assert_int_equal(check_raw(&e, f), 2 * 8);
	tfs_release(f);
	env_fini(&e);
	free(model);
	free(junk);
}

struct sreq {
	struct waiter *w;
	struct tfs *fs;
	uint64_t need;		/* log seq that must be durable at the callback */
};

static void sync_cb(void *arg, int ret)
{
	struct sreq *r = arg;

	waiter_done(r->w, ret == 0 && log_durable_seq(r->fs->log) >= r->need);
	free(r);
}

static void test_fsync_async(void **state)
{
	struct env e;
	struct tfs_file *f;
	struct waiter w;
	uint8_t *buf = malloc(BS);

	if (env_init(&e, "uring", 256 * MiB))
		skip();
	f = mkfile(&e, "f");
	waiter_init(&w);
	fill_pattern(buf, BS, 4);
	for (unsigned i = 0; i < 32; i++) {
		struct sreq *r = malloc(sizeof(*r));

		pwrite_ok(f, buf, BS, (off_t)i * BS);
		*r = (struct sreq){ .w = &w, .fs = e.fs, .need = log_last_seq(e.fs->log) };
		assert_true(r->need > log_durable_seq(e.fs->log));	/* something to do */
		waiter_add(&w);
		tfs_fsync_async(e.fs, tfs_file_ino(f), false, sync_cb, r);
	}
	waiter_wait(&w, 0);
	assert_int_equal(w.errors, 0);
	waiter_fini(&w);
	tfs_release(f);
	env_fini(&e);
	free(buf);
}

struct ireq {
	_Atomic bool done;
	pthread_t thr;
	int ret;
	bool durable;
	struct tfs *fs;
	uint64_t need;
};

static void inline_cb(void *arg, int ret)
{
	struct ireq *r = arg;

	r->thr = pthread_self();
	r->ret = ret;
	r->durable = log_durable_seq(r->fs->log) >= r->need;
	atomic_store(&r->done, true);
}

/* An fsync that finds the syncer idle commits on the caller's thread:
 * called back, durable, before tfs_fsync_async returns. */
static void test_fsync_inline(void **state)
{
	struct env e;
	struct tfs_file *f;
	uint8_t *buf = malloc(BS);

	if (env_init(&e, "uring", 256 * MiB))
		skip();
	f = mkfile(&e, "f");
	fill_pattern(buf, BS, 5);
	for (unsigned i = 0; i < 4; i++) {
		struct ireq r = { .fs = e.fs };

		pwrite_ok(f, buf, BS, (off_t)i * BS);
		tfs_drain(e.fs);	/* the syncer idle */
		r.need = log_last_seq(e.fs->log);
		assert_true(r.need > log_durable_seq(e.fs->log));
		tfs_fsync_async(e.fs, tfs_file_ino(f), false, inline_cb, &r);
		assert_true(atomic_load(&r.done));
		assert_true(pthread_equal(r.thr, pthread_self()));
		assert_int_equal(r.ret, 0);
		assert_true(r.durable);
	}
	tfs_release(f);
	env_fini(&e);
	free(buf);
}

struct dreq {
	struct waiter *w;
	struct tfs *fs;
	size_t len;
};

/* Acknowledged: the superblock recording device 1 stale is durable. */
static void degraded_cb(void *arg, ssize_t res)
{
	struct dreq *r = arg;

	waiter_done(r->w, res == (ssize_t)r->len && (atomic_load(&r->fs->sbc.stale) & 2u));
	free(r);
}

/* Async writes of model's 64 blocks, @rounds times, until the log wrote a
 * chunk nobody asked for (its pending chunk filled on a completion). */
static void writes_until_chunk(struct tfs_file *f, const uint8_t *model)
{
	struct log_stats st0, st;
	struct waiter w;

	log_get_stats(f->fs->log, &st0);
	waiter_init(&w);
	for (unsigned i = 0; i < 200000; i++) {
		async_write(f, &w, model + (size_t)(i % 64) * BS, BS, (off_t)(i % 64) * BS, 0);
		waiter_wait(&w, DEPTH);
		log_get_stats(f->fs->log, &st);
		if (st.chunks > st0.chunks)
			break;
	}
	waiter_wait(&w, 0);
	assert_int_equal(w.errors, 0);
	assert_true(st.chunks > st0.chunks);
	waiter_fini(&w);
}

/* Every read of device 0 returns corrupt bytes: half the reads need the
 * other copy and a repair, and still return the model. */
static void reads_with_repairs(struct env *e, struct tfs_file *f, const uint8_t *model)
{
	struct dev_fault_rule r = { .dev_idx = 0, .op = DEV_READ, .kind = DEV_FAULT_CORRUPT,
				    .count = -1 };
	uint64_t rep0 = repaired(e->fs);

	assert_int_equal(dev_fault_add_rule(e->fs->be, &r), 0);
	reads_ok(f, model, 64 * BS, 16);
	dev_fault_clear(e->fs->be);
	assert_true(repaired(e->fs) > rep0);
}

/* Every data write to device 1 fails: the first fails the device, and no
 * write is acknowledged before the superblock saying so is durable. */
static void degraded_writes(struct env *e, struct tfs_file *f, uint8_t *model)
{
	struct dev_fault_rule r = { .dev_idx = 1, .op = DEV_WRITE, .kind = DEV_FAULT_ERROR,
				    .err = EIO, .count = -1 };
	struct waiter w;

	r.off = e->fs->sb.data_start * BS;
	r.len = 256ull * MiB - r.off;
	assert_int_equal(dev_fault_add_rule(e->fs->be, &r), 0);
	fill_pattern(model, 64 * BS, 6);
	waiter_init(&w);
	for (unsigned i = 0; i < 64; i++) {
		struct dreq *d = malloc(sizeof(*d));

		assert_non_null(d);
		*d = (struct dreq){ .w = &w, .fs = e->fs, .len = BS };
		waiter_add(&w);
		tfs_write_async(f, (off_t)i * BS, BS, fill_copy, model + (size_t)i * BS,
				O_DSYNC, degraded_cb, d);
	}
	waiter_wait(&w, 0);
	assert_int_equal(w.errors, 0);
	waiter_fini(&w);
	assert_int_not_equal(atomic_load(&e->fs->mirror.state[1]), MDEV_OK);
}

/*
 * The completion thread (here the fault backend's emulation thread) only
 * completes and hands on: the log commits, the read repairs and the
 * superblock write of a degraded write above all run on the worker
 * (dev_assert_may_block counts any that does not).  And the O_DSYNC writes
 * acknowledged under the failed device are there after a crash.
 */
static void test_completion_hands_on(void **state)
{
	struct env e;
	struct tfs_file *f;
	uint8_t *model = malloc(64 * BS);
	unsigned long v0;

	env_init(&e, "file", 256 * MiB);
	e.fault = "dev=any,op=read,count=0";	/* the fault backend, idle */
	env_remount(&e);
	assert_true(dev_async_supported(e.fs->be));
	f = mkfile(&e, "f");
	fill_pattern(model, 64 * BS, 5);
	pwrite_ok(f, model, 64 * BS, 0);
	assert_int_equal(tfs_fsync(e.fs, tfs_file_ino(f), false), 0);
	v0 = atomic_load(&dev_block_violations);

	writes_until_chunk(f, model);
	reads_with_repairs(&e, f, model);
	degraded_writes(&e, f, model);
	assert_int_equal(atomic_load(&dev_block_violations), v0);
	assert_int_equal(v0, 0);	/* nor in the tests before */

	/* A crash now (nothing committed on the way out): device 1 is
	 * durably stale (a plain mount refuses it), and what was acknowledged
	 * reads back from device 0 on a degraded mount. */
	tfs_release(f);
	tfs_abandon(e.fs);
	e.fs = NULL;
	live_fs = NULL;
	e.fault = NULL;
	assert_int_equal(env_mount(&e), -ENODEV);
	{
		const char *devs[2] = { e.img[0], e.img[1] };
		struct tfs_opts o = { .devs = devs, .ndevs = 2, .backend = "file",
				      .commit_ms = e.commit_ms, .degraded = true };
		char err[256] = "";

		assert_int_equal(tfs_mount(&o, &e.fs, err, sizeof(err)), 0);
		live_fs = e.fs;
	}
	assert_int_not_equal(atomic_load(&e.fs->mirror.state[1]), MDEV_OK);
	f = reopen(&e, "f");
	check_model(f, model, 64 * BS);
	tfs_release(f);
	env_fini(&e);
	free(model);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_one_thread_in_flight, teardown),
		cmocka_unit_test_teardown(test_threads_model, teardown),
		cmocka_unit_test_teardown(test_read_repairs, teardown),
		cmocka_unit_test_teardown(test_fsync_async, teardown),
		cmocka_unit_test_teardown(test_fsync_inline, teardown),
		cmocka_unit_test_teardown(test_completion_hands_on, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
