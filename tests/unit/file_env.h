/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Description: file_env.h: fixtures of the data-path unit tests (test_file,
 * test_file_space): two sparse images, formatted and mounted on one backend,
 * and the checks those tests make.  Failures are cmocka assertions.
 * Include after <cmocka.h>.
 */
#ifndef TWINFS_FILE_ENV_H
#define TWINFS_FILE_ENV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fs_i.h"
#include "inode_i.h"	/* tests look inside inodes */

#define BS 4096u
#define MiB (1024u * 1024u)

struct env {
	char img[2][64];
	const char *backend;
	unsigned commit_ms;	/* 0: the default background commit */
	const char *fault;	/* dev_fault_parse() spec, or NULL */
	bool compact_dirty;	/* -o compact_dirty (from the next env_mount) */
	struct tfs *fs;
	struct tfs_cred cred;
};

/* The mounted fs of the running test, which teardown() abandons if an
 * assertion left the test early; tests that mount by hand keep it current. */
extern struct tfs *live_fs;

/* Mount e->img on e->backend; 0 or -errno (printed). */
int env_mount(struct env *e);
void env_umount(struct env *e);
void env_remount(struct env *e);
/* Make, format and mount two images of @size bytes on @backend: 0, or 1
 * when the backend is not available here (skip). */
int env_init(struct env *e, const char *backend, uint64_t size);
/* The same in format v2 (@v2) or v1 (env_init's). */
int env_init_fmt(struct env *e, const char *backend, uint64_t size, bool v2);
void env_fini(struct env *e);
/* cmocka teardown of every test: abandons live_fs, removes the images. */
int teardown(void **state);

struct tfs_file *mkfile(struct env *e, const char *name);
struct tfs_file *reopen(struct env *e, const char *name);
uint64_t fsize(struct tfs_file *f);
void pwrite_ok(struct tfs_file *f, const void *p, size_t len, off_t off);
/* The whole file equals model[0, size). */
void check_model(struct tfs_file *f, const uint8_t *model, uint64_t size);
void fill_pattern(uint8_t *p, size_t len, unsigned seed);
/* The extent entry of file block @fblk. */
struct extent_ent ent(struct tfs_file *f, uint64_t fblk);
/* Every mapped, written block verifies on each image read raw; returns the
 * number of blocks checked (both images). */
uint64_t check_raw(struct env *e, struct tfs_file *f);

#endif
