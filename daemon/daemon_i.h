/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * daemon_i.h: private interface between the daemon's files.  main.c owns
 * option parsing, the process lifecycle and logging; ops.c owns the FUSE
 * low-level ops table that turns requests into lib/tfs.h calls; privs.c
 * the suid/sgid rules; wbehind.c the writes answered before their device
 * writes, and who waits for them.
 */
#ifndef TWINFS_DAEMON_I_H
#define TWINFS_DAEMON_I_H

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <syslog.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include <fuse_lowlevel.h>

#include "tfs.h"

#ifndef TWINFS_VERSION
#define TWINFS_VERSION "0.1.0"
#endif

/* One open file or directory.  fi->fh points at this (not at the
 * tfs_file) so the daemon can release handles the kernel never released
 * (connection aborted, lazy unmount) before tfs_unmount. */
struct tfsd_file {
	struct tfs_file *f;		/* NULL for a directory */
	uint64_t ino;
	bool direct;			/* opened FOPEN_DIRECT_IO */
	bool cached_w;			/* writable, on the page cache (not direct) */
	bool behind;			/* direct, writes answered once copied: ops.c big_writer */
	bool counted;			/* cached: in tfsd.cached_opens (ops.c) */
	struct tfsd_file *prev, *next;	/* protected by tfsd.files_lock */
	/* Released while the inode's writes were behind: the next in its
	 * wb_ent's list, then in tfsd.wb_reap (wbehind.c, under wb_mu). */
	struct tfsd_file *wb_next;
	/* Directories: where the current readdir pass ends
	 * (tfs_readdir_end), set at opendir and at every pass from offset 0
	 * (rewinddir).  The kernel serializes readdir on one open file. */
	_Atomic uint64_t dir_end;
};

#define TFSD_CACHED_SLOTS 1024u

struct space_ent;
struct wb_ent;

/* The daemon's state, the session's userdata.  Everything except the file
 * list and the INIT fields is written before the session loop starts and
 * read-only after. */
struct tfsd {
	struct tfs *fs;
	struct fuse_session *se;	/* for notifications to the kernel */
	bool writethrough;		/* every open is direct + parallel */
	/* -o direct_writers: writable opens of a file at least this long are
	 * direct and their writes go behind (ops.c big_writer); 0: off. */
	uint64_t direct_writers;
	bool writeback_cache;		/* want FUSE_CAP_WRITEBACK_CACHE */
	/* -o acl (default): want FUSE_CAP_POSIX_ACL and FUSE_CAP_DONT_MASK;
	 * cleared at init if the kernel does not offer both. */
	bool acl;
	bool uring;			/* TFSD_TRANSPORT_URING: start furing.c after INIT */
	struct tfsd_uring *_Atomic ur;	/* furing.c, once started */

	pthread_mutex_t files_lock;	/* protects files (open/release only) */
	struct tfsd_file files;		/* list head of open files */
	/* Cached (page-cache) opens of files, by hash of the inode: a direct
	 * write to a file with one drops the pages a reader may have read
	 * under it (ops.c struct direct_write).  Collisions only cost that. */
	_Atomic unsigned cached_opens[TFSD_CACHED_SLOTS];
	_Atomic bool dio_written[TFSD_CACHED_SLOTS];	/* a direct write since mount */

	/* Requests handed to a thread of their own because they wait for
	 * the kernel to send (and us to answer) other requests: see
	 * op_lseek.  slow_n counts them, under slow_mu. */
	pthread_mutex_t slow_mu;
	pthread_cond_t slow_cv;
	unsigned slow_n;

