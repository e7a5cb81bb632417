// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * super: the superblock codec (fixed little-endian layout with explicit
 * offsets, see docs/FORMAT.md), its validation, the layout of a new file
 * system, the probe for a file system (foreign or twinfs) on a device about
 * to be overwritten (mkfs, replace), and reading/writing the two slots of
 * one device.
 *
 * The encoding never dumps a C struct: every field is written at its
 * documented offset with an explicit little-endian helper, so the format
 * does not depend on the compiler's padding or the host's byte order.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csum.h"
#include "le.h"
#include "log.h"
#include "super.h"
#include "tlog.h"

#define SB_SIZE 4096u
#define SB_CSUM_SEED 0x7477696e66730000ull	/* "twinfs\0\0" + slot */

/* Field offsets (bytes) inside the 4096-byte superblock: FORMAT.md. */
enum {
	SB_OFF_MAGIC = 0,		/* 8 bytes */
	SB_OFF_VERSION = 8,		/* u32 */
	SB_OFF_COMPAT = 12,		/* u32 */
	SB_OFF_RO_COMPAT = 16,		/* u32 */
	SB_OFF_INCOMPAT = 20,		/* u32 */
	SB_OFF_FS_UUID = 24,		/* 16 bytes */
	SB_OFF_DEV_UUID = 40,		/* 16 bytes */
	SB_OFF_DEV_INDEX = 56,		/* u32 */
	SB_OFF_NDEVS = 60,		/* u32 */
	SB_OFF_DEV_UUIDS = 64,		/* DEV_MAX * 16 bytes */
	SB_OFF_LABEL = 192,		/* 64 bytes */
	SB_OFF_BLOCK_SIZE = 256,	/* u32 */
	SB_OFF_STATE = 260,		/* u32 */
	SB_OFF_TOTAL_BLOCKS = 264,	/* u64 ... */
	SB_OFF_LOG_START = 272,
	SB_OFF_LOG_BLOCKS = 280,
	SB_OFF_DATA_START = 288,
	SB_OFF_GENERATION = 296,
	SB_OFF_CKPT_START = 304,
	SB_OFF_CKPT_BLOCKS = 312,
	SB_OFF_CKPT_BYTES = 320,
	SB_OFF_CKPT_TABLE_CSUM = 328,
	SB_OFF_CKPT_SEQ = 336,
	SB_OFF_LOG_HEAD_POS = 344,
	SB_OFF_LOG_HEAD_SEQ = 352,
	SB_OFF_LOG_ID = 360,
	SB_OFF_NEXT_INO = 368,
	SB_OFF_CTIME_NS = 376,
	SB_OFF_DEV_STATE = 384,		/* DEV_MAX * u32 */
	SB_OFF_STATS = 416,		/* DEV_MAX * 6 * u64 */
	SB_OFF_SCRUB = 800,		/* struct super_scrub, 96 bytes */
	SB_OFF_SCRUB_END = 896,
	/* compat fields of the rebuild (rebuild.c) */
	SB_OFF_WIB_START = 896,		/* u64 */
	SB_OFF_WIB_BLOCKS = 904,	/* u32 */
	SB_OFF_WIB_SHIFT = 908,		/* u32 */
	SB_OFF_WIB_CSUM = 912,		/* u64 */
	SB_OFF_RB_STATE = 920,		/* u32 */
	SB_OFF_RB_KIND = 924,		/* u32 */
	SB_OFF_RB_DEV = 928,		/* u32, then 4 bytes zero */
	SB_OFF_RB_CURSOR = 936,		/* u64 */
	SB_OFF_RB_COPIED = 944,		/* u64 */
	SB_OFF_RB_END = 952,		/* version 1: reserved zero up to the csum */
	/* version 2 */
	SB_OFF_TREE_GEN = 952,		/* u64 */
	SB_OFF_HASH_SEED = 960,		/* u64 */
	SB_OFF_NODE_START = 968,	/* u64 */
	SB_OFF_NODE_BLOCKS = 976,	/* u64 */
	SB_OFF_FREE_BLOCKS = 984,	/* u64 */
	SB_OFF_ROOTS = 992,		/* SUPER_V2_ROOT_SLOTS * 32 bytes */
	SB_ROOT_SIZE = 32,		/* addr, gen, csum u64; level u8; 7 zero */
	SB_OFF_GBLOCKS = 1248,		/* u64 */
	SB_OFF_NODE_RESERVE = 1256,	/* u64 */
	SB_OFF_INODES = 1264,		/* u64 */
	SB_OFF_CONT_POS = 1272,		/* u64, SUPER_INCOMPAT_V2_LOG_CONT */
	SB_OFF_CONT_SEQ = 1280,		/* u64 */
	SB_OFF_CONT_LOG_ID = 1288,	/* u64 */
	SB_OFF_V2_END = 1296,		/* reserved zero up to the csum */
	SB_OFF_CSUM = 4088,		/* u64 over bytes [0, 4088) */
};

