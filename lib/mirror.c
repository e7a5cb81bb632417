// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * mirror: N-way RAID1 over the devices of one backend.  It owns the device
 * states (ok / missing / failed), the per-device error counters, the
 * concurrent mirrored write and flush, and the verified read with
 * read-repair: a block whose copy fails its checksum (or cannot be read) is
 * fetched from the other copies, handed back from the first that verifies,
 * and rewritten in place on every device whose copy was bad.  Copy-on-write
 * guarantees nobody rewrites a block while a reader holds its checksum, so
 * rewriting the same content is safe.
 *
 * It also owns the write-intent bitmap (regions written while a device was
 * out of sync) and the write side of an online rebuild: writes reach a
 * REBUILDING device too, wait while the rebuild copies their region, and
 * reads use that device only where it is known current.
 *
 * Locking: states, counters, bitmap words and busy counts are atomics.  The
 * device array is set by mirror_init(); mirror_start_sync() may replace one
 * slot, only while that slot gets no I/O (not OK nor REBUILDING), and
 * publishes it before the state.  sync_mu is a leaf lock used only to
 * sleep on the rebuild window.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csum.h"
#include "mirror.h"

#define BLK TFS_BLOCK_SIZE

static const char *dev_name(const struct mirror *m, unsigned dev, char *tmp, size_t n)
{
	if (dev < m->ndevs && m->devs[dev] && m->devs[dev]->path)
		return m->devs[dev]->path;
	snprintf(tmp, n, "device %u", dev);
	return tmp;
}

void mirror_event(struct mirror *m, unsigned dev, int kind, uint64_t blk, uint64_t n)
{
	static const char *const what[MEV_KINDS] = {
		[MEV_READ_ERR] = "read error",
		[MEV_WRITE_ERR] = "write error",
		[MEV_FLUSH_ERR] = "cache flush failed",
		[MEV_CSUM_ERR] = "checksum mismatch",
		[MEV_REPAIRED] = "repaired from another mirror",
		[MEV_UNRECOVERABLE] = "unrecoverable (no copy verifies)",
	};
	struct mirror_counters *c;
	_Atomic uint64_t *ctr;
	char tmp[32];

	if (dev >= m->ndevs || kind < 0 || kind >= MEV_KINDS)
		return;
	if (mirror_lost_seen(m, dev, kind, blk, n))
		return;
	c = &m->ctr[dev];
	ctr = kind == MEV_READ_ERR ? &c->read_err : kind == MEV_WRITE_ERR ? &c->write_err :
	      kind == MEV_FLUSH_ERR ? &c->flush_err : kind == MEV_CSUM_ERR ? &c->csum_err :
	      kind == MEV_REPAIRED ? &c->repaired : &c->unrecoverable;
	atomic_fetch_add(ctr, n);
	/* One line per device and kind per interval, never one per I/O. */
	if (kind == MEV_FLUSH_ERR)
		tfs_log_ratelimited(&m->rl[dev][kind], LOG_ERR, "%s: %s",
				    dev_name(m, dev, tmp, sizeof(tmp)), what[kind]);
	else if (tfs_log_ratelimited(&m->rl[dev][kind],
				     kind == MEV_REPAIRED ? LOG_NOTICE :
				     kind == MEV_CSUM_ERR ? LOG_WARNING : LOG_ERR,
				     "%s: %s at block %llu%s", dev_name(m, dev, tmp, sizeof(tmp)),
				     what[kind], (unsigned long long)blk,
				     n > 1 ? " and following" : "") &&
		 kind == MEV_UNRECOVERABLE && m->on_unrecoverable)
		m->on_unrecoverable(m->on_state_ctx, dev, blk);
}

static bool dev_ok(const struct mirror *m, unsigned i)
{
	return i < m->ndevs && m->devs[i] && atomic_load(&m->state[i]) == MDEV_OK;
}

/* Gets writes: in sync, or being rebuilt. */
static bool dev_writable(const struct mirror *m, unsigned i)
{
	int st;

	if (i >= m->ndevs || !m->devs[i])
		return false;
	st = atomic_load(&m->state[i]);
	return st == MDEV_OK || st == MDEV_REBUILDING;
}

