// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fspace: the free-space tree (owner 3; docs/FORMAT.md "Free space"):
 * opening it (the group summaries and the node map, never a FREE item)
 * and the checkpoint that writes what changed.
 *
 * A commit (fspace_commit) copies the bitmap of each group changed since
 * the last one under that group's lock, then, without it, turns the copy
 * into the FREE items that differ from the tree's and the group's summary.
 * Then the node map: the chunks whose bits changed are written with the
 * slots the checkpoint stops referencing shown free.  Writing them
 * allocates the free-space tree's own copy-on-write nodes, which changes
 * the map and frees older nodes (bt_trans_freed), so it repeats until a
 * round writes nothing: a copied node is changed in place for the rest of
 * the transaction, so the second or third round ends it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bmap.h"
#include "fspace_i.h"
#include "le.h"

#define SUMMARY_BYTES 24u		/* free u64, maxrun u64, nextents u64 */
#define MAP_ROUNDS 16

/* ---- open ---- */

static int load_summary(struct fspace *fs, const struct bkey *k, const uint8_t *v, unsigned len)
{
	struct fs_group *g;
	uint64_t gfree, maxrun;

	if (k->off >= fs->ngroups || len != SUMMARY_BYTES)
		return -EUCLEAN;
	g = &fs->groups[k->off];
	gfree = le64_get(v);
	maxrun = le64_get(v + 8);
	if (gfree > fs_glen(fs, k->off) || maxrun > gfree)
		return -EUCLEAN;
	atomic_store(&g->free, gfree);
	atomic_store(&g->maxrun, maxrun);
	g->nextents = le64_get(v + 16);
	g->ondisk = true;
	return 0;
}

static int open_one(void *ctx, const struct bkey *k, const void *val, unsigned len)
{
	struct fspace *fs = ctx;

	if (k->type == FSK_GROUP)
		return load_summary(fs, k, val, len);
	if (k->type == FSK_NODEMAP)
		return fs_nodemap_load(fs, k->off, val, len);
	return -EUCLEAN;
}

/* Read the items (0, FSK_GROUP, *) and (0, FSK_NODEMAP, *): both sort
 * before every FREE item (whose id is a data block, > 0). */
static int open_items(struct fspace *fs)
{
	return fs_tree_each(fs, &(struct bkey){ 0, FSK_GROUP, 0 }, &(struct bkey){ 1, 0, 0 },
			    open_one, fs);
}

static int check_params(struct fspace_params *p)
{
	if (!p->gblocks)
		p->gblocks = FSPACE_GROUP_DEFAULT;
	if (!p->start || p->end <= p->start || p->gblocks % 64 || !p->nslots ||
	    p->gblocks > BKEY_OFF_MAX || p->node_reserve >= p->nslots)
		return -EINVAL;
	/* The areas must not overlap. */
	if (p->node_start < p->end && p->start < p->node_start + p->nslots * BNODE_BLOCKS)
		return -EINVAL;
	return 0;
}

static int init_groups(struct fspace *fs)
{
	fs->groups = aligned_alloc(64, fs->ngroups * sizeof(*fs->groups));
	if (!fs->groups)
		return -ENOMEM;
	memset(fs->groups, 0, fs->ngroups * sizeof(*fs->groups));
	for (uint64_t gi = 0; gi < fs->ngroups; gi++) {
		struct fs_group *g = &fs->groups[gi];

		pthread_mutex_init(&g->mu, NULL);
		atomic_init(&g->free, fs_glen(fs, gi));
		atomic_init(&g->maxrun, fs_glen(fs, gi));
	}
	return 0;
}

