// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * dev: opening raw devices and image files, choosing an I/O backend and the
 * thin dispatch layer over the backend vtable.  Also the per-thread context
 * registry the io_uring and libaio backends share (dev_i.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dev.h"

#include "dev_i.h"
#include "tfs.h"
#include "tlog.h"

/* How long dev_open waits for a lock a dying daemon still holds. */
#define DEV_LOCK_WAIT_MS 3000

int dev_open(const char *path, bool readonly, struct dev **out, char *err, size_t errlen)
{
	int flags = (readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC;
	struct dev *d;
	struct stat st;
	uint64_t size;
	bool direct = true;
	int fd, ret;

	fd = open(path, flags | O_DIRECT);
	if (fd < 0 && errno == EINVAL) {
		/* tmpfs and some FUSE file systems refuse O_DIRECT. */
		direct = false;
		fd = open(path, flags);
	}
	if (fd < 0) {
		ret = -errno;
		tfs_seterr(err, errlen, "%s: %s", path, strerror(-ret));
		return ret;
	}
	if (fstat(fd, &st) < 0) {
		ret = -errno;
		tfs_seterr(err, errlen, "%s: %s", path, strerror(-ret));
		goto out_close;
	}
	if (S_ISBLK(st.st_mode)) {
		if (ioctl(fd, BLKGETSIZE64, &size) < 0) {
			ret = -errno;
			tfs_seterr(err, errlen, "%s: BLKGETSIZE64: %s", path, strerror(-ret));
			goto out_close;
		}
	} else if (S_ISREG(st.st_mode)) {
		size = (uint64_t)st.st_size;
	} else {
		ret = -ENODEV;
		tfs_seterr(err, errlen, "%s: not a block device or regular file", path);
		goto out_close;
	}
	/*
	 * A second daemon, or mkfs on a mounted device, would corrupt it.
	 * After a daemon dies (kill -9) the kernel tears its io_uring down in
	 * the background and the ring's in-flight requests keep the file, and
	 * so the lock, for a moment after the process is gone: a remount right
	 * then must wait for that, not report the device as in use.  A live
	 * daemon holds the lock for good, so a bounded wait still refuses it.
	 */
	int lk = 0;

	for (int tries = 0;; tries++) {
		lk = flock(fd, (readonly ? LOCK_SH : LOCK_EX) | LOCK_NB) < 0 ? -errno : 0;
		if (lk != -EWOULDBLOCK || tries >= DEV_LOCK_WAIT_MS / 50)
			break;
		usleep(50 * 1000);
	}
	if (lk == -EWOULDBLOCK) {
		ret = -EBUSY;
		tfs_seterr(err, errlen, "%s: in use by another twinfs process", path);
		goto out_close;
	}
	if (lk < 0) {
		ret = lk;
		tfs_seterr(err, errlen, "%s: flock: %s", path, strerror(-ret));
		goto out_close;
	}

	d = calloc(1, sizeof(*d));
	if (!d || !(d->path = strdup(path))) {
		free(d);
		ret = -ENOMEM;
		tfs_seterr(err, errlen, "%s: %s", path, strerror(ENOMEM));
		goto out_close;
	}
	d->fd = fd;
	d->idx = -1;
	/* Whatever another process left in the device's cache: the first
	 * flush is never skipped. */
	d->wr_done = 1;
	d->size = size & ~(uint64_t)4095;
	d->direct = direct;
	d->is_blk = S_ISBLK(st.st_mode);
	*out = d;
	return 0;

out_close:
	close(fd);
	return ret;
}

void dev_close(struct dev *d)
{
	if (!d)
		return;
	close(d->fd);		/* also drops the flock */
	free(d->path);
	free(d);
}

static void dev_id_stat(const struct stat *st, struct dev_id *id)
{
	if (S_ISBLK(st->st_mode)) {
		id->dev = st->st_rdev;
		id->ino = 0;
	} else {
		id->dev = st->st_dev;
		id->ino = st->st_ino;
	}
}

int dev_id_path(const char *path, struct dev_id *id)
{
	struct stat st;

	if (stat(path, &st) < 0)
		return -errno;
	dev_id_stat(&st, id);
	return 0;
}

int dev_id_fd(int fd, struct dev_id *id)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	dev_id_stat(&st, id);
	return 0;
}

int dev_abspath(const char *path, char *out, size_t outlen)
{
	char buf[PATH_MAX], *dir, *slash;
	const char *base;
	int n;

	if (!*path)
		return -ENOENT;
	if (realpath(path, buf)) {
		n = snprintf(out, outlen, "%s", buf);
		return n < 0 || (size_t)n >= outlen ? -ENAMETOOLONG : 0;
	}
	/* Missing (or not ours to resolve: dev_open will say why): resolve
	 * what is there, the directory. */
	dir = strdup(path);
	if (!dir)
		return -ENOMEM;
	slash = strrchr(dir, '/');
	if (slash && slash[1] == '\0') {
		base = NULL;	/* "dir/": no name to append */
	} else if (slash) {
		*slash = '\0';
		base = slash + 1;
	} else {
		base = dir;
	}
	if (base && realpath(slash ? (*dir ? dir : "/") : ".", buf)) {
		n = snprintf(out, outlen, "%s%s%s", buf, strcmp(buf, "/") ? "/" : "", base);
	} else if (path[0] == '/') {
		n = snprintf(out, outlen, "%s", path);
	} else if (getcwd(buf, sizeof(buf))) {
		n = snprintf(out, outlen, "%s/%s", buf, path);
	} else {
		n = -errno;
		free(dir);
		return n;
	}
	free(dir);
	return n < 0 || (size_t)n >= outlen ? -ENAMETOOLONG : 0;
}

int dev_backend_create(const char *name, struct dev_backend **out)
{
	int ret;

	if (!strcmp(name, "uring") || !strcmp(name, "io_uring"))
		return dev_uring_create(out);
	if (!strcmp(name, "aio") || !strcmp(name, "libaio"))
		return dev_aio_create(out);
	if (!strcmp(name, "file"))
		return dev_file_create(out);
	if (strcmp(name, "auto"))
		return -EINVAL;

	/* Containers and hardened kernels refuse io_uring (seccomp, the
	 * io_uring_disabled sysctl): that is what the fallbacks are for.  Any
	 * other failure is real and reported. */
	ret = dev_uring_probe();
	if (!ret)
		return dev_uring_create(out);
	if (ret != -EPERM && ret != -ENOSYS && ret != -EACCES)
		return ret;
	if (!dev_aio_probe())
		return dev_aio_create(out);
	return dev_file_create(out);
}

int dev_backend_attach(struct dev_backend *be, struct dev *d)
{
	unsigned idx = be->ndevs;
	int ret;

	if (idx >= DEV_MAX)
		return -ENOSPC;
	if (be->ops->attach) {
		ret = be->ops->attach(be, d);
		if (ret)
			return ret;
	}
	d->idx = (int)idx;
	be->devs[idx] = d;
	be->ndevs = idx + 1;
	return 0;
}

/* Misuse is a bug in the caller: refuse the batch before any of it
 * reaches a device. */
static int dev_check(struct dev_io *ios, unsigned n)
{
	unsigned i;

	for (i = 0; i < n; i++) {
		const struct dev_io *io = &ios[i];

		if (!io->dev || io->op > DEV_FLUSH ||
		    (io->op != DEV_FLUSH && (!io->len || (io->len & 4095) ||
					     (io->off & 4095) || !io->buf)))
			goto inval;
	}
	return 0;
inval:
	for (i = 0; i < n; i++)
		ios[i].res = -EINVAL;
	return -EINVAL;
}

void dev_note_done(const struct dev_io *ios, unsigned n)
{
	/* Failed ones too: a partly done write may have reached the cache. */
	for (unsigned i = 0; i < n; i++)
		if (ios[i].op == DEV_WRITE && !ios[i].fua)
			atomic_fetch_add(&ios[i].dev->wr_done, 1);
}

/* A flush of @d issued after @seen plain writes had completed succeeded. */
static void note_flushed(struct dev *d, uint64_t seen)
{
	uint64_t cur = atomic_load(&d->wr_flushed);

	while (cur < seen && !atomic_compare_exchange_weak(&d->wr_flushed, &cur, seen))
		;
}

int dev_submit(struct dev_backend *be, struct dev_io *ios, unsigned n)
{
	uint64_t seen[DEV_MAX];
	int ret = dev_check(ios, n);

	if (ret || !n)
		return ret;
	for (unsigned i = 0; i < n && i < DEV_MAX; i++)
		seen[i] = ios[i].op == DEV_FLUSH ? atomic_load(&ios[i].dev->wr_done) : 0;
	tfs_may_block();
	ret = be->ops->submit(be, ios, n);
	dev_note_done(ios, n);
	for (unsigned i = 0; i < n && i < DEV_MAX; i++)
		if (ios[i].op == DEV_FLUSH && !ret && !ios[i].res)
			note_flushed(ios[i].dev, seen[i]);
	return ret;
}

bool dev_flush_needed(struct dev *d)
{
	return atomic_load(&d->wr_flushed) != atomic_load(&d->wr_done);
}

/*
 * Emulated asynchronous batches for backends that only run synchronously
 * (dev_async_emulate): one thread runs each queued batch through the
 * backend's submit, then its done().  Slow and serial; it exists so the
 * asynchronous write path can run over the fault injector, whose journal
 * the crash tests replay.
 */
struct dev_emu {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct dev_batch *head, **tailp;	/* under mu */
	unsigned long busy;			/* queued or running; under mu */
	bool stop;				/* under mu */
	pthread_t thr;
};

static void *emu_main(void *arg)
{
	struct dev_backend *be = arg;
	struct dev_emu *e = be->async;

	dev_on_completion_thread = true;

	pthread_mutex_lock(&e->mu);
	for (;;) {
		struct dev_batch *b;

		while (!e->head && !e->stop)
			pthread_cond_wait(&e->cv, &e->mu);
		if (!e->head)
			break;
		b = e->head;
		e->head = b->next;
		if (!e->head)
			e->tailp = &e->head;
		pthread_mutex_unlock(&e->mu);
		if (be->ops->submit(be, b->ios, b->n) < 0)
			for (unsigned i = 0; i < b->n; i++)
				if (b->ios[i].res > 0)
					b->ios[i].res = -EIO;
		dev_note_done(b->ios, b->n);
		b->done(b);
		pthread_mutex_lock(&e->mu);
		if (!--e->busy)
			pthread_cond_broadcast(&e->cv);
	}
	pthread_mutex_unlock(&e->mu);
	return NULL;
}

int dev_async_emulate(struct dev_backend *be)
{
	struct dev_emu *e;
	int ret;

	if (be->ops->submit_async || be->async)
		return 0;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	pthread_mutex_init(&e->mu, NULL);
	pthread_cond_init(&e->cv, NULL);
	e->tailp = &e->head;
	be->async = e;
	ret = -pthread_create(&e->thr, NULL, emu_main, be);
	if (ret) {
		be->async = NULL;
		pthread_cond_destroy(&e->cv);
		pthread_mutex_destroy(&e->mu);
		free(e);
	}
	return ret;
}

static int emu_submit(struct dev_emu *e, struct dev_batch *b)
{
	for (unsigned i = 0; i < b->n; i++) {
		b->ios[i].batch = b;
		b->ios[i].res = 1;
	}
	b->next = NULL;
	pthread_mutex_lock(&e->mu);
	if (e->stop) {
		pthread_mutex_unlock(&e->mu);
		return -ESHUTDOWN;
	}
	*e->tailp = b;
	e->tailp = &b->next;
	e->busy++;
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&e->mu);
	return 0;
}

