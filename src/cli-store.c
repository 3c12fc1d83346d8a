/* SPDX-License-Identifier: MIT */
/* turn, log, show, diff, restore, undo, gc: the backup store for people (DESIGN section 10). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "basic/escape.h"
#include "basic/json-write.h"
#include "basic/macro.h"
#include "basic/parse-util.h"
#include "basic/path-util.h"
#include "basic/strbuf.h"
#include "cli.h"
#include "git-guard.h"
#include "log.h"
#include "store.h"

struct opts {
	const char *session, *workspace, *message, *turn, *older_than, *max_size;
	const char *since, *path, *max_count;
	bool json, force, dry_run, absolute, all, stat, commit_open;
};

enum {
	OPT_SESSION = 0x100,
	OPT_WORKSPACE,
	OPT_JSON,
	OPT_FORCE,
	OPT_DRY_RUN,
	OPT_TURN,
	OPT_OLDER,
	OPT_MAX_SIZE,
	OPT_ABSOLUTE,
	OPT_ALL,
	OPT_STAT,
	OPT_SINCE,
	OPT_PATH,
	OPT_COMMIT_OPEN,
};

static const struct option long_options[] = {
    {"session", required_argument, NULL, OPT_SESSION},
    {"workspace", required_argument, NULL, OPT_WORKSPACE},
    {"json", no_argument, NULL, OPT_JSON},
    {"force", no_argument, NULL, OPT_FORCE},
    {"dry-run", no_argument, NULL, OPT_DRY_RUN},
    {"turn", required_argument, NULL, OPT_TURN},
    {"older-than", required_argument, NULL, OPT_OLDER},
    {"max-size-mb", required_argument, NULL, OPT_MAX_SIZE},
    {"absolute", no_argument, NULL, OPT_ABSOLUTE},
    {"all", no_argument, NULL, OPT_ALL},
    {"stat", no_argument, NULL, OPT_STAT},
    {"since", required_argument, NULL, OPT_SINCE},
    {"path", required_argument, NULL, OPT_PATH},
    {"max-count", required_argument, NULL, 'n'},
    {"commit-open", no_argument, NULL, OPT_COMMIT_OPEN},
    {"message", required_argument, NULL, 'm'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static const char store_usage[] =
    "Usage:\n"
    "  brokered turn begin [--session ID] [--max-size-mb N] [--commit-open] [-m MSG]\n"
    "  brokered turn commit [--session ID] [--turn ID] -m MSG\n"
    "  brokered log [--since WHEN] [--path PATH] [-n N] [--json]\n"
    "  brokered show TURN [--stat] [--all] [--absolute] [--json]\n"
    "  brokered diff TURN [PATH...] [--stat] [--all] [--absolute]\n"
    "  brokered restore TURN PATH... [--force] [--dry-run]\n"
    "  brokered undo [TURN] [--force] [--dry-run]\n"
    "  brokered gc [--older-than AGE]\n"
    "Every command takes --session ID or --workspace DIR (default: the current directory's\n"
    "session). TURN is an id as `brokered log` prints it, or `last`. Options may follow the\n"
    "operands; a path that begins with '-' goes after `--`.\n"
    "show and diff name paths relative to the workspace (--absolute: absolute) and hide paths\n"
    "the turn created and removed again (--all shows them); --stat counts changed lines.\n"
    "log --since takes an age (2h, 3d) or a date (YYYY-MM-DD [HH:MM[:SS]]); --path PATH lists\n"
    "the turns that touched PATH or anything below it; -n N the newest N.\n"
    "turn begin --commit-open first commits a turn an interrupted agent left open.\n"
    "Exit status: 0 done, 1 failed or refused, 2 usage error.\n";

/* Parse options; the rest of argv (operands) starts at *ret_ind. Returns 0 or exit status 2. */
static int parse_opts(int argc, char **argv, struct opts *o, int *ret_ind)
{
	optind = 0;
	opterr = 0;
	/* Permuting: `show T --json` and `restore T PATH --force` work as the README writes them.
	 */
	for (int c; (c = getopt_long(argc, argv, "m:n:h", long_options, NULL)) >= 0;) {
		switch (c) {
		case 'h':
			fputs(store_usage, stdout);
			return -1;
		case OPT_SESSION:
			o->session = optarg;
			break;
		case OPT_WORKSPACE:
			o->workspace = optarg;
			break;
		case OPT_JSON:
			o->json = true;
			break;
		case OPT_FORCE:
			o->force = true;
			break;
		case OPT_DRY_RUN:
			o->dry_run = true;
			break;
		case OPT_TURN:
			o->turn = optarg;
			break;
		case OPT_OLDER:
			o->older_than = optarg;
			break;
		case OPT_MAX_SIZE:
			o->max_size = optarg;
			break;
		case OPT_ABSOLUTE:
			o->absolute = true;
			break;
		case OPT_ALL:
			o->all = true;
			break;
		case OPT_STAT:
			o->stat = true;
			break;
		case OPT_SINCE:
			o->since = optarg;
			break;
		case OPT_PATH:
			o->path = optarg;
			break;
		case 'n':
			o->max_count = optarg;
			break;
		case OPT_COMMIT_OPEN:
			o->commit_open = true;
			break;
		case 'm':
			o->message = optarg;
			break;
		default:
			log_error("%s: unknown option or missing argument: %s", argv[0],
				  argv[optind - 1]);
			return 2;
		}
	}
	*ret_ind = optind;
	return 0; /* -1 above: --help was printed, exit 0 */
}

