// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: RAID1 over 2 and 3 image files behind the fault backend, for each I/O backend: verified reads, read-repair on disk, unrecoverable blocks, device failure on write/read/flush errors, read spreading. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "csum.h"
#include "dev.h"
#include "mirror.h"

#define BS TFS_BLOCK_SIZE
#define IMG_SIZE (8ull << 20)
#define NB 16u			/* blocks per test run */
#define BLK0 100u		/* first block of the run */

static const char *const backends[] = { "uring", "aio", "file" };

struct fx {
	unsigned n;
	char *path[3];
	struct dev *d[3];
	struct dev_backend *be;		/* fault(lower) */
	struct mirror m;
	char *good;			/* NB blocks as written */
	uint64_t csums[NB];
	unsigned state_calls;
	unsigned last_dev;
	int last_state, last_err;
};

static void on_state(void *ctx, unsigned dev, int state, int err)
{
	struct fx *f = ctx;

	f->state_calls++;
	f->last_dev = dev;
	f->last_state = state;
	f->last_err = err;
}

static void *xalloc(size_t len)
{
	void *p = NULL;

	assert_int_equal(posix_memalign(&p, BS, len), 0);
	memset(p, 0xee, len);
	return p;
}

static void pattern(char *buf, uint32_t nblk, uint64_t seed)
{
	uint32_t i;

	for (i = 0; i < nblk * BS; i++)
		buf[i] = (char)((i * 131 + seed * 7 + (i >> 12)) & 0xff);
}

/* n images behind fault(lower); the run BLK0..BLK0+NB written through the mirror. */
static void fx_setup(struct fx *f, const char *lower, unsigned n)
{
	struct dev_backend *lo;
	char err[256];
	unsigned i;

	memset(f, 0, sizeof(*f));
	f->n = n;
	assert_int_equal(dev_backend_create(lower, &lo), 0);
	assert_int_equal(dev_fault_create(lo, &f->be), 0);
	for (i = 0; i < n; i++) {
		int fd;

		f->path[i] = strdup("/var/tmp/twinfs-test-mirror-XXXXXX");
		fd = mkstemp(f->path[i]);
		assert_true(fd >= 0);
		assert_int_equal(ftruncate(fd, (off_t)IMG_SIZE), 0);
		close(fd);
		assert_int_equal(dev_open(f->path[i], false, &f->d[i], err, sizeof(err)), 0);
		assert_int_equal(dev_backend_attach(f->be, f->d[i]), 0);
	}
	assert_int_equal(mirror_init(&f->m, f->be, f->d, n), 0);
	f->m.on_state = on_state;
	f->m.on_state_ctx = f;
	assert_int_equal(mirror_healthy(&f->m), n);

	f->good = xalloc(NB * BS);
	pattern(f->good, NB, 1);
	for (i = 0; i < NB; i++)
		f->csums[i] = csum_block(f->good + i * BS, BLK0 + i);
	assert_int_equal(mirror_write(&f->m, BLK0, f->good, NB), 0);
}

static void fx_teardown(struct fx *f)
{
	unsigned i;

	dev_backend_destroy(f->be);
	for (i = 0; i < f->n; i++) {
		dev_close(f->d[i]);
		unlink(f->path[i]);
		free(f->path[i]);
	}
	free(f->good);
}

/* Make the next mirror_read pick @dev first (all devices healthy). */
static void aim(struct fx *f, unsigned dev)
{
	atomic_store(&f->m.rr, dev);
}

/* Flip a bit of block @blk directly on device @dev, behind the mirror's back. */
static void rot(struct fx *f, unsigned dev, uint64_t blk)
{
	char *b = xalloc(BS);

	assert_int_equal(dev_pread(f->be, f->d[dev], b, BS, blk * BS), 0);
	b[77] ^= 0x10;
	assert_int_equal(dev_pwrite(f->be, f->d[dev], b, BS, blk * BS), 0);
	free(b);
}

