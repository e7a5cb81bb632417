// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: the log region on two image files behind the fault backend:
 * append/commit/replay, FUA commits, group commit, wraparound, torn and
 * one-mirror chunks, stale log ids, what accepting a damaged log drops
 * (log_lost, log_forget_from), barrier, space waits, failed commits,
 * replay's read-ahead (a few device reads for many chunks, read errors)
 * (the record codec is test_logrec.c). */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "csum.h"
#include "dev.h"
#include "log.h"
#include "mirror.h"

/* ================= codec ================= */
/* ================= log region ================= */

#define START 16u		/* first block of the region on each device */

struct env {
	char path[2][64];
	struct dev_backend *be;	/* fault backend over "file" */
	struct dev *d[2];
	struct mirror m;
	uint64_t nblocks;
};

static void env_open(struct env *e, uint64_t nblocks)
{
	struct dev_backend *lower;
	char err[256];

	memset(e, 0, sizeof(*e));
	e->nblocks = nblocks;
	assert_int_equal(dev_backend_create("file", &lower), 0);
	assert_int_equal(dev_fault_create(lower, &e->be), 0);
	for (int i = 0; i < 2; i++) {
		int fd;

		strcpy(e->path[i], "/tmp/twinfs-test-log-XXXXXX");
		fd = mkstemp(e->path[i]);
		assert_true(fd >= 0);
		assert_int_equal(ftruncate(fd, (off_t)((START + nblocks) * 4096)), 0);
		close(fd);
		assert_int_equal(dev_open(e->path[i], false, &e->d[i], err, sizeof(err)), 0);
		assert_int_equal(dev_backend_attach(e->be, e->d[i]), 0);
	}
	assert_int_equal(mirror_init(&e->m, e->be, e->d, 2), 0);
}

static void env_close(struct env *e)
{
	dev_backend_destroy(e->be);
	for (int i = 0; i < 2; i++) {
		dev_close(e->d[i]);
		unlink(e->path[i]);
	}
}

static struct log_geom geom(const struct env *e, uint64_t id, uint64_t head_pos, uint64_t head_seq)
{
	/* Log ids 1 and 2 are each other's successor (fs_next_log_id's role):
	 * a chunk of the one continuing the other is evidence of a newer
	 * mount.  Other ids have none. */
	return (struct log_geom){ .start = START, .nblocks = e->nblocks,
		.head_pos = head_pos, .head_seq = head_seq, .log_id = id,
		.next_log_id = id == 1 ? 2 : id == 2 ? 1 : 0 };
}

/* A transaction identified by id: LR_INODE_DEL{id} plus, when extra > 0,
 * an xattr whose value (extra bytes) is derived from id. */
static void make_tx(struct log_buf *b, uint64_t id, uint32_t extra)
{
	static _Thread_local char val[LOG_XATTR_VAL_MAX];	/* threads share make_tx */
	struct log_rec r;

	log_buf_reset(b);
	memset(&r, 0, sizeof(r));
	r.type = LR_INODE_DEL;
	r.del.ino = id;
	assert_int_equal(log_buf_add(b, &r), 0);
	if (extra) {
		for (uint32_t i = 0; i < extra; i++)
			val[i] = (char)(id * 31 + i);
		memset(&r, 0, sizeof(r));
		r.type = LR_XATTR_SET;
		r.xattr.ino = id;
		r.xattr.name = "user.v";
		r.xattr.namelen = 6;
		r.xattr.val = val;
		r.xattr.vallen = extra;
		assert_int_equal(log_buf_add(b, &r), 0);
	}
}

/* Replay collector: ids of LR_INODE_DEL in order; xattr values checked. */
struct ids {
	uint64_t *v;
	size_t n, cap;
};

static int ids_cb(void *ctx, const struct log_rec *r)
{
	struct ids *s = ctx;

	if (r->type == LR_INODE_DEL) {
		if (s->n == s->cap) {
			s->cap = s->cap ? 2 * s->cap : 256;
			s->v = realloc(s->v, s->cap * sizeof(*s->v));
		}
		s->v[s->n++] = r->del.ino;
	} else if (r->type == LR_XATTR_SET) {
		const uint8_t *v = r->xattr.val;

		assert_true(s->n > 0 && s->v[s->n - 1] == r->xattr.ino);
		for (uint32_t i = 0; i < r->xattr.vallen; i++)
			if (v[i] != (uint8_t)(r->xattr.ino * 31 + i))
				fail_msg("xattr value of %llu damaged at %u",
					 (unsigned long long)r->xattr.ino, i);
	}
	return 0;
}

static int replay(struct env *e, uint64_t id, uint64_t pos, uint64_t seq, struct ids *out,
		  uint64_t *end, uint64_t *next)
{
	struct log_geom g = geom(e, id, pos, seq);

	out->n = 0;
	return log_replay(&e->m, &g, ids_cb, out, end, next);
}

/* Append + commit one tx per id in [from, to). */
static void write_ids(struct log *l, uint64_t from, uint64_t to, uint32_t extra)
{
	struct log_buf b;
	uint64_t seq;

	log_buf_init(&b);
	for (uint64_t id = from; id < to; id++) {
		make_tx(&b, id, extra);
		assert_int_equal(log_append(l, &b, &seq), 0);
		assert_int_equal(log_commit(l, seq), 0);
		assert_true(log_durable_seq(l) >= seq);
	}
	log_buf_free(&b);
}

/* A commit flushes every mirror, then writes its chunk with FUA: per
 * device the journal shows flush, chunk write, and the chunk write was a
 * FUA write, not a plain write followed by a second flush of our own. */
