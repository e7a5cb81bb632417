// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: format-v2 B+tree nodes on the mirror (bstore_mirror, io_uring under the fault backend, two image files): a node is written to both mirrors; a rotten copy, a read error or a copy misdirected to another node's place is caught through the parent pointer and repaired from the other mirror; with both copies bad the lookup fails with EIO and never returns other bytes; with one device failed, nodes are written to and read from the other alone; with all_copies (fsck) every copy is read, so a bad copy behind a good one is found and rewritten.  All of it twice: whole nodes, and short nodes (SUPER_INCOMPAT_V2_SHORT_NODES: only nb blocks written and verified, bytes past them ignored, repairs of nb blocks). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "bcache.h"
#include "bnode.h"
#include "bstore.h"
#include "btree.h"
#include "dev.h"
#include "mirror.h"

#define IMG_SIZE (16ull << 20)
#define AREA 256u		/* first block of the node area */
#define NSLOTS 512u
#define NITEMS 3000u
#define VLEN 100u

static const uint8_t uuid[16] = { 9, 8, 7, 6, 5, 4, 3, 2, 1 };
static bool short_nodes;		/* the format of this round (main) */

struct fx {
	char *path[2];
	struct dev *d[2];
	struct dev_backend *be;		/* fault(uring) */
	struct mirror m;
	struct bstore_mirror s;
	struct broot root;
	uint8_t *buf;			/* one node, aligned */
};

/* Item i's key (a compound literal). */
#define KEY(i) ((struct bkey){ 1000 + (i), 1, (i) * 8ull })

static void fill(uint8_t *b, unsigned len, uint64_t seed)
{
	for (unsigned i = 0; i < len; i++)
		b[i] = (uint8_t)(seed * 31 + i);
}

static void fx_setup(struct fx *f)
{
	struct dev_backend *lo;
	struct bcache *c;
	struct btree t;
	uint64_t *freed;
	size_t nfreed;
	char err[256];

	memset(f, 0, sizeof(*f));
	if (dev_backend_create("uring", &lo)) {
		/* Refused here (seccomp): the same test on the file backend. */
		printf("io_uring refused: file backend\n");
		assert_int_equal(dev_backend_create("file", &lo), 0);
	}
	assert_int_equal(dev_fault_create(lo, &f->be), 0);
	for (unsigned i = 0; i < 2; i++) {
		int fd;

		f->path[i] = strdup("/var/tmp/twinfs-test-bstore-XXXXXX");
		fd = mkstemp(f->path[i]);
		assert_true(fd >= 0);
		assert_int_equal(ftruncate(fd, (off_t)IMG_SIZE), 0);
		close(fd);
		assert_int_equal(dev_open(f->path[i], false, &f->d[i], err, sizeof(err)), 0);
		assert_int_equal(dev_backend_attach(f->be, f->d[i]), 0);
	}
	assert_int_equal(mirror_init(&f->m, f->be, f->d, 2), 0);
	assert_int_equal(bstore_mirror_init(&f->s, &f->m, AREA, NSLOTS), 0);
	f->s.store.short_nodes = short_nodes;
	assert_int_equal(posix_memalign((void **)&f->buf, 4096, BNODE_SIZE), 0);

	assert_int_equal(bcache_create(1u << 20, &c), 0);
	assert_int_equal(bt_open(&t, &f->s.store, c, 1, uuid, NULL), 0);
	assert_int_equal(bt_begin(&t, 1), 0);
	for (unsigned i = 0; i < NITEMS; i++) {
		uint8_t v[VLEN];

		fill(v, VLEN, i);
		assert_int_equal(bt_insert(&t, &KEY(i), v, VLEN), 0);
	}
	assert_int_equal(bt_commit(&t, &f->root, &freed, &nfreed), 0);
	free(freed);
	assert_int_equal(f->root.level, 1);
	bt_close(&t);
	bcache_destroy(c);
}

static void fx_teardown(struct fx *f)
{
	bstore_mirror_destroy(&f->s);
	dev_backend_destroy(f->be);
	for (unsigned i = 0; i < 2; i++) {
		dev_close(f->d[i]);
		unlink(f->path[i]);
		free(f->path[i]);
	}
	free(f->buf);
}

/* Pointer @i of the root (a leaf), and the first key the leaf may hold. */
static void leaf_ptr(struct fx *f, unsigned i, struct bptr *p, unsigned *first)
{
	struct bkey k;

	assert_int_equal(f->s.store.ops->read(f->s.store.ctx, &f->root.ptr, f->buf, NULL), 0);
	assert_true(i + 1 < bnode_nritems(f->buf));
	bnode_ptr(f->buf, i, p);
	bnode_key(f->buf, i, &k);
	*first = (unsigned)(k.id - 1000);
}

