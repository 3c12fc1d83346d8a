/* SPDX-License-Identifier: MIT */
#include "resolve.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "basic/fd-util.h"
#include "basic/kernel-compat.h"
#include "basic/macro.h"
#include "basic/path-util.h"
#include "basic/stat-util.h"
#include "basic/strbuf.h"
#include "proc.h"

#define MAX_SYMLINK_HOPS 40

void resolved_done(struct resolved *r)
{
	r->parent_fd = safe_close(r->parent_fd);
	r->obj_fd = safe_close(r->obj_fd);
	free(r->name);
	free(r->parent_real);
	free(r->real);
	r->name = r->parent_real = r->real = NULL;
	r->exists = false;
}

static int openat2_path(int dirfd, const char *path, uint64_t flags, uint64_t resolve)
{
	struct open_how how = {.flags = flags, .resolve = resolve};
	int fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
	return fd < 0 ? negative_errno() : fd;
}

int resolve_fd_real_path(int fd, char **ret)
{
	const struct proc_fd_at link = proc_fd_at(fd);
	size_t sz = 256;
	for (;;) {
		char *buf = malloc(sz);
		if (!buf)
			return -ENOMEM;
		ssize_t n = readlinkat(link.dirfd, link.name, buf, sz);
		if (n < 0) {
			int r = negative_errno();
			free(buf);
			return r;
		}
		if ((size_t)n < sz) {
			buf[n] = '\0';
			if (buf[0] != '/') { /* pipe:[..], anon_inode:..., not a path */
				free(buf);
				return -ENOENT;
			}
			*ret = buf;
			return 0;
		}
		free(buf);
		if (sz > 2 * BROKERED_PATH_MAX + 64)
			return -ENAMETOOLONG;
		sz *= 4;
	}
}

/*
 * Lexical translation of the target's self-referring names into /proc/TID/... so that the broker
 * never follows its own /proc/self. Returns the rewritten path in out (or the path unchanged).
 */
static int translate_self(pid_t tid, const char *path, struct strbuf *out)
{
	static const struct {
		const char *prefix;
		const char *suffix; /* after /proc/TID */
	} map[] = {
	    {"/proc/self", ""},	     {"/proc/thread-self", ""}, {"/dev/fd", "/fd"},
	    {"/dev/stdin", "/fd/0"}, {"/dev/stdout", "/fd/1"},	{"/dev/stderr", "/fd/2"},
	};
	strbuf_reset(out);
	for (size_t i = 0; i < ELEMENTSOF(map); i++) {
		size_t n = strlen(map[i].prefix);
		if (strncmp(path, map[i].prefix, n) == 0 && (path[n] == '\0' || path[n] == '/')) {
			int r = strbuf_printf(out, "/proc/%d%s", (int)tid, map[i].suffix);
			if (r < 0)
				return r;
			return strbuf_appends(out, path + n);
		}
	}
	return strbuf_appends(out, path);
}

/*
 * The broker's own /proc/PID, reached by a route translate_self() cannot see lexically
 * ("/proc/self/../self", "/dev/../proc/self", "../../proc/self"): map the real path back to
 * the target's. Returns 1 and the rewritten path in out, or 0 if real is not ours.
 */
static int untranslate_own_proc(pid_t tid, const char *real, const char *name, struct strbuf *out)
{
	char own[32];
	int n = snprintf(own, sizeof own, "/proc/%d", (int)getpid());
	if (strncmp(real, own, (size_t)n) != 0 || (real[n] != '/' && real[n] != '\0'))
		return 0;
	const char *rest = real + n;
	if (strncmp(rest, "/task/", 6) == 0) { /* /proc/self/task/TID = thread-self */
		rest += 6;
		rest += strspn(rest, "0123456789");
	}
	strbuf_reset(out);
	int r = strbuf_printf(out, "/proc/%d%s/%s", (int)tid, rest, name);
	return r < 0 ? r : 1;
}

static bool fd_on_procfs(int fd)
{
	struct statfs sf;
	return fstatfs(fd, &sf) == 0 && sf.f_type == PROC_SUPER_MAGIC;
}

/* Fill real/parent_real for parent_fd + name. */
static int fill_real(struct resolved *r)
{
	struct stat pst;
	if (fstat(r->parent_fd, &pst) < 0)
		return negative_errno();
	if (!S_ISDIR(pst.st_mode))
		return -ENOTDIR;
	if (pst.st_nlink == 0) /* the directory was removed */
		return -ENOENT;
	r->parent_dev = pst.st_dev;
	int k = resolve_fd_real_path(r->parent_fd, &r->parent_real);
	if (k < 0)
		return k;
	struct strbuf sb = STRBUF_INIT;
	k = path_join(r->parent_real, r->name, &sb);
	if (k < 0) {
		strbuf_free(&sb);
		return k;
	}
	r->real = strbuf_steal(&sb);
	return r->real ? 0 : -ENOMEM;
}

