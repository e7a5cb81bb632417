// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * twinfs-ctl: talk to a running twinfs daemon over its control channel
 * (lib/ctl.h: one ioctl on the mount's root) and show the replies to a
 * person: a ZFS-like device table for status, a progress bar (terminal) or
 * plain progress lines (pipe) for scrub/rebuild/replace, or the daemon's
 * JSON as is with --json.
 *
 * Exit status: 0 success, 1 the command failed (or a scrub/rebuild found
 * unrecoverable blocks), 2 usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "json.h"

static const char *prog = "twinfs-ctl";

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s COMMAND MNT [ARGS] [OPTIONS]\n"
		"  status MNT [--json]                 devices, states, error counters, space\n"
		"  stats MNT [--json]                  counters and internals\n"
		"  scrub start MNT [--rate N[KMG]] [--wait] [--json]\n"
		"  scrub status MNT [--wait] [--json]\n"
		"  scrub cancel MNT\n"
		"  rebuild MNT DEV [--wait]            bring a returning device back in sync\n"
		"  rebuild status MNT [--wait] [--json]\n"
		"  replace MNT OLD NEW [--wait]        copy everything onto a new device\n"
		"  replace status MNT [--wait] [--json]\n"
		"  trim MNT [--wait]                   discard all free space on every device\n"
		"  trim status MNT [--wait] [--json]\n"
		"  raw MNT 'COMMAND LINE'              send a command, print the JSON reply\n"
		"  sync MNT                            make everything written so far durable\n"
		"Only the user who mounted the file system and root may use it (sync: anyone).\n", prog);
}

/* ---- transport ---- */

/* Send one command; *reply gets the parsed JSON (NULL if none).  Prints a
 * one-line error and returns -errno on failure. */
static int send_cmd(const char *mnt, const char *cmd, struct jv **reply, char **raw)
{
	struct twinfs_ctl_msg *m = calloc(1, sizeof(*m));
	int fd, ret, err = 0;

	*reply = NULL;
	if (raw)
		*raw = NULL;
	if (!m) {
		fprintf(stderr, "%s: out of memory\n", prog);
		return -ENOMEM;
	}
	if (strlen(cmd) >= sizeof(m->buf)) {
		fprintf(stderr, "%s: command too long\n", prog);
		free(m);
		return -E2BIG;
	}
	fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		err = errno;
		if (err == ENOENT)
			fprintf(stderr, "%s: %s: no such directory (is it mounted?)\n", prog, mnt);
		else if (err == ENOTDIR)
			fprintf(stderr, "%s: %s: not a directory (give the mount point)\n", prog, mnt);
		else if (err == ENOTCONN)
			fprintf(stderr, "%s: %s: the twinfs daemon is gone (transport endpoint "
				"not connected)\n", prog, mnt);
		else if (err == EACCES)
			fprintf(stderr, "%s: %s: permission denied (only the user who mounted "
				"it and root may control it)\n", prog, mnt);
		else
			fprintf(stderr, "%s: %s: %s\n", prog, mnt, strerror(err));
		free(m);
		return -err;
	}
	strcpy(m->buf, cmd);
	ret = ioctl(fd, TWINFS_IOC_CTL, m);
	if (ret < 0)
		err = errno;
	close(fd);
	if (ret < 0 && (err == ENOTTY || err == ENOSYS || err == EINVAL) &&
	    (!m->buf[0] || !strcmp(m->buf, cmd))) {
		fprintf(stderr, "%s: %s: not a twinfs mount point (or not its root directory)\n",
			prog, mnt);
		free(m);
		return -ENOTTY;
	}
	if (ret < 0 && err == EPERM) {
		fprintf(stderr, "%s: %s: permission denied: only the user who mounted it and "
			"root may control it\n", prog, mnt);
		free(m);
		return -EPERM;
	}
	m->buf[sizeof(m->buf) - 1] = '\0';
	if (jv_parse(m->buf, reply) < 0) {
		if (ret < 0)
			fprintf(stderr, "%s: %s: %s\n", prog, mnt, strerror(err));
		else
			fprintf(stderr, "%s: %s: unreadable reply from the daemon\n", prog, mnt);
		free(m);
		return ret < 0 ? -err : -EPROTO;
	}
	if (raw)
		*raw = strdup(m->buf);
	free(m);
	if (ret < 0 || jv_get(*reply, "error")) {
		fprintf(stderr, "%s: %s\n", prog, jv_str(*reply, "error", strerror(err)));
		return ret < 0 ? -err : -EIO;
	}
	return 0;
}

