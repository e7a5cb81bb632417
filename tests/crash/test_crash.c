// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: crash exploration: a random workload runs on two mirrored images through the fault backend's crash journal; for every flush point (and before it), and for random block subsets of the unflushed writes chosen per device (mirrors diverge), the images are rebuilt, mounted and the tree must equal the model after some operation between the last durable one and the last started one, every block reading back intact.  The operations include O_TMPFILE files, written unnamed and sometimes linked. */
/*
 * How a crash state is built: base images (taken right after a syncfs) plus
 * journal writes.  For a cut C (a position in the journal) each device keeps
 * every write it flushed before C and every FUA write before C (durable
 * when complete, but no flush of the writes before it), and of its other
 * writes after its last flush before C a chosen subset (all, none, or random whole writes and random
 * blocks of multi-block writes).  Metadata is one ordered log and data is
 * copy-on-write, so the recovered tree must be exactly the model after some
 * operation k with lo <= k <= hi, where lo is the last operation whose
 * durability point (journal length when its fsync / O_DSYNC write / syncfs /
 * checkpoint returned) has every earlier write in the state, and hi the last
 * operation that had started before C.
 *
 * Discards (the fault backend journals them) are modelled adversarially: a
 * discard before the cut is always applied, as garbage in its blocks (a
 * device may return anything for a discarded block).  Discarding a block
 * before the metadata that freed it is durable therefore shows up as a
 * recovered file with a checksum error (EIO) or a failed fsck.
 *
 * Verification mounts drop all their own writes (fault rule), so the rebuilt
 * images stay as built and only the blocks the workload touched need to be
 * restored from the base between states.
 *
 * A state may also stop the two mirrors at different points (S_SPLIT): one
 * device has every write up to the cut, the other only its writes up to a
 * random point after its last flush.
 *
 * Format v2 (the default, as mkfs.twinfs's; the test crash; --v1 or
 * TWINFS_CRASH_FORMAT=v1 for the deprecated format v1, the test crash_v1):
 * a checkpoint before about one operation in eight, so the journal holds
 * the checkpoints' node writes, free-space commits and superblocks, and
 * the node cursor is first brought near the end of the node area so the
 * recorded commits reuse slots earlier ones freed (v2_age).
 *
 * TWINFS_CRASH_LONG=1: every candidate state, more random subsets, more
 * operations and several seeds.  TWINFS_CRASH_SEED=N picks the first seed,
 * --lazyreplay (the test crash_lazyreplay): the mounts that check a state
 * keep the replayed extent records pending (-o lazyreplay, extpend.h) and
 * apply them as their checkpoint writes them, before the tree is read.
 * --lazycont (the test crash_lazycont): the recorded workload runs on a
 * mount that served without a checkpoint after a crash (-o lazyreplay's
 * continuation: the replayed log stays the journal, new chunks go on under
 * a new log_id), and the recording starts with that mount itself (its
 * replay's rewrite of a last chunk only device 0 got, its flush, the
 * continuation's superblock): every state crashes inside it, or before or
 * during the continued log's first checkpoint, or after it, and is
 * replayed across both logs (or from that checkpoint) by mount and fsck.
 * A state inside it must recover the base (ops[0], synced before the
 * crash): fsck, mounts with -o lazyreplay and without, each device alone;
 * other states alternate the two.  S_SUPER: see enum below.
 * --compact (with --lazyreplay, the test crash_compact: the daemon's
 * defaults): the workload and verification mounts keep changed map leaves
 * compact (-o compact_dirty) with no leaf budget, so the recorded
 * checkpoints write from compact leaves (compact_tune).
 * TWINFS_CRASH_SEEDS=N how many.  TWINFS_CRASH_CACHE=MiB sets the node cache
 * of the workload and verification mounts (-o cache=; 4 is the smallest).
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cmocka.h>
#include <xxhash.h>

#include "fs_i.h"
#include "discard.h"
#include "extcache.h"
#include "fsck.h"
#include "tfs.h"

#include "crash_tree.h"

#define IMG_SIZE (64ull << 20)
#define NDEV 2
#define BS 4096u
#define NBLK (IMG_SIZE / BS)
#define VERIFY_FAULT "op=write,kind=drop;op=flush,kind=drop"

static bool long_run;
static bool fmt_v2;	/* format v2 (the default; --v1 or TWINFS_CRASH_FORMAT=v1: v1),
			 * checkpoints forced often */
static uint64_t cache_bytes;	/* TWINFS_CRASH_CACHE, 0: the default */
static bool lazyreplay;		/* --lazyreplay: verification mounts with -o lazyreplay */
static bool lazycont;		/* --lazycont: the workload on a continued mount */
static bool compact;		/* --compact: changed map leaves kept compact */
static unsigned long total_compactions, total_expansions;	/* --compact: in the workload */
static bool no_ckpt;		/* do_op: no checkpoint (continued_base's log) */
static size_t mount_end;	/* --lazycont: the continued mount's journal entries */
static unsigned long total_states, total_discards, total_node_writes, total_node_wraps;
static unsigned long in_mount_states;	/* --lazycont: explored inside the continued mount */

/* ---- images ---- */
static char orig[NDEV][64], work[NDEV][64];
static const char *orig_p[NDEV], *work_p[NDEV];

/* ---- the workload ---- */
struct opinfo {
	char desc[96];
	size_t start;		/* journal length when the op began */
	size_t durable;		/* journal length when its durability returned; 0: none */
	char *text;		/* model after the op */
};

static struct opinfo *ops;
static size_t nops;
static struct tfs *wfs;
static const struct tfs_cred cred = { .uid = 0, .gid = 0 };

static size_t jlen(void)
{
	size_t n;

	dev_fault_journal(wfs->be, &n);
	return n;
}

static struct tfs_file *fh_of(int n)
{
	if (!nodes[n].fh)
		assert_int_equal(tfs_open(wfs, nodes[n].ino, O_RDWR, &nodes[n].fh), 0);
	return nodes[n].fh;
}

static void unlink_node(int n)
{
	nodes[n].nlink--;
	if (nodes[n].nlink == 0 && !nodes[n].fh)
		nodes[n].live = false;
}

