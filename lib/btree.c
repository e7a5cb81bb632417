// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * btree: copy-on-write B+tree of format v2 over a node store and a node
 * cache (see btree.h for transactions and locking, bnode.h for the node
 * format).
 *
 * A change first finds the path root -> leaf (read-only, so a delete of a
 * missing key or a replaced value that fits copies nothing it need not),
 * then copies every node of the path that an older generation wrote
 * (top-down: the parent is already the transaction's own when its pointer
 * is redirected), then changes the leaf.  A full node splits into a new
 * right sibling (its parent split first if that is full, the root grows a
 * level); a node under a quarter full after a delete merges with a sibling
 * when both fit in one node, otherwise takes items from it so both are
 * about half full; a root with a single child gives way to it.
 *
 * Pointers to the transaction's own nodes carry csum 0 until bt_commit,
 * which writes children before parents and fills the csums in on the way
 * up.  A node a transaction made and then dropped is freed at once (nothing
 * durable references it); a committed node it stopped referencing goes to
 * the freed list that bt_commit returns.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "btree.h"

struct path {
	unsigned top;				/* level of the root */
	struct bcache_node *n[BNODE_MAX_LEVEL];	/* n[l]: the node at level l */
	unsigned slot[BNODE_MAX_LEVEL];		/* slot[l]: n[l-1]'s pointer in n[l] */
	struct bkey lo[BNODE_MAX_LEVEL], hi[BNODE_MAX_LEVEL];
	bool has_hi[BNODE_MAX_LEVEL];
};

static bool soft_err(int ret)
{
	return ret == -ENOENT || ret == -EINVAL || ret == -E2BIG || ret == -EOVERFLOW;
}

static void path_put(struct btree *t, struct path *pa)
{
	for (unsigned l = 0; l < BNODE_MAX_LEVEL; l++) {
		bcache_put(t->cache, pa->n[l]);
		pa->n[l] = NULL;
	}
}

/* ---- reading nodes ---- */

/* The cached entry is the node @p names (not a stale copy of a reused
 * address).  The transaction's own nodes have no csum in their parent yet. */
static bool node_current(const struct btree *t, const struct bcache_node *n,
			 const struct bptr *p)
{
	if (bnode_addr(n->buf) != p->addr || bnode_gen(n->buf) != p->gen)
		return false;
	if (t->in_trans && p->gen == t->tgen)
		return n->dirty;
	return !n->dirty && bnode_stored_csum(n->buf) == p->csum;
}

static int check_node(const struct btree *t, const void *b, unsigned level,
		      const struct bkey *lo, const struct bkey *hi)
{
	struct bnode_hdr h;
	char why[128];

	if (bnode_check(b, why, sizeof(why)))
		return -EUCLEAN;
	bnode_hdr(b, &h);
	if (h.level != level || h.owner != t->owner || memcmp(h.fs_uuid, t->fs_uuid, 16))
		return -EUCLEAN;
	return bnode_check_range(b, lo, hi, why, sizeof(why));
}

/* The node @p names at @level, whose keys must lie in [lo, hi), with a
 * reference: from the cache, or read (verified through @p) and checked. */
static int get_node(struct btree *t, const struct bptr *p, unsigned level,
		    const struct bkey *lo, const struct bkey *hi, struct bcache_node **out)
{
	struct bcache_node *n = bcache_get(t->cache, p->addr);
	int ret;

	*out = NULL;
	if (n) {
		if (node_current(t, n, p)) {
			*out = n;
			return 0;
		}
		if (n->dirty) {		/* the address is the transaction's: a bug */
			bcache_put(t->cache, n);
			return -EUCLEAN;
		}
		bcache_forget(t->cache, n);
		bcache_put(t->cache, n);
	}
	ret = bcache_alloc(t->cache, p->addr, &n);
	if (ret)
		return ret;
	ret = t->store->ops->read(t->store->ctx, p, n->buf);
	if (!ret)
		ret = check_node(t, n->buf, level, lo, hi);
	if (ret) {
		bcache_put(t->cache, n);
		return ret;
	}
	bcache_insert(t->cache, &n);
	*out = n;
	return 0;
}

