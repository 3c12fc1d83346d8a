/* SPDX-License-Identifier: MIT */
/*
 * brokered integrate AGENT: write an agent's hook settings so that its lifecycle maps onto
 * brokered's (DESIGN section 10), and brokered hook AGENT EVENT: the handlers those settings name.
 *
 *   a user prompt        → turn begin, the prompt as message (a turn left open is committed first)
 *   a shell tool call    → the command rewritten to run under `brokered run`
 *   a file edit tool     → ModifyBackup of the target path(s) before the agent writes them
 *   the agent stops      → turn commit, with the prompt as message
 *
 * Claude Code, Codex CLI and Gemini CLI share one hook shape: {"hooks": {EVENT: [{"matcher": RE,
 * "hooks": [{"type": "command", "command": CMD}]}]}} in a JSON file; they differ in event names,
 * tool names, files and the answer that rewrites a tool's input.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "basic/json-write.h"
#include "basic/json.h"
#include "basic/fs-util.h"
#include "basic/macro.h"
#include "basic/path-util.h"
#include "basic/strbuf.h"
#include "basic/user-util.h"
#include "basic/utf8.h"
#include "broker.h"
#include "cli.h"
#include "integrate.h"
#include "log.h"
#include "policy.h"
#include "session.h"
#include "settings.h"
#include "store.h"

enum hook_event {
	HOOK_PROMPT, /* turn begin */
	HOOK_BASH,   /* rewrite the command to run brokered */
	HOOK_EDIT,   /* ModifyBackup of the target */
	HOOK_STOP,   /* turn commit */
	_HOOK_MAX,
};

static const char *const hook_names[_HOOK_MAX] = {
    [HOOK_PROMPT] = "prompt",
    [HOOK_BASH] = "bash",
    [HOOK_EDIT] = "edit",
    [HOOK_STOP] = "stop",
};

struct hook_entry {
	const char *event;   /* the agent's event name */
	const char *matcher; /* tool regex, or NULL */
	enum hook_event handler;
};

enum agent_id {
	AGENT_CLAUDE,
	AGENT_CODEX,
	AGENT_GEMINI,
	_AGENT_MAX,
};

struct agent {
	const char *name;
	const char *project_file; /* relative to the project directory */
	const char *user_file;	  /* relative to $HOME */
	const char *project_env;  /* the project directory the agent exports to hooks, or NULL */
	struct hook_entry entries[4];
};

static const struct agent agents[_AGENT_MAX] = {
    [AGENT_CLAUDE] = {"claude",
		      ".claude/settings.local.json",
		      ".claude/settings.json",
		      "CLAUDE_PROJECT_DIR",
		      {
			  {"UserPromptSubmit", NULL, HOOK_PROMPT},
			  {"PreToolUse", "Bash", HOOK_BASH},
			  {"PreToolUse", "Write|Edit|MultiEdit|NotebookEdit", HOOK_EDIT},
			  {"Stop", NULL, HOOK_STOP},
		      }},
    [AGENT_CODEX] = {"codex",
		     ".codex/hooks.json",
		     ".codex/hooks.json",
		     NULL,
		     {
			 {"UserPromptSubmit", NULL, HOOK_PROMPT},
			 {"PreToolUse", "Bash", HOOK_BASH},
			 {"PreToolUse", "apply_patch|Edit|Write", HOOK_EDIT},
			 {"Stop", NULL, HOOK_STOP},
		     }},
    [AGENT_GEMINI] = {"gemini",
		      ".gemini/settings.json",
		      ".gemini/settings.json",
		      "GEMINI_PROJECT_DIR",
		      {
			  {"BeforeAgent", NULL, HOOK_PROMPT},
			  {"BeforeTool", "run_shell_command", HOOK_BASH},
			  {"BeforeTool", "write_file|replace", HOOK_EDIT},
			  {"AfterAgent", NULL, HOOK_STOP},
		      }},
};

static const struct agent *agent_find(const char *name)
{
	for (size_t i = 0; i < _AGENT_MAX; i++)
		if (strcmp(agents[i].name, name) == 0)
			return &agents[i];
	return NULL;
}

/* 'text' for /bin/sh: single quotes, each ' as '\''. */
static int shell_quote(struct strbuf *sb, const char *s)
{
	strbuf_appendc(sb, '\'');
	for (; *s; s++) {
		if (*s == '\'')
			strbuf_appends(sb, "'\\''");
		else
			strbuf_appendc(sb, *s);
	}
	return strbuf_appendc(sb, '\'');
}

/* The hook command of one handler: 'BROKERED' hook AGENT EVENT. */
static int hook_command(const char *self, const struct agent *a, enum hook_event e,
			struct strbuf *sb)
{
	shell_quote(sb, self);
	strbuf_printf(sb, " hook %s %s", a->name, hook_names[e]);
	return sb->oom ? -ENOMEM : 0;
}

/* Is cmd one of ours (any brokered binary, any event of this agent)? */
static bool is_our_command(const char *cmd, const struct agent *a)
{
	if (!cmd)
		return false;
	_cleanup_free_ char *needle = NULL;
	if (asprintf(&needle, " hook %s ", a->name) < 0)
		return false;
	const char *p = strstr(cmd, needle);
	if (!p)
		return false;
	size_t n = (size_t)(p - cmd);
	if (n && cmd[n - 1] == '\'')
		n--;
	return n >= 8 && strncmp(cmd + n - 8, "brokered", 8) == 0 &&
	       (n == 8 || cmd[n - 9] == '/' || cmd[n - 9] == '\'');
}

