// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: fuzz the format-v2 leaf-piece chain decoder (lib/bpiece.c):
 * any bytes (up to the 16 blocks of a leaf extent, nblocks = the input's
 * blocks) either fail bpiece_load or give a leaf bnode_check accepts, that
 * verifies against the pointer the chain names and no other, and whose
 * every piece re-encodes (bpiece_encode from the merged state after it,
 * with the keys it holds) to the same bytes: one encoding per content.
 * The csums of the base and of each piece are fixed up first (chained, as
 * the header says) so the fuzzer gets past them; the raw input is fed too. */
#include <assert.h>
#include <stdbool.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "bpiece.h"
#include "csum.h"
#include "le.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define EXT (BPIECE_EXT_BLOCKS * BNODE_BLOCK)
#define MAXKEYS 6200			/* > 15 blocks / 10-byte entries */

static uint8_t buf[EXT], again[EXT];
static uint8_t dst[BNODE_SIZE], state[BNODE_SIZE];
static struct bkey keys[MAXKEYS];

/* Chain the csums as a writer would: base seeded with its address, each
 * piece with the csum before it, as far as the pb bytes make sense. */
static void fix_csums(unsigned nblocks)
{
	unsigned nb0 = bnode_nb(buf), off;
	uint64_t seed;

	if (!nb0 || nb0 > BNODE_BLOCKS || nb0 > nblocks)
		return;
	seed = csum_buf(buf + 8, nb0 * BNODE_BLOCK - 8, bnode_addr(buf));
	le64_put(buf, seed);
	for (off = nb0; off < nblocks;) {
		uint8_t *p = buf + off * BNODE_BLOCK;
		unsigned pb = p[42];

		if (!pb || pb > BPIECE_MAX_BLOCKS || off + pb > nblocks)
			return;
		seed = csum_buf(p + 8, pb * BNODE_BLOCK - 8, seed);
		le64_put(p, seed);
		off += pb;
	}
}

/* Every piece re-encodes from the state after it (the chain loaded up to
 * its end) with its own keys. */
