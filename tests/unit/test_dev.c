// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: every device backend (io_uring, libaio, file; direct and buffered) writes, flushes and reads back batches from one and many threads; dev_open errors; fault rules and the crash journal; fixed buffers of the asynchronous engine; packed batches on one completion thread. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "dev.h"

#define IMG_SIZE (64ull << 20)
#define BS 4096u

static const char *const backends[] = { "uring", "aio", "file" };
#define NBACKENDS (sizeof(backends) / sizeof(backends[0]))

/* --- helpers --- */

static char *make_image(uint64_t size)
{
	char *path = strdup("/var/tmp/twinfs-test-dev-XXXXXX");
	int fd;

	assert_non_null(path);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0);
	close(fd);
	return path;
}

static void drop_image(char *path)
{
	unlink(path);
	free(path);
}

static void *xalloc(size_t len)
{
	void *p = NULL;

	assert_int_equal(posix_memalign(&p, BS, len), 0);
	return p;
}

static void pattern(void *buf, size_t len, uint64_t seed)
{
	uint64_t *w = buf;
	size_t i;

	for (i = 0; i < len / 8; i++)
		w[i] = (seed * 0x9e3779b97f4a7c15ull) ^ (i * 0xff51afd7ed558ccdull) ^ seed;
}

/* Open @path for @be; buffered strips O_DIRECT from the fd afterwards. */
static struct dev *open_dev(struct dev_backend *be, const char *path, bool direct)
{
	char err[256] = "";
	struct dev *d;
	int fl;

	assert_int_equal(dev_open(path, false, &d, err, sizeof(err)), 0);
	assert_true(d->direct);		/* ext4 /var/tmp takes O_DIRECT */
	assert_false(d->is_blk);
	assert_int_equal(d->size, IMG_SIZE);
	if (!direct) {
		fl = fcntl(d->fd, F_GETFL);
		assert_int_equal(fcntl(d->fd, F_SETFL, fl & ~O_DIRECT), 0);
		d->direct = false;
	}
	assert_int_equal(dev_backend_attach(be, d), 0);
	return d;
}

static struct dev_backend *new_backend(const char *name)
{
	struct dev_backend *be = NULL;

	assert_int_equal(dev_backend_create(name, &be), 0);
	return be;
}

/* --- batch read/write matrix --- */

#define NIO 300		/* more than the ring depth: submitted in pieces */

static uint64_t io_off(unsigned i)
{
	/* Spread over 12 MiB, no two I/Os overlapping: slot i of 40 KiB. */
	return (uint64_t)((i * 37) % NIO) * 40960 + (uint64_t)(i % 3) * BS;
}

static uint32_t io_len(unsigned i)
{
	return (1 + i % 8) * BS;	/* up to 32 KiB, within its slot */
}

/*
 * Write NIO patterned I/Os in one batch, flush, read them back in one batch
 * and compare.  Returns 0 or a line number: no cmocka asserts, because it
 * also runs on threads, where a failing assert cannot unwind.
 */
static int rw_batch(struct dev_backend *be, struct dev *d, uint64_t base, uint64_t seed)
{
	struct dev_io *ios = calloc(NIO, sizeof(*ios));
	void **bufs = calloc(NIO, sizeof(*bufs));
	void *chk = NULL;
	unsigned i;
	int fail = 0;

	if (!ios || !bufs || posix_memalign(&chk, BS, 32 * BS)) {
		fail = __LINE__;
		goto out;
	}
	for (i = 0; i < NIO; i++) {
		if (posix_memalign(&bufs[i], BS, io_len(i))) {
			fail = __LINE__;
			goto out;
		}
		pattern(bufs[i], io_len(i), seed + i);
		ios[i] = (struct dev_io){ .dev = d, .op = DEV_WRITE, .off = base + io_off(i),
					  .buf = bufs[i], .len = io_len(i), .res = 12345 };
	}
	if (dev_submit(be, ios, NIO))
		fail = __LINE__;
	for (i = 0; i < NIO && !fail; i++)
		if (ios[i].res)
			fail = __LINE__;
	if (!fail && dev_flush(be, d))
		fail = __LINE__;
	if (fail)
		goto out;

	/* Read everything back in one batch, into zeroed buffers. */
	for (i = 0; i < NIO; i++) {
		memset(bufs[i], 0, io_len(i));
		ios[i].op = DEV_READ;
		ios[i].res = 12345;
	}
	if (dev_submit(be, ios, NIO))
		fail = __LINE__;
	for (i = 0; i < NIO && !fail; i++) {
		pattern(chk, io_len(i), seed + i);
		if (ios[i].res || memcmp(bufs[i], chk, io_len(i)))
			fail = __LINE__;
	}
out:
	for (i = 0; bufs && i < NIO; i++)
		free(bufs[i]);
	free(chk);
	free(bufs);
	free(ios);
	return fail;
}

