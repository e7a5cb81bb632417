// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: POSIX ACLs: acl.c's rules (valid, equiv_mode, chmod, create_masq) against the kernel's fs/posix_acl.c, and the file system keeping mode and ACL in step (set, chmod, inheritance, umask, sgid) live and after a crash replay, on format 1 and 2; off, both names are EOPNOTSUPP. */
#include <errno.h>
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

#include "acl.h"
#include "aclent.h"
#include "ckpt_v2.h"
#include "fsck.h"
#include "testlib.h"

#define IMG_SIZE (64ull << 20)
#define NIMG 2
#define ROOT TFS_ROOT_INO

static const struct ent named[] = {
	{ UO, 7, ~0u }, { U, 6, 1000 }, { GO, 5, ~0u }, { MASK, 6, ~0u }, { OTH, 4, ~0u },
};

static void test_valid(void **state)
{
	uint8_t b[128];
	size_t n = mk(b, named, 5);

	assert_int_equal(acl_valid(b, n), 0);
	assert_int_equal(acl_valid(b, n - 1), -EINVAL);		/* torn entry */
	/* Named entry without a mask. */
	const struct ent nomask[] = { { UO, 7, ~0u }, { U, 6, 1 }, { GO, 5, ~0u }, { OTH, 4, ~0u } };
	assert_int_equal(acl_valid(b, mk(b, nomask, 4)), -EINVAL);
	/* Out of order. */
	const struct ent order[] = { { GO, 5, ~0u }, { UO, 7, ~0u }, { OTH, 4, ~0u } };
	assert_int_equal(acl_valid(b, mk(b, order, 3)), -EINVAL);
	/* Named ids out of order or repeated: the kernel's posix_acl_valid
	 * accepts them (a raw setxattr on tmpfs, kernel 6.18, takes users
	 * 2000, 1000 and 1000, 1000 and reads them back in that order), so
	 * FUSE passes them on and they must be stored. */
	const struct ent dup[] = { { UO, 7, ~0u }, { U, 6, 1 }, { U, 6, 1 }, { GO, 5, ~0u },
				   { MASK, 6, ~0u }, { OTH, 4, ~0u } };
	assert_int_equal(acl_valid(b, mk(b, dup, 6)), 0);
	const struct ent unsorted[] = { { UO, 7, ~0u }, { U, 6, 2000 }, { U, 6, 1000 },
					{ GO, 5, ~0u }, { G, 4, 9 }, { G, 4, 3 },
					{ MASK, 6, ~0u }, { OTH, 4, ~0u } };
	assert_int_equal(acl_valid(b, mk(b, unsorted, 8)), 0);
	/* What it does check: a mask without named entries is fine; a
	 * named user after the owning group, two masks, an entry after
	 * OTHER, permissions beyond rwx, an unknown tag are not. */
	const struct ent maskonly[] = { { UO, 7, ~0u }, { GO, 5, ~0u }, { MASK, 6, ~0u },
					{ OTH, 4, ~0u } };
	assert_int_equal(acl_valid(b, mk(b, maskonly, 4)), 0);
	const struct ent late[] = { { UO, 7, ~0u }, { GO, 5, ~0u }, { U, 6, 1 },
				    { MASK, 6, ~0u }, { OTH, 4, ~0u } };
	assert_int_equal(acl_valid(b, mk(b, late, 5)), -EINVAL);
	const struct ent masks[] = { { UO, 7, ~0u }, { GO, 5, ~0u }, { MASK, 6, ~0u },
				     { MASK, 6, ~0u }, { OTH, 4, ~0u } };
	assert_int_equal(acl_valid(b, mk(b, masks, 5)), -EINVAL);
	const struct ent after[] = { { UO, 7, ~0u }, { GO, 5, ~0u }, { OTH, 4, ~0u },
				     { OTH, 4, ~0u } };
	assert_int_equal(acl_valid(b, mk(b, after, 4)), -EINVAL);
	const struct ent rwx8[] = { { UO, 8, ~0u }, { GO, 5, ~0u }, { OTH, 4, ~0u } };
	assert_int_equal(acl_valid(b, mk(b, rwx8, 3)), -EINVAL);
	const struct ent badtag[] = { { UO, 7, ~0u }, { 0x40, 5, ~0u }, { OTH, 4, ~0u } };
	assert_int_equal(acl_valid(b, mk(b, badtag, 3)), -EINVAL);
	assert_int_equal(acl_valid(b, 4), -EINVAL);		/* no entries */
	/* No other. */
	assert_int_equal(acl_valid(b, mk(b, named, 4)), -EINVAL);
	n = mk(b, named, 5);
	b[0] = 1;					/* version */
	assert_int_equal(acl_valid(b, n), -EINVAL);
}