const char *mirror_state_name(int state)
{
	static const char *const names[] = {
		[MDEV_OK] = "ok", [MDEV_MISSING] = "missing", [MDEV_FAILED] = "failed",
		[MDEV_STALE] = "stale", [MDEV_REBUILDING] = "rebuilding",
	};

	if (state < 0 || (size_t)state >= sizeof(names) / sizeof(names[0]))
		return "unknown";
	return names[state];
}

int mirror_init(struct mirror *m, struct dev_backend *be, struct dev **devs, unsigned n)
{
	unsigned i;

	if (!n || n > DEV_MAX)
		return -EINVAL;
	/* Wipes on_state too: set it after mirror_init(). */
	memset(m, 0, sizeof(*m));
	m->be = be;
	m->ndevs = n;
	pthread_mutex_init(&m->sync_mu, NULL);
	pthread_mutex_init(&m->path_mu, NULL);
	pthread_mutex_init(&m->lost_mu, NULL);
	pthread_cond_init(&m->sync_cv, NULL);
	atomic_init(&m->sync_dev, -1);
	atomic_init(&m->win, UINT64_MAX);
	for (i = 0; i < n; i++) {
		m->devs[i] = devs[i];
		atomic_init(&m->state[i], devs[i] ? MDEV_OK : MDEV_MISSING);
	}
	return 0;
}

int mirror_slot_path_set(struct mirror *m, unsigned dev, const char *path)
{
	char *np = NULL, *op;

	if (dev >= DEV_MAX)
		return -EINVAL;
	if (path && !(np = strdup(path)))
		return -ENOMEM;
	pthread_mutex_lock(&m->path_mu);
	op = m->slot_path[dev];
	m->slot_path[dev] = np;
	pthread_mutex_unlock(&m->path_mu);
	free(op);
	return 0;
}

bool mirror_slot_path(struct mirror *m, unsigned dev, char *out, size_t outlen)
{
	bool have = false;

	if (dev >= DEV_MAX)
		return false;
	pthread_mutex_lock(&m->path_mu);
	if (m->slot_path[dev]) {
		snprintf(out, outlen, "%s", m->slot_path[dev]);
		have = true;
	}
	pthread_mutex_unlock(&m->path_mu);
	return have;
}

void mirror_slot_paths_free(struct mirror *m)
{
	for (unsigned i = 0; i < DEV_MAX; i++)
		mirror_slot_path_set(m, i, NULL);
}

unsigned mirror_healthy(const struct mirror *m)
{
	unsigned i, k = 0;

	for (i = 0; i < m->ndevs; i++)
		k += dev_ok(m, i);
	return k;
}

void mirror_fail_dev(struct mirror *m, unsigned dev, int err)
{
	int expect = MDEV_OK;

	if (dev >= m->ndevs)
		return;
	/* Only the transition is reported, so concurrent failures of the same
	 * device log once. */
	if (atomic_compare_exchange_strong(&m->state[dev], &expect, MDEV_FAILED) ||
	    (expect == MDEV_REBUILDING &&
	     atomic_compare_exchange_strong(&m->state[dev], &expect, MDEV_FAILED))) {
		char tmp[32];

		tfs_log(LOG_ERR, "%s: device failed (%s); no more I/O goes to it until it is "
			"rebuilt", dev_name(m, dev, tmp, sizeof(tmp)), strerror(err < 0 ? -err : err));
		if (m->on_state)
			m->on_state(m->on_state_ctx, dev, MDEV_FAILED, err);
	}
}

unsigned mirror_insync(const struct mirror *m)
{
	return mirror_healthy(m);
}

/* ---- write-intent bitmap ---- */

int mirror_track_init(struct mirror *m, uint64_t base, uint64_t end, unsigned shift)
{
	uint64_t n;

	if (end <= base || shift > 40)
		return -EINVAL;
	n = ((end - base) + (1ull << shift) - 1) >> shift;
	m->trk_bits = calloc((n + 63) / 64, sizeof(uint64_t));
	if (!m->trk_bits)
		return -ENOMEM;
	m->trk_base = base;
	m->trk_end = end;
	m->trk_shift = shift;
	m->trk_nregions = n;
	return 0;
}

