/* SPDX-License-Identifier: MIT */
#include "run.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "audit.h"
#include "basic/json-write.h"
#include "basic/kernel-compat.h"
#include "basic/macro.h"
#include "basic/strbuf.h"
#include "broker.h"
#include "cli.h"
#include "log.h"
#include "policy.h"
#include "sandbox.h"
#include "settings.h"
#include "store.h"
#include "supervisor.h"

/* ---- scratch dir ---- */

static int remove_tree_at(int dirfd, const char *name, int depth)
{
	if (depth > 256)
		return -ELOOP;
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOTDIR || errno == ELOOP ? (unlinkat(dirfd, name, 0) < 0 ? negative_errno() : 0)
							  : negative_errno();
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return negative_errno();
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (de->d_type == DT_DIR || de->d_type == DT_UNKNOWN)
			(void)remove_tree_at(fd, de->d_name, depth + 1);
		else
			(void)unlinkat(fd, de->d_name, 0);
	}
	closedir(d);
	return unlinkat(dirfd, name, AT_REMOVEDIR) < 0 ? negative_errno() : 0;
}

static int make_scratch(char **ret)
{
	const char *tmp = getenv("TMPDIR");
	if (!tmp || tmp[0] != '/' || access(tmp, W_OK) != 0)
		tmp = "/tmp";
	struct strbuf sb = STRBUF_INIT;
	strbuf_printf(&sb, "%s/brokered-%d-XXXXXX", tmp, (int)getpid());
	char *t = strbuf_steal(&sb);
	if (!t)
		return -ENOMEM;
	if (!mkdtemp(t)) {
		int r = negative_errno();
		free(t);
		return r;
	}
	char *real = realpath(t, NULL);
	free(t);
	if (!real)
		return negative_errno();
	*ret = real;
	return 0;
}

/* ---- passing the listener fd from the child ---- */

static int send_fd(int sock, int fd, int err)
{
	char c = err ? 'E' : 'F';
	struct iovec iov[2] = {{&c, 1}, {&err, sizeof err}};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
	if (!err) {
		mh.msg_control = u.buf;
		mh.msg_controllen = sizeof u.buf;
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof fd);
	}
	return sendmsg(sock, &mh, MSG_NOSIGNAL) < 0 ? negative_errno() : 0;
}

/* Returns the fd, or the child's -errno with *ret_stage set. */
static int recv_fd(int sock)
{
	char c = 0;
	int err = 0;
	struct iovec iov[2] = {{&c, 1}, {&err, sizeof err}};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2, .msg_control = u.buf,
			    .msg_controllen = sizeof u.buf};
	ssize_t n = RETRY_EINTR(recvmsg(sock, &mh, MSG_CMSG_CLOEXEC));
	if (n < 0)
		return negative_errno();
	if (n == 0)
		return -ECHILD; /* the child died before it could say */
	if (c == 'E')
		return err < 0 ? err : -EIO;
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	if (!cm || cm->cmsg_type != SCM_RIGHTS)
		return -EPROTO;
	int fd;
	memcpy(&fd, CMSG_DATA(cm), sizeof fd);
	return fd;
}

/* ---- the child ---- */

enum child_stage { STAGE_CAPS = 1, STAGE_LANDLOCK, STAGE_SECCOMP, STAGE_SEND };

_noreturn_ static void child_main(const struct run_options *o, int sock,
				  const struct sandbox_landlock *ll, const struct sock_fprog *prog,
				  bool wait_killable, const sigset_t *oldmask)
{
	/* Default signal dispositions and the caller's mask for the command. */
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
	sigprocmask(SIG_SETMASK, oldmask, NULL);
	/* If the supervisor dies, the command dies with it (its grandchildren fail closed). */
	prctl(PR_SET_PDEATHSIG, SIGKILL);

	int r, stage = STAGE_CAPS;
	/* no_new_privs first: Landlock needs it once CAP_SYS_ADMIN is gone. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		r = negative_errno();
		goto fail;
	}
	if ((r = sandbox_drop_dangerous_caps()) < 0)
		goto fail;
	stage = STAGE_LANDLOCK;
	if ((r = sandbox_landlock_apply(ll)) < 0)
		goto fail;
	close(ll->ruleset_fd);
	stage = STAGE_SECCOMP;
	int listener = sandbox_install_filter(prog, wait_killable);
	if (listener < 0) {
		r = listener;
		goto fail;
	}
	stage = STAGE_SEND;
	if ((r = send_fd(sock, listener, 0)) < 0)
		goto fail;
	close(listener);
	close(sock);

	execvp(o->argv[0], o->argv);
	int e = errno;
	fprintf(stderr, "brokered: Failed to execute \"%s\": %s\n", o->argv[0], strerror(e));
	_exit(e == ENOENT ? RUN_EXIT_NOT_FOUND : RUN_EXIT_CANNOT_EXEC);

fail:
	/* stage in the high bits, so the parent can say what failed */
	(void)send_fd(sock, -1, -(stage << 16 | (-r & 0xffff)));
	_exit(RUN_EXIT_FAILURE);
}

