/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tfs: the file system API of lib/, used by the FUSE daemon, mkfs, the tools
 * and the tests.  Inode numbers are the FUSE node ids (root = 1).  Every
 * function returns 0 (or a count) or -errno; the daemon replies
 * fuse_reply_err(req, -ret).
 *
 * Permission checks are the kernel's (the daemon mounts with
 * default_permissions); these functions check only what the kernel cannot
 * (names, types, emptiness, loops in rename).
 */
#ifndef TWINFS_TFS_H
#define TWINFS_TFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>

#define TFS_ROOT_INO 1
#define TFS_IO_MAX (1u << 20)		/* largest read or write */
#define TFS_NAME_MAX 255
#define TFS_DEV_MAX 8			/* devices of one file system */
#define TFS_LABEL_MAX 63		/* bytes of a label */

struct tfs;
struct tfs_file;

struct tfs_opts {
	const char *const *devs;	/* device paths */
	unsigned ndevs;
	const char *backend;		/* "auto" (NULL), "uring", "aio", "file" */
	const char *fault;		/* dev_fault_parse() spec, wraps backend */
	bool degraded;			/* allow missing devices */
	unsigned commit_ms;		/* background commit interval (0: 5000) */
	unsigned bounce_bufs;		/* bounce pool size (0: default) */
	/* fsck: load superblock, checkpoint and log into memory and stop there:
	 * no orphan reclaim, no allocator, no log, no thread, nothing written
	 * (see fs_offline_commit in fs_i.h).  Release with tfs_abandon. */
	bool offline;
	bool readonly;			/* with offline: open the devices O_RDONLY */
	/* Metadata damaged on every device (newest superblock, a log chunk
	 * before later ones, the checkpoint older than the log): mount
	 * read-only what can be recovered instead of refusing; nothing is
	 * written to the devices (opened O_RDONLY). */
	bool rescue;
	/* With rescue: the metadata log is not replayed (-o norecovery, as
	 * XFS's): read-only, the tree as the last checkpoint left it; what
	 * changed after it is not shown, and a block it names that a later
	 * change freed and reused fails its checksum (EIO), never reads as
	 * other data. */
	bool norecovery;
	/* Called once, on an I/O or background thread, when no device can
	 * take writes any more (tfs_unusable turns true); must not block. */
	void (*on_unusable)(void *ctx);
	void *cb_ctx;
	const char *event_cmd;		/* absolute path run per event (event.h), or NULL */
	const char *mountpoint;		/* for the events' TWINFS_MOUNTPOINT */
	unsigned event_timeout_s;	/* 0: EVENT_TIMEOUT_DEFAULT_S */
	bool nodiscard;			/* freed blocks are not discarded (trim still works) */
	/* -o cache=: bytes for the node cache and the resident inodes of a
	 * format v2 mount (0: 256 MiB; at least 4 MiB); version 1 keeps all
	 * metadata in memory and ignores it. */
	uint64_t cache_bytes;
	/* Format v2: changed map leaves nobody uses are kept compact until
	 * their checkpoint (extcache.c), so random writes fill the dirty
	 * budget later: fewer checkpoint bytes, a longer log to replay after
	 * a crash. */
	bool compact_dirty;
	/* Format v2 (-o lazyreplay): the mount's replay keeps the extent
	 * records of files whose map leaves are not in memory pending
	 * (extpend.h) instead of reading those leaves in one at a time; they
	 * are applied in key order as the mount's checkpoint writes them. */
	bool lazyreplay;
	/* POSIX ACLs (-o acl, the default; acl.h): the xattrs
	 * system.posix_acl_access and _default are kept, the mode follows
	 * the access ACL, chmod changes it, creates inherit the parent's
	 * default ACL or apply tfs_cred's umask.  Off: both names are
	 * EOPNOTSUPP and the umask is the caller's business. */
	bool acl;
	/* -o ckpt_log=: a checkpoint is asked for once the log since the
	 * last one passes this many bytes, which bounds the replay of the
	 * mount after a crash (0: half the log region, as always). */
	uint64_t ckpt_log_bytes;
	/* Format 1 is deprecated.  The tools (daemon, fsck) set v1_optin to
	 * how their user opts in ("-o format=1"): a format 1 image is then
	 * refused, one line naming it and the opt-in, unless v1 is set, and
	 * mounts with a one-line warning if it is.  NULL (library callers,
	 * the unit tests of the v1 code): both formats mount. */
	const char *v1_optin;
	bool v1;
};

