/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ckpt_v2: mount and checkpoint of a format-v2 file system, step 3
 * (experimental; docs/FORMAT.md "Mounting version 2").  ckpt.c's
 * ckpt_load and ckpt_write hand a v2 file system over to these.
 *
 * Load: the node store on the mirror, the node cache, the free space
 * (fspace) and the INODES tree; every item goes into the in-memory
 * metadata (full load: the bounded cache and lazy loading are the next
 * step); then meta_apply notes every change (v2dirty.h).
 *
 * Checkpoint: one transaction of the INODES tree with the items of what
 * changed since the last one, the free space, the superblock, the log
 * trimmed: its cost follows what changed, not the file system's size.
 *
 * Functions return 0 or -errno.
 */
#ifndef TWINFS_CKPT_V2_H
#define TWINFS_CKPT_V2_H

#include <stdbool.h>
#include <stdint.h>

#include "extent.h"

struct tfs;
struct btree;
struct tfs_inode;
struct alloc_v2;
struct v2d_ino;

/* Set up the trees from fs->sb (version 2) and load every item; the
 * accounting of the data area (the references of the EXTENT items, see
 * ckpt_v2_sync_data_space) is read from the free-space and refcount
 * trees. */
int ckpt_v2_load(struct tfs *fs);
/* What the mount's walks (orphans, the allocator rebuild) need of inode
 * @ino straight from the INODES tree, without reading it into the inode
 * cache: its mode, nlink and mapped blocks (all three from its INODE
 * item), and every EXTENT item as a run through @cb (NULL: none, no
 * EXTENT item is read; ents NULL).  For an inode that is not
 * resident, so the tree holds all of it.  0, -ENOENT, -errno. */
struct v2_peek {
	uint32_t mode, nlink;
	uint64_t mapped;
};
int ckpt_v2_peek(struct tfs *fs, uint64_t ino, struct v2_peek *out, extent_run_fn cb, void *ctx);
/* The inode numbers of the committed tree's ORPHAN items (link count 0
 * when it was written), ascending, into *inos (malloc'd, the caller frees
 * it) and *n: what mount reclaims, without a walk of every inode. */
int ckpt_v2_orphans(struct tfs *fs, uint64_t **inos, size_t *n);
/* The largest inode number with items in the committed tree (the last
 * key's id: one descent; 0 for none) into *ino.  0 or -errno. */
int ckpt_v2_max_ino(struct tfs *fs, uint64_t *ino);
/* Fill fs->alloc (just created, nothing in use) from the free-space and
 * refcount trees as the superblock names them: the mount's allocator,
 * before the log replay (which keeps it in step, fs->replay_alloc) and
 * without walking any extent. */
int ckpt_v2_load_alloc(struct tfs *fs);
/* The INODES tree (the log replay's read-ahead, v2replaypf.h). */
struct btree *ckpt_v2_inodes(struct tfs *fs);
/* The REFCOUNT tree (statistics). */
struct btree *ckpt_v2_refs(struct tfs *fs);
/* Write what changed, commit the trees and the superblock, trim the log. */
int ckpt_v2_write(struct tfs *fs);
/* Free the trees' state (fs_free); nothing is written. */
void ckpt_v2_free(struct tfs *fs);

/* The EXTENT items of file @ino (@map, its map) in file blocks [from, to) (multiples of
 * V2D_CHUNK, v2dirty.h) replaced by what its map holds there, through
 * v2ext's range operations: items reaching in from either side are cut at
 * the edges, and the map's runs are written as v2ext_set writes them
 * (joined with the items around them where contiguous, so a contiguous
 * run is one item up to the item limit, not one per chunk).  Only the
 * runs of blocks whose mapping or csum differs are rewritten: items of
 * unchanged blocks stay as they are (so item boundaries may differ from a
 * full rewrite's; the blocks they map never do).  The blocks
 * unmapped and mapped change their references in @av's accounting
 * (alloc_v2_ref; NULL: none); *dmapped gets the change of the blocks the
 * items map (for the INODE item's count).  The caller holds the inode's
 * range lock over them and has the tree's transaction open.  @pc (may be
 * NULL) counts the mapped blocks kept as they were and the blocks
 * rewritten. */
struct ckpt_v2_putcount {
	uint64_t kept, rewritten;
};
int ckpt_v2_put_extents(struct btree *t, struct alloc_v2 *av, uint64_t ino,
			struct extent_map *map, uint64_t from, uint64_t to, int64_t *dmapped,
			struct ckpt_v2_putcount *pc);
/* The same without the compare: every block the map holds in memory is
 * cut out and written again (what a checkpoint did before; the unit test
 * checks the compare against it: the same blocks, references and count). */
int ckpt_v2_put_extents_all(struct btree *t, struct alloc_v2 *av, uint64_t ino,
			    struct extent_map *map, uint64_t from, uint64_t to, int64_t *dmapped,
			    struct ckpt_v2_putcount *pc);

/* The directory items of directory @dp that changed (@e, v2dirty.h):
 * removed entries' DIRINDEX items deleted, then each changed name's DIRENT
 * list and DIRINDEX item written as memory has them (a DIRENT list left
 * empty is deleted); @buf holds BNODE_MAX_VAL bytes.  The caller has the
 * tree's transaction open. */
int ckpt_v2_put_names(struct tfs *fs, struct btree *t, struct tfs_inode *dp,
		      const struct v2d_ino *e, uint8_t *buf);

/*
 * The data area into the trees (alloc_v2.h), called by the checkpoint after
 * the INODES tree's changes and before fspace_commit, at generation @gen:
 * the accounting's shared counts that changed as REFCOUNT items (the
 * refcount tree committed in memory, published with the other roots), then
 * its used map into the free-space tree's groups for the chunks that
 * changed.  The accounting is a second allocator that counts exactly the
 * references of the INODES tree's EXTENT items (the checkpoint changes it
 * with each item), not fs->alloc: blocks of writes in flight and frees not
 * yet durable are never written used, so a crash leaks nothing and a mount
 * loads the allocator from the trees (docs/FORMAT.md "Free space").
 */
int ckpt_v2_sync_data_space(struct tfs *fs, uint64_t gen);

/* Block @blk lies in a tree node slot the node map has in use (rebuild:
 * what to copy of the node area).  False on version 1. */
bool ckpt_v2_node_block(struct tfs *fs, uint64_t blk);
/* Tree nodes in use (the node map's count; 0 on version 1). */
uint64_t ckpt_v2_nodes_used(struct tfs *fs);

/* The node cache's counters (twinfs-ctl raw stats "node_cache"): false
 * when the file system is not version 2. */
struct bcache_stats;
bool ckpt_v2_node_cache_stats(struct tfs *fs, struct bcache_stats *st);

#endif
