// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * inode_cache: format v2 inodes fault in from the INODES tree and clean
 * ones leave memory (docs/FORMAT.md "Mounting version 2").  Part of the
 * metadata core: the inode table (inode.c) calls icache_fault on a miss,
 * and ckpt_v2.c registers how an inode is read (icache_fill_fn) and how
 * the tree's inode numbers are walked (icache_next_fn), so the table, a
 * lower module, never calls the checkpoint code.
 *
 * Fault-in.  The inode is read into a new inode outside the table with no
 * table lock held (a read may go to the devices), under the mutex of its
 * number's stripe, then inserted under the table lock after a recheck.
 * While the stripe is held nobody else reads that number in, and the
 * number cannot become resident any other way (fs_inew only makes numbers
 * the tree never held), so it cannot be read, changed, written back and
 * dropped meanwhile: what was read is current.  A number whose deletion
 * the trees do not show yet (v2d_state: V2D_DEAD, in the set or in the
 * one a checkpoint writes, or kept aside when a note could not get
 * memory) is not read.  Past what v2dirty keeps aside (V2D_UNSURE) a
 * number a walk found (icursor, the checkpoint: inode_get_walk) is not
 * read either, -ENOMEM until a checkpoint rebuilt the deaths from the
 * log; a number reached through a name, a parent or a kernel handle is
 * alive and is read.
 *
 * Eviction.  A clock over the table's buckets: inode_get and fs_ifind set
 * an inode's used bit, the hand clears it, and an inode whose bit is clear
 * goes when nothing but the table holds it (one reference: no handle, so
 * no operation is using it), the kernel holds no lookup of it, it is not
 * open, it has a name (nlink > 0: an unlinked inode is deleted, not
 * dropped), it is not the root, and the trees hold all of it (v2d_state
 * -1: nothing noted since the last checkpoint, nothing in the one being
 * written).  So a dirty inode stays until a checkpoint has written it.
 * The hand turns after every fault-in while the table is over its budget,
 * a bounded step at a time, and after every checkpoint (icache_trim).
 *
 * Lookup stubs.  The kernel holds a lookup of every inode it has a dentry
 * for (a find of a million files: a million), so a lookup does not keep
 * an inode in memory: what goes instead is a stub, the number and the
 * kernel's count, and the count comes back with the inode at its next
 * fault-in.  Nearly every count is 1 (one create or one lookup), and
 * numbers are handed out in order: a count of 1 is a bit in stub_ones, 64
 * consecutive numbers to one 16-byte slot (10M created files: 4 MiB, not
 * the 256 MiB of a slot each); a larger count has a slot of its own in
 * stub_counts (open-addressed tables, struct istub).  A FORGET
 * of an inode not in the table drops the stub's count and the stub at 0
 * (icache_forget), without reading the inode in.  Everything that changes
 * a count holds a handle (the lookups of namei.c) or is a forget, and the
 * stubs change only under the table lock for writing: an eviction (refs
 * 1: nobody holds a handle, so nobody changes the count), the insert of a
 * fault-in and a forget of a non-resident number are serialized, and a
 * number has a stub only while it is not in the table.  An unlinked inode
 * (nlink 0) is never dropped, so a stub always names a linked inode; an
 * unlink or rename reaches its inode through inode_get, which reads it in
 * with its count.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dir.h"
#include "extpend.h"
#include "fs_i.h"
#include "inode_i.h"
#include "memtrim.h"
#include "v2dirty.h"

#define EVICT_SCAN 256		/* buckets the hand passes per step */
#define EVICT_BATCH 64		/* inodes dropped per step at most */
#define STUB_MIN 64		/* slots of the first stub table */
/* A directory's entries in memory count as one inode (TFS_CACHE_INODE_COST)
 * per this many: about 200 bytes an entry (v2idirs: 68.7 MiB for 320,000
 * names of 29 bytes).  One directory counts half the budget at most, so
 * a huge one in use does not make the clock drop everything else. */
#define ICACHE_DIR_ENTS 5

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* What the clock holds within max: the inodes and their directories'
 * entries. */
static uint64_t icache_load(struct itable *t)
{
	return atomic_load(&t->n) + atomic_load(&t->dir_cost);
}

/* ---- lookup stubs: the caller holds the table lock for writing ---- */

