/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * bstore: where B+tree nodes (format v2) live.  The tree (btree.c) sees
 * only this interface, so it runs on the mirror now (bstore_mirror below)
 * and in memory in the tests; the file system will plug its allocator in.
 *
 * Contract of the operations (all return 0 or -errno):
 *   read   the node @p names into buf (BNODE_SIZE, 4096-aligned).  0 only
 *          when the bytes are exactly that node (bnode_matches: csum seeded
 *          with p->addr, header address and generation; with pieces the
 *          chain of p->nblocks blocks, bpiece_load, merged into one node);
 *          a store with copies tries each and repairs the bad ones; -EIO
 *          when no copy matches: never other bytes.  @chain (may be NULL)
 *          gets what a pieces store's chain says (zeros without pieces).
 *   write  the sealed node at addr (every copy).
 *   write_many  (optional) many sealed nodes, issued together.
 *   flush  make every write before it durable (NULL: nothing to do).
 *   alloc  a free node address (BNODE_BLOCKS blocks); -ENOSPC.
 *   free   give an address back: only once nothing durable references it.
 * Every operation may be called from several threads at once: a tree's
 * writers run in parallel (btree.h), and trees share a store.
 */
#ifndef TWINFS_BSTORE_H
#define TWINFS_BSTORE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bnode.h"
#include "bpiece.h"

struct bstore_ops {
	int (*read)(void *ctx, const struct bptr *p, void *buf, struct bpiece_chain *chain);
	int (*write)(void *ctx, uint64_t addr, const void *buf);
	/* Optional: the @n sealed nodes at addrs[i] from bufs[i], as write
	 * each, issued together (NULL: the tree writes them one by one).
	 * 0 or the first error; all are tried. */
	int (*write_many)(void *ctx, size_t n, const uint64_t *addrs, void *const *bufs);
	int (*flush)(void *ctx);
	int (*alloc)(void *ctx, uint64_t *addr);
	void (*free)(void *ctx, uint64_t addr);
};

struct bstore {
	const struct bstore_ops *ops;
	void *ctx;
	/* Nodes are short on disk (SUPER_INCOMPAT_V2_SHORT_NODES): the tree
	 * seals them with bnode_seal_short, the mirror store writes and
	 * verifies their folded images.  A store over another copies it. */
	bool short_nodes;
	/* Pointers carry nblocks (SUPER_INCOMPAT_V2_PIECES, needs
	 * short_nodes): a read takes exactly p->nblocks blocks, a base and
	 * any leaf pieces, verifies the chain and merges it (bpiece_load);
	 * the tree writes bases only and sets nblocks to their nb. */
	bool pieces;
};

/* Blocks a read of the node @p names takes in @st's format: p->nblocks
 * with pieces (1..BPTR_MAX_NBLOCKS), the whole slot without (nblocks must
 * be 0).  0: the pointer is malformed for the format (no copy can match). */
unsigned bstore_read_blocks(const struct bstore *st, const struct bptr *p);
/* The copy @raw (bstore_read_blocks blocks as read) is the node @p names
 * in @st's format.  With pieces the chain is verified and merged into
 * @node (BNODE_SIZE bytes, not @raw; NULL: verify only), *c (may be NULL)
 * gets the chain; without, @raw is checked in place (folded) and
 * bstore_copy_node turns it into the node. */
bool bstore_copy_ok(const struct bstore *st, const struct bptr *p, const void *raw, void *node,
		    struct bpiece_chain *c);
/* After bstore_copy_ok (and any repair from @raw): without pieces unfold
 * @raw, which is the node; with pieces nothing (@node has it). */
void bstore_copy_node(const struct bstore *st, void *raw);

/*
 * The mirror store: nodes in the block range [start, start + nslots *
 * BNODE_BLOCKS) of a mirror, written to every in-sync device by
 * mirror_write.  A read takes one copy (the mirror's read rotation) and
 * checks it against the parent pointer; a copy that fails (read error or
 * mismatch) is counted once per node (MEV_CSUM_ERR / MEV_READ_ERR), the other devices
 * are tried, a good copy is returned and written over every bad one
 * (MEV_REPAIRED, unless the mirror is no_repair); no good copy:
 * MEV_UNRECOVERABLE and -EIO.  With all_copies every copy is read and
 * checked (fsck).  With store.short_nodes a write puts only the node's
 * folded image (its nb blocks, bnode_fold) on the devices, a read takes
 * the whole slot, verifies the folded image (bnode_copy_matches) and
 * unfolds it; a repair writes the good copy's nb blocks.  With
 * store.pieces a read takes the pointer's nblocks blocks (into a bounce),
 * verifies the chain (base and leaf pieces) and merges it into buf; a
 * repair writes those nblocks blocks as read.  Its allocator (a slot bitmap, first fit
 * after a cursor, under mu, not persisted) is a stand-in: the file system
 * puts fspace's node store (fspace_node_store, fspace.h) over this one,
 * which uses its read, write and flush and allocates from the node map the
 * free-space tree persists.
 */
struct bstore_mirror {
	struct bstore store;		/* ops + ctx = this */
	struct mirror *m;
	uint64_t start, nslots;
	pthread_mutex_t mu;		/* leaf lock: used, cursor, nused */
	uint8_t *used;			/* one byte per slot */
	uint64_t cursor, nused;
	/* Set before use: every read also checks (and repairs) the copies
	 * on the other devices, not only until one verifies (fsck). */
	bool all_copies;
};

int bstore_mirror_init(struct bstore_mirror *s, struct mirror *m, uint64_t start,
		       uint64_t nslots);
/* A good copy read (bstore_read_blocks blocks) made ready to repair bad
 * ones.  Returns the blocks a repair writes: with pieces exactly the
 * pointer's nblocks, as read; else the whole slot, past a short node's nb
 * blocks zeroed, so a latent error past nb (which fails every whole-slot
 * read of that copy) is written over too. */
unsigned bstore_repair_image(void *buf, const struct bstore *st, const struct bptr *p);
/* A copy of the node @p names that verifies, as on disk (@raw: room for
 * bstore_read_blocks blocks), from any readable device; no repair, errors
 * counted as reads count them.  0 or -EIO. */
int bstore_mirror_raw(struct bstore_mirror *s, const struct bptr *p, void *raw);
void bstore_mirror_destroy(struct bstore_mirror *s);
/* Mark an address in use (reopening a tree whose nodes are on disk). */
int bstore_mirror_claim(struct bstore_mirror *s, uint64_t addr);

#endif
