// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * slow: requests that wait for the kernel to send, and a worker to answer,
 * other requests, each run on a thread of its own (counted in slow_n, which
 * unmount drains): with a small pool of workers a few of them at once would
 * hold every worker and wait for each other.  LSEEK's SEEK_DATA/SEEK_HOLE
 * (the kernel writes dirty pages back first), and dropping from the page
 * cache what a direct write to a file with cached opens wrote (ops.c
 * struct direct_write).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "daemon_i.h"
#include "tlog.h"

struct slow_job {
	struct tfsd *d;
	void (*fn)(void *);
	void *arg;
};

static void *slow_main(void *p)
{
	struct slow_job *sj = p;
	struct tfsd *d = sj->d;

	sj->fn(sj->arg);
	free(sj);
	pthread_mutex_lock(&d->slow_mu);
	if (!--d->slow_n)
		pthread_cond_broadcast(&d->slow_cv);
	pthread_mutex_unlock(&d->slow_mu);
	return NULL;
}

/* Run fn(arg) on a detached thread; false if none could be started (the
 * caller then runs it itself). */
static bool slow_start(struct tfsd *d, void (*fn)(void *), void *arg)
{
	struct slow_job *sj = malloc(sizeof(*sj));
	pthread_attr_t attr;
	pthread_t th;
	bool started = false;

	if (!sj || pthread_attr_init(&attr) != 0) {
		free(sj);
		return false;
	}
	*sj = (struct slow_job){ .d = d, .fn = fn, .arg = arg };
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_mutex_lock(&d->slow_mu);
	started = pthread_create(&th, &attr, slow_main, sj) == 0;
	d->slow_n += started;
	pthread_mutex_unlock(&d->slow_mu);
	pthread_attr_destroy(&attr);
	if (!started)
		free(sj);
	return started;
}

void tfsd_slow_drain(struct tfsd *d)
{
	pthread_mutex_lock(&d->slow_mu);
	while (d->slow_n)
		pthread_cond_wait(&d->slow_cv, &d->slow_mu);
	pthread_mutex_unlock(&d->slow_mu);
}

struct inval_job {
	struct tfsd *d;
	fuse_ino_t ino;
	off_t off;
	size_t n;
};

static void inval_run(void *arg)
{
	struct inval_job *r = arg;

	fuse_lowlevel_notify_inval_inode(r->d->se, r->ino, r->off, (off_t)r->n);
	free(r);
}

/* After the reply, not before it: while the kernel waits for a direct
 * write's reply it holds back the writeback that dropping dirty pages of
 * a shared map needs, and the two would wait for each other. */
void tfsd_reply_write_inval(fuse_req_t req, fuse_ino_t ino, off_t off, size_t n)
{
	struct tfsd *d = req_d(req);
	struct inval_job *r = malloc(sizeof(*r));

	fuse_reply_write(req, n);
	if (!r)
		return;
	*r = (struct inval_job){ .d = d, .ino = ino, .off = off, .n = n };
	if (!slow_start(d, inval_run, r))
		free(r);
}

struct lseek_job {
	fuse_req_t req;
	fuse_ino_t ino;
	off_t off;
	int whence;
	struct tfs_file *f;
	bool inval;
};

static void lseek_run(struct lseek_job *j)
{
	struct tfsd *d = req_d(j->req);
	off_t ret;

	if (j->inval)
		fuse_lowlevel_notify_inval_inode(d->se, j->ino, j->off, 0);
	/* The extents of what was written, also of what that wrote back. */
	tfsd_wb_wait(d, j->ino, false);
	ret = tfs_lseek(j->f, j->off, j->whence);
	if (ret < 0)
		reply_err(j->req, ret);
	else
		fuse_reply_lseek(j->req, ret);
}

static void lseek_job_run(void *arg)
{
	lseek_run(arg);
	free(arg);
}

void tfsd_op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		     struct fuse_file_info *fi)
{
	struct tfsd *d = req_d(req);
	struct lseek_job j = { .req = req, .ino = ino, .off = off, .whence = whence,
			       .f = ((struct tfsd_file *)(uintptr_t)fi->fh)->f }, *hj;

	/* The kernel does not write dirty pages back before FUSE_LSEEK, so
	 * data still in the page cache (writeback_cache, shared mmap) would
	 * look like a hole, or past our EOF.  Invalidating [off, EOF) makes
	 * the kernel write those pages to us first (launder) and waits for
	 * them.  Under -o writethrough every open is direct, and only a
	 * shared mapping leaves dirty pages: only when the kernel allows
	 * those (fuseio.c). */
	j.inval = (!d->writethrough || atomic_load(&d->dio_mmap)) &&
		  (whence == SEEK_DATA || whence == SEEK_HOLE) && off >= 0;
	if (!j.inval) {
		lseek_run(&j);
		return;
	}
	/* That wait is for WRITE requests only a free worker can answer: with
	 * a small pool, a few concurrent lseeks would hold every worker and
	 * wait for each other.  So it runs on a thread of its own. */
	hj = malloc(sizeof(*hj));
	if (hj) {
		*hj = j;
		if (slow_start(d, lseek_job_run, hj))
			return;
		free(hj);
	}
	lseek_run(&j);
}

