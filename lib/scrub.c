// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * scrub: the background verify-and-repair pass over every allocated block
 * on every mirror (see scrub.h), its progress, rate limit, cancel, the
 * persistent cursor that lets it resume after a remount, and the list of
 * unrecoverable blocks named by path.
 *
 * Lock order: fs->ckpt_mu -> fs->ns_lock -> inode rangelock -> inode->lock
 * -> sc->mu (a leaf: nothing is taken and no I/O is done under it).  The
 * scrub thread holds a file's range lock (shared) only around one chunk's
 * reads and repairs, and fs->ckpt_mu only around one checkpoint chunk; it
 * holds neither while sleeping for the rate limit.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bnode.h"
#include "ckpt_v2.h"
#include "dir.h"
#include "event.h"
#include "fs_i.h"
#include "json.h"
#include "le.h"
#include "paths.h"
#include "scrub.h"
#include "tlog.h"
#include "v2nodes.h"

#define BLK TFS_BLOCK_SIZE
#define SCRUB_CKPT_EVERY_S 30	/* persist the cursor this often while running */
#define SCRUB_JSON_BAD_MAX 64	/* unrecoverable blocks listed in a status reply */
#define SCRUB_LOG_BAD_MAX 10	/* ... and logged at the end */

/* A bad-list entry for a format v2 tree node (off: its address in bytes). */
#define SCRUB_INO_NODE UINT64_MAX

struct scrub_bad {
	uint64_t ino, off;	/* ino 0: the checkpoint (off: byte offset in it);
				 * SCRUB_INO_NODE: a tree node */
	char *path;		/* set when the scrub ends */
};

struct scrub {
	struct tfs *fs;

	pthread_mutex_t mu;	/* leaf; protects everything below but buf */
	pthread_cond_t cv;	/* CLOCK_MONOTONIC: wakes the thread, and waiters at its end */
	pthread_t thread;
	bool thread_live;	/* a thread was created and not yet joined */
	bool running;		/* the thread has not ended its work */
	bool stop;		/* unmount: end, keep state RUNNING */
	bool cancel;		/* user cancel: end as CANCELED */
	struct super_scrub ps;	/* what every checkpoint persists */
	bool resumed;
	uint64_t bytes_run;
	int64_t run_start_ns, run_end_ns;	/* CLOCK_MONOTONIC */
	int64_t thr_start_ns;	/* rate limit baseline (reset on rate change) */
	uint64_t thr_bytes;
	struct scrub_bad *bad;
	size_t nbad;
	/* Format v2 tree nodes of this run (not persisted: a resumed scrub
	 * that starts inside the files does not walk them again). */
	bool v2;
	struct v2n_counts nodes;
	/* The thread's: fs_ckpt_wait calls scrub_file may still make (a
	 * run's FS_WALK_WAITS, refilled by a read-in they let through), so
	 * failing checkpoints cannot hold every file for seconds. */
	int walk_waits;

	uint8_t *buf[DEV_MAX];	/* the thread's, SCRUB_CHUNK blocks per device */
};

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec;
}

const char *scrub_state_name(int state)
{
	switch (state) {
	case SCRUB_RUNNING: return "running";
	case SCRUB_FINISHED: return "finished";
	case SCRUB_CANCELED: return "canceled";
	default: return "none";
	}
}

/* ---- life cycle ---- */

static void fill_super(void *ctx, struct super *sb);

int scrub_init(struct tfs *fs)
{
	struct scrub *sc = calloc(1, sizeof(*sc));
	pthread_condattr_t ca;
	int ret;

	if (!sc)
		return -ENOMEM;
	ret = sbc_register(fs, fill_super, fs);
	if (ret < 0) {
		free(sc);
		return ret;
	}
	sc->fs = fs;
	pthread_mutex_init(&sc->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&sc->cv, &ca);
	pthread_condattr_destroy(&ca);
	sc->ps = fs->sb.scrub;
	sc->v2 = fs->sb.version == SUPER_VERSION_V2;
	fs->scrub = sc;
	return 0;
}

static void free_bad(struct scrub *sc)
{
	for (size_t i = 0; i < sc->nbad; i++)
		free(sc->bad[i].path);
	free(sc->bad);
	sc->bad = NULL;
	sc->nbad = 0;
}

/* Stop and join the thread; mu not held. */
static void stop_thread(struct scrub *sc)
{
	bool live;

	pthread_mutex_lock(&sc->mu);
	live = sc->thread_live;
	if (sc->running) {
		sc->stop = true;
		pthread_cond_broadcast(&sc->cv);
	}
	sc->thread_live = false;
	pthread_mutex_unlock(&sc->mu);
	if (live)
		pthread_join(sc->thread, NULL);
}

void scrub_shutdown(struct tfs *fs)
{
	if (fs->scrub)
		stop_thread(fs->scrub);
}

void scrub_free(struct tfs *fs)
{
	struct scrub *sc = fs->scrub;

	if (!sc)
		return;
	stop_thread(sc);
	free_bad(sc);
	pthread_cond_destroy(&sc->cv);
	pthread_mutex_destroy(&sc->mu);
	free(sc);
	fs->scrub = NULL;
}

