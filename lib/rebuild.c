// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * rebuild: online rebuild of a returning device and replacement of a device
 * by a new one.  The write-intent bitmap that says which regions a returning
 * device missed is kept on disk by wib.c.  (The check for image files that
 * vanished under a mounted file system is the background thread's, fs.c.)
 *
 * A run: the target is installed in its slot as MDEV_REBUILDING (it gets
 * every write from then on: mirror.c), then the thread walks the regions in
 * order.  For a rebuild it skips clean regions (nothing was written there
 * while the device was away: the target passed the member check, so it
 * held this file system there); for a replace it visits all.  Each visited
 * region is copied inside the mirror's window (writes into it wait), one
 * run of allocated blocks at a time, from an in-sync device; then the
 * cursor moves past it and reads may use the target there.  After the last
 * region a verification pass reads every extent block of the target (and
 * of the other devices in the copied regions) and rewrites copies that do
 * not verify from one that does, so content that is not ours anywhere on
 * the target is found.  Only then is the device made MDEV_OK, and the checkpoint
 * that follows records it in sync: until that checkpoint every superblock
 * says stale, the target's own too (written before its first block:
 * sbc_mark_target), so a crash can never make a half-copied mirror look
 * current, alone or with its mirror.
 * Every checkpoint records the cursor; a mount resumes from it.
 *
 * The rebuild fields of the superblock are this file's: fill_super, which
 * mount registers with the superblock commit (sbcommit.h), writes them.
 *
 * Locking: rb->mu protects the run state below; it is taken under ckpt_mu
 * (fill_super) and never held while calling into the checkpoint or
 * doing I/O.  The thread holds no file system lock while copying; the
 * verification pass pins one inode at a time like an open file (nopen) and
 * takes its range lock shared, piece by piece.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckpt_v2.h"
#include "event.h"
#include "fs_i.h"
#include "rebuild.h"
#include "rebuild_i.h"
#include "wib.h"

#define BS TFS_BLOCK_SIZE
#define RB_IO_BLOCKS 256u		/* blocks per copy I/O (1 MiB) */
#define RB_CKPT_EVERY_S 2		/* cursor persisted at least this often */


static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static double ts_s(const struct timespec *ts)
{
	return (double)ts->tv_sec + ts->tv_nsec / 1e9;
}

/* ---- mount ---- */

static void fill_super(void *ctx, struct super *sb);

int rebuild_mount_init(struct tfs *fs, const char *const *slot_paths, char *err, size_t errlen)
{
	struct rebuild *rb = calloc(1, sizeof(*rb));
	struct super *sb = &fs->sb;
	unsigned shift;
	int ret;

	if (!rb) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	pthread_mutex_init(&rb->mu, NULL);
	rb->dev = -1;
	fs->rb = rb;
	/* Tests: pace every run of this mount (bytes of regions visited per
	 * second), so a kill -9 lands in the middle of one. */
	if (getenv("TWINFS_REBUILD_RATE"))
		atomic_store(&rb->rate, strtoull(getenv("TWINFS_REBUILD_RATE"), NULL, 0));
	ret = sbc_register(fs, fill_super, fs);
	if (ret < 0) {
		snprintf(err, errlen, "cannot register the rebuild's superblock fields: %s",
			 strerror(-ret));
		return ret;
	}
	for (unsigned i = 0; i < fs->ndevs && slot_paths; i++) {
		ret = mirror_slot_path_set(&fs->mirror, i, slot_paths[i]);
		if (ret < 0) {
			snprintf(err, errlen, "out of memory");
			return ret;
		}
	}
	/* A bitmap written with another region size keeps its own. */
	shift = sb->wib_start ? sb->wib_shift : wib_region_shift(sb->total_blocks - sb->data_start);
	ret = mirror_track_init(&fs->mirror, sb->data_start, sb->total_blocks, shift);
	if (ret < 0) {
		snprintf(err, errlen, "cannot set up the write-intent bitmap: %s", strerror(-ret));
		return ret;
	}
	if (sb->rb_state == SUPER_RB_RUNNING && sb->rb_dev < fs->ndevs &&
	    fs->mirror.devs[sb->rb_dev] &&
	    atomic_load(&fs->mirror.state[sb->rb_dev]) == MDEV_STALE) {
		uint64_t cur = sb->rb_cursor;

		if (cur > fs->mirror.trk_nregions)
			cur = fs->mirror.trk_nregions;
		/* Before the first write of this mount, so the target misses
		 * nothing below the cursor. */
		mirror_start_sync(&fs->mirror, sb->rb_dev, fs->mirror.devs[sb->rb_dev],
				  sb->rb_kind == SUPER_RB_REPLACE, cur);
		rb->state = RB_RUNNING;
		rb->kind = (int)sb->rb_kind;
		rb->dev = (int)sb->rb_dev;
		rb->persist = true;
		rb->copied_base = sb->rb_copied;
	}
	return 0;
}