/* ---- integrate: the settings file ---- */

#define SETTINGS_MAX (4 * 1024 * 1024)

struct merge {
	const struct agent *a;
	const char *self;
	bool install;
	unsigned found; /* bit per entry: present with this binary's command */
	unsigned ours;	/* hooks of ours found (any binary) */
};

static bool entry_matches_group(const struct hook_entry *e, const struct json_value *group)
{
	const char *m = json_get_string(json_object_get(group, "matcher"), NULL);
	return e->matcher ? m && strcmp(m, e->matcher) == 0 : !m || !*m;
}

/* Note which of our entries an existing group holds, and count every hook of ours. */
static void scan_group(struct merge *m, const char *event, const struct json_value *group)
{
	const struct json_value *hooks = json_object_get(group, "hooks");
	for (size_t i = 0; i < json_array_len(hooks); i++) {
		const char *cmd =
		    json_get_string(json_object_get(json_array_get(hooks, i), "command"), NULL);
		if (!is_our_command(cmd, m->a))
			continue;
		m->ours++;
		for (size_t k = 0; k < ELEMENTSOF(m->a->entries); k++) {
			const struct hook_entry *e = &m->a->entries[k];
			_cleanup_strbuf_ struct strbuf want = STRBUF_INIT;
			if (strcmp(e->event, event) == 0 && entry_matches_group(e, group) &&
			    hook_command(m->self, m->a, e->handler, &want) >= 0 &&
			    strcmp(want.buf, cmd) == 0)
				m->found |= 1u << k;
		}
	}
}

static void indent(struct strbuf *sb, unsigned depth)
{
	strbuf_appendc(sb, '\n');
	for (unsigned i = 0; i < depth * 2; i++)
		strbuf_appendc(sb, ' ');
}

/* Our group for entry e, at nesting depth. */
static void emit_our_group(struct merge *m, const struct hook_entry *e, struct strbuf *sb,
			   unsigned depth)
{
	_cleanup_strbuf_ struct strbuf cmd = STRBUF_INIT;
	hook_command(m->self, m->a, e->handler, &cmd);
	strbuf_appendc(sb, '{');
	if (e->matcher) {
		indent(sb, depth + 1);
		strbuf_appends(sb, "\"matcher\": ");
		json_append_strings(sb, e->matcher);
		strbuf_appendc(sb, ',');
	}
	indent(sb, depth + 1);
	strbuf_appends(sb, "\"hooks\": [");
	indent(sb, depth + 2);
	strbuf_appendc(sb, '{');
	indent(sb, depth + 3);
	strbuf_appends(sb, "\"type\": \"command\",");
	indent(sb, depth + 3);
	strbuf_appends(sb, "\"command\": ");
	json_append_strings(sb, cmd.buf);
	indent(sb, depth + 2);
	strbuf_appendc(sb, '}');
	indent(sb, depth + 1);
	strbuf_appendc(sb, ']');
	indent(sb, depth);
	strbuf_appendc(sb, '}');
}

/* An existing group without hooks of ours: as it was. With some: those removed (the group goes
 * when nothing is left). Returns whether anything was written. */
static bool emit_group(struct merge *m, const struct json_value *group, struct strbuf *sb,
		       unsigned depth, bool first)
{
	const struct json_value *hooks = json_object_get(group, "hooks");
	size_t n = json_array_len(hooks), kept = 0;
	for (size_t i = 0; i < n; i++)
		if (!is_our_command(
			json_get_string(json_object_get(json_array_get(hooks, i), "command"), NULL),
			m->a))
			kept++;
	if (json_type(group) != JSON_OBJECT || json_type(hooks) != JSON_ARRAY || kept == n) {
		if (!first)
			strbuf_appendc(sb, ',');
		indent(sb, depth);
		json_append_value(sb, group, 2, depth);
		return true;
	}
	if (kept == 0)
		return false;
	if (!first)
		strbuf_appendc(sb, ',');
	indent(sb, depth);
	strbuf_appendc(sb, '{');
	for (size_t k = 0; k < json_object_len(group); k++) {
		const char *key;
		size_t klen;
		const struct json_value *v = json_object_member(group, k, &key, &klen);
		if (k)
			strbuf_appendc(sb, ',');
		indent(sb, depth + 1);
		json_append_string(sb, key, klen);
		strbuf_appends(sb, ": ");
		if (v != hooks) {
			json_append_value(sb, v, 2, depth + 1);
			continue;
		}
		strbuf_appendc(sb, '[');
		bool f = true;
		for (size_t i = 0; i < n; i++) {
			const struct json_value *h = json_array_get(hooks, i);
			if (is_our_command(json_get_string(json_object_get(h, "command"), NULL),
					   m->a))
				continue;
			if (!f)
				strbuf_appendc(sb, ',');
			f = false;
			indent(sb, depth + 2);
			json_append_value(sb, h, 2, depth + 2);
		}
		indent(sb, depth + 1);
		strbuf_appendc(sb, ']');
	}
	indent(sb, depth);
	strbuf_appendc(sb, '}');
	return true;
}

static bool is_our_event(const struct agent *a, const char *event)
{
	for (size_t k = 0; k < ELEMENTSOF(a->entries); k++)
		if (strcmp(a->entries[k].event, event) == 0)
			return true;
	return false;
}

/* One event's array: the existing groups (ours removed), then ours when installing. Returns
 * whether it has any group. */
