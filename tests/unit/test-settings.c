/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/macro.h"
#include "basic/strbuf.h"
#include "settings.h"

/* tap.h's is_int()/is_str() nest ok(), whose local shadows theirs. */
#pragma GCC diagnostic ignored "-Wshadow"
#include "tap.h"

struct error_case {
	const char *json;
	int r;
	const char *message; /* expected, or NULL for success */
};

static const struct error_case error_cases[] = {
    {"{}", 0, NULL},
    {"{\"a\":1,} // trailing comma and comment", 0, NULL},
    {"/* c */ {\"sandbox\": {}}", 0, NULL},
    {"{\"sandbox.enabled\": \"yes\"}", -EINVAL,
     "t.json: sandbox.enabled: expected boolean, got string"},
    {"{\"sandbox\": {\"enabled\": 1}}", -EINVAL,
     "t.json: sandbox.enabled: expected boolean, got integer"},
    {"{\"sandbox\": {\"fileBackup\": {\"denyOversize\": null}}}", -EINVAL,
     "t.json: sandbox.fileBackup.denyOversize: expected boolean, got null"},
    {"{\"sandbox\": []}", -EINVAL, "t.json: sandbox: expected object, got array"},
    {"{\"sandbox.fileSafety\": true}", -EINVAL,
     "t.json: sandbox.fileSafety: expected object, got boolean"},
    {"[]", -EINVAL, "t.json: top level: expected object, got array"},
    {"{\"sandbox.enabled\": true, \"sandbox\": {\"enabled\": false}}", -EINVAL,
     "t.json: sandbox.enabled: set more than once"},
    {"{\"fileBackupMaxSizeMB\": 5, \"sandbox.fileBackup.maxSizeMB\": 6}", -EINVAL,
     "t.json: sandbox.fileBackup.maxSizeMB: set more than once"},
    {"{\n  \"x\": 1\n  \"y\": 2}", -EINVAL, "t.json:3:3: ',' or '}' expected"},
    {"{\"a\": 1, \"a\": 2}", -EINVAL, "t.json:1:10: duplicate key"},
    {"", -EINVAL, "t.json:1:1: unexpected end of input"},
    {"{\"sandbox.excludedCommands\": \"ls\"}", -EINVAL,
     "t.json: sandbox.excludedCommands: expected array of strings, got string"},
    {"{\"sandbox.excludedCommands\": [\"ls\", 3]}", -EINVAL,
     "t.json: sandbox.excludedCommands[1]: expected string, got integer"},
    {"{\"sandbox.excludedCommands\": [\"\"]}", -EINVAL,
     "t.json: sandbox.excludedCommands[0]: empty string"},
    {"{\"sandbox.fileSafety.allowlist\": [\"~bob/x\"]}", -EINVAL,
     "t.json: sandbox.fileSafety.allowlist[0]: \"~user\" patterns are not supported"},
    {"{\"sandbox.fileSafety.blocklist\": {}}", -EINVAL,
     "t.json: sandbox.fileSafety.blocklist: expected array of strings, got object"},
    {"{\"sandbox.fileSafety.rules\": [{\"decision\": \"deny\"}]}", -EINVAL,
     "t.json: sandbox.fileSafety.rules[0].path: missing"},
    {"{\"sandbox.fileSafety.rules\": [{\"path\": \"a\"}]}", -EINVAL,
     "t.json: sandbox.fileSafety.rules[0].decision: missing"},
    {"{\"sandbox.fileSafety.rules\": [{\"path\": \"a\", \"decision\": \"allowed\"}]}", -EINVAL,
     "t.json: sandbox.fileSafety.rules[0].decision: expected \"allow\", \"deny\" or \"prompt\""},
    {"{\"sandbox.fileSafety.rules\": [{\"path\": \"a\", \"decision\": true}]}", -EINVAL,
     "t.json: sandbox.fileSafety.rules[0].decision: expected string, got boolean"},
    {"{\"sandbox.fileSafety.rules\": [{\"path\": \"a\", \"decision\": \"deny\", "
     "\"access\": \"exec\"}]}",
     -EINVAL,
     "t.json: sandbox.fileSafety.rules[0].access: unknown access (read, write, delete, "
     "metadata, all)"},
    {"{\"sandbox.fileSafety.rules\": [{\"path\": \"a\", \"decision\": \"deny\", "
     "\"access\": []}]}",
     -EINVAL, "t.json: sandbox.fileSafety.rules[0].access: empty access list"},
    {"{\"sandbox.fileSafety.rules\": [{\"path\": \"a\", \"decision\": \"deny\", "
     "\"access\": 7}]}",
     -EINVAL,
     "t.json: sandbox.fileSafety.rules[0].access: expected string or array of strings, got "
     "integer"},
    {"{\"sandbox.fileSafety.rules\": [\"a\"]}", -EINVAL,
     "t.json: sandbox.fileSafety.rules[0]: expected object, got string"},
    {"{\"sandbox.fileSafety.rules\": [{\"path\": \"\", \"decision\": \"deny\"}]}", -EINVAL,
     "t.json: sandbox.fileSafety.rules[0].path: empty string"},
};

