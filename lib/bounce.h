/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * bounce: a bounded pool of 4096-aligned buffers.  Every write copies the
 * caller's bytes exactly once into one of these; the checksums and every
 * mirror write use that stable copy.  Reads land here too (O_DIRECT needs
 * alignment).  When the pool is empty bounce_get() waits, which bounds the
 * daemon's memory whatever the request rate.
 */
#ifndef TWINFS_BOUNCE_H
#define TWINFS_BOUNCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bounce_pool;

/* 0 or -errno. buf_size is rounded up to 4096. */
int bounce_pool_create(size_t buf_size, unsigned count, struct bounce_pool **out);
void bounce_pool_destroy(struct bounce_pool *p);
/* Waits until a buffer is free.  Never returns NULL. */
void *bounce_get(struct bounce_pool *p);
/* Non-blocking; NULL when empty. */
void *bounce_tryget(struct bounce_pool *p);
void bounce_put(struct bounce_pool *p, void *buf);
size_t bounce_buf_size(const struct bounce_pool *p);
/* Whether @buf is one of @p's buffers. */
bool bounce_owns(const struct bounce_pool *p, const void *buf);
/* The whole pool is one mapping: base and length. */
void *bounce_base(const struct bounce_pool *p, size_t *len);
/* Only the first @kept buffers stay resident once touched (the pool serves
 * them first); the others serve bursts and bounce_pool_trim gives their
 * pages back.  Default: all kept.  Call before the first get. */
void bounce_pool_keep(struct bounce_pool *p, unsigned kept);
/* The kept buffers' part of the mapping (what io_uring may pin). */
void *bounce_kept_base(const struct bounce_pool *p, size_t *len);
/* Call periodically from one thread: when no burst buffer was taken since
 * the last call, gives the touched free ones back (MADV_DONTNEED).
 * Returns how many. */
unsigned bounce_pool_trim(struct bounce_pool *p);
/* Buffers given back so far. */
uint64_t bounce_trimmed(struct bounce_pool *p);

#endif
