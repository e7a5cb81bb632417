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
 * calls it with the objects' locks held.  Functions return 0 or -errno.
 *
 * Out of memory.  A note that cannot get memory loses a change: d->lost.
 * The set is then incomplete, and two things must not guess:
 *  - the checkpoint.  The log holds every record since the last one, so
 *    the checkpoint that finds d->lost rebuilds what changed from the log
 *    itself (ckpt_v2.c, v2d_rebuild_begin/end): the records from the log
 *    head to its end, noted into the set it took (v2d_note_* with
 *    h->into), as a mount's replay would note them.  A removed name's old
 *    cookie is not in a record, so such a directory is marked V2D_REINDEX
 *    and the checkpoint finds its stale DIRINDEX items by a scan.  A note
 *    made inside a transaction (h->txlost) counts the transaction as open
 *    until its record is appended (v2d_tx_logged): the rebuild waits for
 *    those, so it never reads the log before a lost record is in it.  A
 *    note failing after the rebuild began keeps d->lost for the next one.
 *  - the inode cache.  While lost, every inode counts as changed (none is
 *    dropped: its change may be the lost one).  A read-in must not bring
 *    back a number deleted since the checkpoint: a death that cannot get
 *    an entry goes into d->dead (no allocation), so v2d_state still
 *    answers V2D_DEAD for it; only past V2D_DEAD_SPARE such deaths
 *    (d->dead_lost) is a number not known dead V2D_UNSURE, and a read-in
 *    of a number no name or handle vouches for (a walk of the tree, the
 *    checkpoint's own: inode_get_walk) fails (-ENOMEM) rather than
 *    guess, until a rebuild.  A number reached through a name, a parent
 *    or a kernel handle is alive: those read-ins go on.  To keep that
 *    window short the dirty gate asks for a checkpoint at the first
 *    change after a failed note (v2d_lost_take), and the walks of scrub
 *    and rebuild verify wait for checkpoints to end (fs_ckpt_wait, a few
 *    times) before they give up with ENOMEM.
 * Nothing is lost for durability: the log keeps every record until a
 * checkpoint whose set holds them all is durable.
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
	/* Directories: names noted by a rebuild, whose removed cookies are
	 * unknown: the checkpoint scans the DIRINDEX items for them. */
	V2D_REINDEX = 8,
	/* v2d_state only: not known dead, and deaths were lost. */
	V2D_UNSURE = 16,
};

#define V2D_DEAD_SPARE 128		/* deaths kept without memory */
/* Node slots an inode's deletion writes at worst, counted in a set's
 * @other from the note that makes it V2D_DEAD: its items are one key range
 * of the INODES tree and one of its EXTENT items, whose two edge leaves
 * are copied and merged with a sibling (4), and its ORPHAN item goes (2;
 * fs_i.h FS_NS_DELETE). */
#define V2D_DEAD_SLOTS 6

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
	/* V2D_XATTR: node slots the rewrite of its xattrs writes, the most
	 * a note gave (v2d_note_xattr; in flags' padding: the gate counts
	 * this struct's bytes as notes). */
	uint32_t xslots;
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
	size_t tbytes;			/* of which the hash table */
	/* For the node gate (fs.c): tree nodes the checkpoint of the set's
	 * extent ranges may copy (V2D_TOUCH per chunk a range covers), and
	 * bytes of items its extent changes may add (the notes' @grow). */
	uint64_t touch, grow;
	/* Node slots counted as such: the inodes' xattr rewrites (xslots)
	 * and deletions (V2D_DEAD_SLOTS each). */
	uint64_t other;
};

/* Nodes a changed V2D_CHUNK of a file may make a checkpoint copy: the
 * chunk's items at their worst (256 one-block written extents, 56 bytes
 * each in a leaf: 14 KiB) fill one leaf, or two after a split. */
#define V2D_TOUCH 2

/* How a note is made (NULL: live, into the open set, outside a
 * transaction). */
