// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * logrec: the metadata record codec shared by the log and the checkpoint.
 *
 * A record is an 8-byte header {u16 type, u16 flags (0), u32 body_len}
 * followed by body_len bytes: the type's fixed fields, then its variable
 * bytes (name, value, target, csums).  Everything is little-endian and
 * unaligned; see docs/FORMAT.md for every type.
 *
 * log_decode treats its input as hostile (it is fuzzed): every length is
 * checked against the bytes that remain before anything is read, and a
 * body must have exactly the length its fields imply.  Decoded pointers
 * (names, values, targets, csums) point into the input and are NOT aligned
 * nor NUL-terminated: read csums with memcpy, use the lengths for names.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "extent.h"
#include "log.h"

#define REC_HDR 8u

/* Fixed part of each body (bytes). */
#define BODY_INODE LOG_INODE_BODY	/* 2*u64, 5*u32, 3*u64, 4*i64, u32 target_len */
#define BODY_DEL 8u		/* ino */
#define BODY_DENT 18u		/* parent, ino, u16 namelen */
#define BODY_EXT 28u		/* ino, fblk, phys, u32 n */
#define BODY_CLR 24u		/* ino, fblk, n */
#define BODY_XSET 14u		/* ino, u16 namelen, u32 vallen */
#define BODY_XDEL 10u		/* ino, u16 namelen */

/* ---- little-endian cursor ---- */

static void put16(uint8_t **p, uint16_t v)
{
	(*p)[0] = (uint8_t)v;
	(*p)[1] = (uint8_t)(v >> 8);
	*p += 2;
}

static void put32(uint8_t **p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		(*p)[i] = (uint8_t)(v >> (8 * i));
	*p += 4;
}

static void put64(uint8_t **p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		(*p)[i] = (uint8_t)(v >> (8 * i));
	*p += 8;
}

static void putbytes(uint8_t **p, const void *src, size_t n)
{
	if (n)
		memcpy(*p, src, n);
	*p += n;
}

/* Reads never go past the end: callers check the body length first. */
static uint16_t get16(const uint8_t **p)
{
	uint16_t v = (uint16_t)((*p)[0] | (*p)[1] << 8);

	*p += 2;
	return v;
}

static uint32_t get32(const uint8_t **p)
{
	uint32_t v = 0;

	for (int i = 0; i < 4; i++)
		v |= (uint32_t)(*p)[i] << (8 * i);
	*p += 4;
	return v;
}

static uint64_t get64(const uint8_t **p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v |= (uint64_t)(*p)[i] << (8 * i);
	*p += 8;
	return v;
}

/* ---- validation shared by encoder and decoder ---- */

/* A directory entry name: 1..255 bytes, no '/' nor NUL, not "." or "..". */
bool log_dent_name_ok(const char *name, size_t len)
{
	if (len < 1 || len > LOG_NAME_MAX || !name)
		return false;
	if (memchr(name, '/', len) || memchr(name, '\0', len))
		return false;
	if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
		return false;
	return true;
}

/* An xattr name: 1..255 bytes, no NUL ('/' is legal in xattr names). */
bool log_xattr_name_ok(const char *name, size_t len)
{
	return len >= 1 && len <= LOG_NAME_MAX && name && !memchr(name, '\0', len);
}

/* Body length of r, or 0 when a field is out of range. */
static size_t body_len(const struct log_rec *r)
{
	switch (r->type) {
	case LR_INODE:
		if (r->inode.target_len > LOG_SYMLINK_MAX ||
		    (r->inode.target_len && !r->inode.target))
			return 0;
		return BODY_INODE + r->inode.target_len;
	case LR_INODE_DEL:
		return BODY_DEL;
	case LR_DENT_SET:
	case LR_DENT_DEL:
		if (!log_dent_name_ok(r->dent.name, r->dent.namelen))
			return 0;
		return BODY_DENT + r->dent.namelen;
	case LR_EXT_SET:
		if (r->ext.n < 1 || r->ext.n > LOG_EXT_MAX_BLOCKS)
			return 0;
		/* Unwritten blocks have no checksums to carry: NULL csums
		 * writes the short form (format v2's fallocate). */
		if (!r->ext.csums)
			return (r->ext.phys & EXTENT_UNWRITTEN) ? BODY_EXT : 0;
		return BODY_EXT + 8u * r->ext.n;
	case LR_EXT_CLEAR:
		if (r->clr.n < 1)
			return 0;
		return BODY_CLR;
	case LR_XATTR_SET:
		if (!log_xattr_name_ok(r->xattr.name, r->xattr.namelen) ||
		    r->xattr.vallen > LOG_XATTR_VAL_MAX || (r->xattr.vallen && !r->xattr.val))
			return 0;
		return BODY_XSET + r->xattr.namelen + (size_t)r->xattr.vallen;
	case LR_XATTR_DEL:
		if (!log_xattr_name_ok(r->xattr.name, r->xattr.namelen))
			return 0;
		return BODY_XDEL + r->xattr.namelen;
	default:
		return 0;
	}
}

