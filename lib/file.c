// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * file: the data path.  Open/release of regular files, read, truncate,
 * fallocate and SEEK_DATA/SEEK_HOLE, and the copy-on-write placement and
 * transaction helpers the write pipeline (file_write.c) is built from
 * (copy_file_range: reflink.c; create: namei.c).
 *
 * Writes are copy-on-write: the caller's bytes are copied once into a bounce
 * buffer (with the old content of partially written edge blocks read around
 * them), checksummed there, written to newly allocated blocks on every mirror
 * at once (a fallocated, never written block is its own target: see struct
 * cow), and only then published by one metadata transaction (LR_EXT_SET
 * per physical run + LR_INODE) whose commit drops the old blocks into the
 * deferred-free list.  A crash therefore leaves every block with its old or
 * its new content, never a torn mix.
 *
 * Locking (see fs_i.h for the global order): the data path never takes
 * fs->ns_lock or any other global lock.  A non-extending write locks only its
 * blocks in the inode's range lock, so disjoint writers to one file run fully
 * in parallel; extending writes, truncate, fallocate and the destination of
 * copy_range lock the whole inode exclusively.  The size only changes under
 * a whole-inode exclusive range lock, so any range-lock holder sees a stable
 * size.  The inode lock is held only around meta_tx_commit().  Bounce buffers and
 * log space are obtained BEFORE any lock: a holder of a range lock waiting
 * for a bounce buffer held by a thread queued on that range lock would
 * deadlock, and log_wait_space() may need a checkpoint, which takes inode
 * locks.
 *
 * Invariant relied on by reads and extending writes: the bytes of the last
 * block past EOF are zero (truncate zeroes them copy-on-write; blocks past
 * EOF are otherwise only holes or unwritten fallocate blocks).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "event.h"
#include "extcache.h"
#include "file_i.h"
#include "fs_i.h"
#include "prof.h"

#define IO_BLOCKS FILE_IO_BLOCKS
#define FALLOC_PIECE_BLOCKS (64u << 20 >> TFS_BLOCK_SHIFT) /* commit fallocate every 64 MiB */

static const uint64_t zero_csums[LOG_EXT_MAX_BLOCKS];	/* unwritten blocks */

/* ---- transactions ---- */

/*
 * Add an LR_INODE for @ip and commit @tx under the inode lock.  The size and times
 * go through the record, never by hand: meta_tx_commit applies it to memory.
 * @size is the new size if @exact, else a lower bound (max with the current).
 */
/* Inode lock held: add the LR_INODE and commit @tx; with @nowait only into
 * room reserved in the log beforehand (-EAGAIN, nothing done, if none). */
static int commit_inode_locked(struct tfs *fs, struct tfs_inode *ip, struct meta_tx *tx,
			       uint64_t size, bool exact, int times, uint64_t *s, bool nowait)
{
	struct log_rec r;
	/* Coarse: one probe per write would cost more than the daemon's
	 * whole metadata update, and on the default mount the kernel keeps
	 * (and later sends) its own mtime for written files anyway. */
	int64_t now = fs_ts_ns(ktime_coarse());
	int ret;

	memset(&r, 0, sizeof(r));
	fs_iencode(ip, &r);
	if (!exact && r.inode.size > size)
		size = r.inode.size;
	r.inode.size = size;
	if (times & T_MTIME)
		r.inode.mtime_ns = now;
	/* Never back: a setattr that came after the write began may have
	 * stamped a finer clock's later ctime already. */
	if ((times & T_CTIME) && now > r.inode.ctime_ns)
		r.inode.ctime_ns = now;
	ret = meta_tx_add(tx, &r);
	if (!ret && nowait && fs->log && log_reserve(fs->log, &tx->buf))
		ret = -EAGAIN;
	if (!ret)
		ret = meta_tx_commit(fs, tx, s);
	if (fs->log)
		log_unreserve(fs->log, &tx->buf);	/* if the append did not happen */
	if (!ret)
		inode_note_seq(ip, *s);
	return ret;
}

int file_commit_inode(struct tfs *fs, struct tfs_inode *ip, struct meta_tx *tx,
		      uint64_t size, bool exact, int times, uint64_t *seq)
{
	uint64_t s = 0, t0 = prof_begin();
	int ret;

	inode_lock(ip);
	ret = commit_inode_locked(fs, ip, tx, size, exact, times, &s, false);
	inode_unlock(ip);
	prof_end(PROF_META, t0);
	if (seq)
		*seq = s;
	return ret;
}

