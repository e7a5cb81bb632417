// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: namespace semantics (create/lookup/unlink/rmdir/rename/link/symlink/readdir/xattr/setattr) live, after remount and after a crash replay. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <linux/limits.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "inode.h"
#include "testlib.h"

#include "namei_env.h"

/* ---- names, create, lookup ---- */

static void test_create_lookup(void **state)
{
	struct tfs *fs = fresh();
	char longname[TFS_NAME_MAX + 2];
	struct stat st, root;
	int64_t t0 = now_ns();

	uint64_t d = mk(fs, ROOT, "d", S_IFDIR | 0755);
	uint64_t f = mk(fs, d, "f", S_IFREG | 0640);
	assert_int_equal(ino_of(fs, ROOT, "d"), d);
	assert_int_equal(lk(fs, d, "f", &st), 0);
	assert_int_equal(st.st_ino, f);
	assert_int_equal(st.st_mode, S_IFREG | 0640);
	assert_int_equal(st.st_uid, cr.uid);
	assert_int_equal(st.st_gid, cr.gid);
	assert_int_equal(st.st_nlink, 1);
	assert_int_equal(st.st_size, 0);
	assert_true(ns_of(st.st_mtim) >= t0 - 1000000000);
	assert_true(ns_of(st.st_ctim) <= now_ns() + 1000000000);

	/* Parent bookkeeping: a subdirectory adds a link, and times move. */
	assert_int_equal(tfs_getattr(fs, ROOT, &root), 0);
	assert_int_equal(root.st_nlink, 3);
	assert_int_equal(nlink_of(fs, d), 2);
	assert_true(ns_of(root.st_mtim) >= t0 - 1000000000);

	/* "." and "..". */
	assert_int_equal(ino_of(fs, d, "."), d);
	assert_int_equal(ino_of(fs, d, ".."), ROOT);
	assert_int_equal(ino_of(fs, ROOT, ".."), ROOT);
	assert_int_equal(tfs_mkdir(fs, d, ".", 0755, &cr, &st), -EEXIST);
	assert_int_equal(tfs_mknod(fs, d, "..", S_IFREG | 0644, 0, &cr, &st), -EEXIST);

	/* Bad names. */
	memset(longname, 'x', sizeof(longname));
	longname[TFS_NAME_MAX + 1] = 0;
	assert_int_equal(tfs_mknod(fs, d, longname, S_IFREG | 0644, 0, &cr, &st), -ENAMETOOLONG);
	assert_int_equal(tfs_lookup(fs, d, longname, &st), -ENAMETOOLONG);
	longname[TFS_NAME_MAX] = 0;	/* exactly the maximum is fine */
	mk(fs, d, longname, S_IFREG | 0644);
	assert_int_equal(tfs_mknod(fs, d, "a/b", S_IFREG | 0644, 0, &cr, &st), -EINVAL);
	assert_int_equal(tfs_mknod(fs, d, "", S_IFREG | 0644, 0, &cr, &st), -EINVAL);

	/* Errors. */
	assert_int_equal(tfs_mknod(fs, d, "f", S_IFREG | 0644, 0, &cr, &st), -EEXIST);
	assert_int_equal(tfs_mkdir(fs, d, "f", 0755, &cr, &st), -EEXIST);
	assert_int_equal(tfs_lookup(fs, d, "nope", &st), -ENOENT);
	assert_int_equal(tfs_lookup(fs, f, "x", &st), -ENOTDIR);
	assert_int_equal(tfs_mknod(fs, f, "x", S_IFREG | 0644, 0, &cr, &st), -ENOTDIR);
	assert_int_equal(tfs_lookup(fs, 987654, "x", &st), -ENOENT);
	assert_int_equal(tfs_getattr(fs, 987654, &st), -ENOENT);

	/* Special files keep their type and device number. */
	uint64_t fifo = mk(fs, d, "fifo", S_IFIFO | 0600);
	assert_int_equal(tfs_mknod(fs, d, "chr", S_IFCHR | 0600, makedev(1, 3), &cr, &st), 0);
	tfs_forget(fs, st.st_ino, 1);
	assert_int_equal(lk(fs, d, "chr", &st), 0);
	assert_true(S_ISCHR(st.st_mode));
	assert_int_equal(st.st_rdev, makedev(1, 3));
	assert_int_equal(lk(fs, d, "fifo", &st), 0);
	assert_int_equal(st.st_ino, fifo);
	assert_true(S_ISFIFO(st.st_mode));

	/* setgid directories pass their group down, and subdirectories
	 * inherit the bit. */
	struct stat in = { .st_mode = 02775 };
	uint64_t g = mk(fs, ROOT, "g", S_IFDIR | 0755);
	in.st_gid = 4242;
	assert_int_equal(tfs_setattr(fs, g, &in, TFS_SET_MODE | TFS_SET_GID, NULL, &st), 0);
	assert_int_equal(st.st_mode, S_IFDIR | 02775);
	uint64_t gf = mk(fs, g, "file", S_IFREG | 0644);
	uint64_t gd = mk(fs, g, "sub", S_IFDIR | 0755);
	assert_int_equal(tfs_getattr(fs, gf, &st), 0);
	assert_int_equal(st.st_gid, 4242);
	assert_false(st.st_mode & S_ISGID);
	assert_int_equal(tfs_getattr(fs, gd, &st), 0);
	assert_int_equal(st.st_gid, 4242);
	assert_true(st.st_mode & S_ISGID);

	/* Inode numbers are never reused. */
	uint64_t a = mk(fs, ROOT, "a", S_IFREG | 0644);
	assert_int_equal(tfs_unlink(fs, ROOT, "a"), 0);
	uint64_t b = mk(fs, ROOT, "b", S_IFREG | 0644);
	assert_true(b > a);

	assert_int_equal(tfs_unmount(fs), 0);
}

/* ---- removal and reference counting ---- */

