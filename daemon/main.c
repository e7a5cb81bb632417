// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * main: the twinfs daemon's command line, process lifecycle and logging.
 *
 *   twinfs [-f] [-d] [-s] [-o opt,...] DEV1[:DEV2[:DEV3]] MOUNTPOINT
 *
 * (also the mount.fuse3 form, which adds generic options such as rw,
 * nodev, noatime).  Without -f the process forks before tfs_mount starts
 * any thread; the parent waits on a pipe for the child's "mounted" or its
 * one-line error and exits 0 or 1 with it, so scripts see mount errors.
 * The child mounts, serves until a signal or an unmount ends the session,
 * and then writes the final checkpoint (tfs_unmount) whichever way the
 * session ended.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fuse_lowlevel.h>

#include "ctl.h"
#include "daemon_i.h"
#include "dev.h"
#include "event.h"

#define DEVS_MAX 8		/* lib's DEV_MAX; lib checks the real limit */
#define THREADS_DEFAULT 4
#define THREADS_MAX 10000	/* libfuse's FUSE_LOOP_MT_MAX_THREADS */
#define COMMIT_MAX_MS 3600000u	/* an hour: beyond that nothing is ever committed in time */
#define EVENT_TIMEOUT_MAX_S 3600u
#define BUFS_MAX 4096u		/* 1 MiB each */
/* -o direct_writers (ops.c big_writer): above any small file tar or a
 * database journal writes, below what a bulk writer lays out. */
#define TFSD_DIRECT_WRITERS_DEFAULT (64ull << 20)
#define TFSD_DIRECT_WRITERS_TEXT "64M"
#define MSG_MOUNTED "mounted"

/* ---- logging ---- */

/* Written before the session loop starts, read-only after. */
static bool log_syslog;		/* background mode after startup */
static bool log_debug;		/* -d */

