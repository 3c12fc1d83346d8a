/* SPDX-License-Identifier: MIT */
#include "ipc-proto.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/json-write.h"
#include "basic/json.h"
#include "basic/macro.h"
#include "basic/string-table.h"
#include "basic/parse-util.h"
#include "basic/path-util.h"

bool ipc_line_is_json(const char *line, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')
			continue;
		return line[i] == '{';
	}
	return false;
}

/* ---- text token ---- */

void ipc_token_req_done(struct ipc_token_req *r)
{
	free(r->buf);
	*r = (struct ipc_token_req){0};
}

static int fail(const char **ret_reason, const char *reason, int err)
{
	if (ret_reason)
		*ret_reason = reason;
	return err;
}

/* Session, tool call and trace ids: bounded, no control bytes (they go to the audit log). */
static bool id_ok(const char *s, size_t n)
{
	if (n > IPC_ID_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return false;
	return true;
}

static const struct {
	const char *name;
	int flag;
} open_flag_names[] = {
    {"rdonly", O_RDONLY},     {"wronly", O_WRONLY}, {"rdwr", O_RDWR},	  {"creat", O_CREAT},
    {"excl", O_EXCL},	      {"trunc", O_TRUNC},   {"append", O_APPEND}, {"nofollow", O_NOFOLLOW},
    {"nonblock", O_NONBLOCK}, {"sync", O_SYNC},	    {"dsync", O_DSYNC},	  {"cloexec", O_CLOEXEC},
};

#define TOKEN_FLAGS_ALLOWED                                                                        \
	(O_ACCMODE | O_CREAT | O_EXCL | O_TRUNC | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_SYNC |    \
	 O_DSYNC | O_CLOEXEC)

static int parse_open_flags(const char *s, int *ret)
{
	if ((s[0] >= '0' && s[0] <= '9')) {
		uint64_t v;
		if (parse_u64(s, 0, &v) < 0 || v > INT32_MAX)
			return -EINVAL;
		if ((v & ~(uint64_t)TOKEN_FLAGS_ALLOWED) || (v & O_ACCMODE) == O_ACCMODE)
			return -EINVAL;
		*ret = (int)v;
		return 0;
	}
	int flags = 0, acc = -1;
	const char *p = s;
	while (*p) {
		size_t len = strcspn(p, "|,");
		bool found = false;
		for (size_t i = 0; i < ELEMENTSOF(open_flag_names); i++) {
			if (strlen(open_flag_names[i].name) == len &&
			    memcmp(open_flag_names[i].name, p, len) == 0) {
				int f = open_flag_names[i].flag;
				if (i < 3) {
					if (acc >= 0 && acc != f)
						return -EINVAL;
					acc = f;
				} else {
					flags |= f;
				}
				found = true;
				break;
			}
		}
		if (!found)
			return -EINVAL;
		p += len;
		if (*p) {
			p++;
			if (!*p)
				return -EINVAL; /* trailing separator */
		}
	}
	*ret = flags | (acc < 0 ? O_RDONLY : acc);
	return 0;
}

int ipc_parse_token(const char *line, size_t n, struct ipc_token_req *ret, const char **ret_reason)
{
	*ret = (struct ipc_token_req){0};
	if (n > IPC_LINE_MAX)
		return fail(ret_reason, "line too long", -E2BIG);
	if (n && line[n - 1] == '\r')
		n--;
	if (memchr(line, '\0', n))
		return fail(ret_reason, "NUL byte in request", -EINVAL);
	char *buf = malloc(n + 1);
	if (!buf)
		return fail(ret_reason, "out of memory", -ENOMEM);
	memcpy(buf, line, n);
	buf[n] = '\0';
	ret->buf = buf;

	char *field[7];
	size_t nf = 0;
	for (char *p = buf;;) {
		if (nf == ELEMENTSOF(field))
			return fail(ret_reason, "too many fields", -EINVAL);
		field[nf++] = p;
		char *tab = strchr(p, '\t');
		if (!tab)
			break;
		*tab = '\0';
		p = tab + 1;
	}
	if (nf != 4 && nf != 6)
		return fail(ret_reason, "expected 4 or 6 tab-separated fields", -EINVAL);

	if (!strcmp(field[0], IPC_CLASS_READ) || !strcmp(field[0], "brokered.read"))
		ret->write = false;
	else if (!strcmp(field[0], IPC_CLASS_WRITE) || !strcmp(field[0], "brokered.read-write"))
		ret->write = true;
	else
		return fail(ret_reason, "unknown extension class", -EPROTO);

	size_t plen = strlen(field[1]);
	if (plen == 0 || field[1][0] != '/')
		return fail(ret_reason, "path must be absolute", -EINVAL);
	if (plen > BROKERED_PATH_MAX)
		return fail(ret_reason, "path too long", -ENAMETOOLONG);
	if (strchr(field[1], '\n'))
		return fail(ret_reason, "newline in path", -EINVAL);
	size_t slen = strlen(field[2]), tlen = strlen(field[3]);
	if (slen == 0)
		return fail(ret_reason, "empty session id", -EINVAL);
	if (!id_ok(field[2], slen) || !id_ok(field[3], tlen))
		return fail(ret_reason, "bad session or tool call id", -ENAMETOOLONG);
	ret->path = field[1];
	ret->session = field[2];
	ret->tool_call = field[3];

	ret->flags = ret->write ? O_RDWR | O_CREAT : O_RDONLY;
	ret->mode = 0666;
	if (nf == 6) {
		if (strcmp(field[4], "-") && field[4][0]) {
			int f;
			if (parse_open_flags(field[4], &f) < 0)
				return fail(ret_reason, "bad open flags", -EINVAL);
			ret->flags = f;
		}
		if (strcmp(field[5], "-") && field[5][0]) {
			unsigned m;
			if (parse_mode(field[5], &m) < 0)
				return fail(ret_reason, "bad mode", -EINVAL);
			ret->mode = m;
		}
	}
	if (!ret->write &&
	    ((ret->flags & O_ACCMODE) != O_RDONLY || (ret->flags & (O_CREAT | O_TRUNC | O_APPEND))))
		return fail(ret_reason, "write flags on a read request", -EINVAL);
	if (ret->write && (ret->flags & O_ACCMODE) == O_RDONLY &&
	    !(ret->flags & (O_CREAT | O_TRUNC)))
		ret->flags = (ret->flags & ~O_ACCMODE) | O_RDWR; /* read-write means writable */
	return 0;
}

const char *ipc_token_answer_line(enum ipc_token_answer a)
{
	switch (a) {
	case IPC_TOKEN_FD:
		return "FD\n";
	case IPC_TOKEN_SANDBOX:
		return "SANDBOX\n";
	case IPC_TOKEN_DENY:
	default:
		return "DENY\n";
	}
}

/* ---- JSON ---- */

static const char *const ipc_operation_table[] = {
    [IPC_OP_DELETE] = "delete", [IPC_OP_MKDIR] = "mkdir", [IPC_OP_RENAME] = "rename",
    [IPC_OP_COPY] = "copy",	[IPC_OP_CHMOD] = "chmod", [IPC_OP_LINK] = "link",
    [IPC_OP_TOUCH] = "touch",
};
DEFINE_PRIVATE_STRING_TABLE_LOOKUP_TO_STRING(ipc_operation, enum ipc_operation);

const char *ipc_operation_name(enum ipc_operation op)
{
	return ipc_operation_to_string(op) ?: "";
}

static const char *const ipc_command_table[] = {
    [IPC_CMD_HOST_FILE_OPERATION] = "HostFileOperation",
    [IPC_CMD_ENABLE_MODIFY_BACKUP] = "EnableModifyBackup",
    [IPC_CMD_MODIFY_BACKUP] = "ModifyBackup",
    [IPC_CMD_COMMIT_MODIFY_BACKUP] = "CommitModifyBackup",
};
DEFINE_PRIVATE_STRING_TABLE_LOOKUP_TO_STRING(ipc_command, enum ipc_command);

const char *ipc_command_name(enum ipc_command c)
{
	return ipc_command_to_string(c) ?: "";
}

/* The entry named s in a table whose entry 0 has no name: its index, or 0 (none). */
#define LOOKUP_OR_ZERO(table, s)                                                                   \
	MAX(string_table_lookup_from_string(table, ELEMENTSOF(table), s), (ssize_t)0)

void ipc_json_req_done(struct ipc_json_req *r)
{
	free(r->id);
	free(r->session);
	free(r->tool_call);
	free(r->trace);
	free(r->path);
	free(r->to);
	free(r->report_path);
	free(r->message);
	*r = (struct ipc_json_req){0};
}

/* A string member: absent → 0 and *ret untouched; wrong type → -EINVAL. */
static int get_str(const struct json_value *o, const char *key, size_t max, char **ret)
{
	const struct json_value *v = json_object_get(o, key);
	if (!v || json_is_null(v))
		return 0;
	size_t len;
	const char *s = json_get_string(v, &len);
	if (!s)
		return -EINVAL;
	if (len > max)
		return -ENAMETOOLONG;
	char *c = strdup(s);
	if (!c)
		return -ENOMEM;
	free(*ret);
	*ret = c;
	return 1;
}

static int get_bool(const struct json_value *o, const char *key, bool *ret)
{
	const struct json_value *v = json_object_get(o, key);
	if (!v || json_is_null(v))
		return 0;
	return json_get_bool(v, ret) < 0 ? -EINVAL : 1;
}

static int get_path(const struct json_value *o, const char *key, char **ret)
{
	int r = get_str(o, key, BROKERED_PATH_MAX, ret);
	if (r <= 0)
		return r;
	if ((*ret)[0] != '/')
		return -EINVAL;
	return 1;
}

static int get_target(const struct json_value *o, const char *key, char **ret)
{
	int r = get_str(o, key, BROKERED_PATH_MAX, ret);
	if (r <= 0)
		return r;
	return (*ret)[0] ? 1 : -EINVAL;
}

/* The id first, so that even a refused request is answered with it. */
static int json_req_id(const struct json_value *v, struct ipc_json_req *ret,
		       const char **ret_reason)
{
	const struct json_value *idv = json_object_get(v, "id");
	if (idv && json_type(idv) == JSON_STRING) {
		size_t len;
		const char *s = json_get_string(idv, &len);
		if (len <= IPC_ID_MAX && id_ok(s, len) && !(ret->id = strdup(s)))
			return fail(ret_reason, "out of memory", -ENOMEM);
	} else if (idv && json_type(idv) == JSON_INT) {
		int64_t i;
		char num[32];
		if (json_get_int64(idv, &i) >= 0) {
			snprintf(num, sizeof num, "%lld", (long long)i);
			if (!(ret->id = strdup(num)))
				return fail(ret_reason, "out of memory", -ENOMEM);
		}
	}
	if (idv && !json_is_null(idv) && !ret->id)
		return fail(ret_reason, "bad id", -EINVAL);
	return 0;
}

/* The command, and the operation of a HostFileOperation. */
static int json_req_command(const struct json_value *v, struct ipc_json_req *ret,
			    const char **ret_reason)
{
	_cleanup_free_ char *cmd = NULL, *op = NULL;
	if (get_str(v, "command", 64, &cmd) < 0 || get_str(v, "operation", 64, &op) < 0)
		return fail(ret_reason, "command and operation must be short strings", -EINVAL);
	if (!cmd && op)
		ret->command = IPC_CMD_HOST_FILE_OPERATION;
	else if (!cmd)
		return fail(ret_reason, "missing command", -EINVAL);
	else
		ret->command = (enum ipc_command)LOOKUP_OR_ZERO(ipc_command_table, cmd);
	if (ret->command == IPC_CMD_INVALID)
		return fail(ret_reason, "unknown command", -EPROTO);

	if (ret->command == IPC_CMD_HOST_FILE_OPERATION) {
		if (!op)
			return fail(ret_reason, "missing operation", -EINVAL);
		ret->op = (enum ipc_operation)LOOKUP_OR_ZERO(ipc_operation_table, op);
		if (ret->op == IPC_OP_NONE)
			return fail(ret_reason, "unknown operation", -EPROTO);
	}
	return 0;
}

/* The session, tool call and trace ids. */
static int json_req_ids(const struct json_value *v, struct ipc_json_req *ret,
			const char **ret_reason)
{
	int r;
	if ((r = get_str(v, "sessionId", IPC_ID_MAX, &ret->session)) < 0 ||
	    (r = get_str(v, "toolCallId", IPC_ID_MAX, &ret->tool_call)) < 0 ||
	    (r = get_str(v, "brokerTraceId", IPC_ID_MAX, &ret->trace)) < 0)
		return fail(ret_reason,
			    "sessionId, toolCallId and brokerTraceId must be short strings", r);
	if ((ret->session && !id_ok(ret->session, strlen(ret->session))) ||
	    (ret->tool_call && !id_ok(ret->tool_call, strlen(ret->tool_call))) ||
	    (ret->trace && !id_ok(ret->trace, strlen(ret->trace))))
		return fail(ret_reason, "control bytes in an id", -EINVAL);
	if (!ret->session || !*ret->session)
		return fail(ret_reason, "missing sessionId", -EINVAL);
	return 0;
}

/* The message and the boolean options. */
static int json_req_options(const struct json_value *v, struct ipc_json_req *ret,
			    const char **ret_reason)
{
	int r;
	/* "commitMsg" is the reference's name for CommitModifyBackup's message. */
	if ((r = get_str(v, "message", IPC_MESSAGE_MAX, &ret->message)) < 0 ||
	    (!ret->message && (r = get_str(v, "commitMsg", IPC_MESSAGE_MAX, &ret->message)) < 0))
		return fail(ret_reason, "message must be a string of at most 4096 bytes", r);

	if (get_bool(v, "recursive", &ret->recursive) < 0 ||
	    get_bool(v, "force", &ret->force) < 0 || get_bool(v, "symbolic", &ret->symbolic) < 0)
		return fail(ret_reason, "recursive, force and symbolic must be booleans", -EINVAL);
	return 0;
}

/* The operands: from and to, or one path. */
static int json_req_paths(const struct json_value *v, struct ipc_json_req *ret,
			  const char **ret_reason)
{
	int r;
	bool two = ret->op == IPC_OP_RENAME || ret->op == IPC_OP_COPY || ret->op == IPC_OP_LINK;
	if (two) {
		/* A symbolic link's content is any non-empty string ("../x" included). */
		int (*from)(const struct json_value *, const char *, char **) =
		    ret->op == IPC_OP_LINK && ret->symbolic ? get_target : get_path;
		if ((r = from(v, "from", &ret->path)) < 0)
			return fail(ret_reason, "from must be an absolute path", r);
		if (r == 0 && (r = from(v, "path", &ret->path)) < 0)
			return fail(ret_reason, "path must be an absolute path", r);
		if ((r = get_path(v, "to", &ret->to)) < 0)
			return fail(ret_reason, "to must be an absolute path", r);
		if (!ret->path || !ret->to)
			return fail(ret_reason, "from and to are required", -EINVAL);
	} else if (ret->command == IPC_CMD_HOST_FILE_OPERATION ||
		   ret->command == IPC_CMD_MODIFY_BACKUP) {
		if ((r = get_path(v, "path", &ret->path)) < 0)
			return fail(ret_reason, "path must be an absolute path", r);
		/* "targetPath" is the reference's name for ModifyBackup's file. */
		if (r == 0 && ret->command == IPC_CMD_MODIFY_BACKUP &&
		    (r = get_path(v, "targetPath", &ret->path)) < 0)
			return fail(ret_reason, "targetPath must be an absolute path", r);
		if (!ret->path)
			return fail(ret_reason, "path is required", -EINVAL);
	}
	return 0;
}

/* How to delete, and where to write the safe-delete report. */
static int json_req_delete(const struct json_value *v, struct ipc_json_req *ret,
			   const char **ret_reason)
{
	_cleanup_free_ char *dm = NULL;
	int r;
	if (get_str(v, "deleteMode", 16, &dm) < 0)
		return fail(ret_reason, "deleteMode must be \"trash\" or \"unlink\"", -EINVAL);
	if (dm) {
		if (!strcmp(dm, "trash"))
			ret->delete_mode = IPC_DELETE_TRASH;
		else if (!strcmp(dm, "unlink"))
			ret->delete_mode = IPC_DELETE_UNLINK;
		else
			return fail(ret_reason, "deleteMode must be \"trash\" or \"unlink\"",
				    -EINVAL);
	}
	if ((r = get_path(v, "safeDeleteReportPath", &ret->report_path)) < 0)
		return fail(ret_reason, "safeDeleteReportPath must be an absolute path", r);
	return 0;
}

/* The mode, octal in a string or a number. */
static int json_req_mode(const struct json_value *v, struct ipc_json_req *ret,
			 const char **ret_reason)
{
	const struct json_value *mv = json_object_get(v, "mode");
	if (mv && !json_is_null(mv)) {
		int64_t m;
		unsigned um;
		size_t len;
		const char *s = json_get_string(mv, &len);
		if (s) {
			if (parse_mode(s, &um) < 0)
				return fail(ret_reason, "mode must be octal, at most 07777",
					    -EINVAL);
			m = um;
		} else if (json_get_int64(mv, &m) < 0 || m < 0 || m > 07777) {
			return fail(ret_reason, "mode must be octal, at most 07777", -EINVAL);
		}
		ret->has_mode = true;
		ret->mode = (unsigned)m;
	}
	if (ret->op == IPC_OP_CHMOD && !ret->has_mode)
		return fail(ret_reason, "chmod needs a mode", -EINVAL);
	return 0;
}

/* The backup size limit of EnableModifyBackup. */
static int json_req_max_size(const struct json_value *v, struct ipc_json_req *ret,
			     const char **ret_reason)
{
	const struct json_value *sz = json_object_get(v, "maxSizeMB");
	if (!sz) /* the reference's EnableModifyBackup field */
		sz = json_object_get(v, "fileBackupMaxSizeMB");
	if (sz && !json_is_null(sz)) {
		if (json_get_int64(sz, &ret->max_size_mb) < 0)
			return fail(ret_reason, "maxSizeMB must be an integer", -EINVAL);
		ret->has_max_size_mb = true;
	}
	return 0;
}

int ipc_parse_json(const char *line, size_t n, struct ipc_json_req *ret, const char **ret_reason)
{
	*ret = (struct ipc_json_req){0};
	if (n > IPC_LINE_MAX)
		return fail(ret_reason, "line too long", -E2BIG);
	struct json_limits lim = {
	    .max_depth = IPC_JSON_DEPTH,
	    .max_size = IPC_LINE_MAX,
	    .flags = JSON_ALLOW_RAW_BYTES,
	};
	_cleanup_json_ struct json_value *v = NULL;
	struct json_error jerr = {0};
	int r = json_parse(line, n, &lim, &v, &jerr);
	if (r == -ELOOP)
		return fail(ret_reason, "JSON nested too deeply", r);
	if (r < 0)
		return fail(ret_reason, jerr.reason ? jerr.reason : "malformed JSON",
			    r == -ENOMEM ? r : -EINVAL);
	if (json_type(v) != JSON_OBJECT)
		return fail(ret_reason, "request is not a JSON object", -EINVAL);
	static int (*const steps[])(const struct json_value *, struct ipc_json_req *,
				    const char **) = {
	    json_req_id,    json_req_command, json_req_ids,  json_req_options,
	    json_req_paths, json_req_delete,  json_req_mode, json_req_max_size,
	};
	for (size_t i = 0; i < ELEMENTSOF(steps); i++)
		if ((r = steps[i](v, ret, ret_reason)) < 0)
			return r;
	return 0;
}

int ipc_format_json_resp(struct strbuf *sb, const struct ipc_json_resp *r)
{
	strbuf_appendc(sb, '{');
	if (r->id)
		json_kv_str(sb, "id", r->id);
	json_kv_bool(sb, "ok", r->ok);
	if (r->operation && *r->operation)
		json_kv_str(sb, "operation", r->operation);
	if (r->path)
		json_kv_str(sb, "path", r->path);
	if (r->normalised_path)
		json_kv_str(sb, "normalisedPath", r->normalised_path);
	if (r->decision)
		json_kv_str(sb, "decision", r->decision);
	if (r->to)
		json_kv_str(sb, "to", r->to);
	if (r->normalised_to)
		json_kv_str(sb, "normalisedTo", r->normalised_to);
	if (r->turn)
		json_kv_str(sb, "turn", r->turn);
	if (r->backup)
		json_kv_str(sb, "backup", r->backup);
	if (!r->ok)
		json_kv_str(sb, "error", r->error ? r->error : "failed");
	strbuf_appends(sb, "}\n");
	return sb->oom ? -ENOMEM : 0;
}
