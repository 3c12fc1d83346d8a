/* SPDX-License-Identifier: MIT */
#include "basic/fd-util.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include "basic/macro.h"

char *format_proc_fd_path(char buf[static PROC_FD_PATH_MAX], int fd)
{
	snprintf(buf, PROC_FD_PATH_MAX, "/proc/self/fd/%d", fd);
	return buf;
}

static int self_fd_dir = -1;

/* A forked child's /proc/self/fd is another directory: the inherited fd names the parent's. */
static void self_fd_dir_forget(void)
{
	if (self_fd_dir >= 0)
		close(self_fd_dir);
	self_fd_dir = -1;
}

static bool forget_registered;
static void self_fd_dir_register(void)
{
	forget_registered = pthread_atfork(NULL, NULL, self_fd_dir_forget) == 0;
}

static int self_fd_dir_get(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	int fd = __atomic_load_n(&self_fd_dir, __ATOMIC_ACQUIRE);
	if (fd >= 0)
		return fd;
	(void)pthread_once(&once, self_fd_dir_register);
	if (!forget_registered)
		return -1; /* a forked child would keep it: never cache */
	fd = open("/proc/self/fd", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	int none = -1;
	if (!__atomic_compare_exchange_n(&self_fd_dir, &none, fd, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		close(fd); /* another thread was first */
		return none;
	}
	return fd;
}

struct proc_fd_at proc_fd_at(int fd)
{
	struct proc_fd_at at;
	at.dirfd = self_fd_dir_get();
	if (at.dirfd >= 0)
		snprintf(at.name, sizeof at.name, "%d", fd);
	else {
		at.dirfd = AT_FDCWD;
		format_proc_fd_path(at.name, fd);
	}
	return at;
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
