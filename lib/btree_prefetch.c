// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * btree_prefetch: read ahead the leaves a caller is about to use, several
 * at a time (btree.h, bt_prefetch).  A lookup that misses reads one node
 * and waits for it; a cold find faults thousands of inodes one after the
 * other, so it waited for every INODES leaf in turn (200,000 files: 2,800
 * node reads, most of the find's time on a disk).  Here the leaves that
 * hold a batch of keys are found in their parents (shared locks, hand over
 * hand, as a lookup) and the missing ones read at once by the caller and
 * a small pool of threads into the cache, clean and unreferenced: the
 * lookups that follow hit.
 *
 * The barrier (t->lock) is held shared from the parents' pointers to the
 * end of the reads, as a lookup holds it over its read: no commit can run
 * meanwhile, so no address the pointers name can be freed and reused, and
 * every read verifies against a current pointer.  The reads themselves hold
 * no node lock.  Like every node read they may wait for a device: callers
 * must not be I/O completion threads.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include "btree.h"
#include "btree_i.h"

#define PF_THREADS 8		/* reads in flight at most: the caller and 7 */

struct pf_job {
	struct btree *t;
	struct miss *m;
	struct bcache_node **node;	/* node[i]: m[i]'s entry, made by the caller */
	size_t n;
	_Atomic size_t next;	/* the next m[] to read */
	_Atomic unsigned done;	/* leaves read in */
	_Atomic int err;
	/* Under pf.mu: */
	bool queued;		/* in pf.jobs */
	unsigned users;		/* pool threads reading its leaves */
	struct pf_job *link;
};

/*
 * The pool: PF_THREADS - 1 threads made at the first read-ahead, for the
 * process's life (a thread per read-ahead cost a pthread_create and a
 * device ring of its own each time).  A job stays in pf.jobs while it has
 * leaves nobody took; its caller reads too, then takes it off the list
 * and waits until no pool thread is on it, so the job (on the caller's
 * stack) outlives every use.
 */
static struct {
	pthread_mutex_t mu;	/* leaf lock: jobs, each job's queued, users, link */
	pthread_cond_t work, idle;
	struct pf_job *jobs;
	unsigned nthreads;
} pf = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
	 NULL, 0 };
static pthread_once_t pf_once = PTHREAD_ONCE_INIT;

static void pf_unqueue(struct pf_job *j)
{
	struct pf_job **pp = &pf.jobs;

	while (*pp && *pp != j)
		pp = &(*pp)->link;
	if (*pp)
		*pp = j->link;
	j->queued = false;
}

/* Read m[] until none is left. */
static void pf_read(struct pf_job *j)
{
	size_t i;

	while ((i = atomic_fetch_add(&j->next, 1)) < j->n) {
		struct miss *m = &j->m[i];
		struct bcache_node *n = j->node[i];
		int ret;

		ret = j->t->store->ops->read(j->t->store->ctx, &m->p, n->buf, &n->chain);
		if (!ret)
			ret = btp_check_node(j->t, n->buf, m->level, &m->lo,
					     m->has_hi ? &m->hi : NULL);
		if (ret) {
			atomic_store(&j->err, ret);
		} else {
			bcache_insert(j->t->cache, &n);	/* or the copy another read put there */
			atomic_fetch_add(&j->done, 1);
		}
		bcache_put(j->t->cache, n);
	}
}

static void *pf_thread(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&pf.mu);
	for (;;) {
		struct pf_job *j = pf.jobs;

		if (!j) {
			pthread_cond_wait(&pf.work, &pf.mu);
			continue;
		}
		if (atomic_load(&j->next) >= j->n) {
			pf_unqueue(j);	/* every leaf taken */
			continue;
		}
		j->users++;
		pthread_mutex_unlock(&pf.mu);
		pf_read(j);
		pthread_mutex_lock(&pf.mu);
		if (!--j->users)
			pthread_cond_broadcast(&pf.idle);
	}
	return NULL;
}

static void pf_start(void)
{
	for (unsigned i = 0; i + 1 < PF_THREADS; i++) {
		pthread_t th;

		if (pthread_create(&th, NULL, pf_thread, NULL))
			break;
		pthread_detach(th);
		pf.nthreads++;
	}
}

/* Read j's leaves, the pool helping; returns when nobody is on it. */
static void pf_run(struct pf_job *j)
{
	if (j->n > 1) {
		pthread_once(&pf_once, pf_start);
		pthread_mutex_lock(&pf.mu);
		j->link = pf.jobs;
		pf.jobs = j;
		j->queued = true;
		/* As many helpers as there are leaves besides the caller's:
		 * a broadcast woke all seven for a batch of two or three (a
		 * cold find's readdirplus), each to find nothing left, and on
		 * a busy machine every wakeup waits for a CPU.  A helper
		 * busy elsewhere misses its signal: the caller reads. */
		for (size_t w = 0; w + 1 < j->n && w < pf.nthreads; w++)
			pthread_cond_signal(&pf.work);
		pthread_mutex_unlock(&pf.mu);
	}
	pf_read(j);
	if (j->n > 1) {
		pthread_mutex_lock(&pf.mu);
		if (j->queued)
			pf_unqueue(j);
		while (j->users)
			pthread_cond_wait(&pf.idle, &pf.mu);
		pthread_mutex_unlock(&pf.mu);
	}
}

