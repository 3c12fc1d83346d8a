/* SPDX-License-Identifier: MIT */
#include "run.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "approval.h"
#include "audit.h"
#include "basic/fs-util.h"
#include "basic/json-write.h"
#include "basic/kernel-compat.h"
#include "basic/macro.h"
#include "basic/user-util.h"
#include "basic/path-util.h"
#include "basic/strbuf.h"
#include "broker.h"
#include "ipc.h"
#include "cli.h"
#include "git-guard.h"
#include "log.h"
#include "net-proxy.h"
#include "net.h"
#include "policy.h"
#include "run-internal.h"
#include "sandbox.h"
#include "settings.h"
#include "store.h"
#include "supervisor.h"

/* ---- scratch dir ---- */

/*
 * The scratch dir, in the first of $TMPDIR, /tmp, /var/tmp, $XDG_RUNTIME_DIR where one can be
 * made: another sandbox around brokered (Codex and others wrap commands so) may leave only the
 * workspace and the state dir writable. Then it goes beside the state dir, in
 * <state dir>-scratch/ (not inside: the policy keeps the state dir closed to the command).
 */
static int make_scratch(const char *state_dir, char **ret)
{
	_cleanup_free_ char *beside = NULL;
	if (asprintf(&beside, "%s-scratch", state_dir) < 0)
		return -ENOMEM;
	const char *candidates[] = {getenv("TMPDIR"), "/tmp", "/var/tmp", getenv("XDG_RUNTIME_DIR"),
				    beside};
	int r = -ENOENT;
	for (size_t i = 0; i < ELEMENTSOF(candidates); i++) {
		const char *dir = candidates[i];
		if (!dir || dir[0] != '/')
			continue;
		if (dir == beside && mkdir(beside, 0700) < 0 && errno != EEXIST)
			return negative_errno();
		_cleanup_free_ char *t = NULL;
		if (asprintf(&t, "%s/brokered-%d-XXXXXX", dir, (int)getpid()) < 0)
			return -ENOMEM;
		if (!mkdtemp(t)) {
			r = negative_errno();
			continue;
		}
		if (i > 1)
			log_debug("scratch directory in %s: the ones before it are not writable",
				  dir);
		char *real = realpath(t, NULL);
		if (!real)
			return negative_errno();
		*ret = real;
		return 0;
	}
	return r;
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

static int supervise(struct run_state *rs, struct supervisor *sv, struct ipc_server *ipc,
		     struct audit *audit, int sfd)
{
	bool killing = false;
	/* the listener, the signalfd, finished FIFO waits, then the broker socket's listener and
	 * clients */
	static struct pollfd pfd[3 + IPC_MAX_CLIENTS_DEFAULT + 1];
	for (;;) {
		if (rs->child_done && rs->listener_hup)
			break;
		if (rs->child_done)
			killing = true;
		if (killing)
			kill_children();
		pfd[0] =
		    (struct pollfd){.fd = rs->listener_hup ? -1 : rs->listener, .events = POLLIN};
		pfd[1] = (struct pollfd){.fd = sfd, .events = POLLIN};
		pfd[2] = (struct pollfd){.fd = supervisor_fifo_fd(sv), .events = POLLIN};
		size_t n_ipc = ipc ? ipc_server_pollfds(ipc, pfd + 3, ELEMENTSOF(pfd) - 3) : 0;
		supervisor_fifo_check(sv); /* FIFO waits whose target was killed end */
		int timeout = killing ? 20 : 250;
		int it = ipc ? ipc_server_timeout_ms(ipc) : -1;
		if (it >= 0 && it < timeout)
			timeout = it;
		int n = poll(pfd, 3 + n_ipc, timeout);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return log_error_errno(errno, "Failed to wait for the sandbox: %m");
		}
		if (ipc)
			ipc_server_handle(ipc, pfd + 3, n_ipc);
		if (pfd[2].revents & POLLIN)
			(void)supervisor_fifo_done(sv);
		if (n == 0) {
			(void)audit_flush(audit);
			if (killing && !rs->listener_hup)
				reap(rs); /* zombies being reaped, orphans not yet reparented */
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
				/* A terminal's signals reach the command's process group by
				 * themselves; forward only what was sent to brokered alone. */
				if (si.ssi_code != SI_KERNEL && !rs->child_done)
					kill(rs->child, sig);
			}
		}
	}
	return 0;
}

