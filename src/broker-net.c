/* SPDX-License-Identifier: MIT */
/*
 * The socket operations of the broker (DESIGN section 12). connect, bind, sendto with an address
 * and sendmsg carry the address in the target's memory, where another thread could change it after
 * the check: the broker never lets the kernel re-read it. It takes the socket itself from the
 * target (pidfd_getfd), decides on the copied address, and performs the call on that socket; a
 * socket path is resolved into an fd of the socket file and reached through /proc/self/fd/N, so a
 * path swapped after the check cannot redirect it. Only calls whose address the kernel ignores (a
 * send on a stream socket) are left to the kernel.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "audit.h"
#include "basic/fd-util.h"
#include "basic/macro.h"
#include "basic/path-util.h"
#include "broker.h"
#include "net.h"
#include "policy.h"
#include "proc.h"
#include "resolve.h"

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL
#endif
#ifndef MSG_FASTOPEN
#define MSG_FASTOPEN 0x20000000
#endif

#define NET_SEND_MAX (256 * 1024) /* a datagram the broker sends for the target */
#define NET_IOV_MAX  1024
#define NET_CMSG_MAX 4096

struct net_op {
	const struct broker_config *cfg;
	struct audit *audit;
	int root_fd;
	const struct broker_req *q;
	struct timespec t0;
	char shown[sizeof(struct sockaddr_un) + 64]; /* the address as the audit log shows it */
	char *real;				     /* a socket file's real path */
	const char *rule;
	const char *decision;
};

static void net_audit(struct net_op *o, int result)
{
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	static const struct {
		int e;
		const char *name;
	} names[] = {{0, "ok"},
		     {EACCES, "EACCES"},
		     {EPERM, "EPERM"},
		     {ENOENT, "ENOENT"},
		     {EINPROGRESS, "EINPROGRESS"},
		     {ECONNREFUSED, "ECONNREFUSED"},
		     {EADDRINUSE, "EADDRINUSE"},
		     {EAGAIN, "EAGAIN"},
		     {EINVAL, "EINVAL"},
		     {EOPNOTSUPP, "EOPNOTSUPP"}};
	char res[32], extra[256];
	snprintf(res, sizeof res, "errno%d", -result);
	for (size_t i = 0; i < ELEMENTSOF(names); i++)
		if (names[i].e == -result)
			snprintf(res, sizeof res, "%s", names[i].name);
	snprintf(extra, sizeof extra, "syscall=%s rule=%s",
		 o->q->syscall_name ? o->q->syscall_name : "-", o->rule ? o->rule : "-");
	struct audit_record rec = {
	    .phase = "notify-net",
	    .op = broker_op_name(o->q->op),
	    .path = o->shown,
	    .normalised = o->real,
	    .decision = o->decision ? o->decision : "none", /* failed before a decision */
	    .result = res,
	    .extra = extra,
	    .pid = o->q->tid,
	    .us = (uint64_t)((t1.tv_sec - o->t0.tv_sec) * 1000000 +
			     (t1.tv_nsec - o->t0.tv_nsec) / 1000),
	};
	audit_log(o->audit, &rec);
}

/*
 * The target's fd, as ours (the same open file description). The pidfd pins the task it names;
 * it is the target's only if the notification is still pending once it is open.
 */
static int target_fd(pid_t tid, const struct notif_ref *n, int fd)
{
	int pidfd = (int)syscall(SYS_pidfd_open, tid, PIDFD_THREAD);
	if (pidfd < 0) { /* before 6.9: by the thread group (threads share their fd table) */
		pid_t tgid;
		if (proc_get_tgid(tid, n, &tgid) < 0)
			return -ESRCH;
		pidfd = (int)syscall(SYS_pidfd_open, tgid, 0);
		if (pidfd < 0)
			return negative_errno();
	}
	if (proc_target_still_valid(n) < 0) {
		close(pidfd);
		return -ESRCH;
	}
	int r = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
	int e = errno;
	close(pidfd);
	return r < 0 ? -e : r;
}

static int take_socket(pid_t tid, const struct notif_ref *n, int fd)
{
	int r = target_fd(tid, n, fd);
	if (r < 0)
		return r;
	struct stat st;
	if (fstat(r, &st) < 0 || !S_ISSOCK(st.st_mode)) {
		close(r);
		return -ENOTSOCK;
	}
	return r;
}

