// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Description: asynchronous O_DIRECT writes beside buffered readers.
 * diocache FILE SECONDS: asynchronous O_DIRECT writes (libaio) beside
 * buffered readers of the same file, the load of xfstests generic/451.
 * Two threads open the file without O_DIRECT, read it whole and close it,
 * over and over; the main thread writes all of it with one io_submit at a
 * time, alternating two patterns, and after each write checks that a
 * buffered read (a fresh open) and an O_DIRECT read return what it wrote.
 * A page a reader put in the page cache during the write, with the old
 * data, must not survive it.  Exit 0 after SECONDS without a stale read,
 * 1 on the first one (which it names), 2 on an error.
 */
#include <fcntl.h>
#include <libaio.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SIZE (640u * 1024)

static const char *path;
static atomic_bool stop;

static void die(const char *what)
{
	perror(what);
	exit(2);
}

static void *reader(void *arg)
{
	char *buf = malloc(SIZE);

	while (buf && !atomic_load(&stop)) {
		int fd = open(path, O_RDONLY);

		if (fd < 0)
			die("open reader");
		if (pread(fd, buf, SIZE, 0) < 0)
			die("pread reader");
		close(fd);
	}
	free(buf);
	return arg;
}

/* 0 if FILE (opened with @flags) reads back as @want. */
static int check(const void *want, void *buf, int flags, const char *how, unsigned long cycle)
{
	int fd = open(path, O_RDONLY | flags);

	if (fd < 0)
		die("open check");
	if (pread(fd, buf, SIZE, 0) != SIZE)
		die("pread check");
	close(fd);
	for (size_t i = 0; i < SIZE; i++) {
		if (((const char *)want)[i] != ((char *)buf)[i]) {
			printf("stale data from a %s read after write %lu: byte %zu is 0x%02x, "
			       "the write put 0x%02x\n", how, cycle, i, ((unsigned char *)buf)[i],
			       ((const unsigned char *)want)[i]);
			return 1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	void *pat[2], *buf;
	io_context_t ctx = 0;
	pthread_t th[2];
	time_t end;
	unsigned long cycle = 0;
	int fd, rc = 0;

	if (argc != 3) {
		fprintf(stderr, "usage: diocache FILE SECONDS\n");
		return 2;
	}
	path = argv[1];
	end = time(NULL) + atoi(argv[2]);
	if (posix_memalign(&pat[0], 4096, SIZE) || posix_memalign(&pat[1], 4096, SIZE) ||
	    posix_memalign(&buf, 4096, SIZE))
		die("posix_memalign");
	memset(pat[0], 0x55, SIZE);
	memset(pat[1], 0xaa, SIZE);
	fd = open(path, O_RDWR | O_CREAT | O_DIRECT, 0644);
	if (fd < 0 || pwrite(fd, pat[0], SIZE, 0) != SIZE || fsync(fd) < 0)
		die("set up");
	close(fd);
	if (io_setup(1, &ctx) < 0)
		die("io_setup");
	for (int i = 0; i < 2; i++)
		if (pthread_create(&th[i], NULL, reader, NULL))
			die("pthread_create");
	while (!rc && time(NULL) < end) {
		struct iocb cb, *cbs[1] = { &cb };
		struct io_event ev;
		void *p = pat[++cycle & 1];

		fd = open(path, O_RDWR | O_DIRECT);
		if (fd < 0)
			die("open writer");
		io_prep_pwrite(&cb, fd, p, SIZE, 0);
		if (io_submit(ctx, 1, cbs) != 1 || io_getevents(ctx, 1, 1, &ev, NULL) != 1)
			die("io_submit");
		if ((long)ev.res != (long)SIZE) {
			fprintf(stderr, "write %lu: result %ld\n", cycle, (long)ev.res);
			exit(2);
		}
		close(fd);
		rc = check(p, buf, 0, "buffered", cycle) || check(p, buf, O_DIRECT, "direct", cycle);
	}
	atomic_store(&stop, true);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	io_destroy(ctx);
	free(pat[0]);
	free(pat[1]);
	free(buf);
	if (!rc)
		printf("%lu asynchronous direct writes beside buffered readers, no stale read\n",
		       cycle);
	return rc;
}