/* ---- superblock fields ---- */

/* Registered with the superblock commit (sbc_register): runs under
 * ckpt_mu on every checkpoint. */
static void fill_super(void *ctx, struct super *sb)
{
	struct tfs *fs = ctx;
	struct rebuild *rb = fs->rb;

	if (!rb)
		return;
	pthread_mutex_lock(&rb->mu);
	if (rb->persist && rb->dev >= 0) {
		sb->rb_state = SUPER_RB_RUNNING;
		sb->rb_kind = (uint32_t)rb->kind;
		sb->rb_dev = (uint32_t)rb->dev;
		/* Read before the checkpoint's flush: every region below it was
		 * written to the target before that flush. */
		sb->rb_cursor = atomic_load(&fs->mirror.sync_cursor);
		sb->rb_copied = rb->copied_base + atomic_load(&rb->copied);
	} else {
		sb->rb_state = SUPER_RB_NONE;
		sb->rb_kind = 0;
		sb->rb_dev = 0;
		sb->rb_cursor = 0;
		sb->rb_copied = 0;
	}
	pthread_mutex_unlock(&rb->mu);
}

/* ---- the copy ---- */

static void set_error(struct rebuild *rb, const char *fmt, const char *what, int err)
{
	pthread_mutex_lock(&rb->mu);
	snprintf(rb->error, sizeof(rb->error), fmt, what, strerror(err < 0 ? -err : err));
	pthread_mutex_unlock(&rb->mu);
}

/* Read [blk, blk+n) from an in-sync device other than the target. */
static int read_source(struct tfs *fs, unsigned target, uint64_t blk, void *buf, uint32_t n)
{
	struct mirror *m = &fs->mirror;
	unsigned start = atomic_fetch_add(&m->rr, 1);
	int ret = -EIO;

	for (unsigned k = 0; k < m->ndevs; k++) {
		unsigned d = (start + k) % m->ndevs;

		if (d == target || atomic_load(&m->state[d]) != MDEV_OK)
			continue;
		ret = mirror_read_dev(m, d, blk, buf, n);
		if (ret == 0)
			return 0;
	}
	return ret;
}

/* A block to copy: data in use, or (format v2) a tree node in use. */
static bool blk_used(struct tfs *fs, uint64_t blk)
{
	return alloc_refs(fs->alloc, blk) || ckpt_v2_node_block(fs, blk);
}

/* Copy the allocated blocks of region r.  Caller holds the window. */
static int copy_region(struct tfs *fs, struct rebuild *rb, unsigned target, uint64_t r,
		       uint8_t *buf)
{
	struct mirror *m = &fs->mirror;
	uint64_t s = m->trk_base + (r << m->trk_shift);
	uint64_t e = s + (1ull << m->trk_shift);

	if (e > m->trk_end)
		e = m->trk_end;
	while (s < e) {
		uint64_t n = 0;
		int ret;

		if (!blk_used(fs, s)) {
			s++;
			continue;
		}
		while (s + n < e && n < RB_IO_BLOCKS && blk_used(fs, s + n))
			n++;
		ret = read_source(fs, target, s, buf, (uint32_t)n);
		if (ret == 0) {
			ret = dev_pwrite(m->be, m->devs[target], buf, (uint32_t)n * BS, s * BS);
			if (ret < 0) {
				mirror_event(m, target, MEV_WRITE_ERR, s, n);
				mirror_fail_dev(m, target, ret);
				return ret;
			}
			atomic_fetch_add(&rb->copied, n);
		} else if (mirror_insync(m) == 0) {
			return -EIO;
		}
		/* else: no copy readable now; the verification pass decides
		 * whether the blocks matter (an extent points at them). */
		s += n;
	}
	return 0;
}

/* ---- the thread ---- */

static void finish(struct tfs *fs, struct rebuild *rb, int state, bool persist)
{
	pthread_mutex_lock(&rb->mu);
	rb->state = state;
	rb->persist = persist;
	rb->verifying = false;
	pthread_mutex_unlock(&rb->mu);
}

/* Hold the visit rate to rb->rate (sleeping in short steps so a stop is
 * seen soon). */
static void throttle(struct tfs *fs, struct rebuild *rb)
{
	uint64_t rate = atomic_load(&rb->rate);
	double due, el;

	if (!rate)
		return;
	due = (double)atomic_load(&rb->regions_done) *
	      (double)((uint64_t)BS << fs->mirror.trk_shift) / (double)rate;
	while ((el = now_s() - ts_s(&rb->t0)) < due && !atomic_load(&rb->stop) &&
	       !atomic_load(&rb->cancel)) {
		double left = due - el;

		usleep(left > 0.05 ? 50000 : (useconds_t)(left * 1e6) + 1);
	}
}

void rebuild_set_rate(struct tfs *fs, uint64_t bytes_per_s)
{
	if (fs->rb)
		atomic_store(&fs->rb->rate, bytes_per_s);
}