static void test_unlink_rmdir(void **state)
{
	struct tfs *fs = fresh();
	struct tfs_file *fh;
	struct stat st;

	uint64_t d = mk(fs, ROOT, "d", S_IFDIR | 0755);
	uint64_t sub = mk(fs, d, "sub", S_IFDIR | 0755);
	uint64_t f = mk(fs, d, "f", S_IFREG | 0644);
	assert_int_equal(nlink_of(fs, d), 3);

	assert_int_equal(tfs_unlink(fs, d, "sub"), -EISDIR);
	assert_int_equal(tfs_rmdir(fs, d, "f"), -ENOTDIR);
	assert_int_equal(tfs_rmdir(fs, ROOT, "d"), -ENOTEMPTY);
	assert_int_equal(tfs_rmdir(fs, d, "."), -EINVAL);
	assert_int_equal(tfs_rmdir(fs, d, ".."), -ENOTEMPTY);
	assert_int_equal(tfs_unlink(fs, d, "missing"), -ENOENT);
	assert_int_equal(tfs_rmdir(fs, d, "missing"), -ENOENT);

	/* Without references the inode goes at once. */
	assert_int_equal(tfs_rmdir(fs, d, "sub"), 0);
	assert_int_equal(nlink_of(fs, d), 2);
	assert_int_equal(tfs_getattr(fs, sub, &st), -ENOENT);
	assert_int_equal(tfs_unlink(fs, d, "f"), 0);
	assert_int_equal(tfs_getattr(fs, f, &st), -ENOENT);
	assert_int_equal(lk(fs, d, "f", NULL), -ENOENT);

	/* A kernel reference keeps an unlinked inode until forget. */
	assert_int_equal(tfs_mknod(fs, d, "held", S_IFREG | 0644, 0, &cr, &st), 0);
	uint64_t held = st.st_ino;
	assert_int_equal(tfs_unlink(fs, d, "held"), 0);
	assert_int_equal(tfs_getattr(fs, held, &st), 0);
	assert_int_equal(st.st_nlink, 0);
	tfs_forget(fs, held, 1);
	assert_int_equal(tfs_getattr(fs, held, &st), -ENOENT);

	/* So does an open handle, until release. */
	assert_int_equal(tfs_create(fs, d, "open", S_IFREG | 0644, O_RDWR, &cr, &st, &fh), 0);
	uint64_t op = st.st_ino;
	assert_int_equal(tfs_pwrite(fh, "abc", 3, 0, 0), 3);
	tfs_forget(fs, op, 1);
	assert_int_equal(tfs_unlink(fs, d, "open"), 0);
	assert_int_equal(tfs_getattr(fs, op, &st), 0);
	char buf[8];
	assert_int_equal(tfs_pread(fh, buf, sizeof(buf), 0), 3);
	assert_memory_equal(buf, "abc", 3);
	assert_int_equal(tfs_release(fh), 0);
	assert_int_equal(tfs_getattr(fs, op, &st), -ENOENT);

	/* A removed directory that is still referenced accepts no entries. */
	assert_int_equal(tfs_mkdir(fs, d, "gone", 0755, &cr, &st), 0);
	uint64_t gone = st.st_ino;
	assert_int_equal(tfs_rmdir(fs, d, "gone"), 0);
	assert_int_equal(tfs_mknod(fs, gone, "x", S_IFREG | 0644, 0, &cr, &st), -ENOENT);
	tfs_forget(fs, gone, 1);

	assert_int_equal(tfs_rmdir(fs, ROOT, "d"), 0);
	assert_int_equal(nlink_of(fs, ROOT), 2);
	assert_int_equal(tfs_unmount(fs), 0);
}

/* ---- rename ---- */

static void test_rename(void **state)
{
	struct tfs *fs = fresh();
	struct stat st;

	uint64_t a = mk(fs, ROOT, "a", S_IFDIR | 0755);
	uint64_t b = mk(fs, ROOT, "b", S_IFDIR | 0755);
	uint64_t x = mk(fs, a, "x", S_IFREG | 0644);
	uint64_t y = mk(fs, b, "y", S_IFREG | 0644);
	uint64_t s = mk(fs, a, "s", S_IFDIR | 0755);
	uint64_t s2 = mk(fs, s, "s2", S_IFDIR | 0755);

	assert_int_equal(tfs_rename(fs, a, "x", a, "x", 4242), -EINVAL);
	assert_int_equal(tfs_rename(fs, a, "x", a, "x", RENAME_NOREPLACE | RENAME_EXCHANGE),
			 -EINVAL);
	assert_int_equal(tfs_rename(fs, a, "nope", b, "z", 0), -ENOENT);

	/* Within one directory; ctime of the moved inode changes. */
	assert_int_equal(tfs_getattr(fs, x, &st), 0);
	int64_t c0 = ns_of(st.st_ctim);
	assert_int_equal(tfs_rename(fs, a, "x", a, "x1", 0), 0);
	assert_int_equal(lk(fs, a, "x", NULL), -ENOENT);
	assert_int_equal(ino_of(fs, a, "x1"), x);
	assert_int_equal(tfs_getattr(fs, x, &st), 0);
	assert_true(ns_of(st.st_ctim) >= c0);

	/* Same name to itself: nothing happens. */
	assert_int_equal(tfs_rename(fs, a, "x1", a, "x1", 0), 0);
	assert_int_equal(ino_of(fs, a, "x1"), x);
	assert_int_equal(tfs_rename(fs, a, "x1", a, "x1", RENAME_NOREPLACE), -EEXIST);

	/* A directory into its own subtree. */
	assert_int_equal(tfs_rename(fs, a, "s", s, "in", 0), -EINVAL);
	assert_int_equal(tfs_rename(fs, a, "s", s2, "in", 0), -EINVAL);
	assert_int_equal(tfs_rename(fs, ROOT, "a", s2, "in", 0), -EINVAL);
	assert_int_equal(tfs_rename(fs, ROOT, "a", s, "in", RENAME_EXCHANGE), -ENOENT);

	/* Type rules when replacing. */
	assert_int_equal(tfs_rename(fs, a, "s", b, "y", 0), -ENOTDIR);
	assert_int_equal(tfs_rename(fs, b, "y", a, "s", 0), -EISDIR);
	uint64_t full = mk(fs, b, "full", S_IFDIR | 0755);
	mk(fs, full, "x", S_IFREG | 0644);
	assert_int_equal(tfs_rename(fs, a, "s", b, "full", 0), -ENOTEMPTY);
	assert_int_equal(tfs_rename(fs, a, "x1", b, "y", RENAME_NOREPLACE), -EEXIST);

	/* A directory moves across parents: nlinks and ".." follow. */
	assert_int_equal(nlink_of(fs, a), 3);
	assert_int_equal(nlink_of(fs, b), 3);
	assert_int_equal(tfs_rename(fs, a, "s", b, "s", 0), 0);
	assert_int_equal(nlink_of(fs, a), 2);
	assert_int_equal(nlink_of(fs, b), 4);
	assert_int_equal(ino_of(fs, s, ".."), b);
	assert_int_equal(ino_of(fs, s2, ".."), s);

	/* Directory over an empty directory: the old one is gone. */
	uint64_t e = mk(fs, a, "empty", S_IFDIR | 0755);
	assert_int_equal(nlink_of(fs, a), 3);
	assert_int_equal(tfs_rename(fs, b, "s", a, "empty", 0), 0);
	assert_int_equal(tfs_getattr(fs, e, &st), -ENOENT);
	assert_int_equal(ino_of(fs, a, "empty"), s);
	assert_int_equal(nlink_of(fs, a), 3);
	assert_int_equal(nlink_of(fs, b), 3);
	assert_int_equal(ino_of(fs, s, ".."), a);

	/* File over a file: the replaced inode loses its link.  Hold a
	 * reference to watch it survive until forget. */
	assert_int_equal(tfs_lookup(fs, b, "y", &st), 0);
	assert_int_equal(tfs_rename(fs, a, "x1", b, "y", 0), 0);
	assert_int_equal(ino_of(fs, b, "y"), x);
	assert_int_equal(lk(fs, a, "x1", NULL), -ENOENT);
	assert_int_equal(tfs_getattr(fs, y, &st), 0);
	assert_int_equal(st.st_nlink, 0);
	tfs_forget(fs, y, 1);
	assert_int_equal(tfs_getattr(fs, y, &st), -ENOENT);

	/* Over a hard link of itself: both names stay. */
	assert_int_equal(tfs_link(fs, x, a, "xl", &st), 0);
	tfs_forget(fs, x, 1);
	assert_int_equal(tfs_rename(fs, a, "xl", b, "y", 0), 0);
	assert_int_equal(ino_of(fs, a, "xl"), x);
	assert_int_equal(nlink_of(fs, x), 2);
	assert_int_equal(tfs_unlink(fs, a, "xl"), 0);

	/* Exchange a file and a directory across parents. */
	uint64_t t = mk(fs, b, "t", S_IFDIR | 0755);
	assert_int_equal(nlink_of(fs, a), 3);	/* a: empty (= s) */
	assert_int_equal(nlink_of(fs, b), 4);	/* b: full, t */
	assert_int_equal(tfs_rename(fs, b, "y", a, "empty", RENAME_EXCHANGE), 0);
	assert_int_equal(ino_of(fs, b, "y"), s);
	assert_int_equal(ino_of(fs, a, "empty"), x);
	assert_int_equal(ino_of(fs, s, ".."), b);
	assert_int_equal(nlink_of(fs, a), 2);
	assert_int_equal(nlink_of(fs, b), 5);
	/* Two directories, same parent: nothing but names changes. */
	assert_int_equal(tfs_rename(fs, b, "y", b, "t", RENAME_EXCHANGE), 0);
	assert_int_equal(ino_of(fs, b, "t"), s);
	assert_int_equal(ino_of(fs, b, "y"), t);
	assert_int_equal(nlink_of(fs, b), 5);
	/* Exchange may not put a directory inside itself either way. */
	assert_int_equal(tfs_rename(fs, b, "t", s, "s2", RENAME_EXCHANGE), -EINVAL);
	assert_int_equal(tfs_rename(fs, s, "s2", b, "t", RENAME_EXCHANGE), -EINVAL);
	assert_int_equal(tfs_rename(fs, a, "empty", b, "missing", RENAME_EXCHANGE), -ENOENT);

	assert_int_equal(tfs_unmount(fs), 0);
}