static void test_rw_matrix(void **state)
{
	unsigned b;
	int direct;

	for (b = 0; b < NBACKENDS; b++) {
		for (direct = 0; direct < 2; direct++) {
			char *path = make_image(IMG_SIZE);
			struct dev_backend *be = new_backend(backends[b]);
			struct dev *d = open_dev(be, path, direct);
			void *buf = xalloc(2 * BS);
			struct dev_io io[2];

			assert_int_equal(rw_batch(be, d, 0, 1000 * b + (unsigned)direct), 0);

			/* A read running past the end is short, then hits
			 * EOF: reported as -EIO, not as success. */
			assert_int_equal(dev_pread(be, d, buf, 2 * BS, IMG_SIZE - BS), -EIO);
			/* Mixed batch: a write plus a flush of the same dev. */
			pattern(buf, BS, 7);
			io[0] = (struct dev_io){ .dev = d, .op = DEV_WRITE, .off = 0, .buf = buf, .len = BS };
			io[1] = (struct dev_io){ .dev = d, .op = DEV_FLUSH };
			assert_int_equal(dev_submit(be, io, 2), 0);
			assert_int_equal(io[0].res, 0);
			assert_int_equal(io[1].res, 0);
			/* A FUA write (the log's chunk) lands and reads back. */
			pattern(buf, BS, 8);
			io[0] = (struct dev_io){ .dev = d, .op = DEV_WRITE, .off = BS, .buf = buf,
						 .len = BS, .fua = true };
			assert_int_equal(dev_submit(be, io, 1), 0);
			assert_int_equal(io[0].res, 0);
			assert_int_equal(dev_pread(be, d, (char *)buf + BS, BS, BS), 0);
			assert_memory_equal(buf, (char *)buf + BS, BS);
			/* Misaligned requests are refused before reaching a device. */
			io[0].off = 100;
			assert_int_equal(dev_submit(be, io, 1), -EINVAL);

			free(buf);
			dev_backend_destroy(be);
			dev_close(d);
			drop_image(path);
		}
	}
}

/* --- many threads, each with its own ring/context --- */

/* io_uring rings are anonymous-inode fds: count this process's. */
static unsigned count_rings(void)
{
	char path[64], link[128];
	unsigned n = 0;
	int fd;

	for (fd = 0; fd < 1024; fd++) {
		ssize_t len;

		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		len = readlink(path, link, sizeof(link) - 1);
		if (len < 0)
			continue;
		link[len] = '\0';
		n += strstr(link, "io_uring") != NULL;
	}
	return n;
}

#define NTHREADS 4

struct thr_arg {
	struct dev_backend *be;
	struct dev *d;
	unsigned id;
	int fail;
};

static void *thr_main(void *p)
{
	struct thr_arg *a = p;
	int it;

	for (it = 0; it < 3 && !a->fail; it++)
		a->fail = rw_batch(a->be, a->d, (uint64_t)a->id * (IMG_SIZE / NTHREADS),
				   (uint64_t)a->id * 100000 + (uint64_t)it * 1000);
	return NULL;
}

static void test_threads(void **state)
{
	unsigned b, i;

	for (b = 0; b < NBACKENDS; b++) {
		char *path = make_image(IMG_SIZE);
		struct dev_backend *be = new_backend(backends[b]);
		/* The asynchronous engine's rings (io_uring) exist from the
		 * start; the per-thread ones come and go on top of them. */
		unsigned base = count_rings();
		struct dev *d = open_dev(be, path, true);
		struct thr_arg args[NTHREADS];
		pthread_t th[NTHREADS];

		for (i = 0; i < NTHREADS; i++) {
			args[i] = (struct thr_arg){ .be = be, .d = d, .id = i };
			assert_int_equal(pthread_create(&th[i], NULL, thr_main, &args[i]), 0);
		}
		/* This thread uses the backend at the same time. */
		assert_int_equal(dev_flush(be, d), 0);
		for (i = 0; i < NTHREADS; i++) {
			pthread_join(th[i], NULL);
			assert_int_equal(args[i].fail, 0);
		}
		/* The exited threads' rings were freed by the key destructor;
		 * only this thread's one is left, and destroy frees it. */
		if (!strcmp(backends[b], "uring"))
			assert_int_equal(count_rings(), base + 1);
		dev_backend_destroy(be);
		assert_int_equal(count_rings(), 0);
		dev_close(d);
		drop_image(path);
	}
}

