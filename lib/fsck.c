// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fsck: offline check and repair (fsck.h).  Owns the check passes and the
 * exit-code policy; loading and the final checkpoint are the mount code's
 * (tfs_mount with opts.offline, fs_offline_commit, tfs_unmount).
 *
 * Order: superblock slots of every device (opened on their own first, so a
 * device that is not twinfs or is in use is named before anything else),
 * then the offline load, the checkpoint and log copies of every device, the
 * structure passes (each one rebuilds its index of the inodes, so a pass
 * sees the repairs of the passes before it), and last the data checksums on
 * every device copy, read per device in runs of up to 1 MiB.
 *
 * Structural repairs are applied to the in-memory metadata with meta_apply()
 * in every mode: -n throws them away (and reports them as left), -y and -p
 * persist them with one new checkpoint.  Data copies are rewritten in place
 * from a verified copy (same block, same content) as they are found.
 *
 * Single-threaded: nothing else uses the loaded file system.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>

#include "dir.h"
#include "fs_i.h"
#include "fsck.h"

#define FSCK_RUN_BLOCKS 256u		/* blocks per device read (1 MiB) */
#define FSCK_PATH_MAX 4096
#define FSCK_PROBE_BYTES (128u * 1024)

/* One inode in the index a pass works from. */
struct ient {
	uint64_t ino;
	struct tfs_inode *ip;
	uint32_t nent;		/* directory entries naming it (from any directory) */
	uint32_t nsub;		/* directories: entries in it naming a directory */
	uint64_t eparent;	/* a directory holding an entry for it (0: none) */
	const char *ename;	/* that entry's name (valid until the entry goes) */
	uint16_t enamelen;
	bool reach;
};

/* One reference from a file block to a physical block. */
struct bref {
	uint64_t phys;		/* without the unwritten flag */
	uint64_t csum;
	uint64_t ino, fblk;
	bool unwritten;
	bool cleared;
};

struct fck {
	const struct fsck_opts *o;
	FILE *out;
	struct fsck_result *res;
	struct tfs *fs;
	bool fix;		/* -y or -p */
	bool unsafe;		/* a repair -p may not make was needed */
	uint64_t meta_fixes;	/* problems whose repair needs the new checkpoint */
	uint64_t left;		/* problems that stay */
	bool need_ckpt;		/* metadata copies damaged: write a new checkpoint */
	bool slots_bad;		/* a superblock slot damaged: rewrite both */
	bool stale[DEV_MAX];	/* device marked stale */
	uint64_t stale_unfixed[DEV_MAX]; /* its blocks that could not be brought up to date */
	bool missing[DEV_MAX];	/* device index absent */

	struct ient *iv;
	size_t niv;
	struct bref *refs;
	size_t nrefs, caprefs;
	uint64_t walk_ino;	/* extent walk context */
};

__attribute__((format(printf, 2, 3)))
static void say(struct fck *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(c->out, fmt, ap);
	va_end(ap);
	fputc('\n', c->out);
}

/* A structural problem whose repair is in memory until the checkpoint. */
__attribute__((format(printf, 3, 4)))
static void meta_problem(struct fck *c, bool safe, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(c->out, fmt, ap);
	va_end(ap);
	fputs(c->fix ? (safe || c->o->mode == FSCK_REPAIR ? ": fixing" : ": needs fsck -y")
		     : ": not fixed (-n)", c->out);
	fputc('\n', c->out);
	c->res->errors++;
	c->meta_fixes++;
	if (!safe)
		c->unsafe = true;
}

/* A problem nothing here can fix. */
__attribute__((format(printf, 2, 3)))
static void hard_problem(struct fck *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(c->out, fmt, ap);
	va_end(ap);
	fputc('\n', c->out);
	c->res->errors++;
	c->left++;
}

static uint64_t div_up(uint64_t a, uint64_t b)
{
	return (a + b - 1) / b;
}

static uint64_t le64(const void *p)
{
	const uint8_t *b = p;
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = (v << 8) | b[i];
	return v;
}

static const char *devname_(struct fck *c, unsigned i)
{
	return c->fs->devs[i] ? c->fs->devs[i]->path : "(missing)";
}

/* ---- superblocks (before the load) ---- */

struct scan_dev {
	struct super sb;	/* the newest valid slot */
	bool valid;
};

/* Read both slots of every device with a private backend.  Returns 0 or an
 * exit code (8) after printing why; fills usable[] with the devices the load
 * may open. */
