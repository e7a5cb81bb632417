// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * dev_uring_async: asynchronous batches for the io_uring backend.  Each of
 * UA_THREADS completion threads owns one ring, and batches are spread over
 * them round robin: FUSE workers queue a batch and go back
 * to reading requests instead of sleeping until their mirror writes land,
 * and the thread issues every queued batch, reaps completions in bulk and
 * runs each batch's done() (the metadata commit and the FUSE reply).  Under
 * load nobody sleeps per request: the queue and the completion ring stay
 * non-empty, which is where the synchronous path spent its time (two
 * context switches per write).
 *
 * Which thread: round robin, or for batches marked pack (reads) the first
 * thread with room (ua_pick), so fewer threads sleep and wake.
 *
 * Wakeups: the thread keeps a read armed on an eventfd.  A submitter writes
 * to it only when the thread said it was about to sleep with an empty queue,
 * so a busy thread costs submitters one mutex and no system call.
 *
 * The ring is created by the thread itself (it is the ring's only issuer, so
 * it can defer completion work to its own io_uring_enter calls).
 *
 * Fixed buffers: the bounce pool (one mapping) can be registered with every
 * ring (dev_register_buffers); an I/O whose buffer lies inside it goes as
 * READ_FIXED/WRITE_FIXED and the kernel does not pin and unpin its pages
 * on every request.  The thread registers it itself, being its ring's only
 * issuer; the caller waits for the result.
 *
 * Lock order: a.mu is a leaf.  done() runs with no engine lock held.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/uio.h>	/* RWF_DSYNC */
#include <unistd.h>

#include <liburing.h>

#include "dev.h"
#include "dev_i.h"

#define UA_RING 256u		/* SQ entries; the CQ is twice that */
#define UA_MAX_KERN 448u	/* I/Os in the kernel at once (< CQ size, 2 x UA_RING) */
#define UA_THREADS 2u		/* completion threads (2 cores: one each) */
#define UA_SPILL 16u		/* batches on a thread before the next takes any */
#define UA_EFD_TAG 1u		/* user_data of the eventfd read (not a pointer) */

struct uasync {
	pthread_mutex_t mu;
	pthread_cond_t cv;		/* init handshake, drain */
	struct dev_batch *head, **tailp;	/* queued, not issued; under mu */
	unsigned long busy;		/* batches queued or in flight; under mu */
	_Atomic unsigned long load;	/* busy, for ua_pick to read without mu */
	bool sleeping;			/* thread will wait with an empty queue; under mu */
	bool stop;			/* under mu */
	int init_ret;			/* 1 until the thread has set up; under mu */
	void *reg_base;			/* the region to register; under mu */
	size_t reg_len;
	int reg_ret;			/* 1 asked, then 0 or -errno; under mu */
	pthread_t thr;
	int efd;
	/* Owned by the thread. */
	struct io_uring ring;
	uint64_t efd_val;
	unsigned kern;			/* I/Os issued and not completed */
	struct dev_batch *pend, **pend_tail;	/* taken, not fully issued */
	unsigned pend_i;		/* next I/O of pend to issue */
	uint8_t *fix_base;		/* the registered region (buffer index 0) */
	size_t fix_len;			/* 0: none */
};

/* A free SQE.  When the SQ is full, what is in it goes to the kernel,
 * which never refuses for lack of completion space: at most UA_MAX_KERN + 1
 * I/Os are ever in flight, fewer than the CQ holds. */
static struct io_uring_sqe *ua_sqe(struct uasync *a)
{
	struct io_uring_sqe *sqe;

	while (!(sqe = io_uring_get_sqe(&a->ring)))
		if (io_uring_submit(&a->ring) < 0)
			usleep(100);
	return sqe;
}

/* Whether [p, p + len) lies in the registered region. */
static bool ua_fixed(const struct uasync *a, const uint8_t *p, uint32_t len)
{
	uintptr_t b = (uintptr_t)a->fix_base, q = (uintptr_t)p;

	return a->fix_len && q >= b && q - b + len <= a->fix_len;
}

