// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * bnode: node codec of the format-v2 B+trees (see bnode.h and
 * docs/FORMAT.md).  Works on the raw node bytes in place: the node cache
 * holds what is on disk, a lookup decodes only the keys it compares, and a
 * node written is the buffer as it is (plus its csum).
 *
 * Header (96 bytes): 0 csum, 8 magic, 16 addr, 24 gen, 32 fs_uuid, 48 owner,
 * 56 level u8, 57 reserved u8, 58 nritems u16, 60 nb u8 (short nodes, below),
 * 61 reserved (3 bytes), 64 min key, 80 max key (inclusive).
 *
 * Short nodes (format v2 with SUPER_INCOMPAT_V2_SHORT_NODES): on disk a
 * node is folded into nb blocks, the fewest that hold its front part
 * (header and item heads or pointers) and its values, the values moved
 * from the end of the node to end at nb * 4096, zeros between.  The value
 * offsets in the heads stay in memory coordinates: folding and unfolding
 * move the value block by a fixed delta.  nb (1..4) is in the header and
 * the csum covers bytes 8 .. nb * 4096 - 1 of the folded image; nb 0 is a
 * whole node (the format without the bit), csum over all of it.  In memory
 * a node is always unfolded; nb is what its seal wrote (0 on a node of this
 * transaction, bnode_set_addr_gen clears it).
 */
#include <endian.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bnode.h"
#include "csum.h"
#include "le.h"

#define H_CSUM 0
#define H_MAGIC 8
#define H_ADDR 16
#define H_GEN 24
#define H_UUID 32
#define H_OWNER 48
#define H_LEVEL 56
#define H_RSV1 57
#define H_NR 58
#define H_NB 60
#define H_RSV2 61			/* 3 bytes */
#define H_MIN 64
#define H_MAX 80
#define BPTR_NB_SHIFT 48		/* a pointer's nblocks in its child address */

const struct bkey bkey_min = { 0, 0, 0 };
const struct bkey bkey_max = { UINT64_MAX, 255, BKEY_OFF_MAX };

/* Keys are decoded on every comparison of a search: one load each, not
 * le.h's byte loop (which compilers do not always fold). */
static inline uint64_t ld64(const void *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return le64toh(v);
}

int bkey_cmp(const struct bkey *a, const struct bkey *b)
{
	if (a->id != b->id)
		return a->id < b->id ? -1 : 1;
	if (a->type != b->type)
		return a->type < b->type ? -1 : 1;
	if (a->off != b->off)
		return a->off < b->off ? -1 : 1;
	return 0;
}

bool bkey_succ(struct bkey *k)
{
	if (k->off < BKEY_OFF_MAX) {
		k->off++;
		return true;
	}
	k->off = 0;
	if (k->type < 255) {
		k->type++;
		return true;
	}
	k->type = 0;
	if (k->id < UINT64_MAX) {
		k->id++;
		return true;
	}
	*k = bkey_max;
	return false;
}

bool bkey_pred(struct bkey *k)
{
	if (k->off) {
		k->off--;
		return true;
	}
	k->off = BKEY_OFF_MAX;
	if (k->type) {
		k->type--;
		return true;
	}
	k->type = 255;
	if (k->id) {
		k->id--;
		return true;
	}
	*k = bkey_min;
	return false;
}

static void key_get(const uint8_t *p, struct bkey *k)
{
	uint64_t w = ld64(p + 8);

	k->id = ld64(p);
	k->type = (uint8_t)(w >> 56);
	k->off = w & BKEY_OFF_MAX;
}

static void key_put(uint8_t *p, const struct bkey *k)
{
	le64_put(p, k->id);
	le64_put(p + 8, (uint64_t)k->type << 56 | (k->off & BKEY_OFF_MAX));
}

/* ---- header ---- */

unsigned bnode_level(const void *n)
{
	return ((const uint8_t *)n)[H_LEVEL];
}

unsigned bnode_nritems(const void *n)
{
	return le16_get((const uint8_t *)n + H_NR);
}

