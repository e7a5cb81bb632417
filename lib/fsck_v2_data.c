// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fsck_v2_data: the data copies of a format-v2 image (fsck_v2_i.h), as
 * version 1's data pass checks them (fsck_data.c's fsck_data_run does the
 * reading, verifying, reporting and rewriting for both formats).
 *
 * The EXTENT items of the INODES tree are walked in key order, after the
 * tree walks (every node is then verified); each written block's csum is
 * checked on every in-sync device, reading runs of up to FSCK_RUN_BLOCKS
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
 * them to v2data_note) are not checked: what the checkpoint says of them
 * is no longer what the file holds.  Every other block the checkpoint maps
 * is still referenced, so its checksum must verify.  The set costs memory
 * in proportion to the log, never to the file system.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bmap.h"
#include "fsck_v2_i.h"

struct v2touch {
	uint64_t ino, from, to;		/* file blocks [from, to) */
};

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
	switch (r->type) {
	case LR_INODE_DEL:
		touch(v, r->del.ino, 0, UINT64_MAX);
		break;
	case LR_EXT_SET:
		touch(v, r->ext.ino, r->ext.fblk, r->ext.n > UINT64_MAX - r->ext.fblk ?
		      UINT64_MAX : r->ext.fblk + r->ext.n);
		break;
	case LR_EXT_CLEAR:
		touch(v, r->clr.ino, r->clr.fblk, r->clr.n > UINT64_MAX - r->clr.fblk ?
		      UINT64_MAX : r->clr.fblk + r->clr.n);
		break;
	default:
		break;
	}
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
	uint64_t checked, skipped;
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

/* One EXTENT item: its written blocks the log does not change. */
static void data_extent(struct drun *d, const struct bkey *k, const void *val, unsigned len)
{
	struct v2_extent e;

	if (v2_extent_decode(k, val, len, &e) || e.unwritten)
		return;		/* a bad item is check_item's; unwritten: no data */
	for (uint32_t i = 0; i < e.n; i++) {
		uint64_t phys = e.phys + i, fblk = k->off + i;

		if (phys < d->lo || phys >= d->hi) {
			run_flush(d);	/* fsck_v2_meta reports it */
			continue;
		}
		if (touched(d->v, k->id, fblk)) {
			d->skipped++;
			run_flush(d);
			continue;
		}
		if (d->seen) {
			uint64_t b = phys - d->lo;

			if (bm_count(d->seen, b, b + 1)) {
				run_flush(d);
				continue;
			}
			bm_set(d->seen, b, b + 1);
		}
		run_add(d, k->id, fblk, phys, v2_extent_csum(&e, i));
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
	run_flush(d);
	fsck_data_flush(c);
	if (ret != -ENOENT)
		fsck_hard_problem(c, "data check stopped: %s", strerror(-ret));
	if (c->o->verbose)
		fsck_say(c, "data: %llu blocks checked on every copy, %llu the log after the "
			 "checkpoint changes left to the next mount", (unsigned long long)d->checked,
			 (unsigned long long)d->skipped);
	fsck_data_bufs_free(d->bufs);
	free(d->seen);
	free(d);
}

void v2data_free(struct v2ck *v)
{
	free(v->touch);
	v->touch = NULL;
	v->ntouch = v->captouch = 0;
}
