/* SPDX-License-Identifier: MIT */
#include "supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "basic/fd-util.h"
#include "basic/kernel-compat.h"
#include "basic/macro.h"
#include "broker.h"
#include "filter.h"
#include "proc.h"
#include "syscall-table.h"

/*
 * A write-open of a FIFO that has no reader yet blocks natively until one comes, and so does a
 * connect(2) in progress on a blocking socket; the broker must not. Each such wait is done by a
 * thread of its own, blocked in open(2) (or poll(2) for the socket) exactly as the target would
 * be; when it returns, the thread posts itself on a pipe that the main loop polls, and the fd (or
 * the connect's result) goes to the target. A waiting thread counts as a writer of the FIFO, as the
 * blocked target does natively; once the target is gone (killed: with WAIT_KILLABLE_RECV only a
 * fatal signal ends a received notification), its wait must end at once, or a reader arriving next
 * would meet a writer that no longer exists: the target's pidfd (PIDFD_THREAD) wakes the loop, and
 * the thread is interrupted with FIFO_CANCEL_SIGNAL. (A reader that opens the FIFO in the moment
 * between the target's death and that wake-up still meets the dying writer and reads EOF.)
 */
struct fifo_wait {
	uint64_t id;
	int path_fd; /* O_PATH fd of the FIFO, or the socket of a connect in progress */
	int flags;
	bool cloexec;
	bool connect; /* a connect in progress: answer the socket's SO_ERROR once it is writable */
	int unix_fd;  /* or a Unix connect to make again, blocking: O_PATH fd of the socket file */
	bool cancelled;
	pthread_t thread;
	int result;  /* the fd (0 for a connect), or -errno */
	int done_fd; /* where the thread posts itself */
	int pidfd;   /* the target thread's, readable once it exits; -1 if none could be had */
};

#define MAX_DEFERRED	   256
#define FIFO_CANCEL_SIGNAL (SIGRTMIN + 3)
#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL /* 6.9 */
#endif

struct supervisor {
	int listener;
	struct fifo_wait *waits[MAX_DEFERRED];
	size_t n_waits;
	int waits_pipe[2]; /* finished waits: their pointers */
	int waits_ep;	   /* epoll: waits_pipe[0] and the waiting targets' pidfds */
	struct broker *broker;
	struct seccomp_notif *req;
	struct seccomp_notif_resp *resp;
	struct syscall_buffers *args; /* the decoder's copies of the target's memory */
	bool copy_on_write;
	bool sync_asked; /* copy-on-write: a sync the overlay skipped */
};

static void respond(struct supervisor *s, uint64_t id, int64_t val, int32_t err, uint32_t flags);
static void fifo_cancel(struct fifo_wait *w);

static void fifo_cancel_handler(int sig)
{
}

bool supervisor_sync_asked(const struct supervisor *s)
{
	return s->sync_asked;
}

int supervisor_new(int listener_fd, struct broker *b, bool copy_on_write, struct supervisor **ret)
{
	struct supervisor *s = calloc(1, sizeof *s);
	if (!s)
		return -ENOMEM;
	s->listener = listener_fd;
	s->broker = b;
	s->copy_on_write = copy_on_write;
	s->waits_ep = epoll_create1(EPOLL_CLOEXEC);
	if (s->waits_ep < 0 || pipe2(s->waits_pipe, O_CLOEXEC | O_NONBLOCK) < 0 ||
	    epoll_ctl(s->waits_ep, EPOLL_CTL_ADD, s->waits_pipe[0],
		      &(struct epoll_event){.events = EPOLLIN, .data.ptr = NULL}) < 0) {
		int e = negative_errno();
		safe_close(s->waits_ep);
		free(s);
		return e;
	}
	/* A no-op handler without SA_RESTART: the signal only interrupts a waiting open(2). */
	struct sigaction sa = {.sa_handler = fifo_cancel_handler};
	sigemptyset(&sa.sa_mask);
	(void)sigaction(FIFO_CANCEL_SIGNAL, &sa, NULL);
	int r = filter_notif_alloc(&s->req, &s->resp);
	if (r < 0) {
		safe_close(s->waits_pipe[0]);
		safe_close(s->waits_pipe[1]);
		safe_close(s->waits_ep);
		free(s);
		return r;
	}
	if ((r = syscall_buffers_new(&s->args)) < 0) {
		supervisor_free(s);
		return r;
	}
	*ret = s;
	return 0;
}

