// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: exercise every file system operation of twinfs through the kernel mount */
/*
 * opcheck: run by tests/integration/ops.sh against a mounted twinfs.
 *
 *   opcheck DIR all STATE    run every check under DIR, then create a tree
 *                            whose inode numbers and metadata go to STATE
 *   opcheck DIR post STATE   after a remount: the tree of STATE is intact
 *                            (same inode numbers, data, modes, xattrs, links)
 *   opcheck DIR NAME...      run only the named checks (for debugging)
 *
 * Each check works in its own subdirectory, prints every failure with its
 * line and errno, and the program exits 1 if any check failed.  This file
 * holds the driver, the shared helpers (opcheck.h) and the namespace and
 * metadata checks; the data-path checks are in opcheck_data.c.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "opcheck.h"

const char *base;
const char *cur;

/* Path under the check's directory; a ring of buffers so a call can take
 * several. */
const char *P(const char *fmt, ...)
{
	static char ring[8][4096];
	static unsigned n;
	char rel[2048];
	va_list ap;
	char *out = ring[n++ % 8];

	va_start(ap, fmt);
	vsnprintf(rel, sizeof(rel), fmt, ap);
	va_end(ap);
	snprintf(out, sizeof(ring[0]), "%s/%s/%s", base, cur, rel);
	return out;
}

/* Byte at file offset o of pattern tag: depends on the offset, so data
 * written at the wrong place does not compare equal. */
static uint8_t pat(uint64_t o, unsigned tag)
{
	uint64_t x = (o + 1) * 0x9E3779B97F4A7C15ull ^ ((uint64_t)tag << 56);
	return (uint8_t)(x >> 29);
}

void fill(uint8_t *b, size_t len, uint64_t off, unsigned tag)
{
	for (size_t i = 0; i < len; i++)
		b[i] = pat(off + i, tag);
}

void *xmalloc(size_t n)
{
	void *p;

	if (posix_memalign(&p, 4096, n ? n : 1)) {
		perror("opcheck: posix_memalign");
		exit(2);
	}
	memset(p, 0, n);
	return p;
}

/* Read len bytes at off in full (short only at EOF).  Returns bytes or -1. */
ssize_t read_full(int fd, void *buf, size_t len, off_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t r = pread(fd, (char *)buf + done, len - done, off + (off_t)done);
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		done += (size_t)r;
	}
	return (ssize_t)done;
}

ssize_t write_full(int fd, const void *buf, size_t len, off_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t r = pwrite(fd, (const char *)buf + done, len - done, off + (off_t)done);
		if (r <= 0)
			return -1;
		done += (size_t)r;
	}
	return (ssize_t)done;
}

/* First differing offset of a and b, or -1. */
long diff_at(const uint8_t *a, const uint8_t *b, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (a[i] != b[i])
			return (long)i;
	return -1;
}

int write_pattern_file(const char *path, size_t len, unsigned tag)
{
	uint8_t *b = xmalloc(len);
	int fd = SYS(open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644));

	fill(b, len, 0, tag);
	CHECK(write_full(fd, b, len, 0) == (ssize_t)len, "write %s: %s", path, strerror(errno));
	SYS(close(fd));
	free(b);
	return 0;
}

/* The file holds exactly len bytes of pattern tag. */
int check_pattern_file(const char *path, size_t len, unsigned tag)
{
	uint8_t *want = xmalloc(len + 1), *got = xmalloc(len + 1);
	int fd = SYS(open(path, O_RDONLY));
	ssize_t r = read_full(fd, got, len + 1, 0);
	long d;

	CHECK(r == (ssize_t)len, "%s: read %zd bytes, want %zu (%s)", path, r, len,
	      r < 0 ? strerror(errno) : "");
	fill(want, len, 0, tag);
	d = diff_at(want, got, len);
	CHECK(d < 0, "%s: content differs at offset %ld", path, d);
	SYS(close(fd));
	free(want);
	free(got);
	return 0;
}

int statfs_free(uint64_t *bytes)
{
	struct statvfs sv;

	SYS(statvfs(base, &sv));
	*bytes = (uint64_t)sv.f_bfree * sv.f_frsize;
	return 0;
}

/* Free bytes once deferred frees have settled: frees become visible only
 * after the metadata that drops the blocks is durable, so sync until two
 * readings agree. */
int settled_free(int fd, uint64_t *bytes)
{
	uint64_t prev = UINT64_MAX;

	for (int i = 0; i < 20; i++) {
		SYS(syncfs(fd));
		CHECK(statfs_free(bytes) == 0, "statfs");
		if (*bytes == prev)
			return 0;
		prev = *bytes;
		usleep(50000);
	}
	return 0;
}

/* Create an empty file (O_CREAT | flags).  Returns 0 or -1 with errno. */
int touch(const char *path, int flags)
{
	int fd = open(path, O_CREAT | O_WRONLY | flags, 0644);

	if (fd < 0)
		return -1;
	return close(fd);
}

/* ---- checks ------------------------------------------------------------- */