void mirror_track_free(struct mirror *m)
{
	free((void *)m->trk_bits);
	m->trk_bits = NULL;
	m->trk_nregions = 0;
}

uint64_t mirror_region_of(const struct mirror *m, uint64_t blk)
{
	if (!m->trk_bits || blk < m->trk_base || blk >= m->trk_end)
		return UINT64_MAX;
	return (blk - m->trk_base) >> m->trk_shift;
}

/* Regions [*r0, *r1] touched by [blk, blk+n); false if none is tracked. */
static bool region_span(const struct mirror *m, uint64_t blk, uint64_t n, uint64_t *r0,
			uint64_t *r1)
{
	uint64_t s = blk, e = blk + n;

	if (!m->trk_bits || !n || e <= m->trk_base || s >= m->trk_end)
		return false;
	if (s < m->trk_base)
		s = m->trk_base;
	if (e > m->trk_end)
		e = m->trk_end;
	*r0 = (s - m->trk_base) >> m->trk_shift;
	*r1 = (e - 1 - m->trk_base) >> m->trk_shift;
	return true;
}

void mirror_mark(struct mirror *m, uint64_t blk, uint64_t n)
{
	uint64_t r0, r1;

	if (!region_span(m, blk, n, &r0, &r1))
		return;
	for (uint64_t r = r0; r <= r1; r++) {
		uint64_t bit = 1ull << (r % 64);

		/* Load first: the bit is usually set already, and a plain load
		 * does not bounce the cache line between writers. */
		if (!(atomic_load_explicit(&m->trk_bits[r / 64], memory_order_relaxed) & bit))
			atomic_fetch_or(&m->trk_bits[r / 64], bit);
	}
}

bool mirror_region_dirty(const struct mirror *m, uint64_t region)
{
	if (!m->trk_bits || region >= m->trk_nregions)
		return false;
	return atomic_load(&m->trk_bits[region / 64]) >> (region % 64) & 1;
}

uint64_t mirror_dirty_count(const struct mirror *m)
{
	uint64_t k = 0;

	for (uint64_t w = 0; m->trk_bits && w < (m->trk_nregions + 63) / 64; w++)
		k += (uint64_t)__builtin_popcountll(atomic_load(&m->trk_bits[w]));
	return k;
}

void mirror_mark_all(struct mirror *m)
{
	for (uint64_t r = 0; m->trk_bits && r < m->trk_nregions; r++)
		atomic_fetch_or(&m->trk_bits[r / 64], 1ull << (r % 64));
}

void mirror_clear_all(struct mirror *m)
{
	for (uint64_t w = 0; m->trk_bits && w < (m->trk_nregions + 63) / 64; w++)
		atomic_store(&m->trk_bits[w], 0);
}

void mirror_bits_get(const struct mirror *m, uint64_t *words)
{
	for (uint64_t w = 0; m->trk_bits && w < (m->trk_nregions + 63) / 64; w++)
		words[w] = atomic_load(&m->trk_bits[w]);
}

void mirror_bits_set(struct mirror *m, const uint64_t *words)
{
	uint64_t nw = (m->trk_nregions + 63) / 64;

	for (uint64_t w = 0; m->trk_bits && w < nw; w++) {
		uint64_t v = words[w];

		/* no bits past the last region */
		if (w == nw - 1 && m->trk_nregions % 64)
			v &= (1ull << (m->trk_nregions % 64)) - 1;
		atomic_fetch_or(&m->trk_bits[w], v);
	}
}

/* ---- rebuild window ---- */

static bool win_hits(const struct mirror *m, uint64_t r0, uint64_t r1)
{
	uint64_t w = atomic_load(&m->win);

	return w != UINT64_MAX && w >= r0 && w <= r1;
}

