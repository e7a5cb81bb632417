// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: allocator's chunked block map: random get/put/use/claim/defer/hold/discard sequences against a flat model (map, free count, references, map memory after every step); a 4 TiB area fully used then freed range by range holds a few chunks of words; with chunk-word allocations failing (alloc_fail_words) frees wait and lose no block. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "alloc.h"

#define CHUNK 32768ull		/* alloc_i.h CH_BLOCKS */
#define CHUNK_BYTES 4096ull

/*
 * Data area: 4 groups (the last longer) and a partial last chunk; the
 * metadata reserve: one whole chunk and a partial one.
 */
#define START 1000ull
#define TOTAL (6 * CHUNK + 1234)
#define RESERVE (CHUNK + 7058)		/* the data area ends on a word */
#define TS (START + TOTAL - RESERVE)	/* the reserve's first block */
#define NWORDS ((TOTAL + 63) / 64)
#define MAXRUNS 4096

struct run {
	uint64_t blk, n, seq;
};

struct model {
	struct alloc *a;
	unsigned seed;
	uint32_t refs[TOTAL];
	uint8_t held[TOTAL];
	uint64_t words[NWORDS];	/* block START + i: bit i */
	uint64_t nfree;		/* refs 0, held included (alloc_free_blocks) */
	struct run own[MAXRUNS];	/* references we hold */
	size_t nown;
	struct run def[MAXRUNS];	/* deferred puts */
	size_t ndef;
	struct run hold[MAXRUNS];	/* held for a discard: unhold them */
	size_t nhold;
	uint64_t seq;
	bool refuse;		/* the hook refuses runs too */
	uint64_t waited;	/* most blocks seen pending at once */
};

static void sync_bit(struct model *m, uint64_t i)
{
	if (m->refs[i] || m->held[i])
		m->words[i / 64] |= 1ull << (i % 64);
	else
		m->words[i / 64] &= ~(1ull << (i % 64));
}

static uint64_t rnd(struct model *m, uint64_t n)
{
	return n ? ((uint64_t)rand_r(&m->seed) << 31 ^ (uint64_t)rand_r(&m->seed)) % n : 0;
}

static void own_add(struct model *m, uint64_t blk, uint64_t n)
{
	assert_true(m->nown < MAXRUNS);
	m->own[m->nown++] = (struct run){ blk, n, 0 };
}

/* A reference to each block of [blk, blk + n) taken. */
static void model_ref(struct model *m, uint64_t blk, uint64_t n, bool must_be_free)
{
	for (uint64_t b = blk; b < blk + n; b++) {
		uint64_t i = b - START;

		if (must_be_free) {
			assert_int_equal(m->refs[i], 0);
			assert_int_equal(m->held[i], 0);
		}
		if (!m->refs[i] && !m->held[i])
			m->nfree--;
		m->refs[i]++;
		sync_bit(m, i);
	}
}

static void model_unref(struct model *m, uint64_t blk, uint64_t n)
{
	for (uint64_t b = blk; b < blk + n; b++) {
		uint64_t i = b - START;

		assert_true(m->refs[i] > 0);
		if (!--m->refs[i] && !m->held[i])
			m->nfree++;
		sync_bit(m, i);
	}
}

/* The discard hook: blocks that lost their last reference. */
static int hook(void *ctx, uint64_t blk, uint64_t n)
{
	struct model *m = ctx;

	assert_true(blk >= START && blk + n <= START + TOTAL);
	for (uint64_t b = blk; b < blk + n; b++) {
		assert_int_equal(m->refs[b - START], 0);
		assert_int_equal(m->held[b - START], 0);
	}
	if ((m->refuse && rnd(m, 4) == 0) || m->nhold == MAXRUNS)
		return 1;
	for (uint64_t b = blk; b < blk + n; b++) {
		m->held[b - START] = 1;
		sync_bit(m, b - START);
	}
	m->hold[m->nhold++] = (struct run){ blk, n, 0 };
	return 0;
}

/* Chunks with words the model says the map needs: the mixed ones of each
 * area, chunks counted from the area's start. */
