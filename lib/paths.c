// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * paths: naming inodes by a path from the root of a live file system, for
 * messages and status replies (scrub's unrecoverable blocks, twinfs-ctl).
 * Walks the directory tree breadth first under fs->ns_lock, so one walk
 * names any number of inodes.  fsck does not use it: it names inodes of a
 * possibly broken tree from the parent index of its own scan.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dir.h"
#include "fs_i.h"
#include "paths.h"

static int cmp_want(const void *a, const void *b)
{
	uint64_t x = ((const struct path_want *)a)->ino, y = ((const struct path_want *)b)->ino;

	return x < y ? -1 : x > y;
}

void path_sort(struct path_want *want, size_t nwant)
{
	qsort(want, nwant, sizeof(*want), cmp_want);
}

struct path_want *path_find(struct path_want *want, size_t nwant, uint64_t ino)
{
	struct path_want key = { .ino = ino };

	return bsearch(&key, want, nwant, sizeof(*want), cmp_want);
}

struct dir_q {
	uint64_t ino;
	char *path;
};

/*
 * Name every wanted inode (sorted by ino) by walking the tree from the
 * root, breadth first, under ns_lock (names cannot change meanwhile).  A
 * hard link gets the first path found.  Unnamed ones stay NULL.
 */
int path_resolve(struct tfs *fs, struct path_want *want, size_t nwant)
{
	struct dir_q *q = NULL;
	size_t qn = 0, qcap = 0, left = nwant;
	int ret = 0;

	for (size_t i = 0; i < nwant; i++) {
		if (want[i].ino == TFS_ROOT_INO && !want[i].path) {
			want[i].path = strdup("/");
			left--;
		}
	}
	pthread_mutex_lock(&fs->ns_lock);
	q = malloc(sizeof(*q) * 16);
	if (!q) {
		ret = -ENOMEM;
		goto out;
	}
	qcap = 16;
	q[qn++] = (struct dir_q){ .ino = TFS_ROOT_INO, .path = strdup("") };
	for (size_t qi = 0; qi < qn && left; qi++) {
		struct tfs_inode *dp;
		struct dir_ent e;
		uint64_t c = 2;

		if (!q[qi].path || inode_get(fs, q[qi].ino, &dp))
			continue;
		inode_lock(dp);
		while (inode_dir(dp) && dir_next(inode_dir(dp), c, &e) == 0 && left) {
			struct path_want key = { .ino = e.ino }, *hit;
			struct tfs_inode *cp;
			size_t plen = strlen(q[qi].path) + 1 + e.namelen + 1;
			char *p = malloc(plen);
			bool isdir = false;

			c = e.cookie + 1;
			if (!p) {
				ret = -ENOMEM;
				break;
			}
			snprintf(p, plen, "%s/%s", q[qi].path, e.name);
			hit = bsearch(&key, want, nwant, sizeof(*want), cmp_want);
			if (hit) {
				/* equal inos sit next to each other: name them all */
				while (hit > want && hit[-1].ino == e.ino)
					hit--;
				for (; hit < want + nwant && hit->ino == e.ino; hit++) {
					if (hit->path)
						continue;
					hit->path = strdup(p);
					left--;
				}
			}
			if (!inode_get(fs, e.ino, &cp)) {
				/* parent before child */
				inode_lock(cp);
				isdir = S_ISDIR(inode_mode(cp));
				inode_unlock(cp);
				inode_put(fs, cp);
			}
			if (!isdir) {
				free(p);
				continue;
			}
			if (qn == qcap) {
				struct dir_q *nq = realloc(q, qcap * 2 * sizeof(*q));

				if (!nq) {
					free(p);
					ret = -ENOMEM;
					break;
				}
				q = nq;
				qcap *= 2;
			}
			q[qn++] = (struct dir_q){ .ino = e.ino, .path = p };
		}
		inode_unlock(dp);
		inode_put(fs, dp);
		if (ret)
			break;
	}
out:
	pthread_mutex_unlock(&fs->ns_lock);
	for (size_t i = 0; i < qn; i++)
		free(q[i].path);
	free(q);
	return ret;
}

int path_of_ino(struct tfs *fs, uint64_t ino, char *out, size_t outlen)
{
	struct path_want w = { .ino = ino };
	int ret = path_resolve(fs, &w, 1);

	if (w.path)
		snprintf(out, outlen, "%s", w.path);
	else
		snprintf(out, outlen, "<ino %llu>", (unsigned long long)ino);
	free(w.path);
	return ret;
}
