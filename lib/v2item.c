// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * v2item: keys and value codecs of the format-v2 tree items (v2item.h,
 * docs/FORMAT.md).  A leaf: it calls only the record codec (logrec.c, for
 * the INODE body and the name rules) and csum.c (the name hash).
 *
 * Every decoder treats its input as hostile: lengths are checked before
 * anything is read, a value must have exactly the length its fields imply,
 * and lists must be sorted, so one set of fields has one encoding (fsck
 * can compare bytes, and a bit flip that still decodes is a different
 * item, not a second spelling of the same one).
 */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "csum.h"
#include "le.h"
#include "v2item.h"

uint64_t v2_hash56(uint64_t seed, const char *name, size_t len)
{
	return csum_buf(name, len, seed) & V2_HASH_MASK;
}

/* ---- keys ---- */

static struct bkey mk(uint64_t id, uint8_t type, uint64_t off)
{
	struct bkey k = { id, type, off & BKEY_OFF_MAX };

	return k;
}

struct bkey v2_key_inode(uint64_t ino) { return mk(ino, V2_INODE, 0); }
struct bkey v2_key_symlink(uint64_t ino, unsigned chunk) { return mk(ino, V2_SYMLINK, chunk); }
struct bkey v2_key_dirent(uint64_t dir, uint64_t hash) { return mk(dir, V2_DIRENT, hash); }
struct bkey v2_key_dirindex(uint64_t dir, uint64_t cookie) { return mk(dir, V2_DIRINDEX, cookie); }
struct bkey v2_key_xattr(uint64_t ino, uint64_t hash) { return mk(ino, V2_XATTR, hash); }
struct bkey v2_key_extent(uint64_t ino, uint64_t fblk) { return mk(ino, V2_EXTENT, fblk); }
struct bkey v2_key_orphan(uint64_t ino) { return mk(0, V2_ORPHAN, ino); }
struct bkey v2_key_refcount(uint64_t phys) { return mk(phys, V2_REFCOUNT, 0); }
struct bkey v2_key_free(uint64_t start, uint64_t n) { return mk(start, V2_FREE, n); }

struct bkey v2_key_xchunk(uint64_t ino, uint64_t vid, unsigned chunk)
{
	return mk(ino, V2_XCHUNK, vid << 16 | (chunk & 0xffff));
}

/* [start, start + n) is a nonempty run of block numbers a device can have. */
static bool run_ok(uint64_t start, uint64_t n, uint64_t limit)
{
	return n >= 1 && start < limit && n <= limit - start;
}

/* ---- INODE ---- */

static bool inode_ok(const struct log_inode *in)
{
	switch (in->mode & S_IFMT) {
	case S_IFREG: case S_IFDIR: case S_IFLNK: case S_IFCHR:
	case S_IFBLK: case S_IFIFO: case S_IFSOCK:
		break;
	default:
		return false;
	}
	if (in->ino == 0 || in->size > (uint64_t)INT64_MAX || in->target_len > LOG_SYMLINK_MAX)
		return false;
	if (in->mapped > (S_ISREG(in->mode) ? V2_FBLK_LIMIT : 0))
		return false;
	/* The target length says whether SYMLINK items exist: only a symlink
	 * has them, and a symlink always has a target. */
	return S_ISLNK(in->mode) == (in->target_len != 0);
}

int v2_inode_encode(const struct log_inode *in, uint8_t out[V2_INODE_LEN])
{
	if (!inode_ok(in))
		return -EINVAL;
	log_inode_put(out, in);
	le64_put(out + LOG_INODE_BODY, in->mapped);
	return 0;
}

int v2_inode_decode(const struct bkey *k, const void *val, unsigned len, struct log_inode *in)
{
	if (k->type != V2_INODE || k->off != 0 || len != V2_INODE_LEN)
		return -EUCLEAN;
	log_inode_get(val, in);
	in->mapped = le64_get((const uint8_t *)val + LOG_INODE_BODY);
	if (!inode_ok(in) || in->ino != k->id)
		return -EUCLEAN;
	return 0;
}

/* ---- SYMLINK ---- */

unsigned v2_symlink_chunks(uint32_t target_len)
{
	return (target_len + V2_SYMLINK_CHUNK - 1) / V2_SYMLINK_CHUNK;
}