static int sock_int(int fd, int opt)
{
	int v = -1;
	socklen_t l = sizeof v;
	return getsockopt(fd, SOL_SOCKET, opt, &v, &l) < 0 ? -errno : v;
}

static void show_inet(struct net_op *o, const struct sockaddr *a, socklen_t len)
{
	char ip[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;
	if (a->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *s = (const struct sockaddr_in *)a;
		inet_ntop(AF_INET, &s->sin_addr, ip, sizeof ip);
		port = ntohs(s->sin_port);
	} else if (a->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)a;
		inet_ntop(AF_INET6, &s->sin6_addr, ip, sizeof ip);
		port = ntohs(s->sin6_port);
	}
	snprintf(o->shown, sizeof o->shown, "inet:%s:%u", ip, port);
}

/* sun_path of a copied sockaddr_un: 1 path (in buf), 0 abstract or unnamed, -EINVAL. */
static int unix_path(const struct broker_req *q, char *buf, size_t n)
{
	if (q->addrlen < offsetof(struct sockaddr_un, sun_path) ||
	    q->addrlen > sizeof(struct sockaddr_un))
		return -EINVAL;
	const struct sockaddr_un *u = q->addr;
	size_t len = q->addrlen - offsetof(struct sockaddr_un, sun_path);
	if (len == 0 || u->sun_path[0] == '\0')
		return 0;
	size_t l = strnlen(u->sun_path, len);
	if (l + 1 > n)
		return -ENAMETOOLONG;
	memcpy(buf, u->sun_path, l);
	buf[l] = '\0';
	return 1;
}

/*
 * Resolve a socket path as the target would and decide on the socket file's real path. Returns an
 * O_PATH fd of the socket file, or -errno (EACCES when the policy refuses).
 */
static int open_unix_target(struct net_op *o, const char *path)
{
	struct resolve_ctx ctx = {.tid = o->q->tid,
				  .root_fd = o->root_fd,
				  .notif = o->q->notif,
				  .foreign_mounts = o->cfg->foreign_mounts};
	struct resolved res = RESOLVED_INIT;
	int r = resolve_path(&ctx, AT_FDCWD, path, RESOLVE_FOLLOW, &res);
	if (r < 0)
		goto out;
	o->real = res.real ? strdup(res.real) : NULL;
	if (!o->real) {
		r = -ENOMEM;
		goto out;
	}
	int fd = res.obj_fd >= 0 ? fcntl(res.obj_fd, F_DUPFD_CLOEXEC, 3)
				 : openat(res.parent_fd, res.name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		goto out;
	}
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode)) {
		close(fd);
		r = -ECONNREFUSED; /* as the kernel answers for a file that is no socket */
		goto out;
	}
	enum net_verdict v =
	    o->cfg->net ? net_decide_unix(o->cfg->net, o->real, &o->rule) : NET_DENY;
	/* A second name of a socket (link(2) of a daemon's socket into the workspace) would carry
	 * the workspace's verdict to the daemon: a socket with other names is not the workspace's.
	 */
	if (v == NET_ALLOW && st.st_nlink > 1 &&
	    (strcmp(o->rule, "default:workspace") == 0 || strcmp(o->rule, "scratch") == 0)) {
		v = NET_PROMPT;
		o->rule = "hard-linked-socket";
	}
	if (v != NET_ALLOW) {
		close(fd);
		r = -EACCES;
		o->decision = v == NET_PROMPT ? "prompt" : "deny";
		if (v == NET_PROMPT) {
			char what[BROKERED_PATH_MAX + 8];
			snprintf(what, sizeof what, "unix:%s", o->real);
			net_record_prompt(o->cfg->net, what, broker_op_name(o->q->op), o->rule);
		}
		goto out;
	}
	o->decision = "allow";
	r = fd;
out:
	resolved_done(&res);
	return r;
}

/* The address that reaches the socket file behind our O_PATH fd, whatever its path now is. */
socklen_t broker_unix_fd_addr(int fd, struct sockaddr_un *u)
{
	*u = (struct sockaddr_un){.sun_family = AF_UNIX};
	int n = snprintf(u->sun_path, sizeof u->sun_path, "/proc/self/fd/%d", fd);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)n + 1);
}

