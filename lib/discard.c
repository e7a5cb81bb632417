// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * discard: the discard queue and its worker, the per-mount glue (device
 * probing, the allocator hook, stats) and the trim job.  See discard.h for
 * the safety rule; this file only ever discards runs the allocator holds.
 *
 * Lock order: the queue's mu and the trim mu are leaves.  The allocator
 * calls discard_q_add under its group locks; the worker and the trim
 * thread call into the allocator (alloc_unhold, alloc_hold_free) and the
 * devices holding neither.  Trim covers the data area without the
 * metadata reserve: in version 1 the reserve holds the previous
 * checkpoint, the fallback of a lost newest superblock (ckpt_write).  A
 * checkpoint waits for the queue (discard_flush) under ckpt_mu, and neither
 * thread here takes it.
 *
 * Version 2's tree nodes live in the node area (fspace.h): a second queue
 * takes the nodes a published commit freed once the next commit is
 * published too (fspace_set_node_discard: then no superblock slot names a
 * tree that uses them), and trim covers the node area's free slots but the
 * fallback's (fspace_node_hold_free).  Both hold the slots in the node map
 * until their discard is done, as the allocator holds data blocks.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "discard.h"
#include "fs_i.h"
#include "fspace.h"
#include "json.h"
#include "log.h"
#include "tlog.h"

#define DISCARD_DELAY_MS 50u
/* A trim holds at most this many blocks (8 MiB) at a time: an allocation
 * that finds nothing else waits for at most one chunk's discard. */
#define TRIM_CHUNK 2048u

/* ---- the queue ---- */

struct drun {
	uint64_t blk, n;
};

struct discard_q {
	const struct discard_q_ops *ops;
	void *ctx;
	unsigned delay_ms;
	pthread_t thr;

	pthread_mutex_t mu;		/* leaf: everything below */
	pthread_cond_t cv;		/* work queued, flush or stop */
	pthread_cond_t idle_cv;		/* queue empty and worker idle */
	struct drun *v;
	size_t n, cap;
	bool busy;			/* the worker holds a batch */
	bool hurry;			/* a flush: skip the batching delay */
	bool stop, issue_rest;
	struct discard_q_stats st;
};

static int drun_cmp(const void *a, const void *b)
{
	const struct drun *x = a, *y = b;

	return x->blk < y->blk ? -1 : x->blk > y->blk;
}

/* Sort and merge touching runs; returns the new count. */
static size_t drun_merge(struct drun *v, size_t n)
{
	size_t k = 0;

	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), drun_cmp);
	for (size_t i = 1; i < n; i++) {
		if (v[k].blk + v[k].n == v[i].blk)
			v[k].n += v[i].n;
		else
			v[++k] = v[i];
	}
	return k + 1;
}

static void *q_main(void *arg)
{
	struct discard_q *q = arg;

	pthread_mutex_lock(&q->mu);
	for (;;) {
		while (!q->n && !q->stop)
			pthread_cond_wait(&q->cv, &q->mu);
		if (!q->n)
			break;
		if (!q->stop && !q->hurry && q->delay_ms) {
			/* Let the rest of a commit's frees arrive and merge. */
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += (long)(q->delay_ms % 1000) * 1000000L;
			ts.tv_sec += q->delay_ms / 1000 + ts.tv_nsec / 1000000000L;
			ts.tv_nsec %= 1000000000L;
			while (!q->stop && !q->hurry &&
			       pthread_cond_timedwait(&q->cv, &q->mu, &ts) == 0)
				;
		}
		struct drun *v = q->v;
		size_t n = q->n;
		bool issue = !q->stop || q->issue_rest;

		q->v = NULL;
		q->n = q->cap = 0;
		q->busy = true;
		q->hurry = false;
		pthread_mutex_unlock(&q->mu);

		uint64_t ok = 0, err = 0, nb = 0;

		for (size_t i = 0; i < n; i++)
			nb += v[i].n;
		n = drun_merge(v, n);
		for (size_t i = 0; i < n; i++) {
			int r = issue ? q->ops->issue(q->ctx, v[i].blk, v[i].n) : 0;

			if (r < 0)
				err++;
			else if (issue)
				ok += v[i].n;
			/* Blocks go back to the free pool only now: nothing can
			 * have been written to them while the discard ran. */
			q->ops->done(q->ctx, v[i].blk, v[i].n, issue && r == 0);
		}
		free(v);

		pthread_mutex_lock(&q->mu);
		q->st.queued_blocks -= nb;
		q->st.discarded_blocks += ok;
		q->st.runs_issued += issue ? n : 0;
		q->st.errors += err;
		q->st.batches++;
		q->busy = false;
		if (!q->n)
			pthread_cond_broadcast(&q->idle_cv);
	}
	pthread_mutex_unlock(&q->mu);
	return NULL;
}

