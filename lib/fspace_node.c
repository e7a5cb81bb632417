// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fspace: the node map, where every tree node lives (see fspace.h), and
 * the two node stores built on it: the one the other trees use, and the
 * free-space tree's own, which may take the reserved slots so a checkpoint
 * on a full node area can still write the free-space tree.  Reads, writes
 * and flushes go to the underlying store (the mirror, or memory in tests).
 *
 * Slots are handed out first fit after a cursor under nm.mu (a leaf lock):
 * node allocations come with copy-on-write, once per node per checkpoint,
 * never per data allocation.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bmap.h"
#include "csum.h"
#include "fspace_i.h"
#include "le.h"

bool fs_node_slot(const struct fspace *fs, uint64_t addr, uint64_t *slot)
{
	const struct fs_nodemap *nm = &fs->nm;

	if (addr < nm->start || (addr - nm->start) % BNODE_BLOCKS)
		return false;
	*slot = (addr - nm->start) / BNODE_BLOCKS;
	return *slot < nm->nslots;
}

static int node_alloc(struct fspace *fs, uint64_t *addr, bool meta)
{
	struct fs_nodemap *nm = &fs->nm;
	uint64_t s;
	int ret = -ENOSPC;

	pthread_mutex_lock(&nm->mu);
	/* Slots held for a discard come back when it is done: wait for them
	 * rather than fail (the discard thread takes no lock of ours). */
	while (nm->nslots - nm->nused <= (meta ? 0 : nm->reserve) && nm->nheld)
		pthread_cond_wait(&nm->cv, &nm->mu);
	if (nm->nslots - nm->nused > (meta ? 0 : nm->reserve)) {
		s = bm_next_zero(nm->bm, nm->cursor, nm->nslots);
		if (s == nm->nslots)
			s = bm_next_zero(nm->bm, 0, nm->cursor);
		if (s < nm->nslots) {
			bm_set(nm->bm, s, s + 1);
			nm->nused++;
			fs_nodemap_pub(nm);
			nm->cursor = s + 1 < nm->nslots ? s + 1 : 0;
			nm->cdirty[s / FSPACE_MAP_SLOTS] = true;
			*addr = nm->start + s * BNODE_BLOCKS;
			ret = 0;
		}
	}
	pthread_mutex_unlock(&nm->mu);
	return ret;
}

static void node_free(void *ctx, uint64_t addr)
{
	struct fspace *fs = ctx;
	struct fs_nodemap *nm = &fs->nm;
	uint64_t s;

	if (!fs_node_slot(fs, addr, &s)) {
		atomic_fetch_add(&fs->errors, 1);
		return;
	}
	pthread_mutex_lock(&nm->mu);
	if (bm_count(nm->bm, s, s + 1)) {
		bm_clear(nm->bm, s, s + 1);
		nm->nused--;
		fs_nodemap_pub(nm);
		nm->cdirty[s / FSPACE_MAP_SLOTS] = true;
	} else {
		nm->errors++;
	}
	pthread_mutex_unlock(&nm->mu);
}

static int ns_alloc(void *ctx, uint64_t *addr)
{
	return node_alloc(ctx, addr, false);
}

static int fst_alloc(void *ctx, uint64_t *addr)
{
	return node_alloc(ctx, addr, true);
}

static int ns_read(void *ctx, const struct bptr *p, void *buf, struct bpiece_chain *chain)
{
	struct fspace *fs = ctx;
	uint64_t s;

	if (!fs_node_slot(fs, p->addr, &s))
		return -EIO;
	return fs->io->ops->read(fs->io->ctx, p, buf, chain);
}

static int ns_write(void *ctx, uint64_t addr, const void *buf)
{
	struct fspace *fs = ctx;
	uint64_t s;

	if (!fs_node_slot(fs, addr, &s))
		return -EINVAL;
	return fs->io->ops->write(fs->io->ctx, addr, buf);
}