/* Slot @i of path node 1 into m[*n] when its leaf is not cached. */
static void pf_slot(struct btree *t, struct path *pa, unsigned i, struct miss *m, size_t *n)
{
	const void *b = pa->n[1]->buf;
	struct miss *x = &m[*n];
	struct bcache_node *c;

	*x = (struct miss){ .want = true, .level = 0, .has_hi = true };
	bnode_ptr(b, i, &x->p);
	c = bcache_get(t->cache, x->p.addr);
	if (c) {
		bcache_put(t->cache, c);
		return;
	}
	bnode_key(b, i, &x->lo);
	if (i + 1 < bnode_nritems(b)) {
		bnode_key(b, i + 1, &x->hi);
	} else {
		x->hi = pa->hi[1];
		x->has_hi = pa->has_hi[1];
	}
	(*n)++;
}

/* The uncached leaves below path node 1 that hold the ranges [lo[*k]
 * (*cur for the first), hi[*k]], into m[] (at most max in all).  *k moves
 * past the ranges the node covers; *cur to where one goes on past it. */
static void pf_collect(struct btree *t, struct path *pa, const struct bkey *lo,
		       const struct bkey *hi, size_t nk, size_t *k, struct bkey *cur,
		       struct miss *m, size_t *n, size_t max)
{
	const void *b = pa->n[1]->buf;
	unsigned nr = bnode_nritems(b), last = nr;

	while (*k < nk && *n < max) {
		const struct bkey *h = hi ? &hi[*k] : &lo[*k];
		unsigned i;

		if (pa->has_hi[1] && bkey_cmp(cur, &pa->hi[1]) >= 0)
			return;		/* the next parent's */
		/* Key 0 is the node's lower bound, so i > 0 when not found. */
		if (!bnode_search(b, cur, &i) && i)
			i--;
		for (; i < nr && *n < max; i++) {
			struct bkey ik;

			bnode_key(b, i, &ik);
			if (i != last && bkey_cmp(&ik, h) > 0)
				break;
			if (i != last)
				pf_slot(t, pa, i, m, n);
			last = i;
		}
		if (pa->has_hi[1] && bkey_cmp(h, &pa->hi[1]) >= 0) {
			*cur = pa->hi[1];	/* goes on in the next parent */
			return;
		}
		if (++*k < nk)
			*cur = lo[*k];
	}
}

/* Read ahead the ranges [lo[i], hi[i]] (hi NULL: the keys lo[i]). */
static int prefetch(struct btree *t, const struct bkey *lo, const struct bkey *hi, size_t nk,
		    size_t max)
{
	struct pf_job j = { .t = t };
	size_t k = 0;
	struct bkey cur;
	int ret = 0;

	if (!nk || !max)
		return 0;
	/* No more than a quarter of the cache: leaves read ahead and pushed
	 * out before their use would be read twice. */
	{
		struct bcache_stats cs;

		bcache_stats(t->cache, &cs);
		if (max > cs.budget / (4 * BNODE_SIZE))
			max = cs.budget / (4 * BNODE_SIZE) ? cs.budget / (4 * BNODE_SIZE) : 1;
	}
	j.m = malloc(max * sizeof(*j.m));
	j.node = malloc(max * sizeof(*j.node));
	if (!j.m || !j.node) {
		free(j.m);
		free(j.node);
		return -ENOMEM;
	}
	cur = lo[0];
	pthread_rwlock_rdlock(&t->lock);
	while (k < nk && j.n < max) {
		const struct op op = { OP_READ, &cur, 0, 1 };
		struct path pa;

		btp_init(&pa);
		ret = btp_lock(t, &pa, &op);
		if (!ret && pa.top > 0)
			pf_collect(t, &pa, lo, hi, nk, &k, &cur, j.m, &j.n, max);
		else
			k = nk;	/* empty, or the root is the one leaf: read now */
		btp_release(t, &pa);
		btp_unpin(t, &pa);
		if (ret)
			break;
	}
	if (ret == -ENOENT)
		ret = 0;
	/* The entries are made here, not in the pool: memory a pool thread
	 * allocates comes from an arena of its own, which the process keeps
	 * (24 MiB more RSS in a cold find of a million files). */
	for (size_t i = 0; i < j.n; i++) {
		int r = bcache_alloc(t->cache, j.m[i].p.addr, &j.node[i]);

		if (r) {
			j.n = i;	/* read what has an entry */
			ret = ret ? ret : r;
		}
	}
	pf_run(&j);
	pthread_rwlock_unlock(&t->lock);
	atomic_fetch_add(&t->prefetched, atomic_load(&j.done));
	free(j.node);
	free(j.m);
	if (!ret)
		ret = atomic_load(&j.err);
	return ret ? ret : (int)atomic_load(&j.done);
}

int bt_prefetch(struct btree *t, const struct bkey *keys, size_t nkeys, size_t max)
{
	return prefetch(t, keys, NULL, nkeys, max);
}

int bt_prefetch_range(struct btree *t, const struct bkey *lo, const struct bkey *hi, size_t max)
{
	return prefetch(t, lo, hi, 1, max);
}

int bt_prefetch_ranges(struct btree *t, const struct bkey *lo, const struct bkey *hi, size_t n,
		       size_t max)
{
	return prefetch(t, lo, hi, n, max);
}
