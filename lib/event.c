// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * event: log every event once and run the administrator's command for it
 * from one dedicated thread (see event.h for the contract).
 *
 * The queue is a fixed ring under a leaf mutex: emitters copy what the
 * command needs (device path and uuid, counts, one detail line, the time)
 * into a slot and signal; the thread takes one item at a time, builds the
 * environment, spawns the command (posix_spawn: the daemon is
 * multi-threaded, so no fork and no allocation in a child), and polls for
 * its exit with a growing sleep until the timeout, when it kills the
 * command's process group.  Nothing here runs in an emitter's thread but
 * the copy and the log line.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "event.h"
#include "fs_i.h"
#include "tlog.h"

extern char **environ;

#define EV_DETAIL_MAX 256

struct ev_item {
	struct event e;
	unsigned count;			/* merged occurrences */
	char device[PATH_MAX];
	char dev_uuid[SUPER_UUID_STR];
	char dev_state[16];
	char detail[EV_DETAIL_MAX];
	char time[32];
};

struct event_q {
	char *cmd;			/* NULL: log only */
	char *mnt;
	unsigned timeout_s;
	char fs_uuid[SUPER_UUID_STR];
	char label[sizeof(((struct super *)0)->label)];
	_Atomic int space_low;		/* 1 after space_low until space_ok */
	_Atomic int unusable;		/* fs_unusable sent */
	_Atomic uint64_t dropped;	/* total */

	pthread_mutex_t mu;		/* leaf: protects everything below */
	pthread_cond_t cv;
	struct ev_item *ring;		/* EVENT_QUEUE_MAX items */
	unsigned head, n;
	uint64_t dropped_unreported;	/* since the last delivered event */
	bool stop, running;
	struct timespec stop_by;	/* CLOCK_MONOTONIC, valid when stop */
	pthread_t thr;
};

static const char *const names[EV_KINDS] = {
	[EV_DEVICE_FAILED] = "device_failed",
	[EV_DEVICE_ONLINE] = "device_online",
	[EV_SCRUB_DONE] = "scrub_done",
	[EV_REBUILD_DONE] = "rebuild_done",
	[EV_REPLACE_DONE] = "replace_done",
	[EV_REBUILD_FAILED] = "rebuild_failed",
	[EV_SPACE_LOW] = "space_low",
	[EV_SPACE_OK] = "space_ok",
	[EV_FS_UNUSABLE] = "fs_unusable",
	[EV_CHECKPOINT_FAILED] = "checkpoint_failed",
	[EV_UNRECOVERABLE] = "unrecoverable",
	[EV_FS_FAILED] = "fs_failed",
};

const char *event_name(int kind)
{
	return kind >= 0 && kind < EV_KINDS ? names[kind] : "unknown";
}

/* syslog level and the word the command gets as TWINFS_SEVERITY. */
static int ev_level(const struct event *e)
{
	switch (e->kind) {
	case EV_DEVICE_FAILED:
	case EV_REBUILD_FAILED:
	case EV_FS_UNUSABLE:
	case EV_CHECKPOINT_FAILED:
	case EV_UNRECOVERABLE:
	case EV_FS_FAILED:
		return LOG_ERR;
	case EV_SCRUB_DONE:
		return e->unrecoverable ? LOG_ERR : e->csum_errors || e->read_errors ?
		       LOG_WARNING : LOG_NOTICE;
	case EV_SPACE_LOW:
		return LOG_WARNING;
	default:
		return LOG_NOTICE;
	}
}

static const char *level_word(int level)
{
	return level <= LOG_ERR ? "error" : level == LOG_WARNING ? "warning" : "notice";
}

static bool has_counts(int kind)
{
	return kind == EV_SCRUB_DONE || kind == EV_REBUILD_DONE || kind == EV_REPLACE_DONE ||
	       kind == EV_REBUILD_FAILED;
}

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- the command ---- */

