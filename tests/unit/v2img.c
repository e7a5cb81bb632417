// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: v2img.c: format-v2 images for the fsck tests (v2img.h). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "format_v2.h"
#include "testlib.h"
#include "le.h"
#include "v2img.h"

static char img[V2IMG_N][TL_PATH_MAX];
static const char *devs[V2IMG_N];

int v2img_setup(const char *tag)
{
	struct tfs_format_opts fo = { .force = true, .backend = "file", .v2 = true,
				      .no_short_nodes = tl_whole_nodes(), .pieces = tl_pieces() };
	char err[512] = "";

	tl_mk_images(img, devs, V2IMG_N, tag, 64ull << 20);
	if (tfs_format(devs, V2IMG_N, &fo, err, sizeof(err))) {
		fprintf(stderr, "format: %s\n", err);
		return -1;
	}
	return 0;
}

const char *const *v2img_devs(void)
{
	return devs;
}

void v2img_teardown(void)
{
	tl_rm_images(img, V2IMG_N);
}

int v2img_fsck(int mode, char **out)
{
	return tl_fsck(devs, V2IMG_N, mode, "file", out);
}

void v2img_expect_mode(int mode, int rc, const char *want)
{
	char *out;
	int got = v2img_fsck(mode, &out);

	if (got != rc || (want && !strstr(out, want))) {
		fprintf(stderr, "fsck mode %d: exit %d (want %d), \"%s\" in:\n%s", mode, got, rc,
			want ? want : "", out);
		fail();
	}
	free(out);
}

void v2img_expect(int rc, const char *want)
{
	v2img_expect_mode(FSCK_CHECK, rc, want);
}

void img_open(struct img2 *x)
{
	char err[256], why[256];
	struct fspace_params p;

	memset(x, 0, sizeof(*x));
	assert_int_equal(dev_backend_create("file", &x->be), 0);
	for (unsigned i = 0; i < V2IMG_N; i++) {
		assert_int_equal(dev_open(devs[i], false, &x->d[i], err, sizeof(err)), 0);
		assert_int_equal(dev_backend_attach(x->be, x->d[i]), 0);
	}
	assert_int_equal(super_read_dev(x->be, x->d[0], &x->sb, NULL, why, sizeof(why)), 0);
	assert_int_equal(x->sb.version, SUPER_VERSION_V2);
	assert_int_equal(mirror_init(&x->m, x->be, x->d, V2IMG_N), 0);
	assert_int_equal(bstore_mirror_init(&x->s, &x->m, x->sb.node_start,
					    x->sb.node_blocks / BNODE_BLOCKS), 0);
	super_node_format(&x->sb, &x->s.store);
	assert_int_equal(bcache_create(1u << 20, &x->c), 0);
	fspace_sb_params(&x->sb, &p);
	assert_int_equal(fspace_open(&x->s.store, x->c, x->sb.fs_uuid, &p,
				     &x->sb.roots[V2_TREE_FREE - 1], &x->fs), 0);
}

void img_close(struct img2 *x)
{
	fspace_close(x->fs);
	bcache_destroy(x->c);
	bstore_mirror_destroy(&x->s);
	dev_backend_destroy(x->be);
	for (unsigned i = 0; i < V2IMG_N; i++)
		dev_close(x->d[i]);
}

void write_supers(struct img2 *x)
{
	for (unsigned i = 0; i < V2IMG_N; i++) {
		x->sb.dev_index = i;
		memcpy(x->sb.dev_uuid, x->sb.dev_uuids[i], 16);
		assert_int_equal(super_write_dev(x->be, x->d[i], &x->sb), 0);
	}
}

/* The INODE items of @t: the superblock's inodes, as a checkpoint keeps it. */
static uint64_t count_inodes(struct btree *t)
{
	struct bkey lo = { 0, 0, 0 }, k;
	struct bt_iter it;
	const void *val;
	unsigned len;
	uint64_t n = 0;

	assert_int_equal(bt_iter_init(&it, t, &lo), 0);
	while (bt_iter_next(&it, &k, &val, &len) == 0)
		n += k.type == V2_INODE;
	bt_iter_free(&it);
	return n;
}

