/* SPDX-License-Identifier: MIT */
#include "git-guard.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <poll.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/fs-util.h"
#include "basic/macro.h"
#include "basic/strbuf.h"
#include "basic/string-table.h"
#include "git-guard-internal.h"
#include "store.h"

/* ---- lexical ---- */

bool has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* A file directly in a hooks directory that git would run ("*.sample" never runs). */
bool hook_name(const char *rel_in_hooks)
{
	return *rel_in_hooks && !strchr(rel_in_hooks, '/') && !has_suffix(rel_in_hooks, ".sample");
}

/* Path relative to a git directory: is it one of its config files? */
bool config_rel(const char *rel)
{
	if (!strcmp(rel, "config") || !strcmp(rel, "config.worktree"))
		return true;
	if (strncmp(rel, "worktrees/", 10) != 0)
		return false;
	const char *s = strchr(rel + 10, '/');
	return s && s != rel + 10 && !strcmp(s + 1, "config.worktree");
}

bool hook_rel(const char *rel)
{
	return strncmp(rel, "hooks/", 6) == 0 && hook_name(rel + 6);
}

enum git_guard_kind git_guard_classify(const char *path)
{
	const char *g = NULL;
	for (const char *c = strstr(path, "/.git"); c; c = strstr(c + 1, "/.git"))
		if (c[5] == '/' || c[5] == '\0')
			g = c;
	if (!g)
		return GIT_GUARD_NONE;
	if (g[5] == '\0')
		return GIT_GUARD_GITFILE;
	const char *rel = g + 6;
	/* .git/modules/NAME/... (names may hold '/', and modules nest): judge the tail */
	if (strncmp(rel, "modules/", 8) == 0) {
		if (has_suffix(rel, "/config") || has_suffix(rel, "/config.worktree"))
			return GIT_GUARD_CONFIG;
		const char *h = NULL;
		for (const char *c = strstr(rel, "/hooks/"); c; c = strstr(c + 1, "/hooks/"))
			h = c;
		return h && hook_name(h + 7) ? GIT_GUARD_HOOK : GIT_GUARD_NONE;
	}
	if (config_rel(rel))
		return GIT_GUARD_CONFIG;
	return hook_rel(rel) ? GIT_GUARD_HOOK : GIT_GUARD_NONE;
}

static const char *const git_guard_kind_table[] = {
    [GIT_GUARD_CONFIG] = "git-config",
    [GIT_GUARD_HOOK] = "git-hook",
    [GIT_GUARD_GITFILE] = "gitdir",
};
DEFINE_PRIVATE_STRING_TABLE_LOOKUP_TO_STRING(git_guard_kind, enum git_guard_kind);

const char *git_guard_kind_name(enum git_guard_kind k)
{
	return git_guard_kind_to_string(k);
}

static int mark_record(struct store_record *rec, void *userdata)
{
	unsigned *seen = userdata;
	*seen |= 1u << git_guard_classify(rec->path);
	return 0;
}

int git_guard_turn_marks(struct store *s, const char *turn_id, struct strbuf *out)
{
	unsigned seen = 0;
	int r = store_turn_records_foreach(s, turn_id, mark_record, &seen);
	if (r < 0)
		return r;
	for (enum git_guard_kind k = GIT_GUARD_CONFIG; k <= GIT_GUARD_GITFILE; k++)
		if (seen & (1u << k)) {
			if (out->len)
				strbuf_appends(out, ", ");
			strbuf_appends(out, git_guard_kind_name(k));
		}
	return out->oom ? -ENOMEM : 0;
}

/*
 * A directory moved out of a git directory (".git" itself, or ".git/modules/NAME" when git absorbs
 * or un-absorbs a submodule's) may become a ".git": what git would read in it was guarded where it
 * was, and the check at the end of the command walks it under its new name (and its "commondir"
 * must name a guarded git directory). Any other directory renamed to ".git" is refused.
 */
enum git_guard_make git_guard_make_renamed(const char *src_real, mode_t mode)
{
	if (S_ISREG(mode))
		return GIT_GUARD_MAKE_FILE;
	if (S_ISDIR(mode) && src_real && git_guard_classify(src_real) == GIT_GUARD_GITFILE)
		return GIT_GUARD_MAKE_GITDIR;
	const char *m = S_ISDIR(mode) && src_real ? strstr(src_real, "/.git/modules/") : NULL;
	return m && m[14] && m[14] != '/' ? GIT_GUARD_MAKE_GITDIR : GIT_GUARD_MAKE_RENAMED;
}

