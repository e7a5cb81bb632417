// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: format-v2 leaf pieces (lib/bpiece.c, step 2a, not wired in): random leaves changed over several pieces merge to the leaf a model kept (keys across ids and types, so runs change; whiteouts; no-op items); every single-byte flip in the base or any piece is refused; a chain one piece short is refused against the long pointer and accepted against the short one; pieces of another base gen or address, with a repeated gen, a wrong k, reserved or gap bytes set, keys out of order or a non-minimal pb are refused; bytes past nblocks are ignored; a merge past 16 KiB and a whiteout of an absent key are refused; a delta too big for 15 blocks (or for the room given) is -E2BIG, bad arguments -EINVAL. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bpiece.h"
#include "csum.h"
#include "le.h"

static const uint8_t uuid[16] = { 1, 2, 3 };

#define ADDR 8192u
#define GEN0 5u
#define EXT (BPIECE_EXT_BLOCKS * BNODE_BLOCK)

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(uint64_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng % n;
}

static const struct bkey lo = { 100, 0, 0 }, hi = { 103, 255, BKEY_OFF_MAX };

/* Keys over 4 ids and 3 types, offs in a small range: runs of every length. */
static struct bkey rkey(void)
{
	return (struct bkey){ 100 + rnd(4), (uint8_t)(1 + rnd(3)), rnd(60) };
}

/* An empty leaf of range [lo, hi] at ADDR, GEN0. */
static void leaf_init(uint8_t *n)
{
	bnode_init(n, 0, ADDR, GEN0, 1, uuid);
	bnode_set_min(n, &lo);
	bnode_set_max(n, &hi);
}

/* Set key @k to a value of @len bytes of @fill (replacing); false: no room. */
static bool leaf_set(uint8_t *n, const struct bkey *k, unsigned len, int fill)
{
	uint8_t v[BNODE_MAX_VAL];
	unsigned idx, old = 0;
	bool found = bnode_search(n, k, &idx);

	if (found)
		bnode_val(n, idx, &old);
	if (bnode_free(n) + (found ? BNODE_ITEM + old : 0) < BNODE_ITEM + len)
		return false;
	if (found)
		bnode_leaf_delete(n, idx);
	memset(v, fill, len);
	bnode_leaf_insert(n, idx, k, v, len);
	return true;
}

static void leaf_del(uint8_t *n, const struct bkey *k)
{
	unsigned idx;

	if (bnode_search(n, k, &idx))
		bnode_leaf_delete(n, idx);
}

/* The base: @n sealed short and folded into @buf; returns its csum. */
static uint64_t put_base(uint8_t *n, uint8_t *buf, unsigned *nb0)
{
	uint64_t c = bnode_seal_short(n);

	*nb0 = bnode_fold(n, buf);
	assert_true(*nb0 >= 1 && *nb0 <= BNODE_BLOCKS);
	return c;
}

/* Keys whose item differs between leaves @a and @b (sorted); adds a no-op
 * key (equal in both) now and then. */
static unsigned diff_keys(const uint8_t *a, const uint8_t *b, struct bkey *out)
{
	unsigned na = bnode_nritems(a), nb = bnode_nritems(b), i = 0, j = 0, n = 0;

	while (i < na || j < nb) {
		struct bkey ka, kb;
		int c;

		if (i < na)
			bnode_key(a, i, &ka);
		if (j < nb)
			bnode_key(b, j, &kb);
		c = i == na ? 1 : j == nb ? -1 : bkey_cmp(&ka, &kb);
		if (c < 0) {
			out[n++] = ka;
			i++;
		} else if (c > 0) {
			out[n++] = kb;
			j++;
		} else {
			unsigned la, lb;
			const void *va = bnode_val(a, i, &la), *vb = bnode_val(b, j, &lb);

			if (la != lb || memcmp(va, vb, la) || !rnd(40))
				out[n++] = ka;
			i++;
			j++;
		}
	}
	return n;
}

/* Random changes to leaf @n: sets (new keys or new values) and deletes. */
static void change(uint8_t *n, unsigned ops)
{
	for (unsigned o = 0; o < ops; o++) {
		struct bkey k = rkey();

		if (rnd(3) == 0) {
			leaf_del(n, &k);
		} else {
			unsigned len = rnd(8) ? (unsigned)rnd(64) : (unsigned)rnd(BNODE_MAX_VAL + 1);

			leaf_set(n, &k, len, (int)rnd(256));
		}
	}
}

