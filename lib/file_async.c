// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * file_async: the data path's threads, its kept jobs and the asynchronous
 * read.  The write pipeline itself is file_write.c.
 *
 * Two queue threads, each started on first use (struct fa_queue):
 *
 *  - the syncer: O_DSYNC/O_SYNC writes and asynchronous fsyncs wait here
 *    for the log to be durable.  It commits the log up to the highest
 *    sequence it holds and only then calls back every item it took: one
 *    flush and one log write per batch (group commit).  An fsync that
 *    finds it idle commits on its own thread instead (tfs_fsync_async),
 *    and so does an O_DSYNC write, its data write included
 *    (tfs_write_async, file_sync_try_inline).
 *
 *  - the worker: whatever an I/O completion thread must not wait for
 *    (dev.h, dev_assert_may_block): a write that found a device out of
 *    sync (the superblock marking it stale is written before the write is
 *    acknowledged), a metadata commit that would have to commit the log
 *    first, a read whose copy failed (fallback reads and the repair).  A
 *    completion thread thus only completes I/O and hands work on, and an
 *    unrelated request's completion never waits behind a log commit, a
 *    superblock write or a repair (bcachefs hands its index update to a
 *    workqueue the same way).
 *
 * Reads: tfs_read_async issues one device read per physical run from the
 * copy mirror_read would pick, and the completion verifies the checksums;
 * a copy that fails goes to the worker, which runs the rest of
 * mirror_read (the other copies, the repair) before the callback.
 *
 * Backends without asynchronous batches take the synchronous path: the
 * callback runs before the call returns.
 *
 * Locks: every queue's mu and every job cache's mu is a leaf.  The range
 * lock of an asynchronous read is taken on the caller's thread and released
 * wherever the read finishes (rangelock has no owner).
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "file_i.h"
#include "fs_i.h"
#include "csum.h"
#include "prof.h"

/* ---- kept jobs ---- */

#define JCACHE_MAX 256u		/* per kind: about the writes W1 keeps in flight */

void *file_jc_get(struct jcache *c, size_t size)
{
	void *p;

	pthread_mutex_lock(&c->mu);
	p = c->head;
	if (p) {
		c->head = *(void **)p;
		c->n--;
	}
	pthread_mutex_unlock(&c->mu);
	return p ? p : malloc(size);
}

void file_jc_put(struct jcache *c, void *p)
{
	pthread_mutex_lock(&c->mu);
	if (c->n < JCACHE_MAX) {
		*(void **)p = c->head;
		c->head = p;
		c->n++;
		p = NULL;
	}
	pthread_mutex_unlock(&c->mu);
	free(p);
}

static void jc_free(struct jcache *c)
{
	while (c->head) {
		void *p = c->head;

		c->head = *(void **)p;
		free(p);
	}
	c->n = 0;
	pthread_mutex_destroy(&c->mu);
}

/* ---- queue threads ---- */

static void *queue_main(void *arg)
{
	struct fa_queue *q = arg;

	pthread_setname_np(pthread_self(), q->name);
	pthread_mutex_lock(&q->mu);
	for (;;) {
		struct fa_item *list;

		while (!q->head && !q->stop)
			pthread_cond_wait(&q->cv, &q->mu);
		if (!q->head)
			break;
		list = q->head;
		q->head = NULL;
		q->tail = &q->head;
		pthread_mutex_unlock(&q->mu);
		q->round(q, list);
		pthread_mutex_lock(&q->mu);
		q->busy--;	/* counts rounds, see queue_add */
		pthread_cond_broadcast(&q->cv);
	}
	pthread_mutex_unlock(&q->mu);
	return NULL;
}

/* Queue @it, starting the thread on first use.  If it cannot start, run
 * the round here (slower, correct). */
static void queue_add(struct fa_queue *q, struct fa_item *it)
{
	it->next = NULL;
	pthread_mutex_lock(&q->mu);
	if (!q->running && !q->stop && pthread_create(&q->thr, NULL, queue_main, q) == 0)
		q->running = true;
	if (!q->running) {
		pthread_mutex_unlock(&q->mu);
		q->round(q, it);
		return;
	}
	/* busy counts the rounds still to run: one per transition of the
	 * queue from empty. */
	if (!q->head)
		q->busy++;
	*q->tail = it;
	q->tail = &it->next;
	pthread_cond_signal(&q->cv);
	pthread_mutex_unlock(&q->mu);
}

/* Run a round on the caller's thread instead, if the queue has none to
 * run: true with the round counted in busy (queue_inline_done ends it),
 * so items queued meanwhile wait for the thread's next round, as they
 * would behind the thread's own. */
