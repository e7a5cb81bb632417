// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ops: the FUSE low-level ops table.  Each handler turns one request into
 * one lib/tfs.h call and replies; it holds no storage logic.  lib returns
 * 0/count or -errno and every handler converts once: fuse_reply_err(req,
 * -ret) (reply_err below).
 *
 * Why open and create sometimes reply raw: libfuse 3.14.0 has no
 * fuse_file_info field for FOPEN_PARALLEL_DIRECT_WRITES, and without that
 * flag the kernel holds the inode lock exclusively for every direct write,
 * so writers to one file reach us one at a time however many threads we
 * run.  For direct opens (O_DIRECT, writable O_DSYNC/O_SYNC opens, every
 * open with -o writethrough, big files' writers: big_writer, and writable
 * opens on a nearly full file system: space.c) we therefore build
 * the reply ourselves from <linux/fuse.h>: a struct
 * fuse_open_out (open), or a struct fuse_entry_out followed by a struct
 * fuse_open_out (create), filled exactly as libfuse's fill_entry/fill_open
 * would, and send it with fuse_reply_buf.  Buffered opens use the normal
 * replies and stay on the page cache.  Shared mmap works on both: for
 * direct opens the INIT reply asks for FUSE_DIRECT_IO_ALLOW_MMAP
 * (fuseio.c).
 *
 * Lookup references: tfs_lookup/mknod/mkdir/symlink/link/create/readdirplus
 * add one nlookup to what they return.  When the kernel never receives the
 * reply (the request was interrupted: fuse_reply_* gives -ENOENT) it takes
 * no reference, so we give it back, as libfuse's high-level layer does.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <fuse_lowlevel.h>
#include <linux/fuse.h>

#include "daemon_i.h"

/* Attributes stay valid for tfsd_attr_timeout(): 1 s, 0 near a full
 * file system (space.c). */
#define ENTRY_TIMEOUT 1.0

static struct tfsd_file *fi_file(const struct fuse_file_info *fi)
{
	return (struct tfsd_file *)(uintptr_t)fi->fh;
}

/* With ACLs the kernel leaves the umask to us (FUSE_DONT_MASK): a default
 * ACL replaces it.  Without, it has applied it already. */
static struct tfs_cred req_cred(fuse_req_t req)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);

	return (struct tfs_cred){ .uid = c->uid, .gid = c->gid,
				  .umask = req_d(req)->acl ? c->umask : 0 };
}

/* gen: tfs_fh_gen's, so file handles (name_to_handle_at, NFS export) of
 * a file deleted in a crash do not open a later file given its number. */
static void fill_entry_param(struct tfsd *d, struct fuse_entry_param *e,
			     const struct stat *st, uint32_t gen)
{
	memset(e, 0, sizeof(*e));
	e->ino = st->st_ino;
	e->generation = gen;
	e->attr = *st;
	e->attr_timeout = tfsd_attr_timeout(d);
	e->entry_timeout = ENTRY_TIMEOUT;
	tfs_blocks_seen(d->fs, st);	/* see fsync_done */
}

/* Reply an entry that carries a fresh lookup reference. */
static void reply_entry(fuse_req_t req, const struct stat *st)
{
	struct tfs *fs = req_fs(req);	/* req is gone after the reply */
	struct fuse_entry_param e;

	fill_entry_param(req_d(req), &e, st, tfs_fh_gen(fs, st->st_ino));
	if (fuse_reply_entry(req, &e) == -ENOENT)
		tfs_forget(fs, st->st_ino, 1);
}

/* ---- open file list ---- */

void tfsd_files_init(struct tfsd *d)
{
	pthread_mutex_init(&d->files_lock, NULL);
	d->files.prev = d->files.next = &d->files;
	pthread_mutex_init(&d->slow_mu, NULL);
	pthread_cond_init(&d->slow_cv, NULL);
	pthread_mutex_init(&d->space_mu, NULL);
	tfsd_wb_init(d);
}

static struct tfsd_file *file_new(void)
{
	return calloc(1, sizeof(struct tfsd_file));
}

static bool open_is_direct(const struct tfsd *d, int flags);

static unsigned cached_slot(uint64_t ino)
{
	return (unsigned)((ino * 0x9E3779B97F4A7C15ull) >> 54) % TFSD_CACHED_SLOTS;
}

/* A direct write to @ino is in place (its range lock held or released):
 * from now on every cached open of the file drops its pages (cached_open:
 * no keep_cache), and true if a cached open is there now (the range is
 * dropped after the reply).  The flag first, then the count; a cached
 * open counts itself first, then reads the flag: one of the two sees the
 * other (seq_cst). */
bool tfsd_dio_check(struct tfsd *d, uint64_t ino)
{
	unsigned i = cached_slot(ino);

	if (!atomic_load_explicit(&d->dio_written[i], memory_order_relaxed))
		atomic_store(&d->dio_written[i], true);
	return atomic_load(&d->cached_opens[i]) != 0;
}

/* Link @df, deciding under files_lock whether it is direct: low-space
 * mode (space.c) switches on under the same lock, so an open is either
 * direct or seen by the switch. */
