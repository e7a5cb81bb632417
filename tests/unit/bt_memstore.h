/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Description: bt_memstore.h: the in-memory B+tree node store the btree unit
 * tests share (test_btree, test_btree_mt, btree_bench), and a tree on it.  Every freed node is
 * poisoned, so a tree that still reaches one fails to read it; a read hook
 * lets a test block a node read.  Failures are cmocka assertions: include
 * after <cmocka.h>.
 */
#ifndef TWINFS_BT_MEMSTORE_H
#define TWINFS_BT_MEMSTORE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "bcache.h"
#include "bstore.h"
#include "btree.h"

#define MEM_BASE 1000u

struct memstore {
	struct bstore store;
	pthread_mutex_t mu;		/* readers run in parallel (test_concurrent) */
	void **node;			/* by slot; NULL: never written */
	uint8_t *used;
	size_t cap;
	size_t *freelist, nfree;
	uint64_t nused, reads, writes, next;
	int fail_alloc_after;		/* -1: never */
	/* Called by mem_read before it reads, outside mu (may block). */
	void (*read_hook)(struct memstore *s, const struct bptr *p);
	/* Called by mem_alloc before it allocates, outside mu (may block). */
	void (*alloc_hook)(struct memstore *s);
	void *hook_arg;
};

size_t addr_slot(struct memstore *s, uint64_t addr);
int mem_read(void *ctx, const struct bptr *p, void *buf, struct bpiece_chain *chain);
int mem_write(void *ctx, uint64_t addr, const void *buf);
int mem_alloc(void *ctx, uint64_t *addr);
void mem_free(void *ctx, uint64_t addr);
void mem_init(struct memstore *s);
void mem_destroy(struct memstore *s);

/* A tree (owner 5, fs uuid bt_uuid) on a memstore and its own cache. */
extern const uint8_t bt_uuid[16];
struct env {
	struct memstore ms;
	struct bcache *cache;
	struct btree t;
};
void env_open(struct env *e, uint64_t budget);
void env_close(struct env *e);
/* Commit (must succeed) and give the freed nodes back at once. */
void commit_release(struct btree *t, struct broot *root);

#endif
