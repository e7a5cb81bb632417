// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * space: low-space mode, so that a full file system answers write(2) with
 * ENOSPC on the default (writeback_cache) mount, as ext4 does, instead of
 * acknowledging the write from the page cache and failing the writeback
 * WRITE later, when the data is already lost.  The same gate refuses cached
 * writes with EROFS once no device can take writes (tfs_unusable).
 *
 * What the kernel may still hold: a FUSE mount's bdi has strict_limit and
 * max_ratio=1, so dirty plus writeback pages of this mount are throttled to
 * about /sys/class/bdi/MAJ:MIN/max_bytes (balance_dirty_pages lets each
 * writer overshoot a little).  Above R = that bound plus a margin for the
 * write(2) calls in progress (or -o space_reserve=SIZE) of free space,
 * nothing changes: whatever the page cache holds fits.  Below R the mount
 * is "low":
 *
 *  - new opens are direct (FOPEN_DIRECT_IO; kernel 6.9+ lets them coexist
 *    with cached opens of the same file): their writes reach tfs_write
 *    before write(2) returns, and fail there with ENOSPC;
 *  - every reply carries attributes valid for 0 s (from 1.5 R down, so a
 *    reply sent just before the switch cannot outlive it), and entering
 *    the mode invalidates the attributes of inodes with writable cached
 *    opens: with writeback_cache, fuse_cache_write_iter() refreshes size
 *    and mode before every write(2) and fails the call with the refresh's
 *    error, so each write(2) on such an open now sends a GETATTR carrying
 *    its handle (stat(2) sends none; it is never refused);
 *  - that GETATTR is the gate (on a thread of its own, because it waits for
 *    WRITEs only free workers can answer): it writes back the dirty pages
 *    of every inode that may have some (an inode invalidation launders
 *    them), so what the page cache holds is known to be stored, then grants
 *    this inode's write(2) SPACE_GRANT bytes if free space minus the grants
 *    of the other inodes and the direct writes in flight covers it, else
 *    fails with ENOSPC.  The kernel runs one write(2) per inode at a time
 *    (inode lock), so an inode's grant ends at its next gate (or when the
 *    open that took it is released);
 *  - direct writes and fallocate are admitted only within the free space
 *    the grants leave.
 *
 * Format v2 keeps the extent maps in tree nodes, in a node area that can
 * fill before the data area (many small files, fragmented maps): what the
 * page cache holds needs node room too when it is written back, up to two
 * copied nodes, one new and their notes per MiB (tfs_node_room_bytes), and
 * the node gate refuses a WRITE it has no room for once a few checkpoints
 * (which give back the slots noted changes hold) did not make room.  So
 * "free space" here, for the mode and the attribute timeout, is the lesser
 * of the free data blocks and the node room in those terms as a checkpoint
 * would leave it; the grants and direct writes count the node room as it
 * is now, and ask for a checkpoint before they answer ENOSPC.  Allocations
 * (fallocate) add few items whatever their length: the node gate alone
 * decides them, and they are admitted only against the free data blocks
 * and the node room the grants leave.
 *
 * What this cannot cover (documented in README): a single write(2) larger
 * than SPACE_GRANT on an open made before the mount got low, and stores
 * through shared writable mmap (page faults ask the daemon nothing).
 *
 * Cost while space is plentiful: two atomic loads per WRITE, open and
 * attribute reply, and on format v2 four more for the node room.
 */
#include <errno.h>
#include <inttypes.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon_i.h"

#define MiB ((uint64_t)1 << 20)
/* What one write(2) on a cached open may add after its gate. */
#define SPACE_GRANT (4 * MiB)
/* Beyond the dirty bound: write(2) calls already past their attribute
 * check when the mode switches, and the time the switch takes. */
#define SPACE_TRANSIT (16 * MiB)
/* When the bdi cannot be read (no sysfs, an older kernel). */
#define SPACE_DEFAULT_DIRTY (128 * MiB)
#define BDI_REREAD_MS 1000
/* Low for at least this long: the node room swings with every checkpoint
 * (the changes noted hold slots until it), and a mode that came and went
 * with each would log twice a checkpoint. */
#define SPACE_LOW_MIN_MS 10000