static int t_open_flags(void)
{
	char buf[64] = "";
	struct stat st;
	int fd;

	fd = SYS(open(P("a"), O_CREAT | O_EXCL | O_RDWR, 0640));
	SYS(fstat(fd, &st));
	CHECK(S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0640,
	      "new file mode %o, want regular 0640", st.st_mode);
	CHECK(st.st_size == 0, "new file size %ld", (long)st.st_size);
	CHECK(write(fd, "hello world", 11) == 11, "write: %s", strerror(errno));
	SYS(close(fd));
	FAILS(open(P("a"), O_CREAT | O_EXCL | O_RDWR, 0640), EEXIST);
	FAILS(open(P("missing"), O_RDONLY), ENOENT);

	/* O_APPEND: every write goes to the end, whatever the position. */
	fd = SYS(open(P("a"), O_WRONLY | O_APPEND));
	SYS(lseek(fd, 0, SEEK_SET));
	CHECK(write(fd, "!!", 2) == 2, "append write: %s", strerror(errno));
	SYS(close(fd));
	fd = SYS(open(P("a"), O_RDONLY));
	CHECK(read(fd, buf, sizeof(buf)) == 13, "size after append");
	CHECK(memcmp(buf, "hello world!!", 13) == 0, "append content '%.13s'", buf);
	SYS(close(fd));

	/* O_TRUNC on an existing file, through open and through creat. */
	fd = SYS(open(P("a"), O_WRONLY | O_TRUNC));
	SYS(fstat(fd, &st));
	CHECK(st.st_size == 0, "size after O_TRUNC %ld", (long)st.st_size);
	SYS(close(fd));
	SYS(stat(P("a"), &st));
	CHECK(st.st_size == 0, "size after O_TRUNC (stat) %ld", (long)st.st_size);
	CHECK(write_pattern_file(P("b"), 10000, 1) == 0, "write b");
	fd = SYS(open(P("b"), O_CREAT | O_TRUNC | O_RDWR, 0644));
	CHECK(read(fd, buf, sizeof(buf)) == 0, "read after O_CREAT|O_TRUNC returned data");
	SYS(close(fd));
	/* Linux truncates on O_RDONLY|O_TRUNC too (the kernel has checked
	 * write permission); under atomic_o_trunc that is the daemon's job.
	 * stable_post checks the size on disk: the writeback cache would
	 * hide a miss here. */
	CHECK(write_pattern_file(P("rotrunc"), 10000, 2) == 0, "write rotrunc");
	fd = SYS(open(P("rotrunc"), O_RDONLY | O_TRUNC));
	SYS(fstat(fd, &st));
	CHECK(st.st_size == 0, "size after O_RDONLY|O_TRUNC %ld", (long)st.st_size);
	SYS(close(fd));

	/* mknod of a regular file, access(2). */
	SYS(mknod(P("c"), S_IFREG | 0600, 0));
	SYS(stat(P("c"), &st));
	CHECK(S_ISREG(st.st_mode) && st.st_size == 0, "mknod regular: mode %o", st.st_mode);
	SYS(access(P("c"), R_OK | W_OK));
	FAILS(access(P("nope"), F_OK), ENOENT);

	/* Names: 255 bytes is fine, 256 is not. */
	char name[300];
	memset(name, 'n', 255);
	name[255] = '\0';
	fd = SYS(open(P("%s", name), O_CREAT | O_WRONLY, 0644));
	SYS(close(fd));
	SYS(stat(P("%s", name), &st));
	name[255] = 'n';
	name[256] = '\0';
	FAILS(open(P("%s", name), O_CREAT | O_WRONLY, 0644), ENAMETOOLONG);
	return 0;
}

static int t_special(void)
{
	struct stat st;

	SYS(mkfifo(P("fifo"), 0644));
	SYS(lstat(P("fifo"), &st));
	CHECK(S_ISFIFO(st.st_mode) && (st.st_mode & 07777) == 0644, "fifo mode %o", st.st_mode);
	SYS(mknod(P("sock"), S_IFSOCK | 0600, 0));
	SYS(lstat(P("sock"), &st));
	CHECK(S_ISSOCK(st.st_mode), "socket mode %o", st.st_mode);
	SYS(mknod(P("null"), S_IFCHR | 0666, makedev(1, 3)));
	SYS(lstat(P("null"), &st));
	CHECK(S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3), "char dev mode %o rdev %lx",
	      st.st_mode, (unsigned long)st.st_rdev);
	SYS(mknod(P("blk"), S_IFBLK | 0600, makedev(7, 200)));
	SYS(lstat(P("blk"), &st));
	CHECK(S_ISBLK(st.st_mode) && st.st_rdev == makedev(7, 200), "block dev mode %o rdev %lx",
	      st.st_mode, (unsigned long)st.st_rdev);
	FAILS(mknod(P("fifo"), S_IFIFO | 0644, 0), EEXIST);
	return 0;
}

static int t_dirs(void)
{
	struct stat st;

	SYS(mkdir(P("d"), 0750));
	SYS(stat(P("d"), &st));
	CHECK(S_ISDIR(st.st_mode) && (st.st_mode & 07777) == 0750, "dir mode %o", st.st_mode);
	FAILS(mkdir(P("d"), 0755), EEXIST);
	SYS(mkdir(P("d/e"), 0755));
	SYS(touch(P("d/e/f"), 0));
	FAILS(rmdir(P("d")), ENOTEMPTY);
	FAILS(rmdir(P("d/e/f")), ENOTDIR);
	FAILS(unlink(P("d/e")), EISDIR);
	FAILS(rmdir(P("d/missing")), ENOENT);
	FAILS(mkdir(P("d/e/f/g"), 0755), ENOTDIR);
	SYS(unlink(P("d/e/f")));
	SYS(rmdir(P("d/e")));
	SYS(rmdir(P("d")));
	FAILS(stat(P("d"), &st), ENOENT);
	return 0;
}

