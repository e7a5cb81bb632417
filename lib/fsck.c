// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fsck: offline check and repair (fsck.h).  Owns the report, the superblock,
 * checkpoint and log copies, the order of the passes and the exit-code
 * policy; the structure passes are fsck_tree.c's, the block and data passes
 * fsck_data.c's (fsck_i.h).  Loading and the final checkpoint are the mount
 * code's (tfs_mount with opts.offline, fs_offline_commit, tfs_unmount).
 *
 * Order: superblock slots of every device (opened on their own first, so a
 * device that is not twinfs or is in use is named before anything else),
 * then the offline load, the checkpoint and log copies of every device, the
 * structure passes (each one rebuilds its index of the inodes, so a pass
 * sees the repairs of the passes before it), and last the data checksums on
 * every device copy, read per device in runs of up to 1 MiB.
 *
 * Structural repairs are applied to the in-memory metadata with meta_apply()
 * in every mode: -n throws them away (and reports them as left), -y and -p
 * persist them with one new checkpoint.  Data copies are rewritten in place
 * from a verified copy (same block, same content) as they are found.
 *
 * Single-threaded: nothing else uses the loaded file system.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>

#include "dir.h"
#include "fs_i.h"
#include "fsck.h"
#include "fsck_i.h"
#include "le.h"

#define FSCK_PROBE_BYTES (128u * 1024)

__attribute__((format(printf, 2, 3)))
void fsck_say(struct fck *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(c->out, fmt, ap);
	va_end(ap);
	fputc('\n', c->out);
}

/* A structural problem whose repair is in memory until the checkpoint. */
__attribute__((format(printf, 3, 4)))
void fsck_meta_problem(struct fck *c, bool safe, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(c->out, fmt, ap);
	va_end(ap);
	fputs(c->fix ? (safe || c->o->mode == FSCK_REPAIR ? ": fixing" : ": needs fsck -y")
		     : ": not fixed (-n)", c->out);
	fputc('\n', c->out);
	c->res->errors++;
	c->meta_fixes++;
	if (!safe)
		c->unsafe = true;
}

/* A problem nothing here can fix. */
__attribute__((format(printf, 2, 3)))
void fsck_hard_problem(struct fck *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(c->out, fmt, ap);
	va_end(ap);
	fputc('\n', c->out);
	c->res->errors++;
	c->left++;
}

static const char *devname_(struct fck *c, unsigned i)
{
	return c->fs->devs[i] ? c->fs->devs[i]->path : "(missing)";
}

/* ---- superblocks (before the load) ---- */

struct scan_dev {
	struct super sb;	/* the newest valid slot */
	bool valid;
};

/* Open every device read-only on @be, refusing one given twice.  0 or an
 * exit code (8) after printing why. */
static int scan_open(struct fck *c, struct dev_backend *be, struct dev **d)
{
	const struct fsck_opts *o = c->o;
	char err[512];
	int ret;

	for (unsigned i = 0; i < o->ndevs; i++) {
		ret = dev_open(o->devs[i], true, &d[i], err, sizeof(err));
		if (ret == -EBUSY) {
			fsck_say(c, "%s: in use (mounted?)", o->devs[i]);
			return FSCK_EXIT_OPERROR;
		}
		if (ret < 0) {
			fsck_say(c, "%s", err);
			return FSCK_EXIT_OPERROR;
		}
		for (unsigned j = 0; j < i; j++) {
			struct stat a, b;

			if (d[j]->fd < 0 || d[i]->size != d[j]->size)
				continue;
			if (!fstat(d[i]->fd, &a) && !fstat(d[j]->fd, &b) &&
			    a.st_dev == b.st_dev && a.st_ino == b.st_ino && a.st_rdev == b.st_rdev) {
				fsck_say(c, "%s: same device as %s", o->devs[i], o->devs[j]);
				return FSCK_EXIT_OPERROR;
			}
		}
		ret = dev_backend_attach(be, d[i]);
		if (ret < 0) {
			fsck_say(c, "%s: cannot attach to the I/O backend: %s", o->devs[i],
				 strerror(-ret));
			return FSCK_EXIT_OPERROR;
		}
	}
	return 0;
}

