// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: the format-v2 free-space allocator (fspace) against a plain bitmap model: random allocations, frees, deferred frees and their release, commits published or not, cold reopens and crashes (reopen from the last published root after uncommitted changes), in memory and on two mirrored image files; never a block handed out twice, free counts equal, every node a tree reaches marked used and no other; memory bounded on a 4 TiB area; parallel threads with concurrent checkpoints; allocation rates against alloc.c. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "alloc.h"
#include "bcache.h"
#include "bnode.h"
#include "bstore.h"
#include "btree.h"
#include "dev.h"
#include "fspace.h"
#include "mirror.h"
#include "slotstore.h"

static const uint8_t uuid[16] = { 3, 1, 4, 1, 5, 9, 2, 6 };

/* ---- node stores: memory, or two image files through bstore_mirror ---- */

struct imgstore {
	char *path[2];
	struct dev *d[2];
	struct dev_backend *be;
	struct mirror m;
	struct bstore_mirror s;
};

static void img_init(struct imgstore *f, uint64_t node_start, uint64_t nslots)
{
	char err[256];

	memset(f, 0, sizeof(*f));
	assert_int_equal(dev_backend_create("file", &f->be), 0);
	for (unsigned i = 0; i < 2; i++) {
		int fd;

		f->path[i] = strdup("/var/tmp/twinfs-test-fspace-XXXXXX");
		fd = mkstemp(f->path[i]);
		assert_true(fd >= 0);
		assert_int_equal(ftruncate(fd, (off_t)((node_start + nslots * BNODE_BLOCKS) * 4096)),
				 0);
		close(fd);
		assert_int_equal(dev_open(f->path[i], false, &f->d[i], err, sizeof(err)), 0);
		assert_int_equal(dev_backend_attach(f->be, f->d[i]), 0);
	}
	assert_int_equal(mirror_init(&f->m, f->be, f->d, 2), 0);
	/* Only its verified reads, writes and flush are used. */
	assert_int_equal(bstore_mirror_init(&f->s, &f->m, node_start, nslots), 0);
}

static void img_destroy(struct imgstore *f)
{
	bstore_mirror_destroy(&f->s);
	dev_backend_destroy(f->be);
	for (unsigned i = 0; i < 2; i++) {
		dev_close(f->d[i]);
		unlink(f->path[i]);
		free(f->path[i]);
	}
}

/* ---- walking a tree's nodes ---- */

/* Every node under @p: marked used in the node map; counted. */
static uint64_t walk(struct bstore *io, struct fspace *fs, const struct bptr *p, unsigned level)
{
	void *b = NULL;
	uint64_t n = 1;

	assert_true(fspace_node_used(fs, p->addr));
	if (!level)
		return 1;
	assert_int_equal(posix_memalign(&b, 4096, BNODE_SIZE), 0);
	assert_int_equal(io->ops->read(io->ctx, p, b, NULL), 0);
	for (unsigned i = 0; i < bnode_nritems(b); i++) {
		struct bptr c;

		bnode_ptr(b, i, &c);
		n += walk(io, fs, &c, level - 1);
	}
	free(b);
	return n;
}

static uint64_t tree_nodes(struct bstore *io, struct fspace *fs, const struct broot *r)
{
	return r->ptr.addr ? walk(io, fs, &r->ptr, r->level) : 0;
}

/* ---- the model test ---- */

#define M_START 1000u
#define M_GB 4096u
#define M_TOTAL (8u * M_GB + 1000u)	/* a short last group */
#define M_NODE_START 16u
#define M_NSLOTS 240u
#define M_RESERVE 100u

struct mrun {
	uint64_t blk, n;
};

struct model {
	struct bstore *io;
	struct bcache *c;
	struct fspace *fs;
	struct btree other;		/* another tree on the node store */
	struct fspace_params p;
	uint64_t gen, seq, durable, rng;
	uint64_t cbudget;		/* node cache bytes; 0: 256 KiB */
	uint8_t used[M_TOTAL];
	struct mrun own[4096];
	size_t nown;
	struct { uint64_t blk, n, seq; } def[4096];
	size_t ndef;
	uint64_t *carry;		/* the other tree's freed list, unpublished */
	size_t ncarry;
	uint64_t okeys;
	/* As of the last published commit. */
	struct broot froot, oroot;
	uint8_t pub_used[M_TOTAL];
	struct mrun pub_own[4096];
	size_t pub_nown;
};

static uint64_t rnd(struct model *m)
{
	m->rng ^= m->rng << 13;
	m->rng ^= m->rng >> 7;
	m->rng ^= m->rng << 17;
	return m->rng;
}

