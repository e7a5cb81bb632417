// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * twinfs-ctl: talk to a running twinfs daemon over its control channel
 * (lib/ctl.h: one ioctl on the mount's root) and show the replies to a
 * person: a ZFS-like device table for status, a progress bar (terminal) or
 * plain progress lines (pipe) for scrub/rebuild/replace, or the daemon's
 * JSON as is with --json.
 *
 * Exit status: 0 success, 1 the command failed (or a scrub/rebuild found
 * unrecoverable blocks), 2 usage.  status (and stats --prometheus) instead
 * say how the file system is, for monitors (zpool status -x): 0 healthy,
 * 1 degraded or damaged, 2 unusable or no daemon answering (status_health).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
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

/* State FAILED (lib/ctl.c ctl_state): a metadata change failed in memory. */
#define FAILED_WHY                                                                          \
	"a metadata change failed in the daemon; every change fails with EROFS and no "     \
	"checkpoint is written: unmount and mount again (the log replays every change "     \
	"acknowledged before the failure)"

static const char *prog = "twinfs-ctl";
static bool quiet;	/* send_cmd: no line for an {"error": ...} reply */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s COMMAND MNT [ARGS] [OPTIONS]\n"
		"  status MNT [--json]                 devices, states, error counters, space\n"
		"  status MNT -x|--check               one line: healthy, or what is wrong\n"
		"                                      (exit 0 healthy, 1 degraded, 2 unusable)\n"
		"  stats MNT [--json]                  counters and internals\n"
		"  stats MNT --prometheus              metrics in Prometheus text format\n"
		"  scrub start MNT [--rate N[KMG]] [--wait] [--json]\n"
		"  scrub status MNT [--wait] [--json]\n"
		"  scrub cancel MNT\n"
		"  rebuild MNT DEV [--wait]            bring a returning device back in sync\n"
		"  rebuild status MNT [--wait] [--json]\n"
		"  replace MNT OLD NEW [--force] [--wait]\n"
		"                                      copy everything onto a new device\n"
		"                                      (--force: even if NEW holds a file system)\n"
		"  replace status MNT [--wait] [--json]\n"
		"  trim MNT [--wait]                   discard all free space on every device\n"
		"  trim status MNT [--wait] [--json]\n"
		"  raw MNT 'COMMAND LINE'              send a command, print the JSON reply\n"
		"  sync MNT                            make everything written so far durable\n"
		"  clear MNT [DEV] [--json]            zero the error counters (every device, or DEV)\n"
		"DEV, OLD: slot number, device uuid or path; NEW: path.\n"
		"Only the user who mounted the file system and root may use it (sync: anyone).\n", prog);
}

/* ---- arguments ---- */

static bool is_slot_or_uuid(const char *a)
{
	size_t n = strspn(a, "0123456789");

	if (n && !a[n])
		return true;
	if (strlen(a) != 36)
		return false;
	for (int i = 0; i < 36; i++) {
		bool dash = i == 8 || i == 13 || i == 18 || i == 23;

		if (dash ? a[i] != '-' : !strchr("0123456789abcdefABCDEF", a[i]))
			return false;
	}
	return true;
}

/* A relative device path names a file from here, not from the daemon's
 * cwd (/ once it runs in the background): send it absolute.  Symlinks are
 * left for the daemon, which says where they lead. */
static int abs_arg(const char *a, char *out, size_t outlen)
{
	char cwd[PATH_MAX];
	int n;

	if (a[0] == '/' || is_slot_or_uuid(a)) {
		n = snprintf(out, outlen, "%s", a);
	} else {
		if (!getcwd(cwd, sizeof(cwd))) {
			fprintf(stderr, "%s: %s: cannot resolve from the current directory: %s\n",
				prog, a, strerror(errno));
			return -1;
		}
		n = snprintf(out, outlen, "%s/%s", strcmp(cwd, "/") ? cwd : "", a);
	}
	if (n < 0 || (size_t)n >= outlen) {
		fprintf(stderr, "%s: %s: path too long\n", prog, a);
		return -1;
	}
	if (strpbrk(out, " \t\n")) {
		fprintf(stderr, "%s: %s: paths with blanks cannot be sent to the daemon\n", prog,
			out);
		return -1;
	}
	return 0;
}

/* Is the FUSE mount at @mnt mounted with allow_other?  1 yes, 0 no, -1 not
 * found.  Read from mountinfo: stat() of the mount is what is refused. */
