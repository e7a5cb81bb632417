/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * super: the superblock codec and the on-device layout.
 *
 * Every device carries two superblock slots (blocks 0 and 1) written
 * alternately (slot = generation % 2), each checksummed.  Mount reads both
 * slots of every device and takes the valid one with the highest generation.
 * The metadata (checkpoint + log head) it points to is identical on every
 * device; only dev_index and the per-device counters differ.
 *
 * Layout of every device (blocks of 4096 bytes):
 *   0, 1            superblock slots
 *   2 .. 15         reserved (zero)
 *   16 .. +log_blocks   metadata log (circular)
 *   data_start ..   data and checkpoint blocks (allocator)
 *
 * See docs/FORMAT.md.  Functions return 0 or -errno.
 */
#ifndef TWINFS_SUPER_H
#define TWINFS_SUPER_H

#include <stdbool.h>
#include <stdint.h>

#include "btree.h"
#include "dev.h"

#define SUPER_MAGIC "TWINFS\x01\x00"	/* 8 bytes */
#define SUPER_VERSION 1			/* format v1, deprecated: mkfs -O v1, -o format=1 */
#define SUPER_VERSION_V2 2		/* format v2: what mkfs.twinfs writes */
#define SUPER_V2_TREES 3		/* inodes, refcounts, free space */
#define SUPER_V2_ROOT_SLOTS 8		/* roots the layout has room for */
#define SUPER_INCOMPAT_SUPP 0u		/* version 1 */
/* Version 2: INODE items carry the mapped-block count (104 bytes).  Every
 * version 2 image this twinfs makes has it; one without (made before it,
 * 96-byte INODE items) is refused. */
#define SUPER_INCOMPAT_V2_MAPPED 0x1u
/* Version 2, -o lazyreplay: the log goes on under a new log_id after a
 * mount that served without writing a checkpoint (the cont_* fields);
 * set by that mount's superblock commit, cleared by the next checkpoint.
 * A twinfs that does not know it would end the replay at cont_pos and
 * lose what the continuation holds: it refuses the image instead. */
#define SUPER_INCOMPAT_V2_LOG_CONT 0x2u
/* Version 2: tree nodes are short on disk (bnode.h): only the fewest
 * 4 KiB blocks that hold a node's items are written, its header says how
 * many (nb, byte 60) and its csum covers those.  Set by mkfs (the default;
 * -O ^short_nodes makes an image without it).  A twinfs that does not
 * know it would read every node as corrupt: it refuses the image. */
#define SUPER_INCOMPAT_V2_SHORT_NODES 0x4u
/* Version 2, experimental (mkfs -O pieces; needs SHORT_NODES): a tree
 * pointer (bits 48..55 of a child address, byte 25 of a root) names the
 * blocks of its node, nblocks: a base and the leaf pieces after it
 * (bpiece.h, docs/FORMAT.md "Leaf pieces").  This twinfs reads pieces and
 * writes bases only (nblocks = the base's nb).  A twinfs that does not
 * know it would read every pointer's address wrong: it refuses the image. */
#define SUPER_INCOMPAT_V2_PIECES 0x8u
#define SUPER_INCOMPAT_SUPP_V2                                                                \
	(SUPER_INCOMPAT_V2_MAPPED | SUPER_INCOMPAT_V2_LOG_CONT | SUPER_INCOMPAT_V2_SHORT_NODES | \
	 SUPER_INCOMPAT_V2_PIECES)
#define SUPER_RO_COMPAT_SUPP 0u
#define SUPER_LOG_START 16
#define SUPER_MIN_BLOCKS 16384		/* 64 MiB */

enum super_state { SUPER_DIRTY = 0, SUPER_CLEAN = 1 };

struct super_devstats {
	uint64_t read_err, write_err, flush_err, csum_err, repaired, unrecoverable;
};

/* Scrub progress, persisted by every checkpoint so a scrub resumes after a
 * remount (scrub.c).  All zero: no scrub ever ran.  A compatible addition
 * in the formerly reserved bytes 800..895: older readers ignore it. */
enum super_scrub_state {
	SUPER_SCRUB_NONE = 0,
	SUPER_SCRUB_RUNNING = 1,	/* resume from (ino, fblk) at mount */
	SUPER_SCRUB_FINISHED = 2,
	SUPER_SCRUB_CANCELED = 3,
};

struct super_scrub {
	uint32_t state;			/* enum super_scrub_state */
	uint64_t ino, fblk;		/* cursor: next inode / file block (ino 0: checkpoint) */
	uint64_t started_ns, finished_ns;	/* CLOCK_REALTIME */
	uint64_t bytes_done;		/* at the cursor */
	uint64_t bytes_total;		/* to verify, as counted at (re)start */
	uint64_t rate;			/* bytes/s limit, 0 = none */
	uint64_t csum_err, repaired, unrecoverable, read_err;	/* found so far */
};

