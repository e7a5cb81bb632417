// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * bpiece: encode, verify and merge format-v2 leaf pieces (layout in
 * bpiece.h and docs/FORMAT.md "Leaf pieces").  The base is a short node and
 * goes through bnode.c (bnode_copy_matches, bnode_unfold, bnode_check); a
 * piece is merged into the leaf by a linear merge that builds the result
 * with bnode.c's own mutators (appends at the end), so the merged leaf is
 * laid out exactly as the tree builds leaves.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "bpiece.h"
#include "csum.h"
#include "le.h"

#define P_CSUM 0
#define P_MAGIC 8
#define P_ADDR 16
#define P_GEN 24
#define P_BGEN 32
#define P_K 40
#define P_PB 42
#define P_RSV1 43
#define P_NR 44
#define P_RSV2 46			/* 2 bytes */

/* A new run starts where (id, type) changes. */
static bool same_run(const struct bkey *a, const struct bkey *b)
{
	return a->id == b->id && a->type == b->type;
}

static unsigned blocks_for(size_t bytes)
{
	return (unsigned)((bytes + BNODE_BLOCK - 1) / BNODE_BLOCK);
}

/* ---- encode ---- */

/* Bytes of the piece for @keys, or -EINVAL (unsorted, outside the leaf's
 * range, an off past 56 bits). */
static long encoded_size(const void *leaf, const struct bkey *keys, unsigned nkeys)
{
	struct bnode_hdr h;
	long bytes = BPIECE_HDR;

	bnode_hdr(leaf, &h);
	for (unsigned i = 0; i < nkeys; i++) {
		const struct bkey *k = &keys[i];
		unsigned idx, len;

		if (k->off > BKEY_OFF_MAX || bkey_cmp(k, &h.min) < 0 || bkey_cmp(k, &h.max) > 0 ||
		    (i && bkey_cmp(&keys[i - 1], k) >= 0))
			return -EINVAL;
		if (!i || !same_run(&keys[i - 1], k))
			bytes += BPIECE_RUN;
		bytes += BPIECE_ENTRY;
		if (bnode_search(leaf, k, &idx)) {
			bnode_val(leaf, idx, &len);
			bytes += len;
		}
	}
	return bytes;
}

/* Runs, entries and values of the piece (@out zeroed, @end = pb * 4096). */
static void encode_items(uint8_t *out, unsigned end, const void *leaf, const struct bkey *keys,
			 unsigned nkeys)
{
	unsigned pos = BPIECE_HDR, vend = end;
	uint8_t *run = NULL;

	for (unsigned i = 0; i < nkeys; i++) {
		const struct bkey *k = &keys[i];
		unsigned idx, len = BPIECE_WHITEOUT;

		if (!i || !same_run(&keys[i - 1], k)) {
			run = out + pos;
			le64_put(run, k->id);
			run[8] = k->type;
			pos += BPIECE_RUN;
		}
		le16_put(run + 10, le16_get(run + 10) + 1);
		if (bnode_search(leaf, k, &idx)) {
			const void *v = bnode_val(leaf, idx, &len);

			vend -= len;
			memcpy(out + vend, v, len);
		}
		le64_put(out + pos, k->off);
		le16_put(out + pos + 8, len);
		pos += BPIECE_ENTRY;
	}
}

int bpiece_encode(void *out, size_t outlen, const void *merged_leaf, const struct bkey *keys,
		  unsigned nkeys, uint64_t addr, uint64_t base_gen, uint64_t gen, unsigned k,
		  uint64_t prev_csum)
{
	uint8_t *o = out;
	long bytes;
	unsigned pb;

	if (!nkeys || !addr || !base_gen || gen <= base_gen || !k || k > BPIECE_MAX_BLOCKS ||
	    bnode_level(merged_leaf))
		return -EINVAL;
	bytes = encoded_size(merged_leaf, keys, nkeys);
	if (bytes < 0)
		return (int)bytes;
	pb = blocks_for((size_t)bytes);
	if (pb > BPIECE_MAX_BLOCKS || (size_t)pb * BNODE_BLOCK > outlen)
		return -E2BIG;
	memset(o, 0, (size_t)pb * BNODE_BLOCK);
	memcpy(o + P_MAGIC, BPIECE_MAGIC, 8);
	le64_put(o + P_ADDR, addr);
	le64_put(o + P_GEN, gen);
	le64_put(o + P_BGEN, base_gen);
	le16_put(o + P_K, k);
	o[P_PB] = (uint8_t)pb;
	le16_put(o + P_NR, nkeys);
	encode_items(o, pb * BNODE_BLOCK, merged_leaf, keys, nkeys);
	le64_put(o + P_CSUM, csum_buf(o + P_MAGIC, pb * BNODE_BLOCK - P_MAGIC, prev_csum));
	return (int)pb;
}

