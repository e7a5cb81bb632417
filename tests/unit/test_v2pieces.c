// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: reading leaf pieces (format v2, SUPER_INCOMPAT_V2_PIECES; step 2b-1 of docs/design-leaf-pieces.md): on an image made with -O pieces, the inode tree's root leaf is replaced on both mirrors by a chain made by hand, the older leaf as its base and three pieces (bpiece_encode) that turn it into the newer one (a file's items removed by whiteouts, a file added, an INODE item changed, and one item set by piece 1 and set again by piece 3), the root pointer patched to its nblocks, gen and csum.  A fresh store reads exactly the newer leaf, merged (chain: 3 pieces), a fresh tree finds the new items and not the removed ones, and fsck -n is clean; the last piece rotten on one mirror: the read takes the other and rewrites it (that mirror's copy verifies alone afterwards, csum_err and repaired counted once), fsck -n reports it on the other mirror and -y rewrites it, and rewrites it on a device recorded stale from the other's chain, scrub too (a mounted walk of every node); a mount reads the files the chain names and its checkpoint writes the leaf back as a base (pointer nblocks = its nb), fsck clean; both mirrors' last piece rotten: the read fails with EIO, never other bytes. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>
#include <cmocka.h>

#include "bpiece.h"
#include "format_v2.h"
#include "le.h"
#include "scrub.h"
#include "testlib.h"
#include "v2img.h"

#define MAXK 64

/* The leaves before (l0) and after (l1) the second batch, and the chain. */
static uint8_t l0[BNODE_SIZE], l1[BNODE_SIZE];
static uint8_t chain[BPTR_MAX_NBLOCKS * BNODE_BLOCK] __attribute__((aligned(4096)));
static struct bptr cp;			/* the pointer naming the chain */
static struct bkey gone[3];		/* file "x"'s items, removed by whiteouts */

static int setup(void **state)
{
	(void)state;
	setenv("TFS_TEST_PIECES", "1", 1);	/* v2img_setup formats with -O pieces */
	return v2img_setup("v2pieces");
}

static int teardown(void **state)
{
	(void)state;
	v2img_teardown();
	return 0;
}

/* The inode tree's root (a leaf here) through a fresh store: 0 or -errno. */
static int read_root(void *buf, struct bpiece_chain *c)
{
	struct img2 x;
	int ret;

	img_open(&x);
	assert_true(x.s.store.pieces);
	assert_int_equal(x.sb.roots[V2_TREE_INODES - 1].level, 0);
	ret = x.s.store.ops->read(x.s.store.ctx, &x.sb.roots[V2_TREE_INODES - 1].ptr, buf, c);
	img_close(&x);
	return ret;
}

static void file(struct v2batch *b, uint64_t seed, uint64_t ino, const char *name, uint32_t mode)
{
	v2b_inode(b, ino, S_IFREG | mode, 1, 0);
	v2b_dirent(b, seed, 1, name, ino, DT_REG);
	v2b_dirindex(b, 1, ino, name, ino, DT_REG);
}

/* l0: / with "f" (3), "g" (4), "x" (5); l1: "x" removed, "h" (6) added,
 * f's mode changed. */
static void two_states(void)
{
	struct v2batch b = { 0 };
	struct bpiece_chain c;
	struct img2 x;
	unsigned at;

	img_open(&x);
	v2b_inode(&b, 1, S_IFDIR | 0755, 2, 1);
	file(&b, x.sb.hash_seed, 3, "f", 0644);
	file(&b, x.sb.hash_seed, 4, "g", 0644);
	at = b.n;
	file(&b, x.sb.hash_seed, 5, "x", 0644);
	memcpy(gone, &b.k[at], sizeof(gone));
	v2b_commit(&x, &b);
	assert_int_equal(read_root(l0, &c), 0);
	assert_int_equal(c.npieces, 0);

	img_open(&x);
	for (unsigned i = 0; i < 3; i++)
		v2b_del(&b, gone[i]);
	v2b_inode(&b, 3, S_IFREG | 0600, 1, 0);
	file(&b, x.sb.hash_seed, 6, "h", 0644);
	v2b_commit(&x, &b);
	v2img_expect(FSCK_EXIT_OK, "0 errors");
	assert_int_equal(read_root(l1, &c), 0);
}

static bool same_item(const void *a, unsigned i, const void *b, unsigned j)
{
	struct bkey ka, kb;
	unsigned la, lb;
	const void *va = bnode_val(a, i, &la), *vb = bnode_val(b, j, &lb);

	bnode_key(a, i, &ka);
	bnode_key(b, j, &kb);
	return !bkey_cmp(&ka, &kb) && la == lb && !memcmp(va, vb, la);
}

