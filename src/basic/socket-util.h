/* SPDX-License-Identifier: MIT */
/* File descriptors over Unix sockets (systemd's socket-util.h in spirit). */
#pragma once

#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

/* Send n bytes of data on sock with fd (if >= 0) attached as SCM_RIGHTS. The bytes sent (the fd
 * went with them), or -errno. */
ssize_t send_with_fd(int sock, const void *data, size_t n, int fd, int flags);

/* The first fd a received message carries as SCM_RIGHTS, or -1; every other fd in it is closed
 * (a peer cannot make us keep what we did not ask for). */
int cmsg_take_first_fd(struct msghdr *mh);
