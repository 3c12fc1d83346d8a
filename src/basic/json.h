/* SPDX-License-Identifier: MIT */
/*
 * A small DOM JSON parser for untrusted input (IPC requests, settings files). RFC 8259, strict by
 * default, with bounded input size and nesting depth. Never logs: a failure returns -errno and
 * fills struct json_error with the byte offset, line, column and a short static reason.
 *
 * Choices (documented because callers rely on them):
 *  - Duplicate keys in one object are an error ("duplicate key"): two parsers that disagree on
 *    which duplicate wins are a classic way to smuggle a field past a validator.
 *  - Strings are returned as bytes + length and are also NUL-terminated. "\u0000" is refused, so
 *    a string never contains NUL (our strings are paths and names). Lone surrogates are refused.
 *  - Raw bytes inside strings must be valid UTF-8 unless JSON_ALLOW_RAW_BYTES is given: file names
 *    are bytes, and a client may send a non-UTF-8 name verbatim. Note: a "\u00XX" escape always
 *    means the code point U+00XX (two UTF-8 bytes for XX >= 0x80), never the raw byte XX.
 *  - Numbers without fraction or exponent that fit int64_t are JSON_INT; all others JSON_DOUBLE
 *    (finite; overflow to infinity is an error). json_get_int64() also accepts an integral double.
 *  - JSON_ALLOW_COMMENTS / JSON_ALLOW_TRAILING_COMMAS are for hand-written settings files only
 *    ("JSON with comments" as editors write it); the IPC protocol stays strict.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum json_type {
	JSON_NULL,
	JSON_BOOL,
	JSON_INT,
	JSON_DOUBLE,
	JSON_STRING,
	JSON_ARRAY,
	JSON_OBJECT,
};

enum json_flags {
	JSON_ALLOW_COMMENTS = 1u << 0, /* // line and block comments where whitespace may be */
	JSON_ALLOW_TRAILING_COMMAS = 1u << 1, /* [1,2,] and {"a":1,} */
	JSON_ALLOW_RAW_BYTES = 1u << 2,	      /* raw bytes >= 0x80 in strings need not be UTF-8 */
};

#define JSON_DEPTH_DEFAULT 32
#define JSON_DEPTH_MAX	   256 /* hard cap: the parser recurses once per level */
#define JSON_SIZE_DEFAULT  (1024 * 1024)

struct json_limits {
	unsigned max_depth; /* arrays/objects nested deeper are refused; 0: JSON_DEPTH_DEFAULT */
	size_t max_size;    /* longer input is refused; 0: JSON_SIZE_DEFAULT */
	unsigned flags;	    /* enum json_flags */
};

struct json_error {
	size_t offset;	    /* byte offset of the problem */
	unsigned line;	    /* 1-based */
	unsigned column;    /* 1-based, in bytes */
	const char *reason; /* static string, e.g. "unterminated string" */
};

struct json_value;

/*
 * Parse exactly one JSON value (surrounded by optional whitespace) from buf[0..n). buf need not be
 * NUL-terminated. limits may be NULL (defaults, strict). err may be NULL. Returns 0 and *ret, or
 * -EINVAL (syntax, with err filled), -E2BIG (input too large), -ELOOP (too deep), -ERANGE (number
 * out of range), -ENOMEM. *ret is untouched on failure.
 */
int json_parse(const char *buf, size_t n, const struct json_limits *limits, struct json_value **ret,
	       struct json_error *err);
void json_free(struct json_value *v);
static inline void json_freep(struct json_value **v)
{
	json_free(*v);
}
#define _cleanup_json_ __attribute__((cleanup(json_freep)))

enum json_type json_type(const struct json_value *v);
const char *json_type_name(enum json_type t); /* "null", "boolean", "integer", "number", ... */

/* Objects. Members keep document order; lookup is O(log n). NULL when absent or v is no object. */
const struct json_value *json_object_get(const struct json_value *v, const char *key);
const struct json_value *json_object_getn(const struct json_value *v, const char *key, size_t len);
size_t json_object_len(const struct json_value *v);
/* i-th member in document order; *ret_key is NUL-terminated, *ret_key_len may be NULL. */
const struct json_value *json_object_member(const struct json_value *v, size_t i,
					    const char **ret_key, size_t *ret_key_len);

/* Arrays. */
size_t json_array_len(const struct json_value *v);
const struct json_value *json_array_get(const struct json_value *v, size_t i);

/* Typed getters: NULL / -EINVAL when v (which may be NULL) has another type. */
const char *json_get_string(const struct json_value *v, size_t *ret_len);
int json_get_bool(const struct json_value *v, bool *ret);
/* -EINVAL if not a number, -ERANGE if not integral or outside int64_t. */
int json_get_int64(const struct json_value *v, int64_t *ret);
int json_get_double(const struct json_value *v, double *ret);
bool json_is_null(const struct json_value *v);
