/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Description: opcheck.h: what the opcheck sources share (opcheck.c: the driver, the
 * namespace and metadata checks and these helpers; opcheck_data.c: the
 * data-path checks).  A check returns 0, or -1 after printing its failure
 * with its line; the macros below return -1 from the calling check.
 */
#ifndef TWINFS_OPCHECK_H
#define TWINFS_OPCHECK_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#define KiB 1024L
#define MiB (1024L * 1024L)

extern const char *base;	/* the directory under test */
extern const char *cur;		/* name of the running check */

#define FAIL(...)                                                               \
	do {                                                                    \
		fprintf(stderr, "opcheck: %s: line %d: ", cur, __LINE__);       \
		fprintf(stderr, __VA_ARGS__);                                   \
		fputc('\n', stderr);                                            \
		return -1;                                                      \
	} while (0)
#define CHECK(cond, ...)                                                        \
	do {                                                                    \
		if (!(cond))                                                    \
			FAIL(__VA_ARGS__);                                      \
	} while (0)
/* A call that must succeed: evaluates to its (nonnegative) result. */
#define SYS(call)                                                               \
	({                                                                      \
		long _r = (long)(call);                                         \
		if (_r < 0)                                                     \
			FAIL("%s: %s", #call, strerror(errno));                 \
		_r;                                                             \
	})
/* A call that must fail with errno e. */
#define FAILS(call, e)                                                          \
	do {                                                                    \
		errno = 0;                                                      \
		long _r = (long)(call);                                         \
		if (_r >= 0 || errno != (e))                                    \
			FAIL("%s: expected %s, got %ld (%s)", #call, strerrorname_np(e), \
			     _r, _r >= 0 ? "success" : strerrorname_np(errno)); \
	} while (0)

/* Path under the check's directory; a ring of buffers so a call can take
 * several. */
const char *P(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Bytes [off, off + len) of pattern tag: each byte depends on its offset,
 * so data written at the wrong place does not compare equal. */
void fill(uint8_t *b, size_t len, uint64_t off, unsigned tag);
/* Zeroed, 4096-aligned (usable for O_DIRECT); exits on failure. */
void *xmalloc(size_t n);
/* Read len bytes at off in full (short only at EOF).  Returns bytes or -1. */
ssize_t read_full(int fd, void *buf, size_t len, off_t off);
ssize_t write_full(int fd, const void *buf, size_t len, off_t off);
/* First differing offset of a and b, or -1. */
long diff_at(const uint8_t *a, const uint8_t *b, size_t len);
int write_pattern_file(const char *path, size_t len, unsigned tag);
/* The file holds exactly len bytes of pattern tag. */
int check_pattern_file(const char *path, size_t len, unsigned tag);
int statfs_free(uint64_t *bytes);
/* Free bytes once deferred frees have settled. */
int settled_free(int fd, uint64_t *bytes);
/* Create an empty file (O_CREAT | flags).  Returns 0 or -1 with errno. */
int touch(const char *path, int flags);

/* The data-path checks (opcheck_data.c). */
int t_rw_offsets(void);
int t_direct(void);
int t_truncate(void);
int t_fallocate(void);
int t_seek(void);
int t_copy_range(void);
int t_sync(void);

#endif