void supervisor_free(struct supervisor *s)
{
	if (!s)
		return;
	/* Interrupt the waits still blocked, and collect them all. */
	while (s->n_waits > 0) {
		for (size_t i = 0; i < s->n_waits; i++)
			fifo_cancel(s->waits[i]);
		struct pollfd p = {.fd = s->waits_pipe[0], .events = POLLIN};
		(void)poll(&p, 1, 10);
		(void)supervisor_fifo_done(s);
	}
	safe_close(s->waits_pipe[0]);
	safe_close(s->waits_pipe[1]);
	safe_close(s->waits_ep);
	free(s->req);
	free(s->resp);
	syscall_buffers_free(s->args);
	free(s);
}

/*
 * chroot(2) is refused, except chroot("/") by a task that may chroot: test suites drop privileges
 * as root with `chroot --userspec=U / cmd`. The target's root is the real root (it can never
 * chroot), so that call would change nothing: it is answered with success and never made, which
 * leaves nothing to race. Magic links are not followed (they would be the supervisor's).
 * CHROOT_NOOP or -EPERM.
 */
#define CHROOT_NOOP (SYSCALL_DECODE_ACCESS + 1) /* past the SYSCALL_DECODE_* values */
static int decide_chroot(pid_t tid, const char *path)
{
	uint64_t caps;
	if (proc_get_cap_eff(tid, NULL, &caps) < 0 || !(caps & (UINT64_C(1) << CAP_SYS_CHROOT)))
		return -EPERM;
	_cleanup_close_ int base = path[0] == '/' ? -1 : proc_open_dirfd(tid, AT_FDCWD, O_PATH);
	if (path[0] != '/' && base < 0)
		return -EPERM;
	struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
			       .resolve = RESOLVE_NO_MAGICLINKS};
	_cleanup_close_ int fd =
	    (int)syscall(SYS_openat2, base < 0 ? AT_FDCWD : base, path, &how, sizeof how);
	/* Our root or the target's: with read-only mounts they are different mounts of the same
	 * directory, and a relative path starts on the target's. */
	char root_path[64];
	snprintf(root_path, sizeof root_path, "/proc/%d/root", (int)tid);
	struct statx dir, own, its;
	unsigned mask = STATX_INO | STATX_MNT_ID;
	if (fd < 0 || statx(fd, "", AT_EMPTY_PATH, mask, &dir) < 0 ||
	    statx(AT_FDCWD, "/", 0, mask, &own) < 0 ||
	    statx(AT_FDCWD, root_path, 0, mask, &its) < 0 ||
	    !(dir.stx_mask & own.stx_mask & its.stx_mask & STATX_MNT_ID))
		return -EPERM;
	bool same = dir.stx_ino == own.stx_ino && dir.stx_dev_major == own.stx_dev_major &&
		    dir.stx_dev_minor == own.stx_dev_minor &&
		    (dir.stx_mnt_id == own.stx_mnt_id || dir.stx_mnt_id == its.stx_mnt_id);
	return same ? CHROOT_NOOP : -EPERM;
}

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
	int tfd = ioctl(s->listener, SECCOMP_IOCTL_NOTIF_ADDFD, &addfd);
	if (tfd < 0) {
		int e = errno;
		if (e != ENOENT && e != ESRCH)
			respond(s, id, 0, -e, 0);
		return -e;
	}
	return tfd; /* the target's fd number */
}