	/* fuseio.c: the INIT exchange, written by the worker that reads it.
	 * init_unique is its request id while its reply is still to be
	 * patched; dio_mmap says the kernel took FUSE_DIRECT_IO_ALLOW_MMAP. */
	_Atomic bool init_done;
	/* fuseio.c: the reader token, a binary semaphore: its holder is the
	 * one worker that may read /dev/fuse (a thread-local says who). */
	sem_t rd_tok;
	bool rd_tok_on;			/* set up; otherwise every worker reads */
	bool no_readtoken;		/* -o noreadtoken: do not set it up */
	_Atomic uint64_t init_unique;
	bool init_mmap, init_killpriv;	/* offered; written before init_unique */
	/* The kernel's INIT is 7.33 or later: its WRITE requests say whether the
	 * writer lacks CAP_FSETID (FUSE_WRITE_KILL_SUIDGID; fuseio.c). */
	bool init_kill_flags;
	_Atomic bool dio_mmap;
	/* The kernel took FUSE_HANDLE_KILLPRIV_V2 (fuseio.c): it leaves
	 * clearing suid/sgid on write, truncate, fallocate and chown to us
	 * (privs.c) and skips the security.capability check per write(2). */
	_Atomic bool killpriv_v2;
	bool no_killpriv;		/* -o nokillpriv_v2: never ask for it */
	/* ops.c: the bdi's readahead has been raised (or tried once). */
	_Atomic bool ra_raised;
	/* space.c: low-space mode.  Lock order: files_lock, then space_mu. */
	uint64_t space_reserve_opt;	/* -o space_reserve (0: from the bdi) */
	char bdi_max_bytes[80];		/* sysfs path, "" when unknown */
	_Atomic uint64_t space_reserve;	/* R in bytes */
	_Atomic uint64_t space_bdi_due;	/* when to read max_bytes again (ms) */
	_Atomic bool space_low;		/* set and cleared under files_lock */
	_Atomic uint64_t space_low_since;	/* when it was set (ms) */
	_Atomic bool space_dead_seen;	/* tfs_unusable() handled */
	pthread_mutex_t space_mu;	/* protects everything below */
	struct space_ent *sents;	/* per inode with writable cached opens */
	size_t nsents, sentcap;
	uint64_t space_pending;		/* bytes of admitted direct writes in flight */
	uint64_t space_pending_node;	/* ... of them that take node room (not fallocate) */
	/* wbehind.c: inodes with writes behind; lock order: leaf. */
	pthread_mutex_t wb_mu;
	pthread_cond_t wb_cv;		/* broadcast when a write behind ends */
	struct wb_ent *wb_tab[256];	/* hash chains, protected by wb_mu */
	_Atomic uint64_t wb_total;	/* writes behind in flight */
	/* ... of the inodes of each chain: changed under wb_mu, read without
	 * it, so a READ of a file none of whose chain is behind takes no
	 * lock while other files' writes are behind. */
	_Atomic uint32_t wb_chain_n[256];
	/* Released files whose inode's writes behind have all ended, to be
	 * dropped by the next request (tfsd_wb_reap); under wb_mu, and
	 * wb_reap_n says without the lock whether there are any. */
	struct tfsd_file *wb_reap;
	_Atomic unsigned wb_reap_n;
};

/* ops.c */
extern const struct fuse_lowlevel_ops tfsd_ops;
void tfsd_files_init(struct tfsd *d);
/* Wait for the requests still answered by threads of their own; call
 * after the loop ended, before the session goes. */
void tfsd_slow_drain(struct tfsd *d);
/* slow.c: LSEEK; and the reply of a direct write of @n bytes at @off to a
 * file with cached opens, then the drop of that range from the page cache
 * (on a thread of its own). */
void tfsd_op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		   struct fuse_file_info *fi);
void tfsd_reply_write_inval(fuse_req_t req, fuse_ino_t ino, off_t off, size_t n);
/* ops.c: a direct write to @ino is in place; true if the range must be
 * dropped from the page cache (a cached open is there). */
bool tfsd_dio_check(struct tfsd *d, uint64_t ino);
/* Release every file the kernel left open; call after the loop ended. */
void tfsd_files_release_all(struct tfsd *d);
/* Unlink @df from the open files, tfs_release and free it; returns
 * tfs_release's result. */
int tfsd_file_drop(struct tfsd *d, struct tfsd_file *df);

/* fuseio.c: our own read/writev on the session's /dev/fuse fd, so the
 * INIT reply asks for FUSE_DIRECT_IO_ALLOW_MMAP (shared mmap of direct-I/O
 * opens).  Call after fuse_session_mount, before the loop.  0 or -errno. */
int tfsd_io_install(struct tfsd *d, struct fuse_session *se);
/* Before a worker waits: hand the /dev/fuse reader token on if it holds
 * it, so the other workers keep reading requests (fuseio.c). */
