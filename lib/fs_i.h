/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fs_i.h: struct tfs, the mounted file system, and its setup helpers
 * (fs.c), for lib/ only: not for daemon/, mkfs/, tools/ or bench/, which
 * use tfs.h.  Subsystems declare their own functions and own their state
 * behind their own headers: inode.h (handles; the table and the inode
 * layout are private to inode.c, inode_i.h), apply.h (transactions),
 * ckpt.h, sbcommit.h, scrub.h, rebuild.h, discard.h, event.h; this header
 * includes the first three for the files that have always found them here.
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
 * the inode table's lock (inode.c) -> log -> alloc.  A checkpoint takes ckpt_mu, then
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
#include "apply.h"
#include "bounce.h"
#include "ckpt.h"
#include "csum.h"
#include "dev.h"
#include "extent.h"
#include "inode.h"
#include "ktime.h"
#include "log.h"
#include "mirror.h"
#include "rangelock.h"
#include "sbcommit.h"
#include "super.h"
#include "tfs.h"

struct dir;		/* dir.h */
struct bcache;		/* bcache.h */
struct fspace;		/* fspace.h */
struct alloc_v2;	/* alloc_v2.h */
struct fs_resv;		/* below */

/* Bounce buffer size: an unaligned TFS_IO_MAX write touches up to
 * TFS_IO_MAX/4096 + 1 blocks, all staged in one buffer (file.c). */
#define FS_BOUNCE_SIZE (TFS_IO_MAX + TFS_BLOCK_SIZE)
/* Small I/Os: up to 56 KiB, which touch at most 16 blocks (unaligned edges
 * included), so a 64 KiB buffer holds them. */
#define FS_SMALL_IO (56u << 10)
#define FS_SMALL_BUF (64u << 10)

struct tfs_file {
	struct tfs *fs;
	struct tfs_inode *ip;
	int flags;			/* open(2) flags */
	/* The fsync pattern of this open (file_write.c, file_fua_hint):
	 * writes since its last fsync, and whether that fsync came after
	 * at most FUA_HINT_WRITES of them. */
	_Atomic uint32_t wr_since_sync;
	_Atomic bool sync_after_few;
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
	/* Format v2 (ckpt_v2.c): the trees, node cache and free space; NULL
	 * on version 1.  v2dirty: what changed since the last checkpoint,
	 * noted by meta_apply once the trees are loaded (NULL before). */
	struct ckpt_v2 *v2;
	struct v2dirty *v2dirty;
	/* The checkpoint's accounting allocator (ckpt_v2.c `ca`), for its
	 * stats; set with v2dirty, NULL on version 1. */
	struct alloc *v2acct;
	/* Its free space (node map), for discard.c; set with v2acct. */
	struct fspace *v2fsp;
	/* Its reference changes' journal, for the dirty budget; set with v2acct. */
	struct alloc_v2 *v2av;
	/* -o cache= (0: TFS_CACHE_DEFAULT): the node cache and the resident
	 * inodes of a v2 mount together; v2_lazy: inodes fault in (a mount),
	 * not all loaded (fsck's offline load). */
	uint64_t cache_bytes;
	bool compact_dirty;		/* -o compact_dirty (tfs.h) */
	bool lazyreplay;		/* -o lazyreplay (tfs.h): extpend.h */
	/* POSIX ACLs kept with the mode (acl.h; tfs_opts' acl, tfs_set_acl):
	 * set before the first request, read-only after. */
	bool acl;
	uint64_t ckpt_log_bytes;	/* -o ckpt_log= (tfs.h) */
	bool v2_lazy;
	/* Format v2: the budget and list of the files' map leaves
	 * (extcache.h), set up with the trees, freed after the inodes. */
	struct extent_cache *xc;

	struct itable *itab;		/* inode.c: the inode table (inode_i.h) */
#define TFS_CACHE_DEFAULT (256ull << 20)
#define TFS_CACHE_MIN (4ull << 20)
/* Of -o cache=, 1/TFS_CACHE_INODE_SHARE goes to resident inodes, each
 * counted as TFS_CACHE_INODE_COST bytes, as much to the files' map leaves
 * (extcache.h); the rest is the node cache. */
#define TFS_CACHE_INODE_SHARE 4
#define TFS_CACHE_INODE_COST 1024
	_Atomic uint64_t next_ino;

