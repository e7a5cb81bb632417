// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * v2dirty: the set of metadata changes since the last format-v2 checkpoint
 * (v2dirty.h): a chained hash of inodes, each with what changed.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "v2dirty.h"

#define V2D_BUCKETS0 1024u

static size_t hslot(const struct v2d_set *s, uint64_t ino)
{
	return (size_t)((ino * 0x9e3779b97f4a7c15ull) >> 20) & (s->nb - 1);
}

static int set_grow(struct v2d_set *s)
{
	size_t nb = s->nb ? s->nb * 2 : V2D_BUCKETS0;

	struct v2d_ino **b = calloc(nb, sizeof(*b));
	struct v2d_set ns = { .b = b, .nb = nb };

	if (!b)
		return -ENOMEM;
	s->bytes += (nb - s->nb) * sizeof(*b);
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

/* The entry of @ino, made if absent; NULL (and s->lost) without memory. */
static struct v2d_ino *set_get(struct v2d_set *s, uint64_t ino)
{
	struct v2d_ino *e;
	size_t h;

	if (s->nb) {
		for (e = s->b[hslot(s, ino)]; e; e = e->hnext)
			if (e->ino == ino)
				return e;
	}
	if ((s->n + 1 > s->nb * 2 || !s->nb) && set_grow(s) < 0 && !s->nb)
		goto lost;
	e = calloc(1, sizeof(*e));
	if (!e)
		goto lost;
	e->ino = ino;
	s->bytes += sizeof(*e);
	h = hslot(s, ino);
	e->hnext = s->b[h];
	s->b[h] = e;
	s->n++;
	return e;
lost:
	s->lost = true;
	return NULL;
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
	np = realloc(*p, ncap * elem);
	if (!np)
		return -ENOMEM;
	*p = np;
	s->bytes += (ncap - *cap) * elem;
	*cap = ncap;
	return 0;
}

/* Add [from, to) to the sorted, disjoint, non-touching ranges of @e. */
static int add_range(struct v2d_set *s, struct v2d_ino *e, uint64_t from, uint64_t to)
{
	size_t lo = 0, hi = e->next, j;

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
	p = malloc(len ? len : 1);
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
	memset(d, 0, sizeof(*d));
	return -pthread_mutex_init(&d->mu, NULL);
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
	pthread_mutex_destroy(&d->mu);
}

/* The memory of the open set and of the one a checkpoint is writing, for
 * the dirty budget (v2d_bytes): d->mu held. */
static void publish(struct v2dirty *d)
{
	atomic_store(&d->bytes, d->set.bytes + (d->taken ? d->taken->bytes : 0));
}

void v2d_note_inode(struct v2dirty *d, uint64_t ino, unsigned flags)
{
	struct v2d_ino *e;

	pthread_mutex_lock(&d->mu);
	e = set_get(&d->set, ino);
	if (e)
		e->flags |= flags;
	publish(d);
	pthread_mutex_unlock(&d->mu);
}

void v2d_note_ext(struct v2dirty *d, uint64_t ino, uint64_t fblk, uint64_t n)
{
	uint64_t from = fblk & ~(V2D_CHUNK - 1);
	uint64_t to = (fblk + n + V2D_CHUNK - 1) & ~(V2D_CHUNK - 1);
	struct v2d_ino *e;

	if (!n)
		return;
	pthread_mutex_lock(&d->mu);
	e = set_get(&d->set, ino);
	if (e && add_range(&d->set, e, from, to) < 0)
		d->set.lost = true;
	publish(d);
	pthread_mutex_unlock(&d->mu);
}

void v2d_note_name(struct v2dirty *d, uint64_t dir, const char *name, uint16_t len,
		   uint64_t dead_cookie)
{
	struct v2d_ino *e;

	pthread_mutex_lock(&d->mu);
	e = set_get(&d->set, dir);
	if (e && (add_name(&d->set, e, name, len) < 0 ||
		  (dead_cookie && add_cookie(&d->set, e, dead_cookie) < 0)))
		d->set.lost = true;
	publish(d);
	pthread_mutex_unlock(&d->mu);
}

static int cmp_ino(const void *a, const void *b)
{
	uint64_t x = (*(struct v2d_ino *const *)a)->ino, y = (*(struct v2d_ino *const *)b)->ino;

	return x < y ? -1 : x > y;
}

int v2d_take(struct v2dirty *d, struct v2d_set *out, struct v2d_ino ***v, size_t *nv)
{
	struct v2d_ino **arr;
	size_t k = 0;

	pthread_mutex_lock(&d->mu);
	arr = malloc((d->set.n ? d->set.n : 1) * sizeof(*arr));
	if (!arr) {
		pthread_mutex_unlock(&d->mu);
		return -ENOMEM;
	}
	*out = d->set;
	memset(&d->set, 0, sizeof(d->set));
	d->taken = out;
	publish(d);
	pthread_mutex_unlock(&d->mu);
	for (size_t i = 0; i < out->nb; i++)
		for (struct v2d_ino *e = out->b[i]; e; e = e->hnext)
			arr[k++] = e;
	qsort(arr, k, sizeof(*arr), cmp_ino);
	*v = arr;
	*nv = k;
	return 0;
}

/* Merge @e (of a taken set) into d's set: the caller holds d->mu. */
static void merge_one(struct v2d_set *s, const struct v2d_ino *e)
{
	struct v2d_ino *t = set_get(s, e->ino);

	if (!t)
		return;
	t->flags |= e->flags;
	for (size_t i = 0; i < e->next; i++)
		if (add_range(s, t, e->ext[i].from, e->ext[i].to) < 0)
			s->lost = true;
	for (size_t i = 0; i < e->nnames; i++)
		if (add_name(s, t, e->names[i].name, e->names[i].len) < 0)
			s->lost = true;
	for (size_t i = 0; i < e->ncookies; i++)
		if (add_cookie(s, t, e->cookies[i]) < 0)
			s->lost = true;
}

void v2d_give_back(struct v2dirty *d, struct v2d_set *s)
{
	pthread_mutex_lock(&d->mu);
	if (s->lost)
		d->set.lost = true;
	for (size_t i = 0; i < s->nb; i++)
		for (struct v2d_ino *e = s->b[i]; e; e = e->hnext)
			merge_one(&d->set, e);
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
		st = (int)((e ? e->flags : 0) | (t ? t->flags : 0));
	else if (d->set.lost || (d->taken && d->taken->lost))
		st = 0;
	pthread_mutex_unlock(&d->mu);
	return st;
}

uint64_t v2d_bytes(struct v2dirty *d)
{
	return atomic_load(&d->bytes);
}

size_t v2d_count(struct v2dirty *d)
{
	size_t n;

	pthread_mutex_lock(&d->mu);
	n = d->set.n;
	pthread_mutex_unlock(&d->mu);
	return n;
}
