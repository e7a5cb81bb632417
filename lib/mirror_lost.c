// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * mirror_lost: the losses the mirror has counted (struct mirror, lost[]),
 * so a block or node that no copy verifies is counted once per loss, not
 * once per read: a program retrying a read of a lost node used to add a
 * checksum error per device and an unrecoverable per try, and the counters
 * then said how often it retried, not how much was damaged.  A loss is
 * over when its address is written again (copy-on-write puts new content
 * there), when a copy verifies again (repaired), or when the counters are
 * cleared (twinfs-ctl clear): then it is counted anew when next met.
 *
 * Memory only: after a remount a loss still there is counted once more.
 * The table is small and scanned linearly, only on the error path and, on
 * writes, only while it holds something (nlost, lock-free).
 *
 * Also the counter reset (mirror_clear_counters), which forgets the
 * device's losses with its counters.
 */
#include "mirror.h"

/* Index of the loss at @blk, or -1.  Caller holds lost_mu. */
static int find(const struct mirror *m, uint64_t blk)
{
	unsigned n = atomic_load(&m->nlost);

	for (unsigned i = 0; i < n; i++)
		if (m->lost[i].blk == blk)
			return (int)i;
	return -1;
}

/* Drop entry @i (the last one takes its place).  Caller holds lost_mu. */
static void drop(struct mirror *m, unsigned i)
{
	unsigned n = atomic_load(&m->nlost) - 1;

	m->lost[i] = m->lost[n];
	atomic_store(&m->nlost, n);
}

static void forget_locked(struct mirror *m, uint64_t blk, uint64_t n)
{
	for (unsigned i = 0; i < atomic_load(&m->nlost);) {
		if (m->lost[i].blk - blk < n)
			drop(m, i);
		else
			i++;
	}
}

bool mirror_lost_seen(struct mirror *m, unsigned dev, int kind, uint64_t blk, uint64_t n)
{
	bool seen = false;
	int i;

	if (kind != MEV_CSUM_ERR && kind != MEV_UNRECOVERABLE && kind != MEV_REPAIRED)
		return false;
	/* Nothing known lost and nothing to remember: the common case. */
	if (kind != MEV_UNRECOVERABLE && !atomic_load(&m->nlost))
		return false;
	pthread_mutex_lock(&m->lost_mu);
	if (kind == MEV_REPAIRED) {
		forget_locked(m, blk, n);
	} else {
		i = find(m, blk);
		seen = i >= 0;
		if (!seen && kind == MEV_UNRECOVERABLE && m->nlost < MIRROR_LOST_MAX) {
			unsigned k = atomic_load(&m->nlost);

			m->lost[k].blk = blk;
			m->lost[k].dev = dev;
			atomic_store(&m->nlost, k + 1);
		}
	}
	pthread_mutex_unlock(&m->lost_mu);
	return seen;
}

void mirror_lost_forget(struct mirror *m, uint64_t blk, uint64_t n)
{
	if (!atomic_load(&m->nlost))
		return;
	pthread_mutex_lock(&m->lost_mu);
	forget_locked(m, blk, n);
	pthread_mutex_unlock(&m->lost_mu);
}

void mirror_clear_counters(struct mirror *m, unsigned dev, struct mirror_errs *old)
{
	struct mirror_counters *c = &m->ctr[dev];
	struct mirror_errs was = {
		.read_err = atomic_exchange(&c->read_err, 0),
		.write_err = atomic_exchange(&c->write_err, 0),
		.flush_err = atomic_exchange(&c->flush_err, 0),
		.csum_err = atomic_exchange(&c->csum_err, 0),
		.repaired = atomic_exchange(&c->repaired, 0),
		.unrecoverable = atomic_exchange(&c->unrecoverable, 0),
	};

	pthread_mutex_lock(&m->lost_mu);
	for (unsigned i = 0; i < atomic_load(&m->nlost);) {
		if (m->lost[i].dev == dev)
			drop(m, i);
		else
			i++;
	}
	pthread_mutex_unlock(&m->lost_mu);
	if (old)
		*old = was;
}
