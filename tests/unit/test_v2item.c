// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: format-v2 item codecs (v2item.c): every value type round-trips at its boundaries, the INODE value is byte for byte the version 1 INODE body, hash-collision lists stay sorted and reject duplicates and overflow, and every malformed variant (each length off by one, each field out of range, an item under the wrong key or tree, a bit flip of any byte that still has the old length) is refused with -EUCLEAN. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "le.h"
#include "log.h"
#include "v2item.h"

#define SEED 0x1234abcdull

static uint8_t buf[BNODE_MAX_VAL + 64];

static struct log_inode mkinode(uint64_t ino, uint32_t mode, uint32_t tlen)
{
	struct log_inode in;

	memset(&in, 0, sizeof(in));
	in.ino = ino;
	in.parent = S_ISDIR(mode) ? 1 : 0;
	in.mode = mode;
	in.nlink = 1;
	in.size = (uint64_t)INT64_MAX;
	in.gen = 7;
	in.atime_ns = -5;
	in.btime_ns = INT64_MIN;
	in.target_len = tlen;
	return in;
}

static void test_inode(void **state)
{
	struct log_inode in = mkinode(42, S_IFREG | 0644, 0), out;
	struct bkey k = v2_key_inode(42), bad;
	struct log_buf lb;
	struct log_rec r = { .type = LR_INODE };

	(void)state;
	in.mapped = 0x123456789ull;
	assert_int_equal(v2_inode_encode(&in, buf), 0);
	assert_int_equal(v2_inode_decode(&k, buf, V2_INODE_LEN, &out), 0);
	assert_true(out.ino == 42 && out.mode == in.mode && out.size == in.size &&
		    out.btime_ns == INT64_MIN && out.atime_ns == -5 && out.gen == 7 &&
		    out.mapped == 0x123456789ull);
	/* The v1 record body (after the 8-byte record header), then mapped. */
	r.inode = in;
	log_buf_init(&lb);
	assert_int_equal(log_buf_add(&lb, &r), 0);
	assert_int_equal(lb.len, 8 + LOG_INODE_BODY);
	assert_int_equal(V2_INODE_LEN, LOG_INODE_BODY + 8);
	assert_memory_equal(lb.p + 8, buf, LOG_INODE_BODY);
	assert_true(le64_get(buf + LOG_INODE_BODY) == 0x123456789ull);
	log_buf_free(&lb);
	/* mapped: at most 2^51 blocks, and only a regular file has any */
	le64_put(buf + LOG_INODE_BODY, V2_FBLK_LIMIT + 1);
	assert_int_equal(v2_inode_decode(&k, buf, V2_INODE_LEN, &out), -EUCLEAN);
	in.mode = S_IFDIR | 0755;
	assert_int_equal(v2_inode_encode(&in, buf), -EINVAL);
	in = mkinode(42, S_IFREG | 0644, 0);
	assert_int_equal(v2_inode_encode(&in, buf), 0);

	assert_int_equal(v2_inode_decode(&k, buf, V2_INODE_LEN - 1, &out), -EUCLEAN);
	assert_int_equal(v2_inode_decode(&k, buf, V2_INODE_LEN + 1, &out), -EUCLEAN);
	bad = v2_key_inode(43);		/* under another inode's key */
	assert_int_equal(v2_inode_decode(&bad, buf, V2_INODE_LEN, &out), -EUCLEAN);
	bad = k;
	bad.off = 1;
	assert_int_equal(v2_inode_decode(&bad, buf, V2_INODE_LEN, &out), -EUCLEAN);
	/* size past 2^63 - 1, a bad mode, a target on a regular file */
	le64_put(buf + 44, (uint64_t)INT64_MAX + 1);
	assert_int_equal(v2_inode_decode(&k, buf, V2_INODE_LEN, &out), -EUCLEAN);
	in.mode = 0170000;
	assert_int_equal(v2_inode_encode(&in, buf), -EINVAL);
	in = mkinode(42, S_IFREG | 0644, 1);
	assert_int_equal(v2_inode_encode(&in, buf), -EINVAL);
	in = mkinode(42, S_IFLNK | 0777, 0);	/* a symlink without target */
	assert_int_equal(v2_inode_encode(&in, buf), -EINVAL);
	in = mkinode(42, S_IFLNK | 0777, LOG_SYMLINK_MAX + 1);
	assert_int_equal(v2_inode_encode(&in, buf), -EINVAL);
	in = mkinode(42, S_IFLNK | 0777, LOG_SYMLINK_MAX);
	assert_int_equal(v2_inode_encode(&in, buf), 0);
	assert_int_equal(v2_inode_decode(&k, buf, V2_INODE_LEN, &out), 0);
	in = mkinode(0, S_IFDIR | 0755, 0);
	assert_int_equal(v2_inode_encode(&in, buf), -EINVAL);
}