static void dev_rw(struct fx *f, unsigned dev, uint64_t blk, void *b, bool wr)
{
	int ret = wr ? dev_pwrite(f->be, f->d[dev], b, BNODE_SIZE, blk * 4096)
		     : dev_pread(f->be, f->d[dev], b, BNODE_SIZE, blk * 4096);

	assert_int_equal(ret, 0);
}

/* Flip one byte of device @dev's copy of the node at @addr (short nodes:
 * inside its nb blocks, where the csum covers it). */
static void rot(struct fx *f, unsigned dev, uint64_t addr, unsigned at)
{
	dev_rw(f, dev, addr, f->buf, false);
	if (short_nodes)
		at = 64 + at % (bnode_nb(f->buf) * 4096 - 64);
	f->buf[at] ^= 0x20;
	dev_rw(f, dev, addr, f->buf, true);
}

/* Make the leaf read of the next lookup_all of one item try @dev first:
 * reads rotate over the devices, and the root is read before the leaf. */
static void aim_leaf(struct fx *f, unsigned dev)
{
	atomic_store(&f->m.rr, dev + 1);
}

/* Look every item up through a tree with an empty cache; count -EIO. */
static unsigned lookup_all(struct fx *f, unsigned from, unsigned to)
{
	struct bcache *c;
	struct btree t;
	unsigned nio = 0;

	assert_int_equal(bcache_create(1u << 20, &c), 0);
	assert_int_equal(bt_open(&t, &f->s.store, c, 1, uuid, &f->root), 0);
	for (unsigned i = from; i < to; i++) {
		uint8_t v[VLEN], want[VLEN];
		unsigned len;
		int ret = bt_lookup(&t, &KEY(i), v, sizeof(v), &len);

		if (ret == -EIO) {
			nio++;
			continue;
		}
		assert_int_equal(ret, 0);
		fill(want, VLEN, i);
		assert_int_equal(len, VLEN);
		assert_memory_equal(v, want, VLEN);
	}
	bt_close(&t);
	bcache_destroy(c);
	return nio;
}

/* Both mirrors hold the node @p names, byte for byte. */
static void copies_good(struct fx *f, const struct bptr *p)
{
	uint8_t *other = NULL;

	assert_int_equal(posix_memalign((void **)&other, 4096, BNODE_SIZE), 0);
	dev_rw(f, 0, p->addr, f->buf, false);
	dev_rw(f, 1, p->addr, other, false);
	assert_memory_equal(f->buf, other, BNODE_SIZE);
	assert_true(bnode_copy_matches(other, p, short_nodes));
	free(other);
}

static void test_mirrored_write(void **state)
{
	struct fx f;
	struct bptr p;
	unsigned first;

	fx_setup(&f);
	leaf_ptr(&f, 3, &p, &first);
	copies_good(&f, &p);
	assert_int_equal(lookup_all(&f, 0, NITEMS), 0);
	fx_teardown(&f);
}

/* A node read is one device read of BNODE_BLOCKS blocks: the counters
 * twinfs-ctl shows (and bench/run.sh's node reads) counted it twice when
 * both the pick and the read counted. */
static void test_read_counted_once(void **state)
{
	struct fx f;
	struct bptr p;
	unsigned first;
	uint64_t r0, b0, r1, b1;

	fx_setup(&f);
	leaf_ptr(&f, 3, &p, &first);
	r0 = atomic_load(&f.m.ctr[0].reads) + atomic_load(&f.m.ctr[1].reads);
	b0 = atomic_load(&f.m.ctr[0].read_bytes) + atomic_load(&f.m.ctr[1].read_bytes);
	assert_int_equal(f.s.store.ops->read(f.s.store.ctx, &p, f.buf, NULL), 0);
	r1 = atomic_load(&f.m.ctr[0].reads) + atomic_load(&f.m.ctr[1].reads);
	b1 = atomic_load(&f.m.ctr[0].read_bytes) + atomic_load(&f.m.ctr[1].read_bytes);
	assert_int_equal(r1 - r0, 1);
	assert_int_equal(b1 - b0, (uint64_t)BNODE_BLOCKS * 4096);
	fx_teardown(&f);
}

