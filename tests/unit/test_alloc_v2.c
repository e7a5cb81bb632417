// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: alloc_v2, alloc.c's state in format v2's trees: a model of random allocations, puts, reflink uses, deferred frees and discard holds, written while other threads allocate or not, (refcount tree and free-space tree) and committed, published or aborted, then reopened from the published roots on a cold cache and compared block by block with the allocator (reference counts and used map), items canonical; cost: one changed block writes a handful of items, and loading reads no group that is wholly used or wholly free. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "alloc.h"
#include "alloc_v2.h"
#include "bcache.h"
#include "bnode.h"
#include "btree.h"
#include "fspace.h"
#include "slotstore.h"
#include "v2item.h"

static const uint8_t uuid[16] = { 2, 7, 1, 8, 2, 8 };

/* ---- the state under test: allocator, fspace, refcount tree ---- */

struct st {
	struct slotstore ms;
	struct fspace_params p;
	uint64_t reserve;		/* alloc.c's metadata reserve */
	struct alloc *a;
	struct bcache *c;
	struct fspace *fs;
	struct btree refs;
	struct alloc_v2 *v;
	struct broot froot, rroot;	/* as last published */
	uint64_t gen;
};

static void st_open(struct st *s)
{
	assert_int_equal(alloc_create(s->p.start, s->p.end, s->reserve, &s->a), 0);
	assert_int_equal(bcache_create(4u << 20, &s->c), 0);
	assert_int_equal(fspace_open(&s->ms.store, s->c, uuid, &s->p, NULL, &s->fs), 0);
	assert_int_equal(bt_open(&s->refs, fspace_node_store(s->fs), s->c, V2_TREE_REFCOUNT, uuid,
				 NULL), 0);
	assert_int_equal(alloc_v2_create(s->a, s->fs, &s->refs, &s->v), 0);
}

static void st_close(struct st *s)
{
	alloc_v2_destroy(s->v);
	bt_close(&s->refs);
	fspace_close(s->fs);
	bcache_destroy(s->c);
	alloc_destroy(s->a);
}

/* A checkpoint's part for the allocator: published, or failing before
 * the refcount tree commits (publish false). */
static void st_commit(struct st *s, bool publish)
{
	struct broot rroot, froot;
	uint64_t *freed = NULL;
	size_t nfreed = 0;

	assert_int_equal(bt_begin(&s->refs, ++s->gen), 0);
	assert_int_equal(alloc_v2_write_refs(s->v), 0);
	if (!publish) {
		bt_abort(&s->refs);
		alloc_v2_refs_abort(s->v);
		return;
	}
	assert_int_equal(bt_commit(&s->refs, &rroot, &freed, &nfreed), 0);
	assert_int_equal(alloc_v2_sync_free(s->v), 0);
	assert_int_equal(fspace_commit(s->fs, ++s->gen, freed, nfreed, &froot), 0);
	s->rroot = rroot;
	s->froot = froot;
	alloc_v2_refs_done(s->v);
	bt_release(&s->refs, freed, nfreed);
	fspace_commit_done(s->fs);
	free(freed);
}

/*
 * Reopen both trees from the published roots on a cold cache and compare
 * with the allocator block by block: used exactly where it has a
 * reference, a REFCOUNT item exactly where it has two or more, items
 * maximal; and the loader gives the same counts back.
 */

/* Another allocator loaded from the same trees equals @b block by block
 * (alloc_v2_compare); alloc_v2_ref changes @b's counts and an undo takes
 * them all back; a difference is found at its block. */
static unsigned ref_undo_runs;	/* check_ref_undo runs that changed counts */