/* Is pid a process of the sandbox (a descendant of brokered)? */
static bool in_sandbox(pid_t pid)
{
	pid_t self = getpid();
	for (int depth = 0; pid > 1 && depth < 256; depth++) {
		char p[64], buf[512];
		snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
		int fd = open(p, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return false;
		ssize_t n = read(fd, buf, sizeof buf - 1);
		close(fd);
		if (n <= 0)
			return false;
		buf[n] = '\0';
		const char *e = strrchr(buf, ')');
		int ppid;
		if (!e || sscanf(e + 1, " %*c %d", &ppid) != 1)
			return false;
		if (ppid == self)
			return true;
		pid = ppid;
	}
	return false;
}

/*
 * connect() on our copy of the socket without ever blocking the broker: a blocking socket is
 * switched to non-blocking for the call only (the flag belongs to the shared file description).
 * A connection in progress for a blocking caller is answered when it completes (DEFER); so is a
 * Unix connect that finds the listener's backlog full (EAGAIN), which natively waits for room: it
 * is made again, blocking, by a thread of the supervisor, through *unix_fd (taken).
 */
static int do_connect(int sock, const struct sockaddr *a, socklen_t len, int *unix_fd,
		      struct broker_resp *resp)
{
	int fl = fcntl(sock, F_GETFL);
	if (fl < 0)
		return negative_errno();
	bool blocking = !(fl & O_NONBLOCK);
	if (blocking && fcntl(sock, F_SETFL, fl | O_NONBLOCK) < 0)
		return negative_errno();
	int r = connect(sock, a, len) < 0 ? -errno : 0;
	if (blocking)
		(void)fcntl(sock, F_SETFL, fl);
	if (blocking && (r == -EINPROGRESS || (r == -EAGAIN && unix_fd))) {
		resp->kind = BROKER_RESP_DEFER;
		resp->defer_connect = true;
		if (r == -EAGAIN)
			resp->defer_unix_fd = TAKE_FD(*unix_fd);
		resp->fd = fcntl(sock, F_DUPFD_CLOEXEC, 3);
		return resp->fd < 0 ? -errno : 1;
	}
	return r;
}

static int net_connect(struct net_op *o, int sock, int family, struct broker_resp *resp)
{
	const struct broker_req *q = o->q;
	const struct sockaddr *a = q->addr;
	if (!a || q->addrlen < sizeof(sa_family_t))
		return -EINVAL;
	if (a->sa_family == AF_UNSPEC) { /* dissolve a datagram socket's association */
		snprintf(o->shown, sizeof o->shown, "unspec:");
		o->decision = "allow";
		return do_connect(sock, a, q->addrlen, NULL, resp);
	}
	if (family == AF_UNIX) {
		if (a->sa_family != AF_UNIX)
			return -EINVAL;
		char path[sizeof(struct sockaddr_un)];
		int r = unix_path(q, path, sizeof path);
		if (r < 0)
			return r;
		if (r == 0) {
			/* Abstract: Landlock scopes these for the sandbox itself, but the broker is
			 * outside its domain, so it checks the peer instead: only a socket of the
			 * sandbox. A stream connection to anything else is shut down at once. */
			const struct sockaddr_un *u = q->addr;
			size_t l = q->addrlen - offsetof(struct sockaddr_un, sun_path);
			snprintf(o->shown, sizeof o->shown, "abstract:%.*s",
				 (int)(l > 1 ? l - 1 : 0), l > 1 ? u->sun_path + 1 : "");
			o->decision = "deny";
			if (sock_int(sock, SO_TYPE) == SOCK_DGRAM) {
				o->rule = "abstract:datagram";
				return -EPERM;
			}
			/* (A full backlog: EAGAIN, the peer is checked once connected.) */
			r = do_connect(sock, a, q->addrlen, NULL, resp);
			if (r != 0)
				return r == 1 ? -EAGAIN : r;
			struct ucred cr;
			socklen_t cl = sizeof cr;
			if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0 ||
			    !in_sandbox(cr.pid)) {
				(void)shutdown(sock, SHUT_RDWR);
				o->rule = "abstract:outside-sandbox";
				return -EPERM;
			}
			o->rule = "abstract:sandbox";
			o->decision = "allow";
			return 0;
		}
		snprintf(o->shown, sizeof o->shown, "%s", path);
		_cleanup_close_ int target = open_unix_target(o, path);
		if (target < 0)
			return target;
		struct sockaddr_un u;
		socklen_t ul = broker_unix_fd_addr(target, &u);
		return do_connect(sock, (struct sockaddr *)&u, ul, &target, resp);
	}
	if (family == AF_INET || family == AF_INET6) {
		show_inet(o, a, q->addrlen);
		enum net_verdict v =
		    o->cfg->net ? net_decide_inet(o->cfg->net, a, q->addrlen, &o->rule) : NET_DENY;
		o->decision = v == NET_ALLOW ? "allow" : "deny";
		return v == NET_ALLOW ? do_connect(sock, a, q->addrlen, NULL, resp) : -EACCES;
	}
	/* Netlink and the other local families: no path, no network (the others are refused at
	 * socket() outside "allow" mode). */
	snprintf(o->shown, sizeof o->shown, "family:%d", family);
	o->rule = "family:local";
	o->decision = "allow";
	return do_connect(sock, a, q->addrlen, NULL, resp);
}

