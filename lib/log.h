/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * log: metadata records, the circular metadata log with group commit, and
 * replay.
 *
 * Records are state records (the new full state of one object), so applying
 * one twice is harmless: replay after a checkpoint may see records whose
 * effect the checkpoint already holds.  The same encoding is the checkpoint
 * stream (see checkpoint in fs).
 *
 * Commit: the first waiter becomes the leader, takes every pending record,
 * flushes the devices (the data those records point to becomes durable
 * first), writes one chunk to every mirror, flushes again, and wakes every
 * waiter whose sequence is covered.  Concurrent fsyncs share those writes.
 *
 * Chunk on disk (at a block boundary in the log region):
 *   struct log_chunk_hdr (little-endian, 64 bytes) + payload + zero padding
 *   to whole blocks.  The header's csum covers header (csum zeroed) and
 *   payload, seeded with the chunk's block position.  A chunk never wraps:
 *   one that does not fit before the end of the region is written at 0.
 * Replay reads at head; a chunk is valid when magic, log_id, position and
 * first seq match what is expected and the csum verifies; otherwise it tries
 * position 0 once; otherwise the log ends.  Where it ends, a verified chunk of the
 * same log_id with a later seq within a chunk's reach (a chunk damaged on
 * every device, not torn), or one of another log_id continuing exactly
 * there (the superblock is older than the log), is reported (log_replay).
 *
 * Functions return 0 or -errno.
 */
#ifndef TWINFS_LOG_H
#define TWINFS_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mirror;

enum log_rec_type {
	LR_INODE = 1,		/* full inode state */
	LR_INODE_DEL = 2,	/* inode gone, its blocks dropped */
	LR_DENT_SET = 3,	/* parent/name -> ino */
	LR_DENT_DEL = 4,	/* parent/name removed */
	LR_EXT_SET = 5,		/* ino blocks [fblk, +n) -> phys [phys, +n), csums
				 * (csums NULL: unwritten blocks, short form) */
	LR_EXT_CLEAR = 6,	/* ino blocks [fblk, +n) -> hole */
	LR_XATTR_SET = 7,
	LR_XATTR_DEL = 8,
	LR_MAX
};

#define LOG_NAME_MAX 255
#define LOG_XATTR_VAL_MAX 65536
#define LOG_SYMLINK_MAX 4095
#define LOG_EXT_MAX_BLOCKS 4096		/* per LR_EXT_SET record */

struct log_inode {
	uint64_t ino, parent;	/* parent: directories only (for ".."), else 0 */
	uint32_t mode, uid, gid, nlink, flags;
	uint64_t rdev, size, gen;
	int64_t atime_ns, mtime_ns, ctime_ns, btime_ns;
	uint32_t target_len;	/* symlinks */
	const char *target;
	/* Format v2's INODE item only (v2item.c): the blocks its EXTENT items
	 * map (st_blocks / 8).  No log record carries it. */
	uint64_t mapped;
};

/* The fixed part of an INODE body (FORMAT.md), the target not included:
 * log_inode_put writes it, log_inode_get reads it (target NULL; the caller
 * checked the LOG_INODE_BODY bytes are there).  Format v2's INODE item is
 * exactly these bytes (v2item.c), so the two formats share one codec. */
#define LOG_INODE_BODY 96u
/* Name rules (FORMAT.md): an entry name is 1..255 bytes without '/' or NUL
 * and not "." or ".."; an xattr name 1..255 bytes without NUL. */
bool log_dent_name_ok(const char *name, size_t len);
bool log_xattr_name_ok(const char *name, size_t len);
void log_inode_put(uint8_t *p, const struct log_inode *in);
void log_inode_get(const uint8_t *p, struct log_inode *in);

struct log_rec {
	uint16_t type;
	union {
		struct log_inode inode;
		struct { uint64_t ino; } del;
		struct { uint64_t parent, ino; uint16_t namelen; const char *name; } dent;
		struct { uint64_t ino, fblk, phys; uint32_t n; const void *csums; } ext;
		struct { uint64_t ino, fblk, n; } clr;
		struct { uint64_t ino; uint16_t namelen; uint32_t vallen;
			 const char *name; const void *val; } xattr;
	};
};