static int scan_supers(struct fck *c, const char **usable, unsigned *nusable)
{
	const struct fsck_opts *o = c->o;
	struct scan_dev *sd = calloc(o->ndevs, sizeof(*sd));
	struct dev_backend *be = NULL;
	struct dev *d[DEV_MAX] = { 0 };
	void *buf = NULL;
	int first = -1, newest = -1, rc = 0, ret;
	char err[512];

	*nusable = 0;
	if (!sd || posix_memalign(&buf, TFS_BLOCK_SIZE, FSCK_PROBE_BYTES)) {
		say(c, "out of memory");
		rc = FSCK_EXIT_OPERROR;
		goto out;
	}
	ret = dev_backend_create("file", &be);
	if (ret < 0) {
		say(c, "cannot create an I/O backend: %s", strerror(-ret));
		rc = FSCK_EXIT_OPERROR;
		goto out;
	}
	for (unsigned i = 0; i < o->ndevs; i++) {
		ret = dev_open(o->devs[i], true, &d[i], err, sizeof(err));
		if (ret == -EBUSY) {
			say(c, "%s: in use (mounted?)", o->devs[i]);
			rc = FSCK_EXIT_OPERROR;
			goto out;
		}
		if (ret < 0) {
			say(c, "%s", err);
			rc = FSCK_EXIT_OPERROR;
			goto out;
		}
		for (unsigned j = 0; j < i; j++) {
			if (d[j]->fd >= 0 && d[i]->size == d[j]->size) {
				struct stat a, b;

				if (!fstat(d[i]->fd, &a) && !fstat(d[j]->fd, &b) &&
				    a.st_dev == b.st_dev && a.st_ino == b.st_ino &&
				    a.st_rdev == b.st_rdev) {
					say(c, "%s: same device as %s", o->devs[i], o->devs[j]);
					rc = FSCK_EXIT_OPERROR;
					goto out;
				}
			}
		}
		ret = dev_backend_attach(be, d[i]);
		if (ret < 0) {
			say(c, "%s: cannot attach to the I/O backend: %s", o->devs[i],
			    strerror(-ret));
			rc = FSCK_EXIT_OPERROR;
			goto out;
		}
	}

	for (unsigned i = 0; i < o->ndevs; i++) {
		uint32_t len = d[i]->size < FSCK_PROBE_BYTES ? (uint32_t)d[i]->size
							     : FSCK_PROBE_BYTES;
		int sret[2];
		struct super s[2];
		char why[2][200];
		const char *foreign;

		if (len < 2 * TFS_BLOCK_SIZE) {
			say(c, "%s: not a twinfs device (too small)", o->devs[i]);
			rc = FSCK_EXIT_OPERROR;
			goto out;
		}
		ret = dev_pread(be, d[i], buf, len, 0);
		if (ret < 0) {
			say(c, "%s: cannot read the superblocks: %s", o->devs[i], strerror(-ret));
			rc = FSCK_EXIT_OPERROR;
			goto out;
		}
		for (unsigned slot = 0; slot < 2; slot++) {
			why[slot][0] = '\0';
			sret[slot] = super_decode((char *)buf + slot * TFS_BLOCK_SIZE, slot,
						  &s[slot], why[slot], sizeof(why[slot]));
		}
		if (sret[0] == -ENOENT && sret[1] == -ENOENT) {
			foreign = super_probe_foreign(buf, len);
			if (foreign)
				say(c, "%s: not a twinfs device (it holds %s file system)",
				    o->devs[i], foreign);
			else
				say(c, "%s: not a twinfs device", o->devs[i]);
			rc = FSCK_EXIT_OPERROR;
			goto out;
		}
		for (unsigned slot = 0; slot < 2; slot++) {
			if (sret[slot] == -EPROTONOSUPPORT) {
				say(c, "%s: %s", o->devs[i], why[slot]);
				rc = FSCK_EXIT_OPERROR;
				goto out;
			}
		}
		for (unsigned slot = 0; slot < 2; slot++) {
			if (sret[slot] == 0 &&
			    (!sd[i].valid || s[slot].generation > sd[i].sb.generation)) {
				sd[i].sb = s[slot];
				sd[i].valid = true;
			}
		}
		if (!sd[i].valid) {
			hard_problem(c, "%s: both superblock slots damaged (%s; %s): the device "
				     "is left out; replace or rebuild it", o->devs[i], why[0], why[1]);
			continue;
		}
		for (unsigned slot = 0; slot < 2; slot++) {
			if (sret[slot] == -EUCLEAN) {
				meta_problem(c, true, "%s: superblock slot %u damaged (%s)",
					     o->devs[i], slot, why[slot]);
				c->slots_bad = true;
			} else if (sret[slot] == -ENOENT && sd[i].sb.generation >= 2) {
				meta_problem(c, true, "%s: superblock slot %u missing", o->devs[i],
					     slot);
				c->slots_bad = true;
			} else if (sret[slot] == 0 && o->verbose) {
				say(c, "%s: superblock slot %u: generation %llu", o->devs[i], slot,
				    (unsigned long long)s[slot].generation);
			}
		}
		if (first < 0)
			first = (int)i;
		if (memcmp(sd[i].sb.fs_uuid, sd[first].sb.fs_uuid, 16)) {
			say(c, "%s: belongs to another twinfs than %s", o->devs[i], o->devs[first]);
			rc = FSCK_EXIT_OPERROR;
			goto out;
		}
		if (newest < 0 || sd[i].sb.generation > sd[newest].sb.generation)
			newest = (int)i;
	}
	if (newest < 0) {
		say(c, "no device holds a readable superblock");
		rc = FSCK_EXIT_UNCORRECTED;
		goto out;
	}
	{
		const struct super *nb = &sd[newest].sb;
		bool seen[DEV_MAX] = { false };

		for (unsigned i = 0; i < o->ndevs; i++) {
			uint32_t idx = sd[i].sb.dev_index;

			if (!sd[i].valid)
				continue;
			if (idx >= nb->ndevs || memcmp(sd[i].sb.dev_uuid, nb->dev_uuids[idx], 16)) {
				say(c, "%s: no longer a member of this twinfs", o->devs[i]);
				rc = FSCK_EXIT_OPERROR;
				goto out;
			}
			if (seen[idx]) {
				say(c, "%s: same device slot %u given twice", o->devs[i], idx);
				rc = FSCK_EXIT_OPERROR;
				goto out;
			}
			seen[idx] = true;
			if (nb->dev_state[idx]) {
				c->stale[idx] = true;
			} else if (sd[i].sb.generation < nb->generation) {
				meta_problem(c, true, "%s: superblock generation %llu behind %llu",
					     o->devs[i], (unsigned long long)sd[i].sb.generation,
					     (unsigned long long)nb->generation);
			}
			usable[(*nusable)++] = o->devs[i];
		}
		for (unsigned i = 0; i < nb->ndevs; i++) {
			if (!seen[i]) {
				c->missing[i] = true;
				hard_problem(c, "device %u of %u is missing", i, nb->ndevs);
			}
		}
		if (o->verbose)
			say(c, "twinfs \"%s\": %u devices, generation %llu, %s", nb->label, nb->ndevs,
			    (unsigned long long)nb->generation,
			    nb->state == SUPER_CLEAN ? "clean" : "not cleanly unmounted");
	}
out:
	/* Released now: the load takes its own (exclusive for -y) lock. */
	for (unsigned i = 0; i < o->ndevs && i < DEV_MAX; i++) {
		if (d[i])
			flock(d[i]->fd, LOCK_UN);
	}
	if (be)
		dev_backend_destroy(be);
	for (unsigned i = 0; i < o->ndevs && i < DEV_MAX; i++)
		dev_close(d[i]);
	free(buf);
	free(sd);
	return rc;
}

/* ---- checkpoint and log copies ---- */

static int read_dev(struct fck *c, unsigned d, uint64_t blk, void *buf, uint32_t n)
{
	return dev_pread(c->fs->be, c->fs->devs[d], buf, n * TFS_BLOCK_SIZE, blk * TFS_BLOCK_SIZE);
}

