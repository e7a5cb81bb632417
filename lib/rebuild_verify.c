// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * rebuild_verify: the verification pass of a rebuild or replace (see
 * rebuild.c), after every region is copied: every extent block of the
 * target (and of the other devices in the copied regions) checked against
 * its csum, and on format v2 every tree node on every device checked
 * against its parent pointer (v2nodes.c); a copy that does not verify is
 * rewritten from one that does.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "bnode.h"
#include "rebuild_i.h"
#include "tlog.h"
#include "v2nodes.h"

#define BS TFS_BLOCK_SIZE
#define RB_VERIFY_PIECE 4096u		/* file blocks per range-lock hold */

struct vctx {
	struct tfs *fs;
	struct rebuild *rb;
	unsigned target;
	uint8_t *buf, *good;
	int err;
};

static bool region_wanted(struct tfs *fs, struct rebuild *rb, uint64_t blk)
{
	uint64_t r = mirror_region_of(&fs->mirror, blk);

	if (r == UINT64_MAX)
		return false;
	return rb->kind == SUPER_RB_REPLACE || mirror_region_dirty(&fs->mirror, r);
}

/* Check every writable copy of [phys, phys+n) against the extent csums and
 * rewrite the bad ones from a verified copy. */
static int verify_run(void *ctx, uint64_t fblk, uint64_t phys, uint32_t n,
		      const struct extent_ent *ents)
{
	struct vctx *v = ctx;
	struct mirror *m = &v->fs->mirror;
	uint64_t csums[512];

	if (phys & EXTENT_UNWRITTEN)
		return 0;
	if (atomic_load(&v->rb->stop) || atomic_load(&v->rb->cancel) ||
	    !rb_target_alive(v->fs, v->target))
		return -ECANCELED;
	for (uint32_t off = 0; off < n; ) {
		uint32_t k = n - off > 512 ? 512 : n - off;
		uint64_t blk = phys + off;
		bool have_good = false, all;

		for (uint32_t i = 0; i < k; i++)
			csums[i] = ents[off + i].csum;
		/* The target is checked everywhere, copied or not: that
		 * regions were clean only says nothing was written there
		 * while it was away, not that what it holds is ours.  The
		 * in-sync copies only where the copy ran. */
		all = region_wanted(v->fs, v->rb, blk) || region_wanted(v->fs, v->rb, blk + k - 1);
		for (unsigned d = 0; d < m->ndevs; d++) {
			int st = atomic_load(&m->state[d]);
			bool bad = false;
			int ret;

			if (!m->devs[d] || (st != MDEV_OK && d != v->target) ||
			    (!all && d != v->target))
				continue;
			ret = dev_pread(m->be, m->devs[d], v->buf, k * BS, blk * BS);
			for (uint32_t i = 0; i < k; i++)
				if (ret || csum_block(v->buf + (size_t)i * BS, blk + i) != csums[i])
					bad = true;
			if (d == v->target)
				atomic_fetch_add(&v->rb->verified, k);
			if (!bad)
				continue;
			if (!have_good) {
				/* Verified (and repaired) from the in-sync copies. */
				ret = mirror_read(m, blk, v->good, k, csums, NULL);
				if (ret < 0) {
					v->err = ret;
					return ret;
				}
				have_good = true;
			}
			ret = dev_pwrite(m->be, m->devs[d], v->good, k * BS, blk * BS);
			if (ret < 0) {
				mirror_event(m, d, MEV_WRITE_ERR, blk, k);
				mirror_fail_dev(m, d, ret);
				if (d == v->target)
					return ret;
				continue;
			}
			atomic_fetch_add(&v->rb->fixed, k);
		}
		off += k;
	}
	return 0;
}

/* icursor_next, waiting for the checkpoint that rebuilds while deaths are
 * lost (v2dirty.h, fs_ckpt_wait) rather than failing with ENOMEM. */
static int next_wait(struct tfs *fs, struct icursor *c, uint64_t *ino)
{
	int ret, waits = 0;

	while ((ret = icursor_next(fs, c, ino)) == -ENOMEM && waits++ < FS_WALK_WAITS &&
	       fs_ckpt_wait(fs))
		;
	return ret;
}

