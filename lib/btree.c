// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * btree: copy-on-write B+tree of format v2 over a node store and a node
 * cache (see btree.h for transactions and locking, bnode.h for the node
 * format).
 *
 * A change locks the path root -> leaf (descend: shared hand over hand
 * above the levels it may change, exclusive from there down), copies every
 * node of its exclusive part that an older generation wrote (top-down: the
 * parent is already the transaction's own when its pointer is redirected),
 * then changes the leaf.  A full node splits into a new right sibling (its
 * parent split first if that is full, the root grows a level); a node under
 * a quarter full after a delete merges with a sibling when both fit in one
 * node, otherwise takes items from it so both are about half full; a root
 * with a single child gives way to it.  A delete of a missing key copies
 * nothing.
 *
 * No node lock is held across a node read: a descent that misses the cache
 * lets go of every node lock, reads the node (the cache keeps it: the
 * descent pins it), and starts again from the root.
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
#include "btree_i.h"

static bool soft_err(int ret)
{
	return ret == -ENOENT || ret == -EINVAL || ret == -E2BIG || ret == -EOVERFLOW;
}

/* ---- locks ---- */

static void node_lock(struct bcache_node *n, int mode)
{
	if (mode == LK_X)
		pthread_rwlock_wrlock(&n->lock);
	else if (mode == LK_S)
		pthread_rwlock_rdlock(&n->lock);
}

static void node_unlock(struct bcache_node *n, int mode)
{
	if (mode != LK_NONE)
		pthread_rwlock_unlock(&n->lock);
}

static void root_lock(struct btree *t, struct path *pa, int mode)
{
	if (mode == LK_X)
		pthread_rwlock_wrlock(&t->root_lock);
	else
		pthread_rwlock_rdlock(&t->root_lock);
	pa->rootm = mode;
}

static void root_unlock(struct btree *t, struct path *pa)
{
	if (pa->rootm != LK_NONE)
		pthread_rwlock_unlock(&t->root_lock);
	pa->rootm = LK_NONE;
}

static void drop(struct btree *t, struct bcache_node **np, unsigned char *mode)
{
	if (*np) {
		node_unlock(*np, *mode);
		bcache_put(t->cache, *np);
	}
	*np = NULL;
	*mode = LK_NONE;
}

/* Let go of every level above @l (l = -1: everything) and the root. */
static void unlock_above(struct btree *t, struct path *pa, int l)
{
	for (int i = BNODE_MAX_LEVEL - 1; i > l; i--)
		drop(t, &pa->n[i], &pa->mode[i]);
	root_unlock(t, pa);
}

void btp_release(struct btree *t, struct path *pa)
{
	unlock_above(t, pa, -1);
	for (unsigned l = 0; l < BNODE_MAX_LEVEL; l++) {
		unsigned char x = LK_X;

		drop(t, &pa->sib[l], &x);
	}
}

void btp_init(struct path *pa)
{
	memset(pa, 0, sizeof(*pa));
}

static void pin(struct btree *t, struct path *pa, struct bcache_node *n)
{
	if (pa->npin == NPINS) {
		bcache_put(t->cache, pa->pin[0]);
		memmove(pa->pin, pa->pin + 1, (NPINS - 1) * sizeof(pa->pin[0]));
		pa->npin--;
	}
	pa->pin[pa->npin++] = n;
}

void btp_unpin(struct btree *t, struct path *pa)
{
	while (pa->npin)
		bcache_put(t->cache, pa->pin[--pa->npin]);
}

/* ---- reading nodes ---- */

/* The cached entry is the node @p names (not a stale copy of a reused
 * address).  The transaction's own nodes have no csum in their parent yet.
 * Under the node's lock (or with the tree quiet). */
static bool node_current(const struct btree *t, const struct bcache_node *n,
			 const struct bptr *p)
{
	if (bnode_addr(n->buf) != p->addr || bnode_gen(n->buf) != p->gen)
		return false;
	if (t->in_trans && p->gen == t->tgen)
		return n->dirty;
	return !n->dirty && bnode_stored_csum(n->buf) == p->csum;
}

int btp_check_node(const struct btree *t, const void *b, unsigned level,
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

/* The cached node @p names at @level (keys in [lo, hi)), locked in @mode,
 * with a reference.  Called with its parent locked (or the root lock held),
 * so the pointer is current.  -EAGAIN: not cached; pa->miss names it. */
int btp_node_get(struct btree *t, struct path *pa, const struct bptr *p, unsigned level,
		    const struct bkey *lo, const struct bkey *hi, int mode,
		    struct bcache_node **out)
{
	struct bcache_node *n = bcache_get(t->cache, p->addr);

	*out = NULL;
	if (n) {
		bool bad;

		if (mode == LK_XTRY) {
			if (pthread_rwlock_trywrlock(&n->lock)) {
				pa->wait = n;
				return -EAGAIN;
			}
			mode = LK_X;
		} else {
			node_lock(n, mode);
		}
		if (node_current(t, n, p)) {
			*out = n;
			return 0;
		}
		bad = n->dirty;		/* the address is the transaction's: a bug */
		if (!bad)
			bcache_forget(t->cache, n);
		node_unlock(n, mode);
		bcache_put(t->cache, n);
		if (bad)
			return -EUCLEAN;
	}
	pa->miss = (struct miss){ true, *p, level, *lo, hi ? *hi : bkey_max, hi != NULL };
	return -EAGAIN;
}

/* Read the node pa->miss names (verified through its pointer, checked)
 * into the cache and pin it.  No node lock is held. */
int btp_load_miss(struct btree *t, struct path *pa)
{
	struct miss *m = &pa->miss;
	struct bcache_node *n;
	int ret;

	if (!m->want)
		return 0;
	m->want = false;
	ret = bcache_alloc(t->cache, m->p.addr, &n);
	if (ret)
		return ret;
	ret = t->store->ops->read(t->store->ctx, &m->p, n->buf, &n->chain);
	if (!ret)
		ret = btp_check_node(t, n->buf, m->level, &m->lo, m->has_hi ? &m->hi : NULL);
	if (ret) {
		bcache_put(t->cache, n);
		return ret;
	}
	bcache_insert(t->cache, &n);
	pin(t, pa, n);
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

static int get_level(struct btree *t, struct path *pa, const struct bptr *p, unsigned l,
		     int mode)
{
	int ret = btp_node_get(t, pa, p, l, &pa->lo[l], pa->has_hi[l] ? &pa->hi[l] : NULL, mode,
			   &pa->n[l]);

	pa->mode[l] = ret ? LK_NONE : mode;
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

/* A new dirty node of this transaction, locked exclusive, with a reference
 * for the caller (and one for the dirty list): a copy of @src
 * (copy-on-write), or an empty node of @level. */
static int new_node(struct btree *t, unsigned level, const void *src,
		    struct bcache_node **out)
{
	struct bcache_node *n, *fresh;
	uint64_t addr;
	int ret;

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
	pthread_mutex_lock(&t->mu);
	ret = push((void **)&t->dirty, &t->ndirty, &t->dirty_cap, sizeof(*t->dirty));
	if (!ret)
		t->dirty[t->ndirty++] = n;
	pthread_mutex_unlock(&t->mu);
	if (ret) {
		bcache_forget(t->cache, n);
		bcache_put(t->cache, n);
		t->store->ops->free(t->store->ctx, addr);
		return ret;
	}
	bcache_hold(t->cache, n);
	/* Nothing points at it yet, so it is free: a try lock says so
	 * without an order against the locks held (ThreadSanitizer). */
	if (pthread_rwlock_trywrlock(&n->lock))
		node_lock(n, LK_X);
	*out = n;
	return 0;
}

/* @n (locked exclusive, its parent too) is no longer in the tree. */
static int free_node(struct btree *t, struct bcache_node *n)
{
	uint64_t addr = n->addr;
	int ret;

	if (bnode_gen(n->buf) == t->tgen && n->dirty) {
		bcache_forget(t->cache, n);
		t->store->ops->free(t->store->ctx, addr);
		return 0;
	}
	pthread_mutex_lock(&t->mu);
	if (t->young_gen && bnode_gen(n->buf) >= t->young_gen) {
		ret = push((void **)&t->young, &t->nyoung, &t->young_cap, sizeof(*t->young));
		if (!ret)
			t->young[t->nyoung++] = addr;
	} else {
		ret = push((void **)&t->freed, &t->nfreed, &t->freed_cap, sizeof(*t->freed));
		if (!ret)
			t->freed[t->nfreed++] = addr;
	}
	pthread_mutex_unlock(&t->mu);
	return ret;
}

/* Make *np (locked exclusive) the transaction's own, copying it if an older
 * generation wrote it; slot @ps of @parent (exclusive) points to it, or the
 * root does when parent is NULL (root lock exclusive).  The copy replaces
 * *np, locked exclusive. */
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
		node_unlock(n, LK_X);
		bcache_put(t->cache, n);
		return ret;
	}
	p = (struct bptr){ n->addr, t->tgen, 0, 0 };
	if (parent)
		bnode_set_ptr(parent->buf, ps, &p);
	else
		t->root.ptr = p;
	node_unlock(o, LK_X);
	bcache_put(t->cache, o);
	*np = n;
	t->cows++;
	return 0;
}

/* ---- descent ---- */

/* Take the root lock for @op: exclusive when the change may replace the
 * root (it starts exclusive above the root's level, or makes the first
 * node).  Sets the path's top. */
static int lock_root_for(struct btree *t, struct path *pa, const struct op *op, unsigned xl)
{
	struct bcache_node *n = NULL;
	int ret;

	root_lock(t, pa, LK_S);
	if ((op->kind == OP_INSERT && !t->root.ptr.addr) ||
	    (op->kind != OP_READ && t->root.ptr.addr && t->root.level < xl)) {
		root_unlock(t, pa);
		root_lock(t, pa, LK_X);
	}
	if (!t->root.ptr.addr) {
		ret = -ENOENT;
		if (op->kind == OP_INSERT && pa->rootm == LK_X)
			ret = new_node(t, 0, NULL, &n);
		if (ret) {
			root_unlock(t, pa);
			return ret;
		}
		t->root = (struct broot){ { n->addr, t->tgen, 0, 0 }, 0 };
		node_unlock(n, LK_X);
		bcache_put(t->cache, n);
	}
	pa->top = t->root.level;
	pa->lo[pa->top] = bkey_min;
	pa->has_hi[pa->top] = false;
	return 0;
}

/* Can what @op does below path node l (or to it) never reach its parent?
 * Then the change needs nothing above l, as long as l is its own. */
static bool node_safe(const struct path *pa, unsigned l, const struct op *op)
{
	const void *b = pa->n[l]->buf;
	unsigned i, vlen = 0;
	bool found;

	if (!l) {
		found = bnode_search(b, op->k, &i);
		if (found)
			bnode_val(b, i, &vlen);
		if (op->kind == OP_INSERT)
			return bnode_free(b) + (found ? BNODE_ITEM + vlen : 0) >= BNODE_ITEM + op->len;
		return !found || !pa->top ||
		       bnode_used(b) - BNODE_ITEM - vlen >= BNODE_USABLE / 4;
	}
	if (op->kind == OP_INSERT)		/* room for a split below */
		return bnode_nritems(b) < BNODE_MAX_PTRS;
	if (l == pa->top)			/* a merge below leaves 2 children */
		return bnode_nritems(b) > 2;
	return bnode_used(b) >= BNODE_USABLE / 4 + BNODE_PTR;	/* stays filled */
}

/* Path node l was just locked.  Shared: let go of its parent (hand over
 * hand).  Exclusive: copy it if need be and let go of everything above it
 * when the change cannot go further up; -EAGAIN with *xl raised when that
 * needs its parent, which is only locked shared. */
static int admit(struct btree *t, struct path *pa, unsigned l, const struct op *op,
		 unsigned *xl)
{
	const void *b = pa->n[l]->buf;
	bool top = l == pa->top, own, safe;
	unsigned i;
	int ret;

	if (pa->mode[l] != LK_X) {
		unlock_above(t, pa, l);
		return 0;
	}
	if (!l && op->kind == OP_DELETE && !bnode_search(b, op->k, &i))
		return -ENOENT;
	own = bnode_gen(b) == t->tgen;
	safe = node_safe(pa, l, op);
	if ((!own || !safe) && (top ? pa->rootm : pa->mode[l + 1]) != LK_X) {
		*xl = l + 1;
		return -EAGAIN;
	}
	if (!own) {
		ret = cow_node(t, &pa->n[l], top ? NULL : pa->n[l + 1], top ? 0 : pa->slot[l + 1]);
		if (ret)
			return ret;
	}
	if (safe)
		unlock_above(t, pa, l);
	return 0;
}

/* Lock the path from the root to the leaf that holds @op->k's place.  A
 * read takes every node shared, hand over hand.  A change does so above
 * level *xl and takes the rest exclusive (see admit), so on return it
 * holds exactly the nodes it may change, all its own.  -EAGAIN: everything
 * was let go; read pa->miss, or retry with the raised *xl. */
static int descend(struct btree *t, struct path *pa, const struct op *op, unsigned *xl)
{
	bool wr = op->kind != OP_READ;
	unsigned l;
	int ret;

	ret = lock_root_for(t, pa, op, *xl);
	if (ret)
		return ret;
	l = pa->top;
	ret = get_level(t, pa, &t->root.ptr, l, wr && l <= *xl ? LK_X : LK_S);
	while (!ret) {
		struct bptr p;
		unsigned i;

		ret = admit(t, pa, l, op, xl);
		if (ret || l <= op->stop)
			break;
		/* Key 0 is the node's lower bound, so i > 0 when not found. */
		if (!bnode_search(pa->n[l]->buf, op->k, &i) && i)
			i--;
		pa->slot[l] = i;
		child_range(pa, l, i);
		bnode_ptr(pa->n[l]->buf, i, &p);
		l--;
		ret = get_level(t, pa, &p, l, wr && l <= *xl ? LK_X : LK_S);
	}
	if (ret)
		btp_release(t, pa);
	return ret;
}

/* The sibling at slot ss of path node l's parent (exclusive), into
 * pa->sib[l]. */
static int sib_get(struct btree *t, struct path *pa, unsigned l, unsigned ss)
{
	const void *pb = pa->n[l + 1]->buf;
	struct bkey lo, hi;
	struct bptr p;
	bool has_hi;

	bnode_key(pb, ss, &lo);
	has_hi = ss + 1 < bnode_nritems(pb);
	if (has_hi)
		bnode_key(pb, ss + 1, &hi);
	else
		hi = pa->hi[l + 1], has_hi = pa->has_hi[l + 1];
	bnode_ptr(pb, ss, &p);
	return btp_node_get(t, pa, &p, l, &lo, has_hi ? &hi : NULL, LK_XTRY, &pa->sib[l]);
}

/* Before a delete changes anything: lock the siblings its merges and
 * rebalances will use (the same walk rebalance makes), so a cache miss
 * restarts it with nothing changed yet. */
static int lock_siblings(struct btree *t, struct path *pa, const struct bkey *k)
{
	const void *leaf = pa->n[0]->buf;
	unsigned i, vlen, used;
	int ret;

	bnode_search(leaf, k, &i);
	bnode_val(leaf, i, &vlen);
	used = bnode_used(leaf) - BNODE_ITEM - vlen;
	for (unsigned l = 0; l < pa->top && used < BNODE_USABLE / 4; l++) {
		const void *pb;
		unsigned ps = pa->slot[l + 1];

		if (pa->mode[l + 1] != LK_X)	/* admit keeps it: a bug */
			return -EUCLEAN;
		pb = pa->n[l + 1]->buf;
		if (bnode_nritems(pb) > 1) {
			ret = sib_get(t, pa, l, ps ? ps - 1 : ps + 1);
			if (ret)
				return ret;
			if (bnode_used(pa->sib[l]->buf) + used > BNODE_USABLE)
				break;
			used = bnode_used(pb) - BNODE_PTR;
		} else {
			used = bnode_used(pb);
		}
	}
	return 0;
}

/* Lock what @op needs (descend), reading missing nodes between tries. */
int btp_lock(struct btree *t, struct path *pa, const struct op *op)
{
	unsigned xl = 0;
	int ret;

	for (;;) {
		ret = descend(t, pa, op, &xl);
		if (!ret && op->kind == OP_DELETE) {
			ret = lock_siblings(t, pa, op->k);
			if (ret)
				btp_release(t, pa);
		}
		if (ret != -EAGAIN)
			return ret;
		if (pa->wait) {
			node_lock(pa->wait, LK_X);
			node_unlock(pa->wait, LK_X);
			bcache_put(t->cache, pa->wait);
			pa->wait = NULL;
		}
		ret = btp_load_miss(t, pa);
		if (ret)
			return ret;
	}
}

/* ---- split ---- */

/* Put a new root above the path's root (root lock exclusive). */
static int grow(struct btree *t, struct path *pa)
{
	unsigned top = pa->top;
	struct bcache_node *r;
	int ret;

	if (pa->rootm != LK_X)		/* admit keeps it: a bug */
		return -EUCLEAN;
	if (top + 1 >= BNODE_MAX_LEVEL)
		return -EFBIG;
	ret = new_node(t, top + 1, NULL, &r);
	if (ret)
		return ret;
	bnode_ptr_insert(r->buf, 0, &bkey_min, &t->root.ptr);
	t->root.ptr = (struct bptr){ r->addr, t->tgen, 0, 0 };
	t->root.level = top + 1;
	pa->top = top + 1;
	pa->n[top + 1] = r;
	pa->mode[top + 1] = LK_X;
	pa->slot[top + 1] = 0;
	pa->lo[top + 1] = bkey_min;
	pa->has_hi[top + 1] = false;
	return 0;
}

/* Split path node l (the transaction's own, exclusive, its parent too)
 * into two; the path continues in the half where @k belongs. */
static int split(struct btree *t, struct path *pa, unsigned l, const struct bkey *k)
{
	struct bcache_node *r;
	struct bnode_hdr h;
	struct bkey sep;
	unsigned m, nr, ps;
	void *b;
	int ret = 0;

	if (l == pa->top)
		ret = grow(t, pa);
	else if (pa->mode[l + 1] != LK_X)	/* admit keeps it: a bug */
		ret = -EUCLEAN;
	else if (bnode_nritems(pa->n[l + 1]->buf) >= BNODE_MAX_PTRS)
		ret = split(t, pa, l + 1, k);
	if (ret)
		return ret;
	b = pa->n[l]->buf;
	nr = bnode_nritems(b);
	m = bnode_split_point(b, k);
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
	bnode_ptr_insert(pa->n[l + 1]->buf, ps + 1, &sep, &(struct bptr){ r->addr, t->tgen, 0, 0 });
	if (bkey_cmp(k, &sep) >= 0) {
		drop(t, &pa->n[l], &pa->mode[l]);
		pa->n[l] = r;
		pa->mode[l] = LK_X;
		pa->slot[l + 1] = ps + 1;
		pa->lo[l] = sep;
		if (l)
			pa->slot[l] -= m;
	} else {
		unsigned char x = LK_X;

		drop(t, &r, &x);
		pa->hi[l] = sep;
		pa->has_hi[l] = true;
	}
	t->splits++;
	t->splits_lvl[l]++;
	return 0;
}

/* ---- merge and rebalance ---- */

/* Single-child roots give way to their child (root lock exclusive). */
static int shrink_root(struct btree *t, struct path *pa)
{
	while (pa->top > 0 && bnode_nritems(pa->n[pa->top]->buf) == 1) {
		int ret;

		if (pa->rootm != LK_X)		/* admit keeps it: a bug */
			return -EUCLEAN;
		bnode_ptr(pa->n[pa->top]->buf, 0, &t->root.ptr);
		t->root.level = pa->top - 1;
		ret = free_node(t, pa->n[pa->top]);
		if (ret)
			return ret;
		pa->top--;
	}
	return 0;
}

/* Path node l was merged into its left sibling (slot ss): the sibling is
 * the path's node now, and the freed one its sibling, released as one
 * (both exclusive).  shrink_root reads the path's nodes: before session 41
 * it found the freed node there, took its one child for the root and lost
 * the rest of the tree. */
static void merged_left(struct path *pa, unsigned l, unsigned ss)
{
	struct bcache_node *gone = pa->n[l];

	pa->n[l] = pa->sib[l];
	pa->sib[l] = gone;
	pa->slot[l + 1] = ss;
	bnode_key(pa->n[l + 1]->buf, ss, &pa->lo[l]);
}

/* Path node l (the transaction's own) and its sibling pa->sib[l] at slot
 * ss of the parent (all exclusive): merge them, or share their items. */
static int fix_pair(struct btree *t, struct path *pa, unsigned l, unsigned ss, bool *merged)
{
	struct bcache_node *parent = pa->n[l + 1], *L, *R;
	unsigned ps = pa->slot[l + 1], rs = ss < ps ? ps : ss;
	struct bkey sep;
	int ret = 0;

	if (!pa->sib[l])		/* lock_siblings took it: a bug */
		return -EUCLEAN;
	*merged = bnode_used(pa->sib[l]->buf) + bnode_used(pa->n[l]->buf) <= BNODE_USABLE;
	/* The right node of a merge is only read: no copy for it. */
	if (!*merged || ss < ps)
		ret = cow_node(t, &pa->sib[l], parent, ss);
	if (ret)
		return ret;
	L = ss < ps ? pa->sib[l] : pa->n[l];
	R = ss < ps ? pa->n[l] : pa->sib[l];
	if (*merged) {
		struct bnode_hdr rh;

		bnode_append(L->buf, R->buf, 0, bnode_nritems(R->buf));
		bnode_hdr(R->buf, &rh);
		bnode_set_max(L->buf, &rh.max);
		bnode_ptr_delete(parent->buf, rs);
		ret = free_node(t, R);
		t->merges++;
		if (ss < ps)	/* the path goes on through the survivor */
			merged_left(pa, l, ss);
	} else {
		struct bnode_hdr lh;

		ret = bnode_redistribute(L->buf, R->buf);
		bnode_key(R->buf, 0, &sep);
		bnode_set_key(parent->buf, rs, &sep);
		/* The boundary moved to sep: [L.min, sep) and [sep, R.max]. */
		bnode_hdr(L->buf, &lh);
		bnode_set_range(L->buf, &lh.min, &sep);
		bnode_set_min(R->buf, &sep);
		t->rebalances++;
	}
	return ret;
}

/* After a delete from path node l: restore the fill of the path upwards,
 * as far as lock_siblings foresaw. */
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
		if (pa->mode[l + 1] != LK_X)	/* admit keeps it: a bug */
			return -EUCLEAN;
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

static void rwlock_init_wpref(pthread_rwlock_t *lock)
{
	pthread_rwlockattr_t attr;

	/* Readers never starve the writer (glibc prefers readers by default):
	 * safe because nothing here takes a lock recursively. */
	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(lock, &attr);
	pthread_rwlockattr_destroy(&attr);
}

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
	rwlock_init_wpref(&t->lock);
	rwlock_init_wpref(&t->root_lock);
	pthread_mutex_init(&t->mu, NULL);
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
	t->nyoung = 0;		/* the committed tree still has them */
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
	free(t->young);
	pthread_rwlock_destroy(&t->lock);
	pthread_rwlock_destroy(&t->root_lock);
	pthread_mutex_destroy(&t->mu);
}

int bt_lookup(struct btree *t, const struct bkey *k, void *val, unsigned cap, unsigned *len)
{
	const struct op op = { OP_READ, k, 0, 0 };
	struct path pa;
	unsigned i;
	int ret;

	btp_init(&pa);
	pthread_rwlock_rdlock(&t->lock);
	ret = btp_lock(t, &pa, &op);
	if (!ret && bnode_search(pa.n[0]->buf, k, &i)) {
		const void *v = bnode_val(pa.n[0]->buf, i, len);

		if (*len > cap)
			ret = -EOVERFLOW;
		else if (*len)
			memcpy(val, v, *len);
	} else if (!ret) {
		ret = -ENOENT;
	}
	btp_release(t, &pa);
	btp_unpin(t, &pa);
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

/* Under the barrier: may a change run? */
static int change_ok(struct btree *t, const struct bkey *k)
{
	if (!t->in_trans || k->off > BKEY_OFF_MAX)
		return -EINVAL;
	return t->terr;
}

static int insert_op(struct btree *t, struct path *pa, const struct bkey *k, const void *val,
		     unsigned len)
{
	const struct op op = { OP_INSERT, k, len, 0 };
	unsigned i;
	int ret;

	ret = btp_lock(t, pa, &op);
	if (ret)
		return ret;
	if (bnode_search(pa->n[0]->buf, k, &i))
		bnode_leaf_delete(pa->n[0]->buf, i);
	if (bnode_free(pa->n[0]->buf) < BNODE_ITEM + len) {
		ret = split(t, pa, 0, k);
		if (!ret)
			bnode_search(pa->n[0]->buf, k, &i);
		/* BNODE_MAX_VAL makes this impossible; never overrun a node. */
		if (!ret && bnode_free(pa->n[0]->buf) < BNODE_ITEM + len)
			ret = -EUCLEAN;
	}
	if (!ret)
		bnode_leaf_insert(pa->n[0]->buf, i, k, val, len);
	/* Before the leaf is let go: an iterator that copies it after sees
	 * the change and a newer seq. */
	atomic_fetch_add(&t->seq, 1);
	btp_release(t, pa);
	return ret;
}

int bt_insert(struct btree *t, const struct bkey *k, const void *val, unsigned len)
{
	struct path pa;
	int ret;

	if (len > BNODE_MAX_VAL)
		return -E2BIG;
	btp_init(&pa);
	pthread_rwlock_rdlock(&t->lock);
	ret = change_ok(t, k);
	if (!ret) {
		ret = insert_op(t, &pa, k, val, len);
		if (ret && !soft_err(ret))
			t->terr = ret;
	}
	btp_unpin(t, &pa);
	pthread_rwlock_unlock(&t->lock);
	return ret;
}

static int delete_op(struct btree *t, struct path *pa, const struct bkey *k)
{
	const struct op op = { OP_DELETE, k, 0, 0 };
	unsigned i;
	int ret;

	ret = btp_lock(t, pa, &op);
	if (ret)
		return ret;
	bnode_search(pa->n[0]->buf, k, &i);	/* admit found it */
	bnode_leaf_delete(pa->n[0]->buf, i);
	ret = rebalance(t, pa, 0);
	atomic_fetch_add(&t->seq, 1);
	btp_release(t, pa);
	return ret;
}

int bt_delete(struct btree *t, const struct bkey *k)
{
	struct path pa;
	int ret;

	btp_init(&pa);
	pthread_rwlock_rdlock(&t->lock);
	ret = change_ok(t, k);
	if (!ret) {
		ret = delete_op(t, &pa, k);
		if (ret && !soft_err(ret))
			t->terr = ret;
	}
	btp_unpin(t, &pa);
	pthread_rwlock_unlock(&t->lock);
	return ret;
}

/* ---- commit ---- */

/* The nodes a commit writes, sealed children first. */
struct wlist {
	uint64_t *addr;
	void **buf;
	size_t n, cap;
};

static int wl_push(struct wlist *wl, uint64_t addr, void *buf)
{
	if (wl->n == wl->cap) {
		size_t cap = wl->cap ? 2 * wl->cap : 64;
		uint64_t *na = realloc(wl->addr, cap * sizeof(*na));
		void **nb;

		if (!na)
			return -ENOMEM;
		wl->addr = na;
		nb = realloc(wl->buf, cap * sizeof(*nb));
		if (!nb)
			return -ENOMEM;
		wl->buf = nb;
		wl->cap = cap;
	}
	wl->addr[wl->n] = addr;
	wl->buf[wl->n++] = buf;
	return 0;
}

/* Seal @n and, first, every child of this transaction below it (a
 * parent's pointer carries its child's csum and nblocks); *np gets @n's,
 * n->chain its base's (pieces); each goes onto @wl to be written.  The
 * buffers stay put: dirty nodes are pinned in the cache until the commit
 * ends. */
static int seal_node(struct btree *t, struct bcache_node *n, struct bptr *np, struct wlist *wl)
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
		ret = seal_node(t, c, &p, wl);
		bcache_put(t->cache, c);
		if (ret)
			return ret;
		bnode_set_ptr(b, i, &p);
	}
	bpiece_seal_base(b, t->store->short_nodes, t->store->pieces, np, &n->chain);
	return wl_push(wl, n->addr, b);
}