static void file_link(struct tfsd *d, struct tfsd_file *df, uint64_t ino, int flags)
{
	pthread_mutex_lock(&d->files_lock);
	df->ino = ino;
	df->direct = df->behind || open_is_direct(d, flags) ||
		     ((flags & O_ACCMODE) != O_RDONLY && tfsd_space_open_direct(d));
	df->cached_w = !df->direct && (flags & O_ACCMODE) != O_RDONLY;
	/* Not an opendir; an O_TMPFILE open (O_DIRECTORY is part of it) is a file's. */
	df->counted = !df->direct && (!(flags & O_DIRECTORY) || (flags & O_TMPFILE) == O_TMPFILE);
	if (df->counted)
		atomic_fetch_add(&d->cached_opens[cached_slot(ino)], 1);
	df->next = d->files.next;
	df->prev = &d->files;
	df->next->prev = df;
	d->files.next = df;
	pthread_mutex_unlock(&d->files_lock);
}

int tfsd_file_drop(struct tfsd *d, struct tfsd_file *df)
{
	int ret;

	pthread_mutex_lock(&d->files_lock);
	df->prev->next = df->next;
	df->next->prev = df->prev;
	if (df->counted)
		atomic_fetch_sub(&d->cached_opens[cached_slot(df->ino)], 1);
	pthread_mutex_unlock(&d->files_lock);
	ret = df->f ? tfs_release(df->f) : 0;
	free(df);
	return ret;
}

void tfsd_files_release_all(struct tfsd *d)
{
	unsigned n = 0;

	/* Files released behind writes that have all ended are no files
	 * the kernel left open. */
	tfsd_wb_reap(d);
	while (d->files.next != &d->files) {
		tfsd_file_drop(d, d->files.next);
		n++;
	}
	if (n)
		tlog(LOG_INFO, "released %u file(s) the kernel left open", n);
}

/* ---- init ---- */

static void want(struct fuse_conn_info *conn, unsigned cap, bool on)
{
	if (!on)
		conn->want &= ~cap;
	else if (conn->capable & cap)
		conn->want |= cap;
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct tfsd *d = userdata;

	conn->max_write = TFS_IO_MAX;
	conn->max_readahead = TFS_IO_MAX;
	/* Async direct I/O is capped by max_background (default 12).  Above
	 * what benchmarks queue (8 jobs x iodepth 64): a submitter over the cap
	 * sleeps in the kernel, and every reply then costs a wakeup.  Within
	 * the kernel's limit for unprivileged mounts (max_user_bgreq, 1638). */
	conn->max_background = 1024;
	conn->congestion_threshold = 768;

	want(conn, FUSE_CAP_ASYNC_READ, true);
	want(conn, FUSE_CAP_ASYNC_DIO, true);
	want(conn, FUSE_CAP_PARALLEL_DIROPS, true);
	want(conn, FUSE_CAP_ATOMIC_O_TRUNC, true);	/* tfs_open honours O_TRUNC */
	want(conn, FUSE_CAP_EXPORT_SUPPORT, true);
	want(conn, FUSE_CAP_CACHE_SYMLINKS, true);	/* symlinks never change */
	/* write_buf must get memory buffers: the fill callback's copy into
	 * the bounce buffer is the one copy. */
	want(conn, FUSE_CAP_SPLICE_READ, false);
	want(conn, FUSE_CAP_SPLICE_WRITE, false);
	want(conn, FUSE_CAP_SPLICE_MOVE, false);
	/* The kernel asks to clear suid/sgid with a setattr on buffered
	 * writes, fallocate, truncate and chown, which privs.c completes;
	 * direct writes: privs_write_kill. */
	want(conn, FUSE_CAP_HANDLE_KILLPRIV, false);
	/* POSIX ACLs: the kernel enforces and caches them and hands us the
	 * mode, chmod and inheritance (acl.h); the umask too, since a default
	 * ACL replaces it: both or neither. */
	if (d->acl && (conn->capable & (FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK)) !=
		      (FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK)) {
		tlog(LOG_WARNING, "kernel does not offer POSIX ACLs; mounted without (noacl)");
		d->acl = false;
		tfs_set_acl(d->fs, false);
	}
	want(conn, FUSE_CAP_POSIX_ACL, d->acl);
	want(conn, FUSE_CAP_DONT_MASK, d->acl);
	want(conn, FUSE_CAP_WRITEBACK_CACHE, d->writeback_cache);
	/* With writeback_cache the kernel trusts its own size and mtime, so
	 * auto_inval_data only costs a GETATTR before every read; and that
	 * GETATTR carries the handle, which the low-space gate (space.c)
	 * must see for writes only. */
	want(conn, FUSE_CAP_AUTO_INVAL_DATA, !d->writeback_cache);
	if (d->writeback_cache && !(conn->capable & FUSE_CAP_WRITEBACK_CACHE))
		tlog(LOG_WARNING, "kernel does not offer writeback_cache; ignored");
	tlog(LOG_DEBUG, "init: capable 0x%x want 0x%x", conn->capable, conn->want);
}