static void set_nr(void *n, unsigned nr)
{
	le16_put((uint8_t *)n + H_NR, nr);
}

uint64_t bnode_gen(const void *n)
{
	return le64_get((const uint8_t *)n + H_GEN);
}

uint64_t bnode_addr(const void *n)
{
	return le64_get((const uint8_t *)n + H_ADDR);
}

uint64_t bnode_stored_csum(const void *n)
{
	return le64_get((const uint8_t *)n + H_CSUM);
}

void bnode_hdr(const void *n, struct bnode_hdr *h)
{
	const uint8_t *b = n;

	h->csum = le64_get(b + H_CSUM);
	h->addr = le64_get(b + H_ADDR);
	h->gen = le64_get(b + H_GEN);
	h->owner = le64_get(b + H_OWNER);
	memcpy(h->fs_uuid, b + H_UUID, 16);
	h->level = b[H_LEVEL];
	h->nritems = bnode_nritems(n);
	key_get(b + H_MIN, &h->min);
	key_get(b + H_MAX, &h->max);
}

void bnode_set_min(void *n, const struct bkey *min)
{
	key_put((uint8_t *)n + H_MIN, min);
}

void bnode_set_max(void *n, const struct bkey *max)
{
	key_put((uint8_t *)n + H_MAX, max);
}

void bnode_set_range(void *n, const struct bkey *min, const struct bkey *hi)
{
	struct bkey max = bkey_max;

	if (hi) {
		max = *hi;
		bkey_pred(&max);
	}
	key_put((uint8_t *)n + H_MIN, min);
	key_put((uint8_t *)n + H_MAX, &max);
}

void bnode_init(void *n, unsigned level, uint64_t addr, uint64_t gen, uint64_t owner,
		const uint8_t fs_uuid[16])
{
	uint8_t *b = n;

	memset(b, 0, BNODE_SIZE);
	memcpy(b + H_MAGIC, BNODE_MAGIC, 8);
	le64_put(b + H_ADDR, addr);
	le64_put(b + H_GEN, gen);
	memcpy(b + H_UUID, fs_uuid, 16);
	le64_put(b + H_OWNER, owner);
	b[H_LEVEL] = (uint8_t)level;
	key_put(b + H_MIN, &bkey_min);
	key_put(b + H_MAX, &bkey_max);
}

void bnode_set_addr_gen(void *n, uint64_t addr, uint64_t gen)
{
	le64_put((uint8_t *)n + H_ADDR, addr);
	le64_put((uint8_t *)n + H_GEN, gen);
	le64_put((uint8_t *)n + H_CSUM, 0);
	((uint8_t *)n)[H_NB] = 0;
}

unsigned bnode_nb(const void *n)
{
	return ((const uint8_t *)n)[H_NB];
}

uint64_t bnode_csum(const void *n, uint64_t addr)
{
	/* One folded image per thread: a node's csum is taken (seal, and
	 * bnode_matches on a cached node) without an allocation. */
	static __thread uint8_t img[BNODE_SIZE] __attribute__((aligned(64)));
	unsigned nb = bnode_nb(n);

	if (nb && bnode_fold(n, img) == nb)
		return csum_buf(img + H_MAGIC, nb * BNODE_BLOCK - H_MAGIC, addr);
	return csum_buf((const uint8_t *)n + H_MAGIC, BNODE_SIZE - H_MAGIC, addr);
}

static uint64_t seal_nb(void *n, unsigned nb)
{
	uint64_t c;

	((uint8_t *)n)[H_NB] = (uint8_t)nb;
	c = bnode_csum(n, bnode_addr(n));
	le64_put((uint8_t *)n + H_CSUM, c);
	return c;
}

uint64_t bnode_seal(void *n)
{
	return seal_nb(n, 0);
}

uint64_t bnode_seal_short(void *n)
{
	return seal_nb(n, bnode_fold_blocks(n));
}

uint64_t bnode_seal_fmt(void *n, bool short_nodes)
{
	return short_nodes ? bnode_seal_short(n) : bnode_seal(n);
}