static void m_open(struct model *m)
{
	assert_int_equal(bcache_create(m->cbudget ? m->cbudget : 256u << 10, &m->c), 0);
	assert_int_equal(fspace_open(m->io, m->c, uuid, &m->p, &m->froot, &m->fs), 0);
	assert_int_equal(bt_open(&m->other, fspace_node_store(m->fs), m->c, 1, uuid, &m->oroot), 0);
}

static void m_close(struct model *m)
{
	bt_close(&m->other);
	fspace_close(m->fs);
	bcache_destroy(m->c);
}

/* The longest free run of the model (across groups too). */
static uint64_t m_maxrun(struct model *m)
{
	uint64_t best = 0, cur = 0;

	for (uint64_t b = 0; b < M_TOTAL; b++) {
		cur = m->used[b] ? 0 : cur + 1;
		best = cur > best ? cur : best;
	}
	return best;
}

static uint64_t m_free(struct model *m)
{
	uint64_t n = 0;

	for (uint64_t b = 0; b < M_TOTAL; b++)
		n += !m->used[b];
	return n;
}

static void m_alloc(struct model *m)
{
	uint64_t want = 1 + rnd(m) % 64, blk, got, mfree = m_free(m);
	bool full = m_maxrun(m) >= want && mfree >= want + M_RESERVE;
	int ret = fspace_get(m->fs, want, rnd(m), FSPACE_DATA, &blk, &got);

	if (mfree <= M_RESERVE) {
		assert_int_equal(ret, -ENOSPC);
		return;
	}
	assert_int_equal(ret, 0);
	assert_true(got >= 1 && got <= want);
	if (full)
		assert_int_equal(got, want);	/* the full run when one exists */
	for (uint64_t b = blk; b < blk + got; b++) {
		assert_true(b >= M_START && b < M_START + M_TOTAL);
		assert_int_equal(m->used[b - M_START], 0);	/* no double allocation */
		m->used[b - M_START] = 1;
	}
	if (m->nown < 4096) {
		m->own[m->nown++] = (struct mrun){ blk, got };
	} else {
		assert_int_equal(fspace_put(m->fs, blk, got), 0);
		memset(&m->used[blk - M_START], 0, got);
	}
}

/* Take a random owned run out of the list. */
static bool m_pick(struct model *m, struct mrun *r)
{
	size_t i;

	if (!m->nown)
		return false;
	i = rnd(m) % m->nown;
	*r = m->own[i];
	m->own[i] = m->own[--m->nown];
	return true;
}

static void m_put(struct model *m)
{
	struct mrun r;

	if (!m_pick(m, &r))
		return;
	assert_int_equal(fspace_put(m->fs, r.blk, r.n), 0);
	memset(&m->used[r.blk - M_START], 0, r.n);
}

static void m_defer(struct model *m)
{
	struct mrun r;

	if (m->ndef == 4096 || !m_pick(m, &r))
		return;
	m->seq++;
	assert_int_equal(fspace_defer(m->fs, r.blk, r.n, m->seq), 0);
	m->def[m->ndef].blk = r.blk;
	m->def[m->ndef].n = r.n;
	m->def[m->ndef++].seq = m->seq;
}

static void m_release(struct model *m)
{
	m->durable += rnd(m) % (m->seq - m->durable + 1);
	assert_int_equal(fspace_release_durable(m->fs, m->durable), 0);
	for (size_t i = 0; i < m->ndef;) {
		if (m->def[i].seq <= m->durable) {
			memset(&m->used[m->def[i].blk - M_START], 0, m->def[i].n);
			m->def[i] = m->def[--m->ndef];
		} else {
			i++;
		}
	}
}

/* Change the other tree a little: its nodes come from the node map. */
static void m_other(struct model *m)
{
	uint8_t v[200] = { 0 };

	assert_int_equal(bt_begin(&m->other, m->gen), 0);
	for (unsigned i = 0; i < 20; i++) {
		uint64_t id = rnd(m) % 2000;

		v[0] = (uint8_t)id;
		if (bt_insert(&m->other, &(struct bkey){ id, 1, 0 }, v, sizeof(v)) == 0)
			m->okeys++;
	}
}

/* A checkpoint: the other tree, then the free space; published or not. */
static void m_commit(struct model *m, bool publish)
{
	struct broot oroot, froot;
	uint64_t *freed, *all;
	size_t nfreed;

	m->gen++;
	m_other(m);
	assert_int_equal(bt_commit(&m->other, &oroot, &freed, &nfreed), 0);
	all = realloc(m->carry, (m->ncarry + nfreed + 1) * sizeof(*all));
	assert_non_null(all);
	if (nfreed)	/* bt_commit gives NULL for none */
		memcpy(all + m->ncarry, freed, nfreed * sizeof(*all));
	free(freed);
	m->carry = all;
	m->ncarry += nfreed;
	m->gen++;
	assert_int_equal(fspace_commit(m->fs, m->gen, m->carry, m->ncarry, &froot), 0);
	if (!publish) {
		fspace_commit_abort(m->fs);
		return;
	}
	m->froot = froot;
	m->oroot = oroot;
	bt_release(&m->other, m->carry, m->ncarry);
	m->ncarry = 0;
	fspace_commit_done(m->fs);
	memcpy(m->pub_used, m->used, sizeof(m->used));
	memcpy(m->pub_own, m->own, sizeof(m->own));
	m->pub_nown = m->nown;
}