struct tfs_format_opts {
	const char *label;
	bool force;			/* overwrite existing file systems */
	const char *backend;
	bool v2;			/* format v2 (mkfs.twinfs's default); false: v1 (deprecated) */
	/* v2 without short nodes (SUPER_INCOMPAT_V2_SHORT_NODES, the
	 * default): every node written whole, as before the feature. */
	bool no_short_nodes;
	/* v2 with leaf pieces (SUPER_INCOMPAT_V2_PIECES, mkfs -O pieces;
	 * experimental, needs short nodes). */
	bool pieces;
};

/* mkfs: writes a new empty file system (root directory) on every device.
 * Refuses (without force) devices holding twinfs/ext4/xfs/btrfs, devices
 * smaller than 64 MiB, and the same device twice.  On error err holds one
 * line naming the device; nothing is written. */
int tfs_format(const char *const *devs, unsigned n, const struct tfs_format_opts *o,
	       char *err, size_t errlen);

/* What a formatted device holds, from its superblock (mkfs's summary). */
struct tfs_format_info {
	uint8_t fs_uuid[16];
	char label[TFS_LABEL_MAX + 1];	/* NUL-terminated, "" if none */
	uint64_t block_size, total_blocks, data_start;
	unsigned ndevs;			/* copies */
	unsigned version;		/* format version, 1 or 2 */
	bool short_nodes;		/* v2: SUPER_INCOMPAT_V2_SHORT_NODES */
	bool pieces;			/* v2: SUPER_INCOMPAT_V2_PIECES */
};
/* Read @dev's superblock back: 0 or -errno with one line naming @dev in err. */
int tfs_format_info(const char *dev, struct tfs_format_info *out, char *err, size_t errlen);

/* Mount: open devices, read superblocks, load checkpoint, replay the log,
 * reclaim orphans, write a fresh checkpoint.  err gets one line. */
int tfs_mount(const struct tfs_opts *o, struct tfs **out, char *err, size_t errlen);
/* Final commit + checkpoint, mark clean, close devices, free everything. */
int tfs_unmount(struct tfs *fs);
/* Without checkpointing or writing anything (simulated crash in tests). */
void tfs_abandon(struct tfs *fs);

const char *tfs_backend_name(struct tfs *fs);
/* Turn ACLs off after mount, before the first request: the daemon's
 * FUSE init when the kernel does not offer FUSE_POSIX_ACL. */
void tfs_set_acl(struct tfs *fs, bool on);
/* The log's counters since mount (struct log_stats in log.h): what
 * twinfs-ctl status reports, for the benchmark (bench/micro.c). */
struct log_stats;
void tfs_log_stats(struct tfs *fs, struct log_stats *st);
/* The daemon held a setattr until the file's writes behind were
 * published (counted in stats: write_behind.setattr_waits). */
void tfs_note_setattr_wait(struct tfs *fs);
/* The daemon answered a release while the file's writes were behind
 * (stats: write_behind.releases_deferred). */
void tfs_note_release_deferred(struct tfs *fs);

/*
 * Called (on the calling thread) just before lib makes it wait: for a
 * range lock, a bounce buffer, a synchronous device I/O, another
 * thread's extent-map change.  The daemon hands its /dev/fuse reader
 * token on there (daemon/fuseio.c), so a READ that waits never keeps the
 * other workers from taking requests.  Set once, before serving; the
 * hook must not block.  tfs_may_block is lib's call of it.
 */
void tfs_set_block_hook(void (*fn)(void));
void tfs_may_block(void);

/* ---- namespace ---- */

struct tfs_cred {
	uid_t uid;
	gid_t gid;
	/* Applied at create when ACLs are on and the parent has no default
	 * ACL (FUSE_DONT_MASK: the kernel leaves it to us); else 0. */
	mode_t umask;
};