/* Registered with the superblock commit (sbc_register): the scrub state
 * is this file's field of the superblock.  Under fs->ckpt_mu. */
static void fill_super(void *ctx, struct super *sb)
{
	struct tfs *fs = ctx;
	struct scrub *sc = fs->scrub;

	if (!sc)
		return;
	pthread_mutex_lock(&sc->mu);
	sb->scrub = sc->ps;
	pthread_mutex_unlock(&sc->mu);
}

/* ---- the pass ---- */

static bool should_end(struct scrub *sc)
{
	bool end;

	pthread_mutex_lock(&sc->mu);
	end = sc->stop || sc->cancel;
	pthread_mutex_unlock(&sc->mu);
	return end;
}

static void add_bad(struct scrub *sc, uint64_t ino, uint64_t off)
{
	pthread_mutex_lock(&sc->mu);
	sc->ps.unrecoverable++;
	if (sc->nbad < SCRUB_BAD_MAX) {
		struct scrub_bad *nb = realloc(sc->bad, (sc->nbad + 1) * sizeof(*nb));

		if (nb) {
			sc->bad = nb;
			sc->bad[sc->nbad++] = (struct scrub_bad){ .ino = ino, .off = off };
		}
	}
	pthread_mutex_unlock(&sc->mu);
}

static void count(struct scrub *sc, uint64_t *field, uint64_t n)
{
	pthread_mutex_lock(&sc->mu);
	*field += n;
	pthread_mutex_unlock(&sc->mu);
}

/*
 * Verify blocks [phys, phys+n) on every healthy device against csums[] and
 * repair bad copies.  ino/fblk0 name the blocks for the unrecoverable list
 * (ino 0: checkpoint, fblk0 its block index).  -ENODEV when no device is
 * healthy any more.  Caller holds what keeps the blocks allocated.
 */
static int scrub_blocks(struct scrub *sc, uint64_t phys, uint32_t n, const uint64_t *csums,
			uint64_t ino, uint64_t fblk0)
{
	struct mirror *m = &sc->fs->mirror;
	struct dev_io ios[DEV_MAX];
	unsigned devs[DEV_MAX], nh = 0;
	bool failed[DEV_MAX];
	int ret;

	for (unsigned d = 0; d < m->ndevs; d++)
		if (m->devs[d] && atomic_load(&m->state[d]) == MDEV_OK)
			devs[nh++] = d;
	if (!nh)
		return -ENODEV;
	/* Every copy at once: the devices work in parallel. */
	for (unsigned k = 0; k < nh; k++)
		ios[k] = (struct dev_io){
			.dev = m->devs[devs[k]], .op = DEV_READ, .off = phys * BLK,
			.buf = sc->buf[devs[k]], .len = n * BLK,
		};
	ret = dev_submit(m->be, ios, nh);
	for (unsigned k = 0; k < nh; k++) {
		failed[k] = ret || ios[k].res;
		if (!failed[k])
			continue;
		mirror_event(m, devs[k], MEV_READ_ERR, phys, 1);
		count(sc, &sc->ps.read_err, 1);
		if (atomic_load(&m->ctr[devs[k]].read_err) >= MIRROR_READ_ERR_LIMIT)
			mirror_fail_dev(m, devs[k], ret ? ret : ios[k].res);
	}

	for (uint32_t i = 0; i < n; i++) {
		unsigned bad[DEV_MAX], nbad = 0;
		int good = -1;

		for (unsigned k = 0; k < nh; k++) {
			const uint8_t *p = sc->buf[devs[k]] + (size_t)i * BLK;

			if (failed[k]) {
				bad[nbad++] = k;
			} else if (csum_block(p, phys + i) != csums[i]) {
				mirror_event(m, devs[k], MEV_CSUM_ERR, phys + i, 1);
				count(sc, &sc->ps.csum_err, 1);
				bad[nbad++] = k;
			} else if (good < 0) {
				good = (int)k;
			}
		}
		if (!nbad)
			continue;
		if (good < 0) {
			mirror_event(m, devs[0], MEV_UNRECOVERABLE, phys + i, 1);
			add_bad(sc, ino, (fblk0 + i) * BLK);
			continue;
		}
		for (unsigned b = 0; b < nbad; b++) {
			unsigned d = devs[bad[b]];

			/* Same content at the same place: safe under CoW even
			 * if a foreground read repairs it at the same time. */
			if (mirror_write_dev(m, d, phys + i,
					     sc->buf[devs[good]] + (size_t)i * BLK, 1) == 0) {
				mirror_event(m, d, MEV_REPAIRED, phys + i, 1);
				count(sc, &sc->ps.repaired, 1);
			}
		}
	}
	return 0;
}

