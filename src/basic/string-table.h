/* SPDX-License-Identifier: MIT */
/*
 * Enum <-> string tables (systemd's string-table.h in spirit): the names live in one array indexed
 * by the enum, e.g.
 *
 *	static const char *const color_table[] = {[COLOR_RED] = "red", [COLOR_BLUE] = "blue"};
 *	DEFINE_STRING_TABLE_LOOKUP(color, enum color);
 *
 * defines color_to_string() (NULL for a value without a name) and color_from_string() (-EINVAL
 * for an unknown or NULL string: give the enum a member "_FOO_INVALID = -EINVAL", as systemd does).
 */
#pragma once

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "basic/macro.h"

static inline const char *string_table_lookup_to_string(const char *const *table, size_t n,
							ssize_t i)
{
	return i >= 0 && (size_t)i < n ? table[i] : NULL;
}

static inline ssize_t string_table_lookup_from_string(const char *const *table, size_t n,
						      const char *s)
{
	if (!s)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (table[i] && strcmp(table[i], s) == 0)
			return (ssize_t)i;
	return -EINVAL;
}

#define DEFINE_STRING_TABLE_LOOKUP_TO_STRING(name, type, scope)                                    \
	scope const char *name##_to_string(type i)                                                 \
	{                                                                                          \
		return string_table_lookup_to_string(name##_table, ELEMENTSOF(name##_table),       \
						     (ssize_t)i);                                  \
	}

#define DEFINE_STRING_TABLE_LOOKUP_FROM_STRING(name, type, scope)                                  \
	scope type name##_from_string(const char *s)                                               \
	{                                                                                          \
		return (type)string_table_lookup_from_string(name##_table,                         \
							     ELEMENTSOF(name##_table), s);         \
	}

#define DEFINE_STRING_TABLE_LOOKUP(name, type)                                                     \
	DEFINE_STRING_TABLE_LOOKUP_TO_STRING(name, type, )                                         \
	DEFINE_STRING_TABLE_LOOKUP_FROM_STRING(name, type, )
#define DEFINE_PRIVATE_STRING_TABLE_LOOKUP_TO_STRING(name, type)                                   \
	DEFINE_STRING_TABLE_LOOKUP_TO_STRING(name, type, static)
#define DEFINE_PRIVATE_STRING_TABLE_LOOKUP_FROM_STRING(name, type)                                 \
	DEFINE_STRING_TABLE_LOOKUP_FROM_STRING(name, type, static)