int fspace_open(struct bstore *io, struct bcache *c, const uint8_t fs_uuid[16],
		const struct fspace_params *p, const struct broot *root, struct fspace **out)
{
	struct fspace *fs = calloc(1, sizeof(*fs));
	int ret;

	if (!fs)
		return -ENOMEM;
	fs->p = *p;
	ret = check_params(&fs->p);
	if (ret) {
		free(fs);
		return ret;
	}
	fs->io = io;
	fs->total = fs->p.end - fs->p.start;
	fs->ngroups = (fs->total + fs->p.gblocks - 1) / fs->p.gblocks;
	fs->gwords = fs->p.gblocks / 64;
	pthread_mutex_init(&fs->evict_mu, NULL);
	pthread_mutex_init(&fs->defer_mu, NULL);
	pthread_mutex_init(&fs->commit_mu, NULL);
	ret = fs_nodemap_init(fs);
	if (!ret)
		ret = init_groups(fs);
	if (!ret)
		ret = bt_open(&fs->tree, &fs->fstore, c, FSPACE_OWNER, fs_uuid, root);
	if (ret) {
		fs_nodemap_destroy(fs);
		free(fs->groups);
		free(fs);
		return ret;
	}
	ret = open_items(fs);
	if (ret) {
		fspace_close(fs);
		return ret;
	}
	atomic_init(&fs->nfree, fspace_free_blocks(fs));
	*out = fs;
	return 0;
}

void fspace_close(struct fspace *fs)
{
	if (!fs)
		return;
	bt_close(&fs->tree);
	for (uint64_t gi = 0; gi < fs->ngroups; gi++) {
		pthread_mutex_destroy(&fs->groups[gi].mu);
		free(fs->groups[gi].bm);
	}
	free(fs->groups);
	fs_nodemap_destroy(fs);
	pthread_mutex_destroy(&fs->evict_mu);
	pthread_mutex_destroy(&fs->defer_mu);
	pthread_mutex_destroy(&fs->commit_mu);
	free(fs->defer);
	free(fs->carry);
	free(fs->freeing);
	free(fs->fallback);
	free(fs);
}

/* ---- commit: groups ---- */

struct run {
	uint64_t start, n;
};

struct runs {
	struct run *v;
	size_t n, cap;
};

static int runs_push(struct runs *r, uint64_t start, uint64_t n)
{
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 64;
		struct run *v = realloc(r->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		r->v = v;
		r->cap = cap;
	}
	r->v[r->n++] = (struct run){ start, n };
	return 0;
}

static int push_one(void *ctx, const struct bkey *k, const void *val, unsigned len)
{
	(void)val;
	(void)len;
	return runs_push(ctx, k->id, k->off);
}

/* The FREE items starting in blocks [from, to) as the transaction sees
 * them. */
static int tree_runs(struct fspace *fs, uint64_t from, uint64_t to, struct runs *r)
{
	return fs_tree_each(fs, &(struct bkey){ from, FSK_FREE, 0 }, &(struct bkey){ to, 0, 0 },
			    push_one, r);
}

/* The free runs of group @gi's bitmap copy in [lo, hi) (group-relative;
 * used blocks or the group's ends bound the range, so every run inside
 * is whole). */
static int bitmap_runs(struct fspace *fs, uint64_t gi, const uint64_t *bm, uint64_t lo,
		       uint64_t hi, struct runs *r)
{
	uint64_t base = fs->p.start + fs_gstart(fs, gi), pos = lo;

	while (pos < hi) {
		uint64_t z = bm_next_zero(bm, pos, hi), o;
		int ret;

		if (z >= hi)
			break;
		o = bm_next_one(bm, z, hi);
		ret = runs_push(r, base + z, o - z);
		if (ret)
			return ret;
		pos = o;
	}
	return 0;
}

static uint64_t bitmap_maxrun(const uint64_t *bm, uint64_t len)
{
	uint64_t pos = 0, best = 0;

	while (pos < len) {
		uint64_t z = bm_next_zero(bm, pos, len), o;

		if (z >= len)
			break;
		o = bm_next_one(bm, z, len);
		best = o - z > best ? o - z : best;
		pos = o;
	}
	return best;
}

/* Make the tree's runs @old into @new: only the items that differ. */
static int apply_runs(struct fspace *fs, const struct runs *old, const struct runs *new)
{
	size_t i = 0, j = 0;
	uint8_t none = 0;
	int ret = 0;

	while (!ret && (i < old->n || j < new->n)) {
		const struct run *o = i < old->n ? &old->v[i] : NULL;
		const struct run *w = j < new->n ? &new->v[j] : NULL;

		if (o && w && o->start == w->start && o->n == w->n) {
			i++;
			j++;
		} else if (o && (!w || o->start <= w->start)) {
			ret = bt_delete(&fs->tree, &(struct bkey){ o->start, FSK_FREE, o->n });
			fs->items_written++;
			i++;
		} else {
			ret = bt_insert(&fs->tree, &(struct bkey){ w->start, FSK_FREE, w->n },
					&none, 0);
			fs->items_written++;
			j++;
		}
	}
	return ret;
}