static void test_symlink(void **state)
{
	struct bkey k0 = v2_key_symlink(5, 0), k1 = v2_key_symlink(5, 1), k2 = v2_key_symlink(5, 2);

	(void)state;
	assert_int_equal(v2_symlink_chunks(1), 1);
	assert_int_equal(v2_symlink_chunks(2048), 1);
	assert_int_equal(v2_symlink_chunks(2049), 2);
	assert_int_equal(v2_symlink_chunks(LOG_SYMLINK_MAX), 2);
	assert_int_equal(v2_symlink_chunk_len(4095, 0), 2048);
	assert_int_equal(v2_symlink_chunk_len(4095, 1), 2047);
	assert_int_equal(v2_symlink_chunk_len(2048, 1), 0);
	assert_int_equal(v2_symlink_check(&k0, 2048, 4095), 0);
	assert_int_equal(v2_symlink_check(&k1, 2047, 4095), 0);
	assert_int_equal(v2_symlink_check(&k1, 2048, 4095), -EUCLEAN);
	assert_int_equal(v2_symlink_check(&k0, 10, 10), 0);
	assert_int_equal(v2_symlink_check(&k0, 11, 10), -EUCLEAN);
	assert_int_equal(v2_symlink_check(&k1, 1, 10), -EUCLEAN);	/* no chunk 1 */
	assert_int_equal(v2_symlink_check(&k0, 0, 0), -EUCLEAN);
	assert_int_equal(v2_symlink_check(&k0, 2049, 0), -EUCLEAN);
	assert_int_equal(v2_symlink_check(&k2, 1, 0), -EUCLEAN);
}

static struct v2_dirent dent(const char *name, uint64_t ino)
{
	struct v2_dirent e = { ino, 8, (uint16_t)strlen(name), name };

	return e;
}

static void test_dirent(void **state)
{
	struct v2_dirent e = dent("b", 10), got;
	unsigned len = 0, pos = 0, n = 0;
	struct bkey k;
	char longname[256];

	(void)state;
	/* Collisions cannot be made on demand: build a list by hand and check
	 * it under a key whose hash only its first name has, then as a list
	 * (sorting, find, delete) with check under each name's own key. */
	assert_int_equal(v2_dirent_add(buf, &len, sizeof(buf), &e), 0);
	e = dent("a", 11);
	assert_int_equal(v2_dirent_add(buf, &len, sizeof(buf), &e), 0);
	e = dent("ab", 12);
	assert_int_equal(v2_dirent_add(buf, &len, sizeof(buf), &e), 0);
	assert_int_equal(v2_dirent_add(buf, &len, sizeof(buf), &e), -EEXIST);
	while (v2_dirent_next(buf, len, &pos, &got) == 1) {
		static const char *order[] = { "a", "ab", "b" };

		assert_int_equal(got.namelen, strlen(order[n]));
		assert_memory_equal(got.name, order[n], got.namelen);
		n++;
	}
	assert_int_equal(n, 3);
	assert_int_equal(v2_dirent_find(buf, len, "ab", 2, &got), 0);
	assert_int_equal(got.ino, 12);
	assert_int_equal(v2_dirent_find(buf, len, "abc", 3, &got), -ENOENT);
	/* Three names, three hashes: the list fails check under any one key. */
	k = v2_key_dirent(1, v2_hash56(SEED, "a", 1));
	assert_int_equal(v2_dirent_check(SEED, &k, buf, len), -EUCLEAN);
	assert_int_equal(v2_dirent_del(buf, &len, "a", 1), 0);
	assert_int_equal(v2_dirent_del(buf, &len, "b", 1), 0);
	assert_int_equal(v2_dirent_del(buf, &len, "b", 1), -ENOENT);
	k = v2_key_dirent(1, v2_hash56(SEED, "ab", 2));
	assert_int_equal(v2_dirent_check(SEED, &k, buf, len), 0);
	assert_int_equal(v2_dirent_check(SEED + 1, &k, buf, len), -EUCLEAN);
	assert_int_equal(v2_dirent_check(SEED, &k, buf, len - 1), -EUCLEAN);
	assert_int_equal(v2_dirent_check(SEED, &k, buf, 0), -EUCLEAN);
	buf[8] = 3;	/* not a DT_ value */
	assert_int_equal(v2_dirent_check(SEED, &k, buf, len), -EUCLEAN);
	buf[8] = 8;
	le64_put(buf, 0);	/* inode 0 */
	assert_int_equal(v2_dirent_check(SEED, &k, buf, len), -EUCLEAN);
	/* Bad names are refused by add. */
	e = dent(".", 3);
	assert_int_equal(v2_dirent_add(buf, &len, sizeof(buf), &e), -EINVAL);
	e = dent("a/b", 3);
	assert_int_equal(v2_dirent_add(buf, &len, sizeof(buf), &e), -EINVAL);
	/* Overflow: 255-byte names until the item would not fit a node. */
	len = 0;
	memset(longname, 'x', 255);
	longname[255] = 0;
	for (n = 0;; n++) {
		longname[0] = (char)('A' + n);
		e = dent(longname, 100 + n);
		if (v2_dirent_add(buf, &len, sizeof(buf), &e) == -E2BIG)
			break;
	}
	assert_int_equal(n, BNODE_MAX_VAL / (V2_DIRENT_HDR + 255));
	assert_true(len <= BNODE_MAX_VAL);
}

