// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fs: the life cycle of a mounted file system around its mount (mount.c):
 * the background commit/checkpoint thread, the mirror's state hook, orphan
 * reclaim, unmount, and the whole-fs calls (statfs, syncfs, fsync).  Owns
 * struct tfs's setup and teardown, whose helpers mount.c and format.c share
 * (fs_i.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bnode.h"
#include "ckpt_v2.h"
#include "csum.h"
#include "dir.h"
#include "event.h"
#include "discard.h"
#include "extcache.h"
#include "fs_i.h"
#include "memtrim.h"
#include "rebuild.h"
#include "scrub.h"
#include "tlog.h"
#include "v2dirty.h"

#define FS_RESERVE_MIN 2048u		/* blocks kept for checkpoints */

int fs_fill_random(void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t r = getrandom(p, len, 0);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += r;
		len -= (size_t)r;
	}
	return 0;
}

int fs_random_u64_nonzero(uint64_t *v)
{
	int ret;

	do {
		ret = fs_fill_random(v, sizeof(*v));
	} while (ret == 0 && *v == 0);
	return ret;
}

/* ---- struct tfs ---- */

static void fs_kick_bg(struct tfs *fs)
{
	pthread_mutex_lock(&fs->bg_mu);
	fs->bg_want_ckpt = true;
	pthread_cond_signal(&fs->bg_cv);
	pthread_mutex_unlock(&fs->bg_mu);
}

static void kick_bg_cb(void *ctx)
{
	fs_kick_bg(ctx);
}

static void cb_durable(void *ctx, uint64_t seq)
{
	struct tfs *fs = ctx;

	alloc_release_durable(fs->alloc, seq);
}

static void cb_pressure(void *ctx)
{
	fs_kick_bg(ctx);
}

/* A device changed state: checkpoint soon, which persists the write-intent
 * bitmap (the stale mark itself is made durable before the next write or
 * flush is acknowledged: sbc_persist_stale through the mirror's hook). */
void fs_on_mirror_state(void *ctx, unsigned dev, int state, int err)
{
	struct tfs *fs = ctx;

	/* The last device that could take writes is gone: a change accepted
	 * now would live in memory only and vanish at unmount, so stop taking
	 * any (every mutator checks readonly and fails with EROFS).  Nothing
	 * brings a device back without a good copy to rebuild from: this
	 * lasts until unmount.  Logged once: on_state fires per transition. */
	if (mirror_healthy(&fs->mirror) == 0 && !atomic_exchange(&fs->unusable, true)) {
		fs->readonly = true;
		if (fs->log)	/* no checkpoint can free log space */
			log_stop_waits(fs->log);
		tfs_log(LOG_ERR, "no device can take writes any more: the file system is "
			"now read-only (every change fails with EROFS); unmount it and "
			"check the devices");
		if (fs->on_unusable)
			fs->on_unusable(fs->cb_ctx);
	}
	fs_kick_bg(fs);
	event_dev_state(fs, dev, state, err);
}

int fs_new(struct tfs **out)
{
	struct tfs *fs = calloc(1, sizeof(*fs));
	pthread_condattr_t ca;
	int ret;

	if (!fs)
		return -ENOMEM;
	ret = file_async_init(fs);
	if (!ret)
		ret = fs_itable_init(fs);
	if (ret < 0) {
		file_async_free(fs);
		free(fs);
		return ret;
	}
	fs->node_reserve = fs_node_reserve;
	fs->node_reserve_slots = fs_node_reserve_slots;
	fs->node_release = fs_node_release;
	pthread_mutex_init(&fs->resv_mu, NULL);
	pthread_mutex_init(&fs->ns_lock, NULL);
	pthread_mutex_init(&fs->ckpt_mu, NULL);
	sbc_init(&fs->sbc);
	pthread_mutex_init(&fs->bg_mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&fs->bg_cv, &ca);
	pthread_cond_init(&fs->ckpt_cv, &ca);
	pthread_cond_init(&fs->resv_cv, &ca);
	pthread_condattr_destroy(&ca);
	atomic_store(&fs->next_ino, TFS_ROOT_INO + 1);
	*out = fs;
	return 0;
}

/* Frees the in-memory fs (inodes, log, allocator, pool); devices and the
 * backend are closed by the caller's ladder. */
void fs_free(struct tfs *fs)
{
	scrub_free(fs);	/* its thread uses the log and the inodes */
	rebuild_free(fs);
	event_close(fs);	/* after every thread that emits */
	if (fs->log)
		log_close(fs->log);
	discard_nodes_free(fs);	/* its threads use the trees' node map */
	ckpt_v2_free(fs);	/* before the inodes: meta_apply notes into it */
	fs_itable_destroy(fs);
	extcache_destroy(fs->xc);	/* after the maps that use it */
	if (fs->bounce)
		bounce_pool_destroy(fs->bounce);
	if (fs->bounce_small)
		bounce_pool_destroy(fs->bounce_small);
	/* After everything that frees blocks (log_close may release the
	 * last durable frees); its threads use the allocator and devices. */
	discard_free(fs);
	if (fs->alloc)
		alloc_destroy(fs->alloc);
	pthread_cond_destroy(&fs->bg_cv);
	pthread_cond_destroy(&fs->ckpt_cv);
	pthread_cond_destroy(&fs->resv_cv);
	pthread_mutex_destroy(&fs->resv_mu);
	pthread_mutex_destroy(&fs->bg_mu);
	file_async_free(fs);
	sbc_destroy(&fs->sbc);
	pthread_mutex_destroy(&fs->ckpt_mu);
	pthread_mutex_destroy(&fs->ns_lock);
	free(fs);
}

