// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * format: tfs_format, making a new file system on 1..DEV_MAX devices.  Owns
 * the checks that come before anything is written (device count, label,
 * the same device twice, minimum size, a foreign or twinfs file system
 * already there unless forced) and the first write: cleared superblock
 * slots and log start, the root directory, checkpoint 1.  The check for an
 * existing file system (super_probe_dev, super.c) is shared with
 * "replace", which overwrites a device too.
 *
 * Every error path closes what it opened (a ladder of labels in reverse
 * order of setup), writes one line naming the device into err, and has
 * written nothing to the devices.  The in-memory fs it builds for the first
 * checkpoint is set up and freed by fs.c's helpers (fs_i.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "format_v2.h"
#include "fs_i.h"
#include "tlog.h"

#define FS_PROBE_BYTES SUPER_PROBE_BYTES
#define FS_ZERO_LOG_BLOCKS 16u		/* log blocks cleared by format */

static int size_check(struct dev *d, uint64_t *min_blocks, char *err, size_t errlen)
{
	uint64_t blocks = d->size / TFS_BLOCK_SIZE;

	if (blocks < SUPER_MIN_BLOCKS) {
		tfs_seterr(err, errlen, "%s: too small (%llu MiB; twinfs needs at least %u MiB)",
			   d->path, (unsigned long long)(d->size >> 20),
			   (unsigned)(((uint64_t)SUPER_MIN_BLOCKS * TFS_BLOCK_SIZE) >> 20));
		return -ENOSPC;
	}
	if (blocks < *min_blocks)
		*min_blocks = blocks;
	return 0;
}

/* The root directory of a new file system, applied like a replayed record. */
static int format_root(struct tfs *fs, uint64_t now_ns)
{
	struct log_rec r;
	struct meta_tx tx;
	int ret;

	memset(&r, 0, sizeof(r));
	r.type = LR_INODE;
	r.inode.ino = TFS_ROOT_INO;
	r.inode.parent = TFS_ROOT_INO;
	r.inode.mode = S_IFDIR | 0755;
	r.inode.uid = geteuid();
	r.inode.gid = getegid();
	r.inode.nlink = 2;
	r.inode.gen = 1;
	r.inode.atime_ns = r.inode.mtime_ns = r.inode.ctime_ns = r.inode.btime_ns =
		(int64_t)now_ns;
	meta_tx_init(&tx);
	fs->replaying = true;
	ret = meta_apply(fs, &r, &tx);
	fs->replaying = false;
	meta_tx_free(&tx);
	return ret;
}

/* What can be checked before opening anything. */
static int format_check_args(const char *const *devs, unsigned n,
			     const struct tfs_format_opts *o, char *err, size_t errlen)
{
	unsigned a, b;

	if (n == 0 || n > DEV_MAX) {
		tfs_seterr(err, errlen, "need 1 to %d devices, got %u", DEV_MAX, n);
		return -EINVAL;
	}
	if (o->label && strlen(o->label) >= sizeof(((struct super *)0)->label)) {
		tfs_seterr(err, errlen, "label too long (at most %zu bytes)",
			   sizeof(((struct super *)0)->label) - 1);
		return -EINVAL;
	}
	if (fs_same_paths(devs, n, &a, &b)) {
		tfs_seterr(err, errlen, "%s: same device as %s", devs[a], devs[b]);
		return -EINVAL;
	}
	return 0;
}

/* Open (and lock) every device; *total becomes the smallest one's size
 * in blocks.  On error the caller closes what was opened. */
static int format_open_devs(const char *const *devs, unsigned n, struct dev **d,
			    uint64_t *total, char *err, size_t errlen)
{
	int ret;

	for (unsigned i = 0; i < n; i++) {
		ret = dev_open(devs[i], false, &d[i], err, errlen);
		if (ret < 0)
			return ret;
		ret = size_check(d[i], total, err, errlen);
		if (ret < 0)
			return ret;
	}
	return 0;
}

/* The new superblock in fs->sb: layout for @total blocks, fresh uuids and
 * log_id, label, creation time @now. */