/* Decode both slots of device @i into @sd (the newest valid one) and
 * report damaged or missing slots.  0 (sd->valid says whether a slot
 * verified) or an exit code (8) after printing why. */
static int scan_dev_slots(struct fck *c, struct dev_backend *be, struct dev *d, unsigned i,
			  void *buf, struct scan_dev *sd)
{
	const char *path = c->o->devs[i];
	uint32_t len = d->size < FSCK_PROBE_BYTES ? (uint32_t)d->size : FSCK_PROBE_BYTES;
	int sret[2], ret;
	struct super s[2];
	char why[2][200];
	const char *foreign;

	if (len < 2 * TFS_BLOCK_SIZE) {
		fsck_say(c, "%s: not a twinfs device (too small)", path);
		return FSCK_EXIT_OPERROR;
	}
	ret = dev_pread(be, d, buf, len, 0);
	if (ret < 0) {
		fsck_say(c, "%s: cannot read the superblocks: %s", path, strerror(-ret));
		return FSCK_EXIT_OPERROR;
	}
	for (unsigned slot = 0; slot < 2; slot++) {
		why[slot][0] = '\0';
		sret[slot] = super_decode((char *)buf + slot * TFS_BLOCK_SIZE, slot, &s[slot],
					  why[slot], sizeof(why[slot]));
	}
	if (sret[0] == -ENOENT && sret[1] == -ENOENT) {
		foreign = super_probe_foreign(buf, len);
		if (foreign)
			fsck_say(c, "%s: not a twinfs device (it holds %s file system)", path,
				 foreign);
		else
			fsck_say(c, "%s: not a twinfs device", path);
		return FSCK_EXIT_OPERROR;
	}
	for (unsigned slot = 0; slot < 2; slot++) {
		if (sret[slot] == -EPROTONOSUPPORT) {
			fsck_say(c, "%s: %s", path, why[slot]);
			return FSCK_EXIT_OPERROR;
		}
	}
	for (unsigned slot = 0; slot < 2; slot++) {
		if (sret[slot] == 0 && (!sd->valid || s[slot].generation > sd->sb.generation)) {
			sd->sb = s[slot];
			sd->valid = true;
		}
	}
	if (!sd->valid) {
		fsck_hard_problem(c, "%s: both superblock slots damaged (%s; %s): "
				  "the device is left out; replace or rebuild it",
				  path, why[0], why[1]);
		return 0;
	}
	for (unsigned slot = 0; slot < 2; slot++) {
		if (sret[slot] == -EUCLEAN) {
			fsck_meta_problem(c, true, "%s: superblock slot %u damaged (%s)", path, slot,
					  why[slot]);
			c->slots_bad = true;
		} else if (sret[slot] == -ENOENT && sd->sb.generation >= 2) {
			fsck_meta_problem(c, true, "%s: superblock slot %u missing", path, slot);
			c->slots_bad = true;
		} else if (sret[slot] == 0 && c->o->verbose) {
			fsck_say(c, "%s: superblock slot %u: generation %llu", path, slot,
				 (unsigned long long)s[slot].generation);
		}
	}
	return 0;
}

/* The newest superblock given is a rebuild or replace target's own, which
 * records it stale (sbc_mark_target), and no device given is in sync: its
 * blocks are part old, part copied, nothing to check or repair against.
 * Exit code 4 after one line, or 0 (go on). */
static int scan_unfinished(struct fck *c, const struct scan_dev *sd, const struct super *nb)
{
	const char *path = "?";

	if (!super_self_stale(nb))
		return 0;
	for (unsigned i = 0; i < c->o->ndevs; i++) {
		if (!sd[i].valid || sd[i].sb.dev_index >= nb->ndevs)
			continue;
		if (!nb->dev_state[sd[i].sb.dev_index])
			return 0;
		if (sd[i].sb.dev_index == nb->dev_index)
			path = c->o->devs[i];
	}
	fsck_say(c, "%s: a rebuild or replace onto it did not finish: its contents are "
		 "incomplete; nothing checked or changed (mount it together with an in-sync "
		 "device to finish the rebuild)", path);
	return FSCK_EXIT_UNCORRECTED;
}

