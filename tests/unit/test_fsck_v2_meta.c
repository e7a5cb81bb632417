// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: fsck of what a format-v2 image's items mean together (fsck_v2_meta.c): on a small tree (a directory, two files with extents) built through btree + fspace, each damage is found with its exact line and exit code, -y (or -p where the repair is safe) repairs it and a second fsck is clean: a wrong link count, a wrong mapped-block count in an INODE item, a missing DIRINDEX item, an index item without its entry, an entry of the wrong type, an entry naming a missing inode, orphans (to lost+found; link count 0 reclaimed with its blocks), a leaked data run, an extent on free blocks; not repaired but found: blocks claimed by two extents without a REFCOUNT item and a REFCOUNT item whose count is wrong (clean with the right one), a node referenced twice (by two tree roots; twice by one parent); ORPHAN items against the inodes of link count 0 both ways (missing: -y, extra or naming a missing inode: -y) and the superblock's inode count (-p). */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "format_v2.h"
#include "testlib.h"
#include "v2img.h"

/* The extent of file "f" (inode 3): 8 blocks from fspace. */
static uint64_t fphys;

static int setup(void **state)
{
	(void)state;
	return v2img_setup("fsckv2m");
}

static int teardown(void **state)
{
	(void)state;
	v2img_teardown();
	return 0;
}

/* / (1, nlink 3): "d" (2, a directory) cookie 2, "f" (3) cookie 3;
 * /d: "g" (4) cookie 2.  f and g have an extent each. */
static void base(void)
{
	struct v2batch b = { 0 };
	struct img2 x;
	uint64_t got, gphys;

	img_open(&x);
	assert_int_equal(fspace_get(x.fs, 8, 0, FSPACE_DATA, &fphys, &got), 0);
	assert_true(got == 8);
	assert_int_equal(fspace_get(x.fs, 4, 0, FSPACE_DATA, &gphys, &got), 0);
	assert_true(got == 4);
	v2b_inode(&b, 1, S_IFDIR | 0755, 3, 1);
	v2b_inode(&b, 2, S_IFDIR | 0755, 2, 1);
	v2b_inode(&b, 3, S_IFREG | 0644, 1, 0);
	v2b_inode(&b, 4, S_IFREG | 0644, 1, 0);
	v2b_dirent(&b, x.sb.hash_seed, 1, "d", 2, DT_DIR);
	v2b_dirindex(&b, 1, 2, "d", 2, DT_DIR);
	v2b_dirent(&b, x.sb.hash_seed, 1, "f", 3, DT_REG);
	v2b_dirindex(&b, 1, 3, "f", 3, DT_REG);
	v2b_dirent(&b, x.sb.hash_seed, 2, "g", 4, DT_REG);
	v2b_dirindex(&b, 2, 2, "g", 4, DT_REG);
	v2b_extent(&b, 3, 0, fphys, 8);
	v2b_extent(&b, 4, 0, gphys, 4);
	v2b_commit(&x, &b);
	v2img_expect(FSCK_EXIT_OK, "4 inodes (2 directories, 2 files, 0 symlinks");
	v2img_expect(FSCK_EXIT_OK, "12 data blocks (0 shared)");
}

static void commit(struct v2batch *b)
{
	struct img2 x;

	img_open(&x);
	v2b_commit(&x, b);
}

/* -y (or -p) repairs: exit 1; then -n is clean. */
static void repaired(int mode, const char *want)
{
	v2img_expect_mode(mode, FSCK_EXIT_FIXED, want);
	v2img_expect(FSCK_EXIT_OK, "0 errors found");
}

static void test_clean(void **state)
{
	(void)state;
	base();
	v2img_expect_mode(FSCK_REPAIR, FSCK_EXIT_OK, "0 errors found");
}

static void test_nlink(void **state)
{
	struct v2batch b = { 0 };

	(void)state;
	base();
	v2b_inode(&b, 3, S_IFREG | 0644, 3, 0);
	v2b_inode(&b, 1, S_IFDIR | 0755, 2, 1);	/* not counting "d" */
	commit(&b);
	v2img_expect(FSCK_EXIT_UNCORRECTED, "file inode 3: link count 3, should be 1: not fixed (-n)");
	v2img_expect(FSCK_EXIT_UNCORRECTED, "directory inode 1: link count 2, should be 3");
	repaired(FSCK_PREEN, "file inode 3: link count 3, should be 1: fixing");
}