static char *command_line(char **argv, const char *shell_string)
{
	struct strbuf sb = STRBUF_INIT;
	if (shell_string) {
		strbuf_append(&sb, shell_string, MIN(strlen(shell_string), (size_t)200));
		if (strlen(shell_string) > 200)
			strbuf_appends(&sb, "...");
		return strbuf_steal(&sb);
	}
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

/* BROKERED_DEBUG=1 shows where a run's start-up time goes. */
static void phase(const char *what)
{
	if (log_get_level() < LOG_LEVEL_DEBUG)
		return;
	static struct timespec t0;
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	if (!t0.tv_sec)
		t0 = t;
	log_debug("%8.3f ms  %s",
		  (double)(t.tv_sec - t0.tv_sec) * 1e3 + (double)(t.tv_nsec - t0.tv_nsec) / 1e6,
		  what);
}

/* ---- one run: set-up shared by its attempts ---- */

struct run_ctx {
	const struct run_options *o;
	char *workspace, *state_dir, *session, *tool_call, *cmdline, *scratch, *audit_path,
	    *home_real;
	const char *home;
	const char *msg;
	struct sandbox_features feat;
	bool landlock;	/* false only in --degraded mode on a kernel without it */
	bool ro_mounts; /* sandbox.readOnlyMounts in effect (sandbox.h) */
	bool cow;	/* sandbox.copyOnWrite in effect (implies ro_mounts) */
	bool user_ns;	/* their mounts made in a user namespace of the child's own (not root) */
	struct settings *settings;
	struct policy *policy;
	struct store *store;
	struct store_options so;
	struct audit *audit;
	struct sandbox_landlock ll;
	struct sock_fprog prog;
	char **read_denied;
	size_t n_read_denied;
	struct net *net;	 /* socket and network policy */
	struct net_proxy *proxy; /* network mode "proxy" */
	unsigned n_attempts;
};

static void ctx_done(struct run_ctx *c)
{
	net_proxy_stop(c->proxy);
	net_free(c->net);
	audit_close(c->audit);
	store_close(c->store);
	policy_free(c->policy);
	settings_free(c->settings);
	free(c->prog.filter);
	safe_close(c->ll.ruleset_fd);
	if (c->scratch)
		(void)rm_rf_at(AT_FDCWD, c->scratch);
	for (size_t i = 0; i < c->n_read_denied; i++)
		free(c->read_denied[i]);
	free(c->read_denied);
	free(c->workspace);
	free(c->state_dir);
	free(c->session);
	free(c->tool_call);
	free(c->cmdline);
	free(c->scratch);
	free(c->audit_path);
	free(c->home_real);
}

/*
 * Network mode "proxy": the proxy listens on 127.0.0.1, the only address the sandbox may reach;
 * programs find it through the usual variables. NO_PROXY names only what may be reached directly
 * (the local host with allowLocalhost), overriding an inherited list that would send the
 * command around the proxy into a refusal.
 */
static int start_proxy(struct run_ctx *c)
{
	int r = net_proxy_start(c->net, &c->proxy);
	if (r < 0)
		return log_error_errno(r, "Failed to start the network proxy: %m");
	char http[64], socks[64];
	unsigned port = ntohs(c->net->proxy.sin_port);
	snprintf(http, sizeof http, "http://127.0.0.1:%u", port);
	snprintf(socks, sizeof socks, "socks5h://127.0.0.1:%u", port);
	static const char *const http_vars[] = {"HTTP_PROXY", "http_proxy", "HTTPS_PROXY",
						"https_proxy"};
	for (size_t i = 0; i < ELEMENTSOF(http_vars); i++)
		setenv(http_vars[i], http, 1);
	setenv("ALL_PROXY", socks, 1);
	setenv("all_proxy", socks, 1);
	const char *no = c->net->allow_localhost ? "localhost,127.0.0.1,::1" : "";
	setenv("NO_PROXY", no, 1);
	setenv("no_proxy", no, 1);
	return 0;
}

/* The command's root word: basename of argv[0], or the first word of a -c string. */
static char *root_word(const struct run_options *o)
{
	const char *s = o->shell_string;
	if (!s) {
		const char *b = strrchr(o->argv[0], '/');
		return strdup(b ? b + 1 : o->argv[0]);
	}
	for (;;) {
		while (*s == ' ' || *s == '\t' || *s == '\n')
			s++;
		size_t n = strcspn(s, " \t\n;&|()<>");
		const char *eq = memchr(s, '=', n);
		if (n && eq && eq != s) { /* VAR=value prefix */
			s += n;
			continue;
		}
		_cleanup_free_ char *w = strndup(s, n);
		if (!w)
			return NULL;
		const char *b = strrchr(w, '/');
		return strdup(b ? b + 1 : w);
	}
}

_noreturn_ static void exec_unsandboxed(const struct run_options *o)
{
	fflush(NULL);
	execvp(o->argv[0], o->argv);
	int e = errno;
	log_error_errno(e, "Failed to execute \"%s\": %m", o->argv[0]);
	_exit(e == ENOENT ? RUN_EXIT_NOT_FOUND : RUN_EXIT_CANNOT_EXEC);
}

static bool ask_yes_no(const char *question)
{
	if (!approval_interactive())
		return false;
	FILE *tty = fopen("/dev/tty", "r+e");
	if (!tty)
		return false;
	fprintf(tty, "%s [y/N] ", question);
	fflush(tty);
	char a[16] = "";
	bool yes = fgets(a, sizeof a, tty) && (a[0] == 'y' || a[0] == 'Y');
	fclose(tty);
	return yes;
}

/* The toggles of DESIGN section 6 that run the command without the sandbox, each said aloud. */
static void maybe_run_unsandboxed(struct run_ctx *c)
{
	const struct run_options *o = c->o;
	if (o->dangerously_disable_sandbox) {
		if (!ask_yes_no(
			"brokered: run this command WITHOUT the sandbox and without backups?")) {
			log_error("--dangerously-disable-sandbox needs a yes on a terminal; not "
				  "running the command");
			exit(RUN_EXIT_FAILURE);
		}
		log_warning("running unsandboxed (approved): no policy, no backups, no audit");
		exec_unsandboxed(o);
	}
	if (!c->settings->sandbox_enabled) {
		log_warning("sandbox.enabled is false in the settings: running unsandboxed, no "
			    "policy, no backups");
		exec_unsandboxed(o);
	}
	_cleanup_free_ char *w = root_word(o);
	for (size_t i = 0; w && i < c->settings->n_excluded_commands; i++) {
		const char *pat = c->settings->excluded_commands[i];
		if (fnmatch(pat, w, 0) == 0) {
			log_warning("\"%s\" matches sandbox.excludedCommands \"%s\": running "
				    "unsandboxed, no policy, no backups",
				    w, pat);
			exec_unsandboxed(o);
		}
	}
}

static int read_deny_list(struct run_ctx *c)
{
	if (!c->landlock || !policy_needs_read_checks(c->policy))
		return 0;
	size_t n = 0;
	const char *const *v = policy_read_restricted(c->policy, &n);
	c->read_denied = calloc(n + 1, sizeof *c->read_denied);
	if (!c->read_denied)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		/* A prefix that holds the workspace or the scratch dir (a wildcard rule's
		 * directory) cannot be denied wholesale without breaking the run: leave it to the
		 * policy. */
		if (path_is_under(c->workspace, v[i]) || path_is_under(c->scratch, v[i]) ||
		    strcmp(v[i], "/") == 0) {
			log_debug(
			    "read rule on \"%s\" not enforced by Landlock: it holds the workspace",
			    v[i]);
			continue;
		}
		c->read_denied[c->n_read_denied] = strdup(v[i]);
		if (!c->read_denied[c->n_read_denied])
			return -ENOMEM;
		c->n_read_denied++;
	}
	return 0;
}

/* The workspace, the home directory and the settings. */
static int setup_settings(struct run_ctx *c)
{
	const struct run_options *o = c->o;
	c->workspace = realpath(o->workspace ? o->workspace : ".", NULL);
	if (!c->workspace) {
		int r = negative_errno();
		log_error_errno(r, "Failed to open the workspace \"%s\": %m",
				o->workspace ? o->workspace : ".");
		return r; /* < 0 for the analyzer, which does not see into log_internal() */
	}
	struct stat wst;
	if (stat(c->workspace, &wst) < 0 || !S_ISDIR(wst.st_mode)) {
		log_error("The workspace \"%s\" is not a directory", c->workspace);
		return -ENOTDIR;
	}
	const char *home = user_home();
	/* The policy compares real paths: a home reached through a symlink must match too. */
	c->home_real = home ? realpath(home, NULL) : NULL;
	c->home = c->home_real ? c->home_real : home;
	int r = settings_new(&c->settings);
	if (r < 0)
		return log_error_errno(r, "Failed to allocate settings: %m");
	struct settings_error serr = {0};
	r = settings_load_all(c->settings, c->home, getenv("XDG_CONFIG_HOME"), c->workspace,
			      o->settings, &serr);
	if (r < 0) {
		log_error("Failed to load settings: %s",
			  serr.message ? serr.message : strerror(-r));
		settings_error_done(&serr);
		return r;
	}
	for (size_t i = 0; i < c->settings->n_warnings; i++)
		log_warning("%s", c->settings->warnings[i]);
	return 0;
}

