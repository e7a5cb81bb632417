// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: format-v2 B+tree on an in-memory node store: node codec (strict checks, csum seeded with the address), node cache budget and pins, copy-on-write transactions (commit, abort, old root intact, freed list, all nodes of a commit in one write_many), splits/merges down to one leaf, iteration, error poisoning, and a randomized model test of 100k operations with periodic commit and reopen.  Changes to leaves under distinct parents copy those parents: the node gate's interior bound (fs_node_interior) holds and a flat margin does not. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "bcache.h"
#include "bnode.h"
#include "btree.h"
#include "bstore.h"
#include "bt_memstore.h"
#include "fs_i.h"		/* the node gate's arithmetic */

static const uint8_t *const uuid = bt_uuid;	/* the tree env_open makes */

/* ---- helpers ---- */

static void fill(uint8_t *buf, unsigned len, uint64_t seed)
{
	for (unsigned i = 0; i < len; i++)
		buf[i] = (uint8_t)(seed * 131 + i * 7 + (seed >> 9));
}

/* A compound literal, so &K(...) works. */
#define K(id, type, off) ((struct bkey){ (id), (uint8_t)(type), (off) })

static void put_val(struct btree *t, struct bkey k, unsigned len, uint64_t seed)
{
	uint8_t v[BNODE_MAX_VAL];

	fill(v, len, seed);
	assert_int_equal(bt_insert(t, &k, v, len), 0);
}

static void expect_val(struct btree *t, struct bkey k, unsigned len, uint64_t seed)
{
	uint8_t v[BNODE_MAX_VAL], want[BNODE_MAX_VAL];
	unsigned got;

	assert_int_equal(bt_lookup(t, &k, v, sizeof(v), &got), 0);
	assert_int_equal(got, len);
	fill(want, len, seed);
	assert_memory_equal(v, want, len);
}

/* ---- node codec ---- */

static void test_bnode(void **state)
{
	static uint8_t n[BNODE_SIZE], c[BNODE_SIZE];
	struct bkey k;
	unsigned idx, len;
	char why[128];

	bnode_init(n, 0, 4096, 7, 3, uuid);
	for (unsigned i = 0; i < 100; i++) {
		uint8_t v[64];

		fill(v, i % 64, i);
		k = K(i / 10, (uint8_t)(i % 10), i * 3);
		assert_false(bnode_search(n, &k, &idx));
		bnode_leaf_insert(n, idx, &k, v, i % 64);
	}
	assert_int_equal(bnode_nritems(n), 100);
	assert_int_equal(bnode_check(n, why, sizeof(why)), 0);
	k = K(5, 3, 159);
	assert_true(bnode_search(n, &k, &idx));
	assert_int_equal(idx, 53);
	assert_int_equal(*(const uint8_t *)bnode_val(n, 53, &len) == (uint8_t)(53 * 131), 1);
	assert_int_equal(len, 53 % 64);
	bnode_leaf_delete(n, 53);
	assert_int_equal(bnode_check(n, why, sizeof(why)), 0);
	assert_false(bnode_search(n, &k, &idx));

	/* Seal: verified only through a pointer naming its address and generation. */
	uint64_t cs = bnode_seal(n);
	assert_true(bnode_matches(n, &(struct bptr){ 4096, 7, cs, 0 }));
	assert_false(bnode_matches(n, &(struct bptr){ 4100, 7, cs, 0 }));
	assert_false(bnode_matches(n, &(struct bptr){ 4096, 6, cs, 0 }));
	/* The same bytes written at another address do not verify there. */
	assert_int_not_equal(bnode_csum(n, 4100), cs);
	memcpy(c, n, BNODE_SIZE);
	c[BNODE_SIZE - 1] ^= 1;
	assert_false(bnode_matches(c, &(struct bptr){ 4096, 7, cs, 0 }));

	/* Strict: keys out of order, a nonzero byte in the free space, a value
	 * running into the heads, reserved header bytes. */
	memcpy(c, n, BNODE_SIZE);
	memcpy(c + BNODE_HDR, n + BNODE_HDR + BNODE_ITEM, 16);
	assert_int_equal(bnode_check(c, why, sizeof(why)), -EUCLEAN);
	memcpy(c, n, BNODE_SIZE);
	c[BNODE_HDR + 99 * BNODE_ITEM + 5] = 1;
	assert_int_equal(bnode_check(c, why, sizeof(why)), -EUCLEAN);
	memcpy(c, n, BNODE_SIZE);
	c[BNODE_HDR + 98 * BNODE_ITEM + 17] = 0;	/* item 98's value offset */
	assert_int_equal(bnode_check(c, why, sizeof(why)), -EUCLEAN);
	memcpy(c, n, BNODE_SIZE);
	c[57] = 1;
	assert_int_equal(bnode_check(c, why, sizeof(why)), -EUCLEAN);

	/* Moving items keeps the node canonical. */
	bnode_init(c, 0, 8192, 7, 3, uuid);
	bnode_append(c, n, 50, 99);
	bnode_truncate(n, 50);
	assert_int_equal(bnode_check(n, why, sizeof(why)), 0);
	assert_int_equal(bnode_check(c, why, sizeof(why)), 0);
	bnode_drop_front(c, 10);
	assert_int_equal(bnode_check(c, why, sizeof(why)), 0);
	assert_int_equal(bnode_nritems(c), 39);
	bnode_key(c, 0, &k);
	assert_int_equal(k.id, 6);
	assert_int_equal(k.type, 1);

	/* Internal nodes: a child younger than its parent is refused. */
	bnode_init(c, 1, 8192, 7, 3, uuid);
	bnode_ptr_insert(c, 0, &bkey_min, &(struct bptr){ 12, 7, 99, 0 });
	assert_int_equal(bnode_check(c, why, sizeof(why)), 0);
	bnode_set_ptr(c, 0, &(struct bptr){ 12, 8, 99, 0 });
	assert_int_equal(bnode_check(c, why, sizeof(why)), -EUCLEAN);
	/* Leaf pieces: nblocks in bits 48..55 of the child address; 0 leaves
	 * the bytes as before, bits 56..63 stay in addr (no valid address). */
	{
		struct bptr q;
		const uint8_t *e = (const uint8_t *)c + BNODE_HDR + 16;

		bnode_set_ptr(c, 0, &(struct bptr){ 12, 7, 99, 16 });
		assert_true(e[0] == 12 && e[6] == 16 && e[7] == 0);
		bnode_ptr(c, 0, &q);
		assert_true(q.addr == 12 && q.nblocks == 16 && q.gen == 7 && q.csum == 99);
		bnode_set_ptr(c, 0, &(struct bptr){ 12, 7, 99, 0 });
		assert_true(e[6] == 0);
		memcpy((uint8_t *)c + BNODE_HDR + 16 + 7, "\x01", 1);
		bnode_ptr(c, 0, &q);
		assert_true(q.addr == (12 | 1ull << 56) && q.nblocks == 0);
	}
	k = bkey_max;
	assert_false(bkey_succ(&k));
	k = K(1, 255, BKEY_OFF_MAX);
	assert_true(bkey_succ(&k));
	assert_int_equal(k.id, 2);
}