/* ---- namespace ---- */

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct stat st;
	int ret = tfs_lookup(req_fs(req), parent, name, &st);

	/* An inode the kernel dropped with writes still behind: their size
	 * and blocks.  Our lookup reference keeps it. */
	if (ret == 0 && atomic_load(&req_d(req)->wb_total)) {
		tfsd_wb_wait(req_d(req), st.st_ino, false);
		ret = tfs_getattr(req_fs(req), st.st_ino, &st);
		if (ret < 0)
			tfs_forget(req_fs(req), st.st_ino, 1);
	}
	if (ret == -ENOENT) {
		/* Names only change through this mount: cache the miss. */
		struct fuse_entry_param e = { .ino = 0, .entry_timeout = ENTRY_TIMEOUT };

		fuse_reply_entry(req, &e);
	} else if (ret < 0) {
		reply_err(req, ret);
	} else {
		reply_entry(req, &st);
	}
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	tfs_forget(req_fs(req), ino, nlookup);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	struct tfs *fs = req_fs(req);

	for (size_t i = 0; i < count; i++)
		tfs_forget(fs, forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	int ret;

	/* With a handle (fh 0 is a directory's): before a write(2) on a
	 * cached open, the low-space gate. */
	if (fi && fi->fh && tfsd_space_gate(req, ino, fi_file(fi)))
		return;
	tfsd_wb_wait(req_d(req), ino, false);	/* st_blocks */
	ret = tfs_getattr(req_fs(req), ino, &st);
	if (ret < 0) {
		reply_err(req, ret);
		return;
	}
	tfs_blocks_seen(req_fs(req), &st);	/* see fsync_done */
	fuse_reply_attr(req, &st, tfsd_attr_timeout(req_d(req)));
}

static int setattr_bits(int to_set)
{
	int t = 0;

	if (to_set & FUSE_SET_ATTR_MODE)
		t |= TFS_SET_MODE;
	if (to_set & FUSE_SET_ATTR_UID)
		t |= TFS_SET_UID;
	if (to_set & FUSE_SET_ATTR_GID)
		t |= TFS_SET_GID;
	if (to_set & FUSE_SET_ATTR_SIZE)
		t |= TFS_SET_SIZE;
	/* The kernel sends ATIME together with ATIME_NOW: NOW wins. */
	if (to_set & FUSE_SET_ATTR_ATIME_NOW)
		t |= TFS_SET_ATIME_NOW;
	else if (to_set & FUSE_SET_ATTR_ATIME)
		t |= TFS_SET_ATIME;
	if (to_set & FUSE_SET_ATTR_MTIME_NOW)
		t |= TFS_SET_MTIME_NOW;
	else if (to_set & FUSE_SET_ATTR_MTIME)
		t |= TFS_SET_MTIME;
	if (to_set & FUSE_SET_ATTR_CTIME)
		t |= TFS_SET_CTIME;
	return t;
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct tfsd *d = req_d(req);
	/* A directory handle has no tfs_file: path-based then. */
	struct tfs_file *f = fi && fi->fh ? fi_file(fi)->f : NULL;
	bool behind = tfsd_wb_busy(d, ino);
	struct stat st;
	int ret;

	/* Only a truncate waits for the file's writes behind: their publish
	 * sets a size (wbehind.c). */
	if (behind && (to_set & FUSE_SET_ATTR_SIZE)) {
		tfs_note_setattr_wait(d->fs);
		tfsd_wb_wait(d, ino, false);
		behind = false;
	}
	ret = tfs_getattr(d->fs, ino, &st);

	if (ret == 0) {
		privs_setattr(req, &st, attr, &to_set);
		ret = tfs_setattr(d->fs, ino, attr, setattr_bits(to_set), f, &st);
	}

	if (ret < 0) {
		reply_err(req, ret);
		return;
	}
	/* The kernel keeps the attributes of a truncate's reply, but drops
	 * those of the mtime updates the writeback cache sends. */
	if (to_set & FUSE_SET_ATTR_SIZE)
		tfs_blocks_seen(d->fs, &st);	/* see fsync_done */
	/* With writes behind, st_blocks is from before their publish: a
	 * stat asks again (and GETATTR waits for them). */
	fuse_reply_attr(req, &st, behind ? 0 : tfsd_attr_timeout(d));
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char buf[PATH_MAX + 1];
	ssize_t n = tfs_readlink(req_fs(req), ino, buf, sizeof(buf) - 1);

	if (n >= 0 && (size_t)n > sizeof(buf) - 1)
		n = -ENAMETOOLONG;
	if (n < 0) {
		reply_err(req, n);
		return;
	}
	buf[n] = '\0';
	fuse_reply_readlink(req, buf);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		     dev_t rdev)
{
	struct tfs_cred c = req_cred(req);
	struct stat st;
	int ret = tfs_mknod(req_fs(req), parent, name, mode, rdev, &c, &st);

	if (ret < 0)
		reply_err(req, ret);
	else
		reply_entry(req, &st);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct tfs_cred c = req_cred(req);
	struct stat st;
	int ret = tfs_mkdir(req_fs(req), parent, name, mode, &c, &st);

	if (ret < 0)
		reply_err(req, ret);
	else
		reply_entry(req, &st);
}

static void op_symlink(fuse_req_t req, const char *target, fuse_ino_t parent,
		       const char *name)
{
	struct tfs_cred c = req_cred(req);
	struct stat st;
	int ret = tfs_symlink(req_fs(req), parent, name, target, &c, &st);

	if (ret < 0)
		reply_err(req, ret);
	else
		reply_entry(req, &st);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct stat st;
	int ret;

	/* The reply carries st_blocks, which the kernel keeps: after the
	 * file's writes behind (close, then link, then stat showed 0). */
	tfsd_wb_wait(req_d(req), ino, false);
	ret = tfs_link(req_fs(req), ino, newparent, newname, &st);

	if (ret < 0)
		reply_err(req, ret);
	else
		reply_entry(req, &st);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	reply_err(req, tfs_unlink(req_fs(req), parent, name));
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	reply_err(req, tfs_rmdir(req_fs(req), parent, name));
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	struct tfs_cred c = req_cred(req);

	reply_err(req, tfs_rename_cred(req_fs(req), parent, name, newparent, newname, flags, &c));
}

/* ---- open, create, release ---- */

