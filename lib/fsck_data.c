// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fsck_data: the block passes of fsck (fsck_i.h): every reference from a
 * file block to a physical block, blocks referenced twice (one owner keeps
 * it, the others lose it), and the checksum of every data block on every
 * device copy, read per device in runs of up to FSCK_RUN_BLOCKS.  A bad
 * copy is rewritten in place from a verified one as it is found.  The run
 * check (fsck_data_run) is format v2's too (fsck_v2_data.c): it reads
 * through c->be/c->devs, which both formats set.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fsck_i.h"

/* ---- pass 5: blocks referenced twice, reference counts ---- */

static int ref_run(void *ctx, uint64_t fblk, uint64_t phys, uint32_t n,
		   const struct extent_ent *ents)
{
	struct fck *c = ctx;

	if (c->nrefs + n > c->caprefs) {
		size_t nc = c->caprefs ? c->caprefs * 2 : 4096;
		struct bref *nv;

		while (nc < c->nrefs + n)
			nc *= 2;
		nv = realloc(c->refs, nc * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		c->refs = nv;
		c->caprefs = nc;
	}
	for (uint32_t i = 0; i < n; i++)
		c->refs[c->nrefs++] = (struct bref){
			.phys = EXTENT_PHYS(phys) + i,
			.csum = ents[i].csum,
			.ino = c->walk_ino,
			.fblk = fblk + i,
			.unwritten = (phys & EXTENT_UNWRITTEN) != 0,
		};
	return 0;
}

static int bref_cmp(const void *a, const void *b)
{
	const struct bref *x = a, *y = b;

	if (x->phys != y->phys)
		return x->phys < y->phys ? -1 : 1;
	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	return x->fblk < y->fblk ? -1 : x->fblk > y->fblk;
}

static int collect_refs(struct fck *c)
{
	c->nrefs = 0;
	for (size_t i = 0; i < c->niv; i++) {
		struct tfs_inode *ip = c->iv[i].ip;
		int ret;

		if (!S_ISREG(ip->mode))
			continue;
		c->walk_ino = ip->ino;
		ret = extent_walk(&ip->map, 0, EXTENT_MAX_FBLK, ref_run, c);
		if (ret < 0)
			return ret;
	}
	if (c->nrefs)	/* qsort(NULL, 0) is undefined (UBSan) */
		qsort(c->refs, c->nrefs, sizeof(*c->refs), bref_cmp);
	return 0;
}

/* Which of the disagreeing references [s, e) to one block the content
 * proves right: a written one whose csum a copy of the block matches. */
static void resolve_crosslink(struct fck *c, size_t s, size_t e, void *buf)
{
	char p1[FSCK_PATH_MAX], p2[FSCK_PATH_MAX];
	uint64_t phys = c->refs[s].phys;
	uint64_t have[DEV_MAX];
	unsigned nh = 0;
	size_t keep = SIZE_MAX;

	for (unsigned d = 0; d < c->ndevs; d++)
		if (c->devs[d] && fsck_read_dev(c, d, phys, buf, 1) == 0)
			have[nh++] = csum_block(buf, phys);
	for (size_t i = s; i < e && keep == SIZE_MAX; i++)
		for (unsigned k = 0; k < nh; k++)
			if (!c->refs[i].unwritten && c->refs[i].csum == have[k])
				keep = i;
	if (keep == SIZE_MAX)
		keep = s;
	for (size_t i = s; i < e; i++) {
		struct bref *r = &c->refs[i];

		if (r->unwritten == c->refs[keep].unwritten && r->csum == c->refs[keep].csum)
			continue;
		fsck_meta_problem(c, false,
				  "%s: offset %llu: block %llu is also used by %s offset %llu "
				  "with other contents: unmapping it here (data lost)",
				  fsck_ipath(c, r->ino, p1, sizeof(p1)),
				  (unsigned long long)(r->fblk * TFS_BLOCK_SIZE),
				  (unsigned long long)phys, fsck_ipath(c, c->refs[keep].ino, p2,
								       sizeof(p2)),
				  (unsigned long long)(c->refs[keep].fblk * TFS_BLOCK_SIZE));
		r->cleared = true;
		fsck_clear_blocks(c, r->ino, r->fblk, 1);
	}
}

int fsck_pass_blocks(struct fck *c)
{
	struct tfs *fs = c->fs;
	struct alloc *a = NULL;
	void *buf = NULL;
	int ret;

	ret = collect_refs(c);
	if (ret < 0)
		return ret;
	if (posix_memalign(&buf, TFS_BLOCK_SIZE, TFS_BLOCK_SIZE))
		return -ENOMEM;
	for (size_t s = 0, e; s < c->nrefs; s = e) {
		bool agree = true;

		for (e = s + 1; e < c->nrefs && c->refs[e].phys == c->refs[s].phys; e++)
			if (c->refs[e].csum != c->refs[s].csum ||
			    c->refs[e].unwritten != c->refs[s].unwritten)
				agree = false;
		if (!agree)
			resolve_crosslink(c, s, e, buf);
	}
	free(buf);

	/* Free space is not stored: what the allocator rebuilds at mount from
	 * these references must give every block exactly its reference count. */
	ret = alloc_create(fs->sb.data_start, fs->sb.total_blocks, 0, &a);
	if (ret < 0)
		return ret;
	for (size_t i = 0; i < c->nrefs; i++)
		if (!c->refs[i].cleared && alloc_use(a, c->refs[i].phys, 1) < 0)
			fsck_hard_problem(c, "block %llu cannot be referenced (internal error)",
					  (unsigned long long)c->refs[i].phys);
	for (size_t s = 0, e; s < c->nrefs; s = e) {
		uint32_t n = 0;

		for (e = s; e < c->nrefs && c->refs[e].phys == c->refs[s].phys; e++)
			n += !c->refs[e].cleared;
		if (!n)
			continue;
		c->res->data_blocks++;
		if (n > 1)
			c->res->shared_blocks++;
		if (alloc_refs(a, c->refs[s].phys) != n)
			fsck_hard_problem(c,
					  "block %llu: %u references but the allocator counts %u",
					  (unsigned long long)c->refs[s].phys, n,
					  alloc_refs(a, c->refs[s].phys));
	}
	alloc_destroy(a);
	return 0;
}

/* ---- data checksums on every copy ---- */

/* Block i of a run read from every device into bufs (rbad: unreadable
 * there): counted per device, reported and, with -y/-p, every bad copy
 * rewritten from the first in-sync copy that verifies.  A stale device's
 * copy is a source only when no in-sync copy verifies and it does: the
 * checksum is XXH3-64 seeded with the block's address, so a copy that
 * verifies holds what the metadata says (a block it missed holds older
 * data, which does not), and refusing it would lose a block fsck can
 * give back.  The daemon's reads and its rebuild never read one.  Its bad
 * copies (most of what it missed) are not written one by one: the good
 * block goes into its buffer and pend[d][i] says so, for fsck_data_run to
 * write whole ranges. */
static void data_block(struct fck *c, const struct bref *r, uint8_t *const *bufs,
		       bool (*rbad)[FSCK_RUN_BLOCKS], bool (*pend)[FSCK_RUN_BLOCKS], uint32_t i)
{
	char path[FSCK_PATH_MAX];
	int goodd = -1, staled = -1;
	bool bad[DEV_MAX] = { false };
	unsigned nbad = 0;

	for (unsigned d = 0; d < c->ndevs; d++) {
		if (!c->devs[d])
			continue;
		c->res->dev[d].blocks++;
		if (!rbad[d][i] && csum_block(bufs[d] + (size_t)i * TFS_BLOCK_SIZE,
					      r->phys) == r->csum) {
			if (c->stale[d]) {
				if (staled < 0)
					staled = (int)d;
			} else if (goodd < 0)
				goodd = (int)d;
			continue;
		}
		bad[d] = true;
		nbad++;
		c->res->dev[d].bad++;
	}
	if (!nbad)
		return;
	if (goodd < 0 && staled >= 0) {
		goodd = staled;
		fsck_say(c, "%s: offset %llu (block %llu): only the stale device %s's copy "
			 "verifies: the source", fsck_ipath(c, r->ino, path, sizeof(path)),
			 (unsigned long long)(r->fblk * TFS_BLOCK_SIZE),
			 (unsigned long long)r->phys, c->devs[staled]->path);
	}
	if (goodd < 0) {
		c->res->unrecoverable++;
		fsck_hard_problem(c,
				  "%s: offset %llu (block %llu): no copy verifies: unrecoverable",
				  fsck_ipath(c, r->ino, path, sizeof(path)),
				  (unsigned long long)(r->fblk * TFS_BLOCK_SIZE),
				  (unsigned long long)r->phys);
		for (unsigned d = 0; d < c->ndevs; d++)
			if (c->stale[d])
				c->stale_unfixed[d]++;
		return;
	}
	for (unsigned d = 0; d < c->ndevs; d++) {
		bool ok;

		if (!bad[d])
			continue;
		if (c->fix && c->stale[d]) {
			memcpy(bufs[d] + (size_t)i * TFS_BLOCK_SIZE,
			       bufs[goodd] + (size_t)i * TFS_BLOCK_SIZE, TFS_BLOCK_SIZE);
			pend[d][i] = true;
			continue;
		}
		ok = c->fix && fsck_write_dev(c, d, r->phys,
					      bufs[goodd] + (size_t)i * TFS_BLOCK_SIZE, 1) == 0;
		if (ok) {
			c->res->dev[d].repaired++;
			atomic_fetch_add(&c->mir->ctr[d].repaired, 1);
		}
		if (c->stale[d]) {
			/* Expected on a device that missed writes: one line for the
			 * device, not one per block. */
			if (!ok)
				c->stale_unfixed[d]++;
			continue;
		}
		c->res->errors++;
		if (ok)
			c->res->fixed++;
		else
			c->left++;
		fsck_say(c, "%s: offset %llu (block %llu): bad copy on %s: %s",
			 fsck_ipath(c, r->ino, path, sizeof(path)),
			 (unsigned long long)(r->fblk * TFS_BLOCK_SIZE),
			 (unsigned long long)r->phys, c->devs[d]->path,
			 ok ? "rewritten from a good copy" : c->fix ? "REWRITE FAILED" : "not fixed (-n)");
	}
}

int fsck_data_bufs(struct fck *c, uint8_t *bufs[DEV_MAX])
{
	for (unsigned d = 0; d < DEV_MAX; d++)
		bufs[d] = NULL;
	for (unsigned d = 0; d < c->ndevs; d++) {
		if (c->devs[d] && posix_memalign((void **)&bufs[d], TFS_BLOCK_SIZE,
						 FSCK_RUN_BLOCKS * TFS_BLOCK_SIZE)) {
			fsck_data_bufs_free(bufs);
			return -ENOMEM;
		}
	}
	return 0;
}

void fsck_data_bufs_free(uint8_t *bufs[DEV_MAX])
{
	for (unsigned d = 0; d < DEV_MAX; d++) {
		free(bufs[d]);
		bufs[d] = NULL;
	}
}

void fsck_data_run(struct fck *c, const struct bref *const *run, uint32_t n,
		   uint8_t *const *bufs)
{
	bool rbad[DEV_MAX][FSCK_RUN_BLOCKS], pend[DEV_MAX][FSCK_RUN_BLOCKS];
	uint64_t start;

	if (!n)
		return;
	start = run[0]->phys;
	for (unsigned d = 0; d < c->ndevs; d++) {
		if (!c->devs[d])
			continue;
		memset(rbad[d], 0, n * sizeof(bool));
		memset(pend[d], 0, n * sizeof(bool));
		if (fsck_read_dev(c, d, start, bufs[d], n) == 0)
			continue;
		/* Find the unreadable blocks one by one. */
		for (uint32_t i = 0; i < n; i++)
			rbad[d][i] = fsck_read_dev(c, d, start + i,
						   bufs[d] + (size_t)i * TFS_BLOCK_SIZE, 1) < 0;
	}
	for (uint32_t i = 0; i < n; i++)
		data_block(c, run[i], bufs, rbad, pend, i);
	/* A stale device's bad copies, one write per range. */
	for (unsigned d = 0; d < c->ndevs; d++) {
		for (uint32_t i = 0, e; c->devs[d] && c->stale[d] && i < n; i = e) {
			for (e = i; e < n && pend[d][e]; e++)
				;
			if (e == i) {
				e++;
				continue;
			}
			if (fsck_write_dev(c, d, start + i, bufs[d] + (size_t)i * TFS_BLOCK_SIZE,
					   e - i) == 0) {
				c->res->dev[d].repaired += e - i;
				atomic_fetch_add(&c->mir->ctr[d].repaired, e - i);
			} else {
				c->stale_unfixed[d] += e - i;
			}
		}
	}
}

void fsck_data_flush(struct fck *c)
{
	if (!c->fix)
		return;
	for (unsigned d = 0; d < c->ndevs; d++)
		if (c->devs[d])
			dev_flush(c->be, c->devs[d]);
}

int fsck_pass_data(struct fck *c)
{
	uint8_t *bufs[DEV_MAX];
	const struct bref **run;
	int ret;

	run = malloc(FSCK_RUN_BLOCKS * sizeof(*run));
	if (!run)
		return -ENOMEM;
	ret = fsck_data_bufs(c, bufs);
	if (ret < 0) {
		free(run);
		return ret;
	}
	for (size_t s = 0; s < c->nrefs; ) {
		uint32_t n = 0;

		/* One representative per physical block (after pass_blocks every
		 * live reference to a block agrees), consecutive blocks only. */
		for (; s < c->nrefs && n < FSCK_RUN_BLOCKS; s++) {
			const struct bref *r = &c->refs[s];

			if (r->cleared || r->unwritten)
				continue;
			if (n && run[n - 1]->phys == r->phys)
				continue;
			if (n && run[n - 1]->phys + 1 != r->phys)
				break;
			run[n++] = r;
		}
		/* the other references to the run's last block */
		while (n && s < c->nrefs && c->refs[s].phys == run[n - 1]->phys)
			s++;
		fsck_data_run(c, run, n, bufs);
	}
	fsck_data_flush(c);
	fsck_data_bufs_free(bufs);
	free(run);
	return 0;
}
