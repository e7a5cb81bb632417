/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * dev_i.h: private to the dev_*.c files.  Backend constructors, the
 * per-thread context registry shared by the io_uring and libaio backends,
 * and the one rule for folding a completion into an I/O's progress.
 */
#ifndef TWINFS_DEV_I_H
#define TWINFS_DEV_I_H

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dev.h"

/* In-flight I/Os per thread context (ring entries / aio slots). */
#define DEV_QUEUE_DEPTH 128u
/* Largest single transfer handed to the kernel: results are ints. */
#define DEV_MAX_CHUNK (1u << 30)

int dev_uring_create(struct dev_backend **out);
int dev_uring_probe(void);
/* dev_uring_async.c: the io_uring backend's completion thread (be->async). */
int dev_uring_async_start(struct dev_backend *be);
void dev_uring_async_stop(struct dev_backend *be);	/* drains first */
int dev_uring_async_submit(struct dev_backend *be, struct dev_batch *b);
void dev_uring_async_drain(struct dev_backend *be);
int dev_uring_async_register(struct dev_backend *be, void *base, size_t len);
int dev_aio_create(struct dev_backend **out);
int dev_aio_probe(void);
int dev_file_create(struct dev_backend **out);
/* The discard every real backend uses (dev_ops.discard): the ioctl or
 * fallocate runs in the caller's thread (the discard worker's). */
int dev_discard_sync(struct dev_backend *be, struct dev *d, uint64_t off, uint64_t len);

/*
 * Per-thread contexts: each (thread, backend) pair gets its own context,
 * created lazily on the first I/O of that thread.  A pthread key destructor
 * frees a thread's context when the thread exits; the registry also lists
 * every live context so dev_tls_destroy() frees the ones of threads that are
 * still alive.  No thread may do I/O on, or exit while still owning a
 * context of, a backend being destroyed.
 */
struct dev_tls;

struct dev_tls_node {
	struct dev_tls *tls;
	struct dev_tls_node *next, **pprev;	/* protected by tls->lock */
};

struct dev_tls {
	pthread_key_t key;
	pthread_mutex_t lock;		/* leaf lock, protects the list */
	struct dev_tls_node *head;	/* protected by lock */
	void (*free_node)(struct dev_tls_node *n);
};

int dev_tls_init(struct dev_tls *tls, void (*free_node)(struct dev_tls_node *n));
/* This thread's context, or NULL. */
struct dev_tls_node *dev_tls_get(struct dev_tls *tls);
/* Register @n as this thread's context. 0 or -errno. */
int dev_tls_set(struct dev_tls *tls, struct dev_tls_node *n);
/* Forget and free this thread's context (after it broke). */
void dev_tls_drop(struct dev_tls *tls, struct dev_tls_node *n);
/* Free every context. */
void dev_tls_destroy(struct dev_tls *tls);

/* A backend whose private state is just its registry (io_uring, libaio):
 * be->priv is the struct dev_tls.  0 or -errno. */
int dev_tls_backend_create(const struct dev_ops *ops,
			   void (*free_node)(struct dev_tls_node *n), struct dev_backend **out);
void dev_tls_backend_destroy(struct dev_backend *be);	/* its dev_ops.destroy */

/* Per-I/O progress (bytes done) for a batch of @n: the caller's zeroed
 * @stack when it is big enough, else calloc'ed (the caller frees it if it
 * is not @stack).  NULL: out of memory. */
#define DEV_DONE_STACK 64u
static inline uint32_t *dev_done_get(uint32_t stack[DEV_DONE_STACK], unsigned n)
{
	if (n > DEV_DONE_STACK)
		return calloc(n, sizeof(uint32_t));
	memset(stack, 0, DEV_DONE_STACK * sizeof(uint32_t));
	return stack;
}

/* Bytes to issue next for @io after @done bytes completed. */
static inline uint32_t dev_io_chunk(const struct dev_io *io, uint32_t done)
{
	uint32_t left = io->len - done;

	return left > DEV_MAX_CHUNK ? DEV_MAX_CHUNK : left;
}

/*
 * Fold one completion (@res bytes or -errno) into @io whose progress is
 * @done.  Returns 1 when the rest must be issued again (short transfer,
 * EINTR, EAGAIN), 0 when the I/O is finished and io->res is set.  A transfer
 * that makes no progress (read past the end) is -EIO: retrying it would spin.
 */
static inline int dev_io_progress(struct dev_io *io, uint32_t *done, long res)
{
	if (res == -EINTR || res == -EAGAIN)
		return 1;
	if (res < 0) {
		io->res = (int)res;
		return 0;
	}
	if (io->op == DEV_FLUSH) {
		io->res = 0;
		return 0;
	}
	if (res == 0) {
		io->res = -EIO;
		return 0;
	}
	*done += (uint32_t)res;
	if (*done >= io->len) {
		io->res = 0;
		return 0;
	}
	return 1;
}

#endif