/* The keys whose items differ between leaves a and b, ascending. */
static unsigned diff_keys(const void *a, const void *b, struct bkey *out)
{
	unsigned i = 0, j = 0, n = 0, na = bnode_nritems(a), nb = bnode_nritems(b);

	while (i < na || j < nb) {
		struct bkey ka = bkey_max, kb = bkey_max;
		int c;

		if (i < na)
			bnode_key(a, i, &ka);
		if (j < nb)
			bnode_key(b, j, &kb);
		c = i == na ? 1 : j == nb ? -1 : bkey_cmp(&ka, &kb);
		assert_true(n < MAXK);
		if (c < 0)
			out[n++] = ka;
		else if (c > 0)
			out[n++] = kb;
		else if (!same_item(a, i, b, j))
			out[n++] = ka;
		i += c <= 0;
		j += c >= 0;
	}
	return n;
}

static void assert_same_leaf(const void *a, const void *b)
{
	assert_int_equal(bnode_nritems(a), bnode_nritems(b));
	for (unsigned i = 0; i < bnode_nritems(a); i++)
		assert_true(same_item(a, i, b, i));
}

/* l0 as the base at l1's address and generation g, then three pieces to
 * l1 (gens g + 1 .. g + 3); f's INODE item set to junk by piece 1 and
 * right by piece 3.  Into chain and cp. */
static void make_chain(uint64_t addr, uint64_t g)
{
	static uint8_t base[BNODE_SIZE], mid[BNODE_SIZE];
	struct bkey d[MAXK], grp[3][MAXK + 1], fk = v2_key_inode(3);
	unsigned nd, ng[3] = { 0 }, off, idx, len;
	uint64_t prev;
	uint8_t *v;

	memcpy(base, l0, BNODE_SIZE);
	bnode_set_addr_gen(base, addr, g);
	prev = bnode_seal_short(base);
	memset(chain, 0, sizeof(chain));
	off = bnode_fold(base, chain);
	assert_int_equal(off, 1);
	nd = diff_keys(l0, l1, d);
	assert_int_equal(nd, 7);	/* x: 3 whiteouts, h: 3 items, f's INODE */
	for (unsigned i = 0; i < nd; i++) {
		bool f = !bkey_cmp(&d[i], &fk);

		if (f || i % 3 == 0)
			grp[0][ng[0]++] = d[i];
		if (f)
			grp[2][ng[2]++] = d[i];
		else if (i % 3)
			grp[i % 3][ng[i % 3]++] = d[i];
	}
	/* Piece 1 takes f's INODE item from mid, where it is junk. */
	memcpy(mid, l1, BNODE_SIZE);
	assert_true(bnode_search(mid, &fk, &idx));
	v = (uint8_t *)bnode_val(mid, idx, &len);
	for (unsigned i = 0; i < len; i++)
		v[i] ^= 0x5a;
	for (unsigned k = 1; k <= 3; k++) {
		int pb = bpiece_encode(chain + off * BNODE_BLOCK, (BPTR_MAX_NBLOCKS - off) * BNODE_BLOCK,
				       k == 1 ? mid : l1, grp[k - 1], ng[k - 1], addr, g, g + k, k,
				       prev);

		assert_true(pb >= 1);
		prev = le64_get(chain + off * BNODE_BLOCK);
		off += (unsigned)pb;
	}
	/* The extent is still one slot: the chain fits it. */
	assert_true(off <= BNODE_BLOCKS);
	cp = (struct bptr){ addr, g + 3, prev, off };
}

/* The chain on both mirrors and the superblock naming it. */
static void write_chain(void)
{
	struct broot *r;
	struct img2 x;

	img_open(&x);
	r = &x.sb.roots[V2_TREE_INODES - 1];
	make_chain(r->ptr.addr, r->ptr.gen);
	assert_int_equal(mirror_write(&x.m, cp.addr, chain, cp.nblocks), 0);
	assert_int_equal(mirror_flush(&x.m), 0);
	r->ptr = cp;
	x.sb.tree_gen = cp.gen;
	x.sb.generation++;
	write_supers(&x);
	img_close(&x);
}

static void test_merged_read(void **state)
{
	static uint8_t got[BNODE_SIZE] __attribute__((aligned(4096)));
	struct bpiece_chain c;
	struct bkey k6 = v2_key_inode(6);
	struct img2 x;
	struct btree t;
	uint8_t val[256];
	unsigned len;

	(void)state;
	two_states();
	write_chain();
	assert_int_equal(read_root(got, &c), 0);
	assert_same_leaf(got, l1);
	assert_int_equal(c.npieces, 3);
	assert_int_equal(c.nb0, 1);
	assert_true(c.gen == cp.gen && c.csum == cp.csum);
	/* Through a fresh tree: the new items, no whiteout's key. */
	img_open(&x);
	assert_int_equal(bt_open(&t, &x.s.store, x.c, V2_TREE_INODES, x.sb.fs_uuid,
				 &x.sb.roots[V2_TREE_INODES - 1]), 0);
	for (unsigned i = 0; i < 3; i++)
		assert_int_equal(bt_lookup(&t, &gone[i], val, sizeof(val), &len), -ENOENT);
	assert_int_equal(bt_lookup(&t, &k6, val, sizeof(val), &len),
			 0);
	assert_int_equal(bt_verify(&t, NULL, NULL), 0);
	bt_close(&t);
	img_close(&x);
	v2img_expect(FSCK_EXIT_OK, "0 errors");
}