static bool emit_event(struct merge *m, const char *event, const struct json_value *arr,
		       struct strbuf *sb, unsigned depth)
{
	size_t mark = sb->len;
	strbuf_appendc(sb, '[');
	bool first = true;
	for (size_t i = 0; i < json_array_len(arr); i++)
		if (emit_group(m, json_array_get(arr, i), sb, depth + 1, first))
			first = false;
	for (size_t k = 0; m->install && k < ELEMENTSOF(m->a->entries); k++) {
		if (strcmp(m->a->entries[k].event, event) != 0)
			continue;
		if (!first)
			strbuf_appendc(sb, ',');
		first = false;
		indent(sb, depth + 1);
		emit_our_group(m, &m->a->entries[k], sb, depth + 1);
	}
	if (first) {
		sb->len = mark;
		if (sb->buf)
			sb->buf[mark] = '\0';
		return false;
	}
	indent(sb, depth);
	strbuf_appendc(sb, ']');
	return true;
}

static int check_shape(const struct agent *a, const struct json_value *root, const char **reason)
{
	if (json_type(root) != JSON_OBJECT)
		return *reason = "the file is not a JSON object", -EINVAL;
	const struct json_value *hooks = json_object_get(root, "hooks");
	if (!hooks)
		return 0;
	if (json_type(hooks) != JSON_OBJECT)
		return *reason = "\"hooks\" is not an object", -EINVAL;
	for (size_t k = 0; k < ELEMENTSOF(a->entries); k++) {
		const struct json_value *ev = json_object_get(hooks, a->entries[k].event);
		if (ev && json_type(ev) != JSON_ARRAY)
			return *reason = "an event under \"hooks\" is not an array", -EINVAL;
	}
	return 0;
}

/* The whole new file: root members as they were, "hooks" merged. */
static int merge_settings(struct merge *m, const struct json_value *root, struct strbuf *sb)
{
	const struct json_value *hooks = json_object_get(root, "hooks");
	for (size_t i = 0; i < json_object_len(hooks); i++) {
		const char *ev;
		const struct json_value *arr = json_object_member(hooks, i, &ev, NULL);
		for (size_t g = 0; json_type(arr) == JSON_ARRAY && g < json_array_len(arr); g++)
			scan_group(m, ev, json_array_get(arr, g));
	}
	strbuf_appendc(sb, '{');
	bool first = true, done = false;
	for (size_t i = 0; i <= json_object_len(root); i++) {
		const char *key = "hooks";
		size_t klen = 5;
		const struct json_value *v = NULL;
		if (i < json_object_len(root))
			v = json_object_member(root, i, &key, &klen);
		else if (done || !m->install)
			break;
		if (v && v != hooks) {
			if (!first)
				strbuf_appendc(sb, ',');
			first = false;
			indent(sb, 1);
			json_append_string(sb, key, klen);
			strbuf_appends(sb, ": ");
			json_append_value(sb, v, 2, 1);
			continue;
		}
		/* "hooks": existing events in their order, then ours that were missing. */
		done = true;
		_cleanup_strbuf_ struct strbuf hs = STRBUF_INIT;
		bool hfirst = true;
		for (size_t e = 0; e < json_object_len(hooks); e++) {
			const char *ev;
			size_t evlen;
			const struct json_value *arr = json_object_member(hooks, e, &ev, &evlen);
			size_t mark = hs.len;
			if (!hfirst)
				strbuf_appendc(&hs, ',');
			indent(&hs, 2);
			json_append_string(&hs, ev, evlen);
			strbuf_appends(&hs, ": ");
			bool kept = json_type(arr) != JSON_ARRAY || !is_our_event(m->a, ev);
			if (kept)
				json_append_value(&hs, arr, 2, 2);
			else
				kept = emit_event(m, ev, arr, &hs, 2);
			if (kept) {
				hfirst = false;
			} else {
				hs.len = mark;
				if (hs.buf)
					hs.buf[mark] = '\0';
			}
		}
		for (size_t k = 0; m->install && k < ELEMENTSOF(m->a->entries); k++) {
			const char *ev = m->a->entries[k].event;
			bool seen = json_object_get(hooks, ev) != NULL;
			for (size_t j = 0; j < k; j++)
				seen = seen || strcmp(m->a->entries[j].event, ev) == 0;
			if (seen)
				continue;
			if (!hfirst)
				strbuf_appendc(&hs, ',');
			hfirst = false;
			indent(&hs, 2);
			json_append_strings(&hs, ev);
			strbuf_appends(&hs, ": ");
			emit_event(m, ev, NULL, &hs, 2);
		}
		/* Uninstall leaves no empty "hooks" behind that held only ours. */
		if (hfirst && !m->install && json_object_len(hooks) > 0)
			continue;
		if (!first)
			strbuf_appendc(sb, ',');
		first = false;
		indent(sb, 1);
		strbuf_appends(sb, "\"hooks\": {");
		if (hs.len) {
			strbuf_append(sb, hs.buf, hs.len);
			indent(sb, 1);
		}
		strbuf_appendc(sb, '}');
	}
	if (!first)
		indent(sb, 0);
	strbuf_appends(sb, "}\n");
	return sb->oom ? -ENOMEM : 0;
}

