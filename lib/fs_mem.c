// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fs_mem: in-memory struct tfs for tests and fuzzers (see fs_mem.h).  It sets
 * up exactly the parts meta_apply() and the namespace read paths use: the
 * inode table and the locks.
 */
#include <errno.h>
#include <stdlib.h>

#include "fs_i.h"
#include "fs_mem.h"

struct tfs *tfs_mem_new(void)
{
	struct tfs *fs = calloc(1, sizeof(*fs));

	if (!fs)
		return NULL;
	if (fs_itable_init(fs) < 0) {
		free(fs);
		return NULL;
	}
	pthread_mutex_init(&fs->ns_lock, NULL);
	pthread_mutex_init(&fs->ckpt_mu, NULL);
	pthread_mutex_init(&fs->bg_mu, NULL);
	pthread_cond_init(&fs->bg_cv, NULL);
	atomic_store(&fs->next_ino, TFS_ROOT_INO + 1);
	fs->replaying = true;
	return fs;
}

void tfs_mem_free(struct tfs *fs)
{
	if (!fs)
		return;
	fs_itable_destroy(fs);
	if (fs->alloc)
		alloc_destroy(fs->alloc);
	pthread_cond_destroy(&fs->bg_cv);
	pthread_mutex_destroy(&fs->bg_mu);
	pthread_mutex_destroy(&fs->ckpt_mu);
	pthread_mutex_destroy(&fs->ns_lock);
	free(fs);
}
