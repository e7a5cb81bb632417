// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: format-v2 B+tree with parallel writers: a node read blocked in the store (cache miss) stalls no insert, lookup or iteration on another, cached leaf (the old tree-wide lock hangs here); and a model test where writer threads on disjoint key ranges insert, replace, delete and look up against their own models while readers look up and iterate (both directions) and a coordinator commits and aborts, on a cache far smaller than the tree, then bt_verify, the models, and the same after reopening the committed root on a cold cache.  Run under ThreadSanitizer by scripts/sanitizers.sh. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "bcache.h"
#include "bnode.h"
#include "bstore.h"
#include "bt_memstore.h"
#include "btree.h"

#define K(id, type, off) ((struct bkey){ (id), (uint8_t)(type), (off) })

/* A value: its 8-byte seed, then bytes derived from it, so any reader can
 * tell a whole value from a torn or misplaced one. */
static void make_val(uint8_t *v, unsigned len, uint64_t seed)
{
	for (unsigned i = 0; i < len; i++)
		v[i] = i < 8 ? (uint8_t)(seed >> (8 * i)) : (uint8_t)(seed * 131 + i * 7);
}

static uint64_t val_seed(const uint8_t *v, unsigned len)
{
	uint64_t seed = 0;

	for (unsigned i = 0; i < 8 && i < len; i++)
		seed |= (uint64_t)v[i] << (8 * i);
	return seed;
}

/* The value is whole and was written for key offset @off (seed's top). */
static void check_val(const uint8_t *v, unsigned len, uint64_t off)
{
	uint8_t want[BNODE_MAX_VAL];
	uint64_t seed;

	assert_true(len >= 8);
	seed = val_seed(v, len);
	assert_int_equal(seed >> 32, off);
	make_val(want, len, seed);
	assert_memory_equal(v, want, len);
}

/* Reopen the tree at @r on a new, cold cache of @budget bytes. */
static void env_reopen(struct env *e, const struct broot *r, uint64_t budget)
{
	bt_close(&e->t);
	bcache_destroy(e->cache);
	assert_int_equal(bcache_create(budget, &e->cache), 0);
	assert_int_equal(bt_open(&e->t, &e->ms.store, e->cache, 5, bt_uuid, r), 0);
}

static void put(struct btree *t, struct bkey k, unsigned len, uint64_t seed)
{
	uint8_t v[BNODE_MAX_VAL];

	make_val(v, len, seed);
	assert_int_equal(bt_insert(t, &k, v, len), 0);
}

/* ---- a blocked node read stalls nothing else ---- */

struct gate {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool armed, blocked, open;
};

static struct gate gate = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };

/* The store's read hook: once armed, the first read waits for the gate. */
static void gate_hook(struct memstore *s, const struct bptr *p)
{
	(void)s;
	(void)p;
	pthread_mutex_lock(&gate.mu);
	if (gate.armed) {
		gate.armed = false;
		gate.blocked = true;
		pthread_cond_broadcast(&gate.cv);
		while (!gate.open)
			pthread_cond_wait(&gate.cv, &gate.mu);
	}
	pthread_mutex_unlock(&gate.mu);
}

/* Wait until *flag (under gate.mu); false after 60 s: a hang, not slowness. */
static bool gate_wait(bool *flag)
{
	struct timespec ts;
	int ret = 0;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 60;
	pthread_mutex_lock(&gate.mu);
	while (!*flag && ret != ETIMEDOUT)
		ret = pthread_cond_timedwait(&gate.cv, &gate.mu, &ts);
	pthread_mutex_unlock(&gate.mu);
	return *flag;
}

struct blocked_op {
	struct btree *t;
	bool insert;
	int ret;
};

/* An operation on key (1, 0, 0): its leaf is not cached, so it reads. */
static void *blocked_main(void *arg)
{
	struct blocked_op *b = arg;
	uint8_t v[64];
	unsigned len;

	make_val(v, sizeof(v), 12345);	/* key offset 0 */
	if (b->insert)
		b->ret = bt_insert(b->t, &K(1, 0, 0), v, sizeof(v));
	else
		b->ret = bt_lookup(b->t, &K(1, 0, 500), v, sizeof(v), &len);
	return NULL;
}