static int t_unlink_open(void)
{
	size_t len = 3 * MiB + 123;
	uint8_t *want = xmalloc(len), *got = xmalloc(len);
	struct stat st;
	int fd;

	CHECK(write_pattern_file(P("u"), len, 4) == 0, "write u");
	fd = SYS(open(P("u"), O_RDWR));
	SYS(unlink(P("u")));
	FAILS(stat(P("u"), &st), ENOENT);
	SYS(fstat(fd, &st));
	CHECK(st.st_nlink == 0, "unlinked open file has nlink %lu", (unsigned long)st.st_nlink);
	fill(want, len, 0, 4);
	CHECK(read_full(fd, got, len, 0) == (ssize_t)len, "read unlinked open file: %s",
	      strerror(errno));
	long d = diff_at(want, got, len);
	CHECK(d < 0, "unlinked open file differs at %ld", d);
	/* Still writable too. */
	CHECK(write_full(fd, "zz", 2, 10) == 2, "write to unlinked open file");
	CHECK(read_full(fd, got, 2, 10) == 2 && memcmp(got, "zz", 2) == 0,
	      "read back write to unlinked file");
	/* A new file may take the name meanwhile. */
	SYS(touch(P("u"), O_EXCL));
	SYS(close(fd));
	SYS(stat(P("u"), &st));
	CHECK(st.st_size == 0, "new file under the old name has size %ld", (long)st.st_size);
	free(want);
	free(got);
	return 0;
}

static int t_symlink(void)
{
	const char *target = "some/where/../over the rainbow";
	char buf[256];
	struct stat st;
	ssize_t n;

	SYS(symlink(target, P("l")));
	SYS(lstat(P("l"), &st));
	CHECK(S_ISLNK(st.st_mode), "symlink mode %o", st.st_mode);
	CHECK(st.st_size == (off_t)strlen(target), "symlink size %ld", (long)st.st_size);
	n = SYS(readlink(P("l"), buf, sizeof(buf)));
	CHECK(n == (ssize_t)strlen(target) && memcmp(buf, target, (size_t)n) == 0,
	      "readlink gave '%.*s'", (int)n, buf);
	/* Following it: dangling gives ENOENT, a valid one reaches the file. */
	FAILS(stat(P("l"), &st), ENOENT);
	CHECK(write_pattern_file(P("target"), 100, 5) == 0, "write target");
	SYS(symlink("target", P("l2")));
	CHECK(check_pattern_file(P("l2"), 100, 5) == 0, "read through symlink");
	FAILS(symlink("x", P("l2")), EEXIST);
	/* A long target (XFS's limit; ours may be larger). */
	char longt[1025];
	memset(longt, 'x', sizeof(longt) - 1);
	longt[sizeof(longt) - 1] = '\0';
	SYS(symlink(longt, P("l3")));
	char *lb = xmalloc(8192);
	n = SYS(readlink(P("l3"), lb, 8192));
	CHECK(n == (ssize_t)strlen(longt) && memcmp(lb, longt, (size_t)n) == 0,
	      "long readlink gave %zd bytes", n);
	free(lb);
	return 0;
}

static int t_hardlink(void)
{
	struct stat a, b;

	CHECK(write_pattern_file(P("a"), 5000, 6) == 0, "write a");
	SYS(link(P("a"), P("b")));
	SYS(stat(P("a"), &a));
	SYS(stat(P("b"), &b));
	CHECK(a.st_ino == b.st_ino, "link has another inode");
	CHECK(a.st_nlink == 2 && b.st_nlink == 2, "nlink %lu/%lu, want 2",
	      (unsigned long)a.st_nlink, (unsigned long)b.st_nlink);
	SYS(mkdir(P("sub"), 0755));
	SYS(link(P("b"), P("sub/c")));
	SYS(stat(P("a"), &a));
	CHECK(a.st_nlink == 3, "nlink %lu, want 3", (unsigned long)a.st_nlink);
	/* A write through one name is seen through the other. */
	int fd = SYS(open(P("sub/c"), O_WRONLY));
	CHECK(write_full(fd, "LINK", 4, 0) == 4, "write through link");
	SYS(close(fd));
	char buf[4];
	fd = SYS(open(P("a"), O_RDONLY));
	CHECK(read(fd, buf, 4) == 4 && memcmp(buf, "LINK", 4) == 0, "write not seen via a");
	SYS(close(fd));
	SYS(unlink(P("a")));
	SYS(stat(P("b"), &b));
	CHECK(b.st_nlink == 2, "nlink %lu after unlink, want 2", (unsigned long)b.st_nlink);
	FAILS(link(P("sub"), P("subl")), EPERM);
	FAILS(link(P("b"), P("sub/c")), EEXIST);
	SYS(unlink(P("sub/c")));
	SYS(stat(P("b"), &b));
	CHECK(b.st_nlink == 1, "nlink %lu, want 1", (unsigned long)b.st_nlink);
	return 0;
}