/* Item bytes (after the header) and counts equal. */
static void assert_same_items(const uint8_t *a, const uint8_t *b)
{
	assert_int_equal(bnode_nritems(a), bnode_nritems(b));
	assert_memory_equal(a + BNODE_HDR, b + BNODE_HDR, BNODE_USABLE);
}

struct chain {
	uint8_t *buf;			/* EXT bytes */
	unsigned nblocks, nb0, k;
	uint64_t gen, csum;
	uint64_t prev_gen[BPIECE_EXT_BLOCKS], prev_csum[BPIECE_EXT_BLOCKS];
	unsigned prev_nblocks[BPIECE_EXT_BLOCKS];
};

static void chain_start(struct chain *ch, uint8_t *leaf)
{
	memset(ch->buf, 0, EXT);
	ch->csum = put_base(leaf, ch->buf, &ch->nb0);
	ch->nblocks = ch->nb0;
	ch->gen = GEN0;
	ch->k = 0;
}

/* Append a piece for @keys of @leaf; returns pb or the error. */
static int chain_add(struct chain *ch, const uint8_t *leaf, const struct bkey *keys,
		     unsigned nkeys)
{
	uint64_t gen = ch->gen + 1 + rnd(3);
	int pb = bpiece_encode(ch->buf + ch->nblocks * BNODE_BLOCK,
			       (BPIECE_EXT_BLOCKS - ch->nblocks) * BNODE_BLOCK, leaf, keys, nkeys,
			       ADDR, GEN0, gen, ch->k + 1, ch->csum);

	if (pb <= 0)
		return pb;
	ch->prev_gen[ch->k] = ch->gen;
	ch->prev_csum[ch->k] = ch->csum;
	ch->prev_nblocks[ch->k] = ch->nblocks;
	ch->k++;
	ch->gen = gen;
	ch->csum = le64_get(ch->buf + ch->nblocks * BNODE_BLOCK);
	ch->nblocks += (unsigned)pb;
	return pb;
}

static struct bptr ptr(uint64_t gen, uint64_t csum)
{
	return (struct bptr){ .addr = ADDR, .gen = gen, .csum = csum };
}

static void *zalloc(size_t n)
{
	void *p = calloc(1, n);

	assert_non_null(p);
	return p;
}

/* Random leaves changed over up to 12 pieces: after each, the chain
 * verifies, merges to the model's items and says the piece's keys. */
static void test_roundtrip(void **state)
{
	uint8_t *model = zalloc(BNODE_SIZE), *prev = zalloc(BNODE_SIZE), *dst = zalloc(BNODE_SIZE);
	struct bkey *keys = zalloc(2048 * sizeof(*keys)), *got = zalloc(2048 * sizeof(*keys));
	struct chain ch = { .buf = zalloc(EXT) };
	unsigned pieces = 0, runs = 0, whiteouts = 0;

	(void)state;
	for (unsigned round = 0; round < 300; round++) {
		leaf_init(model);
		change(model, (unsigned)rnd(300));
		chain_start(&ch, model);
		for (unsigned p = 0; p < 12; p++) {
			struct bpiece_chain c;
			struct bptr bp;
			unsigned n;
			int pb;

			memcpy(prev, model, BNODE_SIZE);
			change(model, 1 + (unsigned)rnd(p % 3 ? 20 : 150));
			n = diff_keys(prev, model, keys);
			if (!n)
				continue;
			pb = chain_add(&ch, model, keys, n);
			if (pb == -E2BIG)
				break;
			assert_true(pb >= 1);
			for (unsigned i = 0; i < n; i++) {
				unsigned idx;

				whiteouts += !bnode_search(model, &keys[i], &idx);
				runs += i && (keys[i].id != keys[i - 1].id || keys[i].type != keys[i - 1].type);
			}
			bp = ptr(ch.gen, ch.csum);
			assert_int_equal(bpiece_verify_chain(ch.buf, ch.nblocks, &bp), 0);
			assert_int_equal(bpiece_load(dst, ch.buf, ch.nblocks, &bp, &c, NULL, 0), 0);
			assert_int_equal(bnode_check(dst, NULL, 0), 0);
			assert_same_items(dst, model);
			assert_true(bnode_gen(dst) == ch.gen && bnode_stored_csum(dst) == ch.csum);
			assert_true(c.npieces == ch.k && c.nb0 == ch.nb0 && c.gen == ch.gen &&
				    c.csum == ch.csum && c.base_gen == GEN0 && c.addr == ADDR);
			assert_int_equal(bpiece_merge(dst, ch.buf, ch.nblocks), 0);
			assert_same_items(dst, model);
			assert_int_equal(bpiece_keys(ch.buf, ch.nblocks, ch.k, got, 2048), (int)n);
			for (unsigned i = 0; i < n; i++)
				assert_int_equal(bkey_cmp(&got[i], &keys[i]), 0);
			pieces++;
		}
	}
	print_message("%u pieces, %u run changes inside pieces, %u whiteouts\n", pieces, runs,
		      whiteouts);
	assert_true(pieces > 1000 && runs > 1000 && whiteouts > 1000);	/* the loop did what it says */
	free(model);
	free(prev);
	free(dst);
	free(keys);
	free(got);
	free(ch.buf);
}

