// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * inode: the in-memory inode table (a power-of-two chained hash keyed by
 * inode number), the handles in front of it (inode_get/inode_put, a
 * reference count per inode) and the accessors of inode.h, inode life
 * cycle in memory (create, free, stat, encode).  When an unlinked inode is
 * deleted is idelete.c's business; what a record changes is apply.c's.
 *
 * The table holds one reference to each inode in it and every handle
 * another; fs_ifree takes the inode out of the table, drops its blocks and
 * puts the table's reference, so its memory goes with the last handle.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "dir.h"
#include "fs_i.h"
#include "inode_i.h"
#include "tlog.h"

#define ITABLE_MIN 64

static size_t ihash(uint64_t ino, size_t size)
{
	return ino_slot(ino, size);
}

int fs_itable_init(struct tfs *fs)
{
	struct itable *t = calloc(1, sizeof(*t));
	int ret;

	if (!t)
		return -ENOMEM;
	ret = pthread_rwlock_init(&t->lock, NULL);
	if (ret) {
		free(t);
		return -ret;
	}
	t->b = calloc(ITABLE_MIN, sizeof(*t->b));
	if (!t->b) {
		pthread_rwlock_destroy(&t->lock);
		free(t);
		return -ENOMEM;
	}
	t->size = ITABLE_MIN;
	atomic_store(&t->n, 0);
	for (unsigned i = 0; i < ITABLE_FAULT_STRIPES; i++)
		pthread_mutex_init(&t->fault_mu[i], NULL);
	fs->itab = t;
	return 0;
}

uint64_t fs_ninodes(struct tfs *fs)
{
	if (!fs->itab)
		return 0;
	if (fs->itab->lazy)	/* the resident ones are icache_stats' */
		return (uint64_t)atomic_load(&fs->itab->total);
	return atomic_load(&fs->itab->n);
}

void inode_release_mem(struct tfs_inode *ip, extent_drop_fn drop, void *ctx)
{
	extent_destroy(&ip->map, drop, ctx);
	dir_free(ip->dir);
	for (struct xattr *x = ip->xattrs, *next; x; x = next) {
		next = x->next;
		free(x->name);
		free(x->val);
		free(x);
	}
	free(ip->symlink);
	rl_destroy(&ip->rl);
	pthread_mutex_destroy(&ip->lock);
	free(ip);
}

void fs_itable_destroy(struct tfs *fs)
{
	struct itable *t = fs->itab;

	if (!t)
		return;
	for (size_t b = 0; t->b && b < t->size; b++) {
		for (struct tfs_inode *ip = t->b[b], *next; ip; ip = next) {
			next = ip->hnext;
			inode_release_mem(ip, NULL, NULL);
		}
	}
	free(t->b);
	free(t->stub_ones.s);
	free(t->stub_counts.s);
	pthread_rwlock_destroy(&t->lock);
	for (unsigned i = 0; i < ITABLE_FAULT_STRIPES; i++)
		pthread_mutex_destroy(&t->fault_mu[i]);
	free(t);
	fs->itab = NULL;
}

/* Copies one element per inode (a pointer or a number) into a growing
 * array, under the table lock shared: the one walk of the table the
 * snapshots below share. */
static int isnapshot(struct tfs *fs, size_t esz, void (*put)(void *dst, struct tfs_inode *ip),
		     void **out, size_t *nout)
{
	char *v = NULL;
	size_t n = 0, cap = 0;

	pthread_rwlock_rdlock(&fs->itab->lock);
	for (size_t b = 0; fs->itab->b && b < fs->itab->size; b++) {
		for (struct tfs_inode *ip = fs->itab->b[b]; ip; ip = ip->hnext) {
			if (n == cap) {
				size_t nc = cap ? cap * 2 : 256;
				char *nv = realloc(v, nc * esz);

				if (!nv) {
					pthread_rwlock_unlock(&fs->itab->lock);
					free(v);
					return -ENOMEM;
				}
				v = nv;
				cap = nc;
			}
			put(v + n++ * esz, ip);
		}
	}
	pthread_rwlock_unlock(&fs->itab->lock);
	*out = v;
	*nout = n;
	return 0;
}

static void put_ptr(void *dst, struct tfs_inode *ip)
{
	atomic_fetch_add(&ip->refs, 1);	/* a handle: under the table lock */
	memcpy(dst, &ip, sizeof(ip));
}

static void put_ino(void *dst, struct tfs_inode *ip)
{
	memcpy(dst, &ip->ino, sizeof(ip->ino));
}

int fs_isnapshot(struct tfs *fs, struct tfs_inode ***out, size_t *nout)
{
	void *v;
	int ret = isnapshot(fs, sizeof(struct tfs_inode *), put_ptr, &v, nout);

	if (ret == 0)
		*out = v;
	return ret;
}

