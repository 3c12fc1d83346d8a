/* SPDX-License-Identifier: MIT */
#include "trash.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/fs-util.h"
#include "basic/hexdecoct.h"
#include "basic/macro.h"
#include "basic/stat-util.h"
#include "basic/user-util.h"
#include "basic/path-util.h"

#define TRASHINFO_MAX  (64 * 1024)
#define TRASH_NAME_MAX 200 /* leaves room for ".NNNN" and ".trashinfo" within NAME_MAX */
#define TRASH_LIST_MAX 100000
#define TRASH_DIRS_MAX 256

/* ---- format ---- */

static bool unreserved(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       strchr("-_.!~*'()/", c) != NULL;
}

int trash_path_encode(const char *path, struct strbuf *out)
{
	static const char hex[] = "0123456789ABCDEF";
	for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
		if (unreserved(*p))
			strbuf_appendc(out, (char)*p);
		else {
			char e[3] = {'%', hex[*p >> 4], hex[*p & 15]};
			strbuf_append(out, e, 3);
		}
	}
	return out->oom ? -ENOMEM : 0;
}

int trash_path_decode(const char *s, size_t n, struct strbuf *out)
{
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (c == '\0')
			return -EINVAL;
		if (c == '%') {
			if (i + 2 >= n)
				return -EINVAL;
			int h = unhexchar(s[i + 1]), l = unhexchar(s[i + 2]);
			if (h < 0 || l < 0 || (h == 0 && l == 0))
				return -EINVAL;
			c = (char)(h << 4 | l);
			i += 2;
		}
		strbuf_appendc(out, c);
	}
	return out->oom ? -ENOMEM : 0;
}

int trash_info_format(const char *path, time_t when, struct strbuf *out)
{
	struct tm tm;
	char date[64];
	if (!localtime_r(&when, &tm) || !strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm))
		return -EINVAL;
	strbuf_appends(out, "[Trash Info]\nPath=");
	int r = trash_path_encode(path, out);
	if (r < 0)
		return r;
	strbuf_printf(out, "\nDeletionDate=%s\n", date);
	return out->oom ? -ENOMEM : 0;
}

int trash_info_parse(const char *buf, size_t n, char **ret_path, char **ret_date)
{
	bool in_group = false, seen_group = false;
	_cleanup_free_ char *path = NULL, *date = NULL;
	for (size_t i = 0; i < n;) {
		const char *nl = memchr(buf + i, '\n', n - i);
		size_t len = nl ? (size_t)(nl - (buf + i)) : n - i;
		const char *line = buf + i;
		i += len + 1;
		if (len && line[len - 1] == '\r')
			len--;
		if (len && line[0] == '[') {
			in_group = len == 12 && memcmp(line, "[Trash Info]", 12) == 0;
			if (in_group && seen_group)
				return -EINVAL; /* the group twice */
			seen_group |= in_group;
			continue;
		}
		if (!in_group)
			continue;
		if (len > 5 && memcmp(line, "Path=", 5) == 0) {
			if (path)
				return -EINVAL;
			struct strbuf sb = STRBUF_INIT;
			int r = trash_path_decode(line + 5, len - 5, &sb);
			if (r < 0 || sb.len == 0 || sb.len > BROKERED_PATH_MAX) {
				strbuf_free(&sb);
				return r < 0 ? r : -EINVAL;
			}
			path = strbuf_steal(&sb);
			if (!path)
				return -ENOMEM;
		} else if (len >= 13 && memcmp(line, "DeletionDate=", 13) == 0) {
			free(date);
			date = strndup(line + 13, MIN(len - 13, (size_t)64));
			if (!date)
				return -ENOMEM;
		}
	}
	if (!path)
		return -EINVAL;
	if (!date && !(date = strdup("")))
		return -ENOMEM;
	*ret_path = TAKE_PTR(path);
	*ret_date = TAKE_PTR(date);
	return 0;
}

/* ---- locations ---- */