/*
 * Write group @gi's snapshot: the FREE items that differ, in the changed
 * range [lo, hi) widened to the free runs around it (an item outside it
 * is the same in the tree and the snapshot, and none crosses its ends),
 * and the summary.  A group without items yet gets all of its runs.
 */
static int write_group(struct fspace *fs, uint64_t gi, const uint64_t *snap, uint64_t gfree,
		       uint64_t lo, uint64_t hi)
{
	struct fs_group *g = &fs->groups[gi];
	uint64_t len = fs_glen(fs, gi), gs = fs->p.start + fs_gstart(fs, gi);
	struct runs old = { 0 }, new = { 0 };
	uint8_t v[SUMMARY_BYTES];
	int ret = 0;

	if (g->ondisk) {	/* only this thread changes it */
		lo = bm_prev_one_end(snap, 0, lo);
		hi = bm_next_one(snap, hi, len);
		ret = tree_runs(fs, gs + lo, gs + hi, &old);
		fs->items_read += old.n;
	} else {
		lo = 0;
		hi = len;
	}
	if (!ret)
		ret = bitmap_runs(fs, gi, snap, lo, hi, &new);
	if (!ret)
		ret = apply_runs(fs, &old, &new);
	if (!ret) {
		g->nextents = g->nextents - old.n + new.n;
		le64_put(v, gfree);
		le64_put(v + 8, bitmap_maxrun(snap, len));
		le64_put(v + 16, g->nextents);
		ret = bt_insert(&fs->tree, &(struct bkey){ 0, FSK_GROUP, gi }, v, sizeof(v));
		fs->items_written++;
	}
	free(old.v);
	free(new.v);
	return ret;
}

/* Snapshot and write every group changed since the last commit. */
static int commit_groups(struct fspace *fs)
{
	uint64_t *snap = malloc(fs->gwords * 8);
	int ret = 0;

	if (!snap)
		return -ENOMEM;
	for (uint64_t gi = 0; gi < fs->ngroups && !ret; gi++) {
		struct fs_group *g = &fs->groups[gi];
		uint64_t gfree;

		pthread_mutex_lock(&g->mu);
		if (!g->dirty) {
			pthread_mutex_unlock(&g->mu);
			continue;
		}
		memcpy(snap, g->bm, fs->gwords * 8);
		gfree = atomic_load(&g->free);
		g->dirty = false;
		g->in_ckpt = true;
		g->ck_lo = g->dlo;
		g->ck_hi = g->dhi;
		g->ck_next = g->nextents;
		pthread_mutex_unlock(&g->mu);
		ret = write_group(fs, gi, snap, gfree, g->ck_lo, g->ck_hi);
	}
	free(snap);
	return ret;
}

/* The commit ended: unpin the groups it wrote; @ok: they are in the tree
 * (else changed again, so the next commit writes them). */
static void end_groups(struct fspace *fs, bool ok)
{
	for (uint64_t gi = 0; gi < fs->ngroups; gi++) {
		struct fs_group *g = &fs->groups[gi];

		pthread_mutex_lock(&g->mu);
		if (g->in_ckpt) {
			g->in_ckpt = false;
			if (ok) {
				g->ondisk = true;
			} else {
				fs_group_mark(g, g->ck_lo, g->ck_hi);
				g->nextents = g->ck_next;
			}
		}
		pthread_mutex_unlock(&g->mu);
	}
}

/* ---- commit: the node map ---- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The slots this commit frees, sorted: the caller's list, the carried
 * list and the free-space tree's own so far.  Chunks holding one are
 * marked to be looked at. */
