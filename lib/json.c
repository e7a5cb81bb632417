// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * json: the bounded JSON writer behind every control-channel reply and the
 * small recursive-descent parser twinfs-ctl and the tests use to read the
 * replies back.  Owns struct jbuf's invariants: p is always NUL-terminated,
 * and once a write does not fit, overflow is set and nothing more is added
 * (a cut document is reported by jb_finish(), never sent as if whole).
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

/* ---- writer ---- */

void jb_init(struct jbuf *j, char *buf, size_t cap)
{
	memset(j, 0, sizeof(*j));
	j->p = buf;
	j->cap = cap;
	if (cap)
		buf[0] = '\0';
	else
		j->overflow = true;
}

static void put(struct jbuf *j, const char *s, size_t n)
{
	if (j->overflow)
		return;
	/* keep room for the NUL */
	if (n >= j->cap - j->len) {
		j->overflow = true;
		return;
	}
	memcpy(j->p + j->len, s, n);
	j->len += n;
	j->p[j->len] = '\0';
}

static void puts_(struct jbuf *j, const char *s)
{
	put(j, s, strlen(s));
}

static void put_escaped(struct jbuf *j, const char *s)
{
	put(j, "\"", 1);
	for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
		char tmp[8];

		switch (*c) {
		case '"': puts_(j, "\\\""); break;
		case '\\': puts_(j, "\\\\"); break;
		case '\n': puts_(j, "\\n"); break;
		case '\r': puts_(j, "\\r"); break;
		case '\t': puts_(j, "\\t"); break;
		default:
			if (*c < 0x20) {
				snprintf(tmp, sizeof(tmp), "\\u%04x", *c);
				puts_(j, tmp);
			} else {
				put(j, (const char *)c, 1);
			}
		}
	}
	put(j, "\"", 1);
}

/* Comma and key before a value at the current depth. */
static void member(struct jbuf *j, const char *key)
{
	int d = j->depth < JB_DEPTH_MAX ? j->depth : JB_DEPTH_MAX - 1;

	if (j->nonempty[d])
		put(j, ",", 1);
	j->nonempty[d] = true;
	if (key) {
		put_escaped(j, key);
		put(j, ":", 1);
	}
}

static void open_(struct jbuf *j, const char *key, const char *brace)
{
	member(j, key);
	put(j, brace, 1);
	if (j->depth + 1 >= JB_DEPTH_MAX) {
		j->overflow = true;	/* deeper than we track: refuse */
		return;
	}
	j->depth++;
	j->nonempty[j->depth] = false;
}

static void close_(struct jbuf *j, const char *brace)
{
	if (j->depth > 0)
		j->depth--;
	put(j, brace, 1);
}

void jb_obj_begin(struct jbuf *j, const char *key) { open_(j, key, "{"); }
void jb_obj_end(struct jbuf *j) { close_(j, "}"); }
void jb_arr_begin(struct jbuf *j, const char *key) { open_(j, key, "["); }
void jb_arr_end(struct jbuf *j) { close_(j, "]"); }

void jb_str(struct jbuf *j, const char *key, const char *val)
{
	member(j, key);
	if (val)
		put_escaped(j, val);
	else
		puts_(j, "null");
}

static void jb_vstrf(struct jbuf *j, const char *key, const char *fmt, va_list ap)
{
	char buf[1024];

	vsnprintf(buf, sizeof(buf), fmt, ap);
	jb_str(j, key, buf);
}

void jb_strf(struct jbuf *j, const char *key, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	jb_vstrf(j, key, fmt, ap);
	va_end(ap);
}

void jb_u64(struct jbuf *j, const char *key, uint64_t v)
{
	char buf[24];

	member(j, key);
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
	puts_(j, buf);
}

void jb_i64(struct jbuf *j, const char *key, int64_t v)
{
	char buf[24];

	member(j, key);
	snprintf(buf, sizeof(buf), "%lld", (long long)v);
	puts_(j, buf);
}

