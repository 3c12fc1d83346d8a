/* SPDX-License-Identifier: MIT */
#include "git-guard.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/escape.h"
#include "basic/fs-util.h"
#include "basic/macro.h"
#include "basic/path-util.h"
#include "basic/stat-util.h"
#include "basic/strbuf.h"
#include "git-guard-internal.h"
#include "policy.h"
#include "store-internal.h"
#include "store.h"

#define INCLUDE_DEPTH_MAX 10
#define INCLUDE_FILES_MAX 64
#define WALK_DEPTH_MAX	  64
#define EXTRA_REPOS_MAX	  32
#define ACCEPTED_FILE	  "git-accepted"
#define ACCEPTED_MAX	  (4 * 1024 * 1024)

/* ---- the check ---- */

struct repo {
	char *root, *gitdir, *hooks_path;
	char **includes;
	size_t n_includes;
	struct stat *files; /* what git reads (config, includes, hooks): their inodes */
	size_t n_files;
};

/* A file's content the user approved (a grant), so that later runs of the same turn, which see the
 * turn's records again, do not ask again for exactly that content. */
struct accepted {
	char *path;
	char *token; /* a hook's or gitfile's content hash, or a config's "key=value" */
};

struct guard {
	struct store *s;
	const char *turn_id;
	const struct git_guard_options *o;
	struct store_record *recs;
	size_t n_recs;
	struct git_guard_block *blocks;
	size_t n_blocks;
	struct repo *repos;
	size_t n_repos;
	/* where the last directory looked up lies: its git directory or the top of its work tree */
	char *loc_dir, *loc_gitdir, *loc_root;
	bool no_git;	      /* git is not installed: every config file a block */
	struct accepted *acc; /* files whose content the user approved earlier (any run) */
	size_t n_acc;
	struct strbuf acc_new; /* lines to append to ACCEPTED_FILE */
	size_t *extra;	       /* indices into repos: see load_extra() */
	size_t n_extra;
	bool extra_loaded;
};