static int t_rename(void)
{
	struct stat st, st2;
	ino_t ino;

	CHECK(write_pattern_file(P("a"), 1000, 7) == 0, "write a");
	CHECK(write_pattern_file(P("b"), 2000, 8) == 0, "write b");
	SYS(stat(P("a"), &st));
	ino = st.st_ino;
	/* Plain rename over an existing file replaces it. */
	SYS(rename(P("a"), P("b")));
	FAILS(stat(P("a"), &st), ENOENT);
	SYS(stat(P("b"), &st));
	CHECK(st.st_ino == ino, "renamed file changed inode");
	CHECK(check_pattern_file(P("b"), 1000, 7) == 0, "content after rename");

	/* RENAME_NOREPLACE. */
	CHECK(write_pattern_file(P("c"), 3000, 9) == 0, "write c");
	FAILS(renameat2(AT_FDCWD, P("b"), AT_FDCWD, P("c"), RENAME_NOREPLACE), EEXIST);
	CHECK(check_pattern_file(P("b"), 1000, 7) == 0, "b after refused NOREPLACE");
	CHECK(check_pattern_file(P("c"), 3000, 9) == 0, "c after refused NOREPLACE");
	SYS(renameat2(AT_FDCWD, P("c"), AT_FDCWD, P("d"), RENAME_NOREPLACE));
	CHECK(check_pattern_file(P("d"), 3000, 9) == 0, "d after NOREPLACE rename");

	/* RENAME_EXCHANGE, file with file and file with directory. */
	SYS(renameat2(AT_FDCWD, P("b"), AT_FDCWD, P("d"), RENAME_EXCHANGE));
	CHECK(check_pattern_file(P("b"), 3000, 9) == 0, "b after exchange");
	CHECK(check_pattern_file(P("d"), 1000, 7) == 0, "d after exchange");
	SYS(mkdir(P("dir"), 0755));
	SYS(touch(P("dir/inside"), 0));
	SYS(renameat2(AT_FDCWD, P("b"), AT_FDCWD, P("dir"), RENAME_EXCHANGE));
	SYS(stat(P("b/inside"), &st));
	CHECK(check_pattern_file(P("dir"), 3000, 9) == 0, "file after exchange with dir");
	FAILS(renameat2(AT_FDCWD, P("dir"), AT_FDCWD, P("nonexistent"), RENAME_EXCHANGE),
	      ENOENT);

	/* Across directories; a directory into its own subtree; over dirs. */
	SYS(mkdir(P("x"), 0755));
	SYS(mkdir(P("x/y"), 0755));
	SYS(rename(P("d"), P("x/y/moved")));
	CHECK(check_pattern_file(P("x/y/moved"), 1000, 7) == 0, "after cross-dir rename");
	FAILS(rename(P("x"), P("x/y/z")), EINVAL);
	SYS(mkdir(P("empty"), 0755));
	SYS(stat(P("x"), &st));
	SYS(rename(P("x"), P("empty")));
	SYS(stat(P("empty"), &st2));
	CHECK(st.st_ino == st2.st_ino, "directory renamed over an empty one has a new inode");
	SYS(stat(P("empty/y/moved"), &st));
	SYS(mkdir(P("full"), 0755));
	SYS(touch(P("full/f"), 0));
	errno = 0;
	CHECK(rename(P("empty"), P("full")) < 0 && (errno == ENOTEMPTY || errno == EEXIST),
	      "rename over a non-empty directory: %s", strerror(errno));
	FAILS(rename(P("empty"), P("dir")), ENOTDIR);
	FAILS(rename(P("dir"), P("full")), EISDIR);
	/* Rename onto itself (same inode via hard link) is a no-op. */
	SYS(link(P("dir"), P("dirlink")));
	SYS(rename(P("dir"), P("dirlink")));
	SYS(stat(P("dir"), &st));
	CHECK(st.st_nlink == 2, "rename between hard links of one inode changed nlink to %lu",
	      (unsigned long)st.st_nlink);
	return 0;
}