static void raw_check(struct fx *f, unsigned dev, uint64_t blk, const char *want)
{
	char *b = xalloc(BS);

	assert_int_equal(dev_pread(f->be, f->d[dev], b, BS, blk * BS), 0);
	assert_memory_equal(b, want, BS);
	free(b);
}

static uint64_t ctr_sum(struct fx *f, size_t field)
{
	uint64_t s = 0;
	unsigned i;

	for (i = 0; i < f->n; i++)
		s += atomic_load((_Atomic uint64_t *)((char *)&f->m.ctr[i] + field));
	return s;
}
#define CTR(f, name) ctr_sum(f, offsetof(struct mirror_counters, name))

static void add_rule(struct fx *f, int dev, int op, int kind, int count)
{
	struct dev_fault_rule r = { .dev_idx = dev, .op = op, .kind = kind,
				    .err = EIO, .count = count };

	assert_int_equal(dev_fault_add_rule(f->be, &r), 0);
}

/* Run @fn over every lower backend, with 2 and 3 mirrors. */
#define MATRIX(fn)							\
	static void fn##_all(void **state)				\
	{								\
		unsigned b, n;						\
		for (b = 0; b < 3; b++)					\
			for (n = 2; n <= 3; n++) {			\
				struct fx f;				\
				fx_setup(&f, backends[b], n);		\
				fn(&f);					\
				fx_teardown(&f);			\
			}						\
	}

static void verified_read(struct fx *f)
{
	char *buf = xalloc(NB * BS);
	uint64_t bad = 123;
	unsigned d, i;

	for (d = 0; d < f->n; d++) {
		aim(f, d);
		assert_int_equal(mirror_read(&f->m, BLK0, buf, NB, f->csums, &bad), 0);
		assert_int_equal(bad, 0);
		assert_memory_equal(buf, f->good, NB * BS);
		/* every mirror holds the data */
		assert_int_equal(mirror_read_dev(&f->m, d, BLK0, buf, NB), 0);
		assert_memory_equal(buf, f->good, NB * BS);
	}
	for (i = 0; i < f->n; i++) {
		assert_int_equal(f->m.ctr[i].csum_err, 0);
		assert_int_equal(f->m.ctr[i].repaired, 0);
	}
	/* a checksum that does not match the data is caught (wrong address) */
	assert_int_equal(mirror_read(&f->m, BLK0 + 1, buf, 1, f->csums, &bad), -EIO);
	assert_int_equal(bad, 1);
	free(buf);
}
MATRIX(verified_read)

/* dev0's copy of one block rots: the read returns good data and fixes dev0. */
static void corrupt_repair(struct fx *f)
{
	char *buf = xalloc(NB * BS);
	uint64_t bad = 123;

	rot(f, 0, BLK0 + 5);
	aim(f, 0);
	assert_int_equal(mirror_read(&f->m, BLK0, buf, NB, f->csums, &bad), 0);
	assert_int_equal(bad, 0);
	assert_memory_equal(buf, f->good, NB * BS);
	assert_int_equal(f->m.ctr[0].csum_err, 1);
	assert_int_equal(f->m.ctr[0].repaired, 1);
	assert_int_equal(CTR(f, csum_err), 1);
	assert_int_equal(CTR(f, repaired), 1);
	assert_int_equal(CTR(f, unrecoverable), 0);
	raw_check(f, 0, BLK0 + 5, f->good + 5 * BS);	/* rewritten on disk */
	assert_int_equal(f->state_calls, 0);

	/* fixed: reading from dev0 again finds nothing to repair */
	aim(f, 0);
	assert_int_equal(mirror_read(&f->m, BLK0, buf, NB, f->csums, &bad), 0);
	assert_int_equal(CTR(f, csum_err), 1);

	/* two copies rot: with three mirrors the third one repairs both */
	if (f->n == 3) {
		rot(f, 0, BLK0 + 9);
		rot(f, 1, BLK0 + 9);
		aim(f, 0);
		assert_int_equal(mirror_read(&f->m, BLK0, buf, NB, f->csums, &bad), 0);
		assert_memory_equal(buf, f->good, NB * BS);
		assert_int_equal(f->m.ctr[0].csum_err, 2);
		assert_int_equal(f->m.ctr[1].csum_err, 1);
		assert_int_equal(f->m.ctr[1].repaired, 1);
		raw_check(f, 0, BLK0 + 9, f->good + 9 * BS);
		raw_check(f, 1, BLK0 + 9, f->good + 9 * BS);
	}
	free(buf);
}
MATRIX(corrupt_repair)