void fs_isnapshot_put(struct tfs *fs, struct tfs_inode **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		inode_put(fs, v[i]);
	free(v);
}

int fs_isnapshot_inos(struct tfs *fs, uint64_t **out, size_t *nout)
{
	void *v;
	int ret = isnapshot(fs, sizeof(uint64_t), put_ino, &v, nout);

	if (ret == 0)
		*out = v;
	return ret;
}

/* Caller holds the table lock. */
struct tfs_inode *itable_find(struct tfs *fs, uint64_t ino)
{
	struct tfs_inode *ip = NULL;

	if (fs->itab->b) {
		ip = fs->itab->b[ihash(ino, fs->itab->size)];
		while (ip && ip->ino != ino)
			ip = ip->hnext;
	}
	return ip;
}

int fs_ifind(struct tfs *fs, uint64_t ino, struct tfs_inode **out)
{
	struct tfs_inode *ip;

	pthread_rwlock_rdlock(&fs->itab->lock);
	ip = itable_find(fs, ino);
	if (ip)
		atomic_store(&ip->used, true);
	pthread_rwlock_unlock(&fs->itab->lock);
	*out = ip;
	if (!ip && fs->itab->lazy)
		return icache_fault(fs, ino, false, false, out);
	return ip ? 0 : -ENOENT;
}

struct tfs_inode *fs_iget(struct tfs *fs, uint64_t ino)
{
	struct tfs_inode *ip;

	return fs_ifind(fs, ino, &ip) ? NULL : ip;
}

static int get(struct tfs *fs, uint64_t ino, bool walk, struct tfs_inode **out)
{
	struct tfs_inode *ip;

	pthread_rwlock_rdlock(&fs->itab->lock);
	ip = itable_find(fs, ino);
	if (ip) {	/* in the table: it holds a reference, so ours is not the first */
		atomic_fetch_add(&ip->refs, 1);
		atomic_store(&ip->used, true);
	}
	pthread_rwlock_unlock(&fs->itab->lock);
	*out = ip;
	if (!ip && fs->itab->lazy)
		return icache_fault(fs, ino, true, walk, out);
	return ip ? 0 : -ENOENT;
}

int inode_get(struct tfs *fs, uint64_t ino, struct tfs_inode **out)
{
	return get(fs, ino, false, out);
}

int inode_get_walk(struct tfs *fs, uint64_t ino, struct tfs_inode **out)
{
	return get(fs, ino, true, out);
}

int inode_get_resident(struct tfs *fs, uint64_t ino, struct tfs_inode **out)
{
	struct tfs_inode *ip;

	pthread_rwlock_rdlock(&fs->itab->lock);
	ip = itable_find(fs, ino);
	if (ip)
		atomic_fetch_add(&ip->refs, 1);
	pthread_rwlock_unlock(&fs->itab->lock);
	*out = ip;
	return ip ? 0 : -ENOENT;
}

bool inode_exists(struct tfs *fs, uint64_t ino)
{
	struct tfs_inode *ip;

	if (inode_get(fs, ino, &ip))
		return false;
	inode_put(fs, ip);
	return true;
}

struct tfs_inode *inode_grab(struct tfs_inode *ip)
{
	atomic_fetch_add(&ip->refs, 1);
	return ip;
}

void inode_put(struct tfs *fs, struct tfs_inode *ip)
{
	(void)fs;	/* the format v2 cache will write back and evict here */
	if (ip && atomic_fetch_sub(&ip->refs, 1) == 1)
		inode_release_mem(ip, NULL, NULL);
}

/* Double the bucket array; caller holds the table lock for writing.  Failure
 * only leaves the chains longer. */
static void itable_grow(struct tfs *fs)
{
	size_t nsize = fs->itab->size ? fs->itab->size * 2 : ITABLE_MIN;
	struct tfs_inode **nt = calloc(nsize, sizeof(*nt));

	if (!nt)
		return;
	for (size_t b = 0; b < fs->itab->size; b++) {
		for (struct tfs_inode *ip = fs->itab->b[b], *next; ip; ip = next) {
			size_t h = ihash(ip->ino, nsize);
			next = ip->hnext;
			ip->hnext = nt[h];
			nt[h] = ip;
		}
	}
	free(fs->itab->b);
	fs->itab->b = nt;
	fs->itab->size = nsize;
}

struct tfs_inode *inode_alloc(uint64_t ino)
{
	struct tfs_inode *ip = calloc(1, sizeof(*ip));

	if (!ip)
		return NULL;
	ip->ino = ino;
	atomic_store(&ip->refs, 1);	/* the table's */
	pthread_mutex_init(&ip->lock, NULL);
	extent_init(&ip->map);
	rl_init(&ip->rl);
	return ip;
}