/* One random operation; returns true when it is a durability point. */
static bool do_op(char *desc, size_t dlen)
{
	static uint8_t wbuf[TFS_IO_MAX];
	struct stat st;
	char nm[16];
	int r, n, p, d;

	/* Version 2 writes its trees only at checkpoints: force many, so
	 * node writes, free-space commits and superblocks fill the journal. */
	if (fmt_v2 && rndn(8) == 0 && !no_ckpt) {
		assert_int_equal(tfs_checkpoint(wfs), 0);
		snprintf(desc, dlen, "checkpoint (v2)");
		return true;
	}
	for (;;) {
		switch (rndn(23)) {
		case 22: {	/* O_TMPFILE: no name until a link gives it one */
			struct tfs_file *f;
			p = pick_node(T_DIR, true);
			r = tfs_tmpfile(wfs, nodes[p].ino, 0600, O_RDWR, &cred, &st, &f);
			assert_int_equal(r, 0);
			tfs_forget(wfs, st.st_ino, 1);
			n = node_new(T_FILE, st.st_ino);
			assert_true(n > 0);
			nodes[n].nlink = 0;
			nodes[n].fh = f;
			nodes[n].tmpfile = true;
			snprintf(desc, dlen, "tmpfile %d in %d", n, p);
			return false;
		}
		case 0: case 1: {	/* create */
			struct tfs_file *f;
			p = pick_node(T_DIR, true);
			snprintf(nm, sizeof(nm), "f%u", name_ctr++);
			r = tfs_create(wfs, nodes[p].ino, nm, 0644, O_RDWR | O_CREAT | O_EXCL, &cred, &st, &f);
			assert_int_equal(r, 0);
			tfs_forget(wfs, st.st_ino, 1);
			n = node_new(T_FILE, st.st_ino);
			assert_true(n > 0);
			nodes[n].nlink = 1;
			nodes[n].fh = f;
			assert_true(dent_new(p, nm, n) >= 0);
			snprintf(desc, dlen, "create %s in %d", nm, p);
			return false;
		}
		case 2: {	/* mkdir / symlink */
			bool sym = rndn(3) == 0;
			p = pick_node(T_DIR, true);
			snprintf(nm, sizeof(nm), "%c%u", sym ? 's' : 'd', name_ctr++);
			if (sym) {
				char t[24];
				snprintf(t, sizeof(t), "target%u", (unsigned)rndn(1000));
				assert_int_equal(tfs_symlink(wfs, nodes[p].ino, nm, t, &cred, &st), 0);
				n = node_new(T_LINK, st.st_ino);
				snprintf(nodes[n].target, sizeof(nodes[n].target), "%s", t);
			} else {
				assert_int_equal(tfs_mkdir(wfs, nodes[p].ino, nm, 0755, &cred, &st), 0);
				n = node_new(T_DIR, st.st_ino);
			}
			tfs_forget(wfs, st.st_ino, 1);
			assert_true(n > 0);
			nodes[n].nlink = 1;
			assert_true(dent_new(p, nm, n) >= 0);
			snprintf(desc, dlen, "%s %s in %d", sym ? "symlink" : "mkdir", nm, p);
			return false;
		}
		case 3: case 4: case 5: case 6: {	/* write: overwrite or extend */
			int dsync = rndn(5) == 0 ? O_DSYNC : 0;
			size_t off, len;
			n = rndn(8) == 0 ? -1 : pick_node(T_FILE, false);
			if (n < 0)
				n = pick_node(T_FILE, false);
			if (n < 0)
				continue;
			off = rndn(3) == 0 ? nodes[n].size : rndn(nodes[n].size + 65536);
			if (compact && rndn(3) == 0)	/* past the tiny leaf: cache leaves */
				off = (128u << 10) + rndn(4u << 20);
			if (rndn(3) == 0)
				off &= ~(size_t)(BS - 1);
			len = rndn(20) == 0 ? 1 + rndn(TFS_IO_MAX) : 1 + rndn(rndn(2) ? 3 * BS : 64 * 1024);
			if (off + len > 6u << 20)
				continue;
			fill_rand(wbuf, len);
			assert_int_equal(tfs_pwrite(fh_of(n), wbuf, len, (off_t)off, dsync), (ssize_t)len);
			if (off + len > nodes[n].size)
				file_resize(&nodes[n], off + len);
			memcpy(nodes[n].data + off, wbuf, len);
			nodes[n].hash_ok = false;
			snprintf(desc, dlen, "write%s node %d off %zu len %zu", dsync ? " O_DSYNC" : "",
				 n, off, len);
			return dsync != 0;
		}
		case 7: {	/* truncate */
			size_t ns;
			n = pick_node(T_FILE, false);
			if (n < 0)
				continue;
			ns = rndn(nodes[n].size * 2 + 16384);
			memset(&st, 0, sizeof(st));
			st.st_size = (off_t)ns;
			assert_int_equal(tfs_setattr(wfs, nodes[n].ino, &st, TFS_SET_SIZE,
						     rndn(2) ? nodes[n].fh : NULL, &st), 0);
			file_resize(&nodes[n], ns);
			snprintf(desc, dlen, "truncate node %d to %zu", n, ns);
			return false;
		}
		case 8: {	/* punch / preallocate */
			bool punch = rndn(2);
			size_t off, len;
			n = pick_node(T_FILE, false);
			if (n < 0 || (punch && !nodes[n].size))
				continue;
			off = rndn(punch ? nodes[n].size : nodes[n].size + BS);
			len = 1 + rndn(5 * BS);
			if (rndn(2)) {
				off &= ~(size_t)(BS - 1);
				len = (len + BS - 1) & ~(size_t)(BS - 1);
			}
			r = tfs_fallocate(fh_of(n), punch ? FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE : 0,
					  (off_t)off, (off_t)len);
			assert_int_equal(r, 0);
			if (punch) {
				size_t e = off + len < nodes[n].size ? off + len : nodes[n].size;
				memset(nodes[n].data + off, 0, e - off);
				nodes[n].hash_ok = false;
			} else if (off + len > nodes[n].size) {
				file_resize(&nodes[n], off + len);
			}
			snprintf(desc, dlen, "%s node %d off %zu len %zu", punch ? "punch" : "falloc",
				 n, off, len);
			return false;
		}
		case 9: case 10: {	/* fsync */
			n = pick_node(T_FILE, false);
			if (n < 0)
				continue;
			assert_int_equal(tfs_fsync(wfs, nodes[n].ino, rndn(2)), 0);
			snprintf(desc, dlen, "fsync node %d", n);
			return true;
		}
		case 11:
			if (rndn(2) || no_ckpt) {
				assert_int_equal(tfs_syncfs(wfs), 0);
				snprintf(desc, dlen, "syncfs");
			} else {
				assert_int_equal(tfs_checkpoint(wfs), 0);
				snprintf(desc, dlen, "checkpoint");
			}
			return true;
		case 12: case 13: {	/* rename */
			int dp, to, tn;
			d = pick_dent(-1);
			if (d < 0)
				continue;
			n = dents[d].node;
			dp = pick_node(T_DIR, true);
			if (nodes[n].type == T_DIR && under(dp, n))
				continue;
			to = -1;
			if (nodes[n].type == T_FILE && rndn(2)) {
				to = pick_dent(T_FILE);
				if (to == d)
					continue;
			}
			if (to >= 0) {
				dp = dents[to].parent;
				snprintf(nm, sizeof(nm), "%s", dents[to].name);
			} else {
				snprintf(nm, sizeof(nm), "r%u", name_ctr++);
			}
			if (to >= 0 && dents[to].node == n)
				continue;	/* rename onto a link of itself is a no-op: skip */
			r = tfs_rename(wfs, nodes[dents[d].parent].ino, dents[d].name, nodes[dp].ino, nm, 0);
			assert_int_equal(r, 0);
			if (to >= 0) {
				tn = dents[to].node;
				dents[to].live = false;
				unlink_node(tn);
			}
			snprintf(desc, dlen, "rename %s (%d) -> %d/%s%s", dents[d].name, n, dp, nm,
				 to >= 0 ? " replacing" : "");
			dents[d].parent = dp;
			snprintf(dents[d].name, sizeof(dents[d].name), "%s", nm);
			return false;
		}
		case 14: case 15: {	/* unlink (often of an open file) / rmdir */
			d = pick_dent(-1);
			if (d < 0)
				continue;
			n = dents[d].node;
			if (nodes[n].type == T_DIR) {
				if (!dir_empty(n))
					continue;
				assert_int_equal(tfs_rmdir(wfs, nodes[dents[d].parent].ino, dents[d].name), 0);
				nodes[n].live = false;
			} else {
				if (nodes[n].type == T_FILE && rndn(2))
					fh_of(n);	/* unlink it while open */
				assert_int_equal(tfs_unlink(wfs, nodes[dents[d].parent].ino, dents[d].name), 0);
				unlink_node(n);
			}
			dents[d].live = false;
			snprintf(desc, dlen, "unlink %s (%d)%s", dents[d].name, n,
				 nodes[n].fh ? " open" : "");
			return false;
		}
		case 16: {	/* link (of an unnamed tmpfile, when there is one, half the time) */
			n = -1;
			for (int i = 0; i < MAXN && rndn(2); i++)
				if (nodes[i].live && nodes[i].tmpfile && nodes[i].nlink == 0)
					n = i;
			if (n < 0)
				n = pick_node(T_FILE, true);
			p = pick_node(T_DIR, true);
			if (n < 0)
				continue;
			snprintf(nm, sizeof(nm), "l%u", name_ctr++);
			assert_int_equal(tfs_link(wfs, nodes[n].ino, nodes[p].ino, nm, &st), 0);
			tfs_forget(wfs, st.st_ino, 1);
			nodes[n].nlink++;
			nodes[n].tmpfile = false;	/* the kernel's I_LINKABLE goes too */
			assert_true(dent_new(p, nm, n) >= 0);
			snprintf(desc, dlen, "link node %d as %s in %d", n, nm, p);
			return false;
		}
		case 17: case 18: {	/* xattrs */
			int x = (int)rndn(NXA);
			d = pick_dent(-1);
			n = d < 0 || rndn(6) == 0 ? 0 : dents[d].node;
			if (nodes[n].type == T_LINK)
				continue;
			if (nodes[n].xset[x] && rndn(3) == 0) {
				assert_int_equal(tfs_removexattr(wfs, nodes[n].ino, xa_names[x]), 0);
				nodes[n].xset[x] = false;
				snprintf(desc, dlen, "removexattr %s node %d", xa_names[x], n);
			} else {
				nodes[n].xl[x] = (uint32_t)rndn(sizeof(nodes[n].xv[x]) + 1);
				fill_rand(nodes[n].xv[x], nodes[n].xl[x]);
				assert_int_equal(tfs_setxattr(wfs, nodes[n].ino, xa_names[x], nodes[n].xv[x],
							      nodes[n].xl[x], 0), 0);
				nodes[n].xset[x] = true;
				snprintf(desc, dlen, "setxattr %s node %d len %u", xa_names[x], n, nodes[n].xl[x]);
			}
			return false;
		}
		case 19: {	/* copy_range (reflink of whole blocks) */
			int m;
			size_t oi, oo, len;
			ssize_t c;
			n = pick_node(T_FILE, false);
			m = pick_node(T_FILE, false);
			if (n < 0 || m < 0 || n == m || !nodes[n].size)
				continue;
			oi = rndn(nodes[n].size);
			len = 1 + rndn(nodes[n].size - oi);
			oo = rndn(nodes[m].size + BS);
			if (rndn(2)) {
				oi &= ~(size_t)(BS - 1);
				oo = (oo & ~(size_t)(BS - 1)) + (oi & (BS - 1));
			}
			c = tfs_copy_range(fh_of(n), (off_t)oi, fh_of(m), (off_t)oo, len);
			assert_int_equal(c, (ssize_t)len);
			if (oo + len > nodes[m].size)
				file_resize(&nodes[m], oo + len);
			memcpy(nodes[m].data + oo, nodes[n].data + oi, len);
			nodes[m].hash_ok = false;
			snprintf(desc, dlen, "copy_range node %d+%zu -> %d+%zu len %zu", n, oi, m, oo, len);
			return false;
		}
		default: {	/* close a handle (deletes an unlinked file) */
			int c[MAXN], k = 0;
			for (int i = 0; i < MAXN; i++)
				if (nodes[i].fh)
					c[k++] = i;
			if (!k)
				continue;
			n = c[rndn((uint64_t)k)];
			assert_int_equal(tfs_release(nodes[n].fh), 0);
			nodes[n].fh = NULL;
			if (nodes[n].nlink == 0)
				nodes[n].live = false;
			snprintf(desc, dlen, "release node %d", n);
			return false;
		}
		}
	}
}