/* Called after the backend is destroyed.  The exclusive flock is dropped
 * explicitly: io_uring releases a closed ring's file references
 * asynchronously, and the lock would otherwise live on until the last of
 * them goes, refusing an immediate remount with EBUSY. */
void fs_close_devs(struct dev **d, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		if (d[i]) {
			flock(d[i]->fd, LOCK_UN);
			dev_close(d[i]);
		}
		d[i] = NULL;
	}
}

/*
 * The metadata reserve must hold two checkpoints, the current one and the
 * next (ckpt_alloc puts them at its two ends), when the data area is full
 * and too fragmented to hold either.  A checkpoint stores every data block
 * at worst as a one-block extent record: 8 (header) + 28 + 8 (checksum) =
 * 44 bytes, 1.07% of the data area; two take 2.15%.  3/128 (2.34%) leaves
 * the rest for inodes and names (about 1 MiB of records per checkpoint and
 * GiB).  1%, the old size, let a 1 GiB mount that fsstress had filled and
 * fragmented reach checkpoints of 1274 blocks against a 2539-block reserve:
 * the next checkpoint, unmount and every later mount failed with ENOSPC.
 */
static uint64_t fs_reserve(uint64_t data_blocks)
{
	uint64_t r = data_blocks / 128 * 3;

	if (r < FS_RESERVE_MIN)
		r = FS_RESERVE_MIN;
	if (r > data_blocks / 2)
		r = data_blocks / 2;
	return r;
}

int fs_alloc_make(const struct tfs *fs, struct alloc **out)
{
	/* Version 2: the node area starts the data area; alloc.c gets the
	 * rest (ckpt_v2.h). */
	uint64_t start = fs->sb.version == SUPER_VERSION_V2 ?
			 fs->sb.node_start + fs->sb.node_blocks : fs->sb.data_start;

	return alloc_create(start, fs->sb.total_blocks,
			    fs_reserve(fs->sb.total_blocks - start), out);
}

int fs_alloc_create(struct tfs *fs)
{
	return fs_alloc_make(fs, &fs->alloc);
}

void fs_log_geom(const struct tfs *fs, struct log_geom *g)
{
	super_log_geom(&fs->sb, g);
}

int fs_log_open(struct tfs *fs, uint64_t pos, uint64_t seq)
{
	struct log_geom g;
	struct log_cbs cbs = {
		.on_durable = cb_durable,
		.on_pressure = cb_pressure,
		.on_room = fs_dirty_gate,
		.ctx = fs,
	};
	int ret;

	fs_log_geom(fs, &g);
	ret = log_open(&fs->mirror, &g, pos, seq, &cbs, &fs->log);
	if (ret == 0)
		log_set_ckpt_blocks(fs->log, fs->ckpt_log_bytes / TFS_BLOCK_SIZE);
	return ret;
}

/*
 * The log_id the next mount after a superblock naming @log_id writes
 * under: derived from the file system's uuid and that log_id, so that
 * replay can tell "a later mount of this file system continued this log"
 * (its newest superblock lost) from chunks another file system left on the
 * device (mkfs -f clears only the start of the log region).  Never 0 and
 * never @log_id itself.
 */
uint64_t fs_next_log_id(const struct tfs *fs, uint64_t log_id)
{
	return super_next_log_id(&fs->sb, log_id);
}

/* Before opening: the exclusive lock dev_open takes would turn the second
 * open of one device into a vaguer EBUSY (or "in use by another twinfs
 * process", after a wait). */
bool fs_same_paths(const char *const *devs, unsigned n, unsigned *a, unsigned *b)
{
	for (unsigned i = 0; i < n; i++) {
		struct dev_id di, dj;

		if (dev_id_path(devs[i], &di) < 0)
			continue;
		for (unsigned j = 0; j < i; j++) {
			if (dev_id_path(devs[j], &dj) == 0 && dev_id_eq(&di, &dj)) {
				*a = i;
				*b = j;
				return true;
			}
		}
	}
	return false;
}

int fs_attach_devs(struct dev_backend *be, struct dev **d, const char *const *paths,
		   unsigned n, char *err, size_t errlen)
{
	int ret;

	for (unsigned i = 0; i < n; i++) {
		if (!d[i])
			continue;
		ret = dev_backend_attach(be, d[i]);
		if (ret < 0) {
			tfs_seterr(err, errlen, "%s: cannot attach to the I/O backend: %s",
				   paths[i], strerror(-ret));
			return ret;
		}
	}
	return 0;
}

int fs_backend_create(const char *name, const char *fault, struct dev_backend **out,
		      char *err, size_t errlen)
{
	struct dev_backend *be, *fb;
	int ret;

	ret = dev_backend_create(name ? name : "auto", &be);
	if (ret < 0) {
		tfs_seterr(err, errlen, "cannot create the %s I/O backend: %s",
			   name ? name : "auto", strerror(-ret));
		return ret;
	}
	if (fault) {
		ret = dev_fault_create(be, &fb);
		if (ret < 0) {
			dev_backend_destroy(be);
			tfs_seterr(err, errlen, "cannot create the fault backend: %s",
				   strerror(-ret));
			return ret;
		}
		be = fb;
		ret = dev_fault_parse(be, fault);
		if (ret < 0) {
			dev_backend_destroy(be);
			tfs_seterr(err, errlen, "invalid fault specification: %s", fault);
			return ret;
		}
		/* So faults and crash journals cover the asynchronous write
		 * path too. */
		ret = dev_async_emulate(be);
		if (ret < 0) {
			dev_backend_destroy(be);
			tfs_seterr(err, errlen, "cannot start the fault backend: %s",
				   strerror(-ret));
			return ret;
		}
	}
	*out = be;
	return 0;
}

