/* SPDX-License-Identifier: MIT */
/* JSON output helpers. Strings are bytes: invalid UTF-8 is written as \u00XX per byte. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "strbuf.h"

int json_append_string(struct strbuf *sb, const char *s, size_t n);
static inline int json_append_strings(struct strbuf *sb, const char *s)
{
	return s ? json_append_string(sb, s, __builtin_strlen(s)) : strbuf_appends(sb, "null");
}
/* ,"key":"value" (the comma only when sb does not end in '{' or '[') */
int json_kv_str(struct strbuf *sb, const char *key, const char *value);
int json_kv_int(struct strbuf *sb, const char *key, int64_t value);
int json_kv_bool(struct strbuf *sb, const char *key, bool value);
/* ,"key": — then append any value yourself */
int json_key(struct strbuf *sb, const char *key);

struct json_value;
/*
 * A parsed value written back as JSON (member order kept). indent 0: compact; else pretty, with
 * indent spaces per level, as if it stood at nesting level depth. Doubles in the shortest form
 * that reads back exactly.
 */
int json_append_value(struct strbuf *sb, const struct json_value *v, unsigned indent,
		      unsigned depth);
