// SPDX-License-Identifier: GPL-2.0-or-later
/* ctl_dev: control commands for devices (rebuild, replace). */
#include <stddef.h>

#include "ctl.h"

const struct ctl_cmd ctl_dev_cmds[] = {
	{ NULL, NULL, NULL },
};