static void test_dirindex(void **state)
{
	struct v2_dirent e = dent("file", 77), got;
	struct bkey k = v2_key_dirindex(1, V2_COOKIE_FIRST), bad;
	unsigned len;

	(void)state;
	assert_int_equal(v2_dirindex_encode(&e, buf, sizeof(buf), &len), 0);
	assert_int_equal(len, V2_DIRENT_HDR + 4);
	assert_int_equal(v2_dirindex_decode(&k, buf, len, &got), 0);
	assert_int_equal(got.ino, 77);
	assert_int_equal(v2_dirindex_decode(&k, buf, len + 1, &got), -EUCLEAN);
	assert_int_equal(v2_dirindex_decode(&k, buf, len - 1, &got), -EUCLEAN);
	bad = v2_key_dirindex(1, 1);	/* cookie of ".." */
	assert_int_equal(v2_dirindex_decode(&bad, buf, len, &got), -EUCLEAN);
	assert_int_equal(v2_dirindex_encode(&e, buf, len - 1, &len), -E2BIG);
}

static void test_xattr(void **state)
{
	static uint8_t val[LOG_XATTR_VAL_MAX];
	struct v2_xattr x = { 8, V2_XATTR_INLINE_MAX, 0, "user.one", val }, got;
	struct bkey k = v2_key_xattr(9, v2_hash56(SEED, "user.one", 8));
	struct bkey c;
	unsigned len = 0;

	(void)state;
	memset(val, 0xab, sizeof(val));
	assert_int_equal(v2_xattr_add(buf, &len, sizeof(buf), &x), 0);
	assert_int_equal(len, V2_XATTR_HDR + 8 + V2_XATTR_INLINE_MAX);
	assert_int_equal(v2_xattr_check(SEED, &k, buf, len), 0);
	assert_int_equal(v2_xattr_find(buf, len, "user.one", 8, &got), 0);
	assert_int_equal(got.vallen, V2_XATTR_INLINE_MAX);
	assert_memory_equal(got.val, val, got.vallen);
	/* One more byte must be chunked; inline it would be a second encoding. */
	x.vallen = V2_XATTR_INLINE_MAX + 1;
	assert_int_equal(v2_xattr_add(buf, &len, sizeof(buf), &x), -EINVAL);
	le32_put(buf + 2, V2_XATTR_INLINE_MAX + 1);
	assert_int_equal(v2_xattr_check(SEED, &k, buf, len), -EUCLEAN);
	len = 0;
	x.vid = 5;
	x.vallen = LOG_XATTR_VAL_MAX;
	assert_int_equal(v2_xattr_add(buf, &len, sizeof(buf), &x), 0);
	assert_int_equal(len, V2_XATTR_HDR + 8);
	assert_int_equal(v2_xattr_check(SEED, &k, buf, len), 0);
	le32_put(buf + 2, LOG_XATTR_VAL_MAX + 1);
	assert_int_equal(v2_xattr_check(SEED, &k, buf, len), -EUCLEAN);
	le32_put(buf + 2, 10);	/* small but chunked */
	assert_int_equal(v2_xattr_check(SEED, &k, buf, len), -EUCLEAN);
	/* chunks of a 65536-byte value */
	assert_int_equal(v2_xchunk_count(LOG_XATTR_VAL_MAX), 17);
	assert_int_equal(v2_xchunk_len(LOG_XATTR_VAL_MAX, 16), LOG_XATTR_VAL_MAX - 16 * V2_XCHUNK_SIZE);
	assert_int_equal(v2_xchunk_len(LOG_XATTR_VAL_MAX, 17), 0);
	c = v2_key_xchunk(9, 5, 16);
	assert_int_equal(v2_xchunk_check(&c, V2_XCHUNK_SIZE), 0);
	assert_int_equal(v2_xchunk_check(&c, V2_XCHUNK_SIZE + 1), -EUCLEAN);
	assert_int_equal(v2_xchunk_check(&c, 0), -EUCLEAN);
	c = v2_key_xchunk(9, 5, 17);
	assert_int_equal(v2_xchunk_check(&c, 1), -EUCLEAN);
	c = v2_key_xchunk(9, 0, 0);
	assert_int_equal(v2_xchunk_check(&c, 1), -EUCLEAN);
	le32_put(buf + 2, LOG_XATTR_VAL_MAX);
	assert_int_equal(v2_xattr_del(buf, &len, "user.one", 8), 0);
	assert_int_equal(len, 0);
}