/* ---- session ids ---- */

int cli_default_session_id(const char *workspace, char **ret)
{
	const char *env = getenv("BROKERED_SESSION_ID");
	if (env && store_id_valid(env))
		return (*ret = strdup(env)) ? 0 : -ENOMEM;
	_cleanup_free_ char *real = realpath(workspace ? workspace : ".", NULL);
	if (!real)
		return negative_errno();
	/* A name, not a security boundary: FNV-1a keeps the start-up of every run from paying
	 * OpenSSL's initialisation (~2 ms) for it. */
	uint64_t h = 0xcbf29ce484222325ULL;
	for (const unsigned char *p = (const unsigned char *)real; *p; p++)
		h = (h ^ *p) * 0x100000001b3ULL;
	char hash[17];
	snprintf(hash, sizeof hash, "%016" PRIx64, h);
	int r;
	const char *base = strrchr(real, '/');
	base = base && base[1] ? base + 1 : "root";
	struct strbuf sb = STRBUF_INIT;
	r = strbuf_appends(&sb, "ws-");
	for (size_t i = 0; r >= 0 && base[i] && i < 64; i++) {
		unsigned char c = (unsigned char)base[i];
		bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			    (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
		r = strbuf_appendc(&sb, keep ? (char)c : '_');
	}
	if (r >= 0)
		r = strbuf_printf(&sb, "-%.12s", hash);
	if (r < 0) {
		strbuf_free(&sb);
		return r;
	}
	*ret = strbuf_steal(&sb);
	return *ret ? 0 : -ENOMEM;
}

static int open_store(const struct opts *o, struct store **ret)
{
	_cleanup_free_ char *sid = NULL, *sd = NULL;
	int r;
	*ret = NULL;
	if (o->session) {
		if (!store_id_valid(o->session))
			return log_error_errno(EINVAL, "Invalid session id \"%s\"", o->session);
		sid = strdup(o->session);
		if (!sid)
			return log_error_errno(ENOMEM, "Out of memory");
	} else if ((r = cli_default_session_id(o->workspace, &sid)) < 0) {
		return log_error_errno(r, "Failed to determine the session of \"%s\": %m",
				       o->workspace ? o->workspace : ".");
	}
	if ((r = store_state_dir(&sd)) < 0)
		return log_error_errno(r, "Failed to find the state directory: %m");
	if ((r = store_open(sd, sid, ret)) < 0)
		return log_error_errno(r, "Failed to open the backup store of session %s: %m", sid);
	return 0;
}

static int resolve_turn(struct store *s, const char *arg, char **ret)
{
	int r = store_resolve_turn(s, arg, ret);
	if (r == -ENOENT && strcmp(arg, "last") == 0)
		return log_error_errno(r, "No turns in this session yet");
	if (r < 0)
		return log_error_errno(r, "Failed to find turn \"%s\": %m", arg);
	return 0;
}

/* ---- output ---- */

static bool use_color(void)
{
	return isatty(STDOUT_FILENO) && !getenv("NO_COLOR");
}

/* Paths for people: as they are if printable, else escaped. */
static void print_path(FILE *f, const char *p)
{
	bool plain = true;
	for (const unsigned char *c = (const unsigned char *)p; *c; c++)
		if (*c < 0x20 || *c == 0x7f)
			plain = false;
	if (plain) {
		fputs(p, f);
		return;
	}
	struct strbuf sb = STRBUF_INIT;
	if (escape_appends(&sb, p) >= 0)
		fputs(sb.buf, f);
	strbuf_free(&sb);
}

static void format_time(int64_t ns, char *buf, size_t n)
{
	time_t t = (time_t)(ns / 1000000000);
	struct tm tm;
	if (ns <= 0 || !localtime_r(&t, &tm) || strftime(buf, n, "%Y-%m-%d %H:%M:%S", &tm) == 0)
		snprintf(buf, n, "-");
}

static const char *turn_state(const struct store_turn_info *t)
{
	return t->committed ? "committed" : t->running || t->current ? "open" : "interrupted";
}

static int print_json(struct strbuf *sb)
{
	if (sb->oom)
		return log_error_errno(ENOMEM, "Out of memory"), 1;
	puts(sb->buf);
	return 0;
}

/* ---- turn begin | commit ---- */

static int turn_begin(struct store *s, const struct opts *o)
{
	int64_t mb = 0;
	if (o->max_size && parse_i64(o->max_size, 10, &mb) < 0)
		return log_error("Invalid --max-size-mb \"%s\"", o->max_size), 2;
	struct store_options so = {.enabled = true,
				   .max_size_bytes = store_clamp_max_size_mb(mb, o->max_size),
				   .sync = true};
	_cleanup_free_ char *id = NULL, *committed = NULL;
	const char *msg = o->message ? o->message : "";
	int r = o->commit_open ? store_turn_begin_after_open(s, &so, msg, &id, &committed)
			       : store_turn_begin_explicit(s, &so, msg, &id);
	if (r == -EBUSY && o->commit_open)
		return log_error("A command still runs in the open turn %s", id), 1;
	if (r == -EBUSY)
		return log_error("A turn is already open in this session: %s", id), 1;
	if (r < 0)
		return log_error_errno(r, "Failed to begin a turn: %m"), 1;
	puts(id);
	/* --commit-open: the turn an interrupted agent left open, now committed. */
	if (committed) {
		log_warning("turn %s was left open (an interrupted agent?): committed it",
			    committed);
		printf("committed-interrupted %s\n", committed);
	}
	return 0;
}

static int turn_commit(struct store *s, const struct opts *o)
{
	_cleanup_free_ char *id = NULL;
	int r;
	if (!o->message)
		return log_error("turn commit: -m MSG is required"), 2;
	if (o->turn && resolve_turn(s, o->turn, &id) < 0)
		return 1;
	if (!id && (r = store_current_turn(s, &id)) < 0)
		return log_error_errno(r, "No open turn to commit (begin one with `brokered turn "
					  "begin`, or name one with --turn)"),
		       1;
	r = store_commit_id(s, id, o->message);
	if (r == -EALREADY)
		return log_error("Turn %s is already committed", id), 1;
	if (r < 0)
		return log_error_errno(r, "Failed to commit turn %s: %m", id), 1;
	puts(id);
	return 0;
}

int cli_turn(int argc, char **argv)
{
	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		fputs(store_usage, stdout);
		return 0;
	}
	if (argc < 2 || (strcmp(argv[1], "begin") != 0 && strcmp(argv[1], "commit") != 0))
		return log_error("Usage: brokered turn begin|commit [--session ID] [-m MSG]"), 2;
	struct opts o = {0};
	int ind, r = parse_opts(argc - 1, argv + 1, &o, &ind);
	if (r)
		return r < 0 ? 0 : r;
	if (ind != argc - 1)
		return log_error("turn %s: unexpected argument \"%s\"", argv[1], argv[ind + 1]), 2;
	struct store *s;
	if (open_store(&o, &s) < 0)
		return 1;
	r = strcmp(argv[1], "begin") == 0 ? turn_begin(s, &o) : turn_commit(s, &o);
	store_close(s);
	return r;
}

