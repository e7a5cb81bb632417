// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * v2dirty: the set of metadata changes since the last format-v2 checkpoint
 * (v2dirty.h): a chained hash of inodes, each with what changed.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "v2dirty.h"

#define V2D_BUCKETS0 1024u

/* ---- the test hook: failing allocations (v2d_fail_allocs) ---- */

static _Atomic uint64_t nalloc, fail_from, fail_n;

static bool fail_now(void)
{
	uint64_t k;

	if (!atomic_load(&fail_n))
		return false;
	k = atomic_fetch_add(&nalloc, 1);
	return k >= atomic_load(&fail_from) && k - atomic_load(&fail_from) < atomic_load(&fail_n);
}

static void *xcalloc(size_t n, size_t size)
{
	return fail_now() ? NULL : calloc(n, size);
}

static void *xmalloc(size_t size)
{
	return fail_now() ? NULL : malloc(size);
}

static void *xrealloc(void *p, size_t size)
{
	return fail_now() ? NULL : realloc(p, size);
}

void v2d_fail_allocs(uint64_t after, uint64_t count)
{
	atomic_store(&fail_n, 0);
	atomic_store(&nalloc, 0);
	atomic_store(&fail_from, after);
	atomic_store(&fail_n, count);
}

static size_t hslot(const struct v2d_set *s, uint64_t ino)
{
	return (size_t)((ino * 0x9e3779b97f4a7c15ull) >> 20) & (s->nb - 1);
}

static int set_grow(struct v2d_set *s)
{
	size_t nb = s->nb ? s->nb * 2 : V2D_BUCKETS0;

	struct v2d_ino **b = xcalloc(nb, sizeof(*b));
	struct v2d_set ns = { .b = b, .nb = nb };

	if (!b)
		return -ENOMEM;
	s->bytes += (nb - s->nb) * sizeof(*b);
	s->tbytes += (nb - s->nb) * sizeof(*b);
	for (size_t i = 0; i < s->nb; i++) {
		struct v2d_ino *e = s->b[i], *next;

		for (; e; e = next) {
			size_t h = hslot(&ns, e->ino);

			next = e->hnext;
			e->hnext = b[h];
			b[h] = e;
		}
	}
	free(s->b);
	s->b = b;
	s->nb = nb;
	return 0;
}

/* The entry of @ino, made if absent; NULL without memory. */
static struct v2d_ino *set_get(struct v2d_set *s, uint64_t ino)
{
	struct v2d_ino *e;
	size_t h;

	if (s->nb) {
		for (e = s->b[hslot(s, ino)]; e; e = e->hnext)
			if (e->ino == ino)
				return e;
	}
	/* A table that cannot grow is slower, not wrong. */
	if ((s->n + 1 > s->nb * 2 || !s->nb) && set_grow(s) < 0 && !s->nb)
		return NULL;
	e = xcalloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->ino = ino;
	s->bytes += sizeof(*e);
	h = hslot(s, ino);
	e->hnext = s->b[h];
	s->b[h] = e;
	s->n++;
	return e;
}

/* Grow *p to hold @need elements; the set's bytes follow. */
static int grow(struct v2d_set *s, void **p, size_t *cap, size_t need, size_t elem)
{
	size_t ncap;
	void *np;

	if (need <= *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 4;
	while (ncap < need)
		ncap *= 2;
	np = xrealloc(*p, ncap * elem);
	if (!np)
		return -ENOMEM;
	*p = np;
	s->bytes += (ncap - *cap) * elem;
	*cap = ncap;
	return 0;
}

/* Add [from, to) to the sorted, disjoint, non-touching ranges of @e; the
 * chunks it adds to them count in s->touch. */
static int add_range(struct v2d_set *s, struct v2d_ino *e, uint64_t from, uint64_t to)
{
	size_t lo = 0, hi = e->next, j;
	uint64_t had = 0;

	/* First range ending at or after from (it may touch or overlap). */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (e->ext[mid].to < from)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < e->next && e->ext[lo].from <= from && e->ext[lo].to >= to)
		return 0;	/* already covered: the common case */
	/* Ranges lo..j-1 touch or overlap [from, to): they merge into one. */
	for (j = lo; j < e->next && e->ext[j].from <= to; j++) {
		had += e->ext[j].to - e->ext[j].from;
		if (e->ext[j].from < from)
			from = e->ext[j].from;
		if (e->ext[j].to > to)
			to = e->ext[j].to;
	}
	if (j == lo) {
		if (grow(s, (void **)&e->ext, &e->capext, e->next + 1, sizeof(*e->ext)) < 0)
			return -ENOMEM;
		memmove(e->ext + lo + 1, e->ext + lo, (e->next - lo) * sizeof(*e->ext));
		e->next++;
	} else if (j > lo + 1) {
		memmove(e->ext + lo + 1, e->ext + j, (e->next - j) * sizeof(*e->ext));
		e->next -= j - lo - 1;
	}
	e->ext[lo].from = from;
	e->ext[lo].to = to;
	s->touch += (to - from - had) / V2D_CHUNK * V2D_TOUCH;
	return 0;
}