/* every copy of block 3 rots: -EIO, that block zeroed and flagged, the rest served */
static void all_bad(struct fx *f)
{
	char *buf = xalloc(NB * BS), *zero = calloc(1, BS);
	uint64_t bad = 0;
	unsigned d;

	for (d = 0; d < f->n; d++)
		rot(f, d, BLK0 + 3);
	assert_int_equal(mirror_read(&f->m, BLK0, buf, NB, f->csums, &bad), -EIO);
	assert_int_equal(bad, 1ull << 3);
	assert_memory_equal(buf, f->good, 3 * BS);
	assert_memory_equal(buf + 3 * BS, zero, BS);
	assert_memory_equal(buf + 4 * BS, f->good + 4 * BS, (NB - 4) * BS);
	assert_int_equal(CTR(f, unrecoverable), 1);
	assert_int_equal(CTR(f, csum_err), f->n);
	assert_int_equal(CTR(f, repaired), 0);
	assert_int_equal(mirror_healthy(&f->m), f->n);	/* bad data is not a dead disk */
	free(buf);
	free(zero);
}
MATRIX(all_bad)

/* A lost block read again counts nothing more (damage, not retries);
 * written anew and lost again, it counts again; clearing a device zeroes
 * its counters and forgets its losses. */
static void lost_once(struct fx *f)
{
	char *buf = xalloc(NB * BS);
	struct mirror_errs was;
	unsigned d;

	for (d = 0; d < f->n; d++)
		rot(f, d, BLK0 + 3);
	for (d = 0; d < 3; d++) {
		aim(f, d % f->n);	/* whichever copy comes first */
		assert_int_equal(mirror_read(&f->m, BLK0, buf, NB, f->csums, NULL), -EIO);
	}
	assert_int_equal(CTR(f, unrecoverable), 1);
	assert_int_equal(CTR(f, csum_err), f->n);
	/* rewritten (same content, as a copy-on-write reuse would) and lost
	 * again: a new loss.  Read from dev0 first: counted there. */
	assert_int_equal(mirror_write(&f->m, BLK0, f->good, NB), 0);
	assert_int_equal(mirror_read(&f->m, BLK0, buf, NB, f->csums, NULL), 0);
	for (d = 0; d < f->n; d++)
		rot(f, d, BLK0 + 3);
	for (d = 0; d < 2; d++) {
		aim(f, 0);
		assert_int_equal(mirror_read(&f->m, BLK0, buf, NB, f->csums, NULL), -EIO);
	}
	assert_int_equal(CTR(f, unrecoverable), 2);
	assert_int_equal(CTR(f, csum_err), 2 * f->n);
	assert_int_equal(f->m.ctr[1].csum_err, 2);
	/* clear dev0: zeroed, and its loss is counted again when next met */
	mirror_clear_counters(&f->m, 0, &was);
	assert_int_equal(was.csum_err, 2);
	assert_true(was.unrecoverable >= 1);
	assert_int_equal(f->m.ctr[0].csum_err, 0);
	assert_int_equal(f->m.ctr[0].unrecoverable, 0);
	assert_int_equal(f->m.ctr[1].csum_err, 2);
	aim(f, 0);
	assert_int_equal(mirror_read(&f->m, BLK0, buf, NB, f->csums, NULL), -EIO);
	assert_int_equal(f->m.ctr[0].unrecoverable, 1);
	assert_int_equal(f->m.ctr[0].csum_err, 1);
	free(buf);
}
MATRIX(lost_once)