static void check_ref_undo(struct st *s, struct alloc *b, struct alloc_v2 *v)
{
	uint64_t blk = 0, used = 0, fre = 0;
	bool has_used = false, has_free = false;
	uint32_t ca = 0, cb = 0;
	struct alloc *o;

	assert_int_equal(alloc_create(s->p.start, s->p.end, s->reserve, &o), 0);
	assert_int_equal(alloc_v2_load_other(v, o), 0);
	assert_int_equal(alloc_v2_compare(b, o, s->p.start, s->p.end, &blk, &ca, &cb), 0);
	for (uint64_t i = s->p.start; i < s->p.end && (!has_used || !has_free); i++) {
		if (alloc_refs(b, i) && !has_used) {
			used = i;
			has_used = true;
		} else if (!alloc_refs(b, i) && !has_free) {
			fre = i;
			has_free = true;
		}
	}
	/* The threads' allocator may be all free (or all used) at this
	 * moment: the compare above is all there is to check then.  The
	 * model test always has both. */
	if (!has_used || !has_free) {
		alloc_destroy(o);
		return;
	}
	assert_int_equal(alloc_v2_ref(v, fre, 1, +1), 0);
	assert_int_equal(alloc_v2_ref(v, used, 1, -1), 0);
	assert_int_equal(alloc_v2_ref(v, fre, 1, +1), 0);
	assert_int_equal(alloc_refs(b, fre), 2);
	/* A block the trees count free cannot lose a reference. */
	ca = alloc_refs(b, used);
	assert_int_equal(alloc_v2_ref(v, used, 1, -1) == -EUCLEAN, ca == 0);
	assert_int_equal(alloc_v2_compare(b, o, s->p.start, s->p.end, &blk, &ca, &cb), -ESRCH);
	assert_true(blk == (used < fre ? used : fre));
	alloc_v2_refs_undo(v);
	assert_int_equal(alloc_v2_compare(b, o, s->p.start, s->p.end, &blk, &ca, &cb), 0);
	alloc_destroy(o);
	ref_undo_runs++;
}

static uint64_t st_check(struct st *s)
{
	uint64_t total = s->p.end - s->p.start, prev_end = 0;
	uint32_t prev_refs = 0, *tree = calloc(total, sizeof(*tree));
	uint64_t nitems = 0;
	struct alloc_run *ch;
	size_t nch;
	struct bcache *c;
	struct fspace *fs;
	struct btree refs;
	struct bt_iter it;
	struct bkey k;
	const void *val;
	unsigned len;
	struct alloc *b;
	struct alloc_v2 *v;
	char why[200];
	int ret;

	assert_non_null(tree);
	assert_int_equal(bcache_create(4u << 20, &c), 0);
	assert_int_equal(fspace_open(&s->ms.store, c, uuid, &s->p, &s->froot, &fs), 0);
	assert_int_equal(bt_open(&refs, fspace_node_store(fs), c, V2_TREE_REFCOUNT, uuid,
				 &s->rroot), 0);
	assert_int_equal(bt_verify(&refs, NULL, NULL), 0);
	if (fspace_verify(fs, why, sizeof(why)))
		fail_msg("%s", why);
	assert_int_equal(bt_iter_init(&it, &refs, &(struct bkey){ 0, 0, 0 }), 0);
	while (!(ret = bt_iter_next(&it, &k, &val, &len))) {
		uint32_t n, r;

		assert_int_equal(v2_refcount_decode(&k, val, len, &n, &r), 0);
		assert_true(k.id >= s->p.start && k.id + n <= s->p.end);
		assert_true(k.id >= prev_end);
		/* maximal: a touching neighbour has another count */
		assert_false(k.id == prev_end && r == prev_refs);
		for (uint64_t i = 0; i < n; i++)
			tree[k.id - s->p.start + i] = r;
		prev_end = k.id + n;
		prev_refs = r;
		nitems++;
	}
	assert_int_equal(ret, -ENOENT);
	bt_iter_free(&it);
	for (uint64_t i = 0; i < total; i++) {
		uint32_t r = alloc_refs(s->a, s->p.start + i);

		if (tree[i] != (r >= 2 ? r : 0) || fspace_is_free(fs, s->p.start + i) != !r)
			fail_msg("block %llu: allocator refs %u, tree refs %u, fspace free %d",
				 (unsigned long long)(s->p.start + i), r, tree[i],
				 fspace_is_free(fs, s->p.start + i));
	}
	/* Held blocks are free to alloc_free_blocks, used on disk. */
	assert_int_equal(fspace_free_blocks(fs), alloc_free_blocks(s->a) - alloc_held_blocks(s->a));
	/* The loader: counts >= 2 back into an empty allocator. */
	assert_int_equal(alloc_create(s->p.start, s->p.end, s->reserve, &b), 0);
	assert_int_equal(alloc_v2_create(b, fs, &refs, &v), 0);
	assert_int_equal(alloc_v2_load_refs(v), 0);
	for (uint64_t i = 0; i < total; i++)
		assert_int_equal(alloc_refs(b, s->p.start + i), tree[i] ? tree[i] : 0);
	alloc_v2_destroy(v);
	alloc_destroy(b);
	/* Mount from the trees: the same allocator, block by block (held and
	 * deferred blocks hold their references), nothing left to write. */
	assert_int_equal(alloc_create(s->p.start, s->p.end, s->reserve, &b), 0);
	assert_int_equal(alloc_v2_create(b, fs, &refs, &v), 0);
	assert_int_equal(alloc_v2_load(v), 0);
	for (uint64_t i = 0; i < total; i++)
		assert_int_equal(alloc_refs(b, s->p.start + i), alloc_refs(s->a, s->p.start + i));
	assert_int_equal(alloc_take_used_changes(b, &ch, &nch), 0);
	assert_int_equal(nch, 0);
	free(ch);
	check_ref_undo(s, b, v);
	alloc_v2_destroy(v);
	alloc_destroy(b);
	bt_close(&refs);
	fspace_close(fs);
	bcache_destroy(c);
	free(tree);
	return nitems;
}

