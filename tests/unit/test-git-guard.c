/* SPDX-License-Identifier: MIT */
#include <sys/stat.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "git-guard.h"

/* tap.h's is_int()/is_str() nest ok(), whose local shadows theirs. */
#pragma GCC diagnostic ignored "-Wshadow"
#include "tap.h"

static const struct {
	const char *path;
	enum git_guard_kind kind;
} classify_cases[] = {
    {"/ws/.git", GIT_GUARD_GITFILE},
    {"/ws/sub/.git", GIT_GUARD_GITFILE},
    {"/ws/.git/config", GIT_GUARD_CONFIG},
    {"/ws/.git/config.worktree", GIT_GUARD_CONFIG},
    {"/ws/.git/worktrees/wt/config.worktree", GIT_GUARD_CONFIG},
    {"/ws/.git/modules/lib/config", GIT_GUARD_CONFIG},
    {"/ws/.git/modules/a/modules/b/config", GIT_GUARD_CONFIG},
    {"/ws/.git/hooks/pre-commit", GIT_GUARD_HOOK},
    {"/ws/.git/modules/lib/hooks/post-checkout", GIT_GUARD_HOOK},
    {"/ws/.git/hooks/pre-commit.sample", GIT_GUARD_NONE},
    {"/ws/.git/hooks", GIT_GUARD_NONE},
    {"/ws/.git/objects/ab/cdef", GIT_GUARD_NONE},
    {"/ws/.git/refs/heads/hooks", GIT_GUARD_NONE},
    {"/ws/.gitx/config", GIT_GUARD_NONE},
    {"/ws/x.git/config", GIT_GUARD_NONE},
    {"/ws/src/config", GIT_GUARD_NONE},
};

static void test_classify(void)
{
	for (size_t i = 0; i < ELEMENTSOF(classify_cases); i++)
		is_int(git_guard_classify(classify_cases[i].path), classify_cases[i].kind,
		       "classify %s", classify_cases[i].path);
}

static void test_exec_keys(void)
{
	static const char *const exec[] = {
	    "core.fsmonitor",
	    "core.hookspath",
	    "core.sshcommand",
	    "core.pager",
	    "core.editor",
	    "core.askpass",
	    "core.worktree",
	    "diff.x.textconv",
	    "diff.a.b.command",
	    "filter.lfs.smudge",
	    "filter.x.clean",
	    "filter.x.process",
	    "merge.x.driver",
	    "credential.helper",
	    "credential.https://h.helper",
	    "gpg.program",
	    "gpg.ssh.program",
	    "sequence.editor",
	    "pager.log",
	    "alias.st",
	    "include.path",
	    "includeif.gitdir:/x/.path",
	    "uploadpack.packobjectshook",
	    "remote.origin.uploadpack",
	    "remote.o.receivepack",
	    "protocol.ext.allow",
	    "http.proxy",
	    "http.https://h.proxy",
	    "core.gitproxy",
	    "submodule.x.update",
	    "interactive.difffilter",
	};
	static const char *const inert[] = {
	    "core.bare",
	    "core.repositoryformatversion",
	    "core.filemode",
	    "user.name",
	    "user.email",
	    "remote.origin.url",
	    "remote.origin.fetch",
	    "branch.main.remote",
	    "submodule.lib.url",
	    "submodule.lib.active",
	    "extensions.worktreeconfig",
	    "core.logallrefupdates",
	    "diff.x.cachetextconv",
	};
	for (size_t i = 0; i < ELEMENTSOF(exec); i++)
		ok(git_guard_exec_key(exec[i]), "exec-capable: %s", exec[i]);
	for (size_t i = 0; i < ELEMENTSOF(inert); i++)
		ok(!git_guard_exec_key(inert[i]), "inert: %s", inert[i]);
}

static void test_parse_list(void)
{
	static const char in[] = "core.fsmonitor\n/x/y\0core.bare\0alias.st\n!a\nb\0torn";
	struct git_config_entry *v;
	size_t n;
	is_int(git_guard_parse_list(in, sizeof in - 1, &v, &n), 0, "parse_list");
	is_int(n, 3, "three whole entries (the torn one dropped)");
	is_str(v[0].key, "core.fsmonitor", "key");
	is_str(v[0].value, "/x/y", "value");
	ok(v[1].value == NULL, "a key without value (boolean true)");
	is_str(v[2].value, "!a\nb", "a value may hold newlines");
	git_config_entries_free(v, n);
}

