// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: fuzz the metadata record decoder (log chunks and checkpoint
 * streams): malformed input is refused with -EUCLEAN, never read out of
 * bounds; what decodes re-encodes to the same bytes. */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int reencode(void *ctx, const struct log_rec *r)
{
	struct log_buf *b = ctx;
	const char *name = NULL;
	size_t nl = 0;

	switch (r->type) {
	case LR_DENT_SET: case LR_DENT_DEL:
		name = r->dent.name; nl = r->dent.namelen; break;
	case LR_XATTR_SET: case LR_XATTR_DEL:
		name = r->xattr.name; nl = r->xattr.namelen; break;
	default:
		break;
	}
	if (name) {
		assert(nl >= 1 && nl <= LOG_NAME_MAX);
	}
	assert(log_buf_add(b, r) == 0);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* A private copy so ASan catches any read past the input. */
	uint8_t *p = malloc(size ? size : 1);
	struct log_buf b;
	int ret;

	if (size)	/* libFuzzer passes the empty input as NULL */
		memcpy(p, data, size);
	log_buf_init(&b);
	ret = log_decode(p, size, reencode, &b);
	assert(ret == 0 || ret == -EUCLEAN);
	if (ret == 0) {
		assert(b.len == size);
		assert(size == 0 || memcmp(b.p, p, size) == 0);	/* b.p is NULL when empty */
	}
	log_buf_free(&b);
	free(p);
	return 0;
}

void fuzz_make_seeds(void (*emit)(const void *p, size_t len));
void fuzz_make_seeds(void (*emit)(const void *p, size_t len))
{
	struct log_buf b;
	struct log_rec r;
	uint64_t csums[3] = { 1, 2, 3 };

	log_buf_init(&b);
	memset(&r, 0, sizeof(r));
	r.type = LR_INODE;
	r.inode.ino = 2; r.inode.mode = 0100644; r.inode.nlink = 1; r.inode.size = 12288;
	log_buf_add(&b, &r);
	r.inode.ino = 3; r.inode.mode = 0120777; r.inode.target = "target"; r.inode.target_len = 6;
	log_buf_add(&b, &r);
	memset(&r, 0, sizeof(r));
	r.type = LR_DENT_SET;
	r.dent.parent = 1; r.dent.ino = 2; r.dent.name = "file"; r.dent.namelen = 4;
	log_buf_add(&b, &r);
	memset(&r, 0, sizeof(r));
	r.type = LR_EXT_SET;
	r.ext.ino = 2; r.ext.fblk = 0; r.ext.phys = 5000; r.ext.n = 3; r.ext.csums = csums;
	log_buf_add(&b, &r);
	memset(&r, 0, sizeof(r));
	r.type = LR_XATTR_SET;
	r.xattr.ino = 2; r.xattr.name = "user.k"; r.xattr.namelen = 6; r.xattr.val = "v"; r.xattr.vallen = 1;
	log_buf_add(&b, &r);
	emit(b.p, b.len);
	memset(&r, 0, sizeof(r));
	r.type = LR_EXT_CLEAR;
	r.clr.ino = 2; r.clr.fblk = 1; r.clr.n = 100;
	log_buf_add(&b, &r);
	r.type = LR_DENT_DEL;
	r.dent.parent = 1; r.dent.name = "file"; r.dent.namelen = 4;
	log_buf_add(&b, &r);
	r.type = LR_INODE_DEL;
	r.del.ino = 2;
	log_buf_add(&b, &r);
	emit(b.p, b.len);
	log_buf_free(&b);
}