/* Seccomp user notification is a must; Landlock too, unless --degraded. */
static int setup_kernel_features(struct run_ctx *c)
{
	sandbox_probe(&c->feat);
	const char *pretend = getenv("BROKERED_PRETEND_MISSING"); /* tests of the degraded modes */
	if (pretend && strstr(pretend, "landlock"))
		c->feat.landlock_abi = 0;
	if (pretend && strstr(pretend, "seccomp"))
		c->feat.seccomp_notify = false;
	c->landlock = c->feat.landlock_abi >= 1;
	if (!c->feat.seccomp_notify || !c->feat.openat2 || !c->feat.pidfd_getfd) {
		log_error("Failed to set up the sandbox: this kernel has no seccomp user "
			  "notification%s%s",
			  c->feat.openat2 ? "" : " or openat2",
			  c->feat.pidfd_getfd ? "" : " or pidfd_getfd");
		log_error("Hint: brokered needs Linux 5.14+ (seccomp ADDFD_FLAG_SEND, openat2); "
			  "without them no change can be brokered or backed up, so there is no "
			  "degraded mode. `brokered doctor` shows what is missing.");
		return -EOPNOTSUPP;
	}
	if (c->landlock)
		return 0;
	if (!c->o->degraded) {
		log_error("Failed to set up the sandbox: this kernel has no Landlock");
		log_error("Hint: Landlock needs Linux 5.13+ with CONFIG_SECURITY_LANDLOCK=y and "
			  "\"landlock\" in the lsm= boot parameter. `brokered run --degraded` "
			  "runs without it: every change is still brokered and backed up, but "
			  "nothing in the kernel backs the broker up (reads of secrets are not "
			  "denied, and a bug in the broker is not caught). `brokered doctor` "
			  "shows what is missing.");
		return -EOPNOTSUPP;
	}
	log_warning("degraded: no Landlock on this kernel; the broker alone enforces the "
		    "policy, secrets stay readable");
	return 0;
}

/* The state dir, the session, the tool call's id and the command line. */
static int setup_session(struct run_ctx *c)
{
	const struct run_options *o = c->o;
	int r = store_state_dir(&c->state_dir);
	if (r < 0)
		return log_error_errno(r, "Failed to create the state directory: %m");
	if (o->session) {
		if (!store_id_valid(o->session)) {
			log_error("Invalid session id \"%s\"", o->session);
			return -EINVAL;
		}
		c->session = strdup(o->session);
	} else if ((r = cli_default_session_id(c->workspace, &c->session)) < 0)
		return log_error_errno(r, "Failed to derive a session id: %m");
	c->tool_call = o->tool_call ? strdup(o->tool_call) : make_tool_call_id();
	c->cmdline = command_line(o->argv, o->shell_string);
	if (!c->session || !c->tool_call || !c->cmdline)
		return log_error_errno(ENOMEM, "Out of memory");
	c->msg = o->message ? o->message : c->cmdline;
	return 0;
}

/* Settings the sandbox must not edit beyond the built-in ones: an XDG config dir elsewhere, and
 * the --settings file. */
static int protect_settings_files(struct run_ctx *c)
{
	const char *xdg = getenv("XDG_CONFIG_HOME");
	_cleanup_free_ char *extra_real = c->o->settings ? realpath(c->o->settings, NULL) : NULL;
	_cleanup_free_ char *xdg_real = xdg && xdg[0] == '/' ? realpath(xdg, NULL) : NULL;
	_cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
	int r = 0;
	if (xdg && xdg[0] == '/')
		strbuf_printf(&sb, "%s/brokered", xdg_real ? xdg_real : xdg);
	if ((sb.len && (r = policy_protect(c->policy, sb.buf, "settings")) < 0) ||
	    (extra_real && (r = policy_protect(c->policy, extra_real, "settings")) < 0))
		return log_error_errno(r, "Failed to protect the settings files: %m");
	return 0;
}

/* --approve: paths into the policy, unix: and net: grants into the network policy. */
static int add_approvals(struct run_ctx *c)
{
	const struct run_options *o = c->o;
	for (size_t i = 0; i < o->n_approve; i++) {
		_cleanup_free_ char *p = NULL;
		unsigned access;
		int r;
		if (net_is_grant(o->approve[i])) {
			if ((r = net_add_grant(c->net, o->approve[i])) < 0)
				return log_error_errno(r, "Failed to grant \"%s\": %m",
						       o->approve[i]);
			continue;
		}
		if ((r = approval_parse_grant(o->approve[i], &p, &access)) < 0) {
			log_error("Invalid --approve \"%s\": expected PATH or PATH=ACCESS[,ACCESS] "
				  "(read, write, delete, metadata)",
				  o->approve[i]);
			return r;
		}
		if ((r = policy_add_grant(c->policy, p, access)) < 0)
			return log_error_errno(r, "Failed to grant \"%s\": %m", p);
	}
	return 0;
}

/* The scratch dir, the path policy and the network policy, with the run's grants. */
static int setup_policy(struct run_ctx *c)
{
	int r = make_scratch(c->state_dir, &c->scratch);
	if (r < 0)
		return log_error_errno(r, "Failed to create the scratch directory: %m");
	struct policy_error perr = {0};
	r = policy_new(c->settings, c->workspace, c->scratch, c->home, c->state_dir, &c->policy,
		       &perr);
	if (r < 0) {
		log_error("Failed to build the policy: %s",
			  perr.message ? perr.message : strerror(-r));
		policy_error_done(&perr);
		return r;
	}
	if ((r = protect_settings_files(c)) < 0)
		return r;
	if ((r = net_new(c->settings, c->policy, c->workspace, c->scratch, &c->net)) < 0)
		return log_error_errno(r, "Failed to set up the network policy: %m");
	return add_approvals(c);
}

/* The session's backup store (and its remembered grants) and audit log. */
static int setup_store(struct run_ctx *c)
{
	int r = store_open(c->state_dir, c->session, &c->store);
	if (r < 0)
		return log_error_errno(r, "Failed to open the backup store of session \"%s\": %m",
				       c->session);
	if ((r = approval_load_session(store_session_dir(c->store), c->policy, c->net)) < 0)
		log_warning_errno(r, "Failed to read the session's grants: %m");
	c->so = (struct store_options){
	    .enabled = c->settings->backup_enabled,
	    .max_size_bytes = c->settings->backup_max_size_mb * 1024 * 1024,
	    .deny_oversize = c->settings->backup_deny_oversize,
	    .sync = c->settings->backup_sync,
	};
	store_set_durable(c->settings->backup_sync);
	_cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
	strbuf_printf(&sb, "%s/audit.log", store_session_dir(c->store));
	c->audit_path = strbuf_steal(&sb);
	if (!c->audit_path ||
	    (r = audit_open(c->audit_path, c->session, c->tool_call, &c->audit)) < 0)
		return log_error_errno(r, "Failed to open the audit log \"%s\": %m",
				       c->audit_path ? c->audit_path : "");
	return 0;
}

/* The Landlock ruleset and the seccomp filter the child installs, the proxy, the environment. */
/* The mount a path is on (statx), 0 if it cannot be told. */
static uint64_t mount_of(const char *path)
{
	struct statx x;
	if (statx(AT_FDCWD, path, 0, STATX_MNT_ID, &x) < 0 || !(x.stx_mask & STATX_MNT_ID))
		return 0;
	return x.stx_mnt_id;
}