static int t_attrs(void)
{
	struct stat st, st2;
	struct timespec ts[2], before, after;
	int fd;

	SYS(touch(P("f"), 0));
	SYS(stat(P("f"), &st));
	SYS(chmod(P("f"), 04751));
	SYS(stat(P("f"), &st2));
	CHECK((st2.st_mode & 07777) == 04751, "mode %o after chmod 4751", st2.st_mode);
	CHECK(st2.st_ctim.tv_sec >= st.st_ctim.tv_sec, "ctime went back on chmod");
	SYS(chown(P("f"), 1234, 5678));
	SYS(stat(P("f"), &st));
	CHECK(st.st_uid == 1234 && st.st_gid == 5678, "owner %u:%u after chown",
	      st.st_uid, st.st_gid);
	SYS(chown(P("f"), (uid_t)-1, 42));
	SYS(stat(P("f"), &st));
	CHECK(st.st_uid == 1234 && st.st_gid == 42, "owner %u:%u after chown -1:42",
	      st.st_uid, st.st_gid);
	SYS(lchown(P("f"), 0, 0));

	/* Explicit times with nanoseconds; UTIME_OMIT keeps the other one. */
	SYS(stat(P("f"), &st));
	ts[0].tv_sec = 1000000000;
	ts[0].tv_nsec = 123456789;
	ts[1].tv_sec = 0;
	ts[1].tv_nsec = UTIME_OMIT;
	SYS(utimensat(AT_FDCWD, P("f"), ts, 0));
	SYS(stat(P("f"), &st2));
	CHECK(st2.st_atim.tv_sec == 1000000000 && st2.st_atim.tv_nsec == 123456789,
	      "atime %ld.%09ld after utimensat", (long)st2.st_atim.tv_sec,
	      st2.st_atim.tv_nsec);
	CHECK(st2.st_mtim.tv_sec == st.st_mtim.tv_sec && st2.st_mtim.tv_nsec == st.st_mtim.tv_nsec,
	      "UTIME_OMIT changed mtime");
	ts[0].tv_nsec = UTIME_OMIT;
	ts[1].tv_sec = 1500000000;
	ts[1].tv_nsec = 5;
	SYS(utimensat(AT_FDCWD, P("f"), ts, 0));
	SYS(stat(P("f"), &st2));
	CHECK(st2.st_mtim.tv_sec == 1500000000 && st2.st_mtim.tv_nsec == 5,
	      "mtime %ld.%09ld", (long)st2.st_mtim.tv_sec, st2.st_mtim.tv_nsec);
	CHECK(st2.st_atim.tv_sec == 1000000000 && st2.st_atim.tv_nsec == 123456789,
	      "UTIME_OMIT changed atime");
	/* UTIME_NOW. */
	clock_gettime(CLOCK_REALTIME, &before);
	ts[0].tv_nsec = UTIME_OMIT;
	ts[1].tv_nsec = UTIME_NOW;
	SYS(utimensat(AT_FDCWD, P("f"), ts, 0));
	clock_gettime(CLOCK_REALTIME, &after);
	SYS(stat(P("f"), &st2));
	CHECK(st2.st_mtim.tv_sec >= before.tv_sec - 1 && st2.st_mtim.tv_sec <= after.tv_sec + 1,
	      "UTIME_NOW mtime %ld not in [%ld, %ld]", (long)st2.st_mtim.tv_sec,
	      (long)before.tv_sec, (long)after.tv_sec);
	CHECK(st2.st_atim.tv_sec == 1000000000, "UTIME_OMIT changed atime (2)");
	/* utimes(NULL) sets both to now. */
	SYS(utimensat(AT_FDCWD, P("f"), NULL, 0));
	SYS(stat(P("f"), &st2));
	CHECK(st2.st_atim.tv_sec >= before.tv_sec - 1, "utimensat(NULL) atime");
	/* A write moves mtime and ctime forward. */
	ts[0].tv_sec = ts[1].tv_sec = 1000;
	ts[0].tv_nsec = ts[1].tv_nsec = 0;
	SYS(utimensat(AT_FDCWD, P("f"), ts, 0));
	fd = SYS(open(P("f"), O_WRONLY));
	CHECK(write(fd, "x", 1) == 1, "write");
	SYS(fsync(fd));
	SYS(close(fd));
	SYS(stat(P("f"), &st2));
	CHECK(st2.st_mtim.tv_sec >= before.tv_sec - 1, "write did not update mtime (%ld)",
	      (long)st2.st_mtim.tv_sec);
	/* cp -a, tar and rsync -A set the mode through the ACL xattr: it must
	 * either be refused (they fall back to chmod) or set the mode. */
	static const uint8_t acl644[28] = {
		2, 0, 0, 0,  1, 0, 6, 0, 0xff, 0xff, 0xff, 0xff,  4, 0, 4, 0, 0xff, 0xff,
		0xff, 0xff,  0x20, 0, 4, 0, 0xff, 0xff, 0xff, 0xff,
	};
	SYS(touch(P("acl"), 0));
	SYS(chmod(P("acl"), 0600));
	errno = 0;
	if (setxattr(P("acl"), "system.posix_acl_access", acl644, sizeof(acl644), 0) == 0) {
		SYS(stat(P("acl"), &st2));
		CHECK((st2.st_mode & 07777) == 0644, "setting a 0644 access ACL left mode %o",
		      st2.st_mode & 07777);
	} else {
		CHECK(errno == EOPNOTSUPP, "setting an access ACL: %s", strerror(errno));
	}
	/* Directory attributes too. */
	SYS(mkdir(P("d"), 0700));
	SYS(chmod(P("d"), 0711));
	SYS(stat(P("d"), &st2));
	CHECK((st2.st_mode & 07777) == 0711, "dir mode %o", st2.st_mode);
	return 0;
}