/* ---- the INODE body (shared with format v2's INODE items, v2item.c) ---- */

void log_inode_put(uint8_t *p, const struct log_inode *in)
{
	put64(&p, in->ino);
	put64(&p, in->parent);
	put32(&p, in->mode);
	put32(&p, in->uid);
	put32(&p, in->gid);
	put32(&p, in->nlink);
	put32(&p, in->flags);
	put64(&p, in->rdev);
	put64(&p, in->size);
	put64(&p, in->gen);
	put64(&p, (uint64_t)in->atime_ns);
	put64(&p, (uint64_t)in->mtime_ns);
	put64(&p, (uint64_t)in->ctime_ns);
	put64(&p, (uint64_t)in->btime_ns);
	put32(&p, in->target_len);
}

void log_inode_get(const uint8_t *p, struct log_inode *in)
{
	in->ino = get64(&p);
	in->parent = get64(&p);
	in->mode = get32(&p);
	in->uid = get32(&p);
	in->gid = get32(&p);
	in->nlink = get32(&p);
	in->flags = get32(&p);
	in->rdev = get64(&p);
	in->size = get64(&p);
	in->gen = get64(&p);
	in->atime_ns = (int64_t)get64(&p);
	in->mtime_ns = (int64_t)get64(&p);
	in->ctime_ns = (int64_t)get64(&p);
	in->btime_ns = (int64_t)get64(&p);
	in->target_len = get32(&p);
	in->target = NULL;
}

/* ---- log_buf ---- */

void log_buf_init(struct log_buf *b)
{
	b->p = NULL;
	b->len = b->cap = 0;
	b->reserved = false;
}

void log_buf_reset(struct log_buf *b)
{
	b->len = 0;
}

void log_buf_free(struct log_buf *b)
{
	free(b->p);
	log_buf_init(b);
}

static int buf_reserve(struct log_buf *b, size_t more)
{
	size_t cap = b->cap ? b->cap : 256;
	uint8_t *np;

	if (b->len + more <= b->cap)
		return 0;
	while (cap < b->len + more)
		cap *= 2;
	np = realloc(b->p, cap);
	if (!np)
		return -ENOMEM;
	b->p = np;
	b->cap = cap;
	return 0;
}

int log_buf_add(struct log_buf *b, const struct log_rec *r)
{
	size_t blen = body_len(r);
	uint8_t *p;
	int ret;

	if (!blen)
		return -EINVAL;
	ret = buf_reserve(b, REC_HDR + blen);
	if (ret)
		return ret;
	p = b->p + b->len;
	put16(&p, r->type);
	put16(&p, 0);
	put32(&p, (uint32_t)blen);
	switch (r->type) {
	case LR_INODE:
		log_inode_put(p, &r->inode);
		p += BODY_INODE;
		putbytes(&p, r->inode.target, r->inode.target_len);
		break;
	case LR_INODE_DEL:
		put64(&p, r->del.ino);
		break;
	case LR_DENT_SET:
	case LR_DENT_DEL:
		put64(&p, r->dent.parent);
		put64(&p, r->dent.ino);
		put16(&p, r->dent.namelen);
		putbytes(&p, r->dent.name, r->dent.namelen);
		break;
	case LR_EXT_SET:
		put64(&p, r->ext.ino);
		put64(&p, r->ext.fblk);
		put64(&p, r->ext.phys);
		put32(&p, r->ext.n);
		/* csums are host u64s; stored little-endian */
		for (uint32_t i = 0; r->ext.csums && i < r->ext.n; i++) {
			uint64_t c;

			memcpy(&c, (const uint8_t *)r->ext.csums + 8 * i, 8);
			put64(&p, c);
		}
		break;
	case LR_EXT_CLEAR:
		put64(&p, r->clr.ino);
		put64(&p, r->clr.fblk);
		put64(&p, r->clr.n);
		break;
	case LR_XATTR_SET:
		put64(&p, r->xattr.ino);
		put16(&p, r->xattr.namelen);
		put32(&p, r->xattr.vallen);
		putbytes(&p, r->xattr.name, r->xattr.namelen);
		putbytes(&p, r->xattr.val, r->xattr.vallen);
		break;
	case LR_XATTR_DEL:
		put64(&p, r->xattr.ino);
		put16(&p, r->xattr.namelen);
		putbytes(&p, r->xattr.name, r->xattr.namelen);
		break;
	}
	b->len = (size_t)(p - b->p);
	return 0;
}

