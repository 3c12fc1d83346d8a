/* SPDX-License-Identifier: MIT */
/* turn, log, show, diff, restore, undo, gc: the backup store for people (DESIGN section 10). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "basic/escape.h"
#include "basic/fd-util.h"
#include "basic/fs-util.h"
#include "basic/json-write.h"
#include "basic/macro.h"
#include "basic/parse-util.h"
#include "basic/path-util.h"
#include "basic/strbuf.h"
#include "cli-store.h"
#include "cli.h"
#include "git-guard.h"
#include "log.h"
#include "store.h"

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
int cli_store_parse_opts(int argc, char **argv, struct opts *o, int *ret_ind)
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

int cli_store_open(const struct opts *o, struct store **ret)
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

int cli_store_resolve_turn(struct store *s, const char *arg, char **ret)
{
	int r = store_resolve_turn(s, arg, ret);
	if (r == -ENOENT && strcmp(arg, "last") == 0)
		return log_error_errno(r, "No turns in this session yet");
	if (r < 0)
		return log_error_errno(r, "Failed to find turn \"%s\": %m", arg);
	return 0;
}

/* ---- output ---- */

bool cli_use_color(void)
{
	return isatty(STDOUT_FILENO) && !getenv("NO_COLOR");
}

/* Paths for people: as they are if printable, else escaped. */
void cli_print_path(FILE *f, const char *p)
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

void cli_format_time(int64_t ns, char *buf, size_t n)
{
	time_t t = (time_t)(ns / 1000000000);
	struct tm tm;
	if (ns <= 0 || !localtime_r(&t, &tm) || strftime(buf, n, "%Y-%m-%d %H:%M:%S", &tm) == 0)
		snprintf(buf, n, "-");
}

const char *cli_turn_state(const struct store_turn_info *t)
{
	return t->committed ? "committed" : t->running || t->current ? "open" : "interrupted";
}

int cli_print_json(struct strbuf *sb)
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
	if (o->turn && cli_store_resolve_turn(s, o->turn, &id) < 0)
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
	int ind, r = cli_store_parse_opts(argc - 1, argv + 1, &o, &ind);
	if (r)
		return r < 0 ? 0 : r;
	if (ind != argc - 1)
		return log_error("turn %s: unexpected argument \"%s\"", argv[1], argv[ind + 1]), 2;
	struct store *s;
	if (cli_store_open(&o, &s) < 0)
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

int cli_user_paths(char **args, size_t n, char ***ret)
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

void cli_strv_free(char **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

bool cli_under_any(const char *path, char **prefixes, size_t n)
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
		hit = cli_under_any(pre[i].path, paths, n);
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
		json_kv_str(&sb, "state", cli_turn_state(&v[i]));
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
	int r = cli_print_json(&sb);
	strbuf_free(&sb);
	return r;
}

