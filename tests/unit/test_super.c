// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: superblock codec (round trip, per-slot seeds, checksum, magic,
 * version/feature refusal, geometry checks), layout, foreign probe, and
 * reading the newest valid slot of a device image. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "csum.h"
#include "dev.h"
#include "le.h"
#include "super.h"

/* A superblock with every field set to a distinct value. */
static void fill(struct super *sb)
{
	memset(sb, 0, sizeof(*sb));
	super_layout(sb, 1u << 20);
	sb->compat = 0x5a5a;
	for (int i = 0; i < 16; i++) {
		sb->fs_uuid[i] = (uint8_t)(0x10 + i);
		sb->dev_uuid[i] = (uint8_t)(0x30 + i);
	}
	sb->ndevs = 3;
	sb->dev_index = 2;
	for (int d = 0; d < DEV_MAX; d++)
		for (int i = 0; i < 16; i++)
			sb->dev_uuids[d][i] = (uint8_t)(d * 16 + i + 1);
	strcpy(sb->label, "a label that is long enough to matter, but < 64");
	sb->generation = 0x123456789aull;
	sb->state = SUPER_CLEAN;
	sb->ckpt_start = sb->data_start + 100;
	sb->ckpt_blocks = 9;
	sb->ckpt_bytes = 8 * 4096 - 17;
	sb->ckpt_table_csum = 0xfeedfacecafebeefull;
	sb->ckpt_seq = 777;
	sb->log_head_pos = sb->log_blocks - 1;
	sb->log_head_seq = 778;
	sb->log_id = 0xabcdef0123ull;
	sb->next_ino = 4242;
	sb->ctime_ns = 1700000000123456789ull;
	for (int d = 0; d < DEV_MAX; d++) {
		sb->dev_state[d] = d & 1;
		sb->stats[d].read_err = 1000 + d;
		sb->stats[d].write_err = 2000 + d;
		sb->stats[d].flush_err = 3000 + d;
		sb->stats[d].csum_err = 4000 + d;
		sb->stats[d].repaired = 5000 + d;
		sb->stats[d].unrecoverable = 6000 + d;
	}
}

static void test_round_trip(void **state)
{
	struct super a, b;
	uint8_t buf[4096];
	char why[128];

	fill(&a);
	for (unsigned slot = 0; slot < 2; slot++) {
		super_encode(&a, slot, buf);
		assert_int_equal(super_decode(buf, slot, &b, why, sizeof(why)), 0);
		assert_memory_equal(&a, &b, sizeof(a));
	}
	/* documented offsets: magic at 0, version at 8, generation at 296,
	 * csum at 4088 over [0, 4088) */
	assert_memory_equal(buf, SUPER_MAGIC, 8);
	assert_int_equal(buf[8], SUPER_VERSION);
	assert_int_equal(buf[296], 0x9a);
	assert_int_equal(buf[300], 0x12);
	uint64_t c = 0;
	for (int i = 7; i >= 0; i--)
		c = c << 8 | buf[4088 + i];
	assert_true(c == csum_buf(buf, 4088, 0x7477696e66730000ull + 1));
}

static void test_slot_seed(void **state)
{
	struct super a, b;
	uint8_t buf[4096];
	char why[128];

	fill(&a);
	super_encode(&a, 0, buf);
	assert_int_equal(super_decode(buf, 1, &b, why, sizeof(why)), -EUCLEAN);
	super_encode(&a, 1, buf);
	assert_int_equal(super_decode(buf, 0, &b, why, sizeof(why)), -EUCLEAN);
	assert_int_equal(super_decode(buf, 1, &b, why, sizeof(why)), 0);
}

static void test_bitflip_and_magic(void **state)
{
	struct super a, b;
	uint8_t buf[4096];
	char why[128];
	const size_t offs[] = { 8, 100, 296, 800, 4000, 4090 };

	fill(&a);
	for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
		super_encode(&a, 0, buf);
		buf[offs[i]] ^= 0x04;
		assert_int_equal(super_decode(buf, 0, &b, why, sizeof(why)), -EUCLEAN);
		assert_non_null(strstr(why, "checksum"));
	}
	super_encode(&a, 0, buf);
	buf[3] ^= 1;
	assert_int_equal(super_decode(buf, 0, &b, why, sizeof(why)), -ENOENT);
	memset(buf, 0, sizeof(buf));
	assert_int_equal(super_decode(buf, 0, &b, why, sizeof(why)), -ENOENT);
}