/* Check every readable device against the newest superblock @nb: still a
 * member, each slot once, generation current, no split brain; note stale
 * and missing devices and fill usable[].  0 or an exit code (8, 4 for a
 * split brain) after printing why. */
static int scan_members(struct fck *c, const struct scan_dev *sd, const struct super *nb,
			const char **usable, unsigned *nusable)
{
	const struct fsck_opts *o = c->o;
	bool seen[DEV_MAX] = { false };

	for (unsigned i = 0; i < o->ndevs; i++) {
		uint32_t idx = sd[i].sb.dev_index;

		if (!sd[i].valid)
			continue;
		if (idx >= nb->ndevs || memcmp(sd[i].sb.dev_uuid, nb->dev_uuids[idx], 16)) {
			fsck_say(c, "%s: no longer a member of this twinfs", o->devs[i]);
			return FSCK_EXIT_OPERROR;
		}
		if (seen[idx]) {
			fsck_say(c, "%s: same device slot %u given twice", o->devs[i], idx);
			return FSCK_EXIT_OPERROR;
		}
		seen[idx] = true;
		/* Refused as mount refuses it: the user picks the half. */
		if (super_split_brain(nb, &sd[i].sb)) {
			fsck_say(c, "%s and the device of slot %u each record the other stale "
				 "(split brain: each was mounted without the other and changed); "
				 "nothing done: check the one to keep alone, then replace the "
				 "other", o->devs[i], nb->dev_index);
			return FSCK_EXIT_UNCORRECTED;
		}
		if (nb->dev_state[idx]) {
			c->stale[idx] = true;
		} else if (sd[i].sb.generation < nb->generation) {
			fsck_meta_problem(c, true, "%s: superblock generation %llu behind %llu",
					  o->devs[i], (unsigned long long)sd[i].sb.generation,
					  (unsigned long long)nb->generation);
		}
		usable[(*nusable)++] = o->devs[i];
	}
	for (unsigned i = 0; i < nb->ndevs; i++) {
		if (!seen[i]) {
			c->missing[i] = true;
			fsck_hard_problem(c, "device %u of %u is missing", i, nb->ndevs);
		}
	}
	if (o->verbose)
		fsck_say(c, "twinfs \"%s\": %u devices, generation %llu, %s", nb->label,
			 nb->ndevs, (unsigned long long)nb->generation,
			 nb->state == SUPER_CLEAN ? "clean" : "not cleanly unmounted");
	return 0;
}

/* Read both slots of every device with a private backend.  Returns 0 or an
 * exit code (8) after printing why; fills usable[] with the devices the load
 * may open. */
static int scan_supers(struct fck *c, const char **usable, unsigned *nusable,
		       struct super *newest_sb)
{
	const struct fsck_opts *o = c->o;
	struct scan_dev *sd = calloc(o->ndevs, sizeof(*sd));
	struct dev_backend *be = NULL;
	struct dev *d[DEV_MAX] = { 0 };
	void *buf = NULL;
	int first = -1, newest = -1, rc = 0, ret;

