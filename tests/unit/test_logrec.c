// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: the log record codec (logrec.c): round trip at boundary
 * sizes, refusal of every malformed input, hostile lengths.  Split from
 * test_log.c, which tests the log region itself. */
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
#include "extent.h"
#include "log.h"
#include "mirror.h"

/* ================= codec ================= */

#define MAXREC 64

struct collect {
	unsigned n;
	struct log_rec r[MAXREC];
};

static int collect_cb(void *ctx, const struct log_rec *r)
{
	struct collect *c = ctx;

	assert_true(c->n < MAXREC);
	c->r[c->n++] = *r;
	return 0;
}

static uint64_t rd64(const void *p)
{
	uint64_t v;

	memcpy(&v, p, 8);	/* unaligned by design */
	return v;
}

static void test_codec_round_trip(void **state)
{
	static char target[LOG_SYMLINK_MAX], name[LOG_NAME_MAX], val[LOG_XATTR_VAL_MAX];
	static uint64_t csums[LOG_EXT_MAX_BLOCKS];
	struct log_buf b;
	struct log_rec r[12];
	struct collect *c = calloc(1, sizeof(*c));
	unsigned n = 0;

	for (size_t i = 0; i < sizeof(target); i++)
		target[i] = (char)('a' + i % 26);
	for (size_t i = 0; i < sizeof(name); i++)
		name[i] = (char)('A' + i % 26);
	for (size_t i = 0; i < sizeof(val); i++)
		val[i] = (char)(i * 7);
	for (size_t i = 0; i < LOG_EXT_MAX_BLOCKS; i++)
		csums[i] = 0x0123456789abcdefull * (i + 1);

	memset(r, 0, sizeof(r));
	r[n].type = LR_INODE;
	r[n].inode = (struct log_inode){ .ino = 1ull << 40, .parent = 7, .mode = 040755,
		.uid = 1000, .gid = 1001, .nlink = 0xffffffffu, .flags = 3, .rdev = 0x801,
		.size = UINT64_MAX, .gen = 9, .atime_ns = -1, .mtime_ns = INT64_MIN,
		.ctime_ns = INT64_MAX, .btime_ns = 12345 };
	n++;
	r[n].type = LR_INODE;
	r[n].inode = (struct log_inode){ .ino = 2, .mode = 0120777, .nlink = 1,
		.target_len = LOG_SYMLINK_MAX, .target = target };
	n++;
	r[n].type = LR_INODE_DEL;
	r[n].del.ino = 99;
	n++;
	r[n].type = LR_DENT_SET;
	r[n].dent.parent = 1; r[n].dent.ino = 2; r[n].dent.namelen = 1; r[n].dent.name = "x";
	n++;
	r[n].type = LR_DENT_SET;
	r[n].dent.parent = 1; r[n].dent.ino = 3; r[n].dent.namelen = LOG_NAME_MAX;
	r[n].dent.name = name;
	n++;
	r[n].type = LR_DENT_DEL;
	r[n].dent.parent = 1; r[n].dent.namelen = 3; r[n].dent.name = "...";
	n++;
	r[n].type = LR_EXT_SET;
	r[n].ext.ino = 5; r[n].ext.fblk = 10; r[n].ext.phys = (1ull << 63) | 5000;
	r[n].ext.n = 1; r[n].ext.csums = csums;
	n++;
	r[n].type = LR_EXT_SET;
	r[n].ext.ino = 5; r[n].ext.fblk = 11; r[n].ext.phys = 6000;
	r[n].ext.n = LOG_EXT_MAX_BLOCKS; r[n].ext.csums = csums;
	n++;
	r[n].type = LR_EXT_CLEAR;
	r[n].clr.ino = 5; r[n].clr.fblk = 3; r[n].clr.n = UINT64_MAX - 3;
	n++;
	r[n].type = LR_XATTR_SET;
	r[n].xattr.ino = 5; r[n].xattr.namelen = LOG_NAME_MAX; r[n].xattr.name = name;
	r[n].xattr.vallen = LOG_XATTR_VAL_MAX; r[n].xattr.val = val;
	n++;
	r[n].type = LR_XATTR_SET;
	r[n].xattr.ino = 5; r[n].xattr.namelen = 6; r[n].xattr.name = "user/a";
	r[n].xattr.vallen = 0;
	n++;
	r[n].type = LR_XATTR_DEL;
	r[n].xattr.ino = 5; r[n].xattr.namelen = 1; r[n].xattr.name = "u";
	n++;

	log_buf_init(&b);
	for (unsigned i = 0; i < n; i++)
		assert_int_equal(log_buf_add(&b, &r[i]), 0);
	/* header of the first record: type 1, flags 0, body 96 */
	assert_int_equal(b.p[0], LR_INODE);
	assert_int_equal(b.p[2] | b.p[3], 0);
	assert_int_equal(b.p[4], 96);

	assert_int_equal(log_decode(b.p, b.len, collect_cb, c), 0);
	assert_int_equal(c->n, n);
	for (unsigned i = 0; i < n; i++) {
		const struct log_rec *a = &r[i], *d = &c->r[i];

		assert_int_equal(d->type, a->type);
		switch (a->type) {
		case LR_INODE:
			assert_true(d->inode.ino == a->inode.ino && d->inode.parent == a->inode.parent);
			assert_true(d->inode.mode == a->inode.mode && d->inode.uid == a->inode.uid &&
				    d->inode.gid == a->inode.gid && d->inode.nlink == a->inode.nlink &&
				    d->inode.flags == a->inode.flags);
			assert_true(d->inode.rdev == a->inode.rdev && d->inode.size == a->inode.size &&
				    d->inode.gen == a->inode.gen);
			assert_true(d->inode.atime_ns == a->inode.atime_ns &&
				    d->inode.mtime_ns == a->inode.mtime_ns &&
				    d->inode.ctime_ns == a->inode.ctime_ns &&
				    d->inode.btime_ns == a->inode.btime_ns);
			assert_int_equal(d->inode.target_len, a->inode.target_len);
			if (a->inode.target_len)
				assert_memory_equal(d->inode.target, a->inode.target,
						    a->inode.target_len);
			break;
		case LR_INODE_DEL:
			assert_int_equal(d->del.ino, a->del.ino);
			break;
		case LR_DENT_SET:
		case LR_DENT_DEL:
			assert_true(d->dent.parent == a->dent.parent && d->dent.ino == a->dent.ino);
			assert_int_equal(d->dent.namelen, a->dent.namelen);
			assert_memory_equal(d->dent.name, a->dent.name, a->dent.namelen);
			break;
		case LR_EXT_SET:
			assert_true(d->ext.ino == a->ext.ino && d->ext.fblk == a->ext.fblk &&
				    d->ext.phys == a->ext.phys);
			assert_int_equal(d->ext.n, a->ext.n);
			for (uint32_t k = 0; k < a->ext.n; k++)
				assert_true(rd64((const uint8_t *)d->ext.csums + 8 * k) == csums[k]);
			break;
		case LR_EXT_CLEAR:
			assert_true(d->clr.ino == a->clr.ino && d->clr.fblk == a->clr.fblk &&
				    d->clr.n == a->clr.n);
			break;
		case LR_XATTR_SET:
		case LR_XATTR_DEL:
			assert_int_equal(d->xattr.ino, a->xattr.ino);
			assert_int_equal(d->xattr.namelen, a->xattr.namelen);
			assert_memory_equal(d->xattr.name, a->xattr.name, a->xattr.namelen);
			assert_int_equal(d->xattr.vallen, a->xattr.vallen);
			if (a->xattr.vallen)
				assert_memory_equal(d->xattr.val, a->xattr.val, a->xattr.vallen);
			break;
		}
	}
	/* empty input is an empty stream */
	assert_int_equal(log_decode(b.p, 0, collect_cb, c), 0);
	log_buf_free(&b);
	free(c);
}