static void test_version_features(void **state)
{
	struct super a, b;
	uint8_t buf[4096];
	char why[128];

	fill(&a);
	a.version = 3;
	super_encode(&a, 0, buf);
	assert_int_equal(super_decode(buf, 0, &b, why, sizeof(why)), -EPROTONOSUPPORT);
	assert_string_equal(why, "unsupported format version 3 (this twinfs supports 1 and 2)");

	fill(&a);
	a.incompat = 0x40;
	super_encode(&a, 0, buf);
	assert_int_equal(super_decode(buf, 0, &b, why, sizeof(why)), -EPROTONOSUPPORT);
	assert_string_equal(why, "unknown incompat features 0x40");

	fill(&a);
	a.ro_compat = 0x3;
	super_encode(&a, 0, buf);
	assert_int_equal(super_decode(buf, 0, &b, why, sizeof(why)), -EPROTONOSUPPORT);
	assert_non_null(strstr(why, "ro_compat"));

	/* compat bits are fine */
	fill(&a);
	a.compat = 0xffffffffu;
	super_encode(&a, 0, buf);
	assert_int_equal(super_decode(buf, 0, &b, why, sizeof(why)), 0);
}

static void expect_geom(const struct super *a)
{
	struct super b;
	uint8_t buf[4096];
	char why[128];

	super_encode(a, 0, buf);
	assert_int_equal(super_decode(buf, 0, &b, why, sizeof(why)), -EUCLEAN);
	assert_non_null(strstr(why, "inconsistent geometry: "));
}

static void test_geometry(void **state)
{
	struct super a;

	fill(&a); a.block_size = 8192; expect_geom(&a);
	fill(&a); a.ndevs = 0; a.dev_index = 0; expect_geom(&a);
	fill(&a); a.ndevs = DEV_MAX + 1; expect_geom(&a);
	fill(&a); a.dev_index = a.ndevs; expect_geom(&a);
	fill(&a); a.log_start = 1; expect_geom(&a);
	fill(&a); a.log_blocks = 0; expect_geom(&a);
	fill(&a); a.data_start = a.log_start + a.log_blocks - 1; expect_geom(&a);
	fill(&a); a.data_start = a.total_blocks; expect_geom(&a);
	fill(&a); a.log_blocks = UINT64_MAX - 8; expect_geom(&a);
	fill(&a); a.ckpt_start = a.data_start - 1; expect_geom(&a);
	fill(&a); a.ckpt_start = a.total_blocks - 8; expect_geom(&a);
	fill(&a); a.ckpt_blocks = UINT64_MAX; expect_geom(&a);
	fill(&a); a.ckpt_bytes = 9 * 4096 + 1; expect_geom(&a);
	fill(&a); a.log_head_pos = a.log_blocks; expect_geom(&a);
	/* the edges themselves are fine */
	struct super b;
	uint8_t buf[4096];
	fill(&a);
	a.ckpt_start = a.total_blocks - 9;
	a.ckpt_bytes = 9 * 4096;
	a.dev_index = 0;
	a.ndevs = DEV_MAX;
	super_encode(&a, 0, buf);
	assert_int_equal(super_decode(buf, 0, &b, NULL, 0), 0);
	fill(&a);
	a.ckpt_blocks = a.ckpt_bytes = a.ckpt_start = 0;	/* no checkpoint yet */
	super_encode(&a, 0, buf);
	assert_int_equal(super_decode(buf, 0, &b, NULL, 0), 0);
}

/* A version 2 superblock: trees in place of the checkpoint. */
static void fill_v2(struct super *sb)
{
	fill(sb);
	sb->version = SUPER_VERSION_V2;
	sb->incompat = SUPER_INCOMPAT_V2_MAPPED;
	sb->ckpt_start = sb->ckpt_blocks = sb->ckpt_bytes = sb->ckpt_table_csum = 0;
	sb->tree_gen = 41;
	sb->hash_seed = 0x0123456789abcdefull;
	sb->node_start = sb->data_start;
	sb->node_blocks = 4096;
	sb->free_blocks = sb->total_blocks - sb->data_start - sb->node_blocks;
	sb->gblocks = 4096;
	sb->node_reserve = 16;
	for (unsigned i = 0; i < SUPER_V2_TREES; i++) {
		sb->roots[i].ptr.addr = sb->node_start + 4 * (i + 1);
		sb->roots[i].ptr.gen = 40 + i % 2;
		sb->roots[i].ptr.csum = 0x1111 * (i + 1);
		sb->roots[i].level = i;
	}
}

