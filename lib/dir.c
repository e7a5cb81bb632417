// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * dir: an in-memory directory (see dir.h).
 *
 * Owns three views of the same entries:
 *  - a name table: open addressing with linear probing on XXH3 of the name
 *    (the full hash is kept in the entry, so most probes compare one word);
 *  - a cookie vector: entries in cookie (= insertion) order, a deleted
 *    entry leaving a NULL slot whose cookie stays in cks[] so the vector
 *    stays sorted; compacted when the dead outnumber the live, so memory
 *    follows the live count and deleting is amortized O(1);
 *  - a two-or-more-level bitmap of live slots, so "first live slot at or
 *    after i" costs a few word operations however many dead slots follow.
 * dir_next() is a binary search on cks[] plus that bitmap lookup: resuming
 * at any cookie is O(log n), a full listing O(n log n) with a tiny constant
 * and no dependence on how many entries were deleted.
 *
 * Not thread-safe: the owning inode's lock protects everything here.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "dir.h"

#define DIR_NAME_MAX 255
#define FIRST_COOKIE 2
#define HB_MAXLEV 12
#define NONE SIZE_MAX

struct dent {
	uint64_t ino;
	uint64_t cookie;
	uint64_t hash;
	size_t slot;		/* index in the cookie vector */
	uint16_t namelen;
	uint8_t dtype;		/* DT_* of the child, 0: unknown */
	char name[];		/* NUL-terminated */
};

/* Hierarchical bitmap: bit i of level k+1 = word i of level k is nonzero. */
struct hbits {
	uint64_t *lv[HB_MAXLEV];
	size_t nw[HB_MAXLEV];
	int nlev;
};

struct dir {
	struct dent **tab;	/* name table, NULL = empty slot */
	size_t tcap;		/* power of two */
	size_t count;		/* live entries */

	struct dent **ents;	/* cookie order, NULL = deleted */
	uint64_t *cks;		/* cookie of each slot, deleted ones too */
	size_t nents, ecap, ndead;
	struct hbits live;	/* live slots of ents, sized for ecap */

	uint64_t next_cookie;
};

/* ---- hierarchical bitmap ---- */

static void hb_free(struct hbits *h)
{
	for (int i = 0; i < h->nlev; i++)
		free(h->lv[i]);
	h->nlev = 0;
}

/* Empty bitmap for @cap bits.  0 or -ENOMEM (h untouched on failure). */
static int hb_alloc(struct hbits *h, size_t cap)
{
	struct hbits n = { .nlev = 0 };
	size_t bits = cap ? cap : 1;

	do {
		size_t words = (bits + 63) / 64;
		n.lv[n.nlev] = calloc(words, sizeof(uint64_t));
		if (!n.lv[n.nlev]) {
			hb_free(&n);
			return -ENOMEM;
		}
		n.nw[n.nlev++] = words;
		bits = words;
	} while (bits > 1 && n.nlev < HB_MAXLEV);
	hb_free(h);
	*h = n;
	return 0;
}

static void hb_set(struct hbits *h, size_t i)
{
	for (int l = 0; l < h->nlev; l++) {
		size_t w = i >> 6;
		uint64_t was = h->lv[l][w];
		h->lv[l][w] = was | 1ull << (i & 63);
		if (was)
			break;
		i = w;
	}
}

static void hb_clear(struct hbits *h, size_t i)
{
	for (int l = 0; l < h->nlev; l++) {
		size_t w = i >> 6;
		h->lv[l][w] &= ~(1ull << (i & 63));
		if (h->lv[l][w])
			break;
		i = w;
	}
}

/* First set bit >= i, or NONE. */
static size_t hb_next(const struct hbits *h, size_t i)
{
	int l = 0;

	/* Up until a word holds a set bit at or after our position... */
	for (;;) {
		if (l == h->nlev)
			return NONE;
		size_t w = i >> 6;
		if (w >= h->nw[l])
			return NONE;
		uint64_t bits = h->lv[l][w] & (~0ull << (i & 63));
		if (bits) {
			i = (w << 6) + (size_t)__builtin_ctzll(bits);
			break;
		}
		i = w + 1;	/* the next word of level l is bit w+1 of level l+1 */
		l++;
	}
	/* ...then down along first set bits. */
	while (l-- > 0)
		i = (i << 6) + (size_t)__builtin_ctzll(h->lv[l][i]);
	return i;
}