/* Open flags as lib should see them. */
static int open_flags(const struct tfsd *d, int flags)
{
	if (d->writeback_cache) {
		/* The page cache may read to fill pages of a write-only open,
		 * and the kernel picks append offsets itself (lib still wants
		 * to know of it: an append-only file opens for writing only
		 * with O_APPEND). */
		if ((flags & O_ACCMODE) == O_WRONLY)
			flags = (flags & ~O_ACCMODE) | O_RDWR;
		if (flags & O_APPEND)
			flags = (flags & ~O_APPEND) | TFS_O_APPEND_ASKED;
	}
	return flags;
}

/*
 * Direct opens: O_DIRECT, every open under -o writethrough, and writable
 * O_DSYNC/O_SYNC opens.  A synchronous write through the page cache costs
 * the kernel a WRITE of the page and then an FSYNC, one writer at a time
 * (inode lock); a direct one is a single WRITE we make durable before we
 * reply, with writers in parallel (FOPEN_PARALLEL_DIRECT_WRITES).  Kernel
 * 6.9+ keeps such opens coherent with cached opens and mappings of the
 * same file (fs/fuse/iomode.c); mapping a direct open needs
 * FUSE_DIRECT_IO_ALLOW_MMAP (fuseio.c), so without it these stay cached.
 */
static bool open_is_direct(const struct tfsd *d, int flags)
{
	if (d->writethrough || (flags & O_DIRECT))
		return true;
	return (flags & O_DSYNC) && (flags & O_ACCMODE) != O_RDONLY &&
	       atomic_load_explicit(&d->dio_mmap, memory_order_relaxed);
}

/*
 * A big file's writer: a writable open, without O_TRUNC or O_APPEND, of a
 * file at least -o direct_writers long (fio lays its file out, then writes
 * it; a rewrite of a large file).  Direct, so each write(2) is one WRITE instead of a
 * page-cache copy, throttled writeback (strict_limit) and a second copy,
 * and answered once lib holds the payload (wbehind.c): durability as on
 * the page cache, fsync waits.  Cached opens and maps of the file stay
 * coherent (kernel 6.9+ io modes); without ALLOW_MMAP it stays cached.
 * Not under -o writethrough, whose writes reach the devices before they
 * are answered, nor for O_APPEND: appenders to big files are mostly
 * loggers writing small records, each of which would become a round trip
 * (10,000 4 KiB appends to a 100 MiB file took 20 s direct against
 * 7-20 s cached, on a loaded machine).
 */
static bool big_writer(struct tfsd *d, fuse_ino_t ino, int flags)
{
	struct stat st;

	return d->direct_writers && !d->writethrough && (flags & O_ACCMODE) != O_RDONLY &&
	       !(flags & (O_TRUNC | O_APPEND)) &&
	       atomic_load_explicit(&d->dio_mmap, memory_order_relaxed) &&
	       tfs_getattr(d->fs, ino, &st) == 0 && (uint64_t)st.st_size >= d->direct_writers;
}

static void fill_open_out(struct fuse_open_out *o, const struct tfsd_file *df)
{
	memset(o, 0, sizeof(*o));
	o->fh = (uint64_t)(uintptr_t)df;
	o->open_flags = FOPEN_DIRECT_IO | FOPEN_PARALLEL_DIRECT_WRITES;
}

/* As libfuse's calc_timeout_sec/nsec. */
static void split_timeout(double t, uint64_t *sec, uint32_t *nsec)
{
	double f;

	if (t < 0.0)
		t = 0.0;
	*sec = (uint64_t)t;
	f = t - (double)*sec;
	*nsec = f >= 0.999999999 ? 999999999 : (uint32_t)(f * 1.0e9);
}

/* As libfuse's fill_entry + convert_stat. */
static void fill_entry_out(struct fuse_entry_out *o, const struct fuse_entry_param *e)
{
	const struct stat *st = &e->attr;

	memset(o, 0, sizeof(*o));
	o->nodeid = e->ino;
	o->generation = e->generation;
	split_timeout(e->entry_timeout, &o->entry_valid, &o->entry_valid_nsec);
	split_timeout(e->attr_timeout, &o->attr_valid, &o->attr_valid_nsec);
	o->attr.ino = st->st_ino;
	o->attr.mode = st->st_mode;
	o->attr.nlink = st->st_nlink;
	o->attr.uid = st->st_uid;
	o->attr.gid = st->st_gid;
	o->attr.rdev = st->st_rdev;
	o->attr.size = st->st_size;
	o->attr.blksize = st->st_blksize;
	o->attr.blocks = st->st_blocks;
	o->attr.atime = st->st_atim.tv_sec;
	o->attr.mtime = st->st_mtim.tv_sec;
	o->attr.ctime = st->st_ctim.tv_sec;
	o->attr.atimensec = st->st_atim.tv_nsec;
	o->attr.mtimensec = st->st_mtim.tv_nsec;
	o->attr.ctimensec = st->st_ctim.tv_nsec;
}

/*
 * Readahead: the kernel offers at INIT its bdi's window, 128 KiB unless
 * someone changed it, and the INIT reply can only lower it, so a cold
 * sequential read reached us as 128 KiB READs, eight round trips per MiB.
 * Raised once to TFSD_READAHEAD through sysfs: after INIT, which would
 * clamp it again, and before the first cached open's reply, since the
 * kernel copies the bdi's window into each open file.  Needs root; without
 * it (or without sysfs) the default stays.
 *
 * Four READs of TFS_IO_MAX (the largest we take) per window, not one: the
 * kernel sends a window's READs together, so with a window of one READ a
 * cold sequential reader had a single READ in flight and both mirrors sat
 * idle while the reply went back and the next READ came (1 MiB reads of a
 * cold 1 GiB file, 4 MiB window against 1 MiB on one mount, farm-bench
 * pairs: 0.79x and 0.83x the time).  It costs up to four bounce buffers per
 * sequential reader while its READs are in flight.
 */