static int format_super(struct tfs *fs, unsigned n, uint64_t total,
			const struct tfs_format_opts *o, struct timespec now, char *err,
			size_t errlen)
{
	int ret;

	memset(&fs->sb, 0, sizeof(fs->sb));
	super_layout(&fs->sb, total);
	fs->sb.version = SUPER_VERSION;
	fs->sb.block_size = TFS_BLOCK_SIZE;
	fs->sb.ndevs = n;
	ret = fs_fill_random(fs->sb.fs_uuid, sizeof(fs->sb.fs_uuid));
	for (unsigned i = 0; ret == 0 && i < n; i++)
		ret = fs_fill_random(fs->sb.dev_uuids[i], 16);
	if (ret == 0)
		ret = fs_random_u64_nonzero(&fs->sb.log_id);
	if (ret < 0) {
		tfs_seterr(err, errlen, "getrandom: %s", strerror(-ret));
		return ret;
	}
	if (o->label)
		snprintf(fs->sb.label, sizeof(fs->sb.label), "%s", o->label);
	fs->sb.ctime_ns = (uint64_t)fs_ts_ns(now);
	fs->sb.generation = 0;		/* ckpt_write makes it 1 */
	fs->sb.state = SUPER_CLEAN;
	fs->sb.log_head_pos = 0;
	fs->sb.log_head_seq = 1;
	fs->sb.next_ino = TFS_ROOT_INO + 1;
	return 0;
}

/* The in-memory file system the first checkpoint is written from: the
 * mirror, the allocator and the root directory. */
static int format_meta(struct tfs *fs, struct dev **d, unsigned n, struct timespec now,
		       char *err, size_t errlen)
{
	int ret;

	ret = mirror_init(&fs->mirror, fs->be, d, n);
	if (ret < 0) {
		tfs_seterr(err, errlen, "cannot set up the mirror: %s", strerror(-ret));
		return ret;
	}
	ret = fs_alloc_create(fs);
	if (ret < 0) {
		tfs_seterr(err, errlen, "cannot create the allocator: %s", strerror(-ret));
		return ret;
	}
	ret = format_root(fs, (uint64_t)fs_ts_ns(now));
	if (ret < 0) {
		tfs_seterr(err, errlen, "cannot create the root directory: %s", strerror(-ret));
		return ret;
	}
	return 0;
}

/* Every check passed: from here on we write.  Clear the superblock slots
 * and reserved blocks (an older file system's superblock in the slot we do
 * not write would otherwise win by its generation), and the start of the
 * log (a foreign btrfs superblock lives there), through @buf
 * (FS_PROBE_BYTES).  Both formats. */
static int format_clear(struct mirror *m, const struct super *sb, void *buf, unsigned n,
			char *err, size_t errlen)
{
	uint64_t zero_blocks;
	int ret;

	zero_blocks = FS_ZERO_LOG_BLOCKS < sb->log_blocks ? FS_ZERO_LOG_BLOCKS : sb->log_blocks;
	zero_blocks += sb->log_start;
	if (zero_blocks * TFS_BLOCK_SIZE > FS_PROBE_BYTES)
		zero_blocks = FS_PROBE_BYTES / TFS_BLOCK_SIZE;
	memset(buf, 0, FS_PROBE_BYTES);
	ret = mirror_write(m, 0, buf, (uint32_t)zero_blocks);
	if (ret == 0 && mirror_healthy(m) != n)
		ret = -EIO;
	if (ret < 0)
		tfs_seterr(err, errlen, "cannot write to the devices: %s", strerror(-ret));
	return ret;
}

/* Version 1: cleared blocks, then the first checkpoint. */
static int format_write(struct tfs *fs, void *buf, unsigned n, char *err, size_t errlen)
{
	int ret;

	ret = format_clear(&fs->mirror, &fs->sb, buf, n, err, errlen);
	if (ret < 0)
		return ret;
	ret = fs_log_open(fs, 0, 1);
	if (ret < 0) {
		tfs_seterr(err, errlen, "cannot open the log: %s", strerror(-ret));
		return ret;
	}
	/* The first checkpoint holds the root directory; it and superblock
	 * generation 1 on every device are written and flushed by ckpt_write. */
	ret = ckpt_write(fs);
	if (ret == 0 && mirror_healthy(&fs->mirror) != n)
		ret = -EIO;
	if (ret < 0)
		tfs_seterr(err, errlen, "cannot write the file system: %s", strerror(-ret));
	return ret;
}

/* Version 2 (experimental, format_v2.c): cleared blocks, the trees, the
 * superblocks.  No in-memory file system is built. */
static int format_v2(struct dev_backend *be, struct dev **d, unsigned n, uint64_t total,
		     const struct tfs_format_opts *o, void *buf, char *err, size_t errlen)
{
	struct mirror m;
	struct super sb;
	int ret;

	ret = format_v2_super(&sb, n, total, o, err, errlen);
	if (ret < 0)
		return ret;
	ret = mirror_init(&m, be, d, n);
	if (ret < 0) {
		tfs_seterr(err, errlen, "cannot set up the mirror: %s", strerror(-ret));
		return ret;
	}
	ret = format_clear(&m, &sb, buf, n, err, errlen);
	if (ret == 0)
		ret = format_v2_write(be, d, &m, &sb, err, errlen);
	mirror_slot_paths_free(&m);
	return ret;
}

