// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Description: crash_tree: the crash explorer's model and the text form of a tree (see
 * crash_tree.h): the model side, and a walk of a mounted crash state that
 * reads every file through the verified read path.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cmocka.h>
#include <xxhash.h>

#include "fs_i.h"

#include "crash_tree.h"

#define BS 4096u

const char *const xa_names[NXA] = { "user.a", "user.b" };

/* ---- model ---- */



struct mnode nodes[MAXN];
struct mdent dents[MAXN];
unsigned name_ctr;

void model_reset(void)
{
	for (int i = 0; i < MAXN; i++)
		free(nodes[i].data);
	memset(nodes, 0, sizeof(nodes));
	memset(dents, 0, sizeof(dents));
	nodes[0].live = true;
	nodes[0].type = T_DIR;
	nodes[0].ino = TFS_ROOT_INO;
	name_ctr = 0;
}

int node_new(int type, uint64_t ino)
{
	for (int i = 1; i < MAXN; i++) {
		if (!nodes[i].live && !nodes[i].fh) {
			free(nodes[i].data);
			memset(&nodes[i], 0, sizeof(nodes[i]));
			nodes[i].live = true;
			nodes[i].type = type;
			nodes[i].ino = ino;
			return i;
		}
	}
	return -1;
}

int dent_new(int parent, const char *name, int node)
{
	for (int i = 0; i < MAXN; i++) {
		if (!dents[i].live) {
			dents[i].live = true;
			dents[i].parent = parent;
			dents[i].node = node;
			snprintf(dents[i].name, sizeof(dents[i].name), "%s", name);
			return i;
		}
	}
	return -1;
}

int dent_of_dir(int node)
{
	for (int i = 0; i < MAXN; i++)
		if (dents[i].live && dents[i].node == node)
			return i;
	return -1;
}

void path_of(int parent, const char *name, char *out, size_t len)
{
	char tmp[256];

	if (parent == 0) {
		snprintf(out, len, "/%s", name);
		return;
	}
	int d = dent_of_dir(parent);
	assert_true(d >= 0);
	path_of(dents[d].parent, dents[d].name, tmp, sizeof(tmp));
	snprintf(out, len, "%s/%s", tmp, name);
}

void file_resize(struct mnode *n, size_t size)
{
	if (size > n->cap) {
		size_t c = size + size / 2 + BS;
		n->data = realloc(n->data, c);
		assert_non_null(n->data);
		n->cap = c;
	}
	if (size > n->size)
		memset(n->data + n->size, 0, size - n->size);
	n->size = size;
	n->hash_ok = false;
}

uint64_t node_hash(struct mnode *n)
{
	if (!n->hash_ok) {
		n->hash = XXH64(n->data, n->size, 0);
		n->hash_ok = true;
	}
	return n->hash;
}

/* Canonical text of a tree: one sorted line per name.  Directory link
 * counts and times are the file system's own business. */

void lines_add(struct lines *l, const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	assert_true(vasprintf(&s, fmt, ap) >= 0);
	va_end(ap);
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 64;
		l->v = realloc(l->v, l->cap * sizeof(*l->v));
		assert_non_null(l->v);
	}
	l->v[l->n++] = s;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

char *lines_join(struct lines *l)
{
	size_t len = 1;
	char *s, *p;

	qsort(l->v, l->n, sizeof(*l->v), cmp_str);
	for (size_t i = 0; i < l->n; i++)
		len += strlen(l->v[i]) + 1;
	s = p = malloc(len);
	assert_non_null(s);
	for (size_t i = 0; i < l->n; i++) {
		p = stpcpy(p, l->v[i]);
		*p++ = '\n';
		free(l->v[i]);
	}
	*p = 0;
	free(l->v);
	memset(l, 0, sizeof(*l));
	return s;
}

static void xattr_text(char *out, size_t len, const char names[][300], const uint64_t *h,
		       int n)
{
	size_t o = 0;

	out[0] = 0;
	for (int i = 0; i < n && o < len; i++)
		o += (size_t)snprintf(out + o, len - o, " %s=%016llx", names[i],
				      (unsigned long long)h[i]);
}

