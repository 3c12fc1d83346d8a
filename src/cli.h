/* SPDX-License-Identifier: MIT */
/*
 * Subcommands. Each takes the argv after the subcommand's name (argv[0] is the subcommand) and
 * returns the process exit status. Only these functions (and main) print for people.
 */
#pragma once

int cli_run(int argc, char **argv);    /* run, sh (cli-run.c) */
int cli_sh(int argc, char **argv);     /* sh, brokered-sh (cli-run.c) */
int cli_doctor(int argc, char **argv); /* doctor (doctor.c) */

/* cli-store.c */
int cli_turn(int argc, char **argv);	/* turn begin | commit */
int cli_log(int argc, char **argv);	/* log */
int cli_show(int argc, char **argv);	/* show TURN */
int cli_diff(int argc, char **argv);	/* diff TURN [PATH...] */
int cli_restore(int argc, char **argv); /* restore TURN PATH... */
int cli_undo(int argc, char **argv);	/* undo [TURN] */
int cli_gc(int argc, char **argv);	/* gc [--older-than AGE] */

/* cli-ipc.c */
int cli_serve(int argc, char **argv);  /* serve: the long-lived broker of a session */
int cli_client(int argc, char **argv); /* client: one socket request (exit 0 / 1 / 2) */
int cli_trash(int argc, char **argv);  /* trash list | restore | empty */

int cli_mcp(int argc, char **argv);	  /* mcp: the MCP server on stdio (mcp.c) */
int cli_integrate(int argc, char **argv); /* integrate claude|codex|gemini (integrate.c) */
int cli_hook(int argc, char **argv); /* hook AGENT EVENT: an agent's hook handler (integrate.c) */

/* Session id when --session is not given: $BROKERED_SESSION_ID, else one per workspace. */
int cli_default_session_id(const char *workspace, char **ret);
