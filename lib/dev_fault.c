// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * dev_fault: a test backend wrapping another one.  It owns the fault rules
 * (fail an I/O, flip bits in what a read returns or a write stores, drop a
 * write or flush while reporting success) and the crash-recording journal
 * of every write and flush that completed, in completion order.
 *
 * Rules are matched and journal entries appended under one mutex; the I/O
 * itself runs outside it, on the wrapped backend, so concurrency is kept.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dev.h"
#include "dev_i.h"

#define FAULT_FLIP_BYTE 0x80	/* where a corrupted block gets its bit flipped */

struct fault_be {
	struct dev_ops ops;		/* per instance: carries the name */
	char name[48];
	struct dev_backend *lower;	/* owned */

	pthread_mutex_t lock;		/* leaf lock for everything below */
	struct dev_fault_rule *rules;
	size_t nrules, rules_cap;
	uint64_t issued[DEV_MAX][3];	/* by device idx and op */
	uint64_t fua[DEV_MAX];		/* FUA writes done (passed down as FUA) */
	uint64_t discards[DEV_MAX];	/* discards passed down, by device idx */
	bool recording;
	struct dev_fault_rec *jnl;
	size_t njnl, jnl_cap;
};

static struct fault_be *fault_of(struct dev_backend *be)
{
	return be->priv;
}

/* What happens to one I/O of a batch. */
struct fault_act {
	int kind;		/* -1: nothing */
	int err;
	uint64_t off, len;	/* the rule's range, clipped to the I/O */
	void *copy;		/* corrupted copy written instead (writes) */
};

static bool rule_matches(const struct dev_fault_rule *r, const struct dev_io *io)
{
	if (r->count == 0)
		return false;
	if (r->dev_idx >= 0 && r->dev_idx != io->dev->idx)
		return false;
	if (r->op >= 0 && r->op != io->op)
		return false;
	if (!r->len)
		return true;
	/* A flush has no range: only a whole-device rule or one naming
	 * DEV_FLUSH explicitly catches it. */
	if (io->op == DEV_FLUSH)
		return r->op == DEV_FLUSH;
	return io->off < r->off + r->len && r->off < io->off + io->len;
}

/* Called with fb->lock held: pick the first live rule for @io. */
static void fault_match(struct fault_be *fb, const struct dev_io *io, struct fault_act *a)
{
	size_t i;

	a->kind = -1;
	a->copy = NULL;
	for (i = 0; i < fb->nrules; i++) {
		struct dev_fault_rule *r = &fb->rules[i];
		uint64_t lo, hi;

		if (!rule_matches(r, io))
			continue;
		/* Corrupting a flush means nothing; dropping a read neither. */
		if ((r->kind == DEV_FAULT_CORRUPT &&
		     (io->op == DEV_FLUSH || io->op == DEV_DISCARD)) ||
		    (r->kind == DEV_FAULT_DROP && io->op == DEV_READ))
			continue;
		if (r->count > 0)
			r->count--;
		a->kind = r->kind;
		a->err = r->err > 0 ? r->err : EIO;
		lo = r->len && r->off > io->off ? r->off : io->off;
		hi = r->len && r->off + r->len < io->off + io->len ?
			r->off + r->len : io->off + io->len;
		a->off = lo;
		a->len = hi - lo;
		return;
	}
}

/* Flip one bit in every block of buf (which holds io_off..) inside the act range. */
static void fault_flip(void *buf, uint64_t io_off, const struct fault_act *a)
{
	uint64_t first = (a->off - io_off) & ~(uint64_t)4095;
	uint64_t p;

	for (p = first; p < a->off + a->len - io_off; p += 4096)
		((unsigned char *)buf)[p + FAULT_FLIP_BYTE] ^= 0x01;
}

static int jnl_append(struct fault_be *fb, const struct dev_io *io, const void *data)
{
	struct dev_fault_rec *rec;

	if (fb->njnl == fb->jnl_cap) {
		size_t cap = fb->jnl_cap ? fb->jnl_cap * 2 : 64;
		struct dev_fault_rec *j = realloc(fb->jnl, cap * sizeof(*j));

		if (!j)
			return -ENOMEM;
		fb->jnl = j;
		fb->jnl_cap = cap;
	}
	rec = &fb->jnl[fb->njnl];
	memset(rec, 0, sizeof(*rec));
	rec->op = io->op;
	rec->dev_idx = io->dev->idx;
	rec->off = io->off;
	rec->len = io->len;
	rec->fua = io->op == DEV_WRITE && io->fua;
	if (io->op == DEV_WRITE) {
		rec->data = malloc(io->len);
		if (!rec->data)
			return -ENOMEM;
		memcpy(rec->data, data, io->len);
	}
	fb->njnl++;
	return 0;
}