int tfs_format(const char *const *devs, unsigned n, const struct tfs_format_opts *o,
	       char *err, size_t errlen)
{
	static const struct tfs_format_opts defopts;
	struct dev *d[DEV_MAX] = { 0 };
	struct dev_backend *be = NULL;
	struct tfs *fs = NULL;
	uint64_t total = UINT64_MAX;
	void *buf = NULL;
	struct timespec now;
	int ret;

	if (!o)
		o = &defopts;
	ret = format_check_args(devs, n, o, err, errlen);
	if (ret < 0)
		return ret;
	ret = format_open_devs(devs, n, d, &total, err, errlen);
	if (ret < 0)
		goto out_devs;
	ret = fs_backend_create(o->backend, NULL, &be, err, errlen);
	if (ret < 0)
		goto out_devs;
	ret = fs_attach_devs(be, d, devs, n, err, errlen);
	if (ret < 0)
		goto out_be;
	if (posix_memalign(&buf, TFS_BLOCK_SIZE, FS_PROBE_BYTES)) {
		ret = -ENOMEM;
		tfs_seterr(err, errlen, "out of memory");
		goto out_be;
	}
	for (unsigned i = 0; i < n && !o->force; i++) {
		ret = super_probe_dev(be, d[i], "-f", NULL, err, errlen);
		if (ret < 0)
			goto out_buf;
	}

	if (o->v2) {
		ret = format_v2(be, d, n, total, o, buf, err, errlen);
		goto out_buf;
	}
	ret = fs_new(&fs);
	if (ret < 0) {
		tfs_seterr(err, errlen, "out of memory");
		goto out_buf;
	}
	fs->be = be;
	fs->ndevs = n;
	memcpy(fs->devs, d, sizeof(d));
	now = fs_now();		/* also the root directory's times */
	ret = format_super(fs, n, total, o, now, err, errlen);
	if (ret == 0)
		ret = format_meta(fs, d, n, now, err, errlen);
	if (ret == 0)
		ret = format_write(fs, buf, n, err, errlen);

	fs_free(fs);
out_buf:
	free(buf);
out_be:
	dev_backend_destroy(be);
out_devs:
	fs_close_devs(d, n);
	return ret;
}

_Static_assert(TFS_DEV_MAX == DEV_MAX, "tfs.h and dev.h disagree on the device count");
_Static_assert(TFS_LABEL_MAX + 1 == sizeof(((struct super *)0)->label),
	       "tfs.h and super.h disagree on the label size");

int tfs_format_info(const char *path, struct tfs_format_info *out, char *err, size_t errlen)
{
	struct dev_backend *be = NULL;
	struct dev *d = NULL;
	struct super sb;
	char why[256] = "";
	unsigned slot;
	int ret;

	memset(out, 0, sizeof(*out));
	ret = dev_open(path, true, &d, err, errlen);
	if (ret < 0)
		return ret;
	ret = dev_backend_create("file", &be);
	if (ret < 0) {
		tfs_seterr(err, errlen, "%s: cannot create I/O backend: %s", path, strerror(-ret));
		goto out_close;
	}
	ret = dev_backend_attach(be, d);
	if (ret < 0) {
		tfs_seterr(err, errlen, "%s: cannot attach device: %s", path, strerror(-ret));
		goto out_be;
	}
	memset(&sb, 0, sizeof(sb));
	ret = super_read_dev(be, d, &sb, &slot, why, sizeof(why));
	if (ret < 0) {
		tfs_seterr(err, errlen, "%s: superblock not readable after format: %s", path,
			   why[0] ? why : strerror(-ret));
		goto out_be;
	}
	memcpy(out->fs_uuid, sb.fs_uuid, sizeof(out->fs_uuid));
	memcpy(out->label, sb.label, sizeof(out->label));
	out->label[TFS_LABEL_MAX] = '\0';
	out->block_size = sb.block_size;
	out->total_blocks = sb.total_blocks;
	out->data_start = sb.data_start;
	out->ndevs = sb.ndevs;
	out->version = sb.version;
	out->short_nodes = super_short_nodes(&sb);
	out->pieces = super_pieces(&sb);
out_be:
	dev_backend_destroy(be);
out_close:
	dev_close(d);
	return ret;
}
