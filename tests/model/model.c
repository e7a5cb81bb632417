// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: randomized model-based tester: random write/truncate/punch/read against an in-memory model */
/*
 * model: drives a few files under --dir with random operations from a seeded
 * PRNG and checks every read against an in-memory copy of what the files
 * must contain.  The model can be saved and loaded, so one run can stop
 * before a remount and the next verify everything and carry on after it:
 *
 *   model --dir D --seed S --ops N (--buffered|--direct) [--load F] [--save F]
 *
 * Without --load the files are created empty.  With --load every file is
 * verified against the loaded model before the first operation.  Every file
 * is verified again at the end and every 5000 operations.  --direct opens
 * the files O_DIRECT and uses 4096-aligned offsets, lengths and buffers for
 * I/O (truncate sizes stay arbitrary).  Exit 0 on success, 1 on a mismatch
 * (with the last operations printed), 2 on usage or setup errors.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/falloc.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NFILES 4
#define FILE_MAX (6u << 20)	/* largest size a file reaches */
#define IO_MAX (256u << 10)	/* largest write or read */
#define BLK 4096u
#define TRACE 16
#define MODEL_MAGIC "TFSMODL1"

struct mfile {
	uint8_t *data;		/* FILE_MAX bytes; past size always zero */
	uint64_t size;
	int fd;
};

static struct mfile files[NFILES];
static const char *dir;
static bool direct;
static uint64_t rng, seed;
static uint8_t *iobuf, *rdbuf;	/* IO_MAX (or FILE_MAX) bytes, 4096-aligned */

/* The last operations, printed when a check fails. */
static char trace[TRACE][128];
static unsigned long opno;

enum { OP_WRITE, OP_TRUNC, OP_PUNCH, OP_READ, OP_FSYNC, OP_REOPEN };

static uint64_t next(void)
{
	/* splitmix64: a full-period generator that needs no warm-up. */
	uint64_t z = (rng += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static uint64_t below(uint64_t n)
{
	return n ? next() % n : 0;
}

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(trace[opno % TRACE], sizeof(trace[0]), fmt, ap);
	va_end(ap);
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "model: op %lu: ", opno);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fprintf(stderr, "model: last operations (oldest first):\n");
	for (unsigned long i = opno >= TRACE ? opno - TRACE + 1 : 0; i <= opno; i++)
		if (trace[i % TRACE][0])
			fprintf(stderr, "  #%lu %s\n", i, trace[i % TRACE]);
	exit(1);
}

static void *xalloc(size_t n)
{
	void *p;

	if (posix_memalign(&p, BLK, n)) {
		fprintf(stderr, "model: out of memory\n");
		exit(2);
	}
	memset(p, 0, n);
	return p;
}

static void open_file(unsigned i, bool create)
{
	char path[4096];
	int flags = O_RDWR | (direct ? O_DIRECT : 0) | (create ? O_CREAT | O_TRUNC : 0);

	snprintf(path, sizeof(path), "%s/f%u", dir, i);
	files[i].fd = open(path, flags, 0644);
	if (files[i].fd < 0)
		die("open %s: %s", path, strerror(errno));
}

/* Length of a random I/O: mostly small, sometimes up to IO_MAX, so that
 * 100k operations finish in minutes but large extents still occur. */
static uint64_t rand_len(void)
{
	uint64_t r = below(100), len;

	if (r < 35)
		len = 1 + below(512);
	else if (r < 65)
		len = 1 + below(3 * BLK);
	else if (r < 90)
		len = 1 + below(64 << 10);
	else
		len = 1 + below(IO_MAX);
	if (direct)
		len = (len + BLK - 1) / BLK * BLK;
	return len;
}

static uint64_t rand_off(uint64_t len)
{
	uint64_t off;

	/* Bias towards the current end of some file: extending writes and
	 * writes straddling EOF are where size bugs live. */
	off = below(FILE_MAX - len + 1);
	if (direct)
		off = off / BLK * BLK;
	return off;
}

static void do_write(struct mfile *f, unsigned idx)
{
	uint64_t len = rand_len(), off;

	if (below(4) == 0 && f->size + len <= FILE_MAX)
		off = f->size > len / 2 ? f->size - below(len / 2 + 1) : f->size;
	else
		off = rand_off(len);
	if (direct)
		off = off / BLK * BLK;
	if (off + len > FILE_MAX)
		off = FILE_MAX - len;
	note("write f%u off %" PRIu64 " len %" PRIu64 " (size %" PRIu64 ")", idx, off, len, f->size);
	for (uint64_t i = 0; i < len; i += 8) {
		uint64_t v = next();
		memcpy(iobuf + i, &v, len - i < 8 ? len - i : 8);
	}
	uint64_t done = 0;
	while (done < len) {
		ssize_t r = pwrite(f->fd, iobuf + done, len - done, (off_t)(off + done));
		if (r <= 0)
			die("pwrite f%u len %" PRIu64 " at %" PRIu64 ": %s", idx, len - done,
			    off + done, r < 0 ? strerror(errno) : "wrote 0");
		done += (uint64_t)r;
	}
	memcpy(f->data + off, iobuf, len);
	if (off + len > f->size)
		f->size = off + len;
}