void jb_double(struct jbuf *j, const char *key, double v)
{
	char buf[40];

	member(j, key);
	/* JSON has no NaN or infinity */
	if (!isfinite(v)) {
		puts_(j, "null");
		return;
	}
	snprintf(buf, sizeof(buf), "%.6g", v);
	puts_(j, buf);
}

void jb_bool(struct jbuf *j, const char *key, bool v)
{
	member(j, key);
	puts_(j, v ? "true" : "false");
}

void jb_null(struct jbuf *j, const char *key)
{
	member(j, key);
	puts_(j, "null");
}

void jb_error(struct jbuf *j, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	jb_vstrf(j, "error", fmt, ap);
	va_end(ap);
	j->has_error = true;
}

int jb_finish(const struct jbuf *j)
{
	return j->overflow ? -EOVERFLOW : 0;
}

/* ---- parser ---- */

#define JV_DEPTH_MAX 64

struct jp {
	const char *s;
	int depth;
};

static void skip_ws(struct jp *p)
{
	while (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r')
		p->s++;
}

void jv_free(struct jv *v)
{
	while (v) {
		struct jv *next = v->next;

		jv_free(v->child);
		free(v->key);
		free(v->str);
		free(v);
		v = next;
	}
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Append the UTF-8 encoding of cp. */
static size_t utf8_put(char *o, unsigned cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | (cp >> 6));
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | (cp >> 12));
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | (cp >> 18));
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

static int parse_hex4(const char *s, unsigned *out)
{
	unsigned v = 0;

	for (int i = 0; i < 4; i++) {
		int h = hexval(s[i]);

		if (h < 0)
			return -EINVAL;
		v = v * 16 + (unsigned)h;
	}
	*out = v;
	return 0;
}

static int parse_string(struct jp *p, char **out)
{
	const char *s = p->s + 1;	/* after the quote */
	size_t n = 0;
	char *o;

	/* The decoded string is never longer than the source. */
	for (const char *e = s; *e != '"'; e++) {
		if (!*e)
			return -EINVAL;
		if (*e == '\\' && e[1])
			e++;
		n++;
	}
	o = malloc(n * 4 + 1);
	if (!o)
		return -ENOMEM;
	n = 0;
	while (*s != '"') {
		if ((unsigned char)*s < 0x20) {
			free(o);
			return -EINVAL;
		}
		if (*s != '\\') {
			o[n++] = *s++;
			continue;
		}
		s++;
		switch (*s) {
		case '"': o[n++] = '"'; break;
		case '\\': o[n++] = '\\'; break;
		case '/': o[n++] = '/'; break;
		case 'b': o[n++] = '\b'; break;
		case 'f': o[n++] = '\f'; break;
		case 'n': o[n++] = '\n'; break;
		case 'r': o[n++] = '\r'; break;
		case 't': o[n++] = '\t'; break;
		case 'u': {
			unsigned cp, lo;

			if (parse_hex4(s + 1, &cp)) {
				free(o);
				return -EINVAL;
			}
			s += 4;
			if (cp >= 0xd800 && cp < 0xdc00 && s[1] == '\\' && s[2] == 'u' &&
			    !parse_hex4(s + 3, &lo) && lo >= 0xdc00 && lo < 0xe000) {
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				s += 6;
			}
			n += utf8_put(o + n, cp);
			break;
		}
		default:
			free(o);
			return -EINVAL;
		}
		s++;
	}
	o[n] = '\0';
	p->s = s + 1;
	*out = o;
	return 0;
}

static int parse_value(struct jp *p, struct jv **out);

static int parse_container(struct jp *p, struct jv *v, char close)
{
	struct jv **tail = &v->child;
	int ret;

	p->s++;
	skip_ws(p);
	if (*p->s == close) {
		p->s++;
		return 0;
	}
	for (;;) {
		char *key = NULL;
		struct jv *c;

		skip_ws(p);
		if (close == '}') {
			if (*p->s != '"')
				return -EINVAL;
			ret = parse_string(p, &key);
			if (ret)
				return ret;
			skip_ws(p);
			if (*p->s != ':') {
				free(key);
				return -EINVAL;
			}
			p->s++;
		}
		ret = parse_value(p, &c);
		if (ret) {
			free(key);
			return ret;
		}
		c->key = key;
		*tail = c;
		tail = &c->next;
		skip_ws(p);
		if (*p->s == ',') {
			p->s++;
			continue;
		}
		if (*p->s == close) {
			p->s++;
			return 0;
		}
		return -EINVAL;
	}
}

