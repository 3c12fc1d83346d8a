/* SPDX-License-Identifier: MIT */
/*
 * brokered mcp: the Model Context Protocol server (DESIGN section 10). Messages are parsed here
 * with the project's JSON parser; each tool runs as a child `brokered` (run --json, log --json,
 * show --json, diff, undo, restore, turn), so the command's output and the store code stay where
 * they are and nothing a command prints can reach the JSON-RPC stream on stdout.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "basic/fs-util.h"
#include "basic/json-write.h"
#include "basic/json.h"
#include "basic/macro.h"
#include "basic/string-table.h"
#include "cli.h"
#include "log.h"
#include "mcp.h"
#include "store.h"

#ifndef BROKERED_VERSION
#define BROKERED_VERSION "0.1.0"
#endif

/* ---- parsing (pure: the fuzz target drives it) ---- */

static const char *const mcp_tool_table[_MCP_TOOL_MAX] = {
    [MCP_TOOL_RUN] = "run",
    [MCP_TOOL_LOG] = "log",
    [MCP_TOOL_SHOW] = "show",
    [MCP_TOOL_DIFF] = "diff",
    [MCP_TOOL_UNDO] = "undo",
    [MCP_TOOL_RESTORE] = "restore",
    [MCP_TOOL_TURN_BEGIN] = "turn_begin",
    [MCP_TOOL_TURN_COMMIT] = "turn_commit",
};

const char *mcp_tool_name(enum mcp_tool t)
{
	return string_table_lookup_to_string(mcp_tool_table, _MCP_TOOL_MAX, t);
}

/* Newest first; an initialize asking for another version gets the newest. */
static const char *const versions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"};

const char *mcp_negotiate_version(const char *requested)
{
	for (size_t i = 0; requested && i < ELEMENTSOF(versions); i++)
		if (strcmp(requested, versions[i]) == 0)
			return versions[i];
	return versions[0];
}

void mcp_request_done(struct mcp_request *r)
{
	json_free(r->doc);
	free(r->id);
	free(r->args.paths);
	free(r->args.approve);
	*r = (struct mcp_request){0};
}

/* A string argument: absent is fine (NULL) unless required; another type is an error. */
static int arg_string(const struct json_value *args, const char *key, bool required,
		      const char **ret, const char **reason)
{
	const struct json_value *v = json_object_get(args, key);
	if (!v || json_is_null(v)) {
		*ret = NULL;
		if (!required)
			return 0;
		*reason = "a required argument is missing";
		return -EINVAL;
	}
	size_t len;
	const char *s = json_get_string(v, &len);
	if (!s) {
		*reason = "an argument that must be a string is not";
		return -EINVAL;
	}
	if (required && len == 0) {
		*reason = "a required argument is empty";
		return -EINVAL;
	}
	*ret = s;
	return 0;
}

static int arg_strings(const struct json_value *args, const char *key, bool required,
		       const char ***ret, size_t *ret_n, const char **reason)
{
	const struct json_value *v = json_object_get(args, key);
	*ret = NULL;
	*ret_n = 0;
	if (!v || json_is_null(v)) {
		if (!required)
			return 0;
		*reason = "a required argument is missing";
		return -EINVAL;
	}
	if (json_type(v) != JSON_ARRAY) {
		*reason = "an argument that must be an array of strings is not";
		return -EINVAL;
	}
	size_t n = json_array_len(v);
	if (n > MCP_PATHS_MAX) {
		*reason = "too many paths";
		return -E2BIG;
	}
	if (required && n == 0) {
		*reason = "a required array is empty";
		return -EINVAL;
	}
	const char **a = calloc(n + 1, sizeof *a);
	if (!a) {
		*reason = "out of memory";
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		size_t len;
		a[i] = json_get_string(json_array_get(v, i), &len);
		if (!a[i] || len == 0) {
			free(a);
			*reason = "an array element is not a non-empty string";
			return -EINVAL;
		}
	}
	*ret = a;
	*ret_n = n;
	return 0;
}

static int arg_bool(const struct json_value *args, const char *key, bool *ret, const char **reason)
{
	const struct json_value *v = json_object_get(args, key);
	*ret = false;
	if (!v || json_is_null(v))
		return 0;
	if (json_get_bool(v, ret) < 0) {
		*reason = "an argument that must be a boolean is not";
		return -EINVAL;
	}
	return 0;
}