static const struct store_record *find_record(const struct guard *g, const char *path)
{
	size_t lo = 0, hi = g->n_recs;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(g->recs[mid].path, path);
		if (c == 0)
			return &g->recs[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static int add_block(struct guard *g, const char *path, const char *undo, const char *what)
{
	for (size_t i = 0; i < g->n_blocks; i++) {
		struct git_guard_block *b = &g->blocks[i];
		if (strcmp(b->path, path) != 0)
			continue;
		if (strstr(b->what, what))
			return 0;
		_cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
		if (strbuf_printf(&sb, "%s; %s", b->what, what) < 0)
			return -ENOMEM;
		free(b->what);
		b->what = strbuf_steal(&sb);
		return b->what ? 0 : -ENOMEM;
	}
	struct git_guard_block *v = reallocarray(g->blocks, g->n_blocks + 1, sizeof *v);
	if (!v)
		return -ENOMEM;
	g->blocks = v;
	struct git_guard_block *b = &v[g->n_blocks];
	*b = (struct git_guard_block){0};
	b->path = strdup(path);
	b->undo = strdup(undo);
	b->what = strdup(what);
	if (!b->path || !b->undo || !b->what) {
		free(b->path);
		free(b->undo);
		free(b->what);
		return -ENOMEM;
	}
	g->n_blocks++;
	return 0;
}

/* Remember a config entry to remove from a blocked file (git_guard_remove_keys). */
static int add_unset(struct guard *g, const char *path, const struct git_config_entry *e)
{
	for (size_t i = 0; i < g->n_blocks; i++) {
		struct git_guard_block *b = &g->blocks[i];
		if (strcmp(b->path, path) != 0)
			continue;
		struct git_config_entry *v = reallocarray(b->unset, b->n_unset + 1, sizeof *v);
		if (!v)
			return -ENOMEM;
		b->unset = v;
		v[b->n_unset].key = strdup(e->key);
		v[b->n_unset].value = e->value ? strdup(e->value) : NULL;
		if (!v[b->n_unset].key || (e->value && !v[b->n_unset].value)) {
			free(v[b->n_unset].key);
			free(v[b->n_unset].value);
			return -ENOMEM;
		}
		b->n_unset++;
		return 0;
	}
	return -ENOENT;
}

static bool granted(const struct guard *g, const char *path)
{
	return g->o->policy && policy_granted(g->o->policy, path, POLICY_ACCESS_WRITE);
}

static bool file_hash(const char *path, char hex[65])
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	struct stat st;
	return fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && store_hash_fd(fd, hex) >= 0;
}

static bool is_accepted(const struct guard *g, const char *path, const char *token)
{
	for (size_t i = 0; i < g->n_acc; i++)
		if (!strcmp(g->acc[i].token, token) && !strcmp(g->acc[i].path, path))
			return true;
	return false;
}

/* Remember an approved token for path in this turn: "TURN PATH TOKEN\n", each escaped (no space
 * or newline is left). */
static void accept(struct guard *g, const char *path, const char *token)
{
	escape_appends(&g->acc_new, g->turn_id);
	strbuf_appendc(&g->acc_new, ' ');
	escape_appends(&g->acc_new, path);
	strbuf_appendc(&g->acc_new, ' ');
	escape_appends(&g->acc_new, token);
	strbuf_appendc(&g->acc_new, '\n');
}

/* A hook's or gitfile's content: granted now (remembered), or exactly this content before. */
static bool approved(struct guard *g, const char *path)
{
	char hex[65];
	if (!file_hash(path, hex))
		return granted(g, path);
	if (granted(g, path)) {
		accept(g, path, hex);
		return true;
	}
	return is_accepted(g, path, hex);
}

static int accepted_load(struct guard *g)
{
	_cleanup_strbuf_ struct strbuf p = STRBUF_INIT, c = STRBUF_INIT;
	if (strbuf_printf(&p, "%s/%s", store_session_dir(g->s), ACCEPTED_FILE) < 0)
		return -ENOMEM;
	_cleanup_close_ int fd = open(p.buf, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 || read_fd(fd, ACCEPTED_MAX, &c) < 0 || !c.len)
		return 0; /* nothing approved yet (or unreadable: ask again) */
	for (char *line = c.buf, *nl; line < c.buf + c.len; line = nl + 1) {
		nl = memchr(line, '\n', (size_t)(c.buf + c.len - line));
		if (!nl)
			break;
		*nl = '\0';
		/* only this turn's: "allow once" holds for the rest of the turn, not the session */
		char *t = strchr(line, ' ');
		if (!t)
			continue;
		*t = '\0';
		_cleanup_strbuf_ struct strbuf dturn = STRBUF_INIT;
		if (unescape_append(&dturn, line, strlen(line)) < 0 || !strbuf_cstr(&dturn) ||
		    strcmp(dturn.buf, g->turn_id) != 0)
			continue;
		line = t + 1;
		char *sp = strchr(line, ' ');
		if (!sp)
			continue;
		*sp = '\0';
		struct strbuf dp = STRBUF_INIT, dt = STRBUF_INIT;
		struct accepted *v = reallocarray(g->acc, g->n_acc + 1, sizeof *v);
		if (v)
			g->acc = v;
		if (!v || unescape_append(&dp, line, strlen(line)) < 0 ||
		    unescape_append(&dt, sp + 1, strlen(sp + 1)) < 0 || !strbuf_cstr(&dp) ||
		    !strbuf_cstr(&dt)) {
			strbuf_free(&dp);
			strbuf_free(&dt);
			continue;
		}
		v[g->n_acc].path = strbuf_steal(&dp);
		v[g->n_acc++].token = strbuf_steal(&dt);
	}
	return 0;
}

static int accepted_save(struct guard *g)
{
	_cleanup_strbuf_ struct strbuf p = STRBUF_INIT;
	if (!g->acc_new.len)
		return 0;
	if (g->acc_new.oom ||
	    strbuf_printf(&p, "%s/%s", store_session_dir(g->s), ACCEPTED_FILE) < 0)
		return -ENOMEM;
	_cleanup_close_ int fd =
	    open(p.buf, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return negative_errno();
	return write(fd, g->acc_new.buf, g->acc_new.len) == (ssize_t)g->acc_new.len ? 0 : -EIO;
}

static bool exists_at(int dfd, const char *name, mode_t type)
{
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return false;
	return !type || (st.st_mode & S_IFMT) == type;
}

/* What git accepts as a git directory: HEAD, and objects/ + refs/ or a commondir file. */
static bool is_gitdir(const char *dir)
{
	_cleanup_close_ int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || !exists_at(dfd, "HEAD", 0))
		return false;
	return exists_at(dfd, "commondir", S_IFREG) ||
	       (exists_at(dfd, "objects", S_IFDIR) && exists_at(dfd, "refs", S_IFDIR));
}

/* The git directory holding dir (or dir itself), else the top of the work tree around it. */
static int locate(struct guard *g, const char *dir, const char **ret_gitdir, const char **ret_root)
{
	if (!g->loc_dir || strcmp(g->loc_dir, dir) != 0) {
		free(g->loc_dir);
		free(g->loc_gitdir);
		free(g->loc_root);
		g->loc_gitdir = g->loc_root = NULL;
		if (!(g->loc_dir = strdup(dir)))
			return -ENOMEM;
		_cleanup_free_ char *d = strdup(dir);
		if (!d)
			return -ENOMEM;
		for (;;) {
			if (is_gitdir(d)) {
				g->loc_gitdir = strdup(d);
				break;
			}
			_cleanup_close_ int dfd = open(d, O_PATH | O_DIRECTORY | O_CLOEXEC);
			if (dfd >= 0 && exists_at(dfd, ".git", 0)) {
				g->loc_root = strdup(d);
				break;
			}
			char *slash = strrchr(d, '/');
			if (!slash || slash == d)
				break;
			*slash = '\0';
		}
	}
	*ret_gitdir = g->loc_gitdir;
	*ret_root = g->loc_root;
	return 0;
}

static int resolve_against(const char *base_dir, const char *home, const char *p, char **ret)
{
	_cleanup_strbuf_ struct strbuf j = STRBUF_INIT, n = STRBUF_INIT;
	int r;
	if (p[0] == '~' && p[1] == '/') {
		if (!home)
			return -ENOENT;
		r = path_join(home, p + 2, &j);
	} else {
		r = path_join(base_dir, p, &j);
	}
	if (r < 0 || (r = path_normalise(j.buf, &n)) < 0)
		return r;
	char *real = realpath(n.buf, NULL);
	*ret = real ? real : strbuf_steal(&n);
	return *ret ? 0 : -ENOMEM;
}

static int dir_of(const char *path, char **ret)
{
	const char *name;
	return path_split(path, ret, &name);
}

static int add_include(struct repo *r, char *path)
{
	for (size_t i = 0; i < r->n_includes; i++)
		if (!strcmp(r->includes[i], path)) {
			free(path);
			return 0;
		}
	char **v = reallocarray(r->includes, r->n_includes + 1, sizeof *v);
	if (!v) {
		free(path);
		return -ENOMEM;
	}
	r->includes = v;
	v[r->n_includes++] = path;
	return 1;
}

/* Read one config file of a repository: its hooks path, and the files it includes (recursively). */
/*
 * Could the file name a hooks path or include another? Key and section names cannot be split or
 * escaped in git's syntax, so without these words (any case) it does neither, and git need not be
 * started for it (once per run, for the repository's config).
 */
static bool may_redirect(const char *cfg)
{
	_cleanup_close_ int fd = open(cfg, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	_cleanup_strbuf_ struct strbuf c = STRBUF_INIT;
	if (fd < 0)
		return false;
	if (read_fd(fd, CONFIG_LIST_MAX, &c) < 0 || !strbuf_cstr(&c))
		return true;
	for (size_t i = 0; i < c.len; i++)
		c.buf[i] = (char)((c.buf[i] >= 'A' && c.buf[i] <= 'Z') ? c.buf[i] + 32 : c.buf[i]);
	return memmem(c.buf, c.len, "include", 7) || memmem(c.buf, c.len, "hookspath", 9);
}

static int repo_read_config(struct guard *g, struct repo *rp, const char *cfg, int depth)
{
	struct git_config_entry *v;
	size_t n;
	if (depth > INCLUDE_DEPTH_MAX || rp->n_includes >= INCLUDE_FILES_MAX ||
	    !may_redirect(cfg) || git_list_path(cfg, &v, &n) < 0)
		return 0;
	_cleanup_free_ char *cdir = NULL;
	int r = dir_of(cfg, &cdir);
	for (size_t i = 0; r >= 0 && i < n; i++) {
		if (!v[i].value || !v[i].value[0])
			continue;
		if (!strcmp(v[i].key, "core.hookspath")) {
			free(rp->hooks_path);
			rp->hooks_path = NULL;
			r = resolve_against(rp->root, g->o->home, v[i].value, &rp->hooks_path);
		} else if (!strcmp(v[i].key, "include.path") ||
			   (!strncmp(v[i].key, "includeif.", 10) &&
			    has_suffix(v[i].key, ".path"))) {
			char *inc = NULL;
			if (resolve_against(cdir, g->o->home, v[i].value, &inc) < 0)
				continue;
			_cleanup_free_ char *keep = strdup(inc);
			r = add_include(rp, inc);
			if (r > 0 && keep)
				r = repo_read_config(g, rp, keep, depth + 1);
		}
	}
	git_config_entries_free(v, n);
	return r < 0 ? r : 0;
}

static int add_file(struct repo *rp, int dfd, const char *name)
{
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
		return 0;
	struct stat *v = reallocarray(rp->files, rp->n_files + 1, sizeof *v);
	if (!v)
		return -ENOMEM;
	rp->files = v;
	v[rp->n_files++] = st;
	return 0;
}

static int add_dir_files(struct repo *rp, const char *dir, bool hooks)
{
	DIR *d = dir ? opendir(dir) : NULL;
	if (!d)
		return 0;
	int r = 0;
	struct dirent *de;
	while (r >= 0 && (de = readdir(d)))
		if (de->d_name[0] != '.' && (!hooks || hook_name(de->d_name)))
			r = add_file(rp, dirfd(d), de->d_name);
	closedir(d);
	return r;
}

/* The inodes of what git reads for the repository: another name of one would change it unseen. */
static int repo_collect_files(struct repo *rp)
{
	int r = 0;
	for (size_t i = 0; r >= 0 && i < rp->n_includes; i++)
		r = add_file(rp, AT_FDCWD, rp->includes[i]);
	if (r >= 0)
		r = add_dir_files(rp, rp->hooks_path, false);
	if (r >= 0 && rp->gitdir) {
		_cleanup_strbuf_ struct strbuf h = STRBUF_INIT;
		_cleanup_close_ int dfd = open(rp->gitdir, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (dfd >= 0 && (r = add_file(rp, dfd, "config")) >= 0)
			r = add_file(rp, dfd, "config.worktree");
		if (r >= 0 && strbuf_printf(&h, "%s/hooks", rp->gitdir) >= 0)
			r = add_dir_files(rp, h.buf, true);
	}
	return r;
}

static int repo_get(struct guard *g, const char *root, struct repo **ret)
{
	for (size_t i = 0; i < g->n_repos; i++)
		if (!strcmp(g->repos[i].root, root)) {
			*ret = &g->repos[i];
			return 0;
		}
	struct repo *v = reallocarray(g->repos, g->n_repos + 1, sizeof *v);
	if (!v)
		return -ENOMEM;
	g->repos = v;
	struct repo *rp = &v[g->n_repos];
	*rp = (struct repo){.root = strdup(root)};
	if (!rp->root)
		return -ENOMEM;
	g->n_repos++;
	*ret = rp;

	_cleanup_strbuf_ struct strbuf dotgit = STRBUF_INIT;
	if (strbuf_printf(&dotgit, "%s/.git", root) < 0)
		return -ENOMEM;
	struct stat st;
	if (lstat(dotgit.buf, &st) < 0)
		return 0;
	if (S_ISDIR(st.st_mode)) {
		rp->gitdir = strbuf_steal(&dotgit);
	} else if (S_ISREG(st.st_mode)) {
		_cleanup_close_ int fd = open(dotgit.buf, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		_cleanup_strbuf_ struct strbuf c = STRBUF_INIT;
		_cleanup_free_ char *t = NULL;
		if (fd < 0 || read_fd(fd, GITFILE_MAX, &c) < 0 ||
		    git_guard_parse_gitfile(c.buf ? c.buf : "", c.len, &t) < 0 ||
		    resolve_against(root, NULL, t, &rp->gitdir) < 0)
			return 0;
	} else {
		return 0;
	}
	static const char *const cfgs[] = {"config", "config.worktree", "commondir"};
	for (size_t i = 0; i < ELEMENTSOF(cfgs); i++) {
		_cleanup_strbuf_ struct strbuf p = STRBUF_INIT;
		if (strbuf_printf(&p, "%s/%s", rp->gitdir, cfgs[i]) < 0)
			return -ENOMEM;
		if (i < 2) {
			int r = repo_read_config(g, rp, p.buf, 0);
			if (r < 0)
				return r;
			continue;
		}
		/* a linked work tree: the common directory's config too */
		_cleanup_close_ int fd = open(p.buf, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		_cleanup_strbuf_ struct strbuf c = STRBUF_INIT;
		if (fd < 0 || read_fd(fd, GITFILE_MAX, &c) < 0 || !c.len)
			continue;
		while (c.len && c.buf[c.len - 1] == '\n')
			c.buf[--c.len] = '\0';
		_cleanup_free_ char *common = NULL;
		_cleanup_strbuf_ struct strbuf cc = STRBUF_INIT;
		if (resolve_against(rp->gitdir, NULL, c.buf, &common) < 0 ||
		    strbuf_printf(&cc, "%s/config", common) < 0)
			continue;
		int r = repo_read_config(g, rp, cc.buf, 0);
		if (r < 0)
			return r;
	}
	return repo_collect_files(rp);
}

static bool same_as_preimage(struct guard *g, const struct store_record *pre, const char *path)
{
	if (!pre || pre->kind != STORE_KIND_FILE || pre->not_backed_up)
		return false;
	_cleanup_close_ int a = store_record_content_open(g->s, g->turn_id, pre);
	_cleanup_close_ int b = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	struct stat sa, sb;
	if (a < 0 || b < 0 || fstat(a, &sa) < 0 || fstat(b, &sb) < 0 || !S_ISREG(sb.st_mode) ||
	    sa.st_size != sb.st_size || (sb.st_mode & 07777) != (pre->mode & 07777))
		return false;
	return fd_equal_contents(a, b) > 0;
}

/* A value of core.worktree that stays in the workspace only moves git within it (submodules). */
static bool inert_value(struct guard *g, const char *key, const char *value, const char *gitdir)
{
	if (strcmp(key, "core.worktree") != 0 || !value || !gitdir)
		return false;
	_cleanup_free_ char *t = NULL;
	return resolve_against(gitdir, NULL, value, &t) >= 0 && path_is_under(t, g->o->workspace);
}

static bool entry_in(const struct git_config_entry *v, size_t n, const struct git_config_entry *e)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i].key, e->key) &&
		    (v[i].value == e->value ||
		     (v[i].value && e->value && !strcmp(v[i].value, e->value))))
			return true;
	return false;
}

static int check_config(struct guard *g, const char *path, const struct store_record *pre,
			const char *undo, const char *gitdir)
{
	if (g->o->allow_exec_config)
		return 0;
	/* git writes its config by renaming a lock file: one name, never a link. Another name
	 * would let a later turn change it unseen. */
	struct stat st;
	if (lstat(path, &st) < 0)
		return 0; /* gone: nothing for git to read */
	bool grant = granted(g, path);
	if (!grant && (S_ISLNK(st.st_mode) || st.st_nlink > 1))
		return add_block(g, path, undo,
				 S_ISLNK(st.st_mode) ? "git-config: a symlink"
						     : "git-config: has other hard links");
	if (same_as_preimage(g, pre, path))
		return 0;
	struct git_config_entry *post = NULL, *old = NULL;
	size_t npost = 0, nold = 0;
	int r = g->no_git ? -ENOENT : git_list_path(path, &post, &npost);
	if (r == -ENOENT)
		g->no_git = true;
	if (r < 0)
		return add_block(g, path, undo,
				 g->no_git ? "git-config: changed (git is not installed to read it)"
					   : "git-config: changed and does not parse");
	if (pre && pre->kind == STORE_KIND_FILE && !pre->not_backed_up) {
		_cleanup_close_ int fd = store_record_content_open(g->s, g->turn_id, pre);
		if (fd < 0 || git_list_fd(fd, &old, &nold) < 0)
			old = NULL, nold = 0;
	}
	/* each new exec-capable entry: approved now (remembered), before, or a block */
	_cleanup_strbuf_ struct strbuf what = STRBUF_INIT;
	_cleanup_free_ size_t *blocked = calloc(npost + 1, sizeof *blocked);
	size_t nblocked = 0;
	if (!blocked) {
		git_config_entries_free(post, npost);
		git_config_entries_free(old, nold);
		return -ENOMEM;
	}
	for (size_t i = 0; i < npost; i++) {
		const struct git_config_entry *e = &post[i];
		if (!git_guard_exec_key(e->key) || entry_in(old, nold, e) ||
		    inert_value(g, e->key, e->value, gitdir))
			continue;
		_cleanup_strbuf_ struct strbuf kv = STRBUF_INIT;
		strbuf_appends(&kv, e->key);
		if (e->value) {
			strbuf_appendc(&kv, '=');
			strbuf_appends(&kv, e->value);
		}
		if (!strbuf_cstr(&kv)) {
			what.oom = true;
			break;
		}
		if (grant)
			accept(g, path, kv.buf);
		if (grant || is_accepted(g, path, kv.buf))
			continue;
		strbuf_appends(&what, what.len ? "; " : "git-config: ");
		strbuf_appends(&what, kv.buf);
		blocked[nblocked++] = i;
	}
	r = what.oom ? -ENOMEM : what.len ? add_block(g, path, undo, what.buf) : 0;
	for (size_t i = 0; r >= 0 && i < nblocked; i++)
		r = add_unset(g, path, &post[blocked[i]]);
	git_config_entries_free(post, npost);
	git_config_entries_free(old, nold);
	return r;
}

static int check_hook(struct guard *g, const char *path, const struct store_record *pre,
		      const char *undo)
{
	if (g->o->allow_hooks || approved(g, path))
		return 0;
	struct stat st;
	if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink > 1)
		return add_block(g, path, undo, "git-hook: has other hard links");
	if (same_as_preimage(g, pre, path))
		return 0;
	return add_block(g, path, undo, "git-hook: new or changed");
}