/* ---- crash states ---- */
struct base {
	int32_t slot[NBLK];	/* index into data, -1 if the journal never wrote it */
	uint8_t *data;
};
static struct base base[NDEV];
static int wfd[NDEV];
/* blocks written into the work images for the current state */
static uint8_t dirty[NDEV][NBLK / 8];
static bool torn[NDEV];	/* S_SUPER: the state's devices with a torn superblock */

/* S_SPLIT: the mirrors stop at different points: one device (seed bit 1)
 * got every write up to the cut, the other its writes in order only up to
 * a random point after its last flush (none after it).  S_SUPER: of the
 * writes after a device's last flush only the superblock slots' (blocks
 * 0 and 1), each whole or left out, or on one device (seed bit 1) torn
 * too (its first 512-byte sectors new, the rest old). */
enum { S_ALL, S_NONE, S_RANDOM, S_SPLIT, S_SUPER };
struct cstate {
	size_t cut;
	int mode;
	uint64_t seed;
};

static void restore(void)
{
	for (int d = 0; d < NDEV; d++) {
		for (uint64_t b = 0; b < NBLK; ) {
			uint64_t e = b;

			if (!(dirty[d][b / 8] & (1u << (b % 8)))) {
				b++;
				continue;
			}
			while (e < NBLK && (dirty[d][e / 8] & (1u << (e % 8))))
				e++;
			/* every dirty block came from the journal, so has a base copy,
			 * and runs of blocks have consecutive slots */
			assert_int_equal(pwrite(wfd[d], base[d].data + (size_t)base[d].slot[b] * BS,
						(e - b) * BS, (off_t)(b * BS)), (ssize_t)((e - b) * BS));
			b = e;
		}
		memset(dirty[d], 0, sizeof(dirty[d]));
	}
}