/* --- unmount then mount again at once --- */

static void *one_read(void *p)
{
	struct thr_arg *a = p;
	void *buf = NULL;

	if (posix_memalign(&buf, BS, BS) || dev_pread(a->be, a->d, buf, BS, 0))
		a->fail = __LINE__;
	free(buf);
	return NULL;
}

/* Nothing a backend keeps after destroy may hold the image (and its flock). */
static void test_reopen_after_close(void **state)
{
	char *path = make_image(IMG_SIZE);
	unsigned b, it;

	for (b = 0; b < NBACKENDS; b++) {
		for (it = 0; it < 10; it++) {
			struct dev_backend *be = new_backend(backends[b]);
			struct thr_arg a = { .be = be };
			char err[256];
			pthread_t th;

			assert_int_equal(dev_open(path, false, &a.d, err, sizeof(err)), 0);
			assert_int_equal(dev_backend_attach(be, a.d), 0);
			/* one context freed on thread exit, one by destroy */
			assert_int_equal(pthread_create(&th, NULL, one_read, &a), 0);
			pthread_join(th, NULL);
			one_read(&a);
			assert_int_equal(a.fail, 0);
			dev_backend_destroy(be);
			dev_close(a.d);
		}
	}
	drop_image(path);
}

/* --- backend names and dev_open errors --- */

static void test_backend_names(void **state)
{
	static const char *const want[] = { "io_uring", "libaio", "file" };
	struct dev_backend *be, *fb;
	char name[64];
	unsigned b;

	for (b = 0; b < NBACKENDS; b++) {
		be = new_backend(backends[b]);
		assert_string_equal(dev_backend_name(be), want[b]);
		assert_int_equal(dev_fault_create(be, &fb), 0);
		snprintf(name, sizeof(name), "fault(%s)", want[b]);
		assert_string_equal(dev_backend_name(fb), name);
		dev_backend_destroy(fb);	/* owns be */
	}
	/* This kernel has io_uring: auto must pick it. */
	be = new_backend("auto");
	assert_string_equal(dev_backend_name(be), "io_uring");
	dev_backend_destroy(be);
	assert_int_equal(dev_backend_create("nope", &be), -EINVAL);
}

static void test_open_errors(void **state)
{
	char *path = make_image(IMG_SIZE + 100);
	char err[256], missing[300];
	struct dev *d, *d2, *d3;

	/* Size rounds down to a whole block. */
	assert_int_equal(dev_open(path, false, &d, err, sizeof(err)), 0);
	assert_int_equal(d->size, IMG_SIZE);

	/* The same image twice: the second open must refuse. */
	err[0] = '\0';
	assert_int_equal(dev_open(path, false, &d2, err, sizeof(err)), -EBUSY);
	assert_non_null(strstr(err, path));
	assert_non_null(strstr(err, "in use by another twinfs process"));
	assert_null(strchr(err, '\n'));
	/* Even read-only (fsck -n) while mounted read-write. */
	assert_int_equal(dev_open(path, true, &d2, err, sizeof(err)), -EBUSY);
	dev_close(d);

	/* Read-only opens share the lock with each other. */
	assert_int_equal(dev_open(path, true, &d, err, sizeof(err)), 0);
	assert_int_equal(dev_open(path, true, &d2, err, sizeof(err)), 0);
	assert_int_equal(dev_open(path, false, &d3, err, sizeof(err)), -EBUSY);
	dev_close(d2);
	dev_close(d);

	snprintf(missing, sizeof(missing), "%s.missing", path);
	err[0] = '\0';
	assert_int_equal(dev_open(missing, false, &d, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, missing));
	assert_non_null(strstr(err, "No such file or directory"));

	/* A directory is neither a block device nor a regular file. */
	err[0] = '\0';
	assert_int_equal(dev_open("/var/tmp", true, &d, err, sizeof(err)), -ENODEV);
	assert_non_null(strstr(err, "/var/tmp: not a block device or regular file"));
	/* err may be NULL. */
	assert_int_equal(dev_open(missing, false, &d, NULL, 0), -ENOENT);

	drop_image(path);
}

