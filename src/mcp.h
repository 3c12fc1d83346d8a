/* SPDX-License-Identifier: MIT */
/*
 * `brokered mcp`: a Model Context Protocol server over stdio (JSON-RPC 2.0, one message per line).
 *
 * The parsing half (mcp_parse) is pure and bounded: it takes one untrusted line and yields either
 * a decoded request or the JSON-RPC error to answer with. It never logs and never runs anything,
 * so the fuzz target drives it directly. The serving half (cli_mcp in mcp.c) runs each tool as a
 * child `brokered` process whose output goes to pipes, never to the JSON-RPC stream.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "basic/strbuf.h"

struct json_value;

#define MCP_LINE_MAX	  (1024 * 1024) /* longer messages are refused (-32600) */
#define MCP_PATHS_MAX	  1024		/* paths of one diff/restore call */
#define MCP_TIMEOUT_MAX_S 86400		/* timeout_s of run */

/* JSON-RPC 2.0 error codes. */
#define MCP_PARSE_ERROR	     (-32700)
#define MCP_INVALID_REQUEST  (-32600)
#define MCP_METHOD_NOT_FOUND (-32601)
#define MCP_INVALID_PARAMS   (-32602)

enum mcp_method {
	MCP_METHOD_INITIALIZE,
	MCP_METHOD_PING,
	MCP_METHOD_TOOLS_LIST,
	MCP_METHOD_TOOLS_CALL,
	MCP_METHOD_NOTIFICATION, /* any notification (initialized, cancelled, ...): no answer */
};

enum mcp_tool {
	MCP_TOOL_RUN,
	MCP_TOOL_LOG,
	MCP_TOOL_SHOW,
	MCP_TOOL_DIFF,
	MCP_TOOL_UNDO,
	MCP_TOOL_RESTORE,
	MCP_TOOL_TURN_BEGIN,
	MCP_TOOL_TURN_COMMIT,
	_MCP_TOOL_MAX,
};
const char *mcp_tool_name(enum mcp_tool t);

/* Arguments of a tools/call, checked against the tool's input schema. Strings point into doc. */
struct mcp_args {
	const char *command, *message, *turn, *rollback;
	const char **paths; /* diff, restore (malloc'd array) */
	size_t n_paths;
	const char **approve; /* run: --approve PATH[=ACCESS] (malloc'd array) */
	size_t n_approve;
	int64_t timeout_s; /* run; 0: the default */
	bool force;	   /* undo, restore: overwrite later changes */
};

struct mcp_request {
	struct json_value *doc; /* owned */
	char *id; /* the id as JSON text to echo (malloc'd), NULL for a notification */
	enum mcp_method method;
	const char *protocol_version; /* initialize: what the client asked for, or NULL */
	enum mcp_tool tool;	      /* tools/call */
	struct mcp_args args;
	/* tools/call whose arguments do not fit the schema: answered as a tool error (isError),
	 * so that the model can correct itself; a static reason. */
	const char *args_error;
};
void mcp_request_done(struct mcp_request *r);

/*
 * Parse one message (without its newline). Returns 0 and fills *ret, or a JSON-RPC error code
 * (< 0) with *ret_reason (static) and *ret_id (the id as JSON if one could be read, else NULL:
 * answered with id null; malloc'd). A message with a method and no id is a notification: 0 and
 * MCP_METHOD_NOTIFICATION whatever the method, since a notification is never answered.
 */
int mcp_parse(const char *buf, size_t n, struct mcp_request *ret, const char **ret_reason,
	      char **ret_id);

/* The protocol version the server answers an initialize with (the client's if supported). */
const char *mcp_negotiate_version(const char *requested);

/* One JSON-RPC answer line (with '\n'): a result (raw JSON) or an error. id NULL: null. */
int mcp_format_result(struct strbuf *sb, const char *id, const char *result_json);
int mcp_format_error(struct strbuf *sb, const char *id, int code, const char *message);

/* The result of tools/list and initialize (static JSON). */
const char *mcp_tools_list_json(void);
int mcp_initialize_json(struct strbuf *sb, const char *version);

/* A tool result: structuredContent (an object, raw JSON) also serialised as the text block. */
int mcp_format_tool_result(struct strbuf *sb, const char *structured_json, bool is_error);
/* A tool error with a plain message. */
int mcp_format_tool_error(struct strbuf *sb, const char *message);
