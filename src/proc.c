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
#include "filter.h"
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

int proc_target_still_valid(const struct notif_ref *n)
{
	if (!n)
		return 0;
	return filter_notif_id_valid(n->fd, n->id) == 0 ? 0 : -ESRCH;
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

/*
 * /proc/TID/status of the last few tasks asked about, kept open: a pread() is one syscall where
 * open, read, close are three, on every file a command creates. The fd stays tied to its task;
 * once the task is gone (its tid may be reused) a read fails and the entry is opened again.
 */
#define STATUS_CACHE 8
static struct {
	pid_t tid; /* 0: free */
	int fd;
} status_cache[STATUS_CACHE];
static unsigned status_next;

static int status_open(pid_t tid)
{
	char p[64];
	snprintf(p, sizeof p, "/proc/%d/status", (int)tid);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? negative_errno() : fd;
}

static ssize_t status_read(pid_t tid, const struct notif_ref *nref, char *buf, size_t n)
{
	unsigned slot = STATUS_CACHE;
	for (unsigned i = 0; i < STATUS_CACHE; i++)
		if (status_cache[i].tid == tid) {
			slot = i;
			break;
		}
	if (slot < STATUS_CACHE) {
		ssize_t k = RETRY_EINTR(pread(status_cache[slot].fd, buf, n, 0));
		if (k > 0)
			return k;
		safe_close(status_cache[slot].fd);
		status_cache[slot].tid = 0;
	} else {
		slot = status_next++ % STATUS_CACHE;
		if (status_cache[slot].tid)
			safe_close(status_cache[slot].fd);
		status_cache[slot].tid = 0;
	}
	int fd = status_open(tid);
	if (fd < 0)
		return fd;
	/* A cached fd stays tied to the task it was opened for (reads fail once it is gone); a
	 * fresh one is that task's only if the notification is still pending now. */
	if (proc_target_still_valid(nref) < 0) {
		safe_close(fd);
		return -ESRCH;
	}
	ssize_t k = RETRY_EINTR(pread(fd, buf, n, 0));
	if (k < 0) {
		int r = negative_errno();
		safe_close(fd);
		return r;
	}
	status_cache[slot].tid = tid;
	status_cache[slot].fd = fd;
	return k;
}

static int read_status_field(pid_t tid, const struct notif_ref *nref, const char *key, char *out,
			     size_t outsz)
{
	/* Umask is in the first few hundred bytes, CapEff within about 1.5 KiB; the kernel formats
	 * the whole file for any read size. */
	char buf[4096];
	ssize_t n = status_read(tid, nref, buf, sizeof buf - 1);
	if (n < 0)
		return (int)n;
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

/* A number field of /proc/TID/status ("Umask:\t0022") in base, from min to max. */
static int read_status_number(pid_t tid, const struct notif_ref *n, const char *key, int base,
			      uint64_t min, uint64_t max, uint64_t *ret)
{
	char v[32];
	int r = read_status_field(tid, n, key, v, sizeof v);
	if (r < 0 || (r = parse_u64(v, base, ret)) < 0)
		return r;
	return *ret < min || *ret > max ? -ERANGE : 0;
}

int proc_get_umask(pid_t tid, const struct notif_ref *n, mode_t *ret)
{
	uint64_t m;
	int r = read_status_number(tid, n, "Umask", 8, 0, 07777, &m);
	if (r >= 0)
		*ret = (mode_t)(m & 0777);
	return r;
}

int proc_get_cap_eff(pid_t tid, const struct notif_ref *n, uint64_t *ret)
{
	return read_status_number(tid, n, "CapEff", 16, 0, UINT64_MAX, ret);
}

/* "1000\t1000\t1000\t1000" or "4 24 27": up to max numbers; the count of them. */
static int parse_ids(const char *v, uint32_t *out, size_t max)
{
	size_t n = 0;
	for (const char *p = v; *p;) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			break;
		if (n == max)
			return -E2BIG;
		size_t len = strcspn(p, " \t");
		char num[16];
		uint64_t x;
		if (len >= sizeof num)
			return -EINVAL;
		memcpy(num, p, len);
		num[len] = '\0';
		int r = parse_u64(num, 10, &x);
		if (r < 0 || x > UINT32_MAX)
			return r < 0 ? r : -ERANGE;
		out[n++] = (uint32_t)x;
		p += len;
	}
	return (int)n;
}

/* The numbers of field key ("Uid", "Groups") into out: how many, or -errno. */
static int read_ids(pid_t tid, const struct notif_ref *n, const char *key, uint32_t *out,
		    size_t max)
{
	char v[PROC_GROUPS_MAX * 11 + 1];
	int r = read_status_field(tid, n, key, v, sizeof v);
	if (r < 0)
		return r == -EINVAL ? -E2BIG : r;
	return parse_ids(v, out, max);
}

int proc_get_ids(pid_t tid, const struct notif_ref *n, struct proc_ids *ret)
{
	_Static_assert(sizeof(uid_t) == sizeof(uint32_t) && sizeof(gid_t) == sizeof(uint32_t),
		       "ids are 32 bits");
	int k;
	if ((k = read_ids(tid, n, "Uid", (uint32_t *)ret->uid, 4)) != 4 ||
	    (k = read_ids(tid, n, "Gid", (uint32_t *)ret->gid, 4)) != 4)
		return k < 0 ? k : -EINVAL;
	if ((k = read_ids(tid, n, "Groups", (uint32_t *)ret->groups, PROC_GROUPS_MAX)) < 0)
		return k;
	ret->n_groups = (size_t)k;
	return 0;
}

int proc_get_tgid(pid_t tid, const struct notif_ref *n, pid_t *ret)
{
	uint64_t t;
	int r = read_status_number(tid, n, "Tgid", 10, 1, INT32_MAX, &t);
	if (r >= 0)
		*ret = (pid_t)t;
	return r;
}
