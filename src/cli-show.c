/* SPDX-License-Identifier: MIT */
/* show and diff: what a turn changed, for people and as git-style diffs (DESIGN section 10). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/fs-util.h"
#include "basic/json-write.h"
#include "basic/macro.h"
#include "basic/path-util.h"
#include "basic/strbuf.h"
#include "cli-store.h"
#include "cli.h"
#include "git-guard.h"
#include "log.h"
#include "store.h"

/* ---- how show and diff name paths ---- */

/*
 * Paths relative to the workspace, as git names them relative to the top of the work tree; paths
 * outside it, and all of them with --absolute, stay absolute.
 */
struct view {
	char *workspace; /* real path, or NULL: every path absolute */
	bool all;	 /* --all: also paths the turn created and removed again */
};

static void view_init(struct view *v, const struct opts *o)
{
	const char *ws = o->workspace ? o->workspace : getenv("BROKERED_WORKSPACE");
	*v = (struct view){.all = o->all};
	if (!o->absolute)
		v->workspace = realpath(ws ? ws : ".", NULL);
}

static const char *view_path(const struct view *v, const char *p)
{
	if (!v->workspace || !path_is_under(p, v->workspace))
		return p;
	size_t n = strlen(v->workspace);
	if (p[n] == '\0')
		return ".";
	return n == 1 ? p + 1 : p + n + 1;
}

/* The state of a path now, as a record (kind, mode, owner, symlink target). */
static void now_record(const char *path, struct store_record *ret, char *target, size_t n)
{
	struct stat st;
	*ret = (struct store_record){.path = (char *)path, .kind = STORE_KIND_ABSENT};
	if (lstat(path, &st) < 0)
		return;
	ret->kind = S_ISREG(st.st_mode)	  ? STORE_KIND_FILE
		    : S_ISDIR(st.st_mode) ? STORE_KIND_DIR
		    : S_ISLNK(st.st_mode) ? STORE_KIND_SYMLINK
					  : STORE_KIND_OTHER;
	ret->mode = st.st_mode;
	ret->uid = st.st_uid;
	ret->gid = st.st_gid;
	if (S_ISLNK(st.st_mode)) {
		ssize_t k = readlink(path, target, n - 1);
		target[k > 0 ? k : 0] = '\0';
		ret->target = target;
	}
}

/* Created by the turn and gone again when it ended (a `sed -i` or `ln -sf` temp file); for a
 * turn still open, gone now. */
static bool transient(const struct store_record *pre, const struct store_record *post,
		      bool committed)
{
	if (pre->kind != STORE_KIND_ABSENT)
		return false;
	if (committed)
		return !post || post->kind == STORE_KIND_ABSENT;
	struct stat st;
	return lstat(pre->path, &st) < 0 && errno == ENOENT;
}

/* ---- diff: git's format, pre-image against the path as it is now ---- */

struct side {
	enum store_kind kind;
	uint32_t mode, uid, gid;
	const char *target; /* symlink */
	const char *file;   /* regular file: where its content is; NULL: not backed up */
};

static const struct side side_absent = {.kind = STORE_KIND_ABSENT};

/* A symlink's permission bits mean nothing on Linux: 120000, as git writes it. */
static uint32_t side_mode(enum store_kind k, uint32_t mode)
{
	return k == STORE_KIND_SYMLINK ? S_IFLNK : mode;
}

/* Counts for --stat, per path. */
struct stat_line {
	char *name;
	uint64_t ins, del;
	bool binary;
};

struct stat_list {
	struct stat_line *v;
	size_t n, cap;
};

static void stat_list_free(struct stat_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].name);
	free(l->v);
}

static struct stat_line *stat_list_add(struct stat_list *l, const char *name)
{
	if (l->n > 0 && strcmp(l->v[l->n - 1].name, name) == 0)
		return &l->v[l->n - 1]; /* a type change is two blocks of one path */
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		struct stat_line *v = reallocarray(l->v, cap, sizeof *v);
		if (!v)
			return NULL;
		l->v = v;
		l->cap = cap;
	}
	struct stat_line *e = &l->v[l->n];
	*e = (struct stat_line){.name = strdup(name)};
	if (!e->name)
		return NULL;
	l->n++;
	return e;
}