/* Bits for tfs_setattr's to_set. */
#define TFS_SET_MODE		(1 << 0)
#define TFS_SET_UID		(1 << 1)
#define TFS_SET_GID		(1 << 2)
#define TFS_SET_SIZE		(1 << 3)
#define TFS_SET_ATIME		(1 << 4)
#define TFS_SET_MTIME		(1 << 5)
#define TFS_SET_ATIME_NOW	(1 << 6)
#define TFS_SET_MTIME_NOW	(1 << 7)
#define TFS_SET_CTIME		(1 << 8)
/* Clear in->st_mode's S_ISUID and S_ISGID from the mode the inode has
 * under its lock (a write's or truncate's kill), instead of setting a
 * whole mode read before, which would undo a chmod landing in between. */
#define TFS_SET_KILL		(1 << 9)

/*
 * Inode flags (chattr, lsattr: FS_IOC_GETFLAGS/SETFLAGS), the bits of
 * <linux/fs.h> twinfs keeps.  The kernel enforces none of them on a FUSE
 * inode (its i_flags stay empty), so lib does: an immutable inode cannot
 * be opened for writing, truncated, fallocated, chmod/chown/utimes'd,
 * linked, renamed, removed or have its xattrs changed, nor can names be
 * added to or removed from an immutable directory; an append-only one is
 * the same except that it opens for writing with O_APPEND, fallocates
 * without punching or zeroing, takes new times, and a directory takes new
 * names.  Nodump and noatime are kept for the programs that read them.
 */
#define TFS_FL_IMMUTABLE	0x00000010	/* FS_IMMUTABLE_FL */
#define TFS_FL_APPEND		0x00000020	/* FS_APPEND_FL */
#define TFS_FL_NODUMP		0x00000040	/* FS_NODUMP_FL */
#define TFS_FL_NOATIME		0x00000080	/* FS_NOATIME_FL */
#define TFS_FL_KEPT		(TFS_FL_IMMUTABLE | TFS_FL_APPEND | TFS_FL_NODUMP | TFS_FL_NOATIME)
/* An open flag for tfs_open/tfs_create: the caller asked O_APPEND, which
 * it does not pass (a FUSE daemon with the writeback cache strips it: the
 * kernel places appends itself).  An append-only file needs one or the
 * other to open for writing. */
#define TFS_O_APPEND_ASKED	0x40000000
int tfs_getflags(struct tfs *fs, uint64_t ino, uint32_t *flags);
/* -EOPNOTSUPP for a bit outside TFS_FL_KEPT; the caller checked the
 * capability (CAP_LINUX_IMMUTABLE for immutable and append-only: the
 * kernel's fileattr code does before it asks a FUSE server). */
int tfs_setflags(struct tfs *fs, uint64_t ino, uint32_t flags);

/* lookup, mknod, mkdir, symlink, link, create and readdirplus add one
 * kernel reference (nlookup) to the inode they return; forget drops n. */
int tfs_lookup(struct tfs *fs, uint64_t parent, const char *name, struct stat *st);
void tfs_forget(struct tfs *fs, uint64_t ino, uint64_t nlookup);
int tfs_getattr(struct tfs *fs, uint64_t ino, struct stat *st);
/* The daemon sent @st (a regular file's) to the kernel in a reply the
 * kernel keeps (GETATTR, an entry): note its st_blocks. */
void tfs_blocks_seen(struct tfs *fs, const struct stat *st);
/* Has the inode's st_blocks changed since the kernel was last told
 * (tfs_blocks_seen)?  true when unsure. */
bool tfs_blocks_stale(struct tfs *fs, uint64_t ino);
/* The generation that goes with the inode number in FUSE file handles
 * (name_to_handle_at, NFS export): fixed for the inode's life, across
 * remounts, and different for a later inode given the same number.  0 for
 * the root and for a number no inode has.  The caller holds a reference
 * (a lookup or an open handle) to the inode. */
uint32_t tfs_fh_gen(struct tfs *fs, uint64_t ino);
/* in: st_mode, st_uid, st_gid, st_size, st_atim, st_mtim, st_ctim as selected.
 * f may be NULL (path-based truncate). */
int tfs_setattr(struct tfs *fs, uint64_t ino, const struct stat *in, int to_set,
		struct tfs_file *f, struct stat *out);
