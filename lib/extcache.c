// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * extcache: the budget, list and epochs of a format-v2 mount's file map
 * leaves (extcache.h).  extent.c faults leaves in and frees the ones its
 * clears cover; this file counts them and evicts clean ones.
 *
 * A changed leaf cannot go before its checkpoint wrote it; one the evictor
 * passes unused is made compact instead (extcompact.h: a leaf changed by
 * one random write over a fallocated span takes ~130 bytes, not 8 KiB),
 * so the budget holds ~60 times more changes between checkpoints.  A
 * compact leaf is expanded again by its next user, read as it is by walks
 * (the checkpoint's among them), and dropped once clean.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

#include "extent_i.h"
#include "memtrim.h"
#include "rangelock.h"
#include "tfs.h"

/* Leaves looked at per eviction pass: dirty ones are passed over, so a
 * cache full of them costs a bounded scan, not one of all of them. */
#define SCAN_MAX 64

/* A leaf is kept compact only when that takes at most this. */
#define COMPACT_MAX (sizeof(struct ext_leaf) / 4)

int extcache_create(const struct extent_src *src, uint64_t budget, struct extent_cache **out)
{
	struct extent_cache *xc = calloc(1, sizeof(*xc));

	if (!xc)
		return -ENOMEM;
	pthread_mutex_init(&xc->mu, NULL);
	pthread_mutex_init(&xc->chg_mu, NULL);
	pthread_mutex_init(&xc->pend_mu, NULL);
	pthread_cond_init(&xc->chg_cv, NULL);
	xc->src = *src;
	atomic_init(&xc->budget, budget);
	atomic_init(&xc->epoch, 1);	/* leaves read in carry 0: clean */
	atomic_init(&xc->committed, 0);
	xc->swept = UINT64_MAX;
	xc->compact = false;	/* -o compact_dirty */
	*out = xc;
	return 0;
}

void extcache_destroy(struct extent_cache *xc)
{
	if (!xc)
		return;
	pthread_mutex_destroy(&xc->mu);
	pthread_mutex_destroy(&xc->chg_mu);
	pthread_mutex_destroy(&xc->pend_mu);
	pthread_cond_destroy(&xc->chg_cv);
	free(xc);
}

void extcache_set_budget(struct extent_cache *xc, uint64_t bytes)
{
	atomic_store(&xc->budget, bytes);
	pthread_mutex_lock(&xc->mu);
	xc->swept = UINT64_MAX;		/* what was enough may not be now */
	pthread_mutex_unlock(&xc->mu);
	extcache_trim(xc);
}

void extcache_set_compact(struct extent_cache *xc, bool on)
{
	pthread_mutex_lock(&xc->mu);
	xc->compact = on;
	pthread_mutex_unlock(&xc->mu);
}

static void list_del(struct ext_list *ls, struct ext_link *k)
{
	if (k->prev)
		k->prev->next = k->next;
	else
		ls->head = k->next;
	if (k->next)
		k->next->prev = k->prev;
	else
		ls->tail = k->prev;
	k->next = k->prev = NULL;
}

static void list_add_tail(struct ext_list *ls, struct ext_link *k)
{
	k->next = NULL;
	k->prev = ls->tail;
	if (ls->tail)
		ls->tail->next = k;
	else
		ls->head = k;
	ls->tail = k;
}

#define LEAF_OF(k) ((struct ext_leaf *)((char *)(k) - offsetof(struct ext_leaf, link)))
#define COMPACT_OF(k) ((struct ext_compact *)((char *)(k) - offsetof(struct ext_compact, link)))

static void unlist(struct extent_cache *xc, struct ext_leaf *l)
{
	list_del(&xc->full, &l->link);
}

static void list_tail(struct extent_cache *xc, struct ext_leaf *l)
{
	list_add_tail(&xc->full, &l->link);
}

static void cunlist(struct extent_cache *xc, struct ext_compact *c)
{
	list_del(&xc->small, &c->link);
}

static void clist_tail(struct extent_cache *xc, struct ext_compact *c)
{
	list_add_tail(&xc->small, &c->link);
}

/* The interior nodes count too: they go with the last leaf under them
 * (inner_evict), so evicting leaves is what brings them down. */
static bool over_budget(struct extent_cache *xc)
{
	return extcache_bytes(xc) > atomic_load(&xc->budget);
}

static bool is_clean(struct extent_cache *xc, struct ext_leaf *l)
{
	return atomic_load(&l->stamp) <= atomic_load(&xc->committed);
}

/* ---- interior nodes, freed with their last leaf ---- */

/* Nothing in @n that the tree lacks: no resident child (NULL or EXT_EMPTY
 * only) and its EXT_EMPTY slots committed. */
static bool inner_idle(struct extent_cache *xc, struct ext_inner *n)
{
	if (atomic_load(&n->stamp) > atomic_load(&xc->committed))
		return false;
	for (unsigned i = 0; i < EXT_FAN; i++) {
		void *c = ext_load(&n->s[i]);

		if (c && c != EXT_EMPTY)
			return false;
	}
	return true;
}

/*
 * Under xc->mu, right after the leaf of @base in @slot of map @m was
 * evicted: free the level-1 node holding @slot if it now holds nothing the
 * tree lacks and nobody is inside its span.  True if freed.
 *
 * Why this is safe without a lock on the readers' side: every user of a
 * map holds the file's range lock over the blocks it looks at (lookups and
 * sets their blocks, clears their range, walks and SEEK_* theirs up to
 * EOF, the checkpoint all of it, shared) and only looks at the nodes of
 * those blocks, and a destroy (no range lock) marks the map dying under
 * xc->mu first.  So with @n's whole span locked here (tried, never waited
 * for; before @n is looked at) nobody is inside @n, nobody can install a child into it (that needs
 * a block of its span), and nobody else frees it: a clear covering its
 * span holds that span, the evictor of its other leaves holds xc->mu.
 * Its parent stays: only level-1 nodes go here.  After the slot is NULL a
 * user reads the tree for the span, which holds what @n said (inner_idle).
 */
static bool inner_evict(struct extent_map *m, void **slot, uint64_t base)
{
	struct extent_cache *xc = m->xc;
	struct ext_inner *n = inner_of(slot, base);
	uint64_t span = ext_span(1), lo = base & ~(span - 1);
	bool low = lo < EXTENT_LOW_FBLK, freed = false;
	void **p = low ? &m->root : &m->high;
	struct rl_range r;

	/* The lock first: until it is held a clear of the whole span (whose
	 * slots may all be EXT_EMPTY by now, which it passes without xc->mu)
	 * may free @n under us. */
	if (m->dying || (m->rl && !rl_trylock(m->rl, &r, lo, lo + span, true)))
		return false;
	if (inner_idle(xc, n)) {
		for (int lvl = low ? EXT_TOP_LOW : EXT_TOP_HIGH; p && lvl > 1; lvl--) {
			void *node = ext_load(p);

			p = node && node != EXT_EMPTY ? &((void **)node)[ext_slot(lo, lvl)] : NULL;
		}
		void *expected = n;

		freed = p && __atomic_compare_exchange_n(p, &expected, NULL, false,
							 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
	}
	if (m->rl)
		rl_unlock(m->rl, &r);
	if (freed) {
		atomic_fetch_add(&xc->inner_freed, 1);
		inner_free(xc, n);
	}
	return freed;
}

/*
 * Under xc->mu: evict @l if it is clean and nobody is inside its range:
 * its file's range lock over the leaf is tried (never waited for), and
 * the stamp checked again under it (a writer that held it may have
 * changed the leaf since).  The slot goes back to NULL: read again from
 * the tree on next use.
 */
static bool try_evict(struct extent_cache *xc, struct ext_leaf *l)
{
	struct rangelock *rl = l->m->rl;
	struct rl_range r;

	if (!is_clean(xc, l))
		return false;
	if (rl && !rl_trylock(rl, &r, l->base, l->base + EXT_FAN, true))
		return false;
	bool ok = is_clean(xc, l);
	if (ok) {
		__atomic_store_n(l->slot, NULL, __ATOMIC_RELEASE);
		unlist(xc, l);
		atomic_fetch_sub(&xc->leaves, 1);
		atomic_fetch_add(&xc->evictions, 1);
	}
	if (rl)
		rl_unlock(rl, &r);
	if (ok) {
		/* Its level-1 node may now hold nothing: it goes too. */
		(void)inner_evict(l->m, l->slot, l->base);
		free(l);
	}
	return ok;
}

/*
 * Under xc->mu: make the changed leaf @l compact if nobody is inside it
 * (tried as try_evict does) and that makes it small.  Its stamp goes with
 * it: a compact leaf is never changed (a change expands it first).
 */
static bool try_compact(struct extent_cache *xc, struct ext_leaf *l)
{
	struct rangelock *rl = l->m->rl;
	struct ext_compact *c = NULL;
	struct rl_range r;

	if (!xc->compact)
		return false;
	if (rl && !rl_trylock(rl, &r, l->base, l->base + EXT_FAN, true))
		return false;
	c = ext_compact_make(l->e, EXT_FAN, COMPACT_MAX);
	if (c) {
		c->m = l->m;
		c->slot = l->slot;
		c->base = l->base;
		c->stamp = atomic_load(&l->stamp);
		__atomic_store_n(l->slot, (void *)((uintptr_t)c | EXT_COMPACT_TAG),
				 __ATOMIC_RELEASE);
		unlist(xc, l);
		clist_tail(xc, c);
		atomic_fetch_sub(&xc->leaves, 1);
		atomic_fetch_add(&xc->compacts, 1);
		atomic_fetch_add(&xc->compact_bytes, c->bytes);
		atomic_fetch_add(&xc->compactions, 1);
	}
	if (rl)
		rl_unlock(rl, &r);
	if (c)
		free(l);
	return c != NULL;
}

/* Under xc->mu: a compact leaf out of the cache (its slot already changed
 * or about to be), uncounted. */
static void compact_out(struct extent_cache *xc, struct ext_compact *c)
{
	cunlist(xc, c);
	atomic_fetch_sub(&xc->compacts, 1);
	atomic_fetch_sub(&xc->compact_bytes, c->bytes);
}

/*
 * Under xc->mu: compact leaves whose checkpoint committed go (the tree
 * holds what they say), oldest first, while over the budget; changed ones
 * end a bounded look, and go to the end in a @full sweep.  The leaf's
 * range lock is tried first, as try_evict does: a holder of it may rely
 * on what is resident staying so (a checkpoint that cleared a range of
 * the tree and then walks the map over it would read a dropped leaf back
 * from the cleared tree: holes); a leaf someone is inside goes to the end.
 */
static void trim_compact(struct extent_cache *xc, uint64_t scan, bool full)
{
	uint64_t committed = atomic_load(&xc->committed);

	for (uint64_t i = 0; i < scan && over_budget(xc) && xc->small.head; i++) {
		struct ext_compact *c = COMPACT_OF(xc->small.head);

		if (c->stamp > committed) {
			/* Made compact in stamp order, nearly: the rest are
			 * changed too, but for a sweep after a commit. */
			if (!full || &c->link == xc->small.tail)
				break;
			cunlist(xc, c);
			clist_tail(xc, c);
			continue;
		}
		struct rangelock *rl = c->m->rl;
		struct rl_range r;

		if (rl && !rl_trylock(rl, &r, c->base, c->base + EXT_FAN, true)) {
			if (&c->link == xc->small.tail)
				break;
			cunlist(xc, c);
			clist_tail(xc, c);
			continue;
		}
		__atomic_store_n(c->slot, NULL, __ATOMIC_RELEASE);
		compact_out(xc, c);
		atomic_fetch_add(&xc->compact_drops, 1);
		if (rl)
			rl_unlock(rl, &r);
		(void)inner_evict(c->m, c->slot, c->base);
		free(c);
	}
}

/* Leaves the evictor took out of the cache or made compact, so far. */
static uint64_t freed_so_far(struct extent_cache *xc)
{
	return atomic_load(&xc->evictions) + atomic_load(&xc->compactions) +
	       atomic_load(&xc->compact_drops);
}

/* Under xc->mu: oldest first, a used leaf gets a second chance, a dirty
 * one is made compact (try_compact) or, like a busy one, goes to the end;
 * then clean compact leaves go (trim_compact; all of them in a @full
 * sweep).  Returns the clean leaves it had to leave because someone was
 * inside them. */
static uint64_t trim_locked(struct extent_cache *xc, const struct ext_leaf *keep, uint64_t scan,
			    bool full)
{
	uint64_t scanned = 0, busy = 0;

	for (; scanned < scan && over_budget(xc) && xc->full.head; scanned++) {
		struct ext_leaf *l = LEAF_OF(xc->full.head);
		bool used = l != keep && atomic_exchange(&l->ref, false);

		if (l == keep || used || !try_evict(xc, l)) {
			bool clean = is_clean(xc, l);

			if (l != keep && !used && !clean && try_compact(xc, l))
				continue;
			if (l != keep && !used && clean)
				busy++;
			if (&l->link == xc->full.tail)
				break;
			unlist(xc, l);
			list_tail(xc, l);
		}
	}
	atomic_fetch_add(&xc->scanned, scanned);
	/* Full leaves first: each frees 8 KiB, a compact one ~1/60 of it. */
	trim_compact(xc, full ? 2 * atomic_load(&xc->compacts) + 1 : SCAN_MAX, full);
	return busy;
}

/* Leaf faults a bounded trim is put off for at most (trim_in). */
#define IDLE_MAX 16

/* Under xc->mu: a leaf freed or a commit: the fault's trims run again. */
static void idle_reset(struct extent_cache *xc)
{
	xc->idle_looks = 0;
	xc->idle_skip = xc->idle_next = 0;
}

/* Under xc->mu: after a trim that freed nothing having looked at @looked
 * leaves. */
static void idle_count(struct extent_cache *xc, uint64_t looked)
{
	xc->idle_looks += looked;
	/* Twice round the list: once to take the second chances away. */
	if (xc->idle_looks < 2 * atomic_load(&xc->leaves) + 2)
		return;
	xc->idle_next = xc->idle_next ? 2 * xc->idle_next : 1;
	if (xc->idle_next > IDLE_MAX)
		xc->idle_next = IDLE_MAX;
	xc->idle_skip = xc->idle_next;
}

/*
 * Under xc->mu: the bounded trim of a leaf coming in.  Once the trims have
 * been twice round the whole list without freeing a leaf (every one
 * changed and kept whole, or someone inside it: a checkpoint holds its
 * file's whole range lock while it reads the file's leaves in), the next
 * ones are put off for 1, 2, 4 ... up to IDLE_MAX leaves in, so a fault
 * costs a few looks instead of SCAN_MAX (a checkpoint after kill -9 that
 * faulted 100,000 leaves spent a fifth of its CPU rotating the same busy
 * ones).  A trim that frees a leaf or a commit (leaves turn clean) ends
 * it.  Meanwhile the cache grows by the leaves coming in, as it would
 * anyway with nothing to free; a leaf whose user leaves it without a
 * commit is reached at about 4 looks a fault instead of 64.
 */
static void trim_in(struct extent_cache *xc, const struct ext_leaf *keep)
{
	uint64_t c = atomic_load(&xc->committed), freed, looked;

	if (xc->idle_at != c) {
		xc->idle_at = c;
		idle_reset(xc);
	}
	if (xc->idle_skip) {
		xc->idle_skip--;
		return;
	}
	freed = freed_so_far(xc);
	looked = atomic_load(&xc->scanned);
	trim_locked(xc, keep, SCAN_MAX, false);
	if (freed_so_far(xc) != freed)
		idle_reset(xc);
	else
		idle_count(xc, atomic_load(&xc->scanned) - looked);
}

/*
 * Evicted leaves are freed by whichever thread trims, into its malloc
 * arena, and new ones come from the arena of whichever thread faults them
 * in: the arenas keep what was freed and the daemon's RSS climbed to the
 * sum of their peaks (a 256 GiB fallocate: 195 MiB free in the heaps out
 * of 301 MiB, malloc_info at the peak).  So the leaves evicted since the
 * last call count towards memtrim's cadence (memtrim.h), outside xc->mu.
 */
static void give_back(struct extent_cache *xc)
{
	uint64_t ev = atomic_load(&xc->evictions) + atomic_load(&xc->compactions);
	uint64_t last = atomic_load(&xc->counted);

	if (ev != last && atomic_compare_exchange_strong(&xc->counted, &last, ev))
		mem_freed((ev - last) * sizeof(struct ext_leaf));
}

/*
 * Leaves turn clean only when a checkpoint commits.  So a full sweep (each
 * leaf up to twice: a second chance, then out) is needed once per commit,
 * and again only if it had to leave clean leaves someone was inside; in
 * between, a trim looks at SCAN_MAX of the oldest.  A full sweep each time
 * made a long fallocate (a trim per 64 MiB piece, tens of thousands of
 * changed leaves) quadratic.
 */
void extcache_trim(struct extent_cache *xc)
{
	pthread_mutex_lock(&xc->mu);
	uint64_t c = atomic_load(&xc->committed), freed = freed_so_far(xc);

	if (xc->swept != c) {
		if (trim_locked(xc, NULL, 2 * atomic_load(&xc->leaves) + 1, true) == 0)
			xc->swept = c;
	} else {
		trim_locked(xc, NULL, SCAN_MAX, false);
	}
	if (freed_so_far(xc) != freed)
		idle_reset(xc);		/* a fault's trim may free more too */
	pthread_mutex_unlock(&xc->mu);
	give_back(xc);
}

uint64_t extcache_over(struct extent_cache *xc)
{
	/* The interior nodes above compact leaves too: one keeps its level-1
	 * node (4 KiB) until its checkpoint, and one write a GiB apart over a
	 * sparse span made them most of what was held (v2rssspan).  No more
	 * than one per compact leaf: the others (levels 2 and up, nodes of
	 * hole lookups) no checkpoint frees, and counting them would make
	 * writers wait for checkpoints that cannot help. */
	uint64_t inner = atomic_load(&xc->inner), nc = atomic_load(&xc->compacts);
	uint64_t bytes = extcache_leaf_bytes(xc) + (inner < nc ? inner : nc) * sizeof(struct ext_inner);
	uint64_t budget = atomic_load(&xc->budget);

	return bytes > budget ? bytes - budget : 0;
}

void extcache_set_pressure(struct extent_cache *xc, void (*fn)(void *ctx), void *ctx)
{
	pthread_mutex_lock(&xc->mu);
	xc->pressure = fn;
	xc->pressure_ctx = ctx;
	pthread_mutex_unlock(&xc->mu);
}

/* Under xc->mu: @l listed and counted, then the budget kept; returns the
 * pressure callback to call once unlocked (NULL: none). */
static void (*leaf_in_locked(struct extent_cache *xc, struct ext_leaf *l))(void *)
{
	list_tail(xc, l);
	atomic_fetch_add(&xc->leaves, 1);
	if (over_budget(xc))
		trim_in(xc, l);
	/* Still twice over: changed leaves, which only a checkpoint frees. */
	if (extcache_over(xc) > atomic_load(&xc->budget) && xc->pressure &&
	    !atomic_exchange(&xc->pressure_sent, true))
		return xc->pressure;
	return NULL;
}

/* Called with xc->mu held, which it releases: @l in, then the pressure
 * callback (outside the lock: it wakes a thread) and memtrim's count. */
static void leaf_in_unlock(struct extent_cache *xc, struct ext_leaf *l)
{
	void (*fn)(void *ctx) = leaf_in_locked(xc, l);
	void *ctx = xc->pressure_ctx;

	pthread_mutex_unlock(&xc->mu);
	if (fn)
		fn(ctx);
	give_back(xc);
}

void extcache_leaf_in(struct extent_cache *xc, struct ext_leaf *l)
{
	pthread_mutex_lock(&xc->mu);
	leaf_in_unlock(xc, l);
}

int extcache_expand(struct extent_cache *xc, void **slot, void *tagged)
{
	struct ext_leaf *l = calloc(1, sizeof(*l));

	if (!l)
		return -ENOMEM;
	pthread_mutex_lock(&xc->mu);
	if (ext_load(slot) != tagged) {
		pthread_mutex_unlock(&xc->mu);
		free(l);
		return 0;
	}
	struct ext_compact *c = ext_compact_of(tagged);

	ext_compact_expand(c, l->e, EXT_FAN);
	l->m = c->m;
	l->slot = slot;
	l->base = c->base;
	atomic_init(&l->stamp, c->stamp);
	atomic_init(&l->ref, true);
	__atomic_store_n(slot, l, __ATOMIC_RELEASE);
	compact_out(xc, c);
	atomic_fetch_add(&xc->expansions, 1);
	free(c);
	leaf_in_unlock(xc, l);
	return 0;
}

int extcache_compact_read(struct extent_cache *xc, void **slot, void *tagged,
			  struct extent_ent *out)
{
	pthread_mutex_lock(&xc->mu);
	if (ext_load(slot) != tagged) {
		pthread_mutex_unlock(&xc->mu);
		return 1;
	}
	ext_compact_expand(ext_compact_of(tagged), out, EXT_FAN);
	pthread_mutex_unlock(&xc->mu);
	return 0;
}

void *extcache_leaf_take(struct extent_cache *xc, void **slot, void *repl)
{
	void *cur;

	pthread_mutex_lock(&xc->mu);
	cur = ext_load(slot);
	if (ext_is_compact(cur)) {
		compact_out(xc, ext_compact_of(cur));
		__atomic_store_n(slot, repl, __ATOMIC_RELEASE);
	} else if (cur && cur != EXT_EMPTY) {
		unlist(xc, cur);
		atomic_fetch_sub(&xc->leaves, 1);
		__atomic_store_n(slot, repl, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&xc->mu);
	return cur;
}

void extcache_stats(struct extent_cache *xc, struct extcache_stats *st)
{
	st->budget = atomic_load(&xc->budget);
	st->leaves = atomic_load(&xc->leaves);
	st->bytes = st->leaves * sizeof(struct ext_leaf);
	st->compact = atomic_load(&xc->compacts);
	st->compact_bytes = atomic_load(&xc->compact_bytes);
	st->compactions = atomic_load(&xc->compactions);
	st->expansions = atomic_load(&xc->expansions);
	st->compact_drops = atomic_load(&xc->compact_drops);
	st->inner_bytes = atomic_load(&xc->inner) * sizeof(struct ext_inner);
	st->inner_freed = atomic_load(&xc->inner_freed);
	st->faults = atomic_load(&xc->faults);
	st->empty_faults = atomic_load(&xc->empty_faults);
	st->evictions = atomic_load(&xc->evictions);
	st->scanned = atomic_load(&xc->scanned);
	st->fault_errors = atomic_load(&xc->fault_errors);
	st->src_redone = atomic_load(&xc->src_redone);
}

/* ---- changes of the source under reads ---- */

/* Changes this thread has under way: its own reads neither wait for them
 * nor are redone (the checkpoint reads the map while it writes). */
static _Thread_local unsigned changing;

static unsigned chg_stripe(uint64_t ino)
{
	return (unsigned)((ino * 0x9e3779b97f4a7c15ull) >> 58) % EXTCACHE_CHG_STRIPES;
}

void extcache_src_changing(struct extent_cache *xc, uint64_t ino)
{
	unsigned s = chg_stripe(ino);

	pthread_mutex_lock(&xc->chg_mu);
	xc->chg_active[s]++;
	atomic_fetch_add(&xc->chg_gen[s], 1);
	pthread_mutex_unlock(&xc->chg_mu);
	changing++;
}

void extcache_src_changed(struct extent_cache *xc, uint64_t ino)
{
	unsigned s = chg_stripe(ino);

	changing--;
	pthread_mutex_lock(&xc->chg_mu);
	atomic_fetch_add(&xc->chg_gen[s], 1);
	if (--xc->chg_active[s] == 0)
		pthread_cond_broadcast(&xc->chg_cv);
	pthread_mutex_unlock(&xc->chg_mu);
}

uint64_t extcache_src_begin(struct extent_cache *xc, uint64_t ino)
{
	unsigned s = chg_stripe(ino);
	uint64_t stamp;

	if (changing)
		return 0;
	pthread_mutex_lock(&xc->chg_mu);
	while (xc->chg_active[s]) {
		tfs_may_block();
		pthread_cond_wait(&xc->chg_cv, &xc->chg_mu);
	}
	stamp = atomic_load(&xc->chg_gen[s]);
	pthread_mutex_unlock(&xc->chg_mu);
	return stamp;
}

bool extcache_src_same(struct extent_cache *xc, uint64_t ino, uint64_t stamp)
{
	if (changing || atomic_load(&xc->chg_gen[chg_stripe(ino)]) == stamp)
		return true;
	atomic_fetch_add(&xc->src_redone, 1);
	return false;
}

uint64_t extcache_epoch_begin(struct extent_cache *xc)
{
	return atomic_fetch_add(&xc->epoch, 1);
}

void extcache_committed(struct extent_cache *xc, uint64_t epoch)
{
	uint64_t cur = atomic_load(&xc->committed);

	while (cur < epoch && !atomic_compare_exchange_weak(&xc->committed, &cur, epoch))
		;
	atomic_store(&xc->pressure_sent, false);
}