/* Every block's state and every node: as the model says. */
static void m_check(struct model *m, bool full)
{
	struct fspace_stats st;
	uint64_t nodes;
	char why[200];

	assert_int_equal(fspace_free_blocks(m->fs), m_free(m));
	if (full)
		for (uint64_t b = 0; b < M_TOTAL; b++)
			assert_int_equal(fspace_is_free(m->fs, M_START + b), !m->used[b]);
	fspace_stats(m->fs, &st);
	assert_int_equal(st.errors, 0);
	assert_int_equal(bt_verify(fspace_tree(m->fs), NULL, NULL), 0);
	if (fspace_verify(m->fs, why, sizeof(why)))
		fail_msg("%s", why);
	nodes = tree_nodes(m->io, m->fs, &m->froot) + tree_nodes(m->io, m->fs, &m->oroot);
	/* Right after an open: the map holds exactly the reachable nodes. */
	assert_int_equal(fspace_nodes_used(m->fs), nodes);
}

/* Reopen from the last published roots, dropping everything after them. */
static void m_crash(struct model *m)
{
	m_close(m);
	memcpy(m->used, m->pub_used, sizeof(m->used));
	memcpy(m->own, m->pub_own, sizeof(m->own));
	m->nown = m->pub_nown;
	/* Deferred frees were in the log: their blocks stay used here. */
	m->ndef = 0;
	m->ncarry = 0;
	m_open(m);
	m_check(m, true);
}

static void run_model(struct bstore *io, uint64_t seed, unsigned steps)
{
	struct model *m = calloc(1, sizeof(*m));

	assert_non_null(m);
	m->io = io;
	m->rng = seed;
	m->p = (struct fspace_params){ .start = M_START, .end = M_START + M_TOTAL,
		.gblocks = M_GB, .reserve = M_RESERVE, .node_start = M_NODE_START,
		.nslots = M_NSLOTS, .node_reserve = 8, .budget = 2 * M_GB / 8 };
	m_open(m);
	for (unsigned i = 0; i < steps; i++) {
		unsigned op = (unsigned)(rnd(m) % 100);

		if (op < 45)
			m_alloc(m);
		else if (op < 65)
			m_put(m);
		else if (op < 80)
			m_defer(m);
		else if (op < 90)
			m_release(m);
		else if (op < 96)
			m_commit(m, rnd(m) % 5 != 0);
		else if (op < 98)
			m_crash(m);
		else
			m_commit(m, true), m_check(m, false);
	}
	m_crash(m);
	m_close(m);
	free(m->carry);
	free(m);
}

static void test_model_mem(void **state)
{
	struct slotstore ms;

	(void)state;
	slot_init(&ms, M_NODE_START, M_NSLOTS);
	for (uint64_t seed = 1; seed <= 4; seed++)
		run_model(&ms.store, seed * 0x9e3779b97f4a7c15ull, 3000);
	slot_destroy(&ms);
}

static void test_model_mirror(void **state)
{
	struct imgstore img;

	(void)state;
	img_init(&img, M_NODE_START, M_NSLOTS);
	run_model(&img.s.store, 77, 3000);
	img_destroy(&img);
}

/* ---- crash: uncommitted and unpublished changes vanish, nothing else ---- */

static void test_crash(void **state)
{
	struct slotstore ms;
	struct model *m = calloc(1, sizeof(*m));

	(void)state;
	assert_non_null(m);
	slot_init(&ms, M_NODE_START, M_NSLOTS);
	m->io = &ms.store;
	m->rng = 5;
	m->p = (struct fspace_params){ .start = M_START, .end = M_START + M_TOTAL,
		.gblocks = M_GB, .reserve = M_RESERVE, .node_start = M_NODE_START,
		.nslots = M_NSLOTS, .node_reserve = 8, .budget = M_GB / 8 };
	m_open(m);
	for (unsigned i = 0; i < 300; i++)
		m_alloc(m);
	m_commit(m, true);
	/* Free half (some deferred and released), allocate more, commit
	 * without publishing, change more: the crash keeps the published. */
	for (unsigned i = 0; i < 100; i++)
		m_put(m);
	for (unsigned i = 0; i < 50; i++)
		m_defer(m);
	m_release(m);
	for (unsigned i = 0; i < 200; i++)
		m_alloc(m);
	m_commit(m, false);
	for (unsigned i = 0; i < 100; i++)
		m_put(m), m_alloc(m);
	m_crash(m);
	/* And the same once more from there, published this time. */
	for (unsigned i = 0; i < 100; i++)
		m_put(m), m_alloc(m);
	m_commit(m, true);
	m_crash(m);
	m_close(m);
	free(m->carry);
	free(m);
	slot_destroy(&ms);
}