/* dev1 refuses writes: it is failed once, writes and reads go on without it */
static void write_error(struct fx *f)
{
	char *buf = xalloc(NB * BS);
	uint64_t c0[3], c1[3], c2[3];
	unsigned i;

	add_rule(f, 1, DEV_WRITE, DEV_FAULT_ERROR, -1);
	pattern(buf, NB, 2);
	assert_int_equal(mirror_write(&f->m, BLK0, buf, NB), 0);
	assert_int_equal(atomic_load(&f->m.state[1]), MDEV_FAILED);
	assert_int_equal(mirror_healthy(&f->m), f->n - 1);
	assert_int_equal(f->m.ctr[1].write_err, 1);
	assert_int_equal(f->state_calls, 1);
	assert_int_equal(f->last_dev, 1);
	assert_int_equal(f->last_state, MDEV_FAILED);
	assert_int_equal(f->last_err, -EIO);

	for (i = 0; i < NB; i++)
		f->csums[i] = csum_block(buf + i * BS, BLK0 + i);
	memcpy(f->good, buf, NB * BS);

	/* the failed device sees no more I/O of any kind */
	dev_fault_counts(f->be, 1, c1);
	assert_int_equal(mirror_write(&f->m, BLK0, buf, NB), 0);
	assert_int_equal(mirror_flush(&f->m), 0);
	for (i = 0; i < 8; i++) {
		memset(buf, 0, NB * BS);
		assert_int_equal(mirror_read(&f->m, BLK0 + i, buf, NB - i, f->csums + i, NULL), 0);
		assert_memory_equal(buf, f->good + i * BS, (NB - i) * BS);
	}
	dev_fault_counts(f->be, 1, c2);
	assert_memory_equal(c1, c2, sizeof(c1));
	assert_int_equal(mirror_read_dev(&f->m, 1, BLK0, buf, 1), -ENODEV);
	assert_int_equal(f->m.ctr[1].write_err, 1);
	assert_int_equal(f->state_calls, 1);	/* reported once */
	mirror_fail_dev(&f->m, 1, -EIO);
	assert_int_equal(f->state_calls, 1);

	/* dev0 served reads (and, with three mirrors, dev2) */
	dev_fault_counts(f->be, 0, c0);
	assert_true(c0[DEV_READ] > 0);

	/* lose every device: the write reports -EIO */
	add_rule(f, -1, DEV_WRITE, DEV_FAULT_ERROR, -1);
	assert_int_equal(mirror_write(&f->m, BLK0, buf, NB), -EIO);
	assert_int_equal(mirror_healthy(&f->m), 0);
	assert_int_equal(f->state_calls, f->n);
	assert_int_equal(mirror_write(&f->m, BLK0, buf, NB), -EIO);
	assert_int_equal(mirror_read(&f->m, BLK0, buf, 2, f->csums, NULL), -EIO);
	free(buf);
}
MATRIX(write_error)

/* dev0 fails every read: data still comes back, repaired from the others, and
 * after MIRROR_READ_ERR_LIMIT errors dev0 is failed */
static void read_errors(struct fx *f)
{
	char *buf = xalloc(NB * BS);
	unsigned i;

	add_rule(f, 0, DEV_READ, DEV_FAULT_ERROR, -1);
	for (i = 0; i < MIRROR_READ_ERR_LIMIT; i++) {
		assert_int_equal(atomic_load(&f->m.state[0]), MDEV_OK);
		aim(f, 0);
		memset(buf, 0, NB * BS);
		assert_int_equal(mirror_read(&f->m, BLK0, buf, NB, f->csums, NULL), 0);
		assert_memory_equal(buf, f->good, NB * BS);
	}
	assert_int_equal(f->m.ctr[0].read_err, MIRROR_READ_ERR_LIMIT);
	assert_int_equal(atomic_load(&f->m.state[0]), MDEV_FAILED);
	assert_int_equal(f->state_calls, 1);
	assert_int_equal(f->last_dev, 0);
	/* the blocks were rewritten onto dev0 while it was still healthy */
	assert_int_equal(f->m.ctr[0].repaired, (MIRROR_READ_ERR_LIMIT - 1) * NB);
	assert_int_equal(CTR(f, unrecoverable), 0);
	assert_int_equal(mirror_read(&f->m, BLK0, buf, NB, f->csums, NULL), 0);
	assert_memory_equal(buf, f->good, NB * BS);
	free(buf);
}
MATRIX(read_errors)

