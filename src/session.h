/* SPDX-License-Identifier: MIT */
/*
 * A broker for one session outside any sandbox, with everything it needs: settings, policy,
 * backup store and turn, audit log. `brokered serve` uses it; nothing here is sandbox-specific.
 * Functions return -errno; on failure *ret_error (may be NULL) names what failed (malloc'd).
 */
#pragma once

#include <stdbool.h>

struct broker;
struct store;
struct store_turn;
struct audit;
struct policy;
struct settings;

struct session_options {
	const char *session;   /* NULL: cli_default_session_id(workspace) */
	const char *workspace; /* NULL: cwd */
	const char *settings;  /* extra settings file, or NULL */
	const char *tool_call; /* attribution of the session's own turn and audit lines */
	const char *scratch;   /* a directory of brokered's own for the policy's scratch default */
};

struct session {
	char *id, *workspace, *state_dir, *home;
	struct settings *settings;
	struct policy *policy;
	struct store *store;
	struct audit *audit;
	struct broker *broker;
	struct store_turn *turn; /* NULL until session_ensure_turn() */
	bool turn_owned;	 /* our own turn (commit it), not a joined `turn begin` one */
};

int session_open(const struct session_options *o, struct session **ret, char **ret_error);
/* Join the session's explicit turn if one is open, else begin one of our own; the broker's
 * pre-images go there. */
int session_ensure_turn(struct session *s, const char *message);
/* End our part of the current turn: commit it if it is ours (with message), else leave it. */
int session_finish_turn(struct session *s, const char *message);
/* Finish the turn (committing an owned one with its first message) and free everything. */
void session_close(struct session *s);
