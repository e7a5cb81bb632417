/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Description: aclent.h: POSIX ACL values in the kernel's xattr form
 * (acl.h) built from entry lists, and an entry's permissions read back,
 * for the tests of the ACL rules (test_acl) and of fsck's ACL checks
 * (test_fsck_v2_acl).
 */
#ifndef TWINFS_ACLENT_H
#define TWINFS_ACLENT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum { UO = 0x01, U = 0x02, GO = 0x04, G = 0x08, MASK = 0x10, OTH = 0x20 };

struct ent {
	uint16_t tag, perm;
	uint32_t id;
};

/* The xattr form of @n entries into @buf; its size. */
static inline size_t mk(uint8_t *buf, const struct ent *e, size_t n)
{
	memset(buf, 0, 4);
	buf[0] = 2;
	for (size_t i = 0; i < n; i++) {
		uint8_t *p = buf + 4 + 8 * i;

		p[0] = (uint8_t)e[i].tag;
		p[1] = (uint8_t)(e[i].tag >> 8);
		p[2] = (uint8_t)e[i].perm;
		p[3] = 0;
		memcpy(p + 4, &e[i].id, 4);	/* little-endian host */
	}
	return 4 + 8 * n;
}

/* The permissions of the first entry tagged @tag; 0xffff if none. */
static inline uint16_t perm_of(const uint8_t *buf, size_t size, uint16_t tag)
{
	for (size_t off = 4; off < size; off += 8)
		if (buf[off] == tag)
			return buf[off + 2];
	return 0xffff;
}

#endif
