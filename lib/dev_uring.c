// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * dev_uring: the io_uring backend.  There is no shared ring and no global
 * lock: every (thread, backend) pair owns a private ring, created on that
 * thread's first I/O, so each FUSE worker submits and reaps its own
 * completions with no cross-thread wakeups.  A batch larger than the ring is
 * fed in as completions free entries.
 *
 * Device fds are deliberately not registered as fixed files: the kernel tears
 * a closed ring down asynchronously, and a fixed-file table would keep the
 * image open, and its flock held, for a while after dev_close(), so an
 * immediate remount would get -EBUSY.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>	/* RWF_DSYNC */

#include <liburing.h>

#include "dev.h"
#include "dev_i.h"

struct uring_thr {
	struct dev_tls_node node;	/* first: the registry hands it back */
	struct io_uring ring;		/* used only by the owning thread */
};

/* Prefer a ring tied to its one submitter with completions run on our
 * io_uring_enter() (less cross-CPU work); older kernels refuse the flags. */
static int uring_ring_init(struct io_uring *ring, unsigned depth)
{
	struct io_uring_params p;
	int ret;

	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
	ret = io_uring_queue_init_params(depth, ring, &p);
	if (ret == -EINVAL)
		ret = io_uring_queue_init(depth, ring, 0);
	return ret;
}

int dev_uring_probe(void)
{
	struct io_uring ring;
	int ret = uring_ring_init(&ring, 4);

	if (!ret)
		io_uring_queue_exit(&ring);
	return ret;
}

static void uring_thr_free(struct dev_tls_node *n)
{
	struct uring_thr *t = (struct uring_thr *)n;

	io_uring_queue_exit(&t->ring);
	free(t);
}

static int uring_thr_get(struct dev_backend *be, struct uring_thr **out)
{
	struct dev_tls *tls = be->priv;	/* this backend's per-thread rings */
	struct uring_thr *t = (struct uring_thr *)dev_tls_get(tls);
	int ret;

	if (t) {
		*out = t;
		return 0;
	}
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	ret = uring_ring_init(&t->ring, DEV_QUEUE_DEPTH);
	if (ret) {
		free(t);
		return ret;
	}
	ret = dev_tls_set(tls, &t->node);
	if (ret) {
		io_uring_queue_exit(&t->ring);
		free(t);
		return ret;
	}
	*out = t;
	return 0;
}

/* Queue (the rest of) ios[idx].  Never fails for lack of SQEs: the caller
 * keeps at most DEV_QUEUE_DEPTH I/Os in flight, the ring's SQ size. */
static void uring_prep(struct uring_thr *t, struct dev_io *io, unsigned idx, uint32_t done)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&t->ring);
	int fd = io->dev->fd;

	switch (io->op) {
	case DEV_READ:
		io_uring_prep_read(sqe, fd, (char *)io->buf + done, dev_io_chunk(io, done),
				   io->off + done);
		break;
	case DEV_WRITE:
		io_uring_prep_write(sqe, fd, (char *)io->buf + done, dev_io_chunk(io, done),
				    io->off + done);
		if (io->fua)
			sqe->rw_flags = RWF_DSYNC;
		break;
	default:
		io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
		break;
	}
	io_uring_sqe_set_data64(sqe, idx);
	io->res = 1;		/* in flight */
}

/*
 * The ring refused io_uring_enter() for a reason retrying will not fix.
 * Wait for what the kernel already holds (its buffers are the caller's),
 * fail the rest, then throw the ring away; the next I/O builds a new one.
 */
static void uring_abort(struct dev_backend *be, struct uring_thr *t,
			struct dev_io *ios, unsigned n, uint32_t *done,
			unsigned inflight, int err)
{
	unsigned kern = inflight - io_uring_sq_ready(&t->ring);
	struct io_uring_cqe *cqe;
	unsigned i;
	int ret;

	while (kern) {
		ret = io_uring_wait_cqe(&t->ring, &cqe);
		if (ret == -EINTR)
			continue;
		if (ret < 0)
			break;
		i = (unsigned)io_uring_cqe_get_data64(cqe);
		if (dev_io_progress(&ios[i], &done[i], cqe->res))
			ios[i].res = err;
		io_uring_cqe_seen(&t->ring, cqe);
		kern--;
	}
	for (i = 0; i < n; i++)
		if (ios[i].res > 0)
			ios[i].res = err;
	dev_tls_drop(be->priv, &t->node);
}

static int uring_submit(struct dev_backend *be, struct dev_io *ios, unsigned n)
{
	uint32_t stack_done[DEV_DONE_STACK], *done;
	unsigned next = 0, inflight = 0, i;
	struct io_uring_cqe *cqe;
	struct uring_thr *t;
	int ret;

	ret = uring_thr_get(be, &t);
	if (ret)
		goto fail_all;
	done = dev_done_get(stack_done, n);
	if (!done) {
		ret = -ENOMEM;
		goto fail_all;
	}
	for (i = 0; i < n; i++)
		ios[i].res = 1;

	while (next < n || inflight) {
		while (next < n && inflight < DEV_QUEUE_DEPTH) {
			uring_prep(t, &ios[next], next, 0);
			next++;
			inflight++;
		}
		ret = io_uring_submit_and_wait(&t->ring, 1);
		if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY) {
			uring_abort(be, t, ios, n, done, inflight, ret);
			break;
		}
		while (!io_uring_peek_cqe(&t->ring, &cqe)) {
			i = (unsigned)io_uring_cqe_get_data64(cqe);
			ret = cqe->res;
			io_uring_cqe_seen(&t->ring, cqe);
			if (dev_io_progress(&ios[i], &done[i], ret))
				uring_prep(t, &ios[i], i, done[i]);
			else
				inflight--;
		}
	}
	if (done != stack_done)
		free(done);
	return 0;

fail_all:
	for (i = 0; i < n; i++)
		ios[i].res = ret;
	return ret;
}

static void uring_destroy(struct dev_backend *be)
{
	dev_uring_async_stop(be);
	dev_tls_backend_destroy(be);
}

static const struct dev_ops uring_ops = {
	.name = "io_uring",
	.submit = uring_submit,
	.discard = dev_discard_sync,
	.submit_async = dev_uring_async_submit,
	.drain = dev_uring_async_drain,
	.register_buffers = dev_uring_async_register,
	.destroy = uring_destroy,
};

int dev_uring_create(struct dev_backend **out)
{
	/* Fail here, not on the first I/O, when io_uring is refused. */
	int ret = dev_uring_probe();

	if (ret)
		return ret;
	ret = dev_tls_backend_create(&uring_ops, uring_thr_free, out);
	if (ret)
		return ret;
	/* Without the completion thread every batch is synchronous: slower,
	 * not wrong. */
	(void)dev_uring_async_start(*out);
	return 0;
}
