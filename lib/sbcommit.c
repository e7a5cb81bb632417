// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * sbcommit: the superblock commit.  Writes fs->sb to every healthy device
 * and flushes it (the commit point of a checkpoint), and the emergency
 * superblock that records a failed device as stale before a write or flush
 * is acknowledged.  Both run under sbc.mu, so they never interleave and the
 * generation keeps growing across both.
 *
 * Owns (struct sbc, sbcommit.h): the generation, the device states and
 * error counters in the superblock, the last durable superblock and the
 * table of fill callbacks.  The services that own the other fields
 * register a callback (sbc_register) and are never named here: this module
 * calls down only (mirror, super), which lets scrub and rebuild ask for a
 * checkpoint without a circle of calls.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fs_i.h"
#include "sbcommit.h"

/* Write @src to every healthy device.  A device whose write fails is
 * failed (its copy is stale).  Returns the number of devices written.
 * Caller holds sbc.mu. */
static unsigned write_supers(struct tfs *fs, const struct super *src)
{
	struct super sb = *src;
	unsigned ok = 0;

	for (unsigned i = 0; i < fs->mirror.ndevs; i++) {
		struct dev *d = fs->mirror.devs[i];
		int ret;

		if (!d || atomic_load(&fs->mirror.state[i]) != MDEV_OK)
			continue;
		sb.dev_index = i;
		memcpy(sb.dev_uuid, sb.dev_uuids[i], sizeof(sb.dev_uuid));
		ret = super_write_dev(fs->mirror.be, d, &sb);
		if (ret < 0)
			mirror_fail_dev(&fs->mirror, i, ret);
		else
			ok++;
	}
	return ok;
}

/* The error counters into @sb: what a refused mount later quotes as the
 * reason a device is stale (mount.c). */
static void fill_dev_stats(const struct mirror *m, struct super *sb)
{
	for (unsigned i = 0; i < m->ndevs && i < DEV_MAX; i++) {
		const struct mirror_counters *c = &m->ctr[i];
		struct super_devstats *st = &sb->stats[i];

		st->read_err = atomic_load(&c->read_err);
		st->write_err = atomic_load(&c->write_err);
		st->flush_err = atomic_load(&c->flush_err);
		st->csum_err = atomic_load(&c->csum_err);
		st->repaired = atomic_load(&c->repaired);
		st->unrecoverable = atomic_load(&c->unrecoverable);
	}
}

/* Device state and counters into fs->sb.  Returns true if it changed the
 * set of stale devices. */
static bool fill_dev_state(struct tfs *fs)
{
	bool changed = false;

	for (unsigned i = 0; i < fs->mirror.ndevs && i < DEV_MAX; i++) {
		uint32_t stale = atomic_load(&fs->mirror.state[i]) != MDEV_OK;

		if (fs->sb.dev_state[i] != stale)
			changed = true;
		fs->sb.dev_state[i] = stale;
	}
	fill_dev_stats(&fs->mirror, &fs->sb);
	return changed;
}

/* Set while this thread holds sbc.mu: the flushes it issues come back to
 * sbc_persist_stale through the mirror's hook, and the holder records
 * device failures itself (it re-checks the states after every flush). */
static _Thread_local bool sbc_mu_held;

static void sb_lock(struct tfs *fs)
{
	pthread_mutex_lock(&fs->sbc.mu);
	sbc_mu_held = true;
}

static void sb_unlock(struct tfs *fs)
{
	sbc_mu_held = false;
	pthread_mutex_unlock(&fs->sbc.mu);
}

/* Generation for the next superblock write: above every one written so
 * far, whichever path wrote it.  Caller holds sbc.mu. */
static uint64_t sb_next_gen(struct tfs *fs, uint64_t cur)
{
	uint64_t g = cur > fs->sbc.gen ? cur : fs->sbc.gen;

	fs->sbc.gen = g + 1;
	return g + 1;
}

/* One line per device newly recorded stale, with what this process (pid:
 * several daemons may share a log) counted against it: the record outlives
 * the daemon, and a mount refused for it much later is explained here. */
