/* SPDX-License-Identifier: MIT */
/*
 * The backup store: sessions, the store's directories, small-file I/O, the path set, and reading
 * turns. Layout and locking: see store-internal.h; turns and commit: store-turn.c; pre-images:
 * store-preimage.c; content objects: store-object.c; gc: store-gc.c; record format:
 * store-manifest.c; restore and undo: store-restore.c.
 */
#include <dirent.h>
#include <errno.h>
#include <linux/openat2.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "basic/fs-util.h"
#include "basic/macro.h"
#include "basic/user-util.h"
#include "basic/strbuf.h"
#include "store-internal.h"
#include "store.h"

/* ---- options, directories, ids ---- */

uint64_t store_clamp_max_size_mb(int64_t mb, bool present)
{
	if (!present || mb <= 0)
		mb = STORE_MAX_SIZE_MB_DEFAULT;
	if (mb < STORE_MAX_SIZE_MB_MIN)
		mb = STORE_MAX_SIZE_MB_MIN;
	if (mb > STORE_MAX_SIZE_MB_MAX)
		mb = STORE_MAX_SIZE_MB_MAX;
	return (uint64_t)mb * 1024 * 1024;
}

/* mkdir with mode 0700 whatever the umask; an existing directory is fine. */
int store_mkdir_0700_at(int dirfd, const char *name)
{
	if (mkdirat(dirfd, name, 0700) < 0)
		return errno == EEXIST ? 0 : negative_errno();
	if (fchmodat(dirfd, name, 0700, 0) < 0)
		return negative_errno();
	return 1;
}

int store_mkdir_p_0700_at(int dirfd, const char *path)
{
	struct strbuf sb = STRBUF_INIT;
	int r = strbuf_appends(&sb, path);
	for (size_t i = 1; r >= 0 && i <= sb.len; i++) {
		if (sb.buf[i] != '/' && sb.buf[i] != '\0')
			continue;
		char c = sb.buf[i];
		sb.buf[i] = '\0';
		r = store_mkdir_0700_at(dirfd, sb.buf);
		sb.buf[i] = c;
	}
	strbuf_free(&sb);
	return r < 0 ? r : 0;
}

int store_state_dir(char **ret)
{
	struct strbuf sb = STRBUF_INIT;
	const char *x = getenv("XDG_STATE_HOME");
	int r;
	if (x && x[0] == '/') {
		r = strbuf_appends(&sb, x);
	} else {
		const char *home = user_home();
		if (!home)
			return -ENOENT;
		r = strbuf_printf(&sb, "%s/.local/state", home);
	}
	if (r >= 0)
		r = strbuf_appends(&sb, "/brokered");
	if (r >= 0)
		r = store_mkdir_p_0700_at(AT_FDCWD, sb.buf);
	if (r < 0) {
		strbuf_free(&sb);
		return r;
	}
	/* The real path: policies compare real paths (an XDG_STATE_HOME through a symlink). */
	char *real = realpath(sb.buf, NULL);
	if (real) {
		strbuf_free(&sb);
		*ret = real;
		return 0;
	}
	*ret = strbuf_steal(&sb);
	return *ret ? 0 : -ENOMEM;
}

bool store_id_valid(const char *id)
{
	if (!id || !*id || id[0] == '.' || strlen(id) > STORE_ID_MAX)
		return false;
	for (const char *p = id; *p; p++) {
		unsigned char c = (unsigned char)*p;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      strchr("._-:@+", c)))
			return false;
	}
	return true;
}

int64_t store_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int store_random_name(const char *prefix, char **ret)
{
	uint64_t rnd;
	if (getrandom(&rnd, sizeof rnd, 0) != sizeof rnd)
		return negative_errno();
	char *s;
	if (asprintf(&s, "%s%d-%016" PRIx64, prefix, (int)getpid(), rnd) < 0)
		return -ENOMEM;
	*ret = s;
	return 0;
}