#define TFSD_READAHEAD (4u * TFS_IO_MAX)

static void raise_readahead(struct tfsd *d)
{
	char path[sizeof(d->bdi_max_bytes) + 16], val[16];
	const char *slash = strrchr(d->bdi_max_bytes, '/');
	int fd, len;

	if (atomic_exchange(&d->ra_raised, true) || !slash)
		return;
	snprintf(path, sizeof(path), "%.*sread_ahead_kb",
		 (int)(slash + 1 - d->bdi_max_bytes), d->bdi_max_bytes);
	len = snprintf(val, sizeof(val), "%u\n", TFSD_READAHEAD / 1024);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, val, (size_t)len) != len)
		tlog(LOG_DEBUG, "readahead: cannot raise %s: %s", path, strerror(errno));
	if (fd >= 0)
		close(fd);
}

/* For a cached open.  keep_cache: what the page cache holds of this file
 * is what we hold, since every change to its data goes through this
 * kernel mount (writes, truncate, fallocate and copy_file_range drop or
 * update the pages they touch, direct opens' writes included:
 * fs/fuse/iomode.c), and a scrub or rebuild rewrites only verified
 * copies.  Without it every open(2) drops the file's pages, and a re-read
 * of a cached file went through us again. */
static void cached_open(struct tfsd *d, struct tfsd_file *df, struct fuse_file_info *fi)
{
	raise_readahead(d);
	fi->fh = (uint64_t)(uintptr_t)df;
	fi->direct_io = 0;
	/* Not for a file that has had direct writes since mount: one may have
	 * left stale pages behind (tfsd_dio_check). */
	fi->keep_cache = !atomic_load(&d->dio_written[cached_slot(df->ino)]);
}

/* Reply to open; 0 or the reply's -errno. */
static int reply_open(fuse_req_t req, struct tfsd_file *df, struct fuse_file_info *fi)
{
	if (df->direct) {
		struct fuse_open_out o;

		fill_open_out(&o, df);
		return fuse_reply_buf(req, (const char *)&o, sizeof(o));
	}
	cached_open(req_d(req), df, fi);
	return fuse_reply_open(req, fi);
}


static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct tfsd *d = req_d(req);
	struct tfsd_file *df = file_new();
	int ret;

	if (!df) {
		reply_err(req, -ENOMEM);
		return;
	}
	tfsd_space_check(d);	/* decides whether this open is direct */
	if (fi->flags & O_TRUNC)
		tfsd_wb_wait(d, ino, false);	/* truncate after them */
	ret = tfs_open(d->fs, ino, open_flags(d, fi->flags), &df->f);
	/* Under atomic_o_trunc the kernel skips its truncate setattr, and
	 * with it the suid/sgid clearing do_truncate asks for. */
	if (ret == 0 && (fi->flags & O_TRUNC)) {
		ret = privs_write_kill(req, ino);
		if (ret < 0)
			tfs_release(df->f);
	}
	if (ret < 0) {
		free(df);
		reply_err(req, ret);
		return;
	}
	df->behind = big_writer(d, ino, fi->flags);
	/* Linked before the reply: the release may arrive at once. */
	file_link(d, df, ino, open_flags(d, fi->flags));
	if (reply_open(req, df, fi) == -ENOENT)
		tfsd_file_drop(d, df);	/* the kernel will send no release */
}

/* Reply to create; 0 or the reply's -errno. */
static int reply_create(fuse_req_t req, struct tfsd *d, const struct stat *st,
			struct tfsd_file *df, struct fuse_file_info *fi)
{
	struct fuse_entry_param e;

	fill_entry_param(d, &e, st, tfs_fh_gen(d->fs, st->st_ino));
	if (df->direct) {
		struct {
			struct fuse_entry_out entry;
			struct fuse_open_out open;
		} o;

		/* The kernel reads the two back to back. */
		_Static_assert(sizeof(o) == sizeof(o.entry) + sizeof(o.open),
			       "padding between fuse_entry_out and fuse_open_out");

		fill_entry_out(&o.entry, &e);
		fill_open_out(&o.open, df);
		return fuse_reply_buf(req, (const char *)&o, sizeof(o));
	}
	cached_open(d, df, fi);
	return fuse_reply_create(req, &e, fi);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct tfsd *d = req_d(req);
	struct tfs_cred c = req_cred(req);
	struct tfsd_file *df = file_new();
	struct stat st;
	int ret;

	if (!df) {
		reply_err(req, -ENOMEM);
		return;
	}
	tfsd_space_check(d);
	if (tfsd_req_tmpfile() && !strcmp(name, "/"))	/* O_TMPFILE (fuseio.c) */
		ret = tfs_tmpfile(d->fs, parent, mode, open_flags(d, fi->flags), &c, &st, &df->f);
	else
		ret = tfs_create(d->fs, parent, name, mode, open_flags(d, fi->flags), &c,
				 &st, &df->f);
	if (ret < 0) {
		free(df);
		reply_err(req, ret);
		return;
	}
	file_link(d, df, st.st_ino, open_flags(d, fi->flags));
	/* tfs_create added the entry's lookup reference, which the reply
	 * hands to the kernel (raw or not). */
	if (reply_create(req, d, &st, df, fi) == -ENOENT) {
		tfsd_file_drop(d, df);
		tfs_forget(d->fs, st.st_ino, 1);
	}
}