int discard_q_create(const struct discard_q_ops *ops, void *ctx, unsigned delay_ms,
		     struct discard_q **out)
{
	struct discard_q *q = calloc(1, sizeof(*q));
	int ret;

	if (!q)
		return -ENOMEM;
	q->ops = ops;
	q->ctx = ctx;
	q->delay_ms = delay_ms;
	pthread_mutex_init(&q->mu, NULL);
	pthread_cond_init(&q->cv, NULL);
	pthread_cond_init(&q->idle_cv, NULL);
	ret = -pthread_create(&q->thr, NULL, q_main, q);
	if (ret) {
		pthread_cond_destroy(&q->idle_cv);
		pthread_cond_destroy(&q->cv);
		pthread_mutex_destroy(&q->mu);
		free(q);
		return ret;
	}
	*out = q;
	return 0;
}

int discard_q_add(struct discard_q *q, uint64_t blk, uint64_t n)
{
	int ret = 0;

	pthread_mutex_lock(&q->mu);
	if (q->stop) {
		ret = -ESHUTDOWN;
		goto out;
	}
	if (q->n && q->v[q->n - 1].blk + q->v[q->n - 1].n == blk) {
		q->v[q->n - 1].n += n;	/* the common case: one extent in pieces */
	} else {
		if (q->n == q->cap) {
			size_t cap = q->cap ? q->cap * 2 : 64;
			struct drun *v = realloc(q->v, cap * sizeof(*v));

			if (!v) {
				ret = -ENOMEM;
				goto out;
			}
			q->v = v;
			q->cap = cap;
		}
		q->v[q->n++] = (struct drun){ blk, n };
	}
	q->st.runs_in++;
	q->st.queued_blocks += n;
	pthread_cond_signal(&q->cv);
out:
	pthread_mutex_unlock(&q->mu);
	return ret;
}

void discard_q_flush(struct discard_q *q)
{
	pthread_mutex_lock(&q->mu);
	q->hurry = true;
	pthread_cond_signal(&q->cv);
	while (q->n || q->busy)
		pthread_cond_wait(&q->idle_cv, &q->mu);
	pthread_mutex_unlock(&q->mu);
}

void discard_q_destroy(struct discard_q *q, bool issue)
{
	if (!q)
		return;
	pthread_mutex_lock(&q->mu);
	q->stop = true;
	q->issue_rest = issue;
	pthread_cond_signal(&q->cv);
	pthread_mutex_unlock(&q->mu);
	pthread_join(q->thr, NULL);
	free(q->v);
	pthread_cond_destroy(&q->idle_cv);
	pthread_cond_destroy(&q->cv);
	pthread_mutex_destroy(&q->mu);
	free(q);
}

void discard_q_get_stats(struct discard_q *q, struct discard_q_stats *st)
{
	pthread_mutex_lock(&q->mu);
	*st = q->st;
	pthread_mutex_unlock(&q->mu);
}

/* ---- a mounted file system ---- */

enum { TRIM_NONE, TRIM_RUNNING, TRIM_FINISHED, TRIM_FAILED };

struct discard {
	struct tfs *fs;
	struct discard_q *q;		/* NULL with -o nodiscard */
	struct discard_q *mq;		/* v2 tree nodes; NULL: none */
	struct fspace *fsp;		/* fs->v2fsp, until discard_nodes_free */
	_Atomic uint64_t trim_meta;	/* node bytes trims discarded */
	struct tlog_rl rl;
	_Atomic uint64_t issue_errors;