/* Bounds of child s of path node l, into level l - 1. */
static void child_range(struct path *pa, unsigned l, unsigned s)
{
	const void *b = pa->n[l]->buf;

	bnode_key(b, s, &pa->lo[l - 1]);
	if (s + 1 < bnode_nritems(b)) {
		bnode_key(b, s + 1, &pa->hi[l - 1]);
		pa->has_hi[l - 1] = true;
	} else {
		pa->hi[l - 1] = pa->hi[l];
		pa->has_hi[l - 1] = pa->has_hi[l];
	}
}

static int get_child(struct btree *t, struct path *pa, unsigned l)
{
	struct bptr p;

	child_range(pa, l, pa->slot[l]);
	bnode_ptr(pa->n[l]->buf, pa->slot[l], &p);
	bcache_put(t->cache, pa->n[l - 1]);
	return get_node(t, &p, l - 1, &pa->lo[l - 1], pa->has_hi[l - 1] ? &pa->hi[l - 1] : NULL,
			&pa->n[l - 1]);
}

/* Fill pa with the path from the root to the leaf that holds @k's place
 * (the tree is not empty).  pa->slot[0] is not set. */
static int descend(struct btree *t, struct path *pa, const struct bkey *k)
{
	unsigned l = t->root.level;
	int ret;

	memset(pa, 0, sizeof(*pa));
	pa->top = l;
	pa->lo[l] = bkey_min;
	ret = get_node(t, &t->root.ptr, l, &bkey_min, NULL, &pa->n[l]);
	for (; !ret && l > 0; l--) {
		unsigned i;

		/* Key 0 is the node's lower bound, so i > 0 when not found. */
		if (!bnode_search(pa->n[l]->buf, k, &i) && i)
			i--;
		pa->slot[l] = i;
		ret = get_child(t, pa, l);
	}
	return ret;
}

/* ---- the transaction's nodes ---- */

static int push(void **arr, size_t *n, size_t *cap, size_t elem)
{
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 64;
		void *p = realloc(*arr, nc * elem);

		if (!p)
			return -ENOMEM;
		*arr = p;
		*cap = nc;
	}
	return 0;
}

/* A new dirty node of this transaction with a reference for the caller
 * (and one for the dirty list): a copy of @src (copy-on-write), or an empty
 * node of @level. */
static int new_node(struct btree *t, unsigned level, const void *src,
		    struct bcache_node **out)
{
	struct bcache_node *n, *fresh;
	uint64_t addr;
	int ret;

	ret = push((void **)&t->dirty, &t->ndirty, &t->dirty_cap, sizeof(*t->dirty));
	if (ret)
		return ret;
	ret = t->store->ops->alloc(t->store->ctx, &addr);
	if (ret)
		return ret;
	ret = bcache_alloc(t->cache, addr, &n);
	if (ret) {
		t->store->ops->free(t->store->ctx, addr);
		return ret;
	}
	if (src) {
		memcpy(n->buf, src, BNODE_SIZE);
		bnode_set_addr_gen(n->buf, addr, t->tgen);
	} else {
		bnode_init(n->buf, level, addr, t->tgen, t->owner, t->fs_uuid);
	}
	n->dirty = true;
	bcache_drop_addr(t->cache, addr);	/* a stale clean copy */
	fresh = n;
	bcache_insert(t->cache, &n);
	if (n != fresh) {	/* the store gave out an address in use */
		bcache_put(t->cache, n);
		return -EUCLEAN;
	}
	bcache_hold(t->cache, n);
	t->dirty[t->ndirty++] = n;
	*out = n;
	return 0;
}

/* @n is no longer in the tree. */
static int free_node(struct btree *t, struct bcache_node *n)
{
	uint64_t addr = n->addr;
	int ret;

	if (bnode_gen(n->buf) == t->tgen && n->dirty) {
		bcache_forget(t->cache, n);
		t->store->ops->free(t->store->ctx, addr);
		return 0;
	}
	ret = push((void **)&t->freed, &t->nfreed, &t->freed_cap, sizeof(*t->freed));
	if (!ret)
		t->freed[t->nfreed++] = addr;
	return ret;
}