/* One inode's blocks (nothing if it is gone or not a regular file). */
static int verify_file(struct tfs *fs, struct vctx *v, uint64_t ino)
{
	struct tfs_inode *ip;
	uint64_t end;
	int ret = 0;

	/* Pinned like an open file: it cannot be freed under us. */
	pthread_mutex_lock(&fs->ns_lock);
	/* Deaths lost (v2dirty.h): wait for the checkpoint that rebuilds. */
	ret = fs_get_walk_waiting(fs, ino, &ip, &(int){ FS_WALK_WAITS });
	if (ret == 0 && !S_ISREG(inode_mode(ip))) {
		inode_put(fs, ip);
		ip = NULL;
	}
	if (ret == 0 && ip)
		inode_open_add(ip);
	pthread_mutex_unlock(&fs->ns_lock);
	if (ret)	/* -ENOENT: deleted since; -EIO: its inode unreadable */
		return ret == -ENOENT ? 0 : ret;
	if (!ip)
		return 0;
	end = 0;
	for (uint64_t f = 0; ret == 0 && f < EXTENT_MAX_FBLK; f = end) {
		struct rl_range r;

		/* Shared from f on, as scrub's search: no leaf it passes is
		 * evicted or freed under it. */
		rl_lock(inode_rl(ip), &r, f, RL_EOF, false);
		f = inode_next_data(ip, f);
		rl_unlock(inode_rl(ip), &r);
		if (f >= EXTENT_MAX_FBLK)
			break;
		end = f + RB_VERIFY_PIECE;
		rl_lock(inode_rl(ip), &r, f, end, false);
		ret = inode_extent_walk(ip, f, end, verify_run, v);
		rl_unlock(inode_rl(ip), &r);
	}
	fs_iput_open(fs, ip);
	inode_put(fs, ip);
	return ret;
}

/* Every regular file's mapped blocks, one inode at a time: on a lazily
 * loaded version 2 mount the cursor also names the inodes not resident
 * (inode_get reads them in), so no file is skipped. */
static int verify_extents(struct tfs *fs, struct rebuild *rb, unsigned target)
{
	struct vctx v = { .fs = fs, .rb = rb, .target = target };
	struct icursor c;
	uint64_t ino;
	int ret;

	if (posix_memalign((void **)&v.buf, BS, 512 * BS))
		return -ENOMEM;
	if (posix_memalign((void **)&v.good, BS, 512 * BS)) {
		free(v.buf);
		return -ENOMEM;
	}
	ret = icursor_init(fs, &c);
	while (ret == 0 && (ret = next_wait(fs, &c, &ino)) == 0)
		ret = verify_file(fs, &v, ino);
	if (ret == -ENOENT)
		ret = 0;
	icursor_free(&c);
	free(v.buf);
	free(v.good);
	return ret;
}

static bool nodes_piece(void *ctx, uint64_t nodes)
{
	struct vctx *v = ctx;

	(void)nodes;
	return atomic_load(&v->rb->stop) || atomic_load(&v->rb->cancel) ||
	       !rb_target_alive(v->fs, v->target);
}

/* Format v2: every tree node on the target and the in-sync devices. */
static int verify_nodes(struct tfs *fs, struct rebuild *rb, unsigned target)
{
	struct vctx v = { .fs = fs, .rb = rb, .target = target };
	struct v2n_walk w = { .fs = fs, .target = (int)target, .piece_done = nodes_piece,
			      .ctx = &v };
	int ret = v2n_walk(&w);

	atomic_fetch_add(&rb->verified, w.n.checked * BNODE_BLOCKS);
	atomic_fetch_add(&rb->fixed, w.n.repaired * BNODE_BLOCKS);
	if (ret == 0 && !rb_target_alive(fs, target))
		ret = -EIO;
	if (ret == 0 && w.n.unrecoverable) {
		tfs_log(LOG_ERR, "rebuild: %llu tree nodes have no good copy on any device",
			(unsigned long long)w.n.unrecoverable);
		ret = -EIO;
	}
	return ret;
}

int rb_verify_pass(struct tfs *fs, struct rebuild *rb, unsigned target)
{
	int ret = verify_extents(fs, rb, target);

	if (ret == 0)
		ret = verify_nodes(fs, rb, target);
	return ret;
}