/* ---- link and symlink ---- */

static void test_link_symlink(void **state)
{
	struct tfs *fs = fresh();
	struct stat st;
	char buf[64];

	uint64_t d = mk(fs, ROOT, "d", S_IFDIR | 0755);
	uint64_t f = mk(fs, ROOT, "f", S_IFREG | 0644);

	assert_int_equal(tfs_link(fs, f, d, "f2", &st), 0);
	assert_int_equal(st.st_ino, f);
	assert_int_equal(st.st_nlink, 2);
	tfs_forget(fs, f, 1);
	assert_int_equal(tfs_link(fs, f, d, "f2", &st), -EEXIST);
	assert_int_equal(tfs_link(fs, d, ROOT, "d2", &st), -EPERM);
	assert_int_equal(tfs_link(fs, f, f, "x", &st), -ENOTDIR);
	assert_int_equal(tfs_link(fs, f, ROOT, "..", &st), -EEXIST);
	assert_int_equal(tfs_unlink(fs, ROOT, "f"), 0);
	assert_int_equal(nlink_of(fs, f), 1);
	assert_int_equal(ino_of(fs, d, "f2"), f);

	const char *target = "../some/where/else";
	assert_int_equal(tfs_symlink(fs, d, "ln", target, &cr, &st), 0);
	uint64_t ln = st.st_ino;
	tfs_forget(fs, ln, 1);
	assert_true(S_ISLNK(st.st_mode));
	assert_int_equal(st.st_size, (off_t)strlen(target));
	assert_int_equal(tfs_readlink(fs, ln, buf, sizeof(buf)), (ssize_t)strlen(target));
	assert_memory_equal(buf, target, strlen(target));
	memset(buf, 0, sizeof(buf));
	assert_int_equal(tfs_readlink(fs, ln, buf, 4), (ssize_t)strlen(target));
	assert_memory_equal(buf, "../s\0", 5);
	assert_int_equal(tfs_readlink(fs, f, buf, sizeof(buf)), -EINVAL);
	assert_int_equal(tfs_symlink(fs, d, "empty", "", &cr, &st), -ENOENT);
	assert_int_equal(tfs_symlink(fs, d, "ln", "x", &cr, &st), -EEXIST);

	char *big = malloc(5000);
	assert_non_null(big);
	memset(big, 'a', 4999);
	big[4999] = 0;
	assert_int_equal(tfs_symlink(fs, d, "big", big, &cr, &st), -ENAMETOOLONG);
	big[4095] = 0;
	assert_int_equal(tfs_symlink(fs, d, "big", big, &cr, &st), 0);
	tfs_forget(fs, st.st_ino, 1);
	assert_int_equal(st.st_size, 4095);
	free(big);

	assert_int_equal(tfs_unmount(fs), 0);
}

/* ---- readdir ---- */

#define NENT 1000

struct lister {
	unsigned budget;	/* entries fill() still takes */
	unsigned taken;
	uint64_t next_off;
	unsigned seen[NENT];
	unsigned dots, dotdots;
	uint64_t last_ino;
	uint64_t dot_ino, dotdot_ino;
};