int integrate_merge(const char *agent, const char *self, bool install, const char *buf, size_t n,
		    struct strbuf *out, struct integrate_result *ret, char **ret_error)
{
	const struct agent *a = agent_find(agent);
	*ret_error = NULL;
	if (!a)
		return -EINVAL;
	_cleanup_json_ struct json_value *root = NULL;
	struct json_limits lim = {.max_depth = JSON_DEPTH_MAX, .max_size = SETTINGS_MAX};
	struct json_error jerr = {0};
	const char *reason = NULL;
	int r;
	size_t blank = 0;
	while (blank < n && strchr(" \t\r\n", buf[blank]) && buf[blank])
		blank++;
	if (blank == n)
		r = json_parse("{}", 2, NULL, &root, NULL);
	else
		r = json_parse(buf, n, &lim, &root, &jerr);
	if (r == -ENOMEM)
		return r;
	if (r < 0)
		return asprintf(ret_error, "%u:%u: %s", jerr.line, jerr.column,
				jerr.reason ? jerr.reason : "does not parse") < 0
			   ? -ENOMEM
			   : -EINVAL;
	if (check_shape(a, root, &reason) < 0)
		return asprintf(ret_error, " %s", reason) < 0 ? -ENOMEM : -EINVAL;
	struct merge m = {.a = a, .self = self, .install = install};
	if ((r = merge_settings(&m, root, out)) < 0)
		return r;
	*ret = (struct integrate_result){
	    .found = m.found, .ours = m.ours, .n_entries = ELEMENTSOF(a->entries)};
	return 0;
}

/* Read all of fd, at most max bytes (-EFBIG beyond). *ret is NUL-terminated. */
static int read_fd(int fd, size_t max, char **ret, size_t *ret_n)
{
	struct strbuf sb = STRBUF_INIT;
	char buf[65536];
	for (;;) {
		ssize_t k = read(fd, buf, sizeof buf);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 || sb.len + (size_t)MAX(k, 0) > max) {
			int r = k < 0 ? negative_errno() : -EFBIG;
			strbuf_free(&sb);
			return r;
		}
		if (k == 0)
			break;
		strbuf_append(&sb, buf, (size_t)k);
	}
	if (sb.oom)
		return strbuf_free(&sb), -ENOMEM;
	*ret_n = sb.len;
	*ret = sb.buf ? strbuf_steal(&sb) : strdup("");
	return *ret ? 0 : -ENOMEM;
}

static int read_file(const char *path, size_t max, char **ret, size_t *ret_n, mode_t *ret_mode)
{
	struct stat st;
	_cleanup_close_ int fd = open_regular(path, &st);
	if (fd < 0)
		return fd;
	*ret_mode = st.st_mode & 07777;
	return read_fd(fd, max, ret, ret_n);
}

/* Write path atomically (temporary file in its directory, fsync, rename) with mode. */
static int write_file_atomic(const char *path, const char *data, size_t n, mode_t mode)
{
	_cleanup_free_ char *tmp = NULL;
	if (asprintf(&tmp, "%s.brokered-tmp-%d", path, (int)getpid()) < 0)
		return -ENOMEM;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0)
		return negative_errno();
	int r = loop_write(fd, data, n);
	if (r >= 0 && fchmod(fd, mode) < 0)
		r = negative_errno();
	if (r >= 0 && fsync(fd) < 0)
		r = negative_errno();
	if (close(fd) < 0 && r >= 0)
		r = negative_errno();
	if (r >= 0 && rename(tmp, path) < 0)
		r = negative_errno();
	if (r < 0)
		(void)unlink(tmp);
	return r;
}

static int mkdir_parents(const char *path)
{
	_cleanup_free_ char *p = strdup(path);
	if (!p)
		return -ENOMEM;
	for (char *s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
		*s = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return negative_errno();
		*s = '/';
	}
	return 0;
}

static const char integrate_usage[] =
    "Usage: brokered integrate claude|codex|gemini [--project|--user] [--uninstall|--check]\n"
    "Write the agent's hook settings so that each user prompt begins a turn, shell commands run\n"
    "under `brokered run`, the agent's own file edits are backed up first, and the turn is\n"
    "committed when the agent stops (message: the prompt).\n"
    "  --project     this project's file (default): .claude/settings.local.json,\n"
    "                .codex/hooks.json, .gemini/settings.json\n"
    "  --user        the user's file: ~/.claude/settings.json, ~/.codex/hooks.json,\n"
    "                ~/.gemini/settings.json\n"
    "  --uninstall   remove exactly brokered's entries\n"
    "  --check       report whether they are installed (exit 0 yes, 1 no)\n"
    "The file changed is first copied to FILE.brokered-backup-TIME.\n"
    "Exit status: 0 done, 1 failed (the file is left as it was), 2 usage error.\n";

struct integrate_args {
	const struct agent *agent;
	bool user, uninstall, check;
};

/* 1: go on; 0: --help was shown; -EINVAL: a bad option or argument (logged). */
static int integrate_parse_args(int argc, char **argv, struct integrate_args *a)
{
	static const struct option opts[] = {
	    {"project", no_argument, NULL, 'p'},   {"user", no_argument, NULL, 'u'},
	    {"uninstall", no_argument, NULL, 'x'}, {"check", no_argument, NULL, 'c'},
	    {"help", no_argument, NULL, 'h'},	   {NULL, 0, NULL, 0},
	};
	optind = 0;
	opterr = 0;
	for (int c; (c = getopt_long(argc, argv, "h", opts, NULL)) >= 0;) {
		switch (c) {
		case 'p':
			a->user = false;
			break;
		case 'u':
			a->user = true;
			break;
		case 'x':
			a->uninstall = true;
			break;
		case 'c':
			a->check = true;
			break;
		case 'h':
			fputs(integrate_usage, stdout);
			return 0;
		default:
			log_error("integrate: unknown option or missing argument: %s",
				  argv[optind - 1]);
			return -EINVAL;
		}
	}
	if (optind != argc - 1 || (a->uninstall && a->check)) {
		fputs(integrate_usage, stderr);
		return -EINVAL;
	}
	a->agent = agent_find(argv[optind]);
	if (!a->agent)
		return log_error("integrate: unknown agent \"%s\" (claude, codex, gemini)",
				 argv[optind]),
		       -EINVAL;
	return 1;
}

