/* SPDX-License-Identifier: MIT */
/* Helpers on file descriptors (systemd's fd-util.h in spirit). */
#pragma once

#include <stdbool.h>

/* "/proc/self/fd/" and the digits of any int, with its sign and the NUL. */
#define PROC_FD_PATH_MAX (sizeof("/proc/self/fd/") + sizeof("-2147483648"))

/* Write "/proc/self/fd/<fd>" into buf (PROC_FD_PATH_MAX bytes) and return buf. */
char *format_proc_fd_path(char buf[static PROC_FD_PATH_MAX], int fd);

/* The magic link of fd, in a buffer that lives until the end of the enclosing block. */
#define FORMAT_PROC_FD_PATH(fd) format_proc_fd_path((char[PROC_FD_PATH_MAX]){0}, (fd))

/*
 * fd's magic link as a directory and a name for the *at() calls: this process's /proc/self/fd
 * (opened on first use, again in a forked child) and "<fd>". One lookup where "/proc/self/fd/<fd>"
 * takes four and the /proc/self symlink, on every notification. Without /proc/self/fd it is
 * AT_FDCWD and the whole path.
 */
struct proc_fd_at {
	int dirfd;
	char name[PROC_FD_PATH_MAX];
};
struct proc_fd_at proc_fd_at(int fd);

/* Set (nonblock) or clear O_NONBLOCK on fd's open file description. 0 or -errno. */
int fd_nonblock(int fd, bool nonblock);
