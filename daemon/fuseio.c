// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuseio: the daemon's own read and writev on /dev/fuse (libfuse's
 * fuse_session_custom_io), there to ask the kernel in INIT for two flags
 * libfuse 3.14 cannot name: FUSE_DIRECT_IO_ALLOW_MMAP and
 * FUSE_HANDLE_KILLPRIV_V2.
 *
 * Without that INIT flag the kernel refuses shared mmap (ENODEV) of every
 * file opened with FOPEN_DIRECT_IO: O_DIRECT opens, and every open under
 * -o writethrough, where SQLite's WAL mode (its -shm file is a shared
 * map) then failed with "disk I/O error".  With it the kernel maps such
 * files through the page cache and keeps the two coherent (the file
 * switches to cached I/O mode while mapped: fs/fuse/iomode.c).
 *
 * FUSE_HANDLE_KILLPRIV_V2 makes the mount SB_NOSEC: without it every
 * write(2) on the page cache first asked us for security.capability
 * (file_remove_privs; a GETXATTR per 128 KiB of a sequential write), and
 * every chown sent a GETATTR before its SETATTR.  In return the kernel
 * sends no SETATTR to clear suid/sgid: the daemon clears them itself on
 * every WRITE, truncate, fallocate and open(O_TRUNC) by a user without
 * CAP_FSETID, and on chown (privs.c, privs_write_kill); who lacks
 * CAP_FSETID the raw WRITE and OPEN say (tfsd_note_request), flags
 * libfuse 3.14 does not pass on.  -o nokillpriv_v2 does not ask.  The
 * kernel sends buffered writes to such files through to us (not the
 * writeback cache), from the writer.
 *
 * How: read() notes the INIT request's unique id and which of the flags
 * the kernel offers (ALLOW_MMAP in flags2, under FUSE_INIT_EXT);
 * writev() adds them to libfuse's reply to that request and sends a copy.  Every other message
 * passes through unchanged (or, with -o uring, a reply to a request that
 * came over the ring goes to furing.c), with read(2) and writev(2) as libfuse would
 * call them (it already reads without splice: ops.c turns splice off, the
 * write path wants memory buffers for its one copy).
 *
 * The reader token (-o readtoken, off by default): one worker at a time
 * reads /dev/fuse.  Each worker
 * reads its own clone of the fd, but all clones share the connection's
 * one input queue, which wakes its longest-sleeping reader for each
 * request: at 4 KiB O_DIRECT reads every worker in turn slept and was
 * woken, 0.3-0.7 context switches and 3.5-5 us of worker CPU per read.
 * A READ only queues device I/O (answered from lib's completion thread),
 * so its worker keeps the token and reads the next request itself; any
 * other request, which may wait, hands the token on before it is
 * served, and so does a READ that is about to wait (tfs_set_block_hook:
 * a range lock, a bounce buffer, a synchronous device read, a write
 * behind), so a waiting request never keeps the others from being read.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include <linux/fuse.h>

#include "daemon_i.h"

/* INIT flag bit 36 (flags2 bit 4), protocol 7.39; the system's
 * <linux/fuse.h> may predate it. */
#define TFSD_DIRECT_IO_ALLOW_MMAP_FLAGS2 (1u << (36 - 32))

static _Thread_local int req_kill = -1;

int tfsd_req_kill(void)
{
	return req_kill;
}

/*
 * The kernel decides with the writer's own capabilities (fs/fuse/file.c:
 * !capable(CAP_FSETID)), which the daemon cannot see: root without
 * CAP_FSETID (a container that dropped it) must lose suid, a user granted
 * it must not.  WRITE carries the flag from 7.33 on, for direct writes
 * always and for page-cache writes under FUSE_HANDLE_KILLPRIV_V2 (the
 * writeback cache's WRITEs, from no writer, never); OPEN with O_TRUNC
 * only under FUSE_HANDLE_KILLPRIV_V2.
 */
static _Thread_local bool req_tmpfile;

bool tfsd_req_tmpfile(void)
{
	return req_tmpfile;
}

/*
 * O_TMPFILE arrives as FUSE_TMPFILE, which libfuse 3.14 does not know (it
 * would answer ENOSYS, and the kernel then EOPNOTSUPP for good).  Its body
 * is CREATE's (fuse_create_in, then the name, "/" for a tmpfile: the
 * kernel's name of the unnamed dentry, never a real name) and so is its
 * reply, so it goes to libfuse as a CREATE and op_create, told by this
 * thread's flag and the name, makes a file without a name.
 */
static void note_tmpfile(struct fuse_in_header *in, size_t len)
{
	const char *name = (const char *)(in + 1) + sizeof(struct fuse_create_in);

	req_tmpfile = false;
	if (in->opcode != FUSE_TMPFILE)
		return;
	if (len >= sizeof(*in) + sizeof(struct fuse_create_in) + 2 &&
	    name[0] == '/' && name[1] == '\0') {
		in->opcode = FUSE_CREATE;
		req_tmpfile = true;
	}
}

void tfsd_note_request(struct tfsd *d, void *buf, size_t len)
{
	struct fuse_in_header *in = buf;
	const void *arg = in + 1;

	req_kill = -1;
	/* Files released behind writes that have ended (wbehind.c). */
	tfsd_wb_reap(d);
	if (len < sizeof(*in))
		return;
	note_tmpfile(in, len);
	if (in->opcode == FUSE_WRITE && d->init_kill_flags &&
	    len >= sizeof(*in) + sizeof(struct fuse_write_in))
		req_kill = !!(((const struct fuse_write_in *)arg)->write_flags &
			      FUSE_WRITE_KILL_SUIDGID);
	else if (in->opcode == FUSE_OPEN && atomic_load(&d->killpriv_v2) &&
		 len >= sizeof(*in) + sizeof(struct fuse_open_in))
		req_kill = !!(((const struct fuse_open_in *)arg)->open_flags &
			      FUSE_OPEN_KILL_SUIDGID);
}

static _Thread_local bool rd_held;	/* this worker holds d->rd_tok */
static struct tfsd *rd_d;		/* the session's, for the lib hook */

/* Hand the reader token on (a no-op unless this worker holds it). */
void tfsd_reader_yield(struct tfsd *d)
{
	if (!rd_held)
		return;
	rd_held = false;
	sem_post(&d->rd_tok);
}

/* tfs_set_block_hook: lib is about to make this thread wait. */
static void reader_block_hook(void)
{
	tfsd_reader_yield(rd_d);
}

static ssize_t io_read(int fd, void *buf, size_t len, void *userdata)
{
	struct tfsd *d = userdata;
	const struct fuse_in_header *in = buf;
	const struct fuse_init_in *init = (const void *)(in + 1);
	ssize_t n;

	/* sem_wait is a cancellation point that holds no lock: libfuse
	 * cancels its workers here at exit. */
	if (d->rd_tok_on && !rd_held) {
		while (sem_wait(&d->rd_tok) < 0)
			;
		rd_held = true;
	}
	n = read(fd, buf, len);
	/* Any request but a READ may wait; so may tfsd_note_request when it
	 * has write-behind jobs to reap (a release it finishes may delete an
	 * unlinked file: ns_lock, log space). */
	if (n < (ssize_t)sizeof(*in) || in->opcode != FUSE_READ ||
	    atomic_load_explicit(&d->wb_reap_n, memory_order_relaxed))
		tfsd_reader_yield(d);
	if (n > 0)
		tfsd_note_request(d, buf, (size_t)n);
	/* One INIT per connection, before any other request. */
	if (n < (ssize_t)sizeof(*in) ||
	    atomic_load_explicit(&d->init_done, memory_order_relaxed) ||
	    in->opcode != FUSE_INIT)
		return n;
	atomic_store(&d->init_done, true);
	if (n < (ssize_t)(sizeof(*in) + offsetof(struct fuse_init_in, unused)) ||
	    init->major != FUSE_KERNEL_VERSION)
		return n;
	d->init_mmap = (init->flags & FUSE_INIT_EXT) &&
		       (init->flags2 & TFSD_DIRECT_IO_ALLOW_MMAP_FLAGS2);
	d->init_killpriv = !d->no_killpriv && (init->flags & FUSE_HANDLE_KILLPRIV_V2);
	d->init_kill_flags = init->minor >= 33;
	if (!d->init_mmap)
		tlog(LOG_WARNING, "the kernel does not offer FUSE_DIRECT_IO_ALLOW_MMAP: shared "
		     "mmap of files opened O_DIRECT, and of every file with -o writethrough, "
		     "fails with ENODEV");
	atomic_store(&d->init_unique, in->unique);
	return n;
}

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	struct tfsd *d = userdata;
	/* Acquire: init_mmap and init_killpriv were written before it. */
	uint64_t unique = atomic_load_explicit(&d->init_unique, memory_order_acquire);
	const struct fuse_out_header *out = iov[0].iov_base;
	struct fuse_init_out init;
	struct iovec v[2];
	ssize_t n;

	if (tfsd_uring_reply(d, iov, count, &n))
		return n;
	if (!unique || count != 2 || iov[0].iov_len != sizeof(*out) || out->unique != unique)
		return writev(fd, iov, count);
	atomic_store(&d->init_unique, 0);
	/* libfuse 3.14 replies the whole struct (protocol 7.38) and sets
	 * FUSE_INIT_EXT itself when the kernel offered it. */
	if (out->error || iov[1].iov_len != sizeof(init))
		return writev(fd, iov, count);
	memcpy(&init, iov[1].iov_base, sizeof(init));
	if (d->init_mmap) {
		init.flags |= FUSE_INIT_EXT;
		init.flags2 |= TFSD_DIRECT_IO_ALLOW_MMAP_FLAGS2;
	}
	/* Instead of v1 (which the kernel would then ignore); ops.c never
	 * asks libfuse for v1. */
	if (d->init_killpriv)
		init.flags = (init.flags & ~FUSE_HANDLE_KILLPRIV) | FUSE_HANDLE_KILLPRIV_V2;
	v[0] = iov[0];
	v[1] = (struct iovec){ .iov_base = &init, .iov_len = sizeof(init) };
	n = writev(fd, v, 2);
	if (n >= 0) {
		atomic_store(&d->dio_mmap, d->init_mmap);
		atomic_store(&d->killpriv_v2, d->init_killpriv);
		tlog(LOG_DEBUG, "init: DIRECT_IO_ALLOW_MMAP %s, HANDLE_KILLPRIV_V2 %s",
		     d->init_mmap ? "on" : "off", d->init_killpriv ? "on" : "off");
		/* The kernel takes ring entries only once INIT is done. */
		if (d->uring)
			tfsd_uring_start(d, fd, &init);
	}
	return n;
}

int tfsd_io_install(struct tfsd *d, struct fuse_session *se)
{
	static const struct fuse_custom_io io = { .read = io_read, .writev = io_writev };

	if (sem_init(&d->rd_tok, 0, 1) < 0)
		return -errno;
	d->rd_tok_on = !d->no_readtoken;
	rd_d = d;
	/* Off (the default), lib's waits call no hook at all. */
	if (d->rd_tok_on)
		tfs_set_block_hook(reader_block_hook);
	return fuse_session_custom_io(se, &io, fuse_session_fd(se));
}
