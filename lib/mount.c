// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * mount: the phases of tfs_mount, each one function: open and lock the
 * devices, read and cross-check their superblocks, set up the mirror and the
 * services, load the checkpoint and replay the log, judge the damage, then
 * either stop there (offline, for fsck; fs_offline_commit goes on later) or
 * rebuild the allocator and go live (or read-only, for a rescue).
 *
 * Every error path of mount closes what it opened (a ladder of labels in
 * reverse order of setup), writes one line naming the device into err, and
 * has written nothing to the devices.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "alloc_v2.h"
#include "ckpt_v2.h"
#include "discard.h"
#include "event.h"
#include "extpend.h"
#include "fs_i.h"
#include "logcont.h"
#include "rebuild.h"
#include "scrub.h"
#include "tlog.h"
#include "v2replaypf.h"
#include "wib.h"

#define FS_DEFAULT_COMMIT_MS 5000u

static uint64_t mono_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}
#define FS_DEFAULT_BOUNCE 64u
/* Small buffers: one for every request the kernel may have in flight
 * (max_background, 1024, plus the workers' own), so 4k random I/O at high
 * queue depth never waits for one: a worker that sleeps here until a
 * completion thread frees a buffer costs two context switches per request
 * (measured: with 256 such buffers, W1 spent ~45% of its switches there).
 * The stack hands out recently used buffers first, so pages of buffers
 * never reached are never touched: the mapping is 72 MiB of address space,
 * resident memory follows the depth actually used and the bytes written. */
#define FS_SMALL_BOUNCE 1152u
/* What of each pool stays resident between bursts (bounce.h): 16 whole
 * buffers (16.5 MiB, pinned as io_uring fixed buffers: the default
 * writeback and direct writers' steady depth) and 64 small ones (4 MiB).
 * Keeping all 64 whole ones pinned cost 64.5 MiB of RSS from the mount on,
 * idle or not: the whole "fixed" part of issue 13's RSS budget. */
#define FS_BOUNCE_KEPT 16u
#define FS_SMALL_KEPT 64u

/* ---- mount ---- */

struct apply_ctx {
	struct tfs *fs;
	/* ignored: the allocator is rebuilt after replay, or kept in step by
	 * meta_apply (fs->replay_alloc) */
	struct meta_tx drops;
	struct v2pf *pf;	/* the chunk's read-ahead, or NULL */
};

static int replay_rec(void *ctx, const struct log_rec *r)
{
	struct apply_ctx *ac = ctx;

	/* Written after the persisted write-intent bitmap: a stale device
	 * missed these blocks too. */
	ac->fs->mount_replay_records++;
	v2pf_note(ac->pf, r);
	if (r->type == LR_EXT_SET && !(r->ext.phys & EXTENT_UNWRITTEN))
		wib_note_replay(ac->fs, r->ext.phys, r->ext.n);
	return meta_apply(ac->fs, r, &ac->drops);
}

/* Format v2: the nodes the chunk's extent records will fault, read ahead
 * from several threads, a window at a time (v2replaypf.h). */
static void replay_pre(void *ctx, const void *p, size_t len)
{
	struct apply_ctx *ac = ctx;

	ac->fs->mount_replay_prefetched += v2pf_done(ac->pf);
	v2pf_end(ac->pf);
	/* -o lazyreplay reads no leaf for the records: nothing to read ahead */
	ac->pf = ac->fs->v2 && !ac->fs->lazyreplay ? v2pf_begin(ckpt_v2_inodes(ac->fs), p, len)
						     : NULL;
}

struct use_ctx {
	struct alloc *a;
	uint64_t runs;
};

static int use_run(void *ctx, uint64_t fblk, uint64_t phys, uint32_t n,
		   const struct extent_ent *ents)
{
	struct use_ctx *u = ctx;

	u->runs++;
	return alloc_use(u->a, EXTENT_PHYS(phys), n);
}

/* Mark the blocks of inode @ino in @u->a: from memory if it is there, else
 * (format v2, not resident) straight from the tree's EXTENT items, so the
 * walk does not read every inode into the inode cache.  @u NULL: only
 * whether it exists.  -ENOENT: gone; -EUCLEAN: a block outside the data
 * area. */
static int use_inode(struct tfs *fs, uint64_t ino, struct use_ctx *u)
{
	struct tfs_inode *ip;
	struct v2_peek pk;
	int ret;

	ret = inode_get_resident(fs, ino, &ip);
	if (ret == -ENOENT && fs->v2) {
		if (!u)
			return 0;	/* the cursor found it in the tree */
		ret = ckpt_v2_peek(fs, ino, &pk, use_run, u);
		if (ret == -ENOENT || ret == -EIO || ret == -ENOMEM)
			return ret;
		return ret < 0 ? -EUCLEAN : 0;
	}
	if (ret)
		return ret;
	if (u && S_ISREG(inode_mode(ip)))
		ret = inode_extent_walk(ip, 0, EXTENT_MAX_FBLK, use_run, u);
	inode_put(fs, ip);
	return ret < 0 ? -EUCLEAN : 0;
}

/* Every inode, one at a time (on format v2 each may leave memory again, so
 * the walk does not hold them all): the largest number and the count into
 * *max_ino and *total, and with @a every block the metadata references
 * marked in @a (*runs counts the runs).  -errno with err set. */
static int walk_inodes(struct tfs *fs, struct alloc *a, uint64_t *runs, uint64_t *max_ino,
		       uint64_t *total, char *err, size_t errlen)
{
	struct use_ctx u = { a, 0 };
	struct icursor c;
	uint64_t ino;
	int ret;

	ret = icursor_init(fs, &c);
	if (ret < 0) {
		tfs_seterr(err, errlen, "out of memory");
		return ret;
	}
	while ((ret = icursor_next(fs, &c, &ino)) == 0) {
		ret = use_inode(fs, ino, a ? &u : NULL);
		if (ret == -ENOENT)
			continue;
		if (ret == -EUCLEAN)
			tfs_seterr(err, errlen, "inode %llu maps a block outside the data area",
				   (unsigned long long)ino);
		if (ret)
			break;
		(*total)++;
		fs->mount_inodes_walked++;
		if (ino > *max_ino)
			*max_ino = ino;
	}
	icursor_free(&c);
	*runs += u.runs;
	if (ret != -ENOENT) {
		if (ret != -EUCLEAN)
			fs_seterr_inodes(fs, ret, err, errlen);
		return ret;
	}
	return 0;
}

