// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * bcache: bounded LRU cache of B+tree nodes by address (see bcache.h).
 * A chained hash table sized for the budget, and one LRU list holding only
 * the evictable entries (clean, unreferenced), so eviction never scans
 * pinned ones.
 *
 * Entries that leave are kept as spares and reused by the next
 * bcache_alloc, their buffers' pages given back to the kernel
 * (MADV_DONTNEED) past SPARE_HOT of them.  Freed to malloc, a 16 KiB
 * buffer aligned to 4 KiB left a 16 KiB chunk that the next
 * posix_memalign (16 KiB + 4 KiB of slack) could not use: a checkpoint
 * that replaced ~150 MB of nodes at 4 TiB left that much in malloc's
 * arenas until the next trim, and the daemon's RSS swung between 230 and
 * 400 MiB with the caches' contents unchanged.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "bcache.h"
#include "bnode.h"

/* Spares whose buffers keep their pages: what one burst reuses at once. */
#define SPARE_HOT 64

struct bcache {
	pthread_mutex_t mu;		/* leaf lock: everything below */
	struct bcache_node **table;
	size_t nbuckets;		/* power of two */
	struct bcache_node lru;		/* head: next = most recent */
	struct bcache_stats st;
	/* Entries gone from the cache, for reuse (chained by hnext): hot
	 * ones with their pages, cold ones without (MADV_DONTNEED). */
	pthread_mutex_t spare_mu;	/* leaf lock: the two lists */
	struct bcache_node *hot, *cold;
	unsigned nhot;
	uint64_t ncold;
};

static size_t bucket(const struct bcache *c, uint64_t addr)
{
	return (size_t)((addr * 0x9e3779b97f4a7c15ull) >> 20) & (c->nbuckets - 1);
}

int bcache_create(uint64_t budget_bytes, struct bcache **out)
{
	struct bcache *c = calloc(1, sizeof(*c));
	uint64_t want = budget_bytes / BNODE_SIZE + 1;

	if (!c)
		return -ENOMEM;
	c->nbuckets = 64;
	while (c->nbuckets < want && c->nbuckets < (1u << 24))
		c->nbuckets <<= 1;
	c->table = calloc(c->nbuckets, sizeof(*c->table));
	if (!c->table) {
		free(c);
		return -ENOMEM;
	}
	pthread_mutex_init(&c->mu, NULL);
	pthread_mutex_init(&c->spare_mu, NULL);
	c->lru.lru_next = c->lru.lru_prev = &c->lru;
	c->st.budget = budget_bytes;
	*out = c;
	return 0;
}

/* An entry's memory, its lock already destroyed (spares) or never made. */
static void node_release(struct bcache_node *n)
{
	free(n->buf);
	free(n);
}

/* An entry nobody holds any more becomes a spare (the caller holds no
 * lock of the cache's, or mu: spare_mu is a leaf under it). */
static void node_free(struct bcache *c, struct bcache_node *n)
{
	bool hot;

	pthread_rwlock_destroy(&n->lock);
	pthread_mutex_lock(&c->spare_mu);
	hot = c->nhot < SPARE_HOT;
	if (hot) {
		n->hnext = c->hot;
		c->hot = n;
		c->nhot++;
	}
	pthread_mutex_unlock(&c->spare_mu);
	if (hot)
		return;
	/* Outside the lock: the pages go, the address range stays ours. */
	(void)madvise(n->buf, BNODE_SIZE, MADV_DONTNEED);
	pthread_mutex_lock(&c->spare_mu);
	n->hnext = c->cold;
	c->cold = n;
	c->ncold++;
	pthread_mutex_unlock(&c->spare_mu);
}

/* A spare, hot first, reset as calloc would leave it (its buffer is not
 * cleared: bcache_alloc's callers fill it); NULL: none. */
static struct bcache_node *spare_get(struct bcache *c)
{
	struct bcache_node *n;

