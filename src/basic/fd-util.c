/* SPDX-License-Identifier: MIT */
#include "basic/fd-util.h"

#include <fcntl.h>
#include <stdio.h>

#include "basic/macro.h"

char *format_proc_fd_path(char buf[static PROC_FD_PATH_MAX], int fd)
{
	snprintf(buf, PROC_FD_PATH_MAX, "/proc/self/fd/%d", fd);
	return buf;
}

int fd_nonblock(int fd, bool nonblock)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0)
		return negative_errno();
	int nfl = nonblock ? fl | O_NONBLOCK : fl & ~O_NONBLOCK;
	if (nfl != fl && fcntl(fd, F_SETFL, nfl) < 0)
		return negative_errno();
	return 0;
}
