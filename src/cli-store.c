/* SPDX-License-Identifier: MIT */
/* turn, log, show, diff, restore, undo, gc: the backup store for people (DESIGN section 10). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
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
#include "log.h"
#include "store.h"

struct opts {
	const char *session, *workspace, *message, *turn, *older_than, *max_size;
	bool json, force, dry_run;
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
	{"message", required_argument, NULL, 'm'},
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

static const char store_usage[] =
	"Usage:\n"
	"  brokered turn begin [--session ID] [--max-size-mb N] [-m MSG]\n"
	"  brokered turn commit [--session ID] [--turn ID] -m MSG\n"
	"  brokered log [--session ID] [--json]\n"
	"  brokered show TURN [--json]\n"
	"  brokered diff TURN [PATH...]\n"
	"  brokered restore TURN PATH... [--force] [--dry-run]\n"
	"  brokered undo [TURN] [--force] [--dry-run]\n"
	"  brokered gc [--older-than AGE]\n"
	"Every command takes --session ID or --workspace DIR (default: the current directory's\n"
	"session). TURN is an id as `brokered log` prints it, or `last`. Options may follow the\n"
	"operands; a path that begins with '-' goes after `--`.\n"
	"Exit status: 0 done, 1 failed or refused, 2 usage error.\n";

/* Parse options; the rest of argv (operands) starts at *ret_ind. Returns 0 or exit status 2. */
static int parse_opts(int argc, char **argv, struct opts *o, int *ret_ind)
{
	optind = 0;
	opterr = 0;
	/* Permuting: `show T --json` and `restore T PATH --force` work as the README writes them. */
	for (int c; (c = getopt_long(argc, argv, "m:h", long_options, NULL)) >= 0;) {
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
	_cleanup_free_ char *id = NULL;
	int r = store_turn_begin_explicit(s, &so, o->message ? o->message : "", &id);
	if (r == -EBUSY)
		return log_error("A turn is already open in this session: %s", id), 1;
	if (r < 0)
		return log_error_errno(r, "Failed to begin a turn: %m"), 1;
	puts(id);
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

/* ---- log ---- */

static int log_json(struct store_turn_info *v, size_t n)
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
	store_close(s);
	if (r < 0)
		return log_error_errno(r, "Failed to list turns: %m"), 1;
	if (o.json) {
		r = log_json(v, n);
	} else {
		bool color = use_color();
		for (size_t i = 0; i < n; i++) {
			char when[64];
			format_time(v[i].begin_ns, when, sizeof when);
			const char *st = turn_state(&v[i]);
			printf("%s%s%s  %s  %-11s %4zu path%s  ", color ? "\033[33m" : "", v[i].id,
			       color ? "\033[0m" : "", when, st, v[i].n_paths,
			       v[i].n_paths == 1 ? " " : "s");
			print_path(stdout, v[i].message ? v[i].message : "");
			putchar('\n');
		}
	}
	store_turn_infos_free(v, n);
	return r;
}

/* ---- show ---- */

static const struct store_record *post_of(const struct store_record *post, size_t n,
					  const char *path)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(post[i].path, path) == 0)
			return &post[i];
	return NULL;
}

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
	strbuf_appendc(sb, '}');
}

int cli_show(int argc, char **argv)
{
	struct opts o = {0};
	int ind, r = parse_opts(argc, argv, &o, &ind);
	if (r)
		return r < 0 ? 0 : r;
	if (ind != argc - 1)
		return log_error("Usage: brokered show TURN [--json]"), 2;
	struct store *s;
	if (open_store(&o, &s) < 0)
		return 1;
	_cleanup_free_ char *id = NULL;
	struct store_record *pre = NULL, *post = NULL;
	size_t npre = 0, npost = 0;
	r = resolve_turn(s, argv[ind], &id) < 0 ? 1 : 0;
	if (!r && (store_turn_records(s, id, &pre, &npre) < 0 ||
		   store_turn_post(s, id, &post, &npost) < 0))
		r = (log_error("Failed to read turn %s", id), 1);
	store_close(s);
	if (r)
		return r;
	struct strbuf sb = STRBUF_INIT;
	if (o.json)
		strbuf_printf(&sb, "{\"turn\":\"%s\",\"paths\":[", id);
	else
		printf("turn %s\n", id);
	for (size_t i = 0; i < npre; i++) {
		const char *op = operation(&pre[i], post_of(post, npost, pre[i].path));
		if (o.json) {
			if (i)
				strbuf_appendc(&sb, ',');
			show_json_item(&sb, &pre[i], op);
			continue;
		}
		printf("  %-8s %-7s ", op, store_kind_to_string(pre[i].kind));
		if (pre[i].kind == STORE_KIND_FILE)
			printf("%10" PRIu64 "  ", pre[i].size);
		else
			printf("%10s  ", "");
		print_path(stdout, pre[i].path);
		if (pre[i].not_backed_up)
			printf("  (not backed up)");
		if (pre[i].target) {
			printf(" -> ");
			print_path(stdout, pre[i].target);
		}
		putchar('\n');
	}
	if (o.json) {
		strbuf_appends(&sb, "]}");
		r = print_json(&sb);
	}
	strbuf_free(&sb);
	store_records_free(pre, npre);
	store_records_free(post, npost);
	return r;
}

/* ---- diff ---- */

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