static int fault_submit(struct dev_backend *be, struct dev_io *ios, unsigned n)
{
	struct fault_be *fb = fault_of(be);
	struct fault_act *act;
	struct dev_io *low;
	unsigned *map;
	unsigned i, m = 0;
	int ret = 0;

	act = calloc(n, sizeof(*act));
	low = calloc(n, sizeof(*low));
	map = calloc(n, sizeof(*map));
	if (!act || !low || !map) {
		ret = -ENOMEM;
		goto out;
	}

	pthread_mutex_lock(&fb->lock);
	for (i = 0; i < n; i++)
		fault_match(fb, &ios[i], &act[i]);
	pthread_mutex_unlock(&fb->lock);

	for (i = 0; i < n; i++) {
		struct fault_act *a = &act[i];

		if (a->kind == DEV_FAULT_ERROR) {
			ios[i].res = -a->err;
			continue;
		}
		if (a->kind == DEV_FAULT_DROP) {
			ios[i].res = 0;
			continue;
		}
		low[m] = ios[i];
		if (a->kind == DEV_FAULT_CORRUPT && ios[i].op == DEV_WRITE) {
			/* Store a damaged copy; the caller's buffer stays intact. */
			if (posix_memalign(&a->copy, 4096, ios[i].len)) {
				a->copy = NULL;
				ios[i].res = -ENOMEM;
				continue;
			}
			memcpy(a->copy, ios[i].buf, ios[i].len);
			fault_flip(a->copy, ios[i].off, a);
			low[m].buf = a->copy;
		}
		map[m++] = i;
	}

	if (m) {
		ret = dev_submit(fb->lower, low, m);
		for (i = 0; i < m; i++) {
			unsigned j = map[i];

			ios[j].res = ret ? ret : low[i].res;
			if (!ios[j].res && act[j].kind == DEV_FAULT_CORRUPT &&
			    ios[j].op == DEV_READ)
				fault_flip(ios[j].buf, ios[j].off, &act[j]);
		}
	}

	pthread_mutex_lock(&fb->lock);
	for (i = 0; i < m; i++) {
		if (low[i].dev->idx < 0 || low[i].dev->idx >= DEV_MAX)
			continue;
		fb->issued[low[i].dev->idx][low[i].op]++;
		fb->fua[low[i].dev->idx] += low[i].op == DEV_WRITE && low[i].fua && !low[i].res;
	}
	if (fb->recording) {
		/* A flush only covers writes that completed before it was
		 * issued, so within one batch the flushes go first: a write
		 * racing a flush is never taken to be durable by it. */
		for (i = 0; i < m; i++)
			if (low[i].op == DEV_FLUSH && !low[i].res)
				jnl_append(fb, &low[i], NULL);
		for (i = 0; i < m; i++)
			if (low[i].op == DEV_WRITE && !low[i].res)
				jnl_append(fb, &low[i], low[i].buf);
	}
	pthread_mutex_unlock(&fb->lock);
	ret = 0;

out:
	if (act)
		for (i = 0; i < n; i++)
			free(act[i].copy);
	free(act);
	free(low);
	free(map);
	if (ret)
		for (i = 0; i < n; i++)
			ios[i].res = ret;
	return ret;
}

/*
 * A discard is matched against the rules like a write (drop: reported done
 * but not passed down; error: fails), then passed down and journaled, so
 * the crash explorer can replay it as blocks whose content is lost.
 */
static int fault_discard(struct dev_backend *be, struct dev *d, uint64_t off, uint64_t len)
{
	struct fault_be *fb = fault_of(be);
	/* Journal entries carry 32-bit lengths: pass big ranges in pieces. */
	const uint64_t piece = 1ull << 30;
	struct fault_act a;
	int ret = 0;

	while (len && !ret) {
		uint64_t n = len < piece ? len : piece;
		struct dev_io io = { .dev = d, .op = DEV_DISCARD, .off = off, .len = (uint32_t)n };

		pthread_mutex_lock(&fb->lock);
		fault_match(fb, &io, &a);
		pthread_mutex_unlock(&fb->lock);
		if (a.kind == DEV_FAULT_ERROR)
			return -a.err;
		if (a.kind != DEV_FAULT_DROP) {
			ret = dev_discard(fb->lower, d, off, n);
			if (!ret) {
				pthread_mutex_lock(&fb->lock);
				if (d->idx >= 0 && d->idx < DEV_MAX)
					fb->discards[d->idx]++;
				if (fb->recording)
					jnl_append(fb, &io, NULL);
				pthread_mutex_unlock(&fb->lock);
			}
		}
		off += n;
		len -= n;
	}
	return ret;
}