static void flush_error(struct fx *f)
{
	uint64_t c[3];

	assert_int_equal(mirror_flush(&f->m), 0);
	dev_fault_counts(f->be, 0, c);
	assert_int_equal(c[DEV_FLUSH], 1);
	/* Nothing written since: no flush to fail. */
	add_rule(f, 1, DEV_FLUSH, DEV_FAULT_ERROR, -1);
	assert_int_equal(mirror_flush(&f->m), 0);
	dev_fault_counts(f->be, 1, c);
	assert_int_equal(c[DEV_FLUSH], 1);
	assert_int_equal(atomic_load(&f->m.state[1]), MDEV_OK);
	/* A plain write since: the flush runs, fails and fails dev1. */
	assert_int_equal(mirror_write(&f->m, BLK0, f->good, NB), 0);
	assert_int_equal(mirror_flush(&f->m), 0);
	assert_int_equal(f->m.ctr[1].flush_err, 1);
	assert_int_equal(atomic_load(&f->m.state[1]), MDEV_FAILED);
	assert_int_equal(f->state_calls, 1);
	add_rule(f, -1, DEV_FLUSH, DEV_FAULT_ERROR, -1);
	assert_int_equal(mirror_write(&f->m, BLK0, f->good, NB), 0);
	assert_int_equal(mirror_flush(&f->m), -EIO);
	assert_int_equal(mirror_healthy(&f->m), 0);
}
MATRIX(flush_error)

/* reads of different blocks are spread over every mirror */
static void spread(struct fx *f)
{
	char *buf = xalloc(BS);
	uint64_t c[3], before[3];
	unsigned i, d;

	/* a stream of single-block sequential reads */
	for (i = 0; i < 60; i++)
		assert_int_equal(mirror_read(&f->m, BLK0 + i % NB, buf, 1, f->csums + i % NB, NULL), 0);
	for (d = 0; d < f->n; d++) {
		dev_fault_counts(f->be, (int)d, c);
		assert_true(c[DEV_READ] >= 60 / f->n / 2);
	}
	/* the same block read again and again is spread too */
	for (d = 0; d < f->n; d++) {
		dev_fault_counts(f->be, (int)d, c);
		before[d] = c[DEV_READ];
	}
	for (i = 0; i < 30; i++)
		assert_int_equal(mirror_read(&f->m, BLK0, buf, 1, f->csums, NULL), 0);
	for (d = 0; d < f->n; d++) {
		dev_fault_counts(f->be, (int)d, c);
		assert_true(c[DEV_READ] - before[d] >= 30 / f->n / 2);
	}
	free(buf);
}
MATRIX(spread)

/* a device missing at mount: no I/O to it, everything else works */
static void test_degraded(void **state)
{
	struct dev *devs[2];
	struct fx f;
	char *buf;
	uint64_t bad;

	fx_setup(&f, "uring", 2);
	buf = xalloc(NB * BS);
	devs[0] = f.d[0];
	devs[1] = NULL;
	assert_int_equal(mirror_init(&f.m, f.be, devs, 2), 0);
	assert_int_equal(atomic_load(&f.m.state[1]), MDEV_MISSING);
	assert_int_equal(mirror_healthy(&f.m), 1);
	assert_int_equal(mirror_write(&f.m, BLK0, f.good, NB), 0);
	assert_int_equal(mirror_read(&f.m, BLK0, buf, NB, f.csums, &bad), 0);
	assert_memory_equal(buf, f.good, NB * BS);
	assert_int_equal(mirror_flush(&f.m), 0);
	assert_int_equal(mirror_write_dev(&f.m, 1, BLK0, buf, 1), -ENODEV);
	/* one copy only: rot is unrecoverable */
	rot(&f, 0, BLK0);
	assert_int_equal(mirror_read(&f.m, BLK0, buf, NB, f.csums, &bad), -EIO);
	assert_int_equal(bad, 1);
	free(buf);
	fx_teardown(&f);
}