static int stop_cb(void *ctx, const struct log_rec *r)
{
	(*(int *)ctx)++;
	return 42;
}

static void test_codec_refuses(void **state)
{
	static uint64_t csums[LOG_EXT_MAX_BLOCKS + 1];
	static char big[LOG_XATTR_VAL_MAX + 1];
	struct log_buf b;
	struct log_rec r;
	char nul[3] = { 'a', 0, 'b' };
	const char *bad_dent[] = { "a/b", ".", "..", "/" };

	log_buf_init(&b);
	memset(&r, 0, sizeof(r));
	r.type = 0;
	assert_int_equal(log_buf_add(&b, &r), -EINVAL);
	r.type = LR_MAX;
	assert_int_equal(log_buf_add(&b, &r), -EINVAL);

	memset(&r, 0, sizeof(r));
	r.type = LR_INODE;
	r.inode.target = big;
	r.inode.target_len = LOG_SYMLINK_MAX + 1;
	assert_int_equal(log_buf_add(&b, &r), -EINVAL);

	memset(&r, 0, sizeof(r));
	r.type = LR_DENT_SET;
	r.dent.name = big;
	r.dent.namelen = 0;
	assert_int_equal(log_buf_add(&b, &r), -EINVAL);
	memset(big, 'x', sizeof(big));
	r.dent.namelen = LOG_NAME_MAX + 1;
	assert_int_equal(log_buf_add(&b, &r), -EINVAL);
	for (size_t i = 0; i < sizeof(bad_dent) / sizeof(bad_dent[0]); i++) {
		r.dent.name = bad_dent[i];
		r.dent.namelen = (uint16_t)strlen(bad_dent[i]);
		assert_int_equal(log_buf_add(&b, &r), -EINVAL);
	}
	r.dent.name = nul;
	r.dent.namelen = 3;
	assert_int_equal(log_buf_add(&b, &r), -EINVAL);

	memset(&r, 0, sizeof(r));
	r.type = LR_EXT_SET;
	r.ext.csums = csums;
	r.ext.n = 0;
	assert_int_equal(log_buf_add(&b, &r), -EINVAL);
	r.ext.n = LOG_EXT_MAX_BLOCKS + 1;
	assert_int_equal(log_buf_add(&b, &r), -EINVAL);

	memset(&r, 0, sizeof(r));
	r.type = LR_EXT_CLEAR;
	assert_int_equal(log_buf_add(&b, &r), -EINVAL);

	memset(&r, 0, sizeof(r));
	r.type = LR_XATTR_SET;
	r.xattr.name = "user.a";
	r.xattr.namelen = 6;
	r.xattr.val = big;
	r.xattr.vallen = LOG_XATTR_VAL_MAX + 1;
	assert_int_equal(log_buf_add(&b, &r), -EINVAL);
	r.xattr.vallen = 1;
	r.xattr.name = nul;
	r.xattr.namelen = 3;
	assert_int_equal(log_buf_add(&b, &r), -EINVAL);
	r.type = LR_XATTR_DEL;
	r.xattr.namelen = 0;
	assert_int_equal(log_buf_add(&b, &r), -EINVAL);
	assert_int_equal(b.len, 0);

	/* a nonzero callback result stops decoding and is returned */
	int calls = 0;

	memset(&r, 0, sizeof(r));
	r.type = LR_INODE_DEL;
	assert_int_equal(log_buf_add(&b, &r), 0);
	assert_int_equal(log_buf_add(&b, &r), 0);
	assert_int_equal(log_decode(b.p, b.len, stop_cb, &calls), 42);
	assert_int_equal(calls, 1);
	log_buf_free(&b);
}

