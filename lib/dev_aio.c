// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * dev_aio: the libaio backend, for hosts that refuse io_uring.  Same shape as
 * dev_uring: every (thread, backend) pair owns a private io_context with
 * DEV_QUEUE_DEPTH iocb slots, so threads never share a completion queue.
 * Flushes are IOCB_CMD_FDSYNC; kernels or files that refuse it (EINVAL) get
 * a plain fdatasync() instead.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>	/* RWF_DSYNC */
#include <unistd.h>

#include <libaio.h>

#include "dev.h"
#include "dev_i.h"

struct aio_thr {
	struct dev_tls_node node;	/* first: the registry hands it back */
	io_context_t ctx;		/* everything below: owning thread only */
	struct iocb cbs[DEV_QUEUE_DEPTH];
	struct iocb *freecb[DEV_QUEUE_DEPTH];
	unsigned nfree;
	struct io_event ev[DEV_QUEUE_DEPTH];
};

int dev_aio_probe(void)
{
	io_context_t ctx = 0;
	int ret = io_setup(1, &ctx);

	if (!ret)
		io_destroy(ctx);
	return ret;
}

static void aio_thr_free(struct dev_tls_node *n)
{
	struct aio_thr *t = (struct aio_thr *)n;

	/* io_destroy() waits for anything still in flight. */
	io_destroy(t->ctx);
	free(t);
}

static int aio_thr_get(struct dev_backend *be, struct aio_thr **out)
{
	struct dev_tls *tls = be->priv;	/* this backend's per-thread contexts */
	struct aio_thr *t = (struct aio_thr *)dev_tls_get(tls);
	unsigned i;
	int ret;

	if (t) {
		*out = t;
		return 0;
	}
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	ret = io_setup(DEV_QUEUE_DEPTH, &t->ctx);
	if (ret) {
		free(t);
		return ret;
	}
	for (i = 0; i < DEV_QUEUE_DEPTH; i++)
		t->freecb[i] = &t->cbs[i];
	t->nfree = DEV_QUEUE_DEPTH;
	ret = dev_tls_set(tls, &t->node);
	if (ret) {
		io_destroy(t->ctx);
		free(t);
		return ret;
	}
	*out = t;
	return 0;
}

static void aio_prep(struct iocb *cb, struct dev_io *io, unsigned idx, uint32_t done)
{
	switch (io->op) {
	case DEV_READ:
		io_prep_pread(cb, io->dev->fd, (char *)io->buf + done, dev_io_chunk(io, done),
			      (long long)(io->off + done));
		break;
	case DEV_WRITE:
		io_prep_pwrite(cb, io->dev->fd, (char *)io->buf + done, dev_io_chunk(io, done),
			       (long long)(io->off + done));
		if (io->fua)
			cb->aio_rw_flags = RWF_DSYNC;
		break;
	default:
		io_prep_fdsync(cb, io->dev->fd);
		break;
	}
	cb->data = (void *)(uintptr_t)idx;
	io->res = 1;		/* in flight */
}

static int aio_submit(struct dev_backend *be, struct dev_io *ios, unsigned n)
{
	uint32_t stack_done[DEV_DONE_STACK], *done;
	struct iocb *q[DEV_QUEUE_DEPTH];
	unsigned next = 0, held = 0, nq = 0, i;
	struct aio_thr *t;
	struct iocb *cb;
	int ret, k;

	ret = aio_thr_get(be, &t);
	if (ret)
		goto fail_all;
	done = dev_done_get(stack_done, n);
	if (!done) {
		ret = -ENOMEM;
		goto fail_all;
	}

	/* held: slots taken by unfinished I/Os; q[0..nq): prepared, not yet
	 * accepted by io_submit(). */
	while (next < n || held) {
		while (next < n && t->nfree) {
			cb = t->freecb[--t->nfree];
			aio_prep(cb, &ios[next], next, 0);
			q[nq++] = cb;
			held++;
			next++;
		}
		while (nq) {
			ret = io_submit(t->ctx, (long)nq, q);
			if (ret > 0) {
				nq -= (unsigned)ret;
				memmove(q, q + ret, nq * sizeof(*q));
				continue;
			}
			if (ret == -EAGAIN || ret == -EINTR || ret == 0) {
				if (held == nq)	/* nothing to wait for: retry */
					continue;
				break;
			}
			/* q[0] itself was refused. */
			cb = q[0];
			i = (unsigned)(uintptr_t)cb->data;
			if (ret == -EINVAL && cb->aio_lio_opcode == IO_CMD_FDSYNC)
				ios[i].res = fdatasync(ios[i].dev->fd) < 0 ? -errno : 0;
			else
				ios[i].res = ret;
			t->freecb[t->nfree++] = cb;
			held--;
			nq--;
			memmove(q, q + 1, nq * sizeof(*q));
		}
		if (held == nq)
			continue;
		k = io_getevents(t->ctx, 1, DEV_QUEUE_DEPTH, t->ev, NULL);
		if (k == -EINTR)
			continue;
		if (k < 0) {
			/* The context is unusable: io_destroy() in the free
			 * path waits out the kernel's I/Os before we return. */
			for (i = 0; i < n; i++)
				if (ios[i].res > 0 || i >= next)
					ios[i].res = k;
			dev_tls_drop(be->priv, &t->node);
			break;
		}
		while (k-- > 0) {
			struct io_event *ev = &t->ev[k];

			cb = ev->obj;
			i = (unsigned)(uintptr_t)cb->data;
			if (dev_io_progress(&ios[i], &done[i], (long)ev->res)) {
				aio_prep(cb, &ios[i], i, done[i]);
				q[nq++] = cb;
			} else {
				t->freecb[t->nfree++] = cb;
				held--;
			}
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

static const struct dev_ops aio_ops = {
	.name = "libaio",
	.submit = aio_submit,
	.discard = dev_discard_sync,
	.destroy = dev_tls_backend_destroy,
};

int dev_aio_create(struct dev_backend **out)
{
	int ret = dev_aio_probe();

	if (ret)
		return ret;
	return dev_tls_backend_create(&aio_ops, aio_thr_free, out);
}