static int t_xattr(void)
{
	char val[2000], got[2000], list[4096];
	ssize_t n;

	SYS(touch(P("f"), 0));
	fill((uint8_t *)val, sizeof(val), 0, 11);
	FAILS(getxattr(P("f"), "user.a", got, sizeof(got)), ENODATA);
	SYS(setxattr(P("f"), "user.a", "one", 3, 0));
	SYS(setxattr(P("f"), "user.big", val, sizeof(val), XATTR_CREATE));
	SYS(setxattr(P("f"), "user.empty", "", 0, 0));
	FAILS(setxattr(P("f"), "user.a", "x", 1, XATTR_CREATE), EEXIST);
	FAILS(setxattr(P("f"), "user.none", "x", 1, XATTR_REPLACE), ENODATA);
	/* Only the namespaces a local file system knows. */
	FAILS(setxattr(P("f"), "foo.bar", "x", 1, 0), EOPNOTSUPP);
	FAILS(setxattr(P("f"), "system.x", "x", 1, 0), EOPNOTSUPP);
	SYS(setxattr(P("f"), "trusted.t", "x", 1, 0));
	SYS(removexattr(P("f"), "trusted.t"));
	n = SYS(getxattr(P("f"), "user.a", got, sizeof(got)));
	CHECK(n == 3 && memcmp(got, "one", 3) == 0, "user.a = '%.*s'", (int)n, got);
	SYS(setxattr(P("f"), "user.a", "three", 5, XATTR_REPLACE));
	n = SYS(getxattr(P("f"), "user.a", got, sizeof(got)));
	CHECK(n == 5 && memcmp(got, "three", 5) == 0, "user.a = '%.*s' after replace", (int)n,
	      got);
	n = SYS(getxattr(P("f"), "user.a", NULL, 0));
	CHECK(n == 5, "size query gave %zd", n);
	FAILS(getxattr(P("f"), "user.a", got, 2), ERANGE);
	n = SYS(getxattr(P("f"), "user.big", got, sizeof(got)));
	CHECK(n == (ssize_t)sizeof(val) && memcmp(got, val, sizeof(val)) == 0, "user.big");
	n = SYS(getxattr(P("f"), "user.empty", got, sizeof(got)));
	CHECK(n == 0, "user.empty has size %zd", n);

	n = SYS(listxattr(P("f"), list, sizeof(list)));
	CHECK(n == SYS(listxattr(P("f"), NULL, 0)), "listxattr size query disagrees");
	int seen = 0;
	for (char *p = list; p < list + n; p += strlen(p) + 1) {
		if (!strcmp(p, "user.a"))
			seen |= 1;
		else if (!strcmp(p, "user.big"))
			seen |= 2;
		else if (!strcmp(p, "user.empty"))
			seen |= 4;
		else if (!strncmp(p, "user.", 5))
			FAIL("listxattr has unexpected %s", p);
	}
	CHECK(seen == 7, "listxattr missed names (mask %d)", seen);
	FAILS(listxattr(P("f"), list, 3), ERANGE);

	SYS(removexattr(P("f"), "user.a"));
	FAILS(getxattr(P("f"), "user.a", got, sizeof(got)), ENODATA);
	FAILS(removexattr(P("f"), "user.a"), ENODATA);
	/* Directories and symlinks (trusted.* is allowed on symlinks for root). */
	SYS(mkdir(P("d"), 0755));
	SYS(setxattr(P("d"), "user.dir", "d", 1, 0));
	n = SYS(getxattr(P("d"), "user.dir", got, sizeof(got)));
	CHECK(n == 1 && got[0] == 'd', "dir xattr");
	SYS(symlink("f", P("l")));
	SYS(lsetxattr(P("l"), "trusted.t", "T", 1, 0));
	n = SYS(lgetxattr(P("l"), "trusted.t", got, sizeof(got)));
	CHECK(n == 1 && got[0] == 'T', "symlink xattr");
	FAILS(getxattr(P("f"), "trusted.t", got, sizeof(got)), ENODATA);
	return 0;
}

static int t_statfs(void)
{
	struct statvfs sv;
	uint64_t before = 0, after = 0, freed = 0;
	size_t len = 32 * MiB;

	SYS(statvfs(base, &sv));
	CHECK(sv.f_bsize >= 4096 && sv.f_frsize == 4096, "bsize %lu frsize %lu",
	      sv.f_bsize, sv.f_frsize);
	CHECK(sv.f_blocks > 0 && sv.f_bfree <= sv.f_blocks && sv.f_bavail <= sv.f_bfree,
	      "blocks %lu free %lu avail %lu", (unsigned long)sv.f_blocks,
	      (unsigned long)sv.f_bfree, (unsigned long)sv.f_bavail);
	CHECK(sv.f_namemax == 255, "namemax %lu", sv.f_namemax);
	sync();
	CHECK(statfs_free(&before) == 0, "statfs");
	CHECK(write_pattern_file(P("big"), len, 17) == 0, "write 32 MiB");
	int fd = SYS(open(P("big"), O_RDONLY));
	SYS(fsync(fd));
	SYS(close(fd));
	CHECK(statfs_free(&after) == 0, "statfs");
	CHECK(before > after && before - after >= len - MiB,
	      "free space went from %" PRIu64 " to %" PRIu64 " KiB after writing 32 MiB",
	      before / 1024, after / 1024);
	/* Freed space comes back once the unlink is durable. */
	SYS(unlink(P("big")));
	for (int i = 0; i < 50; i++) {
		sync();
		CHECK(statfs_free(&freed) == 0, "statfs");
		if (freed >= before - MiB)
			break;
		usleep(100000);
	}
	CHECK(freed >= before - MiB, "free space %" PRIu64 " KiB after unlink, was %" PRIu64,
	      freed / 1024, before / 1024);
	return 0;
}