/* Decode tools/call arguments; each tool's keys as in its schema (unknown keys are refused). */
static int parse_args(enum mcp_tool t, const struct json_value *args, struct mcp_args *a,
		      const char **reason)
{
	static const char *const allowed[_MCP_TOOL_MAX][6] = {
	    [MCP_TOOL_RUN] = {"command", "message", "timeout_s", "approve", "rollback"},
	    [MCP_TOOL_LOG] = {NULL},
	    [MCP_TOOL_SHOW] = {"turn"},
	    [MCP_TOOL_DIFF] = {"turn", "paths"},
	    [MCP_TOOL_UNDO] = {"turn", "force"},
	    [MCP_TOOL_RESTORE] = {"turn", "paths", "force"},
	    [MCP_TOOL_TURN_BEGIN] = {"message"},
	    [MCP_TOOL_TURN_COMMIT] = {"message"},
	};
	if (args && json_type(args) != JSON_OBJECT) {
		*reason = "arguments must be an object";
		return -EINVAL;
	}
	for (size_t i = 0; i < json_object_len(args); i++) {
		const char *key;
		json_object_member(args, i, &key, NULL);
		bool known = false;
		for (size_t k = 0; k < ELEMENTSOF(allowed[t]) && allowed[t][k]; k++)
			known = known || strcmp(key, allowed[t][k]) == 0;
		if (!known) {
			*reason = "unknown argument for this tool";
			return -EINVAL;
		}
	}
	int r = 0;
	switch (t) {
	case MCP_TOOL_RUN: {
		r = arg_string(args, "command", true, &a->command, reason);
		if (r >= 0)
			r = arg_string(args, "message", false, &a->message, reason);
		if (r >= 0)
			r = arg_string(args, "rollback", false, &a->rollback, reason);
		if (r >= 0)
			r = arg_strings(args, "approve", false, &a->approve, &a->n_approve, reason);
		const struct json_value *to = json_object_get(args, "timeout_s");
		if (r >= 0 && to && !json_is_null(to) &&
		    (json_get_int64(to, &a->timeout_s) < 0 || a->timeout_s < 1 ||
		     a->timeout_s > MCP_TIMEOUT_MAX_S)) {
			*reason = "timeout_s must be an integer from 1 to 86400";
			r = -EINVAL;
		}
		if (r >= 0 && a->command && strlen(a->command) > MCP_LINE_MAX / 2) {
			*reason = "command too long";
			r = -E2BIG;
		}
		break;
	}
	case MCP_TOOL_LOG:
		break;
	case MCP_TOOL_SHOW:
		r = arg_string(args, "turn", true, &a->turn, reason);
		break;
	case MCP_TOOL_DIFF:
		r = arg_string(args, "turn", true, &a->turn, reason);
		if (r >= 0)
			r = arg_strings(args, "paths", false, &a->paths, &a->n_paths, reason);
		break;
	case MCP_TOOL_UNDO:
		r = arg_string(args, "turn", false, &a->turn, reason);
		if (r >= 0)
			r = arg_bool(args, "force", &a->force, reason);
		break;
	case MCP_TOOL_RESTORE:
		r = arg_string(args, "turn", true, &a->turn, reason);
		if (r >= 0)
			r = arg_strings(args, "paths", true, &a->paths, &a->n_paths, reason);
		if (r >= 0)
			r = arg_bool(args, "force", &a->force, reason);
		break;
	case MCP_TOOL_TURN_BEGIN:
		r = arg_string(args, "message", false, &a->message, reason);
		break;
	case MCP_TOOL_TURN_COMMIT:
		r = arg_string(args, "message", true, &a->message, reason);
		break;
	case _MCP_TOOL_MAX:
		r = -EINVAL;
		break;
	}
	/* A turn id goes to a child's argv: never let it look like an option. */
	if (r >= 0 && a->turn && (a->turn[0] == '-' || !store_id_valid(a->turn)) &&
	    strcmp(a->turn, "last") != 0) {
		*reason = "turn must be a turn id as log shows it, or \"last\"";
		r = -EINVAL;
	}
	if (r >= 0 && a->rollback && (a->rollback[0] == '-' || !store_id_valid(a->rollback)) &&
	    strcmp(a->rollback, "last") != 0) {
		*reason = "rollback must be a turn id";
		r = -EINVAL;
	}
	return r;
}

static int format_id(const struct json_value *id, char **ret)
{
	struct strbuf sb = STRBUF_INIT;
	int64_t i;
	size_t len;
	const char *s = json_get_string(id, &len);
	if (s)
		json_append_string(&sb, s, len);
	else if (json_type(id) == JSON_INT && json_get_int64(id, &i) == 0)
		strbuf_printf(&sb, "%" PRId64, i);
	else
		return -EINVAL;
	if (sb.oom || !sb.buf) {
		strbuf_free(&sb);
		return -ENOMEM;
	}
	*ret = strbuf_steal(&sb);
	return 0;
}

