// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: the namespace's special inodes and flags: O_TMPFILE (no name, deleted at its last release unless linked), RENAME_WHITEOUT (a 0:0 character device of mode 0 at the old name), and chattr's immutable and append-only flags as every namespace operation sees them, kept over a remount. */
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

/* O_TMPFILE: a file with no name and no link, deleted at its last release
 * unless tfs_link named it; RENAME_WHITEOUT leaves a character device 0:0
 * of mode 0, the caller's, at the old name, kept over a remount. */
static void test_tmpfile_whiteout(void **state)
{
	struct tfs *fs = fresh();
	struct tfs_file *f;
	struct stat st;
	uint64_t d = mk(fs, ROOT, "d", S_IFDIR | 0755);
	uint64_t file = mk(fs, ROOT, "file", S_IFREG | 0644);

	assert_int_equal(tfs_getattr(fs, d, &st), 0);
	int64_t mt = ns_of(st.st_mtim);
	assert_int_equal(tfs_tmpfile(fs, d, 0640, O_RDWR, &cr, &st, &f), 0);
	uint64_t t1 = st.st_ino;
	assert_int_equal(st.st_mode, S_IFREG | 0640);
	assert_int_equal(st.st_nlink, 0);
	assert_int_equal(st.st_uid, cr.uid);
	assert_int_equal(tfs_getattr(fs, d, &st), 0);
	assert_int_equal(ns_of(st.st_mtim), mt);	/* no name: the directory is as it was */
	assert_int_equal(tfs_link(fs, t1, d, "named", &st), 0);
	assert_int_equal(st.st_nlink, 1);
	tfs_forget(fs, t1, 1);			/* the link's lookup */
	assert_int_equal(tfs_release(f), 0);
	tfs_forget(fs, t1, 1);			/* the tmpfile's */
	assert_true(inode_exists(fs, t1));
	assert_int_equal(ino_of(fs, d, "named"), t1);

	assert_int_equal(tfs_tmpfile(fs, d, 0600, O_RDWR, &cr, &st, &f), 0);
	uint64_t t2 = st.st_ino;
	assert_int_equal(tfs_release(f), 0);
	tfs_forget(fs, t2, 1);
	assert_false(inode_exists(fs, t2));
	assert_int_equal(tfs_tmpfile(fs, file, 0600, O_RDWR, &cr, &st, &f), -ENOTDIR);

	const struct tfs_cred wc = { .uid = 42, .gid = 43 };

	assert_int_equal(tfs_rename_cred(fs, d, "named", d, "moved",
					 RENAME_WHITEOUT | RENAME_EXCHANGE, &wc), -EINVAL);
	assert_int_equal(tfs_rename_cred(fs, d, "named", d, "moved", RENAME_WHITEOUT, &wc), 0);
	for (int pass = 0; pass < 2; pass++) {
		assert_int_equal(ino_of(fs, d, "moved"), t1);
		assert_int_equal(lk(fs, d, "named", &st), 0);
		assert_int_equal(st.st_mode, S_IFCHR);
		assert_int_equal(st.st_rdev, 0);
		assert_int_equal(st.st_uid, wc.uid);
		assert_int_equal(st.st_nlink, 1);
		assert_int_equal(tfs_unmount(fs), 0);
		fs = mount2();
	}
	assert_int_equal(tfs_unmount(fs), 0);
}

/* chattr's flags: kept (a remount too), and what immutable and
 * append-only refuse, refused by lib itself (the kernel does not). */
