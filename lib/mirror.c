// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * mirror: N-way RAID1 over the devices of one backend.  It owns the device
 * states (ok / missing / failed), the per-device error counters, the
 * concurrent mirrored write and flush, and the verified read with
 * read-repair: a block whose copy fails its checksum (or cannot be read) is
 * fetched from the other copies, handed back from the first that verifies,
 * and rewritten in place on every device whose copy was bad.  Copy-on-write
 * guarantees nobody rewrites a block while a reader holds its checksum, so
 * rewriting the same content is safe.
 *
 * Locking: none.  States and counters are atomics; the device array is set
 * once by mirror_init() and never changes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csum.h"
#include "mirror.h"

#define BLK TFS_BLOCK_SIZE

static const char *dev_name(const struct mirror *m, unsigned dev, char *tmp, size_t n)
{
	if (dev < m->ndevs && m->devs[dev] && m->devs[dev]->path)
		return m->devs[dev]->path;
	snprintf(tmp, n, "device %u", dev);
	return tmp;
}

void mirror_event(struct mirror *m, unsigned dev, int kind, uint64_t blk, uint64_t n)
{
	static const char *const what[MEV_KINDS] = {
		[MEV_READ_ERR] = "read error",
		[MEV_WRITE_ERR] = "write error",
		[MEV_FLUSH_ERR] = "cache flush failed",
		[MEV_CSUM_ERR] = "checksum mismatch",
		[MEV_REPAIRED] = "repaired from another mirror",
		[MEV_UNRECOVERABLE] = "unrecoverable (no copy verifies)",
	};
	struct mirror_counters *c;
	_Atomic uint64_t *ctr;
	char tmp[32];

	if (dev >= m->ndevs || kind < 0 || kind >= MEV_KINDS)
		return;
	c = &m->ctr[dev];
	ctr = kind == MEV_READ_ERR ? &c->read_err : kind == MEV_WRITE_ERR ? &c->write_err :
	      kind == MEV_FLUSH_ERR ? &c->flush_err : kind == MEV_CSUM_ERR ? &c->csum_err :
	      kind == MEV_REPAIRED ? &c->repaired : &c->unrecoverable;
	atomic_fetch_add(ctr, n);
	/* One line per device and kind per interval, never one per I/O. */
	if (kind == MEV_FLUSH_ERR)
		tfs_log_ratelimited(&m->rl[dev][kind], LOG_ERR, "%s: %s",
				    dev_name(m, dev, tmp, sizeof(tmp)), what[kind]);
	else
		tfs_log_ratelimited(&m->rl[dev][kind],
				    kind == MEV_REPAIRED ? LOG_NOTICE :
				    kind == MEV_CSUM_ERR ? LOG_WARNING : LOG_ERR,
				    "%s: %s at block %llu%s", dev_name(m, dev, tmp, sizeof(tmp)),
				    what[kind], (unsigned long long)blk, n > 1 ? " and following" : "");
}

static bool dev_ok(const struct mirror *m, unsigned i)
{
	return i < m->ndevs && m->devs[i] && atomic_load(&m->state[i]) == MDEV_OK;
}

int mirror_init(struct mirror *m, struct dev_backend *be, struct dev **devs, unsigned n)
{
	unsigned i;

	if (!n || n > DEV_MAX)
		return -EINVAL;
	/* Wipes on_state too: set it after mirror_init(). */
	memset(m, 0, sizeof(*m));
	m->be = be;
	m->ndevs = n;
	for (i = 0; i < n; i++) {
		m->devs[i] = devs[i];
		atomic_init(&m->state[i], devs[i] ? MDEV_OK : MDEV_MISSING);
	}
	return 0;
}

unsigned mirror_healthy(const struct mirror *m)
{
	unsigned i, k = 0;

	for (i = 0; i < m->ndevs; i++)
		k += dev_ok(m, i);
	return k;
}

void mirror_fail_dev(struct mirror *m, unsigned dev, int err)
{
	int expect = MDEV_OK;

	if (dev >= m->ndevs)
		return;
	/* Only the transition is reported, so concurrent failures of the same
	 * device log once. */
	if (atomic_compare_exchange_strong(&m->state[dev], &expect, MDEV_FAILED)) {
		char tmp[32];

		tfs_log(LOG_ERR, "%s: device failed (%s); no more I/O goes to it until it is "
			"rebuilt", dev_name(m, dev, tmp, sizeof(tmp)), strerror(err < 0 ? -err : err));
		if (m->on_state)
			m->on_state(m->on_state_ctx, dev, MDEV_FAILED, err);
	}
}