/* Delete inode @ino if it has no name (nlink 0); *count and *bytes grow
 * by what went.  With @peek a number that is not resident is read from
 * its INODE item (format v2: the mount's walk of the tree; *walked counts
 * them), else it is read in (format v2: ORPHAN items; a number the replay
 * deleted is not).  0 (also when it is gone or named), -errno. */
static int reclaim_one(struct tfs *fs, uint64_t ino, bool peek, uint64_t *count,
		       uint64_t *bytes)
{
	struct log_rec r = { .type = LR_INODE_DEL };
	struct tfs_inode *ip;
	uint64_t blocks = 0;
	bool orphan = false;
	int ret;

	ret = peek ? inode_get_resident(fs, ino, &ip) : inode_get(fs, ino, &ip);
	if (ret == 0) {
		orphan = inode_nlink(ip) == 0;
		blocks = S_ISREG(inode_mode(ip)) ? inode_mapped(ip) : 0;
		inode_put(fs, ip);
	} else if (ret == -ENOENT && peek && fs->v2) {
		/* Not resident (format v2): its INODE item says, without
		 * reading it into the inode cache. */
		struct v2_peek pk = { .nlink = 1 };

		fs->mount_inodes_walked++;
		ret = ckpt_v2_peek(fs, ino, &pk, NULL, NULL);
		orphan = pk.nlink == 0;
		blocks = pk.mapped;
	}
	if (ret == -ENOENT || (ret == 0 && !orphan))
		return 0;
	if (ret)
		return ret;
	r.del.ino = ino;
	ret = meta_apply(fs, &r, NULL);
	if (ret < 0)
		return ret;
	(*count)++;
	*bytes += blocks * TFS_BLOCK_SIZE;
	return 0;
}

/* Format v2 mount: the inodes the committed trees list as orphans (their
 * ORPHAN items; the log's are resident, the other pass's). */
static int reclaim_orphan_items(struct tfs *fs, uint64_t *count, uint64_t *bytes, char *err,
				size_t errlen)
{
	uint64_t *inos;
	size_t n;
	int ret;

	ret = ckpt_v2_orphans(fs, &inos, &n);
	if (ret < 0) {
		fs_seterr_inodes(fs, ret, err, errlen);
		return ret;
	}
	for (size_t i = 0; i < n; i++) {
		ret = reclaim_one(fs, inos[i], false, count, bytes);
		if (ret < 0) {
			tfs_seterr(err, errlen, "cannot reclaim orphan inode %llu: %s",
				   (unsigned long long)inos[i], strerror(-ret));
			break;
		}
	}
	free(inos);
	return ret < 0 ? ret : 0;
}

/*
 * Delete every inode without a name (nlink 0): files unlinked while open.
 * Not logged: the checkpoint the caller writes next records it, and if that
 * checkpoint never lands the next mount reclaims them again.  Their blocks
 * are not given back to the allocator (mount rebuilds it from what is left;
 * unmount drops it).  *count and *bytes (allocated) say what went.
 *
 * Which inodes are looked at: the resident ones (the inode cache never
 * drops an inode without a name, so every orphan the log replay or the
 * live file system made is resident), and on a format v2 mount the ones
 * the trees' ORPHAN items name: never a walk of every inode.
 */
int fs_reclaim_orphans(struct tfs *fs, uint64_t *count, uint64_t *bytes, char *err,
		       size_t errlen)
{
	struct icursor c;
	uint64_t ino;
	int ret;

	*count = *bytes = 0;
	ret = icursor_init(fs, &c);
	if (ret < 0) {
		tfs_seterr(err, errlen, "out of memory");
		return ret;
	}
	c.tree_end = true;
	while ((ret = icursor_next(fs, &c, &ino)) == 0) {
		if (ino == TFS_ROOT_INO)
			continue;
		ret = reclaim_one(fs, ino, true, count, bytes);
		if (ret < 0) {
			icursor_free(&c);
			tfs_seterr(err, errlen, "cannot reclaim orphan inode %llu: %s",
				   (unsigned long long)ino, strerror(-ret));
			return ret;
		}
	}
	icursor_free(&c);
	if (ret != -ENOENT) {
		fs_seterr_inodes(fs, ret, err, errlen);
		return ret;
	}
	if (fs->v2 && fs->replaying)
		return reclaim_orphan_items(fs, count, bytes, err, errlen);
	return 0;
}

void fs_seterr_inodes(struct tfs *fs, int ret, char *err, size_t errlen)
{
	if (ret == -EIO && fs->v2)	/* as the load says it (mount.c) */
		tfs_seterr(err, errlen, "%s: cannot load the metadata trees: a tree node has "
			   "no good copy on any device (run fsck.twinfs -n to see the damage)",
			   fs->mirror.devs[0] ? fs->mirror.devs[0]->path : "twinfs");
	else
		tfs_seterr(err, errlen, "cannot read the inodes: %s", strerror(-ret));
}

/* Fail in-sync devices whose image file was deleted or truncated: an
 * image deleted or truncated under us fails no I/O (deleted) or only reads
 * (truncated). */
