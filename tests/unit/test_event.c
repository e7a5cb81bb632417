// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: the event queue: while the command runs, equal events merge (TWINFS_COUNT), a full queue drops and counts (event_dropped, TWINFS_DROPPED on the next one delivered), everything queued is delivered in order once the command returns, and a relative event_cmd refuses the mount. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "event.h"
#include "fs_i.h"
#include "testlib.h"

static char img[2][TL_PATH_MAX];
static const char *devs[2];
static char dir[] = "/tmp/tfs_event_XXXXXX";
static char script[128], out[128], started[128], go[128];

static int setup(void **state)
{
	FILE *f;

	assert_non_null(mkdtemp(dir));
	snprintf(script, sizeof(script), "%s/ev.sh", dir);
	snprintf(out, sizeof(out), "%s/out", dir);
	snprintf(started, sizeof(started), "%s/started", dir);
	snprintf(go, sizeof(go), "%s/go", dir);
	/* The first event (space_ok) holds the thread until "go" exists. */
	f = fopen(script, "w");
	assert_non_null(f);
	fprintf(f, "#!/bin/sh\n"
		"echo \"$TWINFS_EVENT $TWINFS_DEVICE_SLOT $TWINFS_COUNT $TWINFS_DROPPED\" >>%s\n"
		"if [ \"$TWINFS_EVENT\" = space_ok ]; then\n"
		"  : >%s\n"
		"  i=0; while [ ! -e %s ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done\n"
		"fi\n", out, started, go);
	fclose(f);
	assert_int_equal(chmod(script, 0755), 0);
	tl_mk_images(img, devs, 2, "tfs_event", 64ull << 20);
	tl_format(devs, 2, NULL);
	return 0;
}

static int teardown(void **state)
{
	tl_rm_images(img, 2);
	unlink(script);
	unlink(out);
	unlink(started);
	unlink(go);
	rmdir(dir);
	return 0;
}

static void wait_file(const char *path, unsigned lines)
{
	for (int i = 0; i < 400; i++) {
		FILE *f = fopen(path, "r");
		unsigned n = 0;
		int c;

		if (f) {
			while ((c = fgetc(f)) != EOF)
				n += c == '\n';
			fclose(f);
			if (n >= lines)
				return;
		}
		usleep(25000);
	}
	fail_msg("%s: fewer than %u lines after 10 s", path, lines);
}

static void test_merge_drop_deliver(void **state)
{
	struct tfs_opts o;
	struct tfs *fs;
	char line[128], *all = NULL;
	size_t cap = 0, len = 0;
	unsigned nline = 0;
	FILE *f;

	tl_mount_opts(&o, devs, 2);
	o.event_cmd = script;
	o.mountpoint = "/mnt/x";
	fs = tl_mount(&o);

	event_emit(fs, &(struct event){ .kind = EV_SPACE_OK, .slot = -1 }, "blocker");
	wait_file(started, 0);
	/* Three equal events: one queue slot, count 3. */
	for (int i = 0; i < 3; i++)
		event_emit(fs, &(struct event){ .kind = EV_SCRUB_DONE, .slot = -1 }, "scrub %d", i);
	/* 70 distinct ones: 63 fit beside it, 7 are dropped. */
	for (int i = 0; i < 70; i++)
		event_emit(fs, &(struct event){ .kind = EV_DEVICE_FAILED, .slot = 10 + i },
			   "dev %d", i);
	assert_int_equal(event_dropped(fs), 7);
	f = fopen(go, "w");
	assert_non_null(f);
	fclose(f);
	wait_file(out, 1 + 1 + 63);
	tfs_unmount(fs);

	f = fopen(out, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		size_t n = strlen(line);

		all = realloc(all, cap = len + n + 1);
		memcpy(all + len, line, n + 1);
		len += n;
		nline++;
	}
	fclose(f);
	assert_int_equal(nline, 65);
	/* In order; the merged one says 3 and carries the drops. */
	assert_non_null(strstr(all, "space_ok  1 0\nscrub_done  3 7\ndevice_failed 10 1 0\n"));
	assert_non_null(strstr(all, "device_failed 72 1 0\n"));
	assert_null(strstr(all, "device_failed 73 "));
	(void)cap;
	free(all);
}

static void test_relative_cmd(void **state)
{
	struct tfs_opts o;
	struct tfs *fs = NULL;
	char err[256] = "";

	tl_mount_opts(&o, devs, 2);
	o.event_cmd = "ev.sh";
	assert_int_equal(tfs_mount(&o, &fs, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "events"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_merge_drop_deliver),
		cmocka_unit_test(test_relative_cmd),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