	pthread_mutex_lock(&c->spare_mu);
	n = c->hot;
	if (n) {
		c->hot = n->hnext;
		c->nhot--;
	} else if ((n = c->cold)) {
		c->cold = n->hnext;
		c->ncold--;
	}
	pthread_mutex_unlock(&c->spare_mu);
	if (n) {
		void *buf = n->buf;

		memset(n, 0, sizeof(*n));
		n->buf = buf;
	}
	return n;
}

static void lru_del(struct bcache_node *n)
{
	if (!n->lru_next)
		return;
	n->lru_prev->lru_next = n->lru_next;
	n->lru_next->lru_prev = n->lru_prev;
	n->lru_next = n->lru_prev = NULL;
}

static void lru_add(struct bcache *c, struct bcache_node *n)
{
	n->lru_next = c->lru.lru_next;
	n->lru_prev = &c->lru;
	c->lru.lru_next->lru_prev = n;
	c->lru.lru_next = n;
}

static void unhash(struct bcache *c, struct bcache_node *n)
{
	struct bcache_node **pp = &c->table[bucket(c, n->addr)];

	while (*pp && *pp != n)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = n->hnext;
	n->hashed = false;
	lru_del(n);
	c->st.nodes--;
	c->st.bytes -= BNODE_SIZE;
	if (n->dirty)
		c->st.dirty_bytes -= BNODE_SIZE;
}

void bcache_destroy(struct bcache *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nbuckets; i++) {
		struct bcache_node *n = c->table[i], *next;

		for (; n; n = next) {
			next = n->hnext;
			pthread_rwlock_destroy(&n->lock);
			node_release(n);
		}
	}
	for (struct bcache_node *n = c->hot, *next; n; n = next) {
		next = n->hnext;
		node_release(n);
	}
	for (struct bcache_node *n = c->cold, *next; n; n = next) {
		next = n->hnext;
		node_release(n);
	}
	pthread_mutex_destroy(&c->spare_mu);
	pthread_mutex_destroy(&c->mu);
	free(c->table);
	free(c);
}

/* Evict least recently used clean entries while over budget (mu held). */
static void shrink(struct bcache *c)
{
	while (c->st.bytes > c->st.budget && c->lru.lru_prev != &c->lru) {
		struct bcache_node *n = c->lru.lru_prev;

		unhash(c, n);
		node_free(c, n);
		c->st.evictions++;
	}
}

/* The peaks, for stats (mu held). */
static void note_max(struct bcache *c)
{
	if (c->st.bytes > c->st.max_bytes)
		c->st.max_bytes = c->st.bytes;
	if (c->st.dirty_bytes > c->st.max_dirty_bytes)
		c->st.max_dirty_bytes = c->st.dirty_bytes;
}

void bcache_set_budget(struct bcache *c, uint64_t budget_bytes)
{
	pthread_mutex_lock(&c->mu);
	c->st.budget = budget_bytes;
	shrink(c);
	pthread_mutex_unlock(&c->mu);
}

struct bcache_node *bcache_get(struct bcache *c, uint64_t addr)
{
	struct bcache_node *n;

	pthread_mutex_lock(&c->mu);
	for (n = c->table[bucket(c, addr)]; n; n = n->hnext)
		if (n->addr == addr)
			break;
	if (n) {
		lru_del(n);
		n->refs++;
		c->st.hits++;
	} else {
		c->st.misses++;
	}
	pthread_mutex_unlock(&c->mu);
	return n;
}

/* Writer-preferring: a tree's readers never starve a writer of a node
 * (btree.h: nobody takes a node lock twice, so this cannot deadlock). */
static void node_lock_init(struct bcache_node *n)
{
	pthread_rwlockattr_t attr;

	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&n->lock, &attr);
	pthread_rwlockattr_destroy(&attr);
}

