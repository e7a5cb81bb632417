// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Description: fuzz mount and fsck with a damaged format-v2 image.  Once, a
 * real v2 file system is made on a sparse image (mkfs -O v2, a few
 * directories, files with data, xattrs, a symlink, a checkpoint, a clean
 * unmount) and the nodes its trees reach are found.  Each input is a list
 * of patches:
 *   sel u8, flags u8, off u16 (le), n u8, n bytes
 * sel picks the superblock (0) or one of the tree nodes; the bytes go at
 * off.  With flags bit 0 the checksums are made right again (a node is
 * resealed and every parent pointer up to the superblock's root follows;
 * a superblock patch goes into its decoded fields and is re-encoded), so
 * damage that verifies reaches the decoders and the tree code; without it
 * the checksums must catch it.  Then the image is mounted (every write of
 * the mount dropped, so the image stays as patched; refused: one line says
 * why, and -o rescue is tried), walked (readdir, getattr, read, readlink,
 * listxattr) and dropped, and fsck -n runs on it.  Refused or mounted, never a crash, a hang or undefined behaviour.
 * The base image has short nodes (mkfs's default): a node's bytes are its
 * slot as on disk (folded), a resealed node is unfolded, sealed and folded
 * again.  With TFS_FUZZ_PIECES set (fuzz_v2image_pieces) it is made with
 * -O pieces: every pointer carries nblocks (a resealed node's nb goes into
 * its parent's pointer or root), every read verifies a chain.
 */
#include <assert.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bnode.h"
#include "fs_i.h"
#include "fsck.h"
#include "le.h"
#include "super.h"
#include "tfs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define IMG_SIZE (64ull << 20)
#define BS 4096u
#define MAXNODES 64
#define DROP_ALL "op=write,kind=drop;op=flush,kind=drop"

struct tnode {
	uint64_t addr;
	int parent;		/* index, -1: a root */
	unsigned slot;		/* in the parent, or the tree id - 1 */
	uint8_t orig[BNODE_SIZE], cur[BNODE_SIZE];
};

static char img[64];
static int ifd = -1;
static struct super sb0;	/* the newest superblock of the base image */
static unsigned sb_slot;
static uint8_t sb_orig[BS];
static struct tnode nodes[MAXNODES];
static unsigned nnodes;
static bool short_img;		/* SUPER_INCOMPAT_V2_SHORT_NODES */
static bool pieces_img;		/* SUPER_INCOMPAT_V2_PIECES */
static uint8_t scratch[BNODE_SIZE];
static FILE *devnull;
static const struct tfs_cred cred = { .uid = 0, .gid = 0 };

static void base_files(struct tfs *fs)
{
	static char buf[40000];
	struct tfs_file *f;
	struct stat st;
	uint64_t dir;
	char nm[32];

	memset(buf, 'd', sizeof(buf));
	assert(tfs_mkdir(fs, TFS_ROOT_INO, "dir", 0755, &cred, &st) == 0);
	dir = st.st_ino;
	for (int i = 0; i < 24; i++) {
		snprintf(nm, sizeof(nm), "file-%d", i);
		assert(tfs_create(fs, i % 2 ? dir : TFS_ROOT_INO, nm, 0644, O_RDWR | O_CREAT,
				  &cred, &st, &f) == 0);
		assert(tfs_pwrite(f, buf, (size_t)(i * 1500), 0, 0) == (ssize_t)(i * 1500));
		assert(tfs_setxattr(fs, st.st_ino, "user.x", "value", 5, 0) == 0);
		tfs_release(f);
	}
	assert(tfs_symlink(fs, TFS_ROOT_INO, "link", "file-3", &cred, &st) == 0);
}

static void drop_image(void)
{
	unlink(img);
}

static void add_tree(uint64_t addr, int parent, unsigned slot)
{
	struct tnode *t;
	int me;

	if (nnodes == MAXNODES || !addr)
		return;
	me = (int)nnodes++;
	t = &nodes[me];
	t->addr = addr;
	t->parent = parent;
	t->slot = slot;
	assert(pread(ifd, t->orig, BNODE_SIZE, (off_t)(addr * BS)) == BNODE_SIZE);
	memcpy(t->cur, t->orig, BNODE_SIZE);
	memcpy(scratch, t->orig, BNODE_SIZE);
	bnode_unfold(scratch);
	assert(bnode_check(scratch, NULL, 0) == 0);
	for (unsigned i = 0; bnode_level(t->orig) && i < bnode_nritems(t->orig); i++) {
		struct bptr p;

		bnode_ptr(t->orig, i, &p);
		add_tree(p.addr, me, i);
	}
}

static void make_base(void)
{
	struct tfs_format_opts fo = { .force = true, .backend = "file", .v2 = true,
				      .pieces = getenv("TFS_FUZZ_PIECES") != NULL };
	const char *devs[1] = { img };
	struct tfs_opts o = { .devs = devs, .ndevs = 1, .backend = "file", .commit_ms = 3600000,
			      .nodiscard = true };
	uint8_t buf[BS];
	struct tfs *fs;
	char err[256];
	int fd;

	snprintf(img, sizeof(img), "/tmp/tfs_fuzzv2img_XXXXXX");
	fd = mkstemp(img);
	assert(fd >= 0 && ftruncate(fd, (off_t)IMG_SIZE) == 0);
	close(fd);
	assert(tfs_format(devs, 1, &fo, err, sizeof(err)) == 0);
	assert(tfs_mount(&o, &fs, err, sizeof(err)) == 0);
	base_files(fs);
	assert(tfs_checkpoint(fs) == 0);
	assert(tfs_unmount(fs) == 0);
	ifd = open(img, O_RDWR);
	assert(ifd >= 0);
	for (unsigned s = 0; s < 2; s++) {
		struct super x;

		assert(pread(ifd, buf, BS, (off_t)(s * BS)) == BS);
		if (super_decode(buf, s, &x, NULL, 0) == 0 && x.generation > sb0.generation) {
			sb0 = x;
			sb_slot = s;
			memcpy(sb_orig, buf, BS);
		}
	}
	assert(sb0.version == SUPER_VERSION_V2);
	short_img = super_short_nodes(&sb0);
	pieces_img = super_pieces(&sb0);
	assert(pieces_img == fo.pieces);
	for (unsigned t = 0; t < SUPER_V2_TREES; t++)
		add_tree(sb0.roots[t].ptr.addr, -1, t);
	devnull = fopen("/dev/null", "w");
	assert(devnull);
	atexit(drop_image);
}

/* Seal the slot image @cur for @addr: as is (whole nodes), or unfolded,
 * sealed short and folded again (left unfolded when its items no longer
 * fold: damage the checks must catch). */
static uint64_t seal_slot(uint8_t *cur, uint64_t addr)
{
	uint64_t csum;

	if (!short_img) {
		bnode_set_addr_gen(cur, addr, bnode_gen(cur));
		return bnode_seal(cur);
	}
	memcpy(scratch, cur, BNODE_SIZE);
	bnode_unfold(scratch);
	bnode_set_addr_gen(scratch, addr, bnode_gen(scratch));
	csum = bnode_seal_short(scratch);
	if (!bnode_fold(scratch, cur))
		memcpy(cur, scratch, BNODE_SIZE);
	return csum;
}

/* Reseal node @i and carry its checksum up to the superblock (@sb). */
static void reseal(unsigned i, struct super *sb)
{
	for (int n = (int)i; n >= 0; n = nodes[n].parent) {
		uint64_t csum;
		struct bptr p;
		unsigned nb;

		csum = seal_slot(nodes[n].cur, nodes[n].addr);
		/* Pieces: the sealed nb names the node's blocks (1..4). */
		nb = pieces_img ? bnode_nb(nodes[n].cur) : 0;
		if (nodes[n].parent < 0) {
			sb->roots[nodes[n].slot].ptr.csum = csum;
			sb->roots[nodes[n].slot].ptr.nblocks = nb;
			break;
		}
		if (nodes[n].slot >= bnode_nritems(nodes[nodes[n].parent].cur))
			break;	/* the parent itself was patched: leave it */
		bnode_ptr(nodes[nodes[n].parent].cur, nodes[n].slot, &p);
		p.csum = csum;
		p.nblocks = nb;
		bnode_set_ptr(nodes[nodes[n].parent].cur, nodes[n].slot, &p);
	}
}

static uint64_t walked_bytes;

struct names {
	char v[32][TFS_NAME_MAX + 1];
	int n;
};

static int fill(void *c, const char *name, const struct stat *st, uint64_t next_off)
{
	struct names *nm = c;

	if (nm->n < 32)
		snprintf(nm->v[nm->n++], TFS_NAME_MAX + 1, "%s", name);
	return 0;
}

static void walk(struct tfs *fs, uint64_t ino, int depth)
{
	static uint8_t buf[65536];
	struct names nm = { .n = 0 };
	struct stat st;

	if (depth > 3 || tfs_getattr(fs, ino, &st))
		return;
	(void)tfs_listxattr(fs, ino, (char *)buf, 4096);
	if (S_ISLNK(st.st_mode))
		(void)tfs_readlink(fs, ino, (char *)buf, 4096);
	if (S_ISREG(st.st_mode)) {
		struct tfs_file *f;

		if (tfs_open(fs, ino, O_RDONLY, &f) == 0) {
			ssize_t r = tfs_pread(f, buf, sizeof(buf), 0);

			walked_bytes += r > 0 ? (uint64_t)r : 0;
			tfs_release(f);
		}
	}
	if (!S_ISDIR(st.st_mode) || tfs_readdir(fs, ino, 0, false, fill, &nm))
		return;
	for (int i = 0; i < nm.n; i++) {
		if (!strcmp(nm.v[i], ".") || !strcmp(nm.v[i], ".."))
			continue;
		if (tfs_lookup(fs, ino, nm.v[i], &st) == 0) {
			walk(fs, st.st_ino, depth + 1);
			tfs_forget(fs, st.st_ino, 1);
		}
	}
}

static void apply(const uint8_t *d, size_t size, struct super *sb, uint8_t *sbraw)
{
	while (size >= 5) {
		unsigned sel = d[0], fix = d[1] & 1, off = d[2] | d[3] << 8, n = d[4];

		d += 5;
		size -= 5;
		if (n > size)
			n = (unsigned)size;
		sel %= nnodes + 1;
		if (sel == 0 && fix) {
			off %= sizeof(*sb);
			memcpy((uint8_t *)sb + off, d, n < sizeof(*sb) - off ? n : sizeof(*sb) - off);
		} else if (sel == 0) {
			off %= BS;
			memcpy(sbraw + off, d, n < BS - off ? n : BS - off);
		} else {
			off %= BNODE_SIZE;
			memcpy(nodes[sel - 1].cur + off, d,
			       n < BNODE_SIZE - off ? n : BNODE_SIZE - off);
			if (fix)
				reseal(sel - 1, sb);
		}
		d += n;
		size -= n;
	}
}

/* The superblock @sb (re-encoded into @sbraw if it differs from the base's)
 * and every node's current bytes onto the image. */
static void write_image(const struct super *sb, uint8_t *sbraw)
{
	if (memcmp(sb, &sb0, sizeof(*sb)))
		super_encode(sb, sb_slot, sbraw);
	assert(pwrite(ifd, sbraw, BS, (off_t)(sb_slot * BS)) == BS);
	for (unsigned i = 0; i < nnodes; i++)
		assert(pwrite(ifd, nodes[i].cur, BNODE_SIZE, (off_t)(nodes[i].addr * BS)) ==
		       BNODE_SIZE);
}

/* Once: every node resealed without a change still mounts, so a fixed-up
 * patch (pointer csum, and nblocks with pieces) reaches the decoders. */
static void check_reseal(void)
{
	const char *devs[1] = { img };
	struct tfs_opts o = { .devs = devs, .ndevs = 1, .backend = "file", .fault = DROP_ALL,
			      .commit_ms = 3600000, .nodiscard = true };
	struct super sb = sb0;
	uint8_t sbraw[BS];
	struct tfs *fs;
	char err[512];

	memcpy(sbraw, sb_orig, BS);
	for (unsigned i = 0; i < nnodes; i++)
		memcpy(nodes[i].cur, nodes[i].orig, BNODE_SIZE);
	for (unsigned i = nnodes; i-- > 0;)
		reseal(i, &sb);
	write_image(&sb, sbraw);
	assert(tfs_mount(&o, &fs, err, sizeof(err)) == 0);
	tfs_abandon(fs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *devs[1] = { img };
	struct tfs_opts o = { .devs = devs, .ndevs = 1, .backend = "file", .fault = DROP_ALL,
			      .commit_ms = 3600000, .nodiscard = true };
	struct fsck_opts fo = { .devs = devs, .ndevs = 1, .mode = FSCK_CHECK, .backend = "file",
				.out = NULL };
	struct fsck_result res;
	struct super sb;
	uint8_t sbraw[BS];
	struct tfs *fs;
	char err[512];

	if (ifd < 0) {
		make_base();
		check_reseal();
	}
	fo.out = devnull;
	sb = sb0;
	memcpy(sbraw, sb_orig, BS);
	for (unsigned i = 0; i < nnodes; i++)
		memcpy(nodes[i].cur, nodes[i].orig, BNODE_SIZE);
	if (size)
		apply(data, size, &sb, sbraw);
	write_image(&sb, sbraw);

	if (tfs_mount(&o, &fs, err, sizeof(err)) == 0) {
		walk(fs, TFS_ROOT_INO, 0);
		tfs_abandon(fs);
	} else {
		assert(err[0] && !strchr(err, '\n'));	/* one line says why */
		o.rescue = true;	/* read-only, what is still reachable */
		if (tfs_mount(&o, &fs, err, sizeof(err)) == 0) {
			walk(fs, TFS_ROOT_INO, 0);
			tfs_abandon(fs);
		}
	}
	memset(&res, 0, sizeof(res));
	(void)fsck_run(&fo, &res);
	return 0;
}

void fuzz_make_seeds(void (*emit)(const void *p, size_t len));
void fuzz_make_seeds(void (*emit)(const void *p, size_t len))
{
	static const uint8_t none[1] = { 0 };
	/* node 1 (the first root), a key byte, checksums fixed */
	static const uint8_t key[] = { 1, 1, 0x80, 0, 2, 0xff, 0x7f };
	/* node 2, a value byte, checksums left wrong */
	static const uint8_t val[] = { 2, 0, 0x00, 0x3f, 1, 0x55 };
	/* the superblock's fields: tree_gen-ish bytes, re-encoded */
	static const uint8_t sup[] = { 0, 1, 0x40, 0x01, 4, 1, 2, 3, 4 };

	emit(none, sizeof(none));
	emit(key, sizeof(key));
	emit(val, sizeof(val));
	emit(sup, sizeof(sup));
}