int mcp_parse(const char *buf, size_t n, struct mcp_request *ret, const char **ret_reason,
	      char **ret_id)
{
	*ret_id = NULL;
	*ret = (struct mcp_request){0};
	if (n > MCP_LINE_MAX) {
		*ret_reason = "message too large";
		return MCP_INVALID_REQUEST;
	}
	struct json_limits lim = {.max_depth = 64, .max_size = MCP_LINE_MAX};
	struct json_error err;
	struct json_value *doc = NULL;
	int r = json_parse(buf, n, &lim, &doc, &err);
	if (r == -ENOMEM) {
		*ret_reason = "out of memory";
		return MCP_INVALID_REQUEST;
	}
	if (r < 0) {
		*ret_reason = r == -ELOOP ? "nested too deeply" : "parse error";
		return MCP_PARSE_ERROR;
	}
	struct mcp_request q = {.doc = doc};
	const struct json_value *idv = json_object_get(doc, "id");
	const struct json_value *mv = json_object_get(doc, "method");
	const char *jsonrpc = json_get_string(json_object_get(doc, "jsonrpc"), NULL);
	const char *method = json_get_string(mv, NULL);
	if (json_type(doc) != JSON_OBJECT) {
		*ret_reason = json_type(doc) == JSON_ARRAY ? "batches are not supported"
							   : "a request must be an object";
		r = MCP_INVALID_REQUEST;
		goto fail;
	}
	if (idv && format_id(idv, &q.id) < 0) {
		*ret_reason = "id must be a string or an integer";
		r = MCP_INVALID_REQUEST;
		goto fail;
	}
	if (!jsonrpc || strcmp(jsonrpc, "2.0") != 0 || !method) {
		*ret_reason = !method ? "method missing (responses are not expected by this server)"
				      : "jsonrpc must be \"2.0\"";
		r = MCP_INVALID_REQUEST;
		goto fail;
	}
	const struct json_value *params = json_object_get(doc, "params");
	if (params && json_type(params) != JSON_OBJECT) {
		*ret_reason = "params must be an object";
		r = q.id ? MCP_INVALID_PARAMS : MCP_INVALID_REQUEST;
		goto fail;
	}
	if (!q.id) {
		q.method = MCP_METHOD_NOTIFICATION;
		*ret = q;
		return 0;
	}
	if (strcmp(method, "initialize") == 0) {
		q.method = MCP_METHOD_INITIALIZE;
		const struct json_value *pv = json_object_get(params, "protocolVersion");
		q.protocol_version = json_get_string(pv, NULL);
		if (pv && !q.protocol_version) {
			*ret_reason = "protocolVersion must be a string";
			r = MCP_INVALID_PARAMS;
			goto fail;
		}
	} else if (strcmp(method, "ping") == 0) {
		q.method = MCP_METHOD_PING;
	} else if (strcmp(method, "tools/list") == 0) {
		q.method = MCP_METHOD_TOOLS_LIST;
	} else if (strcmp(method, "tools/call") == 0) {
		q.method = MCP_METHOD_TOOLS_CALL;
		const char *name = json_get_string(json_object_get(params, "name"), NULL);
		if (!name) {
			*ret_reason = "tools/call needs params.name";
			r = MCP_INVALID_PARAMS;
			goto fail;
		}
		ssize_t tool = string_table_lookup_from_string(mcp_tool_table, _MCP_TOOL_MAX, name);
		if (tool < 0) {
			*ret_reason = "unknown tool";
			r = MCP_INVALID_PARAMS;
			goto fail;
		}
		q.tool = (enum mcp_tool)tool;
		const char *reason = NULL;
		if (parse_args(q.tool, json_object_get(params, "arguments"), &q.args, &reason) < 0)
			q.args_error = reason;
	} else {
		*ret_reason = "method not found";
		r = MCP_METHOD_NOT_FOUND;
		goto fail;
	}
	*ret = q;
	return 0;
fail:
	*ret_id = TAKE_PTR(q.id);
	mcp_request_done(&q);
	return r;
}

/* ---- answers ---- */

int mcp_format_result(struct strbuf *sb, const char *id, const char *result_json)
{
	strbuf_printf(sb, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":%s}\n", id ? id : "null",
		      result_json);
	return sb->oom ? -ENOMEM : 0;
}

int mcp_format_error(struct strbuf *sb, const char *id, int code, const char *message)
{
	strbuf_printf(sb, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"error\":{\"code\":%d,\"message\":",
		      id ? id : "null", code);
	json_append_strings(sb, message);
	strbuf_appends(sb, "}}\n");
	return sb->oom ? -ENOMEM : 0;
}

