// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * idelete: when an unlinked inode is deleted, and the delete transaction.
 *
 * An inode is deleted when it has no name (nlink 0), no kernel reference
 * (nlookup 0) and no open handle (nopen 0).  Every drop of a count to zero
 * happens under fs->ns_lock, and so does every delete: otherwise two
 * droppers (say a forget and a release) could both see "last" and the second
 * would touch an inode the first already freed.  Drops that leave the count
 * above zero need no lock.
 *
 * Above both inode.c (the table) and apply.c (which applies the delete): so
 * the table never commits a transaction and the two do not call each other
 * in a circle.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fs_i.h"
#include "inode_i.h"
#include "tlog.h"

void fs_imaybe_delete_locked(struct tfs *fs, struct tfs_inode *ip)
{
	/* dead: deleted already, by a dropper that found it through a
	 * handle taken before (scrub, rebuild) */
	if (ip->ino == TFS_ROOT_INO || fs->readonly || atomic_load(&ip->dead))
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

/* Whether dropping the last count may delete: only for unlinked inodes.
 * A racy read is fine: it only decides whether to make room first. */
static bool maybe_unlinked(struct tfs_inode *ip)
{
	pthread_mutex_lock(&ip->lock);
	bool r = ip->nlink == 0;
	pthread_mutex_unlock(&ip->lock);
	return r;
}

/*
 * Room for a delete that dropping the last count of @ip may make, before
 * ns_lock: log space, and on format v2 the node gate's FS_NS_DROP slots in
 * *r until the delete is noted (fs_data_release after ns_lock).  A delete
 * is never refused (it gives room back): short only because of other
 * changes in flight, the gate waits for their release; short because of
 * what is noted, for up to NODE_GATE_WAITS checkpoints, each of which
 * turns the noted changes into nodes and frees the slots they replaced;
 * then it goes on, counted, into the half of the margin that creates
 * leave (fs.c node_room_at).  Waiting here is as safe as the log wait
 * before it: no lock is held, and a checkpoint needs none of ours.
 */
static void drop_reserve(struct tfs *fs, struct tfs_inode *ip, struct fs_resv *r)
{
	r->touch = r->other = 0;
	if (!fs->log || !maybe_unlinked(ip))
		return;
	log_wait_space(fs->log);
	if (fs->node_reserve_slots)	/* above us: through fs_new's pointer */
		(void)fs->node_reserve_slots(fs, false, FS_NS_DROP, r);
}

void fs_imaybe_delete(struct tfs *fs, struct tfs_inode *ip)
{
	struct fs_resv r;

	drop_reserve(fs, ip, &r);
	pthread_mutex_lock(&fs->ns_lock);
	fs_imaybe_delete_locked(fs, ip);
	pthread_mutex_unlock(&fs->ns_lock);
	fs_data_release(fs, &r);
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

void fs_iput_open(struct tfs *fs, struct tfs_inode *ip)
{
	struct fs_resv r;

	if (dec_unless_last32(&ip->nopen))
		return;
	drop_reserve(fs, ip, &r);
	pthread_mutex_lock(&fs->ns_lock);
	/* CAS: a concurrent lock-free change must not be lost. */
	uint32_t v = atomic_load(&ip->nopen);
	while (!atomic_compare_exchange_weak(&ip->nopen, &v, v ? v - 1 : 0))
		;
	fs_imaybe_delete_locked(fs, ip);
	pthread_mutex_unlock(&fs->ns_lock);
	fs_data_release(fs, &r);
}

void tfs_forget(struct tfs *fs, uint64_t ino, uint64_t nlookup)
{
	struct tfs_inode *ip;
	struct fs_resv r;

	/* Format v2: an inode dropped from memory keeps its count in a stub,
	 * which the forget drops without reading the inode in. */
	if (!nlookup || icache_forget(fs, ino, nlookup) || inode_get(fs, ino, &ip))
		return;
	if (dec_unless_last64(&ip->nlookup, nlookup))
		goto out;
	drop_reserve(fs, ip, &r);
	pthread_mutex_lock(&fs->ns_lock);
	uint64_t v = atomic_load(&ip->nlookup);
	while (!atomic_compare_exchange_weak(&ip->nlookup, &v,
					     v > nlookup ? v - nlookup : 0))
		;
	fs_imaybe_delete_locked(fs, ip);
	pthread_mutex_unlock(&fs->ns_lock);
	fs_data_release(fs, &r);
out:
	inode_put(fs, ip);
}
