// SPDX-License-Identifier: GPL-2.0-or-later
/* Description: placeholder */
int main(void) { return 77; }
