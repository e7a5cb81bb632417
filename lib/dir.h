/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * dir: an in-memory directory: name -> (ino, cookie).  Names are found by
 * hash; readdir walks entries in cookie order and resumes at any cookie in
 * O(log n) (binary search on a cookie-ordered vector, then a hierarchical
 * bitmap of live slots skips deleted ones in a few word operations), so
 * large directories list in (near) linear time whatever was deleted.
 * Cookies are 2.. upward (0 and 1 are "." and ".."), never reused while the
 * directory lives; format v2 keeps them across a clean remount (dir_set_at).  An entry keeps its cookie until
 * it is removed; a new name (create, link, or the new name of a rename)
 * gets a cookie past every existing one, so a listing that stops at
 * dir_end() taken when it began returns no entry twice, and returns every
 * entry that stayed in place all along.
 *
 * Names are byte strings of 1..255 bytes (any bytes; namelen is
 * authoritative, the input need not be NUL-terminated).
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
	uint8_t dtype;		/* DT_* of the child, DT_UNKNOWN (0) if not known */
	const char *name;	/* NUL-terminated */
};

struct dir *dir_new(void);
void dir_free(struct dir *d);
size_t dir_count(const struct dir *d);
/* 0 and *ino, or -ENOENT. */
int dir_lookup(const struct dir *d, const char *name, size_t namelen, uint64_t *ino);
/* The same with the entry's cookie. */
int dir_lookup_cookie(const struct dir *d, const char *name, size_t namelen, uint64_t *ino,
		      uint64_t *cookie);
/* Insert a new name with a given cookie (format v2 loads its DIRINDEX
 * items, in cookie order, so cookies stay what readdir handed out): the
 * cookie must be at or past dir_end(), which becomes cookie + 1.  @dtype:
 * the child's DT_* as the item records it (0: unknown), which a plain
 * readdir hands out without reading the child in.
 * -EEXIST for a name present, -EINVAL for a cookie below dir_end(). */
int dir_set_at(struct dir *d, const char *name, size_t namelen, uint64_t ino, uint64_t cookie,
	       uint8_t dtype);
/* Insert or replace (replace keeps the cookie); the entry's dtype is
 * unknown (0) after it.  -EINVAL for an empty name, -ENAMETOOLONG past
 * 255 bytes, -ENOMEM (directory unchanged). */
int dir_set(struct dir *d, const char *name, size_t namelen, uint64_t ino);
/* The child's DT_* for an existing name (a checkpoint learned it writing
 * the entry); -ENOENT. */
int dir_set_dtype(struct dir *d, const char *name, size_t namelen, uint8_t dtype);
int dir_del(struct dir *d, const char *name, size_t namelen);
/* First entry with cookie >= @cookie, in cookie order; -ENOENT at the end.
 * Deleted cookies are skipped.  out->name stays valid until that entry is
 * deleted or the directory freed (entries never move).  To resume after
 * an entry, pass out->cookie + 1. */
int dir_next(const struct dir *d, uint64_t cookie, struct dir_ent *out);
/* The cookie the next new entry will get: every entry that exists now has
 * a smaller one, every later one a cookie at or past it. */
uint64_t dir_end(const struct dir *d);

#endif
