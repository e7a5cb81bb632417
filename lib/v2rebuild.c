// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * v2rebuild: a format-v2 checkpoint's set of changes rebuilt from the log
 * after v2dirty lost a note for want of memory (v2rebuild.h, v2dirty.h).
 * Part of the checkpoint (ckpt_v2.c calls it under ckpt_mu).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "apply.h"
#include "btree.h"
#include "dir.h"
#include "fs_i.h"
#include "inode.h"
#include "tlog.h"
#include "v2dirty.h"
#include "v2item.h"
#include "v2rebuild.h"

struct renote_ctx {
	struct tfs *fs;
	struct v2d_how how;
	size_t recs;
};

static int renote(void *ctx, const struct log_rec *r)
{
	struct renote_ctx *c = ctx;

	c->recs++;
	return meta_v2_note(c->fs, r, &c->how);
}

int v2rebuild_set(struct tfs *fs, struct v2dirty *d, struct v2d_set *set, struct v2d_ino ***vec,
		  size_t *n)
{
	struct renote_ctx c = { .fs = fs, .how = { .into = set } };
	uint64_t target = 0, end_pos, next_seq = 0;
	struct v2d_rebuild rb;
	struct log_geom g;
	int ret = 0;

	if (!v2d_rebuild_begin(d, &rb))
		return 0;
	/* The begin waited until every transaction with a lost note was
	 * appended: a commit puts them on the devices, where replay reads. */
	if (fs->log) {
		ret = log_commit(fs->log, UINT64_MAX);
		target = log_durable_seq(fs->log);
	}
	/* The superblock's log, continuation included, without the next
	 * log_ids: no newer log is looked for, the live one is the newest. */
	super_log_geom(&fs->sb, &g);
	g.next_log_id = 0;
	g.cont_next_log_id = 0;
	if (ret == 0)
		ret = log_replay(&fs->mirror, &g, renote, &c, &end_pos, &next_seq);
	/* Chunks after target may be in flight (torn, or not yet there):
	 * what the set needs ends at target. */
	if ((ret == -EBADMSG || ret == -ESTALE) && next_seq > target)
		ret = 0;
	if (ret == 0 && next_seq <= target)
		ret = -EIO;
	if (ret == 0) {
		free(*vec);
		*vec = NULL;
		*n = 0;
		ret = v2d_list(set, vec, n);
	}
	v2d_rebuild_end(d, &rb, ret == 0);
	if (ret == 0)
		atomic_fetch_add(&fs->v2_rebuilds, 1);
	tfs_log(ret ? LOG_ERR : LOG_WARNING,
		"format v2: changes since the last checkpoint were not all noted (out of "
		"memory); rebuilding them from %zu log records %s%s", c.recs,
		ret ? "failed: " : "done", ret ? strerror(-ret) : "");
	return ret;
}

static int cmp_name(const void *a, const void *b)
{
	const struct v2d_name *x = *(const struct v2d_name *const *)a;
	const struct v2d_name *y = *(const struct v2d_name *const *)b;
	int c = memcmp(x->name, y->name, x->len < y->len ? x->len : y->len);

	return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* Whether @ent's DIRINDEX item at @cookie is stale: its name is one of
 * @names (sorted) and the directory no longer holds it at that cookie. */
static bool index_stale(struct tfs_inode *dp, const struct v2_dirent *ent, uint64_t cookie,
			struct v2d_name **names, size_t n)
{
	struct v2d_name key = { .len = ent->namelen, .name = (char *)ent->name }, *kp = &key;
	uint64_t ino, c;

	if (!bsearch(&kp, names, n, sizeof(*names), cmp_name))
		return false;
	return dir_lookup_cookie(inode_dir(dp), ent->name, ent->namelen, &ino, &c) || c != cookie;
}

int v2rebuild_reindex(struct btree *t, struct tfs_inode *dp, const struct v2d_ino *e)
{
	struct bkey lo = v2_key_dirindex(inode_ino(dp), 0), k;
	struct v2d_name **names = malloc((e->nnames ? e->nnames : 1) * sizeof(*names));
	struct bkey *dead = NULL;
	size_t ndead = 0, cap = 0;
	struct bt_iter it;
	const void *val;
	unsigned len;
	int ret;

	if (!names)
		return -ENOMEM;
	for (size_t i = 0; i < e->nnames; i++)
		names[i] = &e->names[i];
	qsort(names, e->nnames, sizeof(*names), cmp_name);
	ret = bt_iter_init(&it, t, &lo);
	if (ret) {
		free(names);
		return ret;
	}
	while ((ret = bt_iter_next(&it, &k, &val, &len)) == 0 && k.id == inode_ino(dp) &&
	       k.type == V2_DIRINDEX) {
		struct v2_dirent ent;

		ret = v2_dirindex_decode(&k, val, len, &ent);
		if (ret)
			break;
		if (!index_stale(dp, &ent, k.off, names, e->nnames))
			continue;
		if (ndead == cap) {
			struct bkey *p = realloc(dead, (cap = cap ? 2 * cap : 16) * sizeof(*p));

			if (!p) {
				ret = -ENOMEM;
				break;
			}
			dead = p;
		}
		dead[ndead++] = k;
	}
	bt_iter_free(&it);
	if (ret == -ENOENT)
		ret = 0;
	for (size_t i = 0; ret == 0 && i < ndead; i++)
		ret = bt_delete(t, &dead[i]);
	free(dead);
	free(names);
	return ret;
}