/* ---- cache ---- */

static void test_bcache(void **state)
{
	struct bcache *c;
	struct bcache_node *n, *pinned;
	struct bcache_stats st;

	assert_int_equal(bcache_create(4 * BNODE_SIZE, &c), 0);
	assert_int_equal(bcache_alloc(c, 100, &pinned), 0);
	pinned->dirty = true;
	bcache_insert(c, &pinned);
	bcache_put(c, pinned);
	for (uint64_t a = 0; a < 10; a++) {
		assert_int_equal(bcache_alloc(c, 200 + a, &n), 0);
		bcache_insert(c, &n);
		bcache_put(c, n);
	}
	bcache_stats(c, &st);
	assert_true(st.bytes <= 4 * BNODE_SIZE);
	assert_int_equal(st.dirty_bytes, BNODE_SIZE);
	assert_int_equal(st.evictions, 7);
	/* The dirty node survived; the oldest clean ones went first. */
	n = bcache_get(c, 100);
	assert_non_null(n);
	bcache_put(c, n);
	assert_null(bcache_get(c, 200));
	n = bcache_get(c, 209);
	assert_non_null(n);
	/* Referenced: not evicted even far past the budget. */
	for (uint64_t a = 0; a < 10; a++) {
		struct bcache_node *m;

		assert_int_equal(bcache_alloc(c, 300 + a, &m), 0);
		bcache_insert(c, &m);
		bcache_put(c, m);
	}
	assert_ptr_equal(bcache_get(c, 209), n);
	bcache_put(c, n);
	bcache_put(c, n);
	bcache_set_dirty(c, pinned, false);
	bcache_drop_addr(c, 100);
	assert_null(bcache_get(c, 100));
	bcache_destroy(c);
}

/* ---- tree basics ---- */

static void test_grow_shrink(void **state)
{
	struct env e;
	struct broot r1, r2;
	uint64_t items, nodes, gen = 1;
	const unsigned N = 60000;

	env_open(&e, 1u << 20);
	assert_int_equal(bt_insert(&e.t, &K(1, 1, 1), "x", 1), -EINVAL);	/* no transaction */
	assert_int_equal(bt_begin(&e.t, gen++), 0);
	assert_int_equal(bt_begin(&e.t, gen), -EBUSY);
	for (unsigned i = 0; i < N; i++)
		put_val(&e.t, K(i % 7, 1, i), 100 + i % 50, i);
	assert_int_equal(bt_verify(&e.t, &items, &nodes), 0);
	assert_int_equal(items, N);
	assert_true(e.t.root.level >= 2);	/* internal nodes split too */
	commit_release(&e.t, &r1);
	assert_int_equal(e.ms.nused, nodes);
	assert_int_equal(bt_begin(&e.t, 1), -EINVAL);	/* generations only grow */

	/* Delete all but a few: merges and rebalances collapse the tree. */
	assert_int_equal(bt_begin(&e.t, gen++), 0);
	for (unsigned i = 0; i < N; i++)
		if (i % 1000)
			assert_int_equal(bt_delete(&e.t, &K(i % 7, 1, i)), 0);
	assert_int_equal(bt_delete(&e.t, &K(9, 9, 9)), -ENOENT);
	assert_int_equal(bt_verify(&e.t, &items, &nodes), 0);
	assert_int_equal(items, N / 1000);
	assert_true(nodes <= 3);	/* each leaf at least a quarter full */
	assert_true(e.t.merges > 0 && e.t.rebalances > 0);
	/* Not committed: the old root still reaches everything. */
	{
		struct btree old;

		assert_int_equal(bt_open(&old, &e.ms.store, e.cache, 5, uuid, &r1), 0);
		expect_val(&old, K(1, 1, 1), 101, 1);
		assert_int_equal(bt_verify(&old, &items, NULL), 0);
		assert_int_equal(items, N);
		bt_close(&old);
	}
	commit_release(&e.t, &r2);
	assert_int_equal(e.ms.nused, nodes);
	for (unsigned i = 0; i < N; i += 1000)
		expect_val(&e.t, K(i % 7, 1, i), 100 + i % 50, i);
	/* Deleting the rest leaves one empty leaf. */
	assert_int_equal(bt_begin(&e.t, gen++), 0);
	for (unsigned i = 0; i < N; i += 1000)
		assert_int_equal(bt_delete(&e.t, &K(i % 7, 1, i)), 0);
	commit_release(&e.t, &r2);
	assert_int_equal(r2.level, 0);
	assert_int_equal(bt_verify(&e.t, &items, &nodes), 0);
	assert_int_equal(items, 0);
	assert_int_equal(nodes, 1);
	assert_int_equal(e.ms.nused, 1);
	env_close(&e);
}

/* The node gate (fs_i.h) bounds what a checkpoint writes by the leaves it
 * changes plus their interior copies (fs_node_interior) plus a margin of
 * one node a level for the roots.  Changes spread so that every changed
 * leaf has a parent of its own copy that parent too: 40 of them write
 * about 80 nodes, more than the leaves and a flat margin of 32 (all the
 * gate counted for interior nodes before) allow. */
