// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * alloc_v2: alloc.c's reference counts and used map written to format
 * v2's trees (see alloc_v2.h).  Above alloc.c, alloc_track.c, fspace.c,
 * btree.c and v2item.c; none of them calls here.
 *
 * A changed run of reference counts [lo, hi) is written as a window: the
 * REFCOUNT items overlapping or touching it are read, the new items of
 * the window are those items' parts outside [lo, hi) (unchanged since the
 * last write) joined with the allocator's counts inside it, merged into
 * maximal runs of equal counts, and only the items that differ are
 * deleted or inserted.  So a write costs the changed blocks plus the items
 * around them, whatever the size of the runs that stay shared.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_v2.h"
#include "v2item.h"

#define REF_PIECE 65536u		/* blocks of one window at most */
#define USED_PIECE 64u			/* words per fspace_set_words */

struct alloc_v2 {
	struct alloc *a;
	struct fspace *fs;
	struct btree *refs;
	struct alloc_run *pend;		/* runs written in the open transaction */
	size_t npend;
	/* References changed since alloc_v2_refs_kept/_undo (alloc_v2_ref):
	 * blocks, count and sign, to take back when the INODES tree's
	 * transaction that made them is aborted. */
	struct { uint64_t blk, n; int sign; } *jrn;
	size_t njrn, capjrn;
	_Atomic uint64_t jrn_bytes;	/* capjrn's, read by the dirty budget */
	struct alloc_v2_stats st;
};

/* One REFCOUNT item: [s, s + n) shared by refs. */
struct rc {
	uint64_t s, n;
	uint32_t refs;
};

struct rcvec {
	struct rc *v;
	size_t n, cap;
};

int alloc_v2_create(struct alloc *a, struct fspace *fs, struct btree *refs,
		    struct alloc_v2 **out)
{
	struct alloc_v2 *v = calloc(1, sizeof(*v));
	int ret;

	if (!v)
		return -ENOMEM;
	ret = alloc_track(a);
	if (ret) {
		free(v);
		return ret;
	}
	v->a = a;
	v->fs = fs;
	v->refs = refs;
	*out = v;
	return 0;
}

void alloc_v2_destroy(struct alloc_v2 *v)
{
	if (!v)
		return;
	free(v->pend);
	free(v->jrn);
	free(v);
}

static int rc_push(struct rcvec *r, uint64_t s, uint64_t n, uint32_t refs)
{
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 16;
		struct rc *nv = realloc(r->v, cap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		r->v = nv;
		r->cap = cap;
	}
	r->v[r->n++] = (struct rc){ s, n, refs };
	return 0;
}

/* Append [s, s + n) at @refs to the sorted list, joining the last run when
 * it touches with the same count (an item holds at most UINT32_MAX). */
static int rc_emit(struct rcvec *r, uint64_t s, uint64_t n, uint32_t refs)
{
	struct rc *last = r->n ? &r->v[r->n - 1] : NULL;
	int ret = 0;

	if (refs < 2 || !n)
		return 0;
	if (last && last->s + last->n == s && last->refs == refs && last->n < UINT32_MAX) {
		uint64_t k = UINT32_MAX - last->n < n ? UINT32_MAX - last->n : n;

		last->n += k;
		s += k;
		n -= k;
	}
	while (n && !ret) {
		uint64_t k = n < UINT32_MAX ? n : UINT32_MAX;

		ret = rc_push(r, s, k, refs);
		s += k;
		n -= k;
	}
	return ret;
}

static int rc_decode(const struct bkey *k, const void *val, unsigned len, struct rc *out)
{
	uint32_t n, refs;
	int ret = v2_refcount_decode(k, val, len, &n, &refs);

	*out = (struct rc){ k->id, n, refs };
	return ret;
}