int file_commit_write(struct tfs *fs, struct tfs_inode *ip, struct meta_tx *tx, uint64_t end,
		      uint32_t mtime_gen, bool nowait, uint64_t *seq)
{
	uint64_t s = 0, t0 = prof_begin();
	int times = T_CTIME;
	int ret;

	/* A holder of the inode lock may be running a log commit. */
	if (!nowait)
		inode_lock(ip);
	else if (inode_trylock(ip))
		return -EAGAIN;
	/* Under the lock the setattr logs its record in: either it comes
	 * after this one in the log, or this one carries its mtime. */
	if (inode_mtime_gen(ip) == mtime_gen)
		times |= T_MTIME;
	ret = commit_inode_locked(fs, ip, tx, end, false, times, &s, nowait);
	if (!ret && !(times & T_MTIME))
		atomic_fetch_add(&fs->mtime_kept, 1);
	inode_unlock(ip);
	prof_end(PROF_META, t0);
	if (seq)
		*seq = s;
	return ret;
}

/* Commit @tx (extent records only) under the inode lock. */
static int commit_plain(struct tfs *fs, struct tfs_inode *ip, struct meta_tx *tx)
{
	uint64_t s = 0;
	int ret;

	inode_lock(ip);
	ret = meta_tx_commit(fs, tx, &s);
	if (!ret)
		inode_note_seq(ip, s);
	inode_unlock(ip);
	return ret;
}

/* ---- copy-on-write of staged blocks ---- */

void file_cow_put(struct tfs *fs, struct cow *cw)
{
	for (uint32_t i = 0; i < cw->nruns; i++)
		if (cw->runs[i].fresh)
			alloc_put(fs->alloc, cw->runs[i].phys, cw->runs[i].n);
	cw->nruns = 0;
}

/*
 * After a failed commit: give back the new blocks the map does not point to
 * (if the records were applied before the failure, the map owns them).
 * Caller holds the range lock, so the map entries are stable.  A block
 * whose entry cannot be read is kept: leaked space (fsck finds it) rather
 * than a block freed under the map.
 */
void file_cow_undo(struct tfs *fs, struct tfs_inode *ip, struct cow *cw)
{
	for (uint32_t i = 0; i < cw->nruns; i++) {
		if (!cw->runs[i].fresh)
			continue;
		for (uint32_t j = 0; j < cw->runs[i].n; j++) {
			struct extent_ent e;
			uint64_t phys = cw->runs[i].phys + j;

			if (file_extent(ip, cw->fblk + cw->runs[i].off + j, &e))
				continue;
			if (e.phys != phys)
				alloc_put(fs->alloc, phys, 1);
		}
	}
	cw->nruns = 0;
}

/* The unwritten block behind file block @fblk in *blk, 0 if none: 0 or the
 * lookup's error. */
static int unwritten_at(struct tfs_inode *ip, uint64_t fblk, uint64_t *blk)
{
	struct extent_ent e;
	int ret = file_extent(ip, fblk, &e);

	*blk = (e.phys & EXTENT_UNWRITTEN) ? EXTENT_PHYS(e.phys) : 0;
	return ret;
}

/* Place 1 <= nblk <= IO_BLOCKS staged blocks (new blocks, or their own
 * unwritten ones) and checksum them.  Caller holds the range lock over
 * them.  On error nothing stays allocated. */
int file_cow_place(struct tfs *fs, struct tfs_inode *ip, uint64_t fblk, uint32_t nblk,
		   const uint8_t *buf, struct cow *cw)
{
	uint32_t done = 0;
	bool retried = false;
	uint64_t t0;
	int ret;

	cw->fblk = fblk;
	cw->nblk = nblk;
	cw->nruns = 0;
	while (done < nblk) {
		uint64_t blk, next, got = 1, want = 1;
		bool fresh;

		ret = unwritten_at(ip, fblk + done, &blk);
		if (ret)
			goto fail;
		fresh = !blk;
		if (!fresh) {
			while (done + got < nblk) {
				ret = unwritten_at(ip, fblk + done + got, &next);
				if (ret)
					goto fail;
				if (next != blk + got)
					break;
				got++;
			}
		} else {
			/* Allocate for the stretch up to the next unwritten block. */
			while (done + want < nblk) {
				ret = unwritten_at(ip, fblk + done + want, &next);
				if (ret)
					goto fail;
				if (next)
					break;
				want++;
			}
			t0 = prof_begin();
			ret = alloc_get(fs->alloc, want, inode_ino(ip), ALLOC_DATA, &blk, &got);
			prof_end(PROF_ALLOC, t0);
			if (ret == -ENOSPC && !retried) {
				/* Deferred frees wait for a durable commit: force
				 * one (we hold no inode lock the log needs), retry. */
				retried = true;
				if (log_commit(fs->log, UINT64_MAX) == 0)
					continue;
			}
			if (ret)
				goto fail;
			event_space_check(fs);
			if (got > want)
				got = want;
		}
		cw->runs[cw->nruns].phys = blk;
		cw->runs[cw->nruns].off = done;
		cw->runs[cw->nruns].n = (uint32_t)got;
		cw->runs[cw->nruns].fresh = fresh;
		cw->nruns++;
		t0 = prof_begin();
		for (uint32_t i = 0; i < got; i++)
			cw->csums[done + i] = csum_block(buf + (size_t)(done + i) * BS, blk + i);
		prof_end(PROF_CSUM, t0);
		done += (uint32_t)got;
	}
	return 0;
fail:
	file_cow_put(fs, cw);
	return ret;
}

