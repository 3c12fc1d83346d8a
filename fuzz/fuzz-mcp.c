/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the MCP message parser and the answers built from it (src/mcp.c). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "basic/json.h"
#include "mcp.h"
#include "store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An answer must be exactly one line of valid JSON. */
static void check_line(struct strbuf *sb)
{
	if (sb->oom)
		return;
	if (!sb->len || sb->buf[sb->len - 1] != '\n' || memchr(sb->buf, '\n', sb->len - 1))
		abort();
	struct json_value *v = NULL;
	if (json_parse(sb->buf, sb->len - 1, NULL, &v, NULL) < 0)
		abort();
	json_free(v);
}

static void check_args(const struct mcp_request *q)
{
	const struct mcp_args *a = &q->args;
	if (q->tool >= _MCP_TOOL_MAX || !mcp_tool_name(q->tool))
		abort();
	if (q->args_error)
		return;
	if (q->tool == MCP_TOOL_RUN && (!a->command || !*a->command))
		abort();
	if ((q->tool == MCP_TOOL_SHOW || q->tool == MCP_TOOL_DIFF || q->tool == MCP_TOOL_RESTORE) &&
	    !a->turn)
		abort();
	/* Turn ids reach a child's argv: never an option. */
	if (a->turn && (a->turn[0] == '-' || (!store_id_valid(a->turn) && strcmp(a->turn, "last"))))
		abort();
	if (q->tool == MCP_TOOL_RESTORE && a->n_paths == 0)
		abort();
	if (a->n_paths > MCP_PATHS_MAX || a->timeout_s < 0 || a->timeout_s > MCP_TIMEOUT_MAX_S)
		abort();
	for (size_t i = 0; i < a->n_paths; i++)
		if (!a->paths[i] || !*a->paths[i])
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mcp_request q;
	const char *reason = NULL;
	char *id = NULL;
	struct strbuf sb = STRBUF_INIT;
	int code = mcp_parse((const char *)data, size, &q, &reason, &id);
	if (code < 0) {
		if (!reason || code < -32700 || code > -32600)
			abort();
		mcp_format_error(&sb, id, code, reason);
		check_line(&sb);
	} else {
		if (!q.doc || (q.method != MCP_METHOD_NOTIFICATION && !q.id))
			abort();
		if (q.method == MCP_METHOD_TOOLS_CALL)
			check_args(&q);
		struct strbuf res = STRBUF_INIT;
		if (q.method == MCP_METHOD_INITIALIZE)
			mcp_initialize_json(&res, mcp_negotiate_version(q.protocol_version));
		else if (q.method == MCP_METHOD_TOOLS_CALL && q.args_error)
			mcp_format_tool_error(&res, q.args_error);
		else if (q.method == MCP_METHOD_TOOLS_CALL)
			/* Whatever the command was, echoed as text, the answer stays one JSON line.
			 */
			mcp_format_tool_error(&res, q.args.command ? q.args.command : "x");
		else
			strbuf_appends(&res, mcp_tools_list_json());
		if (!res.oom && q.id) {
			mcp_format_result(&sb, q.id, res.buf);
			check_line(&sb);
		}
		strbuf_free(&res);
		mcp_request_done(&q);
	}
	free(id);
	strbuf_free(&sb);
	return 0;
}
