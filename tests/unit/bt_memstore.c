// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: the in-memory node store of the btree unit tests (bt_memstore.h). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bnode.h"
#include "bt_memstore.h"

static uint64_t slot_addr(size_t slot)
{
	return MEM_BASE + (uint64_t)slot * BNODE_BLOCKS;
}

size_t addr_slot(struct memstore *s, uint64_t addr)
{
	size_t slot = (addr - MEM_BASE) / BNODE_BLOCKS;

	assert_true(addr >= MEM_BASE && (addr - MEM_BASE) % BNODE_BLOCKS == 0);
	assert_true(slot < s->next);
	return slot;
}

static int mem_read_locked(void *ctx, const struct bptr *p, void *buf)
{
	struct memstore *s = ctx;
	size_t slot = addr_slot(s, p->addr);

	s->reads++;
	if (!s->node[slot])
		return -EIO;
	memcpy(buf, s->node[slot], BNODE_SIZE);
	return bnode_matches(buf, p) ? 0 : -EIO;
}

static int mem_write_locked(void *ctx, uint64_t addr, const void *buf)
{
	struct memstore *s = ctx;
	size_t slot = addr_slot(s, addr);

	assert_true(s->used[slot]);	/* never write a free address */
	if (!s->node[slot])
		s->node[slot] = malloc(BNODE_SIZE);
	assert_non_null(s->node[slot]);
	memcpy(s->node[slot], buf, BNODE_SIZE);
	s->writes++;
	return 0;
}

static int mem_alloc_locked(void *ctx, uint64_t *addr)
{
	struct memstore *s = ctx;
	size_t slot;

	if (s->fail_alloc_after == 0)
		return -ENOSPC;
	if (s->fail_alloc_after > 0)
		s->fail_alloc_after--;
	if (s->nfree) {
		slot = s->freelist[--s->nfree];
	} else {
		if (s->next == s->cap) {
			size_t nc = s->cap ? s->cap * 2 : 1024;

			s->node = realloc(s->node, nc * sizeof(*s->node));
			s->used = realloc(s->used, nc);
			s->freelist = realloc(s->freelist, nc * sizeof(*s->freelist));
			assert_true(s->node && s->used && s->freelist);
			memset(s->node + s->cap, 0, (nc - s->cap) * sizeof(*s->node));
			memset(s->used + s->cap, 0, nc - s->cap);
			s->cap = nc;
		}
		slot = s->next++;
	}
	assert_false(s->used[slot]);
	s->used[slot] = 1;
	s->nused++;
	*addr = slot_addr(slot);
	return 0;
}

static void mem_free_locked(void *ctx, uint64_t addr)
{
	struct memstore *s = ctx;
	size_t slot = addr_slot(s, addr);

	assert_true(s->used[slot]);	/* no double free */
	s->used[slot] = 0;
	s->nused--;
	if (s->node[slot])
		memset(s->node[slot], 0xdb, BNODE_SIZE);
	s->freelist[s->nfree++] = slot;
}

#define LOCKED(ret, call)				\
	do {						\
		struct memstore *s_ = ctx;		\
		pthread_mutex_lock(&s_->mu);		\
		ret = call;				\
		pthread_mutex_unlock(&s_->mu);		\
	} while (0)

int mem_read(void *ctx, const struct bptr *p, void *buf, struct bpiece_chain *chain)
{
	struct memstore *s = ctx;
	int ret;

	if (chain)
		memset(chain, 0, sizeof(*chain));
	if (s->read_hook)
		s->read_hook(s, p);

	LOCKED(ret, mem_read_locked(ctx, p, buf));
	return ret;
}

int mem_write(void *ctx, uint64_t addr, const void *buf)
{
	int ret;

	LOCKED(ret, mem_write_locked(ctx, addr, buf));
	return ret;
}

int mem_alloc(void *ctx, uint64_t *addr)
{
	struct memstore *s = ctx;
	int ret;

	if (s->alloc_hook)
		s->alloc_hook(s);
	LOCKED(ret, mem_alloc_locked(ctx, addr));
	return ret;
}

void mem_free(void *ctx, uint64_t addr)
{
	int ret;

	LOCKED(ret, (mem_free_locked(ctx, addr), 0));
	(void)ret;
}

static const struct bstore_ops mem_ops = {
	.read = mem_read, .write = mem_write, .alloc = mem_alloc, .free = mem_free,
};

void mem_init(struct memstore *s)
{
	memset(s, 0, sizeof(*s));
	s->store.ops = &mem_ops;
	s->store.ctx = s;
	s->fail_alloc_after = -1;
	pthread_mutex_init(&s->mu, NULL);
}

void mem_destroy(struct memstore *s)
{
	for (size_t i = 0; i < s->next; i++)
		free(s->node[i]);
	free(s->node);
	free(s->used);
	free(s->freelist);
	pthread_mutex_destroy(&s->mu);
}


const uint8_t bt_uuid[16] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };

void env_open(struct env *e, uint64_t budget)
{
	mem_init(&e->ms);
	assert_int_equal(bcache_create(budget, &e->cache), 0);
	assert_int_equal(bt_open(&e->t, &e->ms.store, e->cache, 5, bt_uuid, NULL), 0);
}

void env_close(struct env *e)
{
	bt_close(&e->t);
	bcache_destroy(e->cache);
	mem_destroy(&e->ms);
}

void commit_release(struct btree *t, struct broot *root)
{
	uint64_t *freed;
	size_t nfreed;

	assert_int_equal(bt_commit(t, root, &freed, &nfreed), 0);
	bt_release(t, freed, nfreed);
	free(freed);
}