bool git_guard_name_allowed(const char *real, enum git_guard_make how)
{
	const char *name = strrchr(real, '/');
	if (!name)
		return true;
	name++;
	if (strcmp(name, ".git") == 0)
		return how == GIT_GUARD_MAKE_MKDIR || how == GIT_GUARD_MAKE_FILE ||
		       how == GIT_GUARD_MAKE_GITDIR;
	if (strcmp(name, "hooks") != 0)
		return true;
	/* ".../.git/hooks", or a hooks directory anywhere below ".git/modules/" */
	size_t n = (size_t)(name - real);
	bool guarded = (n >= 6 && memcmp(name - 5, ".git/", 5) == 0 && name[-6] == '/') ||
		       strstr(real, "/.git/modules/") != NULL;
	return !guarded || how == GIT_GUARD_MAKE_MKDIR;
}

/*
 * Keys that name a program git runs, or that send git elsewhere (other config files, another work
 * tree, other transports), from git-config(1). Matched with fnmatch() on the key as `git config
 * --list` prints it ('*' spans dots: subsections may hold them).
 */
static const char *const exec_keys[] = {
    "alias.*", /* "!cmd", and "-c key=value cmd" sets any key */
    "browser.*.cmd",
    "browser.*.path",
    "core.alternaterefscommand",
    "core.askpass",
    "core.editor",
    "core.fsmonitor",
    "core.gitproxy",
    "core.hookspath",
    "core.pager",
    "core.sshcommand",
    "core.worktree",
    "credential.*helper",
    "diff.*.command",
    "diff.*.textconv",
    "diff.external",
    "difftool.*.cmd",
    "difftool.*.path",
    "filter.*.clean",
    "filter.*.process",
    "filter.*.smudge",
    "gpg.*program",
    "gpg.ssh.defaultkeycommand",
    "help.browser",
    "http.*proxy",
    "include.path",
    "includeif.*.path",
    "init.templatedir",
    "instaweb.*",
    "interactive.difffilter",
    "lfs.customtransfer.*.path",
    "lfs.extension.*.clean",
    "lfs.extension.*.smudge",
    "man.*.cmd",
    "man.*.path",
    "man.viewer",
    "merge.*.driver",
    "mergetool.*.cmd",
    "mergetool.*.path",
    "pager.*",
    "protocol.*allow",
    "remote.*.proxy",
    "remote.*.receivepack",
    "remote.*.uploadpack",
    "remote.*.vcs",
    "sendemail.*cmd",
    "sendemail.*smtpserver",
    "sequence.editor",
    "submodule.*.update", /* "!cmd" */
    "tar.*.command",
    "trailer.*.cmd",
    "trailer.*.command",
    "uploadpack.packobjectshook",
    "url.*.insteadof",
    "url.*.pushinsteadof",
    "web.browser",
};

bool git_guard_exec_key(const char *key)
{
	for (size_t i = 0; i < ELEMENTSOF(exec_keys); i++)
		if (fnmatch(exec_keys[i], key, 0) == 0)
			return true;
	return false;
}

void git_config_entries_free(struct git_config_entry *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].key);
		free(v[i].value);
	}
	free(v);
}

int git_guard_parse_list(const char *buf, size_t n, struct git_config_entry **ret, size_t *ret_n)
{
	struct git_config_entry *v = NULL;
	size_t nv = 0, cap = 0;
	const char *p = buf, *end = buf + n;
	while (p < end) {
		const char *z = memchr(p, '\0', (size_t)(end - p));
		if (!z)
			break; /* torn last entry */
		const char *nl = memchr(p, '\n', (size_t)(z - p));
		if (nv == cap) {
			size_t nc = cap ? cap * 2 : 16;
			struct git_config_entry *w = reallocarray(v, nc, sizeof *w);
			if (!w) {
				git_config_entries_free(v, nv);
				return -ENOMEM;
			}
			v = w;
			cap = nc;
		}
		struct git_config_entry *e = &v[nv];
		e->key = strndup(p, nl ? (size_t)(nl - p) : (size_t)(z - p));
		e->value = nl ? strndup(nl + 1, (size_t)(z - nl - 1)) : NULL;
		if (!e->key || (nl && !e->value)) {
			free(e->key);
			free(e->value);
			git_config_entries_free(v, nv);
			return -ENOMEM;
		}
		nv++;
		p = z + 1;
	}
	*ret = v;
	*ret_n = nv;
	return 0;
}