static int ns_write_many(void *ctx, size_t n, const uint64_t *addrs, void *const *bufs)
{
	struct fspace *fs = ctx;
	int ret = 0;
	uint64_t s;

	for (size_t i = 0; i < n; i++)
		if (!fs_node_slot(fs, addrs[i], &s))
			return -EINVAL;
	if (fs->io->ops->write_many)
		return fs->io->ops->write_many(fs->io->ctx, n, addrs, bufs);
	for (size_t i = 0; i < n; i++) {
		int r = fs->io->ops->write(fs->io->ctx, addrs[i], bufs[i]);

		if (r && !ret)
			ret = r;
	}
	return ret;
}

static int ns_flush(void *ctx)
{
	struct fspace *fs = ctx;

	return fs->io->ops->flush ? fs->io->ops->flush(fs->io->ctx) : 0;
}

static const struct bstore_ops node_ops = {
	.read = ns_read, .write = ns_write, .write_many = ns_write_many, .flush = ns_flush,
	.alloc = ns_alloc, .free = node_free,
};

static const struct bstore_ops free_tree_ops = {
	.read = ns_read, .write = ns_write, .write_many = ns_write_many, .flush = ns_flush,
	.alloc = fst_alloc, .free = node_free,
};

int fs_nodemap_init(struct fspace *fs)
{
	struct fs_nodemap *nm = &fs->nm;
	uint64_t words;

	nm->start = fs->p.node_start;
	nm->nslots = fs->p.nslots;
	nm->reserve = fs->p.node_reserve;
	nm->nchunks = (nm->nslots + FSPACE_MAP_SLOTS - 1) / FSPACE_MAP_SLOTS;
	words = nm->nchunks * (FSPACE_MAP_SLOTS / 64);
	nm->bm = calloc(words, 8);
	nm->cdirty = calloc(nm->nchunks, sizeof(*nm->cdirty));
	nm->chash = calloc(nm->nchunks, sizeof(*nm->chash));
	nm->chash_ok = calloc(nm->nchunks, sizeof(*nm->chash_ok));
	if (!nm->bm || !nm->cdirty || !nm->chash || !nm->chash_ok)
		return -ENOMEM;
	pthread_mutex_init(&nm->mu, NULL);
	pthread_cond_init(&nm->cv, NULL);
	fs->nstore.ops = &node_ops;
	fs->nstore.ctx = fs;
	fs->nstore.short_nodes = fs->io->short_nodes;
	fs->nstore.pieces = fs->io->pieces;
	fs->fstore.ops = &free_tree_ops;
	fs->fstore.ctx = fs;
	fs->fstore.short_nodes = fs->io->short_nodes;
	fs->fstore.pieces = fs->io->pieces;
	return 0;
}

/* Safe on a half-initialized map (calloc'd fspace). */
void fs_nodemap_destroy(struct fspace *fs)
{
	struct fs_nodemap *nm = &fs->nm;

	if (nm->bm && nm->cdirty && nm->chash && nm->chash_ok) {
		pthread_cond_destroy(&nm->cv);
		pthread_mutex_destroy(&nm->mu);
	}
	free(nm->hb);
	free(nm->bm);
	free(nm->cdirty);
	free(nm->chash);
	free(nm->chash_ok);
}