/* file_cow_place, then write the blocks to every mirror at once. */
static int cow_write(struct tfs *fs, struct tfs_inode *ip, uint64_t fblk, uint32_t nblk,
		     const uint8_t *buf, struct cow *cw)
{
	int ret = file_cow_place(fs, ip, fblk, nblk, buf, cw);

	return ret ? ret : file_cow_write(fs, buf, cw);
}

int file_cow_records(struct meta_tx *tx, uint64_t ino, const struct cow *cw)
{
	for (uint32_t i = 0; i < cw->nruns; i++) {
		struct log_rec r = { .type = LR_EXT_SET };
		int ret;

		r.ext.ino = ino;
		r.ext.fblk = cw->fblk + cw->runs[i].off;
		r.ext.phys = cw->runs[i].phys;
		r.ext.n = cw->runs[i].n;
		r.ext.csums = &cw->csums[cw->runs[i].off];
		ret = meta_tx_add(tx, &r);
		if (ret)
			return ret;
	}
	return 0;
}

/* ---- reading blocks (caller holds a range lock over them) ---- */

/* The read plan shared by file_read_blocks and the asynchronous read
 * (file_i.h). */
int file_read_runs(struct tfs_inode *ip, uint64_t fblk, uint32_t nblk, uint8_t *buf,
		   uint64_t *csums, file_run_fn fn, void *ctx)
{
	uint32_t i = 0;

	while (i < nblk) {
		struct extent_ent e;
		uint32_t n = 1;
		uint64_t phys;
		int ret;

		ret = file_extent(ip, fblk + i, &e);
		if (ret)
			return ret;
		if (e.phys == 0 || (e.phys & EXTENT_UNWRITTEN)) {
			memset(buf + (size_t)i * BS, 0, BS);
			i++;
			continue;
		}
		phys = e.phys;
		csums[i] = e.csum;
		while (i + n < nblk && n < IO_BLOCKS) {
			ret = file_extent(ip, fblk + i + n, &e);
			if (ret)
				return ret;
			if (e.phys != phys + n)	/* also stops at holes and unwritten */
				break;
			csums[i + n++] = e.csum;
		}
		ret = fn(ctx, i, phys, n);
		if (ret)
			return ret;
		i += n;
	}
	return 0;
}

struct read_ctx {
	struct tfs *fs;
	uint8_t *buf;
	uint64_t *csums;
};

static int read_run(void *ctx, uint32_t off, uint64_t phys, uint32_t n)
{
	struct read_ctx *c = ctx;

	return mirror_read(&c->fs->mirror, phys, c->buf + (size_t)off * BS, n, c->csums + off,
			   NULL);
}

/* Runs of consecutive physical blocks are one verified mirror_read each. */
int file_read_blocks(struct tfs *fs, struct tfs_inode *ip, uint64_t fblk, uint32_t nblk,
		     uint8_t *buf)
{
	uint64_t csums[IO_BLOCKS];
	struct read_ctx c = { fs, buf, csums };

	if (nblk > IO_BLOCKS)
		return -EINVAL;
	return file_read_runs(ip, fblk, nblk, buf, csums, read_run, &c);
}

/* ---- open / release ---- */