static void ua_prep(struct uasync *a, struct dev_io *io)
{
	struct io_uring_sqe *sqe = ua_sqe(a);
	int fd = io->dev->fd;
	uint8_t *p = (uint8_t *)io->buf + io->done;
	uint32_t n = dev_io_chunk(io, io->done);
	bool fixed = ua_fixed(a, p, n);

	switch (io->op) {
	case DEV_READ:
		if (fixed)
			io_uring_prep_read_fixed(sqe, fd, p, n, io->off + io->done, 0);
		else
			io_uring_prep_read(sqe, fd, p, n, io->off + io->done);
		break;
	case DEV_WRITE:
		if (fixed)
			io_uring_prep_write_fixed(sqe, fd, p, n, io->off + io->done, 0);
		else
			io_uring_prep_write(sqe, fd, p, n, io->off + io->done);
		if (io->fua)
			sqe->rw_flags = RWF_DSYNC;
		break;
	default:
		io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
		break;
	}
	io_uring_sqe_set_data(sqe, io);
	a->kern++;
}

static void ua_arm_efd(struct uasync *a)
{
	struct io_uring_sqe *sqe = ua_sqe(a);

	io_uring_prep_read(sqe, a->efd, &a->efd_val, sizeof(a->efd_val), 0);
	io_uring_sqe_set_data64(sqe, UA_EFD_TAG);
}

/* On the thread: register @reg with the ring, answer the caller. */
static void ua_do_register(struct uasync *a, const struct iovec *reg)
{
	int ret = io_uring_register_buffers(&a->ring, reg, 1);

	if (!ret) {
		a->fix_base = reg->iov_base;
		a->fix_len = reg->iov_len;
	}
	pthread_mutex_lock(&a->mu);
	a->reg_ret = ret;
	pthread_cond_broadcast(&a->cv);
	pthread_mutex_unlock(&a->mu);
}

/* Move the queue to the thread's own list and issue from it while the
 * kernel has room: at most UA_MAX_KERN I/Os in flight, so the completion
 * ring never overflows, and a batch larger than the room goes in over
 * several rounds.  Sets a->sleeping (the queue is empty now); *stop once
 * stopping with nothing left. */
static void ua_issue(struct uasync *a, bool *stop)
{
	struct iovec reg = { NULL, 0 };

	pthread_mutex_lock(&a->mu);
	if (a->reg_ret == 1) {
		reg.iov_base = a->reg_base;
		reg.iov_len = a->reg_len;
	}
	if (a->head) {
		*a->pend_tail = a->head;
		a->pend_tail = a->tailp;
		a->head = NULL;
		a->tailp = &a->head;
	}
	a->sleeping = true;
	*stop = a->stop && !a->busy;
	pthread_mutex_unlock(&a->mu);
	if (reg.iov_len)
		ua_do_register(a, &reg);

	while (a->pend && a->kern < UA_MAX_KERN) {
		struct dev_batch *b = a->pend;

		ua_prep(a, &b->ios[a->pend_i++]);
		if (a->pend_i == b->n) {
			a->pend = b->next;
			if (!a->pend)
				a->pend_tail = &a->pend;
			a->pend_i = 0;
		}
	}
}

