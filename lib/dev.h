/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * dev: raw devices (block devices or image files) and the I/O backends that
 * drive them, behind one vtable: io_uring (default), libaio (fallback when
 * io_uring is refused), pread/pwrite (files that refuse O_DIRECT) and a
 * fault-injecting wrapper for tests.
 *
 * The unit of work is a batch: the caller fills an array of struct dev_io and
 * dev_submit() runs them all concurrently and returns when every one has
 * completed.  Mirrored writes are one batch with one entry per device, so
 * mirrors are written in parallel, never one after the other.
 *
 * All functions return 0 (or a count) or -errno.
 */
#ifndef TWINFS_DEV_H
#define TWINFS_DEV_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define DEV_MAX 8

enum dev_op { DEV_READ = 0, DEV_WRITE = 1, DEV_FLUSH = 2,
	/* Never in a dev_submit batch: dev_discard() only.  Named here so
	 * fault rules and the crash journal can speak of discards. */
	DEV_DISCARD = 3 };

/* How a device gives freed blocks back (dev_discard_probe). */
enum dev_discard_mode {
	DEV_DISCARD_UNKNOWN = 0,	/* not probed yet */
	DEV_DISCARD_NONE,		/* neither works: discards are skipped */
	DEV_DISCARD_PUNCH,		/* image file: FALLOC_FL_PUNCH_HOLE */
	DEV_DISCARD_BLK,		/* block device: BLKDISCARD */
};

struct dev {
	char *path;
	int fd;
	int idx;		/* slot in the backend, set by dev_backend_attach */
	uint64_t size;		/* bytes, rounded down to 4096 */
	bool direct;		/* opened with O_DIRECT */
	bool is_blk;		/* block device (else regular file) */
	_Atomic int discard;	/* enum dev_discard_mode */
	/* Plain (not FUA) writes completed, and how many of them the last
	 * completed DEV_FLUSH covered: equal means a flush has nothing to
	 * make durable (dev_note_done, mirror_flush). */
	_Atomic uint64_t wr_done;
	_Atomic uint64_t wr_flushed;
};

struct dev_io {
	struct dev *dev;
	uint8_t op;		/* enum dev_op */
	uint64_t off;		/* bytes, 4096-aligned */
	void *buf;		/* 4096-aligned */
	uint32_t len;		/* bytes, multiple of 4096; 0 for DEV_FLUSH */
	/* DEV_WRITE: durable when it completes (RWF_DSYNC: a FUA write, or
	 * the write and then a flush where the device has no FUA).  Only
	 * this write: earlier ones still need a DEV_FLUSH. */
	bool fua;
	int res;		/* out: 0 on success (full length) or -errno */
	/* Private to the asynchronous path (dev_submit_async). */
	struct dev_batch *batch;
	uint32_t done;		/* bytes completed */
};

/*
 * An asynchronous batch (dev_submit_async): the I/Os run concurrently, and
 * when the last one has completed (every ios[i].res set exactly as
 * dev_submit() sets it) the backend's completion thread calls done(b).
 * done() may block on synchronous I/O and locks, but must never wait for
 * another asynchronous batch: that one completes on the same thread.
 */
struct dev_batch {
	struct dev_io *ios;
	unsigned n;
	void (*done)(struct dev_batch *b);
	/* Keep on as few completion threads as load allows, instead of
	 * spreading (a backend with several may honour it): for batches
	 * whose done() is short, such as a read's checksum and reply. */
	bool pack;
	/* Private to the backend. */
	unsigned left;
	struct dev_batch *next;
};

struct dev_backend;

struct dev_ops {
	const char *name;
	/* Run all n I/Os concurrently; return when all are complete.  Returns
	 * 0, or -errno when the batch could not be issued at all; per-I/O
	 * outcome is in ios[i].res (short transfers are reported as -EIO). */
	int (*submit)(struct dev_backend *be, struct dev_io *ios, unsigned n);
	/* Optional (NULL: synchronous only).  Queue @b; 0 or -errno when
	 * nothing was queued and done() will not be called. */
	int (*submit_async)(struct dev_backend *be, struct dev_batch *b);
	/* Wait until no asynchronous batch is queued or in flight. */
	void (*drain)(struct dev_backend *be);
	/* Optional (NULL: -EOPNOTSUPP).  See dev_register_buffers. */
	int (*register_buffers)(struct dev_backend *be, void *base, size_t len);
	/* Optional (NULL: -EOPNOTSUPP).  Tell the device that bytes [off,
	 * off + len) no longer hold anything: later reads return zeros or
	 * garbage.  Synchronous; 0 or -errno. */
	int (*discard)(struct dev_backend *be, struct dev *d, uint64_t off, uint64_t len);
	int (*attach)(struct dev_backend *be, struct dev *d);
	void (*destroy)(struct dev_backend *be);
};

