/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * rebuild_i.h: what rebuild.c (the run, its thread, the commands) and
 * rebuild_verify.c (the verification pass after the copy) share.
 */
#ifndef TWINFS_REBUILD_I_H
#define TWINFS_REBUILD_I_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "fs_i.h"

struct rebuild {
	pthread_mutex_t mu;		/* protects everything below but atomics */
	pthread_t thr;
	bool thr_running;		/* joinable thread exists */
	_Atomic bool stop;		/* unmount: keep the run recorded */
	_Atomic bool cancel;		/* user: forget the run */
	_Atomic uint64_t rate;		/* bytes/s of regions visited, 0: no limit */

	int state;			/* enum rebuild_state */
	int kind;			/* SUPER_RB_*; 0 idle */
	int dev;			/* slot; -1 idle */
	bool persist;			/* sb.rb_state = running */
	bool verifying;
	uint64_t regions_total;		/* regions this run visits */
	_Atomic uint64_t regions_done;
	_Atomic uint64_t copied, verified, fixed;
	uint64_t copied_base;		/* copied by earlier runs (resume) */
	struct timespec t0;
	char error[512];

	struct dev *retired[2 * DEV_MAX];	/* replaced devices, closed at unmount */
	unsigned nretired;
};

static inline bool rb_target_alive(struct tfs *fs, unsigned dev)
{
	return atomic_load(&fs->mirror.state[dev]) == MDEV_REBUILDING;
}

/* After the copy: every extent block (and on format v2 every tree node)
 * of the target checked, bad copies rewritten from verified ones.
 * -ECANCELED when stopped or cancelled. */
int rb_verify_pass(struct tfs *fs, struct rebuild *rb, unsigned target);

#endif
