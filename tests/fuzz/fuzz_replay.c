// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: fuzz checkpoint load / log replay: arbitrary record streams
 * are applied with meta_apply() (replaying) to an in-memory file system on
 * top of a root directory, then what mount does next runs on the result
 * (orphan deletion, allocator rebuild from every extent), then the read
 * paths (getattr, readdir, lookup, listxattr, readlink) walk it.  Any input:
 * refused or applied, never a crash, a leak or undefined behaviour. */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "dir.h"
#include "fs_i.h"
#include "inode_i.h"
#include "fs_mem.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A 64 MiB device's geometry, so extents are checked against a real one. */
#define TOTAL 16384
#define DATA_START (16 + 4096)

struct ctx {
	struct tfs *fs;
	struct meta_tx drops;
};

static int apply_cb(void *c, const struct log_rec *r)
{
	struct ctx *x = c;

	/* replay stops at the first record it cannot apply (mount fails) */
	return meta_apply(x->fs, r, &x->drops);
}

static uint64_t walked;

/* What apply accepted never carries into the unwritten flag; the
 * allocator refuses blocks outside the data area (mount fails there). */
static int use_run(void *c, uint64_t fblk, uint64_t phys, uint32_t n,
		   const struct extent_ent *ents)
{
	struct tfs *fs = c;
	uint64_t p = EXTENT_PHYS(phys);

	assert(p && p + n <= EXTENT_UNWRITTEN && !((phys ^ ents[n - 1].phys) & EXTENT_UNWRITTEN));
	walked += n;
	(void)alloc_use(fs->alloc, p, n);
	return 0;
}

/* readdir holds the directory: lookups come after it */
struct names {
	char v[16][TFS_NAME_MAX + 1];
	int n;
};

static int fill(void *c, const char *name, const struct stat *st, uint64_t next_off)
{
	struct names *nm = c;

	if (nm->n < 16)
		strncpy(nm->v[nm->n++], name, TFS_NAME_MAX);
	return 0;
}