static int pending_slots(struct fspace *fs, const uint64_t *frees, size_t nfrees,
			 uint64_t **out, size_t *nout)
{
	uint64_t *own, *v, s;
	size_t nown, n = 0;
	int ret = bt_trans_freed(&fs->tree, &own, &nown);

	if (ret)
		return ret;
	v = malloc((nfrees + fs->ncarry + nown + 1) * sizeof(*v));
	if (!v) {
		free(own);
		return -ENOMEM;
	}
	for (size_t i = 0; i < nfrees; i++)
		if (fs_node_slot(fs, frees[i], &s))
			v[n++] = s;
	for (size_t i = 0; i < fs->ncarry; i++)
		if (fs_node_slot(fs, fs->carry[i], &s))
			v[n++] = s;
	for (size_t i = 0; i < nown; i++)
		if (fs_node_slot(fs, own[i], &s))
			v[n++] = s;
	free(own);
	qsort(v, n, sizeof(*v), cmp_u64);
	pthread_mutex_lock(&fs->nm.mu);
	for (size_t i = 0; i < n; i++)
		fs->nm.cdirty[v[i] / FSPACE_MAP_SLOTS] = true;
	pthread_mutex_unlock(&fs->nm.mu);
	*out = v;
	*nout = n;
	return 0;
}

/* One round: write each looked-at chunk whose value differs from the
 * tree's.  *wrote counts them. */
static int map_round(struct fspace *fs, const uint64_t *pend, size_t npend, unsigned *wrote)
{
	struct fs_nodemap *nm = &fs->nm;
	uint8_t val[FSPACE_MAP_BYTES];
	int ret = 0;

	*wrote = 0;
	for (uint64_t c = 0; c < nm->nchunks && !ret; c++) {
		struct bkey k = { 0, FSK_NODEMAP, c };
		uint64_t h, was;

		pthread_mutex_lock(&nm->mu);
		if (!nm->cdirty[c]) {
			pthread_mutex_unlock(&nm->mu);
			continue;
		}
		nm->cdirty[c] = false;
		h = fs_nodemap_chunk(fs, c, pend, npend, val);
		was = nm->chash[c];
		nm->chash[c] = h;
		pthread_mutex_unlock(&nm->mu);
		if (h == was)
			continue;
		/* An all-free chunk has no item. */
		ret = h ? bt_insert(&fs->tree, &k, val, FSPACE_MAP_BYTES) : bt_delete(&fs->tree, &k);
		fs->items_written++;
		(*wrote)++;
	}
	return ret;
}

static int commit_map(struct fspace *fs, const uint64_t *frees, size_t nfrees)
{
	int ret = 0;

	for (unsigned round = 0; round < MAP_ROUNDS; round++) {
		uint64_t *pend;
		size_t npend;
		unsigned wrote;

		ret = pending_slots(fs, frees, nfrees, &pend, &npend);
		if (ret)
			return ret;
		ret = map_round(fs, pend, npend, &wrote);
		if (!ret && !wrote) {
			/* The slots this commit frees, for fs_node_published. */
			free(fs->freeing);
			fs->freeing = pend;
			fs->nfreeing = npend;
			return 0;
		}
		free(pend);
		if (ret)
			return ret;
	}
	return -ELOOP;	/* never seen: each round copies fewer nodes */
}

/* Back to the tree's last commit: every chunk is looked at again. */
static void end_map(struct fspace *fs, bool ok)
{
	struct fs_nodemap *nm = &fs->nm;

	pthread_mutex_lock(&nm->mu);
	for (uint64_t c = 0; c < nm->nchunks; c++) {
		if (ok) {
			nm->chash_ok[c] = nm->chash[c];
		} else if (nm->chash[c] != nm->chash_ok[c]) {
			nm->chash[c] = nm->chash_ok[c];
			nm->cdirty[c] = true;
		}
	}
	pthread_mutex_unlock(&nm->mu);
}

/* ---- commit ---- */

static int carry_add(struct fspace *fs, uint64_t *v, size_t n)
{
	uint64_t *c;

	if (!n)
		return 0;
	c = realloc(fs->carry, (fs->ncarry + n) * sizeof(*c));
	if (!c)
		return -ENOMEM;
	memcpy(c + fs->ncarry, v, n * sizeof(*c));
	fs->carry = c;
	fs->ncarry += n;
	return 0;
}

int fspace_commit(struct fspace *fs, uint64_t gen, const uint64_t *frees, size_t nfrees,
		  struct broot *root)
{
	uint64_t *own = NULL;
	size_t nown = 0;
	int ret;

