// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * v2replaypf: the log replay's read-ahead in the INODES tree (see
 * v2replaypf.h).  The keys of a window are shared out through an atomic
 * index; each thread runs bt_lookup, which reads the nodes of the key's
 * path into the node cache (the value itself is not wanted).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "v2item.h"
#include "v2replaypf.h"

#define V2PF_MIN 8u		/* fewer keys in a chunk: not worth the threads */

struct v2pf {
	struct btree *t;
	struct bkey *k;
	size_t n, cap;
	size_t seen;			/* extent records applied */
	size_t done;			/* keys [0, done) looked up */
	size_t hi;			/* the window being looked up ends here */
	_Atomic size_t next;
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

static void *worker(void *arg)
{
	struct v2pf *pf = arg;
	size_t i;

	while ((i = atomic_fetch_add(&pf->next, 1)) < pf->hi) {
		unsigned len;

		(void)bt_lookup(pf->t, &pf->k[i], NULL, 0, &len);
	}
	return NULL;
}

/* Look up the next window, from this thread and up to V2PF_THREADS - 1
 * others. */
static void window(struct v2pf *pf)
{
	pthread_t th[V2PF_THREADS];
	unsigned nth = 0;
	size_t n;

	pf->hi = pf->n - pf->done < V2PF_WINDOW ? pf->n : pf->done + V2PF_WINDOW;
	n = pf->hi - pf->done;
	atomic_store(&pf->next, pf->done);
	while (nth + 1 < V2PF_THREADS && (nth + 1) * V2PF_MIN < n &&
	       pthread_create(&th[nth], NULL, worker, pf) == 0)
		nth++;
	worker(pf);
	while (nth)
		pthread_join(th[--nth], NULL);
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