/*
 * No open file is released under a write behind, but RELEASE does not
 * wait for them either: it ended tar's every file (the writeback of its
 * data goes behind at the utimens, the close comes right after), and a
 * ring queue's one thread waiting there held up the next file's
 * requests.  The file is dropped once its inode's writes have ended.
 */
static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct tfsd *d = req_d(req);
	struct tfsd_file *df = fi_file(fi);

	tfsd_space_release(d, df);
	if (tfsd_wb_release(d, ino, df)) {
		tfs_note_release_deferred(d->fs);
		reply_err(req, 0);
		return;
	}
	reply_err(req, tfsd_file_drop(d, df));
}

struct fsync_ctx {
	fuse_req_t req;
	fuse_ino_t ino;
};

static void fsync_done(void *arg, int ret)
{
	struct fsync_ctx *c = arg;
	fuse_req_t req = c->req;
	fuse_ino_t ino = c->ino;
	struct tfsd *d = req_d(req);

	free(c);

	/* With the writeback cache the kernel keeps no st_blocks of its own
	 * and, unlike on flush, does not drop its cached attributes after an
	 * fsync: stat would show the blocks from before the written-back
	 * data for up to the attribute timeout.  Attributes only (negative
	 * offset), and only when the blocks changed since the kernel was last
	 * told: dropping them costs the next write(2) a GETATTR and, since
	 * refreshed attributes clear S_NOSEC, a GETXATTR of
	 * security.capability (SQLite's WAL paid both on every commit). */
	if (ret == 0 && d->writeback_cache && tfs_blocks_stale(d->fs, ino))
		fuse_lowlevel_notify_inval_inode(d->se, ino, -1, 0);
	reply_err(req, ret);
}

/* Replied by the group-commit thread: concurrent fsyncs share one log
 * write without holding a worker each. */
static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct fsync_ctx *c;
	/* The writes behind first: on the mirrors and published before the
	 * commit, and one that failed fails this fsync. */
	int err = tfsd_wb_wait(req_d(req), ino, true);

	if (err < 0) {
		reply_err(req, err);
		return;
	}
	c = malloc(sizeof(*c));
	if (!c) {
		reply_err(req, -ENOMEM);
		return;
	}
	c->req = req;
	c->ino = ino;
	if (fi && fi->fh && fi_file(fi)->f)
		tfs_file_synced(fi_file(fi)->f);
	tfs_fsync_async(req_fs(req), ino, datasync != 0, fsync_done, c);
}

/* ---- data ---- */

static void read_done(void *arg, ssize_t n, void *buf, size_t data_off)
{
	fuse_req_t req = arg;
	struct tfs *fs = req_fs(req);	/* req is gone after the reply */

	if (n < 0) {
		reply_err(req, n);
		return;
	}
	fuse_reply_buf(req, n ? (const char *)buf + data_off : NULL, (size_t)n);
	if (buf)
		tfs_buf_put(fs, buf);
}

/* Replied from the I/O completion, like writes. */
static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	/* A write behind holds its range lock, but lib checks the size
	 * first, and an extending write publishes the size with it. */
	tfsd_wb_wait(req_d(req), ino, false);
	tfs_read_async(fi_file(fi)->f, off, size, read_done, req);
}

/* tfs_fill_fn: the one copy, from libfuse's request buffer into the bounce
 * buffer.  Consumes the source bufvec, so lib may fill in pieces. */
static int write_fill(void *ctx, void *dst, size_t len)
{
	struct fuse_bufvec *src = ctx;
	struct fuse_bufvec dbuf = FUSE_BUFVEC_INIT(len);
	ssize_t n;

	dbuf.buf[0].mem = dst;
	n = fuse_buf_copy(&dbuf, src, 0);
	if (n < 0)
		return (int)n;
	return (size_t)n == len ? 0 : -EIO;
}

static void write_done(void *arg, ssize_t n)
{
	fuse_req_t req = arg;

	if (n < 0)
		reply_err(req, n);
	else
		fuse_reply_write(req, (size_t)n);
}

/*
 * A direct write, answered from its completion.  The kernel drops the
 * written range from the page cache when it sends a direct write, but for
 * an asynchronous one (io_submit, io_uring) not after it: a cached
 * reader's READ served before the write took its range puts the old data
 * back in the page cache, where keep_cache keeps it, and a later read(2)
 * returns it (xfstests generic/451).  So once the write is in place,
 * tfsd_dio_check marks the file so that its cached opens drop its pages
 * (no keep_cache), and if a cached open is there now, the range is
 * dropped right after the reply, on a thread of its own (slow.c).
 * @admitted: a write admitted in low-space mode, which holds its length in
 * space.c's pending count until it completes.
 */
struct direct_write {
	fuse_req_t req;
	fuse_ino_t ino;
	off_t off;
	uint64_t len;
	bool admitted;
	struct tfsd_space_hold hold;
};

static void direct_write_done(void *arg, ssize_t n)
{
	struct direct_write *w = arg;
	struct tfsd *d = req_d(w->req);

	if (w->admitted)
		tfsd_space_done(d, &w->hold);
	if (n > 0 && tfsd_dio_check(d, w->ino))
		tfsd_reply_write_inval(w->req, w->ino, w->off, (size_t)n);
	else
		write_done(w->req, n);
	free(w);
}