/* Regular files, fifos, sockets, char/block devices (metadata only). */
int tfs_mknod(struct tfs *fs, uint64_t parent, const char *name, mode_t mode, dev_t rdev,
	      const struct tfs_cred *c, struct stat *st);
int tfs_mkdir(struct tfs *fs, uint64_t parent, const char *name, mode_t mode,
	      const struct tfs_cred *c, struct stat *st);
int tfs_symlink(struct tfs *fs, uint64_t parent, const char *name, const char *target,
		const struct tfs_cred *c, struct stat *st);
int tfs_link(struct tfs *fs, uint64_t ino, uint64_t newparent, const char *newname,
	     struct stat *st);
int tfs_unlink(struct tfs *fs, uint64_t parent, const char *name);
int tfs_rmdir(struct tfs *fs, uint64_t parent, const char *name);
/* flags: 0, RENAME_NOREPLACE, RENAME_EXCHANGE, RENAME_WHITEOUT (others:
 * -EINVAL); the whiteout left at the old name is @c's (root's with
 * tfs_rename). */
int tfs_rename(struct tfs *fs, uint64_t parent, const char *name, uint64_t newparent,
	       const char *newname, unsigned flags);
int tfs_rename_cred(struct tfs *fs, uint64_t parent, const char *name, uint64_t newparent,
		    const char *newname, unsigned flags, const struct tfs_cred *c);
/* Returns the target length; copies at most size bytes (no NUL). */
ssize_t tfs_readlink(struct tfs *fs, uint64_t ino, char *buf, size_t size);

/* ---- directories ---- */

/* fill() returns nonzero when the reply buffer is full (the entry was not
 * taken: with plus, no reference is added for it).  next_off is the offset
 * to resume after this entry.  Offsets 0 and 1 are "." and "..".  Without
 * plus only st_ino and st_mode's type bits are filled.  With plus, a name
 * whose inode cannot be read (a lost tree node, an I/O error) still comes,
 * bare: st_nlink 0, only st_ino and the type, and no reference is added
 * for it; a lookup of the name then returns the error.  Leaving it out
 * would hide the damage. */
typedef int (*tfs_dirfill_fn)(void *ctx, const char *name, const struct stat *st,
			      uint64_t next_off);
int tfs_readdir(struct tfs *fs, uint64_t ino, uint64_t off, bool plus,
		tfs_dirfill_fn fill, void *ctx);
/* Where a listing of ino that starts now ends: entries created in or
 * renamed into the directory later get offsets at or past it.  A pass
 * that stops there (tfs_readdir_until) returns no entry twice however
 * the directory changes meanwhile, and every entry that stays unchanged
 * (as tmpfs does).  0, -ENOENT, -ENOTDIR. */
int tfs_readdir_end(struct tfs *fs, uint64_t ino, uint64_t *end);
/* tfs_readdir returning only entries whose offset is below end (a value
 * from tfs_readdir_end; UINT64_MAX: no limit). */
int tfs_readdir_until(struct tfs *fs, uint64_t ino, uint64_t off, uint64_t end, bool plus,
		      tfs_dirfill_fn fill, void *ctx);

/* ---- files ---- */

/* open: flags as open(2) (O_TRUNC honoured, with O_RDONLY too as on Linux;
 * O_APPEND makes every write go to the end). */
int tfs_open(struct tfs *fs, uint64_t ino, int flags, struct tfs_file **f);
/* create: O_EXCL gives -EEXIST if the name exists; otherwise an existing
 * regular file is opened (and truncated with O_TRUNC). */
int tfs_create(struct tfs *fs, uint64_t parent, const char *name, mode_t mode, int flags,
	       const struct tfs_cred *c, struct stat *st, struct tfs_file **f);
/* O_TMPFILE: a new regular file with no name, opened; deleted at its last
 * release (or by the mount after a crash) unless tfs_link named it. */
int tfs_tmpfile(struct tfs *fs, uint64_t parent, mode_t mode, int flags,
		const struct tfs_cred *c, struct stat *st, struct tfs_file **f);
int tfs_release(struct tfs_file *f);
uint64_t tfs_file_ino(const struct tfs_file *f);