static struct istub *tab_find(struct stubtab *st, uint64_t key)
{
	if (!st->cap)
		return NULL;
	for (size_t i = ino_slot(key, st->cap);; i = (i + 1) & (st->cap - 1)) {
		if (st->s[i].key == key)
			return &st->s[i];
		if (!st->s[i].key)
			return NULL;
	}
}

/* Move the keys into a table of @cap slots; false without memory. */
static bool tab_resize(struct stubtab *st, size_t cap)
{
	struct istub *ns = calloc(cap, sizeof(*ns));

	if (!ns)
		return false;
	for (size_t i = 0; i < st->cap; i++) {
		size_t j;

		if (!st->s[i].key)
			continue;
		for (j = ino_slot(st->s[i].key, cap); ns[j].key; j = (j + 1) & (cap - 1))
			;
		ns[j] = st->s[i];
	}
	free(st->s);
	st->s = ns;
	st->cap = cap;
	return true;
}

/* Add @key (not in @st) with @val; false without memory. */
static bool tab_add(struct stubtab *st, uint64_t key, uint64_t val)
{
	size_t i;

	if ((st->n + 1) * 4 > st->cap * 3 && !tab_resize(st, st->cap ? st->cap * 2 : STUB_MIN))
		return false;
	for (i = ino_slot(key, st->cap); st->s[i].key; i = (i + 1) & (st->cap - 1))
		;
	st->s[i] = (struct istub){ .key = key, .val = val };
	st->n++;
	return true;
}

/* Remove slot @e: the keys after it in its run move back into the hole
 * when their home allows, so lookups never stop at a hole too early. */
static void tab_del(struct stubtab *st, struct istub *e)
{
	size_t mask = st->cap - 1, hole = (size_t)(e - st->s);

	for (size_t j = (hole + 1) & mask; st->s[j].key; j = (j + 1) & mask) {
		size_t home = ino_slot(st->s[j].key, st->cap);

		/* j may move to the hole unless its home lies in (hole, j] */
		if (((j - home) & mask) >= ((j - hole) & mask)) {
			st->s[hole] = st->s[j];
			hole = j;
		}
	}
	st->s[hole].key = 0;
	if (--st->n == 0) {
		free(st->s);		/* the kernel forgot them all */
		st->s = NULL;
		st->cap = 0;
	} else if (st->cap > STUB_MIN && st->n * 8 < st->cap) {
		tab_resize(st, st->cap / 2);	/* failure: stays larger */
	}
}

/* stub_ones: the slot of @ino's 64 and its bit. */
static uint64_t ones_key(uint64_t ino)
{
	return (ino >> 6) + 1;
}

static uint64_t ones_bit(uint64_t ino)
{
	return 1ull << (ino & 63);
}

/* A stub for @ino (not in the table, none yet) with @n lookups. */
static bool stub_add(struct itable *t, uint64_t ino, uint64_t n)
{
	struct istub *e;

	if (n != 1) {
		if (!tab_add(&t->stub_counts, ino, n))
			return false;
	} else if ((e = tab_find(&t->stub_ones, ones_key(ino)))) {
		e->val |= ones_bit(ino);
	} else if (!tab_add(&t->stub_ones, ones_key(ino), ones_bit(ino))) {
		return false;
	}
	atomic_fetch_add(&t->nstubs, 1);
	return true;
}

/* Drop @ino's stub and return its count; 0: it had none. */
static uint64_t stub_take(struct itable *t, uint64_t ino)
{
	struct istub *e = tab_find(&t->stub_counts, ino);
	uint64_t n = 1;

	if (e) {
		n = e->val;
		tab_del(&t->stub_counts, e);
	} else {
		e = tab_find(&t->stub_ones, ones_key(ino));
		if (!e || !(e->val & ones_bit(ino)))
			return 0;
		e->val &= ~ones_bit(ino);
		if (!e->val)
			tab_del(&t->stub_ones, e);
	}
	atomic_fetch_sub(&t->nstubs, 1);
	return n;
}

bool icache_forget(struct tfs *fs, uint64_t ino, uint64_t n)
{
	struct itable *t = fs->itab;
	struct istub *e;

	if (!t || !t->lazy)
		return false;
	pthread_rwlock_wrlock(&t->lock);
	if (itable_find(fs, ino)) {
		pthread_rwlock_unlock(&t->lock);
		return false;
	}
	/* Not resident and no stub: the kernel held no lookup (a forget
	 * after the inode was deleted); nothing to drop.  Only a count in
	 * stub_counts can stay above 0; one in stub_ones is 1. */
	e = tab_find(&t->stub_counts, ino);
	if (e && e->val > n)
		e->val -= n;
	else if (n)
		stub_take(t, ino);
	pthread_rwlock_unlock(&t->lock);
	return true;
}