int git_guard_parse_gitfile(const char *buf, size_t n, char **ret)
{
	static const char prefix[] = "gitdir: ";
	if (n < sizeof prefix - 1 || memcmp(buf, prefix, sizeof prefix - 1) != 0)
		return -EINVAL;
	const char *s = buf + sizeof prefix - 1;
	size_t len = n - (sizeof prefix - 1);
	while (len && (s[len - 1] == '\n' || s[len - 1] == '\r'))
		len--;
	if (!len || memchr(s, '\0', len))
		return -EINVAL;
	*ret = strndup(s, len);
	return *ret ? 0 : -ENOMEM;
}

/* ---- reading files and configuration ---- */

int read_fd(int fd, size_t max, struct strbuf *out)
{
	char buf[65536];
	for (;;) {
		ssize_t k = read(fd, buf, sizeof buf);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return negative_errno();
		}
		if (k == 0)
			return 0;
		if (out->len + (size_t)k > max)
			return -EFBIG;
		if (strbuf_append(out, buf, (size_t)k) < 0)
			return -ENOMEM;
	}
}

/*
 * `git config --file - --list --null --no-includes` with fd as its input. The child has an empty
 * environment (no system, global or repository configuration; "/" as its directory), so reading
 * runs no program that a configuration names. -ENOENT: no git; -EBADMSG: git refused the file.
 */
/* The environment of the user's git when brokered runs it: no system, global or repository
 * configuration of its own, so that it reads exactly the file it is given. */
static const char *const git_envp[] = {"PATH=/usr/local/bin:/usr/bin:/bin",
				       "HOME=/nonexistent",
				       "GIT_CONFIG_NOSYSTEM=1",
				       "GIT_CONFIG_GLOBAL=/dev/null",
				       "GIT_DIR=/nonexistent",
				       "LC_ALL=C",
				       NULL};

int git_list_fd(int fd, struct git_config_entry **ret, size_t *ret_n)
{
	static const char *const argv[] = {"git",    "config", "--file",	"-",
					   "--list", "--null", "--no-includes", NULL};
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return negative_errno();
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fd, STDIN_FILENO);
	posix_spawn_file_actions_adddup2(&fa, p[1], STDOUT_FILENO);
	posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addchdir_np(&fa, "/");
	pid_t pid;
	int r = -posix_spawnp(&pid, "git", &fa, NULL, (char *const *)argv, (char *const *)git_envp);
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	if (r < 0) {
		close(p[0]);
		return r;
	}
	_cleanup_strbuf_ struct strbuf out = STRBUF_INIT;
	int rr = read_fd(p[0], CONFIG_LIST_MAX, &out);
	close(p[0]);
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return negative_errno();
	if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
		return -ENOENT; /* posix_spawnp reports a missing program this way too */
	if (rr < 0)
		return rr;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return -EBADMSG;
	return git_guard_parse_list(out.buf ? out.buf : "", out.len, ret, ret_n);
}

int git_list_path(const char *path, struct git_config_entry **ret, size_t *ret_n)
{
	_cleanup_close_ int fd = open_regular(path, NULL);
	if (fd < 0)
		return fd == -EINVAL ? -EBADMSG : fd;
	return git_list_fd(fd, ret, ret_n);
}

int git_guard_remove_keys(const struct git_guard_block *b)
{
	if (!b->n_unset)
		return -EINVAL;
	for (size_t i = 0; i < b->n_unset; i++) {
		const char *argv[] = {"git",	       "config",	  "--file",
				      b->path,	       "--fixed-value",	  "--unset-all",
				      b->unset[i].key, b->unset[i].value, NULL};
		if (!b->unset[i].value)
			argv[4] = "--unset-all", argv[5] = b->unset[i].key, argv[6] = NULL;
		posix_spawn_file_actions_t fa;
		posix_spawn_file_actions_init(&fa);
		posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
		posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
		posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
		posix_spawn_file_actions_addchdir_np(&fa, "/");
		pid_t pid;
		int r = -posix_spawnp(&pid, "git", &fa, NULL, (char *const *)argv,
				      (char *const *)git_envp);
		posix_spawn_file_actions_destroy(&fa);
		if (r < 0)
			return r;
		int st;
		while (waitpid(pid, &st, 0) < 0)
			if (errno != EINTR)
				return negative_errno();
		/* 5: the entry is gone already */
		if (!WIFEXITED(st) || (WEXITSTATUS(st) != 0 && WEXITSTATUS(st) != 5))
			return -EIO;
	}
	return 0;
}
