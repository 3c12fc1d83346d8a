/* SPDX-License-Identifier: MIT */
/* The socket protocols' parsers and formatter (src/ipc-proto.c): table-driven. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "basic/json.h"
#include "ipc-proto.h"
#include "tap.h"

static void token_ok(const char *line, bool write, const char *path, int flags, unsigned mode)
{
	struct ipc_token_req r;
	const char *reason = NULL;
	int k = ipc_parse_token(line, strlen(line), &r, &reason);
	if (!ok(k == 0, "token parses: %s", line)) {
		printf("#   reason: %s (%d)\n", reason ? reason : "-", k);
	} else {
		ok(r.write == write, "  class read-write=%d", write);
		is_str(r.path, path, "  path");
		is_int(r.flags, flags, "  flags");
		is_int(r.mode, mode, "  mode");
	}
	ipc_token_req_done(&r);
}

static void token_bad(const char *line, size_t n, int want)
{
	struct ipc_token_req r;
	const char *reason = NULL;
	if (n == SIZE_MAX)
		n = strlen(line);
	int k = ipc_parse_token(line, n, &r, &reason);
	ok(k == want && reason, "token refused (%d, want %d): %.60s -> %s", k, want, line,
	   reason ? reason : "(no reason)");
	ipc_token_req_done(&r);
}

static void tokens(void)
{
	token_ok("com.workbuddy.sandbox.read\t/etc/hosts\tS\tT", false, "/etc/hosts", O_RDONLY,
		 0666);
	token_ok("com.workbuddy.sandbox.read-write\t/w/a b\tS\tT", true, "/w/a b", O_RDWR | O_CREAT,
		 0666);
	token_ok("brokered.read-write\t/w/f\tS\t\twronly|trunc|creat\t0600", true, "/w/f",
		 O_WRONLY | O_TRUNC | O_CREAT, 0600);
	token_ok("brokered.read-write\t/w/f\tS\tT\tappend,wronly\t-", true, "/w/f",
		 O_WRONLY | O_APPEND, 0666);
	token_ok("brokered.read-write\t/w/f\tS\tT\t-\t-\r", true, "/w/f", O_RDWR | O_CREAT, 0666);
	token_ok("brokered.read\t/w/f\tS\tT\tnofollow\t-", false, "/w/f", O_NOFOLLOW, 0666);
	char num[128];
	snprintf(num, sizeof num, "brokered.read-write\t/w/f\tS\tT\t%d\t644", O_WRONLY | O_CREAT);
	token_ok(num, true, "/w/f", O_WRONLY | O_CREAT, 0644);
	/* "read-write" with only rdonly-compatible flags still means writable. */
	token_ok("brokered.read-write\t/w/f\tS\tT\tnofollow\t-", true, "/w/f", O_RDWR | O_NOFOLLOW,
		 0666);

	token_bad("", 0, -EINVAL);
	token_bad("com.workbuddy.sandbox.read\t/x\tS", SIZE_MAX, -EINVAL);
	token_bad("com.workbuddy.sandbox.read\t/x\tS\tT\tX", SIZE_MAX, -EINVAL);
	token_bad("com.workbuddy.sandbox.exec\t/x\tS\tT", SIZE_MAX, -EPROTO);
	token_bad("com.workbuddy.sandbox.read\trelative\tS\tT", SIZE_MAX, -EINVAL);
	token_bad("com.workbuddy.sandbox.read\t/x\t\tT", SIZE_MAX, -EINVAL);
	token_bad("com.workbuddy.sandbox.read\t/x\tS\tT\twronly\t-", SIZE_MAX, -EINVAL);
	token_bad("com.workbuddy.sandbox.read\t/x\tS\tT\tcreat\t-", SIZE_MAX, -EINVAL);
	token_bad("brokered.read-write\t/x\tS\tT\tbogus\t-", SIZE_MAX, -EINVAL);
	token_bad("brokered.read-write\t/x\tS\tT\twronly|\t-", SIZE_MAX, -EINVAL);
	token_bad("brokered.read-write\t/x\tS\tT\twronly|rdwr\t-", SIZE_MAX, -EINVAL);
	token_bad("brokered.read-write\t/x\tS\tT\t-\t99999", SIZE_MAX, -EINVAL);
	token_bad("brokered.read-write\t/x\tS\tT\t0x80000000\t-", SIZE_MAX, -EINVAL);
	token_bad("brokered.read-write\t/x\tS\tT\t-\t-\textra", SIZE_MAX, -EINVAL);
	token_bad("brokered.read\t/x\0y\tS\tT", 21, -EINVAL);
	token_bad("brokered.read\t/x\tS\x01\tT", SIZE_MAX, -ENAMETOOLONG);

	/* Bounds: a path one byte over the limit, a line over IPC_LINE_MAX. */
	size_t n = 4097 + 64;
	char *big = malloc(IPC_LINE_MAX + 2);
	int h = snprintf(big, n, "brokered.read\t/");
	memset(big + h, 'a', 4096);
	snprintf(big + h + 4096, 64, "\tS\tT");
	token_bad(big, strlen(big), -ENAMETOOLONG);
	memset(big, 'a', IPC_LINE_MAX + 1);
	token_bad(big, IPC_LINE_MAX + 1, -E2BIG);
	free(big);
	is_str(ipc_token_answer_line(IPC_TOKEN_FD), "FD\n", "FD answer");
	is_str(ipc_token_answer_line(IPC_TOKEN_SANDBOX), "SANDBOX\n", "SANDBOX answer");
	is_str(ipc_token_answer_line(IPC_TOKEN_DENY), "DENY\n", "DENY answer");
}