static int mount_allows_other(const char *mnt)
{
	char dir[PATH_MAX], base[PATH_MAX], real[PATH_MAX], want[2 * PATH_MAX + 2];
	char *slash, *line = NULL;
	size_t cap = 0;
	int found = -1;
	FILE *f;

	snprintf(dir, sizeof(dir), "%s", mnt);
	while ((slash = strrchr(dir, '/')) && slash != dir && !slash[1])
		*slash = '\0';		/* "mnt/" */
	slash = strrchr(dir, '/');
	snprintf(base, sizeof(base), "%s", slash ? slash + 1 : dir);
	if (slash)
		*slash = '\0';
	if (!realpath(!slash ? "." : *dir ? dir : "/", real))
		return -1;
	snprintf(want, sizeof(want), "%s%s%s", real, strcmp(real, "/") ? "/" : "", base);
	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -1;
	while (getline(&line, &cap, f) > 0) {
		/* id parent dev root MOUNTPOINT opts [tags] - FSTYPE SOURCE SUPEROPTS */
		char mp[PATH_MAX], fstype[64], src[PATH_MAX], sopts[1024];
		const char *dash = strstr(line, " - ");

		if (!dash || sscanf(line, "%*s %*s %*s %*s %4095s", mp) != 1 ||
		    sscanf(dash + 3, "%63s %4095s %1023s", fstype, src, sopts) != 3)
			continue;
		if (strcmp(mp, want) || strncmp(fstype, "fuse", 4))
			continue;
		/* the last mount on the point is the visible one */
		found = strstr(sopts, "allow_other") != NULL;
	}
	free(line);
	fclose(f);
	return found;
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
		else if (err == EACCES && geteuid() == 0 && mount_allows_other(mnt) == 0)
			/* Not the daemon: the kernel lets no one but the
			 * mounting user into a FUSE mount without allow_other. */
			fprintf(stderr, "%s: %s: permission denied: the mount lacks allow_other, "
				"and without it the kernel refuses root access to another user's "
				"FUSE mount (run as the user who mounted it, or mount with "
				"-o allow_other)\n", prog, mnt);
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
		if (!quiet || ret < 0)
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

/* The status line's words for the states that refuse every change. */
static const char *state_why(const char *state)
{
	if (!strcmp(state, "UNUSABLE"))
		return ": no device can take writes; every change fails with EROFS";
	if (!strcmp(state, "FAILED"))
		return ": " FAILED_WHY;
	return "";
}

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
	printf(" state: %s%s%s\n", jv_str(v, "state", "?"), jv_bool(v, "readonly", false) ?
	       " (read-only)" : "", state_why(jv_str(v, "state", "")));
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
	if (jv_get(v, "discard"))	/* given back so far: data, tree nodes */
		printf("; %s of data and %s of metadata discarded",
		       human(jv_num(jv_get(v, "discard"), "discarded_bytes", 0), b1, sizeof(b1)),
		       human(jv_num(jv_get(v, "discard"), "meta_bytes", 0), b2, sizeof(b2)));
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

/* ---- health (status exit code, -x) ---- */

enum { HEALTH_OK = 0, HEALTH_DEGRADED = 1, HEALTH_UNUSABLE = 2 };

/*
 * What a monitor needs from status: HEALTH_UNUSABLE when no device takes
 * writes, HEALTH_DEGRADED when a device is not ONLINE (missing, failed,
 * stale, rebuilding: redundancy is gone until a rebuild ends) or some block
 * has no good copy left (a device's unrecoverable counter: scrub counts
 * what it finds there too, and clear zeroes it), else HEALTH_OK.  Checksum and read errors that were repaired
 * are counted in the table but do not count as damage: the data still has
 * every copy.  @why gets one line.
 */
static int status_health(const struct jv *v, char *why, size_t n)
{
	const struct jv *devs = jv_get(v, "devices");
	uint64_t unrec = 0, writable = 0;
	size_t len = 0;
	int h = HEALTH_OK;

	why[0] = '\0';
	for (const struct jv *d = devs ? devs->child : NULL; d; d = d->next) {
		const char *st = jv_str(d, "state", "?");

		unrec += jv_u64(d, "unrecoverable", 0);
		if (!strcmp(st, "ONLINE")) {
			writable++;
			continue;
		}
		h = HEALTH_DEGRADED;
		if (len < n)
			len += (size_t)snprintf(why + len, n - len, "%sdevice %llu (%s) is %s",
						len ? "; " : "",
						(unsigned long long)jv_u64(d, "index", 0),
						jv_str(d, "path", "missing"), st);
	}
	writable = jv_u64(v, "writable_devices", writable);
	if (unrec) {
		h = HEALTH_DEGRADED;
		if (len < n)
			len += (size_t)snprintf(why + len, n - len, "%s%llu unrecoverable blocks "
						"(no copy verifies)", len ? "; " : "",
						(unsigned long long)unrec);
	}
	if (!writable || !strcmp(jv_str(v, "state", ""), "FAILED")) {
		char rest[512];

		snprintf(rest, sizeof(rest), "%s", why);
		snprintf(why, n, "unusable: %s%s%s", writable ? FAILED_WHY : "no device takes writes",
			 *rest ? "; " : "", rest);
		return HEALTH_UNUSABLE;
	}
	if (h == HEALTH_OK) {
		snprintf(why, n, "healthy");
	} else {
		char rest[512];

		snprintf(rest, sizeof(rest), "%s", why);
		snprintf(why, n, "degraded: %s", rest);
	}
	return h;
}

/* ---- Prometheus text exposition ---- */

/* A label value with \, " and newlines escaped (text format 0.0.4). */
static const char *prom_esc(const char *s, char *buf, size_t n)
{
	size_t k = 0;

	for (; s && *s && k + 3 < n; s++) {
		if (*s == '\\' || *s == '"') {
			buf[k++] = '\\';
			buf[k++] = *s;
		} else if (*s == '\n') {
			buf[k++] = '\\';
			buf[k++] = 'n';
		} else {
			buf[k++] = *s;
		}
	}
	buf[k] = '\0';
	return buf;
}

static void prom_head(const char *name, const char *type, const char *help)
{
	printf("# HELP twinfs_%s %s\n# TYPE twinfs_%s %s\n", name, help, name, type);
}

/* One sample; @labels is the text inside {} (never empty: mountpoint). */
static void prom_val(const char *name, const char *labels, double v)
{
	if (v == (double)(uint64_t)v && v < 1e19)
		printf("twinfs_%s{%s} %llu\n", name, labels, (unsigned long long)v);
	else
		printf("twinfs_%s{%s} %.6g\n", name, labels, v);
}

/* The same metric for every device, one sample each. */
static void prom_dev(const struct jv *devs, const char *base, const char *name,
		     const char *type, const char *help, const char *key)
{
	prom_head(name, type, help);
	for (const struct jv *d = devs ? devs->child : NULL; d; d = d->next) {
		char l[2 * PATH_MAX + 200], e[2 * PATH_MAX];

		snprintf(l, sizeof(l), "%s,device=\"%s\",slot=\"%llu\"", base,
			 prom_esc(jv_str(d, "path", ""), e, sizeof(e)),
			 (unsigned long long)jv_u64(d, "index", 0));
		prom_val(name, l, jv_num(d, key, 0));
	}
}

/* A metric read straight from one number of a reply. */
struct prom_metric {
	const char *name, *type, *help, *key;
};

/* Each of @n metrics, its sample the number at its key in @o (0 if absent). */
static void prom_table(const struct jv *o, const char *base, const struct prom_metric *m,
		       size_t n)
{
	for (size_t i = 0; i < n; i++) {
		prom_head(m[i].name, m[i].type, m[i].help);
		prom_val(m[i].name, base, jv_num(o, m[i].key, 0));
	}
}

#define PROM_TABLE(o, base, m) prom_table(o, base, m, sizeof(m) / sizeof((m)[0]))

static const struct prom_metric prom_space[] = {
	{ "size_bytes", "gauge", "Data area size.", "size_bytes" },
	{ "used_bytes", "gauge", "Bytes in use (data and metadata).", "used_bytes" },
	{ "free_bytes", "gauge", "Free bytes, the metadata reserve included.", "free_bytes" },
	{ "available_bytes", "gauge", "Bytes available to files (statfs f_bavail).",
	  "available_bytes" },
	{ "inodes", "gauge", "Inodes in use.", "inodes" },
};

static const struct prom_metric prom_scrub[] = {
	{ "scrub_bytes_done", "gauge", "Bytes verified by the current or last scrub.",
	  "scrub.bytes_done" },
	{ "scrub_bytes_total", "gauge", "Bytes the current or last scrub verifies.",
	  "scrub.bytes_total" },
	{ "scrub_csum_errors", "gauge", "Bad copies the current or last scrub found.",
	  "scrub.csum_errors" },
	{ "scrub_repaired", "gauge", "Bad copies the current or last scrub rewrote.",
	  "scrub.repaired" },
	{ "scrub_unrecoverable", "gauge",
	  "Blocks without a good copy found by the current or last scrub.",
	  "scrub.unrecoverable" },
};

static const struct prom_metric prom_rebuild[] = {
	{ "rebuild_bytes_done", "gauge", "Bytes copied by the current or last rebuild/replace.",
	  "bytes_done" },
	{ "rebuild_bytes_total", "gauge", "Bytes the current or last rebuild/replace copies.",
	  "bytes_total" },
};

static const struct prom_metric prom_log[] = {
	{ "log_records_total", "counter", "Metadata records appended to the log.",
	  "log.appends" },
	{ "log_errors_total", "counter", "Metadata log write errors.", "log.errors" },
	{ "log_space_waits_total", "counter", "Times a writer waited for log space.",
	  "log.space_waits" },
};

static const struct prom_metric prom_ckpt[] = {
	{ "checkpoint_generation", "gauge", "Generation of the last checkpoint.",
	  "checkpoint.generation" },
	{ "checkpoint_bytes", "gauge", "Size of the last checkpoint.", "checkpoint.bytes" },
	{ "checkpoints_total", "counter", "Checkpoints written since mount.",
	  "checkpoint.writes" },
	{ "checkpoint_written_bytes_total", "counter",
	  "Bytes checkpoints wrote since mount (one mirror's copy).", "checkpoint.written_bytes" },
	{ "deferred_free_bytes", "gauge", "Freed bytes waiting for a durable commit.",
	  "space.deferred_free_bytes" },
};

/*
 * Everything a dashboard or an alert rule wants, from status, stats and
 * rebuild status: for node_exporter's textfile collector (docs/prometheus/).
 * Names are twinfs_*, counters end in _total, bytes in _bytes; every
 * sample carries mountpoint and fs_uuid, per-device ones device and slot.
 */
static void prom_print(const char *mnt, const struct jv *st, const struct jv *sx,
		       const struct jv *rb, int health)
{
	static const char *const states[] = { "ONLINE", "MISSING", "FAILED", "STALE",
					      "REBUILDING" };
	static const struct { const char *name, *key, *help; } dc[] = {
		{ "device_read_errors_total", "read_errors", "Reads that failed on this device." },
		{ "device_write_errors_total", "write_errors", "Writes that failed on this device." },
		{ "device_flush_errors_total", "flush_errors", "Cache flushes that failed on this device." },
		{ "device_csum_errors_total", "csum_errors", "Blocks read from this device that did not verify." },
		{ "device_repaired_total", "repaired", "Bad copies on this device rewritten from a good one (read repairs and scrub)." },
		{ "device_unrecoverable_total", "unrecoverable", "Blocks no copy verified, counted on this device." },
	};
	const struct jv *devs = jv_get(st, "devices");
	char base[2 * PATH_MAX], e1[2 * PATH_MAX], e2[128], e3[200], l[3 * PATH_MAX];
	uint64_t commits = jv_u64(sx, "log.commits", 0);

	snprintf(base, sizeof(base), "mountpoint=\"%s\",fs_uuid=\"%s\"",
		 prom_esc(mnt, e1, sizeof(e1)), prom_esc(jv_str(st, "fs_uuid", ""), e2, sizeof(e2)));

	prom_head("info", "gauge", "Always 1; labels name the file system.");
	snprintf(l, sizeof(l), "%s,label=\"%s\",backend=\"%s\",format_version=\"%llu\"", base,
		 prom_esc(jv_str(st, "label", ""), e3, sizeof(e3)), jv_str(st, "backend", ""),
		 (unsigned long long)jv_u64(st, "format_version", 0));
	prom_val("info", l, 1);
	prom_head("health", "gauge",
		  "0 healthy, 1 degraded or damaged, 2 unusable (the status exit code).");
	prom_val("health", base, health);
	prom_head("writable_devices", "gauge", "Devices in sync that take writes.");
	prom_val("writable_devices", base, jv_num(st, "writable_devices", 0));
	prom_head("readonly", "gauge", "1 when mounted read-only.");
	prom_val("readonly", base, jv_bool(st, "readonly", false));

	prom_head("device_state", "gauge", "1 for the state the device is in, else 0.");
	for (const struct jv *d = devs ? devs->child : NULL; d; d = d->next) {
		for (size_t s = 0; s < sizeof(states) / sizeof(states[0]); s++) {
			snprintf(l, sizeof(l), "%s,device=\"%s\",slot=\"%llu\",state=\"%s\"", base,
				 prom_esc(jv_str(d, "path", ""), e1, sizeof(e1)),
				 (unsigned long long)jv_u64(d, "index", 0), states[s]);
			prom_val("device_state", l, !strcmp(jv_str(d, "state", ""), states[s]));
		}
	}
	for (size_t i = 0; i < sizeof(dc) / sizeof(dc[0]); i++)
		prom_dev(devs, base, dc[i].name, "counter", dc[i].help, dc[i].key);

	PROM_TABLE(st, base, prom_space);

	prom_head("scrub_running", "gauge", "1 while a scrub runs.");
	prom_val("scrub_running", base, !strcmp(jv_str(st, "scrub.state", ""), "running"));
	PROM_TABLE(st, base, prom_scrub);
	prom_head("scrub_last_finished_timestamp_seconds", "gauge",
		  "When the last scrub ended (0: never).");
	prom_val("scrub_last_finished_timestamp_seconds", base,
		 (double)(jv_u64(st, "scrub.finished_ns", 0) / 1000000000ull));

	prom_head("rebuild_running", "gauge", "1 while a rebuild or replace runs.");
	prom_val("rebuild_running", base, rb && !strcmp(jv_str(rb, "state", ""), "running"));
	PROM_TABLE(rb, base, prom_rebuild);	/* no reply: 0 */

	prom_head("log_commits_total", "counter", "Metadata log group commits.");
	prom_val("log_commits_total", base, (double)commits);
	PROM_TABLE(sx, base, prom_log);
	/* records per commit: the group-commit size, as sum and count */
	prom_head("log_group_commit_records", "summary", "Records per group commit.");
	prom_val("log_group_commit_records_sum", base, jv_num(sx, "log.appends", 0));
	prom_val("log_group_commit_records_count", base, (double)commits);
	PROM_TABLE(sx, base, prom_ckpt);
}

/* status and stats: one reply, or (--prometheus) the three a scrape needs.
 * Returns the exit status. */
static int do_status(const char *mnt, const char *verb, bool json, bool check, bool prom)
{
	struct jv *st = NULL, *sx = NULL, *rb = NULL;
	char *raw = NULL, why[1024];
	int ret, h;

	ret = send_cmd(mnt, prom ? "status" : verb, &st, &raw);
	if (ret < 0) {
		jv_free(st);
		free(raw);
		if (prom) {
			char e[2 * PATH_MAX];

			/* A scrape that finds no daemon says so as a metric. */
			prom_head("health", "gauge", "0 healthy, 1 degraded or damaged, 2 unusable "
				  "(the status exit code).");
			printf("twinfs_health{mountpoint=\"%s\"} 2\n", prom_esc(mnt, e, sizeof(e)));
		}
		if (check)
			printf("%s: unusable: no twinfs daemon answers\n", mnt);
		/* status is asked by monitors: no answer is the worst answer */
		return !strcmp(verb, "status") || prom ? HEALTH_UNUSABLE : 1;
	}
	h = HEALTH_OK;
	if (!strcmp(verb, "status") || prom)
		h = status_health(st, why, sizeof(why));
	if (prom) {
		ret = send_cmd(mnt, "stats", &sx, NULL);
		quiet = true;	/* a failed rebuild replies with "error" */
		send_cmd(mnt, "rebuild status", &rb, NULL);
		quiet = false;
		if (ret == 0)
			prom_print(mnt, st, sx, rb, h);
	} else if (check) {
		printf("%s: %s\n", mnt, why);
	} else if (json) {
		print_json(raw);
	} else if (!strcmp(verb, "status")) {
		status_table(st);
	} else {
		flat_print(st, "");
	}
	jv_free(st);
	jv_free(sx);
	jv_free(rb);
	free(raw);
	if (ret < 0)
		return 1;
	return h;
}

/* ---- clear ---- */

/* clear MNT [DEV]: one line per device with what was zeroed, then the
 * state.  Exit 0, or 1 when the daemon refused (printed by send_cmd). */
static int do_clear(const char *mnt, const char *dev, bool json)
{
	struct jv *v = NULL;
	char *raw = NULL, cmd[PATH_MAX + 16];
	int ret;

	if (dev) {
		char p[PATH_MAX];

		if (abs_arg(dev, p, sizeof(p)) < 0)	/* the daemon runs in / */
			return 1;
		snprintf(cmd, sizeof(cmd), "clear %s", p);
	} else {
		snprintf(cmd, sizeof(cmd), "clear");
	}
	ret = send_cmd(mnt, cmd, &v, &raw);
	if (ret == 0 && json) {
		print_json(raw);
	} else if (ret == 0) {
		const struct jv *c = jv_get(v, "cleared");

		for (c = c ? c->child : NULL; c; c = c->next)
			printf("cleared device %llu (%s): %llu checksum errors, %llu repaired, "
			       "%llu unrecoverable, %llu read, %llu write, %llu flush errors\n",
			       (unsigned long long)jv_u64(c, "index", 0), jv_str(c, "path", "missing"),
			       (unsigned long long)jv_u64(c, "csum_errors", 0),
			       (unsigned long long)jv_u64(c, "repaired", 0),
			       (unsigned long long)jv_u64(c, "unrecoverable", 0),
			       (unsigned long long)jv_u64(c, "read_errors", 0),
			       (unsigned long long)jv_u64(c, "write_errors", 0),
			       (unsigned long long)jv_u64(c, "flush_errors", 0));
		printf("state: %s\n", jv_str(v, "state", "?"));
	}
	jv_free(v);
	free(raw);
	return ret < 0 ? 1 : 0;
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

struct args {
	bool json, wait, force, check, prom;
	const char *rate, *verb, *sub, *mnt;
	char **pos;		/* what follows the mount point */
	int npos;
};

/*
 * The daemon command of a scrub, trim, rebuild or replace into @cmd.
 * 0, 2 (usage: printed) or 1 (an error: printed).  Device paths are made
 * absolute here: the daemon runs in /.
 */
static int job_cmd(const struct args *a, char *cmd, size_t n)
{
	size_t len;
	int want;

	if (!strcmp(a->verb, "scrub")) {
		if (!a->sub || a->npos)
			goto usage;
		if (!strcmp(a->sub, "start"))
			snprintf(cmd, n, "scrub start%s%s", a->rate ? " rate=" : "",
				 a->rate ? a->rate : "");
		else
			snprintf(cmd, n, "scrub %s", a->sub);
		return 0;
	}
	if (!strcmp(a->verb, "trim")) {
		if (a->npos || (a->sub && strcmp(a->sub, "status")))
			goto usage;
		snprintf(cmd, n, "%s", a->sub ? "trim status" : "trim");
		return 0;
	}
	if (strcmp(a->verb, "rebuild") && strcmp(a->verb, "replace")) {
		fprintf(stderr, "%s: unknown command '%s'\n", prog, a->verb);
		goto usage;
	}
	if (a->sub) {
		if (a->npos)
			goto usage;
		snprintf(cmd, n, "%s %s", a->verb, a->sub);
		return 0;
	}
	len = (size_t)snprintf(cmd, n, "%s", a->verb);
	want = !strcmp(a->verb, "rebuild") ? 1 : 2;
	if (a->npos != want || (a->force && want != 2))
		goto usage;
	for (int i = 0; i < a->npos && len < n; i++) {
		char p[PATH_MAX];

		if (abs_arg(a->pos[i], p, sizeof(p)) < 0)
			return 1;
		len += (size_t)snprintf(cmd + len, n - len, " %s", p);
	}
	if (a->force && len < n)
		len += (size_t)snprintf(cmd + len, n - len, " --force");
	if (len >= n) {
		fprintf(stderr, "%s: command too long\n", prog);
		return 1;
	}
	return 0;
usage:
	usage(stderr);
	return 2;
}

/* Send a job command and show its outcome (following it with --wait).
 * 0, or 1 when it failed or left unrecoverable blocks. */
static int run_job(const struct args *a, const char *cmd)
{
	struct jv *v = NULL;
	char *raw = NULL;
	int ret;

	ret = send_cmd(a->mnt, cmd, &v, &raw);
	if (ret < 0)
		goto out;
	if (a->sub && !strcmp(a->sub, "cancel")) {
		if (a->json)
			print_json(raw);
		else
			printf("%s canceled\n", a->verb);
		goto out;
	}
	if (a->wait) {
		jv_free(v);
		v = NULL;
		ret = wait_job(a->mnt, a->verb, a->json, &v);
		if (ret < 0)
			goto out;
	} else if (a->json) {
		print_json(raw);
		goto out;
	} else if (a->sub && !strcmp(a->sub, "start")) {
		printf("%s started\n", a->verb);
		goto out;
	} else if (!a->sub) {
		printf("%s started (follow with: %s %s status %s --wait)\n", a->verb, prog,
		       a->verb, a->mnt);
		goto out;
	}
	if (!a->json) {
		if (!strcmp(a->verb, "scrub")) {
			if (job_running(v))
				progress_line("scrub", v, false);
			else
				scrub_summary(v);
		} else {
			char s[16];

			if (job_running(v))
				progress_line(a->verb, v, false);
			else
				printf("%s %s\n", a->verb, state_str(v, s, sizeof(s)));
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

/* Options and positional words into @a: 0, or an exit code (help, usage). */
static int parse_args(int argc, char **argv, struct args *a)
{
	static const struct option lo[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "wait", no_argument, NULL, 'w' },
		{ "rate", required_argument, NULL, 'r' },
		{ "force", no_argument, NULL, 'f' },
		{ "check", no_argument, NULL, 'x' },
		{ "prometheus", no_argument, NULL, 'P' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char **pos;
	int npos, c;

	while ((c = getopt_long(argc, argv, "jwr:fhx", lo, NULL)) != -1) {
		switch (c) {
		case 'j': a->json = true; break;
		case 'x': a->check = true; break;
		case 'P': a->prom = true; break;
		case 'f': a->force = true; break;
		case 'w': a->wait = true; break;
		case 'r': a->rate = optarg; break;
		case 'h': usage(stdout); return -1;
		default: usage(stderr); return 2;
		}
	}
	pos = argv + optind;
	npos = argc - optind;
	if (npos < 2) {
		usage(stderr);
		return 2;
	}
	a->verb = pos[0];
	if ((!strcmp(a->verb, "scrub") || !strcmp(a->verb, "rebuild") ||
	     !strcmp(a->verb, "replace") || !strcmp(a->verb, "trim")) &&
	    (!strcmp(pos[1], "start") || !strcmp(pos[1], "status") || !strcmp(pos[1], "cancel"))) {
		a->sub = pos[1];
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
	a->mnt = pos[0];
	a->pos = pos + 1;
	a->npos = npos - 1;
	return 0;
}

int main(int argc, char **argv)
{
	struct args a = { 0 };
	char cmd[TWINFS_CTL_MAX];
	int ret;

	ret = parse_args(argc, argv, &a);
	if (ret)
		return ret < 0 ? 0 : ret;
	if (!strcmp(a.verb, "sync")) {
		if (a.npos) {
			usage(stderr);
			return 2;
		}
		return do_sync(a.mnt);
	}
	if (!strcmp(a.verb, "clear")) {
		if (a.npos > 1 || a.check || a.prom || a.wait || a.force || a.rate) {
			usage(stderr);
			return 2;
		}
		return do_clear(a.mnt, a.npos ? a.pos[0] : NULL, a.json);
	}
	if (!strcmp(a.verb, "status") || !strcmp(a.verb, "stats")) {
		if (a.npos || (a.check && (strcmp(a.verb, "status") || a.prom)) ||
		    (a.json && (a.check || a.prom))) {
			usage(stderr);
			return 2;
		}
		return do_status(a.mnt, a.verb, a.json, a.check, a.prom);
	}
	if (a.check || a.prom) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(a.verb, "raw")) {
		struct jv *v = NULL;
		char *raw = NULL;

		if (a.npos != 1) {
			usage(stderr);
			return 2;
		}
		ret = send_cmd(a.mnt, a.pos[0], &v, &raw);
		if (raw)
			print_json(raw);
		jv_free(v);
		free(raw);
		return ret < 0 ? 1 : 0;
	}
	ret = job_cmd(&a, cmd, sizeof(cmd));
	if (ret)
		return ret;
	return run_job(&a, cmd);
}
