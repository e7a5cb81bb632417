// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: the log replay's read-ahead in the INODES tree (v2replaypf) on the in-memory node store, cold cache: after v2pf_begin (and v2pf_note as each record is applied), looking up the EXTENT key of every extent record of a chunk reads no node, over more than one window; a chunk with too few extent records is left alone. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bt_memstore.h"
#include "log.h"
#include "v2item.h"
#include "v2replaypf.h"

#define NKEYS 6000u
#define NRECS 3000u		/* more than one window */

struct apply {
	struct env *e;
	struct v2pf *pf;
	unsigned n;
};

/* What the replay does with a record: the read-ahead told first, then the
 * lookup of its key, which must find every node in the cache. */
static int apply(void *ctx, const struct log_rec *r)
{
	struct apply *a = ctx;
	uint64_t reads;
	uint8_t v[64];
	unsigned len;

	v2pf_note(a->pf, r);
	reads = a->e->ms.reads;
	assert_int_equal(bt_lookup(&a->e->t, &(struct bkey){ r->ext.ino, V2_EXTENT, r->ext.fblk },
				   v, sizeof(v), &len), 0);
	if (a->e->ms.reads != reads)
		fail_msg("record %u (block %llu) read a node", a->n,
			 (unsigned long long)r->ext.fblk);
	a->n++;
	return 0;
}

static void test_prefetch(void **state)
{
	uint64_t csum = 0x1234, reads;
	struct broot root;
	struct log_buf b;
	struct apply a;
	struct env e;

	(void)state;
	env_open(&e, 64u << 20);
	assert_int_equal(bt_begin(&e.t, 1), 0);
	for (unsigned i = 0; i < NKEYS; i++) {
		uint8_t v[40] = { (uint8_t)i };

		assert_int_equal(bt_insert(&e.t, &(struct bkey){ 7, V2_EXTENT, i * 64ull }, v,
					   sizeof(v)), 0);
	}
	commit_release(&e.t, &root);
	bt_close(&e.t);
	bcache_destroy(e.cache);
	assert_int_equal(bcache_create(64u << 20, &e.cache), 0);
	assert_int_equal(bt_open(&e.t, &e.ms.store, e.cache, 5, bt_uuid, &root), 0);

	log_buf_init(&b);
	for (unsigned i = 0; i < NRECS; i++) {
		struct log_rec r = { .type = LR_EXT_SET };

		r.ext.ino = 7;
		r.ext.fblk = (i * 7919ull % NKEYS) * 64;
		r.ext.phys = 100000 + i;
		r.ext.n = 1;
		r.ext.csums = &csum;
		assert_int_equal(log_buf_add(&b, &r), 0);
	}
	reads = e.ms.reads;
	a = (struct apply){ &e, v2pf_begin(&e.t, b.p, b.len), 0 };
	assert_non_null(a.pf);
	assert_true(e.ms.reads > reads);
	assert_int_equal(v2pf_done(a.pf), V2PF_WINDOW);
	assert_int_equal(log_decode(b.p, b.len, apply, &a), 0);
	assert_int_equal(a.n, NRECS);
	assert_int_equal(v2pf_done(a.pf), NRECS);
	printf("%u records: every lookup found its nodes read ahead (%llu node reads)\n", NRECS,
	       (unsigned long long)(e.ms.reads - reads));
	v2pf_end(a.pf);

	/* Too few to bother. */
	log_buf_reset(&b);
	for (unsigned i = 0; i < 3; i++) {
		struct log_rec r = { .type = LR_EXT_CLEAR };

		r.clr.ino = 7;
		r.clr.fblk = i;
		r.clr.n = 1;
		assert_int_equal(log_buf_add(&b, &r), 0);
	}
	assert_null(v2pf_begin(&e.t, b.p, b.len));
	log_buf_free(&b);
	env_close(&e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_prefetch),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