/* Is target (a real path) a git directory brokered guards like ".git" itself: ".git", a
 * submodule's ".git/modules/NAME" or, with worktrees, a linked work tree's ".git/worktrees/NAME"?
 */
static bool guarded_gitdir(struct guard *g, const char *target, bool worktrees)
{
	if (!path_is_under(target, g->o->workspace))
		return false;
	if (git_guard_classify(target) == GIT_GUARD_GITFILE)
		return true;
	const char *m = strstr(target, "/.git/modules/"), *w = strstr(target, "/.git/worktrees/");
	if (m && m[14] && m[14] != '/')
		return true;
	return worktrees && w && w[16] && w[16] != '/' && !strchr(w + 16, '/');
}

/* A ".git" file may name only a git directory brokered guards like ".git" itself. */
static int check_gitfile(struct guard *g, const char *path, const struct store_record *pre,
			 const char *undo)
{
	if (approved(g, path) || same_as_preimage(g, pre, path))
		return 0;
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	_cleanup_strbuf_ struct strbuf c = STRBUF_INIT, what = STRBUF_INIT;
	_cleanup_free_ char *t = NULL, *dir = NULL, *target = NULL;
	if (fd < 0)
		return 0;
	int r = read_fd(fd, GITFILE_MAX, &c);
	if (r == -EFBIG)
		return add_block(g, path, undo, "gitfile: too large to check");
	if (r < 0 || git_guard_parse_gitfile(c.buf ? c.buf : "", c.len, &t) < 0)
		return 0; /* git refuses a .git file that is not "gitdir: ..." */
	if ((r = dir_of(path, &dir)) < 0 || (r = resolve_against(dir, NULL, t, &target)) < 0)
		return r;
	if (guarded_gitdir(g, target, true))
		return 0;
	strbuf_printf(&what, "gitfile: gitdir: %s", t);
	return what.oom ? -ENOMEM : add_block(g, path, undo, what.buf);
}