int store_open_dir_at(int dirfd, const char *name)
{
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? negative_errno() : fd;
}

/* Off when the user chose speed over crash-safety (sandbox.fileBackup.sync = false). */
static bool store_durable = true;

void store_set_durable(bool durable)
{
	store_durable = durable;
}

bool store_durable_enabled(void)
{
	return store_durable;
}

int store_fsync_dirfd(int fd)
{
	if (!store_durable)
		return 0;
	return fsync(fd) < 0 ? negative_errno() : 0;
}

/* ---- small file I/O ---- */

int store_read_file_at(int dirfd, const char *name, size_t max, char **ret, size_t *ret_n)
{
	_cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	struct strbuf sb = STRBUF_INIT;
	int r = 0;
	for (;;) {
		if ((r = strbuf_reserve(&sb, 64 * 1024)) < 0)
			break;
		ssize_t k = RETRY_EINTR(read(fd, sb.buf + sb.len, sb.cap - sb.len - 1));
		if (k < 0) {
			r = negative_errno();
			break;
		}
		if (k == 0)
			break;
		sb.len += (size_t)k;
		sb.buf[sb.len] = '\0';
		if (sb.len > max) {
			r = -EFBIG;
			break;
		}
	}
	if (r < 0) {
		strbuf_free(&sb);
		return r;
	}
	*ret_n = sb.len;
	*ret = strbuf_steal(&sb);
	return *ret ? 0 : -ENOMEM;
}

