/* SPDX-License-Identifier: MIT */
/*
 * Approval of prompt blocks (DESIGN section 6): the refusals a run collected are shown once after
 * the command; approved paths become grants for a rerun. Session grants are remembered in the
 * session directory. Parsing and persistence never log; approval_ask() talks to the terminal.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct broker_prompt;
struct net;
struct policy;

enum approval_answer { APPROVAL_DENY, APPROVAL_ONCE, APPROVAL_SESSION };

/* PATH or PATH=ACCESS[,ACCESS...] (access names of policy_access_from_string; default: modify). */
int approval_parse_grant(const char *arg, char **ret_path, unsigned *ret_access);
/* Add the session's remembered grants (file "grants" in session_dir) to the policy, and those
 * of sockets and hosts ("unix:PATH", "net:HOST") to n. */
int approval_load_session(const char *session_dir, struct policy *p, struct net *n);
/* Remember grants for the session (appended, one per line). */
int approval_save_session(const char *session_dir, const struct broker_prompt *v, size_t n);
/* Is there a person to ask (stdin and stderr a terminal, /dev/tty openable)? */
bool approval_interactive(void);
/* Show the merged blocks once and ask on /dev/tty. */
enum approval_answer approval_ask(const struct broker_prompt *v, size_t n);
/* "write,delete" for an access mask ("connect" for 0: a socket or a host) (static buffer per call
 * site is the caller's). */
void approval_access_names(unsigned access, char *buf, size_t n);