static void *rb_main(void *arg)
{
	struct tfs *fs = arg;
	struct rebuild *rb = fs->rb;
	struct mirror *m = &fs->mirror;
	unsigned target = (unsigned)rb->dev;
	uint64_t r;
	double last_ckpt = now_s();
	uint8_t *buf = NULL;
	char tmp[40];
	const char *name;
	int ret = 0;

	snprintf(tmp, sizeof(tmp), "device %u", target);
	name = m->devs[target] && m->devs[target]->path ? m->devs[target]->path : tmp;
	tfs_log(LOG_NOTICE, "%s: %s started at region %llu of %llu", name,
		rb->kind == SUPER_RB_REPLACE ? "replace" : "rebuild",
		(unsigned long long)atomic_load(&m->sync_cursor),
		(unsigned long long)m->trk_nregions);
	if (posix_memalign((void **)&buf, BS, RB_IO_BLOCKS * BS)) {
		ret = -ENOMEM;
		goto fail;
	}
	for (r = atomic_load(&m->sync_cursor); r < m->trk_nregions; r++) {
		if (atomic_load(&rb->stop) || atomic_load(&rb->cancel))
			break;
		if (!rb_target_alive(fs, target)) {
			ret = -EIO;
			break;
		}
		if (rb->kind == SUPER_RB_REBUILD && !mirror_region_dirty(m, r)) {
			mirror_set_cursor(m, r + 1);
			continue;
		}
		mirror_sync_window(m, r);
		ret = copy_region(fs, rb, target, r, buf);
		if (ret == 0)
			mirror_set_cursor(m, r + 1);
		mirror_sync_window(m, UINT64_MAX);
		if (ret < 0)
			break;
		atomic_fetch_add(&rb->regions_done, 1);
		throttle(fs, rb);
		if (now_s() - last_ckpt >= RB_CKPT_EVERY_S) {
			ckpt_write(fs);	/* records the cursor */
			last_ckpt = now_s();
		}
	}
	free(buf);
	if (ret < 0)
		goto fail;
	if (atomic_load(&rb->stop))
		return NULL;	/* unmount: stays recorded as running */
	if (atomic_load(&rb->cancel)) {
		mirror_end_sync(m, MDEV_STALE);
		finish(fs, rb, RB_CANCELLED, false);
		ckpt_write(fs);
		tfs_log(LOG_NOTICE, "%s: rebuild cancelled; the device stays stale", name);
		return NULL;
	}

	pthread_mutex_lock(&rb->mu);
	rb->verifying = true;
	pthread_mutex_unlock(&rb->mu);
	ret = rb_verify_pass(fs, rb, target);
	if (ret == -ECANCELED && atomic_load(&rb->stop))
		return NULL;
	if (ret == -ECANCELED && atomic_load(&rb->cancel)) {
		mirror_end_sync(m, MDEV_STALE);
		finish(fs, rb, RB_CANCELLED, false);
		ckpt_write(fs);
		return NULL;
	}
	if (ret < 0)
		goto fail;
	if (!mirror_finish_sync(m, target)) {
		ret = -EIO;
		goto fail;
	}
	/* Every device in sync: nothing is missing anywhere any more.  A
	 * device failing right now may have lost its marks: mark all. */
	if (mirror_insync(m) == m->ndevs) {
		mirror_clear_all(m);
		if (mirror_insync(m) < m->ndevs)
			mirror_mark_all(m);
	}
	finish(fs, rb, RB_DONE, false);
	ret = ckpt_write(fs);
	if (ret < 0) {
		set_error(rb, "%s: completion checkpoint failed: %s", name, ret);
		pthread_mutex_lock(&rb->mu);
		rb->state = RB_FAILED;
		pthread_mutex_unlock(&rb->mu);
		return NULL;
	}
	tfs_log(LOG_NOTICE, "%s: %s finished: %llu blocks copied, %llu verified, %llu rewritten",
		name, rb->kind == SUPER_RB_REPLACE ? "replace" : "rebuild",
		(unsigned long long)atomic_load(&rb->copied),
		(unsigned long long)atomic_load(&rb->verified),
		(unsigned long long)atomic_load(&rb->fixed));
	event_rebuild_end(fs, target, rb->kind == SUPER_RB_REPLACE, 0, atomic_load(&rb->copied),
			  atomic_load(&rb->verified), atomic_load(&rb->fixed));
	return NULL;
fail:
	set_error(rb, "%s: %s", name, ret);
	mirror_end_sync(m, MDEV_FAILED);
	finish(fs, rb, RB_FAILED, false);
	tfs_log(LOG_ERR, "%s: rebuild failed: %s; the device stays stale", name,
		strerror(-ret));
	event_rebuild_end(fs, target, rb->kind == SUPER_RB_REPLACE, ret, 0, 0, 0);
	ckpt_write(fs);
	return NULL;
}