/* The INODE item's mapped count disagrees with the EXTENT items. */
static void test_mapped(void **state)
{
	struct v2batch b = { 0 };
	struct log_inode in = { .ino = 3, .mode = S_IFREG | 0644, .nlink = 1, .gen = 1,
				.mapped = 5 };
	uint8_t v[V2_INODE_LEN];

	(void)state;
	base();
	assert_int_equal(v2_inode_encode(&in, v), 0);
	v2b_put(&b, v2_key_inode(3), v, sizeof(v));
	commit(&b);
	v2img_expect(FSCK_EXIT_UNCORRECTED, "file inode 3: its INODE item counts 5 mapped "
		     "blocks, its EXTENT items map 8: not fixed (-n)");
	repaired(FSCK_PREEN, "its EXTENT items map 8: fixing");
}

static void test_index(void **state)
{
	struct v2batch b = { 0 };

	(void)state;
	base();
	/* f's index item gone */
	v2b_del(&b, v2_key_dirindex(1, 3));
	commit(&b);
	v2img_expect(FSCK_EXIT_UNCORRECTED,
		     "directory 1: entry \"f\" (inode 3) has no index item: adding one");
	repaired(FSCK_PREEN, "has no index item: adding one: fixing");

	/* An index item no entry has: only -y removes it. */
	v2b_dirindex(&b, 2, 7, "zz", 4, DT_REG);
	commit(&b);
	v2img_expect(FSCK_EXIT_UNCORRECTED,
		     "directory 2: index item 7 (inode 4, type 8) names no entry: removing it");
	v2img_expect_mode(FSCK_PREEN, FSCK_EXIT_UNCORRECTED, "UNEXPECTED INCONSISTENCY");
	repaired(FSCK_REPAIR, "names no entry: removing it: fixing");
}

static void test_dtype(void **state)
{
	struct v2batch b = { 0 };
	struct img2 x;

	(void)state;
	base();
	img_open(&x);
	v2b_dirent(&b, x.sb.hash_seed, 1, "f", 3, DT_LNK);
	v2b_dirindex(&b, 1, 3, "f", 3, DT_LNK);
	v2b_commit(&x, &b);
	v2img_expect(FSCK_EXIT_UNCORRECTED,
		     "directory 1: entry \"f\" (inode 3) has type 10, the inode is of type 8");
	repaired(FSCK_PREEN, "the inode is of type 8: fixing");
}

static void test_dangling(void **state)
{
	struct v2batch b = { 0 };
	struct img2 x;

	(void)state;
	base();
	img_open(&x);
	v2b_dirent(&b, x.sb.hash_seed, 2, "ghost", 99, DT_REG);
	v2b_dirindex(&b, 2, 3, "ghost", 99, DT_REG);
	v2b_commit(&x, &b);
	v2img_expect(FSCK_EXIT_UNCORRECTED,
		     "directory 2: entry \"ghost\" (inode 99) names a missing inode: removing it");
	v2img_expect_mode(FSCK_PREEN, FSCK_EXIT_UNCORRECTED, "needs fsck -y");
	repaired(FSCK_REPAIR, "names a missing inode: removing it: fixing");
	v2img_expect(FSCK_EXIT_OK, "4 inodes (2 directories, 2 files");
}