struct dev_backend {
	const struct dev_ops *ops;
	struct dev *devs[DEV_MAX];	/* attached devices, by idx */
	unsigned ndevs;
	void *priv;
	void *async;		/* the asynchronous engine, if the backend has one */
};

/*
 * Open a device or image file read-write with O_DIRECT (falling back to
 * buffered I/O only when the file system refuses O_DIRECT with EINVAL) and
 * take an exclusive flock() on it so a second daemon or mkfs cannot use it at
 * the same time (-EBUSY).  @readonly opens O_RDONLY (fsck -n).
 * On failure writes a one-line reason naming the path into err.
 */
int dev_open(const char *path, bool readonly, struct dev **out, char *err, size_t errlen);
void dev_close(struct dev *d);

/*
 * Identity of a device, to tell "the same device under another name"
 * (a symlink, a second path, a hard link): the device number for block
 * devices, (st_dev, st_ino) for files.  _path follows symlinks.
 */
struct dev_id {
	dev_t dev;
	ino_t ino;
};
int dev_id_path(const char *path, struct dev_id *id);
int dev_id_fd(int fd, struct dev_id *id);
static inline bool dev_id_eq(const struct dev_id *a, const struct dev_id *b)
{
	return a->dev == b->dev && a->ino == b->ino;
}
/*
 * @path as an absolute path with every symlink resolved, so it still names
 * the same file after a chdir (the daemon runs in /).  A path that does not
 * exist (a device missing at mount) gets its directory resolved instead,
 * or, if that is missing too, the current directory in front.  0 or -errno
 * (-ENAMETOOLONG when out is too small).
 */
int dev_abspath(const char *path, char *out, size_t outlen);

/*
 * Create a backend: name is "auto" (io_uring, else libaio when io_uring is
 * refused with EPERM/ENOSYS/EACCES, else "file"), "uring", "aio" or "file".
 * "file" uses pread/pwrite/fdatasync and works with or without O_DIRECT.
 */
int dev_backend_create(const char *name, struct dev_backend **out);
/* Attach a device: assigns d->idx.  All devices are attached before I/O. */
int dev_backend_attach(struct dev_backend *be, struct dev *d);
int dev_submit(struct dev_backend *be, struct dev_io *ios, unsigned n);
/*
 * Count the plain writes of @ios as completed (dev_io.dev->wr_done).  The
 * dev layer calls it for every batch before the caller sees it complete,
 * so a flush issued after that covers them.
 */
void dev_note_done(const struct dev_io *ios, unsigned n);
/* Whether a plain write completed on @d since the last DEV_FLUSH through
 * dev_submit was issued: if not, a flush would make nothing durable. */
bool dev_flush_needed(struct dev *d);
/* Whether @be runs batches asynchronously (io_uring: yes). */
bool dev_async_supported(const struct dev_backend *be);
/*
 * Register the memory [base, base + len) (one mapping, the bounce pool)
 * with the asynchronous engine, so that its I/Os from buffers inside it
 * skip pinning the buffer's pages on every request (io_uring fixed
 * buffers: on a 1 MiB write that is 256 pages pinned and unpinned per
 * mirror).  Once, before the region is used.  0, or -errno when the
 * engine cannot (no engine, no support, a memlock limit): every I/O then
 * goes as before.  The region must stay mapped while I/O from it runs.
 */
int dev_register_buffers(struct dev_backend *be, void *base, size_t len);
/* See struct dev_batch.  0, or -errno when it was not queued (misuse:
 * -EINVAL, no async support: -EOPNOTSUPP). */
int dev_submit_async(struct dev_backend *be, struct dev_batch *b);
/* Wait until every asynchronous batch submitted so far has had its done()
 * return.  No-op for synchronous backends. */
void dev_async_drain(struct dev_backend *be);
/* Give a synchronous backend asynchronous batches, run one at a time by a
 * thread through its submit (for the fault injector, so the crash tests
 * cover the asynchronous write path).  0 or -errno; no-op if it has them. */
int dev_async_emulate(struct dev_backend *be);
void dev_backend_destroy(struct dev_backend *be);

/*
 * The threads that run asynchronous batches' done() (io_uring completion
 * threads, the emulation thread) only complete I/O and hand work on: a
 * log commit, a superblock write or a read repair there would hold up
 * every other request whose I/O that thread completes.  Work that waits
 * calls dev_assert_may_block(what): on such a thread it counts the
 * violation (dev_block_violations, for the tests) and logs it.
 */