static void check_images(struct tfs *fs)
{
	struct mirror *m = &fs->mirror;

	for (unsigned i = 0; i < m->ndevs; i++) {
		struct dev *d = m->devs[i];
		struct stat st;

		if (!d || d->is_blk || atomic_load(&m->state[i]) != MDEV_OK)
			continue;
		if (fstat(d->fd, &st) < 0)
			continue;
		/* An open image keeps working after rm, but it is gone at
		 * unmount: treat it as a vanished device now. */
		if (st.st_nlink == 0) {
			tfs_log(LOG_ERR, "%s: image file was deleted", d->path);
			mirror_fail_dev(m, i, -ENODEV);
		} else if ((uint64_t)st.st_size < fs->sb.total_blocks * TFS_BLOCK_SIZE) {
			tfs_log(LOG_ERR, "%s: image file was truncated", d->path);
			mirror_fail_dev(m, i, -EIO);
		}
	}
}

/* After a burst deeper than the kept buffers, give its pages back; after
 * a checkpoint (it frees what it wrote: leaves, inodes, records, nodes),
 * the free pages malloc keeps in its arenas too.  Measured with -o
 * cache=16M after 4k random writes, creates and a fallocate: the arenas
 * held 29 MiB free of 72 MiB.  At most once a period, on this thread:
 * malloc_trim walks every arena. */
static void trim_pools(struct tfs *fs, uint64_t *ckpts_seen)
{
	uint64_t ckpts = atomic_load(&fs->ckpt_writes);
	bool ckpt = ckpts != *ckpts_seen;
	unsigned n = 0;

	*ckpts_seen = ckpts;
	if (fs->bounce)
		n += bounce_pool_trim(fs->bounce);
	if (fs->bounce_small)
		n += bounce_pool_trim(fs->bounce_small);
	if (ckpt || n)
		mem_trim_now();
	else
		(void)mem_freed(0);	/* a trim the quiet time put off (memtrim.h) */
}

/* A background checkpoint failed: counted, and told (logged with an event)
 * the first time and then at most once every CKPT_FAIL_EVERY_S: the log
 * keeps the changes, but it fills, and a node area that cannot take them
 * fails the unmount's checkpoint too. */
#define CKPT_FAIL_EVERY_S 60

static void ckpt_failed(struct tfs *fs, int err)
{
	uint64_t n = atomic_fetch_add(&fs->ckpt_bg_failures, 1) + 1;
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	if (n > 1 && now.tv_sec - fs->ckpt_fail_logged < CKPT_FAIL_EVERY_S)
		return;
	fs->ckpt_fail_logged = now.tv_sec;
	tfs_log(LOG_ERR, "background checkpoint failed: %s (%llu since mount); the log "
		"keeps the changes%s", strerror(-err), (unsigned long long)n,
		err == -ENOSPC ? "; the metadata node area is full: delete files" : "");
	event_emit(fs, &(struct event){ .kind = EV_CHECKPOINT_FAILED, .slot = -1 },
		   "%s, %llu since mount", strerror(-err), (unsigned long long)n);
}

static void *bg_main(void *arg)
{
	struct tfs *fs = arg;
	struct timespec due;
	uint64_t ckpts_seen = atomic_load(&fs->ckpt_writes);

	clock_gettime(CLOCK_MONOTONIC, &due);
	pthread_mutex_lock(&fs->bg_mu);
	while (!fs->bg_stop) {
		struct timespec now;
		bool ckpt, commit;

		due.tv_sec += fs->commit_ms / 1000;
		due.tv_nsec += (long)(fs->commit_ms % 1000) * 1000000;
		if (due.tv_nsec >= 1000000000) {
			due.tv_sec++;
			due.tv_nsec -= 1000000000;
		}
		while (!fs->bg_stop && !fs->bg_want_ckpt &&
		       pthread_cond_timedwait(&fs->bg_cv, &fs->bg_mu, &due) == 0)
			;
		if (fs->bg_stop)
			break;
		ckpt = fs->bg_want_ckpt;
		fs->bg_want_ckpt = false;
		pthread_mutex_unlock(&fs->bg_mu);

		clock_gettime(CLOCK_MONOTONIC, &now);
		commit = now.tv_sec > due.tv_sec ||
			 (now.tv_sec == due.tv_sec && now.tv_nsec >= due.tv_nsec);
		check_images(fs);
		event_space_check(fs);	/* frees land here, as commits make them durable */
		if (commit)	/* once a period, not at every early wake */
			trim_pools(fs, &ckpts_seen);
		if (ckpt) {
			int r = ckpt_write(fs);

			if (r < 0)
				ckpt_failed(fs, r);
		} else if (commit)
			log_commit(fs->log, UINT64_MAX);
		if (!commit) {
			/* woken early: keep the same deadline */
			due.tv_sec -= fs->commit_ms / 1000;
			due.tv_nsec -= (long)(fs->commit_ms % 1000) * 1000000;
			if (due.tv_nsec < 0) {
				due.tv_sec--;
				due.tv_nsec += 1000000000;
			}
		} else {
			clock_gettime(CLOCK_MONOTONIC, &due);
		}
		pthread_mutex_lock(&fs->bg_mu);
	}
	pthread_mutex_unlock(&fs->bg_mu);
	return NULL;
}

/* The bounce pool's kept buffers as io_uring fixed buffers: a large write
 * then skips pinning and unpinning its 256 pages per mirror (W2's daemon
 * CPU went from 1.75 s to 1.41 s, medians of 5 pairs).  It pins them for
 * the mount's life (the burst buffers past them are not registered, so
 * their pages can be given back); refused (a memlock limit without CAP_IPC_LOCK, another
 * backend), every I/O goes as before.  The small pool's 4 KiB I/Os pin one
 * page each: left as they are. */