	pthread_mutex_t mu;		/* leaf: the trim job below */
	pthread_t thr;
	bool thr_live;
	_Atomic bool cancel;
	int state, err;
	uint64_t bytes_done, bytes_total;	/* discarded / free at the start */
	uint64_t pos, span;			/* blocks walked / area size */
	struct timespec t0, t1;
};

/* Discard a run on every device in sync; a device out of sync (failed,
 * stale, rebuilding) keeps its blocks: a rebuild decides what it gets. */
static int fs_issue(void *ctx, uint64_t blk, uint64_t n)
{
	struct discard *dc = ctx;
	struct tfs *fs = dc->fs;
	int ret = 0;

	for (unsigned i = 0; i < fs->mirror.ndevs; i++) {
		struct dev *d = fs->mirror.devs[i];
		int r;

		if (!d || atomic_load(&fs->mirror.state[i]) != MDEV_OK ||
		    atomic_load(&d->discard) == DEV_DISCARD_NONE)
			continue;
		r = dev_discard(fs->be, d, blk * TFS_BLOCK_SIZE, n * TFS_BLOCK_SIZE);
		if (r == -EOPNOTSUPP) {
			/* Said once: the device is not asked again. */
			if (atomic_exchange(&d->discard, DEV_DISCARD_NONE) != DEV_DISCARD_NONE)
				tfs_log(LOG_NOTICE, "%s: discard: unsupported after all; "
					"freed blocks stay allocated on it", d->path);
			continue;
		}
		if (r < 0) {
			atomic_fetch_add(&dc->issue_errors, 1);
			tfs_log_ratelimited(&dc->rl, LOG_WARNING, "%s: discard of %llu blocks "
					    "at block %llu failed: %s", d->path,
					    (unsigned long long)n, (unsigned long long)blk,
					    strerror(-r));
			ret = r;
		}
	}
	return ret;
}

static void fs_done(void *ctx, uint64_t blk, uint64_t n, bool discarded)
{
	struct discard *dc = ctx;

	alloc_unhold(dc->fs->alloc, blk, n);
}

static const struct discard_q_ops fs_qops = { .issue = fs_issue, .done = fs_done };

static int fs_hook(void *ctx, uint64_t blk, uint64_t n)
{
	struct discard *dc = ctx;

	return discard_q_add(dc->q, blk, n);
}

static void node_done(void *ctx, uint64_t blk, uint64_t n, bool discarded)
{
	struct discard *dc = ctx;

	fspace_node_unhold(dc->fsp, blk, n);
}

static const struct discard_q_ops node_qops = { .issue = fs_issue, .done = node_done };

static int node_hook(void *ctx, uint64_t addr, uint64_t n)
{
	struct discard *dc = ctx;

	return discard_q_add(dc->mq, addr, n);
}

int discard_start(struct tfs *fs, bool on)
{
	struct discard *dc = calloc(1, sizeof(*dc));
	int ret;

	if (!dc)
		return -ENOMEM;
	dc->fs = fs;
	pthread_mutex_init(&dc->mu, NULL);
	for (unsigned i = 0; i < fs->mirror.ndevs; i++) {
		struct dev *d = fs->mirror.devs[i];
		int mode;

		if (!d)
			continue;
		mode = dev_discard_probe(d);
		/* Said once, where it matters; status shows every device's
		 * method (a mount stays quiet otherwise: it may still be
		 * writing to the user's terminal). */
		tfs_log(mode == DEV_DISCARD_NONE ? LOG_NOTICE : LOG_DEBUG,
			"%s: discard: %s%s", d->path, dev_discard_name(mode),
			mode == DEV_DISCARD_NONE ? " (neither BLKDISCARD nor hole punching works; "
			"freed blocks stay allocated on it)" : "");
	}
	if (on) {
		ret = discard_q_create(&fs_qops, dc, DISCARD_DELAY_MS, &dc->q);
		if (ret < 0) {
			pthread_mutex_destroy(&dc->mu);
			free(dc);
			return ret;
		}
		alloc_set_discard(fs->alloc, fs_hook, dc);
	}
	dc->fsp = fs->v2fsp;
	if (on && dc->fsp && discard_q_create(&node_qops, dc, DISCARD_DELAY_MS, &dc->mq) == 0)
		fspace_set_node_discard(dc->fsp, node_hook, dc);
	fs->discard = dc;
	return 0;
}

