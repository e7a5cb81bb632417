/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fs_i.h: private structures of the file system layer (fs.c, format.c,
 * inode.c, dir.c, namei.c, xattr.c, apply.c, ckpt.c, sbcommit.c, file.c).  Not for daemon/.
 *
 * Every metadata change is a transaction of state records (log.h): the
 * operation builds the records under its locks, meta_tx_commit() applies
 * them to memory with the very code replay uses (apply.c) and then appends
 * them to the log.  So what is in memory and what the log says can never
 * drift apart, and a record is applied before it gets its sequence number
 * (which a checkpoint relies on: everything <= its seq is in memory).
 *
 * Lock order: fs->ckpt_mu -> fs->ns_lock -> inode rangelock -> inode->lock
 * (parent before child; two unrelated inodes in increasing ino order) ->
 * fs->itable_lock -> log -> alloc.  A checkpoint takes ckpt_mu, then
 * ns_lock and every inode's locks in turn, so no one holding any of those
 * may wait for a checkpoint (log_wait_space comes before taking locks).
 * fs->sbc.mu (sbcommit.h) is a leaf below all of these (only device I/O
 * under it), so a writer holding its range lock may take it to record a
 * failed device.
 */
#ifndef TWINFS_FS_I_H
#define TWINFS_FS_I_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "alloc.h"
#include "bounce.h"
#include "csum.h"
#include "dev.h"
#include "extent.h"
#include "ktime.h"
#include "log.h"
#include "mirror.h"
#include "rangelock.h"
#include "sbcommit.h"
#include "super.h"
#include "tfs.h"

struct dir;		/* dir.h */

/* Bounce buffer size: an unaligned TFS_IO_MAX write touches up to
 * TFS_IO_MAX/4096 + 1 blocks, all staged in one buffer (file.c). */
#define FS_BOUNCE_SIZE (TFS_IO_MAX + TFS_BLOCK_SIZE)
/* Small I/Os: up to 56 KiB, which touch at most 16 blocks (unaligned edges
 * included), so a 64 KiB buffer holds them. */
#define FS_SMALL_IO (56u << 10)
#define FS_SMALL_BUF (64u << 10)

struct xattr {
	struct xattr *next;
	char *name;
	void *val;
	uint32_t vallen;
};

struct tfs_inode {
	uint64_t ino;
	struct tfs_inode *hnext;	/* itable chain, protected by fs->itable_lock */

	pthread_mutex_t lock;		/* protects everything below except where noted */
	uint32_t mode, uid, gid, nlink, flags;
	uint64_t rdev, gen;
	uint64_t parent;		/* directories: for ".." */
	_Atomic uint64_t size;		/* written under lock; read lock-free by the data path */
	struct timespec atime, mtime, ctime, btime;
	char *symlink;			/* symlink target, NUL-terminated */
	struct xattr *xattrs;
	struct dir *dir;		/* directories */
	uint64_t last_seq;		/* newest log seq touching this inode */

	struct extent_map map;		/* regular files; entries under the rangelock */
	struct rangelock rl;		/* regular files */

	_Atomic uint64_t nlookup;	/* kernel references */
	_Atomic uint32_t nopen;		/* open handles */
};

struct tfs_file {
	struct tfs *fs;
	struct tfs_inode *ip;
	int flags;			/* open(2) flags */
};

struct tfs {
	struct mirror mirror;
	struct dev_backend *be;
	struct dev *devs[DEV_MAX];	/* NULL when missing */
	unsigned ndevs;
	struct bounce_pool *bounce;	/* buffers of FS_BOUNCE_SIZE bytes */
	/* Buffers for I/Os of at most FS_SMALL_IO bytes (fs_buf_get): many
	 * small requests in flight without a megabyte each.  May be NULL. */
	struct bounce_pool *bounce_small;
	struct alloc *alloc;
	struct log *log;
	struct super sb;		/* in-memory copy; protected by ckpt_mu */
	/* The superblock commit's state (sbcommit.c): writes of fs->sb and
	 * of the emergency superblock, the last durable one, the services'
	 * fill callbacks. */
	struct sbc sbc;
	struct scrub *scrub;		/* scrub.c: set up by mount, freed by fs_free */
	struct discard *discard;	/* discard.c: set up by mount, freed by fs_free */

