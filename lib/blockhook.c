// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * blockhook: the one hook lib calls just before it makes a thread wait
 * (tfs_may_block; tfs_set_block_hook in tfs.h says where and why).  A
 * file of its own so the subsystems that wait (rangelock, bounce,
 * extcache, dev) stay linkable one by one in the unit tests.
 */
#include <stdatomic.h>
#include <stddef.h>

#include "tfs.h"

static void (*_Atomic block_hook)(void);

void tfs_set_block_hook(void (*fn)(void))
{
	atomic_store(&block_hook, fn);
}

void tfs_may_block(void)
{
	void (*fn)(void) = atomic_load_explicit(&block_hook, memory_order_relaxed);

	if (fn)
		fn();
}
