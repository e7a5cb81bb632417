/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * v2replaypf: format v2's log replay reads ahead in the INODES tree.
 * Replaying a chunk of random 4k overwrites faults one file map leaf per
 * record, each a synchronous node read, one after the other (measured at
 * 1 TiB: 8,300 faults, 2.6 s of a 5.4 s mount after kill -9).  Before the
 * replay applies a chunk, v2pf_begin takes the EXTENT key of each of its
 * LR_EXT_SET and LR_EXT_CLEAR records and reads the leaves of the first
 * V2PF_WINDOW of them ahead (bt_prefetch: several reads at once), so they
 * are in the node cache when the replay reaches them; v2pf_note, told of
 * every record applied, reads the next window when the replay gets to the
 * end of one (a
 * window at a time, so what is read ahead fits the node cache).
 * Read-only: nothing else uses the tree meanwhile (the replay waits), and
 * a lookup that fails only leaves its node to be read later, as before.
 */
#ifndef TWINFS_V2REPLAYPF_H
#define TWINFS_V2REPLAYPF_H

#include <stddef.h>
#include <stdint.h>

#include "btree.h"
#include "log.h"

#define V2PF_WINDOW 2048u

struct v2pf;

/* The keys of the chunk payload [p, p + len), and the first window looked
 * up; NULL when there are too few to bother, no memory, or the payload
 * does not decode. */
struct v2pf *v2pf_begin(struct btree *t, const void *p, size_t len);
/* Record @r is being applied (in the chunk's order). */
void v2pf_note(struct v2pf *pf, const struct log_rec *r);
/* Keys looked up so far. */
size_t v2pf_done(const struct v2pf *pf);
void v2pf_end(struct v2pf *pf);

#endif