/* Count the regions this run visits, reset counters, start the thread.
 * Caller set rb->kind/dev and installed the target. */
static int launch(struct tfs *fs)
{
	struct rebuild *rb = fs->rb;
	struct mirror *m = &fs->mirror;
	uint64_t total = 0;
	int ret;

	for (uint64_t r = 0; r < m->trk_nregions; r++)
		if (rb->kind == SUPER_RB_REPLACE || mirror_region_dirty(m, r))
			total++;
	pthread_mutex_lock(&rb->mu);
	rb->regions_total = total;
	atomic_store(&rb->regions_done, 0);
	for (uint64_t r = 0; r < atomic_load(&m->sync_cursor) && r < m->trk_nregions; r++)
		if (rb->kind == SUPER_RB_REPLACE || mirror_region_dirty(m, r))
			atomic_fetch_add(&rb->regions_done, 1);
	atomic_store(&rb->stop, false);
	atomic_store(&rb->cancel, false);
	rb->error[0] = '\0';
	rb->verifying = false;
	clock_gettime(CLOCK_MONOTONIC, &rb->t0);
	pthread_mutex_unlock(&rb->mu);
	ret = -pthread_create(&rb->thr, NULL, rb_main, fs);
	if (ret == 0)
		rb->thr_running = true;
	return ret;
}

void rebuild_mount_resume(struct tfs *fs)
{
	struct rebuild *rb = fs->rb;

	if (!rb || rb->state != RB_RUNNING || rb->thr_running)
		return;
	/* Marked when the run began; again for a run a twinfs from before the
	 * mark began (this mount's checkpoint reached it first, as then). */
	if (sbc_mark_target(fs, (unsigned)rb->dev, fs->mirror.devs[rb->dev], NULL) < 0 ||
	    launch(fs) < 0) {
		mirror_end_sync(&fs->mirror, MDEV_STALE);
		finish(fs, rb, RB_FAILED, true);
	}
}

static void join_thread(struct rebuild *rb)
{
	if (rb->thr_running) {
		pthread_join(rb->thr, NULL);
		rb->thr_running = false;
	}
}

void rebuild_stop(struct tfs *fs)
{
	struct rebuild *rb = fs->rb;

	if (!rb)
		return;
	atomic_store(&rb->stop, true);
	join_thread(rb);
	/* Still recorded as running: the final checkpoint keeps the cursor,
	 * and the device is stale until a later mount finishes the job. */
	if (atomic_load(&fs->mirror.sync_dev) >= 0)
		mirror_end_sync(&fs->mirror, MDEV_STALE);
}

void rebuild_free(struct tfs *fs)
{
	struct rebuild *rb = fs->rb;

	mirror_track_free(&fs->mirror);
	if (!rb)
		return;
	for (unsigned i = 0; i < rb->nretired; i++)
		dev_close(rb->retired[i]);
	mirror_slot_paths_free(&fs->mirror);
	pthread_mutex_destroy(&rb->mu);
	free(rb);
	fs->rb = NULL;
}

/* ---- commands ---- */

/* Slot @i was mounted from (or replaced with) @path. */
static bool slot_path_is(struct tfs *fs, unsigned i, const char *path)
{
	char p[PATH_MAX];

	return mirror_slot_path(&fs->mirror, i, p, sizeof(p)) && strcmp(p, path) == 0;
}

/* Slot named by @name: a number, the path it was mounted from (or another
 * name of that file), or its dev uuid.  -ERANGE for a number that is no
 * slot, -ENOENT if none. */
int rebuild_find_slot(struct tfs *fs, const char *name)
{
	struct mirror *m = &fs->mirror;
	char u[37], real[PATH_MAX];
	struct dev_id id, di;
	unsigned long v;
	char *end;

	if (*name >= '0' && *name <= '9') {
		v = strtoul(name, &end, 10);
		if (!*end)
			return v < fs->ndevs ? (int)v : -ERANGE;
	}
	for (unsigned i = 0; i < fs->ndevs; i++) {
		if (m->devs[i] && m->devs[i]->path && strcmp(m->devs[i]->path, name) == 0)
			return (int)i;
		if (slot_path_is(fs, i, name))
			return (int)i;
		super_uuid_str(fs->sb.dev_uuids[i], u);
		if (strcasecmp(u, name) == 0)
			return (int)i;
	}
	/* Another name of an open member (a symlink, a relative path)... */
	if (dev_id_path(name, &id) == 0)
		for (unsigned i = 0; i < fs->ndevs; i++)
			if (m->devs[i] && dev_id_fd(m->devs[i]->fd, &di) == 0 &&
			    dev_id_eq(&id, &di))
				return (int)i;
	/* ...or of the path a missing one was mounted from (stored resolved). */
	if (dev_abspath(name, real, sizeof(real)) == 0)
		for (unsigned i = 0; i < fs->ndevs; i++)
			if (slot_path_is(fs, i, real))
				return (int)i;
	return -ENOENT;
}

