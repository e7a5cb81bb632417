/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * memtrim: giving freed memory back to the kernel, at one cadence for the
 * whole daemon.  The caches (extcache.c's map leaves, inode_cache.c's
 * inodes) free many small objects, into whichever malloc arena the freeing
 * thread uses; the arenas keep those pages, so without a trim the RSS stays
 * at the peak.  A trim (malloc_trim) walks the whole heap, tens of ms with
 * a large one, so it runs once every MEMTRIM_BYTES freed, counted over all
 * callers, and not again before a quiet time proportional to what the last
 * one took: malloc_trim is process-wide, and so is the rule.  A leaf: no
 * lock, three atomics.
 */
#ifndef TWINFS_MEMTRIM_H
#define TWINFS_MEMTRIM_H

#include <stdbool.h>
#include <stdint.h>

/* Freed between two trims: 16 MiB (a find dropping 16k inodes, a sweep
 * dropping ~2k map leaves). */
#define MEMTRIM_BYTES (16ull << 20)
/* After a trim that took T, none from mem_freed for MEMTRIM_DUTY x T: at
 * most 1/(1 + MEMTRIM_DUTY) of a thread's time trimming. */
#define MEMTRIM_DUTY 20u

/* @bytes were freed (what the caller counts them as); trims when
 * MEMTRIM_BYTES were freed since the last trim and its quiet time is over
 * (0 bytes: only that; the periodic thread asks, so frees that came in a
 * quiet time are not kept for good).  Call it outside locks:
 * the trim may take a while.  True if this call trimmed. */
bool mem_freed(uint64_t bytes);
/* Trim now, for a caller that knows a burst of frees just ended (the bg
 * thread after a checkpoint or a bounce pool trim); the count starts
 * over.  Outside locks. */
void mem_trim_now(void);

#endif
