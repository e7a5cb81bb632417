// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * log: the circular metadata log region: chunk format, group commit, space
 * accounting and replay.  Records themselves are encoded by logrec.c.
 *
 * Writers append transactions to a pending buffer (never waiting); a commit
 * seals the pending buffer into one chunk, flushes every mirror and writes
 * the chunk to every mirror with FUA.  Only one commit is in flight at a
 * time; whoever asks for durability while none is in flight leads the next
 * one, everybody else waits for the in-flight one and re-checks, so
 * concurrent fsyncs share chunk writes and flushes.
 *
 * A failed chunk write keeps its buffer as the "retry" chunk: the next
 * commit writes it again (same seqs) before anything newer, so the seq
 * sequence on disk never has a gap while a mirror is still healthy.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "csum.h"
#include "dev.h"
#include "le.h"
#include "log.h"
#include "mirror.h"

#define CHUNK_MAGIC "TFSLOG1\0"		/* 8 bytes */
#define CHUNK_HDR 64u
#define CHUNK_MAX_BYTES (4u << 20)
#define LOG_MIN_BLOCKS 64u

/* Header field offsets (FORMAT.md). */
enum {
	CH_MAGIC = 0, CH_LOG_ID = 8, CH_POS = 16, CH_FIRST = 24, CH_LAST = 32,
	CH_PAYLOAD = 40,	/* u32 */
	CH_NBLOCKS = 44,	/* u32 */
	CH_RESERVED = 48,	/* u64, zero */
	CH_CSUM = 56,
};

static uint64_t chunk_blocks(size_t payload)
{
	return (CHUNK_HDR + payload + TFS_BLOCK_SIZE - 1) / TFS_BLOCK_SIZE;
}

/* One chunk being built: a 4096-aligned buffer with room for the header in
 * front of the payload, so a commit writes it without copying. */
struct chunkbuf {
	uint8_t *p;		/* cap bytes, aligned; payload at p + CHUNK_HDR */
	size_t len;		/* payload bytes */
	uint64_t first, last;	/* seqs of the transactions it holds */
	unsigned ntx;
};

struct log {
	struct mirror *m;
	uint64_t start, nblocks, log_id;	/* immutable after open */
	size_t max_payload;			/* bytes per chunk, excl. header */
	size_t cap;				/* bytes of each chunk buffer */
	uint64_t slack;				/* blocks kept free by log_wait_space */
	/* Past this many blocks since the head a checkpoint is asked for
	 * (on_pressure): half the region, or less (log_set_ckpt_blocks), as
	 * the mount after a crash replays all of them.  Under mu. */
	uint64_t ckpt_after;
	struct log_cbs cbs;

	/* Serializes on_durable calls so they are seen in increasing order. */
	pthread_mutex_t cb_mu;

	pthread_mutex_t mu;		/* protects everything below */
	pthread_cond_t commit_cv;	/* a commit finished */
	pthread_cond_t space_cv;	/* the head moved (space freed) */
	bool stopped;			/* log_stop_waits: no room will come */
	uint64_t head_pos, head_seq;	/* durable head (superblock) */
	uint64_t pos;			/* next chunk goes here (or at 0) */
	uint64_t last;			/* newest seq handed out */
	uint64_t durable;		/* newest seq on disk; chunk durable+1 is at pos */
	struct chunkbuf *pending;	/* appends go here */
	struct chunkbuf *retry;		/* a chunk whose write failed, or NULL */
	struct chunkbuf *spare;		/* recycled buffer, or NULL */
	bool committing;		/* a leader is writing a chunk */
	uint64_t commit_gen;		/* commits started */
	uint64_t done_gen;		/* commits finished */
	uint64_t inflight_last;		/* last seq of the in-flight chunk */
	/* Payload bytes promised to log_reserve'd transactions not appended
	 * yet: pending->len + reserved <= max_payload, so they never commit. */
	size_t reserved;
	pthread_cond_t reserve_cv;	/* reserved went down */
	struct log_stats st;
};

static struct chunkbuf *cb_new(size_t cap)
{
	struct chunkbuf *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	if (posix_memalign((void **)&b->p, TFS_BLOCK_SIZE, cap)) {
		free(b);
		return NULL;
	}
	return b;
}

static void cb_free(struct chunkbuf *b)
{
	if (b) {
		free(b->p);
		free(b);
	}
}

static uint64_t cb_blocks(const struct chunkbuf *b)
{
	return b && b->ntx ? chunk_blocks(b->len) : 0;
}

/* Blocks between the durable head and the write position, plus what the
 * unwritten chunks will take.  pos == head means empty: a commit never
 * fills the region completely (see place_chunk). */
static uint64_t used_locked(const struct log *l)
{
	uint64_t ring = (l->pos + l->nblocks - l->head_pos) % l->nblocks;

	return ring + cb_blocks(l->pending) + cb_blocks(l->retry);
}

/* Where a chunk of nb blocks goes: at pos, or at 0 when it does not fit
 * before the end of the region.  -ENOSPC when it would reach the head. */