static void test_extent(void **state)
{
	uint64_t csums[V2_EXT_MAX_BLOCKS + 1];
	struct v2_extent e = { 1000, V2_EXT_MAX_BLOCKS, false, csums }, got;
	struct bkey k = v2_key_extent(3, V2_FBLK_LIMIT - V2_EXT_MAX_BLOCKS);
	unsigned len;

	(void)state;
	for (unsigned i = 0; i <= V2_EXT_MAX_BLOCKS; i++)
		csums[i] = 0x1111111111111111ull * i + i;
	assert_int_equal(v2_extent_encode(k.off, &e, buf, sizeof(buf), &len), 0);
	assert_int_equal(len, V2_EXT_HDR + 8 * V2_EXT_MAX_BLOCKS);
	assert_int_equal(v2_extent_decode(&k, buf, len, &got), 0);
	assert_int_equal(got.n, V2_EXT_MAX_BLOCKS);
	for (unsigned i = 0; i < got.n; i++)
		assert_true(v2_extent_csum(&got, i) == csums[i]);
	/* The file's last block is 2^51 - 1: one block further is refused. */
	k.off++;
	assert_int_equal(v2_extent_decode(&k, buf, len, &got), -EUCLEAN);
	assert_int_equal(v2_extent_encode(k.off, &e, buf, sizeof(buf), &len), -EINVAL);
	k.off--;
	assert_int_equal(v2_extent_decode(&k, buf, len - 8, &got), -EUCLEAN);
	assert_int_equal(v2_extent_decode(&k, buf, len + 8, &got), -EUCLEAN);
	le32_put(buf + 12, 1);	/* flags */
	assert_int_equal(v2_extent_decode(&k, buf, len, &got), -EUCLEAN);
	le32_put(buf + 12, 0);
	e.n = V2_EXT_MAX_BLOCKS + 1;
	assert_int_equal(v2_extent_encode(0, &e, buf, sizeof(buf), &len), -EINVAL);
	e.n = 1;
	e.phys = 0;
	assert_int_equal(v2_extent_encode(0, &e, buf, sizeof(buf), &len), -EINVAL);
	e.phys = V2_PHYS_LIMIT - 1;
	assert_int_equal(v2_extent_encode(0, &e, buf, sizeof(buf), &len), 0);
	k = v2_key_extent(3, 0);
	assert_int_equal(v2_extent_decode(&k, buf, len, &got), 0);
	le64_put(buf, V2_PHYS_LIMIT);	/* past every device */
	assert_int_equal(v2_extent_decode(&k, buf, len, &got), -EUCLEAN);
	/* unwritten: no csums, any length */
	e = (struct v2_extent){ 5000, UINT32_MAX, true, NULL };
	assert_int_equal(v2_extent_encode(0, &e, buf, sizeof(buf), &len), 0);
	assert_int_equal(len, V2_EXT_HDR);
	assert_int_equal(v2_extent_decode(&k, buf, len, &got), 0);
	assert_true(got.unwritten && got.n == UINT32_MAX && got.phys == 5000);
	assert_int_equal(v2_extent_decode(&k, buf, len + 8, &got), -EUCLEAN);
	le32_put(buf + 8, 0);
	assert_int_equal(v2_extent_decode(&k, buf, len, &got), -EUCLEAN);
}