static int add_name(struct v2d_set *s, struct v2d_ino *e, const char *name, uint16_t len)
{
	char *p;

	/* A name changed again and again (a rename loop) is kept once when
	 * its changes follow each other. */
	if (e->nnames && e->names[e->nnames - 1].len == len &&
	    !memcmp(e->names[e->nnames - 1].name, name, len))
		return 0;
	if (grow(s, (void **)&e->names, &e->capnames, e->nnames + 1, sizeof(*e->names)) < 0)
		return -ENOMEM;
	p = xmalloc(len ? len : 1);
	if (!p)
		return -ENOMEM;
	memcpy(p, name, len);
	s->bytes += len ? len : 1;
	e->names[e->nnames].name = p;
	e->names[e->nnames].len = len;
	e->nnames++;
	return 0;
}

static int add_cookie(struct v2d_set *s, struct v2d_ino *e, uint64_t cookie)
{
	if (grow(s, (void **)&e->cookies, &e->capcookies, e->ncookies + 1, sizeof(*e->cookies)) < 0)
		return -ENOMEM;
	e->cookies[e->ncookies++] = cookie;
	return 0;
}

int v2d_init(struct v2dirty *d)
{
	const char *env = getenv("TWINFS_V2DIRTY_FAIL");
	unsigned long long after, count;
	int ret;

	memset(d, 0, sizeof(*d));
	if (env && sscanf(env, "%llu,%llu", &after, &count) == 2)
		v2d_fail_allocs(after, count);
	ret = -pthread_mutex_init(&d->mu, NULL);
	if (ret)
		return ret;
	ret = -pthread_cond_init(&d->lost_cv, NULL);
	if (ret)
		pthread_mutex_destroy(&d->mu);
	return ret;
}

static void ino_free(struct v2d_ino *e)
{
	for (size_t i = 0; i < e->nnames; i++)
		free(e->names[i].name);
	free(e->names);
	free(e->ext);
	free(e->cookies);
	free(e);
}

void v2d_set_free(struct v2d_set *s)
{
	for (size_t i = 0; i < s->nb; i++) {
		struct v2d_ino *e = s->b[i], *next;

		for (; e; e = next) {
			next = e->hnext;
			ino_free(e);
		}
	}
	free(s->b);
	memset(s, 0, sizeof(*s));
}

void v2d_destroy(struct v2dirty *d)
{
	v2d_set_free(&d->set);
	pthread_cond_destroy(&d->lost_cv);
	pthread_mutex_destroy(&d->mu);
}

/* The memory of the open set and of the one a checkpoint is writing, for
 * the dirty budget (v2d_bytes): d->mu held. */
static void publish(struct v2dirty *d)
{
	atomic_store(&d->bytes, d->set.bytes + (d->taken ? d->taken->bytes : 0));
	atomic_store(&d->notes, d->set.bytes - d->set.tbytes +
				(d->taken ? d->taken->bytes - d->taken->tbytes : 0));
	atomic_store(&d->touch, d->set.touch + (d->taken ? d->taken->touch : 0));
	atomic_store(&d->grow, d->set.grow + (d->taken ? d->taken->grow : 0));
	atomic_store(&d->other, d->set.other + (d->taken ? d->taken->other : 0));
}

static const struct v2d_ino *set_find(const struct v2d_set *s, uint64_t ino);

/* The set a note goes into: d->mu held. */
static struct v2d_set *target(struct v2dirty *d, const struct v2d_how *h)
{
	return h && h->into ? h->into : &d->set;
}

