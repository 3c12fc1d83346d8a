/* SPDX-License-Identifier: MIT */
/*
 * The broker's syscall operations (DESIGN section 2): one function per enum broker_op. Each
 * resolves the path as the target would, decides, takes the pre-image and performs the call on
 * fds, filling the per-call context (what it resolved, what the audit line says) and the answer.
 * Both doors come here: the seccomp door's notifications and the socket door's requests.
 */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "basic/fd-util.h"
#include "basic/fs-util.h"
#include "basic/macro.h"
#include "basic/path-util.h"
#include "basic/stat-util.h"
#include "basic/strbuf.h"
#include "broker-internal.h"
#include "git-guard.h"
#include "policy.h"
#include "store.h"
#include "trash.h"

/* Decide on real for the call: -EACCES if refused; 1 if the kernel may run it (the answer is
 * CONTINUE); 0 if the broker performs it. */
static int decide_op(struct broker_call *c, const char *real, unsigned access,
		     const struct stat *st)
{
	c->log.decision = broker_decide(c, real, access, st, &c->log.reason);
	if (refused(c->log.decision))
		return -EACCES;
	if (c->log.decision == DECIDE_KERNEL) {
		c->resp->kind = BROKER_RESP_CONTINUE;
		return 1;
	}
	return 0;
}

/* Answer with fd, installed in the target (with O_CLOEXEC if the call asked for it). */
static void answer_fd(struct broker_call *c, int fd)
{
	c->resp->kind = BROKER_RESP_FD;
	c->resp->fd = fd;
	c->resp->cloexec = c->q->flags & O_CLOEXEC;
}

/*
 * Record the pre-image of the file st describes by its real path (an fd form, a magic link: there
 * is no resolved name); with record false, only check the name. A name that no longer holds that
 * file (renamed meanwhile) is no backup: -EACCES, never change it unbacked.
 */