int file_open_ip(struct tfs *fs, struct tfs_inode *ip, int flags, struct tfs_file **out)
{
	struct tfs_file *f;
	uint32_t mode;
	int ret;

	inode_lock(ip);
	mode = inode_mode(ip);
	inode_unlock(ip);
	if (S_ISDIR(mode))
		return -EISDIR;
	if (S_ISLNK(mode))
		return -ELOOP;		/* only reachable with O_NOFOLLOW semantics */
	if (!S_ISREG(mode))
		return -EINVAL;		/* the kernel opens device nodes and fifos itself */
	if (fs->readonly && (file_writable(flags) || (flags & O_TRUNC)))
		return -EROFS;
	if (file_writable(flags) || (flags & O_TRUNC)) {
		bool app = (flags & (O_APPEND | TFS_O_APPEND_ASKED)) && !(flags & O_TRUNC);

		inode_lock(ip);
		ret = inode_may_change(ip, !app);
		inode_unlock(ip);
		if (ret)
			return ret;
	}
	flags &= ~TFS_O_APPEND_ASKED;

	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->fs = fs;
	f->ip = inode_grab(ip);	/* the memory, for as long as f lives */
	f->flags = flags;
	/* Count the open before truncating so a concurrent unlink + forget
	 * cannot delete the inode under us. */
	inode_open_add(ip);
	/* Also for O_RDONLY: Linux truncates then (the kernel has checked
	 * write permission), and under atomic_o_trunc nobody else will. */
	if (flags & O_TRUNC) {
		ret = file_truncate(fs, ip, 0);
		if (ret) {
			tfs_release(f);
			return ret;
		}
	}
	*out = f;
	return 0;
}

int tfs_open(struct tfs *fs, uint64_t ino, int flags, struct tfs_file **f)
{
	struct tfs_inode *ip;
	int ret = inode_get(fs, ino, &ip);

	if (ret)
		return ret;
	ret = file_open_ip(fs, ip, flags, f);
	inode_put(fs, ip);
	return ret;
}

int tfs_release(struct tfs_file *f)
{
	struct tfs *fs = f->fs;
	struct tfs_inode *ip = f->ip;

	free(f);
	/* The open first (nopen--, and the delete of an unlinked inode under
	 * ns_lock), then the handle: if the delete took the inode out of the
	 * table, ours is the last reference and frees its memory. */
	fs_iput_open(fs, ip);
	inode_put(fs, ip);
	return 0;
}

uint64_t tfs_file_ino(const struct tfs_file *f)
{
	return inode_ino(f->ip);
}

/* ---- read ---- */

/*
 * No atime update: the file system has noatime semantics (a read never
 * writes metadata, so reads scale and never wait for the log).
 * On success with data, *buf must be given back with tfs_buf_put(); with 0 or
 * an error *buf is NULL (tfs_buf_put(NULL) is a no-op).
 */
ssize_t tfs_read(struct tfs_file *f, off_t off, size_t len, void **buf, size_t *data_off)
{
	struct tfs *fs = f->fs;
	struct tfs_inode *ip = f->ip;
	struct rl_range r;
	uint64_t size, fb0, nblk;
	uint8_t *b;
	size_t n = 0;
	int ret = 0;

	*buf = NULL;
	*data_off = 0;
	if (off < 0)
		return -EINVAL;
	if (len > TFS_IO_MAX)
		len = TFS_IO_MAX;	/* a short read is allowed */
	if (len == 0 || (uint64_t)off >= file_isize(ip))
		return 0;
	if (bounce_buf_size(fs->bounce) < FS_BOUNCE_SIZE)
		return -EINVAL;

	b = fs_buf_get(fs, len);
	fb0 = (uint64_t)off / BS;
	rl_lock(inode_rl(ip), &r, fb0, file_div_up((uint64_t)off + len, BS), false);
	size = file_isize(ip);
	if ((uint64_t)off < size) {
		n = len;
		if ((uint64_t)off + n > size)
			n = size - (uint64_t)off;
		nblk = file_div_up((uint64_t)off + n, BS) - fb0;
		ret = file_read_blocks(fs, ip, fb0, (uint32_t)nblk, b);
	}
	rl_unlock(inode_rl(ip), &r);
	if (ret || n == 0) {
		fs_buf_put(fs, b);
		return ret;
	}
	*buf = b;
	*data_off = (size_t)off % BS;
	return (ssize_t)n;
}

void tfs_buf_put(struct tfs *fs, void *buf)
{
	if (buf)
		fs_buf_put(fs, buf);
}