bool bnode_matches(const void *n, const struct bptr *p)
{
	const uint8_t *b = n;

	return le64_get(b + H_CSUM) == p->csum && le64_get(b + H_ADDR) == p->addr &&
	       le64_get(b + H_GEN) == p->gen && bnode_csum(n, p->addr) == p->csum;
}

/* ---- items ---- */

static uint8_t *item(const void *n, unsigned i, unsigned sz)
{
	return (uint8_t *)n + BNODE_HDR + (size_t)i * sz;
}

static unsigned isz(const void *n)
{
	return bnode_level(n) ? BNODE_PTR : BNODE_ITEM;
}

void bnode_key(const void *n, unsigned i, struct bkey *k)
{
	key_get(item(n, i, isz(n)), k);
}

static unsigned voff(const void *n, unsigned i)
{
	return le16_get(item(n, i, BNODE_ITEM) + 16);
}

static unsigned vlen(const void *n, unsigned i)
{
	return le16_get(item(n, i, BNODE_ITEM) + 18);
}

/* Lowest byte of the value area (BNODE_SIZE when empty). */
static unsigned vbottom(const void *n)
{
	unsigned nr = bnode_nritems(n);

	return nr ? voff(n, nr - 1) : BNODE_SIZE;
}

/* End of item i's value: the start of item i-1's. */
static unsigned vend(const void *n, unsigned i)
{
	return i ? voff(n, i - 1) : BNODE_SIZE;
}

/* ---- short nodes: fold and unfold ---- */

/* Front part (header and heads or pointers) and value bytes of a node in
 * memory coordinates; false when they do not fit in a node at all. */
static bool fold_parts(const void *n, unsigned *front, unsigned *vbytes)
{
	unsigned nr = bnode_nritems(n), bot;

	if (bnode_level(n)) {
		*vbytes = 0;
		*front = BNODE_HDR + nr * BNODE_PTR;
		return nr <= BNODE_MAX_PTRS;
	}
	if (nr > BNODE_USABLE / BNODE_ITEM)
		return false;
	*front = BNODE_HDR + nr * BNODE_ITEM;
	bot = vbottom(n);
	if (bot > BNODE_SIZE)
		return false;
	*vbytes = BNODE_SIZE - bot;
	return *front + *vbytes <= BNODE_SIZE;
}

static unsigned blocks_for(unsigned bytes)
{
	unsigned nb = (bytes + BNODE_BLOCK - 1) / BNODE_BLOCK;

	return nb ? nb : 1;
}

unsigned bnode_fold_blocks(const void *n)
{
	unsigned front, vbytes;

	if (!fold_parts(n, &front, &vbytes))
		return BNODE_BLOCKS;
	return blocks_for(front + vbytes);
}

unsigned bnode_fold(const void *n, void *out)
{
	const uint8_t *b = n;
	uint8_t *o = out;
	unsigned nb = bnode_nb(n), front, vbytes, end;

	if (!nb) {
		memcpy(out, n, BNODE_SIZE);
		return BNODE_BLOCKS;
	}
	if (nb > BNODE_BLOCKS || !fold_parts(n, &front, &vbytes) ||
	    front + vbytes > nb * BNODE_BLOCK)
		return 0;
	end = nb * BNODE_BLOCK;
	memcpy(o, b, front);
	memset(o + front, 0, end - vbytes - front);
	memcpy(o + end - vbytes, b + BNODE_SIZE - vbytes, vbytes);
	memset(o + end, 0, BNODE_SIZE - end);
	return nb;
}

/* A folded copy's layout: nb minimal for what it holds, zeros between its
 * parts.  The items themselves are bnode_check's, once unfolded. */
static bool folded_sound(const uint8_t *b, unsigned nb)
{
	unsigned front, vbytes;

	if (!fold_parts(b, &front, &vbytes) || front + vbytes > nb * BNODE_BLOCK ||
	    blocks_for(front + vbytes) != nb)
		return false;
	for (unsigned i = front; i < nb * BNODE_BLOCK - vbytes; i++)
		if (b[i])
			return false;
	return true;
}