struct space_ent {
	uint64_t ino;
	uint64_t grant;			/* bytes its running write(2) may add */
	struct tfsd_file *grant_df;	/* the open that took the grant */
	bool maybe_dirty;		/* may have dirty pages in the kernel */
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t reserve_from(uint64_t max_bytes)
{
	/* balance_dirty_pages lets each writer run ahead by its ratelimit
	 * before throttling it: a quarter on top, and a few MiB. */
	return max_bytes + max_bytes / 4 + 4 * MiB + SPACE_TRANSIT;
}

static uint64_t read_max_bytes(const struct tfsd *d)
{
	unsigned long long v = 0;
	FILE *f;

	if (!d->bdi_max_bytes[0] || !(f = fopen(d->bdi_max_bytes, "re")))
		return SPACE_DEFAULT_DIRTY;
	if (fscanf(f, "%llu", &v) != 1 || v == 0)
		v = SPACE_DEFAULT_DIRTY;
	fclose(f);
	return v;
}

/* R, the free space below which the mount is low.  The admin may change
 * the bdi's limits at any time: read again at most once a second. */
static uint64_t bdi_reserve(struct tfsd *d)
{
	uint64_t now = now_ms();

	if (now >= atomic_load_explicit(&d->space_bdi_due, memory_order_relaxed)) {
		atomic_store(&d->space_bdi_due, now + BDI_REREAD_MS);
		atomic_store(&d->space_reserve, reserve_from(read_max_bytes(d)));
	}
	return atomic_load_explicit(&d->space_reserve, memory_order_relaxed);
}

static uint64_t space_reserve(struct tfsd *d)
{
	return d->space_reserve_opt ? d->space_reserve_opt : bdi_reserve(d);
}

/* The most the page cache may hold dirty or under writeback for us. */
static uint64_t dirty_bound(struct tfsd *d)
{
	return bdi_reserve(d) - SPACE_TRANSIT;
}

/* What write(2) calls may still add: the free data blocks, and the node
 * room in bytes of writes once a checkpoint has given back what the
 * changes noted so far hold (the node gate waits for checkpoints before it
 * refuses a WRITE; the grants below count those holds). */
static uint64_t space_avail(struct tfsd *d)
{
	uint64_t data = tfs_avail_bytes(d->fs), node = tfs_node_room_bytes(d->fs, true);

	return data < node ? data : node;
}

void tfsd_space_init(struct tfsd *d, const char *mnt)
{
	unsigned maj = 0, min = 0;
	char line[4096], mp[4096];
	bool found = false;
	FILE *f;

	/* mountinfo field 3 is the mount's st_dev, field 5 its mount point
	 * (the last line for it is ours; stat(2) on it would ask us). */
	f = fopen("/proc/self/mountinfo", "re");
	while (f && fgets(line, sizeof(line), f)) {
		unsigned a, b;

		if (sscanf(line, "%*u %*u %u:%u %*s %4095s", &a, &b, mp) == 3 &&
		    !strcmp(mp, mnt)) {
			maj = a;
			min = b;
			found = true;
		}
	}
	if (f)
		fclose(f);
	if (found)
		snprintf(d->bdi_max_bytes, sizeof(d->bdi_max_bytes),
			 "/sys/class/bdi/%u:%u/max_bytes", maj, min);
	atomic_store(&d->space_reserve, reserve_from(read_max_bytes(d)));
	atomic_store(&d->space_bdi_due, now_ms() + BDI_REREAD_MS);
	if (d->space_reserve_opt)
		tlog(LOG_DEBUG, "space: low below %" PRIu64 " bytes free (space_reserve)",
		     d->space_reserve_opt);
	else
		tlog(LOG_DEBUG, "space: low below %" PRIu64 " bytes free (%s)",
		     atomic_load(&d->space_reserve),
		     d->bdi_max_bytes[0] ? d->bdi_max_bytes : "bdi unknown: default");
}

void tfsd_space_fini(struct tfsd *d)
{
	free(d->sents);
	d->sents = NULL;
	d->nsents = d->sentcap = 0;
}

bool tfsd_slow_spawn(struct tfsd *d, void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	pthread_t th;
	bool started;

	if (pthread_attr_init(&attr))
		return false;
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_mutex_lock(&d->slow_mu);
	started = pthread_create(&th, &attr, fn, arg) == 0;
	d->slow_n += started;
	pthread_mutex_unlock(&d->slow_mu);
	pthread_attr_destroy(&attr);
	return started;
}

void tfsd_slow_done(struct tfsd *d)
{
	pthread_mutex_lock(&d->slow_mu);
	if (!--d->slow_n)
		pthread_cond_broadcast(&d->slow_cv);
	pthread_mutex_unlock(&d->slow_mu);
}

/* ---- the inode table (under space_mu) ---- */

static struct space_ent *ent_find(struct tfsd *d, uint64_t ino)
{
	for (size_t i = 0; i < d->nsents; i++)
		if (d->sents[i].ino == ino)
			return &d->sents[i];
	return NULL;
}

static struct space_ent *ent_get(struct tfsd *d, uint64_t ino)
{
	struct space_ent *e = ent_find(d, ino);