/* The agent's settings file, of the project (the current directory) or the user; a symlink
 * (dotfiles) is followed, so it is changed where it points. -errno once logged. */
static int integrate_settings_file(const struct integrate_args *a, char **ret)
{
	const char *home = user_home();
	if (a->user && !home)
		return log_error("integrate --user: no home directory"), -ENOENT;
	_cleanup_free_ char *cwd = getcwd(NULL, 0);
	if (!cwd)
		return log_error_errno(errno, "Failed to get the current directory: %m");
	_cleanup_free_ char *path = NULL;
	if (asprintf(&path, "%s/%s", a->user ? home : cwd,
		     a->user ? a->agent->user_file : a->agent->project_file) < 0)
		return log_error_errno(ENOMEM, "Out of memory");
	char *real = realpath(path, NULL);
	*ret = real ? real : TAKE_PTR(path);
	return 0;
}

/* --check: each entry, installed or missing. The exit status. */
static int integrate_check(const struct agent *a, const struct integrate_result *m,
			   const char *file)
{
	unsigned all = (1u << ELEMENTSOF(a->entries)) - 1;
	for (size_t k = 0; k < ELEMENTSOF(a->entries); k++)
		printf("%-9s %s%s%s -> brokered hook %s %s\n",
		       m->found & (1u << k) ? "installed" : "missing", a->entries[k].event,
		       a->entries[k].matcher ? " " : "",
		       a->entries[k].matcher ? a->entries[k].matcher : "", a->name,
		       hook_names[a->entries[k].handler]);
	printf("%s: %s\n", file,
	       m->found == all ? "brokered is integrated"
	       : m->ours       ? "brokered's entries are incomplete or name another binary "
				 "(run `brokered integrate` again)"
			       : "brokered is not integrated");
	return m->found == all ? 0 : 1;
}