/* Same bytes? Reads both files in chunks. */
static int files_equal(const char *a, const char *b)
{
	_cleanup_close_ int fa = open(a, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	_cleanup_close_ int fb = open(b, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	struct stat sa, sb;
	if (fa < 0 || fb < 0 || fstat(fa, &sa) < 0 || fstat(fb, &sb) < 0)
		return negative_errno();
	if (sa.st_size != sb.st_size)
		return 0;
	return fd_equal_contents(fa, fb);
}

/* diff -u of two files with git's labels; out_fd -1: to our stdout, else into that pipe. */
static int spawn_diff(const char *old, const char *new, const char *label_a, const char *label_b,
		      int out_fd, pid_t *ret_pid)
{
	const char *argv[] = {"diff", "-u", "--label", label_a, "--label", label_b, old, new, NULL};
	posix_spawn_file_actions_t fa;
	int r = posix_spawn_file_actions_init(&fa);
	if (r != 0)
		return -r;
	if (out_fd >= 0)
		r = posix_spawn_file_actions_adddup2(&fa, out_fd, STDOUT_FILENO);
	fflush(stdout);
	if (r == 0)
		r = posix_spawnp(ret_pid, "diff", &fa, NULL, (char **)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	return -r;
}

static int wait_diff(pid_t pid)
{
	int status;
	if (pid <= 0) /* never started: waitpid(-1) would reap any child */
		return -ECHILD;
	if (RETRY_EINTR(waitpid(pid, &status, 0)) < 0)
		return negative_errno();
	/* The reader went away (`| head`): stop quietly, as git does. */
	if (WIFSIGNALED(status) && WTERMSIG(status) == SIGPIPE)
		return -EPIPE;
	return WIFEXITED(status) && WEXITSTATUS(status) <= 1 ? 0 : -EIO;
}

/* Run diff and count its added and removed lines (the hunks, not the --- +++ header). */
static int count_diff(const char *old, const char *new, struct stat_line *e)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return negative_errno();
	pid_t pid = -1;
	int r = spawn_diff(old, new, "a", "b", p[1], &pid);
	close(p[1]);
	if (r < 0) {
		close(p[0]);
		return r;
	}
	FILE *f = fdopen(p[0], "r");
	if (!f) {
		r = negative_errno();
		close(p[0]);
	}
	char *line = NULL;
	size_t cap = 0;
	bool hunks = false;
	while (f && getline(&line, &cap, f) > 0) {
		if (!hunks && strncmp(line, "Binary files ", 13) == 0)
			e->binary = true;
		else if (!hunks)
			hunks = strncmp(line, "@@", 2) == 0;
		else if (line[0] == '+')
			e->ins++;
		else if (line[0] == '-')
			e->del++;
	}
	free(line);
	if (f)
		fclose(f);
	int w = wait_diff(pid);
	return r < 0 ? r : w;
}

static int diff_files(const struct side *a, const struct side *b, const char *label,
		      struct stat_line *e)
{
	const char *old = a->kind == STORE_KIND_FILE ? a->file : "/dev/null";
	const char *new = b->kind == STORE_KIND_FILE ? b->file : "/dev/null";
	if (e)
		return count_diff(old, new, e);
	_cleanup_free_ char *la = NULL, *lb = NULL;
	if (asprintf(&la, "%s%s", a->kind == STORE_KIND_FILE ? "a/" : "/dev/null",
		     a->kind == STORE_KIND_FILE ? label : "") < 0 ||
	    asprintf(&lb, "%s%s", b->kind == STORE_KIND_FILE ? "b/" : "/dev/null",
		     b->kind == STORE_KIND_FILE ? label : "") < 0)
		return -ENOMEM;
	pid_t pid = -1;
	int r = spawn_diff(old, new, la, lb, -1, &pid);
	return r < 0 ? r : wait_diff(pid);
}

/* A symlink's target is its content, one line without a newline, as git shows it. */
static void diff_symlinks(const struct side *a, const struct side *b, const char *label,
			  struct stat_line *e)
{
	bool had = a->kind == STORE_KIND_SYMLINK, has = b->kind == STORE_KIND_SYMLINK;
	if (e) {
		e->del += had;
		e->ins += has;
		return;
	}
	printf("--- %s", had ? "a/" : "/dev/null");
	if (had)
		cli_print_path(stdout, label);
	printf("\n+++ %s", has ? "b/" : "/dev/null");
	if (has)
		cli_print_path(stdout, label);
	printf("\n@@ -%s +%s @@\n", had ? "1" : "0,0", has ? "1" : "0,0");
	if (had) {
		putchar('-');
		cli_print_path(stdout, a->target ? a->target : "");
		puts("\n\\ No newline at end of file");
	}
	if (has) {
		putchar('+');
		cli_print_path(stdout, b->target ? b->target : "");
		puts("\n\\ No newline at end of file");
	}
}

/*
 * One path: `diff --git` header, the metadata lines git prints (new/deleted file mode, old/new
 * mode; old/new owner is brokered's own), then the content. Nothing when nothing differs.
 * Modes are the full st_mode in octal, as git writes them (100644, 120000), with the real
 * permission bits of every type. With sl (--stat), only a count per path.
 */
static int diff_block(const char *label, const struct side *a, const struct side *b,
		      struct stat_list *sl)
{
	bool had = a->kind != STORE_KIND_ABSENT, has = b->kind != STORE_KIND_ABSENT;
	if (!had && !has)
		return 0;
	if (had && has && a->kind != b->kind) {
		/* A type change is a removal and a creation, as git shows it. */
		int r = diff_block(label, a, &side_absent, sl);
		return r < 0 ? r : diff_block(label, &side_absent, b, sl);
	}
	enum store_kind k = had ? a->kind : b->kind;
	if (k == STORE_KIND_DIR && !(had && has))
		return 0; /* a directory's creation or removal shows in the paths below it */
	_cleanup_strbuf_ struct strbuf meta = STRBUF_INIT;
	if (!had)
		strbuf_printf(&meta, "new file mode %06" PRIo32 "\n", b->mode);
	else if (!has)
		strbuf_printf(&meta, "deleted file mode %06" PRIo32 "\n", a->mode);
	else if (a->mode != b->mode)
		strbuf_printf(&meta, "old mode %06" PRIo32 "\nnew mode %06" PRIo32 "\n", a->mode,
			      b->mode);
	if (had && has && (a->uid != b->uid || a->gid != b->gid))
		strbuf_printf(
		    &meta, "old owner %" PRIu32 ":%" PRIu32 "\nnew owner %" PRIu32 ":%" PRIu32 "\n",
		    a->uid, a->gid, b->uid, b->gid);
	if (meta.oom)
		return -ENOMEM;
	bool lost = k == STORE_KIND_FILE && had && !a->file;
	int same = 1;
	if (k == STORE_KIND_FILE && had && has && !lost)
		same = files_equal(a->file, b->file);
	else if (k == STORE_KIND_FILE)
		same = 0;
	else if (k == STORE_KIND_SYMLINK)
		same = had && has &&
		       strcmp(a->target ? a->target : "", b->target ? b->target : "") == 0;
	if (same < 0)
		return same;
	if (same && !lost && meta.len == 0)
		return 0;
	if (sl) {
		struct stat_line *e = stat_list_add(sl, label);
		if (!e)
			return -ENOMEM;
		if (lost || same)
			return 0;
		if (k == STORE_KIND_FILE)
			return diff_files(a, b, label, e);
		diff_symlinks(a, b, label, e);
		return 0;
	}
	/* a/ and b/ go before the path as git writes them; an absolute path keeps its own '/'. */
	const char *l = label[0] == '/' ? label + 1 : label;
	printf("diff --git a/");
	cli_print_path(stdout, l);
	printf(" b/");
	cli_print_path(stdout, l);
	putchar('\n');
	fputs(strbuf_cstr(&meta), stdout);
	if (lost)
		puts("(not backed up: no content diff)");
	else if (!same && k == STORE_KIND_FILE)
		return diff_files(a, b, l, NULL);
	else if (!same)
		diff_symlinks(a, b, l, NULL);
	return 0;
}

/* git's --stat: " name | N +++--" per path, then the totals; bars scaled to 50 columns. */
static void print_stat(const struct stat_list *l)
{
	size_t width = 0;
	uint64_t ins = 0, del = 0, most = 0;
	for (size_t i = 0; i < l->n; i++) {
		width = MAX(width, strlen(l->v[i].name));
		ins += l->v[i].ins;
		del += l->v[i].del;
		most = MAX(most, l->v[i].ins + l->v[i].del);
	}
	for (size_t i = 0; i < l->n; i++) {
		const struct stat_line *e = &l->v[i];
		putchar(' ');
		cli_print_path(stdout, e->name);
		printf("%*s | ", (int)(width - strlen(e->name)), "");
		if (e->binary) {
			puts("Bin");
			continue;
		}
		uint64_t n = e->ins + e->del, plus = e->ins, minus = e->del;
		if (most > 50) {
			plus = (e->ins * 50 + most - 1) / most;
			minus = (e->del * 50 + most - 1) / most;
		}
		printf("%" PRIu64 "%s", n, n ? " " : "");
		for (uint64_t k = 0; k < plus; k++)
			putchar('+');
		for (uint64_t k = 0; k < minus; k++)
			putchar('-');
		putchar('\n');
	}
	printf(" %zu file%s changed", l->n, l->n == 1 ? "" : "s");
	if (ins)
		printf(", %" PRIu64 " insertion%s(+)", ins, ins == 1 ? "" : "s");
	if (del)
		printf(", %" PRIu64 " deletion%s(-)", del, del == 1 ? "" : "s");
	putchar('\n');
}

/* Everything one turn recorded, read once for show and diff. */
struct turn_view {
	char *id;
	struct store_turn_info info;
	struct store_record *pre, *post;
	size_t npre, npost;
};

static void turn_view_done(struct turn_view *t)
{
	free(t->id);
	free(t->info.id);
	free(t->info.message);
	store_records_free(t->pre, t->npre);
	store_records_free(t->post, t->npost);
}

static int turn_view_load(const struct opts *o, const char *arg, struct store **ret_store,
			  struct turn_view *ret)
{
	struct store *s;
	*ret = (struct turn_view){0};
	if (cli_store_open(o, &s) < 0)
		return 1;
	int r = cli_store_resolve_turn(s, arg, &ret->id) < 0 ? 1 : 0;
	if (!r && (store_turn_info_get(s, ret->id, &ret->info) < 0 ||
		   store_turn_records(s, ret->id, &ret->pre, &ret->npre) < 0 ||
		   store_turn_post(s, ret->id, &ret->post, &ret->npost) < 0))
		r = (log_error("Failed to read turn %s", ret->id), 1);
	if (r) {
		store_close(s);
		turn_view_done(ret);
		return r;
	}
	*ret_store = s;
	return 0;
}

static const struct store_record *post_of(const struct turn_view *t, const char *path)
{
	for (size_t i = 0; i < t->npost; i++)
		if (strcmp(t->post[i].path, path) == 0)
			return &t->post[i];
	return NULL;
}

static bool hidden(const struct view *v, const struct turn_view *t, const struct store_record *pre)
{
	return !v->all && transient(pre, post_of(t, pre->path), t->info.committed);
}

/* diff (or its --stat) of every path of the turn under one of paths (none: all). */
static int diff_turn(struct store *s, const struct view *v, const struct turn_view *t, char **paths,
		     size_t np, struct stat_list *sl)
{
	int ret = 0;
	for (size_t i = 0; i < t->npre; i++) {
		const struct store_record *pre = &t->pre[i];
		if ((np > 0 && !cli_under_any(pre->path, paths, np)) || hidden(v, t, pre))
			continue;
		_cleanup_free_ char *obj = NULL;
		if (pre->kind == STORE_KIND_FILE && !pre->not_backed_up &&
		    store_record_content_path(s, t->info.id, pre, &obj) == -ENOMEM)
			return log_error_errno(ENOMEM, "Out of memory"), 1;
		struct side a = {.kind = pre->kind,
				 .mode = side_mode(pre->kind, pre->mode),
				 .uid = pre->uid,
				 .gid = pre->gid,
				 .target = pre->target,
				 .file = obj};
		char target[BROKERED_PATH_MAX];
		struct store_record now;
		now_record(pre->path, &now, target, sizeof target);
		struct side b = {.kind = now.kind,
				 .mode = side_mode(now.kind, now.mode),
				 .uid = now.uid,
				 .gid = now.gid,
				 .target = now.target,
				 .file = pre->path};
		int r = diff_block(view_path(v, pre->path), &a, &b, sl);
		if (r == -EPIPE)
			break;
		if (r < 0)
			ret = (log_error_errno(r, "Failed to diff \"%s\": %m", pre->path), 1);
	}
	return ret;
}

/* ---- show ---- */

static const char *operation(const struct store_record *pre, const struct store_record *post)
{
	if (!post)
		return pre->kind == STORE_KIND_ABSENT ? "create" : "change";
	if (pre->kind == STORE_KIND_ABSENT)
		return post->kind == STORE_KIND_ABSENT ? "none" : "created";
	if (post->kind == STORE_KIND_ABSENT)
		return "deleted";
	return "modified";
}

static void show_json_item(struct strbuf *sb, const struct store_record *r, const char *op)
{
	strbuf_appendc(sb, '{');
	json_kv_str(sb, "path", r->path);
	json_kv_str(sb, "operation", op);
	json_kv_str(sb, "preimage", store_kind_to_string(r->kind));
	if (r->kind != STORE_KIND_ABSENT)
		json_kv_int(sb, "size", (int64_t)r->size);
	if (r->kind == STORE_KIND_FILE)
		json_kv_bool(sb, "backedUp", !r->not_backed_up);
	if (r->target)
		json_kv_str(sb, "target", r->target);
	const char *git = git_guard_kind_name(git_guard_classify(r->path));
	if (git)
		json_kv_str(sb, "git", git);
	strbuf_appendc(sb, '}');
}

static int show_json(const struct turn_view *t)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_appends(&sb, "{");
	json_kv_str(&sb, "turn", t->id);
	strbuf_appends(&sb, ",\"paths\":[");
	for (size_t i = 0; i < t->npre; i++) {
		if (i)
			strbuf_appendc(&sb, ',');
		show_json_item(&sb, &t->pre[i], operation(&t->pre[i], post_of(t, t->pre[i].path)));
	}
	strbuf_appends(&sb, "]}");
	int r = cli_print_json(&sb);
	strbuf_free(&sb);
	return r;
}

/* What changed besides the content, from the post-state written at commit. */
static void show_meta_change(const struct store_record *pre, const struct store_record *post)
{
	if (!post || pre->kind == STORE_KIND_ABSENT || post->kind != pre->kind)
		return;
	if (post->mode != pre->mode)
		printf("  (mode %06" PRIo32 " -> %06" PRIo32 ")", pre->mode, post->mode);
	if (post->uid != pre->uid || post->gid != pre->gid)
		printf("  (owner %" PRIu32 ":%" PRIu32 " -> %" PRIu32 ":%" PRIu32 ")", pre->uid,
		       pre->gid, post->uid, post->gid);
	if (pre->kind == STORE_KIND_SYMLINK && post->target && pre->target &&
	    strcmp(pre->target, post->target) != 0) {
		printf("  (now -> ");
		cli_print_path(stdout, post->target);
		putchar(')');
	}
}

static void show_header(const struct turn_view *t)
{
	bool color = cli_use_color();
	char when[64];
	printf("%sturn %s%s\n", color ? "\033[33m" : "", t->id, color ? "\033[0m" : "");
	cli_format_time(t->info.begin_ns, when, sizeof when);
	printf("Date:  %s\n", when);
	printf("State: %s\n\n    ", cli_turn_state(&t->info));
	cli_print_path(stdout, t->info.message ? t->info.message : "");
	printf("\n\n");
}

int cli_show(int argc, char **argv)
{
	struct opts o = {0};
	int ind, r = cli_store_parse_opts(argc, argv, &o, &ind);
	if (r)
		return r < 0 ? 0 : r;
	if (ind != argc - 1)
		return log_error(
			   "Usage: brokered show TURN [--stat] [--all] [--absolute] [--json]"),
		       2;
	struct store *s;
	struct turn_view t;
	if ((r = turn_view_load(&o, argv[ind], &s, &t)) != 0)
		return r;
	struct view v;
	view_init(&v, &o);
	if (o.json) {
		r = show_json(&t);
	} else if (o.stat) {
		struct stat_list sl = {0};
		show_header(&t);
		r = diff_turn(s, &v, &t, NULL, 0, &sl);
		print_stat(&sl);
		stat_list_free(&sl);
	} else {
		size_t n_hidden = 0;
		show_header(&t);
		for (size_t i = 0; i < t.npre; i++) {
			const struct store_record *pre = &t.pre[i], *post = post_of(&t, pre->path);
			if (hidden(&v, &t, pre)) {
				n_hidden++;
				continue;
			}
			const char *op = operation(pre, post);
			printf("  %-9s %-7s ", strcmp(op, "none") == 0 ? "transient" : op,
			       store_kind_to_string(pre->kind));
			if (pre->kind == STORE_KIND_FILE)
				printf("%10" PRIu64 "  ", pre->size);
			else
				printf("%10s  ", "");
			cli_print_path(stdout, view_path(&v, pre->path));
			if (pre->not_backed_up)
				printf("  (not backed up)");
			if (pre->target) {
				printf(" -> ");
				cli_print_path(stdout, pre->target);
			}
			show_meta_change(pre, post);
			const char *git = git_guard_kind_name(git_guard_classify(pre->path));
			if (git)
				printf("  [%s]", git);
			putchar('\n');
		}
		if (n_hidden)
			printf("  (%zu path%s created and removed again not shown: --all shows "
			       "them)\n",
			       n_hidden, n_hidden == 1 ? "" : "s");
	}
	free(v.workspace);
	turn_view_done(&t);
	store_close(s);
	return r;
}

/* ---- diff ---- */

int cli_diff(int argc, char **argv)
{
	struct opts o = {0};
	int ind, r = cli_store_parse_opts(argc, argv, &o, &ind);
	if (r)
		return r < 0 ? 0 : r;
	if (ind >= argc)
		return log_error(
			   "Usage: brokered diff TURN [PATH...] [--stat] [--all] [--absolute]"),
		       2;
	struct store *s;
	struct turn_view t;
	if ((r = turn_view_load(&o, argv[ind], &s, &t)) != 0)
		return r;
	size_t np = (size_t)(argc - ind - 1);
	char **paths = NULL;
	struct view v;
	view_init(&v, &o);
	if (cli_user_paths(argv + ind + 1, np, &paths) < 0) {
		r = (log_error("Out of memory"), 1);
	} else if (o.stat) {
		struct stat_list sl = {0};
		r = diff_turn(s, &v, &t, paths, np, &sl);
		print_stat(&sl);
		stat_list_free(&sl);
	} else {
		r = diff_turn(s, &v, &t, paths, np, NULL);
	}
	cli_strv_free(paths, np);
	free(v.workspace);
	turn_view_done(&t);
	store_close(s);
	return r;
}
