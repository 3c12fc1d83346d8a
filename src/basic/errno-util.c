/* SPDX-License-Identifier: MIT */
#include "basic/errno-util.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *errno_name_full(int err, char buf[static ERRNO_NAME_BUF_LEN])
{
	long e = labs((long)err); /* INT_MIN has no int negation */
	const char *name = e > 0 && e <= INT_MAX ? strerrorname_np((int)e) : NULL;
	if (name)
		return name;
	snprintf(buf, ERRNO_NAME_BUF_LEN, "errno%ld", e);
	return buf;
}
