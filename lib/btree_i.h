/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * btree_i.h: what btree.c (locking, changes, commit) shares with
 * btree_iter.c (iteration, verification): a locked path and its restarts.
 * Private to those two files.
 */
#ifndef TWINFS_BTREE_I_H
#define TWINFS_BTREE_I_H

#include "btree.h"

/* Node lock modes.  LK_XTRY (a request only): exclusive if free at once,
 * for a lock out of the root-to-leaf order (a sibling). */
enum { LK_NONE, LK_S, LK_X, LK_XTRY };
enum { OP_READ, OP_INSERT, OP_DELETE };

/* What a descent is for: a change locks what it may change. */
struct op {
	int kind;
	const struct bkey *k;
	unsigned len;			/* insert: the value's length */
	unsigned stop;			/* a read: the level it stops at (0: the leaf) */
};

/* A node a descent found missing from the cache: read with no node lock
 * held, then the descent starts again. */
struct miss {
	bool want;
	struct bptr p;
	unsigned level;
	struct bkey lo, hi;
	bool has_hi;
};

#define NPINS (2 * BNODE_MAX_LEVEL)

struct path {
	unsigned top;				/* level of the root */
	struct bcache_node *n[BNODE_MAX_LEVEL];	/* n[l]: the node at level l */
	unsigned char mode[BNODE_MAX_LEVEL];	/* the lock held on n[l] */
	unsigned slot[BNODE_MAX_LEVEL];		/* slot[l]: n[l-1]'s pointer in n[l] */
	struct bkey lo[BNODE_MAX_LEVEL], hi[BNODE_MAX_LEVEL];
	bool has_hi[BNODE_MAX_LEVEL];
	/* sib[l]: the sibling of n[l] a delete merges with (exclusive). */
	struct bcache_node *sib[BNODE_MAX_LEVEL];
	unsigned char rootm;			/* the lock held on t->root_lock */
	struct miss miss;
	/* A sibling that was busy: waited for (locked and let go) with
	 * nothing held, then the descent starts again. */
	struct bcache_node *wait;
	/* Nodes this operation read (one reference each): a restart finds
	 * them even in a cache too small for the path. */
	struct bcache_node *pin[NPINS];
	unsigned npin;
};

void btp_init(struct path *pa);
/* Lock the path to @op->k's leaf (btree.h "Locking"), reading missing
 * nodes between tries: 0 (pa->n[0] is the leaf), -ENOENT, -errno. */
int btp_lock(struct btree *t, struct path *pa, const struct op *op);
/* Let go of every lock and node of the path (not the pins). */
void btp_release(struct btree *t, struct path *pa);
void btp_unpin(struct btree *t, struct path *pa);
/* The cached node @p names, locked in @mode (LK_NONE: the tree is quiet;
 * LK_XTRY: exclusive); -EAGAIN when not cached (pa->miss names it,
 * btp_load_miss reads it) or LK_XTRY found it busy (pa->wait). */
int btp_node_get(struct btree *t, struct path *pa, const struct bptr *p, unsigned level,
		 const struct bkey *lo, const struct bkey *hi, int mode,
		 struct bcache_node **out);
int btp_load_miss(struct btree *t, struct path *pa);
int btp_check_node(const struct btree *t, const void *b, unsigned level,
		   const struct bkey *lo, const struct bkey *hi);

#endif
