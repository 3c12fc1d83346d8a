/* SPDX-License-Identifier: MIT */
/* What git-guard.c (the check at the end of a command) takes from git-config.c (git's names, and
 * reading and changing git's configuration with git itself). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "basic/strbuf.h"
#include "git-guard.h"

#define GITFILE_MAX	(64 * 1024)
#define CONFIG_LIST_MAX (8 * 1024 * 1024)

bool has_suffix(const char *s, const char *suffix);
/* A file directly in a hooks directory that git would run ("*.sample" never runs). */
bool hook_name(const char *rel_in_hooks);
/* Path relative to a git directory: is it one of its config files, one of its hooks? */
bool config_rel(const char *rel);
bool hook_rel(const char *rel);

/* Read fd to its end into out: -EFBIG beyond max bytes. */
int read_fd(int fd, size_t max, struct strbuf *out);
/* `git config --list` of a file's content (fd) or of a path; -ENOENT: no git; -EBADMSG: git
 * refused it. */
int git_list_fd(int fd, struct git_config_entry **ret, size_t *ret_n);
int git_list_path(const char *path, struct git_config_entry **ret, size_t *ret_n);