static void test_repair(void **state)
{
	struct fx f;
	struct bptr p;
	unsigned first;

	fx_setup(&f);
	leaf_ptr(&f, 2, &p, &first);
	rot(&f, 0, p.addr, 9000);
	aim_leaf(&f, 0);
	assert_int_equal(lookup_all(&f, first, first + 1), 0);
	assert_int_equal(f.m.ctr[0].csum_err, 1);	/* one node, one error */
	assert_int_equal(f.m.ctr[0].repaired, 1);
	assert_int_equal(f.m.ctr[1].csum_err, 0);
	copies_good(&f, &p);	/* rewritten */

	/* A read error on device 1: served by device 0, device 1 rewritten. */
	leaf_ptr(&f, 4, &p, &first);
	struct dev_fault_rule r = { .dev_idx = 1, .op = DEV_READ, .off = p.addr * 4096,
				    .len = BNODE_SIZE, .kind = DEV_FAULT_ERROR, .err = EIO,
				    .count = 1 };
	assert_int_equal(dev_fault_add_rule(f.be, &r), 0);
	aim_leaf(&f, 1);
	assert_int_equal(lookup_all(&f, first, first + 1), 0);
	assert_int_equal(f.m.ctr[1].read_err, 1);
	assert_int_equal(f.m.ctr[1].repaired, 1);
	assert_int_equal(mirror_healthy(&f.m), 2);
	copies_good(&f, &p);
	fx_teardown(&f);
}

/* A bad copy on the device read second is found only with all_copies
 * (fsck): without it the good first copy ends the read; with it the other
 * copy is read too, counted and rewritten, and no_repair (fsck -n) counts
 * it without writing. */
static void test_all_copies(void **state)
{
	struct fx f;
	struct bptr p;
	unsigned first;

	fx_setup(&f);
	leaf_ptr(&f, 2, &p, &first);
	rot(&f, 1, p.addr, 9000);
	aim_leaf(&f, 0);
	assert_int_equal(lookup_all(&f, first, first + 1), 0);
	assert_int_equal(f.m.ctr[1].csum_err, 0);	/* not seen */
	f.s.all_copies = true;
	f.m.no_repair = true;
	aim_leaf(&f, 0);
	assert_int_equal(lookup_all(&f, first, first + 1), 0);
	assert_int_equal(f.m.ctr[1].csum_err, 1);
	assert_int_equal(f.m.ctr[1].repaired, 0);
	assert_int_equal(f.m.ctr[0].csum_err, 0);
	f.m.no_repair = false;
	aim_leaf(&f, 0);
	assert_int_equal(lookup_all(&f, first, first + 1), 0);
	assert_int_equal(f.m.ctr[1].csum_err, 2);
	assert_int_equal(f.m.ctr[1].repaired, 1);
	copies_good(&f, &p);	/* rewritten */
	fx_teardown(&f);
}

static void test_unrecoverable(void **state)
{
	struct fx f;
	struct bptr p, q;
	unsigned first, qfirst, nio;

	fx_setup(&f);
	/* Both copies of one leaf rot: only its items fail, with EIO. */
	leaf_ptr(&f, 1, &p, &first);
	rot(&f, 0, p.addr, 7000);
	rot(&f, 1, p.addr, 12000);
	nio = lookup_all(&f, 0, NITEMS);
	assert_true(nio > 0);
	leaf_ptr(&f, 2, &q, &qfirst);
	assert_int_equal(nio, qfirst - first);	/* exactly that leaf's items */
	/* Read once per item of that leaf: one loss, counted once, and each
	 * bad copy once (not once per read, nor once per 4 KiB block). */
	assert_true(nio > 1);
	assert_int_equal(f.m.ctr[0].unrecoverable + f.m.ctr[1].unrecoverable, 1);
	assert_int_equal(f.m.ctr[0].csum_err, 1);
	assert_int_equal(f.m.ctr[1].csum_err, 1);
	{
		struct bcache *c;
		struct btree t;

		assert_int_equal(bcache_create(1u << 20, &c), 0);
		assert_int_equal(bt_open(&t, &f.s.store, c, 1, uuid, &f.root), 0);
		assert_int_equal(bt_verify(&t, NULL, NULL), -EIO);
		bt_close(&t);
		bcache_destroy(c);
	}

	/* A node misdirected onto another's place (both mirrors): a valid node,
	 * but not the one the parent names.  EIO, never its items. */
	leaf_ptr(&f, 5, &p, &first);
	leaf_ptr(&f, 6, &q, &qfirst);
	for (unsigned d = 0; d < 2; d++) {
		dev_rw(&f, d, q.addr, f.buf, false);
		dev_rw(&f, d, p.addr, f.buf, true);
	}
	assert_int_equal(lookup_all(&f, first, qfirst), qfirst - first);
	fx_teardown(&f);
}

/* The tree's last leaf (short nodes: fewer than 4 blocks, ascending
 * inserts leave full leaves but the last): its pointer into *p, device 0's
 * copy into f->buf; returns its nb. */
