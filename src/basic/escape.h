/* SPDX-License-Identifier: MIT */
/*
 * Reversible escaping of arbitrary bytes (file names are any bytes but NUL) into one token with no
 * space, tab, newline, '=', quote or backslash: such bytes, control bytes and bytes >= 0x80 become
 * \xHH. Used by the audit log and the store's manifest, so that every record stays one line.
 */
#pragma once

#include <stddef.h>

#include "strbuf.h"

int escape_append(struct strbuf *sb, const char *s, size_t n);
static inline int escape_appends(struct strbuf *sb, const char *s)
{
	return escape_append(sb, s, __builtin_strlen(s));
}
/* Decode a token produced by escape_append(). -EINVAL on malformed input or an escaped NUL. */
int unescape_append(struct strbuf *sb, const char *s, size_t n);