static void test_rules(void **state)
{
	uint8_t b[128];
	size_t n = mk(b, named, 5);
	uint32_t mode = S_IFREG | S_ISGID | 0;

	/* The mask, not the owning group, gives the group bits. */
	assert_int_equal(acl_equiv_mode(b, n, &mode), 1);
	assert_int_equal(mode, S_IFREG | S_ISGID | 0764);
	const struct ent min[] = { { UO, 6, ~0u }, { GO, 4, ~0u }, { OTH, 0, ~0u } };
	size_t m = mk(b, min, 3);
	mode = S_IFREG | 0777;
	assert_int_equal(acl_equiv_mode(b, m, &mode), 0);
	assert_int_equal(mode, S_IFREG | 0640);

	/* chmod: owner, mask (group_obj kept), other. */
	n = mk(b, named, 5);
	acl_chmod(b, n, 0510);
	assert_int_equal(perm_of(b, n, UO), 5);
	assert_int_equal(perm_of(b, n, MASK), 1);
	assert_int_equal(perm_of(b, n, GO), 5);
	assert_int_equal(perm_of(b, n, U), 6);
	assert_int_equal(perm_of(b, n, OTH), 0);
	m = mk(b, min, 3);
	acl_chmod(b, m, 0705);
	assert_int_equal(perm_of(b, m, GO), 0);

	/* create_masq: the default ACL narrowed by the create mode 0640. */
	n = mk(b, named, 5);
	mode = S_IFREG | 0640;
	assert_int_equal(acl_create_masq(b, n, &mode), 1);
	assert_int_equal(mode, S_IFREG | 0640);
	assert_int_equal(perm_of(b, n, UO), 6);
	assert_int_equal(perm_of(b, n, MASK), 4);
	assert_int_equal(perm_of(b, n, GO), 5);	/* under a mask: untouched */
	assert_int_equal(perm_of(b, n, OTH), 0);
	const struct ent dmin[] = { { UO, 7, ~0u }, { GO, 5, ~0u }, { OTH, 1, ~0u } };
	m = mk(b, dmin, 3);
	mode = S_IFDIR | 0777;
	assert_int_equal(acl_create_masq(b, m, &mode), 0);
	assert_int_equal(mode, S_IFDIR | 0751);
}

/* ---- the file system ---- */

static char img[NIMG][TL_PATH_MAX];
static const char *devs[NIMG];

static int setup(void **state)
{
	tl_mk_images(img, devs, NIMG, "tfs_acl", IMG_SIZE);
	return 0;
}

static int teardown(void **state)
{
	tl_rm_images(img, NIMG);
	return 0;
}

static struct tfs *mnt(bool v1, bool acl)
{
	struct tfs_opts o;

	tl_mount_opts(&o, devs, NIMG);
	o.backend = "file";
	o.v1 = v1;
	o.acl = acl;
	return tl_mount(&o);
}

static uint32_t mode_of(struct tfs *fs, uint64_t ino)
{
	struct stat st;

	assert_int_equal(tfs_getattr(fs, ino, &st), 0);
	return st.st_mode;
}