/*
 * Can the kernel resolve `given` again, for the bind, to the very file the broker decided on
 * (res)? Yes when it is res->real itself (absolute) or its tail (relative): real directories
 * only, no symlink, no "." or "..". Between the decision and the bind nothing can change those
 * directories: the command changes a name outside the scratch dir only through this broker, which
 * is busy with this call (what it lets the kernel do itself, Landlock keeps in the scratch dir,
 * which the path does not cross). A bare name always is (bound from its directory, it is not
 * resolved again). *ret_up: for a relative path, how many directories up from res's parent the
 * one it is relative to is; -1 for an absolute one.
 */
static bool bind_as_given(const struct resolved *res, const char *given, const char *scratch,
			  int *ret_up)
{
	*ret_up = 0;
	if (strcmp(given, res->name) == 0) /* a bare name: from its (decided) directory */
		return true;
	*ret_up = -1;
	if (!res->real || (scratch && path_is_under(res->real, scratch)))
		return false;
	if (given[0] == '/')
		return strcmp(given, res->real) == 0;
	size_t lg = strlen(given), lr = strlen(res->real);
	if (lg + 1 >= lr || res->real[lr - lg - 1] != '/' ||
	    strcmp(res->real + lr - lg, given) != 0)
		return false;
	int up = 0;
	for (const char *c = given;; up++) { /* no empty, "." or ".." component */
		size_t n = strcspn(c, "/");
		if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		if (!c[n])
			break;
		c += n + 1;
	}
	*ret_up = up;
	return true;
}

/*
 * Bind sock to the socket file res names, which the broker decided on, so that getsockname(2)
 * gives back what the command passed when bind_as_given() accepts the path as given: a relative
 * one from a child whose cwd is the directory it is relative to. Any other path (one through a
 * symlink, "..", the scratch dir) is bound through /proc/self/fd/N/NAME, since resolved again it
 * could lead elsewhere; getsockname(2) then shows that.
 */
static int bind_named(int sock, const struct resolved *res, const char *given, mode_t um,
		      const char *scratch)
{
	struct sockaddr_un u = {.sun_family = AF_UNIX};
	int up;
	bool as_given = bind_as_given(res, given, scratch, &up);
	int n = as_given ? snprintf(u.sun_path, sizeof u.sun_path, "%s", given)
			 : snprintf(u.sun_path, sizeof u.sun_path, "/proc/self/fd/%d/%s",
				    res->parent_fd, res->name);
	if (n < 0 || (size_t)n >= sizeof u.sun_path)
		return -ENAMETOOLONG;
	socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)n + 1);
	if (up < 0) { /* absolute, or through /proc/self/fd: no cwd of its own */
		mode_t old = umask(um);
		int r = bind(sock, (struct sockaddr *)&u, len) < 0 ? -errno : 0;
		umask(old);
		return r;
	}
	/* The directory it is relative to: res's parent, or as many up. */
	_cleanup_close_ int above = -1;
	for (int i = 0; i < up; i++) {
		int d = openat(above >= 0 ? above : res->parent_fd, "..",
			       O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (d < 0)
			return -errno;
		safe_close(above);
		above = d;
	}
	int dir = above >= 0 ? above : res->parent_fd;
	/* A child of our own: its cwd and umask are not ours (the broker has threads). */
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		umask(um);
		_exit(fchdir(dir) < 0				   ? errno
		      : bind(sock, (struct sockaddr *)&u, len) < 0 ? errno
								   : 0);
	}
	int status;
	if (RETRY_EINTR(waitpid(pid, &status, 0)) != pid)
		return -ECHILD;
	return WIFEXITED(status) ? -WEXITSTATUS(status) : -EIO;
}