/* A base with 30 items and three pieces (sets, whiteouts) over several runs. */
static void build_chain(struct chain *ch, uint8_t *model, uint8_t *prev)
{
	struct bkey keys[400];

	leaf_init(model);
	for (unsigned i = 0; i < 30; i++) {
		struct bkey k = { 100 + i % 3, (uint8_t)(1 + i % 2), i };

		assert_true(leaf_set(model, &k, 16 + i * 7, (int)i));
	}
	chain_start(ch, model);
	for (unsigned p = 0; p < 3; p++) {
		unsigned n;

		memcpy(prev, model, BNODE_SIZE);
		change(model, 40);
		n = diff_keys(prev, model, keys);
		assert_true(n > 0);
		assert_true(chain_add(ch, model, keys, n) >= 1);
	}
}

/* Every byte of the base and of every piece is covered: any one flipped
 * byte is refused. */
static void test_flips(void **state)
{
	uint8_t *model = zalloc(BNODE_SIZE), *prev = zalloc(BNODE_SIZE);
	struct chain ch = { .buf = zalloc(EXT) };
	struct bptr bp;

	(void)state;
	build_chain(&ch, model, prev);
	bp = ptr(ch.gen, ch.csum);
	assert_int_equal(bpiece_verify_chain(ch.buf, ch.nblocks, &bp), 0);
	print_message("flipping each byte of %u blocks (base %u, %u pieces)\n", ch.nblocks, ch.nb0, ch.k);
	for (unsigned i = 0; i < ch.nblocks * BNODE_BLOCK; i++) {
		uint8_t x = (uint8_t)(1 + rnd(255));

		ch.buf[i] ^= x;
		if (bpiece_verify_chain(ch.buf, ch.nblocks, &bp) != -EUCLEAN)
			fail_msg("byte %u ^ 0x%02x of %u blocks accepted", i, x, ch.nblocks);
		ch.buf[i] ^= x;
	}
	assert_int_equal(bpiece_verify_chain(ch.buf, ch.nblocks, &bp), 0);
	free(model);
	free(prev);
	free(ch.buf);
}

/* A torn append: the chain without its last piece matches only the pointer
 * that named it then; bytes past nblocks are never looked at. */
