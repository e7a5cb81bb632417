// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * v2nodes: every tree node of a mounted format v2 file system checked on
 * every mirror, piece by piece (see v2nodes.h).
 *
 * Locking: each piece holds fs->ckpt_mu, nothing else; the copies are read
 * and repaired under it.  A node reachable from the roots in fs->sb is not
 * freed (let alone reused) while ckpt_mu is held: a checkpoint frees the
 * nodes it replaced only after the superblock naming the new roots is
 * durable, and it holds ckpt_mu throughout.  Rewriting a bad copy with the
 * verified bytes is safe beside any reader: nodes are never rewritten in
 * place (copy-on-write).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bnode.h"
#include "bstore.h"
#include "btree.h"
#include "fs_i.h"
#include "v2nodes.h"

struct wstate {
	struct v2n_walk *w;
	uint8_t *lvl[BNODE_MAX_LEVEL];	/* the good copy of the node at each level */
	uint8_t *raw;			/* pieces: the first good copy as read */
	uint8_t *tmp;			/* further copies */
	struct bstore fmt;		/* the node format (short nodes, pieces) */
	struct bkey cursor;		/* leaves below it are checked */
	bool done;			/* the whole tree is */
	unsigned budget;		/* nodes left in this piece */
	uint64_t nodes;			/* nodes read in this piece */
};

/* A copy to check: every readable device (in sync, or a rebuild target
 * where it has been copied), and the walk's own target anywhere. */
static bool eligible(struct v2n_walk *w, unsigned d, uint64_t addr, unsigned nb)
{
	struct mirror *m = &w->fs->mirror;

	if ((int)d == w->target)
		return m->devs[d] && atomic_load(&m->state[d]) == MDEV_REBUILDING;
	return mirror_dev_readable(m, d, addr, nb);
}

/* Read @rblocks blocks (@wblocks 0), or write the first @wblocks. */
static int copy_io(struct v2n_walk *w, unsigned d, uint64_t addr, void *buf, unsigned wblocks,
		   unsigned rblocks)
{
	struct mirror *m = &w->fs->mirror;

	if (atomic_load(&m->state[d]) == MDEV_OK)
		return wblocks ? mirror_write_dev(m, d, addr, buf, wblocks) :
				 mirror_read_dev(m, d, addr, buf, rblocks);
	if (!m->devs[d])
		return -ENODEV;
	return wblocks ? dev_pwrite(m->be, m->devs[d], buf, (size_t)wblocks * TFS_BLOCK_SIZE,
				    addr * TFS_BLOCK_SIZE) :
			 dev_pread(m->be, m->devs[d], buf, (size_t)rblocks * TFS_BLOCK_SIZE,
				   addr * TFS_BLOCK_SIZE);
}

/*
 * Every copy of the node @p names: the first good one into @out, the bad
 * ones rewritten from it.  1 good, 0 no good copy (counted, reported),
 * -ENODEV no device to read.  @first: count it as checked.
 */
static int check_node(struct wstate *st, const struct bptr *p, uint8_t *out, bool first)
{
	struct v2n_walk *w = st->w;
	struct mirror *m = &w->fs->mirror;
	bool bad[DEV_MAX] = { false }, have = false;
	unsigned first_dev = DEV_MAX, nb = bstore_read_blocks(&st->fmt, p);
	/* The good copy as read: the node itself, or (pieces) its chain. */
	uint8_t *good = st->fmt.pieces ? st->raw : out;

	for (unsigned d = 0; nb && d < m->ndevs; d++) {
		uint8_t *buf = have ? st->tmp : good;
		int ret;

		if (!eligible(w, d, p->addr, nb))
			continue;
		ret = copy_io(w, d, p->addr, buf, 0, nb);
		if (ret == -ENODEV)
			continue;
		if (first_dev == DEV_MAX)
			first_dev = d;
		if (ret) {
			w->n.read_err++;
		} else if (!bstore_copy_ok(&st->fmt, p, buf, have ? NULL : out, NULL)) {
			mirror_event(m, d, MEV_CSUM_ERR, p->addr, 1);
		} else {
			have = true;
			continue;
		}
		bad[d] = true;
		w->n.bad++;
	}
	if (first_dev == DEV_MAX && nb)
		return -ENODEV;
	if (!have) {	/* (a pointer malformed for the format: none either) */
		if (first_dev < DEV_MAX)
			mirror_event(m, first_dev, MEV_UNRECOVERABLE, p->addr, 1);
		w->n.unrecoverable++;
		if (w->on_lost)
			w->on_lost(w->ctx, p->addr);
		return 0;
	}
	if (first)
		w->n.checked++;
	/* The good copy as read (folded; the whole slot, or the chain's
	 * nblocks) over the bad ones. */
	for (unsigned d = 0; d < m->ndevs && !m->no_repair; d++) {
		if (!bad[d] ||
		    copy_io(w, d, p->addr, good, bstore_repair_image(good, &st->fmt, p), 0))
			continue;
		mirror_event(m, d, MEV_REPAIRED, p->addr, 1);
		w->n.repaired++;
	}
	bstore_copy_node(&st->fmt, out);
	return 1;
}

