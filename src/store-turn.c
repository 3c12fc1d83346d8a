/* SPDX-License-Identifier: MIT */
/*
 * Turns: their metadata, the explicitly begun turn ("current"), joining or beginning a run's turn,
 * and commit (post-states, then the meta record).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "basic/escape.h"
#include "basic/fs-util.h"
#include "basic/macro.h"
#include "basic/parse-util.h"
#include "basic/strbuf.h"
#include "store-internal.h"
#include "store.h"

/* ---- turn metadata ---- */

static int meta_format(const struct store_turn_info *m, struct strbuf *out)
{
	size_t start;
	int r = store_line_begin(out, &start);
	r = r < 0 ? r : store_line_kvs(out, "id", m->id);
	r = r < 0 ? r : store_line_kvs(out, "st", m->committed ? "committed" : "open");
	r = r < 0 ? r : store_line_kvs(out, "msg", m->message ? m->message : "");
	r = r < 0 ? r : strbuf_printf(out, " b=%" PRId64 " e=%" PRId64, m->begin_ns, m->commit_ns);
	r = r < 0 ? r : store_line_kvu(out, "ms", m->max_size_bytes);
	return r < 0 ? r : store_line_end(out, start);
}

static int meta_set(struct store_turn_info *m, const char *key, const char *v)
{
	if (strcmp(key, "id") == 0 && !m->id)
		return store_unescape_dup(v, &m->id);
	if (strcmp(key, "msg") == 0 && !m->message)
		return store_unescape_dup(v, &m->message);
	if (strcmp(key, "st") == 0) {
		m->committed = strcmp(v, "committed") == 0;
		return 0;
	}
	if (strcmp(key, "b") == 0)
		return parse_i64(v, 10, &m->begin_ns);
	if (strcmp(key, "e") == 0)
		return parse_i64(v, 10, &m->commit_ns);
	if (strcmp(key, "ms") == 0)
		return parse_u64(v, 10, &m->max_size_bytes);
	return 0;
}

int store_meta_read(int turn_fd, struct store_turn_info *ret)
{
	_cleanup_free_ char *buf = NULL;
	size_t n;
	int r = store_read_file_at(turn_fd, "meta", STORE_META_MAX, &buf, &n);
	if (r < 0)
		return r;
	if (n == 0 || buf[n - 1] != '\n')
		return -EBADMSG;
	struct store_kv kv[16];
	size_t nkv;
	if ((r = store_line_split(buf, n - 1, kv, ELEMENTSOF(kv), &nkv)) < 0)
		return r;
	struct store_turn_info m = {0};
	for (size_t i = 0; r >= 0 && i < nkv; i++)
		r = meta_set(&m, kv[i].key, kv[i].value);
	if (r >= 0 && (!m.id || !store_id_valid(m.id)))
		r = -EBADMSG;
	if (r < 0) {
		free(m.id);
		free(m.message);
		return -EBADMSG;
	}
	*ret = m;
	return 0;
}

static int meta_write(int turn_fd, const struct store_turn_info *m)
{
	struct strbuf sb = STRBUF_INIT;
	int r = meta_format(m, &sb);
	if (r >= 0)
		r = store_write_file_atomic_at(turn_fd, "meta", sb.buf, sb.len);
	strbuf_free(&sb);
	return r;
}

void store_turn_infos_free(struct store_turn_info *t, size_t n)
{
	for (size_t i = 0; t && i < n; i++) {
		free(t[i].id);
		free(t[i].message);
	}
	if (n)
		free(t);
}

/* ---- turn objects ---- */

static int make_turn_id(char **ret)
{
	struct timespec ts;
	struct tm tm;
	uint16_t rnd;
	clock_gettime(CLOCK_REALTIME, &ts);
	if (!gmtime_r(&ts.tv_sec, &tm))
		return -EINVAL;
	if (getrandom(&rnd, sizeof rnd, 0) != sizeof rnd)
		return negative_errno();
	char *s;
	if (asprintf(&s, "%04d%02d%02d-%02d%02d%02d-%04x", tm.tm_year + 1900, tm.tm_mon + 1,
		     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, rnd) < 0)
		return -ENOMEM;
	*ret = s;
	return 0;
}

