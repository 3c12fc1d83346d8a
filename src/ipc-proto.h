/* SPDX-License-Identifier: MIT */
/*
 * The two socket protocols of DESIGN section 5, as pure functions: a line in, a request struct
 * out (or an error with a short static reason), and the answers formatted back. No I/O, no
 * logging, no policy: ipc.c frames lines and the broker decides. Fuzzed by fuzz/fuzz-ipc-*.c.
 *
 * Text token request (one line, the trailing '\n' already removed):
 *
 *   CLASS \t ABS-PATH \t SESSION-ID \t TOOL-CALL-ID [\t FLAGS \t MODE]
 *
 *   CLASS  com.workbuddy.sandbox.read | com.workbuddy.sandbox.read-write
 *          (brokered.read | brokered.read-write are the same)
 *   FLAGS  "-" (default), a number (decimal, 0x hex or 0 octal: this machine's O_* values), or
 *          names joined by '|' or ',': rdonly wronly rdwr creat excl trunc append nofollow
 *          nonblock sync dsync cloexec. Default: read → rdonly; read-write → rdwr|creat.
 *          A read class with any write/create/truncate flag is refused.
 *   MODE   "-" or octal ≤ 07777, for a created file (the peer's umask applies). Default 0666.
 *
 * JSON request (one object per line, strict RFC 8259, raw non-UTF-8 bytes allowed in strings
 * because file names are bytes, depth ≤ IPC_JSON_DEPTH, unknown fields ignored):
 *
 *   {"id":..,"command":"HostFileOperation","operation":"delete|mkdir|rename|copy|chmod|link|touch",
 *    "path":..,"from":..,"to":..,"sessionId":..,"toolCallId":..,"brokerTraceId":..,
 *    "deleteMode":"trash|unlink","recursive":b,"force":b,"safeDeleteReportPath":..,
 *    "mode":0644|"0644","symbolic":b}
 *   {"command":"EnableModifyBackup","sessionId":..,"message":..,"maxSizeMB":n}
 *   {"command":"ModifyBackup","path":..,"sessionId":..,"toolCallId":..}
 *   {"command":"CommitModifyBackup","sessionId":..,"message":..}
 *
 * "command" may be left out when "operation" is given (HostFileOperation). rename/copy/link take
 * "from" and "to" ("path" is accepted for "from"); the others take "path". Every path must be
 * absolute (but a symbolic link's content, which is kept as written): a client's cwd is not the
 * broker's, and guessing it from /proc/PID/cwd would let a peer's chdir race change what a request
 * means. "id" may be a string or an integer; it is echoed back as a string.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "basic/strbuf.h"

#define IPC_LINE_MAX	(64 * 1024) /* one request line, '\n' excluded */
#define IPC_JSON_DEPTH	8
#define IPC_ID_MAX	256 /* id, sessionId, toolCallId, brokerTraceId */
#define IPC_MESSAGE_MAX 4096
#define IPC_CLASS_READ	"com.workbuddy.sandbox.read"
#define IPC_CLASS_WRITE "com.workbuddy.sandbox.read-write"

/* Which protocol a line speaks: JSON if its first non-blank byte is '{'. */
bool ipc_line_is_json(const char *line, size_t n);

/* ---- text token ---- */

struct ipc_token_req {
	bool write;	       /* read-write class */
	const char *path;      /* absolute, no NUL/TAB/LF */
	const char *session;   /* non-empty */
	const char *tool_call; /* may be empty */
	int flags;	       /* O_* for the open, defaults applied */
	unsigned mode;	       /* for a created file */
	char *buf;	       /* owns the strings above */
};

/*
 * Parse one token line (without '\n'). Returns 0, or -EINVAL (malformed), -ENAMETOOLONG (path or
 * id too long), -E2BIG (line too long), -EPROTO (unknown class); *ret_reason (may be NULL) is a
 * short static text for the log. *ret is zeroed first and must be released with
 * ipc_token_req_done() whatever the result.
 */
int ipc_parse_token(const char *line, size_t n, struct ipc_token_req *ret, const char **ret_reason);
void ipc_token_req_done(struct ipc_token_req *r);

enum ipc_token_answer {
	IPC_TOKEN_FD,	   /* the opened file travels with the line (SCM_RIGHTS) */
	IPC_TOKEN_SANDBOX, /* the sandbox allows it by itself (a write's backup has been taken) */
	IPC_TOKEN_DENY,
};
/* "FD\n", "SANDBOX\n" or "DENY\n". */
const char *ipc_token_answer_line(enum ipc_token_answer a);

/* ---- JSON ---- */

enum ipc_command {
	IPC_CMD_INVALID,
	IPC_CMD_HOST_FILE_OPERATION,
	IPC_CMD_ENABLE_MODIFY_BACKUP,
	IPC_CMD_MODIFY_BACKUP,
	IPC_CMD_COMMIT_MODIFY_BACKUP,
};

enum ipc_operation {
	IPC_OP_NONE,
	IPC_OP_DELETE,
	IPC_OP_MKDIR,
	IPC_OP_RENAME,
	IPC_OP_COPY,
	IPC_OP_CHMOD,
	IPC_OP_LINK,
	IPC_OP_TOUCH,
};
const char *ipc_operation_name(enum ipc_operation op); /* "delete", ...; "" for NONE */
const char *ipc_command_name(enum ipc_command c);

enum ipc_delete_mode {
	IPC_DELETE_DEFAULT, /* not given: the broker's configured mode */
	IPC_DELETE_TRASH,
	IPC_DELETE_UNLINK,
};

struct ipc_json_req {
	enum ipc_command command;
	enum ipc_operation op;
	char *id; /* may be NULL */
	char *session, *tool_call, *trace;
	char *path; /* path, or from */
	char *to;
	char *report_path; /* safeDeleteReportPath */
	char *message;
	enum ipc_delete_mode delete_mode;
	bool recursive, force, symbolic;
	bool has_mode;
	unsigned mode;
	bool has_max_size_mb;
	int64_t max_size_mb;
};

/*
 * Parse one JSON line. Returns 0 or -errno with *ret_reason set; on failure the fields that could
 * be read (id in particular, so the error answer can carry it) are filled. Always release *ret
 * with ipc_json_req_done().
 */
int ipc_parse_json(const char *line, size_t n, struct ipc_json_req *ret, const char **ret_reason);
void ipc_json_req_done(struct ipc_json_req *r);

struct ipc_json_resp {
	const char *id;
	bool ok;
	const char *operation; /* operation or command name */
	const char *path, *normalised_path;
	const char *decision; /* grant-token, host-op, sandbox, deny; NULL: left out */
	const char *to, *normalised_to;
	const char *error;  /* when !ok */
	const char *turn;   /* Enable/CommitModifyBackup: the turn id */
	const char *backup; /* ModifyBackup and host ops: what the store did */
};
/* One JSON object and '\n'. */
int ipc_format_json_resp(struct strbuf *sb, const struct ipc_json_resp *r);