/* A growable buffer of encoded records (one operation's transaction, or a
 * checkpoint stream). */
struct log_buf {
	uint8_t *p;
	size_t len, cap;
	bool reserved;		/* log_reserve'd: appending it never commits */
};

void log_buf_init(struct log_buf *b);
void log_buf_reset(struct log_buf *b);
void log_buf_free(struct log_buf *b);
/* Append one encoded record.  -EINVAL for an out-of-range field. */
int log_buf_add(struct log_buf *b, const struct log_rec *r);

/* Decode records from [p, p+len); calls cb for each (pointers in the record
 * point into p: unaligned, names/targets not NUL-terminated, ext csums are
 * n little-endian u64s to read with memcpy, or NULL for the short form of
 * unwritten blocks).  Stops and returns cb's nonzero value.  -EUCLEAN on any
 * malformed record (bounds, type, lengths); never reads outside [p, p+len). */
typedef int (*log_rec_fn)(void *ctx, const struct log_rec *r);
int log_decode(const void *p, size_t len, log_rec_fn cb, void *ctx);

/* ---- the log region ---- */

struct log;

struct log_geom {
	uint64_t start;		/* first block of the region (device block) */
	uint64_t nblocks;
	uint64_t head_pos;	/* where replay starts (block offset in region) */
	uint64_t head_seq;	/* first seq expected there */
	uint64_t log_id;
	/* The log_id a later mount continuing this log writes under
	 * (fs_next_log_id); 0: unknown, no such evidence is looked for. */
	uint64_t next_log_id;
	/* A continuation (cont_seq nonzero; FORMAT.md "Log"): the log of
	 * log_id ends where seq cont_seq would be, which must be at cont_pos;
	 * from there it goes on under cont_log_id (then cont_next_log_id is
	 * the later mount's, as next_log_id is log_id's).  The writer
	 * (log_open) writes under cont_log_id. */
	uint64_t cont_pos, cont_seq, cont_log_id, cont_next_log_id;
};

/*
 * Replay from the head: calls cb for every record of every valid chunk, in
 * order.  Reads each chunk from the first healthy device whose copy
 * verifies.  *end_pos and *next_seq get where the log ends (where the next
 * chunk goes and its first seq).  A record decode error inside a verified
 * chunk returns -EUCLEAN.  -EBADMSG: replay stopped at a chunk no device
 * holds intact while later chunks of the same log exist (damage on every
 * copy); -ESTALE: a newer log (another log_id) continues where this one
 * ends, so the superblock replay started from is not the newest.  With
 * those two, every record before the stop was delivered and *end_pos,
 * *next_seq say where it stopped.
 */
int log_replay(struct mirror *m, const struct log_geom *g, log_rec_fn cb, void *ctx,
	       uint64_t *end_pos, uint64_t *next_seq);
/* The same, with @pre(ctx, payload, len) called on every verified chunk
 * before its records go to @cb (a read-ahead: v2replaypf.h). */
typedef void (*log_chunk_fn)(void *ctx, const void *p, size_t len);
int log_replay_pre(struct mirror *m, const struct log_geom *g, log_chunk_fn pre,
		   log_rec_fn cb, void *ctx, uint64_t *end_pos, uint64_t *next_seq);

/*
 * Erase (zero the header block of) every chunk in the region, of any
 * log_id, whose first seq is @seq or later, on every healthy device, then
 * flush.  For fsck accepting a loss: the chunks a damaged log or a lost
 * superblock left beyond the new log's start would otherwise be taken for
 * damage again (log_replay's -EBADMSG/-ESTALE).  0 or -errno.
 */
int log_forget_from(struct mirror *m, const struct log_geom *g, uint64_t seq);

/*
 * What the log holds at or past @seq after a replay stopped there
 * (-EBADMSG or -ESTALE): every chunk of g's log_id or of g->next_log_id
 * starting at @seq or later that verifies on some healthy device, as fsck
 * accepting the loss drops them (log_forget_from).  *out gets how many
 * chunks, the records in them (each also given to @cb, which may be NULL)
 * and the newest seq they hold (0: none).  0 or -errno (-ENOMEM).
 */
