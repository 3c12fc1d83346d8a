/* SPDX-License-Identifier: MIT */
/*
 * The freedesktop.org Trash specification (1.0), so that files the broker trashes show up in
 * `gio trash --list`, `trash-list`, file managers, and come back with any of them.
 *
 *   home trash      $XDG_DATA_HOME/Trash (default ~/.local/share/Trash), for files on its file
 * system other volumes   $topdir/.Trash/$uid when $topdir/.Trash is a sticky directory (not a
 * symlink), else $topdir/.Trash-$uid (created 0700); $topdir is the file system's top each trash
 * files/NAME (the file itself, moved with rename(2): no copy, nothing is lost on a crash) and
 * info/NAME.trashinfo, written first with O_EXCL (that claims NAME): [Trash Info]
 *                     Path=<percent-encoded path: absolute in the home trash, relative to $topdir
 *                           in a volume trash>
 *                     DeletionDate=YYYY-MM-DDThh:mm:ss (local time)
 *
 * A file on a file system without a usable trash is not copied across: -EXDEV, nothing changed.
 * Functions return -errno and never log.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "basic/strbuf.h"

/* $XDG_DATA_HOME/Trash, or $HOME/.local/share/Trash (malloc'd). Not created. */
int trash_home_dir(char **ret);

/*
 * Move parent_fd/name, whose real absolute path is real_path, into the trash of its file system.
 * *ret_trashed (may be NULL) gets the path of the file in the trash.
 */
int trash_put_at(int parent_fd, const char *name, const char *real_path, char **ret_trashed);

struct trash_entry {
	char *trash_dir;     /* the trash directory (…/Trash, $topdir/.Trash-$uid, …) */
	char *name;	     /* NAME in files/ and info/NAME.trashinfo */
	char *original_path; /* absolute, decoded */
	char *deletion_date; /* as written, may be "" */
	bool in_files;	     /* files/NAME exists */
};
void trash_entries_free(struct trash_entry *e, size_t n);

/* Every entry of the home trash and of the trashes of mounted file systems, oldest first. */
int trash_list(struct trash_entry **ret, size_t *ret_n);
/* Move an entry back to its original path (or to `to`); -EEXIST if something is there now. */
int trash_restore(const struct trash_entry *e, const char *to);
/* Remove an entry for good (files/NAME recursively, then its .trashinfo). */
int trash_remove(const struct trash_entry *e);

/* ---- the .trashinfo format (pure; unit-tested) ---- */

/* Percent-encode a path as the specification wants (RFC 2396: unreserved bytes and '/' stay). */
int trash_path_encode(const char *path, struct strbuf *out);
/* Decode %XX; -EINVAL for a malformed escape or %00. */
int trash_path_decode(const char *s, size_t n, struct strbuf *out);
int trash_info_format(const char *path, time_t when, struct strbuf *out);
/* Parse a .trashinfo file: the Path= (decoded, not resolved) and DeletionDate= of its
 * [Trash Info] group. -EINVAL without a group or a Path. */
int trash_info_parse(const char *buf, size_t n, char **ret_path, char **ret_date);