static void emu_drain(struct dev_emu *e)
{
	pthread_mutex_lock(&e->mu);
	while (e->busy)
		pthread_cond_wait(&e->cv, &e->mu);
	pthread_mutex_unlock(&e->mu);
}

static void emu_stop(struct dev_backend *be)
{
	struct dev_emu *e = be->async;

	emu_drain(e);
	pthread_mutex_lock(&e->mu);
	e->stop = true;
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&e->mu);
	pthread_join(e->thr, NULL);
	pthread_cond_destroy(&e->cv);
	pthread_mutex_destroy(&e->mu);
	free(e);
	be->async = NULL;
}

_Thread_local bool dev_on_completion_thread;
_Atomic unsigned long dev_block_violations;

void dev_assert_may_block(const char *what)
{
	if (!dev_on_completion_thread)
		return;
	atomic_fetch_add(&dev_block_violations, 1);
	tfs_log(LOG_ERR, "bug: %s on an I/O completion thread", what);
}

bool dev_async_supported(const struct dev_backend *be)
{
	return be->async != NULL;
}

int dev_submit_async(struct dev_backend *be, struct dev_batch *b)
{
	int ret;

	if (!dev_async_supported(be))
		return -EOPNOTSUPP;
	if (!b->n || !b->done)
		return -EINVAL;
	ret = dev_check(b->ios, b->n);
	if (ret)
		return ret;
	if (!be->ops->submit_async)
		return emu_submit(be->async, b);
	return be->ops->submit_async(be, b);
}

