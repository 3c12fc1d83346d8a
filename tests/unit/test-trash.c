/* SPDX-License-Identifier: MIT */
/* The freedesktop.org trash (src/trash.c): format, then put/list/restore/remove in a temp dir. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit.h"
#include "basic/strbuf.h"
#include "broker.h"
#include "policy.h"
#include "store.h"
#include "trash.h"
#include "tap.h"

static void format(void)
{
	struct strbuf sb = STRBUF_INIT;
	ok(trash_path_encode("/home/u/a b/%x/\xc3\xa9\n~ok-_.!*'()", &sb) == 0, "encode");
	is_str(sb.buf, "/home/u/a%20b/%25x/%C3%A9%0A~ok-_.!*'()", "  RFC 2396 escaping");
	strbuf_reset(&sb);
	ok(trash_path_decode("/a%20b/%c3%A9", 13, &sb) == 0, "decode");
	is_str(sb.buf, "/a b/\xc3\xa9", "  decoded bytes");
	strbuf_reset(&sb);
	ok(trash_path_decode("/a%2", 4, &sb) == -EINVAL, "truncated escape refused");
	strbuf_reset(&sb);
	ok(trash_path_decode("/a%zz", 5, &sb) == -EINVAL, "bad hex refused");
	strbuf_reset(&sb);
	ok(trash_path_decode("/a%00", 5, &sb) == -EINVAL, "%%00 refused");
	strbuf_reset(&sb);

	ok(trash_info_format("/w/a b", 0, &sb) == 0, "info format");
	ok(strncmp(sb.buf, "[Trash Info]\nPath=/w/a%20b\nDeletionDate=", 40) == 0 &&
	       sb.buf[sb.len - 1] == '\n' && sb.len == 40 + 19 + 1,
	   "  layout");
	char *p = NULL, *d = NULL;
	ok(trash_info_parse(sb.buf, sb.len, &p, &d) == 0, "round trip");
	is_str(p, "/w/a b", "  path");
	ok(d && strlen(d) == 19 && d[10] == 'T', "  date %s", d ? d : "");
	free(p);
	free(d);
	strbuf_free(&sb);

	const char *other = "# x\n[Desktop Entry]\nPath=/wrong\n[Trash "
			    "Info]\r\nDeletionDate=2020-01-01T00:00:00\r\nPath=rel/x%41\r\n";
	ok(trash_info_parse(other, strlen(other), &p, &d) == 0, "parse: other groups, CRLF");
	is_str(p, "rel/xA", "  path of the [Trash Info] group only");
	is_str(d, "2020-01-01T00:00:00", "  date");
	free(p);
	free(d);
	const char *bad[] = {"", "[Trash Info]\n", "Path=/x\n", "[Trash Info]\nPath=/x\nPath=/y\n",
			     "[Trash Info]\nPath=/x%\n"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		ok(trash_info_parse(bad[i], strlen(bad[i]), &p, &d) == -EINVAL, "refused: %zu", i);
}

static int write_file(const char *path, const char *s)
{
	FILE *f = fopen(path, "we");
	if (!f)
		return -1;
	fputs(s, f);
	return fclose(f);
}

static char *slurp(const char *path)
{
	static char buf[4096];
	FILE *f = fopen(path, "re");
	if (!f)
		return NULL;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	return buf;
}

static size_t count_for(const char *orig, struct trash_entry **ret_e)
{
	struct trash_entry *e = NULL;
	size_t n = 0, c = 0;
	if (trash_list(&e, &n) < 0)
		return (size_t)-1;
	for (size_t i = 0; i < n; i++)
		if (!strcmp(e[i].original_path, orig)) {
			c++;
			if (ret_e && !*ret_e) {
				*ret_e = calloc(1, sizeof **ret_e);
				(*ret_e)->trash_dir = strdup(e[i].trash_dir);
				(*ret_e)->name = strdup(e[i].name);
				(*ret_e)->original_path = strdup(e[i].original_path);
				(*ret_e)->deletion_date = strdup(e[i].deletion_date);
				(*ret_e)->in_files = e[i].in_files;
			}
		}
	trash_entries_free(e, n);
	return c;
}

static void live(void)
{
	char tmpl[] = "/tmp/test-trash.XXXXXX";
	char *top = mkdtemp(tmpl);
	if (!ok(top != NULL, "temp dir"))
		return;
	char data[512], ws[512], f[600], g[600], info[800];
	snprintf(data, sizeof data, "%s/data", top);
	snprintf(ws, sizeof ws, "%s/w s", top);
	mkdir(ws, 0755);
	setenv("XDG_DATA_HOME", data, 1);
	snprintf(f, sizeof f, "%s/f%%1", ws);
	ok(write_file(f, "one") == 0, "file to trash");

	int pfd = open(ws, O_PATH | O_DIRECTORY | O_CLOEXEC);
	char *trashed = NULL;
	int r = trash_put_at(pfd, "f%1", f, &trashed);
	is_int(r, 0, "trash_put_at");
	ok(access(f, F_OK) < 0, "  gone from its place");
	char want[700];
	snprintf(want, sizeof want, "%s/Trash/files/f%%1", data);
	is_str(trashed, want, "  in the home trash's files/");
	is_str(slurp(want), "one", "  content intact (moved)");
	snprintf(info, sizeof info, "%s/Trash/info/f%%1.trashinfo", data);
	char *txt = slurp(info);
	char expect[800];
	struct strbuf enc = STRBUF_INIT;
	trash_path_encode(f, &enc);
	snprintf(expect, sizeof expect, "[Trash Info]\nPath=%s\nDeletionDate=", enc.buf);
	ok(txt && strncmp(txt, expect, strlen(expect)) == 0,
	   "  .trashinfo with the encoded absolute path");
	strbuf_free(&enc);
	free(trashed);
	struct stat st;
	snprintf(want, sizeof want, "%s/Trash", data);
	ok(stat(want, &st) == 0 && (st.st_mode & 07777) == 0700, "  trash dir made 0700");

	/* Same name again: a second entry, name.2 */
	ok(write_file(f, "two") == 0, "a second file of the same name");
	trashed = NULL;
	is_int(trash_put_at(pfd, "f%1", f, &trashed), 0, "trashed too");
	ok(trashed && strstr(trashed, "/files/f%1.2"), "  as f%%1.2: %s", trashed ? trashed : "");
	free(trashed);
	is_int(count_for(f, NULL), 2, "list shows both with the decoded original path");

	/* restore: EEXIST if the place is taken, then back. */
	struct trash_entry *e = NULL;
	count_for(f, &e);
	ok(e && e->in_files, "entry found");
	if (e) {
		write_file(f, "blocker");
		is_int(trash_restore(e, NULL), -EEXIST, "restore refuses to overwrite");
		unlink(f);
		is_int(trash_restore(e, NULL), 0, "restore");
		is_str(slurp(f), "one", "  the oldest entry is back with its content");
		is_int(count_for(f, NULL), 1, "  and left the trash");
		trash_entries_free(e, 1);
	}
	e = NULL;
	count_for(f, &e);
	if (e) {
		is_int(trash_remove(e), 0, "remove for good");
		trash_entries_free(e, 1);
	}
	is_int(count_for(f, NULL), 0, "  nothing left for that path");

	/* A directory goes whole. */
	snprintf(g, sizeof g, "%s/dir", ws);
	mkdir(g, 0750);
	snprintf(want, sizeof want, "%s/inner", g);
	write_file(want, "x");
	is_int(trash_put_at(pfd, "dir", g, NULL), 0, "directory trashed");
	e = NULL;
	count_for(g, &e);
	ok(e != NULL, "  listed");
	if (e) {
		is_int(trash_restore(e, NULL), 0, "  restored");
		is_str(slurp(want), "x", "  with its content");
		trash_entries_free(e, 1);
	}
	ok(trash_put_at(pfd, "..", g, NULL) == -EINVAL, "\"..\" refused");
	ok(trash_put_at(pfd, "missing", g, NULL) == -ENOENT, "missing file: ENOENT");
	close(pfd);
	char cmd[700];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", top);
	(void)!system(cmd);
}