/* ---- decode ---- */

/* Walks a piece's entries, checking as it goes that every read stays in
 * the piece and that keys ascend with runs that differ. */
struct pcur {
	const uint8_t *p;
	unsigned end;			/* pb * 4096 */
	unsigned pos;			/* next head byte */
	unsigned vend;			/* lowest value byte so far */
	unsigned left;			/* entries left in the piece */
	unsigned run;			/* entries left in the run */
	bool started;			/* key.off is the run's previous entry's */
	struct bkey key;
	unsigned vlen;			/* BPIECE_WHITEOUT: a whiteout */
	const uint8_t *val;
};

static void cur_init(struct pcur *c, const uint8_t *p, unsigned pb)
{
	memset(c, 0, sizeof(*c));
	c->p = p;
	c->end = c->vend = pb * BNODE_BLOCK;
	c->pos = BPIECE_HDR;
	c->left = le16_get(p + P_NR);
}

/* A run head: (id, type) above the previous run's, count 1..left. */
static bool cur_run(struct pcur *c)
{
	const uint8_t *r = c->p + c->pos;
	uint64_t id;
	uint8_t type;

	if (c->pos + BPIECE_RUN > c->end)
		return false;
	id = le64_get(r);
	type = r[8];
	c->run = le16_get(r + 10);
	if (r[9] || !c->run || c->run > c->left)
		return false;
	if (c->pos > BPIECE_HDR &&
	    (id < c->key.id || (id == c->key.id && type <= c->key.type)))
		return false;
	c->key.id = id;
	c->key.type = type;
	c->started = false;		/* the run's first off compares with nothing */
	c->pos += BPIECE_RUN;
	return true;
}

/* 1: the next entry is in c->key, vlen, val; 0: none left; -EUCLEAN. */
static int cur_next(struct pcur *c)
{
	uint64_t off;

	if (!c->left)
		return 0;
	if (!c->run && !cur_run(c))
		return -EUCLEAN;
	if (c->pos + BPIECE_ENTRY > c->end)
		return -EUCLEAN;
	off = le64_get(c->p + c->pos);
	c->vlen = le16_get(c->p + c->pos + 8);
	if (off > BKEY_OFF_MAX || (c->started && off <= c->key.off))
		return -EUCLEAN;
	c->val = NULL;
	if (c->vlen != BPIECE_WHITEOUT) {
		if (c->vlen > BNODE_MAX_VAL || c->vlen > c->vend - BPIECE_HDR)
			return -EUCLEAN;
		c->vend -= c->vlen;
		c->val = c->p + c->vend;
	}
	c->key.off = off;
	c->started = true;
	c->pos += BPIECE_ENTRY;
	c->run--;
	c->left--;
	return 1;
}

/* After the last entry: entries below the values, zeros between, pb the
 * fewest blocks. */
static int cur_tail(const struct pcur *c, char *why, size_t whylen)
{
	if (c->pos > c->vend)
		return bnode_bad(why, whylen, "piece entries run into its values");
	for (unsigned i = c->pos; i < c->vend; i++)
		if (c->p[i])
			return bnode_bad(why, whylen, "nonzero byte %u after the entries", i);
	if (blocks_for(c->pos + (c->end - c->vend)) != c->end / BNODE_BLOCK)
		return bnode_bad(why, whylen, "piece of %u blocks holds %u bytes",
				 c->end / BNODE_BLOCK, c->pos + (c->end - c->vend));
	return 0;
}

/* ---- merge ---- */

static __thread uint8_t merge_tmp[BNODE_SIZE] __attribute__((aligned(64)));
static __thread uint8_t verify_dst[BNODE_SIZE] __attribute__((aligned(64)));

static bool put_item(void *n, const struct bkey *k, const void *v, unsigned len)
{
	if (bnode_free(n) < BNODE_ITEM + len)
		return false;
	bnode_leaf_insert(n, bnode_nritems(n), k, v, len);
	return true;
}

static bool copy_item(void *n, const void *src, unsigned i)
{
	struct bkey k;
	unsigned len;
	const void *v = bnode_val(src, i, &len);

	bnode_key(src, i, &k);
	return put_item(n, &k, v, len);
}

