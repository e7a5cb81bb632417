/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Description: testlib.h: fixtures the whole-fs unit tests share (test_fsck, test_namei,
 * test_mount, test_scrub, test_rebuild): temp images, format and mount with
 * the test defaults, the data pattern.  Failures are cmocka assertions.
 * Include after <cmocka.h>.
 */
#ifndef TWINFS_TESTLIB_H
#define TWINFS_TESTLIB_H

#include <stddef.h>
#include <stdint.h>

#include "tfs.h"

#define TL_PATH_MAX 64		/* size of an image path buffer */

/* The I/O backend: "file" unless TFS_TEST_BACKEND=uring|aio|auto asks to
 * run the same cases on another one. */
const char *tl_backend(void);
/* TFS_TEST_WHOLE_NODES set (not 0): images formatted without short nodes
 * (mkfs -O ^short_nodes), for the *_whole_nodes runs of a test. */
bool tl_whole_nodes(void);
/* TFS_TEST_PIECES set (not 0): images formatted with leaf pieces (mkfs -O
 * pieces: pointers carry nblocks), for the *_pieces runs of a test. */
bool tl_pieces(void);

/* A sparse temp image of @size bytes named <tag>_XXXXXX under /var/tmp
 * (real disk: O_DIRECT works there) or /tmp; the caller unlinks it. */
void tl_mk_image(char path[TL_PATH_MAX], const char *tag, uint64_t size);
/* n of them, devs[i] pointing at img[i]. */
void tl_mk_images(char img[][TL_PATH_MAX], const char **devs, unsigned n, const char *tag,
		  uint64_t size);
void tl_rm_images(char img[][TL_PATH_MAX], unsigned n);

/* Format (forced) on @backend (NULL: tl_backend()); prints the error line. */
void tl_format(const char *const *devs, unsigned n, const char *backend);
/* Mount options with the test defaults: tl_backend(), commits only on
 * explicit syncs, 8 bounce buffers.  Callers change fields after. */
void tl_mount_opts(struct tfs_opts *o, const char *const *devs, unsigned n);
/* Mount that must succeed; prints the error line if it does not. */
struct tfs *tl_mount(const struct tfs_opts *o);

/* fsck.twinfs in @mode (enum fsck_mode) on @devs with @backend: its exit
 * code; *out (if not NULL) gets the report, to free.  The report goes to
 * stderr too with TFS_TEST_VERBOSE. */
int tl_fsck(const char *const *devs, unsigned n, int mode, const char *backend, char **out);

/* The data pattern of test files: byte i of seed s, never all zero. */
void tl_pattern(uint8_t *p, size_t len, unsigned seed);

#endif
