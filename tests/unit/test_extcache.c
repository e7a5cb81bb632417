// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: placeholder */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
int main(void) { return 0; }
