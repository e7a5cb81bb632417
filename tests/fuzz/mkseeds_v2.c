// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Description: make the fuzzers' seeds from a real format-v2 file system:
 * mkfs -O v2 on a sparse image, a workload that fills every tree (files
 * with data in several directories, long names, small and chunked xattrs,
 * long symlinks, reflinked runs, punched holes), a checkpoint, and then
 * every node of the node area that verifies is a candidate:
 *   OUT/bnode/OWNER-LEVEL-N     whole nodes (trailing zeros cut), a few per
 *                               tree and level, for fuzz_bnode
 *   OUT/v2item/OWNER-TYPE-N     leaf items in fuzz_v2item's input format
 *                               (owner, key, value), a few per key type
 * The seeds in tests/fuzz/seeds/ were made with it:
 *   build/tests/fuzz/mkseeds_v2 tests/fuzz/seeds
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bnode.h"
#include "fs_i.h"
#include "le.h"
#include "tfs.h"
#include "v2item.h"

#define IMG_SIZE (96ull << 20)
#define IN_HDR 17u
#define PER_NODE_KIND 2
#define PER_ITEM_KIND 3

static const struct tfs_cred cred = { .uid = 0, .gid = 0 };

static void die(const char *what, int err)
{
	fprintf(stderr, "mkseeds_v2: %s: %s\n", what, strerror(err < 0 ? -err : err));
	exit(1);
}

static void put(const char *path, const void *p, size_t len)
{
	FILE *f = fopen(path, "wb");

	if (!f || fwrite(p, 1, len, f) != len || fclose(f))
		die(path, errno);
}

static uint64_t file_of(struct tfs *fs, uint64_t dir, const char *name, size_t size, char fill,
			struct tfs_file **keep)
{
	static char buf[256 << 10];
	struct tfs_file *f;
	struct stat st;
	int r;

	r = tfs_create(fs, dir, name, 0644, O_RDWR | O_CREAT, &cred, &st, &f);
	if (r)
		die("create", r);
	memset(buf, fill, sizeof(buf));
	for (size_t off = 0; off < size; off += sizeof(buf)) {
		size_t n = size - off < sizeof(buf) ? size - off : sizeof(buf);

		if (tfs_pwrite(f, buf, n, (off_t)off, 0) != (ssize_t)n)
			die("write", EIO);
	}
	if (keep)
		*keep = f;
	else
		tfs_release(f);
	return st.st_ino;
}

/* Files, names, xattrs, symlinks, shared and punched runs. */
static void workload(struct tfs *fs)
{
	static char big[3000], lname[200];
	struct tfs_file *a, *b;
	struct stat st;
	uint64_t dirs[3];
	char nm[64];
	int r;

	for (int d = 0; d < 3; d++) {
		snprintf(nm, sizeof(nm), "dir%d", d);
		r = tfs_mkdir(fs, TFS_ROOT_INO, nm, 0755, &cred, &st);
		if (r)
			die("mkdir", r);
		dirs[d] = st.st_ino;
	}
	for (int i = 0; i < 240; i++) {
		uint64_t ino;

		snprintf(nm, sizeof(nm), "%s-%d", i % 7 ? "f" : "a-rather-long-file-name-here", i);
		ino = file_of(fs, dirs[i % 3], nm, (size_t)(i % 5) * 5000 + (i % 11 ? 0 : 300000),
			      (char)i, NULL);
		if (i % 4 == 0 && (r = tfs_setxattr(fs, ino, "user.small", "value", 5, 0)))
			die("setxattr", r);
	}
	memset(big, 'x', sizeof(big));
	if ((r = tfs_setxattr(fs, dirs[0], "user.big", big, sizeof(big), 0)))
		die("setxattr big", r);
	memset(lname, 'l', sizeof(lname) - 1);
	if ((r = tfs_symlink(fs, dirs[1], "short", "target", &cred, &st)) ||
	    (r = tfs_symlink(fs, dirs[1], "long", lname, &cred, &st)))
		die("symlink", r);
	file_of(fs, dirs[2], "src", 1 << 20, 'S', &a);
	file_of(fs, dirs[2], "dst", 4096, 'D', &b);
	if (tfs_copy_range(a, 0, b, 65536, 512 << 10) != 512 << 10)
		die("copy_range", EIO);
	if ((r = tfs_fallocate(a, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 8192, 65536)))
		die("punch", r);
	tfs_release(a);
	tfs_release(b);
}

static unsigned nodes_kept[4][BNODE_MAX_LEVEL], items_kept[4][256];

