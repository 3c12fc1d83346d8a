/* SPDX-License-Identifier: MIT */
#include "strbuf.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

int strbuf_reserve(struct strbuf *sb, size_t extra)
{
	if (sb->oom)
		return -ENOMEM;
	if (extra > SIZE_MAX - sb->len - 1)
		goto oom;
	size_t need = sb->len + extra + 1;
	if (need <= sb->cap)
		return 0;
	bool fresh = sb->buf == NULL;
	size_t cap = sb->cap ? sb->cap : 64;
	while (cap < need) {
		if (cap > SIZE_MAX / 2)
			goto oom;
		cap *= 2;
	}
	char *n = realloc(sb->buf, cap);
	if (!n)
		goto oom;
	sb->buf = n;
	sb->cap = cap;
	if (fresh)
		sb->buf[0] = '\0'; /* a reserved buffer is always a valid (empty) string */
	return 0;
oom:
	sb->oom = true;
	return -ENOMEM;
}

int strbuf_append(struct strbuf *sb, const void *data, size_t n)
{
	int r = strbuf_reserve(sb, n);
	if (r < 0)
		return r;
	if (n)
		memcpy(sb->buf + sb->len, data, n);
	sb->len += n;
	sb->buf[sb->len] = '\0';
	return 0;
}

int strbuf_appends(struct strbuf *sb, const char *s)
{
	return strbuf_append(sb, s, strlen(s));
}

int strbuf_appendc(struct strbuf *sb, char c)
{
	return strbuf_append(sb, &c, 1);
}

int strbuf_append_u64(struct strbuf *sb, uint64_t v, unsigned base, unsigned width)
{
	char d[64]; /* 2^64 in base 8 has 22 digits; width is capped to what fits */
	size_t n = 0;
	if (base != 8 && base != 10 && base != 16)
		return -EINVAL;
	do {
		d[sizeof d - ++n] = "0123456789abcdef"[v % base];
		v /= base;
	} while (v);
	while (n < width && n < sizeof d)
		d[sizeof d - ++n] = '0';
	return strbuf_append(sb, d + sizeof d - n, n);
}

int strbuf_append_i64(struct strbuf *sb, int64_t v)
{
	if (v >= 0)
		return strbuf_append_u64(sb, (uint64_t)v, 10, 0);
	int r = strbuf_appendc(sb, '-');
	/* -(v + 1) + 1: INT64_MIN too */
	return r < 0 ? r : strbuf_append_u64(sb, (uint64_t) - (v + 1) + 1, 10, 0);
}

int strbuf_vprintf(struct strbuf *sb, const char *fmt, va_list ap)
{
	if (sb->oom)
		return -ENOMEM;
	/* Formatted straight into the room there is; measured and formatted again only if it
	 * does not fit. */
	size_t room = sb->cap > sb->len ? sb->cap - sb->len : 0;
	va_list aq;
	va_copy(aq, ap);
	int n = vsnprintf(room ? sb->buf + sb->len : NULL, room, fmt, aq);
	va_end(aq);
	if (n >= 0 && (size_t)n < room) {
		sb->len += (size_t)n;
		return 0;
	}
	if (room)
		sb->buf[sb->len] = '\0'; /* a cut attempt leaves the contents as they were */
	if (n < 0)
		return -EINVAL;
	int r = strbuf_reserve(sb, (size_t)n);
	if (r < 0)
		return r;
	vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap);
	sb->len += (size_t)n;
	return 0;
}

int strbuf_printf(struct strbuf *sb, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = strbuf_vprintf(sb, fmt, ap);
	va_end(ap);
	return r;
}

const char *strbuf_cstr(struct strbuf *sb)
{
	if (sb->oom)
		return NULL;
	if (!sb->buf)
		return "";
	return sb->buf;
}

char *strbuf_steal(struct strbuf *sb)
{
	if (sb->oom) {
		strbuf_free(sb);
		return NULL;
	}
	char *b = sb->buf ? sb->buf : strdup("");
	*sb = (struct strbuf)STRBUF_INIT;
	return b;
}

void strbuf_reset(struct strbuf *sb)
{
	sb->len = 0;
	sb->oom = false;
	if (sb->buf)
		sb->buf[0] = '\0';
}

void strbuf_free(struct strbuf *sb)
{
	free(sb->buf);
	*sb = (struct strbuf)STRBUF_INIT;
}