/* "no device slot 5: this file system has 0 to 1". */
static void no_slot(struct tfs *fs, const char *name, char *err, size_t errlen)
{
	if (fs->ndevs == 1)
		snprintf(err, errlen, "no device slot %s: this file system has only slot 0",
			 name);
	else
		snprintf(err, errlen, "no device slot %s: this file system has slots 0 to %u",
			 name, fs->ndevs - 1);
}

/* An open device whose image file was deleted keeps working until it is
 * closed, and is gone then: rebuilding onto it would be in vain. */
static bool still_there(const struct dev *d)
{
	struct stat st;

	return d && (d->is_blk || (fstat(d->fd, &st) == 0 && st.st_nlink > 0));
}

/* "p" or "p (a symlink to /real/file)", for messages about what a path
 * turned out to be. */
static void describe_path(const char *p, char *out, size_t outlen)
{
	char real[PATH_MAX];
	struct stat st;

	if (lstat(p, &st) == 0 && S_ISLNK(st.st_mode) && realpath(p, real))
		snprintf(out, outlen, "%s (a symlink to %s)", p, real);
	else
		snprintf(out, outlen, "%s", p);
}

/* The index of the open member that @path is (under any name), -2 if it
 * is a device replaced in this mount (still open, still locked), else -1. */
static int open_member_of(struct tfs *fs, const char *path)
{
	struct dev_id id, di;

	if (dev_id_path(path, &id) < 0)
		return -1;
	for (unsigned i = 0; i < fs->ndevs; i++)
		if (fs->mirror.devs[i] && dev_id_fd(fs->mirror.devs[i]->fd, &di) == 0 &&
		    dev_id_eq(&id, &di))
			return (int)i;
	for (unsigned i = 0; i < fs->rb->nretired; i++)
		if (dev_id_fd(fs->rb->retired[i]->fd, &di) == 0 && dev_id_eq(&id, &di))
			return -2;
	return -1;
}

/* Why a device replaced in this mount cannot be used again yet. */
static void retired_msg(const char *what, char *err, size_t errlen)
{
	snprintf(err, errlen, "%s: was taken out of this file system while mounted and stays "
		 "open until the unmount; use it after that", what);
}

/*
 * Open @path as a returning member: its superblock (read from the opened
 * file, whatever a symlink led to) must carry this file system's uuid and
 * the device uuid this file system has for its slot, and the slot must be
 * @want (if >= 0).  Anything else is someone else's data that a rebuild,
 * which copies only what the device missed, would leave in place and
 * declare in sync.  0 with *out and *slot, or -errno with one line in err.
 */
static int open_member(struct tfs *fs, const char *path, int want, struct dev **out,
		       int *slot, char *err, size_t errlen)
{
	char what[2 * PATH_MAX + 32], why[160] = "", u[37];
	struct super dsb;
	struct dev *d = NULL;
	int j, ret;

	*out = NULL;
	describe_path(path, what, sizeof(what));
	/* Before dev_open: our own lock on it would read as "in use by
	 * another twinfs process". */
	j = open_member_of(fs, path);
	if (j >= 0) {
		snprintf(err, errlen, "%s: is device %d of this file system (%s)%s", what, j,
			 mirror_state_name(atomic_load(&fs->mirror.state[j])),
			 want >= 0 ? ", not the one of this slot" : "");
		return -EINVAL;
	}
	if (j == -2) {
		retired_msg(what, err, errlen);
		return -EBUSY;
	}
	ret = dev_open(path, false, &d, err, errlen);
	if (ret < 0)
		return ret;
	ret = super_read_dev(fs->be, d, &dsb, NULL, why, sizeof(why));
	if (ret < 0 || memcmp(dsb.fs_uuid, fs->sb.fs_uuid, 16) != 0) {
		snprintf(err, errlen, "%s: not a device of this twinfs (%s): not rebuilt "
			 "(replace overwrites a device)", what,
			 ret < 0 ? (why[0] ? why : strerror(-ret)) : "another file system's uuid");
		ret = -EINVAL;
		goto fail;
	}
	if (dsb.dev_index >= fs->ndevs ||
	    memcmp(dsb.dev_uuid, fs->sb.dev_uuids[dsb.dev_index], 16) != 0) {
		super_uuid_str(dsb.dev_uuid, u);
		snprintf(err, errlen, "%s: no longer a member of this twinfs (device uuid %s was "
			 "replaced): not rebuilt (replace overwrites a device)", what, u);
		ret = -EINVAL;
		goto fail;
	}
	if (want >= 0 && dsb.dev_index != (unsigned)want) {
		snprintf(err, errlen, "%s: holds device %u of this file system, not device %d",
			 what, dsb.dev_index, want);
		ret = -EINVAL;
		goto fail;
	}
	if (strcmp(what, path))	/* a symlink to a member: say where it led */
		tfs_log(LOG_NOTICE, "%s: device %u of this file system", what, dsb.dev_index);
	*out = d;
	*slot = (int)dsb.dev_index;
	return 0;
fail:
	dev_close(d);
	return ret;
}

