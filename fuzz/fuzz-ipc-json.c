/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the JSON request parser and the answer formatter (src/ipc-proto.c). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "basic/json.h"
#include "basic/path-util.h"
#include "ipc-proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ipc_json_req r;
	const char *reason = NULL;
	int k = ipc_parse_json((const char *)data, size, &r, &reason);
	if (k == 0) {
		if (r.command == IPC_CMD_INVALID || !r.session)
			abort();
		if (r.command == IPC_CMD_HOST_FILE_OPERATION && (r.op == IPC_OP_NONE || !r.path))
			abort();
		if (r.path && (r.path[0] != '/' || strlen(r.path) > BROKERED_PATH_MAX))
			abort();
		if ((r.op == IPC_OP_RENAME || r.op == IPC_OP_COPY || r.op == IPC_OP_LINK) && !r.to)
			abort();
		if (r.has_mode && r.mode > 07777)
			abort();
	} else if (!reason) {
		abort();
	}
	/* The answer to whatever came in must itself be one valid JSON line. */
	struct strbuf sb = STRBUF_INIT;
	struct ipc_json_resp resp = {
	    .id = r.id,
	    .ok = k == 0,
	    .operation = ipc_operation_name(r.op),
	    .path = r.path,
	    .normalised_path = r.path,
	    .to = r.to,
	    .error = reason,
	    .decision = "deny",
	};
	if (ipc_format_json_resp(&sb, &resp) == 0) {
		if (!sb.len || sb.buf[sb.len - 1] != '\n' || memchr(sb.buf, '\n', sb.len - 1))
			abort();
		struct json_value *v = NULL;
		if (json_parse(sb.buf, sb.len - 1, NULL, &v, NULL) < 0)
			abort();
		json_free(v);
	}
	strbuf_free(&sb);
	ipc_json_req_done(&r);
	return 0;
}