	*nusable = 0;
	if (!sd || posix_memalign(&buf, TFS_BLOCK_SIZE, FSCK_PROBE_BYTES)) {
		fsck_say(c, "out of memory");
		rc = FSCK_EXIT_OPERROR;
		goto out;
	}
	ret = dev_backend_create("file", &be);
	if (ret < 0) {
		fsck_say(c, "cannot create an I/O backend: %s", strerror(-ret));
		rc = FSCK_EXIT_OPERROR;
		goto out;
	}
	rc = scan_open(c, be, d);
	for (unsigned i = 0; !rc && i < o->ndevs; i++) {
		rc = scan_dev_slots(c, be, d[i], i, buf, &sd[i]);
		if (rc || !sd[i].valid)
			continue;
		if (first < 0)
			first = (int)i;
		if (memcmp(sd[i].sb.fs_uuid, sd[first].sb.fs_uuid, 16)) {
			fsck_say(c, "%s: belongs to another twinfs than %s", o->devs[i],
				 o->devs[first]);
			rc = FSCK_EXIT_OPERROR;
		} else if (newest < 0 || sd[i].sb.generation > sd[newest].sb.generation) {
			newest = (int)i;
		}
	}
	if (rc)
		goto out;
	if (newest < 0) {
		fsck_say(c, "no device holds a readable superblock");
		rc = FSCK_EXIT_UNCORRECTED;
		goto out;
	}
	rc = scan_unfinished(c, sd, &sd[newest].sb);
	if (rc == 0)
		rc = scan_members(c, sd, &sd[newest].sb, usable, nusable);
	*newest_sb = sd[newest].sb;
out:
	/* Released now: the load takes its own (exclusive for -y) lock. */
	for (unsigned i = 0; i < o->ndevs && i < DEV_MAX; i++) {
		if (d[i])
			flock(d[i]->fd, LOCK_UN);
	}
	if (be)
		dev_backend_destroy(be);
	for (unsigned i = 0; i < o->ndevs && i < DEV_MAX; i++)
		dev_close(d[i]);
	free(buf);
	free(sd);
	return rc;
}

/* ---- checkpoint and log copies ---- */

int fsck_read_dev(struct fck *c, unsigned d, uint64_t blk, void *buf, uint32_t n)
{
	return dev_pread(c->be, c->devs[d], buf, n * TFS_BLOCK_SIZE, blk * TFS_BLOCK_SIZE);
}

int fsck_write_dev(struct fck *c, unsigned d, uint64_t blk, const void *buf, uint32_t n)
{
	return dev_pwrite(c->be, c->devs[d], buf, n * TFS_BLOCK_SIZE, blk * TFS_BLOCK_SIZE);
}

static void check_ckpt(struct fck *c)
{
	const struct super *sb = &c->fs->sb;
	uint64_t payload, table;
	uint8_t *tb[DEV_MAX] = { 0 }, *good = NULL, *buf = NULL;
	bool tok[DEV_MAX] = { false };

	ckpt_geom(sb->ckpt_bytes, &payload, &table);
	if (!sb->ckpt_blocks)
		return;
	if (posix_memalign((void **)&buf, TFS_BLOCK_SIZE, FSCK_RUN_BLOCKS * TFS_BLOCK_SIZE)) {
		fsck_hard_problem(c, "out of memory checking the checkpoint");
		return;
	}
	for (unsigned d = 0; d < c->fs->ndevs; d++) {
		if (!c->fs->devs[d] || c->stale[d])
			continue;
		if (posix_memalign((void **)&tb[d], TFS_BLOCK_SIZE, table * TFS_BLOCK_SIZE))
			continue;
		c->res->dev[d].blocks += table;
		if (fsck_read_dev(c, d, sb->ckpt_start, tb[d], (uint32_t)table) < 0 ||
		    csum_buf(tb[d], table * TFS_BLOCK_SIZE, ckpt_table_seed(sb->fs_uuid)) !=
			    sb->ckpt_table_csum) {
			c->res->dev[d].bad += table;
			fsck_meta_problem(c, true, "%s: checkpoint table damaged", devname_(c, d));
			c->need_ckpt = true;
			continue;
		}
		tok[d] = true;
		if (!good)
			good = tb[d];
	}
	for (unsigned d = 0; good && d < c->fs->ndevs; d++) {
		uint64_t bad = 0;

		if (!tok[d] && (!c->fs->devs[d] || c->stale[d]))
			continue;
		for (uint64_t off = 0; off < payload; off += FSCK_RUN_BLOCKS) {
			uint32_t k = (uint32_t)(payload - off < FSCK_RUN_BLOCKS ? payload - off
									   : FSCK_RUN_BLOCKS);
			uint64_t blk = sb->ckpt_start + table + off;
			bool rok = fsck_read_dev(c, d, blk, buf, k) == 0;

			c->res->dev[d].blocks += k;
			for (uint32_t i = 0; i < k; i++) {
				if (!rok || csum_block(buf + (size_t)i * TFS_BLOCK_SIZE, blk + i) !=
						    le64_get(good + (off + i) * 8))
					bad++;
			}
		}
		if (bad) {
			c->res->dev[d].bad += bad;
			fsck_meta_problem(c, true, "%s: %llu of %llu checkpoint blocks damaged",
					  devname_(c, d), (unsigned long long)bad,
					  (unsigned long long)payload);
			c->need_ckpt = true;
		}
	}
	for (unsigned d = 0; d < DEV_MAX; d++)
		free(tb[d]);
	free(buf);
}

