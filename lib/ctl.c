// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ctl: the control-channel dispatcher (tfs_ctl) and the core commands:
 * status, stats, scrub start/status/cancel, checkpoint, help.  Device commands
 * (rebuild, replace) live in ctl_dev.c's table; tfs_ctl searches both and
 * takes the longest matching command name, so "scrub status" wins over a
 * hypothetical "scrub".
 *
 * Every reply is one JSON object: the command's members, or {"error": ...,
 * "errno": N} on failure.  Commands run in the caller's thread (a FUSE
 * worker) and must not block for long: long jobs are background threads.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_v2.h"
#include "bcache.h"
#include "btree.h"
#include "ckpt_v2.h"
#include "ctl.h"
#include "discard.h"
#include "extcache.h"
#include "fs_i.h"
#include "fspace.h"
#include "json.h"
#include "rebuild.h"
#include "scrub.h"
#include "v2dirty.h"

#define CTL_ARGV_MAX 32

/* ---- helpers ---- */

static const char *dev_state_name(int state)
{
	switch (state) {
	case MDEV_OK: return "ONLINE";
	case MDEV_MISSING: return "MISSING";
	case MDEV_FAILED: return "FAILED";
	case MDEV_STALE: return "STALE";
	case MDEV_REBUILDING: return "REBUILDING";
	default: return "UNKNOWN";
	}
}