static void test_truncated(void **state)
{
	uint8_t *model = zalloc(BNODE_SIZE), *prev = zalloc(BNODE_SIZE), *a = zalloc(BNODE_SIZE),
		*b = zalloc(BNODE_SIZE);
	struct chain ch = { .buf = zalloc(EXT) };
	struct bptr longp, shortp, basep;
	unsigned shortn;

	(void)state;
	build_chain(&ch, model, prev);
	longp = ptr(ch.gen, ch.csum);
	shortn = ch.prev_nblocks[ch.k - 1];
	shortp = ptr(ch.prev_gen[ch.k - 1], ch.prev_csum[ch.k - 1]);
	basep = ptr(GEN0, ch.prev_csum[0]);
	assert_int_equal(bpiece_verify_chain(ch.buf, shortn, &longp), -EUCLEAN);
	assert_int_equal(bpiece_verify_chain(ch.buf, shortn, &shortp), 0);
	assert_int_equal(bpiece_verify_chain(ch.buf, ch.nblocks, &shortp), -EUCLEAN);
	assert_int_equal(bpiece_verify_chain(ch.buf, ch.nb0, &basep), 0);
	assert_int_equal(bpiece_verify_chain(ch.buf, ch.nb0, &longp), -EUCLEAN);
	/* A chain cut inside a piece, or past the extent. */
	assert_int_equal(bpiece_verify_chain(ch.buf, ch.nblocks - 1, &longp), -EUCLEAN);
	assert_int_equal(bpiece_verify_chain(ch.buf, 0, &basep), -EUCLEAN);
	assert_int_equal(bpiece_verify_chain(ch.buf, BPIECE_EXT_BLOCKS + 1, &longp), -EUCLEAN);
	/* The base alone is what bnode_unfold makes of it. */
	assert_int_equal(bpiece_load(a, ch.buf, ch.nb0, &basep, NULL, NULL, 0), 0);
	memcpy(b, ch.buf, ch.nb0 * BNODE_BLOCK);
	bnode_unfold(b);
	assert_memory_equal(a, b, BNODE_SIZE);
	/* Garbage past nblocks (an append torn, or an older life's bytes). */
	assert_int_equal(bpiece_load(a, ch.buf, ch.nblocks, &longp, NULL, NULL, 0), 0);
	for (unsigned i = ch.nblocks * BNODE_BLOCK; i < EXT; i++)
		ch.buf[i] = (uint8_t)rnd(256);
	assert_int_equal(bpiece_load(b, ch.buf, ch.nblocks, &longp, NULL, NULL, 0), 0);
	assert_memory_equal(a, b, BNODE_SIZE);
	assert_same_items(a, model);
	free(model);
	free(prev);
	free(a);
	free(b);
	free(ch.buf);
}

/* Re-checksum a piece after an edit (chained from @seed). */
static void reseal(uint8_t *p, uint64_t seed)
{
	le64_put(p, csum_buf(p + 8, p[42] * BNODE_BLOCK - 8, seed));
}

