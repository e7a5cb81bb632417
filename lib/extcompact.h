/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * extcompact: a map leaf's 512 entries (8 KiB) as a short list of runs,
 * for changed leaves nobody is using (extcache.c keeps them until their
 * checkpoint: a random write over a large file changes a leaf of its own,
 * and a few thousand of them filled the budget).  A run is consecutive
 * entries whose physical blocks follow each other with the same
 * EXTENT_UNWRITTEN flag; its checksums are kept only when one of them is
 * not 0 (written blocks; an unwritten block's is 0).  Holes take nothing.
 * Expanding gives back the entries byte for byte; a leaf that cannot be
 * said so (a hole with a checksum) or would not be smaller is refused.
 */
#ifndef TWINFS_EXTCOMPACT_H
#define TWINFS_EXTCOMPACT_H

#include <stddef.h>
#include <stdint.h>

#include "extent.h"

struct ext_run {
	uint16_t off, n;		/* entries [off, off + n) of the leaf */
	uint32_t csum;			/* index of its first checksum, or
					 * EXT_RUN_NOCSUM: all 0 */
	uint64_t phys;			/* of entry off (flag included) */
};

#define EXT_RUN_NOCSUM UINT32_MAX

/* A place in one of the cache's lists (extcache.c), under xc->mu. */
struct ext_link {
	struct ext_link *next, *prev;
};

struct ext_list {
	struct ext_link *head, *tail;	/* oldest first */
};

struct ext_compact {
	/* what the cache needs (as struct ext_leaf's, extent_i.h) */
	struct extent_map *m;
	void **slot;
	uint64_t base;
	uint64_t stamp;			/* set once: a change expands it first */
	struct ext_link link;		/* the cache's list, under xc->mu */
	uint32_t nruns, ncsums;
	uint64_t bytes;			/* what the budget counts for it */
	struct ext_run r[];		/* then ncsums uint64_t checksums */
};

/* The compact form of the @n entries @e (n <= 65535), the cache's fields
 * zero; NULL when it would count more than @max bytes, cannot say them
 * exactly, or there is no memory (the leaf then stays as it is). */
struct ext_compact *ext_compact_make(const struct extent_ent *e, unsigned n, uint64_t max);
/* The @n entries back into @e, every one written (holes zeroed). */
void ext_compact_expand(const struct ext_compact *c, struct extent_ent *e, unsigned n);

static inline const uint64_t *ext_compact_csums(const struct ext_compact *c)
{
	return (const uint64_t *)&c->r[c->nruns];
}

#endif