/* ---- the model: runs referenced, deferred, held for a discard ---- */

#define M_MAX 2048

struct run {
	uint64_t blk, n;
};

struct model {
	struct st s;
	uint64_t rng, seq;
	struct run ref[M_MAX], held[M_MAX];
	size_t nref, nheld;
};

static uint64_t rnd(struct model *m)
{
	m->rng ^= m->rng << 13;
	m->rng ^= m->rng >> 7;
	m->rng ^= m->rng << 17;
	return m->rng;
}

/* The discard hook: hold half of the runs (the test unholds them later). */
static int hold(void *ctx, uint64_t blk, uint64_t n)
{
	struct model *m = ctx;

	if (m->nheld == M_MAX || rnd(m) % 2)
		return 1;
	m->held[m->nheld++] = (struct run){ blk, n };
	return 0;
}

static void m_get(struct model *m)
{
	uint64_t blk, got;
	int kind = rnd(m) % 10 ? ALLOC_DATA : ALLOC_META;

	if (m->nref == M_MAX)
		return;
	if (alloc_get(m->s.a, 1 + rnd(m) % 64, rnd(m), kind, &blk, &got) == 0)
		m->ref[m->nref++] = (struct run){ blk, got };
}

/* Take reference @i out of the list. */
static struct run m_take(struct model *m, size_t i)
{
	struct run r = m->ref[i];

	m->ref[i] = m->ref[--m->nref];
	return r;
}

static void m_step(struct model *m)
{
	unsigned op = (unsigned)(rnd(m) % 100);
	size_t i = m->nref ? (size_t)(rnd(m) % m->nref) : 0;
	struct run r;

	if (op < 35 || !m->nref) {
		m_get(m);
	} else if (op < 55) {
		r = m_take(m, i);
		alloc_put(m->s.a, r.blk, r.n);
	} else if (op < 75 && m->nref < M_MAX) {
		/* A reflink of part of a run. */
		uint64_t o = rnd(m) % m->ref[i].n, k = 1 + rnd(m) % (m->ref[i].n - o);

		r = (struct run){ m->ref[i].blk + o, k };
		assert_int_equal(alloc_use(m->s.a, r.blk, r.n), 0);
		m->ref[m->nref++] = r;
	} else if (op < 87) {
		r = m_take(m, i);
		assert_int_equal(alloc_defer(m->s.a, r.blk, r.n, ++m->seq), 0);
	} else if (op < 94) {
		alloc_release_durable(m->s.a, m->seq - rnd(m) % 4);
	} else if (m->nheld) {
		i = (size_t)(rnd(m) % m->nheld);
		alloc_unhold(m->s.a, m->held[i].blk, m->held[i].n);
		m->held[i] = m->held[--m->nheld];
	}
}

