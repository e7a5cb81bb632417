// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: fsck of a format-v2 image (tfs_format with v2, fsck_run): a new image is clean with its root directory and free space (fspace_verify; the node map marks exactly the two nodes mkfs wrote); a node of a tree freed in the node map, a used slot no tree reaches, a free count the superblock disagrees with and a damaged GROUP summary are each found (exit 4), allocations committed through fspace are clean; items added to the inode tree through bstore/btree and a new superblock are checked against their inode: a valid symlink with both target chunks passes, an item of an inode without INODE item, a symlink chunk of the wrong length, an extent in a directory are each found (exit 4). */
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

#include "bcache.h"
#include "bstore.h"
#include "btree.h"
#include "format_v2.h"
#include "fsck.h"
#include "fspace.h"
#include "mirror.h"
#include "super.h"
#include "testlib.h"
#include "v2item.h"

#define NIMG 2

static char img[NIMG][TL_PATH_MAX];
static const char *devs[NIMG];

static int run_fsck(int mode, char **out)
{
	struct fsck_opts o = {
		.devs = devs, .ndevs = NIMG, .mode = mode, .backend = "file",
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
	*out = buf;
	return rc;
}

static int setup(void **state)
{
	struct tfs_format_opts fo = { .force = true, .backend = "file", .v2 = true };
	char err[512] = "";

	(void)state;
	tl_mk_images(img, devs, NIMG, "fsckv2", 64ull << 20);
	if (tfs_format(devs, NIMG, &fo, err, sizeof(err))) {
		fprintf(stderr, "format: %s\n", err);
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	tl_rm_images(img, NIMG);
	return 0;
}

/* The store on both images and the free space (fspace) of the current
 * roots: trees change through fspace_node_store, as mount will do it. */
struct img2 {
	struct dev_backend *be;
	struct dev *d[NIMG];
	struct mirror m;
	struct bstore_mirror s;
	struct bcache *c;
	struct fspace *fs;
	struct super sb;
};

static void img_open(struct img2 *x)
{
	char err[256], why[256];
	struct fspace_params p;

	memset(x, 0, sizeof(*x));
	assert_int_equal(dev_backend_create("file", &x->be), 0);
	for (unsigned i = 0; i < NIMG; i++) {
		assert_int_equal(dev_open(devs[i], false, &x->d[i], err, sizeof(err)), 0);
		assert_int_equal(dev_backend_attach(x->be, x->d[i]), 0);
	}
	assert_int_equal(super_read_dev(x->be, x->d[0], &x->sb, NULL, why, sizeof(why)), 0);
	assert_int_equal(x->sb.version, SUPER_VERSION_V2);
	assert_int_equal(mirror_init(&x->m, x->be, x->d, NIMG), 0);
	assert_int_equal(bstore_mirror_init(&x->s, &x->m, x->sb.node_start,
					    x->sb.node_blocks / BNODE_BLOCKS), 0);
	assert_int_equal(bcache_create(1u << 20, &x->c), 0);
	format_v2_fspace_params(&x->sb, &p);
	assert_int_equal(fspace_open(&x->s.store, x->c, x->sb.fs_uuid, &p,
				     &x->sb.roots[V2_TREE_FREE - 1], &x->fs), 0);
}

static void img_close(struct img2 *x)
{
	fspace_close(x->fs);
	bcache_destroy(x->c);
	bstore_mirror_destroy(&x->s);
	dev_backend_destroy(x->be);
	for (unsigned i = 0; i < NIMG; i++)
		dev_close(x->d[i]);
}

static void write_supers(struct img2 *x)
{
	for (unsigned i = 0; i < NIMG; i++) {
		x->sb.dev_index = i;
		memcpy(x->sb.dev_uuid, x->sb.dev_uuids[i], 16);
		assert_int_equal(super_write_dev(x->be, x->d[i], &x->sb), 0);
	}
}

/* Commit the items (if any) into the inode tree and the free space, a
 * superblock naming the new roots (generation + 1, free_blocks from
 * fspace) on both images; then close. */
static void img_commit(struct img2 *x, const struct bkey *k, const void *const *v,
		       const unsigned *len, unsigned n)
{
	uint64_t gen = x->sb.tree_gen + 1, *freed = NULL;
	size_t nfreed = 0;
	struct btree t;

	assert_int_equal(bt_open(&t, fspace_node_store(x->fs), x->c, V2_TREE_INODES,
				 x->sb.fs_uuid, &x->sb.roots[0]), 0);
	if (n) {
		assert_int_equal(bt_begin(&t, gen), 0);
		for (unsigned i = 0; i < n; i++)
			assert_int_equal(bt_insert(&t, &k[i], v[i], len[i]), 0);
		assert_int_equal(bt_commit(&t, &x->sb.roots[0], &freed, &nfreed), 0);
	}
	assert_int_equal(fspace_commit(x->fs, gen, freed, nfreed,
				       &x->sb.roots[V2_TREE_FREE - 1]), 0);
	x->sb.tree_gen = gen;
	x->sb.generation++;
	x->sb.free_blocks = fspace_free_blocks(x->fs);
	write_supers(x);
	bt_release(&t, freed, nfreed);
	fspace_commit_done(x->fs);
	free(freed);
	bt_close(&t);
	img_close(x);
}

static void expect(int rc, const char *want);

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

static void expect(int rc, const char *want)
{
	char *out;

	assert_int_equal(run_fsck(FSCK_CHECK, &out), rc);
	if (want && !strstr(out, want)) {
		fprintf(stderr, "missing \"%s\" in:\n%s", want, out);
		fail();
	}
	free(out);
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
	struct bstore *ns;
	struct img2 x;
	uint64_t blk, got, leak;

	(void)state;
	/* Data allocated and committed: GROUP and FREE items, clean. */
	img_open(&x);
	assert_int_equal(fspace_get(x.fs, 100, 0, FSPACE_DATA, &blk, &got), 0);
	assert_true(got == 100);
	img_commit(&x, NULL, NULL, NULL, 0);
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
		struct bkey k[3] = { v2_key_inode(5), v2_key_symlink(5, 0), v2_key_symlink(5, 1) };
		const void *v[3] = { ival[0], chunk, chunk };
		unsigned len[3] = { V2_INODE_LEN, 2048, 3000 - 2048 };

		img_open(&x);
		img_commit(&x, k, v, len, 3);
		expect(FSCK_EXIT_OK, "2 inodes (1 directories, 0 files, 1 symlinks");
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fresh),
		cmocka_unit_test(test_free_space),
		cmocka_unit_test(test_bad_summary),
		cmocka_unit_test(test_items),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
