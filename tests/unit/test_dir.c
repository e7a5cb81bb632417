// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: directories: set/lookup/del, cookies kept on replace, iteration while deleting, a pass bounded by dir_end while renaming, large listings, odd and long names, the child type a tree item gave, random model. */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "dir.h"

static int set_s(struct dir *d, const char *s, uint64_t ino)
{
	return dir_set(d, s, strlen(s), ino);
}

/* Format v2 loads entries with their cookies (dir_set_at, ascending):
 * readdir hands out the same ones, and new names go past the largest. */
static void test_set_at(void **state)
{
	struct dir *d = dir_new();
	uint64_t ino = 0, ck = 0;
	struct dir_ent e;

	(void)state;
	assert_non_null(d);
	assert_int_equal(dir_set_at(d, "x", 1, 10, 5, DT_REG), 0);
	assert_int_equal(dir_set_at(d, "y", 1, 11, 9, DT_DIR), 0);
	assert_int_equal(dir_set_at(d, "z", 1, 12, 9, DT_REG), -EINVAL);	/* below dir_end */
	assert_int_equal(dir_set_at(d, "x", 1, 12, 20, DT_REG), -EEXIST);
	assert_int_equal(dir_end(d), 10);
	assert_int_equal(dir_next(d, 0, &e), 0);
	assert_int_equal(e.cookie, 5);
	assert_int_equal(dir_next(d, 6, &e), 0);
	assert_int_equal(e.cookie, 9);
	assert_string_equal(e.name, "y");
	assert_int_equal(dir_set(d, "w", 1, 13), 0);
	assert_int_equal(dir_lookup_cookie(d, "w", 1, &ino, &ck), 0);
	assert_int_equal(ino, 13);
	assert_int_equal(ck, 10);
	assert_int_equal(dir_lookup_cookie(d, "q", 1, &ino, &ck), -ENOENT);
	dir_free(d);
}

/* The type an item recorded comes back from dir_next, so a plain readdir
 * needs no child read in; a name set or replaced since (another inode,
 * maybe of another type) has it unknown, and readdir reads the child. */
static void test_dtype(void **state)
{
	struct dir *d = dir_new();
	struct dir_ent e;

	(void)state;
	assert_non_null(d);
	assert_int_equal(dir_set_at(d, "a", 1, 10, 2, DT_REG), 0);
	assert_int_equal(dir_set_at(d, "b", 1, 11, 3, DT_DIR), 0);
	assert_int_equal(dir_set(d, "c", 1, 12), 0);
	assert_int_equal(dir_next(d, 2, &e), 0);
	assert_int_equal(e.dtype, DT_REG);
	assert_int_equal(dir_next(d, 3, &e), 0);
	assert_int_equal(e.dtype, DT_DIR);
	assert_int_equal(dir_next(d, 4, &e), 0);
	assert_int_equal(e.dtype, DT_UNKNOWN);
	assert_int_equal(dir_set(d, "a", 1, 13), 0);	/* replaced */
	assert_int_equal(dir_next(d, 2, &e), 0);
	assert_int_equal(e.ino, 13);
	assert_int_equal(e.dtype, DT_UNKNOWN);
	assert_int_equal(dir_set_dtype(d, "a", 1, DT_LNK), 0);	/* a checkpoint learned it */
	assert_int_equal(dir_next(d, 2, &e), 0);
	assert_int_equal(e.dtype, DT_LNK);
	assert_int_equal(dir_set_dtype(d, "nope", 4, DT_REG), -ENOENT);
	dir_free(d);
}

