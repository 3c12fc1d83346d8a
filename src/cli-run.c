/* SPDX-License-Identifier: MIT */
/* `brokered run` and `brokered sh` / `brokered-sh`: argument parsing only; run.c does the work. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "log.h"
#include "run.h"

static void run_usage(FILE *f)
{
	fputs(
	    "Usage: brokered run [OPTIONS] -- PROGRAM [ARG...]\n"
	    "       brokered run [OPTIONS] -c 'STRING'\n"
	    "       brokered sh -c 'STRING' [ARG0 [ARG...]]   (also as brokered-sh)\n"
	    "\n"
	    "Run a command so that every file change it makes is checked by the broker and every\n"
	    "existing file is backed up before it changes.\n"
	    "\n"
	    "  --workspace DIR   writable root (default: the current directory)\n"
	    "  --session ID      backup session (default: $BROKERED_SESSION_ID, else one per "
	    "workspace)\n"
	    "  --tool-call ID    attribution in store and audit log (default: generated)\n"
	    "  -m, --message MSG commit message of the run's own turn (default: the command line)\n"
	    "  --settings FILE   extra settings file\n"
	    "  --json            machine-readable report on stderr when the command ends\n"
	    "  -c STRING         run STRING with /bin/sh -c\n"
	    "  --approve PATH[=ACCESS,...]  grant an access that the policy would prompt for\n"
	    "                    (ACCESS: read, write, delete, metadata; default all but read)\n"
	    "  --approve unix:PATH  allow connecting to the Unix sockets at or below PATH\n"
	    "  --approve net:HOST   let the network proxy through to HOST\n"
	    "  --rollback TURN   first undo TURN (a refused attempt), then run: an approved\n"
	    "                    rerun applies no side effect twice\n"
	    "  --degraded        run on a kernel without Landlock (the broker alone enforces)\n"
	    "  --dangerously-disable-sandbox  run unsandboxed, after a yes on the terminal\n"
	    "\n"
	    "Exit status: the command's; 120 approval needed; 125 brokered failed; 126/127 as a "
	    "shell.\n",
	    f);
}

int cli_run(int argc, char **argv)
{
	enum {
		OPT_WORKSPACE = 256,
		OPT_SESSION,
		OPT_TOOL_CALL,
		OPT_SETTINGS,
		OPT_JSON,
		OPT_APPROVE,
		OPT_DEGRADED,
		OPT_DISABLE,
		OPT_ROLLBACK
	};
	static const struct option opts[] = {
	    {"workspace", required_argument, NULL, OPT_WORKSPACE},
	    {"session", required_argument, NULL, OPT_SESSION},
	    {"tool-call", required_argument, NULL, OPT_TOOL_CALL},
	    {"message", required_argument, NULL, 'm'},
	    {"settings", required_argument, NULL, OPT_SETTINGS},
	    {"json", no_argument, NULL, OPT_JSON},
	    {"approve", required_argument, NULL, OPT_APPROVE},
	    {"degraded", no_argument, NULL, OPT_DEGRADED},
	    {"rollback", required_argument, NULL, OPT_ROLLBACK},
	    {"dangerously-disable-sandbox", no_argument, NULL, OPT_DISABLE},
	    {"help", no_argument, NULL, 'h'},
	    {},
	};
	struct run_options o = {0};
	const char *command_string = NULL;
	char **approve = calloc((size_t)argc + 1, sizeof *approve);
	if (!approve)
		return RUN_EXIT_FAILURE;
	o.approve = approve;
	int c;
	optind = 1;
	/* "+" stops at the first non-option: the command's own options are not ours. */
	while ((c = getopt_long(argc, argv, "+m:c:h", opts, NULL)) != -1) {
		switch (c) {
		case OPT_WORKSPACE:
			o.workspace = optarg;
			break;
		case OPT_SESSION:
			o.session = optarg;
			break;
		case OPT_TOOL_CALL:
			o.tool_call = optarg;
			break;
		case 'm':
			o.message = optarg;
			break;
		case OPT_SETTINGS:
			o.settings = optarg;
			break;
		case OPT_JSON:
			o.json = true;
			break;
		case OPT_APPROVE:
			approve[o.n_approve++] = optarg;
			break;
		case OPT_DEGRADED:
			o.degraded = true;
			break;
		case OPT_ROLLBACK:
			o.rollback = optarg;
			break;
		case OPT_DISABLE:
			o.dangerously_disable_sandbox = true;
			break;
		case 'c':
			command_string = optarg;
			break;
		case 'h':
			run_usage(stdout);
			free(approve);
			return 0;
		default:
			run_usage(stderr);
			free(approve);
			return RUN_EXIT_FAILURE;
		}
	}
	int ret;
	char **rest = argv + optind;
	int nrest = argc - optind;
	if (command_string) {
		/* sh -c STRING [ARG0 [ARG...]] */
		char **av = calloc((size_t)nrest + 4, sizeof *av);
		if (!av) {
			free(approve);
			return RUN_EXIT_FAILURE;
		}
		av[0] = (char *)"/bin/sh";
		av[1] = (char *)"-c";
		av[2] = (char *)command_string;
		for (int i = 0; i < nrest; i++)
			av[3 + i] = rest[i];
		o.argv = av;
		o.shell_string = command_string;
		ret = run_command(&o);
		free(av);
	} else if (nrest == 0) {
		log_error("No command given");
		run_usage(stderr);
		ret = RUN_EXIT_FAILURE;
	} else {
		o.argv = rest;
		ret = run_command(&o);
	}
	free(approve);
	return ret;
}

/* `brokered sh ARGS...` is `/bin/sh ARGS...` under the broker: a drop-in for `sh -c`. */
int cli_sh(int argc, char **argv)
{
	char **av = calloc((size_t)argc + 1, sizeof *av);
	if (!av)
		return RUN_EXIT_FAILURE;
	av[0] = (char *)"/bin/sh";
	for (int i = 1; i < argc; i++)
		av[i] = argv[i];
	struct run_options o = {.argv = av, .workspace = getenv("BROKERED_WORKSPACE")};
	for (int i = 1; i + 1 < argc; i++)
		if (strcmp(argv[i], "-c") == 0) {
			o.shell_string = argv[i + 1];
			break;
		}
	int r = run_command(&o);
	free(av);
	return r;
}