static void fs_fixed_buffers(struct tfs *fs)
{
	size_t len;
	void *base = bounce_kept_base(fs->bounce, &len);
	int ret = dev_register_buffers(fs->be, base, len);

	if (ret && ret != -EOPNOTSUPP)
		tfs_log(LOG_DEBUG, "bounce pool not registered for fixed I/O: %s",
			strerror(-ret));
}

/* The mount goes live: the pool registered, the background thread. */
int fs_bg_start(struct tfs *fs)
{
	int ret;

	if (fs->bounce && fs->be)
		fs_fixed_buffers(fs);
	fs->bg_stop = false;
	fs->bg_want_ckpt = false;
	if (fs->xc)	/* changed map leaves past the budget: checkpoint */
		extcache_set_pressure(fs->xc, kick_bg_cb, fs);
	ret = -pthread_create(&fs->bg_thread, NULL, bg_main, fs);
	if (ret == 0)
		fs->bg_running = true;
	return ret;
}

static void bg_stop(struct tfs *fs)
{
	if (fs->xc)
		extcache_set_pressure(fs->xc, NULL, NULL);
	if (!fs->bg_running)
		return;
	pthread_mutex_lock(&fs->bg_mu);
	fs->bg_stop = true;
	pthread_cond_signal(&fs->bg_cv);
	pthread_cond_broadcast(&fs->ckpt_cv);	/* no checkpoint will end */
	pthread_mutex_unlock(&fs->bg_mu);
	pthread_join(fs->bg_thread, NULL);
	fs->bg_running = false;
}

static void fs_teardown(struct tfs *fs)
{
	struct dev_backend *be = fs->be;
	struct dev *devs[DEV_MAX];
	unsigned n = fs->ndevs;

	memcpy(devs, fs->devs, sizeof(devs));
	fs_free(fs);
	dev_backend_destroy(be);
	fs_close_devs(devs, n);
}

int tfs_unmount(struct tfs *fs)
{
	int ret, r2;

	if (fs->rescue) {	/* read-only: nothing to commit, nothing written */
		tfs_abandon(fs);
		return 0;
	}
	/* Writes still completing go into the final checkpoint. */
	file_async_stop(fs);
	/* First: the final checkpoint then records where a scrub stopped. */
	scrub_shutdown(fs);
	rebuild_stop(fs);
	bg_stop(fs);
	ret = log_commit(fs->log, UINT64_MAX);
	/* No handle can outlive this checkpoint: files unlinked while open
	 * (the kernel may never have sent their release or forget) go now,
	 * so a clean file system has no orphans. */
	if (!fs->readonly) {
		uint64_t norph, obytes;

		if (fs_reclaim_orphans(fs, &norph, &obytes, NULL, 0) == 0 && norph)
			tfs_log(LOG_INFO, "unmount: reclaimed %llu files deleted while open "
				"(%llu bytes)", (unsigned long long)norph,
				(unsigned long long)obytes);
	}
	fs->sb.state = SUPER_CLEAN;
	r2 = ckpt_write(fs);
	if (ret == 0)
		ret = r2;
	alloc_release_all(fs->alloc);
	/* Discard what the final commit and checkpoint freed, but only when
	 * they are durable: otherwise fs_free hands the blocks back unissued. */
	if (ret == 0)
		discard_stop(fs);
	/* Version 2 keeps free space on disk as the references of the
	 * trees' extents (ckpt_v2.h), never the deferred frees or discards
	 * still held here: the final checkpoint wrote it all. */
	fs_teardown(fs);
	return ret;
}

void tfs_abandon(struct tfs *fs)
{
	file_async_stop(fs);
	scrub_shutdown(fs);
	rebuild_stop(fs);
	bg_stop(fs);
	fs_teardown(fs);
}

int tfs_checkpoint(struct tfs *fs)
{
	return ckpt_write(fs);
}

const char *tfs_backend_name(struct tfs *fs)
{
	return dev_backend_name(fs->be);
}

void tfs_set_acl(struct tfs *fs, bool on)
{
	fs->acl = on;
}

/*
 * Format v2: room in the node area (see fs_i.h).  A checkpoint writes every
 * node it changes to a new slot and frees the old one only once its
 * superblock is durable, so it needs free slots for what changed: the
 * noted changes, at most FS_NODE_NOTE_BYTES of them per node (a create notes
 * about 130 bytes: an inode and a name, which change at most two leaves;
 * the dirty set's hash table is memory, not notes: v2d_note_bytes), the
 * interior nodes above all those leaves (fs_node_interior) and
 * NODE_MARGIN for the roots.  Data writes, fallocate, punch,
 * truncate and reflink cut and add EXTENT items: their notes count the
 * chunks they touched and the bytes of items they may add
 * (v2d_tree_need), which new nodes hold at FS_NODE_GROW_BYTES each (a split
 * leaves a leaf half full).  These callers ask the gate before they take
 * a lock, so a write is refused before it is acknowledged, never lost
 * after; and as their change is noted only once their data is written
 * (up to FS_SMALL_BOUNCE writes in flight), each reserves what it can add
 * at worst until then (fs_node_reserve: node_resv_*), which every gate
 * counts too; so do deletes at an unlinked inode's last forget or release
 * (idelete.c), and a noted deletion counts FS_NS_DELETE slots.  The gate
 * costs a few atomic operations.  A delete or
 * rename leaves half the margin to the others: at the limit, where
 * creates get ENOSPC, deletes go on a few per checkpoint instead of one.
 * The free-space tree has its own reserve (fspace_node.c).
 */