static int place_chunk(const struct log *l, uint64_t nb, uint64_t *at)
{
	uint64_t ring = (l->pos + l->nblocks - l->head_pos) % l->nblocks;
	uint64_t avail = l->nblocks - 1 - ring;

	if (l->pos + nb <= l->nblocks) {
		if (nb > avail)
			return -ENOSPC;
		*at = l->pos;
	} else {
		if (l->nblocks - l->pos + nb > avail)
			return -ENOSPC;
		*at = 0;
	}
	return 0;
}

static void seal_header(const struct log *l, struct chunkbuf *b, uint64_t at, uint64_t nb)
{
	uint8_t *h = b->p;
	size_t used = CHUNK_HDR + b->len;

	memset(h, 0, CHUNK_HDR);
	memcpy(h + CH_MAGIC, CHUNK_MAGIC, 8);
	le64_put(h + CH_LOG_ID, l->log_id);
	le64_put(h + CH_POS, at);
	le64_put(h + CH_FIRST, b->first);
	le64_put(h + CH_LAST, b->last);
	le32_put(h + CH_PAYLOAD, (uint32_t)b->len);
	le32_put(h + CH_NBLOCKS, (uint32_t)nb);
	/* zero padding: stale bytes would leak old metadata into the chunk */
	memset(b->p + used, 0, nb * TFS_BLOCK_SIZE - used);
	le64_put(h + CH_CSUM, csum_buf(h, used, at));
}

/* Report durability (and pressure) outside the log mutex.  Called and
 * returns with l->mu held. */
static void run_callbacks(struct log *l, bool pressure)
{
	uint64_t d;

	pthread_mutex_unlock(&l->mu);
	if (l->cbs.on_durable) {
		pthread_mutex_lock(&l->cb_mu);
		pthread_mutex_lock(&l->mu);
		d = l->durable;
		pthread_mutex_unlock(&l->mu);
		l->cbs.on_durable(l->cbs.ctx, d);
		pthread_mutex_unlock(&l->cb_mu);
	}
	if (pressure && l->cbs.on_pressure)
		l->cbs.on_pressure(l->cbs.ctx);
	pthread_mutex_lock(&l->mu);
}

/*
 * Lead one commit: write the retry chunk if there is one, else the pending
 * buffer.  Called with l->mu held and no commit in flight; returns with it
 * held.  0, -ENOSPC (region full: nothing written), -ENOMEM or -EIO.
 */
static int commit_round(struct log *l)
{
	struct chunkbuf *b = l->retry ? l->retry : l->pending;
	uint64_t nb, at;
	bool pressure;
	int ret;

	if (!b->ntx)
		return 0;
	dev_assert_may_block("log commit");
	nb = chunk_blocks(b->len);
	ret = place_chunk(l, nb, &at);
	if (ret)
		return ret;
	if (b == l->pending) {
		struct chunkbuf *nw = l->spare ? l->spare : cb_new(l->cap);

		if (!nw)
			return -ENOMEM;
		l->spare = NULL;
		nw->len = 0;
		nw->ntx = 0;
		l->pending = nw;
	} else {
		l->retry = NULL;
	}
	l->committing = true;
	l->commit_gen++;
	l->inflight_last = b->last;
	seal_header(l, b, at, nb);
	pthread_mutex_unlock(&l->mu);

	/* Flush first: the data blocks these records point to must be
	 * durable before the records are, or a crash could leave metadata
	 * pointing at blocks that never reached the disk.  Then the chunk as
	 * FUA writes: durable when they complete, one device round trip
	 * instead of a write and a second flush (on loop devices a flush
	 * from userspace costs two more thread hops than the write). */
	ret = mirror_flush(l->m);
	if (!ret)
		ret = mirror_write_fua(l->m, l->start + at, b->p, (uint32_t)nb);

	pthread_mutex_lock(&l->mu);
	pressure = false;
	if (!ret) {
		l->pos = (at + nb) % l->nblocks;
		l->durable = b->last;
		l->st.chunks++;
		l->st.chunk_blocks += nb;
		b->ntx = 0;
		b->len = 0;
		if (!l->spare)
			l->spare = b;
		else
			cb_free(b);
		pressure = used_locked(l) > l->ckpt_after;
	} else {
		ret = -EIO;
		l->st.errors++;
		l->retry = b;	/* rewritten (same seqs) by the next commit */
	}
	l->committing = false;
	l->done_gen = l->commit_gen;
	pthread_cond_broadcast(&l->commit_cv);
	if (!ret)
		run_callbacks(l, pressure);
	return ret;
}

/* Wait (mu held) for the in-flight commit to finish. */
static void wait_inflight(struct log *l)
{
	uint64_t g = l->commit_gen;

	while (l->done_gen < g)
		pthread_cond_wait(&l->commit_cv, &l->mu);
}

static int commit_locked(struct log *l, uint64_t seq)
{
	bool counted = false;
	int ret;

	if (seq > l->last)
		seq = l->last;
	for (;;) {
		if (l->durable >= seq)
			return 0;
		if (!counted) {
			l->st.commits++;
			counted = true;
		}
		if (l->committing) {
			bool covered = l->inflight_last >= seq;

			wait_inflight(l);
			if (l->durable >= seq)
				return 0;
			if (covered)
				return -EIO;	/* the commit carrying seq failed */
			continue;
		}
		ret = commit_round(l);
		if (ret)
			return ret;
	}
}