	if (e)
		return e;
	if (d->nsents == d->sentcap) {
		size_t cap = d->sentcap ? d->sentcap * 2 : 16;
		struct space_ent *n = realloc(d->sents, cap * sizeof(*n));

		if (!n)
			return NULL;
		d->sents = n;
		d->sentcap = cap;
	}
	e = &d->sents[d->nsents++];
	*e = (struct space_ent){ .ino = ino, .maybe_dirty = true };
	return e;
}

/* Node room a write of @len bytes at @off may take: a MiB for every
 * V2D_CHUNK (1 MiB) of the file it changes (tfs_node_room_bytes).  A
 * grant's, at an offset not known, TFS_NODE_WRITE_ROOM: one more. */
_Static_assert(TFS_NODE_WRITE_ROOM == SPACE_GRANT + MiB, "a grant's node room");

static uint64_t node_cost(uint64_t off, uint64_t len)
{
	return len ? ((off + len - 1) / MiB - off / MiB + 1) * MiB : 0;
}

/* The grants of the inodes other than @ino (0: of all), in bytes of data
 * and (@node) of node room. */
static uint64_t grants_except(const struct tfsd *d, uint64_t ino, uint64_t *node)
{
	uint64_t g = 0;

	*node = 0;
	for (size_t i = 0; i < d->nsents; i++)
		if (d->sents[i].ino != ino) {
			g += d->sents[i].grant;
			*node += d->sents[i].grant ? TFS_NODE_WRITE_ROOM : 0;
		}
	return g;
}

/* ---- entering and leaving ---- */

struct inos_job {
	struct tfsd *d;
	size_t n;
	bool data;		/* write back and drop pages too, not attributes only */
	uint64_t inos[];
};

static void inval_inos(struct tfsd *d, const uint64_t *inos, size_t n, bool data)
{
	/* Offset -1: attributes only, no page lock.  Offset 0, length 0:
	 * the whole file; dirty pages are laundered (written to us and
	 * waited for) before they go. */
	for (size_t i = 0; i < n; i++)
		fuse_lowlevel_notify_inval_inode(d->se, inos[i], data ? 0 : -1, 0);
}

static void *inval_thread(void *arg)
{
	struct inos_job *j = arg;
	struct tfsd *d = j->d;

	inval_inos(d, j->inos, j->n, j->data);
	free(j);
	tfsd_slow_done(d);
	return NULL;
}

/* Snapshot the inodes with writable cached opens; under files_lock. */
static struct inos_job *cached_w_inos(struct tfsd *d)
{
	struct inos_job *j;
	size_t n = 0;