static void test_v2(void **state)
{
	struct super a, b;
	uint8_t buf[4096], raw[4096];
	char why[128];

	(void)state;
	fill_v2(&a);
	super_encode(&a, 1, buf);
	assert_int_equal(super_decode(buf, 1, &b, why, sizeof(why)), 0);
	assert_int_equal(b.version, 2);
	assert_memory_equal(&a, &b, sizeof(a));
	assert_true(le64_get(buf + 952) == 41 && le64_get(buf + 968) == a.data_start);
	assert_true(le64_get(buf + 992 + 32) == a.node_start + 8 && buf[992 + 64 + 24] == 2);
	assert_true(le64_get(buf + 1248) == 4096 && le64_get(buf + 1256) == 16);
	assert_int_equal(le32_get(buf + 20), SUPER_INCOMPAT_V2_MAPPED);
	/* version 2 of before the mapped count in INODE items: one line */
	a.incompat = 0;
	super_encode(&a, 1, buf);
	assert_int_equal(super_decode(buf, 1, &b, why, sizeof(why)), -EPROTONOSUPPORT);
	assert_non_null(strstr(why, "older experimental twinfs"));
	/* the feature is version 2's: unknown to version 1 */
	a.incompat = SUPER_INCOMPAT_V2_MAPPED;
	a.version = SUPER_VERSION;
	a.ckpt_blocks = 0;
	super_encode(&a, 1, buf);
	assert_int_equal(super_decode(buf, 1, &b, why, sizeof(why)), -EPROTONOSUPPORT);
	assert_string_equal(why, "unknown incompat features 0x1");
	/* a version 1 superblock never carries the v2 fields */
	fill_v2(&a);
	a.version = SUPER_VERSION;
	super_encode(&a, 1, buf);
	assert_true(le64_get(buf + 952) == 0);
	/* every reserved byte, one at a time, must be zero */
	fill_v2(&a);
	super_encode(&a, 0, raw);
	for (unsigned off = 1017 + 64; off < 4088; off += 97) {
		memcpy(buf, raw, sizeof(buf));
		buf[off] = 1;
		le64_put(buf + 4088, csum_buf(buf, 4088, 0x7477696e66730000ull));
		assert_int_equal(super_decode(buf, 0, &b, why, sizeof(why)), -EUCLEAN);
	}
	/* unused root slot and a root's padding */
	memcpy(buf, raw, sizeof(buf));
	buf[992 + 3 * 32] = 4;
	le64_put(buf + 4088, csum_buf(buf, 4088, 0x7477696e66730000ull));
	assert_int_equal(super_decode(buf, 0, &b, why, sizeof(why)), -EUCLEAN);
	memcpy(buf, raw, sizeof(buf));
	buf[992 + 25] = 1;
	le64_put(buf + 4088, csum_buf(buf, 4088, 0x7477696e66730000ull));
	assert_int_equal(super_decode(buf, 0, &b, why, sizeof(why)), -EUCLEAN);
	memcpy(buf, raw, sizeof(buf));
	buf[806] = 1;	/* the scrub's reserved u32 */
	le64_put(buf + 4088, csum_buf(buf, 4088, 0x7477696e66730000ull));
	assert_int_equal(super_decode(buf, 0, &b, why, sizeof(why)), -EUCLEAN);
}

/* The log continuation (incompat 0x2): its fields at 1272..1295 with the
 * bit, in range; zero without it; the bit unknown to version 1. */
