// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Description: POSIX behaviours real programs rely on, checked through the
 * kernel on a mounted twinfs (or any file system, to compare):
 *
 *   readdir DIR SECONDS       one process renames files in a 5,000-entry
 *                             directory while another lists it over and
 *                             over: no pass may return a name twice or
 *                             more entries than ever existed, every entry
 *                             left alone appears in every pass, and after
 *                             rewinddir a new entry appears
 *   handle-save PATH OUT      name_to_handle_at(PATH) into the file OUT;
 *                             prints the inode number
 *   handle-open MNT HFILE     drop the kernel's caches, open_by_handle_at
 *                             the saved handle, print the first line read
 *                             (exit 0), or "ESTALE" (exit 3)
 *   mmap-dio FILE             open O_DIRECT|O_RDWR, map it MAP_SHARED, write
 *                             through the map and through pwrite, msync,
 *                             and read back coherently both ways
 *
 * Exit 0 when the check passes, 1 when it fails, 2 on usage errors.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NSTABLE 2500		/* never touched: must appear in every pass */
#define NMOVING 2500		/* renamed back and forth all the time */
#define NAMELEN 16

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "posixcheck: FAIL: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	return 1;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- readdir ---- */

static int touch_at(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);

	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

/* The renamer: m<i> <-> n<i> for every moving entry, round after round,
 * plus one file created and removed now and then. */
static void renamer(int dfd, double until)
{
	char a[NAMELEN], b[NAMELEN];

	for (unsigned round = 0; now_s() < until; round++) {
		for (unsigned i = 0; i < NMOVING; i++) {
			snprintf(a, sizeof(a), "%c%05u", round & 1 ? 'n' : 'm', i);
			snprintf(b, sizeof(b), "%c%05u", round & 1 ? 'm' : 'n', i);
			if (renameat(dfd, a, dfd, b) < 0) {
				perror("renameat");
				_exit(1);
			}
			if (i % 500 == 0) {
				if (touch_at(dfd, "tmp") < 0 || unlinkat(dfd, "tmp", 0) < 0) {
					perror("tmp");
					_exit(1);
				}
			}
		}
	}
	_exit(0);
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* One pass over dir (from where it is: opendir or rewinddir).  Returns the
 * number of entries (without "." and ".."), or -1 after printing why. */
static long one_pass(DIR *dir, char **names, size_t cap, unsigned *stable_seen)
{
	struct dirent *de;
	size_t n = 0;

	memset(stable_seen, 0, NSTABLE * sizeof(*stable_seen));
	errno = 0;
	while ((de = readdir(dir))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (n == cap) {
			fail("a pass returned more than %zu entries (at most %d ever exist)",
			     cap, NSTABLE + NMOVING + 1);
			return -1;
		}
		size_t len = strlen(de->d_name);
		if (len >= NAMELEN) {
			fail("unexpected entry '%s'", de->d_name);
			return -1;
		}
		memcpy(names[n++], de->d_name, len + 1);
		if (de->d_name[0] == 's')
			stable_seen[atoi(de->d_name + 1) % NSTABLE]++;
	}
	if (errno) {
		fail("readdir: %s", strerror(errno));
		return -1;
	}
	qsort(names, n, sizeof(*names), cmp_names);
	for (size_t i = 1; i < n; i++) {
		if (!strcmp(names[i - 1], names[i])) {
			fail("a pass returned '%s' twice (%zu entries in that pass)", names[i], n);
			return -1;
		}
	}
	for (unsigned i = 0; i < NSTABLE; i++) {
		if (stable_seen[i] != 1) {
			fail("s%05u, never touched, appeared %u times in a pass", i,
			     stable_seen[i]);
			return -1;
		}
	}
	return (long)n;
}

static int cmd_readdir(const char *path, double secs)
{
	size_t cap = NSTABLE + NMOVING + 1;
	char **names = calloc(cap, sizeof(*names));
	unsigned *stable_seen = calloc(NSTABLE, sizeof(*stable_seen));
	char name[NAMELEN];
	unsigned passes = 0;
	long most = 0;
	int dfd, status, ret = 1;
	pid_t pid;
	DIR *dir;

	if (!names || !stable_seen)
		return fail("out of memory");
	for (size_t i = 0; i < cap; i++)
		if (!(names[i] = malloc(NAMELEN)))
			return fail("out of memory");
	if (mkdir(path, 0755) < 0)
		return fail("mkdir %s: %s", path, strerror(errno));
	dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return fail("open %s: %s", path, strerror(errno));
	/* Interleaved, so renamed entries sit among the stable ones. */
	for (unsigned i = 0; i < NSTABLE || i < NMOVING; i++) {
		snprintf(name, sizeof(name), "s%05u", i);
		if (i < NSTABLE && touch_at(dfd, name) < 0)
			return fail("create %s: %s", name, strerror(errno));
		snprintf(name, sizeof(name), "m%05u", i);
		if (i < NMOVING && touch_at(dfd, name) < 0)
			return fail("create %s: %s", name, strerror(errno));
	}

	pid = fork();
	if (pid < 0)
		return fail("fork: %s", strerror(errno));
	if (pid == 0)
		renamer(dfd, now_s() + secs);

	double until = now_s() + secs;
	while (now_s() < until) {
		dir = opendir(path);
		if (!dir) {
			fail("opendir: %s", strerror(errno));
			goto out;
		}
		long n = one_pass(dir, names, cap, stable_seen);
		closedir(dir);
		if (n < 0)
			goto out;
		if (n > most)
			most = n;
		passes++;
	}
	ret = 0;
out:
	if (ret)
		kill(pid, SIGKILL);
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status)) {
		if (!ret)
			ret = fail("the renamer failed");
	}
	if (ret)
		return ret;
	printf("readdir: %u passes during renames, at most %ld entries in one\n", passes, most);

	/* A pass ends where the directory ended when it started, and
	 * rewinddir starts a new one that sees what was added. */
	dir = opendir(path);
	if (!dir)
		return fail("opendir: %s", strerror(errno));
	if (one_pass(dir, names, cap, stable_seen) < 0)
		return 1;
	if (touch_at(dfd, "late") < 0)
		return fail("create late: %s", strerror(errno));
	rewinddir(dir);
	long n = one_pass(dir, names, cap, stable_seen);
	if (n < 0)
		return 1;
	bool late = false;
	for (long i = 0; i < n; i++)
		late |= !strcmp(names[i], "late");
	closedir(dir);
	close(dfd);
	for (size_t i = 0; i < cap; i++)
		free(names[i]);
	free(names);
	free(stable_seen);
	if (!late)
		return fail("an entry created before rewinddir is missing after it");
	return 0;
}