/* After each chunk: progress, cursor, rate limit, periodic persistence. */
static void chunk_done(struct scrub *sc, uint64_t ino, uint64_t fblk, uint64_t bytes)
{
	int64_t now = mono_ns();

	pthread_mutex_lock(&sc->mu);
	sc->ps.ino = ino;
	sc->ps.fblk = fblk;
	sc->ps.bytes_done += bytes;
	sc->bytes_run += bytes;
	sc->thr_bytes += bytes;
	/* Sleep until the bytes done since the baseline match the rate. */
	while (sc->ps.rate && !sc->stop && !sc->cancel) {
		int64_t due = sc->thr_start_ns +
			      (int64_t)((double)sc->thr_bytes * 1e9 / (double)sc->ps.rate);
		struct timespec ts;

		now = mono_ns();
		if (now >= due)
			break;
		ts.tv_sec = due / 1000000000;
		ts.tv_nsec = due % 1000000000;
		pthread_cond_timedwait(&sc->cv, &sc->mu, &ts);
	}
	pthread_mutex_unlock(&sc->mu);
}

struct ckpt_view {
	uint64_t start, blocks, bytes, table_csum, gen;
	uint8_t fs_uuid[16];
};

static void ckpt_view_get(struct tfs *fs, struct ckpt_view *v)
{
	v->start = fs->sb.ckpt_start;
	v->blocks = fs->sb.ckpt_blocks;
	v->bytes = fs->sb.ckpt_bytes;
	v->table_csum = fs->sb.ckpt_table_csum;
	v->gen = fs->sb.generation;
	memcpy(v->fs_uuid, fs->sb.fs_uuid, 16);
}

/* Still the checkpoint we started on?  Caller holds ckpt_mu. */
static bool ckpt_same(struct tfs *fs, const struct ckpt_view *v)
{
	return fs->sb.ckpt_start == v->start && fs->sb.ckpt_blocks == v->blocks &&
	       fs->sb.ckpt_table_csum == v->table_csum;
}

/*
 * The table: per device, as a whole against the superblock's csum (that is
 * how mount checks it); a device whose copy does not verify gets the
 * verified copy rewritten, counted per differing block.  Caller holds
 * ckpt_mu.  Returns the verified table in *good (one of the buffers), or
 * NULL when no copy verifies.
 */
static uint8_t *scrub_ckpt_table(struct scrub *sc, const struct ckpt_view *v, uint64_t table,
				 uint8_t **tb)
{
	struct mirror *m = &sc->fs->mirror;
	uint64_t seed = ckpt_table_seed(v->fs_uuid);
	bool ok[DEV_MAX] = { false }, readok[DEV_MAX] = { false };
	uint8_t *good = NULL;
	unsigned first = DEV_MAX;

	for (unsigned d = 0; d < m->ndevs; d++) {
		if (!tb[d] || !m->devs[d] || atomic_load(&m->state[d]) != MDEV_OK)
			continue;
		if (first == DEV_MAX)
			first = d;
		if (mirror_read_dev(m, d, v->start, tb[d], (uint32_t)table) < 0) {
			count(sc, &sc->ps.read_err, 1);
			continue;
		}
		readok[d] = true;
		ok[d] = csum_buf(tb[d], table * BLK, seed) == v->table_csum;
		if (ok[d] && !good)
			good = tb[d];
	}
	for (unsigned d = 0; d < m->ndevs; d++) {
		if (!tb[d] || !m->devs[d] || atomic_load(&m->state[d]) != MDEV_OK || ok[d])
			continue;
		for (uint64_t b = 0; b < table; b++) {
			if (readok[d] && good &&
			    !memcmp(tb[d] + b * BLK, good + b * BLK, BLK))
				continue;
			if (readok[d]) {
				mirror_event(m, d, MEV_CSUM_ERR, v->start + b, 1);
				count(sc, &sc->ps.csum_err, 1);
			}
			if (!good)
				continue;
			if (mirror_write_dev(m, d, v->start + b, good + b * BLK, 1) == 0) {
				mirror_event(m, d, MEV_REPAIRED, v->start + b, 1);
				count(sc, &sc->ps.repaired, 1);
			}
		}
	}
	if (!good && first != DEV_MAX) {
		for (uint64_t b = 0; b < table; b++) {
			mirror_event(m, first, MEV_UNRECOVERABLE, v->start + b, 1);
			add_bad(sc, 0, b * BLK);
		}
	}
	return good;
}