static void trim_join(struct discard *dc)
{
	atomic_store(&dc->cancel, true);
	if (dc->thr_live) {
		pthread_join(dc->thr, NULL);
		dc->thr_live = false;
	}
}

/* The node side: before the trees go (fs_free frees them before the rest
 * of the discard state).  Held nodes go back to the node map. */
static void nodes_end(struct discard *dc, bool issue)
{
	trim_join(dc);
	if (dc->mq)
		fspace_set_node_discard(dc->fsp, NULL, NULL);
	discard_q_destroy(dc->mq, issue);
	dc->mq = NULL;
}

void discard_nodes_free(struct tfs *fs)
{
	if (fs->discard) {
		nodes_end(fs->discard, false);
		fs->discard->fsp = NULL;
	}
}

static void discard_end(struct tfs *fs, bool issue)
{
	struct discard *dc = fs->discard;

	if (!dc)
		return;
	nodes_end(dc, issue);
	/* Every other thread that frees blocks has stopped by now (unmount,
	 * abandon, failed mount): later frees go straight to the free pool. */
	if (dc->q)
		alloc_set_discard(fs->alloc, NULL, NULL);
	/* Runs still queued are held: they go back to the allocator (after
	 * their discard when @issue) before it can be destroyed. */
	discard_q_destroy(dc->q, issue);
	dc->q = NULL;
}

void discard_stop(struct tfs *fs)
{
	discard_end(fs, true);
}

void discard_free(struct tfs *fs)
{
	struct discard *dc = fs->discard;

	if (!dc)
		return;
	discard_end(fs, false);
	pthread_mutex_destroy(&dc->mu);
	free(dc);
	fs->discard = NULL;
}

void discard_flush(struct tfs *fs)
{
	if (fs->discard && fs->discard->q)
		discard_q_flush(fs->discard->q);
	if (fs->discard && fs->discard->mq)
		discard_q_flush(fs->discard->mq);
}

void discard_stats_json(struct tfs *fs, struct jbuf *j)
{
	struct discard *dc = fs->discard;
	struct discard_q_stats st = { 0 }, ms = { 0 };

	jb_obj_begin(j, "discard");
	jb_bool(j, "enabled", dc && dc->q);
	if (dc && dc->q)
		discard_q_get_stats(dc->q, &st);
	if (dc && dc->mq)
		discard_q_get_stats(dc->mq, &ms);
	jb_u64(j, "queued_bytes", st.queued_blocks * TFS_BLOCK_SIZE);
	jb_u64(j, "discarded_bytes", st.discarded_blocks * TFS_BLOCK_SIZE);
	/* Format v2's tree nodes (the metadata area), by the queue and by
	 * trims: not in discarded_bytes, which counts data. */
	jb_u64(j, "meta_queued_bytes", ms.queued_blocks * TFS_BLOCK_SIZE);
	jb_u64(j, "meta_bytes", ms.discarded_blocks * TFS_BLOCK_SIZE +
	       (dc ? atomic_load(&dc->trim_meta) : 0));
	jb_u64(j, "meta_held_bytes", dc && dc->fsp ?
	       fspace_nodes_held(dc->fsp) * BNODE_SIZE : 0);
	jb_u64(j, "held_bytes", fs->alloc ? alloc_held_blocks(fs->alloc) * TFS_BLOCK_SIZE : 0);
	jb_u64(j, "batches", st.batches + ms.batches);
	jb_u64(j, "runs_issued", st.runs_issued + ms.runs_issued);
	jb_u64(j, "errors", dc ? atomic_load(&dc->issue_errors) : 0);
	jb_obj_end(j);
}

/* ---- trim ---- */

static double ts_diff(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) / 1e9;
}