/* --- fault injection --- */

struct fx {
	char *path[2];
	struct dev *d[2];
	struct dev_backend *be;		/* the fault backend */
};

static void fx_setup(struct fx *f, const char *lower)
{
	unsigned i;

	assert_int_equal(dev_fault_create(new_backend(lower), &f->be), 0);
	for (i = 0; i < 2; i++) {
		f->path[i] = make_image(IMG_SIZE);
		f->d[i] = open_dev(f->be, f->path[i], true);
		assert_int_equal(f->d[i]->idx, (int)i);
	}
}

static void fx_teardown(struct fx *f)
{
	unsigned i;

	dev_backend_destroy(f->be);
	for (i = 0; i < 2; i++) {
		dev_close(f->d[i]);
		drop_image(f->path[i]);
	}
}

static unsigned bits_differ(const void *a, const void *b, size_t len)
{
	const unsigned char *x = a, *y = b;
	unsigned n = 0;
	size_t i;

	for (i = 0; i < len; i++)
		n += (unsigned)__builtin_popcount(x[i] ^ y[i]);
	return n;
}

static void add_rule(struct dev_backend *be, int dev, int op, uint64_t off, uint64_t len,
		     int kind, int err, int count)
{
	struct dev_fault_rule r = { .dev_idx = dev, .op = op, .off = off, .len = len,
				    .kind = kind, .err = err, .count = count };

	assert_int_equal(dev_fault_add_rule(be, &r), 0);
}

static void test_fault_rules(void **state)
{
	unsigned b, i;

	for (b = 0; b < NBACKENDS; b++) {
		char *ref = xalloc(16 * BS), *buf = xalloc(16 * BS), *nw = xalloc(16 * BS);
		struct dev_io io[3];
		struct fx f;

		fx_setup(&f, backends[b]);
		pattern(ref, 16 * BS, 42);
		for (i = 0; i < 2; i++)
			assert_int_equal(dev_pwrite(f.be, f.d[i], ref, 16 * BS, 0), 0);

		/* error, once, on dev 0 reads touching block 2 */
		add_rule(f.be, 0, DEV_READ, 2 * BS, BS, DEV_FAULT_ERROR, EIO, 1);
		assert_int_equal(dev_pread(f.be, f.d[1], buf, 4 * BS, 0), 0);
		assert_int_equal(dev_pread(f.be, f.d[0], buf, 2 * BS, 0), 0);	/* no overlap */
		assert_int_equal(dev_pread(f.be, f.d[0], buf, 4 * BS, 0), -EIO);
		assert_int_equal(dev_pread(f.be, f.d[0], buf, 4 * BS, 0), 0);	/* used up */
		assert_memory_equal(buf, ref, 4 * BS);

		/* corrupt, forever, blocks 4-5 of dev 1: one bit per block */
		add_rule(f.be, 1, DEV_READ, 4 * BS, 2 * BS, DEV_FAULT_CORRUPT, 0, -1);
		for (i = 0; i < 2; i++) {
			assert_int_equal(dev_pread(f.be, f.d[1], buf, 5 * BS, 3 * BS), 0);
			assert_memory_equal(buf, ref + 3 * BS, BS);
			assert_int_equal(bits_differ(buf + BS, ref + 4 * BS, BS), 1);
			assert_int_equal(bits_differ(buf + 2 * BS, ref + 5 * BS, BS), 1);
			assert_memory_equal(buf + 3 * BS, ref + 6 * BS, 2 * BS);
		}
		assert_int_equal(dev_pread(f.be, f.d[0], buf, 16 * BS, 0), 0);
		assert_memory_equal(buf, ref, 16 * BS);
		dev_fault_clear(f.be);
		assert_int_equal(dev_pread(f.be, f.d[1], buf, 16 * BS, 0), 0);
		assert_memory_equal(buf, ref, 16 * BS);

		/* drop: the write reports success but the disk keeps the old data */
		pattern(nw, 16 * BS, 43);
		add_rule(f.be, 0, DEV_WRITE, 8 * BS, BS, DEV_FAULT_DROP, 0, 1);
		assert_int_equal(dev_pwrite(f.be, f.d[0], nw, 2 * BS, 8 * BS), 0);
		assert_int_equal(dev_pread(f.be, f.d[0], buf, 2 * BS, 8 * BS), 0);
		assert_memory_equal(buf, ref + 8 * BS, 2 * BS);
		assert_int_equal(dev_pwrite(f.be, f.d[0], nw, 2 * BS, 8 * BS), 0);
		assert_int_equal(dev_pread(f.be, f.d[0], buf, 2 * BS, 8 * BS), 0);
		assert_memory_equal(buf, nw, 2 * BS);

		/* count 2 over a batch of 3 writes: array order decides */
		add_rule(f.be, -1, DEV_WRITE, 0, 0, DEV_FAULT_ERROR, ENOSPC, 2);
		for (i = 0; i < 3; i++)
			io[i] = (struct dev_io){ .dev = f.d[i == 1], .op = DEV_WRITE,
						 .off = (12 + i) * BS, .buf = nw, .len = BS };
		assert_int_equal(dev_submit(f.be, io, 3), 0);
		assert_int_equal(io[0].res, -ENOSPC);
		assert_int_equal(io[1].res, -ENOSPC);
		assert_int_equal(io[2].res, 0);

		/* corrupt write: the stored copy is damaged, the caller's is not */
		memcpy(buf, nw, BS);
		add_rule(f.be, 1, DEV_WRITE, 10 * BS, BS, DEV_FAULT_CORRUPT, 0, 1);
		assert_int_equal(dev_pwrite(f.be, f.d[1], buf, BS, 10 * BS), 0);
		assert_memory_equal(buf, nw, BS);
		assert_int_equal(dev_pread(f.be, f.d[1], buf, BS, 10 * BS), 0);
		assert_int_equal(bits_differ(buf, nw, BS), 1);

		/* flush errors, and a range rule does not catch flushes */
		add_rule(f.be, 0, -1, 0, BS, DEV_FAULT_ERROR, EIO, -1);
		assert_int_equal(dev_flush(f.be, f.d[0]), 0);
		add_rule(f.be, 0, DEV_FLUSH, 0, 0, DEV_FAULT_ERROR, EIO, -1);
		assert_int_equal(dev_flush(f.be, f.d[0]), -EIO);
		assert_int_equal(dev_flush(f.be, f.d[1]), 0);
		dev_fault_clear(f.be);
		assert_int_equal(dev_flush(f.be, f.d[0]), 0);

		fx_teardown(&f);
		free(ref);
		free(buf);
		free(nw);
	}
}