/* Make *np (pointed to by slot @ps of @parent, or the root when parent is
 * NULL) the transaction's own, copying it if an older generation wrote it. */
static int cow_node(struct btree *t, struct bcache_node **np, struct bcache_node *parent,
		    unsigned ps)
{
	struct bcache_node *o = *np, *n;
	struct bptr p;
	int ret;

	if (bnode_gen(o->buf) == t->tgen)
		return 0;
	ret = new_node(t, bnode_level(o->buf), o->buf, &n);
	if (ret)
		return ret;
	ret = free_node(t, o);
	if (ret) {
		bcache_put(t->cache, n);
		return ret;
	}
	p = (struct bptr){ n->addr, t->tgen, 0 };
	if (parent)
		bnode_set_ptr(parent->buf, ps, &p);
	else
		t->root.ptr = p;
	bcache_put(t->cache, o);
	*np = n;
	t->cows++;
	return 0;
}

static int cow_path(struct btree *t, struct path *pa)
{
	for (int l = (int)pa->top; l >= 0; l--) {
		struct bcache_node *parent = l == (int)pa->top ? NULL : pa->n[l + 1];
		int ret = cow_node(t, &pa->n[l], parent, parent ? pa->slot[l + 1] : 0);

		if (ret)
			return ret;
	}
	return 0;
}

/* ---- split ---- */

/* Put a new root above the path's root. */
static int grow(struct btree *t, struct path *pa)
{
	unsigned top = pa->top;
	struct bcache_node *r;
	int ret;

	if (top + 1 >= BNODE_MAX_LEVEL)
		return -EFBIG;
	ret = new_node(t, top + 1, NULL, &r);
	if (ret)
		return ret;
	bnode_ptr_insert(r->buf, 0, &bkey_min, &t->root.ptr);
	t->root.ptr = (struct bptr){ r->addr, t->tgen, 0 };
	t->root.level = top + 1;
	pa->top = top + 1;
	pa->n[top + 1] = r;
	pa->slot[top + 1] = 0;
	pa->lo[top + 1] = bkey_min;
	pa->has_hi[top + 1] = false;
	return 0;
}

/* Where to cut items: about half of the bytes on each side, both sides
 * non-empty (a leaf that needs a split has at least two items). */
static unsigned split_point(const void *b)
{
	unsigned nr = bnode_nritems(b), half = bnode_used(b) / 2, m = 1;

	while (m + 1 < nr && bnode_span_bytes(b, 0, m) < half)
		m++;
	return m;
}

/* Split path node l (the transaction's own) into two; the path continues
 * in the half where @k belongs. */
static int split(struct btree *t, struct path *pa, unsigned l, const struct bkey *k)
{
	struct bcache_node *r;
	struct bnode_hdr h;
	struct bkey sep;
	unsigned m, nr, ps;
	void *b;
	int ret;

	if (l == pa->top)
		ret = grow(t, pa);
	else if (bnode_nritems(pa->n[l + 1]->buf) >= BNODE_MAX_PTRS)
		ret = split(t, pa, l + 1, k);
	else
		ret = 0;
	if (ret)
		return ret;
	b = pa->n[l]->buf;
	nr = bnode_nritems(b);
	m = split_point(b);
	ret = new_node(t, l, NULL, &r);
	if (ret)
		return ret;
	bnode_append(r->buf, b, m, nr);
	bnode_truncate(b, m);
	bnode_key(r->buf, 0, &sep);
	/* The halves' ranges: [min, sep) and [sep, max]. */
	bnode_hdr(b, &h);
	bnode_set_min(r->buf, &sep);
	bnode_set_max(r->buf, &h.max);
	bnode_set_range(b, &h.min, &sep);
	ps = pa->slot[l + 1];
	bnode_ptr_insert(pa->n[l + 1]->buf, ps + 1, &sep, &(struct bptr){ r->addr, t->tgen, 0 });
	if (bkey_cmp(k, &sep) >= 0) {
		bcache_put(t->cache, pa->n[l]);
		pa->n[l] = r;
		pa->slot[l + 1] = ps + 1;
		pa->lo[l] = sep;
		if (l)
			pa->slot[l] -= m;
	} else {
		bcache_put(t->cache, r);
		pa->hi[l] = sep;
		pa->has_hi[l] = true;
	}
	t->splits++;
	return 0;
}