static void test_flags(void **state)
{
	struct tfs *fs = fresh();
	struct tfs_file *f;
	struct stat st = { .st_mode = 0600 };
	uint32_t fl;
	uint64_t d = mk(fs, ROOT, "d", S_IFDIR | 0755);
	uint64_t x = mk(fs, d, "x", S_IFREG | 0644);

	assert_int_equal(tfs_getflags(fs, x, &fl), 0);
	assert_int_equal(fl, 0);
	assert_int_equal(tfs_setflags(fs, x, 0x00080000 /* FS_EXTENT_FL */), -EOPNOTSUPP);
	assert_int_equal(tfs_setflags(fs, x, TFS_FL_IMMUTABLE | TFS_FL_NODUMP), 0);
	for (int pass = 0; pass < 2; pass++) {
		assert_int_equal(tfs_getflags(fs, x, &fl), 0);
		assert_int_equal(fl, TFS_FL_IMMUTABLE | TFS_FL_NODUMP);
		assert_int_equal(tfs_open(fs, x, O_RDWR, &f), -EPERM);
		assert_int_equal(tfs_open(fs, x, O_WRONLY | O_APPEND, &f), -EPERM);
		assert_int_equal(tfs_open(fs, x, O_RDONLY | O_TRUNC, &f), -EPERM);
		assert_int_equal(tfs_setattr(fs, x, &st, TFS_SET_MODE, NULL, NULL), -EPERM);
		assert_int_equal(tfs_setattr(fs, x, &st, TFS_SET_MTIME_NOW, NULL, NULL), -EPERM);
		assert_int_equal(tfs_setxattr(fs, x, "user.a", "1", 1, 0), -EPERM);
		assert_int_equal(tfs_unlink(fs, d, "x"), -EPERM);
		assert_int_equal(tfs_rename(fs, d, "x", d, "y", 0), -EPERM);
		assert_int_equal(tfs_link(fs, x, d, "l", &st), -EPERM);
		assert_int_equal(tfs_unmount(fs), 0);
		fs = mount2();
	}
	assert_int_equal(tfs_open(fs, x, O_RDONLY, &f), 0);
	assert_int_equal(tfs_release(f), 0);

	/* Append-only: appends and times, nothing else. */
	assert_int_equal(tfs_setflags(fs, x, TFS_FL_APPEND), 0);
	assert_int_equal(tfs_open(fs, x, O_RDWR, &f), -EPERM);
	assert_int_equal(tfs_open(fs, x, O_WRONLY | O_APPEND | O_TRUNC, &f), -EPERM);
	assert_int_equal(tfs_open(fs, x, O_WRONLY | O_APPEND, &f), 0);
	assert_int_equal(tfs_pwrite(f, "ab", 2, 0, 0), 2);
	assert_int_equal(tfs_fallocate(f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 1), -EPERM);
	assert_int_equal(tfs_release(f), 0);
	assert_int_equal(tfs_open(fs, x, O_RDWR | TFS_O_APPEND_ASKED, &f), 0);
	assert_int_equal(tfs_release(f), 0);
	assert_int_equal(tfs_setattr(fs, x, &st, TFS_SET_MTIME_NOW, NULL, NULL), 0);
	assert_int_equal(tfs_setattr(fs, x, &st, TFS_SET_ATIME | TFS_SET_MTIME, NULL, NULL), -EPERM);
	st.st_size = 0;
	assert_int_equal(tfs_setattr(fs, x, &st, TFS_SET_SIZE, NULL, NULL), -EPERM);
	assert_int_equal(tfs_removexattr(fs, x, "user.a"), -EPERM);
	assert_int_equal(tfs_unlink(fs, d, "x"), -EPERM);
	assert_int_equal(tfs_setflags(fs, x, 0), 0);
	assert_int_equal(tfs_unlink(fs, d, "x"), 0);

	/* Directories: +i takes and loses no name, +a takes new ones. */
	uint64_t y = mk(fs, d, "y", S_IFREG | 0644);
	assert_int_equal(tfs_setflags(fs, d, TFS_FL_IMMUTABLE), 0);
	assert_int_equal(tfs_mknod(fs, d, "z", S_IFREG | 0644, 0, &cr, &st), -EPERM);
	assert_int_equal(tfs_unlink(fs, d, "y"), -EPERM);
	assert_int_equal(tfs_rename(fs, ROOT, "d", ROOT, "e", 0), -EPERM);
	assert_int_equal(tfs_mkdir(fs, d, "sub", 0755, &cr, &st), -EPERM);
	assert_int_equal(tfs_setflags(fs, d, 0), 0);
	uint64_t sub = mk(fs, d, "sub", S_IFDIR | 0755);
	mk(fs, sub, "in", S_IFREG | 0644);
	assert_int_equal(tfs_setflags(fs, d, TFS_FL_IMMUTABLE), 0);
	/* EPERM before ENOTEMPTY, as the kernel's may_delete (generic/079) */
	assert_int_equal(tfs_rmdir(fs, d, "sub"), -EPERM);
	assert_int_equal(tfs_setflags(fs, d, TFS_FL_APPEND), 0);
	assert_int_equal(tfs_mknod(fs, d, "z", S_IFREG | 0644, 0, &cr, &st), 0);
	tfs_forget(fs, st.st_ino, 1);
	assert_int_equal(tfs_rename(fs, ROOT, "d", ROOT, "e", 0), -EPERM);
	assert_int_equal(tfs_unlink(fs, d, "y"), -EPERM);
	assert_int_equal(tfs_rename(fs, d, "y", ROOT, "y", 0), -EPERM);
	assert_int_equal(tfs_setflags(fs, d, 0), 0);
	assert_int_equal(tfs_rename(fs, d, "y", ROOT, "y", 0), 0);
	assert_int_equal(ino_of(fs, ROOT, "y"), y);
	assert_int_equal(tfs_unmount(fs), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_tmpfile_whiteout, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flags, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