_Static_assert(DEV_MAX == 8, "superblock offsets assume DEV_MAX == 8");
_Static_assert(SB_OFF_DEV_UUIDS + DEV_MAX * 16 == SB_OFF_LABEL, "layout");
_Static_assert(SB_OFF_DEV_STATE + DEV_MAX * 4 == SB_OFF_STATS, "layout");
_Static_assert(SB_OFF_STATS + DEV_MAX * 48 == SB_OFF_SCRUB, "layout");
_Static_assert(SB_OFF_ROOTS + SUPER_V2_ROOT_SLOTS * SB_ROOT_SIZE == SB_OFF_GBLOCKS, "layout");

static uint64_t sb_seed(unsigned slot)
{
	return SB_CSUM_SEED + slot;
}

/* The fields only version 2 has (its trees), after the common ones. */
static void encode_v2(uint8_t *b, const struct super *sb)
{
	le64_put(b + SB_OFF_TREE_GEN, sb->tree_gen);
	le64_put(b + SB_OFF_HASH_SEED, sb->hash_seed);
	le64_put(b + SB_OFF_NODE_START, sb->node_start);
	le64_put(b + SB_OFF_NODE_BLOCKS, sb->node_blocks);
	le64_put(b + SB_OFF_FREE_BLOCKS, sb->free_blocks);
	le64_put(b + SB_OFF_GBLOCKS, sb->gblocks);
	le64_put(b + SB_OFF_NODE_RESERVE, sb->node_reserve);
	le64_put(b + SB_OFF_INODES, sb->inodes);
	le64_put(b + SB_OFF_CONT_POS, sb->cont_pos);
	le64_put(b + SB_OFF_CONT_SEQ, sb->cont_seq);
	le64_put(b + SB_OFF_CONT_LOG_ID, sb->cont_log_id);
	for (unsigned i = 0; i < SUPER_V2_TREES; i++) {
		const struct broot *r = &sb->roots[i];
		uint8_t *o = b + SB_OFF_ROOTS + SB_ROOT_SIZE * i;

		le64_put(o, r->ptr.addr);
		le64_put(o + 8, r->ptr.gen);
		le64_put(o + 16, r->ptr.csum);
		o[24] = (uint8_t)r->level;
		o[25] = (uint8_t)r->ptr.nblocks;	/* 0 without SUPER_INCOMPAT_V2_PIECES */
	}
}

static void decode_v2(const uint8_t *b, struct super *sb)
{
	sb->tree_gen = le64_get(b + SB_OFF_TREE_GEN);
	sb->hash_seed = le64_get(b + SB_OFF_HASH_SEED);
	sb->node_start = le64_get(b + SB_OFF_NODE_START);
	sb->node_blocks = le64_get(b + SB_OFF_NODE_BLOCKS);
	sb->free_blocks = le64_get(b + SB_OFF_FREE_BLOCKS);
	sb->gblocks = le64_get(b + SB_OFF_GBLOCKS);
	sb->node_reserve = le64_get(b + SB_OFF_NODE_RESERVE);
	sb->inodes = le64_get(b + SB_OFF_INODES);
	sb->cont_pos = le64_get(b + SB_OFF_CONT_POS);
	sb->cont_seq = le64_get(b + SB_OFF_CONT_SEQ);
	sb->cont_log_id = le64_get(b + SB_OFF_CONT_LOG_ID);
	for (unsigned i = 0; i < SUPER_V2_TREES; i++) {
		struct broot *r = &sb->roots[i];
		const uint8_t *o = b + SB_OFF_ROOTS + SB_ROOT_SIZE * i;

		r->ptr.addr = le64_get(o);
		r->ptr.gen = le64_get(o + 8);
		r->ptr.csum = le64_get(o + 16);
		r->level = o[24];
		r->ptr.nblocks = o[25];
	}
}

