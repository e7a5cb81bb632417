// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * btree_iter: iteration and verification of the format-v2 B+tree
 * (btree.h).  An iterator step locks one leaf shared, through btree.c's
 * descent, and copies it; bt_verify walks the whole tree with the barrier
 * exclusive; bt_stats_add reads its counters.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "btree.h"
#include "btree_i.h"

/* ---- iteration ---- */

/*
 * One spare leaf buffer per thread: an iterator is opened for every inode
 * read in (a log replay faults one per record), and a fresh 16 KiB malloc,
 * its page faults and the free that hands it back to the system were 40%
 * of a mount's replay after kill -9 with a million files.  Nested
 * iterators on one thread take the spare, then malloc.  The buffer of a
 * thread that exits is freed by the key's destructor.
 */
static pthread_key_t spare_key;
static pthread_once_t spare_once = PTHREAD_ONCE_INIT;
static bool spare_ok;

static void spare_init(void)
{
	spare_ok = pthread_key_create(&spare_key, free) == 0;
}

int bt_iter_init(struct bt_iter *it, struct btree *t, const struct bkey *start)
{
	memset(it, 0, sizeof(*it));
	it->t = t;
	it->pos = *start;
	pthread_once(&spare_once, spare_init);
	if (spare_ok) {
		it->leaf = pthread_getspecific(spare_key);
		if (it->leaf)
			pthread_setspecific(spare_key, NULL);
	}
	if (!it->leaf)
		it->leaf = malloc(BNODE_SIZE);
	return it->leaf ? 0 : -ENOMEM;
}

void bt_iter_free(struct bt_iter *it)
{
	if (it->leaf && spare_ok && !pthread_getspecific(spare_key) &&
	    pthread_setspecific(spare_key, it->leaf) == 0)
		it->leaf = NULL;
	free(it->leaf);
	it->leaf = NULL;
}

/* Copy the leaf holding the first item >= pos (dir > 0) or the last item
 * < pos (dir < 0) into the iterator.  Each try locks one leaf (shared): a
 * leaf without such an item sends it on to the neighbour its own key range
 * names, so nothing is held from one leaf to the next. */
static int iter_locate(struct bt_iter *it, struct path *pa, struct bkey pos, int dir)
{
	struct btree *t = it->t;
	struct bkey at;
	const struct op op = { OP_READ, &at, 0, 0 };
	struct bnode_hdr h;
	unsigned i;
	int ret;

	for (;;) {
		at = pos;
		if (dir < 0 && !bkey_pred(&at))
			return -ENOENT;
		ret = btp_lock(t, pa, &op);
		if (ret)
			return ret;
		bnode_search(pa->n[0]->buf, &pos, &i);
		if (dir > 0 ? i < bnode_nritems(pa->n[0]->buf) : i > 0)
			break;
		bnode_hdr(pa->n[0]->buf, &h);
		btp_release(t, pa);
		/* The leaf the descent found must hold @at: the next try starts
		 * past its range, so each one moves on.  One that does not is a
		 * damaged tree (session 41: a root whose range began at a
		 * separator spun here for ever with the tree lock held). */
		if (bkey_cmp(&h.min, &at) > 0 || bkey_cmp(&h.max, &at) < 0)
			return -EUCLEAN;
		pos = dir > 0 ? h.max : h.min;
		if (dir > 0 && !bkey_succ(&pos))
			return -ENOENT;
	}
	/* seq first: a change the copy misses bumps it afterwards. */
	it->seq = atomic_load(&t->seq);
	memcpy(it->leaf, pa->n[0]->buf, BNODE_SIZE);
	it->idx = dir > 0 ? i : i - 1;
	it->have = true;
	btp_release(t, pa);
	return 0;
}

static int iter_find(struct bt_iter *it, const struct bkey *k, int dir)
{
	struct path pa;
	int ret;

	it->have = false;
	btp_init(&pa);
	pthread_rwlock_rdlock(&it->t->lock);
	ret = iter_locate(it, &pa, *k, dir);
	btp_unpin(it->t, &pa);
	pthread_rwlock_unlock(&it->t->lock);
	return ret;
}

static int iter_emit(struct bt_iter *it, struct bkey *k, const void **val, unsigned *len)
{
	bnode_key(it->leaf, it->idx, &it->pos);
	it->started = true;
	*k = it->pos;
	*val = bnode_val(it->leaf, it->idx, len);
	return 0;
}

