// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fsck_v2_data: the data copies of a format-v2 image (fsck_v2_i.h), as
 * version 1's data pass checks them (fsck_data.c's fsck_data_run does the
 * reading, verifying, reporting and rewriting for both formats).
 *
 * The EXTENT items of the INODES tree are walked in key order, after the
 * tree walks (every node is then verified); each written block's csum is
 * checked on every device, a stale one too (fsck_data_run never takes it
 * as the source; fsck_v2_stale.c), reading runs of up to FSCK_RUN_BLOCKS
 * consecutive physical blocks with one read per device.  With -y/-p a bad
 * copy is rewritten from one that verifies; a block no copy verifies is an
 * error left, named by inode and offset.  Memory: one run, plus, when the
 * refcount tree holds any item (reflinked blocks), one bit per data-area
 * block so a shared block is read once.
 *
 * The trees are the checkpoint's; the log after it is replayed by the next
 * mount.  A block the checkpoint maps may have been freed by a record in
 * that log (an overwrite, a truncate, a delete: copy-on-write frees the
 * old block once the record is durable, and it may then be reused or
 * discarded), so the ranges the log's records change (check_log feeds
 * them to v2data_note) are not checked against the checkpoint: what it
 * says of them is no longer what the file holds.  Every other block the
 * checkpoint maps is still referenced, so its checksum must verify.  The
 * log's own map is checked instead (log_blocks): for each file block the
 * newest record that changes it, when that is a written LR_EXT_SET, gives
 * the block and checksum the replay will map (a record is durable only
 * after its data is, on every in-sync device).  Both cost memory in
 * proportion to the log (its records and their checksums), never to the
 * file system.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bmap.h"
#include "fsck_v2_i.h"
#include "le.h"

struct v2touch {
	uint64_t ino, from, to;		/* file blocks [from, to) */
};

/* The log's own map: every record that changes file blocks, in log order
 * (idx), and for a written LR_EXT_SET its blocks and checksums, so the
 * blocks each file holds at the end of the log are checked too. */
struct lev {
	uint64_t ino, from, to, idx;
	size_t set;			/* 1 + its index in sets; 0: not a written set */
};

struct lset {
	uint64_t phys;
	size_t coff;			/* its first csum in csums */
};

struct v2lmap {
	struct lev *ev;
	size_t nev, capev;
	struct lset *sets;
	size_t nsets, capsets;
	uint64_t *csums;
	size_t ncsums, capcsums;
	uint64_t idx;
	bool lost;			/* no memory: the log's blocks are not checked */
};

/* Room for one more of n elements of size sz in *p (capacity *cap). */
static bool grow(void **p, size_t *cap, size_t n, size_t sz)
{
	size_t nc = *cap ? *cap : 256;
	void *np;

	if (n <= *cap)
		return true;
	while (nc < n)
		nc *= 2;
	np = realloc(*p, nc * sz);
	if (!np)
		return false;
	*p = np;
	*cap = nc;
	return true;
}

static void lmap_note(struct v2ck *v, uint64_t ino, uint64_t from, uint64_t to,
		      const struct log_rec *set)
{
	struct v2lmap *m = v->lmap;
	size_t si = 0;

	if (!m) {
		m = v->lmap = calloc(1, sizeof(*m));
		if (!m)
			return;		/* lmap NULL after a record: lost (below) */
	}
	if (m->lost || from >= to)
		return;
	if (set) {
		uint32_t n = set->ext.n;

		if (!grow((void **)&m->sets, &m->capsets, m->nsets + 1, sizeof(*m->sets)) ||
		    !grow((void **)&m->csums, &m->capcsums, m->ncsums + n, sizeof(*m->csums))) {
			m->lost = true;
			return;
		}
		m->sets[m->nsets] = (struct lset){ .phys = set->ext.phys, .coff = m->ncsums };
		for (uint32_t i = 0; i < n; i++)
			m->csums[m->ncsums + i] =
				le64_get((const uint8_t *)set->ext.csums + 8 * (size_t)i);
		m->ncsums += n;
		si = ++m->nsets;
	}
	if (!grow((void **)&m->ev, &m->capev, m->nev + 1, sizeof(*m->ev))) {
		m->lost = true;
		return;
	}
	m->ev[m->nev++] = (struct lev){ .ino = ino, .from = from, .to = to, .idx = m->idx++,
					.set = si };
}