/* Returns the REFCOUNT items of the last checks, summed. */
static uint64_t run_model(uint64_t seed, unsigned rounds)
{
	uint64_t items = 0;
	struct model *m = calloc(1, sizeof(*m));
	struct st *s = &m->s;

	assert_non_null(m);
	m->rng = seed;
	/* Three alloc.c groups and a reserve whose start is not word-aligned;
	 * 25 fspace groups, the last one short. */
	s->p = (struct fspace_params){ .start = 2000, .end = 2000 + 100000, .gblocks = 4096,
		.node_start = 16, .nslots = 400, .node_reserve = 8, .budget = 64u << 10 };
	s->reserve = 301;
	slot_init(&s->ms, s->p.node_start, s->p.nslots);
	st_open(s);
	alloc_set_discard(s->a, hold, m);
	for (unsigned round = 0; round < rounds; round++) {
		unsigned steps = (unsigned)(rnd(m) % 200);
		bool publish = rnd(m) % 6 != 0;

		for (unsigned i = 0; i < steps; i++)
			m_step(m);
		st_commit(s, publish);
		if (publish && round % 4 == 0)
			items += st_check(s);
	}
	st_commit(s, true);
	items += st_check(s);
	assert_int_equal(alloc_errors(s->a), 0);
	alloc_release_all(s->a);
	while (m->nheld) {
		m->nheld--;
		alloc_unhold(s->a, m->held[m->nheld].blk, m->held[m->nheld].n);
	}
	st_commit(s, true);
	st_check(s);
	alloc_set_discard(s->a, NULL, NULL);
	st_close(s);
	slot_destroy(&s->ms);
	free(m);
	return items;
}

static void test_model(void **state)
{
	uint64_t items = 0;

	(void)state;
	for (uint64_t seed = 1; seed <= 6; seed++)
		items += run_model(0x9e3779b97f4a7c15ull * seed, 60);
	printf("REFCOUNT items compared: %llu\n", (unsigned long long)items);
	assert_true(ref_undo_runs > 0);	/* the reference changes were checked */
	assert_true(items > 100);	/* the model shares blocks */
}

/* ---- cost: one changed block, a handful of items ---- */

