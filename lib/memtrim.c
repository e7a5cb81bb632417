// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * memtrim: freed memory back to the kernel, one cadence (memtrim.h).
 */
#include <malloc.h>
#include <stdatomic.h>

#include "memtrim.h"

static _Atomic uint64_t freed;		/* bytes, since start */
static _Atomic uint64_t trimmed_at;	/* freed at the last trim */

bool mem_freed(uint64_t bytes)
{
	uint64_t f = atomic_fetch_add(&freed, bytes) + bytes;
	uint64_t last = atomic_load(&trimmed_at);

	/* One caller wins the crossing; the others go on without waiting. */
	if (f - last < MEMTRIM_BYTES || !atomic_compare_exchange_strong(&trimmed_at, &last, f))
		return false;
	malloc_trim(0);
	return true;
}

void mem_trim_now(void)
{
	/* What was counted so far is given back now: the count starts over. */
	atomic_store(&trimmed_at, atomic_load(&freed));
	malloc_trim(0);
}
