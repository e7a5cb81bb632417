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
 * kernel's count (16 bytes in an open-addressed table, struct istub),
 * and the count comes back with the inode at its next fault-in.  A FORGET
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

#include "fs_i.h"
#include "inode_i.h"
#include "memtrim.h"
#include "v2dirty.h"

#define EVICT_SCAN 256		/* buckets the hand passes per step */
#define EVICT_BATCH 64		/* inodes dropped per step at most */
#define STUB_MIN 64		/* slots of the first stub table */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* ---- lookup stubs: the caller holds the table lock for writing ---- */

static size_t stub_home(uint64_t ino, size_t cap)
{
	return ino_slot(ino, cap);
}

static struct istub *stub_find(struct itable *t, uint64_t ino)
{
	if (!t->stub_cap)
		return NULL;
	for (size_t i = stub_home(ino, t->stub_cap);; i = (i + 1) & (t->stub_cap - 1)) {
		if (t->stubs[i].ino == ino)
			return &t->stubs[i];
		if (!t->stubs[i].ino)
			return NULL;
	}
}

/* Move the stubs into a table of @cap slots; false without memory. */
static bool stub_resize(struct itable *t, size_t cap)
{
	struct istub *ns = calloc(cap, sizeof(*ns));

	if (!ns)
		return false;
	for (size_t i = 0; i < t->stub_cap; i++) {
		size_t j;

		if (!t->stubs[i].ino)
			continue;
		for (j = stub_home(t->stubs[i].ino, cap); ns[j].ino; j = (j + 1) & (cap - 1))
			;
		ns[j] = t->stubs[i];
	}
	free(t->stubs);
	t->stubs = ns;
	t->stub_cap = cap;
	return true;
}

/* A stub for @ino (not in the table, none yet) with @n lookups. */
static bool stub_add(struct itable *t, uint64_t ino, uint64_t n)
{
	size_t i;

	if ((atomic_load(&t->nstubs) + 1) * 4 > t->stub_cap * 3 &&
	    !stub_resize(t, t->stub_cap ? t->stub_cap * 2 : STUB_MIN))
		return false;
	for (i = stub_home(ino, t->stub_cap); t->stubs[i].ino; i = (i + 1) & (t->stub_cap - 1))
		;
	t->stubs[i] = (struct istub){ .ino = ino, .nlookup = n };
	atomic_fetch_add(&t->nstubs, 1);
	return true;
}

/* Remove stub @s: the ones after it in its run move back into the hole
 * when their home allows, so lookups never stop at a hole too early. */
static void stub_del(struct itable *t, struct istub *s)
{
	size_t mask = t->stub_cap - 1, hole = (size_t)(s - t->stubs);

	for (size_t j = (hole + 1) & mask; t->stubs[j].ino; j = (j + 1) & mask) {
		size_t home = stub_home(t->stubs[j].ino, t->stub_cap);

		/* j may move to the hole unless its home lies in (hole, j] */
		if (((j - home) & mask) >= ((j - hole) & mask)) {
			t->stubs[hole] = t->stubs[j];
			hole = j;
		}
	}
	t->stubs[hole].ino = 0;
	if (atomic_fetch_sub(&t->nstubs, 1) == 1) {
		free(t->stubs);		/* the kernel forgot them all */
		t->stubs = NULL;
		t->stub_cap = 0;
	} else if (t->stub_cap > STUB_MIN && atomic_load(&t->nstubs) * 8 < t->stub_cap) {
		stub_resize(t, t->stub_cap / 2);	/* failure: stays larger */
	}
}

bool icache_forget(struct tfs *fs, uint64_t ino, uint64_t n)
{
	struct itable *t = fs->itab;
	struct istub *s;

	if (!t || !t->lazy)
		return false;
	pthread_rwlock_wrlock(&t->lock);
	if (itable_find(fs, ino)) {
		pthread_rwlock_unlock(&t->lock);
		return false;
	}
	/* Not resident and no stub: the kernel held no lookup (a forget
	 * after the inode was deleted); nothing to drop. */
	s = stub_find(t, ino);
	if (s) {
		s->nlookup = s->nlookup > n ? s->nlookup - n : 0;
		if (!s->nlookup)
			stub_del(t, s);
	}
	pthread_rwlock_unlock(&t->lock);
	return true;
}

/* A fault-in inserted @ip: the count its stub kept comes back. */
static void stub_restore(struct itable *t, struct tfs_inode *ip)
{
	struct istub *s = stub_find(t, ip->ino);

	if (!s)
		return;
	atomic_store(&ip->nlookup, s->nlookup);
	stub_del(t, s);
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
	st->stub_bytes = t->stub_cap * sizeof(struct istub);
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
	return !fs->v2dirty || v2d_state(fs->v2dirty, ip->ino) < 0;
}

/* One step of the clock: drops up to EVICT_BATCH inodes while the table is
 * over its budget; the number dropped. */
static size_t evict_step(struct tfs *fs, const struct tfs_inode *keep)
{
	struct itable *t = fs->itab;
	struct tfs_inode *batch[EVICT_BATCH];
	size_t nb = 0;

	pthread_rwlock_wrlock(&t->lock);
	for (size_t step = 0; t->b && step < EVICT_SCAN && nb < EVICT_BATCH &&
	     atomic_load(&t->n) > t->max; step++) {
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
		mem_freed(nb * TFS_CACHE_INODE_COST);
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
	while (atomic_load(&t->n) > t->max) {
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
	if (t->lazy && atomic_load(&t->n) > t->max)
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