int bcache_alloc(struct bcache *c, uint64_t addr, struct bcache_node **out)
{
	struct bcache_node *n = spare_get(c);

	if (!n) {
		n = calloc(1, sizeof(*n));
		if (!n)
			return -ENOMEM;
		if (posix_memalign(&n->buf, 4096, BNODE_SIZE)) {
			free(n);
			return -ENOMEM;
		}
	}
	n->addr = addr;
	n->refs = 1;
	node_lock_init(n);
	*out = n;
	return 0;
}

void bcache_insert(struct bcache *c, struct bcache_node **np)
{
	struct bcache_node *n = *np, *o;
	size_t b = bucket(c, n->addr);

	pthread_mutex_lock(&c->mu);
	for (o = c->table[b]; o; o = o->hnext)
		if (o->addr == n->addr)
			break;
	if (o) {
		lru_del(o);
		o->refs++;
		pthread_mutex_unlock(&c->mu);
		node_free(c, n);
		*np = o;
		return;
	}
	n->hnext = c->table[b];
	c->table[b] = n;
	n->hashed = true;
	c->st.nodes++;
	c->st.bytes += BNODE_SIZE;
	if (n->dirty)
		c->st.dirty_bytes += BNODE_SIZE;
	shrink(c);
	note_max(c);
	pthread_mutex_unlock(&c->mu);
}

void bcache_put(struct bcache *c, struct bcache_node *n)
{
	bool gone;

	if (!n)
		return;
	pthread_mutex_lock(&c->mu);
	gone = --n->refs == 0 && !n->hashed;
	if (!n->refs && n->hashed && !n->dirty) {
		lru_add(c, n);
		shrink(c);
	}
	pthread_mutex_unlock(&c->mu);
	if (gone)
		node_free(c, n);
}

void bcache_set_dirty(struct bcache *c, struct bcache_node *n, bool dirty)
{
	pthread_mutex_lock(&c->mu);
	if (n->dirty != dirty && n->hashed) {
		if (dirty)
			c->st.dirty_bytes += BNODE_SIZE;
		else
			c->st.dirty_bytes -= BNODE_SIZE;
		note_max(c);
	}
	n->dirty = dirty;
	if (dirty)
		lru_del(n);
	else if (!n->refs && n->hashed)
		lru_add(c, n);
	pthread_mutex_unlock(&c->mu);
}

void bcache_forget(struct bcache *c, struct bcache_node *n)
{
	bool gone;

	pthread_mutex_lock(&c->mu);
	if (n->hashed)
		unhash(c, n);
	n->dirty = false;
	gone = !n->refs;
	pthread_mutex_unlock(&c->mu);
	if (gone)
		node_free(c, n);
}

void bcache_drop_addr(struct bcache *c, uint64_t addr)
{
	struct bcache_node *n;
	bool gone = false;

	pthread_mutex_lock(&c->mu);
	for (n = c->table[bucket(c, addr)]; n; n = n->hnext)
		if (n->addr == addr)
			break;
	if (n && !n->dirty) {
		unhash(c, n);
		gone = !n->refs;
	}
	pthread_mutex_unlock(&c->mu);
	if (gone)
		node_free(c, n);
}

void bcache_hold(struct bcache *c, struct bcache_node *n)
{
	pthread_mutex_lock(&c->mu);
	n->refs++;
	pthread_mutex_unlock(&c->mu);
}

uint64_t bcache_dirty_bytes(struct bcache *c)
{
	uint64_t d;

	pthread_mutex_lock(&c->mu);
	d = c->st.dirty_bytes;
	pthread_mutex_unlock(&c->mu);
	return d;
}

void bcache_stats(struct bcache *c, struct bcache_stats *st)
{
	pthread_mutex_lock(&c->mu);
	*st = c->st;
	pthread_mutex_unlock(&c->mu);
	pthread_mutex_lock(&c->spare_mu);
	st->spares_cold = c->ncold;
	pthread_mutex_unlock(&c->spare_mu);
}