static void put_blocks(const struct dev_fault_rec *w, uint32_t first, uint32_t n)
{
	uint64_t b0 = w->off / BS + first;

	assert_int_equal(pwrite(wfd[w->dev_idx], (uint8_t *)w->data + (size_t)first * BS,
				(size_t)n * BS, (off_t)(b0 * BS)), (ssize_t)n * BS);
	for (uint64_t b = b0; b < b0 + n; b++)
		dirty[w->dev_idx][b / 8] |= 1u << (b % 8);
}

/* A discarded run reads back as garbage (unlike zeros, it never passes for
 * a block of zeros someone wrote). */
static void put_discard(const struct dev_fault_rec *w)
{
	static uint8_t junk[BS];

	for (uint64_t b = w->off / BS; b < (w->off + w->len) / BS; b++) {
		for (size_t i = 0; i < BS; i += 8) {
			uint64_t v = (b * 0x9e3779b97f4a7c15ull) ^ (i * 0xff51afd7ed558ccdull) ^ 0xd15ca4dull;

			memcpy(junk + i, &v, 8);
		}
		assert_int_equal(pwrite(wfd[w->dev_idx], junk, BS, (off_t)(b * BS)), (ssize_t)BS);
		dirty[w->dev_idx][b / 8] |= 1u << (b % 8);
	}
}

/* S_SUPER: a superblock slot's write whole, left out or, when @tear, torn
 * (1 to 7 sectors new); true when whole.  One mirror only: the format
 * takes a 4 KiB superblock write as atomic (docs/FORMAT.md "Mount"). */
static bool put_super(const struct dev_fault_rec *w, bool tear)
{
	uint64_t b = w->off / BS;
	size_t len;

	switch (rndn(tear ? 3 : 2)) {
	case 0:
		put_blocks(w, 0, 1);
		return true;
	case 1:
		return false;
	default:
		len = (1 + rndn(7)) * 512;
		assert_int_equal(pwrite(wfd[w->dev_idx], w->data, len, (off_t)(b * BS)),
				 (ssize_t)len);
		dirty[w->dev_idx][b / 8] |= 1u << (b % 8);
		torn[w->dev_idx] = true;
		return false;
	}
}

/* Write the state into the work images; returns the first journal position
 * holding a write that was left out (or left out partly), or the cut. */
static size_t build_state(const struct dev_fault_rec *j, const struct cstate *s)
{
	size_t lastflush[NDEV] = { 0 }, first_out = s->cut;
	uint64_t saved = rng_s;

	size_t stop[NDEV];
	int lead = (int)((s->seed >> 1) % NDEV);

	rng_s = s->seed;
	memset(torn, 0, sizeof(torn));
	for (size_t i = 0; i < s->cut; i++)
		if (j[i].op == DEV_FLUSH)
			lastflush[j[i].dev_idx] = i + 1;
	for (int d = 0; d < NDEV; d++)	/* S_SPLIT: where each device stopped */
		stop[d] = d == lead ? s->cut : lastflush[d] + rndn(s->cut - lastflush[d] + 1);
	for (size_t i = 0; i < s->cut; i++) {
		const struct dev_fault_rec *w = &j[i];
		uint32_t nb = w->len / BS;

		if (w->op == DEV_DISCARD) {
			put_discard(w);
			continue;
		}
		if (w->op != DEV_WRITE)
			continue;
		/* A FUA write is durable once complete (journaled), but
		 * makes nothing else durable: a device that has real FUA. */
		if (i < lastflush[w->dev_idx] || s->mode == S_ALL || w->fua ||
		    (s->mode == S_SPLIT && i < stop[w->dev_idx])) {
			put_blocks(w, 0, nb);
			continue;
		}
		if (s->mode == S_SUPER && w->off / BS < 2 && nb == 1) {
			if (!put_super(w, w->dev_idx == lead) && first_out > i)
				first_out = i;
			continue;
		}
		if (s->mode == S_NONE || s->mode == S_SPLIT || s->mode == S_SUPER) {
			if (first_out > i)
				first_out = i;
			continue;
		}
		switch (rndn(4)) {
		case 0: case 1:
			put_blocks(w, 0, nb);
			break;
		case 2:
			if (first_out > i)
				first_out = i;
			break;
		default: {	/* some blocks of it: devices write blocks, not requests */
			bool all = true;
			for (uint32_t b = 0; b < nb; b++) {
				if (rndn(2))
					put_blocks(w, b, 1);
				else
					all = false;
			}
			if (!all && first_out > i)
				first_out = i;
		}
		}
	}
	rng_s = saved;
	return first_out;
}