static void test_v2_log_cont(void **state)
{
	struct super a, b;
	uint8_t buf[4096];
	char why[128];

	(void)state;
	fill_v2(&a);
	a.incompat |= SUPER_INCOMPAT_V2_LOG_CONT;
	a.cont_pos = 7;
	a.cont_seq = a.log_head_seq + 3;
	a.cont_log_id = a.log_id + 1;
	super_encode(&a, 1, buf);
	assert_int_equal(super_decode(buf, 1, &b, why, sizeof(why)), 0);
	assert_memory_equal(&a, &b, sizeof(a));
	assert_true(super_log_cont(&b) && super_live_log_id(&b) == a.log_id + 1);
	assert_true(le64_get(buf + 1272) == 7 && le64_get(buf + 1280) == a.cont_seq &&
		    le64_get(buf + 1288) == a.log_id + 1);
	/* out of range: before the head, beyond the region, the same log_id */
	b = a;
	b.cont_seq = a.log_head_seq - 1;
	super_encode(&b, 1, buf);
	assert_int_equal(super_decode(buf, 1, &b, why, sizeof(why)), -EUCLEAN);
	assert_non_null(strstr(why, "log continuation"));
	b = a;
	b.cont_pos = a.log_blocks;
	super_encode(&b, 1, buf);
	assert_int_equal(super_decode(buf, 1, &b, why, sizeof(why)), -EUCLEAN);
	b = a;
	b.cont_log_id = a.log_id;
	super_encode(&b, 1, buf);
	assert_int_equal(super_decode(buf, 1, &b, why, sizeof(why)), -EUCLEAN);
	/* fields without the bit */
	b = a;
	b.incompat &= ~SUPER_INCOMPAT_V2_LOG_CONT;
	super_encode(&b, 1, buf);
	assert_int_equal(super_decode(buf, 1, &b, why, sizeof(why)), -EUCLEAN);
	/* cleared by the next checkpoint: decodes as before */
	b = a;
	super_log_cont_clear(&b);
	super_encode(&b, 1, buf);
	assert_int_equal(super_decode(buf, 1, &b, why, sizeof(why)), 0);
	assert_true(le64_get(buf + 1272) == 0 && le32_get(buf + 20) == SUPER_INCOMPAT_V2_MAPPED);
	/* version 1 does not know the bit */
	b = a;
	b.version = SUPER_VERSION;
	b.incompat = SUPER_INCOMPAT_V2_LOG_CONT;
	super_encode(&b, 1, buf);
	assert_int_equal(super_decode(buf, 1, &b, why, sizeof(why)), -EPROTONOSUPPORT);
	assert_string_equal(why, "unknown incompat features 0x2");
}

/* Leaf pieces (incompat 0x8): a root's byte 25 is its nblocks, 1..16 and
 * inside the node area; zero on an empty root and without the bit. */
static void test_v2_pieces(void **state)
{
	struct super a, b;
	uint8_t buf[4096];
	char why[128];

	(void)state;
	fill_v2(&a);
	a.incompat |= SUPER_INCOMPAT_V2_SHORT_NODES | SUPER_INCOMPAT_V2_PIECES;
	for (unsigned i = 0; i < SUPER_V2_TREES; i++)
		a.roots[i].ptr.nblocks = 1 + i;
	super_encode(&a, 1, buf);
	assert_int_equal(super_decode(buf, 1, &b, why, sizeof(why)), 0);
	assert_memory_equal(&a, &b, sizeof(a));
	assert_true(buf[992 + 25] == 1 && buf[992 + 64 + 25] == 3 && !buf[992 + 26]);
	assert_true(super_pieces(&b));
	b = a; b.roots[0].ptr.nblocks = 0; expect_geom(&b);
	b = a; b.roots[0].ptr.nblocks = BPTR_MAX_NBLOCKS + 1; expect_geom(&b);
	b = a; b.roots[0].ptr.nblocks = BPTR_MAX_NBLOCKS; super_encode(&b, 1, buf);
	assert_int_equal(super_decode(buf, 1, &b, why, sizeof(why)), 0);
	/* a chain past the node area's end */
	b = a; b.roots[1].ptr.addr = a.node_start + a.node_blocks - 4;
	b.roots[1].ptr.nblocks = 5; expect_geom(&b);
	b.roots[1].ptr.nblocks = 4; super_encode(&b, 1, buf);
	assert_int_equal(super_decode(buf, 1, &b, why, sizeof(why)), 0);
	b = a; b.roots[2] = (struct broot){ { 0, 0, 0, 1 }, 0 }; expect_geom(&b);
	/* without the bit nblocks must be 0 (test_v2: byte 25 set refused) */
	b = a; b.incompat &= ~SUPER_INCOMPAT_V2_PIECES; expect_geom(&b);
	/* version 1 does not know the bit */
	b = a;
	b.version = SUPER_VERSION;
	b.incompat = SUPER_INCOMPAT_V2_PIECES;
	b.ckpt_blocks = 0;
	super_encode(&b, 1, buf);
	assert_int_equal(super_decode(buf, 1, &b, why, sizeof(why)), -EPROTONOSUPPORT);
	assert_string_equal(why, "unknown incompat features 0x8");
}