/* ---- ending what is left behind ---- */

/* Kill every child of ours (the subreaper collects orphans) and return how many there were. */
static int kill_children(void)
{
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return 0;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		char p[320];
		snprintf(p, sizeof p, "/proc/self/task/%s/children", de->d_name);
		FILE *f = fopen(p, "re");
		if (!f)
			continue;
		int pid;
		while (fscanf(f, "%d", &pid) == 1) {
			if (pid > 1 && kill(pid, SIGKILL) == 0)
				n++;
		}
		fclose(f);
	}
	closedir(d);
	return n;
}

/* ---- the run ---- */

struct run_state {
	pid_t child;
	bool child_done;
	int child_status;
	int listener;
	bool listener_hup;
};

static int status_to_exit(int st)
{
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return RUN_EXIT_FAILURE;
}

static void reap(struct run_state *rs)
{
	for (;;) {
		int st;
		pid_t p = waitpid(-1, &st, WNOHANG | __WALL);
		if (p <= 0)
			return;
		if (p == rs->child) {
			rs->child_done = true;
			rs->child_status = st;
		}
	}
}

static int supervise(struct run_state *rs, struct supervisor *sv, struct audit *audit, int sfd)
{
	bool killing = false;
	for (;;) {
		if (rs->child_done && rs->listener_hup)
			break;
		if (rs->child_done && !killing) {
			killing = true;
		}
		if (killing)
			kill_children();
		struct pollfd pfd[2] = {
			{.fd = rs->listener_hup ? -1 : rs->listener, .events = POLLIN},
			{.fd = sfd, .events = POLLIN},
		};
		int waiting = supervisor_retry_deferred(sv);
		int n = poll(pfd, 2, waiting ? 5 : killing ? 20 : 250);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return log_error_errno(errno, "Failed to wait for the sandbox: %m");
		}
		if (n == 0) {
			(void)audit_flush(audit);
			if (killing && !rs->listener_hup) {
				/* Nobody left to kill but the filter still has users: zombies being
				 * reaped, or a process of ours not yet reparented. Keep going. */
				reap(rs);
			}
			continue;
		}
		if (pfd[0].revents & POLLIN) {
			int r = supervisor_handle_one(sv);
			if (r < 0 && r != -ENOENT) {
				log_error_errno(r, "Failed to receive a notification: %m");
				rs->listener_hup = true;
			}
		} else if (pfd[0].revents & (POLLHUP | POLLERR | POLLNVAL)) {
			rs->listener_hup = true; /* no task uses the filter any more */
		}
		if (pfd[1].revents & POLLIN) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
				int sig = (int)si.ssi_signo;
				if (sig == SIGCHLD) {
					reap(rs);
					continue;
				}
				/* A terminal's signals reach the command's process group by themselves;
				 * forward only what was sent to brokered alone. */
				if (si.ssi_code != SI_KERNEL && !rs->child_done)
					kill(rs->child, sig);
			}
		}
	}
	return 0;
}

static const char *stage_name(int stage)
{
	switch (stage) {
	case STAGE_CAPS:
		return "drop capabilities";
	case STAGE_LANDLOCK:
		return "enforce the Landlock ruleset";
	case STAGE_SECCOMP:
		return "install the seccomp filter";
	case STAGE_SEND:
	default:
		return "hand the seccomp listener to the supervisor";
	}
}

static char *command_line(char **argv)
{
	struct strbuf sb = STRBUF_INIT;
	for (size_t i = 0; argv[i]; i++) {
		if (i)
			strbuf_appendc(&sb, ' ');
		strbuf_appends(&sb, argv[i]);
		if (sb.len > 200) {
			strbuf_appends(&sb, "...");
			break;
		}
	}
	return strbuf_steal(&sb);
}