static bool iter_fresh(const struct bt_iter *it)
{
	return it->have && it->started && it->seq == atomic_load(&it->t->seq);
}

int bt_iter_next(struct bt_iter *it, struct bkey *k, const void **val, unsigned *len)
{
	struct bkey from = it->pos;
	int ret;

	if (iter_fresh(it) && it->idx + 1 < bnode_nritems(it->leaf)) {
		it->idx++;
		return iter_emit(it, k, val, len);
	}
	if (it->started && !bkey_succ(&from))
		return -ENOENT;
	ret = iter_find(it, &from, 1);
	return ret ? ret : iter_emit(it, k, val, len);
}

int bt_iter_prev(struct bt_iter *it, struct bkey *k, const void **val, unsigned *len)
{
	int ret;

	if (iter_fresh(it) && it->idx > 0) {
		it->idx--;
		return iter_emit(it, k, val, len);
	}
	ret = iter_find(it, &it->pos, -1);
	return ret ? ret : iter_emit(it, k, val, len);
}

/* ---- verification ---- */

/* With the tree quiet (the barrier exclusive): no node locks. */
static int verify_get(struct btree *t, struct path *pins, const struct bptr *p, unsigned level,
		      const struct bkey *lo, const struct bkey *hi, struct bcache_node **n)
{
	int ret;

	while ((ret = btp_node_get(t, pins, p, level, lo, hi, LK_NONE, n)) == -EAGAIN) {
		ret = btp_load_miss(t, pins);
		if (ret)
			break;
	}
	return ret;
}

static int verify_node(struct btree *t, struct path *pins, const struct bptr *p,
		       unsigned level, const struct bkey *lo, const struct bkey *hi,
		       uint64_t *nitems, uint64_t *nnodes)
{
	struct bcache_node *n;
	unsigned nr;
	int ret;

	ret = verify_get(t, pins, p, level, lo, hi, &n);
	if (ret)
		return ret;
	/* A cached node was checked when read or made: check it again. */
	ret = btp_check_node(t, n->buf, level, lo, hi);
	/* A leaf with pieces: its chain was verified when read (bpiece_load). */
	if (!ret && !n->dirty && !n->chain.npieces && !bnode_matches(n->buf, p))
		ret = -EUCLEAN;
	nr = bnode_nritems(n->buf);
	(*nnodes)++;
	if (!level)
		*nitems += nr;
	for (unsigned i = 0; !ret && level && i < nr; i++) {
		struct bkey clo, chi;
		struct bptr c;

		bnode_key(n->buf, i, &clo);
		if (i + 1 < nr)
			bnode_key(n->buf, i + 1, &chi);
		bnode_ptr(n->buf, i, &c);
		ret = verify_node(t, pins, &c, level - 1, &clo, i + 1 < nr ? &chi : hi, nitems,
				  nnodes);
	}
	bcache_put(t->cache, n);
	return ret;
}

int bt_verify(struct btree *t, uint64_t *nitems, uint64_t *nnodes)
{
	uint64_t items = 0, nodes = 0;
	struct path pins;
	int ret = 0;

	btp_init(&pins);
	pthread_rwlock_wrlock(&t->lock);
	if (t->root.ptr.addr)
		ret = verify_node(t, &pins, &t->root.ptr, t->root.level, &bkey_min, NULL, &items,
				  &nodes);
	btp_unpin(t, &pins);
	pthread_rwlock_unlock(&t->lock);
	if (nitems)
		*nitems = items;
	if (nnodes)
		*nnodes = nodes;
	return ret;
}

void bt_stats_add(struct btree *t, struct bt_stats *s)
{
	s->cows += atomic_load(&t->cows);
	s->splits += atomic_load(&t->splits);
	s->merges += atomic_load(&t->merges);
	s->rebalances += atomic_load(&t->rebalances);
	s->written += atomic_load(&t->written);
	s->written_blocks += atomic_load(&t->written_blocks);
	s->prefetched += atomic_load(&t->prefetched);
	for (unsigned l = 0; l < BNODE_MAX_LEVEL; l++) {
		s->splits_lvl[l] += atomic_load(&t->splits_lvl[l]);
		s->written_lvl[l] += atomic_load(&t->written_lvl[l]);
	}
}