static void test_orphans(void **state)
{
	struct v2batch b = { 0 };
	struct img2 x;
	uint64_t p7, got, before;
	char *out;

	(void)state;
	base();
	img_open(&x);
	before = fspace_free_blocks(x.fs);
	assert_int_equal(fspace_get(x.fs, 16, 0, FSPACE_DATA, &p7, &got), 0);
	v2b_inode(&b, 6, S_IFREG | 0644, 1, 0);	/* no name */
	v2b_inode(&b, 7, S_IFREG | 0644, 0, 0);	/* unlinked while open */
	v2b_extent(&b, 7, 0, p7, 16);
	v2b_inode(&b, 8, S_IFDIR | 0755, 2, 1);	/* a directory without a name */
	v2b_inode(&b, 9, S_IFREG | 0644, 1, 0);	/* named in it */
	v2b_dirent(&b, x.sb.hash_seed, 8, "k", 9, DT_REG);
	v2b_dirindex(&b, 8, 2, "k", 9, DT_REG);
	v2b_commit(&x, &b);
	assert_int_equal(v2img_fsck(FSCK_CHECK, &out), FSCK_EXIT_UNCORRECTED);
	assert_non_null(strstr(out, "unreachable file inode 6 (link count 1): moving it to "
				    "/lost+found/#6: not fixed (-n)"));
	assert_non_null(strstr(out, "unreachable directory inode 8 (link count 2)"));
	assert_non_null(strstr(out, "note: orphan file inode 7 (no name, link count 0"));
	assert_null(strstr(out, "no extent references"));	/* 7's blocks are its */
	assert_null(strstr(out, "cut off"));	/* 9 comes with 8 */
	free(out);
	v2img_expect_mode(FSCK_PREEN, FSCK_EXIT_UNCORRECTED, "UNEXPECTED INCONSISTENCY");
	assert_int_equal(v2img_fsck(FSCK_REPAIR, &out), FSCK_EXIT_FIXED);
	assert_non_null(strstr(out, "creating /lost+found (inode 10)"));
	assert_non_null(strstr(out, "orphan file inode 7 (no name, link count 0): reclaiming it: "
				    "fixing"));
	free(out);
	/* lost+found holds #6 and #8 (with k); 7 and its 16 blocks are gone. */
	v2img_expect(FSCK_EXIT_OK, "8 inodes (4 directories, 4 files");
	img_open(&x);
	assert_true(fspace_free_blocks(x.fs) == before);
	assert_true(x.sb.next_ino == 11);
	img_close(&x);
	v2img_expect(FSCK_EXIT_OK, "0 errors found");
}

/* ORPHAN items name exactly the inodes of link count 0, both ways, and
 * the superblock counts the INODE items. */
static void test_orphan_items(void **state)
{
	struct v2batch b = { 0 };
	struct img2 x;

	(void)state;
	base();
	v2b_inode(&b, 7, S_IFREG | 0644, 0, 0);	/* with its ORPHAN item */
	commit(&b);
	v2img_expect(FSCK_EXIT_OK, "note: orphan file inode 7");
	v2b_del(&b, v2_key_orphan(7));
	commit(&b);
	v2img_expect(FSCK_EXIT_UNCORRECTED, "file inode 7: link count 0 and no ORPHAN item (a "
		     "mount would not reclaim it): not fixed (-n)");
	v2img_expect_mode(FSCK_PREEN, FSCK_EXIT_UNCORRECTED, "UNEXPECTED INCONSISTENCY");
	repaired(FSCK_REPAIR, "orphan file inode 7 (no name, link count 0): reclaiming it");

	v2b_put(&b, v2_key_orphan(3), "", 0);	/* "f": link count 1 */
	v2b_put(&b, v2_key_orphan(99), "", 0);	/* no such inode */
	commit(&b);
	v2img_expect(FSCK_EXIT_UNCORRECTED, "file inode 3: link count 1 and an ORPHAN item: "
		     "removing the item: not fixed (-n)");
	v2img_expect(FSCK_EXIT_UNCORRECTED, "ORPHAN item names a missing inode 99: removing it");
	v2img_expect_mode(FSCK_PREEN, FSCK_EXIT_UNCORRECTED, "UNEXPECTED INCONSISTENCY");
	repaired(FSCK_REPAIR, "ORPHAN item names a missing inode 99: removing it: fixing");

	img_open(&x);
	assert_true(x.sb.inodes == 4);
	x.sb.inodes = 9;
	x.sb.generation++;
	write_supers(&x);
	img_close(&x);
	v2img_expect(FSCK_EXIT_UNCORRECTED, "the superblock counts 9 inodes, the inode tree has "
		     "4: correcting it: not fixed (-n)");
	repaired(FSCK_PREEN, "the superblock counts 9 inodes, the inode tree has 4: correcting "
		 "it: fixing");
	img_open(&x);
	assert_true(x.sb.inodes == 4);
	img_close(&x);
}