/* One piece (its header checked) onto the leaf @dst: a linear merge into
 * merge_tmp, then back.  Only appends, so a merge that overflows at any
 * point overflows at the end. */
static int merge_piece(void *dst, const uint8_t *p, unsigned pb, char *why, size_t whylen)
{
	unsigned nr = bnode_nritems(dst), i = 0;
	struct bnode_hdr h;
	struct pcur c;
	int r;

	bnode_hdr(dst, &h);
	bnode_init(merge_tmp, 0, h.addr, h.gen, h.owner, h.fs_uuid);
	bnode_set_min(merge_tmp, &h.min);
	bnode_set_max(merge_tmp, &h.max);
	cur_init(&c, p, pb);
	while ((r = cur_next(&c)) > 0) {
		struct bkey k;
		int cmp = 1;

		if (bkey_cmp(&c.key, &h.min) < 0 || bkey_cmp(&c.key, &h.max) > 0)
			return bnode_bad(why, whylen, "piece key outside the leaf's range");
		for (; i < nr; i++) {
			bnode_key(dst, i, &k);
			cmp = bkey_cmp(&k, &c.key);
			if (cmp >= 0)
				break;
			if (!copy_item(merge_tmp, dst, i))
				return bnode_bad(why, whylen, "merged leaf does not fit a node");
		}
		if (i < nr && !cmp)
			i++;		/* replaced or removed */
		else if (c.vlen == BPIECE_WHITEOUT)
			return bnode_bad(why, whylen, "whiteout of a key not in the leaf");
		if (c.vlen != BPIECE_WHITEOUT && !put_item(merge_tmp, &c.key, c.val, c.vlen))
			return bnode_bad(why, whylen, "merged leaf does not fit a node");
	}
	if (r < 0)
		return bnode_bad(why, whylen, "bad piece entries");
	r = cur_tail(&c, why, whylen);
	if (r)
		return r;
	for (; i < nr; i++)
		if (!copy_item(merge_tmp, dst, i))
			return bnode_bad(why, whylen, "merged leaf does not fit a node");
	memcpy(dst, merge_tmp, BNODE_SIZE);
	return 0;
}

/* ---- the chain ---- */

/* The base: a short node of nb0 blocks, checked whole, into @dst. */
static int load_base(void *dst, const uint8_t *b, unsigned nblocks, const struct bptr *p,
		     struct bpiece_chain *ch, char *why, size_t whylen)
{
	unsigned nb0 = bnode_nb(b);
	struct bptr bp;
	int ret;

	if (!nb0 || nb0 > BNODE_BLOCKS || nb0 > nblocks)
		return bnode_bad(why, whylen, "base of %u blocks in a chain of %u", nb0, nblocks);
	memcpy(dst, b, (size_t)nb0 * BNODE_BLOCK);
	memset((uint8_t *)dst + nb0 * BNODE_BLOCK, 0, BNODE_SIZE - nb0 * BNODE_BLOCK);
	bp.addr = p ? p->addr : bnode_addr(dst);
	bp.gen = bnode_gen(dst);
	bp.csum = bnode_stored_csum(dst);
	if (!bnode_copy_matches(dst, &bp, true))
		return bnode_bad(why, whylen, "base does not verify");
	bnode_unfold(dst);
	ret = bnode_check(dst, why, whylen);
	if (ret)
		return ret;
	if (nblocks > nb0 && bnode_level(dst))
		return bnode_bad(why, whylen, "pieces after an internal node");
	*ch = (struct bpiece_chain){ .nb0 = nb0, .addr = bp.addr, .base_gen = bp.gen,
				     .gen = bp.gen, .csum = bp.csum };
	return 0;
}

/* Piece k = ch->npieces + 1 at @p with @room blocks left: its header and
 * csum; *pb its blocks. */