/* Decode a private exact-size copy (so ASan sees any overread). */
static int decode_copy(const uint8_t *p, size_t len)
{
	uint8_t *q = malloc(len ? len : 1);
	int ret;

	memcpy(q, p, len);
	ret = log_decode(q, len, NULL, NULL);
	free(q);
	return ret;
}

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> 8 * i); }

static void test_codec_hostile(void **state)
{
	uint64_t csums[3] = { 1, 2, 3 };
	struct log_buf b;
	struct log_rec r;
	size_t bounds[16], nb = 0;
	uint8_t *m;

	log_buf_init(&b);
	bounds[nb++] = 0;
	memset(&r, 0, sizeof(r));
	r.type = LR_INODE; r.inode.ino = 3; r.inode.target = "tgt"; r.inode.target_len = 3;
	log_buf_add(&b, &r); bounds[nb++] = b.len;
	memset(&r, 0, sizeof(r));
	r.type = LR_DENT_SET; r.dent.parent = 1; r.dent.ino = 3; r.dent.name = "nm"; r.dent.namelen = 2;
	log_buf_add(&b, &r); bounds[nb++] = b.len;
	memset(&r, 0, sizeof(r));
	r.type = LR_EXT_SET; r.ext.ino = 3; r.ext.n = 3; r.ext.csums = csums;
	log_buf_add(&b, &r); bounds[nb++] = b.len;
	memset(&r, 0, sizeof(r));
	r.type = LR_XATTR_SET; r.xattr.ino = 3; r.xattr.name = "k"; r.xattr.namelen = 1;
	r.xattr.val = "vv"; r.xattr.vallen = 2;
	log_buf_add(&b, &r); bounds[nb++] = b.len;
	memset(&r, 0, sizeof(r));
	r.type = LR_XATTR_DEL; r.xattr.ino = 3; r.xattr.name = "k"; r.xattr.namelen = 1;
	log_buf_add(&b, &r); bounds[nb++] = b.len;
	memset(&r, 0, sizeof(r));
	r.type = LR_EXT_CLEAR; r.clr.ino = 3; r.clr.n = 1;
	log_buf_add(&b, &r); bounds[nb++] = b.len;

	/* every truncation that is not at a record boundary is refused */
	for (size_t len = 0; len <= b.len; len++) {
		bool at_bound = false;

		for (size_t k = 0; k < nb; k++)
			at_bound |= bounds[k] == len;
		assert_int_equal(decode_copy(b.p, len), at_bound ? 0 : -EUCLEAN);
	}

	m = malloc(b.len);
#define MUTATE(off, stmt) do { memcpy(m, b.p, b.len); stmt; \
		assert_int_equal(decode_copy(m, b.len), -EUCLEAN); (void)(off); } while (0)
	size_t o_d = bounds[1], o_e = bounds[2], o_x = bounds[3];

	MUTATE(0, put16(m, 0));				/* type 0 */
	MUTATE(0, put16(m, LR_MAX));			/* unknown type */
	MUTATE(0, put16(m + 2, 1));			/* flags */
	MUTATE(0, put32(m + 4, 0xffffffffu));		/* body past the end */
	MUTATE(0, put32(m + 4, 95));			/* body shorter than fixed part */
	MUTATE(0, put32(m + 8 + 92, 4));		/* target_len != body */
	MUTATE(0, put32(m + 8 + 92, 0xffffffffu));	/* huge target_len */
	MUTATE(o_d, put16(m + o_d + 8 + 16, 0));	/* namelen 0 */
	MUTATE(o_d, put16(m + o_d + 8 + 16, 3));	/* namelen != body */
	MUTATE(o_d, m[o_d + 8 + 18] = '/');		/* '/' in name */
	MUTATE(o_d, m[o_d + 8 + 19] = 0);		/* NUL in name */
	MUTATE(o_d, memcpy(m + o_d + 8 + 18, "..", 2));	/* ".." */
	MUTATE(o_e, put32(m + o_e + 8 + 24, 0));	/* ext n 0 */
	MUTATE(o_e, put32(m + o_e + 8 + 24, 4));	/* n != body */
	MUTATE(o_e, put32(m + o_e + 8 + 24, 0x20000001u)); /* n*8 overflows 32 bits */
	MUTATE(o_x, put32(m + o_x + 8 + 10, LOG_XATTR_VAL_MAX + 1)); /* vallen */
	MUTATE(o_x, put32(m + o_x + 8 + 10, 0xfffffffeu));
	MUTATE(o_x, put16(m + o_x + 8 + 8, 0));		/* xattr namelen 0 */
	MUTATE(o_x, m[o_x + 8 + 14] = 0);		/* NUL in xattr name */
	MUTATE(0, put16(m + bounds[5], LR_INODE_DEL));	/* CLEAR -> DEL: wrong size */
	MUTATE(0, memset(m + bounds[5] + 8 + 16, 0, 8));	/* clear n 0 */
