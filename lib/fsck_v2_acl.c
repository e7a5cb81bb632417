// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fsck_v2_acl: the POSIX ACLs of a format-v2 image (the xattrs
 * system.posix_acl_access and system.posix_acl_default, acl.h), checked as
 * the walk passes each inode's INODE, XATTR and XCHUNK items (they sort
 * together, the INODE item first):
 *
 *   decode   the value is what the kernel's posix_acl_valid accepts
 *            (acl_invalid: version 2, whole 8-byte entries, known tags in
 *            order, one USER_OBJ, GROUP_OBJ and OTHER, a MASK when there
 *            are named entries, rwx bits only), at most 4096 bytes, every
 *            chunk of a chunked value present.  Repair: the xattr is
 *            removed (what xfs_repair does with an ACL it cannot read):
 *            its bytes say nothing trustworthy, and without it the mode
 *            alone decides, which is what the file had before any ACL;
 *   where    a default ACL only on a directory, no ACL on a symlink (the
 *            kernel sets neither; set_posix_acl refuses them).  Repair:
 *            removed, as it would never be read;
 *   mode     an access ACL agrees with the inode's permission bits: owner
 *            = USER_OBJ, group = MASK (else GROUP_OBJ), other = OTHER, as
 *            the kernel keeps them (posix_acl_chmod, posix_acl_update_mode).
 *            Repair: the ACL's three entries are set from the mode, the
 *            kernel's own chmod (acl_chmod), named entries kept.  The mode
 *            wins because the INODE item is the inode's primary record
 *            (e2fsck's practice: the inode stands, what hangs off it is
 *            mended to fit), it is what stat and ls -l show, what the
 *            kernel's owner check and a mount without ACLs use, and the
 *            result is exactly what "chmod <the mode it shows>" would make;
 *            taking the bits from the ACL instead could silently widen the
 *            access a user last saw and set.
 *
 * Each problem is one line (fsck_meta_problem: not explained by a crash,
 * so -p leaves it to -y); the repairs are recorded here and made by
 * v2acl_apply in the repair transaction, after fsck_v2_meta.c's.  The mode
 * check waits for the log after the checkpoint (v2acl_report): an inode
 * the log changes is left to the replay.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "acl.h"
#include "fsck_v2_i.h"

enum { ACC, DEF, NACL };

static const char *const acl_xname[NACL] = { ACL_XATTR_ACCESS, ACL_XATTR_DEFAULT };

/* One ACL xattr of the inode being walked. */
struct aval {
	bool present;
	bool big;		/* vallen past ACL_XATTR_MAX: not gathered */
	uint32_t len;		/* the whole value */
	uint32_t have;		/* bytes gathered (inline, or from XCHUNK items) */
	uint64_t vid;		/* 0: inline */
	uint8_t buf[ACL_XATTR_MAX];
};

struct arep {
	uint64_t ino;
	uint8_t which;		/* ACC or DEF */
	bool drop;		/* remove the xattr; else its entries from the mode */
};

/* An access ACL out of step with its inode's mode, reported after the
 * log is read (v2acl_report) unless the log changes the inode. */
struct amis {
	uint64_t ino;
	uint32_t mode, acl_mode;
	bool logged;
};

struct v2acl {
	uint64_t ino;		/* the inode walked (0: none) */
	uint32_t mode;
	struct aval a[NACL];
	struct arep *rep;
	size_t nrep, crep;
	struct amis *mis;	/* ascending ino: the walk's order */
	size_t nmis, cmis;
	bool oom;
	uint64_t seen;		/* ACL xattrs checked */
	uint64_t logged;	/* mismatches the log after the checkpoint settles */
};

static int which_acl(const char *name, uint16_t namelen)
{
	for (int i = 0; i < NACL; i++)
		if (strlen(acl_xname[i]) == namelen && !memcmp(acl_xname[i], name, namelen))
			return i;
	return -1;
}

static const char *kind(uint32_t mode)
{
	return S_ISDIR(mode) ? "directory" : S_ISREG(mode) ? "file" :
	       S_ISLNK(mode) ? "symlink" : "special file";
}