int log_commit(struct log *l, uint64_t seq)
{
	int ret;

	pthread_mutex_lock(&l->mu);
	ret = commit_locked(l, seq);
	pthread_mutex_unlock(&l->mu);
	return ret;
}

/* Make room for @len more unreserved bytes in the pending chunk (mu
 * held): commit it when full, or wait for the reserved appends when the
 * reservations alone leave no room (they append without waiting). */
static int make_room(struct log *l, size_t len)
{
	int ret;

	for (;;) {
		if (l->pending->len + l->reserved + len <= l->max_payload)
			return 0;
		if (!l->pending->ntx) {
			pthread_cond_wait(&l->reserve_cv, &l->mu);
			continue;
		}
		if (l->committing) {
			wait_inflight(l);
			continue;
		}
		ret = commit_round(l);
		if (ret)
			return ret;
	}
}

int log_append(struct log *l, struct log_buf *tx, uint64_t *seq)
{
	struct chunkbuf *b;
	uint64_t need;
	int ret = 0;

	if (tx->len > l->max_payload)
		return -E2BIG;
	pthread_mutex_lock(&l->mu);
	/* The pending chunk is bounded; when this tx does not fit, commit it
	 * now.  That is not a wait for space: the space exists.  A reserved
	 * tx fits by construction. */
	if (tx->reserved) {
		tx->reserved = false;
		l->reserved -= tx->len;
		pthread_cond_broadcast(&l->reserve_cv);
	} else {
		ret = make_room(l, tx->len);
	}
	b = l->pending;
	need = used_locked(l) - cb_blocks(b) + chunk_blocks(b->len + tx->len);
	if (!ret && need > l->nblocks - 1)
		ret = -ENOSPC;
	if (ret) {
		pthread_mutex_unlock(&l->mu);
		return ret;
	}
	if (tx->len)
		memcpy(b->p + CHUNK_HDR + b->len, tx->p, tx->len);
	b->len += tx->len;
	*seq = ++l->last;
	if (!b->ntx++)
		b->first = *seq;
	b->last = *seq;
	l->st.appends++;
	pthread_mutex_unlock(&l->mu);
	return 0;
}

int log_reserve(struct log *l, struct log_buf *tx)
{
	int ret = -EAGAIN;

	pthread_mutex_lock(&l->mu);
	if (!tx->reserved && l->pending->len + l->reserved + tx->len <= l->max_payload) {
		l->reserved += tx->len;
		tx->reserved = true;
		ret = 0;
	}
	pthread_mutex_unlock(&l->mu);
	return ret;
}

void log_unreserve(struct log *l, struct log_buf *tx)
{
	if (!tx->reserved)
		return;
	pthread_mutex_lock(&l->mu);
	tx->reserved = false;
	l->reserved -= tx->len;
	pthread_cond_broadcast(&l->reserve_cv);
	pthread_mutex_unlock(&l->mu);
}

/* Asks for a checkpoint once per sleep: if the one a wakeup came from did
 * not free enough (others appended meanwhile), the next sleep asks again. */
int log_wait_space(struct log *l)
{
	pthread_mutex_lock(&l->mu);
	while (used_locked(l) > l->nblocks - l->slack) {
		if (l->stopped) {
			pthread_mutex_unlock(&l->mu);
			return -EROFS;
		}
		if (l->cbs.on_pressure) {
			pthread_mutex_unlock(&l->mu);
			l->cbs.on_pressure(l->cbs.ctx);
			pthread_mutex_lock(&l->mu);
			if (used_locked(l) <= l->nblocks - l->slack)
				break;
		}
		l->st.space_waits++;
		pthread_cond_wait(&l->space_cv, &l->mu);
	}
	pthread_mutex_unlock(&l->mu);
	return l->cbs.on_room ? l->cbs.on_room(l->cbs.ctx) : 0;
}

void log_stop_waits(struct log *l)
{
	pthread_mutex_lock(&l->mu);
	l->stopped = true;
	pthread_cond_broadcast(&l->space_cv);
	pthread_mutex_unlock(&l->mu);
}

uint64_t log_durable_seq(struct log *l)
{
	uint64_t v;

	pthread_mutex_lock(&l->mu);
	v = l->durable;
	pthread_mutex_unlock(&l->mu);
	return v;
}

uint64_t log_last_seq(struct log *l)
{
	uint64_t v;

	pthread_mutex_lock(&l->mu);
	v = l->last;
	pthread_mutex_unlock(&l->mu);
	return v;
}

int log_barrier(struct log *l, uint64_t *seq, uint64_t *pos)
{
	int ret;

	pthread_mutex_lock(&l->mu);
	ret = commit_locked(l, l->last);
	/* (durable, pos) only change together at the end of a commit, so
	 * they always agree: the chunk holding durable+1 goes at pos (or at
	 * 0 if it does not fit), which is what replay from this head tries. */
	*seq = l->durable;
	*pos = l->pos;
	pthread_mutex_unlock(&l->mu);
	return ret;
}