/* ---- formatting ---- */

static const char *human(double v, char *buf, size_t n)
{
	static const char *const u[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	int i = 0;

	while (v >= 1024 && i < 5) {
		v /= 1024;
		i++;
	}
	snprintf(buf, n, i ? "%.1f %s" : "%.0f %s", v, u[i]);
	return buf;
}

static const char *dur(double s, char *buf, size_t n)
{
	unsigned long t;

	if (s < 0 || !isfinite(s)) {
		snprintf(buf, n, "--:--");
		return buf;
	}
	t = (unsigned long)(s + 0.5);
	if (t >= 3600)
		snprintf(buf, n, "%lu:%02lu:%02lu", t / 3600, t / 60 % 60, t % 60);
	else
		snprintf(buf, n, "%lu:%02lu", t / 60, t % 60);
	return buf;
}

static void print_json(const char *raw)
{
	puts(raw ? raw : "{}");
}

static bool job_running(const struct jv *v)
{
	const struct jv *s = jv_get(v, "state");

	if (s && s->type == JV_STR)
		return !strcmp(s->str, "running") || !strcmp(s->str, "verifying");
	if (s && s->type == JV_NUM)
		return s->num == 1;
	return false;
}

static const char *state_str(const struct jv *v, char *buf, size_t n)
{
	const struct jv *s = jv_get(v, "state");

	if (s && s->type == JV_STR)
		return s->str;
	snprintf(buf, n, "%s", s && s->type == JV_NUM ? (s->num == 1 ? "running" : "ended")
						       : "unknown");
	return buf;
}

static double job_percent(const struct jv *v)
{
	double total = jv_num(v, "bytes_total", 0), done = jv_num(v, "bytes_done", 0);

	if (jv_get(v, "percent"))
		return jv_num(v, "percent", 0);
	return total > 0 ? 100.0 * done / total : 0;
}

static double job_rate(const struct jv *v)
{
	return jv_get(v, "rate_bps") ? jv_num(v, "rate_bps", 0) : jv_num(v, "rate", 0);
}

/* One progress line: a bar on a terminal (rewritten in place), else a
 * plain line. */
static void progress_line(const char *what, const struct jv *v, bool tty)
{
	char b1[32], b2[32], b3[32], b4[32];
	double pct = job_percent(v);
	int width = 30, fill;

	if (pct < 0)
		pct = 0;
	if (pct > 100)
		pct = 100;
	human(jv_num(v, "bytes_done", 0), b1, sizeof(b1));
	human(jv_num(v, "bytes_total", 0), b2, sizeof(b2));
	human(job_rate(v), b3, sizeof(b3));
	dur(jv_num(v, "eta_s", -1), b4, sizeof(b4));
	if (!tty) {
		printf("%s: %5.1f%%  %s / %s  %s/s  ETA %s\n", what, pct, b1, b2, b3, b4);
		fflush(stdout);
		return;
	}
	fill = (int)(pct / 100.0 * width + 0.5);
	printf("\r\033[K%s [", what);
	for (int i = 0; i < width; i++)
		putchar(i < fill ? '#' : '.');
	printf("] %5.1f%%  %s / %s  %s/s  ETA %s", pct, b1, b2, b3, b4);
	fflush(stdout);
}

static void scrub_summary(const struct jv *v)
{
	char b1[32], b2[32], b3[32], s[16];
	const struct jv *bad = jv_get(v, "bad_blocks");
	uint64_t unrec = jv_u64(v, "unrecoverable", 0);

	char b4[32];

	printf("scrub %s: %s of %s verified", state_str(v, s, sizeof(s)),
	       human(jv_num(v, "bytes_done", 0), b1, sizeof(b1)),
	       human(jv_num(v, "bytes_total", 0), b4, sizeof(b4)));
	printf("; this run %s in %s (%s/s)%s\n", human(jv_num(v, "bytes_run", 0), b1, sizeof(b1)),
	       dur(jv_num(v, "elapsed_s", 0), b2, sizeof(b2)),
	       human(jv_num(v, "rate_bps", 0), b3, sizeof(b3)),
	       jv_bool(v, "resumed", false) ? ", resumed after a remount" : "");
	printf("  bad copies found: %llu, repaired: %llu, unrecoverable: %llu, read errors: %llu\n",
	       (unsigned long long)jv_u64(v, "csum_errors", 0),
	       (unsigned long long)jv_u64(v, "repaired", 0), (unsigned long long)unrec,
	       (unsigned long long)jv_u64(v, "read_errors", 0));
	if (unrec) {
		printf("  unrecoverable blocks (no copy verifies; those ranges read as EIO):\n");
		for (const struct jv *e = bad ? bad->child : NULL; e; e = e->next)
			printf("    %s  offset %llu (ino %llu)\n", jv_str(e, "path", "?"),
			       (unsigned long long)jv_u64(e, "offset", 0),
			       (unsigned long long)jv_u64(e, "ino", 0));
		if (jv_len(bad) < unrec)
			printf("    ... %llu more (see the daemon's log)\n",
			       (unsigned long long)(unrec - jv_len(bad)));
	}
}

/* Poll "<verb> status" until the job ends, showing progress.  Returns
 * the final reply. */
static int wait_job(const char *mnt, const char *verb, bool json, struct jv **last)
{
	bool tty = isatty(STDOUT_FILENO) && !json;
	char cmd[64];
	double last_print = -1;
	int ret;

	snprintf(cmd, sizeof(cmd), "%s status", verb);
	for (;;) {
		struct jv *v;
		char *raw = NULL;
		struct timespec ts, now;

		ret = send_cmd(mnt, cmd, &v, json ? &raw : NULL);
		if (ret < 0)
			return ret;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (!job_running(v)) {
			if (json)
				print_json(raw);
			else if (tty) {
				progress_line(verb, v, true);
				putchar('\n');
			}
			free(raw);
			*last = v;
			return 0;
		}
		if (json) {
			print_json(raw);
			fflush(stdout);
		} else if (tty || last_print < 0 ||
			   (double)now.tv_sec - last_print >= 5) {
			/* plain lines every 5 s: enough for a log file */
			progress_line(verb, v, tty);
			last_print = (double)now.tv_sec;
		}
		free(raw);
		jv_free(v);
		ts.tv_sec = 0;
		ts.tv_nsec = json ? 1000000000 - 1 : 500000000;
		nanosleep(&ts, NULL);
	}
}

/* ---- status ---- */

static void status_table(const struct jv *v)
{
	const struct jv *devs = jv_get(v, "devices"), *sc = jv_get(v, "scrub");
	char b1[32], b2[32], b3[32];
	int w = 6;

	printf("  fs: %s", jv_str(v, "fs_uuid", "?"));
	if (*jv_str(v, "label", ""))
		printf(" (\"%s\")", jv_str(v, "label", ""));
	printf("  format v%llu  backend %s\n", (unsigned long long)jv_u64(v, "format_version", 0),
	       jv_str(v, "backend", "?"));
	printf(" state: %s%s\n", jv_str(v, "state", "?"), jv_bool(v, "readonly", false) ?
	       " (read-only)" : "");
	printf(" space: %s used of %s, %s available; %llu inodes\n",
	       human(jv_num(v, "used_bytes", 0), b1, sizeof(b1)),
	       human(jv_num(v, "size_bytes", 0), b2, sizeof(b2)),
	       human(jv_num(v, "available_bytes", 0), b3, sizeof(b3)),
	       (unsigned long long)jv_u64(v, "inodes", 0));
	if (sc && strcmp(jv_str(sc, "state", "none"), "none")) {
		const char *st = jv_str(sc, "state", "?");

		if (!strcmp(st, "running"))
			printf(" scrub: running, %.1f%% done, %s/s, ETA %s\n", job_percent(sc),
			       human(jv_num(sc, "rate_bps", 0), b1, sizeof(b1)),
			       dur(jv_num(sc, "eta_s", -1), b2, sizeof(b2)));
		else
			printf(" scrub: %s; %llu bad copies, %llu repaired, %llu unrecoverable\n",
			       st, (unsigned long long)jv_u64(sc, "csum_errors", 0),
			       (unsigned long long)jv_u64(sc, "repaired", 0),
			       (unsigned long long)jv_u64(sc, "unrecoverable", 0));
	} else {
		printf(" scrub: never run\n");
	}
	/* How each device gives freed blocks back (said once, here). */
	printf(" discard:");
	for (const struct jv *d = devs ? devs->child : NULL; d; d = d->next)
		printf(" %s", jv_str(d, "discard", "?"));
	printf("\n");
	for (const struct jv *d = devs ? devs->child : NULL; d; d = d->next) {
		int n = (int)strlen(jv_str(d, "path", "(missing)"));

		if (n > w)
			w = n;
	}
	printf("\n  %-*s  %-10s %6s %6s %6s %6s %9s %8s\n", w, "DEVICE", "STATE", "READ", "WRITE",
	       "FLUSH", "CKSUM", "REPAIRED", "UNRECOV");
	for (const struct jv *d = devs ? devs->child : NULL; d; d = d->next)
		printf("  %-*s  %-10s %6llu %6llu %6llu %6llu %9llu %8llu\n", w,
		       jv_str(d, "path", "(missing)"), jv_str(d, "state", "?"),
		       (unsigned long long)jv_u64(d, "read_errors", 0),
		       (unsigned long long)jv_u64(d, "write_errors", 0),
		       (unsigned long long)jv_u64(d, "flush_errors", 0),
		       (unsigned long long)jv_u64(d, "csum_errors", 0),
		       (unsigned long long)jv_u64(d, "repaired", 0),
		       (unsigned long long)jv_u64(d, "unrecoverable", 0));
}

/* stats: every scalar as path: value, devices as the status table. */
static void flat_print(const struct jv *v, const char *prefix)
{
	for (const struct jv *c = v->child; c; c = c->next) {
		char path[256];

		snprintf(path, sizeof(path), "%s%s%s", prefix, *prefix ? "." : "",
			 c->key ? c->key : "?");
		switch (c->type) {
		case JV_OBJ:
			flat_print(c, path);
			break;
		case JV_ARR:
			if (!strcmp(path, "devices")) {
				int i = 0;

				for (const struct jv *d = c->child; d; d = d->next, i++) {
					char p2[64];

					snprintf(p2, sizeof(p2), "device%d", i);
					flat_print(d, p2);
				}
			} else {
				printf("%s: [%zu entries]\n", path, jv_len(c));
			}
			break;
		case JV_STR:
			printf("%s: %s\n", path, c->str);
			break;
		case JV_NUM:
			if (c->exact)
				printf("%s: %llu\n", path, (unsigned long long)c->u);
			else
				printf("%s: %g\n", path, c->num);
			break;
		case JV_BOOL:
			printf("%s: %s\n", path, c->b ? "yes" : "no");
			break;
		default:
			printf("%s: -\n", path);
		}
	}
}

/* ---- sync ---- */

/*
 * sync(1) and syncfs(2) write a FUSE mount's page cache back to the daemon
 * but never tell it to commit: the kernel sends FUSE_SYNCFS to virtiofs
 * only.  So: syncfs (every dirty page reaches the daemon and is on the
 * mirrors), then fsync of the root directory, which commits the daemon's
 * whole metadata log and flushes the devices.  Plain file system calls:
 * anyone who can open the mount point may run it.
 */
static int do_sync(const char *mnt)
{
	int fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0) {
		fprintf(stderr, "%s: %s: %s\n", prog, mnt, strerror(errno));
		return 1;
	}
	if (syncfs(fd) < 0 || fsync(fd) < 0) {
		fprintf(stderr, "%s: sync %s: %s\n", prog, mnt, strerror(errno));
		close(fd);
		return 1;
	}
	close(fd);
	return 0;
}