struct v2d_how {
	struct v2d_set *into;		/* a rebuild: into the taken set */
	bool *txlost;			/* the transaction's: a note of it failed */
};

struct v2dirty {
	pthread_mutex_t mu;		/* leaf: set, taken */
	struct v2d_set set;
	/* The set a checkpoint took and is writing (NULL outside one): its
	 * inodes are not in the trees until the checkpoint is done (v2d_state
	 * looks here too). */
	struct v2d_set *taken;
	/* set's bytes plus taken's: read without d->mu (v2d_bytes); and
	 * their touch and grow (v2d_tree_need). */
	_Atomic uint64_t bytes, touch, grow, other;
	/* bytes less the hash tables': what the notes themselves take
	 * (v2d_note_bytes, for the node gate). */
	_Atomic uint64_t notes;
	/* A note failed since the last rebuild: the next checkpoint rebuilds
	 * from the log.  fails counts failed notes (ever); lost_open the
	 * transactions with a failed note not in the log yet (lost_cv). */
	bool lost;
	uint64_t fails;
	/* A note failed since the last v2d_lost_take (no d->mu). */
	_Atomic bool lost_new;
	unsigned lost_open;
	pthread_cond_t lost_cv;
	/* Deaths that could not get an entry (v2d_state reads them), and
	 * whether more than fit were lost. */
	uint64_t dead[V2D_DEAD_SPARE];
	size_t ndead;
	bool dead_lost;
};

/* What a rebuild started from (v2d_rebuild_begin). */
struct v2d_rebuild {
	uint64_t fails;
	size_t ndead;
};

int v2d_init(struct v2dirty *d);
void v2d_destroy(struct v2dirty *d);

/* Notes: -ENOMEM when the change could not be kept (into the open set:
 * d->lost, and *h->txlost; into a rebuilt set: that rebuild fails). */
int v2d_note_inode(struct v2dirty *d, uint64_t ino, unsigned flags, const struct v2d_how *h);
/* The bytes of items an extent change of @n blocks may add to the trees,
 * for the node gate (fs.c): a set (@set) cuts the item around its end (one
 * more item) and adds its own, of at most 256 blocks and 8 bytes of csum a
 * block when written (not @unwritten); the blocks it takes or frees split
 * a FREE run (one more item).  A clear makes one cut and one split.
 * Whatever it removes is not subtracted: an estimate from above. */
#define V2D_GROW_ITEM 48ull		/* a 20-byte head, a body of up to 28 */
static inline uint64_t v2d_ext_grow(uint64_t n, bool set, bool unwritten)
{
	if (!set)
		return 2 * V2D_GROW_ITEM;
	if (unwritten)
		return 3 * V2D_GROW_ITEM;
	return (2 + (n + 255) / 256) * V2D_GROW_ITEM + 8 * n;
}
/* File blocks [fblk, fblk + n) of @ino changed; @grow: bytes of items the
 * change may add to the trees (the node gate's estimate, v2d_ext_grow). */
int v2d_note_ext(struct v2dirty *d, uint64_t ino, uint64_t fblk, uint64_t n, uint64_t grow,
		 const struct v2d_how *h);
/* As v2d_note_ext into @d's open set, for extpend_note_late (a pending
 * piece a checkpoint found outside its set). */
int v2d_note_late(void *d, uint64_t ino, uint64_t fblk, uint64_t n);
/* @ino's xattrs changed (V2D_XATTR), and rewriting them all writes
 * @slots node slots (the node gate's estimate: meta_v2_xattr_slots). */
int v2d_note_xattr(struct v2dirty *d, uint64_t ino, uint64_t slots, const struct v2d_how *h);
/* A name of directory @dir set or removed; @dead_cookie (0: none) is the
 * cookie an entry removed or replaced had (a rebuild knows none: the
 * directory is marked V2D_REINDEX). */
int v2d_note_name(struct v2dirty *d, uint64_t dir, const char *name, uint16_t len,
		  uint64_t dead_cookie, const struct v2d_how *h);
