/* SPDX-License-Identifier: MIT */
/* The launcher and orchestrator of one sandboxed command (DESIGN section 2, "run"). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct run_options {
	char **argv;			  /* the command (argv[0] looked up in PATH) */
	const char *workspace;		  /* default: cwd */
	const char *session;		  /* default: $BROKERED_SESSION_ID, else per workspace */
	const char *tool_call;		  /* default: generated */
	const char *message;		  /* commit message of the run's own turn */
	const char *settings;		  /* extra settings file */
	bool json;			  /* machine-readable report on stderr at the end */
	const char *shell_string;	  /* the -c STRING, when argv is /bin/sh -c STRING */
	bool dangerously_disable_sandbox; /* run unsandboxed after a yes on the terminal */
	bool degraded;			  /* run without Landlock on a kernel that lacks it */
	char **approve;			  /* --approve PATH[=ACCESS]: grants for this run */
	size_t n_approve;
	const char *rollback; /* --rollback TURN: undo that (refused) attempt first */
};

/* Run the command under the broker; returns the exit status brokered exits with. */
int run_command(const struct run_options *o);

/* Exit statuses of DESIGN section 10. */
#define RUN_EXIT_FAILURE     125 /* brokered failed before the command started */
#define RUN_EXIT_CANNOT_EXEC 126
#define RUN_EXIT_NOT_FOUND   127
/* Some access needs the user's approval and none was given (rerun with --approve). */
#define RUN_EXIT_APPROVAL 120
/* sandbox.copyOnWrite: the command exited 0, but the policy refused some of its changes, which
 * were left out of the workspace. */
#define RUN_EXIT_NOT_MERGED 121