static void test_commit_fua(void **state)
{
	struct env e;
	struct log *l;
	struct log_geom g;
	struct log_buf b;
	uint64_t seq;
	const struct dev_fault_rec *j;
	size_t n;

	env_open(&e, 1024);
	g = geom(&e, 78, 0, 1);
	assert_int_equal(log_open(&e.m, &g, 0, 1, NULL, &l), 0);
	log_buf_init(&b);
	make_tx(&b, 1, 100);
	assert_int_equal(log_append(l, &b, &seq), 0);
	dev_fault_record(e.be, true);
	assert_int_equal(log_commit(l, seq), 0);
	j = dev_fault_journal(e.be, &n);
	for (int d = 0; d < 2; d++) {
		uint8_t ops[8];
		unsigned k = 0;

		for (size_t i = 0; i < n; i++)
			if (j[i].dev_idx == d && k < 8)
				ops[k++] = j[i].op;
		assert_int_equal(k, 2);
		assert_int_equal(ops[0], DEV_FLUSH);
		assert_int_equal(ops[1], DEV_WRITE);
		assert_int_equal(dev_fault_fua_writes(e.be, d), 1);
	}
	dev_fault_record(e.be, false);
	log_buf_free(&b);
	log_close(l);
	env_close(&e);
}

/* Per device, the ops of the journal and whether each write was FUA. */
static unsigned dev_ops(struct env *e, int d, uint8_t ops[8], bool fua[8])
{
	size_t n;
	const struct dev_fault_rec *j = dev_fault_journal(e->be, &n);
	unsigned k = 0;

	for (size_t i = 0; i < n; i++)
		if (j[i].dev_idx == d && k < 8) {
			fua[k] = j[i].fua;
			ops[k++] = j[i].op;
		}
	return k;
}

/* The flush before a chunk is there for the data the records point to: a
 * device whose only writes since its last flush were FUA writes (an
 * O_DSYNC write's data, the previous chunk) is not flushed again, one
 * with a plain write since is. */
static void test_commit_flush_only_dirty(void **state)
{
	struct env e;
	struct log *l;
	struct log_geom g;
	struct log_buf b;
	uint64_t seq;
	uint8_t ops[8];
	bool fua[8];
	void *data = NULL;

	env_open(&e, 1024);
	g = geom(&e, 78, 0, 1);
	assert_int_equal(log_open(&e.m, &g, 0, 1, NULL, &l), 0);
	log_buf_init(&b);
	assert_int_equal(posix_memalign(&data, 4096, 4096), 0);
	memset(data, 0x5a, 4096);
	make_tx(&b, 1, 100);
	assert_int_equal(log_append(l, &b, &seq), 0);
	assert_int_equal(log_commit(l, seq), 0);	/* flushes what the open left */

	/* Only FUA writes since: the chunk alone. */
	assert_int_equal(mirror_write_fua(&e.m, 8, data, 1), 0);
	make_tx(&b, 2, 100);
	assert_int_equal(log_append(l, &b, &seq), 0);
	dev_fault_record(e.be, true);
	assert_int_equal(log_commit(l, seq), 0);
	for (int d = 0; d < 2; d++) {
		assert_int_equal(dev_ops(&e, d, ops, fua), 1);
		assert_int_equal(ops[0], DEV_WRITE);
		assert_true(fua[0]);
	}

	/* A plain write since: flush, then the chunk. */
	assert_int_equal(mirror_write(&e.m, 9, data, 1), 0);
	make_tx(&b, 3, 100);
	assert_int_equal(log_append(l, &b, &seq), 0);
	dev_fault_record(e.be, true);
	assert_int_equal(log_commit(l, seq), 0);
	for (int d = 0; d < 2; d++) {
		/* the plain write was before recording started */
		assert_int_equal(dev_ops(&e, d, ops, fua), 2);
		assert_int_equal(ops[0], DEV_FLUSH);
		assert_int_equal(ops[1], DEV_WRITE);
		assert_true(fua[1]);
	}
	dev_fault_record(e.be, false);
	free(data);
	log_buf_free(&b);
	log_close(l);
	env_close(&e);
}

static void test_append_replay(void **state)
{
	struct env e;
	struct log *l;
	struct log_geom g;
	struct log_buf b;
	struct ids s = { 0 };
	uint64_t seq, end, next, bpos, bseq;

	env_open(&e, 1024);
	g = geom(&e, 77, 0, 1);
	assert_int_equal(log_open(&e.m, &g, 0, 1, NULL, &l), 0);
	log_buf_init(&b);
	for (uint64_t id = 1; id <= 100; id++) {
		make_tx(&b, id, (uint32_t)(id * 97 % 9000));
		assert_int_equal(log_append(l, &b, &seq), 0);
		assert_int_equal(seq, id);		/* one seq per tx */
		if (id % 10 == 0)
			assert_int_equal(log_commit(l, seq), 0);
	}
	assert_int_equal(log_durable_seq(l), 100);
	assert_int_equal(log_barrier(l, &bseq, &bpos), 0);
	assert_int_equal(bseq, 100);
	/* appended but never committed: lost, and replay stops before it */
	make_tx(&b, 101, 10);
	assert_int_equal(log_append(l, &b, &seq), 0);
	assert_int_equal(log_last_seq(l), 101);
	log_close(l);

	assert_int_equal(replay(&e, 77, 0, 1, &s, &end, &next), 0);
	assert_int_equal(s.n, 100);
	for (size_t i = 0; i < s.n; i++)
		assert_int_equal(s.v[i], i + 1);
	assert_int_equal(end, bpos);
	assert_int_equal(next, 101);
	/* reopen where replay ended and continue */
	assert_int_equal(log_open(&e.m, &g, end, next, NULL, &l), 0);
	write_ids(l, 101, 111, 5);
	log_close(l);
	assert_int_equal(replay(&e, 77, 0, 1, &s, &end, &next), 0);
	assert_int_equal(s.n, 110);
	assert_int_equal(s.v[109], 110);
	assert_int_equal(next, 111);
	/* a tx larger than a chunk is refused, not split */
	assert_int_equal(log_open(&e.m, &g, end, next, NULL, &l), 0);
	b.len = 1024 * 4096 / 16 + 1;
	if (b.cap < b.len) {
		b.p = realloc(b.p, b.len);
		b.cap = b.len;
	}
	assert_int_equal(log_append(l, &b, &seq), -E2BIG);
	log_close(l);
	log_buf_free(&b);
	free(s.v);
	env_close(&e);
}