/* Pieces that are well checksummed but wrong are refused. */
static void test_foreign(void **state)
{
	uint8_t *model = zalloc(BNODE_SIZE), *prev = zalloc(BNODE_SIZE), *save = zalloc(EXT);
	struct chain ch = { .buf = zalloc(EXT) };
	struct bkey keys[2] = { { 101, 1, 3 }, { 102, 1, 1 } };
	uint8_t *last;
	uint64_t seed;
	unsigned off;
	struct bptr bp;

	(void)state;
	build_chain(&ch, model, prev);
	assert_true(leaf_set(model, &keys[0], 8, 1) && leaf_set(model, &keys[1], 0, 0));
	seed = ch.csum;
	off = ch.nblocks;
	last = ch.buf + off * BNODE_BLOCK;
	memcpy(save, ch.buf, EXT);
	/* Another base gen, another extent, a repeated gen, a wrong k. */
	struct { uint64_t addr, bgen, gen; unsigned k; } cases[] = {
		{ ADDR, GEN0 + 1, ch.gen + 1, ch.k + 1 },
		{ ADDR + 16, GEN0, ch.gen + 1, ch.k + 1 },
		{ ADDR, GEN0, ch.gen, ch.k + 1 },
		{ ADDR, GEN0, ch.gen + 1, ch.k },
		{ ADDR, GEN0, ch.gen + 1, ch.k + 2 },
		{ ADDR, GEN0, ch.gen + 1, ch.k + 1 },	/* the good one, last */
	};
	for (unsigned c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		int pb = bpiece_encode(last, EXT - off * BNODE_BLOCK, model, keys, 2, cases[c].addr,
				       cases[c].bgen, cases[c].gen, cases[c].k, seed);

		assert_int_equal(pb, 1);
		bp = ptr(cases[c].gen, le64_get(last));
		assert_int_equal(bpiece_verify_chain(ch.buf, off + 1, &bp),
				 c + 1 == sizeof(cases) / sizeof(cases[0]) ? 0 : -EUCLEAN);
	}
	memcpy(save, ch.buf, EXT);
	/* Byte edits, re-checksummed: reserved bytes, a run's zero byte, no
	 * entries, a gap byte, an off past 56 bits, a value too long, two
	 * entries of a run swapped, the two keys in one run split in two. */
	static const struct { unsigned at; uint8_t val; } edits[] = {
		{ 43, 1 }, { 46, 1 }, { 47, 1 }, { 48 + 9, 1 }, { 44, 0 },
		{ 48 + 12 + 10 + 12 + 10, 1 }, { 48 + 12 + 7, 1 }, { 48 + 12 + 9, 0x10 },
	};
	for (unsigned e = 0; e < sizeof(edits) / sizeof(edits[0]); e++) {
		memcpy(ch.buf, save, EXT);
		last[edits[e].at] = edits[e].val;
		reseal(last, seed);
		bp = ptr(ch.gen + 1, le64_get(last));
		if (bpiece_verify_chain(ch.buf, off + 1, &bp) != -EUCLEAN)
			fail_msg("edit %u accepted", e);
	}
	/* Keys out of order: the two runs swapped. */
	memcpy(ch.buf, save, EXT);
	memcpy(last + 48, save + off * BNODE_BLOCK + 48 + 22, 22);
	memcpy(last + 48 + 22, save + off * BNODE_BLOCK + 48, 22);
	reseal(last, seed);
	bp = ptr(ch.gen + 1, le64_get(last));
	assert_int_equal(bpiece_verify_chain(ch.buf, off + 1, &bp), -EUCLEAN);
	/* pb 2 where 1 holds it: values moved to the end of block 2. */
	memcpy(ch.buf, save, EXT);
	memset(last + BNODE_BLOCK - 8, 0, 8);
	memcpy(last + 2 * BNODE_BLOCK - 8, save + off * BNODE_BLOCK + BNODE_BLOCK - 8, 8);
	last[42] = 2;
	reseal(last, seed);
	bp = ptr(ch.gen + 1, le64_get(last));
	assert_int_equal(bpiece_verify_chain(ch.buf, off + 2, &bp), -EUCLEAN);
	/* The untouched one still passes. */
	memcpy(ch.buf, save, EXT);
	bp = ptr(ch.gen + 1, le64_get(last));
	assert_int_equal(bpiece_verify_chain(ch.buf, off + 1, &bp), 0);
	free(model);
	free(prev);
	free(save);
	free(ch.buf);
}

/* Whiteouts remove; a whiteout of a key not there is refused; a merge that
 * no longer fits a node is refused. */
static void test_whiteout_overflow(void **state)
{
	uint8_t *model = zalloc(BNODE_SIZE), *dst = zalloc(BNODE_SIZE), *other = zalloc(BNODE_SIZE);
	struct chain ch = { .buf = zalloc(EXT) };
	struct bkey a = { 100, 1, 1 }, b = { 100, 1, 2 }, c = { 101, 2, 0 }, d = { 102, 1, 0 };
	struct bptr bp;

	(void)state;
	leaf_init(model);
	assert_true(leaf_set(model, &a, 4, 1) && leaf_set(model, &b, 5, 2) && leaf_set(model, &c, 6, 3));
	chain_start(&ch, model);
	leaf_del(model, &b);
	assert_int_equal(chain_add(&ch, model, &b, 1), 1);
	assert_int_equal(bpiece_merge(dst, ch.buf, ch.nblocks), 0);
	assert_int_equal(bnode_nritems(dst), 2);
	assert_same_items(dst, model);
	/* b again, and d that was never there: a whiteout of each. */
	assert_int_equal(chain_add(&ch, model, &b, 1), 1);
	bp = ptr(ch.gen, ch.csum);
	assert_int_equal(bpiece_verify_chain(ch.buf, ch.nblocks, &bp), -EUCLEAN);
	chain_start(&ch, model);
	assert_int_equal(chain_add(&ch, model, &d, 1), 1);
	assert_int_equal(bpiece_merge(dst, ch.buf, ch.nblocks), -EUCLEAN);

	/* A full base (4 values of BNODE_MAX_VAL) and a piece adding one more
	 * item, made from a leaf without the base's items. */
	leaf_init(model);
	for (unsigned i = 0; i < 4; i++) {
		struct bkey k = { 100, 1, 10 + i };

		assert_true(leaf_set(model, &k, BNODE_MAX_VAL, (int)i));
	}
	assert_int_equal(bnode_free(model), 0);
	chain_start(&ch, model);
	leaf_init(other);
	assert_true(leaf_set(other, &a, 0, 0));
	assert_int_equal(chain_add(&ch, other, &a, 1), 1);
	assert_int_equal(bpiece_merge(dst, ch.buf, ch.nblocks), -EUCLEAN);
	/* Replacing one of them by a value as long fits. */
	chain_start(&ch, model);
	struct bkey k2 = { 100, 1, 12 };

	assert_true(leaf_set(model, &k2, BNODE_MAX_VAL, 9));
	assert_int_equal(chain_add(&ch, model, &k2, 1), 2);
	assert_int_equal(bpiece_merge(dst, ch.buf, ch.nblocks), 0);
	assert_same_items(dst, model);
	free(model);
	free(dst);
	free(other);
	free(ch.buf);
}