/* ---- merge and rebalance ---- */

/* Even out the bytes of two siblings that do not fit in one node. */
static int redistribute(void *L, void *R)
{
	unsigned ul = bnode_used(L), ur = bnode_used(R), half = (ul + ur) / 2;
	unsigned nl = bnode_nritems(L), nrr = bnode_nritems(R), k = 1;
	struct bnode_hdr h;
	void *tmp;

	if (ul < ur) {
		while (k + 1 < nrr && ul + bnode_span_bytes(R, 0, k + 1) <= half)
			k++;
		bnode_append(L, R, 0, k);
		bnode_drop_front(R, k);
		return 0;
	}
	while (k + 1 < nl && ur + bnode_span_bytes(L, nl - k - 1, nl) <= half)
		k++;
	tmp = malloc(BNODE_SIZE);
	if (!tmp)
		return -ENOMEM;
	bnode_hdr(R, &h);
	bnode_init(tmp, h.level, h.addr, h.gen, h.owner, h.fs_uuid);
	bnode_set_min(tmp, &h.min);	/* (the caller moves min) */
	bnode_set_max(tmp, &h.max);
	bnode_append(tmp, L, nl - k, nl);
	bnode_append(tmp, R, 0, nrr);
	memcpy(R, tmp, BNODE_SIZE);
	free(tmp);
	bnode_truncate(L, nl - k);
	return 0;
}

/* Single-child roots give way to their child. */
static int shrink_root(struct btree *t, struct path *pa)
{
	while (pa->top > 0 && bnode_nritems(pa->n[pa->top]->buf) == 1) {
		int ret;

		bnode_ptr(pa->n[pa->top]->buf, 0, &t->root.ptr);
		t->root.level = pa->top - 1;
		ret = free_node(t, pa->n[pa->top]);
		if (ret)
			return ret;
		pa->top--;
	}
	return 0;
}

/* Path node l (the transaction's own) and its sibling at slot ss of the
 * parent: merge them, or share their items. */
static int fix_pair(struct btree *t, struct path *pa, unsigned l, unsigned ss, bool *merged)
{
	struct bcache_node *parent = pa->n[l + 1], *sib, *L, *R;
	unsigned ps = pa->slot[l + 1], rs = ss < ps ? ps : ss;
	struct bptr p;
	struct bkey lo, hi, sep;
	bool has_hi;
	int ret;

	bnode_key(parent->buf, ss, &lo);
	has_hi = ss + 1 < bnode_nritems(parent->buf);
	if (has_hi)
		bnode_key(parent->buf, ss + 1, &hi);
	else
		hi = pa->hi[l + 1], has_hi = pa->has_hi[l + 1];
	bnode_ptr(parent->buf, ss, &p);
	ret = get_node(t, &p, l, &lo, has_hi ? &hi : NULL, &sib);
	if (ret)
		return ret;
	*merged = bnode_used(sib->buf) + bnode_used(pa->n[l]->buf) <= BNODE_USABLE;
	/* The right node of a merge is only read: no copy for it. */
	if (!*merged || ss < ps)
		ret = cow_node(t, &sib, parent, ss);
	if (ret)
		goto out;
	L = ss < ps ? sib : pa->n[l];
	R = ss < ps ? pa->n[l] : sib;
	if (*merged) {
		struct bnode_hdr rh;

		bnode_append(L->buf, R->buf, 0, bnode_nritems(R->buf));
		bnode_hdr(R->buf, &rh);
		bnode_set_max(L->buf, &rh.max);
		bnode_ptr_delete(parent->buf, rs);
		ret = free_node(t, R);
		t->merges++;
	} else {
		struct bnode_hdr lh;

		ret = redistribute(L->buf, R->buf);
		bnode_key(R->buf, 0, &sep);
		bnode_set_key(parent->buf, rs, &sep);
		/* The boundary moved to sep: [L.min, sep) and [sep, R.max]. */
		bnode_hdr(L->buf, &lh);
		bnode_set_range(L->buf, &lh.min, &sep);
		bnode_set_min(R->buf, &sep);
		t->rebalances++;
	}
out:
	bcache_put(t->cache, sib);
	return ret;
}