static void test_leak(void **state)
{
	struct v2batch b = { 0 };
	struct img2 x;
	uint64_t p, got;
	char want[160];

	(void)state;
	base();
	img_open(&x);
	assert_int_equal(fspace_get(x.fs, 5, 0, FSPACE_DATA, &p, &got), 0);
	v2b_commit(&x, &b);
	snprintf(want, sizeof(want), "blocks [%llu, %llu) are in use in the free-space tree but "
		 "no extent references them: freeing them: not fixed (-n)",
		 (unsigned long long)p, (unsigned long long)p + 5);
	v2img_expect(FSCK_EXIT_UNCORRECTED, want);
	repaired(FSCK_PREEN, "no extent references them: freeing them: fixing");
	img_open(&x);
	assert_int_equal(fspace_is_free(x.fs, p), 1);
	img_close(&x);
}

static void test_free_referenced(void **state)
{
	struct v2batch b = { 0 };
	struct img2 x;
	uint64_t p;
	char want[160];

	(void)state;
	base();
	img_open(&x);
	p = x.sb.total_blocks - 20;	/* far from anything allocated */
	assert_int_equal(fspace_is_free(x.fs, p), 1);
	v2b_extent(&b, 3, 100, p, 3);
	v2b_commit(&x, &b);
	snprintf(want, sizeof(want), "blocks [%llu, %llu) are referenced by an extent but free in "
		 "the free-space tree", (unsigned long long)p, (unsigned long long)p + 3);
	v2img_expect(FSCK_EXIT_UNCORRECTED, want);
	repaired(FSCK_PREEN, "but free in the free-space tree: marking them used: fixing");
	img_open(&x);
	assert_int_equal(fspace_is_free(x.fs, p), 0);
	img_close(&x);
}

static void test_shared(void **state)
{
	struct v2batch b = { 0 };
	uint8_t rv[V2_REFCOUNT_LEN];
	char want[160];

	(void)state;
	base();
	/* "h" (5) in / shares f's first 4 blocks: no REFCOUNT item */
	{
		struct img2 x;

		img_open(&x);
		v2b_inode(&b, 5, S_IFREG | 0644, 1, 0);
		v2b_dirent(&b, x.sb.hash_seed, 1, "h", 5, DT_REG);
		v2b_dirindex(&b, 1, 4, "h", 5, DT_REG);
		v2b_extent(&b, 5, 0, fphys, 4);
		v2b_commit(&x, &b);
	}
	snprintf(want, sizeof(want), "blocks [%llu, %llu) are claimed by 2 extents and not shared "
		 "in the refcount tree", (unsigned long long)fphys, (unsigned long long)fphys + 4);
	v2img_expect(FSCK_EXIT_UNCORRECTED, want);
	v2img_expect_mode(FSCK_REPAIR, FSCK_EXIT_UNCORRECTED, want);	/* not repaired */

	/* The right REFCOUNT item: clean, and counted as shared. */
	assert_int_equal(v2_refcount_encode(fphys, 4, 2, rv), 0);
	v2b_put(&b, v2_key_refcount(fphys), rv, sizeof(rv));
	{
		struct img2 x;

		img_open(&x);
		v2b_commit_tree(&x, V2_TREE_REFCOUNT, &b);
	}
	v2img_expect(FSCK_EXIT_OK, "12 data blocks (4 shared)");

	/* A count that disagrees, and a shared run too long. */
	assert_int_equal(v2_refcount_encode(fphys, 6, 3, rv), 0);
	v2b_put(&b, v2_key_refcount(fphys), rv, sizeof(rv));
	{
		struct img2 x;

		img_open(&x);
		v2b_commit_tree(&x, V2_TREE_REFCOUNT, &b);
	}
	snprintf(want, sizeof(want), "blocks [%llu, %llu) are referenced by 2 extent(s), the "
		 "refcount tree says 3", (unsigned long long)fphys, (unsigned long long)fphys + 4);
	v2img_expect(FSCK_EXIT_UNCORRECTED, want);
	snprintf(want, sizeof(want), "blocks [%llu, %llu) are referenced by 1 extent(s), the "
		 "refcount tree says 3", (unsigned long long)fphys + 4,
		 (unsigned long long)fphys + 6);
	v2img_expect(FSCK_EXIT_UNCORRECTED, want);
}

