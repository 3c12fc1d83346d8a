/* SPDX-License-Identifier: MIT */
/*
 * The backup store: sessions, turns, pre-images and content objects. Layout and locking: see
 * store-internal.h; record format: store-manifest.c; restore and undo: store-restore.c.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <dlfcn.h>
#include <openssl/evp.h>

#include "basic/escape.h"
#include "basic/macro.h"
#include "basic/stat-util.h"
#include "basic/user-util.h"
#include "basic/parse-util.h"
#include "basic/path-util.h"
#include "basic/strbuf.h"
#include "store-internal.h"
#include "store.h"

#define ID_MAX	       128
#define META_MAX       (64 * 1024)
#define MANIFEST_MAX   ((size_t)1 << 30)
#define TREE_DEPTH_MAX 2048
#define COPY_CHUNK     ((size_t)1 << 30)
#define IO_BUF	       (128 * 1024)

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
static int mkdir_0700_at(int dirfd, const char *name)
{
	if (mkdirat(dirfd, name, 0700) < 0)
		return errno == EEXIST ? 0 : negative_errno();
	if (fchmodat(dirfd, name, 0700, 0) < 0)
		return negative_errno();
	return 1;
}

static int mkdir_p_0700(const char *path)
{
	struct strbuf sb = STRBUF_INIT;
	int r = strbuf_appends(&sb, path);
	for (size_t i = 1; r >= 0 && i <= sb.len; i++) {
		if (sb.buf[i] != '/' && sb.buf[i] != '\0')
			continue;
		char c = sb.buf[i];
		sb.buf[i] = '\0';
		r = mkdir_0700_at(AT_FDCWD, sb.buf);
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
		r = mkdir_p_0700(sb.buf);
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
	if (!id || !*id || id[0] == '.' || strlen(id) > ID_MAX)
		return false;
	for (const char *p = id; *p; p++) {
		unsigned char c = (unsigned char)*p;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      strchr("._-:@+", c)))
			return false;
	}
	return true;
}

static int64_t now_ns(void)
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

static int dirfd_of(DIR *d)
{
	return dirfd(d);
}

static int open_dir_at(int dirfd, const char *name)
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

static int write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;
	while (n > 0) {
		ssize_t k = RETRY_EINTR(write(fd, p, n));
		if (k < 0)
			return negative_errno();
		if (k == 0)
			return -EIO;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* Replace dirfd/name atomically with data: temp file, fsync, rename, fsync of the directory. */
