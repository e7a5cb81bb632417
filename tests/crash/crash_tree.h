/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Description: crash_tree.h: the crash explorer's model of the file system (what the
 * workload did, in memory) and the text both sides are compared as: one
 * sorted line per name (type, size, links, content hash, xattrs), built
 * from the model (model_text) or from a mounted crash state
 * (recovered_text).  The workload and the explorer are test_crash.c.
 * Failures are cmocka assertions: include after <cmocka.h>.
 */
#ifndef TWINFS_CRASH_TREE_H
#define TWINFS_CRASH_TREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tfs.h"

#define MAXN 512		/* model nodes / dentries */
#define NXA 2

extern const char *const xa_names[NXA];

enum { T_FILE, T_DIR, T_LINK };

struct mnode {
	bool live;
	int type;
	uint64_t ino;
	uint8_t *data;
	size_t size, cap;
	int nlink;		/* names (files) */
	bool xset[NXA];
	uint8_t xv[NXA][24];
	uint32_t xl[NXA];
	char target[24];
	struct tfs_file *fh;
	bool tmpfile;		/* made by tfs_tmpfile: link may name it */
	uint64_t hash;
	bool hash_ok;
};

struct mdent {
	bool live;
	int parent, node;	/* mnode indexes; node 0 is the root */
	char name[16];
};

extern struct mnode nodes[MAXN];
extern struct mdent dents[MAXN];
extern unsigned name_ctr;	/* makes names unique */
/* TFS_IO_MAX bytes, aligned; allocated by the test's setup. */
extern uint8_t *rbuf;

struct lines {
	char **v;
	size_t n, cap;
};

void model_reset(void);
int node_new(int type, uint64_t ino);
int dent_new(int parent, const char *name, int node);
int dent_of_dir(int node);
void path_of(int parent, const char *name, char *out, size_t len);
void file_resize(struct mnode *n, size_t size);
uint64_t node_hash(struct mnode *n);
void lines_add(struct lines *l, const char *fmt, ...);
char *lines_join(struct lines *l);
char *model_text(void);
char *recovered_text(struct tfs *fs, int *ret);
/* The workload's random numbers (xorshift; rng_s is the state, never 0)
 * and its random picks from the model: a live node of @type (with a name
 * unless it is the root, for need_name), a live name of a node of @type
 * (any type: < 0); -1 when there is none. */
extern uint64_t rng_s;
uint64_t rnd(void);
uint64_t rndn(uint64_t n);
int pick_node(int type, bool need_name);
int pick_dent(int type);
bool dir_empty(int node);
/* Is @a equal to or below directory @d? */
bool under(int a, int d);
void fill_rand(uint8_t *p, size_t len);
/* Image files: a sparse one of @size bytes under /var/tmp (or /tmp), its
 * name into @path (64 bytes); a copy of one over another. */
void crash_mk_image(char *path, uint64_t size);
void crash_copy_image(const char *from, const char *to);

#endif
