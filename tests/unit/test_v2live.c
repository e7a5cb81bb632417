// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: format v2 mounted live (lazy inode cache): what a caller holds keeps an inode in memory while it uses it.  namei_create hands back its inode with a handle: a checkpoint and a trim of the cache to 0 inodes right after it leave the inode resident (with only the kernel lookup, as before, the cache dropped it and create and mknod used freed memory); tfs_create of an existing name whose inode the cache dropped opens and stats the right file, and its count of kernel lookups comes back from the stub; 200,000 such creates against a thread trimming the cache without pause always open the inode the table holds (with fs_iget's uncounted pointer the process died of a double free within seconds); the table's hash spreads a run of consecutive inode numbers over its slots; a checkpoint committed part way (TWINFS_V2_PART_NODES=1) counts its part commits' nodes in checkpoint.written_bytes (they were left out: the count began after them, so bench/scale.sh's checkpoint bytes at 4 TiB came out about a tenth of the nodes written); a plain readdir after a remount gives each child's type from the tree without reading one child in, and names made since get theirs from their inodes. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "bnode.h"
#include "btree.h"
#include "ckpt_v2.h"
#include "fs_i.h"
#include "fspace.h"
#include "inode_i.h"
#include "testlib.h"

#define IMG_SIZE (64ull << 20)
#define NIMG 2
#define ROOT TFS_ROOT_INO

static char img[NIMG][TL_PATH_MAX];
static const char *devs[NIMG];

static int setup(void **state)
{
	(void)state;
	tl_mk_images(img, devs, NIMG, "tfs_v2live", IMG_SIZE);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	tl_rm_images(img, NIMG);
	return 0;
}

/* A new v2 file system, mounted with the smallest cache; the inode cache's
 * budget then set to 0 so every trim drops all it may. */
static struct tfs *fresh_v2(void)
{
	struct tfs_format_opts fo = { .force = true, .backend = "file", .v2 = true,
				      .pieces = tl_pieces() };
	struct tfs_opts o;
	struct tfs *fs;
	char err[256] = "";

	if (tfs_format(devs, NIMG, &fo, err, sizeof(err)))
		fprintf(stderr, "format: %s\n", err);
	assert_string_equal(err, "");
	tl_mount_opts(&o, devs, NIMG);
	o.backend = "file";
	o.cache_bytes = TFS_CACHE_MIN;
	fs = tl_mount(&o);
	assert_true(fs->itab->lazy);
	fs->itab->max = 0;
	return fs;
}

static int fill_hello(void *ctx, void *dst, size_t len)
{
	(void)ctx;
	memcpy(dst, "hello", len);
	return 0;
}

static bool resident(struct tfs *fs, uint64_t ino)
{
	struct tfs_inode *ip;

	if (inode_get_resident(fs, ino, &ip))
		return false;
	inode_put(fs, ip);
	return true;
}

/* The inode namei_create returns stays in memory until its caller lets
 * go: a checkpoint (the inode is clean then) and a trim cannot drop it. */