/* A fault-in inserted @ip: the count its stub kept comes back. */
static void stub_restore(struct itable *t, struct tfs_inode *ip)
{
	uint64_t n = stub_take(t, ip->ino);

	if (n)
		atomic_store(&ip->nlookup, n);
}

void icache_enable(struct tfs *fs, icache_fill_fn fill, icache_next_fn next, bool lazy,
		   uint64_t max, uint64_t tree_max)
{
	struct itable *t = fs->itab;

	t->fill = fill;
	t->next = next;
	t->lazy = lazy;
	t->max = max;
	atomic_store(&t->tree_max, tree_max);
}

void icache_set_prefetch(struct tfs *fs, icache_prefetch_fn prefetch)
{
	fs->itab->prefetch = prefetch;
}

void icache_prefetch(struct tfs *fs, uint64_t *inos, size_t n)
{
	struct itable *t = fs->itab;
	uint64_t tmax;
	size_t m = 0;
	int ret;

	if (!t || !t->lazy || !t->prefetch || !n)
		return;
	/* Only what a fault-in would read: not resident, in the trees. */
	tmax = atomic_load(&t->tree_max);
	pthread_rwlock_rdlock(&t->lock);
	for (size_t i = 0; i < n; i++)
		if (inos[i] <= tmax && !itable_find(fs, inos[i]))
			inos[m++] = inos[i];
	pthread_rwlock_unlock(&t->lock);
	if (!m)
		return;
	qsort(inos, m, sizeof(*inos), cmp_u64);
	ret = t->prefetch(fs, inos, m);
	icache_prefetched(fs, ret);
}

void icache_prefetched(struct tfs *fs, int nread)
{
	if (nread > 0)
		atomic_fetch_add(&fs->itab->prefetch_reads, (uint64_t)nread);
}

void icache_raise_tree_max(struct tfs *fs, uint64_t ino)
{
	struct itable *t = fs->itab;
	uint64_t cur = atomic_load(&t->tree_max);

	while (cur < ino && !atomic_compare_exchange_weak(&t->tree_max, &cur, ino))
		;
}

void icache_stats(struct tfs *fs, struct icache_stats *st)
{
	struct itable *t = fs->itab;

	memset(st, 0, sizeof(*st));
	if (!t)
		return;
	st->lazy = t->lazy;
	st->resident = atomic_load(&t->n);
	st->max = t->max;
	st->faults = atomic_load(&t->faults);
	st->absent = atomic_load(&t->absent);
	st->evictions = atomic_load(&t->evictions);
	st->stubs = atomic_load(&t->nstubs);
	st->prefetch_reads = atomic_load(&t->prefetch_reads);
	pthread_rwlock_rdlock(&t->lock);
	st->stub_bytes = (t->stub_ones.cap + t->stub_counts.cap) * sizeof(struct istub);
	pthread_rwlock_unlock(&t->lock);
}

uint64_t icache_over(struct tfs *fs)
{
	struct itable *t = fs->itab;
	uint64_t n;

	if (!t || !t->lazy)
		return 0;
	n = atomic_load(&t->n);
	return n > t->max ? n - t->max : 0;
}

void icache_set_total(struct tfs *fs, uint64_t n)
{
	atomic_store(&fs->itab->total, (int64_t)n);
}

/* Whether @ip may leave memory (a kernel lookup goes into a stub); the
 * caller holds the table lock for writing, so no handle can be taken
 * meanwhile. */
static bool evictable(struct tfs *fs, struct tfs_inode *ip, const struct tfs_inode *keep)
{
	if (ip == keep || ip->ino == TFS_ROOT_INO)
		return false;
	if (atomic_load(&ip->refs) != 1 || atomic_load(&ip->nopen))
		return false;
	/* refs == 1: nobody holds it, so nobody changes nlink now. */
	if (ip->nlink == 0)
		return false;
	/* Its map holds records the replay kept pending (extpend.h): only
	 * memory has them until they are applied and checkpointed. */
	if (extpend_any(&ip->map))
		return false;
	return !fs->v2dirty || v2d_state(fs->v2dirty, ip->ino) < 0;
}