static void test_fault_parse(void **state)
{
	char *ref = xalloc(4 * BS), *buf = xalloc(4 * BS);
	struct fx f;

	fx_setup(&f, "uring");
	pattern(ref, 4 * BS, 9);
	assert_int_equal(dev_pwrite(f.be, f.d[0], ref, 4 * BS, 0), 0);

	/* Bad specs add nothing, not even their valid leading rules. */
	assert_int_equal(dev_fault_parse(f.be, "dev=0,op=read,count=1;op=bogus"), -EINVAL);
	assert_int_equal(dev_fault_parse(f.be, "dev=0,kind=error;junk"), -EINVAL);
	assert_int_equal(dev_fault_parse(f.be, "dev=0,err=0"), -EINVAL);
	assert_int_equal(dev_fault_parse(f.be, "dev=0,off=12q"), -EINVAL);
	assert_int_equal(dev_pread(f.be, f.d[0], buf, 4 * BS, 0), 0);

	assert_int_equal(dev_fault_parse(f.be,
		"dev=1,op=write,kind=error,err=28,count=1;"
		"dev=0,op=read,off=8k,len=4k,kind=corrupt,count=-1;;"), 0);
	assert_int_equal(dev_pwrite(f.be, f.d[1], ref, BS, 0), -ENOSPC);
	assert_int_equal(dev_pwrite(f.be, f.d[1], ref, BS, 0), 0);
	assert_int_equal(dev_pread(f.be, f.d[0], buf, 4 * BS, 0), 0);
	assert_memory_equal(buf, ref, 2 * BS);
	assert_int_equal(bits_differ(buf + 2 * BS, ref + 2 * BS, BS), 1);
	assert_memory_equal(buf + 3 * BS, ref + 3 * BS, BS);

	fx_teardown(&f);
	free(ref);
	free(buf);
}