	pthread_mutex_lock(&fs->commit_mu);
	ret = fs->committing ? -EBUSY : bt_begin(&fs->tree, gen);
	if (ret) {
		pthread_mutex_unlock(&fs->commit_mu);
		return ret;
	}
	ret = commit_groups(fs);
	if (!ret)
		ret = commit_map(fs, frees, nfrees);
	if (!ret)
		ret = bt_commit(&fs->tree, root, &own, &nown);
	if (ret) {
		bt_abort(&fs->tree);
		end_groups(fs, false);
		end_map(fs, false);
	} else {
		/* The own list equals the last round's (nothing changed
		 * after it): the tree shows these free already. */
		if (carry_add(fs, own, nown))
			atomic_fetch_add(&fs->errors, 1);	/* leaked slots */
		free(own);
		fs->committing = true;
		fs->commits++;
	}
	pthread_mutex_unlock(&fs->commit_mu);
	return ret;
}

void fspace_commit_done(struct fspace *fs)
{
	pthread_mutex_lock(&fs->commit_mu);
	if (fs->committing) {
		end_groups(fs, true);
		end_map(fs, true);
		bt_release(&fs->tree, fs->carry, fs->ncarry);
		free(fs->carry);
		fs->carry = NULL;
		fs->ncarry = 0;
		fs_node_published(fs);
		fs->committing = false;
	}
	pthread_mutex_unlock(&fs->commit_mu);
	/* The groups the commit wrote are clean now: without this they would
	 * stay until later loads pushed them out, and random writes over a
	 * large file system leave one per GiB (32 KiB each: 110 MiB at 4
	 * TiB) after every checkpoint. */
	fs_groups_trim(fs);
}

/* The root was never published: the next commit builds on it anyway (its
 * nodes stay allocated), and the nodes it freed are carried until a
 * commit is published. */
void fspace_commit_abort(struct fspace *fs)
{
	pthread_mutex_lock(&fs->commit_mu);
	if (fs->committing) {
		end_groups(fs, true);
		end_map(fs, true);
		free(fs->freeing);	/* the next commit lists them again */
		fs->freeing = NULL;
		fs->nfreeing = 0;
		fs->committing = false;
	}
	pthread_mutex_unlock(&fs->commit_mu);
}

void fspace_stats(struct fspace *fs, struct fspace_stats *st)
{
	uint64_t dirty = 0;

	for (uint64_t gi = 0; gi < fs->ngroups; gi++) {
		pthread_mutex_lock(&fs->groups[gi].mu);
		dirty += fs->groups[gi].dirty;
		pthread_mutex_unlock(&fs->groups[gi].mu);
	}
	memset(st, 0, sizeof(*st));
	st->ngroups = fs->ngroups;
	st->loaded = atomic_load(&fs->nloaded);
	st->dirty = dirty;
	st->summary_bytes = sizeof(*fs) + fs->ngroups * sizeof(struct fs_group) +
			    fs->nm.nchunks * (FSPACE_MAP_BYTES + 2 * 8 + sizeof(bool));
	pthread_mutex_lock(&fs->nm.mu);
	if (fs->nm.hb)		/* the held map (fspace_node_hold_free) */
		st->summary_bytes += fs->nm.nchunks * FSPACE_MAP_BYTES;
	pthread_mutex_unlock(&fs->nm.mu);
	st->loaded_bytes = atomic_load(&fs->loaded_bytes);
	st->loads = atomic_load(&fs->loads);
	st->evictions = atomic_load(&fs->evictions);
	pthread_mutex_lock(&fs->commit_mu);
	st->commits = fs->commits;
	st->items_written = fs->items_written;
	st->items_read = fs->items_read;
	pthread_mutex_unlock(&fs->commit_mu);
	pthread_mutex_lock(&fs->nm.mu);
	st->errors = atomic_load(&fs->errors) + fs->nm.errors;
	pthread_mutex_unlock(&fs->nm.mu);
}

struct btree *fspace_tree(struct fspace *fs)
{
	return &fs->tree;
}

/* ---- verification (fsck, tests) ---- */

struct vstate {
	struct fspace *fs;
	uint64_t *gfree, *gmax, *gext;	/* from the FREE items, per group */
	uint8_t *has;			/* group has a GROUP item */
	uint64_t prev_end;		/* end of the previous FREE item */
	char *why;
	size_t whylen;
};