static int fill_cb(void *ctx, const char *name, const struct stat *st, uint64_t next_off)
{
	struct lister *l = ctx;

	if (!l->budget)
		return 1;
	l->budget--;
	l->taken++;
	assert_true(next_off > l->next_off || l->taken == 1);
	l->next_off = next_off;
	l->last_ino = st->st_ino;
	if (!strcmp(name, ".")) {
		l->dots++;
		l->dot_ino = st->st_ino;
	} else if (!strcmp(name, "..")) {
		l->dotdots++;
		l->dotdot_ino = st->st_ino;
	} else {
		unsigned i;
		assert_int_equal(sscanf(name, "e%u", &i), 1);
		assert_true(i < NENT);
		assert_true(S_ISREG(st->st_mode));
		l->seen[i]++;
	}
	return 0;
}

/* List the whole directory a few entries per call, resuming at next_off. */
static void list_all(struct tfs *fs, uint64_t dir, bool plus, unsigned per_call,
		     struct lister *l)
{
	uint64_t off = 0;

	memset(l, 0, sizeof(*l));
	for (unsigned calls = 0;; calls++) {
		assert_true(calls < 10 * NENT);
		l->budget = per_call;
		unsigned before = l->taken;
		assert_int_equal(tfs_readdir(fs, dir, off, plus, fill_cb, l), 0);
		if (l->taken == before)
			break;
		off = l->next_off;
	}
}

static void check_listing(const struct lister *l, uint64_t dir, uint64_t parent,
			  const bool *present)
{
	assert_int_equal(l->dots, 1);
	assert_int_equal(l->dotdots, 1);
	assert_int_equal(l->dot_ino, dir);
	assert_int_equal(l->dotdot_ino, parent);
	for (unsigned i = 0; i < NENT; i++)
		assert_int_equal(l->seen[i], present[i] ? 1 : 0);
}

static void test_readdir(void **state)
{
	struct tfs *fs = fresh();
	struct lister *l = calloc(1, sizeof(*l));
	bool present[NENT];
	char name[32];
	struct stat st;

	assert_non_null(l);
	uint64_t d = mk(fs, ROOT, "big", S_IFDIR | 0755);
	for (unsigned i = 0; i < NENT; i++) {
		snprintf(name, sizeof(name), "e%u", i);
		mk(fs, d, name, S_IFREG | 0644);
		present[i] = true;
	}
	list_all(fs, d, false, 7, l);
	check_listing(l, d, ROOT, present);
	list_all(fs, d, false, 1, l);
	check_listing(l, d, ROOT, present);
	list_all(fs, d, false, 100000, l);
	check_listing(l, d, ROOT, present);

	/* Removing entries between calls: the rest still comes exactly once. */
	memset(l, 0, sizeof(*l));
	l->budget = 300;
	assert_int_equal(tfs_readdir(fs, d, 0, false, fill_cb, l), 0);
	uint64_t off = l->next_off;
	for (unsigned i = 0; i < NENT; i += 3) {
		snprintf(name, sizeof(name), "e%u", i);
		assert_int_equal(tfs_unlink(fs, d, name), 0);
		present[i] = false;
	}
	unsigned first[NENT];
	memcpy(first, l->seen, sizeof(first));
	for (;;) {
		l->budget = 13;
		unsigned before = l->taken;
		assert_int_equal(tfs_readdir(fs, d, off, false, fill_cb, l), 0);
		if (l->taken == before)
			break;
		off = l->next_off;
	}
	for (unsigned i = 0; i < NENT; i++) {
		unsigned later = l->seen[i] - first[i];
		assert_true(first[i] + later <= 1);
		if (present[i])
			assert_int_equal(first[i] + later, 1);
	}
	list_all(fs, d, true, 9, l);
	check_listing(l, d, ROOT, present);
	/* That plus listing took a reference to every entry: forget them. */
	for (unsigned i = 0; i < NENT; i++) {
		if (!present[i])
			continue;
		snprintf(name, sizeof(name), "e%u", i);
		tfs_forget(fs, ino_of(fs, d, name), 1);
	}

	/* readdirplus references exactly the entries fill() accepted. */
	uint64_t p = mk(fs, ROOT, "p", S_IFDIR | 0755);
	uint64_t pa = mk(fs, p, "e1", S_IFREG | 0644);
	uint64_t pb = mk(fs, p, "e2", S_IFREG | 0644);
	memset(l, 0, sizeof(*l));
	l->budget = 3;		/* ".", "..", e1; e2 is refused */
	assert_int_equal(tfs_readdir(fs, p, 0, true, fill_cb, l), 0);
	assert_int_equal(l->taken, 3);
	assert_int_equal(l->seen[1], 1);
	assert_int_equal(l->seen[2], 0);
	assert_int_equal(tfs_unlink(fs, p, "e1"), 0);
	assert_int_equal(tfs_unlink(fs, p, "e2"), 0);
	assert_int_equal(tfs_getattr(fs, pa, &st), 0);
	assert_int_equal(tfs_getattr(fs, pb, &st), -ENOENT);
	tfs_forget(fs, pa, 1);
	assert_int_equal(tfs_getattr(fs, pa, &st), -ENOENT);
	/* Past the end, and on a non-directory. */
	memset(l, 0, sizeof(*l));
	l->budget = 10;
	assert_int_equal(tfs_readdir(fs, p, 2, false, fill_cb, l), 0);
	assert_int_equal(l->taken, 0);
	assert_int_equal(tfs_readdir(fs, ino_of(fs, d, "e1"), 0, false, fill_cb, l), -ENOTDIR);

	/* The listing survives a remount (cookies need not). */
	assert_int_equal(tfs_unmount(fs), 0);
	fs = mount2();
	list_all(fs, d, false, 50, l);
	check_listing(l, d, ROOT, present);
	assert_int_equal(tfs_unmount(fs), 0);
	free(l);
}

/* ---- xattrs ---- */