static int t_readdir(void)
{
	enum { N = 2000 };
	static bool seen[N];
	struct dirent *de;
	int dots = 0, count = 0;
	DIR *d;

	SYS(mkdir(P("big"), 0755));
	for (int i = 0; i < N; i++) {
		if (i % 3 == 0)
			SYS(mkdir(P("big/e%04d", i), 0755));
		else
			SYS(mknod(P("big/e%04d", i), S_IFREG | 0644, 0));
	}
	d = opendir(P("big"));
	CHECK(d, "opendir: %s", strerror(errno));
	memset(seen, 0, sizeof(seen));
	errno = 0;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) {
			dots++;
			continue;
		}
		int i;
		if (sscanf(de->d_name, "e%04d", &i) != 1 || i < 0 || i >= N)
			FAIL("unexpected entry '%s'", de->d_name);
		CHECK(!seen[i], "entry %s returned twice", de->d_name);
		seen[i] = true;
		count++;
		/* d_type and d_ino agree with stat (checked on a sample). */
		if (i % 97 == 0) {
			struct stat st;
			SYS(lstat(P("big/%s", de->d_name), &st));
			CHECK(de->d_ino == st.st_ino, "%s: d_ino %lu, stat %lu", de->d_name,
			      (unsigned long)de->d_ino, (unsigned long)st.st_ino);
			CHECK(de->d_type == (i % 3 == 0 ? DT_DIR : DT_REG) ||
			      de->d_type == DT_UNKNOWN, "%s: d_type %d", de->d_name, de->d_type);
		}
		/* Deleting while listing must not make readdir skip or repeat. */
	}
	CHECK(errno == 0, "readdir: %s", strerror(errno));
	closedir(d);
	CHECK(dots == 2, "saw %d of . and ..", dots);
	CHECK(count == N, "readdir returned %d of %d entries", count, N);
	for (int i = 0; i < N; i++)
		CHECK(seen[i], "entry e%04d missing", i);
	/* The parent's link count counts subdirectories. */
	struct stat st;
	SYS(stat(P("big"), &st));
	CHECK(st.st_nlink == 2 + (N + 2) / 3, "directory with %d subdirs has nlink %lu",
	      (N + 2) / 3, (unsigned long)st.st_nlink);
	/* Remove every other entry, list again. */
	for (int i = 0; i < N; i += 2) {
		if (i % 3 == 0)
			SYS(rmdir(P("big/e%04d", i)));
		else
			SYS(unlink(P("big/e%04d", i)));
	}
	d = opendir(P("big"));
	CHECK(d, "opendir: %s", strerror(errno));
	count = 0;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		int i;
		CHECK(sscanf(de->d_name, "e%04d", &i) == 1 && i % 2 == 1,
		      "deleted entry %s still listed", de->d_name);
		count++;
	}
	closedir(d);
	CHECK(count == N / 2, "after deleting half: %d entries", count);
	return 0;
}

/* ---- state across a remount -------------------------------------------- */

static const char *const stable_names[] = {
	"file", "dir", "dir/nested", "link", "fifo", "hard1", "dir/hard2", "sparse",
	"xattr",
};
#define NSTABLE (sizeof(stable_names) / sizeof(stable_names[0]))

static int stable_pre(const char *state)
{
	struct stat st;
	FILE *f;

	char dir[4096];

	cur = "stable";
	snprintf(dir, sizeof(dir), "%s/stable", base);
	SYS(mkdir(dir, 0755));
	CHECK(write_pattern_file(P("file"), 5 * MiB + 17, 20) == 0, "write file");
	SYS(mkdir(P("dir"), 0705));
	CHECK(write_pattern_file(P("dir/nested"), 12345, 21) == 0, "write nested");
	SYS(symlink("dir/nested", P("link")));
	SYS(mkfifo(P("fifo"), 0640));
	CHECK(write_pattern_file(P("hard1"), 4096, 22) == 0, "write hard1");
	SYS(link(P("hard1"), P("dir/hard2")));
	int fd = SYS(open(P("sparse"), O_CREAT | O_WRONLY, 0600));
	CHECK(write_full(fd, "end", 3, 100 * MiB) == 3, "write sparse");
	SYS(close(fd));
	SYS(touch(P("xattr"), 0));
	SYS(setxattr(P("xattr"), "user.kept", "across remount", 14, 0));
	SYS(chown(P("xattr"), 4321, 8765));
	SYS(chmod(P("xattr"), 02640));
	struct timespec ts[2] = { { 1234567890, 111 }, { 1234567891, 222 } };
	SYS(utimensat(AT_FDCWD, P("xattr"), ts, 0));

	f = fopen(state, "w");
	CHECK(f, "open %s: %s", state, strerror(errno));
	for (size_t i = 0; i < NSTABLE; i++) {
		SYS(lstat(P("%s", stable_names[i]), &st));
		fprintf(f, "%s %lu %o %lu %ld\n", stable_names[i], (unsigned long)st.st_ino,
			st.st_mode, (unsigned long)st.st_nlink, (long)st.st_blocks);
	}
	CHECK(fclose(f) == 0, "write %s", state);
	return 0;
}