static int count_rec(void *ctx, const struct log_rec *r)
{
	(*(uint64_t *)ctx)++;
	return 0;
}

/* Replays the log from each device's copy alone: a copy that ends before
 * the combined replay did is damaged (the load used another copy). */
static void check_log(struct fck *c)
{
	struct tfs *fs = c->fs;
	struct log_geom g;

	fs_log_geom(fs, &g);
	if (c->o->verbose && fs->replay_next_seq > fs->sb.log_head_seq)
		fsck_say(c, "log: %llu transactions after the checkpoint",
			 (unsigned long long)(fs->replay_next_seq - fs->sb.log_head_seq));
	for (unsigned d = 0; d < fs->ndevs; d++) {
		struct dev *one[DEV_MAX] = { 0 };
		struct mirror m;
		uint64_t pos = 0, seq = 0, nrec = 0;
		int ret;

		if (!fs->devs[d] || c->stale[d])
			continue;
		one[d] = fs->devs[d];
		if (mirror_init(&m, fs->be, one, fs->ndevs) < 0)
			continue;
		ret = log_replay(&m, &g, count_rec, &nrec, &pos, &seq);
		if (ret == -EBADMSG || ret == -ESTALE)
			ret = 0;	/* seq says where this copy stopped */
		if (ret < 0) {
			fsck_meta_problem(c, true, "%s: log copy unreadable: %s", devname_(c, d),
					  strerror(-ret));
			c->need_ckpt = true;
		} else if (seq < fs->replay_next_seq) {
			fsck_meta_problem(c, true, "%s: log copy damaged at transaction %llu "
					  "(the other copy holds %llu more)", devname_(c, d),
					  (unsigned long long)seq,
					  (unsigned long long)(fs->replay_next_seq - seq));
			c->need_ckpt = true;
		}
	}
}

/* ---- driver ---- */

static void count_inodes(struct fck *c)
{
	for (size_t i = 0; i < c->niv; i++) {
		uint32_t m = c->iv[i].ip->mode;

		c->res->inodes++;
		if (S_ISDIR(m))
			c->res->dirs++;
		else if (S_ISREG(m))
			c->res->files++;
		else if (S_ISLNK(m))
			c->res->symlinks++;
		else
			c->res->special++;
	}
}

static int structure(struct fck *c)
{
	int ret = fsck_build_index(c);

	if (ret == 0)
		ret = fsck_pass_inodes(c);
	if (ret == 0)
		ret = fsck_pass_dents(c);
	if (ret == 0)
		ret = fsck_pass_reach(c);
	if (ret == 0)
		ret = fsck_build_index(c);
	if (ret == 0)
		ret = fsck_pass_counts(c);
	if (ret == 0)
		ret = fsck_build_index(c);
	if (ret == 0)
		ret = fsck_pass_blocks(c);
	if (ret == 0)
		ret = fsck_build_index(c);	/* names as repaired, for the data pass */
	return ret;
}

/* Persist the in-memory repairs: a new checkpoint (two if a superblock slot
 * was bad, so both slots are rewritten). */
static int commit(struct fck *c)
{
	struct tfs *fs = c->fs;
	char err[512] = "";
	int ret;

	ret = fs_offline_commit(fs, err, sizeof(err));
	if (ret < 0) {
		fsck_say(c, "cannot write the repairs: %s", err[0] ? err : strerror(-ret));
		tfs_abandon(fs);
		return ret;
	}
	for (unsigned d = 0; d < fs->ndevs; d++) {
		if (c->stale[d] && fs->devs[d] && !c->stale_unfixed[d])
			atomic_store(&fs->mirror.state[d], MDEV_OK);
	}
	/* What the write-intent bitmap says a device missed is now copied. */
	if (mirror_insync(&fs->mirror) == fs->ndevs)
		mirror_clear_all(&fs->mirror);
	ret = c->slots_bad ? tfs_checkpoint(fs) : 0;
	if (ret == 0)
		ret = tfs_unmount(fs);
	else
		tfs_unmount(fs);
	if (ret < 0)
		fsck_say(c, "writing the checkpoint failed: %s", strerror(-ret));
	return ret;
}