bool bnode_copy_matches(const void *buf, const struct bptr *p, bool short_nodes)
{
	const uint8_t *b = buf;
	unsigned nb = b[H_NB];

	if (!short_nodes)
		return !nb && bnode_matches(buf, p);
	if (!nb || nb > BNODE_BLOCKS)
		return false;
	return le64_get(b + H_CSUM) == p->csum && le64_get(b + H_ADDR) == p->addr &&
	       le64_get(b + H_GEN) == p->gen &&
	       csum_buf(b + H_MAGIC, nb * BNODE_BLOCK - H_MAGIC, p->addr) == p->csum &&
	       folded_sound(b, nb);
}

void bnode_unfold(void *buf)
{
	uint8_t *b = buf;
	unsigned nb = b[H_NB], front, vbytes, end = nb * BNODE_BLOCK;

	if (!nb || nb > BNODE_BLOCKS || !fold_parts(b, &front, &vbytes) || front + vbytes > end)
		return;
	memmove(b + BNODE_SIZE - vbytes, b + end - vbytes, vbytes);
	memset(b + front, 0, BNODE_SIZE - vbytes - front);
}

unsigned bnode_used(const void *n)
{
	unsigned nr = bnode_nritems(n);

	if (bnode_level(n))
		return nr * BNODE_PTR;
	return nr * BNODE_ITEM + (BNODE_SIZE - vbottom(n));
}

unsigned bnode_free(const void *n)
{
	return BNODE_USABLE - bnode_used(n);
}

unsigned bnode_span_bytes(const void *n, unsigned from, unsigned to)
{
	if (from >= to)
		return 0;
	if (bnode_level(n))
		return (to - from) * BNODE_PTR;
	return (to - from) * BNODE_ITEM + vend(n, from) - voff(n, to - 1);
}