static void do_trunc(struct mfile *f, unsigned idx)
{
	uint64_t size;

	/* Mostly shrink a little or grow a little, sometimes anywhere. */
	switch (below(3)) {
	case 0:
		size = below(FILE_MAX + 1);
		break;
	case 1:
		size = f->size > 0 ? f->size - below(f->size < 65536 ? f->size + 1 : 65536) : 0;
		break;
	default:
		size = f->size + below(65536);
		break;
	}
	if (size > FILE_MAX)
		size = FILE_MAX;
	note("truncate f%u %" PRIu64 " -> %" PRIu64, idx, f->size, size);
	if (ftruncate(f->fd, (off_t)size) < 0)
		die("ftruncate f%u to %" PRIu64 ": %s", idx, size, strerror(errno));
	if (size < f->size)
		memset(f->data + size, 0, f->size - size);
	f->size = size;
}

static void do_punch(struct mfile *f, unsigned idx)
{
	uint64_t len = rand_len(), off = rand_off(len);

	if (f->size > 0 && below(2))
		off = below(f->size);	/* aim inside the file */
	if (direct)
		off = off / BLK * BLK;
	note("punch f%u off %" PRIu64 " len %" PRIu64 " (size %" PRIu64 ")", idx, off, len, f->size);
	if (fallocate(f->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) < 0)
		die("punch f%u off %" PRIu64 " len %" PRIu64 ": %s", idx, off, len,
		    strerror(errno));
	if (off < f->size) {
		uint64_t end = off + len < f->size ? off + len : f->size;
		memset(f->data + off, 0, end - off);
	}
}

/* Read [off, off+len) and compare with the model (short read at EOF). */
static void check_range(struct mfile *f, unsigned idx, uint64_t off, uint64_t len)
{
	uint64_t want = off >= f->size ? 0 : (off + len > f->size ? f->size - off : len);
	uint64_t done = 0;

	while (done < len) {
		ssize_t r = pread(f->fd, rdbuf + done, len - done, (off_t)(off + done));
		if (r < 0)
			die("pread f%u len %" PRIu64 " at %" PRIu64 ": %s", idx, len - done,
			    off + done, strerror(errno));
		if (r == 0)
			break;
		done += (uint64_t)r;
	}
	if (done != want)
		die("read f%u off %" PRIu64 " len %" PRIu64 ": got %" PRIu64 " bytes, want %" PRIu64
		    " (model size %" PRIu64 ")", idx, off, len, done, want, f->size);
	if (memcmp(rdbuf, f->data + off, want) == 0)
		return;
	for (uint64_t i = 0; i < want; i++) {
		if (rdbuf[i] != f->data[off + i]) {
			uint64_t e = i;
			while (e < want && rdbuf[e] != f->data[off + e])
				e++;
			die("read f%u off %" PRIu64 " len %" PRIu64 ": mismatch at file offset %"
			    PRIu64 " (block %" PRIu64 "): got 0x%02x want 0x%02x, %" PRIu64
			    " bytes differ from there", idx, off, len, off + i, (off + i) / BLK,
			    rdbuf[i], f->data[off + i], e - i);
		}
	}
}

static void do_read(struct mfile *f, unsigned idx)
{
	uint64_t len = rand_len(), off;

	if (below(4) == 0 && f->size > 0)
		off = f->size - below(f->size < len ? f->size + 1 : len);	/* across EOF */
	else
		off = rand_off(len);
	if (direct)
		off = off / BLK * BLK;
	note("read f%u off %" PRIu64 " len %" PRIu64 " (size %" PRIu64 ")", idx, off, len, f->size);
	check_range(f, idx, off, len);
}

static void verify_all(const char *when)
{
	for (unsigned i = 0; i < NFILES; i++) {
		struct stat st;

		note("verify f%u (%s)", i, when);
		if (fstat(files[i].fd, &st) < 0)
			die("fstat f%u: %s", i, strerror(errno));
		if ((uint64_t)st.st_size != files[i].size)
			die("verify (%s): f%u has size %" PRIu64 ", model %" PRIu64, when, i,
			    (uint64_t)st.st_size, files[i].size);
		for (uint64_t off = 0; off < files[i].size + BLK; off += IO_MAX)
			check_range(&files[i], i, off, IO_MAX);
	}
}

