/* SPDX-License-Identifier: MIT */
/*
 * A run inside another brokered run (an agent that is itself sandboxed starts brokered): its
 * command goes to the outer broker, which already sees every system call of its processes.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "basic/macro.h"
#include "log.h"
#include "run-internal.h"

/* The value of "Key:" in /proc/<pid>/status, as a number; -errno if absent. */
static int64_t proc_status_field(pid_t pid, const char *key)
{
	char path[64], line[256];
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return negative_errno();
	size_t n = strlen(key);
	int64_t v = -ENOENT;
	while (fgets(line, sizeof line, f))
		if (strncmp(line, key, n) == 0 && line[n] == ':') {
			v = strtoll(line + n + 1, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

/* Is pid one of our ancestors? */
static bool is_ancestor(pid_t pid)
{
	pid_t p = getppid();
	for (int depth = 0; p > 1 && depth < 4096; depth++) {
		if (p == pid)
			return true;
		int64_t pp = proc_status_field(p, "PPid");
		if (pp < 0)
			return false;
		p = (pid_t)pp;
	}
	return false;
}

/*
 * Are we a command of a `brokered run` (an agent that is itself sandboxed starts brokered)? Such a
 * run could not open the store (the outer policy closes the state dir) nor stack a second seccomp
 * listener, and it need not: every system call of its processes already goes to the outer broker,
 * which checks it and backs it up into the outer run's turn. Believed only when it is certain: we
 * are under no_new_privs and a seccomp filter, and the socket in BROKERED_IPC_ADDRESS is served by
 * one of our ancestors (the outer `brokered run` serves its command's socket itself).
 * 1: inside; 0: not (no such environment, or not sandboxed at all: a stale variable); -EPERM: the
 * environment says so and we are sandboxed, but the broker is not an ancestor (not believed).
 */
int run_inside_brokered(pid_t *ret_broker)
{
	const char *addr = getenv("BROKERED_IPC_ADDRESS");
	*ret_broker = 0;
	if (!addr || !getenv("BROKERED_SESSION_ID"))
		return 0;
	if (proc_status_field(getpid(), "Seccomp") != 2 ||
	    proc_status_field(getpid(), "NoNewPrivs") != 1)
		return 0;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(addr) >= sizeof sa.sun_path)
		return -EPERM;
	strcpy(sa.sun_path, addr);
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct ucred cred;
	socklen_t len = sizeof cred;
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return -EPERM;
	*ret_broker = cred.pid;
	return cred.pid > 0 && is_ancestor(cred.pid) ? 1 : -EPERM;
}

/* The command of a run inside a run: executed directly, brokered by the outer broker. */
int run_nested_exec(const struct run_options *o, pid_t broker)
{
	const char *outer_only = o->rollback ? "--rollback" : o->n_approve ? "--approve" : NULL;
	if (o->dangerously_disable_sandbox)
		outer_only = "--dangerously-disable-sandbox";
	if (outer_only) {
		log_error("This brokered run is inside another one (broker pid %d, session %s): %s "
			  "applies to the outer run only. Run it outside.",
			  (int)broker, getenv("BROKERED_SESSION_ID"), outer_only);
		return RUN_EXIT_FAILURE;
	}
	log_debug("inside brokered run (broker pid %d, session %s): running the command directly; "
		  "the outer broker checks and backs up its changes, in the outer turn",
		  (int)broker, getenv("BROKERED_SESSION_ID"));
	if (o->tool_call && setenv("BROKERED_TOOL_CALL_ID", o->tool_call, 1) < 0)
		return log_error_errno(errno, "Failed to set BROKERED_TOOL_CALL_ID: %m"),
		       RUN_EXIT_FAILURE;
	fflush(NULL);
	execvp(o->argv[0], o->argv);
	int e = errno;
	log_error_errno(e, "Failed to execute \"%s\": %m", o->argv[0]);
	return e == ENOENT ? RUN_EXIT_NOT_FOUND : RUN_EXIT_CANNOT_EXEC;
}