void log_set_head(struct log *l, uint64_t pos, uint64_t seq)
{
	pthread_mutex_lock(&l->mu);
	l->head_pos = pos % l->nblocks;
	l->head_seq = seq;
	pthread_cond_broadcast(&l->space_cv);
	pthread_mutex_unlock(&l->mu);
}

void log_set_ckpt_blocks(struct log *l, uint64_t blocks)
{
	pthread_mutex_lock(&l->mu);
	if (blocks && blocks < l->nblocks / 2)
		l->ckpt_after = blocks;
	pthread_mutex_unlock(&l->mu);
}

uint64_t log_used_blocks(struct log *l)
{
	uint64_t v;

	pthread_mutex_lock(&l->mu);
	v = used_locked(l);
	pthread_mutex_unlock(&l->mu);
	return v;
}

void log_get_stats(struct log *l, struct log_stats *st)
{
	pthread_mutex_lock(&l->mu);
	*st = l->st;
	pthread_mutex_unlock(&l->mu);
}

int log_open(struct mirror *m, const struct log_geom *g, uint64_t pos, uint64_t seq,
	     const struct log_cbs *cbs, struct log **out)
{
	struct log *l;
	uint64_t bytes;

	if (g->nblocks < LOG_MIN_BLOCKS || pos >= g->nblocks || g->head_pos >= g->nblocks ||
	    seq == 0)
		return -EINVAL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->m = m;
	l->start = g->start;
	l->nblocks = g->nblocks;
	l->log_id = g->cont_seq ? g->cont_log_id : g->log_id;
	/* A chunk is at most 1/16 of the region, so one full chunk plus the
	 * tail it may skip at the end of the region fit in the slack. */
	bytes = g->nblocks * TFS_BLOCK_SIZE / 16;
	if (bytes > CHUNK_MAX_BYTES)
		bytes = CHUNK_MAX_BYTES;
	l->cap = bytes;
	l->max_payload = bytes - CHUNK_HDR;
	l->slack = g->nblocks / 8 > 512 ? g->nblocks / 8 : 512;
	if (l->slack > g->nblocks / 4)	/* small (test) regions */
		l->slack = g->nblocks / 4;
	l->ckpt_after = g->nblocks / 2;
	if (cbs)
		l->cbs = *cbs;
	l->head_pos = g->head_pos;
	l->head_seq = g->head_seq;
	l->pos = pos;
	l->last = l->durable = seq - 1;
	l->pending = cb_new(l->cap);
	l->spare = cb_new(l->cap);
	if (!l->pending || !l->spare) {
		cb_free(l->pending);
		cb_free(l->spare);
		free(l);
		return -ENOMEM;
	}
	pthread_mutex_init(&l->mu, NULL);
	pthread_mutex_init(&l->cb_mu, NULL);
	pthread_cond_init(&l->commit_cv, NULL);
	pthread_cond_init(&l->space_cv, NULL);
	pthread_cond_init(&l->reserve_cv, NULL);
	*out = l;
	return 0;
}

/* Does not commit: a caller that wants the pending records on disk commits
 * first (tfs_crash closes without writing anything on purpose). */
void log_close(struct log *l)
{
	if (!l)
		return;
	cb_free(l->pending);
	cb_free(l->retry);
	cb_free(l->spare);
	pthread_cond_destroy(&l->commit_cv);
	pthread_cond_destroy(&l->space_cv);
	pthread_cond_destroy(&l->reserve_cv);
	pthread_mutex_destroy(&l->cb_mu);
	pthread_mutex_destroy(&l->mu);
	free(l);
}

/* ---- replay ---- */

struct rbuf {
	uint8_t *p;
	size_t cap;
};

static int rbuf_reserve(struct rbuf *r, size_t bytes)
{
	void *np;

	if (bytes <= r->cap)
		return 0;
	if (posix_memalign(&np, TFS_BLOCK_SIZE, bytes))
		return -ENOMEM;
	/* Keep what is there: read_chunk grows the buffer after reading the
	 * header block into it, and a lost header made the first multi-block
	 * chunk fail its csum on the first device tried (the log "ended" there
	 * when no other device was left to try). */
	if (r->p)
		memcpy(np, r->p, r->cap);
	free(r->p);
	r->p = np;
	r->cap = bytes;
	return 0;
}

/*
 * Replay reads the region ahead, LOG_WIN blocks at a time from one device:
 * a log of small chunks (one per group commit, often 1 or 2 blocks) read a
 * chunk at a time cost two synchronous reads per commit, and a 95 MiB log
 * of 13,000 commits took 2.9 s to replay, mostly waiting for them.  The
 * read-ahead is only a guess at where the log goes: it fails quietly (no
 * error is counted for blocks the log may not even use) and the chunk is
 * then read exactly as before, errors and all.
 */
#define LOG_WIN 2048u			/* 8 MiB: holds the largest chunk */

struct lwin {
	uint8_t *p;			/* LOG_WIN blocks, or NULL: no read-ahead */
	unsigned dev;			/* whose copy it holds */
	uint64_t pos, n;		/* region blocks [pos, pos + n) */
};