/* NAME=value into a fresh string; NULL on ENOMEM (that variable is then
 * left out rather than the whole event). */
static char *env_kv(const char *name, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static char *env_kv(const char *name, const char *fmt, ...)
{
	char val[PATH_MAX + 64], *s;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(val, sizeof(val), fmt, ap);
	va_end(ap);
	if (asprintf(&s, "%s=%s", name, val) < 0)
		return NULL;
	return s;
}

#define EV_VARS_MAX 24

static char **build_env(struct event_q *q, const struct ev_item *it, uint64_t dropped)
{
	char *v[EV_VARS_MAX];
	size_t nv = 0, ne = 0, k = 0;
	char **env;

	v[nv++] = env_kv("TWINFS_EVENT", "%s", event_name(it->e.kind));
	v[nv++] = env_kv("TWINFS_SEVERITY", "%s", level_word(ev_level(&it->e)));
	v[nv++] = env_kv("TWINFS_TIME", "%s", it->time);
	v[nv++] = env_kv("TWINFS_MOUNTPOINT", "%s", q->mnt ? q->mnt : "");
	v[nv++] = env_kv("TWINFS_FS_UUID", "%s", q->fs_uuid);
	v[nv++] = env_kv("TWINFS_LABEL", "%s", q->label);
	v[nv++] = env_kv("TWINFS_DETAIL", "%s", it->detail);
	v[nv++] = env_kv("TWINFS_COUNT", "%u", it->count);
	v[nv++] = env_kv("TWINFS_DROPPED", "%llu", (unsigned long long)dropped);
	if (it->e.slot >= 0) {
		v[nv++] = env_kv("TWINFS_DEVICE", "%s", it->device);
		v[nv++] = env_kv("TWINFS_DEVICE_SLOT", "%d", it->e.slot);
		v[nv++] = env_kv("TWINFS_DEVICE_UUID", "%s", it->dev_uuid);
		v[nv++] = env_kv("TWINFS_DEVICE_STATE", "%s", it->dev_state);
	}
	if (has_counts(it->e.kind)) {
		v[nv++] = env_kv("TWINFS_CSUM_ERRORS", "%llu",
				 (unsigned long long)it->e.csum_errors);
		v[nv++] = env_kv("TWINFS_REPAIRED", "%llu", (unsigned long long)it->e.repaired);
		v[nv++] = env_kv("TWINFS_UNRECOVERABLE", "%llu",
				 (unsigned long long)it->e.unrecoverable);
		v[nv++] = env_kv("TWINFS_READ_ERRORS", "%llu",
				 (unsigned long long)it->e.read_errors);
	}
	if (it->e.kind == EV_SPACE_LOW || it->e.kind == EV_SPACE_OK)
		v[nv++] = env_kv("TWINFS_USED_PCT", "%u", it->e.used_pct);

	while (environ && environ[ne])
		ne++;
	env = calloc(ne + nv + 1, sizeof(*env));
	if (!env) {
		for (size_t i = 0; i < nv; i++)
			free(v[i]);
		return NULL;
	}
	/* The daemon's own environment minus any TWINFS_ variable it was
	 * started with, then ours; every string is allocated (free_env). */
	for (size_t i = 0; i < ne; i++)
		if (strncmp(environ[i], "TWINFS_", 7))
			env[k++] = strdup(environ[i]);
	for (size_t i = 0; i < nv; i++)
		if (v[i])
			env[k++] = v[i];
	env[k] = NULL;
	return env;
}

static void free_env(char **env)
{
	for (size_t i = 0; env && env[i]; i++)
		free(env[i]);
	free(env);
}

/* Wait for @pid for the timeout from @start_ns (CLOCK_MONOTONIC) or, when
 * the queue is
 * closed, until its stop_by; kill its process group past that.  Short
 * sleeps first, so a quick script is reaped at once, then 100 ms. */
static void reap(struct event_q *q, pid_t pid, const char *ev, int64_t start_ns)
{
	int64_t deadline_ns = start_ns + (int64_t)q->timeout_s * 1000000000;
	useconds_t nap = 1000;
	int st = 0;

	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		int64_t now = mono_ns(), limit = deadline_ns;

		if (r == pid)
			break;
		if (r < 0 && errno != EINTR) {
			tfs_log(LOG_WARNING, "event %s: waitpid %d: %s", ev, (int)pid,
				strerror(errno));
			return;
		}
		pthread_mutex_lock(&q->mu);
		if (q->stop) {
			int64_t sb = (int64_t)q->stop_by.tv_sec * 1000000000 + q->stop_by.tv_nsec;

			if (sb < limit)
				limit = sb;
		}
		pthread_mutex_unlock(&q->mu);
		if (now >= limit) {
			/* Its own process group: the script's children go too. */
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
				;
			tfs_log(LOG_WARNING, "event %s: command %s (pid %d) still running after "
				"%.1f s; killed", ev, q->cmd, (int)pid, (double)(now - start_ns) / 1e9);
			return;
		}
		usleep(nap);
		if (nap < 100000)
			nap *= 2;
	}
	if (WIFEXITED(st) && WEXITSTATUS(st))
		tfs_log(LOG_WARNING, "event %s: command %s exited with status %d", ev, q->cmd,
			WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		tfs_log(LOG_WARNING, "event %s: command %s killed by signal %d", ev, q->cmd,
			WTERMSIG(st));
}

static void run_cmd(struct event_q *q, const struct ev_item *it, uint64_t dropped)
{
	const char *ev = event_name(it->e.kind);
	char *argv[] = { q->cmd, (char *)ev, NULL };
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, dflt;
	char **env = build_env(q, it, dropped);
	pid_t pid;
	int ret;

	if (!env) {
		tfs_log(LOG_ERR, "event %s: out of memory; command not run", ev);
		return;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&at);
	/* stdin from /dev/null, no inherited descriptor past stderr (the
	 * devices, /dev/fuse), its own process group (killed as one), and
	 * signals as a fresh process has them (libfuse ignores SIGPIPE). */
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addclosefrom_np(&fa, 3);
	sigemptyset(&none);
	sigemptyset(&dflt);
	sigaddset(&dflt, SIGPIPE);
	sigaddset(&dflt, SIGINT);
	sigaddset(&dflt, SIGTERM);
	sigaddset(&dflt, SIGHUP);
	sigaddset(&dflt, SIGCHLD);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &dflt);
	posix_spawnattr_setpgroup(&at, 0);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
				 POSIX_SPAWN_SETSIGDEF);
	ret = posix_spawn(&pid, q->cmd, &fa, &at, argv, env);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	free_env(env);
	if (ret) {
		tfs_log(LOG_ERR, "event %s: cannot run %s: %s", ev, q->cmd, strerror(ret));
		return;
	}
	reap(q, pid, ev, mono_ns());
}

