// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * v2prefetch: the format-v2 read-ahead of the INODES tree (v2prefetch.h).
 */
#include <errno.h>
#include <stdlib.h>

#include "btree.h"
#include "v2item.h"
#include "v2prefetch.h"

/* Leaves one read-ahead reads at most (16 KiB each): a readdir batch of
 * a few hundred names reaches about ten, a directory of 10,000 names
 * about sixty. */
#define V2_PREFETCH_MAX 64

int v2_prefetch_inodes(struct btree *t, const uint64_t *inos, size_t n)
{
	struct bkey *keys = malloc(n * sizeof(*keys));
	int ret;

	if (!keys)
		return -ENOMEM;
	/* An inode's other items follow its INODE item, mostly in its leaf. */
	for (size_t i = 0; i < n; i++)
		keys[i] = v2_key_inode(inos[i]);
	ret = bt_prefetch(t, keys, n, V2_PREFETCH_MAX);
	free(keys);
	return ret;
}

int v2_prefetch_dir(struct btree *t, uint64_t dir)
{
	struct bkey lo = { dir, V2_DIRINDEX, 0 }, hi = { dir, V2_DIRINDEX, BKEY_OFF_MAX };

	return bt_prefetch_range(t, &lo, &hi, V2_PREFETCH_MAX);
}