/* The transaction whose *txlost a note set is in the log now (appended,
 * or it never will be: the file system went read-only). */
void v2d_tx_logged(struct v2dirty *d);

/* Whether the checkpoint must rebuild its set from the log (d->lost);
 * if so, waits until every transaction with a lost note is appended, and
 * fills *rb.  Then the caller notes every record from the log head to the
 * log's end into its taken set and calls v2d_rebuild_end (ok: all were
 * noted), which clears lost unless a note failed meanwhile. */
bool v2d_rebuild_begin(struct v2dirty *d, struct v2d_rebuild *rb);
void v2d_rebuild_end(struct v2dirty *d, const struct v2d_rebuild *rb, bool ok);
/* Whether a note failed since the last call (once per failure episode,
 * lock-free): the dirty gate asks for a checkpoint then, so the window in
 * which no inode leaves the cache and walks may fail (V2D_UNSURE) lasts
 * one checkpoint, not until the budget or the timer asks for one. */
bool v2d_lost_take(struct v2dirty *d);
/* Failed notes since v2d_init (stats). */
uint64_t v2d_fails(struct v2dirty *d);
/* Deaths kept aside now, and whether more were lost (stats). */
size_t v2d_dead_kept(struct v2dirty *d, bool *overflow);
/* Test hook: v2dirty's allocations number @after to @after + @count - 1,
 * counted from this call, fail (process-wide; 0, 0: none).  Also read by
 * v2d_init from TWINFS_V2DIRTY_FAIL=AFTER,COUNT in the environment. */
void v2d_fail_allocs(uint64_t after, uint64_t count);

/* Move the set out (d keeps an empty one): *out, every inode of it in
 * ascending order in *v (malloc'd) and *nv.  -ENOMEM (d unchanged). */
int v2d_take(struct v2dirty *d, struct v2d_set *out, struct v2d_ino ***v, size_t *nv);
/* Every inode of @s in ascending order in *v (malloc'd) and *nv: a taken
 * set again after its rebuild (only the checkpoint changes it). */
int v2d_list(const struct v2d_set *s, struct v2d_ino ***v, size_t *nv);
/* Give a taken set back (its checkpoint failed): merged into d's. */
void v2d_give_back(struct v2dirty *d, struct v2d_set *s);
/* The checkpoint of a taken set is done (its superblock is durable): free
 * it; its inodes are clean from here. */
void v2d_release(struct v2dirty *d, struct v2d_set *s);
/* What the trees do not show yet about @ino (the inode cache, icache.c,
 * asks before it drops an inode or reads one in): -1 when nothing (the
 * INODES tree holds all of it), else the V2D_* flags noted in the set or
 * in the set a checkpoint is writing (0 for names or extents only), with
 * V2D_DEAD for a death kept in d->dead.  While lost, every other inode
 * counts as changed (0); V2D_UNSURE joins any answer without V2D_DEAD
 * when deaths were lost too. */
int v2d_state(struct v2dirty *d, uint64_t ino);
void v2d_set_free(struct v2d_set *s);
size_t v2d_count(struct v2dirty *d);
/* Memory the noted changes take (the open set and the one a checkpoint is
 * writing): part of the dirty budget (fs.c), without a lock. */
uint64_t v2d_bytes(struct v2dirty *d);
/* v2d_bytes without the sets' hash tables: the notes, which the node gate
 * turns into slots (a table is memory, never a node). */
uint64_t v2d_note_bytes(struct v2dirty *d);
/* The open and the taken set's touch and grow (struct v2d_set), without a
 * lock: what the next checkpoint's extent items may need of the node
 * area (fs.c's node gate). */
void v2d_tree_need(struct v2dirty *d, uint64_t *touch, uint64_t *grow);
/* The xattr rewrite the open set counts for @ino (0: none). */
uint64_t v2d_xslots(struct v2dirty *d, uint64_t ino);
/* The open and taken sets' xattr rewrites, in node slots (v2d_note_xattr). */
uint64_t v2d_other_slots(struct v2dirty *d);

#endif
