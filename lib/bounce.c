// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * bounce: a fixed pool of 4096-aligned buffers carved out of one anonymous
 * mapping (one mapping so io_uring can register it as a single region).
 * Free buffers sit on a stack; bounce_get() sleeps on a condition variable
 * while the stack is empty, which is what bounds the daemon's memory.
 *
 * The first `kept` buffers have a stack of their own, served first, so
 * the steady load stays on them (they may be pinned as io_uring fixed
 * buffers).  The others only serve bursts deeper than that: once no burst
 * took one for a whole bounce_pool_trim period, trim gives their touched
 * pages back to the kernel, so a burst does not stay in the daemon's RSS.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "bounce.h"
#include "tfs.h"

#define BOUNCE_ALIGN 4096u

struct bounce_pool {
	void *base;		/* immutable after create */
	size_t map_len;
	size_t buf_size;
	unsigned count;
	unsigned kept;		/* buffers [0, kept) are never trimmed */

	/* Lock order: lock is a leaf. */
	pthread_mutex_t lock;
	pthread_cond_t nonempty;	/* signalled on put */
	/* Below: protected by lock.  free[0, nlo) holds free kept buffers,
	 * free[kept, kept + nhi) the free others. */
	void **free;
	unsigned nlo, nhi;
	bool *touched;			/* per buffer: taken since its last trim */
	void **trim;			/* bounce_pool_trim's list (one caller) */
	uint64_t hi_gets;		/* others handed out, ever */
	uint64_t hi_gets_seen;		/* hi_gets at the last trim */
	uint64_t trimmed;		/* buffers given back, for stats */
};

static unsigned buf_index(const struct bounce_pool *p, const void *buf)
{
	return (unsigned)(((const char *)buf - (const char *)p->base) / p->buf_size);
}

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
	p->touched = calloc(count, sizeof(*p->touched));
	p->trim = calloc(count, sizeof(*p->trim));
	if (!p->free || !p->touched || !p->trim) {
		free(p->free);
		free(p->touched);
		free(p->trim);
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
		free(p->touched);
		free(p->trim);
		free(p);
		return err;
	}
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->nonempty, NULL);
	/* Every buffer kept until bounce_pool_keep says otherwise.  Hand out
	 * low addresses first: push in reverse. */
	p->kept = count;
	for (i = 0; i < count; i++)
		p->free[i] = (char *)p->base + (size_t)(count - 1 - i) * buf_size;
	p->nlo = count;
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
	free(p->touched);
	free(p->trim);
	free(p);
}

void bounce_pool_keep(struct bounce_pool *p, unsigned kept)
{
	unsigned i;

	if (kept > p->count)
		kept = p->count;
	/* Before any get: the stacks are rebuilt from scratch. */
	pthread_mutex_lock(&p->lock);
	p->kept = kept;
	p->nlo = 0;
	p->nhi = 0;
	for (i = 0; i < p->count; i++) {
		unsigned b = p->count - 1 - i;
		void *buf = (char *)p->base + (size_t)b * p->buf_size;

		if (b < kept)
			p->free[p->nlo++] = buf;
		else
			p->free[kept + p->nhi++] = buf;
	}
	pthread_mutex_unlock(&p->lock);
}

/* A free buffer, kept ones first (lock held); NULL when none. */
static void *take(struct bounce_pool *p)
{
	void *buf;

	if (p->nlo)
		return p->free[--p->nlo];
	if (!p->nhi)
		return NULL;
	buf = p->free[p->kept + --p->nhi];
	p->touched[buf_index(p, buf)] = true;
	p->hi_gets++;
	return buf;
}

void *bounce_get(struct bounce_pool *p)
{
	void *buf;

	pthread_mutex_lock(&p->lock);
	while (!(buf = take(p))) {
		tfs_may_block();
		pthread_cond_wait(&p->nonempty, &p->lock);
	}
	pthread_mutex_unlock(&p->lock);
	return buf;
}

void *bounce_tryget(struct bounce_pool *p)
{
	void *buf;

	pthread_mutex_lock(&p->lock);
	buf = take(p);
	pthread_mutex_unlock(&p->lock);
	return buf;
}

/* Push a free buffer on its stack (lock held). */
static void give(struct bounce_pool *p, void *buf)
{
	if (buf_index(p, buf) < p->kept) {
		if (p->nlo >= p->kept)
			abort();
		p->free[p->nlo++] = buf;
	} else {
		if (p->nhi >= p->count - p->kept)
			abort();
		p->free[p->kept + p->nhi++] = buf;
	}
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
	give(p, buf);
	pthread_cond_signal(&p->nonempty);
	pthread_mutex_unlock(&p->lock);
}

unsigned bounce_pool_trim(struct bounce_pool *p)
{
	unsigned n = 0, i;

	pthread_mutex_lock(&p->lock);
	/* A burst still going (one was taken since the last call) keeps its
	 * buffers: giving them back only to fault them in again costs the
	 * data path. */
	if (p->hi_gets != p->hi_gets_seen) {
		p->hi_gets_seen = p->hi_gets;
		pthread_mutex_unlock(&p->lock);
		return 0;
	}
	/* Take the touched free ones off the stack (a get meanwhile takes
	 * another one or waits for a put), give their pages back outside the
	 * lock, then return them. */
	for (i = 0; i < p->nhi;) {
		void *buf = p->free[p->kept + i];

		if (p->touched[buf_index(p, buf)]) {
			p->touched[buf_index(p, buf)] = false;
			p->free[p->kept + i] = p->free[p->kept + --p->nhi];
			p->trim[n++] = buf;
		} else {
			i++;
		}
	}
	pthread_mutex_unlock(&p->lock);
	if (!n)
		return 0;
	for (i = 0; i < n; i++)
		madvise(p->trim[i], p->buf_size, MADV_DONTNEED);
	pthread_mutex_lock(&p->lock);
	for (i = 0; i < n; i++)
		give(p, p->trim[i]);
	p->trimmed += n;
	pthread_cond_broadcast(&p->nonempty);
	pthread_mutex_unlock(&p->lock);
	return n;
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

void *bounce_kept_base(const struct bounce_pool *p, size_t *len)
{
	if (len)
		*len = (size_t)p->kept * p->buf_size;
	return p->base;
}

uint64_t bounce_trimmed(struct bounce_pool *p)
{
	uint64_t n;

	pthread_mutex_lock(&p->lock);
	n = p->trimmed;
	pthread_mutex_unlock(&p->lock);
	return n;
}