/* Read into a bounce buffer: *buf is a pool buffer holding the data at
 * *buf + *data_off; give it back with tfs_buf_put.  Returns bytes (short at
 * EOF, 0 past it) or -errno (-EIO where no copy of a block verifies). */
ssize_t tfs_read(struct tfs_file *f, off_t off, size_t len, void **buf, size_t *data_off);
void tfs_buf_put(struct tfs *fs, void *buf);
/* Convenience: read into a caller buffer. */
ssize_t tfs_pread(struct tfs_file *f, void *dst, size_t len, off_t off);

/* Write: fill(ctx, dst, len) copies the caller's len bytes into dst (the
 * bounce buffer) exactly once.  flags: O_DSYNC/O_SYNC make the write durable
 * before returning.  Returns bytes written or -errno. */
typedef int (*tfs_fill_fn)(void *ctx, void *dst, size_t len);
ssize_t tfs_write(struct tfs_file *f, off_t off, size_t len, tfs_fill_fn fill, void *ctx,
		  int flags);
/* More flags of a write, beside O_DSYNC/O_SYNC.  TFS_W_AT_OFFSET: at off
 * even through an O_APPEND open (the caller's O_APPEND is off now: fcntl
 * F_SETFL).  TFS_W_CACHED: the page cache's writeback, which stores what
 * the kernel acknowledged already: at off, and not refused for chattr's
 * flags.  Outside the O_* bits. */
#define TFS_W_AT_OFFSET		0x10000000
#define TFS_W_CACHED		0x20000000

/*
 * tfs_write without a blocked thread: everything up to the device writes
 * (including the one call of fill) runs before this returns; the device
 * writes and the metadata commit complete later, and then cb(arg, result)
 * runs, with result as tfs_write would return it, on the I/O backend's
 * completion thread (or the O_DSYNC group-commit thread), or on this
 * thread before returning when the backend is synchronous or the write
 * fails early.  cb must not block for long: it holds up other completions.
 * Concurrent writes to overlapping ranges are ordered by the range lock
 * exactly as with tfs_write.
 */
typedef void (*tfs_write_cb)(void *arg, ssize_t result);
void tfs_write_async(struct tfs_file *f, off_t off, size_t len, tfs_fill_fn fill, void *ctx,
		     int flags, tfs_write_cb cb, void *arg);
/*
 * tfs_read without a blocked thread: the extent lookup runs now, the device
 * reads complete later and cb(arg, result, buf, data_off) gets what
 * tfs_read returns (buf: give it back with tfs_buf_put; NULL when result
 * <= 0), on the completion thread or on this one as for tfs_write_async.
 * A copy that does not verify is read again through every mirror and
 * repaired, as tfs_read does.
 */
typedef void (*tfs_read_cb)(void *arg, ssize_t result, void *buf, size_t data_off);
void tfs_read_async(struct tfs_file *f, off_t off, size_t len, tfs_read_cb cb, void *arg);
/* tfs_fsync without a blocked thread: cb(arg, result) once everything
 * acknowledged before the call is durable, from the group-commit thread
 * (or on this thread when the backend is synchronous). */
typedef void (*tfs_sync_cb)(void *arg, int result);
void tfs_fsync_async(struct tfs *fs, uint64_t ino, bool datasync, tfs_sync_cb cb, void *arg);
/* Tell lib that @f is being fsynced (call it with tfs_fsync or
 * tfs_fsync_async): an open fsynced after every few small writes (a
 * database's write-ahead log) gets its next small writes as FUA writes, so
 * the fsync that follows needs no device flush before its log commit. */
void tfs_file_synced(struct tfs_file *f);
/* Wait until every tfs_write_async, tfs_read_async and tfs_fsync_async
 * issued so far has called back. */
void tfs_drain(struct tfs *fs);
ssize_t tfs_pwrite(struct tfs_file *f, const void *src, size_t len, off_t off, int flags);

int tfs_fsync(struct tfs *fs, uint64_t ino, bool datasync);
int tfs_syncfs(struct tfs *fs);
/* mode: 0, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE|FALLOC_FL_KEEP_SIZE,
 * FALLOC_FL_ZERO_RANGE with or without FALLOC_FL_KEEP_SIZE. */