extern _Thread_local bool dev_on_completion_thread;
extern _Atomic unsigned long dev_block_violations;
void dev_assert_may_block(const char *what);
const char *dev_backend_name(const struct dev_backend *be);

/*
 * Discard (TRIM): d->discard picks BLKDISCARD or a punched hole.  Probing
 * tries a no-op (BLKDISCARD of zero bytes, a hole punched at the end of
 * the image) and records the mode in d->discard; it writes nothing.
 * dev_discard runs through the backend's vtable; -EOPNOTSUPP when the
 * device or backend cannot (the caller then marks the device NONE).
 */
int dev_discard_probe(struct dev *d);
const char *dev_discard_name(int mode);	/* "blkdiscard", "punch", "unsupported" */
int dev_discard(struct dev_backend *be, struct dev *d, uint64_t off, uint64_t len);

/* Convenience single-I/O helpers built on dev_submit. */
int dev_pread(struct dev_backend *be, struct dev *d, void *buf, uint32_t len, uint64_t off);
int dev_pwrite(struct dev_backend *be, struct dev *d, const void *buf, uint32_t len, uint64_t off);
int dev_flush(struct dev_backend *be, struct dev *d);

/*
 * Fault injection.  dev_fault_create wraps @lower (which it then owns).
 * Rules match I/Os by device index, op and byte range; a matching I/O either
 * fails with rule.err (not issued), or for reads is issued and then has its
 * buffer corrupted (one bit flipped per matched block), or for writes is
 * silently dropped ("lost write": reported as success, not issued).
 * count < 0 means forever; otherwise the rule fires that many times.
 */
enum dev_fault_kind { DEV_FAULT_ERROR, DEV_FAULT_CORRUPT, DEV_FAULT_DROP };

struct dev_fault_rule {
	int dev_idx;		/* -1: any device */
	int op;			/* enum dev_op, or -1: any */
	uint64_t off, len;	/* byte range; len 0 = whole device */
	int kind;		/* enum dev_fault_kind */
	int err;		/* positive errno for DEV_FAULT_ERROR, e.g. EIO */
	int count;
};

int dev_fault_create(struct dev_backend *lower, struct dev_backend **out);
int dev_fault_add_rule(struct dev_backend *be, const struct dev_fault_rule *r);
void dev_fault_clear(struct dev_backend *be);
/*
 * Parse and add rules from a mount-option string:
 *   "dev=1,op=read,off=0,len=0,kind=error,err=5,count=-1;dev=0,..."
 * A rule "record" starts the crash recording (dev_fault_record) instead,
 * so a test sees a mount's own writes from its first.
 * Returns 0 or -EINVAL.
 */
int dev_fault_parse(struct dev_backend *be, const char *spec);

/* I/Os handed to the lower backend for device @dev_idx, by op
 * (counts[DEV_READ], counts[DEV_WRITE], counts[DEV_FLUSH]); injected errors
 * and drops never reach it and are not counted.  Lets tests see which
 * mirror served what. */
void dev_fault_counts(struct dev_backend *be, int dev_idx, uint64_t counts[3]);
/* FUA writes (dev_io.fua) done on device @dev_idx; each is also counted
 * as the write and the flush it is passed on as. */
uint64_t dev_fault_fua_writes(struct dev_backend *be, int dev_idx);
/* Discards handed to the lower backend for device @dev_idx. */
uint64_t dev_fault_discards(struct dev_backend *be, int dev_idx);

/*
 * Crash recording: while recording, every completed write (with a copy of
 * its data), every flush and every discard is appended to an in-memory journal, in
 * completion order.  A crash test replays a prefix of the journal plus any
 * subset of the writes after the last flush onto copies of the images.
 */
struct dev_fault_rec {
	uint8_t op;		/* DEV_WRITE, DEV_FLUSH or DEV_DISCARD (len bytes at off) */
	int dev_idx;
	uint64_t off;
	uint32_t len;
	void *data;		/* DEV_WRITE only; owned by the journal */
	/* DEV_WRITE with FUA: durable once journaled (records are appended
	 * when their batch completed), while the device's earlier plain
	 * writes still need a DEV_FLUSH. */
	bool fua;
};
void dev_fault_record(struct dev_backend *be, bool on);
/* Borrow the journal; valid until dev_fault_record(be, true) or destroy. */
const struct dev_fault_rec *dev_fault_journal(struct dev_backend *be, size_t *n);

#endif