static void note_read_err(struct mirror *m, unsigned dev, uint64_t blk, int err)
{
	mirror_event(m, dev, MEV_READ_ERR, blk, 1);
	if (atomic_load(&m->ctr[dev].read_err) >= MIRROR_READ_ERR_LIMIT)
		mirror_fail_dev(m, dev, err);
}

static void note_write_err(struct mirror *m, unsigned dev, uint64_t blk, int err)
{
	mirror_event(m, dev, MEV_WRITE_ERR, blk, 1);
	/* Its copy is now stale: it must not serve reads any more. */
	mirror_fail_dev(m, dev, err);
}

int mirror_write(struct mirror *m, uint64_t blk, const void *buf, uint32_t nblk)
{
	struct dev_io ios[DEV_MAX];
	unsigned slot[DEV_MAX];
	unsigned i, n = 0, ok = 0;
	int ret;

	for (i = 0; i < m->ndevs; i++) {
		if (!dev_ok(m, i))
			continue;
		slot[n] = i;
		/* dev_io has one pointer for both directions; a write only
		 * reads it. */
		ios[n++] = (struct dev_io){
			.dev = m->devs[i], .op = DEV_WRITE, .off = blk * BLK,
			.buf = (void *)buf, .len = nblk * BLK,
		};
	}
	if (!n)
		return -EIO;
	ret = dev_submit(m->be, ios, n);
	for (i = 0; i < n; i++) {
		int res = ret ? ret : ios[i].res;

		if (res)
			note_write_err(m, slot[i], blk, res);
		else
			ok++;
	}
	return ok ? 0 : -EIO;
}

int mirror_flush(struct mirror *m)
{
	struct dev_io ios[DEV_MAX];
	unsigned slot[DEV_MAX];
	unsigned i, n = 0, ok = 0;
	int ret;

	for (i = 0; i < m->ndevs; i++) {
		if (!dev_ok(m, i))
			continue;
		slot[n] = i;
		ios[n++] = (struct dev_io){ .dev = m->devs[i], .op = DEV_FLUSH };
	}
	if (!n)
		return -EIO;
	ret = dev_submit(m->be, ios, n);
	for (i = 0; i < n; i++) {
		int res = ret ? ret : ios[i].res;

		if (res) {
			mirror_event(m, slot[i], MEV_FLUSH_ERR, 0, 1);
			/* Data acknowledged as durable may not be: fail it. */
			mirror_fail_dev(m, slot[i], res);
		} else {
			ok++;
		}
	}
	return ok ? 0 : -EIO;
}

int mirror_read_dev(struct mirror *m, unsigned dev, uint64_t blk, void *buf, uint32_t nblk)
{
	int ret;

	if (!dev_ok(m, dev))
		return -ENODEV;
	ret = dev_pread(m->be, m->devs[dev], buf, nblk * BLK, blk * BLK);
	if (ret)
		note_read_err(m, dev, blk, ret);
	return ret;
}

int mirror_write_dev(struct mirror *m, unsigned dev, uint64_t blk, const void *buf, uint32_t nblk)
{
	int ret;

	if (!dev_ok(m, dev))
		return -ENODEV;
	ret = dev_pwrite(m->be, m->devs[dev], buf, nblk * BLK, blk * BLK);
	if (ret)
		note_write_err(m, dev, blk, ret);
	return ret;
}

/* Per block of a verified read. */
#define RB_NEED 0x100u		/* no verified copy yet */
#define RB_FIXED 0x200u		/* verified copy came from another device */
/* low 8 bits: devices (by slot) whose copy was bad, to be rewritten */

/*
 * Try @dev for every block still needing a copy: read each run of needed
 * blocks into @tmp and take the blocks that verify.
 */
