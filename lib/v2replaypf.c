// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * v2replaypf: the log replay's read-ahead in the INODES tree (see
 * v2replaypf.h).  A window's keys go to bt_prefetch (btree_prefetch.c),
 * which finds their uncached leaves and reads them with its reader pool.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "v2item.h"
#include "v2replaypf.h"

#define V2PF_MIN 8u		/* fewer keys in a chunk: not worth a read-ahead */

struct v2pf {
	struct btree *t;
	struct bkey *k;
	size_t n, cap;
	size_t seen;			/* extent records applied */
	size_t done;			/* keys [0, done) looked up */
	size_t hi;			/* the window being read ahead ends here */
};

static bool is_ext(const struct log_rec *r)
{
	return r->type == LR_EXT_SET || r->type == LR_EXT_CLEAR;
}

static int collect(void *ctx, const struct log_rec *r)
{
	struct v2pf *pf = ctx;

	if (!is_ext(r))
		return 0;
	if (pf->n == pf->cap) {
		size_t cap = pf->cap ? 2 * pf->cap : 256;
		struct bkey *nk = realloc(pf->k, cap * sizeof(*nk));

		if (!nk)
			return -ENOMEM;
		pf->k = nk;
		pf->cap = cap;
	}
	pf->k[pf->n++] = r->type == LR_EXT_SET ?
		(struct bkey){ r->ext.ino, V2_EXTENT, r->ext.fblk } :
		(struct bkey){ r->clr.ino, V2_EXTENT, r->clr.fblk };
	return 0;
}

static int key_cmp(const void *a, const void *b)
{
	return bkey_cmp(a, b);
}

/* Read the next window's leaves ahead: its keys sorted into a copy (the
 * records' order is kept for v2pf_note), then bt_prefetch, whose reader
 * pool reads several at once. */
static void window(struct v2pf *pf)
{
	size_t n;
	struct bkey *s;

	pf->hi = pf->n - pf->done < V2PF_WINDOW ? pf->n : pf->done + V2PF_WINDOW;
	n = pf->hi - pf->done;
	s = malloc(n * sizeof(*s));
	if (s) {	/* no memory: the replay reads them itself, as before */
		memcpy(s, pf->k + pf->done, n * sizeof(*s));
		qsort(s, n, sizeof(*s), key_cmp);
		(void)bt_prefetch(pf->t, s, n, n);
		free(s);
	}
	pf->done = pf->hi;
}

struct v2pf *v2pf_begin(struct btree *t, const void *p, size_t len)
{
	struct v2pf *pf = calloc(1, sizeof(*pf));

	if (!pf)
		return NULL;
	pf->t = t;
	if (log_decode(p, len, collect, pf) != 0 || pf->n < V2PF_MIN) {
		v2pf_end(pf);
		return NULL;
	}
	window(pf);
	return pf;
}

void v2pf_note(struct v2pf *pf, const struct log_rec *r)
{
	if (pf && is_ext(r) && ++pf->seen == pf->done && pf->done < pf->n)
		window(pf);
}

size_t v2pf_done(const struct v2pf *pf)
{
	return pf ? pf->done : 0;
}

void v2pf_end(struct v2pf *pf)
{
	if (!pf)
		return;
	free(pf->k);
	free(pf);
}