static int stable_post(const char *state)
{
	char name[256], got[64];
	unsigned long ino, nlink;
	long blocks;
	unsigned mode;
	struct stat st;
	FILE *f;
	size_t n = 0;

	cur = "stable";
	f = fopen(state, "r");
	CHECK(f, "open %s: %s", state, strerror(errno));
	while (fscanf(f, "%255s %lu %o %lu %ld", name, &ino, &mode, &nlink, &blocks) == 5) {
		SYS(lstat(P("%s", name), &st));
		CHECK(st.st_ino == ino, "%s: inode %lu after remount, was %lu", name,
		      (unsigned long)st.st_ino, ino);
		CHECK(st.st_mode == mode, "%s: mode %o after remount, was %o", name,
		      st.st_mode, mode);
		CHECK(st.st_nlink == nlink, "%s: nlink %lu after remount, was %lu", name,
		      (unsigned long)st.st_nlink, nlink);
		CHECK(st.st_blocks == blocks, "%s: st_blocks %ld after remount, was %ld", name,
		      (long)st.st_blocks, blocks);
		n++;
	}
	fclose(f);
	CHECK(n == NSTABLE, "state file has %zu entries", n);
	CHECK(check_pattern_file(P("file"), 5 * MiB + 17, 20) == 0, "file content");
	CHECK(check_pattern_file(P("dir/nested"), 12345, 21) == 0, "nested content");
	CHECK(check_pattern_file(P("link"), 12345, 21) == 0, "content through symlink");
	CHECK(check_pattern_file(P("dir/hard2"), 4096, 22) == 0, "hard link content");
	ssize_t r = SYS(readlink(P("link"), got, sizeof(got)));
	CHECK(r == 10 && !memcmp(got, "dir/nested", 10), "symlink target");
	SYS(stat(P("sparse"), &st));
	CHECK(st.st_size == 100 * MiB + 3, "sparse size %ld", (long)st.st_size);
	r = SYS(getxattr(P("xattr"), "user.kept", got, sizeof(got)));
	CHECK(r == 14 && !memcmp(got, "across remount", 14), "xattr after remount");
	SYS(stat(P("xattr"), &st));
	CHECK(st.st_uid == 4321 && st.st_gid == 8765, "owner %u:%u after remount",
	      st.st_uid, st.st_gid);
	CHECK(st.st_atim.tv_sec == 1234567890 && st.st_atim.tv_nsec == 111 &&
	      st.st_mtim.tv_sec == 1234567891 && st.st_mtim.tv_nsec == 222,
	      "times after remount %ld.%ld %ld.%ld", (long)st.st_atim.tv_sec,
	      st.st_atim.tv_nsec, (long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
	/* The other checks' trees survived too (spot checks). */
	cur = "t_open_flags";
	SYS(stat(P("rotrunc"), &st));
	CHECK(st.st_size == 0, "O_RDONLY|O_TRUNC file has %ld bytes after remount",
	      (long)st.st_size);
	cur = "t_rename";
	CHECK(check_pattern_file(P("empty/y/moved"), 1000, 7) == 0, "rename result");
	cur = "t_direct";
	struct stat d;
	SYS(stat(P("d"), &d));
	CHECK(d.st_size == 7 * MiB, "O_DIRECT file size %ld", (long)d.st_size);
	return 0;
}

/* ---- driver ------------------------------------------------------------- */

static const struct check {
	const char *name;
	int (*fn)(void);
} checks[] = {
	{ "t_open_flags", t_open_flags }, { "t_rw_offsets", t_rw_offsets },
	{ "t_direct", t_direct },	  { "t_truncate", t_truncate },
	{ "t_special", t_special },	  { "t_dirs", t_dirs },
	{ "t_unlink_open", t_unlink_open }, { "t_symlink", t_symlink },
	{ "t_hardlink", t_hardlink },	  { "t_rename", t_rename },
	{ "t_attrs", t_attrs },		  { "t_xattr", t_xattr },
	{ "t_fallocate", t_fallocate },	  { "t_seek", t_seek },
	{ "t_copy_range", t_copy_range }, { "t_statfs", t_statfs },
	{ "t_sync", t_sync },		  { "t_readdir", t_readdir },
};
#define NCHECKS (sizeof(checks) / sizeof(checks[0]))

static int run(const struct check *c)
{
	char dir[4096];

	cur = c->name;
	snprintf(dir, sizeof(dir), "%s/%s", base, c->name);
	if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		fprintf(stderr, "opcheck: mkdir %s: %s\n", dir, strerror(errno));
		return -1;
	}
	int ret = c->fn();
	printf("%s %s\n", ret ? "FAIL" : "ok  ", c->name);
	fflush(stdout);
	return ret;
}

int main(int argc, char **argv)
{
	int failed = 0;

	if (argc < 3) {
		fprintf(stderr, "usage: opcheck DIR all|post STATE | opcheck DIR CHECK...\n");
		return 2;
	}
	base = argv[1];
	umask(0);
	if (!strcmp(argv[2], "all") || !strcmp(argv[2], "post")) {
		if (argc != 4) {
			fprintf(stderr, "opcheck: %s needs a state file\n", argv[2]);
			return 2;
		}
		if (!strcmp(argv[2], "post")) {
			failed = stable_post(argv[3]) != 0;
			printf("%s stable_post\n", failed ? "FAIL" : "ok  ");
			return failed;
		}
		for (size_t i = 0; i < NCHECKS; i++)
			failed += run(&checks[i]) != 0;
		int r = stable_pre(argv[3]);
		printf("%s stable_pre\n", r ? "FAIL" : "ok  ");
		failed += r != 0;
	} else {
		for (int a = 2; a < argc; a++) {
			size_t i;
			for (i = 0; i < NCHECKS; i++)
				if (!strcmp(argv[a], checks[i].name))
					break;
			if (i == NCHECKS) {
				fprintf(stderr, "opcheck: no check %s\n", argv[a]);
				return 2;
			}
			failed += run(&checks[i]) != 0;
		}
	}
	if (failed)
		fprintf(stderr, "opcheck: %d check(s) failed\n", failed);
	return failed ? 1 : 0;
}