/* After a delete from path node l: restore the fill of the path upwards. */
static int rebalance(struct btree *t, struct path *pa, unsigned l)
{
	for (;;) {
		unsigned pnr, ps;
		bool merged;
		int ret;

		if (l == pa->top)
			return shrink_root(t, pa);
		if (bnode_used(pa->n[l]->buf) >= BNODE_USABLE / 4)
			return 0;
		pnr = bnode_nritems(pa->n[l + 1]->buf);
		ps = pa->slot[l + 1];
		if (pnr > 1) {
			ret = fix_pair(t, pa, l, ps ? ps - 1 : ps + 1, &merged);
			if (ret || !merged)
				return ret;
		}
		l++;
	}
}

/* ---- public: open, lookup, change ---- */

int bt_open(struct btree *t, struct bstore *s, struct bcache *c, uint64_t owner,
	    const uint8_t fs_uuid[16], const struct broot *root)
{
	memset(t, 0, sizeof(*t));
	t->store = s;
	t->cache = c;
	t->owner = owner;
	memcpy(t->fs_uuid, fs_uuid, 16);
	if (root && root->ptr.addr) {
		if (root->level >= BNODE_MAX_LEVEL)
			return -EINVAL;
		t->committed = *root;
	}
	t->root = t->committed;
	/* Readers never starve the writer (glibc prefers readers by default):
	 * safe because nothing here takes the lock recursively. */
	pthread_rwlockattr_t attr;

	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&t->lock, &attr);
	pthread_rwlockattr_destroy(&attr);
	return 0;
}

static void abort_locked(struct btree *t)
{
	for (size_t i = 0; i < t->ndirty; i++) {
		struct bcache_node *n = t->dirty[i];

		if (n->dirty) {
			uint64_t addr = n->addr;

			bcache_forget(t->cache, n);
			t->store->ops->free(t->store->ctx, addr);
		}
		bcache_put(t->cache, n);
	}
	t->ndirty = 0;
	t->nfreed = 0;
	t->root = t->committed;
	t->in_trans = false;
	t->terr = 0;
	atomic_fetch_add(&t->seq, 1);
}

void bt_close(struct btree *t)
{
	if (t->in_trans)
		abort_locked(t);
	free(t->dirty);
	free(t->freed);
	pthread_rwlock_destroy(&t->lock);
}

int bt_lookup(struct btree *t, const struct bkey *k, void *val, unsigned cap, unsigned *len)
{
	struct path pa;
	unsigned i;
	int ret = -ENOENT;

	pthread_rwlock_rdlock(&t->lock);
	if (!t->root.ptr.addr)
		goto unlock;
	ret = descend(t, &pa, k);
	if (!ret && bnode_search(pa.n[0]->buf, k, &i)) {
		const void *v = bnode_val(pa.n[0]->buf, i, len);

		if (*len > cap)
			ret = -EOVERFLOW;
		else if (*len)
			memcpy(val, v, *len);
	} else if (!ret) {
		ret = -ENOENT;
	}
	path_put(t, &pa);
unlock:
	pthread_rwlock_unlock(&t->lock);
	return ret;
}

int bt_begin(struct btree *t, uint64_t gen)
{
	int ret = 0;

	pthread_rwlock_wrlock(&t->lock);
	if (t->in_trans)
		ret = -EBUSY;
	else if (!gen || gen <= t->committed.ptr.gen)
		ret = -EINVAL;
	else {
		t->in_trans = true;
		t->tgen = gen;
		t->terr = 0;
	}
	pthread_rwlock_unlock(&t->lock);
	return ret;
}

/* Under the exclusive lock: may a change run? */
static int change_ok(struct btree *t, const struct bkey *k)
{
	if (!t->in_trans || k->off > BKEY_OFF_MAX)
		return -EINVAL;
	return t->terr;
}

