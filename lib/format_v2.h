/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * format_v2: what mkfs -O v2 writes (format_v2.c; called by format.c only).
 * Functions return 0 or -errno with one line in err.
 */
#ifndef TWINFS_FORMAT_V2_H
#define TWINFS_FORMAT_V2_H

#include <stddef.h>
#include <stdint.h>

#include "dev.h"
#include "fspace.h"
#include "mirror.h"
#include "super.h"
#include "tfs.h"

/* Blocks of the node area of a file system of @total_blocks. */
uint64_t format_v2_node_blocks(uint64_t total_blocks);
/* The version 2 superblock of a new file system of @n devices. */
int format_v2_super(struct super *sb, unsigned n, uint64_t total,
		    const struct tfs_format_opts *o, char *err, size_t errlen);
/* The trees (through the node store on @m) and superblock generation 1 on
 * every device, all flushed. */
int format_v2_write(struct dev_backend *be, struct dev **d, struct mirror *m, struct super *sb,
		    char *err, size_t errlen);

#endif