void tfsd_reader_yield(struct tfsd *d);
/* Called by the transport with each raw request before libfuse parses it
 * (libfuse 3.14 drops the kill flags); libfuse then runs the op on the same
 * thread.  tfsd_req_kill: 1 if the request says its sender lacks
 * CAP_FSETID (kill suid/sgid), 0 if it says it has it, -1 if it says
 * nothing (privs.c then decides from the uid). */
void tfsd_note_request(struct tfsd *d, void *buf, size_t len);
/* The request this thread serves came as FUSE_TMPFILE (now a CREATE). */
bool tfsd_req_tmpfile(void);
int tfsd_req_kill(void);
/* furing.c: FUSE over io_uring (-o uring).  tfsd_uring_check before
 * mounting: 0, or one line said and -errno when the kernel has it off.
 * fuseio.c calls tfsd_uring_start once the INIT reply is written, and
 * offers every reply to tfsd_uring_reply (true: it was a ring request's,
 * *ret is what writev would return).  tfsd_uring_stop after the
 * unmount. */
struct fuse_init_out;
enum { TFSD_TRANSPORT_DEV, TFSD_TRANSPORT_URING };
/* 0 when the kernel takes FUSE over io_uring; else -EOPNOTSUPP, said on
 * stderr in one line unless quiet. */
int tfsd_uring_check(bool quiet);
void tfsd_uring_start(struct tfsd *d, int fd, const struct fuse_init_out *init);
bool tfsd_uring_reply(struct tfsd *d, const struct iovec *iov, int count, ssize_t *ret);
void tfsd_uring_stop(struct tfsd *d);
/* space.c: low-space mode (see there).  Call tfsd_space_init after the
 * mount exists (it finds the mount's bdi in mountinfo). */
void tfsd_space_init(struct tfsd *d, const char *mnt);
/* After the session loop and tfsd_slow_drain. */
void tfsd_space_fini(struct tfsd *d);
/* tfs_opts.on_unusable: no device takes writes; refuse cached writes. */
void tfsd_space_dead(void *ctx);
/* Before a WRITE, fallocate or open: enter or leave low-space mode. */
void tfsd_space_check(struct tfsd *d);
/* Whether a new open must be direct; call under files_lock. */
bool tfsd_space_open_direct(struct tfsd *d);
/* Attribute timeout for every reply that carries attributes. */
double tfsd_attr_timeout(struct tfsd *d);
/* A GETATTR carrying @df's handle: true when space.c took the request
 * (it replies, possibly later from a thread of its own). */
bool tfsd_space_gate(fuse_req_t req, fuse_ino_t ino, struct tfsd_file *df);
/* What a direct write or an allocation admitted while low holds of the
 * free space (data) and the node room (node) until it has completed. */
struct tfsd_space_hold {
	uint64_t data, node;
};
/* A direct write or (@alloc) an allocation of @len at @off in @f while
 * low: 0 (admitted: call tfsd_space_done with @h when it has completed), 1
 * (not low: nothing to call) or -ENOSPC.  It counts the blocks the map says
 * it takes (none for a write into fallocated, never written blocks; without
 * @f all of @len).  An
 * allocation adds few tree items whatever its length: it takes no node
 * room here. */
int tfsd_space_admit(struct tfsd *d, struct tfs_file *f, uint64_t off, uint64_t len, bool alloc,
		     struct tfsd_space_hold *h);
void tfsd_space_done(struct tfsd *d, const struct tfsd_space_hold *h);
/* fallocate of [off, off + len) in @f admitted as a whole while low: done
 * in pieces admitted each, so what a piece allocated does not count twice
 * (it shows in the free space); the size changes (without KEEP_SIZE) with
 * the last piece.  0 or -errno. */
int tfsd_space_fallocate(struct tfsd *d, struct tfs_file *f, int mode, off_t off, off_t len);
/* @df is being released. */
void tfsd_space_release(struct tfsd *d, struct tfsd_file *df);
/* Spawn fn(arg) on a detached thread counted in slow_n; false if it
 * could not be started (fn did not run). */
bool tfsd_slow_spawn(struct tfsd *d, void *(*fn)(void *), void *arg);
/* The end of such a thread. */
void tfsd_slow_done(struct tfsd *d);