static void test_interior_bound(void **state)
{
	const unsigned VLEN = BNODE_MAX_VAL, L = 40;
	uint64_t items, nodes, w0, wrote;
	struct broot r;
	struct env e;
	unsigned n;

	(void)state;
	env_open(&e, 1u << 20);
	/* Descending inserts split in halves: 2 items a leaf, about 200
	 * leaves a parent; L * 500 items give some 80 parents. */
	n = L * 500;
	assert_int_equal(bt_begin(&e.t, 1), 0);
	for (unsigned i = n; i-- > 0;)
		put_val(&e.t, K(5, 1, i), VLEN, i);
	assert_int_equal(bt_verify(&e.t, &items, &nodes), 0);
	assert_int_equal(items, n);
	assert_int_equal(e.t.root.level, 2);
	commit_release(&e.t, &r);
	/* One item in each of L leaves a parent's span apart. */
	w0 = atomic_load(&e.t.written);
	assert_int_equal(bt_begin(&e.t, 2), 0);
	for (unsigned k = 0; k < L; k++)
		put_val(&e.t, K(5, 1, k * (n / L)), VLEN, k + 7);
	commit_release(&e.t, &r);
	wrote = atomic_load(&e.t.written) - w0;
	fprintf(stderr, "%u leaves changed in a tree of %llu nodes: %llu written, the gate "
		"counts %llu and the margin\n", L, (unsigned long long)nodes,
		(unsigned long long)wrote,
		(unsigned long long)(L + fs_node_interior(L, nodes)));
	assert_true(wrote > L + FS_NODE_MARGIN);	/* a flat margin is not enough */
	assert_true(wrote <= L + fs_node_interior(L, nodes) + BNODE_MAX_LEVEL);
	env_close(&e);
}

/* Ascending inserts (a checkpoint of new inodes) leave full nodes behind;
 * descending ones split in halves as before.  Everything reads back. */
static void test_ascending_fill(void **state)
{
	const unsigned N = 20000, VLEN = 100;
	const unsigned per_leaf = BNODE_USABLE / (BNODE_ITEM + VLEN);
	const unsigned leaves = (N + per_leaf - 1) / per_leaf;
	uint64_t items, nodes, half;
	struct broot r;
	struct env e;

	(void)state;
	env_open(&e, 1u << 20);
	assert_int_equal(bt_begin(&e.t, 1), 0);
	for (unsigned i = 0; i < N; i++)
		put_val(&e.t, K(5, 1, i), VLEN, i);
	assert_int_equal(bt_verify(&e.t, &items, &nodes), 0);
	assert_int_equal(items, N);
	/* half splits: about 2 * leaves */
	assert_true(nodes <= leaves + leaves / 10 + 2);
	commit_release(&e.t, &r);
	for (unsigned i = 0; i < N; i += 97)
		expect_val(&e.t, K(5, 1, i), VLEN, i);

	assert_int_equal(bt_begin(&e.t, 2), 0);
	for (unsigned i = N; i-- > 0;)
		put_val(&e.t, K(3, 1, i), VLEN, i);
	assert_int_equal(bt_verify(&e.t, &items, &half), 0);
	assert_int_equal(items, 2 * N);
	assert_true(half - nodes > leaves + leaves / 2);	/* halves: more nodes */
	commit_release(&e.t, &r);
	for (unsigned i = 0; i < N; i += 97) {
		expect_val(&e.t, K(3, 1, i), VLEN, i);
		expect_val(&e.t, K(5, 1, i), VLEN, i);
	}
	env_close(&e);
}

/* A merge at level 1 whose path node is the right one (the delete's
 * key is under it) keeps the left sibling; the path must go on through
 * the survivor.  It went on through the freed right node: when the root
 * then had one child, shrink_root made that child the root and, finding
 * the freed node (one pointer left) at the next level of the path, made
 * its child the root too, a leaf whose range started at a separator:
 * everything under the left sibling was gone from the tree, and an
 * iterator looking before that leaf's first key spun for ever (found by
 * the double-crash run of fsstress and rm -rf, session 41).  Ascending
 * inserts until the root is at level 2 leave a right level-1 node of two
 * leaves; deleting from the right end merges them, then that node into
 * its full left sibling. */
static void test_merge_right_path(void **state)
{
	const unsigned VLEN = 100;
	uint64_t items, nodes;
	unsigned n = 0;
	struct broot r;
	struct env e;

	(void)state;
	env_open(&e, 1u << 20);
	assert_int_equal(bt_begin(&e.t, 1), 0);
	while (e.t.root.level < 2)
		put_val(&e.t, K(5, 1, n), VLEN, n), n++;
	commit_release(&e.t, &r);
	assert_int_equal(bt_begin(&e.t, 2), 0);
	for (unsigned i = n; i-- > n / 2;) {
		assert_int_equal(bt_delete(&e.t, &K(5, 1, i)), 0);
		if (e.t.root.level < 2)
			break;
	}
	assert_int_equal(bt_verify(&e.t, &items, &nodes), 0);
	assert_true(e.t.root.level == 1);
	for (unsigned i = 0; i < items; i += 7)
		expect_val(&e.t, K(5, 1, i), VLEN, i);
	assert_true(items >= n - 3 * BNODE_USABLE / (BNODE_ITEM + VLEN));
	commit_release(&e.t, &r);
	assert_int_equal(bt_verify(&e.t, &items, &nodes), 0);
	env_close(&e);
}

/* A damaged tree whose leaf does not hold the key the descent looked for
 * (a root whose range starts past the key) makes an iterator fail with
 * -EUCLEAN; it spun for ever before session 41.  Damaged by hand in the
 * cache: the root leaf's lower bound raised. */