/* A gitdir's "commondir" (where git reads the shared config and hooks) may name only a git
 * directory brokered guards like ".git" itself, as a linked work tree's "../.." does. */
static int check_commondir(struct guard *g, const char *path, const char *gitdir,
			   const struct store_record *pre, const char *undo)
{
	if (approved(g, path) || same_as_preimage(g, pre, path))
		return 0;
	struct stat st;
	if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode))
		return add_block(g, path, undo, "commondir: not a regular file");
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	_cleanup_strbuf_ struct strbuf c = STRBUF_INIT, what = STRBUF_INIT;
	_cleanup_free_ char *target = NULL;
	if (fd < 0)
		return 0;
	int r = read_fd(fd, GITFILE_MAX, &c);
	if (r < 0)
		return add_block(g, path, undo, "commondir: unreadable or too large to check");
	while (c.len && (c.buf[c.len - 1] == '\n' || c.buf[c.len - 1] == '\r'))
		c.buf[--c.len] = '\0';
	if (!c.len || memchr(c.buf, '\n', c.len) || memchr(c.buf, '\0', c.len))
		return add_block(g, path, undo, "commondir: not one path");
	if ((r = resolve_against(gitdir, NULL, c.buf, &target)) < 0)
		return r;
	/* not a linked work tree's directory: its "config" is not guarded as one */
	if (guarded_gitdir(g, target, false))
		return 0;
	strbuf_printf(&what, "commondir: %s", c.buf);
	return what.oom ? -ENOMEM : add_block(g, path, undo, what.buf);
}