bool bnode_search(const void *n, const struct bkey *k, unsigned *idx)
{
	unsigned lo = 0, hi = bnode_nritems(n), sz = isz(n);

	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;
		struct bkey m;
		int c;

		key_get(item(n, mid, sz), &m);
		c = bkey_cmp(&m, k);
		if (c == 0) {
			*idx = mid;
			return true;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*idx = lo;
	return false;
}

const void *bnode_val(const void *n, unsigned i, unsigned *len)
{
	*len = vlen(n, i);
	return (const uint8_t *)n + voff(n, i);
}

void bnode_leaf_insert(void *n, unsigned i, const struct bkey *k, const void *val,
		       unsigned len)
{
	uint8_t *b = n;
	unsigned nr = bnode_nritems(n), bot = vbottom(n), end = vend(n, i);

	/* Values of items i.. move down by len; their heads right by one. */
	memmove(b + bot - len, b + bot, end - bot);
	memmove(item(n, i + 1, BNODE_ITEM), item(n, i, BNODE_ITEM), (nr - i) * BNODE_ITEM);
	for (unsigned j = i + 1; j <= nr; j++)
		le16_put(item(n, j, BNODE_ITEM) + 16, voff(n, j) - len);
	key_put(item(n, i, BNODE_ITEM), k);
	le16_put(item(n, i, BNODE_ITEM) + 16, end - len);
	le16_put(item(n, i, BNODE_ITEM) + 18, len);
	if (len)
		memcpy(b + end - len, val, len);
	set_nr(n, nr + 1);
}

void bnode_leaf_delete(void *n, unsigned i)
{
	uint8_t *b = n;
	unsigned nr = bnode_nritems(n), bot = vbottom(n), len = vlen(n, i);
	unsigned start = voff(n, i);

	memmove(b + bot + len, b + bot, start - bot);
	memset(b + bot, 0, len);
	memmove(item(n, i, BNODE_ITEM), item(n, i + 1, BNODE_ITEM), (nr - i - 1) * BNODE_ITEM);
	memset(item(n, nr - 1, BNODE_ITEM), 0, BNODE_ITEM);
	for (unsigned j = i; j + 1 < nr; j++)
		le16_put(item(n, j, BNODE_ITEM) + 16, voff(n, j) + len);
	set_nr(n, nr - 1);
}

void bnode_ptr(const void *n, unsigned i, struct bptr *p)
{
	const uint8_t *e = item(n, i, BNODE_PTR);
	uint64_t a = le64_get(e + 16);

	p->addr = a & ~(0xFFull << BPTR_NB_SHIFT);
	p->nblocks = (unsigned)(a >> BPTR_NB_SHIFT) & 0xFF;
	p->gen = le64_get(e + 24);
	p->csum = le64_get(e + 32);
}

void bnode_set_ptr(void *n, unsigned i, const struct bptr *p)
{
	uint8_t *e = item(n, i, BNODE_PTR);

	le64_put(e + 16, p->addr | (uint64_t)(p->nblocks & 0xFF) << BPTR_NB_SHIFT);
	le64_put(e + 24, p->gen);
	le64_put(e + 32, p->csum);
}

void bnode_set_key(void *n, unsigned i, const struct bkey *k)
{
	key_put(item(n, i, BNODE_PTR), k);
}

void bnode_ptr_insert(void *n, unsigned i, const struct bkey *k, const struct bptr *p)
{
	unsigned nr = bnode_nritems(n);

	memmove(item(n, i + 1, BNODE_PTR), item(n, i, BNODE_PTR), (nr - i) * BNODE_PTR);
	key_put(item(n, i, BNODE_PTR), k);
	bnode_set_ptr(n, i, p);
	set_nr(n, nr + 1);
}

void bnode_ptr_delete(void *n, unsigned i)
{
	unsigned nr = bnode_nritems(n);

	memmove(item(n, i, BNODE_PTR), item(n, i + 1, BNODE_PTR), (nr - i - 1) * BNODE_PTR);
	memset(item(n, nr - 1, BNODE_PTR), 0, BNODE_PTR);
	set_nr(n, nr - 1);
}

/* ---- moving items ---- */

void bnode_append(void *dst, const void *src, unsigned from, unsigned to)
{
	unsigned nr = bnode_nritems(dst);

	if (bnode_level(dst)) {
		memcpy(item(dst, nr, BNODE_PTR), item(src, from, BNODE_PTR),
		       (to - from) * BNODE_PTR);
		set_nr(dst, nr + to - from);
		return;
	}
	for (unsigned i = from; i < to; i++) {
		unsigned len;
		const void *v = bnode_val(src, i, &len);
		struct bkey k;

		bnode_key(src, i, &k);
		bnode_leaf_insert(dst, nr++, &k, v, len);
	}
}

void bnode_truncate(void *n, unsigned k)
{
	uint8_t *b = n;
	unsigned nr = bnode_nritems(n);

	if (k >= nr)
		return;
	if (!bnode_level(n)) {
		unsigned bot = vbottom(n), keep = vend(n, k);

		memset(b + bot, 0, keep - bot);
	}
	memset(item(n, k, isz(n)), 0, (size_t)(nr - k) * isz(n));
	set_nr(n, k);
}

void bnode_drop_front(void *n, unsigned k)
{
	uint8_t *b = n;
	unsigned nr = bnode_nritems(n), sz = isz(n);

	if (!k)
		return;
	if (k >= nr) {
		bnode_truncate(n, 0);
		return;
	}
	if (!bnode_level(n)) {
		/* Values of the dropped items sit at the top: slide the rest up. */
		unsigned bot = vbottom(n), cut = voff(n, k - 1), gap = BNODE_SIZE - cut;

		memmove(b + bot + gap, b + bot, cut - bot);
		memset(b + bot, 0, gap);
		for (unsigned j = k; j < nr; j++)
			le16_put(item(n, j, BNODE_ITEM) + 16, voff(n, j) + gap);
	}
	memmove(item(n, 0, sz), item(n, k, sz), (size_t)(nr - k) * sz);
	memset(item(n, nr - k, sz), 0, (size_t)k * sz);
	set_nr(n, nr - k);
}

/* ---- strict check ---- */

int bnode_bad(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	if (why && whylen) {
		va_start(ap, fmt);
		vsnprintf(why, whylen, fmt, ap);
		va_end(ap);
	}
	return -EUCLEAN;
}

/* Every byte of a node's free space: one memcmp against zeros (a byte loop
 * cost ~10 us per read of a small node, more than the rest of the check). */
static bool zero(const uint8_t *p, size_t len)
{
	static const uint8_t zeros[BNODE_SIZE];

	return len <= sizeof(zeros) ? !memcmp(p, zeros, len) : false;
}

static int check_leaf(const void *n, unsigned nr, char *why, size_t whylen)
{
	const uint8_t *b = n;
	unsigned heads = BNODE_HDR + nr * BNODE_ITEM, end = BNODE_SIZE;

	if (nr > BNODE_USABLE / BNODE_ITEM)
		return bnode_bad(why, whylen, "leaf with %u items", nr);
	for (unsigned i = 0; i < nr; i++) {
		unsigned off = voff(n, i), len = vlen(n, i);

		/* Packed from the end, no gap, never into the heads. */
		if (len > BNODE_MAX_VAL || len > end || off != end - len || off < heads)
			return bnode_bad(why, whylen, "item %u: value at %u, %u bytes", i, off,
					 len);
		end = off;
	}
	if (!zero(b + heads, end - heads))
		return bnode_bad(why, whylen, "nonzero free space");
	return 0;
}

static int check_internal(const void *n, unsigned nr, char *why, size_t whylen)
{
	const uint8_t *b = n;
	uint64_t gen = bnode_gen(n);

	if (!nr || nr > BNODE_MAX_PTRS)
		return bnode_bad(why, whylen, "internal node with %u pointers", nr);
	for (unsigned i = 0; i < nr; i++) {
		struct bptr p;

		bnode_ptr(n, i, &p);
		/* A child is never younger than its parent. */
		if (!p.addr || !p.gen || p.gen > gen)
			return bnode_bad(why, whylen, "pointer %u: addr %llu gen %llu", i,
					 (unsigned long long)p.addr, (unsigned long long)p.gen);
	}
	if (!zero(b + BNODE_HDR + nr * BNODE_PTR, BNODE_USABLE - nr * BNODE_PTR))
		return bnode_bad(why, whylen, "nonzero free space");
	return 0;
}

/* Keys inside [min, max]; an internal node's key 0 is its min. */
static int check_own_range(const void *n, unsigned nr, unsigned sz, char *why, size_t whylen)
{
	const uint8_t *b = n;
	struct bkey min, max, first, last;

	key_get(b + H_MIN, &min);
	key_get(b + H_MAX, &max);
	if (bkey_cmp(&min, &max) > 0)
		return bnode_bad(why, whylen, "empty key range");
	if (!nr)
		return 0;
	key_get(item(n, 0, sz), &first);
	key_get(item(n, nr - 1, sz), &last);
	if (bkey_cmp(&first, &min) < 0 || bkey_cmp(&last, &max) > 0)
		return bnode_bad(why, whylen, "keys outside the node's range");
	if (bnode_level(n) && bkey_cmp(&first, &min))
		return bnode_bad(why, whylen, "first pointer key is not the node's min");
	return 0;
}

int bnode_check(const void *n, char *why, size_t whylen)
{
	const uint8_t *b = n;
	unsigned nr = bnode_nritems(n), level = bnode_level(n), sz;
	int ret;

	if (memcmp(b + H_MAGIC, BNODE_MAGIC, 8))
		return bnode_bad(why, whylen, "bad magic");
	if (b[H_RSV1] || b[H_RSV2] || b[H_RSV2 + 1] || b[H_RSV2 + 2])
		return bnode_bad(why, whylen, "reserved header bytes set");
	/* One encoding: a sealed short node says the fewest blocks. */
	if (b[H_NB] > BNODE_BLOCKS)
		return bnode_bad(why, whylen, "nb %u", b[H_NB]);
	if (level >= BNODE_MAX_LEVEL)
		return bnode_bad(why, whylen, "level %u", level);
	if (!bnode_addr(n) || !bnode_gen(n))
		return bnode_bad(why, whylen, "address or generation 0");
	ret = level ? check_internal(n, nr, why, whylen) : check_leaf(n, nr, why, whylen);
	if (ret)
		return ret;
	if (b[H_NB] && b[H_NB] != bnode_fold_blocks(n))
		return bnode_bad(why, whylen, "nb %u, the node needs %u blocks", b[H_NB],
				 bnode_fold_blocks(n));
	sz = isz(n);
	for (unsigned i = 1; i < nr; i++) {
		struct bkey a, c;

		key_get(item(n, i - 1, sz), &a);
		key_get(item(n, i, sz), &c);
		if (bkey_cmp(&a, &c) >= 0)
			return bnode_bad(why, whylen, "keys %u and %u out of order", i - 1, i);
	}
	return check_own_range(n, nr, sz, why, whylen);
}

int bnode_check_range(const void *n, const struct bkey *lo, const struct bkey *hi,
		      char *why, size_t whylen)
{
	const uint8_t *b = n;
	struct bkey min, max, want = bkey_max;

	key_get(b + H_MIN, &min);
	key_get(b + H_MAX, &max);
	if (hi) {
		want = *hi;
		if (!bkey_pred(&want))
			return bnode_bad(why, whylen, "empty range from the parent");
	}
	if (bkey_cmp(&min, lo) || bkey_cmp(&max, &want))
		return bnode_bad(why, whylen, "node range differs from the parent's");
	return 0;
}

/* ---- splits and rebalances (btree.c) ---- */

/* Where to cut items: about half of the bytes on each side, both sides
 * non-empty (a leaf that needs a split has at least two items).  A key
 * @k past the node's last goes on a run of ascending inserts (a
 * checkpoint of new inodes, a directory's new cookies): the node keeps
 * all but its last item, so such a run leaves full nodes behind, not
 * half-empty ones (a mount's checkpoint of 100k creates wrote 38.7 MB
 * of nodes with half splits). */
unsigned bnode_split_point(const void *b, const struct bkey *k)
{
	unsigned nr = bnode_nritems(b), half = bnode_used(b) / 2, m = 1;
	struct bkey last;

	bnode_key(b, nr - 1, &last);
	if (bkey_cmp(k, &last) > 0)
		return nr - 1;
	while (m + 1 < nr && bnode_span_bytes(b, 0, m) < half)
		m++;
	return m;
}

/* Even out the bytes of two siblings that do not fit in one node. */
int bnode_redistribute(void *L, void *R)
{
	unsigned ul = bnode_used(L), ur = bnode_used(R), half = (ul + ur) / 2;
	unsigned nl = bnode_nritems(L), nrr = bnode_nritems(R), k = 1;
	struct bnode_hdr h;
	void *tmp;

	if (ul < ur) {
		while (k + 1 < nrr && ul + bnode_span_bytes(R, 0, k + 1) <= half)
			k++;
		bnode_append(L, R, 0, k);
		bnode_drop_front(R, k);
		return 0;
	}
	while (k + 1 < nl && ur + bnode_span_bytes(L, nl - k - 1, nl) <= half)
		k++;
	tmp = malloc(BNODE_SIZE);
	if (!tmp)
		return -ENOMEM;
	bnode_hdr(R, &h);
	bnode_init(tmp, h.level, h.addr, h.gen, h.owner, h.fs_uuid);
	bnode_set_min(tmp, &h.min);	/* (the caller moves min) */
	bnode_set_max(tmp, &h.max);
	bnode_append(tmp, L, nl - k, nl);
	bnode_append(tmp, R, 0, nrr);
	memcpy(R, tmp, BNODE_SIZE);
	free(tmp);
	bnode_truncate(L, nl - k);
	return 0;
}