static char *make_tool_call_id(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct strbuf sb = STRBUF_INIT;
	strbuf_printf(&sb, "tc-%lld-%d-%04lx", (long long)ts.tv_sec, (int)getpid(),
		      (long)(ts.tv_nsec / 1000) & 0xffff);
	return strbuf_steal(&sb);
}

static void print_json_report(const struct run_options *o, const char *session, const char *turn,
			      int exit_status, const struct broker_stats *st, char **oversize)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_appendc(&sb, '{');
	json_kv_int(&sb, "exitStatus", exit_status);
	json_kv_str(&sb, "session", session);
	json_kv_str(&sb, "turn", turn);
	json_kv_int(&sb, "requests", (int64_t)st->requests);
	json_kv_int(&sb, "allowed", (int64_t)st->allowed);
	json_kv_int(&sb, "denied", (int64_t)st->denied);
	json_kv_int(&sb, "backupsSaved", (int64_t)st->backups_saved);
	json_kv_int(&sb, "created", (int64_t)st->backups_absent);
	json_key(&sb, "notBackedUp");
	strbuf_appendc(&sb, '[');
	for (size_t i = 0; oversize && oversize[i]; i++) {
		if (i)
			strbuf_appendc(&sb, ',');
		json_append_strings(&sb, oversize[i]);
	}
	strbuf_appends(&sb, "]}\n");
	if (!sb.oom)
		fputs(sb.buf, stderr);
	strbuf_free(&sb);
	(void)o;
}

