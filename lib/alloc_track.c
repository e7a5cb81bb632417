// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * alloc_track: taking the changes alloc.c records once alloc_track() is
 * called (alloc.h), for format v2's on-disk state (alloc_v2.c): the used
 * map's changed chunks and the runs whose reference counts changed.
 * Above alloc.c (reads its structures through alloc_i.h; alloc.c never
 * calls here).
 */
#include <errno.h>
#include <string.h>

#include "alloc_i.h"
#include "bmap.h"

static int track_area(struct alloc *a)
{
	uint64_t nchunks = ((a->total + (1ull << CHG_SHIFT) - 1) >> CHG_SHIFT);

	/* Whole cache lines of its own: every allocation and free reads it. */
	size_t bytes = ((nchunks + 63) / 64 * 8 + 63) & ~(size_t)63;

	a->chg = aligned_alloc(64, bytes);
	if (!a->chg)
		return -ENOMEM;
	memset(a->chg, 0, bytes);
	return 0;
}

int alloc_track(struct alloc *a)
{
	int ret = a->chg ? 0 : track_area(a);

	if (!ret && a->tail && !a->tail->chg)
		ret = track_area(a->tail);
	return ret;
}

static int run_cmp(const void *x, const void *y)
{
	const struct alloc_run *p = x, *q = y;

	return p->blk < q->blk ? -1 : p->blk > q->blk;
}

/* Sort runs and merge those that overlap or touch; returns the count. */
static size_t runs_merge(struct alloc_run *r, size_t n)
{
	size_t k = 0;

	if (!n)
		return 0;
	qsort(r, n, sizeof(*r), run_cmp);
	for (size_t i = 1; i < n; i++) {
		if (r[i].blk <= r[k].blk + r[k].n) {
			uint64_t e = r[i].blk + r[i].n;

			if (e > r[k].blk + r[k].n)
				r[k].n = e - r[k].blk;
		} else {
			r[++k] = r[i];
		}
	}
	return k + 1;
}

/* Append group @g's ref changes to *out (grown as needed); under g->mu. */
static int take_group_refs(struct alloc *a, struct ag *g, struct alloc_run **out, size_t *n,
			   size_t *cap)
{
	size_t more = g->rchg_all ? 1 : g->nrchg;

	if (!more)
		return 0;
	if (*n + more > *cap) {
		size_t c = (*n + more) * 2;
		struct alloc_run *r = realloc(*out, c * sizeof(*r));

		if (!r)
			return -ENOMEM;
		*out = r;
		*cap = c;
	}
	if (g->rchg_all)
		(*out)[*n] = (struct alloc_run){ a->start + g->gstart, g->gend - g->gstart };
	else
		memcpy(*out + *n, g->rchg, g->nrchg * sizeof(**out));
	*n += more;
	g->nrchg = 0;
	g->rchg_all = false;
	return 0;
}

int alloc_take_ref_changes(struct alloc *a, struct alloc_run **runs, size_t *n)
{
	struct alloc_run *out = NULL;
	size_t cnt = 0, cap = 0;
	int ret = 0;

	for (struct alloc *ar = a; ar && !ret; ar = ar->tail) {
		for (unsigned i = 0; i < ar->ngroups && !ret; i++) {
			pthread_mutex_lock(&ar->groups[i].mu);
			ret = take_group_refs(ar, &ar->groups[i], &out, &cnt, &cap);
			pthread_mutex_unlock(&ar->groups[i].mu);
		}
	}
	if (ret) {
		/* What was taken is changed still. */
		alloc_mark_ref_changes(a, out, cnt);
		free(out);
		return ret;
	}
	*n = runs_merge(out, cnt);
	*runs = out;
	return 0;
}

void alloc_mark_ref_changes(struct alloc *a, const struct alloc_run *runs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		for (uint64_t b = runs[i].blk; b < runs[i].blk + runs[i].n; b++) {
			struct alloc *ar = b >= tail_start(a) ? a->tail : a;
			struct ag *g;

			if (b < ar->start || b >= ar->end)
				continue;
			g = &ar->groups[group_of(ar, b - ar->start)];
			pthread_mutex_lock(&g->mu);
			rchg_mark(ar, g, b);
			pthread_mutex_unlock(&g->mu);
		}
	}
}

