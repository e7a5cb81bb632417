// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Description: file_env: the fixtures the data-path unit tests (test_file, test_file_space)
 * share (file_env.h): two sparse images formatted and mounted, files made
 * and reopened, and checks against a model and against the raw images.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "dev_i.h"
#include "file_env.h"

/* What the running test has on disk and mounted, copied out of its
 * (stack) env, so a failed assertion, which leaves the test early, still
 * has its images removed by the teardown. */
static char live_img[2][64];
struct tfs *live_fs;

int env_mount(struct env *e)
{
	const char *devs[2] = { e->img[0], e->img[1] };
	struct tfs_opts o = { .devs = devs, .ndevs = 2, .backend = e->backend,
			      .commit_ms = e->commit_ms, .fault = e->fault,
			      .compact_dirty = e->compact_dirty };
	char err[256] = "";
	int ret = tfs_mount(&o, &e->fs, err, sizeof(err));

	/* io_uring drops a closed ring's registered files (and so the image's
	 * flock) asynchronously: give a remount a moment. */
	for (int i = 0; ret == -EBUSY && i < 100; i++) {
		usleep(20000);
		ret = tfs_mount(&o, &e->fs, err, sizeof(err));
	}
	if (ret)
		fprintf(stderr, "mount (%s): %s: %s\n", e->backend, strerror(-ret), err);
	live_fs = ret ? NULL : e->fs;
	return ret;
}

void env_umount(struct env *e)
{
	live_fs = NULL;
	assert_int_equal(tfs_unmount(e->fs), 0);
	e->fs = NULL;
}

void env_remount(struct env *e)
{
	env_umount(e);
	assert_int_equal(env_mount(e), 0);
}

/*
 * Whether @backend can run here: io_uring and libaio are refused by some
 * kernels and sandboxes (seccomp, the io_uring_disabled sysctl).  Prints
 * one SKIP line with the reason and returns false when refused; any other
 * probe failure is a failure of the test.
 */
static bool backend_usable(const char *backend)
{
	int ret = 0;

	if (!strcmp(backend, "uring"))
		ret = dev_uring_probe();
	else if (!strcmp(backend, "aio"))
		ret = dev_aio_probe();
	if (ret == -EPERM || ret == -ENOSYS || ret == -EACCES) {
		printf("SKIP: the %s backend is refused here (%s)\n", backend, strerror(-ret));
		return false;
	}
	assert_int_equal(ret, 0);
	return true;
}

/* Returns 0, or 1 when the backend is refused here (after a SKIP line);
 * a mount that fails for any other reason fails the test. */
int env_init(struct env *e, const char *backend, uint64_t size)
{
	return env_init_fmt(e, backend, size, false);
}

int env_init_fmt(struct env *e, const char *backend, uint64_t size, bool v2)
{
	const char *devs[2];
	struct tfs_format_opts fo = { .label = "t", .backend = "file", .v2 = v2 };
	char err[256] = "";
	int ret;

	memset(e, 0, sizeof(*e));
	if (!backend_usable(backend))
		return 1;
	e->backend = backend;
	e->commit_ms = 600000;	/* commits only when a test asks */
	for (int i = 0; i < 2; i++) {
		int fd;

		snprintf(e->img[i], sizeof(e->img[i]), "/tmp/tfs_file_XXXXXX");
		fd = mkstemp(e->img[i]);
		assert_true(fd >= 0);
		assert_int_equal(ftruncate(fd, (off_t)size), 0);
		close(fd);
		devs[i] = e->img[i];
		memcpy(live_img[i], e->img[i], sizeof(live_img[i]));
	}
	ret = tfs_format(devs, 2, &fo, err, sizeof(err));
	if (ret)
		fprintf(stderr, "format: %s\n", err);
	assert_int_equal(ret, 0);
	ret = env_mount(e);
	assert_int_equal(ret, 0);
	return 0;
}

void env_fini(struct env *e)
{
	if (e->fs)
		env_umount(e);
	unlink(e->img[0]);
	unlink(e->img[1]);
	live_img[0][0] = live_img[1][0] = '\0';
}

int teardown(void **state)
{
	if (live_fs)
		tfs_abandon(live_fs);
	live_fs = NULL;
	for (int i = 0; i < 2; i++)
		if (live_img[i][0])
			unlink(live_img[i]);
	live_img[0][0] = live_img[1][0] = '\0';
	return 0;
}

struct tfs_file *mkfile(struct env *e, const char *name)
{
	struct tfs_file *f = NULL;
	struct stat st;

	assert_int_equal(tfs_create(e->fs, TFS_ROOT_INO, name, 0644, O_RDWR, &e->cred, &st, &f), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(tfs_file_ino(f), st.st_ino);
	return f;
}

struct tfs_file *reopen(struct env *e, const char *name)
{
	struct tfs_file *f = NULL;
	struct stat st;

	assert_int_equal(tfs_lookup(e->fs, TFS_ROOT_INO, name, &st), 0);
	assert_int_equal(tfs_open(e->fs, st.st_ino, O_RDWR, &f), 0);
	return f;
}

uint64_t fsize(struct tfs_file *f)
{
	return atomic_load(&f->ip->size);
}

void pwrite_ok(struct tfs_file *f, const void *p, size_t len, off_t off)
{
	assert_int_equal(tfs_pwrite(f, p, len, off, 0), (ssize_t)len);
}

/* The whole file equals model[0, size). */
void check_model(struct tfs_file *f, const uint8_t *model, uint64_t size)
{
	uint8_t *b = malloc(size + 1);

	assert_non_null(b);
	assert_int_equal(fsize(f), size);
	assert_int_equal(tfs_pread(f, b, size + 1, 0), (ssize_t)size);
	for (uint64_t i = 0; i < size; i++)
		if (b[i] != model[i]) {
			fprintf(stderr, "mismatch at %llu: %02x != %02x\n",
				(unsigned long long)i, b[i], model[i]);
			fail();
		}
	free(b);
}

void fill_pattern(uint8_t *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 12));
}

struct extent_ent ent(struct tfs_file *f, uint64_t fblk)
{
	struct extent_ent e;

	extent_get(&f->ip->map, fblk, &e);
	return e;
}

/* Every mapped, written block verifies on each image read raw. */
struct rawchk { struct env *e; int fds[2]; uint64_t nblk; };

static int rawchk_run(void *ctx, uint64_t fblk, uint64_t phys, uint32_t n,
		      const struct extent_ent *ents)
{
	struct rawchk *c = ctx;
	uint8_t *b = aligned_alloc(BS, BS);

	if (phys & EXTENT_UNWRITTEN) {
		free(b);
		return 0;
	}
	for (uint32_t i = 0; i < n; i++)
		for (int d = 0; d < 2; d++) {
			assert_int_equal(pread(c->fds[d], b, BS, (off_t)((phys + i) * BS)), BS);
			assert_true(csum_block(b, phys + i) == ents[i].csum);
			c->nblk++;
		}
	free(b);
	return 0;
}

uint64_t check_raw(struct env *e, struct tfs_file *f)
{
	struct rawchk c = { .e = e };

	for (int d = 0; d < 2; d++) {
		c.fds[d] = open(e->img[d], O_RDONLY);
		assert_true(c.fds[d] >= 0);
	}
	assert_int_equal(extent_walk(&f->ip->map, 0, EXTENT_MAX_FBLK, rawchk_run, &c), 0);
	close(c.fds[0]);
	close(c.fds[1]);
	return c.nblk;
}
