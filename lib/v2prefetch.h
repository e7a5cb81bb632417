/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * v2prefetch: read ahead the INODES tree's leaves a format-v2 fault-in is
 * about to read (bt_prefetch), so a cold listing waits for a few node reads
 * at once instead of each in turn: the INODE items of a readdir batch, the
 * entries of a directory read in.  Best effort: what is not read ahead is
 * read by the fault-in.  Node I/O in the caller's thread (and a few the
 * read-ahead starts): never on an I/O completion thread.
 */
#ifndef TWINFS_V2PREFETCH_H
#define TWINFS_V2PREFETCH_H

#include <stddef.h>
#include <stdint.h>

struct btree;

/* The leaves holding the INODE items of @inos (sorted): the number of
 * nodes read, or -errno (icache_prefetch_fn). */
int v2_prefetch_inodes(struct btree *t, const uint64_t *inos, size_t n);
/* The leaves holding directory @dir's DIRINDEX items (what a directory
 * read in takes; its DIRENT items are not read): the number of nodes
 * read, or -errno. */
int v2_prefetch_dir(struct btree *t, uint64_t dir);

#endif
