// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * inode: the in-memory inode table (a power-of-two chained hash keyed by
 * inode number), inode life cycle (create, free, stat, encode) and the
 * reference counts that decide when an unlinked inode is deleted.
 *
 * An inode is deleted when it has no name (nlink 0), no kernel reference
 * (nlookup 0) and no open handle (nopen 0).  Every drop of a count to zero
 * happens under fs->ns_lock, and so does every delete: otherwise two
 * droppers (say a forget and a release) could both see "last" and the second
 * would touch an inode the first already freed.  Drops that leave the count
 * above zero need no lock.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "dir.h"
#include "fs_i.h"
#include "tlog.h"

#define ITABLE_MIN 64

static size_t ihash(uint64_t ino, size_t size)
{
	/* Fibonacci hashing: sequential inode numbers spread over buckets. */
	return (size_t)((ino * 0x9E3779B97F4A7C15ull) >> 32) & (size - 1);
}

int fs_itable_init(struct tfs *fs)
{
	int ret = pthread_rwlock_init(&fs->itable_lock, NULL);
	if (ret)
		return -ret;
	fs->itable = calloc(ITABLE_MIN, sizeof(*fs->itable));
	if (!fs->itable) {
		pthread_rwlock_destroy(&fs->itable_lock);
		return -ENOMEM;
	}
	fs->itable_size = ITABLE_MIN;
	atomic_store(&fs->ninodes, 0);
	return 0;
}

static void inode_release_mem(struct tfs_inode *ip, extent_drop_fn drop, void *ctx)
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
	for (size_t b = 0; fs->itable && b < fs->itable_size; b++) {
		for (struct tfs_inode *ip = fs->itable[b], *next; ip; ip = next) {
			next = ip->hnext;
			inode_release_mem(ip, NULL, NULL);
		}
	}
	free(fs->itable);
	fs->itable = NULL;
	fs->itable_size = 0;
	atomic_store(&fs->ninodes, 0);
	pthread_rwlock_destroy(&fs->itable_lock);
}

/* Copies one element per inode (a pointer or a number) into a growing
 * array, under itable_lock shared: the one walk of the table the
 * snapshots below share. */
static int isnapshot(struct tfs *fs, size_t esz, void (*put)(void *dst, struct tfs_inode *ip),
		     void **out, size_t *nout)
{
	char *v = NULL;
	size_t n = 0, cap = 0;

	pthread_rwlock_rdlock(&fs->itable_lock);
	for (size_t b = 0; fs->itable && b < fs->itable_size; b++) {
		for (struct tfs_inode *ip = fs->itable[b]; ip; ip = ip->hnext) {
			if (n == cap) {
				size_t nc = cap ? cap * 2 : 256;
				char *nv = realloc(v, nc * esz);

				if (!nv) {
					pthread_rwlock_unlock(&fs->itable_lock);
					free(v);
					return -ENOMEM;
				}
				v = nv;
				cap = nc;
			}
			put(v + n++ * esz, ip);
		}
	}
	pthread_rwlock_unlock(&fs->itable_lock);
	*out = v;
	*nout = n;
	return 0;
}