unsigned v2_symlink_chunk_len(uint32_t target_len, unsigned n)
{
	uint64_t at = (uint64_t)n * V2_SYMLINK_CHUNK;

	if (target_len > LOG_SYMLINK_MAX || at >= target_len)
		return 0;
	return target_len - at < V2_SYMLINK_CHUNK ? (unsigned)(target_len - at) : V2_SYMLINK_CHUNK;
}

int v2_symlink_check(const struct bkey *k, unsigned len, uint32_t target_len)
{
	if (k->type != V2_SYMLINK || k->id == 0 || k->off >= v2_symlink_chunks(LOG_SYMLINK_MAX))
		return -EUCLEAN;
	if (target_len)
		return len == v2_symlink_chunk_len(target_len, (unsigned)k->off) ? 0 : -EUCLEAN;
	return len >= 1 && len <= V2_SYMLINK_CHUNK ? 0 : -EUCLEAN;
}

/* ---- lists of named entries (DIRENT, XATTR) ---- */

/* Parse the entry at p (rem bytes left): its size and name; fills the
 * caller's entry struct.  -EUCLEAN when it is not a valid entry. */
typedef int (*parse_fn)(const uint8_t *p, unsigned rem, void *e, unsigned *size,
			const char **name, uint16_t *namelen);

static bool dtype_ok(uint8_t t)
{
	/* DT_FIFO, DT_CHR, DT_DIR, DT_BLK, DT_REG, DT_LNK, DT_SOCK */
	return t == 1 || t == 2 || t == 4 || t == 6 || t == 8 || t == 10 || t == 12;
}

static int parse_dirent(const uint8_t *p, unsigned rem, void *ev, unsigned *size,
			const char **name, uint16_t *namelen)
{
	struct v2_dirent *e = ev;

	if (rem < V2_DIRENT_HDR)
		return -EUCLEAN;
	e->ino = le64_get(p);
	e->dtype = p[8];
	e->namelen = le16_get(p + 9);
	e->name = (const char *)p + V2_DIRENT_HDR;
	*size = V2_DIRENT_HDR + e->namelen;
	if (e->namelen > rem - V2_DIRENT_HDR || !e->ino || !dtype_ok(e->dtype) ||
	    !log_dent_name_ok(e->name, e->namelen))
		return -EUCLEAN;
	*name = e->name;
	*namelen = e->namelen;
	return 0;
}

static int parse_xattr(const uint8_t *p, unsigned rem, void *xv, unsigned *size,
		       const char **name, uint16_t *namelen)
{
	struct v2_xattr *x = xv;
	uint64_t need;

	if (rem < V2_XATTR_HDR)
		return -EUCLEAN;
	x->namelen = le16_get(p);
	x->vallen = le32_get(p + 2);
	x->vid = le64_get(p + 6);
	x->name = (const char *)p + V2_XATTR_HDR;
	x->val = x->vid ? NULL : p + V2_XATTR_HDR + x->namelen;
	/* Inline exactly when small: one encoding per value. */
	if (x->vallen > LOG_XATTR_VAL_MAX || x->vid >= V2_VID_LIMIT ||
	    (x->vid == 0) != (x->vallen <= V2_XATTR_INLINE_MAX))
		return -EUCLEAN;
	need = (uint64_t)V2_XATTR_HDR + x->namelen + (x->vid ? 0 : x->vallen);
	if (need > rem || !log_xattr_name_ok(x->name, x->namelen))
		return -EUCLEAN;
	*size = (unsigned)need;
	*name = x->name;
	*namelen = x->namelen;
	return 0;
}

/* Names order bytewise, a prefix first. */
static int name_cmp(const char *a, uint16_t alen, const char *b, uint16_t blen)
{
	int c = memcmp(a, b, alen < blen ? alen : blen);

	return c ? c : (int)alen - (int)blen;
}

static int list_next(parse_fn parse, const void *val, unsigned len, unsigned *pos, void *e)
{
	const char *name;
	uint16_t nl;
	unsigned size;
	int ret;

	if (*pos >= len)
		return 0;
	ret = parse((const uint8_t *)val + *pos, len - *pos, e, &size, &name, &nl);
	if (ret)
		return ret;
	*pos += size;
	return 1;
}

