/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Description: namei_env.h: the namespace tests' two image files, their
 * file-backend mount, a caller's credentials and lookup helpers that drop
 * the reference they take (test_namei, test_namei_flags).  The includer
 * includes cmocka.h, inode.h and testlib.h first.
 */
#ifndef TWINFS_NAMEI_ENV_H
#define TWINFS_NAMEI_ENV_H

#define IMG_SIZE (64ull << 20)
#define NIMG 2
#define ROOT TFS_ROOT_INO

static char img[NIMG][TL_PATH_MAX];
static const char *devs[NIMG];

static int setup(void **state)
{
	tl_mk_images(img, devs, NIMG, "tfs_namei", IMG_SIZE);
	return 0;
}

static int teardown(void **state)
{
	tl_rm_images(img, NIMG);
	return 0;
}

/* Namespace logic does not depend on the backend: always "file". */
static inline struct tfs *mount2(void)
{
	struct tfs_opts o;

	tl_mount_opts(&o, devs, NIMG);
	o.backend = "file";
	return tl_mount(&o);
}

static inline struct tfs *fresh(void)
{
	tl_format(devs, NIMG, "file");
	return mount2();
}

static const struct tfs_cred cr = { .uid = 1234, .gid = 5678 };

/* Helpers that drop the reference the call adds, so deletion is observable. */
static inline uint64_t mk(struct tfs *fs, uint64_t parent, const char *name, mode_t mode)
{
	struct stat st;

	if (S_ISDIR(mode))
		assert_int_equal(tfs_mkdir(fs, parent, name, mode & 07777, &cr, &st), 0);
	else
		assert_int_equal(tfs_mknod(fs, parent, name, mode, 0, &cr, &st), 0);
	assert_int_equal(st.st_mode & S_IFMT, mode & S_IFMT);
	tfs_forget(fs, st.st_ino, 1);
	return st.st_ino;
}

static inline int lk(struct tfs *fs, uint64_t parent, const char *name, struct stat *out)
{
	struct stat st;
	int ret = tfs_lookup(fs, parent, name, &st);

	if (!ret) {
		tfs_forget(fs, st.st_ino, 1);
		if (out)
			*out = st;
	}
	return ret;
}

static inline uint64_t ino_of(struct tfs *fs, uint64_t parent, const char *name)
{
	struct stat st = { 0 };

	assert_int_equal(lk(fs, parent, name, &st), 0);
	return st.st_ino;
}

static inline nlink_t nlink_of(struct tfs *fs, uint64_t ino)
{
	struct stat st;

	assert_int_equal(tfs_getattr(fs, ino, &st), 0);
	return st.st_nlink;
}

static inline int64_t ns_of(struct timespec t)
{
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static inline int64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return ns_of(t);
}

#endif
