/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * furing_uapi.h: the part of the FUSE-over-io_uring uAPI that furing.c
 * speaks.  Debian 12's <linux/fuse.h> (protocol 7.38) predates it; these
 * mirror include/uapi/linux/fuse.h of Linux 6.14+ (protocol 7.42,
 * "FUSE_OVER_IO_URING and all other io-uring related flags and data"),
 * as fs/fuse/dev_uring.c reads and writes them.  The static asserts pin
 * the sizes the kernel checks (the header iovec must hold
 * struct fuse_uring_req_header; the command sits in the SQE128's 80
 * command bytes).
 */
#ifndef TWINFS_FURING_UAPI_H
#define TWINFS_FURING_UAPI_H

#include <stdint.h>

#include <linux/fuse.h>

#define TFSD_FUSE_URING_IN_OUT_HEADER_SZ 128
#define TFSD_FUSE_URING_OP_IN_OUT_SZ 128

/* struct fuse_uring_ent_in_out: written by the kernel with a request
 * (commit_id, payload_sz) and by us with its reply (payload_sz). */
struct tfsd_uring_ent_in_out {
	uint64_t flags;
	uint64_t commit_id;	/* the request's unique id */
	uint32_t payload_sz;	/* bytes used in the payload buffer */
	uint32_t padding;
	uint64_t reserved;
};

/* struct fuse_uring_req_header: iov[0] of every ring entry.  in_out holds
 * the fuse_in_header of a request, then our fuse_out_header; op_in the
 * request's first argument (its per-opcode header, 0 bytes for some). */
struct tfsd_uring_req_header {
	char in_out[TFSD_FUSE_URING_IN_OUT_HEADER_SZ];
	char op_in[TFSD_FUSE_URING_OP_IN_OUT_SZ];
	struct tfsd_uring_ent_in_out ring_ent_in_out;
};

/* enum fuse_uring_cmd: the sqe->cmd_op of an IORING_OP_URING_CMD. */
enum {
	TFSD_FUSE_IO_URING_CMD_REGISTER = 1,		/* hand an entry to the kernel */
	TFSD_FUSE_IO_URING_CMD_COMMIT_AND_FETCH = 2,	/* reply, take the next request */
};

/* struct fuse_uring_cmd_req: in the SQE's command bytes. */
struct tfsd_uring_cmd_req {
	uint64_t flags;
	uint64_t commit_id;	/* COMMIT_AND_FETCH: the request answered */
	uint16_t qid;		/* the queue (the CPU) the entry belongs to */
	uint8_t padding[6];
};

_Static_assert(sizeof(struct tfsd_uring_ent_in_out) == 32, "fuse_uring_ent_in_out");
_Static_assert(sizeof(struct tfsd_uring_req_header) == 288, "fuse_uring_req_header");
_Static_assert(sizeof(struct tfsd_uring_cmd_req) == 24, "fuse_uring_cmd_req");
_Static_assert(sizeof(struct fuse_in_header) <= TFSD_FUSE_URING_IN_OUT_HEADER_SZ, "in_out");

#endif