static void test_cost(void **state)
{
	struct st s = { .p = { .start = 2000, .end = 2000 + (1u << 20), .gblocks = 65536,
		.node_start = 16, .nslots = 400, .node_reserve = 8, .budget = 1u << 20 } };
	struct alloc_v2_stats a, b;
	struct fspace_stats fa, fb;
	uint64_t big, got, blk;

	(void)state;
	slot_init(&s.ms, s.p.node_start, s.p.nslots);
	st_open(&s);
	/* A shared run of 100000 blocks, and 2000 small shared runs. */
	assert_int_equal(alloc_get(s.a, 100000, 0, ALLOC_DATA, &big, &got), 0);
	assert_int_equal(got, 100000);
	assert_int_equal(alloc_use(s.a, big, got), 0);
	for (unsigned i = 0; i < 2000; i++) {
		assert_int_equal(alloc_get(s.a, 8, i, ALLOC_DATA, &blk, &got), 0);
		assert_int_equal(alloc_use(s.a, blk + 2, 3), 0);
	}
	st_commit(&s, true);
	alloc_v2_stats(s.v, &a);
	fspace_stats(s.fs, &fa);
	/* One more reference in the middle of the big run: it splits in 3. */
	assert_int_equal(alloc_use(s.a, big + 5000, 1), 0);
	st_commit(&s, true);
	alloc_v2_stats(s.v, &b);
	fspace_stats(s.fs, &fb);
	printf("one shared block: %llu blocks looked at, %llu items read, %llu written; "
	       "%llu used words, %llu free-space items\n",
	       (unsigned long long)(b.ref_blocks - a.ref_blocks),
	       (unsigned long long)(b.ref_items_read - a.ref_items_read),
	       (unsigned long long)(b.ref_items_written - a.ref_items_written),
	       (unsigned long long)(b.used_words - a.used_words),
	       (unsigned long long)(fb.items_written - fa.items_written));
	assert_int_equal(b.ref_blocks - a.ref_blocks, 1);
	assert_true(b.ref_items_read - a.ref_items_read <= 2);
	assert_int_equal(b.ref_items_written - a.ref_items_written, 3);
	assert_int_equal(b.used_words - a.used_words, 0);
	/* One block allocated: one word of the used map, a few items. */
	a = b;
	fa = fb;
	assert_int_equal(alloc_get(s.a, 1, 7, ALLOC_DATA, &blk, &got), 0);
	st_commit(&s, true);
	alloc_v2_stats(s.v, &b);
	fspace_stats(s.fs, &fb);
	printf("one allocated block: %llu used words, %llu free-space items, %llu refcount items\n",
	       (unsigned long long)(b.used_words - a.used_words),
	       (unsigned long long)(fb.items_written - fa.items_written),
	       (unsigned long long)(b.ref_items_written - a.ref_items_written));
	assert_true(b.used_words - a.used_words <= 64);
	assert_true(fb.items_written - fa.items_written <= 4);
	assert_int_equal(b.ref_items_written, a.ref_items_written);
	st_check(&s);
	st_close(&s);
	slot_destroy(&s.ms);
}

/* Mount's load reads no group its summary shows wholly used or wholly
 * free: 10 full groups, one mixed, 5 empty load one bitmap, and give the
 * same allocator back block by block. */
static void test_load_cost(void **state)
{
	struct st s = { .p = { .start = 2000, .end = 2000 + 16 * 65536, .gblocks = 65536,
		.node_start = 16, .nslots = 400, .node_reserve = 8, .budget = 1u << 20 } };
	uint64_t mixed = s.p.start + 12 * 65536 + 100, blk = 0;
	struct fspace_stats fa, fb;
	uint32_t ca = 0, cb = 0;
	struct bcache *c;
	struct fspace *fs;
	struct btree refs;
	struct alloc_v2 *v;
	struct alloc *b;

	(void)state;
	slot_init(&s.ms, s.p.node_start, s.p.nslots);
	st_open(&s);
	assert_int_equal(alloc_use(s.a, s.p.start, 10 * 65536), 0);
	assert_int_equal(alloc_use(s.a, mixed, 50), 0);
	assert_int_equal(alloc_use(s.a, mixed + 10, 5), 0);	/* shared */
	st_commit(&s, true);

	assert_int_equal(bcache_create(4u << 20, &c), 0);
	assert_int_equal(fspace_open(&s.ms.store, c, uuid, &s.p, &s.froot, &fs), 0);
	assert_int_equal(bt_open(&refs, fspace_node_store(fs), c, V2_TREE_REFCOUNT, uuid,
				 &s.rroot), 0);
	assert_int_equal(alloc_create(s.p.start, s.p.end, s.reserve, &b), 0);
	assert_int_equal(alloc_v2_create(b, fs, &refs, &v), 0);
	fspace_stats(fs, &fa);
	assert_int_equal(alloc_v2_load(v), 0);
	fspace_stats(fs, &fb);
	printf("load: %llu of %llu groups loaded\n", (unsigned long long)(fb.loads - fa.loads),
	       (unsigned long long)fb.ngroups);
	assert_int_equal(fb.loads - fa.loads, 1);
	assert_int_equal(alloc_v2_compare(s.a, b, s.p.start, s.p.end, &blk, &ca, &cb), 0);
	assert_int_equal(alloc_refs(b, mixed + 10), 2);
	alloc_v2_destroy(v);
	alloc_destroy(b);
	bt_close(&refs);
	fspace_close(fs);
	bcache_destroy(c);
	st_check(&s);
	st_close(&s);
	slot_destroy(&s.ms);
}

