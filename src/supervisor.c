/* SPDX-License-Identifier: MIT */
#include "supervisor.h"

#include <errno.h>
#include <poll.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>
#include <utime.h>

#include "basic/kernel-compat.h"
#include "basic/macro.h"
#include "basic/path-util.h"
#include "broker.h"
#include "proc.h"

#define XATTR_NAME_MAX_ 255
#define XATTR_SIZE_MAX_ 65536

struct deferred {
	uint64_t id;
	int fd; /* O_PATH fd of the FIFO, or the socket of a connect in progress */
	int flags;
	bool cloexec;
	bool connect; /* answer the socket's SO_ERROR once it is writable */
};

#define MAX_DEFERRED 256

struct supervisor {
	int listener;
	struct deferred deferred[MAX_DEFERRED];
	size_t n_deferred;
	struct broker *broker;
	struct seccomp_notif *req;
	struct seccomp_notif_resp *resp;
	char *path1, *path2, *path3;
	char xname[XATTR_NAME_MAX_ + 1];
	void *xvalue;
	struct sockaddr_storage sockaddr; /* connect, bind, sendto, msg_name */
};

int supervisor_new(int listener_fd, struct broker *b, struct supervisor **ret)
{
	struct supervisor *s = calloc(1, sizeof *s);
	if (!s)
		return -ENOMEM;
	s->listener = listener_fd;
	s->broker = b;
	int r = seccomp_notify_alloc(&s->req, &s->resp);
	if (r < 0) {
		free(s);
		return r;
	}
	s->path1 = malloc(BROKERED_PATH_MAX);
	s->path2 = malloc(BROKERED_PATH_MAX);
	s->path3 = malloc(BROKERED_PATH_MAX);
	s->xvalue = malloc(XATTR_SIZE_MAX_);
	if (!s->path1 || !s->path2 || !s->path3 || !s->xvalue) {
		supervisor_free(s);
		return -ENOMEM;
	}
	*ret = s;
	return 0;
}

void supervisor_free(struct supervisor *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n_deferred; i++)
		safe_close(s->deferred[i].fd);
	seccomp_notify_free(s->req, s->resp);
	free(s->path1);
	free(s->path2);
	free(s->path3);
	free(s->xvalue);
	free(s);
}

static int read_path(pid_t tid, uint64_t addr, char *buf)
{
	return proc_read_string(tid, addr, buf, BROKERED_PATH_MAX, NULL);
}

static int read_timeval_pair(pid_t tid, uint64_t addr, struct broker_req *q)
{
	if (!addr) {
		q->times_now = true;
		return 0;
	}
	struct timeval tv[2];
	int r = proc_read_mem(tid, addr, tv, sizeof tv);
	if (r < 0)
		return r;
	for (int i = 0; i < 2; i++) {
		if (tv[i].tv_usec < 0 || tv[i].tv_usec >= 1000000)
			return -EINVAL;
		q->times[i].tv_sec = tv[i].tv_sec;
		q->times[i].tv_nsec = tv[i].tv_usec * 1000;
	}
	return 0;
}

/* A socket address argument, copied once (the kernel's own limit: EINVAL beyond it). */
static int read_sockaddr(struct supervisor *s, pid_t tid, uint64_t addr, uint64_t len,
			 struct broker_req *q)
{
	if (!addr || !len)
		return 0;
	if (len > sizeof s->sockaddr)
		return -EINVAL;
	memset(&s->sockaddr, 0, sizeof s->sockaddr);
	int r = proc_read_mem(tid, addr, &s->sockaddr, (size_t)len);
	if (r < 0)
		return r;
	q->addr = &s->sockaddr;
	q->addrlen = (unsigned)len;
	return 0;
}

/*
 * Decode the notified syscall into a broker request. Returns 0, a -errno for the target, or 1 to let
 * the kernel run it unchanged (a read-only openat2).
 */