static int before_change_by_name(struct broker_call *c, const char *real, const struct stat *st,
				 unsigned flags, bool record)
{
	_cleanup_free_ char *parent = NULL;
	const char *name;
	if (!real || path_split(real, &parent, &name) < 0)
		return -EACCES;
	_cleanup_close_ int pfd = open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct stat now;
	if (pfd < 0 || fstatat(pfd, name, &now, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !stat_inode_same(&now, st))
		return -EACCES;
	return record ? broker_before_change(c, pfd, name, real, flags) : 0;
}

/* ---- open ---- */

static int open_tmpfile(struct broker_call *c)
{
	const struct broker_req *q = c->q;
	struct resolved *res = &c->res;
	struct resolve_ctx ctx = broker_call_resolve_ctx(c);
	int r = resolve_path(&ctx, q->dirfd, q->path, RESOLVE_FOLLOW | RESOLVE_ALLOW_DOTDOT, res);
	if (r < 0)
		return r;
	c->log.real = res->real;
	if (!res->exists)
		return -ENOENT;
	if (!S_ISDIR(res->st.st_mode))
		return -ENOTDIR;
	/* An unnamed file in the directory: decide as for a new file in it (its name, if it gets
	 * one, is checked by linkat); "#tmpfile" cannot be a protected name. */
	_cleanup_strbuf_ struct strbuf child = STRBUF_INIT;
	if (path_join(res->real, "#tmpfile", &child) < 0)
		return -ENOMEM;
	if ((r = decide_op(c, child.buf, POLICY_ACCESS_WRITE, NULL)) != 0)
		return r < 0 ? r : 0;
	_cleanup_close_ int dfd =
	    openat(res->parent_fd, res->name, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return negative_errno();
	int fd = WITH_UMASK_0(
	    openat(dfd, ".", (int)(q->flags | O_CLOEXEC | O_NOCTTY), broker_create_mode(c, false)));
	if (fd < 0)
		return negative_errno();
	answer_fd(c, fd);
	return 0;
}

/* Open an existing non-regular file in the broker's zone without ever blocking. */
static int open_special(int parent_fd, const char *name, int flags)
{
	int fd = openat(parent_fd, name, flags | O_NONBLOCK | O_NOFOLLOW);
	if (fd < 0)
		return negative_errno();
	if (!(flags & O_NONBLOCK))
		(void)fd_nonblock(fd, false);
	return fd;
}

/* The flags the broker opens an existing file with on the target's behalf. */
static int open_flags(const struct broker_req *q)
{
	return (int)((q->flags & ~(uint64_t)(O_CREAT | O_EXCL)) | O_CLOEXEC | O_NOCTTY);
}

/* A magic link (/proc/PID/fd/N, /dev/stdout, ...): decide on what it names. */
static int open_magic(struct broker_call *c)
{
	const struct broker_req *q = c->q;
	struct resolved *res = &c->res;
	if (!S_ISREG(res->st.st_mode) && !S_ISDIR(res->st.st_mode)) {
		c->log.decision = DECIDE_KERNEL;
		c->log.reason = "magic-link";
		c->resp->kind = BROKER_RESP_CONTINUE;
		return 0;
	}
	if (S_ISDIR(res->st.st_mode))
		return -EISDIR;
	int r = decide_op(c, res->real, POLICY_ACCESS_WRITE, &res->st);
	if (r != 0)
		return r < 0 ? r : 0;
	/* Back up by the file's own name, then reopen the object itself. */
	r = before_change_by_name(c, res->real, &res->st, 0,
				  (q->flags & O_ACCMODE) != O_RDONLY || (q->flags & O_TRUNC));
	if (r < 0)
		return r;
	int fd = open(FORMAT_PROC_FD_PATH(res->obj_fd), open_flags(q));
	if (fd < 0)
		return negative_errno();
	answer_fd(c, fd);
	return 0;
}

static void created_remember(struct broker_call *c, int fd, const struct resolved *res);

/* O_CREAT of a name that does not exist. 1: created meanwhile by someone else, resolve again. */
static int open_create(struct broker_call *c)
{
	const struct broker_req *q = c->q;
	struct resolved *res = &c->res;
	if (!(q->flags & O_CREAT))
		return -ENOENT;
	if (res->trailing_slash)
		return -EISDIR;
	int r = broker_check_git_guard(c, res->real, GIT_GUARD_MAKE_FILE);
	if (r < 0)
		return r;
	if ((r = decide_op(c, res->real, POLICY_ACCESS_WRITE, NULL)) != 0)
		return r < 0 ? r : 0;
	r = broker_before_change_res(c, res, 0);
	if (r < 0)
		return r;
	int fd = WITH_UMASK_0(
	    openat(res->parent_fd, res->name,
		   (int)(q->flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY),
		   broker_create_mode(c, false)));
	if (fd < 0) {
		/* Created meanwhile (from outside the sandbox): open the existing file again,
		 * unless this very call recorded the path as absent; then the file would be
		 * changed with no backup. Fail closed. */
		if (errno == EEXIST && !(q->flags & O_EXCL) && !c->log.absent)
			return 1;
		return negative_errno();
	}
	created_remember(c, fd, res);
	answer_fd(c, fd);
	c->resp->created_parent_fd = TAKE_FD(res->parent_fd);
	c->resp->created_name = TAKE_PTR(res->name);
	return 0;
}

/* A FIFO, device or socket: opened without blocking the broker. */
static int open_existing_special(struct broker_call *c, int oflags)
{
	struct resolved *res = &c->res;
	if (S_ISDIR(res->st.st_mode))
		return -EISDIR;
	int fd = open_special(res->parent_fd, res->name, oflags);
	if (fd == -ENXIO && S_ISFIFO(res->st.st_mode) && !(c->q->flags & O_NONBLOCK)) {
		/* Natively this blocks until a reader comes; the broker must not. */
		fd = openat(res->parent_fd, res->name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return negative_errno();
		answer_fd(c, fd);
		c->resp->kind = BROKER_RESP_DEFER;
		c->resp->defer_flags = oflags & ~O_NOFOLLOW;
		return 0;
	}
	if (fd < 0)
		return fd;
	answer_fd(c, fd);
	return 0;
}

/* An existing name. 1: replaced meanwhile, resolve again. */
static int open_existing(struct broker_call *c)
{
	const struct broker_req *q = c->q;
	struct resolved *res = &c->res;
	if ((q->flags & O_CREAT) && (q->flags & O_EXCL))
		return -EEXIST;
	if (S_ISLNK(res->st.st_mode))
		return -ELOOP; /* O_NOFOLLOW on a symlink */
	int r = decide_op(c, res->real, POLICY_ACCESS_WRITE, &res->st);
	if (r != 0)
		return r < 0 ? r : 0;
	int oflags = open_flags(q) | O_NOFOLLOW;
	if (!S_ISREG(res->st.st_mode))
		return open_existing_special(c, oflags);
	if ((q->flags & O_ACCMODE) != O_RDONLY || (q->flags & O_TRUNC)) {
		r = broker_before_change_res(c, res, 0);
		if (r < 0)
			return r;
	}
	int fd = openat(res->parent_fd, res->name, oflags);
	if (fd < 0)
		return errno == ELOOP || errno == ENOENT ? 1 : negative_errno();
	struct stat st;
	if (fstat(fd, &st) == 0 && !stat_inode_same(&st, &res->st)) {
		close(fd);
		return 1;
	}
	answer_fd(c, fd);
	return 0;
}

static int do_open(struct broker_call *c)
{
	const struct broker_req *q = c->q;
	c->log.phase = "notify-open";
	if ((q->flags & O_TMPFILE) == O_TMPFILE)
		return open_tmpfile(c);

	bool creat = q->flags & O_CREAT, excl = q->flags & O_EXCL;
	unsigned rflags = (creat && excl) || (q->flags & O_NOFOLLOW) ? 0 : RESOLVE_FOLLOW;
	rflags |= RESOLVE_ALLOW_DOTDOT;
	struct resolve_ctx ctx = broker_call_resolve_ctx(c);
	for (int attempt = 0; attempt < 8; attempt++) {
		resolved_done(&c->res);
		int r = resolve_path(&ctx, q->dirfd, q->path, rflags, &c->res);
		if (r < 0)
			return r;
		c->log.real = c->res.real;
		if (c->res.obj_fd >= 0)
			return open_magic(c);
		r = c->res.exists ? open_existing(c) : open_create(c);
		if (r != 1)
			return r;
	}
	return -EAGAIN;
}

/* ---- truncate ---- */

static int do_truncate(struct broker_call *c)
{
	const struct broker_req *q = c->q;
	struct resolved *res = &c->res;
	struct resolve_ctx ctx = broker_call_resolve_ctx(c);
	int r = resolve_path(&ctx, q->dirfd, q->path, RESOLVE_FOLLOW, res);
	if (r < 0)
		return r;
	c->log.real = res->real;
	if (!res->exists)
		return -ENOENT;
	if (S_ISDIR(res->st.st_mode))
		return -EISDIR;
	if (!S_ISREG(res->st.st_mode))
		return -EINVAL;
	if ((int64_t)q->length < 0)
		return -EINVAL;
	if ((r = decide_op(c, res->real, POLICY_ACCESS_WRITE, &res->st)) != 0)
		return r < 0 ? r : 0;
	_cleanup_close_ int fd = -1;
	if (res->obj_fd >= 0) {
		fd = open(FORMAT_PROC_FD_PATH(res->obj_fd), O_WRONLY | O_CLOEXEC | O_NONBLOCK);
	} else {
		fd = openat(res->parent_fd, res->name,
			    O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	}
	if (fd < 0)
		return negative_errno();
	if (res->parent_fd >= 0) {
		r = broker_before_change_res(c, res, 0);
		if (r < 0)
			return r;
	}
	if (ftruncate(fd, (off_t)q->length) < 0)
		return negative_errno();
	set_value(c->resp, 0);
	return 0;
}

/* ---- unlink / rmdir ---- */

int broker_trash_move(struct broker_call *c, struct resolved *res, char **ret_trashed)
{
	bool isdir = S_ISDIR(res->st.st_mode);
	/* Not consumed: the file lives on in the trash, so the store copies it (a tree with it). */
	int r = broker_before_change_res(c, res, isdir ? STORE_TREE : 0);
	if (r < 0)
		return r;
	broker_created_forget(c->b); /* a path goes */
	return trash_put_at(res->parent_fd, res->name, res->real, ret_trashed);
}

static int do_unlink(struct broker_call *c)
{
	const struct broker_req *q = c->q;
	struct resolved *res = &c->res;
	bool rmdir_ = q->flags & AT_REMOVEDIR;
	broker_created_forget(c->b); /* a path goes */
	struct resolve_ctx ctx = broker_call_resolve_ctx(c);
	int r = resolve_path(&ctx, q->dirfd, q->path, 0, res);
	if (r < 0)
		return r;
	c->log.real = res->real;
	if (!strcmp(res->name, "."))
		return -EINVAL;
	if (!strcmp(res->name, ".."))
		return -ENOTEMPTY;
	if (!res->exists)
		return -ENOENT;
	bool isdir = S_ISDIR(res->st.st_mode);
	if (rmdir_ && !isdir)
		return -ENOTDIR;
	if (!rmdir_ && isdir)
		return -EISDIR;
	if (!rmdir_ && res->trailing_slash)
		return -ENOTDIR;
	if ((r = decide_op(c, res->real, POLICY_ACCESS_DELETE, &res->st)) != 0)
		return r < 0 ? r : 0;
	/* Only an empty directory can go; don't record a pre-image for a refusal (one that cannot
	 * be read is left to rmdir's own error). */
	if (rmdir_ && dir_is_empty_at(res->parent_fd, res->name) == 0)
		return -ENOTEMPTY;
	enum broker_delete_mode mode = c->door ? c->door->delete_mode : c->b->delete_mode;
	if (mode == BROKER_DELETE_TRASH && !rmdir_) {
		/* Configured to trash deletes: a file system without a trash falls back to unlink.
		 */
		r = broker_trash_move(c, res, NULL);
		if (r != -EXDEV) {
			if (r < 0)
				return r;
			set_value(c->resp, 0);
			return 0;
		}
	}
	/* A file is kept by a hard link in the store (no copy), recorded and flushed, and only
	 * then unlinked here: a broker killed at any point leaves it either in place or in the
	 * store with its record. */
	unsigned f = rmdir_ ? STORE_CONSUME : S_ISREG(res->st.st_mode) ? STORE_REPLACE : 0;
	r = broker_before_change_res(c, res, f);
	if (r < 0)
		return r;
	if (unlinkat(res->parent_fd, res->name, rmdir_ ? AT_REMOVEDIR : 0) < 0)
		return negative_errno();
	set_value(c->resp, 0);
	return 0;
}

/* ---- rename ---- */

/*
 * A directory renamed brings every path of its tree into being below the destination. Those paths
 * did not exist (or were recorded already): record them as absent, or undo would restore a
 * destination directory the turn had (re)made and leave what the rename put in it.
 */
static int record_tree_arrivals(struct broker *b, int src_dirfd, const char *src_name,
				const char *dst_real, int depth)
{
	if (depth > 256)
		return -ELOOP;
	DIR *d = opendir_at(src_dirfd, src_name);
	if (!d)
		return errno == ENOTDIR ? 0 : negative_errno();
	int r = 0;
	struct dirent *de;
	struct strbuf sb = STRBUF_INIT;
	while (r >= 0 && (de = readdir(d))) {
		if (dot_or_dot_dot(de->d_name))
			continue;
		strbuf_reset(&sb);
		if ((r = path_join(dst_real, de->d_name, &sb)) < 0)
			break;
		if ((r = store_preimage_absent(b->turn, sb.buf)) < 0)
			break;
		if (de->d_type == DT_DIR || de->d_type == DT_UNKNOWN) {
			_cleanup_free_ char *child = strdup(sb.buf);
			r = child ? record_tree_arrivals(b, dirfd(d), de->d_name, child, depth + 1)
				  : -ENOMEM;
		}
	}
	strbuf_free(&sb);
	closedir(d);
	return r;
}

/* The kernel's rules that need no policy, checked before any pre-image is taken: a rename that
 * fails after the target was linked into the store would leave it sharing its inode with it. */
static int rename_check_names(const struct broker_req *q, const struct resolved *src,
			      const struct resolved *dst)
{
	if (!src->exists)
		return -ENOENT;
	if (dot_or_dot_dot(src->name) || dot_or_dot_dot(dst->name))
		return -EBUSY;
	bool exchange = q->flags & RENAME_EXCHANGE;
	if ((q->flags & RENAME_NOREPLACE) && dst->exists)
		return -EEXIST;
	if (exchange && !dst->exists)
		return -ENOENT;
	if (!exchange && dst->exists && !stat_inode_same(&src->st, &dst->st)) {
		bool sdir = S_ISDIR(src->st.st_mode), ddir = S_ISDIR(dst->st.st_mode);
		if (sdir && !ddir)
			return -ENOTDIR;
		if (!sdir && ddir)
			return -EISDIR;
		if (src->st.st_dev != dst->st.st_dev)
			return -EXDEV;
	}
	return 0;
}

/* More of the kernel's rules, once policy allowed the rename and before any record: a directory
 * goes only onto an empty one (one that cannot be read counts as not empty: fail closed), and
 * not below itself (its tree would be recorded as arriving where it cannot). */
static int rename_check_dirs(const struct broker_req *q, const struct resolved *src,
			     const struct resolved *dst)
{
	if (!(q->flags & RENAME_EXCHANGE) && dst->exists && S_ISDIR(dst->st.st_mode) &&
	    S_ISDIR(src->st.st_mode) && !stat_inode_same(&src->st, &dst->st) &&
	    dir_is_empty_at(dst->parent_fd, dst->name) <= 0)
		return -ENOTEMPTY;
	if (S_ISDIR(src->st.st_mode) && path_is_under(dst->real, src->real) &&
	    strcmp(dst->real, src->real) != 0)
		return -EINVAL;
	return 0;
}

/* The git guard, then the policy on both names: delete on the source, write on the target
 * (exchange: both on both). 0 with *ret_d1 and *ret_d2, or -EACCES. */
static int rename_decide(struct broker_call *c, enum decision *ret_d1, enum decision *ret_d2)
{
	const struct resolved *src = &c->res, *dst = &c->res2;
	bool exchange = c->q->flags & RENAME_EXCHANGE;
	int r = broker_check_git_guard(c, dst->real,
				       git_guard_make_renamed(src->real, src->st.st_mode));
	if (r < 0)
		return r;
	if (exchange && (r = broker_check_git_guard(
			     c, src->real, git_guard_make_renamed(dst->real, dst->st.st_mode))) < 0)
		return r;
	unsigned both = POLICY_ACCESS_WRITE | POLICY_ACCESS_DELETE;
	const char *reason2 = NULL;
	enum decision d1 = broker_decide(c, src->real, exchange ? both : POLICY_ACCESS_DELETE,
					 &src->st, &c->log.reason);
	enum decision d2 = broker_decide(c, dst->real, exchange ? both : POLICY_ACCESS_WRITE,
					 dst->exists ? &dst->st : NULL, &reason2);
	if (refused(d1) || refused(d2)) {
		c->log.decision = refused(d1) ? d1 : d2;
		if (!refused(d1))
			c->log.reason = reason2;
		return -EACCES;
	}
	*ret_d1 = d1;
	*ret_d2 = d2;
	return 0;
}

/*
 * Pre-images: the source lives on under the new name, so it is copied (a directory with its whole
 * tree); the replaced target is recorded as well. Nothing is consumed: if the rename fails after
 * this, both names are untouched.
 */
static int rename_record(struct broker_call *c, enum decision d1, enum decision d2)
{
	struct broker *b = c->b;
	struct resolved *src = &c->res, *dst = &c->res2;
	bool exchange = c->q->flags & RENAME_EXCHANGE;
	int r;
	if (d1 == DECIDE_BROKER) {
		r = broker_before_change_res(c, src, S_ISDIR(src->st.st_mode) ? STORE_TREE : 0);
		if (r < 0)
			return r;
	}
	if (d2 == DECIDE_BROKER) {
		unsigned f = exchange && dst->exists && S_ISDIR(dst->st.st_mode) ? STORE_TREE : 0;
		/* A file renamed over is gone from its name once the rename lands: the store may
		 * keep the file itself rather than a copy (sed -i, mv over). */
		if (!exchange && dst->exists && S_ISREG(dst->st.st_mode))
			f |= STORE_REPLACE;
		r = broker_before_change_res(c, dst, f);
		if (r < 0)
			return r;
	}
	if (!b->turn || !b->cfg.backup_enabled)
		return 0;
	/* What a directory brings under its new name did not exist there (exchange: both ways);
	 * after both pre-images, so that a tree recorded in full keeps its records. */
	if (d2 == DECIDE_BROKER && S_ISDIR(src->st.st_mode) &&
	    (r = record_tree_arrivals(b, src->parent_fd, src->name, dst->real, 0)) < 0)
		return r;
	if (d1 == DECIDE_BROKER && exchange && S_ISDIR(dst->st.st_mode) &&
	    (r = record_tree_arrivals(b, dst->parent_fd, dst->name, src->real, 0)) < 0)
		return r;
	return 0;
}

static int do_rename(struct broker_call *c)
{
	const struct broker_req *q = c->q;
	struct resolved *src = &c->res, *dst = &c->res2;
	struct resolve_ctx ctx = broker_call_resolve_ctx(c);
	int r = resolve_path(&ctx, q->dirfd, q->path, 0, src);
	if (r < 0)
		return r;
	c->log.real = src->real;
	r = resolve_path(&ctx, q->dirfd2, q->path2, 0, dst);
	if (r < 0)
		return r;
	c->log.real_to = dst->real;
	c->log.to = q->path2;
	if ((r = rename_check_names(q, src, dst)) < 0)
		return r;
	enum decision d1, d2;
	if ((r = rename_decide(c, &d1, &d2)) < 0)
		return r;
	broker_created_forget(c->b); /* paths move */
	if (d1 == DECIDE_KERNEL && d2 == DECIDE_KERNEL) {
		c->log.decision = DECIDE_KERNEL;
		c->resp->kind = BROKER_RESP_CONTINUE;
		return 0;
	}
	c->log.decision = DECIDE_BROKER;
	if ((r = rename_check_dirs(q, src, dst)) < 0 || (r = rename_record(c, d1, d2)) < 0)
		return r;
	if (renameat2(src->parent_fd, src->name, dst->parent_fd, dst->name, (unsigned)q->flags) < 0)
		return negative_errno();
	set_value(c->resp, 0);
	return 0;
}

/* ---- mkdir, mknod, symlink: creations ---- */

/* Resolve and decide a new name dirfd/path into c->res and record its absence: 0 to go on, 1 if
 * the kernel may create it (CONTINUE), or -errno. */
static int create_common(struct broker_call *c, int dirfd, const char *path)
{
	const struct broker_req *q = c->q;
	struct resolved *res = &c->res;
	struct resolve_ctx ctx = broker_call_resolve_ctx(c);
	/* "mkdir /", "mkdir ." name an existing directory: EEXIST, as the kernel says. */
	int r = resolve_path(&ctx, dirfd, path, RESOLVE_ALLOW_DOTDOT, res);
	if (r < 0)
		return r;
	c->log.real = res->real;
	if (res->exists)
		return -EEXIST;
	if (res->trailing_slash && q->op != BROKER_OP_MKDIR)
		return q->op == BROKER_OP_SYMLINK ? -ENOENT : -EISDIR;
	r = broker_check_git_guard(
	    c, res->real, q->op == BROKER_OP_MKDIR ? GIT_GUARD_MAKE_MKDIR : GIT_GUARD_MAKE_OTHER);
	if (r < 0)
		return r;
	if ((r = decide_op(c, res->real, POLICY_ACCESS_WRITE, NULL)) != 0)
		return r;
	return broker_before_change_res(c, res, 0);
}

static int do_mkdir(struct broker_call *c)
{
	struct resolved *res = &c->res;
	int r = create_common(c, c->q->dirfd, c->q->path);
	if (r != 0)
		return r < 0 ? r : 0;
	if (WITH_UMASK_0(mkdirat(res->parent_fd, res->name, broker_create_mode(c, true))) < 0)
		return negative_errno();
	set_value(c->resp, 0);
	return 0;
}

static int do_mknod(struct broker_call *c)
{
	struct resolved *res = &c->res;
	mode_t type = c->q->mode & S_IFMT;
	if (type == S_IFCHR || type == S_IFBLK)
		return -EPERM; /* a device node in the workspace would open the raw device */
	if (type != 0 && type != S_IFREG && type != S_IFIFO && type != S_IFSOCK)
		return -EINVAL;
	int r = create_common(c, c->q->dirfd, c->q->path);
	if (r != 0)
		return r < 0 ? r : 0;
	if (WITH_UMASK_0(mknodat(res->parent_fd, res->name,
				 broker_create_mode(c, false) | (type ? type : S_IFREG), 0)) < 0)
		return negative_errno();
	set_value(c->resp, 0);
	return 0;
}

static int do_symlink(struct broker_call *c)
{
	const struct broker_req *q = c->q;
	if (!q->symlink_target || !*q->symlink_target)
		return -ENOENT;
	c->log.to = q->symlink_target;
	int r = create_common(c, q->dirfd2, q->path2);
	if (r != 0)
		return r < 0 ? r : 0;
	if (symlinkat(q->symlink_target, c->res.parent_fd, c->res.name) < 0)
		return negative_errno();
	set_value(c->resp, 0);
	return 0;
}

/* ---- link ---- */

/* A hard link gives a second name to the same inode: the source (c->res2) must be writable by
 * policy too, or a protected file could be written through its new name in the workspace. */
static enum decision link_decide_source(struct broker_call *c)
{
	const struct resolved *src = &c->res2;
	const char *reason = NULL;
	enum decision sd = src->real
			       ? broker_decide(c, src->real, POLICY_ACCESS_WRITE, &src->st, &reason)
			       : DECIDE_BROKER;
	/* a second name of a git config file would change it unseen by the git guard */
	if (src->real && git_guard_classify(src->real) == GIT_GUARD_CONFIG)
		sd = DECIDE_DENY, reason = "protected:git";
	if (refused(sd)) {
		c->log.decision = sd;
		c->log.reason = reason;
		c->log.real = src->real;
	}
	return sd;
}

static int do_link(struct broker_call *c)
{
	const struct broker_req *q = c->q;
	struct resolved *res = &c->res, *src = &c->res2;
	struct resolve_ctx ctx = broker_call_resolve_ctx(c);
	int r;
	if (q->at_empty_path)
		r = resolve_target_fd(&ctx, q->dirfd, src);
	else
		r = resolve_path(&ctx, q->dirfd, q->path,
				 (q->flags & AT_SYMLINK_FOLLOW) ? RESOLVE_FOLLOW : 0, src);
	if (r < 0)
		return r;
	if (!src->exists)
		return -ENOENT;
	if (S_ISDIR(src->st.st_mode))
		return -EPERM;
	enum decision sd = link_decide_source(c);
	if (refused(sd))
		return -EACCES;
	r = create_common(c, q->dirfd2, q->path2);
	c->log.to = q->path2;
	c->log.real_to = res->real;
	if (r != 0)
		return r < 0 ? r : 0;
	/* The source's inode gets a second name, and whatever is done to it through that name is
	 * done to the source: record the source now, or undo would remove the name and leave the
	 * source changed. */
	if (sd == DECIDE_BROKER && S_ISREG(src->st.st_mode) && src->st.st_nlink > 0 && src->real &&
	    src->parent_fd >= 0 && src->name && src->obj_fd < 0) {
		r = broker_before_change(c, src->parent_fd, src->name, src->real, 0);
		if (r < 0)
			return r;
	}
	if (src->obj_fd >= 0) {
		r = linkat(AT_FDCWD, FORMAT_PROC_FD_PATH(src->obj_fd), res->parent_fd, res->name,
			   AT_SYMLINK_FOLLOW);
	} else {
		assert(src->parent_fd >= 0 && src->name); /* resolved by its parent and name */
		r = linkat(src->parent_fd, src->name, res->parent_fd, res->name, 0);
	}
	if (r < 0)
		return negative_errno();
	set_value(c->resp, 0);
	return 0;
}

/* ---- the files created last: their fd-form metadata calls found without /proc ---- */

/*
 * untar and sed -i follow each file they create with fd-form metadata calls (futimens, fchown,
 * fchmod, fsetxattr) on the fd the broker installed. The broker keeps its own reference to the
 * last few of those open files and the path it created each at: kcmp(KCMP_FILE) tells in one call
 * that the target's fd is that very open file, where resolving it through /proc took four (open
 * /proc/TID/fd/N, check the notification, stat, read our fd's link), each a costly round trip on
 * a paravirtualised guest. A path changes only by a rename or an unlink, and every one in the
 * sandbox is brokered: each forgets them all. (A file renamed by a process outside the sandbox is
 * not seen: its path is then the one it was created at.)
 */
static void created_clear(struct broker_created *e)
{
	e->fd = safe_close(e->fd);
	free(e->real);
	e->real = NULL;
}

void broker_created_forget(struct broker *b)
{
	for (size_t i = 0; i < BROKER_CREATED_MAX; i++)
		if (b->created[i].fd >= 0)
			created_clear(&b->created[i]);
}

/* Remember the file just created at res for the target, fd being what it will get. */
static void created_remember(struct broker_call *c, int fd, const struct resolved *res)
{
	struct broker *b = c->b;
	if (c->door || !c->q->notif || !res->real || b->no_kcmp)
		return;
	struct broker_created *e = &b->created[b->created_next];
	created_clear(e);
	e->tfd = -1;
	e->real = strdup(res->real);
	if (!e->real || (e->fd = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0) {
		created_clear(e);
		return;
	}
	b->created_next = (b->created_next + 1) % BROKER_CREATED_MAX;
}

/*
 * The target got the file created last as its fd target_fd: remember the number, and forget the
 * files it had under that number before (closed since, that fd is another file now), so that a
 * call on an fd is compared (kcmp) with one file at most, not with all.
 */
void broker_note_installed(struct broker *b, const struct broker_resp *resp, int target_fd)
{
	struct broker_created *last =
	    &b->created[(b->created_next + BROKER_CREATED_MAX - 1) % BROKER_CREATED_MAX];
	if (!resp->created_name || last->fd < 0 || last->tfd >= 0)
		return; /* not a creation, or one not remembered */
	for (size_t i = 0; i < BROKER_CREATED_MAX; i++)
		if (&b->created[i] != last && b->created[i].fd >= 0 &&
		    b->created[i].tfd == target_fd)
			created_clear(&b->created[i]);
	last->tfd = target_fd;
}

/*
 * The remembered file that the target's fd tfd is: res filled as resolve_target_fd() fills it,
 * its obj_fd borrowed (c->res_open). 1 found, 0 not (resolve it through /proc), -errno. The
 * notification is not checked again: a tid reused since the target was killed could only name
 * the same open file, and the call's answer then goes nowhere.
 */
static int created_find(struct broker_call *c, int tfd, struct resolved *res)
{
	struct broker *b = c->b;
	if (c->door || !c->q->notif)
		return 0;
	for (unsigned k = 1; k <= BROKER_CREATED_MAX; k++) { /* the newest first */
		struct broker_created *e =
		    &b->created[(b->created_next + BROKER_CREATED_MAX - k) % BROKER_CREATED_MAX];
		if (e->fd < 0 || e->tfd != tfd)
			continue;
		long same = syscall(SYS_kcmp, b->pid, c->q->tid, KCMP_FILE, e->fd, tfd);
		if (same < 0) { /* not an fd of the target, or no kcmp: /proc answers */
			if (errno == ENOSYS) {
				b->no_kcmp = true;
				broker_created_forget(b);
			}
			return 0;
		}
		if (same != 0)
			continue;
		if (fstat(e->fd, &res->st) < 0)
			return negative_errno();
		if (res->st.st_nlink == 0) /* removed from outside: /proc answers */
			return 0;
		if (!(res->real = strdup(e->real)))
			return -ENOMEM;
		res->obj_fd = e->fd;
		res->exists = true;
		c->res_open = true;
		return 1;
	}
	return 0;
}

/* ---- metadata: chmod, chown, utimes, xattrs ---- */

static int resolve_meta(struct broker_call *c, bool follow)
{
	const struct broker_req *q = c->q;
	struct resolve_ctx ctx = broker_call_resolve_ctx(c);
	if (q->fd >= 0 || q->at_empty_path) {
		int tfd = q->fd >= 0 ? q->fd : q->dirfd;
		int r = created_find(c, tfd, &c->res);
		if (r != 0)
			return r < 0 ? r : 0;
		return resolve_target_fd(&ctx, tfd, &c->res);
	}
	return resolve_path(&ctx, q->dirfd, q->path,
			    (follow ? RESOLVE_FOLLOW : 0) | RESOLVE_ALLOW_DOTDOT, &c->res);
}

/* Resolve and decide a metadata call. */
static int meta_decide(struct broker_call *c, bool follow)
{
	const struct broker_req *q = c->q;
	struct resolved *res = &c->res;
	struct op_log *l = &c->log;
	int r = resolve_meta(c, follow);
	if (r < 0)
		return r;
	l->real = res->real;
	if (!res->exists)
		return -ENOENT;
	if (res->obj_fd >= 0 && !res->real) {
		/* Pipes, sockets, unlinked files: nothing on disk to protect or back up, and
		 * Landlock does not see metadata calls — allow only where nothing is named. */
		l->decision = DECIDE_BROKER;
		l->reason = "unnamed";
	} else {
		l->decision =
		    broker_decide(c, res->real, POLICY_ACCESS_METADATA, &res->st, &l->reason);
		if (refused(l->decision))
			return -EACCES;
		/* Landlock does not cover metadata calls; the broker performs them everywhere. */
		if (l->decision == DECIDE_KERNEL)
			l->decision = DECIDE_BROKER;
	}
	if (q->op == BROKER_OP_CHMOD && !follow && S_ISLNK(res->st.st_mode))
		return -EOPNOTSUPP;
	/* A symlink is backed up and changed by its name; an fd of one (O_PATH) has none. */
	if (S_ISLNK(res->st.st_mode) && !res->name)
		return -EOPNOTSUPP;
	/* Set-ID bits the file does not have yet: refused, named files and unnamed ones alike (an
	 * O_TMPFILE made setuid would keep the bits when linked in). */
	if (q->op == BROKER_OP_CHMOD && (q->mode & SETID_BITS & ~res->st.st_mode) &&
	    broker_setid_strip(c->b, q->mode, S_ISDIR(res->st.st_mode)) != q->mode) {
		l->reason = "setid";
		return -EPERM;
	}
	return 0;
}

/* The pre-image of a metadata call's object, outside the scratch dir. */
static int meta_before_change(struct broker_call *c)
{
	struct broker *b = c->b;
	struct resolved *res = &c->res;
	if (!res->real || path_is_under(res->real, b->cfg.scratch))
		return 0;
	if (res->parent_fd >= 0 && res->name)
		return broker_before_change_res(c, res, STORE_METADATA);
	if (res->obj_fd < 0 || !S_ISREG(res->st.st_mode))
		return 0;
	if (store_preimage_recorded(b->turn, res->real) && b->cfg.backup_enabled) {
		/* fd form on a file this turn has recorded already (one it created, say: tar's
		 * futimens, fchmod, fchown after each file): nothing to back up, no name to look
		 * up; but a record of the current batch is not flushed yet. */
		if (b->batch && b->batch_dirty)
			return -EINPROGRESS;
		c->log.backup = "already";
		return 0;
	}
	/* fd form on a named file: back it up by its name. */
	int r = before_change_by_name(c, res->real, &res->st, STORE_METADATA, true);
	if (r < 0 && !c->log.backup)
		c->log.backup = "failed";
	return r;
}

static int do_meta(struct broker_call *c)
{
	const struct broker_req *q = c->q;
	struct resolved *res = &c->res;
	int r = meta_decide(c, !(q->flags & AT_SYMLINK_NOFOLLOW));
	if (r < 0)
		return r;
	/* The object to act on: a path through our own fd of it (res owns a magic link's). */
	_cleanup_close_ int own_fd = -1;
	int ofd = res->obj_fd;
	if (ofd < 0) {
		own_fd = openat(res->parent_fd, res->name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		ofd = own_fd;
		struct stat st;
		if (ofd >= 0 && (fstat(ofd, &st) < 0 || !stat_inode_same(&st, &res->st)))
			return -EAGAIN;
	}
	if (ofd < 0)
		return negative_errno();
	char p[PROC_FD_PATH_MAX];
	format_proc_fd_path(p, ofd);
	const struct proc_fd_at at = proc_fd_at(ofd);
	if ((r = meta_before_change(c)) < 0)
		return r;

	const struct timespec *times = q->times_now ? NULL : q->times;
	/* (An open file of ours, res_open, is acted on directly, not through /proc.) */
	switch (q->op) {
	case BROKER_OP_CHMOD:
		if (c->res_open)
			r = fchmod(ofd, q->mode & 07777);
		else if (S_ISLNK(res->st.st_mode))
			r = fchmodat(res->parent_fd, res->name, q->mode, AT_SYMLINK_NOFOLLOW);
		else
			r = fchmodat(at.dirfd, at.name, q->mode & 07777, 0);
		break;
	case BROKER_OP_CHOWN:
		r = fchownat(ofd, "", q->uid, q->gid, AT_EMPTY_PATH);
		break;
	case BROKER_OP_UTIMES:
		if (c->res_open)
			r = futimens(ofd, times);
		else if (S_ISLNK(res->st.st_mode))
			r = utimensat(res->parent_fd, res->name, times, AT_SYMLINK_NOFOLLOW);
		else
			r = utimensat(at.dirfd, at.name, times, 0);
		break;
	case BROKER_OP_SETXATTR:
		r = c->res_open
			? fsetxattr(ofd, q->xattr_name, q->xattr_value, q->xattr_size,
				    q->xattr_flags)
			: setxattr(p, q->xattr_name, q->xattr_value, q->xattr_size, q->xattr_flags);
		break;
	case BROKER_OP_REMOVEXATTR:
		r = c->res_open ? fremovexattr(ofd, q->xattr_name) : removexattr(p, q->xattr_name);
		break;
	default:
		return -ENOSYS;
	}
	if (r < 0)
		return negative_errno();
	set_value(c->resp, 0);
	return 0;
}

/* ---- dispatch ---- */

static int (*const operations[_BROKER_OP_MAX])(struct broker_call *c) = {
    [BROKER_OP_OPEN] = do_open,	       [BROKER_OP_TRUNCATE] = do_truncate,
    [BROKER_OP_UNLINK] = do_unlink,    [BROKER_OP_RENAME] = do_rename,
    [BROKER_OP_MKDIR] = do_mkdir,      [BROKER_OP_MKNOD] = do_mknod,
    [BROKER_OP_LINK] = do_link,	       [BROKER_OP_SYMLINK] = do_symlink,
    [BROKER_OP_CHMOD] = do_meta,       [BROKER_OP_CHOWN] = do_meta,
    [BROKER_OP_UTIMES] = do_meta,      [BROKER_OP_SETXATTR] = do_meta,
    [BROKER_OP_REMOVEXATTR] = do_meta,
};

int broker_ops_perform(struct broker_call *c)
{
	enum broker_op op = c->q->op;
	if ((unsigned)op >= _BROKER_OP_MAX || !operations[op])
		return -ENOSYS;
	return operations[op](c);
}