/* A death with no entry: kept in d->dead, so read-ins still refuse it. */
static void keep_dead(struct v2dirty *d, uint64_t ino)
{
	if (d->ndead < V2D_DEAD_SPARE)
		d->dead[d->ndead++] = ino;
	else
		d->dead_lost = true;
}

/* A note failed for want of memory: d->mu held.  Into a rebuilt set it
 * only fails that rebuild (its caller gives up); into the open set the
 * change is lost until a rebuild from the log. */
static int note_failed(struct v2dirty *d, const struct v2d_how *h, uint64_t ino, unsigned flags)
{
	if (h && h->into)
		return -ENOMEM;
	d->lost = true;
	d->fails++;
	atomic_store(&d->lost_new, true);
	if (flags & V2D_DEAD)
		keep_dead(d, ino);
	if (h && h->txlost && !*h->txlost) {
		*h->txlost = true;
		d->lost_open++;
	}
	return -ENOMEM;
}

/* Raise @e's xattr rewrite to @slots node slots, counted in s->other. */
static void raise_xslots(struct v2d_set *s, struct v2d_ino *e, uint64_t slots)
{
	if (slots > UINT32_MAX)
		slots = UINT32_MAX;
	if (slots > e->xslots) {
		s->other += slots - e->xslots;
		e->xslots = (uint32_t)slots;
	}
}

/* @flags into @e's; a deletion's slots count in s->other once. */
static void add_flags(struct v2d_set *s, struct v2d_ino *e, unsigned flags)
{
	if ((flags & V2D_DEAD) && !(e->flags & V2D_DEAD))
		s->other += V2D_DEAD_SLOTS;
	e->flags |= flags;
}

/* v2d_note_inode, and its xattr rewrite's @xslots. */
static int note_inode(struct v2dirty *d, uint64_t ino, unsigned flags, uint64_t xslots,
		      const struct v2d_how *h)
{
	struct v2d_set *s;
	struct v2d_ino *e;
	int ret = 0;

	pthread_mutex_lock(&d->mu);
	s = target(d, h);
	e = set_get(s, ino);
	if (e) {
		add_flags(s, e, flags);
		raise_xslots(s, e, xslots);
	} else {
		ret = note_failed(d, h, ino, flags);
	}
	publish(d);
	pthread_mutex_unlock(&d->mu);
	return ret;
}

int v2d_note_inode(struct v2dirty *d, uint64_t ino, unsigned flags, const struct v2d_how *h)
{
	return note_inode(d, ino, flags, 0, h);
}

int v2d_note_xattr(struct v2dirty *d, uint64_t ino, uint64_t slots, const struct v2d_how *h)
{
	return note_inode(d, ino, V2D_XATTR, slots, h);
}

int v2d_note_ext(struct v2dirty *d, uint64_t ino, uint64_t fblk, uint64_t n, uint64_t grow,
		 const struct v2d_how *h)
{
	uint64_t from = fblk & ~(V2D_CHUNK - 1);
	uint64_t to = (fblk + n + V2D_CHUNK - 1) & ~(V2D_CHUNK - 1);
	struct v2d_set *s;
	struct v2d_ino *e;
	int ret = 0;

	if (!n)
		return 0;
	pthread_mutex_lock(&d->mu);
	s = target(d, h);
	e = set_get(s, ino);
	if (!e || add_range(s, e, from, to) < 0)
		ret = note_failed(d, h, ino, 0);
	s->grow += grow;
	publish(d);
	pthread_mutex_unlock(&d->mu);
	return ret;
}

int v2d_note_late(void *d, uint64_t ino, uint64_t fblk, uint64_t n)
{
	/* A late piece is part of a record the replay kept: estimated as a
	 * written set, the most a record of its size adds. */
	return v2d_note_ext(d, ino, fblk, n, v2d_ext_grow(n, true, false), NULL);
}

int v2d_note_name(struct v2dirty *d, uint64_t dir, const char *name, uint16_t len,
		  uint64_t dead_cookie, const struct v2d_how *h)
{
	struct v2d_set *s;
	struct v2d_ino *e;
	int ret = 0;

	pthread_mutex_lock(&d->mu);
	s = target(d, h);
	e = set_get(s, dir);
	if (e && h && h->into)
		e->flags |= V2D_REINDEX;
	if (!e || add_name(s, e, name, len) < 0 ||
	    (dead_cookie && add_cookie(s, e, dead_cookie) < 0))
		ret = note_failed(d, h, dir, 0);
	publish(d);
	pthread_mutex_unlock(&d->mu);
	return ret;
}

