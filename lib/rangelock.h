/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * rangelock: per-inode byte-range (here: block-range) reader/writer locks.
 * Non-overlapping ranges never wait for each other; overlapping ranges wait
 * unless both are readers.  Grants are FIFO among conflicting requests, so a
 * stream of readers cannot starve a writer.  The caller provides the
 * struct rl_range (usually on its stack).
 *
 * Whole-inode exclusive = rl_lock(rl, r, 0, RL_EOF, true): extending writes,
 * truncate, fallocate.
 *
 * Lock order (whole filesystem): fs->ns_lock -> inode range lock ->
 * inode->lock -> log internal lock -> alloc group lock.
 */
#ifndef TWINFS_RANGELOCK_H
#define TWINFS_RANGELOCK_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define RL_EOF UINT64_MAX

struct rl_range {
	uint64_t start, end;	/* [start, end) */
	uint64_t seq;		/* arrival number: lower = earlier */
	bool write;
	bool granted;
	pthread_cond_t *wake;	/* the owner's, while it waits; else NULL */
	struct rl_range *next, *prev;	/* arrival order */
	struct rl_range *cnext, **cpprev;	/* index chain (or big list) */
};

/* All fields under mu. */
struct rangelock {
	pthread_mutex_t mu;
	struct rl_range *head, *tail;	/* held and waiting, arrival order */
	/* Index over the same entries, built once RL_INDEX_AT are present:
	 * ranges of at most RL_SPAN blocks hash by start into chain[], longer
	 * ones go on big. */
	struct rl_range **chain;
	struct rl_range *big;
	uint64_t seq;
	unsigned n, nwait;
	/* Instrumentation for tests/bench: max concurrently granted writers. */
	unsigned cur_writers, max_writers;
};

void rl_init(struct rangelock *rl);
void rl_destroy(struct rangelock *rl);
void rl_lock(struct rangelock *rl, struct rl_range *r, uint64_t start, uint64_t end, bool write);
/* rl_lock without waiting: false (nothing held) when any range held or
 * waiting overlaps in a conflicting mode (extcache's evictor). */
bool rl_trylock(struct rangelock *rl, struct rl_range *r, uint64_t start, uint64_t end,
		bool write);
void rl_unlock(struct rangelock *rl, struct rl_range *r);

#endif