struct log_lost {
	uint64_t chunks, records, last_seq;
};
int log_lost(struct mirror *m, const struct log_geom *g, uint64_t seq, log_rec_fn cb,
	     void *ctx, struct log_lost *out);

/*
 * Open the log for appending at (pos, seq) with the given log_id; g->head_pos
 * is the durable head (space before it up to pos is in use).
 * on_durable(ctx, seq) is called after each commit (without log locks held)
 * with the newest durable seq; calls are serialized and never decrease.  on_pressure(ctx) is called (at most once per
 * commit) when more than half the region is in use: the owner should write
 * a checkpoint.
 */
struct log_cbs {
	void (*on_durable)(void *ctx, uint64_t durable_seq);
	void (*on_pressure)(void *ctx);
	/* Called by log_wait_space once the log has room, outside the log's
	 * lock, by a caller that holds no lock: the owner may make it wait
	 * for its own reasons (the dirty budget); its result is
	 * log_wait_space's.  May be NULL. */
	int (*on_room)(void *ctx);
	void *ctx;
};
int log_open(struct mirror *m, const struct log_geom *g, uint64_t pos, uint64_t seq,
	     const struct log_cbs *cbs, struct log **out);
/* Frees the log without writing anything: commit first to keep pending
 * records. */
void log_close(struct log *l);

/* Wait until the log has room (more than LOG_SLACK of the region free),
 * asking for a checkpoint if needed, then pass the owner's on_room.  Operations call this BEFORE taking any
 * lock, because a checkpoint takes the locks of the objects it serializes. */
int log_wait_space(struct log *l);
/* No checkpoint will move the head any more (the file system turned
 * read-only: a failed transaction, no device left): every log_wait_space
 * sleeping or to come that finds no room returns -EROFS. */
void log_stop_waits(struct log *l);
/* Append one transaction (all its records go into the same chunk).  Returns
 * the assigned seq in *seq.  Never waits for space (see log_wait_space);
 * -ENOSPC only if the region is truly full. */
int log_append(struct log *l, struct log_buf *tx, uint64_t *seq);
/*
 * For a caller that must not wait (the I/O completion thread): room for
 * @tx in the pending chunk, so that log_append(tx) cannot run a commit
 * round.  0: reserved (tx->reserved); -EAGAIN: no room now, nothing held.
 * log_unreserve gives a reservation back when the append does not happen
 * (a no-op without one).  The append consumes it; @tx must not change
 * in between.
 */
int log_reserve(struct log *l, struct log_buf *tx);
void log_unreserve(struct log *l, struct log_buf *tx);
/* Make everything up to @seq durable (group commit).  seq = UINT64_MAX
 * means everything appended so far. */
int log_commit(struct log *l, uint64_t seq);
uint64_t log_durable_seq(struct log *l);
uint64_t log_last_seq(struct log *l);

/* For a checkpoint: commit everything appended so far and return, atomically,
 * the last seq covered and the position where the next chunk will go. */
int log_barrier(struct log *l, uint64_t *seq, uint64_t *pos);
/* The superblock now points at head (pos, seq): space before pos is free. */
void log_set_head(struct log *l, uint64_t pos, uint64_t seq);
/* Blocks in use between the durable head and the write position, plus the
 * blocks the not yet written chunks will take. */
uint64_t log_used_blocks(struct log *l);
/* Ask for a checkpoint (on_pressure) once more than @blocks are in use,
 * not only past half the region: the mount after a crash replays them
 * all, so this bounds its replay.  0, or half the region or more: half. */
void log_set_ckpt_blocks(struct log *l, uint64_t blocks);

/* Counters (monotonic since log_open), for tests and twinfs-ctl stats. */
struct log_stats {
	uint64_t appends;	/* transactions appended */
	uint64_t commits;	/* log_commit/barrier calls that had to wait */
	uint64_t chunks;	/* chunks written (one per group commit) */
	uint64_t chunk_blocks;	/* blocks written in chunks */
	uint64_t space_waits;	/* times log_wait_space slept */
	uint64_t errors;	/* chunk writes that failed */
};
void log_get_stats(struct log *l, struct log_stats *st);

#endif