	pthread_rwlock_t itable_lock;	/* protects itable buckets */
	struct tfs_inode **itable;
	size_t itable_size;		/* power of two */
	_Atomic uint64_t ninodes;
	_Atomic uint64_t next_ino;

	pthread_mutex_t ns_lock;	/* serializes namespace changes */

	pthread_mutex_t ckpt_mu;	/* one checkpoint at a time; protects sb */
	pthread_t bg_thread;		/* periodic commit + checkpoint on pressure */
	pthread_mutex_t bg_mu;
	pthread_cond_t bg_cv;
	bool bg_stop, bg_want_ckpt, bg_running;
	unsigned commit_ms;

	/* file_async.c: asynchronous O_DSYNC writes wait here for their group
	 * commit.  One syncer thread, started on first use; ws_head is its
	 * queue, ws_busy the rounds it still has to run (tfs_drain waits for
	 * 0).  All under ws_mu, a leaf lock. */
	pthread_mutex_t ws_mu;
	pthread_cond_t ws_cv;
	struct sjob *ws_head;
	unsigned long ws_busy;
	bool ws_stop, ws_running;
	pthread_t ws_thread;
	/* Finished asynchronous write and read jobs kept for reuse
	 * (file_async.c): they carry placement tables of 8 to 20 KiB, past
	 * malloc's fast path, and W1 makes 30,000 a second.  Each under its
	 * own mutex, a leaf lock; freed by fs_free. */
	struct jcache {
		pthread_mutex_t mu;
		void *head;
		unsigned n;
	} wjc, rjc;

	bool replaying;			/* apply without live side effects */
	bool readonly;
	/* Set once when no device can take writes (makes readonly true too):
	 * status reports the file system UNUSABLE. */
	_Atomic bool unusable;
	void (*on_unusable)(void *ctx);	/* tfs_opts' */
	void *cb_ctx;
	struct rebuild *rb;		/* rebuild.c: rebuild/replace state */
	struct event_q *ev;		/* event.c: NULL until event_open */
	/* Offline load (tfs_opts.offline): where the replayed log ends. */
	uint64_t replay_end_pos, replay_next_seq;
	/* Metadata damaged beyond what the mirrors repair (superblock, log or
	 * checkpoint lost on every device): what, one line; "" if none.  Mount
	 * refuses it unless rescue (read-only, nothing written); fsck reports. */
	char damage[320];
	bool rescue;			/* tfs_opts.rescue mount: never write */
};

/* file_async.c: drain asynchronous writes and stop the syncer (unmount). */
void file_async_stop(struct tfs *fs);
/* file_async.c: free the kept jobs and their mutexes (fs_free). */
void file_async_free(struct tfs *fs);

/* ---- struct tfs setup and teardown (fs.c, shared by mount and format.c) ---- */
int fs_new(struct tfs **out);		/* empty fs: locks, inode table */
/* Frees the in-memory fs (inodes, log, allocator, pool, scrub, rebuild);
 * devices and the backend are closed by the caller's ladder. */
void fs_free(struct tfs *fs);
/* After the backend is destroyed: unlock and close every device, NULL them. */
void fs_close_devs(struct dev **d, unsigned n);
/* The allocator of fs->sb's data area, with the blocks kept back for
 * checkpoints.  0 or -errno. */
