/* SPDX-License-Identifier: MIT */
/* File-system helpers (systemd's fs-util.h in spirit). */
#pragma once

#include <sys/stat.h>

/*
 * Open path read-only as a regular file: O_NONBLOCK and O_NOCTTY, so that a FIFO or a terminal
 * put in its place can neither block nor become our terminal. Returns the fd (O_CLOEXEC), -errno,
 * or -EINVAL when it is no regular file. ret_st, if not NULL, gets its fstat.
 */
int open_regular(const char *path, struct stat *ret_st);