static int write_dev(struct fck *c, unsigned d, uint64_t blk, const void *buf, uint32_t n)
{
	return dev_pwrite(c->fs->be, c->fs->devs[d], buf, n * TFS_BLOCK_SIZE,
			  blk * TFS_BLOCK_SIZE);
}

static void check_ckpt(struct fck *c)
{
	const struct super *sb = &c->fs->sb;
	uint64_t payload = div_up(sb->ckpt_bytes, TFS_BLOCK_SIZE);
	uint64_t table = div_up(payload * 8, TFS_BLOCK_SIZE);
	uint8_t *tb[DEV_MAX] = { 0 }, *good = NULL, *buf = NULL;
	bool tok[DEV_MAX] = { false };

	if (!sb->ckpt_blocks)
		return;
	if (posix_memalign((void **)&buf, TFS_BLOCK_SIZE, FSCK_RUN_BLOCKS * TFS_BLOCK_SIZE)) {
		hard_problem(c, "out of memory checking the checkpoint");
		return;
	}
	for (unsigned d = 0; d < c->fs->ndevs; d++) {
		if (!c->fs->devs[d] || c->stale[d])
			continue;
		if (posix_memalign((void **)&tb[d], TFS_BLOCK_SIZE, table * TFS_BLOCK_SIZE))
			continue;
		c->res->dev[d].blocks += table;
		if (read_dev(c, d, sb->ckpt_start, tb[d], (uint32_t)table) < 0 ||
		    csum_buf(tb[d], table * TFS_BLOCK_SIZE, le64(sb->fs_uuid)) !=
			    sb->ckpt_table_csum) {
			c->res->dev[d].bad += table;
			meta_problem(c, true, "%s: checkpoint table damaged", devname_(c, d));
			c->need_ckpt = true;
			continue;
		}
		tok[d] = true;
		if (!good)
			good = tb[d];
	}
	for (unsigned d = 0; good && d < c->fs->ndevs; d++) {
		uint64_t bad = 0;

		if (!tok[d] && (!c->fs->devs[d] || c->stale[d]))
			continue;
		for (uint64_t off = 0; off < payload; off += FSCK_RUN_BLOCKS) {
			uint32_t k = (uint32_t)(payload - off < FSCK_RUN_BLOCKS ? payload - off
									   : FSCK_RUN_BLOCKS);
			uint64_t blk = sb->ckpt_start + table + off;
			bool rok = read_dev(c, d, blk, buf, k) == 0;

			c->res->dev[d].blocks += k;
			for (uint32_t i = 0; i < k; i++) {
				if (!rok || csum_block(buf + (size_t)i * TFS_BLOCK_SIZE, blk + i) !=
						    le64(good + (off + i) * 8))
					bad++;
			}
		}
		if (bad) {
			c->res->dev[d].bad += bad;
			meta_problem(c, true, "%s: %llu of %llu checkpoint blocks damaged",
				     devname_(c, d), (unsigned long long)bad,
				     (unsigned long long)payload);
			c->need_ckpt = true;
		}
	}
	for (unsigned d = 0; d < DEV_MAX; d++)
		free(tb[d]);
	free(buf);
}

static int count_rec(void *ctx, const struct log_rec *r)
{
	(*(uint64_t *)ctx)++;
	return 0;
}

/* Replays the log from each device's copy alone: a copy that ends before
 * the combined replay did is damaged (the load used another copy). */
static void check_log(struct fck *c)
{
	struct tfs *fs = c->fs;
	struct log_geom g = {
		.start = fs->sb.log_start,
		.nblocks = fs->sb.log_blocks,
		.head_pos = fs->sb.log_head_pos,
		.head_seq = fs->sb.log_head_seq,
		.log_id = fs->sb.log_id,
	};

	if (c->o->verbose && fs->replay_next_seq > fs->sb.log_head_seq)
		say(c, "log: %llu transactions after the checkpoint",
		    (unsigned long long)(fs->replay_next_seq - fs->sb.log_head_seq));
	for (unsigned d = 0; d < fs->ndevs; d++) {
		struct dev *one[DEV_MAX] = { 0 };
		struct mirror m;
		uint64_t pos = 0, seq = 0, nrec = 0;
		int ret;

		if (!fs->devs[d] || c->stale[d])
			continue;
		one[d] = fs->devs[d];
		if (mirror_init(&m, fs->be, one, fs->ndevs) < 0)
			continue;
		ret = log_replay(&m, &g, count_rec, &nrec, &pos, &seq);
		if (ret < 0) {
			meta_problem(c, true, "%s: log copy unreadable: %s", devname_(c, d),
				     strerror(-ret));
			c->need_ckpt = true;
		} else if (seq < fs->replay_next_seq) {
			meta_problem(c, true, "%s: log copy damaged at transaction %llu "
				     "(the other copy holds %llu more)", devname_(c, d),
				     (unsigned long long)seq,
				     (unsigned long long)(fs->replay_next_seq - seq));
			c->need_ckpt = true;
		}
	}
}

/* ---- inode index ---- */