/* --compact: a mount's map leaves get no budget, so every changed leaf
 * nobody is inside is made compact at the next leaf fault's trim (and
 * expanded by its next user), and the checkpoints write from compact
 * leaves.  No pressure callback: it would ask for checkpoints on the
 * background thread, at times no seed repeats. */
static void compact_tune(struct tfs *fs)
{
	if (!compact || !fs->xc)
		return;
	extcache_set_pressure(fs->xc, NULL, NULL);
	extcache_set_budget(fs->xc, 0);
}

static int mount_work(const char *const *devs, unsigned n, bool degraded, bool lazy,
		      struct tfs **fs, char *err, size_t errlen)
{
	struct tfs_opts o = {
		.devs = devs, .ndevs = n, .backend = "file", .fault = VERIFY_FAULT,
		.degraded = degraded, .commit_ms = 3600000,
		.nodiscard = true,	/* leaves the work images as built */
		.cache_bytes = cache_bytes,
		.lazyreplay = lazy,
		.compact_dirty = compact,
	};
	int ret = tfs_mount(&o, fs, err, errlen);

	if (!ret)
		compact_tune(*fs);
	return ret;
}

static const struct dev_fault_rec *dbg_j;
static size_t dbg_nj;
static bool verify_lazy;	/* the failing check's mount: -o lazyreplay */

static void dump_fail(const struct cstate *s, const char *what, size_t lo, size_t hi,
		      const char *got)
{
	fprintf(stderr, "FAIL: crash state cut %zu mode %d seed %llu%s (mount%s -o lazyreplay): "
		"%s\n", s->cut, s->mode, (unsigned long long)s->seed,
		mount_end && s->cut <= mount_end ? ", inside the continued mount" : "",
		verify_lazy ? " with" : " without", what);
	fprintf(stderr, "  allowed ops %zu..%zu (of %zu)\n", lo, hi, nops - 1);
	for (size_t k = lo > 3 ? lo - 3 : 0; k <= hi + 1 && k < nops; k++)
		fprintf(stderr, "  op %zu [journal %zu, durable %zu]: %s\n", k, ops[k].start,
			ops[k].durable, ops[k].desc);
	if (getenv("TWINFS_CRASH_DEBUG")) {
		for (size_t k = 0; k < nops; k++)
			fprintf(stderr, "  op %zu [journal %zu, durable %zu]: %s\n", k, ops[k].start,
				ops[k].durable, ops[k].desc);
		for (size_t i = 0; i < dbg_nj; i++)
			fprintf(stderr, "  j %zu: %s dev %d off %llu len %u\n", i,
				dbg_j[i].op == DEV_FLUSH ? "flush" :
				dbg_j[i].op == DEV_DISCARD ? "discard" : "write", dbg_j[i].dev_idx,
				(unsigned long long)dbg_j[i].off / BS, dbg_j[i].len / BS);
	}
	if (getenv("TWINFS_CRASH_KEEP")) {
		for (int d = 0; d < NDEV; d++) {
			char to[512];
			snprintf(to, sizeof(to), "%s.%d", getenv("TWINFS_CRASH_KEEP"), d);
			close(open(to, O_CREAT | O_WRONLY, 0644));
			crash_copy_image(work_p[d], to);
		}
		fprintf(stderr, "  images kept as %s.N\n", getenv("TWINFS_CRASH_KEEP"));
	}
	if (got) {
		fprintf(stderr, "--- recovered:\n%s--- model after op %zu:\n%s--- model after op %zu:\n%s",
			got, lo, ops[lo].text, hi, ops[hi].text);
	}
}

/* fsck -n on the crash images: it must run, find no data block that no
 * copy verifies, and report nothing but what a crash leaves and mount
 * handles: orphans to reclaim, a log chunk only one mirror got, a
 * superblock slot one mirror did not get or got torn (S_SUPER). */
static unsigned long fsck_runs, fsck_findings;

static void check_fsck(const struct cstate *s, size_t lo, size_t hi)
{
	struct fsck_result res;
	char *text = NULL;
	size_t tlen = 0;
	FILE *out = open_memstream(&text, &tlen);
	struct fsck_opts o = {
		.devs = (const char *const *)work_p, .ndevs = NDEV, .mode = FSCK_CHECK,
		.backend = "file", .out = out,
	};
	int rc;

	assert_non_null(out);
	memset(&res, 0, sizeof(res));
	rc = fsck_run(&o, &res);
	fclose(out);
	fsck_runs++;
	if (rc != FSCK_EXIT_OK) {
		fsck_findings++;
		if (getenv("TWINFS_CRASH_DEBUG"))
			fprintf(stderr, "fsck exit %d on cut %zu mode %d:\n%s", rc, s->cut, s->mode, text);
	}
	/* every finding must be a crash leftover */
	for (char *l = text, *e; l && *l; l = e ? e + 1 : NULL) {
		e = strchr(l, '\n');
		if (e)
			*e = 0;
		if (strstr(l, "not fixed") && !strstr(l, "orphan file inode") &&
		    !strstr(l, "log copy damaged at transaction") &&
		    !strstr(l, "superblock generation") &&
		    !(strstr(l, "superblock slot ") && strstr(l, "checksum mismatch")))
			rc = FSCK_EXIT_OPERROR;
		if (e)
			*e = '\n';
	}
	if (rc == FSCK_EXIT_OPERROR || res.unrecoverable) {
		dump_fail(s, "fsck", lo, hi, NULL);
		fprintf(stderr, "--- fsck (exit %d):\n%s", rc, text);
		free(text);
		fail_msg("fsck failed on a crash state");
	}
	free(text);
}