static void touch(struct v2ck *v, uint64_t ino, uint64_t from, uint64_t to)
{
	struct v2touch *t = v->touch;

	if (v->touch_lost || from >= to)
		return;
	/* Consecutive records of one file mostly extend the last range. */
	if (v->ntouch && t[v->ntouch - 1].ino == ino && from <= t[v->ntouch - 1].to &&
	    to >= t[v->ntouch - 1].from) {
		if (from < t[v->ntouch - 1].from)
			t[v->ntouch - 1].from = from;
		if (to > t[v->ntouch - 1].to)
			t[v->ntouch - 1].to = to;
		return;
	}
	if (v->ntouch == v->captouch) {
		size_t nc = v->captouch ? v->captouch * 2 : 256;

		t = realloc(v->touch, nc * sizeof(*t));
		if (!t) {
			v->touch_lost = true;
			return;
		}
		v->touch = t;
		v->captouch = nc;
	}
	v->touch[v->ntouch++] = (struct v2touch){ ino, from, to };
}

void v2data_note(struct v2ck *v, const struct log_rec *r)
{
	uint64_t ino, from, to;
	const struct log_rec *set = NULL;

	switch (r->type) {
	case LR_INODE_DEL:
		ino = r->del.ino;
		from = 0;
		to = UINT64_MAX;
		break;
	case LR_EXT_SET:
		ino = r->ext.ino;
		from = r->ext.fblk;
		to = r->ext.n > UINT64_MAX - from ? UINT64_MAX : from + r->ext.n;
		if (r->ext.csums && !(r->ext.phys & EXTENT_UNWRITTEN))
			set = r;
		break;
	case LR_EXT_CLEAR:
		ino = r->clr.ino;
		from = r->clr.fblk;
		to = r->clr.n > UINT64_MAX - from ? UINT64_MAX : from + r->clr.n;
		break;
	default:
		return;
	}
	touch(v, ino, from, to);
	lmap_note(v, ino, from, to, set);
	if (!v->lmap)
		v->lmap_lost = true;
}

static int touch_cmp(const void *a, const void *b)
{
	const struct v2touch *x = a, *y = b;

	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	return x->from < y->from ? -1 : x->from > y->from;
}

/* Sorted by (ino, from), overlapping ranges merged. */
static void touch_sort(struct v2ck *v)
{
	size_t k = 0;

	if (!v->ntouch)
		return;
	qsort(v->touch, v->ntouch, sizeof(*v->touch), touch_cmp);
	for (size_t i = 1; i < v->ntouch; i++) {
		struct v2touch *p = &v->touch[k], *t = &v->touch[i];

		if (t->ino == p->ino && t->from <= p->to) {
			if (t->to > p->to)
				p->to = t->to;
		} else {
			v->touch[++k] = *t;
		}
	}
	v->ntouch = k + 1;
}

/* Whether the log changes file block @fblk of @ino. */
static bool touched(const struct v2ck *v, uint64_t ino, uint64_t fblk)
{
	size_t lo = 0, hi = v->ntouch;

	/* The last range starting at or before (ino, fblk). */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct v2touch *t = &v->touch[mid];

		if (t->ino < ino || (t->ino == ino && t->from <= fblk))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && v->touch[lo - 1].ino == ino && fblk < v->touch[lo - 1].to;
}

struct drun {
	struct v2ck *v;
	uint8_t *bufs[DEV_MAX];
	struct bref ent[FSCK_RUN_BLOCKS];
	const struct bref *ptr[FSCK_RUN_BLOCKS];
	uint32_t n;
	uint64_t *seen;			/* shared blocks: one bit per data block */
	uint64_t lo, hi;		/* the data area */
	uint64_t checked, skipped, logged;
};

static void run_flush(struct drun *d)
{
	fsck_data_run(d->v->c, d->ptr, d->n, d->bufs);
	d->checked += d->n;
	d->n = 0;
}