struct super {
	uint32_t version;
	uint32_t compat, ro_compat, incompat;
	uint8_t fs_uuid[16];
	uint8_t dev_uuid[16];		/* this device */
	uint32_t dev_index;		/* this device's slot */
	uint32_t ndevs;
	uint8_t dev_uuids[DEV_MAX][16];
	char label[64];			/* NUL-terminated */
	uint32_t block_size;		/* 4096 */
	uint64_t total_blocks;		/* same on every device */
	uint64_t log_start, log_blocks;
	uint64_t data_start;
	uint64_t generation;
	uint32_t state;			/* enum super_state */
	/* checkpoint: table of per-block csums + payload, contiguous */
	uint64_t ckpt_start, ckpt_blocks, ckpt_bytes, ckpt_table_csum, ckpt_seq;
	/* log replay starts here */
	uint64_t log_head_pos;		/* block offset inside the log region */
	uint64_t log_head_seq;		/* seq of the first record to replay */
	uint64_t log_id;		/* changes every mount; records carry it */
	uint64_t next_ino;
	/* Per device: 0 = in sync; 1 = stale (failed or missing while the file
	 * system was written): it must not serve reads until rebuilt.  A
	 * device's own entry is 1 only on a rebuild or replace target
	 * (sbc_mark_target, super_self_stale). */
	uint32_t dev_state[DEV_MAX];
	uint64_t ctime_ns;		/* mkfs time */
	struct super_devstats stats[DEV_MAX];
	struct super_scrub scrub;
	/* Write-intent bitmap (compat; rebuild.c): one bit per region of
	 * 2^wib_shift data blocks written while a device was out of sync,
	 * in wib_blocks blocks at wib_start (0: no dirty region). */
	uint64_t wib_start;
	uint32_t wib_blocks, wib_shift;
	uint64_t wib_csum;
	/* Rebuild/replace in progress (compat): rb_state 0 none, 1 running;
	 * rb_kind 1 rebuild, 2 replace; regions below rb_cursor are copied. */
	uint32_t rb_state, rb_kind, rb_dev;
	uint64_t rb_cursor, rb_copied;
	/* Version 2 only (all zero in version 1; FORMAT.md "Superblock of
	 * version 2").  The ckpt_* fields except ckpt_seq are zero: the trees
	 * are the checkpoint, ckpt_seq the last log seq they hold. */
	uint64_t tree_gen;		/* generation of the last tree commit */
	uint64_t hash_seed;		/* seed of hash56 (v2item.h) */
	uint64_t node_start, node_blocks;	/* the node area */
	uint64_t free_blocks;		/* blocks the free-space tree lists */
	/* The free space's geometry (fspace_params): the data area is
	 * [node_start + node_blocks, total_blocks) in groups of gblocks;
	 * node_reserve node slots are kept for the free-space tree. */
	uint64_t gblocks, node_reserve;
	/* INODE items in the inode tree (the root's at least): the mount's
	 * inode count without a walk. */
	uint64_t inodes;
	struct broot roots[SUPER_V2_TREES];	/* tree id i + 1 (v2item.h) */
	/* The log's continuation (SUPER_INCOMPAT_V2_LOG_CONT set; all zero
	 * otherwise): the log of log_id from the head ends where transaction
	 * cont_seq would be, at cont_pos; from there (or block 0, as any chunk
	 * that does not fit) it goes on under cont_log_id. */
	uint64_t cont_pos, cont_seq, cont_log_id;
};

enum { SUPER_RB_NONE = 0, SUPER_RB_RUNNING = 1 };
enum { SUPER_RB_REBUILD = 1, SUPER_RB_REPLACE = 2 };

/* Encode into a 4096-byte buffer for slot @slot (0 or 1). */
void super_encode(const struct super *sb, unsigned slot, void *buf);
/*
 * Decode and validate.  Returns 0; -ENOENT when the magic is absent (not
 * twinfs); -EUCLEAN for a bad checksum or inconsistent geometry;
 * -EPROTONOSUPPORT for an unknown version or incompat/ro_compat feature.
 * On error writes a one-line reason (without the device name) into why.
 */
int super_decode(const void *buf, unsigned slot, struct super *sb, char *why, size_t whylen);

/* Names the foreign file system whose magic is in the first 128 KiB of a
 * device (ext2/3/4, xfs, btrfs), or NULL. buf holds at least 128 KiB. */
const char *super_probe_foreign(const void *buf, size_t len);

/* Bytes at the start of a device that super_probe_dev reads: foreign
 * superblocks live in here. */
#define SUPER_PROBE_BYTES (128u * 1024)