static void *fifo_wait_thread(void *arg)
{
	struct fifo_wait *w = arg;
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, FIFO_CANCEL_SIGNAL);
	(void)pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	if (w->connect && w->unix_fd >= 0) {
		/* Blocks until the listener has room, as the target's own connect would. */
		struct sockaddr_un u;
		socklen_t l = broker_unix_fd_addr(w->unix_fd, &u);
		w->result = __atomic_load_n(&w->cancelled, __ATOMIC_ACQUIRE)	? -EINTR
			    : connect(w->path_fd, (struct sockaddr *)&u, l) < 0 ? -errno
										: 0;
	} else if (w->connect) {
		/* Blocks until the connect the broker started completes, as the target's would. */
		struct pollfd p = {.fd = w->path_fd, .events = POLLOUT};
		int err = 0;
		socklen_t l = sizeof err;
		if (__atomic_load_n(&w->cancelled, __ATOMIC_ACQUIRE) || poll(&p, 1, -1) < 0)
			err = EINTR;
		else if (getsockopt(w->path_fd, SOL_SOCKET, SO_ERROR, &err, &l) < 0)
			err = errno;
		w->result = -err;
	} else {
		/* Blocks until a reader opens the FIFO, as the target's own open(2) would. */
		int fd = __atomic_load_n(&w->cancelled, __ATOMIC_ACQUIRE)
			     ? -1
			     : open(FORMAT_PROC_FD_PATH(w->path_fd),
				    (w->flags & ~O_NONBLOCK) | O_CLOEXEC | O_NOCTTY);
		w->result = fd >= 0 ? fd : errno ? -errno : -EINTR;
	}
	(void)!write(w->done_fd, &w, sizeof w); /* atomic: shorter than PIPE_BUF */
	return NULL;
}

static void fifo_cancel(struct fifo_wait *w)
{
	__atomic_store_n(&w->cancelled, true, __ATOMIC_RELEASE);
	(void)pthread_kill(w->thread, FIFO_CANCEL_SIGNAL);
}

static void fifo_wait_start(struct supervisor *s, uint64_t id, pid_t tid, struct broker_resp *br)
{
	struct fifo_wait *w = s->n_waits < MAX_DEFERRED ? calloc(1, sizeof *w) : NULL;
	if (!w) {
		respond(s, id, 0, -EAGAIN, 0);
		return;
	}
	*w = (struct fifo_wait){.id = id,
				.path_fd = TAKE_FD(br->fd),
				.flags = br->defer_flags,
				.cloexec = br->cloexec,
				.connect = br->defer_connect,
				.unix_fd = TAKE_FD(br->defer_unix_fd),
				.done_fd = s->waits_pipe[1]};
	/* The target thread's pidfd; before 6.9 only a thread-group leader has one. */
	w->pidfd = (int)syscall(SYS_pidfd_open, tid, PIDFD_THREAD);
	if (w->pidfd < 0)
		w->pidfd = (int)syscall(SYS_pidfd_open, tid, 0);
	if (w->pidfd >= 0 && epoll_ctl(s->waits_ep, EPOLL_CTL_ADD, w->pidfd,
				       &(struct epoll_event){.events = EPOLLIN, .data.ptr = w}) < 0)
		w->pidfd = safe_close(w->pidfd);
	/* Killed before its pidfd was taken: nobody waits any more. */
	if (proc_target_still_valid(&(struct notif_ref){s->listener, id}) < 0) {
		safe_close(w->path_fd);
		safe_close(w->unix_fd);
		safe_close(w->pidfd);
		free(w);
		return;
	}
	/* The thread inherits the mask without FIFO_CANCEL_SIGNAL, then unblocks only that one. */
	sigset_t all, old;
	sigfillset(&all);
	(void)pthread_sigmask(SIG_BLOCK, &all, &old);
	int r = pthread_create(&w->thread, NULL, fifo_wait_thread, w);
	(void)pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r != 0) {
		safe_close(w->path_fd);
		safe_close(w->unix_fd);
		safe_close(w->pidfd);
		free(w);
		respond(s, id, 0, -EAGAIN, 0);
		return;
	}
	s->waits[s->n_waits++] = w;
}

int supervisor_fifo_fd(const struct supervisor *s)
{
	return s->n_waits > 0 ? s->waits_ep : -1;
}

void supervisor_fifo_check(struct supervisor *s)
{
	for (size_t i = 0; i < s->n_waits; i++)
		if (!s->waits[i]->cancelled &&
		    filter_notif_id_valid(s->listener, s->waits[i]->id) < 0)
			fifo_cancel(s->waits[i]);
}