static void test_iter_damaged_range(void **state)
{
	const void *val;
	struct bcache_node *n;
	struct bt_iter it;
	struct broot r;
	struct bkey k;
	struct env e;
	unsigned len;

	(void)state;
	env_open(&e, 1u << 20);
	assert_int_equal(bt_begin(&e.t, 1), 0);
	for (unsigned i = 10; i < 20; i++)
		put_val(&e.t, K(5, 1, i), 10, i);
	commit_release(&e.t, &r);
	assert_int_equal(r.level, 0);
	n = bcache_get(e.cache, r.ptr.addr);
	assert_non_null(n);
	bnode_set_min(n->buf, &K(5, 1, 10));
	bcache_put(e.cache, n);
	assert_int_equal(bt_iter_init(&it, &e.t, &K(5, 1, 5)), 0);
	assert_int_equal(bt_iter_prev(&it, &k, &val, &len), -EUCLEAN);
	bt_iter_free(&it);
	assert_int_equal(bt_iter_init(&it, &e.t, &K(5, 1, 12)), 0);
	assert_int_equal(bt_iter_next(&it, &k, &val, &len), 0);	/* inside: fine */
	assert_true(bkey_cmp(&k, &K(5, 1, 12)) == 0);
	bt_iter_free(&it);
	env_close(&e);
}

static void test_commit_abort(void **state)
{
	struct env e;
	struct broot r1, r2;
	uint64_t *freed, items, writes;
	size_t nfreed;
	uint8_t big[BNODE_MAX_VAL + 1];

	env_open(&e, 1u << 20);
	assert_int_equal(bt_begin(&e.t, 10), 0);
	for (unsigned i = 0; i < 2000; i++)
		put_val(&e.t, K(i, 2, 0), 100, i);
	assert_int_equal(bt_insert(&e.t, &K(1, 1, 1), big, sizeof(big)), -E2BIG);
	assert_int_equal(bt_insert(&e.t, &K(1, 1, BKEY_OFF_MAX + 1), big, 1), -EINVAL);
	commit_release(&e.t, &r1);
	assert_int_equal(r1.ptr.gen, 10);

	/* One change rewrites only its path; the rest is shared. */
	writes = e.ms.writes;
	assert_int_equal(bt_begin(&e.t, 11), 0);
	put_val(&e.t, K(5, 2, 0), 7, 77);
	assert_int_equal(bt_commit(&e.t, &r2, &freed, &nfreed), 0);
	assert_int_equal(e.ms.writes - writes, r2.level + 1);
	assert_int_equal(nfreed, r2.level + 1);
	/* Until released, the old root is whole next to the new one. */
	{
		struct btree old;

		assert_int_equal(bt_open(&old, &e.ms.store, e.cache, 5, uuid, &r1), 0);
		expect_val(&old, K(5, 2, 0), 100, 5);
		bt_close(&old);
	}
	bt_release(&e.t, freed, nfreed);
	free(freed);
	expect_val(&e.t, K(5, 2, 0), 7, 77);

	/* Abort: back to the committed root, the transaction's nodes freed. */
	uint64_t used = e.ms.nused;
	assert_int_equal(bt_begin(&e.t, 12), 0);
	for (unsigned i = 0; i < 2000; i += 2)
		assert_int_equal(bt_delete(&e.t, &K(i, 2, 0)), 0);
	put_val(&e.t, K(99999, 1, 0), 10, 1);
	bt_abort(&e.t);
	assert_int_equal(e.ms.nused, used);
	assert_int_equal(bt_verify(&e.t, &items, NULL), 0);
	assert_int_equal(items, 2000);
	expect_val(&e.t, K(4, 2, 0), 100, 4);
	assert_int_equal(bt_lookup(&e.t, &K(99999, 1, 0), big, sizeof(big), &(unsigned){ 0 }),
			 -ENOENT);
	assert_int_equal(bt_lookup(&e.t, &K(4, 2, 0), big, 10, &(unsigned){ 0 }), -EOVERFLOW);

	/* An empty transaction commits the same root. */
	assert_int_equal(bt_begin(&e.t, 13), 0);
	assert_int_equal(bt_commit(&e.t, &r1, &freed, &nfreed), 0);
	assert_int_equal(r1.ptr.addr, r2.ptr.addr);
	assert_int_equal(nfreed, 0);
	free(freed);
	env_close(&e);
}

/* Part commits (bt_set_young): a node of a generation no durable root
 * reaches is freed by the commit that stops referencing it, not listed;
 * an abort keeps it (the committed tree still has it). */
static void test_young(void **state)
{
	struct env e;
	struct broot r;
	uint64_t *freed, used;
	size_t nfreed;

	env_open(&e, 1u << 20);
	assert_int_equal(bt_begin(&e.t, 10), 0);
	for (unsigned i = 0; i < 2000; i++)
		put_val(&e.t, K(i, 2, 0), 100, i);
	commit_release(&e.t, &r);		/* "durable" at 10 */
	bt_set_young(&e.t, 11);
	/* Part 1 at 11: its path is new, the old one listed as usual. */
	assert_int_equal(bt_begin(&e.t, 11), 0);
	put_val(&e.t, K(5, 2, 0), 7, 1);
	assert_int_equal(bt_commit(&e.t, &r, &freed, &nfreed), 0);
	assert_int_equal(nfreed, r.level + 1);
	free(freed);
	used = e.ms.nused;
	/* An abort of part 2 frees nothing of part 1. */
	assert_int_equal(bt_begin(&e.t, 12), 0);
	put_val(&e.t, K(5, 2, 0), 7, 2);
	bt_abort(&e.t);
	assert_int_equal(e.ms.nused, used);
	expect_val(&e.t, K(5, 2, 0), 7, 1);
	/* Part 2 at 12 rewrites the same path: part 1's nodes are freed by
	 * the commit, none listed. */
	assert_int_equal(bt_begin(&e.t, 12), 0);
	put_val(&e.t, K(5, 2, 0), 7, 3);
	assert_int_equal(bt_commit(&e.t, &r, &freed, &nfreed), 0);
	assert_int_equal(nfreed, 0);
	free(freed);
	assert_int_equal(e.ms.nused, used);
	assert_int_equal(bt_verify(&e.t, NULL, NULL), 0);
	expect_val(&e.t, K(5, 2, 0), 7, 3);
	env_close(&e);
}