/* Mount the work images (all, or one alone) and match a model state. */
static void check_mount(const struct cstate *s, const char *const *devs, unsigned n, bool lazy,
			size_t lo, size_t hi)
{
	struct tfs *fs;
	char err[256] = "";
	int ret = mount_work(devs, n, n < NDEV, lazy, &fs, err, sizeof(err));
	char *got;
	size_t k;

	verify_lazy = lazy;
	if (ret) {
		dump_fail(s, n == NDEV ? err : devs[0] == work_p[0] ? "device 0 alone" :
			  "device 1 alone", lo, hi, NULL);
		fail_msg("mount failed: %s", err);
	}
	got = recovered_text(fs, &ret);
	if (ret) {
		dump_fail(s, strerror(-ret), lo, hi, got);
		fail_msg("reading the recovered tree: %s", strerror(-ret));
	}
	for (k = lo; k <= hi; k++)
		if (!strcmp(got, ops[k].text))
			break;
	if (k > hi) {
		dump_fail(s, n < NDEV ? (devs[0] == work_p[0] ? "device 0 alone: no model state matches" : "device 1 alone: no model state matches")
				      : "no model state matches", lo, hi, got);
		fail_msg("recovered tree is not a model state in range");
	}
	free(got);
	assert_int_equal(tfs_unmount(fs), 0);
}

static void explore(const struct dev_fault_rec *j, size_t nj, unsigned budget)
{
	struct cstate *st = NULL;
	size_t nst = 0, cap = 0, explored = 0;

	dbg_j = j;
	dbg_nj = nj;
	size_t nflush = 0, ndiscard = 0;

	size_t nsuper = 0, nnode = 0, nlog = 0, nwrap = 0, msuper = 0;
	const struct super *sb = &wfs->sb;
	uint64_t lastnode[NDEV] = { 0 };

	for (size_t i = 0; i < nj; i++) {
		uint64_t b = j[i].off / BS;

		ndiscard += j[i].op == DEV_DISCARD;
		if (j[i].op != DEV_WRITE)
			continue;
		nsuper += b < 2;
		msuper += b < 2 && i < mount_end;
		nlog += b >= sb->log_start && b < sb->log_start + sb->log_blocks;
		if (sb->node_blocks && b >= sb->node_start && b < sb->node_start + sb->node_blocks) {
			/* the node cursor wrapped: slots freed earlier come back */
			nwrap += b < lastnode[j[i].dev_idx];
			lastnode[j[i].dev_idx] = b;
			nnode++;
		}
	}
	total_discards += ndiscard;
	total_node_writes += nnode;
	total_node_wraps += nwrap;

#define ADD(c, m) do {							\
		if (nst == cap) {					\
			cap = cap ? cap * 2 : 256;			\
			st = realloc(st, cap * sizeof(*st));		\
			assert_non_null(st);				\
		}							\
		st[nst++] = (struct cstate){ (c), (m), rnd() | 1 };	\
	} while (0)

	for (size_t i = 0; i < nj; i++) {
		/* FUA writes too: an O_DSYNC write's data and its log chunk
		 * may be durable with no flush between them. */
		if (j[i].op != DEV_FLUSH && !(j[i].op == DEV_WRITE && j[i].fua))
			continue;
		nflush++;
		ADD(i + 1, S_ALL);
		ADD(i + 1, S_NONE);
		for (int r = 0; r < (long_run ? 3 : 1); r++) {
			ADD(i + 1, S_RANDOM);
			ADD(i, S_RANDOM);	/* before the flush: e.g. before the first flush of a commit */
		}
		ADD(i + 1, S_SPLIT);
		if (lazycont)	/* the continuation's and checkpoints' superblocks */
			ADD(i, S_SUPER);
		if (i < mount_end) {	/* inside the continued mount: more of it */
			ADD(i + 1, S_SUPER);
			ADD(i + 1, S_RANDOM);
			ADD(i, S_RANDOM);
		}
	}
	if (mount_end)
		ADD(mount_end, S_ALL);
	ADD(nj, S_ALL);
	for (int r = 0; r < 8; r++)
		ADD(nj, S_RANDOM);
	for (int r = 0; r < 16; r++)
		ADD(rndn(nj + 1), S_RANDOM);

	/* base copies of every block the journal writes */
	for (int d = 0; d < NDEV; d++) {
		size_t nb = 0;

		for (uint64_t b = 0; b < NBLK; b++)
			base[d].slot[b] = -1;
		for (size_t i = 0; i < nj; i++)
			if ((j[i].op == DEV_WRITE || j[i].op == DEV_DISCARD) && j[i].dev_idx == d)
				for (uint64_t b = j[i].off / BS; b < (j[i].off + j[i].len) / BS; b++)
					base[d].slot[b] = 0;
		for (uint64_t b = 0; b < NBLK; b++)
			if (base[d].slot[b] == 0)
				base[d].slot[b] = (int32_t)nb++;
			else
				base[d].slot[b] = -1;
		base[d].data = malloc(nb * BS + 1);
		assert_non_null(base[d].data);
		for (uint64_t b = 0; b < NBLK; b++)
			if (base[d].slot[b] >= 0)
				assert_int_equal(pread(wfd[d], base[d].data + (size_t)base[d].slot[b] * BS,
						       BS, (off_t)(b * BS)), (ssize_t)BS);
	}

	for (size_t i = 0; i < nst; i++) {
		const struct cstate *s = &st[i];
		size_t out, lo = 0, hi = 0;
		bool in_mount = mount_end && s->cut <= mount_end;
		bool lazy = lazycont ? explored % 2 == 0 : lazyreplay;

		/* CI: a deterministic spread of the candidates */
		if (!in_mount && nst > budget && (i * budget) / nst == ((i + 1) * budget) / nst)
			continue;
		restore();
		out = build_state(j, s);
		for (size_t k = 1; k < nops; k++) {
			if (ops[k].durable && ops[k].durable <= out)
				lo = k;
			if (ops[k].start < s->cut)
				hi = k;
		}
		if (hi < lo)
			hi = lo;
		if (in_mount || explored % 4 == 1)
			check_fsck(s, lo, hi);
		check_mount(s, (const char *const *)work_p, NDEV, lazy, lo, hi);
		if (in_mount)
			check_mount(s, (const char *const *)work_p, NDEV, !lazy, lo, hi);
		/* Losing a mirror at the crash loses nothing durable either
		 * (a torn superblock alone is damage: mount refuses it). */
		if (in_mount || explored % 4 == 3)
			for (int d = 0; d < NDEV; d++)
				if (!torn[d])
					check_mount(s, (const char *const *)&work_p[d], 1,
					    lazycont ? lazy == !d : lazy, lo, hi);
		explored++;
		in_mount_states += in_mount;
	}
	restore();
	for (int d = 0; d < NDEV; d++) {
		free(base[d].data);
		base[d].data = NULL;
	}
	printf("crash: %zu journal entries (%zu flushes and FUA writes, %zu discards; writes: %zu "
	       "superblock, %zu log, %zu tree node, %zu node-area wraps), %zu operations: %zu "
	       "crash states explored of %zu candidates\n", nj, nflush, ndiscard, nsuper, nlog,
	       nnode, nwrap, nops - 1, explored, nst);
	if (lazycont)	/* so far */
		printf("crash: the continued mount's %zu journal entries (%zu superblock writes): "
		       "%lu states inside it\n", mount_end, msuper, in_mount_states);
	total_states += explored;
	free(st);
