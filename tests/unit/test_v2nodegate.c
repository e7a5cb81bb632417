// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: format v2, node area full: once creates get ENOSPC from the node gate, tfs_create of an existing name still opens it (O_CREAT without O_EXCL; the gate refused before the name was looked up, so the open failed with ENOSPC), O_CREAT|O_EXCL of it is EEXIST, and a new name stays ENOSPC.  Writes admitted and not yet noted (128 writers to files in different leaves, their commits held back by the test holding the inodes' locks) reserve their slots, so the checkpoints after them fit: every write returns 4096 or ENOSPC, checkpoint and unmount succeed, no reservation is left and every acknowledged write reads back after a remount; and the dirty set's hash table is not counted as notes: with room for a few writes past the margin after a checkpoint, two writes go in without waiting for one.  Namespace changes and setxattrs of 64 KiB values admitted and not yet noted (64 held before their notes by the test holding the dirty set's lock) reserve their slots too, and an inode's xattr rewrite counts in the gate once noted: the checkpoint after them succeeds and writes no more slots than the gate counted, and every acknowledged change is there after a remount.  Deletes at the last close of files unlinked while open (64 at once, a leaf apart, their notes held back) reserve before they take a lock and count once noted: the checkpoint after them succeeds (it failed with ENOSPC when they counted nothing) and writes no more than the gate counted. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "fs_i.h"
#include "testlib.h"
#include "v2dirty.h"

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

/* A freshly formatted file system, mounted. */
static struct tfs *mount_fresh(struct tfs_opts *o)
{
	struct tfs_format_opts fo = { .force = true, .backend = "file", .v2 = true,
				      .pieces = tl_pieces() };
	char err[256] = "";

	assert_int_equal(tfs_format(devs, NIMG, &fo, err, sizeof(err)), 0);
	tl_mount_opts(o, devs, NIMG);
	o->backend = "file";
	return tl_mount(o);
}