/* A copy of the settings file as it was, beside it, named by the time. -errno once logged. */
static int integrate_backup(const char *file, const char *old, size_t old_n, mode_t mode)
{
	char stamp[32];
	time_t t = time(NULL);
	struct tm tm;
	strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", localtime_r(&t, &tm));
	_cleanup_free_ char *bak = NULL;
	if (asprintf(&bak, "%s.brokered-backup-%s", file, stamp) < 0)
		return log_error_errno(ENOMEM, "Out of memory");
	/* O_EXCL: a backup of the same second is the same original; keep the first. */
	_cleanup_close_ int bfd =
	    open(bak, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
	if (bfd < 0 && errno == EEXIST)
		return 0;
	if (bfd < 0)
		return log_error_errno(errno, "Failed to back %s up to %s: %m", file, bak);
	int r = loop_write(bfd, old, old_n);
	if (r >= 0 && fsync(bfd) < 0)
		r = negative_errno();
	if (r < 0) {
		log_error_errno(r, "Failed to back %s up to %s: %m", file, bak);
		(void)unlink(bak);
		return r;
	}
	printf("backup: %s\n", bak);
	return 0;
}

int cli_integrate(int argc, char **argv)
{
	struct integrate_args ia = {0};
	int r = integrate_parse_args(argc, argv, &ia);
	if (r <= 0)
		return r < 0 ? 2 : 0;
	const struct agent *a = ia.agent;
	_cleanup_free_ char *self = realpath("/proc/self/exe", NULL);
	if (!self)
		return log_error_errno(errno, "Failed to find brokered's own binary: %m"), 1;
	_cleanup_free_ char *file = NULL;
	if (integrate_settings_file(&ia, &file) < 0)
		return 1;

	_cleanup_free_ char *old = NULL;
	size_t old_n = 0;
	mode_t mode = 0644;
	r = read_file(file, SETTINGS_MAX, &old, &old_n, &mode);
	bool exists = r >= 0;
	if (r < 0 && r != -ENOENT)
		return log_error_errno(r, "Failed to read %s: %m", file), 1;
	struct integrate_result m;
	_cleanup_free_ char *err = NULL;
	_cleanup_strbuf_ struct strbuf out = STRBUF_INIT;
	r = integrate_merge(a->name, self, !ia.uninstall, exists ? old : "", old_n, &out, &m, &err);
	if (r == -ENOMEM)
		return log_error_errno(r, "Out of memory"), 1;
	if (r < 0)
		return log_error("%s:%s; the file is left as it is", file, err ? err : " invalid"),
		       1;
	if (ia.check)
		return integrate_check(a, &m, file);
	/* Nothing to do: installed exactly as we would write it, or nothing of ours to remove. */
	unsigned all = (1u << ELEMENTSOF(a->entries)) - 1;
	if ((!ia.uninstall && m.found == all && m.ours == ELEMENTSOF(a->entries)) ||
	    (ia.uninstall && m.ours == 0) ||
	    (exists && out.len == old_n && memcmp(out.buf, old, old_n) == 0)) {
		printf("%s: %s\n", file,
		       ia.uninstall ? "no entries of brokered's to remove" : "already integrated");
		return 0;
	}
	if (exists && integrate_backup(file, old, old_n, mode) < 0)
		return 1;
	if (!exists && (r = mkdir_parents(file)) < 0)
		return log_error_errno(r, "Failed to create the directory of %s: %m", file), 1;
	if ((r = write_file_atomic(file, out.buf, out.len, mode)) < 0)
		return log_error_errno(r, "Failed to write %s: %m", file), 1;
	printf("%s: %s\n", file,
	       ia.uninstall ? "brokered's entries removed" : "brokered integrated");
	return 0;
}

/* ---- hook: the handlers ---- */

#define HOOK_INPUT_MAX	 (64 * 1024 * 1024) /* a Write's payload holds the whole file */
#define TURN_MESSAGE_MAX 2048
#define HOOK_EXIT_BLOCK	 2 /* all three agents: exit 2 blocks the action, stderr says why */

/* The message of a turn: the prompt, bounded (cut on a character boundary). */
static char *turn_message(const char *prompt)
{
	size_t n = strlen(prompt);
	if (n <= TURN_MESSAGE_MAX)
		return strdup(prompt);
	size_t cut = TURN_MESSAGE_MAX;
	while (cut > 0 && ((unsigned char)prompt[cut] & 0xc0) == 0x80)
		cut--;
	char *m = NULL;
	return asprintf(&m, "%.*s…", (int)cut, prompt) < 0 ? NULL : m;
}

struct hook_ctx {
	const struct agent *a;
	struct json_value *in;
	const char *workspace; /* the project directory */
	const char *cwd;       /* the agent's directory (relative paths) */
	struct session *s;
	char *scratch, *scratch_real; /* the broker's scratch directory (borrowed by the broker),
				       * removed at the end */
};

static int hook_session(struct hook_ctx *h)
{
	/* The broker's policy wants a scratch directory (serve's is private and empty); a hook's
	 * lives as long as the hook. */
	const char *tmp = getenv("TMPDIR");
	if (asprintf(&h->scratch, "%s/brokered-hook-XXXXXX",
		     tmp && tmp[0] == '/' && strlen(tmp) < 4000 ? tmp : "/tmp") < 0) {
		h->scratch = NULL;
		return log_error_errno(ENOMEM, "Out of memory");
	}
	if (!mkdtemp(h->scratch))
		return log_error_errno(errno, "Failed to create a scratch directory: %m");
	h->scratch_real = realpath(h->scratch, NULL);
	if (!h->scratch_real)
		return log_error_errno(errno, "Failed to create a scratch directory: %m");
	_cleanup_free_ char *err = NULL;
	struct session_options so = {
	    .workspace = h->workspace, .tool_call = h->a->name, .scratch = h->scratch_real};
	int r = session_open(&so, &h->s, &err);
	if (r < 0)
		return log_error("%s", err ? err : "Failed to open the brokered session"), r;
	return 0;
}

static struct store_options hook_store_options(const struct session *s)
{
	return (struct store_options){
	    .enabled = s->settings->backup_enabled,
	    .max_size_bytes = s->settings->backup_max_size_mb * 1024 * 1024,
	    .deny_oversize = s->settings->backup_deny_oversize,
	    .sync = s->settings->backup_sync,
	};
}

/* A tool call before any prompt of ours (hooks installed mid-session): open a turn so that the
 * stop commits everything the agent does. */
static int hook_ensure_turn(struct hook_ctx *h)
{
	_cleanup_free_ char *id = NULL;
	int r = store_current_turn(h->s->store, &id);
	if (r != -ENOENT)
		return r;
	struct store_options so = hook_store_options(h->s);
	_cleanup_free_ char *msg = NULL;
	if (asprintf(&msg, "%s turn", h->a->name) < 0)
		return -ENOMEM;
	free(TAKE_PTR(id));
	r = store_turn_begin_explicit(h->s->store, &so, msg, &id);
	return r == -EBUSY ? 0 : r;
}

/* {"systemMessage": text}: shown to the user by all three agents. */
static void print_system_message(const char *text)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_appends(&sb, "{\"systemMessage\":");
	json_append_strings(&sb, text);
	strbuf_appends(&sb, "}\n");
	if (!sb.oom)
		fputs(sb.buf, stdout);
	strbuf_free(&sb);
}

static int hook_prompt(struct hook_ctx *h)
{
	const char *prompt = json_get_string(json_object_get(h->in, "prompt"), NULL);
	_cleanup_free_ char *msg = turn_message(prompt ? prompt : "");
	if (!msg)
		return -ENOMEM;
	struct store_options so = hook_store_options(h->s);
	_cleanup_free_ char *id = NULL, *committed = NULL;
	int r = store_turn_begin_after_open(h->s->store, &so, msg, &id, &committed);
	_cleanup_free_ char *note = NULL;
	if (r == -EBUSY) {
		/* A command of the last turn still runs: this prompt's changes join its turn. */
		if (asprintf(&note,
			     "brokered: a command of turn %s still runs; this prompt's changes are "
			     "recorded in that turn",
			     id) < 0)
			return -ENOMEM;
		print_system_message(note);
		return 0;
	}
	if (r < 0)
		return log_error_errno(r, "Failed to begin a turn: %m"), r;
	if (committed) {
		if (asprintf(&note,
			     "brokered: turn %s was left open by an interrupted turn; committed it",
			     committed) < 0)
			return -ENOMEM;
		print_system_message(note);
	}
	return 0;
}