bool itable_insert(struct tfs *fs, struct tfs_inode *ip)
{
	size_t h;

	if (!fs->itab->b || atomic_load(&fs->itab->n) + 1 > fs->itab->size)
		itable_grow(fs);
	if (!fs->itab->b)
		return false;
	h = ihash(ip->ino, fs->itab->size);
	ip->hnext = fs->itab->b[h];
	fs->itab->b[h] = ip;
	atomic_fetch_add(&fs->itab->n, 1);
	atomic_fetch_add(&fs->itab->dir_cost, ip->icost);
	return true;
}

struct tfs_inode *fs_inew(struct tfs *fs, uint64_t ino)
{
	struct tfs_inode *ip = inode_alloc(ino), *o;

	if (!ip)
		return NULL;
	/* On version 2 a new inode has no EXTENT items (numbers are never
	 * reused); a fault-in makes the ones it reads read their map. */
	if (fs->xc)
		extent_init_lazy(&ip->map, fs->xc, ino, &ip->rl, 0, true);
	pthread_rwlock_wrlock(&fs->itab->lock);
	o = itable_find(fs, ino);
	if (o || !itable_insert(fs, ip)) {	/* already there: callers look first */
		pthread_rwlock_unlock(&fs->itab->lock);
		inode_release_mem(ip, NULL, NULL);
		return o;
	}
	atomic_fetch_add(&fs->itab->total, 1);
	pthread_rwlock_unlock(&fs->itab->lock);
	return ip;
}

void fs_ifree(struct tfs *fs, struct tfs_inode *ip, extent_drop_fn drop, void *ctx)
{
	pthread_rwlock_wrlock(&fs->itab->lock);
	if (fs->itab->b) {
		struct tfs_inode **pp = &fs->itab->b[ihash(ip->ino, fs->itab->size)];
		while (*pp && *pp != ip)
			pp = &(*pp)->hnext;
		if (*pp) {
			*pp = ip->hnext;
			atomic_fetch_sub(&fs->itab->n, 1);
			atomic_fetch_sub(&fs->itab->total, 1);
			atomic_fetch_sub(&fs->itab->dir_cost, ip->icost);
		}
	}
	atomic_store(&ip->dead, true);
	pthread_rwlock_unlock(&fs->itab->lock);
	/* The blocks go now (into the caller's transaction); a handle still
	 * held sees an empty map until it is put. */
	extent_destroy(&ip->map, drop, ctx);
	extent_init(&ip->map);
	inode_put(fs, ip);	/* the table's reference */
}

void fs_istat(struct tfs_inode *ip, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ip->ino;
	st->st_mode = ip->mode;
	st->st_nlink = ip->nlink;
	st->st_uid = ip->uid;
	st->st_gid = ip->gid;
	st->st_rdev = ip->rdev;
	st->st_size = (off_t)atomic_load(&ip->size);
	st->st_blocks = (blkcnt_t)(extent_mapped(&ip->map) * 8);	/* 512-byte units */
	st->st_blksize = 4096;
	st->st_atim = ip->atime;
	st->st_mtim = ip->mtime;
	st->st_ctim = ip->ctime;
}

void fs_iencode(struct tfs_inode *ip, struct log_rec *r)
{
	memset(r, 0, sizeof(*r));
	r->type = LR_INODE;
	struct log_inode *li = &r->inode;
	li->ino = ip->ino;
	li->parent = S_ISDIR(ip->mode) ? ip->parent : 0;
	li->mode = ip->mode;
	li->uid = ip->uid;
	li->gid = ip->gid;
	li->nlink = ip->nlink;
	li->flags = ip->flags;
	li->rdev = ip->rdev;
	li->size = atomic_load(&ip->size);
	li->gen = ip->gen;
	li->atime_ns = fs_ts_ns(ip->atime);
	li->mtime_ns = fs_ts_ns(ip->mtime);
	li->ctime_ns = fs_ts_ns(ip->ctime);
	li->btime_ns = fs_ts_ns(ip->btime);
	if (ip->symlink) {
		li->target = ip->symlink;
		li->target_len = (uint32_t)strlen(ip->symlink);
	}
}

/*
 * Inode numbers are not reused while the file system lives, but a crash
 * can: an inode whose creation never reached the log leaves its number to
 * the next file created after the remount, and the kernel may have handed
 * out a file handle for it.  So the generation names one incarnation: a
 * hash of what is fixed at creation and stored with the inode since format
 * v1 (the per-mount creation counter and the creation time in
 * nanoseconds), which is the same after every remount.  The root is
 * generation 0: the kernel makes its root inode with 0 and never asks.
 */
