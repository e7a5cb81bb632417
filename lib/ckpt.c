// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ckpt: checkpoints.  A checkpoint is the whole in-memory metadata
 * serialized as a stream of state records (the log's record encoding) into
 * newly allocated, contiguous blocks, after which the superblock is flipped
 * to point at it and the log is trimmed up to the checkpoint's sequence.
 *
 * On disk (contiguous run of ckpt_blocks at ckpt_start, mirrored like data):
 *   table:   ceil(payload_blocks * 8 / 4096) blocks; entry i (little-endian
 *            u64) is csum_block(payload block i, its physical block number);
 *            zero padded to whole blocks
 *   payload: ceil(ckpt_bytes / 4096) blocks: the record stream, zero padded
 * The superblock's ckpt_table_csum = csum_buf(table, table_blocks * 4096,
 * seed = CKPT_TABLE_SEED(fs_uuid)), the first 8 bytes of fs_uuid read as a
 * little-endian u64: a table left by an earlier file system on the same
 * device never verifies.
 *
 * The stream holds every LR_INODE record first, then directory entries,
 * xattrs and extents, so loading never meets a reference to an inode that
 * does not exist yet.
 *
 * Owns: the layout above, ckpt_write() and ckpt_load(), and the checkpoint's
 * fields of the superblock (ckpt_*, log head, next_ino, the write-intent
 * bitmap's location, which wib.c writes for it).  The superblock itself is
 * committed by sbcommit.c, which fills the other services' fields.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_v2.h"
#include "dir.h"
#include "discard.h"
#include "fs_i.h"
#include "inode_i.h"
#include "le.h"
#include "sbcommit.h"
#include "tlog.h"
#include "wib.h"

#define CKPT_IO_BLOCKS 256u	/* blocks per mirror I/O (1 MiB) */
#define CKPT_ALLOC_TRIES 64	/* short runs held while looking for a long one */

uint64_t ckpt_table_seed(const uint8_t fs_uuid[16])
{
	return le64_get(fs_uuid);
}

void ckpt_geom(uint64_t bytes, uint64_t *payload, uint64_t *table)
{
	*payload = (bytes + TFS_BLOCK_SIZE - 1) / TFS_BLOCK_SIZE;
	*table = (*payload * 8 + TFS_BLOCK_SIZE - 1) / TFS_BLOCK_SIZE;
}

/* ---- serialization ---- */

struct ckpt_ser {
	struct log_buf *rest;	/* dentries, xattrs, extents */
	uint64_t ino;
	uint64_t *csums;	/* LOG_EXT_MAX_BLOCKS scratch */
};

static int ser_run(void *ctx, uint64_t fblk, uint64_t phys, uint32_t n,
		   const struct extent_ent *ents)
{
	struct ckpt_ser *s = ctx;

	for (uint32_t off = 0; off < n; ) {
		uint32_t k = n - off;
		struct log_rec r = { .type = LR_EXT_SET };
		int ret;

		if (k > LOG_EXT_MAX_BLOCKS)
			k = LOG_EXT_MAX_BLOCKS;
		for (uint32_t i = 0; i < k; i++)
			s->csums[i] = ents[off + i].csum;
		r.ext.ino = s->ino;
		r.ext.fblk = fblk + off;
		/* The flag bit is far above any block number: adding keeps it. */
		r.ext.phys = phys + off;
		r.ext.n = k;
		r.ext.csums = s->csums;
		ret = log_buf_add(s->rest, &r);
		if (ret < 0)
			return ret;
		off += k;
	}
	return 0;
}

/* Emit one inode: LR_INODE into @inodes, the rest into s->rest.  Caller
 * holds ns_lock (and the rangelock for regular files). */
static int ser_inode(struct tfs_inode *ip, struct log_buf *inodes, struct ckpt_ser *s)
{
	struct log_rec r;
	int ret;

	memset(&r, 0, sizeof(r));
	fs_iencode(ip, &r);
	ret = log_buf_add(inodes, &r);
	if (ret < 0)
		return ret;

	if (S_ISDIR(ip->mode) && ip->dir) {
		struct dir_ent e;
		uint64_t c = 2;

		while (dir_next(ip->dir, c, &e) == 0) {
			memset(&r, 0, sizeof(r));
			r.type = LR_DENT_SET;
			r.dent.parent = ip->ino;
			r.dent.ino = e.ino;
			r.dent.namelen = e.namelen;
			r.dent.name = e.name;
			ret = log_buf_add(s->rest, &r);
			if (ret < 0)
				return ret;
			c = e.cookie + 1;
		}
	}
	for (struct xattr *x = ip->xattrs; x; x = x->next) {
		memset(&r, 0, sizeof(r));
		r.type = LR_XATTR_SET;
		r.xattr.ino = ip->ino;
		r.xattr.namelen = (uint16_t)strlen(x->name);
		r.xattr.vallen = x->vallen;
		r.xattr.name = x->name;
		r.xattr.val = x->val;
		ret = log_buf_add(s->rest, &r);
		if (ret < 0)
			return ret;
	}
	if (S_ISREG(ip->mode)) {
		s->ino = ip->ino;
		ret = extent_walk(&ip->map, 0, EXTENT_MAX_FBLK, ser_run, s);
		if (ret < 0)
			return ret;
	}
	return 0;
}

/* Serialize all metadata into @out.  Takes ns_lock. */
static int ckpt_serialize(struct tfs *fs, struct log_buf *out)
{
	struct log_buf rest;
	struct ckpt_ser s = { .rest = &rest };
	struct tfs_inode **v = NULL;
	size_t n = 0;
	int ret;

	log_buf_init(&rest);
	s.csums = malloc(LOG_EXT_MAX_BLOCKS * sizeof(uint64_t));
	if (!s.csums)
		return -ENOMEM;

	pthread_mutex_lock(&fs->ns_lock);
	ret = fs_isnapshot(fs, &v, &n);	/* ns_lock keeps them alive */
	for (size_t i = 0; ret == 0 && i < n; i++) {
		struct tfs_inode *ip = v[i];
		struct rl_range r;
		bool reg;

		/* The type never changes; read it to know whether there is a
		 * range lock to take (lock order: rangelock before ip->lock). */
		pthread_mutex_lock(&ip->lock);
		reg = S_ISREG(ip->mode);
		pthread_mutex_unlock(&ip->lock);

		/* Shared over the whole file: no write or truncate changes the
		 * map while we walk it, and no half-applied write is seen. */
		if (reg)
			rl_lock(&ip->rl, &r, 0, RL_EOF, false);
		pthread_mutex_lock(&ip->lock);
		ret = ser_inode(ip, out, &s);
		pthread_mutex_unlock(&ip->lock);
		if (reg)
			rl_unlock(&ip->rl, &r);
	}
	pthread_mutex_unlock(&fs->ns_lock);

	if (ret == 0 && rest.len) {
		if (out->cap < out->len + rest.len) {
			uint8_t *p = realloc(out->p, out->len + rest.len);

			if (!p)
				ret = -ENOMEM;
			else {
				out->p = p;
				out->cap = out->len + rest.len;
			}
		}
		if (ret == 0) {
			memcpy(out->p + out->len, rest.p, rest.len);
			out->len += rest.len;
		}
	}
	fs_isnapshot_put(fs, v, n);
	free(s.csums);
	log_buf_free(&rest);
	return ret;
}

/*
 * One contiguous run of @want metadata blocks.
 *
 * In the reserve it goes at one end, the end the current checkpoint is not
 * at: once the current one is freed the rest of the reserve is one run
 * again, so checkpoints of up to half the reserve always fit, however full
 * and fragmented the data area is.  Placed first fit right after the old
 * one instead, a checkpoint that had grown split the reserve into two runs
 * each too short for the next, and the file system could no longer be
 * unmounted or mounted (ENOSPC).
 *
 * Otherwise (neither end is free): the allocator's longest runs.  Short
 * runs it hands out are held (so the next try finds another run) and given
 * back.
 */
static int ckpt_alloc(struct tfs *fs, uint64_t want, uint64_t *blk)
{
	struct { uint64_t blk, n; } held[CKPT_ALLOC_TRIES];
	int nheld = 0, ret = -ENOSPC;
	uint64_t rs, re;

	/* The previous checkpoint's blocks may still be held for their
	 * discard: the reserve's ends must be free again before the claims. */
	if (alloc_held_blocks(fs->alloc))
		discard_flush(fs);
	if (alloc_reserve_range(fs->alloc, &rs, &re) == 0 && want <= re - rs) {
		uint64_t cur = fs->sb.ckpt_start;
		/* The top end first unless the current checkpoint is in the
		 * reserve's upper half. */
		bool top = !(fs->sb.ckpt_blocks && cur >= rs + (re - rs) / 2 && cur < re);
		uint64_t cand[2] = { top ? re - want : rs, top ? rs : re - want };

		for (int i = 0; i < 2; i++) {
			if (alloc_claim(fs->alloc, cand[i], want) == 0) {
				*blk = cand[i];
				return 0;
			}
		}
	}
	for (int i = 0; i < CKPT_ALLOC_TRIES; i++) {
		uint64_t b, got;

		if (alloc_get(fs->alloc, want, 0, ALLOC_META, &b, &got) < 0)
			break;
		if (got == want) {
			*blk = b;
			ret = 0;
			break;
		}
		held[nheld].blk = b;
		held[nheld].n = got;
		nheld++;
	}
	for (int i = 0; i < nheld; i++)
		alloc_put(fs->alloc, held[i].blk, held[i].n);
	return ret;
}

static int write_blocks(struct mirror *m, uint64_t blk, const uint8_t *buf, uint64_t n)
{
	for (uint64_t off = 0; off < n; off += CKPT_IO_BLOCKS) {
		uint32_t k = (uint32_t)(n - off < CKPT_IO_BLOCKS ? n - off : CKPT_IO_BLOCKS);
		int ret = mirror_write(m, blk + off, buf + off * TFS_BLOCK_SIZE, k);

		if (ret < 0)
			return ret;
	}
	return 0;
}

/* The checkpoint as written at @start: the checksum table (@table blocks)
 * then the serialized records, zero-padded; a buffer the caller frees. */
static int ckpt_image(const struct log_buf *lb, uint64_t start, uint64_t table,
		      uint64_t payload, uint8_t **out)
{
	uint64_t total = table + payload;
	uint8_t *buf;

	if (posix_memalign((void **)&buf, TFS_BLOCK_SIZE, total * TFS_BLOCK_SIZE))
		return -ENOMEM;
	memset(buf, 0, total * TFS_BLOCK_SIZE);
	memcpy(buf + table * TFS_BLOCK_SIZE, lb->p, lb->len);
	for (uint64_t i = 0; i < payload; i++) {
		uint64_t phys = start + table + i;

		le64_put(buf + i * 8,
			 csum_block(buf + (table + i) * TFS_BLOCK_SIZE, phys));
	}
	*out = buf;
	return 0;
}

/* This file's superblock fields: where the checkpoint @buf (written at
 * @start, @bytes of records) and the bitmap are, and where the log goes on
 * after @seq. */
static void ckpt_fill_sb(struct tfs *fs, uint64_t start, uint64_t table, uint64_t payload,
			 uint64_t bytes, const uint8_t *buf, uint64_t seq, uint64_t pos,
			 const struct wib_loc *wib)
{
	fs->sb.ckpt_start = start;
	fs->sb.ckpt_blocks = table + payload;
	fs->sb.ckpt_bytes = bytes;
	fs->sb.ckpt_table_csum = csum_buf(buf, table * TFS_BLOCK_SIZE,
					  ckpt_table_seed(fs->sb.fs_uuid));
	fs->sb.ckpt_seq = seq;
	fs->sb.log_head_pos = pos;
	fs->sb.log_head_seq = seq + 1;
	fs->sb.next_ino = atomic_load(&fs->next_ino);
	fs->sb.wib_start = wib->start;
	fs->sb.wib_blocks = wib->blocks;
	fs->sb.wib_shift = wib->start ? wib->shift : 0;
	fs->sb.wib_csum = wib->csum;
}

int ckpt_write(struct tfs *fs)
{
	struct log_buf lb;
	uint64_t seq, pos, payload, table, total, start = 0;
	uint64_t prev_start, prev_blocks;
	struct super old;
	struct wib_loc wib = { 0 };
	uint8_t *buf = NULL;
	int ret;

	/* Memory is ahead of the log by a transaction that failed: writing
	 * it would keep half an operation (a rename's new name without the
	 * old one gone), or one its caller was told failed.  The log and the
	 * last checkpoint stay what the next mount recovers, as after a
	 * crash; the unmount does not mark the file system clean. */
	if (atomic_load(&fs->unlogged)) {
		if (!atomic_exchange(&fs->unlogged_said, true))
			tfs_log(LOG_ERR, "not writing checkpoints: memory holds a metadata "
				"transaction that failed; the next mount recovers from the log");
		return -EROFS;
	}
	if (fs->v2) {
		ret = ckpt_v2_write(fs);
		/* A record the mount's replay kept pending that the
		 * checkpoint's changes did not reach (ckpt_v2_write): applied,
		 * so the second one has it. */
		return ret == -EAGAIN ? ckpt_v2_write(fs) : ret;
	}
	log_buf_init(&lb);
	pthread_mutex_lock(&fs->ckpt_mu);

	/* Everything <= seq is applied in memory and durable; records after it
	 * stay in the log from pos on and are replayed over the checkpoint
	 * (state records: re-applying one the checkpoint already holds is
	 * harmless). */
	ret = log_barrier(fs->log, &seq, &pos);
	if (ret < 0)
		goto out;
	ret = ckpt_serialize(fs, &lb);
	if (ret < 0)
		goto out;

	ckpt_geom(lb.len, &payload, &table);
	total = table + payload;
	if (total == 0) {	/* there is always a root directory */
		ret = -EINVAL;
		goto out;
	}
	ret = ckpt_alloc(fs, total, &start);
	if (ret < 0)
		goto out;
	ret = ckpt_image(&lb, start, table, payload, &buf);
	if (ret == 0)
		ret = write_blocks(&fs->mirror, start, buf, total);
	if (ret < 0)
		goto out_put;
	/* The write-intent bitmap as of the barrier: later writes are in log
	 * records after it, which mount marks again while replaying. */
	ret = wib_write(fs, &wib);
	if (ret < 0)
		goto out_put;
	/* The checkpoint (and every data block the metadata in it points to)
	 * must be durable before any superblock points at it. */
	ret = mirror_flush(&fs->mirror);
	if (ret < 0)
		goto out_put;

	old = fs->sb;
	prev_start = fs->sb.ckpt_start;
	prev_blocks = fs->sb.ckpt_blocks;
	ckpt_fill_sb(fs, start, table, payload, lb.len, buf, seq, pos, &wib);
	/* The other fields belong to the services that registered with the
	 * superblock commit; it fills them, the device states and the
	 * generation, and writes and flushes the superblock. */
	ret = atomic_load(&fs->unlogged) ? -EROFS : sbc_commit(fs);	/* ckpt_write's */
	if (ret < 0) {
		/* No device took the new superblock; the old checkpoint remains
		 * the durable one, so keep its blocks and drop the new ones. */
		fs->sb = old;
		goto out_put;
	}

	log_set_head(fs->log, pos, seq + 1);
	atomic_fetch_add(&fs->ckpt_writes, 1);
	atomic_fetch_add(&fs->ckpt_written_blocks, total);
	/*
	 * The durable superblock no longer names them, but the other slot
	 * still does: if the newest superblock is lost on every device, mount
	 * (-o rescue) and fsck fall back to that slot and read this
	 * checkpoint.  So its blocks are freed, never discarded: the next
	 * checkpoint goes to the other end of the reserve, and they keep their
	 * content until the one after overwrites them.
	 */
	if (prev_blocks)
		alloc_put(fs->alloc, prev_start, prev_blocks);
	wib_put(fs, old.wib_start, old.wib_blocks);
	goto out;

out_put:
	wib_put(fs, wib.start, wib.blocks);
	alloc_put(fs->alloc, start, total);
out:
	pthread_mutex_unlock(&fs->ckpt_mu);
	free(buf);
	log_buf_free(&lb);
	return ret;
}

/* ---- load ---- */

struct load_ctx {
	struct tfs *fs;
	struct meta_tx drops;	/* ignored: the allocator is rebuilt after load */
};

static int load_rec(void *ctx, const struct log_rec *r)
{
	struct load_ctx *lc = ctx;

	return meta_apply(lc->fs, r, &lc->drops);
}

int ckpt_load(struct tfs *fs)
{
	const struct super *sb = &fs->sb;
	uint64_t table, payload, *csums = NULL;
	uint8_t *tbuf = NULL, *pbuf = NULL;
	struct load_ctx lc = { .fs = fs };
	int ret = -EUCLEAN;

	if (sb->version == SUPER_VERSION_V2)
		return ckpt_v2_load(fs);
	if (sb->ckpt_blocks == 0)
		return 0;
	ckpt_geom(sb->ckpt_bytes, &payload, &table);
	if (table + payload != sb->ckpt_blocks || sb->ckpt_start < sb->data_start ||
	    sb->ckpt_start + sb->ckpt_blocks > sb->total_blocks ||
	    table > UINT32_MAX)
		return -EUCLEAN;

	if (posix_memalign((void **)&tbuf, TFS_BLOCK_SIZE, table * TFS_BLOCK_SIZE) ||
	    posix_memalign((void **)&pbuf, TFS_BLOCK_SIZE, payload * TFS_BLOCK_SIZE) ||
	    !(csums = malloc(payload * sizeof(*csums)))) {
		ret = -ENOMEM;
		goto out;
	}

	/* The table is checked as a whole against the superblock; take the
	 * first healthy copy that verifies. */
	for (unsigned i = 0; i < fs->mirror.ndevs; i++) {
		if (!fs->mirror.devs[i] || atomic_load(&fs->mirror.state[i]) != MDEV_OK)
			continue;
		if (mirror_read_dev(&fs->mirror, i, sb->ckpt_start, tbuf, (uint32_t)table) < 0)
			continue;
		if (csum_buf(tbuf, table * TFS_BLOCK_SIZE, ckpt_table_seed(sb->fs_uuid)) ==
		    sb->ckpt_table_csum) {
			ret = 0;
			break;
		}
	}
	if (ret < 0)
		goto out;
	for (uint64_t i = 0; i < payload; i++)
		csums[i] = le64_get(tbuf + i * 8);

	for (uint64_t off = 0; off < payload; off += CKPT_IO_BLOCKS) {
		uint32_t k = (uint32_t)(payload - off < CKPT_IO_BLOCKS ? payload - off
							       : CKPT_IO_BLOCKS);

		ret = mirror_read(&fs->mirror, sb->ckpt_start + table + off,
				  pbuf + off * TFS_BLOCK_SIZE, k, csums + off, NULL);
		if (ret < 0)
			goto out;
	}

	meta_tx_init(&lc.drops);
	ret = log_decode(pbuf, sb->ckpt_bytes, load_rec, &lc);
	meta_tx_free(&lc.drops);
	if (ret > 0)
		ret = -EUCLEAN;
out:
	free(csums);
	free(tbuf);
	free(pbuf);
	return ret;
}