void v2d_tx_logged(struct v2dirty *d)
{
	pthread_mutex_lock(&d->mu);
	if (d->lost_open && !--d->lost_open)
		pthread_cond_broadcast(&d->lost_cv);
	pthread_mutex_unlock(&d->mu);
}

bool v2d_rebuild_begin(struct v2dirty *d, struct v2d_rebuild *rb)
{
	bool lost;

	pthread_mutex_lock(&d->mu);
	/* A transaction between its failed note and its append holds no
	 * lock the checkpoint waits for (meta_tx_commit), so this ends. */
	while (d->lost && d->lost_open)
		pthread_cond_wait(&d->lost_cv, &d->mu);
	lost = d->lost;
	rb->fails = d->fails;
	rb->ndead = d->ndead;
	pthread_mutex_unlock(&d->mu);
	return lost;
}

void v2d_rebuild_end(struct v2dirty *d, const struct v2d_rebuild *rb, bool ok)
{
	pthread_mutex_lock(&d->mu);
	if (ok) {
		/* The deaths kept before the begin whose records the log had
		 * are in the rebuilt set now; one it did not have (a mount's
		 * orphan deletion, not logged, given back without memory)
		 * stays aside: it is dead all the same. */
		size_t k = 0;

		for (size_t i = 0; i < d->ndead; i++) {
			const struct v2d_ino *e = i < rb->ndead ? set_find(d->taken, d->dead[i]) : NULL;

			if (!e || !(e->flags & V2D_DEAD))
				d->dead[k++] = d->dead[i];
		}
		d->ndead = k;
	}
	if (ok && d->fails == rb->fails) {
		d->lost = false;
		d->dead_lost = false;
	}
	pthread_mutex_unlock(&d->mu);
}

size_t v2d_dead_kept(struct v2dirty *d, bool *overflow)
{
	size_t n;

	pthread_mutex_lock(&d->mu);
	n = d->ndead;
	*overflow = d->dead_lost;
	pthread_mutex_unlock(&d->mu);
	return n;
}

bool v2d_lost_take(struct v2dirty *d)
{
	return atomic_load_explicit(&d->lost_new, memory_order_relaxed) &&
	       atomic_exchange(&d->lost_new, false);
}

uint64_t v2d_fails(struct v2dirty *d)
{
	uint64_t n;

	pthread_mutex_lock(&d->mu);
	n = d->fails;
	pthread_mutex_unlock(&d->mu);
	return n;
}

static int cmp_ino(const void *a, const void *b)
{
	uint64_t x = (*(struct v2d_ino *const *)a)->ino, y = (*(struct v2d_ino *const *)b)->ino;

	return x < y ? -1 : x > y;
}

/* Every inode of @s into a new array, unsorted. */
static int list_set(const struct v2d_set *s, struct v2d_ino ***v, size_t *nv)
{
	struct v2d_ino **arr = xmalloc((s->n ? s->n : 1) * sizeof(*arr));
	size_t k = 0;

	if (!arr)
		return -ENOMEM;
	for (size_t i = 0; i < s->nb; i++)
		for (struct v2d_ino *e = s->b[i]; e; e = e->hnext)
			arr[k++] = e;
	*v = arr;
	*nv = k;
	return 0;
}

int v2d_list(const struct v2d_set *s, struct v2d_ino ***v, size_t *nv)
{
	int ret = list_set(s, v, nv);

	if (ret == 0)
		qsort(*v, *nv, sizeof(**v), cmp_ino);
	return ret;
}

int v2d_take(struct v2dirty *d, struct v2d_set *out, struct v2d_ino ***v, size_t *nv)
{
	int ret;

	pthread_mutex_lock(&d->mu);
	ret = list_set(&d->set, v, nv);
	if (ret == 0) {
		*out = d->set;
		memset(&d->set, 0, sizeof(d->set));
		d->taken = out;
		publish(d);
	}
	pthread_mutex_unlock(&d->mu);
	/* Sorted outside d->mu: notes go on meanwhile. */
	if (ret == 0)
		qsort(*v, *nv, sizeof(**v), cmp_ino);
	return ret;
}