static int decode(struct supervisor *s, const struct seccomp_data *d, pid_t tid, struct broker_req *q)
{
	const uint64_t *a = (const uint64_t *)d->args;
	int r = 0;
	*q = (struct broker_req){.tid = tid, .dirfd = AT_FDCWD, .dirfd2 = AT_FDCWD, .fd = -1};

#define PATH1(addr) ({ r = read_path(tid, (addr), s->path1); if (r < 0) return r; q->path = s->path1; })
#define PATH2(addr) ({ r = read_path(tid, (addr), s->path2); if (r < 0) return r; q->path2 = s->path2; })
#define NAME(sys) q->syscall_name = sys

	switch (d->nr) {
	case __NR_open:
		NAME("open");
		q->op = BROKER_OP_OPEN;
		PATH1(a[0]);
		q->flags = (uint32_t)a[1];
		q->mode = (mode_t)a[2];
		return 0;
	case __NR_openat:
		NAME("openat");
		q->op = BROKER_OP_OPEN;
		q->dirfd = (int)a[0];
		PATH1(a[1]);
		q->flags = (uint32_t)a[2];
		q->mode = (mode_t)a[3];
		return 0;
	case __NR_creat:
		NAME("creat");
		q->op = BROKER_OP_OPEN;
		PATH1(a[0]);
		q->flags = O_CREAT | O_WRONLY | O_TRUNC;
		q->mode = (mode_t)a[1];
		return 0;
	case __NR_openat2: {
		NAME("openat2");
		q->op = BROKER_OP_OPEN;
		q->dirfd = (int)a[0];
		size_t size = (size_t)a[3];
		struct open_how how = {0};
		if (size < sizeof how)
			return -EINVAL;
		if (size > 4096)
			return -E2BIG;
		if ((r = proc_read_mem(tid, a[2], &how, sizeof how)) < 0)
			return r;
		if (size > sizeof how) {
			/* Unknown trailing fields must be zero, as the kernel demands. */
			unsigned char tail[256];
			for (size_t off = sizeof how; off < size;) {
				size_t n = MIN(sizeof tail, size - off);
				if ((r = proc_read_mem(tid, a[2] + off, tail, n)) < 0)
					return r;
				for (size_t i = 0; i < n; i++)
					if (tail[i])
						return -E2BIG;
				off += n;
			}
		}
		if (how.flags >> 32)
			return -EINVAL;
		q->flags = how.flags;
		q->mode = (mode_t)how.mode;
		q->resolve = how.resolve;
		if (!(q->flags & (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | 020000000)))
			return 1; /* read-only: Landlock allows reads, the kernel does the rest */
		if (how.mode && !(q->flags & (O_CREAT | 020000000)))
			return -EINVAL;
		if (q->resolve & RESOLVE_CACHED)
			return -EAGAIN; /* the caller retries without it */
		PATH1(a[1]);
		return 0;
	}
	case __NR_truncate:
		NAME("truncate");
		q->op = BROKER_OP_TRUNCATE;
		PATH1(a[0]);
		q->length = a[1];
		return 0;
	case __NR_rename:
	case __NR_renameat:
	case __NR_renameat2:
		q->op = BROKER_OP_RENAME;
		if (d->nr == __NR_rename) {
			NAME("rename");
			PATH1(a[0]);
			PATH2(a[1]);
		} else {
			NAME(d->nr == __NR_renameat ? "renameat" : "renameat2");
			q->dirfd = (int)a[0];
			PATH1(a[1]);
			q->dirfd2 = (int)a[2];
			PATH2(a[3]);
			if (d->nr == __NR_renameat2)
				q->flags = (uint32_t)a[4];
		}
		if (q->flags & ~(uint64_t)(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT))
			return -EINVAL;
		if ((q->flags & RENAME_NOREPLACE) && (q->flags & (RENAME_EXCHANGE | RENAME_WHITEOUT)))
			return -EINVAL;
		if ((q->flags & RENAME_EXCHANGE) && (q->flags & RENAME_WHITEOUT))
			return -EINVAL;
		return 0;
	case __NR_unlink:
		NAME("unlink");
		q->op = BROKER_OP_UNLINK;
		PATH1(a[0]);
		return 0;
	case __NR_rmdir:
		NAME("rmdir");
		q->op = BROKER_OP_UNLINK;
		PATH1(a[0]);
		q->flags = AT_REMOVEDIR;
		return 0;
	case __NR_unlinkat:
		NAME("unlinkat");
		q->op = BROKER_OP_UNLINK;
		q->dirfd = (int)a[0];
		PATH1(a[1]);
		q->flags = (uint32_t)a[2];
		if (q->flags & ~(uint64_t)AT_REMOVEDIR)
			return -EINVAL;
		return 0;
	case __NR_mkdir:
		NAME("mkdir");
		q->op = BROKER_OP_MKDIR;
		PATH1(a[0]);
		q->mode = (mode_t)a[1];
		return 0;
	case __NR_mkdirat:
		NAME("mkdirat");
		q->op = BROKER_OP_MKDIR;
		q->dirfd = (int)a[0];
		PATH1(a[1]);
		q->mode = (mode_t)a[2];
		return 0;
	case __NR_mknod:
		NAME("mknod");
		q->op = BROKER_OP_MKNOD;
		PATH1(a[0]);
		q->mode = (mode_t)a[1];
		q->dev = (dev_t)a[2];
		return 0;
	case __NR_mknodat:
		NAME("mknodat");
		q->op = BROKER_OP_MKNOD;
		q->dirfd = (int)a[0];
		PATH1(a[1]);
		q->mode = (mode_t)a[2];
		q->dev = (dev_t)a[3];
		return 0;
	case __NR_link:
		NAME("link");
		q->op = BROKER_OP_LINK;
		PATH1(a[0]);
		PATH2(a[1]);
		return 0;
	case __NR_linkat:
		NAME("linkat");
		q->op = BROKER_OP_LINK;
		q->dirfd = (int)a[0];
		PATH1(a[1]);
		q->dirfd2 = (int)a[2];
		PATH2(a[3]);
		q->flags = (uint32_t)a[4];
		if (q->flags & ~(uint64_t)(AT_SYMLINK_FOLLOW | AT_EMPTY_PATH))
			return -EINVAL;
		q->at_empty_path = (q->flags & AT_EMPTY_PATH) && !*q->path;
		return 0;
	case __NR_symlink:
	case __NR_symlinkat:
		q->op = BROKER_OP_SYMLINK;
		NAME(d->nr == __NR_symlink ? "symlink" : "symlinkat");
		if ((r = read_path(tid, a[0], s->path3)) < 0)
			return r;
		q->symlink_target = s->path3;
		if (d->nr == __NR_symlink) {
			PATH2(a[1]);
		} else {
			q->dirfd2 = (int)a[1];
			PATH2(a[2]);
		}
		return 0;
	case __NR_chmod:
	case __NR_fchmod:
	case __NR_fchmodat:
	case __NR_fchmodat2:
		q->op = BROKER_OP_CHMOD;
		if (d->nr == __NR_chmod) {
			NAME("chmod");
			PATH1(a[0]);
			q->mode = (mode_t)a[1];
		} else if (d->nr == __NR_fchmod) {
			NAME("fchmod");
			q->fd = (int)a[0];
			q->mode = (mode_t)a[1];
		} else {
			NAME(d->nr == __NR_fchmodat ? "fchmodat" : "fchmodat2");
			q->dirfd = (int)a[0];
			q->mode = (mode_t)a[2];
			if (d->nr == __NR_fchmodat2) {
				q->flags = (uint32_t)a[3];
				if (q->flags & ~(uint64_t)(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH))
					return -EINVAL;
			}
			/* A NULL path means the fd itself only with AT_EMPTY_PATH (6.11+). */
			if (a[1])
				PATH1(a[1]);
			else if (!(q->flags & AT_EMPTY_PATH))
				return -EFAULT;
			q->at_empty_path = (q->flags & AT_EMPTY_PATH) && (!q->path || !*q->path);
		}
		q->mode &= 07777;
		return 0;
	case __NR_chown:
	case __NR_lchown:
	case __NR_fchown:
	case __NR_fchownat:
		q->op = BROKER_OP_CHOWN;
		if (d->nr == __NR_fchown) {
			NAME("fchown");
			q->fd = (int)a[0];
			q->uid = (uid_t)(uint32_t)a[1];
			q->gid = (gid_t)(uint32_t)a[2];
		} else if (d->nr == __NR_fchownat) {
			NAME("fchownat");
			q->dirfd = (int)a[0];
			PATH1(a[1]);
			q->uid = (uid_t)(uint32_t)a[2];
			q->gid = (gid_t)(uint32_t)a[3];
			q->flags = (uint32_t)a[4];
			if (q->flags & ~(uint64_t)(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH))
				return -EINVAL;
			q->at_empty_path = (q->flags & AT_EMPTY_PATH) && !*q->path;
		} else {
			NAME(d->nr == __NR_chown ? "chown" : "lchown");
			PATH1(a[0]);
			q->uid = (uid_t)(uint32_t)a[1];
			q->gid = (gid_t)(uint32_t)a[2];
			if (d->nr == __NR_lchown)
				q->flags = AT_SYMLINK_NOFOLLOW;
		}
		return 0;
	case __NR_utime: {
		NAME("utime");
		q->op = BROKER_OP_UTIMES;
		PATH1(a[0]);
		if (!a[1]) {
			q->times_now = true;
			return 0;
		}
		struct utimbuf ub;
		if ((r = proc_read_mem(tid, a[1], &ub, sizeof ub)) < 0)
			return r;
		q->times[0] = (struct timespec){ub.actime, 0};
		q->times[1] = (struct timespec){ub.modtime, 0};
		return 0;
	}
	case __NR_utimes:
		NAME("utimes");
		q->op = BROKER_OP_UTIMES;
		PATH1(a[0]);
		return read_timeval_pair(tid, a[1], q);
	case __NR_futimesat:
		NAME("futimesat");
		q->op = BROKER_OP_UTIMES;
		q->dirfd = (int)a[0];
		if (a[1])
			PATH1(a[1]);
		else
			q->at_empty_path = true;
		return read_timeval_pair(tid, a[2], q);
	case __NR_utimensat:
		NAME("utimensat");
		q->op = BROKER_OP_UTIMES;
		q->dirfd = (int)a[0];
		q->flags = (uint32_t)a[3];
		if (q->flags & ~(uint64_t)(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH))
			return -EINVAL;
		if (a[1]) {
			PATH1(a[1]);
			q->at_empty_path = (q->flags & AT_EMPTY_PATH) && !*q->path;
		} else {
			q->at_empty_path = true; /* futimens(fd) */
		}
		if (a[2]) {
			if ((r = proc_read_mem(tid, a[2], q->times, sizeof q->times)) < 0)
				return r;
			for (int i = 0; i < 2; i++)
				if (q->times[i].tv_nsec != UTIME_NOW && q->times[i].tv_nsec != UTIME_OMIT &&
				    (q->times[i].tv_nsec < 0 || q->times[i].tv_nsec >= 1000000000))
					return -EINVAL;
		} else {
			q->times_now = true;
		}
		if (q->at_empty_path && q->dirfd == AT_FDCWD && !a[1])
			return -EFAULT;
		return 0;
	case __NR_setxattr:
	case __NR_lsetxattr:
	case __NR_fsetxattr:
	case __NR_setxattrat:
	case __NR_removexattr:
	case __NR_lremovexattr:
	case __NR_fremovexattr:
	case __NR_removexattrat: {
		bool set = d->nr == __NR_setxattr || d->nr == __NR_lsetxattr ||
			   d->nr == __NR_fsetxattr || d->nr == __NR_setxattrat;
		bool at = d->nr == __NR_setxattrat || d->nr == __NR_removexattrat;
		bool byfd = d->nr == __NR_fsetxattr || d->nr == __NR_fremovexattr;
		bool nofollow = d->nr == __NR_lsetxattr || d->nr == __NR_lremovexattr;
		q->op = set ? BROKER_OP_SETXATTR : BROKER_OP_REMOVEXATTR;
		NAME(set ? "setxattr" : "removexattr");
		uint64_t name_addr;
		int argi;
		if (at) {
			q->dirfd = (int)a[0];
			PATH1(a[1]);
			q->flags = (uint32_t)a[2];
			if (q->flags & ~(uint64_t)(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH))
				return -EINVAL;
			q->at_empty_path = (q->flags & AT_EMPTY_PATH) && !*q->path;
			name_addr = a[3];
			argi = 4;
		} else if (byfd) {
			q->fd = (int)a[0];
			name_addr = a[1];
			argi = 2;
		} else {
			PATH1(a[0]);
			if (nofollow)
				q->flags = AT_SYMLINK_NOFOLLOW;
			name_addr = a[1];
			argi = 2;
		}
		size_t nl;
		r = proc_read_string(tid, name_addr, s->xname, sizeof s->xname, &nl);
		if (r == -ENAMETOOLONG)
			return -ERANGE;
		if (r < 0)
			return r;
		if (nl == 0)
			return -ERANGE;
		q->xattr_name = s->xname;
		if (set) {
			uint64_t vaddr;
			size_t vsize;
			int vflags;
			if (at) {
				struct {
					uint64_t value;
					uint32_t size, flags;
				} xa;
				if (a[5] < sizeof xa)
					return -EINVAL;
				if ((r = proc_read_mem(tid, a[4], &xa, sizeof xa)) < 0)
					return r;
				vaddr = xa.value;
				vsize = xa.size;
				vflags = (int)xa.flags;
			} else {
				vaddr = a[argi];
				vsize = (size_t)a[argi + 1];
				vflags = (int)a[argi + 2];
			}
			if (vsize > XATTR_SIZE_MAX_)
				return -E2BIG;
			if (vsize && (r = proc_read_mem(tid, vaddr, s->xvalue, vsize)) < 0)
				return r;
			q->xattr_value = s->xvalue;
			q->xattr_size = vsize;
			q->xattr_flags = vflags;
		}
		return 0;
	}
	case __NR_connect:
	case __NR_bind:
		NAME(d->nr == __NR_connect ? "connect" : "bind");
		q->op = d->nr == __NR_connect ? BROKER_OP_CONNECT : BROKER_OP_BIND;
		q->fd = (int)a[0];
		return read_sockaddr(s, tid, a[1], a[2], q);
	case __NR_sendto:
		NAME("sendto");
		q->op = BROKER_OP_SENDTO;
		q->fd = (int)a[0];
		q->data = a[1];
		q->data_len = a[2];
		q->msg_flags = (int)a[3];
		return read_sockaddr(s, tid, a[4], a[5], q);
	case __NR_sendmsg:
	case __NR_sendmmsg: {
		NAME(d->nr == __NR_sendmsg ? "sendmsg" : "sendmmsg");
		q->op = BROKER_OP_SENDMSG;
		q->fd = (int)a[0];
		q->data = a[1];
		q->mmsg = d->nr == __NR_sendmmsg;
		q->msg_flags = (int)a[q->mmsg ? 3 : 2];
		if (q->mmsg && (uint32_t)a[2] == 0)
			return 1; /* no message: nothing is sent, the kernel answers 0 */
		struct msghdr m;
		if ((r = proc_read_mem(tid, a[1], &m, sizeof m)) < 0)
			return r;
		return m.msg_name ? read_sockaddr(s, tid, (uint64_t)(uintptr_t)m.msg_name, m.msg_namelen, q) : 0;
	}
	default:
		return -EPERM; /* the filter notified something we do not know: fail closed */
	}
#undef PATH1
#undef PATH2
#undef NAME
}

