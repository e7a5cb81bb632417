// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: fsck of the POSIX ACL xattrs of a format-v2 image (fsck_v2_acl.c): on a small tree (a directory, a file, a symlink) with ACL values written as raw XATTR and XCHUNK items, a clean image with valid ACLs (inline and chunked, ids unsorted) passes; each damage is reported in one line with -n (exit 4), refused by -p, repaired by -y (exit 1, then clean): an access ACL that does not decode (no MASK, bad version, a torn entry, a chunk missing) is removed, a default ACL on a file and an ACL on a symlink are removed, an access ACL that disagrees with the mode gets the mode's bits (named entries kept, inline and chunked). */
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

#include "acl.h"
#include "aclent.h"
#include "format_v2.h"
#include "testlib.h"
#include "v2img.h"

static int setup(void **state)
{
	(void)state;
	return v2img_setup("fsckv2acl");
}

static int teardown(void **state)
{
	(void)state;
	v2img_teardown();
	return 0;
}

/* Owner rwx, user 1000 rw, users 900 and 900 again (ids unsorted and
 * repeated, as the kernel lets through), group r-x, mask rw: mode 0764. */
static const struct ent named[] = {
	{ UO, 7, ~0u }, { U, 6, 1000 }, { U, 4, 900 }, { U, 4, 900 }, { GO, 5, ~0u },
	{ MASK, 6, ~0u }, { OTH, 4, ~0u },
};
#define NNAMED 7

/* A value of @n named users (n + 4 entries), mask rw: mode 0764. */
static size_t big(uint8_t *buf, unsigned n)
{
	struct ent e[600];

	e[0] = (struct ent){ UO, 7, ~0u };
	for (unsigned i = 0; i < n; i++)
		e[1 + i] = (struct ent){ U, 4, 5000 - i };
	e[n + 1] = (struct ent){ GO, 5, ~0u };
	e[n + 2] = (struct ent){ MASK, 6, ~0u };
	e[n + 3] = (struct ent){ OTH, 4, ~0u };
	return mk(buf, e, n + 4);
}

static uint64_t seed(void)
{
	struct img2 x;
	uint64_t s;

	img_open(&x);
	s = x.sb.hash_seed;
	img_close(&x);
	return s;
}

/* The XATTR item holding @name = @val alone (inline), or with @vid its
 * header and XCHUNK items (only @chunks of them: fewer to damage it). */
static void put_xattr(struct v2batch *b, uint64_t ino, const char *name, const void *val,
		      size_t len, uint64_t vid, unsigned chunks)
{
	struct v2_xattr x = { .namelen = (uint16_t)strlen(name), .vallen = (uint32_t)len,
			      .vid = vid, .name = name, .val = vid ? NULL : val };
	uint8_t item[BNODE_MAX_VAL];
	unsigned ilen = 0;

	assert_int_equal(v2_xattr_add(item, &ilen, sizeof(item), &x), 0);
	v2b_put(b, v2_key_xattr(ino, v2_hash56(seed(), name, x.namelen)), item, ilen);
	for (unsigned c = 0; vid && c < chunks; c++)
		v2b_put(b, v2_key_xchunk(ino, vid, c),
			(const uint8_t *)val + (size_t)c * V2_XCHUNK_SIZE,
			v2_xchunk_len((uint32_t)len, c));
}

/* / (1): "d" (2, a directory 0755), "f" (3, a file of @fmode), "l" (4, a
 * symlink to "t"). */
static void base(uint32_t fmode, struct v2batch *b)
{
	struct log_inode in = { .ino = 4, .mode = S_IFLNK | 0777, .nlink = 1, .gen = 1,
				.target_len = 1 };
	uint8_t v[V2_INODE_LEN];
	uint64_t s = seed();

	v2b_inode(b, 1, S_IFDIR | 0755, 3, 1);
	v2b_inode(b, 2, S_IFDIR | 0755, 2, 1);
	v2b_inode(b, 3, S_IFREG | fmode, 1, 0);
	assert_int_equal(v2_inode_encode(&in, v), 0);
	v2b_put(b, v2_key_inode(4), v, sizeof(v));
	b->top_ino = 4;
	v2b_put(b, v2_key_symlink(4, 0), "t", 1);
	v2b_dirent(b, s, 1, "d", 2, DT_DIR);
	v2b_dirindex(b, 1, 2, "d", 2, DT_DIR);
	v2b_dirent(b, s, 1, "f", 3, DT_REG);
	v2b_dirindex(b, 1, 3, "f", 3, DT_REG);
	v2b_dirent(b, s, 1, "l", 4, DT_LNK);
	v2b_dirindex(b, 1, 4, "l", 4, DT_LNK);
}

