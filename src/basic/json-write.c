/* SPDX-License-Identifier: MIT */
#include "json-write.h"
#include "utf8.h"

#include <inttypes.h>
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