/* ---- file handles ---- */

#define HANDLE_MAX 128

static int cmd_handle_save(const char *path, const char *out)
{
	struct file_handle *h = malloc(sizeof(*h) + HANDLE_MAX);
	struct stat st;
	int mount_id, fd;

	if (!h)
		return fail("out of memory");
	h->handle_bytes = HANDLE_MAX;
	if (name_to_handle_at(AT_FDCWD, path, h, &mount_id, 0) < 0)
		return fail("name_to_handle_at %s: %s", path, strerror(errno));
	if (stat(path, &st) < 0)
		return fail("stat %s: %s", path, strerror(errno));
	fd = open(out, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, h, sizeof(*h) + h->handle_bytes) !=
			      (ssize_t)(sizeof(*h) + h->handle_bytes))
		return fail("write %s: %s", out, strerror(errno));
	close(fd);
	free(h);
	printf("%llu\n", (unsigned long long)st.st_ino);
	return 0;
}

static int drop_caches(void)
{
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);

	sync();
	if (fd < 0 || write(fd, "3", 1) != 1)
		return fail("drop_caches: %s", strerror(errno));
	close(fd);
	return 0;
}

static int cmd_handle_open(const char *mnt, const char *hfile)
{
	struct file_handle *h = malloc(sizeof(*h) + HANDLE_MAX);
	char buf[256];
	int mfd, hfd, fd;
	ssize_t n;

	if (!h)
		return fail("out of memory");
	hfd = open(hfile, O_RDONLY | O_CLOEXEC);
	if (hfd < 0 || read(hfd, h, sizeof(*h) + HANDLE_MAX) < (ssize_t)sizeof(*h))
		return fail("read %s: %s", hfile, strerror(errno));
	close(hfd);
	mfd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (mfd < 0)
		return fail("open %s: %s", mnt, strerror(errno));
	/* Only a handle whose inode the kernel no longer caches reaches the
	 * file system's export code. */
	if (drop_caches())
		return 1;
	fd = open_by_handle_at(mfd, h, O_RDONLY | O_CLOEXEC);
	free(h);
	if (fd < 0 && errno == ESTALE) {
		printf("ESTALE\n");
		return 3;
	}
	if (fd < 0)
		return fail("open_by_handle_at: %s", strerror(errno));
	n = read(fd, buf, sizeof(buf) - 1);
	if (n < 0 && errno == EISDIR) {
		printf("(directory)\n");
		return 0;
	}
	if (n < 0)
		return fail("read through the handle: %s", strerror(errno));
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	printf("%s\n", buf);
	return 0;
}