#define NODE_MARGIN FS_NODE_MARGIN
_Static_assert(FS_NODE_GROW_BYTES == BNODE_SIZE / 2, "fs_i.h's node size");
_Static_assert(FS_NODE_TOUCH == V2D_TOUCH, "fs_i.h's copies a chunk");
_Static_assert(FS_NODE_FANOUT <= BNODE_MAX_PTRS / 4, "fs_i.h's fanout: a quarter full");
_Static_assert(FS_NS_DELETE == V2D_DEAD_SLOTS, "a noted death counts its deletion");
#define NODE_GATE_WAITS 3
/* A reserved change's notes: its inode's entry when it is the first of its
 * inode (96 bytes and 64 of ranges: 2.5 slots with the range's), and its
 * range, at most 32 bytes of a doubling array: 1 slot a chunk. */
#define NODE_RESV_INODE 2
/* A gate short only because of reservations waits for a release this
 * long at a time before it looks again (a checkpoint may have made room). */
#define NODE_RESV_WAIT_MS 100

/* node_room, also giving the nodes used, the copies noted or reserved
 * (touch) and the new nodes counted in the need (@newp); @r (not NULL):
 * the reservations count as @r alone, else as they stand. */
static bool node_room_at(struct tfs *fs, bool grow, uint64_t *free_slots, uint64_t *need,
			 uint64_t *usedp, uint64_t *touchp, uint64_t *newp,
			 const struct fs_resv *r)
{
	uint64_t slots = fs->sb.node_blocks / BNODE_BLOCKS, used = ckpt_v2_nodes_used(fs);
	uint64_t keep = fs->sb.node_reserve + used, touch = 0, tgrow = 0, notes = 0;
	uint64_t rtouch = r ? r->touch : atomic_load(&fs->node_resv_touch);
	uint64_t rother = r ? r->other : atomic_load(&fs->node_resv_other);

	*free_slots = slots > keep ? slots - keep : 0;
	*need = grow ? NODE_MARGIN : NODE_MARGIN / 2;
	*usedp = used;
	/* Extent changes: copies of the leaves of the chunks they touched,
	 * at most every node there is, plus new leaves for the items they
	 * may add, at most one a chunk (a chunk's items fill one leaf at
	 * worst): rewriting the same blocks again and again adds nothing.
	 * Reserved changes: their copies capped with the noted ones, so a
	 * big file system is not throttled by them. */
	if (fs->v2dirty) {
		notes = v2d_note_bytes(fs->v2dirty);
		v2d_tree_need(fs->v2dirty, &touch, &tgrow);
		rother += v2d_other_slots(fs->v2dirty);	/* xattr rewrites */
	}
	*touchp = touch + rtouch;
	*need += fs_node_need_of(notes, touch + rtouch, tgrow, rother, used, newp);
	return *free_slots >= *need;
}

static bool node_room(struct tfs *fs, bool grow, uint64_t *free_slots, uint64_t *need)
{
	uint64_t used, touch, newn;

	return node_room_at(fs, grow, free_slots, need, &used, &touch, &newn, NULL);
}

static void resv_add(struct tfs *fs, const struct fs_resv *r)
{
	atomic_fetch_add(&fs->node_resv_touch, r->touch);
	atomic_fetch_add(&fs->node_resv_other, r->other);
}

void fs_node_release(struct tfs *fs, struct fs_resv *r)
{
	if (!r->touch && !r->other)
		return;
	atomic_fetch_sub(&fs->node_resv_touch, r->touch);
	atomic_fetch_sub(&fs->node_resv_other, r->other);
	r->touch = r->other = 0;
	/* After the release: a waiter counted after this load sees it. */
	if (atomic_load(&fs->node_resv_waiters)) {
		pthread_mutex_lock(&fs->resv_mu);
		pthread_cond_broadcast(&fs->resv_cv);
		pthread_mutex_unlock(&fs->resv_mu);
	}
}

/* Wait for a release (or NODE_RESV_WAIT_MS) while @want still does not fit
 * with the reservations as they stand. */
static void resv_wait(struct tfs *fs, bool grow, const struct fs_resv *want)
{
	uint64_t free_slots, need, used, touch, newn;
	struct fs_resv all;
	struct timespec due;

	clock_gettime(CLOCK_MONOTONIC, &due);
	due.tv_nsec += NODE_RESV_WAIT_MS * 1000000L;
	if (due.tv_nsec >= 1000000000L) {
		due.tv_sec++;
		due.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&fs->resv_mu);
	atomic_fetch_add(&fs->node_resv_waiters, 1);
	all.touch = atomic_load(&fs->node_resv_touch) + want->touch;
	all.other = atomic_load(&fs->node_resv_other) + want->other;
	if (!node_room_at(fs, grow, &free_slots, &need, &used, &touch, &newn, &all))
		(void)pthread_cond_timedwait(&fs->resv_cv, &fs->resv_mu, &due);
	atomic_fetch_sub(&fs->node_resv_waiters, 1);
	pthread_mutex_unlock(&fs->resv_mu);
}

/* Wait for a checkpoint (false: none runs); *waits counts it unless one
 * was written and @want alone fits (nothing noted or reserved) after it. */