int dev_register_buffers(struct dev_backend *be, void *base, size_t len)
{
	if (!be->async || !be->ops->register_buffers)
		return -EOPNOTSUPP;
	if (!base || !len)
		return -EINVAL;
	return be->ops->register_buffers(be, base, len);
}

void dev_async_drain(struct dev_backend *be)
{
	if (!be->async)
		return;
	if (be->ops->drain)
		be->ops->drain(be);
	else
		emu_drain(be->async);
}

void dev_backend_destroy(struct dev_backend *be)
{
	if (!be)
		return;
	if (be->async && !be->ops->submit_async)
		emu_stop(be);
	be->ops->destroy(be);
}

const char *dev_backend_name(const struct dev_backend *be)
{
	return be->ops->name;
}

static int dev_one(struct dev_backend *be, struct dev *d, int op, void *buf,
		   uint32_t len, uint64_t off)
{
	struct dev_io io = { .dev = d, .op = (uint8_t)op, .off = off, .buf = buf, .len = len };
	int ret;

	ret = dev_submit(be, &io, 1);
	return ret ? ret : io.res;
}

int dev_pread(struct dev_backend *be, struct dev *d, void *buf, uint32_t len, uint64_t off)
{
	return dev_one(be, d, DEV_READ, buf, len, off);
}