static void test_basic(void **state)
{
	struct dir *d = dir_new();
	uint64_t ino = 0;
	struct dir_ent e;

	assert_non_null(d);
	assert_int_equal(dir_count(d), 0);
	assert_int_equal(dir_next(d, 0, &e), -ENOENT);
	assert_int_equal(dir_lookup(d, "a", 1, &ino), -ENOENT);
	assert_int_equal(set_s(d, "a", 10), 0);
	assert_int_equal(set_s(d, "b", 11), 0);
	assert_int_equal(set_s(d, "c", 12), 0);
	assert_int_equal(dir_count(d), 3);
	assert_int_equal(dir_lookup(d, "b", 1, &ino), 0);
	assert_int_equal(ino, 11);

	/* Cookies start at 2 and go up in insertion order. */
	assert_int_equal(dir_next(d, 0, &e), 0);
	assert_int_equal(e.cookie, 2);
	assert_string_equal(e.name, "a");
	assert_int_equal(e.namelen, 1);
	assert_int_equal(e.ino, 10);
	assert_int_equal(dir_next(d, 3, &e), 0);
	assert_string_equal(e.name, "b");
	assert_int_equal(e.cookie, 3);

	/* Replace keeps the cookie. */
	assert_int_equal(set_s(d, "a", 99), 0);
	assert_int_equal(dir_count(d), 3);
	assert_int_equal(dir_next(d, 2, &e), 0);
	assert_int_equal(e.cookie, 2);
	assert_int_equal(e.ino, 99);

	assert_int_equal(dir_del(d, "b", 1), 0);
	assert_int_equal(dir_del(d, "b", 1), -ENOENT);
	assert_int_equal(dir_lookup(d, "b", 1, &ino), -ENOENT);
	assert_int_equal(dir_count(d), 2);
	/* A deleted cookie resumes at the next live one. */
	assert_int_equal(dir_next(d, 3, &e), 0);
	assert_int_equal(e.cookie, 4);
	assert_string_equal(e.name, "c");
	assert_int_equal(dir_next(d, 5, &e), -ENOENT);
	assert_int_equal(dir_next(d, UINT64_MAX, &e), -ENOENT);

	/* Re-adding a deleted name gets a new cookie: cookies are never reused. */
	assert_int_equal(set_s(d, "b", 13), 0);
	assert_int_equal(dir_next(d, 3, &e), 0);
	assert_string_equal(e.name, "c");
	assert_int_equal(dir_next(d, 5, &e), 0);
	assert_string_equal(e.name, "b");
	assert_int_equal(e.cookie, 5);

	assert_int_equal(dir_set(d, "x", 0, 1), -EINVAL);
	dir_free(d);
	dir_free(NULL);
}

static void test_names(void **state)
{
	struct dir *d = dir_new();
	char longname[256], buf[300];
	uint64_t ino;
	struct dir_ent e;

	assert_non_null(d);
	memset(longname, 'x', sizeof(longname));
	assert_int_equal(dir_set(d, longname, 255, 1), 0);
	assert_int_equal(dir_set(d, longname, 256, 2), -ENAMETOOLONG);
	assert_int_equal(dir_lookup(d, longname, 254, &ino), -ENOENT);
	assert_int_equal(dir_lookup(d, longname, 255, &ino), 0);
	assert_int_equal(ino, 1);
	assert_int_equal(dir_next(d, 0, &e), 0);
	assert_int_equal(e.namelen, 255);
	assert_int_equal(strlen(e.name), 255);

	/* Input not NUL-terminated: only namelen bytes count. */
	assert_int_equal(dir_set(d, "abcdef", 2, 3), 0);
	assert_int_equal(dir_lookup(d, "ab", 2, &ino), 0);
	assert_int_equal(ino, 3);
	assert_int_equal(dir_lookup(d, "abc", 3, &ino), -ENOENT);
	assert_int_equal(dir_next(d, 3, &e), 0);
	assert_int_equal(e.namelen, 2);
	assert_string_equal(e.name, "ab");

	/* Odd bytes, embedded NUL, prefixes. */
	const char *odd[] = { "\0ab", "\0ac", "a\nb", "\xff\xfe\x01", "a b", "ab\0" };
	const size_t oddlen[] = { 3, 3, 3, 3, 3, 3 };
	for (unsigned i = 0; i < 6; i++)
		assert_int_equal(dir_set(d, odd[i], oddlen[i], 100 + i), 0);
	assert_int_equal(dir_count(d), 8);
	for (unsigned i = 0; i < 6; i++) {
		assert_int_equal(dir_lookup(d, odd[i], oddlen[i], &ino), 0);
		assert_int_equal(ino, 100 + i);
	}
	uint64_t c = 0;
	unsigned seen = 0;
	while (dir_next(d, c, &e) == 0) {
		if (e.ino >= 100) {
			unsigned i = (unsigned)(e.ino - 100);
			assert_int_equal(e.namelen, oddlen[i]);
			assert_memory_equal(e.name, odd[i], oddlen[i]);
			assert_int_equal(e.name[e.namelen], '\0');
			seen++;
		}
		c = e.cookie + 1;
	}
	assert_int_equal(seen, 6);
	snprintf(buf, sizeof(buf), "%s", "\xff\xfe\x01");
	assert_int_equal(dir_del(d, buf, 3), 0);
	assert_int_equal(dir_lookup(d, "\xff\xfe\x01", 3, &ino), -ENOENT);
	dir_free(d);
}