/* Room for one more element in *p (n used of *cap); false on ENOMEM. */
static bool grow(void *pp, size_t *cap, size_t n, size_t size)
{
	void **p = pp;
	size_t nc = *cap ? *cap * 2 : 16;
	void *nv;

	if (n < *cap)
		return true;
	nv = realloc(*p, nc * size);
	if (!nv)
		return false;
	*p = nv;
	*cap = nc;
	return true;
}

static void record(struct v2ck *v, uint64_t ino, int which, bool drop)
{
	struct v2acl *s = v->acl;

	if (!grow(&s->rep, &s->crep, s->nrep, sizeof(*s->rep))) {
		s->oom = true;
		return;
	}
	s->rep[s->nrep++] = (struct arep){ .ino = ino, .which = (uint8_t)which, .drop = drop };
}

/* The checks of the module comment on one gathered value. */
static void check_one(struct v2ck *v, int which)
{
	struct v2acl *s = v->acl;
	struct aval *a = &s->a[which];
	unsigned long long ino = (unsigned long long)s->ino;
	const char *why;
	uint32_t m = s->mode;

	s->seen++;
	why = a->big ? "larger than 4096 bytes" :
	      a->have != a->len ? "chunks of its value are missing" : acl_invalid(a->buf, a->len);
	if (why) {
		fsck_meta_problem(v->c, false, "%s inode %llu: %s does not decode (%s): removing "
				  "it", kind(s->mode), ino, acl_xname[which], why);
		record(v, s->ino, which, true);
	} else if (S_ISLNK(s->mode) || (which == DEF && !S_ISDIR(s->mode))) {
		fsck_meta_problem(v->c, false, "%s inode %llu: %s on a %s (%s): removing it",
				  kind(s->mode), ino, acl_xname[which], kind(s->mode),
				  S_ISLNK(s->mode) ? "symlinks have no ACLs" :
				  "only directories have a default ACL");
		record(v, s->ino, which, true);
	} else if (which == ACC && (acl_equiv_mode(a->buf, a->len, &m), m != s->mode)) {
		if (grow(&s->mis, &s->cmis, s->nmis, sizeof(*s->mis)))
			s->mis[s->nmis++] = (struct amis){ s->ino, s->mode, m, false };
		else
			s->oom = true;
	}
}

/* The inode walked so far is complete: check what it had. */
static void end_inode(struct v2ck *v)
{
	struct v2acl *s = v->acl;

	for (int i = 0; i < NACL; i++) {
		if (s->a[i].present)
			check_one(v, i);
		s->a[i].present = false;	/* not the buffer: once per inode */
	}
	s->ino = 0;
}

static void xattr_item(struct v2acl *s, const struct bkey *k, const void *val, unsigned len)
{
	unsigned pos = 0;
	struct v2_xattr x;
	int i;

	if (k->id != s->ino)
		return;		/* no INODE item: fsck_v2.c reports it */
	while (v2_xattr_next(val, len, &pos, &x) == 1) {
		if ((i = which_acl(x.name, x.namelen)) < 0)
			continue;
		struct aval *a = &s->a[i];

		a->present = true;
		a->len = x.vallen;
		a->vid = x.vid;
		a->big = x.vallen > ACL_XATTR_MAX;
		a->have = 0;
		if (!x.vid && !a->big) {
			memcpy(a->buf, x.val, x.vallen);
			a->have = x.vallen;
		}
	}
}

static void xchunk_item(struct v2acl *s, const struct bkey *k, const void *val, unsigned len)
{
	uint64_t vid = k->off >> 16;
	unsigned c = (unsigned)(k->off & 0xffff);

	if (k->id != s->ino)
		return;
	for (int i = 0; i < NACL; i++) {
		struct aval *a = &s->a[i];

		if (!a->present || a->big || !a->vid || a->vid != vid ||
		    v2_xchunk_len(a->len, c) != len)
			continue;
		memcpy(a->buf + (size_t)c * V2_XCHUNK_SIZE, val, len);
		a->have += len;
	}
}