static void busy_add(struct mirror *m, uint64_t r0, uint64_t r1, int d)
{
	for (uint64_t r = r0; r <= r1; r++)
		if (atomic_fetch_add(&m->busy[r % MIRROR_BUSY_BUCKETS], (unsigned)d) == 1 &&
		    d < 0 && atomic_load(&m->win) != UINT64_MAX) {
			/* The rebuild may be waiting for this bucket to drain. */
			pthread_mutex_lock(&m->sync_mu);
			pthread_cond_broadcast(&m->sync_cv);
			pthread_mutex_unlock(&m->sync_mu);
		}
}

/*
 * Enter a write of [blk, blk+n): count it in the busy buckets of its
 * regions, then check the window.  Count first, window second, and the
 * rebuild does the opposite (window, then count): with sequentially
 * consistent atomics one of the two sees the other, so a copy never runs
 * beside a write into its region.  Returns whether the write was counted.
 */
static bool write_enter(struct mirror *m, uint64_t blk, uint64_t n, uint64_t *r0, uint64_t *r1)
{
	if (!region_span(m, blk, n, r0, r1))
		return false;
	for (;;) {
		busy_add(m, *r0, *r1, 1);
		if (!win_hits(m, *r0, *r1))
			return true;
		busy_add(m, *r0, *r1, -1);
		pthread_mutex_lock(&m->sync_mu);
		while (win_hits(m, *r0, *r1))
			pthread_cond_wait(&m->sync_cv, &m->sync_mu);
		pthread_mutex_unlock(&m->sync_mu);
	}
}

void mirror_sync_window(struct mirror *m, uint64_t region)
{
	pthread_mutex_lock(&m->sync_mu);
	atomic_store(&m->win, region);
	pthread_cond_broadcast(&m->sync_cv);
	if (region != UINT64_MAX) {
		while (atomic_load(&m->busy[region % MIRROR_BUSY_BUCKETS])) {
			struct timespec ts;

			/* Timed: a writer leaving a bucket with other regions
			 * in it wakes us only when it reaches zero. */
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 2000000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&m->sync_cv, &m->sync_mu, &ts);
		}
	}
	pthread_mutex_unlock(&m->sync_mu);
}

bool mirror_dev_readable(struct mirror *m, unsigned dev, uint64_t blk, uint32_t n)
{
	uint64_t r0, r1, cur;
	int st;

	if (dev >= m->ndevs || !m->devs[dev])
		return false;
	st = atomic_load(&m->state[dev]);
	if (st == MDEV_OK)
		return true;
	if (st != MDEV_REBUILDING || atomic_load(&m->sync_dev) != (int)dev ||
	    !region_span(m, blk, n, &r0, &r1) || blk < m->trk_base || blk + n > m->trk_end)
		return false;
	cur = atomic_load(&m->sync_cursor);
	for (uint64_t r = r0; r <= r1; r++) {
		/* Copied already, or (rebuild of a returning device) never
		 * written while it was away. */
		if (r < cur || (!atomic_load(&m->sync_all) && !mirror_region_dirty(m, r)))
			continue;
		return false;
	}
	return true;
}

void mirror_start_sync(struct mirror *m, unsigned dev, struct dev *d, bool all,
		       uint64_t cursor)
{
	m->devs[dev] = d;
	atomic_store(&m->sync_all, all);
	atomic_store(&m->sync_cursor, cursor);
	atomic_store(&m->sync_dev, (int)dev);
	/* Last: from here on writes reach it. */
	atomic_store(&m->state[dev], MDEV_REBUILDING);
}

void mirror_set_cursor(struct mirror *m, uint64_t cursor)
{
	atomic_store(&m->sync_cursor, cursor);
}

bool mirror_finish_sync(struct mirror *m, unsigned dev)
{
	int expect = MDEV_REBUILDING;
	bool ok = atomic_compare_exchange_strong(&m->state[dev], &expect, MDEV_OK);

	mirror_sync_window(m, UINT64_MAX);
	atomic_store(&m->sync_dev, -1);
	return ok;
}