static void test_error_table(void)
{
	for (size_t i = 0; i < ELEMENTSOF(error_cases); i++) {
		const struct error_case *c = &error_cases[i];
		struct settings *s = NULL;
		struct settings_error e = {0};
		settings_new(&s);
		int r = settings_load_buffer(s, "t.json", c->json, strlen(c->json), &e);
		is_int(r, c->r, "errors[%zu] return", i);
		if (c->message)
			is_str(e.message, c->message, "errors[%zu] message", i);
		else
			ok(e.message == NULL, "errors[%zu] no message", i);
		ok(s->n_rules == 0 && s->sandbox_enabled, "errors[%zu] nothing changed", i);
		settings_error_done(&e);
		settings_free(s);
	}
}

static struct settings *load(const char *json)
{
	struct settings *s = NULL;
	struct settings_error e = {0};
	settings_new(&s);
	if (settings_load_buffer(s, "t.json", json, strlen(json), &e) < 0)
		printf("# load failed: %s\n", e.message);
	settings_error_done(&e);
	return s;
}

static void test_defaults_and_sizes(void)
{
	struct settings *s = load("{}");
	ok(s->sandbox_enabled && s->backup_enabled && !s->backup_deny_oversize, "default bools");
	is_int(s->backup_max_size_mb, 10, "default maxSizeMB");
	ok(s->n_rules == 0 && s->n_excluded_commands == 0 && s->n_warnings == 0, "default lists");
	settings_free(s);

	static const struct {
		const char *json;
		uint64_t mb;
		size_t warnings;
	} sizes[] = {
	    {"{\"sandbox.fileBackup.maxSizeMB\": 50}", 50, 0},
	    {"{\"sandbox.fileBackup.maxSizeMB\": 0}", 1, 0},
	    {"{\"sandbox.fileBackup.maxSizeMB\": -3}", 1, 0},
	    {"{\"sandbox.fileBackup.maxSizeMB\": 5000}", 1024, 0},
	    {"{\"sandbox.fileBackup.maxSizeMB\": 1e300}", 1024, 0},
	    {"{\"sandbox.fileBackup.maxSizeMB\": 99999999999999999999}", 1024, 0},
	    {"{\"sandbox.fileBackup.maxSizeMB\": 2.7}", 2, 0},
	    {"{\"sandbox.fileBackup.maxSizeMB\": 0.5}", 1, 0},
	    {"{\"sandbox.fileBackup.maxSizeMB\": \"big\"}", 10, 1},
	    {"{\"sandbox.fileBackup.maxSizeMB\": null}", 10, 1},
	    {"{\"fileBackupMaxSizeMB\": 64}", 64, 0},
	    {"{\"sandbox\": {\"fileBackup\": {\"maxSizeMB\": 3}}}", 3, 0},
	};
	for (size_t i = 0; i < ELEMENTSOF(sizes); i++) {
		s = load(sizes[i].json);
		is_int(s->backup_max_size_mb, sizes[i].mb, "maxSizeMB %s", sizes[i].json);
		is_int(s->n_warnings, sizes[i].warnings, "maxSizeMB warnings %s", sizes[i].json);
		settings_free(s);
	}
}