/* ---- decoding ---- */

/* Decode one body of exactly blen bytes at p into r.  0 or -EUCLEAN. */
static int decode_body(uint16_t type, const uint8_t *p, size_t blen, struct log_rec *r)
{
	memset(r, 0, sizeof(*r));
	r->type = type;
	switch (type) {
	case LR_INODE: {
		struct log_inode *in = &r->inode;

		if (blen < BODY_INODE)
			return -EUCLEAN;
		log_inode_get(p, in);
		p += BODY_INODE;
		if (in->target_len > LOG_SYMLINK_MAX || blen != BODY_INODE + in->target_len)
			return -EUCLEAN;
		in->target = in->target_len ? (const char *)p : NULL;
		return 0;
	}
	case LR_INODE_DEL:
		if (blen != BODY_DEL)
			return -EUCLEAN;
		r->del.ino = get64(&p);
		return 0;
	case LR_DENT_SET:
	case LR_DENT_DEL:
		if (blen < BODY_DENT)
			return -EUCLEAN;
		r->dent.parent = get64(&p);
		r->dent.ino = get64(&p);
		r->dent.namelen = get16(&p);
		r->dent.name = (const char *)p;
		if (blen != BODY_DENT + (size_t)r->dent.namelen ||
		    !log_dent_name_ok(r->dent.name, r->dent.namelen))
			return -EUCLEAN;
		return 0;
	case LR_EXT_SET:
		if (blen < BODY_EXT)
			return -EUCLEAN;
		r->ext.ino = get64(&p);
		r->ext.fblk = get64(&p);
		r->ext.phys = get64(&p);
		r->ext.n = get32(&p);
		if (r->ext.n < 1 || r->ext.n > LOG_EXT_MAX_BLOCKS)
			return -EUCLEAN;
		/* The short form: unwritten blocks, no checksums. */
		if (blen == BODY_EXT && (r->ext.phys & EXTENT_UNWRITTEN)) {
			r->ext.csums = NULL;
			return 0;
		}
		if (blen != BODY_EXT + 8u * (size_t)r->ext.n)
			return -EUCLEAN;
		r->ext.csums = p;	/* unaligned little-endian u64s */
		return 0;
	case LR_EXT_CLEAR:
		if (blen != BODY_CLR)
			return -EUCLEAN;
		r->clr.ino = get64(&p);
		r->clr.fblk = get64(&p);
		r->clr.n = get64(&p);
		return r->clr.n < 1 ? -EUCLEAN : 0;
	case LR_XATTR_SET:
		if (blen < BODY_XSET)
			return -EUCLEAN;
		r->xattr.ino = get64(&p);
		r->xattr.namelen = get16(&p);
		r->xattr.vallen = get32(&p);
		if (r->xattr.vallen > LOG_XATTR_VAL_MAX ||
		    blen != BODY_XSET + (size_t)r->xattr.namelen + r->xattr.vallen)
			return -EUCLEAN;
		r->xattr.name = (const char *)p;
		r->xattr.val = r->xattr.vallen ? p + r->xattr.namelen : NULL;
		return log_xattr_name_ok(r->xattr.name, r->xattr.namelen) ? 0 : -EUCLEAN;
	case LR_XATTR_DEL:
		if (blen < BODY_XDEL)
			return -EUCLEAN;
		r->xattr.ino = get64(&p);
		r->xattr.namelen = get16(&p);
		if (blen != BODY_XDEL + (size_t)r->xattr.namelen)
			return -EUCLEAN;
		r->xattr.name = (const char *)p;
		return log_xattr_name_ok(r->xattr.name, r->xattr.namelen) ? 0 : -EUCLEAN;
	default:
		return -EUCLEAN;
	}
}

int log_decode(const void *buf, size_t len, log_rec_fn cb, void *ctx)
{
	const uint8_t *p = buf, *end = p + len;
	struct log_rec r;

	while (p < end) {
		const uint8_t *h = p;
		uint16_t type, flags;
		uint32_t blen;
		int ret;

		if ((size_t)(end - p) < REC_HDR)
			return -EUCLEAN;
		type = get16(&h);
		flags = get16(&h);
		blen = get32(&h);
		if (flags != 0 || (size_t)(end - h) < blen)
			return -EUCLEAN;
		ret = decode_body(type, h, blen, &r);
		if (ret)
			return ret;
		p = h + blen;
		if (cb) {
			ret = cb(ctx, &r);
			if (ret)
				return ret;
		}
	}
	return 0;
}
