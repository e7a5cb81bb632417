// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * dbudget: the dirty budget of a format-v2 mount.  What the daemon holds
 * between two checkpoints grows with what changed, not with the caches'
 * budgets: changed map leaves (extcache.h keeps them until a checkpoint
 * wrote them), changed inodes (the inode cache never drops them), the
 * noted changes themselves (v2dirty.h).  Measured on main, a 256 GiB
 * fallocate peaked at 463 MiB and 100k creates at 143 MiB, against a
 * 256 MiB cache.  Everything here counts against one budget, a part of
 * -o cache=:
 *
 *   past dirty_soft (cache / DIRTY_SOFT_SHARE) a checkpoint is asked for,
 *   once until one ends (fs_dirty_ckpt_end);
 *   past dirty_hard (cache / DIRTY_HARD_SHARE) a writer waits for the end
 *   of a checkpoint before it starts its change, so writers that outrun
 *   the checkpoint slow down to its pace instead of growing memory; it
 *   waits again for the next one while that one brings the count down
 *   and is still over.
 *
 * The node cache gives up as much of its budget as is dirty, and as much
 * as the allocator's bitmaps hold (they grow with the data area, outside
 * every cache), down to a floor.
 *
 * The tree nodes a running checkpoint changed are counted too (the node
 * cache's dirty bytes): they are pinned until its transaction commits,
 * and the checkpoint commits part way (ckpt_v2.c) so they stay within
 * a share of the budget.
 *
 * The check runs where every mutator already waits for log room before
 * taking any lock (log_wait_space's on_room): a few atomic loads, no
 * mount-wide lock on the data path; the wait takes bg_mu only.  The
 * writer holds nothing a checkpoint waits for, so a checkpoint always
 * ends; while one runs (ckpt_busy) or is asked for, the writer keeps
 * waiting.  It goes on over the mark only when a checkpoint that ended
 * did not bring the count down (failed, or cannot free what is counted:
 * a leaf someone is inside), or after DIRTY_WAIT_CAP in all, or when no
 * checkpoint ran for DIRTY_WAIT_MAX: it must not stall for ever on what
 * no checkpoint frees (those are the stats' wait_timeouts).  Durability
 * is untouched: the budget only moves checkpoints earlier.
 */
#include <errno.h>
#include <time.h>

#include "alloc.h"
#include "alloc_v2.h"
#include "bcache.h"
#include "extcache.h"
#include "fs_i.h"
#include "fspace.h"
#include "inode.h"
#include "v2dirty.h"

#define DIRTY_SOFT_SHARE 8
#define DIRTY_HARD_SHARE 4
#define DIRTY_WAIT_MAX 5	/* seconds with no checkpoint running */
#define DIRTY_WAIT_CAP 120	/* seconds in all */
#define NODE_FLOOR_SHARE 8	/* the node cache keeps at least cache/8 */
#define NODE_STEPS 32

/* The bg thread runs the checkpoints: it never waits for itself. */
static bool on_bg_thread(struct tfs *fs)
{
	return fs->bg_running && pthread_equal(pthread_self(), fs->bg_thread);
}

void fs_dirty_setup(struct tfs *fs, uint64_t cache, struct bcache *nodes, uint64_t node_base)
{
	fs->dirty_soft = cache / DIRTY_SOFT_SHARE;
	fs->dirty_hard = cache / DIRTY_HARD_SHARE;
	fs->dirty_nodes = nodes;
	fs->node_base = node_base;
	fs->node_floor = cache / NODE_FLOOR_SHARE;
	if (fs->node_floor > node_base)
		fs->node_floor = node_base;
	atomic_store(&fs->node_budget, node_base);
	atomic_store(&fs->node_budget_min, node_base);
}

/* The node cache's budget with @d dirty bytes: the base less @d rounded up
 * to a step, never below the floor. */
static uint64_t node_budget_for(const struct tfs *fs, uint64_t d)
{
	uint64_t step = fs->node_base / NODE_STEPS;
	uint64_t give = step ? (d + step - 1) / step * step : d;

	if (give > fs->node_base - fs->node_floor)
		give = fs->node_base - fs->node_floor;
	return fs->node_base - give;
}

static void note_max(struct tfs *fs, uint64_t d)
{
	uint64_t m = atomic_load(&fs->dirty_max);

	while (d > m && !atomic_compare_exchange_weak(&fs->dirty_max, &m, d))
		;
}

/* What grows with the file system outside the caches: the allocator's
 * bitmaps (4 KiB per 128 MiB chunk partly used, twice on v2: 11 MiB after
 * 11 GiB of random overwrites at 4 TiB), and the checkpoint's: the bitmaps
 * of the free-space groups it changes (32 KiB per GiB touched: 28 MiB at
 * 1 TiB under random 4k overwrites) and its journal of reference changes
 * (24 bytes each, 25 MiB there).  The node cache gives them up as it gives
 * up what is dirty, so -o cache= bounds them too. */
static uint64_t outside_bytes(struct tfs *fs)
{
	return (fs->alloc ? alloc_bitmap_bytes(fs->alloc) : 0) +
	       (fs->v2acct ? alloc_bitmap_bytes(fs->v2acct) : 0) +
	       (fs->v2fsp ? fspace_loaded_bytes(fs->v2fsp) : 0) +
	       (fs->v2av ? alloc_v2_mem_bytes(fs->v2av) : 0);
}

static void fit_nodes(struct tfs *fs, uint64_t d)
{
	uint64_t want, min;

	if (!fs->dirty_nodes)
		return;
	want = node_budget_for(fs, d + outside_bytes(fs));
	if (atomic_exchange(&fs->node_budget, want) == want)
		return;
	bcache_set_budget(fs->dirty_nodes, want);
	min = atomic_load(&fs->node_budget_min);
	while (want < min && !atomic_compare_exchange_weak(&fs->node_budget_min, &min, want))
		;
}

void fs_dirty_refit(struct tfs *fs)
{
	uint64_t d = fs_dirty_bytes(fs, NULL);

	note_max(fs, d);
	fit_nodes(fs, d);
}

uint64_t fs_dirty_bytes(struct tfs *fs, struct dirty_parts *p)
{
	struct dirty_parts q;

	if (!p)
		p = &q;
	p->leaves = fs->xc ? extcache_over(fs->xc) : 0;
	p->inodes = icache_over(fs) * TFS_CACHE_INODE_COST;
	p->notes = fs->v2dirty ? v2d_bytes(fs->v2dirty) : 0;
	p->nodes = fs->dirty_nodes ? bcache_dirty_bytes(fs->dirty_nodes) : 0;
	return p->leaves + p->inodes + p->notes + p->nodes;
}

/* As fs.c's own kick; here so that the checkpoint's module, which calls
 * this one, is never reached back through fs.c. */
static void ask_ckpt(struct tfs *fs)
{
	pthread_mutex_lock(&fs->bg_mu);
	fs->bg_want_ckpt = true;
	pthread_cond_signal(&fs->bg_cv);
	pthread_mutex_unlock(&fs->bg_mu);
}

/* Until a checkpoint ends after @seen, or DIRTY_WAIT_MAX: true then.
 * With @busy, a running or asked for checkpoint renews the time, up to
 * DIRTY_WAIT_CAP in all. */
static bool wait_ckpt_end(struct tfs *fs, uint64_t seen, bool busy)
{
	struct timespec until, cap;
	int r = 0;

	clock_gettime(CLOCK_MONOTONIC, &until);
	cap = until;
	cap.tv_sec += DIRTY_WAIT_CAP;
	until.tv_sec += DIRTY_WAIT_MAX;
	pthread_mutex_lock(&fs->bg_mu);
	while (atomic_load(&fs->ckpt_ends) == seen && !fs->bg_stop) {
		r = pthread_cond_timedwait(&fs->ckpt_cv, &fs->bg_mu, &until);
		if (r != ETIMEDOUT)
			continue;
		if (!busy || !(atomic_load(&fs->ckpt_busy) || fs->bg_want_ckpt) ||
		    until.tv_sec >= cap.tv_sec)
			break;
		until.tv_sec += DIRTY_WAIT_MAX;
	}
	pthread_mutex_unlock(&fs->bg_mu);
	return r == ETIMEDOUT && atomic_load(&fs->ckpt_ends) == seen;
}

int fs_dirty_gate(void *ctx)
{
	struct tfs *fs = ctx;
	uint64_t d, seen;

	if (!fs->dirty_soft || !fs->bg_running || on_bg_thread(fs))
		return 0;
	/* Notes were lost (v2dirty.h): have the checkpoint that rebuilds
	 * from the log now rather than when the budget or timer asks. */
	if (fs->v2dirty && v2d_lost_take(fs->v2dirty)) {
		atomic_fetch_add(&fs->dirty_lost_ckpts, 1);
		ask_ckpt(fs);
	}
	d = fs_dirty_bytes(fs, NULL);
	note_max(fs, d);
	fit_nodes(fs, d);
	if (d < fs->dirty_soft)
		return 0;
	/* Read before asking: the checkpoint asked for ends after it.  No
	 * bg_mu: once per change while past the soft mark, every writer
	 * would queue on the lock the bg thread sleeps under. */
	seen = atomic_load(&fs->ckpt_ends);
	if (!atomic_exchange(&fs->dirty_asked, true)) {
		atomic_fetch_add(&fs->dirty_ckpts, 1);
		ask_ckpt(fs);
	}
	if (d < fs->dirty_hard)
		return 0;
	atomic_fetch_add(&fs->dirty_waits, 1);
	for (unsigned round = 0;; round++) {
		uint64_t was = d;

		if (wait_ckpt_end(fs, seen, true)) {
			atomic_fetch_add(&fs->dirty_wait_timeouts, 1);
			return 0;
		}
		d = fs_dirty_bytes(fs, NULL);
		note_max(fs, d);
		fit_nodes(fs, d);
		if (d < fs->dirty_hard || fs->bg_stop)
			return 0;
		/* A whole checkpoint (not the one running when this writer
		 * came) freed nothing: more of them would not either. */
		if (round && d >= was) {
			atomic_fetch_add(&fs->dirty_wait_timeouts, 1);
			return 0;
		}
		seen = atomic_load(&fs->ckpt_ends);
		if (!atomic_exchange(&fs->dirty_asked, true)) {
			atomic_fetch_add(&fs->dirty_ckpts, 1);
			ask_ckpt(fs);
		}
	}
}

bool fs_ckpt_wait(struct tfs *fs)
{
	uint64_t seen;

	if (!fs->bg_running || on_bg_thread(fs))
		return false;
	seen = atomic_load(&fs->ckpt_ends);
	ask_ckpt(fs);
	(void)wait_ckpt_end(fs, seen, false);
	return true;
}

int fs_get_walk_waiting(struct tfs *fs, uint64_t ino, struct tfs_inode **ipp, int *budget)
{
	int ret = inode_get_walk(fs, ino, ipp);

	while (ret == -ENOMEM && *budget > 0) {
		bool waited;

		(*budget)--;
		pthread_mutex_unlock(&fs->ns_lock);
		waited = fs_ckpt_wait(fs);
		pthread_mutex_lock(&fs->ns_lock);
		if (!waited)
			break;
		ret = inode_get_walk(fs, ino, ipp);
	}
	return ret;
}

void fs_dirty_ckpt_end(struct tfs *fs)
{
	/* What the checkpoint wrote left memory: the nodes may have it. */
	fit_nodes(fs, fs_dirty_bytes(fs, NULL));
	atomic_store(&fs->dirty_asked, false);
	pthread_mutex_lock(&fs->bg_mu);
	/* Under bg_mu all the same: a waiter between its check and its
	 * sleep holds it, so the broadcast cannot fall in between. */
	atomic_fetch_add(&fs->ckpt_ends, 1);
	pthread_cond_broadcast(&fs->ckpt_cv);
	pthread_mutex_unlock(&fs->bg_mu);
}