static uint64_t mixed_chunks(struct model *m)
{
	uint64_t areas[2][2] = { { 0, TOTAL - RESERVE }, { TOTAL - RESERVE, TOTAL } }, mixed = 0;

	for (int k = 0; k < 2; k++) {
		for (uint64_t cs = areas[k][0]; cs < areas[k][1]; cs += CHUNK) {
			uint64_t ce = cs + CHUNK < areas[k][1] ? cs + CHUNK : areas[k][1], used = 0;

			for (uint64_t i = cs; i < ce; i += 64) {
				uint64_t w = m->words[i / 64];

				used += (uint64_t)__builtin_popcountll(ce - i < 64 ? w & ((1ull << (ce - i)) - 1) : w);
			}
			/* a partial last chunk's bits past the end are set */
			mixed += ce - cs < CHUNK ? used < ce - cs : used && used < CHUNK;
		}
	}
	return mixed;
}

static void check(struct model *m, const char *op, int step)
{
	static uint64_t got[NWORDS + 1];
	uint64_t bytes = alloc_bitmap_bytes(m->a), mixed;

	alloc_used_words(m->a, START, NWORDS, got);
	/* past the end: read as used */
	if (TOTAL % 64)
		assert_int_equal(got[NWORDS - 1] >> (TOTAL % 64), ~0ull >> (TOTAL % 64));
	if (TOTAL % 64)
		got[NWORDS - 1] &= (1ull << (TOTAL % 64)) - 1;
	if (memcmp(got, m->words, sizeof(m->words))) {
		for (uint64_t w = 0; w < NWORDS; w++)
			if (got[w] != m->words[w])
				fail_msg("step %d (%s, seed %u): word %lu: map %016lx, model %016lx", step,
					 op, m->seed, (unsigned long)w, (unsigned long)got[w],
					 (unsigned long)m->words[w]);
	}
	assert_int_equal(alloc_free_blocks(m->a), m->nfree);
	for (int k = 0; k < 8; k++) {
		uint64_t i = rnd(m, TOTAL);

		assert_int_equal(alloc_refs(m->a, START + i), m->refs[i] ? m->refs[i] : m->held[i]);
	}
	/* Words for every mixed chunk and for no other; in memory besides
	 * them only the spares (2 a group, 5 groups). */
	mixed = mixed_chunks(m);
	if (alloc_bitmap_chunks(m->a) != mixed)
		fail_msg("step %d (%s): %lu chunks with words, %lu mixed", step, op,
			 (unsigned long)alloc_bitmap_chunks(m->a), (unsigned long)mixed);
	if (bytes < mixed * CHUNK_BYTES || bytes > (mixed + 10) * CHUNK_BYTES)
		fail_msg("step %d (%s): %lu bytes of words for %lu mixed chunks", step, op,
			 (unsigned long)bytes, (unsigned long)mixed);
	assert_int_equal(alloc_errors(m->a), 0);
	assert_int_equal(alloc_pending_blocks(m->a), 0);
}

/* While word allocations fail: frees may wait (pending, their blocks
 * still used in the map) but none is lost; the map differs from the
 * model only in blocks the model has free. */
static void check_pending(struct model *m, int step)
{
	static uint64_t got[NWORDS + 1];
	uint64_t extra = 0;

	alloc_used_words(m->a, START, NWORDS, got);
	if (TOTAL % 64)
		got[NWORDS - 1] &= (1ull << (TOTAL % 64)) - 1;
	for (uint64_t w = 0; w < NWORDS; w++) {
		if (m->words[w] & ~got[w])
			fail_msg("step %d (seed %u): word %lu: map %016lx lacks model %016lx", step,
				 m->seed, (unsigned long)w, (unsigned long)got[w],
				 (unsigned long)m->words[w]);
		extra += (uint64_t)__builtin_popcountll(got[w] & ~m->words[w]);
	}
	if (alloc_errors(m->a))
		fail_msg("step %d (seed %u): %lu blocks lost", step, m->seed,
			 (unsigned long)alloc_errors(m->a));
	assert_int_equal(alloc_pending_blocks(m->a), extra);
	if (extra > m->waited)
		m->waited = extra;
	assert_int_equal(alloc_free_blocks(m->a) + extra, m->nfree);
}

static void take_run(struct run *v, size_t *n, size_t k, struct run *out)
{
	*out = v[k];
	v[k] = v[--*n];
}