static void respond(struct supervisor *s, uint64_t id, int64_t val, int32_t err, uint32_t flags);

/* Install fd in the target as the syscall's result. -errno if the target did not get it. */
static int send_fd(struct supervisor *s, uint64_t id, int fd, bool cloexec)
{
	struct seccomp_notif_addfd addfd = {
		.id = id,
		.flags = SECCOMP_ADDFD_FLAG_SEND,
		.srcfd = (uint32_t)fd,
		.newfd = 0,
		.newfd_flags = cloexec ? O_CLOEXEC : 0,
	};
	if (ioctl(s->listener, SECCOMP_IOCTL_NOTIF_ADDFD, &addfd) < 0) {
		int e = errno;
		if (e != ENOENT && e != ESRCH)
			respond(s, id, 0, -e, 0);
		return -e;
	}
	return 0;
}

int supervisor_retry_deferred(struct supervisor *s)
{
	for (size_t i = 0; i < s->n_deferred;) {
		struct deferred *d = &s->deferred[i];
		bool done = true;
		if (d->connect && seccomp_notify_id_valid(s->listener, d->id) == 0) {
			struct pollfd p = {.fd = d->fd, .events = POLLOUT};
			if (poll(&p, 1, 0) == 1) {
				int err = 0;
				socklen_t l = sizeof err;
				if (getsockopt(d->fd, SOL_SOCKET, SO_ERROR, &err, &l) < 0)
					err = errno;
				respond(s, d->id, 0, -err, 0);
			} else {
				done = false;
			}
		} else if (seccomp_notify_id_valid(s->listener, d->id) == 0) {
			char p[64];
			snprintf(p, sizeof p, "/proc/self/fd/%d", d->fd);
			int fd = open(p, d->flags | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
			if (fd < 0 && errno == ENXIO) {
				done = false; /* still no reader */
			} else if (fd < 0) {
				respond(s, d->id, 0, -errno, 0);
			} else {
				if (!(d->flags & O_NONBLOCK)) {
					int fl = fcntl(fd, F_GETFL);
					if (fl >= 0)
						(void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
				}
				(void)send_fd(s, d->id, fd, d->cloexec);
				close(fd);
			}
		}
		if (done) {
			safe_close(d->fd);
			s->deferred[i] = s->deferred[--s->n_deferred];
		} else {
			i++;
		}
	}
	return (int)s->n_deferred;
}

static void respond(struct supervisor *s, uint64_t id, int64_t val, int32_t err, uint32_t flags)
{
	struct seccomp_notif_resp *resp = s->resp;
	resp->id = id;
	resp->val = val;
	resp->error = err;
	resp->flags = flags;
	/* -ENOENT: the target was killed or interrupted meanwhile; nothing to answer. */
	(void)seccomp_notify_respond(s->listener, resp);
}

/* A notification of the current batch whose pre-images wait for the batch's flush. */
struct pending_notif {
	uint64_t id;
	pid_t tid;
	struct seccomp_data data;
};

#define BATCH_MAX 64

/* Handle one notification; 1: batch mode, handle it again after the flush. */
static int handle(struct supervisor *s, uint64_t id, pid_t tid, const struct seccomp_data *data,
		  bool batch)
{
	struct broker_req q;
	int r = decode(s, data, tid, &q);
	/* Decide only on copies, and only while the target is still the one that asked. */
	if (seccomp_notify_id_valid(s->listener, id) < 0)
		return 0;
	if (r == 1) {
		respond(s, id, 0, 0, SECCOMP_USER_NOTIF_FLAG_CONTINUE);
		return 0;
	}
	if (r < 0) {
		if (q.syscall_name)
			broker_audit_invalid(s->broker, &q, r);
		respond(s, id, 0, r, 0);
		return 0;
	}
	struct broker_resp br;
	broker_set_batch(s->broker, batch);
	broker_handle(s->broker, &q, &br);
	broker_set_batch(s->broker, false);
	switch (br.kind) {
	case BROKER_RESP_RETRY:
		broker_resp_done(&br);
		return 1;
	case BROKER_RESP_CONTINUE:
		respond(s, id, 0, 0, SECCOMP_USER_NOTIF_FLAG_CONTINUE);
		break;
	case BROKER_RESP_VALUE:
		respond(s, id, br.value, 0, 0);
		break;
	case BROKER_RESP_FD:
		/* The target never got the file: a file we created for it goes again. */
		if (send_fd(s, id, br.fd, br.cloexec) < 0)
			broker_undo_creation(s->broker, &br);
		break;
	case BROKER_RESP_DEFER:
		if (s->n_deferred >= MAX_DEFERRED) {
			respond(s, id, 0, -EAGAIN, 0);
			break;
		}
		s->deferred[s->n_deferred++] = (struct deferred){.id = id,
								 .fd = TAKE_FD(br.fd),
								 .flags = br.defer_flags,
								 .cloexec = br.cloexec,
								 .connect = br.defer_connect};
		break;
	case BROKER_RESP_ERROR:
	default:
		respond(s, id, 0, (int32_t)(br.value < 0 ? br.value : -EPERM), 0);
		break;
	}
	broker_resp_done(&br);
	return 0;
}

static bool listener_ready(struct supervisor *s)
{
	struct pollfd p = {.fd = s->listener, .events = POLLIN};
	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

static int receive(struct supervisor *s)
{
	memset(s->req, 0, sizeof *s->req); /* libseccomp 2.5.4 does not, and the kernel insists */
	int r = seccomp_notify_receive(s->listener, s->req);
	/* -ENOENT: the target died before we read it; -EINTR: a signal. */
	if (r == -ENOENT || r == -EINTR || r == -EAGAIN)
		return 0;
	return r < 0 ? r : 1;
}

/*
 * One notification, or a batch of them when more are already waiting (concurrent processes):
 * group commit. Every request of the batch records its pre-images unflushed, one flush covers
 * them all, then each request is handled again and performed. A request with nothing to flush
 * is answered at once. If the flush fails, nothing of the batch is done: each request fails.
 */
int supervisor_handle_one(struct supervisor *s)
{
	int r = receive(s);
	if (r <= 0)
		return r;
	bool batch = broker_batch_useful(s->broker) && listener_ready(s);
	if (!batch)
		return handle(s, s->req->id, (pid_t)s->req->pid, &s->req->data, false), 0;
	struct pending_notif pend[BATCH_MAX];
	size_t n = 0;
	for (size_t k = 0; k < BATCH_MAX; k++) {
		if (k > 0 && (!listener_ready(s) || (r = receive(s)) <= 0))
			break;
		struct pending_notif p = {s->req->id, (pid_t)s->req->pid, s->req->data};
		if (handle(s, p.id, p.tid, &p.data, true) == 1)
			pend[n++] = p;
	}
	if (n == 0)
		return 0;
	r = broker_batch_sync(s->broker, n);
	for (size_t i = 0; i < n; i++) {
		if (r >= 0)
			(void)handle(s, pend[i].id, pend[i].tid, &pend[i].data, false);
		else if (seccomp_notify_id_valid(s->listener, pend[i].id) == 0)
			respond(s, pend[i].id, 0, r, 0);
	}
	return 0;
}
