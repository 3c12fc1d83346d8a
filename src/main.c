/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "log.h"

#ifndef BROKERED_VERSION
#define BROKERED_VERSION "0.1.0"
#endif

static void usage(FILE *f)
{
	fputs(
	    "Usage: brokered COMMAND [ARGS...]\n"
	    "\n"
	    "Run commands so that every file change is checked and backed up; see what changed; "
	    "undo it.\n"
	    "\n"
	    "  run [OPTIONS] -- PROGRAM [ARG...]  run argv under the broker\n"
	    "  run [OPTIONS] -c 'STRING'          run STRING with /bin/sh -c\n"
	    "  sh -c 'STRING'                     drop-in for `sh -c` (also as brokered-sh)\n"
	    "  turn begin | commit -m MSG         an agent's turn spanning many commands\n"
	    "  log                                turns, newest first\n"
	    "  show TURN                          what a turn touched\n"
	    "  diff TURN [PATH...]                pre-image against the file as it is now\n"
	    "  restore TURN PATH...               put PATH back as it was before TURN\n"
	    "  undo [TURN]                        put every path TURN touched back\n"
	    "  gc [--older-than AGE]              drop old turns\n"
	    "  doctor                             what this kernel supports\n"
	    "  serve [--session ID]               long-lived broker on the Unix socket\n"
	    "  client COMMAND ...                 one socket request (exit 0 ok, 1 denied, 2 no "
	    "broker)\n"
	    "  trash list | restore | empty       the freedesktop.org trash\n"
	    "  mcp [--workspace DIR]              MCP server on stdio (tools run, log, undo, ...)\n"
	    "  integrate claude|codex|gemini      install the agent's hooks (--user, --uninstall, "
	    "--check)\n"
	    "  hook AGENT EVENT                   an agent's hook handler (payload on stdin)\n"
	    "\n"
	    "Run `brokered COMMAND --help` for a command's options.\n",
	    f);
}

int main(int argc, char **argv)
{
	log_setup_from_env();
	const char *base = strrchr(argv[0], '/');
	base = base ? base + 1 : argv[0];
	if (strcmp(base, "brokered-sh") == 0)
		return cli_sh(argc, argv);
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	const char *cmd = argv[1];
	static const struct {
		const char *name;
		int (*fn)(int, char **);
	} cmds[] = {
	    {"run", cli_run},	  {"sh", cli_sh},	    {"doctor", cli_doctor},
	    {"turn", cli_turn},	  {"log", cli_log},	    {"show", cli_show},
	    {"diff", cli_diff},	  {"restore", cli_restore}, {"undo", cli_undo},
	    {"gc", cli_gc},	  {"serve", cli_serve},	    {"client", cli_client},
	    {"trash", cli_trash}, {"mcp", cli_mcp},	    {"integrate", cli_integrate},
	    {"hook", cli_hook},
	};
	for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
		if (strcmp(cmd, cmds[i].name) == 0)
			return cmds[i].fn(argc - 1, argv + 1);
	if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
		printf("brokered %s\n", BROKERED_VERSION);
		return 0;
	}
	log_error("Unknown command \"%s\"", cmd);
	usage(stderr);
	return 2;
}