static int fault_attach(struct dev_backend *be, struct dev *d)
{
	return dev_backend_attach(fault_of(be)->lower, d);
}

static void jnl_clear(struct fault_be *fb)
{
	size_t i;

	for (i = 0; i < fb->njnl; i++)
		free(fb->jnl[i].data);
	fb->njnl = 0;
}

static void fault_destroy(struct dev_backend *be)
{
	struct fault_be *fb = fault_of(be);

	dev_backend_destroy(fb->lower);
	jnl_clear(fb);
	free(fb->jnl);
	free(fb->rules);
	pthread_mutex_destroy(&fb->lock);
	free(fb);
	free(be);
}

int dev_fault_create(struct dev_backend *lower, struct dev_backend **out)
{
	struct dev_backend *be = calloc(1, sizeof(*be));
	struct fault_be *fb = calloc(1, sizeof(*fb));

	if (!be || !fb) {
		free(be);
		free(fb);
		return -ENOMEM;
	}
	snprintf(fb->name, sizeof(fb->name), "fault(%s)", dev_backend_name(lower));
	fb->ops.name = fb->name;
	fb->ops.submit = fault_submit;
	fb->ops.attach = fault_attach;
	fb->ops.discard = fault_discard;
	fb->ops.destroy = fault_destroy;
	fb->lower = lower;
	pthread_mutex_init(&fb->lock, NULL);
	be->ops = &fb->ops;
	be->priv = fb;
	*out = be;
	return 0;
}

static bool is_fault(struct dev_backend *be)
{
	return be->ops->submit == fault_submit;
}

int dev_fault_add_rule(struct dev_backend *be, const struct dev_fault_rule *r)
{
	struct fault_be *fb;
	int ret = 0;

	if (!is_fault(be))
		return -EINVAL;
	if (r->kind < DEV_FAULT_ERROR || r->kind > DEV_FAULT_DROP || r->op > DEV_DISCARD ||
	    r->dev_idx >= DEV_MAX || r->err < 0)
		return -EINVAL;
	fb = fault_of(be);
	pthread_mutex_lock(&fb->lock);
	if (fb->nrules == fb->rules_cap) {
		size_t cap = fb->rules_cap ? fb->rules_cap * 2 : 8;
		struct dev_fault_rule *nr = realloc(fb->rules, cap * sizeof(*nr));

		if (!nr) {
			ret = -ENOMEM;
			goto out;
		}
		fb->rules = nr;
		fb->rules_cap = cap;
	}
	fb->rules[fb->nrules++] = *r;
out:
	pthread_mutex_unlock(&fb->lock);
	return ret;
}

void dev_fault_clear(struct dev_backend *be)
{
	struct fault_be *fb;

	if (!is_fault(be))
		return;
	fb = fault_of(be);
	pthread_mutex_lock(&fb->lock);
	fb->nrules = 0;
	pthread_mutex_unlock(&fb->lock);
}

/* Number with an optional k/m/g suffix (powers of 1024). */
static int parse_num(const char *s, long long *out)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 0);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	default: break;
	}
	if (*end)
		return -EINVAL;
	*out = v;
	return 0;
}

static int parse_kv(struct dev_fault_rule *r, const char *key, const char *val)
{
	long long v;

	if (!strcmp(key, "op")) {
		if (!strcmp(val, "read"))
			r->op = DEV_READ;
		else if (!strcmp(val, "write"))
			r->op = DEV_WRITE;
		else if (!strcmp(val, "flush"))
			r->op = DEV_FLUSH;
		else if (!strcmp(val, "discard"))
			r->op = DEV_DISCARD;
		else if (!strcmp(val, "any"))
			r->op = -1;
		else
			return -EINVAL;
		return 0;
	}
	if (!strcmp(key, "kind")) {
		if (!strcmp(val, "error"))
			r->kind = DEV_FAULT_ERROR;
		else if (!strcmp(val, "corrupt"))
			r->kind = DEV_FAULT_CORRUPT;
		else if (!strcmp(val, "drop"))
			r->kind = DEV_FAULT_DROP;
		else
			return -EINVAL;
		return 0;
	}
	if (!strcmp(key, "dev") && !strcmp(val, "any")) {
		r->dev_idx = -1;
		return 0;
	}
	if (parse_num(val, &v))
		return -EINVAL;
	if (!strcmp(key, "dev") && v >= -1 && v < DEV_MAX)
		r->dev_idx = (int)v;
	else if (!strcmp(key, "off") && v >= 0)
		r->off = (uint64_t)v;
	else if (!strcmp(key, "len") && v >= 0)
		r->len = (uint64_t)v;
	else if (!strcmp(key, "err") && v > 0 && v < 4096)
		r->err = (int)v;
	else if (!strcmp(key, "count") && v >= -1 && v <= 0x7fffffff)
		r->count = (int)v;
	else
		return -EINVAL;
	return 0;
}