/* wbehind.c: writeback WRITEs answered before their device writes.
 * tfsd_wb_init before the session.  A write
 * of @ino goes behind between tfsd_wb_begin (false: do not reply early)
 * and tfsd_wb_end with its result; tfsd_wb_wait waits until @ino has
 * none and, with take_err, returns (and forgets) the first failure since
 * the last such call; tfsd_wb_wait_all waits for every inode's. */
void tfsd_wb_init(struct tfsd *d);
bool tfsd_wb_begin(struct tfsd *d, uint64_t ino);
void tfsd_wb_end(struct tfsd *d, uint64_t ino, int err);
int tfsd_wb_wait(struct tfsd *d, uint64_t ino, bool take_err);
/* Has @ino writes behind now? */
bool tfsd_wb_busy(struct tfsd *d, uint64_t ino);
void tfsd_wb_wait_all(struct tfsd *d);
/* RELEASE of @df: true when @ino has writes behind, and @df is then
 * dropped (tfsd_file_drop) once the last of them has ended, by the next
 * request's thread (tfsd_wb_reap, called as each request arrives) or at
 * unmount; false: none behind, the caller drops it. */
bool tfsd_wb_release(struct tfsd *d, uint64_t ino, struct tfsd_file *df);
/* Drop the released files whose writes behind have ended (a request's
 * thread, where tfs_release may wait for log space). */
void tfsd_wb_reap(struct tfsd *d);
/* The kernel's writeback WRITE of a page-cache open: replied once lib
 * holds the payload (@fill copies it from @in), written behind.  False
 * (nothing done) when it must be answered after its device writes. */
bool tfsd_write_behind(fuse_req_t req, fuse_ino_t ino, struct tfsd_file *df, tfs_fill_fn fill,
		       struct fuse_bufvec *in, off_t off, size_t len, int flags);

/* ctl.c: the control-channel ioctl (TWINFS_IOC_CTL on the root), and
 * the route of the lib's log lines into tlog (call before mounting). */
void tfsd_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg,
		struct fuse_file_info *fi, unsigned flags, const void *in_buf, size_t in_bufsz,
		size_t out_bufsz);
void tfsd_ctl_log_init(void);

/* remount.c: with "remount" among the -o options, change the flags of the
 * mount at the mount point argument and return the exit code; -1 if it is
 * not a remount. */
int tfsd_remount(int argc, char *argv[]);

/* main.c: log to stderr in foreground mode, to syslog in background mode.
 * No trailing newline in fmt.  LOG_DEBUG is printed only with -d. */
void tlog(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* privs.c: suid/sgid clearing by the kernel's rules, for the requester of
 * @req.  The bits to clear from a file with @st before a write or
 * truncate by it (0 for root and for the kernel's own writeback). */
bool privs_unprivileged(fuse_req_t req);
mode_t privs_kill_bits(fuse_req_t req, const struct stat *st);
/* Setting an access ACL clears S_ISGID of a file in group @gid for this
 * requester (the kernel's posix_acl_update_mode; FUSE leaves it to us
 * without FUSE_SETXATTR_EXT, which libfuse 3.14 cannot ask for). */
bool privs_acl_kill_sgid(fuse_req_t req, gid_t gid);
/* Adjust a SETATTR (attr, *to_set) on a file now @cur so that it clears
 * what the kernel's rules clear for the requester. */
void privs_setattr(fuse_req_t req, const struct stat *cur, struct stat *attr, int *to_set);
/* Before a WRITE or FALLOCATE from a writer: suid/sgid cleared by the
 * rules above (0 or -errno). */
int privs_write_kill(fuse_req_t req, fuse_ino_t ino);
/* Before a direct write: security.capability removed (0 or -errno). */
int privs_direct_write_kill_caps(struct tfs *fs, fuse_ino_t ino);

static inline struct tfsd *req_d(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static inline struct tfs *req_fs(fuse_req_t req)
{
	return req_d(req)->fs;
}

/* The one place a -errno becomes a FUSE error. */
static inline void reply_err(fuse_req_t req, long ret)
{
	fuse_reply_err(req, (int)-ret);
}

/* xops.c */
void tfsd_op_statfs(fuse_req_t req, fuse_ino_t ino);
void tfsd_op_access(fuse_req_t req, fuse_ino_t ino, int mask);
void tfsd_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
		      size_t size, int flags);
void tfsd_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size);
void tfsd_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void tfsd_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);

#endif