/* The whole list: 1.. valid entries, each name hashing to k->off, names
 * strictly ascending, nothing after the last. */
static int list_check(parse_fn parse, uint64_t hseed, const struct bkey *k, const void *val,
		      unsigned len, void *e)
{
	const char *prev = NULL, *name;
	uint16_t prevlen = 0, nl;
	unsigned pos = 0, size;
	int ret;

	if (len == 0 || len > BNODE_MAX_VAL)
		return -EUCLEAN;
	while (pos < len) {
		ret = parse((const uint8_t *)val + pos, len - pos, e, &size, &name, &nl);
		if (ret)
			return ret;
		if (v2_hash56(hseed, name, nl) != k->off ||
		    (prev && name_cmp(prev, prevlen, name, nl) >= 0))
			return -EUCLEAN;
		prev = name;
		prevlen = nl;
		pos += size;
	}
	return 0;
}

/* Where @name is (0, *at, *size) or would go (-ENOENT, *at).  The list is
 * one the caller built or checked: a parse error is -EUCLEAN. */
static int list_find(parse_fn parse, const void *val, unsigned len, const char *name,
		     uint16_t namelen, void *e, unsigned *at, unsigned *size)
{
	const char *n;
	uint16_t nl;
	int ret, c;

	for (*at = 0; *at < len; *at += *size) {
		ret = parse((const uint8_t *)val + *at, len - *at, e, size, &n, &nl);
		if (ret)
			return ret;
		c = name_cmp(n, nl, name, namelen);
		if (c == 0)
			return 0;
		if (c > 0)
			break;
	}
	return -ENOENT;
}

static int list_add(parse_fn parse, void *val, unsigned *len, unsigned cap, const void *ent,
		    unsigned entlen, const char *name, uint16_t namelen, void *scratch)
{
	uint8_t *v = val;
	unsigned at, size;
	int ret;

	ret = list_find(parse, val, *len, name, namelen, scratch, &at, &size);
	if (ret == 0)
		return -EEXIST;
	if (ret != -ENOENT)
		return ret;
	if (cap > BNODE_MAX_VAL)
		cap = BNODE_MAX_VAL;
	if (*len + entlen > cap)
		return -E2BIG;
	memmove(v + at + entlen, v + at, *len - at);
	memcpy(v + at, ent, entlen);
	*len += entlen;
	return 0;
}

static int list_del(parse_fn parse, void *val, unsigned *len, const char *name,
		    uint16_t namelen, void *scratch)
{
	uint8_t *v = val;
	unsigned at, size;
	int ret;

	ret = list_find(parse, val, *len, name, namelen, scratch, &at, &size);
	if (ret)
		return ret;
	memmove(v + at, v + at + size, *len - at - size);
	*len -= size;
	return 0;
}

/* ---- DIRENT, DIRINDEX ---- */

static bool dirent_ok(const struct v2_dirent *e)
{
	return e->ino && dtype_ok(e->dtype) && log_dent_name_ok(e->name, e->namelen);
}

static unsigned dirent_put(const struct v2_dirent *e, uint8_t *out)
{
	le64_put(out, e->ino);
	out[8] = e->dtype;
	le16_put(out + 9, e->namelen);
	memcpy(out + V2_DIRENT_HDR, e->name, e->namelen);
	return V2_DIRENT_HDR + e->namelen;
}

bool v2_dtype_ok(uint8_t t)
{
	switch (t) {
	case DT_FIFO: case DT_CHR: case DT_DIR: case DT_BLK: case DT_REG: case DT_LNK: case DT_SOCK:
		return true;
	default:
		return false;
	}
}

int v2_dirent_next(const void *val, unsigned len, unsigned *pos, struct v2_dirent *e)
{
	return list_next(parse_dirent, val, len, pos, e);
}

int v2_dirent_check(uint64_t hseed, const struct bkey *k, const void *val, unsigned len)
{
	struct v2_dirent e;

	if (k->type != V2_DIRENT || k->id == 0)
		return -EUCLEAN;
	return list_check(parse_dirent, hseed, k, val, len, &e);
}