/* A reserved tx appends without a commit round, even after unreserved
 * ones filled the pending chunk meanwhile (they commit around the room it
 * holds); a reservation with no room is refused; all of it replays. */
static void test_reserve(void **state)
{
	struct env e;
	struct log *l;
	struct log_geom g;
	struct log_buf b, r;
	struct log_stats st0, st;
	struct ids s = { 0 };
	uint64_t seq, end, next, id;

	env_open(&e, 1024);
	g = geom(&e, 78, 0, 1);
	assert_int_equal(log_open(&e.m, &g, 0, 1, NULL, &l), 0);
	log_buf_init(&b);
	log_buf_init(&r);
	make_tx(&r, 1, 3000);
	assert_int_equal(log_reserve(l, &r), 0);
	assert_true(r.reserved);
	log_get_stats(l, &st0);
	for (id = 2;; id++) {
		make_tx(&b, id, 2000);
		assert_int_equal(log_append(l, &b, &seq), 0);
		log_get_stats(l, &st);
		if (st.chunks > st0.chunks)
			break;
		assert_true(id < 10000);
	}
	/* No room for a chunk's worth beside what is pending now. */
	b.len = 1024 * 4096 / 16 - 64;
	if (b.cap < b.len) {
		b.p = realloc(b.p, b.len);
		b.cap = b.len;
	}
	assert_int_equal(log_reserve(l, &b), -EAGAIN);
	assert_false(b.reserved);
	log_unreserve(l, &b);	/* without a reservation: nothing */
	st0 = st;
	assert_int_equal(log_append(l, &r, &seq), 0);
	assert_false(r.reserved);
	log_get_stats(l, &st);
	assert_int_equal(st.chunks, st0.chunks);
	assert_int_equal(log_commit(l, UINT64_MAX), 0);
	log_close(l);
	assert_int_equal(replay(&e, 78, 0, 1, &s, &end, &next), 0);
	assert_int_equal(s.n, id);
	assert_int_equal(s.v[id - 1], 1);	/* appended last */
	log_buf_free(&b);
	log_buf_free(&r);
	free(s.v);
	env_close(&e);
}

/* ---- group commit ---- */

#define GC_THREADS 8
#define GC_ITERS 40

struct gc_arg {
	struct log *l;
	unsigned t;
	uint64_t seqs[GC_ITERS];
	int err;
};

static void *gc_thread(void *p)
{
	struct gc_arg *a = p;
	struct log_buf b;

	log_buf_init(&b);
	for (unsigned i = 0; i < GC_ITERS; i++) {
		uint64_t id = 1000 * (a->t + 1) + i, seq;

		make_tx(&b, id, 200 + (uint32_t)(id % 700));
		if (log_wait_space(a->l) || log_append(a->l, &b, &seq) || log_commit(a->l, seq) ||
		    log_durable_seq(a->l) < seq) {
			a->err = 1;
			break;
		}
		a->seqs[i] = seq;
	}
	log_buf_free(&b);
	return NULL;
}

static void test_group_commit(void **state)
{
	struct env e;
	struct log *l;
	struct log_geom g;
	struct gc_arg args[GC_THREADS];
	pthread_t th[GC_THREADS];
	struct log_stats st;
	struct ids s = { 0 };
	uint64_t end, next, last[GC_THREADS] = { 0 };

	env_open(&e, 4096);
	g = geom(&e, 5, 0, 1);
	assert_int_equal(log_open(&e.m, &g, 0, 1, NULL, &l), 0);
	for (unsigned t = 0; t < GC_THREADS; t++) {
		args[t] = (struct gc_arg){ .l = l, .t = t };
		assert_int_equal(pthread_create(&th[t], NULL, gc_thread, &args[t]), 0);
	}
	for (unsigned t = 0; t < GC_THREADS; t++) {
		pthread_join(th[t], NULL);
		assert_int_equal(args[t].err, 0);
	}
	log_get_stats(l, &st);
	assert_int_equal(st.appends, GC_THREADS * GC_ITERS);
	assert_int_equal(log_durable_seq(l), GC_THREADS * GC_ITERS);
	print_message("group commit: %llu commits waited, %llu chunks written\n",
		      (unsigned long long)st.commits, (unsigned long long)st.chunks);
	assert_true(st.chunks < st.commits);
	assert_true(st.chunks >= 1);
	log_close(l);

	/* every tx is back, each thread's in its own order, seqs = positions */
	assert_int_equal(replay(&e, 5, 0, 1, &s, &end, &next), 0);
	assert_int_equal(s.n, GC_THREADS * GC_ITERS);
	assert_int_equal(next, GC_THREADS * GC_ITERS + 1);
	for (size_t i = 0; i < s.n; i++) {
		unsigned t = (unsigned)(s.v[i] / 1000 - 1), k = (unsigned)(s.v[i] % 1000);

		assert_true(t < GC_THREADS && k < GC_ITERS);
		assert_int_equal(args[t].seqs[k], i + 1);
		assert_true(last[t] == 0 || s.v[i] > last[t]);
		last[t] = s.v[i];
	}
	free(s.v);
	env_close(&e);
}

/* ---- wraparound ---- */

