// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: a map leaf's compact form (lib/extcompact.c) expands back to the leaf byte for byte over a matrix of leaves (empty; all holes but one block; one fallocated run; fallocated with written blocks in it, csums and all; runs of written blocks; physical runs cut by the unwritten flag or by a gap; blocks at the leaf's edges; random mixes), and is refused where it cannot say the leaf (a hole with a checksum) or would not be smaller (512 scattered written blocks). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "extcompact.h"

#define N 512u
#define MAX 2048u

static uint64_t rs = 0x6a09e667f3bcc909ull;

static uint64_t rnd(void)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return rs;
}

/* Round trip of @e: the expanded entries equal @e exactly; the compact
 * form's bytes returned (0: refused). */
static uint64_t round_trip(const struct extent_ent *e)
{
	struct extent_ent out[N];
	struct ext_compact *c = ext_compact_make(e, N, MAX);
	uint64_t bytes;

	if (!c)
		return 0;
	memset(out, 0xa5, sizeof(out));		/* every entry must be written */
	ext_compact_expand(c, out, N);
	assert_memory_equal(out, e, sizeof(out));
	bytes = c->bytes;
	assert_true(bytes <= MAX);
	free(c);
	return bytes;
}

/* Fallocated: one unwritten run over the whole leaf at @phys. */
static void falloc(struct extent_ent *e, uint64_t phys)
{
	for (unsigned i = 0; i < N; i++) {
		e[i].phys = (phys + i) | EXTENT_UNWRITTEN;
		e[i].csum = 0;
	}
}

static void test_shapes(void **state)
{
	struct extent_ent e[N];

	(void)state;
	memset(e, 0, sizeof(e));
	assert_true(round_trip(e) > 0);				/* all holes */
	e[0].phys = 99;
	e[0].csum = 5;
	assert_true(round_trip(e) > 0);				/* one block at the start */
	memset(e, 0, sizeof(e));
	e[N - 1].phys = 1ull << 40;
	e[N - 1].csum = UINT64_MAX;
	assert_true(round_trip(e) > 0);				/* one at the end */
	falloc(e, 1000);
	assert_true(round_trip(e) <= 128);			/* one run, no csums */
	e[17].phys = 5;
	e[17].csum = 0xdeadbeef;				/* one random overwrite */
	assert_true(round_trip(e) <= 160);
	e[18].phys = 6;
	e[18].csum = 0;						/* written, csum 0 */
	e[400].phys = 7 | EXTENT_UNWRITTEN;			/* unwritten elsewhere */
	assert_true(round_trip(e) > 0);
	/* the flag cuts a run of following physical blocks */
	for (unsigned i = 0; i < N; i++) {
		e[i].phys = (2000 + i) | (i % 2 ? EXTENT_UNWRITTEN : 0);
		e[i].csum = i % 2 ? 0 : i + 1;
	}
	assert_int_equal(round_trip(e), 0);			/* 512 runs: not smaller */
	/* written runs with their csums, gaps between them */
	memset(e, 0, sizeof(e));
	for (unsigned i = 0; i < N; i++) {
		if (i % 64 < 48) {
			e[i].phys = 10000 + i;
			e[i].csum = rnd();
		}
	}
	assert_int_equal(round_trip(e), 0);			/* 384 csums: too big */
	memset(e, 0, sizeof(e));
	for (unsigned i = 100; i < 140; i++) {
		e[i].phys = 10000 + i;
		e[i].csum = rnd();
	}
	e[140].phys = 10000 + 141;				/* a gap in phys */
	e[141].phys = 10000 + 142;
	assert_true(round_trip(e) > 0);
}

static void test_refused(void **state)
{
	struct extent_ent e[N];

	(void)state;
	memset(e, 0, sizeof(e));
	e[3].csum = 1;		/* a hole with a checksum: not said, so not made */
	assert_null(ext_compact_make(e, N, MAX));
	falloc(e, 50);
	assert_null(ext_compact_make(e, N, 16));	/* over @max */
}

/* Random leaves: fallocated or not, overwritten in random places with
 * short written runs (csums random, sometimes 0), cleared in places. */
static void test_random(void **state)
{
	struct extent_ent e[N];
	unsigned made = 0, refused = 0;

	(void)state;
	for (unsigned t = 0; t < 20000; t++) {
		if (rnd() % 2)
			falloc(e, rnd() % (1ull << 40));
		else
			memset(e, 0, sizeof(e));
		unsigned writes = (unsigned)(rnd() % (rnd() % 4 ? 8 : 200));

		for (unsigned w = 0; w < writes; w++) {
			unsigned at = (unsigned)(rnd() % N), n = 1 + (unsigned)(rnd() % 6);
			uint64_t phys = 1 + rnd() % (1ull << 45);
			int kind = (int)(rnd() % 8);

			for (unsigned i = at; i < at + n && i < N; i++) {
				if (kind == 0) {		/* punched */
					e[i].phys = 0;
					e[i].csum = 0;
				} else if (kind == 1) {		/* unwritten */
					e[i].phys = (phys + i) | EXTENT_UNWRITTEN;
					e[i].csum = 0;
				} else {
					e[i].phys = phys + i;
					e[i].csum = kind == 2 ? 0 : rnd();
				}
			}
		}
		if (round_trip(e))
			made++;
		else
			refused++;
	}
	printf("extcompact: %u random leaves made compact, %u refused (too big)\n", made,
	       refused);
	assert_true(made > 15000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shapes),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_random),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