/* Phase 1: the current checkpoint, chunk by chunk under ckpt_mu. */
static void scrub_ckpt(struct scrub *sc)
{
	struct tfs *fs = sc->fs;
	struct ckpt_view v;
	uint8_t *tb[DEV_MAX] = { NULL }, *good;
	uint64_t payload, table, *csums = NULL, from;

	pthread_mutex_lock(&fs->ckpt_mu);
	ckpt_view_get(fs, &v);
	pthread_mutex_unlock(&fs->ckpt_mu);
	if (!v.blocks)
		return;
	ckpt_geom(v.bytes, &payload, &table);
	if (table + payload != v.blocks || table > UINT32_MAX)
		return;
	for (unsigned d = 0; d < fs->mirror.ndevs; d++)
		if (posix_memalign((void **)&tb[d], BLK, table * BLK))
			goto out;
	csums = malloc(payload * sizeof(*csums));
	if (!csums)
		goto out;

	pthread_mutex_lock(&fs->ckpt_mu);
	if (!ckpt_same(fs, &v)) {
		/* Replaced since: the new one was just written from memory. */
		pthread_mutex_unlock(&fs->ckpt_mu);
		goto out;
	}
	good = scrub_ckpt_table(sc, &v, table, tb);
	pthread_mutex_unlock(&fs->ckpt_mu);
	if (!good)
		goto out;
	for (uint64_t i = 0; i < payload; i++)
		csums[i] = le64_get(good + i * 8);
	chunk_done(sc, 0, 0, table * BLK);

	/* A resumed scrub's cursor points into an earlier mount's checkpoint:
	 * every mount writes a new one, so start this one from its start. */
	for (from = 0; from < payload; from += SCRUB_CHUNK) {
		uint32_t k = (uint32_t)(payload - from < SCRUB_CHUNK ? payload - from : SCRUB_CHUNK);
		bool same;

		if (should_end(sc))
			break;
		pthread_mutex_lock(&fs->ckpt_mu);
		same = ckpt_same(fs, &v);
		if (same && scrub_blocks(sc, v.start + table + from, k, csums + from, 0,
					 table + from) == -ENODEV)
			same = false;
		pthread_mutex_unlock(&fs->ckpt_mu);
		if (!same)
			break;
		chunk_done(sc, 0, table + from + k, (uint64_t)k * BLK);
	}
out:
	free(csums);
	for (unsigned d = 0; d < DEV_MAX; d++)
		free(tb[d]);
}

/* Phase 1 on format v2: every tree node on every mirror (v2nodes.h). */
static bool nodes_piece(void *ctx, uint64_t nodes)
{
	struct scrub *sc = ctx;

	chunk_done(sc, 0, 0, nodes * BNODE_SIZE);
	return should_end(sc);
}

static void node_lost(void *ctx, uint64_t addr)
{
	struct scrub *sc = ctx;

	add_bad(sc, SCRUB_INO_NODE, addr * BLK);
	/* In blocks, as the other counters: add_bad counted one. */
	count(sc, &sc->ps.unrecoverable, BNODE_BLOCKS - 1);
}

/* -ENODEV when no device is left. */
static int scrub_nodes(struct scrub *sc)
{
	struct v2n_walk w = { .fs = sc->fs, .target = -1, .piece_done = nodes_piece,
			      .on_lost = node_lost, .ctx = sc };
	int ret = v2n_walk(&w);

	pthread_mutex_lock(&sc->mu);
	sc->nodes = w.n;
	/* The file system's counters are in blocks: a node is BNODE_BLOCKS. */
	sc->ps.csum_err += (w.n.bad - w.n.read_err) * BNODE_BLOCKS;
	sc->ps.read_err += w.n.read_err * BNODE_BLOCKS;
	sc->ps.repaired += w.n.repaired * BNODE_BLOCKS;
	pthread_mutex_unlock(&sc->mu);
	if (w.n.unrecoverable)
		tfs_log(LOG_ERR, "scrub: %llu tree nodes have no good copy on any device",
			(unsigned long long)w.n.unrecoverable);
	return ret == -ECANCELED ? 0 : ret;
}

struct file_walk {
	struct scrub *sc;
	uint64_t ino;
	uint64_t bytes;		/* mapped bytes visited */
	uint64_t csums[SCRUB_CHUNK];
	int err;
};

static int file_run(void *ctx, uint64_t fblk, uint64_t phys, uint32_t n,
		    const struct extent_ent *ents)
{
	struct file_walk *w = ctx;

	w->bytes += (uint64_t)n * BLK;
	/* Never written (fallocated): nothing on the devices to verify. */
	if (phys & EXTENT_UNWRITTEN)
		return 0;
	for (uint32_t i = 0; i < n; i++)
		w->csums[i] = ents[i].csum;
	w->err = scrub_blocks(w->sc, phys, n, w->csums, w->ino, fblk);
	return w->err ? 1 : 0;
}

/* Phase 2, one file from block fblk on.  Returns -ENODEV when no device
 * is left. */