int ctl_parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	if (!*s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	switch (toupper((unsigned char)*end)) {
	case '\0': break;
	case 'K': shift = 10; end++; break;
	case 'M': shift = 20; end++; break;
	case 'G': shift = 30; end++; break;
	case 'T': shift = 40; end++; break;
	default: return -EINVAL;
	}
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

void ctl_errs_json(struct jbuf *j, const struct mirror_errs *e)
{
	jb_u64(j, "read_errors", e->read_err);
	jb_u64(j, "write_errors", e->write_err);
	jb_u64(j, "flush_errors", e->flush_err);
	jb_u64(j, "csum_errors", e->csum_err);
	jb_u64(j, "repaired", e->repaired);
	jb_u64(j, "unrecoverable", e->unrecoverable);
}

static void counters_json(struct tfs *fs, unsigned i, struct jbuf *j)
{
	const struct mirror_counters *c = &fs->mirror.ctr[i];
	struct mirror_errs e = {
		.read_err = atomic_load(&c->read_err), .write_err = atomic_load(&c->write_err),
		.flush_err = atomic_load(&c->flush_err), .csum_err = atomic_load(&c->csum_err),
		.repaired = atomic_load(&c->repaired),
		.unrecoverable = atomic_load(&c->unrecoverable),
	};

	ctl_errs_json(j, &e);
	jb_u64(j, "reads", atomic_load(&c->reads));
	jb_u64(j, "read_bytes", atomic_load(&c->read_bytes));
}

static void devices_json(struct tfs *fs, const struct super *sb, struct jbuf *j)
{
	jb_arr_begin(j, "devices");
	for (unsigned i = 0; i < fs->mirror.ndevs; i++) {
		struct dev *d = fs->mirror.devs[i];
		char u[37], p[PATH_MAX];

		jb_obj_begin(j, NULL);
		jb_u64(j, "index", i);
		/* A missing device by the path it is expected at. */
		jb_str(j, "path", d ? d->path : mirror_slot_path(&fs->mirror, i, p, sizeof(p)) ? p : NULL);
		super_uuid_str(sb->dev_uuids[i], u);
		jb_str(j, "uuid", u);
		jb_str(j, "state", dev_state_name(atomic_load(&fs->mirror.state[i])));
		jb_str(j, "discard", d ? dev_discard_name(atomic_load(&d->discard)) : "unknown");
		counters_json(fs, i, j);
		jb_obj_end(j);
	}
	jb_arr_end(j);
}

static void sb_snapshot(struct tfs *fs, struct super *sb)
{
	pthread_mutex_lock(&fs->ckpt_mu);
	*sb = fs->sb;
	pthread_mutex_unlock(&fs->ckpt_mu);
}

/* Format v2's checkpoint: free-space group bitmaps and its journal of
 * reference changes (0 on v1). */
static void ckpt_mem_json(struct tfs *fs, struct jbuf *j)
{
	jb_u64(j, "group_bitmap_bytes", fs->v2fsp ? fspace_loaded_bytes(fs->v2fsp) : 0);
	jb_u64(j, "ref_journal_bytes", fs->v2av ? alloc_v2_mem_bytes(fs->v2av) : 0);
}

static void space_json(struct tfs *fs, struct jbuf *j)
{
	uint64_t total = alloc_total_blocks(fs->alloc);
	uint64_t free_ = alloc_free_blocks(fs->alloc);
	uint64_t reserve = alloc_reserve_blocks(fs->alloc);

	jb_u64(j, "block_size", TFS_BLOCK_SIZE);
	jb_u64(j, "size_bytes", total * TFS_BLOCK_SIZE);
	jb_u64(j, "used_bytes", (total - free_) * TFS_BLOCK_SIZE);
	jb_u64(j, "free_bytes", free_ * TFS_BLOCK_SIZE);
	jb_u64(j, "available_bytes", (free_ > reserve ? free_ - reserve : 0) * TFS_BLOCK_SIZE);
}

const char *ctl_state(struct tfs *fs)
{
	bool healthy = true;

	/* As status -x judges it (twinfs-ctl.c, status_health): a device
	 * not ONLINE, or a block no copy verified (the counters are kept on
	 * disk until twinfs-ctl clear), is not healthy. */
	for (unsigned i = 0; i < fs->mirror.ndevs; i++)
		if (atomic_load(&fs->mirror.state[i]) != MDEV_OK ||
		    atomic_load(&fs->mirror.ctr[i].unrecoverable))
			healthy = false;
	if (atomic_load(&fs->unusable))
		return "UNUSABLE";
	/* A metadata change failed in memory (apply.c): read-only, no
	 * checkpoint, until a mount replays the log. */
	if (atomic_load(&fs->unlogged))
		return "FAILED";
	return healthy ? "HEALTHY" : "DEGRADED";
}

/* Why the mount refuses changes, "" when it takes them. */
static const char *ro_reason(struct tfs *fs)
{
	if (atomic_load(&fs->unusable))
		return "no device can take writes";
	if (atomic_load(&fs->unlogged))
		return "a metadata change failed";
	return fs->readonly ? "mounted read-only" : "";
}

/* ---- commands ---- */

/* The format v2 inode cache: resident inodes, the budget, fault-ins (and
 * those that found no inode) and evictions since mount, the lookup stubs of dropped inodes and their
 * table's bytes (zeros and lazy false otherwise). */
static void icache_json(struct tfs *fs, struct jbuf *j)
{
	struct icache_stats st;

	icache_stats(fs, &st);
	jb_obj_begin(j, "icache");
	jb_bool(j, "lazy", st.lazy);
	jb_u64(j, "resident", st.resident);
	jb_u64(j, "max", st.max);
	jb_u64(j, "faults", st.faults);
	jb_u64(j, "absent", st.absent);
	jb_u64(j, "evictions", st.evictions);
	jb_u64(j, "stubs", st.stubs);
	jb_u64(j, "stub_bytes", st.stub_bytes);
	jb_u64(j, "prefetch_reads", st.prefetch_reads);
	jb_obj_end(j);
}

static void u64_array(struct jbuf *j, const char *name, const uint64_t *v, unsigned n)
{
	jb_arr_begin(j, name);
	for (unsigned i = 0; i < n; i++)
		jb_u64(j, NULL, v[i]);
	jb_arr_end(j);
}

/* Format v2: the three trees' node work since mount (btree.h); the
 * arrays by level, leaves first. */
static void btree_json(struct tfs *fs, struct jbuf *j)
{
	struct bt_stats st = { 0 };

	if (!fs->v2 || !fs->v2fsp)
		return;
	bt_stats_add(ckpt_v2_inodes(fs), &st);
	bt_stats_add(ckpt_v2_refs(fs), &st);
	bt_stats_add(fspace_tree(fs->v2fsp), &st);
	jb_obj_begin(j, "btree");
	jb_u64(j, "cows", st.cows);
	jb_u64(j, "splits", st.splits);
	u64_array(j, "splits_by_level", st.splits_lvl, BNODE_MAX_LEVEL);
	jb_u64(j, "merges", st.merges);
	jb_u64(j, "rebalances", st.rebalances);
	jb_u64(j, "nodes_written", st.written);
	u64_array(j, "nodes_written_by_level", st.written_lvl, BNODE_MAX_LEVEL);
	jb_u64(j, "node_bytes_written", st.written_blocks * TFS_BLOCK_SIZE);
	/* Leaves read ahead of their use (cold find, replay, checkpoint). */
	jb_u64(j, "prefetched", st.prefetched);
	jb_obj_end(j);
}

/* Format v2: the node cache (bcache.h): misses are nodes read from the
 * devices. */
static void node_cache_json(struct tfs *fs, struct jbuf *j)
{
	struct bcache_stats st;

	if (!ckpt_v2_node_cache_stats(fs, &st))
		return;
	jb_obj_begin(j, "node_cache");
	jb_u64(j, "budget_bytes", st.budget);
	jb_u64(j, "nodes", st.nodes);
	jb_u64(j, "bytes", st.bytes);
	jb_u64(j, "dirty_bytes", st.dirty_bytes);	/* a checkpoint's, pinned until it commits */
	jb_u64(j, "max_bytes", st.max_bytes);		/* the most since mount */
	jb_u64(j, "max_dirty_bytes", st.max_dirty_bytes);
	jb_u64(j, "spares_cold", st.spares_cold);
	jb_u64(j, "hits", st.hits);
	jb_u64(j, "misses", st.misses);
	jb_u64(j, "evictions", st.evictions);
	jb_obj_end(j);
}

/* Format v2: the files' map leaves in memory (extcache.h). */
static void extcache_json(struct tfs *fs, struct jbuf *j)
{
	struct extcache_stats st;

	if (!fs->xc)
		return;
	extcache_stats(fs->xc, &st);
	jb_obj_begin(j, "extent_cache");
	jb_u64(j, "budget_bytes", st.budget);
	jb_u64(j, "leaves", st.leaves);
	jb_u64(j, "bytes", st.bytes);
	jb_u64(j, "compact", st.compact);
	jb_u64(j, "compact_bytes", st.compact_bytes);
	jb_u64(j, "compactions", st.compactions);
	jb_u64(j, "expansions", st.expansions);
	jb_u64(j, "compact_drops", st.compact_drops);
	jb_u64(j, "inner_bytes", st.inner_bytes);
	jb_u64(j, "inner_freed", st.inner_freed);
	jb_u64(j, "faults", st.faults);
	jb_u64(j, "empty_faults", st.empty_faults);
	jb_u64(j, "evictions", st.evictions);
	jb_u64(j, "fault_errors", st.fault_errors);
	jb_u64(j, "src_redone", st.src_redone);
	jb_obj_end(j);
}

/* Format v2: the dirty budget (dbudget.c): what the changes since the
 * last checkpoint hold now, by part, the budget's two marks, and since
 * mount the most seen, the checkpoints it asked for and the writers that
 * waited for one (timeouts: waits that gave up). */
static void dirty_json(struct tfs *fs, struct jbuf *j)
{
	struct dirty_parts p;
	uint64_t total;

	if (!fs->v2)
		return;
	total = fs_dirty_bytes(fs, &p);
	jb_obj_begin(j, "dirty");
	jb_u64(j, "bytes", total);
	jb_u64(j, "leaf_bytes", p.leaves);
	jb_u64(j, "inode_bytes", p.inodes);
	jb_u64(j, "note_bytes", p.notes);
	jb_u64(j, "node_bytes", p.nodes);
	jb_u64(j, "soft_bytes", fs->dirty_soft);
	jb_u64(j, "hard_bytes", fs->dirty_hard);
	jb_u64(j, "node_budget_bytes", atomic_load(&fs->node_budget));
	jb_u64(j, "node_budget_min_bytes", atomic_load(&fs->node_budget_min));
	jb_u64(j, "max_bytes", atomic_load(&fs->dirty_max));
	jb_u64(j, "checkpoints", atomic_load(&fs->dirty_ckpts));
	jb_u64(j, "waits", atomic_load(&fs->dirty_waits));
	jb_u64(j, "wait_timeouts", atomic_load(&fs->dirty_wait_timeouts));
	/* Part commits of checkpoints: their nodes left the cache early. */
	jb_u64(j, "checkpoint_parts", atomic_load(&fs->ckpt_parts));
	/* Blocks of changed ranges whose EXTENT items a checkpoint kept
	 * (mapped as the map maps them) and rewrote (ckpt_v2ext.c). */
	jb_u64(j, "checkpoint_extent_blocks_kept", atomic_load(&fs->ckpt_ext_kept));
	jb_u64(j, "checkpoint_extent_blocks_rewritten", atomic_load(&fs->ckpt_ext_rewritten));
	/* Notes lost for want of memory, and the checkpoints that rebuilt
	 * their set from the log because of them (v2dirty.h). */
	jb_u64(j, "lost_notes", fs->v2dirty ? v2d_fails(fs->v2dirty) : 0);
	jb_u64(j, "lost_checkpoints", atomic_load(&fs->dirty_lost_ckpts));
	/* Format v2's node gate (fs.c): free node slots, what the next
	 * checkpoint may need of them, waits for one, changes refused. */
	{
		uint64_t free_slots, need;

		fs_node_gate_stats(fs, &free_slots, &need);
		jb_u64(j, "node_free_slots", free_slots);
		jb_u64(j, "node_need_slots", need);
		jb_u64(j, "node_gate_waits", atomic_load(&fs->node_gate_waits));
		jb_u64(j, "node_gate_enospc", atomic_load(&fs->node_gate_enospc));
		/* Slots held by changes admitted and not noted yet (0 when
		 * idle: more is a leak), waits for their release. */
		jb_u64(j, "node_gate_reserved", atomic_load(&fs->node_resv_touch) +
						 atomic_load(&fs->node_resv_other));
		jb_u64(j, "node_gate_resv_waits", atomic_load(&fs->node_resv_waits));
		/* The last checkpoint: slots the gate's arithmetic gave it and
		 * the slots it wrote; checkpoints that wrote more; background
		 * checkpoints that failed. */
		jb_u64(j, "checkpoint_slots_estimated", atomic_load(&fs->ckpt_slots_estimated));
		jb_u64(j, "checkpoint_slots_used", atomic_load(&fs->ckpt_slots_used));
		jb_u64(j, "checkpoint_slots_over", atomic_load(&fs->ckpt_slots_over));
		jb_u64(j, "checkpoint_failures", atomic_load(&fs->ckpt_bg_failures));
	}
	if (fs->v2dirty) {
		bool over = false;

		jb_u64(j, "deaths_kept", v2d_dead_kept(fs->v2dirty, &over));
		jb_u64(j, "deaths_lost", over);
	}
	jb_u64(j, "rebuilds", atomic_load(&fs->v2_rebuilds));
	jb_obj_end(j);
}

static int cmd_status(struct tfs *fs, int argc, char **argv, struct jbuf *j)
{
	struct super *sb = malloc(sizeof(*sb));
	char u[37];

	if (!sb)
		return -ENOMEM;
	sb_snapshot(fs, sb);
	super_uuid_str(sb->fs_uuid, u);
	jb_str(j, "fs_uuid", u);
	jb_str(j, "label", sb->label);
	jb_u64(j, "format_version", sb->version);
	jb_str(j, "state", ctl_state(fs));
	jb_u64(j, "writable_devices", mirror_healthy(&fs->mirror));	/* 0: unusable */
	jb_bool(j, "readonly", fs->readonly);
	jb_str(j, "readonly_reason", ro_reason(fs));
	jb_str(j, "backend", tfs_backend_name(fs));
	space_json(fs, j);
	jb_u64(j, "inodes", fs_ninodes(fs));
	icache_json(fs, j);
	/* What the mount cost: extent runs walked to rebuild the allocator
	 * (0 when format v2 loaded it from the trees). */
	jb_obj_begin(j, "mount");
	jb_u64(j, "extent_runs_walked", fs->mount_extent_runs);
	jb_u64(j, "alloc_from_trees", fs->mount_alloc_trees);
	jb_u64(j, "inodes_walked", fs->mount_inodes_walked);
	jb_u64(j, "alloc_ns", fs->mount_alloc_ns);
	jb_u64(j, "ckpt_load_ns", fs->mount_ckpt_ns);
	jb_u64(j, "replay_ns", fs->mount_replay_ns);
	jb_u64(j, "replay_records", fs->mount_replay_records);
	jb_u64(j, "replay_log_blocks", fs->mount_replay_blocks);
	jb_u64(j, "replay_prefetched", fs->mount_replay_prefetched);
	jb_u64(j, "ckpt_write_ns", fs->mount_ckpt_write_ns);
	jb_u64(j, "replay_pending", fs->mount_replay_pending);
	jb_u64(j, "pending_late", fs->mount_pend_late);
	/* -o lazyreplay: served without a checkpoint (the log continued);
	 * whether that continuation is still pending, no checkpoint since. */
	jb_u64(j, "log_continued", fs->mount_continued);
	jb_u64(j, "log_cont_pending", super_log_cont(sb));
	jb_obj_end(j);
	devices_json(fs, sb, j);
	jb_obj_begin(j, "scrub");
	scrub_status_json(fs, j);
	jb_obj_end(j);
	discard_stats_json(fs, j);	/* what was given back, data and nodes */
	free(sb);
	return 0;
}

void tfs_log_stats(struct tfs *fs, struct log_stats *st)
{
	log_get_stats(fs->log, st);
}

void tfs_note_setattr_wait(struct tfs *fs)
{
	atomic_fetch_add(&fs->setattr_waits, 1);
}

void tfs_note_release_deferred(struct tfs *fs)
{
	atomic_fetch_add(&fs->releases_deferred, 1);
}

static int cmd_stats(struct tfs *fs, int argc, char **argv, struct jbuf *j)
{
	struct super *sb = malloc(sizeof(*sb));
	struct log_stats ls;

	if (!sb)
		return -ENOMEM;
	sb_snapshot(fs, sb);
	jb_str(j, "backend", tfs_backend_name(fs));
	jb_u64(j, "inodes", fs_ninodes(fs));
	jb_u64(j, "next_ino", atomic_load(&fs->next_ino));
	icache_json(fs, j);
	jb_u64(j, "commit_ms", fs->commit_ms);
	jb_obj_begin(j, "space");
	space_json(fs, j);
	jb_u64(j, "reserve_bytes", alloc_reserve_blocks(fs->alloc) * TFS_BLOCK_SIZE);
	jb_u64(j, "deferred_free_bytes", alloc_deferred_blocks(fs->alloc) * TFS_BLOCK_SIZE);
	jb_u64(j, "alloc_errors", alloc_errors(fs->alloc));
	jb_u64(j, "alloc_pending", alloc_pending_blocks(fs->alloc));
	/* The block maps' memory: the allocator's, and format v2's
	 * checkpoint accounting copy (0 on v1). */
	jb_u64(j, "alloc_bitmap_bytes", alloc_bitmap_bytes(fs->alloc));
	jb_u64(j, "accounting_bitmap_bytes", fs->v2acct ? alloc_bitmap_bytes(fs->v2acct) : 0);
	ckpt_mem_json(fs, j);
	jb_obj_end(j);
	jb_obj_begin(j, "log");
	tfs_log_stats(fs, &ls);
	jb_u64(j, "appends", ls.appends);
	jb_u64(j, "commits", ls.commits);
	jb_u64(j, "chunks", ls.chunks);
	jb_u64(j, "chunk_blocks", ls.chunk_blocks);
	jb_u64(j, "space_waits", ls.space_waits);
	jb_u64(j, "errors", ls.errors);
	jb_u64(j, "region_blocks", sb->log_blocks);
	jb_obj_end(j);
	jb_obj_begin(j, "checkpoint");
	jb_u64(j, "generation", sb->generation);
	jb_u64(j, "start", sb->ckpt_start);
	jb_u64(j, "blocks", sb->ckpt_blocks);
	jb_u64(j, "bytes", sb->ckpt_bytes);
	jb_u64(j, "seq", sb->ckpt_seq);
	/* since mount: the cost of checkpoints (bytes per mirror) */
	jb_u64(j, "writes", atomic_load(&fs->ckpt_writes));
	jb_u64(j, "written_bytes", atomic_load(&fs->ckpt_written_blocks) * TFS_BLOCK_SIZE);
	jb_obj_end(j);
	extcache_json(fs, j);
	node_cache_json(fs, j);
	btree_json(fs, j);
	dirty_json(fs, j);
	/* Reads in the daemon at once (tfs_read_async to the reply): since
	 * mount, the most, and now. */
	jb_obj_begin(j, "reads");
	jb_u64(j, "in_flight_max", atomic_load(&fs->reads_in_flight_max));
	jb_u64(j, "in_flight", atomic_load(&fs->reads_in_flight));
	jb_obj_end(j);
	jb_obj_begin(j, "bounce");
	jb_u64(j, "buf_size", fs->bounce ? bounce_buf_size(fs->bounce) : 0);
	jb_u64(j, "trimmed", fs->bounce ? bounce_trimmed(fs->bounce) : 0);
	jb_u64(j, "small_trimmed", fs->bounce_small ? bounce_trimmed(fs->bounce_small) : 0);
	jb_obj_end(j);
	/* A setattr (tar's utimens) need not wait for the file's writes
	 * behind: how often one still did, and how often a write's publish
	 * left a later setattr's mtime alone; releases answered while the
	 * file's writes were still behind (not waiting for them). */
	jb_obj_begin(j, "write_behind");
	jb_u64(j, "setattr_waits", atomic_load(&fs->setattr_waits));
	jb_u64(j, "mtime_kept", atomic_load(&fs->mtime_kept));
	jb_u64(j, "releases_deferred", atomic_load(&fs->releases_deferred));
	jb_obj_end(j);
	devices_json(fs, sb, j);
	jb_obj_begin(j, "scrub");
	scrub_status_json(fs, j);
	jb_obj_end(j);
	discard_stats_json(fs, j);
	free(sb);
	return 0;
}

static int cmd_scrub_start(struct tfs *fs, int argc, char **argv, struct jbuf *j)
{
	uint64_t rate = 0;
	int ret;

	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];

		if (!strncmp(a, "rate=", 5))
			a += 5;
		if (ctl_parse_size(a, &rate) < 0) {
			jb_error(j, "bad argument '%s' (want rate=N[KMG], bytes per second)",
				 argv[i]);
			return -EINVAL;
		}
	}
	ret = scrub_start(fs, rate);
	if (ret == -EBUSY) {
		jb_error(j, "a scrub is already running");
		return ret;
	}
	if (ret == -EROFS) {
		jb_error(j, "the file system is read-only");
		return ret;
	}
	if (ret < 0)
		return ret;
	scrub_status_json(fs, j);
	return 0;
}