static void run_add(struct drun *d, uint64_t ino, uint64_t fblk, uint64_t phys, uint64_t csum)
{
	if (d->n && (d->n == FSCK_RUN_BLOCKS || d->ent[d->n - 1].phys + 1 != phys))
		run_flush(d);
	d->ent[d->n] = (struct bref){ .phys = phys, .csum = csum, .ino = ino, .fblk = fblk };
	d->ptr[d->n] = &d->ent[d->n];
	d->n++;
}

/* One block that must verify: in a run, unless outside the data area
 * (fsck_v2_meta reports it) or a shared block already checked. */
static void check_block(struct drun *d, uint64_t ino, uint64_t fblk, uint64_t phys,
			uint64_t csum)
{
	if (phys < d->lo || phys >= d->hi) {
		run_flush(d);
		return;
	}
	if (d->seen) {
		uint64_t b = phys - d->lo;

		if (bm_count(d->seen, b, b + 1)) {
			run_flush(d);
			return;
		}
		bm_set(d->seen, b, b + 1);
	}
	run_add(d, ino, fblk, phys, csum);
}

/* One EXTENT item: its written blocks the log does not change. */
static void data_extent(struct drun *d, const struct bkey *k, const void *val, unsigned len)
{
	struct v2_extent e;

	if (v2_extent_decode(k, val, len, &e) || e.unwritten)
		return;		/* a bad item is check_item's; unwritten: no data */
	for (uint32_t i = 0; i < e.n; i++) {
		if (touched(d->v, k->id, k->off + i)) {
			d->skipped++;
			run_flush(d);
			continue;
		}
		check_block(d, k->id, k->off + i, e.phys + i, v2_extent_csum(&e, i));
	}
}

static int lev_cmp(const void *a, const void *b)
{
	const struct lev *x = a, *y = b;

	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	return x->idx > y->idx ? -1 : x->idx < y->idx;	/* newest first */
}

static int u64_cmp(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;

	return *x < *y ? -1 : *x > *y;
}