uint32_t tfs_fh_gen(struct tfs *fs, uint64_t ino)
{
	struct tfs_inode *ip;
	uint64_t key[2], h;

	if (ino == TFS_ROOT_INO || inode_get(fs, ino, &ip))
		return 0;
	pthread_mutex_lock(&ip->lock);
	key[0] = ip->gen;
	key[1] = (uint64_t)fs_ts_ns(ip->btime);
	pthread_mutex_unlock(&ip->lock);
	inode_put(fs, ip);
	h = XXH3_64bits(key, sizeof(key));
	return (uint32_t)(h ^ h >> 32);
}

uint64_t fs_ialloc(struct tfs *fs)
{
	return atomic_fetch_add(&fs->next_ino, 1);
}


/* ---- accessors (inode.h) ---- */

void inode_lock(struct tfs_inode *ip)
{
	pthread_mutex_lock(&ip->lock);
}

int inode_trylock(struct tfs_inode *ip)
{
	return pthread_mutex_trylock(&ip->lock) ? -EBUSY : 0;
}

void inode_unlock(struct tfs_inode *ip)
{
	pthread_mutex_unlock(&ip->lock);
}

void inode_note_seq(struct tfs_inode *ip, uint64_t seq)
{
	if (seq > ip->last_seq)
		ip->last_seq = seq;
}

uint64_t inode_ino(const struct tfs_inode *ip)
{
	return ip->ino;
}

uint32_t inode_mode(const struct tfs_inode *ip)
{
	return ip->mode;
}

uint32_t inode_nlink(const struct tfs_inode *ip)
{
	return ip->nlink;
}

uint32_t inode_uid(const struct tfs_inode *ip)
{
	return ip->uid;
}

uint32_t inode_gid(const struct tfs_inode *ip)
{
	return ip->gid;
}

uint32_t inode_flags(const struct tfs_inode *ip)
{
	return ip->flags;
}

int inode_may_change(const struct tfs_inode *ip, bool append)
{
	uint32_t fl = ip->flags;

	if ((fl & TFS_FL_IMMUTABLE) || (append && (fl & TFS_FL_APPEND)))
		return -EPERM;
	return 0;
}

uint64_t inode_rdev(const struct tfs_inode *ip)
{
	return ip->rdev;
}

uint64_t inode_generation(const struct tfs_inode *ip)
{
	return ip->gen;
}

uint64_t inode_parent(const struct tfs_inode *ip)
{
	return ip->parent;
}

uint64_t inode_size(const struct tfs_inode *ip)
{
	return atomic_load(&ip->size);
}

struct timespec inode_atime(const struct tfs_inode *ip)
{
	return ip->atime;
}

struct timespec inode_mtime(const struct tfs_inode *ip)
{
	return ip->mtime;
}

struct timespec inode_ctime(const struct tfs_inode *ip)
{
	return ip->ctime;
}

struct timespec inode_btime(const struct tfs_inode *ip)
{
	return ip->btime;
}

const char *inode_symlink(const struct tfs_inode *ip)
{
	return ip->symlink;
}

struct dir *inode_dir(const struct tfs_inode *ip)
{
	return ip->dir;
}

const struct xattr *inode_xattrs(const struct tfs_inode *ip)
{
	return ip->xattrs;
}

uint64_t inode_mapped(const struct tfs_inode *ip)
{
	return extent_mapped(&ip->map);
}

uint64_t inode_seen_mapped(const struct tfs_inode *ip)
{
	return atomic_load(&ip->seen_mapped);
}

void inode_set_seen_mapped(struct tfs_inode *ip, uint64_t mapped)
{
	atomic_store(&ip->seen_mapped, mapped);
}

uint32_t inode_mtime_gen(const struct tfs_inode *ip)
{
	return atomic_load(&ip->mtime_gen);
}

void inode_mtime_bump(struct tfs_inode *ip)
{
	atomic_fetch_add(&ip->mtime_gen, 1);
}

struct rangelock *inode_rl(struct tfs_inode *ip)
{
	return &ip->rl;
}

void inode_lookup_add(struct tfs_inode *ip, uint64_t n)
{
	atomic_fetch_add(&ip->nlookup, n);
}

void inode_open_add(struct tfs_inode *ip)
{
	atomic_fetch_add(&ip->nopen, 1);
}

/* ---- the block map: the in-memory tables back it, so only holes fail ---- */

int inode_extent_lookup(struct tfs_inode *ip, uint64_t fblk, struct extent_ent *out)
{
	return extent_lookup(&ip->map, fblk, out);
}

uint64_t inode_next_data(struct tfs_inode *ip, uint64_t fblk)
{
	return extent_next_data(&ip->map, fblk);
}

uint64_t inode_next_hole(struct tfs_inode *ip, uint64_t fblk)
{
	return extent_next_hole(&ip->map, fblk);
}

int inode_extent_walk(struct tfs_inode *ip, uint64_t from, uint64_t to, extent_run_fn cb,
		      void *ctx)
{
	return extent_walk(&ip->map, from, to, cb, ctx);
}
