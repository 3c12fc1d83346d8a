/* SPDX-License-Identifier: MIT */
/*
 * Backup store: act like the broker (store_preimage() before every change, then the change),
 * commit, undo, and compare the workspace with a snapshot; then undo the undo.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "basic/macro.h"
#include "basic/path-util.h"
#include "basic/strbuf.h"
#include "store-internal.h"
#include "store.h"
#include "tap.h"

/* is_int()/is_str() nest ok() and its local: harmless shadowing inside tap.h. */
#pragma GCC diagnostic ignored "-Wshadow"

static char root[256], ws[300], state[300];

static struct store_options opts = {.enabled = true, .max_size_bytes = 10 << 20, .sync = true};

/* ---- workspace helpers ---- */

static void ws_path(struct strbuf *sb, const char *rel)
{
	strbuf_reset(sb);
	strbuf_printf(sb, "%s/%s", ws, rel);
}

/* Call store_preimage() on ws/rel the way the broker does: parent fd + final name. */
static int pre(struct store_turn *t, const char *rel, unsigned flags, bool *consumed)
{
	struct strbuf p = STRBUF_INIT;
	ws_path(&p, rel);
	_cleanup_free_ char *parent = NULL;
	const char *name;
	int r = path_split(p.buf, &parent, &name);
	int pfd = r < 0 ? -1 : open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
	enum store_result res;
	bool c = false;
	if (pfd >= 0)
		r = store_preimage(t, pfd, name, p.buf, flags, &res, &c);
	if (r >= 0)
		r = store_sync(t);
	if (consumed)
		*consumed = c;
	safe_close(pfd);
	strbuf_free(&p);
	return pfd < 0 ? -errno : r;
}

static void put(const char *rel, const char *data, size_t n)
{
	struct strbuf p = STRBUF_INIT;
	ws_path(&p, rel);
	int fd = open(p.buf, O_CREAT | O_TRUNC | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd >= 0) {
		if (write(fd, data, n) != (ssize_t)n)
			printf("# short write\n");
		close(fd);
	}
	strbuf_free(&p);
}

static void puts_ws(const char *rel, const char *s)
{
	put(rel, s, strlen(s));
}

/* ---- broker-like operations: record, then act ---- */

static int op_write(struct store_turn *t, const char *rel, const char *s)
{
	int r = pre(t, rel, 0, NULL);
	if (r >= 0)
		puts_ws(rel, s);
	return r;
}

static int op_unlink(struct store_turn *t, const char *rel)
{
	bool consumed;
	struct strbuf p = STRBUF_INIT;
	ws_path(&p, rel);
	int r = pre(t, rel, STORE_REPLACE, &consumed);
	if (r >= 0 && !consumed && unlink(p.buf) < 0)
		r = -errno;
	strbuf_free(&p);
	return r;
}

static int op_rename(struct store_turn *t, const char *from, const char *to)
{
	bool consumed;
	struct strbuf a = STRBUF_INIT, b = STRBUF_INIT;
	ws_path(&a, from);
	ws_path(&b, to);
	struct stat st;
	bool dir = lstat(a.buf, &st) >= 0 && S_ISDIR(st.st_mode);
	int r = pre(t, from, dir ? STORE_TREE : 0, NULL);
	if (r >= 0)
		r = pre(t, to, dir ? 0 : STORE_CONSUME, &consumed);
	if (r >= 0 && rename(a.buf, b.buf) < 0)
		r = -errno;
	strbuf_free(&a);
	strbuf_free(&b);
	return r;
}

static int op_mkdir(struct store_turn *t, const char *rel)
{
	struct strbuf p = STRBUF_INIT;
	ws_path(&p, rel);
	int r = pre(t, rel, 0, NULL);
	if (r >= 0 && mkdir(p.buf, 0755) < 0)
		r = -errno;
	strbuf_free(&p);
	return r;
}

static int op_rmdir(struct store_turn *t, const char *rel)
{
	struct strbuf p = STRBUF_INIT;
	ws_path(&p, rel);
	int r = pre(t, rel, STORE_CONSUME, NULL);
	if (r >= 0 && rmdir(p.buf) < 0)
		r = -errno;
	strbuf_free(&p);
	return r;
}

static int op_chmod(struct store_turn *t, const char *rel, mode_t m)
{
	struct strbuf p = STRBUF_INIT;
	ws_path(&p, rel);
	int r = pre(t, rel, STORE_METADATA, NULL);
	if (r >= 0 && chmod(p.buf, m) < 0)
		r = -errno;
	strbuf_free(&p);
	return r;
}

static int op_symlink(struct store_turn *t, const char *target, const char *rel)
{
	struct strbuf p = STRBUF_INIT;
	ws_path(&p, rel);
	bool consumed = false;
	int r = pre(t, rel, STORE_CONSUME, &consumed);
	if (r >= 0 && !consumed)
		(void)unlink(p.buf);
	if (r >= 0 && symlink(target, p.buf) < 0)
		r = -errno;
	strbuf_free(&p);
	return r;
}

/* rm -rf: children first, each name consumed. */
static int op_rm_rf(struct store_turn *t, const char *rel)
{
	struct strbuf p = STRBUF_INIT;
	ws_path(&p, rel);
	struct stat st;
	int r = 0;
	if (lstat(p.buf, &st) >= 0 && S_ISDIR(st.st_mode)) {
		DIR *d = opendir(p.buf);
		struct strbuf c = STRBUF_INIT;
		for (struct dirent *de; r >= 0 && d && (de = readdir(d));) {
			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
				continue;
			strbuf_reset(&c);
			strbuf_printf(&c, "%s/%s", rel, de->d_name);
			r = op_rm_rf(t, c.buf);
		}
		if (d)
			closedir(d);
		strbuf_free(&c);
		if (r >= 0)
			r = op_rmdir(t, rel);
	} else {
		r = op_unlink(t, rel);
	}
	strbuf_free(&p);
	return r;
}

/* ---- snapshots ---- */