void mirror_end_sync(struct mirror *m, int state)
{
	int dev = atomic_load(&m->sync_dev);

	mirror_sync_window(m, UINT64_MAX);
	if (dev >= 0) {
		int expect = MDEV_REBUILDING;

		atomic_compare_exchange_strong(&m->state[dev], &expect, state);
	}
	atomic_store(&m->sync_dev, -1);
}

static void note_read_err(struct mirror *m, unsigned dev, uint64_t blk, int err)
{
	mirror_event(m, dev, MEV_READ_ERR, blk, 1);
	if (atomic_load(&m->ctr[dev].read_err) >= MIRROR_READ_ERR_LIMIT)
		mirror_fail_dev(m, dev, err);
}

static void note_write_err(struct mirror *m, unsigned dev, uint64_t blk, int err)
{
	mirror_event(m, dev, MEV_WRITE_ERR, blk, 1);
	/* Its copy is now stale: it must not serve reads any more. */
	mirror_fail_dev(m, dev, err);
}

/* Before acknowledging a write or flush: a device out of sync (failed by
 * this very I/O, or by another thread's a moment ago) must be recorded
 * stale durably first.  The hook's fast path is a lock-free check. */
static int ack_degraded(struct mirror *m)
{
	if (!m->on_degraded || mirror_healthy(m) == m->ndevs)
		return 0;
	return m->on_degraded(m->on_state_ctx);
}

int mirror_write_begin(struct mirror *m, uint64_t blk, const void *buf, uint32_t nblk,
		       struct mirror_wr *w)
{
	unsigned i;

	w->blk = blk;
	w->nblk = nblk;
	w->n = 0;
	w->counted = write_enter(m, blk, nblk, &w->r0, &w->r1);
	/* New content: a loss counted here is over (nodes are written to
	 * addresses freed earlier, data too). */
	mirror_lost_forget(m, blk, nblk);
	/* Before the I/O: a device out of sync misses this write, and its
	 * region must be dirty before anything can point at the blocks. */
	if (mirror_healthy(m) < m->ndevs)
		mirror_mark(m, blk, nblk);
	for (i = 0; i < m->ndevs; i++) {
		if (!dev_writable(m, i))
			continue;
		w->insync[w->n] = atomic_load(&m->state[i]) == MDEV_OK;
		w->slot[w->n] = i;
		/* dev_io has one pointer for both directions; a write only
		 * reads it. */
		w->ios[w->n++] = (struct dev_io){
			.dev = m->devs[i], .op = DEV_WRITE, .off = blk * BLK,
			.buf = (void *)buf, .len = nblk * BLK,
		};
	}
	if (!w->n) {
		if (w->counted)
			busy_add(m, w->r0, w->r1, -1);
		return -EIO;
	}
	return 0;
}

int mirror_write_end_noack(struct mirror *m, struct mirror_wr *w, int submit_ret)
{
	unsigned i, ok = 0, failed = 0;

	for (i = 0; i < w->n; i++) {
		int res = submit_ret ? submit_ret : w->ios[i].res;

		if (res) {
			note_write_err(m, w->slot[i], w->blk, res);
			failed++;
		} else if (w->insync[i]) {
			/* Only an in-sync copy acknowledges: a device being
			 * rebuilt is not trusted yet. */
			ok++;
		}
	}
	if (failed)
		mirror_mark(m, w->blk, w->nblk);
	if (w->counted)
		busy_add(m, w->r0, w->r1, -1);
	if (!ok)
		return -EIO;
	return m->on_degraded && mirror_healthy(m) < m->ndevs ? MIRROR_ACK_DEGRADED : 0;
}

int mirror_ack_degraded(struct mirror *m)
{
	return ack_degraded(m);
}

int mirror_write_end(struct mirror *m, struct mirror_wr *w, int submit_ret)
{
	int ret = mirror_write_end_noack(m, w, submit_ret);

	/* Outside the busy count: the superblock write must not hold up a
	 * rebuild window. */
	return ret == MIRROR_ACK_DEGRADED ? ack_degraded(m) : ret;
}