static void test_xattr(void **state)
{
	struct tfs *fs = fresh();
	char buf[256], name[300];
	struct stat st;

	uint64_t f = mk(fs, ROOT, "f", S_IFREG | 0644);
	assert_int_equal(tfs_getattr(fs, f, &st), 0);
	int64_t c0 = ns_of(st.st_ctim);

	assert_int_equal(tfs_listxattr(fs, f, buf, 0), 0);
	assert_int_equal(tfs_getxattr(fs, f, "user.a", buf, sizeof(buf)), -ENODATA);
	assert_int_equal(tfs_setxattr(fs, f, "user.a", "hello", 5, XATTR_REPLACE), -ENODATA);
	assert_int_equal(tfs_setxattr(fs, f, "user.a", "hello", 5, XATTR_CREATE), 0);
	assert_int_equal(tfs_setxattr(fs, f, "user.a", "again", 5, XATTR_CREATE), -EEXIST);
	assert_int_equal(tfs_setxattr(fs, f, "user.empty", "", 0, 0), 0);
	assert_int_equal(tfs_setxattr(fs, f, "user.b", "12345678", 8, 0), 0);
	assert_int_equal(tfs_getattr(fs, f, &st), 0);
	assert_true(ns_of(st.st_ctim) >= c0);

	assert_int_equal(tfs_getxattr(fs, f, "user.a", NULL, 0), 5);
	assert_int_equal(tfs_getxattr(fs, f, "user.a", buf, 4), -ERANGE);
	assert_int_equal(tfs_getxattr(fs, f, "user.a", buf, sizeof(buf)), 5);
	assert_memory_equal(buf, "hello", 5);
	assert_int_equal(tfs_getxattr(fs, f, "user.empty", buf, sizeof(buf)), 0);
	assert_int_equal(tfs_setxattr(fs, f, "user.a", "bye", 3, XATTR_REPLACE), 0);
	assert_int_equal(tfs_getxattr(fs, f, "user.a", buf, sizeof(buf)), 3);
	assert_memory_equal(buf, "bye", 3);

	const char want[] = "user.a\0user.empty\0user.b";
	assert_int_equal(tfs_listxattr(fs, f, NULL, 0), (ssize_t)sizeof(want));
	assert_int_equal(tfs_listxattr(fs, f, buf, sizeof(want) - 1), -ERANGE);
	assert_int_equal(tfs_listxattr(fs, f, buf, sizeof(buf)), (ssize_t)sizeof(want));
	assert_memory_equal(buf, want, sizeof(want));

	assert_int_equal(tfs_removexattr(fs, f, "user.empty"), 0);
	assert_int_equal(tfs_removexattr(fs, f, "user.empty"), -ENODATA);
	assert_int_equal(tfs_getxattr(fs, f, "user.empty", buf, sizeof(buf)), -ENODATA);

	/* Limits: names 1..255 bytes, values up to 64 KiB. */
	memset(name, 'n', sizeof(name));
	memcpy(name, "user.", 5);
	name[255] = 0;
	assert_int_equal(tfs_setxattr(fs, f, name, "v", 1, 0), 0);
	name[255] = 'n';
	name[256] = 0;
	assert_int_equal(tfs_setxattr(fs, f, name, "v", 1, 0), -ERANGE);
	assert_int_equal(tfs_getxattr(fs, f, name, buf, sizeof(buf)), -ERANGE);
	assert_int_equal(tfs_setxattr(fs, f, "", "v", 1, 0), -ERANGE);
	assert_int_equal(tfs_setxattr(fs, f, "foo.bar", "v", 1, 0), -EOPNOTSUPP);
	char *big = calloc(1, 65537);
	assert_non_null(big);
	big[0] = 1;
	big[65535] = 2;
	assert_int_equal(tfs_setxattr(fs, f, "user.big", big, 65537, 0), -E2BIG);
	assert_int_equal(tfs_setxattr(fs, f, "user.big", big, 65536, 0), 0);

	/* Everything persists across a remount, and on directories too. */
	assert_int_equal(tfs_setxattr(fs, ROOT, "user.root", "r", 1, 0), 0);
	assert_int_equal(tfs_unmount(fs), 0);
	fs = mount2();
	assert_int_equal(tfs_getxattr(fs, f, "user.a", buf, sizeof(buf)), 3);
	assert_memory_equal(buf, "bye", 3);
	assert_int_equal(tfs_getxattr(fs, f, "user.b", buf, sizeof(buf)), 8);
	assert_memory_equal(buf, "12345678", 8);
	assert_int_equal(tfs_getxattr(fs, f, "user.empty", buf, sizeof(buf)), -ENODATA);
	char *got = malloc(65536);
	assert_non_null(got);
	assert_int_equal(tfs_getxattr(fs, f, "user.big", got, 65536), 65536);
	assert_memory_equal(got, big, 65536);
	assert_int_equal(tfs_getxattr(fs, ROOT, "user.root", buf, sizeof(buf)), 1);
	free(got);
	free(big);
	assert_int_equal(tfs_unmount(fs), 0);
}

/*
 * Per inode, the name list stays within XATTR_LIST_MAX (64 KiB) and the
 * values within 1 MiB: past either setxattr is ENOSPC (as ext4), and
 * listxattr keeps working.
 */
static void test_xattr_limits(void **state)
{
	struct tfs *fs = fresh();
	char name[256], *list = malloc(XATTR_LIST_MAX);
	char val[1000];
	ssize_t len;
	int i, ret = 0;

	assert_non_null(list);
	memset(val, 'v', sizeof(val));
	/* 10,000 xattrs of 1,000 bytes: the values hit 1 MiB first. */
	uint64_t f = mk(fs, ROOT, "f", S_IFREG | 0644);
	for (i = 0; i < 10000; i++) {
		snprintf(name, sizeof(name), "user.%05d", i);
		ret = tfs_setxattr(fs, f, name, val, sizeof(val), 0);
		if (ret)
			break;
	}
	assert_int_equal(ret, -ENOSPC);
	assert_int_equal(i, (1 << 20) / 1000);
	/* Replacing a value with one of the same size still fits; a smaller
	 * one frees room for another name. */
	assert_int_equal(tfs_setxattr(fs, f, "user.00000", val, sizeof(val), XATTR_REPLACE), 0);
	assert_int_equal(tfs_setxattr(fs, f, "user.00000", val, 10, 0), 0);
	assert_int_equal(tfs_setxattr(fs, f, name, val, 500, 0), 0);
	len = tfs_listxattr(fs, f, list, XATTR_LIST_MAX);
	assert_int_equal(len, (i + 1) * 11);

	/* Long names and empty values: the name list hits 64 KiB. */
	uint64_t g = mk(fs, ROOT, "g", S_IFREG | 0644);
	memset(name, 'n', sizeof(name));
	name[255] = 0;
	for (i = 0; i < 10000; i++) {
		memcpy(name, "user.", 5);
		snprintf(name + 5, 8, "%05d", i);
		name[10] = 'n';
		ret = tfs_setxattr(fs, g, name, "", 0, 0);
		if (ret)
			break;
	}
	assert_int_equal(ret, -ENOSPC);
	assert_int_equal(i, XATTR_LIST_MAX / 256);
	len = tfs_listxattr(fs, g, NULL, 0);
	assert_true(len > 0 && len <= XATTR_LIST_MAX);
	assert_int_equal(tfs_listxattr(fs, g, list, XATTR_LIST_MAX), len);
	/* An existing name can still change its value. */
	snprintf(name + 5, 8, "%05d", 0);
	name[10] = 'n';
	assert_int_equal(tfs_setxattr(fs, g, name, "x", 1, XATTR_REPLACE), 0);
	free(list);
	assert_int_equal(tfs_unmount(fs), 0);
}