static void save(const char *path)
{
	FILE *fp = fopen(path, "wb");
	bool ok = fp != NULL;

	ok = ok && fwrite(MODEL_MAGIC, 8, 1, fp) == 1;
	for (unsigned i = 0; ok && i < NFILES; i++) {
		ok = fwrite(&files[i].size, sizeof(files[i].size), 1, fp) == 1;
		if (ok && files[i].size)
			ok = fwrite(files[i].data, files[i].size, 1, fp) == 1;
	}
	if (fp && fclose(fp) != 0)
		ok = false;
	if (!ok) {
		fprintf(stderr, "model: cannot write %s: %s\n", path, strerror(errno));
		exit(2);
	}
}

static void load(const char *path)
{
	FILE *fp = fopen(path, "rb");
	char magic[8];

	if (!fp || fread(magic, 8, 1, fp) != 1 || memcmp(magic, MODEL_MAGIC, 8)) {
		fprintf(stderr, "model: %s is not a saved model\n", path);
		exit(2);
	}
	for (unsigned i = 0; i < NFILES; i++) {
		if (fread(&files[i].size, sizeof(files[i].size), 1, fp) != 1 ||
		    files[i].size > FILE_MAX ||
		    (files[i].size && fread(files[i].data, files[i].size, 1, fp) != 1)) {
			fprintf(stderr, "model: %s is truncated\n", path);
			exit(2);
		}
	}
	fclose(fp);
}

static void usage(void)
{
	fprintf(stderr, "usage: model --dir D --seed S --ops N (--buffered|--direct) "
			"[--load F] [--save F]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "dir", required_argument, NULL, 'd' },
		{ "seed", required_argument, NULL, 's' },
		{ "ops", required_argument, NULL, 'n' },
		{ "direct", no_argument, NULL, 'D' },
		{ "buffered", no_argument, NULL, 'B' },
		{ "load", required_argument, NULL, 'l' },
		{ "save", required_argument, NULL, 'w' },
		{ NULL, 0, NULL, 0 },
	};
	const char *load_from = NULL, *save_to = NULL;
	unsigned long ops = 0, counts[OP_REOPEN + 1] = { 0 };
	bool mode_set = false;
	int c;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'd': dir = optarg; break;
		case 's': seed = rng = strtoull(optarg, NULL, 0); break;
		case 'n': ops = strtoul(optarg, NULL, 0); break;
		case 'D': direct = true; mode_set = true; break;
		case 'B': direct = false; mode_set = true; break;
		case 'l': load_from = optarg; break;
		case 'w': save_to = optarg; break;
		default: usage();
		}
	}
	if (!dir || !mode_set || optind != argc)
		usage();

	iobuf = xalloc(IO_MAX);
	rdbuf = xalloc(IO_MAX);
	for (unsigned i = 0; i < NFILES; i++)
		files[i].data = xalloc(FILE_MAX);
	if (load_from) {
		load(load_from);
	} else if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		fprintf(stderr, "model: mkdir %s: %s\n", dir, strerror(errno));
		return 2;
	}
	for (unsigned i = 0; i < NFILES; i++)
		open_file(i, !load_from);
	if (load_from)
		verify_all("after load");

	for (opno = 1; opno <= ops; opno++) {
		unsigned idx = (unsigned)below(NFILES), r = (unsigned)below(100), op;
		struct mfile *f = &files[idx];

		op = r < 45 ? OP_WRITE : r < 52 ? OP_TRUNC : r < 60 ? OP_PUNCH :
		     r < 98 ? OP_READ : r < 99 ? OP_FSYNC : OP_REOPEN;
		counts[op]++;
		switch (op) {
		case OP_WRITE: do_write(f, idx); break;
		case OP_TRUNC: do_trunc(f, idx); break;
		case OP_PUNCH: do_punch(f, idx); break;
		case OP_READ: do_read(f, idx); break;
		case OP_FSYNC:
			note("fsync f%u", idx);
			if ((below(2) ? fsync(f->fd) : fdatasync(f->fd)) < 0)
				die("fsync f%u: %s", idx, strerror(errno));
			break;
		case OP_REOPEN:
			note("reopen f%u", idx);
			if (close(f->fd) < 0)
				die("close f%u: %s", idx, strerror(errno));
			open_file(idx, false);
			break;
		}
		if (opno % 5000 == 0)
			verify_all("periodic");
	}
	opno = ops;
	verify_all("final");
	for (unsigned i = 0; i < NFILES; i++)
		if (close(files[i].fd) < 0)
			die("close f%u: %s", i, strerror(errno));
	if (save_to)
		save(save_to);
	printf("model: %s, seed %" PRIu64 ": %lu ops (write %lu, truncate %lu, punch %lu, "
	       "read %lu, fsync %lu, reopen %lu), all verified\n", direct ? "direct" : "buffered",
	       seed, ops, counts[OP_WRITE], counts[OP_TRUNC], counts[OP_PUNCH],
	       counts[OP_READ], counts[OP_FSYNC], counts[OP_REOPEN]);
	return 0;
}