void mirror_write_cancel(struct mirror *m, struct mirror_wr *w)
{
	if (w->counted)
		busy_add(m, w->r0, w->r1, -1);
}

int mirror_write(struct mirror *m, uint64_t blk, const void *buf, uint32_t nblk)
{
	struct mirror_wr w;
	int ret = mirror_write_begin(m, blk, buf, nblk, &w);

	if (ret)
		return ret;
	return mirror_write_end(m, &w, dev_submit(m->be, w.ios, w.n));
}

int mirror_write_fua(struct mirror *m, uint64_t blk, const void *buf, uint32_t nblk)
{
	struct mirror_wr w;
	int ret = mirror_write_begin(m, blk, buf, nblk, &w);

	if (ret)
		return ret;
	for (unsigned i = 0; i < w.n; i++)
		w.ios[i].fua = true;
	/* A failure fails the device, as a failed write or flush does. */
	return mirror_write_end(m, &w, dev_submit(m->be, w.ios, w.n));
}

int mirror_flush(struct mirror *m)
{
	struct dev_io ios[DEV_MAX];
	unsigned slot[DEV_MAX];
	bool insync[DEV_MAX];
	unsigned i, n = 0, ok = 0, clean = 0;
	int ret;

	for (i = 0; i < m->ndevs; i++) {
		if (!dev_writable(m, i))
			continue;
		insync[n] = atomic_load(&m->state[i]) == MDEV_OK;
		/* Nothing but FUA writes since its last flush: already
		 * durable (an O_DSYNC write's data, then its log chunk). */
		if (!dev_flush_needed(m->devs[i])) {
			clean += insync[n];
			continue;
		}
		slot[n] = i;
		ios[n++] = (struct dev_io){ .dev = m->devs[i], .op = DEV_FLUSH };
	}
	if (!n)
		return clean ? ack_degraded(m) : -EIO;
	ret = dev_submit(m->be, ios, n);
	for (i = 0; i < n; i++) {
		int res = ret ? ret : ios[i].res;

		if (res) {
			mirror_event(m, slot[i], MEV_FLUSH_ERR, 0, 1);
			/* Data acknowledged as durable may not be: fail it. */
			mirror_fail_dev(m, slot[i], res);
		} else if (insync[i]) {
			ok++;
		}
	}
	return ok + clean ? ack_degraded(m) : -EIO;
}

static void count_read(struct mirror *m, unsigned dev, uint32_t nblk)
{
	atomic_fetch_add_explicit(&m->ctr[dev].reads, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&m->ctr[dev].read_bytes, (uint64_t)nblk * BLK,
				  memory_order_relaxed);
}

int mirror_read_dev(struct mirror *m, unsigned dev, uint64_t blk, void *buf, uint32_t nblk)
{
	int ret;

	if (!dev_ok(m, dev))
		return -ENODEV;
	count_read(m, dev, nblk);
	ret = dev_pread(m->be, m->devs[dev], buf, nblk * BLK, blk * BLK);
	if (ret)
		note_read_err(m, dev, blk, ret);
	return ret;
}

int mirror_write_dev(struct mirror *m, unsigned dev, uint64_t blk, const void *buf, uint32_t nblk)
{
	int ret;

	if (!dev_ok(m, dev))
		return -ENODEV;
	ret = dev_pwrite(m->be, m->devs[dev], buf, nblk * BLK, blk * BLK);
	if (ret)
		note_write_err(m, dev, blk, ret);
	return ret;
}

/* Read from a device already chosen as readable for the range. */
static int read_raw(struct mirror *m, unsigned dev, uint64_t blk, void *buf, uint32_t nblk)
{
	int ret;

	if (!m->devs[dev])
		return -ENODEV;
	count_read(m, dev, nblk);
	ret = dev_pread(m->be, m->devs[dev], buf, nblk * BLK, blk * BLK);
	if (ret)
		note_read_err(m, dev, blk, ret);
	return ret;
}

/* Repair write: same verified content, so a device being rebuilt may take
 * it too. */