/* Input schemas (JSON Schema 2020-12 subset as the MCP specification writes them). */
static const char tools_list[] =
    "{\"tools\":["
    "{\"name\":\"run\",\"title\":\"Run a shell command, brokered and backed up\","
    "\"description\":\"Runs command with /bin/sh -c in the workspace under brokered: every file "
    "change is checked against the path policy and every existing file is backed up first. "
    "Returns the exit status, stdout and stderr (bounded, with truncation flags), the turn that "
    "recorded the changes, the paths that turn changed, and accesses that need the user's "
    "approval (rerun with approve and rollback).\","
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{"
    "\"command\":{\"type\":\"string\",\"description\":\"shell command (/bin/sh -c)\"},"
    "\"message\":{\"type\":\"string\",\"description\":\"commit message of the run's own turn\"},"
    "\"timeout_s\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":86400,"
    "\"description\":\"kill the command after this many seconds (default 600)\"},"
    "\"approve\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},"
    "\"description\":\"PATH[=ACCESS,...] grants the user approved\"},"
    "\"rollback\":{\"type\":\"string\",\"description\":\"undo this refused attempt first\"}},"
    "\"required\":[\"command\"],\"additionalProperties\":false}},"
    "{\"name\":\"log\",\"title\":\"List turns\",\"description\":\"Turns of the session, newest "
    "first: id, state, message, number of paths.\","
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}},"
    "{\"name\":\"show\",\"title\":\"Show a turn\",\"description\":\"Each path a turn touched: "
    "operation, pre-image kind, size.\","
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{\"turn\":{\"type\":\"string\","
    "\"description\":\"turn id, or last\"}},\"required\":[\"turn\"],"
    "\"additionalProperties\":false}},"
    "{\"name\":\"diff\",\"title\":\"Diff a turn\",\"description\":\"Unified diff of each file "
    "the turn changed, pre-image against the file as it is now.\","
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{\"turn\":{\"type\":\"string\"},"
    "\"paths\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"description\":\"only "
    "these paths (relative to the workspace)\"}},\"required\":[\"turn\"],"
    "\"additionalProperties\":false}},"
    "{\"name\":\"undo\",\"title\":\"Undo a turn\",\"description\":\"Put every path the turn "
    "touched back as it was before it (default: the last turn). Paths changed again since are "
    "refused unless force is true. The undo is itself a turn.\","
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{\"turn\":{\"type\":\"string\"},"
    "\"force\":{\"type\":\"boolean\"}},\"additionalProperties\":false}},"
    "{\"name\":\"restore\",\"title\":\"Restore paths\",\"description\":\"Put the given paths "
    "back as they were before the turn.\","
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{\"turn\":{\"type\":\"string\"},"
    "\"paths\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"minItems\":1},"
    "\"force\":{\"type\":\"boolean\"}},\"required\":[\"turn\",\"paths\"],"
    "\"additionalProperties\":false}},"
    "{\"name\":\"turn_begin\",\"title\":\"Begin a turn\",\"description\":\"Open a turn that the "
    "following runs join, until turn_commit. A turn left open by an interrupted agent is "
    "committed first and named in the result.\","
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{\"message\":{\"type\":\"string\"}},"
    "\"additionalProperties\":false}},"
    "{\"name\":\"turn_commit\",\"title\":\"Commit the turn\",\"description\":\"Commit the open "
    "turn with a message.\","
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{\"message\":{\"type\":\"string\"}},"
    "\"required\":[\"message\"],\"additionalProperties\":false}}"
    "]}";

const char *mcp_tools_list_json(void)
{
	return tools_list;
}

int mcp_initialize_json(struct strbuf *sb, const char *version)
{
	strbuf_appends(sb, "{\"protocolVersion\":");
	json_append_strings(sb, version);
	strbuf_appends(sb,
		       ",\"capabilities\":{\"tools\":{\"listChanged\":false}},"
		       "\"serverInfo\":{\"name\":\"brokered\",\"version\":\"" BROKERED_VERSION
		       "\"},\"instructions\":\"Run shell commands with the run tool: every file "
		       "change is backed up and can be undone (log, show, diff, undo, "
		       "restore).\"}");
	return sb->oom ? -ENOMEM : 0;
}

int mcp_format_tool_result(struct strbuf *sb, const char *structured_json, bool is_error)
{
	strbuf_appends(sb, "{\"content\":[{\"type\":\"text\",\"text\":");
	json_append_strings(sb, structured_json);
	strbuf_printf(sb, "}],\"structuredContent\":%s,\"isError\":%s}", structured_json,
		      is_error ? "true" : "false");
	return sb->oom ? -ENOMEM : 0;
}

int mcp_format_tool_error(struct strbuf *sb, const char *message)
{
	strbuf_appends(sb, "{\"content\":[{\"type\":\"text\",\"text\":");
	json_append_strings(sb, message);
	strbuf_appends(sb, "}],\"isError\":true}");
	return sb->oom ? -ENOMEM : 0;
}

/* ---- running a child brokered ---- */

#define OUT_MAX		  (64 * 1024)	    /* stdout/stderr of a run kept for the answer */
#define STORE_OUT_MAX	  (4 * 1024 * 1024) /* JSON of log/show, text of diff */
#define REPORT_TAIL	  (256 * 1024)	    /* end of a run's stderr: its --json report */
#define KILL_GRACE_S	  5
#define DEFAULT_TIMEOUT_S 600
#define STORE_TIMEOUT_S	  3600

struct capture {
	struct strbuf head; /* the first max bytes */
	size_t max, total;
	char *tail; /* the last REPORT_TAIL bytes (ring), or NULL */
	size_t tail_pos;
};

static void capture_add(struct capture *c, const char *p, size_t n)
{
	if (c->head.len < c->max)
		strbuf_append(&c->head, p, MIN(n, c->max - c->head.len));
	c->total += n;
	for (size_t i = 0; c->tail && i < n; i++)
		c->tail[c->tail_pos++ % REPORT_TAIL] = p[i];
}

static void capture_done(struct capture *c)
{
	strbuf_free(&c->head);
	free(c->tail);
}

/* The last line of the tail (a run's --json report), NUL-terminated, malloc'd. */
static char *capture_last_line(const struct capture *c)
{
	size_t n = MIN(c->tail_pos, (size_t)REPORT_TAIL);
	char *lin = malloc(n + 1);
	if (!lin)
		return NULL;
	for (size_t i = 0; i < n; i++)
		lin[i] = c->tail[(c->tail_pos - n + i) % REPORT_TAIL];
	while (n > 0 && lin[n - 1] == '\n')
		n--;
	lin[n] = '\0';
	char *nl = memrchr(lin, '\n', n);
	if (nl)
		memmove(lin, nl + 1, n - (size_t)(nl + 1 - lin) + 1);
	return lin;
}

struct child_result {
	struct capture out, err;
	int status; /* exit status, 128+N for a signal, -1 if it could not be started */
	bool timed_out;
};

static void child_result_done(struct child_result *r)
{
	capture_done(&r->out);
	capture_done(&r->err);
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct mcp_server {
	char *self; /* /proc/self/exe resolved at start */
	const char *session, *workspace;
};

/* Run `brokered ARGV...` with stdin /dev/null and both outputs captured; never longer than
 * timeout_s (then SIGTERM to its process group, SIGKILL after a grace period). */
static int spawn_child(const struct mcp_server *m, char **argv, int64_t timeout_s,
		       struct child_result *res)
{
	int po[2] = {-1, -1}, pe[2] = {-1, -1};
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	int r;
	if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0) {
		r = negative_errno();
		safe_close(po[0]);
		safe_close(po[1]);
		return r;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, po[1], STDOUT_FILENO);
	posix_spawn_file_actions_adddup2(&fa, pe[1], STDERR_FILENO);
	posix_spawnattr_init(&at);
	sigset_t none;
	sigemptyset(&none);
	posix_spawnattr_setsigmask(&at, &none);
	sigset_t dfl;
	sigemptyset(&dfl);
	sigaddset(&dfl, SIGPIPE);
	posix_spawnattr_setsigdefault(&at, &dfl);
	posix_spawnattr_setpgroup(&at, 0);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
					  POSIX_SPAWN_SETSIGDEF);
	pid_t pid;
	r = -posix_spawn(&pid, m->self, &fa, &at, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	safe_close(po[1]);
	safe_close(pe[1]);
	if (r < 0) {
		safe_close(po[0]);
		safe_close(pe[0]);
		return r;
	}
	struct pollfd pfd[2] = {{.fd = po[0], .events = POLLIN}, {.fd = pe[0], .events = POLLIN}};
	struct capture *caps[2] = {&res->out, &res->err};
	int64_t deadline = now_ms() + timeout_s * 1000, kill_at = -1;
	int status = 0;
	bool exited = false;
	int64_t exited_at = 0;
	char buf[65536];
	for (;;) {
		if (!exited && RETRY_EINTR(waitpid(pid, &status, WNOHANG)) == pid) {
			exited = true;
			exited_at = now_ms();
		}
		bool open = pfd[0].fd >= 0 || pfd[1].fd >= 0;
		/* After the child exits, whatever still holds the pipes gets a moment, not more. */
		if (!open || (exited && now_ms() - exited_at > 2000))
			break;
		int64_t t = now_ms();
		if (!exited && t >= deadline && kill_at < 0) {
			res->timed_out = true;
			(void)kill(-pid, SIGTERM);
			kill_at = t + KILL_GRACE_S * 1000;
		}
		if (!exited && kill_at >= 0 && t >= kill_at) {
			(void)kill(-pid, SIGKILL);
			kill_at = INT64_MAX;
		}
		int k = poll(pfd, 2, 200);
		if (k < 0 && errno != EINTR)
			break;
		for (int i = 0; k > 0 && i < 2; i++) {
			if (pfd[i].fd < 0 || !(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			ssize_t got = read(pfd[i].fd, buf, sizeof buf);
			if (got > 0) {
				capture_add(caps[i], buf, (size_t)got);
			} else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
				pfd[i].fd = safe_close(pfd[i].fd);
			}
		}
	}
	safe_close(pfd[0].fd);
	safe_close(pfd[1].fd);
	if (!exited) {
		while (RETRY_EINTR(waitpid(pid, &status, 0)) < 0 && errno == EINTR)
			;
	}
	res->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	return 0;
}

/* argv builder: "brokered" SUB [--session S] [--workspace W] ... */
struct argv_b {
	char *v[64 + 2 * MCP_PATHS_MAX];
	size_t n;
};

static void av_add(struct argv_b *a, const char *s)
{
	if (a->n + 1 < ELEMENTSOF(a->v))
		a->v[a->n++] = (char *)s;
	a->v[a->n] = NULL;
}

static void av_start(struct argv_b *a, const struct mcp_server *m, const char *sub,
		     const char *sub2)
{
	a->n = 0;
	av_add(a, "brokered");
	av_add(a, sub);
	if (sub2)
		av_add(a, sub2);
	if (m->session) {
		av_add(a, "--session");
		av_add(a, m->session);
	}
	av_add(a, "--workspace");
	av_add(a, m->workspace);
}

/* A child's stderr without "brokered: " prefixes' noise: the text as it is, bounded. */
static const char *err_text(struct child_result *c, const char *fallback)
{
	const char *s = strbuf_cstr(&c->err.head);
	return s && *s ? s : fallback;
}

/* Parse a child's JSON output; NULL if it is not JSON. */
static struct json_value *child_json(struct child_result *c, const char *text)
{
	if (c->out.total > c->out.max)
		return NULL;
	struct json_limits lim = {.max_depth = 32, .max_size = STORE_OUT_MAX};
	struct json_value *v = NULL;
	const char *s = text ? text : strbuf_cstr(&c->out.head);
	if (!s || json_parse(s, strlen(s), &lim, &v, NULL) < 0)
		return NULL;
	return v;
}

/* ,"paths":[{"path","operation"}...] of a turn (show --json), or [] when it has none. */
static void append_turn_paths(const struct mcp_server *m, struct strbuf *sb, const char *turn)
{
	json_key(sb, "paths");
	strbuf_appendc(sb, '[');
	if (!turn) {
		strbuf_appendc(sb, ']');
		return;
	}
	struct argv_b a;
	av_start(&a, m, "show", NULL);
	av_add(&a, "--json");
	av_add(&a, "--");
	av_add(&a, turn);
	struct child_result c = {.out.max = STORE_OUT_MAX, .err.max = OUT_MAX};
	_cleanup_json_ struct json_value *v = NULL;
	if (spawn_child(m, a.v, STORE_TIMEOUT_S, &c) >= 0 && c.status == 0)
		v = child_json(&c, NULL);
	const struct json_value *paths = json_object_get(v, "paths");
	for (size_t i = 0; i < json_array_len(paths); i++) {
		const struct json_value *e = json_array_get(paths, i);
		if (i)
			strbuf_appendc(sb, ',');
		strbuf_appendc(sb, '{');
		json_kv_str(sb, "path", json_get_string(json_object_get(e, "path"), NULL));
		json_kv_str(sb, "operation",
			    json_get_string(json_object_get(e, "operation"), NULL));
		strbuf_appendc(sb, '}');
	}
	strbuf_appendc(sb, ']');
	child_result_done(&c);
}

static void append_output(struct strbuf *sb, const char *key, const struct capture *c,
			  size_t drop_tail)
{
	size_t n = c->head.len;
	if (c->total <= c->max)
		n = n > drop_tail ? n - drop_tail : 0;
	json_key(sb, key);
	json_append_string(sb, c->head.buf ? c->head.buf : "", n);
	char k[64];
	snprintf(k, sizeof k, "%sTruncated", key);
	json_kv_bool(sb, k, c->total > c->max);
}

/* The tool result: structuredContent st (freed here), also as text. */
static int answer(struct strbuf *res, struct strbuf *st, bool is_error)
{
	int r = st->oom ? -ENOMEM : mcp_format_tool_result(res, st->buf, is_error);
	strbuf_free(st);
	return r;
}

static int tool_run(const struct mcp_server *m, const struct mcp_args *args, struct strbuf *res)
{
	struct argv_b a;
	av_start(&a, m, "run", NULL);
	av_add(&a, "--json");
	if (args->message) {
		av_add(&a, "--message");
		av_add(&a, args->message);
	}
	if (args->rollback) {
		av_add(&a, "--rollback");
		av_add(&a, args->rollback);
	}
	for (size_t i = 0; i < args->n_approve; i++) {
		av_add(&a, "--approve");
		av_add(&a, args->approve[i]);
	}
	av_add(&a, "-c");
	av_add(&a, args->command);
	struct child_result c = {.out.max = OUT_MAX, .err.max = OUT_MAX};
	c.err.tail = malloc(REPORT_TAIL);
	if (!c.err.tail)
		return -ENOMEM;
	int r = spawn_child(m, a.v, args->timeout_s ? args->timeout_s : DEFAULT_TIMEOUT_S, &c);
	if (r < 0) {
		child_result_done(&c);
		return mcp_format_tool_error(res, "could not start brokered run");
	}
	_cleanup_free_ char *last = capture_last_line(&c.err);
	_cleanup_json_ struct json_value *rep = last ? child_json(&c, last) : NULL;
	if (json_type(rep) != JSON_OBJECT) {
		json_free(TAKE_PTR(rep));
	}
	struct strbuf st = STRBUF_INIT;
	strbuf_appendc(&st, '{');
	/* exitStatus is brokered's (the command's own, 120 approval, 125 brokered failed). */
	json_kv_int(&st, "exitStatus", c.status);
	json_kv_bool(&st, "timedOut", c.timed_out);
	append_output(&st, "stdout", &c.out, 0);
	/* The report line is brokered's, not the command's: not part of stderr. */
	append_output(&st, "stderr", &c.err, rep && last ? strlen(last) + 1 : 0);
	const char *turn = json_get_string(json_object_get(rep, "turn"), NULL);
	json_kv_str(&st, "turn", turn);
	json_kv_str(&st, "session", json_get_string(json_object_get(rep, "session"), NULL));
	append_turn_paths(m, &st, turn);
	json_key(&st, "approvalNeeded");
	const struct json_value *ap = json_object_get(rep, "approvalNeeded");
	if (ap)
		json_append_value(&st, ap, 0, 0);
	else
		strbuf_appends(&st, "[]");
	json_key(&st, "notBackedUp");
	const struct json_value *nb = json_object_get(rep, "notBackedUp");
	if (nb)
		json_append_value(&st, nb, 0, 0);
	else
		strbuf_appends(&st, "[]");
	strbuf_appendc(&st, '}');
	/* A tool error when brokered could not run the command (no report) or it ran too long. */
	bool failed = !rep || c.timed_out;
	r = answer(res, &st, failed);
	child_result_done(&c);
	return r;
}

/* log, show: the child's --json output as structuredContent. */
static int tool_store_json(const struct mcp_server *m, const struct mcp_args *args, enum mcp_tool t,
			   struct strbuf *res)
{
	struct argv_b a;
	av_start(&a, m, t == MCP_TOOL_LOG ? "log" : "show", NULL);
	av_add(&a, "--json");
	if (t == MCP_TOOL_SHOW) {
		av_add(&a, "--");
		av_add(&a, args->turn);
	}
	struct child_result c = {.out.max = STORE_OUT_MAX, .err.max = OUT_MAX};
	int r = spawn_child(m, a.v, STORE_TIMEOUT_S, &c);
	_cleanup_json_ struct json_value *v = r >= 0 && c.status == 0 ? child_json(&c, NULL) : NULL;
	if (!v) {
		r = mcp_format_tool_error(res, c.out.total > c.out.max ? "output too large"
								       : err_text(&c, "failed"));
	} else {
		struct strbuf st = STRBUF_INIT;
		if (t == MCP_TOOL_LOG) {
			strbuf_appends(&st, "{\"turns\":");
			json_append_value(&st, v, 0, 0);
			strbuf_appendc(&st, '}');
		} else {
			json_append_value(&st, v, 0, 0);
		}
		r = answer(res, &st, false);
	}
	child_result_done(&c);
	return r;
}

static int tool_diff(const struct mcp_server *m, const struct mcp_args *args, struct strbuf *res)
{
	struct argv_b a;
	av_start(&a, m, "diff", NULL);
	av_add(&a, "--");
	av_add(&a, args->turn);
	for (size_t i = 0; i < args->n_paths; i++)
		av_add(&a, args->paths[i]);
	struct child_result c = {.out.max = STORE_OUT_MAX, .err.max = OUT_MAX};
	int r = spawn_child(m, a.v, STORE_TIMEOUT_S, &c);
	if (r < 0 || c.status != 0) {
		r = mcp_format_tool_error(res, err_text(&c, "diff failed"));
	} else {
		struct strbuf st = STRBUF_INIT;
		strbuf_appendc(&st, '{');
		json_kv_str(&st, "turn", args->turn);
		append_output(&st, "diff", &c.out, 0);
		strbuf_appendc(&st, '}');
		r = answer(res, &st, false);
	}
	child_result_done(&c);
	return r;
}

static int tool_undo_restore(const struct mcp_server *m, const struct mcp_args *args,
			     enum mcp_tool t, struct strbuf *res)
{
	struct argv_b a;
	av_start(&a, m, t == MCP_TOOL_UNDO ? "undo" : "restore", NULL);
	av_add(&a, "--json");
	if (args->force)
		av_add(&a, "--force");
	av_add(&a, "--");
	av_add(&a, args->turn ? args->turn : "last");
	for (size_t i = 0; i < args->n_paths; i++)
		av_add(&a, args->paths[i]);
	struct child_result c = {.out.max = OUT_MAX, .err.max = OUT_MAX};
	int r = spawn_child(m, a.v, STORE_TIMEOUT_S, &c);
	_cleanup_json_ struct json_value *v = r >= 0 ? child_json(&c, NULL) : NULL;
	if (!v) {
		r = mcp_format_tool_error(res, err_text(&c, "failed"));
	} else {
		struct strbuf st = STRBUF_INIT;
		json_append_value(&st, v, 0, 0);
		/* Paths that could not be put back are named on stderr: pass them on. */
		if (st.len && c.err.head.len) {
			st.len--;
			json_key(&st, "messages");
			json_append_string(&st, c.err.head.buf, c.err.head.len);
			strbuf_appendc(&st, '}');
		}
		r = answer(res, &st, c.status != 0);
	}
	child_result_done(&c);
	return r;
}

static int tool_turn(const struct mcp_server *m, const struct mcp_args *args, enum mcp_tool t,
		     struct strbuf *res)
{
	struct argv_b a;
	bool begin = t == MCP_TOOL_TURN_BEGIN;
	av_start(&a, m, "turn", begin ? "begin" : "commit");
	if (begin)
		av_add(&a, "--commit-open");
	if (args->message || !begin) {
		av_add(&a, "--message");
		av_add(&a, args->message ? args->message : "");
	}
	struct child_result c = {.out.max = OUT_MAX, .err.max = OUT_MAX};
	int r = spawn_child(m, a.v, STORE_TIMEOUT_S, &c);
	if (r < 0 || c.status != 0) {
		r = mcp_format_tool_error(res, err_text(&c, "failed"));
		child_result_done(&c);
		return r;
	}
	/* stdout: the turn id; after it, with --commit-open, "committed-interrupted ID" when a turn
	 * an interrupted agent left open was committed first. */
	struct strbuf st = STRBUF_INIT;
	const char *out = strbuf_cstr(&c.out.head);
	out = out ? out : "";
	const char *prev = strstr(out, "\ncommitted-interrupted ");
	strbuf_appendc(&st, '{');
	json_key(&st, "turn");
	json_append_string(&st, out, strcspn(out, "\n"));
	if (prev) {
		prev += strlen("\ncommitted-interrupted ");
		json_key(&st, "committedInterrupted");
		json_append_string(&st, prev, strcspn(prev, "\n"));
	}
	strbuf_appendc(&st, '}');
	r = answer(res, &st, false);
	child_result_done(&c);
	return r;
}

static int call_tool(const struct mcp_server *m, const struct mcp_request *q, struct strbuf *res)
{
	if (q->args_error) {
		struct strbuf msg = STRBUF_INIT;
		strbuf_printf(&msg, "invalid arguments for %s: %s", mcp_tool_name(q->tool),
			      q->args_error);
		int r = mcp_format_tool_error(res, msg.oom ? q->args_error : msg.buf);
		strbuf_free(&msg);
		return r;
	}
	switch (q->tool) {
	case MCP_TOOL_RUN:
		return tool_run(m, &q->args, res);
	case MCP_TOOL_LOG:
	case MCP_TOOL_SHOW:
		return tool_store_json(m, &q->args, q->tool, res);
	case MCP_TOOL_DIFF:
		return tool_diff(m, &q->args, res);
	case MCP_TOOL_UNDO:
	case MCP_TOOL_RESTORE:
		return tool_undo_restore(m, &q->args, q->tool, res);
	case MCP_TOOL_TURN_BEGIN:
	case MCP_TOOL_TURN_COMMIT:
		return tool_turn(m, &q->args, q->tool, res);
	case _MCP_TOOL_MAX:
		break;
	}
	return -EINVAL;
}

/* ---- the server loop ---- */

/* Answer one message; returns < 0 only when stdout is gone. */
static int handle_line(const struct mcp_server *m, const char *line, size_t n)
{
	struct mcp_request q;
	const char *reason = NULL;
	_cleanup_free_ char *eid = NULL;
	_cleanup_strbuf_ struct strbuf out = STRBUF_INIT;
	int code = mcp_parse(line, n, &q, &reason, &eid);
	if (code < 0) {
		log_debug("mcp: refused a message: %s", reason);
		mcp_format_error(&out, eid, code, reason);
	} else {
		_cleanup_strbuf_ struct strbuf res = STRBUF_INIT;
		int r = 0;
		switch (q.method) {
		case MCP_METHOD_NOTIFICATION:
			break;
		case MCP_METHOD_INITIALIZE:
			r = mcp_initialize_json(&res, mcp_negotiate_version(q.protocol_version));
			break;
		case MCP_METHOD_PING:
			r = strbuf_appends(&res, "{}");
			break;
		case MCP_METHOD_TOOLS_LIST:
			r = strbuf_appends(&res, mcp_tools_list_json());
			break;
		case MCP_METHOD_TOOLS_CALL:
			r = call_tool(m, &q, &res);
			break;
		}
		if (q.method != MCP_METHOD_NOTIFICATION && (r < 0 || res.oom))
			mcp_format_error(&out, q.id, -32603, "internal error");
		else if (q.method != MCP_METHOD_NOTIFICATION)
			mcp_format_result(&out, q.id, res.buf);
		mcp_request_done(&q);
	}
	if (out.oom)
		return 0;
	return out.len ? loop_write(STDOUT_FILENO, out.buf, out.len) : 0;
}

static const char mcp_usage[] =
    "Usage: brokered mcp [--workspace DIR] [--session ID]\n"
    "A Model Context Protocol server on stdin/stdout (JSON-RPC 2.0, one message per line) with\n"
    "the tools run, log, show, diff, undo, restore, turn_begin and turn_commit.\n"
    "  --workspace DIR   the workspace of every tool (default: the current directory)\n"
    "  --session ID      backup session (default: $BROKERED_SESSION_ID, else one per workspace)\n";

int cli_mcp(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"workspace", required_argument, NULL, 'w'},
	    {"session", required_argument, NULL, 's'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct mcp_server m = {0};
	const char *ws = ".";
	optind = 0;
	opterr = 0;
	for (int c; (c = getopt_long(argc, argv, "h", opts, NULL)) >= 0;) {
		switch (c) {
		case 'w':
			ws = optarg;
			break;
		case 's':
			m.session = optarg;
			break;
		case 'h':
			fputs(mcp_usage, stdout);
			return 0;
		default:
			log_error("mcp: unknown option or missing argument: %s", argv[optind - 1]);
			return 2;
		}
	}
	if (optind != argc)
		return log_error("mcp: unexpected argument \"%s\"", argv[optind]), 2;
	if (m.session && (!store_id_valid(m.session) || m.session[0] == '-'))
		return log_error("Invalid session id \"%s\"", m.session), 2;
	_cleanup_free_ char *real = realpath(ws, NULL);
	if (!real)
		return log_error_errno(errno, "Failed to find the workspace \"%s\": %m", ws), 1;
	/* Relative paths of diff and restore are relative to the workspace. */
	if (chdir(real) < 0)
		return log_error_errno(errno, "Failed to enter the workspace \"%s\": %m", real), 1;
	m.workspace = real;
	m.self = realpath("/proc/self/exe", NULL);
	if (!m.self)
		return log_error_errno(errno, "Failed to find brokered's own binary: %m"), 1;
	signal(SIGPIPE, SIG_IGN);

	/* One message per line; a longer line than MCP_LINE_MAX is skipped up to its newline. */
	size_t cap = MCP_LINE_MAX + 1, len = 0;
	_cleanup_free_ char *buf = malloc(cap + 1);
	if (!buf) {
		free(m.self);
		return log_error_errno(ENOMEM, "Out of memory"), 1;
	}
	bool skipping = false;
	int r = 0;
	for (;;) {
		ssize_t k = read(STDIN_FILENO, buf + len, cap - len);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		len += (size_t)k;
		size_t start = 0;
		for (char *nl; r >= 0 && (nl = memchr(buf + start, '\n', len - start));) {
			size_t n = (size_t)(nl - (buf + start));
			if (!skipping) {
				size_t m_n = n && buf[start + n - 1] == '\r' ? n - 1 : n;
				bool blank = strspn(buf + start, " \t\r") >= m_n;
				if (!blank)
					r = handle_line(&m, buf + start, m_n);
			}
			skipping = false;
			start += n + 1;
		}
		if (r < 0)
			break;
		memmove(buf, buf + start, len - start);
		len -= start;
		if (len == cap) {
			/* No newline in MCP_LINE_MAX + 1 bytes: refuse it once, drop the rest of
			 * it. */
			if (!skipping) {
				_cleanup_strbuf_ struct strbuf out = STRBUF_INIT;
				mcp_format_error(&out, NULL, MCP_INVALID_REQUEST,
						 "message too large");
				if (!out.oom && loop_write(STDOUT_FILENO, out.buf, out.len) < 0)
					break;
			}
			skipping = true;
			len = 0;
		}
	}
	/* A last message without its newline still counts. */
	buf[len] = '\0';
	if (r >= 0 && len > 0 && !skipping && strspn(buf, " \t\r\n") < len)
		(void)handle_line(&m, buf, len);
	free(m.self);
	return 0;
}