static void run_fs(bool v1)
{
	struct tfs_format_opts fo = { .force = true, .backend = "file", .v2 = !v1,
				      .pieces = !v1 && tl_pieces() };
	char err[256];
	uint8_t b[128], got[128];
	struct tfs_cred cr = { .uid = 1, .gid = 2, .umask = 027 };
	struct stat st;
	uint64_t f, d, sub, g;

	assert_int_equal(tfs_format(devs, NIMG, &fo, err, sizeof(err)), 0);
	struct tfs *fs = mnt(v1, true);

	/* A named-user ACL: the mask becomes the group bits, sgid kept. */
	assert_int_equal(tfs_mknod(fs, ROOT, "f", S_IFREG | S_ISGID | 0777, 0, &cr, &st), 0);
	f = st.st_ino;
	assert_int_equal(st.st_mode, S_IFREG | S_ISGID | 0750);	/* umask 027 */
	size_t n = mk(b, named, 5);
	assert_int_equal(tfs_setxattr(fs, f, ACL_XATTR_ACCESS, b, n, 0), 0);
	assert_int_equal(mode_of(fs, f), S_IFREG | S_ISGID | 0764);
	assert_int_equal(tfs_getxattr(fs, f, ACL_XATTR_ACCESS, got, sizeof(got)), (ssize_t)n);
	/* chmod moves owner, mask and other. */
	struct stat in = { .st_mode = S_ISGID | 0640 };
	assert_int_equal(tfs_setattr(fs, f, &in, TFS_SET_MODE, NULL, &st), 0);
	assert_int_equal(tfs_getxattr(fs, f, ACL_XATTR_ACCESS, got, sizeof(got)), (ssize_t)n);
	assert_int_equal(perm_of(got, n, MASK), 4);
	assert_int_equal(perm_of(got, n, OTH), 0);
	/* Set by an outsider: sgid goes. */
	assert_int_equal(tfs_setxattr(fs, f, ACL_XATTR_ACCESS, b, n, TFS_XATTR_KILL_SGID), 0);
	assert_int_equal(mode_of(fs, f), S_IFREG | 0764);
	/* Ids unsorted and repeated, as the kernel lets through: stored
	 * and read back byte for byte, the mode from its mask. */
	const struct ent unsorted[] = { { UO, 7, ~0u }, { U, 6, 2000 }, { U, 4, 1000 },
					{ U, 4, 1000 }, { GO, 5, ~0u }, { MASK, 5, ~0u },
					{ OTH, 0, ~0u } };
	uint8_t u[128];
	size_t un = mk(u, unsorted, 7);
	assert_int_equal(tfs_setxattr(fs, f, ACL_XATTR_ACCESS, u, un, 0), 0);
	assert_int_equal(mode_of(fs, f), S_IFREG | 0750);
	assert_int_equal(tfs_getxattr(fs, f, ACL_XATTR_ACCESS, got, sizeof(got)), (ssize_t)un);
	assert_memory_equal(got, u, un);
	/* An ACL the mode says all of: only the mode, the stored one goes. */
	const struct ent min[] = { { UO, 6, ~0u }, { GO, 0, ~0u }, { OTH, 0, ~0u } };
	assert_int_equal(tfs_setxattr(fs, f, ACL_XATTR_ACCESS, b, mk(b, min, 3), 0), 0);
	assert_int_equal(mode_of(fs, f), S_IFREG | 0600);
	assert_int_equal(tfs_getxattr(fs, f, ACL_XATTR_ACCESS, got, sizeof(got)), -ENODATA);
	/* Bad values, default ACLs on files. */
	assert_int_equal(tfs_setxattr(fs, f, ACL_XATTR_ACCESS, b, 7, 0), -EINVAL);
	assert_int_equal(tfs_setxattr(fs, f, ACL_XATTR_DEFAULT, b, mk(b, named, 5), 0), -EACCES);

	/* Inheritance: the default ACL, masked by the create mode, no umask. */
	assert_int_equal(tfs_mkdir(fs, ROOT, "d", 0755, &cr, &st), 0);
	d = st.st_ino;
	n = mk(b, named, 5);
	assert_int_equal(tfs_setxattr(fs, d, ACL_XATTR_DEFAULT, b, n, 0), 0);
	assert_int_equal(tfs_mknod(fs, d, "g", S_IFREG | 0666, 0, &cr, &st), 0);
	g = st.st_ino;
	assert_int_equal(st.st_mode, S_IFREG | 0664);
	assert_int_equal(tfs_getxattr(fs, g, ACL_XATTR_ACCESS, got, sizeof(got)), (ssize_t)n);
	assert_int_equal(perm_of(got, n, MASK), 6);
	assert_int_equal(tfs_getxattr(fs, g, ACL_XATTR_DEFAULT, got, sizeof(got)), -ENODATA);
	assert_int_equal(tfs_mkdir(fs, d, "sub", 0700, &cr, &st), 0);
	sub = st.st_ino;
	assert_int_equal(st.st_mode, S_IFDIR | 0700);
	assert_int_equal(tfs_getxattr(fs, sub, ACL_XATTR_DEFAULT, got, sizeof(got)), (ssize_t)n);
	assert_memory_equal(got, b, n);
	assert_int_equal(tfs_getxattr(fs, sub, ACL_XATTR_ACCESS, got, sizeof(got)), (ssize_t)n);
	assert_int_equal(perm_of(got, n, MASK), 0);

	/* A crash after the commit: the replay gives the same. */
	assert_int_equal(tfs_syncfs(fs), 0);
	tfs_abandon(fs);
	fs = mnt(v1, true);
	assert_int_equal(mode_of(fs, f), S_IFREG | 0600);
	assert_int_equal(mode_of(fs, g), S_IFREG | 0664);
	assert_int_equal(mode_of(fs, sub), S_IFDIR | 0700);
	assert_int_equal(tfs_getxattr(fs, g, ACL_XATTR_ACCESS, got, sizeof(got)), (ssize_t)n);
	assert_int_equal(tfs_getxattr(fs, sub, ACL_XATTR_DEFAULT, got, sizeof(got)), (ssize_t)n);
	assert_memory_equal(got, b, n);
	assert_int_equal(tfs_unmount(fs), 0);

	/* Off: both names refused, the umask still the caller's. */
	fs = mnt(v1, false);
	assert_int_equal(tfs_setxattr(fs, f, ACL_XATTR_ACCESS, b, n, 0), -EOPNOTSUPP);
	assert_int_equal(tfs_setxattr(fs, d, ACL_XATTR_DEFAULT, b, n, 0), -EOPNOTSUPP);
	assert_int_equal(tfs_mknod(fs, d, "h", S_IFREG | 0666, 0, &cr, &st), 0);
	assert_int_equal(st.st_mode, S_IFREG | 0640);
	/* A chmod while off still moves the stored ACL with the mode: the
	 * next mount with ACLs enforces it (review: a chmod to take access
	 * away under noacl left the mask and other entries granting it). */
	in.st_mode = 0600;
	assert_int_equal(tfs_setattr(fs, g, &in, TFS_SET_MODE, NULL, &st), 0);
	assert_int_equal(tfs_getxattr(fs, g, ACL_XATTR_ACCESS, got, sizeof(got)), (ssize_t)n);
	assert_int_equal(perm_of(got, n, MASK), 0);
	assert_int_equal(perm_of(got, n, OTH), 0);
	assert_int_equal(tfs_unmount(fs), 0);
}