int supervisor_fifo_done(struct supervisor *s)
{
	/* Targets that exited: end their waits now (the pipe then brings the threads back). */
	struct epoll_event ev[16];
	int n = epoll_wait(s->waits_ep, ev, (int)ELEMENTSOF(ev), 0);
	for (int i = 0; i < n; i++) {
		struct fifo_wait *dead = ev[i].data.ptr;
		if (!dead)
			continue;
		(void)epoll_ctl(s->waits_ep, EPOLL_CTL_DEL, dead->pidfd, NULL);
		dead->pidfd = safe_close(dead->pidfd);
		fifo_cancel(dead);
	}
	struct fifo_wait *w;
	while (read(s->waits_pipe[0], &w, sizeof w) == (ssize_t)sizeof w) {
		(void)pthread_join(w->thread, NULL);
		if (!w->cancelled && filter_notif_id_valid(s->listener, w->id) == 0) {
			if (w->result >= 0 && !w->connect)
				(void)send_fd(s, w->id, w->result, w->cloexec);
			else
				respond(s, w->id, 0, w->result, 0);
		}
		if (w->result >= 0 && !w->connect)
			close(w->result);
		safe_close(w->path_fd);
		safe_close(w->unix_fd);
		safe_close(w->pidfd); /* closing drops it from the epoll set */
		for (size_t i = 0; i < s->n_waits; i++)
			if (s->waits[i] == w) {
				s->waits[i] = s->waits[--s->n_waits];
				break;
			}
		free(w);
	}
	return (int)s->n_waits;
}

static void respond(struct supervisor *s, uint64_t id, int64_t val, int32_t err, uint32_t flags)
{
	struct seccomp_notif_resp *resp = s->resp;
	resp->id = id;
	resp->val = val;
	resp->error = err;
	resp->flags = flags;
	/* -ENOENT: the target was killed or interrupted meanwhile; nothing to answer. */
	(void)filter_notif_respond(s->listener, resp);
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
	if (s->copy_on_write) {
		/* A file call is notified only when it syncs: the kernel does the rest (the
		 * overlay, or EROFS). */
		const struct syscall_row *row = syscall_table_find(data->nr);
		if (row && syscall_row_cow_sync(row)) {
			s->sync_asked = true;
			respond(s, id, 0, 0, SECCOMP_USER_NOTIF_FLAG_CONTINUE);
			return 0;
		}
	}
	struct broker_req q;
	int r = syscall_decode(s->args, data, tid, &q);
	if (r == SYSCALL_DECODE_CHROOT)
		r = decide_chroot(tid, q.path);
	/* Decide only on copies, and only while the target is still the one that asked. */
	if (filter_notif_id_valid(s->listener, id) < 0)
		return 0;
	/* ... and again after each open under /proc/TID (resolve, umask): the broker checks it. */
	const struct notif_ref nref = {s->listener, id};
	q.notif = &nref;
	if (r == SYSCALL_DECODE_CONTINUE) {
		respond(s, id, 0, 0, SECCOMP_USER_NOTIF_FLAG_CONTINUE);
		return 0;
	}
	if (r == SYSCALL_DECODE_ACCESS) {
		r = broker_access(s->broker, &q);
		respond(s, id, 0, r < 0 ? r : 0, 0);
		return 0;
	}
	if (r == CHROOT_NOOP) {
		respond(s, id, 0, 0, 0);
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
		if ((r = send_fd(s, id, br.fd, br.cloexec)) < 0)
			broker_undo_creation(s->broker, &br);
		else
			broker_note_installed(s->broker, &br, r);
		break;
	case BROKER_RESP_DEFER:
		fifo_wait_start(s, id, tid, &br);
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
	int r = filter_notif_receive(s->listener, s->req);
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
		if (k > 0 && (!listener_ready(s) || receive(s) <= 0))
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
		else if (filter_notif_id_valid(s->listener, pend[i].id) == 0)
			respond(s, pend[i].id, 0, r, 0);
	}
	return 0;
}
