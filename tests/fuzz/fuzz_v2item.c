// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: fuzz the format-v2 item decoders (v2item.c): the input is a
 * tree id, a key and a value; whatever v2_item_check accepts decodes with
 * every accessor inside the value and re-encodes to the same bytes (one
 * encoding per item); a list accepts add/delete of its own entries back to
 * the same bytes; never a crash. */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "le.h"
#include "v2item.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SEED 0x5eedull
#define IN_HDR 17u		/* owner u8, key id u64, type u8, off u56 (7 bytes) */

static uint8_t val[BNODE_MAX_VAL], again[BNODE_MAX_VAL + 64];

static void check_inode(const struct bkey *k, unsigned len)
{
	struct log_inode in;

	assert(v2_inode_decode(k, val, len, &in) == 0);
	assert(v2_inode_encode(&in, again) == 0);
	assert(memcmp(again, val, len) == 0);
}

static void check_dirent_list(unsigned len)
{
	struct v2_dirent e, f;
	unsigned pos = 0, l2 = 0, n = 0;

	/* Rebuilt from its entries in reverse order: the same bytes. */
	while (v2_dirent_next(val, len, &pos, &e) == 1) {
		assert(e.name >= (const char *)val && e.name + e.namelen <= (const char *)val + len);
		assert(v2_dirent_add(again, &l2, sizeof(again), &e) == 0);
		assert(v2_dirent_find(val, len, e.name, e.namelen, &f) == 0 && f.ino == e.ino);
		n++;
	}
	assert(n >= 1 && l2 == len && memcmp(again, val, len) == 0);
	pos = 0;
	assert(v2_dirent_next(val, len, &pos, &e) == 1);
	assert(v2_dirent_del(again, &l2, e.name, e.namelen) == 0 && l2 == len - pos);
}

static void check_xattr_list(unsigned len)
{
	struct v2_xattr x;
	unsigned pos = 0, l2 = 0;

	while (v2_xattr_next(val, len, &pos, &x) == 1) {
		assert(x.vallen <= LOG_XATTR_VAL_MAX);
		if (x.val)
			assert((const uint8_t *)x.val + x.vallen <= val + len);
		assert(v2_xattr_add(again, &l2, sizeof(again), &x) == 0);
	}
	assert(l2 == len && memcmp(again, val, len) == 0);
}

static void check_extent(const struct bkey *k, unsigned len)
{
	uint64_t csums[V2_EXT_MAX_BLOCKS];
	struct v2_extent e;
	unsigned l2;

	assert(v2_extent_decode(k, val, len, &e) == 0);
	assert(k->off + e.n <= V2_FBLK_LIMIT && e.phys + e.n <= V2_PHYS_LIMIT);
	if (!e.unwritten) {
		assert(e.n <= V2_EXT_MAX_BLOCKS);
		for (unsigned i = 0; i < e.n; i++)
			csums[i] = v2_extent_csum(&e, i);
		e.csums = csums;
	}
	assert(v2_extent_encode(k->off, &e, again, sizeof(again), &l2) == 0);
	assert(l2 == len && memcmp(again, val, len) == 0);
}