static int write_file_atomic_at(int dirfd, const char *name, const char *data, size_t n)
{
	_cleanup_free_ char *tmp = NULL;
	int r = store_random_name(".tmp-", &tmp);
	if (r < 0)
		return r;
	int fd = openat(dirfd, tmp, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return negative_errno();
	r = write_all(fd, data, n);
	if (r >= 0 && fchmod(fd, 0600) < 0)
		r = negative_errno();
	if (r >= 0 && store_durable && fsync(fd) < 0)
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

/* ---- hashing and copying ---- */

static void hex_encode(const unsigned char *d, size_t n, char *out)
{
	static const char hex[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hex[d[i] >> 4];
		out[2 * i + 1] = hex[d[i] & 15];
	}
	out[2 * n] = '\0';
}

/*
 * SHA-256 of fd from offset 0. With a size (from fstat), a short read that reaches it ends the
 * loop without one more read to see the end of the file.
 */
/*
 * libcrypto is loaded when the first content hash is needed, not when brokered starts: mapping and
 * relocating it costs ~4 ms per exec, and most runs of a read-only command, or one that only
 * creates files, hash nothing. Its functions are typed from the headers.
 */
static struct {
	typeof(EVP_MD_fetch) *md_fetch;
	typeof(EVP_MD_CTX_new) *ctx_new;
	typeof(EVP_DigestInit_ex) *init;
	typeof(EVP_DigestUpdate) *update;
	typeof(EVP_DigestFinal_ex) *final;
} crypto;

static int crypto_load(void)
{
	static int loaded; /* 0 not yet, 1 done, -errno failed */
	if (loaded)
		return loaded < 0 ? loaded : 0;
	loaded = -ELIBACC;
	void *h = dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	if (!h)
		return loaded;
	if (!(crypto.md_fetch = (typeof(crypto.md_fetch))dlsym(h, "EVP_MD_fetch")) ||
	    !(crypto.ctx_new = (typeof(crypto.ctx_new))dlsym(h, "EVP_MD_CTX_new")) ||
	    !(crypto.init = (typeof(crypto.init))dlsym(h, "EVP_DigestInit_ex")) ||
	    !(crypto.update = (typeof(crypto.update))dlsym(h, "EVP_DigestUpdate")) ||
	    !(crypto.final = (typeof(crypto.final))dlsym(h, "EVP_DigestFinal_ex")))
		return loaded;
	loaded = 1;
	return 0;
}

static int store_hash_fd_sized(int fd, uint64_t size, char ret_hex[65])
{
	static EVP_MD *sha256;
	static EVP_MD_CTX *ctx;
	int r = crypto_load();
	if (r < 0)
		return r;
	if (!sha256 && !(sha256 = crypto.md_fetch(NULL, "SHA256", NULL)))
		return -EIO;
	if (!ctx && !(ctx = crypto.ctx_new()))
		return -ENOMEM;
	_cleanup_free_ unsigned char *buf = malloc(IO_BUF);
	if (!buf)
		return -ENOMEM;
	if (crypto.init(ctx, sha256, NULL) != 1)
		r = -EIO;
	for (off_t off = 0; r >= 0;) {
		ssize_t k = RETRY_EINTR(pread(fd, buf, IO_BUF, off));
		if (k < 0)
			r = negative_errno();
		else if (k == 0)
			break;
		else if (crypto.update(ctx, buf, (size_t)k) != 1)
			r = -EIO;
		off += k;
		if (k > 0 && k < IO_BUF && size != UINT64_MAX && (uint64_t)off == size)
			break;
	}
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned len = 0;
	if (r >= 0 && (crypto.final(ctx, md, &len) != 1 || len != 32))
		r = -EIO;
	if (r >= 0)
		hex_encode(md, 32, ret_hex);
	return r;
}

int store_hash_fd(int fd, char ret_hex[65])
{
	return store_hash_fd_sized(fd, UINT64_MAX, ret_hex);
}

static int copy_read_write(int src, int dst)
{
	_cleanup_free_ char *buf = malloc(IO_BUF);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t k = RETRY_EINTR(read(src, buf, IO_BUF));
		if (k < 0)
			return negative_errno();
		if (k == 0)
			return 0;
		int r = write_all(dst, buf, (size_t)k);
		if (r < 0)
			return r;
	}
}

/* Copy all of src (from offset 0) to the empty dst: reflink, else copy_file_range, else read. */
int store_copy_fd(int src, int dst)
{
	if (ioctl(dst, FICLONE, src) == 0)
		return 0;
	if (lseek(src, 0, SEEK_SET) < 0 || ftruncate(dst, 0) < 0 || lseek(dst, 0, SEEK_SET) < 0)
		return negative_errno();
	bool any = false;
	for (;;) {
		ssize_t k = copy_file_range(src, NULL, dst, NULL, COPY_CHUNK, 0);
		if (k > 0) {
			any = true;
			continue;
		}
		if (k == 0)
			return 0;
		if (errno == EINTR)
			continue;
		if (!any && (errno == EXDEV || errno == EINVAL || errno == ENOSYS ||
			     errno == EOPNOTSUPP || errno == EPERM))
			return copy_read_write(src, dst);
		return negative_errno();
	}
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

static bool set_contains(const struct path_set *set, const char *p)
{
	return set->cap && set->slots[set_find(set, p)];
}

static int set_add(struct path_set *set, const char *p);

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

static int set_add(struct path_set *set, const char *p)
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
static void set_remove(struct path_set *set, const char *p)
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

static void set_free(struct path_set *set)
{
	for (size_t i = 0; i < set->cap; i++)
		free(set->slots[i]);
	free(set->slots);
	*set = (struct path_set){0};
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
	safe_close(s->lock_fd);
	free(s->session_id);
	free(s->session_dir);
	free(s);
}

static int open_subdir(int dirfd, const char *name, int *ret)
{
	int r = mkdir_0700_at(dirfd, name);
	if (r < 0)
		return r;
	*ret = open_dir_at(dirfd, name);
	return *ret < 0 ? *ret : 0;
}

static int store_open_dirs(struct store *s, const char *state_dir)
{
	_cleanup_close_ int state_fd = -1, sessions_fd = -1;
	int r = mkdir_p_0700(state_dir);
	if (r < 0)
		return r;
	if ((state_fd = open_dir_at(AT_FDCWD, state_dir)) < 0)
		return state_fd;
	if ((r = open_subdir(state_fd, "sessions", &sessions_fd)) < 0 ||
	    (r = open_subdir(sessions_fd, s->session_id, &s->session_fd)) < 0 ||
	    (r = open_subdir(s->session_fd, "modify_backup", &s->root_fd)) < 0 ||
	    (r = open_subdir(s->root_fd, "objects", &s->objects_fd)) < 0 ||
	    (r = open_subdir(s->root_fd, "tmp", &s->tmp_fd)) < 0 ||
	    (r = open_subdir(s->root_fd, "turns", &s->turns_fd)) < 0)
		return r;
	struct stat st;
	if (fstat(s->objects_fd, &st) < 0)
		return negative_errno();
	s->dev = st.st_dev;
	struct statfs sf;
	s->ordered_metadata =
	    fstatfs(s->objects_fd, &sf) == 0 &&
	    (sf.f_type == 0xEF53 /* ext2/3/4 */ || sf.f_type == 0x58465342 /* XFS */);
	if (getenv("BROKERED_STORE_FSYNC_DIRS"))
		s->ordered_metadata = false;
	s->lock_fd = openat(s->session_fd, "lock", O_CREAT | O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (s->lock_fd < 0)
		return negative_errno();
	/* Shared while open; gc takes it exclusively, so no object vanishes under a writer. */
	if (RETRY_EINTR(flock(s->lock_fd, LOCK_SH)) < 0)
		return negative_errno();
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
	s->session_fd = s->root_fd = s->objects_fd = s->tmp_fd = s->turns_fd = s->lock_fd = -1;
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

static int meta_read(int turn_fd, struct store_turn_info *ret)
{
	_cleanup_free_ char *buf = NULL;
	size_t n;
	int r = store_read_file_at(turn_fd, "meta", META_MAX, &buf, &n);
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
		r = write_file_atomic_at(turn_fd, "meta", sb.buf, sb.len);
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
		r = write_all(fd, sb.buf, sb.len);
	safe_close(fd);
	strbuf_free(&sb);
	return r;
}

static void turn_free_fds(struct store_turn *t)
{
	safe_close(t->dir_fd);
	safe_close(t->manifest_fd);
	set_free(&t->seen);
	free(t->id);
	free(t->call);
	free(t->pending);
	free(t->lazy_message);
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
	t->dir_fd = t->manifest_fd = -1;
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
	if (r >= 0 && (t->dir_fd = open_dir_at(s->turns_fd, id)) < 0)
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
				    .begin_ns = begin_ns ? begin_ns : now_ns(),
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
	t->lazy_begin_ns = now_ns();
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
static int turn_materialize(struct store_turn *t)
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
	int r = store_read_file_at(s->session_fd, "current", ID_MAX + 2, &buf, &n);
	if (r < 0)
		return r == -ENOENT ? -ENOENT : r;
	if (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	struct store_turn_info m = {0};
	_cleanup_close_ int tfd = store_id_valid(buf) ? open_dir_at(s->turns_fd, buf) : -ENOENT;
	if (tfd >= 0)
		r = meta_read(tfd, &m);
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
	_cleanup_free_ char *buf = NULL;
	size_t n, nrec;
	struct store_record *recs;
	int r = store_read_file_at(t->dir_fd, "manifest", MANIFEST_MAX, &buf, &n);
	if (r < 0)
		return r;
	if ((r = store_manifest_parse(buf, n, &recs, &nrec, NULL)) < 0)
		return r;
	for (size_t i = 0; r >= 0 && i < nrec; i++)
		r = set_add(&t->seen, recs[i].path);
	store_records_free(recs, nrec);
	return r < 0 ? r : 0;
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
		_cleanup_close_ int tfd = open_dir_at(s->turns_fd, id);
		if (tfd >= 0 && meta_read(tfd, &m) >= 0 && m.max_size_bytes)
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
			r = write_file_atomic_at(s->session_fd, "current", sb.buf, sb.len);
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

/* ---- manifest appends ---- */

/*
 * One record, one write(2) with O_APPEND: the kernel appends each write whole, so concurrent
 * writers never interleave and need no lock. Every record starts with '\n': a tail torn by a crash
 * or by a failed (short) write is then a line of its own, which readers skip (its checksum does not
 * match), and it cannot swallow this record. Empty lines are skipped by readers too.
 */
static int manifest_append(struct store_turn *t, const char *line, size_t n)
{
	struct iovec iov[2] = {{(void *)"\n", 1}, {(void *)line, n}};
	ssize_t k = RETRY_EINTR(writev(t->manifest_fd, iov, 2));
	if (k < 0)
		return negative_errno();
	return k == (ssize_t)(n + 1) ? 0 : -ENOSPC;
}

static int record_append(struct store_turn *t, const struct store_record *rec)
{
	struct strbuf sb = STRBUF_INIT;
	int r = store_record_format(rec, &sb);
	if (r >= 0)
		r = manifest_append(t, sb.buf, sb.len);
	strbuf_free(&sb);
	if (r >= 0 && rec->kind != STORE_KIND_ABSENT)
		t->dirty_manifest = true;
	return r;
}

/* ---- objects ---- */

static unsigned hex_nibble(char c)
{
	return c >= 'a' ? (unsigned)(c - 'a' + 10) : (unsigned)(c - '0');
}

/*
 * objects/<xx>/ for hash exists (made once, then remembered: nothing removes these directories) and
 * is marked for the next store_sync()'s fsync. Objects are then named "<xx>/<rest>" relative to
 * objects_fd, with no directory fd to open per object.
 */
static int object_prefix_ensure(struct store_turn *t, const char *hash)
{
	struct store *s = t->store;
	unsigned idx = hex_nibble(hash[0]) << 4 | hex_nibble(hash[1]);
	t->dirty_prefix[idx / 8] |= (uint8_t)(1u << (idx % 8));
	if (s->known_prefix[idx / 8] & (1u << (idx % 8)))
		return 0;
	char prefix[3] = {hash[0], hash[1], '\0'};
	int r = mkdir_0700_at(s->objects_fd, prefix);
	if (r < 0)
		return r;
	if (r > 0)
		t->dirty_objects = true;
	s->known_prefix[idx / 8] |= (uint8_t)(1u << (idx % 8));
	return 0;
}

/* A remembered prefix directory that is gone after all (removed by hand): make it again. */
static int object_prefix_forget(struct store_turn *t, const char *hash)
{
	unsigned idx = hex_nibble(hash[0]) << 4 | hex_nibble(hash[1]);
	t->store->known_prefix[idx / 8] &= (uint8_t) ~(1u << (idx % 8));
	return object_prefix_ensure(t, hash);
}

/* "<xx>/<62 hex>", the object's name relative to objects_fd. */
static void object_name(const char *hash, char ret[66])
{
	ret[0] = hash[0];
	ret[1] = hash[1];
	ret[2] = '/';
	memcpy(ret + 3, hash + 2, 63);
}

/* Does the object exist with this size? A zero-length leftover of a crash does not count. */
static bool object_present(struct store *s, const char *obj, uint64_t size)
{
	struct stat st;
	return fstatat(s->objects_fd, obj, &st, AT_SYMLINK_NOFOLLOW) >= 0 && S_ISREG(st.st_mode) &&
	       (uint64_t)st.st_size == size;
}

/*
 * Put tmp/<tmp_name> under its hash; if the object already exists the temp file is dropped.
 * Returns 1 if a new object was stored.
 */
static int object_commit(struct store_turn *t, const char *tmp_name, const char *hash,
			 uint64_t size)
{
	char obj[66];
	object_name(hash, obj);
	int r = object_prefix_ensure(t, hash);
	if (r < 0)
		return r;
	if (object_present(t->store, obj, size)) {
		(void)unlinkat(t->store->tmp_fd, tmp_name, 0);
		return 0;
	}
	r = renameat(t->store->tmp_fd, tmp_name, t->store->objects_fd, obj);
	if (r < 0 && errno == ENOENT && object_prefix_forget(t, hash) >= 0)
		r = renameat(t->store->tmp_fd, tmp_name, t->store->objects_fd, obj);
	return r < 0 ? negative_errno() : 1;
}

int store_object_open(struct store *s, const char *hash)
{
	if (strlen(hash) != 64 || strchr(hash, '/'))
		return -EINVAL;
	char prefix[3] = {hash[0], hash[1], '\0'};
	_cleanup_close_ int pfd = open_dir_at(s->objects_fd, prefix);
	if (pfd < 0)
		return pfd;
	int fd = openat(pfd, hash + 2, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? negative_errno() : fd;
}

/* ---- pre-images ---- */

void store_record_from_stat(struct store_record *r, const struct stat *st)
{
	r->kind = S_ISREG(st->st_mode)	 ? STORE_KIND_FILE
		  : S_ISDIR(st->st_mode) ? STORE_KIND_DIR
		  : S_ISLNK(st->st_mode) ? STORE_KIND_SYMLINK
					 : STORE_KIND_OTHER;
	r->size = (uint64_t)st->st_size;
	r->mode = (uint32_t)st->st_mode;
	r->uid = (uint32_t)st->st_uid;
	r->gid = (uint32_t)st->st_gid;
	r->mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
	r->nlink = S_ISREG(st->st_mode) ? (uint64_t)st->st_nlink : 0;
	if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode))
		r->rdev = (uint64_t)st->st_rdev;
}

static int readlink_at(int dirfd, const char *name, size_t hint, char **ret)
{
	for (size_t sz = MAX(hint + 1, (size_t)64);; sz *= 2) {
		char *buf = malloc(sz);
		if (!buf)
			return -ENOMEM;
		ssize_t k = readlinkat(dirfd, name, buf, sz);
		if (k < 0) {
			free(buf);
			return negative_errno();
		}
		if ((size_t)k < sz) {
			buf[k] = '\0';
			*ret = buf;
			return 0;
		}
		free(buf);
		if (sz > 1 << 20)
			return -ENAMETOOLONG;
	}
}

/*
 * The name is about to be replaced by a rename (or removed) and is the file's only link: keep the
 * file itself, by a hard link in the store (no copy, no data to flush). The link is made from our
 * open fd of the file (the inode that was checked and hashed, whatever happens to the name)
 * straight to the object's name. Once the caller's rename or unlink lands, the store's link is the
 * only one. -EAGAIN before anything was changed: the caller falls back to a copy.
 */
/*
 * Does some process hold the file open for writing (or mapped shared and writable)? A file kept by
 * a hard link would go on changing in the store through that fd. A read lease can be taken only on
 * a file that nobody has open for writing: try one and drop it at once. Anything but success
 * (not the owner, no leases here) counts as "maybe". A lease break meanwhile would send SIGIO,
 * whose default action kills: it is blocked around the attempt and discarded.
 */
static bool maybe_open_for_writing(int fd)
{
	sigset_t io, old;
	sigemptyset(&io);
	sigaddset(&io, SIGIO);
	if (sigprocmask(SIG_BLOCK, &io, &old) < 0)
		return true;
	int r = fcntl(fd, F_SETLEASE, F_RDLCK);
	if (r >= 0) {
		(void)fcntl(fd, F_SETLEASE, F_UNLCK);
		struct timespec zero = {0};
		(void)sigtimedwait(&io, NULL, &zero); /* brokered has no use for SIGIO */
	}
	(void)sigprocmask(SIG_SETMASK, &old, NULL);
	return r < 0;
}

static int file_link_in(struct store_turn *t, int dirfd, const char *name, const struct stat *st,
			struct store_record *rec)
{
	struct store *s = t->store;
	struct stat st2;
	_cleanup_close_ int fd =
	    openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st2) < 0)
		return negative_errno();
	if (!stat_inode_same(st, &st2) || !S_ISREG(st2.st_mode) || st2.st_nlink != 1)
		return -EAGAIN; /* another name or a swap: fall back to a copy */
	if (maybe_open_for_writing(fd))
		return -EAGAIN; /* it would change on in the store: copy it now */
	int r = store_hash_fd_sized(fd, (uint64_t)st2.st_size, rec->hash);
	if (r < 0)
		return r;
	rec->size = (uint64_t)st2.st_size;
	char obj[66], self[64];
	object_name(rec->hash, obj);
	snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
	if ((r = object_prefix_ensure(t, rec->hash)) < 0)
		return r;
	bool created = false;
	r = linkat(AT_FDCWD, self, s->objects_fd, obj, AT_SYMLINK_FOLLOW);
	if (r < 0 && errno == ENOENT && object_prefix_forget(t, rec->hash) >= 0)
		r = linkat(AT_FDCWD, self, s->objects_fd, obj, AT_SYMLINK_FOLLOW);
	if (r >= 0) {
		created = true;
		/* A name added meanwhile would share the stored inode: take a copy instead. */
		if (fstat(fd, &st2) < 0 || st2.st_nlink != 2) {
			(void)unlinkat(s->objects_fd, obj, 0);
			return -EAGAIN;
		}
	} else if (errno == EEXIST) {
		if (!object_present(s, obj, rec->size))
			return -EAGAIN; /* a leftover under that name: the copy path replaces it */
	} else {
		return negative_errno(); /* EXDEV, EPERM, EMLINK: the caller copies */
	}
	rec->moved = true;
	r = record_append(t, rec);
	if (r < 0 && created)
		(void)unlinkat(s->objects_fd, obj, 0);
	if (r >= 0 && created)
		t->stats.bytes_stored += rec->size;
	return r;
}

static int pending_push(struct store_turn *t, int fd, char *tmp, const struct store_record *rec)
{
	if (t->n_pending == t->cap_pending) {
		size_t ncap = t->cap_pending ? t->cap_pending * 2 : 16;
		struct pending *n = reallocarray(t->pending, ncap, sizeof *n);
		if (!n)
			return -ENOMEM;
		t->pending = n;
		t->cap_pending = ncap;
	}
	struct strbuf sb = STRBUF_INIT;
	int r = store_record_format(rec, &sb);
	struct pending p = {fd, tmp, {0}, strbuf_steal(&sb), strdup(rec->path)};
	if (r < 0 || !p.line || !p.path) {
		free(p.line);
		free(p.path);
		return r < 0 ? r : -ENOMEM;
	}
	memcpy(p.hash, rec->hash, 65);
	t->pending[t->n_pending++] = p;
	return 0;
}

static void pending_drop(struct store_turn *t, struct pending *p, bool forget)
{
	safe_close(p->fd);
	(void)unlinkat(t->store->tmp_fd, p->tmp_name, 0);
	if (forget)
		set_remove(&t->seen, p->path);
	free(p->tmp_name);
	free(p->line);
	free(p->path);
	*p = (struct pending){.fd = -1};
}

/* Copy the file into a temp file of the store and hash the copy (the copy cannot change). */
static int file_copy_in(struct store_turn *t, int dirfd, const char *name, const struct stat *st,
			struct store_record *rec)
{
	struct store *s = t->store;
	_cleanup_close_ int src =
	    openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	struct stat st2;
	if (src < 0 || fstat(src, &st2) < 0)
		return negative_errno();
	if (!stat_inode_same(st, &st2) || !S_ISREG(st2.st_mode))
		return -EAGAIN;
	char *tmp = NULL;
	int r = store_random_name("cp-", &tmp);
	if (r < 0)
		return r;
	int fd = openat(s->tmp_fd, tmp, O_CREAT | O_EXCL | O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		free(tmp);
		return negative_errno();
	}
	struct stat tst;
	r = store_copy_fd(src, fd);
	if (r >= 0)
		r = store_hash_fd(fd, rec->hash);
	if (r >= 0 && fstat(fd, &tst) < 0)
		r = negative_errno();
	if (r >= 0)
		rec->size = (uint64_t)tst.st_size;
	if (r >= 0 && t->opts.sync) {
		r = pending_push(t, fd, tmp, rec);
		if (r >= 0)
			return 0; /* fd and tmp now belong to the pending entry */
	} else if (r >= 0) {
		safe_close(fd);
		fd = -1;
		r = object_commit(t, tmp, rec->hash, rec->size);
		if (r > 0)
			t->stats.bytes_stored += rec->size;
		if (r >= 0 && (r = record_append(t, rec)) >= 0) {
			free(tmp);
			return 0;
		}
	}
	safe_close(fd);
	(void)unlinkat(s->tmp_fd, tmp, 0);
	free(tmp);
	return r;
}

static int preimage_file(struct store_turn *t, int dirfd, const char *name, const struct stat *st,
			 unsigned flags, struct store_record *rec, bool *consumed,
			 enum store_result *res)
{
	if ((uint64_t)st->st_size > t->opts.max_size_bytes) {
		if (t->opts.deny_oversize)
			return -EFBIG;
		rec->not_backed_up = true;
		*res = STORE_RESULT_NOT_BACKED_UP;
		return record_append(t, rec);
	}
	*res = STORE_RESULT_SAVED;
	/* A file whose name is about to go (deleted, renamed over) is kept by a hard link,
	 * recorded, and only then removed by the caller: at no point is it neither in place nor
	 * recorded. */
	(void)consumed;
	if ((flags & (STORE_CONSUME | STORE_REPLACE)) && st->st_nlink == 1 &&
	    st->st_dev == t->store->dev) {
		int r = file_link_in(t, dirfd, name, st, rec);
		if (r != -EXDEV && r != -EAGAIN && r != -EPERM && r != -EMLINK)
			return r;
	}
	return file_copy_in(t, dirfd, name, st, rec);
}

int store_preimage_absent(struct store_turn *t, const char *path)
{
	if (!t || !t->opts.enabled)
		return 0;
	if (!path || path[0] != '/')
		return -EINVAL;
	if (set_contains(&t->seen, path))
		return 0;
	int r;
	if (t->lazy && (r = turn_materialize(t)) < 0)
		return r;
	struct store_record rec = {
	    .path = (char *)path, .call = t->call, .kind = STORE_KIND_ABSENT};
	if ((r = record_append(t, &rec)) < 0)
		return r;
	t->stats.absent++;
	if ((r = set_add(&t->seen, path)) < 0)
		t->seen_incomplete = true;
	return r;
}

static int preimage_one(struct store_turn *t, int dirfd, const char *name, const char *path,
			const struct stat *known, unsigned flags, enum store_result *res,
			bool *consumed)
{
	if (set_contains(&t->seen, path)) {
		*res = STORE_RESULT_ALREADY;
		return 0;
	}
	struct store_record rec = {.path = (char *)path, .call = t->call};
	struct stat st;
	int r = 0;
	bool absent = false;
	if (known)
		st = *known;
	else if (flags & STORE_ABSENT)
		absent = true;
	else if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno != ENOENT)
			return negative_errno();
		absent = true;
	}
	if (absent) {
		rec.kind = STORE_KIND_ABSENT;
		*res = STORE_RESULT_ABSENT;
		r = record_append(t, &rec);
	} else {
		store_record_from_stat(&rec, &st);
		*res = STORE_RESULT_SAVED;
		/* the inode: names of one inode are made one again by undo */
		if (rec.kind == STORE_KIND_FILE)
			rec.ino = (uint64_t)st.st_ino;
		if (rec.kind == STORE_KIND_FILE)
			r = preimage_file(t, dirfd, name, &st, flags, &rec, consumed, res);
		else if (rec.kind == STORE_KIND_SYMLINK &&
			 (r = readlink_at(dirfd, name, (size_t)st.st_size, &rec.target)) >= 0)
			r = record_append(t, &rec);
		else if (rec.kind != STORE_KIND_SYMLINK)
			r = record_append(t, &rec);
		free(rec.target);
	}
	if (r < 0)
		return r;
	if ((r = set_add(&t->seen, path)) < 0) {
		t->seen_incomplete = true; /* recorded, but commit cannot list it from memory */
		return r;
	}
	if (*res == STORE_RESULT_ABSENT)
		t->stats.absent++;
	else if (*res == STORE_RESULT_NOT_BACKED_UP)
		t->stats.not_backed_up++;
	else
		t->stats.saved++;
	return 0;
}

static int preimage_tree(struct store_turn *t, int dirfd, const char *name, const char *path,
			 const struct stat *known, unsigned flags, int depth,
			 enum store_result *res)
{
	bool consumed = false;
	if (depth > TREE_DEPTH_MAX)
		return -ELOOP;
	int r = preimage_one(t, dirfd, name, path, depth == 0 ? known : NULL,
			     depth == 0 ? flags & STORE_ABSENT : 0, res, &consumed);
	if (r < 0)
		return r;
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOTDIR || errno == ELOOP || errno == ENOENT ? 0 : negative_errno();
	DIR *d = fdopendir(fd);
	if (!d) {
		safe_close(fd);
		return negative_errno();
	}
	struct strbuf child = STRBUF_INIT;
	for (;;) {
		errno = 0;
		struct dirent *de = readdir(d);
		if (!de) {
			r = errno ? negative_errno() : 0;
			break;
		}
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		enum store_result cres;
		if ((r = path_join(path, de->d_name, &child)) < 0 ||
		    (r = preimage_tree(t, dirfd_of(d), de->d_name, child.buf, NULL, 0, depth + 1,
				       &cres)) < 0)
			break;
	}
	strbuf_free(&child);
	closedir(d);
	return r;
}

int store_preimage_stat(struct store_turn *t, int dirfd, const char *name, const char *path,
			const struct stat *st, unsigned flags, enum store_result *ret_result,
			bool *ret_consumed)
{
	enum store_result res = STORE_RESULT_DISABLED;
	bool consumed = false;
	int r = 0;
	if (!t || !t->opts.enabled)
		goto out;
	if (!path || path[0] != '/' || !name || !*name)
		return -EINVAL;
	if (t->lazy && !set_contains(&t->seen, path) && (r = turn_materialize(t)) < 0)
		return r;
	if (flags & STORE_TREE)
		r = preimage_tree(t, dirfd, name, path, st, flags, 0, &res);
	else
		r = preimage_one(t, dirfd, name, path, st, flags, &res, &consumed);
	if (r < 0)
		return r;
out:
	if (ret_result)
		*ret_result = res;
	if (ret_consumed)
		*ret_consumed = consumed;
	return 0;
}

int store_preimage(struct store_turn *t, int dirfd, const char *name, const char *path,
		   unsigned flags, enum store_result *ret_result, bool *ret_consumed)
{
	return store_preimage_stat(t, dirfd, name, path, NULL, flags & ~(unsigned)STORE_ABSENT,
				   ret_result, ret_consumed);
}

bool store_preimage_recorded(const struct store_turn *t, const char *path)
{
	return t && t->opts.enabled && path && set_contains(&t->seen, path);
}

/* ---- durability ---- */

static int sync_pending(struct store_turn *t, bool durable)
{
	int r = 0;
	size_t i;
	/* A batch: start the write-back of every copy first, so that the waits overlap. */
	for (i = 0; durable && t->n_pending > 1 && i < t->n_pending; i++)
		(void)sync_file_range(t->pending[i].fd, 0, 0, SYNC_FILE_RANGE_WRITE);
	for (i = 0; durable && r >= 0 && i < t->n_pending; i++)
		if (fdatasync(t->pending[i].fd) < 0)
			r = negative_errno();
	for (i = 0; r >= 0 && i < t->n_pending; i++) {
		struct pending *p = &t->pending[i];
		struct stat st;
		if (fstat(p->fd, &st) < 0) {
			r = negative_errno();
			break;
		}
		int k = object_commit(t, p->tmp_name, p->hash, (uint64_t)st.st_size);
		if (k < 0) {
			r = k;
			break;
		}
		if (k > 0)
			t->stats.bytes_stored += (uint64_t)st.st_size;
		if ((r = manifest_append(t, p->line, strlen(p->line))) < 0)
			break;
		t->dirty_manifest = true;
		pending_drop(t, p, false);
	}
	/* What is left was never recorded: forget it, so a retry records it again. */
	for (i = 0; i < t->n_pending; i++)
		if (t->pending[i].line)
			pending_drop(t, &t->pending[i], true);
	t->n_pending = 0;
	return r;
}

bool store_turn_durable(const struct store_turn *t)
{
	return t && t->opts.enabled && t->opts.sync;
}

int store_flush(struct store_turn *t)
{
	if (!t || !t->opts.enabled)
		return 0;
	/* Records and objects in place, not yet flushed: a later store_sync() flushes them. */
	return sync_pending(t, false);
}

int store_sync(struct store_turn *t)
{
	if (!t || !t->opts.enabled)
		return 0;
	int r = sync_pending(t, true);
	if (r < 0)
		return r;
	if (!t->opts.sync) {
		t->dirty_manifest = t->dirty_objects = false;
		memset(t->dirty_prefix, 0, sizeof t->dirty_prefix);
		return 0;
	}
	for (unsigned i = 0; i < 256 && !t->store->ordered_metadata; i++) {
		if (!(t->dirty_prefix[i / 8] & (1u << (i % 8))))
			continue;
		char prefix[3];
		snprintf(prefix, sizeof prefix, "%02x", i);
		_cleanup_close_ int pfd = open_dir_at(t->store->objects_fd, prefix);
		if (pfd < 0)
			return pfd;
		if ((r = store_fsync_dirfd(pfd)) < 0)
			return r;
	}
	memset(t->dirty_prefix, 0, sizeof t->dirty_prefix);
	if (t->dirty_objects && !t->store->ordered_metadata &&
	    (r = store_fsync_dirfd(t->store->objects_fd)) < 0)
		return r;
	t->dirty_objects = false;
	if (t->dirty_manifest && fdatasync(t->manifest_fd) < 0)
		return negative_errno();
	t->dirty_manifest = false;
	return 0;
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

/* Sort by path, keeping the earliest record per path (file order). */
static int records_dedup(struct store_record *v, size_t n, struct store_record **ret, size_t *ret_n)
{
	struct indexed *ix = calloc(n ? n : 1, sizeof *ix);
	struct store_record *out = calloc(n ? n : 1, sizeof *out);
	if (!ix || !out) {
		free(ix);
		free(out);
		store_records_free(v, n);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		ix[i] = (struct indexed){i, &v[i]};
	qsort(ix, n, sizeof *ix, cmp_indexed);
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (k > 0 && strcmp(out[k - 1].path, ix[i].r->path) == 0)
			store_record_done(ix[i].r);
		else
			out[k++] = *ix[i].r, out[k - 1].seq = ix[i].idx;
	}
	free(ix);
	free(v);
	*ret = out;
	*ret_n = k;
	return 0;
}

static int turn_read_records(struct store *s, const char *id, const char *file,
			     struct store_record **ret, size_t *ret_n)
{
	if (!store_id_valid(id))
		return -EINVAL;
	_cleanup_close_ int tfd = open_dir_at(s->turns_fd, id);
	if (tfd < 0)
		return tfd;
	_cleanup_free_ char *buf = NULL;
	size_t n, nrec;
	struct store_record *v;
	int r = store_read_file_at(tfd, file, MANIFEST_MAX, &buf, &n);
	if (r == -ENOENT) {
		buf = NULL;
		n = 0;
	} else if (r < 0) {
		return r;
	}
	if ((r = store_manifest_parse(buf ? buf : "", n, &v, &nrec, NULL)) < 0)
		return r;
	return records_dedup(v, nrec, ret, ret_n);
}

int store_turn_records(struct store *s, const char *id, struct store_record **ret, size_t *ret_n)
{
	return turn_read_records(s, id, "manifest", ret, ret_n);
}

int store_turn_post(struct store *s, const char *id, struct store_record **ret, size_t *ret_n)
{
	return turn_read_records(s, id, "post", ret, ret_n);
}

int store_turn_info_get(struct store *s, const char *id, struct store_turn_info *ret)
{
	if (!store_id_valid(id))
		return -EINVAL;
	_cleanup_close_ int tfd = open_dir_at(s->turns_fd, id);
	if (tfd < 0)
		return tfd;
	struct store_turn_info m;
	int r = meta_read(tfd, &m);
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

/* ---- commit ---- */

/* The state a path was left in; 1: it cannot be seen (a directory on the way was made
 * unsearchable, or too deep), so no post-state is kept and undo does not ask about it. */
static int post_state(const struct store_record *pre, struct store_record *post)
{
	struct stat st;
	*post = (struct store_record){.path = pre->path};
	if (fstatat(AT_FDCWD, pre->path, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == EACCES || errno == ELOOP || errno == ENAMETOOLONG)
			return 1;
		if (errno != ENOENT && errno != ENOTDIR)
			return negative_errno();
		post->kind = STORE_KIND_ABSENT;
		return 0;
	}
	store_record_from_stat(post, &st);
	post->ino = (uint64_t)st.st_ino;
	if (post->kind == STORE_KIND_SYMLINK)
		return readlink_at(AT_FDCWD, pre->path, (size_t)st.st_size, &post->target);
	return 0;
}

/* The post file, written in chunks to a temp file (a big turn is never all in memory), then
 * renamed. */
struct post_writer {
	int dirfd, fd;
	char *tmp;
	struct strbuf buf;
};

#define POST_CHUNK (64 * 1024)

static int post_writer_open(struct post_writer *w, int dirfd)
{
	*w = (struct post_writer){.dirfd = dirfd, .fd = -1, .buf = STRBUF_INIT};
	int r = store_random_name(".tmp-", &w->tmp);
	if (r < 0)
		return r;
	w->fd = openat(dirfd, w->tmp, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600);
	return w->fd < 0 ? negative_errno() : 0;
}

static int post_writer_drain(struct post_writer *w)
{
	int r = write_all(w->fd, w->buf.buf ? w->buf.buf : "", w->buf.len);
	strbuf_reset(&w->buf);
	return r;
}

static int post_writer_add(struct post_writer *w, const char *path)
{
	struct store_record pre = {.path = (char *)path}, post;
	int r = post_state(&pre, &post);
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
	if (r >= 0 && store_durable && fsync(w->fd) < 0)
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
	return r;
}

/*
 * Commit: the post-state of every path of the turn, then the meta record. The paths come from the
 * manifest, or, for a turn only this process wrote (paths), from its path set: no manifest to
 * read and parse into memory at the end of a big turn.
 */
static int commit_dir(struct store *s, const char *id, const char *message,
		      const struct path_set *paths)
{
	_cleanup_close_ int tfd = open_dir_at(s->turns_fd, id);
	if (tfd < 0)
		return tfd;
	if (RETRY_EINTR(flock(tfd, LOCK_EX)) < 0)
		return negative_errno();
	struct store_turn_info m;
	int r = meta_read(tfd, &m);
	if (r < 0)
		return r;
	struct store_record *pre = NULL;
	size_t n = 0;
	struct post_writer w = {.fd = -1};
	if (m.committed)
		r = -EALREADY;
	if (r >= 0 && !paths)
		r = store_turn_records(s, id, &pre, &n);
	if (r >= 0)
		r = post_writer_open(&w, tfd);
	for (size_t i = 0; r >= 0 && i < n; i++)
		r = post_writer_add(&w, pre[i].path);
	for (size_t i = 0; r >= 0 && paths && i < paths->cap; i++)
		if (paths->slots[i])
			r = post_writer_add(&w, paths->slots[i]);
	if (w.fd >= 0 || w.tmp)
		r = post_writer_finish(&w, r);
	if (r >= 0) {
		if (message) {
			free(m.message);
			m.message = strdup(message);
		}
		m.committed = true;
		m.commit_ns = now_ns();
		r = m.message || !message ? meta_write(tfd, &m) : -ENOMEM;
	}
	store_records_free(pre, n);
	free(m.id);
	free(m.message);
	return r;
}

int store_turn_commit(struct store_turn *t, const char *message)
{
	if (!t)
		return -EINVAL;
	if (t->lazy) { /* nothing was recorded: no turn */
		store_turn_free(t);
		return 0;
	}
	int r = store_sync(t);
	(void)flock(t->dir_fd, LOCK_UN);
	if (r >= 0)
		r = commit_dir(t->store, t->id, message,
			       t->exclusive && !t->seen_incomplete ? &t->seen : NULL);
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
	r = commit_dir(s, id ? id : cur, message, NULL);
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
	(void)sync_pending(t, t->opts.sync);
	turn_free_fds(t);
}

/* ---- gc ---- */

static int remove_tree_at(int dirfd, const char *name)
{
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return unlinkat(dirfd, name, 0) < 0 && errno != ENOENT ? negative_errno() : 0;
	DIR *d = fdopendir(fd);
	if (!d) {
		safe_close(fd);
		return -ENOMEM;
	}
	int r = 0;
	for (struct dirent *de; (de = readdir(d));) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		int k = remove_tree_at(dirfd_of(d), de->d_name);
		if (k < 0)
			r = k;
	}
	closedir(d);
	if (r >= 0 && unlinkat(dirfd, name, AT_REMOVEDIR) < 0)
		r = negative_errno();
	return r;
}

static int gc_collect_refs(struct store *s, struct path_set *refs)
{
	struct store_turn_info *v = NULL;
	size_t n = 0;
	int r = store_list_turns(s, &v, &n);
	for (size_t i = 0; r >= 0 && i < n; i++) {
		_cleanup_close_ int tfd = open_dir_at(s->turns_fd, v[i].id);
		_cleanup_free_ char *buf = NULL;
		size_t len, nrec;
		struct store_record *recs;
		if (tfd < 0)
			continue;
		if ((r = store_read_file_at(tfd, "manifest", MANIFEST_MAX, &buf, &len)) < 0) {
			if (r == -ENOENT)
				r = 0;
			continue;
		}
		if ((r = store_manifest_parse(buf, len, &recs, &nrec, NULL)) < 0)
			break;
		for (size_t k = 0; r >= 0 && k < nrec; k++)
			if (recs[k].hash[0])
				r = set_add(refs, recs[k].hash);
		store_records_free(recs, nrec);
	}
	store_turn_infos_free(v, n);
	return r < 0 ? r : 0;
}

static int gc_objects(struct store *s, struct path_set *refs, struct store_gc_stats *st)
{
	int fd = dup(s->objects_fd);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		safe_close(fd);
		return -ENOMEM;
	}
	rewinddir(d);
	int r = 0;
	for (struct dirent *de; r >= 0 && (de = readdir(d));) {
		if (strlen(de->d_name) != 2)
			continue;
		_cleanup_close_ int pfd = open_dir_at(s->objects_fd, de->d_name);
		int pfd2 = pfd < 0 ? -1 : dup(pfd);
		DIR *pd = pfd2 < 0 ? NULL : fdopendir(pfd2);
		if (!pd) {
			safe_close(pfd2);
			continue;
		}
		for (struct dirent *oe; (oe = readdir(pd));) {
			char hash[65];
			struct stat ost;
			if (strlen(oe->d_name) != 62)
				continue;
			memcpy(hash, de->d_name, 2);
			memcpy(hash + 2, oe->d_name, 63);
			if (set_contains(refs, hash) || fstatat(pfd, oe->d_name, &ost, 0) < 0)
				continue;
			if (unlinkat(pfd, oe->d_name, 0) >= 0) {
				st->objects_removed++;
				st->bytes_freed += (uint64_t)ost.st_size;
			}
		}
		closedir(pd);
	}
	closedir(d);
	return r;
}

int store_gc(struct store *s, uint64_t older_than_sec, struct store_gc_stats *ret)
{
	struct store_gc_stats st = {0};
	if (flock(s->lock_fd, LOCK_EX | LOCK_NB) < 0)
		return errno == EWOULDBLOCK ? -EBUSY : negative_errno();
	struct store_turn_info *v = NULL;
	size_t n = 0;
	_cleanup_free_ char *cur = NULL;
	(void)store_current_turn(s, &cur);
	int64_t limit =
	    now_ns() - (int64_t)MIN(older_than_sec, (uint64_t)INT64_MAX / 2000000000) * 1000000000;
	int r = store_list_turns(s, &v, &n);
	for (size_t i = 0; r >= 0 && i < n; i++) {
		if (!v[i].committed || v[i].commit_ns > limit || (cur && strcmp(cur, v[i].id) == 0))
			continue;
		if ((r = remove_tree_at(s->turns_fd, v[i].id)) >= 0)
			st.turns_removed++;
	}
	store_turn_infos_free(v, n);
	/* Nobody else has the store open: every temp file is a leftover. */
	if (r >= 0) {
		int fd = dup(s->tmp_fd);
		DIR *d = fd < 0 ? NULL : fdopendir(fd);
		for (struct dirent *de; d && (de = readdir(d));)
			if (de->d_name[0] != '.')
				(void)unlinkat(s->tmp_fd, de->d_name, 0);
		if (d)
			closedir(d);
		else
			safe_close(fd);
	}
	struct path_set refs = {0};
	if (r >= 0)
		r = gc_collect_refs(s, &refs);
	if (r >= 0)
		r = gc_objects(s, &refs, &st);
	set_free(&refs);
	(void)flock(s->lock_fd, LOCK_SH);
	if (r >= 0 && ret)
		*ret = st;
	return r;
}