static void model_xattrs(struct mnode *n, char *out, size_t len)
{
	char names[NXA][300];
	uint64_t h[NXA];
	int k = 0;

	for (int i = 0; i < NXA; i++) {
		if (!n->xset[i])
			continue;
		snprintf(names[k], 300, "%s", xa_names[i]);
		h[k++] = XXH64(n->xv[i], n->xl[i], 0);
	}
	xattr_text(out, len, names, h, k);
}

char *model_text(void)
{
	struct lines l = { 0 };
	char path[512], xa[256];

	model_xattrs(&nodes[0], xa, sizeof(xa));
	lines_add(&l, "/ D%s", xa);
	for (int i = 0; i < MAXN; i++) {
		struct mnode *n;

		if (!dents[i].live)
			continue;
		n = &nodes[dents[i].node];
		path_of(dents[i].parent, dents[i].name, path, sizeof(path));
		model_xattrs(n, xa, sizeof(xa));
		if (n->type == T_DIR)
			lines_add(&l, "%s D%s", path, xa);
		else if (n->type == T_LINK)
			lines_add(&l, "%s L %s%s", path, n->target, xa);
		else
			lines_add(&l, "%s F %zu %d %016llx%s", path, n->size, n->nlink,
				  (unsigned long long)node_hash(n), xa);
	}
	return lines_join(&l);
}

/* ---- the recovered tree ---- */
struct names {
	char (*v)[TFS_NAME_MAX + 1];
	size_t n, cap;
};

static int fill_name(void *ctx, const char *name, const struct stat *st, uint64_t next_off)
{
	struct names *nm = ctx;

	if (!strcmp(name, ".") || !strcmp(name, ".."))
		return 0;
	if (nm->n == nm->cap) {
		nm->cap = nm->cap ? nm->cap * 2 : 32;
		nm->v = realloc(nm->v, nm->cap * sizeof(*nm->v));
		assert_non_null(nm->v);
	}
	snprintf(nm->v[nm->n++], TFS_NAME_MAX + 1, "%s", name);
	return 0;
}

static int fs_xattrs(struct tfs *fs, uint64_t ino, char *out, size_t len)
{
	char list[1024], names[16][300];
	uint64_t h[16];
	ssize_t ll = tfs_listxattr(fs, ino, list, sizeof(list));
	int k = 0;

	if (ll < 0)
		return (int)ll;
	for (char *p = list; p < list + ll && k < 16; p += strlen(p) + 1) {
		uint8_t v[256];
		ssize_t vl = tfs_getxattr(fs, ino, p, v, sizeof(v));

		if (vl < 0)
			return (int)vl;
		snprintf(names[k], 300, "%.255s", p);
		h[k++] = XXH64(v, (size_t)vl, 0);
	}
	/* list order is creation order; the text is sorted by name */
	for (int i = 1; i < k; i++)
		for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
			char t[300];
			uint64_t th = h[j];
			memcpy(t, names[j], 300);
			memcpy(names[j], names[j - 1], 300);
			memcpy(names[j - 1], t, 300);
			h[j] = h[j - 1];
			h[j - 1] = th;
		}
	xattr_text(out, len, names, h, k);
	return 0;
}

uint8_t *rbuf;