/*
 * Debug (TWINFS_ALLOC_CHECK=1 in the daemon's environment): the allocator
 * the mount loaded from the trees and kept in step through the replay must
 * equal, block by block, the one a walk of every extent builds.  A
 * difference fails the mount with the first block that differs.
 */
static int check_alloc(struct tfs *fs, char *err, size_t errlen)
{
	const char *env = getenv("TWINFS_ALLOC_CHECK");
	struct alloc *full = NULL;
	uint64_t s, blk, runs = 0, t0 = mono_ns(), max_ino = 0, total = 0;
	uint32_t ca = 0, cb = 0;
	int ret;

	if (!env || strcmp(env, "1") != 0)
		return 0;
	/* -o lazyreplay: the allocator holds the pending records' new blocks
	 * but not yet the drops of what they replace; applied, the two
	 * must agree. */
	ret = extpend_apply_all(fs->xc);
	if (ret < 0) {
		tfs_seterr(err, errlen, "allocator check: applying the pending records: %s",
			   strerror(-ret));
		return ret;
	}
	ret = fs_alloc_make(fs, &full);
	if (ret < 0) {
		tfs_seterr(err, errlen, "out of memory");
		return ret;
	}
	ret = walk_inodes(fs, full, &runs, &max_ino, &total, err, errlen);
	t0 = mono_ns() - t0;
	s = fs->sb.node_start + fs->sb.node_blocks;
	if (ret == 0)
		ret = alloc_v2_compare(fs->alloc, full, s, fs->sb.total_blocks, &blk, &ca, &cb);
	if (ret == -ESRCH)
		tfs_seterr(err, errlen, "allocator check: block %llu has %u references in the "
			   "allocator loaded from the trees, %u in the extents",
			   (unsigned long long)blk, ca, cb);
	else if (ret == 0)
		tfs_log(LOG_INFO, "allocator check: the trees' allocator equals the extents' "
			"(%llu runs; loading it from the trees took %.3f s, the walk %.3f s)",
			(unsigned long long)runs, fs->mount_alloc_ns / 1e9, t0 / 1e9);
	alloc_destroy(full);
	return ret == -ESRCH ? -EUCLEAN : ret;
}

/* Unlinked inodes that were still open at the crash: delete them now and
 * say so once. Then mark every block the metadata references (unless the
 * allocator came from the trees, fs->replay_alloc), and the checkpoint's. */
static int mount_rebuild(struct tfs *fs, char *err, size_t errlen)
{
	uint64_t max_ino = TFS_ROOT_INO, norph, obytes, total = 0;
	int ret;

	ret = fs_reclaim_orphans(fs, &norph, &obytes, err, errlen);
	if (ret < 0)
		return ret;
	fs->mount_orphans = norph;
	if (norph)
		tfs_log(LOG_NOTICE, "reclaimed %llu orphan inode%s (%llu bytes): files deleted "
			"while still open when the file system was last stopped",
			(unsigned long long)norph, norph == 1 ? "" : "s",
			(unsigned long long)obytes);

	if (!inode_exists(fs, TFS_ROOT_INO)) {
		tfs_seterr(err, errlen, "%s: metadata has no root directory",
			   fs->mirror.devs[0] ? fs->mirror.devs[0]->path : "twinfs");
		return -EUCLEAN;
	}
	/* With the allocator from the trees (fs->replay_alloc: format v2)
	 * there is no walk: the count came from the superblock and the replay
	 * kept it (ckpt_v2_load), the next number from the superblock, the
	 * replay and the tree's largest key.  TWINFS_ALLOC_CHECK compares the
	 * allocator with a full walk. */
	if (fs->replay_alloc) {
		ret = ckpt_v2_max_ino(fs, &max_ino);
		if (ret < 0)
			fs_seterr_inodes(fs, ret, err, errlen);
		if (ret == 0)
			ret = check_alloc(fs, err, errlen);
	} else {
		ret = walk_inodes(fs, fs->alloc, &fs->mount_extent_runs, &max_ino, &total, err,
				  errlen);
		if (ret == 0)
			icache_set_total(fs, total);
	}
	if (ret < 0)
		return ret;
	if (atomic_load(&fs->next_ino) <= max_ino)
		atomic_store(&fs->next_ino, max_ino + 1);
	if (fs->sb.ckpt_blocks) {
		ret = alloc_use(fs->alloc, fs->sb.ckpt_start, fs->sb.ckpt_blocks);
		if (ret < 0) {
			tfs_seterr(err, errlen, "checkpoint lies outside the data area");
			return -EUCLEAN;
		}
	}
	return 0;
}

/* Read the superblock of every opened device into sbs[] (by position in
 * o->devs), check it fits the device and belongs with the others, and find
 * the newest.  With -o degraded a damaged or unreadable one is skipped. */
static int read_supers(struct tfs *fs, const struct tfs_opts *o, struct dev **opened,
		       struct super *sbs, bool *skip, int *newestp, char *err, size_t errlen)
{
	int first = -1, newest = -1, ret;
	char u[37];