/* ---- memory: a 4 TiB area ---- */

static uint64_t rss_bytes(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	unsigned long size = 0, res = 0;

	if (!f)
		return 0;
	if (fscanf(f, "%lu %lu", &size, &res) != 2)
		res = 0;
	fclose(f);
	return (uint64_t)res * (uint64_t)sysconf(_SC_PAGESIZE);
}

#define TB_BLOCKS (1ull << 28)		/* 1 TiB of 4 KiB blocks */

static void test_membound(void **state)
{
	struct fspace_params p = { .node_start = 16, .nslots = 1u << 16, .node_reserve = 64,
		.budget = 4u << 20 };
	struct fspace_stats st;
	struct slotstore ms;
	struct bcache *c;
	struct fspace *fs;
	struct broot root;
	uint64_t rss0, gen = 1, rng = 99, maxloaded = 0, cache_budget = 8u << 20, blk, got;

	(void)state;
	p.start = p.node_start + p.nslots * BNODE_BLOCKS;
	p.end = p.start + 4 * TB_BLOCKS;
	slot_init(&ms, p.node_start, p.nslots);
	rss0 = rss_bytes();
	assert_int_equal(bcache_create(cache_budget, &c), 0);
	assert_int_equal(fspace_open(&ms.store, c, uuid, &p, NULL, &fs), 0);
	for (unsigned i = 0; i < 20000; i++) {
		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		assert_int_equal(fspace_get(fs, 1 + (rng >> 60), rng >> 20, FSPACE_DATA, &blk, &got),
				 0);
		if (i % 3 == 0)
			assert_int_equal(fspace_put(fs, blk, 1), 0);
		if (i % 200 == 199) {
			fspace_stats(fs, &st);
			maxloaded = st.loaded_bytes > maxloaded ? st.loaded_bytes : maxloaded;
			assert_int_equal(fspace_commit(fs, ++gen, NULL, 0, &root), 0);
			fspace_commit_done(fs);
		}
	}
	fspace_stats(fs, &st);
	/* The bound: the summaries, the budget, the groups changed since the
	 * last commit (200 allocations: at most 200 groups of 32 KiB). */
	printf("4 TiB: %llu groups, summary %llu KiB (%llu KiB per TiB), max loaded %llu KiB, "
	       "loads %llu, evictions %llu, items written %llu, rss +%llu KiB (node store %llu KiB)\n",
	       (unsigned long long)st.ngroups, (unsigned long long)st.summary_bytes >> 10,
	       (unsigned long long)st.summary_bytes / 4 >> 10,
	       (unsigned long long)maxloaded >> 10, (unsigned long long)st.loads,
	       (unsigned long long)st.evictions, (unsigned long long)st.items_written,
	       (unsigned long long)(rss_bytes() - rss0) >> 10, (unsigned long long)ms.bytes >> 10);
	assert_true(st.summary_bytes / 4 <= 160u << 10);
	assert_true(maxloaded <= p.budget + 200 * (FSPACE_GROUP_DEFAULT / 8));
	assert_true(st.evictions > 0);
	/* Sanitizers keep shadow memory and quarantines: RSS says nothing. */
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
	assert_true(rss_bytes() - rss0 <= ms.bytes + cache_budget + st.summary_bytes + p.budget +
		    200 * (FSPACE_GROUP_DEFAULT / 8) + (16u << 20));
#endif
	/* A cold open reads the summaries and the node map: a few nodes. */
	fspace_close(fs);
	bcache_destroy(c);
	{
		struct bcache_stats cs;

		assert_int_equal(bcache_create(cache_budget, &c), 0);
		assert_int_equal(fspace_open(&ms.store, c, uuid, &p, &root, &fs), 0);
		bcache_stats(c, &cs);
		printf("cold open: %llu node reads\n", (unsigned long long)cs.misses);
		assert_true(cs.misses < 64);
	}
	fspace_close(fs);
	bcache_destroy(c);
	slot_destroy(&ms);
}

/* ---- parallel threads, with checkpoints running meanwhile ---- */

#define T_GB 4096u
#define T_TOTAL (64u * T_GB)
#define T_START 2000u
#define T_THREADS 4
#define T_OPS 20000

struct tshared {
	struct fspace *fs;
	_Atomic uint8_t owner[T_TOTAL];	/* 1 while a thread holds the block */
	_Atomic uint64_t seq, durable;
	_Atomic bool stop;
	_Atomic unsigned bad;
};

