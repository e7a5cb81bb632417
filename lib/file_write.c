// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * file_write: the data write pipeline, one job (struct wjob) from the
 * caller's bytes to the acknowledgement, for the synchronous tfs_write and
 * the asynchronous tfs_write_async alike.  The stages, in order:
 *
 *  1. enter     (w_enter)    argument checks, a bounce buffer and log space
 *                            (before any lock: see file.c), then the range
 *                            lock over the written blocks, or the whole
 *                            inode exclusively when the write extends the
 *                            file or appends
 *  2. stage     (w_stage)    read the edge blocks of an unaligned write,
 *                            copy the caller's bytes in (the one copy),
 *                            place new blocks (file_cow_place) and
 *                            checksum them
 *  3. submit    (w_submit)   begin every run's mirror write and issue them
 *                            all as one batch: waited for (sync), or handed
 *                            to the backend's completion thread (async)
 *  4. complete  (w_complete) the mirror accounting; a device out of sync is
 *                            durably recorded stale (superblock) before the
 *                            write may be acknowledged
 *  5. publish   (w_publish)  the extent and inode records, committed into
 *                            the log (applied to memory there)
 *  6. unlock    the range lock
 *  7. ack       O_DSYNC/O_SYNC: the log made durable up to the write's
 *               record (sync: on the caller; async: the syncer's group
 *               commit, or the caller's own when the syncer is idle), then
 *               the result or the caller's callback.  Their data went as
 *               FUA writes in stage 3, so that commit needs no flush
 *               unless plain writes came in between (mirror_flush)
 *
 * Stages 1-3 run on the caller's thread.  In the asynchronous path stages
 * 4 and 5 run on the completion thread only while nothing there would
 * wait: a failed device write, a device out of sync (the superblock write
 * of stage 4), a busy inode lock or a log without room for the records (a
 * commit round) hand the job to the data path's worker thread
 * (file_async.c), which carries on from the same stage (w_after_io).  A
 * completion thread thus never waits for a device or the log, and the
 * durability order is the synchronous path's: the stale mark is durable
 * before the publish, the publish before the acknowledgement.
 *
 * The edge reads of stage 2 stay synchronous on the caller's thread, also
 * in the asynchronous path: the caller's bytes must be copied before
 * tfs_write_async returns (a FUSE request buffer is reused after), and
 * placement may commit the log (a full allocator waits for deferred
 * frees), so only the 4 KiB edge reads could move, at the price of a
 * second asynchronous hop for every unaligned write.
 *
 * Locking: see file.c's header.  Nothing here waits for an asynchronous
 * batch while holding a lock one of its continuations needs.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "file_i.h"
#include "fs_i.h"
#include "prof.h"

#define WJOB_RUNS_IN 2u

/* Where a job is in stages 4 and 5 (the worker resumes there). */
enum { W_COMPLETE, W_DEGRADED, W_PUBLISH, W_DONE };

struct wjob {
	struct dev_batch b;		/* first: the completion hands it back */
	struct fa_item it;		/* handed to the worker or the syncer */
	struct tfs *fs;
	struct tfs_inode *ip;
	struct rl_range r;
	bool locked;			/* r is ours (stage 1), released in 6 */
	int phase;
	uint8_t *buf;			/* bounce buffer (stage 1), or the caller's */
	bool own_buf;
	bool cached;			/* from (and back to) fs->fa->wjc */
	uint64_t off;
	size_t len;
	bool dsync;
	bool fua;			/* the data as FUA writes (dsync, or the hint) */
	bool append;			/* at EOF: an O_APPEND open's write(2) */
	bool writeback;			/* TFS_W_CACHED: the kernel's page cache */
	int ret;
	uint64_t seq;
	uint32_t mtime_gen;		/* the inode's when the write began (stage 1) */
	tfs_write_cb cb;		/* NULL: synchronous caller */
	void *arg;
	struct mirror_wr *mw;		/* one per run of cw */
	struct dev_io *ios;		/* every mirror_wr's I/Os, flattened */
	/* Node slots from the gate (stage 1) until the records are noted
	 * (stage 5) or the job ends. */
	struct fs_resv resv;
	struct cow cw;
	/* mw and ios for the usual one or two runs, without a malloc. */
	struct mirror_wr mw_in[WJOB_RUNS_IN];
	struct dev_io ios_in[WJOB_RUNS_IN * DEV_MAX];
};

/* Asynchronous jobs come from the cache (one thread makes them, another
 * frees them); a synchronous one is malloc'ed, which stays in its
 * thread's arena, without the cache's lock shared by every writer. */
static struct wjob *wjob_get(struct tfs *fs, struct tfs_inode *ip, size_t len, bool async)
{
	/* Not zeroed whole: the cow's tables are large and filled by placement. */
	struct wjob *j = async ? file_jc_get(&fs->fa->wjc, sizeof(*j)) : malloc(sizeof(*j));

	if (!j)
		return NULL;
	memset(j, 0, offsetof(struct wjob, cw));
	j->cached = async;
	j->fs = fs;
	j->ip = ip;
	j->len = len;
	j->cw.nruns = 0;
	return j;
}

static void wjob_put(struct wjob *j)
{
	fs_data_release(j->fs, &j->resv);
	if (j->own_buf)
		fs_buf_put(j->fs, j->buf);
	if (j->mw != j->mw_in)
		free(j->mw);
	if (j->ios != j->ios_in)
		free(j->ios);
	if (j->cached)
		file_jc_put(&j->fs->fa->wjc, j);
	else
		free(j);
}

/* ---- 1. enter ---- */

/*
 * chattr's flags, under the write's range lock: an immutable file takes no
 * write, an append-only one none below its end.  The kernel cannot refuse
 * for us (FUSE has no way to give it S_IMMUTABLE or S_APPEND), so this is
 * where a write through an open made before the flag, a shared mapping of
 * an O_DIRECT open or an O_APPEND taken away by fcntl is stopped.  Not a
 * writeback of the page cache: that stores what the kernel acknowledged
 * already (perhaps before the flag), and a refusal would lose it.
 */
static int w_flags_ok(const struct wjob *j, uint64_t off)
{
	uint32_t fl = inode_flags_relaxed(j->ip);

	if (j->writeback || !(fl & (TFS_FL_IMMUTABLE | TFS_FL_APPEND)))
		return 0;
	if ((fl & TFS_FL_IMMUTABLE) || off < file_isize(j->ip))
		return -EPERM;
	return 0;
}

/* 0: locked (j->r), j->buf held, j->off is where the write goes (EOF for
 * O_APPEND); 1: len is 0, nothing held; -errno: nothing held. */
static int w_enter(struct wjob *j, struct tfs_file *f, off_t off)
{
	struct tfs *fs = j->fs;
	struct tfs_inode *ip = j->ip;
	size_t len = j->len;
	uint64_t uoff, t0, chunks;
	bool excl;
	int ret;

	if (off < 0 || len > TFS_IO_MAX)
		return -EINVAL;
	if (!file_writable(f->flags))
		return -EBADF;
	if (fs->readonly)
		return -EROFS;
	if (len == 0)
		return 1;
	/* Before the caller hears of the write (the writeback's WRITE is
	 * answered before the kernel sends a utimens): see w_publish. */
	j->mtime_gen = inode_mtime_gen(ip);
	if ((uint64_t)off + len > MAX_BYTES)
		return -EFBIG;
	if (bounce_buf_size(fs->bounce) < FS_BOUNCE_SIZE)
		return -EINVAL;

	/* Before any lock (see file.c's header). */
	t0 = prof_begin();
	j->buf = fs_buf_get(fs, len);
	j->own_buf = true;
	prof_end(PROF_BOUNCE, t0);
	t0 = prof_begin();
	/* Log space, and on format v2 room for the extent items: refused now
	 * rather than found missing by a checkpoint after the write was answered. */
	chunks = j->append ? file_div_up(len, FS_RESV_CHUNK) + 1
			   : fs_resv_chunks((uint64_t)off, len);
	ret = fs_data_reserve(fs, true, chunks, chunks, &j->resv);
	prof_end(PROF_LOGSPACE, t0);
	if (ret)
		return ret;

	t0 = prof_begin();
	uoff = (uint64_t)off;
	excl = j->append || uoff + len > file_isize(ip);
	for (;;) {
		if (excl) {
			rl_lock(inode_rl(ip), &j->r, 0, RL_EOF, true);
			if (j->append)
				uoff = file_isize(ip);
			break;
		}
		rl_lock(inode_rl(ip), &j->r, uoff / BS, file_div_up(uoff + len, BS), true);
		/* A truncate may have shrunk the file before we got the lock. */
		if (uoff + len <= file_isize(ip))
			break;
		rl_unlock(inode_rl(ip), &j->r);
		excl = true;
	}
	prof_end(PROF_RANGELOCK, t0);
	ret = uoff + len > MAX_BYTES ? -EFBIG : w_flags_ok(j, uoff);
	if (ret) {
		rl_unlock(inode_rl(ip), &j->r);
		return ret;
	}
	j->locked = true;
	j->off = uoff;
	return 0;
}

/* ---- 2. stage ---- */

/* Edge blocks are read-modify-written; the payload is filled once.  Then
 * j->cw says where buf's blocks go. */
static int w_stage(struct wjob *j, tfs_fill_fn fill, void *ctx)
{
	struct tfs *fs = j->fs;
	struct tfs_inode *ip = j->ip;
	uint8_t *buf = j->buf;
	uint64_t off = j->off, fb0 = off / BS;
	uint32_t nblk = (uint32_t)(file_div_up(off + j->len, BS) - fb0);
	size_t head = off % BS, tail = (off + j->len) % BS;
	uint64_t t0 = prof_begin();
	int ret;

	if (head) {
		ret = file_read_blocks(fs, ip, fb0, 1, buf);
		if (ret)
			return ret;
	}
	if (tail && (nblk > 1 || !head)) {
		ret = file_read_blocks(fs, ip, fb0 + nblk - 1, 1, buf + (size_t)(nblk - 1) * BS);
		if (ret)
			return ret;
	}
	if (head || tail)
		prof_end(PROF_RMW_READ, t0);
	t0 = prof_begin();
	ret = fill(ctx, buf + head, j->len);	/* the one copy of the caller's bytes */
	prof_end(PROF_COPY, t0);
	if (ret < 0)
		return ret;
	return file_cow_place(fs, ip, fb0, nblk, buf, &j->cw);
}

/* ---- 3. submit ---- */

/* Begin every run's mirror write and flatten their I/Os into one batch.
 * On error every begun write is cancelled and the blocks given back. */
static int w_prepare(struct wjob *j)
{
	struct tfs *fs = j->fs;
	unsigned total = 0;
	uint32_t i;
	int ret = 0;

	if (j->cw.nruns <= WJOB_RUNS_IN) {
		j->mw = j->mw_in;
		j->ios = j->ios_in;
	} else {
		j->mw = malloc(j->cw.nruns * sizeof(*j->mw));
		j->ios = malloc((size_t)j->cw.nruns * DEV_MAX * sizeof(*j->ios));
	}
	if (!j->mw || !j->ios) {
		file_cow_put(fs, &j->cw);
		return -ENOMEM;
	}
	for (i = 0; i < j->cw.nruns; i++) {
		ret = mirror_write_begin(&fs->mirror, j->cw.runs[i].phys,
					 j->buf + (size_t)j->cw.runs[i].off * BS,
					 j->cw.runs[i].n, &j->mw[i]);
		if (ret)
			break;
		/* O_DSYNC (or a write an fsync is expected to follow: see
		 * file_fua_hint): the data as FUA writes, durable when they
		 * complete, so the commit that follows needs no flush first
		 * (mirror_flush skips a device with only FUA writes since its
		 * last flush): one device round trip less per write. */
		for (unsigned d = 0; d < j->mw[i].n; d++) {
			j->mw[i].ios[d].fua = j->fua;
			j->ios[total++] = j->mw[i].ios[d];
		}
	}
	if (ret) {
		while (i--)
			mirror_write_cancel(&fs->mirror, &j->mw[i]);
		file_cow_put(fs, &j->cw);
		return ret;
	}
	j->b.ios = j->ios;
	j->b.n = total;
	return 0;
}

/* Run the batch here and wait for it. */
static void w_submit_sync(struct wjob *j)
{
	uint64_t t0 = prof_begin();
	int ret = dev_submit(j->fs->be, j->b.ios, j->b.n);

	prof_end(PROF_DEV_WRITE, t0);
	if (ret)
		for (unsigned i = 0; i < j->b.n; i++)
			j->b.ios[i].res = ret;
}

static void w_after_io(struct wjob *j, bool nowait);

/* The completion thread's end of the batch. */
static void w_io_done(struct dev_batch *b)
{
	w_after_io((struct wjob *)b, true);
}

/* From here on the completion owns j.  If the engine will not take the
 * batch (shutting down), run it here, synchronously. */
static void w_submit(struct wjob *j)
{
	j->b.done = w_io_done;
	j->b.pack = false;
	if (dev_submit_async(j->fs->be, &j->b)) {
		w_submit_sync(j);
		w_after_io(j, false);
	}
}

/* ---- 4. complete ---- */

/* Copy the flattened results back into each run's mirror_wr; true if
 * any device write failed. */
static bool w_results(struct wjob *j)
{
	unsigned k = 0;
	bool failed = false;

	for (uint32_t i = 0; i < j->cw.nruns; i++) {
		struct mirror_wr *w = &j->mw[i];

		for (unsigned d = 0; d < w->n; d++) {
			w->ios[d].res = j->ios[k++].res;
			failed |= w->ios[d].res != 0;
		}
	}
	return failed;
}

/* The mirror accounting of every run, then (W_DEGRADED) the stale devices
 * durably recorded.  With @nowait nothing that waits: -EAGAIN instead,
 * j->phase says where to go on.  Errors end the job (W_DONE, j->ret). */
static int w_complete(struct wjob *j, bool nowait)
{
	struct mirror *m = &j->fs->mirror;
	int ret = 0;

	if (j->phase == W_COMPLETE) {
		bool degraded = false;

		/* A failed write fails its device (logging, events, maybe the
		 * whole file system): the worker's business. */
		if (w_results(j) && nowait)
			return -EAGAIN;
		for (uint32_t i = 0; i < j->cw.nruns; i++) {
			int r = mirror_write_end_noack(m, &j->mw[i], 0);

			if (r < 0 && !ret)
				ret = r;
			degraded |= r == MIRROR_ACK_DEGRADED;
		}
		j->phase = degraded ? W_DEGRADED : W_PUBLISH;
	}
	if (!ret && j->phase == W_DEGRADED) {
		if (nowait)
			return -EAGAIN;
		ret = mirror_ack_degraded(m);	/* the superblock write */
		j->phase = W_PUBLISH;
	}
	if (ret) {
		file_cow_put(j->fs, &j->cw);
		j->ret = ret;
		j->phase = W_DONE;
	}
	return 0;
}

/* ---- 5. publish ---- */

/* The extent and inode records, committed (the blocks are given back on
 * failure).  With @nowait -EAGAIN when the commit would wait. */
static int w_publish(struct wjob *j, bool nowait)
{
	struct tfs *fs = j->fs;
	struct meta_tx tx;
	uint64_t end = j->off + j->len;
	int ret;

	meta_tx_init(&tx);
	ret = file_cow_records(&tx, inode_ino(j->ip), &j->cw);
	if (!ret)
		ret = file_commit_write(fs, j->ip, &tx, end, j->mtime_gen, nowait, &j->seq);
	meta_tx_free(&tx);
	if (ret == -EAGAIN && nowait)
		return ret;
	fs_data_release(fs, &j->resv);	/* noted now (or failed) */
	if (ret)
		file_cow_undo(fs, j->ip, &j->cw);
	j->ret = ret;
	j->phase = W_DONE;
	return 0;
}

/* ---- 6, 7. unlock and ack (asynchronous) ---- */

static void w_callback(struct wjob *j)
{
	tfs_write_cb cb = j->cb;
	void *arg = j->arg;
	ssize_t res = j->ret ? j->ret : (ssize_t)j->len;

	wjob_put(j);
	cb(arg, res);
}

static void w_synced(struct fa_item *it, int ret)
{
	struct wjob *j = (struct wjob *)((char *)it - offsetof(struct wjob, it));

	j->ret = ret;
	w_callback(j);
}

/* Without the range lock, so other writers proceed and join the same
 * group commit. */
static void w_ack(struct wjob *j)
{
	if (j->locked)
		rl_unlock(inode_rl(j->ip), &j->r);
	j->locked = false;
	if (!j->ret && j->dsync) {
		j->it.seq = j->seq;
		j->it.fn = w_synced;
		file_sync_add(j->fs, &j->it);
	} else {
		w_callback(j);
	}
}

/* On the worker: stages 4-7 from where the completion thread left off. */
static void w_resume(struct fa_item *it, int unused)
{
	(void)unused;
	w_after_io((struct wjob *)((char *)it - offsetof(struct wjob, it)), false);
}

/* Stages 4 and 5 from j->phase on, then (asynchronous jobs) 6 and 7.  With
 * @nowait (the completion thread) a stage that would wait hands the job to
 * the worker instead, which calls this again without. */
static void w_after_io(struct wjob *j, bool nowait)
{
	if (j->phase < W_PUBLISH && w_complete(j, nowait) == -EAGAIN)
		goto defer;
	if (j->phase == W_PUBLISH && w_publish(j, nowait) == -EAGAIN)
		goto defer;
	if (j->cb)
		w_ack(j);
	return;
defer:
	j->it.fn = w_resume;
	file_work_add(j->fs, &j->it);
}

/* ---- the entry points ---- */

/* Stages 2-5 with the range lock already held (stage 1 done or the
 * caller's own); 0 or -errno, the blocks given back on error. */
static int w_locked(struct wjob *j, tfs_fill_fn fill, void *ctx)
{
	int ret = w_stage(j, fill, ctx);

	if (!ret)
		ret = w_prepare(j);
	if (ret)
		return ret;
	w_submit_sync(j);
	w_after_io(j, false);
	return j->ret;
}

int file_write_locked(struct tfs *fs, struct tfs_inode *ip, uint64_t off, size_t len,
		      tfs_fill_fn fill, void *ctx, uint8_t *buf, uint64_t *seq)
{
	struct wjob *j = wjob_get(fs, ip, len, false);
	int ret;

	if (!j)
		return -ENOMEM;
	j->off = off;
	j->buf = buf;
	ret = w_locked(j, fill, ctx);
	if (seq)
		*seq = j->seq;
	wjob_put(j);
	return ret;
}

/*
 * An fsync after every write or two, each small (SQLite's WAL appends a
 * few pages and fsyncs at every commit with synchronous=FULL): written as
 * plain writes, each fsync's commit must first flush every device, a
 * device round trip on the fsync's path; written FUA, there is nothing to
 * flush (mirror_flush).  On a busy machine every round trip is a thread
 * that waits to be scheduled: the flush's io_uring worker, the loop
 * device's, ours (bench/workloads.py's SQLite, 3 interleaved pairs of 6 s
 * at load 7.6-9.3: 1,256-1,433 tx/s before, 2,326-3,299 with FUA, and 21
 * context switches of the daemon per commit before, 12 with).  Only for an
 * open whose last fsync came after at most FUA_HINT_WRITES writes, and
 * only for the first FUA_HINT_WRITES writes after it, each at most
 * FUA_HINT_BYTES: a file written in bulk before its fsync keeps plain
 * writes and one flush.  A hint only: FUA makes a write durable sooner,
 * never later.
 */
#define FUA_HINT_WRITES 4u
#define FUA_HINT_BYTES (64u << 10)

static bool file_fua_hint(struct tfs_file *f, size_t len)
{
	uint32_t n = atomic_fetch_add_explicit(&f->wr_since_sync, 1, memory_order_relaxed) + 1;

	return len <= FUA_HINT_BYTES && n <= FUA_HINT_WRITES &&
	       atomic_load_explicit(&f->sync_after_few, memory_order_relaxed);
}

void tfs_file_synced(struct tfs_file *f)
{
	uint32_t n = atomic_exchange_explicit(&f->wr_since_sync, 0, memory_order_relaxed);

	/* An fsync with no write since the last one says nothing new. */
	if (n)
		atomic_store_explicit(&f->sync_after_few, n <= FUA_HINT_WRITES,
				      memory_order_relaxed);
}

/* The durability a write asks for: O_DSYNC/O_SYNC (of the call or the
 * open), and whether its data goes FUA; whether it goes at EOF (the open's
 * O_APPEND, unless the call says where: TFS_W_AT_OFFSET) and whether it is
 * the page cache's (TFS_W_CACHED). */
static void w_sync_flags(struct wjob *j, struct tfs_file *f, int flags)
{
	j->dsync = ((flags | f->flags) & (O_DSYNC | O_SYNC)) != 0;
	j->fua = file_fua_hint(f, j->len) || j->dsync;
	j->writeback = (flags & TFS_W_CACHED) != 0;
	j->append = (f->flags & O_APPEND) && !(flags & (TFS_W_AT_OFFSET | TFS_W_CACHED));
}

ssize_t tfs_write(struct tfs_file *f, off_t off, size_t len, tfs_fill_fn fill, void *ctx,
		  int flags)
{
	struct tfs *fs = f->fs;
	struct wjob *j = wjob_get(fs, f->ip, len, false);
	uint64_t t0;
	int ret;

	if (!j)
		return -ENOMEM;
	w_sync_flags(j, f, flags);
	ret = w_enter(j, f, off);
	if (!ret) {
		ret = w_locked(j, fill, ctx);
		rl_unlock(inode_rl(j->ip), &j->r);
	}
	/* Wait for durability without the range lock, so other writers
	 * proceed and join the same group commit. */
	if (!ret && j->dsync) {
		t0 = prof_begin();
		ret = log_commit(fs->log, j->seq);
		prof_end(PROF_SYNC, t0);
	}
	wjob_put(j);
	if (ret)
		return ret < 0 ? ret : 0;
	return (ssize_t)len;
}

void tfs_write_async(struct tfs_file *f, off_t off, size_t len, tfs_fill_fn fill, void *ctx,
		     int flags, tfs_write_cb cb, void *arg)
{
	struct tfs *fs = f->fs;
	struct wjob *j;
	int ret;

	if (!dev_async_supported(fs->be)) {
		cb(arg, tfs_write(f, off, len, fill, ctx, flags));
		return;
	}
	/* O_DSYNC with the syncer idle: the whole write on this thread, its
	 * commit included, as tfs_fsync_async does.  A lone synchronous
	 * writer saves the hops to the completion thread and to the syncer
	 * (each a wakeup, dear on a busy machine); writers arriving
	 * meanwhile go the asynchronous way and share the syncer's commit. */
	if (((flags | f->flags) & (O_DSYNC | O_SYNC)) && file_sync_try_inline(fs)) {
		ssize_t n = tfs_write(f, off, len, fill, ctx, flags);

		file_sync_inline_done(fs);
		cb(arg, n);
		return;
	}
	j = wjob_get(fs, f->ip, len, true);
	if (!j) {
		cb(arg, -ENOMEM);
		return;
	}
	j->cb = cb;
	j->arg = arg;
	w_sync_flags(j, f, flags);
	ret = w_enter(j, f, off);
	if (ret) {
		j->len = 0;		/* 1: nothing to write */
		j->ret = ret < 0 ? ret : 0;
		w_callback(j);
		return;
	}
	ret = w_stage(j, fill, ctx);
	if (!ret)
		ret = w_prepare(j);
	if (ret) {
		j->ret = ret;
		w_ack(j);
		return;
	}
	w_submit(j);
}

static int fill_memcpy(void *ctx, void *dst, size_t len)
{
	memcpy(dst, ctx, len);
	return 0;
}

ssize_t tfs_pwrite(struct tfs_file *f, const void *src, size_t len, off_t off, int flags)
{
	size_t done = 0;

	if (len == 0)
		return tfs_write(f, off, 0, fill_memcpy, (void *)src, flags);
	while (done < len) {
		size_t n = len - done;
		ssize_t ret;

		if (n > TFS_IO_MAX)
			n = TFS_IO_MAX;
		ret = tfs_write(f, off + (off_t)done, n, fill_memcpy,
				(void *)((const uint8_t *)src + done), flags);
		if (ret < 0)
			return done ? (ssize_t)done : ret;
		done += (size_t)ret;
	}
	return (ssize_t)done;
}

/* ---- the synchronous submit of file.c's own copy-on-write ---- */

int file_cow_write(struct tfs *fs, const uint8_t *buf, struct cow *cw)
{
	int ret = 0;

	for (uint32_t i = 0; !ret && i < cw->nruns; i++) {
		uint64_t t0 = prof_begin();

		ret = mirror_write(&fs->mirror, cw->runs[i].phys,
				   buf + (size_t)cw->runs[i].off * BS, cw->runs[i].n);
		prof_end(PROF_DEV_WRITE, t0);
	}
	if (ret)
		file_cow_put(fs, cw);
	return ret;
}
