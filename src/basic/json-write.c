/* SPDX-License-Identifier: MIT */
#include "json-write.h"
#include "json.h"
#include "utf8.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int json_append_string(struct strbuf *sb, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *u = (const unsigned char *)s;
	int r = strbuf_appendc(sb, '"');
	for (size_t i = 0; r >= 0 && i < n;) {
		unsigned char c = u[i];
		if (c == '"' || c == '\\') {
			char e[2] = {'\\', (char)c};
			r = strbuf_append(sb, e, 2);
			i++;
		} else if (c == '\n') {
			r = strbuf_appends(sb, "\\n");
			i++;
		} else if (c == '\t') {
			r = strbuf_appends(sb, "\\t");
			i++;
		} else if (c < 0x20 || c == 0x7f) {
			char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
			r = strbuf_append(sb, e, 6);
			i++;
		} else if (c < 0x80) {
			r = strbuf_appendc(sb, (char)c);
			i++;
		} else {
			size_t l = utf8_seq_len(u + i, n - i);
			if (l) {
				r = strbuf_append(sb, s + i, l);
				i += l;
			} else {
				/* Not UTF-8: keep the byte visible and distinguishable. */
				char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
				r = strbuf_append(sb, e, 6);
				i++;
			}
		}
	}
	if (r < 0)
		return r;
	return strbuf_appendc(sb, '"');
}

int json_key(struct strbuf *sb, const char *key)
{
	int r = 0;
	if (sb->len > 0 && sb->buf[sb->len - 1] != '{' && sb->buf[sb->len - 1] != '[')
		r = strbuf_appendc(sb, ',');
	if (r >= 0)
		r = json_append_strings(sb, key);
	if (r >= 0)
		r = strbuf_appendc(sb, ':');
	return r;
}

int json_kv_str(struct strbuf *sb, const char *key, const char *value)
{
	int r = json_key(sb, key);
	return r < 0 ? r : json_append_strings(sb, value);
}

int json_kv_int(struct strbuf *sb, const char *key, int64_t value)
{
	int r = json_key(sb, key);
	return r < 0 ? r : strbuf_printf(sb, "%" PRId64, value);
}

int json_kv_bool(struct strbuf *sb, const char *key, bool value)
{
	int r = json_key(sb, key);
	return r < 0 ? r : strbuf_appends(sb, value ? "true" : "false");
}

static int append_indent(struct strbuf *sb, unsigned indent, unsigned depth)
{
	if (!indent)
		return 0;
	int r = strbuf_appendc(sb, '\n');
	for (unsigned i = 0; r >= 0 && i < indent * depth; i++)
		r = strbuf_appendc(sb, ' ');
	return r;
}

static int append_value_at(struct strbuf *sb, const struct json_value *v, unsigned indent,
			   unsigned depth)
{
	int64_t i;
	double d;
	bool b;
	size_t len, n;
	const char *s;
	switch (json_type(v)) {
	case JSON_NULL:
		return strbuf_appends(sb, "null");
	case JSON_BOOL:
		json_get_bool(v, &b);
		return strbuf_appends(sb, b ? "true" : "false");
	case JSON_INT:
		json_get_int64(v, &i);
		return strbuf_printf(sb, "%" PRId64, i);
	case JSON_DOUBLE: {
		/* The shortest form that reads back as the same double (0.1, not
		 * 0.10000000000000001). */
		char buf[64];
		json_get_double(v, &d);
		for (int prec = 1; prec <= 17; prec++) {
			snprintf(buf, sizeof buf, "%.*g", prec, d);
			if (strtod(buf, NULL) == d)
				break;
		}
		/* A double that prints as an integer stays a number with a fraction or exponent. */
		if (!strpbrk(buf, ".eEn"))
			strcat(buf, ".0");
		return strbuf_appends(sb, buf);
	}
	case JSON_STRING:
		s = json_get_string(v, &len);
		return json_append_string(sb, s, len);
	case JSON_ARRAY:
		n = json_array_len(v);
		strbuf_appendc(sb, '[');
		for (size_t k = 0; k < n; k++) {
			if (k)
				strbuf_appendc(sb, ',');
			append_indent(sb, indent, depth + 1);
			append_value_at(sb, json_array_get(v, k), indent, depth + 1);
		}
		if (n)
			append_indent(sb, indent, depth);
		return strbuf_appendc(sb, ']');
	case JSON_OBJECT:
		n = json_object_len(v);
		strbuf_appendc(sb, '{');
		for (size_t k = 0; k < n; k++) {
			const char *key;
			size_t klen;
			const struct json_value *e = json_object_member(v, k, &key, &klen);
			if (k)
				strbuf_appendc(sb, ',');
			append_indent(sb, indent, depth + 1);
			json_append_string(sb, key, klen);
			strbuf_appends(sb, indent ? ": " : ":");
			append_value_at(sb, e, indent, depth + 1);
		}
		if (n)
			append_indent(sb, indent, depth);
		return strbuf_appendc(sb, '}');
	}
	return -EINVAL;
}

int json_append_value(struct strbuf *sb, const struct json_value *v, unsigned indent,
		      unsigned depth)
{
	append_value_at(sb, v, indent, depth);
	return sb->oom ? -ENOMEM : 0;
}
