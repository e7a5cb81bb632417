/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * acl: POSIX ACLs in the kernel's xattr form (posix_acl_xattr: a version
 * 2 header, then {tag u16, perm u16, id u32} little-endian entries sorted
 * by tag and id), as FUSE passes them with FUSE_POSIX_ACL.  The kernel
 * enforces them; twinfs keeps them as the xattrs system.posix_acl_access
 * and system.posix_acl_default and keeps the mode in step, by the rules
 * of the kernel's fs/posix_acl.c (equiv_mode, chmod, create_masq).  Pure
 * functions on a value: no locks, no I/O.
 */
#ifndef TFS_ACL_H
#define TFS_ACL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ACL_XATTR_ACCESS	"system.posix_acl_access"
#define ACL_XATTR_DEFAULT	"system.posix_acl_default"
/* The kernel sends at most a page (fuse_set_acl refuses larger). */
#define ACL_XATTR_MAX		4096

/* 1 for either ACL name, 0 for any other. */
bool acl_name(const char *name);
/* 0 if @val is a well-formed ACL (what the kernel's posix_acl_valid
 * accepts: named entries' ids in any order, repeated or not; ids
 * unchecked), else -EINVAL. */
int acl_valid(const void *val, size_t size);
/* NULL if acl_valid accepts @val, else why not (a phrase, for fsck). */
const char *acl_invalid(const void *val, size_t size);
/* The permission bits of *mode set from a valid access ACL (the group
 * bits from its MASK if present); 1 if the ACL says more than the mode
 * (named entries or a mask) and must be kept, 0 if the mode says it all. */
int acl_equiv_mode(const void *val, size_t size, uint32_t *mode);
/* chmod: the ACL's owner, mask (else group) and other permissions set
 * from @mode, in place. */
void acl_chmod(void *val, size_t size, uint32_t mode);
/* Create: a copy of the parent's default ACL masked by the create mode,
 * in place, and *mode's permission bits narrowed to it; 1 if the result
 * must be kept as the access ACL, 0 if the mode says it all. */
int acl_create_masq(void *val, size_t size, uint32_t *mode);

#endif
