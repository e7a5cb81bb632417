// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: fsck of a format-v2 image (tfs_format with v2, fsck_run): a new image is clean with its root directory and free space (fspace_verify; the node map marks exactly the two nodes mkfs wrote); a node of a tree freed in the node map, a used slot no tree reaches, a free count the superblock disagrees with and a damaged GROUP summary are each found (exit 4), allocations committed through fspace are clean; items added to the inode tree through bstore/btree and a new superblock are checked against their inode: a valid symlink with both target chunks passes, an item of an inode without INODE item, a symlink chunk of the wrong length, an extent in a directory are each found (exit 4); a superblock claiming more blocks than the device has is refused (exit 4, truncated). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "bcache.h"
#include "bstore.h"
#include "btree.h"
#include "format_v2.h"
#include "fsck.h"
#include "fspace.h"
#include "mirror.h"
#include "super.h"
#include "testlib.h"
#include "v2img.h"
#include "v2item.h"

static int setup(void **state)
{
	(void)state;
	return v2img_setup("fsckv2");
}

static int teardown(void **state)
{
	(void)state;
	v2img_teardown();
	return 0;
}

#define run_fsck v2img_fsck
#define expect v2img_expect


/* Write the item into the free-space tree behind fspace's back, publish
 * it, expect fsck to find @want (exit 4), then publish the old roots again
 * (copy-on-write left their nodes intact) and expect a clean fsck. */
static void damage_free_tree(struct img2 *x, const struct bkey *k, const void *v,
			     unsigned len, const char *want)
{
	struct btree *t = fspace_tree(x->fs);
	struct super old = x->sb;
	uint64_t *freed = NULL;
	size_t nfreed = 0;

	assert_int_equal(bt_begin(t, x->sb.tree_gen + 1), 0);
	assert_int_equal(bt_insert(t, k, v, len), 0);
	assert_int_equal(bt_commit(t, &x->sb.roots[V2_TREE_FREE - 1], &freed, &nfreed), 0);
	free(freed);
	x->sb.tree_gen++;
	x->sb.generation++;
	write_supers(x);
	img_close(x);
	expect(FSCK_EXIT_UNCORRECTED, want);
	img_open(x);
	old.generation = x->sb.generation + 1;
	x->sb = old;
	write_supers(x);
	img_close(x);
	expect(FSCK_EXIT_OK, "0 errors");
}

static struct log_inode mkino(uint64_t ino, uint32_t mode, uint32_t tlen)
{
	struct log_inode in = { .ino = ino, .mode = mode, .nlink = 1, .gen = 1,
				.target_len = tlen };

	return in;
}

static void test_fresh(void **state)
{
	struct img2 x;
	char *out, why[256] = "";

	(void)state;
	assert_int_equal(run_fsck(FSCK_CHECK, &out), FSCK_EXIT_OK);
	assert_non_null(strstr(out, "1 inodes (1 directories"));
	assert_non_null(strstr(out, "format v2"));
	free(out);
	/* mkfs went through fspace: its tree verifies, its count is the
	 * superblock's, its node map holds exactly the inode tree's root and
	 * the free-space tree's (the refcount tree is empty). */
	img_open(&x);
	assert_int_equal(fspace_verify(x.fs, why, sizeof(why)), 0);
	assert_true(x.sb.gblocks == FSPACE_GROUP_DEFAULT && x.sb.node_reserve > 0);
	assert_true(fspace_free_blocks(x.fs) == x.sb.free_blocks);
	assert_true(x.sb.free_blocks == x.sb.total_blocks - x.sb.node_start - x.sb.node_blocks);
	assert_true(x.sb.roots[0].ptr.addr && x.sb.roots[2].ptr.addr && !x.sb.roots[1].ptr.addr);
	assert_true(x.sb.roots[0].level == 0 && x.sb.roots[2].level == 0);
	assert_int_equal(fspace_nodes_used(x.fs), 2);
	assert_true(fspace_node_used(x.fs, x.sb.roots[0].ptr.addr));
	assert_true(fspace_node_used(x.fs, x.sb.roots[2].ptr.addr));
	img_close(&x);
}