/* The items that overlap or touch [lo, hi), in order, into @old. */
static int read_window(struct alloc_v2 *v, uint64_t lo, uint64_t hi, struct rcvec *old)
{
	struct bt_iter it;
	struct bkey k;
	const void *val;
	unsigned len;
	struct rc r;
	int ret;

	ret = bt_iter_init(&it, v->refs, &(struct bkey){ lo, 0, 0 });
	if (!ret)
		ret = bt_iter_prev(&it, &k, &val, &len);
	if (!ret) {
		v->st.ref_items_read++;
		ret = rc_decode(&k, val, len, &r);
		if (!ret && r.s + r.n >= lo)
			ret = rc_push(old, r.s, r.n, r.refs);
	}
	bt_iter_free(&it);
	if (ret && ret != -ENOENT)
		return ret;
	ret = bt_iter_init(&it, v->refs, &(struct bkey){ lo, 0, 0 });
	while (!ret && !(ret = bt_iter_next(&it, &k, &val, &len))) {
		struct rc *last = old->n ? &old->v[old->n - 1] : NULL;

		v->st.ref_items_read++;
		ret = rc_decode(&k, val, len, &r);
		if (ret)
			break;
		/* Past hi only a full item's continuation can join the window. */
		if (r.s > hi && !(last && last->s + last->n == r.s && last->n == UINT32_MAX))
			break;
		if (last && r.s < last->s + last->n)
			ret = -EUCLEAN;	/* overlapping items */
		else
			ret = rc_push(old, r.s, r.n, r.refs);
	}
	bt_iter_free(&it);
	return ret == -ENOENT ? 0 : ret;
}

/* The window's new items: @old outside [lo, hi), the allocator inside. */
static int build_window(struct alloc_v2 *v, uint64_t lo, uint64_t hi, const struct rcvec *old,
			struct rcvec *nw)
{
	uint32_t *cnt = malloc((hi - lo) * sizeof(*cnt));
	int ret = cnt ? 0 : -ENOMEM;

	for (size_t i = 0; i < old->n && !ret; i++)
		if (old->v[i].s < lo)
			ret = rc_emit(nw, old->v[i].s,
				      (old->v[i].s + old->v[i].n < lo ? old->v[i].s + old->v[i].n : lo) -
					      old->v[i].s, old->v[i].refs);
	if (!ret) {
		alloc_refs_run(v->a, lo, hi - lo, cnt);
		v->st.ref_blocks += hi - lo;
	}
	for (uint64_t b = lo; b < hi && !ret;) {
		uint64_t e = b + 1;

		while (e < hi && cnt[e - lo] == cnt[b - lo])
			e++;
		ret = rc_emit(nw, b, e - b, cnt[b - lo]);
		b = e;
	}
	for (size_t i = 0; i < old->n && !ret; i++) {
		uint64_t s = old->v[i].s > hi ? old->v[i].s : hi, e = old->v[i].s + old->v[i].n;

		if (e > s)
			ret = rc_emit(nw, s, e - s, old->v[i].refs);
	}
	free(cnt);
	return ret;
}

static int put_item(struct alloc_v2 *v, const struct rc *r)
{
	uint8_t val[V2_REFCOUNT_LEN];
	struct bkey k = v2_key_refcount(r->s);
	int ret = v2_refcount_encode(r->s, (uint32_t)r->n, r->refs, val);

	v->st.ref_items_written++;
	return ret ? ret : bt_insert(v->refs, &k, val, sizeof(val));
}

/* Change the tree from @old to @nw (both sorted): only what differs. */
static int apply_window(struct alloc_v2 *v, const struct rcvec *old, const struct rcvec *nw)
{
	size_t i = 0, j = 0;
	int ret = 0;

	while (!ret && (i < old->n || j < nw->n)) {
		const struct rc *o = i < old->n ? &old->v[i] : NULL;
		const struct rc *n = j < nw->n ? &nw->v[j] : NULL;

		if (o && n && o->s == n->s) {
			if (o->n != n->n || o->refs != n->refs)
				ret = put_item(v, n);	/* replaces the value */
			i++;
			j++;
		} else if (o && (!n || o->s < n->s)) {
			struct bkey k = v2_key_refcount(o->s);

			v->st.ref_items_written++;
			ret = bt_delete(v->refs, &k);
			i++;
		} else {
			ret = put_item(v, n);
			j++;
		}
	}
	return ret;
}

static int write_window(struct alloc_v2 *v, uint64_t lo, uint64_t hi)
{
	struct rcvec old = { 0 }, nw = { 0 };
	int ret = read_window(v, lo, hi, &old);

	if (!ret)
		ret = build_window(v, lo, hi, &old, &nw);
	if (!ret)
		ret = apply_window(v, &old, &nw);
	free(old.v);
	free(nw.v);
	return ret;
}

