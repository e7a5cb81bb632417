/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fs_mem: a struct tfs that lives only in memory (no devices, no log, no
 * allocator unless the caller adds one), for tests and fuzzers that drive
 * meta_apply() and the read side of the namespace without a mount.
 */
#ifndef TWINFS_FS_MEM_H
#define TWINFS_FS_MEM_H

struct tfs;

/* NULL when out of memory.  The fs starts empty with replaying = true. */
struct tfs *tfs_mem_new(void);
/* Frees every inode (no blocks are dropped) and the allocator if set. */
void tfs_mem_free(struct tfs *fs);

#endif
