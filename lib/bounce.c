// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * bounce: a fixed pool of 4096-aligned buffers carved out of one anonymous
 * mapping (one mapping so io_uring can register it as a single region).
 * Free buffers sit on a stack; bounce_get() sleeps on a condition variable
 * while the stack is empty, which is what bounds the daemon's memory.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "bounce.h"

#define BOUNCE_ALIGN 4096u

struct bounce_pool {
	void *base;		/* immutable after create */
	size_t map_len;
	size_t buf_size;
	unsigned count;

	/* Lock order: lock is a leaf. */
	pthread_mutex_t lock;
	pthread_cond_t nonempty;	/* signalled on put */
	void **free;			/* protected by lock */
	unsigned nfree;			/* protected by lock */
};

int bounce_pool_create(size_t buf_size, unsigned count, struct bounce_pool **out)
{
	struct bounce_pool *p;
	unsigned i;

	if (!buf_size || !count)
		return -EINVAL;
	buf_size = (buf_size + BOUNCE_ALIGN - 1) & ~(size_t)(BOUNCE_ALIGN - 1);
	if (buf_size > SIZE_MAX / count)
		return -EOVERFLOW;

	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->free = calloc(count, sizeof(*p->free));
	if (!p->free) {
		free(p);
		return -ENOMEM;
	}
	p->buf_size = buf_size;
	p->count = count;
	p->map_len = buf_size * count;
	/* mmap is page aligned, and buf_size is a multiple of 4096, so every
	 * buffer is 4096-aligned as O_DIRECT requires. */
	p->base = mmap(NULL, p->map_len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p->base == MAP_FAILED) {
		int err = -errno;

		free(p->free);
		free(p);
		return err;
	}
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->nonempty, NULL);
	/* Hand out low addresses first: push in reverse. */
	for (i = 0; i < count; i++)
		p->free[i] = (char *)p->base + (size_t)(count - 1 - i) * buf_size;
	p->nfree = count;
	*out = p;
	return 0;
}

void bounce_pool_destroy(struct bounce_pool *p)
{
	if (!p)
		return;
	munmap(p->base, p->map_len);
	pthread_cond_destroy(&p->nonempty);
	pthread_mutex_destroy(&p->lock);
	free(p->free);
	free(p);
}

void *bounce_get(struct bounce_pool *p)
{
	void *buf;

	pthread_mutex_lock(&p->lock);
	while (!p->nfree)
		pthread_cond_wait(&p->nonempty, &p->lock);
	buf = p->free[--p->nfree];
	pthread_mutex_unlock(&p->lock);
	return buf;
}

void *bounce_tryget(struct bounce_pool *p)
{
	void *buf = NULL;

	pthread_mutex_lock(&p->lock);
	if (p->nfree)
		buf = p->free[--p->nfree];
	pthread_mutex_unlock(&p->lock);
	return buf;
}

void bounce_put(struct bounce_pool *p, void *buf)
{
	if (!buf)
		return;
	/* A foreign or doubly returned buffer would corrupt the stack and
	 * later hand one buffer to two writers: stop right here instead. */
	if ((char *)buf < (char *)p->base ||
	    (size_t)((char *)buf - (char *)p->base) >= p->map_len ||
	    ((size_t)((char *)buf - (char *)p->base)) % p->buf_size)
		abort();
	pthread_mutex_lock(&p->lock);
	if (p->nfree >= p->count)
		abort();
	p->free[p->nfree++] = buf;
	pthread_cond_signal(&p->nonempty);
	pthread_mutex_unlock(&p->lock);
}

bool bounce_owns(const struct bounce_pool *p, const void *buf)
{
	return (const char *)buf >= (const char *)p->base &&
	       (size_t)((const char *)buf - (const char *)p->base) < p->map_len;
}

size_t bounce_buf_size(const struct bounce_pool *p)
{
	return p->buf_size;
}

void *bounce_base(const struct bounce_pool *p, size_t *len)
{
	if (len)
		*len = p->map_len;
	return p->base;
}