void v2acl_item(struct v2ck *v, const struct bkey *k, const void *val, unsigned len)
{
	struct v2acl *s = v->acl;
	struct log_inode in;

	switch (k->type) {
	case V2_INODE:
		end_inode(v);
		if (v2_inode_decode(k, val, len, &in) == 0) {
			s->ino = in.ino;
			s->mode = in.mode;
		}
		break;
	case V2_XATTR:
		xattr_item(s, k, val, len);
		break;
	case V2_XCHUNK:
		xchunk_item(s, k, val, len);
		break;
	default:
		break;
	}
}

int v2acl_init(struct v2ck *v)
{
	v->acl = calloc(1, sizeof(*v->acl));
	return v->acl ? 0 : -ENOMEM;
}

void v2acl_end(struct v2ck *v)
{
	end_inode(v);
}

static int mis_cmp(const void *key, const void *elt)
{
	uint64_t ino = *(const uint64_t *)key, e = ((const struct amis *)elt)->ino;

	return ino < e ? -1 : ino > e;
}

void v2acl_note(struct v2ck *v, const struct log_rec *r)
{
	struct v2acl *s = v->acl;
	struct amis *e;
	uint64_t ino;

	if (!s->nmis)
		return;
	switch (r->type) {
	case LR_INODE:
		ino = r->inode.ino;
		break;
	case LR_INODE_DEL:
		ino = r->del.ino;
		break;
	case LR_XATTR_SET:
	case LR_XATTR_DEL:
		ino = r->xattr.ino;
		break;
	default:
		return;
	}
	e = bsearch(&ino, s->mis, s->nmis, sizeof(*s->mis), mis_cmp);
	if (e)
		e->logged = true;
}

/*
 * The checkpoint writes an inode's INODE item from memory as it is when it
 * gets there, but its XATTR items only when its set of changes names them
 * (ckpt_v2.c put_one): a chmod landing between the set's take and the
 * write leaves the new mode beside the old ACL in the tree, and its
 * records (the inode and the ACL together) in the log after the
 * checkpoint, which mount replays.  So a mismatch is only reported for an
 * inode the log does not change.
 */
void v2acl_report(struct v2ck *v)
{
	struct v2acl *s = v->acl;

	for (size_t i = 0; i < s->nmis; i++) {
		const struct amis *e = &s->mis[i];

		if (e->logged) {
			s->logged++;
			continue;
		}
		fsck_meta_problem(v->c, false, "%s inode %llu: mode %04o but its access ACL gives "
				  "%04o (owner, group class, other): setting the ACL from the "
				  "mode", kind(e->mode), (unsigned long long)e->ino,
				  e->mode & 07777u, e->acl_mode & 07777u);
		record(v, e->ino, ACC, false);
	}
	if (s->oom)
		fsck_hard_problem(v->c, "out of memory: the ACL checks are incomplete");
	if (v->c->o->verbose)
		fsck_say(v->c, "ACLs: %llu checked, %llu out of step with the mode where the log "
			 "after the checkpoint changes the inode", (unsigned long long)s->seen,
			 (unsigned long long)s->logged);
}

bool v2acl_pending(const struct v2ck *v)
{
	return v->acl && v->acl->nrep;
}

void v2acl_free(struct v2ck *v)
{
	if (!v->acl)
		return;
	free(v->acl->rep);
	free(v->acl->mis);
	free(v->acl);
	v->acl = NULL;
}

/* ---- repairs ---- */

/* The chunks of value @vid (@len bytes) of @ino: read into @buf, or with
 * @put, written from it. */
static int chunks(struct btree *t, uint64_t ino, uint64_t vid, uint32_t len, void *buf,
		  bool put)
{
	unsigned n = v2_xchunk_count(len);
	int ret = 0;

	for (unsigned c = 0; ret == 0 && c < n; c++) {
		struct bkey k = v2_key_xchunk(ino, vid, c);
		unsigned want = v2_xchunk_len(len, c), got;
		uint8_t *at = (uint8_t *)buf + (size_t)c * V2_XCHUNK_SIZE;

		if (put)
			ret = bt_insert(t, &k, at, want);
		else if ((ret = bt_lookup(t, &k, at, want, &got)) == 0 && got != want)
			ret = -EUCLEAN;
	}
	return ret;
}