#undef MUTATE

	/* random garbage and random single-byte damage: 0 or -EUCLEAN, and
	 * never out of bounds (run under ASan to see that) */
	srand(12345);
	for (int it = 0; it < 20000; it++) {
		size_t len = (size_t)rand() % 200;
		uint8_t g[200];
		int ret;

		for (size_t i = 0; i < len; i++)
			g[i] = (uint8_t)rand();
		if (len >= 8 && (it & 1)) {	/* plausible headers get further */
			put16(g, (uint16_t)(1 + rand() % (LR_MAX - 1)));
			put16(g + 2, 0);
			put32(g + 4, (uint32_t)(len - 8));
		}
		ret = decode_copy(g, len);
		assert_true(ret == 0 || ret == -EUCLEAN);

		memcpy(m, b.p, b.len);
		m[(size_t)rand() % b.len] = (uint8_t)rand();
		ret = decode_copy(m, (size_t)rand() % (b.len + 1));
		assert_true(ret == 0 || ret == -EUCLEAN);
	}
	free(m);
	log_buf_free(&b);
}

static int ext_seen(void *ctx, const struct log_rec *r)
{
	*(struct log_rec *)ctx = *r;
	return 0;
}

/* Unwritten blocks (fallocate) go in the short form: no checksums, 36
 * bytes whatever n is; the short form of a written run is refused both
 * ways (it would read as zero checksums). */