int cli_log(int argc, char **argv)
{
	struct opts o = {0};
	int ind, r = cli_store_parse_opts(argc, argv, &o, &ind);
	if (r)
		return r < 0 ? 0 : r;
	if (ind != argc)
		return log_error("log: unexpected argument \"%s\"", argv[ind]), 2;
	struct store *s;
	if (cli_store_open(&o, &s) < 0)
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
		bool color = cli_use_color();
		for (size_t i = 0; i < n; i++) {
			char when[64];
			cli_format_time(v[i].begin_ns, when, sizeof when);
			const char *st = cli_turn_state(&v[i]);
			printf("%s%s%s  %s  %-11s %4zu path%s  ", color ? "\033[33m" : "", v[i].id,
			       color ? "\033[0m" : "", when, st, v[i].n_paths,
			       v[i].n_paths == 1 ? " " : "s");
			cli_print_path(stdout, v[i].message ? v[i].message : "");
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

/* ---- restore, undo ---- */

static void print_plan(const struct store_plan *p)
{
	for (size_t i = 0; i < p->n_items; i++) {
		const struct store_plan_item *it = &p->items[i];
		if (it->action == STORE_ACTION_NONE || it->action == STORE_ACTION_COVERED)
			continue;
		printf("  %-14s ", store_action_to_string(it->action));
		cli_print_path(stdout, it->pre.path);
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
			cli_print_path(stderr, p->items[i].pre.path);
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
	if (cli_store_open(o, &s) < 0)
		return 1;
	_cleanup_free_ char *id = NULL, *msg = NULL, *new_id = NULL;
	char **paths = NULL;
	struct store_plan *p = NULL;
	int r = cli_store_resolve_turn(s, turn_arg, &id) < 0 ? 1 : 0;
	if (!r && cli_user_paths(args, nargs, &paths) < 0)
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
	cli_strv_free(paths, nargs);
	store_close(s);
	return r;
}

int cli_restore(int argc, char **argv)
{
	struct opts o = {0};
	int ind, r = cli_store_parse_opts(argc, argv, &o, &ind);
	if (r)
		return r < 0 ? 0 : r;
	if (argc - ind < 2)
		return log_error("Usage: brokered restore TURN PATH... [--force] [--dry-run]"), 2;
	return restore_common(&o, argv[ind], argv + ind + 1, (size_t)(argc - ind - 1), "restore");
}

int cli_undo(int argc, char **argv)
{
	struct opts o = {0};
	int ind, r = cli_store_parse_opts(argc, argv, &o, &ind);
	if (r)
		return r < 0 ? 0 : r;
	if (argc - ind > 1)
		return log_error("Usage: brokered undo [TURN] [--force] [--dry-run]"), 2;
	return restore_common(&o, ind < argc ? argv[ind] : "last", NULL, 0, "undo");
}

/* ---- gc ---- */

/*
 * sandbox.copyOnWrite leaves a run's overlay layers in <state>/cow/run-PID-XXXXXX when its broker
 * was killed or a change could not be merged: those of runs that are gone (no process PID) and
 * older than age go too. The number removed, or -errno.
 */
static int gc_cow_layers(uint64_t age)
{
	_cleanup_free_ char *state = NULL, *top = NULL;
	if (store_state_dir(&state) < 0 || asprintf(&top, "%s/cow", state) < 0)
		return -ENOMEM;
	_cleanup_close_ int fd = open(top, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : negative_errno();
	DIR *d = fdopendir(fcntl(fd, F_DUPFD_CLOEXEC, 3));
	if (!d)
		return negative_errno();
	int n = 0;
	time_t now = time(NULL);
	for (struct dirent *de; (de = readdir(d));) {
		int pid;
		struct stat st;
		if (sscanf(de->d_name, "run-%d-", &pid) != 1 || pid <= 0 ||
		    fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode) ||
		    (uint64_t)(now - st.st_mtime) < age || kill(pid, 0) == 0 || errno != ESRCH)
			continue;
		if (rm_rf_at_force(fd, de->d_name) >= 0)
			n++;
	}
	closedir(d);
	return n;
}

int cli_gc(int argc, char **argv)
{
	struct opts o = {0};
	int ind, r = cli_store_parse_opts(argc, argv, &o, &ind);
	if (r)
		return r < 0 ? 0 : r;
	uint64_t age = 30 * 86400;
	if (ind != argc || (o.older_than && parse_duration_sec(o.older_than, &age) < 0))
		return log_error("Usage: brokered gc [--older-than AGE] (AGE like 12h, 7d)"), 2;
	struct store *s;
	if (cli_store_open(&o, &s) < 0)
		return 1;
	struct store_gc_stats st;
	r = store_gc(s, age, &st);
	store_close(s);
	if (r == -EBUSY)
		return log_error("The session is in use; try gc again later"), 1;
	if (r < 0)
		return log_error_errno(r, "Failed to collect garbage: %m"), 1;
	int cow = gc_cow_layers(age);
	if (cow < 0)
		log_warning_errno(cow, "Failed to remove old copy-on-write layers: %m");
	if (o.json)
		printf("{\"turnsRemoved\":%" PRIu64 ",\"objectsRemoved\":%" PRIu64
		       ",\"bytesFreed\":%" PRIu64 ",\"copyOnWriteLayersRemoved\":%d}\n",
		       st.turns_removed, st.objects_removed, st.bytes_freed, MAX(cow, 0));
	else
		printf("removed %" PRIu64 " turns and %" PRIu64 " objects (%" PRIu64 " bytes)%s\n",
		       st.turns_removed, st.objects_removed, st.bytes_freed,
		       cow > 0 ? ", and the unmerged layers of copy-on-write runs that are gone"
			       : "");
	return 0;
}
