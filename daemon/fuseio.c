// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuseio: the daemon's own read and writev on /dev/fuse (libfuse's
 * fuse_session_custom_io), there for one thing: to ask the kernel for
 * FUSE_DIRECT_IO_ALLOW_MMAP, which libfuse 3.14 cannot name.
 *
 * Without that INIT flag the kernel refuses shared mmap (ENODEV) of every
 * file opened with FOPEN_DIRECT_IO: O_DIRECT opens, and every open under
 * -o writethrough, where SQLite's WAL mode (its -shm file is a shared
 * map) then failed with "disk I/O error".  With it the kernel maps such
 * files through the page cache and keeps the two coherent (the file
 * switches to cached I/O mode while mapped: fs/fuse/iomode.c).
 *
 * How: read() notes the INIT request's unique id when the kernel offers
 * the flag (flags2, under FUSE_INIT_EXT); writev() adds the flag to
 * libfuse's reply to that request and sends a copy.  Every other message
 * passes through unchanged, with read(2) and writev(2) as libfuse would
 * call them (it already reads without splice: ops.c turns splice off, the
 * write path wants memory buffers for its one copy).
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

static ssize_t io_read(int fd, void *buf, size_t len, void *userdata)
{
	struct tfsd *d = userdata;
	ssize_t n = read(fd, buf, len);
	const struct fuse_in_header *in = buf;
	const struct fuse_init_in *init = (const void *)(in + 1);

	/* One INIT per connection, before any other request. */
	if (n < (ssize_t)sizeof(*in) ||
	    atomic_load_explicit(&d->init_done, memory_order_relaxed) ||
	    in->opcode != FUSE_INIT)
		return n;
	atomic_store(&d->init_done, true);
	if (n >= (ssize_t)(sizeof(*in) + offsetof(struct fuse_init_in, unused)) &&
	    init->major == FUSE_KERNEL_VERSION && (init->flags & FUSE_INIT_EXT) &&
	    (init->flags2 & TFSD_DIRECT_IO_ALLOW_MMAP_FLAGS2))
		atomic_store(&d->init_unique, in->unique);
	else
		tlog(LOG_WARNING, "the kernel does not offer FUSE_DIRECT_IO_ALLOW_MMAP: shared "
		     "mmap of files opened O_DIRECT, and of every file with -o writethrough, "
		     "fails with ENODEV");
	return n;
}

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	struct tfsd *d = userdata;
	uint64_t unique = atomic_load_explicit(&d->init_unique, memory_order_relaxed);
	const struct fuse_out_header *out = iov[0].iov_base;
	struct fuse_init_out init;
	struct iovec v[2];

	if (!unique || count != 2 || iov[0].iov_len != sizeof(*out) || out->unique != unique)
		return writev(fd, iov, count);
	atomic_store(&d->init_unique, 0);
	/* libfuse 3.14 replies the whole struct (protocol 7.38) and sets
	 * FUSE_INIT_EXT itself when the kernel offered it. */
	if (out->error || iov[1].iov_len != sizeof(init))
		return writev(fd, iov, count);
	memcpy(&init, iov[1].iov_base, sizeof(init));
	init.flags |= FUSE_INIT_EXT;
	init.flags2 |= TFSD_DIRECT_IO_ALLOW_MMAP_FLAGS2;
	v[0] = iov[0];
	v[1] = (struct iovec){ .iov_base = &init, .iov_len = sizeof(init) };
	ssize_t n = writev(fd, v, 2);
	if (n >= 0)
		atomic_store(&d->dio_mmap, true);
	return n;
}

int tfsd_io_install(struct fuse_session *se)
{
	static const struct fuse_custom_io io = { .read = io_read, .writev = io_writev };

	return fuse_session_custom_io(se, &io, fuse_session_fd(se));
}