struct other_op {
	struct btree *t;
	bool done;
};

/* Insert, look up and iterate in range 2, whose path is cached. */
static void *other_main(void *arg)
{
	struct other_op *o = arg;
	uint8_t v[64];
	unsigned len;
	struct bt_iter it;
	struct bkey k;
	const void *iv;

	make_val(v, sizeof(v), 7ull << 32);
	assert_int_equal(bt_insert(o->t, &K(2, 0, 7), v, sizeof(v)), 0);
	assert_int_equal(bt_lookup(o->t, &K(2, 0, 7), v, sizeof(v), &len), 0);
	check_val(v, len, 7);
	assert_int_equal(bt_iter_init(&it, o->t, &K(2, 0, 7)), 0);
	assert_int_equal(bt_iter_next(&it, &k, &iv, &len), 0);
	assert_int_equal(k.off, 7);
	bt_iter_free(&it);
	pthread_mutex_lock(&gate.mu);
	o->done = true;
	pthread_cond_broadcast(&gate.cv);
	pthread_mutex_unlock(&gate.mu);
	return NULL;
}

static void blocked_read_case(bool insert)
{
	struct env e;
	struct broot r;
	struct blocked_op b;
	struct other_op o;
	pthread_t tb, to;
	uint8_t v[64];
	unsigned len;

	env_open(&e, 64u << 20);
	assert_int_equal(bt_begin(&e.t, 1), 0);
	for (unsigned id = 1; id <= 2; id++)	/* a few hundred leaves each */
		for (unsigned i = 0; i < 20000; i++)
			put(&e.t, K(id, 0, i * 2), 64, (uint64_t)i * 2 << 32);
	commit_release(&e.t, &r);
	assert_true(r.level >= 1);
	env_reopen(&e, &r, 64u << 20);
	/* Cache the path to range 2 only; a new transaction copies it. */
	assert_int_equal(bt_lookup(&e.t, &K(2, 0, 6), v, sizeof(v), &len), 0);
	assert_int_equal(bt_begin(&e.t, 2), 0);

	pthread_mutex_lock(&gate.mu);
	gate.armed = true;
	gate.blocked = gate.open = false;
	pthread_mutex_unlock(&gate.mu);
	e.ms.read_hook = gate_hook;
	b = (struct blocked_op){ &e.t, insert, -1 };
	assert_int_equal(pthread_create(&tb, NULL, blocked_main, &b), 0);
	assert_true(gate_wait(&gate.blocked));
	o = (struct other_op){ &e.t, false };
	assert_int_equal(pthread_create(&to, NULL, other_main, &o), 0);
	/* With a lock held across the read, this waits for the gate forever. */
	if (!gate_wait(&o.done))
		fail_msg("a change to a cached leaf waited for another leaf's node read");
	pthread_mutex_lock(&gate.mu);
	gate.open = true;
	pthread_cond_broadcast(&gate.cv);
	pthread_mutex_unlock(&gate.mu);
	assert_int_equal(pthread_join(tb, NULL), 0);
	assert_int_equal(pthread_join(to, NULL), 0);
	assert_int_equal(b.ret, 0);
	e.ms.read_hook = NULL;
	commit_release(&e.t, &r);
	assert_int_equal(bt_verify(&e.t, NULL, NULL), 0);
	assert_int_equal(bt_lookup(&e.t, &K(2, 0, 7), v, sizeof(v), &len), 0);
	assert_int_equal(bt_lookup(&e.t, &K(1, 0, 0), v, sizeof(v), &len), 0);
	check_val(v, len, 0);
	env_close(&e);
}

static void test_blocked_lookup(void **state)
{
	(void)state;
	blocked_read_case(false);
}

static void test_blocked_insert(void **state)
{
	(void)state;
	blocked_read_case(true);
}

/* ---- the model test ---- */