/* The free space against the trees: what fspace commits is clean; a tree
 * node shown free, a leaked slot, a free count or a group summary that
 * disagrees are each found. */
static void test_free_space(void **state)
{
	struct v2batch b = { 0 };
	struct bstore *ns;
	struct img2 x;
	uint64_t blk, got, leak;

	(void)state;
	/* Data allocated and committed: GROUP and FREE items; leaked until
	 * a file's extent references it, then clean. */
	img_open(&x);
	assert_int_equal(fspace_get(x.fs, 100, 0, FSPACE_DATA, &blk, &got), 0);
	assert_true(got == 100);
	img_commit(&x, NULL, NULL, NULL, 0);
	expect(FSCK_EXIT_UNCORRECTED, "in use in the free-space tree but no extent references them");
	img_open(&x);
	v2b_inode(&b, 2, S_IFREG | 0644, 1, 0);
	v2b_dirent(&b, x.sb.hash_seed, 1, "data", 2, DT_REG);
	v2b_dirindex(&b, 1, V2_COOKIE_FIRST, "data", 2, DT_REG);
	v2b_extent(&b, 2, 0, blk, 100);
	v2b_commit(&x, &b);
	expect(FSCK_EXIT_OK, "0 errors");

	/* A slot taken in the map that no tree reaches: leaked. */
	img_open(&x);
	ns = fspace_node_store(x.fs);
	assert_int_equal(ns->ops->alloc(ns->ctx, &leak), 0);
	img_commit(&x, NULL, NULL, NULL, 0);
	expect(FSCK_EXIT_UNCORRECTED, "is used in the node map but no tree reaches it");
	img_open(&x);
	ns = fspace_node_store(x.fs);
	ns->ops->free(ns->ctx, leak);
	img_commit(&x, NULL, NULL, NULL, 0);
	expect(FSCK_EXIT_OK, "0 errors");

	/* The inode tree's root shown free in the node map. */
	img_open(&x);
	{
		struct bkey k = { 0, FSK_NODEMAP, 0 };
		uint64_t slot = (x.sb.roots[0].ptr.addr - x.sb.node_start) / BNODE_BLOCKS;
		uint8_t map[FSPACE_MAP_BYTES];
		char want[128];
		unsigned len;

		assert_int_equal(bt_lookup(fspace_tree(x.fs), &k, map, sizeof(map), &len), 0);
		assert_true(map[slot / 8] & (1u << (slot % 8)));
		map[slot / 8] &= (uint8_t)~(1u << (slot % 8));
		snprintf(want, sizeof(want), "node %llu belongs to a tree but is free in the node map",
			 (unsigned long long)x.sb.roots[0].ptr.addr);
		damage_free_tree(&x, &k, map, sizeof(map), want);
	}

	/* The superblock's free count off by one. */
	img_open(&x);
	x.sb.free_blocks--;
	x.sb.generation++;
	write_supers(&x);
	img_close(&x);
	expect(FSCK_EXIT_UNCORRECTED, "free space: the tree counts");
	img_open(&x);
	img_commit(&x, NULL, NULL, NULL, 0);	/* writes the right count again */
	expect(FSCK_EXIT_OK, "0 errors");
}

/* A GROUP summary that disagrees with its FREE items: fspace_verify
 * finds it. */
static void test_bad_summary(void **state)
{
	uint8_t v[24] = { 0 };
	struct bkey k = { 0, FSK_GROUP, 0 };
	struct img2 x;
	unsigned len;

	(void)state;
	img_open(&x);
	/* test_free_space's allocation gave group 0 a summary */
	assert_int_equal(bt_lookup(fspace_tree(x.fs), &k, v, sizeof(v), &len), 0);
	v[16]++;		/* nextents + 1 */
	damage_free_tree(&x, &k, v, sizeof(v), "GROUP summary disagrees with its FREE items");
}