int v2_dirent_find(const void *val, unsigned len, const char *name, uint16_t namelen,
		   struct v2_dirent *e)
{
	unsigned at, size;

	return list_find(parse_dirent, val, len, name, namelen, e, &at, &size);
}

int v2_dirent_add(void *val, unsigned *len, unsigned cap, const struct v2_dirent *e)
{
	uint8_t ent[V2_DIRENT_HDR + LOG_NAME_MAX];
	struct v2_dirent scratch;

	if (!dirent_ok(e))
		return -EINVAL;
	return list_add(parse_dirent, val, len, cap, ent, dirent_put(e, ent), e->name,
			e->namelen, &scratch);
}

int v2_dirent_del(void *val, unsigned *len, const char *name, uint16_t namelen)
{
	struct v2_dirent scratch;

	return list_del(parse_dirent, val, len, name, namelen, &scratch);
}

int v2_dirindex_encode(const struct v2_dirent *e, void *out, unsigned cap, unsigned *len)
{
	if (!dirent_ok(e))
		return -EINVAL;
	if (cap < V2_DIRENT_HDR + (unsigned)e->namelen)
		return -E2BIG;
	*len = dirent_put(e, out);
	return 0;
}

int v2_dirindex_decode(const struct bkey *k, const void *val, unsigned len, struct v2_dirent *e)
{
	const char *name;
	unsigned size;
	uint16_t nl;

	if (k->type != V2_DIRINDEX || k->id == 0 || k->off < V2_COOKIE_FIRST)
		return -EUCLEAN;
	if (parse_dirent(val, len, e, &size, &name, &nl) || size != len)
		return -EUCLEAN;
	return 0;
}

/* ---- XATTR, XCHUNK ---- */

static unsigned xattr_put(const struct v2_xattr *x, uint8_t *out)
{
	unsigned inl = x->vid ? 0 : x->vallen;

	le16_put(out, x->namelen);
	le32_put(out + 2, x->vallen);
	le64_put(out + 6, x->vid);
	memcpy(out + V2_XATTR_HDR, x->name, x->namelen);
	if (inl)
		memcpy(out + V2_XATTR_HDR + x->namelen, x->val, inl);
	return V2_XATTR_HDR + x->namelen + inl;
}

int v2_xattr_next(const void *val, unsigned len, unsigned *pos, struct v2_xattr *x)
{
	return list_next(parse_xattr, val, len, pos, x);
}

int v2_xattr_check(uint64_t hseed, const struct bkey *k, const void *val, unsigned len)
{
	struct v2_xattr x;

	if (k->type != V2_XATTR || k->id == 0)
		return -EUCLEAN;
	return list_check(parse_xattr, hseed, k, val, len, &x);
}

int v2_xattr_find(const void *val, unsigned len, const char *name, uint16_t namelen,
		  struct v2_xattr *x)
{
	unsigned at, size;

	return list_find(parse_xattr, val, len, name, namelen, x, &at, &size);
}

int v2_xattr_add(void *val, unsigned *len, unsigned cap, const struct v2_xattr *x)
{
	uint8_t ent[V2_XATTR_HDR + LOG_NAME_MAX + V2_XATTR_INLINE_MAX];
	struct v2_xattr scratch;

	if (!log_xattr_name_ok(x->name, x->namelen) || x->vallen > LOG_XATTR_VAL_MAX ||
	    x->vid >= V2_VID_LIMIT || (x->vid == 0) != (x->vallen <= V2_XATTR_INLINE_MAX) ||
	    (!x->vid && x->vallen && !x->val))
		return -EINVAL;
	return list_add(parse_xattr, val, len, cap, ent, xattr_put(x, ent), x->name,
			x->namelen, &scratch);
}

int v2_xattr_del(void *val, unsigned *len, const char *name, uint16_t namelen)
{
	struct v2_xattr scratch;

	return list_del(parse_xattr, val, len, name, namelen, &scratch);
}

unsigned v2_xchunk_count(uint32_t vallen)
{
	return (vallen + V2_XCHUNK_SIZE - 1) / V2_XCHUNK_SIZE;
}