/*
 * With foreign mounts, fd (the target's) is on the target's read-only copy of one of our mounts:
 * replace it with an O_PATH fd of the same inode on ours, opened by its path, so that what the
 * broker does through it is not refused with EROFS. An fd without a path (pipe, unlinked file)
 * stays. A path that names another inode by the time it is opened (a rename in between) is tried
 * again, then -EAGAIN; a directory removed meanwhile is -ENOENT, as the kernel says.
 */
/*
 * Directories reopened so, by the target's mount and inode: a command works in a few of them (its
 * cwd, the dirfds of a tree walk). Our fd keeps the inode alive, so while the target's directory
 * has a name, its mount and inode number name the same directory as our fd.
 */
#define OWN_CACHE 16
static struct {
	uint64_t mnt, ino;
	dev_t dev;
	int fd; /* -1 (0 before first use: never ours, fd 0 is not a directory we open) */
} own_cache[OWN_CACHE];
static unsigned own_next;

static int own_cached(const struct statx *x)
{
	dev_t dev = makedev(x->stx_dev_major, x->stx_dev_minor);
	for (unsigned i = 0; i < OWN_CACHE; i++)
		if (own_cache[i].fd > 0 && own_cache[i].ino == x->stx_ino &&
		    own_cache[i].dev == dev && own_cache[i].mnt == x->stx_mnt_id)
			return fcntl(own_cache[i].fd, F_DUPFD_CLOEXEC, 3);
	return -ENOENT;
}

static void own_remember(const struct statx *x, int fd)
{
	unsigned i = own_next++ % OWN_CACHE;
	if (own_cache[i].fd > 0)
		close(own_cache[i].fd);
	own_cache[i].fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	own_cache[i].ino = x->stx_ino;
	own_cache[i].dev = makedev(x->stx_dev_major, x->stx_dev_minor);
	own_cache[i].mnt = x->stx_mnt_id;
}