/* A range biased to chunk edges and whole chunks. */
static void pick_range(struct model *m, uint64_t *blk, uint64_t *n)
{
	uint64_t b, len;

	switch (rnd(m, 4)) {
	case 0:		/* whole chunks of either area */
		b = rnd(m, 2) ? START + rnd(m, 6) * CHUNK : TS + (rnd(m, 2) ? CHUNK : 0);
		len = (rnd(m, 2) + 1) * CHUNK;
		break;
	case 1:		/* across a chunk edge */
		b = START + (rnd(m, 6) + 1) * CHUNK - rnd(m, 200);
		len = rnd(m, 400) + 1;
		break;
	default:
		b = START + rnd(m, TOTAL);
		len = rnd(m, 2) ? rnd(m, 64) + 1 : rnd(m, 3 * CHUNK) + 1;
	}
	if (b >= START + TOTAL)
		b = START + TOTAL - 1;
	if (len > START + TOTAL - b)
		len = START + TOTAL - b;
	*blk = b;
	*n = len;
}

static const char *step_get(struct model *m)
{
	uint64_t want = rnd(m, 3) ? rnd(m, 100) + 1 : rnd(m, 2 * CHUNK) + 1, blk, got;
	int kind = rnd(m, 5) ? ALLOC_DATA : ALLOC_META;
	uint64_t avail = 0;

	/* With nothing free it would wait for an unhold (alloc.h). */
	for (uint64_t b = START; b < (kind == ALLOC_DATA ? TS : START + TOTAL) && !avail; b++)
		avail += !m->refs[b - START] && !m->held[b - START];
	if (!avail)
		return "get (would wait)";
	if (alloc_get(m->a, want, rnd(m, 16), kind, &blk, &got) == 0) {
		assert_true(got >= 1 && got <= want);
		assert_true(kind == ALLOC_META || blk + got <= TS);
		model_ref(m, blk, got, true);
		own_add(m, blk, got);
	}
	return "get";
}

/* Drop a run we own, whole or a piece of it. */
static const char *step_put(struct model *m)
{
	struct run r;
	uint64_t off, len;

	if (!m->nown)
		return "put (none)";
	take_run(m->own, &m->nown, rnd(m, m->nown), &r);
	off = rnd(m, 2) ? 0 : rnd(m, r.n);
	len = rnd(m, 2) ? r.n - off : rnd(m, r.n - off) + 1;
	if (off)
		own_add(m, r.blk, off);
	if (off + len < r.n)
		own_add(m, r.blk + off + len, r.n - off - len);
	model_unref(m, r.blk + off, len);
	if (rnd(m, 2))
		alloc_put(m->a, r.blk + off, len);
	else
		alloc_put_discard(m->a, r.blk + off, len);
	return "put";
}

static const char *step_use(struct model *m)
{
	uint64_t blk, n;

	pick_range(m, &blk, &n);
	/* Held blocks are free space on their way back: nobody refers to them. */
	for (uint64_t b = blk; b < blk + n; b++)
		if (m->held[b - START])
			return "use (held)";
	assert_int_equal(alloc_use(m->a, blk, n), 0);
	model_ref(m, blk, n, false);
	own_add(m, blk, n);
	return "use";
}

static const char *step_claim(struct model *m)
{
	uint64_t blk, n;
	bool one_area, free_all = true;
	uint64_t afree = 0;
	int ret;

	pick_range(m, &blk, &n);
	one_area = blk + n <= TS || blk >= TS;
	for (uint64_t b = blk; b < blk + n && free_all; b++)
		free_all = !m->refs[b - START] && !m->held[b - START];
	/* the count goes first: the area's free blocks, held ones not */
	for (uint64_t b = blk < TS ? START : TS; b < (blk < TS ? TS : START + TOTAL); b++)
		afree += !m->refs[b - START] && !m->held[b - START];
	ret = alloc_claim(m->a, blk, n);
	if (!one_area) {
		assert_int_equal(ret, -EINVAL);
	} else if (afree < n) {
		assert_int_equal(ret, -ENOSPC);
	} else if (!free_all) {
		assert_int_equal(ret, -EBUSY);
	} else {
		assert_int_equal(ret, 0);
		model_ref(m, blk, n, true);
		own_add(m, blk, n);
	}
	return "claim";
}