static void test_open_existing_when_full(void **state)
{
	struct tfs_file *f = NULL;
	struct tfs_opts o;
	struct stat st;
	struct tfs *fs;
	char name[32];
	unsigned n;

	(void)state;
	fs = mount_fresh(&o);
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

/* Unlink the last files made (f<n-1> down) until the gate has @room slots
 * past its need after a checkpoint; the count left. */
static unsigned make_room(struct tfs *fs, unsigned n, uint64_t room)
{
	uint64_t free_slots, need;
	char name[32];

	for (;;) {
		assert_int_equal(tfs_checkpoint(fs), 0);
		fs_node_gate_stats(fs, &free_slots, &need);
		if (free_slots >= need + room)
			return n;
		for (unsigned k = 0; k < 100 && n > 0; k++) {
			snprintf(name, sizeof(name), "f%u", --n);
			assert_int_equal(tfs_unlink(fs, ROOT, name), 0);
		}
		assert_true(n > 0);
	}
}

/* A fresh file system, filled with empty files and then given 16 slots of
 * room past the gate's need; *step: the files there are over @changes
 * (at least 20: a leaf holds about 60 empty files, so changes to every
 * step-th file land in different leaves). */
static struct tfs *mount_nearly_full(struct tfs_opts *o, unsigned changes, unsigned *step)
{
	struct tfs *fs;

	fs = mount_fresh(o);
	*step = make_room(fs, fill(fs), 16) / changes;
	assert_true(*step >= 20);
	return fs;
}

static struct tfs_file *open_name(struct tfs *fs, unsigned i, int flags)
{
	struct tfs_file *f;
	struct stat st;
	char name[32];

	snprintf(name, sizeof(name), "f%u", i);
	assert_int_equal(tfs_lookup(fs, ROOT, name, &st), 0);
	assert_int_equal(tfs_open(fs, st.st_ino, flags, &f), 0);
	return f;
}

static void close_file(struct tfs *fs, struct tfs_file *f)
{
	uint64_t ino = inode_ino(f->ip);

	tfs_release(f);
	tfs_forget(fs, ino, 1);
}

#define NWRITERS 192

struct writer {
	pthread_t t;
	struct tfs_file *f;
	unsigned seed;
	ssize_t ret;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	uint8_t buf[4096];

	tl_pattern(buf, sizeof(buf), w->seed);
	w->ret = tfs_pwrite(w->f, buf, sizeof(buf), 0, 0);
	return NULL;
}

static uint64_t reserved(struct tfs *fs)
{
	return atomic_load(&fs->node_resv_touch) + atomic_load(&fs->node_resv_other);
}

static void test_inflight_writes_fit(void **state)
{
	static struct writer w[NWRITERS];
	uint8_t want[4096], got[4096];
	uint64_t free_slots, need;
	struct tfs_opts o;
	struct tfs *fs;
	unsigned step, ok = 0, nospc = 0;

	(void)state;
	fs = mount_nearly_full(&o, NWRITERS, &step);
	for (unsigned i = 0; i < NWRITERS; i++) {
		w[i].f = open_name(fs, i * step, O_RDWR);
		w[i].seed = i + 1;
	}
	/* The commits wait for the inode locks: every write the gate admits
	 * stays admitted and not noted until they go. */
	for (unsigned i = 0; i < NWRITERS; i++)
		inode_lock(w[i].f->ip);
	for (unsigned i = 0; i < NWRITERS; i++)
		assert_int_equal(pthread_create(&w[i].t, NULL, writer_main, &w[i]), 0);
	usleep(1500 * 1000);
	/* What the admitted ones hold fits in the free slots. */
	fs_node_gate_stats(fs, &free_slots, &need);
	assert_true(need <= free_slots);
	assert_true(reserved(fs) > 0);
	for (unsigned i = NWRITERS; i-- > 0;)
		inode_unlock(w[i].f->ip);
	for (unsigned i = 0; i < NWRITERS; i++) {
		assert_int_equal(pthread_join(w[i].t, NULL), 0);
		assert_true(w[i].ret == 4096 || w[i].ret == -ENOSPC);
		ok += w[i].ret == 4096;
		nospc += w[i].ret == -ENOSPC;
	}
	fprintf(stderr, "writes: %u done, %u ENOSPC, %llu waits for a release\n", ok, nospc,
		(unsigned long long)atomic_load(&fs->node_resv_waits));
	assert_true(ok > 0);
	assert_int_equal(reserved(fs), 0);	/* nothing leaked */
	assert_int_equal(tfs_checkpoint(fs), 0);
	assert_int_equal(atomic_load(&fs->ckpt_slots_over), 0);
	for (unsigned i = 0; i < NWRITERS; i++)
		close_file(fs, w[i].f);
	assert_int_equal(tfs_unmount(fs), 0);

	fs = tl_mount(&o);
	for (unsigned i = 0; i < NWRITERS; i++) {
		struct tfs_file *f = open_name(fs, i * step, O_RDONLY);

		if (w[i].ret == 4096) {
			tl_pattern(want, sizeof(want), w[i].seed);
			assert_int_equal(tfs_pread(f, got, sizeof(got), 0), 4096);
			assert_memory_equal(got, want, sizeof(got));
		}
		close_file(fs, f);
	}
	assert_int_equal(tfs_unmount(fs), 0);
}

/* Right after a checkpoint, with room for a few writes past the margin
 * and far less than the 128 slots the dirty set's first hash table
 * (8 KiB) would count as notes: two writes go in without a checkpoint. */
static void test_hash_table_not_notes(void **state)
{
	uint64_t free_slots, need, waits;
	struct tfs_file *f[2];
	uint8_t buf[4096];
	struct tfs_opts o;
	struct tfs *fs;
	unsigned n;

	(void)state;
	fs = mount_fresh(&o);
	n = make_room(fs, fill(fs), 24);
	fs_node_gate_stats(fs, &free_slots, &need);
	assert_true(free_slots < need + 100);
	f[0] = open_name(fs, 0, O_RDWR);
	f[1] = open_name(fs, n / 2, O_RDWR);
	assert_int_equal(tfs_checkpoint(fs), 0);
	waits = atomic_load(&fs->node_gate_waits);
	tl_pattern(buf, sizeof(buf), 7);
	assert_int_equal(tfs_pwrite(f[0], buf, sizeof(buf), 0, 0), 4096);
	assert_int_equal(tfs_pwrite(f[1], buf, sizeof(buf), 0, 0), 4096);
	assert_int_equal(atomic_load(&fs->node_gate_waits), waits);
	close_file(fs, f[0]);
	close_file(fs, f[1]);
	assert_int_equal(tfs_unmount(fs), 0);
}

/* ---- namespace changes and xattrs in flight ---- */

#define NNS 64
#define XVAL 65536			/* the most FUSE passes (XATTR_SIZE_MAX) */

struct nschange {
	pthread_t t;
	struct tfs *fs;
	struct tfs_inode *ip;		/* setxattr: its file; NULL: a mkdir */
	unsigned i;
	int ret;
};

static void *ns_main(void *arg)
{
	struct nschange *c = arg;
	static uint8_t val[NNS][XVAL];
	struct stat st;
	char name[32];

	if (c->ip) {
		tl_pattern(val[c->i], XVAL, c->i + 1);
		c->ret = tfs_setxattr(c->fs, inode_ino(c->ip), "user.big", val[c->i], XVAL, 0);
	} else {
		snprintf(name, sizeof(name), "d%u", c->i);
		c->ret = tfs_mkdir(c->fs, ROOT, name, 0755, NULL, &st);
	}
	return NULL;
}

/* Run @fn on each of the @n items of @size bytes at @items (each starting
 * with its pthread_t) while the test holds the dirty set's lock for 1.5 s,
 * then wait for them all. */
static void run_notes_held(struct tfs *fs, void *(*fn)(void *), void *items, size_t size,
			   unsigned n)
{
	pthread_mutex_lock(&fs->v2dirty->mu);
	for (unsigned i = 0; i < n; i++) {
		void *it = (char *)items + i * size;
		pthread_t t;

		assert_int_equal(pthread_create(&t, NULL, fn, it), 0);
		*(pthread_t *)it = t;	/* the thread does not read it */
	}
	usleep(1500 * 1000);
	pthread_mutex_unlock(&fs->v2dirty->mu);
	for (unsigned i = 0; i < n; i++)
		assert_int_equal(pthread_join(*(pthread_t *)((char *)items + i * size), NULL), 0);
}

/* Start the changes with their notes held back (the dirty set's lock,
 * which every note takes after the gate and before the checkpoint can
 * see the change): every change the gate admits stays admitted and not
 * noted until they go. */
static void ns_run(struct tfs *fs, struct nschange *c, unsigned step)
{
	struct tfs_file *f;

	for (unsigned i = 0; i < NNS; i++) {
		c[i] = (struct nschange){ .fs = fs, .i = i };
		if (i % 2 == 0) {
			f = open_name(fs, i * step, O_RDONLY);
			c[i].ip = inode_grab(f->ip);
			close_file(fs, f);
		}
	}
	run_notes_held(fs, ns_main, c, sizeof(*c), NNS);
}

/* Namespace changes and setxattrs with 64 KiB values (17 XCHUNK items,
 * several leaves each) admitted by the gate and held before their commit
 * on a nearly full node area: the checkpoints after them fit (none wrote
 * more than the gate counted), unmount succeeds and every acknowledged
 * change is there after a remount. */
static void test_inflight_ns_fit(void **state)
{
	static struct nschange c[NNS];
	static uint8_t want[XVAL], got[XVAL];
	unsigned step, ok = 0, nospc = 0;
	struct tfs_opts o;
	struct stat st;
	struct tfs *fs;
	char name[32];

	(void)state;
	fs = mount_nearly_full(&o, NNS, &step);
	ns_run(fs, c, step);
	for (unsigned i = 0; i < NNS; i++) {
		assert_true(c[i].ret == 0 || c[i].ret == -ENOSPC);
		ok += c[i].ret == 0;
		nospc += c[i].ret == -ENOSPC;
	}
	fprintf(stderr, "changes: %u done, %u ENOSPC; checkpoint slots %llu estimated, "
		"%llu used, %llu over\n", ok, nospc,
		(unsigned long long)atomic_load(&fs->ckpt_slots_estimated),
		(unsigned long long)atomic_load(&fs->ckpt_slots_used),
		(unsigned long long)atomic_load(&fs->ckpt_slots_over));
	assert_true(ok > 0);
	assert_int_equal(reserved(fs), 0);
	assert_int_equal(tfs_checkpoint(fs), 0);
	assert_int_equal(atomic_load(&fs->ckpt_slots_over), 0);
	for (unsigned i = 0; i < NNS; i++)
		if (c[i].ip)
			inode_put(fs, c[i].ip);
	assert_int_equal(tfs_unmount(fs), 0);

	fs = tl_mount(&o);
	for (unsigned i = 0; i < NNS; i++) {
		snprintf(name, sizeof(name), i % 2 ? "d%u" : "f%u", i % 2 ? i : i * step);
		if (c[i].ret)
			continue;
		assert_int_equal(tfs_lookup(fs, ROOT, name, &st), 0);
		if (i % 2 == 0) {
			tl_pattern(want, XVAL, i + 1);
			assert_int_equal(tfs_getxattr(fs, st.st_ino, "user.big", got, XVAL), XVAL);
			assert_memory_equal(got, want, XVAL);
		}
		tfs_forget(fs, st.st_ino, 1);
	}
	assert_int_equal(tfs_unmount(fs), 0);
}

/* ---- deletes at the last close ---- */

#define NDEL 64

struct closer {
	pthread_t t;
	struct tfs_file *f;
};

static void *closer_main(void *arg)
{
	struct closer *c = arg;

	tfs_release(c->f);	/* the last open of an unlinked file: its delete */
	return NULL;
}

/* Files unlinked while open, one per leaf of a nearly full node area, are
 * deleted at their last close; 96 closes at once, their notes held back
 * (the dirty set's lock): each delete copies its leaf, which the gate
 * must have counted (a reservation from before the delete, its noted
 * death after).  The checkpoint after them succeeds and writes no more
 * than the gate counted, nothing stays reserved, and after a remount the
 * names are gone and the node area was never overdrawn. */
static void test_last_close_deletes_fit(void **state)
{
	static struct closer c[NDEL];
	uint64_t free_slots, need;
	char name[32];
	unsigned n, step;
	struct tfs_opts o;
	struct stat st;
	struct tfs *fs;

	(void)state;
	fs = mount_fresh(&o);
	n = fill(fs);
	step = n * 4 / 5 / NDEL;	/* below the files make_room unlinks */
	assert_true(step >= 50);
	for (unsigned i = 0; i < NDEL; i++) {
		c[i].f = open_name(fs, i * step, O_RDWR);
		tfs_forget(fs, inode_ino(c[i].f->ip), 1);	/* the open holds it */
		snprintf(name, sizeof(name), "f%u", i * step);
		assert_int_equal(tfs_unlink(fs, ROOT, name), 0);
	}
	make_room(fs, n, 16);
	fs_node_gate_stats(fs, &free_slots, &need);
	run_notes_held(fs, closer_main, c, sizeof(*c), NDEL);
	fprintf(stderr, "deletes: %u files a leaf apart (%u), %llu free, %llu needed before; "
		"%llu gate waits; checkpoint slots %llu estimated, %llu used, %llu over\n", NDEL,
		step, (unsigned long long)free_slots, (unsigned long long)need,
		(unsigned long long)atomic_load(&fs->node_gate_waits),
		(unsigned long long)atomic_load(&fs->ckpt_slots_estimated),
		(unsigned long long)atomic_load(&fs->ckpt_slots_used),
		(unsigned long long)atomic_load(&fs->ckpt_slots_over));
	assert_int_equal(reserved(fs), 0);
	assert_int_equal(tfs_checkpoint(fs), 0);
	assert_int_equal(atomic_load(&fs->ckpt_slots_over), 0);
	assert_int_equal(atomic_load(&fs->ckpt_bg_failures), 0);
	assert_int_equal(tfs_unmount(fs), 0);

	fs = tl_mount(&o);
	for (unsigned i = 0; i < NDEL; i++) {
		snprintf(name, sizeof(name), "f%u", i * step);
		assert_int_equal(tfs_lookup(fs, ROOT, name, &st), -ENOENT);
	}
	assert_int_equal(tfs_unmount(fs), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_open_existing_when_full, setup, teardown),
		cmocka_unit_test_setup_teardown(test_inflight_writes_fit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hash_table_not_notes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_inflight_ns_fit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_last_close_deletes_fit, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