/* ---- setattr ---- */

static void test_setattr(void **state)
{
	struct tfs *fs = fresh();
	struct stat in, st;

	uint64_t f = mk(fs, ROOT, "f", S_IFREG | 0644);
	uint64_t d = mk(fs, ROOT, "d", S_IFDIR | 0755);

	memset(&in, 0, sizeof(in));
	in.st_mode = S_IFDIR | 04711;	/* type bits are ignored */
	assert_int_equal(tfs_setattr(fs, f, &in, TFS_SET_MODE, NULL, &st), 0);
	assert_int_equal(st.st_mode, S_IFREG | 04711);
	/* A write's kill (TFS_SET_KILL) decided on the mode read before a
	 * chmod landed: the bits go from the chmod's mode, which stays
	 * (setting the stale mode minus suid, 0711, would undo the chmod). */
	struct stat chm = { .st_mode = 06750 };
	assert_int_equal(tfs_setattr(fs, f, &chm, TFS_SET_MODE, NULL, &st), 0);
	in.st_mode = S_ISUID | 0777;	/* only suid/sgid count */
	assert_int_equal(tfs_setattr(fs, f, &in, TFS_SET_KILL, NULL, &st), 0);
	assert_int_equal(st.st_mode, S_IFREG | 02750);
	in.st_mode = 04711;
	assert_int_equal(tfs_setattr(fs, f, &in, TFS_SET_MODE, NULL, &st), 0);
	in.st_uid = 77;
	in.st_gid = 88;
	assert_int_equal(tfs_setattr(fs, f, &in, TFS_SET_UID | TFS_SET_GID, NULL, &st), 0);
	assert_int_equal(st.st_uid, 77);
	assert_int_equal(st.st_gid, 88);

	in.st_atim = (struct timespec){ .tv_sec = 1000, .tv_nsec = 123456789 };
	in.st_mtim = (struct timespec){ .tv_sec = 2000, .tv_nsec = 987654321 };
	int64_t t0 = now_ns();
	assert_int_equal(tfs_setattr(fs, f, &in, TFS_SET_ATIME | TFS_SET_MTIME, NULL, &st), 0);
	assert_int_equal(ns_of(st.st_atim), 1000123456789ll);
	assert_int_equal(ns_of(st.st_mtim), 2000987654321ll);
	assert_true(ns_of(st.st_ctim) >= t0 - 1000000000);
	in.st_ctim = (struct timespec){ .tv_sec = 3000, .tv_nsec = 5 };
	assert_int_equal(tfs_setattr(fs, f, &in, TFS_SET_CTIME, NULL, &st), 0);
	assert_int_equal(ns_of(st.st_ctim), 3000000000005ll);
	assert_int_equal(ns_of(st.st_mtim), 2000987654321ll);
	t0 = now_ns();
	assert_int_equal(tfs_setattr(fs, f, &in, TFS_SET_ATIME_NOW | TFS_SET_ATIME, NULL, &st), 0);
	assert_true(ns_of(st.st_atim) >= t0 - 1000000000);
	assert_int_equal(ns_of(st.st_mtim), 2000987654321ll);
	assert_true(ns_of(st.st_ctim) >= t0 - 1000000000);
	assert_int_equal(tfs_setattr(fs, f, &in, TFS_SET_MTIME_NOW, NULL, &st), 0);
	assert_true(ns_of(st.st_mtim) >= t0 - 1000000000);
	/* Size (truncate also sets mtime). */
	in.st_size = 10000;
	in.st_mtim = (struct timespec){ .tv_sec = 1, .tv_nsec = 0 };
	assert_int_equal(tfs_setattr(fs, f, &in, TFS_SET_MTIME, NULL, &st), 0);
	t0 = now_ns();
	assert_int_equal(tfs_setattr(fs, f, &in, TFS_SET_SIZE, NULL, &st), 0);
	assert_int_equal(st.st_size, 10000);
	assert_true(ns_of(st.st_mtim) >= t0 - 1000000000);
	/* Before 1970 too. */
	in.st_mtim = (struct timespec){ .tv_sec = -2, .tv_nsec = 500 };
	assert_int_equal(tfs_setattr(fs, f, &in, TFS_SET_MTIME, NULL, &st), 0);
	assert_int_equal(st.st_mtim.tv_sec, -2);
	assert_int_equal(st.st_mtim.tv_nsec, 500);
	assert_int_equal(tfs_getattr(fs, f, &st), 0);
	assert_int_equal(st.st_size, 10000);
	assert_int_equal(tfs_setattr(fs, d, &in, TFS_SET_SIZE, NULL, &st), -EISDIR);
	in.st_mode = 0700;
	assert_int_equal(tfs_setattr(fs, d, &in, TFS_SET_MODE, NULL, &st), 0);
	assert_int_equal(st.st_mode, S_IFDIR | 0700);
	assert_int_equal(tfs_setattr(fs, 99999, &in, TFS_SET_MODE, NULL, &st), -ENOENT);

	assert_int_equal(tfs_unmount(fs), 0);
	fs = mount2();
	assert_int_equal(tfs_getattr(fs, f, &st), 0);
	assert_int_equal(st.st_mode, S_IFREG | 04711);
	assert_int_equal(st.st_uid, 77);
	assert_int_equal(st.st_size, 10000);
	assert_int_equal(st.st_mtim.tv_sec, -2);
	assert_int_equal(st.st_mtim.tv_nsec, 500);
	assert_int_equal(tfs_getattr(fs, d, &st), 0);
	assert_int_equal(st.st_mode, S_IFDIR | 0700);
	assert_int_equal(tfs_unmount(fs), 0);
}

/* ---- concurrency: namespace changes against lock-free-of-ns readers ---- */

struct race {
	struct tfs *fs;
	uint64_t top, mid;
	_Atomic int stop;
	_Atomic unsigned long reads;
};

struct refs {
	uint64_t ino[16];
	unsigned n;
};

/* Remember what readdirplus referenced (forget must wait: fill runs under
 * the directory's lock). */
static int count_cb(void *ctx, const char *name, const struct stat *st, uint64_t next_off)
{
	struct refs *refs = ctx;

	if (refs->n == 16)
		return 1;
	if (strcmp(name, ".") && strcmp(name, ".."))
		refs->ino[refs->n++] = st->st_ino;
	return 0;
}

