/* SPDX-License-Identifier: MIT */
#include "basic/fs-util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "basic/macro.h"
#include "basic/path-util.h"

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

static int rm_rf_children(int fd, int depth, bool force);

static int rm_rf_depth(int dirfd, const char *name, int depth, bool force)
{
	if (depth > 256)
		return -ELOOP;
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == EACCES && force && fchmodat(dirfd, name, 0700, 0) == 0)
		fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno != ENOTDIR && errno != ELOOP)
			return negative_errno();
		return unlinkat(dirfd, name, 0) < 0 ? negative_errno() : 0;
	}
	if (force) /* its entries can go only where it is writable */
		(void)fchmod(fd, S_IRWXU);
	int r = rm_rf_children(fd, depth, force); /* takes fd */
	if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && r >= 0)
		r = negative_errno();
	return r;
}

DIR *xfdopendir(int fd)
{
	DIR *d = fdopendir(fd);
	if (!d)
		safe_close(fd); /* keeps errno */
	return d;
}

DIR *opendir_at(int dirfd, const char *name)
{
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? NULL : xfdopendir(fd);
}

static int rm_rf_children(int fd, int depth, bool force)
{
	DIR *d = xfdopendir(fd);
	if (!d)
		return negative_errno();
	int r = 0;
	for (struct dirent *de; (de = readdir(d));) {
		if (dot_or_dot_dot(de->d_name))
			continue;
		/* what readdir says is no directory is unlinked without a look */
		int k = de->d_type == DT_DIR || de->d_type == DT_UNKNOWN
			    ? rm_rf_depth(dirfd(d), de->d_name, depth + 1, force)
			: unlinkat(dirfd(d), de->d_name, 0) < 0 ? negative_errno()
								: 0;
		if (k < 0 && r >= 0)
			r = k;
	}
	closedir(d);
	return r;
}

int rm_rf_at(int dirfd, const char *name)
{
	return rm_rf_depth(dirfd, name, 0, false);
}

int rm_rf_at_force(int dirfd, const char *name)
{
	return rm_rf_depth(dirfd, name, 0, true);
}

int dir_is_empty_at(int dirfd, const char *name)
{
	DIR *d = opendir_at(dirfd, name);
	if (!d)
		return negative_errno();
	int empty = 1;
	for (struct dirent *de; empty && (de = readdir(d));)
		empty = dot_or_dot_dot(de->d_name);
	closedir(d);
	return empty;
}

int loop_write(int fd, const void *data, size_t n)
{
	const char *buf = data;
	while (n) {
		ssize_t w = write(fd, buf, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? negative_errno() : -EIO;
		buf += w;
		n -= (size_t)w;
	}
	return 0;
}

int copy_bytes(int src, int dst)
{
	bool any = false;
	for (;;) {
		ssize_t k = copy_file_range(src, NULL, dst, NULL, 1u << 30, 0);
		if (k > 0) {
			any = true;
			continue;
		}
		if (k == 0)
			return 0;
		if (errno == EINTR)
			continue;
		if (any || (errno != EXDEV && errno != EINVAL && errno != ENOSYS &&
			    errno != EOPNOTSUPP && errno != EPERM))
			return negative_errno();
		break; /* the kernel cannot copy between these two: read and write */
	}
	char buf[65536];
	for (;;) {
		ssize_t k = read(src, buf, sizeof buf);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? negative_errno() : 0;
		int r = loop_write(dst, buf, (size_t)k);
		if (r < 0)
			return r;
	}
}

int fd_equal_contents(int a, int b)
{
	static char ba[65536], bb[65536];
	for (;;) {
		ssize_t na = RETRY_EINTR(read(a, ba, sizeof ba));
		if (na < 0)
			return negative_errno();
		ssize_t got = 0;
		while (got < na) {
			ssize_t k = RETRY_EINTR(read(b, bb + got, (size_t)(na - got)));
			if (k < 0)
				return negative_errno();
			if (k == 0)
				return 0;
			got += k;
		}
		if (na == 0) { /* a ended: so must b */
			ssize_t k = RETRY_EINTR(read(b, bb, 1));
			return k < 0 ? negative_errno() : k == 0;
		}
		if (memcmp(ba, bb, (size_t)na) != 0)
			return 0;
	}
}