/* Flip a byte of the chain's last block on device @d. */
static void rot_last(struct img2 *x, unsigned d)
{
	uint64_t at = (cp.addr + cp.nblocks - 1) * BNODE_BLOCK + 2000;
	uint8_t b[4096] __attribute__((aligned(4096)));

	assert_int_equal(dev_pread(x->be, x->d[d], b, sizeof(b), at - 2000), 0);
	b[2000] ^= 0x40;
	assert_int_equal(dev_pwrite(x->be, x->d[d], b, sizeof(b), at - 2000), 0);
}

/* The same through the image file, beside a mount that has it open. */
static void rot_file(const char *path)
{
	uint64_t at = (cp.addr + cp.nblocks - 1) * BNODE_BLOCK + 2000;
	int fd = open(path, O_RDWR);
	uint8_t c;

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &c, 1, (off_t)at), 1);
	c ^= 0x40;
	assert_int_equal(pwrite(fd, &c, 1, (off_t)at), 1);
	assert_int_equal(fdatasync(fd), 0);
	close(fd);
}

static void test_one_mirror_repaired(void **state)
{
	static uint8_t got[BNODE_SIZE] __attribute__((aligned(4096)));
	static uint8_t raw[BPTR_MAX_NBLOCKS * BNODE_BLOCK] __attribute__((aligned(4096)));
	struct img2 x;

	(void)state;
	img_open(&x);
	rot_last(&x, 0);
	assert_int_equal(dev_pread(x.be, x.d[0], raw, cp.nblocks * BNODE_BLOCK,
				   cp.addr * BNODE_BLOCK), 0);
	assert_int_not_equal(bpiece_verify_chain(raw, cp.nblocks, &cp), 0);
	atomic_store(&x.m.rr, 0);	/* the first read goes to device 0 */
	assert_int_equal(x.s.store.ops->read(x.s.store.ctx, &cp, got, NULL), 0);
	assert_same_leaf(got, l1);
	assert_int_equal(atomic_load(&x.m.ctr[0].csum_err), 1);
	assert_int_equal(atomic_load(&x.m.ctr[0].repaired), 1);
	assert_int_equal(atomic_load(&x.m.ctr[1].csum_err), 0);
	/* Device 0's copy alone verifies now: exactly the chain's blocks. */
	assert_int_equal(dev_pread(x.be, x.d[0], raw, cp.nblocks * BNODE_BLOCK,
				   cp.addr * BNODE_BLOCK), 0);
	assert_int_equal(bpiece_verify_chain(raw, cp.nblocks, &cp), 0);
	assert_memory_equal(raw, chain, cp.nblocks * BNODE_BLOCK);
	img_close(&x);
	/* fsck -n reports a bad copy (not repaired), -y repairs it. */
	img_open(&x);
	rot_last(&x, 1);
	img_close(&x);
	v2img_expect(FSCK_EXIT_UNCORRECTED, NULL);
	v2img_expect_mode(FSCK_REPAIR, FSCK_EXIT_FIXED, NULL);
	v2img_expect(FSCK_EXIT_OK, "0 errors");
}

/* fsck brings a stale device up to date (fsck_v2_stale.c): device 1's copy
 * of the chain, rotten while it was recorded stale, is rewritten with the
 * chain as device 0 holds it (bstore_mirror_raw), exactly its nblocks. */
static void test_stale_device(void **state)
{
	static uint8_t raw[BPTR_MAX_NBLOCKS * BNODE_BLOCK] __attribute__((aligned(4096)));
	struct img2 x;

	(void)state;
	img_open(&x);
	rot_last(&x, 1);
	/* Only device 0's superblock, newer, records device 1 stale. */
	x.sb.generation++;
	x.sb.dev_state[1] = 1;
	x.sb.dev_index = 0;
	memcpy(x.sb.dev_uuid, x.sb.dev_uuids[0], 16);
	assert_int_equal(super_write_dev(x.be, x.d[0], &x.sb), 0);
	img_close(&x);
	v2img_expect(FSCK_EXIT_UNCORRECTED, "stale");
	v2img_expect_mode(FSCK_REPAIR, FSCK_EXIT_FIXED, "bringing every block up to date");
	v2img_expect(FSCK_EXIT_OK, "0 errors");
	img_open(&x);
	assert_int_equal(x.sb.dev_state[1], 0);
	assert_int_equal(dev_pread(x.be, x.d[1], raw, cp.nblocks * BNODE_BLOCK,
				   cp.addr * BNODE_BLOCK), 0);
	assert_memory_equal(raw, chain, cp.nblocks * BNODE_BLOCK);
	img_close(&x);
}