/* ---- paths as the user gave them ---- */

/* Make a user's PATH absolute and real in its parent, like the paths the broker records. */
static int user_path(const char *arg, char **ret)
{
	_cleanup_free_ char *cwd = getcwd(NULL, 0);
	struct strbuf joined = STRBUF_INIT, norm = STRBUF_INIT;
	int r = cwd ? path_join(cwd, arg, &joined) : negative_errno();
	if (r >= 0)
		r = path_normalise(joined.buf, &norm);
	strbuf_free(&joined);
	if (r < 0) {
		strbuf_free(&norm);
		return r;
	}
	_cleanup_free_ char *parent = NULL;
	const char *name = NULL;
	_cleanup_free_ char *real = NULL;
	if (strcmp(norm.buf, "/") != 0 && path_split(norm.buf, &parent, &name) >= 0 &&
	    (real = realpath(parent, NULL))) {
		struct strbuf out = STRBUF_INIT;
		r = path_join(real, name, &out);
		strbuf_free(&norm);
		if (r < 0) {
			strbuf_free(&out);
			return r;
		}
		norm = out;
	}
	*ret = strbuf_steal(&norm);
	return *ret ? 0 : -ENOMEM;
}

static int user_paths(char **args, size_t n, char ***ret)
{
	char **v = calloc(n + 1, sizeof *v);
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		int r = user_path(args[i], &v[i]);
		if (r < 0) {
			for (size_t k = 0; k < i; k++)
				free(v[k]);
			free(v);
			return r;
		}
	}
	*ret = v;
	return 0;
}