static int win_fill(struct mirror *m, unsigned d, const struct log_geom *g, struct lwin *w,
		    uint64_t at)
{
	uint64_t n = g->nblocks - at < LOG_WIN ? g->nblocks - at : LOG_WIN;

	w->n = 0;
	if (!m->devs[d] || atomic_load(&m->state[d]) != MDEV_OK ||
	    dev_pread(m->be, m->devs[d], w->p, n * TFS_BLOCK_SIZE,
		      (g->start + at) * TFS_BLOCK_SIZE))
		return -EIO;
	w->dev = d;
	w->pos = at;
	w->n = n;
	return 0;
}

/* Region blocks [at, at + n) of device @d into @dst: from the window @w
 * (NULL: none) when it holds them or a refill from @at brings them in,
 * else by one exact read. */
static int log_read(struct mirror *m, const struct log_geom *g, struct lwin *w, unsigned d,
		    uint64_t at, void *dst, uint64_t n)
{
	if (w && w->p && !(w->n && w->dev == d && at >= w->pos && at + n <= w->pos + w->n) &&
	    n <= LOG_WIN)
		win_fill(m, d, g, w, at);
	if (w && w->p && w->n && w->dev == d && at >= w->pos && at + n <= w->pos + w->n) {
		memcpy(dst, w->p + (at - w->pos) * TFS_BLOCK_SIZE, n * TFS_BLOCK_SIZE);
		return 0;
	}
	return mirror_read_dev(m, d, g->start + at, dst, (uint32_t)n);
}

/*
 * Read and verify the chunk at region block @at expected to start with
 * @seq, from the first healthy device whose copy verifies.  0 with the
 * chunk in r (*payload, *nb, *last set) and *bad the devices tried before
 * whose copy did not verify (bit d) or could not be read (bit 8 + d);
 * -ENOENT when no copy is valid; -ENOMEM.
 */
static int read_chunk(struct mirror *m, const struct log_geom *g, struct lwin *w, uint64_t at,
		      uint64_t seq, struct rbuf *r, size_t *payload, uint64_t *nb, uint64_t *last,
		      unsigned *bad)
{
	*bad = 0;
	for (unsigned d = 0; d < m->ndevs; d++) {
		uint64_t n, want;
		uint32_t plen;
		const uint8_t *h;
		int ret;

		if (!m->devs[d] || atomic_load(&m->state[d]) != MDEV_OK)
			continue;
		ret = rbuf_reserve(r, TFS_BLOCK_SIZE);
		if (ret)
			return ret;
		*bad |= 1u << d;
		if (log_read(m, g, w, d, at, r->p, 1)) {
			*bad |= 1u << (8 + d);
			continue;
		}
		h = r->p;
		plen = le32_get(h + CH_PAYLOAD);
		n = le32_get(h + CH_NBLOCKS);
		if (memcmp(h + CH_MAGIC, CHUNK_MAGIC, 8) || le64_get(h + CH_LOG_ID) != g->log_id ||
		    le64_get(h + CH_POS) != at || le64_get(h + CH_FIRST) != seq ||
		    le64_get(h + CH_LAST) < seq || le64_get(h + CH_RESERVED) != 0 ||
		    n != chunk_blocks(plen) || n > g->nblocks - at)
			continue;
		*last = le64_get(h + CH_LAST);
		ret = rbuf_reserve(r, n * TFS_BLOCK_SIZE);
		if (ret)
			return ret;
		if (n > 1 && log_read(m, g, w, d, at + 1, r->p + TFS_BLOCK_SIZE, n - 1)) {
			*bad |= 1u << (8 + d);
			continue;
		}
		want = le64_get(r->p + CH_CSUM);
		le64_put(r->p + CH_CSUM, 0);
		if (csum_buf(r->p, CHUNK_HDR + plen, at) != want)
			continue;
		le64_put(r->p + CH_CSUM, want);	/* as on disk: a repair writes it */
		*bad &= ~(1u << d);
		*payload = plen;
		*nb = n;
		return 0;
	}
	return -ENOENT;
}

/*
 * A chunk replay read from one device after other devices' copies did not
 * verify (@bad, from read_chunk): the good copy (r) is written over each
 * bad one, unless the mirror is no_repair (rescue mount, fsck -n).  Whether
 * to count them waits for the next chunk (replay_count): only the last
 * chunk of a log can be torn by a crash (one commit is in flight at a
 * time, and it is written to every device at once), and a crash is not
 * damage.  Returns the devices rewritten.
 */
static unsigned replay_repair(struct mirror *m, const struct log_geom *g, uint64_t at,
			      const struct rbuf *r, uint64_t nb, unsigned bad)
{
	unsigned fixed = 0;

	for (unsigned d = 0; d < m->ndevs && !m->no_repair; d++)
		if ((bad & (1u << d)) &&
		    !mirror_write_dev(m, d, g->start + at, r->p, (uint32_t)nb))
			fixed |= 1u << d;
	return fixed;
}

