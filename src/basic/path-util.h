/* SPDX-License-Identifier: MIT */
/* Lexical path helpers. Paths are bytes; nothing here touches the file system or logs. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "strbuf.h"

/* Bound for every path we accept from outside (tracee memory, sockets, settings). */
#define BROKERED_PATH_MAX 4096

/*
 * Collapse "//", "." and ".." of an absolute path into out (always absolute, no trailing slash but
 * for "/"). ".." at the root stays at the root, as the kernel does. -EINVAL for a relative path.
 */
int path_normalise(const char *path, struct strbuf *out);
/* base + "/" + rel, without doubling slashes; rel absolute replaces base. */
int path_join(const char *base, const char *rel, struct strbuf *out);
/* True if path equals prefix or lies below it (both normalised, absolute). */
bool path_is_under(const char *path, const char *prefix);
/* Split an absolute normalised path into parent (malloc'd) and final component (pointer into path).
 */
int path_split(const char *path, char **ret_parent, const char **ret_name);
/* Replace a leading home directory with "~" (for rule matching and display). */
int path_home_to_tilde(const char *path, const char *home, struct strbuf *out);
/* "." or "..": the entries readdir() returns that are no children. */
static inline bool dot_or_dot_dot(const char *name)
{
	return name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'));
}
/* A single component is valid: not empty, not "." or "..", no '/'. */
bool path_component_valid(const char *name);