static const char *step_defer(struct model *m)
{
	struct run r;

	if (!m->nown || m->ndef == MAXRUNS)
		return "defer (none)";
	take_run(m->own, &m->nown, rnd(m, m->nown), &r);
	r.seq = ++m->seq;
	assert_int_equal(alloc_defer(m->a, r.blk, r.n, r.seq), 0);
	m->def[m->ndef++] = r;
	return "defer";
}

static void release_upto(struct model *m, uint64_t upto)
{
	/* the references go before the hook sees their blocks */
	for (size_t i = 0; i < m->ndef;) {
		if (m->def[i].seq <= upto) {
			model_unref(m, m->def[i].blk, m->def[i].n);
			m->def[i] = m->def[--m->ndef];
		} else {
			i++;
		}
	}
	alloc_release_durable(m->a, upto);
}

static const char *step_release(struct model *m)
{
	release_upto(m, m->seq - rnd(m, 4));
	return "release";
}

static const char *step_unhold(struct model *m)
{
	struct run r;

	if (!m->nhold)
		return "unhold (none)";
	take_run(m->hold, &m->nhold, rnd(m, m->nhold), &r);
	for (uint64_t b = r.blk; b < r.blk + r.n; b++) {
		m->held[b - START] = 0;
		sync_bit(m, b - START);
	}
	alloc_unhold(m->a, r.blk, r.n);
	return "unhold";
}

/* Trim's hold of the first free run at or after a block. */
static const char *step_hold_free(struct model *m)
{
	uint64_t from = START + rnd(m, TOTAL), blk, n;
	int ret;

	if (m->nhold == MAXRUNS)
		return "hold_free (full)";
	ret = alloc_hold_free(m->a, from, rnd(m, 2 * CHUNK) + 1, &blk, &n);
	if (ret)
		return "hold_free (none)";
	for (uint64_t b = blk; b < blk + n; b++) {
		assert_int_equal(m->refs[b - START], 0);
		assert_int_equal(m->held[b - START], 0);
		m->held[b - START] = 1;
		sync_bit(m, b - START);
	}
	m->hold[m->nhold++] = (struct run){ blk, n, 0 };
	return "hold_free";
}

/*
 * @fail: in windows of steps the chunk-word allocations fail (only steps
 * that cannot fail for other reasons run then: puts, releases, unholds,
 * gets); after each the waiting frees are retried and the map must match
 * the model exactly again.  Returns the most blocks that waited at once.
 */
static uint64_t run_model(unsigned seed, bool discard, bool refuse, bool fail, int steps)
{
	static const char *(*const fail_ops[])(struct model *) = {
		step_put, step_put, step_put, step_get, step_defer, step_release, step_unhold,
	};
	static const char *(*const ops[])(struct model *) = {
		step_get, step_get, step_get, step_put, step_put, step_put, step_use,
		step_claim, step_defer, step_release, step_unhold, step_hold_free,
	};
	struct model *m = calloc(1, sizeof(*m));
	uint64_t waited;

	assert_non_null(m);
	m->seed = seed;
	m->refuse = refuse;
	m->nfree = TOTAL;
	assert_int_equal(alloc_create(START, START + TOTAL, RESERVE, &m->a), 0);
	if (discard)
		alloc_set_discard(m->a, hook, m);
	check(m, "create", 0);
	for (int s = 1; s <= steps; s++) {
		/* Phases: fill towards full, then empty towards free, so
		 * chunks turn uniform and mixed again. */
		bool filling = (s / 300) % 2 == 0, failing = fail && s % 150 >= 100;
		const char *op;

		if (failing) {
			if (s % 150 == 100) {
				/* whole chunks used, to be freed in part */
				for (int k = 0; k < 6; k++)
					step_use(m);
				alloc_fail_words(0, UINT64_MAX);
			}
			fail_ops[rnd(m, sizeof(fail_ops) / sizeof(fail_ops[0]))](m);
			check_pending(m, s);
			if (s % 150 == 149) {
				alloc_fail_words(0, 0);
				alloc_retry_frees(m->a);
				check(m, "retry", s);
			}
			continue;
		}
		if (filling && rnd(m, 3) == 0)
			op = step_use(m);
		else if (!filling && rnd(m, 3) == 0)
			op = step_put(m);
		else
			op = ops[rnd(m, sizeof(ops) / sizeof(ops[0]))](m);
		check(m, op, s);
	}
	/* Give everything back: the map is empty and has no words but the
	 * partial last chunks' and the spares. */
	while (m->nown)
		step_put(m);
	release_upto(m, UINT64_MAX);
	while (m->nhold)
		step_unhold(m);
	check(m, "drain", steps + 1);
	assert_int_equal(alloc_free_blocks(m->a), TOTAL);
	assert_int_equal(alloc_bitmap_chunks(m->a), 2);
	assert_true(alloc_bitmap_bytes(m->a) <= 12 * CHUNK_BYTES);
	alloc_set_discard(m->a, NULL, NULL);
	alloc_destroy(m->a);
	waited = m->waited;
	free(m);
	return waited;
}