/* Claim the run slot; -EBUSY if one runs.  Joins a finished thread. */
static int claim(struct tfs *fs, char *err, size_t errlen)
{
	struct rebuild *rb = fs->rb;

	pthread_mutex_lock(&rb->mu);
	if (rb->state == RB_RUNNING) {
		pthread_mutex_unlock(&rb->mu);
		snprintf(err, errlen, "a %s of device %d is already running",
			 rb->kind == SUPER_RB_REPLACE ? "replace" : "rebuild", rb->dev);
		return -EBUSY;
	}
	rb->state = RB_RUNNING;	/* claimed; undone by release() on error */
	pthread_mutex_unlock(&rb->mu);
	join_thread(rb);
	atomic_store(&rb->copied, 0);
	atomic_store(&rb->verified, 0);
	atomic_store(&rb->fixed, 0);
	rb->copied_base = 0;
	return 0;
}

static void release(struct rebuild *rb, int state)
{
	pthread_mutex_lock(&rb->mu);
	rb->state = state;
	pthread_mutex_unlock(&rb->mu);
}

static void retire(struct rebuild *rb, struct dev *d)
{
	if (d && rb->nretired < sizeof(rb->retired) / sizeof(rb->retired[0]))
		rb->retired[rb->nretired++] = d;
	else if (d)
		dev_close(d);	/* cannot happen: one per attach, DEV_MAX attaches */
}

/* Common tail: target installed, record the run and start. */
static int begin(struct tfs *fs, unsigned slot, struct dev *d, int kind, char *err,
		 size_t errlen)
{
	struct rebuild *rb = fs->rb;
	int ret;

	pthread_mutex_lock(&rb->mu);
	rb->kind = kind;
	rb->dev = (int)slot;
	rb->persist = true;
	pthread_mutex_unlock(&rb->mu);
	mirror_start_sync(&fs->mirror, slot, d, kind == SUPER_RB_REPLACE, 0);
	fs->devs[slot] = d;
	/* Records the run (and, for a replace, the new member) before any
	 * block is copied. */
	ret = ckpt_write(fs);
	if (ret == 0)
		ret = launch(fs);
	if (ret < 0) {
		mirror_end_sync(&fs->mirror, MDEV_STALE);
		finish(fs, rb, RB_FAILED, false);
		snprintf(err, errlen, "cannot start: %s", strerror(-ret));
	}
	return ret;
}

int rebuild_start(struct tfs *fs, const char *name, char *err, size_t errlen)
{
	struct mirror *m = &fs->mirror;
	struct dev *d = NULL, *old;
	int slot, st, ret;

	ret = claim(fs, err, errlen);
	if (ret < 0)
		return ret;
	slot = rebuild_find_slot(fs, name);
	if (slot == -ERANGE) {
		no_slot(fs, name, err, errlen);
		ret = -ENOENT;
		goto out;
	}
	if (slot < 0) {
		/* A returning device not open yet: its superblock says which
		 * slot it is. */
		ret = open_member(fs, name, -1, &d, &slot, err, errlen);
		if (ret < 0)
			goto out;
	}
	st = atomic_load(&m->state[slot]);
	if (st == MDEV_OK || st == MDEV_REBUILDING) {
		char what[2 * PATH_MAX + 32] = "";
		char *end;

		/* Named by a path: say which device that turned out to be. */
		if (strtoul(name, &end, 10) != (unsigned long)slot || *end || !*name) {
			describe_path(name, what, sizeof(what) - 2);
			strcat(what, ": ");
		}
		snprintf(err, errlen, "%sdevice %d is %s: nothing to rebuild", what, slot,
			 mirror_state_name(st));
		ret = -EALREADY;
		goto out_close;
	}
	if (mirror_insync(m) == 0) {
		snprintf(err, errlen, "no in-sync device to rebuild from");
		ret = -EIO;
		goto out_close;
	}
	if (!d && !still_there(m->devs[slot])) {
		/* Named by slot, uuid or path: whatever is at the path now
		 * passes the same check as a device named by its path. */
		char p[PATH_MAX];

		if (!mirror_slot_path(m, slot, p, sizeof(p))) {
			snprintf(err, errlen, "device %d is missing: name its path", slot);
			ret = -ENODEV;
			goto out;
		}
		ret = open_member(fs, p, slot, &d, &slot, err, errlen);
		if (ret < 0)
			goto out;
	}
	if (d) {
		if (d->size / BS < fs->sb.total_blocks) {
			snprintf(err, errlen, "%s: smaller than the file system", d->path);
			ret = -ENOSPC;
			goto out_close;
		}
		ret = dev_backend_attach(fs->be, d);
		if (ret < 0) {
			snprintf(err, errlen, "%s: cannot attach: %s", d->path, strerror(-ret));
			goto out_close;
		}
		old = m->devs[slot];
		retire(fs->rb, old);
	} else {
		d = m->devs[slot];	/* failed or stale, still open */
	}
	ret = sbc_mark_target(fs, (unsigned)slot, d, NULL);
	if (ret < 0) {
		snprintf(err, errlen, "%s: cannot record it stale in its own superblock: %s",
			 d->path, strerror(-ret));
		if (d != m->devs[slot])
			retire(fs->rb, d);	/* attached: closed at unmount */
		goto out;
	}
	return begin(fs, (unsigned)slot, d, SUPER_RB_REBUILD, err, errlen);

out_close:
	if (d && d != m->devs[slot])
		dev_close(d);
out:
	release(fs->rb, RB_FAILED);
	if (!err[0])
		snprintf(err, errlen, "%s", strerror(-ret));
	pthread_mutex_lock(&fs->rb->mu);
	snprintf(fs->rb->error, sizeof(fs->rb->error), "%s", err);
	pthread_mutex_unlock(&fs->rb->mu);
	return ret;
}

