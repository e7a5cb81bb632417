// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Description: complat: does an unrelated request wait behind work on the
 * I/O completion thread?  Library-level (no FUSE), io_uring asynchronous
 * backend, two RAM-backed images (files on /dev/shm).  One thread reads 4
 * KiB at random offsets of file B with tfs_read_async, one read at a time,
 * and records each read's latency, while file A gets:
 *
 *   idle     nothing
 *   repair   its copies on image 0 corrupted over and over and read back
 *            asynchronously (64 KiB, 8 in flight): about half of those
 *            reads need the other copy and a repair write
 *   commit   asynchronous 4 KiB random overwrites (16 in flight) with no
 *            background commit: the log's pending chunk fills on the
 *            completions, and each time a whole log commit round runs
 *
 * Prints the reads of B done and their p50, p99 and p99.9 latency in
 * microseconds, and the requests on A done per second.  Run it before and after a change, interleaved, and take
 * medians: the machine is shared.
 *
 *   complat MODE [SECONDS]
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fs_i.h"
#include "tlog.h"

#define MiB (1024ull * 1024)
#define BS 4096u
#define A_SIZE (32 * MiB)
#define B_SIZE (8 * MiB)
#define MAXLAT 2000000

struct flight {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned n;
};

static struct flight fl = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };
static volatile int stop;
static struct tfs *fs;
static struct tfs_file *fa, *fb;
static char imgs[2][64];

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void flight_add(void)
{
	pthread_mutex_lock(&fl.mu);
	fl.n++;
	pthread_mutex_unlock(&fl.mu);
}

static void flight_wait(unsigned max)
{
	pthread_mutex_lock(&fl.mu);
	while (fl.n > max)
		pthread_cond_wait(&fl.cv, &fl.mu);
	pthread_mutex_unlock(&fl.mu);
}

static void flight_done(void)
{
	pthread_mutex_lock(&fl.mu);
	fl.n--;
	pthread_cond_broadcast(&fl.cv);
	pthread_mutex_unlock(&fl.mu);
}

static _Atomic unsigned long a_ops;	/* requests on A done */

static void a_read_cb(void *arg, ssize_t res, void *buf, size_t off)
{
	tfs_buf_put(fs, buf);
	a_ops++;
	flight_done();
}

static void a_write_cb(void *arg, ssize_t res)
{
	a_ops++;
	flight_done();
}

static int fill_junk(void *ctx, void *dst, size_t len)
{
	memset(dst, *(int *)ctx & 0xff, len);
	return 0;
}

/* A's blocks on image 0 overwritten with junk (raw, behind the fs). */
static void corrupt_a(int fd)
{
	static uint8_t junk[BS] __attribute__((aligned(4096)));

	memset(junk, 0x5a, sizeof(junk));
	for (uint64_t b = 0; b < A_SIZE / BS; b++) {
		struct extent_ent e;

		if (inode_extent_lookup(fa->ip, b, &e))
			continue;
		if (e.phys && !(e.phys & EXTENT_UNWRITTEN) &&
		    pwrite(fd, junk, BS, (off_t)(EXTENT_PHYS(e.phys) * BS)) != BS)
			perror("complat: corrupt");
	}
}

static void *disturb(void *arg)
{
	const char *mode = arg;
	unsigned seed = 1;
	int fd = open(imgs[0], O_WRONLY);

	while (!stop) {
		if (!strcmp(mode, "repair")) {
			corrupt_a(fd);
			for (uint64_t off = 0; off < A_SIZE && !stop; off += 64 * 1024) {
				flight_add();
				tfs_read_async(fa, (off_t)off, 64 * 1024, a_read_cb, NULL);
				flight_wait(8);
			}
		} else if (!strcmp(mode, "commit")) {
			int v = (int)rand_r(&seed);

			flight_add();
			tfs_write_async(fa, (off_t)(v % (A_SIZE / BS)) * BS, BS, fill_junk, &v, 0,
					a_write_cb, NULL);
			flight_wait(16);
		} else {
			usleep(10000);
		}
	}
	flight_wait(0);
	close(fd);
	return NULL;
}

struct bread {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool done;
};