static void *ev_main(void *arg)
{
	struct event_q *q = arg;
	struct ev_item *it = malloc(sizeof(*it));

	pthread_mutex_lock(&q->mu);
	for (;;) {
		uint64_t dropped;

		while (!q->n && !q->stop)
			pthread_cond_wait(&q->cv, &q->mu);
		if (!q->n)
			break;
		if (q->stop && mono_ns() >= (int64_t)q->stop_by.tv_sec * 1000000000 +
					      q->stop_by.tv_nsec) {
			tfs_log(LOG_WARNING, "events: %u not delivered before unmount", q->n);
			q->n = 0;
			break;
		}
		if (it)
			*it = q->ring[q->head];
		q->head = (q->head + 1) % EVENT_QUEUE_MAX;
		q->n--;
		dropped = q->dropped_unreported;
		q->dropped_unreported = 0;
		pthread_mutex_unlock(&q->mu);
		if (it)
			run_cmd(q, it, dropped);
		pthread_mutex_lock(&q->mu);
	}
	pthread_mutex_unlock(&q->mu);
	free(it);
	return NULL;
}

/* ---- setup ---- */

int event_open(struct tfs *fs, const char *cmd, const char *mountpoint, unsigned timeout_s)
{
	struct event_q *q;
	int ret;

	if (cmd && cmd[0] != '/')
		return -EINVAL;
	q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	pthread_mutex_init(&q->mu, NULL);
	pthread_cond_init(&q->cv, NULL);
	q->timeout_s = timeout_s ? timeout_s : EVENT_TIMEOUT_DEFAULT_S;
	super_uuid_str(fs->sb.fs_uuid, q->fs_uuid);
	snprintf(q->label, sizeof(q->label), "%s", fs->sb.label);
	if (mountpoint && !(q->mnt = strdup(mountpoint)))
		goto nomem;
	if (cmd) {
		q->cmd = strdup(cmd);
		q->ring = calloc(EVENT_QUEUE_MAX, sizeof(*q->ring));
		if (!q->cmd || !q->ring)
			goto nomem;
		ret = -pthread_create(&q->thr, NULL, ev_main, q);
		if (ret < 0) {
			free(q->cmd);
			free(q->ring);
			free(q->mnt);
			free(q);
			return ret;
		}
		q->running = true;
	}
	fs->ev = q;
	/* What a monitor would otherwise only learn from status. */
	for (unsigned i = 0; i < fs->mirror.ndevs; i++) {
		int st = atomic_load(&fs->mirror.state[i]);

		if (st != MDEV_OK)
			event_emit(fs, &(struct event){ .kind = EV_DEVICE_FAILED, .slot = (int)i,
					.state = st }, "device is %s at mount",
				   mirror_state_name(st));
	}
	return 0;
nomem:
	free(q->cmd);
	free(q->ring);
	free(q->mnt);
	free(q);
	return -ENOMEM;
}