static void reencode(unsigned nb0, unsigned nblocks)
{
	struct bpiece_chain before = { 0 }, after;
	unsigned k = 1;

	assert(bpiece_load(state, buf, nb0, NULL, &before, NULL, 0) == 0);
	for (unsigned off = nb0; off < nblocks; off += buf[off * BNODE_BLOCK + 42], k++) {
		const uint8_t *p = buf + off * BNODE_BLOCK;
		unsigned pb = p[42];
		int n, r;

		assert(bpiece_load(state, buf, off + pb, NULL, &after, NULL, 0) == 0);
		assert(after.npieces == k);
		n = bpiece_keys(buf, off + pb, k, keys, MAXKEYS);
		assert(n > 0);
		r = bpiece_encode(again, EXT, state, keys, (unsigned)n, after.addr, after.base_gen,
				  after.gen, k, before.csum);
		assert(r == (int)pb);
		assert(memcmp(again, p, pb * BNODE_BLOCK) == 0);
		before = after;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned nblocks = size ? (unsigned)((size + BNODE_BLOCK - 1) / BNODE_BLOCK) : 1;
	struct bpiece_chain c;
	struct bptr p;

	if (nblocks > BPIECE_EXT_BLOCKS)
		nblocks = BPIECE_EXT_BLOCKS;
	memset(buf, 0, sizeof(buf));
	if (size)	/* libFuzzer passes the empty input as NULL */
		memcpy(buf, data, size < sizeof(buf) ? size : sizeof(buf));
	(void)bpiece_merge(dst, buf, nblocks);	/* raw: must not crash either */
	fix_csums(nblocks);
	if (bpiece_load(dst, buf, nblocks, NULL, &c, NULL, 0)) {
		p = (struct bptr){ bnode_addr(buf), bnode_gen(buf), le64_get(buf), 0 };
		assert(bpiece_verify_chain(buf, nblocks, &p) == -EUCLEAN);
		return 0;
	}
	assert(bnode_check(dst, NULL, 0) == 0);
	assert(c.nb0 >= 1 && c.nb0 <= nblocks && (!c.npieces || !bnode_level(dst)));
	p = (struct bptr){ c.addr, c.gen, c.csum, nblocks };
	assert(bpiece_verify_chain(buf, nblocks, &p) == 0);
	assert(bpiece_merge(state, buf, nblocks) == 0 && !memcmp(state, dst, BNODE_SIZE));
	p.gen++;
	assert(bpiece_verify_chain(buf, nblocks, &p) == -EUCLEAN);
	p.gen--;
	p.csum ^= 1;
	assert(bpiece_verify_chain(buf, nblocks, &p) == -EUCLEAN);
	p.csum ^= 1;
	p.addr ^= 16;	/* the same bytes elsewhere never verify */
	assert(bpiece_verify_chain(buf, nblocks, &p) == -EUCLEAN);
	reencode(c.nb0, nblocks);
	return 0;
}

/* Set key (id, type, off) of leaf @n to @len bytes of @fill; len < 0
 * removes it. */
static void set(uint8_t *n, uint64_t id, uint8_t type, uint64_t off, int len, int fill)
{
	struct bkey k = { id, type, off };
	uint8_t v[BNODE_MAX_VAL];
	unsigned idx;

	if (bnode_search(n, &k, &idx))
		bnode_leaf_delete(n, idx);
	if (len < 0)
		return;
	memset(v, fill, (size_t)len);
	bnode_leaf_insert(n, idx, &k, v, (unsigned)len);
}

/* Append a piece for @ks of @n to the chain in @out of *nb blocks. */
static bool add_piece(uint8_t *out, unsigned *nb, const uint8_t *n, const struct bkey *ks,
		      unsigned nk, unsigned k, uint64_t *csum)
{
	int pb = bpiece_encode(out + *nb * BNODE_BLOCK, EXT - *nb * BNODE_BLOCK, n, ks, nk,
			       bnode_addr(n), bnode_gen(n), bnode_gen(n) + 2 * k, k, *csum);

	if (pb < 1)
		return false;
	*csum = le64_get(out + *nb * BNODE_BLOCK);
	*nb += (unsigned)pb;
	return true;
}

void fuzz_make_seeds(void (*emit)(const void *p, size_t len));
void fuzz_make_seeds(void (*emit)(const void *p, size_t len))
{
	static const uint8_t uuid[16] = { 0xde, 0xad, 0xbe, 0xef };
	static const struct {
		unsigned piece;
		uint64_t id;
		uint8_t type;
		uint64_t off;
		int len;		/* -1: removed */
	} changes[] = {
		{ 1, 256, 3, 8, 24 }, { 1, 256, 3, 9, 20 }, { 1, 256, 3, 10, 16 }, { 1, 257, 3, 40, -1 },
		{ 2, 256, 3, 0, -1 }, { 2, 256, 4, 0, 8 },  { 2, 258, 1, 0, 3000 },
	};
	static uint8_t n[BNODE_SIZE], out[EXT];
	struct bkey ks[8];
	unsigned nb = 0;
	uint64_t csum;

	/* A base of extent-like items over three inodes, alone. */
	bnode_init(n, 0, 4096, 3, 1, uuid);
	for (unsigned i = 0; i < 60; i++)
		set(n, 256 + i / 20, 3, i % 20 * 8, 20 + i % 3 * 4, (int)i);
	csum = bnode_seal_short(n);
	nb = bnode_fold(n, out);
	emit(out, nb * BNODE_BLOCK);
	/* Piece 1: a 4k overwrite (head, written, tail) and a whiteout; piece
	 * 2: new keys in another type, a value of most of a block. */
	for (unsigned k = 1; k <= 2; k++) {
		unsigned nk = 0;

		for (unsigned c = 0; c < sizeof(changes) / sizeof(changes[0]); c++) {
			if (changes[c].piece != k)
				continue;
			ks[nk] = (struct bkey){ changes[c].id, changes[c].type, changes[c].off };
			set(n, ks[nk].id, ks[nk].type, ks[nk].off, changes[c].len, (int)(c + 1));
			nk++;
		}
		if (!add_piece(out, &nb, n, ks, nk, k, &csum))
			return;
		emit(out, nb * BNODE_BLOCK);
	}
	/* A base of 4 blocks and 1-block pieces to the extent's 16 blocks. */
	bnode_init(n, 0, 8192, 7, 1, uuid);
	for (unsigned i = 0; i < 120; i++)
		set(n, 300 + i / 40, 3, i % 40, 100, (int)i);
	csum = bnode_seal_short(n);
	nb = bnode_fold(n, out);
	for (unsigned k = 1; nb < BPIECE_EXT_BLOCKS; k++) {
		for (unsigned j = 0; j < 3; j++) {
			ks[j] = (struct bkey){ 300 + j, 3, k };
			set(n, 300 + j, 3, k, (int)(40 + k), (int)(k * 3 + j));
		}
		if (!add_piece(out, &nb, n, ks, 3, k, &csum))
			return;
	}
	emit(out, nb * BNODE_BLOCK);
}
