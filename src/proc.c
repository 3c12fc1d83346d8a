/* SPDX-License-Identifier: MIT */
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "basic/macro.h"
#include "basic/parse-util.h"

int proc_read_mem(pid_t tid, uint64_t addr, void *buf, size_t n)
{
	size_t done = 0;
	while (done < n) {
		struct iovec local = {(char *)buf + done, n - done};
		struct iovec remote = {(void *)(uintptr_t)(addr + done), n - done};
		ssize_t k = process_vm_readv(tid, &local, 1, &remote, 1, 0);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return errno == ESRCH ? -ESRCH : -EFAULT;
		}
		if (k == 0)
			return -EFAULT;
		done += (size_t)k;
	}
	return 0;
}

int proc_read_string(pid_t tid, uint64_t addr, char *buf, size_t bufsz, size_t *ret_len)
{
	const size_t page = 4096;
	size_t got = 0;
	if (addr == 0)
		return -EFAULT;
	while (got < bufsz) {
		/* Never read across a page boundary in one go: the next page may be unmapped. */
		size_t chunk = page - (size_t)((addr + got) % page);
		if (chunk > bufsz - got)
			chunk = bufsz - got;
		int r = proc_read_mem(tid, addr + got, buf + got, chunk);
		if (r < 0)
			return r;
		char *nul = memchr(buf + got, '\0', chunk);
		if (nul) {
			if (ret_len)
				*ret_len = (size_t)(nul - buf);
			return 0;
		}
		got += chunk;
	}
	return -ENAMETOOLONG;
}

int proc_open_dirfd(pid_t tid, int dirfd, int flags)
{
	char p[64];
	if (dirfd == AT_FDCWD)
		snprintf(p, sizeof p, "/proc/%d/cwd", (int)tid);
	else if (dirfd >= 0)
		snprintf(p, sizeof p, "/proc/%d/fd/%d", (int)tid, dirfd);
	else
		return -EBADF;
	int fd = open(p, O_PATH | O_CLOEXEC | flags);
	if (fd < 0)
		return errno == ENOENT ? (dirfd == AT_FDCWD ? -ENOENT : -EBADF) : negative_errno();
	return fd;
}

static int read_status_field(pid_t tid, const char *key, char *out, size_t outsz)
{
	char p[64];
	snprintf(p, sizeof p, "/proc/%d/status", (int)tid);
	_cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	/* The fields we need (Umask, Tgid) are in the first few hundred bytes. */
	char buf[1024];
	ssize_t n = RETRY_EINTR(read(fd, buf, sizeof buf - 1));
	if (n < 0)
		return negative_errno();
	buf[n] = '\0';
	size_t kl = strlen(key);
	for (char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		if (strncmp(l, key, kl) == 0 && l[kl] == ':') {
			char *v = l + kl + 1;
			while (*v == ' ' || *v == '\t')
				v++;
			size_t vl = strcspn(v, "\n");
			if (vl >= outsz)
				return -EINVAL;
			memcpy(out, v, vl);
			out[vl] = '\0';
			return 0;
		}
	}
	return -ENOENT;
}

int proc_get_umask(pid_t tid, mode_t *ret)
{
	char v[32];
	int r = read_status_field(tid, "Umask", v, sizeof v);
	if (r < 0)
		return r;
	unsigned m;
	r = parse_mode(v, &m);
	if (r < 0)
		return r;
	*ret = (mode_t)(m & 0777);
	return 0;
}

int proc_get_tgid(pid_t tid, pid_t *ret)
{
	char v[32];
	int r = read_status_field(tid, "Tgid", v, sizeof v);
	if (r < 0)
		return r;
	int t;
	r = parse_int_range(v, 1, INT32_MAX, &t);
	if (r < 0)
		return r;
	*ret = t;
	return 0;
}