static void test_wraparound(void **state)
{
	struct env e;
	struct log *l;
	struct log_geom g;
	struct ids s = { 0 };
	uint64_t head_pos = 0, head_seq = 1, prev_pos = 0, end, next, bseq, bpos;
	unsigned wraps = 0;

	env_open(&e, 128);		/* chunks up to 32 KiB: 8 blocks */
	g = geom(&e, 9, 0, 1);
	assert_int_equal(log_open(&e.m, &g, 0, 1, NULL, &l), 0);
	for (uint64_t id = 1; id <= 600; id++) {
		uint32_t extra = (uint32_t)((id * 7919) % 20000);

		write_ids(l, id, id + 1, extra);
		assert_int_equal(log_barrier(l, &bseq, &bpos), 0);
		assert_int_equal(bseq, id);
		if (bpos < prev_pos)
			wraps++;
		prev_pos = bpos;
		/* replay from the current head returns exactly head_seq..id */
		assert_int_equal(replay(&e, 9, head_pos, head_seq, &s, &end, &next), 0);
		assert_int_equal(s.n, id - head_seq + 1);
		for (size_t i = 0; i < s.n; i++)
			assert_int_equal(s.v[i], head_seq + i);
		assert_int_equal(end, bpos);
		assert_int_equal(next, id + 1);
		/* a "checkpoint" every third tx moves the head */
		if (id % 3 == 0) {
			log_set_head(l, bpos, bseq + 1);
			head_pos = bpos;
			head_seq = bseq + 1;
			assert_int_equal(log_used_blocks(l), 0);
		}
		assert_true(log_used_blocks(l) < 128);
	}
	print_message("wrapped %u times\n", wraps);
	assert_true(wraps >= 8);
	log_close(l);
	free(s.v);
	env_close(&e);
}

/* ---- torn, one-mirror, corrupt chunks ---- */

static void add_drop(struct env *e, int dev, uint64_t pos, uint64_t nblk)
{
	struct dev_fault_rule r = { .dev_idx = dev, .op = DEV_WRITE,
		.off = (START + pos) * 4096, .len = nblk * 4096,
		.kind = DEV_FAULT_DROP, .count = -1 };

	assert_int_equal(dev_fault_add_rule(e->be, &r), 0);
}

/* Flip a payload byte of the chunk at region block @at on image @i. */
static void flip_payload(struct env *e, int i, uint64_t at)
{
	FILE *f = fopen(e->path[i], "r+b");
	int c;

	assert_non_null(f);
	fseek(f, (long)((START + at) * 4096 + 64 + 3000), SEEK_SET);
	c = fgetc(f);
	fseek(f, (long)((START + at) * 4096 + 64 + 3000), SEEK_SET);
	fputc(c ^ 0x10, f);
	fclose(f);
}

static void test_torn_and_single_mirror(void **state)
{
	struct env e;
	struct log *l;
	struct log_geom g;
	struct ids s = { 0 };
	uint64_t end, next, bseq, bpos, p2, p3;

	env_open(&e, 256);
	g = geom(&e, 3, 0, 1);
	assert_int_equal(log_open(&e.m, &g, 0, 1, NULL, &l), 0);
	write_ids(l, 1, 4, 5000);		/* chunks of 2 blocks */
	assert_int_equal(log_barrier(l, &bseq, &p2), 0);

	/* chunk 4 lands on device 1 only: replayed from there */
	add_drop(&e, 0, p2, 2);
	write_ids(l, 4, 5, 5000);
	dev_fault_clear(e.be);
	assert_int_equal(log_barrier(l, &bseq, &p3), 0);
	assert_int_equal(replay(&e, 3, 0, 1, &s, &end, &next), 0);
	assert_int_equal(s.n, 4);
	assert_int_equal(end, p3);

	/* chunk 5: its second block reaches neither device (torn) */
	add_drop(&e, -1, p3 + 1, 1);
	write_ids(l, 5, 6, 5000);
	dev_fault_clear(e.be);
	assert_int_equal(log_barrier(l, &bseq, &bpos), 0);
	assert_int_equal(bseq, 5);
	log_close(l);
	assert_int_equal(replay(&e, 3, 0, 1, &s, &end, &next), 0);
	assert_int_equal(s.n, 4);
	assert_int_equal(end, p3);
	assert_int_equal(next, 5);

	/* a whole chunk dropped on both devices: same */
	assert_int_equal(log_open(&e.m, &g, end, next, NULL, &l), 0);
	add_drop(&e, -1, p3, 8);
	write_ids(l, 5, 6, 5000);
	dev_fault_clear(e.be);
	log_close(l);
	assert_int_equal(replay(&e, 3, 0, 1, &s, &end, &next), 0);
	assert_int_equal(s.n, 4);

	/* write it properly, then damage one payload byte on both images */
	assert_int_equal(log_open(&e.m, &g, end, next, NULL, &l), 0);
	write_ids(l, 5, 7, 5000);
	log_close(l);
	assert_int_equal(replay(&e, 3, 0, 1, &s, &end, &next), 0);
	assert_int_equal(s.n, 6);
	/* damaged on dev0 only: dev1's copy verifies, and since chunk 6
	 * follows it (not a crash's torn tail) dev0's copy is counted, once,
	 * and rewritten: a second replay finds nothing */
	flip_payload(&e, 0, p3);
	{
		uint64_t c0 = e.m.ctr[0].csum_err, r0 = e.m.ctr[0].repaired;

		assert_int_equal(replay(&e, 3, 0, 1, &s, &end, &next), 0);
		assert_int_equal(s.n, 6);
		assert_int_equal(e.m.ctr[0].csum_err, c0 + 1);
		assert_int_equal(e.m.ctr[0].repaired, r0 + 1);
		assert_int_equal(e.m.ctr[1].csum_err, 0);
		assert_int_equal(replay(&e, 3, 0, 1, &s, &end, &next), 0);
		assert_int_equal(e.m.ctr[0].csum_err, c0 + 1);
	}
	/* on both, the replay stops there and says so, because chunk 6
	 * after it verifies (a torn chunk is never followed by one) */
	flip_payload(&e, 0, p3);
	flip_payload(&e, 1, p3);
	assert_int_equal(replay(&e, 3, 0, 1, &s, &end, &next), -EBADMSG);
	assert_int_equal(s.n, 4);
	assert_int_equal(end, p3);
	assert_int_equal(next, 5);

	/* What accepting the loss drops (fsck): the damaged chunk's seq 5
	 * is unreadable, chunk 6 after it verifies (2 records); erasing
	 * from seq 5 on leaves a log that ends there without evidence. */
	{
		struct ids lost_ids = { 0 };
		struct log_lost lost;

		g = geom(&e, 3, 0, 1);
		assert_int_equal(log_lost(&e.m, &g, next, ids_cb, &lost_ids, &lost), 0);
		assert_int_equal(lost.chunks, 1);
		assert_int_equal(lost.records, 2);
		assert_int_equal(lost.last_seq, 6);
		assert_int_equal(lost_ids.n, 1);
		assert_int_equal(lost_ids.v[0], 6);
		assert_int_equal(log_forget_from(&e.m, &g, next), 0);
		assert_int_equal(replay(&e, 3, 0, 1, &s, &end, &next), 0);
		assert_int_equal(s.n, 4);
		assert_int_equal(next, 5);
		assert_int_equal(log_lost(&e.m, &g, next, NULL, NULL, &lost), 0);
		assert_int_equal(lost.chunks, 0);
		assert_int_equal(lost.last_seq, 0);
		free(lost_ids.v);
	}
	free(s.v);
	env_close(&e);
}