static void test_codec_unwritten_short(void **state)
{
	uint64_t one = 7;
	struct log_buf b;
	struct log_rec r, got;
	uint8_t *m;

	(void)state;
	log_buf_init(&b);
	memset(&r, 0, sizeof(r));
	r.type = LR_EXT_SET; r.ext.ino = 9; r.ext.fblk = 100;
	r.ext.phys = 5000 | EXTENT_UNWRITTEN; r.ext.n = LOG_EXT_MAX_BLOCKS;
	assert_int_equal(log_buf_add(&b, &r), 0);
	assert_int_equal(b.len, 8 + 28);
	memset(&got, 0, sizeof(got));
	assert_int_equal(log_decode(b.p, b.len, ext_seen, &got), 0);
	assert_int_equal(got.type, LR_EXT_SET);
	assert_true(got.ext.phys == (5000 | EXTENT_UNWRITTEN));
	assert_int_equal(got.ext.n, LOG_EXT_MAX_BLOCKS);
	assert_true(got.ext.fblk == 100 && got.ext.ino == 9);
	assert_null(got.ext.csums);

	/* the same bytes without the unwritten bit: refused */
	m = malloc(b.len);
	memcpy(m, b.p, b.len);
	m[8 + 16 + 7] &= 0x7f;
	assert_int_equal(decode_copy(m, b.len), -EUCLEAN);
	free(m);

	/* a written run must carry its checksums */
	log_buf_reset(&b);
	r.ext.phys = 5000; r.ext.n = 1;
	assert_int_not_equal(log_buf_add(&b, &r), 0);
	/* with them, the long form as before */
	r.ext.csums = &one;
	assert_int_equal(log_buf_add(&b, &r), 0);
	assert_int_equal(b.len, 8 + 28 + 8);
	log_buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_codec_round_trip),
		cmocka_unit_test(test_codec_refuses),
		cmocka_unit_test(test_codec_hostile),
		cmocka_unit_test(test_codec_unwritten_short),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