static void test_v2_geometry(void **state)
{
	struct super a, b;
	uint8_t buf[4096];

	(void)state;
	fill_v2(&a); a.ckpt_start = a.data_start; a.ckpt_blocks = 1; expect_geom(&a);
	fill_v2(&a); a.ckpt_table_csum = 1; expect_geom(&a);
	fill_v2(&a); a.tree_gen = 0; expect_geom(&a);
	fill_v2(&a); a.node_start = a.data_start - 4; expect_geom(&a);
	fill_v2(&a); a.node_blocks = 0; expect_geom(&a);
	fill_v2(&a); a.node_blocks = 4094; expect_geom(&a);
	fill_v2(&a); a.node_blocks = a.total_blocks - a.node_start + 4; expect_geom(&a);
	fill_v2(&a); a.free_blocks = a.total_blocks; expect_geom(&a);
	fill_v2(&a); a.free_blocks++; expect_geom(&a);	/* past the data area */
	fill_v2(&a); a.node_blocks = a.total_blocks - a.node_start; a.free_blocks = 0;
	expect_geom(&a);				/* no data area */
	fill_v2(&a); a.gblocks = 0; expect_geom(&a);
	fill_v2(&a); a.gblocks = 4096 + 32; expect_geom(&a);
	fill_v2(&a); a.gblocks = 1ull << 56; expect_geom(&a);
	fill_v2(&a); a.node_reserve = a.node_blocks / 4; expect_geom(&a);
	fill_v2(&a); a.roots[0].ptr.addr = a.node_start - 4; expect_geom(&a);
	fill_v2(&a); a.roots[0].ptr.addr = a.node_start + 2; expect_geom(&a);
	fill_v2(&a); a.roots[1].ptr.addr = a.node_start + a.node_blocks; expect_geom(&a);
	fill_v2(&a); a.roots[1].ptr.gen = 42; expect_geom(&a);
	fill_v2(&a); a.roots[1].ptr.gen = 0; expect_geom(&a);
	fill_v2(&a); a.roots[2].level = BNODE_MAX_LEVEL; expect_geom(&a);
	fill_v2(&a); a.roots[2].ptr.addr = 0; expect_geom(&a);	/* empty, with gen */
	/* the edges and the empty tree are fine */
	fill_v2(&a);
	a.roots[1].ptr.addr = a.node_start + a.node_blocks - 4;
	a.roots[1].ptr.gen = a.tree_gen;
	a.roots[2] = (struct broot){ { 0, 0, 0, 0 }, 0 };
	a.roots[0].level = BNODE_MAX_LEVEL - 1;
	a.node_blocks = a.total_blocks - a.node_start - 64;
	a.free_blocks = 64;
	a.gblocks = 64;
	a.node_reserve = a.node_blocks / 4 - 1;
	super_encode(&a, 0, buf);
	assert_int_equal(super_decode(buf, 0, &b, NULL, 0), 0);
}

static void test_layout(void **state)
{
	struct super a;

	memset(&a, 0, sizeof(a));
	super_layout(&a, SUPER_MIN_BLOCKS);
	assert_int_equal(a.log_start, SUPER_LOG_START);
	assert_int_equal(a.log_blocks, 4096);
	assert_int_equal(a.data_start, SUPER_LOG_START + 4096);
	assert_int_equal(a.block_size, 4096);
	super_layout(&a, 1u << 20);		/* 4 GiB: total/32 */
	assert_int_equal(a.log_blocks, 32768);
	super_layout(&a, 1ull << 30);		/* 4 TiB: capped at 256 MiB */
	assert_int_equal(a.log_blocks, 65536);
	assert_int_equal(a.data_start, SUPER_LOG_START + 65536);
	assert_true(a.total_blocks == 1ull << 30);
}

static void test_probe_foreign(void **state)
{
	size_t len = 128 * 1024;
	uint8_t *b = calloc(1, len);

	assert_null(super_probe_foreign(b, len));
	b[1080] = 0x53;
	b[1081] = 0xEF;
	assert_string_equal(super_probe_foreign(b, len), "ext2/3/4");
	assert_null(super_probe_foreign(b, 1000));	/* too short to hold it */
	memset(b, 0, len);
	memcpy(b, "XFSB", 4);
	assert_string_equal(super_probe_foreign(b, len), "xfs");
	memset(b, 0, len);
	memcpy(b + 65536 + 64, "_BHRfS_M", 8);
	assert_string_equal(super_probe_foreign(b, len), "btrfs");
	memset(b, 0, len);
	memcpy(b + 65536 + 64, "_BHRfS_X", 8);
	assert_null(super_probe_foreign(b, len));
	free(b);
}

/* ---- on a device image ---- */

struct img {
	char path[64];
	struct dev_backend *be;
	struct dev *d;
};

