/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * paths.h: inode number -> path from the root, for messages (paths.c).
 */
#ifndef TWINFS_PATHS_H
#define TWINFS_PATHS_H

#include <stddef.h>
#include <stdint.h>

struct tfs;

/* One inode to name; path is malloc'ed by path_resolve (caller frees). */
struct path_want {
	uint64_t ino;
	char *path;
};

/* Sort by ino, as path_resolve and path_find need. */
void path_sort(struct path_want *want, size_t nwant);
/* Some entry for ino in a sorted array, NULL if none. */
struct path_want *path_find(struct path_want *want, size_t nwant, uint64_t ino);
/* Name every wanted inode (sorted by ino; duplicates allowed) whose path is
 * still NULL, in one walk of the tree under fs->ns_lock.  A hard link gets
 * the first path found; unreachable inodes stay NULL.  Takes ns_lock and
 * inode locks: the caller holds none of them.  0 or -ENOMEM (the names
 * found so far are kept). */
int path_resolve(struct tfs *fs, struct path_want *want, size_t nwant);
/* One inode's path into out, "<ino N>" if it has none.  0 or -ENOMEM. */
int path_of_ino(struct tfs *fs, uint64_t ino, char *out, size_t outlen);

#endif
