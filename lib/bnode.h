/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * bnode: the node format of the format-v2 copy-on-write B+trees (not used
 * by mount yet; docs/FORMAT.md "Format v2").  One node is BNODE_SIZE bytes
 * at a 4 KiB-block address, worked on in place as raw bytes (little-endian,
 * field by field) so the node cache holds exactly what is on disk.
 *
 * Layout: a 96-byte header (with the node's own key range [min, max], so a
 * node found without its parent says where it belongs), then
 *   leaf (level 0):     nritems item heads (key, value offset, value size)
 *                       from the front; values packed from the end of the
 *                       node backwards, item 0's value last in the node,
 *                       with no gap; zeros in between;
 *   internal (level>0): nritems child pointers (key, addr, gen, csum), then
 *                       zeros.
 * Keys are strictly ascending and inside [min, max].  Child i holds keys in
 * [key i, key i+1) (the last child: up to the node's max); key 0 of an
 * internal node is its min.  The parent's range for a child and the child's
 * own must agree exactly.
 *
 * csum = XXH3(bytes 8 .. BNODE_SIZE-1, seed = addr): the same value is in
 * the header and in the parent's pointer, so a node is verified through its
 * parent (a lost or stale write fails by csum and generation, a misdirected
 * one by the seed and the header address).
 *
 * Short nodes (format v2 with SUPER_INCOMPAT_V2_SHORT_NODES): on disk
 * only the fewest blocks nb (1..4) that hold the front part and the values
 * are written, the values moved to end at nb * 4096 ("folded"), nb in the
 * header (byte 60) and the csum over bytes 8 .. nb * 4096 - 1 of that
 * image.  A slot is still BNODE_SIZE bytes: the bytes past nb * 4096 are
 * not the node's.  In memory a node is always whole (unfolded); bnode_csum
 * and bnode_matches fold it on the fly when its nb is set.
 *
 * Decoding is strict (bnode_check): every length is bounded, every byte
 * outside the items must be zero, so a node has exactly one encoding and
 * the accessors below never read outside the buffer of a node it accepted.
 * The mutators assume a node that passed bnode_check (or was built by them)
 * and callers that checked the room (bnode_free).
 */
#ifndef TWINFS_BNODE_H
#define TWINFS_BNODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BNODE_SIZE 16384u		/* bytes; 4 blocks of 4 KiB */
#define BNODE_BLOCKS 4u
#define BNODE_BLOCK 4096u		/* a node's unit on disk (short nodes) */
#define BNODE_HDR 96u
#define BNODE_USABLE (BNODE_SIZE - BNODE_HDR)
#define BNODE_ITEM 20u			/* leaf item head: key 16, off 2, size 2 */
#define BNODE_PTR 40u			/* child pointer: key 16, addr, gen, csum */
#define BNODE_MAX_PTRS (BNODE_USABLE / BNODE_PTR)	/* 407 */
#define BNODE_MAX_LEVEL 8		/* levels 0..7: far beyond 2^64 keys */
/* Largest value: any 4 items fit in a leaf, so a split always makes room. */
#define BNODE_MAX_VAL (BNODE_USABLE / 4 - BNODE_ITEM)	/* 4052 */
#define BNODE_MAGIC "TFSBTN2\0"
#define BKEY_OFF_MAX ((1ull << 56) - 1)

/* Ordered by (id, type, off); off has 56 bits (file blocks < 2^51, name
 * hashes, lengths). */
struct bkey {
	uint64_t id;
	uint8_t type;
	uint64_t off;
};

/* A pointer to a node, as a parent (or a superblock root) holds it. */
struct bptr {
	uint64_t addr;			/* first 4 KiB block; 0: none */
	uint64_t gen;			/* generation the node was written in */
	uint64_t csum;
	/* Format v2 with SUPER_INCOMPAT_V2_PIECES: the blocks of the node on
	 * disk, a base and any leaf pieces (1..BPTR_MAX_NBLOCKS; bpiece.h);
	 * 0 without it.  On disk bits 48..55 of the child address (addresses
	 * are below 2^48) and byte 25 of a root. */
	unsigned nblocks;
};
#define BPTR_MAX_NBLOCKS 16u		/* a leaf extent of 4 slots */

/* What the header says (bnode_hdr). */
struct bnode_hdr {
	uint64_t csum, addr, gen, owner;
	uint8_t fs_uuid[16];
	unsigned level, nritems;
	struct bkey min, max;		/* the node's key range, inclusive */
};

int bkey_cmp(const struct bkey *a, const struct bkey *b);
/* The next key after *k; false when k is the largest key. */
bool bkey_succ(struct bkey *k);
/* The key before *k; false when k is the smallest key. */
bool bkey_pred(struct bkey *k);
extern const struct bkey bkey_min, bkey_max;

/* ---- whole node ---- */
/* An empty node (zeros, magic, header fields, range [bkey_min, bkey_max];
 * csum left 0). */
void bnode_init(void *n, unsigned level, uint64_t addr, uint64_t gen, uint64_t owner,
		const uint8_t fs_uuid[16]);
/* The node's key range: min, and the exclusive upper bound @hi (NULL: up to
 * the largest key). */
void bnode_set_range(void *n, const struct bkey *min, const struct bkey *hi);
void bnode_set_min(void *n, const struct bkey *min);
void bnode_set_max(void *n, const struct bkey *max);
/* Compute and store the csum for address @addr (which must be the header's);
 * returns it (for the parent pointer). */
uint64_t bnode_seal(void *n);
/* The same for a short node: sets nb (bnode_fold_blocks) first. */
uint64_t bnode_seal_short(void *n);
uint64_t bnode_seal_fmt(void *n, bool short_nodes);
uint64_t bnode_csum(const void *n, uint64_t addr);
/* The node in memory (unfolded) is the node @p names: csum (as stored and
 * as computed with the seed p->addr), header address and generation. */
bool bnode_matches(const void *n, const struct bptr *p);

/* ---- short nodes ---- */
/* nb as sealed (header byte 60): 0 for a whole node. */
unsigned bnode_nb(const void *n);
/* The fewest 4 KiB blocks that hold the node folded (1..BNODE_BLOCKS). */
unsigned bnode_fold_blocks(const void *n);
/* The on-disk image of a sealed node into @out (BNODE_SIZE bytes, zeros
 * past the image): returns the blocks to write, nb (BNODE_BLOCKS for a
 * whole node); 0 when nb cannot hold the node (not sealed: a bug). */
unsigned bnode_fold(const void *n, void *out);
/* A copy as read from a slot (BNODE_SIZE bytes) is the node @p names in
 * the image's format: whole (nb 0, bnode_matches) or, with short_nodes,
 * folded (nb 1..4, csum over its nb blocks only, nb the fewest, zeros
 * between its parts; bytes past nb blocks ignored). */
bool bnode_copy_matches(const void *buf, const struct bptr *p, bool short_nodes);
/* Turn a copy that bnode_copy_matches accepted into the node in memory
 * (in place; nothing for a whole node). */
void bnode_unfold(void *buf);
/* Strict structural check (not the csum).  0, or -EUCLEAN with a reason. */
int bnode_check(const void *n, char *why, size_t whylen);
/* The node's range is exactly [lo, hi) (hi NULL: no upper bound), the one
 * its parent gives it.  0 or -EUCLEAN. */
int bnode_check_range(const void *n, const struct bkey *lo, const struct bkey *hi,
		      char *why, size_t whylen);
/* -EUCLEAN, with the reason formatted into @why (when given): the checks'
 * return. */
int bnode_bad(char *why, size_t whylen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void bnode_hdr(const void *n, struct bnode_hdr *h);
/* Retarget a copy (copy-on-write): new address and generation. */
void bnode_set_addr_gen(void *n, uint64_t addr, uint64_t gen);

unsigned bnode_level(const void *n);
unsigned bnode_nritems(const void *n);
uint64_t bnode_gen(const void *n);
uint64_t bnode_addr(const void *n);
uint64_t bnode_stored_csum(const void *n);
/* Bytes used by items (heads + values, or pointers), and free. */
unsigned bnode_used(const void *n);
unsigned bnode_free(const void *n);

void bnode_key(const void *n, unsigned i, struct bkey *k);
/* Position of the first key >= k (nritems if none); true when equal. */
bool bnode_search(const void *n, const struct bkey *k, unsigned *idx);

/* ---- leaves ---- */
const void *bnode_val(const void *n, unsigned i, unsigned *len);
/* Insert at i (keys stay ordered: the caller's job); needs
 * bnode_free() >= BNODE_ITEM + len. */
void bnode_leaf_insert(void *n, unsigned i, const struct bkey *k, const void *val,
		       unsigned len);
void bnode_leaf_delete(void *n, unsigned i);

/* ---- internal nodes ---- */
/* Pointer i; its nblocks from bits 48..55 of the stored address (0 in a
 * format without pieces, whose addresses are below 2^48: the bytes are the
 * same), bits 56..63 left in addr (no valid address has them). */
void bnode_ptr(const void *n, unsigned i, struct bptr *p);
void bnode_set_ptr(void *n, unsigned i, const struct bptr *p);
/* Change the key of pointer i (a separator after a rebalance). */
void bnode_set_key(void *n, unsigned i, const struct bkey *k);
void bnode_ptr_insert(void *n, unsigned i, const struct bkey *k, const struct bptr *p);
void bnode_ptr_delete(void *n, unsigned i);

/* ---- moving items between siblings (same level) ---- */
/* Append items [from, to) of src to the end of dst (their keys follow
 * dst's); dst needs the room. */
void bnode_append(void *dst, const void *src, unsigned from, unsigned to);
/* Keep items [0, k), zeroing what they leave. */
void bnode_truncate(void *n, unsigned k);
/* Drop items [0, k), keeping the rest in order. */
void bnode_drop_front(void *n, unsigned k);
/* Bytes items [from, to) take (heads + values, or pointers). */
unsigned bnode_span_bytes(const void *n, unsigned from, unsigned to);
/* Where a split cuts @n: about half of the bytes on each side, or all
 * but the last item when @k goes past the last key (ascending inserts). */
unsigned bnode_split_point(const void *n, const struct bkey *k);
/* Even out the items of siblings @L and @R (same level, together more than
 * one node holds): moves items across, not the ranges (the caller sets
 * them).  0 or -ENOMEM. */
int bnode_redistribute(void *L, void *R);

#endif