#undef ADD
}

/* Version 2 takes node slots next-fit (a cursor over the node area): bring
 * the cursor near the end of the area with small checkpoints (the root's
 * mtime), so the recorded checkpoints wrap around and reuse the slots
 * earlier commits freed.  Where a commit put the INODES root shows where
 * the cursor is. */
static void v2_age(void)
{
	const struct super *sb = &wfs->sb;
	uint64_t end = sb->node_start + sb->node_blocks;
	uint64_t room = (4 + rndn(24)) * BNODE_BLOCKS;	/* slots left before the wrap */
	struct stat st;

	for (int i = 0; i < 1000; i++) {
		uint64_t top = 0;

		for (unsigned t = 0; t < SUPER_V2_TREES; t++)
			if (sb->roots[t].ptr.addr > top)
				top = sb->roots[t].ptr.addr;
		if (top + room >= end)
			return;
		memset(&st, 0, sizeof(st));
		st.st_mtim.tv_sec = 1000 + i;
		assert_int_equal(tfs_setattr(wfs, TFS_ROOT_INO, &st, TFS_SET_MTIME, NULL, &st), 0);
		assert_int_equal(tfs_checkpoint(wfs), 0);
	}
	fail_msg("v2: the node cursor does not move");
}

/* Every file the workload holds open released (an unnamed one goes). */
static void release_all(void)
{
	for (int i = 0; i < MAXN; i++) {
		if (!nodes[i].fh)
			continue;
		assert_int_equal(tfs_release(nodes[i].fh), 0);
		nodes[i].fh = NULL;
		if (nodes[i].nlink == 0)
			nodes[i].live = false;
	}
}

/* --lazycont: a few more operations logged after the base's checkpoint,
 * every file released (an unlinked open one would be an orphan the mount
 * reclaims, which it does only with a checkpoint), a crash, and the mount
 * after it with -o lazyreplay: it must serve without a checkpoint.  The
 * crashed images are the base; the recording (fault rule "record") starts
 * with that mount: its writes are the journal's first mount_end entries. */
static void continued_base(struct tfs_opts *o)
{
	char err[256] = "", d[96];
	const struct dev_fault_rec *j;
	bool repaired = false;
	struct stat st;

	no_ckpt = true;		/* v2_age left the node cursor where it wants it */
	for (int i = 0; i < 8; i++)
		do_op(d, sizeof(d));
	no_ckpt = false;
	memset(&st, 0, sizeof(st));
	st.st_mtim.tv_sec = 999;	/* at least one record after the checkpoints */
	assert_int_equal(tfs_setattr(wfs, TFS_ROOT_INO, &st, TFS_SET_MTIME, NULL, &st), 0);
	release_all();
	assert_int_equal(tfs_syncfs(wfs), 0);
	/* The last chunk on device 0 only (a change the model does not show,
	 * the root's mtime): the continued mount's replay rewrites it onto
	 * device 1, a repair that must be durable before its superblock. */
	assert_int_equal(dev_fault_parse(wfs->be, "dev=1,op=write,kind=drop"), 0);
	st.st_mtim.tv_sec = 998;
	assert_int_equal(tfs_setattr(wfs, TFS_ROOT_INO, &st, TFS_SET_MTIME, NULL, &st), 0);
	assert_int_equal(tfs_syncfs(wfs), 0);
	tfs_abandon(wfs);
	for (int i = 0; i < NDEV; i++)
		crash_copy_image(orig_p[i], work_p[i]);
	o->lazyreplay = true;
	o->fault = "record";
	assert_int_equal(tfs_mount(o, &wfs, err, sizeof(err)), 0);
	compact_tune(wfs);
	assert_true(wfs->mount_continued);
	assert_true(super_log_cont(&wfs->sb));
	assert_int_equal(atomic_load(&wfs->ckpt_writes), 0);
	j = dev_fault_journal(wfs->be, &mount_end);
	for (size_t i = 0; i < mount_end; i++)	/* the replay's repair is there */
		repaired |= j[i].op == DEV_WRITE && j[i].dev_idx == 1 &&
			    j[i].off / BS - wfs->sb.log_start < wfs->sb.log_blocks;
	assert_true(repaired);
}