static void strv_free(char **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

static bool under_any(const char *path, char **prefixes, size_t n)
{
	for (size_t k = 0; k < n; k++)
		if (path_is_under(path, prefixes[k]))
			return true;
	return false;
}

/* ---- log ---- */

/* Does turn id record a path at or below one of paths? */
static int turn_touches(struct store *s, const char *id, char **paths, size_t n)
{
	struct store_record *pre;
	size_t npre;
	int r = store_turn_records(s, id, &pre, &npre);
	if (r < 0)
		return r;
	bool hit = false;
	for (size_t i = 0; !hit && i < npre; i++)
		hit = under_any(pre[i].path, paths, n);
	store_records_free(pre, npre);
	return hit;
}

/* Keep the turns that --since, --path and -n select, in place; frees the others. */
static int log_filter(struct store *s, const struct opts *o, struct store_turn_info *v, size_t *n)
{
	int64_t since = 0;
	uint64_t max = UINT64_MAX;
	_cleanup_free_ char *path = NULL;
	int r;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	if (o->since &&
	    parse_since_ns(o->since, (int64_t)now.tv_sec * 1000000000 + now.tv_nsec, &since) < 0)
		return log_error("Invalid --since \"%s\" (an age like 2h or 3d, or a date "
				 "YYYY-MM-DD [HH:MM[:SS]])",
				 o->since),
		       2;
	if (o->max_count && parse_u64(o->max_count, 10, &max) < 0)
		return log_error("Invalid -n \"%s\" (a number of turns)", o->max_count), 2;
	if (o->path && (r = user_path(o->path, &path)) < 0)
		return log_error_errno(r, "Invalid --path \"%s\": %m", o->path), 2;
	size_t kept = 0;
	for (size_t i = 0; i < *n; i++) {
		bool keep = kept < max && v[i].begin_ns >= since;
		if (keep && path) {
			r = turn_touches(s, v[i].id, &path, 1);
			if (r < 0)
				log_warning("Failed to read turn %s: %s", v[i].id, strerror(-r));
			keep = r > 0;
		}
		if (keep) {
			struct store_turn_info t = v[i];
			v[i] = v[kept];
			v[kept++] = t;
		}
	}
	for (size_t i = kept; i < *n; i++) {
		free(v[i].id);
		free(v[i].message);
	}
	*n = kept;
	return 0;
}

static int log_json(struct store *s, struct store_turn_info *v, size_t n)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_appendc(&sb, '[');
	for (size_t i = 0; i < n; i++) {
		if (i)
			strbuf_appendc(&sb, ',');
		strbuf_appendc(&sb, '{');
		json_kv_str(&sb, "id", v[i].id);
		json_kv_str(&sb, "state", turn_state(&v[i]));
		json_kv_str(&sb, "message", v[i].message);
		json_kv_int(&sb, "beginNs", v[i].begin_ns);
		json_kv_int(&sb, "commitNs", v[i].commit_ns);
		json_kv_int(&sb, "paths", (int64_t)v[i].n_paths);
		json_kv_bool(&sb, "current", v[i].current);
		_cleanup_strbuf_ struct strbuf g = STRBUF_INIT;
		if (git_guard_turn_marks(s, v[i].id, &g) >= 0 && g.len)
			json_kv_str(&sb, "git", g.buf);
		strbuf_appendc(&sb, '}');
	}
	strbuf_appendc(&sb, ']');
	int r = print_json(&sb);
	strbuf_free(&sb);
	return r;
}