struct targ {
	struct tshared *sh;
	unsigned id;
	struct mrun own[512];
	size_t nown;
};

static void t_drop(struct targ *a, size_t i, bool defer)
{
	struct mrun r = a->own[i];

	a->own[i] = a->own[--a->nown];
	/* Cleared before the free: once free, another thread may take it. */
	for (uint64_t b = r.blk; b < r.blk + r.n; b++)
		atomic_store(&a->sh->owner[b - T_START], 0);
	if (defer)
		assert_int_equal(fspace_defer(a->sh->fs, r.blk, r.n,
					      atomic_fetch_add(&a->sh->seq, 1) + 1), 0);
	else
		assert_int_equal(fspace_put(a->sh->fs, r.blk, r.n), 0);
}

static void *t_worker(void *arg)
{
	struct targ *a = arg;
	uint64_t rng = 0x1234567ull * (a->id + 1), blk, got;

	for (unsigned i = 0; i < T_OPS; i++) {
		rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
		if (a->nown == 512 || (a->nown && rng % 3 == 0)) {
			t_drop(a, rng % a->nown, rng % 5 == 0);
			continue;
		}
		if (fspace_get(a->sh->fs, 1 + rng % 16, rng % 7 ? a->id : rng >> 8, FSPACE_DATA,
			       &blk, &got))
			continue;
		for (uint64_t b = blk; b < blk + got; b++)
			if (atomic_exchange(&a->sh->owner[b - T_START], 1))
				atomic_fetch_add(&a->sh->bad, 1);	/* handed out twice */
		a->own[a->nown++] = (struct mrun){ blk, got };
	}
	return NULL;
}

/* A commit's groups are pinned until it is done, then clean: done evicts
 * them down to the budget at once.  Random writes over a large file system
 * changed a group per GiB in every checkpoint, and their bitmaps (32 KiB
 * each) stayed until later loads pushed them out: 28 MiB of the daemon at
 * 1 TiB, outside any budget. */
static void test_done_trims(void **state)
{
	struct fspace_params p = { .node_start = 16, .nslots = 1u << 12, .node_reserve = 64,
		.budget = 2 * (FSPACE_GROUP_DEFAULT / 8) };
	struct slotstore ms;
	struct bcache *c;
	struct fspace *fs;
	struct broot root;
	uint64_t blk, got, pinned;

	(void)state;
	p.start = p.node_start + p.nslots * BNODE_BLOCKS;
	p.end = p.start + 64 * FSPACE_GROUP_DEFAULT;
	slot_init(&ms, p.node_start, p.nslots);
	assert_int_equal(bcache_create(8u << 20, &c), 0);
	assert_int_equal(fspace_open(&ms.store, c, uuid, &p, NULL, &fs), 0);
	for (uint64_t g = 0; g < 64; g++)
		assert_int_equal(fspace_get(fs, 1, g, FSPACE_DATA, &blk, &got), 0);
	assert_int_equal(fspace_commit(fs, 2, NULL, 0, &root), 0);
	pinned = fspace_loaded_bytes(fs);
	assert_true(pinned >= 32 * (FSPACE_GROUP_DEFAULT / 8));
	fspace_commit_done(fs);
	printf("64 groups changed: %llu KiB loaded at the commit, %llu KiB once done\n",
	       (unsigned long long)pinned >> 10, (unsigned long long)fspace_loaded_bytes(fs) >> 10);
	assert_true(fspace_loaded_bytes(fs) <= p.budget);
	/* and what they hold is still right: group 5 reloads with its block
	 * taken */
	assert_int_equal(fspace_is_free(fs, p.start + 5 * FSPACE_GROUP_DEFAULT), 0);
	assert_int_equal(fspace_is_free(fs, p.start + 5 * FSPACE_GROUP_DEFAULT + 1), 1);
	fspace_close(fs);
	bcache_destroy(c);
	slot_destroy(&ms);
}