/* Lookups and readdirplus in "top", which lock top and then "mid". */
static void *race_reader(void *arg)
{
	struct race *r = arg;
	struct stat st;

	while (!atomic_load(&r->stop)) {
		if (tfs_lookup(r->fs, r->top, "mid", &st) == 0)
			tfs_forget(r->fs, st.st_ino, 1);
		if (tfs_lookup(r->fs, r->mid, "x", &st) == 0)
			tfs_forget(r->fs, st.st_ino, 1);
		struct refs refs = { .n = 0 };
		assert_int_equal(tfs_readdir(r->fs, r->top, 0, true, count_cb, &refs), 0);
		assert_true(refs.n >= 1);	/* mid at least */
		for (unsigned i = 0; i < refs.n; i++)
			tfs_forget(r->fs, refs.ino[i], 1);
		assert_int_equal(tfs_getattr(r->fs, r->mid, &st), 0);
		atomic_fetch_add(&r->reads, 1);
	}
	return NULL;
}

static void test_concurrent(void **state)
{
	struct tfs *fs = fresh();
	struct race r = { .fs = fs };
	pthread_t th[2];
	struct stat st;

	/* mid gets the lower inode number although it ends up below top: an
	 * inode-number lock order would deadlock rename against lookup. */
	r.mid = mk(fs, ROOT, "mid", S_IFDIR | 0755);
	r.top = mk(fs, ROOT, "top", S_IFDIR | 0755);
	assert_true(r.mid < r.top);
	assert_int_equal(tfs_rename(fs, ROOT, "mid", r.top, "mid", 0), 0);
	uint64_t x = mk(fs, r.mid, "x", S_IFDIR | 0755);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&th[i], NULL, race_reader, &r), 0);
	/* At least 2000 rounds, and on until the readers have raced some:
	 * on a loaded machine they may not have been scheduled yet. */
	for (int i = 0; i < 2000 || (atomic_load(&r.reads) < 20 && i < 1000000); i++) {
		assert_int_equal(tfs_rename(fs, r.mid, "x", r.top, "x", 0), 0);
		assert_int_equal(tfs_rename(fs, r.top, "x", r.mid, "x", 0), 0);
		struct stat in = { .st_mode = (mode_t)(0700 | (i & 055)) };
		assert_int_equal(tfs_setattr(fs, r.mid, &in, TFS_SET_MODE, NULL, &st), 0);
		if (i % 100 == 0)
			assert_int_equal(tfs_mknod(fs, r.top, "f", S_IFREG | 0644, 0, &cr, &st)
					 + tfs_unlink(fs, r.top, "f"), 0);
		if (i % 100 == 0)
			tfs_forget(fs, st.st_ino, 1);
	}
	atomic_store(&r.stop, 1);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	assert_true(atomic_load(&r.reads) > 0);
	assert_int_equal(ino_of(fs, r.mid, "x"), x);
	assert_int_equal(nlink_of(fs, r.top), 3);
	assert_int_equal(nlink_of(fs, r.mid), 3);
	assert_int_equal(tfs_unmount(fs), 0);
}

/* ---- persistence: the same tree after unmount, crash, crash on top of a
 * checkpoint ---- */

struct tree {
	uint64_t d1, d2, f1, sub, sym, fifo, x, y, ren, gone, late;
};

static void build_tree(struct tfs *fs, struct tree *t, bool ckpt_midway)
{
	struct stat st, in;

	t->d1 = mk(fs, ROOT, "d1", S_IFDIR | 0750);
	t->d2 = mk(fs, ROOT, "d2", S_IFDIR | 0755);
	t->f1 = mk(fs, t->d1, "f1", S_IFREG | 0640);
	t->sub = mk(fs, t->d1, "sub", S_IFDIR | 0700);
	t->gone = mk(fs, ROOT, "gone", S_IFREG | 0644);
	assert_int_equal(tfs_setxattr(fs, t->gone, "user.g", "g", 1, 0), 0);
	assert_int_equal(tfs_setxattr(fs, t->f1, "user.drop", "d", 1, 0), 0);
	if (ckpt_midway)
		assert_int_equal(tfs_checkpoint(fs), 0);
	/* After the checkpoint (when there is one): replay must redo these,
	 * including records about objects deleted later in the log. */
	assert_int_equal(tfs_setxattr(fs, t->f1, "user.a", "hello", 5, 0), 0);
	assert_int_equal(tfs_removexattr(fs, t->f1, "user.drop"), 0);
	memset(&in, 0, sizeof(in));
	in.st_mtim = (struct timespec){ .tv_sec = 1234, .tv_nsec = 5678 };
	assert_int_equal(tfs_setattr(fs, t->f1, &in, TFS_SET_MTIME, NULL, &st), 0);
	assert_int_equal(tfs_link(fs, t->f1, t->d2, "hard", &st), 0);
	tfs_forget(fs, t->f1, 1);
	assert_int_equal(tfs_symlink(fs, ROOT, "sym", "d1/f1", &cr, &st), 0);
	t->sym = st.st_ino;
	tfs_forget(fs, t->sym, 1);
	t->fifo = mk(fs, ROOT, "fifo", S_IFIFO | 0600);
	t->x = mk(fs, ROOT, "x", S_IFREG | 0644);
	t->y = mk(fs, ROOT, "y", S_IFDIR | 0755);
	assert_int_equal(tfs_rename(fs, ROOT, "x", ROOT, "y", RENAME_EXCHANGE), 0);
	t->ren = mk(fs, ROOT, "orig", S_IFREG | 0644);
	assert_int_equal(tfs_rename(fs, ROOT, "orig", t->d2, "renamed", 0), 0);
	assert_int_equal(tfs_rename(fs, t->d1, "sub", t->d2, "sub", 0), 0);
	assert_int_equal(tfs_unlink(fs, ROOT, "gone"), 0);
	uint64_t tmp = mk(fs, ROOT, "tmpdir", S_IFDIR | 0755);
	mk(fs, tmp, "inner", S_IFREG | 0644);
	assert_int_equal(tfs_unlink(fs, tmp, "inner"), 0);
	assert_int_equal(tfs_rmdir(fs, ROOT, "tmpdir"), 0);
}