	for (unsigned i = 0; i < o->ndevs; i++) {
		char why[200] = "";
		unsigned slot;

		if (!opened[i])
			continue;
		ret = super_read_dev(fs->be, opened[i], &sbs[i], &slot, why, sizeof(why));
		if (o->degraded && (ret == -EUCLEAN || ret == -EIO)) {
			/* Damaged or unreadable (an image truncated to nothing):
			 * with -o degraded it counts as missing. */
			tfs_log(LOG_WARNING, "%s: %s; treating it as missing", o->devs[i],
				why[0] ? why : strerror(-ret));
			skip[i] = true;
			continue;
		}
		if (ret == -ENOENT) {
			tfs_seterr(err, errlen, "%s: not a twinfs device", o->devs[i]);
			return -EINVAL;
		}
		if (ret == -EUCLEAN) {
			tfs_seterr(err, errlen, "%s: %s", o->devs[i],
				   why[0] ? why : "superblock checksum mismatch");
			return ret;
		}
		if (ret < 0) {
			tfs_seterr(err, errlen, "%s: %s", o->devs[i],
				   why[0] ? why : strerror(-ret));
			return ret;
		}
		/* Version 2 (ckpt_v2.c) and, opted into, the deprecated 1. */
		if (sbs[i].version != SUPER_VERSION && sbs[i].version != SUPER_VERSION_V2) {
			tfs_seterr(err, errlen, "%s: superblock version %u is not supported",
				   o->devs[i], sbs[i].version);
			return -EPROTONOSUPPORT;
		}
		if (sbs[i].version == SUPER_VERSION && o->v1_optin && !o->v1) {
			tfs_seterr(err, errlen,
				   "%s: format 1 image; this twinfs makes and mounts format 2. "
				   "To copy its files to a new file system (mkfs.twinfs), "
				   "open it with %s", o->devs[i], o->v1_optin);
			return -EPROTONOSUPPORT;
		}
		if (first >= 0 && sbs[i].version != sbs[first].version) {
			tfs_seterr(err, errlen, "%s: format v%u, but %s is format v%u", o->devs[i],
				   sbs[i].version, o->devs[first], sbs[first].version);
			return -EINVAL;
		}
		if (opened[i]->size / TFS_BLOCK_SIZE < sbs[i].total_blocks) {
			/* A shortened image would turn reads of its tail into
			 * errors long after mount said all was well. */
			tfs_seterr(err, errlen,
				   "%s: truncated: %llu blocks, the file system needs %llu "
				   "(leave it out and mount with -o degraded)", o->devs[i],
				   (unsigned long long)(opened[i]->size / TFS_BLOCK_SIZE),
				   (unsigned long long)sbs[i].total_blocks);
			return -EUCLEAN;
		}
		if (first < 0)
			first = (int)i;
		if (memcmp(sbs[i].fs_uuid, sbs[first].fs_uuid, 16) != 0) {
			super_uuid_str(sbs[i].fs_uuid, u);
			tfs_seterr(err, errlen,
				   "%s: belongs to another twinfs (uuid %s, not the one on %s)",
				   o->devs[i], u, o->devs[first]);
			return -EINVAL;
		}
		if (newest < 0 || sbs[i].generation > sbs[newest].generation)
			newest = (int)i;
	}
	if (newest < 0) {
		tfs_seterr(err, errlen, "no device of the file system could be opened");
		return -ENODEV;
	}
	*newestp = newest;
	return 0;
}

/* Place each device read by its dev_index into mdevs (paths alike); the
 * ones not opened or skipped are counted in *ngone, the last in *gone. */
static int place_devs(struct tfs *fs, const struct tfs_opts *o, struct dev **opened,
		      const struct super *sbs, const bool *skip, struct dev **mdevs,
		      const char **paths, const char **gone, unsigned *ngone, char *err,
		      size_t errlen)
{
	for (unsigned i = 0; i < o->ndevs; i++) {
		uint32_t idx = sbs[i].dev_index;

		if (!opened[i] || skip[i]) {
			*gone = o->devs[i];
			(*ngone)++;
			continue;
		}
		if (idx >= fs->sb.ndevs ||
		    memcmp(sbs[i].dev_uuid, fs->sb.dev_uuids[idx], 16) != 0) {
			tfs_seterr(err, errlen, "%s: no longer a member of this twinfs",
				   o->devs[i]);
			return -EINVAL;
		}
		if (mdevs[idx]) {
			tfs_seterr(err, errlen, "%s: same device as %s", o->devs[i], paths[idx]);
			return -EINVAL;
		}
		mdevs[idx] = opened[i];
		paths[idx] = o->devs[i];
	}
	return 0;
}

/* Refusing a stale device: say which superblock recorded it and what
 * its writer had counted against it (sbcommit.c), so that a refusal long
 * after the daemon that failed it is gone still says why: I/O errors, or
 * none (its image deleted or truncated, or it was missing). */
static void stale_err(const struct super *sb, unsigned i, const char *path,
		      const char *newest, char *err, size_t errlen)
{
	const struct super_devstats *st = &sb->stats[i];

	tfs_seterr(err, errlen,
		   "%s: stale (it missed writes while failed or missing; superblock "
		   "generation %llu on %s records it, with %llu write, %llu flush and "
		   "%llu read failures counted); mount with -o degraded", path,
		   (unsigned long long)sb->generation, newest,
		   (unsigned long long)st->write_err, (unsigned long long)st->flush_err,
		   (unsigned long long)st->read_err);
}

/* Each slot's state: missing, stale (missed writes) or in sync; without
 * -o degraded only a full, current set mounts.  @gone is the one path given
 * that did not open, if @ngone is 1; @newest the one whose superblock
 * fs->sb is. */