static int run_diff(const char *old, const char *new, const char *label_a, const char *label_b)
{
	const char *argv[] = {"diff", "-u", "--label", label_a, "--label", label_b, old, new, NULL};
	pid_t pid;
	fflush(stdout);
	int r = posix_spawnp(&pid, "diff", NULL, NULL, (char **)argv, environ);
	if (r != 0)
		return -r;
	int status;
	if (RETRY_EINTR(waitpid(pid, &status, 0)) < 0)
		return negative_errno();
	return WIFEXITED(status) && WEXITSTATUS(status) <= 1 ? 0 : -EIO;
}

static int diff_one(struct store *s, const struct store_record *pre)
{
	struct stat st;
	int lr = lstat(pre->path, &st);
	bool now_exists = lr >= 0 || errno != ENOENT;
	bool now_file = lr >= 0 && S_ISREG(st.st_mode);
	char now_target[BROKERED_PATH_MAX] = "";
	if (lr >= 0 && S_ISLNK(st.st_mode)) {
		ssize_t k = readlink(pre->path, now_target, sizeof now_target - 1);
		now_target[k > 0 ? k : 0] = '\0';
	}
	if (pre->kind == STORE_KIND_FILE && pre->not_backed_up) {
		printf("--- ");
		print_path(stdout, pre->path);
		printf(" (not backed up: no diff)\n");
		return 0;
	}
	if (pre->kind != STORE_KIND_FILE && pre->kind != STORE_KIND_ABSENT) {
		printf("--- %s ", store_kind_to_string(pre->kind));
		print_path(stdout, pre->path);
		if (pre->target)
			printf(" -> %s", pre->target);
		if (lr >= 0 && S_ISLNK(st.st_mode)) {
			if (pre->kind == STORE_KIND_SYMLINK && pre->target && !strcmp(pre->target, now_target))
				printf(" (unchanged)\n");
			else
				printf(" (now a symlink -> %s)\n", now_target);
		} else {
			printf(" (now %s)\n", now_file ? "a file"
					       : lr >= 0 && S_ISDIR(st.st_mode) ? "a directory"
					       : now_exists ? "present" : "absent");
		}
		return 0;
	}
	if (pre->kind == STORE_KIND_ABSENT && !now_file)
		return 0;
	_cleanup_free_ char *obj = NULL, *la = NULL, *lb = NULL;
	if (pre->kind == STORE_KIND_FILE &&
	    asprintf(&obj, "%s/modify_backup/objects/%.2s/%s", store_session_dir(s), pre->hash,
		     pre->hash + 2) < 0)
		return -ENOMEM;
	if (asprintf(&la, "%s%s", obj ? "a" : "", obj ? pre->path : "/dev/null") < 0 ||
	    asprintf(&lb, "%s%s", now_file ? "b" : "", now_file ? pre->path : "/dev/null") < 0)
		return -ENOMEM;
	return run_diff(obj ? obj : "/dev/null", now_file ? pre->path : "/dev/null", la, lb);
}

int cli_diff(int argc, char **argv)
{
	struct opts o = {0};
	int ind, r = parse_opts(argc, argv, &o, &ind);
	if (r)
		return r < 0 ? 0 : r;
	if (ind >= argc)
		return log_error("Usage: brokered diff TURN [PATH...]"), 2;
	struct store *s;
	if (open_store(&o, &s) < 0)
		return 1;
	_cleanup_free_ char *id = NULL;
	struct store_record *pre = NULL;
	size_t npre = 0, np = (size_t)(argc - ind - 1);
	char **paths = NULL;
	r = resolve_turn(s, argv[ind], &id) < 0 ? 1 : 0;
	if (!r && store_turn_records(s, id, &pre, &npre) < 0)
		r = (log_error("Failed to read turn %s", id), 1);
	if (!r && user_paths(argv + ind + 1, np, &paths) < 0)
		r = (log_error("Out of memory"), 1);
	for (size_t i = 0; !r && i < npre; i++) {
		bool want = np == 0;
		for (size_t k = 0; k < np; k++)
			want = want || path_is_under(pre[i].path, paths[k]);
		int e = want ? diff_one(s, &pre[i]) : 0;
		if (e < 0)
			r = (log_error_errno(e, "Failed to diff \"%s\": %m", pre[i].path), 1);
	}
	strv_free(paths, np);
	store_records_free(pre, npre);
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
				log_error_errno(it->error, "Failed to restore \"%s\": %m", it->pre.path);
			else if (it->action == STORE_ACTION_LOST)
				log_warning("\"%s\" was not backed up: left as it is", it->pre.path);
		}
		if (e > 0)
			r = 1;
		if (e >= 0 && p->n_unrecorded)
			log_warning("the backup store is full: %zu path(s) were put back without a record of what they were (this %s cannot be undone for them); `brokered gc` frees space",
				    p->n_unrecorded, verb);
		if (e >= 0 && !o->json && new_id)
			printf("%s of %s recorded as turn %s%s\n", verb, id, new_id,
			       e > 0 ? " (with failures)" : "");
		else if (e >= 0 && !o->json)
			printf("%s of %s done, not recorded%s\n", verb, id, e > 0 ? " (with failures)" : "");
		else if (e >= 0)
			printf("{\"turn\":\"%s\",\"recordedAs\":%s%s%s,\"unrecorded\":%zu,\"failed\":%d}\n",
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
