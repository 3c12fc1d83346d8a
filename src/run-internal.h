/* SPDX-License-Identifier: MIT */
/* Between the parts of a run: run.c (the orchestrator), run-child.c (the sandboxed child) and
 * run-nested.c (a run inside another brokered run). */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

#include "run.h"

struct sandbox_landlock;
struct sock_fprog;

/* What the child narrows itself with before it executes the command. */
struct run_child_sandbox {
	const struct sandbox_landlock *landlock; /* NULL: no Landlock (--degraded) */
	const struct sock_fprog *prog;		 /* the seccomp filter */
	bool wait_killable;
	const char *ro_mounts_scratch; /* non-NULL: read-only mounts but this scratch dir */
	bool user_ns; /* the mounts are made in a user namespace of the child's own (not root) */
	/* sandbox.copyOnWrite (with ro_mounts_scratch): the workspace an overlay of these layers */
	const char *cow_workspace, *cow_upper, *cow_work;
	const sigset_t *oldmask; /* the signal mask the command gets */
};

/*
 * Fork the sandboxed command (close_in_child, if >= 0, is closed in the child) and take its
 * seccomp listener: the listener fd, or -errno once logged (then the child is reaped). *ret_pid is
 * the child's pid once it was forked.
 */
int run_child_start(const struct run_options *o, const struct run_child_sandbox *sb,
		    int close_in_child, pid_t *ret_pid);

/*
 * Are we a command of another `brokered run`? 1: inside (*ret_broker is its pid); 0: not; -EPERM:
 * the environment says so but the broker is not an ancestor (not believed).
 */
int run_inside_brokered(pid_t *ret_broker);
/* The command of a run inside a run, executed directly; returns only an exit status on failure. */
int run_nested_exec(const struct run_options *o, pid_t broker);