static unsigned last_leaf(struct fx *f, struct bptr *p)
{
	unsigned nb;

	assert_int_equal(f->s.store.ops->read(f->s.store.ctx, &f->root.ptr, f->buf, NULL), 0);
	bnode_ptr(f->buf, bnode_nritems(f->buf) - 1, p);
	dev_rw(f, 0, p->addr, f->buf, false);
	nb = bnode_nb(f->buf);
	assert_true(nb >= 1 && nb < BNODE_BLOCKS);
	return nb;
}

/* Short nodes: a leaf takes fewer than 4 blocks on each device, and what
 * follows its nb blocks in the slot is not read as the node's: garbage
 * there is no error (nothing counted, nothing repaired). */
static void test_short_extent(void **state)
{
	struct fx f;
	struct bptr p;
	unsigned nb;

	if (!short_nodes)
		return;
	fx_setup(&f);
	nb = last_leaf(&f, &p);
	for (unsigned d = 0; d < 2; d++) {
		dev_rw(&f, d, p.addr, f.buf, false);
		memset(f.buf + nb * 4096, 0x5a, BNODE_SIZE - nb * 4096);
		dev_rw(&f, d, p.addr, f.buf, true);
	}
	assert_int_equal(lookup_all(&f, 0, NITEMS), 0);
	for (unsigned d = 0; d < 2; d++) {
		assert_int_equal(f.m.ctr[d].csum_err, 0);
		assert_int_equal(f.m.ctr[d].repaired, 0);
	}
	fx_teardown(&f);
}

/* A repair writes the whole slot of a short node, not its nb blocks: a
 * latent error past nb fails every read of that copy (reads take the whole
 * slot), and only a write over it lets a disk remap it.  Shown here by the
 * bytes past nb: the rotten copy's garbage there is zeros after the repair
 * (review of the short nodes: nb blocks were written, the garbage stayed). */
static void test_repair_whole_slot(void **state)
{
	struct fx f;
	struct bptr p;
	unsigned nb;

	if (!short_nodes)
		return;
	fx_setup(&f);
	nb = last_leaf(&f, &p);
	memset(f.buf + nb * 4096, 0x5a, BNODE_SIZE - nb * 4096);
	dev_rw(&f, 0, p.addr, f.buf, true);
	rot(&f, 0, p.addr, 100);
	aim_leaf(&f, 0);
	assert_int_equal(lookup_all(&f, 0, NITEMS), 0);
	assert_int_equal(f.m.ctr[0].repaired, 1);
	dev_rw(&f, 0, p.addr, f.buf, false);
	assert_true(bnode_copy_matches(f.buf, &p, true));
	for (unsigned i = nb * 4096; i < BNODE_SIZE; i++)
		assert_int_equal(f.buf[i], 0);
	fx_teardown(&f);
}

/* One device failed: nodes go to the other alone and read from it. */
static void test_degraded(void **state)
{
	struct fx f;
	struct bcache *c;
	struct btree t;
	uint64_t *freed, before[3], after[3];
	size_t nfreed;
	uint8_t v[VLEN];

	fx_setup(&f);
	mirror_fail_dev(&f.m, 1, -EIO);
	dev_fault_counts(f.be, 1, before);
	assert_int_equal(bcache_create(1u << 20, &c), 0);
	assert_int_equal(bt_open(&t, &f.s.store, c, 1, uuid, &f.root), 0);
	assert_int_equal(bt_begin(&t, 2), 0);
	fill(v, VLEN, NITEMS);
	assert_int_equal(bt_insert(&t, &KEY(NITEMS), v, VLEN), 0);
	assert_int_equal(bt_commit(&t, &f.root, &freed, &nfreed), 0);
	bt_release(&t, freed, nfreed);
	free(freed);
	bt_close(&t);
	bcache_destroy(c);
	dev_fault_counts(f.be, 1, after);
	assert_int_equal(after[DEV_WRITE], before[DEV_WRITE]);
	assert_int_equal(after[DEV_READ], before[DEV_READ]);
	assert_int_equal(lookup_all(&f, 0, NITEMS + 1), 0);
	fx_teardown(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mirrored_write),
		cmocka_unit_test(test_read_counted_once),
		cmocka_unit_test(test_repair),
		cmocka_unit_test(test_all_copies),
		cmocka_unit_test(test_unrecoverable),
		cmocka_unit_test(test_degraded),
		cmocka_unit_test(test_short_extent),
		cmocka_unit_test(test_repair_whole_slot),
	};

	int ret;

	printf("whole nodes\n");
	ret = cmocka_run_group_tests(tests, NULL, NULL);
	short_nodes = true;
	printf("short nodes\n");
	return ret | cmocka_run_group_tests(tests, NULL, NULL);
}
