// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fsck_v2_meta: what the items of a format-v2 image mean together
 * (fsck_v2_i.h), the rules docs/FORMAT.md "What fsck checks on version 2"
 * lists, with the repairs of version 1's fsck where they exist:
 *
 *   names     every DIRENT entry has exactly one DIRINDEX item with the
 *             same child, type and name, and every DIRINDEX item is such
 *             an entry's; the child exists, is not the root and its type
 *             is the entry's dtype; a directory is named by one entry;
 *   counts    nlink = the entries naming the inode (directories: 2 + the
 *             directories in it), a directory's parent (its "..") = the
 *             directory holding its entry (the root's: itself);
 *   orphans   an inode no entry names: link count 0 is a file unlinked
 *             while open (reclaimed, as the next mount would: a note with
 *             -n, as in version 1); otherwise it goes to /lost+found/#ino;
 *             ORPHAN items name exactly the inodes of link count 0, and
 *             the superblock counts the INODE items;
 *   extents   inside the data area; blocks claimed by more than one extent
 *             exactly where REFCOUNT items say so, with exactly their
 *             count of references (and REFCOUNT items nowhere else);
 *             no referenced block free in the free-space tree; a block the
 *             free-space tree has in use that no extent references is
 *             leaked.  Extents past an inode's size are allowed (fallocate
 *             with KEEP_SIZE), as in version 1.
 *
 * The walk (v2m_item) keeps a compact record per inode, entry, index item,
 * extent and REFCOUNT item (memory in proportion to the metadata, as
 * version 1's fsck holds it all), names as two 56-bit hashes (hash56 with
 * the file system's seed and with its complement) so no name is kept; the
 * data-area check uses one bitmap of the data area (1 bit per 4 KiB block:
 * 32 MiB per TiB).  Problems are reported as found and their repairs
 * recorded; v2m_apply makes them in one tree transaction (fsck_v2.c
 * commits it and the free space with a new superblock generation).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bmap.h"
#include "format_v2.h"
#include "fs_i.h"
#include "fsck_v2_i.h"

#define V2M_MAX_LINES 10	/* leak and sharing lines, then a count */

struct mino {
	uint64_t ino, parent, eparent;	/* eparent: a directory naming it */
	uint64_t mapped, emapped;	/* its INODE item's count, its EXTENT items' */
	uint32_t mode, nlink, nent, nsub;
	uint32_t adj;		/* links fsck's own repairs add (not reported) */
	bool reach, reclaim;
	bool orphan;		/* link count 0, no name: the next mount's to reclaim */
};

struct mname {			/* a DIRENT entry or a DIRINDEX item */
	uint64_t dir, h, h2, ino;
	uint64_t cookie;	/* DIRINDEX */
	uint8_t dtype;
};

struct mext {
	uint64_t phys, n, ino, fblk;
};

struct mref {
	uint64_t phys, n;
	uint32_t refs;
};

enum act_kind {
	A_INODE,		/* a = ino: nlink b, parent c */
	A_NEWDIR,		/* a = ino in directory b */
	A_LINK,			/* entry name in directory a for ino b, dtype */
	A_ADD_INDEX,		/* for the entry (a, h, h2, b) */
	A_DEL_INDEX,		/* (a, DIRINDEX, cookie) */
	A_DEL_ENTRY,		/* the entry (a, h, h2, b) */
	A_SET_DTYPE,		/* of the entry (a, h, h2, b) */
	A_RECLAIM,		/* every item of inode a */
	A_CLAIM,		/* data blocks [a, a + b) in use */
	A_PUT,			/* data blocks [a, a + b) free */
	A_NEXT_INO,		/* the superblock's next_ino to a */
	A_MAPPED,		/* inode a's INODE item: mapped count b */
	A_DEL_ORPHAN,		/* the ORPHAN item of inode a */
	A_COUNT,		/* the superblock's inode count (v->inodes) */
};

struct act {
	enum act_kind kind;
	uint64_t a, b, c, h, h2;
	uint8_t dtype;
	char name[24];
};

struct v2meta {
	struct mino *ino;
	struct mname *ent, *idx;
	struct mext *ext;
	struct mref *ref;
	struct act *act;
	size_t nino, nent, nidx, next, nref, nact;
	size_t cino, cent, cidx, cext, cref, cact;
	bool oom;
	uint64_t lf;		/* /lost+found once found or made */
	uint64_t *refd;		/* data-area bitmap: referenced by an extent */
	uint64_t *orph;		/* ORPHAN items' inodes, ascending (key order) */
	size_t norph, corph;
	size_t ntree;		/* INODE items (nino before repairs add any) */
};

/* Room for one more element in *p (n used of *cap); false on ENOMEM. */
static bool grow(void *pp, size_t *cap, size_t n, size_t size)
{
	void **p = pp;
	size_t nc;
	void *nv;

	if (n < *cap)
		return true;
	nc = *cap ? *cap * 2 : 256;
	nv = realloc(*p, nc * size);
	if (!nv)
		return false;
	*p = nv;
	*cap = nc;
	return true;
}

#define PUSH(m, arr, n, cap, val)                                              \
	do {                                                                   \
		if (grow(&(m)->arr, &(m)->cap, (m)->n, sizeof(*(m)->arr)))     \
			(m)->arr[(m)->n++] = (val);                            \
		else                                                           \
			(m)->oom = true;                                       \
	} while (0)

int v2m_init(struct v2ck *v)
{
	v->meta = calloc(1, sizeof(*v->meta));
	return v->meta ? 0 : -ENOMEM;
}

void v2m_free(struct v2ck *v)
{
	struct v2meta *m = v->meta;

	if (!m)
		return;
	free(m->ino);
	free(m->ent);
	free(m->idx);
	free(m->ext);
	free(m->ref);
	free(m->act);
	free(m->refd);
	free(m->orph);
	free(m);
	v->meta = NULL;
}

bool v2m_pending(const struct v2ck *v)
{
	return (v->meta && v->meta->nact) || v2acl_pending(v);
}

static void record(struct v2ck *v, struct act a)
{
	PUSH(v->meta, act, nact, cact, a);
}

static void rec(struct v2ck *v, enum act_kind kind, uint64_t a, uint64_t b, uint64_t c,
		uint64_t h, uint64_t h2)
{
	record(v, (struct act){ .kind = kind, .a = a, .b = b, .c = c, .h = h, .h2 = h2 });
}

/* ---- collection ---- */

static struct mname name_of(struct v2ck *v, uint64_t dir, const struct v2_dirent *e)
{
	return (struct mname){
		.dir = dir, .ino = e->ino, .dtype = e->dtype,
		.h = v2_hash56(v->sb->hash_seed, e->name, e->namelen),
		.h2 = v2_hash56(~v->sb->hash_seed, e->name, e->namelen),
	};
}

static void item_extent(struct v2ck *v, const struct bkey *k, const void *val, unsigned len)
{
	struct v2meta *m = v->meta;
	struct v2_extent e;

	if (v2_extent_decode(k, val, len, &e))
		return;
	if (m->next && m->ext[m->next - 1].ino == k->id &&
	    m->ext[m->next - 1].fblk + m->ext[m->next - 1].n > k->off)
		fsck_hard_problem(v->c, "inode %llu: extents overlap at file block %llu",
				  (unsigned long long)k->id, (unsigned long long)k->off);
	PUSH(m, ext, next, cext, ((struct mext){ e.phys, e.n, k->id, k->off }));
	/* Items sort by inode, its INODE item first (else reported). */
	if (m->nino && m->ino[m->nino - 1].ino == k->id)
		m->ino[m->nino - 1].emapped += e.n;
}

void v2m_item(struct v2ck *v, uint64_t owner, const struct bkey *k, const void *val,
	      unsigned len)
{
	struct v2meta *m = v->meta;
	struct log_inode in;
	struct v2_dirent e;
	struct mref r;
	unsigned pos = 0;
	uint32_t n;

	switch (k->type) {
	case V2_INODE:
		if (v2_inode_decode(k, val, len, &in) == 0)
			PUSH(m, ino, nino, cino, ((struct mino){ .ino = in.ino,
				.parent = in.parent, .mode = in.mode, .nlink = in.nlink,
				.mapped = in.mapped }));
		break;
	case V2_DIRENT:
		while (v2_dirent_next(val, len, &pos, &e) == 1)
			PUSH(m, ent, nent, cent, name_of(v, k->id, &e));
		break;
	case V2_DIRINDEX:
		if (v2_dirindex_decode(k, val, len, &e) == 0) {
			struct mname x = name_of(v, k->id, &e);

			x.cookie = k->off;
			PUSH(m, idx, nidx, cidx, x);
		}
		break;
	case V2_EXTENT:
		item_extent(v, k, val, len);
		break;
	case V2_ORPHAN:
		PUSH(m, orph, norph, corph, k->off);
		break;
	case V2_REFCOUNT:
		if (owner == V2_TREE_REFCOUNT && v2_refcount_decode(k, val, len, &n, &r.refs) == 0) {
			r.phys = k->id;
			r.n = n;
			PUSH(m, ref, nref, cref, r);
		}
		break;
	default:
		break;
	}
}

static int mino_cmp(const void *a, const void *b)
{
	const struct mino *x = a, *y = b;

	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

static int u64cmp(uint64_t a, uint64_t b)
{
	return a < b ? -1 : a > b;
}

/* Entries and index items sort by (dir, h, h2, ino, dtype[, cookie]):
 * an entry and its index items meet. */
static int mname_cmp(const void *a, const void *b)
{
	const struct mname *x = a, *y = b;
	int r = u64cmp(x->dir, y->dir);

	if (!r)
		r = u64cmp(x->h, y->h);
	if (!r)
		r = u64cmp(x->h2, y->h2);
	if (!r)
		r = u64cmp(x->ino, y->ino);
	if (!r)
		r = u64cmp(x->dtype, y->dtype);
	return r ? r : u64cmp(x->cookie, y->cookie);
}

static bool same_name(const struct mname *x, const struct mname *y)
{
	return x->dir == y->dir && x->h == y->h && x->h2 == y->h2 && x->ino == y->ino &&
	       x->dtype == y->dtype;
}

static struct mino *ifind(struct v2meta *m, uint64_t ino)
{
	struct mino key = { .ino = ino };

	return m->nino ? bsearch(&key, m->ino, m->nino, sizeof(*m->ino), mino_cmp) : NULL;
}

static uint8_t dtype_of(uint32_t mode)
{
	return (uint8_t)((mode & S_IFMT) >> 12);	/* IFTODT */
}

/* ---- names through the inodes tree (for messages and repairs) ---- */

/* The entry (dir, h, h2, ino) of its DIRENT item: its name into buf
 * (NUL-terminated), the whole item into val (BNODE_MAX_VAL) if asked. */
static int ent_find(struct btree *t, uint64_t seed, const struct mname *x, char *buf,
		    uint8_t *val, unsigned *vlen, struct v2_dirent *out)
{
	uint8_t own[BNODE_MAX_VAL];
	struct bkey k = v2_key_dirent(x->dir, x->h);
	struct v2_dirent e;
	unsigned len, pos = 0;
	int ret;

	if (!val)
		val = own;
	ret = bt_lookup(t, &k, val, BNODE_MAX_VAL, &len);
	if (ret)
		return ret;
	while (v2_dirent_next(val, len, &pos, &e) == 1) {
		if (e.ino != x->ino || v2_hash56(~seed, e.name, e.namelen) != x->h2)
			continue;
		memcpy(buf, e.name, e.namelen);
		buf[e.namelen] = 0;
		if (vlen)
			*vlen = len;
		if (out)
			*out = e;
		return 0;
	}
	return -ENOENT;
}

/* "dir 5 entry \"name\"" for messages. */
static const char *ent_desc(struct v2ck *v, struct btree *t, const struct mname *x, char *buf,
			    size_t len)
{
	char name[LOG_NAME_MAX + 1] = "?";

	if (t)
		ent_find(t, v->sb->hash_seed, x, name, NULL, NULL, NULL);
	snprintf(buf, len, "directory %llu: entry \"%s\" (inode %llu)",
		 (unsigned long long)x->dir, name, (unsigned long long)x->ino);
	return buf;
}

/* ---- names, counts, orphans ---- */

static void index_problems(struct v2ck *v, struct btree *t, const struct mname *e, size_t j,
			   size_t j2)
{
	char d[LOG_NAME_MAX + 96];

	if (j2 == j) {
		fsck_meta_problem(v->c, true, "%s has no index item: adding one",
				  ent_desc(v, t, e, d, sizeof(d)));
		rec(v, A_ADD_INDEX, e->dir, e->ino, 0, e->h, e->h2);
	}
	for (size_t i = j + 1; i < j2; i++) {
		fsck_meta_problem(v->c, true, "%s has a second index item (cookie %llu): "
				  "removing it", ent_desc(v, t, e, d, sizeof(d)),
				  (unsigned long long)v->meta->idx[i].cookie);
		rec(v, A_DEL_INDEX, e->dir, v->meta->idx[i].cookie, 0, 0, 0);
	}
}

/* One entry against its child and its index items [j, j2). */
static void check_entry(struct v2ck *v, struct btree *t, const struct mname *e, size_t j,
			size_t j2)
{
	struct v2meta *m = v->meta;
	struct mino *ch = ifind(m, e->ino), *dir = ifind(m, e->dir);
	char d[LOG_NAME_MAX + 96];
	const char *why = NULL;

	if (!dir)
		return;		/* items of an inode without INODE: reported */
	if (!ch)
		why = "names a missing inode";
	else if (e->ino == TFS_ROOT_INO)
		why = "names the root directory";
	else if (S_ISDIR(ch->mode) && ch->nent)
		why = "is a second link to a directory";
	if (why) {
		fsck_meta_problem(v->c, false, "%s %s: removing it",
				  ent_desc(v, t, e, d, sizeof(d)), why);
		rec(v, A_DEL_ENTRY, e->dir, e->ino, 0, e->h, e->h2);
		for (size_t i = j; i < j2; i++)
			rec(v, A_DEL_INDEX, e->dir, m->idx[i].cookie, 0, 0, 0);
		return;
	}
	if (dtype_of(ch->mode) != e->dtype) {
		fsck_meta_problem(v->c, true, "%s has type %u, the inode is of type %u",
				  ent_desc(v, t, e, d, sizeof(d)), e->dtype,
				  dtype_of(ch->mode));
		record(v, (struct act){ .kind = A_SET_DTYPE, .a = e->dir, .b = e->ino,
					.h = e->h, .h2 = e->h2, .dtype = dtype_of(ch->mode) });
		for (size_t i = j; i < j2; i++)
			rec(v, A_DEL_INDEX, e->dir, m->idx[i].cookie, 0, 0, 0);
		rec(v, A_ADD_INDEX, e->dir, e->ino, 0, e->h, e->h2);
	} else {
		index_problems(v, t, e, j, j2);
	}
	ch->nent++;
	if (!ch->eparent)
		ch->eparent = e->dir;
	if (S_ISDIR(ch->mode))
		dir->nsub++;
}

static void check_names(struct v2ck *v, struct btree *t)
{
	struct v2meta *m = v->meta;
	size_t j = 0;

	for (size_t i = 0; i <= m->nent; i++) {
		size_t j2;

		/* Index items before this entry: no entry has them. */
		while (j < m->nidx && (i == m->nent || mname_cmp(&m->idx[j], &m->ent[i]) < 0) &&
		       (i == m->nent || !same_name(&m->idx[j], &m->ent[i]))) {
			struct mname *x = &m->idx[j++];

			if (!ifind(m, x->dir))
				continue;
			fsck_meta_problem(v->c, false, "directory %llu: index item %llu (inode "
					  "%llu, type %u) names no entry: removing it",
					  (unsigned long long)x->dir,
					  (unsigned long long)x->cookie,
					  (unsigned long long)x->ino, x->dtype);
			rec(v, A_DEL_INDEX, x->dir, x->cookie, 0, 0, 0);
		}
		if (i == m->nent)
			break;
		for (j2 = j; j2 < m->nidx && same_name(&m->idx[j2], &m->ent[i]); j2++)
			;
		check_entry(v, t, &m->ent[i], j, j2);
		j = j2;
	}
}

/* Inodes the root (and what is already reached: orphans moved to
 * /lost+found) reach through the entries kept. */
static void reach(struct v2meta *m)
{
	uint64_t *q = malloc((m->nino + 1) * sizeof(*q));
	size_t qh = 0, qt = 0;
	struct mino *r = ifind(m, TFS_ROOT_INO);

	if (!q) {
		m->oom = true;
		return;
	}
	if (r)
		r->reach = true;
	for (size_t i = 0; i < m->nino; i++)
		if (m->ino[i].reach)
			q[qt++] = m->ino[i].ino;
	while (qh < qt) {
		struct mname key = { .dir = q[qh++] };
		size_t lo = 0, hi = m->nent;

		while (lo < hi) {	/* the first entry of directory key.dir */
			size_t mid = (lo + hi) / 2;

			if (m->ent[mid].dir < key.dir)
				lo = mid + 1;
			else
				hi = mid;
		}
		for (size_t i = lo; i < m->nent && m->ent[i].dir == key.dir; i++) {
			struct mino *t = ifind(m, m->ent[i].ino);

			/* A directory through the entry that counts (a
			 * second link to it is removed). */
			if (t && !t->reach && t->nent &&
			    (t->eparent == key.dir || !S_ISDIR(t->mode))) {
				t->reach = true;
				q[qt++] = t->ino;
			}
		}
	}
	free(q);
}

static const char *kind(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: return "file";
	case S_IFDIR: return "directory";
	case S_IFLNK: return "symlink";
	default: return "special file";
	}
}

/* /lost+found (made if missing: recorded, and added to the model). */
static struct mino *lost_found(struct v2ck *v)
{
	static const char lf[] = "lost+found";
	struct v2meta *m = v->meta;
	uint64_t h = v2_hash56(v->sb->hash_seed, lf, sizeof(lf) - 1);
	uint64_t h2 = v2_hash56(~v->sb->hash_seed, lf, sizeof(lf) - 1);
	struct mino *root = ifind(m, TFS_ROOT_INO), nd, *p;
	struct act a = { .kind = A_LINK, .a = TFS_ROOT_INO, .dtype = dtype_of(S_IFDIR) };

	if (m->lf)
		return ifind(m, m->lf);
	for (size_t i = 0; i < m->nent; i++) {
		struct mino *t;

		if (m->ent[i].dir != TFS_ROOT_INO || m->ent[i].h != h || m->ent[i].h2 != h2)
			continue;
		t = ifind(m, m->ent[i].ino);
		if (t && S_ISDIR(t->mode))
			m->lf = t->ino;
		return t && S_ISDIR(t->mode) ? t : NULL;
	}
	if (!root || !S_ISDIR(root->mode))
		return NULL;
	nd = (struct mino){ .ino = v->next_ino, .parent = TFS_ROOT_INO,
			    .eparent = TFS_ROOT_INO, .mode = S_IFDIR | 0700, .nlink = 2,
			    .nent = 1, .reach = true };
	v->next_ino++;
	rec(v, A_NEWDIR, nd.ino, TFS_ROOT_INO, 0, 0, 0);
	a.b = nd.ino;
	memcpy(a.name, lf, sizeof(lf));
	record(v, a);
	root->nsub++;
	root->adj++;
	fsck_say(v->c, "creating /lost+found (inode %llu)", (unsigned long long)nd.ino);
	PUSH(m, ino, nino, cino, nd);	/* the largest ino: stays sorted */
	m->lf = nd.ino;
	p = ifind(m, nd.ino);
	return p;
}

static void orphan(struct v2ck *v, struct mino *e)
{
	struct mino *lf;
	struct act a = { .kind = A_LINK, .dtype = dtype_of(e->mode) };

	if (e->nlink == 0) {
		/* Unlinked while open when the file system stopped: the
		 * crash state the next mount reclaims (version 1's rule).
		 * Its count is right as it is, a directory's too. */
		e->orphan = true;
		if (v->c->fix)
			fsck_meta_problem(v->c, true, "orphan %s inode %llu (no name, link count "
					  "0): reclaiming it", kind(e->mode),
					  (unsigned long long)e->ino);
		else
			fsck_say(v->c, "note: orphan %s inode %llu (no name, link count 0, open "
				 "when the file system stopped): the next mount reclaims it",
				 kind(e->mode), (unsigned long long)e->ino);
		if (!v->c->fix)
			return;	/* -n: its blocks stay its own */
		e->reclaim = true;
		rec(v, A_RECLAIM, e->ino, 0, 0, 0, 0);
		return;
	}
	lf = lost_found(v);
	e = ifind(v->meta, e->ino);	/* lost_found may have moved the array */
	if (!lf) {
		fsck_hard_problem(v->c, "unreachable %s inode %llu (link count %u): no "
				  "/lost+found to move it to (no root directory, or "
				  "/lost+found is not a directory)", kind(e->mode),
				  (unsigned long long)e->ino, e->nlink);
		return;
	}
	fsck_meta_problem(v->c, false, "unreachable %s inode %llu (link count %u): moving it "
			  "to /lost+found/#%llu", kind(e->mode), (unsigned long long)e->ino,
			  e->nlink, (unsigned long long)e->ino);
	a.a = lf->ino;
	a.b = e->ino;
	snprintf(a.name, sizeof(a.name), "#%llu", (unsigned long long)e->ino);
	record(v, a);
	e->nent = 1;
	e->eparent = lf->ino;
	e->reach = true;
	if (S_ISDIR(e->mode)) {
		/* its ".." is lost+found now (not reported: this repair's) */
		e->parent = lf->ino;
		rec(v, A_INODE, e->ino, e->nlink, lf->ino, 0, 0);
		lf->nsub++;
		lf->adj++;
	}
}

static void check_orphans(struct v2ck *v)
{
	struct v2meta *m = v->meta;
	size_t n = m->nino;

	reach(m);
	for (size_t i = 0; i < n; i++)
		if (!m->ino[i].reach && !m->ino[i].nent)
			orphan(v, &m->ino[i]);
	reach(m);	/* what the orphans moved hold */
	for (size_t i = 0; i < n; i++) {
		struct mino *e = &m->ino[i];

		if (!e->reach && e->nent && !e->reclaim)
			fsck_hard_problem(v->c, "%s inode %llu is named only from directories cut "
					  "off from the root", kind(e->mode),
					  (unsigned long long)e->ino);
	}
}

static void check_counts(struct v2ck *v)
{
	struct v2meta *m = v->meta;

	for (size_t i = 0; i < m->nino; i++) {
		struct mino *e = &m->ino[i];
		uint32_t want = e->orphan ? 0 : S_ISDIR(e->mode) ? 2 + e->nsub : e->nent;
		uint64_t parent = e->parent;

		if (e->reclaim)
			continue;
		if (S_ISDIR(e->mode)) {
			uint64_t wantp = e->ino == TFS_ROOT_INO ? TFS_ROOT_INO : e->eparent;

			if (wantp && parent != wantp) {
				fsck_meta_problem(v->c, false, "directory inode %llu: \"..\" names "
						  "inode %llu, not its parent %llu",
						  (unsigned long long)e->ino,
						  (unsigned long long)parent,
						  (unsigned long long)wantp);
				parent = wantp;
			}
		}
		if (e->nlink + e->adj != want)
			fsck_meta_problem(v->c, true, "%s inode %llu: link count %u, should be %u",
					  kind(e->mode), (unsigned long long)e->ino, e->nlink,
					  want);
		if (e->nlink != want || parent != e->parent)
			rec(v, A_INODE, e->ino, want, parent, 0, 0);
		if (S_ISREG(e->mode) && e->mapped != e->emapped) {
			fsck_meta_problem(v->c, true, "file inode %llu: its INODE item counts %llu "
					  "mapped blocks, its EXTENT items map %llu",
					  (unsigned long long)e->ino,
					  (unsigned long long)e->mapped,
					  (unsigned long long)e->emapped);
			rec(v, A_MAPPED, e->ino, e->emapped, 0, 0, 0);
		}
	}
}

/* An ORPHAN item naming inode @ino (NULL: missing) that has a name. */
static void extra_orphan(struct v2ck *v, uint64_t ino, const struct mino *e)
{
	if (e)
		fsck_meta_problem(v->c, false, "%s inode %llu: link count %u and an ORPHAN item: "
				  "removing the item", kind(e->mode), (unsigned long long)ino,
				  e->nlink);
	else
		fsck_meta_problem(v->c, false, "ORPHAN item names a missing inode %llu: removing "
				  "it", (unsigned long long)ino);
	rec(v, A_DEL_ORPHAN, ino, 0, 0, 0, 0);
}

/* ORPHAN items name exactly the inodes of link count 0 (what mount
 * reclaims without a walk); after the count repairs an inode given a name
 * loses its item, a reclaimed one loses it with its other items.  Then
 * the superblock's count of INODE items. */
static void check_orphan_items(struct v2ck *v)
{
	struct v2meta *m = v->meta;
	uint64_t n = 0;
	size_t j = 0;

	for (size_t i = 0; i < m->nino; i++) {
		struct mino *e = &m->ino[i];
		bool has;

		for (; j < m->norph && m->orph[j] < e->ino; j++)
			extra_orphan(v, m->orph[j], NULL);
		has = j < m->norph && m->orph[j] == e->ino;
		j += has;
		n += !e->reclaim;
		if (!e->nlink && !has)
			fsck_meta_problem(v->c, false, "%s inode %llu: link count 0 and no ORPHAN "
					  "item (a mount would not reclaim it)", kind(e->mode),
					  (unsigned long long)e->ino);
		else if (e->nlink && has)
			extra_orphan(v, e->ino, e);
		else if (has && !e->reclaim)	/* named again by a count repair */
			rec(v, A_DEL_ORPHAN, e->ino, 0, 0, 0, 0);
	}
	for (; j < m->norph; j++)
		extra_orphan(v, m->orph[j], NULL);
	v->inodes = n;
	if (v->sb->inodes != m->ntree) {
		fsck_meta_problem(v->c, true, "the superblock counts %llu inodes, the inode tree "
				  "has %zu: correcting it", (unsigned long long)v->sb->inodes,
				  m->ntree);
		rec(v, A_COUNT, 0, 0, 0, 0, 0);
	}
}

/* ---- extents: the refcount tree and the free-space tree ---- */

struct ev {
	uint64_t pos;
	int64_t ext, ref;	/* change of the extents covering, of the count recorded */
};

static int ev_cmp(const void *a, const void *b)
{
	const struct ev *x = a, *y = b;

	return u64cmp(x->pos, y->pos);
}

static void share_problem(struct v2ck *v, uint64_t s, uint64_t e, int64_t k, int64_t r,
			  unsigned *lines)
{
	if (++*lines > V2M_MAX_LINES) {
		v->c->res->errors++;
		v->c->left++;
		return;
	}
	if (!r)
		fsck_hard_problem(v->c, "blocks [%llu, %llu) are claimed by %lld extents and not "
				  "shared in the refcount tree", (unsigned long long)s,
				  (unsigned long long)e, (long long)k);
	else
		fsck_hard_problem(v->c, "blocks [%llu, %llu) are referenced by %lld extent(s), "
				  "the refcount tree says %lld", (unsigned long long)s,
				  (unsigned long long)e, (long long)k, (long long)r);
}

/* Sweep the extents and the REFCOUNT items together: wherever blocks are
 * claimed by k extents and recorded with r references (0: no item), k >=
 * 2 or r > 0 must mean k == r.  Counts the data blocks and the shared
 * ones for the summary. */
static void check_sharing(struct v2ck *v)
{
	struct v2meta *m = v->meta;
	size_t nev = 0, cap = 2 * (m->next + m->nref);
	struct ev *ev = malloc((cap ? cap : 1) * sizeof(*ev));
	int64_t k = 0, r = 0, pk = 0, pr = 0;
	uint64_t bad_s = 0;
	unsigned lines = 0;
	bool in_bad = false;

	if (!ev) {
		m->oom = true;
		return;
	}
	for (size_t i = 0; i < m->next; i++) {
		if (ifind(m, m->ext[i].ino) && ifind(m, m->ext[i].ino)->reclaim)
			continue;
		ev[nev++] = (struct ev){ m->ext[i].phys, 1, 0 };
		ev[nev++] = (struct ev){ m->ext[i].phys + m->ext[i].n, -1, 0 };
	}
	for (size_t i = 0; i < m->nref; i++) {
		ev[nev++] = (struct ev){ m->ref[i].phys, 0, m->ref[i].refs };
		ev[nev++] = (struct ev){ m->ref[i].phys + m->ref[i].n, 0, -(int64_t)m->ref[i].refs };
	}
	if (nev)
		qsort(ev, nev, sizeof(*ev), ev_cmp);
	for (size_t i = 0; i < nev;) {
		uint64_t pos = ev[i].pos, next;
		bool bad;

		for (; i < nev && ev[i].pos == pos; i++) {
			k += ev[i].ext;
			r += ev[i].ref;
		}
		next = i < nev ? ev[i].pos : pos;
		bad = (k >= 2 || r > 0) && k != r;
		if (in_bad && (!bad || k != pk || r != pr)) {
			share_problem(v, bad_s, pos, pk, pr, &lines);
			in_bad = false;
		}
		if (bad && !in_bad) {
			in_bad = true;
			bad_s = pos;
			pk = k;
			pr = r;
		}
		if (k >= 1)
			v->c->res->data_blocks += next - pos;
		if (k >= 2)
			v->c->res->shared_blocks += next - pos;
	}
	if (lines > V2M_MAX_LINES)
		fsck_say(v->c, "... %u block runs shared wrongly in all", lines);
	free(ev);
}

/* The data-area bitmap of referenced blocks; an extent outside the data
 * area is reported (the free-space tree cannot describe it). */
static int mark_refd(struct v2ck *v, const struct fspace_params *p)
{
	struct v2meta *m = v->meta;

	m->refd = calloc((p->end - p->start + 63) / 64 + 1, 8);
	if (!m->refd)
		return -ENOMEM;
	for (size_t i = 0; i < m->next; i++) {
		const struct mext *e = &m->ext[i];
		struct mino *in = ifind(m, e->ino);

		if (in && in->reclaim)
			continue;
		if (e->phys < p->start || e->phys + e->n > p->end) {
			fsck_hard_problem(v->c, "inode %llu: file block %llu: %llu block(s) at %llu "
					  "outside the data area", (unsigned long long)e->ino,
					  (unsigned long long)e->fblk, (unsigned long long)e->n,
					  (unsigned long long)e->phys);
			continue;
		}
		bm_set(m->refd, e->phys - p->start, e->phys - p->start + e->n);
	}
	return 0;
}

/* In the used run [s, e) of the data area (offsets from its start): the
 * blocks no extent references are leaked. */
static void leaks(struct v2ck *v, const struct fspace_params *p, uint64_t s, uint64_t e,
		  unsigned *lines)
{
	struct v2meta *m = v->meta;

	while (s < e) {
		uint64_t a = bm_next_zero(m->refd, s, e), b;

		if (a >= e)
			break;
		b = bm_next_one(m->refd, a, e);
		if (++*lines <= V2M_MAX_LINES) {
			fsck_meta_problem(v->c, true, "blocks [%llu, %llu) are in use in the "
					  "free-space tree but no extent references them: "
					  "freeing them", (unsigned long long)(p->start + a),
					  (unsigned long long)(p->start + b));
		} else {
			v->c->res->errors++;
			v->c->meta_fixes++;
		}
		rec(v, A_PUT, p->start + a, b - a, 0, 0, 0);
		s = b;
	}
}

/* In the free run [s, e): referenced blocks are taken again. */
static void refd_free(struct v2ck *v, const struct fspace_params *p, uint64_t s, uint64_t e)
{
	struct v2meta *m = v->meta;

	while (s < e) {
		uint64_t a = bm_next_one(m->refd, s, e), b;

		if (a >= e)
			break;
		b = bm_next_zero(m->refd, a, e);
		fsck_meta_problem(v->c, true, "blocks [%llu, %llu) are referenced by an extent "
				  "but free in the free-space tree: marking them used",
				  (unsigned long long)(p->start + a),
				  (unsigned long long)(p->start + b));
		rec(v, A_CLAIM, p->start + a, b - a, 0, 0, 0);
		s = b;
	}
}

/* Group @g has no summary, so it is wholly free; everything from @pos
 * (where the last free run ended, at most g's start) to it is in use.
 * Returns the group's end. */
static uint64_t free_group(struct v2ck *v, const struct fspace_params *p, uint64_t pos,
			   uint64_t g, unsigned *lines)
{
	uint64_t gs = g * p->gblocks, ge = gs + p->gblocks;

	if (ge > p->end - p->start)
		ge = p->end - p->start;
	if (pos < gs)
		leaks(v, p, pos, gs, lines);
	refd_free(v, p, gs, ge);
	return ge;
}

/* The free-space tree's runs, group by group (a group without a GROUP
 * item is wholly free), against the referenced bitmap. */
static void check_free(struct v2ck *v)
{
	struct fspace_params p;
	struct bt_iter it;
	struct bkey k, start = { 0, FSK_GROUP, 0 };
	const void *val;
	unsigned len, lines = 0;
	uint64_t ngroups, *summ, pos = 0;	/* offsets from the data area's start */
	int ret;

	fspace_sb_params(v->sb, &p);
	if (!p.gblocks)
		p.gblocks = FSPACE_GROUP_DEFAULT;
	ngroups = (p.end - p.start + p.gblocks - 1) / p.gblocks;
	summ = calloc(ngroups / 64 + 1, 8);
	if (!summ || mark_refd(v, &p)) {
		free(summ);
		v->meta->oom = true;
		return;
	}
	ret = bt_iter_init(&it, fspace_tree(v->fs), &start);
	while (ret == 0 && (ret = bt_iter_next(&it, &k, &val, &len)) == 0) {
		uint64_t fs_, fe;

		if (k.id == 0 && k.type == FSK_GROUP && k.off < ngroups)
			bm_set(summ, k.off, k.off + 1);
		if (k.id == 0 || k.type != FSK_FREE)
			continue;
		fs_ = k.id - p.start;
		fe = fs_ + k.off;
		/* Whole groups without a summary before this run: free. */
		for (uint64_t g = pos / p.gblocks; g < fs_ / p.gblocks; g++)
			if (!bm_count(summ, g, g + 1))
				pos = free_group(v, &p, pos, g, &lines);
		leaks(v, &p, pos, fs_, &lines);
		refd_free(v, &p, fs_, fe);
		pos = fe;
	}
	bt_iter_free(&it);
	for (uint64_t g = pos / p.gblocks; ret == -ENOENT && g < ngroups; g++)
		if (!bm_count(summ, g, g + 1))
			pos = free_group(v, &p, pos, g, &lines);
	if (ret == -ENOENT)
		leaks(v, &p, pos, p.end - p.start, &lines);
	if (lines > V2M_MAX_LINES)
		fsck_say(v->c, "... %u leaked runs in all", lines);
	free(summ);
}

/* ---- the driver ---- */

/* Every inode below the superblock's next_ino (mount allocates from it). */
static void check_next_ino(struct v2ck *v)
{
	struct v2meta *m = v->meta;
	uint64_t top = m->nino ? m->ino[m->nino - 1].ino : 0;

	v->next_ino = v->sb->next_ino;
	if (top < v->sb->next_ino)
		return;
	fsck_meta_problem(v->c, true, "inode %llu is not below the superblock's next inode "
			  "number %llu: raising it", (unsigned long long)top,
			  (unsigned long long)v->sb->next_ino);
	v->next_ino = top + 1;
	rec(v, A_NEXT_INO, top + 1, 0, 0, 0, 0);
}

void v2m_check(struct v2ck *v)
{
	struct v2meta *m = v->meta;
	struct btree t;
	bool topen;

	if (!m || v->tree_bad[V2_TREE_INODES])
		return;		/* reported: the items are not all known */
	if (m->nino)
		qsort(m->ino, m->nino, sizeof(*m->ino), mino_cmp);
	m->ntree = m->nino;
	if (m->nent)
		qsort(m->ent, m->nent, sizeof(*m->ent), mname_cmp);
	if (m->nidx)
		qsort(m->idx, m->nidx, sizeof(*m->idx), mname_cmp);
	topen = bt_open(&t, &v->rec, v->cache, V2_TREE_INODES, v->sb->fs_uuid,
			&v->sb->roots[V2_TREE_INODES - 1]) == 0;
	check_next_ino(v);
	check_names(v, topen ? &t : NULL);
	check_orphans(v);
	check_counts(v);
	check_orphan_items(v);
	if (topen)
		bt_close(&t);
	if (!v->tree_bad[V2_TREE_REFCOUNT])
		check_sharing(v);
	if (v->fs)
		check_free(v);
	if (m->oom)
		fsck_hard_problem(v->c, "out of memory: the checks of names, link counts and "
				  "extents are incomplete");
	if (v->c->o->verbose)
		fsck_say(v->c, "names: %zu entries, %zu index items; %zu extents, %zu refcount "
			 "items; data-area bitmap %llu KiB", m->nent, m->nidx, m->next, m->nref,
			 (unsigned long long)((v->sb->total_blocks / 8 + 1023) / 1024));
}

/* ---- repairs ---- */

/* One above the directory's largest DIRINDEX cookie (FORMAT.md). */
static int next_cookie(struct btree *t, uint64_t dir, uint64_t *cookie)
{
	struct bkey start = { dir, V2_DIRINDEX + 1, 0 }, k;
	struct bt_iter it;
	const void *val;
	unsigned len;
	int ret;

	ret = bt_iter_init(&it, t, &start);
	if (ret == 0)
		ret = bt_iter_prev(&it, &k, &val, &len);
	bt_iter_free(&it);
	if (ret && ret != -ENOENT)
		return ret;
	*cookie = ret == 0 && k.id == dir && k.type == V2_DIRINDEX ? k.off + 1 : V2_COOKIE_FIRST;
	return 0;
}

static int add_index(struct btree *t, uint64_t dir, const struct v2_dirent *e)
{
	uint8_t val[V2_DIRENT_HDR + LOG_NAME_MAX];
	struct bkey k;
	uint64_t cookie;
	unsigned len;
	int ret;

	ret = next_cookie(t, dir, &cookie);
	if (ret == 0)
		ret = v2_dirindex_encode(e, val, sizeof(val), &len);
	k = v2_key_dirindex(dir, cookie);
	return ret ? ret : bt_insert(t, &k, val, len);
}

/* A new entry (lost+found, or an orphan in it) and its index item. */
static int link_entry(struct v2ck *v, struct btree *t, const struct act *a)
{
	static uint8_t val[BNODE_MAX_VAL];
	struct v2_dirent e = { .ino = a->b, .dtype = a->dtype,
			       .namelen = (uint16_t)strlen(a->name), .name = a->name };
	struct bkey k = v2_key_dirent(a->a, v2_hash56(v->sb->hash_seed, e.name, e.namelen));
	unsigned len = 0;
	int ret;

	ret = bt_lookup(t, &k, val, sizeof(val), &len);
	if (ret && ret != -ENOENT)
		return ret;
	if (ret)
		len = 0;
	ret = v2_dirent_add(val, &len, sizeof(val), &e);
	if (ret == 0)
		ret = bt_insert(t, &k, val, len);
	return ret ? ret : add_index(t, a->a, &e);
}

/* An existing entry: removed, its dtype changed, or its index item added. */
static int change_entry(struct v2ck *v, struct btree *t, const struct act *a)
{
	static uint8_t val[BNODE_MAX_VAL];
	struct mname x = { .dir = a->a, .ino = a->b, .h = a->h, .h2 = a->h2 };
	struct bkey k = v2_key_dirent(a->a, a->h);
	char name[LOG_NAME_MAX + 1];
	struct v2_dirent e;
	unsigned len;
	int ret;

	ret = ent_find(t, v->sb->hash_seed, &x, name, val, &len, &e);
	if (ret)
		return ret;
	e.name = name;
	if (a->kind == A_ADD_INDEX)
		return add_index(t, a->a, &e);
	ret = v2_dirent_del(val, &len, name, e.namelen);
	if (ret == 0 && a->kind == A_SET_DTYPE) {
		e.dtype = a->dtype;
		ret = v2_dirent_add(val, &len, sizeof(val), &e);
	}
	if (ret)
		return ret;
	return len ? bt_insert(t, &k, val, len) : bt_delete(t, &k);
}

static int set_inode(struct btree *t, const struct act *a)
{
	uint8_t val[V2_INODE_LEN];
	struct bkey k = v2_key_inode(a->a);
	struct log_inode in;
	unsigned len;
	int ret;

	ret = bt_lookup(t, &k, val, sizeof(val), &len);
	if (ret == 0)
		ret = v2_inode_decode(&k, val, len, &in);
	if (ret)
		return ret;
	if (a->kind == A_MAPPED) {
		in.mapped = a->b;
	} else {
		in.nlink = (uint32_t)a->b;
		if (S_ISDIR(in.mode))
			in.parent = a->c;
	}
	ret = v2_inode_encode(&in, val);
	return ret ? ret : bt_insert(t, &k, val, sizeof(val));
}

static int new_dir(struct btree *t, const struct act *a)
{
	uint8_t val[V2_INODE_LEN];
	struct bkey k = v2_key_inode(a->a);
	struct log_inode in = { .ino = a->a, .parent = a->b, .mode = S_IFDIR | 0700,
				.nlink = 2, .gen = 1 };
	int ret;

	in.atime_ns = in.mtime_ns = in.ctime_ns = in.btime_ns = fs_ts_ns(fs_now());
	ret = v2_inode_encode(&in, val);
	return ret ? ret : bt_insert(t, &k, val, sizeof(val));
}

/* Every item of an inode, its INODE item included. */
static int reclaim(struct btree *t, uint64_t ino)
{
	struct bkey start = { ino, 0, 0 }, k, *keys = NULL;
	size_t n = 0, cap = 0;
	struct bt_iter it;
	const void *val;
	unsigned len;
	int ret;

	ret = bt_iter_init(&it, t, &start);
	while (ret == 0 && (ret = bt_iter_next(&it, &k, &val, &len)) == 0 && k.id == ino) {
		if (!grow(&keys, &cap, n, sizeof(*keys))) {
			ret = -ENOMEM;
			break;
		}
		keys[n++] = k;
	}
	bt_iter_free(&it);
	if (ret == 0 || ret == -ENOENT)
		ret = 0;
	for (size_t i = 0; ret == 0 && i < n; i++)
		ret = bt_delete(t, &keys[i]);
	free(keys);
	if (ret == 0) {
		k = v2_key_orphan(ino);
		ret = bt_delete(t, &k);
	}
	return ret == -ENOENT ? 0 : ret;
}

static int apply_one(struct v2ck *v, struct btree *t, const struct act *a)
{
	struct bkey k;
	int ret;

	switch (a->kind) {
	case A_INODE:
	case A_MAPPED:
		return set_inode(t, a);
	case A_NEWDIR:
		return new_dir(t, a);
	case A_LINK:
		return link_entry(v, t, a);
	case A_ADD_INDEX:
	case A_DEL_ENTRY:
	case A_SET_DTYPE:
		return change_entry(v, t, a);
	case A_DEL_INDEX:
		k = v2_key_dirindex(a->a, a->b);
		ret = bt_delete(t, &k);
		return ret == -ENOENT ? 0 : ret;
	case A_RECLAIM:
		return reclaim(t, a->a);
	case A_CLAIM:
		return fspace_claim(v->fs, a->a, a->b);
	case A_PUT:
		return fspace_put(v->fs, a->a, a->b);
	case A_DEL_ORPHAN:
		k = v2_key_orphan(a->a);
		ret = bt_delete(t, &k);
		return ret == -ENOENT ? 0 : ret;
	case A_NEXT_INO:
	case A_COUNT:
		return 0;	/* the superblock fsck_v2.c writes */
	}
	return -EINVAL;
}

int v2m_apply(struct v2ck *v, struct btree *t)
{
	struct v2meta *m = v->meta;

	for (size_t i = 0; i < m->nact; i++) {
		int ret = apply_one(v, t, &m->act[i]);

		if (ret) {
			fsck_say(v->c, "repair %zu of %zu failed: %s", i + 1, m->nact,
				 strerror(-ret));
			return ret;
		}
	}
	return v2acl_apply(v, t);
}
