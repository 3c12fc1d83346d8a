/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the JSON parser. The first byte selects the parser flags. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <stdlib.h>

#include "basic/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Touch every node through the public API, so that the tree is fully read under ASan. */
static size_t walk(const struct json_value *v, unsigned depth)
{
	size_t n = 1, len = 0;
	const char *key, *s;
	int64_t i;
	double d;
	bool b;
	if (depth > JSON_DEPTH_MAX + 1)
		abort();
	switch (json_type(v)) {
	case JSON_OBJECT:
		for (size_t k = 0; k < json_object_len(v); k++) {
			const struct json_value *m = json_object_member(v, k, &key, &len);
			if (strlen(key) != len || json_object_getn(v, key, len) != m)
				abort();
			n += walk(m, depth + 1);
		}
		break;
	case JSON_ARRAY:
		for (size_t k = 0; k < json_array_len(v); k++)
			n += walk(json_array_get(v, k), depth + 1);
		break;
	case JSON_STRING:
		s = json_get_string(v, &len);
		if (!s || strlen(s) != len) /* no NUL inside a string, ever */
			abort();
		break;
	case JSON_INT:
	case JSON_DOUBLE:
		(void)json_get_int64(v, &i);
		(void)json_get_double(v, &d);
		break;
	case JSON_BOOL:
		(void)json_get_bool(v, &b);
		break;
	case JSON_NULL:
		break;
	}
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	struct json_limits l = {.max_depth = 1 + (data[0] >> 3), .flags = data[0] & 7};
	struct json_value *v = NULL;
	struct json_error e = {0};
	int r = json_parse((const char *)data + 1, size - 1, &l, &v, &e);
	if (r >= 0) {
		(void)walk(v, 0);
		json_free(v);
	} else if (!e.reason || e.offset > size - 1 || e.line < 1 || e.column < 1 || v)
		abort();
	return 0;
}
