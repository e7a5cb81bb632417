// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: the set of changes of a format-v2 checkpoint (v2dirty.c): extent ranges widened to 256-block chunks and merged (a truncate is one range), flags, names and removed cookies, take in inode order, give back merged; allocations failing (the hook): deaths kept aside, v2d_state's answers while lost, the rebuild into the taken set and what holds it back. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <unistd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "v2dirty.h"

static struct v2d_ino *find(struct v2d_ino **v, size_t n, uint64_t ino)
{
	for (size_t i = 0; i < n; i++)
		if (v[i]->ino == ino)
			return v[i];
	return NULL;
}

static void test_ranges(void **state)
{
	struct v2dirty d;
	struct v2d_set s;
	struct v2d_ino **v, *e;
	size_t n;

	(void)state;
	assert_int_equal(v2d_init(&d), 0);
	v2d_note_ext(&d, 7, 10, 1, 0, NULL);		/* [0, 256) */
	v2d_note_ext(&d, 7, 1000, 3, 0, NULL);		/* [768, 1024) */
	v2d_note_ext(&d, 7, 5000, 1, 0, NULL);		/* [4864, 5120) */
	v2d_note_ext(&d, 7, 300, 1, 0, NULL);		/* [256, 512): touches the first */
	v2d_note_ext(&d, 7, 255, 2, 100, NULL);		/* inside [0, 512) */
	v2d_note_ext(&d, 7, 3, 0, 0, NULL);		/* nothing */
	/* The node gate's counts: 4 chunks covered, the grows summed. */
	{
		uint64_t touch, grow;

		v2d_tree_need(&d, &touch, &grow);
		assert_int_equal(touch, 4 * V2D_TOUCH);
		assert_int_equal(grow, 100);
	}
	assert_int_equal(v2d_take(&d, &s, &v, &n), 0);
	assert_int_equal(n, 1);
	e = v[0];
	assert_int_equal(e->next, 3);
	assert_int_equal(e->ext[0].from, 0);
	assert_int_equal(e->ext[0].to, 512);
	assert_int_equal(e->ext[1].from, 768);
	assert_int_equal(e->ext[1].to, 1024);
	assert_int_equal(e->ext[2].from, 4864);
	assert_int_equal(e->ext[2].to, 5120);
	assert_int_equal(e->flags, 0);
	free(v);
	v2d_set_free(&s);
	assert_int_equal(v2d_count(&d), 0);

	/* A truncate: one range over everything after it, swallowing the
	 * ranges inside. */
	v2d_note_ext(&d, 7, 600, 1, 0, NULL);
	v2d_note_ext(&d, 7, 9000, 1, 0, NULL);
	v2d_note_ext(&d, 7, 100, 1ull << 51, 0, NULL);
	assert_int_equal(v2d_take(&d, &s, &v, &n), 0);
	assert_int_equal(v[0]->next, 1);
	assert_int_equal(v[0]->ext[0].from, 0);
	assert_int_equal(v[0]->ext[0].to, (100 + (1ull << 51) + 255) & ~255ull);
	free(v);
	v2d_set_free(&s);
	v2d_destroy(&d);
}

static void test_names_take_give_back(void **state)
{
	struct v2dirty d;
	struct v2d_set s;
	struct v2d_ino **v, *e;
	size_t n;

	(void)state;
	assert_int_equal(v2d_init(&d), 0);
	for (uint64_t ino = 5000; ino > 1; ino--)
		v2d_note_inode(&d, ino, V2D_INODE, NULL);
	v2d_note_inode(&d, 42, V2D_XATTR, NULL);
	v2d_note_inode(&d, 43, V2D_DEAD, NULL);
	v2d_note_name(&d, 1, "a", 1, 0, NULL);
	v2d_note_name(&d, 1, "a", 1, 0, NULL);	/* the same name again: kept once */
	v2d_note_name(&d, 1, "bb", 2, 17, NULL);
	assert_int_equal(v2d_count(&d), 5000);
	assert_int_equal(v2d_take(&d, &s, &v, &n), 0);
	assert_int_equal(n, 5000);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(v[i]->ino, i + 1);	/* ascending */
	assert_int_equal(find(v, n, 42)->flags, V2D_INODE | V2D_XATTR);
	assert_int_equal(find(v, n, 43)->flags, V2D_INODE | V2D_DEAD);
	e = find(v, n, 1);
	assert_int_equal(e->nnames, 2);
	assert_int_equal(e->ncookies, 1);
	assert_int_equal(e->cookies[0], 17);
	assert_memory_equal(e->names[1].name, "bb", 2);
	free(v);
	assert_int_equal(v2d_count(&d), 0);

	/* Meanwhile: more changes; the failed checkpoint gives its set back. */
	v2d_note_ext(&d, 1, 0, 1, 0, NULL);
	v2d_note_name(&d, 1, "c", 1, 0, NULL);
	v2d_give_back(&d, &s);
	assert_int_equal(v2d_count(&d), 5000);
	assert_int_equal(v2d_take(&d, &s, &v, &n), 0);
	e = find(v, n, 1);
	assert_int_equal(e->flags, 0);	/* names only */
	assert_int_equal(e->next, 1);
	assert_int_equal(e->nnames, 3);
	assert_int_equal(e->ncookies, 1);
	assert_false(d.lost);
	free(v);
	v2d_set_free(&s);
	v2d_destroy(&d);
}

