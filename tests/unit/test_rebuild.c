// SPDX-License-Identifier: GPL-2.0-or-later
/* Placeholder until the subsystem's tests land. */
int main(void) { return 77; }