/* Scrub (v2nodes.c) reads the chain's nblocks on both mirrors and rewrites
 * the copy whose last piece rotted from the other. */
static void test_scrub_repairs(void **state)
{
	static uint8_t raw[BPTR_MAX_NBLOCKS * BNODE_BLOCK] __attribute__((aligned(4096)));
	struct scrub_status st;
	struct tfs_opts o;
	struct tfs *fs;
	int fd;

	(void)state;
	tl_mount_opts(&o, v2img_devs(), V2IMG_N);
	fs = tl_mount(&o);
	/* After the mount read the leaf (a read of a bad copy repairs it). */
	rot_file(v2img_devs()[1]);
	assert_int_equal(scrub_start(fs, 0), 0);
	assert_int_equal(scrub_wait(fs), 0);
	assert_int_equal(scrub_get_status(fs, &st), 0);
	assert_int_equal(st.state, SCRUB_FINISHED);
	/* In blocks, a node counting BNODE_BLOCKS (scrub.c). */
	assert_int_equal(st.csum_err, BNODE_BLOCKS);
	assert_int_equal(st.repaired, BNODE_BLOCKS);
	assert_int_equal(st.unrecoverable, 0);
	/* Device 1's copy as on disk (the mount has the images open). */
	fd = open(v2img_devs()[1], O_RDONLY | O_DIRECT);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, raw, cp.nblocks * BNODE_BLOCK, (off_t)cp.addr * BNODE_BLOCK),
			 (ssize_t)(cp.nblocks * BNODE_BLOCK));
	close(fd);
	assert_memory_equal(raw, chain, cp.nblocks * BNODE_BLOCK);
	assert_int_equal(tfs_unmount(fs), 0);
}

/* A mount reads the files the chain names; its checkpoint writes the
 * leaf anew as a base whose pointer says its nb. */
static void test_mount_writes_base(void **state)
{
	static uint8_t got[BNODE_SIZE] __attribute__((aligned(4096)));
	const struct tfs_cred cr = { 0, 0, 0 };
	struct bpiece_chain c;
	struct tfs_opts o;
	struct stat st;
	struct tfs *fs;
	struct img2 x;

	(void)state;
	tl_mount_opts(&o, v2img_devs(), V2IMG_N);
	fs = tl_mount(&o);
	assert_int_equal(tfs_lookup(fs, 1, "h", &st), 0);
	assert_int_equal(st.st_ino, 6);
	assert_int_equal(tfs_lookup(fs, 1, "x", &st), -ENOENT);
	assert_int_equal(tfs_lookup(fs, 1, "f", &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(tfs_mknod(fs, 1, "n", S_IFREG | 0644, 0, &cr, &st), 0);
	assert_int_equal(tfs_unmount(fs), 0);
	v2img_expect(FSCK_EXIT_OK, "0 errors");
	assert_int_equal(read_root(got, &c), 0);
	assert_int_equal(c.npieces, 0);
	img_open(&x);
	assert_int_equal(x.sb.roots[V2_TREE_INODES - 1].ptr.nblocks, bnode_nb(got));
	assert_int_equal(c.nb0, bnode_nb(got));
	img_close(&x);
}

static void test_both_bad(void **state)
{
	static uint8_t got[BNODE_SIZE] __attribute__((aligned(4096)));
	struct img2 x;

	(void)state;
	write_chain();	/* l0 -> l1 again, at the current root */
	img_open(&x);
	rot_last(&x, 0);
	rot_last(&x, 1);
	memset(got, 0xee, sizeof(got));
	assert_int_equal(x.s.store.ops->read(x.s.store.ctx, &cp, got, NULL), -EIO);
	assert_int_equal(atomic_load(&x.m.ctr[0].unrecoverable) +
			 atomic_load(&x.m.ctr[1].unrecoverable), 1);
	img_close(&x);
	v2img_expect(FSCK_EXIT_UNCORRECTED, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_merged_read),
		cmocka_unit_test(test_one_mirror_repaired),
		cmocka_unit_test(test_stale_device),
		cmocka_unit_test(test_scrub_repairs),
		cmocka_unit_test(test_mount_writes_base),
		cmocka_unit_test(test_both_bad),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