/* Name the devices in the result, report stale ones and the checkpoint
 * copies the load rewrote.  Returns how many stale devices it counted. */
static uint64_t note_devices(struct fck *c)
{
	uint64_t stale_err = 0;

	c->res->ndevs = c->fs->ndevs;
	for (unsigned d = 0; d < c->fs->ndevs; d++)
		snprintf(c->res->dev[d].path, sizeof(c->res->dev[d].path), "%s", devname_(c, d));
	for (unsigned d = 0; d < c->fs->ndevs; d++) {
		if (!c->stale[d])
			continue;
		c->res->errors++;
		stale_err++;
		if (c->fs->sb.rb_state == SUPER_RB_RUNNING) {
			/* The rebuild's cursor and bitmap are its own: let it
			 * finish rather than declare the device in sync here. */
			c->stale_unfixed[d]++;
			fsck_say(c,
				 "%s: stale, and a rebuild onto it is in progress: mount the file "
				 "system to let it finish", devname_(c, d));
			continue;
		}
		fsck_say(c, "%s: stale (it missed writes while failed or missing): %s",
			 devname_(c, d),
			 c->fix ? "bringing every block up to date" : "not fixed (-n)");
	}

	/* The load reads the checkpoint verified, and rewrites a bad copy it
	 * meets (with -n the rewrite fails, and check_ckpt reports the copy). */
	for (unsigned d = 0; c->fix && d < c->fs->ndevs; d++) {
		uint64_t n = atomic_load(&c->fs->mirror.ctr[d].repaired) -
			     c->fs->sb.stats[d].repaired;

		if (!n)
			continue;
		c->res->errors++;
		c->res->fixed++;
		c->res->dev[d].bad += n;
		c->res->dev[d].repaired += n;
		fsck_say(c, "%s: %llu bad checkpoint block copies: rewritten from a good copy",
			 devname_(c, d), (unsigned long long)n);
	}
	return stale_err;
}

static void summary(struct fck *c)
{
	const struct fsck_result *r = c->res;

	fsck_say(c, "%llu inodes (%llu directories, %llu files, %llu symlinks, %llu other), "
		 "%llu data blocks (%llu shared)",
		 (unsigned long long)r->inodes, (unsigned long long)r->dirs,
		 (unsigned long long)r->files, (unsigned long long)r->symlinks,
		 (unsigned long long)r->special, (unsigned long long)r->data_blocks,
		 (unsigned long long)r->shared_blocks);
	for (unsigned d = 0; d < r->ndevs; d++)
		fsck_say(c, "%s: %llu blocks checked, %llu bad, %llu repaired", r->dev[d].path,
			 (unsigned long long)r->dev[d].blocks, (unsigned long long)r->dev[d].bad,
			 (unsigned long long)r->dev[d].repaired);
	fsck_say(c, "%llu errors found, %llu fixed, %llu left", (unsigned long long)r->errors,
		 (unsigned long long)r->fixed, (unsigned long long)(r->errors - r->fixed));
}