/* What the inode cache asks (v2d_state): an inode noted, or in the set a
 * checkpoint is writing, is not in the trees yet; released, it is. */
static void test_state(void **state)
{
	struct v2dirty d;
	struct v2d_set set;
	struct v2d_ino **v;
	size_t n;

	(void)state;
	assert_int_equal(v2d_init(&d), 0);
	assert_int_equal(v2d_state(&d, 5), -1);
	v2d_note_inode(&d, 5, V2D_DEAD, NULL);
	v2d_note_ext(&d, 6, 0, 1, 0, NULL);
	assert_int_equal(v2d_state(&d, 5), V2D_DEAD);
	assert_int_equal(v2d_state(&d, 6), 0);
	assert_int_equal(v2d_take(&d, &set, &v, &n), 0);
	free(v);
	/* Taken, being written: still not in the trees. */
	assert_int_equal(v2d_state(&d, 5), V2D_DEAD);
	v2d_note_inode(&d, 7, V2D_INODE, NULL);
	v2d_give_back(&d, &set);	/* the checkpoint failed */
	assert_int_equal(v2d_state(&d, 5), V2D_DEAD);
	assert_int_equal(v2d_take(&d, &set, &v, &n), 0);
	free(v);
	assert_int_equal(n, 3);
	v2d_release(&d, &set);		/* written */
	assert_int_equal(v2d_state(&d, 5), -1);
	assert_int_equal(v2d_state(&d, 6), -1);
	assert_int_equal(v2d_state(&d, 7), -1);
	v2d_destroy(&d);
}

/* The dirty budget reads v2d_bytes: it follows the set, counts the set a
 * checkpoint is writing until its release, and a give-back keeps it. */
static void test_bytes(void **state)
{
	struct v2dirty d;
	struct v2d_set s;
	struct v2d_ino **v;
	size_t n;
	uint64_t b1, b2;

	(void)state;
	assert_int_equal(v2d_init(&d), 0);
	assert_int_equal(v2d_bytes(&d), 0);
	for (uint64_t i = 0; i < 1000; i++)
		v2d_note_inode(&d, 100 + i, V2D_INODE, NULL);
	b1 = v2d_bytes(&d);
	assert_true(b1 >= 1000 * sizeof(struct v2d_ino));
	v2d_note_name(&d, 2, "a-rather-long-name-of-a-file", 28, 7, NULL);
	v2d_note_ext(&d, 100, 0, 1 << 20, 0, NULL);
	b2 = v2d_bytes(&d);
	assert_true(b2 >= b1 + 28 + 8 + sizeof(struct v2d_range));
	assert_int_equal(v2d_take(&d, &s, &v, &n), 0);
	free(v);
	assert_int_equal(v2d_bytes(&d), b2);	/* the checkpoint holds it */
	v2d_note_inode(&d, 5000, V2D_INODE, NULL);
	assert_true(v2d_bytes(&d) > b2);
	v2d_give_back(&d, &s);
	assert_true(v2d_bytes(&d) >= b2);
	assert_int_equal(v2d_take(&d, &s, &v, &n), 0);
	free(v);
	v2d_release(&d, &s);
	assert_int_equal(v2d_bytes(&d), 0);
	v2d_destroy(&d);
}

/* Allocations fail (the hook): a death is kept aside, so v2d_state still
 * refuses it; every other inode counts as changed; past V2D_DEAD_SPARE
 * lost deaths the answer is V2D_UNSURE.  A rebuild into the taken set
 * clears it all; a give-back that cannot merge keeps its deaths aside. */
