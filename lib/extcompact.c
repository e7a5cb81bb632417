// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * extcompact: a map leaf's entries as runs and back (extcompact.h).  Pure
 * functions on memory: the cache (extcache.c) decides when, and under
 * which lock.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "extcompact.h"

/* Length of the run starting at @e[i] (a mapped entry): the entries after
 * it whose phys follows on, flag and all. */
static unsigned run_len(const struct extent_ent *e, unsigned i, unsigned n)
{
	unsigned k = 1;

	while (i + k < n && e[i + k].phys && e[i + k].phys == e[i].phys + k)
		k++;
	return k;
}

static bool run_has_csum(const struct extent_ent *e, unsigned i, unsigned k)
{
	for (unsigned j = 0; j < k; j++)
		if (e[i + j].csum)
			return true;
	return false;
}

struct ext_compact *ext_compact_make(const struct extent_ent *e, unsigned n, uint64_t max)
{
	uint32_t nruns = 0, ncsums = 0;
	struct ext_compact *c;
	uint64_t bytes;
	size_t size;

	if (n > UINT16_MAX)
		return NULL;
	for (unsigned i = 0; i < n;) {
		if (!e[i].phys) {
			if (e[i].csum)
				return NULL;	/* not a state a hole has: keep it as is */
			i++;
			continue;
		}
		unsigned k = run_len(e, i, n);

		nruns++;
		if (run_has_csum(e, i, k))
			ncsums += k;
		i += k;
	}
	size = sizeof(*c) + nruns * sizeof(struct ext_run) + ncsums * sizeof(uint64_t);
	/* What malloc takes for it: rounded to 16 bytes, and its header. */
	bytes = ((size + 15) & ~(size_t)15) + 16;
	if (bytes > max)
		return NULL;
	c = calloc(1, size);
	if (!c)
		return NULL;
	c->nruns = nruns;
	c->ncsums = ncsums;
	c->bytes = bytes;

	uint64_t *cs = (uint64_t *)&c->r[nruns];
	uint32_t r = 0, ci = 0;

	for (unsigned i = 0; i < n;) {
		if (!e[i].phys) {
			i++;
			continue;
		}
		unsigned k = run_len(e, i, n);
		struct ext_run *run = &c->r[r++];

		run->off = (uint16_t)i;
		run->n = (uint16_t)k;
		run->phys = e[i].phys;
		run->csum = EXT_RUN_NOCSUM;
		if (run_has_csum(e, i, k)) {
			run->csum = ci;
			for (unsigned j = 0; j < k; j++)
				cs[ci++] = e[i + j].csum;
		}
		i += k;
	}
	return c;
}

void ext_compact_expand(const struct ext_compact *c, struct extent_ent *e, unsigned n)
{
	const uint64_t *cs = ext_compact_csums(c);

	memset(e, 0, n * sizeof(*e));
	for (uint32_t r = 0; r < c->nruns; r++) {
		const struct ext_run *run = &c->r[r];

		for (unsigned j = 0; j < run->n && run->off + j < n; j++) {
			e[run->off + j].phys = run->phys + j;
			e[run->off + j].csum = run->csum == EXT_RUN_NOCSUM ? 0 : cs[run->csum + j];
		}
	}
}