/* Is path a hook under the repository's core.hooksPath, or a file its config includes? 1: it
 * was judged. */
static int repo_file(struct guard *g, size_t idx, const char *path, const struct stat *st,
		     const struct store_record *pre, const char *undo)
{
	const struct repo *rp = &g->repos[idx];
	for (size_t i = 0; st->st_nlink > 1 && S_ISREG(st->st_mode) && i < rp->n_files; i++)
		if (stat_inode_same(&rp->files[i], st)) {
			int r = add_block(g, path, undo, "git: another name of a file git reads");
			return r < 0 ? r : 1;
		}
	if (rp->hooks_path && path_is_under(path, rp->hooks_path) && strcmp(path, rp->hooks_path)) {
		int r = check_hook(g, path, pre, undo);
		return r < 0 ? r : 1;
	}
	for (size_t i = 0; i < rp->n_includes; i++)
		if (!strcmp(rp->includes[i], path)) {
			int r = check_config(g, path, pre, undo, rp->gitdir);
			return r < 0 ? r : 1;
		}
	return 0;
}

static int add_extra(struct guard *g, const char *root)
{
	struct repo *rp;
	int r = repo_get(g, root, &rp);
	if (r < 0)
		return r;
	size_t *v = reallocarray(g->extra, g->n_extra + 1, sizeof *v);
	if (!v)
		return -ENOMEM;
	g->extra = v;
	v[g->n_extra++] = (size_t)(rp - g->repos);
	return 0;
}