static void name_of(char *buf, size_t sz, unsigned i)
{
	snprintf(buf, sz, "file-%u", i);
}

/* Delete during iteration: every entry never deleted is visited exactly once, in order. */
static void test_iterate_while_deleting(void **state)
{
	enum { N = 5000 };
	struct dir *d = dir_new();
	unsigned char *visited = calloc(N + 1000, 1), *deleted = calloc(N + 1000, 1);
	char name[32];
	struct dir_ent e;
	unsigned seed = 7, added = 0;
	uint64_t c = 0, last = 0;

	assert_non_null(d);
	for (unsigned i = 0; i < N; i++) {
		name_of(name, sizeof(name), i);
		assert_int_equal(set_s(d, name, i), 0);
	}
	while (dir_next(d, c, &e) == 0) {
		assert_true(e.cookie > last);
		last = e.cookie;
		assert_false(deleted[e.ino]);
		assert_int_equal(visited[e.ino], 0);
		visited[e.ino] = 1;
		c = e.cookie + 1;
		uint64_t cur = e.ino;
		/* Delete the current entry half the time (the name pointer dies), and a
		 * random other one, before or after the cursor. */
		if (rand_r(&seed) % 2) {
			name_of(name, sizeof(name), (unsigned)cur);
			assert_int_equal(set_s(d, name, cur), 0);	/* replace: no effect on order */
			assert_int_equal(dir_del(d, name, strlen(name)), 0);
			deleted[cur] = 2;	/* deleted after its visit */
		}
		unsigned victim = (unsigned)rand_r(&seed) % N;
		name_of(name, sizeof(name), victim);
		if (!deleted[victim] && victim != cur) {
			assert_int_equal(dir_del(d, name, strlen(name)), 0);
			deleted[victim] = visited[victim] ? 2 : 1;
		}
		if (added < 1000 && rand_r(&seed) % 8 == 0) {
			name_of(name, sizeof(name), N + added);
			assert_int_equal(set_s(d, name, N + added), 0);
			added++;
		}
	}
	for (unsigned i = 0; i < N + added; i++) {
		if (deleted[i] == 1)
			assert_int_equal(visited[i], 0);
		else
			assert_int_equal(visited[i], 1);	/* includes entries added during the walk */
	}
	free(visited);
	free(deleted);
	dir_free(d);
}

/* Big directories: a quadratic listing or an O(n) skip over deleted
 * entries per call would not finish within the test timeout. */
static void test_large(void **state)
{
	enum { N = 300000, RESTARTS = 100000 };
	struct dir *d = dir_new();
	char name[32];
	struct dir_ent e;
	uint64_t c = 0, n = 0, ino;

	assert_non_null(d);
	for (unsigned i = 0; i < N; i++) {
		name_of(name, sizeof(name), i);
		assert_int_equal(set_s(d, name, i), 0);
	}
	assert_int_equal(dir_count(d), N);
	while (dir_next(d, c, &e) == 0) {
		assert_int_equal(e.ino, n);	/* insertion order */
		n++;
		c = e.cookie + 1;
	}
	assert_int_equal(n, N);

	/* Delete the first half: no compaction (dead == live), a long dead prefix. */
	for (unsigned i = 0; i < N / 2; i++) {
		name_of(name, sizeof(name), i);
		assert_int_equal(dir_del(d, name, strlen(name)), 0);
	}
	for (unsigned i = 0; i < RESTARTS; i++) {
		assert_int_equal(dir_next(d, 2 + i % 1000, &e), 0);
		assert_int_equal(e.ino, N / 2);
	}
	/* Delete all but the last: compaction; cookies survive it. */
	for (unsigned i = N / 2; i < N - 1; i++) {
		name_of(name, sizeof(name), i);
		assert_int_equal(dir_del(d, name, strlen(name)), 0);
	}
	assert_int_equal(dir_count(d), 1);
	for (unsigned i = 0; i < RESTARTS; i++) {
		assert_int_equal(dir_next(d, 2 + i, &e), 0);
		assert_int_equal(e.ino, N - 1);
		assert_int_equal(e.cookie, 2 + N - 1);
	}
	assert_int_equal(dir_next(d, 2 + N, &e), -ENOENT);
	name_of(name, sizeof(name), N - 1);
	assert_int_equal(dir_lookup(d, name, strlen(name), &ino), 0);
	assert_int_equal(ino, N - 1);
	dir_free(d);
}