/* Replace dirfd/name atomically with data: temp file, fsync, rename, fsync of the directory. */
int store_write_file_atomic_at(int dirfd, const char *name, const char *data, size_t n)
{
	_cleanup_free_ char *tmp = NULL;
	int r = store_random_name(".tmp-", &tmp);
	if (r < 0)
		return r;
	int fd = openat(dirfd, tmp, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return negative_errno();
	r = loop_write(fd, data, n);
	if (r >= 0 && fchmod(fd, 0600) < 0)
		r = negative_errno();
	if (r >= 0 && store_durable_enabled() && fsync(fd) < 0)
		r = negative_errno();
	safe_close(fd);
	if (r >= 0 && renameat(dirfd, tmp, dirfd, name) < 0)
		r = negative_errno();
	if (r < 0) {
		(void)unlinkat(dirfd, tmp, 0);
		return r;
	}
	return store_fsync_dirfd(dirfd);
}

/* ---- path set: the paths recorded by this turn object ---- */

static uint64_t fnv1a(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h;
}

static size_t set_find(const struct path_set *set, const char *p)
{
	size_t i = fnv1a(p) & (set->cap - 1);
	while (set->slots[i] && strcmp(set->slots[i], p) != 0)
		i = (i + 1) & (set->cap - 1);
	return i;
}

bool store_set_contains(const struct path_set *set, const char *p)
{
	return set->cap && set->slots[set_find(set, p)];
}

static int set_grow(struct path_set *set)
{
	struct path_set n = {calloc(set->cap ? set->cap * 2 : 64, sizeof(char *)),
			     set->cap ? set->cap * 2 : 64, 0};
	if (!n.slots)
		return -ENOMEM;
	for (size_t i = 0; i < set->cap; i++)
		if (set->slots[i]) {
			n.slots[set_find(&n, set->slots[i])] = set->slots[i];
			n.n++;
		}
	free(set->slots);
	*set = n;
	return 0;
}

int store_set_add_record(struct store_record *rec, void *set)
{
	int r = store_set_add(set, rec->path);
	return r < 0 ? r : 0;
}

int store_set_add(struct path_set *set, const char *p)
{
	if ((set->n + 1) * 2 > set->cap) {
		int r = set_grow(set);
		if (r < 0)
			return r;
	}
	size_t i = set_find(set, p);
	if (set->slots[i])
		return 0;
	if (!(set->slots[i] = strdup(p)))
		return -ENOMEM;
	set->n++;
	return 1;
}

/* Remove with backward-shift deletion, so linear probing needs no tombstones. */
void store_set_remove(struct path_set *set, const char *p)
{
	if (!set->cap)
		return;
	size_t i = set_find(set, p);
	if (!set->slots[i])
		return;
	free(set->slots[i]);
	set->slots[i] = NULL;
	set->n--;
	for (size_t j = (i + 1) & (set->cap - 1); set->slots[j]; j = (j + 1) & (set->cap - 1)) {
		char *e = set->slots[j];
		set->slots[j] = NULL;
		set->slots[set_find(set, e)] = e;
	}
}

void store_set_free(struct path_set *set)
{
	for (size_t i = 0; i < set->cap; i++)
		free(set->slots[i]);
	free(set->slots);
	*set = (struct path_set){0};
}

/* ---- lstat() of recorded paths, with a memory of their parents ---- */

struct store_gone {
	struct path_set gone;  /* directories found missing: nothing below them is there */
	struct path_set clean; /* directories reached without a symlink: the way to them is clean */
	/* the one opened last, whose paths are looked at from an fd of it (records mostly come a
	 * directory at a time) */
	char *dir;
	int dir_fd;
	struct strbuf scratch;
};

int store_gone_new(struct store_gone **ret)
{
	*ret = calloc(1, sizeof **ret);
	if (!*ret)
		return -ENOMEM;
	(*ret)->dir_fd = -1;
	return 0;
}

void store_gone_free(struct store_gone *g)
{
	if (!g)
		return;
	store_set_free(&g->gone);
	store_set_free(&g->clean);
	free(g->dir);
	safe_close(g->dir_fd);
	strbuf_free(&g->scratch);
	free(g);
}

/* Is a parent of path among the directories found missing? */
static bool gone_known(struct store_gone *g, const char *path)
{
	if (!g->gone.n)
		return false;
	strbuf_reset(&g->scratch);
	if (strbuf_append(&g->scratch, path, strlen(path)) < 0)
		return false;
	char *b = g->scratch.buf;
	for (char *slash = strrchr(b, '/'); slash && slash > b; slash = strrchr(b, '/')) {
		*slash = '\0';
		if (store_set_contains(&g->gone, b))
			return true;
	}
	return false;
}

/* The directory dir (g->scratch) is missing: remember the highest of its parents that is missing
 * too (or dir). */
static void gone_learn(struct store_gone *g, const char *dir)
{
	char *b = g->scratch.buf;
	size_t top = strlen(b);
	for (char *slash = strrchr(b, '/'); slash && slash > b; slash = strrchr(b, '/')) {
		*slash = '\0';
		struct stat st;
		if (fstatat(AT_FDCWD, b, &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT)
			break;
		top = (size_t)(slash - b);
	}
	memcpy(b, dir, top);
	b[top] = '\0';
	(void)store_set_add(&g->gone, b); /* out of memory: it is looked at again */
}

int store_gone_lstat(struct store_gone *g, const char *path, struct stat *st)
{
	if (gone_known(g, path))
		return -ENOENT;
	strbuf_reset(&g->scratch);
	if (strbuf_append(&g->scratch, path, strlen(path)) < 0)
		return -ENOMEM;
	char *slash = strrchr(g->scratch.buf, '/');
	if (!slash || slash == g->scratch.buf)
		return fstatat(AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW) == 0 ? 0 : negative_errno();
	*slash = '\0';
	const char *dir = g->scratch.buf;
	if (g->dir && strcmp(g->dir, dir) == 0)
		return fstatat(g->dir_fd, slash + 1, st, AT_SYMLINK_NOFOLLOW) == 0
			   ? 0
			   : negative_errno();
	/* a directory seen clean before, while another was open: by its path, no new fd */
	if (store_set_contains(&g->clean, dir))
		return fstatat(AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW) == 0 ? 0 : negative_errno();
	{
		struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
				       .resolve = RESOLVE_NO_SYMLINKS};
		int fd = (int)syscall(SYS_openat2, AT_FDCWD, dir, &how, sizeof how);
		if (fd < 0) {
			if (errno != ENOENT && errno != ELOOP && errno != ENOTDIR)
				return negative_errno();
			/* missing, or a symlink or a file in the way: nothing of ours below */
			_cleanup_free_ char *d = strdup(dir);
			if (d)
				gone_learn(g, d);
			return -ENOENT;
		}
		char *d = strdup(dir);
		if (!d) {
			safe_close(fd);
			return -ENOMEM;
		}
		free(g->dir);
		safe_close(g->dir_fd);
		g->dir = d;
		g->dir_fd = fd;
		(void)store_set_add(&g->clean, dir); /* out of memory: looked at again */
	}
	return fstatat(g->dir_fd, slash + 1, st, AT_SYMLINK_NOFOLLOW) == 0 ? 0 : negative_errno();
}

/* ---- open and close ---- */

void store_close(struct store *s)
{
	if (!s)
		return;
	safe_close(s->session_fd);
	safe_close(s->root_fd);
	safe_close(s->objects_fd);
	safe_close(s->tmp_fd);
	safe_close(s->turns_fd);
	safe_close(s->kept_fd);
	safe_close(s->lock_fd);
	free(s->session_id);
	free(s->session_dir);
	free(s);
}

static int open_subdir(int dirfd, const char *name, int *ret)
{
	int r = store_mkdir_0700_at(dirfd, name);
	if (r < 0)
		return r;
	*ret = store_open_dir_at(dirfd, name);
	return *ret < 0 ? *ret : 0;
}

static int store_open_dirs(struct store *s, const char *state_dir)
{
	_cleanup_close_ int state_fd = -1, sessions_fd = -1;
	int r = store_mkdir_p_0700_at(AT_FDCWD, state_dir);
	if (r < 0)
		return r;
	if ((state_fd = store_open_dir_at(AT_FDCWD, state_dir)) < 0)
		return state_fd;
	if ((r = open_subdir(state_fd, "sessions", &sessions_fd)) < 0 ||
	    (r = open_subdir(sessions_fd, s->session_id, &s->session_fd)) < 0 ||
	    (r = open_subdir(s->session_fd, "modify_backup", &s->root_fd)) < 0 ||
	    (r = open_subdir(s->root_fd, "objects", &s->objects_fd)) < 0 ||
	    (r = open_subdir(s->root_fd, "tmp", &s->tmp_fd)) < 0 ||
	    (r = open_subdir(s->root_fd, "turns", &s->turns_fd)) < 0 ||
	    (r = open_subdir(s->root_fd, "kept", &s->kept_fd)) < 0)
		return r;
	struct stat st;
	if (fstat(s->objects_fd, &st) < 0)
		return negative_errno();
	s->dev = st.st_dev;
	store_detect_ordering(s, s->objects_fd);
	s->lock_fd = openat(s->session_fd, "lock", O_CREAT | O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (s->lock_fd < 0)
		return negative_errno();
	/* Shared while open; gc takes it exclusively, so no object vanishes under a writer. */
	if (RETRY_EINTR(flock(s->lock_fd, LOCK_SH)) < 0)
		return negative_errno();
	/* Best effort: what is not settled now is settled by a later open or the turn's commit. */
	(void)store_kept_recover_all(s);
	return 0;
}

int store_open(const char *state_dir, const char *session_id, struct store **ret)
{
	if (!store_id_valid(session_id))
		return -EINVAL;
	_cleanup_free_ char *sd = NULL;
	int r;
	if (!state_dir) {
		if ((r = store_state_dir(&sd)) < 0)
			return r;
		state_dir = sd;
	}
	if (state_dir[0] != '/')
		return -EINVAL;
	struct store *s = calloc(1, sizeof *s);
	if (!s)
		return -ENOMEM;
	s->session_fd = s->root_fd = s->objects_fd = s->tmp_fd = s->turns_fd = s->kept_fd =
	    s->lock_fd = -1;
	s->session_id = strdup(session_id);
	if (asprintf(&s->session_dir, "%s/sessions/%s", state_dir, session_id) < 0)
		s->session_dir = NULL;
	r = s->session_id && s->session_dir ? store_open_dirs(s, state_dir) : -ENOMEM;
	if (r < 0) {
		store_close(s);
		return r;
	}
	*ret = s;
	return 0;
}

const char *store_session_dir(const struct store *s)
{
	return s->session_dir;
}

/* ---- reading turns ---- */

struct indexed {
	size_t idx;
	struct store_record *r;
};

static int cmp_indexed(const void *a, const void *b)
{
	const struct indexed *x = a, *y = b;
	int c = strcmp(x->r->path, y->r->path);
	return c ? c : (x->idx < y->idx ? -1 : x->idx > y->idx);
}

/*
 * Sort by path, keeping the earliest record per path (file order), in place: a 20k-path turn's
 * records are megabytes, and the broker reads them when a run ends (git guard). An index is
 * sorted, v is permuted along its cycles, then duplicates are dropped.
 */
static int records_dedup(struct store_record *v, size_t n, struct store_record **ret, size_t *ret_n)
{
	struct indexed *ix = calloc(n ? n : 1, sizeof *ix);
	if (!ix) {
		store_records_free(v, n);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		v[i].seq = i;
		ix[i] = (struct indexed){i, &v[i]};
	}
	qsort(ix, n, sizeof *ix, cmp_indexed);
	for (size_t i = 0; i < n; i++) { /* v[j] = old v[ix[j].idx], cycle by cycle */
		if (ix[i].idx == SIZE_MAX || ix[i].idx == i)
			continue;
		struct store_record tmp = v[i];
		size_t j = i;
		while (ix[j].idx != i) {
			size_t src = ix[j].idx;
			v[j] = v[src];
			ix[j].idx = SIZE_MAX;
			j = src;
		}
		v[j] = tmp;
		ix[j].idx = SIZE_MAX;
	}
	free(ix);
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (k > 0 && strcmp(v[k - 1].path, v[i].path) == 0)
			store_record_done(&v[i]);
		else
			v[k++] = v[i];
	}
	*ret = n ? v : (free(v), calloc(1, sizeof *v));
	*ret_n = k;
	return *ret ? 0 : -ENOMEM;
}

int store_manifest_foreach_at(int dirfd, const char *name, store_record_fn fn, void *userdata)
{
	_cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	return store_manifest_foreach_fd(fd, STORE_MANIFEST_MAX, fn, userdata, NULL);
}

int store_manifest_foreach_turn(int turn_fd, store_record_fn fn, void *userdata)
{
	struct store_tree_filter f = {.turn_fd = turn_fd, .fn = fn, .userdata = userdata};
	int r = store_manifest_foreach_at(turn_fd, "manifest", store_tree_filter, &f);
	free(f.last);
	return r;
}

/* A turn's file of records (manifest or post) through fn; a missing one has no records. */
static int turn_foreach(struct store *s, const char *id, const char *file, store_record_fn fn,
			void *userdata)
{
	if (!store_id_valid(id))
		return -EINVAL;
	_cleanup_close_ int tfd = store_open_dir_at(s->turns_fd, id);
	if (tfd < 0)
		return tfd;
	int r = strcmp(file, "manifest") == 0 ? store_manifest_foreach_turn(tfd, fn, userdata)
					      : store_manifest_foreach_at(tfd, file, fn, userdata);
	return r == -ENOENT ? 0 : r;
}

/* The records of a turn's file (streamed: only the records kept are in memory), earliest per
 * path, sorted by path. */
static int turn_read_records(struct store *s, const char *id, const char *file,
			     bool (*keep)(const char *path, void *userdata), void *userdata,
			     struct store_record **ret, size_t *ret_n)
{
	struct store_records_collector c = {.keep = keep, .userdata = userdata};
	int r = turn_foreach(s, id, file, store_records_collect, &c);
	if (r < 0) {
		store_records_free(c.v, c.n);
		return r;
	}
	return records_dedup(c.v, c.n, ret, ret_n);
}

int store_turn_records(struct store *s, const char *id, struct store_record **ret, size_t *ret_n)
{
	return turn_read_records(s, id, "manifest", NULL, NULL, ret, ret_n);
}

int store_turn_records_filter(struct store *s, const char *id,
			      bool (*keep)(const char *path, void *userdata), void *userdata,
			      struct store_record **ret, size_t *ret_n)
{
	return turn_read_records(s, id, "manifest", keep, userdata, ret, ret_n);
}

int store_turn_records_foreach(struct store *s, const char *id, store_record_fn fn, void *userdata)
{
	return turn_foreach(s, id, "manifest", fn, userdata);
}

int store_turn_post(struct store *s, const char *id, struct store_record **ret, size_t *ret_n)
{
	return turn_read_records(s, id, "post", NULL, NULL, ret, ret_n);
}

int store_turn_info_get(struct store *s, const char *id, struct store_turn_info *ret)
{
	if (!store_id_valid(id))
		return -EINVAL;
	_cleanup_close_ int tfd = store_open_dir_at(s->turns_fd, id);
	if (tfd < 0)
		return tfd;
	struct store_turn_info m;
	int r = store_meta_read(tfd, &m);
	if (r < 0)
		return r;
	if (!m.committed) {
		m.running = flock(tfd, LOCK_EX | LOCK_NB) < 0;
		(void)flock(tfd, LOCK_UN);
	}
	struct store_record *v;
	size_t n;
	if (store_turn_records(s, id, &v, &n) >= 0) {
		m.n_paths = n;
		store_records_free(v, n);
	}
	_cleanup_free_ char *cur = NULL;
	m.current = store_current_turn(s, &cur) >= 0 && strcmp(cur, id) == 0;
	*ret = m;
	return 0;
}

static int cmp_info_newest(const void *a, const void *b)
{
	const struct store_turn_info *x = a, *y = b;
	if (x->begin_ns != y->begin_ns)
		return x->begin_ns < y->begin_ns ? 1 : -1;
	return -strcmp(x->id, y->id);
}

int store_list_turns(struct store *s, struct store_turn_info **ret, size_t *ret_n)
{
	int fd = dup(s->turns_fd);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		safe_close(fd);
		return -ENOMEM;
	}
	rewinddir(d);
	struct store_turn_info *v = NULL;
	size_t n = 0, cap = 0;
	int r = 0;
	for (struct dirent *de; (de = readdir(d));) {
		if (!store_id_valid(de->d_name))
			continue;
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			struct store_turn_info *nv = reallocarray(v, ncap, sizeof *v);
			if (!nv) {
				r = -ENOMEM;
				break;
			}
			v = nv;
			cap = ncap;
		}
		if (store_turn_info_get(s, de->d_name, &v[n]) >= 0)
			n++;
	}
	closedir(d);
	if (r < 0) {
		store_turn_infos_free(v, n);
		return r;
	}
	if (n)
		qsort(v, n, sizeof *v, cmp_info_newest);
	else
		free(v);
	*ret = n ? v : NULL;
	*ret_n = n;
	return 0;
}

int store_resolve_turn(struct store *s, const char *arg, char **ret_id)
{
	if (strcmp(arg, "last") != 0) {
		if (!store_id_valid(arg))
			return -EINVAL;
		struct stat st;
		if (fstatat(s->turns_fd, arg, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return negative_errno();
		return (*ret_id = strdup(arg)) ? 0 : -ENOMEM;
	}
	struct store_turn_info *v;
	size_t n;
	int r = store_list_turns(s, &v, &n);
	if (r < 0)
		return r;
	if (n == 0)
		return -ENOENT;
	*ret_id = TAKE_PTR(v[0].id);
	store_turn_infos_free(v, n);
	return 0;
}
