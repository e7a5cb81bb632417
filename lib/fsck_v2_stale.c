// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fsck_v2_stale: a stale device of a format-v2 image (fsck_v2_i.h): one the
 * superblocks record out of sync (missing during a degraded mount, failed,
 * or a rebuild or replace that did not finish), checked and brought up to
 * date as version 1's fsck does (fsck.c's note_devices and commit):
 *
 *   - it is reported as one error ("stale ... bringing every block up to
 *     date" with -y/-p, "not fixed (-n)"), not one line per block;
 *   - every live node (each node the tree walks read, verified through its
 *     parent pointer) is compared with its copy there, every written data
 *     block the EXTENT items and the log map is checked there
 *     (fsck_data_run), and with -y/-p a copy that differs is overwritten
 *     from the verified one;
 *   - the log after the checkpoint (what mount replays) is copied there
 *     from an in-sync device and replayed from that device alone: it must
 *     end where the mirror's replay ended;
 *   - then, with nothing left behind, it is flushed and only after that
 *     made in sync (MDEV_OK), so fsck_v2.c's commit writes it too and its
 *     superblocks record it in sync.  Anything not brought up to date (a
 *     block or node no in-sync copy holds, a tree or log that cannot be
 *     read whole, a failed write) keeps it stale, and says how much.
 *
 * The device is MDEV_STALE in the mirror until then, so no read (node
 * store, log replay, data source) ever uses it: nothing flows from it to
 * an in-sync device.  While a rebuild onto it is recorded running, it is
 * left out altogether: the rebuild's cursor and bitmap are its own, as in
 * version 1.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fsck_v2_i.h"

#define STALE_LOG_RUN 256u		/* log blocks per copy I/O (1 MiB) */

static bool is_stale(const struct v2ck *v, unsigned d)
{
	return d < v->m.ndevs && v->m.devs[d] && atomic_load(&v->m.state[d]) == MDEV_STALE;
}

int v2stale_open(struct v2ck *v, struct dev **mdevs)
{
	struct fck *c = v->c;
	bool any = false;

	for (unsigned d = 0; d < v->sb->ndevs; d++) {
		if (!c->stale[d])
			continue;
		c->res->errors++;
		if (v->sb->rb_state == SUPER_RB_RUNNING) {
			c->stale_unfixed[d]++;
			if (mdevs[d])
				snprintf(c->res->dev[d].path, sizeof(c->res->dev[d].path), "%s",
					 mdevs[d]->path);
			fsck_say(c, "%s: stale, and a rebuild onto it is in progress: mount the "
				 "file system to let it finish", mdevs[d] ? mdevs[d]->path : "?");
			mdevs[d] = NULL;
			continue;
		}
		if (!mdevs[d])
			continue;
		any = true;
		fsck_say(c, "%s: stale (it missed writes while failed or missing): %s",
			 mdevs[d]->path,
			 c->fix ? "bringing every block up to date" : "not fixed (-n)");
	}
	if (any && posix_memalign(&v->stale_buf, TFS_BLOCK_SIZE,
				  (size_t)BPTR_MAX_NBLOCKS * BNODE_BLOCK)) {
		v->stale_buf = NULL;
		return -ENOMEM;
	}
	return 0;
}

/* The on-disk image of the node @p names into stale_buf: the node in
 * memory @buf folded (short nodes), or with pieces the chain as a good
 * device holds it.  The blocks to write, 0 if none. */
static size_t stale_image(struct v2ck *v, const struct bptr *p, const void *buf)
{
	if (!v->s.store.pieces)
		return bnode_fold(buf, v->stale_buf) ? BNODE_SIZE : 0;
	if (bstore_mirror_raw(&v->s, p, v->stale_buf))
		return 0;
	return (size_t)p->nblocks * BNODE_BLOCK;
}

void v2stale_node(struct v2ck *v, const struct bptr *p, const void *buf)
{
	struct fck *c = v->c;
	size_t len = (size_t)bstore_read_blocks(&v->s.store, p) * BNODE_BLOCK;

	for (unsigned d = 0; v->stale_buf && len && d < v->m.ndevs; d++) {
		struct dev *dev = v->m.devs[d];
		size_t wlen;

		if (!is_stale(v, d))
			continue;
		/* The device's own I/O, not the mirror's: its copy being old
		 * is expected, not a fault to count against it. */
		if (dev_pread(v->be, dev, v->stale_buf, len, p->addr * TFS_BLOCK_SIZE) == 0 &&
		    bstore_copy_ok(&v->s.store, p, v->stale_buf, NULL, NULL))
			continue;
		c->res->dev[d].bad++;
		/* @buf is the node in memory: its on-disk image is what goes
		 * onto the device. */
		wlen = stale_image(v, p, buf);
		if (c->fix && wlen && dev_pwrite(v->be, dev, v->stale_buf, wlen,
						 p->addr * TFS_BLOCK_SIZE) == 0)
			c->res->dev[d].repaired++;
		else
			c->stale_unfixed[d]++;
	}
}

static int count_rec(void *ctx, const struct log_rec *r)
{
	(void)r;
	(*(uint64_t *)ctx)++;
	return 0;
}

/* Region blocks [from, to) of the log from device @src onto @dst. */
static int copy_span(struct v2ck *v, unsigned src, unsigned dst, uint64_t from, uint64_t to,
		     void *buf)
{
	const struct log_geom *g = &v->lg;

	for (uint64_t b = from; b < to; b += STALE_LOG_RUN) {
		uint64_t n = to - b < STALE_LOG_RUN ? to - b : STALE_LOG_RUN;
		uint64_t off = (g->start + b) * TFS_BLOCK_SIZE;
		int ret = dev_pread(v->be, v->m.devs[src], buf, n * TFS_BLOCK_SIZE, off);

		if (ret == 0)
			ret = dev_pwrite(v->be, v->m.devs[dst], buf, n * TFS_BLOCK_SIZE, off);
		if (ret < 0)
			return ret;
	}
	return 0;
}

/* Does device @d's log alone replay to where the mirror's ended? */
static bool log_matches(struct v2ck *v, unsigned d)
{
	struct dev *one[DEV_MAX] = { 0 };
	struct mirror m;
	uint64_t pos = 0, seq = 0, nrec = 0;

	one[d] = v->m.devs[d];
	if (mirror_init(&m, v->be, one, v->m.ndevs) < 0)
		return false;
	return log_replay(&m, &v->lg, count_rec, &nrec, &pos, &seq) == 0 &&
	       pos == v->log_end && seq == v->log_next;
}

/* The chunks from the head to where the replay ended (a chunk that did
 * not fit before the region's end went to 0: the span wraps), copied as
 * they are from an in-sync device, tried in turn until the stale device's
 * copy replays alone to the same end.  0 or -EIO. */
static int log_sync(struct v2ck *v, unsigned d)
{
	const struct log_geom *g = &v->lg;
	void *buf;
	int ret = -EIO;

	if (posix_memalign(&buf, TFS_BLOCK_SIZE, (size_t)STALE_LOG_RUN * TFS_BLOCK_SIZE))
		return -ENOMEM;
	for (unsigned s = 0; ret < 0 && s < v->m.ndevs; s++) {
		int r;

		if (!v->m.devs[s] || atomic_load(&v->m.state[s]) != MDEV_OK)
			continue;
		if (v->log_end >= g->head_pos) {
			r = copy_span(v, s, d, g->head_pos, v->log_end, buf);
		} else {
			r = copy_span(v, s, d, g->head_pos, g->nblocks, buf);
			if (r == 0)
				r = copy_span(v, s, d, 0, v->log_end, buf);
		}
		if (r == 0 && log_matches(v, d))
			ret = 0;
	}
	free(buf);
	return ret;
}

void v2stale_finish(struct v2ck *v)
{
	struct fck *c = v->c;
	bool whole = v->log_ok && !v->data_partial;

	for (unsigned t = 1; t <= V2_NTREES; t++)
		whole = whole && !v->tree_bad[t];
	for (unsigned d = 0; d < v->m.ndevs; d++) {
		struct dev *dev = v->m.devs[d];

		if (!is_stale(v, d) || !c->fix)
			continue;
		/* -p that refuses to commit: the superblocks stay as they are. */
		if (c->o->mode == FSCK_PREEN && c->unsafe)
			continue;
		if (!whole)
			c->stale_unfixed[d]++;	/* the trees, log or data not all read */
		if (!c->stale_unfixed[d] && log_sync(v, d) < 0) {
			fsck_say(c, "%s: the log after the checkpoint could not be copied to it",
				 dev->path);
			c->stale_unfixed[d]++;
		}
		/* Every node, block and chunk durable before a superblock
		 * says the device holds them. */
		if (!c->stale_unfixed[d] && dev_flush(v->be, dev) < 0)
			c->stale_unfixed[d]++;
		if (c->stale_unfixed[d]) {
			fsck_say(c, "%s: %llu blocks could not be brought up to date; it stays stale",
				 dev->path, (unsigned long long)c->stale_unfixed[d]);
			continue;
		}
		atomic_store(&v->m.state[d], MDEV_OK);
		v->synced++;
	}
}

void v2stale_free(struct v2ck *v)
{
	free(v->stale_buf);
	v->stale_buf = NULL;
}