int fs_alloc_create(struct tfs *fs);
void fs_log_geom(const struct tfs *fs, struct log_geom *g);	/* from fs->sb */
uint64_t fs_next_log_id(const struct tfs *fs, uint64_t log_id);
int fs_log_open(struct tfs *fs, uint64_t pos, uint64_t seq);	/* from fs->sb */
/* The named I/O backend (NULL: "auto"), wrapped in the fault backend if
 * @fault is a specification; the error line goes to err. */
int fs_backend_create(const char *name, const char *fault, struct dev_backend **out,
		      char *err, size_t errlen);
/* Two paths naming one device: true, *a the later one, *b the earlier. */
bool fs_same_paths(const char *const *devs, unsigned n, unsigned *a, unsigned *b);
/* Attach every opened device d[i] (NULL: skipped) to be; the error line
 * names paths[i]. */
int fs_attach_devs(struct dev_backend *be, struct dev **d, const char *const *paths,
		   unsigned n, char *err, size_t errlen);
int fs_fill_random(void *buf, size_t len);	/* getrandom, all of it */
int fs_random_u64_nonzero(uint64_t *v);

/* ---- mounted fs life (fs.c, for mount.c) ---- */
/* mirror.on_state: a device changed state (read-only when none is left). */
void fs_on_mirror_state(void *ctx, unsigned dev, int state, int err);
/* Delete the inodes without a name (files unlinked while open), unlogged;
 * *count and *bytes say what went.  0 or -errno, the line in err. */
int fs_reclaim_orphans(struct tfs *fs, uint64_t *count, uint64_t *bytes, char *err,
		       size_t errlen);
int fs_bg_start(struct tfs *fs);	/* the commit/checkpoint thread; 0 or -errno */

/* ---- offline load (mount.c, for fsck) ---- */
/* Turn an offline-loaded fs (devices opened read-write) into a mounted one
 * without a background thread: rebuild the allocator from the metadata as
 * it is now (extents outside the data area: -EUCLEAN), open the log under
 * a new log_id at the replay end.  Then tfs_checkpoint/tfs_unmount write
 * the in-memory state as the new checkpoint. */
int fs_offline_commit(struct tfs *fs, char *err, size_t errlen);

/* ---- inode table (inode.c) ---- */
struct tfs_inode *fs_iget(struct tfs *fs, uint64_t ino);	/* NULL if absent */
/* Create an empty in-memory inode and insert it (apply of LR_INODE). */
struct tfs_inode *fs_inew(struct tfs *fs, uint64_t ino);
/* Remove from the table and free memory (blocks dropped via drop cb). */
void fs_ifree(struct tfs *fs, struct tfs_inode *ip, extent_drop_fn drop, void *ctx);
void fs_istat(struct tfs_inode *ip, struct stat *st);	/* caller holds ip->lock */
void fs_iencode(struct tfs_inode *ip, struct log_rec *r); /* LR_INODE of current state */
/* Delete an inode whose nlink is 0 once it has no lookups and no opens.
 * The caller must know ip is still alive: a count dropped outside ns_lock
 * can race with another dropper that deletes first, so drop nopen with
 * fs_iput_open() instead of nopen-- followed by this. */
void fs_imaybe_delete(struct tfs *fs, struct tfs_inode *ip);
/* Drop one open reference (file release) under ns_lock and delete the
 * inode if that was the last reference to an unlinked inode. */
void fs_iput_open(struct tfs *fs, struct tfs_inode *ip);
/* The same with fs->ns_lock already held (and no inode lock). */
void fs_imaybe_delete_locked(struct tfs *fs, struct tfs_inode *ip);
uint64_t fs_ialloc(struct tfs *fs);	/* next free inode number */
/* Every inode in the table, in table order, into a malloc'ed array the
 * caller frees (NULL when empty).  Takes itable_lock shared.  The pointers
 * stay valid only while the caller keeps inodes from being deleted (holds
 * ns_lock, or the fs is not mounted yet); fs_isnapshot_inos, the numbers
 * only, needs no such guarantee.  0 or -ENOMEM. */