static int append_call(int turn_fd, const char *call)
{
	if (!call || !*call)
		return 0;
	struct strbuf sb = STRBUF_INIT;
	int r = escape_appends(&sb, call);
	r = r < 0 ? r : strbuf_appendc(&sb, '\n');
	int fd = r < 0 ? -1
		       : openat(turn_fd, "calls",
				O_CREAT | O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (r >= 0 && fd < 0)
		r = negative_errno();
	if (r >= 0)
		r = loop_write(fd, sb.buf, sb.len);
	safe_close(fd);
	strbuf_free(&sb);
	return r;
}

static void turn_free_fds(struct store_turn *t)
{
	safe_close(t->dir_fd);
	safe_close(t->manifest_fd);
	safe_close(t->kept_fd);
	safe_close(t->file_tree_fd);
	safe_close(t->file_tree_dir_fd);
	free(t->file_tree);
	free(t->file_tree_dir);
	store_set_free(&t->seen);
	free(t->id);
	free(t->call);
	free(t->pending);
	free(t->lazy_message);
	strbuf_free(&t->held);
	free(t);
}

/* A turn object with no file open yet; NULL: out of memory. */
static struct store_turn *turn_alloc(struct store *s, const struct store_options *o,
				     const char *call)
{
	struct store_turn *t = calloc(1, sizeof *t);
	if (!t)
		return NULL;
	t->store = s;
	t->opts = *o;
	t->dir_fd = t->manifest_fd = t->kept_fd = t->file_tree_fd = t->file_tree_dir_fd = -1;
	if (call && !(t->call = strdup(call))) {
		turn_free_fds(t);
		return NULL;
	}
	return t;
}

/* Open an existing turn directory for appending. */
static int turn_attach(struct store *s, const struct store_options *o, const char *id,
		       const char *call, struct store_turn **ret)
{
	struct store_turn *t = turn_alloc(s, o, call);
	if (!t)
		return -ENOMEM;
	t->id = strdup(id);
	int r = t->id ? 0 : -ENOMEM;
	if (r >= 0 && (t->dir_fd = store_open_dir_at(s->turns_fd, id)) < 0)
		r = t->dir_fd;
	/* Shared while a run uses the turn: `log` tells running from interrupted turns by it. */
	if (r >= 0 && RETRY_EINTR(flock(t->dir_fd, LOCK_SH)) < 0)
		r = negative_errno();
	if (r >= 0) {
		t->manifest_fd = openat(t->dir_fd, "manifest",
					O_CREAT | O_RDWR | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (t->manifest_fd < 0)
			r = negative_errno();
	}
	if (r < 0) {
		turn_free_fds(t);
		return r;
	}
	*ret = t;
	return 0;
}

static int turn_create_as(struct store *s, const struct store_options *o, const char *message,
			  const char *call, uint64_t max_size, const char *want_id,
			  int64_t begin_ns, struct store_turn **ret)
{
	_cleanup_free_ char *id = NULL;
	int r;
	for (int tries = 0;; tries++) {
		free(id);
		id = NULL;
		if (tries == 0 && want_id)
			id = strdup(want_id);
		else if ((r = make_turn_id(&id)) < 0)
			return r;
		if (!id)
			return -ENOMEM;
		if (mkdirat(s->turns_fd, id, 0700) >= 0)
			break;
		if (errno != EEXIST || tries > 100)
			return negative_errno();
	}
	if (fchmodat(s->turns_fd, id, 0700, 0) < 0)
		return negative_errno();
	struct store_turn_info m = {.id = id,
				    .message = (char *)message,
				    .begin_ns = begin_ns ? begin_ns : store_now_ns(),
				    .max_size_bytes = max_size};
	struct store_turn *t;
	if ((r = turn_attach(s, o, id, call, &t)) < 0)
		return r;
	if ((r = meta_write(t->dir_fd, &m)) < 0 || (r = append_call(t->dir_fd, call)) < 0 ||
	    (r = store_fsync_dirfd(t->dir_fd)) < 0 || (r = store_fsync_dirfd(s->turns_fd)) < 0) {
		turn_free_fds(t);
		return r;
	}
	*ret = t;
	return 0;
}

static int turn_create(struct store *s, const struct store_options *o, const char *message,
		       const char *call, uint64_t max_size, struct store_turn **ret)
{
	return turn_create_as(s, o, message, call, max_size, NULL, 0, ret);
}

int store_turn_new_private(struct store *s, const struct store_options *o, const char *message,
			   struct store_turn **ret)
{
	int r = turn_create(s, o, message, NULL, 0, ret);
	if (r >= 0)
		(*ret)->exclusive = true;
	return r;
}

/* A private turn that exists only in memory until its first pre-image. */
static int turn_new_lazy(struct store *s, const struct store_options *o, const char *message,
			 const char *call, struct store_turn **ret)
{
	struct store_turn *t = turn_alloc(s, o, call);
	if (!t)
		return -ENOMEM;
	t->lazy = true;
	t->exclusive = true;
	t->lazy_begin_ns = store_now_ns();
	int r = make_turn_id(&t->id);
	if (r >= 0 && message && !(t->lazy_message = strdup(message)))
		r = -ENOMEM;
	if (r < 0) {
		turn_free_fds(t);
		return r;
	}
	*ret = t;
	return 0;
}

/* Create the lazy turn on disk now; its id stays unless another turn took it meanwhile. */
int store_turn_materialize(struct store_turn *t)
{
	if (!t->lazy)
		return 0;
	struct store_turn *n = NULL;
	int r = turn_create_as(t->store, &t->opts, t->lazy_message, t->call, 0, t->id,
			       t->lazy_begin_ns, &n);
	if (r < 0)
		return r;
	/* take over the fresh turn's directory and identity */
	free(t->id);
	t->id = TAKE_PTR(n->id);
	t->dir_fd = TAKE_FD(n->dir_fd);
	t->manifest_fd = TAKE_FD(n->manifest_fd);
	turn_free_fds(n);
	t->lazy = false;
	return 0;
}

bool store_turn_recorded(const struct store_turn *t)
{
	return t && !t->lazy;
}

static int current_lock(struct store *s)
{
	int fd =
	    openat(s->session_fd, "current.lock", O_CREAT | O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return negative_errno();
	if (RETRY_EINTR(flock(fd, LOCK_EX)) < 0) {
		int r = negative_errno();
		safe_close(fd);
		return r;
	}
	return fd;
}

/* The id in the "current" marker if it names an open turn; a stale marker is removed. */
static int current_read_locked(struct store *s, char **ret_id)
{
	_cleanup_free_ char *buf = NULL;
	size_t n;
	int r = store_read_file_at(s->session_fd, "current", STORE_ID_MAX + 2, &buf, &n);
	if (r < 0)
		return r == -ENOENT ? -ENOENT : r;
	if (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	struct store_turn_info m = {0};
	_cleanup_close_ int tfd =
	    store_id_valid(buf) ? store_open_dir_at(s->turns_fd, buf) : -ENOENT;
	if (tfd >= 0)
		r = store_meta_read(tfd, &m);
	if (tfd < 0 || r < 0 || m.committed) {
		free(m.id);
		free(m.message);
		(void)unlinkat(s->session_fd, "current", 0);
		return -ENOENT;
	}
	free(m.id);
	free(m.message);
	*ret_id = TAKE_PTR(buf);
	return 0;
}

int store_current_turn(struct store *s, char **ret_id)
{
	int lfd = current_lock(s);
	if (lfd < 0)
		return lfd;
	int r = current_read_locked(s, ret_id);
	safe_close(lfd);
	return r;
}

/* Fill the path set from the manifest, so joining runs do not record paths again. */
static int turn_load_seen(struct store_turn *t)
{
	return store_manifest_foreach_turn(t->dir_fd, store_set_add_record, &t->seen);
}

int store_turn_join_or_begin(struct store *s, const struct store_options *o, const char *tool_call,
			     const char *message, struct store_turn **ret, bool *ret_owned)
{
	int lfd = current_lock(s);
	if (lfd < 0)
		return lfd;
	_cleanup_free_ char *id = NULL;
	struct store_turn *t = NULL;
	bool owned = false;
	int r = current_read_locked(s, &id);
	if (r >= 0) {
		struct store_options jo = *o;
		struct store_turn_info m = {0};
		_cleanup_close_ int tfd = store_open_dir_at(s->turns_fd, id);
		if (tfd >= 0 && store_meta_read(tfd, &m) >= 0 && m.max_size_bytes)
			jo.max_size_bytes = m.max_size_bytes;
		free(m.id);
		free(m.message);
		r = turn_attach(s, &jo, id, tool_call, &t);
		if (r >= 0 && (r = turn_load_seen(t)) >= 0)
			r = append_call(t->dir_fd, tool_call);
		if (r < 0 && t) {
			turn_free_fds(t);
			t = NULL;
		}
	} else if (r == -ENOENT) {
		r = turn_new_lazy(s, o, message, tool_call, &t);
		owned = true;
	}
	safe_close(lfd);
	if (r < 0)
		return r;
	*ret = t;
	*ret_owned = owned;
	return 0;
}

int store_turn_begin_explicit(struct store *s, const struct store_options *o, const char *message,
			      char **ret_id)
{
	int lfd = current_lock(s);
	if (lfd < 0)
		return lfd;
	char *id = NULL;
	struct store_turn *t = NULL;
	int r = current_read_locked(s, &id);
	if (r >= 0) {
		*ret_id = id;
		safe_close(lfd);
		return -EBUSY;
	}
	if (r == -ENOENT)
		r = turn_create(s, o, message, NULL, o->max_size_bytes, &t);
	if (r >= 0) {
		struct strbuf sb = STRBUF_INIT;
		r = strbuf_printf(&sb, "%s\n", t->id);
		if (r >= 0)
			r = store_write_file_atomic_at(s->session_fd, "current", sb.buf, sb.len);
		strbuf_free(&sb);
	}
	if (r >= 0 && !(*ret_id = strdup(t->id)))
		r = -ENOMEM;
	if (t)
		turn_free_fds(t);
	safe_close(lfd);
	return r;
}

int store_turn_begin_after_open(struct store *s, const struct store_options *o, const char *message,
				char **ret_id, char **ret_committed)
{
	*ret_committed = NULL;
	char *open_id = NULL;
	int r = store_turn_begin_explicit(s, o, message, &open_id);
	if (r != -EBUSY) {
		if (r >= 0)
			*ret_id = open_id;
		return r;
	}
	struct store_turn_info info;
	r = store_turn_info_get(s, open_id, &info);
	if (r < 0) {
		*ret_id = open_id;
		return r;
	}
	struct strbuf msg = STRBUF_INIT;
	r = info.running
		? -EBUSY /* a command still runs in it: not left behind */
		: strbuf_printf(&msg, "%s (interrupted)", info.message ? info.message : "");
	free(info.id);
	free(info.message);
	if (r == -EBUSY) {
		*ret_id = open_id;
		return r;
	}
	if (r >= 0)
		r = store_commit_id(s, open_id, msg.buf);
	strbuf_free(&msg);
	if (r < 0 && r != -EALREADY) {
		*ret_id = open_id;
		return r;
	}
	char *id = NULL;
	r = store_turn_begin_explicit(s, o, message, &id);
	if (r < 0) {
		free(id);
		free(open_id);
		return r == -EBUSY ? -EAGAIN : r;
	}
	*ret_id = id;
	*ret_committed = open_id;
	return 0;
}

const char *store_turn_id(const struct store_turn *t)
{
	return t->id;
}

void store_turn_stats(const struct store_turn *t, struct store_stats *ret)
{
	*ret = t ? t->stats : (struct store_stats){0};
}

/* ---- commit ---- */

/* The state a path was left in; 1: it cannot be seen (a directory on the way was made
 * unsearchable, or too deep), so no post-state is kept and undo does not ask about it. seen: what
 * a look a moment ago found of it, or NULL to look now. */
static int post_state(struct store_gone *gone, const char *path, const struct store_seen *seen,
		      struct store_record *post)
{
	struct stat st;
	*post = (struct store_record){.path = (char *)path};
	if (seen) {
		st = (struct stat){.st_mode = seen->mode,
				   .st_uid = seen->uid,
				   .st_gid = seen->gid,
				   .st_size = (off_t)seen->size,
				   .st_ino = seen->ino,
				   .st_dev = seen->dev,
				   .st_rdev = seen->rdev,
				   .st_nlink = seen->nlink,
				   .st_mtim = seen->mtime};
	} else {
		int r = store_gone_lstat(gone, path, &st);
		if (r < 0) {
			if (r == -EACCES || r == -ELOOP || r == -ENAMETOOLONG)
				return 1;
			if (r != -ENOENT && r != -ENOTDIR)
				return r;
			post->kind = STORE_KIND_ABSENT;
			return 0;
		}
	}
	store_record_from_stat(post, &st);
	post->ino = (uint64_t)st.st_ino;
	if (post->kind == STORE_KIND_SYMLINK)
		return store_readlink_at(AT_FDCWD, path, (size_t)st.st_size, &post->target);
	return 0;
}

void store_seen_set(struct store_seen *s, const struct stat *st)
{
	s->size = (uint64_t)st->st_size;
	s->ino = (uint64_t)st->st_ino;
	s->dev = (uint64_t)st->st_dev;
	s->rdev = (uint64_t)st->st_rdev;
	s->nlink = (uint64_t)st->st_nlink;
	s->mtime = st->st_mtim;
	s->mode = (uint32_t)st->st_mode;
	s->uid = (uint32_t)st->st_uid;
	s->gid = (uint32_t)st->st_gid;
}

void store_seens_free(struct store_seen *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i].path);
	free(v);
}

/* The post file, written in chunks to a temp file (a big turn is never all in memory), then
 * renamed. */
struct post_writer {
	int dirfd, fd;
	char *tmp;
	struct strbuf buf;
	struct store_gone *gone;
	const struct store_seen *seen; /* sorted by path; the paths come in that order too */
	size_t n_seen, at;
};

#define POST_CHUNK (64 * 1024)

static int post_writer_open(struct post_writer *w, int dirfd)
{
	*w = (struct post_writer){.dirfd = dirfd, .fd = -1, .buf = STRBUF_INIT};
	int r = store_gone_new(&w->gone);
	if (r >= 0)
		r = store_random_name(".tmp-", &w->tmp);
	if (r < 0)
		return r;
	w->fd = openat(dirfd, w->tmp, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600);
	return w->fd < 0 ? negative_errno() : 0;
}

static int post_writer_drain(struct post_writer *w)
{
	int r = loop_write(w->fd, w->buf.buf ? w->buf.buf : "", w->buf.len);
	strbuf_reset(&w->buf);
	return r;
}

/* What was seen of path, if it was: the paths come sorted, as the seen ones are. */
static const struct store_seen *post_writer_seen(struct post_writer *w, const char *path)
{
	while (w->at < w->n_seen && strcmp(w->seen[w->at].path, path) < 0)
		w->at++;
	return w->at < w->n_seen && strcmp(w->seen[w->at].path, path) == 0 ? &w->seen[w->at] : NULL;
}

static int post_writer_add(struct post_writer *w, const char *path)
{
	struct store_record post;
	int r = post_state(w->gone, path, post_writer_seen(w, path), &post);
	if (r == 0)
		r = store_record_format(&post, &w->buf);
	if (r > 0)
		r = 0; /* not visible: no post-state for it */
	free(post.target);
	if (r >= 0 && w->buf.len >= POST_CHUNK)
		r = post_writer_drain(w);
	return r;
}

/* Flush, fsync, rename over "post" and fsync the directory; on error the temp file goes. */
static int post_writer_finish(struct post_writer *w, int r)
{
	if (r >= 0)
		r = post_writer_drain(w);
	if (r >= 0 && fchmod(w->fd, 0600) < 0)
		r = negative_errno();
	if (r >= 0 && store_durable_enabled() && fsync(w->fd) < 0)
		r = negative_errno();
	safe_close(w->fd);
	if (r >= 0 && renameat(w->dirfd, w->tmp, w->dirfd, "post") < 0)
		r = negative_errno();
	if (r < 0 && w->tmp)
		(void)unlinkat(w->dirfd, w->tmp, 0);
	if (r >= 0)
		r = store_fsync_dirfd(w->dirfd);
	free(w->tmp);
	strbuf_free(&w->buf);
	store_gone_free(w->gone);
	return r;
}

/*
 * Commit: the post-state of every path of the turn, then the meta record. The paths come from the
 * manifest, or, for a turn only this process wrote (paths), from its path set: no manifest to
 * read and parse into memory at the end of a big turn.
 */
static int cmp_path(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int commit_dir(struct store *s, const char *id, const char *message,
		      const struct path_set *paths, const struct store_seen *seen, size_t n_seen)
{
	_cleanup_close_ int tfd = store_open_dir_at(s->turns_fd, id);
	if (tfd < 0)
		return tfd;
	if (RETRY_EINTR(flock(tfd, LOCK_EX)) < 0)
		return negative_errno();
	struct store_turn_info m;
	int r = store_meta_read(tfd, &m);
	if (r < 0)
		return r;
	struct store_record *pre = NULL;
	size_t n = 0;
	struct post_writer w = {.fd = -1};
	if (m.committed)
		r = -EALREADY;
	/* The records of kept files flushed (rebuilt first where a crash lost them), before the
	 * turn is called committed. */
	if (r >= 0)
		r = store_kept_settle(s, tfd, id, paths != NULL);
	if (r >= 0 && !paths)
		r = store_turn_records(s, id, &pre, &n);
	if (r >= 0)
		r = post_writer_open(&w, tfd);
	w.seen = seen;
	w.n_seen = n_seen;
	for (size_t i = 0; r >= 0 && i < n; i++)
		r = post_writer_add(&w, pre[i].path);
	/* the turn's paths in order: those of one directory come together, and are looked at from
	 * one open directory (store_gone_lstat()) */
	_cleanup_free_ const char **sorted = NULL;
	size_t n_sorted = 0;
	if (r >= 0 && paths && paths->n && !(sorted = malloc(paths->n * sizeof *sorted)))
		r = -ENOMEM;
	for (size_t i = 0; r >= 0 && sorted && i < paths->cap; i++)
		if (paths->slots[i] && n_sorted < paths->n)
			sorted[n_sorted++] = paths->slots[i];
	if (n_sorted)
		qsort(sorted, n_sorted, sizeof *sorted, cmp_path);
	for (size_t i = 0; r >= 0 && i < n_sorted; i++)
		r = post_writer_add(&w, sorted[i]);
	if (w.fd >= 0 || w.tmp || w.gone)
		r = post_writer_finish(&w, r);
	if (r >= 0) {
		if (message) {
			free(m.message);
			m.message = strdup(message);
		}
		m.committed = true;
		m.commit_ns = store_now_ns();
		r = m.message || !message ? meta_write(tfd, &m) : -ENOMEM;
	}
	store_records_free(pre, n);
	free(m.id);
	free(m.message);
	return r;
}

int store_turn_commit(struct store_turn *t, const char *message)
{
	return store_turn_commit_seen(t, message, NULL, 0);
}

int store_turn_commit_seen(struct store_turn *t, const char *message, const struct store_seen *seen,
			   size_t n_seen)
{
	if (!t)
		return -EINVAL;
	if (t->lazy) { /* nothing was recorded: no turn */
		store_turn_free(t);
		return 0;
	}
	int r = store_sync(t);
	/* the objects/ links of kept files, before their kept names go (no-op with a journal) */
	if (r >= 0)
		r = store_fsync_prefixes(t, t->kept_prefix);
	(void)flock(t->dir_fd, LOCK_UN);
	if (r >= 0)
		r = commit_dir(t->store, t->id, message,
			       t->exclusive && !t->seen_incomplete ? &t->seen : NULL, seen, n_seen);
	store_turn_free(t);
	return r;
}

int store_commit_id(struct store *s, const char *id, const char *message)
{
	int lfd = current_lock(s);
	if (lfd < 0)
		return lfd;
	_cleanup_free_ char *cur = NULL;
	int r = current_read_locked(s, &cur);
	if (r < 0 && !id) {
		safe_close(lfd);
		return r;
	}
	r = commit_dir(s, id ? id : cur, message, NULL, NULL, 0);
	if (r >= 0 && cur && (!id || strcmp(id, cur) == 0)) {
		if (unlinkat(s->session_fd, "current", 0) < 0 && errno != ENOENT)
			r = negative_errno();
		else
			r = store_fsync_dirfd(s->session_fd);
	}
	safe_close(lfd);
	return r;
}

void store_turn_free(struct store_turn *t)
{
	if (!t)
		return;
	(void)store_sync_pending(t, t->opts.sync);
	turn_free_fds(t);
}
