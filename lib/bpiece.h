/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * bpiece: the on-disk codec of format v2 "leaf pieces" (design:
 * docs/design-leaf-pieces.md; bytes: docs/FORMAT.md "Leaf pieces").  With
 * SUPER_INCOMPAT_V2_PIECES the stores (bstore.c, v2nodes.c, fsck) read
 * every node through it (step 2b-1) and the tree seals bases with
 * bpiece_seal_base; nothing appends pieces yet.
 *
 * A leaf on disk is a chain of nblocks (1..16) 4 KiB blocks: a base, a
 * short node (bnode.h, "Short nodes") of nb0 blocks, csum seeded with the
 * address, then pieces k = 1, 2, ... of pb (1..15) blocks each, each holding
 * the items changed since the one before (whiteouts for removed keys).
 *
 * Piece (pb blocks, little-endian):
 *   0  u64 csum  XXH3(bytes 8 .. pb*4096-1, seed = csum of piece k-1, the
 *                base's stored csum for k = 1): a chain
 *   8  8   magic "TFSBTP2\0"
 *   16 u64 addr of the extent (the base's)
 *   24 u64 gen  (tree generation that wrote it; > the previous piece's, or
 *                the base's for k = 1)
 *   32 u64 base gen (the base's header gen)
 *   40 u16 k (1..15);  42 u8 pb (1..15);  43 u8 zero
 *   44 u16 nritems (entries, >= 1);  46 u16 zero
 *   48     runs: a run is the entries of one (id, type):
 *            run head 12 B: id u64, type u8, zero u8, count u16 (>= 1)
 *            then count entries of 10 B: off u64 (< 2^56), vlen u16
 *            (0..BNODE_MAX_VAL, or BPIECE_WHITEOUT: the key is removed)
 *          runs strictly ascending by (id, type), offs strictly ascending
 *          in a run, so keys are strictly ascending and two runs never share
 *          (id, type); counts sum to nritems; every key in the base's
 *          [min, max];
 *          values packed back from the piece's end in entry order (entry 0's
 *          value ends at pb*4096), whiteouts take none; zeros between the
 *          last entry and the lowest value; pb is the fewest blocks.
 * A 4 KiB overwrite inside a big file changes three EXTENT items of one
 * inode (head, written, tail): 3 x 10 B of entries + their values, the run
 * head (12 B) once per inode and piece.
 *
 * Strictness (bpiece_load): the base per bnode_copy_matches (short), then
 * bnode_check; each piece its csum in the chain, magic, addr, base gen,
 * consecutive k, gen increasing, zero bytes, the layout above; the pieces
 * end exactly at nblocks; a whiteout must remove a key present in the
 * state before it; the merged state must fit one node.  An item equal to
 * the state before it (a no-op) is accepted: a writer cannot avoid it
 * without the old values.
 */
#ifndef TWINFS_BPIECE_H
#define TWINFS_BPIECE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bnode.h"

#define BPIECE_MAGIC "TFSBTP2\0"
#define BPIECE_EXT_BLOCKS BPTR_MAX_NBLOCKS	/* a leaf extent: 4 slots */
#define BPIECE_MAX_BLOCKS 15u		/* one piece */
#define BPIECE_HDR 48u
#define BPIECE_RUN 12u
#define BPIECE_ENTRY 10u
#define BPIECE_WHITEOUT 0xFFFFu

/* What a loaded chain says (for the next piece and the parent pointer). */
struct bpiece_chain {
	unsigned nb0;			/* blocks of the base */
	unsigned npieces;		/* pieces applied: the next one is k = npieces + 1 */
	uint64_t addr, base_gen;
	uint64_t gen, csum;		/* the last piece's (the base's without pieces) */
};

/* A piece for the sorted keys @keys (strictly ascending, inside the
 * leaf's [min, max]): each key's item in @merged_leaf (the leaf in memory
 * after the changes), or a whiteout when it is not there.  The caller
 * gives only keys whose state differs from the chain's merged state: a key
 * absent both there and here makes a whiteout every reader refuses.  Written
 * to @out (zeros past the items to the piece's end), csum seeded with
 * @prev_csum.  Returns pb (1..15), -E2BIG when it needs more blocks than 15
 * or than @outlen holds, -EINVAL for bad arguments (no keys, unsorted or
 * outside the range, not a leaf, k 0 or over 15, gen <= base_gen, addr 0). */
int bpiece_encode(void *out, size_t outlen, const void *merged_leaf, const struct bkey *keys,
		  unsigned nkeys, uint64_t addr, uint64_t base_gen, uint64_t gen, unsigned k,
		  uint64_t prev_csum);

/* Seal the node @n (in memory) to be written as a base in a format with
 * @short_nodes and @pieces (SUPER_INCOMPAT_V2_PIECES): p->csum its csum,
 * p->nblocks its nb with pieces (0 without), and *c (may be NULL) the
 * chain of that base alone (zeros without pieces). */
void bpiece_seal_base(void *n, bool short_nodes, bool pieces, struct bptr *p,
		      struct bpiece_chain *c);

/* Verify the chain in @buf (nblocks blocks; bytes past them are never read)
 * and merge it into @dst (BNODE_SIZE bytes): the base's items, then each
 * piece in order, an equal key replaced, a whiteout removing.  With @p, the
 * base's address must be p->addr and the last csum and gen p->csum and
 * p->gen; without it the chain is only checked against itself.  @dst is a
 * leaf bnode_check accepts: the base's header, with (when pieces were
 * applied) the last piece's gen, csum = the chain's last csum and nb 0 (the
 * base alone: exactly bnode_unfold's node).  @c (may be NULL) gets what the
 * chain says.  0, or -EUCLEAN with a reason in @why; @dst is then garbage. */
int bpiece_load(void *dst, const void *buf, unsigned nblocks, const struct bptr *p,
		struct bpiece_chain *c, char *why, size_t whylen);
/* bpiece_load against @p into a per-thread buffer: 0 or -EUCLEAN. */
int bpiece_verify_chain(const void *buf, unsigned nblocks, const struct bptr *p);
/* bpiece_load without an expectation: 0 or -EUCLEAN (also when the merged
 * content does not fit one node). */
int bpiece_merge(void *dst, const void *buf, unsigned nblocks);

/* The keys of piece @k (1..) of a chain bpiece_load accepted, ascending,
 * into @keys (room for @max); returns how many, or -EUCLEAN (no such piece,
 * or more than @max). */
int bpiece_keys(const void *buf, unsigned nblocks, unsigned k, struct bkey *keys, unsigned max);

#endif
