/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * scrub: verify every allocated block on every mirror in a background
 * thread and rewrite bad copies from a good one.
 *
 * Order: the current checkpoint (table checked against the superblock per
 * device, payload against the table), then every regular file in inode
 * order, its mapped blocks in chunks of SCRUB_CHUNK blocks.  A chunk is
 * read under the file's range lock held shared, so writers of that range
 * wait for one chunk at most and everything else keeps going.  Each
 * healthy device's copy is read separately and verified; a bad copy is
 * rewritten from a verified one (counted csum_err + repaired on that
 * device); a block no copy verifies is counted unrecoverable and recorded
 * as (inode, file offset), named by path when the scrub ends.
 *
 * The cursor (inode, file block) and the running totals live in the
 * superblock (struct super_scrub), written by every checkpoint: a scrub
 * that was running at unmount (or crash) resumes from its cursor at the
 * next mount.
 *
 * Functions return 0 or -errno.  Thread-safe.
 */
#ifndef TWINFS_SCRUB_H
#define TWINFS_SCRUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SCRUB_CHUNK 256u		/* blocks per locked chunk (1 MiB) */
#define SCRUB_BAD_MAX 1024u		/* unrecoverable blocks listed (all counted) */

struct tfs;
struct super;
struct jbuf;

/* Public states (status); match enum super_scrub_state. */
enum scrub_state {
	SCRUB_NONE = 0,		/* never ran */
	SCRUB_RUNNING = 1,
	SCRUB_FINISHED = 2,
	SCRUB_CANCELED = 3,
};

struct scrub_status {
	int state;			/* enum scrub_state */
	bool resumed;			/* this run continued one from an earlier mount */
	uint64_t bytes_done, bytes_total;	/* allocated bytes verified / to verify */
	uint64_t bytes_run;		/* verified by this run (since start/resume) */
	double elapsed_s;		/* of this run */
	double rate_bps;		/* average of this run */
	double eta_s;			/* -1 when unknown */
	uint64_t rate_limit;		/* bytes/s, 0 none */
	uint64_t started_ns, finished_ns;	/* CLOCK_REALTIME */
	uint64_t csum_err, repaired, unrecoverable, read_err;
	uint64_t cursor_ino, cursor_fblk;
	size_t nbad;			/* entries listed (<= SCRUB_BAD_MAX) */
};

/* Mount/unmount plumbing (fs.c). */
int scrub_init(struct tfs *fs);		/* after fs->sb is loaded */
/* Restart a scrub the superblock says was running. */
int scrub_mount_resume(struct tfs *fs);
/* Stop the thread, keeping a running scrub's state RUNNING (it resumes at
 * the next mount); the final checkpoint then persists the cursor. */
void scrub_shutdown(struct tfs *fs);
void scrub_free(struct tfs *fs);

/* rate: bytes/s, 0 for no limit.  -EBUSY if one is running, -EROFS. */
int scrub_start(struct tfs *fs, uint64_t rate);
/* -ENOENT if none is running. */
int scrub_cancel(struct tfs *fs);
int scrub_set_rate(struct tfs *fs, uint64_t rate);
/* Wait until the thread (if any) has ended. */
int scrub_wait(struct tfs *fs);
int scrub_get_status(struct tfs *fs, struct scrub_status *st);
/* Unrecoverable block i (< st.nbad): inode, byte offset in the file and
 * path ("<ino N>" for an inode no directory names; empty while running). */
int scrub_get_bad(struct tfs *fs, size_t i, uint64_t *ino, uint64_t *off, char *path,
		  size_t pathlen);
/* Status as JSON members of the current object (ctl). */
void scrub_status_json(struct tfs *fs, struct jbuf *j);
const char *scrub_state_name(int state);

/* Path of inode ino by walking the directory tree from the root ("/a/b");
 * "<ino N>" when no directory names it.  0 or -ENOMEM. */
int scrub_ino_path(struct tfs *fs, uint64_t ino, char *out, size_t outlen);

#endif
