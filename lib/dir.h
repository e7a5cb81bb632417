/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * dir: an in-memory directory: name -> (ino, cookie).  Names are found by
 * hash; readdir walks entries in cookie order and resumes at any cookie in
 * O(1) (a second hash on the cookie), so large directories list in linear
 * time.  Cookies are 2.. upward (0 and 1 are "." and ".."), never reused
 * while the directory lives; they are not persistent.
 *
 * Not thread-safe: the owning inode's lock protects it.
 * Functions return 0 or -errno.
 */
#ifndef TWINFS_DIR_H
#define TWINFS_DIR_H

#include <stddef.h>
#include <stdint.h>

struct dir;

struct dir_ent {
	uint64_t ino;
	uint64_t cookie;
	uint16_t namelen;
	const char *name;	/* NUL-terminated */
};

struct dir *dir_new(void);
void dir_free(struct dir *d);
size_t dir_count(const struct dir *d);
/* 0 and *ino, or -ENOENT. */
int dir_lookup(const struct dir *d, const char *name, size_t namelen, uint64_t *ino);
/* Insert or replace (replace keeps the cookie). */
int dir_set(struct dir *d, const char *name, size_t namelen, uint64_t ino);
int dir_del(struct dir *d, const char *name, size_t namelen);
/* First entry with cookie >= @cookie, in cookie order; -ENOENT at the end.
 * Deleted cookies are skipped. */
int dir_next(const struct dir *d, uint64_t cookie, struct dir_ent *out);

#endif