static int net_bind(struct net_op *o, int sock, int family, struct broker_resp *resp)
{
	const struct broker_req *q = o->q;
	const struct sockaddr *a = q->addr;
	if (!a || q->addrlen < sizeof(sa_family_t))
		return -EINVAL;
	if (family == AF_UNIX && a->sa_family == AF_UNIX) {
		char path[sizeof(struct sockaddr_un)];
		int r = unix_path(q, path, sizeof path);
		if (r < 0)
			return r;
		if (r == 0) { /* abstract or autobind: no file, Landlock scopes abstract names */
			snprintf(o->shown, sizeof o->shown, "abstract:");
			o->rule = "abstract";
			o->decision = "allow";
			return bind(sock, a, q->addrlen) < 0 ? -errno : 0;
		}
		snprintf(o->shown, sizeof o->shown, "%s", path);
		/* Creating a socket file is a write: the file policy decides, as for mknod. */
		struct resolve_ctx ctx = {.tid = q->tid,
					  .root_fd = o->root_fd,
					  .notif = q->notif,
					  .foreign_mounts = o->cfg->foreign_mounts};
		struct resolved res = RESOLVED_INIT;
		r = resolve_path(&ctx, AT_FDCWD, path, 0, &res);
		if (r >= 0 && (!res.name || !res.real))
			r = -EINVAL;
		if (r >= 0 && res.exists)
			r = -EADDRINUSE;
		if (r >= 0) {
			o->real = strdup(res.real);
			bool ok = o->cfg->net && net_may_bind_unix(o->cfg->net, res.real, &o->rule);
			o->decision = ok ? "allow" : "deny";
			if (!ok)
				r = -EACCES;
		}
		if (r >= 0 && o->cfg->kernel_enforces && strcmp(o->rule, "scratch") == 0) {
			/* Landlock lets the kernel make it there, under the name as given. */
			resp->kind = BROKER_RESP_CONTINUE;
		} else if (r >= 0) {
			mode_t um = 022;
			(void)proc_get_umask(q->tid, q->notif, &um);
			r = bind_named(sock, &res, path, um, o->cfg->scratch);
		}
		resolved_done(&res);
		return r;
	}
	if (family == AF_INET || family == AF_INET6) {
		show_inet(o, a, q->addrlen);
		enum net_verdict v =
		    o->cfg->net ? net_decide_inet_bind(o->cfg->net, a, q->addrlen, &o->rule)
				: NET_DENY;
		o->decision = v == NET_ALLOW ? "allow" : "deny";
		if (v != NET_ALLOW)
			return -EACCES;
		return bind(sock, a, q->addrlen) < 0 ? -errno : 0;
	}
	snprintf(o->shown, sizeof o->shown, "family:%d", family);
	o->rule = "family:local";
	o->decision = "allow";
	(void)resp;
	return bind(sock, a, q->addrlen) < 0 ? -errno : 0;
}

/* Decide the destination of a datagram; returns an O_PATH fd for a socket file, 0 for an IP
 * address, or -errno. */
static int decide_dest(struct net_op *o, int family, const struct sockaddr *a, socklen_t len,
		       struct sockaddr_un *ret_u, socklen_t *ret_len)
{
	if (family == AF_UNIX) {
		if (a->sa_family != AF_UNIX)
			return -EINVAL;
		char path[sizeof(struct sockaddr_un)];
		int r = unix_path(o->q, path, sizeof path);
		if (r < 0)
			return r;
		if (r == 0) {
			snprintf(o->shown, sizeof o->shown, "abstract:");
			o->rule = "abstract:datagram";
			return -EPERM;
		}
		snprintf(o->shown, sizeof o->shown, "%s", path);
		int fd = open_unix_target(o, path);
		if (fd >= 0)
			*ret_len = broker_unix_fd_addr(fd, ret_u);
		return fd;
	}
	if (family == AF_INET || family == AF_INET6) {
		show_inet(o, a, len);
		enum net_verdict v =
		    o->cfg->net ? net_decide_inet(o->cfg->net, a, len, &o->rule) : NET_DENY;
		o->decision = v == NET_ALLOW ? "allow" : "deny";
		return v == NET_ALLOW ? 0 : -EACCES;
	}
	snprintf(o->shown, sizeof o->shown, "family:%d", family);
	o->rule = "family:local";
	o->decision = "allow";
	return 0;
}