#define MAX_XCHUNKS 17	/* v2_xchunk_count(LOG_XATTR_VAL_MAX): 64 KiB in 4000s */

/* Every XCHUNK item of value @vid of @ino, whatever its count (a removed
 * value's, whose length may be wrong). */
static int drop_chunks(struct btree *t, uint64_t ino, uint64_t vid)
{
	struct bkey keys[MAX_XCHUNKS], start = v2_key_xchunk(ino, vid, 0), k;
	struct bt_iter it;
	const void *val;
	unsigned len, n = 0;
	int ret;

	ret = bt_iter_init(&it, t, &start);
	while (ret == 0 && n < MAX_XCHUNKS && (ret = bt_iter_next(&it, &k, &val, &len)) == 0 &&
	       k.id == ino && k.type == V2_XCHUNK && k.off >> 16 == vid)
		keys[n++] = k;
	bt_iter_free(&it);
	if (ret && ret != -ENOENT)
		return ret;
	ret = 0;
	for (unsigned i = 0; ret == 0 && i < n; i++)
		ret = bt_delete(t, &keys[i]);
	return ret;
}

static int apply_one(struct v2ck *v, struct btree *t, const struct arep *r)
{
	static uint8_t item[BNODE_MAX_VAL];
	uint8_t ival[V2_INODE_LEN], acl[ACL_XATTR_MAX];
	const char *name = acl_xname[r->which];
	uint16_t nlen = (uint16_t)strlen(name);
	struct bkey ik = v2_key_inode(r->ino);
	struct bkey k = v2_key_xattr(r->ino, v2_hash56(v->sb->hash_seed, name, nlen));
	struct log_inode in;
	struct v2_xattr x;
	unsigned len, ilen;
	int ret;

	ret = bt_lookup(t, &k, item, sizeof(item), &len);
	if (ret == 0)
		ret = v2_xattr_find(item, len, name, nlen, &x);
	if (ret == -ENOENT)
		return 0;	/* gone with its inode (reclaimed) */
	if (ret)
		return ret;
	if (r->drop) {
		uint64_t vid = x.vid;

		ret = v2_xattr_del(item, &len, name, nlen);
		if (ret == 0)
			ret = len ? bt_insert(t, &k, item, len) : bt_delete(t, &k);
		return ret == 0 && vid ? drop_chunks(t, r->ino, vid) : ret;
	}
	ret = bt_lookup(t, &ik, ival, sizeof(ival), &ilen);
	if (ret == 0)
		ret = v2_inode_decode(&ik, ival, ilen, &in);
	if (ret == 0 && x.vallen > sizeof(acl))
		ret = -EUCLEAN;
	if (ret)
		return ret;
	if (x.vid)
		ret = chunks(t, r->ino, x.vid, x.vallen, acl, false);
	else
		memcpy(acl, x.val, x.vallen);
	if (ret == 0 && acl_valid(acl, x.vallen))
		ret = -EUCLEAN;
	if (ret)
		return ret;
	acl_chmod(acl, x.vallen, in.mode);
	if (x.vid)
		return chunks(t, r->ino, x.vid, x.vallen, acl, true);
	ret = v2_xattr_del(item, &len, name, nlen);
	x.name = name;
	x.val = acl;
	if (ret == 0)
		ret = v2_xattr_add(item, &len, sizeof(item), &x);
	return ret ? ret : bt_insert(t, &k, item, len);
}

int v2acl_apply(struct v2ck *v, struct btree *t)
{
	for (size_t i = 0; i < v->acl->nrep; i++) {
		int ret = apply_one(v, t, &v->acl->rep[i]);

		if (ret) {
			fsck_say(v->c, "ACL repair of inode %llu failed: %s",
				 (unsigned long long)v->acl->rep[i].ino, strerror(-ret));
			return ret;
		}
	}
	return 0;
}