/* ---- threads: the allocator in use while checkpoints write it ---- */

#define T_WORKERS 3

static _Atomic bool t_stop;
static _Atomic uint64_t t_ops;

struct targ {
	struct alloc *a;
	uint64_t rng;
	struct run ref[256];
	size_t nref;
};

static void *t_worker(void *arg)
{
	struct targ *t = arg;

	/* Until told to stop, or a bounded number on a slow machine. */
	for (unsigned i = 0; i < 200000 && !atomic_load(&t_stop); i++) {
		unsigned op;
		size_t k;
		uint64_t blk, got;

		t->rng ^= t->rng << 13;
		t->rng ^= t->rng >> 7;
		t->rng ^= t->rng << 17;
		op = (unsigned)(t->rng % 100);
		k = t->nref ? (size_t)((t->rng >> 20) % t->nref) : 0;
		if ((op < 40 || !t->nref) && t->nref < 256) {
			if (alloc_get(t->a, 1 + t->rng % 16, t->rng >> 8, ALLOC_DATA, &blk, &got) == 0)
				t->ref[t->nref++] = (struct run){ blk, got };
		} else if (op < 70 && t->nref < 256) {
			uint64_t n = 1 + (t->rng >> 30) % t->ref[k].n;

			if (alloc_use(t->a, t->ref[k].blk, n) == 0)
				t->ref[t->nref++] = (struct run){ t->ref[k].blk, n };
		} else if (t->nref) {
			alloc_put(t->a, t->ref[k].blk, t->ref[k].n);
			t->ref[k] = t->ref[--t->nref];
		}
		atomic_fetch_add(&t_ops, 1);
	}
	return NULL;
}