static int cmd_scrub_status(struct tfs *fs, int argc, char **argv, struct jbuf *j)
{
	scrub_status_json(fs, j);
	return 0;
}

static int cmd_scrub_cancel(struct tfs *fs, int argc, char **argv, struct jbuf *j)
{
	int ret = scrub_cancel(fs);

	if (ret == -ENOENT) {
		jb_error(j, "no scrub is running");
		return ret;
	}
	if (ret < 0)
		return ret;
	jb_bool(j, "canceled", true);
	return 0;
}

/* Write a checkpoint now (tests and benchmarks measure what one costs). */
static int cmd_checkpoint(struct tfs *fs, int argc, char **argv, struct jbuf *j)
{
	int ret;

	if (argc)
		return -EINVAL;
	if (fs->readonly || !fs->log)
		return -EROFS;
	ret = ckpt_write(fs);
	if (ret < 0)
		return ret;
	jb_u64(j, "writes", atomic_load(&fs->ckpt_writes));
	jb_u64(j, "written_bytes", atomic_load(&fs->ckpt_written_blocks) * TFS_BLOCK_SIZE);
	return 0;
}

static int cmd_help(struct tfs *fs, int argc, char **argv, struct jbuf *j);

const struct ctl_cmd ctl_core_cmds[] = {
	{ "status", "status", cmd_status },
	{ "stats", "stats", cmd_stats },
	{ "scrub start", "scrub start [rate=N[KMG]]", cmd_scrub_start },
	{ "scrub status", "scrub status", cmd_scrub_status },
	{ "scrub cancel", "scrub cancel", cmd_scrub_cancel },
	{ "checkpoint", "checkpoint", cmd_checkpoint },
	{ "help", "help", cmd_help },
	{ NULL, NULL, NULL },
};