static void put_ptr(void *dst, struct tfs_inode *ip)
{
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

int fs_isnapshot_inos(struct tfs *fs, uint64_t **out, size_t *nout)
{
	void *v;
	int ret = isnapshot(fs, sizeof(uint64_t), put_ino, &v, nout);

	if (ret == 0)
		*out = v;
	return ret;
}

struct tfs_inode *fs_iget(struct tfs *fs, uint64_t ino)
{
	struct tfs_inode *ip = NULL;

	pthread_rwlock_rdlock(&fs->itable_lock);
	if (fs->itable) {
		ip = fs->itable[ihash(ino, fs->itable_size)];
		while (ip && ip->ino != ino)
			ip = ip->hnext;
	}
	pthread_rwlock_unlock(&fs->itable_lock);
	return ip;
}

/* Double the bucket array; caller holds itable_lock for writing.  Failure
 * only leaves the chains longer. */
static void itable_grow(struct tfs *fs)
{
	size_t nsize = fs->itable_size ? fs->itable_size * 2 : ITABLE_MIN;
	struct tfs_inode **nt = calloc(nsize, sizeof(*nt));

	if (!nt)
		return;
	for (size_t b = 0; b < fs->itable_size; b++) {
		for (struct tfs_inode *ip = fs->itable[b], *next; ip; ip = next) {
			size_t h = ihash(ip->ino, nsize);
			next = ip->hnext;
			ip->hnext = nt[h];
			nt[h] = ip;
		}
	}
	free(fs->itable);
	fs->itable = nt;
	fs->itable_size = nsize;
}

struct tfs_inode *fs_inew(struct tfs *fs, uint64_t ino)
{
	struct tfs_inode *ip = calloc(1, sizeof(*ip));

	if (!ip)
		return NULL;
	ip->ino = ino;
	pthread_mutex_init(&ip->lock, NULL);
	extent_init(&ip->map);
	rl_init(&ip->rl);

	pthread_rwlock_wrlock(&fs->itable_lock);
	if (!fs->itable || atomic_load(&fs->ninodes) + 1 > fs->itable_size)
		itable_grow(fs);
	if (!fs->itable) {
		pthread_rwlock_unlock(&fs->itable_lock);
		inode_release_mem(ip, NULL, NULL);
		return NULL;
	}
	size_t h = ihash(ino, fs->itable_size);
	for (struct tfs_inode *o = fs->itable[h]; o; o = o->hnext) {
		if (o->ino == ino) {	/* already there: callers look first */
			pthread_rwlock_unlock(&fs->itable_lock);
			inode_release_mem(ip, NULL, NULL);
			return o;
		}
	}
	ip->hnext = fs->itable[h];
	fs->itable[h] = ip;
	atomic_fetch_add(&fs->ninodes, 1);
	pthread_rwlock_unlock(&fs->itable_lock);
	return ip;
}

void fs_ifree(struct tfs *fs, struct tfs_inode *ip, extent_drop_fn drop, void *ctx)
{
	pthread_rwlock_wrlock(&fs->itable_lock);
	if (fs->itable) {
		struct tfs_inode **pp = &fs->itable[ihash(ip->ino, fs->itable_size)];
		while (*pp && *pp != ip)
			pp = &(*pp)->hnext;
		if (*pp) {
			*pp = ip->hnext;
			atomic_fetch_sub(&fs->ninodes, 1);
		}
	}
	pthread_rwlock_unlock(&fs->itable_lock);
	inode_release_mem(ip, drop, ctx);
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

	if (ino == TFS_ROOT_INO || !(ip = fs_iget(fs, ino)))
		return 0;
	pthread_mutex_lock(&ip->lock);
	key[0] = ip->gen;
	key[1] = (uint64_t)fs_ts_ns(ip->btime);
	pthread_mutex_unlock(&ip->lock);
	h = XXH3_64bits(key, sizeof(key));
	return (uint32_t)(h ^ h >> 32);
}

uint64_t fs_ialloc(struct tfs *fs)
{
	return atomic_fetch_add(&fs->next_ino, 1);
}

void fs_imaybe_delete_locked(struct tfs *fs, struct tfs_inode *ip)
{
	if (ip->ino == TFS_ROOT_INO || fs->readonly)
		return;
	/* Under ns_lock nlink cannot change, nlookup cannot rise from 0 (a
	 * lookup needs a name, and there is none), and opens need a lookup. */
	pthread_mutex_lock(&ip->lock);
	bool dead = ip->nlink == 0 && atomic_load(&ip->nlookup) == 0 &&
		    atomic_load(&ip->nopen) == 0;
	pthread_mutex_unlock(&ip->lock);
	if (!dead)
		return;

	struct meta_tx tx;
	struct log_rec r = { .type = LR_INODE_DEL };
	uint64_t seq;
	uint64_t ino = ip->ino;

	r.del.ino = ino;
	meta_tx_init(&tx);
	/* The apply frees ip, so no inode lock may be held here; nobody else
	 * can reach an inode without names, references or opens. */
	int ret = meta_tx_add(&tx, &r);
	if (!ret)
		ret = meta_tx_commit(fs, &tx, &seq);
	meta_tx_free(&tx);
	if (ret)
		tfs_log(LOG_ERR, "deleting inode %llu failed: %s",
			(unsigned long long)ino, strerror(-ret));
}

void fs_imaybe_delete(struct tfs *fs, struct tfs_inode *ip)
{
	if (fs->log)
		log_wait_space(fs->log);
	pthread_mutex_lock(&fs->ns_lock);
	fs_imaybe_delete_locked(fs, ip);
	pthread_mutex_unlock(&fs->ns_lock);
}

/* Drop n from *c without a lock if that leaves it above zero. */
static bool dec_unless_last64(_Atomic uint64_t *c, uint64_t n)
{
	uint64_t v = atomic_load(c);
	while (v > n)
		if (atomic_compare_exchange_weak(c, &v, v - n))
			return true;
	return false;
}

static bool dec_unless_last32(_Atomic uint32_t *c)
{
	uint32_t v = atomic_load(c);
	while (v > 1)
		if (atomic_compare_exchange_weak(c, &v, v - 1))
			return true;
	return false;
}

/* Whether dropping the last count may delete: only for unlinked inodes.
 * A racy read is fine: it only decides whether to wait for log space. */
static bool maybe_unlinked(struct tfs_inode *ip)
{
	pthread_mutex_lock(&ip->lock);
	bool r = ip->nlink == 0;
	pthread_mutex_unlock(&ip->lock);
	return r;
}

void fs_iput_open(struct tfs *fs, struct tfs_inode *ip)
{
	if (dec_unless_last32(&ip->nopen))
		return;
	if (fs->log && maybe_unlinked(ip))
		log_wait_space(fs->log);
	pthread_mutex_lock(&fs->ns_lock);
	/* CAS: a concurrent lock-free change must not be lost. */
	uint32_t v = atomic_load(&ip->nopen);
	while (!atomic_compare_exchange_weak(&ip->nopen, &v, v ? v - 1 : 0))
		;
	fs_imaybe_delete_locked(fs, ip);
	pthread_mutex_unlock(&fs->ns_lock);
}

void tfs_forget(struct tfs *fs, uint64_t ino, uint64_t nlookup)
{
	struct tfs_inode *ip = fs_iget(fs, ino);

	if (!ip || !nlookup)
		return;
	if (dec_unless_last64(&ip->nlookup, nlookup))
		return;
	if (fs->log && maybe_unlinked(ip))
		log_wait_space(fs->log);
	pthread_mutex_lock(&fs->ns_lock);
	uint64_t v = atomic_load(&ip->nlookup);
	while (!atomic_compare_exchange_weak(&ip->nlookup, &v,
					     v > nlookup ? v - nlookup : 0))
		;
	fs_imaybe_delete_locked(fs, ip);
	pthread_mutex_unlock(&fs->ns_lock);
}