static void test_parse_gitfile(void)
{
	char *t = NULL;
	is_int(git_guard_parse_gitfile("gitdir: ../.git/modules/x\n", 26, &t), 0, "gitfile");
	is_str(t, "../.git/modules/x", "gitfile target, newline dropped");
	free(t);
	is_int(git_guard_parse_gitfile("gitdir:x", 8, &t), -EINVAL, "no space: not a gitfile");
	is_int(git_guard_parse_gitfile("gitdir: \n", 9, &t), -EINVAL, "empty target");
	is_int(git_guard_parse_gitfile("gitdir: a\0b", 11, &t), -EINVAL, "NUL inside");
}

static void test_names(void)
{
	ok(git_guard_name_allowed("/ws/.git", GIT_GUARD_MAKE_MKDIR), ".git by mkdir");
	ok(git_guard_name_allowed("/ws/sub/.git", GIT_GUARD_MAKE_FILE), ".git as a gitfile");
	ok(!git_guard_name_allowed("/ws/.git", GIT_GUARD_MAKE_RENAMED),
	   ".git by renaming a directory");
	ok(!git_guard_name_allowed("/ws/.git", GIT_GUARD_MAKE_OTHER), ".git as a symlink");
	ok(!git_guard_name_allowed("/ws/.git/hooks", GIT_GUARD_MAKE_RENAMED), "hooks renamed in");
	ok(!git_guard_name_allowed("/ws/.git/modules/x/hooks", GIT_GUARD_MAKE_OTHER),
	   "a submodule's hooks as a symlink");
	ok(git_guard_name_allowed("/ws/.git/hooks", GIT_GUARD_MAKE_MKDIR), "hooks by mkdir");
	ok(git_guard_name_allowed("/ws/src/hooks", GIT_GUARD_MAKE_RENAMED), "hooks elsewhere");
	ok(git_guard_name_allowed("/ws/sub/.git", GIT_GUARD_MAKE_GITDIR),
	   ".git by moving a git directory");
	ok(!git_guard_name_allowed("/ws/.git/hooks", GIT_GUARD_MAKE_GITDIR),
	   "hooks by moving a git directory");
}

static void test_make_renamed(void)
{
	ok(git_guard_make_renamed("/ws/a.txt", S_IFREG | 0644) == GIT_GUARD_MAKE_FILE, "a file");
	ok(git_guard_make_renamed("/ws/.git/modules/sub", S_IFDIR | 0755) == GIT_GUARD_MAKE_GITDIR,
	   "a submodule's git directory (git's absorbgitdirs, in reverse)");
	ok(git_guard_make_renamed("/ws/.git/modules/a/modules/b", S_IFDIR | 0755) ==
	       GIT_GUARD_MAKE_GITDIR,
	   "a nested submodule's git directory");
	ok(git_guard_make_renamed("/ws/sub/.git", S_IFDIR | 0755) == GIT_GUARD_MAKE_GITDIR,
	   "a .git directory");
	ok(git_guard_make_renamed("/ws/g2", S_IFDIR | 0755) == GIT_GUARD_MAKE_RENAMED,
	   "any other directory");
	ok(git_guard_make_renamed("/ws/.git/modules/", S_IFDIR | 0755) == GIT_GUARD_MAKE_RENAMED,
	   ".git/modules itself");
	ok(git_guard_make_renamed("/ws/.git/objects", S_IFDIR | 0755) == GIT_GUARD_MAKE_RENAMED,
	   "a directory inside .git that is not a submodule's");
	ok(git_guard_make_renamed("/ws/.git", S_IFLNK | 0777) == GIT_GUARD_MAKE_RENAMED,
	   "a symlink named .git");
}

int main(void)
{
	test_classify();
	test_exec_keys();
	test_parse_list();
	test_parse_gitfile();
	test_names();
	test_make_renamed();
	return tap_done();
}