/* ---- name table ---- */

static uint64_t name_hash(const char *name, size_t len)
{
	return XXH3_64bits(name, len);
}

static size_t tab_find(const struct dir *d, const char *name, size_t len, uint64_t h)
{
	size_t mask = d->tcap - 1;

	for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
		const struct dent *e = d->tab[i];
		if (!e)
			return NONE;
		if (e->hash == h && e->namelen == len && !memcmp(e->name, name, len))
			return i;
	}
}

static void tab_put(struct dent **tab, size_t cap, struct dent *e)
{
	size_t mask = cap - 1, i = (size_t)e->hash & mask;

	while (tab[i])
		i = (i + 1) & mask;
	tab[i] = e;
}

static int tab_grow(struct dir *d)
{
	size_t cap = d->tcap * 2;
	struct dent **tab = calloc(cap, sizeof(*tab));

	if (!tab)
		return -ENOMEM;
	for (size_t i = 0; i < d->tcap; i++)
		if (d->tab[i])
			tab_put(tab, cap, d->tab[i]);
	free(d->tab);
	d->tab = tab;
	d->tcap = cap;
	return 0;
}

/* Backward-shift deletion keeps every probe chain unbroken. */
static void tab_remove(struct dir *d, size_t i)
{
	size_t mask = d->tcap - 1, j = i;

	for (;;) {
		j = (j + 1) & mask;
		if (!d->tab[j])
			break;
		size_t home = (size_t)d->tab[j]->hash & mask;
		bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
		if (stays)
			continue;
		d->tab[i] = d->tab[j];
		i = j;
	}
	d->tab[i] = NULL;
}

/* ---- cookie vector ---- */

/* Resize the vector to @cap slots, dropping dead slots; rebuilds the bitmap. */
static int vec_rebuild(struct dir *d, size_t cap)
{
	struct dent **ents = malloc(cap * sizeof(*ents));
	uint64_t *cks = malloc(cap * sizeof(*cks));
	struct hbits live = { .nlev = 0 };

	if (!ents || !cks || hb_alloc(&live, cap)) {
		free(ents);
		free(cks);
		return -ENOMEM;
	}
	size_t n = 0;
	for (size_t i = 0; i < d->nents; i++) {
		struct dent *e = d->ents[i];
		if (!e)
			continue;
		e->slot = n;
		ents[n] = e;
		cks[n] = e->cookie;
		hb_set(&live, n);
		n++;
	}
	free(d->ents);
	free(d->cks);
	hb_free(&d->live);
	d->ents = ents;
	d->cks = cks;
	d->live = live;
	d->nents = n;
	d->ecap = cap;
	d->ndead = 0;
	return 0;
}

/* ---- API ---- */

struct dir *dir_new(void)
{
	struct dir *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;
	d->tcap = 16;
	d->tab = calloc(d->tcap, sizeof(*d->tab));
	d->next_cookie = FIRST_COOKIE;
	if (!d->tab || vec_rebuild(d, 16)) {
		dir_free(d);
		return NULL;
	}
	return d;
}

void dir_free(struct dir *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->nents; i++)
		free(d->ents[i]);
	free(d->ents);
	free(d->cks);
	free(d->tab);
	hb_free(&d->live);
	free(d);
}

size_t dir_count(const struct dir *d)
{
	return d->count;
}

static int check_name(size_t namelen)
{
	if (!namelen)
		return -EINVAL;
	if (namelen > DIR_NAME_MAX)
		return -ENAMETOOLONG;
	return 0;
}

int dir_lookup(const struct dir *d, const char *name, size_t namelen, uint64_t *ino)
{
	if (check_name(namelen))
		return -ENOENT;
	size_t i = tab_find(d, name, namelen, name_hash(name, namelen));
	if (i == NONE)
		return -ENOENT;
	*ino = d->tab[i]->ino;
	return 0;
}