void alloc_mark_used_changes(struct alloc *a, const struct alloc_run *r, size_t n)
{
	/* A run may span both areas (the mount's whole data area does):
	 * each area marks only its own chunks, or its bitmap overflows. */
	for (size_t i = 0; i < n; i++) {
		uint64_t blk = r[i].blk, end = r[i].blk + r[i].n;

		while (blk < end) {
			struct alloc *ar = blk >= tail_start(a) ? a->tail : a;
			uint64_t lo = blk > ar->start ? blk : ar->start;
			uint64_t hi = ar == a && end > tail_start(a) ? tail_start(a) : end;

			if (hi > ar->start + ar->total)
				hi = ar->start + ar->total;
			if (lo >= hi)
				break;
			chg_mark(ar, lo - ar->start, hi - ar->start);
			blk = ar == a && end > tail_start(a) ? tail_start(a) : end;
		}
	}
}

int alloc_take_used_changes(struct alloc *a, struct alloc_run **runs, size_t *n)
{
	struct alloc_run *out = NULL;
	size_t cnt = 0, cap = 0;

	for (struct alloc *ar = a; ar; ar = ar->tail) {
		uint64_t nchunks = (ar->total + (1ull << CHG_SHIFT) - 1) >> CHG_SHIFT;

		for (uint64_t w = 0; ar->chg && w < (nchunks + 63) / 64; w++) {
			uint64_t bits = atomic_load(&ar->chg[w]) ? atomic_exchange(&ar->chg[w], 0) : 0;

			for (; bits; bits &= bits - 1) {
				uint64_t c = w * 64 + (uint64_t)__builtin_ctzll(bits);
				uint64_t s = c << CHG_SHIFT, e = s + (1ull << CHG_SHIFT);

				if (cnt == cap) {
					struct alloc_run *r = realloc(out, (cap ? cap * 2 : 64) * sizeof(*r));

					if (!r) {	/* mark them again: nothing is lost */
						atomic_fetch_or(&ar->chg[w], bits);
						alloc_mark_used_changes(a, out, cnt);
						free(out);
						return -ENOMEM;
					}
					out = r;
					cap = cap ? cap * 2 : 64;
				}
				out[cnt++] = (struct alloc_run){ ar->start + s,
					(e < ar->total ? e : ar->total) - s };
			}
		}
	}
	*n = runs_merge(out, cnt);
	*runs = out;
	return 0;
}

/* Copy @n bits from bit @so of @a's map to bit @dof of @dst (under the
 * lock of the group holding them). */
static void bits_copy(uint64_t *dst, uint64_t dof, const struct alloc *a, uint64_t so, uint64_t n)
{
	while (n) {
		uint64_t k = 64 - (dof & 63), v;

		if (64 - (so & 63) < k)
			k = 64 - (so & 63);
		if (n < k)
			k = n;
		v = (cw_get(a, so >> 6) >> (so & 63)) & (k == 64 ? ~0ull : (1ull << k) - 1);
		dst[dof >> 6] = (dst[dof >> 6] & ~(word_mask(dof, dof + k))) | (v << (dof & 63));
		dof += k;
		so += k;
		n -= k;
	}
}

void alloc_used_words(struct alloc *a, uint64_t blk, size_t nwords, uint64_t *out)
{
	uint64_t end = blk + 64 * (uint64_t)nwords;

	memset(out, 0xff, nwords * 8);
	for (struct alloc *ar = a; ar; ar = ar->tail) {
		uint64_t s = blk > ar->start ? blk : ar->start, e = end < ar->end ? end : ar->end;

		while (s < e) {
			struct ag *g = &ar->groups[group_of(ar, s - ar->start)];
			uint64_t ge = ar->start + g->gend < e ? ar->start + g->gend : e;

			pthread_mutex_lock(&g->mu);
			bits_copy(out, s - blk, ar, s - ar->start, ge - s);
			pthread_mutex_unlock(&g->mu);
			s = ge;
		}
	}
}

