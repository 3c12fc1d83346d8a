/* SPDX-License-Identifier: MIT */
/* Between the backup store's commands: cli-store.c (turn, log, restore, undo, gc) and cli-show.c
 * (show, diff). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "basic/strbuf.h"
#include "store.h"

struct opts {
	const char *session, *workspace, *message, *turn, *older_than, *max_size;
	const char *since, *path, *max_count;
	bool json, force, dry_run, absolute, all, stat, commit_open;
};

/* Parse options; the rest of argv (operands) starts at *ret_ind. Returns 0 or exit status 2. */
int cli_store_parse_opts(int argc, char **argv, struct opts *o, int *ret_ind);
/* The store of --session, or of the workspace's session. -errno once logged. */
int cli_store_open(const struct opts *o, struct store **ret);
/* TURN as the user wrote it (an id, or "last") to its id. -errno once logged. */
int cli_store_resolve_turn(struct store *s, const char *arg, char **ret);

bool cli_use_color(void);
/* Paths for people: as they are if printable, else escaped. */
void cli_print_path(FILE *f, const char *p);
void cli_format_time(int64_t ns, char *buf, size_t n);
const char *cli_turn_state(const struct store_turn_info *t);
/* Print a JSON document built in sb: 0, or exit status 1 when it ran out of memory. */
int cli_print_json(struct strbuf *sb);

/* The user's PATHs, absolute and real in their parents, like the paths the broker records. */
int cli_user_paths(char **args, size_t n, char ***ret);
void cli_strv_free(char **v, size_t n);
/* Is path at or below one of prefixes? */
bool cli_under_any(const char *path, char **prefixes, size_t n);