int run_command(const struct run_options *o)
{
	int r, ret = RUN_EXIT_FAILURE;
	_cleanup_free_ char *workspace = NULL, *scratch = NULL, *state_dir = NULL, *session = NULL,
			    *tool_call = NULL, *cmdline = NULL, *audit_path = NULL, *failed = NULL;
	struct settings *settings = NULL;
	struct policy *policy = NULL;
	struct store *store = NULL;
	struct store_turn *turn = NULL;
	bool turn_owned = false;
	struct audit *audit = NULL;
	struct broker *broker = NULL;
	struct supervisor *sv = NULL;
	struct sandbox_landlock ll = {.ruleset_fd = -1};
	struct sock_fprog prog = {0};
	int sfd = -1, sock[2] = {-1, -1};
	sigset_t mask, oldmask;
	bool mask_set = false;

	workspace = realpath(o->workspace ? o->workspace : ".", NULL);
	if (!workspace) {
		log_error_errno(errno, "Failed to open the workspace \"%s\": %m",
				o->workspace ? o->workspace : ".");
		goto out;
	}
	struct stat wst;
	if (stat(workspace, &wst) < 0 || !S_ISDIR(wst.st_mode)) {
		log_error("The workspace \"%s\" is not a directory", workspace);
		goto out;
	}

	struct sandbox_features feat;
	sandbox_probe(&feat);
	if (feat.landlock_abi < 1) {
		log_error("Failed to set up the sandbox: this kernel has no Landlock");
		log_error("Hint: Landlock needs Linux 5.13+ with CONFIG_SECURITY_LANDLOCK=y and \"landlock\" in the lsm= boot parameter; `brokered doctor` shows what is missing.");
		goto out;
	}
	if (!feat.seccomp_notify) {
		log_error("Failed to set up the sandbox: this kernel has no seccomp user notification");
		log_error("Hint: seccomp user notification needs Linux 5.9+ (5.14+ for ADDFD_FLAG_SEND); `brokered doctor` shows what is missing.");
		goto out;
	}

	const char *home = getenv("HOME");
	struct passwd *pw = NULL;
	if (!home || home[0] != '/') {
		pw = getpwuid(getuid());
		home = pw ? pw->pw_dir : NULL;
	}

	if ((r = settings_new(&settings)) < 0) {
		log_error_errno(r, "Failed to allocate settings: %m");
		goto out;
	}
	struct settings_error serr = {0};
	r = settings_load_all(settings, home, getenv("XDG_CONFIG_HOME"), workspace, o->settings, &serr);
	if (r < 0) {
		log_error("Failed to load settings: %s", serr.message ? serr.message : strerror(-r));
		settings_error_done(&serr);
		goto out;
	}
	for (size_t i = 0; i < settings->n_warnings; i++)
		log_warning("%s", settings->warnings[i]);

	if ((r = store_state_dir(&state_dir)) < 0) {
		log_error_errno(r, "Failed to create the state directory: %m");
		goto out;
	}
	if (o->session) {
		if (!store_id_valid(o->session)) {
			log_error("Invalid session id \"%s\"", o->session);
			goto out;
		}
		session = strdup(o->session);
	} else if ((r = cli_default_session_id(workspace, &session)) < 0) {
		log_error_errno(r, "Failed to derive a session id: %m");
		goto out;
	}
	tool_call = o->tool_call ? strdup(o->tool_call) : make_tool_call_id();
	cmdline = command_line(o->argv);
	if (!session || !tool_call || !cmdline) {
		log_error("Out of memory");
		goto out;
	}

	if ((r = make_scratch(&scratch)) < 0) {
		log_error_errno(r, "Failed to create the scratch directory: %m");
		goto out;
	}
	struct policy_error perr = {0};
	r = policy_new(settings, workspace, scratch, home, state_dir, &policy, &perr);
	if (r < 0) {
		log_error("Failed to build the policy: %s", perr.message ? perr.message : strerror(-r));
		policy_error_done(&perr);
		goto out;
	}

	/* Settings the sandbox must not edit beyond the built-in ones: an XDG config dir elsewhere,
	 * and the --settings file. */
	{
		const char *xdg = getenv("XDG_CONFIG_HOME");
		_cleanup_free_ char *extra_real = o->settings ? realpath(o->settings, NULL) : NULL;
		struct strbuf sb = STRBUF_INIT;
		if (xdg && xdg[0] == '/')
			strbuf_printf(&sb, "%s/brokered", xdg);
		if ((sb.len && (r = policy_protect(policy, sb.buf, "settings")) < 0) ||
		    (extra_real && (r = policy_protect(policy, extra_real, "settings")) < 0)) {
			strbuf_free(&sb);
			log_error_errno(r, "Failed to protect the settings files: %m");
			goto out;
		}
		strbuf_free(&sb);
	}

	if ((r = store_open(state_dir, session, &store)) < 0) {
		log_error_errno(r, "Failed to open the backup store of session \"%s\": %m", session);
		goto out;
	}
	struct store_options so = {
		.enabled = settings->backup_enabled,
		.max_size_bytes = settings->backup_max_size_mb * 1024 * 1024,
		.deny_oversize = settings->backup_deny_oversize,
		.sync = true,
	};
	const char *msg = o->message ? o->message : cmdline;
	if ((r = store_turn_join_or_begin(store, &so, tool_call, msg, &turn, &turn_owned)) < 0) {
		log_error_errno(r, "Failed to open a backup turn: %m");
		goto out;
	}
	{
		struct strbuf sb = STRBUF_INIT;
		strbuf_printf(&sb, "%s/audit.log", store_session_dir(store));
		audit_path = strbuf_steal(&sb);
	}
	if (!audit_path || (r = audit_open(audit_path, session, tool_call, &audit)) < 0) {
		log_error_errno(r, "Failed to open the audit log \"%s\": %m", audit_path ? audit_path : "");
		goto out;
	}

	struct broker_config bc = {
		.workspace = workspace,
		.scratch = scratch,
		.state_dir = state_dir,
		.home = home,
		.backup_enabled = settings->backup_enabled,
	};
	if ((r = broker_new(&bc, audit, turn, &broker)) < 0) {
		log_error_errno(r, "Failed to start the broker: %m");
		goto out;
	}
	broker_set_policy(broker, policy);

	if ((r = sandbox_landlock_prepare(scratch, &ll, &failed)) < 0) {
		log_error_errno(r, "Failed to build the Landlock ruleset%s%s%s: %m", failed ? " for \"" : "",
				failed ? failed : "", failed ? "\"" : "");
		goto out;
	}
	if ((r = sandbox_build_filter(&prog)) < 0) {
		log_error_errno(r, "Failed to build the seccomp filter: %m");
		goto out;
	}

	/* Environment the command sees. */
	setenv("TMPDIR", scratch, 1);
	setenv("BROKERED_SESSION_ID", session, 1);
	setenv("BROKERED_TOOL_CALL_ID", tool_call, 1);
	setenv("BROKERED_WORKSPACE", workspace, 1);
	setenv("BROKERED_TURN_ID", store_turn_id(turn), 1);

	/* Signals are read from a signalfd; the child gets the old mask back. */
	sigemptyset(&mask);
	int sigs[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH, SIGUSR1, SIGUSR2};
	for (size_t i = 0; i < ELEMENTSOF(sigs); i++)
		sigaddset(&mask, sigs[i]);
	sigprocmask(SIG_BLOCK, &mask, &oldmask);
	mask_set = true;
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0) {
		log_error_errno(errno, "Failed to create a signalfd: %m");
		goto out;
	}
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) {
		log_error_errno(errno, "Failed to become the child subreaper: %m");
		goto out;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sock) < 0) {
		log_error_errno(errno, "Failed to create a socket pair: %m");
		goto out;
	}
	(void)audit_flush(audit);
	fflush(NULL);

	struct run_state rs = {.listener = -1};
	rs.child = fork();
	if (rs.child < 0) {
		log_error_errno(errno, "Failed to fork: %m");
		goto out;
	}
	if (rs.child == 0) {
		close(sock[0]);
		close(sfd);
		child_main(o, sock[1], &ll, &prog, feat.wait_killable, &oldmask);
	}
	close(sock[1]);
	sock[1] = -1;
	rs.listener = recv_fd(sock[0]);
	if (rs.listener < 0) {
		int e = rs.listener;
		int stage = (-e) >> 16, err = (-e) & 0xffff;
		waitpid(rs.child, NULL, 0);
		if (e == -ECHILD || e == -EPROTO)
			log_error("Failed to start the sandboxed command: the child exited early");
		else
			log_error_errno(err, "Failed to %s: %m", stage_name(stage));
		goto out;
	}
	/* Wake the target on the CPU that answers it (6.6+); harmless where unsupported. */
	uint64_t fl = SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP;
	(void)ioctl(rs.listener, SECCOMP_IOCTL_NOTIF_SET_FLAGS, &fl);

	if ((r = supervisor_new(rs.listener, broker, &sv)) < 0) {
		log_error_errno(r, "Failed to start the supervisor: %m");
		kill(rs.child, SIGKILL);
		goto out;
	}
	r = supervise(&rs, sv, audit, sfd);
	if (r < 0) {
		kill(rs.child, SIGKILL);
	}
	/* Reap whatever is left (all sandboxed processes are gone once the listener hung up). */
	while (waitpid(-1, NULL, __WALL) > 0 || errno == EINTR)
		;
	safe_close(rs.listener);
	ret = rs.child_done ? status_to_exit(rs.child_status) : RUN_EXIT_FAILURE;

	/* The terminal's foreground may still be the command's process group. */
	if (isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) != getpgrp()) {
		signal(SIGTTOU, SIG_IGN);
		(void)tcsetpgrp(STDIN_FILENO, getpgrp());
		signal(SIGTTOU, SIG_DFL);
	}

	const struct broker_stats *st = broker_get_stats(broker);
	char **oversize = broker_not_backed_up(broker);
	if (st->not_backed_up) {
		log_warning("%" PRIu64 " file(s) changed without a backup (larger than maxSizeMB=%" PRIu64 "):",
			    st->not_backed_up, settings->backup_max_size_mb);
		for (size_t i = 0; oversize && oversize[i] && i < 10; i++)
			log_warning("  %s", oversize[i]);
	}
	if (o->json)
		print_json_report(o, session, store_turn_id(turn), ret, st, oversize);
	if (turn_owned) {
		r = store_turn_commit(turn, msg);
		turn = NULL;
		if (r < 0)
			log_warning_errno(r, "Failed to commit the backup turn (it stays open; `brokered log` lists it): %m");
	}
out:
	if (turn)
		store_turn_free(turn);
	supervisor_free(sv);
	broker_free(broker);
	audit_close(audit);
	store_close(store);
	policy_free(policy);
	settings_free(settings);
	free(prog.filter);
	safe_close(ll.ruleset_fd);
	safe_close(sock[0]);
	safe_close(sock[1]);
	safe_close(sfd);
	if (mask_set)
		sigprocmask(SIG_SETMASK, &oldmask, NULL);
	if (scratch)
		(void)remove_tree_at(AT_FDCWD, scratch, 0);
	return ret;
}