static void test_lost(void **state)
{
	struct v2dirty d;
	struct v2d_set s;
	struct v2d_ino **v;
	struct v2d_rebuild rb;
	size_t n;

	(void)state;
	assert_int_equal(v2d_init(&d), 0);
	assert_int_equal(v2d_note_inode(&d, 5, V2D_INODE, NULL), 0);
	assert_false(v2d_lost_take(&d));
	v2d_fail_allocs(0, 100000);
	assert_int_equal(v2d_note_inode(&d, 9, V2D_DEAD, NULL), -ENOMEM);
	/* The dirty gate asks for a checkpoint once per failure. */
	assert_true(v2d_lost_take(&d));
	assert_false(v2d_lost_take(&d));
	assert_int_equal(v2d_note_ext(&d, 11, 0, 1, 0, NULL), -ENOMEM);
	assert_true(v2d_lost_take(&d));
	assert_int_equal(v2d_note_inode(&d, 5, V2D_XATTR, NULL), 0);	/* no allocation */
	assert_true(d.lost);
	assert_int_equal(v2d_fails(&d), 2);
	assert_int_equal(v2d_state(&d, 9), V2D_DEAD);
	assert_int_equal(v2d_state(&d, 11), 0);		/* kept resident */
	assert_int_equal(v2d_state(&d, 5), V2D_INODE | V2D_XATTR);
	for (uint64_t i = 0; i < V2D_DEAD_SPARE; i++)
		v2d_note_inode(&d, 1000 + i, V2D_DEAD, NULL);
	assert_int_equal(v2d_state(&d, 9), V2D_DEAD);
	assert_int_equal(v2d_state(&d, 1000), V2D_DEAD);
	assert_int_equal(v2d_state(&d, 1000 + V2D_DEAD_SPARE - 1), V2D_UNSURE);
	assert_int_equal(v2d_state(&d, 12), V2D_UNSURE);
	assert_int_equal(v2d_state(&d, 5), V2D_INODE | V2D_XATTR | V2D_UNSURE);
	/* The checkpoint: its rebuild fails while memory does. */
	assert_int_equal(v2d_take(&d, &s, &v, &n), -ENOMEM);
	v2d_fail_allocs(0, 0);
	assert_int_equal(v2d_take(&d, &s, &v, &n), 0);
	free(v);
	assert_true(v2d_rebuild_begin(&d, &rb));
	{
		struct v2d_how h = { .into = &s };

		assert_true(v2d_lost_take(&d));	/* the deaths above */
		v2d_fail_allocs(0, 1);
		assert_int_equal(v2d_note_inode(&d, 9, V2D_DEAD, &h), -ENOMEM);
		assert_int_equal(v2d_fails(&d), 2 + V2D_DEAD_SPARE);	/* not a lost note */
		assert_false(v2d_lost_take(&d));	/* nor a new loss to ask for */
		v2d_rebuild_end(&d, &rb, false);
		assert_true(d.lost);
		assert_true(v2d_rebuild_begin(&d, &rb));
		assert_int_equal(v2d_note_inode(&d, 9, V2D_DEAD, &h), 0);
		assert_int_equal(v2d_note_ext(&d, 11, 0, 1, 0, &h), 0);
		for (uint64_t i = 0; i < V2D_DEAD_SPARE; i++)
			assert_int_equal(v2d_note_inode(&d, 1000 + i, V2D_DEAD, &h), 0);
		assert_int_equal(v2d_note_name(&d, 1, "x", 1, 0, &h), 0);
	}
	v2d_rebuild_end(&d, &rb, true);
	assert_false(d.lost);
	assert_int_equal(d.ndead, 0);
	assert_int_equal(v2d_state(&d, 12), -1);
	assert_int_equal(v2d_state(&d, 1000 + V2D_DEAD_SPARE - 1), V2D_DEAD);
	assert_int_equal(v2d_state(&d, 1), 0);		/* V2D_REINDEX is internal */
	assert_int_equal(v2d_list(&s, &v, &n), 0);
	assert_int_equal(n, 4 + V2D_DEAD_SPARE);
	assert_int_equal(v[0]->ino, 1);
	assert_int_equal(v[0]->flags, V2D_REINDEX);
	free(v);
	/* The checkpoint fails and its set cannot be merged back. */
	v2d_fail_allocs(0, 100000);
	v2d_give_back(&d, &s);
	v2d_fail_allocs(0, 0);
	assert_true(d.lost);
	n = (size_t)v2d_state(&d, 9);	/* 129 deaths, 128 kept aside */
	assert_true(n == V2D_DEAD || n == V2D_UNSURE);
	v2d_destroy(&d);
}

struct waiter {
	struct v2dirty *d;
	atomic_bool done;
};

static void *wait_rebuild(void *arg)
{
	struct waiter *w = arg;
	struct v2d_rebuild rb;

	assert_true(v2d_rebuild_begin(w->d, &rb));
	atomic_store(&w->done, true);
	return NULL;
}

/* A transaction whose note failed and whose record is not in the log yet
 * holds the rebuild back until it is (v2d_tx_logged). */
static void test_lost_tx(void **state)
{
	struct v2dirty d;
	struct waiter w = { .d = &d };
	bool txlost = false;
	struct v2d_how h = { .txlost = &txlost };
	pthread_t th;

	(void)state;
	assert_int_equal(v2d_init(&d), 0);
	v2d_fail_allocs(0, 2);
	assert_int_equal(v2d_note_inode(&d, 7, V2D_INODE, &h), -ENOMEM);
	assert_int_equal(v2d_note_ext(&d, 7, 0, 1, 0, &h), -ENOMEM);
	assert_true(txlost);
	assert_int_equal(d.lost_open, 1);	/* once per transaction */
	assert_int_equal(pthread_create(&th, NULL, wait_rebuild, &w), 0);
	usleep(100000);
	assert_false(atomic_load(&w.done));
	v2d_tx_logged(&d);
	pthread_join(th, NULL);
	assert_true(atomic_load(&w.done));
	v2d_destroy(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ranges),
		cmocka_unit_test(test_names_take_give_back),
		cmocka_unit_test(test_state),
		cmocka_unit_test(test_bytes),
		cmocka_unit_test(test_lost),
		cmocka_unit_test(test_lost_tx),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