static void note_stale(struct tfs *fs, const struct super *sb, uint32_t newly)
{
	for (unsigned i = 0; i < fs->mirror.ndevs && i < DEV_MAX; i++) {
		const struct dev *d = fs->mirror.devs[i];
		const struct super_devstats *st = &sb->stats[i];
		char name[32];

		if (!(newly & (1u << i)))
			continue;
		snprintf(name, sizeof(name), "device %u", i);	/* missing: no path */
		tfs_log(LOG_WARNING, "%s: recorded stale in superblock generation %llu by pid %d "
			"(%s; %llu write, %llu flush, %llu read failures counted)",
			d && d->path ? d->path : name, (unsigned long long)sb->generation,
			(int)getpid(), mirror_state_name(atomic_load(&fs->mirror.state[i])),
			(unsigned long long)st->write_err, (unsigned long long)st->flush_err,
			(unsigned long long)st->read_err);
	}
}

/* @sb was written and flushed: it is what a crash now leaves.  Returns
 * the devices it is the first to record stale.  Caller holds sbc.mu. */
static uint32_t sb_durable(struct tfs *fs, const struct super *sb)
{
	uint32_t mask = 0, old = atomic_load(&fs->sbc.stale);

	fs->sbc.last = *sb;
	for (unsigned i = 0; i < DEV_MAX; i++)
		if (sb->dev_state[i])
			mask |= 1u << i;
	atomic_store(&fs->sbc.stale, mask);
	return mask & ~old;
}

/* Devices not in sync (anything but MDEV_OK) as a bit mask. */
static uint32_t out_of_sync(const struct mirror *m)
{
	uint32_t mask = 0;

	for (unsigned i = 0; i < m->ndevs; i++)
		if (atomic_load(&m->state[i]) != MDEV_OK)
			mask |= 1u << i;
	return mask;
}

static int persist_stale_cb(void *ctx)
{
	return sbc_persist_stale(ctx);
}

void sbc_init(struct sbc *c)
{
	memset(c, 0, sizeof(*c));
	pthread_mutex_init(&c->mu, NULL);
}

void sbc_destroy(struct sbc *c)
{
	pthread_mutex_destroy(&c->mu);
}

int sbc_register(struct tfs *fs, sbc_fill_fn fn, void *ctx)
{
	struct sbc *c = &fs->sbc;

	if (c->nfill == SBC_MAX_FILL)
		return -ENOSPC;
	c->fill[c->nfill].fn = fn;
	c->fill[c->nfill].ctx = ctx;
	c->nfill++;
	return 0;
}

void sbc_mount(struct tfs *fs)
{
	pthread_mutex_lock(&fs->sbc.mu);
	fs->sbc.gen = fs->sb.generation;
	sb_durable(fs, &fs->sb);	/* stale before this mount: said by mount.c */
	pthread_mutex_unlock(&fs->sbc.mu);
	fs->mirror.on_degraded = persist_stale_cb;
	fs->mirror.on_state_ctx = fs;
}

/*
 * The emergency superblock: a device failed (or was found out of sync)
 * while mounted, and a write or flush is about to be acknowledged.  The
 * checkpoint that records the failure comes later and cannot be waited
 * for here (the writer holds locks the checkpoint takes), so repeat the
 * last durable superblock with the device marked stale.  Its write-intent
 * bitmap stays that of the last checkpoint: everything the device misses
 * from now on and metadata can reach is referenced by log records after
 * that checkpoint, which mount marks dirty while replaying (FORMAT.md).
 */