unsigned v2_xchunk_len(uint32_t vallen, unsigned chunk)
{
	uint64_t at = (uint64_t)chunk * V2_XCHUNK_SIZE;

	if (vallen > LOG_XATTR_VAL_MAX || at >= vallen)
		return 0;
	return vallen - at < V2_XCHUNK_SIZE ? (unsigned)(vallen - at) : V2_XCHUNK_SIZE;
}

int v2_xchunk_check(const struct bkey *k, unsigned len)
{
	uint64_t vid = k->off >> 16;

	if (k->type != V2_XCHUNK || k->id == 0 || vid == 0 ||
	    (k->off & 0xffff) >= v2_xchunk_count(LOG_XATTR_VAL_MAX))
		return -EUCLEAN;
	return len >= 1 && len <= V2_XCHUNK_SIZE ? 0 : -EUCLEAN;
}

/* ---- EXTENT ---- */

static bool extent_ok(uint64_t fblk, const struct v2_extent *e)
{
	if (!run_ok(fblk, e->n, V2_FBLK_LIMIT) || !e->phys || !run_ok(e->phys, e->n, V2_PHYS_LIMIT))
		return false;
	return e->unwritten || e->n <= V2_EXT_MAX_BLOCKS;
}

int v2_extent_encode(uint64_t fblk, const struct v2_extent *e, void *out, unsigned cap,
		     unsigned *len)
{
	uint8_t *o = out;
	unsigned need;

	if (!extent_ok(fblk, e) || (!e->unwritten && !e->csums))
		return -EINVAL;
	need = V2_EXT_HDR + (e->unwritten ? 0 : 8u * e->n);
	if (cap < need)
		return -E2BIG;
	le64_put(o, e->phys | (e->unwritten ? V2_EXT_UNWRITTEN : 0));
	le32_put(o + 8, e->n);
	le32_put(o + 12, 0);
	for (unsigned i = 0; !e->unwritten && i < e->n; i++) {
		uint64_t c;

		memcpy(&c, (const uint8_t *)e->csums + 8 * i, 8);
		le64_put(o + V2_EXT_HDR + 8 * i, c);
	}
	*len = need;
	return 0;
}

int v2_extent_decode(const struct bkey *k, const void *val, unsigned len, struct v2_extent *e)
{
	const uint8_t *v = val;
	uint64_t raw;

	if (k->type != V2_EXTENT || k->id == 0 || len < V2_EXT_HDR)
		return -EUCLEAN;
	raw = le64_get(v);
	e->unwritten = raw & V2_EXT_UNWRITTEN;
	e->phys = raw & ~V2_EXT_UNWRITTEN;
	e->n = le32_get(v + 8);
	e->csums = e->unwritten ? NULL : v + V2_EXT_HDR;
	if (le32_get(v + 12) != 0 || !extent_ok(k->off, e))
		return -EUCLEAN;
	if (len != V2_EXT_HDR + (e->unwritten ? 0 : 8ull * e->n))
		return -EUCLEAN;
	return 0;
}

uint64_t v2_extent_csum(const struct v2_extent *e, unsigned i)
{
	return le64_get((const uint8_t *)e->csums + 8 * i);
}

/* ---- REFCOUNT, FREE ---- */

int v2_refcount_encode(uint64_t phys, uint32_t n, uint32_t refs, uint8_t out[V2_REFCOUNT_LEN])
{
	/* A run nobody shares has no item: refs 1 would be a second way to
	 * say "not shared". */
	if (!phys || !run_ok(phys, n, V2_PHYS_LIMIT) || refs < 2)
		return -EINVAL;
	le32_put(out, n);
	le32_put(out + 4, refs);
	return 0;
}

int v2_refcount_decode(const struct bkey *k, const void *val, unsigned len, uint32_t *n,
		       uint32_t *refs)
{
	if (k->type != V2_REFCOUNT || k->off != 0 || len != V2_REFCOUNT_LEN)
		return -EUCLEAN;
	*n = le32_get(val);
	*refs = le32_get((const uint8_t *)val + 4);
	if (!k->id || !run_ok(k->id, *n, V2_PHYS_LIMIT) || *refs < 2)
		return -EUCLEAN;
	return 0;
}