static void test_nested_and_dotted(void)
{
	static const char *const spellings[] = {
	    "{\"sandbox\": {\"fileBackup\": {\"enabled\": false, \"denyOversize\": true}, "
	    "\"enabled\": false}}",
	    "{\"sandbox.fileBackup.enabled\": false, \"sandbox.fileBackup.denyOversize\": true, "
	    "\"sandbox.enabled\": false}",
	    "{\"sandbox\": {\"fileBackup.enabled\": false, \"enabled\": false}, "
	    "\"sandbox.fileBackup\": {\"denyOversize\": true}}",
	};
	for (size_t i = 0; i < ELEMENTSOF(spellings); i++) {
		struct settings *s = load(spellings[i]);
		ok(!s->sandbox_enabled && !s->backup_enabled && s->backup_deny_oversize,
		   "spelling %zu", i);
		settings_free(s);
	}

	struct settings *s =
	    load("{\"sandbox\": {\"fileSafety\": {"
		 "\"rules\": [{\"path\": \"a\", \"decision\": \"prompt\"},"
		 "  {\"path\": \"b\", \"access\": \"write\", \"decision\": \"allow\"},"
		 "  {\"path\": \"c\", \"access\": [\"read\", \"delete\"], "
		 "\"decision\": \"deny\"}],"
		 "\"allowlist\": [\"~/x\"]}},"
		 "\"sandbox.fileSafety.blocklist\": [\"/etc\"]}");
	ok(s->n_rules == 5, "five rules");
	if (s->n_rules == 5) {
		const struct settings_rule *r = s->rules;
		ok(strcmp(r[0].pattern, "a") == 0 && r[0].access == POLICY_ACCESS_ALL &&
		       r[0].decision == POLICY_PROMPT && strcmp(r[0].source, "rule") == 0,
		   "rule 0: access defaults to all");
		ok(r[1].access == POLICY_ACCESS_WRITE && r[1].decision == POLICY_ALLOW, "rule 1");
		ok(r[2].access == (POLICY_ACCESS_READ | POLICY_ACCESS_DELETE) &&
		       r[2].decision == POLICY_DENY,
		   "rule 2: access list");
		ok(strcmp(r[3].pattern, "~/x") == 0 && r[3].access == POLICY_ACCESS_MODIFY &&
		       r[3].decision == POLICY_ALLOW && strcmp(r[3].source, "allowlist") == 0,
		   "allowlist entry");
		ok(strcmp(r[4].pattern, "/etc") == 0 && r[4].access == POLICY_ACCESS_ALL &&
		       r[4].decision == POLICY_DENY && strcmp(r[4].source, "blocklist") == 0,
		   "blocklist entry (document order)");
	}
	settings_free(s);
}

static void test_unknown_keys(void)
{
	struct settings *s =
	    load("{\"foo\": 1, \"sandbox\": {\"bar\": [], \"fileSafety\": {"
		 "\"rules\": [{\"path\": \"a\", \"decision\": \"deny\", \"why\": 1}]}},"
		 "\"odd\\nkey\": 0, \"allowUnsandboxedCommands\": true}");
	is_int(s->n_warnings, 5, "five unknown keys");
	if (s->n_warnings == 5) {
		is_str(s->warnings[0], "t.json: unknown key \"foo\"", "unknown top-level key");
		is_str(s->warnings[1], "t.json: unknown key \"sandbox.bar\"", "unknown nested key");
		is_str(s->warnings[2], "t.json: unknown key \"sandbox.fileSafety.rules[0].why\"",
		       "unknown rule key");
		is_str(s->warnings[3], "t.json: unknown key \"odd\\nkey\"",
		       "odd key stays one line");
	}
	ok(s->n_rules == 1, "the rule with an unknown key still counts");
	settings_free(s);
}

static void test_merge(void)
{
	struct settings *s = NULL;
	struct settings_error e = {0};
	const char *a = "{\"sandbox\": {\"enabled\": false, \"excludedCommands\": [\"docker\"]},"
			"\"sandbox.fileSafety.allowlist\": [\"~/a\"],"
			"\"sandbox.fileBackup.maxSizeMB\": 50}";
	const char *b = "{\"sandbox.enabled\": true, \"sandbox.excludedCommands\": [\"make\"],"
			"\"sandbox.fileSafety.rules\": [{\"path\": \"b\", \"decision\": \"deny\"}],"
			"\"sandbox.fileBackup.maxSizeMB\": \"oops\"}";
	const char *bad = "{\"sandbox.fileSafety.allowlist\": [\"~/c\"], \"sandbox.enabled\": 0}";
	settings_new(&s);
	ok(settings_load_buffer(s, "a", a, strlen(a), &e) == 0, "load a");
	ok(settings_load_buffer(s, "b", b, strlen(b), &e) == 0, "load b");
	ok(s->sandbox_enabled, "later file wins a scalar");
	is_int(s->backup_max_size_mb, 50, "invalid later maxSizeMB keeps the earlier value");
	ok(s->n_excluded_commands == 2 && strcmp(s->excluded_commands[0], "docker") == 0 &&
	       strcmp(s->excluded_commands[1], "make") == 0,
	   "excludedCommands concatenated");
	ok(s->n_rules == 2 && strcmp(s->rules[0].pattern, "~/a") == 0 &&
	       strcmp(s->rules[1].pattern, "b") == 0,
	   "rules concatenated in file order");
	is_int(settings_load_buffer(s, "bad", bad, strlen(bad), &e), -EINVAL, "bad file refused");
	is_str(e.message, "bad: sandbox.enabled: expected boolean, got integer", "bad message");
	ok(s->n_rules == 2 && s->sandbox_enabled && s->n_warnings == 1,
	   "a refused file changes nothing");
	settings_error_done(&e);
	settings_free(s);
}