/*
 * The subtree under @p (level @level, keys [lo, hi]) from the cursor on.
 * 0: done with it (the cursor past hi); 1: the piece is used up (the
 * cursor where to go on); -errno.
 */
static int visit(struct wstate *st, const struct bptr *p, unsigned level, const struct bkey *lo,
		 const struct bkey *hi)
{
	uint8_t *nb = st->lvl[level];
	unsigned n;
	int ret;

	if (!st->budget)
		return 1;
	st->budget--;
	st->nodes++;
	ret = check_node(st, p, nb, bkey_cmp(lo, &st->cursor) >= 0);
	if (ret < 0)
		return ret;
	/* A leaf, or a node without a good copy (nothing under it can be
	 * found): its range is done. */
	if (ret == 0 || level == 0 || bnode_level(nb) != level) {
		st->cursor = *hi;
		if (!bkey_succ(&st->cursor))
			st->done = true;
		return 0;
	}
	n = bnode_nritems(nb);
	for (unsigned i = 0; i < n && !st->done; i++) {
		struct bkey clo, chi;
		struct bptr cp;

		bnode_key(nb, i, &clo);
		chi = *hi;
		if (i + 1 < n) {
			bnode_key(nb, i + 1, &chi);
			if (!bkey_pred(&chi))
				continue;	/* malformed (fsck's to say): skip */
		}
		if (bkey_cmp(&chi, &st->cursor) < 0)
			continue;
		bnode_ptr(nb, i, &cp);
		ret = visit(st, &cp, level - 1, &clo, &chi);
		if (ret)
			return ret;
	}
	/* Every child done (an empty internal node: its range too). */
	st->cursor = *hi;
	if (!bkey_succ(&st->cursor))
		st->done = true;
	return 0;
}

static int walk_tree(struct wstate *st, unsigned t)
{
	struct v2n_walk *w = st->w;
	struct tfs *fs = w->fs;
	struct bkey kmin, kmax;
	int ret = 0;

	memset(&kmin, 0, sizeof(kmin));
	kmax = (struct bkey){ .id = UINT64_MAX, .type = UINT8_MAX, .off = BKEY_OFF_MAX };
	st->cursor = kmin;
	st->done = false;
	while (!st->done) {
		struct broot root;

		pthread_mutex_lock(&fs->ckpt_mu);
		root = fs->sb.roots[t];
		st->budget = V2N_PIECE;
		st->nodes = 0;
		if (!root.ptr.addr || root.level >= BNODE_MAX_LEVEL)
			st->done = true;
		else
			ret = visit(st, &root.ptr, root.level, &kmin, &kmax);
		pthread_mutex_unlock(&fs->ckpt_mu);
		if (ret < 0)
			return ret;
		if (w->piece_done && w->piece_done(w->ctx, st->nodes))
			return -ECANCELED;
	}
	return 0;
}

int v2n_walk(struct v2n_walk *w)
{
	struct wstate st = { .w = w };
	size_t rawlen = (size_t)BPTR_MAX_NBLOCKS * BNODE_BLOCK;
	int ret = 0;

	if (w->fs->sb.version != SUPER_VERSION_V2)
		return 0;
	super_node_format(&w->fs->sb, &st.fmt);
	for (unsigned l = 0; l < BNODE_MAX_LEVEL; l++)
		if (posix_memalign((void **)&st.lvl[l], TFS_BLOCK_SIZE, BNODE_SIZE))
			ret = -ENOMEM;
	if (posix_memalign((void **)&st.tmp, TFS_BLOCK_SIZE, rawlen) ||
	    posix_memalign((void **)&st.raw, TFS_BLOCK_SIZE, rawlen))
		ret = -ENOMEM;
	for (unsigned t = 0; ret == 0 && t < SUPER_V2_TREES; t++)
		ret = walk_tree(&st, t);
	for (unsigned l = 0; l < BNODE_MAX_LEVEL; l++)
		free(st.lvl[l]);
	free(st.tmp);
	free(st.raw);
	return ret;
}
