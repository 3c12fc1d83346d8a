/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/json.h"
#include "basic/macro.h"
#include "basic/strbuf.h"

/* tap.h's is_int()/is_str() nest ok(), whose local shadows theirs. */
#pragma GCC diagnostic ignored "-Wshadow"
#include "tap.h"

struct syntax_case {
	const char *in;
	unsigned flags;
	int r;		    /* expected return */
	const char *reason; /* expected reason when r < 0 */
	unsigned line, col; /* expected position when r < 0 (0: do not check) */
};

static const struct syntax_case syntax_cases[] = {
    {"null", 0, 0, NULL, 0, 0},
    {" \t\r\n true \n", 0, 0, NULL, 0, 0},
    {"[1, -2, 3.5, 1e3, -0, 0.0e-0]", 0, 0, NULL, 0, 0},
    {"{\"a\":{\"b\":[{}, []]}}", 0, 0, NULL, 0, 0},
    {"\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"", 0, 0, NULL, 0, 0},
    {"", 0, -EINVAL, "unexpected end of input", 1, 1},
    {"   ", 0, -EINVAL, "unexpected end of input", 1, 4},
    {"[1,]", 0, -EINVAL, "trailing comma", 1, 4},
    {"{\"a\":1,}", 0, -EINVAL, "trailing comma", 1, 8},
    {"[1,]", JSON_ALLOW_TRAILING_COMMAS, 0, NULL, 0, 0},
    {"{\"a\":1,}", JSON_ALLOW_TRAILING_COMMAS, 0, NULL, 0, 0},
    {"[,]", JSON_ALLOW_TRAILING_COMMAS, -EINVAL, "unexpected character", 1, 2},
    {"[1,,2]", JSON_ALLOW_TRAILING_COMMAS, -EINVAL, "unexpected character", 1, 4},
    {"// c\n{\"a\":1 /* x */}", 0, -EINVAL, "unexpected character", 1, 1},
    {"// c\n{\"a\":1 /* x */}", JSON_ALLOW_COMMENTS, 0, NULL, 0, 0},
    {"{\"a\":1 /* x ", JSON_ALLOW_COMMENTS, -EINVAL, "unterminated comment", 1, 8},
    {"1 // end", JSON_ALLOW_COMMENTS, 0, NULL, 0, 0},
    {"{\"a\":1\n,\"a\":2}", 0, -EINVAL, "duplicate key", 2, 2},
    {"{\"a\":1,\"b\":2,\"c\":{\"a\":1}}", 0, 0, NULL, 0, 0},
    {"{\"a\" 1}", 0, -EINVAL, "':' expected", 1, 6},
    {"{1:2}", 0, -EINVAL, "string key expected", 1, 2},
    {"[1 2]", 0, -EINVAL, "',' or ']' expected", 1, 4},
    {"{\"a\":1 \"b\":2}", 0, -EINVAL, "',' or '}' expected", 1, 8},
    {"[1] x", 0, -EINVAL, "trailing data after JSON value", 1, 5},
    {"\"abc", 0, -EINVAL, "unterminated string", 1, 1},
    {"\"a\nb\"", 0, -EINVAL, "control character in string", 1, 3},
    {"\"\\x\"", 0, -EINVAL, "invalid escape", 1, 2},
    {"\"\\u12zz\"", 0, -EINVAL, "invalid \\u escape", 1, 6},
    {"\"\\u12", 0, -EINVAL, "truncated \\u escape", 1, 4},
    {"\"\\u0000\"", 0, -EINVAL, "\\u0000 not allowed in strings", 1, 2},
    {"\"\\ud800\"", 0, -EINVAL, "lone high surrogate", 1, 2},
    {"\"\\ud800\\u0041\"", 0, -EINVAL, "lone high surrogate", 1, 2},
    {"\"\\udc00\"", 0, -EINVAL, "lone low surrogate", 1, 2},
    {"\"\\ud83d\\ude00\"", 0, 0, NULL, 0, 0},
    {"\"\xc3\xa9\"", 0, 0, NULL, 0, 0},
    {"\"\xff\"", 0, -EINVAL, "invalid UTF-8 in string", 1, 2},
    {"\"\xc0\xaf\"", 0, -EINVAL, "invalid UTF-8 in string", 1, 2},     /* overlong '/' */
    {"\"\xed\xa0\x80\"", 0, -EINVAL, "invalid UTF-8 in string", 1, 2}, /* raw surrogate */
    {"\"\xff\xfe\"", JSON_ALLOW_RAW_BYTES, 0, NULL, 0, 0},
    {"01", 0, -EINVAL, "leading zero in number", 1, 2},
    {"-", 0, -EINVAL, "invalid number", 1, 2},
    {"+1", 0, -EINVAL, "unexpected character", 1, 1},
    {"1.", 0, -EINVAL, "digit expected after '.'", 1, 3},
    {".5", 0, -EINVAL, "unexpected character", 1, 1},
    {"1e", 0, -EINVAL, "digit expected in exponent", 1, 3},
    {"1e400", 0, -ERANGE, "number out of range", 1, 1},
    {"NaN", 0, -EINVAL, "unexpected character", 1, 1},
    {"-Infinity", 0, -EINVAL, "invalid number", 1, 2},
    {"tru", 0, -EINVAL, "unexpected character", 1, 1},
    {"nulll", 0, -EINVAL, "trailing data after JSON value", 1, 5},
    {"\xef\xbb\xbf{}", 0, -EINVAL, "unexpected character", 1, 1}, /* no BOM (RFC 8259 8.1) */
};

static void test_syntax_table(void)
{
	for (size_t i = 0; i < ELEMENTSOF(syntax_cases); i++) {
		const struct syntax_case *c = &syntax_cases[i];
		struct json_limits l = {.flags = c->flags};
		struct json_error e = {0};
		struct json_value *v = NULL;
		int r = json_parse(c->in, strlen(c->in), &l, &v, &e);
		is_int(r, c->r, "syntax[%zu] return", i);
		if (c->r == 0) {
			ok(v != NULL, "syntax[%zu] value", i);
		} else {
			ok(v == NULL, "syntax[%zu] no value on error", i);
			is_str(e.reason, c->reason, "syntax[%zu] reason", i);
			if (c->line) {
				is_int(e.line, c->line, "syntax[%zu] line", i);
				is_int(e.column, c->col, "syntax[%zu] column", i);
			}
		}
		json_free(v);
	}
}

static struct json_value *parse_ok(const char *s)
{
	struct json_value *v = NULL;
	struct json_error e = {0};
	int r = json_parse(s, strlen(s), NULL, &v, &e);
	if (r < 0)
		printf("# parse failed: %s at %u:%u\n", e.reason, e.line, e.column);
	return v;
}

static void test_numbers(void)
{
	static const struct {
		const char *in;
		enum json_type type;
		int64_t i;
		int get_int_r;
	} cases[] = {
	    {"0", JSON_INT, 0, 0},
	    {"-0", JSON_INT, 0, 0},
	    {"9223372036854775807", JSON_INT, INT64_MAX, 0},
	    {"-9223372036854775808", JSON_INT, INT64_MIN, 0},
	    {"9223372036854775808", JSON_DOUBLE, 0, -ERANGE},
	    {"-9223372036854775809", JSON_DOUBLE, 0, 0}, /* rounds to -2^63 exactly */
	    {"10.0", JSON_DOUBLE, 10, 0},
	    {"1e3", JSON_DOUBLE, 1000, 0},
	    {"2.5", JSON_DOUBLE, 0, -ERANGE},
	    {"1e300", JSON_DOUBLE, 0, -ERANGE},
	};
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		_cleanup_json_ struct json_value *v = parse_ok(cases[i].in);
		is_int(json_type(v), cases[i].type, "number %s type", cases[i].in);
		int64_t x = 0;
		int r = json_get_int64(v, &x);
		is_int(r, cases[i].get_int_r, "number %s get_int64", cases[i].in);
		if (r == 0 && strcmp(cases[i].in, "-9223372036854775809") != 0)
			is_int(x, cases[i].i, "number %s value", cases[i].in);
	}
	_cleanup_json_ struct json_value *d = parse_ok("0.25");
	double f = 0;
	ok(json_get_double(d, &f) == 0 && f == 0.25, "double 0.25");
	ok(json_get_int64(NULL, &(int64_t){0}) == -EINVAL, "get_int64(NULL)");
}

