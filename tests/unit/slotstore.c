// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: the in-memory node store of the format-v2 space unit tests (slotstore.h). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bnode.h"
#include "slotstore.h"

uint64_t slot_of(const struct slotstore *s, uint64_t addr)
{
	assert_true(addr >= s->base && (addr - s->base) / BNODE_BLOCKS < s->nslots);
	return (addr - s->base) / BNODE_BLOCKS;
}

static int slot_read(void *ctx, const struct bptr *p, void *buf, struct bpiece_chain *chain)
{
	struct slotstore *s = ctx;
	uint64_t slot = (p->addr - s->base) / BNODE_BLOCKS;
	int ret = -EIO;

	if (chain)
		memset(chain, 0, sizeof(*chain));
	pthread_mutex_lock(&s->mu);
	if (s->fail_reads > 0) {
		s->fail_reads--;
	} else if (p->addr >= s->base && slot < s->nslots && s->node[slot]) {
		memcpy(buf, s->node[slot], BNODE_SIZE);
		ret = bnode_matches(buf, p) ? 0 : -EIO;
	}
	pthread_mutex_unlock(&s->mu);
	return ret;
}

static int slot_write(void *ctx, uint64_t addr, const void *buf)
{
	struct slotstore *s = ctx;
	uint64_t slot = (addr - s->base) / BNODE_BLOCKS;

	if (addr < s->base || slot >= s->nslots)
		return -EINVAL;
	pthread_mutex_lock(&s->mu);
	if (s->fail_writes > 0) {
		s->fail_writes--;
		pthread_mutex_unlock(&s->mu);
		return -EIO;
	}
	if (!s->node[slot]) {
		s->node[slot] = malloc(BNODE_SIZE);
		assert_non_null(s->node[slot]);
		s->bytes += BNODE_SIZE;
	}
	memcpy(s->node[slot], buf, BNODE_SIZE);
	pthread_mutex_unlock(&s->mu);
	return 0;
}

static int no_alloc(void *ctx, uint64_t *addr)
{
	(void)ctx;
	(void)addr;
	return -ENOSPC;
}

static void no_free(void *ctx, uint64_t addr)
{
	(void)ctx;
	(void)addr;
}

static const struct bstore_ops slot_ops = {
	.read = slot_read, .write = slot_write, .alloc = no_alloc, .free = no_free,
};

void slot_init(struct slotstore *s, uint64_t base, uint64_t nslots)
{
	memset(s, 0, sizeof(*s));
	s->base = base;
	s->nslots = nslots;
	s->node = calloc(nslots, sizeof(*s->node));
	assert_non_null(s->node);
	pthread_mutex_init(&s->mu, NULL);
	s->store.ops = &slot_ops;
	s->store.ctx = s;
}

void slot_destroy(struct slotstore *s)
{
	for (uint64_t i = 0; i < s->nslots; i++)
		free(s->node[i]);
	free(s->node);
	pthread_mutex_destroy(&s->mu);
}

void slot_discard(struct slotstore *s, uint64_t addr, uint64_t n)
{
	pthread_mutex_lock(&s->mu);
	for (uint64_t b = addr; b < addr + n; b += BNODE_BLOCKS) {
		uint64_t slot = slot_of(s, b);

		if (s->node[slot]) {
			free(s->node[slot]);
			s->node[slot] = NULL;
			s->bytes -= BNODE_SIZE;
		}
	}
	pthread_mutex_unlock(&s->mu);
}