/* Copy the target's iovecs into one buffer (at most NET_SEND_MAX bytes: -EMSGSIZE beyond). */
static int copy_iov(pid_t tid, uint64_t iov_addr, size_t iovlen, void **ret, size_t *ret_len)
{
	if (iovlen > NET_IOV_MAX)
		return -EMSGSIZE;
	_cleanup_free_ struct iovec *iov = calloc(iovlen ? iovlen : 1, sizeof *iov);
	if (!iov)
		return -ENOMEM;
	int r;
	if (iovlen && (r = proc_read_mem(tid, iov_addr, iov, iovlen * sizeof *iov)) < 0)
		return r;
	size_t total = 0;
	for (size_t i = 0; i < iovlen; i++) {
		if (iov[i].iov_len > NET_SEND_MAX || total + iov[i].iov_len > NET_SEND_MAX)
			return -EMSGSIZE;
		total += iov[i].iov_len;
	}
	char *buf = malloc(total ? total : 1);
	if (!buf)
		return -ENOMEM;
	size_t off = 0;
	for (size_t i = 0; i < iovlen; i++) {
		if (iov[i].iov_len && (r = proc_read_mem(tid, (uint64_t)(uintptr_t)iov[i].iov_base,
							 buf + off, iov[i].iov_len)) < 0) {
			free(buf);
			return r;
		}
		off += iov[i].iov_len;
	}
	*ret = buf;
	*ret_len = total;
	return 0;
}

/*
 * Control messages of a datagram the broker sends: file descriptors are the target's, so each is
 * taken from it; other messages pass as they are (the kernel checks credentials against us).
 */
static int copy_cmsg(pid_t tid, const struct notif_ref *nref, void *ctl, size_t ctl_len, int *fds,
		     size_t *n_fds)
{
	struct msghdr m = {.msg_control = ctl, .msg_controllen = ctl_len};
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		int *v = (int *)CMSG_DATA(c);
		for (size_t i = 0; i < n; i++) {
			int fd = target_fd(tid, nref, v[i]);
			if (fd < 0 || *n_fds >= 253) {
				safe_close(fd);
				return -EBADF;
			}
			fds[(*n_fds)++] = fd;
			v[i] = fd;
		}
	}
	return 0;
}