static int ient_cmp(const void *a, const void *b)
{
	const struct ient *x = a, *y = b;

	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

static struct ient *ifind(struct fck *c, uint64_t ino)
{
	struct ient key = { .ino = ino };

	return bsearch(&key, c->iv, c->niv, sizeof(*c->iv), ient_cmp);
}

static int build_index(struct fck *c)
{
	struct tfs_inode **v = NULL;
	size_t n = 0;
	int ret;

	free(c->iv);
	c->iv = NULL;
	c->niv = 0;
	ret = fs_isnapshot(c->fs, &v, &n);	/* offline: nothing deletes them */
	if (ret < 0)
		return ret;
	c->iv = calloc(n ? n : 1, sizeof(*c->iv));
	if (!c->iv) {
		free(v);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		c->iv[i] = (struct ient){ .ino = v[i]->ino, .ip = v[i] };
	free(v);
	c->niv = n;
	qsort(c->iv, n, sizeof(*c->iv), ient_cmp);

	for (size_t i = 0; i < n; i++) {
		struct tfs_inode *dp = c->iv[i].ip;
		struct dir_ent e;

		if (!S_ISDIR(dp->mode) || !dp->dir)
			continue;
		for (uint64_t ck = 2; dir_next(dp->dir, ck, &e) == 0; ck = e.cookie + 1) {
			struct ient *t = ifind(c, e.ino);

			if (!t)
				continue;
			t->nent++;
			if (!t->eparent) {
				t->eparent = dp->ino;
				t->ename = e.name;
				t->enamelen = e.namelen;
			}
			if (S_ISDIR(t->ip->mode))
				c->iv[i].nsub++;
		}
	}
	return 0;
}

/* "/a/b/c" for inodes reachable by names, "<inode N>/rest" otherwise. */
static const char *ipath(struct fck *c, uint64_t ino, char *buf, size_t len)
{
	const char *names[256];
	uint16_t lens[256];
	unsigned depth = 0;
	uint64_t cur = ino, top = 0;
	size_t o = 0;

	while (cur != TFS_ROOT_INO && depth < 256) {
		struct ient *e = ifind(c, cur);

		if (!e || !e->eparent) {
			top = cur;
			break;
		}
		names[depth] = e->ename;
		lens[depth] = e->enamelen;
		depth++;
		cur = e->eparent;
	}
	if (top)
		o = (size_t)snprintf(buf, len, "<inode %llu>", (unsigned long long)top);
	if (!depth && !top)
		snprintf(buf, len, "/");
	while (depth-- > 0 && o + 1 < len) {
		int w = snprintf(buf + o, len - o, "/%.*s", (int)lens[depth], names[depth]);

		if (w < 0)
			break;
		o += (size_t)w;
	}
	return buf;
}

static int apply(struct fck *c, const struct log_rec *r)
{
	int ret = meta_apply(c->fs, r, NULL);

	if (ret < 0)
		say(c, "applying a repair failed: %s", strerror(-ret));
	return ret;
}

static int set_dent(struct fck *c, uint16_t type, uint64_t parent, const char *name,
		    size_t namelen, uint64_t ino)
{
	struct log_rec r = { .type = type };

	r.dent.parent = parent;
	r.dent.ino = ino;
	r.dent.namelen = (uint16_t)namelen;
	r.dent.name = name;
	return apply(c, &r);
}

static int set_inode(struct fck *c, struct tfs_inode *ip, uint32_t nlink, uint64_t parent)
{
	struct log_rec r;

	fs_iencode(ip, &r);
	r.inode.nlink = nlink;
	if (S_ISDIR(ip->mode))
		r.inode.parent = parent;
	return apply(c, &r);
}

static int clear_blocks(struct fck *c, uint64_t ino, uint64_t fblk, uint64_t n)
{
	struct log_rec r = { .type = LR_EXT_CLEAR };

	r.clr.ino = ino;
	r.clr.fblk = fblk;
	r.clr.n = n;
	return apply(c, &r);
}

/* ---- pass 1: inodes on their own ---- */

struct bad_run {
	uint64_t fblk, n, phys;
};

struct range_ctx {
	struct fck *c;
	struct bad_run *v;
	size_t n, cap;
};

static bool phys_ok(const struct super *sb, uint64_t p)
{
	if (p < sb->data_start || p >= sb->total_blocks)
		return false;
	if (sb->wib_start && p >= sb->wib_start && p < sb->wib_start + sb->wib_blocks)
		return false;	/* the write-intent bitmap */
	return !(sb->ckpt_blocks && p >= sb->ckpt_start && p < sb->ckpt_start + sb->ckpt_blocks);
}

static int range_run(void *ctx, uint64_t fblk, uint64_t phys, uint32_t n,
		     const struct extent_ent *ents)
{
	struct range_ctx *rc = ctx;
	const struct super *sb = &rc->c->fs->sb;

	for (uint32_t i = 0; i < n; i++) {
		uint64_t p = EXTENT_PHYS(phys) + i;

		if (phys_ok(sb, p))
			continue;
		if (rc->n && rc->v[rc->n - 1].fblk + rc->v[rc->n - 1].n == fblk + i &&
		    rc->v[rc->n - 1].phys + rc->v[rc->n - 1].n == p) {
			rc->v[rc->n - 1].n++;
			continue;
		}
		if (rc->n == rc->cap) {
			size_t nc = rc->cap ? rc->cap * 2 : 16;
			struct bad_run *nv = realloc(rc->v, nc * sizeof(*nv));

			if (!nv)
				return -ENOMEM;
			rc->v = nv;
			rc->cap = nc;
		}
		rc->v[rc->n++] = (struct bad_run){ .fblk = fblk + i, .n = 1, .phys = p };
	}
	return 0;
}

static int pass_inodes(struct fck *c)
{
	char path[FSCK_PATH_MAX];
	struct ient *root = ifind(c, TFS_ROOT_INO);
	int ret;

	if (!root || !S_ISDIR(root->ip->mode)) {
		struct log_rec r;
		struct timespec now = fs_now();

		meta_problem(c, false, "root directory %s: creating an empty one",
			     root ? "is not a directory" : "missing");
		memset(&r, 0, sizeof(r));
		r.type = LR_INODE;
		r.inode.ino = TFS_ROOT_INO;
		r.inode.parent = TFS_ROOT_INO;
		r.inode.mode = S_IFDIR | 0755;
		r.inode.nlink = 2;
		r.inode.gen = 1;
		r.inode.atime_ns = r.inode.mtime_ns = r.inode.ctime_ns = r.inode.btime_ns =
			fs_ts_ns(now);
		if (root)
			clear_blocks(c, TFS_ROOT_INO, 0, EXTENT_MAX_FBLK);
		ret = apply(c, &r);
		if (ret < 0)
			return ret;
		ret = build_index(c);
		if (ret < 0)
			return ret;
	}

	for (size_t i = 0; i < c->niv; i++) {
		struct tfs_inode *ip = c->iv[i].ip;
		uint32_t t = ip->mode & S_IFMT;

		if (t != S_IFREG && t != S_IFDIR && t != S_IFLNK && t != S_IFCHR &&
		    t != S_IFBLK && t != S_IFIFO && t != S_IFSOCK) {
			struct log_rec r = { .type = LR_INODE_DEL };

			meta_problem(c, false, "%s: inode %llu has an invalid type (mode 0%o): "
				     "deleting it", ipath(c, ip->ino, path, sizeof(path)),
				     (unsigned long long)ip->ino, ip->mode);
			r.del.ino = ip->ino;
			c->iv[i].ip = NULL;
			ret = apply(c, &r);
			if (ret < 0)
				return ret;
			continue;
		}
		if (t != S_IFREG && extent_mapped(&ip->map)) {
			meta_problem(c, false, "%s: inode %llu is not a regular file but maps "
				     "%llu data blocks: unmapping them",
				     ipath(c, ip->ino, path, sizeof(path)),
				     (unsigned long long)ip->ino,
				     (unsigned long long)extent_mapped(&ip->map));
			clear_blocks(c, ip->ino, 0, EXTENT_MAX_FBLK);
			continue;
		}
		if (t == S_IFREG) {
			struct range_ctx rc = { .c = c };

			ret = extent_walk(&ip->map, 0, EXTENT_MAX_FBLK, range_run, &rc);
			for (size_t k = 0; ret == 0 && k < rc.n; k++) {
				meta_problem(c, false, "%s: offset %llu: %llu block(s) at %llu outside "
					     "the data area or in metadata: unmapping them (data lost)",
					     ipath(c, ip->ino, path, sizeof(path)),
					     (unsigned long long)(rc.v[k].fblk * TFS_BLOCK_SIZE),
					     (unsigned long long)rc.v[k].n,
					     (unsigned long long)rc.v[k].phys);
				ret = clear_blocks(c, ip->ino, rc.v[k].fblk, rc.v[k].n);
			}
			free(rc.v);
			if (ret < 0)
				return ret;
		}
	}
	return build_index(c);
}

/* ---- pass 2: directory entries ---- */

struct dent_fix {
	uint64_t parent;
	char name[LOG_NAME_MAX + 1];
	uint16_t namelen;
};

static bool name_ok(const char *n, size_t len)
{
	if (!len || len > LOG_NAME_MAX || memchr(n, '/', len) || memchr(n, '\0', len))
		return false;
	return !(len == 1 && n[0] == '.') && !(len == 2 && n[0] == '.' && n[1] == '.');
}

static int pass_dents(struct fck *c)
{
	struct dent_fix *fx = NULL;
	size_t nfx = 0, cap = 0;
	char path[FSCK_PATH_MAX];
	int ret = 0;

	/* Two rounds: directories named by more than one entry keep the entry
	 * in the directory their ".." names; the second round drops the rest. */
	for (int round = 0; round < 2; round++) {
		for (size_t i = 0; i < c->niv; i++) {
			struct tfs_inode *dp = c->iv[i].ip;
			struct dir_ent e;

			if (!S_ISDIR(dp->mode) || !dp->dir)
				continue;
			for (uint64_t ck = 2; dir_next(dp->dir, ck, &e) == 0; ck = e.cookie + 1) {
				struct ient *t = ifind(c, e.ino);
				const char *why = NULL;

				if (round == 0) {
					if (!name_ok(e.name, e.namelen))
						why = "has an invalid name";
					else if (!t)
						why = "names a missing inode";
					else if (e.ino == TFS_ROOT_INO)
						why = "names the root directory";
					else if (S_ISDIR(t->ip->mode) && t->ip->parent == dp->ino) {
						if (t->reach)	/* already kept one */
							why = "is a second link to a directory";
						t->reach = true;
					}
				} else if (t && e.ino != TFS_ROOT_INO && S_ISDIR(t->ip->mode) &&
					   t->ip->parent != dp->ino && name_ok(e.name, e.namelen)) {
					if (t->reach)
						why = "is a second link to a directory";
					t->reach = true;
				}
				if (!why)
					continue;
				meta_problem(c, false, "%s/%.*s: entry (inode %llu) %s: removing it",
					     dp->ino == TFS_ROOT_INO ? ""
						     : ipath(c, dp->ino, path, sizeof(path)),
					     (int)e.namelen, e.name, (unsigned long long)e.ino, why);
				if (nfx == cap) {
					size_t nc = cap ? cap * 2 : 16;
					struct dent_fix *nv = realloc(fx, nc * sizeof(*nv));

					if (!nv) {
						free(fx);
						return -ENOMEM;
					}
					fx = nv;
					cap = nc;
				}
				fx[nfx].parent = dp->ino;
				fx[nfx].namelen = e.namelen;
				memcpy(fx[nfx].name, e.name, e.namelen);
				nfx++;
			}
		}
	}
	for (size_t i = 0; i < c->niv; i++)
		c->iv[i].reach = false;
	for (size_t i = 0; ret == 0 && i < nfx; i++)
		ret = set_dent(c, LR_DENT_DEL, fx[i].parent, fx[i].name, fx[i].namelen, 0);
	free(fx);
	if (ret < 0)
		return ret;
	return build_index(c);
}

/* ---- pass 3: reachability, orphans, lost+found ---- */

static int reach(struct fck *c)
{
	uint64_t *q = malloc((c->niv + 1) * sizeof(*q));
	size_t qh = 0, qt = 0;
	struct ient *r = ifind(c, TFS_ROOT_INO);

	if (!q)
		return -ENOMEM;
	for (size_t i = 0; i < c->niv; i++)
		c->iv[i].reach = false;
	if (r) {
		r->reach = true;
		q[qt++] = r->ino;
	}
	while (qh < qt) {
		struct ient *d = ifind(c, q[qh++]);
		struct dir_ent e;

		if (!d || !S_ISDIR(d->ip->mode) || !d->ip->dir)
			continue;
		for (uint64_t ck = 2; dir_next(d->ip->dir, ck, &e) == 0; ck = e.cookie + 1) {
			struct ient *t = ifind(c, e.ino);

			if (!t || t->reach)
				continue;
			t->reach = true;
			q[qt++] = t->ino;
		}
	}
	free(q);
	return 0;
}

/* The lost+found directory, created if needed; 0 if it cannot be. */
static uint64_t lost_found(struct fck *c)
{
	static const char lf[] = "lost+found";
	struct tfs *fs = c->fs;
	struct tfs_inode *root = fs_iget(fs, TFS_ROOT_INO);
	struct log_rec r;
	uint64_t ino;
	struct timespec now = fs_now();

	if (dir_lookup(root->dir, lf, sizeof(lf) - 1, &ino) == 0) {
		struct tfs_inode *ip = fs_iget(fs, ino);

		return ip && S_ISDIR(ip->mode) ? ino : 0;
	}
	ino = fs_ialloc(fs);
	memset(&r, 0, sizeof(r));
	r.type = LR_INODE;
	r.inode.ino = ino;
	r.inode.parent = TFS_ROOT_INO;
	r.inode.mode = S_IFDIR | 0700;
	r.inode.uid = root->uid;
	r.inode.gid = root->gid;
	r.inode.nlink = 2;
	r.inode.gen = 1;
	r.inode.atime_ns = r.inode.mtime_ns = r.inode.ctime_ns = r.inode.btime_ns = fs_ts_ns(now);
	if (apply(c, &r) < 0 || set_dent(c, LR_DENT_SET, TFS_ROOT_INO, lf, sizeof(lf) - 1, ino) < 0 ||
	    set_inode(c, root, root->nlink + 1, root->parent) < 0)
		return 0;
	say(c, "created /lost+found");
	return ino;
}

static int move_to_lf(struct fck *c, struct tfs_inode *ip)
{
	uint64_t lf = lost_found(c), tmp;
	struct tfs_inode *lp = lf ? fs_iget(c->fs, lf) : NULL;
	char name[32];
	int len;

	if (!lp)
		return -ENOSPC;
	len = snprintf(name, sizeof(name), "#%llu", (unsigned long long)ip->ino);
	if (dir_lookup(lp->dir, name, (size_t)len, &tmp) == 0)
		return -EEXIST;
	if (set_dent(c, LR_DENT_SET, lf, name, (size_t)len, ip->ino) < 0)
		return -EIO;
	if (S_ISDIR(ip->mode)) {
		if (set_inode(c, ip, ip->nlink, lf) < 0 || set_inode(c, lp, lp->nlink + 1, lp->parent) < 0)
			return -EIO;
	}
	return 0;
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

static int pass_reach(struct fck *c)
{
	char path[FSCK_PATH_MAX];
	int ret;

	for (size_t round = 0; round < c->niv + 16; round++) {
		size_t nun = 0, done = 0;
		struct ient *cycle = NULL;

		ret = reach(c);
		if (ret < 0)
			return ret;
		for (size_t i = 0; i < c->niv; i++) {
			struct ient *e = &c->iv[i];
			struct log_rec r = { .type = LR_INODE_DEL };

			if (e->reach)
				continue;
			nun++;
			if (e->nent) {
				if (S_ISDIR(e->ip->mode) && !cycle)
					cycle = e;
				continue;
			}
			done++;
			if (e->ip->nlink == 0) {
				meta_problem(c, true, "orphan %s inode %llu (no name, link count 0): "
					     "reclaiming it", kind(e->ip->mode),
					     (unsigned long long)e->ino);
				r.del.ino = e->ino;
				ret = apply(c, &r);
				if (ret < 0)
					return ret;
				continue;
			}
			meta_problem(c, false, "unreachable %s inode %llu (link count %u): moving it "
				     "to /lost+found/#%llu", kind(e->ip->mode),
				     (unsigned long long)e->ino, e->ip->nlink,
				     (unsigned long long)e->ino);
			ret = move_to_lf(c, e->ip);
			if (ret < 0) {
				say(c, "cannot move inode %llu to /lost+found: %s",
				    (unsigned long long)e->ino, strerror(-ret));
				return ret;
			}
		}
		if (!nun)
			return 0;
		if (!done && cycle) {
			/* Directories naming each other in a loop cut off from the
			 * root: detach one, it goes to lost+found next round. */
			meta_problem(c, false, "%s: directory inode %llu is in a loop cut off from "
				     "the root: detaching it",
				     ipath(c, cycle->ino, path, sizeof(path)),
				     (unsigned long long)cycle->ino);
			ret = set_dent(c, LR_DENT_DEL, cycle->eparent, cycle->ename,
				       cycle->enamelen, 0);
			if (ret < 0)
				return ret;
		} else if (!done) {
			return 0;	/* only files in unreachable places: nothing to cut */
		}
		ret = build_index(c);
		if (ret < 0)
			return ret;
	}
	return 0;
}

/* ---- pass 4: link counts and ".." ---- */

static int pass_counts(struct fck *c)
{
	char path[FSCK_PATH_MAX];
	int ret = 0;

	for (size_t i = 0; ret == 0 && i < c->niv; i++) {
		struct ient *e = &c->iv[i];
		struct tfs_inode *ip = e->ip;
		uint32_t want = S_ISDIR(ip->mode) ? 2 + e->nsub : e->nent;
		uint64_t parent = ip->parent;

		if (S_ISDIR(ip->mode)) {
			uint64_t wantp = ip->ino == TFS_ROOT_INO ? TFS_ROOT_INO : e->eparent;

			if (wantp && parent != wantp) {
				meta_problem(c, false, "%s: \"..\" names inode %llu, not its parent "
					     "%llu", ipath(c, ip->ino, path, sizeof(path)),
					     (unsigned long long)parent, (unsigned long long)wantp);
				parent = wantp;
			}
		}
		if (ip->nlink != want)
			meta_problem(c, true, "%s: link count %u, should be %u",
				     ipath(c, ip->ino, path, sizeof(path)), ip->nlink, want);
		if (ip->nlink != want || parent != ip->parent)
			ret = set_inode(c, ip, want, parent);
	}
	return ret;
}

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

	for (unsigned d = 0; d < c->fs->ndevs; d++)
		if (c->fs->devs[d] && read_dev(c, d, phys, buf, 1) == 0)
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
		meta_problem(c, false, "%s: offset %llu: block %llu is also used by %s offset %llu "
			     "with other contents: unmapping it here (data lost)",
			     ipath(c, r->ino, p1, sizeof(p1)),
			     (unsigned long long)(r->fblk * TFS_BLOCK_SIZE),
			     (unsigned long long)phys, ipath(c, c->refs[keep].ino, p2, sizeof(p2)),
			     (unsigned long long)(c->refs[keep].fblk * TFS_BLOCK_SIZE));
		r->cleared = true;
		clear_blocks(c, r->ino, r->fblk, 1);
	}
}

static int pass_blocks(struct fck *c)
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
			hard_problem(c, "block %llu cannot be referenced (internal error)",
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
			hard_problem(c, "block %llu: %u references but the allocator counts %u",
				     (unsigned long long)c->refs[s].phys, n,
				     alloc_refs(a, c->refs[s].phys));
	}
	alloc_destroy(a);
	return 0;
}

