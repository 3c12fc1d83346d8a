/* SPDX-License-Identifier: MIT */
#include "basic/socket-util.h"

#include <string.h>
#include <sys/uio.h>

#include "basic/macro.h"

ssize_t send_with_fd(int sock, const void *data, size_t n, int fd, int flags)
{
	struct iovec iov = {(void *)data, n};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	if (fd >= 0) {
		memset(&u, 0, sizeof u);
		mh.msg_control = u.buf;
		mh.msg_controllen = sizeof u.buf;
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	}
	ssize_t k = sendmsg(sock, &mh, flags);
	return k < 0 ? negative_errno() : k;
}

int cmsg_take_first_fd(struct msghdr *mh)
{
	int first = -1;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		size_t nfd = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < nfd; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof fd);
			if (first < 0)
				first = fd;
			else
				close(fd);
		}
	}
	return first;
}