static void test_stale_log_id(void **state)
{
	struct env e;
	struct log *l;
	struct log_geom g;
	struct ids s = { 0 };
	uint64_t end, next;

	env_open(&e, 256);
	g = geom(&e, 1, 0, 1);
	assert_int_equal(log_open(&e.m, &g, 0, 1, NULL, &l), 0);
	write_ids(l, 1, 11, 100);		/* 10 one-block chunks */
	log_close(l);
	/* a new mount (log_id 2) rewrites the same positions with the same
	 * seqs for 3 chunks: the old chunk 4 sits exactly where chunk 4 is
	 * expected, with the expected seq; only its log_id tells it apart.
	 * It is never replayed as ours, but a chunk of another log that
	 * continues exactly where ours ends is what a newer mount leaves: the
	 * replay says so (-ESTALE), for mount to refuse. */
	g = geom(&e, 2, 0, 1);
	assert_int_equal(log_open(&e.m, &g, 0, 1, NULL, &l), 0);
	write_ids(l, 1, 4, 100);
	log_close(l);
	assert_int_equal(replay(&e, 2, 0, 1, &s, &end, &next), -ESTALE);
	assert_int_equal(s.n, 3);
	assert_int_equal(end, 3);
	assert_int_equal(next, 4);
	assert_int_equal(replay(&e, 1, 0, 1, &s, &end, &next), -ESTALE);
	assert_int_equal(s.n, 0);
	assert_int_equal(end, 0);
	assert_int_equal(next, 1);
	/* Accepting that loss drops the newer log (3 chunks of id 2) and
	 * what is left of the old one beyond (7 chunks of id 1, to seq 10). */
	{
		struct log_lost lost;

		g = geom(&e, 1, 0, 1);
		assert_int_equal(log_lost(&e.m, &g, 1, NULL, NULL, &lost), 0);
		assert_int_equal(lost.chunks, 10);
		assert_int_equal(lost.records, 10 * 2);
		assert_int_equal(lost.last_seq, 10);
	}
	/* The same chunks under a log_id that is not our successor (another
	 * file system's, left on the device) prove nothing: the log just ends. */
	g = geom(&e, 2, 0, 1);
	g.next_log_id = 77;
	s.n = 0;
	assert_int_equal(log_replay(&e.m, &g, ids_cb, &s, &end, &next), 0);
	assert_int_equal(s.n, 3);
	assert_int_equal(end, 3);
	free(s.v);
	env_close(&e);
}

/* A continuation (-o lazyreplay, FORMAT.md "Log continuation"): the log
 * of id 1 ends where the geometry says, the one of id 2 goes on from
 * there, and chunks of id 1 past that end (a torn or stale tail, here
 * with exactly the seqs expected next) are never read.  A writer opened
 * with the geometry writes under id 2.  The old log ending before the
 * continuation starts is damage; an end elsewhere than its position is
 * corruption. */
static void test_continuation(void **state)
{
	struct env e;
	struct log *l;
	struct log_geom g, c;
	struct ids s = { 0 };
	uint64_t end, next;
	static const uint64_t want[] = { 1, 2, 3, 4, 5, 106, 107, 108 };

	env_open(&e, 256);
	g = geom(&e, 1, 0, 1);
	assert_int_equal(log_open(&e.m, &g, 0, 1, NULL, &l), 0);
	write_ids(l, 1, 11, 100);		/* seqs 1..10 at positions 0..9 */
	log_close(l);
	/* an old log that ends (at seq 11, nothing after it) before the
	 * continuation starts: damage */
	c = g;
	c.cont_pos = 12;
	c.cont_seq = 13;
	c.cont_log_id = 2;
	s.n = 0;
	assert_int_equal(log_replay(&e.m, &c, ids_cb, &s, &end, &next), -EBADMSG);
	assert_int_equal(s.n, 10);
	/* the mount after a crash replayed up to seq 5 (position 5) */
	c.cont_pos = 5;
	c.cont_seq = 6;
	c.cont_log_id = 2;
	c.cont_next_log_id = 77;
	assert_int_equal(log_open(&e.m, &c, 5, 6, NULL, &l), 0);
	write_ids(l, 106, 108, 100);		/* seqs 6, 7 at positions 5, 6 */
	log_close(l);
	s.n = 0;
	assert_int_equal(log_replay(&e.m, &c, ids_cb, &s, &end, &next), 0);
	assert_int_equal(s.n, 7);
	assert_memory_equal(s.v, want, 7 * sizeof(want[0]));
	assert_int_equal(end, 7);		/* old seq 8 sits there: not read */
	assert_int_equal(next, 8);
	/* a later writer with the same geometry: under id 2 */
	assert_int_equal(log_open(&e.m, &c, end, next, NULL, &l), 0);
	write_ids(l, 108, 109, 100);
	log_close(l);
	s.n = 0;
	assert_int_equal(log_replay(&e.m, &c, ids_cb, &s, &end, &next), 0);
	assert_int_equal(s.n, 8);
	assert_memory_equal(s.v, want, 8 * sizeof(want[0]));
	/* without the continuation the log of id 1 ends at 5: id 2 there,
	 * its successor, is evidence of a newer superblock */
	assert_int_equal(replay(&e, 1, 0, 1, &s, &end, &next), -ESTALE);
	assert_int_equal(s.n, 5);
	/* the old log's end must be where the superblock says */
	c.cont_pos = 4;
	assert_int_equal(log_replay(&e.m, &c, ids_cb, &s, &end, &next), -EUCLEAN);
	free(s.v);
	env_close(&e);
}