static int cmp_names(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

static void snap_dir(const char *abs, const char *rel, struct strbuf *out)
{
	struct dirent **names;
	int n = scandir(abs, &names, NULL, cmp_names);
	for (int i = 0; i < n; i++) {
		const char *nm = names[i]->d_name;
		if (strcmp(nm, ".") && strcmp(nm, "..")) {
			struct strbuf a = STRBUF_INIT, r = STRBUF_INIT;
			strbuf_printf(&a, "%s/%s", abs, nm);
			strbuf_printf(&r, "%s/%s", rel, nm);
			struct stat st;
			lstat(a.buf, &st);
			strbuf_printf(out, "%s mode=%o", r.buf, (unsigned)st.st_mode);
			if (S_ISREG(st.st_mode)) {
				_cleanup_free_ char *data = NULL;
				FILE *f = fopen(a.buf, "re");
				size_t len = 0;
				if (f) {
					data = calloc(1, (size_t)st.st_size + 1);
					len = fread(data, 1, (size_t)st.st_size, f);
					fclose(f);
				}
				strbuf_printf(out,
					      " mtime=%ld.%09ld data=", (long)st.st_mtim.tv_sec,
					      st.st_mtim.tv_nsec);
				strbuf_append(out, data ? data : "", len);
			} else if (S_ISLNK(st.st_mode)) {
				char buf[4096];
				ssize_t k = readlink(a.buf, buf, sizeof buf);
				strbuf_appends(out, " ->");
				strbuf_append(out, buf, k > 0 ? (size_t)k : 0);
			}
			strbuf_appendc(out, '\n');
			if (S_ISDIR(st.st_mode))
				snap_dir(a.buf, r.buf, out);
			strbuf_free(&a);
			strbuf_free(&r);
		}
		free(names[i]);
	}
	if (n >= 0)
		free(names);
}

static char *snapshot(void)
{
	struct strbuf sb = STRBUF_INIT;
	snap_dir(ws, "", &sb);
	return strbuf_steal(&sb);
}

static void same_snapshot(const char *want, const char *what)
{
	_cleanup_free_ char *got = snapshot();
	if (!ok(strcmp(got, want) == 0, "%s: workspace as in the snapshot", what))
		printf("# --- want\n%s# --- got\n%s", want, got);
}

static void rm_rf(const char *path)
{
	char *cmd;
	if (asprintf(&cmd, "rm -rf '%s'", path) >= 0) {
		if (system(cmd) != 0)
			printf("# rm -rf failed\n");
		free(cmd);
	}
}

static void reset_ws(void)
{
	rm_rf(ws);
	mkdir(ws, 0755);
}

static int undo_turn(struct store *s, const char *id, bool want_no_conflict, char **ret_undo)
{
	struct store_plan *p;
	int r = store_plan_restore(s, id, NULL, 0, &p);
	if (r < 0)
		return r;
	if (want_no_conflict && p->n_conflicts) {
		for (size_t i = 0; i < p->n_items; i++)
			if (p->items[i].conflict)
				printf("# conflict %s: %s\n", p->items[i].pre.path,
				       p->items[i].conflict);
	}
	size_t conflicts = p->n_conflicts;
	_cleanup_free_ char *msg = NULL;
	(void)!asprintf(&msg, "undo %s", id);
	r = store_plan_apply(s, p, &opts, msg, ret_undo);
	for (size_t i = 0; i < p->n_items; i++)
		if (p->items[i].error)
			printf("# failed %s: %s\n", p->items[i].pre.path,
			       strerror(-p->items[i].error));
	store_plan_free(p);
	if (r == 0 && want_no_conflict && conflicts)
		return -EBUSY;
	return r;
}

/* ---- tests ---- */

/* The records' checksum is CRC-32 (IEEE): the check value, and a bit at a time for every length
 * and alignment up to 64 bytes. */
static void test_crc32(void)
{
	ok(store_crc32("123456789", 9) == 0xcbf43926u, "crc32 check value");
	unsigned char buf[80];
	for (size_t i = 0; i < sizeof buf; i++)
		buf[i] = (unsigned char)(i * 37 + 11);
	bool same = true;
	for (size_t off = 0; off < 8; off++)
		for (size_t n = 0; n <= 64; n++) {
			uint32_t c = 0xffffffffu;
			for (size_t i = 0; i < n; i++) {
				c ^= buf[off + i];
				for (int k = 0; k < 8; k++)
					c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
			}
			same = same && store_crc32(buf + off, n) == ~c;
		}
	ok(same, "crc32 of every length and alignment as a bit at a time");
}

static void test_manifest(void)
{
	struct store_record r = {.kind = STORE_KIND_FILE,
				 .path = (char *)"/w/we\nird\t na=me\\x",
				 .size = 5,
				 .mode = 0100644,
				 .mtime_ns = 1234567890123456789,
				 .call = (char *)"call 1"};
	memset(r.hash, 'a', 64);
	struct strbuf sb = STRBUF_INIT;
	ok(store_record_format(&r, &sb) >= 0, "record formats");
	ok(memchr(sb.buf, '\n', sb.len) == sb.buf + sb.len - 1, "record is one line");
	struct store_record *v;
	size_t n, bad;
	_cleanup_free_ char *line = strdup(sb.buf);
	size_t one = sb.len;
	strbuf_append(&sb, line, one);
	strbuf_append(&sb, line, one / 2); /* torn tail */
	ok(store_manifest_parse(sb.buf, sb.len, &v, &n, &bad) >= 0, "manifest parses");
	is_int(n, 2, "two whole records");
	is_int(bad, 1, "torn tail skipped");
	if (n == 2) {
		is_str(v[0].path, r.path, "path round-trips");
		is_str(v[0].call, "call 1", "call round-trips");
		is_int(v[0].mtime_ns, r.mtime_ns, "mtime round-trips");
		is_int(v[1].mode, 0100644, "mode round-trips");
	}
	store_records_free(v, n);
	sb.buf[10] ^= 1; /* corrupt the first record */
	ok(store_manifest_parse(sb.buf, sb.len, &v, &n, &bad) >= 0 && n == 1 && bad == 2,
	   "corrupt record rejected by checksum");
	store_records_free(v, n);
	strbuf_free(&sb);
	/* the line as the format (store-manifest.c) says, byte for byte */
	struct store_record g = {.kind = STORE_KIND_OTHER,
				 .path = (char *)"/w/a b",
				 .size = 0,
				 .mode = 020640,
				 .uid = 4294967294u,
				 .gid = 0,
				 .mtime_ns = -1500000000,
				 .ino = 18446744073709551615ull,
				 .rdev = 0x10300};
	const char *want = "B1 k=other p=/w/a\\x20b s=0 m=20640 u=4294967294 g=0 t=-1500000000 "
			   "i=18446744073709551615 r=66304";
	char crc[16];
	snprintf(crc, sizeof crc, " x=%08x\n", store_crc32(want, strlen(want)));
	ok(store_record_format(&g, &sb) >= 0, "a record of every number field formats");
	_cleanup_free_ char *golden = NULL;
	ok(asprintf(&golden, "%s%s", want, crc) > 0, "(the expected line)");
	is_str(strbuf_cstr(&sb), golden,
	       "the line: octal mode, signed mtime, 64-bit inode, checksum");
	strbuf_free(&sb);
	is_int(store_clamp_max_size_mb(0, false), 10 << 20, "maxSizeMB default");
	is_int(store_clamp_max_size_mb(5000, true), 1024ull << 20, "maxSizeMB clamped");
	ok(store_id_valid("20261201-194512-ab12") && !store_id_valid("../x") && !store_id_valid(""),
	   "id validation");
}

/* A store_record_fn taking each record into an array (n_max: then -ECANCELED). */
struct taken {
	struct store_record v[4000];
	size_t n, n_max;
};

static int take(struct store_record *rec, void *userdata)
{
	struct taken *t = userdata;
	if (t->n == t->n_max)
		return -ECANCELED;
	t->v[t->n++] = *rec;
	*rec = (struct store_record){0};
	return 0;
}

/* Streamed in 64 KiB reads, a manifest gives the records a whole-buffer parse does: lines split
 * across reads, one longer than a read, a corrupt line and a torn tail. */
static void test_manifest_stream(void)
{
	struct strbuf sb = STRBUF_INIT;
	struct store_record r = {.kind = STORE_KIND_FILE, .mode = 0100644};
	memset(r.hash, 'b', 64);
	_cleanup_free_ char *big = malloc(100001);
	if (!big)
		return;
	memset(big, 'x', 100000);
	big[0] = '/';
	big[100000] = '\0';
	char p[64];
	for (int i = 0; i < 3000; i++) {
		snprintf(p, sizeof p, "/w/dir %d/file\t%d", i % 7, i);
		r.path = i == 1500 ? big : p;
		r.size = (uint64_t)i;
		store_record_format(&r, &sb);
		if (i == 2000) /* a corrupt line */
			sb.buf[sb.len - 5] ^= 1;
	}
	size_t whole = sb.len;
	store_record_format(&r, &sb);
	sb.len = whole + (sb.len - whole) / 2; /* torn tail */
	char tmpl[] = "/tmp/test-store-manifest-XXXXXX";
	int fd = mkstemp(tmpl);
	ok(fd >= 0 && write(fd, sb.buf, sb.len) == (ssize_t)sb.len, "manifest written (%zu bytes)",
	   sb.len);
	unlink(tmpl);
	struct store_record *v = NULL;
	size_t n = 0, bad = 0, sbad = 0;
	ok(store_manifest_parse(sb.buf, sb.len, &v, &n, &bad) >= 0 && n == 2999 && bad == 2,
	   "whole-buffer parse: 2999 records, 2 bad (%zu, %zu)", n, bad);
	struct taken *t = calloc(1, sizeof *t);
	if (!t || fd < 0) {
		free(t);
		store_records_free(v, n);
		strbuf_free(&sb);
		safe_close(fd);
		return;
	}
	t->n_max = ELEMENTSOF(t->v);
	lseek(fd, 0, SEEK_SET);
	ok(store_manifest_foreach_fd(fd, SIZE_MAX, take, t, &sbad) >= 0, "streamed");
	is_int(t->n, n, "as many records streamed");
	is_int(sbad, bad, "as many bad lines");
	bool same = t->n == n;
	for (size_t i = 0; same && i < n; i++)
		same = !strcmp(t->v[i].path, v[i].path) && t->v[i].size == v[i].size &&
		       !strcmp(t->v[i].hash, v[i].hash);
	ok(same, "the same records in the same order");
	ok(n > 1500 && strlen(t->v[1500].path) == 100000, "a line longer than a read");
	for (size_t i = 0; i < t->n; i++)
		store_record_done(&t->v[i]);
	t->n = 0;
	t->n_max = 10;
	lseek(fd, 0, SEEK_SET);
	ok(store_manifest_foreach_fd(fd, SIZE_MAX, take, t, NULL) == -ECANCELED && t->n == 10,
	   "a negative return stops the walk and is returned");
	for (size_t i = 0; i < t->n; i++)
		store_record_done(&t->v[i]);
	lseek(fd, 0, SEEK_SET);
	t->n = 0;
	t->n_max = ELEMENTSOF(t->v);
	is_int(store_manifest_foreach_fd(fd, 100000, take, t, NULL), -EFBIG, "-EFBIG past max");
	for (size_t i = 0; i < t->n; i++)
		store_record_done(&t->v[i]);
	free(t);
	store_records_free(v, n);
	strbuf_free(&sb);
	safe_close(fd);
}

static void setup_tree(void)
{
	reset_ws();
	puts_ws("a.txt", "alpha\n");
	puts_ws("b.txt", "bravo bravo bravo\n");
	puts_ws("c.txt", "charlie\n");
	puts_ws("d.txt", "delta\n");
	puts_ws("e.txt", "echo\n");
	puts_ws("we\nird\tname", "weird\n");
	struct strbuf p = STRBUF_INIT;
	ws_path(&p, "empty");
	mkdir(p.buf, 0750);
	ws_path(&p, "link");
	(void)!symlink("a.txt", p.buf);
	ws_path(&p, "src");
	mkdir(p.buf, 0755);
	ws_path(&p, "src/sub");
	mkdir(p.buf, 0700);
	puts_ws("src/one", "one\n");
	puts_ws("src/sub/two", "two\n");
	ws_path(&p, "tree");
	mkdir(p.buf, 0755);
	ws_path(&p, "tree/deep");
	mkdir(p.buf, 0755);
	puts_ws("tree/x", "x\n");
	puts_ws("tree/deep/y", "y\n");
	puts_ws("hard", "hard\n");
	struct strbuf q = STRBUF_INIT;
	ws_path(&p, "hard");
	ws_path(&q, "hard2");
	(void)!link(p.buf, q.buf);
	strbuf_free(&p);
	strbuf_free(&q);
}

static bool exists(const char *path, void *userdata)
{
	struct stat st;
	++*(size_t *)userdata;
	return lstat(path, &st) >= 0;
}

static int count(struct store_record *rec, void *userdata)
{
	(void)rec;
	++*(size_t *)userdata;
	return 0;
}

/* The records of the paths that exist are those of store_turn_records() (the earliest per path),
 * and only those; every record of the manifest streams through foreach. */
static void check_filter(struct store *s, const char *id)
{
	struct store_record *all = NULL, *some = NULL;
	size_t nall = 0, nsome = 0, asked = 0, nrec = 0, k = 0;
	ok(store_turn_records(s, id, &all, &nall) >= 0 &&
	       store_turn_records_filter(s, id, exists, &asked, &some, &nsome) >= 0,
	   "records, and records of the paths that exist");
	ok(store_turn_records_foreach(s, id, count, &nrec) >= 0 && nrec >= nall && asked == nrec,
	   "foreach: every record (%zu, %zu paths); keep asked about each (%zu)", nrec, nall,
	   asked);
	bool same = true;
	for (size_t i = 0; i < nall; i++) {
		struct stat st;
		if (lstat(all[i].path, &st) < 0)
			continue;
		same = same && k < nsome && !strcmp(all[i].path, some[k].path) &&
		       all[i].kind == some[k].kind && !strcmp(all[i].hash, some[k].hash) &&
		       all[i].ino == some[k].ino;
		k++;
	}
	ok(same && k == nsome && nsome > 0 && nsome < nall,
	   "filtered: %zu of %zu, the same earliest records", nsome, nall);
	store_records_free(all, nall);
	store_records_free(some, nsome);
	is_int(store_turn_records_foreach(s, "no-such-turn", count, &nrec), -ENOENT,
	       "foreach of a turn that is not there");
}

static void test_scenario(struct store *s)
{
	setup_tree();
	_cleanup_free_ char *before = snapshot();
	struct store_turn *t;
	bool owned;
	int r = store_turn_join_or_begin(s, &opts, "call-1", "scenario", &t, &owned);
	ok(r >= 0 && owned, "private turn begun");
	if (r < 0)
		return;
	ok(op_write(t, "a.txt", "ALPHA changed\n") >= 0, "write");
	ok(op_write(t, "a.txt", "again\n") >= 0, "second write of the same path");
	ok(pre(t, "b.txt", 0, NULL) >= 0, "truncate recorded");
	struct strbuf p = STRBUF_INIT;
	ws_path(&p, "b.txt");
	(void)!truncate(p.buf, 3);
	ok(op_unlink(t, "c.txt") >= 0, "unlink (consumed)");
	/* like sed -i: a new file (recorded as absent), then rename over */
	ok(op_write(t, ".tmp-new", "new delta\n") >= 0, "temp file created");
	ok(op_rename(t, ".tmp-new", "d.txt") >= 0, "rename over");
	ok(op_mkdir(t, "newdir") >= 0 && op_write(t, "newdir/f", "inside\n") >= 0,
	   "mkdir + create");
	ok(op_rmdir(t, "empty") >= 0, "rmdir");
	ok(op_symlink(t, "b.txt", "link") >= 0, "symlink replaced");
	ok(op_chmod(t, "e.txt", 0600) >= 0, "chmod");
	ok(op_rename(t, "src", "dst") >= 0, "directory rename (tree)");
	ok(op_write(t, "dst/one", "one changed via new name\n") >= 0, "write via the new name");
	ok(op_rm_rf(t, "tree") >= 0, "rm -rf");
	ok(op_write(t, "we\nird\tname", "changed\n") >= 0, "weird name");
	ok(op_unlink(t, "hard") >= 0, "unlink of a hard-linked file");
	struct store_stats st;
	store_turn_stats(t, &st);
	ok(st.saved > 5 && st.absent >= 2, "stats: %" PRIu64 " saved, %" PRIu64 " absent", st.saved,
	   st.absent);
	/* the id once the turn is on disk: a lazy turn's id changes if another turn took it */
	_cleanup_free_ char *id = strdup(store_turn_id(t));
	ok(store_turn_commit(t, "scenario done") >= 0, "commit");
	_cleanup_free_ char *after = snapshot();

	struct store_turn_info info;
	ok(store_turn_info_get(s, id, &info) >= 0 && info.committed, "turn committed");
	struct store_record *post;
	size_t npost, nfiles = 0;
	ok(store_turn_post(s, id, &post, &npost) >= 0 && npost == info.n_paths,
	   "a post-state per path");
	for (size_t i = 0; i < npost; i++)
		nfiles += post[i].kind == STORE_KIND_FILE && post[i].ino != 0;
	ok(nfiles >= 5, "post-states of files carry inode numbers");
	store_records_free(post, npost);
	free(info.id);
	free(info.message);

	check_filter(s, id);

	_cleanup_free_ char *u1 = NULL, *u2 = NULL;
	is_int(undo_turn(s, id, true, &u1), 0, "undo without conflicts or failures");
	same_snapshot(before, "after undo");
	is_int(undo_turn(s, u1, true, &u2), 0, "undo of the undo");
	same_snapshot(after, "after undo of undo");

	/* The turn was touched by later turns: planning says so. */
	struct store_plan *pl;
	ok(store_plan_restore(s, id, NULL, 0, &pl) >= 0 && pl->n_conflicts > 0,
	   "later turns are conflicts");
	store_plan_free(pl);

	/* restore of one path */
	char *one = NULL;
	(void)!asprintf(&one, "%s/a.txt", ws);
	ok(store_plan_restore(s, id, &one, 1, &pl) >= 0 && pl->n_items == 1, "plan one path");
	if (pl) {
		_cleanup_free_ char *u3 = NULL;
		ok(store_plan_apply(s, pl, &opts, "restore", &u3) == 0, "restore one path");
		store_plan_free(pl);
	}
	struct strbuf want = STRBUF_INIT;
	_cleanup_free_ char *got = NULL;
	size_t n;
	FILE *f = fopen(one, "re");
	char buf[64] = "";
	if (f) {
		n = fread(buf, 1, sizeof buf - 1, f);
		buf[n] = '\0';
		fclose(f);
	}
	is_str(buf, "alpha\n", "a.txt restored");
	free(one);
	strbuf_free(&want);
	strbuf_free(&p);
}

/* Random operations over a small tree, several seeds. */
static const char *rnd_name(void)
{
	static const char *names[] = {"f0",    "f1", "f2",    "d0",    "d0/f3",
				      "d0/f4", "d1", "d1/f5", "d0/d2", "d0/d2/f6"};
	return names[rand() % (int)ELEMENTSOF(names)];
}

static void random_op(struct store_turn *t)
{
	const char *a = rnd_name(), *b = rnd_name();
	char data[64];
	snprintf(data, sizeof data, "data %d\n", rand());
	struct strbuf p = STRBUF_INIT;
	ws_path(&p, a);
	struct stat st;
	bool exists = lstat(p.buf, &st) >= 0;
	bool dir = exists && S_ISDIR(st.st_mode);
	bool lnk = exists && S_ISLNK(st.st_mode); /* the broker would follow it: not modelled */
	switch (rand() % 7) {
	case 0:
		if (!dir && !lnk)
			op_write(t, a, data);
		break;
	case 1:
		if (exists)
			op_rm_rf(t, a);
		break;
	case 2:
		if (!exists)
			op_mkdir(t, a);
		break;
	case 3:
		if (exists && !path_is_under(b, a))
			op_rename(t, a, b);
		break;
	case 4:
		if (exists && !S_ISLNK(st.st_mode))
			op_chmod(t, a, dir ? 0700 : 0640);
		break;
	case 5:
		if (!dir)
			op_symlink(t, b, a);
		break;
	default:
		if (exists && !dir && !lnk) {
			pre(t, a, 0, NULL);
			(void)!truncate(p.buf, 1);
		}
	}
	strbuf_free(&p);
}

static void test_random(struct store *s)
{
	for (unsigned seed = 1; seed <= 8; seed++) {
		srand(seed);
		reset_ws();
		puts_ws("f0", "zero\n");
		puts_ws("f1", "one\n");
		struct strbuf p = STRBUF_INIT;
		ws_path(&p, "d0");
		mkdir(p.buf, 0755);
		puts_ws("d0/f3", "three\n");
		strbuf_free(&p);
		_cleanup_free_ char *before = snapshot();
		struct store_turn *t;
		bool owned;
		if (store_turn_join_or_begin(s, &opts, NULL, "random", &t, &owned) < 0)
			continue;
		for (int i = 0; i < 40; i++)
			random_op(t);
		/* the id once the turn is on disk: a lazy turn's id changes if another turn (made
		 * in the same second, with the same 16 random bits) took it */
		_cleanup_free_ char *id = strdup(store_turn_id(t));
		store_turn_commit(t, NULL);
		_cleanup_free_ char *after = snapshot();
		_cleanup_free_ char *u = NULL, *u2 = NULL;
		char what[64];
		snprintf(what, sizeof what, "seed %u undo", seed);
		is_int(undo_turn(s, id, true, &u), 0, "%s applied", what);
		same_snapshot(before, what);
		snprintf(what, sizeof what, "seed %u undo of undo", seed);
		is_int(undo_turn(s, u, true, &u2), 0, "%s applied", what);
		same_snapshot(after, what);
	}
}

static void test_oversize(struct store *s)
{
	reset_ws();
	_cleanup_free_ char *big = malloc(2 << 20);
	memset(big, 'b', 2 << 20);
	put("big", big, 2 << 20);
	struct store_options o = opts;
	o.max_size_bytes = 1 << 20;
	o.deny_oversize = true;
	struct store_turn *t;
	bool owned;
	if (store_turn_join_or_begin(s, &o, NULL, "big", &t, &owned) < 0)
		return;
	is_int(pre(t, "big", 0, NULL), -EFBIG, "oversize denied");
	store_turn_free(t);
	o.deny_oversize = false;
	if (store_turn_join_or_begin(s, &o, NULL, "big", &t, &owned) < 0)
		return;
	struct strbuf p = STRBUF_INIT;
	ws_path(&p, "big");
	int pfd = open(ws, O_PATH | O_DIRECTORY | O_CLOEXEC);
	enum store_result res;
	ok(store_preimage(t, pfd, "big", p.buf, 0, &res, NULL) >= 0 &&
	       res == STORE_RESULT_NOT_BACKED_UP,
	   "oversize recorded as not backed up");
	close(pfd);
	_cleanup_free_ char *id = strdup(store_turn_id(t));
	store_turn_commit(t, NULL);
	struct store_record *v;
	size_t n;
	ok(store_turn_records(s, id, &v, &n) >= 0 && n == 1 && v[0].not_backed_up,
	   "manifest says not backed up");
	store_records_free(v, n);
	strbuf_free(&p);
}

static void test_enospc(void)
{
	if (geteuid() != 0) {
		ok(1, "# SKIP ENOSPC test needs root for a tmpfs");
		return;
	}
	char small[320];
	snprintf(small, sizeof small, "%s/small", root);
	mkdir(small, 0700);
	if (mount("tmpfs", small, "tmpfs", 0, "size=1m") < 0) {
		ok(1, "# SKIP cannot mount tmpfs: %s", strerror(errno));
		return;
	}
	reset_ws();
	_cleanup_free_ char *big = malloc(3 << 20);
	memset(big, 'x', 3 << 20);
	put("big", big, 3 << 20);
	puts_ws("small", "small\n");
	struct store *s;
	struct store_turn *t;
	bool owned;
	if (store_open(small, "enospc", &s) < 0 ||
	    store_turn_join_or_begin(s, &opts, NULL, "full", &t, &owned) < 0) {
		ok(0, "store on tmpfs");
		umount(small);
		return;
	}
	_cleanup_free_ char *id = strdup(store_turn_id(t));
	is_int(pre(t, "big", STORE_CONSUME, NULL), -ENOSPC, "full store: ENOSPC");
	struct stat st;
	struct strbuf p = STRBUF_INIT;
	ws_path(&p, "big");
	ok(stat(p.buf, &st) >= 0 && st.st_size == 3 << 20, "file untouched (not consumed)");
	ok(pre(t, "small", 0, NULL) >= 0, "small file still fits");
	store_turn_commit(t, NULL);
	struct store_record *v;
	size_t n;
	ok(store_turn_records(s, id, &v, &n) >= 0 && n == 1 &&
	       !strcmp(v[0].path + strlen(ws), "/small"),
	   "only the small file recorded");
	if (n == 1) {
		int fd = store_object_open(s, v[0].hash);
		ok(fd >= 0, "its object exists");
		safe_close(fd);
	}
	store_records_free(v, n);
	char cmd[400];
	snprintf(cmd, sizeof cmd, "test -z \"$(ls -A '%s'/sessions/enospc/modify_backup/tmp)\"",
		 small);
	ok(system(cmd) == 0, "no temp files left");
	store_close(s);
	umount(small);
	strbuf_free(&p);
}

static void child_loop(const char *sd, int explicit_turn, int k, int ready_fd)
{
	struct store *s;
	struct store_turn *t;
	bool owned;
	if (store_open(sd, "kill", &s) < 0 ||
	    store_turn_join_or_begin(s, &opts, "child", "child", &t, &owned) < 0)
		_exit(1);
	for (int i = 0;; i++) {
		char name[32], data[64];
		snprintf(name, sizeof name, "f%d", i % 50);
		snprintf(data, sizeof data, "child %d wrote %d\n", k, i);
		if (i % 7 == 3)
			op_unlink(t, name);
		else
			op_write(t, name, data);
		/* ready once something is recorded: a run's own turn exists on disk from then on */
		if (i == 0)
			(void)!write(ready_fd, "x", 1);
		if (explicit_turn && i >= 200)
			break;
	}
	store_turn_free(t);
	store_close(s);
	_exit(0);
}

static void test_kill(void)
{
	for (int round = 0; round < 5; round++) {
		reset_ws();
		for (int i = 0; i < 50; i += 2) {
			char name[32];
			snprintf(name, sizeof name, "f%d", i);
			puts_ws(name, "original\n");
		}
		_cleanup_free_ char *before = snapshot();
		int pfd[2];
		char c;
		if (pipe(pfd) < 0)
			return;
		pid_t pid = fork();
		if (pid == 0)
			child_loop(state, 0, 0, pfd[1]);
		close(pfd[1]);
		(void)!read(pfd[0], &c, 1);
		close(pfd[0]);
		usleep(2000 + (useconds_t)(rand() % 30000));
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		struct store *s;
		if (store_open(state, "kill", &s) < 0) {
			ok(0, "store opens after kill");
			continue;
		}
		struct store_turn_info *v;
		size_t n;
		ok(store_list_turns(s, &v, &n) >= 0 && n >= 1 && !v[0].committed,
		   "round %d: killed turn listed as open", round);
		_cleanup_free_ char *u = NULL;
		if (n >= 1) {
			is_int(undo_turn(s, v[0].id, false, &u), 0, "round %d: undo applied",
			       round);
			same_snapshot(before, "undo of a killed turn");
		}
		store_turn_infos_free(v, n);
		store_close(s);
	}
}

/*
 * The broker's side of a directory's rename, as before_change() does it: flush only when the
 * result is SAVED, rename, then killed before any other flush (ret_fd gets the result).
 */
static void tree_child(int ret_fd)
{
	struct store *s;
	struct store_turn *t;
	bool owned;
	if (store_open(state, "tree", &s) < 0 ||
	    store_turn_join_or_begin(s, &opts, "child", "child", &t, &owned) < 0)
		_exit(1);
	/* d recorded first (a chmod): its own record is there when the rename comes */
	if (pre(t, "d", 0, NULL) < 0)
		_exit(1);
	struct strbuf a = STRBUF_INIT, b = STRBUF_INIT;
	ws_path(&a, "d");
	ws_path(&b, "e");
	int wfd = open(ws, O_PATH | O_DIRECTORY | O_CLOEXEC);
	enum store_result res = STORE_RESULT_DISABLED, eres;
	/* e: absent, which needs no flush */
	if (wfd < 0 || store_preimage(t, wfd, "d", a.buf, STORE_TREE, &res, NULL) < 0 ||
	    store_preimage(t, wfd, "e", b.buf, 0, &eres, NULL) < 0 ||
	    (res == STORE_RESULT_SAVED && store_sync(t) < 0) || rename(a.buf, b.buf) < 0)
		_exit(1);
	char c = (char)res;
	(void)!write(ret_fd, &c, 1);
	raise(SIGKILL);
	_exit(1);
}

/*
 * A directory recorded earlier in its turn, then renamed: its files are copied at the rename, and
 * their records wait for store_sync(). The tree's result must be SAVED, not the directory's
 * ALREADY, or the broker renames before the records are written: killed then, it lost them, and
 * undo of the committed turn removed the renamed tree without giving the files back (t0310,
 * seed 310104).
 */
static void test_tree_kill(void)
{
	reset_ws();
	struct strbuf p = STRBUF_INIT;
	ws_path(&p, "d");
	mkdir(p.buf, 0755);
	ws_path(&p, "d/sub");
	mkdir(p.buf, 0755);
	strbuf_free(&p);
	puts_ws("d/a", "a in d\n");
	puts_ws("d/sub/b", "b in d/sub\n");
	_cleanup_free_ char *before = snapshot();
	int pfd[2];
	char c = -1;
	if (pipe(pfd) < 0)
		return;
	pid_t pid = fork();
	if (pid == 0) {
		close(pfd[0]);
		tree_child(pfd[1]);
	}
	close(pfd[1]);
	ok(read(pfd[0], &c, 1) == 1, "the child renamed d and was killed");
	close(pfd[0]);
	waitpid(pid, NULL, 0);
	is_int(c, STORE_RESULT_SAVED, "a tree whose directory was recorded before: SAVED");
	struct store *s;
	struct store_turn_info *v = NULL;
	size_t n = 0;
	if (store_open(state, "tree", &s) < 0) {
		ok(0, "store opens after the kill");
		return;
	}
	if (store_list_turns(s, &v, &n) < 0 || n != 1) {
		ok(0, "the killed turn is listed");
		store_close(s);
		return;
	}
	is_int(store_commit_id(s, v[0].id, "committed after kill"), 0, "killed turn committed");
	_cleanup_free_ char *u = NULL;
	is_int(undo_turn(s, v[0].id, true, &u), 0, "undo of the killed turn");
	same_snapshot(before, "d with its files back");
	store_turn_infos_free(v, n);
	store_close(s);
}

static void test_concurrent(void)
{
	reset_ws();
	for (int i = 0; i < 50; i++) {
		char name[32];
		snprintf(name, sizeof name, "f%d", i);
		puts_ws(name, "original\n");
	}
	_cleanup_free_ char *before = snapshot();
	struct store *s;
	char *id = NULL;
	if (store_open(state, "conc", &s) < 0 ||
	    store_turn_begin_explicit(s, &opts, "explicit", &id) < 0) {
		ok(0, "explicit turn");
		return;
	}
	pid_t pids[2];
	for (int k = 0; k < 2; k++) {
		pids[k] = fork();
		if (pids[k] == 0) {
			struct store *cs;
			struct store_turn *t;
			bool owned;
			if (store_open(state, "conc", &cs) < 0 ||
			    store_turn_join_or_begin(cs, &opts, "child", NULL, &t, &owned) < 0 ||
			    owned)
				_exit(1);
			for (int i = 0; i < 200; i++) {
				char name[32], data[64];
				snprintf(name, sizeof name, "f%d", (i * (k + 1)) % 60);
				snprintf(data, sizeof data, "child %d wrote %d\n", k, i);
				op_write(t, name, data);
			}
			store_turn_free(t);
			store_close(cs);
			_exit(0);
		}
	}
	int ok_children = 0;
	for (int k = 0; k < 2; k++) {
		int status;
		waitpid(pids[k], &status, 0);
		ok_children += WIFEXITED(status) && WEXITSTATUS(status) == 0;
	}
	is_int(ok_children, 2, "two runs joined the explicit turn");
	ok(store_commit_id(s, NULL, "both") >= 0, "explicit turn committed");
	_cleanup_free_ char *cur = NULL;
	is_int(store_current_turn(s, &cur), -ENOENT, "no explicit turn open any more");
	struct store_record *v;
	size_t n;
	ok(store_turn_records(s, id, &v, &n) >= 0 && n == 60, "one record per path (%zu)", n);
	store_records_free(v, n);
	_cleanup_free_ char *u = NULL;
	is_int(undo_turn(s, id, true, &u), 0, "undo of the joint turn");
	same_snapshot(before, "after undo of the joint turn");
	free(id);
	store_close(s);
}

static void test_gc(struct store *s)
{
	struct store_gc_stats gs;
	ok(store_gc(s, 0, &gs) >= 0 && gs.turns_removed > 0 && gs.objects_removed > 0,
	   "gc removed %" PRIu64 " turns, %" PRIu64 " objects", gs.turns_removed,
	   gs.objects_removed);
	struct store_turn_info *v;
	size_t n;
	ok(store_list_turns(s, &v, &n) >= 0, "list after gc");
	store_turn_infos_free(v, n);
}

/* A turn whose manifest cannot be read: gc cannot know which objects it needs, so it fails and
 * removes nothing (the sanitizer build also checks that the listed turns are freed). */
static void test_gc_bad_manifest(struct store *s)
{
	reset_ws();
	puts_ws("g", "kept by gc\n");
	_cleanup_free_ char *before = snapshot();
	struct store_turn *t;
	bool owned;
	if (store_turn_join_or_begin(s, &opts, NULL, "gc", &t, &owned) < 0) {
		ok(0, "turn for the gc test");
		return;
	}
	is_int(op_write(t, "g", "changed\n"), 0, "g changed in a turn");
	_cleanup_free_ char *id = strdup(store_turn_id(t));
	store_turn_commit(t, NULL);
	char mp[1024];
	snprintf(mp, sizeof mp, "%s/sessions/unit/modify_backup/turns/%s/manifest", state, id);
	char aside[1100];
	snprintf(aside, sizeof aside, "%s.aside", mp);
	ok(rename(mp, aside) == 0 && symlink("elsewhere", mp) == 0,
	   "manifest replaced by a symlink");
	struct store_gc_stats gs = {0};
	ok(store_gc(s, 86400, &gs) < 0 && gs.objects_removed == 0,
	   "gc fails on a manifest it cannot read");
	ok(unlink(mp) == 0 && rename(aside, mp) == 0, "manifest restored");
	_cleanup_free_ char *u = NULL;
	is_int(undo_turn(s, id, true, &u), 0, "undo after the failed gc");
	same_snapshot(before, "g restored from its backup: gc removed no object");
}

/*
 * A broker killed after keeping a file by a link (its object is the file's inode) and before the
 * unlink leaves the file sharing its inode with the object. The file's next backup, of the same
 * content, must not reuse that object: the change in place that follows would change the
 * pre-image with it, and undo would give back the new content.
 */
static void test_shared_object(struct store *s)
{
	reset_ws();
	puts_ws("f", "the content before both turns\n");
	struct strbuf p = STRBUF_INIT;
	ws_path(&p, "f");
	struct store_turn *t;
	bool owned, consumed = true;
	struct stat st;
	if (store_turn_join_or_begin(s, &opts, NULL, "killed", &t, &owned) < 0) {
		ok(0, "turn for the shared-object test");
		strbuf_free(&p);
		return;
	}
	ok(pre(t, "f", STORE_REPLACE, &consumed) >= 0 && !consumed,
	   "f kept by a link for its unlink, which never comes (the broker is killed)");
	store_turn_commit(t, NULL);
	ok(stat(p.buf, &st) == 0 && st.st_nlink == 2, "f shares its inode with its object (%ju)",
	   (uintmax_t)st.st_nlink);
	_cleanup_free_ char *before = snapshot();
	if (store_turn_join_or_begin(s, &opts, NULL, "in place", &t, &owned) < 0) {
		ok(0, "second turn");
		strbuf_free(&p);
		return;
	}
	is_int(op_write(t, "f", "changed in place\n"), 0, "f backed up, then changed in place");
	_cleanup_free_ char *id = strdup(store_turn_id(t));
	store_turn_commit(t, NULL);
	ok(stat(p.buf, &st) == 0 && st.st_nlink == 1, "the object no longer shares f's inode");
	_cleanup_free_ char *u = NULL;
	is_int(undo_turn(s, id, true, &u), 0, "undo of the second turn");
	same_snapshot(before, "f as before the second turn (content, mode, mtime)");
	strbuf_free(&p);
}

/*
 * Kept names (store-kept.c), on a store told to assume an ordered file system: a deleted file, a
 * removed directory and a removed symlink get names in kept/<turn>/ instead of a flush; a power cut
 * that loses the whole unflushed manifest is simulated by emptying it; the next store_open()
 * rebuilds the records from the kept names, and undo brings all three back.
 */
static void test_kept(void)
{
	reset_ws();
	puts_ws("p%q", "percent\n");
	puts_ws("keep", "stays\n");
	struct strbuf p = STRBUF_INIT;
	ws_path(&p, "d");
	mkdir(p.buf, 0750);
	chmod(p.buf, 0750);
	ws_path(&p, "l");
	(void)!symlink("keep", p.buf);
	_cleanup_free_ char *before = snapshot();
	setenv("BROKERED_STORE_ASSUME_ORDERED", "1", 1);
	struct store *s;
	struct store_turn *t;
	bool owned;
	if (store_open(NULL, "kept", &s) < 0 ||
	    store_turn_join_or_begin(s, &opts, NULL, "kept", &t, &owned) < 0) {
		ok(0, "store and turn for the kept test");
		unsetenv("BROKERED_STORE_ASSUME_ORDERED");
		strbuf_free(&p);
		return;
	}
	ok(op_unlink(t, "p%q") >= 0 && op_rmdir(t, "d") >= 0 && op_unlink(t, "l") >= 0,
	   "a file, a directory and a symlink removed");
	_cleanup_free_ char *id = strdup(store_turn_id(t));
	char kdir[1024], man[1024];
	snprintf(kdir, sizeof kdir, "%s/sessions/kept/modify_backup/kept/%s", state, id);
	snprintf(man, sizeof man, "%s/sessions/kept/modify_backup/turns/%s/manifest", state, id);
	/* the name of ws/p%q: the path without its leading '/', '/' as %2F, '%' as %25 */
	struct strbuf want = STRBUF_INIT;
	strbuf_printf(&want, "%s/", kdir);
	for (const char *c = ws + 1; *c; c++)
		strbuf_appends(&want, *c == '/' ? "%2F" : (char[]){*c, 0});
	strbuf_appends(&want, "%2Fp%25q");
	struct stat st;
	ok(lstat(want.buf, &st) == 0 && S_ISREG(st.st_mode),
	   "the file is kept under its path's name");
	ok(truncate(man, 0) == 0, "power cut simulated: the unflushed manifest is lost");
	store_turn_free(t);
	store_close(s);
	if (store_open(NULL, "kept", &s) < 0) {
		ok(0, "store reopens");
	} else {
		ok(lstat(kdir, &st) < 0 && errno == ENOENT,
		   "the reopened store settled the kept names");
		struct store_record *v = NULL;
		size_t n = 0;
		ok(store_turn_records(s, id, &v, &n) >= 0 && n == 3, "three records rebuilt (%zu)",
		   n);
		size_t kinds = 0;
		for (size_t i = 0; i < n; i++)
			kinds |= 1u << v[i].kind;
		ok(kinds ==
		       (1u << STORE_KIND_FILE | 1u << STORE_KIND_DIR | 1u << STORE_KIND_SYMLINK),
		   "a file, a directory and a symlink record");
		store_records_free(v, n);
		_cleanup_free_ char *u = NULL;
		is_int(undo_turn(s, id, true, &u), 0, "undo of the recovered turn");
		same_snapshot(before, "file, directory (mode 0750) and symlink back");
		store_close(s);
	}
	unsetenv("BROKERED_STORE_ASSUME_ORDERED");
	strbuf_free(&want);
	strbuf_free(&p);
}

/* Make the workspace directories rel[0..n), parents first. */
static void mkdirs_ws(const char *const *rel, size_t n)
{
	struct strbuf p = STRBUF_INIT;
	for (size_t i = 0; i < n; i++) {
		ws_path(&p, rel[i]);
		mkdir(p.buf, 0755);
	}
	strbuf_free(&p);
}

/* store_gone_lstat(): as a walk that follows no symlink sees the paths, with memory. */
static void test_gone_lstat(void)
{
	struct strbuf p = STRBUF_INIT;
	struct stat st;
	struct store_gone *g;
	ok(store_gone_new(&g) >= 0, "gone: new");
	static const char *const dirs[] = {"gone", "gone/a", "gone/a/b", "gone/real"};
	mkdirs_ws(dirs, ELEMENTSOF(dirs));
	puts_ws("gone/a/b/f", "f\n");
	puts_ws("gone/real/x", "x\n");
	ws_path(&p, "gone/link");
	ok(symlink("real", p.buf) == 0, "gone: a symlink to a directory");
	ws_path(&p, "gone/a/b/f");
	is_int(store_gone_lstat(g, p.buf, &st), 0, "gone: a file is there");
	ok(S_ISREG(st.st_mode), "gone: ... with its lstat()");
	ws_path(&p, "gone/link");
	is_int(store_gone_lstat(g, p.buf, &st), 0, "gone: the symlink itself is there");
	ok(S_ISLNK(st.st_mode), "gone: ... not followed");
	ws_path(&p, "gone/link/x");
	is_int(store_gone_lstat(g, p.buf, &st), -ENOENT,
	       "gone: a path below a symlink is not there");
	ws_path(&p, "gone/a/b/f/y");
	is_int(store_gone_lstat(g, p.buf, &st), -ENOENT, "gone: nor one below a file");
	ws_path(&p, "gone/a/b/nofile");
	is_int(store_gone_lstat(g, p.buf, &st), -ENOENT, "gone: a missing file");
	/* a missing tree: its top is learnt, and what is below it is missing without a look, even
	 * when made afterwards (the memory is of one look at the tree) */
	ws_path(&p, "gone/t1/t2/t3/f");
	is_int(store_gone_lstat(g, p.buf, &st), -ENOENT, "gone: a path in a missing tree");
	static const char *const late[] = {"gone/t1", "gone/t1/t2", "gone/t1/t2/t3"};
	mkdirs_ws(late, ELEMENTSOF(late));
	puts_ws("gone/t1/t2/t3/f", "late\n");
	ws_path(&p, "gone/t1/t2/t3/f");
	is_int(store_gone_lstat(g, p.buf, &st), -ENOENT,
	       "gone: remembered: the tree's top is missing");
	ws_path(&p, "gone/t1/other");
	is_int(store_gone_lstat(g, p.buf, &st), -ENOENT, "gone: ... for every path below it");
	ws_path(&p, "gone/a/b/f");
	is_int(store_gone_lstat(g, p.buf, &st), 0, "gone: a sibling tree is still there");
	store_gone_free(g);
	/* a fresh look sees the tree made meanwhile */
	ok(store_gone_new(&g) >= 0, "gone: new again");
	ws_path(&p, "gone/t1/t2/t3/f");
	is_int(store_gone_lstat(g, p.buf, &st), 0, "gone: a new look sees the new tree");
	store_gone_free(g);
	strbuf_free(&p);
}

/* ---- trees kept whole (store-tree.c) ---- */

static bool allow_all(const char *path, const struct stat *st, void *userdata)
{
	return true;
}

static bool allow_but_secret(const char *path, const struct stat *st, void *userdata)
{
	return !strstr(path, "secret");
}

/* store_keep_tree() on ws/rel: 1 kept, 0 not, -errno */
static int keep(struct store_turn *t, const char *rel,
		bool (*allow)(const char *, const struct stat *, void *), size_t *ret_n)
{
	struct strbuf p = STRBUF_INIT;
	ws_path(&p, rel);
	struct stat st;
	int r = lstat(p.buf, &st) < 0 ? -errno : 0;
	struct store_tree_opts o = {.allow = allow, .max_entries = 100, .durable = false};
	struct store_record *v = NULL;
	size_t n = 0;
	int wfd = open(ws, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (r >= 0)
		r = store_keep_tree(t, wfd, rel, p.buf, &st, &o, &v, &n);
	if (ret_n)
		*ret_n = n;
	store_records_free(v, n);
	close(wfd);
	strbuf_free(&p);
	return r;
}

static void test_kept_tree(struct store *s)
{
	reset_ws();
	static const char *const dirs[] = {"kt", "kt/a", "kt/a/b", "kt/empty"};
	mkdirs_ws(dirs, ELEMENTSOF(dirs));
	puts_ws("kt/a/f", "one\n");
	puts_ws("kt/a/b/g", "two\n");
	puts_ws("kt/a/secret", "s\n");
	puts_ws("other", "stays\n");
	struct strbuf p = STRBUF_INIT, q = STRBUF_INIT;
	ws_path(&p, "kt/a/link");
	ok(symlink("f", p.buf) == 0, "kept tree: a symlink in it");
	_cleanup_free_ char *before = snapshot();

	struct store_turn *t;
	bool owned;
	if (!ok(store_turn_join_or_begin(s, &opts, NULL, "tree", &t, &owned) >= 0,
		"kept tree: turn"))
		return;
	_cleanup_free_ char *id = strdup(store_turn_id(t));
	size_t n = 0;
	is_int(keep(t, "kt", allow_but_secret, &n), 0,
	       "kept tree: a path the caller does not allow: not kept whole");
	same_snapshot(before, "kept tree: nothing changed");
	/* a second name of a file: the stored inode would be shared */
	ws_path(&p, "kt/a/f");
	ws_path(&q, "kt-link");
	ok(link(p.buf, q.buf) == 0, "kept tree: a hard link from outside");
	is_int(keep(t, "kt", allow_all, &n), 0, "kept tree: a file with two names: not kept whole");
	ok(unlink(q.buf) == 0, "kept tree: the link removed");
	/* a mount point inside (a bind mount of the tree's own file system, same st_dev) */
	if (geteuid() == 0) {
		ws_path(&p, "kt/empty");
		if (ok(mount(p.buf, p.buf, NULL, MS_BIND, NULL) == 0,
		       "kept tree: a bind mount in it")) {
			is_int(keep(t, "kt", allow_all, &n), 0,
			       "kept tree: a mount point inside: not kept whole");
			ok(umount2(p.buf, MNT_DETACH) == 0, "kept tree: unmounted");
		}
	}
	is_int(keep(t, "kt", allow_all, &n), 1, "kept tree: kept whole");
	is_int((int)n, 8, "kept tree: a record for every path");
	ws_path(&p, "kt");
	ok(access(p.buf, F_OK) < 0 && errno == ENOENT, "kept tree: gone from the workspace");
	ok(store_preimage_recorded(t, p.buf), "kept tree: its paths are recorded in the turn");
	/* the content of a file, from the record */
	struct store_record *v;
	size_t nv;
	ok(store_turn_records(s, id, &v, &nv) >= 0, "kept tree: records read");
	const struct store_record *f = NULL;
	ws_path(&p, "kt/a/b/g");
	for (size_t i = 0; i < nv; i++)
		if (strcmp(v[i].path, p.buf) == 0)
			f = &v[i];
	ok(f && f->tree && f->kind == STORE_KIND_FILE && !f->hash[0],
	   "kept tree: a file's record names its tree, no hash");
	int fd = f ? store_record_content_open(s, id, f) : -1;
	char buf[16] = {0};
	ok(fd >= 0 && read(fd, buf, sizeof buf) == 4 && strcmp(buf, "two\n") == 0,
	   "kept tree: the content, from the tree in the store");
	safe_close(fd);
	store_records_free(v, nv);
	ok(store_turn_commit(t, "tree") >= 0, "kept tree: commit");
	ok(undo_turn(s, id, true, NULL) >= 0, "kept tree: undo");
	same_snapshot(before, "kept tree: undone");
	/* undone: every file is back as another inode with the same bytes, as it was */
	struct store_plan *pl;
	size_t pending = 0;
	if (ok(store_plan_restore(s, id, NULL, 0, &pl) >= 0, "kept tree: planned again")) {
		for (size_t i = 0; i < pl->n_items; i++)
			pending += pl->items[i].action != STORE_ACTION_NONE;
		ok(pending == 0 && pl->n_conflicts == 0,
		   "kept tree: ... nothing to do, no conflict (%zu to do)", pending);
		store_plan_free(pl);
	}

	/* records whose tree never reached the store do not count */
	ok(store_turn_join_or_begin(s, &opts, NULL, "no tree", &t, &owned) >= 0,
	   "kept tree: another turn");
	free(id);
	id = strdup(store_turn_id(t));
	ws_path(&p, "other");
	struct store_record bogus = {.kind = STORE_KIND_FILE,
				     .path = p.buf,
				     .size = 6,
				     .mode = 0100644,
				     .tree = (char *)"t-never",
				     .tree_at = strlen(ws)};
	ok(pre(t, "kt/a/f", 0, NULL) >= 0 && store_record_append(t, &bogus) >= 0,
	   "kept tree: a record of a tree that is not there");
	ok(store_turn_commit(t, "no tree") >= 0, "kept tree: commit");
	ok(store_turn_records(s, id, &v, &nv) >= 0 && nv == 1 && strstr(v[0].path, "kt/a/f"),
	   "kept tree: ... is not read back");
	store_records_free(v, nv);
	strbuf_free(&p);
	strbuf_free(&q);
}

/* store_keep_file() on ws/name, then the new file put in its place (the change): 1, 0, -errno */
static int keep_then_replace(struct store_turn *t, const char *name, const char *now, bool durable)
{
	struct strbuf p = STRBUF_INIT;
	ws_path(&p, name);
	struct stat st;
	int wfd = open(ws, O_PATH | O_DIRECTORY | O_CLOEXEC);
	int r = wfd < 0 || lstat(p.buf, &st) < 0
		    ? -errno
		    : store_keep_file(t, wfd, name, p.buf, &st, durable);
	if (r > 0)
		puts_ws(name, now);
	if (wfd >= 0)
		close(wfd);
	strbuf_free(&p);
	return r;
}

static void test_keep_file(struct store *s)
{
	reset_ws();
	puts_ws("m", "moved\n");
	puts_ws("two", "two names\n");
	puts_ws("again", "first\n");
	struct strbuf p = STRBUF_INIT, q = STRBUF_INIT;
	ws_path(&p, "m");
	chmod(p.buf, 0640);
	struct timespec old[2] = {{.tv_sec = 1000000000}, {.tv_sec = 1000000000}};
	utimensat(AT_FDCWD, p.buf, old, 0);
	struct stat mst;
	lstat(p.buf, &mst);
	ws_path(&p, "two");
	ws_path(&q, "two-b");
	ok(link(p.buf, q.buf) == 0, "kept file: a file with a second name");
	_cleanup_free_ char *before = snapshot();

	struct store_turn *t;
	bool owned;
	if (!ok(store_turn_join_or_begin(s, &opts, NULL, "moved", &t, &owned) >= 0,
		"kept file: turn"))
		return;
	_cleanup_free_ char *id = strdup(store_turn_id(t));
	is_int(keep_then_replace(t, "m", "changed\n", false), 1, "kept file: moved into the store");
	is_int(keep_then_replace(t, "two", "x\n", false), 0,
	       "kept file: a file with two names is not moved (it would share the inode)");
	/* as on a file system that does not order metadata, whatever /tmp is here */
	bool ordered = t->store->ordered_metadata;
	t->store->ordered_metadata = false;
	is_int(keep_then_replace(t, "again", "x\n", true), 0,
	       "kept file: not where a crash may reach the disk before the move");
	t->store->ordered_metadata = true;
	is_int(keep_then_replace(t, "again", "second\n", true), 1,
	       "kept file: moved, with sync, where metadata is ordered");
	t->store->ordered_metadata = ordered;
	is_int(keep_then_replace(t, "again", "third\n", false), 0,
	       "kept file: a path recorded already in the turn is not moved again");
	struct store_record *v;
	size_t nv;
	const struct store_record *f = NULL;
	ws_path(&p, "m");
	ok(store_records_release(t) >= 0 && store_turn_records(s, id, &v, &nv) >= 0,
	   "kept file: records written and read");
	for (size_t i = 0; i < nv; i++)
		if (strcmp(v[i].path, p.buf) == 0)
			f = &v[i];
	ok(f && f->tree && f->tree_at == 0 && !f->hash[0] && f->ino == (uint64_t)mst.st_ino &&
	       f->mode == (uint32_t)mst.st_mode && f->mtime_ns == 1000000000LL * 1000000000,
	   "kept file: the record names the tree and the very inode, its mode and mtime");
	int fd = f ? store_record_content_open(s, id, f) : -1;
	char buf[16] = {0};
	struct stat fst;
	ok(fd >= 0 && read(fd, buf, sizeof buf) == 6 && strcmp(buf, "moved\n") == 0 &&
	       fstat(fd, &fst) == 0 && fst.st_ino == mst.st_ino,
	   "kept file: the content is the file itself, in the store");
	if (fd >= 0)
		close(fd);
	store_records_free(v, nv);
	ok(store_turn_commit(t, "moved") >= 0, "kept file: commit");
	ok(undo_turn(s, id, true, NULL) >= 0, "kept file: undo");
	same_snapshot(before, "kept file: undone");
	strbuf_free(&p);
	strbuf_free(&q);
}

/* store_turn_commit_seen(): a path the caller saw a moment ago gets what it saw as its
 * post-state (no second look), a path it did not see is looked at, and a seen path the turn did
 * not record adds nothing. */
static void test_commit_seen(struct store *s)
{
	reset_ws();
	puts_ws("a", "alpha\n");
	puts_ws("b", "beta\n");
	puts_ws("c", "gamma\n");
	struct store_turn *t;
	bool owned;
	if (!ok(store_turn_join_or_begin(s, &opts, NULL, "seen", &t, &owned) >= 0,
		"commit seen: turn"))
		return;
	_cleanup_free_ char *id = strdup(store_turn_id(t));
	ok(op_write(t, "a", "A\n") >= 0 && op_write(t, "b", "B\n") >= 0 &&
	       op_write(t, "c", "C\n") >= 0,
	   "commit seen: three changes");
	struct strbuf pa = STRBUF_INIT, pb = STRBUF_INIT, pc = STRBUF_INIT, pz = STRBUF_INIT;
	ws_path(&pa, "a");
	ws_path(&pb, "b");
	ws_path(&pc, "c");
	ws_path(&pz, "zz");
	struct stat sa, sb;
	ok(lstat(pa.buf, &sa) == 0 && lstat(pb.buf, &sb) == 0, "commit seen: lstat");
	/* what the caller saw of b differs from the disk: the commit must not look again */
	sb.st_mode = S_IFREG | 0600;
	sb.st_size = 99;
	struct store_seen seen[3] = {{.path = pa.buf}, {.path = pb.buf}, {.path = pz.buf}};
	store_seen_set(&seen[0], &sa);
	store_seen_set(&seen[1], &sb);
	store_seen_set(&seen[2], &sa);
	ok(unlink(pc.buf) == 0, "commit seen: c removed, unseen");
	ok(store_turn_commit_seen(t, "seen", seen, 3) >= 0, "commit seen: commit");
	struct store_record *post = NULL;
	size_t n = 0;
	ok(store_turn_post(s, id, &post, &n) >= 0, "commit seen: post-states read");
	is_int((int)n, 3,
	       "commit seen: one post-state per recorded path, none for an unrecorded one");
	const struct store_record *ra = NULL, *rb = NULL, *rc = NULL;
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(post[i].path, pa.buf))
			ra = &post[i];
		if (!strcmp(post[i].path, pb.buf))
			rb = &post[i];
		if (!strcmp(post[i].path, pc.buf))
			rc = &post[i];
	}
	ok(ra && ra->kind == STORE_KIND_FILE && ra->ino == (uint64_t)sa.st_ino && ra->size == 2 &&
	       ra->mode == (uint32_t)sa.st_mode &&
	       ra->mtime_ns == (int64_t)sa.st_mtim.tv_sec * 1000000000 + sa.st_mtim.tv_nsec,
	   "commit seen: a's post-state is what was seen (inode, size, mode, mtime)");
	ok(rb && rb->mode == (S_IFREG | 0600) && rb->size == 99,
	   "commit seen: b's post-state is what was seen, not looked at again");
	ok(rc && rc->kind == STORE_KIND_ABSENT, "commit seen: c, not seen, is looked at: absent");
	store_records_free(post, n);
	strbuf_free(&pa);
	strbuf_free(&pb);
	strbuf_free(&pc);
	strbuf_free(&pz);
}