/* mkfs's check, for a replace: refuse (unless forced) a NEW holding a
 * file system, naming a member of this one as such. */
static int replace_probe(struct tfs *fs, struct dev *d, bool force, char *err, size_t errlen)
{
	struct super found;
	int ret;

	if (force)
		return 0;
	ret = super_probe_dev(fs->be, d, "--force", &found, err, errlen);
	if (ret != -EEXIST || memcmp(found.fs_uuid, fs->sb.fs_uuid, 16) != 0)
		return ret;
	for (unsigned i = 0; i < fs->ndevs; i++) {
		if (memcmp(found.dev_uuid, fs->sb.dev_uuids[i], 16) == 0) {
			snprintf(err, errlen, "%s: already a member of this file system "
				 "(device %u, %s): use rebuild, or --force to overwrite it",
				 d->path, i, mirror_state_name(atomic_load(&fs->mirror.state[i])));
			return -EEXIST;
		}
	}
	snprintf(err, errlen, "%s: a former member of this file system (use --force to "
		 "overwrite it)", d->path);
	return -EEXIST;
}

/* The slot @oldname names, if another in-sync device can fill it and
 * @newpath is not one of ours. */
static int replace_slot(struct tfs *fs, const char *oldname, const char *newpath, int *slotp,
			char *err, size_t errlen)
{
	struct mirror *m = &fs->mirror;
	int slot, j;

	slot = rebuild_find_slot(fs, oldname);
	if (slot == -ERANGE) {
		no_slot(fs, oldname, err, errlen);
		return -ENOENT;
	}
	if (slot < 0) {
		snprintf(err, errlen, "%s: not a device of this file system", oldname);
		return -ENOENT;
	}
	if (mirror_insync(m) - (atomic_load(&m->state[slot]) == MDEV_OK) == 0) {
		snprintf(err, errlen, "no other in-sync device to copy from");
		return -EIO;
	}
	/* Never one of ours in use, forced or not: it would overwrite a
	 * mirror (and our own lock on it reads as "in use"). */
	j = open_member_of(fs, newpath);
	if (j >= 0) {
		snprintf(err, errlen, "%s: already a member of this file system (device %d, %s)",
			 newpath, j, mirror_state_name(atomic_load(&m->state[j])));
		return -EEXIST;
	}
	if (j == -2) {
		retired_msg(newpath, err, errlen);
		return -EBUSY;
	}
	*slotp = slot;
	return 0;
}

/* The new device, opened: check its size and what is on it, attach it; a
 * new device uuid in @uuid. */
static int replace_check(struct tfs *fs, struct dev *d, const char *newpath, bool force,
			 uint8_t *uuid, char *err, size_t errlen)
{
	int ret;

	if (d->size / BS < fs->sb.total_blocks) {
		snprintf(err, errlen, "%s: too small (%llu MiB; the file system needs %llu MiB)",
			 newpath, (unsigned long long)(d->size >> 20),
			 (unsigned long long)((fs->sb.total_blocks * BS) >> 20));
		return -ENOSPC;
	}
	if (getrandom(uuid, 16, 0) != 16)
		return -EIO;
	uuid[6] = (uuid[6] & 0x0f) | 0x40;
	uuid[8] = (uuid[8] & 0x3f) | 0x80;
	/* Before attaching: a refused device must not take a backend slot. */
	ret = replace_probe(fs, d, force, err, errlen);
	if (ret < 0)
		return ret;
	ret = dev_backend_attach(fs->be, d);
	if (ret < 0)
		snprintf(err, errlen, "%s: cannot attach: %s", newpath, strerror(-ret));
	return ret;
}

/* The new member's superblock first, recording it stale (both slots: an
 * old file system's slot must not win), then the others learn its uuid. */