static bool queue_try_inline(struct fa_queue *q)
{
	bool ok;

	pthread_mutex_lock(&q->mu);
	ok = !q->busy && !q->stop;
	if (ok)
		q->busy++;
	pthread_mutex_unlock(&q->mu);
	return ok;
}

static void queue_inline_done(struct fa_queue *q)
{
	pthread_mutex_lock(&q->mu);
	q->busy--;
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
}

static void queue_drain(struct fa_queue *q)
{
	pthread_mutex_lock(&q->mu);
	while (q->busy)
		pthread_cond_wait(&q->cv, &q->mu);
	pthread_mutex_unlock(&q->mu);
}

static void queue_stop(struct fa_queue *q)
{
	pthread_mutex_lock(&q->mu);
	q->stop = true;
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
	if (q->running)
		pthread_join(q->thr, NULL);
	q->running = false;
}

static void queue_init(struct fa_queue *q, struct tfs *fs, const char *name,
		       void (*round)(struct fa_queue *, struct fa_item *))
{
	pthread_mutex_init(&q->mu, NULL);
	pthread_cond_init(&q->cv, NULL);
	q->tail = &q->head;
	q->name = name;
	q->fs = fs;
	q->round = round;
}

static void queue_destroy(struct fa_queue *q)
{
	pthread_cond_destroy(&q->cv);
	pthread_mutex_destroy(&q->mu);
}

/* The syncer's round: one log commit for everything it took. */
static void sync_round(struct fa_queue *q, struct fa_item *list)
{
	uint64_t max = 0, t0;
	int ret;

	for (struct fa_item *it = list; it; it = it->next)
		if (it->seq > max)
			max = it->seq;
	t0 = prof_begin();
	ret = log_commit(q->fs->log, max);
	prof_end(PROF_SYNC, t0);
	while (list) {
		struct fa_item *it = list;

		list = it->next;
		it->fn(it, ret);
	}
}

/* The worker's round: each item in turn, in queue order. */
static void work_round(struct fa_queue *q, struct fa_item *list)
{
	while (list) {
		struct fa_item *it = list;

		list = it->next;
		it->fn(it, 0);
	}
}

void file_sync_add(struct tfs *fs, struct fa_item *it)
{
	queue_add(&fs->fa->sync, it);
}

bool file_sync_try_inline(struct tfs *fs)
{
	return queue_try_inline(&fs->fa->sync);
}

void file_sync_inline_done(struct tfs *fs)
{
	queue_inline_done(&fs->fa->sync);
}

void file_work_add(struct tfs *fs, struct fa_item *it)
{
	queue_add(&fs->fa->work, it);
}

int file_async_init(struct tfs *fs)
{
	struct file_async *fa = calloc(1, sizeof(*fa));

	if (!fa)
		return -ENOMEM;
	queue_init(&fa->sync, fs, "twinfs-sync", sync_round);
	queue_init(&fa->work, fs, "twinfs-work", work_round);
	pthread_mutex_init(&fa->wjc.mu, NULL);
	pthread_mutex_init(&fa->rjc.mu, NULL);
	fs->fa = fa;
	return 0;
}

void file_async_free(struct tfs *fs)
{
	struct file_async *fa = fs->fa;

	if (!fa)
		return;
	queue_destroy(&fa->sync);
	queue_destroy(&fa->work);
	jc_free(&fa->wjc);
	jc_free(&fa->rjc);
	free(fa);
	fs->fa = NULL;
}

void tfs_drain(struct tfs *fs)
{
	/* Completions hand on to the worker, the worker to the syncer. */
	dev_async_drain(fs->be);
	queue_drain(&fs->fa->work);
	queue_drain(&fs->fa->sync);
}

void file_async_stop(struct tfs *fs)
{
	tfs_drain(fs);
	queue_stop(&fs->fa->work);
	queue_stop(&fs->fa->sync);
}

/* ---- fsync ---- */

/* Every data write completed before its record was appended, and a commit
 * flushes the devices before writing the log chunk: committing the log is
 * all fsync needs. */
int tfs_fsync(struct tfs *fs, uint64_t ino, bool datasync)
{
	return log_commit(fs->log, UINT64_MAX);
}

struct fjob {
	struct fa_item it;		/* first */
	tfs_sync_cb cb;
	void *arg;
};

static void fjob_synced(struct fa_item *it, int ret)
{
	struct fjob *j = (struct fjob *)it;
	tfs_sync_cb cb = j->cb;
	void *arg = j->arg;

	free(j);
	cb(arg, ret);
}

