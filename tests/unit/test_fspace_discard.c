// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: format v2 gives a freed tree node to discard only when no superblock slot can name a tree that uses it: over commits that rewrite a tree, the discard hook gets the nodes the commit before the last one freed (those still free), never a node of the two newest trees (each stays readable with its discarded nodes gone from the store), and the held ones are never handed out by an allocation, count as free, and are written as free (a reopen after a crash finds exactly the reachable nodes used); without a hook nothing is held; trim (fspace_node_hold_free) refuses before the first commit and then holds every free slot but the fallback tree's. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bcache.h"
#include "bnode.h"
#include "bstore.h"
#include "btree.h"
#include "fspace.h"
#include "slotstore.h"

#define NODE_START 16u
#define NSLOTS 600u
#define NKEYS 400u

static const uint8_t uuid[16] = { 2, 7, 1, 8, 2, 8, 1, 8 };

/* ---- the hook: records the runs and "discards" them at once ---- */

struct hooked {
	struct slotstore *ms;
	uint64_t addr[NSLOTS], n[NSLOTS];
	size_t cnt;
	bool slot[NSLOTS];		/* held by the hook, not unheld yet */
};

static int hook(void *ctx, uint64_t addr, uint64_t n)
{
	struct hooked *h = ctx;

	assert_true(n > 0 && n % BNODE_BLOCKS == 0);
	assert_true(h->cnt < NSLOTS);
	h->addr[h->cnt] = addr;
	h->n[h->cnt++] = n;
	for (uint64_t b = addr; b < addr + n; b += BNODE_BLOCKS) {
		assert_false(h->slot[(b - NODE_START) / BNODE_BLOCKS]);
		h->slot[(b - NODE_START) / BNODE_BLOCKS] = true;
	}
	slot_discard(h->ms, addr, n);
	return 0;
}

static void unhold_all(struct fspace *fs, struct hooked *h)
{
	for (size_t i = 0; i < h->cnt; i++)
		fspace_node_unhold(fs, h->addr[i], h->n[i]);
	h->cnt = 0;
	memset(h->slot, 0, sizeof(h->slot));
	assert_int_equal(fspace_nodes_held(fs), 0);
}

/* ---- the nodes of a tree ---- */

/* Marks every node under @p in @in (by slot), reading each from the
 * store: a node a fallback needs must still be there. */
static uint64_t mark(struct bstore *io, const struct bptr *p, unsigned level, bool *in)
{
	void *b = malloc(BNODE_SIZE);
	uint64_t n = 1;

	assert_non_null(b);
	assert_int_equal(io->ops->read(io->ctx, p, b, NULL), 0);
	in[(p->addr - NODE_START) / BNODE_BLOCKS] = true;
	for (unsigned i = 0; level && i < bnode_nritems(b); i++) {
		struct bptr c;

		bnode_ptr(b, i, &c);
		n += mark(io, &c, level - 1, in);
	}
	free(b);
	return n;
}

struct gen_roots {
	struct broot t, f;		/* the tree's and the free-space tree's */
};

static uint64_t mark_roots(struct bstore *io, const struct gen_roots *r, bool *in)
{
	uint64_t n = 0;

	if (r->t.ptr.addr)
		n += mark(io, &r->t.ptr, r->t.level, in);
	if (r->f.ptr.addr)
		n += mark(io, &r->f.ptr, r->f.level, in);
	return n;
}

/* ---- a checkpoint: rewrite a part of the keys, commit, publish ---- */

static void checkpoint(struct fspace *fs, struct btree *t, uint64_t gen, struct gen_roots *r)
{
	uint8_t v[96];
	uint64_t *freed;
	size_t nfreed;

	assert_int_equal(bt_begin(t, gen), 0);
	memset(v, (int)gen, sizeof(v));
	for (uint64_t k = gen % 3; k < NKEYS; k += 1 + gen % 3)
		assert_int_equal(bt_insert(t, &(struct bkey){ k, 1, 0 }, v, sizeof(v)), 0);
	assert_int_equal(bt_commit(t, &r->t, &freed, &nfreed), 0);
	assert_int_equal(fspace_commit(fs, gen, freed, nfreed, &r->f), 0);
	/* The superblock naming them is durable: as ckpt_v2's commit_trees. */
	bt_release(t, freed, nfreed);
	fspace_commit_done(fs);
	free(freed);
}

struct env {
	struct slotstore ms;
	struct bcache *c;
	struct fspace *fs;
	struct btree t;
	struct fspace_params p;
};

static void env_open(struct env *e, const struct broot *froot, const struct broot *troot)
{
	assert_int_equal(bcache_create(1u << 20, &e->c), 0);
	assert_int_equal(fspace_open(&e->ms.store, e->c, uuid, &e->p, froot, &e->fs), 0);
	assert_int_equal(bt_open(&e->t, fspace_node_store(e->fs), e->c, 1, uuid, troot), 0);
}

static void env_close(struct env *e)
{
	bt_close(&e->t);
	fspace_close(e->fs);
	bcache_destroy(e->c);
}

static void env_init(struct env *e)
{
	memset(e, 0, sizeof(*e));
	slot_init(&e->ms, NODE_START, NSLOTS);
	e->p = (struct fspace_params){ .start = 4000, .end = 4000 + 4096, .gblocks = 4096,
		.node_start = NODE_START, .nslots = NSLOTS, .node_reserve = 8,
		.budget = 1u << 20 };
}