static int net_send(struct net_op *o, int sock, int family, int type, struct broker_resp *resp)
{
	const struct broker_req *q = o->q;
	pid_t tid = q->tid;
	if ((type == SOCK_STREAM || type == SOCK_SEQPACKET) && !(q->msg_flags & MSG_FASTOPEN)) {
		/* The kernel ignores (or refuses) an address on these: nothing to decide. */
		resp->kind = BROKER_RESP_CONTINUE;
		return 0;
	}
	if (q->msg_flags & MSG_FASTOPEN) {
		snprintf(o->shown, sizeof o->shown, "fastopen:");
		o->rule = "fastopen";
		return -EOPNOTSUPP; /* callers fall back to connect(), which is decided */
	}
	struct msghdr mh = {0};
	_cleanup_free_ void *data = NULL, *ctl = NULL;
	size_t len = 0;
	int r = 0;
	if (q->op == BROKER_OP_SENDTO) {
		if (q->data_len > NET_SEND_MAX)
			return -EMSGSIZE;
		len = (size_t)q->data_len;
		if (!(data = malloc(len ? len : 1)))
			return -ENOMEM;
		if (len && (r = proc_read_mem(tid, q->data, data, len)) < 0)
			return r;
	} else {
		struct msghdr tm;
		if ((r = proc_read_mem(tid, q->data, &tm, sizeof tm)) < 0)
			return r;
		if ((r = copy_iov(tid, (uint64_t)(uintptr_t)tm.msg_iov, tm.msg_iovlen, &data,
				  &len)) < 0)
			return r;
		if (tm.msg_controllen) {
			if (tm.msg_controllen > NET_CMSG_MAX)
				return -ENOBUFS;
			if (!(ctl = malloc(tm.msg_controllen)))
				return -ENOMEM;
			if ((r = proc_read_mem(tid, (uint64_t)(uintptr_t)tm.msg_control, ctl,
					       tm.msg_controllen)) < 0)
				return r;
			mh.msg_control = ctl;
			mh.msg_controllen = tm.msg_controllen;
		}
	}
	struct sockaddr_un u;
	socklen_t ul = 0;
	_cleanup_close_ int target = -1;
	if (q->addr && q->addrlen >= sizeof(sa_family_t)) {
		r = decide_dest(o, family, q->addr, q->addrlen, &u, &ul);
		if (r < 0)
			return r;
		target = r > 0 ? r : -1;
		if (target < 0) {
			memcpy(&u, q->addr, MIN((size_t)q->addrlen, sizeof u));
			ul = q->addrlen;
		}
		mh.msg_name = &u;
		mh.msg_namelen = ul;
	} else {
		snprintf(o->shown, sizeof o->shown, "connected:");
		o->rule = "connected";
		o->decision = "allow";
	}
	struct iovec iov = {.iov_base = data, .iov_len = len};
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	int fds[253];
	size_t n_fds = 0;
	if (ctl && (r = copy_cmsg(tid, q->notif, ctl, mh.msg_controllen, fds, &n_fds)) >= 0)
		r = 0;
	if (r >= 0) {
		ssize_t n = sendmsg(sock, &mh,
				    (q->msg_flags & ~MSG_FASTOPEN) | MSG_DONTWAIT | MSG_NOSIGNAL);
		r = n < 0 ? -errno : 0;
		if (n >= 0) {
			resp->kind = BROKER_RESP_VALUE;
			resp->value = q->mmsg ? 1 : n;
		}
		if (n >= 0 && q->mmsg) {
			/* sendmmsg: one message sent; its msg_len is what the caller reads */
			unsigned ml = (unsigned)n;
			struct iovec l = {&ml, sizeof ml};
			struct iovec rem = {(void *)(uintptr_t)(q->data + sizeof(struct msghdr)),
					    sizeof ml};
			if (process_vm_writev(tid, &l, 1, &rem, 1, 0) != (ssize_t)sizeof ml)
				r = -EFAULT;
		}
	}
	for (size_t i = 0; i < n_fds; i++)
		close(fds[i]);
	return r;
}

void broker_net_handle(const struct broker_config *cfg, struct audit *audit, int root_fd,
		       const struct broker_req *q, struct broker_resp *resp)
{
	struct net_op o = {.cfg = cfg, .audit = audit, .root_fd = root_fd, .q = q};
	clock_gettime(CLOCK_MONOTONIC, &o.t0);
	*resp = BROKER_RESP_INIT(BROKER_RESP_ERROR, -EACCES);
	snprintf(o.shown, sizeof o.shown, "fd:%d", q->fd);
	int r;
	_cleanup_close_ int sock = take_socket(q->tid, q->notif, q->fd);
	if (sock < 0) {
		r = sock;
		goto done;
	}
	int family = sock_int(sock, SO_DOMAIN), type = sock_int(sock, SO_TYPE);
	switch (q->op) {
	case BROKER_OP_CONNECT:
		r = net_connect(&o, sock, family, resp);
		break;
	case BROKER_OP_BIND:
		r = net_bind(&o, sock, family, resp);
		break;
	case BROKER_OP_SENDTO:
	case BROKER_OP_SENDMSG:
		r = net_send(&o, sock, family, type, resp);
		if (r == 0 && resp->kind == BROKER_RESP_CONTINUE)
			return; /* a stream send: nothing decided, nothing to log */
		break;
	default:
		r = -ENOSYS;
		break;
	}
done:
	if (r < 0) {
		broker_resp_done(resp);
		*resp = BROKER_RESP_INIT(BROKER_RESP_ERROR, r);
	} else if (resp->kind == BROKER_RESP_ERROR) {
		resp->kind = BROKER_RESP_VALUE;
		resp->value = 0;
	}
	net_audit(&o, r < 0 ? r : 0);
	free(o.real);
}