/*
 * The last chunk replayed (at @at, first seq @seq, of @g's log) verified on
 * the first device tried; a crash may have cut its write on the devices
 * read_chunk never tried.  A mount that continues the log (logcont.h)
 * keeps this log as the journal of what it holds, so a device left
 * without that chunk could not replay it alone (its copy is damage once
 * the continuation names the log's end): every in-sync device's copy is
 * compared with the good one and rewritten where it differs, before the
 * mount's flush and superblock.  Returns the devices rewritten.
 */
static unsigned replay_repair_last(struct mirror *m, const struct log_geom *g, uint64_t at,
				   uint64_t seq, struct rbuf *r)
{
	uint64_t nb, last;
	unsigned fixed = 0, bad;
	size_t payload;
	uint8_t *cp;

	if (m->no_repair || read_chunk(m, g, NULL, at, seq, r, &payload, &nb, &last, &bad) ||
	    posix_memalign((void **)&cp, TFS_BLOCK_SIZE, nb * TFS_BLOCK_SIZE))
		return 0;
	for (unsigned d = 0; d < m->ndevs; d++) {
		if (!m->devs[d] || atomic_load(&m->state[d]) != MDEV_OK ||
		    (log_read(m, g, NULL, d, at, cp, nb) == 0 &&
		     memcmp(cp, r->p, nb * TFS_BLOCK_SIZE) == 0))
			continue;
		if (!mirror_write_dev(m, d, g->start + at, r->p, (uint32_t)nb))
			fixed |= 1u << d;
	}
	free(cp);
	return fixed;
}

/* A later chunk verified: the chunk at @at was complete before it was
 * written, so its bad copies (@bad, bits as read_chunk's) were damage:
 * counted on their devices like a bad copy of a block (one per chunk),
 * with the repairs (@fixed).  Read errors are counted where they happen. */
static void replay_count(struct mirror *m, const struct log_geom *g, uint64_t at,
			 unsigned bad, unsigned fixed)
{
	for (unsigned d = 0; d < m->ndevs; d++) {
		if ((bad & (1u << d)) && !(bad & (1u << (8 + d))))
			mirror_event(m, d, MEV_CSUM_ERR, g->start + at, 1);
		if (fixed & (1u << d))
			mirror_event(m, d, MEV_REPAIRED, g->start + at, 1);
	}
}

/* Blocks of the largest chunk a writer makes in a region of @nblocks
 * (log_open's bound): the next chunk after one at pos starts within this
 * many blocks of it, or at 0. */
static uint64_t writer_chunk_blocks(uint64_t nblocks)
{
	uint64_t bytes = nblocks * TFS_BLOCK_SIZE / 16;

	if (bytes > CHUNK_MAX_BYTES)
		bytes = CHUNK_MAX_BYTES;
	return (bytes + TFS_BLOCK_SIZE - 1) / TFS_BLOCK_SIZE;
}

/*
 * The log ended at (@pos, @seq): is there evidence that it went on?
 *   -EBADMSG: a chunk of this log_id with a first seq beyond @seq verifies
 *     within one chunk's reach after pos (or at the start of the region):
 *     it was written only after the chunk holding @seq was durable, so that
 *     chunk is damaged on every device, not torn by a crash.
 *   -ESTALE: a chunk of the log_id the next mount after this superblock
 *     writes under (g->next_log_id) starting exactly at (pos or 0, seq)
 *     verifies: a later mount continued this log, which it does only after
 *     its superblock is durable, so the superblock replay started from is
 *     older than the newest one (lost on every device).  Chunks of any
 *     other log_id (an earlier file system on the device) prove nothing.
 * 0 otherwise.
 */
static int log_went_on(struct mirror *m, const struct log_geom *g, uint64_t pos,
		       uint64_t seq, struct rbuf *r)
{
	uint64_t w = writer_chunk_blocks(g->nblocks) + 1;
	uint64_t from[2] = { pos, 0 };
	uint8_t *win = NULL;
	int res = 0;

	if (w > g->nblocks)
		w = g->nblocks;
	if (posix_memalign((void **)&win, TFS_BLOCK_SIZE, w * TFS_BLOCK_SIZE))
		return 0;	/* no memory for the check: the log ends as before */
	for (int k = 0; k < 2 && !res; k++) {
		uint64_t base = from[k], n = w;

		if (k == 1 && pos == 0)
			break;
		if (base + n > g->nblocks)
			n = g->nblocks - base;
		for (unsigned d = 0; d < m->ndevs && !res; d++) {
			if (!m->devs[d] || atomic_load(&m->state[d]) != MDEV_OK)
				continue;
			if (mirror_read_dev(m, d, g->start + base, win, (uint32_t)n))
				continue;
			for (uint64_t i = 0; i < n && !res; i++) {
				const uint8_t *h = win + i * TFS_BLOCK_SIZE;
				uint64_t at = base + i, first, id, last, nb;
				unsigned bad;	/* evidence only: not counted here */
				size_t plen;

				if (memcmp(h + CH_MAGIC, CHUNK_MAGIC, 8) || le64_get(h + CH_POS) != at)
					continue;
				first = le64_get(h + CH_FIRST);
				id = le64_get(h + CH_LOG_ID);
				if (id == g->log_id ? first <= seq
						    : (!g->next_log_id || id != g->next_log_id ||
						       first != seq || (at != pos && at != 0)))
					continue;
				{
					struct log_geom og = *g;

					og.log_id = id;
					if (read_chunk(m, &og, NULL, at, first, r, &plen, &nb, &last,
						       &bad))
						continue;
				}
				res = id == g->log_id ? -EBADMSG : -ESTALE;
			}
		}
	}
	free(win);
	return res;
}

