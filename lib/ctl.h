/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ctl: the control channel between twinfs-ctl and a running daemon.
 *
 * Transport: one ioctl on the mount's root directory, TWINFS_IOC_CTL, whose
 * argument carries a command line in and a JSON document out.  The kernel
 * hands the daemon the caller's uid with the request; the daemon serves only
 * the user who mounted and root (anyone else: EPERM), and users who cannot
 * enter the mount at all (no allow_other) are stopped by the kernel first.
 * An ioctl needs no socket path to agree on and dies with the mount.
 *
 * Commands are words separated by spaces ("status", "stats", "scrub start
 * rate=50M", "scrub status", "scrub cancel", "rebuild DEV", "replace OLD NEW",
 * "clear [DEV]"),
 * dispatched by tfs_ctl() through the command tables below.  Long jobs
 * (scrub, rebuild, replace) run in background threads; their status commands
 * return progress.
 */
#ifndef TWINFS_CTL_H
#define TWINFS_CTL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/ioctl.h>

#define TWINFS_CTL_MAX 16000

struct twinfs_ctl_msg {
	char buf[TWINFS_CTL_MAX];	/* in: command line; out: JSON (NUL-terminated) */
};

#define TWINFS_IOC_CTL _IOWR('T', 0x71, struct twinfs_ctl_msg)

struct tfs;
struct jbuf;				/* json.h */

struct ctl_cmd {
	const char *name;		/* first word(s), e.g. "scrub start" */
	const char *usage;
	/* argv excludes the name words.  Returns 0 or -errno; on error a
	 * message may be put in out as {"error": "..."}. */
	int (*fn)(struct tfs *fs, int argc, char **argv, struct jbuf *out);
};

/* Tables, each terminated by a { NULL } entry. */
extern const struct ctl_cmd ctl_core_cmds[];	/* ctl.c: status, stats, scrub ... */
extern const struct ctl_cmd ctl_dev_cmds[];	/* ctl_dev.c: rebuild, replace ... */
extern const struct ctl_cmd ctl_discard_cmds[];	/* discard.c: trim, trim status */

/* A device's error counters as JSON members (status, stats, clear). */
struct mirror_errs;
void ctl_errs_json(struct jbuf *j, const struct mirror_errs *e);

/* "HEALTHY", "DEGRADED" (a device not in sync, or a loss counted since
 * the last clear) or "UNUSABLE": status's "state". */
const char *ctl_state(struct tfs *fs);

/* Run one command line; out receives a NUL-terminated JSON document.
 * Returns 0 or -errno (the JSON then holds {"error": "..."}). */
int tfs_ctl(struct tfs *fs, const char *cmdline, char *out, size_t outlen);
/* "50M", "1G", "4096", "2k": bytes (1024-based suffixes); 0 or -EINVAL.
 * Also the daemon's size options. */
int ctl_parse_size(const char *s, uint64_t *out);

#endif