static int json(const char *s, struct ipc_json_req *r, const char **reason)
{
	*reason = NULL;
	return ipc_parse_json(s, strlen(s), r, reason);
}

static void jsons(void)
{
	struct ipc_json_req r;
	const char *why;

	ok(json("{\"id\":\"req-1\",\"command\":\"HostFileOperation\",\"operation\":\"rename\","
		"\"from\":\"/a\",\"to\":\"/b\",\"sessionId\":\"S\",\"toolCallId\":\"T\","
		"\"brokerTraceId\":\"X\",\"unknown\":{\"x\":[1]}}",
		&r, &why) == 0,
	   "rename parses (unknown fields ignored)");
	is_int(r.command, IPC_CMD_HOST_FILE_OPERATION, "  command");
	is_int(r.op, IPC_OP_RENAME, "  op");
	is_str(r.id, "req-1", "  id");
	is_str(r.path, "/a", "  from");
	is_str(r.to, "/b", "  to");
	is_str(r.session, "S", "  session");
	is_str(r.tool_call, "T", "  tool call");
	is_str(r.trace, "X", "  trace");
	ipc_json_req_done(&r);

	ok(json("{\"id\":42,\"operation\":\"delete\",\"path\":\"/w/\\u00e9\\n\",\"deleteMode\":"
		"\"trash\",\"recursive\":true,\"force\":true,\"safeDeleteReportPath\":\"/r\","
		"\"sessionId\":\"S\"}",
		&r, &why) == 0,
	   "delete without command parses");
	is_str(r.id, "42", "  integer id echoed as a string");
	is_str(r.path, "/w/\xc3\xa9\n", "  escapes decoded");
	ok(r.delete_mode == IPC_DELETE_TRASH && r.recursive && r.force, "  flags");
	is_str(r.report_path, "/r", "  report path");
	ipc_json_req_done(&r);

	ok(json("{\"operation\":\"delete\",\"path\":\"/w/\xff\xfe\",\"sessionId\":\"S\"}", &r,
		&why) == 0,
	   "raw non-UTF-8 bytes in a path are accepted");
	is_str(r.path, "/w/\xff\xfe", "  bytes kept");
	ipc_json_req_done(&r);

	ok(json("{\"operation\":\"chmod\",\"path\":\"/x\",\"mode\":\"0640\",\"sessionId\":\"S\"}",
		&r, &why) == 0 &&
	       r.has_mode && r.mode == 0640,
	   "chmod with an octal string mode");
	ipc_json_req_done(&r);
	ok(json("{\"operation\":\"mkdir\",\"path\":\"/x\",\"mode\":493,\"recursive\":true,"
		"\"sessionId\":\"S\"}",
		&r, &why) == 0 &&
	       r.mode == 0755 && r.recursive,
	   "mkdir with a numeric mode");
	ipc_json_req_done(&r);
	ok(json("{\"operation\":\"link\",\"path\":\"/src\",\"to\":\"/dst\",\"symbolic\":true,"
		"\"sessionId\":\"S\"}",
		&r, &why) == 0 &&
	       r.symbolic && !strcmp(r.path, "/src"),
	   "link takes path for from");
	ipc_json_req_done(&r);
	ok(json("{\"command\":\"EnableModifyBackup\",\"sessionId\":\"S\",\"message\":\"m\","
		"\"maxSizeMB\":5}",
		&r, &why) == 0 &&
	       r.command == IPC_CMD_ENABLE_MODIFY_BACKUP && r.has_max_size_mb && r.max_size_mb == 5,
	   "EnableModifyBackup");
	ipc_json_req_done(&r);
	ok(json("{\"command\":\"ModifyBackup\",\"path\":\"/w/f\",\"sessionId\":\"S\"}", &r, &why) ==
		   0 &&
	       r.command == IPC_CMD_MODIFY_BACKUP,
	   "ModifyBackup");
	ipc_json_req_done(&r);
	ok(json("{\"command\":\"ModifyBackup\",\"targetPath\":\"/w/f\",\"sessionId\":\"S\"}", &r,
		&why) == 0 &&
	       r.command == IPC_CMD_MODIFY_BACKUP && !strcmp(r.path, "/w/f"),
	   "ModifyBackup takes the reference's targetPath");
	ipc_json_req_done(&r);
	ok(json("{\"command\":\"ModifyBackup\",\"targetPath\":\"w/f\",\"sessionId\":\"S\"}", &r,
		&why) < 0 &&
	       !strcmp(why, "targetPath must be an absolute path"),
	   "a relative targetPath is refused");
	ipc_json_req_done(&r);
	ok(json("{\"command\":\"CommitModifyBackup\",\"sessionId\":\"S\",\"message\":\"done\"}", &r,
		&why) == 0 &&
	       !strcmp(r.message, "done"),
	   "CommitModifyBackup");
	ipc_json_req_done(&r);

	static const struct {
		const char *in;
		int err;
		bool has_id;
	} bad[] = {
	    {"", -EINVAL, false},
	    {"{", -EINVAL, false},
	    {"[]", -EINVAL, false},
	    {"{\"id\":\"a\",\"operation\":\"delete\",\"path\":\"/x\"}", -EINVAL,
	     true}, /* session */
	    {"{\"id\":\"a\",\"operation\":\"explode\",\"path\":\"/x\",\"sessionId\":\"S\"}",
	     -EPROTO, true},
	    {"{\"id\":\"a\",\"command\":\"Nope\",\"sessionId\":\"S\"}", -EPROTO, true},
	    {"{\"id\":\"a\",\"sessionId\":\"S\"}", -EINVAL, true},
	    {"{\"id\":\"a\",\"operation\":\"delete\",\"path\":\"rel\",\"sessionId\":\"S\"}",
	     -EINVAL, true},
	    {"{\"id\":\"a\",\"operation\":\"delete\",\"sessionId\":\"S\"}", -EINVAL, true},
	    {"{\"id\":\"a\",\"operation\":\"delete\",\"path\":7,\"sessionId\":\"S\"}", -EINVAL,
	     true},
	    {"{\"id\":\"a\",\"operation\":\"rename\",\"from\":\"/x\",\"sessionId\":\"S\"}", -EINVAL,
	     true},
	    {"{\"id\":\"a\",\"operation\":\"chmod\",\"path\":\"/x\",\"sessionId\":\"S\"}", -EINVAL,
	     true},
	    {"{\"id\":\"a\",\"operation\":\"chmod\",\"path\":\"/"
	     "x\",\"mode\":4096,\"sessionId\":\"S\"}",
	     -EINVAL, true},
	    {"{\"id\":\"a\",\"operation\":\"chmod\",\"path\":\"/"
	     "x\",\"mode\":\"rwx\",\"sessionId\":\"S\"}",
	     -EINVAL, true},
	    {"{\"id\":\"a\",\"operation\":\"delete\",\"path\":\"/"
	     "x\",\"deleteMode\":\"burn\",\"sessionId\":\"S\"}",
	     -EINVAL, true},
	    {"{\"id\":\"a\",\"operation\":\"delete\",\"path\":\"/"
	     "x\",\"recursive\":\"yes\",\"sessionId\":\"S\"}",
	     -EINVAL, true},
	    {"{\"id\":\"a\",\"operation\":\"delete\",\"path\":\"/x\",\"sessionId\":\"S\\u0001\"}",
	     -EINVAL, true},
	    {"{\"id\":\"a\",\"id\":\"b\",\"operation\":\"delete\",\"path\":\"/"
	     "x\",\"sessionId\":\"S\"}",
	     -EINVAL, false},
	    {"{\"id\":\"a\",\"operation\":\"delete\",\"path\":\"/x\\u0000y\",\"sessionId\":\"S\"}",
	     -EINVAL, false},
	    {"{\"id\":[1],\"operation\":\"delete\",\"path\":\"/x\",\"sessionId\":\"S\"}", -EINVAL,
	     false},
	    {"{\"a\":[[[[[[[[[[1]]]]]]]]]],\"operation\":\"delete\",\"path\":\"/"
	     "x\",\"sessionId\":\"S\"}",
	     -ELOOP, false},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		int k = json(bad[i].in, &r, &why);
		ok(k == bad[i].err && why, "refused (%d, want %d, %s): %.70s", k, bad[i].err,
		   why ? why : "no reason", bad[i].in);
		ok(!bad[i].has_id || (r.id && !strcmp(r.id, "a")),
		   "  id kept for the error answer");
		ipc_json_req_done(&r);
	}

	/* Answers are one line of valid JSON, with bytes that are not UTF-8 kept visible. */
	struct strbuf sb = STRBUF_INIT;
	struct ipc_json_resp resp = {.id = "q\n1",
				     .ok = false,
				     .operation = "delete",
				     .path = "/w/\xff",
				     .decision = "deny",
				     .error = "EACCES"};
	ok(ipc_format_json_resp(&sb, &resp) == 0, "format an answer");
	ok(sb.len && sb.buf[sb.len - 1] == '\n' && !memchr(sb.buf, '\n', sb.len - 1), "  one line");
	struct json_value *v = NULL;
	ok(json_parse(sb.buf, sb.len, NULL, &v, NULL) == 0, "  valid JSON: %s", sb.buf);
	is_str(json_get_string(json_object_get(v, "error"), NULL), "EACCES", "  error field");
	is_str(json_get_string(json_object_get(v, "id"), NULL), "q\n1", "  id");
	ok(json_object_get(v, "ok") && json_object_get(v, "normalisedPath") == NULL,
	   "  absent fields left out");
	json_free(v);
	strbuf_free(&sb);
	ok(ipc_line_is_json(" {", 2) && !ipc_line_is_json("com.x", 5) && !ipc_line_is_json("", 0),
	   "protocol detection");
}

int main(void)
{
	tokens();
	jsons();
	return tap_done();
}