int v2_free_decode(const struct bkey *k, unsigned len, uint64_t *start, uint64_t *n)
{
	if (k->type != V2_FREE || len != 0 || !k->id || !run_ok(k->id, k->off, V2_PHYS_LIMIT))
		return -EUCLEAN;
	*start = k->id;
	*n = k->off;
	return 0;
}

int v2_group_decode(const struct bkey *k, const void *val, unsigned len, uint64_t *free,
		    uint64_t *maxrun, uint64_t *nextents)
{
	const uint8_t *v = val;

	if (k->type != V2_GROUP || k->id || len != V2_GROUP_LEN)
		return -EUCLEAN;
	*free = le64_get(v);
	*maxrun = le64_get(v + 8);
	*nextents = le64_get(v + 16);
	/* No group is longer than the key's off can count (2^56 - 1). */
	if (*free > BKEY_OFF_MAX || *maxrun > *free || (!*free != !*nextents) ||
	    (!*maxrun != !*free) || *nextents - (*nextents > 0) > *free - *maxrun)
		return -EUCLEAN;
	return 0;
}

int v2_nodemap_check(const struct bkey *k, const void *val, unsigned len)
{
	const uint8_t *v = val;

	if (k->type != V2_NODEMAP || k->id || len != V2_NODEMAP_LEN)
		return -EUCLEAN;
	for (unsigned i = 0; i < len; i++)
		if (v[i])
			return 0;
	return -EUCLEAN;	/* an all-free chunk has no item */
}

int v2_orphan_check(const struct bkey *k, unsigned len)
{
	return k->type != V2_ORPHAN || k->id || !k->off || len ? -EUCLEAN : 0;
}

/* ---- any item ---- */

static int item_why(char *why, size_t whylen, const struct bkey *k, const char *what)
{
	if (why && whylen)
		snprintf(why, whylen, "item (%llu, %u, %llu): %s", (unsigned long long)k->id,
			 k->type, (unsigned long long)k->off, what);
	return -EUCLEAN;
}

static uint64_t type_tree(uint8_t type)
{
	switch (type) {
	case V2_INODE: case V2_SYMLINK: case V2_DIRENT: case V2_DIRINDEX:
	case V2_XATTR: case V2_XCHUNK: case V2_EXTENT: case V2_ORPHAN:
		return V2_TREE_INODES;
	case V2_REFCOUNT:
		return V2_TREE_REFCOUNT;
	case V2_FREE: case V2_GROUP: case V2_NODEMAP:
		return V2_TREE_FREE;
	default:
		return 0;
	}
}

static int item_decode(uint64_t hseed, const struct bkey *k, const void *val, unsigned len)
{
	union {
		struct log_inode in;
		struct v2_dirent d;
		struct v2_extent e;
	} u;
	uint64_t a, b, c;
	uint32_t n, refs;

	switch (k->type) {
	case V2_INODE: return v2_inode_decode(k, val, len, &u.in);
	case V2_SYMLINK: return v2_symlink_check(k, len, 0);
	case V2_DIRENT: return v2_dirent_check(hseed, k, val, len);
	case V2_DIRINDEX: return v2_dirindex_decode(k, val, len, &u.d);
	case V2_XATTR: return v2_xattr_check(hseed, k, val, len);
	case V2_XCHUNK: return v2_xchunk_check(k, len);
	case V2_EXTENT: return v2_extent_decode(k, val, len, &u.e);
	case V2_ORPHAN: return v2_orphan_check(k, len);
	case V2_REFCOUNT: return v2_refcount_decode(k, val, len, &n, &refs);
	case V2_FREE: return v2_free_decode(k, len, &a, &b);
	case V2_GROUP: return v2_group_decode(k, val, len, &a, &b, &c);
	case V2_NODEMAP: return v2_nodemap_check(k, val, len);
	default: return -EUCLEAN;
	}
}

int v2_item_check(uint64_t owner, uint64_t hseed, const struct bkey *k, const void *val,
		  unsigned len, char *why, size_t whylen)
{
	if (type_tree(k->type) != owner)
		return item_why(why, whylen, k, "type does not belong in this tree");
	if (item_decode(hseed, k, val, len))
		return item_why(why, whylen, k, "value does not decode");
	return 0;
}
