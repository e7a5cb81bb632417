// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * bstore: B+tree nodes (format v2) on the mirror (see bstore.h).  A node is
 * BNODE_BLOCKS blocks written to every in-sync device at once; a read is
 * verified against the parent pointer (bnode_matches; with leaf pieces the
 * chain of the pointer's nblocks blocks, bpiece_load), not against
 * per-block checksums, so the mirror's own verified read does not fit: this
 * file does the same dance (one copy, then the others, repair the bad ones,
 * count everything in the mirror's counters) for whole nodes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bstore.h"
#include "mirror.h"

static bool in_area(const struct bstore_mirror *s, uint64_t addr, uint64_t *slot)
{
	if (addr < s->start || (addr - s->start) % BNODE_BLOCKS)
		return false;
	*slot = (addr - s->start) / BNODE_BLOCKS;
	return *slot < s->nslots;
}

unsigned bstore_read_blocks(const struct bstore *st, const struct bptr *p)
{
	if (!st->pieces)
		return p->nblocks ? 0 : BNODE_BLOCKS;
	return p->nblocks <= BPTR_MAX_NBLOCKS ? p->nblocks : 0;
}

bool bstore_copy_ok(const struct bstore *st, const struct bptr *p, const void *raw, void *node,
		    struct bpiece_chain *c)
{
	if (!st->pieces)
		return bnode_copy_matches(raw, p, st->short_nodes);
	if (!node)
		return !bpiece_verify_chain(raw, p->nblocks, p);
	return !bpiece_load(node, raw, p->nblocks, p, c, NULL, 0);
}

void bstore_copy_node(const struct bstore *st, void *raw)
{
	if (!st->pieces)
		bnode_unfold(raw);
}

/* The blocks of the node @p names, inside the node area: 0 if not. */
static unsigned read_span(const struct bstore_mirror *s, const struct bptr *p)
{
	unsigned nb = bstore_read_blocks(&s->store, p);
	uint64_t slot;

	if (!nb || !in_area(s, p->addr, &slot) || p->addr - s->start + nb > s->nslots * BNODE_BLOCKS)
		return 0;
	return nb;
}

/* One read of the node @p names (nb blocks): @raw the copy as read, @node
 * the node (with pieces; without it is @raw), @chain what it says. */
struct mread {
	const struct bptr *p;
	unsigned nb;
	void *raw, *node;
	struct bpiece_chain *chain;
};

/* Read device @dev's copy into r->raw: true when it is the node r->p names.
 * A copy that is not (read error or mismatch) is marked for repair. */
static bool try_copy(struct bstore_mirror *s, unsigned dev, const struct mread *r, bool *bad)
{
	int ret = mirror_read_dev(s->m, dev, r->p->addr, r->raw, r->nb);

	if (!ret && bstore_copy_ok(&s->store, r->p, r->raw, r->node, r->chain))
		return true;
	if (ret == -ENODEV)
		return false;
	if (!ret)	/* read errors are counted by mirror_read_dev */
		mirror_event(s->m, dev, MEV_CSUM_ERR, r->p->addr, 1);
	bad[dev] = true;
	return false;
}

/* all_copies: read the copies not read yet too (into a scratch buffer,
 * r->raw holds the good one), so a bad copy is found even when a good one
 * came first. */
static void check_others(struct bstore_mirror *s, const struct mread *r, int good, bool *bad)
{
	struct mread o = { r->p, r->nb, NULL, NULL, NULL };

	if (posix_memalign(&o.raw, 4096, (size_t)r->nb * BNODE_BLOCK))
		return;
	for (unsigned d = 0; d < s->m->ndevs; d++) {
		if ((int)d == good || bad[d] || !mirror_dev_readable(s->m, d, r->p->addr, r->nb))
			continue;
		try_copy(s, d, &o, bad);
	}
	free(o.raw);
}

/* The first good copy into r (the read rotation's device first): its
 * device, or -1 with every readable copy bad. */
static int first_good(struct bstore_mirror *s, const struct mread *r, bool *bad)
{
	struct mirror *m = s->m;
	int first = mirror_read_pick(m, r->p->addr, r->nb);

	if (first < 0)
		return -1;
	if (try_copy(s, (unsigned)first, r, bad))
		return first;
	for (unsigned d = 0; d < m->ndevs; d++) {
		if ((int)d == first || !mirror_dev_readable(m, d, r->p->addr, r->nb))
			continue;
		if (try_copy(s, d, r, bad))
			return (int)d;
	}
	mirror_event(m, (unsigned)first, MEV_UNRECOVERABLE, r->p->addr, 1);
	return -1;
}

static int ms_read(void *ctx, const struct bptr *p, void *buf, struct bpiece_chain *chain)
{
	struct bstore_mirror *s = ctx;
	struct mirror *m = s->m;
	bool bad[DEV_MAX] = { false };
	struct mread r = { p, read_span(s, p), buf, buf, chain };
	int good;

	if (chain)
		memset(chain, 0, sizeof(*chain));
	if (!r.nb)
		return -EIO;
	/* Pieces: the chain as read in a bounce, merged into buf. */
	if (s->store.pieces && posix_memalign(&r.raw, 4096, (size_t)r.nb * BNODE_BLOCK))
		return -ENOMEM;
	good = first_good(s, &r, bad);
	if (good >= 0 && s->all_copies)
		check_others(s, &r, good, bad);
	/* Same verified bytes over each bad copy (the good copy as read,
	 * still folded; the whole slot, or the chain's nblocks): safe, the
	 * node is not rewritten in place by anyone (copy-on-write). */
	for (unsigned d = 0; good >= 0 && d < m->ndevs && !m->no_repair; d++)
		if (bad[d] && !mirror_write_dev(m, d, p->addr, r.raw,
						bstore_repair_image(r.raw, &s->store, p)))
			mirror_event(m, d, MEV_REPAIRED, p->addr, 1);
	if (good >= 0)
		bstore_copy_node(&s->store, buf);
	if (r.raw != buf)
		free(r.raw);
	return good >= 0 ? 0 : -EIO;
}

int bstore_mirror_raw(struct bstore_mirror *s, const struct bptr *p, void *raw)
{
	unsigned nb = read_span(s, p);

	for (unsigned d = 0; nb && d < s->m->ndevs; d++) {
		if (!mirror_dev_readable(s->m, d, p->addr, nb))
			continue;
		if (!mirror_read_dev(s->m, d, p->addr, raw, nb) &&
		    bstore_copy_ok(&s->store, p, raw, NULL, NULL))
			return 0;
	}
	return -EIO;
}

unsigned bstore_repair_image(void *buf, const struct bstore *st, const struct bptr *p)
{
	unsigned nb = st->short_nodes ? bnode_nb(buf) : BNODE_BLOCKS;

	if (st->pieces)
		return p->nblocks;
	if (nb && nb < BNODE_BLOCKS)
		memset((uint8_t *)buf + nb * BNODE_BLOCK, 0, (BNODE_BLOCKS - nb) * BNODE_BLOCK);
	return BNODE_BLOCKS;
}

/* The bytes to write for the sealed node @buf: itself (whole nodes), or
 * its folded image in @img; *nb gets the blocks.  -EUCLEAN: not sealed
 * for this store's format (a bug). */
static int ms_image(struct bstore_mirror *s, const void *buf, void *img, const void **out,
		    unsigned *nb)
{
	*out = buf;
	*nb = BNODE_BLOCKS;
	if (!s->store.short_nodes)
		return bnode_nb(buf) ? -EUCLEAN : 0;
	if (!bnode_nb(buf))
		return -EUCLEAN;
	*nb = bnode_fold(buf, img);
	*out = img;
	return *nb ? 0 : -EUCLEAN;
}

static int ms_write(void *ctx, uint64_t addr, const void *buf)
{
	struct bstore_mirror *s = ctx;
	const void *out;
	uint64_t slot;
	unsigned nb;
	void *img = NULL;
	int ret;

	if (!in_area(s, addr, &slot))
		return -EINVAL;
	if (s->store.short_nodes && posix_memalign(&img, 4096, BNODE_SIZE))
		return -ENOMEM;
	ret = ms_image(s, buf, img, &out, &nb);
	if (!ret)
		ret = mirror_write(s->m, addr, out, nb);
	free(img);
	return ret;
}

static int ms_flush(void *ctx)
{
	struct bstore_mirror *s = ctx;

	return mirror_flush(s->m);
}

static int ms_alloc(void *ctx, uint64_t *addr)
{
	struct bstore_mirror *s = ctx;
	int ret = -ENOSPC;

	pthread_mutex_lock(&s->mu);
	for (uint64_t i = 0; i < s->nslots; i++) {
		uint64_t slot = (s->cursor + i) % s->nslots;

		if (!s->used[slot]) {
			s->used[slot] = 1;
			s->nused++;
			s->cursor = slot + 1;
			*addr = s->start + slot * BNODE_BLOCKS;
			ret = 0;
			break;
		}
	}
	pthread_mutex_unlock(&s->mu);
	return ret;
}

static void ms_free(void *ctx, uint64_t addr)
{
	struct bstore_mirror *s = ctx;
	uint64_t slot;

	if (!in_area(s, addr, &slot))
		return;
	pthread_mutex_lock(&s->mu);
	if (s->used[slot]) {
		s->used[slot] = 0;
		s->nused--;
	}
	pthread_mutex_unlock(&s->mu);
}

/* Nodes a batch of ms_write_many issues together: a checkpoint writes
 * thousands, and one synchronous mirror_write each (a device round trip
 * per node) made a mount's first checkpoint after kill -9 take 2.8 s for
 * 4,200 nodes. */
#define MS_BATCH 64u

static int ms_write_batch(struct bstore_mirror *s, size_t n, const uint64_t *addrs,
			  void *const *bufs, struct mirror_wr *w, struct dev_io *ios,
			  uint8_t *imgs)
{
	unsigned nio = 0;
	size_t began;
	int ret = 0, sub;

	for (began = 0; began < n; began++) {
		const void *out;
		uint64_t slot;
		unsigned nb;

		ret = in_area(s, addrs[began], &slot) ? 0 : -EINVAL;
		if (!ret)
			ret = ms_image(s, bufs[began], imgs ? imgs + began * BNODE_SIZE : NULL,
				       &out, &nb);
		if (!ret)
			ret = mirror_write_begin(s->m, addrs[began], out, nb, &w[began]);
		if (ret)
			break;
		for (unsigned d = 0; d < w[began].n; d++)
			ios[nio++] = w[began].ios[d];
	}
	if (ret) {
		while (began--)
			mirror_write_cancel(s->m, &w[began]);
		return ret;
	}
	sub = dev_submit(s->m->be, ios, nio);
	nio = 0;
	for (size_t i = 0; i < n; i++) {
		int r;

		for (unsigned d = 0; d < w[i].n; d++)
			w[i].ios[d].res = ios[nio++].res;
		r = mirror_write_end(s->m, &w[i], sub);
		if (r && !ret)
			ret = r;
	}
	return ret;
}

static int ms_write_many(void *ctx, size_t n, const uint64_t *addrs, void *const *bufs)
{
	struct bstore_mirror *s = ctx;
	struct mirror_wr *w = malloc(MS_BATCH * sizeof(*w));
	struct dev_io *ios = malloc(MS_BATCH * DEV_MAX * sizeof(*ios));
	void *imgs = NULL;
	int ret = 0;

	/* Short nodes: each folded image in its own buffer, kept until the
	 * batch's writes are done. */
	if (s->store.short_nodes && posix_memalign(&imgs, 4096, (size_t)MS_BATCH * BNODE_SIZE))
		imgs = NULL;
	for (size_t at = 0; at < n && w && ios && (imgs || !s->store.short_nodes);
	     at += MS_BATCH) {
		size_t k = n - at < MS_BATCH ? n - at : MS_BATCH;
		int r = ms_write_batch(s, k, addrs + at, bufs + at, w, ios, imgs);

		if (r && !ret)
			ret = r;
	}
	if (n && (!w || !ios || (!imgs && s->store.short_nodes)))
		ret = -ENOMEM;
	free(imgs);
	free(w);
	free(ios);
	return ret;
}

static const struct bstore_ops mirror_ops = {
	.read = ms_read,
	.write = ms_write,
	.write_many = ms_write_many,
	.flush = ms_flush,
	.alloc = ms_alloc,
	.free = ms_free,
};

int bstore_mirror_init(struct bstore_mirror *s, struct mirror *m, uint64_t start,
		       uint64_t nslots)
{
	memset(s, 0, sizeof(*s));
	if (!nslots)
		return -EINVAL;
	s->used = calloc(nslots, 1);
	if (!s->used)
		return -ENOMEM;
	s->m = m;
	s->start = start;
	s->nslots = nslots;
	pthread_mutex_init(&s->mu, NULL);
	s->store.ops = &mirror_ops;
	s->store.ctx = s;
	return 0;
}

void bstore_mirror_destroy(struct bstore_mirror *s)
{
	if (!s->used)
		return;
	pthread_mutex_destroy(&s->mu);
	free(s->used);
	s->used = NULL;
}

int bstore_mirror_claim(struct bstore_mirror *s, uint64_t addr)
{
	uint64_t slot;
	int ret = 0;

	if (!in_area(s, addr, &slot))
		return -EINVAL;
	pthread_mutex_lock(&s->mu);
	if (s->used[slot]) {
		ret = -EBUSY;
	} else {
		s->used[slot] = 1;
		s->nused++;
	}
	pthread_mutex_unlock(&s->mu);
	return ret;
}
