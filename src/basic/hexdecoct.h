/* SPDX-License-Identifier: MIT */
/* Hexadecimal digits (systemd's hexdecoct.h in spirit). */
#pragma once

#include <errno.h>

/* The value of one hex digit (either case), or -EINVAL. */
static inline int unhexchar(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -EINVAL;
}