/* runs longer than 64 blocks: blocks past 63 all report as bit 63 */
static void test_bad_bitmap_long(void **state)
{
	const unsigned nb = 70;
	uint64_t *cs = calloc(nb, sizeof(*cs));
	char *data = xalloc(nb * BS), *buf = xalloc(nb * BS);
	uint64_t bad = 0;
	unsigned i;
	struct fx f;

	fx_setup(&f, "uring", 2);
	pattern(data, nb, 5);
	for (i = 0; i < nb; i++)
		cs[i] = csum_block(data + i * BS, 1000 + i);
	assert_int_equal(mirror_write(&f.m, 1000, data, nb), 0);
	rot(&f, 0, 1000 + 66);
	rot(&f, 1, 1000 + 66);
	rot(&f, 0, 1000 + 2);
	rot(&f, 1, 1000 + 2);
	rot(&f, 1, 1000 + 40);			/* recoverable: not in the bitmap */
	assert_int_equal(mirror_read(&f.m, 1000, buf, nb, cs, &bad), -EIO);
	assert_int_equal(bad, (1ull << 63) | (1ull << 2));
	assert_memory_equal(buf + 40 * BS, data + 40 * BS, BS);
	assert_memory_equal(buf + 67 * BS, data + 67 * BS, 3 * BS);
	fx_teardown(&f);
	free(cs);
	free(data);
	free(buf);
}

/* Slot paths: the name of a missing device outlives it, and a replace
 * swaps it; events, status and rebuild read it from here. */
static void test_slot_path(void **state)
{
	struct dev *devs[2] = { NULL, NULL };
	struct mirror m;
	char p[64], small[4];

	(void)state;
	assert_int_equal(mirror_init(&m, NULL, devs, 2), 0);
	assert_false(mirror_slot_path(&m, 1, p, sizeof(p)));
	assert_int_equal(mirror_slot_path_set(&m, 1, "/dev/old"), 0);
	assert_true(mirror_slot_path(&m, 1, p, sizeof(p)));
	assert_string_equal(p, "/dev/old");
	assert_false(mirror_slot_path(&m, 0, p, sizeof(p)));
	assert_int_equal(mirror_slot_path_set(&m, 1, "/dev/new"), 0);
	assert_true(mirror_slot_path(&m, 1, small, sizeof(small)));
	assert_string_equal(small, "/de");
	assert_int_equal(mirror_slot_path_set(&m, DEV_MAX, "/x"), -EINVAL);
	assert_false(mirror_slot_path(&m, DEV_MAX, p, sizeof(p)));
	assert_int_equal(mirror_slot_path_set(&m, 1, NULL), 0);
	assert_false(mirror_slot_path(&m, 1, p, sizeof(p)));
	assert_int_equal(mirror_slot_path_set(&m, 0, "/dev/a"), 0);
	mirror_slot_paths_free(&m);
	assert_false(mirror_slot_path(&m, 0, p, sizeof(p)));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(verified_read_all),
		cmocka_unit_test(corrupt_repair_all),
		cmocka_unit_test(all_bad_all),
		cmocka_unit_test(lost_once_all),
		cmocka_unit_test(write_error_all),
		cmocka_unit_test(read_errors_all),
		cmocka_unit_test(flush_error_all),
		cmocka_unit_test(spread_all),
		cmocka_unit_test(test_degraded),
		cmocka_unit_test(test_bad_bitmap_long),
		cmocka_unit_test(test_slot_path),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
