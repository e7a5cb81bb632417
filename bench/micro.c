// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * micro: the library-level microbenchmark (no FUSE, no kernel mount).  It
 * formats and mounts twinfs on two RAM-backed images (files on /dev/shm by
 * default, or the devices given with -d, e.g. direct-I/O loop devices), runs
 * the patterns of bench/run.sh straight against lib/ from N threads, and
 * prints, per pattern, the throughput and where the time of a write goes:
 * the phase counters of lib/prof.h (bounce copy, checksum, device writes,
 * metadata commit, lock and buffer waits, group commit wait), as microseconds
 * per write and as a share of the threads' time.  With -n the counters stay
 * off, to measure what they cost.
 *
 *   micro [-d DEV1:DEV2] [-t THREADS] [-s SECONDS] [-b BACKEND] [-m MiB]
 *         [-w W1,W3-4k,W3-64k,W2,DSYNC] [-n] [-1]
 *
 * Format v2 (mkfs.twinfs's default); -1 formats version 1 instead, to
 * compare the two on the same pattern.
 *
 * Patterns (one file each, prewritten so overwrites hit real blocks):
 *   W1      4k random overwrites, THREADS threads on one file
 *   W3-4k   the same (W3's libaio queue is THREADS writers here)
 *   W3-64k  64k random overwrites
 *   W2      128k sequential writes of a new file by one thread, then fsync
 *   DSYNC   4k random overwrites with O_DSYNC, THREADS threads: also prints
 *           how many commits the group commit folded into each log chunk
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "prof.h"
#include "tfs.h"

#define MiB (1024ull * 1024)

struct pattern {
	const char *name;
	size_t bs;
	bool seq, dsync;
	int threads;		/* 0: the -t value */
};

static const struct pattern patterns[] = {
	{ "W1", 4096, false, false, 0 },
	{ "W3-4k", 4096, false, false, 0 },
	{ "W3-64k", 65536, false, false, 0 },
	{ "W2", 128 * 1024, true, false, 1 },
	{ "DSYNC", 4096, false, true, 0 },
};

struct job {
	pthread_t th;
	struct tfs_file *f;
	const struct pattern *p;
	uint64_t fsize, seed, ops, bytes, end_ns;
	uint8_t *buf;
	int err;
};

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static void *job_run(void *arg)
{
	struct job *j = arg;
	uint64_t nblk = j->fsize / j->p->bs, pos = 0;

	while (prof_now() < j->end_ns) {
		uint64_t off;
		ssize_t n;

		if (j->p->seq) {
			off = pos;
			pos += j->p->bs;
			if (pos > j->fsize)
				break;
		} else {
			off = (xorshift(&j->seed) % nblk) * j->p->bs;
		}
		j->buf[0] = (uint8_t)j->ops;	/* the payload changes */
		n = tfs_pwrite(j->f, j->buf, j->p->bs, (off_t)off, j->p->dsync ? O_DSYNC : 0);
		if (n != (ssize_t)j->p->bs) {
			j->err = n < 0 ? (int)n : -EIO;
			break;
		}
		j->ops++;
		j->bytes += j->p->bs;
	}
	return NULL;
}

static int open_file(struct tfs *fs, const char *name, struct tfs_file **f)
{
	struct tfs_cred c = { .uid = 0, .gid = 0 };
	struct stat st;

	return tfs_create(fs, TFS_ROOT_INO, name, 0644, O_RDWR, &c, &st, f);
}

/* Write the whole file once (1 MiB writes) and make it durable. */
static int prewrite(struct tfs *fs, struct tfs_file *f, uint64_t size)
{
	uint8_t *b = malloc(MiB);
	int ret = 0;

	if (!b)
		return -ENOMEM;
	memset(b, 0x5a, MiB);
	for (uint64_t off = 0; off < size && !ret; off += MiB)
		if (tfs_pwrite(f, b, MiB, (off_t)off, 0) != (ssize_t)MiB)
			ret = -EIO;
	free(b);
	return ret ? ret : tfs_fsync(fs, tfs_file_ino(f), false);
}

static int run_pattern(struct tfs *fs, const struct pattern *p, int threads, double secs,
		       uint64_t fsize, bool prof)
{
	struct job *jobs;
	struct tfs_file *f;
	struct log_stats ls0, ls1;
	uint64_t t0, t1, ops = 0, bytes = 0, busy;
	int nt = p->threads ? p->threads : threads, ret;

	ret = open_file(fs, p->name, &f);
	if (ret)
		return ret;
	if (!p->seq) {
		ret = prewrite(fs, f, fsize);
		if (ret)
			goto out_f;
	}
	jobs = calloc((size_t)nt, sizeof(*jobs));
	if (!jobs) {
		ret = -ENOMEM;
		goto out_f;
	}
	prof_reset();
	prof_enabled = prof;
	tfs_log_stats(fs, &ls0);
	t0 = prof_now();
	for (int i = 0; i < nt; i++) {
		struct job *j = &jobs[i];

		j->f = f;
		j->p = p;
		j->fsize = p->seq ? 2048 * MiB : fsize;
		j->seed = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
		j->end_ns = t0 + (uint64_t)(secs * 1e9);
		if (posix_memalign((void **)&j->buf, 4096, p->bs)) {
			ret = -ENOMEM;
			nt = i;
			break;
		}
		memset(j->buf, i + 1, p->bs);
		if (pthread_create(&j->th, NULL, job_run, j)) {
			free(j->buf);
			ret = -EAGAIN;
			nt = i;
			break;
		}
	}
	for (int i = 0; i < nt; i++) {
		pthread_join(jobs[i].th, NULL);
		free(jobs[i].buf);
		ops += jobs[i].ops;
		bytes += jobs[i].bytes;
		if (jobs[i].err && !ret)
			ret = jobs[i].err;
	}
	if (p->seq && !ret)	/* W2's end_fsync is part of the run */
		ret = tfs_fsync(fs, tfs_file_ino(f), false);
	t1 = prof_now();
	prof_enabled = false;
	tfs_log_stats(fs, &ls1);
	free(jobs);
	if (ret)
		goto out_f;

	printf("\n%-7s %2d thread(s) bs %3zuk: %8.0f IOPS %8.1f MiB/s  (%.1f us/write per thread)\n",
	       p->name, nt, p->bs / 1024, ops / ((t1 - t0) / 1e9),
	       bytes / (double)MiB / ((t1 - t0) / 1e9),
	       ops ? (t1 - t0) / 1e3 * nt / ops : 0.0);
	if (prof && ops) {
		busy = (t1 - t0) * (uint64_t)nt;
		printf("  %-44s %10s %8s %7s\n", "phase", "us/write", "calls/w", "share");
		for (int i = 0; i < PROF_NPHASES; i++) {
			uint64_t ns = atomic_load(&prof_ctr[i].ns);
			uint64_t calls = atomic_load(&prof_ctr[i].calls);

			if (!calls)
				continue;
			printf("  %-44s %10.2f %8.2f %6.1f%%\n", prof_name[i], ns / 1e3 / ops,
			       (double)calls / ops, 100.0 * ns / busy);
		}
	}
	if (p->dsync) {
		uint64_t commits = ls1.commits - ls0.commits, chunks = ls1.chunks - ls0.chunks;

		printf("  group commit: %llu O_DSYNC waits, %llu log chunks (flush pairs): "
		       "%.2f writes per flush\n", (unsigned long long)commits,
		       (unsigned long long)chunks, chunks ? (double)ops / chunks : 0.0);
	}
out_f:
	tfs_release(f);
	return ret;
}

static void usage(const char *prog)
{
	fprintf(stderr, "usage: %s [-d DEV1:DEV2] [-t THREADS] [-s SECONDS] [-b BACKEND] "
		"[-m FILE_MiB] [-w W1,W3-4k,W3-64k,W2,DSYNC] [-n] [-1]\n", prog);
}

int main(int argc, char **argv)
{
	char *devarg = NULL, *which = NULL, err[256] = "";
	char tmp[2][64] = { "/dev/shm/twinfs-micro-a.XXXXXX", "/dev/shm/twinfs-micro-b.XXXXXX" };
	const char *devs[2];
	const char *backend = NULL;
	int threads = 8, c, ret = 0, ntmp = 0;
	double secs = 5;
	uint64_t fsize = 256 * MiB;
	bool prof = true, v2 = true;
	struct tfs *fs;

	while ((c = getopt(argc, argv, "d:t:s:b:m:w:n1h")) != -1) {
		switch (c) {
		case 'd': devarg = optarg; break;
		case 't': threads = atoi(optarg); break;
		case 's': secs = atof(optarg); break;
		case 'b': backend = optarg; break;
		case 'm': fsize = strtoull(optarg, NULL, 10) * MiB; break;
		case 'w': which = optarg; break;
		case 'n': prof = false; break;
		case '1': v2 = false; break;
		default: usage(argv[0]); return c == 'h' ? 0 : 2;
		}
	}
	if (threads < 1 || secs <= 0 || fsize < MiB) {
		usage(argv[0]);
		return 2;
	}
	if (devarg) {
		char *colon = strchr(devarg, ':');

		if (!colon) {
			usage(argv[0]);
			return 2;
		}
		*colon = '\0';
		devs[0] = devarg;
		devs[1] = colon + 1;
	} else {
		/* Sparse images on a tmpfs: W2 writes 2 GiB, the rest little. */
		for (ntmp = 0; ntmp < 2; ntmp++) {
			int fd = mkstemp(tmp[ntmp]);

			if (fd < 0 || ftruncate(fd, (off_t)(4096 * MiB)) < 0) {
				perror("micro: image on /dev/shm");
				if (fd >= 0)
					close(fd);
				ret = 1;
				goto out_tmp;
			}
			close(fd);
			devs[ntmp] = tmp[ntmp];
		}
	}

	/* Format v2, what mkfs.twinfs makes, unless -1. */
	struct tfs_format_opts fo = { .force = true, .backend = backend, .v2 = v2 };
	struct tfs_opts mo = { .devs = devs, .ndevs = 2, .backend = backend };

	ret = tfs_format(devs, 2, &fo, err, sizeof(err));
	if (!ret)
		ret = tfs_mount(&mo, &fs, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "micro: %s\n", err[0] ? err : strerror(-ret));
		ret = 1;
		goto out_tmp;
	}
	printf("twinfs lib microbenchmark: format v%d, backend %s, 2 mirrors (%s, %s), %.1f s per pattern, "
	       "profiling %s\n", v2 ? 2 : 1, tfs_backend_name(fs), devs[0], devs[1], secs, prof ? "on" : "off");
	for (size_t i = 0; i < sizeof(patterns) / sizeof(patterns[0]); i++) {
		const struct pattern *p = &patterns[i];
		size_t nl = strlen(p->name);
		const char *w = which;

		if (which) {
			while ((w = strstr(w, p->name)) &&
			       ((w != which && w[-1] != ',') || (w[nl] && w[nl] != ',')))
				w += nl;
			if (!w)
				continue;
		}
		ret = run_pattern(fs, p, threads, secs, fsize, prof);
		if (ret) {
			fprintf(stderr, "micro: %s: %s\n", p->name, strerror(-ret));
			break;
		}
	}
	ret = tfs_unmount(fs) || ret ? 1 : 0;
out_tmp:
	for (int i = 0; i < ntmp; i++)
		unlink(tmp[i]);
	return ret;
}