static void test_refcount_free(void **state)
{
	struct bkey k = v2_key_refcount(100), f = v2_key_free(100, 50), bad;
	uint32_t n, refs;
	uint64_t s, fn;

	(void)state;
	assert_int_equal(v2_refcount_encode(100, 8, 2, buf), 0);
	assert_int_equal(v2_refcount_decode(&k, buf, V2_REFCOUNT_LEN, &n, &refs), 0);
	assert_true(n == 8 && refs == 2);
	assert_int_equal(v2_refcount_decode(&k, buf, V2_REFCOUNT_LEN + 1, &n, &refs), -EUCLEAN);
	assert_int_equal(v2_refcount_encode(100, 8, 1, buf), -EINVAL);
	assert_int_equal(v2_refcount_encode(100, 0, 2, buf), -EINVAL);
	le32_put(buf + 4, 1);
	assert_int_equal(v2_refcount_decode(&k, buf, V2_REFCOUNT_LEN, &n, &refs), -EUCLEAN);
	assert_int_equal(v2_free_decode(&f, 0, &s, &fn), 0);
	assert_true(s == 100 && fn == 50);
	assert_int_equal(v2_free_decode(&f, 1, &s, &fn), -EUCLEAN);
	bad = v2_key_free(100, 0);
	assert_int_equal(v2_free_decode(&bad, 0, &s, &fn), -EUCLEAN);
	bad = v2_key_free(V2_PHYS_LIMIT - 1, 2);
	assert_int_equal(v2_free_decode(&bad, 0, &s, &fn), -EUCLEAN);
}

/* GROUP (24 bytes) and NODEMAP (2048 bytes, not all zero) under id 0,
 * only in the free-space tree, with their exact sizes. */
