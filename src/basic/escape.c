/* SPDX-License-Identifier: MIT */
#include "escape.h"

#include <errno.h>

#include "hexdecoct.h"

static bool needs_escape(unsigned char c)
{
	return c <= 0x20 || c >= 0x7f || c == '\\' || c == '"' || c == '=' || c == '\'';
}

int escape_append(struct strbuf *sb, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	int r = strbuf_reserve(sb, n);
	if (r < 0)
		return r;
	/* Runs of bytes that stay as they are are copied whole: a path is mostly one run. */
	for (size_t i = 0; i < n;) {
		size_t j = i;
		while (j < n && !needs_escape((unsigned char)s[j]))
			j++;
		if (j > i && (r = strbuf_append(sb, s + i, j - i)) < 0)
			return r;
		if (j == n)
			break;
		unsigned char c = (unsigned char)s[j];
		char e[4] = {'\\', 'x', hex[c >> 4], hex[c & 15]};
		if ((r = strbuf_append(sb, e, 4)) < 0)
			return r;
		i = j + 1;
	}
	return 0;
}

static bool plain(unsigned char c)
{
	return c > 0x20 && c < 0x7f && c != '\\';
}

int unescape_append(struct strbuf *sb, const char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		size_t j = i;
		while (j < n && plain((unsigned char)s[j]))
			j++;
		int r = j > i ? strbuf_append(sb, s + i, j - i) : 0;
		if (r < 0)
			return r;
		if (j == n)
			break;
		/* not plain: an escape, or a byte no escaped token has (NUL, space, control, high)
		 */
		if (s[j] != '\\' || n - j < 4 || s[j + 1] != 'x')
			return -EINVAL;
		int hi = unhexchar(s[j + 2]), lo = unhexchar(s[j + 3]);
		if (hi < 0 || lo < 0)
			return -EINVAL;
		char b = (char)(hi << 4 | lo);
		if (b == '\0')
			return -EINVAL;
		if ((r = strbuf_appendc(sb, b)) < 0)
			return r;
		i = j + 4;
	}
	return 0;
}