/* Merge @e (of a taken set) into d's set: the caller holds d->mu.  What
 * does not fit is lost like a failed note (the log still has it). */
static void merge_one(struct v2dirty *d, const struct v2d_ino *e)
{
	struct v2d_set *s = &d->set;
	struct v2d_ino *t = set_get(s, e->ino);
	bool ok = t != NULL;

	if (!t) {
		note_failed(d, NULL, e->ino, e->flags);
		return;
	}
	add_flags(s, t, e->flags);
	raise_xslots(s, t, e->xslots);
	for (size_t i = 0; i < e->next; i++)
		ok &= add_range(s, t, e->ext[i].from, e->ext[i].to) == 0;
	for (size_t i = 0; i < e->nnames; i++)
		ok &= add_name(s, t, e->names[i].name, e->names[i].len) == 0;
	for (size_t i = 0; i < e->ncookies; i++)
		ok &= add_cookie(s, t, e->cookies[i]) == 0;
	if (!ok)
		note_failed(d, NULL, e->ino, 0);
}

void v2d_give_back(struct v2dirty *d, struct v2d_set *s)
{
	pthread_mutex_lock(&d->mu);
	for (size_t i = 0; i < s->nb; i++)
		for (struct v2d_ino *e = s->b[i]; e; e = e->hnext)
			merge_one(d, e);
	d->set.grow += s->grow;
	if (d->taken == s)
		d->taken = NULL;
	publish(d);
	pthread_mutex_unlock(&d->mu);
	v2d_set_free(s);
}

void v2d_release(struct v2dirty *d, struct v2d_set *s)
{
	pthread_mutex_lock(&d->mu);
	if (d->taken == s)
		d->taken = NULL;
	publish(d);
	pthread_mutex_unlock(&d->mu);
	v2d_set_free(s);
}

static const struct v2d_ino *set_find(const struct v2d_set *s, uint64_t ino)
{
	if (!s || !s->nb)
		return NULL;
	for (const struct v2d_ino *e = s->b[hslot(s, ino)]; e; e = e->hnext)
		if (e->ino == ino)
			return e;
	return NULL;
}

int v2d_state(struct v2dirty *d, uint64_t ino)
{
	const struct v2d_ino *e, *t;
	int st = -1;

	pthread_mutex_lock(&d->mu);
	e = set_find(&d->set, ino);
	t = set_find(d->taken, ino);
	if (e || t)
		st = (int)((e ? e->flags : 0) | (t ? t->flags : 0)) & ~V2D_REINDEX;
	for (size_t i = 0; i < d->ndead; i++)
		if (d->dead[i] == ino)
			st = (st < 0 ? 0 : st) | V2D_DEAD;
	if (st < 0 && d->lost)
		st = 0;
	/* Deaths were lost: whatever the set says, the inode may have died
	 * since (an inode in the set is resident unless it did). */
	if (st >= 0 && d->dead_lost && !(st & V2D_DEAD))
		st |= V2D_UNSURE;
	pthread_mutex_unlock(&d->mu);
	return st;
}

uint64_t v2d_bytes(struct v2dirty *d)
{
	return atomic_load(&d->bytes);
}

uint64_t v2d_note_bytes(struct v2dirty *d)
{
	return atomic_load(&d->notes);
}

void v2d_tree_need(struct v2dirty *d, uint64_t *touch, uint64_t *grow)
{
	*touch = atomic_load_explicit(&d->touch, memory_order_relaxed);
	*grow = atomic_load_explicit(&d->grow, memory_order_relaxed);
}

uint64_t v2d_xslots(struct v2dirty *d, uint64_t ino)
{
	const struct v2d_ino *e;
	uint64_t n;

	pthread_mutex_lock(&d->mu);
	e = set_find(&d->set, ino);
	n = e ? e->xslots : 0;
	pthread_mutex_unlock(&d->mu);
	return n;
}

uint64_t v2d_other_slots(struct v2dirty *d)
{
	return atomic_load_explicit(&d->other, memory_order_relaxed);
}

size_t v2d_count(struct v2dirty *d)
{
	size_t n;

	pthread_mutex_lock(&d->mu);
	n = d->set.n;
	pthread_mutex_unlock(&d->mu);
	return n;
}