static void test_threads(void **state)
{
	struct fspace_params p = { .start = T_START, .end = T_START + T_TOTAL, .gblocks = T_GB,
		.node_start = 16, .nslots = 400, .node_reserve = 8, .budget = 8 * T_GB / 8 };
	struct tshared *sh = calloc(1, sizeof(*sh));
	struct targ args[T_THREADS];
	pthread_t th[T_THREADS];
	struct slotstore ms;
	struct bcache *c;
	struct broot root;
	uint64_t gen = 1, owned = 0;

	(void)state;
	assert_non_null(sh);
	slot_init(&ms, p.node_start, p.nslots);
	assert_int_equal(bcache_create(1u << 20, &c), 0);
	assert_int_equal(fspace_open(&ms.store, c, uuid, &p, NULL, &sh->fs), 0);
	for (unsigned i = 0; i < T_THREADS; i++) {
		args[i] = (struct targ){ .sh = sh, .id = i };
		assert_int_equal(pthread_create(&th[i], NULL, t_worker, &args[i]), 0);
	}
	/* Checkpoints and releases while they run. */
	for (unsigned i = 0; i < 30; i++) {
		usleep(2000);
		assert_int_equal(fspace_release_durable(sh->fs, atomic_load(&sh->seq) / 2), 0);
		assert_int_equal(fspace_commit(sh->fs, ++gen, NULL, 0, &root), 0);
		fspace_commit_done(sh->fs);
	}
	for (unsigned i = 0; i < T_THREADS; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(atomic_load(&sh->bad), 0);
	assert_int_equal(fspace_release_all(sh->fs), 0);
	assert_int_equal(fspace_commit(sh->fs, ++gen, NULL, 0, &root), 0);
	fspace_commit_done(sh->fs);
	fspace_close(sh->fs);
	bcache_destroy(c);
	/* Cold: exactly the owned blocks are used. */
	assert_int_equal(bcache_create(1u << 20, &c), 0);
	assert_int_equal(fspace_open(&ms.store, c, uuid, &p, &root, &sh->fs), 0);
	for (unsigned i = 0; i < T_THREADS; i++)
		for (size_t j = 0; j < args[i].nown; j++)
			owned += args[i].own[j].n;
	assert_int_equal(fspace_free_blocks(sh->fs), T_TOTAL - owned);
	for (uint64_t b = 0; b < T_TOTAL; b++)
		assert_int_equal(fspace_is_free(sh->fs, T_START + b), !atomic_load(&sh->owner[b]));
	assert_int_equal(fspace_nodes_used(sh->fs), tree_nodes(&ms.store, sh->fs, &root));
	fspace_close(sh->fs);
	bcache_destroy(c);
	slot_destroy(&ms);
	free(sh);
}

/* ---- allocation rates: fspace against alloc.c ---- */

#define B_BLOCKS (1ull << 24)		/* 64 GiB */
#define B_OPS 200000u

struct bench {
	struct fspace *fs;
	struct alloc *a;
	unsigned id;
};

/* Allocate 8 blocks, free the run allocated 256 before: a steady state. */
static void *b_worker(void *arg)
{
	struct bench *b = arg;
	struct mrun ring[256] = { { 0, 0 } };

	for (unsigned i = 0; i < B_OPS; i++) {
		struct mrun *r = &ring[i % 256];

		if (r->n)
			b->fs ? (void)fspace_put(b->fs, r->blk, r->n) : alloc_put(b->a, r->blk, r->n);
		r->n = 0;
		if (b->fs)
			assert_int_equal(fspace_get(b->fs, 8, b->id, FSPACE_DATA, &r->blk, &r->n), 0);
		else
			assert_int_equal(alloc_get(b->a, 8, b->id, ALLOC_DATA, &r->blk, &r->n), 0);
	}
	return NULL;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double b_run(bool v2, unsigned nthreads)
{
	struct fspace_params p = { .start = 100000, .end = 100000 + B_BLOCKS, .node_start = 16,
		.nslots = 1000, .budget = 16u << 20 };
	struct bench b[2];
	pthread_t th[2];
	struct slotstore ms;
	struct bcache *c = NULL;
	struct fspace *fs = NULL;
	struct alloc *a = NULL;
	double t0, t;

	slot_init(&ms, p.node_start, p.nslots);
	if (v2) {
		assert_int_equal(bcache_create(1u << 20, &c), 0);
		assert_int_equal(fspace_open(&ms.store, c, uuid, &p, NULL, &fs), 0);
	} else {
		assert_int_equal(alloc_create(p.start, p.end, 0, &a), 0);
	}
	t0 = now();
	for (unsigned i = 0; i < nthreads; i++) {
		b[i] = (struct bench){ fs, a, i };
		assert_int_equal(pthread_create(&th[i], NULL, b_worker, &b[i]), 0);
	}
	for (unsigned i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	t = now() - t0;
	if (v2) {
		fspace_close(fs);
		bcache_destroy(c);
	} else {
		alloc_destroy(a);
	}
	slot_destroy(&ms);
	return nthreads * B_OPS / t;
}

static int cmp_d(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return a < b ? -1 : a > b;
}

static void test_bench(void **state)
{
	(void)state;
	for (unsigned nt = 1; nt <= 2; nt++) {
		for (int v2 = 0; v2 <= 1; v2++) {
			double r[5];

			for (unsigned i = 0; i < 5; i++)
				r[i] = b_run(v2, nt);
			qsort(r, 5, sizeof(r[0]), cmp_d);
			printf("%s, %u thread%s: median %.0f allocations/s (min %.0f, max %.0f)\n",
			       v2 ? "fspace " : "alloc.c", nt, nt > 1 ? "s" : "", r[2], r[0], r[4]);
		}
	}
}

/* ---- reserves: a full area still checkpoints ---- */

static void test_reserves(void **state)
{
	struct fspace_params p = { .start = 1000, .end = 1000 + 4 * 4096, .gblocks = 4096,
		.reserve = 64, .node_start = 16, .nslots = 200, .node_reserve = 6,
		.budget = 1u << 20 };
	struct slotstore ms;
	struct bcache *c;
	struct fspace *fs;
	struct btree t;
	struct broot root, oroot;
	uint64_t blk, got, total = 0, *freed, gen = 1, id = 0, v[100] = { 0 };
	size_t nfreed;
	char why[200];
	int ret;

	(void)state;
	slot_init(&ms, p.node_start, p.nslots);
	assert_int_equal(bcache_create(1u << 20, &c), 0);
	assert_int_equal(fspace_open(&ms.store, c, uuid, &p, NULL, &fs), 0);
	/* Data: FSPACE_DATA stops at the reserve, FSPACE_META takes it. */
	while (!(ret = fspace_get(fs, 7, total, FSPACE_DATA, &blk, &got)))
		total += got;
	assert_int_equal(ret, -ENOSPC);
	assert_int_equal(fspace_free_blocks(fs), p.reserve);
	while (!fspace_get(fs, 7, 0, FSPACE_META, &blk, &got))
		total += got;
	assert_int_equal(total, 4 * 4096);
	assert_int_equal(fspace_free_blocks(fs), 0);
	/* Nodes: another tree fills the node area up to the reserve ... */
	assert_int_equal(bt_open(&t, fspace_node_store(fs), c, 1, uuid, NULL), 0);
	assert_int_equal(bt_begin(&t, ++gen), 0);
	while (!(ret = bt_insert(&t, &(struct bkey){ id++, 1, 0 }, v, sizeof(v))))
		;
	assert_int_equal(ret, -ENOSPC);
	bt_abort(&t);
	assert_int_equal(bt_begin(&t, ++gen), 0);
	for (uint64_t i = 0; i + 2 < id; i++)
		assert_int_equal(bt_insert(&t, &(struct bkey){ i, 1, 0 }, v, sizeof(v)), 0);
	assert_int_equal(bt_commit(&t, &oroot, &freed, &nfreed), 0);
	free(freed);
	/* ... and the free-space tree still commits from the reserve. */
	assert_true(fspace_nodes_used(fs) + p.node_reserve >= p.nslots - 2);
	assert_int_equal(fspace_commit(fs, ++gen, NULL, 0, &root), 0);
	fspace_commit_done(fs);
	if (fspace_verify(fs, why, sizeof(why)))
		fail_msg("%s", why);
	bt_close(&t);
	fspace_close(fs);
	bcache_destroy(c);
	/* The full state survives a cold open. */
	assert_int_equal(bcache_create(1u << 20, &c), 0);
	assert_int_equal(fspace_open(&ms.store, c, uuid, &p, &root, &fs), 0);
	assert_int_equal(fspace_free_blocks(fs), 0);
	assert_int_equal(fspace_nodes_used(fs),
			 tree_nodes(&ms.store, fs, &root) + tree_nodes(&ms.store, fs, &oroot));
	fspace_close(fs);
	bcache_destroy(c);
	slot_destroy(&ms);
}

/* ---- I/O errors: a failed commit is redone by the next, a failed load
 * changes nothing ---- */

static void test_errors(void **state)
{
	struct slotstore ms;
	struct model *m = calloc(1, sizeof(*m));
	struct broot froot;
	uint64_t blk, got;

	(void)state;
	assert_non_null(m);
	slot_init(&ms, M_NODE_START, M_NSLOTS);
	m->io = &ms.store;
	m->rng = 11;
	m->p = (struct fspace_params){ .start = M_START, .end = M_START + M_TOTAL,
		.gblocks = M_GB, .node_start = M_NODE_START, .nslots = M_NSLOTS,
		.node_reserve = 8, .budget = M_GB / 8 };
	m_open(m);
	for (unsigned i = 0; i < 400; i++)
		m_alloc(m);
	m_commit(m, true);
	for (unsigned round = 0; round < 3; round++) {
		for (unsigned i = 0; i < 100; i++)
			m_put(m), m_alloc(m);
		/* The node writes of the commit fail: nothing is published, the
		 * changed groups stay changed. */
		ms.fail_writes = 1 + (int)round;
		assert_int_equal(fspace_commit(m->fs, ++m->gen, NULL, 0, &froot), -EIO);
		ms.fail_writes = 0;
		m_commit(m, true);
		m_check(m, false);
	}
	m_crash(m);
	/* A group load that fails: -EIO, and nothing changed. */
	m_close(m);
	m->cbudget = 1;		/* nothing stays cached: the load reads */
	m_open(m);
	ms.fail_reads = 1000;
	assert_int_equal(fspace_get(m->fs, 8, 0, FSPACE_DATA, &blk, &got), -EIO);
	ms.fail_reads = 0;
	{
		struct fspace_stats st;

		fspace_stats(m->fs, &st);
		assert_int_equal(st.errors, 1);	/* the failed load */
		assert_int_equal(fspace_free_blocks(m->fs), m_free(m));
	}
	m_close(m);
	m_open(m);
	m_check(m, true);
	m_close(m);
	free(m->carry);
	free(m);
	slot_destroy(&ms);
}

/* ---- a run across a group boundary ---- */

static void test_across(void **state)
{
	struct fspace_params p = { .start = 1000, .end = 1000 + 4 * 4096 + 100, .gblocks = 4096,
		.node_start = 16, .nslots = 200, .budget = 1u << 20 };
	struct slotstore ms;
	struct bcache *c;
	struct fspace *fs;
	uint64_t blk, got;

	(void)state;
	slot_init(&ms, p.node_start, p.nslots);
	assert_int_equal(bcache_create(1u << 20, &c), 0);
	assert_int_equal(fspace_open(&ms.store, c, uuid, &p, NULL, &fs), 0);
	/* Free: the last 10 blocks of group 0, all of group 1, the first 30
	 * of group 2; and 20 blocks in the middle of group 3. */
	assert_int_equal(fspace_claim(fs, 1000, 4086), 0);
	assert_int_equal(fspace_claim(fs, 1000 + 2 * 4096 + 30, 4066), 0);
	assert_int_equal(fspace_claim(fs, 1000 + 3 * 4096, 2000), 0);
	assert_int_equal(fspace_claim(fs, 1000 + 3 * 4096 + 2020, 4096 + 100 - 2020), 0);
	assert_int_equal(fspace_get(fs, 4096 + 40, 3, FSPACE_DATA, &blk, &got), 0);
	assert_int_equal(got, 4096 + 40);
	assert_int_equal(blk, 1000 + 4086);
	/* What is left: 20 in group 3; a request for 30 gets those. */
	assert_int_equal(fspace_get(fs, 30, 0, FSPACE_DATA, &blk, &got), 0);
	assert_int_equal(got, 20);
	assert_int_equal(blk, 1000 + 3 * 4096 + 2000);
	assert_int_equal(fspace_free_blocks(fs), 0);
	fspace_close(fs);
	bcache_destroy(c);
	slot_destroy(&ms);
}

/* ---- a checkpoint costs what changed ---- */

static void test_ckpt_cost(void **state)
{
	struct fspace_params p = { .start = 1000, .end = 1000 + 4 * 4096, .gblocks = 4096,
		.node_start = 16, .nslots = 200, .budget = 1u << 20 };
	struct fspace_stats a, b;
	struct slotstore ms;
	struct bcache *c;
	struct fspace *fs;
	struct broot root;
	uint64_t blk, got, gen = 1;
	char why[200];

	(void)state;
	slot_init(&ms, p.node_start, p.nslots);
	assert_int_equal(bcache_create(1u << 20, &c), 0);
	assert_int_equal(fspace_open(&ms.store, c, uuid, &p, NULL, &fs), 0);
	/* Group 0 in 2048 runs: every other block used. */
	for (uint64_t i = 0; i < 4096; i += 2)
		assert_int_equal(fspace_claim(fs, 1000 + i, 1), 0);
	assert_int_equal(fspace_commit(fs, ++gen, NULL, 0, &root), 0);
	fspace_commit_done(fs);
	fspace_stats(fs, &a);
	/* One block more: one run goes, the summary changes. */
	assert_int_equal(fspace_get(fs, 1, 0, FSPACE_DATA, &blk, &got), 0);
	assert_int_equal(fspace_commit(fs, ++gen, NULL, 0, &root), 0);
	fspace_commit_done(fs);
	fspace_stats(fs, &b);
	printf("one block in a group of 2048 runs: %llu items read, %llu written\n",
	       (unsigned long long)(b.items_read - a.items_read),
	       (unsigned long long)(b.items_written - a.items_written));
	assert_true(b.items_read - a.items_read <= 2);
	/* The run, the summary, a node map chunk or two. */
	assert_true(b.items_written - a.items_written <= 4);
	if (fspace_verify(fs, why, sizeof(why)))
		fail_msg("%s", why);
	fspace_close(fs);
	bcache_destroy(c);
	slot_destroy(&ms);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_model_mem),
		cmocka_unit_test(test_model_mirror),
		cmocka_unit_test(test_crash),
		cmocka_unit_test(test_reserves),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_across),
		cmocka_unit_test(test_ckpt_cost),
		cmocka_unit_test(test_membound),
		cmocka_unit_test(test_done_trims),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_bench),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