static int slot_states(struct tfs *fs, const struct tfs_opts *o, struct dev **mdevs,
		       int *state, const char **paths, const char *gone, unsigned ngone,
		       const char *newest, char *err, size_t errlen)
{
	unsigned nmiss = 0;
	int ret;
	char u[37];

	for (unsigned i = 0; i < fs->sb.ndevs; i++)
		nmiss += !mdevs[i];
	for (unsigned i = 0; i < fs->sb.ndevs; i++) {
		super_uuid_str(fs->sb.dev_uuids[i], u);
		if (!mdevs[i]) {
			state[i] = MDEV_MISSING;
			/* One path given that did not open and one slot
			 * without a device: that is where it was expected. */
			if (ngone == 1 && nmiss == 1)
				paths[i] = gone;
			if (!o->degraded) {
				if (paths[i])
					tfs_seterr(err, errlen,
						   "%s: device %u (uuid %s) is missing "
						   "(mount with -o degraded to use the others)",
						   paths[i], i, u);
				else
					tfs_seterr(err, errlen, "device %u (uuid %s) is missing "
						   "(mount with -o degraded to use the others)", i, u);
				return -ENODEV;
			}
			tfs_log(LOG_WARNING, "%s%sdevice %u (uuid %s) is missing: mounted degraded",
				paths[i] ? paths[i] : "", paths[i] ? ": " : "", i, u);
		} else if (fs->sb.dev_state[i]) {
			/* It missed writes while failed or absent: until it is
			 * rebuilt none of its blocks may be served.  One whose
			 * rebuild was interrupted is taken back: the rebuild
			 * resumes (rebuild.c). */
			state[i] = MDEV_STALE;
			if (!o->degraded && !(fs->sb.rb_state == SUPER_RB_RUNNING &&
					      fs->sb.rb_dev == i)) {
				stale_err(&fs->sb, i, paths[i], newest, err, errlen);
				return -ENODEV;
			}
		} else {
			state[i] = MDEV_OK;
		}
	}
	ret = -ENODEV;
	for (unsigned i = 0; i < fs->sb.ndevs; i++)
		if (state[i] == MDEV_OK)
			ret = 0;
	if (ret < 0)
		tfs_seterr(err, errlen, "no device holds a current copy of the file system");
	return ret;
}

/* A split brain (super_split_brain) between the newest superblock and
 * another opened device's is refused even with -o degraded: the user picks
 * the half to keep by mounting it alone. */
static int split_brain(const struct tfs_opts *o, const struct super *sbs, const bool *skip,
		       struct dev **opened, int newest, char *err, size_t errlen)
{
	for (unsigned i = 0; i < o->ndevs; i++) {
		if (!opened[i] || skip[i] || (int)i == newest ||
		    !super_split_brain(&sbs[newest], &sbs[i]))
			continue;
		tfs_seterr(err, errlen,
			   "%s and %s each record the other stale: each was mounted "
			   "without the other (-o degraded) and changed (split brain); "
			   "mount the one to keep alone with -o degraded, then replace "
			   "the other", o->devs[newest], o->devs[i]);
		return -EUCLEAN;
	}
	return 0;
}

/* A rebuild or replace target records itself stale in its own superblock
 * before its first block is copied (sbc_mark_target), one generation
 * below the in-sync devices'.  If that is the newest superblock given, no
 * device given is in sync: the target holds part old, part copied blocks,
 * which no option (-o degraded, -o rescue) makes a file system. */
static int unfinished_target(const struct super *nb, struct dev **mdevs, const char **paths,
			     char *err, size_t errlen)
{
	char u[SUPER_UUID_STR];
	int src = -1;

	if (!super_self_stale(nb))
		return 0;
	for (unsigned i = 0; i < nb->ndevs; i++) {
		if (nb->dev_state[i])
			continue;
		if (mdevs[i])
			return 0;	/* an in-sync device given: the normal path */
		if (src < 0)
			src = (int)i;
	}
	if (src < 0) {
		tfs_seterr(err, errlen, "%s: a rebuild or replace onto it did not finish: its "
			   "contents are incomplete, and no device is recorded in sync",
			   paths[nb->dev_index]);
		return -ENODEV;
	}
	super_uuid_str(nb->dev_uuids[src], u);
	tfs_seterr(err, errlen, "%s: a rebuild or replace onto it did not finish: its contents "
		   "are incomplete; mount it together with device %d (uuid %s), in sync, to "
		   "finish the rebuild", paths[nb->dev_index], src, u);
	return -ENODEV;
}

/* Read and cross-check the superblocks of the opened devices, place them
 * by dev_index into mdevs and decide each slot's state. */