/* A failed allocation poisons the transaction; abort recovers. */
static void test_errors(void **state)
{
	struct env e;
	struct broot r;
	uint64_t items;
	unsigned len;
	uint8_t v[16];
	int ret = 0;

	env_open(&e, 1u << 20);
	assert_int_equal(bt_begin(&e.t, 1), 0);
	for (unsigned i = 0; i < 3000; i++)
		put_val(&e.t, K(i, 0, 0), 100, i);
	commit_release(&e.t, &r);
	assert_int_equal(bt_begin(&e.t, 2), 0);
	e.ms.fail_alloc_after = 1;
	for (unsigned i = 0; i < 3000 && !ret; i++) {
		uint8_t b[100];

		fill(b, sizeof(b), i);
		ret = bt_insert(&e.t, &K(i, 1, 0), b, sizeof(b));
	}
	assert_int_equal(ret, -ENOSPC);
	e.ms.fail_alloc_after = -1;
	assert_int_equal(bt_insert(&e.t, &K(1, 9, 0), v, 1), -ENOSPC);
	assert_int_equal(bt_commit(&e.t, &r, &(uint64_t *){ NULL }, &(size_t){ 0 }), -ENOSPC);
	bt_abort(&e.t);
	assert_int_equal(bt_verify(&e.t, &items, NULL), 0);
	assert_int_equal(items, 3000);

	/* A node damaged in the store: -EIO, never other bytes. */
	{
		struct bcache *c2;
		struct btree t2;
		struct bptr p;
		uint8_t root[BNODE_SIZE];

		assert_int_equal(mem_read(&e.ms, &r.ptr, root, NULL), 0);
		bnode_ptr(root, 1, &p);
		((uint8_t *)e.ms.node[addr_slot(&e.ms, p.addr)])[200] ^= 4;
		assert_int_equal(bcache_create(1u << 20, &c2), 0);
		assert_int_equal(bt_open(&t2, &e.ms.store, c2, 5, uuid, &r), 0);
		expect_val(&t2, K(0, 0, 0), 100, 0);
		assert_int_equal(bt_verify(&t2, NULL, NULL), -EIO);
		{
			struct bkey k;

			bnode_key(root, 1, &k);
			assert_int_equal(bt_lookup(&t2, &k, v, sizeof(v), &len), -EIO);
		}
		/* A tree of another owner, or another file system, is refused. */
		bt_close(&t2);
		bcache_destroy(c2);
		assert_int_equal(bcache_create(1u << 20, &c2), 0);
		assert_int_equal(bt_open(&t2, &e.ms.store, c2, 6, uuid, &r), 0);
		assert_int_equal(bt_lookup(&t2, &K(0, 0, 0), v, sizeof(v), &len), -EUCLEAN);
		bt_close(&t2);
		bcache_destroy(c2);
	}
	env_close(&e);
}

/* A store that hands out an address in use (a store bug): refused, not a
 * node silently lost. */
static uint64_t dup_addr;

static int dup_alloc(void *ctx, uint64_t *addr)
{
	if (!dup_addr && mem_alloc(ctx, &dup_addr))
		return -ENOSPC;
	*addr = dup_addr;
	return 0;
}

static void test_store_bug(void **state)
{
	static const struct bstore_ops dup_ops = {
		.read = mem_read, .write = mem_write, .alloc = dup_alloc, .free = mem_free,
	};
	struct bstore dup;
	struct bcache *c;
	struct btree t;
	struct memstore ms;
	int ret = 0;

	mem_init(&ms);
	dup = (struct bstore){ .ops = &dup_ops, .ctx = &ms };
	dup_addr = 0;
	assert_int_equal(bcache_create(1u << 20, &c), 0);
	assert_int_equal(bt_open(&t, &dup, c, 5, uuid, NULL), 0);
	assert_int_equal(bt_begin(&t, 1), 0);
	for (unsigned i = 0; i < 1000 && !ret; i++) {
		uint8_t v[100];

		fill(v, sizeof(v), i);
		ret = bt_insert(&t, &K(i, 0, 0), v, sizeof(v));
	}
	assert_int_equal(ret, -EUCLEAN);	/* at the first split */
	bt_abort(&t);
	assert_int_equal(ms.nused, 0);
	bt_close(&t);
	bcache_destroy(c);
	mem_destroy(&ms);
}

/* A commit hands all its nodes to write_many at once when the store has
 * it (one device round trip per batch, not per node), children sealed
 * before their parents, and the tree reads back. */
static size_t wm_calls, wm_nodes;

static int count_write_many(void *ctx, size_t n, const uint64_t *addrs, void *const *bufs)
{
	wm_calls++;
	wm_nodes += n;
	for (size_t i = 0; i < n; i++) {
		int ret = mem_write(ctx, addrs[i], bufs[i]);

		if (ret)
			return ret;
	}
	return 0;
}

static void test_write_many(void **state)
{
	static const struct bstore_ops wm_ops = {
		.read = mem_read, .write = mem_write, .write_many = count_write_many,
		.alloc = mem_alloc, .free = mem_free,
	};
	struct bstore wm;
	struct bcache *c;
	struct btree t;
	struct broot root;
	struct memstore ms;
	uint64_t writes;

	(void)state;
	mem_init(&ms);
	wm = (struct bstore){ .ops = &wm_ops, .ctx = &ms };
	wm_calls = wm_nodes = 0;
	assert_int_equal(bcache_create(4u << 20, &c), 0);
	assert_int_equal(bt_open(&t, &wm, c, 5, uuid, NULL), 0);
	assert_int_equal(bt_begin(&t, 1), 0);
	for (unsigned i = 0; i < 3000; i++)
		put_val(&t, K(i, 0, 0), 100, i);
	writes = ms.writes;
	commit_release(&t, &root);
	printf("commit: %zu nodes in %zu write_many call(s)\n", wm_nodes, wm_calls);
	assert_int_equal(wm_calls, 1);
	assert_true(wm_nodes > 10);
	assert_int_equal(ms.writes - writes, wm_nodes);	/* and no single writes */
	bt_close(&t);
	bcache_destroy(c);
	/* Cold: every pointer's csum matches what was written. */
	assert_int_equal(bcache_create(4u << 20, &c), 0);
	assert_int_equal(bt_open(&t, &wm, c, 5, uuid, &root), 0);
	assert_int_equal(bt_verify(&t, NULL, NULL), 0);
	for (unsigned i = 0; i < 3000; i += 7)
		expect_val(&t, K(i, 0, 0), 100, i);
	bt_close(&t);
	bcache_destroy(c);
	mem_destroy(&ms);
}