static int vfail(struct vstate *v, const char *what, const struct bkey *k)
{
	snprintf(v->why, v->whylen, "%s at (%llu, %u, %llu)", what, (unsigned long long)k->id,
		 k->type, (unsigned long long)k->off);
	return -EUCLEAN;
}

static int verify_free(struct vstate *v, const struct bkey *k, unsigned len)
{
	struct fspace *fs = v->fs;
	uint64_t gi, gs;

	if (len || k->id < fs->p.start || k->id >= fs->p.end || !k->off)
		return vfail(v, "FREE item outside the data area", k);
	gi = (k->id - fs->p.start) / fs->p.gblocks;
	gs = fs->p.start + fs_gstart(fs, gi);
	if (k->off > gs + fs_glen(fs, gi) - k->id)
		return vfail(v, "FREE item crosses its group's end", k);
	if (!v->has[gi])
		return vfail(v, "FREE item in a group without a summary", k);
	if (k->id < v->prev_end || (k->id == v->prev_end && k->id != gs))
		return vfail(v, "FREE items touch or overlap", k);
	v->prev_end = k->id + k->off;
	v->gfree[gi] += k->off;
	v->gext[gi]++;
	if (k->off > v->gmax[gi])
		v->gmax[gi] = k->off;
	return 0;
}

static int verify_item(struct vstate *v, const struct bkey *k, const uint8_t *val, unsigned len)
{
	struct fspace *fs = v->fs;

	if (k->id)
		return k->type == FSK_FREE ? verify_free(v, k, len) : vfail(v, "unknown item", k);
	if (k->type == FSK_GROUP) {
		if (k->off >= fs->ngroups || len != SUMMARY_BYTES)
			return vfail(v, "bad GROUP item", k);
		v->has[k->off] = 1;
		return 0;
	}
	if (k->type == FSK_NODEMAP) {
		uint64_t any = 0, base = k->off * FSPACE_MAP_SLOTS;

		if (k->off >= fs->nm.nchunks || len != FSPACE_MAP_BYTES)
			return vfail(v, "bad NODEMAP item", k);
		for (unsigned i = 0; i < FSPACE_MAP_SLOTS; i++) {
			bool bit = val[i / 8] & (1u << (i % 8));

			any |= bit;
			if (bit && base + i >= fs->nm.nslots)
				return vfail(v, "NODEMAP bit past the node area", k);
		}
		return any ? 0 : vfail(v, "NODEMAP item with no slot in use", k);
	}
	return vfail(v, "unknown item", k);
}

/* Every GROUP item against its FREE items (read again for the values). */
static int verify_groups(struct vstate *v)
{
	for (uint64_t gi = 0; gi < v->fs->ngroups; gi++) {
		struct bkey k = { 0, FSK_GROUP, gi };
		uint8_t val[SUMMARY_BYTES];
		unsigned len;

		if (!v->has[gi])
			continue;
		if (bt_lookup(&v->fs->tree, &k, val, sizeof(val), &len))
			return vfail(v, "GROUP item vanished", &k);
		if (le64_get(val) != v->gfree[gi] || le64_get(val + 8) != v->gmax[gi] ||
		    le64_get(val + 16) != v->gext[gi])
			return vfail(v, "GROUP summary disagrees with its FREE items", &k);
	}
	return 0;
}

int fspace_verify(struct fspace *fs, char *why, size_t whylen)
{
	struct vstate v = { .fs = fs, .why = why, .whylen = whylen };
	struct bkey k;
	struct bt_iter it;
	const void *val;
	unsigned len;
	int ret = -ENOMEM;

	v.gfree = calloc(fs->ngroups, 8);
	v.gmax = calloc(fs->ngroups, 8);
	v.gext = calloc(fs->ngroups, 8);
	v.has = calloc(fs->ngroups, 1);
	if (v.gfree && v.gmax && v.gext && v.has)
		ret = bt_iter_init(&it, &fs->tree, &bkey_min);
	while (!ret) {
		ret = bt_iter_next(&it, &k, &val, &len);
		if (!ret)
			ret = verify_item(&v, &k, val, len);
	}
	if (v.gfree && v.gmax && v.gext && v.has)
		bt_iter_free(&it);
	if (ret == -ENOENT)
		ret = verify_groups(&v);
	free(v.gfree);
	free(v.gmax);
	free(v.gext);
	free(v.has);
	return ret;
}
