// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * rangelock: block-range reader/writer locks (see rangelock.h).
 *
 * One mutex and one list of requests (held and waiting) in arrival order.
 * A request is granted when no *earlier* entry conflicts with it (overlap
 * and at least one writer), granted or not: conflicting requests are
 * therefore served in arrival order (a writer queued behind readers blocks
 * later readers of its range, so it is not starved), while a request that
 * conflicts with nobody ahead of it passes at once.
 *
 * Finding the earlier conflicting entries must not cost a walk of the whole
 * list: with hundreds of requests in flight on one file (fio W1 keeps 512)
 * that walk, done under the mutex, made every lock and unlock contend.
 * Once RL_INDEX_AT entries are present the entries are also hashed by
 * start block into chains of RL_SPAN-block buckets; a range of at most
 * RL_SPAN blocks can only overlap entries starting in the bucket range
 * [start - RL_SPAN, end), at most three buckets.  Longer ranges (whole-file
 * locks of truncate, extending writes, checkpoints) sit on one "big" list
 * that every check reads, and check themselves by walking the whole list;
 * they are rare and exclusive anyway.
 *
 * Waiting: a blocked request waits on its own condition variable.  Unlock
 * signals only the waiters that arrived after it and overlap it in a
 * conflicting way, the only ones it can have been blocking (found through
 * the same index); each re-checks.
 * (A broadcast to every waiter on every unlock woke one blocked writer
 * tens of times per conflict.)  Every entry that blocks a waiter is earlier
 * and conflicting, so its unlock signals the waiter: no wakeup is lost.
 */
#include <stdlib.h>

#include "rangelock.h"
#include "tfs.h"

#define RL_SHIFT 9u			/* bucket: 512 blocks, 2 MiB */
#define RL_SPAN (1ull << RL_SHIFT)	/* longest range hashed by start */
#define RL_CHAINS 256u
#define RL_INDEX_AT 8u

void rl_init(struct rangelock *rl)
{
	pthread_mutex_init(&rl->mu, NULL);
	rl->head = rl->tail = NULL;
	rl->chain = NULL;
	rl->big = NULL;
	rl->seq = 0;
	rl->n = rl->nwait = 0;
	rl->cur_writers = rl->max_writers = 0;
}

void rl_destroy(struct rangelock *rl)
{
	free(rl->chain);
	rl->chain = NULL;
	pthread_mutex_destroy(&rl->mu);
}

static bool conflicts(const struct rl_range *a, const struct rl_range *b)
{
	return (a->write || b->write) && a->start < b->end && b->start < a->end;
}

static bool hashed(const struct rl_range *r)
{
	return r->end > r->start && r->end - r->start <= RL_SPAN;
}

static struct rl_range **chain_of(struct rangelock *rl, uint64_t bucket)
{
	return &rl->chain[bucket % RL_CHAINS];
}

/* Under rl->mu, rl->chain built. */
static void idx_add(struct rangelock *rl, struct rl_range *r)
{
	struct rl_range **head = hashed(r) ? chain_of(rl, r->start >> RL_SHIFT) : &rl->big;

	r->cnext = *head;
	if (*head)
		(*head)->cpprev = &r->cnext;
	r->cpprev = head;
	*head = r;
}

static void idx_del(struct rl_range *r)
{
	*r->cpprev = r->cnext;
	if (r->cnext)
		r->cnext->cpprev = r->cpprev;
}

/* Under rl->mu.  Built once, kept until rl_destroy; without memory for it
 * the list walk alone stays correct. */
static void idx_build(struct rangelock *rl)
{
	rl->chain = calloc(RL_CHAINS, sizeof(*rl->chain));
	if (!rl->chain)
		return;
	for (struct rl_range *e = rl->head; e; e = e->next)
		idx_add(rl, e);
}

static bool earlier_conflict(const struct rl_range *list, const struct rl_range *r)
{
	for (const struct rl_range *e = list; e; e = e->cnext)
		if (e->seq < r->seq && conflicts(e, r))
			return true;
	return false;
}

/* The buckets whose chains hold every hashed entry that can overlap the
 * hashed range r. */
static void bucket_span(const struct rl_range *r, uint64_t *b0, uint64_t *b1)
{
	*b0 = (r->start >= RL_SPAN ? r->start - RL_SPAN : 0) >> RL_SHIFT;
	*b1 = (r->end - 1) >> RL_SHIFT;
}