static int mount_supers(struct tfs *fs, const struct tfs_opts *o, struct dev **opened,
			struct dev **mdevs, int *state, const char **paths, char *err,
			size_t errlen)
{
	struct super *sbs = calloc(o->ndevs, sizeof(*sbs));
	bool skip[DEV_MAX] = { 0 };
	const char *gone = NULL;
	unsigned ngone = 0;
	int newest = -1, ret;

	if (!sbs) {
		tfs_seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	ret = read_supers(fs, o, opened, sbs, skip, &newest, err, errlen);
	if (ret < 0)
		goto out;
	fs->sb = sbs[newest];
	if (fs->sb.ndevs == 0 || fs->sb.ndevs > DEV_MAX) {
		tfs_seterr(err, errlen, "%s: superblock names %u devices", o->devs[newest],
			   fs->sb.ndevs);
		ret = -EUCLEAN;
		goto out;
	}
	ret = place_devs(fs, o, opened, sbs, skip, mdevs, paths, &gone, &ngone, err, errlen);
	if (ret == 0)
		ret = split_brain(o, sbs, skip, opened, newest, err, errlen);
	if (ret == 0)
		ret = unfinished_target(&fs->sb, mdevs, paths, err, errlen);
	if (ret == 0)
		ret = slot_states(fs, o, mdevs, state, paths, gone, ngone, o->devs[newest],
				  err, errlen);
out:
	free(sbs);
	return ret;
}

/* Records metadata damage no mirror can repair (first reason wins; the
 * others are usually its consequences). */
static void note_damage(struct tfs *fs, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void note_damage(struct tfs *fs, const char *fmt, ...)
{
	va_list ap;

	if (fs->damage[0])
		return;
	va_start(ap, fmt);
	vsnprintf(fs->damage, sizeof(fs->damage), fmt, ap);
	va_end(ap);
}

/*
 * The newest superblock generation lost on every device?  Superblock
 * writes alternate slots, so the other slot of every in-sync device holds
 * the generation before the one mount took, unless it held a newer one that
 * no device has intact.  A 4 KiB superblock write is not torn by a crash
 * (the crash explorer's model; O_DIRECT block writes), so a slot that does
 * not verify is damage; if some device's other slot is intact (or its
 * damaged fields still say "older"), the newest generation is known.
 */
static void check_newest_super(struct tfs *fs)
{
	unsigned other = (unsigned)((fs->sb.generation + 1) % 2), seen = 0;
	void *buf;

	if (fs->sb.generation < 2 || posix_memalign(&buf, TFS_BLOCK_SIZE, TFS_BLOCK_SIZE))
		return;		/* mkfs wrote one slot only */
	for (unsigned i = 0; i < fs->ndevs; i++) {
		if (!fs->devs[i] || atomic_load(&fs->mirror.state[i]) != MDEV_OK)
			continue;
		seen++;
		if (dev_pread(fs->be, fs->devs[i], buf, TFS_BLOCK_SIZE,
			      (uint64_t)other * TFS_BLOCK_SIZE) == 0 &&
		    super_slot_older(buf, other, &fs->sb)) {
			free(buf);
			return;
		}
	}
	free(buf);
	if (seen)
		note_damage(fs, "superblock slot %u is damaged on every device: the newest "
			    "superblock generation may be lost (generation %llu in slot %u is "
			    "the newest intact one)", other,
			    (unsigned long long)fs->sb.generation, 1 - other);
}

/* The newest intact superblock older than fs->sb on an in-sync device (the
 * other slot), for a rescue whose checkpoint is damaged.  0 or -ENOENT. */
static int previous_super(struct tfs *fs, struct super *prev)
{
	unsigned other = (unsigned)((fs->sb.generation + 1) % 2);
	int ret = -ENOENT;
	struct super s;
	void *buf;

	if (posix_memalign(&buf, TFS_BLOCK_SIZE, TFS_BLOCK_SIZE))
		return -ENOMEM;
	for (unsigned i = 0; i < fs->ndevs; i++) {
		if (!fs->devs[i] || atomic_load(&fs->mirror.state[i]) != MDEV_OK)
			continue;
		if (dev_pread(fs->be, fs->devs[i], buf, TFS_BLOCK_SIZE,
			      (uint64_t)other * TFS_BLOCK_SIZE) == 0 &&
		    super_decode(buf, other, &s, NULL, 0) == 0 &&
		    memcmp(s.fs_uuid, fs->sb.fs_uuid, 16) == 0 &&
		    s.generation < fs->sb.generation &&
		    (ret < 0 || s.generation > prev->generation)) {
			*prev = s;
			ret = 0;
		}
	}
	free(buf);
	return ret;
}

/* An empty fs carrying the mount's options. */
static int mount_new(const struct tfs_opts *o, struct tfs **out, char *err, size_t errlen)
{
	struct tfs *fs;
	int ret;

	ret = fs_new(&fs);
	if (ret < 0) {
		tfs_seterr(err, errlen, "out of memory");
		return ret;
	}
	fs->commit_ms = o->commit_ms ? o->commit_ms : FS_DEFAULT_COMMIT_MS;
	fs->on_unusable = o->on_unusable;
	fs->cb_ctx = o->cb_ctx;
	*out = fs;
	return 0;
}

/* Open (and lock) every device given; a missing path stays NULL unless
 * offline.  On error the caller closes what was opened. */
static int mount_open_devs(const struct tfs_opts *o, struct dev **opened, char *err,
			   size_t errlen)
{
	unsigned a, b;
	int ret;

	if (fs_same_paths(o->devs, o->ndevs, &a, &b)) {
		tfs_seterr(err, errlen, "%s: same device as %s (given twice)", o->devs[a],
			   o->devs[b]);
		return -EINVAL;
	}
	for (unsigned i = 0; i < o->ndevs; i++) {
		ret = dev_open(o->devs[i], (o->offline && o->readonly) || o->rescue, &opened[i],
			       err, errlen);
		/* A missing path is reported by mount_supers, which knows
		 * the uuid that was expected there. */
		if (ret == -ENOENT && !o->offline) {
			opened[i] = NULL;
			continue;
		}
		if (ret == -ENOENT)
			tfs_seterr(err, errlen, "%s: %s", o->devs[i], strerror(ENOENT));
		if (ret < 0)
			return ret;
	}
	return 0;
}

/* The superblocks say which device is which slot and each slot's state;
 * the mirror is set up from them, its counters as the last mount left
 * them. */
static int mount_mirror(struct tfs *fs, const struct tfs_opts *o, struct dev **opened,
			const char **spaths, char *err, size_t errlen)
{
	struct dev *mdevs[DEV_MAX] = { 0 };
	int state[DEV_MAX] = { 0 };
	int ret;

	ret = mount_supers(fs, o, opened, mdevs, state, spaths, err, errlen);
	if (ret < 0)
		return ret;
	fs->ndevs = fs->sb.ndevs;
	memcpy(fs->devs, mdevs, sizeof(mdevs));

	ret = mirror_init(&fs->mirror, fs->be, mdevs, fs->ndevs);
	if (ret < 0) {
		tfs_seterr(err, errlen, "cannot set up the mirror: %s", strerror(-ret));
		return ret;
	}
	for (unsigned i = 0; i < fs->ndevs; i++) {
		struct mirror_counters *c = &fs->mirror.ctr[i];
		const struct super_devstats *st = &fs->sb.stats[i];

		atomic_store(&fs->mirror.state[i], state[i]);
		/* counters survive remounts */
		atomic_store(&c->read_err, st->read_err);
		atomic_store(&c->write_err, st->write_err);
		atomic_store(&c->flush_err, st->flush_err);
		atomic_store(&c->csum_err, st->csum_err);
		atomic_store(&c->repaired, st->repaired);
		atomic_store(&c->unrecoverable, st->unrecoverable);
	}
	fs->mirror.on_state = fs_on_mirror_state;
	fs->mirror.on_state_ctx = fs;
	fs->mirror.on_unrecoverable = event_unrecoverable;
	fs->rescue = o->rescue && !o->offline;
	/* Rescue: a bad copy met on a read is not rewritten (nothing is). */
	fs->mirror.no_repair = fs->rescue;
	check_newest_super(fs);
	/* From the first write on, a device failing (or found missing) is
	 * recorded stale in the superblocks before the write is acknowledged. */
	sbc_mount(fs);
	return 0;
}

/* Names the fs in messages: its first device present. */
static const char *mount_name(const struct tfs *fs)
{
	for (unsigned i = 0; i < DEV_MAX; i++)
		if (fs->devs[i])
			return fs->devs[i]->path;
	return "twinfs";
}

/* Rebuild, scrub, events and the allocator, before anything is loaded. */
static int mount_services(struct tfs *fs, const struct tfs_opts *o, const char **spaths,
			  char *err, size_t errlen)
{
	int ret;

	/* Before anything is written: a device whose rebuild was running
	 * must get this mount's writes from the first one on. */
	ret = rebuild_mount_init(fs, spaths, err, errlen);
	if (ret < 0)
		return ret;
	ret = scrub_init(fs);
	if (ret < 0) {
		tfs_seterr(err, errlen, "out of memory");
		return ret;
	}
	ret = o->offline ? 0 : event_open(fs, o->event_cmd, o->mountpoint, o->event_timeout_s);
	if (ret < 0) {
		tfs_seterr(err, errlen, "cannot set up events: %s", strerror(-ret));
		return ret;
	}

	ret = fs_alloc_create(fs);
	if (ret < 0) {
		tfs_seterr(err, errlen, "cannot create the allocator: %s", strerror(-ret));
		return ret;
	}
	if (fs->sb.next_ino > TFS_ROOT_INO)
		atomic_store(&fs->next_ino, fs->sb.next_ino);
	return 0;
}

/* Load the checkpoint the superblock names; a rescue whose checkpoint is
 * damaged falls back to the previous superblock's. */
static int mount_ckpt_load(struct tfs *fs, const char *name0, char *err, size_t errlen)
{
	uint64_t t0 = mono_ns();
	int ret;

	ret = ckpt_load(fs);
	fs->mount_ckpt_ns = mono_ns() - t0;
	/* Version 2 keeps no previous checkpoint to fall back to (yet). */
	if ((ret == -EUCLEAN || ret == -EIO) && fs->rescue && !fs->v2) {
		struct super prev = { 0 };

		/* The previous checkpoint survives until the next one is
		 * written (ckpt_alloc uses the other end of the reserve), and
		 * the log from its head may still hold what came after. */
		if (previous_super(fs, &prev) == 0) {
			note_damage(fs, "the checkpoint of generation %llu is damaged on every "
				    "device; rescue reads the previous one (generation %llu)",
				    (unsigned long long)fs->sb.generation,
				    (unsigned long long)prev.generation);
			fs->sb.ckpt_start = prev.ckpt_start;
			fs->sb.ckpt_blocks = prev.ckpt_blocks;
			fs->sb.ckpt_bytes = prev.ckpt_bytes;
			fs->sb.ckpt_table_csum = prev.ckpt_table_csum;
			fs->sb.ckpt_seq = prev.ckpt_seq;
			fs->sb.log_head_pos = prev.log_head_pos;
			fs->sb.log_head_seq = prev.log_head_seq;
			fs->sb.log_id = prev.log_id;
			ret = ckpt_load(fs);
		}
	}
	if (ret == -EIO && fs->sb.version == SUPER_VERSION_V2) {
		tfs_seterr(err, errlen, "%s: cannot load the metadata trees: a tree node has no "
			   "good copy on any device (run fsck.twinfs -n to see the damage)", name0);
		return ret;
	}
	if (ret == -EUCLEAN || ret == -EIO) {
		tfs_seterr(err, errlen, "%s: the checkpoint is damaged on every device%s%s "
			   "(run fsck.twinfs -n to see the damage; %s)", name0,
			   fs->damage[0] ? "; " : "", fs->damage,
			   fs->sb.version == SUPER_VERSION_V2 ?
			   "format v2 has no previous checkpoint to fall back to, not even with "
			   "-o rescue" : "-o rescue tries the previous checkpoint, read-only");
		return ret;
	}
	if (ret < 0) {
		tfs_seterr(err, errlen, "%s: cannot load the checkpoint: %s", name0,
			   strerror(-ret));
		return ret;
	}
	return 0;
}

/* Format v2: the allocator from the free-space and refcount trees, no
 * extent walked; the replay keeps it in step (fs->replay_alloc).  fsck
 * (offline) rebuilds it from the extents instead, to compare. */
static int mount_alloc_trees(struct tfs *fs, const char *name0, char *err, size_t errlen)
{
	uint64_t t0 = mono_ns();
	int ret = ckpt_v2_load_alloc(fs);

	fs->mount_alloc_ns = mono_ns() - t0;
	if (ret < 0) {
		tfs_seterr(err, errlen, "%s: cannot load the free space: %s", name0,
			   ret == -EUCLEAN ? "the free-space or refcount tree is damaged "
			   "(run fsck.twinfs)" : strerror(-ret));
		return ret;
	}
	fs->replay_alloc = true;
	fs->mount_alloc_trees = true;
	return 0;
}

/* Replay the log from the checkpoint's head; *end_pos and *next_seq say
 * where it ended.  Damage that leaves later records unreachable is noted,
 * not an error: the verdict is mount_verdict's. */
static int mount_replay(struct tfs *fs, const char *name0, uint64_t *end_pos,
			uint64_t *next_seq, char *err, size_t errlen)
{
	struct apply_ctx ac;
	struct log_geom g;
	int ret;

	uint64_t t0 = mono_ns();

	fs_log_geom(fs, &g);
	ac.fs = fs;
	ac.pf = NULL;
	meta_tx_init(&ac.drops);
	ret = log_replay_pre(&fs->mirror, &g, replay_pre, replay_rec, &ac, end_pos, next_seq);
	fs->mount_replay_prefetched += v2pf_done(ac.pf);
	v2pf_end(ac.pf);
	meta_tx_free(&ac.drops);
	fs->mount_replay_ns = mono_ns() - t0;
	if (fs->lazyreplay) {
		uint64_t bytes, applied;

		extpend_stats(fs->xc, &fs->mount_replay_pending, &bytes, &applied);
	}
	fs->mount_replay_blocks = (*end_pos + g.nblocks - g.head_pos) % g.nblocks;
	if (ret == -EBADMSG) {
		note_damage(fs, "metadata log chunk at block %llu (transaction %llu) is damaged "
			    "on every device and later transactions exist",
			    (unsigned long long)(fs->sb.log_start + *end_pos),
			    (unsigned long long)*next_seq);
		ret = 0;
	} else if (ret == -ESTALE) {
		note_damage(fs, "the metadata log goes on past what the superblock knows "
			    "(transaction %llu on): the newest superblock or checkpoint is lost",
			    (unsigned long long)*next_seq);
		ret = 0;
	}
	if (ret < 0) {
		tfs_seterr(err, errlen, "%s: cannot replay the metadata log: %s", name0,
			   strerror(-ret));
		return ret;
	}
	return 0;
}

/* Damaged metadata refuses a mount, unless rescue (read-only) is asked
 * for; offline (fsck) takes it as it is and reports it. */
static int mount_verdict(struct tfs *fs, const struct tfs_opts *o, const char *name0,
			 char *err, size_t errlen)
{
	if (fs->damage[0] && !o->offline) {
		if (!o->rescue) {
			tfs_seterr(err, errlen, "%s: %s; refusing to mount (run fsck.twinfs -n "
				   "DEVICES to see it, or mount with -o rescue to read what is "
				   "left, read-only)", name0, fs->damage);
			return -EUCLEAN;
		}
		tfs_log(LOG_WARNING, "RESCUE MOUNT, READ-ONLY: %s: %s; what the metadata still "
			"reaches is mounted, recent changes may be missing; copy it off, then "
			"run fsck.twinfs", name0, fs->damage);
	} else if (o->rescue && o->norecovery && !o->offline) {
		tfs_log(LOG_WARNING, "norecovery: %s mounted read-only as its last checkpoint "
			"left it (generation %llu): the metadata log is not replayed, changes "
			"made after that checkpoint are not shown", name0,
			(unsigned long long)fs->sb.generation);
	} else if (o->rescue && !o->offline) {
		tfs_log(LOG_WARNING, "rescue mount, read-only: no damaged metadata found on %s",
			name0);
	}
	return 0;
}

/* fsck looks at the state exactly as loaded; it must not be changed
 * through the API (no log to write it to) until fs_offline_commit. */
static void mount_stop_offline(struct tfs *fs, uint64_t end_pos, uint64_t next_seq)
{
	fs->replaying = false;
	fs->readonly = true;
	fs->replay_end_pos = end_pos;
	fs->replay_next_seq = next_seq;
}

/* The buffer pools: whole bounce buffers and the small ones. */
static int mount_bounce(struct tfs *fs, const struct tfs_opts *o)
{
	int ret;

	ret = bounce_pool_create(FS_BOUNCE_SIZE + TFS_BLOCK_SIZE,
				 o->bounce_bufs ? o->bounce_bufs : FS_DEFAULT_BOUNCE, &fs->bounce);
	if (ret == 0) {
		bounce_pool_keep(fs->bounce, FS_BOUNCE_KEPT);
		ret = bounce_pool_create(FS_SMALL_BUF, FS_SMALL_BOUNCE, &fs->bounce_small);
	}
	if (ret == 0)
		bounce_pool_keep(fs->bounce_small, FS_SMALL_KEPT);
	return ret;
}

/* Serve reads only: no new log_id, no checkpoint, no background thread,
 * no scrub or rebuild.  The log is opened in memory so the read paths find
 * one; nothing is ever appended to it. */
static int mount_rescue(struct tfs *fs, const struct tfs_opts *o, const char *name0,
			uint64_t end_pos, uint64_t next_seq, char *err, size_t errlen)
{
	int ret;

	fs->readonly = true;
	ret = fs_log_open(fs, end_pos, next_seq);
	if (ret == 0)
		ret = mount_bounce(fs, o);
	if (ret < 0) {
		tfs_seterr(err, errlen, "%s: rescue mount: %s", name0, strerror(-ret));
		return ret;
	}
	return 0;
}

/* A new log_id, the log, the pools and the discard thread; the first
 * checkpoint of this mount; then the background thread and the services
 * that go on from where the last mount stopped. */
static int mount_live(struct tfs *fs, const struct tfs_opts *o, const char *name0,
		      uint64_t end_pos, uint64_t next_seq, char *err, size_t errlen)
{
	bool cont = logcont_may(fs, next_seq);
	uint64_t t0;
	int ret;

	if (cont)	/* the writer's log_id, for fs_log_open; committed below */
		logcont_begin(fs, end_pos, next_seq);
	else
		logcont_new_log_id(fs);
	ret = fs_log_open(fs, end_pos, next_seq);
	if (ret < 0) {
		tfs_seterr(err, errlen, "%s: cannot open the metadata log: %s", name0,
			   strerror(-ret));
		return ret;
	}
	ret = mount_bounce(fs, o);
	if (ret < 0) {
		tfs_seterr(err, errlen, "cannot create the buffer pool: %s", strerror(-ret));
		return ret;
	}

	/* Before the first free: the checkpoint below frees the old one. */
	ret = discard_start(fs, !o->nodiscard);
	if (ret < 0) {
		tfs_seterr(err, errlen, "cannot start the discard thread: %s", strerror(-ret));
		return ret;
	}

	/* The first write of this mount.  The new superblock names the new
	 * log_id and the replay end as the log head; it must be durable before
	 * any record carrying the new log_id is written, or a crash would
	 * leave a superblock expecting the old log_id at a position holding
	 * new chunks, and replay would drop committed (fsynced) records. */
	fs->sb.state = SUPER_DIRTY;
	t0 = mono_ns();
	if (cont) {
		ret = logcont_commit(fs);
		if (ret < 0) {
			tfs_seterr(err, errlen, "%s: cannot write the superblock: %s", name0,
				   strerror(-ret));
			return ret;
		}
	} else {
		ret = ckpt_write(fs);
	}
	fs->mount_ckpt_write_ns = cont ? 0 : mono_ns() - t0;
	if (ret < 0) {
		/* ENOSPC: the changes replayed from the log need more node
		 * slots than are free (README "When space runs out"). */
		tfs_seterr(err, errlen, "%s: cannot write the checkpoint: %s%s", name0,
			   strerror(-ret), ret == -ENOSPC ? " (the metadata node area is "
			   "full: mount with -o rescue, read-only, and copy the data off)" : "");
		return ret;
	}

	ret = fs_bg_start(fs);
	if (ret < 0) {
		tfs_seterr(err, errlen, "cannot start the background thread: %s", strerror(-ret));
		return ret;
	}
	/* A scrub running at unmount (or crash) goes on from its cursor. */
	scrub_mount_resume(fs);
	rebuild_mount_resume(fs);
	return 0;
}

/*
 * Mount: the phases in order.  Up to the replay nothing is written; an
 * offline mount (fsck) stops after it, a rescue mount after rebuilding the
 * allocator, read-only; a normal one goes live with its first checkpoint.
 */
int tfs_mount(const struct tfs_opts *o, struct tfs **out, char *err, size_t errlen)
{
	struct dev *opened[DEV_MAX] = { 0 };
	const char *spaths[DEV_MAX] = { 0 };
	struct dev_backend *be;
	struct tfs *fs = NULL;
	uint64_t end_pos = 0, next_seq = 0;
	const char *name0;	/* names the fs in messages: first device */
	int ret;

	*out = NULL;
	if (!o || o->ndevs == 0 || o->ndevs > DEV_MAX) {
		tfs_seterr(err, errlen, "need 1 to %d devices", DEV_MAX);
		return -EINVAL;
	}
	ret = mount_new(o, &fs, err, errlen);
	if (ret < 0)
		return ret;
	if (o->cache_bytes && o->cache_bytes < TFS_CACHE_MIN) {
		tfs_seterr(err, errlen, "cache=%llu bytes: at least 4M is needed",
			   (unsigned long long)o->cache_bytes);
		fs_free(fs);
		return -EINVAL;
	}
	fs->cache_bytes = o->cache_bytes;
	fs->compact_dirty = o->compact_dirty;
	/* fsck (offline) applies everything as it loads it */
	fs->lazyreplay = o->lazyreplay && !o->offline;
	fs->acl = o->acl;
	fs->ckpt_log_bytes = o->ckpt_log_bytes;
	fs->v2_lazy = !o->offline;	/* fsck checks everything: it loads it all */
	ret = mount_open_devs(o, opened, err, errlen);
	if (ret == 0)
		ret = fs_backend_create(o->backend, o->fault, &fs->be, err, errlen);
	if (ret < 0)
		goto out_devs;
	ret = fs_attach_devs(fs->be, opened, o->devs, o->ndevs, err, errlen);
	if (ret == 0)
		ret = mount_mirror(fs, o, opened, spaths, err, errlen);
	if (ret < 0)
		goto out_fs;
	name0 = mount_name(fs);
	ret = mount_services(fs, o, spaths, err, errlen);
	if (ret < 0)
		goto out_fs;

	fs->replaying = true;
	ret = mount_ckpt_load(fs, name0, err, errlen);
	if (ret == 0 && fs->v2 && !o->offline)
		ret = mount_alloc_trees(fs, name0, err, errlen);
	if (ret == 0 && o->norecovery && fs->rescue) {
		/* Nothing is appended to a rescue mount's log: where it
		 * would start does not matter beyond being valid. */
		end_pos = fs->sb.log_head_pos;
		next_seq = fs->sb.log_head_seq;
	} else if (ret == 0) {
		ret = mount_replay(fs, name0, &end_pos, &next_seq, err, errlen);
	}
	if (ret == 0)
		ret = mount_verdict(fs, o, name0, err, errlen);
	if (ret < 0)
		goto out_fs;
	if (o->offline) {
		mount_stop_offline(fs, end_pos, next_seq);
		*out = fs;
		return 0;
	}

	ret = mount_rebuild(fs, err, errlen);
	if (ret == 0)
		ret = wib_mount_load(fs, err, errlen);
	if (ret < 0)
		goto out_fs;
	fs->replaying = false;
	fs->replay_alloc = false;
	if (fs->rescue)
		ret = mount_rescue(fs, o, name0, end_pos, next_seq, err, errlen);
	else
		ret = mount_live(fs, o, name0, end_pos, next_seq, err, errlen);
	if (ret < 0)
		goto out_fs;
	/* Once mounted: a refusal for another reason stays one line. */
	if (fs->sb.version == SUPER_VERSION && o->v1_optin)
		tfs_log(LOG_WARNING, "%s: format 1 is deprecated and will be removed: copy its "
			"files to a new file system (mkfs.twinfs)", name0);
	*out = fs;
	return 0;

out_fs:
	be = fs->be;
	fs_free(fs);
	dev_backend_destroy(be);
	fs_close_devs(opened, o->ndevs);
	return ret;
out_devs:
	fs_free(fs);
	fs_close_devs(opened, o->ndevs);
	return ret;
}

int fs_offline_commit(struct tfs *fs, char *err, size_t errlen)
{
	int ret;

	if (fs->log)
		return -EINVAL;
	fs->replaying = true;	/* orphan deletion without drops (no allocator use yet) */
	ret = mount_rebuild(fs, err, errlen);
	if (ret == 0)
		ret = wib_mount_load(fs, err, errlen);
	fs->replaying = false;
	if (ret < 0)
		return ret;
	if (fs->damage[0]) {
		struct log_geom g;

		/* The loss is accepted: what the old log or a lost newer
		 * mount left beyond the replay end must not be mistaken for
		 * damage by the next mount. */
		fs_log_geom(fs, &g);
		ret = log_forget_from(&fs->mirror, &g, fs->replay_next_seq);
		if (ret < 0) {
			tfs_seterr(err, errlen, "cannot erase the log beyond the damage: %s",
				   strerror(-ret));
			return ret;
		}
	}
	logcont_new_log_id(fs);
	ret = fs_log_open(fs, fs->replay_end_pos, fs->replay_next_seq);
	if (ret < 0) {
		tfs_seterr(err, errlen, "cannot open the metadata log: %s", strerror(-ret));
		return ret;
	}
	fs->readonly = false;
	return 0;
}