static void vtlog(int level, const char *fmt, va_list ap)
{
	if (level == LOG_DEBUG && !log_debug)
		return;
	if (log_syslog) {
		vsyslog(level, fmt, ap);
		return;
	}
	flockfile(stderr);
	fputs("twinfs: ", stderr);
	if (level <= LOG_ERR)
		fputs("error: ", stderr);
	else if (level == LOG_WARNING)
		fputs("warning: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	funlockfile(stderr);
}

void tlog(int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vtlog(level, fmt, ap);
	va_end(ap);
}

/* libfuse's messages (and -d traces) go where ours go.  libfuse builds
 * some lines from several calls, so collect up to the newline. */
static void fuse_log_cb(enum fuse_log_level level, const char *fmt, va_list ap)
{
	static __thread char line[1024];
	static __thread size_t len;
	int n;

	n = vsnprintf(line + len, sizeof(line) - len, fmt, ap);
	if (n < 0)
		return;
	len += (size_t)n;
	if (len >= sizeof(line) - 1)
		len = sizeof(line) - 1;		/* truncated: flush as is */
	else if (len && line[len - 1] != '\n')
		return;
	while (len && line[len - 1] == '\n')
		len--;
	line[len] = '\0';
	len = 0;
	tlog((int)level, "%s", line);
}

/* ---- options ---- */

struct cfg {
	char *devs;		/* first positional argument */
	char *mountpoint;	/* second */
	char *backend;
	char *fault;
	int degraded;
	int rescue;
	int norecovery;
	int writethrough;
	int writeback_cache;
	int nodiscard;
	int noacl;
	int nokillpriv;
	int readtoken;
	int compact_dirty;
	int lazyreplay;
	int uring;
	char *transport;
	/* Numbers arrive as text and are checked by parse_num: "%u" would
	 * take -1 as 4294967295 and a typo as a multi-line usage error. */
	char *commit_ms;
	char *threads;
	char *bufs;
	char *space_reserve;
	char *direct_writers;
	char *cache;
	char *ckpt_log;
	char *format;		/* -o format=1: a (deprecated) format 1 image mounts */
	char *event_cmd;
	char *event_timeout;
	int help;
	int version;
};

enum { KEY_HELP, KEY_VERSION };

#define CFG_OPT(t, field, v) { t, offsetof(struct cfg, field), v }

static const struct fuse_opt cfg_opts[] = {
	CFG_OPT("degraded", degraded, 1),
	CFG_OPT("rescue", rescue, 1),
	CFG_OPT("norecovery", norecovery, 1),
	CFG_OPT("backend=%s", backend, 0),
	CFG_OPT("fault=%s", fault, 0),
	CFG_OPT("writethrough", writethrough, 1),
	CFG_OPT("writeback_cache", writeback_cache, 1),
	CFG_OPT("no_writeback_cache", writeback_cache, 0),
	CFG_OPT("discard", nodiscard, 0),
	CFG_OPT("nodiscard", nodiscard, 1),
	CFG_OPT("acl", noacl, 0),
	CFG_OPT("noacl", noacl, 1),
	CFG_OPT("killpriv_v2", nokillpriv, 0),
	CFG_OPT("nokillpriv_v2", nokillpriv, 1),
	CFG_OPT("readtoken", readtoken, 1),
	CFG_OPT("noreadtoken", readtoken, 0),
	CFG_OPT("uring", uring, 1),
	CFG_OPT("transport=%s", transport, 0),
	CFG_OPT("commit=%s", commit_ms, 0),
	CFG_OPT("threads=%s", threads, 0),
	CFG_OPT("bufs=%s", bufs, 0),
	CFG_OPT("space_reserve=%s", space_reserve, 0),
	CFG_OPT("direct_writers=%s", direct_writers, 0),
	CFG_OPT("cache=%s", cache, 0),
	CFG_OPT("ckpt_log=%s", ckpt_log, 0),
	CFG_OPT("compact_dirty", compact_dirty, 1),
	CFG_OPT("nocompact_dirty", compact_dirty, 0),
	CFG_OPT("lazyreplay", lazyreplay, 1),
	CFG_OPT("nolazyreplay", lazyreplay, 0),
	CFG_OPT("format=%s", format, 0),
	CFG_OPT("event_cmd=%s", event_cmd, 0),
	CFG_OPT("event_timeout=%s", event_timeout, 0),
	FUSE_OPT_KEY("-h", KEY_HELP),
	FUSE_OPT_KEY("--help", KEY_HELP),
	FUSE_OPT_KEY("-V", KEY_VERSION),
	FUSE_OPT_KEY("--version", KEY_VERSION),
	/* Generic mount(8)/fstab options libfuse does not take; they mean
	 * nothing to us (relatime and friends are the kernel's default). */
	FUSE_OPT_KEY("defaults", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("auto", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("noauto", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("user", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("nouser", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("users", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("nofail", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("_netdev", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("atime", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("diratime", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("nodiratime", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("norelatime", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("nostrictatime", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("relatime", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("strictatime", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("lazytime", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("nolazytime", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("iversion", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("noiversion", FUSE_OPT_KEY_DISCARD),
	/* fuse2's; fuse3 mounts on non-empty directories anyway. */
	FUSE_OPT_KEY("nonempty", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_END
};

static int cfg_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	struct cfg *c = data;

	switch (key) {
	case KEY_HELP:
		c->help = 1;
		return 0;
	case KEY_VERSION:
		c->version = 1;
		return 0;
	case FUSE_OPT_KEY_NONOPT:
		/* Both positionals are ours: fuse_parse_cmdline would
		 * realpath() the mountpoint and reject a second one. */
		if (!c->devs)
			return (c->devs = strdup(arg)) ? 0 : -1;
		if (!c->mountpoint)
			return (c->mountpoint = strdup(arg)) ? 0 : -1;
		fprintf(stderr, "twinfs: unexpected argument '%s'\n", arg);
		return -1;
	case FUSE_OPT_KEY_OPT:
		/* fstab comments and userspace-only options (x-systemd.*). */
		if (!strncmp(arg, "x-", 2) || !strncmp(arg, "comment=", 8))
			return 0;
		return 1;
	}
	return 1;
}

/*
 * -o transport=dev|uring|auto (-o uring: transport=uring).  auto takes the
 * ring only where the kernel has it on, and never fails the mount for it:
 * off, or absent, means /dev/fuse as before.
 */
static int pick_transport(struct tfsd *d, const struct cfg *cfg)
{
	const char *t = cfg->transport ? cfg->transport : cfg->uring ? "uring" : "dev";

	if (cfg->uring && strcmp(t, "uring") != 0) {
		fprintf(stderr, "twinfs: -o uring and transport=%s disagree: give one of them\n", t);
		return -1;
	}
	if (strcmp(t, "dev") == 0) {
		d->uring = TFSD_TRANSPORT_DEV;
	} else if (strcmp(t, "uring") == 0) {
		d->uring = TFSD_TRANSPORT_URING;
	} else if (strcmp(t, "auto") == 0) {
		d->uring = tfsd_uring_check(true) == 0 ? TFSD_TRANSPORT_URING
						       : TFSD_TRANSPORT_DEV;
		if (d->uring == TFSD_TRANSPORT_DEV)
			tlog(LOG_INFO, "transport=auto: FUSE over io_uring is off or absent in "
			     "this kernel; requests go over /dev/fuse");
	} else {
		fprintf(stderr, "twinfs: transport=%s: expected dev, uring or auto\n", t);
		return -1;
	}
	return 0;
}

static void usage(FILE *out, const char *prog)
{
	fprintf(out,
		"usage: %s [-f] [-d] [-s] [-o opt,...] DEV1[:DEV2[:DEV3]] MOUNTPOINT\n"
		"\n"
		"twinfs options:\n"
		"    -o degraded            mount with a device missing\n"
		"    -o rescue              metadata damaged on every device: mount read-only\n"
		"                           what can be recovered (writes nothing)\n"
		"    -o norecovery          mount read-only without replaying the metadata\n"
		"                           log: as the last checkpoint left it (writes nothing)\n"
		"    -o backend=NAME        device I/O: auto (default), uring, aio, file\n"
		"    -o fault=SPEC          inject device faults (testing)\n"
		"    -o writethrough        every open is direct I/O with parallel writes\n"
		"    -o writeback_cache     let the kernel cache writes (default)\n"
		"    -o no_writeback_cache  write through the page cache, one request per write\n"
		"    -o discard             discard freed blocks on every device (default)\n"
		"    -o nodiscard           keep freed blocks allocated (twinfs-ctl trim frees them)\n"
		"    -o acl                 POSIX ACLs (default): setfacl/getfacl, default ACLs\n"
		"                           inherited at create\n"
		"    -o noacl               no POSIX ACLs (system.posix_acl_* is EOPNOTSUPP)\n"
		"    -o nokillpriv_v2       do not ask for FUSE_HANDLE_KILLPRIV_V2: the kernel\n"
		"                           clears suid/sgid/capabilities, asking for\n"
		"                           security.capability before every write(2)\n"
		"    -o readtoken           one worker at a time reads /dev/fuse, kept across\n"
		"                           READs (off by default; README \"Reads\")\n"
		"    -o noreadtoken         every worker reads /dev/fuse at once (default)\n"
		"    -o transport=NAME      how requests arrive: dev (default: read/write on\n"
		"                           /dev/fuse), uring (FUSE-over-io_uring, kernel 6.14+\n"
		"                           with /sys/module/fuse/parameters/enable_uring set),\n"
		"                           auto (uring where the kernel allows it, else dev)\n"
		"    -o uring               transport=uring\n"
		"    -o commit=MS           background commit interval, 1..%u (default 5000)\n"
		"    -o space_reserve=SIZE  below this much free space, writes reach the\n"
		"                           devices before write(2) returns (default: what\n"
		"                           the kernel may cache for this mount, plus 20M)\n"
		"    -o direct_writers=SIZE writable opens of files at least SIZE long are\n"
		"                           direct I/O (default " TFSD_DIRECT_WRITERS_TEXT ", 0: off)\n"
		"    -o cache=SIZE          format v2: node cache and resident inodes together\n"
		"                           (default 256M, at least 4M; format 1 ignores it)\n"
		"    -o nocompact_dirty     format v2: changed map leaves stay whole until\n"
		"                           their checkpoint (the default keeps unused ones\n"
		"                           compact: fewer checkpoint bytes under random writes)\n"
		"    -o nolazyreplay        format v2: the mount after a crash writes its\n"
		"                           checkpoint before it serves (the default keeps the\n"
		"                           replayed extent records pending and serves at once,\n"
		"                           the log continuing; the next checkpoint applies them)\n"
		"    -o ckpt_log=SIZE       checkpoint once the log since the last one passes\n"
		"                           SIZE (default: half the log): bounds the replay of\n"
		"                           the mount after a crash\n"
		"    -o format=1            mount a format 1 file system (deprecated: to copy\n"
		"                           its files to a new one); format=2 is the default\n"
		"    -o threads=N           max worker threads, 1..%u (default %u)\n"
		"    -o bufs=N              bounce buffers, 1..%u (default: lib's)\n"
		"    -o event_cmd=PATH      run PATH (absolute) for every event (device failed...)\n"
		"    -o event_timeout=S     kill an event command after S s, 1..%u (default %u)\n"
		"    -o allow_other, -o allow_root\n",
		prog, COMMIT_MAX_MS, THREADS_MAX, THREADS_DEFAULT, BUFS_MAX, EVENT_TIMEOUT_MAX_S,
		EVENT_TIMEOUT_DEFAULT_S);
}

/* -o NAME=TEXT must be a decimal number in [min, max]: one line and -1
 * otherwise.  An absent option leaves *out alone. */
static int parse_num(const char *name, const char *text, unsigned min, unsigned max,
		     unsigned *out)
{
	unsigned long long v = 0;
	const char *p = text;

	if (!text)
		return 0;
	for (; *p >= '0' && *p <= '9'; p++) {
		v = v * 10 + (unsigned)(*p - '0');
		if (v > max)
			break;
	}
	if (!*text || *p || v < min || v > max) {
		fprintf(stderr, "twinfs: -o %s=%s: must be a number from %u to %u\n", name, text,
			min, max);
		return -1;
	}
	*out = (unsigned)v;
	return 0;
}

/* -o event_cmd=PATH: absolute (the daemon runs it from /, long after the
 * shell that mounted is gone) and executable now, or one line and -1. */
static int check_event_cmd(const char *cmd)
{
	if (!cmd)
		return 0;
	if (cmd[0] != '/') {
		fprintf(stderr, "twinfs: -o event_cmd=%s: must be an absolute path\n", cmd);
		return -1;
	}
	if (access(cmd, X_OK) < 0) {
		fprintf(stderr, "twinfs: -o event_cmd=%s: %s\n", cmd, strerror(errno));
		return -1;
	}
	return 0;
}

/* Device paths as absolute, resolved paths: the daemon works in / once in
 * the background, and later commands (twinfs-ctl rebuild) and messages
 * must still name the same files.  Relative to our cwd, the caller's.
 * 0 or -1 (printed). */
static int abs_devs(const char *devs[], int n, char store[][PATH_MAX])
{
	for (int i = 0; i < n; i++) {
		int ret = dev_abspath(devs[i], store[i], PATH_MAX);

		if (ret < 0) {
			fprintf(stderr, "twinfs: %s: %s\n", devs[i], strerror(-ret));
			return -1;
		}
		devs[i] = store[i];
	}
	return 0;
}

/* Split "a:b:c" in place into devs[]; the count, or -1 on an empty part
 * or too many. */
static int split_devs(char *s, const char *devs[DEVS_MAX])
{
	int n = 0;
	char *save = NULL, *tok;

	if (!*s || s[0] == ':' || s[strlen(s) - 1] == ':' || strstr(s, "::"))
		return -1;
	for (tok = strtok_r(s, ":", &save); tok; tok = strtok_r(NULL, ":", &save)) {
		if (n == DEVS_MAX)
			return -1;
		devs[n++] = tok;
	}
	return n;
}

/* Is @path (absolute, resolved) already a twinfs mount point? */
static bool twinfs_mounted_at(const char *path)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0;
	bool found = false;

	if (!f)
		return false;
	while (!found && getline(&line, &cap, f) > 0) {
		/* id parent dev root MOUNTPOINT opts [tags] - FSTYPE ... */
		char mnt[PATH_MAX], fstype[64];
		const char *dash = strstr(line, " - ");
		char *o = mnt;

		if (!dash || sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1 ||
		    sscanf(dash + 3, "%63s", fstype) != 1)
			continue;
		/* undo the octal escapes of spaces, tabs, backslashes */
		for (const char *p = mnt; *p; p++) {
			if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] && p[3]) {
				*o++ = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
				p += 3;
			} else {
				*o++ = *p;
			}
		}
		*o = '\0';
		found = !strcmp(mnt, path) && !strcmp(fstype, "fuse.twinfs");
	}
	free(line);
	fclose(f);
	return found;
}

/* libfuse opens /dev/fuse only after tfs_mount has opened and replayed the
 * devices, and then prints its own line before our "cannot mount".  An
 * ordinary user meets a root-only /dev/fuse first (0600 on some machines),
 * so say it once, up front, with the usual fix.  0 or -1 (printed). */
static int check_fuse_dev(void)
{
	int fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);

	if (fd >= 0) {
		close(fd);
		return 0;
	}
	if (errno == ENOENT || errno == ENODEV || errno == ENXIO)
		tlog(LOG_ERR, "cannot open /dev/fuse: %s (is the fuse module loaded? modprobe fuse)",
		     strerror(errno));
	else
		tlog(LOG_ERR, "cannot open /dev/fuse: %s (is the fuse group / mode right? "
		     "it is usually crw-rw-rw-)", strerror(errno));
	return -1;
}

/* Resolve and check the mount point before anything starts, so the common
 * mistakes get one clear line.  0 or -1 (printed). */
static int check_mountpoint(const char *mnt, char *resolved)
{
	struct stat st;
	unsigned fd;
	char c;

	/* The fd passed by a parent that mounted for us: libfuse's business. */
	if (sscanf(mnt, "/dev/fd/%u%c", &fd, &c) == 1) {
		strcpy(resolved, mnt);
		return 0;
	}
	if (check_fuse_dev() < 0)
		return -1;
	if (stat(mnt, &st) < 0 || !realpath(mnt, resolved)) {
		tlog(LOG_ERR, "mountpoint %s: %s", mnt, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		tlog(LOG_ERR, "mountpoint %s is not a directory", mnt);
		return -1;
	}
	if (twinfs_mounted_at(resolved)) {
		tlog(LOG_ERR, "mountpoint %s is busy: twinfs is already mounted there", mnt);
		return -1;
	}
	return 0;
}

/* ---- startup handshake ---- */

/* Background parent: wait for the child's one line.  Returns the exit code. */
static int parent_wait(int fd, pid_t child)
{
	char msg[1024];
	size_t n = 0;
	ssize_t r;
	int status;

	while (n < sizeof(msg) - 1) {
		r = read(fd, msg + n, sizeof(msg) - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
		if (memchr(msg, '\n', n))
			break;
	}
	msg[n] = '\0';
	msg[strcspn(msg, "\n")] = '\0';
	close(fd);
	if (!strcmp(msg, MSG_MOUNTED))
		return 0;
	if (n) {
		fprintf(stderr, "twinfs: %s\n", msg);
		return 1;
	}
	/* The child died without a word. */
	if (waitpid(child, &status, 0) == child && WIFSIGNALED(status))
		fprintf(stderr, "twinfs: daemon killed by signal %d during startup\n",
			WTERMSIG(status));
	else
		fprintf(stderr, "twinfs: daemon exited during startup\n");
	return 1;
}

/* Child: tell the waiting parent (if any) how startup went; msg NULL means
 * mounted.  In the foreground errors are simply logged. */
static void startup_report(int *fd, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	size_t len;

	if (fmt) {
		va_start(ap, fmt);
		vsnprintf(msg, sizeof(msg), fmt, ap);
		va_end(ap);
	} else {
		snprintf(msg, sizeof(msg), "%s", MSG_MOUNTED);
	}
	if (*fd < 0) {
		if (fmt)
			tlog(LOG_ERR, "%s", msg);
		return;
	}
	len = strlen(msg);
	msg[len++] = '\n';
	if (write(*fd, msg, len) != (ssize_t)len && fmt)
		tlog(LOG_ERR, "%s", msg);
	close(*fd);
	*fd = -1;
}

/* After a background mount: nothing holds the terminal, logs go to syslog. */
static void detach_stdio(void)
{
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);

	if (fd >= 0) {
		dup2(fd, STDIN_FILENO);
		dup2(fd, STDOUT_FILENO);
		dup2(fd, STDERR_FILENO);
		if (fd > STDERR_FILENO)
			close(fd);
	}
	log_syslog = true;
	if (chdir("/") < 0)
		tlog(LOG_WARNING, "chdir /: %s", strerror(errno));
}

static int serve(struct fuse_session *se, const struct fuse_cmdline_opts *cmd, unsigned threads,
		 bool readtoken)
{
	unsigned idle = cmd->max_idle_threads != UINT_MAX ? cmd->max_idle_threads : threads;

	struct fuse_loop_config *lc;
	int ret;

	if (cmd->singlethread)
		return fuse_session_loop(se);
	lc = fuse_loop_cfg_create();
	if (!lc)
		return -ENOMEM;
	/* One /dev/fuse fd per worker: no contention on a single read. */
	fuse_loop_cfg_set_clone_fd(lc, 1);
	fuse_loop_cfg_set_max_threads(lc, threads);
	/* Keep idle workers: creating threads per burst costs more.  With
	 * the reader token every worker stays: libfuse ends a worker beyond
	 * max_idle_threads when it comes back from a request, and one that
	 * kept the token after a READ would take it along (a review hung a
	 * mount so with max_idle_threads=1). */
	if (readtoken && idle < threads) {
		tlog(LOG_WARNING, "max_idle_threads=%u raised to threads=%u: readtoken keeps every "
		     "worker", idle, threads);
		idle = threads;
	}
	fuse_loop_cfg_set_idle_threads(lc, idle);
	ret = fuse_session_loop_mt(se, lc);
	fuse_loop_cfg_destroy(lc);
	return ret;
}

/* Add the options we always pass, ahead of the user's so theirs win. */
static int add_fixed_opts(struct fuse_args *args, const char *devs, bool ro)
{
	char *o = NULL, *fsname = NULL;
	int ret = -1;

	if (asprintf(&fsname, "fsname=%s", devs) < 0)
		return -1;
	if ((!ro || fuse_opt_add_opt(&o, "ro") == 0) &&
	    fuse_opt_add_opt(&o, "default_permissions") == 0 &&
	    fuse_opt_add_opt(&o, "subtype=twinfs") == 0 &&
	    fuse_opt_add_opt_escaped(&o, fsname) == 0 &&
	    fuse_opt_insert_arg(args, 1, "-o") == 0 &&
	    fuse_opt_insert_arg(args, 2, o) == 0)
		ret = 0;
	free(o);
	free(fsname);
	return ret;
}

/* What main parses from its arguments and hands from phase to phase. */
struct startup {
	struct cfg cfg;
	struct fuse_cmdline_opts cmd;
	unsigned threads, commit_ms, bufs, event_timeout;
	uint64_t cache_bytes;	/* -o cache= (0: the default) */
	uint64_t ckpt_log_bytes;	/* -o ckpt_log= (0: half the log) */
	const char *devs[DEVS_MAX];
	int ndevs;
	char *devlist;		/* the device list as given, for messages */
	char mnt[PATH_MAX];	/* the mountpoint, resolved */
	int report_fd;		/* to the waiting parent; -1: none */
};

/* Every option and argument, into s and d.  Returns -1 to go on, or the
 * exit code (help or version shown, or an error, with usage if it is
 * one). */
static int parse_args(struct fuse_args *args, const char *prog, struct startup *s,
		      struct tfsd *d)
{
	static char abs_store[DEVS_MAX][PATH_MAX];
	struct cfg *cfg = &s->cfg;

	cfg->compact_dirty = 1;		/* the defaults; nocompact_dirty, nolazyreplay */
	cfg->lazyreplay = 1;
	if (fuse_opt_parse(args, cfg, cfg_opts, cfg_proc) < 0)
		goto out_usage;
	/* Before fuse_parse_cmdline, which adds subtype=<program name>
	 * unless it sees a subtype or fsname. */
	if (cfg->devs && add_fixed_opts(args, cfg->devs, cfg->rescue || cfg->norecovery) < 0)
		return 1;
	if (fuse_parse_cmdline(args, &s->cmd) < 0)
		goto out_usage;
	if (cfg->help || s->cmd.show_help) {
		usage(stdout, prog);
		printf("\nFUSE options:\n");
		fuse_cmdline_help();
		fuse_lowlevel_help();
		return 0;
	}
	if (cfg->version || s->cmd.show_version) {
		printf("twinfs %s\nFUSE library version %s\n", TWINFS_VERSION,
		       fuse_pkgversion());
		return 0;
	}
	if (!cfg->devs || !cfg->mountpoint)
		goto out_usage;
	s->devlist = strdup(cfg->devs);	/* split_devs cuts cfg->devs */
	s->ndevs = s->devlist ? split_devs(cfg->devs, s->devs) : -1;
	if (s->ndevs < 0) {
		fprintf(stderr, "twinfs: bad device list '%s'\n", cfg->devs);
		goto out_usage;
	}
	if (parse_num("threads", cfg->threads, 1, THREADS_MAX, &s->threads) < 0 ||
	    parse_num("commit", cfg->commit_ms, 1, COMMIT_MAX_MS, &s->commit_ms) < 0 ||
	    parse_num("bufs", cfg->bufs, 1, BUFS_MAX, &s->bufs) < 0 ||
	    parse_num("event_timeout", cfg->event_timeout, 1, EVENT_TIMEOUT_MAX_S,
		      &s->event_timeout) < 0 || check_event_cmd(cfg->event_cmd) < 0)
		return 2;
	if (abs_devs(s->devs, s->ndevs, abs_store) < 0)
		return 1;
	log_debug = s->cmd.debug;
	d->writethrough = cfg->writethrough;
	d->no_killpriv = cfg->nokillpriv;
	d->no_readtoken = !cfg->readtoken;
	if (pick_transport(d, cfg) < 0)
		return 2;
	if (d->uring == TFSD_TRANSPORT_URING && tfsd_uring_check(false) < 0)
		return 1;
	/* With writethrough every open is direct: the page cache holds no file
	 * data, and a writeback cache would only make the kernel keep its own
	 * mtime, which direct writes do not advance. */
	d->writeback_cache = cfg->writeback_cache && !cfg->writethrough;
	d->acl = !cfg->noacl;
	if (cfg->space_reserve && (ctl_parse_size(cfg->space_reserve, &d->space_reserve_opt) < 0 ||
				   !d->space_reserve_opt)) {
		fprintf(stderr, "twinfs: space_reserve=%s: expected a size such as 64M or 1G\n",
			cfg->space_reserve);
		goto out_usage;
	}
	d->direct_writers = TFSD_DIRECT_WRITERS_DEFAULT;
	if (cfg->direct_writers && ctl_parse_size(cfg->direct_writers, &d->direct_writers) < 0) {
		fprintf(stderr, "twinfs: direct_writers=%s: expected a size such as 64M, or 0\n",
			cfg->direct_writers);
		return 2;
	}
	if (cfg->cache && (ctl_parse_size(cfg->cache, &s->cache_bytes) < 0 ||
			   s->cache_bytes < (4ull << 20))) {
		fprintf(stderr, "twinfs: cache=%s: expected a size of at least 4M, such as 64M "
			"or 1G\n", cfg->cache);
		return 2;
	}
	if (cfg->ckpt_log && (ctl_parse_size(cfg->ckpt_log, &s->ckpt_log_bytes) < 0 ||
			      s->ckpt_log_bytes < (1ull << 20))) {
		fprintf(stderr, "twinfs: ckpt_log=%s: expected a size of at least 1M, such as "
			"32M\n", cfg->ckpt_log);
		return 2;
	}
	if (cfg->format && strcmp(cfg->format, "1") && strcmp(cfg->format, "2")) {
		fprintf(stderr, "twinfs: format=%s: expected 1 or 2\n", cfg->format);
		return 2;
	}
	tfsd_files_init(d);
	return -1;

out_usage:
	usage(stderr, prog);
	return 2;
}

static void free_cfg(struct cfg *cfg)
{
	free(cfg->devs);
	free(cfg->mountpoint);
	free(cfg->backend);
	free(cfg->fault);
	free(cfg->commit_ms);
	free(cfg->threads);
	free(cfg->bufs);
	free(cfg->format);
	free(cfg->space_reserve);
	free(cfg->direct_writers);
	free(cfg->event_cmd);
	free(cfg->event_timeout);
	free(cfg->transport);
	free(cfg->cache);
	free(cfg->ckpt_log);
}

/* Fork: the parent waits for the child's startup line and exits with
 * *exit_code (1 here too when the fork fails); the child, with
 * s->report_fd set, goes on.  Returns 0 in the child, -1 in the parent. */
static int go_background(struct startup *s, int *exit_code)
{
	int pfd[2];
	pid_t pid;

	if (pipe2(pfd, O_CLOEXEC) < 0) {
		tlog(LOG_ERR, "pipe: %s", strerror(errno));
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		tlog(LOG_ERR, "fork: %s", strerror(errno));
		close(pfd[0]);
		close(pfd[1]);
		return -1;
	}
	if (pid > 0) {
		close(pfd[1]);
		*exit_code = parent_wait(pfd[0], pid);
		return -1;
	}
	close(pfd[0]);
	s->report_fd = pfd[1];
	setsid();
	openlog("twinfs", LOG_PID, LOG_DAEMON);
	return 0;
}

static int mount_fs(struct startup *s, struct tfsd *d)
{
	struct tfs_opts to = { 0 };
	char err[512] = "";
	int ret;

	to.devs = s->devs;
	to.ndevs = (unsigned)s->ndevs;
	to.backend = s->cfg.backend;
	to.fault = s->cfg.fault;
	to.degraded = s->cfg.degraded;
	/* norecovery is a rescue mount (read-only, nothing written) that
	 * does not replay the log. */
	to.rescue = s->cfg.rescue || s->cfg.norecovery;
	to.norecovery = s->cfg.norecovery;
	to.nodiscard = s->cfg.nodiscard;
	to.acl = !s->cfg.noacl;
	to.commit_ms = s->commit_ms;
	to.bounce_bufs = s->bufs;
	to.on_unusable = tfsd_space_dead;
	to.cb_ctx = d;
	to.event_cmd = s->cfg.event_cmd;
	to.mountpoint = s->mnt;
	to.event_timeout_s = s->event_timeout;
	to.cache_bytes = s->cache_bytes;
	to.ckpt_log_bytes = s->ckpt_log_bytes;
	to.compact_dirty = s->cfg.compact_dirty;
	to.lazyreplay = s->cfg.lazyreplay;
	to.v1_optin = "-o format=1";
	to.v1 = s->cfg.format && !strcmp(s->cfg.format, "1");
	ret = tfs_mount(&to, &d->fs, err, sizeof(err));
	if (ret < 0)
		startup_report(&s->report_fd, "%s", err[0] ? err : strerror(-ret));
	return ret;
}

/* Signals, the kernel mount and the hooks; then the waiting parent hears
 * "mounted".  On error what this started is undone. */
static int start_session(struct startup *s, struct tfsd *d, struct fuse_session *se)
{
	int ret;

	/* libfuse only takes over signals left at SIG_DFL, and a script's
	 * "twinfs -f ... &" starts with SIGINT ignored: both must end the
	 * session. */
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	if (fuse_set_signal_handlers(se) < 0) {
		startup_report(&s->report_fd, "cannot set signal handlers");
		return -1;
	}
	if (fuse_session_mount(se, s->mnt) < 0) {
		/* libfuse (or fusermount3) printed why just before. */
		startup_report(&s->report_fd, "cannot mount on %s", s->mnt);
		fuse_remove_signal_handlers(se);
		return -1;
	}
	ret = tfsd_io_install(d, se);
	if (ret < 0)
		tlog(LOG_WARNING, "cannot install the /dev/fuse I/O hooks (%s): shared mmap of "
		     "direct-I/O opens will fail with ENODEV", strerror(-ret));
	tfsd_space_init(d, s->mnt);
	startup_report(&s->report_fd, NULL);
	if (!s->cmd.foreground)
		detach_stdio();
	tlog(LOG_INFO, "mounted %s on %s, %d device(s), backend %s", s->devlist, s->mnt,
	     s->ndevs, tfs_backend_name(d->fs));
	return 0;
}

/* Serve until unmounted or signalled; the exit code. */
static int run_session(struct startup *s, struct tfsd *d, struct fuse_session *se)
{
	int loop_ret = serve(se, &s->cmd, s->threads, s->cfg.readtoken);

	/* Writes still completing reply through the session: let them
	 * finish before it goes away. */
	tfs_drain(d->fs);
	tfsd_slow_drain(d);
	tfsd_space_fini(d);
	if (loop_ret < 0) {
		tlog(LOG_ERR, "session loop: %s", strerror(-loop_ret));
		return 1;
	}
	return 0;
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	/* writeback_cache by default: measured in bench/ (README), it makes
	 * large buffered writes ~8x faster (1 MiB writeback requests sent in
	 * parallel instead of one synchronous request per write(2)) and costs
	 * O_DSYNC writers nothing (they call fsync either way). */
	struct startup s = {
		.cfg = { .writeback_cache = 1 },
		.threads = THREADS_DEFAULT,
		.report_fd = -1,
	};
	struct tfsd d = { 0 };
	struct fuse_session *se;
	int ret, exit_code;

	/* mount -o remount runs us as its helper: change the flags of the
	 * mount that is there, start nothing (remount.c). */
	exit_code = tfsd_remount(argc, argv);
	if (exit_code >= 0)
		return exit_code;
	fuse_set_log_func(fuse_log_cb);
	tfsd_ctl_log_init();	/* the lib's lines go where ours go */
	exit_code = parse_args(&args, argv[0], &s, &d);
	if (exit_code >= 0)
		goto out_args;

	/* Parses (and rejects) the FUSE options but starts nothing, so a bad
	 * option is a usage error before we fork. */
	se = fuse_session_new(&args, &tfsd_ops, sizeof(tfsd_ops), &d);
	if (!se) {
		usage(stderr, argv[0]);
		exit_code = 2;
		goto out_args;
	}
	d.se = se;
	exit_code = 1;
	if (check_mountpoint(s.cfg.mountpoint, s.mnt) < 0)
		goto out_session;
	/* Fork before tfs_mount: it starts threads, which fork does not copy. */
	if (!s.cmd.foreground && go_background(&s, &exit_code) < 0)
		goto out_session;
	if (mount_fs(&s, &d) < 0)
		goto out_session;
	if (start_session(&s, &d, se) < 0)
		goto out_tfs;

	exit_code = run_session(&s, &d, se);
	fuse_session_unmount(se);
	/* After the unmount: its DESTROY may come over the ring. */
	tfsd_uring_stop(&d);
	fuse_remove_signal_handlers(se);
out_tfs:
	/* Handles the kernel never released (aborted connection, lazy
	 * unmount) go first, so unlinked-open files can be reclaimed. */
	tfsd_files_release_all(&d);
	ret = tfs_unmount(d.fs);
	if (ret < 0) {
		tlog(LOG_ERR, "unmount: final checkpoint failed: %s%s", strerror(-ret),
		     ret == -ENOSPC ? " (the metadata node area is full: the log keeps "
		     "the changes; if the next mount fails, mount with -o rescue and "
		     "copy the data off)" : "");
		exit_code = 1;
	} else if (exit_code == 0) {
		tlog(LOG_INFO, "unmounted %s", s.mnt);
	}
out_session:
	fuse_session_destroy(se);
out_args:
	fuse_opt_free_args(&args);
	free(s.cmd.mountpoint);
	free_cfg(&s.cfg);
	free(s.devlist);
	return exit_code;
}
