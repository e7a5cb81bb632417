/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * rebuild: bringing a mirror back in sync while mounted.
 *
 * "rebuild DEV" copies to a returning device the allocated blocks of the
 * regions written while it was away (the write-intent bitmap of mirror.h);
 * it takes only a device whose superblock names this file system and the
 * device uuid of its slot.  "replace OLD NEW" formats NEW as the member in
 * OLD's slot (new dev_uuid, same fs_uuid) and copies every allocated block;
 * it refuses (unless forced) a NEW that holds a file system, and always one
 * that is a current member.  Both run in a background
 * thread while the file system is in use, record their cursor in every
 * checkpoint (so a remount resumes them), end with a verification pass over
 * every extent block on the target, and only then let a checkpoint mark
 * the device in sync.  Also owns the check for image files that vanished
 * under a mounted fs.  The bitmap's persistence is wib.h's.
 *
 * Functions return 0 or -errno.
 */
#ifndef TWINFS_REBUILD_H
#define TWINFS_REBUILD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tfs;
struct super;

enum rebuild_state { RB_IDLE = 0, RB_RUNNING, RB_DONE, RB_FAILED, RB_CANCELLED };

struct rebuild_status {
	int state;			/* enum rebuild_state */
	int kind;			/* SUPER_RB_REBUILD / SUPER_RB_REPLACE, 0 if idle */
	int dev;			/* slot, -1 if idle */
	bool verifying;			/* copy done, verification pass running */
	uint64_t regions_total, regions_done;
	uint64_t bytes_total, bytes_done;	/* regions to visit, as bytes */
	uint64_t rate;			/* bytes/s over this run */
	uint64_t eta_s;
	uint64_t copied_blocks;		/* allocated blocks copied */
	uint64_t verified_blocks;	/* extent blocks verified on the target */
	uint64_t fixed_blocks;		/* bad copies rewritten by the verification */
	char error[512];
};

/* ---- mount / unmount (mount.c, fs.c) ---- */
/* After mirror_init and the device states: set up tracking, record the
 * device paths (for messages), and take back a device whose rebuild was
 * running (REBUILDING from the saved cursor). */
int rebuild_mount_init(struct tfs *fs, const char *const *slot_paths, char *err, size_t errlen);
/* After the mount's checkpoint: restart an interrupted rebuild. */
void rebuild_mount_resume(struct tfs *fs);
/* Stop the thread (leaving the rebuild recorded as running, so the next
 * mount resumes it). */
void rebuild_stop(struct tfs *fs);
/* Free everything (closes devices replaced while mounted). */
void rebuild_free(struct tfs *fs);

/* ---- commands (ctl_dev.c, tests) ---- */
/* dev: slot number, path, or dev uuid.  Paths are best absolute (the
 * daemon's cwd is /). */
int rebuild_start(struct tfs *fs, const char *dev, char *err, size_t errlen);
/* force: overwrite a NEW that holds a file system (never a current member). */
int rebuild_replace(struct tfs *fs, const char *old, const char *newpath, bool force,
		    char *err, size_t errlen);
int rebuild_cancel(struct tfs *fs);
/* The slot @name names: a number, the path it was mounted from (or another
 * name of that file), or its device uuid.  -ERANGE for a number that is no
 * slot, -ENOENT if none. */
int rebuild_find_slot(struct tfs *fs, const char *name);
/* Limit the pace (bytes of regions visited per second; 0: none). */
void rebuild_set_rate(struct tfs *fs, uint64_t bytes_per_s);
void rebuild_get_status(struct tfs *fs, struct rebuild_status *st);
/* Wait until no rebuild runs; returns the final state. */
int rebuild_wait(struct tfs *fs);

#endif