static void op_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in, off_t off,
			 struct fuse_file_info *fi)
{
	struct tfsd *d = req_d(req);
	struct tfsd_file *df = fi_file(fi);
	size_t len = fuse_buf_size(in);
	struct direct_write *w = NULL;
	struct tfsd_space_hold hold;
	bool admitted = false;
	ssize_t n = 0;

	tfsd_space_check(d);
	/* A write from the page cache (writeback) stores what the kernel
	 * has acknowledged already: never refused here, also when it comes
	 * with a direct open's handle (the kernel writes a file's pages back
	 * through any of its writable opens).  A direct one is the caller's
	 * own write(2) and may still get ENOSPC. */
	if (df->direct) {
		/* 0 admitted, 1 not low or writeback, -ENOSPC */
		n = fi->writepage ? 1 : tfsd_space_admit(d, df->f, (uint64_t)off, len, false, &hold);
		admitted = n == 0;
		if (n > 0)
			n = 0;
		if (n == 0)
			n = privs_direct_write_kill_caps(req_fs(req), ino);
	}
	if (n == 0)
		n = privs_write_kill(req, ino);
	if (n == 0 && !admitted &&
	    tfsd_write_behind(req, ino, df, write_fill, in, off, len, fi->flags))
		return;
	/* Only a write answered from its completion carries a direct_write. */
	if (n == 0 && df->direct && !(w = malloc(sizeof(*w))))
		n = -ENOMEM;
	if (n < 0) {
		if (admitted)
			tfsd_space_done(d, &hold);
		reply_err(req, n);
		return;
	}
	/* Replied from the I/O completion: this worker goes back to the
	 * next request instead of sleeping until the mirrors have the data.
	 * fi->flags carries O_DSYNC/O_SYNC (also from RWF_DSYNC/RWF_SYNC). */
	if (w) {
		*w = (struct direct_write){ .req = req, .ino = ino, .off = off, .len = len,
					    .admitted = admitted, .hold = hold };
		tfs_write_async(df->f, off, len, write_fill, in, fi->flags, direct_write_done, w);
	} else {
		tfs_write_async(df->f, off, len, write_fill, in, fi->flags, write_done, req);
	}
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	struct tfsd *d = req_d(req);
	struct tfs_file *f = fi_file(fi)->f;
	struct tfsd_space_hold hold;
	int ret = 1, err;

	tfsd_space_check(d);
	/* Allocating modes take space the low-space gate promised away: the
	 * whole of it must fit (ENOSPC up front, not half way); zero range
	 * punches what is there (freed only once durable) and allocates the
	 * whole range again, so all of it counts. */
	if (!(mode & FALLOC_FL_PUNCH_HOLE) && len > 0)
		ret = tfsd_space_admit(d, (mode & FALLOC_FL_ZERO_RANGE) ? NULL : f, (uint64_t)off,
				       (uint64_t)len, true, &hold);
	if (ret < 0) {
		reply_err(req, ret);
		return;
	}
	if (ret == 0)
		tfsd_space_done(d, &hold);	/* the pieces are admitted each */
	tfsd_wb_wait(d, ino, false);
	/* Under FUSE_HANDLE_KILLPRIV_V2 no SETATTR came first (privs.c). */
	err = privs_write_kill(req, ino);
	if (err < 0)
		reply_err(req, err);
	else if (ret == 0 && off <= INT64_MAX - len)
		reply_err(req, tfsd_space_fallocate(d, f, mode, off, len));
	else
		reply_err(req, tfs_fallocate(f, mode, off, len));
}

static void op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
			       struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
			       struct fuse_file_info *fi_out, size_t len, int flags)
{
	ssize_t n;

	if (flags) {
		reply_err(req, -EINVAL);
		return;
	}
	tfsd_wb_wait(req_d(req), ino_in, false);
	tfsd_wb_wait(req_d(req), ino_out, false);
	n = tfs_copy_range(fi_file(fi_in)->f, off_in, fi_file(fi_out)->f, off_out, len);
	if (n < 0)
		reply_err(req, n);
	else
		fuse_reply_write(req, (size_t)n);
}

/* ---- directories ---- */

/*
 * A directory handle remembers where its readdir pass ends: entries get
 * new, larger offsets when created or renamed, so a listing that went on
 * to the current end would meet a renamed entry again (a reader of a
 * directory being renamed in saw three times its size).  tmpfs stops at
 * the offset the directory had when it was opened; so do we.
 */
static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct tfsd *d = req_d(req);
	struct tfsd_file *df = file_new();
	uint64_t end;
	int ret;

	if (!df) {
		reply_err(req, -ENOMEM);
		return;
	}
	ret = tfs_readdir_end(d->fs, ino, &end);
	if (ret < 0) {
		free(df);
		reply_err(req, ret);
		return;
	}
	atomic_store(&df->dir_end, end);
	file_link(d, df, ino, O_RDONLY | O_DIRECTORY);
	fi->fh = (uint64_t)(uintptr_t)df;
	if (fuse_reply_open(req, fi) == -ENOENT)
		tfsd_file_drop(d, df);
}

struct dir_ctx {
	fuse_req_t req;
	struct tfs *fs;
	char *buf;
	size_t size, pos;
	bool plus;
	bool wb_busy;		/* plus: writes were behind when it began */
	uint64_t *inos;		/* plus: references handed out, in order */
	size_t ninos;
};

static bool is_dot(const char *name)
{
	return name[0] == '.' && (!name[1] || (name[1] == '.' && !name[2]));
}