int cli_log(int argc, char **argv)
{
	struct opts o = {0};
	int ind, r = parse_opts(argc, argv, &o, &ind);
	if (r)
		return r < 0 ? 0 : r;
	if (ind != argc)
		return log_error("log: unexpected argument \"%s\"", argv[ind]), 2;
	struct store *s;
	if (open_store(&o, &s) < 0)
		return 1;
	struct store_turn_info *v;
	size_t n;
	r = store_list_turns(s, &v, &n);
	if (r < 0) {
		store_close(s);
		return log_error_errno(r, "Failed to list turns: %m"), 1;
	}
	r = log_filter(s, &o, v, &n);
	if (r == 0 && o.json) {
		r = log_json(s, v, n);
	} else if (r == 0) {
		bool color = use_color();
		for (size_t i = 0; i < n; i++) {
			char when[64];
			format_time(v[i].begin_ns, when, sizeof when);
			const char *st = turn_state(&v[i]);
			printf("%s%s%s  %s  %-11s %4zu path%s  ", color ? "\033[33m" : "", v[i].id,
			       color ? "\033[0m" : "", when, st, v[i].n_paths,
			       v[i].n_paths == 1 ? " " : "s");
			print_path(stdout, v[i].message ? v[i].message : "");
			/* what the turn changed in git's configuration and hooks */
			_cleanup_strbuf_ struct strbuf g = STRBUF_INIT;
			if (git_guard_turn_marks(s, v[i].id, &g) >= 0 && g.len)
				printf("  [%s]", g.buf);
			putchar('\n');
		}
	}
	store_close(s);
	store_turn_infos_free(v, n);
	return r;
}

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
	static char ba[65536], bb[65536];
	for (;;) {
		ssize_t na = RETRY_EINTR(read(fa, ba, sizeof ba));
		if (na < 0)
			return negative_errno();
		if (na == 0)
			return 1;
		ssize_t got = 0;
		while (got < na) {
			ssize_t k = RETRY_EINTR(read(fb, bb + got, (size_t)(na - got)));
			if (k < 0)
				return negative_errno();
			if (k == 0)
				return 0;
			got += k;
		}
		if (memcmp(ba, bb, (size_t)na) != 0)
			return 0;
	}
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
		print_path(stdout, label);
	printf("\n+++ %s", has ? "b/" : "/dev/null");
	if (has)
		print_path(stdout, label);
	printf("\n@@ -%s +%s @@\n", had ? "1" : "0,0", has ? "1" : "0,0");
	if (had) {
		putchar('-');
		print_path(stdout, a->target ? a->target : "");
		puts("\n\\ No newline at end of file");
	}
	if (has) {
		putchar('+');
		print_path(stdout, b->target ? b->target : "");
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
	print_path(stdout, l);
	printf(" b/");
	print_path(stdout, l);
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
		print_path(stdout, e->name);
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
	if (open_store(o, &s) < 0)
		return 1;
	int r = resolve_turn(s, arg, &ret->id) < 0 ? 1 : 0;
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
		if ((np > 0 && !under_any(pre->path, paths, np)) || hidden(v, t, pre))
			continue;
		_cleanup_free_ char *obj = NULL;
		if (pre->kind == STORE_KIND_FILE && !pre->not_backed_up &&
		    asprintf(&obj, "%s/modify_backup/objects/%.2s/%s", store_session_dir(s),
			     pre->hash, pre->hash + 2) < 0)
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
	int r = print_json(&sb);
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
		print_path(stdout, post->target);
		putchar(')');
	}
}