/*
 * Repositories whose includes or hooksPath may name a file outside their own work tree: the one
 * around the workspace and those directly in it (the first EXTRA_REPOS_MAX).
 */
static int load_extra(struct guard *g)
{
	if (g->extra_loaded)
		return 0;
	g->extra_loaded = true;
	const char *gitdir, *root;
	int r = locate(g, g->o->workspace, &gitdir, &root);
	if (r < 0)
		return r;
	if (root) {
		_cleanup_free_ char *copy = strdup(root);
		if (!copy || (r = add_extra(g, copy)) < 0)
			return copy ? r : -ENOMEM;
	}
	DIR *d = opendir(g->o->workspace);
	if (!d)
		return 0;
	struct dirent *de;
	while (r >= 0 && g->n_extra < EXTRA_REPOS_MAX && (de = readdir(d))) {
		_cleanup_strbuf_ struct strbuf p = STRBUF_INIT;
		/* only a directory, or a symlink to one, can hold a ".git" */
		if (dot_or_dot_dot(de->d_name) ||
		    (de->d_type != DT_DIR && de->d_type != DT_LNK && de->d_type != DT_UNKNOWN))
			continue;
		if (strbuf_printf(&p, "%s/%s/.git", g->o->workspace, de->d_name) < 0) {
			r = -ENOMEM;
			break;
		}
		if (faccessat(dirfd(d), p.buf, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		p.buf[p.len - 5] = '\0';
		r = add_extra(g, p.buf);
	}
	closedir(d);
	return r;
}

/* One file as it is now (st: its lstat(), which the caller has just made), whose state before the
 * turn is pre (NULL: it did not exist). */
static int consider(struct guard *g, const char *path, const struct stat *st,
		    const struct store_record *pre, const char *undo)
{
	if (!(S_ISREG(st->st_mode) || S_ISLNK(st->st_mode)))
		return 0;
	_cleanup_free_ char *dir = NULL;
	const char *name;
	int r = path_split(path, &dir, &name);
	if (r < 0)
		return 0;
	if (!strcmp(name, ".git")) {
		if (S_ISLNK(st->st_mode))
			return granted(g, path) ? 0
						: add_block(g, path, undo, "gitfile: a symlink");
		return check_gitfile(g, path, pre, undo);
	}
	const char *gitdir, *root;
	if ((r = locate(g, dir, &gitdir, &root)) < 0)
		return r;
	if (gitdir) {
		const char *rel = path + strlen(gitdir) + 1;
		if (config_rel(rel))
			return check_config(g, path, pre, undo, gitdir);
		if (hook_rel(rel))
			return check_hook(g, path, pre, undo);
		if (!strcmp(rel, "commondir"))
			return check_commondir(g, path, gitdir, pre, undo);
		return 0;
	}
	size_t own = SIZE_MAX;
	if (root) {
		struct repo *rp;
		_cleanup_free_ char *root_copy = strdup(root);
		if (!root_copy)
			return -ENOMEM;
		if ((r = repo_get(g, root_copy, &rp)) < 0)
			return r;
		own = (size_t)(rp - g->repos);
		if ((r = repo_file(g, own, path, st, pre, undo)) != 0)
			return r < 0 ? r : 0;
	}
	if ((r = load_extra(g)) < 0)
		return r;
	for (size_t i = 0; i < g->n_extra; i++)
		if (g->extra[i] != own && (r = repo_file(g, g->extra[i], path, st, pre, undo)) != 0)
			return r < 0 ? r : 0;
	return 0;
}

/* Everything below a directory the turn brought in under a new name; recorded files are judged by
 * their own records. */
static int walk(struct guard *g, const char *dir, const char *undo, int depth)
{
	if (depth > WALK_DEPTH_MAX)
		return add_block(g, dir, undo, "git: tree too deep to check");
	DIR *d = opendir_at(AT_FDCWD, dir);
	if (!d)
		return errno == ENOMEM ? -ENOMEM : 0;
	int r = 0;
	struct dirent *de;
	while (r >= 0 && (de = readdir(d))) {
		if (dot_or_dot_dot(de->d_name))
			continue;
		_cleanup_strbuf_ struct strbuf p = STRBUF_INIT;
		if (strbuf_printf(&p, "%s/%s", dir, de->d_name) < 0) {
			r = -ENOMEM;
			break;
		}
		/* A recorded file is judged by its record: no lstat() for it, nor for a directory.
		 */
		if (de->d_type == DT_DIR) {
			r = walk(g, p.buf, undo, depth + 1);
			continue;
		}
		if (de->d_type != DT_UNKNOWN && find_record(g, p.buf))
			continue;
		struct stat st;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISDIR(st.st_mode))
			r = walk(g, p.buf, undo, depth + 1);
		else if (!find_record(g, p.buf))
			r = consider(g, p.buf, &st, NULL, undo);
	}
	closedir(d);
	return r;
}

/* A directory that became a git directory in this turn: its hooks and config are all new. */
static int born(struct guard *g, const char *gitdir, const char *undo)
{
	static const char *const cfgs[] = {"config", "config.worktree"};
	for (size_t i = 0; i < ELEMENTSOF(cfgs); i++) {
		_cleanup_strbuf_ struct strbuf p = STRBUF_INIT;
		if (strbuf_printf(&p, "%s/%s", gitdir, cfgs[i]) < 0)
			return -ENOMEM;
		int r = check_config(g, p.buf, NULL, undo, gitdir);
		if (r < 0)
			return r;
	}
	_cleanup_strbuf_ struct strbuf h = STRBUF_INIT;
	if (strbuf_printf(&h, "%s/hooks", gitdir) < 0)
		return -ENOMEM;
	DIR *d = opendir(h.buf);
	if (!d)
		return 0;
	int r = 0;
	struct dirent *de;
	while (r >= 0 && (de = readdir(d))) {
		_cleanup_strbuf_ struct strbuf p = STRBUF_INIT;
		struct stat st;
		if (!hook_name(de->d_name) || de->d_name[0] == '.' ||
		    strbuf_printf(&p, "%s/%s", h.buf, de->d_name) < 0 ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    S_ISDIR(st.st_mode))
			continue;
		r = check_hook(g, p.buf, NULL, undo);
	}
	closedir(d);
	return r;
}

static bool gitdir_defining(const char *name)
{
	return !strcmp(name, "HEAD") || !strcmp(name, "objects") || !strcmp(name, "refs") ||
	       !strcmp(name, "commondir");
}

static int cmp_block(const void *a, const void *b)
{
	return strcmp(((const struct git_guard_block *)a)->path,
		      ((const struct git_guard_block *)b)->path);
}

static void guard_done(struct guard *g)
{
	store_records_free(g->recs, g->n_recs);
	for (size_t i = 0; i < g->n_repos; i++) {
		free(g->repos[i].root);
		free(g->repos[i].gitdir);
		free(g->repos[i].hooks_path);
		for (size_t k = 0; k < g->repos[i].n_includes; k++)
			free(g->repos[i].includes[k]);
		free(g->repos[i].includes);
		free(g->repos[i].files);
	}
	free(g->repos);
	free(g->extra);
	for (size_t i = 0; i < g->n_acc; i++) {
		free(g->acc[i].path);
		free(g->acc[i].token);
	}
	free(g->acc);
	strbuf_free(&g->acc_new);
	free(g->loc_dir);
	free(g->loc_gitdir);
	free(g->loc_root);
}

struct seen_list {
	struct store_seen *v; /* what lstat() saw, path NULL */
	size_t n, cap;
	bool oom;
	struct store_gone *gone;
};

/* The check looks only at paths that exist (and the walk only asks about those): a record of a
 * path that is gone is not kept, so that memory follows what the turn left, not what it removed.
 * What the lstat() saw is kept in the order of the records kept, which is their seq. */
static bool path_exists(const char *path, void *userdata)
{
	struct seen_list *l = userdata;
	struct stat st;
	if (store_gone_lstat(l->gone, path, &st) < 0)
		return false;
	if (l->n == l->cap) {
		size_t ncap = l->cap ? l->cap * 2 : 64;
		struct store_seen *v = reallocarray(l->v, ncap, sizeof *v);
		if (!v) {
			l->oom = true;
			return false;
		}
		l->v = v;
		l->cap = ncap;
	}
	l->v[l->n] = (struct store_seen){0};
	store_seen_set(&l->v[l->n++], &st);
	return true;
}

/* What was seen of the paths kept, sorted by path as the records are, each with its path (taken
 * from its record): the commit's post-states. */
static int seen_take(struct guard *g, struct seen_list *l, struct store_seen **ret, size_t *ret_n)
{
	struct store_seen *v = calloc(g->n_recs ? g->n_recs : 1, sizeof *v);
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < g->n_recs; i++) {
		v[i] = l->v[g->recs[i].seq];
		v[i].path = TAKE_PTR(g->recs[i].path);
	}
	*ret = v;
	*ret_n = g->n_recs;
	return 0;
}