static void test_model(void **state)
{
	(void)state;
	for (unsigned seed = 1; seed <= 4; seed++)
		run_model(seed, false, false, false, 1500);
}

static void test_model_discard(void **state)
{
	(void)state;
	for (unsigned seed = 11; seed <= 13; seed++)
		run_model(seed, true, seed & 1, false, 1500);
}

static void test_model_nomem(void **state)
{
	uint64_t waited = 0;

	(void)state;
	for (unsigned seed = 21; seed <= 24; seed++)
		waited += run_model(seed, seed & 1, seed & 2, true, 1500) > 0;
	assert_true(waited >= 2);	/* the windows did make frees wait */
}

/*
 * A free that leaves a used chunk mixed while no words can be had waits:
 * its blocks stay used and are not lost; ENOSPC is not final while some
 * wait (an alloc_get retries them), and a retry records the change for
 * format v2's next checkpoint.
 */
static void test_free_waits(void **state)
{
	const uint64_t n = 8 * CHUNK;
	struct alloc_run *r;
	uint64_t blk, got;
	size_t nr;
	struct alloc *a;

	(void)state;
	assert_int_equal(alloc_create(0, n, 0, &a), 0);
	assert_int_equal(alloc_track(a), 0);
	assert_int_equal(alloc_use(a, 0, n), 0);
	assert_int_equal(alloc_take_used_changes(a, &r, &nr), 0);
	free(r);
	alloc_fail_words(0, UINT64_MAX);
	/* Two runs in one chunk, one across a chunk edge, one in the last
	 * group; and a whole chunk, which needs no words. */
	alloc_put(a, 100, 50);
	alloc_put(a, 300, 1);
	alloc_put(a, 2 * CHUNK - 10, 20);
	alloc_put(a, 7 * CHUNK + 5, 64);
	alloc_put(a, 4 * CHUNK, CHUNK);
	assert_int_equal(alloc_errors(a), 0);
	assert_int_equal(alloc_pending_blocks(a), 50 + 1 + 20 + 64);
	assert_int_equal(alloc_free_blocks(a), CHUNK);
	assert_int_equal(alloc_refs(a, 120), 1);	/* still used: nobody gets it */
	/* A reference coming back (the accounting copy's +1 after a -1)
	 * takes blocks off the list, with a count of 1, not 2. */
	assert_int_equal(alloc_use(a, 110, 10), 0);
	assert_int_equal(alloc_pending_blocks(a), 40 + 1 + 20 + 64);
	assert_int_equal(alloc_refs(a, 110), 1);
	assert_int_equal(alloc_refs(a, 119), 1);
	assert_int_equal(alloc_use(a, 2 * CHUNK - 10, 20), 0);	/* a whole run */
	assert_int_equal(alloc_use(a, 7 * CHUNK + 5, 1), 0);	/* its head */
	assert_int_equal(alloc_pending_blocks(a), 40 + 1 + 63);
	alloc_put(a, 2 * CHUNK - 10, 20);
	alloc_put(a, 7 * CHUNK + 5, 1);
	assert_int_equal(alloc_pending_blocks(a), 40 + 1 + 20 + 64);
	/* (one block of a free chunk would need words: a whole one not) */
	assert_int_equal(alloc_get(a, 1, 0, ALLOC_DATA, &blk, &got), -ENOMEM);
	assert_int_equal(alloc_get(a, CHUNK, 0, ALLOC_DATA, &blk, &got), 0);
	assert_true(blk == 4 * CHUNK && got == CHUNK);
	alloc_put(a, blk, got);
	assert_int_equal(alloc_claim(a, 120, 1), -EBUSY);
	/* Take the whole free chunk back: what is left waits, so no space. */
	assert_int_equal(alloc_claim(a, 4 * CHUNK, CHUNK), 0);
	assert_int_equal(alloc_get(a, 1, 0, ALLOC_DATA, &blk, &got), -ENOSPC);
	assert_int_equal(alloc_take_used_changes(a, &r, &nr), 0);
	free(r);
	/* Memory again: the failing get retries them and finds one. */
	alloc_fail_words(0, 0);
	assert_int_equal(alloc_get(a, 1, 0, ALLOC_DATA, &blk, &got), 0);
	assert_int_equal(alloc_pending_blocks(a), 0);
	assert_int_equal(alloc_free_blocks(a), 40 + 1 + 20 + 64 - 1);
	assert_int_equal(alloc_refs(a, blk), 1);
	alloc_put(a, blk, got);
	for (uint64_t b = 100; b < 150; b++)
		assert_int_equal(alloc_refs(a, b), b >= 110 && b < 120);
	assert_int_equal(alloc_refs(a, 300), 0);
	assert_int_equal(alloc_refs(a, 2 * CHUNK - 11), 1);
	assert_int_equal(alloc_refs(a, 2 * CHUNK + 9), 0);
	assert_int_equal(alloc_refs(a, 2 * CHUNK + 10), 1);
	/* The retried frees are changes for the next checkpoint. */
	assert_int_equal(alloc_take_used_changes(a, &r, &nr), 0);
	assert_true(nr >= 3);
	assert_true(r[0].blk == 0 && r[nr - 1].blk + r[nr - 1].n > 7 * CHUNK + 5);
	free(r);
	assert_int_equal(alloc_errors(a), 0);
	/* A put retries its group's waiting frees too. */
	alloc_fail_words(0, UINT64_MAX);
	alloc_put(a, 5 * CHUNK + 1000, 3);
	assert_int_equal(alloc_pending_blocks(a), 3);
	alloc_fail_words(0, 0);
	alloc_put(a, 5 * CHUNK + 2000, 1);
	assert_int_equal(alloc_pending_blocks(a), 0);
	assert_int_equal(alloc_refs(a, 5 * CHUNK + 1001), 0);
	assert_int_equal(alloc_errors(a), 0);
	alloc_destroy(a);
}