void tfs_fsync_async(struct tfs *fs, uint64_t ino, bool datasync, tfs_sync_cb cb, void *arg)
{
	struct fjob *j;

	if (!dev_async_supported(fs->be)) {
		cb(arg, tfs_fsync(fs, ino, datasync));
		return;
	}
	/* The syncer idle: lead the commit here, saving the hop to its
	 * thread (a wakeup per fsync, dear on a busy machine).  Only one
	 * caller at a time: the rest queue for the syncer's next round and
	 * share one commit without holding a thread each. */
	if (queue_try_inline(&fs->fa->sync)) {
		uint64_t t0 = prof_begin();
		int ret = tfs_fsync(fs, ino, datasync);

		prof_end(PROF_SYNC, t0);
		queue_inline_done(&fs->fa->sync);
		cb(arg, ret);
		return;
	}
	if (!(j = malloc(sizeof(*j)))) {
		cb(arg, tfs_fsync(fs, ino, datasync));
		return;
	}
	/* As tfs_fsync: everything appended so far (every write already
	 * acknowledged is). */
	j->it.seq = log_last_seq(fs->log);
	j->it.fn = fjob_synced;
	j->cb = cb;
	j->arg = arg;
	file_sync_add(fs, &j->it);
}

/* ---- reads ---- */

/* A read starts: count it and raise the mark.  Relaxed: a statistic. */
static void read_begin(struct tfs *fs)
{
	uint32_t n = atomic_fetch_add_explicit(&fs->reads_in_flight, 1, memory_order_relaxed) + 1;
	uint32_t max = atomic_load_explicit(&fs->reads_in_flight_max, memory_order_relaxed);

	while (n > max && !atomic_compare_exchange_weak_explicit(&fs->reads_in_flight_max, &max, n,
								   memory_order_relaxed,
								   memory_order_relaxed))
		;
}

/* Before the reply: the reader may issue its next read from the callback. */
static void read_end(struct tfs *fs)
{
	atomic_fetch_sub_explicit(&fs->reads_in_flight, 1, memory_order_relaxed);
}

/* Reads up to this many blocks go packed on few completion threads
 * (dev_batch.pack): their done() is a few checksums and a reply.  Larger
 * ones (sequential readahead) keep spreading their checksums over both. */
#define READ_PACK_MAX 16u

struct rjob {
	struct dev_batch b;		/* first: the completion hands it back */
	struct fa_item it;		/* a bad copy: handed to the worker */
	struct tfs *fs;
	struct tfs_inode *ip;
	struct rl_range r;
	uint8_t *buf;
	size_t n, data_off;
	tfs_read_cb cb;
	void *arg;
	unsigned nruns;
	struct { uint64_t phys; uint32_t off, n; } runs[FILE_IO_BLOCKS];
	uint64_t csums[FILE_IO_BLOCKS];	/* by block of the read */
	struct dev_io ios[FILE_IO_BLOCKS];	/* one per run */
	int devs[FILE_IO_BLOCKS];		/* the mirror each run was read from */
};

static void rjob_finish(struct rjob *j, int ret)
{
	struct tfs *fs = j->fs;
	tfs_read_cb cb = j->cb;
	void *arg = j->arg, *buf = j->buf;
	size_t n = j->n, data_off = j->data_off;

	rl_unlock(inode_rl(j->ip), &j->r);
	file_jc_put(&fs->fa->rjc, j);
	read_end(fs);
	if (ret) {
		fs_buf_put(fs, buf);
		cb(arg, ret, NULL, 0);
	} else {
		cb(arg, (ssize_t)n, buf, data_off);
	}
}

/* Verify every run.  A run whose copy failed to read or verify goes on
 * as in mirror_read (the other copies tried, the bad one repaired, errors
 * counted): waits for devices, so with @nowait (the completion thread)
 * -EAGAIN instead. */
static int rjob_verify(struct rjob *j, bool nowait)
{
	int ret = 0;

	for (unsigned i = 0; i < j->nruns && !ret; i++) {
		uint8_t *p = j->buf + (size_t)j->runs[i].off * BS;
		const uint64_t *cs = &j->csums[j->runs[i].off];
		bool ok = j->ios[i].res == 0;

		for (uint32_t k = 0; ok && k < j->runs[i].n; k++)
			ok = csum_block(p + (size_t)k * BS, j->runs[i].phys + k) == cs[k];
		if (ok)
			continue;
		if (nowait)
			return -EAGAIN;
		ret = mirror_read_done(&j->fs->mirror, (unsigned)j->devs[i], j->ios[i].res,
				       j->runs[i].phys, p, j->runs[i].n, cs, NULL);
	}
	return ret;
}

/* On the worker: the rest of a read whose copy failed. */
static void rjob_repair(struct fa_item *it, int unused)
{
	struct rjob *j = (struct rjob *)((char *)it - offsetof(struct rjob, it));

	(void)unused;
	rjob_finish(j, rjob_verify(j, false));
}