/* Intercepted deletes with the broker's delete mode set to trash: the seccomp door's unlink goes
 * to the trash, with its pre-image in the store; rmdir and the scratch dir keep their semantics. */
static void intercepted(void)
{
	char tmpl[] = "/tmp/test-trash-broker.XXXXXX";
	char *top = mkdtemp(tmpl);
	if (!ok(top != NULL, "temp dir"))
		return;
	char ws[600], scratch[600], state[600], data[600], f[700], e[700], p[800];
	snprintf(ws, sizeof ws, "%s/ws", top);
	snprintf(scratch, sizeof scratch, "%s/scratch", top);
	snprintf(state, sizeof state, "%s/state", top);
	snprintf(data, sizeof data, "%s/data", top);
	mkdir(ws, 0755);
	mkdir(scratch, 0755);
	mkdir(state, 0700);
	setenv("XDG_DATA_HOME", data, 1);
	snprintf(f, sizeof f, "%s/victim", ws);
	snprintf(e, sizeof e, "%s/emptydir", ws);
	write_file(f, "precious");
	mkdir(e, 0755);

	struct policy *pol = NULL;
	struct store *st = NULL;
	struct store_turn *turn = NULL;
	struct audit *au = NULL;
	struct broker *b = NULL;
	bool owned = false;
	struct store_options so = {.enabled = true, .max_size_bytes = 1 << 20};
	snprintf(p, sizeof p, "%s/audit.log", state);
	int r = policy_new(NULL, ws, scratch, NULL, state, &pol, NULL);
	if (r >= 0)
		r = store_open(state, "sess", &st);
	if (r >= 0)
		r = store_turn_join_or_begin(st, &so, "tc", "m", &turn, &owned);
	if (r >= 0)
		r = audit_open(p, "sess", "tc", &au);
	struct broker_config cfg = {.workspace = ws,
				    .scratch = scratch,
				    .state_dir = state,
				    .backup_enabled = true,
				    .kernel_enforces = true};
	if (r >= 0)
		r = broker_new(&cfg, au, turn, &b);
	if (!ok(r >= 0, "broker with policy, store and audit (%d)", r))
		goto out;
	broker_set_policy(b, pol);
	broker_set_delete_mode(b, BROKER_DELETE_TRASH);

	struct broker_req q = {.op = BROKER_OP_UNLINK,
			       .tid = getpid(),
			       .syscall_name = "unlink",
			       .dirfd = AT_FDCWD,
			       .path = f,
			       .fd = -1,
			       .dirfd2 = AT_FDCWD};
	struct broker_resp resp;
	broker_handle(b, &q, &resp);
	ok(resp.kind == BROKER_RESP_VALUE && resp.value == 0, "intercepted unlink succeeds");
	broker_resp_done(&resp);
	ok(access(f, F_OK) < 0, "  the file left its place");
	snprintf(p, sizeof p, "%s/Trash/files/victim", data);
	is_str(slurp(p), "precious", "  it is in the trash");
	q.flags = AT_REMOVEDIR;
	q.path = e;
	broker_handle(b, &q, &resp);
	ok(resp.kind == BROKER_RESP_VALUE && resp.value == 0 && access(e, F_OK) < 0,
	   "intercepted rmdir still removes the empty directory");
	broker_resp_done(&resp);
	snprintf(p, sizeof p, "%s/Trash/files/emptydir", data);
	ok(access(p, F_OK) < 0, "  (not trashed)");
	const char *id = store_turn_id(turn);
	char tid[128];
	snprintf(tid, sizeof tid, "%s", id);
	is_int(store_turn_commit(turn, "done"), 0, "commit");
	turn = NULL;
	struct store_record *recs = NULL;
	size_t n = 0;
	bool found = false;
	if (store_turn_records(st, tid, &recs, &n) >= 0)
		for (size_t i = 0; i < n; i++)
			if (!strcmp(recs[i].path, f) && recs[i].kind == STORE_KIND_FILE)
				found = true;
	store_records_free(recs, n);
	ok(found, "  the store holds the trashed file's pre-image");
	audit_flush(au);
	snprintf(p, sizeof p, "%s/audit.log", state);
	char *log = slurp(p);
	ok(log && strstr(log, "op=unlink") && strstr(log, "backup=saved"),
	   "  audited with its backup");
out:
	broker_free(b);
	if (turn)
		store_turn_free(turn);
	audit_close(au);
	store_close(st);
	policy_free(pol);
	char cmd[700];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", top);
	(void)!system(cmd);
}

int main(void)
{
	format();
	live();
	intercepted();
	return tap_done();
}