/* ---- the model test ---- */

struct ment {
	struct bkey k;
	unsigned len;
	uint64_t seed;
};

struct model {
	struct ment *e;
	size_t n, cap;
};

static size_t m_lower(const struct model *m, const struct bkey *k)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (bkey_cmp(&m->e[mid].k, k) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void m_set(struct model *m, const struct bkey *k, unsigned len, uint64_t seed)
{
	size_t i = m_lower(m, k);

	if (i < m->n && !bkey_cmp(&m->e[i].k, k)) {
		m->e[i].len = len;
		m->e[i].seed = seed;
		return;
	}
	if (m->n == m->cap) {
		m->cap = m->cap ? m->cap * 2 : 1024;
		m->e = realloc(m->e, m->cap * sizeof(*m->e));
		assert_non_null(m->e);
	}
	memmove(m->e + i + 1, m->e + i, (m->n - i) * sizeof(*m->e));
	m->e[i] = (struct ment){ *k, len, seed };
	m->n++;
}

static bool m_del(struct model *m, const struct bkey *k)
{
	size_t i = m_lower(m, k);

	if (i == m->n || bkey_cmp(&m->e[i].k, k))
		return false;
	memmove(m->e + i, m->e + i + 1, (m->n - i - 1) * sizeof(*m->e));
	m->n--;
	return true;
}

static void m_copy(struct model *dst, const struct model *src)
{
	if (dst->cap < src->n) {
		dst->cap = src->n;
		dst->e = realloc(dst->e, dst->cap * sizeof(*dst->e));
		assert_non_null(dst->e);
	}
	if (src->n)
		memcpy(dst->e, src->e, src->n * sizeof(*src->e));
	dst->n = src->n;
}

static uint64_t rng = 88172645463325252ull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void check_item(const struct ment *want, const struct bkey *k, const void *v,
		       unsigned len)
{
	uint8_t buf[BNODE_MAX_VAL];

	assert_int_equal(bkey_cmp(k, &want->k), 0);
	assert_int_equal(len, want->len);
	fill(buf, len, want->seed);
	assert_memory_equal(v, buf, len);
}

/* The whole tree equals the model, forwards. */
static void check_all(struct btree *t, const struct model *m)
{
	struct bt_iter it;
	struct bkey k;
	const void *v;
	unsigned len;
	uint64_t items;

	assert_int_equal(bt_verify(t, &items, NULL), 0);
	assert_int_equal(items, m->n);
	assert_int_equal(bt_iter_init(&it, t, &bkey_min), 0);
	for (size_t i = 0; i < m->n; i++) {
		assert_int_equal(bt_iter_next(&it, &k, &v, &len), 0);
		check_item(&m->e[i], &k, v, len);
	}
	assert_int_equal(bt_iter_next(&it, &k, &v, &len), -ENOENT);
	bt_iter_free(&it);
}

/* A tree opened on @r (its own cache: reads come from the store) equals @m. */
static void check_root(struct memstore *ms, const struct broot *r, const struct model *m)
{
	struct bcache *c;
	struct btree t;

	assert_int_equal(bcache_create(8 * BNODE_SIZE, &c), 0);
	assert_int_equal(bt_open(&t, &ms->store, c, 5, uuid, r), 0);
	check_all(&t, m);
	bt_close(&t);
	bcache_destroy(c);
}

/* A key that exists with probability pct/100, else most likely a new one. */
static struct bkey rnd_key_p(const struct model *m, unsigned pct)
{
	if (m->n && rnd() % 100 < pct)
		return m->e[rnd() % m->n].k;
	return K(rnd() % 5000, (uint8_t)(rnd() % 3), rnd() % 100000);
}

static struct bkey rnd_key(const struct model *m)
{
	return rnd_key_p(m, 75);
}

static unsigned rnd_len(void)
{
	unsigned r = (unsigned)(rnd() % 1000);

	return r < 990 ? r % 400 : BNODE_MAX_VAL - (unsigned)(rnd() % 100);
}

/* Walk a few items in each direction from a random key, changing the
 * tree now and then under the iterator. */
static void walk(struct btree *t, struct model *m, uint64_t *seedc)
{
	struct bkey start = rnd_key(m), k;
	struct bt_iter it;
	const void *v;
	unsigned len;
	int dir = rnd() % 2 ? 1 : -1;
	size_t i = m_lower(m, &start);

	assert_int_equal(bt_iter_init(&it, t, &start), 0);
	for (int step = 0; step < 40; step++) {
		int ret = dir > 0 ? bt_iter_next(&it, &k, &v, &len) : bt_iter_prev(&it, &k, &v, &len);

		if (dir > 0 ? i >= m->n : i == 0) {
			assert_int_equal(ret, -ENOENT);
			break;
		}
		assert_int_equal(ret, 0);
		if (dir < 0)
			i--;
		check_item(&m->e[i], &k, v, len);
		if (dir > 0)
			i++;
		if (rnd() % 8 == 0) {	/* a change elsewhere: the iterator searches again */
			struct bkey o = rnd_key(m);

			if (!bkey_cmp(&o, &k))
				continue;
			if (rnd() % 2) {
				unsigned l = rnd_len();

				put_val(t, o, l, ++*seedc);
				m_set(m, &o, l, *seedc);
			} else if (m_del(m, &o)) {
				assert_int_equal(bt_delete(t, &o), 0);
			}
			/* Re-anchor the model index on the last returned key. */
			i = m_lower(m, &k) + (dir > 0);
		}
	}
	bt_iter_free(&it);
}

static void model_op(struct btree *t, struct model *m, uint64_t *seedc, bool grow)
{
	unsigned r = (unsigned)(rnd() % 100), len;
	unsigned ins = grow ? 85 : 35;
	/* Inserts mostly add (some replace), deletes mostly hit. */
	struct bkey k = rnd_key_p(m, r < ins ? (grow ? 20 : 50) : 85);
	uint8_t v[BNODE_MAX_VAL];

	if (r < ins) {
		len = rnd_len();
		put_val(t, k, len, ++*seedc);
		m_set(m, &k, len, *seedc);
	} else if (r < 95) {
		int ret = bt_delete(t, &k);

		assert_int_equal(ret, m_del(m, &k) ? 0 : -ENOENT);
	} else if (r < 99) {
		size_t i = m_lower(m, &k);
		int ret = bt_lookup(t, &k, v, sizeof(v), &len);

		if (i < m->n && !bkey_cmp(&m->e[i].k, &k)) {
			assert_int_equal(ret, 0);
			check_item(&m->e[i], &k, v, len);
		} else {
			assert_int_equal(ret, -ENOENT);
		}
	} else {
		walk(t, m, seedc);
	}
}

static void test_model(void **state)
{
	struct model m = { 0 }, committed = { 0 }, prev = { 0 };
	struct broot root = { 0 }, oldroot = { 0 };
	uint64_t seedc = 0, gen = 1, *freed;
	size_t nfreed;
	unsigned maxlevel = 0, aborts = 0;
	size_t maxitems = 0;
	const unsigned OPS = 100000, BATCH = 1000;
	struct env e;

	/* A small cache: eviction and re-reading run all the time. */
	env_open(&e, 16 * BNODE_SIZE);
	for (unsigned done = 0; done < OPS; done += BATCH) {
		bool grow = done < OPS / 2;

		assert_int_equal(bt_begin(&e.t, gen++), 0);
		for (unsigned i = 0; i < BATCH; i++)
			model_op(&e.t, &m, &seedc, grow);
		/* The uncommitted batch left the committed root whole. */
		check_root(&e.ms, &root, &committed);
		if (e.t.root.level > maxlevel)
			maxlevel = e.t.root.level;
		if (m.n > maxitems)
			maxitems = m.n;
		if (done / BATCH % 7 == 3) {
			bt_abort(&e.t);
			m_copy(&m, &committed);
			check_all(&e.t, &m);
			aborts++;
			continue;
		}
		oldroot = root;
		assert_int_equal(bt_commit(&e.t, &root, &freed, &nfreed), 0);
		/* Until the new root is durable the old one must survive it. */
		check_root(&e.ms, &oldroot, &committed);
		bt_release(&e.t, freed, nfreed);
		free(freed);
		m_copy(&prev, &committed);
		m_copy(&committed, &m);
		/* Every node of the tree and nothing else is allocated, and
		 * the committed cache is back within its budget. */
		{
			struct bcache_stats st;
			uint64_t nodes;

			assert_int_equal(bt_verify(&e.t, NULL, &nodes), 0);
			assert_int_equal(e.ms.nused, nodes);
			bcache_stats(e.cache, &st);
			assert_int_equal(st.dirty_bytes, 0);
			assert_true(st.bytes <= st.budget);
		}
		if (done / BATCH % 5 == 0) {	/* reopen from the committed root */
			bt_close(&e.t);
			bcache_destroy(e.cache);
			assert_int_equal(bcache_create(16 * BNODE_SIZE, &e.cache), 0);
			assert_int_equal(bt_open(&e.t, &e.ms.store, e.cache, 5, uuid, &root), 0);
			check_all(&e.t, &m);
		}
	}
	check_all(&e.t, &m);
	printf("model: %zu items at most, %zu at the end, max root level %u, %u aborts, %llu node writes\n",
	       maxitems, m.n, maxlevel, aborts, (unsigned long long)e.ms.writes);
	assert_true(maxlevel >= 2);
	free(m.e);
	free(committed.e);
	free(prev.e);
	env_close(&e);
}

/* ---- readers in parallel with a writer ---- */

struct reader {
	struct btree *t;
	_Atomic bool *stop;
	unsigned checked;
};

/* Keys (1, 1, i) for even i are never changed: every lookup and every
 * iteration over them must see exactly them, whatever the writer does. */
static void *reader_main(void *arg)
{
	struct reader *r = arg;

	while (!atomic_load(r->stop)) {
		for (unsigned i = 0; i < 4000; i += 2 * 37) {
			uint8_t v[64], want[64];
			unsigned len;

			assert_int_equal(bt_lookup(r->t, &K(1, 1, i), v, sizeof(v), &len), 0);
			fill(want, 64, i);
			assert_int_equal(len, 64);
			assert_memory_equal(v, want, 64);
			r->checked++;
		}
		struct bt_iter it;
		struct bkey k;
		const void *v;
		unsigned len, n = 0;

		assert_int_equal(bt_iter_init(&it, r->t, &K(1, 1, 0)), 0);
		while (!bt_iter_next(&it, &k, &v, &len) && k.id == 1)
			if (k.type == 1 && k.off % 2 == 0)
				n++;
		bt_iter_free(&it);
		assert_int_equal(n, 2000);
	}
	return NULL;
}

static void test_concurrent(void **state)
{
	struct env e;
	struct broot r;
	pthread_t th[3];
	struct reader rd[3];
	_Atomic bool stop = false;
	uint64_t gen = 1;

	env_open(&e, 8 * BNODE_SIZE);	/* small: readers miss and read */
	assert_int_equal(bt_begin(&e.t, gen++), 0);
	for (unsigned i = 0; i < 4000; i += 2)
		put_val(&e.t, K(1, 1, i), 64, i);
	commit_release(&e.t, &r);
	for (unsigned i = 0; i < 3; i++) {
		rd[i] = (struct reader){ &e.t, &stop, 0 };
		assert_int_equal(pthread_create(&th[i], NULL, reader_main, &rd[i]), 0);
	}
	for (unsigned round = 0; round < 40; round++) {
		assert_int_equal(bt_begin(&e.t, gen++), 0);
		for (unsigned i = 1; i < 4000; i += 2) {
			if ((i + round) % 3)
				put_val(&e.t, K(1, 1, i), 64 + (i + round) % 200, round);
			else
				(void)bt_delete(&e.t, &K(1, 1, i));
		}
		if (round % 4 == 3)
			bt_abort(&e.t);
		else
			commit_release(&e.t, &r);
	}
	atomic_store(&stop, true);
	for (unsigned i = 0; i < 3; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		assert_true(rd[i].checked > 0);
	}
	assert_int_equal(bt_verify(&e.t, NULL, NULL), 0);
	env_close(&e);
}

/* ---- read-ahead ---- */

/* The read hook of test_prefetch: how many reads were in flight at once
 * (until two were, each waits up to a second for another one). */
static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned inflight, max;
} pf = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 };