static void img_open(struct img *im, off_t size)
{
	char err[256];
	int fd;

	strcpy(im->path, "/tmp/twinfs-test-super-XXXXXX");
	fd = mkstemp(im->path);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, size), 0);
	close(fd);
	assert_int_equal(dev_backend_create("file", &im->be), 0);
	assert_int_equal(dev_open(im->path, false, &im->d, err, sizeof(err)), 0);
	assert_int_equal(dev_backend_attach(im->be, im->d), 0);
}

static void img_close(struct img *im)
{
	dev_backend_destroy(im->be);
	dev_close(im->d);
	unlink(im->path);
}

static void test_read_dev(void **state)
{
	struct img im;
	struct super a, b;
	unsigned slot = 9;
	char why[128];
	void *blk = NULL;

	img_open(&im, 16 * 4096);
	/* empty device: no magic */
	assert_int_equal(super_read_dev(im.be, im.d, &b, &slot, why, sizeof(why)), -ENOENT);

	fill(&a);
	a.generation = 10;			/* slot 0 */
	assert_int_equal(super_write_dev(im.be, im.d, &a), 0);
	a.generation = 11;			/* slot 1 */
	a.next_ino = 5555;
	assert_int_equal(super_write_dev(im.be, im.d, &a), 0);
	assert_int_equal(super_read_dev(im.be, im.d, &b, &slot, why, sizeof(why)), 0);
	assert_int_equal(slot, 1);
	assert_int_equal(b.generation, 11);
	assert_int_equal(b.next_ino, 5555);

	/* newest (slot 1) corrupt: fall back to slot 0 */
	assert_int_equal(posix_memalign(&blk, 4096, 4096), 0);
	assert_int_equal(dev_pread(im.be, im.d, blk, 4096, 4096), 0);
	((uint8_t *)blk)[500] ^= 0x80;
	assert_int_equal(dev_pwrite(im.be, im.d, blk, 4096, 4096), 0);
	assert_int_equal(super_read_dev(im.be, im.d, &b, &slot, why, sizeof(why)), 0);
	assert_int_equal(slot, 0);
	assert_int_equal(b.generation, 10);
	assert_int_equal(b.next_ino, 4242);

	/* generation 12 goes to slot 0 and wins again over the corrupt slot 1 */
	a.generation = 12;
	assert_int_equal(super_write_dev(im.be, im.d, &a), 0);
	assert_int_equal(super_read_dev(im.be, im.d, &b, &slot, why, sizeof(why)), 0);
	assert_int_equal(slot, 0);
	assert_int_equal(b.generation, 12);

	/* both corrupt: -EUCLEAN with a reason */
	assert_int_equal(dev_pread(im.be, im.d, blk, 4096, 0), 0);
	((uint8_t *)blk)[4000] ^= 0x01;
	assert_int_equal(dev_pwrite(im.be, im.d, blk, 4096, 0), 0);
	assert_int_equal(super_read_dev(im.be, im.d, &b, &slot, why, sizeof(why)), -EUCLEAN);
	assert_non_null(strstr(why, "checksum"));

	/* a newer format in one slot refuses the device even if the other
	 * slot is a valid version 1 */
	a.generation = 13;
	assert_int_equal(super_write_dev(im.be, im.d, &a), 0);
	a.generation = 14;
	a.version = 3;
	assert_int_equal(super_write_dev(im.be, im.d, &a), 0);
	assert_int_equal(super_read_dev(im.be, im.d, &b, &slot, why, sizeof(why)),
			 -EPROTONOSUPPORT);
	assert_non_null(strstr(why, "version 3"));
	free(blk);
	img_close(&im);
}

static void test_read_dev_small(void **state)
{
	struct img im;
	struct super b;
	char why[128];

	img_open(&im, 4096);
	assert_int_equal(super_read_dev(im.be, im.d, &b, NULL, why, sizeof(why)), -EUCLEAN);
	assert_string_equal(why, "device too small");
	img_close(&im);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_slot_seed),
		cmocka_unit_test(test_bitflip_and_magic),
		cmocka_unit_test(test_version_features),
		cmocka_unit_test(test_geometry),
		cmocka_unit_test(test_v2),
		cmocka_unit_test(test_v2_log_cont),
		cmocka_unit_test(test_v2_geometry),
		cmocka_unit_test(test_v2_pieces),
		cmocka_unit_test(test_layout),
		cmocka_unit_test(test_probe_foreign),
		cmocka_unit_test(test_read_dev),
		cmocka_unit_test(test_read_dev_small),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