	for (struct tfsd_file *f = d->files.next; f != &d->files; f = f->next)
		n += f->cached_w;
	j = malloc(sizeof(*j) + (n ? n : 1) * sizeof(uint64_t));
	if (!j)
		return NULL;
	j->d = d;
	j->n = 0;
	j->data = false;
	for (struct tfsd_file *f = d->files.next; f != &d->files; f = f->next) {
		size_t k;

		if (!f->cached_w)
			continue;
		for (k = 0; k < j->n && j->inos[k] != f->ino; k++)
			;
		if (k == j->n)
			j->inos[j->n++] = f->ino;
	}
	return j;
}

/*
 * Make every inode with a writable cached open ask before its next
 * write(2): drop their attributes.  From a thread of its own: the caller
 * may be a WRITE the kernel's writeback waits for.
 */
static void switch_gates_on(struct tfsd *d, struct inos_job *j)
{
	if (!j)
		return;
	if (!j->n || !tfsd_slow_spawn(d, inval_thread, j)) {
		if (j->n)
			inval_inos(d, j->inos, j->n, false);
		free(j);
	}
}

static void enter_low(struct tfsd *d, uint64_t avail, uint64_t r, bool node)
{
	struct inos_job *j = NULL;

	pthread_mutex_lock(&d->files_lock);
	if (!atomic_load(&d->space_low)) {
		atomic_store(&d->space_low_since, now_ms());
		atomic_store(&d->space_low, true);
		j = cached_w_inos(d);
		pthread_mutex_lock(&d->space_mu);
		for (size_t i = 0; j && i < j->n; i++)
			ent_get(d, j->inos[i]);
		pthread_mutex_unlock(&d->space_mu);
		tlog(LOG_NOTICE, "free space low (%" PRIu64 " MiB%s, below %" PRIu64
		     " MiB): writes now reach the devices before write(2) returns",
		     avail / MiB, node ? " of writes the node area has room for" : "",
		     r / MiB);
	}
	pthread_mutex_unlock(&d->files_lock);
	switch_gates_on(d, j);
}

static void leave_low(struct tfsd *d, uint64_t avail)
{
	pthread_mutex_lock(&d->files_lock);
	if (atomic_load(&d->space_low)) {
		pthread_mutex_lock(&d->space_mu);
		/* Direct writes still in flight keep their pending count. */
		d->nsents = 0;
		pthread_mutex_unlock(&d->space_mu);
		atomic_store(&d->space_low, false);
		tlog(LOG_NOTICE, "free space back to %" PRIu64 " MiB: writes are cached again",
		     avail / MiB);
	}
	pthread_mutex_unlock(&d->files_lock);
}

void tfsd_space_dead(void *ctx)
{
	struct tfsd *d = ctx;
	struct inos_job *j;

	/* Cached writers must come to the gate (which now refuses them)
	 * from their next write(2) on, not after their attributes expire. */
	if (!d->writeback_cache || atomic_exchange(&d->space_dead_seen, true))
		return;
	pthread_mutex_lock(&d->files_lock);
	j = cached_w_inos(d);
	pthread_mutex_unlock(&d->files_lock);
	switch_gates_on(d, j);
}

void tfsd_space_check(struct tfsd *d)
{
	uint64_t avail, node, r;

	if (!d->writeback_cache)
		return;		/* every open is direct already */
	if (tfs_unusable(d->fs))
		tfsd_space_dead(d);
	avail = tfs_avail_bytes(d->fs);
	node = tfs_node_room_bytes(d->fs, true);
	r = space_reserve(d);
	if (!atomic_load_explicit(&d->space_low, memory_order_relaxed)) {
		if (avail < r || node < r)
			enter_low(d, avail < node ? avail : node, r, node < avail);
	} else if (avail >= r + r / 4 && node >= r + r / 4 &&
		   now_ms() >= atomic_load(&d->space_low_since) + SPACE_LOW_MIN_MS) {
		leave_low(d, avail < node ? avail : node);
	}
}

bool tfsd_space_open_direct(struct tfsd *d)
{
	return atomic_load(&d->space_low);
}

double tfsd_attr_timeout(struct tfsd *d)
{
	uint64_t r;

	if (!d->writeback_cache)
		return 1.0;
	if (atomic_load_explicit(&d->space_low, memory_order_relaxed) || tfs_unusable(d->fs))
		return 0.0;
	r = space_reserve(d);
	return space_avail(d) < r + r / 2 ? 0.0 : 1.0;
}

/* ---- the gate ---- */

struct gate_job {
	fuse_req_t req;
	uint64_t ino;
	struct tfsd_file *df;
};

/* Rounds of reclaiming (a log commit, a checkpoint) before ENOSPC stands:
 * other writers may take what one gave back. */
#define SPACE_RECLAIM_ROUNDS 4

enum { ROOM_OK, ROOM_DATA_SHORT, ROOM_NODE_SHORT };

/* Whether @len more bytes of data and @node_len more of node room fit
 * beside the direct writes in flight and the grants of the inodes other
 * than @ino (0: of all); under space_mu. */
static int room_for(struct tfsd *d, uint64_t ino, uint64_t len, uint64_t node_len)
{
	uint64_t gnode, g = grants_except(d, ino, &gnode);

	if (tfs_avail_bytes(d->fs) < d->space_pending + g + len)
		return ROOM_DATA_SHORT;
	if (tfs_node_room_bytes(d->fs, false) < d->space_pending_node + gnode + node_len)
		return ROOM_NODE_SHORT;
	return ROOM_OK;
}

static void grant(struct space_ent *e, const struct gate_job *g)
{
	e->grant = SPACE_GRANT;
	e->grant_df = g->df;
	e->maybe_dirty = true;
}

static int gate_decide(struct tfsd *d, const struct gate_job *g)
{
	struct space_ent *e;
	uint64_t *inos = NULL, need;
	size_t n = 0;
	int ret = 0, room;

	/* 0: while even a full page cache fits, no need to know more (the
	 * write-back below goes page by page: slow). */
	pthread_mutex_lock(&d->space_mu);
	e = ent_get(d, g->ino);
	if (e) {
		/* Its last write(2) is over: the kernel runs one per inode
		 * at a time. */
		e->grant = 0;
		e->grant_df = NULL;
		need = SPACE_GRANT + dirty_bound(d);
		if (room_for(d, g->ino, need, TFS_NODE_WRITE_ROOM + dirty_bound(d)) == ROOM_OK) {
			grant(e, g);
			pthread_mutex_unlock(&d->space_mu);
			return 0;
		}
	}
	/* 1: write back what may be dirty, this inode included. */
	inos = malloc((d->nsents ? d->nsents : 1) * sizeof(*inos));
	for (size_t i = 0; inos && i < d->nsents; i++)
		if (d->sents[i].maybe_dirty)
			inos[n++] = d->sents[i].ino;
	pthread_mutex_unlock(&d->space_mu);
	if (!e || !inos) {
		free(inos);
		return -ENOMEM;
	}
	inval_inos(d, inos, n, true);

	/* 2: what is left once the other write(2) calls in progress and the
	 * direct writes in flight have what they were promised. */
	pthread_mutex_lock(&d->space_mu);
	for (size_t i = 0; i < n; i++) {
		struct space_ent *o = ent_find(d, inos[i]);

		/* One with a grant may be writing still (it was flushed, not
		 * finished): it stays dirty until its own next gate. */
		if (o && !o->grant)
			o->maybe_dirty = false;
	}
	free(inos);
	for (int round = 0;; round++) {
		if (!atomic_load(&d->space_low))
			goto out;	/* left the mode meanwhile: the table is gone */
		e = ent_get(d, g->ino);
		if (!e) {
			ret = -ENOMEM;
			goto out;
		}
		room = room_for(d, g->ino, SPACE_GRANT, TFS_NODE_WRITE_ROOM);
		if (room == ROOM_OK)
			break;
		if (round == SPACE_RECLAIM_ROUNDS) {
			ret = -ENOSPC;
			goto out;
		}
		/* Blocks a delete freed come back with the next log commit
		 * (xfstests generic/371: a file deleted and made again beside
		 * a writer got ENOSPC with 60 MiB waiting for one), the node
		 * room the changes noted since the last checkpoint hold with
		 * the next checkpoint (on this thread of its own, the wait
		 * stalls no other request). */
		pthread_mutex_unlock(&d->space_mu);
		room = room == ROOM_DATA_SHORT ? tfs_reclaim_deferred(d->fs) : tfs_node_reclaim(d->fs);
		pthread_mutex_lock(&d->space_mu);
		if (room != 1) {
			ret = -ENOSPC;
			goto out;
		}
	}
	grant(e, g);
out:
	pthread_mutex_unlock(&d->space_mu);
	return ret;
}

static void gate_reply(struct tfsd *d, const struct gate_job *g, int ret)
{
	struct stat st;

	if (!ret)
		ret = tfs_getattr(d->fs, g->ino, &st);
	if (ret < 0)
		fuse_reply_err(g->req, -ret);
	else
		fuse_reply_attr(g->req, &st, 0.0);
}

static void *gate_thread(void *arg)
{
	struct gate_job *g = arg;
	struct tfsd *d = fuse_req_userdata(g->req);

	gate_reply(d, g, gate_decide(d, g));
	free(g);
	tfsd_slow_done(d);
	return NULL;
}

bool tfsd_space_gate(fuse_req_t req, fuse_ino_t ino, struct tfsd_file *df)
{
	struct tfsd *d = fuse_req_userdata(req);
	struct gate_job *g;

	/* Without the writeback cache, write(2) reaches us before it returns
	 * and fails there: no gate needed. */
	if (!df->cached_w || !d->writeback_cache)
		return false;
	if (tfs_unusable(d->fs)) {
		/* A cached write(2) now would be lost: refuse it (stat(2)
		 * carries no handle and still works). */
		fuse_reply_err(req, EROFS);
		return true;
	}
	if (!atomic_load(&d->space_low))
		return false;
	g = malloc(sizeof(*g));
	if (!g) {
		fuse_reply_err(req, ENOMEM);
		return true;
	}
	*g = (struct gate_job){ .req = req, .ino = ino, .df = df };
	if (!tfsd_slow_spawn(d, gate_thread, g)) {
		free(g);
		fuse_reply_err(req, EAGAIN);
	}
	return true;
}

/* Admits @h's bytes if what the grants and the writes in flight leave
 * covers them: ROOM_*. */
static int admit_now(struct tfsd *d, const struct tfsd_space_hold *h)
{
	int room;

	pthread_mutex_lock(&d->space_mu);
	room = room_for(d, 0, h->data, h->node);
	if (room == ROOM_OK) {
		d->space_pending += h->data;
		d->space_pending_node += h->node;
	}
	pthread_mutex_unlock(&d->space_mu);
	return room;
}

/*
 * ENOSPC only once no deferred frees are left to reclaim (or, short of
 * node room, no checkpoint would give slots back): otherwise the next log
 * commit (at most commit_ms later) would show free space in statfs that
 * this write was refused.  Other writers may defer more meanwhile: a few
 * rounds, then the answer stands.
 *
 * The data it counts is what the file's map says the write or allocation
 * takes (tfs_space_need), not its length: a write into fallocated space is
 * written in place and a fallocate over blocks already there takes none,
 * so both still work on a full file system, as fallocate promised
 * (xfstests generic/274).  The map may change before the write places its
 * blocks (another writer fills the same fallocated blocks first): then the
 * allocator itself answers ENOSPC to this write(2), nothing acknowledged
 * is lost.  Without @f, the whole length counts.
 */
int tfsd_space_admit(struct tfsd *d, struct tfs_file *f, uint64_t off, uint64_t len, bool alloc,
		     struct tfsd_space_hold *h)
{
	*h = (struct tfsd_space_hold){ 0 };
	if (!atomic_load_explicit(&d->space_low, memory_order_relaxed))
		return 1;
	if (!f || tfs_space_need(f, (off_t)off, len, alloc, &h->data))
		/* Not known: the most it may take, partial edge blocks too. */
		h->data = alloc ? len : len + 2 * 4096;
	h->node = alloc ? 0 : node_cost(off, len);
	for (int round = 0;; round++) {
		int room = admit_now(d, h);

		if (room == ROOM_OK)
			return 0;
		if (round == SPACE_RECLAIM_ROUNDS)
			return -ENOSPC;
		if (room == ROOM_DATA_SHORT ? tfs_reclaim_deferred(d->fs) != 1
					    : tfs_node_reclaim(d->fs) != 1)
			return -ENOSPC;
	}
}

void tfsd_space_done(struct tfsd *d, const struct tfsd_space_hold *h)
{
	pthread_mutex_lock(&d->space_mu);
	d->space_pending -= h->data;
	d->space_pending_node -= h->node;
	pthread_mutex_unlock(&d->space_mu);
}

/* An allocation while the mount is low on space goes in pieces this long,
 * each admitted on its own: what a piece has allocated shows in the free
 * space, and would count twice if the whole allocation stayed pending
 * until it ended (an 80 MiB fallocate on a 256 MiB file system refused
 * other writers 80 MiB it had already taken: xfstests generic/371). */
#define FALLOC_LOW_PIECE ((off_t)4 << 20)

/* A piece with nothing to allocate is not asked for (each would be a
 * transaction), and once the mount is no longer low the rest goes at once. */
int tfsd_space_fallocate(struct tfsd *d, struct tfs_file *f, int mode, off_t off, off_t len)
{
	bool zero = mode & FALLOC_FL_ZERO_RANGE;
	off_t end = off + len;
	int ret = 0;

	while (off < end && !ret) {
		off_t n = FALLOC_LOW_PIECE - off % FALLOC_LOW_PIECE;
		struct tfsd_space_hold hold;
		int adm;

		if (n > end - off)
			n = end - off;
		adm = tfsd_space_admit(d, zero ? NULL : f, (uint64_t)off, (uint64_t)n, true, &hold);
		if (adm < 0)
			return adm;
		if (adm > 0)
			return tfs_fallocate(f, mode, off, end - off);
		if (zero || hold.data || off + n == end)
			ret = tfs_fallocate(f, off + n < end ? mode | FALLOC_FL_KEEP_SIZE : mode,
					    off, n);
		tfsd_space_done(d, &hold);
		off += n;
	}
	return ret;
}

void tfsd_space_release(struct tfsd *d, struct tfsd_file *df)
{
	struct space_ent *e;

	if (!df->cached_w || !atomic_load(&d->space_low))
		return;
	pthread_mutex_lock(&d->space_mu);
	e = ent_find(d, df->ino);
	if (e && e->grant_df == df) {
		/* Its write(2) calls are over; close wrote its pages back. */
		e->grant = 0;
		e->grant_df = NULL;
	}
	pthread_mutex_unlock(&d->space_mu);
}