/* Reads every file fully: a checksum error anywhere is -EIO here. */
static int fs_walk(struct tfs *fs, uint64_t dino, const char *dpath, struct lines *l, int depth)
{
	struct names nm = { 0 };
	int ret;

	if (depth > 32)
		return -ELOOP;
	ret = tfs_readdir(fs, dino, 0, false, fill_name, &nm);
	for (size_t i = 0; !ret && i < nm.n; i++) {
		char path[1024], xa[512];
		struct stat st;

		if (snprintf(path, sizeof(path), "%s/%s", dpath, nm.v[i]) >= (int)sizeof(path)) {
			ret = -ENAMETOOLONG;
			break;
		}
		ret = tfs_lookup(fs, dino, nm.v[i], &st);
		if (ret)
			break;
		ret = fs_xattrs(fs, st.st_ino, xa, sizeof(xa));
		if (ret)
			break;
		if (S_ISDIR(st.st_mode)) {
			lines_add(l, "%s D%s", path, xa);
			ret = fs_walk(fs, st.st_ino, path, l, depth + 1);
		} else if (S_ISLNK(st.st_mode)) {
			char t[64];
			ssize_t tl = tfs_readlink(fs, st.st_ino, t, sizeof(t) - 1);

			if (tl < 0) {
				ret = (int)tl;
				break;
			}
			t[tl] = 0;
			lines_add(l, "%s L %s%s", path, t, xa);
		} else if (S_ISREG(st.st_mode)) {
			struct tfs_file *f;
			XXH64_state_t *hs = XXH64_createState();
			uint64_t off = 0;

			XXH64_reset(hs, 0);
			ret = tfs_open(fs, st.st_ino, O_RDONLY, &f);
			if (ret) {
				XXH64_freeState(hs);
				break;
			}
			while (off < (uint64_t)st.st_size) {
				ssize_t r = tfs_pread(f, rbuf, TFS_IO_MAX, (off_t)off);

				if (r <= 0) {
					ret = r < 0 ? (int)r : -ENODATA;
					break;
				}
				XXH64_update(hs, rbuf, (size_t)r);
				off += (uint64_t)r;
			}
			tfs_release(f);
			lines_add(l, "%s F %llu %u %016llx%s", path, (unsigned long long)st.st_size,
				  (unsigned)st.st_nlink, (unsigned long long)XXH64_digest(hs), xa);
			XXH64_freeState(hs);
		} else {
			lines_add(l, "%s ? %o", path, st.st_mode);
		}
	}
	free(nm.v);
	return ret;
}


/* ---- the recovered tree as text ---- */
char *recovered_text(struct tfs *fs, int *ret)
{
	struct lines l = { 0 };
	char xa[512];

	*ret = fs_xattrs(fs, TFS_ROOT_INO, xa, sizeof(xa));
	lines_add(&l, "/ D%s", xa);
	if (!*ret)
		*ret = fs_walk(fs, TFS_ROOT_INO, "", &l, 0);
	return lines_join(&l);
}

/* ---- image files ---- */
void crash_mk_image(char *path, uint64_t size)
{
	const char *dir = access("/var/tmp", W_OK) == 0 ? "/var/tmp" : "/tmp";
	int fd;

	snprintf(path, 64, "%s/tfs_crash_XXXXXX", dir);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0);
	close(fd);
}

void crash_copy_image(const char *from, const char *to)
{
	int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_TRUNC);
	static char buf[1 << 20];
	ssize_t r;

	assert_true(in >= 0 && out >= 0);
	while ((r = read(in, buf, sizeof(buf))) > 0)
		assert_int_equal(write(out, buf, (size_t)r), r);
	assert_int_equal(r, 0);
	close(in);
	close(out);
}

/* ---- rng ---- */
uint64_t rng_s;
uint64_t rnd(void)
{
	rng_s ^= rng_s << 13;
	rng_s ^= rng_s >> 7;
	rng_s ^= rng_s << 17;
	return rng_s;
}

uint64_t rndn(uint64_t n)
{
	return n ? rnd() % n : 0;
}

int pick_node(int type, bool need_name)
{
	int c[MAXN], k = 0;

	for (int i = 0; i < MAXN; i++)
		if (nodes[i].live && nodes[i].type == type && (!need_name || i == 0 ||
		    (type == T_DIR ? dent_of_dir(i) >= 0 : nodes[i].nlink > 0)))
			c[k++] = i;
	return k ? c[rndn((uint64_t)k)] : -1;
}

int pick_dent(int type)
{
	int c[MAXN], k = 0;

	for (int i = 0; i < MAXN; i++)
		if (dents[i].live && (type < 0 || nodes[dents[i].node].type == type))
			c[k++] = i;
	return k ? c[rndn((uint64_t)k)] : -1;
}

bool dir_empty(int node)
{
	for (int i = 0; i < MAXN; i++)
		if (dents[i].live && dents[i].parent == node)
			return false;
	return true;
}

/* Is @a equal to or below directory @d? */
bool under(int a, int d)
{
	for (int depth = 0; depth < 64; depth++) {
		if (a == d)
			return true;
		if (a == 0)
			return false;
		a = dents[dent_of_dir(a)].parent;
	}
	return true;
}

void fill_rand(uint8_t *p, size_t len)
{
	uint64_t v = rnd();

	for (size_t i = 0; i < len; i++) {
		if ((i & 7) == 0)
			v = rnd();
		p[i] = (uint8_t)(v >> ((i & 7) * 8));
	}
}