	pthread_mutex_t ns_lock;	/* serializes namespace changes */

	pthread_mutex_t ckpt_mu;	/* one checkpoint at a time; protects sb */
	/* Checkpoints written since mount and their blocks (table and
	 * records, one copy): what checkpoints cost, for stats (ckpt.c). */
	_Atomic uint64_t ckpt_writes, ckpt_written_blocks;
	/* Format v2 checkpoints that rebuilt their set from the log after a
	 * note was lost for want of memory (ckpt_v2.c). */
	_Atomic uint64_t v2_rebuilds;
	/* Since mount, for stats: setattrs the daemon held until the file's
	 * writes behind were published (tfs_note_setattr_wait), and writes
	 * published without their mtime, a later setattr's kept (file.c). */
	_Atomic uint64_t setattr_waits, mtime_kept, releases_deferred;
	pthread_t bg_thread;		/* periodic commit + checkpoint on pressure */
	pthread_mutex_t bg_mu;
	pthread_cond_t bg_cv;
	/* Format v2's dirty budget (dbudget.c): memory that grows with what
	 * changed since the last checkpoint.  Past dirty_soft a checkpoint
	 * is asked for (once until one ends), past dirty_hard writers wait
	 * for one to end (ckpt_cv under bg_mu).  0: no budget.  ckpt_ends
	 * changes under bg_mu (for the cv) but is atomic: the gate reads it
	 * without the lock. */
	uint64_t dirty_soft, dirty_hard;
	/* The dirty bytes come out of the node cache's budget (dbudget.c):
	 * from node_base down to node_floor; node_budget is the last set,
	 * node_budget_min the least since mount (stats). */
	struct bcache *dirty_nodes;
	uint64_t node_base, node_floor;
	_Atomic uint64_t node_budget, node_budget_min;
	atomic_bool dirty_asked;
	_Atomic uint64_t ckpt_ends;
	pthread_cond_t ckpt_cv;
	/* Since mount, for stats: checkpoints the budget asked for, writers
	 * that waited, waits that gave up (DIRTY_WAIT_MAX), the most seen. */
	_Atomic uint64_t dirty_ckpts, dirty_waits, dirty_wait_timeouts, dirty_max;
	_Atomic uint64_t dirty_lost_ckpts;	/* asked for because notes were lost */
	/* A checkpoint is running (ckpt_v2_write): writers past the hard
	 * mark keep waiting while it does (dbudget.c). */
	atomic_bool ckpt_busy;
	/* Part commits of the INODES tree inside checkpoints (ckpt_v2.c). */
	_Atomic uint64_t ckpt_parts;
	/* Blocks of changed ranges a checkpoint compared with their EXTENT
	 * items: mapped ones left as they were, ones rewritten (ckpt_v2ext.c). */
	_Atomic uint64_t ckpt_ext_kept, ckpt_ext_rewritten;
	/* fs_node_gate: waits for a checkpoint, creates refused (ENOSPC). */
	_Atomic uint64_t node_gate_waits, node_gate_enospc;
	/* Node slots reserved by changes the gate admitted and that are not
	 * noted yet (fs_data_reserve): copies (capped with the noted ones by
	 * the nodes there are) and the rest (new nodes, notes).  Waiters for
	 * a release (the gate short only because of them) on resv_cv. */
	_Atomic uint64_t node_resv_touch, node_resv_other;
	_Atomic uint64_t node_resv_waiters, node_resv_waits;
	pthread_mutex_t resv_mu;
	pthread_cond_t resv_cv;
	/* Checkpoints: node slots the gate's arithmetic gave their set and
	 * what they wrote (the last one), how often it wrote more (ckpt_v2.c);
	 * background checkpoints that failed (fs.c bg_main). */
	_Atomic uint64_t ckpt_slots_estimated, ckpt_slots_used, ckpt_slots_over;
	_Atomic uint64_t ckpt_bg_failures;
	int64_t ckpt_fail_logged;	/* monotonic seconds of the last line */
	/* fs_node_reserve, fs_node_reserve_slots and fs_node_release,
	 * registered by fs_new, for the modules below fs.c (file.c,
	 * file_write.c, reflink.c: fs_data_reserve, fs_data_release;
	 * idelete.c). */
	int (*node_reserve)(struct tfs *fs, bool grow, uint64_t chunks, uint64_t adds,
			    struct fs_resv *r);
	int (*node_reserve_slots)(struct tfs *fs, bool grow, uint64_t slots, struct fs_resv *r);
	void (*node_release)(struct tfs *fs, struct fs_resv *r);
	bool bg_stop, bg_want_ckpt, bg_running;
	unsigned commit_ms;