int alloc_v2_write_refs(struct alloc_v2 *v)
{
	struct alloc_run *r, *all;
	size_t n;
	int ret = alloc_take_ref_changes(v->a, &r, &n);

	if (ret || !n)
		return ret;
	/* Pending first, so an abort marks them changed again whatever fails. */
	all = realloc(v->pend, (v->npend + n) * sizeof(*all));
	if (!all) {
		alloc_mark_ref_changes(v->a, r, n);
		free(r);
		return -ENOMEM;
	}
	memcpy(all + v->npend, r, n * sizeof(*r));
	v->pend = all;
	v->npend += n;
	for (size_t i = 0; i < n && !ret; i++)
		for (uint64_t s = r[i].blk; s < r[i].blk + r[i].n && !ret; s += REF_PIECE) {
			uint64_t e = r[i].blk + r[i].n - s > REF_PIECE ? s + REF_PIECE : r[i].blk + r[i].n;

			ret = write_window(v, s, e);
		}
	free(r);
	return ret;
}

void alloc_v2_refs_done(struct alloc_v2 *v)
{
	free(v->pend);
	v->pend = NULL;
	v->npend = 0;
}

void alloc_v2_refs_abort(struct alloc_v2 *v)
{
	alloc_mark_ref_changes(v->a, v->pend, v->npend);
	alloc_v2_refs_done(v);
}

static int load_refs(struct alloc_v2 *v, struct alloc *a)
{
	struct bt_iter it;
	struct bkey k;
	const void *val;
	unsigned len;
	uint64_t end = 0;
	struct rc r;
	int ret;

	ret = bt_iter_init(&it, v->refs, &(struct bkey){ 0, 0, 0 });
	while (!ret && !(ret = bt_iter_next(&it, &k, &val, &len))) {
		ret = rc_decode(&k, val, len, &r);
		if (!ret && r.s < end)
			ret = -EUCLEAN;
		if (!ret)
			ret = alloc_set_refs(a, r.s, r.n, r.refs);
		end = r.s + r.n;
	}
	bt_iter_free(&it);
	return ret == -ENOENT ? 0 : ret;
}

int alloc_v2_load_refs(struct alloc_v2 *v)
{
	return load_refs(v, v->a);
}

/* Forget the changes recorded so far (the trees hold them). */
static int drop_changes(struct alloc *a)
{
	struct alloc_run *r;
	size_t n;
	int ret = alloc_take_used_changes(a, &r, &n);

	if (!ret)
		free(r);
	if (!ret)
		ret = alloc_take_ref_changes(a, &r, &n);
	if (!ret)
		free(r);
	return ret;
}

static int use_run(void *ctx, uint64_t blk, uint64_t n)
{
	return alloc_use(ctx, blk, n);
}

/* The used map and the counts of the trees into @a (nothing in use): one
 * alloc_use per run of used blocks, wholly used or free groups from their
 * summaries (fspace_used_runs), so the time follows the runs and the mixed
 * groups, not the size of the area. */
static int load_into(struct alloc_v2 *v, struct alloc *a)
{
	int ret = fspace_used_runs(v->fs, use_run, a);

	return ret ? ret : load_refs(v, a);
}

int alloc_v2_load(struct alloc_v2 *v)
{
	int ret = load_into(v, v->a);

	return ret ? ret : drop_changes(v->a);
}

int alloc_v2_load_other(struct alloc_v2 *v, struct alloc *a)
{
	return load_into(v, a);
}

static int jrn_push(struct alloc_v2 *v, uint64_t blk, uint64_t n, int sign)
{
	if (v->njrn == v->capjrn) {
		size_t cap = v->capjrn ? v->capjrn * 2 : 64;
		void *nj = realloc(v->jrn, cap * sizeof(*v->jrn));

		if (!nj)
			return -ENOMEM;
		v->jrn = nj;
		v->capjrn = cap;
		atomic_store(&v->jrn_bytes, cap * sizeof(*v->jrn));
	}
	v->jrn[v->njrn].blk = blk;
	v->jrn[v->njrn].n = n;
	v->jrn[v->njrn].sign = sign;
	v->njrn++;
	return 0;
}

int alloc_v2_ref(struct alloc_v2 *v, uint64_t blk, uint64_t n, int sign)
{
	int ret;

	if (!n)
		return 0;
	if (sign > 0) {
		ret = alloc_use(v->a, blk, n);
		if (ret)
			return ret;
	} else {
		/* A block the trees do not count is a bug (or damage): fail
		 * the checkpoint rather than write a count below what the
		 * items say. */
		for (uint64_t b = blk; b < blk + n; b++)
			if (!alloc_refs(v->a, b))
				return -EUCLEAN;
		alloc_put(v->a, blk, n);
	}
	v->st.refs_changed += n;
	ret = jrn_push(v, blk, n, sign);
	if (ret) {
		if (sign > 0)
			alloc_put(v->a, blk, n);
		else
			(void)alloc_use(v->a, blk, n);	/* taken just now: room for it */
	}
	return ret;
}