static void test_fault_journal(void **state)
{
	char *a = xalloc(2 * BS), *c = xalloc(BS);
	const struct dev_fault_rec *j;
	struct dev_io io[2];
	struct fx f;
	size_t n;

	fx_setup(&f, "uring");
	pattern(a, 2 * BS, 1);
	pattern(c, BS, 3);
	assert_int_equal(dev_pwrite(f.be, f.d[0], c, BS, 0), 0);	/* before recording */

	dev_fault_record(f.be, true);
	/* a mirrored write, then a flush of both */
	io[0] = (struct dev_io){ .dev = f.d[0], .op = DEV_WRITE, .off = BS, .buf = a, .len = 2 * BS };
	io[1] = (struct dev_io){ .dev = f.d[1], .op = DEV_WRITE, .off = BS, .buf = a, .len = 2 * BS };
	assert_int_equal(dev_submit(f.be, io, 2), 0);
	io[0] = (struct dev_io){ .dev = f.d[0], .op = DEV_FLUSH };
	io[1] = (struct dev_io){ .dev = f.d[1], .op = DEV_FLUSH };
	assert_int_equal(dev_submit(f.be, io, 2), 0);
	/* write racing a flush in one batch: the flush cannot cover it */
	io[0] = (struct dev_io){ .dev = f.d[0], .op = DEV_WRITE, .off = 5 * BS, .buf = c, .len = BS };
	io[1] = (struct dev_io){ .dev = f.d[1], .op = DEV_FLUSH };
	assert_int_equal(dev_submit(f.be, io, 2), 0);
	/* dropped and failed writes never reached the disk */
	add_rule(f.be, 1, DEV_WRITE, 0, 0, DEV_FAULT_DROP, 0, 1);
	add_rule(f.be, 0, DEV_WRITE, 0, 0, DEV_FAULT_ERROR, EIO, 1);
	assert_int_equal(dev_pwrite(f.be, f.d[1], c, BS, 7 * BS), 0);
	assert_int_equal(dev_pwrite(f.be, f.d[0], c, BS, 7 * BS), -EIO);
	/* the journal keeps its own copy of the data */
	memset(a, 0, 2 * BS);

	j = dev_fault_journal(f.be, &n);
	assert_int_equal(n, 6);
	assert_int_equal(j[0].op, DEV_WRITE);
	assert_int_equal(j[0].dev_idx, 0);
	assert_int_equal(j[0].off, BS);
	assert_int_equal(j[0].len, 2 * BS);
	assert_int_equal(j[1].op, DEV_WRITE);
	assert_int_equal(j[1].dev_idx, 1);
	pattern(a, 2 * BS, 1);
	assert_memory_equal(j[0].data, a, 2 * BS);
	assert_memory_equal(j[1].data, a, 2 * BS);
	assert_int_equal(j[2].op, DEV_FLUSH);
	assert_int_equal(j[2].dev_idx, 0);
	assert_null(j[2].data);
	assert_int_equal(j[3].op, DEV_FLUSH);
	assert_int_equal(j[3].dev_idx, 1);
	assert_int_equal(j[4].op, DEV_FLUSH);
	assert_int_equal(j[4].dev_idx, 1);
	assert_int_equal(j[5].op, DEV_WRITE);
	assert_int_equal(j[5].off, 5 * BS);
	assert_memory_equal(j[5].data, c, BS);

	/* off: nothing more is appended; on again: a fresh journal */
	dev_fault_record(f.be, false);
	assert_int_equal(dev_pwrite(f.be, f.d[0], c, BS, 9 * BS), 0);
	dev_fault_journal(f.be, &n);
	assert_int_equal(n, 6);
	dev_fault_record(f.be, true);
	dev_fault_journal(f.be, &n);
	assert_int_equal(n, 0);
	assert_int_equal(dev_flush(f.be, f.d[0]), 0);
	j = dev_fault_journal(f.be, &n);
	assert_int_equal(n, 1);
	assert_int_equal(j[0].op, DEV_FLUSH);

	fx_teardown(&f);
	free(a);
	free(c);
}

/* --- asynchronous batches --- */

struct abatch {
	struct dev_batch b;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool done;
	pthread_t thread;	/* where done() ran */
};