	/* The data path's threads (syncer, worker) and kept jobs: file_i.h,
	 * set up by file_async_init, freed by fs_free. */
	struct file_async *fa;
	/* Reads between tfs_read_async and their reply, now and the most
	 * seen since mount (stats "reads"): 8 readers of one file showing 1
	 * would mean something serializes them (file_async.c). */
	_Atomic uint32_t reads_in_flight, reads_in_flight_max;

	bool replaying;			/* apply without live side effects */
	/* Format v2 mount: fs->alloc was loaded from the trees, and replay
	 * (meta_apply while replaying) keeps it in step with the extents it
	 * sets and drops (apply.c). */
	bool replay_alloc;
	/* Extent runs the mount walked to rebuild the allocator (status
	 * "mount"): 0 when it came from the trees. */
	uint64_t mount_extent_runs;
	bool mount_alloc_trees;		/* the allocator came from the trees */
	uint64_t mount_alloc_ns;	/* ... in this many ns */
	/* Inodes the mount visited by walking every inode number (status
	 * "mount"): 0 on format v2, whose mount reads the superblock's count
	 * and the ORPHAN items instead (TWINFS_ALLOC_CHECK=1 still walks). */
	uint64_t mount_inodes_walked;
	/* What each phase of the mount cost (status "mount"): loading the
	 * checkpoint, the log replayed (records, log blocks, time) and the
	 * mount's first checkpoint; all in ns. */
	uint64_t mount_ckpt_ns, mount_replay_ns, mount_ckpt_write_ns;
	uint64_t mount_replay_records, mount_replay_blocks;
	uint64_t mount_replay_prefetched;	/* keys read ahead (v2replaypf.h) */
	/* -o lazyreplay: extent record pieces the replay left pending
	 * (extpend.h), and those the mount's checkpoint found still pending
	 * after its changes (applied then, and the checkpoint redone). */
	uint64_t mount_replay_pending, mount_pend_late;
	/* -o lazyreplay: the mount served without a checkpoint, the log going
	 * on under a new log_id (logcont.c); orphans the
	 * mount reclaimed (a reason not to). */
	bool mount_continued;
	uint64_t mount_orphans;
	bool readonly;
	/* Set once when memory holds a change the log does not (a metadata
	 * transaction that failed half applied, or applied and not
	 * appended; makes readonly true too): no checkpoint writes memory
	 * from then on (ckpt_write: -EROFS), so the file system stays what
	 * the log and the last checkpoint say, as after a crash. */
	_Atomic bool unlogged;
	_Atomic bool unlogged_said;	/* ckpt_write logged it once */
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

/* file_async.c: the data path's state (fs_new); 0 or -ENOMEM. */
int file_async_init(struct tfs *fs);
/* file_async.c: drain asynchronous I/O and stop the data path's threads
 * (unmount). */
void file_async_stop(struct tfs *fs);
/* file_async.c: free the kept jobs and the state (fs_free). */
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
/* A new allocator over the same area as fs_alloc_create's, into *out. */
int fs_alloc_make(const struct tfs *fs, struct alloc **out);
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
/* The one line a walk over every inode gives when it fails with @ret
 * (-EIO on version 2: a tree node with no good copy). */
void fs_seterr_inodes(struct tfs *fs, int ret, char *err, size_t errlen);
int fs_reclaim_orphans(struct tfs *fs, uint64_t *count, uint64_t *bytes, char *err,
		       size_t errlen);
int fs_bg_start(struct tfs *fs);	/* the commit/checkpoint thread; 0 or -errno */

/* The dirty budget (dbudget.c), format v2: set from -o cache= by the
 * load; the gate is the log's on_room; every v2 checkpoint ends with
 * fs_dirty_ckpt_end, written or failed. */
struct dirty_parts {
	uint64_t leaves;		/* map leaves past their budget */
	uint64_t inodes;		/* resident inodes past theirs */
	uint64_t notes;			/* v2dirty's records */
	uint64_t nodes;			/* tree nodes a checkpoint pins (ckpt_v2.c) */
};
void fs_dirty_setup(struct tfs *fs, uint64_t cache, struct bcache *nodes, uint64_t node_base);
uint64_t fs_dirty_bytes(struct tfs *fs, struct dirty_parts *p);
int fs_dirty_gate(void *ctx);
/* The node cache's budget again from the dirty bytes now (a checkpoint
 * that pins more nodes as it goes). */
void fs_dirty_refit(struct tfs *fs);
void fs_dirty_ckpt_end(struct tfs *fs);
/* A walk's read-in (inode_get_walk) failed with ENOMEM: deaths were lost
 * (v2dirty.h, V2D_UNSURE) or memory is short.  Asks for a checkpoint (it
 * rebuilds from the log) and waits for one to end, at most a few seconds;
 * then the caller tries again, FS_WALK_WAITS times at most.  false
 * without a bg thread to ask (or on it).  Call with no lock held. */
#define FS_WALK_WAITS 3
bool fs_ckpt_wait(struct tfs *fs);
/* Format v2, the node gate (fs_node_reserve, fs_node_reserve_slots):
 * whether the node area has room for the next checkpoint (the changes
 * noted so far, those reserved and the caller's, fs.c).  If not, asks for
 * checkpoints and waits for them, a few; still short: -ENOSPC when @grow
 * (the change adds metadata: a create), else it goes on (a delete must;
 * it gives room back).  0 on version 1.  Call with no lock held. */
/* What the gate sees now: free node slots and what a create needs of
 * them (0, 0 on version 1), for the stats. */
void fs_node_gate_stats(struct tfs *fs, uint64_t *free_slots, uint64_t *need);
/* Format v2, the node gate's arithmetic (fs.c): a checkpoint of noted
 * changes whose notes take @notes bytes (no hash tables), whose extent
 * ranges cover chunks worth @touch leaf copies and may add @grow bytes of
 * items, plus @other slots counted as such (xattr rewrites, deletions,
 * reservations), with @used nodes in the trees, writes at most this many
 * node slots (without FS_NODE_MARGIN).  Those are leaves (copied or new):
 * each dirties at most one parent a level, and a level k up holds at most
 * used / FS_NODE_FANOUT^k nodes (below the root every node is at least a
 * quarter full, 101 pointers: btree.c rebalance; 64 leaves room), plus one
 * per tree and level for the roots and the rounding, which is
 * FS_NODE_MARGIN (2 trees, 8 levels at most: 16 of its 32).  So the
 * interior copies are the sum over the levels of min(leaves, that bound)
 * (fs_node_interior).  Inlines, so the checkpoint (ckpt_v2.c) checks them
 * without calling into fs.c. */
#define FS_NODE_MARGIN 32
#define FS_NODE_NOTE_BYTES 64
#define FS_NODE_GROW_BYTES (16384u / 2)	/* half a node (BNODE_SIZE) */
#define FS_NODE_TOUCH 2			/* V2D_TOUCH */
#define FS_NODE_FANOUT 64u
static inline uint64_t fs_node_interior(uint64_t leaves, uint64_t used)
{
	uint64_t sum = 0;

	for (uint64_t n = used / FS_NODE_FANOUT; n; n /= FS_NODE_FANOUT)
		sum += leaves < n ? leaves : n;
	return sum;
}
static inline uint64_t fs_node_need_of(uint64_t notes, uint64_t touch, uint64_t grow,
				       uint64_t other, uint64_t used, uint64_t *newp)
{
	uint64_t newn = grow / FS_NODE_GROW_BYTES, leaves;

	if (newn > touch / FS_NODE_TOUCH)
		newn = touch / FS_NODE_TOUCH;
	*newp = newn;
	leaves = notes / FS_NODE_NOTE_BYTES + (touch < used ? touch : used) + newn + other;
	return leaves + fs_node_interior(leaves, used + newn);
}
/* Node slots a data-path change holds from the gate until its change is
 * noted (fs_data_reserve, fs_data_release). */
struct fs_resv {
	uint64_t touch, other;
};
/* Format v2: the node gate with a reservation of what a change of
 * @chunks V2D_CHUNKs at worst adds to the next checkpoint into *r (copies
 * of their leaves; new nodes and notes for @adds of them: a write adds
 * items to every chunk it covers, a punch or truncate to at most one), counted in every later gate's need until
 * fs_data_release.  Short only because of other changes' reservations it
 * waits for their release, never -ENOSPC for that.  0 on version 1 (*r
 * empty).  Call with no lock held, none of one's own reservations held. */
int fs_node_reserve(struct tfs *fs, bool grow, uint64_t chunks, uint64_t adds,
		    struct fs_resv *r);
/* Give *r back (after the change is noted, or it failed); safe on an
 * empty one, and twice. */
void fs_node_release(struct tfs *fs, struct fs_resv *r);
/* fs_node_reserve for a namespace, attribute or xattr change: @slots node
 * slots at worst (FS_NS_*, meta_v2_xattr_slots), held in *r from before the
 * change takes a lock until fs_node_release once it is noted or failed. */
int fs_node_reserve_slots(struct tfs *fs, bool grow, uint64_t slots, struct fs_resv *r);
/*
 * What one namespace change adds to the next checkpoint at worst, in node
 * slots of the INODES tree, item by item (docs/FORMAT.md "Format v2": an
 * inode's INODE, SYMLINK, XATTR and XCHUNK items share its id, a
 * directory's DIRENT and DIRINDEX items the directory's; each may sit in
 * a leaf of its own):
 *  - an INODE item rewritten in place (same size): its leaf copied, 1;
 *  - an item added (INODE of a new inode, a SYMLINK chunk, DIRENT,
 *    DIRINDEX, ORPHAN): its leaf copied and split, 2;
 *  - an item removed: its leaf copied and merged with a sibling, 2;
 *  - an inode's deletion: its items are one key range (INODES) and one
 *    (its EXTENT items): the range's two edge leaves and the siblings
 *    they merge with, 4 (free space has its own reserve, fspace_node.c).
 * create, mknod, mkdir: new INODE 2, parent's INODE 1, DIRENT 2,
 * DIRINDEX 2; a symlink adds its SYMLINK chunks (2 each).  link: the
 * inode's INODE 1, the parent's 1, DIRENT 2, DIRINDEX 2.  unlink, rmdir:
 * parent's INODE 1, DIRENT and DIRINDEX removed 2 + 2, the child's INODE
 * 1 and its ORPHAN item 2 (open), or its deletion 4 and the ORPHAN's 2.
 * rename: both parents' and both children's INODEs 4, the old name's
 * DIRENT and DIRINDEX removed 4, the new one's added 4, the replaced
 * child's ORPHAN 2 and deletion 4 + 2 (an exchange changes less).
 * setattr: one INODE 1.  xattrs: meta_v2_xattr_slots less what the open
 * set counts for the inode already, plus 1 (rounding) and the INODE 1.
 * A delete at the last forget or release of an unlinked inode
 * (idelete.c): its deletion 4 and its ORPHAN item's 2 (FS_NS_DELETE, which
 * its noted death counts from then on: V2D_DEAD_SLOTS) and its entry in
 * the dirty set, 104 bytes of notes, 2: FS_NS_DROP.
 * The interior nodes above these leaves count as for every change
 * (fs_node_interior), the roots are FS_NODE_MARGIN.  Not counted: the
 * REFCOUNT items of shared runs a delete, overwrite or punch changes
 * (found only by the checkpoint's diff of EXTENT items).  A reservation counts whole until its change is
 * noted; the notes then count it (v2d_note_bytes, v2d_other_slots).
 */
#define FS_NS_INODE 1
#define FS_NS_CREATE 7
#define FS_NS_SYMLINK_CHUNK 2
#define FS_NS_LINK 6
#define FS_NS_UNLINK 11
#define FS_NS_RENAME 20
#define FS_NS_DELETE 6
#define FS_NS_DROP (FS_NS_DELETE + 2)
/* The V2D_CHUNKs (1 MiB, v2dirty.h) [@off, @off + @len) bytes of a file
 * touch, at least 1. */
#define FS_RESV_CHUNK (256ull * TFS_BLOCK_SIZE)	/* V2D_CHUNK in bytes */
static inline uint64_t fs_resv_chunks(uint64_t off, uint64_t len)
{
	const uint64_t chunk = FS_RESV_CHUNK;
	uint64_t end = len ? off + len - 1 : off;

	if (end < off)
		end = UINT64_MAX;
	return end / chunk - off / chunk + 1;
}
/* Room for a data-path change (writes, fallocate, punch, truncate,
 * reflink), before it takes a lock: log space, then on version 2 the node
 * gate, where their EXTENT items count in the need (v2d_tree_need) and
 * the change reserves its own (@chunks, @adds, *r: fs_node_reserve) until the
 * caller calls fs_data_release once it is noted (its commit returned) or
 * failed; @grow false (it frees) waits but is never refused.  The gate is
 * called through fs->node_reserve, so the modules fs.c calls do not call
 * it back. */
static inline int fs_data_reserve(struct tfs *fs, bool grow, uint64_t chunks, uint64_t adds,
				  struct fs_resv *r)
{
	int ret = log_wait_space(fs->log);