/* Under rl->mu: does an earlier entry conflict with r? */
static bool blocked(struct rangelock *rl, const struct rl_range *r)
{
	uint64_t b, b0, b1;

	if (!rl->chain || !hashed(r)) {
		for (const struct rl_range *e = r->prev; e; e = e->prev)
			if (conflicts(e, r))
				return true;
		return false;
	}
	if (earlier_conflict(rl->big, r))
		return true;
	bucket_span(r, &b0, &b1);
	for (b = b0; b <= b1; b++)
		if (earlier_conflict(*chain_of(rl, b), r))
			return true;
	return false;
}

static void wake_later(const struct rl_range *list, const struct rl_range *r)
{
	for (const struct rl_range *e = list; e; e = e->cnext)
		if (e->wake && e->seq > r->seq && conflicts(e, r))
			pthread_cond_signal(e->wake);
}

/* Under rl->mu, r about to go: signal the waiters it may have blocked. */
static void wake_blocked_by(struct rangelock *rl, const struct rl_range *r)
{
	uint64_t b, b0, b1;

	if (!rl->chain || !hashed(r)) {
		for (const struct rl_range *e = r->next; e; e = e->next)
			if (e->wake && conflicts(e, r))
				pthread_cond_signal(e->wake);
		return;
	}
	wake_later(rl->big, r);
	bucket_span(r, &b0, &b1);
	for (b = b0; b <= b1; b++)
		wake_later(*chain_of(rl, b), r);
}

/* Under rl->mu: r joins the list as the newest arrival. */
static void enqueue(struct rangelock *rl, struct rl_range *r, uint64_t start, uint64_t end,
		    bool write)
{
	r->start = start;
	r->end = end;
	r->write = write;
	r->granted = false;
	r->wake = NULL;
	r->next = NULL;
	r->seq = ++rl->seq;
	r->prev = rl->tail;
	if (rl->tail)
		rl->tail->next = r;
	else
		rl->head = r;
	rl->tail = r;
	if (rl->chain)
		idx_add(rl, r);
	else if (++rl->n >= RL_INDEX_AT)
		idx_build(rl);
}

/* Under rl->mu: r leaves the list. */
static void dequeue(struct rangelock *rl, struct rl_range *r)
{
	if (r->prev)
		r->prev->next = r->next;
	else
		rl->head = r->next;
	if (r->next)
		r->next->prev = r->prev;
	else
		rl->tail = r->prev;
	if (rl->chain)
		idx_del(r);
	else
		rl->n--;
	r->next = r->prev = NULL;
}

void rl_lock(struct rangelock *rl, struct rl_range *r, uint64_t start, uint64_t end, bool write)
{
	pthread_mutex_lock(&rl->mu);
	enqueue(rl, r, start, end, write);
	if (blocked(rl, r)) {
		pthread_cond_t cv;

		tfs_may_block();
		pthread_cond_init(&cv, NULL);
		r->wake = &cv;
		rl->nwait++;
		do
			pthread_cond_wait(&cv, &rl->mu);
		while (blocked(rl, r));
		rl->nwait--;
		r->wake = NULL;
		pthread_cond_destroy(&cv);
	}
	r->granted = true;
	if (write && ++rl->cur_writers > rl->max_writers)
		rl->max_writers = rl->cur_writers;
	pthread_mutex_unlock(&rl->mu);
}

bool rl_trylock(struct rangelock *rl, struct rl_range *r, uint64_t start, uint64_t end,
		bool write)
{
	pthread_mutex_lock(&rl->mu);
	enqueue(rl, r, start, end, write);
	if (blocked(rl, r)) {
		/* The newest entry: nobody waits behind it. */
		dequeue(rl, r);
		pthread_mutex_unlock(&rl->mu);
		return false;
	}
	r->granted = true;
	if (write && ++rl->cur_writers > rl->max_writers)
		rl->max_writers = rl->cur_writers;
	pthread_mutex_unlock(&rl->mu);
	return true;
}

void rl_unlock(struct rangelock *rl, struct rl_range *r)
{
	pthread_mutex_lock(&rl->mu);
	if (rl->nwait)
		wake_blocked_by(rl, r);
	dequeue(rl, r);
	if (r->write)
		rl->cur_writers--;
	r->granted = false;
	pthread_mutex_unlock(&rl->mu);
}
