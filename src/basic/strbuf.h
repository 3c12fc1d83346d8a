/* SPDX-License-Identifier: MIT */
/* Growable byte buffer. Never logs; allocation failure is -ENOMEM. */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "macro.h"

struct strbuf {
	char *buf; /* always NUL-terminated when len > 0 or after strbuf_cstr() */
	size_t len;
	size_t cap;
	bool oom; /* sticky: an append failed, contents are truncated */
};

#define STRBUF_INIT                                                                                \
	{                                                                                          \
		NULL, 0, 0, false                                                                  \
	}

int strbuf_reserve(struct strbuf *sb, size_t extra);
int strbuf_append(struct strbuf *sb, const void *data, size_t n);
int strbuf_appends(struct strbuf *sb, const char *s);
int strbuf_appendc(struct strbuf *sb, char c);
/* A number in base 8, 10 or 16 (lower case), at least width digits (zero-padded): what
 * printf's %o, %u and %0*x give, without printf (the store's lines and the audit log are written
 * a few numbers per change). */
int strbuf_append_u64(struct strbuf *sb, uint64_t v, unsigned base, unsigned width);
int strbuf_append_i64(struct strbuf *sb, int64_t v);
int strbuf_printf(struct strbuf *sb, const char *fmt, ...) _printf_(2, 3);
int strbuf_vprintf(struct strbuf *sb, const char *fmt, va_list ap) _printf_(2, 0);
/* Contents as a C string ("" for an empty buffer); NULL only after an allocation failure. */
const char *strbuf_cstr(struct strbuf *sb);
/* Hand the buffer to the caller (malloc'd, NUL-terminated) and reset sb. */
char *strbuf_steal(struct strbuf *sb);
void strbuf_reset(struct strbuf *sb);
void strbuf_free(struct strbuf *sb);

/* Keep the first n bytes (n <= len). */
static inline void strbuf_truncate(struct strbuf *sb, size_t n)
{
	if (n < sb->len) {
		sb->len = n;
		sb->buf[n] = '\0';
	}
}

static inline void strbuf_freep(struct strbuf *sb)
{
	strbuf_free(sb);
}
#define _cleanup_strbuf_ _cleanup_(strbuf_freep)
