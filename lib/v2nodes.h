/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * v2nodes: check every tree node of a mounted format v2 file system on
 * every mirror (scrub, and the rebuild's verification pass).
 *
 * Each of the three trees is walked from the root the current superblock
 * names, in key order, in pieces: a piece holds fs->ckpt_mu (so no
 * checkpoint frees or reuses a node under it) for at most V2N_PIECE nodes,
 * then lets go, so a checkpoint waits for one piece at most.  Every piece
 * starts again from the tree's current root and goes down to the cursor
 * (the lowest key whose leaf is not checked yet): a checkpoint between two
 * pieces changes nothing for the walk but the path it takes.
 *
 * A node's copy on each readable device (and the rebuild target) is read
 * and checked against the parent pointer (bnode_matches: csum seeded with
 * the address, header address and generation; with leaf pieces the
 * pointer's nblocks blocks, a chain verified by bpiece_load, bstore.h's
 * bstore_copy_ok); a bad or unreadable copy is
 * rewritten from a good one (counted on the device: csum_err or read_err,
 * and repaired, once per node: a node is one object, whatever its blocks),
 * a node with no good copy is counted unrecoverable (MEV_UNRECOVERABLE,
 * once per loss: mirror_lost.c) and the subtree under it is skipped.
 *
 * Functions return 0 or -errno.
 */
#ifndef TWINFS_V2NODES_H
#define TWINFS_V2NODES_H

#include <stdbool.h>
#include <stdint.h>

#define V2N_PIECE 64u			/* nodes per ckpt_mu hold */

struct tfs;

struct v2n_counts {
	uint64_t checked;		/* nodes verified (each once per walk) */
	uint64_t bad;			/* bad or unreadable copies */
	uint64_t repaired;		/* copies rewritten */
	uint64_t unrecoverable;		/* nodes no copy of which verifies */
	uint64_t read_err;		/* copies that could not be read */
};

struct v2n_walk {
	struct tfs *fs;
	int target;			/* a device also checked (rebuild target); -1 none */
	/* After each piece (no lock held): true ends the walk. */
	bool (*piece_done)(void *ctx, uint64_t nodes);
	/* A node with no good copy (addr: its first block). */
	void (*on_lost)(void *ctx, uint64_t addr);
	void *ctx;
	struct v2n_counts n;
};

/* Walk the three trees (format v2 only; 0 at once on version 1).  -ENODEV
 * when no device is left to read; -ENOMEM. */
int v2n_walk(struct v2n_walk *w);

#endif