static void read_fallback(struct mirror *m, unsigned dev, uint64_t blk, char *buf,
			  uint32_t nblk, const uint64_t *csums, uint16_t *st, char *tmp)
{
	uint32_t s = 0, e, i;

	while (s < nblk) {
		if (!(st[s] & RB_NEED)) {
			s++;
			continue;
		}
		for (e = s + 1; e < nblk && (st[e] & RB_NEED); e++)
			;
		if (mirror_read_dev(m, dev, blk + s, tmp, e - s)) {
			/* Rewriting it may remap the bad sector. */
			for (i = s; i < e; i++)
				st[i] |= 1u << dev;
		} else {
			for (i = s; i < e; i++) {
				char *p = tmp + (size_t)(i - s) * BLK;

				if (csum_block(p, blk + i) != csums[i]) {
					mirror_event(m, dev, MEV_CSUM_ERR, blk + i, 1);
					st[i] |= 1u << dev;
					continue;
				}
				memcpy(buf + (size_t)i * BLK, p, BLK);
				st[i] = (uint16_t)((st[i] & ~RB_NEED) | RB_FIXED);
			}
		}
		s = e;
	}
}

/* Rewrite the recovered blocks onto every device whose copy was bad. */
static void read_repair(struct mirror *m, uint64_t blk, const char *buf, uint32_t nblk,
			const uint16_t *st)
{
	uint32_t s, e;
	unsigned d;

	for (d = 0; d < m->ndevs; d++) {
		unsigned want = RB_FIXED | (1u << d);

		for (s = 0; s < nblk; s = e) {
			if ((st[s] & want) != want) {
				e = s + 1;
				continue;
			}
			for (e = s + 1; e < nblk && (st[e] & want) == want; e++)
				;
			if (!mirror_write_dev(m, d, blk + s, buf + (size_t)s * BLK, e - s))
				mirror_event(m, d, MEV_REPAIRED, blk + s, e - s);
		}
	}
}

int mirror_read(struct mirror *m, uint64_t blk, void *buf, uint32_t nblk,
		const uint64_t *csums, uint64_t *bad)
{
	unsigned healthy[DEV_MAX], nh = 0, c, k, i;
	uint16_t stack_st[64], *st = stack_st;
	char *tmp = NULL, *p = buf;
	uint64_t badmap = 0;
	bool any_bad = false;
	int ret = 0;

	if (bad)
		*bad = 0;
	if (!nblk)
		return 0;
	for (i = 0; i < m->ndevs; i++)
		if (dev_ok(m, i))
			healthy[nh++] = i;
	if (nblk > 64) {
		st = calloc(nblk, sizeof(*st));
		if (!st)
			return -ENOMEM;
	} else {
		memset(stack_st, 0, sizeof(stack_st));
	}

	/* Spread reads over the mirrors with a rotating counter alone.  Adding
	 * the block number (the first design) pins a stream of single-block
	 * sequential reads to one device of two: blk and rr both step by one,
	 * so their sum keeps its parity. */
	c = nh ? healthy[atomic_fetch_add(&m->rr, 1) % nh] : 0;
	if (!nh || mirror_read_dev(m, c, blk, buf, nblk)) {
		for (i = 0; i < nblk; i++)
			st[i] = (uint16_t)(RB_NEED | (nh ? 1u << c : 0));
		any_bad = true;
	} else {
		for (i = 0; i < nblk; i++) {
			if (csum_block(p + (size_t)i * BLK, blk + i) == csums[i])
				continue;
			mirror_event(m, c, MEV_CSUM_ERR, blk + i, 1);
			st[i] = (uint16_t)(RB_NEED | (1u << c));
			any_bad = true;
		}
	}
	if (!any_bad)
		goto out;

	if (nh > 1 && posix_memalign((void **)&tmp, BLK, (size_t)nblk * BLK)) {
		ret = -ENOMEM;
		goto out;
	}
	/* The other copies, in the rotation order, starting after c. */
	for (k = 1; k < nh; k++) {
		unsigned pos, d;

		for (pos = 0; healthy[pos] != c; pos++)
			;
		d = healthy[(pos + k) % nh];
		read_fallback(m, d, blk, p, nblk, csums, st, tmp);
	}
	read_repair(m, blk, p, nblk, st);

	for (i = 0; i < nblk; i++) {
		if (!(st[i] & RB_NEED))
			continue;
		/* No copy verifies: never hand out bad bytes. */
		mirror_event(m, c, MEV_UNRECOVERABLE, blk + i, 1);
		memset(p + (size_t)i * BLK, 0, BLK);
		badmap |= 1ull << (i < 63 ? i : 63);
		ret = -EIO;
	}
out:
	if (bad)
		*bad = badmap;
	free(tmp);
	if (st != stack_st)
		free(st);
	return ret;
}
