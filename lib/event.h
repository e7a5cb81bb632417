/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * event: tell an administrator when something happens to the file system
 * (mdadm --monitor, ZFS's zed): a device failed or came back, a scrub or a
 * rebuild/replace ended, space runs low or is fine again, no device is
 * writable any more.
 *
 * Every event is logged once (one "event NAME ..." line through tfs_log).
 * With a command configured (-o event_cmd=PATH) it is also queued for a
 * dedicated thread that runs PATH once per event with the details in its
 * environment (TWINFS_EVENT, TWINFS_DEVICE, TWINFS_DETAIL...; see
 * docs/man/twinfs.8).  Emitting never blocks and never runs anything in the
 * caller's thread: the callers are FUSE workers, I/O completion threads,
 * scrub and rebuild threads, some holding locks.  The queue is bounded: an
 * event equal to one still waiting (same name and device) is merged into
 * it (TWINFS_COUNT), and one that finds the queue full is dropped, counted
 * and reported with the next one delivered (TWINFS_DROPPED).  A command
 * runs in its own process group; one that runs past the timeout is killed
 * (the whole group) and reaped, so a hanging script costs the daemon
 * nothing but the events queued behind it.
 *
 * Functions return 0 or -errno; event_emit and friends return nothing
 * (an event that cannot be delivered is logged, never an error for the
 * operation that caused it).
 */
#ifndef TWINFS_EVENT_H
#define TWINFS_EVENT_H

#include <stdbool.h>
#include <stdint.h>

struct tfs;

enum event_kind {
	EV_DEVICE_FAILED = 0,	/* failed while mounted, or missing/stale at mount */
	EV_DEVICE_ONLINE,	/* back in sync (after a rebuild or replace) */
	EV_SCRUB_DONE,		/* finished or canceled; counts say what it found */
	EV_REBUILD_DONE,
	EV_REPLACE_DONE,
	EV_REBUILD_FAILED,	/* a rebuild or a replace */
	EV_SPACE_LOW,		/* used crossed EVENT_SPACE_LOW_PCT */
	EV_SPACE_OK,		/* and fell below EVENT_SPACE_OK_PCT again */
	EV_FS_UNUSABLE,		/* no device left that takes writes */
	EV_CHECKPOINT_FAILED,	/* a background checkpoint failed (rate-limited) */
	EV_UNRECOVERABLE,	/* a read found no good copy (rate-limited per device) */
	EV_FS_FAILED,		/* a metadata change failed in memory: read-only */
	EV_KINDS
};

/* Space hysteresis: low at or above LOW, fine again below OK. */
#define EVENT_SPACE_LOW_PCT 90
#define EVENT_SPACE_OK_PCT 85
#define EVENT_QUEUE_MAX 64
#define EVENT_TIMEOUT_DEFAULT_S 30
/* Unmount waits at most this long for queued events to be delivered. */
#define EVENT_CLOSE_WAIT_S 5

/* What an event carries beyond its name.  Counts are passed to the command
 * for the kinds that have them (scrub, rebuild, replace: errors found and
 * repaired; space: used_pct). */
struct event {
	int kind;		/* enum event_kind */
	int slot;		/* device slot, -1: the whole file system */
	int state;		/* device_failed: enum mirror_dev_state */
	uint64_t csum_errors, repaired, unrecoverable, read_errors;
	unsigned used_pct;
};

/* "device_failed", "scrub_done"... (the TWINFS_EVENT value). */
const char *event_name(int kind);

/* Set up fs's events (tfs_mount, once the device states are known):
 * cmd NULL logs events only.  Emits device_failed for every device that is
 * not in sync already.  0 or -errno (-EINVAL: cmd not absolute). */
int event_open(struct tfs *fs, const char *cmd, const char *mountpoint, unsigned timeout_s);
/* Deliver what is queued (at most EVENT_CLOSE_WAIT_S), stop the thread,
 * free.  Safe when event_open was never called. */
void event_close(struct tfs *fs);

/* Log and queue one event; detail is one human line. */
void event_emit(struct tfs *fs, const struct event *e, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* The mirror's state hook: device_failed, and fs_unusable when it was the
 * last writable device. */
void event_dev_state(struct tfs *fs, unsigned dev, int state, int err);
/* The mirror's unrecoverable hook: no copy of blk verifies (data or a
 * tree node: the read failed with EIO or EUCLEAN). */
/* A metadata transaction failed in memory (apply.c): the mount is
 * read-only and writes no checkpoint; once per mount. */
void event_fs_failed(struct tfs *fs, const char *what, int err);
void event_unrecoverable(void *ctx, unsigned dev, uint64_t blk);
/* scrub_done with what the scrub found (state: "finished", "canceled");
 * nodes: format v2's tree nodes checked, repaired (copies), unrecoverable
 * (NULL: version 1, not said). */
struct scrub_nodes_ev {
	uint64_t checked, repaired, unrecoverable;
};
void event_scrub_done(struct tfs *fs, const char *state, uint64_t csum_errors,
		      uint64_t repaired, uint64_t unrecoverable, uint64_t read_errors,
		      const struct scrub_nodes_ev *nodes);
/* rebuild_done / replace_done (then device_online), or rebuild_failed
 * when err < 0. */
void event_rebuild_end(struct tfs *fs, unsigned dev, bool replace, int err, uint64_t copied,
		       uint64_t verified, uint64_t fixed);
/* Compare used space with the thresholds; emits space_low / space_ok on a
 * crossing.  Cheap (two atomic loads): callable on the allocation path. */
void event_space_check(struct tfs *fs);

/* Events dropped because the queue was full (tests, stats). */
uint64_t event_dropped(struct tfs *fs);

#endif