static void check_accepted(const struct bkey *k, unsigned len)
{
	struct v2_dirent d;
	uint32_t n, refs;
	uint64_t f, mr, ne;

	switch (k->type) {
	case V2_INODE:
		check_inode(k, len);
		break;
	case V2_DIRENT:
		check_dirent_list(len);
		break;
	case V2_DIRINDEX: {
		unsigned l2;

		assert(v2_dirindex_decode(k, val, len, &d) == 0);
		assert(v2_dirindex_encode(&d, again, sizeof(again), &l2) == 0);
		assert(l2 == len && memcmp(again, val, len) == 0);
		break;
	}
	case V2_XATTR:
		check_xattr_list(len);
		break;
	case V2_EXTENT:
		check_extent(k, len);
		break;
	case V2_REFCOUNT:
		assert(v2_refcount_decode(k, val, len, &n, &refs) == 0);
		assert(v2_refcount_encode(k->id, n, refs, again) == 0);
		assert(memcmp(again, val, len) == 0);
		break;
	case V2_GROUP:
		/* the summary's invariants fspace relies on */
		assert(v2_group_decode(k, val, len, &f, &mr, &ne) == 0);
		assert(!k->id && mr <= f && (f == 0) == (ne == 0) && ne <= f);
		break;
	case V2_NODEMAP:
		assert(!k->id && len == V2_NODEMAP_LEN);
		break;
	default:
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct bkey k;
	uint64_t owner, tail;
	unsigned len;

	if (size < IN_HDR)
		return 0;
	owner = 1 + data[0] % V2_NTREES;
	k.id = le64_get(data + 1);
	k.type = data[9];
	tail = le64_get(data + 9) >> 8;	/* bytes 10..16 */
	k.off = tail & BKEY_OFF_MAX;
	len = (unsigned)(size - IN_HDR < sizeof(val) ? size - IN_HDR : sizeof(val));
	memcpy(val, data + IN_HDR, len);
	/* DIRENT and XATTR keys carry the name hash: take the first name's
	 * when the input asks for it (off all ones), or nothing would ever
	 * get past the hash. */
	if (k.off == BKEY_OFF_MAX && len >= V2_XATTR_HDR) {
		unsigned nl = k.type == V2_DIRENT ? (unsigned)(val[9] | val[10] << 8)
						  : (unsigned)(val[0] | val[1] << 8);
		unsigned hdr = k.type == V2_DIRENT ? V2_DIRENT_HDR : V2_XATTR_HDR;

		if ((k.type == V2_DIRENT || k.type == V2_XATTR) && hdr + nl <= len)
			k.off = v2_hash56(SEED, (const char *)val + hdr, nl);
	}
	if (v2_item_check(owner, SEED, &k, val, len, NULL, 0) == 0)
		check_accepted(&k, len);
	return 0;
}

static void emit_item(void (*emit)(const void *p, size_t len), uint8_t owner,
		      const struct bkey *k, const void *v, unsigned len, int hashed)
{
	static uint8_t in[IN_HDR + BNODE_MAX_VAL];
	uint64_t off = hashed ? BKEY_OFF_MAX : k->off;

	in[0] = (uint8_t)(owner - 1);
	le64_put(in + 1, k->id);
	in[9] = k->type;
	for (unsigned i = 0; i < 7; i++)
		in[10 + i] = (uint8_t)(off >> (8 * i));
	memcpy(in + IN_HDR, v, len);
	emit(in, IN_HDR + len);
}

void fuzz_make_seeds(void (*emit)(const void *p, size_t len));
void fuzz_make_seeds(void (*emit)(const void *p, size_t len))
{
	static uint8_t v[BNODE_MAX_VAL];
	static const uint64_t csums[4] = { 1, 2, 3, 0xffffffffffffffffull };
	struct log_inode in = { .ino = 1, .parent = 1, .mode = 040755, .nlink = 2, .gen = 1 };
	struct v2_dirent d = { 2, 8, 4, "file" };
	struct v2_xattr x = { 10, 3, 0, "user.attr1", "abc" };
	struct v2_extent e = { 5000, 4, false, csums };
	struct bkey k;
	unsigned len = 0;

	k = v2_key_inode(1);
	v2_inode_encode(&in, v);
	emit_item(emit, V2_TREE_INODES, &k, v, V2_INODE_LEN, 0);
	k = v2_key_dirent(1, 0);
	v2_dirent_add(v, &len, sizeof(v), &d);
	emit_item(emit, V2_TREE_INODES, &k, v, len, 1);
	k = v2_key_dirindex(1, V2_COOKIE_FIRST);
	v2_dirindex_encode(&d, v, sizeof(v), &len);
	emit_item(emit, V2_TREE_INODES, &k, v, len, 0);
	len = 0;
	k = v2_key_xattr(1, 0);
	v2_xattr_add(v, &len, sizeof(v), &x);
	emit_item(emit, V2_TREE_INODES, &k, v, len, 1);
	k = v2_key_extent(1, 16);
	v2_extent_encode(16, &e, v, sizeof(v), &len);
	emit_item(emit, V2_TREE_INODES, &k, v, len, 0);
	e.unwritten = true;
	v2_extent_encode(16, &e, v, sizeof(v), &len);
	emit_item(emit, V2_TREE_INODES, &k, v, len, 0);
	k = v2_key_refcount(5000);
	v2_refcount_encode(5000, 4, 3, v);
	emit_item(emit, V2_TREE_REFCOUNT, &k, v, V2_REFCOUNT_LEN, 0);
	k = v2_key_free(8192, 100);
	emit_item(emit, V2_TREE_FREE, &k, v, 0, 0);
	k = (struct bkey){ 0, V2_GROUP, 2 };
	le64_put(v, 100);
	le64_put(v + 8, 60);
	le64_put(v + 16, 3);
	emit_item(emit, V2_TREE_FREE, &k, v, V2_GROUP_LEN, 0);
	k = (struct bkey){ 0, V2_NODEMAP, 1 };
	memset(v, 0, V2_NODEMAP_LEN);
	v[0] = 0x0f;
	emit_item(emit, V2_TREE_FREE, &k, v, V2_NODEMAP_LEN, 0);
	k = v2_key_symlink(3, 1);
	memset(v, 'l', 100);
	emit_item(emit, V2_TREE_INODES, &k, v, 100, 0);
	k = v2_key_xchunk(3, 7, 2);
	emit_item(emit, V2_TREE_INODES, &k, v, 100, 0);
}