ssize_t tfs_pread(struct tfs_file *f, void *dst, size_t len, off_t off)
{
	size_t done = 0;

	while (done < len) {
		size_t want = len - done, doff;
		void *buf;
		ssize_t n;

		if (want > TFS_IO_MAX)
			want = TFS_IO_MAX;
		n = tfs_read(f, off + (off_t)done, want, &buf, &doff);
		if (n < 0)
			return done ? (ssize_t)done : n;
		if (n == 0)
			break;
		memcpy((uint8_t *)dst + done, (uint8_t *)buf + doff, (size_t)n);
		tfs_buf_put(f->fs, buf);
		done += (size_t)n;
		if ((size_t)n < want)
			break;
	}
	return (ssize_t)done;
}

/* ---- truncate and punch ---- */

/*
 * Zero bytes [from, to) of file block fblk copy-on-write, adding its
 * LR_EXT_SET to tx.  Holes and unwritten blocks already read as zeros.
 * Caller holds the inode exclusively.  cw->nruns is 0 if nothing was written.
 */
static int zero_block_range(struct tfs *fs, struct tfs_inode *ip, uint64_t fblk,
			    size_t from, size_t to, uint8_t *buf, struct meta_tx *tx,
			    struct cow *cw)
{
	struct extent_ent e;
	int ret;

	cw->nruns = 0;
	ret = file_extent(ip, fblk, &e);
	if (ret || e.phys == 0 || (e.phys & EXTENT_UNWRITTEN) || from >= to)
		return ret;
	ret = file_read_blocks(fs, ip, fblk, 1, buf);
	if (ret)
		return ret;
	memset(buf + from, 0, to - from);
	ret = cow_write(fs, ip, fblk, 1, buf, cw);
	if (ret)
		return ret;
	return file_cow_records(tx, inode_ino(ip), cw);
}

int file_clear_rec(struct meta_tx *tx, uint64_t ino, uint64_t fblk, uint64_t n)
{
	struct log_rec r = { .type = LR_EXT_CLEAR };

	r.clr.ino = ino;
	r.clr.fblk = fblk;
	r.clr.n = n;
	return meta_tx_add(tx, &r);
}

/* Caller holds the inode exclusively; buf is a bounce buffer. */
static int truncate_locked(struct tfs *fs, struct tfs_inode *ip, uint64_t size, uint8_t *buf)
{
	struct cow cw = { .nruns = 0 };
	struct meta_tx tx;
	uint64_t keep = file_div_up(size, BS);	/* blocks that stay */
	int ret = 0;

	meta_tx_init(&tx);
	if (size < file_isize(ip)) {
		/* Keep the invariant: bytes past EOF in the last block are 0. */
		if (size % BS)
			ret = zero_block_range(fs, ip, size / BS, size % BS, BS, buf, &tx, &cw);
		if (!ret && inode_next_data(ip, keep) < EXTENT_MAX_FBLK)
			ret = file_clear_rec(&tx, inode_ino(ip), keep, EXTENT_MAX_FBLK - keep);
	}
	/* Growing is a hole: the old tail past EOF is already zero, and
	 * blocks kept past EOF (KEEP_SIZE) are unwritten, so read as zeros. */
	if (!ret)
		ret = file_commit_inode(fs, ip, &tx, size, true, T_MTIME | T_CTIME, NULL);
	if (ret)
		file_cow_undo(fs, ip, &cw);
	meta_tx_free(&tx);
	return ret;
}

int file_truncate(struct tfs *fs, struct tfs_inode *ip, uint64_t size)
{
	struct fs_resv resv;
	struct rl_range r;
	uint64_t isize;
	uint8_t *buf;
	int ret;

	if (size > MAX_BYTES)
		return -EFBIG;
	if (fs->readonly)
		return -EROFS;
	buf = bounce_get(fs->bounce);
	/* The range it cuts or zeroes, as the size is now; it adds items to
	 * one chunk at most (the new last block). */
	isize = file_isize(ip);
	ret = fs_data_reserve(fs, false, fs_resv_chunks(size < isize ? size : isize,
						       size < isize ? isize - size : size - isize),
			      1, &resv);	/* never refused: it frees */
	if (!ret) {
		rl_lock(inode_rl(ip), &r, 0, RL_EOF, true);
		ret = truncate_locked(fs, ip, size, buf);
		rl_unlock(inode_rl(ip), &r);
	}
	fs_data_release(fs, &resv);
	bounce_put(fs->bounce, buf);
	return ret;
}