int dir_lookup_cookie(const struct dir *d, const char *name, size_t namelen, uint64_t *ino,
		      uint64_t *cookie)
{
	if (check_name(namelen))
		return -ENOENT;
	size_t i = tab_find(d, name, namelen, name_hash(name, namelen));
	if (i == NONE)
		return -ENOENT;
	*ino = d->tab[i]->ino;
	*cookie = d->tab[i]->cookie;
	return 0;
}

int dir_set_at(struct dir *d, const char *name, size_t namelen, uint64_t ino, uint64_t cookie,
	       uint8_t dtype)
{
	uint64_t old = d->next_cookie, cur;
	int ret;

	if (cookie < old || cookie == UINT64_MAX)
		return -EINVAL;
	if (dir_lookup(d, name, namelen, &cur) == 0)
		return -EEXIST;
	d->next_cookie = cookie;
	ret = dir_set(d, name, namelen, ino);
	if (ret)
		d->next_cookie = old;
	else	/* the new entry is the vector's last */
		d->ents[d->nents - 1]->dtype = dtype;
	return ret;
}

int dir_set(struct dir *d, const char *name, size_t namelen, uint64_t ino)
{
	int ret = check_name(namelen);
	if (ret)
		return ret;
	uint64_t h = name_hash(name, namelen);
	size_t i = tab_find(d, name, namelen, h);
	if (i != NONE) {
		d->tab[i]->ino = ino;	/* replace: the cookie stays */
		d->tab[i]->dtype = 0;	/* another inode: its type unknown */
		return 0;
	}

	/* Make room first so a failure leaves the directory unchanged. */
	if ((d->count + 1) * 2 > d->tcap && (ret = tab_grow(d)))
		return ret;
	if (d->nents == d->ecap) {
		size_t live = d->nents - d->ndead;
		size_t cap = live * 2 > d->ecap ? d->ecap * 2 : d->ecap;
		if ((ret = vec_rebuild(d, cap)))
			return ret;
	}
	struct dent *e = malloc(sizeof(*e) + namelen + 1);
	if (!e)
		return -ENOMEM;
	e->ino = ino;
	e->cookie = d->next_cookie++;
	e->hash = h;
	e->namelen = (uint16_t)namelen;
	e->dtype = 0;
	memcpy(e->name, name, namelen);
	e->name[namelen] = '\0';
	e->slot = d->nents++;
	d->ents[e->slot] = e;
	d->cks[e->slot] = e->cookie;
	hb_set(&d->live, e->slot);
	tab_put(d->tab, d->tcap, e);
	d->count++;
	return 0;
}

int dir_set_dtype(struct dir *d, const char *name, size_t namelen, uint8_t dtype)
{
	if (check_name(namelen))
		return -ENOENT;
	size_t i = tab_find(d, name, namelen, name_hash(name, namelen));
	if (i == NONE)
		return -ENOENT;
	d->tab[i]->dtype = dtype;
	return 0;
}

int dir_del(struct dir *d, const char *name, size_t namelen)
{
	if (check_name(namelen))
		return -ENOENT;
	size_t i = tab_find(d, name, namelen, name_hash(name, namelen));
	if (i == NONE)
		return -ENOENT;
	struct dent *e = d->tab[i];
	tab_remove(d, i);
	d->ents[e->slot] = NULL;
	hb_clear(&d->live, e->slot);
	d->ndead++;
	d->count--;
	free(e);
	/* Compact when the dead outnumber the live: amortized O(1) per delete.
	 * A failure only postpones it. */
	if (d->ndead > 64 && d->ndead > d->count) {
		size_t cap = d->count * 2 > 16 ? d->count * 2 : 16;
		(void)vec_rebuild(d, cap);
	}
	return 0;
}

int dir_next(const struct dir *d, uint64_t cookie, struct dir_ent *out)
{
	/* First slot whose cookie is >= cookie. */
	size_t lo = 0, hi = d->nents;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (d->cks[mid] < cookie)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo >= d->nents)
		return -ENOENT;
	size_t s = hb_next(&d->live, lo);
	if (s == NONE || s >= d->nents)
		return -ENOENT;
	const struct dent *e = d->ents[s];
	out->ino = e->ino;
	out->cookie = e->cookie;
	out->namelen = e->namelen;
	out->dtype = e->dtype;
	out->name = e->name;
	return 0;
}

uint64_t dir_end(const struct dir *d)
{
	return d->next_cookie;
}