struct lost_cand {
	uint64_t at, id, first;
};

static int cand_cmp(const void *a, const void *b)
{
	const struct lost_cand *x = a, *y = b;

	if (x->at != y->at)
		return x->at < y->at ? -1 : 1;
	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return x->first < y->first ? -1 : x->first > y->first;
}

struct lost_ctx {
	log_rec_fn cb;
	void *ctx;
	uint64_t n;
};

static int lost_rec(void *ctx, const struct log_rec *r)
{
	struct lost_ctx *lc = ctx;

	lc->n++;
	return lc->cb ? lc->cb(lc->ctx, r) : 0;
}

/* Candidates: every block of the region on every healthy device whose
 * header is a chunk of g's log_id or the next one starting at seq or
 * later, deduplicated.  0 or -ENOMEM. */
static int lost_cands(struct mirror *m, const struct log_geom *g, uint64_t seq,
		      struct lost_cand **out, size_t *nout)
{
	const uint32_t run = 256;
	struct lost_cand *v = NULL;
	size_t n = 0, cap = 0;
	uint8_t *buf = NULL;

	if (posix_memalign((void **)&buf, TFS_BLOCK_SIZE, run * TFS_BLOCK_SIZE))
		return -ENOMEM;
	for (unsigned d = 0; d < m->ndevs; d++) {
		if (!m->devs[d] || atomic_load(&m->state[d]) != MDEV_OK)
			continue;
		for (uint64_t b = 0; b < g->nblocks; b += run) {
			uint32_t k = (uint32_t)(g->nblocks - b < run ? g->nblocks - b : run);

			if (mirror_read_dev(m, d, g->start + b, buf, k))
				continue;	/* a block that cannot be read holds no evidence */
			for (uint32_t i = 0; i < k; i++) {
				const uint8_t *h = buf + (size_t)i * TFS_BLOCK_SIZE;
				uint64_t id = le64_get(h + CH_LOG_ID);

				if (memcmp(h + CH_MAGIC, CHUNK_MAGIC, 8) ||
				    le64_get(h + CH_POS) != b + i || le64_get(h + CH_FIRST) < seq ||
				    (id != g->log_id && (!g->next_log_id || id != g->next_log_id)))
					continue;
				if (n == cap) {
					size_t nc = cap ? cap * 2 : 64;
					struct lost_cand *nv = realloc(v, nc * sizeof(*nv));

					if (!nv) {
						free(v);
						free(buf);
						return -ENOMEM;
					}
					v = nv;
					cap = nc;
				}
				v[n++] = (struct lost_cand){ b + i, id, le64_get(h + CH_FIRST) };
			}
		}
	}
	free(buf);
	if (n)
		qsort(v, n, sizeof(*v), cand_cmp);
	*out = v;
	*nout = n;
	return 0;
}

int log_lost(struct mirror *m, const struct log_geom *g, uint64_t seq, log_rec_fn cb,
	     void *ctx, struct log_lost *out)
{
	struct lost_cand *v = NULL;
	struct rbuf r = { 0 };
	size_t n = 0;
	int ret;

	memset(out, 0, sizeof(*out));
	ret = lost_cands(m, g, seq, &v, &n);
	for (size_t i = 0; ret == 0 && i < n; i++) {
		struct log_geom og = *g;
		struct lost_ctx lc = { .cb = cb, .ctx = ctx };
		uint64_t nb, last;
		unsigned bad;
		size_t plen;

		if (i && !cand_cmp(&v[i], &v[i - 1]))
			continue;
		og.log_id = v[i].id;
		ret = read_chunk(m, &og, NULL, v[i].at, v[i].first, &r, &plen, &nb, &last, &bad);
		if (ret == -ENOENT) {
			ret = 0;	/* no copy verifies: nothing to count */
			continue;
		}
		if (ret)
			break;
		out->chunks++;
		if (last > out->last_seq)
			out->last_seq = last;
		/* A record that does not decode in a verified chunk: the
		 * ones before it are counted. */
		if (log_decode(r.p + CHUNK_HDR, plen, lost_rec, &lc) == -ENOMEM)
			ret = -ENOMEM;
		out->records += lc.n;
	}
	free(r.p);
	free(v);
	return ret;
}