int fs_isnapshot(struct tfs *fs, struct tfs_inode ***out, size_t *nout);
int fs_isnapshot_inos(struct tfs *fs, uint64_t **out, size_t *nout);
/* Mount/unmount (fs.c): init sets up itable_lock and the buckets (fs_inew
 * also allocates the buckets lazily); destroy frees every inode without
 * dropping blocks and destroys itable_lock. */
int fs_itable_init(struct tfs *fs);
void fs_itable_destroy(struct tfs *fs);

/* ---- transactions (apply.c) ---- */
struct meta_tx {
	struct log_buf buf;
	/* runs of physical blocks the records dropped: freed when durable */
	struct { uint64_t phys, n; } *drops;
	size_t ndrops, capdrops;
};
void meta_tx_init(struct meta_tx *tx);
void meta_tx_free(struct meta_tx *tx);
int meta_tx_add(struct meta_tx *tx, const struct log_rec *r);
/* Apply every record to memory (collecting dropped blocks), append to the
 * log, defer the drops to the returned seq.  Caller holds the locks of the
 * objects the records touch. */
int meta_tx_commit(struct tfs *fs, struct meta_tx *tx, uint64_t *seq);
/* Apply one record (replay and live). */
int meta_apply(struct tfs *fs, const struct log_rec *r, struct meta_tx *drops);

/* ---- checkpoint (ckpt.c) ---- */
int ckpt_write(struct tfs *fs);			/* serialize + flip superblock */
int ckpt_load(struct tfs *fs);			/* from fs->sb */
/* Layout of a checkpoint of @bytes: payload blocks, then a table of one
 * u64 checksum per payload block (fsck and scrub verify copies with it). */
void ckpt_geom(uint64_t bytes, uint64_t *payload, uint64_t *table);
uint64_t ckpt_table_seed(const uint8_t fs_uuid[16]);	/* of the table's checksum */

/* ---- namespace helpers (namei.c) ---- */
/* Create a new inode of @mode (any type) named @name in @parent, with an
 * optional symlink target; on success *ipp is the new inode with nlookup
 * already incremented.  Takes ns_lock itself. -EEXIST if the name exists. */
int namei_create(struct tfs *fs, uint64_t parent, const char *name, mode_t mode,
		 dev_t rdev, const char *target, const struct tfs_cred *c,
		 struct tfs_inode **ipp);

/* ---- files (file.c) ---- */
/* Truncate/extend to size; caller holds nothing; takes the inode exclusively. */
int file_truncate(struct tfs *fs, struct tfs_inode *ip, uint64_t size);

/* A bounce buffer for an I/O of @len bytes (blocks until one is free):
 * from the small pool when it fits.  Give it back with fs_buf_put. */
static inline void *fs_buf_get(struct tfs *fs, size_t len)
{
	if (fs->bounce_small && len <= FS_SMALL_IO)
		return bounce_get(fs->bounce_small);
	return bounce_get(fs->bounce);
}

static inline void fs_buf_put(struct tfs *fs, void *buf)
{
	if (buf && fs->bounce_small && bounce_owns(fs->bounce_small, buf))
		bounce_put(fs->bounce_small, buf);
	else
		bounce_put(fs->bounce, buf);
}

/* The time for the timestamps twinfs sets: the kernel's (ktime.h). */
static inline struct timespec fs_now(void)
{
	return ktime_now();
}

/* Timestamps in log records are nanoseconds since the epoch. */
static inline int64_t fs_ts_ns(struct timespec ts)
{
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline struct timespec fs_ns_ts(int64_t ns)
{
	struct timespec ts;
	ts.tv_sec = ns / 1000000000;
	ts.tv_nsec = ns % 1000000000;
	if (ts.tv_nsec < 0) {	/* before 1970: keep tv_nsec in [0, 1e9) */
		ts.tv_sec--;
		ts.tv_nsec += 1000000000;
	}
	return ts;
}

#endif
