/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tlog: how lib/ reports events to a person.  The lib never writes to
 * stderr itself: lines go to a settable sink (the daemon routes them to its
 * own logger: stderr with -f, syslog otherwise; the default sink is
 * stderr).  Events that can repeat per I/O (checksum mismatches, read
 * errors, repairs) go through a rate limiter: at most one line per limiter
 * per TLOG_RL_INTERVAL_S seconds, the next line saying how many were
 * suppressed in between, so a dying disk cannot flood the log.
 *
 * Levels are syslog's (LOG_ERR, LOG_WARNING, LOG_NOTICE, LOG_INFO...).
 * Thread-safe; the limiter is lock-free and zero-initialized.
 */
#ifndef TWINFS_TLOG_H
#define TWINFS_TLOG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <syslog.h>

#define TLOG_RL_INTERVAL_S 10

/* msg has no trailing newline and no "twinfs:" prefix. */
typedef void (*tfs_log_fn)(int level, const char *msg);

/* NULL restores the default (stderr, "twinfs: " prefix). */
void tfs_set_log_fn(tfs_log_fn fn);

void tfs_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* One limiter per (source, event kind), e.g. per device and kind. */
struct tlog_rl {
	_Atomic int64_t next_ns;	/* CLOCK_MONOTONIC; 0: log at once */
	_Atomic uint64_t suppressed;	/* lines dropped since the last one */
};

/* Log unless this limiter logged within the interval (then count it as
 * suppressed).  Returns true if a line was emitted. */
bool tfs_log_ratelimited(struct tlog_rl *rl, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Format one line into a caller's (err, errlen) buffer, the convention of
 * the calls that name what went wrong (dev_open, tfs_format, tfs_mount...).
 * Does nothing if err is NULL or errlen 0. */
void tfs_seterr(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