void super_encode(const struct super *sb, unsigned slot, void *buf)
{
	uint8_t *b = buf;

	memset(b, 0, SB_SIZE);
	memcpy(b + SB_OFF_MAGIC, SUPER_MAGIC, 8);
	le32_put(b + SB_OFF_VERSION, sb->version);
	le32_put(b + SB_OFF_COMPAT, sb->compat);
	le32_put(b + SB_OFF_RO_COMPAT, sb->ro_compat);
	le32_put(b + SB_OFF_INCOMPAT, sb->incompat);
	memcpy(b + SB_OFF_FS_UUID, sb->fs_uuid, 16);
	memcpy(b + SB_OFF_DEV_UUID, sb->dev_uuid, 16);
	le32_put(b + SB_OFF_DEV_INDEX, sb->dev_index);
	le32_put(b + SB_OFF_NDEVS, sb->ndevs);
	for (unsigned i = 0; i < DEV_MAX; i++)
		memcpy(b + SB_OFF_DEV_UUIDS + 16 * i, sb->dev_uuids[i], 16);
	/* strnlen: the label is NUL-terminated, but never trust it to be */
	memcpy(b + SB_OFF_LABEL, sb->label, strnlen(sb->label, sizeof(sb->label) - 1));
	le32_put(b + SB_OFF_BLOCK_SIZE, sb->block_size);
	le32_put(b + SB_OFF_STATE, sb->state);
	le64_put(b + SB_OFF_TOTAL_BLOCKS, sb->total_blocks);
	le64_put(b + SB_OFF_LOG_START, sb->log_start);
	le64_put(b + SB_OFF_LOG_BLOCKS, sb->log_blocks);
	le64_put(b + SB_OFF_DATA_START, sb->data_start);
	le64_put(b + SB_OFF_GENERATION, sb->generation);
	le64_put(b + SB_OFF_CKPT_START, sb->ckpt_start);
	le64_put(b + SB_OFF_CKPT_BLOCKS, sb->ckpt_blocks);
	le64_put(b + SB_OFF_CKPT_BYTES, sb->ckpt_bytes);
	le64_put(b + SB_OFF_CKPT_TABLE_CSUM, sb->ckpt_table_csum);
	le64_put(b + SB_OFF_CKPT_SEQ, sb->ckpt_seq);
	le64_put(b + SB_OFF_LOG_HEAD_POS, sb->log_head_pos);
	le64_put(b + SB_OFF_LOG_HEAD_SEQ, sb->log_head_seq);
	le64_put(b + SB_OFF_LOG_ID, sb->log_id);
	le64_put(b + SB_OFF_NEXT_INO, sb->next_ino);
	le64_put(b + SB_OFF_CTIME_NS, sb->ctime_ns);
	for (unsigned i = 0; i < DEV_MAX; i++) {
		const struct super_devstats *s = &sb->stats[i];
		size_t o = SB_OFF_STATS + 48 * i;

		le32_put(b + SB_OFF_DEV_STATE + 4 * i, sb->dev_state[i]);
		le64_put(b + o, s->read_err);
		le64_put(b + o + 8, s->write_err);
		le64_put(b + o + 16, s->flush_err);
		le64_put(b + o + 24, s->csum_err);
		le64_put(b + o + 32, s->repaired);
		le64_put(b + o + 40, s->unrecoverable);
	}
	{
		const struct super_scrub *c = &sb->scrub;
		size_t o = SB_OFF_SCRUB;

		le32_put(b + o, c->state);
		/* o + 4: reserved u32 */
		le64_put(b + o + 8, c->ino);
		le64_put(b + o + 16, c->fblk);
		le64_put(b + o + 24, c->started_ns);
		le64_put(b + o + 32, c->finished_ns);
		le64_put(b + o + 40, c->bytes_done);
		le64_put(b + o + 48, c->rate);
		le64_put(b + o + 56, c->csum_err);
		le64_put(b + o + 64, c->repaired);
		le64_put(b + o + 72, c->unrecoverable);
		le64_put(b + o + 80, c->read_err);
		le64_put(b + o + 88, c->bytes_total);
	}
	le64_put(b + SB_OFF_WIB_START, sb->wib_start);
	le32_put(b + SB_OFF_WIB_BLOCKS, sb->wib_blocks);
	le32_put(b + SB_OFF_WIB_SHIFT, sb->wib_shift);
	le64_put(b + SB_OFF_WIB_CSUM, sb->wib_csum);
	le32_put(b + SB_OFF_RB_STATE, sb->rb_state);
	le32_put(b + SB_OFF_RB_KIND, sb->rb_kind);
	le32_put(b + SB_OFF_RB_DEV, sb->rb_dev);
	le64_put(b + SB_OFF_RB_CURSOR, sb->rb_cursor);
	le64_put(b + SB_OFF_RB_COPIED, sb->rb_copied);
	if (sb->version == SUPER_VERSION_V2)
		encode_v2(b, sb);
	le64_put(b + SB_OFF_CSUM, csum_buf(b, SB_OFF_CSUM, sb_seed(slot)));
}