int log_forget_from(struct mirror *m, const struct log_geom *g, uint64_t seq)
{
	const uint32_t run = 256;
	uint8_t *buf = NULL, *zero = NULL;
	int ret = 0;

	if (posix_memalign((void **)&buf, TFS_BLOCK_SIZE, run * TFS_BLOCK_SIZE) ||
	    posix_memalign((void **)&zero, TFS_BLOCK_SIZE, TFS_BLOCK_SIZE)) {
		free(buf);
		return -ENOMEM;
	}
	memset(zero, 0, TFS_BLOCK_SIZE);
	for (unsigned d = 0; d < m->ndevs && ret == 0; d++) {
		if (!m->devs[d] || atomic_load(&m->state[d]) != MDEV_OK)
			continue;
		for (uint64_t b = 0; b < g->nblocks && ret == 0; b += run) {
			uint32_t n = (uint32_t)(g->nblocks - b < run ? g->nblocks - b : run);

			ret = mirror_read_dev(m, d, g->start + b, buf, n);
			for (uint32_t i = 0; ret == 0 && i < n; i++) {
				const uint8_t *h = buf + (size_t)i * TFS_BLOCK_SIZE;

				if (memcmp(h + CH_MAGIC, CHUNK_MAGIC, 8) == 0 &&
				    le64_get(h + CH_FIRST) >= seq)
					ret = mirror_write(m, g->start + b + i, zero, 1);
			}
		}
	}
	if (ret == 0)
		ret = mirror_flush(m);
	free(buf);
	free(zero);
	return ret;
}

int log_replay(struct mirror *m, const struct log_geom *g, log_rec_fn cb, void *ctx,
	       uint64_t *end_pos, uint64_t *next_seq)
{
	return log_replay_pre(m, g, NULL, cb, ctx, end_pos, next_seq);
}

int log_replay_pre(struct mirror *m, const struct log_geom *g, log_chunk_fn pre,
		   log_rec_fn cb, void *ctx, uint64_t *end_pos, uint64_t *next_seq)
{
	struct rbuf r = { 0 };
	struct lwin w = { 0 };
	struct log_geom cg;		/* the continuation's, once reached */
	const struct log_geom *cur = g;
	uint64_t pos = g->head_pos, seq = g->head_seq;
	/* the last chunk read (replay_count, replay_repair_last) */
	struct { const struct log_geom *g; uint64_t at, seq; unsigned bad, fixed; } prev = { 0 };
	int ret = 0;

	if (g->nblocks == 0 || pos >= g->nblocks)
		return -EINVAL;
	if (mirror_healthy(m) == 0)
		return -EIO;
	/* No memory for the read-ahead: chunk by chunk, as before. */
	if (posix_memalign((void **)&w.p, TFS_BLOCK_SIZE, (size_t)LOG_WIN * TFS_BLOCK_SIZE))
		w.p = NULL;
	for (;;) {
		uint64_t at = pos, nb, last;
		size_t payload;
		unsigned bad;

		if (cur == g && g->cont_seq && seq > g->cont_seq) {
			/* A chunk of the old log ran past where the superblock
			 * says it ends: not the log the continuation was made
			 * after (the mount that made it ended a chunk there). */
			ret = -EUCLEAN;
			break;
		}
		if (cur == g && g->cont_seq && seq == g->cont_seq) {
			/* The old log ends here: the superblock says where. */
			if (pos != g->cont_pos) {
				ret = -EUCLEAN;
				break;
			}
			cg = *g;
			cg.log_id = g->cont_log_id;
			cg.next_log_id = g->cont_next_log_id;
			cg.cont_seq = 0;
			cur = &cg;
		}
		ret = read_chunk(m, cur, &w, at, seq, &r, &payload, &nb, &last, &bad);
		if (ret == -ENOENT && pos != 0) {
			/* the chunk may not have fit before the end */
			at = 0;
			ret = read_chunk(m, cur, &w, at, seq, &r, &payload, &nb, &last, &bad);
		}
		if (ret == -ENOENT) {
			/* The log ends here, unless it demonstrably went on.
			 * Before the continuation it must not end: its chunks
			 * were replayed once, by the mount that continued. */
			ret = log_went_on(m, cur, pos, seq, &r);
			if (ret == 0 && cur == g && g->cont_seq)
				ret = -EBADMSG;
			break;
		}
		if (ret)
			break;
		if (prev.bad)
			replay_count(m, g, prev.at, prev.bad, prev.fixed);
		prev.g = cur;
		prev.at = at;
		prev.seq = seq;
		prev.bad = bad;
		prev.fixed = bad ? replay_repair(m, g, at, &r, nb, bad) : 0;
		if (pre)
			pre(ctx, r.p + CHUNK_HDR, payload);
		ret = log_decode(r.p + CHUNK_HDR, payload, cb, ctx);
		if (ret)
			break;
		pos = (at + nb) % g->nblocks;
		seq = last + 1;
	}
	if (prev.g && (!ret || ret == -EBADMSG || ret == -ESTALE)) {
		unsigned more = replay_repair_last(m, prev.g, prev.at, prev.seq, &r);

		prev.bad |= more;
		prev.fixed |= more;
	}
	free(r.p);
	free(w.p);
	if (prev.bad)
		tfs_log(LOG_NOTICE, "metadata log: the last chunk (block %llu) verified on "
			"some devices only, as a write cut by a crash leaves it%s",
			(unsigned long long)(g->start + prev.at),
			prev.fixed ? "; rewritten on the others" : "");
	if (ret && ret != -EBADMSG && ret != -ESTALE)
		return ret;
	*end_pos = pos;
	*next_seq = seq;
	return ret;
}