static void test_items(void **state)
{
	static uint8_t chunk[V2_SYMLINK_CHUNK];
	uint8_t ival[3][V2_INODE_LEN], ext[64];
	struct log_inode sym = mkino(5, S_IFLNK | 0777, 3000);
	uint64_t csum = 7;
	struct v2_extent e = { 9000, 1, false, &csum };
	struct img2 x;
	unsigned elen;

	(void)state;
	memset(chunk, 'x', sizeof(chunk));
	assert_int_equal(v2_inode_encode(&sym, ival[0]), 0);
	{
		/* A whole symlink: clean. */
		struct v2batch b = { 0 };

		img_open(&x);
		v2b_put(&b, v2_key_inode(5), ival[0], V2_INODE_LEN);
		v2b_put(&b, v2_key_symlink(5, 0), chunk, 2048);
		v2b_put(&b, v2_key_symlink(5, 1), chunk, 3000 - 2048);
		v2b_dirent(&b, x.sb.hash_seed, 1, "link", 5, DT_LNK);
		v2b_dirindex(&b, 1, V2_COOKIE_FIRST + 1, "link", 5, DT_LNK);
		b.top_ino = 5;
		v2b_commit(&x, &b);
		expect(FSCK_EXIT_OK, "3 inodes (1 directories, 1 files, 1 symlinks");
	}
	{
		/* Its second chunk gone: replaced by a symlink of one chunk
		 * whose length disagrees. */
		struct bkey k[1] = { v2_key_symlink(5, 1) };
		const void *v[1] = { chunk };
		unsigned len[1] = { 100 };

		img_open(&x);
		img_commit(&x, k, v, len, 1);
		expect(FSCK_EXIT_UNCORRECTED, "a symlink chunk the target length does not have");
	}
	assert_int_equal(v2_extent_encode(0, &e, ext, sizeof(ext), &elen), 0);
	{
		/* Chunk 1 right again; an extent of inode 6 (no INODE item), an
		 * extent in the root directory. */
		struct bkey k[3] = { v2_key_symlink(5, 1), v2_key_extent(6, 0), v2_key_extent(1, 0) };
		const void *v[3] = { chunk, ext, ext };
		unsigned len[3] = { 3000 - 2048, elen, elen };
		char *out;

		img_open(&x);
		img_commit(&x, k, v, len, 3);
		assert_int_equal(run_fsck(FSCK_CHECK, &out), FSCK_EXIT_UNCORRECTED);
		assert_non_null(strstr(out, "item (6, 8, 0): no INODE item"));
		assert_non_null(strstr(out, "an extent in an inode that is not a regular file"));
		assert_null(strstr(out, "a symlink chunk"));
		assert_null(strstr(out, "symlink target has"));
		free(out);
	}
}

/* A superblock that verifies but claims a device far larger than the
 * image (the fuzzer's fuzz_v2image found one that kept fsck busy for
 * minutes sizing its maps by it): refused as mount refuses it. */
static void test_truncated(void **state)
{
	struct img2 x;
	struct super old;

	(void)state;
	img_open(&x);
	old = x.sb;
	x.sb.total_blocks <<= 12;
	x.sb.free_blocks = x.sb.total_blocks - x.sb.node_start - x.sb.node_blocks;
	x.sb.generation++;
	write_supers(&x);
	img_close(&x);
	expect(FSCK_EXIT_UNCORRECTED, "truncated");
	img_open(&x);
	old.generation = x.sb.generation + 1;
	x.sb = old;	/* the image as the tests before left it */
	write_supers(&x);
	img_close(&x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fresh),
		cmocka_unit_test(test_free_space),
		cmocka_unit_test(test_bad_summary),
		cmocka_unit_test(test_items),
		cmocka_unit_test(test_truncated),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
