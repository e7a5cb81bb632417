// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * tlog: the lib's log sink and its rate limiter.  Owns the global sink
 * pointer (an atomic: the daemon sets it once, any thread may log).  Also
 * the one helper that fills the callers' (err, errlen) message buffers.
 */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "tlog.h"

static _Atomic(tfs_log_fn) log_fn;

void tfs_set_log_fn(tfs_log_fn fn)
{
	atomic_store(&log_fn, fn);
}

static void emit(int level, const char *msg)
{
	tfs_log_fn fn = atomic_load(&log_fn);

	if (fn) {
		fn(level, msg);
		return;
	}
	/* One fprintf call: lines from threads do not interleave. */
	fprintf(stderr, "twinfs: %s%s\n",
		level <= LOG_ERR ? "error: " : level == LOG_WARNING ? "warning: " : "", msg);
}

void tfs_log(int level, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	emit(level, msg);
}

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

bool tfs_log_ratelimited(struct tlog_rl *rl, int level, const char *fmt, ...)
{
	int64_t now = mono_ns();
	int64_t next = atomic_load(&rl->next_ns);
	uint64_t sup;
	char msg[512];
	va_list ap;
	int n;

	/* Only the thread that moves the window forward logs; everyone else
	 * in the window just counts. */
	if (now < next ||
	    !atomic_compare_exchange_strong(&rl->next_ns, &next,
					    now + (int64_t)TLOG_RL_INTERVAL_S * 1000000000)) {
		atomic_fetch_add(&rl->suppressed, 1);
		return false;
	}
	sup = atomic_exchange(&rl->suppressed, 0);
	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (sup && n >= 0 && (size_t)n < sizeof(msg))
		snprintf(msg + n, sizeof(msg) - (size_t)n, " (%llu more suppressed)",
			 (unsigned long long)sup);
	emit(level, msg);
	return true;
}

void tfs_seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}