static void env_destroy(struct env *e)
{
	slot_destroy(&e->ms);
}

/* ---- which freed nodes are discarded, and when ---- */

static void test_fallback(void **state)
{
	struct env e;
	struct hooked *h = calloc(1, sizeof(*h));
	struct gen_roots r[12] = { 0 };
	uint64_t total = 0;

	(void)state;
	assert_non_null(h);
	env_init(&e);
	h->ms = &e.ms;
	env_open(&e, NULL, NULL);
	fspace_set_node_discard(e.fs, hook, h);
	for (uint64_t gen = 2; gen < 12; gen++) {
		bool in[NSLOTS] = { false };
		uint64_t addr;

		checkpoint(e.fs, &e.t, gen, &r[gen]);
		/* Both superblock slots' trees are whole: the newest and the
		 * fallback (mark reads every node of both). */
		mark_roots(&e.ms.store, &r[gen], in);
		if (gen > 2)
			mark_roots(&e.ms.store, &r[gen - 1], in);
		for (unsigned s = 0; s < NSLOTS; s++) {
			assert_false(in[s] && h->slot[s]);
			/* Held: free to everyone who asks, and never handed out. */
			if (h->slot[s])
				assert_false(fspace_node_used(e.fs, NODE_START + s * BNODE_BLOCKS));
		}
		/* The first two commits free nothing anyone can discard: the
		 * first publishes the first fallback list, the second frees
		 * nodes of the first commit's tree, its fallback. */
		if (gen <= 3)
			assert_int_equal(h->cnt, 0);
		else
			assert_true(h->cnt > 0);
		total += h->cnt;
		for (unsigned i = 0; i < 20; i++) {
			struct bstore *st = fspace_node_store(e.fs);

			assert_int_equal(st->ops->alloc(st->ctx, &addr), 0);
			assert_false(h->slot[(addr - NODE_START) / BNODE_BLOCKS]);
			st->ops->free(st->ctx, addr);
		}
		/* Every other round the held slots stay held through the next
		 * commit, which writes the node map: they are written free. */
		if (gen % 2 && gen != 11)
			unhold_all(e.fs, h);
	}
	assert_true(total > 10);
	/* A crash with slots held: the map read back holds exactly the nodes
	 * of the published trees. */
	assert_true(fspace_nodes_held(e.fs) > 0);
	env_close(&e);
	env_open(&e, &r[11].f, &r[11].t);
	{
		bool in[NSLOTS] = { false };
		uint64_t n = mark_roots(&e.ms.store, &r[11], in);

		assert_int_equal(fspace_nodes_used(e.fs), n);
	}
	/* Without a hook nothing is held. */
	checkpoint(e.fs, &e.t, 12, &r[0]);
	checkpoint(e.fs, &e.t, 13, &r[1]);
	checkpoint(e.fs, &e.t, 14, &r[2]);
	assert_int_equal(fspace_nodes_held(e.fs), 0);
	env_close(&e);
	env_destroy(&e);
	free(h);
}

/* ---- trim: every free slot but the fallback's ---- */

static void test_trim(void **state)
{
	struct env e;
	struct gen_roots r[6] = { 0 };
	bool in[NSLOTS] = { false }, held[NSLOTS] = { false };
	uint64_t addr, n, pos = 0, nheld = 0, nin;

	(void)state;
	env_init(&e);
	env_open(&e, NULL, NULL);
	/* Which nodes the older slot's tree uses is known only once a commit
	 * was published: until then trim leaves the node area alone. */
	assert_int_equal(fspace_node_hold_free(e.fs, 0, 8, &addr, &n), -EAGAIN);
	for (uint64_t gen = 2; gen < 6; gen++)
		checkpoint(e.fs, &e.t, gen, &r[gen]);
	mark_roots(&e.ms.store, &r[5], in);
	mark_roots(&e.ms.store, &r[4], in);
	nin = 0;
	for (unsigned s = 0; s < NSLOTS; s++)
		nin += in[s];
	while (fspace_node_hold_free(e.fs, pos, 8, &addr, &n) == 0) {
		assert_true(n > 0 && n <= 8 * BNODE_BLOCKS && addr >= pos);
		for (uint64_t b = addr; b < addr + n; b += BNODE_BLOCKS) {
			uint64_t s = (b - NODE_START) / BNODE_BLOCKS;

			assert_false(in[s]);
			assert_false(held[s]);
			held[s] = true;
			nheld++;
		}
		slot_discard(&e.ms, addr, n);
		pos = addr + n;
	}
	/* Every slot is a node of one of the two trees or was held. */
	assert_int_equal(nheld + nin, NSLOTS);
	assert_int_equal(fspace_nodes_held(e.fs), nheld);
	mark_roots(&e.ms.store, &r[5], in);	/* both still whole */
	mark_roots(&e.ms.store, &r[4], in);
	for (unsigned s = 0; s < NSLOTS; s++)
		if (held[s])
			fspace_node_unhold(e.fs, NODE_START + s * BNODE_BLOCKS, BNODE_BLOCKS);
	assert_int_equal(fspace_nodes_held(e.fs), 0);
	checkpoint(e.fs, &e.t, 6, &r[0]);
	env_close(&e);
	env_destroy(&e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fallback),
		cmocka_unit_test(test_trim),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
