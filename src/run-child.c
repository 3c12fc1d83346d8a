/* SPDX-License-Identifier: MIT */
/*
 * The sandboxed child of a run: it narrows itself step by step (read-only mounts, no_new_privs,
 * capabilities, Landlock, the seccomp filter), hands the filter's listener to the parent and
 * executes the command. A failure before the exec is reported to the parent with the step that
 * failed.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/macro.h"
#include "basic/string-table.h"
#include "log.h"
#include "run-internal.h"
#include "sandbox.h"

enum child_stage { STAGE_MOUNTS = 1, STAGE_CAPS, STAGE_LANDLOCK, STAGE_SECCOMP, STAGE_SEND };

/*
 * The filter notifies sendmsg, and nobody answers before the parent has the listener: the child
 * only writes the fd's number and waits; the parent takes the fd with pidfd_getfd() and says so.
 */
struct listener_msg {
	char c; /* 'F': fd is the listener; 'E': err is the failure */
	int fd, err;
};

static int send_listener(int sock, int fd, int err)
{
	struct listener_msg m = {.c = err ? 'E' : 'F', .fd = fd, .err = err};
	if (write(sock, &m, sizeof m) != (ssize_t)sizeof m)
		return -EIO;
	if (err)
		return 0;
	char ack;
	return read(sock, &ack, 1) == 1 ? 0 : -EIO;
}

static int recv_listener(int sock, pid_t child)
{
	struct listener_msg m;
	ssize_t n = RETRY_EINTR(read(sock, &m, sizeof m));
	if (n < 0)
		return negative_errno();
	if (n == 0)
		return -ECHILD; /* the child died before it could say */
	if (n != (ssize_t)sizeof m)
		return -EPROTO;
	if (m.c == 'E')
		return m.err < 0 ? m.err : -EIO;
	if (m.c != 'F')
		return -EPROTO;
	int pidfd = (int)syscall(SYS_pidfd_open, child, 0);
	if (pidfd < 0)
		return -(STAGE_SEND << 16 | errno);
	int fd = (int)syscall(SYS_pidfd_getfd, pidfd, m.fd, 0);
	int e = errno;
	close(pidfd);
	if (fd < 0)
		return -(STAGE_SEND << 16 | e);
	(void)fcntl(fd, F_SETFD, FD_CLOEXEC);
	if (write(sock, "k", 1) != 1) {
		close(fd);
		return -ECHILD;
	}
	return fd;
}

_noreturn_ static void child_main(const struct run_options *o, int sock,
				  const struct run_child_sandbox *sb)
{
	const struct sandbox_landlock *ll = sb->landlock;
	/* Default signal dispositions and the caller's mask for the command. */
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
	sigprocmask(SIG_SETMASK, sb->oldmask, NULL);
	/* If the supervisor dies, the command dies with it (its grandchildren fail closed). */
	prctl(PR_SET_PDEATHSIG, SIGKILL);

	int stage = STAGE_MOUNTS, r = sb->user_ns ? sandbox_enter_user_ns() : 0;
	if (r >= 0 && sb->cow_workspace)
		r = sandbox_copy_on_write_mounts(sb->ro_mounts_scratch, sb->cow_workspace,
						 sb->cow_upper, sb->cow_work, sb->user_ns);
	else if (r >= 0 && sb->ro_mounts_scratch)
		r = sandbox_read_only_mounts(sb->ro_mounts_scratch);
	if (r < 0)
		goto fail;
	stage = STAGE_CAPS;
	/* no_new_privs first: Landlock needs it once CAP_SYS_ADMIN is gone. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		r = negative_errno();
		goto fail;
	}
	/* In a user namespace of its own the child had every capability there, for its mounts;
	 * the command gets none, as a user's command natively. */
	if ((r = sb->user_ns ? sandbox_drop_all_caps() : sandbox_drop_dangerous_caps()) < 0)
		goto fail;
	stage = STAGE_LANDLOCK;
	if (ll) {
		/* The overlay's directories exist only here: their rules are made here. */
		if (sb->cow_workspace &&
		    ((r = sandbox_landlock_allow_writes(ll, sb->cow_workspace)) < 0 ||
		     (sandbox_cow_private_shm(sb->ro_mounts_scratch, sb->cow_workspace) &&
		      (r = sandbox_landlock_allow_writes(ll, "/dev/shm")) < 0)))
			goto fail;
		if ((r = sandbox_landlock_apply(ll)) < 0)
			goto fail;
		close(ll->ruleset_fd);
	}
	stage = STAGE_SECCOMP;
	int listener = sandbox_install_filter(sb->prog, sb->wait_killable);
	if (listener < 0) {
		r = listener;
		goto fail;
	}
	stage = STAGE_SEND;
	if ((r = send_listener(sock, listener, 0)) < 0)
		goto fail;
	close(listener);
	close(sock);

	execvp(o->argv[0], o->argv);
	int e = errno;
	fprintf(stderr, "brokered: Failed to execute \"%s\": %s\n", o->argv[0], strerror(e));
	_exit(e == ENOENT ? RUN_EXIT_NOT_FOUND : RUN_EXIT_CANNOT_EXEC);

fail:
	/* stage in the high bits, so the parent can say what failed */
	(void)send_listener(sock, -1, -(stage << 16 | (-r & 0xffff)));
	_exit(RUN_EXIT_FAILURE);
}

static const char *const stage_table[] = {
    [STAGE_MOUNTS] = "make the read-only mount namespace (sandbox.readOnlyMounts, "
		     "sandbox.copyOnWrite)",
    [STAGE_CAPS] = "drop capabilities",
    [STAGE_LANDLOCK] = "enforce the Landlock ruleset",
    [STAGE_SECCOMP] = "install the seccomp filter",
    [STAGE_SEND] = "hand the seccomp listener to the supervisor",
};
DEFINE_PRIVATE_STRING_TABLE_LOOKUP_TO_STRING(stage, enum child_stage);

int run_child_start(const struct run_options *o, const struct run_child_sandbox *sb,
		    int close_in_child, pid_t *ret_pid)
{
	int sock[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sock) < 0)
		return log_error_errno(errno, "Failed to create a socket pair: %m");
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		int r = log_error_errno(errno, "Failed to fork: %m");
		close(sock[0]);
		close(sock[1]);
		return r;
	}
	if (pid == 0) {
		close(sock[0]);
		safe_close(close_in_child);
		child_main(o, sock[1], sb);
	}
	close(sock[1]);
	*ret_pid = pid;
	int listener = recv_listener(sock[0], pid);
	close(sock[0]);
	if (listener >= 0)
		return listener;
	int stage = (-listener) >> 16, err = (-listener) & 0xffff;
	waitpid(pid, NULL, 0);
	if (listener == -ECHILD || listener == -EPROTO)
		return log_error_errno(
		    ECHILD, "Failed to start the sandboxed command: the child exited early");
	return log_error_errno(err, "Failed to %s: %m",
			       stage_to_string((enum child_stage)stage)
				   ?: stage_to_string(STAGE_SEND));
}