void event_close(struct tfs *fs)
{
	struct event_q *q = fs->ev;

	if (!q)
		return;
	if (q->running) {
		pthread_mutex_lock(&q->mu);
		q->stop = true;
		clock_gettime(CLOCK_MONOTONIC, &q->stop_by);
		q->stop_by.tv_sec += EVENT_CLOSE_WAIT_S;
		pthread_cond_signal(&q->cv);
		pthread_mutex_unlock(&q->mu);
		pthread_join(q->thr, NULL);
	}
	fs->ev = NULL;
	pthread_mutex_destroy(&q->mu);
	pthread_cond_destroy(&q->cv);
	free(q->cmd);
	free(q->mnt);
	free(q->ring);
	free(q);
}

uint64_t event_dropped(struct tfs *fs)
{
	return fs->ev ? atomic_load(&fs->ev->dropped) : 0;
}

/* ---- emitting ---- */

static void fill_device(struct tfs *fs, struct ev_item *it)
{
	unsigned i = (unsigned)it->e.slot;
	struct dev *d;
	uint8_t u[16];

	if (it->e.slot < 0 || i >= fs->mirror.ndevs)
		return;
	d = fs->mirror.devs[i];
	if (d && d->path)
		snprintf(it->device, sizeof(it->device), "%s", d->path);
	else if (!mirror_slot_path(&fs->mirror, i, it->device, sizeof(it->device)))
		it->device[0] = '\0';
	/* Unlocked copy: the superblock lock is not for an I/O completion
	 * thread, and a uuid changes only when a replace ends, which emits
	 * from the rebuild thread after the change. */
	memcpy(u, fs->sb.dev_uuids[i], sizeof(u));
	super_uuid_str(u, it->dev_uuid);
	snprintf(it->dev_state, sizeof(it->dev_state), "%s",
		 mirror_state_name(atomic_load(&fs->mirror.state[i])));
}