static int insert_locked(struct btree *t, const struct bkey *k, const void *val, unsigned len)
{
	struct bcache_node *n;
	struct path pa;
	unsigned i;
	int ret;

	if (!t->root.ptr.addr) {
		ret = new_node(t, 0, NULL, &n);
		if (ret)
			return ret;
		t->root = (struct broot){ { n->addr, t->tgen, 0 }, 0 };
		bcache_put(t->cache, n);
	}
	ret = descend(t, &pa, k);
	if (!ret)
		ret = cow_path(t, &pa);
	if (ret)
		goto out;
	if (bnode_search(pa.n[0]->buf, k, &i))
		bnode_leaf_delete(pa.n[0]->buf, i);
	if (bnode_free(pa.n[0]->buf) < BNODE_ITEM + len) {
		ret = split(t, &pa, 0, k);
		if (ret)
			goto out;
		bnode_search(pa.n[0]->buf, k, &i);
		/* BNODE_MAX_VAL makes this impossible; never overrun a node. */
		if (bnode_free(pa.n[0]->buf) < BNODE_ITEM + len) {
			ret = -EUCLEAN;
			goto out;
		}
	}
	bnode_leaf_insert(pa.n[0]->buf, i, k, val, len);
out:
	path_put(t, &pa);
	return ret;
}

int bt_insert(struct btree *t, const struct bkey *k, const void *val, unsigned len)
{
	int ret;

	if (len > BNODE_MAX_VAL)
		return -E2BIG;
	pthread_rwlock_wrlock(&t->lock);
	ret = change_ok(t, k);
	if (!ret) {
		ret = insert_locked(t, k, val, len);
		atomic_fetch_add(&t->seq, 1);
		if (ret && !soft_err(ret))
			t->terr = ret;
	}
	pthread_rwlock_unlock(&t->lock);
	return ret;
}

static int delete_locked(struct btree *t, const struct bkey *k)
{
	struct path pa;
	unsigned i;
	int ret;

	if (!t->root.ptr.addr)
		return -ENOENT;
	ret = descend(t, &pa, k);
	if (!ret && !bnode_search(pa.n[0]->buf, k, &i))
		ret = -ENOENT;
	if (!ret)
		ret = cow_path(t, &pa);
	if (!ret) {
		bnode_leaf_delete(pa.n[0]->buf, i);
		ret = rebalance(t, &pa, 0);
	}
	path_put(t, &pa);
	return ret;
}

int bt_delete(struct btree *t, const struct bkey *k)
{
	int ret;

	pthread_rwlock_wrlock(&t->lock);
	ret = change_ok(t, k);
	if (!ret) {
		ret = delete_locked(t, k);
		atomic_fetch_add(&t->seq, 1);
		if (ret && !soft_err(ret))
			t->terr = ret;
	}
	pthread_rwlock_unlock(&t->lock);
	return ret;
}

/* ---- commit ---- */

/* Write @n and, first, every child of this transaction below it; *csum
 * gets @n's. */
static int write_node(struct btree *t, struct bcache_node *n, uint64_t *csum, size_t *count)
{
	void *b = n->buf;
	int ret;

	for (unsigned i = 0; bnode_level(b) && i < bnode_nritems(b); i++) {
		struct bcache_node *c;
		struct bptr p;

		bnode_ptr(b, i, &p);
		if (p.gen != t->tgen)
			continue;
		c = bcache_get(t->cache, p.addr);
		if (!c || !c->dirty) {	/* the transaction lost a node: a bug */
			bcache_put(t->cache, c);
			return -EUCLEAN;
		}
		ret = write_node(t, c, &p.csum, count);
		bcache_put(t->cache, c);
		if (ret)
			return ret;
		bnode_set_ptr(b, i, &p);
	}
	*csum = bnode_seal(b);
	(*count)++;
	return t->store->ops->write(t->store->ctx, n->addr, b);
}