	r->touch = r->other = 0;
	return ret || !fs->node_reserve ? ret : fs->node_reserve(fs, grow, chunks, adds, r);
}
static inline void fs_data_release(struct tfs *fs, struct fs_resv *r)
{
	if ((r->touch || r->other) && fs->node_release)
		fs->node_release(fs, r);
}
/* inode_get_walk with ns_lock held (on entry and return, let go while it
 * waits), waiting as above while it fails with ENOMEM: each wait spends
 * one of *budget. */
int fs_get_walk_waiting(struct tfs *fs, uint64_t ino, struct tfs_inode **ipp, int *budget);

/* ---- offline load (mount.c, for fsck) ---- */
/* Turn an offline-loaded fs (devices opened read-write) into a mounted one
 * without a background thread: rebuild the allocator from the metadata as
 * it is now (extents outside the data area: -EUCLEAN), open the log under
 * a new log_id at the replay end.  Then tfs_checkpoint/tfs_unmount write
 * the in-memory state as the new checkpoint. */
int fs_offline_commit(struct tfs *fs, char *err, size_t errlen);

/* ---- namespace helpers (namei.c) ---- */
/* Create a new inode of @mode (any type) named @name in @parent, with an
 * optional symlink target; on success *ipp is the new inode with nlookup
 * already incremented and a handle the caller puts (the lookup keeps it
 * from deletion, not in format v2's inode cache).  Takes ns_lock itself.
 * -EEXIST if the name exists. */
int namei_create(struct tfs *fs, uint64_t parent, const char *name, mode_t mode,
		 dev_t rdev, const char *target, const struct tfs_cred *c,
		 struct tfs_inode **ipp);

/* The LR_XATTR_SET record that sets @name (@namelen bytes) of inode @ino
 * to @val (xattr.c). */
struct log_rec xattr_set_rec(uint64_t ino, const char *name, size_t namelen, const void *val,
			     size_t size);

/* ---- POSIX ACLs kept with the mode (xattr.c, acl.h) ---- */
/* What a create in @parent inherits: with fs->acl and a default ACL
 * there, *mode's permission bits narrowed by it, the new access ACL (if
 * the mode does not say it all) and, for a directory, the default ACL
 * (values to log with the new inode, NULL if none); else *mode less
 * @umask.  Free with acl_inherit_free.  0 or -errno. */
struct acl_inherit {
	void *access, *dflt;
	uint32_t alen, dlen;
};
int acl_inherit(struct tfs *fs, uint64_t parent, uint32_t *mode, mode_t umask,
		struct acl_inherit *ai);
void acl_inherit_free(struct acl_inherit *ai);
/* chmod to @mode of @ip with an access ACL: into *r (type LR_XATTR_SET,
 * its value in @buf of ACL_XATTR_MAX bytes) the ACL's new value; type 0
 * if there is none or it does not change.  Caller holds the inode lock. */
void acl_chmod_rec(struct tfs_inode *ip, uint32_t mode, void *buf, struct log_rec *r);

/* ---- files (file.c) ---- */
/* Truncate/extend to size; caller holds nothing; takes the inode exclusively. */
int file_truncate(struct tfs *fs, struct tfs_inode *ip, uint64_t size);
/* Open @ip as a file (namei.c's tfs_create opens the file it made); the
 * caller holds a kernel reference. */
int file_open_ip(struct tfs *fs, struct tfs_inode *ip, int flags, struct tfs_file **out);

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