static void decode_fields(const uint8_t *b, struct super *sb)
{
	memset(sb, 0, sizeof(*sb));
	sb->version = le32_get(b + SB_OFF_VERSION);
	sb->compat = le32_get(b + SB_OFF_COMPAT);
	sb->ro_compat = le32_get(b + SB_OFF_RO_COMPAT);
	sb->incompat = le32_get(b + SB_OFF_INCOMPAT);
	memcpy(sb->fs_uuid, b + SB_OFF_FS_UUID, 16);
	memcpy(sb->dev_uuid, b + SB_OFF_DEV_UUID, 16);
	sb->dev_index = le32_get(b + SB_OFF_DEV_INDEX);
	sb->ndevs = le32_get(b + SB_OFF_NDEVS);
	for (unsigned i = 0; i < DEV_MAX; i++)
		memcpy(sb->dev_uuids[i], b + SB_OFF_DEV_UUIDS + 16 * i, 16);
	memcpy(sb->label, b + SB_OFF_LABEL, sizeof(sb->label) - 1);
	sb->label[sizeof(sb->label) - 1] = '\0';
	sb->block_size = le32_get(b + SB_OFF_BLOCK_SIZE);
	sb->state = le32_get(b + SB_OFF_STATE);
	sb->total_blocks = le64_get(b + SB_OFF_TOTAL_BLOCKS);
	sb->log_start = le64_get(b + SB_OFF_LOG_START);
	sb->log_blocks = le64_get(b + SB_OFF_LOG_BLOCKS);
	sb->data_start = le64_get(b + SB_OFF_DATA_START);
	sb->generation = le64_get(b + SB_OFF_GENERATION);
	sb->ckpt_start = le64_get(b + SB_OFF_CKPT_START);
	sb->ckpt_blocks = le64_get(b + SB_OFF_CKPT_BLOCKS);
	sb->ckpt_bytes = le64_get(b + SB_OFF_CKPT_BYTES);
	sb->ckpt_table_csum = le64_get(b + SB_OFF_CKPT_TABLE_CSUM);
	sb->ckpt_seq = le64_get(b + SB_OFF_CKPT_SEQ);
	sb->log_head_pos = le64_get(b + SB_OFF_LOG_HEAD_POS);
	sb->log_head_seq = le64_get(b + SB_OFF_LOG_HEAD_SEQ);
	sb->log_id = le64_get(b + SB_OFF_LOG_ID);
	sb->next_ino = le64_get(b + SB_OFF_NEXT_INO);
	sb->ctime_ns = le64_get(b + SB_OFF_CTIME_NS);
	for (unsigned i = 0; i < DEV_MAX; i++) {
		struct super_devstats *s = &sb->stats[i];
		size_t o = SB_OFF_STATS + 48 * i;

		sb->dev_state[i] = le32_get(b + SB_OFF_DEV_STATE + 4 * i);
		s->read_err = le64_get(b + o);
		s->write_err = le64_get(b + o + 8);
		s->flush_err = le64_get(b + o + 16);
		s->csum_err = le64_get(b + o + 24);
		s->repaired = le64_get(b + o + 32);
		s->unrecoverable = le64_get(b + o + 40);
	}
	{
		struct super_scrub *c = &sb->scrub;
		size_t o = SB_OFF_SCRUB;

		c->state = le32_get(b + o);
		c->ino = le64_get(b + o + 8);
		c->fblk = le64_get(b + o + 16);
		c->started_ns = le64_get(b + o + 24);
		c->finished_ns = le64_get(b + o + 32);
		c->bytes_done = le64_get(b + o + 40);
		c->rate = le64_get(b + o + 48);
		c->csum_err = le64_get(b + o + 56);
		c->repaired = le64_get(b + o + 64);
		c->unrecoverable = le64_get(b + o + 72);
		c->read_err = le64_get(b + o + 80);
		c->bytes_total = le64_get(b + o + 88);
	}
	sb->wib_start = le64_get(b + SB_OFF_WIB_START);
	sb->wib_blocks = le32_get(b + SB_OFF_WIB_BLOCKS);
	sb->wib_shift = le32_get(b + SB_OFF_WIB_SHIFT);
	sb->wib_csum = le64_get(b + SB_OFF_WIB_CSUM);
	sb->rb_state = le32_get(b + SB_OFF_RB_STATE);
	sb->rb_kind = le32_get(b + SB_OFF_RB_KIND);
	sb->rb_dev = le32_get(b + SB_OFF_RB_DEV);
	sb->rb_cursor = le64_get(b + SB_OFF_RB_CURSOR);
	sb->rb_copied = le64_get(b + SB_OFF_RB_COPIED);
	if (sb->version == SUPER_VERSION_V2)
		decode_v2(b, sb);
}

