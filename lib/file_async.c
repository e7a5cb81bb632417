// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * file_async: the write path without a blocked thread per write.
 *
 * tfs_write_async() does on the caller's thread everything tfs_write() does
 * up to the device writes (checks, bounce buffer, log space, range lock,
 * edge reads, the one copy of the caller's bytes, placement and checksums),
 * queues the mirror writes of every run as one asynchronous batch and
 * returns.  The backend's completion thread then runs the rest, in the same
 * order as the synchronous path: the mirror accounting, the metadata
 * commit, the range unlock and the caller's callback.  A FUSE worker thus
 * goes straight back to the next request, and completions are handled in
 * bulk instead of one wakeup per write.
 *
 * O_DSYNC/O_SYNC writes are handed from the completion thread to one
 * syncer thread, which commits the log up to the highest sequence it holds
 * and only then calls back every write it took: one log write and one pair
 * of flushes per batch (group commit), and the completion thread never
 * waits for a flush.
 *
 * Backends without asynchronous batches (libaio, file, the fault injector)
 * take the synchronous path: the callback runs before tfs_write_async
 * returns.
 *
 * Locks: the range lock is taken on the caller's thread and released on
 * the completion thread (rangelock has no owner).  Nothing here waits for
 * an asynchronous batch while holding a lock one of its continuations
 * needs: continuations take ip->lock, the log lock and the allocator
 * (through the commit), and sbc.mu (on a degraded write), all of which are
 * only ever held around synchronous work.
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

/* Something waiting for the log to be durable up to seq (syncer queue). */
struct sjob {
	struct sjob *next;
	uint64_t seq;
	void (*finish)(struct sjob *s, int ret);
};

#define WJOB_RUNS_IN 2u

struct wjob {
	struct dev_batch b;		/* first: the completion hands it back */
	struct sjob s;			/* O_DSYNC: queued for the syncer */
	struct tfs *fs;
	struct tfs_inode *ip;
	struct rl_range r;
	uint8_t *buf;
	uint64_t off;
	size_t len;
	bool dsync;
	int ret;
	uint64_t seq;
	tfs_write_cb cb;
	void *arg;
	struct mirror_wr *mw;		/* one per run of cw */
	struct dev_io *ios;		/* every mirror_wr's I/Os, flattened */
	struct cow cw;
	/* mw and ios for the usual one or two runs, without a malloc. */
	struct mirror_wr mw_in[WJOB_RUNS_IN];
	struct dev_io ios_in[WJOB_RUNS_IN * DEV_MAX];
};

/* ---- kept jobs ---- */

#define JCACHE_MAX 256u		/* per kind: about the writes W1 keeps in flight */

/* A job from @c, or malloc'ed; its contents are garbage either way. */
static void *jc_get(struct jcache *c, size_t size)
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

static void jc_put(struct jcache *c, void *p)
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

void file_async_free(struct tfs *fs)
{
	jc_free(&fs->wjc);
	jc_free(&fs->rjc);
}

static void job_finish(struct wjob *j)
{
	struct tfs *fs = j->fs;
	tfs_write_cb cb = j->cb;
	void *arg = j->arg;
	ssize_t res = j->ret ? j->ret : (ssize_t)j->len;

	fs_buf_put(fs, j->buf);
	if (j->mw != j->mw_in)
		free(j->mw);
	if (j->ios != j->ios_in)
		free(j->ios);
	jc_put(&fs->wjc, j);
	cb(arg, res);
}

/* ---- the syncer: group commit for O_DSYNC writes ---- */

static void *syncer_main(void *arg)
{
	struct tfs *fs = arg;

	pthread_setname_np(pthread_self(), "twinfs-sync");
	pthread_mutex_lock(&fs->ws_mu);
	for (;;) {
		struct sjob *list;
		uint64_t max = 0, t0;
		int ret;

		while (!fs->ws_head && !fs->ws_stop)
			pthread_cond_wait(&fs->ws_cv, &fs->ws_mu);
		if (!fs->ws_head)
			break;
		list = fs->ws_head;
		fs->ws_head = NULL;
		pthread_mutex_unlock(&fs->ws_mu);

		for (struct sjob *j = list; j; j = j->next)
			if (j->seq > max)
				max = j->seq;
		t0 = prof_begin();
		ret = log_commit(fs->log, max);
		prof_end(PROF_SYNC, t0);
		while (list) {
			struct sjob *j = list;

			list = j->next;
			j->finish(j, ret);
		}
		pthread_mutex_lock(&fs->ws_mu);
		fs->ws_busy--;	/* counts rounds, see syncer_add */
		pthread_cond_broadcast(&fs->ws_cv);
	}
	pthread_mutex_unlock(&fs->ws_mu);
	return NULL;
}

/* Queue @j for the syncer, starting it on first use.  If it cannot start,
 * commit here (the caller waits for one flush: slower, correct). */
static void syncer_add(struct tfs *fs, struct sjob *j)
{
	pthread_mutex_lock(&fs->ws_mu);
	if (!fs->ws_running && !fs->ws_stop &&
	    pthread_create(&fs->ws_thread, NULL, syncer_main, fs) == 0)
		fs->ws_running = true;
	if (!fs->ws_running) {
		pthread_mutex_unlock(&fs->ws_mu);
		j->finish(j, log_commit(fs->log, j->seq));
		return;
	}
	/* ws_busy counts the syncer's rounds still to run: one per
	 * transition of the queue from empty. */
	if (!fs->ws_head)
		fs->ws_busy++;
	j->next = fs->ws_head;
	fs->ws_head = j;
	pthread_cond_signal(&fs->ws_cv);
	pthread_mutex_unlock(&fs->ws_mu);
}

static void wjob_synced(struct sjob *s, int ret)
{
	struct wjob *j = (struct wjob *)((char *)s - offsetof(struct wjob, s));

	j->ret = ret;
	job_finish(j);
}

struct fjob {
	struct sjob s;			/* first */
	tfs_sync_cb cb;
	void *arg;
};

static void fjob_synced(struct sjob *s, int ret)
{
	struct fjob *j = (struct fjob *)s;
	tfs_sync_cb cb = j->cb;
	void *arg = j->arg;

	free(j);
	cb(arg, ret);
}

void tfs_fsync_async(struct tfs *fs, uint64_t ino, bool datasync, tfs_sync_cb cb, void *arg)
{
	struct fjob *j;

	if (!dev_async_supported(fs->be) || !(j = malloc(sizeof(*j)))) {
		cb(arg, tfs_fsync(fs, ino, datasync));
		return;
	}
	/* As tfs_fsync: everything appended so far (every write already
	 * acknowledged is). */
	j->s.seq = log_last_seq(fs->log);
	j->s.finish = fjob_synced;
	j->cb = cb;
	j->arg = arg;
	syncer_add(fs, &j->s);
}

/* ---- the completion ---- */

static void job_done(struct dev_batch *b)
{
	struct wjob *j = (struct wjob *)b;
	struct tfs *fs = j->fs;
	unsigned k = 0;
	int ret = 0;

	for (uint32_t i = 0; i < j->cw.nruns; i++) {
		struct mirror_wr *w = &j->mw[i];
		int r;

		for (unsigned d = 0; d < w->n; d++)
			w->ios[d].res = j->ios[k++].res;
		r = mirror_write_end(&fs->mirror, w, 0);
		if (r && !ret)
			ret = r;
	}
	if (ret)
		file_cow_put(fs, &j->cw);
	else
		ret = file_write_publish(fs, j->ip, j->off, j->len, &j->cw, &j->seq);
	rl_unlock(&j->ip->rl, &j->r);
	j->ret = ret;
	if (!ret && j->dsync) {
		j->s.seq = j->seq;
		j->s.finish = wjob_synced;
		syncer_add(fs, &j->s);
	} else {
		job_finish(j);
	}
}

/* Begin every run's mirror write and flatten their I/Os into one batch.
 * On error every begun write is cancelled and the blocks given back. */
static int job_prepare(struct wjob *j)
{
	struct tfs *fs = j->fs;
	unsigned total = 0;
	uint32_t i;
	int ret = 0;

	if (j->cw.nruns <= WJOB_RUNS_IN) {
		j->mw = j->mw_in;
		j->ios = j->ios_in;
	} else {
		j->mw = malloc(j->cw.nruns * sizeof(*j->mw));
		j->ios = malloc((size_t)j->cw.nruns * DEV_MAX * sizeof(*j->ios));
	}
	if (!j->mw || !j->ios) {
		file_cow_put(fs, &j->cw);
		return -ENOMEM;
	}
	for (i = 0; i < j->cw.nruns; i++) {
		ret = mirror_write_begin(&fs->mirror, j->cw.runs[i].phys,
					 j->buf + (size_t)j->cw.runs[i].off * BS,
					 j->cw.runs[i].n, &j->mw[i]);
		if (ret)
			break;
		for (unsigned d = 0; d < j->mw[i].n; d++)
			j->ios[total++] = j->mw[i].ios[d];
	}
	if (ret) {
		while (i--)
			mirror_write_cancel(&fs->mirror, &j->mw[i]);
		file_cow_put(fs, &j->cw);
		return ret;
	}
	j->b.ios = j->ios;
	j->b.n = total;
	j->b.done = job_done;
	return 0;
}

void tfs_write_async(struct tfs_file *f, off_t off, size_t len, tfs_fill_fn fill, void *ctx,
		     int flags, tfs_write_cb cb, void *arg)
{
	struct tfs *fs = f->fs;
	struct wjob *j;
	int ret;

	if (!dev_async_supported(fs->be)) {
		cb(arg, tfs_write(f, off, len, fill, ctx, flags));
		return;
	}
	/* Not zeroed whole: the cow's tables are large and filled by placement. */
	j = jc_get(&fs->wjc, sizeof(*j));
	if (j)
		memset(j, 0, offsetof(struct wjob, cw));
	if (!j) {
		cb(arg, -ENOMEM);
		return;
	}
	j->fs = fs;
	j->ip = f->ip;
	j->len = len;
	j->cb = cb;
	j->arg = arg;
	j->dsync = ((flags | f->flags) & (O_DSYNC | O_SYNC)) != 0;
	ret = file_write_enter(f, off, len, &j->r, &j->off, &j->buf);
	if (ret) {
		jc_put(&fs->wjc, j);
		cb(arg, ret < 0 ? ret : 0);
		return;
	}
	ret = file_write_stage(fs, j->ip, j->off, len, fill, ctx, j->buf, &j->cw);
	if (!ret)
		ret = job_prepare(j);
	if (ret) {
		rl_unlock(&j->ip->rl, &j->r);
		j->ret = ret;
		job_finish(j);
		return;
	}
	/* From here on job_done owns j.  If the engine will not take the
	 * batch (shutting down), run it here, synchronously. */
	ret = dev_submit_async(fs->be, &j->b);
	if (ret) {
		ret = dev_submit(fs->be, j->b.ios, j->b.n);
		if (ret)
			for (unsigned i = 0; i < j->b.n; i++)
				j->b.ios[i].res = ret;
		job_done(&j->b);
	}
}

/* ---- reads ---- */

struct rjob {
	struct dev_batch b;		/* first: the completion hands it back */
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

	rl_unlock(&j->ip->rl, &j->r);
	jc_put(&fs->rjc, j);
	if (ret) {
		fs_buf_put(fs, buf);
		cb(arg, ret, NULL, 0);
	} else {
		cb(arg, (ssize_t)n, buf, data_off);
	}
}

/* A run whose copy failed to read or verify goes on as in mirror_read:
 * the other copies are tried, the bad one repaired, errors counted. */
static void rjob_done(struct dev_batch *b)
{
	struct rjob *j = (struct rjob *)b;
	int ret = 0;

	for (unsigned i = 0; i < j->nruns && !ret; i++) {
		uint8_t *p = j->buf + (size_t)j->runs[i].off * BS;
		const uint64_t *cs = &j->csums[j->runs[i].off];
		bool ok = j->ios[i].res == 0;

		for (uint32_t k = 0; ok && k < j->runs[i].n; k++)
			ok = csum_block(p + (size_t)k * BS, j->runs[i].phys + k) == cs[k];
		if (!ok)
			ret = mirror_read_done(&j->fs->mirror, (unsigned)j->devs[i], j->ios[i].res,
					       j->runs[i].phys, p, j->runs[i].n, cs, NULL);
	}
	rjob_finish(j, ret);
}

/* One device read per physical run, from the copy mirror_read would
 * pick first; -ENODEV when no copy may serve a run. */
static int rjob_run(void *ctx, uint32_t off, uint64_t phys, uint32_t n)
{
	struct rjob *j = ctx;
	struct mirror *m = &j->fs->mirror;
	int dev = mirror_read_pick(m, phys, n);

	if (dev < 0)
		return -ENODEV;
	j->runs[j->nruns].phys = phys;
	j->runs[j->nruns].off = off;
	j->runs[j->nruns].n = n;
	j->devs[j->nruns] = dev;
	j->ios[j->nruns] = (struct dev_io){
		.dev = m->devs[dev], .op = DEV_READ, .off = phys * BS,
		.buf = j->buf + (size_t)off * BS, .len = n * BS,
	};
	j->nruns++;
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
		ssize_t n = tfs_read(f, off, len, &buf, &doff);

		cb(arg, n, buf, doff);
		return;
	}
	if (len > TFS_IO_MAX)
		len = TFS_IO_MAX;	/* a short read is allowed */
	if (len == 0 || (uint64_t)off >= file_isize(ip)) {
		cb(arg, 0, NULL, 0);
		return;
	}
	j = jc_get(&fs->rjc, sizeof(*j));
	if (!j) {
		cb(arg, -ENOMEM, NULL, 0);
		return;
	}
	j->fs = fs;
	j->ip = ip;
	j->cb = cb;
	j->arg = arg;
	j->nruns = 0;
	j->buf = fs_buf_get(fs, len);
	fb0 = (uint64_t)off / BS;
	rl_lock(&ip->rl, &j->r, fb0, file_div_up((uint64_t)off + len, BS), false);
	size = file_isize(ip);
	if ((uint64_t)off >= size) {	/* truncated before we got the lock */
		j->n = 0;
		rl_unlock(&ip->rl, &j->r);
		fs_buf_put(fs, j->buf);
		jc_put(&fs->rjc, j);
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
	ret = dev_submit_async(fs->be, &j->b);
	if (ret) {
		ret = dev_submit(fs->be, j->ios, j->nruns);
		if (ret)
			for (unsigned i = 0; i < j->nruns; i++)
				j->ios[i].res = ret;
		rjob_done(&j->b);
	}
}

void tfs_drain(struct tfs *fs)
{
	dev_async_drain(fs->be);
	pthread_mutex_lock(&fs->ws_mu);
	while (fs->ws_busy)
		pthread_cond_wait(&fs->ws_cv, &fs->ws_mu);
	pthread_mutex_unlock(&fs->ws_mu);
}

void file_async_stop(struct tfs *fs)
{
	tfs_drain(fs);
	pthread_mutex_lock(&fs->ws_mu);
	fs->ws_stop = true;
	pthread_cond_broadcast(&fs->ws_cv);
	pthread_mutex_unlock(&fs->ws_mu);
	if (fs->ws_running)
		pthread_join(fs->ws_thread, NULL);
	fs->ws_running = false;
}