/* Is gid ours (effective or supplementary): may we chown our files to it? */
static bool in_own_group(gid_t gid)
{
	if (gid == getegid())
		return true;
	int n = getgroups(0, NULL);
	_cleanup_free_ gid_t *groups = n > 0 ? calloc((size_t)n, sizeof *groups) : NULL;
	if (groups)
		n = getgroups(n, groups);
	for (int i = 0; groups && i < n; i++)
		if (groups[i] == gid)
			return true;
	return false;
}

/* Why sandbox.copyOnWrite cannot be had for this run, or NULL. */
static const char *copy_on_write_blocker(const struct run_ctx *c, bool mount_ns)
{
	const char *pretend = getenv("BROKERED_PRETEND_MISSING");
	if (!mount_ns)
		return c->landlock
			   ? "it needs a mount namespace of its own, which cannot be made here "
			     "(root can, and a user where the system gives users namespaces)"
			   : "it needs Landlock";
	/* In a user namespace the probe made one already (sandbox_probe_mount_ns()). */
	if ((!c->user_ns && !sandbox_has_overlay(false)) || (pretend && strstr(pretend, "overlay")))
		return "the kernel offers no overlay file system";
	const char *why = policy_copy_on_write_blocker(c->policy);
	if (why)
		return why;
	if (path_is_under(c->state_dir, c->workspace) ||
	    path_is_under(c->workspace, c->state_dir) || path_is_under(c->scratch, c->workspace))
		return "the state or scratch directory is inside the workspace";
	uint64_t ws = mount_of(c->workspace);
	if (!ws || ws != mount_of(c->state_dir))
		return "the state directory is not on the workspace's mount (the merge renames "
		       "between them)";
	if (c->user_ns) {
		/* Its upper layer takes the workspace's owner: only the user's own is to be had. */
		struct stat st;
		if (stat(c->workspace, &st) < 0 || st.st_uid != geteuid() ||
		    !in_own_group(st.st_gid))
			return "the workspace's owner or group is not the user's (without root the "
			       "overlay can give its files only the user's own ids)";
		/* The overlay's marks are user.* xattrs there (tmpfs has them from Linux 6.6). */
		if (lsetxattr(c->state_dir, "user.brokered-probe", "", 0, 0) < 0 &&
		    errno == ENOTSUP)
			return "the workspace's file system keeps no user.* extended attributes, "
			       "which an overlay made without root needs";
		(void)lremovexattr(c->state_dir, "user.brokered-probe");
	}
	return NULL;
}

/* Remove the overlay's layers. Its work dir holds directories of mode 0 (work/work/incompat/...),
 * which only root could enter: made searchable first. */
static void cow_remove(const char *dir)
{
	(void)rm_rf_at_force(AT_FDCWD, dir);
}

/* The overlay's upper and work dirs for one attempt, in <state>/cow/; the upper one starts with
 * the workspace's mode and owner (the overlay shows them as the workspace's). */
static int cow_prepare(const struct run_ctx *c, char **ret_dir)
{
	_cleanup_free_ char *top = NULL, *dir = NULL;
	if (asprintf(&top, "%s/cow", c->state_dir) < 0 ||
	    asprintf(&dir, "%s/cow/run-%d-XXXXXX", c->state_dir, (int)getpid()) < 0)
		return log_error_errno(ENOMEM, "Out of memory");
	if (mkdir(top, 0700) < 0 && errno != EEXIST)
		return log_error_errno(errno, "Failed to create %s: %m", top);
	if (!mkdtemp(dir))
		return log_error_errno(errno, "Failed to create a directory in %s: %m", top);
	struct stat st;
	_cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int r = 0;
	struct stat ust;
	if (fd < 0 || stat(c->workspace, &st) < 0 || mkdirat(fd, "upper", 0700) < 0 ||
	    mkdirat(fd, "work", 0700) < 0 || fstatat(fd, "upper", &ust, AT_SYMLINK_NOFOLLOW) < 0 ||
	    ((ust.st_uid != st.st_uid || ust.st_gid != st.st_gid) &&
	     fchownat(fd, "upper", st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW) < 0) ||
	    fchmodat(fd, "upper", st.st_mode & 07777, 0) < 0)
		r = log_error_errno(errno, "Failed to prepare the overlay in %s: %m", dir);
	if (r < 0) {
		(void)rm_rf_at(AT_FDCWD, dir);
		return r;
	}
	*ret_dir = TAKE_PTR(dir);
	return 0;
}

static int setup_sandbox(struct run_ctx *c)
{
	int r = read_deny_list(c);
	if (r < 0)
		return log_error_errno(r, "Failed to collect the read-denied paths: %m");
	if (c->landlock) {
		_cleanup_free_ char *failed = NULL;
		r = sandbox_landlock_prepare(c->scratch, (const char *const *)c->read_denied,
					     c->n_read_denied, c->net->mode != SETTINGS_NET_ALLOW,
					     &c->ll, &failed);
		if (r < 0)
			return log_error_errno(r, "Failed to build the Landlock ruleset%s%s%s: %m",
					       failed ? " for \"" : "", failed ? failed : "",
					       failed ? "\"" : "");
	}
	phase("Landlock ruleset");
	const char *pretend = getenv("BROKERED_PRETEND_MISSING");
	/* Without Landlock the command could reach our mounts through /proc/PID/root; a rule that
	 * tells metadata from writes needs to see fchmod & co. on the files it may write. */
	bool want_ns = c->settings->read_only_mounts || c->settings->copy_on_write;
	c->user_ns = want_ns && c->landlock && !sandbox_can_make_mount_ns();
	bool mount_ns = want_ns && c->landlock && !(pretend && strstr(pretend, "mountns")) &&
			(!c->user_ns || sandbox_probe_mount_ns(true, c->settings->copy_on_write));
	c->ro_mounts =
	    c->settings->read_only_mounts && mount_ns && policy_metadata_follows_write(c->policy);
	if (c->settings->copy_on_write) {
		const char *why = copy_on_write_blocker(c, mount_ns);
		if (why)
			log_warning("sandbox.copyOnWrite is off for this run: %s.", why);
		c->cow = !why;
		c->ro_mounts |= c->cow;
	}
	enum sandbox_mounts mounts = c->cow	    ? SANDBOX_MOUNTS_COPY_ON_WRITE
				     : c->ro_mounts ? SANDBOX_MOUNTS_READ_ONLY
						    : SANDBOX_MOUNTS_SHARED;
	if ((r = sandbox_build_filter(&c->prog, c->net->mode != SETTINGS_NET_ALLOW, mounts)) < 0)
		return log_error_errno(r, "Failed to build the seccomp filter: %m");
	phase("seccomp filter");
	if (c->net->mode == SETTINGS_NET_PROXY && (r = start_proxy(c)) < 0)
		return r;

	setenv("TMPDIR", c->scratch, 1);
	setenv("BROKERED_SESSION_ID", c->session, 1);
	setenv("BROKERED_TOOL_CALL_ID", c->tool_call, 1);
	setenv("BROKERED_WORKSPACE", c->workspace, 1);
	return 0;
}