static void test_threads(void **state)
{
	struct st s = { .p = { .start = 2000, .end = 2000 + 80000, .gblocks = 4096,
		.node_start = 16, .nslots = 400, .node_reserve = 8, .budget = 64u << 10 } };
	struct targ t[T_WORKERS];
	pthread_t th[T_WORKERS];
	unsigned commits = 0;
	uint64_t first = 0;

	(void)state;
	atomic_store(&t_stop, false);
	slot_init(&s.ms, s.p.node_start, s.p.nslots);
	st_open(&s);
	for (unsigned i = 0; i < T_WORKERS; i++) {
		t[i] = (struct targ){ .a = s.a, .rng = 0x2545f4914f6cdd1dull * (i + 1) };
		assert_int_equal(pthread_create(&th[i], NULL, t_worker, &t[i]), 0);
	}
	/* Checkpoints while they run; each publishes what it saw. */
	for (unsigned i = 0; i < 10; i++, commits++) {
		st_commit(&s, i % 5 != 4);
		if (!i)
			first = atomic_load(&t_ops);
	}
	atomic_store(&t_stop, true);
	for (unsigned i = 0; i < T_WORKERS; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	/* Quiet: the next checkpoint catches up with everything. */
	st_commit(&s, true);
	printf("%u checkpoints during %llu operations (%llu when the first ended); "
	       "%llu REFCOUNT items at the end\n", commits, (unsigned long long)atomic_load(&t_ops),
	       (unsigned long long)first, (unsigned long long)st_check(&s));
	assert_int_equal(alloc_errors(s.a), 0);
	st_close(&s);
	slot_destroy(&s.ms);
}

/* A small allocator of 100,000 blocks from b0 = 2000, opened. */
static void st_small(struct st *s)
{
	*s = (struct st){ .p = { .start = 2000, .end = 2000 + 100000, .gblocks = 4096,
		.node_start = 16, .nslots = 400, .node_reserve = 8, .budget = 64u << 10 } };
	slot_init(&s->ms, s->p.node_start, s->p.nslots);
	st_open(s);
}

/*
 * No memory for a chunk's words (alloc_fail_words): frees wait (pending,
 * still used), a checkpoint writes them used meanwhile, and free at the
 * first checkpoint that can clear them; the accounting copy's -1 then +1
 * of a waiting block (and their undo) count it once.
 */
static void test_nomem(void **state)
{
	struct st s;
	const uint64_t b0 = 2000;

	(void)state;
	st_small(&s);
	/* All used: whole chunks without words, no spares yet. */
	assert_int_equal(alloc_use(s.a, b0, 100000), 0);
	st_commit(&s, true);
	st_check(&s);
	alloc_fail_words(0, UINT64_MAX);
	alloc_put(s.a, b0 + 100, 50);
	alloc_put(s.a, b0 + 40000, 7);
	assert_int_equal(alloc_pending_blocks(s.a), 57);
	assert_int_equal(alloc_v2_ref(s.v, b0 + 50000, 10, -1), 0);
	assert_int_equal(alloc_v2_ref(s.v, b0 + 50002, 3, +1), 0);
	assert_int_equal(alloc_pending_blocks(s.a), 57 + 7);
	assert_int_equal(alloc_refs(s.a, b0 + 50003), 1);
	alloc_v2_refs_undo(s.v);
	assert_int_equal(alloc_pending_blocks(s.a), 57);
	for (uint64_t b = b0 + 50000; b < b0 + 50010; b++)
		assert_int_equal(alloc_refs(s.a, b), 1);
	/* A checkpoint still short of memory: written used, as they are
	 * (checked with memory back: the check loads other allocators). */
	st_commit(&s, true);
	alloc_fail_words(0, 0);
	st_check(&s);
	assert_int_equal(alloc_pending_blocks(s.a), 57);
	/* Memory again: the next checkpoint frees them on disk too. */
	st_commit(&s, true);
	assert_int_equal(alloc_pending_blocks(s.a), 0);
	st_check(&s);
	assert_int_equal(alloc_free_blocks(s.a), 57);
	assert_int_equal(alloc_refs(s.a, b0 + 120), 0);
	assert_int_equal(alloc_errors(s.a), 0);
	st_close(&s);
	slot_destroy(&s.ms);
}

/* The journal of reference changes goes with the transaction that grew
 * it: a checkpoint part changing a million references left 25 MiB in the
 * daemon for good. */
static void test_journal_freed(void **state)
{
	struct st s;
	const uint64_t b0 = 2000;

	(void)state;
	st_small(&s);
	assert_int_equal(alloc_v2_mem_bytes(s.v), 0);
	for (uint64_t b = b0; b < b0 + 20000; b++)
		assert_int_equal(alloc_v2_ref(s.v, b, 1, +1), 0);
	assert_true(alloc_v2_mem_bytes(s.v) >= 20000 * 3 * sizeof(uint64_t));
	alloc_v2_refs_kept(s.v);
	assert_int_equal(alloc_v2_mem_bytes(s.v), 0);
	/* and a journal grown again still undoes */
	assert_int_equal(alloc_v2_ref(s.v, b0 + 30000, 5, +1), 0);
	assert_int_equal(alloc_refs(s.a, b0 + 30002), 1);
	alloc_v2_refs_undo(s.v);
	assert_int_equal(alloc_refs(s.a, b0 + 30002), 0);
	assert_int_equal(alloc_refs(s.a, b0 + 19999), 1);
	st_close(&s);
	slot_destroy(&s.ms);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_model),
		cmocka_unit_test(test_cost),
		cmocka_unit_test(test_load_cost),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_nomem),
		cmocka_unit_test(test_journal_freed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
