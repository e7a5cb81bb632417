// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Description: testlib: the shared fixtures of the whole-fs unit tests (testlib.h), so
 * every test makes, formats and mounts its images one way.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fsck.h"
#include "testlib.h"

const char *tl_backend(void)
{
	const char *b = getenv("TFS_TEST_BACKEND");

	return b && *b ? b : "file";
}

bool tl_whole_nodes(void)
{
	const char *w = getenv("TFS_TEST_WHOLE_NODES");

	return w && *w && *w != '0';
}

bool tl_pieces(void)
{
	const char *w = getenv("TFS_TEST_PIECES");

	return w && *w && *w != '0';
}

void tl_mk_image(char path[TL_PATH_MAX], const char *tag, uint64_t size)
{
	const char *dir = access("/var/tmp", W_OK) == 0 ? "/var/tmp" : "/tmp";
	int fd;

	snprintf(path, TL_PATH_MAX, "%s/%s_XXXXXX", dir, tag);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0);
	close(fd);
}

void tl_mk_images(char img[][TL_PATH_MAX], const char **devs, unsigned n, const char *tag,
		  uint64_t size)
{
	for (unsigned i = 0; i < n; i++) {
		tl_mk_image(img[i], tag, size);
		devs[i] = img[i];
	}
}

void tl_rm_images(char img[][TL_PATH_MAX], unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		unlink(img[i]);
}

void tl_format(const char *const *devs, unsigned n, const char *backend)
{
	struct tfs_format_opts fo = { .force = true, .backend = backend ? backend : tl_backend(),
				      .no_short_nodes = tl_whole_nodes(), .pieces = tl_pieces() };
	char err[256] = "";
	int ret = tfs_format(devs, n, &fo, err, sizeof(err));

	if (ret)
		fprintf(stderr, "format: %s\n", err);
	assert_int_equal(ret, 0);
}

void tl_mount_opts(struct tfs_opts *o, const char *const *devs, unsigned n)
{
	memset(o, 0, sizeof(*o));
	o->devs = devs;
	o->ndevs = n;
	o->backend = tl_backend();
	o->commit_ms = 600000;		/* only explicit syncs commit */
	o->bounce_bufs = 8;
}

struct tfs *tl_mount(const struct tfs_opts *o)
{
	struct tfs *fs = NULL;
	char err[256] = "";
	int ret = tfs_mount(o, &fs, err, sizeof(err));

	if (ret)
		fprintf(stderr, "mount: %s\n", err);
	assert_int_equal(ret, 0);
	assert_non_null(fs);
	return fs;
}

void tl_pattern(uint8_t *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 12));
}

int tl_fsck(const char *const *devs, unsigned n, int mode, const char *backend, char **out)
{
	struct fsck_opts o = {
		.devs = devs, .ndevs = n, .mode = mode, .backend = backend,
	};
	char *buf = NULL;
	size_t len = 0;
	int rc;

	o.out = open_memstream(&buf, &len);
	assert_non_null(o.out);
	rc = fsck_run(&o, NULL);
	fclose(o.out);
	if (getenv("TFS_TEST_VERBOSE"))
		fprintf(stderr, "--- fsck mode %d -> %d\n%s", mode, rc, buf);
	if (out)
		*out = buf;
	else
		free(buf);
	return rc;
}