static int replace_write_super(struct tfs *fs, struct dev *d, int slot, const uint8_t *uuid,
			       const char *newpath, char *err, size_t errlen)
{
	int ret;

	pthread_mutex_lock(&fs->ckpt_mu);
	ret = sbc_mark_target(fs, (unsigned)slot, d, uuid);
	if (ret == 0) {
		memcpy(fs->sb.dev_uuids[slot], uuid, 16);
		fs->sb.dev_state[slot] = 1;
		/* An emergency superblock (sbc_persist_stale) written before
		 * the next checkpoint must name the new member, or a crash
		 * would leave it "no longer a member". */
		sbc_note_member(fs, (unsigned)slot, uuid);
	}
	pthread_mutex_unlock(&fs->ckpt_mu);
	if (ret < 0)
		snprintf(err, errlen, "%s: cannot write the superblock: %s", newpath,
			 strerror(-ret));
	return ret;
}

int rebuild_replace(struct tfs *fs, const char *oldname, const char *newpath, bool force,
		    char *err, size_t errlen)
{
	struct mirror *m = &fs->mirror;
	struct dev *d = NULL;
	uint8_t uuid[16];
	int slot = -1, ret;

	ret = claim(fs, err, errlen);
	if (ret < 0)
		return ret;
	ret = replace_slot(fs, oldname, newpath, &slot, err, errlen);
	if (ret == 0)
		ret = dev_open(newpath, false, &d, err, errlen);
	if (ret < 0)
		goto out;
	ret = replace_check(fs, d, newpath, force, uuid, err, errlen);
	if (ret == 0)
		ret = replace_write_super(fs, d, slot, uuid, newpath, err, errlen);
	if (ret < 0) {
		dev_close(d);
		goto out;
	}
	/* The old device leaves the mirror; I/O that already picked it may
	 * still be in flight, so it stays open until unmount. */
	if (atomic_load(&m->state[slot]) == MDEV_OK)
		atomic_store(&m->state[slot], MDEV_FAILED);
	if (atomic_load(&m->state[slot]) != MDEV_MISSING)
		mirror_mark_all(m);	/* not read: the bits only matter for rebuild */
	retire(fs->rb, m->devs[slot]);
	/* Out of memory: the slot keeps its old path, which only names it. */
	(void)mirror_slot_path_set(m, slot, newpath);
	return begin(fs, (unsigned)slot, d, SUPER_RB_REPLACE, err, errlen);

out:
	release(fs->rb, RB_FAILED);
	pthread_mutex_lock(&fs->rb->mu);
	snprintf(fs->rb->error, sizeof(fs->rb->error), "%s", err);
	pthread_mutex_unlock(&fs->rb->mu);
	return ret;
}

int rebuild_cancel(struct tfs *fs)
{
	struct rebuild *rb = fs->rb;
	bool running;

	pthread_mutex_lock(&rb->mu);
	running = rb->state == RB_RUNNING && rb->thr_running;
	pthread_mutex_unlock(&rb->mu);
	if (!running)
		return -ENOENT;
	atomic_store(&rb->cancel, true);
	return 0;
}

void rebuild_get_status(struct tfs *fs, struct rebuild_status *st)
{
	struct rebuild *rb = fs->rb;
	uint64_t rbytes = (uint64_t)BS << fs->mirror.trk_shift;
	double el;

	memset(st, 0, sizeof(*st));
	st->dev = -1;
	if (!rb)
		return;
	pthread_mutex_lock(&rb->mu);
	st->state = rb->state;
	st->kind = rb->kind;
	st->dev = rb->dev;
	st->verifying = rb->verifying;
	st->regions_total = rb->regions_total;
	st->regions_done = atomic_load(&rb->regions_done);
	snprintf(st->error, sizeof(st->error), "%s", rb->error);
	el = now_s() - ts_s(&rb->t0);
	pthread_mutex_unlock(&rb->mu);
	if (st->regions_done > st->regions_total)
		st->regions_done = st->regions_total;
	st->bytes_total = st->regions_total * rbytes;
	st->bytes_done = st->regions_done * rbytes;
	st->copied_blocks = atomic_load(&rb->copied);
	st->verified_blocks = atomic_load(&rb->verified);
	st->fixed_blocks = atomic_load(&rb->fixed);
	if (st->state == RB_RUNNING && el > 0.05)
		st->rate = (uint64_t)(st->bytes_done / el);
	if (st->rate)
		st->eta_s = (st->bytes_total - st->bytes_done) / st->rate;
}

int rebuild_wait(struct tfs *fs)
{
	struct rebuild *rb = fs->rb;
	int state;

	for (;;) {
		pthread_mutex_lock(&rb->mu);
		state = rb->state;
		pthread_mutex_unlock(&rb->mu);
		if (state != RB_RUNNING || !rb->thr_running)
			break;
		usleep(10000);
	}
	return state;
}