void event_emit(struct tfs *fs, const struct event *e, const char *fmt, ...)
{
	struct event_q *q = fs->ev;
	struct ev_item *it;
	char detail[EV_DETAIL_MAX], dev[PATH_MAX + 32] = "";
	struct timespec ts;
	struct tm tm;
	va_list ap;

	if (!q)
		return;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	if (e->slot >= 0) {
		struct dev *d = (unsigned)e->slot < fs->mirror.ndevs ? fs->mirror.devs[e->slot]
								      : NULL;

		snprintf(dev, sizeof(dev), " device %d (%s)", e->slot,
			 d && d->path ? d->path : "missing");
	}
	/* At most a warning: what happened was logged at its own level where
	 * it happened (mirror, scrub, rebuild); this line records the event
	 * and must not count as a second error. */
	tfs_log(ev_level(e) < LOG_WARNING ? LOG_WARNING : ev_level(e), "event %s%s: %s",
		event_name(e->kind), dev, detail);
	if (!q->running)
		return;

	pthread_mutex_lock(&q->mu);
	/* Merge into an equal event still waiting: the command learns it
	 * happened again (TWINFS_COUNT) with the newest details. */
	it = NULL;
	for (unsigned k = 0; k < q->n; k++) {
		struct ev_item *c = &q->ring[(q->head + k) % EVENT_QUEUE_MAX];

		if (c->e.kind == e->kind && c->e.slot == e->slot) {
			it = c;
			break;
		}
	}
	if (!it && q->n == EVENT_QUEUE_MAX) {
		q->dropped_unreported++;
		atomic_fetch_add(&q->dropped, 1);
		pthread_mutex_unlock(&q->mu);
		tfs_log(LOG_WARNING, "event %s: queue full, dropped", event_name(e->kind));
		return;
	}
	if (!it) {
		it = &q->ring[(q->head + q->n) % EVENT_QUEUE_MAX];
		q->n++;
		it->count = 0;
	}
	it->count++;
	it->e = *e;
	snprintf(it->detail, sizeof(it->detail), "%s", detail);
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(it->time, sizeof(it->time), "%Y-%m-%dT%H:%M:%SZ", &tm);
	it->device[0] = it->dev_uuid[0] = it->dev_state[0] = '\0';
	fill_device(fs, it);
	pthread_cond_signal(&q->cv);
	pthread_mutex_unlock(&q->mu);

	/* A device back in sync is news of its own for a monitor that only
	 * watches failures. */
	if (e->kind == EV_REBUILD_DONE || e->kind == EV_REPLACE_DONE)
		event_emit(fs, &(struct event){ .kind = EV_DEVICE_ONLINE, .slot = e->slot },
			   "device is in sync again");
}

void event_dev_state(struct tfs *fs, unsigned dev, int state, int err)
{
	int no = 0;

	if (!fs->ev || state != MDEV_FAILED)
		return;
	event_emit(fs, &(struct event){ .kind = EV_DEVICE_FAILED, .slot = (int)dev,
			.state = state }, "failed while mounted (%s); no more I/O goes to it "
		   "until it is rebuilt", strerror(err < 0 ? -err : err ? err : EIO));
	if (mirror_healthy(&fs->mirror) == 0 &&
	    atomic_compare_exchange_strong(&fs->ev->unusable, &no, 1))
		event_emit(fs, &(struct event){ .kind = EV_FS_UNUSABLE, .slot = -1 },
			   "no device left that takes writes: the mount is read-only, every change fails with EROFS");
}

void event_fs_failed(struct tfs *fs, const char *what, int err)
{
	if (fs->ev)
		event_emit(fs, &(struct event){ .kind = EV_FS_FAILED, .slot = -1 },
			   "%s failed (%s): the mount is read-only and writes no checkpoint; "
			   "unmount and mount again (the log replays every change acknowledged "
			   "before it)", what, strerror(err < 0 ? -err : err ? err : EIO));
}