int tfs_fallocate(struct tfs_file *f, int mode, off_t off, off_t len);
/* The free space a write (or, with @alloc, a fallocate) of @len bytes at
 * @off would take as the map stands now, in *@bytes: a write takes a new
 * block for each block it touches (copy-on-write) but those fallocated and
 * never written, a fallocate one for each hole.  0, -EINVAL, or the map
 * lookup's error.  Locks the range shared for the look. */
int tfs_space_need(struct tfs_file *f, off_t off, uint64_t len, bool alloc, uint64_t *bytes);
/* SEEK_DATA / SEEK_HOLE (and SEEK_SET/CUR/END trivially). */
off_t tfs_lseek(struct tfs_file *f, off_t off, int whence);
/* Shares whole aligned blocks (reflink), copies the unaligned edges. */
ssize_t tfs_copy_range(struct tfs_file *in, off_t off_in, struct tfs_file *out,
		       off_t off_out, size_t len);

int tfs_statfs(struct tfs *fs, struct statvfs *st);
/* Discard every free block on every mirror (the trim job, discard.c),
 * starting one or joining the one running, and wait for its end: 0 or
 * its error, *@bytes what it discarded.  -EROFS read-only. */
int tfs_trim(struct tfs *fs, uint64_t *bytes);
/* Bytes a data write can still take (statfs's f_bavail, cheap: two atomic
 * loads), for the daemon's low-space mode. */
uint64_t tfs_avail_bytes(struct tfs *fs);
/* Blocks freed by transactions not yet durable (deferred frees) are free
 * space one log commit away, not counted by tfs_avail_bytes or statfs.
 * Before answering ENOSPC, commit to get them back, as btrfs commits its
 * transaction to unpin extents: returns 1 if some were pending (now
 * released), 0 if none were, or a negative errno. */
int tfs_reclaim_deferred(struct tfs *fs);
/* Format v2: bytes of data writes the node area still has room for before
 * the next checkpoint, at the worst a write costs there (two copied nodes,
 * one new and its notes per MiB it changes; a few atomic loads), for the
 * daemon's low-space mode; UINT64_MAX on version 1.  @settled: once a
 * checkpoint has given back the slots the changes noted so far hold (the
 * node gate waits for checkpoints before it refuses a write). */
uint64_t tfs_node_room_bytes(struct tfs *fs, bool settled);
/* The node room one buffered write(2) takes in the daemon's low-space mode
 * (up to 4 MiB at an offset it does not know: 5 MiB chunks).  Where even a
 * checkpoint would leave less (@settled), statfs shows no blocks or inodes
 * available. */
#define TFS_NODE_WRITE_ROOM (5ull << 20)
/* Format v2, before answering ENOSPC for want of node room: changes noted
 * since the last checkpoint hold node slots until the next one; ask for a
 * checkpoint and wait for its end.  1 if it waited (look again), 0 if
 * there was nothing to wait for (version 1, nothing noted, no background
 * thread).  Call with no lock held. */
int tfs_node_reclaim(struct tfs *fs);
/* No device can take writes any more: the file system turned read-only
 * and every change fails with -EROFS until unmount. */
bool tfs_unusable(struct tfs *fs);
/* Write a checkpoint now (tests and tools; the daemon checkpoints on its
 * own when the log fills). */
int tfs_checkpoint(struct tfs *fs);

/* ---- xattrs ---- */
/* flags: XATTR_CREATE / XATTR_REPLACE, and TFS_XATTR_KILL_SGID with
 * an access ACL set by a caller neither in the file's group nor with
 * CAP_FSETID (the kernel's posix_acl_update_mode clears S_ISGID then). */
#define TFS_XATTR_KILL_SGID	0x100
int tfs_setxattr(struct tfs *fs, uint64_t ino, const char *name, const void *val,
		 size_t size, int flags);
/* size 0: return the value's size.  -ENODATA, -ERANGE. */
ssize_t tfs_getxattr(struct tfs *fs, uint64_t ino, const char *name, void *buf, size_t size);
ssize_t tfs_listxattr(struct tfs *fs, uint64_t ino, char *buf, size_t size);
int tfs_removexattr(struct tfs *fs, uint64_t ino, const char *name);

#endif
