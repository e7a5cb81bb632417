/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Description: extmodel.h: what the format-v2 map tests compare a lazy map
 * (lib/extent_lazy.c, read through v2ext) with an all-in-memory model by:
 * a xorshift generator, the blocks a map drops summed as a count and a
 * hash, the source over the test's tree, walks and points compared, and
 * file blocks drawn near 0, EXTENT_LOW_FBLK and the top of the range
 * (test_extcache, test_extpend).  The includer defines MAXF and includes
 * cmocka.h, extent.h and v2ext.h first.
 */
#ifndef TWINFS_EXTMODEL_H
#define TWINFS_EXTMODEL_H

static uint64_t rs = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return rs;
}

/* ---- dropped blocks, compared as sums (count and a hash of blocks) ---- */

struct drops {
	uint64_t n, h;
};

static uint64_t mix(uint64_t x)
{
	x ^= x >> 31;
	x *= 0x7fb5d329728ea185ull;
	x ^= x >> 27;
	return x ^ (x >> 33);
}

static void drop_cb(void *ctx, uint64_t phys, uint64_t n)
{
	struct drops *d = ctx;

	for (uint64_t i = 0; i < n; i++)
		d->h += mix(phys + i);
	d->n += n;
}

/* ---- the source: v2ext over the test's tree ---- */

static int s_walk(void *ctx, uint64_t ino, uint64_t from, uint64_t to, extent_run_fn cb, void *c)
{
	return v2ext_walk(ctx, ino, from, to, cb, c);
}

static int s_data(void *ctx, uint64_t ino, uint64_t f, uint64_t *out)
{
	return v2ext_next_data(ctx, ino, f, out);
}

static int s_hole(void *ctx, uint64_t ino, uint64_t f, uint64_t *out)
{
	return v2ext_next_hole(ctx, ino, f, out);
}

/* ---- comparing the lazy map with the model ---- */

struct seen {
	uint64_t h, blocks;
};

static int seen_run(void *ctx, uint64_t fblk, uint64_t phys, uint32_t n,
		    const struct extent_ent *ents)
{
	struct seen *s = ctx;

	for (uint32_t i = 0; i < n; i++) {
		assert_int_equal(ents[i].phys, phys + i);
		s->h += mix((fblk + i) ^ mix(ents[i].phys) ^ mix(mix(ents[i].csum)));
	}
	s->blocks += n;
	return 0;
}

#define ZONE_SPAN 40000u
static const uint64_t zone[] = { 0, EXTENT_LOW_FBLK - ZONE_SPAN / 2, MAXF - ZONE_SPAN };

static void cmp_walk(const struct extent_map *m, const struct extent_map *l, uint64_t from,
		     uint64_t to)
{
	struct seen a = { 0 }, b = { 0 };

	assert_int_equal(extent_walk(m, from, to, seen_run, &a), 0);
	assert_int_equal(extent_walk(l, from, to, seen_run, &b), 0);
	assert_int_equal(a.blocks, b.blocks);
	assert_int_equal(a.h, b.h);
}

static void cmp_point(const struct extent_map *m, const struct extent_map *l, uint64_t f)
{
	struct extent_ent a, b;

	assert_int_equal(extent_lookup(l, f, &b), extent_lookup(m, f, &a));
	assert_int_equal(a.phys, b.phys);
	assert_int_equal(a.csum, b.csum);
	assert_int_equal(extent_next_data(l, f), extent_next_data(m, f));
	assert_int_equal(extent_next_hole(l, f), extent_next_hole(m, f));
}

static uint64_t rnd_fblk(void)
{
	return zone[rnd() % 3] + rnd() % ZONE_SPAN;
}

#endif