static void keep_items(const char *out, const uint8_t *n, unsigned owner)
{
	static uint8_t in[IN_HDR + BNODE_MAX_VAL];
	char path[4096];

	for (unsigned i = 0; i < bnode_nritems(n); i++) {
		struct bkey k;
		unsigned len;
		const void *v = bnode_val(n, i, &len);
		uint64_t off;

		bnode_key(n, i, &k);
		if (items_kept[owner][k.type] >= PER_ITEM_KIND)
			continue;
		/* hashed keys: fuzz_v2item puts the first name's hash in */
		off = k.type == V2_DIRENT || k.type == V2_XATTR ? BKEY_OFF_MAX : k.off;
		in[0] = (uint8_t)(owner - 1);
		le64_put(in + 1, k.id);
		in[9] = k.type;
		for (unsigned b = 0; b < 7; b++)
			in[10 + b] = (uint8_t)(off >> (8 * b));
		memcpy(in + IN_HDR, v, len);
		snprintf(path, sizeof(path), "%s/v2item/real-%u-%u-%u", out, owner, k.type,
			 items_kept[owner][k.type]++);
		put(path, in, IN_HDR + len);
	}
}

static void harvest(const char *img, const struct super *sb, const char *out)
{
	static uint8_t raw[BNODE_SIZE], n[BNODE_SIZE];
	int fd = open(img, O_RDONLY);
	char path[4096];

	if (fd < 0)
		die(img, errno);
	for (uint64_t a = sb->node_start; a + BNODE_BLOCKS <= sb->node_start + sb->node_blocks;
	     a += BNODE_BLOCKS) {
		struct bnode_hdr h;
		size_t len = BNODE_SIZE;
		struct bptr p;

		if (pread(fd, raw, BNODE_SIZE, (off_t)(a * 4096)) != BNODE_SIZE)
			die("read", errno);
		/* The slot as on disk (short nodes: folded, the seed for
		 * fuzz_bnode), the node unfolded for its items. */
		p = (struct bptr){ a, bnode_gen(raw), bnode_stored_csum(raw), 0 };
		if (!bnode_copy_matches(raw, &p, super_short_nodes(sb)))
			continue;
		memcpy(n, raw, BNODE_SIZE);
		bnode_unfold(n);
		if (bnode_check(n, NULL, 0))
			continue;
		bnode_hdr(n, &h);
		if (h.owner < 1 || h.owner > 3 || h.level >= BNODE_MAX_LEVEL)
			continue;
		if (!h.level)
			keep_items(out, n, (unsigned)h.owner);
		if (nodes_kept[h.owner][h.level] >= PER_NODE_KIND || !h.nritems)
			continue;
		if (bnode_nb(raw))
			memset(raw + bnode_nb(raw) * 4096, 0, BNODE_SIZE - bnode_nb(raw) * 4096);
		while (len > 0 && !raw[len - 1])
			len--;
		snprintf(path, sizeof(path), "%s/bnode/real-%llu-%u-%u", out,
			 (unsigned long long)h.owner, h.level, nodes_kept[h.owner][h.level]++);
		put(path, raw, len);
	}
	close(fd);
}

int main(int argc, char **argv)
{
	struct tfs_format_opts fo = { .force = true, .backend = "file", .v2 = true };
	char img[] = "/tmp/tfs_mkseeds_XXXXXX", err[256] = "", path[4096];
	const char *devs[1] = { img };
	struct tfs_opts o = { .devs = devs, .ndevs = 1, .backend = "file", .commit_ms = 3600000 };
	struct super sb;
	struct tfs *fs;
	int fd, r;

	if (argc != 2) {
		fprintf(stderr, "usage: mkseeds_v2 OUTDIR\n");
		return 2;
	}
	fd = mkstemp(img);
	if (fd < 0 || ftruncate(fd, (off_t)IMG_SIZE))
		die("image", errno);
	close(fd);
	snprintf(path, sizeof(path), "%s/bnode", argv[1]);
	mkdir(argv[1], 0755);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/v2item", argv[1]);
	mkdir(path, 0755);
	if ((r = tfs_format(devs, 1, &fo, err, sizeof(err))) ||
	    (r = tfs_mount(&o, &fs, err, sizeof(err)))) {
		fprintf(stderr, "mkseeds_v2: %s\n", err);
		unlink(img);
		return 1;
	}
	workload(fs);
	if ((r = tfs_checkpoint(fs)))
		die("checkpoint", r);
	sb = fs->sb;
	if ((r = tfs_unmount(fs)))
		die("unmount", r);
	harvest(img, &sb, argv[1]);
	unlink(img);
	return 0;
}