/* Inserts (v[i] non-NULL) and deletes, then the commit of both trees. */
static void commit_items(struct img2 *x, uint64_t owner, const struct bkey *k,
			 const void *const *v, const unsigned *len, unsigned n)
{
	uint64_t gen = x->sb.tree_gen + 1, *freed = NULL;
	size_t nfreed = 0;
	struct btree t;

	assert_int_equal(bt_open(&t, fspace_node_store(x->fs), x->c, owner, x->sb.fs_uuid,
				 &x->sb.roots[owner - 1]), 0);
	if (n) {
		assert_int_equal(bt_begin(&t, gen), 0);
		for (unsigned i = 0; i < n; i++) {
			if (v[i])
				assert_int_equal(bt_insert(&t, &k[i], v[i], len[i]), 0);
			else
				assert_int_equal(bt_delete(&t, &k[i]), 0);
		}
		if (owner == V2_TREE_INODES)
			x->sb.inodes = count_inodes(&t);
		assert_int_equal(bt_commit(&t, &x->sb.roots[owner - 1], &freed, &nfreed), 0);
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

void img_commit(struct img2 *x, const struct bkey *k, const void *const *v,
		const unsigned *len, unsigned n)
{
	commit_items(x, V2_TREE_INODES, k, v, len, n);
}

void v2b_put(struct v2batch *b, struct bkey k, const void *v, unsigned len)
{
	assert_true(b->n < V2B_MAX);
	b->k[b->n] = k;
	b->v[b->n] = malloc(len ? len : 1);
	assert_non_null(b->v[b->n]);
	memcpy(b->v[b->n], v, len);
	b->len[b->n++] = len;
}

void v2b_del(struct v2batch *b, struct bkey k)
{
	assert_true(b->n < V2B_MAX);
	b->k[b->n] = k;
	b->v[b->n] = NULL;
	b->len[b->n++] = 0;
}

void v2b_inode(struct v2batch *b, uint64_t ino, uint32_t mode, uint32_t nlink, uint64_t parent)
{
	struct log_inode in = { .ino = ino, .mode = mode, .nlink = nlink, .gen = 1,
				.parent = parent };
	uint8_t v[V2_INODE_LEN];

	assert_int_equal(v2_inode_encode(&in, v), 0);
	v2b_put(b, v2_key_inode(ino), v, sizeof(v));
	if (!nlink)	/* as a checkpoint writes it */
		v2b_put(b, v2_key_orphan(ino), "", 0);
	if (ino > b->top_ino)
		b->top_ino = ino;
}

void v2b_dirent(struct v2batch *b, uint64_t seed, uint64_t dir, const char *name, uint64_t ino,
		uint8_t dtype)
{
	struct v2_dirent e = { ino, dtype, (uint16_t)strlen(name), name };
	uint8_t v[BNODE_MAX_VAL];
	unsigned len = 0;

	assert_int_equal(v2_dirent_add(v, &len, sizeof(v), &e), 0);
	v2b_put(b, v2_key_dirent(dir, v2_hash56(seed, name, e.namelen)), v, len);
}

void v2b_dirindex(struct v2batch *b, uint64_t dir, uint64_t cookie, const char *name,
		  uint64_t ino, uint8_t dtype)
{
	struct v2_dirent e = { ino, dtype, (uint16_t)strlen(name), name };
	uint8_t v[V2_DIRENT_HDR + 256];
	unsigned len;

	assert_int_equal(v2_dirindex_encode(&e, v, sizeof(v), &len), 0);
	v2b_put(b, v2_key_dirindex(dir, cookie), v, len);
}

void v2b_extent(struct v2batch *b, uint64_t ino, uint64_t fblk, uint64_t phys, uint32_t n)
{
	struct v2_extent e = { .phys = phys, .n = n, .unwritten = true };
	uint8_t v[64];
	unsigned len;

	assert_int_equal(v2_extent_encode(fblk, &e, v, sizeof(v), &len), 0);
	v2b_put(b, v2_key_extent(ino, fblk), v, len);
	/* Its inode's INODE item in this batch counts the blocks. */
	for (unsigned i = b->n; i-- > 0;) {
		struct bkey ik = v2_key_inode(ino);

		if (bkey_cmp(&b->k[i], &ik) == 0 && b->v[i]) {
			uint8_t *m = b->v[i] + LOG_INODE_BODY;

			le64_put(m, le64_get(m) + n);
			break;
		}
	}
}

void v2b_commit(struct img2 *x, struct v2batch *b)
{
	v2b_commit_tree(x, V2_TREE_INODES, b);
}

void v2b_commit_tree(struct img2 *x, uint64_t owner, struct v2batch *b)
{
	if (b->top_ino >= x->sb.next_ino)
		x->sb.next_ino = b->top_ino + 1;
	commit_items(x, owner, b->k, (const void *const *)b->v, b->len, b->n);
	for (unsigned i = 0; i < b->n; i++)
		free(b->v[i]);
	memset(b, 0, sizeof(*b));
}