static void test_fs_v2(void **state)
{
	run_fs(false);
}

static void test_fs_v1(void **state)
{
	run_fs(true);
}

/* fsck -n of the images: its exit code (the report on stderr if not 0). */
static int fsck_n(void)
{
	char *out;
	int rc = tl_fsck(devs, NIMG, FSCK_CHECK, "file", &out);

	if (rc)
		fprintf(stderr, "--- fsck -n -> %d\n%s", rc, out);
	free(out);
	return rc;
}

static void *ckpt_thread(void *arg)
{
	return (void *)(intptr_t)ckpt_v2_write(arg);
}

/*
 * A chmod that lands while a checkpoint writes (between the take of its
 * set of changes and the write of the file): the checkpoint writes the
 * INODE item from memory, new mode, but not the XATTR items its set does
 * not name, old ACL; the log after it holds the chmod's records.  That
 * crash-consistent image is clean for fsck (review of fsck_v2_acl.c: the
 * mode check first flagged it), and the next mount's replay puts the two
 * back in step.
 */
static void test_ckpt_chmod(void **state)
{
	struct tfs_format_opts fo = { .force = true, .backend = "file", .v2 = true,
				      .pieces = tl_pieces() };
	struct tfs_cred cr = { .uid = 1, .gid = 2, .umask = 022 };
	struct stat st, in = { 0 };
	uint8_t b[128], got[128];
	char err[256];
	pthread_t th;
	void *rc;
	uint64_t f;
	size_t n;

	assert_int_equal(tfs_format(devs, NIMG, &fo, err, sizeof(err)), 0);
	struct tfs *fs = mnt(false, true);
	assert_int_equal(tfs_mknod(fs, ROOT, "f", S_IFREG | 0644, 0, &cr, &st), 0);
	f = st.st_ino;
	n = mk(b, named, 5);
	assert_int_equal(tfs_setxattr(fs, f, ACL_XATTR_ACCESS, b, n, 0), 0);
	assert_int_equal(mode_of(fs, f), S_IFREG | 0764);
	assert_int_equal(tfs_unmount(fs), 0);
	assert_int_equal(fsck_n(), FSCK_EXIT_OK);

	fs = mnt(false, true);
	/* The inode in the next set (its times), its xattrs not. */
	assert_int_equal(tfs_setattr(fs, f, &in, TFS_SET_MTIME_NOW, NULL, &st), 0);
	setenv("TWINFS_V2_CKPT_PAUSE_MS", "400", 1);
	assert_int_equal(pthread_create(&th, NULL, ckpt_thread, fs), 0);
	usleep(150 * 1000);
	in.st_mode = 0640;
	assert_int_equal(tfs_setattr(fs, f, &in, TFS_SET_MODE, NULL, &st), 0);
	assert_int_equal(pthread_join(th, &rc), 0);
	unsetenv("TWINFS_V2_CKPT_PAUSE_MS");
	assert_int_equal((intptr_t)rc, 0);
	assert_int_equal(tfs_syncfs(fs), 0);
	tfs_abandon(fs);
	assert_int_equal(fsck_n(), FSCK_EXIT_OK);

	fs = mnt(false, true);
	assert_int_equal(mode_of(fs, f), S_IFREG | 0640);
	assert_int_equal(tfs_getxattr(fs, f, ACL_XATTR_ACCESS, got, sizeof(got)), (ssize_t)n);
	assert_int_equal(perm_of(got, n, MASK), 4);
	assert_int_equal(tfs_unmount(fs), 0);
	assert_int_equal(fsck_n(), FSCK_EXIT_OK);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid),
		cmocka_unit_test(test_rules),
		cmocka_unit_test_setup_teardown(test_fs_v2, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fs_v1, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ckpt_chmod, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