static void walk(struct tfs *fs)
{
	uint64_t next = atomic_load(&fs->next_ino);
	uint64_t inos[256];
	size_t n = 0;

	/* every inode the table holds (bounded), as mount_rebuild sees them */
	pthread_rwlock_rdlock(&fs->itab->lock);
	for (size_t b = 0; fs->itab->b && b < fs->itab->size && n < 256; b++)
		for (struct tfs_inode *ip = fs->itab->b[b]; ip && n < 256; ip = ip->hnext)
			inos[n++] = ip->ino;
	pthread_rwlock_unlock(&fs->itab->lock);
	assert(next > TFS_ROOT_INO);

	for (size_t i = 0; i < n; i++) {
		struct tfs_inode *ip = fs_iget(fs, inos[i]);
		struct stat st;
		char buf[512];

		if (!ip)
			continue;
		if (ip->nlink == 0 && ip->ino != TFS_ROOT_INO) {
			struct log_rec r = { .type = LR_INODE_DEL };
			struct meta_tx tx;

			meta_tx_init(&tx);
			r.del.ino = ip->ino;
			assert(meta_apply(fs, &r, &tx) == 0);
			meta_tx_free(&tx);
			continue;
		}
		assert(ip->ino < next);
		walked = 0;
		(void)extent_walk(&ip->map, 0, EXTENT_MAX_FBLK, use_run, fs);
		assert(walked == extent_mapped(&ip->map));
		assert(tfs_getattr(fs, inos[i], &st) == 0);
		(void)tfs_listxattr(fs, inos[i], buf, sizeof(buf));
		(void)tfs_readlink(fs, inos[i], buf, sizeof(buf));
		if (ip->dir) {
			struct dir_ent e;
			uint64_t ck = 0, guard = 0;

			while (dir_next(ip->dir, ck, &e) == 0 && guard++ < 100000) {
				uint64_t ino;

				assert(e.namelen >= 1 && e.namelen <= TFS_NAME_MAX);
				assert(dir_lookup(ip->dir, e.name, e.namelen, &ino) == 0 && ino == e.ino);
				ck = e.cookie + 1;
			}
		}
	}
	{
		struct names nm = { .n = 0 };
		struct stat st;

		(void)tfs_readdir(fs, TFS_ROOT_INO, 0, true, fill, &nm);
		for (int i = 0; i < nm.n; i++)
			(void)tfs_lookup(fs, TFS_ROOT_INO, nm.v[i], &st);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *p = malloc(size ? size : 1);
	struct ctx x;
	struct log_rec root;
	int ret;

	if (size)	/* a private copy: ASan sees any overread; empty input may be NULL */
		memcpy(p, data, size);
	x.fs = tfs_mem_new();
	assert(x.fs);
	meta_tx_init(&x.drops);

	memset(&root, 0, sizeof(root));
	root.type = LR_INODE;
	root.inode.ino = TFS_ROOT_INO;
	root.inode.parent = TFS_ROOT_INO;
	root.inode.mode = S_IFDIR | 0755;
	root.inode.nlink = 2;
	assert(meta_apply(x.fs, &root, &x.drops) == 0);

	ret = log_decode(p, size, apply_cb, &x);
	assert(ret <= 0);
	if (ret == 0) {
		/* what mount does with a state it accepted */
		assert(alloc_create(DATA_START, TOTAL, 64, &x.fs->alloc) == 0);
		x.fs->replaying = false;
		walk(x.fs);
		/* applying the same stream again live must not corrupt memory */
		(void)log_decode(p, size, apply_cb, &x);
	}
	meta_tx_free(&x.drops);
	tfs_mem_free(x.fs);
	free(p);
	return 0;
}

void fuzz_make_seeds(void (*emit)(const void *p, size_t len));
void fuzz_make_seeds(void (*emit)(const void *p, size_t len))
{
	struct log_buf b;
	struct log_rec r;
	uint64_t csums[4] = { 1, 2, 3, 4 };

	log_buf_init(&b);
	memset(&r, 0, sizeof(r));
	r.type = LR_INODE;
	r.inode.ino = 2; r.inode.parent = 1; r.inode.mode = S_IFDIR | 0755; r.inode.nlink = 2;
	log_buf_add(&b, &r);
	r.inode.ino = 3; r.inode.parent = 0; r.inode.mode = S_IFREG | 0644; r.inode.nlink = 1;
	r.inode.size = 5 * 4096;
	log_buf_add(&b, &r);
	r.inode.ino = 4; r.inode.mode = S_IFLNK | 0777; r.inode.target = "f"; r.inode.target_len = 1;
	r.inode.size = 1;
	log_buf_add(&b, &r);
	memset(&r, 0, sizeof(r));
	r.type = LR_DENT_SET;
	r.dent.parent = 1; r.dent.ino = 2; r.dent.name = "d"; r.dent.namelen = 1;
	log_buf_add(&b, &r);
	r.dent.parent = 2; r.dent.ino = 3; r.dent.name = "f"; r.dent.namelen = 1;
	log_buf_add(&b, &r);
	r.dent.parent = 1; r.dent.ino = 4; r.dent.name = "l"; r.dent.namelen = 1;
	log_buf_add(&b, &r);
	memset(&r, 0, sizeof(r));
	r.type = LR_EXT_SET;
	r.ext.ino = 3; r.ext.fblk = 0; r.ext.phys = DATA_START + 10; r.ext.n = 4; r.ext.csums = csums;
	log_buf_add(&b, &r);
	r.ext.fblk = 511; r.ext.phys = (DATA_START + 100) | EXTENT_UNWRITTEN; r.ext.n = 2;
	r.ext.csums = NULL;
	log_buf_add(&b, &r);
	memset(&r, 0, sizeof(r));
	r.type = LR_XATTR_SET;
	r.xattr.ino = 3; r.xattr.name = "user.k"; r.xattr.namelen = 6; r.xattr.val = "v";
	r.xattr.vallen = 1;
	log_buf_add(&b, &r);
	emit(b.p, b.len);
	memset(&r, 0, sizeof(r));
	r.type = LR_EXT_CLEAR;
	r.clr.ino = 3; r.clr.fblk = 1; r.clr.n = 2;
	log_buf_add(&b, &r);
	memset(&r, 0, sizeof(r));
	r.type = LR_XATTR_DEL;
	r.xattr.ino = 3; r.xattr.name = "user.k"; r.xattr.namelen = 6;
	log_buf_add(&b, &r);
	memset(&r, 0, sizeof(r));
	r.type = LR_DENT_DEL;
	r.dent.parent = 2; r.dent.name = "f"; r.dent.namelen = 1;
	log_buf_add(&b, &r);
	memset(&r, 0, sizeof(r));
	r.type = LR_INODE;
	r.inode.ino = 3; r.inode.mode = S_IFREG | 0644; r.inode.nlink = 0;
	log_buf_add(&b, &r);
	emit(b.p, b.len);
	memset(&r, 0, sizeof(r));
	r.type = LR_INODE_DEL;
	r.del.ino = 3;
	log_buf_add(&b, &r);
	emit(b.p, b.len);
	/* regressions: an inode number that wrapped next_ino to 0, and a
	 * phys whose second block carried into the unwritten flag */
	log_buf_reset(&b);
	memset(&r, 0, sizeof(r));
	r.type = LR_INODE;
	r.inode.ino = UINT64_MAX; r.inode.mode = S_IFREG | 0644; r.inode.nlink = 1;
	log_buf_add(&b, &r);
	emit(b.p, b.len);
	log_buf_reset(&b);
	r.inode.ino = 5;
	log_buf_add(&b, &r);
	memset(&r, 0, sizeof(r));
	r.type = LR_EXT_SET;
	r.ext.ino = 5; r.ext.phys = EXTENT_UNWRITTEN - 1; r.ext.n = 2; r.ext.csums = csums;
	log_buf_add(&b, &r);
	emit(b.p, b.len);
	log_buf_free(&b);
}