/* ---- shared mmap of a direct-I/O open ---- */

#define MAP_LEN (64 << 10)
#define PG 4096

static void *aligned(size_t len, int fill_byte)
{
	void *p;

	if (posix_memalign(&p, PG, len))
		return NULL;
	memset(p, fill_byte, len);
	return p;
}

static int cmd_mmap_dio(const char *path)
{
	unsigned char *a = aligned(4 * PG, 'A'), *rd = aligned(4 * PG, 0), *c = aligned(PG, 'C');
	unsigned char *map;
	int fd;

	if (!a || !rd || !c)
		return fail("out of memory");
	fd = open(path, O_CREAT | O_RDWR | O_DIRECT | O_CLOEXEC, 0644);
	if (fd < 0)
		return fail("open O_DIRECT %s: %s", path, strerror(errno));
	if (ftruncate(fd, MAP_LEN) < 0)
		return fail("ftruncate: %s", strerror(errno));
	if (pwrite(fd, a, 4 * PG, 0) != 4 * PG)
		return fail("pwrite: %s", strerror(errno));
	map = mmap(NULL, MAP_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		return fail("mmap MAP_SHARED of an O_DIRECT open: %s", strerror(errno));

	/* direct write, then the map */
	if (memcmp(map, a, 4 * PG))
		return fail("the map does not show what pwrite wrote before it");
	/* the map, msync, then a direct read */
	memset(map + 4 * PG, 'B', 4 * PG);
	if (msync(map, MAP_LEN, MS_SYNC) < 0)
		return fail("msync: %s", strerror(errno));
	if (pread(fd, rd, 4 * PG, 4 * PG) != 4 * PG)
		return fail("pread: %s", strerror(errno));
	for (size_t i = 0; i < 4 * PG; i++)
		if (rd[i] != 'B')
			return fail("direct read at %zu after msync: '%c', not 'B'", 4 * PG + i,
				    rd[i]);
	/* a direct write over mapped pages, then the map */
	if (pwrite(fd, c, PG, 0) != PG)
		return fail("pwrite: %s", strerror(errno));
	for (size_t i = 0; i < PG; i++)
		if (map[i] != 'C')
			return fail("the map at %zu after a direct write: '%c', not 'C'", i,
				    map[i]);
	if (map[PG] != 'A')
		return fail("the map beyond the direct write changed");
	/* the map again, fsync, and a fresh buffered open sees it all */
	memset(map + 8 * PG, 'D', PG);
	if (fsync(fd) < 0)
		return fail("fsync: %s", strerror(errno));
	munmap(map, MAP_LEN);
	close(fd);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fail("open %s: %s", path, strerror(errno));
	unsigned char *all = aligned(MAP_LEN, 0);
	if (!all || pread(fd, all, MAP_LEN, 0) != MAP_LEN)
		return fail("read back: %s", strerror(errno));
	close(fd);
	free(a);
	free(rd);
	free(c);
	for (size_t i = 0; i < MAP_LEN; i++) {
		unsigned char want = i < PG ? 'C' : i < 4 * PG ? 'A' : i < 8 * PG ? 'B' :
				     i < 9 * PG ? 'D' : 0;
		if (all[i] != want)
			return fail("read back at %zu: 0x%02x, expected 0x%02x", i, all[i],
				    want);
	}
	free(all);
	printf("mmap-dio: shared map and direct I/O agree\n");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "readdir"))
		return cmd_readdir(argv[2], atof(argv[3]));
	if (argc == 4 && !strcmp(argv[1], "handle-save"))
		return cmd_handle_save(argv[2], argv[3]);
	if (argc == 4 && !strcmp(argv[1], "handle-open"))
		return cmd_handle_open(argv[2], argv[3]);
	if (argc == 3 && !strcmp(argv[1], "mmap-dio"))
		return cmd_mmap_dio(argv[2]);
	fprintf(stderr, "usage: %s readdir DIR SECONDS | handle-save PATH OUT |\n"
		"       handle-open MNT HANDLEFILE | mmap-dio FILE\n", argv[0]);
	return 2;
}
