// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * reflink: copy_file_range (tfs_copy_range).  Whole aligned blocks are
 * shared, not copied: the source block gains a reference and the
 * destination maps the same physical block with the same checksum (the
 * checksum is seeded with the physical block, not the file position, so it
 * stays valid).  Unaligned edges are copied through a bounce buffer with
 * the ordinary copy-on-write write path of file.c.
 *
 * Locking: both inodes whole, in increasing ino order; the destination
 * exclusively, the source shared (see file.c and fs_i.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "file_i.h"
#include "fs_i.h"

/* Most one copy_range call does (a short count; callers loop): bounds the
 * log it writes while holding the inodes, which a checkpoint would need. */
#define COPY_MAX (64u << 20)

struct copy_ctx {
	const uint8_t *src;
};

static int fill_copy(void *ctx, void *dst, size_t len)
{
	memcpy(dst, ((struct copy_ctx *)ctx)->src, len);
	return 0;
}

/* Copy bytes through memory: read [soff, soff+n) of src, CoW-write to dst. */
static int copy_bytes(struct tfs *fs, struct tfs_inode *src, uint64_t soff,
		      struct tfs_inode *dst, uint64_t doff, size_t n, uint8_t *tmp,
		      uint8_t *buf)
{
	uint64_t fb0 = soff / BS;
	uint32_t nblk = (uint32_t)(file_div_up(soff + n, BS) - fb0);
	struct copy_ctx c = { tmp + soff % BS };
	int ret;

	ret = file_read_blocks(fs, src, fb0, nblk, tmp);
	if (ret)
		return ret;
	return file_write_locked(fs, dst, doff, n, fill_copy, &c, buf, NULL);
}

/*
 * Share nblk whole source blocks at sfb into the destination at dfb:
 * mapped blocks gain a reference and the same (phys, csum) in the
 * destination (the csum is seeded with phys, so it stays valid); holes and
 * unwritten blocks become holes.  Source entries are all read before the
 * commit, so an overlapping same-file chunk reads the old mapping.
 */
#define SHARE_SKIP EXTENT_UNWRITTEN	/* never a written block's phys */

/* The entry of @fblk with a hole as phys 0: 0 or -errno (-EIO once the
 * map is read from disk, format v2). */
static int ent_get(struct tfs_inode *ip, uint64_t fblk, struct extent_ent *e)
{
	int ret = inode_extent_lookup(ip, fblk, e);

	return ret == -ENOENT ? 0 : ret;
}

static int share_blocks(struct tfs *fs, struct tfs_inode *src, uint64_t sfb,
			struct tfs_inode *dst, uint64_t dfb, uint32_t nblk, uint64_t newsize)
{
	struct extent_ent *e = malloc(nblk * sizeof(*e));
	uint64_t *csums = malloc(nblk * sizeof(*csums));
	struct meta_tx tx;
	uint32_t i = 0;
	int ret = 0;

	if (!e || !csums) {
		free(e);
		free(csums);
		return -ENOMEM;
	}
	for (uint32_t k = 0; k < nblk && !ret; k++) {
		struct extent_ent d;

		ret = ent_get(src, sfb + k, &e[k]);
		if (e[k].phys & EXTENT_UNWRITTEN)
			e[k].phys = 0;
		csums[k] = e[k].csum;
		/* Already shared there (a repeated reflink): the map would
		 * keep its one reference, so take none. */
		if (!ret)
			ret = ent_get(dst, dfb + k, &d);
		if (!ret && e[k].phys && d.phys == e[k].phys)
			e[k].phys = SHARE_SKIP;
	}
	if (ret) {
		free(e);
		free(csums);
		return ret;
	}
	meta_tx_init(&tx);
	while (i < nblk && !ret) {
		uint32_t n = 1;

		if (e[i].phys == SHARE_SKIP) {
			/* nothing to change */
		} else if (e[i].phys == 0) {
			while (i + n < nblk && e[i + n].phys == 0)
				n++;
			ret = file_clear_rec(&tx, inode_ino(dst), dfb + i, n);
		} else {
			struct log_rec r = { .type = LR_EXT_SET };

			while (i + n < nblk && n < LOG_EXT_MAX_BLOCKS &&
			       e[i + n].phys == e[i].phys + n)
				n++;
			ret = alloc_use(fs->alloc, e[i].phys, n);
			if (ret)
				break;
			r.ext.ino = inode_ino(dst);
			r.ext.fblk = dfb + i;
			r.ext.phys = e[i].phys;
			r.ext.n = n;
			r.ext.csums = &csums[i];
			ret = meta_tx_add(&tx, &r);
			if (ret) {
				alloc_put(fs->alloc, e[i].phys, n);
				break;
			}
		}
		i += n;
	}
	if (!ret)
		ret = file_commit_inode(fs, dst, &tx, newsize, false, T_MTIME | T_CTIME, NULL);
	if (ret) {
		/* Drop the references taken (runs before i) for blocks the
		 * destination map did not get. */
		for (uint32_t k = 0; k < i && k < nblk; k++) {
			struct extent_ent d;

			if (!e[k].phys || e[k].phys == SHARE_SKIP)
				continue;
			/* A map that cannot be read keeps the reference:
			 * leaked until the next mount, never freed early. */
			if (!ent_get(dst, dfb + k, &d) && d.phys != e[k].phys)
				alloc_put(fs->alloc, e[k].phys, 1);
		}
	}
	meta_tx_free(&tx);
	free(e);
	free(csums);
	return ret;
}

/*
 * One chunk of at most TFS_IO_MAX bytes: the aligned middle is shared, the
 * rest copied.  Blocks can be shared when both offsets have the same
 * position in their block; a final partial block is shared too when it ends
 * at the source EOF and the copy ends at or past the destination EOF (both
 * tails past EOF are then zero).
 */
static int copy_chunk(struct tfs *fs, struct tfs_inode *src, uint64_t soff,
		      struct tfs_inode *dst, uint64_t doff, size_t n, uint8_t *tmp,
		      uint8_t *buf, bool backward)
{
	size_t head = 0, mid = 0, tail;
	int ret = 0;

	if (soff % BS == doff % BS) {
		uint64_t ssize = file_isize(src), dsize = file_isize(dst);

		head = soff % BS ? BS - soff % BS : 0;
		if (head > n)
			head = n;
		mid = (n - head) / BS * BS;
		if (head + mid < n && soff + n == ssize && doff + n >= dsize)
			mid = n - head;		/* shareable EOF block */
	}
	tail = n - head - mid;
	/* Each piece reads its source before writing; pieces go in memmove
	 * order so an overlapping same-file copy never reads its own output. */
	if (backward && tail)
		ret = copy_bytes(fs, src, soff + head + mid, dst, doff + head + mid,
				 tail, tmp, buf);
	if (!ret && !backward && head)
		ret = copy_bytes(fs, src, soff, dst, doff, head, tmp, buf);
	if (!ret && mid)
		ret = share_blocks(fs, src, (soff + head) / BS, dst, (doff + head) / BS,
				   (uint32_t)file_div_up(mid, BS), doff + head + mid);
	if (!ret && backward && head)
		ret = copy_bytes(fs, src, soff, dst, doff, head, tmp, buf);
	if (!ret && !backward && tail)
		ret = copy_bytes(fs, src, soff + head + mid, dst, doff + head + mid,
				 tail, tmp, buf);
	return ret;
}

ssize_t tfs_copy_range(struct tfs_file *in, off_t off_in, struct tfs_file *out,
		       off_t off_out, size_t len)
{
	struct tfs *fs = out->fs;
	struct tfs_inode *src = in->ip, *dst = out->ip;
	struct rl_range rs, rd;
	uint64_t soff, doff, ssize, chunks;
	uint32_t dflags;
	struct fs_resv resv;
	uint8_t *buf, *tmp = NULL;
	size_t done = 0;
	bool backward;
	int ret = 0;

	if (off_in < 0 || off_out < 0)
		return -EINVAL;
	if (!file_writable(out->flags) || (out->flags & O_APPEND) ||
	    (in->flags & O_ACCMODE) == O_WRONLY)
		return -EBADF;
	if (fs->readonly)
		return -EROFS;
	if (len == 0)
		return 0;
	if (len > COPY_MAX)
		len = COPY_MAX;
	soff = (uint64_t)off_in;
	doff = (uint64_t)off_out;
	if (doff + len > MAX_BYTES || doff + len < doff)
		return -EFBIG;
	if (posix_memalign((void **)&tmp, BS, FS_BOUNCE_SIZE))
		return -ENOMEM;

	buf = bounce_get(fs->bounce);
	/* At most len bytes of the destination change, however the source's
	 * size cuts it below. */
	chunks = fs_resv_chunks(doff, len);
	ret = fs_data_reserve(fs, true, chunks, chunks, &resv);
	if (ret)
		goto out_buf;
	/* Two inodes in increasing ino order; the source only shared. */
	if (src == dst) {
		rl_lock(inode_rl(dst), &rd, 0, RL_EOF, true);
	} else if (inode_ino(src) < inode_ino(dst)) {
		rl_lock(inode_rl(src), &rs, 0, RL_EOF, false);
		rl_lock(inode_rl(dst), &rd, 0, RL_EOF, true);
	} else {
		rl_lock(inode_rl(dst), &rd, 0, RL_EOF, true);
		rl_lock(inode_rl(src), &rs, 0, RL_EOF, false);
	}

	ssize = file_isize(src);
	/* chattr (see file_write.c's w_flags_ok): no copy into an immutable
	 * file, nor below an append-only one's end. */
	dflags = inode_flags_relaxed(dst);
	if ((dflags & TFS_FL_IMMUTABLE) || ((dflags & TFS_FL_APPEND) && doff < file_isize(dst)))
		ret = -EPERM;
	if (ret || soff >= ssize)
		len = 0;
	else if (len > ssize - soff)
		len = ssize - soff;
	if (src == dst && soff == doff)
		done = len;	/* copying onto itself changes nothing */
	/* Same file, destination after an overlapping source: go backwards
	 * so no source byte is overwritten before it is read (memmove). */
	backward = src == dst && doff > soff && doff < soff + len;
	while (done < len) {
		size_t rem = len - done, n = rem > TFS_IO_MAX ? TFS_IO_MAX : rem;
		uint64_t pos;

		/* Chunk boundaries on source block boundaries, so aligned
		 * copies share every whole block. */
		if (!backward) {
			pos = done;
			if (n < rem)
				n -= (soff + pos + n) % BS;
		} else {
			pos = rem - n;
			if (pos) {
				size_t adj = (BS - (soff + pos) % BS) % BS;

				n -= adj;
				pos += adj;
			}
		}
		ret = copy_chunk(fs, src, soff + pos, dst, doff + pos, n, tmp, buf, backward);
		if (ret)
			break;
		done += n;
	}

	if (src != dst)
		rl_unlock(inode_rl(src), &rs);
	rl_unlock(inode_rl(dst), &rd);
out_buf:
	fs_data_release(fs, &resv);	/* noted, or failed */
	bounce_put(fs->bounce, buf);
	free(tmp);
	if (ret && !done)
		return ret;
	return (ssize_t)done;
}