static void commit(struct v2batch *b)
{
	struct img2 x;

	img_open(&x);
	v2b_commit(&x, b);
}

/* -n finds @want (exit 4), -p refuses, -y repairs it, then clean. */
static void found_and_repaired(const char *want)
{
	char line[512];

	snprintf(line, sizeof(line), "%s: not fixed (-n)", want);
	v2img_expect(FSCK_EXIT_UNCORRECTED, line);
	v2img_expect_mode(FSCK_PREEN, FSCK_EXIT_UNCORRECTED, "UNEXPECTED INCONSISTENCY");
	snprintf(line, sizeof(line), "%s: fixing", want);
	v2img_expect_mode(FSCK_REPAIR, FSCK_EXIT_FIXED, line);
	v2img_expect(FSCK_EXIT_OK, "0 errors found");
}

/* The value of @ino's @name now (inline or chunked), its size; -ENOENT
 * when there is none. */
static long get_xattr(uint64_t ino, const char *name, uint8_t *out)
{
	static uint8_t item[BNODE_MAX_VAL];
	uint16_t nl = (uint16_t)strlen(name);
	struct bkey k = v2_key_xattr(ino, v2_hash56(seed(), name, nl));
	struct v2_xattr x;
	struct img2 x2;
	struct btree t;
	unsigned len;
	long ret;

	img_open(&x2);
	assert_int_equal(bt_open(&t, fspace_node_store(x2.fs), x2.c, V2_TREE_INODES,
				 x2.sb.fs_uuid, &x2.sb.roots[V2_TREE_INODES - 1]), 0);
	ret = bt_lookup(&t, &k, item, sizeof(item), &len);
	if (ret == 0)
		ret = v2_xattr_find(item, len, name, nl, &x);
	if (ret == 0 && !x.vid)
		memcpy(out, x.val, x.vallen);
	for (unsigned c = 0; ret == 0 && x.vid && c < v2_xchunk_count(x.vallen); c++) {
		struct bkey ck = v2_key_xchunk(ino, x.vid, c);

		ret = bt_lookup(&t, &ck, out + (size_t)c * V2_XCHUNK_SIZE,
				v2_xchunk_len(x.vallen, c), &len);
	}
	bt_close(&t);
	img_close(&x2);
	return ret ? ret : (long)x.vallen;
}

static void test_clean(void **state)
{
	struct v2batch b = { 0 };
	uint8_t v[ACL_XATTR_MAX];
	size_t n;

	(void)state;
	base(0764, &b);
	n = mk(v, named, NNAMED);
	put_xattr(&b, 3, ACL_XATTR_ACCESS, v, n, 0, 0);
	put_xattr(&b, 2, ACL_XATTR_DEFAULT, v, n, 0, 0);
	n = big(v, 200);	/* 1636 bytes: chunked */
	put_xattr(&b, 2, ACL_XATTR_ACCESS, v, n, 7, v2_xchunk_count((uint32_t)n));
	v2b_inode(&b, 2, S_IFDIR | 0764, 2, 1);
	commit(&b);
	v2img_expect(FSCK_EXIT_OK, "0 errors found");
	v2img_expect_mode(FSCK_REPAIR, FSCK_EXIT_OK, "0 errors found");
}