static int commit_locked(struct btree *t)
{
	size_t written = 0, live = 0;
	int ret = 0;

	if (t->root.ptr.addr && t->root.ptr.gen == t->tgen) {
		struct bcache_node *r = bcache_get(t->cache, t->root.ptr.addr);

		if (!r)
			return -EUCLEAN;
		ret = write_node(t, r, &t->root.ptr.csum, &written);
		bcache_put(t->cache, r);
		if (ret)
			return ret;
	}
	for (size_t i = 0; i < t->ndirty; i++)
		live += t->dirty[i]->dirty;
	/* Every node the transaction made is reachable, or it leaked. */
	if (live != written)
		return -EUCLEAN;
	if (t->store->ops->flush)
		ret = t->store->ops->flush(t->store->ctx);
	if (ret)
		return ret;
	for (size_t i = 0; i < t->ndirty; i++) {
		if (t->dirty[i]->dirty)
			bcache_set_dirty(t->cache, t->dirty[i], false);
		bcache_put(t->cache, t->dirty[i]);
	}
	t->ndirty = 0;
	t->written += written;
	return 0;
}

int bt_commit(struct btree *t, struct broot *root, uint64_t **freed, size_t *nfreed)
{
	int ret;

	pthread_rwlock_wrlock(&t->lock);
	ret = t->in_trans ? t->terr : -EINVAL;
	if (!ret)
		ret = commit_locked(t);
	if (!ret) {
		t->committed = t->root;
		t->in_trans = false;
		*root = t->root;
		*freed = t->freed;
		*nfreed = t->nfreed;
		t->freed = NULL;
		t->nfreed = t->freed_cap = 0;
	} else if (!soft_err(ret)) {
		t->terr = ret;
	}
	pthread_rwlock_unlock(&t->lock);
	return ret;
}

void bt_abort(struct btree *t)
{
	pthread_rwlock_wrlock(&t->lock);
	if (t->in_trans)
		abort_locked(t);
	pthread_rwlock_unlock(&t->lock);
}

void bt_release(struct btree *t, const uint64_t *freed, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		bcache_drop_addr(t->cache, freed[i]);
		t->store->ops->free(t->store->ctx, freed[i]);
	}
}

int bt_trans_freed(struct btree *t, uint64_t **freed, size_t *n)
{
	int ret = 0;

	*freed = NULL;
	*n = 0;
	pthread_rwlock_rdlock(&t->lock);
	if (t->in_trans && t->nfreed) {
		*freed = malloc(t->nfreed * sizeof(**freed));
		if (*freed) {
			memcpy(*freed, t->freed, t->nfreed * sizeof(**freed));
			*n = t->nfreed;
		} else {
			ret = -ENOMEM;
		}
	}
	pthread_rwlock_unlock(&t->lock);
	return ret;
}

/* ---- iteration ---- */

int bt_iter_init(struct bt_iter *it, struct btree *t, const struct bkey *start)
{
	memset(it, 0, sizeof(*it));
	it->t = t;
	it->pos = *start;
	it->leaf = malloc(BNODE_SIZE);
	return it->leaf ? 0 : -ENOMEM;
}

void bt_iter_free(struct bt_iter *it)
{
	free(it->leaf);
	it->leaf = NULL;
}

/* Move the path to the next (dir > 0) or previous leaf; -ENOENT at the end. */
static int step_leaf(struct btree *t, struct path *pa, int dir)
{
	unsigned l;
	int ret = 0;

	for (l = 1; l <= pa->top; l++)
		if (dir > 0 ? pa->slot[l] + 1 < bnode_nritems(pa->n[l]->buf) : pa->slot[l] > 0)
			break;
	if (l > pa->top)
		return -ENOENT;
	pa->slot[l] += dir > 0 ? 1 : -1;
	for (; !ret && l > 0; l--) {
		ret = get_child(t, pa, l);
		if (!ret && l > 1)
			pa->slot[l - 1] = dir > 0 ? 0 : bnode_nritems(pa->n[l - 1]->buf) - 1;
	}
	return ret;
}

/* Copy the leaf holding the first item >= k (dir > 0) or the last item < k
 * (dir < 0) into the iterator. */