/* One step of the clock: drops up to EVICT_BATCH inodes while the table is
 * over its budget; the number dropped. */
static size_t evict_step(struct tfs *fs, const struct tfs_inode *keep)
{
	struct itable *t = fs->itab;
	struct tfs_inode *batch[EVICT_BATCH];
	size_t nb = 0, cost = 0;

	pthread_rwlock_wrlock(&t->lock);
	for (size_t step = 0; t->b && step < EVICT_SCAN && nb < EVICT_BATCH &&
	     icache_load(t) > t->max; step++) {
		size_t b = t->hand & (t->size - 1);
		struct tfs_inode **pp = &t->b[b];

		t->hand = b + 1;
		while (*pp && nb < EVICT_BATCH) {
			struct tfs_inode *ip = *pp;

			uint64_t nl;

			if (atomic_exchange(&ip->used, false) || !evictable(fs, ip, keep)) {
				pp = &ip->hnext;
				continue;
			}
			/* refs 1: the count cannot change until a fault-in
			 * or a forget takes the table lock */
			nl = atomic_load(&ip->nlookup);
			if (nl && !stub_add(t, ip->ino, nl)) {
				pp = &ip->hnext;	/* no memory for a stub: stays */
				continue;
			}
			*pp = ip->hnext;
			atomic_fetch_sub(&t->n, 1);
			atomic_fetch_sub(&t->dir_cost, ip->icost);
			cost += ip->icost;
			atomic_store(&ip->dead, true);
			batch[nb++] = ip;
		}
	}
	pthread_rwlock_unlock(&t->lock);
	for (size_t i = 0; i < nb; i++)
		inode_put(fs, batch[i]);	/* the table's: the last reference */
	atomic_fetch_add(&t->evictions, nb);
	/* A find drops inodes a few at a time behind its fault-ins, a
	 * checkpoint tens of thousands at once: either way the freed pages
	 * go back at memtrim's cadence, or the RSS stays at what the
	 * dropped inodes took. */
	if (nb)
		mem_freed((nb + cost) * TFS_CACHE_INODE_COST);
	return nb;
}

void icache_trim(struct tfs *fs)
{
	struct itable *t = fs->itab;
	size_t idle = 0, n;

	if (!t || !t->lazy)
		return;
	/* Until within budget, or two full turns of the hand dropped nothing
	 * (everything left is in use or dirty). */
	while (icache_load(t) > t->max) {
		size_t turn = 2 * (t->size / EVICT_SCAN + 1);

		n = evict_step(fs, NULL);
		if (n)
			idle = 0;
		else if (++idle >= turn)
			break;
	}
}

/* The table's @ino, with a handle when @handle; NULL if absent. */
static struct tfs_inode *lookup(struct tfs *fs, uint64_t ino, bool handle)
{
	struct tfs_inode *ip;

	pthread_rwlock_rdlock(&fs->itab->lock);
	ip = itable_find(fs, ino);
	if (ip && handle)
		atomic_fetch_add(&ip->refs, 1);
	pthread_rwlock_unlock(&fs->itab->lock);
	return ip;
}

/* Read @ino into a new inode; the caller holds its stripe.  @walk: the
 * number came from a walk of the tree, not a name or a handle. */
static int read_in(struct tfs *fs, uint64_t ino, bool walk, struct tfs_inode **out)
{
	struct tfs_inode *ip;
	int st = fs->v2dirty ? v2d_state(fs->v2dirty, ino) : -1;
	int ret;

	if (st >= 0 && (st & V2D_DEAD))
		return -ENOENT;
	/* Deaths were lost for want of memory (v2dirty.h): a number a walk
	 * found may be of an inode deleted since the checkpoint.  Refuse
	 * rather than bring it back; the next checkpoint rebuilds from the
	 * log.  (A name, a parent or a kernel handle names a live one.) */
	if (walk && st >= 0 && (st & V2D_UNSURE))
		return -ENOMEM;
	ip = inode_alloc(ino);
	if (!ip)
		return -ENOMEM;
	ret = fs->itab->fill(fs, ip);
	if (ret) {
		inode_release_mem(ip, NULL, NULL);
		return ret;
	}
	if (ip->dir) {
		uint64_t c = dir_count(ip->dir) / ICACHE_DIR_ENTS, half = fs->itab->max / 2;

		if (c > half)
			c = half;
		ip->icost = c > UINT32_MAX ? UINT32_MAX : (uint32_t)c;
	}
	*out = ip;
	return 0;
}