/* A chunk that does not fit before the end of the region goes to 0, and
 * replay finds it there. */
static void test_chunk_at_zero(void **state)
{
	struct env e;
	struct log *l;
	struct log_geom g;
	struct ids s = { 0 };
	uint64_t end, next, bseq, bpos;

	env_open(&e, 64);
	g = geom(&e, 4, 60, 1);
	assert_int_equal(log_open(&e.m, &g, 60, 1, NULL, &l), 0);
	write_ids(l, 1, 2, 10);			/* 1 block at 60 */
	write_ids(l, 2, 3, 3 * 4096);		/* 4 blocks: not before 64 */
	assert_int_equal(log_barrier(l, &bseq, &bpos), 0);
	assert_int_equal(bpos, 4);
	log_close(l);
	assert_int_equal(replay(&e, 4, 60, 1, &s, &end, &next), 0);
	assert_int_equal(s.n, 2);
	assert_int_equal(end, 4);
	assert_int_equal(next, 3);
	free(s.v);
	env_close(&e);
}

/* ---- barrier under concurrent appends ---- */

struct bar_arg {
	struct log *l;
	unsigned t;
	uint64_t seq_of[200];	/* by i */
	volatile bool *stop;
	unsigned n;
};

static void *bar_thread(void *p)
{
	struct bar_arg *a = p;
	struct log_buf b;

	log_buf_init(&b);
	for (a->n = 0; a->n < 200 && !*a->stop; a->n++) {
		uint64_t seq;

		make_tx(&b, 1000 * (a->t + 1) + a->n, 50);
		assert_int_equal(log_append(a->l, &b, &seq), 0);
		a->seq_of[a->n] = seq;
		if (a->n % 4 == 0)
			assert_int_equal(log_commit(a->l, seq), 0);
	}
	log_buf_free(&b);
	return NULL;
}

static void test_barrier(void **state)
{
	struct env e;
	struct log *l;
	struct log_geom g;
	struct bar_arg args[4];
	pthread_t th[4];
	volatile bool stop = false;
	struct ids s = { 0 };
	uint64_t bseq, bpos, end, next, last;
	struct timespec ts = { 0, 2000000 };

	env_open(&e, 2048);
	g = geom(&e, 6, 0, 1);
	assert_int_equal(log_open(&e.m, &g, 0, 1, NULL, &l), 0);
	for (unsigned t = 0; t < 4; t++) {
		args[t] = (struct bar_arg){ .l = l, .t = t, .stop = &stop };
		pthread_create(&th[t], NULL, bar_thread, &args[t]);
	}
	nanosleep(&ts, NULL);
	assert_int_equal(log_barrier(l, &bseq, &bpos), 0);
	assert_true(log_durable_seq(l) >= bseq);
	for (unsigned t = 0; t < 4; t++)
		pthread_join(th[t], NULL);
	assert_int_equal(log_commit(l, UINT64_MAX), 0);
	last = log_last_seq(l);
	log_close(l);

	/* from the barrier's (pos, seq + 1): exactly the txs after seq */
	assert_int_equal(replay(&e, 6, bpos, bseq + 1, &s, &end, &next), 0);
	assert_int_equal(s.n, last - bseq);
	assert_int_equal(next, last + 1);
	for (size_t i = 0; i < s.n; i++) {
		unsigned t = (unsigned)(s.v[i] / 1000 - 1), k = (unsigned)(s.v[i] % 1000);

		assert_int_equal(args[t].seq_of[k], bseq + 1 + i);
	}
	/* and from the start, the log ends at the same place */
	assert_int_equal(replay(&e, 6, 0, 1, &s, &end, &next), 0);
	assert_int_equal(s.n, last);
	free(s.v);
	env_close(&e);
}

/* ---- space ---- */

struct space_ctx {
	_Atomic int pressure;
	_Atomic uint64_t durable;
};

static void on_pressure(void *ctx)
{
	struct space_ctx *c = ctx;

	atomic_fetch_add(&c->pressure, 1);
}

static void on_durable(void *ctx, uint64_t seq)
{
	struct space_ctx *c = ctx;

	assert_true(seq >= atomic_load(&c->durable));	/* never goes back */
	atomic_store(&c->durable, seq);
}

struct waiter {
	struct log *l;
	_Atomic int ret, done;	/* log_wait_space's return, once done */
};

static void *wait_thread(void *p)
{
	struct waiter *w = p;

	atomic_store(&w->ret, log_wait_space(w->l));
	atomic_store(&w->done, 1);
	return NULL;
}