static int repair_write(struct mirror *m, unsigned dev, uint64_t blk, const void *buf,
			uint32_t nblk)
{
	int ret;

	if (!dev_writable(m, dev) || m->no_repair)
		return -ENODEV;
	ret = dev_pwrite(m->be, m->devs[dev], buf, nblk * BLK, blk * BLK);
	if (ret)
		note_write_err(m, dev, blk, ret);
	return ret;
}

/* Per block of a verified read. */
#define RB_NEED 0x100u		/* no verified copy yet */
#define RB_FIXED 0x200u		/* verified copy came from another device */
/* low 8 bits: devices (by slot) whose copy was bad, to be rewritten */

/*
 * Try @dev for every block still needing a copy: read each run of needed
 * blocks into @tmp and take the blocks that verify.
 */
static void read_fallback(struct mirror *m, unsigned dev, uint64_t blk, char *buf,
			  uint32_t nblk, const uint64_t *csums, uint16_t *st, char *tmp)
{
	uint32_t s = 0, e, i;

	while (s < nblk) {
		if (!(st[s] & RB_NEED)) {
			s++;
			continue;
		}
		for (e = s + 1; e < nblk && (st[e] & RB_NEED); e++)
			;
		if (read_raw(m, dev, blk + s, tmp, e - s)) {
			/* Rewriting it may remap the bad sector. */
			for (i = s; i < e; i++)
				st[i] |= 1u << dev;
		} else {
			for (i = s; i < e; i++) {
				char *p = tmp + (size_t)(i - s) * BLK;

				if (csum_block(p, blk + i) != csums[i]) {
					mirror_event(m, dev, MEV_CSUM_ERR, blk + i, 1);
					st[i] |= 1u << dev;
					continue;
				}
				memcpy(buf + (size_t)i * BLK, p, BLK);
				st[i] = (uint16_t)((st[i] & ~RB_NEED) | RB_FIXED);
			}
		}
		s = e;
	}
}

/* Rewrite the recovered blocks onto every device whose copy was bad. */
static void read_repair(struct mirror *m, uint64_t blk, const char *buf, uint32_t nblk,
			const uint16_t *st)
{
	uint32_t s, e;
	unsigned d;

	for (d = 0; d < m->ndevs; d++) {
		unsigned want = RB_FIXED | (1u << d);

		for (s = 0; s < nblk; s = e) {
			if ((st[s] & want) != want) {
				e = s + 1;
				continue;
			}
			for (e = s + 1; e < nblk && (st[e] & want) == want; e++)
				;
			if (!repair_write(m, d, blk + s, buf + (size_t)s * BLK, e - s))
				mirror_event(m, d, MEV_REPAIRED, blk + s, e - s);
		}
	}
}

int mirror_read_pick(struct mirror *m, uint64_t blk, uint32_t nblk)
{
	unsigned healthy[DEV_MAX], nh = 0, c;

	for (unsigned i = 0; i < m->ndevs; i++)
		if (m->devs[i] && mirror_dev_readable(m, i, blk, nblk))
			healthy[nh++] = i;
	if (!nh)
		return -1;
	c = healthy[atomic_fetch_add(&m->rr, 1) % nh];
	return (int)c;
}

unsigned mirror_read_split(struct mirror *m, uint64_t blk, uint32_t nblk,
			   struct mirror_piece *p, unsigned max)
{
	unsigned healthy[DEV_MAX], nh = 0, k, first;
	uint32_t off = 0;

	for (unsigned i = 0; i < m->ndevs; i++)
		if (m->devs[i] && mirror_dev_readable(m, i, blk, nblk))
			healthy[nh++] = i;
	if (!nh || !max)
		return 0;
	k = nblk >= MIRROR_SPLIT_MIN ? (nh < max ? nh : max) : 1;
	/* The rotation picks the first device; the others follow it, so
	 * the pieces of one read never share a device. */
	first = atomic_fetch_add(&m->rr, 1);
	for (unsigned i = 0; i < k; i++) {
		uint32_t end = (uint32_t)((uint64_t)nblk * (i + 1) / k);

		p[i].dev = healthy[(first + i) % nh];
		p[i].off = off;
		p[i].n = end - off;
		count_read(m, p[i].dev, p[i].n);
		off = end;
	}
	return k;
}