static void test_create_holds(void **state)
{
	struct tfs_inode *ip;
	struct stat st;
	struct tfs *fs;
	uint64_t ino;

	(void)state;
	fs = fresh_v2();
	assert_int_equal(namei_create(fs, ROOT, "a", S_IFREG | 0644, 0, NULL, NULL, &ip), 0);
	ino = inode_ino(ip);
	assert_int_equal(tfs_checkpoint(fs), 0);	/* trims the cache after it */
	icache_trim(fs);
	assert_true(resident(fs, ino));
	assert_int_equal(inode_nlink(ip), 1);
	inode_put(fs, ip);
	/* Let go of: clean, only the kernel's lookup: it goes, as a stub. */
	icache_trim(fs);
	assert_false(resident(fs, ino));
	assert_int_equal(tfs_getattr(fs, ino, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	tfs_forget(fs, ino, 1);
	tfs_unmount(fs);
}

/* tfs_create of a name whose inode the cache dropped: the file opened is
 * that inode, and the lookups the kernel holds come back with it. */
static void test_create_existing_dropped(void **state)
{
	struct tfs_file *f = NULL;
	struct tfs_inode *ip;
	struct stat st, st2;
	struct tfs *fs;

	(void)state;
	fs = fresh_v2();
	assert_int_equal(tfs_create(fs, ROOT, "b", 0644, O_RDWR, NULL, &st, &f), 0);
	assert_int_equal(tfs_write(f, 0, 5, fill_hello, NULL, 0), 5);
	tfs_release(f);
	assert_int_equal(tfs_checkpoint(fs), 0);
	icache_trim(fs);
	assert_false(resident(fs, st.st_ino));
	assert_int_equal(tfs_create(fs, ROOT, "b", 0600, O_RDWR, NULL, &st2, &f), 0);
	assert_int_equal(st2.st_ino, st.st_ino);
	assert_int_equal(st2.st_size, 5);
	assert_true(resident(fs, st.st_ino));	/* open */
	tfs_release(f);
	assert_int_equal(inode_get(fs, st.st_ino, &ip), 0);
	assert_int_equal(atomic_load(&ip->nlookup), 2);	/* create's and this one's */
	inode_put(fs, ip);
	tfs_forget(fs, st.st_ino, 2);
	tfs_unmount(fs);
}

struct trimmer {
	struct tfs *fs;
	atomic_bool stop;
	atomic_ulong turns;
};

static void *trim_loop(void *arg)
{
	struct trimmer *t = arg;

	while (!atomic_load(&t->stop)) {
		icache_trim(t->fs);
		atomic_fetch_add(&t->turns, 1);
	}
	return NULL;
}

/* tfs_create of an existing name against a thread that drops every inode
 * it may, all the time (the clock after a checkpoint, over and over): the
 * inode opened is always the one in the table, open.  With the pointer of
 * fs_iget, which counts nothing, the trim dropped the inode between the
 * lookup and the open: the file held freed memory and the table had no
 * such open inode (or the daemon crashed). */
static void test_create_existing_race(void **state)
{
	struct trimmer t = { 0 };
	struct tfs_file *f = NULL;
	unsigned long bad = 0, runs = 0;
	struct stat st;
	pthread_t th;
	time_t end;

	(void)state;
	t.fs = fresh_v2();
	assert_int_equal(tfs_create(t.fs, ROOT, "c", 0644, O_RDWR, NULL, &st, &f), 0);
	tfs_release(f);
	assert_int_equal(tfs_checkpoint(t.fs), 0);
	assert_int_equal(pthread_create(&th, NULL, trim_loop, &t), 0);
	end = time(NULL) + 4;
	while (runs < 200000 && (runs < 2000 || time(NULL) < end)) {
		struct tfs_inode *ip;

		assert_int_equal(tfs_create(t.fs, ROOT, "c", 0644, O_RDWR, NULL, &st, &f), 0);
		if (inode_get_resident(t.fs, st.st_ino, &ip)) {
			bad++;
		} else {
			bad += atomic_load(&ip->nopen) != 1;
			inode_put(t.fs, ip);
		}
		tfs_release(f);
		tfs_forget(t.fs, st.st_ino, 1);
		runs++;
	}
	atomic_store(&t.stop, true);
	pthread_join(th, NULL);
	printf("%lu creates of an existing name, %lu trims, %lu not the open inode\n", runs,
	       atomic_load(&t.turns), bad);
	assert_int_equal(bad, 0);
	tfs_unmount(t.fs);
}

/* The inode table's and the stubs' slots (ino_slot): a run of consecutive
 * numbers (a cold find's resident set) spreads over the table.  The bits
 * above 32 of the product put 65,536 of them in 15,064 of 131,072 slots,
 * chains of 4 and more. */
static void test_slot_spread(void **state)
{
	(void)state;
	for (unsigned bits = 6; bits <= 20; bits += 7) {
		size_t size = (size_t)1 << bits, run = size / 2;
		uint8_t *seen = calloc(size, 1);

		assert_non_null(seen);
		for (uint64_t first = 1; first < 4000000; first += 1234567) {
			size_t distinct = 0;

			memset(seen, 0, size);
			for (uint64_t ino = first; ino < first + run; ino++) {
				size_t s = ino_slot(ino, size);

				assert_true(s < size);
				distinct += !seen[s];
				seen[s] = 1;
			}
			assert_true(distinct * 10 >= run * 9);
		}
		free(seen);
	}
}

/* A checkpoint committed part way: every part writes at least one node
 * (its tree's root) and the last commit at least one more, all counted in
 * ckpt_written_blocks (checkpoint.written_bytes).  The count taken from
 * the last commit alone gave 3 nodes for 32 parts here. */
/* The three trees' node work since mount (btree.h). */
static struct bt_stats tree_stats(struct tfs *fs)
{
	struct bt_stats st = { 0 };

	bt_stats_add(ckpt_v2_inodes(fs), &st);
	bt_stats_add(ckpt_v2_refs(fs), &st);
	bt_stats_add(fspace_tree(fs->v2fsp), &st);
	return st;
}

static void test_ckpt_parts_counted(void **state)
{
	uint64_t w0, p0, nodes, parts;
	struct bt_stats s0, s1;
	struct tfs_inode *ip;
	struct tfs *fs;
	char name[32];

	(void)state;
	assert_int_equal(setenv("TWINFS_V2_PART_NODES", "1", 1), 0);
	fs = fresh_v2();
	unsetenv("TWINFS_V2_PART_NODES");
	for (int i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "f%04d", i);
		assert_int_equal(namei_create(fs, ROOT, name, S_IFREG | 0644, 0, NULL, NULL, &ip), 0);
		tfs_forget(fs, inode_ino(ip), 1);
		inode_put(fs, ip);
	}
	w0 = atomic_load(&fs->ckpt_written_blocks);
	p0 = atomic_load(&fs->ckpt_parts);
	s0 = tree_stats(fs);
	assert_int_equal(tfs_checkpoint(fs), 0);
	s1 = tree_stats(fs);
	parts = atomic_load(&fs->ckpt_parts) - p0;
	nodes = s1.written - s0.written;
	/* checkpoint.written_bytes: the blocks those nodes took (short
	 * nodes: fewer than 4 each), no more, no less. */
	assert_int_equal(atomic_load(&fs->ckpt_written_blocks) - w0,
			 s1.written_blocks - s0.written_blocks);
	assert_true(nodes <= s1.written_blocks - s0.written_blocks);
	assert_true(s1.written_blocks - s0.written_blocks <= nodes * BNODE_BLOCKS);
	assert_true(parts >= 10);
	if (nodes < parts + 1)
		fprintf(stderr, "%llu parts, %llu nodes counted\n", (unsigned long long)parts,
			(unsigned long long)nodes);
	assert_true(nodes >= parts + 1);
	tfs_unmount(fs);
}

struct listing {
	int n;
	char name[8][16];
	mode_t type[8];
	uint64_t ino[8];
};

static int list_fill(void *ctx, const char *name, const struct stat *st, uint64_t next_off)
{
	struct listing *l = ctx;

	(void)next_off;
	if (name[0] == '.' || l->n == 8)
		return 0;
	snprintf(l->name[l->n], sizeof(l->name[0]), "%s", name);
	l->type[l->n] = st->st_mode & S_IFMT;
	l->ino[l->n++] = st->st_ino;
	return 0;
}

static mode_t type_of(const struct listing *l, const char *name)
{
	for (int i = 0; i < l->n; i++)
		if (!strcmp(l->name[i], name))
			return l->type[i];
	return 0;
}

/* A plain readdir (no plus) hands out the type the tree's DIRINDEX items
 * recorded: a directory read in after a remount lists its names without
 * reading one child in (a cold find of a million names read a million
 * inodes for their type alone).  Names made since the remount have no
 * recorded type: their inodes are read, and the types are right too. */
static void test_readdir_types(void **state)
{
	struct tfs_opts o;
	struct stat st;
	struct listing l = { .n = 0 };
	struct icache_stats a, b;
	struct tfs_inode *dp;
	struct tfs *fs;
	uint64_t d;

	(void)state;
	fs = fresh_v2();
	assert_int_equal(tfs_mkdir(fs, ROOT, "d", 0755, NULL, &st), 0);
	d = st.st_ino;
	assert_int_equal(tfs_mknod(fs, d, "reg", S_IFREG | 0644, 0, NULL, &st), 0);
	assert_int_equal(tfs_mkdir(fs, d, "sub", 0755, NULL, &st), 0);
	assert_int_equal(tfs_symlink(fs, d, "lnk", "reg", NULL, &st), 0);
	assert_int_equal(tfs_mknod(fs, d, "fifo", S_IFIFO | 0644, 0, NULL, &st), 0);
	assert_int_equal(tfs_unmount(fs), 0);
	tl_mount_opts(&o, devs, NIMG);
	o.backend = "file";
	o.cache_bytes = TFS_CACHE_MIN;
	fs = tl_mount(&o);
	assert_true(fs->itab->lazy);

	icache_stats(fs, &a);
	assert_int_equal(tfs_readdir(fs, d, 0, false, list_fill, &l), 0);
	icache_stats(fs, &b);
	assert_int_equal(l.n, 4);
	assert_int_equal(type_of(&l, "reg"), S_IFREG);
	assert_int_equal(type_of(&l, "sub"), S_IFDIR);
	assert_int_equal(type_of(&l, "lnk"), S_IFLNK);
	assert_int_equal(type_of(&l, "fifo"), S_IFIFO);
	for (int i = 0; i < l.n; i++)
		assert_false(resident(fs, l.ino[i]));
	assert_int_equal(b.faults - a.faults, 1);	/* the directory itself */

	/* New names, and one replaced by a rename: their inodes are read. */
	assert_int_equal(tfs_mkdir(fs, d, "sub2", 0755, NULL, &st), 0);
	tfs_forget(fs, st.st_ino, 1);
	assert_int_equal(tfs_symlink(fs, d, "lnk2", "x", NULL, &st), 0);
	tfs_forget(fs, st.st_ino, 1);
	assert_int_equal(tfs_rename(fs, d, "lnk2", d, "reg", 0), 0);
	l.n = 0;
	assert_int_equal(tfs_readdir(fs, d, 0, false, list_fill, &l), 0);
	assert_int_equal(l.n, 5);
	assert_int_equal(type_of(&l, "reg"), S_IFLNK);
	assert_int_equal(type_of(&l, "sub2"), S_IFDIR);
	assert_int_equal(type_of(&l, "sub"), S_IFDIR);

	/* The checkpoint that writes the new names gives memory their types
	 * too: once their inodes left the cache, a listing of the directory,
	 * held in memory all along, reads none. */
	assert_int_equal(inode_get(fs, d, &dp), 0);
	assert_int_equal(tfs_checkpoint(fs), 0);
	fs->itab->max = 0;
	icache_trim(fs);
	for (int i = 0; i < l.n; i++)
		assert_false(resident(fs, l.ino[i]));
	icache_stats(fs, &a);
	l.n = 0;
	assert_int_equal(tfs_readdir(fs, d, 0, false, list_fill, &l), 0);
	icache_stats(fs, &b);
	inode_put(fs, dp);
	assert_int_equal(l.n, 5);
	assert_int_equal(b.faults, a.faults);
	assert_int_equal(type_of(&l, "reg"), S_IFLNK);
	assert_int_equal(type_of(&l, "sub2"), S_IFDIR);
	assert_int_equal(tfs_unmount(fs), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_slot_spread),
		/* Images of their own: a failed case leaves its mount behind. */
		cmocka_unit_test_setup_teardown(test_create_holds, setup, teardown),
		cmocka_unit_test_setup_teardown(test_create_existing_dropped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_create_existing_race, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ckpt_parts_counted, setup, teardown),
		cmocka_unit_test_setup_teardown(test_readdir_types, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