int trash_home_dir(char **ret)
{
	const char *xdg = getenv("XDG_DATA_HOME");
	struct strbuf sb = STRBUF_INIT;
	if (xdg && xdg[0] == '/') {
		strbuf_printf(&sb, "%s/Trash", xdg);
	} else {
		const char *home = user_home();
		if (!home)
			return -ENOENT;
		strbuf_printf(&sb, "%s/.local/share/Trash", home);
	}
	char *p = strbuf_steal(&sb);
	if (!p)
		return -ENOMEM;
	*ret = p;
	return 0;
}

/* mkdir -p with mode for the components we create. */
static int mkdir_p(const char *path, mode_t mode)
{
	_cleanup_free_ char *p = strdup(path);
	if (!p)
		return -ENOMEM;
	for (char *s = p + 1;; s++) {
		if (*s == '/' || *s == '\0') {
			char c = *s;
			*s = '\0';
			if (mkdir(p, mode) < 0 && errno != EEXIST)
				return negative_errno();
			*s = c;
			if (!c)
				break;
		}
	}
	struct stat st;
	if (lstat(path, &st) < 0)
		return negative_errno();
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

/* A trash directory we may use: ours, a real directory, files/ and info/ inside. */
static int trash_prepare(const char *dir, bool create, dev_t dev, int *ret_files, int *ret_info)
{
	struct stat st;
	if (create) {
		int r = mkdir_p(dir, 0700);
		if (r < 0)
			return r;
	}
	if (lstat(dir, &st) < 0)
		return negative_errno();
	if (!S_ISDIR(st.st_mode) || st.st_uid != getuid())
		return -EPERM;
	if (st.st_dev != dev)
		return -EXDEV;
	_cleanup_close_ int dfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return negative_errno();
	if ((mkdirat(dfd, "files", 0700) < 0 && errno != EEXIST) ||
	    (mkdirat(dfd, "info", 0700) < 0 && errno != EEXIST))
		return negative_errno();
	int f = openat(dfd, "files", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (f < 0)
		return negative_errno();
	int i = openat(dfd, "info", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (i < 0) {
		close(f);
		return negative_errno();
	}
	*ret_files = f;
	*ret_info = i;
	return 0;
}

/* The top directory of the file system real_path lies on (the highest ancestor on dev). */
static int find_topdir(const char *real_path, dev_t dev, char **ret)
{
	char *cur = strdup(real_path);
	if (!cur)
		return -ENOMEM;
	while (strcmp(cur, "/") != 0) {
		char *slash = strrchr(cur, '/');
		if (!slash) {
			free(cur);
			return -EINVAL;
		}
		char saved = slash[slash == cur ? 1 : 0];
		slash[slash == cur ? 1 : 0] = '\0'; /* cur is now the parent */
		struct stat st;
		if (stat(cur, &st) < 0 || st.st_dev != dev) {
			slash[slash == cur ? 1 : 0] = saved; /* back to the child: the top */
			break;
		}
	}
	*ret = cur;
	return 0;
}

struct trash_target {
	char *dir;    /* trash directory */
	char *topdir; /* NULL for the home trash: Path= is absolute there */
	int files_fd, info_fd;
};

static void trash_target_done(struct trash_target *t)
{
	free(t->dir);
	free(t->topdir);
	safe_close(t->files_fd);
	safe_close(t->info_fd);
}

static int pick_trash(const char *real_path, dev_t dev, struct trash_target *t)
{
	*t = (struct trash_target){.files_fd = -1, .info_fd = -1};
	int r = trash_home_dir(&t->dir);
	if (r >= 0) {
		r = trash_prepare(t->dir, true, dev, &t->files_fd, &t->info_fd);
		if (r >= 0)
			return 0;
	}
	free(t->dir);
	t->dir = NULL;
	/* Another file system: $topdir/.Trash/$uid (admin-made, sticky), else $topdir/.Trash-$uid.
	 */
	r = find_topdir(real_path, dev, &t->topdir);
	if (r < 0)
		return -EXDEV;
	const char *top = strcmp(t->topdir, "/") == 0 ? "" : t->topdir;
	struct strbuf sb = STRBUF_INIT;
	struct stat st;
	strbuf_printf(&sb, "%s/.Trash", top);
	if (!sb.oom && lstat(sb.buf, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX)) {
		strbuf_printf(&sb, "/%u", (unsigned)getuid());
		t->dir = strbuf_steal(&sb);
		if (t->dir && trash_prepare(t->dir, true, dev, &t->files_fd, &t->info_fd) >= 0)
			return 0;
		free(t->dir);
		t->dir = NULL;
	}
	strbuf_reset(&sb);
	strbuf_printf(&sb, "%s/.Trash-%u", top, (unsigned)getuid());
	t->dir = strbuf_steal(&sb);
	if (!t->dir)
		return -ENOMEM;
	if (mkdir(t->dir, 0700) < 0 && errno != EEXIST)
		return -EXDEV;
	r = trash_prepare(t->dir, false, dev, &t->files_fd, &t->info_fd);
	return r < 0 ? -EXDEV : 0;
}

int trash_put_at(int parent_fd, const char *name, const char *real_path, char **ret_trashed)
{
	if (!path_component_valid(name) || !real_path || real_path[0] != '/')
		return -EINVAL;
	struct stat st;
	if (fstatat(parent_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return negative_errno();
	struct trash_target t;
	int r = pick_trash(real_path, st.st_dev, &t);
	if (r < 0) {
		trash_target_done(&t);
		return r;
	}
	/* What Path= says: absolute in the home trash, relative to the top dir elsewhere. */
	const char *info_path = real_path;
	if (t.topdir) {
		size_t n = strcmp(t.topdir, "/") == 0 ? 0 : strlen(t.topdir);
		info_path = real_path + n + 1;
	}
	_cleanup_strbuf_ struct strbuf info = STRBUF_INIT;
	if ((r = trash_info_format(info_path, time(NULL), &info)) < 0) {
		trash_target_done(&t);
		return r;
	}
	char base[TRASH_NAME_MAX + 1];
	snprintf(base, sizeof base, "%s", name);
	r = -EEXIST;
	char cand[TRASH_NAME_MAX + 32], infoname[TRASH_NAME_MAX + 48];
	for (unsigned i = 1; i <= 10000 && r == -EEXIST; i++) {
		if (i == 1)
			snprintf(cand, sizeof cand, "%s", base);
		else if (i <= 100)
			snprintf(cand, sizeof cand, "%s.%u", base, i);
		else
			snprintf(cand, sizeof cand, "%s.%08lx", base, (unsigned long)random());
		snprintf(infoname, sizeof infoname, "%s.trashinfo", cand);
		/* Creating the info file with O_EXCL is what claims the name (the spec's lock). */
		int fd = openat(t.info_fd, infoname,
				O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0) {
			r = errno == EEXIST ? -EEXIST : negative_errno();
			continue;
		}
		ssize_t k = write(fd, info.buf, info.len);
		int w = k == (ssize_t)info.len && fsync(fd) == 0
			    ? 0
			    : (k < 0 ? negative_errno() : -EIO);
		close(fd);
		if (w < 0) {
			(void)unlinkat(t.info_fd, infoname, 0);
			r = w;
			break;
		}
		if (renameat2(parent_fd, name, t.files_fd, cand, RENAME_NOREPLACE) < 0) {
			r = negative_errno();
			(void)unlinkat(t.info_fd, infoname, 0);
			continue; /* -EEXIST: a stray file without info; try the next name */
		}
		r = 0;
	}
	if (r >= 0 && ret_trashed) {
		struct strbuf sb = STRBUF_INIT;
		strbuf_printf(&sb, "%s/files/%s", t.dir, cand);
		*ret_trashed = strbuf_steal(&sb);
	}
	trash_target_done(&t);
	return r;
}

/* ---- listing ---- */

void trash_entries_free(struct trash_entry *e, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(e[i].trash_dir);
		free(e[i].name);
		free(e[i].original_path);
		free(e[i].deletion_date);
	}
	free(e);
}

/* Decode the \NNN octal escapes of /proc/self/mountinfo. */
static char *mount_unescape(const char *s)
{
	char *out = malloc(strlen(s) + 1), *o = out;
	if (!out)
		return NULL;
	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*o++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
			s += 3;
		} else {
			*o++ = *s;
		}
	}
	*o = '\0';
	return out;
}

struct dirlist {
	char *dirs[TRASH_DIRS_MAX];
	char *tops[TRASH_DIRS_MAX];
	struct stat st[TRASH_DIRS_MAX];
	size_t n;
};

static void dirlist_add(struct dirlist *l, const char *dir, const char *top)
{
	struct stat st;
	if (l->n >= TRASH_DIRS_MAX || lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode) ||
	    st.st_uid != getuid())
		return;
	for (size_t i = 0; i < l->n; i++)
		if (stat_inode_same(&l->st[i], &st))
			return;
	l->dirs[l->n] = strdup(dir);
	l->tops[l->n] = top ? strdup(top) : NULL;
	if (!l->dirs[l->n]) {
		free(l->tops[l->n]);
		return;
	}
	l->st[l->n] = st;
	l->n++;
}

static int read_small_at(int dirfd, const char *name, char **ret, size_t *ret_n)
{
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return negative_errno();
	char *buf = malloc(TRASHINFO_MAX);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	size_t n = 0;
	for (;;) {
		ssize_t k = read(fd, buf + n, TRASHINFO_MAX - n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			int r = negative_errno();
			close(fd);
			free(buf);
			return r;
		}
		if (k == 0)
			break;
		n += (size_t)k;
		if (n == TRASHINFO_MAX) {
			close(fd);
			free(buf);
			return -EFBIG;
		}
	}
	close(fd);
	*ret = buf;
	*ret_n = n;
	return 0;
}

static int list_one(const char *dir, const char *top, struct trash_entry **v, size_t *n)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_printf(&sb, "%s/info", dir);
	int ifd = sb.oom ? -1 : open(sb.buf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	strbuf_reset(&sb);
	strbuf_printf(&sb, "%s/files", dir);
	_cleanup_close_ int ffd =
	    sb.oom ? -1 : open(sb.buf, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	strbuf_free(&sb);
	if (ifd < 0)
		return 0;
	DIR *d = xfdopendir(ifd);
	if (!d)
		return 0;
	struct dirent *de;
	int r = 0;
	while (r >= 0 && (de = readdir(d))) {
		size_t len = strlen(de->d_name);
		if (len <= 10 || strcmp(de->d_name + len - 10, ".trashinfo") != 0)
			continue;
		if (*n >= TRASH_LIST_MAX)
			break;
		char *buf;
		size_t bn;
		if (read_small_at(dirfd(d), de->d_name, &buf, &bn) < 0)
			continue;
		char *path = NULL, *date = NULL;
		int k = trash_info_parse(buf, bn, &path, &date);
		free(buf);
		if (k < 0)
			continue; /* not ours to judge: skip what does not parse */
		struct trash_entry e = {0};
		if (path[0] != '/') {
			struct strbuf full = STRBUF_INIT;
			path_join(top ? top : "/", path, &full);
			free(path);
			path = strbuf_steal(&full);
		}
		e.original_path = path;
		e.deletion_date = date;
		e.name = strndup(de->d_name, len - 10);
		e.trash_dir = strdup(dir);
		struct stat st;
		e.in_files =
		    ffd >= 0 && e.name && fstatat(ffd, e.name, &st, AT_SYMLINK_NOFOLLOW) == 0;
		struct trash_entry *nv = realloc(*v, (*n + 1) * sizeof *nv);
		if (!nv || !e.name || !e.trash_dir || !e.original_path) {
			free(e.trash_dir);
			free(e.name);
			free(e.original_path);
			free(e.deletion_date);
			if (nv)
				*v = nv;
			r = -ENOMEM;
			break;
		}
		*v = nv;
		(*v)[(*n)++] = e;
	}
	closedir(d);
	return r;
}

static int entry_cmp(const void *a, const void *b)
{
	const struct trash_entry *x = a, *y = b;
	int c = strcmp(x->deletion_date, y->deletion_date);
	return c ? c : strcmp(x->name, y->name);
}

int trash_list(struct trash_entry **ret, size_t *ret_n)
{
	struct dirlist l = {.n = 0};
	_cleanup_free_ char *home = NULL;
	if (trash_home_dir(&home) >= 0)
		dirlist_add(&l, home, NULL);
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (f) {
		char *line = NULL;
		size_t cap = 0;
		unsigned uid = (unsigned)getuid();
		while (getline(&line, &cap, f) > 0) {
			char *save = NULL, *tok = strtok_r(line, " ", &save);
			for (int i = 0; tok && i < 4; i++)
				tok = strtok_r(NULL, " ", &save);
			if (!tok)
				continue;
			_cleanup_free_ char *mp = mount_unescape(tok);
			if (!mp || mp[0] != '/')
				continue;
			const char *top = strcmp(mp, "/") == 0 ? "" : mp;
			struct strbuf sb = STRBUF_INIT;
			strbuf_printf(&sb, "%s/.Trash/%u", top, uid);
			if (!sb.oom)
				dirlist_add(&l, sb.buf, mp);
			strbuf_reset(&sb);
			strbuf_printf(&sb, "%s/.Trash-%u", top, uid);
			if (!sb.oom)
				dirlist_add(&l, sb.buf, mp);
			strbuf_free(&sb);
		}
		free(line);
		fclose(f);
	}
	struct trash_entry *v = NULL;
	size_t n = 0;
	int r = 0;
	for (size_t i = 0; i < l.n; i++) {
		if (r >= 0)
			r = list_one(l.dirs[i], l.tops[i], &v, &n);
		free(l.dirs[i]);
		free(l.tops[i]);
	}
	if (r < 0) {
		trash_entries_free(v, n);
		return r;
	}
	if (n)
		qsort(v, n, sizeof *v, entry_cmp);
	*ret = v;
	*ret_n = n;
	return 0;
}

static int open_sub(const char *dir, const char *sub)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_printf(&sb, "%s/%s", dir, sub);
	int fd = sb.oom ? -ENOMEM : open(sb.buf, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && !sb.oom)
		fd = negative_errno();
	strbuf_free(&sb);
	return fd;
}

int trash_restore(const struct trash_entry *e, const char *to)
{
	const char *dst = to ? to : e->original_path;
	if (!path_component_valid(e->name) || !dst || dst[0] != '/')
		return -EINVAL;
	_cleanup_strbuf_ struct strbuf norm = STRBUF_INIT;
	int r = path_normalise(dst, &norm);
	if (r < 0)
		return r;
	_cleanup_free_ char *parent = NULL;
	const char *name;
	if ((r = path_split(norm.buf, &parent, &name)) < 0)
		return r;
	if (!path_component_valid(name))
		return -EINVAL;
	_cleanup_close_ int pfd = open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (pfd < 0)
		return negative_errno();
	_cleanup_close_ int ffd = open_sub(e->trash_dir, "files");
	_cleanup_close_ int ifd = open_sub(e->trash_dir, "info");
	if (ffd < 0)
		return ffd;
	if (ifd < 0)
		return ifd;
	if (renameat2(ffd, e->name, pfd, name, RENAME_NOREPLACE) < 0)
		return negative_errno();
	char info[NAME_MAX + 16];
	snprintf(info, sizeof info, "%s.trashinfo", e->name);
	(void)unlinkat(ifd, info, 0);
	return 0;
}

int trash_remove(const struct trash_entry *e)
{
	if (!path_component_valid(e->name))
		return -EINVAL;
	struct strbuf sb = STRBUF_INIT;
	strbuf_printf(&sb, "%s/files", e->trash_dir);
	_cleanup_close_ int ffd =
	    sb.oom ? -1 : open(sb.buf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	strbuf_free(&sb);
	_cleanup_close_ int ifd = open_sub(e->trash_dir, "info");
	if (ifd < 0)
		return ifd;
	int r = 0;
	if (ffd >= 0) {
		r = rm_rf_at(ffd, e->name);
		if (r == -ENOENT)
			r = 0;
	}
	if (r < 0)
		return r;
	char info[NAME_MAX + 16];
	snprintf(info, sizeof info, "%s.trashinfo", e->name);
	if (unlinkat(ifd, info, 0) < 0 && errno != ENOENT)
		return negative_errno();
	return 0;
}