static void b_read_cb(void *arg, ssize_t res, void *buf, size_t off)
{
	struct bread *r = arg;

	tfs_buf_put(fs, buf);
	if (res != BS)
		fprintf(stderr, "complat: read of B: %zd\n", res);
	pthread_mutex_lock(&r->mu);
	r->done = true;
	pthread_cond_signal(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

static void quiet(int level, const char *msg)
{
	if (level <= LOG_ERR && !strstr(msg, "checksum") && !strstr(msg, "repaired"))
		fprintf(stderr, "complat: %s\n", msg);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static int setup(void)
{
	const char *devs[2] = { imgs[0], imgs[1] };
	/* Format v2, what mkfs.twinfs makes (the library defaults to v1). */
	struct tfs_format_opts fo = { .force = true, .backend = "uring", .v2 = true };
	struct tfs_opts mo = { .devs = devs, .ndevs = 2, .backend = "uring",
			       .commit_ms = 600000 };
	struct tfs_cred c = { 0 };
	struct stat st;
	char err[256] = "";
	uint8_t *buf = malloc(MiB);

	for (int i = 0; i < 2; i++) {
		int fd;

		snprintf(imgs[i], sizeof(imgs[i]), "/dev/shm/complat-%d.XXXXXX", i);
		fd = mkstemp(imgs[i]);
		if (fd < 0 || ftruncate(fd, (off_t)(512 * MiB)) < 0)
			return -errno;
		close(fd);
	}
	if (tfs_format(devs, 2, &fo, err, sizeof(err)) || tfs_mount(&mo, &fs, err, sizeof(err))) {
		fprintf(stderr, "complat: %s\n", err);
		return -EIO;
	}
	if (tfs_create(fs, TFS_ROOT_INO, "a", 0644, O_RDWR, &c, &st, &fa) ||
	    tfs_create(fs, TFS_ROOT_INO, "b", 0644, O_RDWR, &c, &st, &fb))
		return -EIO;
	memset(buf, 0x33, MiB);
	for (uint64_t off = 0; off < A_SIZE; off += MiB)
		if (tfs_pwrite(fa, buf, MiB, (off_t)off, 0) != (ssize_t)MiB)
			return -EIO;
	for (uint64_t off = 0; off < B_SIZE; off += MiB)
		if (tfs_pwrite(fb, buf, MiB, (off_t)off, 0) != (ssize_t)MiB)
			return -EIO;
	free(buf);
	return tfs_fsync(fs, tfs_file_ino(fa), false);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "idle";
	double secs = argc > 2 ? atof(argv[2]) : 5;
	uint32_t *lat = malloc(MAXLAT * sizeof(*lat));
	struct bread r = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false };
	unsigned seed = 7, n = 0;
	uint64_t end;
	pthread_t th;

	tfs_set_log_fn(quiet);	/* one csum error line per repair otherwise */
	if (!lat || setup()) {
		fprintf(stderr, "complat: setup failed\n");
		return 1;
	}
	pthread_create(&th, NULL, disturb, (void *)mode);
	usleep(200000);
	end = now_ns() + (uint64_t)(secs * 1e9);
	while (n < MAXLAT && now_ns() < end) {
		uint64_t t0 = now_ns();

		r.done = false;
		tfs_read_async(fb, (off_t)(rand_r(&seed) % (B_SIZE / BS)) * BS, BS, b_read_cb, &r);
		pthread_mutex_lock(&r.mu);
		while (!r.done)
			pthread_cond_wait(&r.cv, &r.mu);
		pthread_mutex_unlock(&r.mu);
		lat[n++] = (uint32_t)((now_ns() - t0) / 1000);
	}
	stop = 1;
	pthread_join(th, NULL);
	qsort(lat, n, sizeof(*lat), cmp_u32);
	printf("complat %s: %u reads of B, p50 %u us, p99 %u us, p99.9 %u us, "
	       "%.0f requests/s on A, repaired %llu\n",
	       mode, n, lat[n / 2], lat[n * 99 / 100], lat[n * 999 / 1000], a_ops / secs,
	       (unsigned long long)(atomic_load(&fs->mirror.ctr[0].repaired) +
				    atomic_load(&fs->mirror.ctr[1].repaired)));
	tfs_release(fa);
	tfs_release(fb);
	tfs_abandon(fs);
	unlink(imgs[0]);
	unlink(imgs[1]);
	free(lat);
	return 0;
}