static void show_header(const struct turn_view *t)
{
	bool color = use_color();
	char when[64];
	printf("%sturn %s%s\n", color ? "\033[33m" : "", t->id, color ? "\033[0m" : "");
	format_time(t->info.begin_ns, when, sizeof when);
	printf("Date:  %s\n", when);
	printf("State: %s\n\n    ", turn_state(&t->info));
	print_path(stdout, t->info.message ? t->info.message : "");
	printf("\n\n");
}

int cli_show(int argc, char **argv)
{
	struct opts o = {0};
	int ind, r = parse_opts(argc, argv, &o, &ind);
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
			print_path(stdout, view_path(&v, pre->path));
			if (pre->not_backed_up)
				printf("  (not backed up)");
			if (pre->target) {
				printf(" -> ");
				print_path(stdout, pre->target);
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
	int ind, r = parse_opts(argc, argv, &o, &ind);
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
	if (user_paths(argv + ind + 1, np, &paths) < 0) {
		r = (log_error("Out of memory"), 1);
	} else if (o.stat) {
		struct stat_list sl = {0};
		r = diff_turn(s, &v, &t, paths, np, &sl);
		print_stat(&sl);
		stat_list_free(&sl);
	} else {
		r = diff_turn(s, &v, &t, paths, np, NULL);
	}
	strv_free(paths, np);
	free(v.workspace);
	turn_view_done(&t);
	store_close(s);
	return r;
}

/* ---- restore, undo ---- */

static void print_plan(const struct store_plan *p)
{
	for (size_t i = 0; i < p->n_items; i++) {
		const struct store_plan_item *it = &p->items[i];
		if (it->action == STORE_ACTION_NONE || it->action == STORE_ACTION_COVERED)
			continue;
		printf("  %-14s ", store_action_to_string(it->action));
		print_path(stdout, it->pre.path);
		if (it->conflict)
			printf("  (%s)", it->conflict);
		putchar('\n');
	}
}

static bool ask_yes(const char *question)
{
	FILE *tty = fopen("/dev/tty", "r+e");
	if (!tty)
		return false;
	fprintf(tty, "%s [y/N] ", question);
	fflush(tty);
	char *line = NULL;
	size_t n = 0;
	bool yes = getline(&line, &n, tty) > 0 && (line[0] == 'y' || line[0] == 'Y');
	free(line);
	fclose(tty);
	return yes;
}

static bool confirm_conflicts(const struct store_plan *p, bool force)
{
	if (p->n_conflicts == 0 || force)
		return true;
	fprintf(stderr, "brokered: %zu path%s changed after turn %s:\n", p->n_conflicts,
		p->n_conflicts == 1 ? "" : "s", p->turn_id);
	for (size_t i = 0; i < p->n_items; i++)
		if (p->items[i].conflict) {
			fputs("  ", stderr);
			print_path(stderr, p->items[i].pre.path);
			fprintf(stderr, " (%s)\n", p->items[i].conflict);
		}
	if (isatty(STDIN_FILENO) && ask_yes("Overwrite them?"))
		return true;
	log_error("Refusing to overwrite later changes (use --force)");
	return false;
}

static int restore_common(const struct opts *o, const char *turn_arg, char **args, size_t nargs,
			  const char *verb)
{
	struct store *s;
	if (open_store(o, &s) < 0)
		return 1;
	_cleanup_free_ char *id = NULL, *msg = NULL, *new_id = NULL;
	char **paths = NULL;
	struct store_plan *p = NULL;
	int r = resolve_turn(s, turn_arg, &id) < 0 ? 1 : 0;
	if (!r && user_paths(args, nargs, &paths) < 0)
		r = (log_error("Out of memory"), 1);
	int e = r ? 0 : store_plan_restore(s, id, paths, nargs, &p);
	if (e < 0)
		r = (log_error_errno(e, "Failed to plan the %s of turn %s: %m", verb, id), 1);
	if (!r && nargs > 0 && p->n_items == 0)
		r = (log_error("Turn %s did not touch the given paths", id), 1);
	if (!r && o->dry_run) {
		printf("%s of turn %s would:\n", verb, id);
		print_plan(p);
	} else if (!r && !confirm_conflicts(p, o->force)) {
		r = 1;
	} else if (!r) {
		struct store_options so = {.enabled = true,
					   .max_size_bytes = STORE_MAX_SIZE_MB_MAX * 1024ull * 1024,
					   .sync = true};
		if (asprintf(&msg, "%s %s", verb, id) < 0)
			msg = NULL;
		e = store_plan_apply(s, p, &so, msg ? msg : verb, &new_id);
		if (e < 0)
			r = (log_error_errno(e, "Failed to %s turn %s: %m", verb, id), 1);
		for (size_t i = 0; e >= 0 && i < p->n_items; i++) {
			const struct store_plan_item *it = &p->items[i];
			if (it->error < 0)
				log_error_errno(it->error, "Failed to restore \"%s\": %m",
						it->pre.path);
			else if (it->action == STORE_ACTION_LOST)
				log_warning("\"%s\" was not backed up: left as it is",
					    it->pre.path);
		}
		if (e > 0)
			r = 1;
		if (e >= 0 && p->n_unrecorded)
			log_warning("the backup store is full: %zu path(s) were put back without a "
				    "record of what they were (this %s cannot be undone for them); "
				    "`brokered gc` frees space",
				    p->n_unrecorded, verb);
		if (e >= 0 && !o->json && new_id)
			printf("%s of %s recorded as turn %s%s\n", verb, id, new_id,
			       e > 0 ? " (with failures)" : "");
		else if (e >= 0 && !o->json)
			printf("%s of %s done, not recorded%s\n", verb, id,
			       e > 0 ? " (with failures)" : "");
		else if (e >= 0)
			printf("{\"turn\":\"%s\",\"recordedAs\":%s%s%s,\"unrecorded\":%zu,"
			       "\"failed\":%d}\n",
			       id, new_id ? "\"" : "", new_id ? new_id : "null", new_id ? "\"" : "",
			       p->n_unrecorded, e);
	}
	store_plan_free(p);
	strv_free(paths, nargs);
	store_close(s);
	return r;
}

int cli_restore(int argc, char **argv)
{
	struct opts o = {0};
	int ind, r = parse_opts(argc, argv, &o, &ind);
	if (r)
		return r < 0 ? 0 : r;
	if (argc - ind < 2)
		return log_error("Usage: brokered restore TURN PATH... [--force] [--dry-run]"), 2;
	return restore_common(&o, argv[ind], argv + ind + 1, (size_t)(argc - ind - 1), "restore");
}

int cli_undo(int argc, char **argv)
{
	struct opts o = {0};
	int ind, r = parse_opts(argc, argv, &o, &ind);
	if (r)
		return r < 0 ? 0 : r;
	if (argc - ind > 1)
		return log_error("Usage: brokered undo [TURN] [--force] [--dry-run]"), 2;
	return restore_common(&o, ind < argc ? argv[ind] : "last", NULL, 0, "undo");
}

/* ---- gc ---- */

int cli_gc(int argc, char **argv)
{
	struct opts o = {0};
	int ind, r = parse_opts(argc, argv, &o, &ind);
	if (r)
		return r < 0 ? 0 : r;
	uint64_t age = 30 * 86400;
	if (ind != argc || (o.older_than && parse_duration_sec(o.older_than, &age) < 0))
		return log_error("Usage: brokered gc [--older-than AGE] (AGE like 12h, 7d)"), 2;
	struct store *s;
	if (open_store(&o, &s) < 0)
		return 1;
	struct store_gc_stats st;
	r = store_gc(s, age, &st);
	store_close(s);
	if (r == -EBUSY)
		return log_error("The session is in use; try gc again later"), 1;
	if (r < 0)
		return log_error_errno(r, "Failed to collect garbage: %m"), 1;
	if (o.json)
		printf("{\"turnsRemoved\":%" PRIu64 ",\"objectsRemoved\":%" PRIu64
		       ",\"bytesFreed\":%" PRIu64 "}\n",
		       st.turns_removed, st.objects_removed, st.bytes_freed);
	else
		printf("removed %" PRIu64 " turns and %" PRIu64 " objects (%" PRIu64 " bytes)\n",
		       st.turns_removed, st.objects_removed, st.bytes_freed);
	return 0;
}