static int punch_locked(struct tfs *fs, struct tfs_inode *ip, uint64_t off, uint64_t end,
			uint8_t *buf)
{
	struct cow *cw = malloc(2 * sizeof(*cw));
	uint64_t sb = off / BS, eb = (end - 1) / BS;
	uint64_t full0 = file_div_up(off, BS), full1 = end / BS;
	struct meta_tx tx;
	int ret = 0;

	if (!cw)
		return -ENOMEM;
	cw[0].nruns = cw[1].nruns = 0;
	meta_tx_init(&tx);
	if (off % BS)
		ret = zero_block_range(fs, ip, sb, off % BS,
				       sb == eb ? end - sb * BS : BS, buf, &tx, &cw[0]);
	if (!ret && end % BS && (eb != sb || off % BS == 0))
		ret = zero_block_range(fs, ip, eb, 0, end % BS, buf, &tx, &cw[1]);
	if (!ret && full0 < full1)
		ret = file_clear_rec(&tx, inode_ino(ip), full0, full1 - full0);
	if (!ret)
		ret = file_commit_inode(fs, ip, &tx, 0, false, T_MTIME | T_CTIME, NULL);
	if (ret) {
		file_cow_undo(fs, ip, &cw[0]);
		file_cow_undo(fs, ip, &cw[1]);
	}
	meta_tx_free(&tx);
	free(cw);
	return ret;
}

/* ---- fallocate ---- */

/* Allocated, not yet committed runs of one piece (to give back on error). */
struct runlist {
	struct { uint64_t fblk, phys, n; } *v;
	size_t n, cap;
};

static int runlist_add(struct runlist *l, uint64_t fblk, uint64_t phys, uint64_t n)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 16;
		void *p = realloc(l->v, cap * sizeof(*l->v));

		if (!p)
			return -ENOMEM;
		l->v = p;
		l->cap = cap;
	}
	l->v[l->n].fblk = fblk;
	l->v[l->n].phys = phys;
	l->v[l->n].n = n;
	l->n++;
	return 0;
}

/* Give back blocks of a failed piece the map does not own (a block whose
 * entry cannot be read is kept, as in file_cow_undo). */
static void runlist_undo(struct tfs *fs, struct tfs_inode *ip, struct runlist *l)
{
	for (size_t i = 0; i < l->n; i++) {
		for (uint64_t j = 0; j < l->v[i].n; j++) {
			struct extent_ent e;

			if (file_extent(ip, l->v[i].fblk + j, &e))
				continue;
			if (e.phys != ((l->v[i].phys + j) | EXTENT_UNWRITTEN))
				alloc_put(fs->alloc, l->v[i].phys + j, 1);
		}
	}
	l->n = 0;
}

/* Holes in blocks [fb, fe). */
static uint64_t count_holes(struct tfs_inode *ip, uint64_t fb, uint64_t fe)
{
	uint64_t need = 0, b = inode_next_hole(ip, fb);

	while (b < fe) {
		uint64_t e = inode_next_data(ip, b);

		if (e > fe)
			e = fe;
		need += e - b;
		b = e < fe ? inode_next_hole(ip, e) : fe;
	}
	return need;
}

static int count_unwritten(void *ctx, uint64_t fblk, uint64_t phys, uint32_t n,
			   const struct extent_ent *ents)
{
	(void)fblk;
	(void)ents;
	if (phys & EXTENT_UNWRITTEN)
		*(uint64_t *)ctx += n;
	return 0;
}

int tfs_space_need(struct tfs_file *f, off_t off, uint64_t len, bool alloc, uint64_t *bytes)
{
	struct tfs_inode *ip = f->ip;
	uint64_t fb, fe, n = 0;
	struct rl_range r;
	int ret = 0;

	*bytes = 0;
	if (off < 0 || len == 0 || (uint64_t)off + len < (uint64_t)off ||
	    (uint64_t)off + len > MAX_BYTES)
		return -EINVAL;
	fb = (uint64_t)off / BS;
	fe = file_div_up((uint64_t)off + len, BS);
	rl_lock(inode_rl(ip), &r, fb, fe, false);
	if (alloc)
		n = count_holes(ip, fb, fe);
	else
		ret = inode_extent_walk(ip, fb, fe, count_unwritten, &n);
	rl_unlock(inode_rl(ip), &r);
	if (ret)
		return ret;
	/* A write takes a new block for every block it touches but the
	 * fallocated, never written ones, which it writes in place. */
	*bytes = (alloc ? n : fe - fb - n) * BS;
	return 0;
}

/* -ENOSPC unless @need data blocks are free (after a commit released the
 * deferred frees, if it takes that). */
static int space_check(struct tfs *fs, uint64_t need)
{
	for (int tries = 0;; tries++) {
		uint64_t avail = alloc_free_blocks(fs->alloc), res = alloc_reserve_blocks(fs->alloc);

		avail = avail > res ? avail - res : 0;
		if (need <= avail)
			return 0;
		if (tries || log_commit(fs->log, UINT64_MAX))
			return -ENOSPC;
	}
}