static void trim_progress(struct discard *dc, uint64_t pos, int r, uint64_t n, bool meta)
{
	pthread_mutex_lock(&dc->mu);
	if (r == 0)
		dc->bytes_done += n * TFS_BLOCK_SIZE;
	dc->pos = pos - dc->fs->sb.data_start;
	pthread_mutex_unlock(&dc->mu);
	if (r == 0 && meta)
		atomic_fetch_add(&dc->trim_meta, n * TFS_BLOCK_SIZE);
}

/* Version 2's node area: its free slots but those of the tree the older
 * superblock slot names (fspace_node_hold_free); the end of the area, or
 * UINT64_MAX when cancelled. */
static uint64_t trim_nodes(struct discard *dc, int *err)
{
	struct tfs *fs = dc->fs;
	uint64_t pos = fs->sb.node_start, end = pos + fs->sb.node_blocks, blk, n;

	while (!atomic_load(&dc->cancel)) {
		int r = fspace_node_hold_free(dc->fsp, pos, TRIM_CHUNK / BNODE_BLOCKS, &blk, &n);

		if (r == -EAGAIN)	/* never after mount's own checkpoint */
			tfs_log(LOG_NOTICE, "trim: the node area is left as it is: which nodes "
				"the previous superblock needs is not known yet");
		if (r < 0)
			return end;
		r = fs_issue(dc, blk, n);
		fspace_node_unhold(dc->fsp, blk, n);
		if (r < 0 && !*err)
			*err = r;
		pos = blk + n;
		trim_progress(dc, pos, r, n, true);
	}
	return UINT64_MAX;
}

static void *trim_main(void *arg)
{
	struct discard *dc = arg;
	struct tfs *fs = dc->fs;
	uint64_t pos = fs->sb.data_start, blk, n, rs, re;
	int err = 0;

	if (alloc_reserve_range(fs->alloc, &rs, &re) < 0)
		rs = UINT64_MAX;
	if (dc->fsp)
		pos = trim_nodes(dc, &err);
	while (pos != UINT64_MAX && !atomic_load(&dc->cancel)) {
		int r = alloc_hold_free(fs->alloc, pos, TRIM_CHUNK, &blk, &n);

		if (r == 0 && blk >= rs) {
			/* The metadata reserve is never trimmed: a freed
			 * checkpoint there is the fallback of the superblock
			 * slot before the newest (see ckpt_write). */
			alloc_unhold(fs->alloc, blk, n);
			r = -ENOENT;
		}
		if (r == 0) {
			r = fs_issue(dc, blk, n);
			alloc_unhold(fs->alloc, blk, n);
			if (r < 0 && !err)
				err = r;
		}
		if (r == -ENOENT)
			break;
		pos = blk + n;
		trim_progress(dc, pos, r, n, false);
	}
	pthread_mutex_lock(&dc->mu);
	clock_gettime(CLOCK_MONOTONIC, &dc->t1);
	dc->err = err;
	dc->state = err ? TRIM_FAILED : TRIM_FINISHED;
	if (!err)
		dc->pos = dc->span;
	pthread_mutex_unlock(&dc->mu);
	tfs_log(LOG_INFO, "trim %s: %llu MiB of free space discarded in %.1f s",
		err ? "stopped early" : "finished",
		(unsigned long long)(dc->bytes_done >> 20), ts_diff(&dc->t0, &dc->t1));
	return NULL;
}

int discard_trim_start(struct tfs *fs)
{
	struct discard *dc = fs->discard;
	int ret;

	if (!dc || fs->readonly)
		return -EROFS;
	/* Blocks a delete freed are held until its record is durable: commit
	 * it first, or a trim right after rm(1) would skip them. */
	if (alloc_deferred_blocks(fs->alloc)) {
		ret = log_commit(fs->log, UINT64_MAX);
		if (ret < 0)
			return ret;
	}
	pthread_mutex_lock(&dc->mu);
	if (dc->state == TRIM_RUNNING) {
		pthread_mutex_unlock(&dc->mu);
		return -EBUSY;
	}
	if (dc->thr_live) {
		pthread_join(dc->thr, NULL);	/* finished: reap it */
		dc->thr_live = false;
	}
	atomic_store(&dc->cancel, false);
	dc->state = TRIM_RUNNING;
	dc->err = 0;
	dc->bytes_done = 0;
	dc->bytes_total = alloc_free_blocks(fs->alloc) * TFS_BLOCK_SIZE;
	if (dc->fsp)
		dc->bytes_total += (fs->sb.node_blocks / BNODE_BLOCKS -
				    fspace_nodes_used(dc->fsp)) * BNODE_SIZE;
	dc->pos = 0;
	dc->span = fs->sb.total_blocks - fs->sb.data_start;
	clock_gettime(CLOCK_MONOTONIC, &dc->t0);
	ret = -pthread_create(&dc->thr, NULL, trim_main, dc);
	if (ret)
		dc->state = TRIM_NONE;
	else
		dc->thr_live = true;
	pthread_mutex_unlock(&dc->mu);
	return ret;
}