/* ---- main ---- */

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "wait", no_argument, NULL, 'w' },
		{ "rate", required_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool json = false, wait = false;
	const char *rate = NULL, *verb, *sub = NULL, *mnt;
	char cmd[TWINFS_CTL_MAX];
	char **pos;
	int npos, c, ret;
	struct jv *v = NULL;
	char *raw = NULL;

	while ((c = getopt_long(argc, argv, "jwr:h", lo, NULL)) != -1) {
		switch (c) {
		case 'j': json = true; break;
		case 'w': wait = true; break;
		case 'r': rate = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	pos = argv + optind;
	npos = argc - optind;
	if (npos < 2) {
		usage(stderr);
		return 2;
	}
	verb = pos[0];
	if ((!strcmp(verb, "scrub") || !strcmp(verb, "rebuild") || !strcmp(verb, "replace") ||
	     !strcmp(verb, "trim")) &&
	    (!strcmp(pos[1], "start") || !strcmp(pos[1], "status") || !strcmp(pos[1], "cancel"))) {
		sub = pos[1];
		pos += 2;
		npos -= 2;
	} else {
		pos += 1;
		npos -= 1;
	}
	if (npos < 1) {
		usage(stderr);
		return 2;
	}
	mnt = pos[0];
	pos++;
	npos--;

	if (!strcmp(verb, "sync")) {
		if (npos) {
			usage(stderr);
			return 2;
		}
		return do_sync(mnt);
	}
	if (!strcmp(verb, "status") || !strcmp(verb, "stats")) {
		if (npos) {
			usage(stderr);
			return 2;
		}
		ret = send_cmd(mnt, verb, &v, &raw);
		if (ret == 0) {
			if (json)
				print_json(raw);
			else if (!strcmp(verb, "status"))
				status_table(v);
			else
				flat_print(v, "");
		}
		goto out;
	}
	if (!strcmp(verb, "raw")) {
		if (npos != 1) {
			usage(stderr);
			return 2;
		}
		ret = send_cmd(mnt, pos[0], &v, &raw);
		if (raw)
			print_json(raw);
		goto out;
	}
	if (!strcmp(verb, "scrub")) {
		if (!sub || npos) {
			usage(stderr);
			return 2;
		}
		if (!strcmp(sub, "start"))
			snprintf(cmd, sizeof(cmd), "scrub start%s%s", rate ? " rate=" : "",
				 rate ? rate : "");
		else
			snprintf(cmd, sizeof(cmd), "scrub %s", sub);
	} else if (!strcmp(verb, "trim")) {
		if (npos || (sub && strcmp(sub, "status"))) {
			usage(stderr);
			return 2;
		}
		snprintf(cmd, sizeof(cmd), "%s", sub ? "trim status" : "trim");
	} else if (!strcmp(verb, "rebuild") || !strcmp(verb, "replace")) {
		if (sub) {
			if (npos) {
				usage(stderr);
				return 2;
			}
			snprintf(cmd, sizeof(cmd), "%s %s", verb, sub);
		} else {
			size_t len = (size_t)snprintf(cmd, sizeof(cmd), "%s", verb);
			int want = !strcmp(verb, "rebuild") ? 1 : 2;

			if (npos != want) {
				usage(stderr);
				return 2;
			}
			for (int i = 0; i < npos && len < sizeof(cmd); i++)
				len += (size_t)snprintf(cmd + len, sizeof(cmd) - len, " %s", pos[i]);
		}
	} else {
		fprintf(stderr, "%s: unknown command '%s'\n", prog, verb);
		usage(stderr);
		return 2;
	}

	ret = send_cmd(mnt, cmd, &v, &raw);
	if (ret < 0)
		goto out;
	if (sub && !strcmp(sub, "cancel")) {
		if (json)
			print_json(raw);
		else
			printf("%s canceled\n", verb);
		goto out;
	}
	if (wait) {
		jv_free(v);
		v = NULL;
		ret = wait_job(mnt, verb, json, &v);
		if (ret < 0)
			goto out;
	} else if (json) {
		print_json(raw);
		goto out;
	} else if (sub && !strcmp(sub, "start")) {
		printf("%s started\n", verb);
		goto out;
	} else if (!sub) {
		printf("%s started (follow with: %s %s status %s --wait)\n", verb, prog, verb, mnt);
		goto out;
	}
	if (!json) {
		if (!strcmp(verb, "scrub")) {
			if (job_running(v))
				progress_line("scrub", v, false);
			else
				scrub_summary(v);
		} else {
			char s[16];

			if (job_running(v))
				progress_line(verb, v, false);
			else
				printf("%s %s\n", verb, state_str(v, s, sizeof(s)));
			if (*jv_str(v, "error", ""))
				printf("  %s\n", jv_str(v, "error", ""));
		}
	}
	/* Unrecoverable blocks are a failure a script must notice. */
	if (jv_u64(v, "unrecoverable", 0) && !job_running(v))
		ret = -EIO;
out:
	jv_free(v);
	free(raw);
	return ret < 0 ? 1 : 0;
}