int git_guard_check(struct store *s, const char *turn_id, const struct git_guard_options *o,
		    struct git_guard_block **ret, size_t *ret_n, struct store_seen **ret_seen,
		    size_t *ret_n_seen)
{
	struct guard g = {.s = s, .turn_id = turn_id, .o = o};
	*ret = NULL;
	*ret_n = 0;
	if (ret_seen) {
		*ret_seen = NULL;
		*ret_n_seen = 0;
	}
	struct seen_list seen = {0};
	int r = store_gone_new(&seen.gone);
	if (r >= 0)
		r = store_turn_records_filter(s, turn_id, path_exists, &seen, &g.recs, &g.n_recs);
	store_gone_free(seen.gone);
	if (r >= 0 && seen.oom)
		r = -ENOMEM;
	if (r >= 0)
		r = accepted_load(&g);
	const char *walked = NULL; /* the last tree walked: trees below it were walked with it */
	for (size_t i = 0; r >= 0 && i < g.n_recs; i++) {
		const struct store_record *rec = &g.recs[i];
		if (rec->seq >= seen.n) {
			r = -EINVAL; /* not a record path_exists() kept */
			break;
		}
		const struct store_seen *sn = &seen.v[rec->seq];
		struct stat st = {.st_mode = sn->mode,
				  .st_nlink = sn->nlink,
				  .st_ino = sn->ino,
				  .st_dev = sn->dev};
		if (!S_ISDIR(st.st_mode)) {
			r = consider(&g, rec->path, &st, rec, rec->path);
		} else if ((rec->kind != STORE_KIND_DIR || rec->ino != (uint64_t)st.st_ino) &&
			   !(walked && path_is_under(rec->path, walked))) {
			walked = rec->path;
			r = walk(&g, rec->path, rec->path, 0);
		}
		/* HEAD, objects, refs or commondir made here: the directory may have become a
		 * gitdir */
		_cleanup_free_ char *dir = NULL;
		const char *name;
		if (r >= 0 && rec->kind == STORE_KIND_ABSENT &&
		    path_split(rec->path, &dir, &name) >= 0 && gitdir_defining(name) &&
		    is_gitdir(dir))
			r = born(&g, dir, rec->path);
	}
	if (r >= 0)
		r = accepted_save(&g);
	if (r >= 0 && ret_seen)
		r = seen_take(&g, &seen, ret_seen, ret_n_seen);
	free(seen.v);
	if (r >= 0) {
		if (g.n_blocks)
			qsort(g.blocks, g.n_blocks, sizeof *g.blocks, cmp_block);
		*ret = TAKE_PTR(g.blocks);
		*ret_n = g.n_blocks;
		g.n_blocks = 0;
	}
	git_guard_blocks_free(g.blocks, g.n_blocks);
	guard_done(&g);
	return r < 0 ? r : 0;
}

void git_guard_blocks_free(struct git_guard_block *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		git_config_entries_free(v[i].unset, v[i].n_unset);
		free(v[i].path);
		free(v[i].undo);
		free(v[i].what);
	}
	free(v);
}