static bool ckpt_waited(struct tfs *fs, bool grow, const struct fs_resv *want, int *waits)
{
	uint64_t seen = atomic_load(&fs->ckpt_writes);
	uint64_t slots = fs->sb.node_blocks / BNODE_BLOCKS, used, keep, alone, newn;

	if (!fs_ckpt_wait(fs))
		return false;
	/* As node_room_at counts @want with nothing noted or reserved. */
	used = ckpt_v2_nodes_used(fs);
	keep = fs->sb.node_reserve + used;
	alone = fs_node_need_of(0, want->touch, 0, want->other, used, &newn);
	if (atomic_load(&fs->ckpt_writes) == seen ||
	    slots < keep + (grow ? NODE_MARGIN : NODE_MARGIN / 2) + alone)
		(*waits)++;
	return true;
}

/* Reserve @want (fs_node_reserve). */
static int reserve_want(struct tfs *fs, bool grow, struct fs_resv want, struct fs_resv *r)
{
	struct fs_resv back;
	uint64_t free_slots, need, used, touch, newn;
	int waits = 0, resv_waited = 0;

	for (;;) {
		/* Taken first, then looked at: two gates at once never both
		 * take the last room. */
		resv_add(fs, &want);
		if (node_room(fs, grow, &free_slots, &need)) {
			*r = want;
			return 0;
		}
		back = want;	/* released: zeroed */
		fs_node_release(fs, &back);
		/* Short only because of changes in flight: they give their
		 * reservations back as they are noted, with no lock of ours
		 * held, so waiting for them always ends; never ENOSPC. */
		if ((atomic_load(&fs->node_resv_touch) || atomic_load(&fs->node_resv_other)) &&
		    node_room_at(fs, grow, &free_slots, &need, &used, &touch, &newn, &want)) {
			if (!resv_waited++)
				atomic_fetch_add(&fs->node_resv_waits, 1);
			resv_wait(fs, grow, &want);
			continue;
		}
		/* The noted changes and this one do not fit: a checkpoint
		 * turns the noted changes into nodes and frees the slots the
		 * last one replaced.  A wait counts unless a checkpoint was
		 * written and this change alone fits now: then others in
		 * flight took the room first, and it gets in at a later
		 * checkpoint (ENOSPC only for a change the area cannot hold). */
		if (waits == NODE_GATE_WAITS || !ckpt_waited(fs, grow, &want, &waits)) {
			atomic_fetch_add(&fs->node_gate_enospc, grow);
			if (grow)
				return -ENOSPC;
			resv_add(fs, &want);	/* it frees: goes on, counted */
			*r = want;
			return 0;
		}
		atomic_fetch_add(&fs->node_gate_waits, 1);
	}
}

int fs_node_reserve(struct tfs *fs, bool grow, uint64_t chunks, uint64_t adds,
		    struct fs_resv *r)
{
	struct fs_resv want = { 0 };

	r->touch = r->other = 0;
	if (fs->sb.version != SUPER_VERSION_V2 || !fs->v2)
		return 0;
	if (chunks) {
		/* V2D_TOUCH copies a chunk, one new node and one slot of
		 * notes a chunk it adds to, and the inode's entry (see
		 * node_room_at). */
		want.touch = chunks * V2D_TOUCH;
		want.other = 2 * adds + NODE_RESV_INODE;
	}
	return reserve_want(fs, grow, want, r);
}

int fs_node_reserve_slots(struct tfs *fs, bool grow, uint64_t slots, struct fs_resv *r)
{
	r->touch = r->other = 0;
	if (fs->sb.version != SUPER_VERSION_V2 || !fs->v2)
		return 0;
	return reserve_want(fs, grow, (struct fs_resv){ .other = slots }, r);
}

void fs_node_gate_stats(struct tfs *fs, uint64_t *free_slots, uint64_t *need)
{
	*free_slots = *need = 0;
	if (fs->sb.version == SUPER_VERSION_V2 && fs->v2)
		(void)node_room(fs, true, free_slots, need);
}

/*
 * Data writes the node area still has room for, at the worst node_room
 * counts them: each V2D_CHUNK they change may copy V2D_TOUCH nodes and add
 * one (its new items), copies counted up to every node there is, and its
 * note takes a 16-byte range in an array that doubles as it grows: up to
 * 32 bytes of notes, FS_NODE_NOTE_BYTES / 2 of a slot (one here).  So with f
 * slots free past the need and NODE_ROOM_SLACK (the notes a write makes
 * besides its range: its inode's, a checkpoint's path to the roots), and
 * u nodes not yet counted as copied, c chunks fit where
 * min(V2D_TOUCH * c, u) + 2 * c <= f, f first less their interior copies
 * (leaves_fitting).  A few atomic loads.
 */
#define NODE_ROOM_SLACK 8

/* Of @f slots, what leaves may take so that they and their interior
 * copies (fs_node_interior: one a level each, at most the interior nodes
 * there are) fit: f less every interior node, or f over one plus the
 * levels, whichever is more. */
static uint64_t leaves_fitting(uint64_t f, uint64_t used)
{
	uint64_t levels = 0, inner = 0;

	for (uint64_t n = used / FS_NODE_FANOUT; n; n /= FS_NODE_FANOUT) {
		levels++;
		inner += n;
	}
	return f > inner && f - inner > f / (1 + levels) ? f - inner : f / (1 + levels);
}

