// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * rangelock: block-range reader/writer locks (see rangelock.h).
 *
 * One mutex, one condition variable and one list of requests (held and
 * waiting) in arrival order.  A request is granted when no *earlier* entry
 * in the list conflicts with it (overlap and at least one writer), granted
 * or not: conflicting requests are therefore served in arrival order (a
 * writer queued behind readers blocks later readers of its range, so it is
 * not starved), while a request that conflicts with nobody ahead of it
 * passes at once.
 *
 * Unlock broadcasts: waiters re-check their own condition.  The list is
 * short in practice (the requests in flight on one inode), so the O(n)
 * check per wake-up costs less than per-waiter bookkeeping would.
 */
#include "rangelock.h"

void rl_init(struct rangelock *rl)
{
	pthread_mutex_init(&rl->mu, NULL);
	pthread_cond_init(&rl->cv, NULL);
	rl->head = rl->tail = NULL;
	rl->cur_writers = rl->max_writers = 0;
}

void rl_destroy(struct rangelock *rl)
{
	pthread_cond_destroy(&rl->cv);
	pthread_mutex_destroy(&rl->mu);
}

static bool conflicts(const struct rl_range *a, const struct rl_range *b)
{
	return (a->write || b->write) && a->start < b->end && b->start < a->end;
}

/* Under rl->mu. */
static bool blocked(const struct rl_range *r)
{
	for (const struct rl_range *e = r->prev; e; e = e->prev)
		if (conflicts(e, r))
			return true;
	return false;
}

void rl_lock(struct rangelock *rl, struct rl_range *r, uint64_t start, uint64_t end, bool write)
{
	r->start = start;
	r->end = end;
	r->write = write;
	r->granted = false;
	r->next = NULL;

	pthread_mutex_lock(&rl->mu);
	r->prev = rl->tail;
	if (rl->tail)
		rl->tail->next = r;
	else
		rl->head = r;
	rl->tail = r;

	while (blocked(r))
		pthread_cond_wait(&rl->cv, &rl->mu);
	r->granted = true;
	if (write && ++rl->cur_writers > rl->max_writers)
		rl->max_writers = rl->cur_writers;
	pthread_mutex_unlock(&rl->mu);
}

void rl_unlock(struct rangelock *rl, struct rl_range *r)
{
	pthread_mutex_lock(&rl->mu);
	if (r->prev)
		r->prev->next = r->next;
	else
		rl->head = r->next;
	if (r->next)
		r->next->prev = r->prev;
	else
		rl->tail = r->prev;
	if (r->write)
		rl->cur_writers--;
	r->granted = false;
	r->next = r->prev = NULL;
	pthread_cond_broadcast(&rl->cv);
	pthread_mutex_unlock(&rl->mu);
}