/* The first position of @x in the sorted pts[0..n) (it is there). */
static size_t pt_find(const uint64_t *pts, size_t n, uint64_t x)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (pts[mid] < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The first segment >= s not painted yet (path halving). */
static size_t seg_next(size_t *next, size_t s)
{
	while (next[s] != s) {
		next[s] = next[next[s]];
		s = next[s];
	}
	return s;
}

/* One file's records of the log, ev[0..n) newest first: cut the file
 * blocks at every record's ends into segments, give each segment to the
 * newest record covering it (each painted once: a union-find over the
 * segments), and check the blocks of the segments a written LR_EXT_SET
 * got: what the file holds once the log is replayed.  0 or -ENOMEM. */
static int log_file(struct drun *d, const struct lev *ev, size_t n)
{
	const struct v2lmap *m = d->v->lmap;
	size_t np = 0, *next = NULL, *own = NULL;
	uint64_t *pts = malloc(2 * n * sizeof(*pts));
	int ret = -ENOMEM;

	if (!pts)
		return ret;
	for (size_t i = 0; i < n; i++) {
		pts[2 * i] = ev[i].from;
		pts[2 * i + 1] = ev[i].to;
	}
	qsort(pts, 2 * n, sizeof(*pts), u64_cmp);
	for (size_t i = 0; i < 2 * n; i++)
		if (!np || pts[np - 1] != pts[i])
			pts[np++] = pts[i];
	next = malloc(np * sizeof(*next));
	own = malloc(np * sizeof(*own));
	if (!next || !own)
		goto out;
	for (size_t s = 0; s < np; s++) {
		next[s] = s;		/* segment s = [pts[s], pts[s + 1]); np - 1: end */
		own[s] = SIZE_MAX;
	}
	for (size_t i = 0; i < n; i++) {
		size_t hi = pt_find(pts, np, ev[i].to);

		for (size_t s = seg_next(next, pt_find(pts, np, ev[i].from)); s < hi;
		     s = seg_next(next, s)) {
			own[s] = i;
			next[s] = s + 1;
		}
	}
	for (size_t s = 0; s + 1 < np; s++) {
		const struct lev *e;
		const struct lset *ls;

		if (own[s] == SIZE_MAX || !ev[own[s]].set)
			continue;
		e = &ev[own[s]];
		ls = &m->sets[e->set - 1];
		for (uint64_t f = pts[s]; f < pts[s + 1]; f++) {
			d->logged++;
			check_block(d, e->ino, f, ls->phys + (f - e->from),
				    m->csums[ls->coff + (f - e->from)]);
		}
	}
	ret = 0;
out:
	free(pts);
	free(next);
	free(own);
	return ret;
}

/* The blocks the log after the checkpoint maps, as its replay leaves
 * them (the checkpoint's walk skipped every range the log changes). */
static void log_blocks(struct drun *d)
{
	struct v2lmap *m = d->v->lmap;

	if (!m || !m->nev)
		return;
	qsort(m->ev, m->nev, sizeof(*m->ev), lev_cmp);
	for (size_t s = 0, e; s < m->nev; s = e) {
		for (e = s + 1; e < m->nev && m->ev[e].ino == m->ev[s].ino; e++)
			;
		if (log_file(d, &m->ev[s], e - s) < 0) {
			d->v->data_partial = true;
			fsck_say(d->v->c, "data copies the log maps not all checked: %s",
				 strerror(ENOMEM));
			return;
		}
	}
}

void v2data_check(struct v2ck *v)
{
	struct fck *c = v->c;
	struct drun *d;
	struct bt_iter it;
	struct btree t;
	struct bkey k;
	const void *val;
	unsigned len;
	int ret;

	v->data_partial = true;		/* until the walk below ends well */
	if (v->tree_bad[V2_TREE_INODES]) {
		/* reported: its EXTENT items cannot all be reached */
		fsck_say(c, "data copies not checked: the inodes tree is damaged");
		return;
	}
	if (v->log_unread || v->touch_lost) {
		fsck_say(c, "data copies not checked: %s", v->touch_lost ?
			 "no memory for what the log after the checkpoint changes" :
			 "the log after the checkpoint could not be read");
		return;
	}
	touch_sort(v);
	d = calloc(1, sizeof(*d));
	if (!d || fsck_data_bufs(c, d->bufs) < 0) {
		free(d);
		fsck_hard_problem(c, "data check stopped: %s", strerror(ENOMEM));
		return;
	}
	d->v = v;
	d->lo = v->sb->node_start + v->sb->node_blocks;
	d->hi = v->sb->total_blocks;
	if (v->shared_items && d->hi > d->lo)
		d->seen = calloc((d->hi - d->lo + 63) / 64, 8);	/* NULL: read twice */

	/* Nodes were checked on every copy by the walks: one copy now. */
	v->s.all_copies = false;
	ret = bt_open(&t, &v->rec, v->cache, V2_TREE_INODES, v->sb->fs_uuid,
		      &v->sb->roots[V2_TREE_INODES - 1]);
	if (ret == 0) {
		ret = bt_iter_init(&it, &t, &bkey_min);
		while (ret == 0 && (ret = bt_iter_next(&it, &k, &val, &len)) == 0)
			if (k.type == V2_EXTENT)
				data_extent(d, &k, val, len);
		bt_iter_free(&it);
		bt_close(&t);
	}
	if (ret != -ENOENT)
		fsck_hard_problem(c, "data check stopped: %s", strerror(-ret));
	v->data_partial = ret != -ENOENT;
	if (v->lmap_lost || (v->lmap && v->lmap->lost)) {
		fsck_say(c, "data copies the log maps not checked: %s", strerror(ENOMEM));
		v->data_partial = true;
	} else {
		log_blocks(d);
	}
	run_flush(d);
	fsck_data_flush(c);
	if (c->o->verbose)
		fsck_say(c, "data: %llu blocks checked on every copy (%llu the log after the "
			 "checkpoint maps), %llu blocks the checkpoint maps there not",
			 (unsigned long long)d->checked, (unsigned long long)d->logged,
			 (unsigned long long)d->skipped);
	fsck_data_bufs_free(d->bufs);
	free(d->seen);
	free(d);
}

void v2data_free(struct v2ck *v)
{
	if (v->lmap) {
		free(v->lmap->ev);
		free(v->lmap->sets);
		free(v->lmap->csums);
		free(v->lmap);
		v->lmap = NULL;
	}
	free(v->touch);
	v->touch = NULL;
	v->ntouch = v->captouch = 0;
}
