// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: format v2, node area full: once creates get ENOSPC from the node gate, tfs_create of an existing name still opens it (O_CREAT without O_EXCL; the gate refused before the name was looked up, so the open failed with ENOSPC), O_CREAT|O_EXCL of it is EEXIST, and a new name stays ENOSPC. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "fs_i.h"
#include "testlib.h"

#define IMG_SIZE (64ull << 20)		/* the smallest node area: 256 slots */
#define NIMG 2
#define ROOT TFS_ROOT_INO

static char img[NIMG][TL_PATH_MAX];
static const char *devs[NIMG];

static int setup(void **state)
{
	(void)state;
	tl_mk_images(img, devs, NIMG, "tfs_v2nodegate", IMG_SIZE);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	tl_rm_images(img, NIMG);
	return 0;
}

/* Create f0, f1, ... until the first failure, which must be ENOSPC; the
 * count made. */
static unsigned fill(struct tfs *fs)
{
	struct tfs_file *f;
	struct stat st;
	char name[32];
	unsigned i;
	int ret;

	for (i = 0;; i++) {
		snprintf(name, sizeof(name), "f%u", i);
		ret = tfs_create(fs, ROOT, name, 0644, O_WRONLY | O_CREAT | O_EXCL, NULL, &st, &f);
		if (ret)
			break;
		tfs_release(f);
		tfs_forget(fs, st.st_ino, 1);
	}
	assert_int_equal(ret, -ENOSPC);
	return i;
}

static void test_open_existing_when_full(void **state)
{
	struct tfs_format_opts fo = { .force = true, .backend = "file", .v2 = true };
	struct tfs_file *f = NULL;
	struct tfs_opts o;
	struct stat st;
	struct tfs *fs;
	char err[256] = "", name[32];
	unsigned n;

	(void)state;
	assert_int_equal(tfs_format(devs, NIMG, &fo, err, sizeof(err)), 0);
	tl_mount_opts(&o, devs, NIMG);
	o.backend = "file";
	fs = tl_mount(&o);
	n = fill(fs);
	assert_true(n > 1000);
	snprintf(name, sizeof(name), "f%u", n - 1);
	assert_int_equal(tfs_create(fs, ROOT, name, 0644, O_WRONLY | O_CREAT, NULL, &st, &f), 0);
	tfs_release(f);
	tfs_forget(fs, st.st_ino, 1);
	assert_int_equal(tfs_create(fs, ROOT, name, 0644, O_WRONLY | O_CREAT | O_EXCL, NULL, &st, &f),
			 -EEXIST);
	assert_int_equal(tfs_create(fs, ROOT, "new", 0644, O_WRONLY | O_CREAT, NULL, &st, &f), -ENOSPC);
	tfs_unmount(fs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_open_existing_when_full, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