/* The broker's way in: store_preimage_stat() with STORE_REPLACE | STORE_MOVE moves a file where
 * store_keep_file() can, says so (consumed), and keeps it the other way where it cannot. */
static void test_keep_file_flag(struct store *s)
{
	reset_ws();
	puts_ws("m", "moved\n");
	puts_ws("l", "linked\n");
	puts_ws("two", "two names\n");
	puts_ws("d-unordered", "durable, unordered\n");
	puts_ws("d-ordered", "durable, ordered\n");
	struct strbuf p = STRBUF_INIT, q = STRBUF_INIT;
	ws_path(&p, "two");
	ws_path(&q, "two-b");
	(void)!link(p.buf, q.buf);
	_cleanup_free_ char *before = snapshot();
	struct store_turn *t;
	bool owned;
	if (!ok(store_turn_join_or_begin(s, &opts, NULL, "flag", &t, &owned) >= 0,
		"STORE_MOVE: turn"))
		return;
	_cleanup_free_ char *id = strdup(store_turn_id(t));
	int wfd = open(ws, O_PATH | O_DIRECTORY | O_CLOEXEC);
	static const struct {
		const char *name;
		unsigned flags;
		bool ordered; /* the store's file system orders metadata */
		bool consumed;
		const char *what;
	} cases[] = {
	    {"m", STORE_REPLACE | STORE_MOVE | STORE_VOLATILE, false, true,
	     "a file with one name: moved"},
	    {"l", STORE_REPLACE, true, false, "without STORE_MOVE: kept by a link, the name stays"},
	    {"two", STORE_REPLACE | STORE_MOVE | STORE_VOLATILE, true, false,
	     "a file with two names: kept by its content, the name stays"},
	    {"d-unordered", STORE_REPLACE | STORE_MOVE, false, false,
	     "not volatile, with sync, metadata not ordered: kept by a link, the name stays"},
	    {"d-ordered", STORE_REPLACE | STORE_MOVE, true, true,
	     "not volatile, with sync, metadata ordered: moved"},
	};
	bool ordered = t->store->ordered_metadata;
	ok(opts.sync, "STORE_MOVE: (the turn flushes: sandbox.fileBackup.sync)");
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		t->store->ordered_metadata = cases[i].ordered;
		struct stat st;
		enum store_result res = STORE_RESULT_DISABLED;
		bool consumed = !cases[i].consumed;
		ws_path(&p, cases[i].name);
		int r = lstat(p.buf, &st) < 0
			    ? -errno
			    : store_preimage_stat(t, wfd, cases[i].name, p.buf, &st, cases[i].flags,
						  &res, &consumed);
		ok(r == 0 && res == STORE_RESULT_SAVED && consumed == cases[i].consumed &&
		       (access(p.buf, F_OK) == 0) == !cases[i].consumed,
		   "STORE_MOVE: %s", cases[i].what);
		/* the change the flags announce: a new file renamed over the name */
		puts_ws("new", "new\n");
		ws_path(&q, "new");
		(void)!rename(q.buf, p.buf);
	}
	t->store->ordered_metadata = ordered;
	close(wfd);
	ok(store_turn_commit(t, "flag") >= 0, "STORE_MOVE: commit");
	ok(undo_turn(s, id, true, NULL) >= 0, "STORE_MOVE: undo");
	same_snapshot(before, "STORE_MOVE: undone");
	strbuf_free(&p);
	strbuf_free(&q);
}