int dev_pwrite(struct dev_backend *be, struct dev *d, const void *buf, uint32_t len, uint64_t off)
{
	/* The buffer is only read from; dev_io has one pointer for both. */
	return dev_one(be, d, DEV_WRITE, (void *)buf, len, off);
}

int dev_flush(struct dev_backend *be, struct dev *d)
{
	return dev_one(be, d, DEV_FLUSH, NULL, 0, 0);
}

/* --- discard --- */

int dev_discard_probe(struct dev *d)
{
	int mode;

	if (d->is_blk) {
		uint64_t range[2] = { 0, 0 };

		/* Without discard support the kernel says EOPNOTSUPP before it
		 * looks at the range; with it, a zero length is EINVAL. */
		mode = ioctl(d->fd, BLKDISCARD, range) < 0 && errno == EOPNOTSUPP ?
			DEV_DISCARD_NONE : DEV_DISCARD_BLK;
	} else {
		/* A hole at the end of the image (past d->size nothing is
		 * ours) changes nothing where punching works. */
		mode = fallocate(d->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				 (off_t)d->size, 4096) < 0 ? DEV_DISCARD_NONE : DEV_DISCARD_PUNCH;
	}
	atomic_store(&d->discard, mode);
	return mode;
}

const char *dev_discard_name(int mode)
{
	switch (mode) {
	case DEV_DISCARD_BLK: return "blkdiscard";
	case DEV_DISCARD_PUNCH: return "punch";
	case DEV_DISCARD_NONE: return "unsupported";
	default: return "unknown";
	}
}