static void rjob_done(struct dev_batch *b)
{
	struct rjob *j = (struct rjob *)b;
	int ret = rjob_verify(j, true);

	if (ret == -EAGAIN) {
		j->it.fn = rjob_repair;
		file_work_add(j->fs, &j->it);
		return;
	}
	rjob_finish(j, ret);
}

/* One device read per physical run, from the copy mirror_read would
 * pick first, and a long run in one piece per readable copy
 * (mirror_read_split): the kernel sends a cold sequential read as 1 MiB
 * READs, one at a time per file, and one device alone would serve each.
 * -ENODEV when no copy may serve a run. */
static int rjob_run(void *ctx, uint32_t off, uint64_t phys, uint32_t n)
{
	struct rjob *j = ctx;
	struct mirror *m = &j->fs->mirror;
	struct mirror_piece p[DEV_MAX];
	unsigned k = mirror_read_split(m, phys, n, p, DEV_MAX);

	if (!k)
		return -ENODEV;
	for (unsigned i = 0; i < k; i++) {
		unsigned r = j->nruns++;

		/* Never more runs than blocks: a piece has one at least. */
		j->runs[r].phys = phys + p[i].off;
		j->runs[r].off = off + p[i].off;
		j->runs[r].n = p[i].n;
		j->devs[r] = (int)p[i].dev;
		j->ios[r] = (struct dev_io){
			.dev = m->devs[p[i].dev], .op = DEV_READ, .off = (phys + p[i].off) * BS,
			.buf = j->buf + (size_t)(off + p[i].off) * BS, .len = p[i].n * BS,
		};
	}
	return 0;
}

void tfs_read_async(struct tfs_file *f, off_t off, size_t len, tfs_read_cb cb, void *arg)
{
	struct tfs *fs = f->fs;
	struct tfs_inode *ip = f->ip;
	uint64_t size, fb0;
	uint32_t nblk;
	struct rjob *j;
	int ret;

	if (!dev_async_supported(fs->be) || off < 0 || bounce_buf_size(fs->bounce) < FS_BOUNCE_SIZE) {
		void *buf;
		size_t doff;
		ssize_t n;

		read_begin(fs);
		n = tfs_read(f, off, len, &buf, &doff);
		read_end(fs);
		cb(arg, n, buf, doff);
		return;
	}
	if (len > TFS_IO_MAX)
		len = TFS_IO_MAX;	/* a short read is allowed */
	if (len == 0 || (uint64_t)off >= file_isize(ip)) {
		cb(arg, 0, NULL, 0);
		return;
	}
	j = file_jc_get(&fs->fa->rjc, sizeof(*j));
	if (!j) {
		cb(arg, -ENOMEM, NULL, 0);
		return;
	}
	j->fs = fs;
	j->ip = ip;
	j->cb = cb;
	j->arg = arg;
	j->nruns = 0;
	read_begin(fs);
	j->buf = fs_buf_get(fs, len);
	fb0 = (uint64_t)off / BS;
	rl_lock(inode_rl(ip), &j->r, fb0, file_div_up((uint64_t)off + len, BS), false);
	size = file_isize(ip);
	if ((uint64_t)off >= size) {	/* truncated before we got the lock */
		j->n = 0;
		rl_unlock(inode_rl(ip), &j->r);
		fs_buf_put(fs, j->buf);
		file_jc_put(&fs->fa->rjc, j);
		read_end(fs);
		cb(arg, 0, NULL, 0);
		return;
	}
	j->n = len;
	if ((uint64_t)off + j->n > size)
		j->n = size - (uint64_t)off;
	j->data_off = (size_t)off % BS;
	nblk = (uint32_t)(file_div_up((uint64_t)off + j->n, BS) - fb0);
	if (file_read_runs(ip, fb0, nblk, j->buf, j->csums, rjob_run, j)) {
		/* No copy to pick from: mirror_read says which error. */
		rjob_finish(j, file_read_blocks(fs, ip, fb0, nblk, j->buf));
		return;
	}
	if (!j->nruns) {		/* holes only */
		rjob_finish(j, 0);
		return;
	}
	j->b.ios = j->ios;
	j->b.n = j->nruns;
	j->b.done = rjob_done;
	j->b.pack = nblk <= READ_PACK_MAX;
	ret = dev_submit_async(fs->be, &j->b);
	if (ret) {
		ret = dev_submit(fs->be, j->ios, j->nruns);
		if (ret)
			for (unsigned i = 0; i < j->nruns; i++)
				j->ios[i].res = ret;
		rjob_done(&j->b);
	}
}

