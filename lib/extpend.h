/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * extpend: a lazy map's pending extent records (-o lazyreplay).  The mount's
 * replay keeps an LR_EXT_SET/LR_EXT_CLEAR of a format v2 file here, cut at
 * leaf boundaries, instead of reading the file's map leaves in to apply it;
 * every user of the map applies those of the leaves it may touch first
 * (extent.c calls extpend_apply at each entry), so nothing reads a map in a
 * state older than the log.  Within one leaf the pieces apply in log order;
 * pieces of different leaves are independent (a record is per block).
 *
 * The allocator stays right: the replay marks a set's new blocks used at
 * once (alloc_use), and applying a piece drops the blocks it replaces and
 * takes back the reference of blocks the map already had (as apply.c's
 * ext_set_counted does when it applies at once).
 */
#ifndef TWINFS_EXTPEND_H
#define TWINFS_EXTPEND_H

#include <stdbool.h>
#include <stdint.h>

#include "extent.h"

/* Keep a set (@phys nonzero, @csums NULL or n of them) or a clear (@phys
 * 0) of blocks [fblk, fblk + n) of lazy map @m pending; @drop(@ctx) gets
 * the blocks a piece replaces, and the reference back of blocks the map
 * already had, when it is applied.  0; -E2BIG (a clear over too many
 * leaves) or -ENOSPC (the cache's bound on pending bytes) or -ENOMEM:
 * nothing was kept, apply the record now (extent_set/extent_clear, which
 * apply what is pending there first). */
int extpend_add(struct extent_map *m, uint64_t fblk, uint64_t n, uint64_t phys,
		const void *csums, extent_drop_fn drop, void *ctx);

/* Apply the pieces of every leaf [from, to) reaches (to EXTENT_MAX_FBLK:
 * all of them).  0, or the error of reading a leaf in (-EIO, -ENOMEM): the
 * piece that met it and the later ones of its leaf stay pending. */
int extpend_apply(struct extent_map *m, uint64_t from, uint64_t to);

/* Whether @m has pieces not applied. */
bool extpend_any(const struct extent_map *m);

/* Map @m goes away: its pieces, applied first when @apply (a file
 * deleted: its blocks are dropped from the applied state), or just freed
 * (memory torn down, nothing accounted). */
int extpend_release(struct extent_map *m, bool apply);

/* Every piece of every map of @xc, applied (a checkpoint must not commit
 * while one is left: the log it frees still holds it).  0 or -errno. */
int extpend_apply_all(struct extent_cache *xc);

/* Every piece pending in @xc's maps, by file and range, to @note (a
 * checkpoint that found pieces outside the ranges it wrote notes them for
 * its redo, which applies them under the range locks as it writes them).
 * 0 or @note's error. */
typedef int (*extpend_note_fn)(void *ctx, uint64_t ino, uint64_t fblk, uint64_t n);
int extpend_note_late(struct extent_cache *xc, extpend_note_fn note, void *ctx);

/* Whether pieces are pending in @xc's maps; if so, their count is added
 * to *@late. */
bool extpend_late(struct extent_cache *xc, uint64_t *late);

/* Pieces and their bytes pending in @xc's maps now, and pieces applied
 * since the mount. */
void extpend_stats(struct extent_cache *xc, uint64_t *pieces, uint64_t *bytes,
		   uint64_t *applied);

/* At most @bytes pending in @xc's maps (0: none are kept). */
void extpend_set_max(struct extent_cache *xc, uint64_t bytes);

#endif