static void test_wait_space(void **state)
{
	struct env e;
	struct log *l;
	struct log_geom g;
	struct space_ctx c = { 0 };
	struct log_cbs cbs = { .on_durable = on_durable, .on_pressure = on_pressure, .ctx = &c };
	struct waiter w;
	pthread_t th;
	uint64_t bseq, bpos, id = 1;
	struct timespec ts = { 0, 100000000 };
	int p0;

	env_open(&e, 128);		/* slack = 32 blocks */
	g = geom(&e, 8, 0, 1);
	assert_int_equal(log_open(&e.m, &g, 0, 1, &cbs, &l), 0);
	assert_int_equal(log_wait_space(l), 0);		/* empty: returns */
	while (log_used_blocks(l) <= 128 - 32)
		write_ids(l, id, id + 1, 10000), id++;	/* 3 blocks each */
	assert_int_equal(atomic_load(&c.durable), id - 1);
	p0 = atomic_load(&c.pressure);
	assert_true(p0 >= 1);				/* more than half used */

	w = (struct waiter){ .l = l };
	pthread_create(&th, NULL, wait_thread, &w);
	nanosleep(&ts, NULL);
	assert_int_equal(atomic_load(&w.done), 0);	/* blocked */
	assert_int_equal(atomic_load(&c.pressure), p0 + 1);	/* asked once */
	nanosleep(&ts, NULL);
	assert_int_equal(atomic_load(&c.pressure), p0 + 1);
	/* appending still works while full (no waiting in log_append) */
	write_ids(l, id, id + 1, 100), id++;
	assert_int_equal(atomic_load(&w.done), 0);

	assert_int_equal(log_barrier(l, &bseq, &bpos), 0);
	log_set_head(l, bpos, bseq + 1);
	pthread_join(th, NULL);
	assert_int_equal(atomic_load(&w.done), 1);
	assert_int_equal(atomic_load(&w.ret), 0);
	assert_int_equal(log_used_blocks(l), 0);

	/* truly full: the region refuses rather than overwrite the head */
	log_set_head(l, (bpos + 1) % 128, bseq + 1);	/* pretend head just ahead */
	{
		struct log_buf b;
		uint64_t seq;
		int ret = 0;

		log_buf_init(&b);
		make_tx(&b, id, 1000);
		for (int i = 0; i < 200 && ret == 0; i++) {
			ret = log_append(l, &b, &seq);
			if (!ret)
				ret = log_commit(l, seq);
		}
		assert_int_equal(ret, -ENOSPC);
		log_buf_free(&b);
	}
	log_close(l);
	env_close(&e);
}

/* log_stop_waits (the file system turned read-only: no checkpoint will
 * move the head): a writer asleep for room wakes with -EROFS, and one that
 * comes later finds no room and returns -EROFS at once (review of session
 * 40: after a failed transaction they slept for ever). */
static void test_stop_waits(void **state)
{
	struct env e;
	struct log *l;
	struct log_geom g;
	struct space_ctx c = { 0 };
	struct log_cbs cbs = { .on_durable = on_durable, .on_pressure = on_pressure, .ctx = &c };
	struct waiter w;
	struct timespec ts = { 0, 100000000 };
	pthread_t th;
	uint64_t id = 1;

	env_open(&e, 128);
	g = geom(&e, 8, 0, 1);
	assert_int_equal(log_open(&e.m, &g, 0, 1, &cbs, &l), 0);
	while (log_used_blocks(l) <= 128 - 32)
		write_ids(l, id, id + 1, 10000), id++;
	w = (struct waiter){ .l = l };
	pthread_create(&th, NULL, wait_thread, &w);
	nanosleep(&ts, NULL);
	assert_int_equal(atomic_load(&w.done), 0);	/* asleep for room */
	log_stop_waits(l);
	for (int i = 0; i < 50 && !atomic_load(&w.done); i++)
		nanosleep(&ts, NULL);
	assert_int_equal(atomic_load(&w.done), 1);	/* woken */
	pthread_join(th, NULL);
	assert_int_equal(atomic_load(&w.ret), -EROFS);
	assert_int_equal(log_wait_space(l), -EROFS);	/* and the next at once */
	log_close(l);
	env_close(&e);
}

/* log_set_ckpt_blocks: a checkpoint is asked for (on_pressure) once the
 * log passes the cap, long before half the region; 0 or a cap past half
 * leaves it at half. */
static void test_ckpt_cap(void **state)
{
	struct env e;
	struct log *l;
	struct log_geom g;
	struct space_ctx c = { 0 };
	struct log_cbs cbs = { .on_durable = on_durable, .on_pressure = on_pressure, .ctx = &c };
	uint64_t id = 1, bseq, bpos;

	(void)state;
	env_open(&e, 128);
	g = geom(&e, 8, 0, 1);
	assert_int_equal(log_open(&e.m, &g, 0, 1, &cbs, &l), 0);
	log_set_ckpt_blocks(l, 0);		/* no cap: half the region */
	log_set_ckpt_blocks(l, 1000);		/* past half: half */
	while (log_used_blocks(l) <= 64)
		write_ids(l, id, id + 1, 10000), id++;	/* 3 blocks each */
	assert_true(log_used_blocks(l) <= 67);
	assert_int_equal(atomic_load(&c.pressure), 1);	/* only past half */

	assert_int_equal(log_barrier(l, &bseq, &bpos), 0);
	log_set_head(l, bpos, bseq + 1);
	atomic_store(&c.pressure, 0);
	log_set_ckpt_blocks(l, 12);
	while (log_used_blocks(l) <= 12) {
		assert_int_equal(atomic_load(&c.pressure), 0);
		write_ids(l, id, id + 1, 10000), id++;
	}
	assert_int_equal(atomic_load(&c.pressure), 1);	/* asked right past 12 */
	log_close(l);
	env_close(&e);
}

/* ---- failed commits ---- */

struct cw_arg {
	struct log *l;
	uint64_t seq;
	int ret;
};

static void *commit_thread(void *p)
{
	struct cw_arg *a = p;

	a->ret = log_commit(a->l, a->seq);
	return NULL;
}