static void abatch_done(struct dev_batch *b)
{
	struct abatch *a = (struct abatch *)b;

	pthread_mutex_lock(&a->mu);
	a->done = true;
	a->thread = pthread_self();
	pthread_cond_broadcast(&a->cv);
	pthread_mutex_unlock(&a->mu);
}

/* Runs the batch and says which thread ran its done(). */
static pthread_t abatch_run_pack(struct dev_backend *be, struct dev_io *ios, unsigned n, bool pack)
{
	struct abatch a = { .b = { .ios = ios, .n = n, .done = abatch_done, .pack = pack } };

	pthread_mutex_init(&a.mu, NULL);
	pthread_cond_init(&a.cv, NULL);
	assert_int_equal(dev_submit_async(be, &a.b), 0);
	pthread_mutex_lock(&a.mu);
	while (!a.done)
		pthread_cond_wait(&a.cv, &a.mu);
	pthread_mutex_unlock(&a.mu);
	/* done() ran on a completion thread, not on the submitter. */
	assert_false(pthread_equal(a.thread, pthread_self()));
	pthread_cond_destroy(&a.cv);
	pthread_mutex_destroy(&a.mu);
	return a.thread;
}

static void abatch_run(struct dev_backend *be, struct dev_io *ios, unsigned n)
{
	abatch_run_pack(be, ios, n, false);
}

/* Batches larger than the ring and than the completion thread's in-flight
 * cap (io_uring), and the emulated engine over a synchronous backend. */
static void test_async_batches(void **state)
{
	static const unsigned sizes[] = { 1, 300, 2000 };
	static const char *const names[] = { "uring", "file" };

	for (unsigned b = 0; b < 2; b++) {
		struct dev_backend *be = new_backend(names[b]);
		char *path = make_image(IMG_SIZE);
		struct dev *d = open_dev(be, path, true);
		uint8_t *wbuf = xalloc(2000 * BS), *rbuf = xalloc(2000 * BS);
		struct dev_io *ios = calloc(2000, sizeof(*ios));

		if (!dev_async_supported(be))
			assert_int_equal(dev_async_emulate(be), 0);
		assert_true(dev_async_supported(be));
		for (unsigned k = 0; k < 3; k++) {
			unsigned n = sizes[k];

			pattern(wbuf, (size_t)n * BS, n);
			memset(rbuf, 0, (size_t)n * BS);
			/* Every other block, so no two I/Os could be merged. */
			for (unsigned i = 0; i < n; i++)
				ios[i] = (struct dev_io){ .dev = d, .op = DEV_WRITE,
							  .off = (uint64_t)i * 2 * BS,
							  .buf = wbuf + (size_t)i * BS, .len = BS };
			abatch_run(be, ios, n);
			for (unsigned i = 0; i < n; i++)
				assert_int_equal(ios[i].res, 0);
			for (unsigned i = 0; i < n; i++)
				ios[i] = (struct dev_io){ .dev = d, .op = DEV_READ,
							  .off = (uint64_t)i * 2 * BS,
							  .buf = rbuf + (size_t)i * BS, .len = BS };
			abatch_run(be, ios, n);
			for (unsigned i = 0; i < n; i++)
				assert_int_equal(ios[i].res, 0);
			assert_memory_equal(wbuf, rbuf, (size_t)n * BS);
		}
		/* A read past the end fails that I/O alone. */
		ios[0] = (struct dev_io){ .dev = d, .op = DEV_READ, .off = 0, .buf = rbuf, .len = BS };
		ios[1] = (struct dev_io){ .dev = d, .op = DEV_READ, .off = IMG_SIZE, .buf = rbuf + BS,
					  .len = BS };
		abatch_run(be, ios, 2);
		assert_int_equal(ios[0].res, 0);
		assert_true(ios[1].res < 0);
		dev_async_drain(be);
		dev_backend_destroy(be);
		dev_close(d);
		drop_image(path);
		free(ios);
		free(wbuf);
		free(rbuf);
	}
}

/* dev_register_buffers: I/Os from inside the registered region (io_uring
 * fixed buffers), from outside it and straddling its end all move the
 * right bytes; a second region is refused; a backend without an engine
 * for it says so. */
