/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the text token request parser (src/ipc-proto.c). */
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "basic/path-util.h"
#include "ipc-proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ipc_token_req r;
	const char *reason = NULL;
	int k = ipc_parse_token((const char *)data, size, &r, &reason);
	if (k == 0) {
		/* What the broker relies on when it accepts a request. */
		if (!r.path || r.path[0] != '/' || strlen(r.path) > BROKERED_PATH_MAX ||
		    strchr(r.path, '\t') || strchr(r.path, '\n'))
			abort();
		if (!r.session || !*r.session || !r.tool_call)
			abort();
		if (!r.write &&
		    ((r.flags & O_ACCMODE) != O_RDONLY || (r.flags & (O_CREAT | O_TRUNC))))
			abort();
		if (r.mode > 07777)
			abort();
	} else if (!reason) {
		abort();
	}
	ipc_token_req_done(&r);
	(void)ipc_line_is_json((const char *)data, size);
	return 0;
}