/* The trim that is running, or a new one, to its end: fstrim(8)'s FITRIM
 * waits for it.  Polled: a trim takes seconds and runs rarely. */
int tfs_trim(struct tfs *fs, uint64_t *bytes)
{
	struct discard *dc = fs->discard;
	int ret = discard_trim_start(fs), state;

	if (ret < 0 && ret != -EBUSY)
		return ret;
	for (;;) {
		pthread_mutex_lock(&dc->mu);
		state = dc->state;
		*bytes = dc->bytes_done;
		ret = dc->err;
		pthread_mutex_unlock(&dc->mu);
		if (state != TRIM_RUNNING)
			return ret;
		usleep(20 * 1000);
	}
}

void discard_trim_status_json(struct tfs *fs, struct jbuf *j)
{
	static const char *const names[] = { "none", "running", "finished", "failed" };
	struct discard *dc = fs->discard;
	struct timespec now;
	double el, rate, pct;

	if (!dc) {
		jb_str(j, "state", "none");
		return;
	}
	pthread_mutex_lock(&dc->mu);
	clock_gettime(CLOCK_MONOTONIC, &now);
	el = dc->state == TRIM_NONE ? 0 :
	     ts_diff(&dc->t0, dc->state == TRIM_RUNNING ? &now : &dc->t1);
	rate = el > 0 ? (double)dc->bytes_done / el : 0;
	pct = dc->span ? 100.0 * (double)dc->pos / (double)dc->span : 0;
	jb_str(j, "state", names[dc->state]);
	jb_u64(j, "bytes_done", dc->bytes_done);
	jb_u64(j, "bytes_total", dc->bytes_total);
	jb_double(j, "percent", dc->state == TRIM_FINISHED ? 100.0 : pct);
	jb_double(j, "elapsed_s", el);
	jb_double(j, "rate_bps", rate);
	jb_double(j, "eta_s", dc->state == TRIM_RUNNING && pct > 0 ?
		  el * (100.0 - pct) / pct : 0);
	if (dc->err)
		jb_str(j, "error", strerror(-dc->err));
	jb_arr_begin(j, "devices");
	for (unsigned i = 0; i < fs->mirror.ndevs; i++) {
		struct dev *d = fs->mirror.devs[i];

		jb_obj_begin(j, NULL);
		jb_str(j, "path", d ? d->path : NULL);
		jb_str(j, "discard", d ? dev_discard_name(atomic_load(&d->discard)) : "unknown");
		jb_obj_end(j);
	}
	jb_arr_end(j);
	pthread_mutex_unlock(&dc->mu);
}

/* ---- ctl commands ---- */

static int cmd_trim(struct tfs *fs, int argc, char **argv, struct jbuf *j)
{
	int ret;

	if (argc)
		return -EINVAL;
	ret = discard_trim_start(fs);
	if (ret == -EBUSY) {
		jb_error(j, "a trim is already running");
		return ret;
	}
	if (ret < 0)
		return ret;
	discard_trim_status_json(fs, j);
	return 0;
}

static int cmd_trim_status(struct tfs *fs, int argc, char **argv, struct jbuf *j)
{
	discard_trim_status_json(fs, j);
	return 0;
}

const struct ctl_cmd ctl_discard_cmds[] = {
	{ "trim", "trim", cmd_trim },
	{ "trim status", "trim status", cmd_trim_status },
	{ NULL, NULL, NULL },
};