static int why_fmt(char *why, size_t whylen, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int why_fmt(char *why, size_t whylen, int err, const char *fmt, ...)
{
	va_list ap;

	if (why && whylen) {
		va_start(ap, fmt);
		vsnprintf(why, whylen, fmt, ap);
		va_end(ap);
	}
	return err;
}

/* Geometry checks: everything later code indexes with must be in range, so
 * a superblock with a valid checksum but nonsense fields (a bug, or a
 * hand-made image) is refused here rather than crashing the mount. */
static int check_geometry(const struct super *sb, char *why, size_t whylen)
{
	const char *bad = NULL;
	uint64_t log_end = sb->log_start + sb->log_blocks;

	if (sb->block_size != TFS_BLOCK_SIZE)
		bad = "block size is not 4096";
	else if (sb->ndevs < 1 || sb->ndevs > DEV_MAX)
		bad = "device count out of range";
	else if (sb->dev_index >= sb->ndevs)
		bad = "device index beyond the device count";
	else if (sb->log_start < SUPER_LOG_START || sb->log_blocks == 0 ||
		 log_end < sb->log_start || log_end > sb->data_start)
		bad = "log region overlaps the superblocks or the data area";
	else if (sb->data_start >= sb->total_blocks)
		bad = "data area beyond the end of the device";
	else if (sb->ckpt_blocks &&
		 (sb->ckpt_start < sb->data_start ||
		  sb->ckpt_blocks > sb->total_blocks - sb->ckpt_start))
		bad = "checkpoint outside the data area";
	else if (sb->ckpt_bytes / TFS_BLOCK_SIZE + (sb->ckpt_bytes % TFS_BLOCK_SIZE != 0) >
		 sb->ckpt_blocks)
		bad = "checkpoint longer than its blocks";
	else if (sb->log_head_pos >= sb->log_blocks)
		bad = "log head beyond the log region";
	else if (sb->state > SUPER_CLEAN)
		bad = "unknown state";
	else if (sb->wib_start &&
		 (sb->wib_start < sb->data_start || sb->wib_blocks == 0 ||
		  sb->wib_blocks > sb->total_blocks - sb->wib_start || sb->wib_shift > 40))
		bad = "write-intent bitmap outside the data area";
	else if (sb->rb_state > SUPER_RB_RUNNING ||
		 (sb->rb_state && (sb->rb_dev >= sb->ndevs || sb->rb_kind < SUPER_RB_REBUILD ||
				   sb->rb_kind > SUPER_RB_REPLACE)))
		bad = "rebuild state out of range";
	if (bad)
		return why_fmt(why, whylen, -EUCLEAN, "inconsistent geometry: %s", bad);
	return 0;
}

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/* A root: none (all zero), or a node in the node area written by a tree
 * commit up to tree_gen. */
static bool root_ok(const struct super *sb, const struct broot *r, const uint8_t *raw)
{
	uint64_t a = r->ptr.addr;
	unsigned nb = r->ptr.nblocks;

	/* Byte 25: nblocks with pieces (1..16, inside the node area), else zero. */
	if (!all_zero(raw + 26, SB_ROOT_SIZE - 26) || (!super_pieces(sb) && nb))
		return false;
	if (!a)
		return !r->ptr.gen && !r->ptr.csum && !r->level && !nb;
	if (super_pieces(sb) && (!nb || nb > BPTR_MAX_NBLOCKS ||
				 a - sb->node_start > sb->node_blocks - nb))
		return false;
	return a >= sb->node_start && (a - sb->node_start) % BNODE_BLOCKS == 0 &&
	       a - sb->node_start <= sb->node_blocks - BNODE_BLOCKS &&
	       r->ptr.gen >= 1 && r->ptr.gen <= sb->tree_gen && r->level < BNODE_MAX_LEVEL;
}

/* Version 2: one encoding (every reserved byte zero, no checkpoint
 * fields), the node area inside the data area, roots inside it. */
static int check_v2(const uint8_t *b, const struct super *sb, char *why, size_t whylen)
{
	const char *bad = NULL;
	size_t lablen = strnlen((const char *)b + SB_OFF_LABEL, 64);

	if (lablen > 63 || !all_zero(b + SB_OFF_LABEL + lablen, 64 - lablen))
		bad = "label not NUL-padded";
	else if (sb->ckpt_start || sb->ckpt_blocks || sb->ckpt_bytes || sb->ckpt_table_csum)
		bad = "checkpoint fields set in a version 2 superblock";
	else if (!all_zero(b + SB_OFF_SCRUB + 4, 4) || !all_zero(b + SB_OFF_RB_DEV + 4, 4) ||
		 !all_zero(b + SB_OFF_ROOTS + SUPER_V2_TREES * SB_ROOT_SIZE,
			   SB_OFF_GBLOCKS - SB_OFF_ROOTS - SUPER_V2_TREES * SB_ROOT_SIZE) ||
		 !all_zero(b + SB_OFF_V2_END, SB_OFF_CSUM - SB_OFF_V2_END))
		bad = "reserved bytes not zero";
	else if (!sb->tree_gen)
		bad = "tree generation 0";
	else if (sb->node_start < sb->data_start || !sb->node_blocks ||
		 sb->node_blocks % BNODE_BLOCKS || sb->node_blocks >= sb->total_blocks - sb->node_start)
		bad = "node area outside the data area (or no block left for data)";
	else if (sb->free_blocks > sb->total_blocks - sb->node_start - sb->node_blocks)
		bad = "more free blocks than the data area has";
	else if (!sb->gblocks || sb->gblocks % 64 || sb->gblocks > BKEY_OFF_MAX)
		bad = "allocation group size not a nonzero multiple of 64 blocks";
	else if (sb->node_reserve >= sb->node_blocks / BNODE_BLOCKS)
		bad = "node reserve not below the node area's slots";
	else if (!(sb->incompat & SUPER_INCOMPAT_V2_LOG_CONT) ?
		 sb->cont_pos || sb->cont_seq || sb->cont_log_id :
		 sb->cont_pos >= sb->log_blocks || sb->cont_seq < sb->log_head_seq ||
		 !sb->cont_log_id || sb->cont_log_id == sb->log_id)
		bad = "log continuation out of range";
	for (unsigned i = 0; !bad && i < SUPER_V2_TREES; i++)
		if (!root_ok(sb, &sb->roots[i], b + SB_OFF_ROOTS + SB_ROOT_SIZE * i))
			bad = "tree root outside the node area";
	if (bad)
		return why_fmt(why, whylen, -EUCLEAN, "inconsistent geometry: %s", bad);
	return 0;
}

int super_decode(const void *buf, unsigned slot, struct super *sb, char *why, size_t whylen)
{
	const uint8_t *b = buf;
	uint64_t want;
	uint32_t supp;
	int ret;

	if (memcmp(b + SB_OFF_MAGIC, SUPER_MAGIC, 8) != 0)
		return why_fmt(why, whylen, -ENOENT, "no twinfs superblock");
	/* The checksum comes before the version so a damaged block is
	 * reported as damaged, not as a "newer format".  Every version keeps
	 * magic, version and csum at these offsets. */
	want = le64_get(b + SB_OFF_CSUM);
	if (csum_buf(b, SB_OFF_CSUM, sb_seed(slot)) != want)
		return why_fmt(why, whylen, -EUCLEAN, "superblock slot %u checksum mismatch", slot);
	decode_fields(b, sb);
	if (sb->version != SUPER_VERSION && sb->version != SUPER_VERSION_V2)
		return why_fmt(why, whylen, -EPROTONOSUPPORT,
			       "unsupported format version %u (this twinfs supports %u and %u)",
			       sb->version, SUPER_VERSION, SUPER_VERSION_V2);
	supp = sb->version == SUPER_VERSION_V2 ? SUPER_INCOMPAT_SUPP_V2 : SUPER_INCOMPAT_SUPP;
	if (sb->incompat & ~supp)
		return why_fmt(why, whylen, -EPROTONOSUPPORT, "unknown incompat features 0x%x",
			       sb->incompat & ~supp);
	if (sb->version == SUPER_VERSION_V2 && !(sb->incompat & SUPER_INCOMPAT_V2_MAPPED))
		return why_fmt(why, whylen, -EPROTONOSUPPORT,
			       "format version 2 of an older experimental twinfs (INODE items "
			       "without a mapped-block count): not readable by this one, "
			       "make it again with mkfs.twinfs -O v2");
	if (sb->ro_compat & ~SUPER_RO_COMPAT_SUPP)
		return why_fmt(why, whylen, -EPROTONOSUPPORT, "unknown ro_compat features 0x%x",
			       sb->ro_compat & ~SUPER_RO_COMPAT_SUPP);
	ret = check_geometry(sb, why, whylen);
	if (ret == 0 && sb->version == SUPER_VERSION_V2)
		ret = check_v2(b, sb, why, whylen);
	return ret;
}

void super_uuid_str(const uint8_t u[16], char out[SUPER_UUID_STR])
{
	static const char hex[] = "0123456789abcdef";
	char *p = out;

	for (int i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			*p++ = '-';
		*p++ = hex[u[i] >> 4];
		*p++ = hex[u[i] & 15];
	}
	*p = '\0';
}

const char *super_probe_foreign(const void *buf, size_t len)
{
	const uint8_t *b = buf;

	if (len >= 4 && memcmp(b, "XFSB", 4) == 0)
		return "xfs";
	if (len >= 1080 + 2 && b[1080] == 0x53 && b[1081] == 0xEF)
		return "ext2/3/4";
	if (len >= 65536 + 64 + 8 && memcmp(b + 65536 + 64, "_BHRfS_M", 8) == 0)
		return "btrfs";
	return NULL;
}

void super_layout(struct super *sb, uint64_t total_blocks)
{
	uint64_t lb = total_blocks / 32;

	if (lb < 4096)
		lb = 4096;		/* 16 MiB */
	if (lb > 65536)
		lb = 65536;		/* 256 MiB */
	sb->version = SUPER_VERSION;
	sb->block_size = TFS_BLOCK_SIZE;
	sb->total_blocks = total_blocks;
	sb->log_start = SUPER_LOG_START;
	sb->log_blocks = lb;
	sb->data_start = SUPER_LOG_START + lb;
	sb->log_head_pos = 0;
}

int super_read_dev(struct dev_backend *be, struct dev *d, struct super *sb,
		   unsigned *slot, char *why, size_t whylen)
{
	struct super cand[2];
	char whys[2][160];
	int rc[2], best = -1;
	void *buf;

	if (d->size < 2 * SB_SIZE)
		return why_fmt(why, whylen, -EUCLEAN, "device too small");
	if (posix_memalign(&buf, SB_SIZE, 2 * SB_SIZE))
		return -ENOMEM;
	for (unsigned s = 0; s < 2; s++) {
		/* One read per slot, so a bad sector under one slot still
		 * lets the other one be used. */
		rc[s] = dev_pread(be, d, (uint8_t *)buf + s * SB_SIZE, SB_SIZE, s * SB_SIZE);
		if (rc[s] < 0)
			snprintf(whys[s], sizeof(whys[s]), "superblock slot %u: read error %d",
				 s, rc[s]);
		else
			rc[s] = super_decode((uint8_t *)buf + s * SB_SIZE, s, &cand[s],
					     whys[s], sizeof(whys[s]));
		if (rc[s] == 0 && (best < 0 || cand[s].generation > cand[best].generation))
			best = (int)s;
	}
	free(buf);

	/* A slot of a newer format wins over an older valid one: the newer
	 * tool may have upgraded the file system, so the old slot is stale. */
	for (unsigned s = 0; s < 2; s++)
		if (rc[s] == -EPROTONOSUPPORT)
			return why_fmt(why, whylen, rc[s], "%s", whys[s]);
	if (best >= 0) {
		*sb = cand[best];
		if (slot)
			*slot = (unsigned)best;
		return 0;
	}
	if (rc[0] == -ENOENT && rc[1] == -ENOENT)
		return why_fmt(why, whylen, -ENOENT, "no twinfs superblock");
	/* Report the slot that got furthest (not just "no magic"). */
	unsigned s = rc[0] == -ENOENT ? 1 : 0;

	return why_fmt(why, whylen, rc[s] == -ENOENT ? -EUCLEAN : rc[s], "%s", whys[s]);
}

bool super_slot_older(const void *buf, unsigned slot, const struct super *cur)
{
	const uint8_t *b = buf;
	struct super raw;

	if (super_decode(buf, slot, &raw, NULL, 0) == 0)
		return raw.generation < cur->generation;
	/* Damaged: take it as older only if all these fields say "the write
	 * before cur"; anything else may have been a newer generation. */
	if (memcmp(b + SB_OFF_MAGIC, SUPER_MAGIC, 8) != 0)
		return false;
	decode_fields(b, &raw);
	return memcmp(raw.fs_uuid, cur->fs_uuid, 16) == 0 &&
	       raw.generation + 1 == cur->generation &&
	       raw.log_head_seq <= cur->log_head_seq && raw.ckpt_seq <= cur->ckpt_seq;
}

int super_write_dev(struct dev_backend *be, struct dev *d, const struct super *sb)
{
	return super_write_slot(be, d, sb, (unsigned)(sb->generation % 2));
}

int super_write_slot(struct dev_backend *be, struct dev *d, const struct super *sb,
		     unsigned slot)
{
	void *buf;
	int ret;

	if (posix_memalign(&buf, SB_SIZE, SB_SIZE))
		return -ENOMEM;
	super_encode(sb, slot, buf);
	ret = dev_pwrite(be, d, buf, SB_SIZE, (uint64_t)slot * SB_SIZE);
	free(buf);
	return ret;
}

int super_probe_dev(struct dev_backend *be, struct dev *d, const char *force_opt,
		    struct super *found, char *err, size_t errlen)
{
	char why[256] = "";
	struct super sb;
	const char *name;
	unsigned slot;
	void *buf;
	int ret;

	if (posix_memalign(&buf, TFS_BLOCK_SIZE, SUPER_PROBE_BYTES)) {
		tfs_seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	ret = dev_pread(be, d, buf, SUPER_PROBE_BYTES, 0);
	if (ret < 0) {
		tfs_seterr(err, errlen, "%s: cannot read: %s", d->path, strerror(-ret));
		goto out;
	}
	name = super_probe_foreign(buf, SUPER_PROBE_BYTES);
	if (name) {
		tfs_seterr(err, errlen, "%s: contains %s %s file system (use %s to overwrite)",
			   d->path, strchr("aeiouAEIOU", name[0]) ? "an" : "a", name, force_opt);
		ret = -EEXIST;
		goto out;
	}
	ret = super_read_dev(be, d, &sb, &slot, why, sizeof(why));
	if (ret != -ENOENT) {
		tfs_seterr(err, errlen, "%s: contains a twinfs file system (use %s to overwrite)",
			   d->path, force_opt);
		if (found && ret == 0)
			*found = sb;
		else if (found)
			memset(found, 0, sizeof(*found));
		ret = -EEXIST;
		goto out;
	}
	ret = 0;
out:
	free(buf);
	return ret;
}

uint64_t super_next_log_id(const struct super *sb, uint64_t log_id)
{
	uint8_t b[24];
	uint64_t id;

	memcpy(b, sb->fs_uuid, 16);
	memcpy(b + 16, &log_id, 8);
	id = csum_buf(b, sizeof(b), 0x6c6f675f6e657874ull);	/* "log_next" */
	if (id == 0 || id == log_id)
		id = ~log_id ? ~log_id : 1;
	return id;
}

void super_log_geom(const struct super *sb, struct log_geom *g)
{
	memset(g, 0, sizeof(*g));
	g->start = sb->log_start;
	g->nblocks = sb->log_blocks;
	g->head_pos = sb->log_head_pos;
	g->head_seq = sb->log_head_seq;
	g->log_id = sb->log_id;
	g->next_log_id = super_next_log_id(sb, sb->log_id);
	if (sb->incompat & SUPER_INCOMPAT_V2_LOG_CONT) {
		g->cont_pos = sb->cont_pos;
		g->cont_seq = sb->cont_seq;
		g->cont_log_id = sb->cont_log_id;
		g->cont_next_log_id = super_next_log_id(sb, sb->cont_log_id);
	}
}
