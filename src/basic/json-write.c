/* SPDX-License-Identifier: MIT */
#include "json-write.h"

#include <inttypes.h>
#include <string.h>

/* Length of a valid UTF-8 sequence at s (1..4), or 0 if it is not one. */
static size_t utf8_seq_len(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];
	size_t len;
	uint32_t cp;
	if (c < 0x80)
		return 1;
	if ((c & 0xe0) == 0xc0) {
		len = 2;
		cp = c & 0x1f;
	} else if ((c & 0xf0) == 0xe0) {
		len = 3;
		cp = c & 0x0f;
	} else if ((c & 0xf8) == 0xf0) {
		len = 4;
		cp = c & 0x07;
	} else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
	    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

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
