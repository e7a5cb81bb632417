// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Description: nouring: run a command the way container runtimes' default seccomp
 * profiles (Docker, Podman) run it with respect to io_uring: every
 * io_uring_setup/enter/register call fails with EPERM.  The integration
 * tests run the daemon under it to check the automatic libaio fallback.
 *
 *   nouring CMD [ARGS...]
 *
 * Without CAP_SYS_ADMIN the filter needs no_new_privs, which would also
 * stop fusermount3 from being setuid: run it as root.
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef __NR_io_uring_setup
#define __NR_io_uring_setup 425
#define __NR_io_uring_enter 426
#define __NR_io_uring_register 427
#endif

#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH AUDIT_ARCH_AARCH64
#else
#error "nouring: add this architecture's AUDIT_ARCH"
#endif

#define DENY(nr) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), \
	BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA))

int main(int argc, char *argv[])
{
	struct sock_filter f[] = {
		/* Another architecture's numbers mean other calls: allow. */
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		DENY(__NR_io_uring_setup),
		DENY(__NR_io_uring_enter),
		DENY(__NR_io_uring_register),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };

	if (argc < 2) {
		fprintf(stderr, "usage: nouring CMD [ARGS...]\n");
		return 2;
	}
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0) {
		fprintf(stderr, "nouring: PR_SET_SECCOMP: %s\n", strerror(errno));
		return 1;
	}
	execvp(argv[1], argv + 1);
	fprintf(stderr, "nouring: %s: %s\n", argv[1], strerror(errno));
	return 127;
}