static int setup(struct run_ctx *c)
{
	int r;
	if ((r = setup_settings(c)) < 0)
		return r;
	phase("settings loaded");
	maybe_run_unsandboxed(c); /* returns only if the command is to be sandboxed */
	if ((r = setup_kernel_features(c)) < 0 || (r = setup_session(c)) < 0)
		return r;
	phase("state dir and session");
	if ((r = setup_policy(c)) < 0)
		return r;
	phase("scratch dir and policy");
	if ((r = setup_store(c)) < 0)
		return r;
	phase("store and audit log open");
	return setup_sandbox(c);
}

/* ---- one attempt: a turn, a broker, the sandboxed command ---- */

struct attempt {
	struct store_turn *turn;
	bool turn_owned;
	char *turn_id;
	struct broker *broker;
	int exit_status;
	bool started;
	struct broker_merge_result merge; /* sandbox.copyOnWrite */
	bool merge_failed;
	/* what the git check saw of the turn's paths when the command had ended: their
	 * post-states at the commit */
	struct store_seen *seen;
	size_t n_seen;
};

static void attempt_done(struct attempt *a)
{
	if (a->turn)
		store_turn_free(a->turn);
	broker_free(a->broker);
	free(a->turn_id);
	broker_merge_result_done(&a->merge);
	store_seens_free(a->seen, a->n_seen);
	*a = (struct attempt){0};
}

/* The attempt's turn (its own, or the session's open one) and its broker. */
static int attempt_open_broker(struct run_ctx *c, const char *msg, struct attempt *a)
{
	int r =
	    store_turn_join_or_begin(c->store, &c->so, c->tool_call, msg, &a->turn, &a->turn_owned);
	if (r < 0)
		return log_error_errno(r, "Failed to open a backup turn: %m");
	phase("turn opened");
	a->turn_id = strdup(store_turn_id(a->turn));
	if (!a->turn_id)
		return -ENOMEM;
	setenv("BROKERED_TURN_ID", a->turn_id, 1);
	struct broker_config bc = {
	    .workspace = c->workspace,
	    .scratch = c->scratch,
	    .state_dir = c->state_dir,
	    .home = c->home,
	    .backup_enabled = c->settings->backup_enabled,
	    .kernel_enforces = c->landlock,
	    .allow_setid = c->settings->allow_setid,
	    .foreign_mounts = c->ro_mounts,
	    .net = c->net,
	};
	if ((r = broker_new(&bc, c->audit, a->turn, &a->broker)) < 0)
		return log_error_errno(r, "Failed to start the broker: %m");
	broker_set_policy(a->broker, c->policy);
	if (c->settings->delete_to_trash)
		broker_set_delete_mode(a->broker, BROKER_DELETE_TRASH);
	return 0;
}

/* The broker socket for the command's cooperative clients (DESIGN section 5); the command runs
 * without it if it cannot be had. */
static struct ipc_server *attempt_open_socket(struct run_ctx *c, struct attempt *a)
{
	struct ipc_server *ipc = NULL;
	_cleanup_free_ char *ipc_path = NULL;
	int r = ipc_run_socket_path(c->session, &ipc_path);
	struct ipc_config ic = {
	    .socket_path = ipc_path, .session_id = c->session, .audit = c->audit};
	if (r >= 0)
		r = ipc_server_new(&ic, a->broker, &ipc);
	if (r >= 0)
		r = ipc_attach_env(ipc, c->tool_call);
	if (r >= 0 && c->n_attempts++ == 0) {
		/* The broker's own sockets (this run's, and `brokered serve`'s of the session, in
		 * the same directory) are doors the command may always use. */
		_cleanup_strbuf_ struct strbuf g = STRBUF_INIT;
		const char *slash = strrchr(ipc_path, '/');
		strbuf_printf(&g, "unix:%.*s", (int)(slash ? slash - ipc_path : 0), ipc_path);
		r = strbuf_cstr(&g) ? net_add_grant(c->net, g.buf) : -ENOMEM;
	}
	if (r < 0)
		log_warning_errno(r, "The broker socket is not available to the command: %m");
	return ipc;
}

/* Block the signals a run handles and return a signalfd that reads them, or -errno (logged). The
 * mask before is in *ret_oldmask either way: the child gets it back. */
static int block_signals(sigset_t *ret_oldmask)
{
	static const int sigs[] = {SIGCHLD, SIGINT,   SIGTERM, SIGHUP,
				   SIGQUIT, SIGWINCH, SIGUSR1, SIGUSR2};
	sigset_t mask;
	sigemptyset(&mask);
	for (size_t i = 0; i < ELEMENTSOF(sigs); i++)
		sigaddset(&mask, sigs[i]);
	sigprocmask(SIG_BLOCK, &mask, ret_oldmask);
	int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0)
		return log_error_errno(errno, "Failed to create a signalfd: %m");
	return sfd;
}

/* The command ended and the sandbox is empty. */
static int attempt_finish(struct run_ctx *c, struct attempt *a)
{
	/* A run's own turn takes another id at its first record if a turn of the same second and
	 * random bits took its id meanwhile: the report, the commit, the git check and the
	 * rollbacks name the turn on disk (the other one is not ours to roll back). */
	if (a->turn && strcmp(a->turn_id, store_turn_id(a->turn)) != 0) {
		char *id = strdup(store_turn_id(a->turn));
		if (!id)
			return log_error_errno(ENOMEM, "Out of memory");
		free(a->turn_id);
		a->turn_id = id;
	}
	/* Sockets and hosts refused for approval join the file prompts. */
	size_t nn;
	struct broker_prompt *nv = net_take_prompts(c->net, &nn);
	for (size_t i = 0; i < nn; i++)
		broker_add_prompt(a->broker, nv[i].path, 0, nv[i].op, nv[i].rule);
	net_prompts_free(nv, nn);
	phase("command ended, sandbox empty");
	const struct broker_stats *bs = broker_get_stats(a->broker);
	log_debug("%" PRIu64 " requests, %" PRIu64 " pre-images saved; group commit: %" PRIu64
		  " requests shared %" PRIu64 " flushes",
		  bs->requests, bs->backups_saved, bs->batched, bs->batch_syncs);

	/* The terminal's foreground may still be the command's process group. */
	if (isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) != getpgrp()) {
		signal(SIGTTOU, SIG_IGN);
		(void)tcsetpgrp(STDIN_FILENO, getpgrp());
		signal(SIGTTOU, SIG_DFL);
	}
	return 0;
}

/* After the command: its changes into the workspace. The layers go, unless a change could not
 * be merged (then they stay, named). sync_fd: where the command asked for a sync, the layers'
 * directory, opened before the command started, so that syncfs() on it reports every write-back
 * error of the run; -1 otherwise. */