static bool is_pending(uint64_t slot, const uint64_t *pend, size_t npend)
{
	size_t lo = 0, hi = npend;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (pend[mid] == slot)
			return true;
		if (pend[mid] < slot)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

uint64_t fs_nodemap_chunk(struct fspace *fs, uint64_t c, const uint64_t *pend, size_t npend,
			  uint8_t *val)
{
	const uint64_t *w = fs->nm.bm + c * (FSPACE_MAP_SLOTS / 64);
	const uint64_t *h = fs->nm.hb ? fs->nm.hb + c * (FSPACE_MAP_SLOTS / 64) : NULL;
	uint64_t base = c * FSPACE_MAP_SLOTS, any = 0;

	for (unsigned i = 0; i < FSPACE_MAP_SLOTS / 64; i++) {
		uint64_t v = w[i] & ~(h ? h[i] : 0);	/* held: free on disk */

		for (uint64_t u = v; u; u &= u - 1) {
			uint64_t s = base + i * 64 + (uint64_t)__builtin_ctzll(u);

			if (npend && is_pending(s, pend, npend))
				v &= ~(1ull << (s & 63));
		}
		le64_put(val + i * 8, v);
		any |= v;
	}
	if (!any)
		return 0;
	return csum_buf(val, FSPACE_MAP_BYTES, c) | 1;	/* never 0 */
}

int fs_nodemap_load(struct fspace *fs, uint64_t c, const uint8_t *val, unsigned len)
{
	struct fs_nodemap *nm = &fs->nm;
	uint64_t *w, any = 0;

	/* The chunk comes from an item's key: checked before it makes a
	 * pointer (a damaged key overflowed it, UBSan in fuzz_v2image). */
	if (c >= nm->nchunks || len != FSPACE_MAP_BYTES)
		return -EUCLEAN;
	w = nm->bm + c * (FSPACE_MAP_SLOTS / 64);
	for (unsigned i = 0; i < FSPACE_MAP_SLOTS / 64; i++) {
		w[i] = le64_get(val + i * 8);
		any |= w[i];
		nm->nused += (uint64_t)__builtin_popcountll(w[i]);
	}
	fs_nodemap_pub(nm);
	/* Bits past the last slot, or an all-free chunk (never written as an
	 * item), mean a damaged item. */
	if (!any || bm_count(nm->bm, nm->nslots, nm->nchunks * FSPACE_MAP_SLOTS))
		return -EUCLEAN;
	nm->chash[c] = nm->chash_ok[c] = csum_buf(val, FSPACE_MAP_BYTES, c) | 1;
	return 0;
}

struct bstore *fspace_node_store(struct fspace *fs)
{
	return &fs->nstore;
}

bool fspace_node_used(struct fspace *fs, uint64_t addr)
{
	uint64_t s;
	bool used = false;

	if (!fs_node_slot(fs, addr, &s))
		return false;
	pthread_mutex_lock(&fs->nm.mu);
	used = bm_count(fs->nm.bm, s, s + 1) && !(fs->nm.hb && bm_count(fs->nm.hb, s, s + 1));
	pthread_mutex_unlock(&fs->nm.mu);
	return used;
}

uint64_t fspace_nodes_used(struct fspace *fs)
{
	return atomic_load_explicit(&fs->nm.used_pub, memory_order_relaxed);
}

/* ---- holding free slots for a discard (fspace.h) ---- */

uint64_t fspace_nodes_held(struct fspace *fs)
{
	uint64_t n;

	pthread_mutex_lock(&fs->nm.mu);
	n = fs->nm.nheld;
	pthread_mutex_unlock(&fs->nm.mu);
	return n;
}

/* nm.mu held.  The held map is made on first use: a mount without
 * discard or trim never pays for it. */
static int hold_map(struct fs_nodemap *nm)
{
	if (!nm->hb)
		nm->hb = calloc(nm->nchunks * (FSPACE_MAP_SLOTS / 64), 8);
	return nm->hb ? 0 : -ENOMEM;
}

/* Hold slot @s if it is free (nm.mu held, hold_map done). */
static bool hold_slot(struct fs_nodemap *nm, uint64_t s)
{
	if (bm_count(nm->bm, s, s + 1))
		return false;
	bm_set(nm->bm, s, s + 1);
	bm_set(nm->hb, s, s + 1);
	nm->nused++;
	nm->nheld++;
	fs_nodemap_pub(nm);
	return true;
}

void fspace_node_unhold(struct fspace *fs, uint64_t addr, uint64_t n)
{
	struct fs_nodemap *nm = &fs->nm;
	uint64_t s, e;

	if (!fs_node_slot(fs, addr, &s)) {
		atomic_fetch_add(&fs->errors, 1);
		return;
	}
	e = s + n / BNODE_BLOCKS;
	pthread_mutex_lock(&nm->mu);
	for (; s < e && s < nm->nslots; s++) {
		if (!nm->hb || !bm_count(nm->hb, s, s + 1)) {
			nm->errors++;
			continue;
		}
		bm_clear(nm->hb, s, s + 1);
		bm_clear(nm->bm, s, s + 1);
		nm->nused--;
		nm->nheld--;
	}
	fs_nodemap_pub(nm);
	pthread_cond_broadcast(&nm->cv);
	pthread_mutex_unlock(&nm->mu);
}

void fspace_set_node_discard(struct fspace *fs, int (*fn)(void *ctx, uint64_t addr, uint64_t n),
			     void *ctx)
{
	pthread_mutex_lock(&fs->commit_mu);
	fs->dfn = fn;
	fs->dctx = ctx;
	pthread_mutex_unlock(&fs->commit_mu);
}

void fs_node_published(struct fspace *fs)
{
	struct fs_nodemap *nm = &fs->nm;
	size_t n = 0;

	if (fs->dfn && fs->nfallback) {
		/* Still free: none of the commit just published went there,
		 * and the tree of the older slot is now this commit's parent,
		 * which freed them: no superblock names a tree using them. */
		pthread_mutex_lock(&nm->mu);
		if (hold_map(nm) == 0)
			for (size_t i = 0; i < fs->nfallback; i++)
				if (hold_slot(nm, fs->fallback[i]))
					fs->fallback[n++] = fs->fallback[i];
		pthread_mutex_unlock(&nm->mu);
	}
	for (size_t i = 0, j; i < n; i = j) {
		uint64_t addr = nm->start + fs->fallback[i] * BNODE_BLOCKS, len;

		for (j = i + 1; j < n && fs->fallback[j] == fs->fallback[j - 1] + 1; j++)
			;
		len = (j - i) * BNODE_BLOCKS;
		if (fs->dfn(fs->dctx, addr, len))
			fspace_node_unhold(fs, addr, len);
	}
	free(fs->fallback);
	fs->fallback = fs->freeing;
	fs->nfallback = fs->nfreeing;
	fs->freeing = NULL;
	fs->nfreeing = 0;
	fs->fallback_known = true;
}

int fspace_node_hold_free(struct fspace *fs, uint64_t from, uint64_t max, uint64_t *addr,
			  uint64_t *n)
{
	struct fs_nodemap *nm = &fs->nm;
	uint64_t s = from <= nm->start ? 0 : (from - nm->start + BNODE_BLOCKS - 1) / BNODE_BLOCKS;
	uint64_t e;
	int ret = -ENOENT;

	/* Under commit_mu: the fallback list cannot change meanwhile (and a
	 * slot it gains later was in use, so never one held here). */
	pthread_mutex_lock(&fs->commit_mu);
	if (!fs->fallback_known) {
		pthread_mutex_unlock(&fs->commit_mu);
		return -EAGAIN;
	}
	pthread_mutex_lock(&nm->mu);
	if (hold_map(nm)) {
		ret = -ENOMEM;
		goto out;
	}
	for (; (s = bm_next_zero(nm->bm, s, nm->nslots)) < nm->nslots; s++) {
		if (is_pending(s, fs->fallback, fs->nfallback))
			continue;
		for (e = s; e < nm->nslots && e - s < max && !is_pending(e, fs->fallback,
		     fs->nfallback) && hold_slot(nm, e); e++)
			;
		*addr = nm->start + s * BNODE_BLOCKS;
		*n = (e - s) * BNODE_BLOCKS;
		ret = 0;
		break;
	}
out:
	pthread_mutex_unlock(&nm->mu);
	pthread_mutex_unlock(&fs->commit_mu);
	return ret;
}