static void test_strings(void)
{
	_cleanup_json_ struct json_value *v =
	    parse_ok("[\"a\\u00e9\\ud83d\\ude00\\n\", \"/tmp/x y\", \"\"]");
	size_t n = 99;
	const char *s = json_get_string(json_array_get(v, 0), &n);
	ok(s && n == 8 && memcmp(s, "a\xc3\xa9\xf0\x9f\x98\x80\n", 8) == 0,
	   "escapes decode to UTF-8");
	s = json_get_string(json_array_get(v, 1), &n);
	ok(s && n == 8 && strcmp(s, "/tmp/x y") == 0, "plain string");
	s = json_get_string(json_array_get(v, 2), &n);
	ok(s && n == 0 && s[0] == '\0', "empty string");
	ok(json_get_string(json_array_get(v, 3), &n) == NULL, "index out of range");
	ok(json_get_string(v, &n) == NULL, "array is no string");

	struct json_limits raw = {.flags = JSON_ALLOW_RAW_BYTES};
	struct json_value *r = NULL;
	ok(json_parse("\"a\xff\"", 4, &raw, &r, NULL) == 0, "raw bytes allowed");
	s = json_get_string(r, &n);
	ok(s && n == 2 && (unsigned char)s[1] == 0xff, "raw byte kept verbatim");
	json_free(r);

	/* an embedded NUL in the input is a control character, not an early end */
	const char nul[] = "\"a\0b\"";
	r = NULL;
	struct json_error e = {0};
	ok(json_parse(nul, sizeof(nul) - 1, NULL, &r, &e) == -EINVAL && r == NULL,
	   "raw NUL refused");
	is_str(e.reason, "control character in string", "raw NUL reason");
}

