// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * wbehind: write-behind of the page cache's writeback.  With the writeback
 * cache the kernel writes a file's dirty pages back before close(2) and
 * before every chmod, chown and utimes, and waits for the WRITE replies:
 * when we replied after both mirrors had the data, tar -x of small files
 * waited for every file's device writes (about half its time, measured).
 * The kernel's writeback (WRITE from pid 0, on a page-cache open, neither
 * O_DSYNC nor O_SYNC) is now answered as soon as lib has the payload in
 * its bounce buffer (tfs_write_async copies it before it returns); the
 * device writes and the publish of the extent go on behind.  So are the
 * write(2) calls of a big file's writer (ops.c big_writer), a direct open
 * that stands in for the page cache: one WRITE per write(2), no dirty
 * pages, and the same promises as below.
 *
 * What that must not change, and how it does not:
 *  - fsync(2) returns only once the data is on every mirror and committed:
 *    FSYNC waits for the file's writes behind first (tfsd_wb_wait), and
 *    FSYNCDIR (twinfs-ctl sync) for everyone's.
 *  - a write that fails behind is not lost silently: its error is kept
 *    for the file and the next FSYNC returns it (as the kernel reports
 *    writeback errors at fsync).  close(2) no longer reports it, as on
 *    local file systems.
 *  - readers see the new data: the write holds its range lock until the
 *    extent is published (file_write.c), and READ takes that lock.
 *  - requests that look at the file's blocks or use its open file (GETATTR
 *    st_blocks, a truncating SETATTR, LSEEK, COPY_FILE_RANGE, FALLOCATE)
 *    wait for its writes behind first, so none sees the map half done.
 *  - no open file is released under a write: RELEASE is answered at once
 *    (tar closes every file right after its data went behind, and a ring
 *    queue's thread waiting there held up the next file), its file kept
 *    on the inode's entry until the last write behind ends, then on
 *    wb_reap, dropped by the next request's thread (tfsd_wb_reap; not the
 *    completion thread: dropping an unlinked inode's last open deletes
 *    it, which may wait for log space) or at unmount.  What a request
 *    could see of the drop (an unlinked file's blocks freed) it sees:
 *    every request reaps before it is served.
 *  - a SETATTR of times, mode or owners (tar's utimens, chmod, chown after
 *    each file) does not wait: the publish of a write begun before a
 *    setattr of mtime leaves that mtime alone (file_commit_write), and
 *    the log holds the two in the order they took the inode lock, so a
 *    replay gives the same.  Its reply, which carries st_blocks from
 *    before the publish, is valid for no time (op_setattr).
 *  - unmount: tfs_drain (main.c) completes every write before the end.
 *
 * A table of inodes with writes behind (count, first error) under wb_mu,
 * and per hash chain the count of its writes behind, read without the
 * lock: a READ of a file whose chain has none takes no lock.
 */
#include <fcntl.h>
#include <stdlib.h>

#include "daemon_i.h"

#define WB_BUCKETS (sizeof(((struct tfsd *)0)->wb_tab) / sizeof(struct wb_ent *))

struct wb_ent {
	uint64_t ino;
	unsigned n;		/* writes behind in flight */
	int err;		/* first failure not yet reported (-errno) */
	struct tfsd_file *released;	/* RELEASEd meanwhile; non-empty only while n */
	struct wb_ent *next;
};

static unsigned chain_of(uint64_t ino)
{
	return (unsigned)((ino * 0x9e3779b97f4a7c15ull) >> 56 & (WB_BUCKETS - 1));
}

static struct wb_ent **bucket(struct tfsd *d, uint64_t ino)
{
	return &d->wb_tab[chain_of(ino)];
}

static struct wb_ent *find(struct tfsd *d, uint64_t ino)
{
	struct wb_ent *e = *bucket(d, ino);

	while (e && e->ino != ino)
		e = e->next;
	return e;
}

static void unlink_ent(struct tfsd *d, struct wb_ent *e)
{
	struct wb_ent **p = bucket(d, e->ino);

	while (*p != e)
		p = &(*p)->next;
	*p = e->next;
	free(e);
}

void tfsd_wb_init(struct tfsd *d)
{
	pthread_mutex_init(&d->wb_mu, NULL);
	pthread_cond_init(&d->wb_cv, NULL);
}

/* @e's last write ended: its released files go to the reaper's list. */
static void reap_add(struct tfsd *d, struct wb_ent *e)
{
	struct tfsd_file *df;
	unsigned n = 0;

	while ((df = e->released)) {
		e->released = df->wb_next;
		df->wb_next = d->wb_reap;
		d->wb_reap = df;
		n++;
	}
	if (n)
		atomic_fetch_add(&d->wb_reap_n, n);
}

bool tfsd_wb_release(struct tfsd *d, uint64_t ino, struct tfsd_file *df)
{
	struct wb_ent *e;
	bool deferred = false;

	/* As tfsd_wb_wait: the counts went up before the WRITE's reply, and
	 * the kernel releases a file after its writes were answered. */
	if (!atomic_load(&d->wb_total) || !atomic_load(&d->wb_chain_n[chain_of(ino)]))
		return false;
	pthread_mutex_lock(&d->wb_mu);
	e = find(d, ino);
	if (e && e->n) {
		df->wb_next = e->released;
		e->released = df;
		deferred = true;
	}
	pthread_mutex_unlock(&d->wb_mu);
	return deferred;
}

void tfsd_wb_reap(struct tfsd *d)
{
	struct tfsd_file *df;

	if (!atomic_load_explicit(&d->wb_reap_n, memory_order_relaxed))
		return;
	pthread_mutex_lock(&d->wb_mu);
	df = d->wb_reap;
	d->wb_reap = NULL;
	atomic_store(&d->wb_reap_n, 0);
	pthread_mutex_unlock(&d->wb_mu);
	while (df) {
		struct tfsd_file *next = df->wb_next;

		tfsd_file_drop(d, df);
		df = next;
	}
}

bool tfsd_wb_begin(struct tfsd *d, uint64_t ino)
{
	struct wb_ent *e;

	pthread_mutex_lock(&d->wb_mu);
	e = find(d, ino);
	if (!e && (e = calloc(1, sizeof(*e)))) {
		e->ino = ino;
		e->next = *bucket(d, ino);
		*bucket(d, ino) = e;
	}
	if (e) {
		e->n++;
		atomic_fetch_add(&d->wb_chain_n[chain_of(ino)], 1);
		atomic_fetch_add(&d->wb_total, 1);
	}
	pthread_mutex_unlock(&d->wb_mu);
	return e != NULL;
}

void tfsd_wb_end(struct tfsd *d, uint64_t ino, int err)
{
	struct wb_ent *e;

	pthread_mutex_lock(&d->wb_mu);
	e = find(d, ino);
	if (e) {
		if (err < 0 && !e->err)
			e->err = err;
		e->n--;
		atomic_fetch_sub(&d->wb_chain_n[chain_of(ino)], 1);
		if (!e->n)
			reap_add(d, e);
		if (!e->n && !e->err)
			unlink_ent(d, e);
	}
	atomic_fetch_sub(&d->wb_total, 1);
	pthread_cond_broadcast(&d->wb_cv);
	pthread_mutex_unlock(&d->wb_mu);
	if (err < 0)
		tlog(LOG_WARNING, "inode %llu: a write behind failed (%d); its next fsync "
		     "reports it", (unsigned long long)ino, err);
}

int tfsd_wb_wait(struct tfsd *d, uint64_t ino, bool take_err)
{
	struct wb_ent *e;
	int err = 0;

	/* Nothing behind anywhere, or in this inode's chain: the common
	 * case takes no lock, not even while other files' writes are behind
	 * (an error kept for fsync is looked up under it).  Both counts go
	 * up under wb_mu before the WRITE is answered, so a request sent
	 * after that answer sees them. */
	if (!take_err && (!atomic_load(&d->wb_total) ||
			  !atomic_load(&d->wb_chain_n[chain_of(ino)])))
		return 0;
	pthread_mutex_lock(&d->wb_mu);
	while ((e = find(d, ino)) && e->n) {
		tfsd_reader_yield(d);
		pthread_cond_wait(&d->wb_cv, &d->wb_mu);
	}
	if (e && take_err) {
		err = e->err;
		unlink_ent(d, e);
	}
	pthread_mutex_unlock(&d->wb_mu);
	return err;
}

bool tfsd_wb_busy(struct tfsd *d, uint64_t ino)
{
	struct wb_ent *e;
	bool busy;

	if (!atomic_load(&d->wb_total))
		return false;
	pthread_mutex_lock(&d->wb_mu);
	e = find(d, ino);
	busy = e && e->n;
	pthread_mutex_unlock(&d->wb_mu);
	return busy;
}

void tfsd_wb_wait_all(struct tfsd *d)
{
	if (!atomic_load(&d->wb_total))
		return;
	pthread_mutex_lock(&d->wb_mu);
	while (atomic_load(&d->wb_total))
		pthread_cond_wait(&d->wb_cv, &d->wb_mu);
	pthread_mutex_unlock(&d->wb_mu);
}

/* A write behind (wbehind.c).  state: 0 while tfs_write_async runs, then
 * whoever comes second of the submitter (1: replied early) and the
 * completion (2: done during the submission, result in res) finishes. */
struct behind_write {
	struct tfsd *d;
	uint64_t ino;
	_Atomic int state;
	ssize_t res;
};

static void behind_done(void *arg, ssize_t n)
{
	struct behind_write *b = arg;
	int expect = 0;

	b->res = n;
	if (atomic_compare_exchange_strong(&b->state, &expect, 2))
		return;		/* the submitter replies with n */
	tfsd_wb_end(b->d, b->ino, n < 0 ? (int)n : 0);
	free(b);
}

/*
 * The kernel's writeback of a page-cache open: reply once lib holds the
 * payload (tfs_write_async copies it before it returns), the device writes
 * and the publish going on behind (wbehind.c).  False when this write
 * must be answered after its device writes as before: direct opens, the
 * caller's own write(2) (pid != 0), O_DSYNC/O_SYNC, out of memory.  A big
 * file's writer (df->behind, ops.c big_writer) is the exception: its own
 * direct writes go behind as the page cache's would have.
 */
static void reply_behind(fuse_req_t req, struct tfsd_file *df, fuse_ino_t ino, off_t off,
			 size_t n)
{
	if (df->direct && n && tfsd_dio_check(fuse_req_userdata(req), ino))
		tfsd_reply_write_inval(req, ino, off, n);
	else
		fuse_reply_write(req, n);
}

bool tfsd_write_behind(fuse_req_t req, fuse_ino_t ino, struct tfsd_file *df, tfs_fill_fn fill,
		       struct fuse_bufvec *in, off_t off, size_t len, int flags)
{
	struct tfsd *d = fuse_req_userdata(req);
	struct behind_write *b;
	int expect = 0;

	if ((!df->behind && (df->direct || fuse_req_ctx(req)->pid != 0)) ||
	    (flags & (O_DSYNC | O_SYNC)))
		return false;
	b = malloc(sizeof(*b));
	if (!b)
		return false;
	if (!tfsd_wb_begin(d, ino)) {
		free(b);
		return false;
	}
	b->d = d;
	b->ino = ino;
	atomic_init(&b->state, 0);
	tfs_write_async(df->f, off, len, fill, in, flags, behind_done, b);
	if (atomic_compare_exchange_strong(&b->state, &expect, 1)) {
		/* The write holds its range until it is in place, so a READ
		 * from now on sees it: a direct open's may drop stale pages
		 * now (ops.c struct direct_write). */
		reply_behind(req, df, ino, off, len);
		return true;
	}
	/* Finished (or failed) before it could go behind. */
	tfsd_wb_end(d, ino, 0);
	if (b->res < 0)
		fuse_reply_err(req, (int)-b->res);
	else
		reply_behind(req, df, ino, off, (size_t)b->res);
	free(b);
	return true;
}