static void check_tree(struct tfs *fs, const struct tree *t)
{
	struct stat st;
	char buf[64];

	assert_int_equal(ino_of(fs, ROOT, "d1"), t->d1);
	assert_int_equal(ino_of(fs, ROOT, "d2"), t->d2);
	assert_int_equal(nlink_of(fs, ROOT), 2 + 3);	/* d1, d2, y(x) */
	assert_int_equal(nlink_of(fs, t->d1), 2);
	assert_int_equal(nlink_of(fs, t->d2), 3);
	assert_int_equal(lk(fs, t->d1, "f1", &st), 0);
	assert_int_equal(st.st_ino, t->f1);
	assert_int_equal(st.st_mode, S_IFREG | 0640);
	assert_int_equal(st.st_nlink, 2);
	assert_int_equal(st.st_uid, cr.uid);
	assert_int_equal(st.st_mtim.tv_sec, 1234);
	assert_int_equal(st.st_mtim.tv_nsec, 5678);
	assert_int_equal(ino_of(fs, t->d2, "hard"), t->f1);
	assert_int_equal(tfs_getxattr(fs, t->f1, "user.a", buf, sizeof(buf)), 5);
	assert_memory_equal(buf, "hello", 5);
	assert_int_equal(tfs_getxattr(fs, t->f1, "user.drop", buf, sizeof(buf)), -ENODATA);

	assert_int_equal(lk(fs, t->d1, "sub", NULL), -ENOENT);
	assert_int_equal(lk(fs, t->d2, "sub", &st), 0);
	assert_int_equal(st.st_ino, t->sub);
	assert_int_equal(st.st_mode, S_IFDIR | 0700);
	assert_int_equal(ino_of(fs, t->sub, ".."), t->d2);

	assert_int_equal(lk(fs, ROOT, "sym", &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	assert_int_equal(tfs_readlink(fs, t->sym, buf, sizeof(buf)), 5);
	assert_memory_equal(buf, "d1/f1", 5);
	assert_int_equal(lk(fs, ROOT, "fifo", &st), 0);
	assert_true(S_ISFIFO(st.st_mode));

	assert_int_equal(ino_of(fs, ROOT, "x"), t->y);
	assert_int_equal(ino_of(fs, ROOT, "y"), t->x);
	assert_int_equal(lk(fs, ROOT, "orig", NULL), -ENOENT);
	assert_int_equal(ino_of(fs, t->d2, "renamed"), t->ren);
	assert_int_equal(lk(fs, ROOT, "gone", NULL), -ENOENT);
	assert_int_equal(tfs_getattr(fs, t->gone, &st), -ENOENT);
	assert_int_equal(lk(fs, ROOT, "tmpdir", NULL), -ENOENT);

	/* New inodes never reuse numbers of the old ones.  (An earlier check
	 * may have left "new" behind if it ran after the last sync.) */
	tfs_unlink(fs, ROOT, "new");
	uint64_t n = mk(fs, ROOT, "new", S_IFREG | 0644);
	assert_true(n > t->sub && n > t->ren && n > t->gone);
	assert_int_equal(tfs_unlink(fs, ROOT, "new"), 0);
}

enum persist { P_UNMOUNT, P_CRASH, P_CRASH_CKPT };

static void run_persist(enum persist how)
{
	struct tfs *fs = fresh();
	struct tree t;

	build_tree(fs, &t, how == P_CRASH_CKPT);
	check_tree(fs, &t);
	if (how == P_UNMOUNT) {
		assert_int_equal(tfs_unmount(fs), 0);
	} else {
		assert_int_equal(tfs_syncfs(fs), 0);
		tfs_abandon(fs);
	}
	fs = mount2();
	check_tree(fs, &t);
	/* And once more: the state written by the mount itself. */
	tfs_abandon(fs);
	fs = mount2();
	check_tree(fs, &t);
	assert_int_equal(tfs_unmount(fs), 0);
}

/*
 * Inode handles (inode.h): inode_get counts a reference and fails with
 * -ENOENT for a missing inode; a handle keeps a deleted inode's memory (not
 * the inode: the unlink deletes it at once, later gets fail) until its
 * inode_put, which frees it (ASan reports a leak or a use after free).
 */
static void test_handles(void **state)
{
	struct tfs *fs = fresh();
	struct tfs_inode *ip, *ip2;
	uint64_t ino = mk(fs, ROOT, "f", S_IFREG | 0640);

	ip = (struct tfs_inode *)1;
	assert_int_equal(inode_get(fs, 1u << 30, &ip), -ENOENT);
	assert_null(ip);
	assert_int_equal(inode_get(fs, ino, &ip), 0);
	assert_int_equal(inode_get(fs, ino, &ip2), 0);
	assert_ptr_equal(ip, ip2);
	inode_put(fs, ip2);
	inode_lock(ip);
	assert_int_equal(inode_ino(ip), ino);
	assert_int_equal(inode_mode(ip), S_IFREG | 0640);
	assert_int_equal(inode_nlink(ip), 1);
	assert_int_equal(inode_uid(ip), cr.uid);
	assert_int_equal(inode_gid(ip), cr.gid);
	assert_null(inode_dir(ip));
	inode_unlock(ip);
	assert_true(inode_exists(fs, ino));

	/* No lookup, no open: the unlink deletes it under our handle. */
	assert_int_equal(tfs_unlink(fs, ROOT, "f"), 0);
	assert_false(inode_exists(fs, ino));
	assert_int_equal(inode_get(fs, ino, &ip2), -ENOENT);
	assert_int_equal(inode_ino(ip), ino);
	assert_int_equal(inode_nlink(ip), 0);
	assert_int_equal(inode_mapped(ip), 0);
	inode_put(fs, ip);

	/* A directory's handle sees its entries. */
	uint64_t d = mk(fs, ROOT, "d", S_IFDIR | 0755);
	assert_int_equal(inode_get(fs, d, &ip), 0);
	assert_non_null(inode_dir(ip));
	assert_int_equal(inode_parent(ip), ROOT);
	inode_put(fs, ip);
	assert_int_equal(tfs_unmount(fs), 0);
}

static void test_persist_unmount(void **state)
{
	run_persist(P_UNMOUNT);
}

static void test_persist_crash(void **state)
{
	run_persist(P_CRASH);
}

static void test_persist_crash_ckpt(void **state)
{
	run_persist(P_CRASH_CKPT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_create_lookup, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unlink_rmdir, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rename, setup, teardown),
		cmocka_unit_test_setup_teardown(test_link_symlink, setup, teardown),
		cmocka_unit_test_setup_teardown(test_readdir, setup, teardown),
		cmocka_unit_test_setup_teardown(test_xattr, setup, teardown),
		cmocka_unit_test_setup_teardown(test_xattr_limits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_setattr, setup, teardown),
		cmocka_unit_test_setup_teardown(test_concurrent, setup, teardown),
		cmocka_unit_test_setup_teardown(test_handles, setup, teardown),
		cmocka_unit_test_setup_teardown(test_persist_unmount, setup, teardown),
		cmocka_unit_test_setup_teardown(test_persist_crash, setup, teardown),
		cmocka_unit_test_setup_teardown(test_persist_crash_ckpt, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