/* -E2BIG past 15 blocks or the room given; -EINVAL for bad arguments. */
static void test_encode_limits(void **state)
{
	uint8_t *model = zalloc(BNODE_SIZE), *out = zalloc(EXT);
	struct bkey *keys = zalloc(7000 * sizeof(*keys));

	(void)state;
	leaf_init(model);
	for (unsigned i = 0; i < 7000; i++)
		keys[i] = (struct bkey){ 100, 1, i };
	/* 48 + 12 + 10 x n: 6,138 whiteouts fill 15 blocks exactly. */
	assert_int_equal(bpiece_encode(out, EXT, model, keys, 6138, ADDR, GEN0, GEN0 + 1, 1, 0), 15);
	assert_int_equal(bpiece_encode(out, EXT, model, keys, 6139, ADDR, GEN0, GEN0 + 1, 1, 0), -E2BIG);
	assert_int_equal(bpiece_encode(out, EXT, model, keys, 7000, ADDR, GEN0, GEN0 + 1, 1, 0), -E2BIG);
	assert_int_equal(bpiece_encode(out, EXT, model, keys, 403, ADDR, GEN0, GEN0 + 1, 1, 0), 1);
	assert_int_equal(bpiece_encode(out, EXT, model, keys, 404, ADDR, GEN0, GEN0 + 1, 1, 0), 2);
	assert_int_equal(bpiece_encode(out, BNODE_BLOCK, model, keys, 404, ADDR, GEN0, GEN0 + 1, 1, 0),
			 -E2BIG);
	assert_int_equal(bpiece_encode(out, EXT, model, keys, 0, ADDR, GEN0, GEN0 + 1, 1, 0), -EINVAL);
	assert_int_equal(bpiece_encode(out, EXT, model, keys, 2, ADDR, GEN0, GEN0, 1, 0), -EINVAL);
	assert_int_equal(bpiece_encode(out, EXT, model, keys, 2, ADDR, GEN0, GEN0 + 1, 0, 0), -EINVAL);
	assert_int_equal(bpiece_encode(out, EXT, model, keys, 2, 0, GEN0, GEN0 + 1, 1, 0), -EINVAL);
	keys[1] = keys[0];
	assert_int_equal(bpiece_encode(out, EXT, model, keys, 2, ADDR, GEN0, GEN0 + 1, 1, 0), -EINVAL);
	keys[1] = (struct bkey){ 104, 0, 0 };	/* past the leaf's max */
	assert_int_equal(bpiece_encode(out, EXT, model, keys, 2, ADDR, GEN0, GEN0 + 1, 1, 0), -EINVAL);
	keys[0] = (struct bkey){ 99, 255, 0 };	/* below its min */
	assert_int_equal(bpiece_encode(out, EXT, model, keys, 1, ADDR, GEN0, GEN0 + 1, 1, 0), -EINVAL);
	free(model);
	free(out);
	free(keys);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_flips),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_foreign),
		cmocka_unit_test(test_whiteout_overflow),
		cmocka_unit_test(test_encode_limits),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