/*
 * Map holes from *fb on (below fe) to newly allocated unwritten blocks (no
 * I/O, csum 0) and commit them, stopping after FALLOC_PIECE_BLOCKS so one
 * transaction stays small; *fb is where the next piece starts.  Each piece
 * only turns holes into unwritten blocks, so it is consistent alone.
 * Caller holds the inode exclusively.
 */
static int prealloc_piece(struct tfs *fs, struct tfs_inode *ip, uint64_t *fb, uint64_t fe)
{
	struct runlist l = { 0 };
	uint64_t b = inode_next_hole(ip, *fb), piece = 0;
	struct meta_tx tx;
	int ret = 0;

	meta_tx_init(&tx);
	while (b < fe && piece < FALLOC_PIECE_BLOCKS && !ret) {
		uint64_t e = inode_next_data(ip, b);

		if (e > fe)
			e = fe;
		while (b < e && piece < FALLOC_PIECE_BLOCKS) {
			uint64_t want = e - b, blk, got;
			struct log_rec r = { .type = LR_EXT_SET };

			if (want > LOG_EXT_MAX_BLOCKS)
				want = LOG_EXT_MAX_BLOCKS;
			ret = alloc_get(fs->alloc, want, inode_ino(ip), ALLOC_DATA, &blk, &got);
			if (ret)
				break;
			if (got > want)
				got = want;
			ret = runlist_add(&l, b, blk, got);
			if (ret) {
				alloc_put(fs->alloc, blk, got);
				break;
			}
			r.ext.ino = inode_ino(ip);
			r.ext.fblk = b;
			r.ext.phys = blk | EXTENT_UNWRITTEN;
			r.ext.n = (uint32_t)got;
			/* v2 logs the short form (no checksums: 36 bytes, not
			 * 8 more per block); v1's log stays as it was. */
			r.ext.csums = fs->v2 ? NULL : zero_csums;
			ret = meta_tx_add(&tx, &r);
			if (ret)
				break;
			b += got;
			piece += got;
		}
		if (!ret && b < fe && piece < FALLOC_PIECE_BLOCKS)
			b = inode_next_hole(ip, b);
	}
	if (!ret)
		ret = commit_plain(fs, ip, &tx);
	if (ret)
		runlist_undo(fs, ip, &l);
	meta_tx_free(&tx);
	free(l.v);
	*fb = b;
	return ret;
}

/* mode 0 / KEEP_SIZE.  The inode is locked piece by piece, with log space
 * and (format v2) node room reserved in between (never while holding the
 * lock: a checkpoint takes it), so even a huge range never overflows the
 * log; a piece covers at most FALLOC_PIECE_BLOCKS of the range, so its
 * reservation holds what it may note. */
static int prealloc(struct tfs *fs, struct tfs_inode *ip, int mode, uint64_t start,
		    uint64_t end)
{
	uint64_t fb = start / BS, fe = file_div_up(end, BS);
	bool first = true;
	int ret = 0;

	for (;;) {
		uint64_t lim = fe - fb > FALLOC_PIECE_BLOCKS ? fb + FALLOC_PIECE_BLOCKS : fe;
		uint64_t chunks = fs_resv_chunks(fb * BS, (lim - fb) * BS);
		struct fs_resv resv;
		struct rl_range r;
		bool done;

		ret = fs_data_reserve(fs, true, chunks, chunks, &resv);
		if (ret)
			return ret;
		rl_lock(inode_rl(ip), &r, 0, RL_EOF, true);
		if (first)	/* ENOSPC up front rather than half way */
			ret = space_check(fs, count_holes(ip, fb, fe));
		first = false;
		if (!ret)
			ret = prealloc_piece(fs, ip, &fb, lim);
		done = ret || fb >= fe;
		if (done && !ret) {
			struct meta_tx tx;
			bool grow = mode == 0 && end > file_isize(ip);

			/* ctime always (the allocation changed); mtime and
			 * size only when mode 0 extends the file. */
			meta_tx_init(&tx);
			ret = file_commit_inode(fs, ip, &tx, grow ? end : 0, false,
						grow ? T_MTIME | T_CTIME : T_CTIME, NULL);
			meta_tx_free(&tx);
		}
		rl_unlock(inode_rl(ip), &r);
		fs_data_release(fs, &resv);	/* noted, or failed */
		/* Format v2: the leaves this piece made may go once a
		 * checkpoint wrote them; not while we hold the whole file. */
		if (fs->xc)
			extcache_trim(fs->xc);
		if (done)
			return ret;
	}
}

