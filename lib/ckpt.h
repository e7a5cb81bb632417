/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ckpt.h: checkpoints (ckpt.c): serialize the metadata, write it and its
 * checksum table, commit the superblock that points at it; load it back.
 */
#ifndef TWINFS_CKPT_H
#define TWINFS_CKPT_H

#include <stdint.h>

struct tfs;

int ckpt_write(struct tfs *fs);			/* serialize + flip superblock */
int ckpt_load(struct tfs *fs);			/* from fs->sb */
/* Layout of a checkpoint of @bytes: payload blocks, then a table of one
 * u64 checksum per payload block (fsck and scrub verify copies with it). */
void ckpt_geom(uint64_t bytes, uint64_t *payload, uint64_t *table);
uint64_t ckpt_table_seed(const uint8_t fs_uuid[16]);	/* of the table's checksum */

#endif
