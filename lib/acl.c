// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * acl: the POSIX ACL rules the file system applies itself under
 * FUSE_POSIX_ACL (the kernel checks permissions and ownership, validates
 * what it passes, but leaves the mode, chmod and inheritance to us).
 * Same semantics as the kernel's fs/posix_acl.c, written for the xattr
 * form (see acl.h).  Every function but acl_valid expects a valid value.
 */
#include <errno.h>
#include <string.h>

#include "acl.h"
#include "le.h"

#define ACL_VERSION	2
#define ACL_HDR		4
#define ACL_ENT		8

enum {
	TAG_USER_OBJ = 0x01, TAG_USER = 0x02, TAG_GROUP_OBJ = 0x04,
	TAG_GROUP = 0x08, TAG_MASK = 0x10, TAG_OTHER = 0x20,
};

static size_t acl_count(size_t size)
{
	return (size - ACL_HDR) / ACL_ENT;
}

static uint16_t tag(const void *val, size_t i)
{
	return le16_get((const uint8_t *)val + ACL_HDR + i * ACL_ENT);
}

static uint16_t perm(const void *val, size_t i)
{
	return le16_get((const uint8_t *)val + ACL_HDR + i * ACL_ENT + 2) & 7;
}

static void set_perm(void *val, size_t i, uint16_t p)
{
	le16_put((uint8_t *)val + ACL_HDR + i * ACL_ENT + 2, p & 7);
}

bool acl_name(const char *name)
{
	return !strcmp(name, ACL_XATTR_ACCESS) || !strcmp(name, ACL_XATTR_DEFAULT);
}

/*
 * posix_acl_valid (fs/posix_acl.c), as its states: USER_OBJ, any USER,
 * GROUP_OBJ, any GROUP, a MASK (required when there are named entries),
 * OTHER, and nothing after.  Like the kernel it checks neither the order
 * nor the uniqueness of the named entries' ids: a setxattr of users 2000,
 * 1000, 1000 is accepted on tmpfs and ext4 and read back as written (only
 * the ids of the other entries come back as ACL_UNDEFINED_ID), so FUSE
 * passes such a value on and it must be stored as is.
 */
const char *acl_invalid(const void *val, size_t size)
{
	enum { S_USER_OBJ, S_USER, S_GROUP, S_OTHER, S_END } state = S_USER_OBJ;
	const uint8_t *p = val;
	bool named = false;

	if (size < ACL_HDR || (size - ACL_HDR) % ACL_ENT)
		return "its size is not a header and whole 8-byte entries";
	if (size > ACL_XATTR_MAX)
		return "larger than 4096 bytes";
	if (le32_get(p) != ACL_VERSION)
		return "not a version 2 ACL";
	for (size_t i = 0; i < acl_count(size); i++) {
		uint16_t t = tag(val, i);

		if (le16_get(p + ACL_HDR + i * ACL_ENT + 2) & ~7u)
			return "an entry has permission bits beyond rwx";
		switch (t) {
		case TAG_USER_OBJ:
			if (state != S_USER_OBJ)
				goto order;
			state = S_USER;
			break;
		case TAG_USER:
		case TAG_GROUP:
			if (state != (t == TAG_USER ? S_USER : S_GROUP))
				goto order;
			named = true;
			break;
		case TAG_GROUP_OBJ:
			if (state != S_USER)
				goto order;
			state = S_GROUP;
			break;
		case TAG_MASK:
			if (state != S_GROUP)
				goto order;
			state = S_OTHER;
			break;
		case TAG_OTHER:
			if (state == S_GROUP && named)
				return "named entries without a MASK entry";
			if (state != S_OTHER && state != S_GROUP)
				goto order;
			state = S_END;
			break;
		default:
			return "an entry has an unknown tag";
		}
	}
	if (state != S_END)
		return state == S_USER_OBJ ? "no USER_OBJ entry" : state == S_USER ?
		       "no GROUP_OBJ entry" : "no OTHER entry";
	return NULL;
order:
	return "entries missing, repeated or out of order (USER_OBJ, USER..., GROUP_OBJ, "
	       "GROUP..., MASK, OTHER)";
}

int acl_valid(const void *val, size_t size)
{
	return acl_invalid(val, size) ? -EINVAL : 0;
}

int acl_equiv_mode(const void *val, size_t size, uint32_t *mode)
{
	uint32_t m = 0;
	int extended = 0;

	for (size_t i = 0; i < acl_count(size); i++) {
		switch (tag(val, i)) {
		case TAG_USER_OBJ:
			m |= (uint32_t)perm(val, i) << 6;
			break;
		case TAG_GROUP_OBJ:
			m |= (uint32_t)perm(val, i) << 3;
			break;
		case TAG_OTHER:
			m |= perm(val, i);
			break;
		case TAG_MASK:	/* after GROUP_OBJ: it wins */
			m = (m & ~070u) | (uint32_t)perm(val, i) << 3;
			extended = 1;
			break;
		default:
			extended = 1;
		}
	}
	*mode = (*mode & ~0777u) | m;
	return extended;
}

/* The entry the group class's bits go to: the mask if there is one, else
 * the owning group (a valid ACL has it); SIZE_MAX in neither. */
static size_t group_class(const void *val, size_t size)
{
	size_t group = SIZE_MAX;

	for (size_t i = 0; i < acl_count(size); i++) {
		if (tag(val, i) == TAG_MASK)
			return i;
		if (tag(val, i) == TAG_GROUP_OBJ)
			group = i;
	}
	return group;
}

void acl_chmod(void *val, size_t size, uint32_t mode)
{
	size_t group = group_class(val, size);

	for (size_t i = 0; i < acl_count(size); i++) {
		if (tag(val, i) == TAG_USER_OBJ)
			set_perm(val, i, (uint16_t)(mode >> 6));
		else if (tag(val, i) == TAG_OTHER)
			set_perm(val, i, (uint16_t)mode);
	}
	if (group != SIZE_MAX)
		set_perm(val, group, (uint16_t)(mode >> 3));
}

int acl_create_masq(void *val, size_t size, uint32_t *mode)
{
	size_t group = group_class(val, size);
	uint32_t m = *mode;
	int extended = 0;

	for (size_t i = 0; i < acl_count(size); i++) {
		uint16_t p = perm(val, i);

		switch (tag(val, i)) {
		case TAG_USER_OBJ:
			p &= (uint16_t)(m >> 6);
			set_perm(val, i, p);
			m &= (uint32_t)p << 6 | ~0700u;
			break;
		case TAG_OTHER:
			p &= (uint16_t)m;
			set_perm(val, i, p);
			m &= p | ~0007u;
			break;
		case TAG_GROUP_OBJ:
			break;
		default:	/* named entries, the mask */
			extended = 1;
		}
	}
	if (group != SIZE_MAX) {
		uint16_t p = perm(val, group) & (uint16_t)(m >> 3);

		set_perm(val, group, p);
		m &= (uint32_t)p << 3 | ~0070u;
	}
	*mode = (*mode & ~0777u) | (m & 0777u);
	return extended;
}