static void cow_merge(const struct run_ctx *c, struct attempt *a, char **dir, int sync_fd)
{
	_cleanup_free_ char *upper = NULL;
	if (asprintf(&upper, "%s/upper", *dir) < 0) {
		log_error_errno(ENOMEM, "Out of memory");
		return;
	}
	_cleanup_close_ int fd = open(upper, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int r = fd < 0 ? negative_errno() : broker_merge(a->broker, fd, c->user_ns, &a->merge);
	phase("copy-on-write merge");
	/* The overlay was volatile: what the command synced is on disk once it is in the
	 * workspace (the upper layer is on the workspace's file system). Not synced otherwise, as a
	 * native run would not be. */
	if (sync_fd >= 0) {
		if (syncfs(sync_fd) < 0) {
			log_error_errno(
			    errno, "The command asked for its changes to be synced to disk, and "
				   "syncing the workspace's file system failed: %m");
			a->merge_failed = true;
		}
		phase("synced (the command asked for it)");
	}
	if (r < 0) {
		log_error_errno(r,
				"Failed to merge some of the command's changes into the workspace "
				"(%m); they are kept in %s",
				upper);
		a->merge_failed = true;
	} else {
		cow_remove(*dir);
	}
	if (a->merge.refused) {
		log_error("%zu change(s) of the command were refused by the policy and not merged "
			  "into the workspace:",
			  a->merge.refused);
		for (size_t i = 0; i < a->merge.n_listed; i++)
			log_error("  %s", a->merge.listed[i]);
	}
	(void)c;
	free(*dir);
	*dir = NULL;
}

static int run_attempt(struct run_ctx *c, const char *msg, struct attempt *a)
{
	struct supervisor *sv = NULL;
	struct ipc_server *ipc = NULL;
	char *cow_dir = NULL, *upper = NULL, *work = NULL; /* sandbox.copyOnWrite */
	_cleanup_close_ int sync_fd = -1;
	sigset_t oldmask;
	a->exit_status = RUN_EXIT_FAILURE;

	int r = attempt_open_broker(c, msg, a);
	if (r < 0)
		return r;
	ipc = attempt_open_socket(c, a);
	int sfd = block_signals(&oldmask);
	if (sfd < 0) {
		r = sfd;
		goto out;
	}
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) {
		r = log_error_errno(errno, "Failed to become the child subreaper: %m");
		goto out;
	}
	(void)audit_flush(c->audit);
	phase("broker and socket ready");

	struct run_state rs = {.listener = -1};
	if (c->cow &&
	    ((r = cow_prepare(c, &cow_dir)) < 0 || asprintf(&upper, "%s/upper", cow_dir) < 0 ||
	     asprintf(&work, "%s/work", cow_dir) < 0)) {
		r = r < 0 ? r : log_error_errno(ENOMEM, "Out of memory");
		goto out;
	}
	if (cow_dir && (sync_fd = open(cow_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		r = log_error_errno(errno, "Failed to open %s: %m", cow_dir);
		goto out;
	}
	const struct run_child_sandbox sb = {
	    .landlock = c->landlock ? &c->ll : NULL,
	    .prog = &c->prog,
	    .wait_killable = c->feat.wait_killable,
	    .ro_mounts_scratch = c->ro_mounts ? c->scratch : NULL,
	    .user_ns = c->ro_mounts && c->user_ns,
	    .cow_workspace = c->cow ? c->workspace : NULL,
	    .cow_upper = upper,
	    .cow_work = work,
	    .oldmask = &oldmask,
	};
	rs.listener = run_child_start(c->o, &sb, sfd, &rs.child);
	if (rs.listener < 0) {
		r = rs.listener;
		goto out;
	}
	a->started = true;
	phase("command started");
	/* Wake the target on the CPU that answers it (6.6+); harmless where unsupported. The
	 * kernel takes the flags as the ioctl's argument itself, not through a pointer (a pointer
	 * is refused with EINVAL, and the flag was never set). */
	if (ioctl(rs.listener, SECCOMP_IOCTL_NOTIF_SET_FLAGS,
		  (unsigned long)SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP) < 0)
		log_debug_errno(errno, "Failed to set SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: %m");

	if ((r = supervisor_new(rs.listener, a->broker, c->cow, &sv)) < 0) {
		log_error_errno(r, "Failed to start the supervisor: %m");
		kill(rs.child, SIGKILL);
	} else if (supervise(&rs, sv, ipc, c->audit, sfd) < 0) {
		kill(rs.child, SIGKILL);
	}
	/* Reap whatever is left (all sandboxed processes are gone once the listener hung up). */
	while (waitpid(-1, NULL, __WALL) > 0 || errno == EINTR)
		;
	safe_close(rs.listener);
	a->exit_status = rs.child_done ? status_to_exit(rs.child_status) : RUN_EXIT_FAILURE;
	phase("command exited");
	if (cow_dir)
		cow_merge(c, a, &cow_dir, sv && supervisor_sync_asked(sv) ? sync_fd : -1);
	r = attempt_finish(c, a);
out:
	if (cow_dir) /* the command never started */
		cow_remove(cow_dir);
	free(cow_dir);
	free(upper);
	free(work);
	ipc_server_free(ipc);
	supervisor_free(sv);
	safe_close(sfd);
	sigprocmask(SIG_SETMASK, &oldmask, NULL);
	(void)audit_flush(c->audit);
	return r;
}

/* Commit the attempt's own turn (a joined turn stays open for its owner). */
static int attempt_commit(struct run_ctx *c, struct attempt *a, const char *msg)
{
	if (!a->turn_owned || !a->turn)
		return 0;
	bool recorded = store_turn_recorded(a->turn);
	int r = store_turn_commit_seen(a->turn, msg, a->seen, a->n_seen);
	a->turn = NULL;
	if (r < 0 && recorded) {
		/* Once more by id, from the records on disk (a transient failure must not leave the
		 * turn open). */
		log_debug_errno(r, "Committing turn %s failed (%m), retrying", a->turn_id);
		r = store_commit_id(c->store, a->turn_id, msg);
	}
	if (r < 0)
		log_warning_errno(r,
				  "Failed to commit the backup turn %s (it stays open; `brokered "
				  "log` lists it, `brokered turn commit --turn %s` commits it): %m",
				  a->turn_id, a->turn_id);
	return r;
}

/* Put everything a turn changed back, from its own backups; refuses over later changes. */
static int rollback_turn(struct run_ctx *c, const char *turn)
{
	_cleanup_free_ char *id = NULL;
	int r = store_resolve_turn(c->store, turn, &id);
	if (r < 0)
		return log_error_errno(r, "Failed to find turn \"%s\": %m", turn);
	struct store_plan *plan = NULL;
	r = store_plan_restore(c->store, id, NULL, 0, &plan);
	if (r < 0)
		return log_error_errno(r, "Failed to plan the rollback of turn %s: %m", id);
	if (plan->n_conflicts) {
		log_error("Not rolling back turn %s: %zu path(s) changed after it (`brokered undo "
			  "%s` shows them)",
			  id, plan->n_conflicts, id);
		store_plan_free(plan);
		return -EBUSY;
	}
	_cleanup_strbuf_ struct strbuf m = STRBUF_INIT;
	strbuf_printf(&m, "roll back %s to rerun it with approval", id);
	char *rid = NULL;
	r = store_plan_apply(c->store, plan, &c->so, strbuf_cstr(&m), &rid);
	store_plan_free(plan);
	free(rid);
	if (r != 0)
		return log_error_errno(r < 0 ? r : EIO,
				       "Failed to roll back turn %s (%d path(s) not restored): %m",
				       id, r > 0 ? r : 0);
	return 0;
}

static void print_prompts_json(struct strbuf *sb, const struct broker_prompt *v, size_t n)
{
	json_key(sb, "approvalNeeded");
	strbuf_appendc(sb, '[');
	for (size_t i = 0; i < n; i++) {
		if (i)
			strbuf_appendc(sb, ',');
		strbuf_appendc(sb, '{');
		json_kv_str(sb, "path", v[i].path);
		char acc[64];
		approval_access_names(v[i].access, acc, sizeof acc);
		json_kv_str(sb, "access", acc);
		json_kv_str(sb, "operation", v[i].op);
		json_kv_str(sb, "rule", v[i].rule);
		strbuf_appendc(sb, '}');
	}
	strbuf_appendc(sb, ']');
}

static void print_json_report(const struct run_ctx *c, const struct attempt *a, int exit_status,
			      int attempts)
{
	const struct broker_stats *st = broker_get_stats(a->broker);
	char **oversize = broker_not_backed_up(a->broker);
	size_t np;
	const struct broker_prompt *pv = broker_prompts(a->broker, &np);
	struct strbuf sb = STRBUF_INIT;
	strbuf_appendc(&sb, '{');
	json_kv_int(&sb, "exitStatus", exit_status);
	json_kv_int(&sb, "commandExitStatus", a->exit_status);
	json_kv_str(&sb, "session", c->session);
	json_kv_str(&sb, "toolCall", c->tool_call);
	/* null when the command changed nothing: then no turn was recorded */
	json_kv_str(&sb, "turn", a->turn && store_turn_recorded(a->turn) ? a->turn_id : NULL);
	json_kv_int(&sb, "attempts", attempts);
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
	strbuf_appendc(&sb, ']');
	/* sandbox.copyOnWrite: changes the policy refused at the merge (the first 20) */
	json_key(&sb, "notMerged");
	strbuf_appendc(&sb, '[');
	for (size_t i = 0; i < a->merge.n_listed; i++) {
		if (i)
			strbuf_appendc(&sb, ',');
		json_append_strings(&sb, a->merge.listed[i]);
	}
	strbuf_appendc(&sb, ']');
	print_prompts_json(&sb, pv, np);
	strbuf_appends(&sb, "}\n");
	if (!sb.oom)
		fputs(sb.buf, stderr);
	strbuf_free(&sb);
}

static void report_backup_gaps(const struct run_ctx *c, const struct attempt *a)
{
	const struct broker_stats *st = broker_get_stats(a->broker);
	char **oversize = broker_not_backed_up(a->broker);
	if (!st->not_backed_up)
		return;
	log_warning("%" PRIu64 " file(s) changed without a backup (larger than maxSizeMB=%" PRIu64
		    "):",
		    st->not_backed_up, c->settings->backup_max_size_mb);
	for (size_t i = 0; oversize && oversize[i] && i < 10; i++)
		log_warning("  %s", oversize[i]);
}

/*
 * Git configuration, hooks and gitfiles are judged on their content when the command ends
 * (git-guard.h): each block becomes a prompt block of the attempt. -errno: the check failed.
 */
static int git_guard_attempt(struct run_ctx *c, struct attempt *a, struct git_guard_block **ret,
			     size_t *ret_n)
{
	*ret = NULL;
	*ret_n = 0;
	if (!a->turn || !store_turn_recorded(a->turn) || store_flush(a->turn) < 0)
		return 0;
	struct git_guard_options go = {
	    .workspace = c->workspace,
	    .home = c->home,
	    .policy = c->policy,
	    .allow_hooks = c->settings->git_allow_hooks,
	    .allow_exec_config = c->settings->git_allow_exec_config,
	};
	store_seens_free(a->seen, a->n_seen);
	a->seen = NULL;
	a->n_seen = 0;
	int r = git_guard_check(c->store, a->turn_id, &go, ret, ret_n,
				a->turn_owned ? &a->seen : NULL, &a->n_seen);
	if (r < 0)
		return log_error_errno(r, "Failed to check the git changes of turn %s: %m",
				       a->turn_id);
	for (size_t i = 0; i < *ret_n; i++)
		broker_add_prompt(a->broker, (*ret)[i].path, POLICY_ACCESS_WRITE, "git-guard",
				  (*ret)[i].what);
	return 0;
}

/* Put back what the user did not approve, from the attempt's own backups (after its commit). */
static int git_guard_roll_back(struct run_ctx *c, const char *turn_id,
			       const struct git_guard_block *v, size_t n)
{
	if (!n)
		return 0;
	/* the file itself (if the turn recorded it) and what brought it in */
	_cleanup_free_ char **paths = calloc(2 * n, sizeof *paths);
	if (!paths)
		return log_error_errno(ENOMEM, "Out of memory");
	/* config entries are removed one by one: earlier runs of an explicit turn keep theirs */
	_cleanup_free_ bool *removed = calloc(n, sizeof *removed);
	if (!removed)
		return log_error_errno(ENOMEM, "Out of memory");
	for (size_t i = 0; i < n; i++)
		if ((removed[i] = v[i].n_unset && git_guard_remove_keys(&v[i]) >= 0))
			log_error("Removed from %s: %s", v[i].path, v[i].what);
	size_t np = 0;
	for (size_t i = 0; i < 2 * n; i++) {
		char *p = i % 2 ? v[i / 2].undo : v[i / 2].path;
		if (removed[i / 2])
			continue;
		bool dup = false;
		for (size_t k = 0; k < np && !dup; k++)
			dup = !strcmp(paths[k], p);
		if (!dup)
			paths[np++] = p;
	}
	if (!np)
		return 0;
	struct store_plan *plan = NULL;
	_cleanup_strbuf_ struct strbuf m = STRBUF_INIT;
	strbuf_printf(&m, "roll back the git changes of %s that need approval", turn_id);
	char *rid = NULL;
	int r = store_plan_restore(c->store, turn_id, paths, np, &plan);
	if (r >= 0)
		r = store_plan_apply(c->store, plan, &c->so, strbuf_cstr(&m), &rid);
	store_plan_free(plan);
	free(rid);
	if (r != 0)
		return log_error_errno(r < 0 ? r : EIO,
				       "Failed to roll back the git changes that need approval (%d "
				       "path(s) not restored): %m",
				       r > 0 ? r : 0);
	for (size_t i = 0; i < n; i++)
		if (!removed[i])
			log_error("Rolled back: %s", v[i].path);
	return 0;
}

#define MAX_ATTEMPTS 4

/* The last attempt (nothing to approve, or no more reruns): report, commit, roll back the git
 * changes that need approval. The exit status. */
static int attempt_last(struct run_ctx *c, struct attempt *a, const char *msg, int n,
			const struct git_guard_block *gb, size_t ngb)
{
	size_t np;
	(void)broker_prompts(a->broker, &np);
	int ret = a->exit_status;
	if (a->merge_failed)
		ret = RUN_EXIT_FAILURE;
	else if (ret == 0 && a->merge.refused)
		ret = RUN_EXIT_NOT_MERGED;
	if (c->o->json)
		print_json_report(c, a, np ? RUN_EXIT_APPROVAL : ret, n);
	if (np)
		ret = RUN_EXIT_APPROVAL;
	attempt_commit(c, a, msg);
	if (git_guard_roll_back(c, a->turn_id, gb, ngb) < 0)
		ret = RUN_EXIT_FAILURE;
	phase("turn committed");
	return ret;
}

/* Nothing was granted: say what needs approval and how to give it, commit the attempt, roll back
 * what needs approval. The exit status. */
static int attempt_refused(struct run_ctx *c, struct attempt *a, const char *msg, int n,
			   const struct git_guard_block *gb, size_t ngb, bool recorded)
{
	size_t np;
	const struct broker_prompt *pv = broker_prompts(a->broker, &np);
	bool can_roll_back = a->turn_owned && c->settings->backup_enabled;
	if (c->o->json)
		print_json_report(c, a, RUN_EXIT_APPROVAL, n);
	log_error("%zu access(es) need approval; nothing was granted:", np);
	for (size_t i = 0; i < np && i < 20; i++) {
		char acc[64];
		approval_access_names(pv[i].access, acc, sizeof acc);
		log_error("  %s %s (%s)", acc, pv[i].path, pv[i].rule);
	}
	/* Git changes that need approval are in place: the attempt is undone whole. */
	bool undo_all = ngb && can_roll_back && recorded;
	if (undo_all)
		log_error("Hint: to allow them, rerun with --approve PATH[=ACCESS] for each (the "
			  "attempt was rolled back: its git changes need approval).");
	else if (can_roll_back && recorded)
		log_error("Hint: to allow them, rerun with --rollback %s and --approve "
			  "PATH[=ACCESS], unix:PATH or net:HOST for each.",
			  a->turn_id);
	else if (can_roll_back)
		log_error("Hint: to allow them, rerun with --approve PATH[=ACCESS], unix:PATH or "
			  "net:HOST for each (the attempt changed nothing).");
	else
		log_error("Hint: to allow them, rerun with --approve PATH[=ACCESS], unix:PATH or "
			  "net:HOST for each (inside an explicit turn the attempt is not rolled "
			  "back).");
	int ret = RUN_EXIT_APPROVAL;
	attempt_commit(c, a, msg);
	if (undo_all ? rollback_turn(c, a->turn_id) < 0
		     : git_guard_roll_back(c, a->turn_id, gb, ngb) < 0)
		ret = RUN_EXIT_FAILURE;
	return ret;
}

/* The user approved: grant it, commit and roll back the refused attempt, and make a fresh scratch
 * dir for the rerun. 0, or -errno once logged. */
static int attempt_approved(struct run_ctx *c, struct attempt *a, const char *msg,
			    enum approval_answer ans, bool recorded)
{
	size_t np;
	const struct broker_prompt *pv = broker_prompts(a->broker, &np);
	for (size_t i = 0; i < np; i++)
		if (net_is_grant(pv[i].path)
			? net_add_grant(c->net, pv[i].path) < 0
			: policy_add_grant(c->policy, pv[i].path, pv[i].access) < 0)
			log_warning("Failed to grant \"%s\"", pv[i].path);
	if (ans == APPROVAL_SESSION &&
	    approval_save_session(store_session_dir(c->store), pv, np) < 0)
		log_warning("Failed to remember the grants for the session");
	_cleanup_strbuf_ struct strbuf cm = STRBUF_INIT;
	strbuf_printf(&cm, "%s (attempt refused, rolled back for approval)", msg);
	if (attempt_commit(c, a, strbuf_cstr(&cm)) < 0 ||
	    (recorded && rollback_turn(c, a->turn_id) < 0)) {
		log_error("Not rerunning: the refused attempt could not be rolled back");
		return -EBUSY;
	}
	attempt_done(a);
	(void)rm_rf_at(AT_FDCWD, c->scratch);
	if (mkdir(c->scratch, 0700) < 0)
		return log_error_errno(errno, "Failed to recreate the scratch directory: %m");
	return 0;
}

int run_command(const struct run_options *o)
{
	struct run_ctx c = {.o = o, .ll = {.ruleset_fd = -1}};
	struct attempt a = {0};
	struct git_guard_block *gb = NULL;
	size_t ngb = 0;
	int ret = RUN_EXIT_FAILURE;

	phase("start");
	pid_t broker;
	int in = run_inside_brokered(&broker);
	if (in > 0)
		return run_nested_exec(o, broker);
	/* Not confirmed (a broker that is not an ancestor, or another seccomp sandbox with the
	 * variables of a `brokered serve`): a run of our own, brokered as usual, is always safe. */
	if (setup(&c) < 0) {
		if (in < 0)
			log_error(
			    "Hint: BROKERED_IPC_ADDRESS names a broker (pid %d) that is not an "
			    "ancestor of this process, so this run could not hand its command to "
			    "it; if this is inside a brokered run, run the command directly.",
			    (int)broker);
		goto out;
	}
	if (o->rollback && rollback_turn(&c, o->rollback) < 0)
		goto out;
	for (int n = 1;; n++) {
		_cleanup_strbuf_ struct strbuf m = STRBUF_INIT;
		if (n > 1)
			strbuf_printf(&m, "%s (rerun %d, with approval)", c.msg, n - 1);
		const char *msg = n > 1 ? strbuf_cstr(&m) : c.msg;
		if (run_attempt(&c, msg, &a) < 0)
			goto out;
		git_guard_blocks_free(gb, ngb);
		phase("git guard");
		if (git_guard_attempt(&c, &a, &gb, &ngb) < 0) {
			attempt_commit(&c, &a, msg);
			if (a.turn_owned && rollback_turn(&c, a.turn_id) == 0)
				log_error("The turn was rolled back.");
			goto out;
		}
		phase("git guard done");
		size_t np;
		const struct broker_prompt *pv = broker_prompts(a.broker, &np);
		ret = a.exit_status;
		report_backup_gaps(&c, &a);
		if (np == 0 || n >= MAX_ATTEMPTS) {
			ret = attempt_last(&c, &a, msg, n, gb, ngb);
			break;
		}
		/* Refusals that the user may approve: ask once, roll back, rerun with grants. */
		enum approval_answer ans = APPROVAL_DENY;
		bool recorded = store_turn_recorded(a.turn);
		if (approval_interactive() && a.turn_owned && c.settings->backup_enabled)
			ans = approval_ask(pv, np);
		if (ans == APPROVAL_DENY) {
			ret = attempt_refused(&c, &a, msg, n, gb, ngb, recorded);
			break;
		}
		if (attempt_approved(&c, &a, msg, ans, recorded) < 0)
			goto out;
		log_info("rerunning with approval (attempt %d)", n + 1);
	}
out:
	git_guard_blocks_free(gb, ngb);
	attempt_done(&a);
	ctx_done(&c);
	return ret;
}