static void test_commit_error(void **state)
{
	struct env e;
	struct log *l;
	struct log_geom g;
	struct ids s = { 0 };
	struct log_buf b;
	struct cw_arg a[4];
	pthread_t th[4];
	uint64_t end, next, seq;
	struct dev_fault_rule err = { .dev_idx = -1, .op = DEV_WRITE, .kind = DEV_FAULT_ERROR,
		.err = EIO, .count = -1 };

	env_open(&e, 256);
	g = geom(&e, 11, 0, 1);
	assert_int_equal(log_open(&e.m, &g, 0, 1, NULL, &l), 0);
	write_ids(l, 1, 3, 10);

	/* device 0 fails: commits go on with device 1 */
	err.dev_idx = 0;
	assert_int_equal(dev_fault_add_rule(e.be, &err), 0);
	write_ids(l, 3, 5, 10);
	assert_int_equal(mirror_healthy(&e.m), 1);

	/* device 1 fails too: every waiter of that commit gets -EIO */
	err.dev_idx = 1;
	assert_int_equal(dev_fault_add_rule(e.be, &err), 0);
	log_buf_init(&b);
	for (unsigned i = 0; i < 4; i++) {
		make_tx(&b, 5 + i, 10);
		assert_int_equal(log_append(l, &b, &seq), 0);
		a[i] = (struct cw_arg){ .l = l, .seq = seq };
	}
	for (unsigned i = 0; i < 4; i++)
		pthread_create(&th[i], NULL, commit_thread, &a[i]);
	for (unsigned i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(a[i].ret, -EIO);
	}
	assert_int_equal(log_durable_seq(l), 4);

	/* devices come back (test only): the failed chunk is written again
	 * with the same seqs before newer ones, so replay sees no gap */
	dev_fault_clear(e.be);
	atomic_store(&e.m.state[0], MDEV_OK);
	atomic_store(&e.m.state[1], MDEV_OK);
	make_tx(&b, 9, 10);
	assert_int_equal(log_append(l, &b, &seq), 0);
	assert_int_equal(seq, 9);
	assert_int_equal(log_commit(l, seq), 0);
	assert_int_equal(log_durable_seq(l), 9);
	log_close(l);
	log_buf_free(&b);
	assert_int_equal(replay(&e, 11, 0, 1, &s, &end, &next), 0);
	assert_int_equal(s.n, 9);
	for (size_t i = 0; i < s.n; i++)
		assert_int_equal(s.v[i], i + 1);
	free(s.v);
	env_close(&e);
}

/* Replay reads the region ahead: 600 one-block chunks (one commit each)
 * take a handful of device reads, not one or two per chunk; a read error
 * in blocks past the log only costs the read-ahead, and with device 0
 * failing every read of the region, device 1 still gives all of it. */
static void test_replay_reads(void **state)
{
	struct env e;
	struct log *l;
	struct log_geom g;
	struct ids s = { 0 };
	uint64_t c0[3], c1[3], d0[3], d1[3], end, next, reads;

	(void)state;
	env_open(&e, 4096);
	g = geom(&e, 5, 0, 1);
	assert_int_equal(log_open(&e.m, &g, 0, 1, NULL, &l), 0);
	write_ids(l, 1, 601, 0);
	log_close(l);
	dev_fault_counts(e.be, 0, c0);
	dev_fault_counts(e.be, 1, c1);
	assert_int_equal(replay(&e, 5, 0, 1, &s, &end, &next), 0);
	dev_fault_counts(e.be, 0, d0);
	dev_fault_counts(e.be, 1, d1);
	reads = d0[DEV_READ] - c0[DEV_READ] + d1[DEV_READ] - c1[DEV_READ];
	printf("600 chunks replayed with %llu device reads\n", (unsigned long long)reads);
	assert_int_equal(s.n, 600);
	assert_int_equal(next, 601);
	assert_true(reads <= 16);

	/* An unreadable block of device 0 past the log's end. */
	assert_int_equal(dev_fault_add_rule(e.be, &(struct dev_fault_rule){ .dev_idx = 0,
		.op = DEV_READ, .off = (START + 3000) * 4096, .len = 4096,
		.kind = DEV_FAULT_ERROR, .err = EIO, .count = -1 }), 0);
	assert_int_equal(replay(&e, 5, 0, 1, &s, &end, &next), 0);
	assert_int_equal(s.n, 600);
	for (size_t i = 0; i < s.n; i++)
		assert_int_equal(s.v[i], i + 1);
	/* Device 0's whole region unreadable. */
	dev_fault_clear(e.be);
	assert_int_equal(dev_fault_add_rule(e.be, &(struct dev_fault_rule){ .dev_idx = 0,
		.op = DEV_READ, .off = START * 4096, .len = 4096 * 4096,
		.kind = DEV_FAULT_ERROR, .err = EIO, .count = -1 }), 0);
	assert_int_equal(replay(&e, 5, 0, 1, &s, &end, &next), 0);
	assert_int_equal(s.n, 600);
	assert_int_equal(next, 601);
	free(s.v);
	env_close(&e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_append_replay),
		cmocka_unit_test(test_commit_fua),
		cmocka_unit_test(test_commit_flush_only_dirty),
		cmocka_unit_test(test_group_commit),
		cmocka_unit_test(test_wraparound),
		cmocka_unit_test(test_torn_and_single_mirror),
		cmocka_unit_test(test_stale_log_id),
		cmocka_unit_test(test_continuation),
		cmocka_unit_test(test_chunk_at_zero),
		cmocka_unit_test(test_barrier),
		cmocka_unit_test(test_wait_space),
		cmocka_unit_test(test_stop_waits),
		cmocka_unit_test(test_ckpt_cap),
		cmocka_unit_test(test_commit_error),
		cmocka_unit_test(test_reserve),
		cmocka_unit_test(test_replay_reads),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