static void run_seed(uint64_t seed, unsigned nop, unsigned budget)
{
	struct tfs_format_opts fo = { .force = true, .backend = "file", .v2 = fmt_v2 };
	struct tfs_opts o = {
		.devs = orig_p, .ndevs = NDEV, .backend = "file", .fault = "",
		.commit_ms = 3600000,	/* no background commits between base and recording */
		.cache_bytes = cache_bytes,
		.compact_dirty = compact,
	};
	char err[256] = "";
	const struct dev_fault_rec *j;
	size_t nj;

	printf("crash: seed %llu, %u operations, format %s\n", (unsigned long long)seed, nop,
	       fmt_v2 ? "v2" : "v1");
	rng_s = seed * 0x9e3779b97f4a7c15ull | 1;
	assert_int_equal(tfs_format(orig_p, NDEV, &fo, err, sizeof(err)), 0);
	assert_int_equal(tfs_mount(&o, &wfs, err, sizeof(err)), 0);
	compact_tune(wfs);
	model_reset();

	/* a few files exist before the recording starts */
	ops = calloc(nop + 1, sizeof(*ops));
	assert_non_null(ops);
	nops = 0;
	for (int i = 0; i < (compact ? 40 : 6); i++) {
		char d[96];
		do_op(d, sizeof(d));
	}
	if (fmt_v2) {	/* the base already has trees with items */
		assert_int_equal(tfs_checkpoint(wfs), 0);
		if (compact) {	/* the base's files come back with their maps
				 * read from the tree: leaves of the cache */
			release_all();
			assert_int_equal(tfs_unmount(wfs), 0);
			assert_int_equal(tfs_mount(&o, &wfs, err, sizeof(err)), 0);
			compact_tune(wfs);
		}
		v2_age();
	}
	if (lazycont) {
		continued_base(&o);
	} else {
		assert_int_equal(tfs_syncfs(wfs), 0);
		for (int d = 0; d < NDEV; d++)
			crash_copy_image(orig_p[d], work_p[d]);
		dev_fault_record(wfs->be, true);
	}

	ops[0].text = model_text();
	snprintf(ops[0].desc, sizeof(ops[0].desc), "(base)");
	nops = 1;
	for (unsigned k = 1; k <= nop; k++) {
		bool dur;

		ops[k].start = jlen();
		dur = do_op(ops[k].desc, sizeof(ops[k].desc));
		if (dur)
			ops[k].durable = jlen();
		/* Discards run asynchronously; now and then let them land
		 * right here, between operations, not only at the end. */
		if (rndn(4) == 0)
			discard_flush(wfs);
		/* --compact: trims as leaf faults of other files would
		 * make them (the first takes the second chances away). */
		if (compact && wfs->xc) {
			extcache_trim(wfs->xc);
			extcache_trim(wfs->xc);
		}
		ops[k].text = model_text();
		nops = k + 1;
	}
	discard_flush(wfs);
	dev_fault_record(wfs->be, false);
	j = dev_fault_journal(wfs->be, &nj);
	unsigned ntmp = 0;
	for (size_t k = 1; k < nops; k++)
		ntmp += !strncmp(ops[k].desc, "tmpfile", 7);
	printf("crash: %u O_TMPFILE files among them\n", ntmp);

	for (int d = 0; d < NDEV; d++) {
		wfd[d] = open(work_p[d], O_RDWR);
		assert_true(wfd[d] >= 0);
	}
	explore(j, nj, budget);
	for (int d = 0; d < NDEV; d++)
		close(wfd[d]);

	for (int i = 0; i < MAXN; i++)
		if (nodes[i].fh) {
			tfs_release(nodes[i].fh);
			nodes[i].fh = NULL;
		}
	if (wfs->xc) {
		struct extcache_stats xs;

		extcache_stats(wfs->xc, &xs);
		total_compactions += xs.compactions;
		total_expansions += xs.expansions;
	}
	tfs_abandon(wfs);
	for (size_t k = 0; k < nops; k++)
		free(ops[k].text);
	free(ops);
	ops = NULL;
	model_reset();
}

static void test_crash_states(void **state)
{
	const char *s = getenv("TWINFS_CRASH_SEED");
	uint64_t seed = s && *s ? strtoull(s, NULL, 0) : 1;
	const char *ns = getenv("TWINFS_CRASH_SEEDS");
	int nseeds = ns && *ns ? atoi(ns) : long_run ? 10 : fmt_v2 ? 2 : 4;

	for (int i = 0; i < nseeds; i++)
		run_seed(seed + (uint64_t)i, long_run ? 400 : 120, long_run ? 1000000 : 400);
	printf("crash: %lu crash states explored in total (%lu discards journaled); fsck -n "
	       "ran on %lu of them (%lu with crash leftovers reported, none unrecoverable)\n",
	       total_states, total_discards, fsck_runs, fsck_findings);
	/* The workload frees blocks: discards must be part of what is explored. */
	assert_true(total_discards > 0);
	/* On version 2 the checkpoints' node writes are part of it too. */
	if (fmt_v2)	/* a continued mount's cursor starts afresh: no wrap */
		assert_true(total_node_writes > 0 && (total_node_wraps > 0 || lazycont));
	if (!ns || !*ns)
		assert_true(total_states >= (long_run ? 5000u : fmt_v2 ? 500u : 1000u));
	assert_true(in_mount_states > 0 || !lazycont);
	if (compact) {	/* the checkpoints wrote from compact leaves */
		printf("crash: %lu map leaves made compact, %lu expanded again\n",
		       total_compactions, total_expansions);
		assert_true(total_compactions > 0 && total_expansions > 0);
	}
}

static int setup(void **state)
{
	for (int d = 0; d < NDEV; d++) {
		crash_mk_image(orig[d], IMG_SIZE);
		crash_mk_image(work[d], IMG_SIZE);
		orig_p[d] = orig[d];
		work_p[d] = work[d];
	}
	if (posix_memalign((void **)&rbuf, BS, TFS_IO_MAX))
		return -1;
	return 0;
}

static int teardown(void **state)
{
	for (int d = 0; d < NDEV; d++) {
		unlink(orig[d]);
		unlink(work[d]);
	}
	free(rbuf);
	return 0;
}

int main(int argc, char **argv)
{
	const char *l = getenv("TWINFS_CRASH_LONG");
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crash_states),
	};

	const char *f = getenv("TWINFS_CRASH_FORMAT");
	const char *c = getenv("TWINFS_CRASH_CACHE");

	long_run = l && *l && strcmp(l, "0");
	fmt_v2 = !(f && !strcmp(f, "v1"));
	cache_bytes = c && *c ? strtoull(c, NULL, 0) << 20 : 0;
	for (int i = 1; i < argc; i++) {
		long_run |= !strcmp(argv[i], "--long");
		if (!strcmp(argv[i], "--v1"))
			fmt_v2 = false;
		else if (!strcmp(argv[i], "--v2"))
			fmt_v2 = true;
		else if (!strcmp(argv[i], "--lazyreplay"))
			lazyreplay = true;
		else if (!strcmp(argv[i], "--lazycont"))
			lazycont = true;
		else if (!strcmp(argv[i], "--compact"))
			compact = true;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	return cmocka_run_group_tests(tests, setup, teardown);
}