static int piece_hdr(const uint8_t *p, unsigned room, const struct bpiece_chain *ch,
		     unsigned *pb, char *why, size_t whylen)
{
	unsigned k = ch->npieces + 1;

	*pb = p[P_PB];
	if (!*pb || *pb > BPIECE_MAX_BLOCKS || *pb > room)
		return bnode_bad(why, whylen, "piece %u: %u blocks, %u left", k, *pb, room);
	if (csum_buf(p + P_MAGIC, *pb * BNODE_BLOCK - P_MAGIC, ch->csum) != le64_get(p + P_CSUM))
		return bnode_bad(why, whylen, "piece %u: csum", k);
	if (memcmp(p + P_MAGIC, BPIECE_MAGIC, 8))
		return bnode_bad(why, whylen, "piece %u: bad magic", k);
	if (le64_get(p + P_ADDR) != ch->addr || le64_get(p + P_BGEN) != ch->base_gen)
		return bnode_bad(why, whylen, "piece %u: of another extent or base", k);
	if (le16_get(p + P_K) != k || le64_get(p + P_GEN) <= ch->gen)
		return bnode_bad(why, whylen, "piece %u: says k %u, gen %llu after %llu", k,
				 le16_get(p + P_K), (unsigned long long)le64_get(p + P_GEN),
				 (unsigned long long)ch->gen);
	if (p[P_RSV1] || p[P_RSV2] || p[P_RSV2 + 1] || !le16_get(p + P_NR))
		return bnode_bad(why, whylen, "piece %u: reserved bytes or no entries", k);
	return 0;
}

int bpiece_load(void *dst, const void *buf, unsigned nblocks, const struct bptr *p,
		struct bpiece_chain *c, char *why, size_t whylen)
{
	const uint8_t *b = buf;
	struct bpiece_chain ch;
	unsigned pb;
	int ret;

	if (!nblocks || nblocks > BPIECE_EXT_BLOCKS)
		return bnode_bad(why, whylen, "chain of %u blocks", nblocks);
	ret = load_base(dst, b, nblocks, p, &ch, why, whylen);
	if (ret)
		return ret;
	for (unsigned off = ch.nb0; !ret && off < nblocks; off += pb) {
		const uint8_t *piece = b + (size_t)off * BNODE_BLOCK;

		ret = piece_hdr(piece, nblocks - off, &ch, &pb, why, whylen);
		if (!ret)
			ret = merge_piece(dst, piece, pb, why, whylen);
		ch.npieces++;
		ch.gen = le64_get(piece + P_GEN);
		ch.csum = le64_get(piece + P_CSUM);
	}
	if (ret)
		return ret;
	if (p && (ch.gen != p->gen || ch.csum != p->csum))
		return bnode_bad(why, whylen, "chain ends at gen %llu, the pointer says %llu",
				 (unsigned long long)ch.gen, (unsigned long long)p->gen);
	if (ch.npieces) {
		/* The merged leaf is no sealed image: nb 0, the chain's gen and csum. */
		bnode_set_addr_gen(dst, ch.addr, ch.gen);
		le64_put(dst, ch.csum);		/* header byte 0: csum */
	}
	if (c)
		*c = ch;
	return 0;
}

void bpiece_seal_base(void *n, bool short_nodes, bool pieces, struct bptr *p,
		      struct bpiece_chain *c)
{
	p->csum = bnode_seal_fmt(n, short_nodes);
	p->nblocks = pieces ? bnode_nb(n) : 0;
	if (!c)
		return;
	memset(c, 0, sizeof(*c));
	if (pieces)
		*c = (struct bpiece_chain){ .nb0 = p->nblocks, .addr = bnode_addr(n),
					    .base_gen = bnode_gen(n), .gen = bnode_gen(n),
					    .csum = p->csum };
}

int bpiece_verify_chain(const void *buf, unsigned nblocks, const struct bptr *p)
{
	return bpiece_load(verify_dst, buf, nblocks, p, NULL, NULL, 0);
}

int bpiece_merge(void *dst, const void *buf, unsigned nblocks)
{
	return bpiece_load(dst, buf, nblocks, NULL, NULL, NULL, 0);
}

int bpiece_keys(const void *buf, unsigned nblocks, unsigned k, struct bkey *keys, unsigned max)
{
	const uint8_t *b = buf;
	unsigned off, n = 0;
	struct pcur c;
	int r;

	if (!nblocks || nblocks > BPIECE_EXT_BLOCKS || !k)
		return -EUCLEAN;
	off = bnode_nb(b);
	for (unsigned j = 1; j < k && off < nblocks; j++)
		off += b[(size_t)off * BNODE_BLOCK + P_PB];
	if (!off || off >= nblocks)
		return -EUCLEAN;
	b += (size_t)off * BNODE_BLOCK;
	if (!b[P_PB] || b[P_PB] > nblocks - off)
		return -EUCLEAN;
	cur_init(&c, b, b[P_PB]);
	while ((r = cur_next(&c)) > 0) {
		if (n == max)
			return -EUCLEAN;
		keys[n++] = c.key;
	}
	return r < 0 ? r : (int)n;
}