/* 4 TiB of 4 KiB blocks fully used, then freed range by range: the map
 * holds words only for the chunks a range ends in (a flat map: 128 MiB). */
static void test_4tib(void **state)
{
	const uint64_t n = 1ull << 30, reserve = (1ull << 18) + 5;
	uint64_t step = 1000003, blk, got;
	struct alloc *a;

	(void)state;
	assert_int_equal(alloc_create(16, 16 + n, reserve, &a), 0);
	assert_true(alloc_bitmap_bytes(a) <= 2 * CHUNK_BYTES);
	assert_int_equal(alloc_use(a, 16, n), 0);
	assert_int_equal(alloc_free_blocks(a), 0);
	assert_true(alloc_bitmap_bytes(a) <= 2 * CHUNK_BYTES);
	for (uint64_t b = 16; b < 16 + n; b += step) {
		alloc_put(a, b, b + step <= 16 + n ? step : 16 + n - b);
		assert_true(alloc_bitmap_chunks(a) <= 4);
		assert_true(alloc_bitmap_bytes(a) <= 24 * CHUNK_BYTES);
	}
	assert_int_equal(alloc_free_blocks(a), n);
	assert_true(alloc_bitmap_bytes(a) <= 24 * CHUNK_BYTES);
	/* Allocating it all again: whole chunks, words only at the ends. */
	assert_int_equal(alloc_get(a, n / 2, 0, ALLOC_DATA, &blk, &got), 0);
	assert_int_equal(got, n / 2);
	assert_true(alloc_bitmap_bytes(a) <= 24 * CHUNK_BYTES);
	alloc_put(a, blk, got);
	assert_int_equal(alloc_errors(a), 0);
	alloc_destroy(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_4tib),
		cmocka_unit_test(test_model),
		cmocka_unit_test(test_model_discard),
		cmocka_unit_test(test_model_nomem),
		cmocka_unit_test(test_free_waits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
