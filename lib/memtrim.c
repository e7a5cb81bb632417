// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * memtrim: freed memory back to the kernel, one cadence (memtrim.h).
 */
#include <malloc.h>
#include <stdatomic.h>
#include <time.h>

#include "memtrim.h"

static _Atomic uint64_t freed;		/* bytes, since start */
static _Atomic uint64_t trimmed_at;	/* freed at the last trim */
static _Atomic uint64_t quiet_until;	/* no counted trim before (ns, monotonic) */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A trim, and the quiet time after it: MEMTRIM_DUTY times what it took.
 * Under steady churn (a checkpoint faulting and evicting 100,000 map
 * leaves) the pages a trim gave back were faulted in again at once, and
 * the trims (each a walk of the whole heap, an madvise and its TLB
 * shootdown) took about a fifth of the checkpoint's CPU time. */
static void trim(void)
{
	uint64_t t0 = now_ns(), t1;

	malloc_trim(0);
	t1 = now_ns();
	atomic_store(&quiet_until, t1 + MEMTRIM_DUTY * (t1 - t0));
}

bool mem_freed(uint64_t bytes)
{
	uint64_t f = atomic_fetch_add(&freed, bytes) + bytes;
	uint64_t last = atomic_load(&trimmed_at);

	/* One caller wins the crossing; the others go on without waiting.
	 * Until the quiet time is over the count goes on: the first call
	 * after it trims. */
	if (f - last < MEMTRIM_BYTES || now_ns() < atomic_load(&quiet_until) ||
	    !atomic_compare_exchange_strong(&trimmed_at, &last, f))
		return false;
	trim();
	return true;
}

void mem_trim_now(void)
{
	/* What was counted so far is given back now: the count starts over. */
	atomic_store(&trimmed_at, atomic_load(&freed));
	trim();
}