int tfs_fallocate(struct tfs_file *f, int mode, off_t off, off_t len)
{
	struct tfs *fs = f->fs;
	struct tfs_inode *ip = f->ip;
	struct fs_resv resv;
	struct rl_range r;
	uint64_t start, end;
	uint8_t *buf;
	int ret;

	if (mode != 0 && mode != FALLOC_FL_KEEP_SIZE &&
	    mode != (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE) &&
	    mode != FALLOC_FL_ZERO_RANGE && mode != (FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE))
		return -EOPNOTSUPP;
	if (off < 0 || len <= 0)
		return -EINVAL;
	if (!file_writable(f->flags))
		return -EBADF;
	if (fs->readonly)
		return -EROFS;
	/* As vfs_fallocate: append-only takes a plain allocation only. */
	inode_lock(ip);
	ret = inode_may_change(ip, mode & ~FALLOC_FL_KEEP_SIZE);
	inode_unlock(ip);
	if (ret)
		return ret;
	start = (uint64_t)off;
	end = start + (uint64_t)len;
	if (end > MAX_BYTES || end < start) {
		if (!(mode & FALLOC_FL_PUNCH_HOLE))
			return -EFBIG;
		end = MAX_BYTES;	/* punching past the largest file is a no-op */
		if (start >= end)
			return 0;
	}

	if (!(mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)))
		return prealloc(fs, ip, mode, start, end);
	/* Punch: one LR_EXT_CLEAR whatever the size, so one transaction.
	 * Zero range is a punch of what lies inside the file, then an
	 * unwritten reservation of the whole range (and, without KEEP_SIZE,
	 * the new size): the range reads as zeros from the punch on, and a
	 * crash between the two leaves a hole, which reads as zeros too. */
	buf = bounce_get(fs->bounce);
	/* A punch gives room back: never refused; it adds items to its two
	 * edge chunks at most. */
	ret = fs_data_reserve(fs, false, fs_resv_chunks(start, end - start), 2, &resv);
	if (!ret) {
		uint64_t pend = end;

		rl_lock(inode_rl(ip), &r, 0, RL_EOF, true);
		if ((mode & FALLOC_FL_ZERO_RANGE) && pend > file_isize(ip))
			pend = file_isize(ip);
		if (start < pend)
			ret = punch_locked(fs, ip, start, pend, buf);
		rl_unlock(inode_rl(ip), &r);
	}
	fs_data_release(fs, &resv);
	bounce_put(fs->bounce, buf);
	if (!ret && (mode & FALLOC_FL_ZERO_RANGE))
		ret = prealloc(fs, ip, mode & FALLOC_FL_KEEP_SIZE, start, end);
	return ret;
}

/* ---- lseek ---- */

off_t tfs_lseek(struct tfs_file *f, off_t off, int whence)
{
	struct tfs_inode *ip = f->ip;
	struct rl_range r;
	uint64_t size, b, pos;

	switch (whence) {
	case SEEK_SET:
	case SEEK_CUR:
	case SEEK_END:
		return off;	/* the kernel computes these itself */
	case SEEK_DATA:
	case SEEK_HOLE:
		break;
	default:
		return -EINVAL;
	}
	if (off < 0)
		return -ENXIO;
	rl_lock(inode_rl(ip), &r, 0, RL_EOF, false);
	size = file_isize(ip);
	if ((uint64_t)off >= size) {
		rl_unlock(inode_rl(ip), &r);
		return -ENXIO;
	}
	/* Unwritten (fallocated) blocks count as data: lseek(2) allows
	 * reporting a hole as data. */
	if (whence == SEEK_DATA) {
		b = inode_next_data(ip, (uint64_t)off / BS);
		pos = b >= EXTENT_MAX_FBLK ? size : b * BS;
		if (pos < (uint64_t)off)
			pos = (uint64_t)off;
		rl_unlock(inode_rl(ip), &r);
		return pos >= size ? -ENXIO : (off_t)pos;
	}
	b = inode_next_hole(ip, (uint64_t)off / BS);
	pos = b >= EXTENT_MAX_FBLK ? size : b * BS;
	if (pos < (uint64_t)off)
		pos = (uint64_t)off;
	rl_unlock(inode_rl(ip), &r);
	return pos > size ? (off_t)size : (off_t)pos;	/* EOF is a hole */
}