/* A broker that moved a file into the store and was killed before its record reached the
 * manifest (as a power cut may lose it, on a file system that orders metadata): the recovery finds
 * the file in the tree and records it. */
static void test_keep_file_kill(void)
{
	reset_ws();
	puts_ws("k", "kept before the kill\n");
	_cleanup_free_ char *before = snapshot();
	int pfd[2];
	if (pipe(pfd) < 0)
		return;
	pid_t pid = fork();
	if (pid == 0) {
		close(pfd[0]);
		struct store *cs;
		struct store_turn *t;
		bool owned;
		if (store_open(state, "keepkill", &cs) < 0 ||
		    store_turn_join_or_begin(cs, &opts, "child", "child", &t, &owned) < 0 ||
		    keep_then_replace(t, "k", "new\n", false) != 1)
			_exit(1);
		/* its record waits in memory, with the held ones */
		(void)!write(pfd[1], "k", 1);
		raise(SIGKILL);
		_exit(1);
	}
	close(pfd[1]);
	char c = 0;
	ok(read(pfd[0], &c, 1) == 1,
	   "kept file: the child moved k and was killed before its record was written");
	close(pfd[0]);
	waitpid(pid, NULL, 0);
	struct store *s;
	struct store_turn_info *v = NULL;
	size_t n = 0;
	if (!ok(store_open(state, "keepkill", &s) >= 0,
		"kept file: the store opens after the kill"))
		return;
	if (ok(store_list_turns(s, &v, &n) >= 0 && n == 1,
	       "kept file: the killed turn is listed")) {
		struct store_record *r = NULL;
		size_t nr = 0;
		ok(store_turn_records(s, v[0].id, &r, &nr) >= 0 && nr == 1 && r[0].tree &&
		       strstr(r[0].path, "/k"),
		   "kept file: the recovery made its record again");
		store_records_free(r, nr);
		is_int(store_commit_id(s, v[0].id, "committed after kill"), 0,
		       "kept file: the killed turn committed");
		is_int(undo_turn(s, v[0].id, true, NULL), 0, "kept file: undo of the killed turn");
		same_snapshot(before, "kept file: k back as it was");
	}
	store_turn_infos_free(v, n);
	store_close(s);
}