int sbc_persist_stale(struct tfs *fs)
{
	struct mirror *m = &fs->mirror;
	int ret = 0;

	if (sbc_mu_held || !(out_of_sync(m) & ~atomic_load(&fs->sbc.stale)))
		return 0;
	dev_assert_may_block("superblock write");
	sb_lock(fs);
	for (int round = 0; ; round++) {
		uint32_t need = out_of_sync(m);
		struct super sb;

		if (!(need & ~atomic_load(&fs->sbc.stale)))
			break;
		if (round > DEV_MAX || mirror_healthy(m) == 0) {
			ret = -EIO;
			break;
		}
		sb = fs->sbc.last;
		for (unsigned i = 0; i < m->ndevs; i++)
			if (need & (1u << i))
				sb.dev_state[i] = 1;
		sb.state = SUPER_DIRTY;
		/* The counters now, not the last checkpoint's: after a crash
		 * they are all that says why the device went stale. */
		fill_dev_stats(m, &sb);
		sb.generation = sb_next_gen(fs, sb.generation);
		/* A device failing here is failed by the write or the flush
		 * and shows up in the next round's need. */
		if (!write_supers(fs, &sb) || mirror_flush(m) < 0) {
			ret = -EIO;
			break;
		}
		note_stale(fs, &sb, sb_durable(fs, &sb));
	}
	sb_unlock(fs);
	if (ret < 0)
		tfs_log(LOG_ERR, "cannot record a failed device as stale: no device took the "
			"superblock");
	return ret;
}

/*
 * The target of a rebuild or replace holds, until the run completes, part
 * old blocks and part copied ones.  The superblocks of the in-sync devices
 * say it is stale, but its own would still be what it was before (a member
 * in sync, only older): mounted alone with -o degraded it would serve that
 * mix without a word.  So it says so itself first.  Both slots: its other
 * slot may hold any older superblock of its own, and must not win.
 */
int sbc_mark_target(struct tfs *fs, unsigned slot, struct dev *d, const uint8_t *uuid)
{
	struct super sb;
	int ret;

	dev_assert_may_block("superblock write");
	pthread_mutex_lock(&fs->sbc.mu);
	sb = fs->sbc.last;
	if (uuid)
		memcpy(sb.dev_uuids[slot], uuid, 16);
	sb.dev_index = slot;
	memcpy(sb.dev_uuid, sb.dev_uuids[slot], 16);
	sb.dev_state[slot] = 1;
	sb.state = SUPER_DIRTY;
	/* Below every in-sync copy: never the newest while one is given. */
	if (sb.generation > 1)
		sb.generation--;
	ret = super_write_slot(fs->mirror.be, d, &sb, 0);
	if (ret == 0)
		ret = super_write_slot(fs->mirror.be, d, &sb, 1);
	/* Durable before the run's first block reaches the device. */
	if (ret == 0)
		ret = dev_flush(fs->mirror.be, d);
	pthread_mutex_unlock(&fs->sbc.mu);
	return ret;
}

void sbc_note_member(struct tfs *fs, unsigned slot, const uint8_t uuid[16])
{
	pthread_mutex_lock(&fs->sbc.mu);
	memcpy(fs->sbc.last.dev_uuids[slot], uuid, 16);
	fs->sbc.last.dev_state[slot] = 1;
	pthread_mutex_unlock(&fs->sbc.mu);
}

int sbc_commit(struct tfs *fs)
{
	int ret = 0;

	/* Outside sbc.mu: a service's callback takes its own lock, which
	 * ranks above this leaf. */
	for (unsigned i = 0; i < fs->sbc.nfill; i++)
		fs->sbc.fill[i].fn(fs->sbc.fill[i].ctx, &fs->sb);
	/* A device that fails while we write the superblocks must be recorded
	 * as stale in a newer superblock on the others, or a later mount could
	 * take its old (same-generation) copy for a healthy one.  Under sbc.mu:
	 * an emergency write (sbc_persist_stale) never interleaves, and the
	 * generation keeps growing across both. */
	dev_assert_may_block("superblock commit");
	sb_lock(fs);
	for (int round = 0; ; round++) {
		bool changed = fill_dev_state(fs);
		unsigned ok;

		if (round > 0 && !changed)
			break;
		if (round > DEV_MAX) {
			ret = -EIO;
			break;
		}
		fs->sb.generation = sb_next_gen(fs, fs->sb.generation);
		ok = write_supers(fs, &fs->sb);
		/* The superblock is the commit point: make it durable before
		 * the log space and the old checkpoint are reused. */
		if (ok)
			mirror_flush(&fs->mirror);
		if (!ok || mirror_healthy(&fs->mirror) == 0) {
			ret = -EIO;
			break;
		}
		note_stale(fs, &fs->sb, sb_durable(fs, &fs->sb));
	}
	sb_unlock(fs);
	return ret;
}