int fsck_run(const struct fsck_opts *o, struct fsck_result *resp)
{
	struct fsck_result res0;
	struct fck c = { .o = o, .res = resp ? resp : &res0 };
	const char *usable[DEV_MAX];
	unsigned nusable = 0;
	struct super nb;
	struct tfs_opts to;
	char err[512] = "";
	uint64_t stale_err = 0;
	bool write = false;
	int rc, ret;

	memset(c.res, 0, sizeof(*c.res));
	c.out = o->out ? o->out : stdout;
	c.fix = o->mode == FSCK_REPAIR || o->mode == FSCK_PREEN;
	if (!o->devs || o->ndevs == 0 || o->ndevs > DEV_MAX) {
		fsck_say(&c, "need 1 to %d devices", DEV_MAX);
		return FSCK_EXIT_OPERROR;
	}
	rc = scan_supers(&c, usable, &nusable, &nb);
	if (rc)
		return rc;
	if (nb.version == SUPER_VERSION && o->v1_optin) {
		if (!o->v1) {
			fsck_say(&c, "%s: format 1 image; this fsck.twinfs checks format 2. To "
				 "check it anyway (format 1 is deprecated), run it with %s",
				 usable[0], o->v1_optin);
			return FSCK_EXIT_OPERROR;
		}
		fsck_say(&c, "warning: %s: format 1 is deprecated and will be removed: copy "
			 "its files to a new file system (mkfs.twinfs)", usable[0]);
	}
	if (nb.version == SUPER_VERSION_V2) {
		rc = fsck_v2_run(&c, usable, nusable, &nb);
		if (rc)
			return rc;
		goto summary;
	}

	memset(&to, 0, sizeof(to));
	to.devs = usable;
	to.ndevs = nusable;
	to.backend = o->backend;
	to.degraded = true;
	to.offline = true;
	to.readonly = !c.fix;
	ret = tfs_mount(&to, &c.fs, err, sizeof(err));
	if (ret == -EBUSY) {
		fsck_say(&c, "%s", err);
		return FSCK_EXIT_OPERROR;
	}
	if (ret < 0) {
		fsck_hard_problem(&c, "cannot load the metadata: %s", err);
		return ret == -EUCLEAN || ret == -EIO ? FSCK_EXIT_UNCORRECTED : FSCK_EXIT_OPERROR;
	}
	c.be = c.fs->be;
	c.devs = c.fs->devs;
	c.ndevs = c.fs->ndevs;
	c.mir = &c.fs->mirror;
	if (c.fs->damage[0]) {
		/* Beyond what the mirrors repair: mount refuses it.  -y accepts
		 * the loss and writes what was recovered as the new state. */
		fsck_meta_problem(&c, false, "metadata damaged on every device: %s",
				  c.fs->damage);
		c.need_ckpt = true;
		c.slots_bad = true;
	}
	stale_err = note_devices(&c);
	check_ckpt(&c);
	check_log(&c);
	ret = structure(&c);
	if (ret < 0) {
		fsck_hard_problem(&c, "structure check stopped: %s", strerror(-ret));
		tfs_abandon(c.fs);
		goto summary;
	}
	count_inodes(&c);
	ret = fsck_pass_data(&c);
	if (ret < 0)
		fsck_hard_problem(&c, "data check stopped: %s", strerror(-ret));
	for (unsigned d = 0; d < c.fs->ndevs; d++) {
		if (c.stale[d] && c.stale_unfixed[d] && c.fix &&
		    c.fs->sb.rb_state != SUPER_RB_RUNNING)
			fsck_say(&c,
				 "%s: %llu blocks could not be brought up to date; it stays stale",
				 devname_(&c, d), (unsigned long long)c.stale_unfixed[d]);
	}

	if (c.fix && o->mode == FSCK_PREEN && c.unsafe) {
		fsck_say(&c, "UNEXPECTED INCONSISTENCY: run fsck.twinfs -y (or -n to see it all)");
		write = false;
	} else if (c.fix) {
		/* Data repairs too: the counters of repaired blocks are kept in
		 * the superblocks. */
		write = c.meta_fixes || c.need_ckpt || stale_err || c.res->fixed;
	}
	if (write) {
		ret = commit(&c);
		c.fs = NULL;
		if (ret == 0) {
			c.res->fixed += c.meta_fixes;
			for (unsigned d = 0; d < DEV_MAX; d++)
				if (c.stale[d] && !c.stale_unfixed[d])
					c.res->fixed++;
		}
	} else {
		tfs_abandon(c.fs);
		c.fs = NULL;
	}

summary:
	summary(&c);
	free(c.iv);
	free(c.refs);
	if (!c.res->errors)
		return FSCK_EXIT_OK;
	return c.res->errors == c.res->fixed ? FSCK_EXIT_FIXED : FSCK_EXIT_UNCORRECTED;
}
