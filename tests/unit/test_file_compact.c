// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: format v2 with -o compact_dirty under threads (lib/extcache.c, lib/extcompact.c through lib/file.c): two writers, each writing random 4 KiB blocks of its own half of a 1 GiB fallocated file (512 map leaves), two readers checking every block they read holds its own number and a version the writers had reached between the read's start and end (never zeros once written, never an older version), with the map-leaf budget cut to 4 leaves, the writers going in bursts of 4 writes a leaf and a checkpoint every 30 ms so that changed leaves are made compact, expanded by the next user and dropped once clean all the time; then every block is checked, and again after a remount.  It does not reproduce the drop without the range lock fixed in a6a3892 (4 runs with that lock taken out passed): that needed a checkpoint clearing and walking a range, which these small writes do not make. */
#include <errno.h>
#include <fcntl.h>
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
#include <unistd.h>

#include <cmocka.h>

#include "extcache.h"
#include "file_env.h"

#define NBLK (1024u * MiB / BS)
#define RUN_NS (3ull * 1000000000ull)

struct stress {
	struct tfs_file *f;
	struct tfs *fs;
	_Atomic uint32_t ver[NBLK];	/* version each block's last acknowledged write put there */
	atomic_bool stop;
	atomic_uint bad, reads, writes, ckpts;
	char why[160];
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t rnd(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* Block @b at version @v: its number and version, then a filler of both. */
static void fill(uint8_t *p, uint32_t b, uint32_t v)
{
	uint32_t *w = (uint32_t *)p;

	for (unsigned i = 0; i < BS / 4; i += 2) {
		w[i] = b;
		w[i + 1] = v * 2654435761u + i;
	}
	w[1] = v;
}

/* 0 if @p is block @b at a version in [lo, hi]; version 0 is the
 * fallocated block, all zeros. */
static int check(const uint8_t *p, uint32_t b, uint32_t lo, uint32_t hi, char *why, size_t n)
{
	const uint32_t *w = (const uint32_t *)p;
	uint32_t v = w[1];
	uint8_t want[BS];

	if (lo == 0 && w[0] == 0 && v == 0) {
		memset(want, 0, BS);
		if (!memcmp(p, want, BS))
			return 0;
	}

	if (w[0] != b || v < lo || v > hi) {
		snprintf(why, n, "block %u read as block %u version %u, expected version %u..%u",
			 b, w[0], v, lo, hi);
		return -1;
	}
	fill(want, b, v);
	if (memcmp(p, want, BS)) {
		snprintf(why, n, "block %u version %u: torn content", b, v);
		return -1;
	}
	return 0;
}

static void note_bad(struct stress *s, const char *why)
{
	if (atomic_fetch_add(&s->bad, 1) == 0)
		snprintf(s->why, sizeof(s->why), "%s", why);
}

struct worker {
	struct stress *s;
	unsigned id;
};

static void *writer(void *arg)
{
	struct worker *w = arg;
	struct stress *s = w->s;
	uint64_t x = 0x9e3779b97f4a7c15ull * (w->id + 1);
	uint8_t buf[BS];

	uint32_t leaf = 0;

	for (unsigned n = 0; !atomic_load(&s->stop); n++) {
		uint32_t b, v;

		/* Bursts of 4 writes into one leaf (512 blocks) of its half:
		 * the leaves it left behind are changed and unused, what the
		 * trim makes compact. */
		if (n % 4 == 0)
			leaf = (uint32_t)(rnd(&x) % (NBLK / 2 / 512));
		b = w->id * (NBLK / 2) + leaf * 512 + (uint32_t)(rnd(&x) % 512);
		v = atomic_load(&s->ver[b]) + 1;

		fill(buf, b, v);
		if (tfs_pwrite(s->f, buf, BS, (off_t)b * BS, 0) != BS) {
			note_bad(s, "a write failed");
			break;
		}
		atomic_store(&s->ver[b], v);
		atomic_fetch_add(&s->writes, 1);
	}
	return NULL;
}

static void *reader(void *arg)
{
	struct worker *w = arg;
	struct stress *s = w->s;
	uint64_t x = 0x2545f4914f6cdd1dull * (w->id + 1);
	uint8_t buf[BS];
	char why[160];

	while (!atomic_load(&s->stop)) {
		uint32_t b = (uint32_t)(rnd(&x) % NBLK);
		uint32_t lo = atomic_load(&s->ver[b]), hi;

		if (tfs_pread(s->f, buf, BS, (off_t)b * BS) != BS) {
			note_bad(s, "a read failed");
			break;
		}
		/* A write in flight may be read before it is acknowledged. */
		hi = atomic_load(&s->ver[b]) + 1;
		if (check(buf, b, lo, hi, why, sizeof(why))) {
			note_bad(s, why);
			break;
		}
		atomic_fetch_add(&s->reads, 1);
	}
	return NULL;
}

static void *checkpointer(void *arg)
{
	struct stress *s = arg;

	while (!atomic_load(&s->stop)) {
		if (tfs_checkpoint(s->fs)) {
			note_bad(s, "a checkpoint failed");
			break;
		}
		atomic_fetch_add(&s->ckpts, 1);
		usleep(30000);
	}
	return NULL;
}

static void check_all(struct stress *s, struct tfs_file *f)
{
	uint8_t buf[BS];
	char why[160];

	for (uint32_t b = 0; b < NBLK; b++) {
		uint32_t v = atomic_load(&s->ver[b]);

		if (v == 0 && b % 61)
			continue;	/* the written ones, and a sample of the rest */
		assert_int_equal(tfs_pread(f, buf, BS, (off_t)b * BS), BS);
		if (check(buf, b, v, v, why, sizeof(why)))
			fail_msg("%s", why);
	}
}

static void test_compact_stress(void **state)
{
	struct stress *s = calloc(1, sizeof(*s));
	struct extcache_stats st;
	struct worker w[4];
	pthread_t th[5];
	struct env e;
	uint64_t t0;

	assert_non_null(s);
	env_init_fmt(&e, "file", 2048ull * MiB, true);
	e.compact_dirty = true;
	env_remount(&e);
	assert_non_null(e.fs->xc);
	s->f = mkfile(&e, "c");
	s->fs = e.fs;
	/* Fallocated: a leaf with a few written blocks in it is what a
	 * compact leaf says in a few runs (a fully written one, 512
	 * checksums, is not made compact). */
	assert_int_equal(tfs_fallocate(s->f, 0, 0, (off_t)NBLK * BS), 0);
	assert_int_equal(tfs_checkpoint(e.fs), 0);
	/* 4 leaves: far fewer than the 32 the file has, so changed leaves
	 * go compact and clean ones are dropped all the time. */
	extcache_set_budget(e.fs->xc, 4 * 8192);
	for (unsigned i = 0; i < 4; i++) {
		w[i] = (struct worker){ .s = s, .id = i % 2 };
		assert_int_equal(pthread_create(&th[i], NULL, i < 2 ? writer : reader, &w[i]), 0);
	}
	assert_int_equal(pthread_create(&th[4], NULL, checkpointer, s), 0);
	t0 = now_ns();
	/* 3 s, and on a slow build (ASan, a loaded machine) until the
	 * writers and readers did 1,000 each and the checkpointer 11, for at
	 * most a minute (an ASan build beside other work made 8 in its 3 s). */
	while (!atomic_load(&s->bad) && now_ns() - t0 < 20 * RUN_NS &&
	       (now_ns() - t0 < RUN_NS || atomic_load(&s->writes) < 1000 ||
		atomic_load(&s->reads) < 1000 || atomic_load(&s->ckpts) <= 10))
		usleep(10000);
	atomic_store(&s->stop, true);
	for (unsigned i = 0; i < 5; i++)
		pthread_join(th[i], NULL);
	extcache_stats(e.fs->xc, &st);
	printf("writes %u reads %u checkpoints %u; faults %llu evictions %llu scanned %llu "
	       "compactions %llu expansions %llu drops %llu budget %llu\n",
	       atomic_load(&s->writes), atomic_load(&s->reads), atomic_load(&s->ckpts),
	       (unsigned long long)st.faults, (unsigned long long)st.evictions,
	       (unsigned long long)st.scanned, (unsigned long long)st.compactions,
	       (unsigned long long)st.expansions, (unsigned long long)st.compact_drops,
	       (unsigned long long)st.budget);
	if (atomic_load(&s->bad))
		fail_msg("%s", s->why);
	/* The test must have exercised what it is about. */
	assert_true(atomic_load(&s->writes) > 1000 && atomic_load(&s->reads) > 1000);
	assert_true(atomic_load(&s->ckpts) > 10);
	assert_true(st.compactions > 0 && st.expansions > 0);
	check_all(s, s->f);
	tfs_release(s->f);
	env_remount(&e);
	s->f = reopen(&e, "c");
	check_all(s, s->f);
	tfs_release(s->f);
	env_fini(&e);
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_compact_stress, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
