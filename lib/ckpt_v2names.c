// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ckpt_v2names: a checkpoint's directory items of one changed directory
 * (ckpt_v2_put_names, ckpt_v2.h), out of ckpt_v2.c as ckpt_v2ext.c is:
 * each changed name's DIRENT list rewritten from memory, its DIRINDEX item
 * (the readdir cookie, with the child's type, which memory keeps too)
 * put or, for a removed entry's cookie, deleted.
 */
#include <errno.h>
#include <stdint.h>
#include <sys/stat.h>

#include "btree.h"
#include "ckpt_v2.h"
#include "dir.h"
#include "fs_i.h"
#include "inode_i.h"
#include "v2dirty.h"
#include "v2item.h"
#include "v2rebuild.h"

static uint8_t dtype_of(struct tfs *fs, uint64_t ino, int *err)
{
	struct tfs_inode *cp;
	uint32_t mode;
	int ret = inode_get(fs, ino, &cp);

	if (ret) {
		/* An entry naming no inode is damage; a child that could not
		 * be read in (-EIO, -ENOMEM) fails the checkpoint as that. */
		*err = ret == -ENOENT ? -EUCLEAN : ret;
		return 0;
	}
	mode = inode_mode(cp);
	inode_put(fs, cp);
	return (uint8_t)((mode & S_IFMT) >> 12);	/* DT_* (IFTODT) */
}

/* One name of directory @dp as memory has it now: its DIRENT list and,
 * if it exists, its DIRINDEX item. */
static int put_name(struct tfs *fs, struct btree *t, struct tfs_inode *dp,
		    const struct v2d_name *nm, uint8_t *buf)
{
	struct bkey k = v2_key_dirent(dp->ino, v2_hash56(fs->sb.hash_seed, nm->name, nm->len));
	struct v2_dirent e = { .namelen = nm->len, .name = nm->name };
	uint64_t cookie;
	unsigned len = 0, ilen;
	int ret;

	ret = bt_lookup(t, &k, buf, BNODE_MAX_VAL, &len);
	if (ret == -ENOENT) {
		len = 0;
		ret = 0;
	}
	if (ret == 0 && len) {
		ret = v2_dirent_del(buf, &len, nm->name, nm->len);
		if (ret == -ENOENT)
			ret = 0;
	}
	if (ret == 0 && dir_lookup_cookie(dp->dir, nm->name, nm->len, &e.ino, &cookie) == 0) {
		uint8_t ibuf[V2_DIRENT_HDR + LOG_NAME_MAX];
		struct bkey ik = v2_key_dirindex(dp->ino, cookie);

		e.dtype = dtype_of(fs, e.ino, &ret);
		if (ret == 0)	/* memory's too: a plain readdir reads no child */
			(void)dir_set_dtype(dp->dir, nm->name, nm->len, e.dtype);
		if (ret == 0)
			ret = v2_dirent_add(buf, &len, BNODE_MAX_VAL, &e);
		if (ret == 0)
			ret = v2_dirindex_encode(&e, ibuf, sizeof(ibuf), &ilen);
		if (ret == 0)
			ret = bt_insert(t, &ik, ibuf, ilen);
	}
	if (ret)
		return ret;
	if (len)
		return bt_insert(t, &k, buf, len);
	ret = bt_delete(t, &k);
	return ret == -ENOENT ? 0 : ret;
}

int ckpt_v2_put_names(struct tfs *fs, struct btree *t, struct tfs_inode *dp,
		     const struct v2d_ino *e, uint8_t *buf)
{
	int ret = 0;

	if (!dp->dir)
		return e->nnames ? -EUCLEAN : 0;
	if (e->flags & V2D_REINDEX)
		ret = v2rebuild_reindex(t, dp, e);
	/* Removed entries' cookies first: a name set again has a new one. */
	for (size_t i = 0; ret == 0 && i < e->ncookies; i++) {
		struct bkey k = v2_key_dirindex(dp->ino, e->cookies[i]);

		ret = bt_delete(t, &k);
		if (ret == -ENOENT)
			ret = 0;
	}
	for (size_t i = 0; ret == 0 && i < e->nnames; i++)
		ret = put_name(fs, t, dp, &e->names[i], buf);
	return ret;
}