static int iter_find(struct bt_iter *it, const struct bkey *k, int dir)
{
	struct btree *t = it->t;
	struct path pa;
	unsigned i = 0;
	int ret = -ENOENT;

	it->have = false;
	pthread_rwlock_rdlock(&t->lock);
	if (!t->root.ptr.addr)
		goto unlock;
	ret = descend(t, &pa, k);
	if (!ret)
		bnode_search(pa.n[0]->buf, k, &i);
	while (!ret) {
		if (dir > 0 && i < bnode_nritems(pa.n[0]->buf))
			break;
		if (dir < 0 && i > 0) {
			i--;
			break;
		}
		ret = step_leaf(t, &pa, dir);
		if (!ret)
			i = dir > 0 ? 0 : bnode_nritems(pa.n[0]->buf);
	}
	if (!ret) {
		memcpy(it->leaf, pa.n[0]->buf, BNODE_SIZE);
		it->idx = i;
		it->seq = atomic_load(&t->seq);
		it->have = true;
	}
	path_put(t, &pa);
unlock:
	pthread_rwlock_unlock(&t->lock);
	return ret;
}

static int iter_emit(struct bt_iter *it, struct bkey *k, const void **val, unsigned *len)
{
	bnode_key(it->leaf, it->idx, &it->pos);
	it->started = true;
	*k = it->pos;
	*val = bnode_val(it->leaf, it->idx, len);
	return 0;
}

static bool iter_fresh(const struct bt_iter *it)
{
	return it->have && it->started && it->seq == atomic_load(&it->t->seq);
}

int bt_iter_next(struct bt_iter *it, struct bkey *k, const void **val, unsigned *len)
{
	struct bkey from = it->pos;
	int ret;

	if (iter_fresh(it) && it->idx + 1 < bnode_nritems(it->leaf)) {
		it->idx++;
		return iter_emit(it, k, val, len);
	}
	if (it->started && !bkey_succ(&from))
		return -ENOENT;
	ret = iter_find(it, &from, 1);
	return ret ? ret : iter_emit(it, k, val, len);
}

int bt_iter_prev(struct bt_iter *it, struct bkey *k, const void **val, unsigned *len)
{
	int ret;

	if (iter_fresh(it) && it->idx > 0) {
		it->idx--;
		return iter_emit(it, k, val, len);
	}
	ret = iter_find(it, &it->pos, -1);
	return ret ? ret : iter_emit(it, k, val, len);
}

/* ---- verification ---- */

static int verify_node(struct btree *t, const struct bptr *p, unsigned level,
		       const struct bkey *lo, const struct bkey *hi, uint64_t *nitems,
		       uint64_t *nnodes)
{
	struct bcache_node *n;
	unsigned nr;
	int ret;

	ret = get_node(t, p, level, lo, hi, &n);
	if (ret)
		return ret;
	/* A cached node was checked when read or made: check it again. */
	ret = check_node(t, n->buf, level, lo, hi);
	if (!ret && !n->dirty && !bnode_matches(n->buf, p))
		ret = -EUCLEAN;
	nr = bnode_nritems(n->buf);
	(*nnodes)++;
	if (!level)
		*nitems += nr;
	for (unsigned i = 0; !ret && level && i < nr; i++) {
		struct bkey clo, chi;
		struct bptr c;

		bnode_key(n->buf, i, &clo);
		if (i + 1 < nr)
			bnode_key(n->buf, i + 1, &chi);
		bnode_ptr(n->buf, i, &c);
		ret = verify_node(t, &c, level - 1, &clo, i + 1 < nr ? &chi : hi, nitems, nnodes);
	}
	bcache_put(t->cache, n);
	return ret;
}

int bt_verify(struct btree *t, uint64_t *nitems, uint64_t *nnodes)
{
	uint64_t items = 0, nodes = 0;
	int ret = 0;

	pthread_rwlock_rdlock(&t->lock);
	if (t->root.ptr.addr)
		ret = verify_node(t, &t->root.ptr, t->root.level, &bkey_min, NULL, &items, &nodes);
	pthread_rwlock_unlock(&t->lock);
	if (nitems)
		*nitems = items;
	if (nnodes)
		*nnodes = nodes;
	return ret;
}
