// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ctl_dev: control commands for devices: "rebuild DEV", "replace OLD NEW",
 * "rebuild status", "rebuild cancel" (also spelled "replace status/cancel":
 * one job slot serves both), and "clear [DEV]", which zeroes the error
 * counters (zpool clear, btrfs device stats -z).  The work runs in rebuild.c's
 * background thread; these commands start it and report its progress as
 * one JSON object (state, kind, dev, percent, bytes, rate, ETA, counts).
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "ckpt.h"
#include "ctl.h"
#include "fs_i.h"
#include "json.h"
#include "rebuild.h"

static const char *const state_names[] = {
	[RB_IDLE] = "idle", [RB_RUNNING] = "running", [RB_DONE] = "done",
	[RB_FAILED] = "failed", [RB_CANCELLED] = "cancelled",
};

static void put_status(struct tfs *fs, struct jbuf *j)
{
	struct rebuild_status st;

	rebuild_get_status(fs, &st);
	jb_str(j, "state", st.state >= 0 && st.state <= RB_CANCELLED ? state_names[st.state]
								       : "unknown");
	jb_str(j, "kind", st.kind == SUPER_RB_REPLACE ? "replace" :
			  st.kind == SUPER_RB_REBUILD ? "rebuild" : NULL);
	jb_i64(j, "dev", st.dev);
	if (st.dev >= 0 && (unsigned)st.dev < fs->mirror.ndevs) {
		const struct dev *d = fs->mirror.devs[st.dev];

		jb_str(j, "path", d ? d->path : NULL);
		jb_str(j, "dev_state", mirror_state_name(atomic_load(&fs->mirror.state[st.dev])));
	}
	jb_str(j, "phase", st.state != RB_RUNNING ? NULL : st.verifying ? "verify" : "copy");
	jb_double(j, "percent", st.bytes_total ? 100.0 * (double)st.bytes_done /
						 (double)st.bytes_total :
			       st.state == RB_DONE ? 100.0 : 0.0);
	jb_u64(j, "bytes_done", st.bytes_done);
	jb_u64(j, "bytes_total", st.bytes_total);
	jb_u64(j, "rate", st.rate);
	jb_u64(j, "eta_s", st.eta_s);
	jb_u64(j, "regions_done", st.regions_done);
	jb_u64(j, "regions_total", st.regions_total);
	jb_u64(j, "copied_blocks", st.copied_blocks);
	jb_u64(j, "verified_blocks", st.verified_blocks);
	jb_u64(j, "fixed_blocks", st.fixed_blocks);
	if (st.error[0])
		jb_str(j, st.state == RB_FAILED ? "error" : "last_error", st.error);
}

static int cmd_status(struct tfs *fs, int argc, char **argv, struct jbuf *out)
{
	if (argc != 0) {
		jb_error(out, "usage: rebuild status");
		return -EINVAL;
	}
	put_status(fs, out);
	return 0;
}

static int cmd_cancel(struct tfs *fs, int argc, char **argv, struct jbuf *out)
{
	int ret;

	if (argc != 0) {
		jb_error(out, "usage: rebuild cancel");
		return -EINVAL;
	}
	ret = rebuild_cancel(fs);
	if (ret == -ENOENT) {
		jb_error(out, "no rebuild or replace is running");
		return ret;
	}
	put_status(fs, out);
	return ret;
}

static int cmd_rebuild(struct tfs *fs, int argc, char **argv, struct jbuf *out)
{
	char err[512] = "";
	int ret;

	if (argc != 1) {
		jb_error(out, "usage: rebuild DEV (slot number, path or device uuid)");
		return -EINVAL;
	}
	ret = rebuild_start(fs, argv[0], err, sizeof(err));
	if (ret < 0) {
		jb_error(out, "%s", err[0] ? err : "cannot start the rebuild");
		return ret;
	}
	put_status(fs, out);
	return 0;
}

static int cmd_replace(struct tfs *fs, int argc, char **argv, struct jbuf *out)
{
	char err[512] = "";
	bool force = false;
	char *arg[2];
	int n = 0, ret;

	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--force"))
			force = true;
		else if (n < 2)
			arg[n++] = argv[i];
		else
			n = 3;
	}
	if (n != 2) {
		jb_error(out, "usage: replace OLD NEW [--force] (OLD: slot number, path or "
			 "device uuid)");
		return -EINVAL;
	}
	ret = rebuild_replace(fs, arg[0], arg[1], force, err, sizeof(err));
	if (ret < 0) {
		jb_error(out, "%s", err[0] ? err : "cannot start the replace");
		return ret;
	}
	put_status(fs, out);
	return 0;
}

/*
 * clear [DEV]: zero the error counters of DEV (every device without one)
 * and forget the losses counted on it, so a block still lost is counted
 * again when next met.  The counters live in the superblock, so a
 * checkpoint commits the zeros before the reply: the clear survives a
 * remount, and a crash before the commit leaves the old counters (never a
 * mix: the superblock is written whole).  Device states are not touched
 * (a rebuild does that).  Replies with what each device had.
 */
static int cmd_clear(struct tfs *fs, int argc, char **argv, struct jbuf *out)
{
	struct mirror_errs was[DEV_MAX];
	unsigned from = 0, to = fs->ndevs;
	int ret;

	if (argc > 1) {
		jb_error(out, "usage: clear [DEV] (slot number, path or device uuid)");
		return -EINVAL;
	}
	if (argc == 1) {
		ret = rebuild_find_slot(fs, argv[0]);
		if (ret < 0) {
			jb_error(out, "no device '%s' in this file system (slots 0 to %u)",
				 argv[0], fs->ndevs - 1);
			return -ENOENT;
		}
		from = (unsigned)ret;
		to = from + 1;
	}
	if (fs->readonly || !fs->log) {
		jb_error(out, "the file system is read-only: the counters are kept in the "
			 "superblock, which it does not write");
		return -EROFS;
	}
	for (unsigned d = from; d < to; d++)
		mirror_clear_counters(&fs->mirror, d, &was[d]);
	ret = ckpt_write(fs);
	if (ret < 0) {
		jb_error(out, "counters cleared in memory, but the superblock that keeps "
			 "them was not written (%s): a remount brings them back",
			 strerror(-ret));
		return ret;
	}
	jb_arr_begin(out, "cleared");
	for (unsigned d = from; d < to; d++) {
		const struct dev *dv = fs->mirror.devs[d];

		jb_obj_begin(out, NULL);
		jb_u64(out, "index", d);
		jb_str(out, "path", dv ? dv->path : NULL);
		ctl_errs_json(out, &was[d]);
		jb_obj_end(out);
	}
	jb_arr_end(out);
	jb_str(out, "state", ctl_state(fs));
	return 0;
}

const struct ctl_cmd ctl_dev_cmds[] = {
	{ "clear", "clear [DEV]", cmd_clear },
	{ "rebuild status", "rebuild status", cmd_status },
	{ "rebuild cancel", "rebuild cancel", cmd_cancel },
	{ "replace status", "replace status", cmd_status },
	{ "replace cancel", "replace cancel", cmd_cancel },
	{ "rebuild", "rebuild DEV", cmd_rebuild },
	{ "replace", "replace OLD NEW [--force]", cmd_replace },
	{ NULL, NULL, NULL },
};
