/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * v2dirty: what changed in the metadata since the last checkpoint of a
 * format-v2 file system (step 3: docs/FORMAT.md "Mounting version 2").
 * meta_apply (apply.c), the only mutator, notes every change here; the
 * checkpoint (ckpt_v2.c) takes the set at its log barrier and writes only
 * those inodes' items into the INODES tree.
 *
 * Per inode: its INODE item (and symlink target), its xattrs (all of them
 * are rewritten), its deletion (every item goes), for a directory the
 * names set or removed (and the cookies removed, whose DIRINDEX items go),
 * for a file the file block ranges whose EXTENT items must be rewritten,
 * widened to V2D_CHUNK blocks and merged (a truncate is one range, however
 * large).
 *
 * Locking: d->mu, a leaf lock, around every note and the take; meta_apply
 * calls it with the objects' locks held.  Functions return 0 or -errno; a
 * note that cannot get memory sets d->lost, and the next checkpoint fails
 * (-ENOMEM) rather than write a tree that misses a change (the log keeps
 * everything until a checkpoint succeeds).
 */
#ifndef TWINFS_V2DIRTY_H
#define TWINFS_V2DIRTY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define V2D_CHUNK 256ull		/* blocks: extent ranges are widened to these */

enum {
	V2D_INODE = 1,			/* INODE (+ SYMLINK) item */
	V2D_XATTR = 2,			/* every XATTR/XCHUNK item */
	V2D_DEAD = 4,			/* inode deleted: every item goes */
};

struct v2d_range {
	uint64_t from, to;		/* file blocks, multiples of V2D_CHUNK */
};

struct v2d_name {
	uint16_t len;
	char *name;
};

struct v2d_ino {
	uint64_t ino;
	unsigned flags;
	struct v2d_range *ext;		/* sorted, disjoint, not touching */
	size_t next, capext;
	struct v2d_name *names;		/* directories: names set or removed */
	size_t nnames, capnames;
	uint64_t *cookies;		/* directories: cookies removed */
	size_t ncookies, capcookies;
	struct v2d_ino *hnext;
};

/* A set of changed inodes. */
struct v2d_set {
	struct v2d_ino **b;		/* hash buckets, power of two */
	size_t nb, n;
	size_t bytes;			/* what the set's memory comes to */
	bool lost;			/* a note failed for want of memory */
};

struct v2dirty {
	pthread_mutex_t mu;		/* leaf: set, taken */
	struct v2d_set set;
	/* The set a checkpoint took and is writing (NULL outside one): its
	 * inodes are not in the trees until the checkpoint is done (v2d_state
	 * looks here too). */
	struct v2d_set *taken;
	/* set's bytes plus taken's: read without d->mu (v2d_bytes). */
	_Atomic uint64_t bytes;
};

int v2d_init(struct v2dirty *d);
void v2d_destroy(struct v2dirty *d);

void v2d_note_inode(struct v2dirty *d, uint64_t ino, unsigned flags);
void v2d_note_ext(struct v2dirty *d, uint64_t ino, uint64_t fblk, uint64_t n);
/* A name of directory @dir set or removed; @dead_cookie (0: none) is the
 * cookie an entry removed or replaced had. */
void v2d_note_name(struct v2dirty *d, uint64_t dir, const char *name, uint16_t len,
		   uint64_t dead_cookie);

/* Move the set out (d keeps an empty one): *out, every inode of it in
 * ascending order in *v (malloc'd) and *nv.  -ENOMEM (d unchanged). */
int v2d_take(struct v2dirty *d, struct v2d_set *out, struct v2d_ino ***v, size_t *nv);
/* Give a taken set back (its checkpoint failed): merged into d's. */
void v2d_give_back(struct v2dirty *d, struct v2d_set *s);
/* The checkpoint of a taken set is done (its superblock is durable): free
 * it; its inodes are clean from here. */
void v2d_release(struct v2dirty *d, struct v2d_set *s);
/* What the trees do not show yet about @ino (the inode cache, icache.c,
 * asks before it drops an inode or reads one in): -1 when nothing (the
 * INODES tree holds all of it), else the V2D_* flags noted in the set or
 * in the set a checkpoint is writing (0 for names or extents only).  After
 * a note failed for memory (lost) every inode counts as changed. */
int v2d_state(struct v2dirty *d, uint64_t ino);
void v2d_set_free(struct v2d_set *s);
size_t v2d_count(struct v2dirty *d);
/* Memory the noted changes take (the open set and the one a checkpoint is
 * writing): part of the dirty budget (fs.c), without a lock. */
uint64_t v2d_bytes(struct v2dirty *d);

#endif
