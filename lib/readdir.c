// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * readdir: a directory's listing for the kernel (READDIR, READDIRPLUS),
 * from its in-memory entries in cookie order, reading ahead the inodes a
 * listing with attributes is about to hand out.  Split from namei.c: it
 * changes nothing and takes no namespace lock, only the directory's.
 */
#include <dirent.h>
#include <errno.h>
#include <string.h>

#include "dir.h"
#include "fs_i.h"

/* ---- readdir ---- */

/* Names a readdir looks ahead at, at a time: about what one FUSE reply of
 * 32 KiB holds with plus (some 200 names), and a little more; the next
 * batch when the listing gets there. */
#define READDIR_PREFETCH 256

/* Whether readdir reads @e's inode: plus hands out its attributes; a
 * plain readdir only the number and type, and the entry knows the type
 * when it came from a format v2 tree (a cold find lists a million names
 * without reading a million inodes). */
static bool readdir_reads(const struct dir_ent *e, bool plus)
{
	return plus || e->dtype == DT_UNKNOWN;
}

int tfs_readdir_end(struct tfs *fs, uint64_t ino, uint64_t *end)
{
	struct tfs_inode *ip;
	int ret = inode_get(fs, ino, &ip);

	if (ret)
		return ret;
	inode_lock(ip);
	if (inode_dir(ip))
		*end = dir_end(inode_dir(ip));
	else
		ret = -ENOTDIR;
	inode_unlock(ip);
	inode_put(fs, ip);
	return ret;
}

int tfs_readdir(struct tfs *fs, uint64_t ino, uint64_t off, bool plus,
		tfs_dirfill_fn fill, void *ctx)
{
	return tfs_readdir_until(fs, ino, off, UINT64_MAX, plus, fill, ctx);
}

/* The inodes readdir will read of the next READDIR_PREFETCH names from
 * @cookie on, read ahead together: a cold listing would otherwise fault
 * them in one by one, waiting for a node read at every few dozen names.
 * Returns the cookie after the last name looked at. */
static uint64_t readdir_prefetch(struct tfs *fs, const struct dir *d, uint64_t cookie,
				 uint64_t end, bool plus)
{
	uint64_t inos[READDIR_PREFETCH];
	struct dir_ent e;
	size_t n = 0;

	for (int i = 0; i < READDIR_PREFETCH && !dir_next(d, cookie, &e) && e.cookie < end; i++) {
		if (readdir_reads(&e, plus))
			inos[n++] = e.ino;
		cookie = e.cookie + 1;
	}
	icache_prefetch(fs, inos, n);
	return cookie;
}

int tfs_readdir_until(struct tfs *fs, uint64_t ino, uint64_t off, uint64_t end, bool plus,
		      tfs_dirfill_fn fill, void *ctx)
{
	struct tfs_inode *ip;
	struct stat st;
	int ret = inode_get(fs, ino, &ip);

	if (ret)
		return ret;
	inode_lock(ip);
	if (!inode_dir(ip)) {
		ret = -ENOTDIR;
		goto out;
	}
	/* "." and "..": the kernel takes no reference for them, even with
	 * plus, so only the inode number and type matter. */
	if (off == 0) {
		fs_istat(ip, &st);
		if (fill(ctx, ".", &st, 1))
			goto out;
		off = 1;
	}
	if (off == 1) {
		memset(&st, 0, sizeof(st));
		st.st_ino = inode_ino(ip) == TFS_ROOT_INO ? TFS_ROOT_INO : inode_parent(ip);
		st.st_mode = S_IFDIR;
		if (fill(ctx, "..", &st, 2))
			goto out;
		off = 2;
	}
	for (uint64_t cookie = off, pf = off;;) {
		struct dir_ent e;

		if (cookie >= pf)
			pf = readdir_prefetch(fs, inode_dir(ip), cookie, end, plus);
		/* Cookies grow with every new name: stopping at end keeps a
		 * renamed or new entry from coming round again in this pass. */
		if (dir_next(inode_dir(ip), cookie, &e) || e.cookie >= end)
			break;
		cookie = e.cookie + 1;
		struct tfs_inode *cip;
		/* An inode that cannot be read is listed bare (tfs_dirfill_fn):
		 * skipping its name would hide the damage. */
		if (!readdir_reads(&e, plus) || inode_get(fs, e.ino, &cip)) {
			memset(&st, 0, sizeof(st));
			st.st_ino = e.ino;
			st.st_mode = DTTOIF(e.dtype);
			if (fill(ctx, e.name, &st, e.cookie + 1))
				break;
			continue;
		}
		if (cip == ip) {
			inode_put(fs, cip);
			continue;
		}
		/* Holding the directory keeps the entry's inode alive.  fill
		 * runs without the entry's lock: it may ask for its
		 * generation (tfs_fh_gen). */
		inode_lock(cip);
		fs_istat(cip, &st);
		inode_unlock(cip);
		bool stop = fill(ctx, e.name, &st, e.cookie + 1);
		if (!stop && plus)
			inode_lookup_add(cip, 1);
		inode_put(fs, cip);
		if (stop)
			break;
	}
out:
	inode_unlock(ip);
	inode_put(fs, ip);
	return ret;
}