static void test_objects(void)
{
	_cleanup_json_ struct json_value *v =
	    parse_ok("{\"z\":1,\"a\":true,\"m\":null,\"ab\":\"s\",\"a.b\":[1,2]}");
	bool b = false;
	int64_t i = 0;
	ok(json_object_len(v) == 5, "object length");
	ok(json_get_bool(json_object_get(v, "a"), &b) == 0 && b, "get bool");
	ok(json_get_int64(json_object_get(v, "z"), &i) == 0 && i == 1, "get int");
	ok(json_is_null(json_object_get(v, "m")), "get null");
	ok(json_object_get(v, "missing") == NULL, "missing key");
	ok(json_object_getn(v, "abc", 2) != NULL, "getn with length");
	ok(json_array_len(json_object_get(v, "a.b")) == 2, "dotted key is just a key");
	ok(json_get_bool(json_object_get(v, "z"), &b) == -EINVAL, "wrong type is -EINVAL");
	const char *k = NULL;
	size_t kl = 0;
	ok(json_object_member(v, 0, &k, &kl) && strcmp(k, "z") == 0 && kl == 1,
	   "members keep document order (first)");
	ok(json_object_member(v, 4, &k, NULL) && strcmp(k, "a.b") == 0,
	   "members keep document order (last)");
	ok(json_object_member(v, 5, &k, NULL) == NULL, "member out of range");
	ok(json_object_get(NULL, "a") == NULL && json_object_len(NULL) == 0, "NULL object");
	is_str(json_type_name(json_type(v)), "object", "type name");
}

static char *repeat(const char *open, const char *close, unsigned n)
{
	size_t lo = strlen(open), lc = strlen(close);
	char *s = malloc(n * (lo + lc) + 1), *p = s;
	for (unsigned i = 0; i < n; i++, p += lo)
		memcpy(p, open, lo);
	for (unsigned i = 0; i < n; i++, p += lc)
		memcpy(p, close, lc);
	*p = '\0';
	return s;
}

static void test_limits(void)
{
	struct json_limits l = {.max_depth = 4};
	struct json_error e = {0};
	struct json_value *v = NULL;
	_cleanup_free_ char *d4 = repeat("[", "]", 4), *d5 = repeat("{\"a\":", "}", 5);
	ok(json_parse(d4, strlen(d4), &l, &v, &e) == 0, "depth 4 of 4");
	json_free(v);
	v = NULL;
	is_int(json_parse(d5, strlen(d5), &l, &v, &e), -ELOOP, "depth 5 of 4");
	is_str(e.reason, "nesting too deep", "depth reason");
	is_int(e.column, 21, "depth column");

	_cleanup_free_ char *deep = repeat("[", "]", 100000);
	is_int(json_parse(deep, strlen(deep), NULL, &v, &e), -ELOOP, "100000 levels refused");
	l = (struct json_limits){.max_depth = 100000};
	is_int(json_parse(deep, strlen(deep), &l, &v, &e), -ELOOP, "depth is capped");

	l = (struct json_limits){.max_size = 8};
	is_int(json_parse("[1,2,3,4]", 9, &l, &v, &e), -E2BIG, "size limit");
	is_str(e.reason, "input too large", "size reason");
	ok(json_parse("[1,2,34]", 8, &l, &v, &e) == 0, "at size limit");
	json_free(v);
}

static void test_big_object(void)
{
	/* many keys: duplicate detection must not be quadratic, and must still work */
	struct strbuf sb = STRBUF_INIT;
	strbuf_appendc(&sb, '{');
	for (int i = 0; i < 50000; i++)
		strbuf_printf(&sb, "%s\"k%d\":%d", i ? "," : "", i, i);
	strbuf_appendc(&sb, '}');
	struct json_value *v = NULL;
	ok(json_parse(sb.buf, sb.len, NULL, &v, NULL) == 0, "50000 keys");
	int64_t x = 0;
	ok(json_get_int64(json_object_get(v, "k31337"), &x) == 0 && x == 31337,
	   "lookup in big object");
	json_free(v);
	v = NULL;
	sb.len--;
	strbuf_appends(&sb, ",\"k49999\":0}");
	struct json_error e = {0};
	ok(json_parse(sb.buf, sb.len, NULL, &v, &e) == -EINVAL, "duplicate in big object");
	is_str(e.reason, "duplicate key", "duplicate reason");
	strbuf_free(&sb);
}

int main(void)
{
	test_syntax_table();
	test_numbers();
	test_strings();
	test_objects();
	test_limits();
	test_big_object();
	return tap_done();
}