int dev_discard_sync(struct dev_backend *be, struct dev *d, uint64_t off, uint64_t len)
{
	int mode = atomic_load(&d->discard);
	int r;

	if (mode == DEV_DISCARD_UNKNOWN)
		mode = dev_discard_probe(d);
	if (mode == DEV_DISCARD_BLK) {
		uint64_t range[2] = { off, len };

		r = ioctl(d->fd, BLKDISCARD, range) < 0 ? -errno : 0;
	} else if (mode == DEV_DISCARD_PUNCH) {
		r = fallocate(d->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			      (off_t)off, (off_t)len) < 0 ? -errno : 0;
	} else {
		return -EOPNOTSUPP;
	}
	return r == -ENOTTY ? -EOPNOTSUPP : r;
}

int dev_discard(struct dev_backend *be, struct dev *d, uint64_t off, uint64_t len)
{
	if ((off & 4095) || (len & 4095) || !len || off + len < off)
		return -EINVAL;
	if (!be->ops->discard)
		return -EOPNOTSUPP;
	return be->ops->discard(be, d, off, len);
}

/* --- per-thread context registry --- */

static void dev_tls_unlink(struct dev_tls_node *n)
{
	*n->pprev = n->next;
	if (n->next)
		n->next->pprev = n->pprev;
	n->next = NULL;
	n->pprev = NULL;
}

/* Thread exit: the key destructor hands us this thread's context. */
static void dev_tls_thread_exit(void *p)
{
	struct dev_tls_node *n = p;
	struct dev_tls *tls = n->tls;

	pthread_mutex_lock(&tls->lock);
	dev_tls_unlink(n);
	pthread_mutex_unlock(&tls->lock);
	tls->free_node(n);
}

int dev_tls_init(struct dev_tls *tls, void (*free_node)(struct dev_tls_node *n))
{
	int ret = pthread_key_create(&tls->key, dev_tls_thread_exit);

	if (ret)
		return -ret;
	pthread_mutex_init(&tls->lock, NULL);
	tls->head = NULL;
	tls->free_node = free_node;
	return 0;
}

struct dev_tls_node *dev_tls_get(struct dev_tls *tls)
{
	return pthread_getspecific(tls->key);
}

int dev_tls_set(struct dev_tls *tls, struct dev_tls_node *n)
{
	int ret = pthread_setspecific(tls->key, n);

	if (ret)
		return -ret;
	n->tls = tls;
	pthread_mutex_lock(&tls->lock);
	n->next = tls->head;
	if (n->next)
		n->next->pprev = &n->next;
	n->pprev = &tls->head;
	tls->head = n;
	pthread_mutex_unlock(&tls->lock);
	return 0;
}

void dev_tls_drop(struct dev_tls *tls, struct dev_tls_node *n)
{
	pthread_setspecific(tls->key, NULL);
	pthread_mutex_lock(&tls->lock);
	dev_tls_unlink(n);
	pthread_mutex_unlock(&tls->lock);
	tls->free_node(n);
}

void dev_tls_destroy(struct dev_tls *tls)
{
	struct dev_tls_node *n;

	/* Delete the key first so no thread exiting from now on runs the
	 * destructor on a context we are about to free. */
	pthread_setspecific(tls->key, NULL);
	pthread_key_delete(tls->key);
	pthread_mutex_lock(&tls->lock);
	while ((n = tls->head)) {
		dev_tls_unlink(n);
		tls->free_node(n);
	}
	pthread_mutex_unlock(&tls->lock);
	pthread_mutex_destroy(&tls->lock);
}

int dev_tls_backend_create(const struct dev_ops *ops,
			   void (*free_node)(struct dev_tls_node *n), struct dev_backend **out)
{
	struct dev_backend *be = calloc(1, sizeof(*be));
	struct dev_tls *tls = calloc(1, sizeof(*tls));
	int ret = -ENOMEM;

	if (!be || !tls)
		goto err;
	ret = dev_tls_init(tls, free_node);
	if (ret)
		goto err;
	be->ops = ops;
	be->priv = tls;
	*out = be;
	return 0;
err:
	free(tls);
	free(be);
	return ret;
}

void dev_tls_backend_destroy(struct dev_backend *be)
{
	dev_tls_destroy(be->priv);
	free(be->priv);
	free(be);
}
