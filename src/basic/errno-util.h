/* SPDX-License-Identifier: MIT */
/* Errno names for logs and audit records (systemd's errno-util.h in spirit). */
#pragma once

/* Room for "errno" and any int. */
#define ERRNO_NAME_BUF_LEN (sizeof("errno") + sizeof("-2147483648"))

/* The symbolic name of an errno value, either sign ("ENOENT"), or "errno<N>" in buf for a value
 * without one. */
const char *errno_name_full(int err, char buf[static ERRNO_NAME_BUF_LEN]);
#define ERRNO_NAME(err) errno_name_full((err), (char[ERRNO_NAME_BUF_LEN]){0})
