/* SPDX-License-Identifier: MIT */
/*
 * Git-aware safety (DESIGN section 11): the user's own git, run later outside the sandbox, must not
 * run a program that a sandboxed command wrote unless the user approved it.
 *
 * Two checks:
 *  - while the command runs (broker): a ".git" entry may be a directory made by mkdir or a regular
 *    file (a gitfile "gitdir: ..."), never a symlink, device or a directory renamed into place; a
 *    "hooks" directory of a gitdir is made by mkdir only. Writes to hook files in ".git/hooks" and
 *    ".git/modules/.../hooks" are "prompt" in the policy (policy.c).
 *  - when the command ends (git_guard_check): every path the turn touched is looked at as it is
 *    now. A file git would read is judged on its content against its pre-image in the store:
 *      config   config, config.worktree of a git directory, and files pulled in by include.path or
 *               includeIf.*.path of a repository around a touched file: each key that names a
 *               program or redirects git (git_guard_exec_key) that is new or has a new value;
 *      hook     a file in a git directory's hooks/ (not "*.sample"), or below core.hooksPath;
 *      gitfile  a ".git" file whose "gitdir:" names anything but a ".git/worktrees/NAME" or
 *               ".git/modules/..." directory of this workspace;
 *      gitdir   a directory that became a git directory in this turn (HEAD, objects, refs or
 *               commondir created): its hooks and config are new, whatever turn wrote them.
 *    A directory that came into being or was replaced in this turn (renamed in) is walked, since
 *    the files below it were never touched under their new names.
 * A git directory is what git accepts as one: HEAD, and objects/ + refs/ or a commondir file.
 * A grant (--approve, or [o]/[s] on the terminal) lifts a block; what it approved (a config file's
 * "key=value", a hook's or gitfile's content hash) is remembered for the rest of the turn in the
 * session's "git-accepted" file, since later runs of an explicit turn see the turn's records again.
 * Configuration is read by `git config --file - --list --null --no-includes`, run outside the
 * sandbox with an empty environment (no system or global config, no repository), so the reading
 * itself runs nothing; when git is missing or a file does not parse, the file is a block (fail
 * closed).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct policy;
struct store;
struct store_seen;
struct strbuf;

/* What git makes of a path, lexically (for show/log). */
enum git_guard_kind {
	GIT_GUARD_NONE,
	GIT_GUARD_CONFIG,  /* .git/config, config.worktree, .git/modules/.../config */
	GIT_GUARD_HOOK,	   /* .git/hooks/X, .git/modules/.../hooks/X (not *.sample) */
	GIT_GUARD_GITFILE, /* a path named .git (a gitfile or a git directory) */
};
enum git_guard_kind git_guard_classify(const char *path);
const char *git_guard_kind_name(enum git_guard_kind k); /* "git-config", "git-hook", "gitdir" */
/* Append the kinds among a turn's paths ("git-config, git-hook"; nothing when none) to out. */
int git_guard_turn_marks(struct store *s, const char *turn_id, struct strbuf *out);

/* How the broker is about to make a name. */
enum git_guard_make {
	GIT_GUARD_MAKE_FILE,	/* open(O_CREAT) or a rename/link of a regular file */
	GIT_GUARD_MAKE_MKDIR,	/* mkdir */
	GIT_GUARD_MAKE_RENAMED, /* a rename of a directory (or anything but a regular file) */
	GIT_GUARD_MAKE_OTHER,	/* symlink, mknod */
	GIT_GUARD_MAKE_GITDIR,	/* a rename of a directory inside a git directory (git's
				   absorbgitdirs) */
};
/* How a rename of src (its real path and mode) makes its new name. */
enum git_guard_make git_guard_make_renamed(const char *src_real, mode_t mode);
/* May a name at this real path be made this way? False: refuse it (EACCES, "protected:git"). */
bool git_guard_name_allowed(const char *real, enum git_guard_make how);

/* Does this configuration key (as `git config --list` prints it: section and name lower case)
 * name a program, or redirect git to other files or programs? */
bool git_guard_exec_key(const char *key);

struct git_config_entry {
	char *key;   /* "section.sub.name", section and name lower case */
	char *value; /* NULL for a key without "=" (boolean true) */
};
/* Parse the output of `git config --list --null` (any bytes; a torn last entry is dropped). */
int git_guard_parse_list(const char *buf, size_t n, struct git_config_entry **ret, size_t *ret_n);
void git_config_entries_free(struct git_config_entry *v, size_t n);
/* The target of a gitfile's content ("gitdir: X", trailing newlines dropped); -EINVAL when it is
 * not one (git then refuses the repository). */
int git_guard_parse_gitfile(const char *buf, size_t n, char **ret);

struct git_guard_options {
	const char *workspace;	     /* real, absolute */
	const char *home;	     /* for "~/" in include paths; may be NULL */
	const struct policy *policy; /* grants ("--approve PATH") lift blocks; may be NULL */
	bool allow_hooks;	     /* sandbox.git.allowHooks */
	bool allow_exec_config;	     /* sandbox.git.allowExecConfig */
};

struct git_guard_block {
	char *path; /* the file git would read: config, hook, gitfile */
	char *undo; /* the path recorded by the turn whose pre-image takes the file away */
	char *what; /* "git-config: core.fsmonitor=/x/y; alias.st=!z", "git-hook", ... */
	struct git_config_entry *unset; /* a config block: the entries that need approval */
	size_t n_unset;
};
/* Check what turn_id changed (see above). Blocks are merged per path, sorted by path. ret_seen
 * (may be NULL): what the check's lstat() found of each of the turn's paths that exists, sorted
 * by path, for store_turn_commit_seen() (free with store_seens_free()). */
int git_guard_check(struct store *s, const char *turn_id, const struct git_guard_options *o,
		    struct git_guard_block **ret, size_t *ret_n, struct store_seen **ret_seen,
		    size_t *ret_n_seen);
void git_guard_blocks_free(struct git_guard_block *v, size_t n);
/* Remove a config block's entries from its file (git config --unset-all, outside the sandbox):
 * inside an explicit turn, what earlier runs of the turn did to the file stays. */
int git_guard_remove_keys(const struct git_guard_block *b);
