// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * dev_file: the pread/pwrite backend.  It runs a batch one I/O after the
 * other in the calling thread, which is slow but needs nothing from the
 * kernel beyond POSIX and works on fds opened with or without O_DIRECT.
 * It holds no state, so any number of threads may use it at once.
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "dev.h"
#include "dev_i.h"

static int file_rw(struct dev_io *io)
{
	uint32_t done = 0;
	ssize_t r;

	do {
		char *p = (char *)io->buf + done;
		off_t off = (off_t)(io->off + done);

		if (io->op == DEV_READ)
			r = pread(io->dev->fd, p, dev_io_chunk(io, done), off);
		else
			r = pwrite(io->dev->fd, p, dev_io_chunk(io, done), off);
		if (r < 0)
			r = -errno;
	} while (dev_io_progress(io, &done, (long)r));
	return io->res;
}

static int file_submit(struct dev_backend *be, struct dev_io *ios, unsigned n)
{
	unsigned i;

	for (i = 0; i < n; i++) {
		if (ios[i].op == DEV_FLUSH || (file_rw(&ios[i]) == 0 && ios[i].fua))
			ios[i].res = fdatasync(ios[i].dev->fd) < 0 ? -errno : 0;
	}
	return 0;
}

static void file_destroy(struct dev_backend *be)
{
	free(be);
}

static const struct dev_ops file_ops = {
	.name = "file",
	.submit = file_submit,
	.discard = dev_discard_sync,
	.destroy = file_destroy,
};

int dev_file_create(struct dev_backend **out)
{
	struct dev_backend *be = calloc(1, sizeof(*be));

	if (!be)
		return -ENOMEM;
	be->ops = &file_ops;
	*out = be;
	return 0;
}