int dev_fault_parse(struct dev_backend *be, const char *spec)
{
	struct dev_fault_rule parsed[64];
	unsigned nparsed = 0, i;
	char *copy, *rule, *rsave = NULL;
	bool record = false;
	int ret = 0;

	if (!is_fault(be))
		return -EINVAL;
	copy = strdup(spec);
	if (!copy)
		return -ENOMEM;
	/* All or nothing: parse every rule before adding any. */
	for (rule = strtok_r(copy, ";", &rsave); rule; rule = strtok_r(NULL, ";", &rsave)) {
		struct dev_fault_rule r = { .dev_idx = -1, .op = -1, .kind = DEV_FAULT_ERROR,
					    .err = EIO, .count = -1 };
		char *kv, *ksave = NULL;
		bool any = false;

		if (!strcmp(rule, "record")) {
			record = true;
			continue;
		}
		for (kv = strtok_r(rule, ",", &ksave); kv; kv = strtok_r(NULL, ",", &ksave)) {
			char *eq = strchr(kv, '=');

			if (!eq) {
				ret = -EINVAL;
				goto out;
			}
			*eq = '\0';
			ret = parse_kv(&r, kv, eq + 1);
			if (ret)
				goto out;
			any = true;
		}
		if (!any)
			continue;
		if (nparsed == sizeof(parsed) / sizeof(parsed[0])) {
			ret = -EINVAL;
			goto out;
		}
		parsed[nparsed++] = r;
	}
	for (i = 0; i < nparsed && !ret; i++)
		ret = dev_fault_add_rule(be, &parsed[i]);
	if (!ret && record)
		dev_fault_record(be, true);
out:
	free(copy);
	return ret;
}

void dev_fault_counts(struct dev_backend *be, int dev_idx, uint64_t counts[3])
{
	struct fault_be *fb;

	memset(counts, 0, 3 * sizeof(*counts));
	if (!is_fault(be) || dev_idx < 0 || dev_idx >= DEV_MAX)
		return;
	fb = fault_of(be);
	pthread_mutex_lock(&fb->lock);
	memcpy(counts, fb->issued[dev_idx], sizeof(fb->issued[dev_idx]));
	pthread_mutex_unlock(&fb->lock);
}

/* Device @dev_idx's entry of one of fb's per-device counters (@fua: the
 * FUA writes, else the discards), under the lock; 0 for a bad index. */
static uint64_t dev_ctr(struct dev_backend *be, int dev_idx, bool fua)
{
	struct fault_be *fb;
	uint64_t n;

	if (!is_fault(be) || dev_idx < 0 || dev_idx >= DEV_MAX)
		return 0;
	fb = fault_of(be);
	pthread_mutex_lock(&fb->lock);
	n = fua ? fb->fua[dev_idx] : fb->discards[dev_idx];
	pthread_mutex_unlock(&fb->lock);
	return n;
}

uint64_t dev_fault_fua_writes(struct dev_backend *be, int dev_idx)
{
	return dev_ctr(be, dev_idx, true);
}

uint64_t dev_fault_discards(struct dev_backend *be, int dev_idx)
{
	return dev_ctr(be, dev_idx, false);
}

void dev_fault_record(struct dev_backend *be, bool on)
{
	struct fault_be *fb;

	if (!is_fault(be))
		return;
	fb = fault_of(be);
	pthread_mutex_lock(&fb->lock);
	if (on)
		jnl_clear(fb);
	fb->recording = on;
	pthread_mutex_unlock(&fb->lock);
}

const struct dev_fault_rec *dev_fault_journal(struct dev_backend *be, size_t *n)
{
	struct fault_be *fb;

	*n = 0;
	if (!is_fault(be))
		return NULL;
	fb = fault_of(be);
	pthread_mutex_lock(&fb->lock);
	*n = fb->njnl;
	pthread_mutex_unlock(&fb->lock);
	return fb->jnl;
}