/* Random operations against a plain array model. */
static void test_random_model(void **state)
{
	enum { POOL = 3000, OPS = 200000 };
	struct dir *d = dir_new();
	uint64_t *cookie = calloc(POOL, sizeof(uint64_t)), *inos = calloc(POOL, sizeof(uint64_t));
	uint64_t next = 2, live = 0;
	unsigned seed = 99;
	char name[32];

	assert_non_null(d);
	for (unsigned op = 0; op < OPS; op++) {
		unsigned k = (unsigned)rand_r(&seed) % POOL, kind = (unsigned)rand_r(&seed) % 3;
		uint64_t ino;
		name_of(name, sizeof(name), k);
		if (kind == 0) {
			uint64_t v = (uint64_t)rand_r(&seed) + 1;
			assert_int_equal(set_s(d, name, v), 0);
			if (!cookie[k]) {
				cookie[k] = next++;
				live++;
			}
			inos[k] = v;
		} else if (kind == 1) {
			assert_int_equal(dir_del(d, name, strlen(name)), cookie[k] ? 0 : -ENOENT);
			if (cookie[k])
				live--;
			cookie[k] = 0;
		} else {
			int r = dir_lookup(d, name, strlen(name), &ino);
			assert_int_equal(r, cookie[k] ? 0 : -ENOENT);
			if (!r)
				assert_int_equal(ino, inos[k]);
		}
		assert_int_equal(dir_count(d), live);
		if (op % 1000 == 0) {
			/* Resume at a random cookie: the model's next live cookie. */
			uint64_t q = 2 + (uint64_t)rand_r(&seed) % (next - 1), best = UINT64_MAX;
			unsigned who = 0;
			for (unsigned i = 0; i < POOL; i++)
				if (cookie[i] >= q && cookie[i] < best) {
					best = cookie[i];
					who = i;
				}
			struct dir_ent e;
			int r = dir_next(d, q, &e);
			if (best == UINT64_MAX) {
				assert_int_equal(r, -ENOENT);
			} else {
				assert_int_equal(r, 0);
				assert_int_equal(e.cookie, best);
				name_of(name, sizeof(name), who);
				assert_string_equal(e.name, name);
				assert_int_equal(e.ino, inos[who]);
			}
		}
	}
	free(cookie);
	free(inos);
	dir_free(d);
}

/* A listing that stops at dir_end() taken when it began, while every
 * entry is renamed (delete + set, as a rename in one directory does) right
 * after it is listed: each name at most once, every untouched entry
 * exactly once. */
static void test_pass_bounded_while_renaming(void **state)
{
	enum { N = 600 };
	struct dir *d = dir_new();
	static unsigned seen[2 * N];
	char name[16];
	struct dir_ent e;
	uint64_t end, cookie = 0;
	unsigned listed = 0;

	assert_non_null(d);
	for (unsigned i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "%c%u", i % 2 ? 'm' : 's', i);
		assert_int_equal(set_s(d, name, 100 + i), 0);
	}
	end = dir_end(d);
	while (dir_next(d, cookie, &e) == 0 && e.cookie < end) {
		unsigned i = (unsigned)atoi(e.name + 1);
		cookie = e.cookie + 1;
		listed++;
		seen[e.name[0] == 'r' ? N + i : i]++;
		if (e.name[0] == 'm') {	/* renamed to r<i>: a new, larger cookie */
			char to[16];
			snprintf(name, sizeof(name), "m%u", i);
			snprintf(to, sizeof(to), "r%u", i);
			assert_int_equal(dir_del(d, name, strlen(name)), 0);
			assert_int_equal(set_s(d, to, 100 + i), 0);
		}
	}
	assert_int_equal(listed, N);
	for (unsigned i = 0; i < N; i++) {
		assert_int_equal(seen[i], 1);		/* s<i> and m<i>, once */
		assert_int_equal(seen[N + i], 0);	/* r<i>: past the end */
	}
	/* A new pass sees the new names. */
	assert_true(dir_end(d) > end);
	assert_int_equal(dir_count(d), N);
	dir_free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_basic),
		cmocka_unit_test(test_set_at),
		cmocka_unit_test(test_dtype),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_iterate_while_deleting),
		cmocka_unit_test(test_pass_bounded_while_renaming),
		cmocka_unit_test(test_large),
		cmocka_unit_test(test_random_model),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