static void *ua_main(void *arg)
{
	struct uasync *a = arg;
	struct io_uring_params p;
	int ret;

	pthread_setname_np(pthread_self(), "twinfs-io");
	dev_on_completion_thread = true;	/* see dev_assert_may_block */
	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
	ret = io_uring_queue_init_params(UA_RING, &a->ring, &p);
	if (ret == -EINVAL)
		ret = io_uring_queue_init(UA_RING, &a->ring, 0);
	pthread_mutex_lock(&a->mu);
	a->init_ret = ret;
	pthread_cond_broadcast(&a->cv);
	pthread_mutex_unlock(&a->mu);
	if (ret)
		return NULL;
	ua_arm_efd(a);

	for (;;) {
		struct dev_batch *done = NULL, **dtail = &done;
		struct io_uring_cqe *cqe;
		unsigned head, seen = 0;
		unsigned long ndone = 0;
		bool stop, resub = false;

		ua_issue(a, &stop);
		if (stop)
			break;
		ret = io_uring_submit_and_wait(&a->ring, 1);
		if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY)
			/* Unexpected: the SQEs stay queued and go in with the
			 * next call; do not spin on the error meanwhile. */
			usleep(1000);
		io_uring_for_each_cqe(&a->ring, head, cqe) {
			uint64_t ud = io_uring_cqe_get_data64(cqe);
			struct dev_io *io;
			struct dev_batch *b;

			seen++;
			if (ud == UA_EFD_TAG) {
				ua_arm_efd(a);
				continue;
			}
			io = (struct dev_io *)(uintptr_t)ud;
			a->kern--;
			if (dev_io_progress(io, &io->done, cqe->res)) {
				ua_prep(a, io);	/* the rest of a short transfer */
				resub = true;
				continue;
			}
			b = io->batch;
			if (--b->left == 0) {
				b->next = NULL;
				*dtail = b;
				dtail = &b->next;
				ndone++;
			}
		}
		io_uring_cq_advance(&a->ring, seen);
		/* Resubmissions go in before done() runs, which may take a
		 * while.  The eventfd's re-armed read waits for the next
		 * io_uring_submit_and_wait: a wakeup meanwhile stays counted
		 * in the eventfd, and what it announced is issued only then
		 * anyway.  An enter saved per wakeup. */
		if (resub)
			io_uring_submit(&a->ring);
		while (done) {
			struct dev_batch *b = done;

			done = b->next;
			dev_note_done(b->ios, b->n);
			b->done(b);	/* may free b */
		}
		if (ndone) {
			pthread_mutex_lock(&a->mu);
			a->busy -= ndone;
			atomic_store_explicit(&a->load, a->busy, memory_order_relaxed);
			if (!a->busy)
				pthread_cond_broadcast(&a->cv);
			pthread_mutex_unlock(&a->mu);
		}
	}
	pthread_mutex_lock(&a->mu);
	if (a->reg_ret == 1) {
		a->reg_ret = -ESHUTDOWN;
		pthread_cond_broadcast(&a->cv);
	}
	pthread_mutex_unlock(&a->mu);
	io_uring_queue_exit(&a->ring);
	return NULL;
}

static int ua_submit(struct uasync *a, struct dev_batch *b)
{
	bool wake;

	for (unsigned i = 0; i < b->n; i++) {
		b->ios[i].batch = b;
		b->ios[i].done = 0;
		b->ios[i].res = 1;	/* in flight */
	}
	b->left = b->n;
	b->next = NULL;
	pthread_mutex_lock(&a->mu);
	if (a->stop) {
		pthread_mutex_unlock(&a->mu);
		return -ESHUTDOWN;
	}
	*a->tailp = b;
	a->tailp = &b->next;
	a->busy++;
	atomic_store_explicit(&a->load, a->busy, memory_order_relaxed);
	wake = a->sleeping;
	a->sleeping = false;
	pthread_mutex_unlock(&a->mu);
	if (wake) {
		uint64_t one = 1;

		/* Cannot fail short of a bug: the counter does not overflow
		 * with one increment per sleep. */
		(void)!write(a->efd, &one, sizeof(one));
	}
	return 0;
}

/* Ask the thread to register [base, base + len) and wait for it. */
static int ua_register(struct uasync *a, void *base, size_t len)
{
	uint64_t one = 1;
	int ret;

	pthread_mutex_lock(&a->mu);
	if (a->stop || a->reg_base) {	/* one region, registered once */
		pthread_mutex_unlock(&a->mu);
		return -EBUSY;
	}
	a->reg_base = base;
	a->reg_len = len;
	a->reg_ret = 1;
	pthread_mutex_unlock(&a->mu);
	/* Wake it even when it is not asleep yet: one spare turn. */
	(void)!write(a->efd, &one, sizeof(one));
	pthread_mutex_lock(&a->mu);
	while (a->reg_ret == 1)
		pthread_cond_wait(&a->cv, &a->mu);
	ret = a->reg_ret;
	pthread_mutex_unlock(&a->mu);
	return ret;
}

static void ua_drain(struct uasync *a)
{
	pthread_mutex_lock(&a->mu);
	while (a->busy)
		pthread_cond_wait(&a->cv, &a->mu);
	pthread_mutex_unlock(&a->mu);
}