/* mirror_read, or (dev0 >= 0) mirror_read_done of a read already made from
 * dev0 with result res0. */
static int read_verified(struct mirror *m, uint64_t blk, void *buf, uint32_t nblk,
			 const uint64_t *csums, uint64_t *bad, int dev0, int res0)
{
	unsigned healthy[DEV_MAX], nh = 0, c, k, i;
	bool have0 = false;
	uint16_t stack_st[64], *st = stack_st;
	char *tmp = NULL, *p = buf;
	uint64_t badmap = 0;
	bool any_bad = false;
	int ret = 0;

	if (bad)
		*bad = 0;
	if (!nblk)
		return 0;
	for (i = 0; i < m->ndevs; i++)
		if (mirror_dev_readable(m, i, blk, nblk)) {
			have0 |= (int)i == dev0;
			healthy[nh++] = i;
		}
	if (nblk > 64) {
		st = calloc(nblk, sizeof(*st));
		if (!st)
			return -ENOMEM;
	} else {
		memset(stack_st, 0, sizeof(stack_st));
	}

	/* Spread reads over the mirrors with a rotating counter alone.  Adding
	 * the block number (the first design) pins a stream of single-block
	 * sequential reads to one device of two: blk and rr both step by one,
	 * so their sum keeps its parity. */
	if (have0) {
		/* The caller's read: a device that stopped being readable
		 * since is simply not used, as below. */
		c = (unsigned)dev0;
		if (res0)
			note_read_err(m, c, blk, res0);
	} else {
		c = nh ? healthy[atomic_fetch_add(&m->rr, 1) % nh] : 0;
		res0 = nh ? read_raw(m, c, blk, buf, nblk) : -EIO;
	}
	if (!nh || res0) {
		for (i = 0; i < nblk; i++)
			st[i] = (uint16_t)(RB_NEED | (nh ? 1u << c : 0));
		any_bad = true;
	} else {
		for (i = 0; i < nblk; i++) {
			if (csum_block(p + (size_t)i * BLK, blk + i) == csums[i])
				continue;
			mirror_event(m, c, MEV_CSUM_ERR, blk + i, 1);
			st[i] = (uint16_t)(RB_NEED | (1u << c));
			any_bad = true;
		}
	}
	if (!any_bad)
		goto out;
	dev_assert_may_block("read repair");

	if (nh > 1 && posix_memalign((void **)&tmp, BLK, (size_t)nblk * BLK)) {
		ret = -ENOMEM;
		goto out;
	}
	/* The other copies, in the rotation order, starting after c. */
	for (k = 1; k < nh; k++) {
		unsigned pos, d;

		for (pos = 0; healthy[pos] != c; pos++)
			;
		d = healthy[(pos + k) % nh];
		read_fallback(m, d, blk, p, nblk, csums, st, tmp);
	}
	read_repair(m, blk, p, nblk, st);

	for (i = 0; i < nblk; i++) {
		if (!(st[i] & RB_NEED))
			continue;
		/* No copy verifies: never hand out bad bytes. */
		mirror_event(m, c, MEV_UNRECOVERABLE, blk + i, 1);
		memset(p + (size_t)i * BLK, 0, BLK);
		badmap |= 1ull << (i < 63 ? i : 63);
		ret = -EIO;
	}
out:
	if (bad)
		*bad = badmap;
	free(tmp);
	if (st != stack_st)
		free(st);
	return ret;
}

int mirror_read(struct mirror *m, uint64_t blk, void *buf, uint32_t nblk,
		const uint64_t *csums, uint64_t *bad)
{
	return read_verified(m, blk, buf, nblk, csums, bad, -1, 0);
}

int mirror_read_done(struct mirror *m, unsigned dev, int res, uint64_t blk, void *buf,
		     uint32_t nblk, const uint64_t *csums, uint64_t *bad)
{
	return read_verified(m, blk, buf, nblk, csums, bad, (int)dev, res);
}
