/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * json: a tiny JSON writer into a caller's bounded buffer (the control
 * channel's replies) and a tiny parser into a tree (twinfs-ctl and tests
 * read those replies back).
 *
 * Writer: members are added with a key inside objects and with key NULL
 * inside arrays; commas and escaping are handled here.  When the buffer is
 * full the document is cut, j->overflow is set and further calls do
 * nothing, so callers never check each call: jb_finish() tells.
 *
 * Parser: jv_parse() builds a tree of struct jv (objects and arrays as
 * linked children); numbers keep both their double and, when integral,
 * their exact u64/i64 value.  jv_free() frees it.
 *
 * Not thread-safe per object.  Functions return 0 or -errno.
 */
#ifndef TWINFS_JSON_H
#define TWINFS_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JB_DEPTH_MAX 16

struct jbuf {
	char *p;
	size_t cap, len;		/* len excludes the NUL; p[len] == '\0' */
	bool overflow;
	bool has_error;			/* jb_error() was called */
	int depth;
	bool nonempty[JB_DEPTH_MAX];	/* a member was written at this depth */
};

void jb_init(struct jbuf *j, char *buf, size_t cap);
/* key: member name inside an object, NULL inside an array (or at the top). */
void jb_obj_begin(struct jbuf *j, const char *key);
void jb_obj_end(struct jbuf *j);
void jb_arr_begin(struct jbuf *j, const char *key);
void jb_arr_end(struct jbuf *j);
void jb_str(struct jbuf *j, const char *key, const char *val);	/* NULL: null */
void jb_strf(struct jbuf *j, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void jb_u64(struct jbuf *j, const char *key, uint64_t v);
void jb_i64(struct jbuf *j, const char *key, int64_t v);
void jb_double(struct jbuf *j, const char *key, double v);
void jb_bool(struct jbuf *j, const char *key, bool v);
void jb_null(struct jbuf *j, const char *key);
/* Member "error": message, and remember that an error was reported. */
void jb_error(struct jbuf *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* 0, or -EOVERFLOW when the document did not fit. */
int jb_finish(const struct jbuf *j);

enum jv_type { JV_NULL, JV_BOOL, JV_NUM, JV_STR, JV_ARR, JV_OBJ };

struct jv {
	enum jv_type type;
	char *key;			/* member name inside an object, else NULL */
	char *str;			/* JV_STR */
	double num;			/* JV_NUM */
	uint64_t u;			/* JV_NUM: exact value of a non-negative integer */
	bool exact;			/* u is valid */
	bool b;				/* JV_BOOL */
	struct jv *child, *next;	/* JV_ARR / JV_OBJ children, in order */
};

/* Parse a whole document.  -EINVAL on a syntax error, -ENOMEM. */
int jv_parse(const char *text, struct jv **out);
void jv_free(struct jv *v);
/* Member of an object (NULL if absent or v is not an object). */
const struct jv *jv_get(const struct jv *v, const char *key);
/* Follow a path of keys separated by '.', e.g. "scrub.bytes_done". */
const struct jv *jv_path(const struct jv *v, const char *path);
/* Typed getters with a default when absent or of another type. */
uint64_t jv_u64(const struct jv *v, const char *path, uint64_t dflt);
double jv_num(const struct jv *v, const char *path, double dflt);
const char *jv_str(const struct jv *v, const char *path, const char *dflt);
bool jv_bool(const struct jv *v, const char *path, bool dflt);
size_t jv_len(const struct jv *v);	/* children of an array/object */

#endif