int main(void)
{
	snprintf(root, sizeof root, "/tmp/test-store-XXXXXX");
	if (!mkdtemp(root))
		return 1;
	snprintf(ws, sizeof ws, "%s/ws", root);
	snprintf(state, sizeof state, "%s/state/brokered", root);
	char xdg[300];
	snprintf(xdg, sizeof xdg, "%s/state", root);
	setenv("XDG_STATE_HOME", xdg, 1);
	umask(077); /* the store and restore must not depend on it */
	mkdir(ws, 0755);

	test_crc32();
	test_manifest();
	test_manifest_stream();
	test_gone_lstat();
	char *sd = NULL;
	ok(store_state_dir(&sd) >= 0 && strcmp(sd, state) == 0, "state dir from XDG_STATE_HOME");
	free(sd);
	struct store *s;
	if (store_open(NULL, "unit", &s) < 0)
		return ok(0, "store opens"), tap_done();
	test_scenario(s);
	test_random(s);
	test_oversize(s);
	test_gc(s);
	test_gc_bad_manifest(s);
	test_shared_object(s);
	test_kept_tree(s);
	test_keep_file(s);
	test_keep_file_flag(s);
	test_commit_seen(s);
	store_close(s);
	test_keep_file_kill();
	test_kept();
	test_enospc();
	test_kill();
	test_tree_kill();
	test_concurrent();
	rm_rf(root);
	return tap_done();
}