static void pf_hook(struct memstore *s, const struct bptr *p)
{
	struct timespec dl;

	(void)s;
	(void)p;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 1;
	pthread_mutex_lock(&pf.mu);
	if (++pf.inflight > pf.max)
		pf.max = pf.inflight;
	pthread_cond_broadcast(&pf.cv);
	while (pf.max < 2 && pthread_cond_timedwait(&pf.cv, &pf.mu, &dl) == 0)
		;
	pf.inflight--;
	pthread_mutex_unlock(&pf.mu);
}

/* bt_prefetch reads the leaves holding a batch of keys into a cold cache,
 * more than one at a time, so the lookups that follow read nothing; the
 * range form does the same for an iteration; max bounds it; what is
 * cached is not read again. */
static void test_prefetch(void **state)
{
	struct env e;
	struct broot r;
	struct bcache *c;
	struct btree t;
	struct bkey keys[800], k;
	struct bt_iter it;
	const void *v;
	unsigned len, nk = 0;
	uint64_t before;
	int n;

	(void)state;
	env_open(&e, 64u << 20);
	assert_int_equal(bt_begin(&e.t, 1), 0);
	for (unsigned i = 0; i < 20000; i++)
		put_val(&e.t, K(i, 1, 0), 100, i);
	commit_release(&e.t, &r);
	assert_true(r.level >= 1);

	/* A cold tree on the same store: every node comes from it. */
	assert_int_equal(bcache_create(64u << 20, &c), 0);
	assert_int_equal(bt_open(&t, &e.ms.store, c, 5, uuid, &r), 0);
	for (unsigned i = 1000; i < 6600; i += 7)
		keys[nk++] = K(i, 1, 0);
	expect_val(&t, keys[0], 100, keys[0].id);	/* the parents, and one leaf */
	e.ms.read_hook = pf_hook;
	before = e.ms.reads;
	n = bt_prefetch(&t, keys, nk, 1000);
	e.ms.read_hook = NULL;
	assert_true(n >= 10);		/* 5,600 items of 100 bytes: many leaves */
	assert_int_equal(e.ms.reads - before, (uint64_t)n);	/* each once, no cached one */
	assert_true(pf.max >= 2);	/* in parallel */
	before = e.ms.reads;
	for (unsigned i = 0; i < nk; i++)
		expect_val(&t, keys[i], 100, keys[i].id);
	assert_int_equal(e.ms.reads, before);	/* every leaf was there */
	assert_int_equal(bt_prefetch(&t, keys, nk, 1000), 0);	/* cached: nothing read */
	assert_int_equal(bt_prefetch(&t, &K(15000, 1, 0), 1, 0), 0);
	assert_int_equal(bt_prefetch(&t, &K(15000, 1, 0), 1, 1), 1);

	/* A range, bounded by max, then all of it. */
	assert_int_equal(bt_prefetch_range(&t, &K(8000, 0, 0), &K(12000, 9, 0), 3), 3);
	n = bt_prefetch_range(&t, &K(8000, 0, 0), &K(12000, 9, 0), 1000);
	assert_true(n >= 10);
	before = e.ms.reads;
	assert_int_equal(bt_iter_init(&it, &t, &K(8000, 0, 0)), 0);
	for (unsigned i = 8000; i <= 12000; i++) {
		assert_int_equal(bt_iter_next(&it, &k, &v, &len), 0);
		assert_int_equal(k.id, i);
	}
	bt_iter_free(&it);
	assert_int_equal(e.ms.reads, before);

	/* Several ranges at once: theirs read, the gaps between them not. */
	{
		const struct bkey lo[3] = { K(13000, 0, 0), K(16000, 0, 0), K(19000, 0, 0) };
		const struct bkey hi[3] = { K(13500, 9, 0), K(16500, 9, 0), K(19500, 9, 0) };

		n = bt_prefetch_ranges(&t, lo, hi, 3, 1000);
		assert_true(n >= 3);
		before = e.ms.reads;
		for (unsigned g = 0; g < 3; g++)
			for (uint64_t i = lo[g].id; i <= hi[g].id; i += 50)
				expect_val(&t, K(i, 1, 0), 100, i);
		assert_int_equal(e.ms.reads, before);
		expect_val(&t, K(14800, 1, 0), 100, 14800);	/* a gap: read now */
		assert_int_equal(e.ms.reads, before + 1);
	}
	bt_close(&t);
	bcache_destroy(c);
	env_close(&e);
}

/* An argument picks tests by name (cmocka pattern): scripts/sanitizers.sh
 * runs only test_concurrent under ThreadSanitizer. */
int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bnode),
		cmocka_unit_test(test_bcache),
		cmocka_unit_test(test_grow_shrink),
		cmocka_unit_test(test_ascending_fill),
		cmocka_unit_test(test_interior_bound),
		cmocka_unit_test(test_merge_right_path),
		cmocka_unit_test(test_iter_damaged_range),
		cmocka_unit_test(test_commit_abort),
		cmocka_unit_test(test_young),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_store_bug),
		cmocka_unit_test(test_write_many),
		cmocka_unit_test(test_model),
		cmocka_unit_test(test_concurrent),
		cmocka_unit_test(test_prefetch),
	};

	if (argc > 1)
		cmocka_set_test_filter(argv[1]);

	return cmocka_run_group_tests(tests, NULL, NULL);
}
