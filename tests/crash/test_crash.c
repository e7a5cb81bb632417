// SPDX-License-Identifier: GPL-2.0-or-later
/* Placeholder until the crash explorer lands. */
int main(void) { return 77; }