static void test_undecodable(void **state)
{
	const struct ent nomask[] = { { UO, 7, ~0u }, { U, 6, 1 }, { GO, 5, ~0u },
				      { OTH, 4, ~0u } };
	struct v2batch b = { 0 };
	uint8_t v[ACL_XATTR_MAX];
	size_t n;

	(void)state;
	base(0764, &b);
	put_xattr(&b, 3, ACL_XATTR_ACCESS, v, mk(v, nomask, 4), 0, 0);
	commit(&b);
	found_and_repaired("file inode 3: system.posix_acl_access does not decode (named "
			   "entries without a MASK entry): removing it");
	assert_int_equal(get_xattr(3, ACL_XATTR_ACCESS, v), -ENOENT);

	/* Version 1, then a torn entry, on the directory's default ACL. */
	n = mk(v, named, NNAMED);
	v[0] = 1;
	put_xattr(&b, 2, ACL_XATTR_DEFAULT, v, n, 0, 0);
	commit(&b);
	found_and_repaired("directory inode 2: system.posix_acl_default does not decode (not "
			   "a version 2 ACL): removing it");
	v[0] = 2;
	put_xattr(&b, 2, ACL_XATTR_DEFAULT, v, n - 3, 0, 0);
	commit(&b);
	found_and_repaired("directory inode 2: system.posix_acl_default does not decode (its "
			   "size is not a header and whole 8-byte entries): removing it");
	assert_int_equal(get_xattr(2, ACL_XATTR_DEFAULT, v), -ENOENT);

	/* A chunked value with its second chunk missing: the header and
	 * the chunk left both go. */
	n = big(v, 500);	/* 4036 bytes: 2 chunks */
	put_xattr(&b, 3, ACL_XATTR_ACCESS, v, n, 9, 1);
	commit(&b);
	found_and_repaired("file inode 3: system.posix_acl_access does not decode (chunks "
			   "of its value are missing): removing it");
	assert_int_equal(get_xattr(3, ACL_XATTR_ACCESS, v), -ENOENT);
}

static void test_placement(void **state)
{
	struct v2batch b = { 0 };
	uint8_t v[ACL_XATTR_MAX];
	size_t n;

	(void)state;
	base(0764, &b);
	n = mk(v, named, NNAMED);
	put_xattr(&b, 3, ACL_XATTR_DEFAULT, v, n, 0, 0);
	commit(&b);
	found_and_repaired("file inode 3: system.posix_acl_default on a file (only "
			   "directories have a default ACL): removing it");
	assert_int_equal(get_xattr(3, ACL_XATTR_DEFAULT, v), -ENOENT);

	put_xattr(&b, 4, ACL_XATTR_ACCESS, v, n, 0, 0);
	commit(&b);
	found_and_repaired("symlink inode 4: system.posix_acl_access on a symlink (symlinks "
			   "have no ACLs): removing it");
	assert_int_equal(get_xattr(4, ACL_XATTR_ACCESS, v), -ENOENT);
}

static void test_mode(void **state)
{
	struct v2batch b = { 0 };
	uint8_t v[ACL_XATTR_MAX], got[ACL_XATTR_MAX];
	size_t n;

	(void)state;
	base(0640, &b);
	n = mk(v, named, NNAMED);
	put_xattr(&b, 3, ACL_XATTR_ACCESS, v, n, 0, 0);
	commit(&b);
	found_and_repaired("file inode 3: mode 0640 but its access ACL gives 0764 (owner, "
			   "group class, other): setting the ACL from the mode");
	assert_int_equal(get_xattr(3, ACL_XATTR_ACCESS, got), (long)n);
	acl_chmod(v, n, 0640);	/* owner rw, mask r, other none; the rest kept */
	assert_memory_equal(got, v, n);
	assert_int_equal(perm_of(got, n, MASK), 4);
	assert_int_equal(perm_of(got, n, GO), 5);

	/* Chunked: the chunks rewritten. */
	n = big(v, 300);
	put_xattr(&b, 2, ACL_XATTR_ACCESS, v, n, 11, v2_xchunk_count((uint32_t)n));
	commit(&b);
	found_and_repaired("directory inode 2: mode 0755 but its access ACL gives 0764 "
			   "(owner, group class, other): setting the ACL from the mode");
	assert_int_equal(get_xattr(2, ACL_XATTR_ACCESS, got), (long)n);
	acl_chmod(v, n, 0755);
	assert_memory_equal(got, v, n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_clean, setup, teardown),
		cmocka_unit_test_setup_teardown(test_undecodable, setup, teardown),
		cmocka_unit_test_setup_teardown(test_placement, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mode, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