static uint64_t room_bytes(uint64_t free_slots, uint64_t need, uint64_t used, uint64_t touch)
{
	uint64_t f, u, c;

	if (free_slots <= need + NODE_ROOM_SLACK)
		return 0;
	f = leaves_fitting(free_slots - need - NODE_ROOM_SLACK, used);
	u = used > touch ? used - touch : 0;
	c = f / (V2D_TOUCH + 2);
	if (V2D_TOUCH * c > u)
		c = (f - u) / 2;	/* copies capped: the new nodes and notes count */
	return c * V2D_CHUNK * TFS_BLOCK_SIZE;
}

uint64_t tfs_node_room_bytes(struct tfs *fs, bool settled)
{
	uint64_t free_slots, need, used, touch, newn;

	if (fs->sb.version != SUPER_VERSION_V2 || !fs->v2)
		return UINT64_MAX;
	(void)node_room_at(fs, true, &free_slots, &need, &used, &touch, &newn, NULL);
	/* Settled: what the noted changes hold until a checkpoint (their
	 * copies, their notes) back, what they add (new nodes) still held. */
	if (settled)
		return room_bytes(free_slots, NODE_MARGIN + newn, used, 0);
	return room_bytes(free_slots, need, used, touch);
}

int tfs_node_reclaim(struct tfs *fs)
{
	uint64_t free_slots, need, used, touch, newn;
	const struct fs_resv none = { 0 };

	if (fs->sb.version != SUPER_VERSION_V2 || !fs->v2)
		return 0;
	/* The noted changes alone: a checkpoint does not take reservations. */
	(void)node_room_at(fs, true, &free_slots, &need, &used, &touch, &newn, &none);
	if (need <= NODE_MARGIN)
		return 0;	/* nothing noted: a checkpoint gives nothing back */
	if (!fs_ckpt_wait(fs))
		return 0;
	atomic_fetch_add(&fs->node_gate_waits, 1);
	return 1;
}

/* Inodes that still fit: the free slots past the margin at the inodes per
 * slot the trees hold now, at least NODE_FILES_PER_SLOT: an empty file
 * costs about 260 bytes of the node area (measured: 12,910 empty files
 * filled the 208 slots past reserve and margin of a 128M file system), and
 * a tree of few inodes (a fresh one, or one big fragmented file) must not
 * make df -i show the node area nearly full. */
#define NODE_FILES_PER_SLOT 32

static uint64_t node_ffree(struct tfs *fs, uint64_t ffree)
{
	uint64_t free_slots, need, used, per;

	if (fs->sb.version != SUPER_VERSION_V2 || !fs->v2)
		return ffree;
	(void)node_room(fs, true, &free_slots, &need);
	if (free_slots <= NODE_MARGIN)
		return 0;
	used = ckpt_v2_nodes_used(fs);
	per = used ? fs_ninodes(fs) / used : 0;
	if (per < NODE_FILES_PER_SLOT)
		per = NODE_FILES_PER_SLOT;
	free_slots = (free_slots - NODE_MARGIN) * per;
	return free_slots < ffree ? free_slots : ffree;
}

/* Whether the node area is full for writes even after a checkpoint (the
 * changes noted so far then hold no slots): a buffered write(2) would get
 * ENOSPC in the daemon's low-space mode (TFS_NODE_WRITE_ROOM).  statfs then
 * shows no blocks and no inodes available, so df agrees with the ENOSPC
 * writes get while data blocks are free. */
static bool node_full(struct tfs *fs)
{
	return tfs_node_room_bytes(fs, true) < TFS_NODE_WRITE_ROOM;
}

int tfs_statfs(struct tfs *fs, struct statvfs *st)
{
	uint64_t total = alloc_total_blocks(fs->alloc);
	uint64_t free_ = alloc_free_blocks(fs->alloc);
	uint64_t reserve = alloc_reserve_blocks(fs->alloc);
	uint64_t f0, f1;
	bool full = node_full(fs);

	memset(st, 0, sizeof(*st));
	st->f_bsize = TFS_BLOCK_SIZE;
	st->f_frsize = TFS_BLOCK_SIZE;
	st->f_blocks = total;
	st->f_bfree = free_;
	st->f_bavail = free_ > reserve && !full ? free_ - reserve : 0;
	st->f_ffree = full ? 0 : node_ffree(fs, free_);
	st->f_files = fs_ninodes(fs) + st->f_ffree;
	st->f_favail = st->f_ffree;
	st->f_namemax = TFS_NAME_MAX;
	memcpy(&f0, fs->sb.fs_uuid, 8);
	memcpy(&f1, fs->sb.fs_uuid + 8, 8);
	st->f_fsid = (unsigned long)(f0 ^ f1);
	return 0;
}

uint64_t tfs_avail_bytes(struct tfs *fs)
{
	uint64_t free_ = alloc_free_blocks(fs->alloc);
	uint64_t reserve = alloc_reserve_blocks(fs->alloc);

	return free_ > reserve ? (free_ - reserve) * TFS_BLOCK_SIZE : 0;
}

int tfs_reclaim_deferred(struct tfs *fs)
{
	int ret;

	if (!alloc_deferred_blocks(fs->alloc))
		return 0;
	/* The durable callback (cb_durable) releases them. */
	ret = log_commit(fs->log, UINT64_MAX);
	return ret < 0 ? ret : 1;
}

bool tfs_unusable(struct tfs *fs)
{
	return atomic_load(&fs->unusable);
}

/* Every data write completed before its record was appended, and a commit
 * flushes the devices before writing the log chunk: committing the log is
 * all fsync and syncfs need. */
int tfs_syncfs(struct tfs *fs)
{
	return log_commit(fs->log, UINT64_MAX);
}
