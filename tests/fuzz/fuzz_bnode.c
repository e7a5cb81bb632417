// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: fuzz the format-v2 B+tree node decoder: any bytes either fail
 * bnode_check or decode to a node whose every accessor stays inside the
 * buffer, that re-encodes to the same bytes, and that the mutators keep
 * valid; never a crash.  The csum is fixed up first (for the address the
 * header names) so the fuzzer gets past it; the raw input is checked too.
 * An input whose header has nb 1..4 is a short node's folded image (format
 * v2 with SUPER_INCOMPAT_V2_SHORT_NODES): verified over its nb blocks,
 * unfolded, then the same; it re-encodes (bnode_seal_short) to the same
 * nb and csum. */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "bnode.h"
#include "csum.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t node[BNODE_SIZE], again[BNODE_SIZE], work[BNODE_SIZE];

/* Rebuild the node from its decoded items: it must come out byte for byte. */
static void reencode(void)
{
	struct bnode_hdr h;
	unsigned nr = bnode_nritems(node);

	bnode_hdr(node, &h);
	bnode_init(again, h.level, h.addr, h.gen, h.owner, h.fs_uuid);
	bnode_set_min(again, &h.min);
	bnode_set_max(again, &h.max);
	for (unsigned i = 0; i < nr; i++) {
		struct bkey k;

		bnode_key(node, i, &k);
		if (h.level) {
			struct bptr p;

			bnode_ptr(node, i, &p);
			assert(p.addr && p.gen && p.gen <= h.gen);
			bnode_ptr_insert(again, i, &k, &p);
		} else {
			unsigned len;
			const uint8_t *v = bnode_val(node, i, &len);

			assert(len <= BNODE_MAX_VAL);
			assert(v >= node + BNODE_HDR + nr * BNODE_ITEM && v + len <= node + BNODE_SIZE);
			assert(bnode_free(again) >= BNODE_ITEM + len);
			bnode_leaf_insert(again, i, &k, v, len);
		}
	}
	bnode_seal_fmt(again, bnode_nb(node) != 0);
	assert(memcmp(again, node, BNODE_SIZE) == 0);
}

/* A copy of the node to change: a node of a new transaction (nb 0). */
static void take_work(void)
{
	memcpy(work, node, BNODE_SIZE);
	bnode_set_addr_gen(work, bnode_addr(node), bnode_gen(node));
}

/* An internal node whose first pointer went: its min moves up (as a
 * rebalance moves it). */
static void fix_min(void *n)
{
	struct bkey k;

	if (!bnode_level(n))
		return;
	bnode_key(n, 0, &k);
	bnode_set_min(n, &k);
}

/* Search finds every key; the mutators leave a valid node. */
static void mutate(void)
{
	unsigned nr = bnode_nritems(node), idx;
	struct bkey k;

	for (unsigned i = 0; i < nr; i++) {
		bnode_key(node, i, &k);
		assert(bnode_search(node, &k, &idx) && idx == i);
	}
	struct bnode_hdr h;

	bnode_hdr(node, &h);
	k = h.max;
	assert(bnode_check_range(node, &h.min, bkey_succ(&k) ? &k : NULL, NULL, 0) == 0);
	if (!nr)
		return;
	take_work();
	if (bnode_level(work))
		bnode_ptr_delete(work, nr / 2);
	else
		bnode_leaf_delete(work, nr / 2);
	/* (an internal node without pointers is invalid by design) */
	if (nr > 1 || !bnode_level(work)) {
		fix_min(work);
		assert(bnode_check(work, NULL, 0) == 0);
	}
	take_work();
	bnode_drop_front(work, nr / 2);
	fix_min(work);
	assert(bnode_check(work, NULL, 0) == 0 && bnode_nritems(work) == nr - nr / 2);
	assert(bnode_used(work) == bnode_used(node) - bnode_span_bytes(node, 0, nr / 2));
	take_work();
	bnode_truncate(work, (nr + 1) / 2);
	assert(bnode_check(work, NULL, 0) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct bptr p;

	memset(node, 0, sizeof(node));
	if (size)	/* libFuzzer passes the empty input as NULL */
		memcpy(node, data, size < sizeof(node) ? size : sizeof(node));
	(void)bnode_check(node, NULL, 0);	/* raw: must not crash either */
	p.addr = bnode_addr(node);
	p.gen = bnode_gen(node);
	if (bnode_nb(node) >= 1 && bnode_nb(node) <= BNODE_BLOCKS) {
		unsigned nb = bnode_nb(node);

		p.csum = csum_buf(node + 8, nb * 4096 - 8, p.addr);
		for (unsigned b = 0; b < 8; b++)
			node[b] = (uint8_t)(p.csum >> (8 * b));
		assert(!bnode_copy_matches(node, &p, false));
		if (!bnode_copy_matches(node, &p, true))
			return 0;
		bnode_unfold(node);
		assert(bnode_matches(node, &p));	/* folded on the fly */
	} else {
		p.csum = bnode_seal(node);
		assert(bnode_matches(node, &p));
		assert(bnode_copy_matches(node, &p, false) && !bnode_copy_matches(node, &p, true));
	}
	p.addr ^= 4;	/* the same bytes elsewhere never verify */
	assert(!bnode_matches(node, &p));
	if (bnode_check(node, NULL, 0))
		return 0;
	assert(bnode_used(node) + bnode_free(node) == BNODE_USABLE);
	reencode();
	mutate();
	return 0;
}

void fuzz_make_seeds(void (*emit)(const void *p, size_t len));
void fuzz_make_seeds(void (*emit)(const void *p, size_t len))
{
	static const uint8_t uuid[16] = { 0xde, 0xad, 0xbe, 0xef };
	static uint8_t n[BNODE_SIZE], folded[BNODE_SIZE];
	uint8_t v[300];

	memset(v, 0x5a, sizeof(v));
	bnode_init(n, 0, 1024, 3, 2, uuid);
	bnode_seal(n);
	emit(n, sizeof(n));
	/* A leaf: inodes, dirents by hash, extents with csums. */
	for (unsigned i = 0; i < 40; i++) {
		struct bkey k = { 256 + i / 4, (uint8_t)(1 + i % 4), i * 4096ull };

		bnode_leaf_insert(n, i, &k, v, (i * 37) % sizeof(v));
	}
	bnode_seal(n);
	emit(n, sizeof(n));
	/* An internal node. */
	bnode_init(n, 2, 4096, 9, 2, uuid);
	for (unsigned i = 0; i < 30; i++) {
		struct bkey k = { i * 1000ull, i ? 1 : 0, 0 };	/* key 0: the min */
		struct bptr p = { 8192 + i * BNODE_BLOCKS, 1 + i % 9, 0x1234567ull * i, 0 };

		bnode_ptr_insert(n, i, &k, &p);
	}
	bnode_seal(n);
	emit(n, sizeof(n));
	/* The same two as short nodes, folded as on disk. */
	bnode_seal_short(n);
	emit(folded, bnode_fold(n, folded) * 4096u);
	bnode_init(n, 0, 1024, 3, 2, uuid);
	for (unsigned i = 0; i < 25; i++) {
		struct bkey k = { 256 + i, 1, 0 };

		bnode_leaf_insert(n, i, &k, v, (i * 53) % sizeof(v));
	}
	bnode_seal_short(n);
	emit(folded, bnode_fold(n, folded) * 4096u);
}