static void ua_stop(struct uasync *a)
{
	uint64_t one = 1;

	pthread_mutex_lock(&a->mu);
	a->stop = true;
	pthread_mutex_unlock(&a->mu);
	(void)!write(a->efd, &one, sizeof(one));
	pthread_join(a->thr, NULL);
	close(a->efd);
	pthread_cond_destroy(&a->cv);
	pthread_mutex_destroy(&a->mu);
	free(a);
}

static int ua_start(struct uasync **out)
{
	struct uasync *a = calloc(1, sizeof(*a));
	int ret;

	if (!a)
		return -ENOMEM;
	pthread_mutex_init(&a->mu, NULL);
	pthread_cond_init(&a->cv, NULL);
	a->tailp = &a->head;
	a->pend_tail = &a->pend;
	a->init_ret = 1;
	a->efd = eventfd(0, EFD_CLOEXEC);
	if (a->efd < 0) {
		ret = -errno;
		goto err;
	}
	ret = -pthread_create(&a->thr, NULL, ua_main, a);
	if (ret)
		goto err;
	pthread_mutex_lock(&a->mu);
	while (a->init_ret == 1)
		pthread_cond_wait(&a->cv, &a->mu);
	ret = a->init_ret;
	pthread_mutex_unlock(&a->mu);
	if (ret) {
		pthread_join(a->thr, NULL);
		goto err;
	}
	*out = a;
	return 0;
err:
	if (a->efd >= 0)
		close(a->efd);
	pthread_cond_destroy(&a->cv);
	pthread_mutex_destroy(&a->mu);
	free(a);
	return ret;
}

/* ---- the backend's set of completion threads ---- */

struct uasync_set {
	unsigned n;
	_Atomic unsigned next;		/* round robin over a[] */
	struct uasync *a[UA_THREADS];
};

int dev_uring_async_start(struct dev_backend *be)
{
	struct uasync_set *set = calloc(1, sizeof(*set));
	int ret = 0;

	if (!set)
		return -ENOMEM;
	while (set->n < UA_THREADS) {
		ret = ua_start(&set->a[set->n]);
		if (ret)
			break;
		set->n++;
	}
	if (!set->n) {
		free(set);
		return ret;
	}
	be->async = set;
	return 0;
}

void dev_uring_async_stop(struct dev_backend *be)
{
	struct uasync_set *set = be->async;

	if (!set)
		return;
	for (unsigned i = 0; i < set->n; i++)
		ua_stop(set->a[i]);
	free(set);
	be->async = NULL;
}

/* A packed batch (dev_batch.pack): the first thread with fewer than
 * UA_SPILL batches, else the least loaded.  Spread round robin, 4 KiB
 * reads kept both threads falling asleep and being woken (an eventfd
 * write, a context switch each way) every few reads; one thread kept busy
 * issues and reaps them in bulk, and the next takes only what the first
 * has no room for.  Other batches go round robin: a write's done() does
 * more work, which both cores share.  @load is a hint read without the
 * lock: a stale value only moves a batch to another thread. */
static struct uasync *ua_pick(struct uasync_set *set, const struct dev_batch *b)
{
	struct uasync *best = set->a[0];
	unsigned long min = ULONG_MAX;

	if (!b->pack)
		return set->a[atomic_fetch_add(&set->next, 1) % set->n];
	for (unsigned i = 0; i < set->n; i++) {
		unsigned long l = atomic_load_explicit(&set->a[i]->load, memory_order_relaxed);

		if (l < UA_SPILL)
			return set->a[i];
		if (l < min) {
			min = l;
			best = set->a[i];
		}
	}
	return best;
}

int dev_uring_async_submit(struct dev_backend *be, struct dev_batch *b)
{
	return ua_submit(ua_pick(be->async, b), b);
}

int dev_uring_async_register(struct dev_backend *be, void *base, size_t len)
{
	struct uasync_set *set = be->async;
	int ret = 0;

	/* A thread that fails goes on without: its I/Os are pinned as before. */
	for (unsigned i = 0; i < set->n; i++) {
		int r = ua_register(set->a[i], base, len);

		if (r && !ret)
			ret = r;
	}
	return ret;
}

void dev_uring_async_drain(struct dev_backend *be)
{
	struct uasync_set *set = be->async;

	for (unsigned i = 0; i < set->n; i++)
		ua_drain(set->a[i]);
}
