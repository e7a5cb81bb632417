/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * prof: where the time of the data path goes, for bench/micro.c.  A few
 * global counters (nanoseconds and calls per phase: bounce copy, checksum,
 * device I/O, metadata commit, lock waits...) filled by clock_gettime()
 * pairs around each phase, only while prof_enabled is set.  When it is off
 * a phase costs one predictable branch on a global that is never written, so
 * the instrumentation stays compiled in (no build variant to forget).
 *
 * Counters are relaxed atomics: they are statistics, read after the run.
 */
#ifndef TWINFS_PROF_H
#define TWINFS_PROF_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

enum prof_phase {
	PROF_BOUNCE,		/* waiting for a bounce buffer */
	PROF_LOGSPACE,		/* log_wait_space before a write */
	PROF_RANGELOCK,		/* rl_lock in tfs_write */
	PROF_RMW_READ,		/* reading partial edge blocks */
	PROF_COPY,		/* the one copy of the payload (fill callback) */
	PROF_ALLOC,		/* alloc_get for the new blocks */
	PROF_CSUM,		/* XXH3 of every written block */
	PROF_DEV_WRITE,		/* mirror_write: every mirror, concurrently */
	PROF_META,		/* commit_inode: ip->lock + apply + log append */
	PROF_SYNC,		/* log_commit for O_DSYNC/O_SYNC (group commit wait) */
	PROF_NPHASES
};

struct prof_ctr {
	_Atomic uint64_t ns, calls;
};

extern bool prof_enabled;	/* set before the threads start; read-only after */
extern struct prof_ctr prof_ctr[PROF_NPHASES];
extern const char *const prof_name[PROF_NPHASES];

static inline uint64_t prof_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* 0 when profiling is off; prof_end() then does nothing. */
static inline uint64_t prof_begin(void)
{
	return __builtin_expect(prof_enabled, 0) ? prof_now() : 0;
}

static inline void prof_end(enum prof_phase p, uint64_t t0)
{
	if (__builtin_expect(t0 != 0, 0)) {
		atomic_fetch_add_explicit(&prof_ctr[p].ns, prof_now() - t0, memory_order_relaxed);
		atomic_fetch_add_explicit(&prof_ctr[p].calls, 1, memory_order_relaxed);
	}
}

void prof_reset(void);

#endif