static int scrub_file(struct scrub *sc, uint64_t ino, uint64_t fblk)
{
	struct tfs *fs = sc->fs;
	struct tfs_inode *ip;
	struct file_walk w = { .sc = sc, .ino = ino };
	bool reg = false;
	int waits;
	int ret = 0;

	/* An open reference keeps the inode alive without ns_lock, even if
	 * it is unlinked meanwhile (it is deleted by our fs_iput_open). */
	pthread_mutex_lock(&fs->ns_lock);
	/* Deaths lost (v2dirty.h): wait for the checkpoint that rebuilds
	 * rather than skip the file; a read-in that waited and then worked
	 * gives the run its budget back. */
	waits = sc->walk_waits;
	ret = fs_get_walk_waiting(fs, ino, &ip, &sc->walk_waits);
	if (!ret && sc->walk_waits != waits)
		sc->walk_waits = FS_WALK_WAITS;
	if (!ret) {
		inode_lock(ip);
		reg = S_ISREG(inode_mode(ip));
		inode_unlock(ip);
		if (reg)
			inode_open_add(ip);
	} else {
		ip = NULL;
	}
	pthread_mutex_unlock(&fs->ns_lock);
	if (!ip || !reg) {
		inode_put(fs, ip);
		return 0;
	}

	while (!should_end(sc)) {
		struct rl_range r;
		uint64_t next, end;

		/* Shared from fblk on: no truncate frees map nodes under the
		 * search. */
		rl_lock(inode_rl(ip), &r, fblk, RL_EOF, false);
		next = inode_next_data(ip, fblk);
		rl_unlock(inode_rl(ip), &r);
		if (next >= EXTENT_MAX_FBLK)
			break;
		end = next + SCRUB_CHUNK;
		/* Shared over the chunk: the entries and the blocks they name
		 * cannot change or be freed (CoW writers and truncate take the
		 * range exclusively) while we read and repair. */
		rl_lock(inode_rl(ip), &r, next, end, false);
		w.bytes = 0;
		ret = inode_extent_walk(ip, next, end, file_run, &w);
		rl_unlock(inode_rl(ip), &r);
		if (ret < 0 && !w.err)
			w.err = ret;	/* the map could not be read (format v2) */
		ret = 0;
		if (w.err) {
			ret = w.err;
			break;
		}
		chunk_done(sc, ino, end, w.bytes);
		fblk = end;
	}
	fs_iput_open(fs, ip);
	inode_put(fs, ip);
	return ret;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* icursor_next, waiting for the checkpoint that rebuilds while deaths are
 * lost (v2dirty.h, fs_ckpt_wait) rather than failing with ENOMEM. */
static int next_wait(struct tfs *fs, struct icursor *c, uint64_t *ino)
{
	int ret, waits = 0;

	while ((ret = icursor_next(fs, c, ino)) == -ENOMEM && waits++ < FS_WALK_WAITS &&
	       fs_ckpt_wait(fs))
		;
	return ret;
}

/* The regular files (sorted inode numbers) and the bytes to verify. */
static int snapshot(struct tfs *fs, uint64_t **out, size_t *nout, uint64_t *total)
{
	uint64_t *inos = NULL, bytes, ino;
	size_t k = 0, cap = 0;
	struct icursor c;
	int ret;

	pthread_mutex_lock(&fs->ckpt_mu);
	bytes = fs->sb.ckpt_blocks * BLK;
	/* Format v2: the tree nodes the walk reads (nodes_piece counts). */
	bytes += ckpt_v2_nodes_used(fs) * BNODE_SIZE;
	pthread_mutex_unlock(&fs->ckpt_mu);

	/* One inode at a time: on format v2 each may be read in and leave
	 * memory again; one deleted meanwhile is skipped here or later. */
	ret = icursor_init(fs, &c);
	if (ret < 0)
		return ret;
	while ((ret = next_wait(fs, &c, &ino)) == 0) {
		struct tfs_inode *ip;
		bool reg;
		int waits = 0;

		/* Deaths lost (v2dirty.h): wait for the checkpoint that
		 * rebuilds rather than fail the scrub. */
		while ((ret = inode_get_walk(fs, ino, &ip)) == -ENOMEM && waits++ < FS_WALK_WAITS &&
		       fs_ckpt_wait(fs))
			;
		if (ret == -ENOENT)
			continue;
		if (ret)
			break;
		inode_lock(ip);
		reg = S_ISREG(inode_mode(ip));
		inode_unlock(ip);
		if (reg)
			bytes += inode_mapped(ip) * BLK;
		inode_put(fs, ip);
		if (!reg)
			continue;
		if (k == cap) {
			size_t ncap = cap ? cap * 2 : 256;
			uint64_t *ni = realloc(inos, ncap * sizeof(*ni));

			if (!ni) {
				ret = -ENOMEM;
				break;
			}
			inos = ni;
			cap = ncap;
		}
		inos[k++] = ino;
	}
	icursor_free(&c);
	if (ret != -ENOENT) {
		free(inos);
		return ret;
	}
	qsort(inos, k, sizeof(*inos), cmp_u64);
	*out = inos;
	*nout = k;
	*total = bytes;
	return 0;
}

/* ---- paths ---- */

int scrub_ino_path(struct tfs *fs, uint64_t ino, char *out, size_t outlen)
{
	return path_of_ino(fs, ino, out, outlen);
}

/* Give every listed bad block its file's path. */
static void name_bad(struct scrub *sc)
{
	struct path_want *w;
	size_t n;

	pthread_mutex_lock(&sc->mu);
	n = sc->nbad;
	w = calloc(n ? n : 1, sizeof(*w));
	for (size_t i = 0; w && i < n; i++)
		w[i].ino = sc->bad[i].ino;
	pthread_mutex_unlock(&sc->mu);
	if (!w || !n) {
		free(w);
		return;
	}
	path_sort(w, n);
	path_resolve(sc->fs, w, n);

	pthread_mutex_lock(&sc->mu);
	for (size_t i = 0; i < sc->nbad && i < n; i++) {
		struct path_want *hit;
		char tmp[48];

		if (sc->bad[i].path)
			continue;
		hit = path_find(w, n, sc->bad[i].ino);
		if (sc->bad[i].ino == 0)
			snprintf(tmp, sizeof(tmp), "<checkpoint>");
		else if (sc->bad[i].ino == SCRUB_INO_NODE)
			snprintf(tmp, sizeof(tmp), "<tree node at block %llu>",
				 (unsigned long long)(sc->bad[i].off / BLK));
		else
			snprintf(tmp, sizeof(tmp), "<ino %llu>",
				 (unsigned long long)sc->bad[i].ino);
		sc->bad[i].path = strdup(hit && hit->path ? hit->path : tmp);
	}
	pthread_mutex_unlock(&sc->mu);
	for (size_t i = 0; i < n; i++)
		free(w[i].path);
	free(w);
}

static void log_summary(struct scrub *sc)
{
	struct scrub_nodes_ev nodes;
	struct super_scrub ps;
	uint64_t run;
	double secs;

	pthread_mutex_lock(&sc->mu);
	ps = sc->ps;
	run = sc->bytes_run;
	secs = (double)(sc->run_end_ns - sc->run_start_ns) / 1e9;
	pthread_mutex_unlock(&sc->mu);
	tfs_log(ps.unrecoverable ? LOG_ERR : ps.csum_err || ps.read_err ? LOG_WARNING : LOG_INFO,
		"scrub %s: %llu MiB verified in %.1f s; %llu bad copies, %llu repaired, "
		"%llu unrecoverable, %llu read errors", scrub_state_name((int)ps.state),
		(unsigned long long)(run >> 20), secs, (unsigned long long)ps.csum_err,
		(unsigned long long)ps.repaired, (unsigned long long)ps.unrecoverable,
		(unsigned long long)ps.read_err);
	pthread_mutex_lock(&sc->mu);
	nodes = (struct scrub_nodes_ev){ .checked = sc->nodes.checked,
		.repaired = sc->nodes.repaired, .unrecoverable = sc->nodes.unrecoverable };
	pthread_mutex_unlock(&sc->mu);
	event_scrub_done(sc->fs, scrub_state_name((int)ps.state), ps.csum_err, ps.repaired,
			 ps.unrecoverable, ps.read_err, sc->v2 ? &nodes : NULL);
	pthread_mutex_lock(&sc->mu);
	for (size_t i = 0; i < sc->nbad && i < SCRUB_LOG_BAD_MAX; i++)
		tfs_log(LOG_ERR, "scrub: unrecoverable block: %s offset %llu",
			sc->bad[i].path ? sc->bad[i].path : "?",
			(unsigned long long)sc->bad[i].off);
	if (ps.unrecoverable > SCRUB_LOG_BAD_MAX)
		tfs_log(LOG_ERR, "scrub: ... and %llu more unrecoverable blocks",
			(unsigned long long)(ps.unrecoverable - SCRUB_LOG_BAD_MAX));
	pthread_mutex_unlock(&sc->mu);
}

static void *scrub_main(void *arg)
{
	struct scrub *sc = arg;
	struct tfs *fs = sc->fs;
	uint64_t *inos = NULL, total = 0, start_ino, start_fblk;
	int64_t last_ckpt = mono_ns();
	size_t nino = 0;
	bool stopped, failed = false;
	int ret = 0;

	sc->walk_waits = FS_WALK_WAITS;
	for (unsigned d = 0; d < fs->mirror.ndevs; d++)
		if (posix_memalign((void **)&sc->buf[d], BLK, (size_t)SCRUB_CHUNK * BLK))
			ret = -ENOMEM;
	if (ret == 0)
		ret = snapshot(fs, &inos, &nino, &total);
	/* An inode the walk read lies in a tree node with no good copy (the
	 * mount reads only what it needs, so the scrub may be the first to
	 * meet it): the node pass finds, counts and names it. */
	if (ret == -EIO)
		scrub_nodes(sc);
	if (ret == -EIO) {
		tfs_log(LOG_ERR, "scrub: cannot list the files: a tree node has no good copy");
		failed = true;
		goto end;
	}
	if (ret < 0) {
		tfs_log(LOG_ERR, "scrub: cannot start: %s", strerror(-ret));
		failed = true;
		goto end;
	}
	pthread_mutex_lock(&sc->mu);
	sc->ps.bytes_total = total;
	start_ino = sc->ps.ino;
	start_fblk = sc->ps.fblk;
	pthread_mutex_unlock(&sc->mu);

	if (start_ino == 0) {
		scrub_ckpt(sc);
		if (scrub_nodes(sc) == -ENODEV) {
			tfs_log(LOG_ERR, "scrub: no healthy device left; stopping");
			failed = true;
			goto end;
		}
		start_fblk = 0;
	}
	for (size_t i = 0; i < nino; i++) {
		if (inos[i] < start_ino)
			continue;
		if (should_end(sc))
			break;
		ret = scrub_file(sc, inos[i], inos[i] == start_ino ? start_fblk : 0);
		if (ret == -ENODEV) {
			tfs_log(LOG_ERR, "scrub: no healthy device left; stopping");
			failed = true;
			break;
		}
		/* Stopped inside this file: the cursor stays in it. */
		if (should_end(sc))
			break;
		if (i + 1 < nino)
			chunk_done(sc, inos[i + 1], 0, 0);
		/* A crash loses at most this much of the pass. */
		if (mono_ns() - last_ckpt > (int64_t)SCRUB_CKPT_EVERY_S * 1000000000) {
			ckpt_write(fs);
			last_ckpt = mono_ns();
		}
	}
end:
	free(inos);
	pthread_mutex_lock(&sc->mu);
	stopped = sc->stop;
	pthread_mutex_unlock(&sc->mu);
	/* Named before the pass says it is over: whoever sees it finished
	 * (twinfs-ctl scrub --wait) reads the paths, not "?". */
	if (!stopped)
		name_bad(sc);
	pthread_mutex_lock(&sc->mu);
	if (!stopped) {
		sc->ps.state = sc->cancel || failed ? SCRUB_CANCELED : SCRUB_FINISHED;
		sc->ps.finished_ns = real_ns();
	}
	sc->run_end_ns = mono_ns();
	pthread_mutex_unlock(&sc->mu);
	if (!stopped) {
		log_summary(sc);
		/* Persist the outcome now, not at the next checkpoint. */
		ckpt_write(fs);
	}
	for (unsigned d = 0; d < DEV_MAX; d++) {
		free(sc->buf[d]);
		sc->buf[d] = NULL;
	}
	pthread_mutex_lock(&sc->mu);
	sc->running = false;
	pthread_cond_broadcast(&sc->cv);
	pthread_mutex_unlock(&sc->mu);
	return NULL;
}

/* Caller holds sc->mu, no thread running. */
static int spawn(struct scrub *sc)
{
	int ret;

	sc->running = true;
	sc->stop = false;
	sc->cancel = false;
	sc->bytes_run = 0;
	sc->run_start_ns = sc->thr_start_ns = mono_ns();
	sc->run_end_ns = 0;
	sc->thr_bytes = 0;
	ret = -pthread_create(&sc->thread, NULL, scrub_main, sc);
	if (ret < 0) {
		sc->running = false;
		return ret;
	}
	sc->thread_live = true;
	return 0;
}

/* Join a thread that ended on its own.  Called with mu held; drops it
 * around the join. */
static void reap(struct scrub *sc)
{
	if (sc->thread_live && !sc->running) {
		sc->thread_live = false;
		pthread_mutex_unlock(&sc->mu);
		pthread_join(sc->thread, NULL);
		pthread_mutex_lock(&sc->mu);
	}
}

int scrub_start(struct tfs *fs, uint64_t rate)
{
	struct scrub *sc = fs->scrub;
	int ret;

	if (!sc)
		return -ENODEV;
	if (fs->readonly)
		return -EROFS;
	pthread_mutex_lock(&sc->mu);
	reap(sc);
	if (sc->running || sc->thread_live) {
		pthread_mutex_unlock(&sc->mu);
		return -EBUSY;
	}
	free_bad(sc);
	memset(&sc->ps, 0, sizeof(sc->ps));
	memset(&sc->nodes, 0, sizeof(sc->nodes));
	sc->ps.state = SCRUB_RUNNING;
	sc->ps.started_ns = real_ns();
	sc->ps.rate = rate;
	sc->resumed = false;
	ret = spawn(sc);
	if (ret < 0)
		sc->ps.state = SCRUB_CANCELED;
	pthread_mutex_unlock(&sc->mu);
	if (ret == 0)
		tfs_log(LOG_INFO, "scrub started%s", rate ? " (rate limited)" : "");
	return ret;
}

int scrub_mount_resume(struct tfs *fs)
{
	struct scrub *sc = fs->scrub;
	int ret = 0;

	if (!sc || fs->readonly)
		return 0;
	pthread_mutex_lock(&sc->mu);
	if (sc->ps.state == SCRUB_RUNNING && !sc->thread_live) {
		sc->resumed = true;
		ret = spawn(sc);
	}
	pthread_mutex_unlock(&sc->mu);
	if (sc->resumed && ret == 0)
		tfs_log(LOG_INFO, "scrub resumed at inode %llu block %llu",
			(unsigned long long)sc->ps.ino, (unsigned long long)sc->ps.fblk);
	return ret;
}

int scrub_cancel(struct tfs *fs)
{
	struct scrub *sc = fs->scrub;

	if (!sc)
		return -ENODEV;
	pthread_mutex_lock(&sc->mu);
	if (!sc->running) {
		pthread_mutex_unlock(&sc->mu);
		return -ENOENT;
	}
	sc->cancel = true;
	pthread_cond_broadcast(&sc->cv);
	pthread_mutex_unlock(&sc->mu);
	return 0;
}

int scrub_set_rate(struct tfs *fs, uint64_t rate)
{
	struct scrub *sc = fs->scrub;

	if (!sc)
		return -ENODEV;
	pthread_mutex_lock(&sc->mu);
	sc->ps.rate = rate;
	sc->thr_start_ns = mono_ns();
	sc->thr_bytes = 0;
	pthread_cond_broadcast(&sc->cv);
	pthread_mutex_unlock(&sc->mu);
	return 0;
}

int scrub_wait(struct tfs *fs)
{
	struct scrub *sc = fs->scrub;

	if (!sc)
		return -ENODEV;
	pthread_mutex_lock(&sc->mu);
	while (sc->running)
		pthread_cond_wait(&sc->cv, &sc->mu);
	reap(sc);
	pthread_mutex_unlock(&sc->mu);
	return 0;
}

int scrub_get_status(struct tfs *fs, struct scrub_status *st)
{
	struct scrub *sc = fs->scrub;
	int64_t end;

	memset(st, 0, sizeof(*st));
	if (!sc)
		return -ENODEV;
	pthread_mutex_lock(&sc->mu);
	st->state = (int)sc->ps.state;
	st->resumed = sc->resumed;
	st->bytes_done = sc->ps.bytes_done;
	st->bytes_total = sc->ps.bytes_total;
	/* done can pass total when files grew or a checkpoint moved */
	if (st->bytes_total < st->bytes_done)
		st->bytes_total = st->bytes_done;
	st->bytes_run = sc->bytes_run;
	end = sc->running ? mono_ns() : sc->run_end_ns;
	st->elapsed_s = sc->run_start_ns && end > sc->run_start_ns ?
			(double)(end - sc->run_start_ns) / 1e9 : 0;
	st->rate_bps = st->elapsed_s > 0 ? (double)sc->bytes_run / st->elapsed_s : 0;
	st->eta_s = -1;
	if (st->state == SCRUB_RUNNING && st->rate_bps > 0 && st->bytes_total)
		st->eta_s = (double)(st->bytes_total - st->bytes_done) / st->rate_bps;
	else if (st->state != SCRUB_RUNNING)
		st->eta_s = 0;
	st->rate_limit = sc->ps.rate;
	st->started_ns = sc->ps.started_ns;
	st->finished_ns = sc->ps.finished_ns;
	st->csum_err = sc->ps.csum_err;
	st->repaired = sc->ps.repaired;
	st->unrecoverable = sc->ps.unrecoverable;
	st->read_err = sc->ps.read_err;
	st->cursor_ino = sc->ps.ino;
	st->cursor_fblk = sc->ps.fblk;
	st->nbad = sc->nbad;
	pthread_mutex_unlock(&sc->mu);
	return 0;
}

int scrub_get_bad(struct tfs *fs, size_t i, uint64_t *ino, uint64_t *off, char *path,
		  size_t pathlen)
{
	struct scrub *sc = fs->scrub;
	int ret = -ENOENT;

	if (!sc)
		return -ENODEV;
	pthread_mutex_lock(&sc->mu);
	if (i < sc->nbad) {
		*ino = sc->bad[i].ino;
		*off = sc->bad[i].off;
		if (path && pathlen)
			snprintf(path, pathlen, "%s", sc->bad[i].path ? sc->bad[i].path : "");
		ret = 0;
	}
	pthread_mutex_unlock(&sc->mu);
	return ret;
}

void scrub_status_json(struct tfs *fs, struct jbuf *j)
{
	struct scrub_status st;
	struct scrub *sc = fs->scrub;

	if (scrub_get_status(fs, &st) < 0) {
		jb_str(j, "state", "none");
		return;
	}
	jb_str(j, "state", scrub_state_name(st.state));
	jb_bool(j, "resumed", st.resumed);
	jb_u64(j, "bytes_done", st.bytes_done);
	jb_u64(j, "bytes_total", st.bytes_total);
	jb_double(j, "percent", st.bytes_total ? 100.0 * (double)st.bytes_done /
					       (double)st.bytes_total :
					       st.state == SCRUB_FINISHED ? 100.0 : 0.0);
	jb_u64(j, "bytes_run", st.bytes_run);
	jb_double(j, "elapsed_s", st.elapsed_s);
	jb_double(j, "rate_bps", st.rate_bps);
	jb_double(j, "eta_s", st.eta_s);
	jb_u64(j, "rate_limit", st.rate_limit);
	jb_u64(j, "started_ns", st.started_ns);
	jb_u64(j, "finished_ns", st.finished_ns);
	jb_u64(j, "csum_errors", st.csum_err);
	jb_u64(j, "repaired", st.repaired);
	jb_u64(j, "unrecoverable", st.unrecoverable);
	jb_u64(j, "read_errors", st.read_err);
	jb_obj_begin(j, "cursor");
	jb_u64(j, "ino", st.cursor_ino);
	jb_u64(j, "fblk", st.cursor_fblk);
	jb_obj_end(j);
	if (sc->v2) {
		struct v2n_counts n;

		pthread_mutex_lock(&sc->mu);
		n = sc->nodes;
		pthread_mutex_unlock(&sc->mu);
		jb_obj_begin(j, "nodes");
		jb_u64(j, "checked", n.checked);
		jb_u64(j, "bad_copies", n.bad);
		jb_u64(j, "repaired", n.repaired);
		jb_u64(j, "unrecoverable", n.unrecoverable);
		jb_obj_end(j);
	}
	jb_arr_begin(j, "bad_blocks");
	pthread_mutex_lock(&sc->mu);
	for (size_t i = 0; i < sc->nbad && i < SCRUB_JSON_BAD_MAX; i++) {
		jb_obj_begin(j, NULL);
		jb_u64(j, "ino", sc->bad[i].ino);
		jb_u64(j, "offset", sc->bad[i].off);
		jb_str(j, "path", sc->bad[i].path);
		jb_obj_end(j);
	}
	pthread_mutex_unlock(&sc->mu);
	jb_arr_end(j);
}