/* tfs_dirfill_fn: nonzero when the entry does not fit (not taken). */
static int dir_fill(void *ctx, const char *name, const struct stat *st, uint64_t next_off)
{
	struct dir_ctx *c = ctx;
	size_t rem = c->size - c->pos, n;
	/* An inode that could not be read (tfs_dirfill_fn): the name
	 * without attributes, node id 0, so the kernel takes no reference
	 * and a lookup reports the error. */
	bool bare = c->plus && !is_dot(name) && st->st_nlink == 0;

	if (bare) {
		struct fuse_entry_param e = { .attr.st_ino = st->st_ino,
					      .attr.st_mode = st->st_mode };

		n = fuse_add_direntry_plus(c->req, c->buf + c->pos, rem, name, &e,
					   (off_t)next_off);
	} else if (c->plus) {
		struct fuse_entry_param e;

		/* The kernel takes nothing from "." and ".." (and asking for
		 * the parent's generation here would lock child to parent). */
		fill_entry_param(req_d(c->req), &e, st,
				 is_dot(name) ? 0 : tfs_fh_gen(c->fs, st->st_ino));
		/* A child's st_blocks may lag a write behind (waiting here
		 * would wait under the directory's lock): the kernel keeps
		 * none of these attributes and asks GETATTR, which waits. */
		if (c->wb_busy)
			e.attr_timeout = 0;
		n = fuse_add_direntry_plus(c->req, c->buf + c->pos, rem, name, &e,
					   (off_t)next_off);
	} else {
		n = fuse_add_direntry(c->req, c->buf + c->pos, rem, name, st, (off_t)next_off);
	}
	if (n > rem)
		return 1;
	c->pos += n;
	/* Even the smallest plus entry is larger than 8 bytes, so size/8
	 * slots suffice.  The kernel takes no reference for "." and "..". */
	if (c->plus && !is_dot(name) && !bare)
		c->inos[c->ninos++] = st->st_ino;
	return 0;
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus,
		       struct fuse_file_info *fi)
{
	struct tfs *fs = req_fs(req);
	struct tfsd_file *df = fi_file(fi);
	struct dir_ctx c = { .req = req, .fs = fs, .size = size, .plus = plus,
			     .wb_busy = plus && atomic_load(&req_d(req)->wb_total) };
	uint64_t end = UINT64_MAX;
	int ret;

	if (df) {
		/* Offset 0 starts a new pass (rewinddir): it sees what the
		 * directory holds now. */
		if (off == 0 && tfs_readdir_end(fs, ino, &end) == 0)
			atomic_store(&df->dir_end, end);
		end = atomic_load(&df->dir_end);
	}
	ret = -ENOMEM;
	c.buf = malloc(size);
	if (plus)
		c.inos = malloc((size / 8 + 1) * sizeof(*c.inos));
	if (!c.buf || (plus && !c.inos))
		goto out_err;
	ret = tfs_readdir_until(fs, ino, (uint64_t)off, end, plus, dir_fill, &c);
	/* Entries taken hold references: send them even if a later one
	 * failed; the error comes back on the next call. */
	if (ret < 0 && c.pos == 0)
		goto out_err;
	if (fuse_reply_buf(req, c.buf, c.pos) == -ENOENT)
		for (size_t i = 0; i < c.ninos; i++)
			tfs_forget(fs, c.inos[i], 1);
	goto out;
out_err:
	reply_err(req, ret);
out:
	free(c.inos);
	free(c.buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, false, fi);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, true, fi);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (fi->fh)
		tfsd_file_drop(req_d(req), fi_file(fi));
	fuse_reply_err(req, 0);
}

static void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
			struct fuse_file_info *fi)
{
	/* twinfs-ctl sync: everything written so far, also what went behind. */
	tfsd_wb_wait_all(req_d(req));
	reply_err(req, tfs_fsync(req_fs(req), ino, datasync != 0));
}

const struct fuse_lowlevel_ops tfsd_ops = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.readlink = op_readlink,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.unlink = op_unlink,
	.rmdir = op_rmdir,
	.symlink = op_symlink,
	.rename = op_rename,
	.link = op_link,
	.open = op_open,
	.create = op_create,
	.read = op_read,
	.write_buf = op_write_buf,
	/* No .flush: libfuse answers the first FLUSH with ENOSYS and the
	 * kernel sends no more (fc->no_flush), one round trip less per
	 * close(2).  The kernel still writes dirty pages back and reports
	 * their errors at close (fuse_flush does that before it looks at
	 * no_flush); the FLUSH itself had nothing to do here: every write
	 * reached lib before its reply, durability is fsync's, and POSIX
	 * locks are the kernel's own (no .getlk/.setlk). */
	.release = op_release,
	.fsync = op_fsync,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.releasedir = op_releasedir,
	.fsyncdir = op_fsyncdir,
	.statfs = tfsd_op_statfs,	/* xops.c */
	.setxattr = tfsd_op_setxattr,	/* xops.c */
	.getxattr = tfsd_op_getxattr,	/* xops.c */
	.listxattr = tfsd_op_listxattr,	/* xops.c */
	.removexattr = tfsd_op_removexattr,	/* xops.c */
	.access = tfsd_op_access,	/* xops.c */
	.fallocate = op_fallocate,
	.lseek = tfsd_op_lseek,	/* slow.c */
	.copy_file_range = op_copy_file_range,
	.ioctl = tfsd_ioctl,		/* ctl.c: the control channel */
};