/* ---- files ---- */

static char tmpdir[] = "/tmp/test-settings-XXXXXX";

static char *tmp_path(const char *name)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_printf(&sb, "%s/%s", tmpdir, name);
	return strbuf_steal(&sb);
}

static char *write_file(const char *name, const char *content, mode_t mode)
{
	char *p = tmp_path(name);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, content, strlen(content)) != (ssize_t)strlen(content) ||
	    fchmod(fd, mode) < 0)
		printf("# cannot write %s\n", p);
	close(fd);
	return p;
}

static int load_file(const char *path, struct settings **ret, char **ret_message)
{
	struct settings_error e = {0};
	settings_new(ret);
	int r = settings_load_file(*ret, path, &e);
	*ret_message = e.message;
	return r;
}

static void test_files(void)
{
	struct settings *s = NULL;
	char *m = NULL, *want = NULL;
	struct strbuf sb = STRBUF_INIT;

	char *good = write_file("good.json", "{\"sandbox.enabled\": false}\n", 0644);
	ok(load_file(good, &s, &m) == 0 && !s->sandbox_enabled, "0644 file loads");
	settings_free(s);
	free(m);

	char *gw = write_file("gw.json", "{}", 0664);
	is_int(load_file(gw, &s, &m), -EPERM, "group-writable refused");
	strbuf_printf(&sb, "%s: writable by group or others (mode 0664), refusing it", gw);
	is_str(m, sb.buf, "group-writable message");
	settings_free(s);
	free(m);

	char *ow = write_file("ow.json", "{}", 0602);
	is_int(load_file(ow, &s, &m), -EPERM, "other-writable refused");
	settings_free(s);
	free(m);

	char *missing = tmp_path("missing.json");
	is_int(load_file(missing, &s, &m), -ENOENT, "missing file is -ENOENT");
	settings_free(s);
	free(m);

	char *dir = tmp_path("dir.json");
	mkdir(dir, 0755);
	is_int(load_file(dir, &s, &m), -EPERM, "directory refused");
	strbuf_reset(&sb);
	strbuf_printf(&sb, "%s: not a regular file, refusing it", dir);
	is_str(m, sb.buf, "directory message");
	settings_free(s);
	free(m);

	char *fifo = tmp_path("fifo.json");
	mkfifo(fifo, 0600);
	is_int(load_file(fifo, &s, &m), -EPERM, "FIFO refused without blocking");
	settings_free(s);
	free(m);

	char *bad = write_file("bad.json", "{\n  \"sandbox.enabled\": tru\n}\n", 0600);
	is_int(load_file(bad, &s, &m), -EINVAL, "syntax error");
	strbuf_reset(&sb);
	strbuf_printf(&sb, "%s:2:22: unexpected character", bad);
	is_str(m, sb.buf, "syntax error is FILE:LINE:COL: reason");
	settings_free(s);
	free(m);

	struct strbuf big = STRBUF_INIT;
	strbuf_appends(&big, "{\"a\": \"");
	while (big.len < SETTINGS_FILE_MAX)
		strbuf_appends(&big,
			       "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
	strbuf_appends(&big, "\"}");
	char *large = write_file("large.json", big.buf, 0600);
	is_int(load_file(large, &s, &m), -E2BIG, "over 1 MiB refused");
	settings_free(s);
	free(m);
	strbuf_free(&big);

	if (geteuid() == 0) {
		char *foreign = write_file("foreign.json", "{}", 0644);
		ok(chown(foreign, 12345, 12345) == 0, "chown to another user");
		is_int(load_file(foreign, &s, &m), -EPERM, "file of another user refused");
		settings_free(s);
		free(m);
		unlink(foreign);
		free(foreign);
	} else
		printf("ok %d - # SKIP file of another user needs root\n", ++tap_n);

	unlink(good);
	unlink(gw);
	unlink(ow);
	rmdir(dir);
	unlink(fifo);
	unlink(bad);
	unlink(large);
	free(good);
	free(gw);
	free(ow);
	free(missing);
	free(dir);
	free(fifo);
	free(bad);
	free(large);
	free(want);
	strbuf_free(&sb);
}

static void test_chain(void)
{
	char *conf = tmp_path("conf"), *confb = tmp_path("conf/brokered"), *ws = tmp_path("ws"),
	     *wsb = tmp_path("ws/.brokered");
	mkdir(conf, 0700);
	mkdir(confb, 0700);
	mkdir(ws, 0700);
	mkdir(wsb, 0700);
	char *u = write_file("conf/brokered/settings.json",
			     "{\"sandbox.fileBackup.maxSizeMB\": 20, \"sandbox.enabled\": false,"
			     " \"sandbox.fileSafety.blocklist\": [\"~/u\"]}",
			     0600);
	char *w = write_file("ws/.brokered/settings.json",
			     "{\"sandbox.fileBackup.maxSizeMB\": 30,"
			     " \"sandbox.fileSafety.blocklist\": [\"w\"]}",
			     0600);
	char *x = write_file(
	    "extra.json", "{\"sandbox.enabled\": true, \"sandbox.fileSafety.blocklist\": [\"x\"]}",
	    0600);
	struct settings *s = NULL;
	struct settings_error e = {0};

	settings_new(&s);
	ok(settings_load_all(s, "/nonexistent-home", conf, ws, x, &e) == 0, "chain loads");
	is_int(s->backup_max_size_mb, 30, "workspace beats user");
	ok(s->sandbox_enabled, "extra beats user");
	ok(s->n_rules == 3 && strcmp(s->rules[0].pattern, "~/u") == 0 &&
	       strcmp(s->rules[1].pattern, "w") == 0 && strcmp(s->rules[2].pattern, "x") == 0,
	   "rules in order user, workspace, extra");
	settings_free(s);

	settings_new(&s);
	ok(settings_load_all(s, "/nonexistent-home", NULL, "/nonexistent-ws", NULL, &e) == 0 &&
	       !e.message,
	   "missing optional files are fine");
	settings_free(s);

	char *missing = tmp_path("missing.json");
	settings_new(&s);
	is_int(settings_load_all(s, NULL, conf, ws, missing, &e), -ENOENT,
	       "missing --settings file is an error");
	ok(e.message && strstr(e.message, "missing.json: cannot open"), "missing extra message");
	settings_error_done(&e);
	settings_free(s);

	chmod(w, 0666);
	settings_new(&s);
	is_int(settings_load_all(s, NULL, conf, ws, NULL, &e), -EPERM,
	       "world-writable workspace file stops the chain");
	settings_error_done(&e);
	settings_free(s);

	char *p = NULL;
	ok(settings_user_file("/h", "/x", &p) == 0 && strcmp(p, "/x/brokered/settings.json") == 0,
	   "XDG_CONFIG_HOME honoured");
	free(p);
	ok(settings_user_file("/h", "", &p) == 0 &&
	       strcmp(p, "/h/.config/brokered/settings.json") == 0,
	   "empty XDG_CONFIG_HOME ignored");
	free(p);
	ok(settings_user_file("/h", "rel", &p) == 0 &&
	       strcmp(p, "/h/.config/brokered/settings.json") == 0,
	   "relative XDG_CONFIG_HOME ignored");
	free(p);
	ok(settings_user_file(NULL, NULL, &p) == -ENOENT, "no home, no XDG");
	ok(settings_workspace_file("/w/", &p) == 0 && strcmp(p, "/w/.brokered/settings.json") == 0,
	   "workspace file");
	free(p);

	unlink(u);
	unlink(w);
	unlink(x);
	rmdir(wsb);
	rmdir(ws);
	rmdir(confb);
	rmdir(conf);
	free(u);
	free(w);
	free(x);
	free(wsb);
	free(ws);
	free(confb);
	free(conf);
	free(missing);
}

int main(void)
{
	test_error_table();
	test_defaults_and_sizes();
	test_nested_and_dotted();
	test_unknown_keys();
	test_merge();
	if (!mkdtemp(tmpdir)) {
		printf("not ok - mkdtemp\n");
		return 1;
	}
	test_files();
	test_chain();
	rmdir(tmpdir);
	return tap_done();
}
