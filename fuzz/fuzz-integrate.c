/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the settings merge of `brokered integrate` (src/integrate.c). The first
 * byte picks the agent; the rest is the agent's settings file. Whatever parses: installing gives a
 * JSON object with every entry of brokered's, installing again changes nothing, and uninstalling
 * leaves none of them.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "basic/json.h"
#include "integrate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const agents[] = {"claude", "codex", "gemini"};
#define SELF "/usr/local/bin/brokered"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const char *agent = agents[data[0] % 3];
	const char *buf = (const char *)data + 1;
	size_t n = size - 1;
	struct strbuf a = STRBUF_INIT, b = STRBUF_INIT, c = STRBUF_INIT;
	struct integrate_result ra, rb, rc;
	char *err = NULL;
	int r = integrate_merge(agent, SELF, true, buf, n, &a, &ra, &err);
	if (r == -EINVAL && !err)
		abort();
	free(err);
	err = NULL;
	if (r < 0 || a.oom)
		goto out;
	struct json_value *v = NULL;
	if (json_parse(a.buf, a.len, NULL, &v, NULL) < 0 || json_type(v) != JSON_OBJECT)
		abort();
	json_free(v);
	/* Installed: every entry found, and a second install writes the same bytes. */
	if (integrate_merge(agent, SELF, true, a.buf, a.len, &b, &rb, &err) < 0)
		abort();
	if (rb.found != (1u << rb.n_entries) - 1 || rb.ours != rb.n_entries)
		abort();
	if (b.len != a.len || memcmp(a.buf, b.buf, a.len) != 0)
		abort();
	/* Uninstalled: none of ours left. */
	if (integrate_merge(agent, SELF, false, a.buf, a.len, &c, &rc, &err) < 0)
		abort();
	strbuf_free(&b);
	if (integrate_merge(agent, SELF, false, c.buf, c.len, &b, &rb, &err) < 0 || rb.ours != 0)
		abort();
out:
	free(err);
	strbuf_free(&a);
	strbuf_free(&b);
	strbuf_free(&c);
	return 0;
}