#define NWRITERS 3
#define NREADERS 2
#define WKEYS 12000		/* key offsets per writer: a 3-level tree */
#define NSTATIC 1500		/* (100, 1, 2i): never changed */

/* A writer's keys (w + 1, 0, off): what the open transaction holds (cur)
 * and what the last commit did (done).  len 0: absent. */
struct wmodel {
	uint16_t len[WKEYS];
	uint64_t seed[WKEYS];
};

struct writer {
	struct btree *t;
	unsigned id;
	pthread_mutex_t mu;		/* held around each operation */
	struct wmodel cur, done;
	uint64_t rng, ops;		/* ops: every operation (under mu) */
	_Atomic bool *stop;
};

struct reader {
	struct btree *t;
	_Atomic bool *stop;
	uint64_t rng, checked;
};

static uint64_t rnd(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static unsigned rnd_len(uint64_t *x)
{
	unsigned r = rnd(x) % 100;

	if (r < 3)		/* big values: splits come soon */
		return BNODE_MAX_VAL - rnd(x) % 64;
	return 8 + rnd(x) % (r < 30 ? 600 : 120);
}

/* One random operation on the writer's own range, checked against cur. */
static void writer_op(struct writer *w)
{
	uint64_t off = rnd(&w->rng) % WKEYS, r = rnd(&w->rng) % 100;
	struct bkey k = K(w->id + 1, 0, off);
	uint8_t v[BNODE_MAX_VAL];
	unsigned len;

	if (r < 50) {
		len = rnd_len(&w->rng);
		w->cur.seed[off] = off << 32 | (w->ops & 0xffffffff);
		make_val(v, len, w->cur.seed[off]);
		assert_int_equal(bt_insert(w->t, &k, v, len), 0);
		w->cur.len[off] = (uint16_t)len;
	} else if (r < 90) {
		assert_int_equal(bt_delete(w->t, &k), w->cur.len[off] ? 0 : -ENOENT);
		w->cur.len[off] = 0;
	} else if (!w->cur.len[off]) {
		assert_int_equal(bt_lookup(w->t, &k, v, sizeof(v), &len), -ENOENT);
	} else {
		assert_int_equal(bt_lookup(w->t, &k, v, sizeof(v), &len), 0);
		assert_int_equal(len, w->cur.len[off]);
		assert_int_equal(val_seed(v, len), w->cur.seed[off]);
		check_val(v, len, off);
	}
}

static void *writer_main(void *arg)
{
	struct writer *w = arg;

	while (!atomic_load(w->stop)) {
		pthread_mutex_lock(&w->mu);
		writer_op(w);
		w->ops++;
		pthread_mutex_unlock(&w->mu);
	}
	return NULL;
}

/* Iterate the static keys up or down: exactly them, in order. */
static void reader_static_iter(struct reader *r, bool up)
{
	struct bt_iter it;
	struct bkey k;
	const void *v;
	unsigned len, n = 0;
	int ret;

	assert_int_equal(bt_iter_init(&it, r->t, up ? &K(100, 1, 0) : &K(100, 2, 0)), 0);
	while (!(ret = up ? bt_iter_next(&it, &k, &v, &len) : bt_iter_prev(&it, &k, &v, &len)) &&
	       k.id == 100 && k.type == 1) {
		assert_int_equal(k.off, up ? 2 * n : 2 * (NSTATIC - 1 - n));
		check_val(v, len, k.off);
		n++;
	}
	bt_iter_free(&it);
	assert_int_equal(n, NSTATIC);
}

/* Iterate a writer's range as it changes: ascending keys, whole values. */
static void reader_range_iter(struct reader *r, uint64_t id)
{
	struct bt_iter it;
	struct bkey k, last = K(id, 0, 0);
	const void *v;
	unsigned len, n = 0;

	assert_int_equal(bt_iter_init(&it, r->t, &K(id, 0, rnd(&r->rng) % WKEYS)), 0);
	while (n < 300 && !bt_iter_next(&it, &k, &v, &len) && k.id == id) {
		assert_true(!n || bkey_cmp(&last, &k) < 0);
		check_val(v, len, k.off);
		last = k;
		n++;
	}
	bt_iter_free(&it);
}

static void *reader_main(void *arg)
{
	struct reader *r = arg;

	while (!atomic_load(r->stop)) {
		uint64_t i = rnd(&r->rng) % NSTATIC, id = 1 + rnd(&r->rng) % NWRITERS;
		uint8_t v[BNODE_MAX_VAL];
		unsigned len;
		int ret;

		assert_int_equal(bt_lookup(r->t, &K(100, 1, 2 * i), v, sizeof(v), &len), 0);
		check_val(v, len, 2 * i);
		assert_int_equal(bt_lookup(r->t, &K(100, 1, 2 * i + 1), v, sizeof(v), &len), -ENOENT);
		ret = bt_lookup(r->t, &K(id, 0, i), v, sizeof(v), &len);
		assert_true(ret == 0 || ret == -ENOENT);
		if (!ret)
			check_val(v, len, i);
		switch (r->checked++ % 16) {
		case 0:
			reader_static_iter(r, true);
			break;
		case 8:
			reader_static_iter(r, false);
			break;
		case 4:
		case 12:
			reader_range_iter(r, id);
			break;
		}
	}
	return NULL;
}

/* The tree holds exactly what the models say (done: committed). */
static void check_models(struct btree *t, struct writer *w, bool committed)
{
	uint64_t items, want = NSTATIC;

	assert_int_equal(bt_verify(t, &items, NULL), 0);
	for (unsigned i = 0; i < NWRITERS; i++) {
		const struct wmodel *m = committed ? &w[i].done : &w[i].cur;
		struct bt_iter it;
		struct bkey k;
		const void *v;
		unsigned len, off = 0;

		assert_int_equal(bt_iter_init(&it, t, &K(i + 1, 0, 0)), 0);
		while (!bt_iter_next(&it, &k, &v, &len) && k.id == i + 1) {
			while (off < k.off)
				assert_int_equal(m->len[off++], 0);
			assert_int_equal(len, m->len[off]);
			assert_int_equal(val_seed(v, len), m->seed[off]);
			check_val(v, len, off);
			off++;
			want++;
		}
		bt_iter_free(&it);
		while (off < WKEYS)
			assert_int_equal(m->len[off++], 0);
	}
	assert_int_equal(items, want);
}

/* Every writer stopped between two operations: commit or abort, and open
 * the next transaction, while the readers go on. */
static void coordinate(struct btree *t, struct writer *w, struct broot *r, uint64_t *gen,
		       bool abort)
{
	for (unsigned i = 0; i < NWRITERS; i++)
		pthread_mutex_lock(&w[i].mu);
	if (abort)
		bt_abort(t);
	else
		commit_release(t, r);
	for (unsigned i = 0; i < NWRITERS; i++) {
		if (abort)
			w[i].cur = w[i].done;
		else
			w[i].done = w[i].cur;
	}
	assert_int_equal(bt_begin(t, (*gen)++), 0);
	for (unsigned i = 0; i < NWRITERS; i++)
		pthread_mutex_unlock(&w[i].mu);
}

/* One phase: writers, readers and @rounds commits or aborts. */
static void run_phase(struct env *e, struct writer *w, struct broot *r, uint64_t *gen,
		      unsigned rounds)
{
	pthread_t tw[NWRITERS], tr[NREADERS];
	struct reader rd[NREADERS];
	_Atomic bool stop = false;
	uint64_t base[NWRITERS];

	assert_int_equal(bt_begin(&e->t, (*gen)++), 0);
	for (unsigned i = 0; i < NWRITERS; i++) {
		w[i].t = &e->t;
		w[i].stop = &stop;
		base[i] = w[i].ops;
		assert_int_equal(pthread_create(&tw[i], NULL, writer_main, &w[i]), 0);
	}
	for (unsigned i = 0; i < NREADERS; i++) {
		rd[i] = (struct reader){ &e->t, &stop, 0x1234567ull * (i + 1), 0 };
		assert_int_equal(pthread_create(&tr[i], NULL, reader_main, &rd[i]), 0);
	}
	for (unsigned round = 0; round < rounds; round++) {
		/* Let every writer do some work before each commit. */
		for (unsigned i = 0; i < NWRITERS; i++) {
			uint64_t seen;

			do {
				struct timespec ts = { 0, 2000000 };

				nanosleep(&ts, NULL);
				pthread_mutex_lock(&w[i].mu);
				seen = w[i].ops;
				pthread_mutex_unlock(&w[i].mu);
			} while (seen < base[i] + (round + 1) * 200);
		}
		coordinate(&e->t, w, r, gen, round % 5 == 4);
	}
	atomic_store(&stop, true);
	for (unsigned i = 0; i < NWRITERS; i++)
		assert_int_equal(pthread_join(tw[i], NULL), 0);
	for (unsigned i = 0; i < NREADERS; i++) {
		assert_int_equal(pthread_join(tr[i], NULL), 0);
		assert_true(rd[i].checked > 0);
	}
	check_models(&e->t, w, false);
	commit_release(&e->t, r);
	for (unsigned i = 0; i < NWRITERS; i++)
		w[i].done = w[i].cur;
	check_models(&e->t, w, true);
}

static void test_mt_model(void **state)
{
	static struct writer w[NWRITERS];
	struct bcache_stats st;
	struct env e;
	struct broot r;
	uint64_t gen = 1;
	const char *env_rounds = getenv("BTREE_MT_ROUNDS");
	unsigned rounds = env_rounds ? (unsigned)atoi(env_rounds) : 20;
	uint64_t splits, merges;

	(void)state;
	/* 8 nodes: the tree is ~100 times that, so most descents miss. */
	env_open(&e, 8 * BNODE_SIZE);
	assert_int_equal(bt_begin(&e.t, gen++), 0);
	for (unsigned i = 0; i < NSTATIC; i++)
		put(&e.t, K(100, 1, 2 * i), 8 + i % 200, (uint64_t)(2 * i) << 32 | i);
	memset(w, 0, sizeof(w));
	for (unsigned i = 0; i < NWRITERS; i++) {
		w[i].id = i;
		w[i].rng = 0x9e3779b97f4a7c15ull * (i + 1);
		pthread_mutex_init(&w[i].mu, NULL);
		for (uint64_t off = 0; off < WKEYS; off++) {
			w[i].cur.len[off] = (uint16_t)rnd_len(&w[i].rng);
			w[i].cur.seed[off] = off << 32;
			put(&e.t, K(i + 1, 0, off), w[i].cur.len[off], off << 32);
		}
		w[i].done = w[i].cur;
	}
	commit_release(&e.t, &r);
	assert_true(r.level >= 2);
	run_phase(&e, w, &r, &gen, rounds);
	splits = e.t.splits;
	merges = e.t.merges;
	assert_true(splits > 0 && merges > 0);
	bcache_stats(e.cache, &st);
	assert_true(st.misses > 100 && st.evictions > 100);
	/* The committed root on a cold cache: same content, and a second
	 * phase on it. */
	env_reopen(&e, &r, 8 * BNODE_SIZE);
	check_models(&e.t, w, true);
	run_phase(&e, w, &r, &gen, rounds / 2);
	env_reopen(&e, &r, 4 * BNODE_SIZE);
	check_models(&e.t, w, true);
	printf("mt model: %llu writer ops, %llu misses, %llu evictions, root level %u, "
	       "%llu splits, %llu merges\n", (unsigned long long)(w[0].ops + w[1].ops + w[2].ops),
	       (unsigned long long)st.misses, (unsigned long long)st.evictions, r.level,
	       (unsigned long long)splits, (unsigned long long)merges);
	for (unsigned i = 0; i < NWRITERS; i++)
		pthread_mutex_destroy(&w[i].mu);
	env_close(&e);
}

/* An argument picks tests by name (cmocka pattern). */
int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_blocked_lookup),
		cmocka_unit_test(test_blocked_insert),
		cmocka_unit_test(test_mt_model),
	};

	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