/* A checkpoint's part may change a million references (24 bytes each); the
 * array it grew goes with it, or its peak stays in the daemon for good. */
#define JRN_KEEP 4096u

void alloc_v2_refs_kept(struct alloc_v2 *v)
{
	v->njrn = 0;
	if (v->capjrn > JRN_KEEP) {
		free(v->jrn);
		v->jrn = NULL;
		v->capjrn = 0;
		atomic_store(&v->jrn_bytes, 0);
	}
}

uint64_t alloc_v2_mem_bytes(struct alloc_v2 *v)
{
	return atomic_load(&v->jrn_bytes);
}

void alloc_v2_refs_undo(struct alloc_v2 *v)
{
	while (v->njrn) {
		v->njrn--;
		if (v->jrn[v->njrn].sign > 0)
			alloc_put(v->a, v->jrn[v->njrn].blk, v->jrn[v->njrn].n);
		else
			(void)alloc_use(v->a, v->jrn[v->njrn].blk, v->jrn[v->njrn].n);
	}
}

/* One word of @a's and @b's used maps and their counts differ first at
 * *blk (in [s, s + 64 nw)); -ESRCH with *blk when they differ. */
int alloc_v2_compare(struct alloc *a, struct alloc *b, uint64_t s, uint64_t e, uint64_t *blk,
		     uint32_t *ca, uint32_t *cb)
{
	uint64_t wa[USED_PIECE], wb[USED_PIECE];
	uint32_t *ra = malloc(64 * USED_PIECE * sizeof(*ra));
	uint32_t *rb = malloc(64 * USED_PIECE * sizeof(*rb));
	int ret = ra && rb ? 0 : -ENOMEM;

	for (uint64_t p = s; p < e && !ret; p += 64 * USED_PIECE) {
		uint64_t n = e - p < 64 * USED_PIECE ? e - p : 64 * USED_PIECE;

		alloc_used_words(a, p, (size_t)((n + 63) / 64), wa);
		alloc_used_words(b, p, (size_t)((n + 63) / 64), wb);
		alloc_refs_run(a, p, n, ra);
		alloc_refs_run(b, p, n, rb);
		for (uint64_t i = 0; i < n && !ret; i++)
			if (ra[i] != rb[i] || ((wa[i / 64] ^ wb[i / 64]) >> (i % 64) & 1)) {
				*blk = p + i;
				*ca = ra[i];
				*cb = rb[i];
				ret = -ESRCH;
			}
	}
	free(ra);
	free(rb);
	return ret;
}

/* Copy the allocator's map of [s, e) (s at a word of fspace's map). */
static int sync_range(struct alloc_v2 *v, uint64_t s, uint64_t e)
{
	uint64_t words[USED_PIECE];
	int ret = 0;

	while (s < e && !ret) {
		size_t nw = (e - s + 63) / 64 < USED_PIECE ? (size_t)((e - s + 63) / 64) : USED_PIECE;

		alloc_used_words(v->a, s, nw, words);
		ret = fspace_set_words(v->fs, s, nw, words);
		v->st.used_words += nw;
		s += 64 * (uint64_t)nw;
	}
	return ret;
}

int alloc_v2_sync_free(struct alloc_v2 *v)
{
	uint64_t fstart, fend;
	struct alloc_run *r;
	size_t n, i;
	int ret;

	/* Frees that waited for memory go into this checkpoint if they can. */
	alloc_retry_frees(v->a);
	ret = alloc_take_used_changes(v->a, &r, &n);

	if (ret)
		return ret;
	fspace_data_area(v->fs, &fstart, &fend);
	for (i = 0; i < n && !ret; i++) {
		uint64_t s = r[i].blk > fstart ? r[i].blk : fstart;
		uint64_t e = r[i].blk + r[i].n < fend ? r[i].blk + r[i].n : fend;

		if (s < e)
			ret = sync_range(v, fstart + ((s - fstart) & ~63ull), e);
	}
	if (ret)	/* the failed run and those after it stay changed */
		alloc_mark_used_changes(v->a, r + i - 1, n - i + 1);
	free(r);
	return ret;
}

void alloc_v2_stats(struct alloc_v2 *v, struct alloc_v2_stats *st)
{
	*st = v->st;
}