static const struct ctl_cmd *const ctl_tables[] = { ctl_core_cmds, ctl_dev_cmds,
						     ctl_discard_cmds };

static int cmd_help(struct tfs *fs, int argc, char **argv, struct jbuf *j)
{
	jb_arr_begin(j, "commands");
	for (size_t t = 0; t < sizeof(ctl_tables) / sizeof(ctl_tables[0]); t++)
		for (const struct ctl_cmd *c = ctl_tables[t]; c->name; c++)
			jb_str(j, NULL, c->usage ? c->usage : c->name);
	jb_arr_end(j);
	return 0;
}

/* ---- dispatch ---- */

/* Number of words of name if argv starts with them, else 0. */
static int match_words(const char *name, int argc, char **argv)
{
	int k = 0;

	while (*name) {
		size_t n = strcspn(name, " ");

		if (k >= argc || strlen(argv[k]) != n || memcmp(argv[k], name, n) != 0)
			return 0;
		k++;
		name += n;
		while (*name == ' ')
			name++;
	}
	return k;
}

int tfs_ctl(struct tfs *fs, const char *cmdline, char *out, size_t outlen)
{
	char *line = strdup(cmdline ? cmdline : "");
	char *argv[CTL_ARGV_MAX], *save = NULL, *w;
	const struct ctl_cmd *best = NULL;
	int argc = 0, bestk = 0, ret;
	struct jbuf j;

	if (!line)
		return -ENOMEM;
	for (w = strtok_r(line, " \t\n", &save); w && argc < CTL_ARGV_MAX;
	     w = strtok_r(NULL, " \t\n", &save))
		argv[argc++] = w;

	for (size_t t = 0; t < sizeof(ctl_tables) / sizeof(ctl_tables[0]); t++) {
		for (const struct ctl_cmd *c = ctl_tables[t]; c->name; c++) {
			int k = match_words(c->name, argc, argv);

			if (k > bestk) {
				best = c;
				bestk = k;
			}
		}
	}

	jb_init(&j, out, outlen);
	jb_obj_begin(&j, NULL);
	if (!best) {
		jb_error(&j, argc ? "unknown command '%s' (try 'help')" : "empty command (try 'help')",
			 argc ? argv[0] : "");
		ret = -EINVAL;
	} else {
		ret = best->fn(fs, argc - bestk, argv + bestk, &j);
		if (ret < 0 && !j.has_error)
			jb_error(&j, "%s: %s", best->name, strerror(-ret));
	}
	if (ret < 0)
		jb_i64(&j, "errno", -ret);
	jb_obj_end(&j);
	if (jb_finish(&j) < 0) {
		/* Never hand out a cut document. */
		jb_init(&j, out, outlen);
		jb_obj_begin(&j, NULL);
		jb_error(&j, "reply too large");
		jb_i64(&j, "errno", EOVERFLOW);
		jb_obj_end(&j);
		ret = -EOVERFLOW;
	}
	free(line);
	return ret;
}
