/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Description: slotstore.h: the in-memory node store of the format-v2
 * space unit tests (test_fspace, test_alloc_v2, test_fspace_discard): a
 * fixed run of NSLOTS node slots from address BASE, read and written by
 * the tree code; the allocator under test hands the slots out, so the
 * store's own alloc refuses.  A read of a slot never written, outside the
 * run, or whose node does not match its pointer fails with -EIO.
 * Failures are cmocka assertions: include after <cmocka.h>.
 */
#ifndef TWINFS_SLOTSTORE_H
#define TWINFS_SLOTSTORE_H

#include <pthread.h>
#include <stdint.h>

#include "bstore.h"

struct slotstore {
	struct bstore store;
	pthread_mutex_t mu;
	uint64_t base, nslots;
	uint64_t bytes;			/* node memory held */
	void **node;			/* by slot; NULL: never written or discarded */
	int fail_writes, fail_reads;	/* fail the next this many (-EIO) */
};

void slot_init(struct slotstore *s, uint64_t base, uint64_t nslots);
void slot_destroy(struct slotstore *s);
/* Forget the nodes in blocks [addr, addr + n): as a discard would. */
void slot_discard(struct slotstore *s, uint64_t addr, uint64_t n);
/* The slot index of node address addr (asserts it is in the run). */
uint64_t slot_of(const struct slotstore *s, uint64_t addr);

#endif