static int parse_value(struct jp *p, struct jv **out)
{
	struct jv *v;
	int ret = 0;

	skip_ws(p);
	if (++p->depth > JV_DEPTH_MAX)
		return -EINVAL;
	v = calloc(1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	switch (*p->s) {
	case '{':
		v->type = JV_OBJ;
		ret = parse_container(p, v, '}');
		break;
	case '[':
		v->type = JV_ARR;
		ret = parse_container(p, v, ']');
		break;
	case '"':
		v->type = JV_STR;
		ret = parse_string(p, &v->str);
		break;
	case 't':
	case 'f':
	case 'n':
		if (!strncmp(p->s, "true", 4)) {
			v->type = JV_BOOL;
			v->b = true;
			p->s += 4;
		} else if (!strncmp(p->s, "false", 5)) {
			v->type = JV_BOOL;
			p->s += 5;
		} else if (!strncmp(p->s, "null", 4)) {
			p->s += 4;
		} else {
			ret = -EINVAL;
		}
		break;
	default: {
		char *end;
		const char *start = p->s;

		if (*start != '-' && (*start < '0' || *start > '9')) {
			ret = -EINVAL;
			break;
		}
		v->type = JV_NUM;
		v->num = strtod(start, &end);
		if (end == start) {
			ret = -EINVAL;
			break;
		}
		if (*start != '-' && strspn(start, "0123456789") == (size_t)(end - start)) {
			v->u = strtoull(start, NULL, 10);
			v->exact = true;
		}
		p->s = end;
	}
	}
	p->depth--;
	if (ret) {
		jv_free(v);
		return ret;
	}
	*out = v;
	return 0;
}

int jv_parse(const char *text, struct jv **out)
{
	struct jp p = { .s = text };
	struct jv *v;
	int ret;

	*out = NULL;
	ret = parse_value(&p, &v);
	if (ret)
		return ret;
	skip_ws(&p);
	if (*p.s) {
		jv_free(v);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

const struct jv *jv_get(const struct jv *v, const char *key)
{
	if (!v || v->type != JV_OBJ)
		return NULL;
	for (const struct jv *c = v->child; c; c = c->next)
		if (c->key && !strcmp(c->key, key))
			return c;
	return NULL;
}

const struct jv *jv_path(const struct jv *v, const char *path)
{
	char part[128];

	while (v && *path) {
		size_t n = strcspn(path, ".");

		if (n >= sizeof(part))
			return NULL;
		memcpy(part, path, n);
		part[n] = '\0';
		v = jv_get(v, part);
		path += n;
		if (*path == '.')
			path++;
	}
	return v;
}

uint64_t jv_u64(const struct jv *v, const char *path, uint64_t dflt)
{
	v = jv_path(v, path);
	if (!v || v->type != JV_NUM)
		return dflt;
	if (v->exact)
		return v->u;
	return v->num > 0 ? (uint64_t)v->num : 0;
}

double jv_num(const struct jv *v, const char *path, double dflt)
{
	v = jv_path(v, path);
	return v && v->type == JV_NUM ? v->num : dflt;
}

const char *jv_str(const struct jv *v, const char *path, const char *dflt)
{
	v = jv_path(v, path);
	return v && v->type == JV_STR ? v->str : dflt;
}

bool jv_bool(const struct jv *v, const char *path, bool dflt)
{
	v = jv_path(v, path);
	return v && v->type == JV_BOOL ? v->b : dflt;
}

size_t jv_len(const struct jv *v)
{
	size_t n = 0;

	if (!v || (v->type != JV_ARR && v->type != JV_OBJ))
		return 0;
	for (const struct jv *c = v->child; c; c = c->next)
		n++;
	return n;
}