static int hook_stop(struct hook_ctx *h)
{
	_cleanup_free_ char *id = NULL;
	int r = store_current_turn(h->s->store, &id);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return log_error_errno(r, "Failed to find the open turn: %m"), r;
	struct store_turn_info info;
	if ((r = store_turn_info_get(h->s->store, id, &info)) < 0)
		return log_error_errno(r, "Failed to read turn %s: %m", id), r;
	r = store_commit_id(h->s->store, id, info.message ? info.message : "");
	free(info.id);
	free(info.message);
	if (r < 0 && r != -EALREADY)
		return log_error_errno(r, "Failed to commit turn %s: %m", id), r;
	return 0;
}

static int hook_bash(struct hook_ctx *h)
{
	const struct json_value *ti = json_object_get(h->in, "tool_input");
	const char *cmd = json_get_string(json_object_get(ti, "command"), NULL);
	if (!cmd)
		return log_error("hook %s bash: no tool_input.command in the payload", h->a->name),
		       -EINVAL;
	_cleanup_free_ char *self = realpath("/proc/self/exe", NULL);
	if (!self)
		return negative_errno();
	_cleanup_strbuf_ struct strbuf prefix = STRBUF_INIT, new_cmd = STRBUF_INIT,
				       out = STRBUF_INIT;
	shell_quote(&prefix, self);
	strbuf_appends(&prefix, " run ");
	/* Already brokered (a retried call): leave it. */
	if (!prefix.oom && strncmp(cmd, prefix.buf, prefix.len) == 0)
		return 0;
	int r = hook_ensure_turn(h);
	if (r < 0)
		return log_error_errno(r, "Failed to open a turn: %m"), r;
	strbuf_append(&new_cmd, prefix.buf, prefix.len);
	strbuf_appends(&new_cmd, "--workspace ");
	shell_quote(&new_cmd, h->s->workspace);
	strbuf_appends(&new_cmd, " -c ");
	shell_quote(&new_cmd, cmd);
	if (h->a == &agents[AGENT_GEMINI]) {
		/* Gemini merges hookSpecificOutput.tool_input into the tool's arguments. */
		strbuf_appends(&out, "{\"hookSpecificOutput\":{\"hookEventName\":\"BeforeTool\","
				     "\"tool_input\":{\"command\":");
		json_append_strings(&out, new_cmd.buf);
		strbuf_appends(&out, "}}}\n");
	} else {
		/* Claude Code and Codex replace the tool input with updatedInput: every field as
		 * it was, the command rewritten. Codex applies it only with an allow decision. */
		strbuf_appends(&out, "{\"hookSpecificOutput\":{\"hookEventName\":\"PreToolUse\",");
		if (h->a == &agents[AGENT_CODEX])
			strbuf_appends(&out, "\"permissionDecision\":\"allow\",");
		strbuf_appends(&out, "\"updatedInput\":{");
		for (size_t i = 0; i < json_object_len(ti); i++) {
			const char *key;
			const struct json_value *v = json_object_member(ti, i, &key, NULL);
			json_key(&out, key);
			if (strcmp(key, "command") == 0)
				json_append_strings(&out, new_cmd.buf);
			else
				json_append_value(&out, v, 0, 0);
		}
		strbuf_appends(&out, "}}}\n");
	}
	if (out.oom)
		return -ENOMEM;
	fputs(out.buf, stdout);
	return 0;
}

/* Paths an apply_patch body names: "*** Add File: P", "*** Update File: P", "*** Delete File:
 * P", "*** Move to: P". */
static int patch_paths(const char *patch, char ***ret, size_t *ret_n)
{
	static const char *const marks[] = {
	    "*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: "};
	char **v = NULL;
	size_t n = 0;
	for (const char *line = patch; line && *line;) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		for (size_t k = 0; k < ELEMENTSOF(marks); k++) {
			size_t ml = strlen(marks[k]);
			if (len <= ml || strncmp(line, marks[k], ml) != 0)
				continue;
			size_t pl = len - ml;
			while (pl > 0 && (line[ml + pl - 1] == '\r' || line[ml + pl - 1] == ' '))
				pl--;
			char **nv = reallocarray(v, n + 2, sizeof *v);
			if (!nv || !(nv[n] = strndup(line + ml, pl))) {
				v = nv ? nv : v;
				for (size_t i = 0; i < n; i++)
					free(v[i]);
				free(v);
				return -ENOMEM;
			}
			v = nv;
			v[++n] = NULL;
		}
		line = end ? end + 1 : NULL;
	}
	*ret = v;
	*ret_n = n;
	return 0;
}

static int modify_backup(struct hook_ctx *h, const char *path)
{
	struct broker_ipc_ctx c = {.pid = getppid(), .tool_call = h->a->name};
	struct broker_host_op op = {.kind = BROKER_HOST_MODIFY_BACKUP, .path = path};
	struct broker_ipc_result res;
	broker_ipc_host_op(h->s->broker, &c, &op, &res);
	int r = res.error;
	broker_ipc_result_done(&res);
	return r;
}

/*
 * A new file in directories that do not exist yet (Write creates them): the policy must allow the
 * file itself, and the absence of the topmost missing directory is recorded, so that undo removes
 * all of it.
 */