/* ---- data checksums on every copy ---- */

static void data_block(struct fck *c, const struct bref *r, uint8_t **bufs,
		       bool (*rbad)[FSCK_RUN_BLOCKS], uint32_t i)
{
	struct tfs *fs = c->fs;
	char path[FSCK_PATH_MAX];
	int goodd = -1;
	bool bad[DEV_MAX] = { false };
	unsigned nbad = 0;

	for (unsigned d = 0; d < fs->ndevs; d++) {
		if (!fs->devs[d])
			continue;
		c->res->dev[d].blocks++;
		if (!rbad[d][i] && csum_block(bufs[d] + (size_t)i * TFS_BLOCK_SIZE, r->phys) == r->csum) {
			if (goodd < 0)
				goodd = (int)d;
			continue;
		}
		bad[d] = true;
		nbad++;
		c->res->dev[d].bad++;
	}
	if (!nbad)
		return;
	if (goodd < 0) {
		c->res->unrecoverable++;
		hard_problem(c, "%s: offset %llu (block %llu): no copy verifies: unrecoverable",
			     ipath(c, r->ino, path, sizeof(path)),
			     (unsigned long long)(r->fblk * TFS_BLOCK_SIZE),
			     (unsigned long long)r->phys);
		for (unsigned d = 0; d < fs->ndevs; d++)
			if (c->stale[d])
				c->stale_unfixed[d]++;
		return;
	}
	for (unsigned d = 0; d < fs->ndevs; d++) {
		bool ok;

		if (!bad[d])
			continue;
		ok = c->fix && write_dev(c, d, r->phys, bufs[goodd] + (size_t)i * TFS_BLOCK_SIZE,
					 1) == 0;
		if (ok) {
			c->res->dev[d].repaired++;
			atomic_fetch_add(&fs->mirror.ctr[d].repaired, 1);
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
		say(c, "%s: offset %llu (block %llu): bad copy on %s: %s",
		    ipath(c, r->ino, path, sizeof(path)),
		    (unsigned long long)(r->fblk * TFS_BLOCK_SIZE), (unsigned long long)r->phys,
		    fs->devs[d]->path,
		    ok ? "rewritten from a good copy" : c->fix ? "REWRITE FAILED" : "not fixed (-n)");
	}
}

static int pass_data(struct fck *c)
{
	struct tfs *fs = c->fs;
	uint8_t *bufs[DEV_MAX] = { 0 };
	struct bref **run = NULL;
	int ret = 0;

	run = malloc(FSCK_RUN_BLOCKS * sizeof(*run));
	if (!run)
		return -ENOMEM;
	for (unsigned d = 0; d < fs->ndevs; d++) {
		if (fs->devs[d] && posix_memalign((void **)&bufs[d], TFS_BLOCK_SIZE,
						  FSCK_RUN_BLOCKS * TFS_BLOCK_SIZE)) {
			ret = -ENOMEM;
			goto out;
		}
	}
	for (size_t s = 0; s < c->nrefs; ) {
		uint32_t n = 0;
		uint64_t start;
		bool rbad[DEV_MAX][FSCK_RUN_BLOCKS];

		/* One representative per physical block (after pass_blocks every
		 * live reference to a block agrees), consecutive blocks only. */
		for (; s < c->nrefs && n < FSCK_RUN_BLOCKS; s++) {
			struct bref *r = &c->refs[s];

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
		if (!n)
			continue;
		start = run[0]->phys;
		for (unsigned d = 0; d < fs->ndevs; d++) {
			if (!fs->devs[d])
				continue;
			memset(rbad[d], 0, n * sizeof(bool));
			if (read_dev(c, d, start, bufs[d], n) == 0)
				continue;
			/* Find the unreadable blocks one by one. */
			for (uint32_t i = 0; i < n; i++)
				rbad[d][i] = read_dev(c, d, start + i,
						      bufs[d] + (size_t)i * TFS_BLOCK_SIZE, 1) < 0;
		}
		for (uint32_t i = 0; i < n; i++)
			data_block(c, run[i], bufs, rbad, i);
	}
	if (c->fix) {
		for (unsigned d = 0; d < fs->ndevs; d++)
			if (fs->devs[d])
				dev_flush(fs->be, fs->devs[d]);
	}
out:
	for (unsigned d = 0; d < DEV_MAX; d++)
		free(bufs[d]);
	free(run);
	return ret;
}

/* ---- driver ---- */

static void count_inodes(struct fck *c)
{
	for (size_t i = 0; i < c->niv; i++) {
		uint32_t m = c->iv[i].ip->mode;

		c->res->inodes++;
		if (S_ISDIR(m))
			c->res->dirs++;
		else if (S_ISREG(m))
			c->res->files++;
		else if (S_ISLNK(m))
			c->res->symlinks++;
		else
			c->res->special++;
	}
}

static int structure(struct fck *c)
{
	int ret = build_index(c);

	if (ret == 0)
		ret = pass_inodes(c);
	if (ret == 0)
		ret = pass_dents(c);
	if (ret == 0)
		ret = pass_reach(c);
	if (ret == 0)
		ret = build_index(c);
	if (ret == 0)
		ret = pass_counts(c);
	if (ret == 0)
		ret = build_index(c);
	if (ret == 0)
		ret = pass_blocks(c);
	if (ret == 0)
		ret = build_index(c);	/* names as repaired, for the data pass */
	return ret;
}

/* Persist the in-memory repairs: a new checkpoint (two if a superblock slot
 * was bad, so both slots are rewritten). */
static int commit(struct fck *c)
{
	struct tfs *fs = c->fs;
	char err[512] = "";
	int ret;

	ret = fs_offline_commit(fs, err, sizeof(err));
	if (ret < 0) {
		say(c, "cannot write the repairs: %s", err[0] ? err : strerror(-ret));
		tfs_abandon(fs);
		return ret;
	}
	for (unsigned d = 0; d < fs->ndevs; d++) {
		if (c->stale[d] && fs->devs[d] && !c->stale_unfixed[d])
			atomic_store(&fs->mirror.state[d], MDEV_OK);
	}
	/* What the write-intent bitmap says a device missed is now copied. */
	if (mirror_insync(&fs->mirror) == fs->ndevs)
		mirror_clear_all(&fs->mirror);
	ret = c->slots_bad ? tfs_checkpoint(fs) : 0;
	if (ret == 0)
		ret = tfs_unmount(fs);
	else
		tfs_unmount(fs);
	if (ret < 0)
		say(c, "writing the checkpoint failed: %s", strerror(-ret));
	return ret;
}

int fsck_run(const struct fsck_opts *o, struct fsck_result *resp)
{
	struct fsck_result res0;
	struct fck c = { .o = o, .res = resp ? resp : &res0 };
	const char *usable[DEV_MAX];
	unsigned nusable = 0;
	struct tfs_opts to;
	char err[512] = "";
	uint64_t stale_err = 0;
	bool write = false;
	int rc, ret;

	memset(c.res, 0, sizeof(*c.res));
	c.out = o->out ? o->out : stdout;
	c.fix = o->mode == FSCK_REPAIR || o->mode == FSCK_PREEN;
	if (!o->devs || o->ndevs == 0 || o->ndevs > DEV_MAX) {
		say(&c, "need 1 to %d devices", DEV_MAX);
		return FSCK_EXIT_OPERROR;
	}
	rc = scan_supers(&c, usable, &nusable);
	if (rc)
		return rc;

	memset(&to, 0, sizeof(to));
	to.devs = usable;
	to.ndevs = nusable;
	to.backend = o->backend;
	to.degraded = true;
	to.offline = true;
	to.readonly = !c.fix;
	ret = tfs_mount(&to, &c.fs, err, sizeof(err));
	if (ret == -EBUSY) {
		say(&c, "%s", err);
		return FSCK_EXIT_OPERROR;
	}
	if (ret < 0) {
		hard_problem(&c, "cannot load the metadata: %s", err);
		return ret == -EUCLEAN || ret == -EIO ? FSCK_EXIT_UNCORRECTED : FSCK_EXIT_OPERROR;
	}
	c.res->ndevs = c.fs->ndevs;
	for (unsigned d = 0; d < c.fs->ndevs; d++)
		snprintf(c.res->dev[d].path, sizeof(c.res->dev[d].path), "%s", devname_(&c, d));
	for (unsigned d = 0; d < c.fs->ndevs; d++) {
		if (!c.stale[d])
			continue;
		c.res->errors++;
		stale_err++;
		if (c.fs->sb.rb_state == SUPER_RB_RUNNING) {
			/* The rebuild's cursor and bitmap are its own: let it
			 * finish rather than declare the device in sync here. */
			c.stale_unfixed[d]++;
			say(&c, "%s: stale, and a rebuild onto it is in progress: mount the file "
			    "system to let it finish", devname_(&c, d));
			continue;
		}
		say(&c, "%s: stale (it missed writes while failed or missing): %s", devname_(&c, d),
		    c.fix ? "bringing every block up to date" : "not fixed (-n)");
	}

	/* The load reads the checkpoint verified, and rewrites a bad copy it
	 * meets (with -n the rewrite fails, and check_ckpt reports the copy). */
	for (unsigned d = 0; c.fix && d < c.fs->ndevs; d++) {
		uint64_t n = atomic_load(&c.fs->mirror.ctr[d].repaired) -
			     c.fs->sb.stats[d].repaired;

		if (!n)
			continue;
		c.res->errors++;
		c.res->fixed++;
		c.res->dev[d].bad += n;
		c.res->dev[d].repaired += n;
		say(&c, "%s: %llu bad checkpoint block copies: rewritten from a good copy",
		    devname_(&c, d), (unsigned long long)n);
	}
	check_ckpt(&c);
	check_log(&c);
	ret = structure(&c);
	if (ret < 0) {
		hard_problem(&c, "structure check stopped: %s", strerror(-ret));
		tfs_abandon(c.fs);
		goto summary;
	}
	count_inodes(&c);
	ret = pass_data(&c);
	if (ret < 0)
		hard_problem(&c, "data check stopped: %s", strerror(-ret));
	for (unsigned d = 0; d < c.fs->ndevs; d++) {
		if (c.stale[d] && c.stale_unfixed[d] && c.fix &&
		    c.fs->sb.rb_state != SUPER_RB_RUNNING)
			say(&c, "%s: %llu blocks could not be brought up to date; it stays stale",
			    devname_(&c, d), (unsigned long long)c.stale_unfixed[d]);
	}

	if (c.fix && o->mode == FSCK_PREEN && c.unsafe) {
		say(&c, "UNEXPECTED INCONSISTENCY: run fsck.twinfs -y (or -n to see it all)");
		write = false;
	} else if (c.fix) {
		/* Data repairs too: the counters of repaired blocks are kept in
		 * the superblocks. */
		write = c.meta_fixes || c.need_ckpt || stale_err || c.res->fixed;
	}
	if (write) {
		ret = commit(&c);
		c.fs = NULL;
		if (ret == 0) {
			c.res->fixed += c.meta_fixes;
			for (unsigned d = 0; d < DEV_MAX; d++)
				if (c.stale[d] && !c.stale_unfixed[d])
					c.res->fixed++;
		}
	} else {
		tfs_abandon(c.fs);
		c.fs = NULL;
	}

summary:
	say(&c, "%llu inodes (%llu directories, %llu files, %llu symlinks, %llu other), "
	    "%llu data blocks (%llu shared)",
	    (unsigned long long)c.res->inodes, (unsigned long long)c.res->dirs,
	    (unsigned long long)c.res->files, (unsigned long long)c.res->symlinks,
	    (unsigned long long)c.res->special, (unsigned long long)c.res->data_blocks,
	    (unsigned long long)c.res->shared_blocks);
	for (unsigned d = 0; d < c.res->ndevs; d++)
		say(&c, "%s: %llu blocks checked, %llu bad, %llu repaired", c.res->dev[d].path,
		    (unsigned long long)c.res->dev[d].blocks, (unsigned long long)c.res->dev[d].bad,
		    (unsigned long long)c.res->dev[d].repaired);
	say(&c, "%llu errors found, %llu fixed, %llu left", (unsigned long long)c.res->errors,
	    (unsigned long long)c.res->fixed,
	    (unsigned long long)(c.res->errors - c.res->fixed));
	free(c.iv);
	free(c.refs);
	if (!c.res->errors)
		return FSCK_EXIT_OK;
	return c.res->errors == c.res->fixed ? FSCK_EXIT_FIXED : FSCK_EXIT_UNCORRECTED;
}