static void test_group_nodemap(void **state)
{
	struct bkey g = { 0, V2_GROUP, 3 }, m = { 0, V2_NODEMAP, 0 }, bad;
	static const uint64_t ok[][3] = { { 0, 0, 0 }, { 100, 100, 1 }, { 100, 40, 61 },
					  { 7, 1, 7 } };
	static const uint64_t no[][3] = { { 0, 1, 0 }, { 0, 0, 1 }, { 5, 0, 1 }, { 5, 1, 0 },
					  { 5, 6, 1 }, { 100, 40, 62 }, { 1ull << 56, 1, 1 } };
	uint64_t f, mr, ne;

	(void)state;
	for (unsigned i = 0; i < sizeof(ok) / sizeof(ok[0]) + sizeof(no) / sizeof(no[0]); i++) {
		const uint64_t *v = i < 4 ? ok[i] : no[i - 4];

		le64_put(buf, v[0]);
		le64_put(buf + 8, v[1]);
		le64_put(buf + 16, v[2]);
		assert_int_equal(v2_item_check(V2_TREE_FREE, SEED, &g, buf, V2_GROUP_LEN, NULL, 0),
				 i < 4 ? 0 : -EUCLEAN);
	}
	le64_put(buf, 100);
	le64_put(buf + 8, 40);
	le64_put(buf + 16, 3);
	assert_int_equal(v2_group_decode(&g, buf, V2_GROUP_LEN, &f, &mr, &ne), 0);
	assert_true(f == 100 && mr == 40 && ne == 3);
	assert_int_equal(v2_item_check(V2_TREE_FREE, SEED, &g, buf, 23, NULL, 0), -EUCLEAN);
	assert_int_equal(v2_item_check(V2_TREE_FREE, SEED, &g, buf, 25, NULL, 0), -EUCLEAN);
	assert_int_equal(v2_item_check(V2_TREE_REFCOUNT, SEED, &g, buf, 24, NULL, 0), -EUCLEAN);
	bad = g;
	bad.id = 1;
	assert_int_equal(v2_item_check(V2_TREE_FREE, SEED, &bad, buf, 24, NULL, 0), -EUCLEAN);

	memset(buf, 0, V2_NODEMAP_LEN);
	assert_int_equal(v2_item_check(V2_TREE_FREE, SEED, &m, buf, V2_NODEMAP_LEN, NULL, 0),
			 -EUCLEAN);	/* all free: never an item */
	buf[V2_NODEMAP_LEN - 1] = 0x80;
	assert_int_equal(v2_item_check(V2_TREE_FREE, SEED, &m, buf, V2_NODEMAP_LEN, NULL, 0), 0);
	assert_int_equal(v2_item_check(V2_TREE_FREE, SEED, &m, buf, V2_NODEMAP_LEN - 1, NULL, 0),
			 -EUCLEAN);
	assert_int_equal(v2_item_check(V2_TREE_INODES, SEED, &m, buf, V2_NODEMAP_LEN, NULL, 0),
			 -EUCLEAN);
	bad = m;
	bad.id = 4096;
	assert_int_equal(v2_item_check(V2_TREE_FREE, SEED, &bad, buf, V2_NODEMAP_LEN, NULL, 0),
			 -EUCLEAN);
}

/* Every item in the wrong tree is refused; every byte flip of a valid
 * value either is refused or decodes (never a crash: ASan builds). */
static void test_item_check(void **state)
{
	struct log_inode in = mkinode(1, S_IFDIR | 0755, 0);
	struct bkey k = v2_key_inode(1);
	char why[128];

	(void)state;
	assert_int_equal(v2_inode_encode(&in, buf), 0);
	assert_int_equal(v2_item_check(V2_TREE_INODES, SEED, &k, buf, V2_INODE_LEN, why,
				       sizeof(why)), 0);
	assert_int_equal(v2_item_check(V2_TREE_FREE, SEED, &k, buf, V2_INODE_LEN, why,
				       sizeof(why)), -EUCLEAN);
	assert_non_null(strstr(why, "tree"));
	k.type = 7;	/* no such type */
	assert_int_equal(v2_item_check(V2_TREE_INODES, SEED, &k, buf, V2_INODE_LEN, NULL, 0),
			 -EUCLEAN);
	k = v2_key_free(4096, 10);
	assert_int_equal(v2_item_check(V2_TREE_FREE, SEED, &k, NULL, 0, NULL, 0), 0);
	assert_int_equal(v2_item_check(V2_TREE_REFCOUNT, SEED, &k, NULL, 0, NULL, 0), -EUCLEAN);
	k = v2_key_inode(1);
	for (unsigned i = 0; i < V2_INODE_LEN * 8; i++) {
		buf[i / 8] ^= (uint8_t)(1u << (i % 8));
		(void)v2_item_check(V2_TREE_INODES, SEED, &k, buf, V2_INODE_LEN, NULL, 0);
		buf[i / 8] ^= (uint8_t)(1u << (i % 8));
	}
	/* The ino field must match the key. */
	buf[0] ^= 2;
	assert_int_equal(v2_item_check(V2_TREE_INODES, SEED, &k, buf, V2_INODE_LEN, NULL, 0),
			 -EUCLEAN);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_inode),
		cmocka_unit_test(test_symlink),
		cmocka_unit_test(test_dirent),
		cmocka_unit_test(test_dirindex),
		cmocka_unit_test(test_xattr),
		cmocka_unit_test(test_extent),
		cmocka_unit_test(test_refcount_free),
		cmocka_unit_test(test_group_nodemap),
		cmocka_unit_test(test_item_check),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