int icache_fault(struct tfs *fs, uint64_t ino, bool handle, bool walk, struct tfs_inode **out)
{
	struct itable *t = fs->itab;
	pthread_mutex_t *mu = &t->fault_mu[(ino * 0x9E3779B97F4A7C15ull) >> 58];
	struct tfs_inode *ip, *o;
	int ret;

	*out = NULL;
	if (!t->fill)
		return -ENOENT;
	/* Above every number the trees hold: made since the last checkpoint
	 * (numbers are never reused, and such an inode stays resident until
	 * a checkpoint, which raises tree_max first, has written it), or
	 * never made.  The replay of N creates: no read, no stripe. */
	if (ino > atomic_load(&t->tree_max))
		return -ENOENT;
	pthread_mutex_lock(mu);
	ip = lookup(fs, ino, handle);	/* another fault-in was first */
	if (ip) {
		pthread_mutex_unlock(mu);
		*out = ip;
		return 0;
	}
	ret = read_in(fs, ino, walk, &ip);
	if (ret) {
		if (ret == -ENOENT)
			atomic_fetch_add(&t->absent, 1);
		pthread_mutex_unlock(mu);
		return ret;
	}
	atomic_store(&ip->used, true);
	if (handle)
		atomic_fetch_add(&ip->refs, 1);
	pthread_rwlock_wrlock(&t->lock);
	o = itable_find(fs, ino);
	if (!o && !itable_insert(fs, ip))
		ret = -ENOMEM;
	else if (!o)
		stub_restore(t, ip);
	if (o && handle)
		atomic_fetch_add(&o->refs, 1);
	pthread_rwlock_unlock(&t->lock);
	pthread_mutex_unlock(mu);
	if (o || ret) {
		inode_release_mem(ip, NULL, NULL);
		ip = o;
	} else {
		atomic_fetch_add(&t->faults, 1);
	}
	if (ret)
		return ret;
	if (t->lazy && icache_load(t) > t->max)
		evict_step(fs, ip);
	*out = ip;
	return 0;
}

/* ---- every inode, one at a time ---- */

int icursor_init(struct tfs *fs, struct icursor *c)
{
	int ret;

	memset(c, 0, sizeof(*c));
	ret = fs_isnapshot_inos(fs, &c->res, &c->nres);
	if (ret)
		return ret;
	qsort(c->res, c->nres, sizeof(*c->res), cmp_u64);
	c->tree_end = !fs->itab->lazy || !fs->itab->next;
	return 0;
}

void icursor_free(struct icursor *c)
{
	free(c->res);
	memset(c, 0, sizeof(*c));
}

/* The tree's next live number > c->last into c->tnext. */
static int tree_step(struct tfs *fs, struct icursor *c)
{
	uint64_t after = c->last;

	for (;;) {
		int st, ret = fs->itab->next(fs, after, &c->tnext);

		if (ret == -ENOENT) {
			c->tree_end = true;
			return 0;
		}
		if (ret)
			return ret;
		st = fs->v2dirty ? v2d_state(fs->v2dirty, c->tnext) : -1;
		if (st >= 0 && (st & V2D_UNSURE))
			return -ENOMEM;	/* deaths lost (v2dirty.h): cannot tell */
		if (st < 0 || !(st & V2D_DEAD)) {
			c->tree_valid = true;
			return 0;
		}
		after = c->tnext;	/* deleted: its items go at the next checkpoint */
	}
}

int icursor_next(struct tfs *fs, struct icursor *c, uint64_t *ino)
{
	uint64_t best = UINT64_MAX;
	int ret;

	if (!c->tree_end && (!c->tree_valid || c->tnext <= c->last)) {
		c->tree_valid = false;
		ret = tree_step(fs, c);
		if (ret)
			return ret;
	}
	while (c->i < c->nres && c->res[c->i] <= c->last)
		c->i++;
	if (c->i < c->nres)
		best = c->res[c->i];
	if (!c->tree_end && c->tree_valid && c->tnext < best)
		best = c->tnext;
	if (best == UINT64_MAX)
		return -ENOENT;
	c->last = best;
	*ino = best;
	return 0;
}
