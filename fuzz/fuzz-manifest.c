/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the store's manifest parser, and format(parse(x)) must parse back the same. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "basic/strbuf.h"
#include "store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct store_record *v, *w;
	size_t n, m, bad;
	if (store_manifest_parse((const char *)data, size, &v, &n, &bad) < 0)
		return 0;
	struct strbuf sb = STRBUF_INIT;
	for (size_t i = 0; i < n; i++)
		if (store_record_format(&v[i], &sb) < 0)
			abort();
	if (store_manifest_parse(sb.buf ? sb.buf : "", sb.len, &w, &m, &bad) < 0)
		abort();
	if (m != n || bad != 0)
		abort();
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i].path, w[i].path) != 0 || v[i].kind != w[i].kind ||
		    (v[i].kind != STORE_KIND_ABSENT &&
		     (v[i].size != w[i].size || strcmp(v[i].hash, w[i].hash) != 0)))
			abort();
	store_records_free(v, n);
	store_records_free(w, m);
	strbuf_free(&sb);
	return 0;
}
