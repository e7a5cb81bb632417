/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * le.h: little-endian loads and stores of the on-disk formats (superblock,
 * log chunk headers, checkpoint tables, the rebuild bitmap, the scrub
 * cursor, tree nodes and leaf pieces, items, ACL xattrs).  Byte by byte, so unaligned fields and big-endian hosts work;
 * compilers turn these into single loads/stores on x86.
 */
#ifndef TWINFS_LE_H
#define TWINFS_LE_H

#include <stdint.h>

static inline uint16_t le16_get(const void *p)
{
	const uint8_t *b = p;

	return (uint16_t)(b[0] | b[1] << 8);
}

static inline void le16_put(void *p, unsigned v)
{
	uint8_t *b = p;

	b[0] = (uint8_t)v;
	b[1] = (uint8_t)(v >> 8);
}

static inline uint32_t le32_get(const void *p)
{
	const uint8_t *b = p;
	uint32_t v = 0;

	for (int i = 0; i < 4; i++)
		v |= (uint32_t)b[i] << (8 * i);
	return v;
}

static inline uint64_t le64_get(const void *p)
{
	const uint8_t *b = p;
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v |= (uint64_t)b[i] << (8 * i);
	return v;
}

static inline void le32_put(void *p, uint32_t v)
{
	uint8_t *b = p;

	for (int i = 0; i < 4; i++)
		b[i] = (uint8_t)(v >> (8 * i));
}

static inline void le64_put(void *p, uint64_t v)
{
	uint8_t *b = p;

	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
}

#endif
