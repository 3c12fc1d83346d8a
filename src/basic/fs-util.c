/* SPDX-License-Identifier: MIT */
#include "basic/fs-util.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "basic/macro.h"

int open_regular(const char *path, struct stat *ret_st)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return negative_errno();
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int r = negative_errno();
		close(fd);
		return r;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	if (ret_st)
		*ret_st = st;
	return fd;
}
