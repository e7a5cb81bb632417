/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fsck_v2_i.h: private to the format-v2 fsck files.  fsck_v2.c: the
 * devices, the node store, the structure of every tree, free space against
 * the node map, node copies and the commit of repairs; fsck_v2_meta.c: what
 * the items mean together (names, link counts, orphans, extents against
 * the refcount and free-space trees) and the repairs of that;
 * fsck_v2_data.c: every data block's copies, against the EXTENT items.
 *
 * Single-threaded.
 */
#ifndef TWINFS_FSCK_V2_I_H
#define TWINFS_FSCK_V2_I_H

#include <stdbool.h>
#include <stdint.h>

#include "bcache.h"
#include "bstore.h"
#include "btree.h"
#include "fsck_i.h"
#include "fspace.h"
#include "mirror.h"
#include "v2item.h"

struct v2meta;
struct v2touch;
struct v2lmap;
struct v2acl;

struct v2ck {
	struct fck *c;
	const struct super *sb;
	struct mirror m;
	struct bstore_mirror s;
	struct bstore rec;		/* s.store, recording what it reads */
	uint64_t *reached;		/* node slots read through rec */
	uint64_t *pointed;		/* node slots a root or parent names */
	uint64_t nslots;
	struct bcache *cache;
	struct dev_backend *be;
	struct dev *d[DEV_MAX];
	unsigned bad_items;
	bool root_seen;
	uint64_t nodes;			/* nodes verified (every copy) */
	/* The inode whose items the walk is in (items sort by inode, its
	 * INODE item first): what the others must agree with. */
	uint64_t cur_ino;		/* 0: none yet */
	uint32_t cur_mode, cur_tlen;
	unsigned cur_chunks;		/* SYMLINK items seen */
	bool tree_bad[V2_NTREES + 1];	/* could not be walked */
	uint64_t twice;			/* nodes referenced more than once */
	uint64_t next_ino;		/* a repair raises the superblock's to it */
	uint64_t inodes;		/* INODE items once repaired: the superblock's */
	struct fspace *fs;		/* open after check_free_space (NULL: damaged) */
	struct v2meta *meta;
	struct v2acl *acl;		/* fsck_v2_acl.c */
	uint64_t shared_items;		/* REFCOUNT items: blocks shared by reflinks */
	/* What the log after the checkpoint changes (fsck_v2_data.c). */
	struct v2touch *touch;
	size_t ntouch, captouch;
	bool touch_lost;		/* no memory to note it all */
	struct v2lmap *lmap;		/* the log's own map (fsck_v2_data.c) */
	bool lmap_lost;
	bool log_unread;		/* the log could not be read to its end */
	bool data_partial;		/* some data copies were not checked */
	/* Where check_log's replay ended: the log a stale device must hold
	 * (fsck_v2_stale.c); log_ok once it ends cleanly there. */
	struct log_geom lg;
	uint64_t log_end, log_next;
	bool log_ok;
	/* -y cut the log before a continuation began (cut_log): the
	 * superblocks it writes drop the continuation, whose log is gone. */
	bool cont_cut;
	void *stale_buf;		/* one node, for the stale copies */
	unsigned synced;		/* stale devices brought up to date */
};

/* ---- fsck_v2_meta.c ---- */
/* 0 or -ENOMEM. */
int v2m_init(struct v2ck *v);
void v2m_free(struct v2ck *v);
/* Every item that decoded, in walk order (fsck_v2.c's check_item). */
void v2m_item(struct v2ck *v, uint64_t owner, const struct bkey *k, const void *val,
	      unsigned len);
/* After the walks and the free-space check: the cross-item rules, each
 * problem reported and its repair recorded. */
void v2m_check(struct v2ck *v);
/* Repairs recorded (tree items or free space). */
bool v2m_pending(const struct v2ck *v);
/* Apply the recorded repairs: items through @t (a transaction open on the
 * inodes tree), data runs through v->fs.  0 or -errno. */
int v2m_apply(struct v2ck *v, struct btree *t);

/* ---- fsck_v2_acl.c ---- */
/* 0 or -ENOMEM. */
int v2acl_init(struct v2ck *v);
/* Every INODE, XATTR and XCHUNK item of the inodes tree that decoded, in
 * walk order: the ACL xattrs of each inode checked once its items are
 * all seen, each problem reported and its repair recorded. */
void v2acl_item(struct v2ck *v, const struct bkey *k, const void *val, unsigned len);
/* After the walk: the last inode's. */
void v2acl_end(struct v2ck *v);
/* A record of the log after the checkpoint (check_log's replay). */
void v2acl_note(struct v2ck *v, const struct log_rec *r);
/* After check_log: the access ACLs out of step with the mode of an inode
 * the log does not change, reported and their repairs recorded. */
void v2acl_report(struct v2ck *v);
bool v2acl_pending(const struct v2ck *v);
/* The recorded repairs through @t (v2m_apply calls it last).  0 or -errno. */
int v2acl_apply(struct v2ck *v, struct btree *t);
void v2acl_free(struct v2ck *v);

/* ---- fsck_v2_stale.c ---- */
/* After mirror_init in v2_open: the stale devices (c->stale) join the
 * mirror as MDEV_STALE, so nothing reads from them; each is reported.
 * Leaves one out while a rebuild onto it runs.  0 or -ENOMEM. */
int v2stale_open(struct v2ck *v, struct dev **mdevs);
/* Every node the walks read (verified, in buf), on its first read:
 * compared with each stale device's copy, which -y/-p overwrites. */
void v2stale_node(struct v2ck *v, const struct bptr *p, const void *buf);
/* After the data check, before the commit: the log copied onto each stale
 * device whose nodes and data are all up to date, flushed, and then the
 * device made MDEV_OK (v->synced), so the commit writes it and its
 * superblocks record it in sync. */
void v2stale_finish(struct v2ck *v);
void v2stale_free(struct v2ck *v);

/* ---- fsck_v2_data.c ---- */
/* A record of the log after the checkpoint (check_log's replay, in order):
 * the file blocks it changes are not checked against the checkpoint. */
void v2data_note(struct v2ck *v, const struct log_rec *r);
/* After check_log: every written block the EXTENT items map, on every
 * copy, reported and repaired as version 1's data pass does. */
void v2data_check(struct v2ck *v);
/* Frees what v2data_note kept. */
void v2data_free(struct v2ck *v);

#endif