static int backup_missing_parent(struct hook_ctx *h, const char *path)
{
	_cleanup_strbuf_ struct strbuf norm = STRBUF_INIT, real = STRBUF_INIT;
	int r = path_normalise(path, &norm);
	if (r < 0)
		return r;
	/* The nearest ancestor that exists, by its real path, and the first name below it. */
	_cleanup_free_ char *top = strdup(norm.buf);
	if (!top)
		return -ENOMEM;
	char *slash;
	_cleanup_free_ char *anc = NULL;
	const char *rest = NULL;
	while ((slash = strrchr(top, '/'))) {
		*slash = '\0';
		anc = realpath(*top ? top : "/", NULL);
		if (anc) {
			rest = norm.buf + (slash - top) + 1;
			break;
		}
		if (errno != ENOENT)
			return negative_errno();
	}
	if (!anc || !rest)
		return -ENOENT;
	if ((r = path_join(anc, rest, &real)) < 0)
		return r;
	const char *why = NULL;
	if (policy_check(h->s->policy, real.buf, POLICY_ACCESS_WRITE, &why) != POLICY_ALLOW)
		return -EACCES;
	_cleanup_strbuf_ struct strbuf first = STRBUF_INIT;
	size_t n = strcspn(rest, "/");
	_cleanup_free_ char *name = strndup(rest, n);
	if (!name || (r = path_join(anc, name, &first)) < 0)
		return r < 0 ? r : -ENOMEM;
	return modify_backup(h, first.buf);
}

static int backup_one(struct hook_ctx *h, const char *arg)
{
	_cleanup_strbuf_ struct strbuf abs = STRBUF_INIT;
	int r = path_join(h->cwd, arg, &abs);
	if (r < 0)
		return r;
	r = modify_backup(h, abs.buf);
	if (r == -ENOENT)
		r = backup_missing_parent(h, abs.buf);
	if (r == -EACCES)
		fprintf(stderr, "brokered: %s is not writable under brokered's policy\n", abs.buf);
	else if (r < 0)
		fprintf(stderr, "brokered: could not back up %s before the edit: %s\n", abs.buf,
			strerror(-r));
	return r;
}

static int hook_edit(struct hook_ctx *h)
{
	const struct json_value *ti = json_object_get(h->in, "tool_input");
	const char *p = json_get_string(json_object_get(ti, "file_path"), NULL);
	if (!p)
		p = json_get_string(json_object_get(ti, "notebook_path"), NULL);
	if (!p)
		p = json_get_string(json_object_get(ti, "path"), NULL);
	char **paths = NULL;
	size_t n = 0;
	int r = 0;
	const char *patch = json_get_string(json_object_get(ti, "command"), NULL);
	if (!p && !patch)
		patch = json_get_string(json_object_get(ti, "input"), NULL);
	if (!p && patch && (r = patch_paths(patch, &paths, &n)) < 0)
		return r;
	if (!p && n == 0)
		return log_error("hook %s edit: the payload names no file", h->a->name), -EINVAL;
	if ((r = hook_ensure_turn(h)) < 0 || (r = session_ensure_turn(h->s, h->a->name)) < 0)
		log_error_errno(r, "Failed to open a turn: %m");
	if (r >= 0 && p)
		r = backup_one(h, p);
	for (size_t i = 0; r >= 0 && i < n; i++)
		r = backup_one(h, paths[i]);
	for (size_t i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
	return r;
}

int cli_hook(int argc, char **argv)
{
	const struct agent *a = argc == 3 ? agent_find(argv[1]) : NULL;
	enum hook_event e = _HOOK_MAX;
	for (size_t i = 0; a && i < _HOOK_MAX; i++)
		if (strcmp(argv[2], hook_names[i]) == 0)
			e = (enum hook_event)i;
	if (!a || e == _HOOK_MAX) {
		log_error("Usage: brokered hook claude|codex|gemini prompt|bash|edit|stop "
			  "(the agent's hook, with its JSON payload on stdin)");
		return HOOK_EXIT_BLOCK;
	}
	/* A stop that fails must not keep the agent going (exit 2 would, for a Stop hook). */
	int fail = e == HOOK_STOP ? 1 : HOOK_EXIT_BLOCK;
	_cleanup_free_ char *buf = NULL;
	size_t n = 0;
	int r = read_fd(STDIN_FILENO, HOOK_INPUT_MAX, &buf, &n);
	if (r < 0)
		return log_error_errno(r, "hook: failed to read the payload: %m"), fail;
	struct json_limits lim = {.max_depth = 64, .max_size = HOOK_INPUT_MAX};
	struct json_error jerr = {0};
	struct hook_ctx h = {.a = a};
	if (json_parse(buf, n, &lim, &h.in, &jerr) < 0 || json_type(h.in) != JSON_OBJECT) {
		log_error("hook %s %s: the payload is not a JSON object (%s)", a->name, argv[2],
			  jerr.reason ? jerr.reason : "not an object");
		json_free(h.in);
		return fail;
	}
	const char *cwd = json_get_string(json_object_get(h.in, "cwd"), NULL);
	const char *proj = a->project_env ? getenv(a->project_env) : NULL;
	_cleanup_free_ char *here = getcwd(NULL, 0);
	h.cwd = cwd && cwd[0] == '/' ? cwd : here ? here : "/";
	h.workspace = proj && proj[0] == '/' ? proj : h.cwd;
	r = hook_session(&h);
	if (r >= 0) {
		switch (e) {
		case HOOK_PROMPT:
			r = hook_prompt(&h);
			break;
		case HOOK_BASH:
			r = hook_bash(&h);
			break;
		case HOOK_EDIT:
			r = hook_edit(&h);
			break;
		case HOOK_STOP:
			r = hook_stop(&h);
			break;
		case _HOOK_MAX:
			break;
		}
	}
	session_close(h.s);
	if (h.scratch && rmdir(h.scratch) < 0 && errno != ENOENT)
		log_warning("Failed to remove %s: %m", h.scratch);
	free(h.scratch);
	free(h.scratch_real);
	json_free(h.in);
	fflush(stdout);
	return r < 0 ? fail : 0;
}