static void test_async_fixed(void **state)
{
	struct dev_backend *be = new_backend("uring");
	char *path = make_image(IMG_SIZE);
	struct dev *d = open_dev(be, path, true);
	uint8_t *mem = xalloc(64 * BS), *reg = mem + 8 * BS, *orig = xalloc(64 * BS);
	/* Blocks of mem: inside [8, 40), before it, across its end. */
	static const unsigned at[] = { 8, 20, 0, 36 }, len[] = { 4, 16, 6, 8 };
	struct dev_io ios[4];

	(void)state;
	assert_true(dev_async_supported(be));
	assert_int_equal(dev_register_buffers(be, reg, 32 * BS), 0);
	assert_int_equal(dev_register_buffers(be, reg, 32 * BS), -EBUSY);
	for (unsigned round = 0; round < 2; round++) {
		pattern(mem, 64 * BS, 7 + round);
		memcpy(orig, mem, 64 * BS);
		for (unsigned i = 0; i < 4; i++)
			ios[i] = (struct dev_io){ .dev = d, .op = DEV_WRITE,
						  .off = (uint64_t)i * 64 * BS,
						  .buf = mem + (size_t)at[i] * BS,
						  .len = len[i] * BS, .fua = round == 1 };
		abatch_run(be, ios, 4);
		for (unsigned i = 0; i < 4; i++)
			assert_int_equal(ios[i].res, 0);
		/* Read each back into another of the places and compare. */
		for (unsigned i = 0; i < 4; i++) {
			uint8_t *dst = mem + (size_t)at[(i + 1) % 4] * BS;

			memset(dst, 0, (size_t)len[i] * BS);
			ios[0] = (struct dev_io){ .dev = d, .op = DEV_READ,
						  .off = (uint64_t)i * 64 * BS, .buf = dst,
						  .len = len[i] * BS };
			abatch_run(be, ios, 1);
			assert_int_equal(ios[0].res, 0);
			assert_memory_equal(dst, orig + (size_t)at[i] * BS, (size_t)len[i] * BS);
		}
	}
	dev_async_drain(be);
	dev_backend_destroy(be);
	dev_close(d);

	be = new_backend("file");
	assert_int_equal(dev_register_buffers(be, reg, 32 * BS), -EOPNOTSUPP);
	dev_backend_destroy(be);
	drop_image(path);
	free(mem);
	free(orig);
}

/* Packed batches (reads) one at a time all complete on one thread of the
 * io_uring engine's, where unpacked ones take turns; every one reads the
 * right bytes. */
static void test_async_pack(void **state)
{
	struct dev_backend *be = new_backend("uring");
	char *path = make_image(IMG_SIZE);
	struct dev *d = open_dev(be, path, true);
	uint8_t *wbuf = xalloc(8 * BS), *rbuf = xalloc(BS);
	struct dev_io io = { .dev = d, .op = DEV_WRITE, .off = 0, .buf = wbuf, .len = 8 * BS };
	pthread_t first = pthread_self(), t;
	bool moved = false;

	(void)state;
	assert_true(dev_async_supported(be));
	pattern(wbuf, 8 * BS, 3);
	abatch_run(be, &io, 1);
	assert_int_equal(io.res, 0);
	for (unsigned i = 0; i < 8; i++) {
		io = (struct dev_io){ .dev = d, .op = DEV_READ, .off = (uint64_t)i * BS,
				      .buf = rbuf, .len = BS };
		t = abatch_run_pack(be, &io, 1, true);
		assert_int_equal(io.res, 0);
		assert_memory_equal(rbuf, wbuf + (size_t)i * BS, BS);
		if (i == 0)
			first = t;
		assert_true(pthread_equal(t, first));
	}
	/* Unpacked: round robin over the engine's two threads. */
	for (unsigned i = 0; i < 4; i++) {
		io = (struct dev_io){ .dev = d, .op = DEV_READ, .off = 0, .buf = rbuf, .len = BS };
		moved |= !pthread_equal(abatch_run_pack(be, &io, 1, false), first);
	}
	assert_true(moved);
	dev_async_drain(be);
	dev_backend_destroy(be);
	dev_close(d);
	drop_image(path);
	free(wbuf);
	free(rbuf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_backend_names),
		cmocka_unit_test(test_open_errors),
		cmocka_unit_test(test_rw_matrix),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_reopen_after_close),
		cmocka_unit_test(test_fault_rules),
		cmocka_unit_test(test_fault_parse),
		cmocka_unit_test(test_fault_journal),
		cmocka_unit_test(test_async_batches),
		cmocka_unit_test(test_async_fixed),
		cmocka_unit_test(test_async_pack),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