/* Refuse a device about to be overwritten (mkfs, replace) that holds a
 * file system: a foreign one (ext4, XFS, btrfs...) or a twinfs.  -EEXIST
 * with one line naming d->path and telling to use @force_opt ("-f",
 * "--force"); for a twinfs *found (if not NULL) gets its superblock
 * (zeroed if unreadable).  0 when nothing is there, or -errno of the read. */
int super_probe_dev(struct dev_backend *be, struct dev *d, const char *force_opt,
		    struct super *found, char *err, size_t errlen);

/* The canonical 36-character text form of a uuid (lower-case hex and
 * dashes) into out, NUL-terminated. */
#define SUPER_UUID_STR 37
void super_uuid_str(const uint8_t u[16], char out[SUPER_UUID_STR]);

/* Layout for a new file system of @total_blocks: log size etc. */
void super_layout(struct super *sb, uint64_t total_blocks);

/*
 * Read both slots of @d and return the newest valid one in *sb (and its
 * slot).  -ENOENT if neither slot has the magic, -EUCLEAN if none verifies,
 * -EPROTONOSUPPORT for an unknown version; why gets the reason.
 */
int super_read_dev(struct dev_backend *be, struct dev *d, struct super *sb,
		   unsigned *slot, char *why, size_t whylen);
/*
 * Does the 4096 bytes of slot @slot hold the generation before @cur (the
 * newest valid one)?  True when it verifies with a lower generation, or
 * when it is damaged but its magic, fs_uuid, generation (cur - 1) and
 * sequence numbers all say so.  False: it may have held a newer generation
 * that no device has intact (mount refuses when that holds on every
 * device).
 */
bool super_slot_older(const void *buf, unsigned slot, const struct super *cur);
/* The log @sb names (log.h), with its continuation if any
 * (SUPER_INCOMPAT_V2_LOG_CONT) and the log_ids a later mount writes under
 * (super_next_log_id): what mount and fsck replay. */
struct log_geom;
void super_log_geom(const struct super *sb, struct log_geom *g);
/*
 * The log_id the next mount after a superblock naming @log_id writes
 * under (fs_next_log_id): derived from the uuid and @log_id.
 */
uint64_t super_next_log_id(const struct super *sb, uint64_t log_id);
/*
 * Split brain: the newest superblock @nb records @sb's device stale, and
 * @sb records @nb's device stale.  Each was mounted -o degraded without
 * the other and took writes the other lacks; bringing one up to date would
 * drop the other's changes, so mount and fsck refuse the pair.
 */
static inline bool super_split_brain(const struct super *nb, const struct super *sb)
{
	return sb->dev_index < nb->ndevs && sb->dev_index < DEV_MAX &&
	       nb->dev_index < sb->ndevs && nb->dev_index < DEV_MAX &&
	       nb->dev_state[sb->dev_index] && sb->dev_state[nb->dev_index];
}
/* Write sb (with dev_index set by the caller) to slot generation % 2. */
int super_write_dev(struct dev_backend *be, struct dev *d, const struct super *sb);
/* The same into slot @slot (0 or 1) whatever the generation: a rebuild
 * target's mark goes to both (sbc_mark_target). */
int super_write_slot(struct dev_backend *be, struct dev *d, const struct super *sb,
		     unsigned slot);
/* The device @sb was read from records itself stale: only a rebuild or
 * replace target does (sbc_mark_target), until the run completes. */
static inline bool super_self_stale(const struct super *sb)
{
	return sb->dev_index < DEV_MAX && sb->dev_state[sb->dev_index];
}

/* The log a superblock with a continuation names goes on under cont_log_id
 * (the live log's id); none any more once a checkpoint or a new log_id
 * replaces it. */
static inline bool super_log_cont(const struct super *sb)
{
	return sb->incompat & SUPER_INCOMPAT_V2_LOG_CONT;
}

/* Tree nodes are short on disk (SUPER_INCOMPAT_V2_SHORT_NODES). */
static inline bool super_short_nodes(const struct super *sb)
{
	return sb->incompat & SUPER_INCOMPAT_V2_SHORT_NODES;
}

/* Tree pointers carry nblocks (SUPER_INCOMPAT_V2_PIECES). */
static inline bool super_pieces(const struct super *sb)
{
	return sb->incompat & SUPER_INCOMPAT_V2_PIECES;
}

/* A node store's format (bstore.h) as the superblock says. */
static inline void super_node_format(const struct super *sb, struct bstore *s)
{
	s->short_nodes = super_short_nodes(sb);
	s->pieces = super_pieces(sb);
}

static inline uint64_t super_live_log_id(const struct super *sb)
{
	return super_log_cont(sb) ? sb->cont_log_id : sb->log_id;
}

static inline void super_log_cont_clear(struct super *sb)
{
	sb->incompat &= ~SUPER_INCOMPAT_V2_LOG_CONT;
	sb->cont_pos = sb->cont_seq = sb->cont_log_id = 0;
}

#endif