static int reopen_own(const struct resolve_ctx *ctx, int *fd)
{
	if (!ctx->foreign_mounts)
		return 0;
	struct stat was;
	struct statx x;
	if (statx(*fd, "", AT_EMPTY_PATH, STATX_TYPE | STATX_NLINK | STATX_INO | STATX_MNT_ID, &x) <
	    0)
		return negative_errno();
	was.st_dev = makedev(x.stx_dev_major, x.stx_dev_minor);
	was.st_ino = x.stx_ino;
	was.st_mode = x.stx_mode;
	was.st_nlink = x.stx_nlink;
	if (was.st_nlink == 0 && !S_ISDIR(was.st_mode))
		return 0;
	bool cacheable = S_ISDIR(was.st_mode) && was.st_nlink > 0 && (x.stx_mask & STATX_MNT_ID);
	int hit = cacheable ? own_cached(&x) : -ENOENT;
	if (hit >= 0) {
		safe_close(*fd);
		*fd = hit;
		return 0;
	}
	for (int attempt = 0; attempt < 3; attempt++) {
		_cleanup_free_ char *real = NULL;
		int k = resolve_fd_real_path(*fd, &real);
		if (k == -ENOENT)
			return 0;
		if (k < 0)
			return k;
		int own = openat2_path(ctx->root_fd, real, O_PATH | O_NOFOLLOW | O_CLOEXEC,
				       RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
		if (own == -ENOENT && was.st_nlink == 0)
			return -ENOENT;
		struct stat is;
		if (own >= 0 && fstat(own, &is) == 0 && stat_inode_same(&is, &was)) {
			if (cacheable)
				own_remember(&x, own);
			safe_close(*fd);
			*fd = own;
			return 0;
		}
		safe_close(own);
	}
	return -EAGAIN;
}

static int resolve_magic(const struct resolve_ctx *ctx, struct resolved *r)
{
	int k, fd = openat(r->parent_fd, r->name, O_PATH | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	r->obj_fd = fd;
	if (fstat(fd, &r->st) < 0)
		return negative_errno();
	if ((S_ISREG(r->st.st_mode) || S_ISDIR(r->st.st_mode)) &&
	    (k = reopen_own(ctx, &r->obj_fd)) < 0)
		return k;
	fd = r->obj_fd;
	r->exists = true;
	free(r->real);
	r->real = NULL;
	k = resolve_fd_real_path(fd, &r->real);
	if (k == -ENOENT) /* pipe, socket, anon inode: no path */
		return 0;
	if (k < 0)
		return k;
	if (r->st.st_nlink == 0 && S_ISREG(r->st.st_mode)) {
		/* An unlinked or O_TMPFILE file: no name to back up or check. */
		free(r->real);
		r->real = NULL;
	}
	return 0;
}

/* Split at the last '/': dir part (may be "" meaning base) and final name; trailing slashes noted.
 */
static int split_path(const char *path, struct strbuf *dir, char **ret_name, bool *ret_trailing)
{
	size_t n = strlen(path);
	bool trailing = false;
	while (n > 1 && path[n - 1] == '/') {
		n--;
		trailing = true;
	}
	if (n == 1 && path[0] == '/') {
		/* The root itself: parent "/" and name "." */
		strbuf_reset(dir);
		int r = strbuf_appends(dir, "/");
		if (r < 0)
			return r;
		*ret_name = strdup(".");
		*ret_trailing = trailing;
		return *ret_name ? 0 : -ENOMEM;
	}
	const char *end = path + n;
	const char *slash = memrchr(path, '/', n);
	const char *name = slash ? slash + 1 : path;
	strbuf_reset(dir);
	int r = 0;
	if (slash)
		r = strbuf_append(dir, path, slash == path ? 1 : (size_t)(slash - path));
	if (r < 0)
		return r;
	*ret_name = strndup(name, (size_t)(end - name));
	*ret_trailing = trailing;
	return *ret_name ? 0 : -ENOMEM;
}

static int open_dir_part(int base, const char *dir, bool is_proc_target)
{
	const char *p = *dir ? dir : ".";
	/* Ordinary symlinks in directory components are followed, as the kernel would; magic links
	 * only where the path was translated to the target's /proc entry. */
	int fd = openat2_path(base, p, O_PATH | O_DIRECTORY | O_CLOEXEC,
			      is_proc_target ? 0 : RESOLVE_NO_MAGICLINKS);
	return fd;
}

/* A final "." or "..": re-anchor on the directory itself, whose parent becomes the parent. */
static int reanchor_on_dir(struct resolved *r)
{
	_cleanup_close_ int dfd = openat(r->parent_fd, r->name, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return negative_errno();
	_cleanup_close_ int up = openat(dfd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (up < 0)
		return negative_errno();
	_cleanup_free_ char *real = NULL;
	int k = resolve_fd_real_path(dfd, &real);
	if (k < 0)
		return k;
	const char *slash = strrchr(real, '/');
	char *name = strdup(slash && slash[1] ? slash + 1 : ".");
	if (!name)
		return -ENOMEM;
	safe_close(r->parent_fd);
	r->parent_fd = TAKE_FD(up);
	free(r->name);
	r->name = name;
	return 0;
}

/* The content of the symlink r names, as the target means it (translate_self()), with the
 * trailing slash of the path that led to it kept. */
static int read_link_target(const struct resolve_ctx *ctx, const struct resolved *r,
			    struct strbuf *out)
{
	size_t lsz = MAX((size_t)r->st.st_size + 1, (size_t)64);
	if (lsz > BROKERED_PATH_MAX)
		return -ENAMETOOLONG;
	_cleanup_free_ char *target = malloc(lsz + 1);
	if (!target)
		return -ENOMEM;
	ssize_t n = readlinkat(r->parent_fd, r->name, target, lsz);
	if (n < 0)
		return negative_errno();
	if ((size_t)n >= lsz)
		return -ENAMETOOLONG;
	target[n] = '\0';
	if (n == 0)
		return -ENOENT;
	int k = translate_self(ctx->tid, target, out);
	if (k < 0)
		return k;
	return r->trailing_slash ? strbuf_appendc(out, '/') : 0;
}

static int resolve_path_once(const struct resolve_ctx *ctx, int dirfd, const char *path,
			     unsigned flags, struct resolved *ret)
{
	_cleanup_strbuf_ struct strbuf cur = STRBUF_INIT, dir = STRBUF_INIT, tmp = STRBUF_INIT;
	_cleanup_close_ int base = -1;
	int k;

	*ret = (struct resolved)RESOLVED_INIT;
	if (!*path)
		return -ENOENT;
	if (strlen(path) >= BROKERED_PATH_MAX)
		return -ENAMETOOLONG;
	k = translate_self(ctx->tid, path, &cur);
	if (k < 0)
		return k;
	if (cur.buf[0] != '/') {
		base = proc_open_dirfd(ctx->tid, dirfd, 0);
		if (base < 0)
			return base;
		if ((k = reopen_own(ctx, &base)) < 0)
			return k;
	}

	for (int hop = 0;; hop++) {
		bool trailing;
		char *name = NULL;
		k = split_path(cur.buf, &dir, &name, &trailing);
		if (k < 0)
			return k;
		int start = cur.buf[0] == '/' ? ctx->root_fd : base;
		bool proc_target = strncmp(cur.buf, "/proc/", 6) == 0;
		int pfd;
		/* A bare name: base is the parent (fill_real() checks that it is a directory). */
		if (start == base && dir.len == 0)
			pfd = TAKE_FD(base);
		else
			pfd = open_dir_part(start, strbuf_cstr(&dir), proc_target);
		if (pfd < 0) {
			free(name);
			resolved_done(ret);
			return pfd;
		}
		resolved_done(ret);
		ret->parent_fd = pfd;
		ret->name = name;
		ret->trailing_slash = hop == 0 ? trailing : ret->trailing_slash || trailing;

		if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
			if (!(flags & RESOLVE_ALLOW_DOTDOT))
				return -EINVAL;
			if ((k = reanchor_on_dir(ret)) < 0)
				return k;
		}

		k = fill_real(ret);
		if (k < 0)
			return k;
		if (strncmp(ret->parent_real, "/proc/", 6) == 0) {
			k = untranslate_own_proc(ctx->tid, ret->parent_real, ret->name, &tmp);
			if (k < 0)
				return k;
			if (k > 0) {
				if (hop >= MAX_SYMLINK_HOPS)
					return -ELOOP;
				strbuf_reset(&cur);
				if ((k = strbuf_append(&cur, tmp.buf, tmp.len)) < 0)
					return k;
				continue;
			}
		}
		if (fstatat(ret->parent_fd, ret->name, &ret->st, AT_SYMLINK_NOFOLLOW) == 0)
			ret->exists = true;
		else if (errno == ENOENT)
			ret->exists = false;
		else
			return negative_errno();

		bool follow = (flags & RESOLVE_FOLLOW) || ret->trailing_slash;
		if (!ret->exists || !S_ISLNK(ret->st.st_mode) || !follow)
			break;

		if (fd_on_procfs(ret->parent_fd))
			return resolve_magic(ctx, ret);
		if (hop >= MAX_SYMLINK_HOPS)
			return -ELOOP;

		/* Follow the symlink: resolve its target again from its directory. */
		if ((k = read_link_target(ctx, ret, &tmp)) < 0)
			return k;
		if (tmp.buf[0] != '/') {
			safe_close(base);
			base = TAKE_FD(ret->parent_fd);
		}
		strbuf_reset(&cur);
		if ((k = strbuf_append(&cur, tmp.buf, tmp.len)) < 0)
			return k;
	}

	if (ret->trailing_slash && ret->exists && !S_ISDIR(ret->st.st_mode))
		return -ENOTDIR;
	return 0;
}

int resolve_path(const struct resolve_ctx *ctx, int dirfd, const char *path, unsigned flags,
		 struct resolved *ret)
{
	int k = resolve_path_once(ctx, dirfd, path, flags, ret);
	/* Whatever was opened through /proc/TID (cwd, fd/N, /proc/self/...) was the target's only
	 * if its notification is still pending: a thread id freed meanwhile may name another
	 * process. */
	if (k >= 0 && proc_target_still_valid(ctx->notif) < 0)
		return -ESRCH;
	return k;
}

int resolve_target_fd(const struct resolve_ctx *ctx, int fd, struct resolved *ret)
{
	*ret = (struct resolved)RESOLVED_INIT;
	if (fd < 0)
		return -EBADF;
	int ofd = proc_open_dirfd(ctx->tid, fd, 0);
	if (ofd < 0)
		return ofd;
	ret->obj_fd = ofd;
	if (proc_target_still_valid(ctx->notif) < 0)
		return -ESRCH;
	if (fstat(ofd, &ret->st) < 0)
		return negative_errno();
	int k;
	if ((S_ISREG(ret->st.st_mode) || S_ISDIR(ret->st.st_mode)) &&
	    (k = reopen_own(ctx, &ret->obj_fd)) < 0)
		return k;
	ofd = ret->obj_fd;
	ret->exists = true;
	k = resolve_fd_real_path(ofd, &ret->real);
	if (k == -ENOENT)
		return 0;
	if (k < 0)
		return k;
	if (ret->st.st_nlink == 0 && !S_ISDIR(ret->st.st_mode)) {
		free(ret->real);
		ret->real = NULL;
	}
	return 0;
}