static void test_node_twice(void **state)
{
	struct super old;
	struct img2 x;
	char want[96];

	(void)state;
	base();
	img_open(&x);
	old = x.sb;
	x.sb.roots[V2_TREE_REFCOUNT - 1] = x.sb.roots[V2_TREE_INODES - 1];
	x.sb.generation++;
	write_supers(&x);
	img_close(&x);
	snprintf(want, sizeof(want), "node %llu is referenced twice (again by a tree root)",
		 (unsigned long long)old.roots[V2_TREE_INODES - 1].ptr.addr);
	v2img_expect(FSCK_EXIT_UNCORRECTED, want);
	v2img_expect_mode(FSCK_REPAIR, FSCK_EXIT_UNCORRECTED, want);
	img_open(&x);
	old.generation = x.sb.generation + 1;
	x.sb = old;
	write_supers(&x);
	img_close(&x);
	v2img_expect(FSCK_EXIT_OK, "0 errors found");
}

/* Inside one tree: the root names its first child twice (in place of its
 * second), sealed again so only the double pointer is wrong. */
static void test_node_twice_parent(void **state)
{
	struct v2batch b = { 0 };
	struct bptr p0;
	struct img2 x;
	void *orig = NULL, *bad = NULL;
	uint64_t csum;
	char want[96];

	(void)state;
	base();
	for (uint64_t base_ino = 100; base_ino < 900; base_ino += 100) {
		/* 256 INODE items of 116 bytes: more than one 16 KiB leaf
		 * (each with its ORPHAN item: two items an inode) */
		img_open(&x);
		for (uint64_t ino = base_ino; ino < base_ino + V2B_MAX / 2; ino++)
			v2b_inode(&b, ino, S_IFREG | 0644, 0, 0);
		v2b_commit(&x, &b);
	}
	img_open(&x);
	assert_true(x.sb.roots[0].level >= 1);
	assert_int_equal(posix_memalign(&orig, 4096, BNODE_SIZE), 0);
	assert_int_equal(posix_memalign(&bad, 4096, BNODE_SIZE), 0);
	assert_int_equal(x.s.store.ops->read(x.s.store.ctx, &x.sb.roots[0].ptr, orig, NULL), 0);
	assert_true(bnode_nritems(orig) >= 2);
	memcpy(bad, orig, BNODE_SIZE);
	bnode_ptr(bad, 0, &p0);
	bnode_set_ptr(bad, 1, &p0);
	csum = bnode_seal_fmt(bad, x.s.store.short_nodes);
	assert_int_equal(x.s.store.ops->write(x.s.store.ctx, x.sb.roots[0].ptr.addr, bad), 0);
	x.sb.roots[0].ptr.csum = csum;
	x.sb.generation++;
	write_supers(&x);
	img_close(&x);
	snprintf(want, sizeof(want), "node %llu is referenced twice (again by node %llu)",
		 (unsigned long long)p0.addr, (unsigned long long)bnode_addr(bad));
	v2img_expect(FSCK_EXIT_UNCORRECTED, want);
	/* The root as it was: clean but for the orphans noted. */
	img_open(&x);
	assert_int_equal(x.s.store.ops->write(x.s.store.ctx, x.sb.roots[0].ptr.addr, orig), 0);
	x.sb.roots[0].ptr.csum = bnode_stored_csum(orig);
	x.sb.generation++;
	write_supers(&x);
	img_close(&x);
	v2img_expect(FSCK_EXIT_OK, "0 errors found");
	free(orig);
	free(bad);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_clean, setup, teardown),
		cmocka_unit_test_setup_teardown(test_nlink, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mapped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_index, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dtype, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dangling, setup, teardown),
		cmocka_unit_test_setup_teardown(test_orphans, setup, teardown),
		cmocka_unit_test_setup_teardown(test_orphan_items, setup, teardown),
		cmocka_unit_test_setup_teardown(test_leak, setup, teardown),
		cmocka_unit_test_setup_teardown(test_free_referenced, setup, teardown),
		cmocka_unit_test_setup_teardown(test_shared, setup, teardown),
		cmocka_unit_test_setup_teardown(test_node_twice, setup, teardown),
		cmocka_unit_test_setup_teardown(test_node_twice_parent, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