void event_unrecoverable(void *ctx, unsigned dev, uint64_t blk)
{
	struct tfs *fs = ctx;

	if (fs->ev)
		event_emit(fs, &(struct event){ .kind = EV_UNRECOVERABLE, .slot = (int)dev,
				.unrecoverable = 1 }, "no copy of block %llu verifies: "
			   "its data or metadata is lost (EIO); fsck.twinfs -n names it",
			   (unsigned long long)blk);
}

void event_scrub_done(struct tfs *fs, const char *state, uint64_t csum_errors,
		      uint64_t repaired, uint64_t unrecoverable, uint64_t read_errors,
		      const struct scrub_nodes_ev *nodes)
{
	char ntxt[128] = "";

	if (nodes)
		snprintf(ntxt, sizeof(ntxt), "; tree nodes: %llu checked, %llu copies repaired, "
			 "%llu unrecoverable", (unsigned long long)nodes->checked,
			 (unsigned long long)nodes->repaired,
			 (unsigned long long)nodes->unrecoverable);
	event_emit(fs, &(struct event){ .kind = EV_SCRUB_DONE, .slot = -1,
			.csum_errors = csum_errors, .repaired = repaired,
			.unrecoverable = unrecoverable, .read_errors = read_errors },
		   "scrub %s: %llu bad copies, %llu repaired, %llu unrecoverable, %llu read errors%s",
		   state, (unsigned long long)csum_errors, (unsigned long long)repaired,
		   (unsigned long long)unrecoverable, (unsigned long long)read_errors, ntxt);
}

void event_rebuild_end(struct tfs *fs, unsigned dev, bool replace, int err, uint64_t copied,
		       uint64_t verified, uint64_t fixed)
{
	const char *what = replace ? "replace" : "rebuild";

	if (err < 0)
		event_emit(fs, &(struct event){ .kind = EV_REBUILD_FAILED, .slot = (int)dev },
			   "%s failed: %s; the device stays stale", what, strerror(-err));
	else
		event_emit(fs, &(struct event){ .kind = replace ? EV_REPLACE_DONE : EV_REBUILD_DONE,
				.slot = (int)dev, .repaired = fixed },
			   "%s finished: %llu blocks copied, %llu verified, %llu rewritten", what,
			   (unsigned long long)copied, (unsigned long long)verified,
			   (unsigned long long)fixed);
}

void event_space_check(struct tfs *fs)
{
	struct event_q *q = fs->ev;
	uint64_t total, free_, reserve, avail, used;
	unsigned pct;
	int expect;

	if (!q || !fs->alloc)
		return;
	total = alloc_total_blocks(fs->alloc);
	free_ = alloc_free_blocks(fs->alloc);
	reserve = alloc_reserve_blocks(fs->alloc);
	avail = free_ > reserve ? free_ - reserve : 0;
	used = total > free_ ? total - free_ : 0;
	if (!used && !avail)
		return;
	/* df's Use%: used / (used + available), rounded up. */
	pct = (unsigned)((used * 100 + used + avail - 1) / (used + avail));
	if (pct >= EVENT_SPACE_LOW_PCT && !atomic_load(&q->space_low)) {
		expect = 0;
		if (atomic_compare_exchange_strong(&q->space_low, &expect, 1))
			event_emit(fs, &(struct event){ .kind = EV_SPACE_LOW, .slot = -1,
					.used_pct = pct }, "%u%% used, %llu MiB available", pct,
				   (unsigned long long)(avail * TFS_BLOCK_SIZE >> 20));
	} else if (pct < EVENT_SPACE_OK_PCT && atomic_load(&q->space_low)) {
		expect = 1;
		if (atomic_compare_exchange_strong(&q->space_low, &expect, 0))
			event_emit(fs, &(struct event){ .kind = EV_SPACE_OK, .slot = -1,
					.used_pct = pct }, "%u%% used, %llu MiB available", pct,
				   (unsigned long long)(avail * TFS_BLOCK_SIZE >> 20));
	}
}