/* Every node of @wl: together when the store can (write_many), else one
 * by one.  All of them before the flush that follows, in any order:
 * nothing durable points at them until the superblock does. */
static int write_nodes(struct btree *t, const struct wlist *wl)
{
	const struct bstore *st = t->store;
	int ret = 0;

	if (st->ops->write_many)
		return wl->n ? st->ops->write_many(st->ctx, wl->n, wl->addr, wl->buf) : 0;
	for (size_t i = 0; i < wl->n && !ret; i++)
		ret = st->ops->write(st->ctx, wl->addr[i], wl->buf[i]);
	return ret;
}

static int commit_locked(struct btree *t)
{
	struct wlist wl = { 0 };
	size_t live = 0;
	int ret = 0;

	if (t->root.ptr.addr && t->root.ptr.gen == t->tgen) {
		struct bcache_node *r = bcache_get(t->cache, t->root.ptr.addr);

		if (!r)
			return -EUCLEAN;
		ret = seal_node(t, r, &t->root.ptr, &wl);
		bcache_put(t->cache, r);
		if (!ret)
			ret = write_nodes(t, &wl);
	}
	/* Counted once written, whatever the flush does: nodes, their
	 * levels and their blocks alike. */
	if (!ret)
		t->written += wl.n;
	for (size_t i = 0; !ret && i < wl.n; i++) {
		unsigned nb = bnode_nb(wl.buf[i]);

		t->written_lvl[bnode_level(wl.buf[i])]++;
		t->written_blocks += nb ? nb : BNODE_BLOCKS;
	}
	free(wl.addr);
	free(wl.buf);
	if (ret)
		return ret;
	for (size_t i = 0; i < t->ndirty; i++)
		live += t->dirty[i]->dirty;
	/* Every node the transaction made is reachable, or it leaked. */
	if (live != wl.n)
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
		/* The committed tree no longer reaches them, nor does
		 * anything durable. */
		bt_release(t, t->young, t->nyoung);
		t->nyoung = 0;
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

void bt_set_young(struct btree *t, uint64_t gen)
{
	pthread_rwlock_wrlock(&t->lock);
	if (!t->in_trans)
		t->young_gen = gen;
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
	pthread_mutex_lock(&t->mu);
	if (t->in_trans && t->nfreed) {
		*freed = malloc(t->nfreed * sizeof(**freed));
		if (*freed) {
			memcpy(*freed, t->freed, t->nfreed * sizeof(**freed));
			*n = t->nfreed;
		} else {
			ret = -ENOMEM;
		}
	}
	pthread_mutex_unlock(&t->mu);
	pthread_rwlock_unlock(&t->lock);
	return ret;
}
