/* SPDX-License-Identifier: MIT */
/*
 * The merge of a copy-on-write run (sandbox.copyOnWrite; sandbox.h): the command wrote the
 * workspace through an overlay, so every change it made is an entry of the overlay's upper layer.
 * When the command has ended (every process of it gone, the overlay unmounted with its
 * namespace), the broker applies them to the workspace, each decided by the policy, backed up
 * and logged as if the command had made it then:
 *
 *   upper entry                          workspace                 what the merge does
 *   whiteout (char device 0:0)           a file or a tree          removes it (UNLINK requests)
 *   directory, not opaque                a directory               merges into it; mode, owner
 *                                                                  (CHMOD/CHOWN requests), times
 *   directory, opaque or new             anything or nothing       removes what is there, then
 *                                                                  moves the new tree in
 *   anything else                        a file, or nothing        moves it over (pre-image
 *                                                                  first: kept by a link)
 *
 * Removals and metadata changes go through the common broker code (broker_handle_call) as host
 * operations: the same resolve, decide, before-change, trash mode and audit line as an
 * intercepted syscall. Creations and replacements are moved in from the upper layer by rename(2)
 * (same file system: the layer is made there), each decided (write), checked by the git guard
 * and recorded first. A new tree whose every path is allowed moves in with one rename after every
 * path in it is recorded; otherwise it is made directory by directory, without the refused paths.
 *
 * A refused change is left out and counted; a prompt is recorded for the approval that follows
 * the run, as for an intercepted call. The overlay's own extended attributes (trusted.overlay.*,
 * or user.overlay.* where a user namespace made it) are removed from what moves in. Set-ID bits are
 * dropped unless sandbox.allowSetid. Whatever could not be merged stays in the upper layer, which
 * the caller keeps then.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "basic/alloc-util.h"
#include "basic/fd-util.h"
#include "basic/fs-util.h"
#include "basic/kernel-compat.h"
#include "basic/macro.h"
#include "basic/path-util.h"
#include "basic/strbuf.h"
#include "broker-internal.h"
#include "policy.h"
#include "store.h"

/* The overlay's own extended attributes: trusted.overlay.* (made by root), user.overlay.* (made in
 * a user namespace, with userxattr) */
#define OVERLAY_XATTR_MAX    32
#define MERGE_REFUSED_LISTED 20

struct merge {
	struct broker *b;
	const char *xattr; /* the overlay's xattr prefix: "trusted.overlay." or "user.overlay." */
	/* the overlay was made in a user namespace, the merge runs without root: a directory the
	 * command left without rwx for its owner must be opened up to be read and filled */
	bool user_ns;
	struct broker_door door;
	struct broker_merge_result *res;
	int error; /* the first failure that left a change unmerged */
	/* directories the merge itself put in place (renamed ones and their parents): merged into
	 * even where the upper layer marks them opaque (the overlay marks the directories it makes)
	 */
	char **placed;
	size_t n_placed;
	/* a tree being kept whole: the policy's reason for each path allowed, in the order asked
	 * (which is the order of the records the store gives back) */
	const char **reasons;
	size_t n_reasons, cap_reasons;
};

static int note_placed(struct merge *m, const char *real)
{
	char **v = realloc(m->placed, (m->n_placed + 1) * sizeof *v);
	if (!v)
		return -ENOMEM;
	m->placed = v;
	if (!(v[m->n_placed] = strdup(real)))
		return -ENOMEM;
	m->n_placed++;
	return 0;
}

static bool was_placed(const struct merge *m, const char *real)
{
	for (size_t i = 0; i < m->n_placed; i++)
		if (strcmp(m->placed[i], real) == 0)
			return true;
	return false;
}

/* Is p strictly below dir? */
static bool strictly_under(const char *p, const char *dir)
{
	return path_is_under(p, dir) && strcmp(p, dir) != 0;
}

static bool placed_below(const struct merge *m, const char *real)
{
	for (size_t i = 0; i < m->n_placed; i++)
		if (strictly_under(m->placed[i], real))
			return true;
	return false;
}

static bool is_whiteout(const struct stat *st)
{
	return S_ISCHR(st->st_mode) && st->st_rdev == makedev(0, 0);
}

static void note_error(struct merge *m, int r)
{
	if (r < 0 && !m->error)
		m->error = r;
}

static void note_refused(struct merge *m, const char *real)
{
	struct broker_merge_result *res = m->res;
	res->refused++;
	if (res->n_listed >= MERGE_REFUSED_LISTED)
		return;
	char *p = strdup(real);
	if (p)
		res->listed[res->n_listed++] = p;
}

/* A request of the merge door: the broker's own process stands in for the ended command. */
static struct broker_req merge_req(enum broker_op op, const char *real)
{
	static pid_t self;
	if (!self)
		self = getpid();
	return (struct broker_req){
	    .op = op,
	    .tid = self,
	    .syscall_name = "merge",
	    .dirfd = AT_FDCWD,
	    .path = real,
	    .fd = -1,
	    .dirfd2 = AT_FDCWD,
	};
}

/* One request through the common broker code: 0 or -errno; a refusal is counted. */
static int merge_handle(struct merge *m, const struct broker_req *q)
{
	struct broker_resp resp;
	m->door.logged = false;
	broker_handle_call(m->b, &m->door, q, &resp);
	int r = resp.kind == BROKER_RESP_ERROR ? (resp.value < 0 ? (int)resp.value : -EIO) : 0;
	broker_resp_done(&resp);
	if (r < 0 && m->door.logged && refused(m->door.decision))
		note_refused(m, q->path);
	else /* a removal of what is gone already did what it should */
		note_error(m, r == -ENOENT && q->op == BROKER_OP_UNLINK ? 0 : r);
	return r;
}

/* The overlay's attribute called what (e.g. "impure"), under prefix (struct merge's xattr). */
static const char *ovl_xattr(char buf[static OVERLAY_XATTR_MAX], const char *prefix,
			     const char *what)
{
	snprintf(buf, OVERLAY_XATTR_MAX, "%s%s", prefix, what);
	return buf;
}

/* A user.* attribute takes write permission to remove, which root does not need: a file or
 * directory of ours without it (git's objects: 0444) is made writable for the removal. */
static int remove_unwritable(int dirfd, const char *name, const char *proc_path, const char *xattr)
{
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return negative_errno();
	if ((!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) || (st.st_mode & S_IWUSR) ||
	    st.st_uid != geteuid())
		return -EACCES;
	if (fchmodat(dirfd, name, (st.st_mode & 07777) | S_IWUSR, 0) < 0)
		return negative_errno();
	int r = lremovexattr(proc_path, xattr) < 0 && errno != ENODATA ? negative_errno() : 0;
	if (fchmodat(dirfd, name, st.st_mode & 07777, 0) < 0 && r >= 0)
		r = negative_errno();
	return r;
}

/* Remove the overlay's xattrs (prefix*) from dirfd/name (any type; symlinks through /proc). The
 * names are listed from dirfd (listxattrat(2), Linux 6.13), else through /proc: most entries have
 * none. ret_impure (may be NULL): whether it had "impure" (see dir_impure()). */
static int strip_overlay_xattrs(const char *prefix, int dirfd, const char *name, bool *ret_impure)
{
	static bool no_listxattrat;
	size_t plen = strlen(prefix);
	int r = 0;
	char p[64 + NAME_MAX];
	snprintf(p, sizeof p, "/proc/self/fd/%d/%s", dirfd, name);
	char buf[4096];
	ssize_t n = -1;
	if (ret_impure)
		*ret_impure = false;
	if (!no_listxattrat) {
		n = syscall(__NR_listxattrat, dirfd, name, AT_SYMLINK_NOFOLLOW, buf, sizeof buf);
		no_listxattrat = n < 0 && errno == ENOSYS;
	}
	if (no_listxattrat)
		n = llistxattr(p, buf, sizeof buf);
	if (n < 0)
		return errno == ENOTSUP ? 0 : negative_errno();
	for (ssize_t i = 0; i < n; i += (ssize_t)strlen(buf + i) + 1) {
		if (strncmp(buf + i, prefix, plen) != 0)
			continue;
		if (ret_impure && strcmp(buf + i + plen, "impure") == 0)
			*ret_impure = true;
		if (lremovexattr(p, buf + i) == 0 || errno == ENODATA)
			continue;
		if (errno != EACCES || (r = remove_unwritable(dirfd, name, p, buf + i)) < 0)
			return r < 0 ? r : negative_errno();
	}
	return 0;
}

/*
 * May an entry of the upper directory fd that is not a directory carry the overlay's xattrs? Only
 * one that has a copy-up origin does (metacopy and index are off, and the command cannot set
 * immutable or append-only), and the overlay marks the directory that holds such an entry
 * "impure" when it copies the entry up in it, or renames or links it in (its readdir needs the
 * mark). A directory without the mark holds none: its files need no look at their xattrs. An
 * error other than "no such attribute" says yes: each is looked at.
 */
static bool dir_impure(const char *prefix, int fd)
{
	char v[8], n[OVERLAY_XATTR_MAX];
	return fgetxattr(fd, ovl_xattr(n, prefix, "impure"), v, sizeof v) >= 0 ||
	       (errno != ENODATA && errno != ENOTSUP);
}

static enum git_guard_make make_kind(mode_t mode)
{
	return S_ISDIR(mode)   ? GIT_GUARD_MAKE_MKDIR
	       : S_ISREG(mode) ? GIT_GUARD_MAKE_FILE
			       : GIT_GUARD_MAKE_OTHER;
}

static enum broker_op make_op(mode_t mode)
{
	return S_ISDIR(mode)   ? BROKER_OP_MKDIR
	       : S_ISREG(mode) ? BROKER_OP_OPEN
	       : S_ISLNK(mode) ? BROKER_OP_SYMLINK
			       : BROKER_OP_MKNOD;
}

/* Drop set-ID bits the broker would not have let the command set (sandbox.allowSetid). */
static int strip_setid(struct merge *m, int up_fd, const char *name, const struct stat *ust)
{
	if (S_ISLNK(ust->st_mode))
		return 0;
	mode_t keep = broker_setid_strip(m->b, ust->st_mode & 07777, S_ISDIR(ust->st_mode));
	if (keep == (ust->st_mode & 07777))
		return 0;
	return fchmodat(up_fd, name, keep, 0) < 0 ? negative_errno() : 0;
}

/*
 * The decision on making real (a new path, or one replaced), logged, with its pre-image taken
 * when allowed: 1 allowed and recorded, 0 refused (counted), -errno. With moved, a regular file
 * replaced is moved into the store where it can be (*moved: ws_fd/name is free now).
 */
static int decide_make(struct merge *m, int ws_fd, const char *name, const char *real,
		       const struct stat *ust, const struct stat *wst, bool record, bool *moved)
{
	struct broker_req q = merge_req(make_op(ust->st_mode), real);
	if (S_ISLNK(ust->st_mode)) {
		q.path = NULL;
		q.path2 = real;
	}
	struct broker_call c;
	broker_call_begin(&c, m->b, &m->door, &q, NULL, "merge");
	c.log.real = real;
	const char *reason = NULL;
	enum decision d = broker_decide(&c, real, POLICY_ACCESS_WRITE, wst, &reason);
	c.log.decision = d;
	c.log.reason = reason;
	int r = refused(d) ? -EACCES : broker_check_git_guard(&c, real, make_kind(ust->st_mode));
	if (r >= 0 && record) {
		unsigned f = !wst ? 0 : moved ? STORE_REPLACE | STORE_MOVE : STORE_REPLACE;
		r = broker_before_change_st(&c, ws_fd, name, real, wst, f);
		if (moved)
			*moved = r > 0;
		r = MIN(r, 0);
	}
	broker_log_op(&c, r);
	broker_call_end(&c);
	if (r == -EACCES && refused(c.log.decision)) {
		note_refused(m, real);
		return 0;
	}
	if (r < 0)
		return r;
	return 1;
}

/* Would the policy let the command remove path (a tree kept whole asks for every path)? */
static bool removal_allowed(const char *path, const struct stat *st, void *userdata)
{
	struct merge *m = userdata;
	const char *reason = NULL;
	if (path_is_under(path, m->b->cfg.scratch) || broker_is_shm(m->b, path) ||
	    policy_check(m->b->policy, path, POLICY_ACCESS_DELETE, &reason) != POLICY_ALLOW)
		return false;
	if (ARRAY_GROW(m->reasons, m->cap_reasons, m->n_reasons, 256) < 0)
		return false; /* kept piece by piece instead */
	m->reasons[m->n_reasons++] = reason;
	return true;
}

/* Larger trees are kept a subtree at a time: their records are held in memory meanwhile. */
#define KEPT_TREE_MAX_PATHS 32768

/*
 * A directory removed with all it holds, moved into the store whole (store_keep_tree()) when the
 * policy allows every removal in it, and each removal logged as the common code would: 1 done,
 * 0 not kept whole (nothing changed), -errno.
 */
static int keep_tree(struct merge *m, int ws_fd, const char *name, const char *real,
		     const struct stat *st)
{
	struct store_tree_opts o = {
	    .allow = removal_allowed, .userdata = m, .max_entries = KEPT_TREE_MAX_PATHS};
	struct store_record *v;
	size_t n;
	m->n_reasons = 0;
	int r = broker_keep_tree(m->b, ws_fd, name, real, st, &o, &v, &n);
	if (r <= 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		struct broker_req q = merge_req(BROKER_OP_UNLINK, v[i].path);
		q.flags = v[i].kind == STORE_KIND_DIR ? AT_REMOVEDIR : 0;
		struct broker_call c;
		broker_call_begin(&c, m->b, &m->door, &q, NULL, "merge");
		c.log.real = v[i].path;
		c.log.decision = DECIDE_BROKER;
		c.log.reason = i < m->n_reasons ? m->reasons[i] : NULL;
		c.log.backup = "saved";
		broker_log_op(&c, 0);
		broker_call_end(&c);
	}
	store_records_free(v, n);
	return 1;
}

/* Remove what the workspace has at ws_fd/name (real), depth first: 1 if it is gone, 0 if a
 * refusal keeps it (or something below it), -errno. */
static int remove_tree(struct merge *m, int ws_fd, const char *name, const char *real,
		       unsigned depth)
{
	struct stat st;
	if (fstatat(ws_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 1 : negative_errno();
	if (depth > BROKER_TREE_MAX_DEPTH)
		return -ELOOP;
	if (S_ISDIR(st.st_mode) && m->door.delete_mode != BROKER_DELETE_TRASH) {
		int r = keep_tree(m, ws_fd, name, real, &st);
		if (r != 0)
			return r;
	}
	if (S_ISDIR(st.st_mode)) {
		DIR *d = opendir_at(ws_fd, name);
		if (!d)
			return negative_errno();
		struct dirent *de;
		int r = 0;
		bool kept = false;
		while (r >= 0 && (errno = 0, de = readdir(d))) {
			if (dot_or_dot_dot(de->d_name))
				continue;
			struct strbuf sb = STRBUF_INIT;
			r = path_join(real, de->d_name, &sb);
			if (r >= 0)
				r = remove_tree(m, dirfd(d), de->d_name, strbuf_cstr(&sb),
						depth + 1);
			strbuf_free(&sb);
			kept |= r == 0;
		}
		closedir(d);
		if (r < 0 || kept)
			return MIN(r, 0);
	}
	struct broker_req q = merge_req(BROKER_OP_UNLINK, real);
	q.flags = S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0;
	int r;
	if (m->door.delete_mode == BROKER_DELETE_TRASH) {
		/* The common unlink code: it knows the trash. */
		r = merge_handle(m, &q);
		if (r == 0 || r == -ENOENT)
			return 1;
		return m->door.logged && refused(m->door.decision) ? 0 : r;
	}
	/* As the common unlink code does, on the name just looked at (nobody races the merge in
	 * the sandbox: it is empty). */
	struct broker_call c;
	broker_call_begin(&c, m->b, &m->door, &q, NULL, "merge");
	c.log.real = real;
	const char *reason = NULL;
	enum decision d = broker_decide(&c, real, POLICY_ACCESS_DELETE, &st, &reason);
	c.log.decision = d;
	c.log.reason = reason;
	r = refused(d) ? -EACCES : 0;
	if (r >= 0)
		r = broker_before_change_st(&c, ws_fd, name, real, &st,
					    S_ISDIR(st.st_mode)	  ? STORE_CONSUME
					    : S_ISREG(st.st_mode) ? STORE_REPLACE
								  : 0);
	if (r >= 0 && unlinkat(ws_fd, name, q.flags) < 0)
		r = negative_errno();
	broker_log_op(&c, r);
	broker_call_end(&c);
	if (r >= 0)
		return 1;
	if (r == -EACCES && refused(d)) {
		note_refused(m, real);
		return 0;
	}
	return r;
}

/* Remove what the workspace's directory ws_fd/name (real) has, but what the merge placed there and
 * the directories on their way: 1 done, 0 a refusal kept something, -errno. */
static int clear_but_placed(struct merge *m, int ws_fd, const char *name, const char *real,
			    unsigned depth)
{
	if (depth > BROKER_TREE_MAX_DEPTH)
		return -ELOOP;
	DIR *d = opendir_at(ws_fd, name);
	if (!d)
		return negative_errno();
	struct dirent *de;
	int r = 1;
	while (r >= 0 && (errno = 0, de = readdir(d))) {
		if (dot_or_dot_dot(de->d_name))
			continue;
		struct strbuf sb = STRBUF_INIT;
		int k = path_join(real, de->d_name, &sb);
		if (k >= 0 && !was_placed(m, strbuf_cstr(&sb)))
			k = placed_below(m, strbuf_cstr(&sb))
				? clear_but_placed(m, dirfd(d), de->d_name, strbuf_cstr(&sb),
						   depth + 1)
				: remove_tree(m, dirfd(d), de->d_name, strbuf_cstr(&sb), depth + 1);
		strbuf_free(&sb);
		if (k < 0)
			r = k;
		else if (k == 0)
			r = 0;
	}
	closedir(d);
	return r;
}

/* Would every path of the new tree at up_fd/name be allowed, and is none set-ID? */
/*
 * The upper layer's directory up_fd/name (ust: its stat), opened to be read. Without root one that
 * the command left without rwx for its owner is given them first: the layer is ours, and what
 * the workspace gets is ust's mode, set after the directory is filled. An fd, or -1 with errno.
 */
static int open_upper_dir(const struct merge *m, int up_fd, const char *name,
			  const struct stat *ust)
{
	if (m->user_ns && (ust->st_mode & S_IRWXU) != S_IRWXU &&
	    fchmodat(up_fd, name, (ust->st_mode & 07777) | S_IRWXU, 0) < 0)
		return -1;
	return openat(up_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

static int tree_allowed(struct merge *m, int up_fd, const char *name, const char *real,
			unsigned depth)
{
	struct stat st;
	if (fstatat(up_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return negative_errno();
	if (depth > BROKER_TREE_MAX_DEPTH || is_whiteout(&st))
		return 0;
	if (!S_ISLNK(st.st_mode) && broker_setid_strip(m->b, st.st_mode & 07777,
						       S_ISDIR(st.st_mode)) != (st.st_mode & 07777))
		return 0;
	const char *reason;
	if (policy_check(m->b->policy, real, POLICY_ACCESS_WRITE, &reason) != POLICY_ALLOW ||
	    !git_guard_name_allowed(real, make_kind(st.st_mode)))
		return 0;
	if (!S_ISDIR(st.st_mode))
		return 1;
	/* Without root a directory that is not rwx for us is made and filled, not moved whole
	 * (reading it and moving it take those rights). */
	if (m->user_ns && (st.st_mode & S_IRWXU) != S_IRWXU)
		return 0;
	DIR *d = opendir_at(up_fd, name);
	if (!d)
		return negative_errno();
	struct dirent *de;
	int r = 1;
	while (r > 0 && (de = readdir(d))) {
		if (dot_or_dot_dot(de->d_name))
			continue;
		struct strbuf sb = STRBUF_INIT;
		r = path_join(real, de->d_name, &sb);
		if (r >= 0)
			r = tree_allowed(m, dirfd(d), de->d_name, strbuf_cstr(&sb), depth + 1);
		strbuf_free(&sb);
	}
	closedir(d);
	return r;
}

/* Record (absent, logged) and clean every path below the new directory up_fd/name (impure: it
 * had the overlay's mark, dir_impure()). */
static int record_tree(struct merge *m, int up_fd, const char *name, const char *real,
		       unsigned depth, bool impure)
{
	DIR *d = opendir_at(up_fd, name);
	if (!d)
		return negative_errno();
	struct dirent *de;
	int r = 0;
	while (r >= 0 && (de = readdir(d))) {
		if (dot_or_dot_dot(de->d_name))
			continue;
		/* Only its type matters here (tree_allowed() looked at the rest): no lstat() when
		 * the directory entry says it. */
		struct stat st = {.st_mode = DTTOIF(de->d_type)};
		struct strbuf sb = STRBUF_INIT;
		r = path_join(real, de->d_name, &sb);
		if (r >= 0 && de->d_type == DT_UNKNOWN &&
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			r = negative_errno();
		bool sub_impure = false;
		if (r >= 0 && (impure || S_ISDIR(st.st_mode)))
			r = strip_overlay_xattrs(m->xattr, dirfd(d), de->d_name, &sub_impure);
		/* Below a directory that does not exist yet: recorded as absent, nothing to open.
		 */
		if (r >= 0) {
			r = decide_make(m, -1, de->d_name, strbuf_cstr(&sb), &st, NULL, false,
					NULL);
			if (r == 0)
				r = -EACCES; /* tree_allowed() said otherwise a moment ago */
		}
		if (r >= 0 && m->b->turn && m->b->cfg.backup_enabled)
			r = store_preimage_absent(m->b->turn, strbuf_cstr(&sb));
		if (r >= 0 && S_ISDIR(st.st_mode))
			r = record_tree(m, dirfd(d), de->d_name, strbuf_cstr(&sb), depth + 1,
					sub_impure);
		strbuf_free(&sb);
	}
	closedir(d);
	return r;
}

static int merge_dir(struct merge *m, int up_fd, int ws_fd, const char *real, unsigned depth);

/* A directory the workspace does not have at ws_fd/name: moved in whole, or made and filled. */
static int move_new_dir(struct merge *m, int up_fd, int ws_fd, const char *name, const char *real,
			const struct stat *ust, unsigned depth)
{
	int r = tree_allowed(m, up_fd, name, real, depth);
	if (r < 0)
		return r;
	if (r > 0) {
		bool impure;
		if ((r = strip_overlay_xattrs(m->xattr, up_fd, name, &impure)) < 0 ||
		    (r = decide_make(m, ws_fd, name, real, ust, NULL, true, NULL)) <= 0)
			return r;
		/* the records below it together, before the directory is in place */
		store_records_hold(m->b->turn);
		r = record_tree(m, up_fd, name, real, depth + 1, impure);
		int k = store_records_release(m->b->turn);
		if (r < 0 || (r = k) < 0)
			return r;
		if (renameat2(up_fd, name, ws_fd, name, RENAME_NOREPLACE) < 0)
			return negative_errno();
		m->res->changes++;
		/* the mode the command left, where open_upper_dir() gave us more */
		if (m->user_ns && (ust->st_mode & S_IRWXU) != S_IRWXU &&
		    fchmodat(ws_fd, name, ust->st_mode & 07777, 0) < 0)
			return negative_errno();
		return 0;
	}
	/* Something below is refused: the directory is made here, and what may be is merged. */
	if ((r = decide_make(m, ws_fd, name, real, ust, NULL, true, NULL)) <= 0)
		return r;
	if (mkdirat(ws_fd, name, 0700) < 0)
		return negative_errno();
	_cleanup_close_ int wfd =
	    openat(ws_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_close_ int ufd = open_upper_dir(m, up_fd, name, ust);
	if (wfd < 0 || ufd < 0)
		return negative_errno();
	m->res->changes++;
	if ((r = merge_dir(m, ufd, wfd, real, depth + 1)) < 0)
		return r;
	mode_t mode = broker_setid_strip(m->b, ust->st_mode & 07777, true);
	struct timespec t[2] = {ust->st_atim, ust->st_mtim};
	if (fchown(wfd, ust->st_uid, ust->st_gid) < 0 || fchmod(wfd, mode) < 0 ||
	    futimens(wfd, t) < 0)
		return negative_errno();
	return 0;
}

/* Mode and owner of a directory both have: CHMOD/CHOWN requests where they differ. */
static void merge_dir_meta(struct merge *m, const char *real, const struct stat *ust,
			   const struct stat *wst)
{
	if ((ust->st_mode & 07777) != (wst->st_mode & 07777)) {
		struct broker_req q = merge_req(BROKER_OP_CHMOD, real);
		q.mode = ust->st_mode & 07777;
		(void)merge_handle(m, &q);
	}
	if (ust->st_uid != wst->st_uid || ust->st_gid != wst->st_gid) {
		struct broker_req q = merge_req(BROKER_OP_CHOWN, real);
		q.uid = ust->st_uid;
		q.gid = ust->st_gid;
		(void)merge_handle(m, &q);
	}
}

static int merge_entry(struct merge *m, int up_fd, int ws_fd, const char *name, const char *real,
		       unsigned depth, bool up_impure)
{
	struct stat ust, wst;
	if (fstatat(up_fd, name, &ust, AT_SYMLINK_NOFOLLOW) < 0)
		return negative_errno();
	bool exists = fstatat(ws_fd, name, &wst, AT_SYMLINK_NOFOLLOW) == 0;
	if (!exists && errno != ENOENT)
		return negative_errno();
	int r;
	if (is_whiteout(&ust)) {
		if (exists && (r = remove_tree(m, ws_fd, name, real, depth)) > 0)
			m->res->changes++;
		return exists ? MIN(r, 0) : 0;
	}
	if (S_ISDIR(ust.st_mode)) {
		_cleanup_close_ int ufd = open_upper_dir(m, up_fd, name, &ust);
		if (ufd < 0)
			return negative_errno();
		char v[2], n[OVERLAY_XATTR_MAX];
		bool opaque = fgetxattr(ufd, ovl_xattr(n, m->xattr, "opaque"), v, sizeof v) == 1 &&
			      v[0] == 'y' && !was_placed(m, real);
		/* Made again by the command, but the merge moved renamed directories into it
		 * already: the old entries go, those stay, and the rest merges into it. */
		if (exists && S_ISDIR(wst.st_mode) && opaque && placed_below(m, real)) {
			if ((r = clear_but_placed(m, ws_fd, name, real, depth)) < 0)
				return r;
			opaque = false;
		}
		if (exists && S_ISDIR(wst.st_mode) && !opaque) {
			_cleanup_close_ int wfd =
			    openat(ws_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (wfd < 0)
				return negative_errno();
			/* Its mode and owner after what is in it: the command may have taken its
			 * own rights away once done there. Without root, one the workspace has
			 * without rwx for us is opened up meanwhile (the command gave them). */
			bool opened = m->user_ns && (wst.st_mode & S_IRWXU) != S_IRWXU &&
				      fchmod(wfd, (wst.st_mode & 07777) | S_IRWXU) == 0;
			r = merge_dir(m, ufd, wfd, real, depth + 1);
			if (opened)
				(void)fchmod(wfd, wst.st_mode & 07777);
			merge_dir_meta(m, real, &ust, &wst);
			if (r < 0)
				return r;
			/* The directory's times as the command left them (the merge's own
			 * changes in it moved them). */
			struct timespec t[2] = {ust.st_atim, ust.st_mtim};
			(void)futimens(wfd, t);
			return 0;
		}
		/* Replaced (rmdir and mkdir, or another type before): the old one goes first. */
		if (exists && (r = remove_tree(m, ws_fd, name, real, depth)) <= 0) {
			if (r < 0 || !S_ISDIR(wst.st_mode))
				return r;
			/* Part of the old tree is refused: what the command put there joins it. */
			_cleanup_close_ int wfd =
			    openat(ws_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			return wfd < 0 ? negative_errno() : merge_dir(m, ufd, wfd, real, depth + 1);
		}
		return move_new_dir(m, up_fd, ws_fd, name, real, &ust, depth);
	}
	if (exists && S_ISDIR(wst.st_mode)) {
		if ((r = remove_tree(m, ws_fd, name, real, depth)) <= 0) {
			if (r == 0)
				note_refused(m, real);
			return r;
		}
		exists = false;
	}
	bool moved = false;
	if ((r = strip_setid(m, up_fd, name, &ust)) < 0 ||
	    (r = decide_make(m, ws_fd, name, real, &ust, exists ? &wst : NULL, true, &moved)) <= 0)
		return r;
	if ((!up_impure || (r = strip_overlay_xattrs(m->xattr, up_fd, name, NULL)) >= 0) &&
	    renameat(up_fd, name, ws_fd, name) < 0)
		r = negative_errno();
	if (r < 0) {
		/* the change did not happen: the old file back in its place */
		if (moved)
			(void)broker_unkeep_file(m->b, ws_fd, name);
		return r;
	}
	m->res->changes++;
	return 0;
}

static int merge_dir(struct merge *m, int up_fd, int ws_fd, const char *real, unsigned depth)
{
	if (depth > BROKER_TREE_MAX_DEPTH)
		return -ELOOP;
	DIR *d = opendir_at(up_fd, ".");
	if (!d)
		return negative_errno();
	bool impure = dir_impure(m->xattr, up_fd);
	struct dirent *de;
	int r = 0;
	while ((errno = 0, de = readdir(d))) {
		if (dot_or_dot_dot(de->d_name))
			continue;
		struct strbuf sb = STRBUF_INIT;
		int k = path_join(real, de->d_name, &sb);
		if (k >= 0)
			k = merge_entry(m, up_fd, ws_fd, de->d_name, strbuf_cstr(&sb), depth,
					impure);
		strbuf_free(&sb);
		/* One change that failed leaves it in the upper layer; the others go on. */
		note_error(m, k);
		if (k == -ENOMEM)
			r = k;
	}
	if (errno)
		r = negative_errno();
	closedir(d);
	/* the records of the files kept by a move in it (store_keep_file()) */
	int k = store_records_release(m->b->turn);
	return r < 0 ? r : k;
}

/* ---- renamed directories (redirect_dir) ---- */

/* A directory the command renamed: the upper layer's target (relative to the workspace) names
 * the lower directory it came from. */
struct redirect {
	char *target, *source; /* source: as the lower layer had it, then where it was moved from */
	bool applied;	       /* moved: in rs.order, followed by moved_path() */
	bool exchange;	       /* ... by RENAME_EXCHANGE with what was at target */
	bool done;	       /* tried (whatever came of it), or brought into place by another */
};

struct redirects {
	struct redirect *v;
	size_t n;
	size_t *order; /* the applied ones, in the order applied */
	size_t n_order;
};

static void redirects_done(struct redirects *rs)
{
	for (size_t i = 0; i < rs->n; i++) {
		free(rs->v[i].target);
		free(rs->v[i].source);
	}
	free(rs->v);
	free(rs->order);
}

static int join_rel(const char *dir, const char *name, char **ret)
{
	return asprintf(ret, "%s%s%s", dir, *dir ? "/" : "", name) < 0 ? -ENOMEM : 0;
}

/* Walk the upper directory up_fd (at rel, whose lower directory is lower) for redirects, parents
 * before what is below them. */
static int collect_redirects(const char *prefix, int up_fd, const char *rel, const char *lower,
			     struct redirects *rs, unsigned depth)
{
	if (depth > BROKER_TREE_MAX_DEPTH)
		return -ELOOP;
	DIR *d = opendir_at(up_fd, ".");
	if (!d)
		return negative_errno();
	struct dirent *de;
	int r = 0;
	while (r >= 0 && (de = readdir(d))) {
		if (de->d_type != DT_DIR || dot_or_dot_dot(de->d_name))
			continue;
		_cleanup_close_ int fd =
		    openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			r = negative_errno();
			break;
		}
		char v[PATH_MAX], xn[OVERLAY_XATTR_MAX];
		ssize_t n = fgetxattr(fd, ovl_xattr(xn, prefix, "redirect"), v, sizeof v - 1);
		_cleanup_free_ char *crel = NULL, *clower = NULL;
		if ((r = join_rel(rel, de->d_name, &crel)) < 0)
			break;
		if (n > 0) {
			v[n] = 0;
			/* written by the overlay itself; still, nothing outside the workspace */
			if (strcmp(v, "..") == 0 || strncmp(v, "../", 3) == 0 ||
			    strstr(v, "/../") || (n >= 3 && strcmp(v + n - 3, "/..") == 0) ||
			    strchr(v, '\0') != v + n) {
				r = -EINVAL;
				break;
			}
			r = v[0] == '/' ? ((clower = strdup(v + 1)) ? 0 : -ENOMEM)
					: join_rel(lower, v, &clower);
			struct redirect *nv =
			    r < 0 ? NULL : realloc(rs->v, (rs->n + 1) * sizeof *nv);
			if (!nv) {
				r = -ENOMEM;
				break;
			}
			rs->v = nv;
			char *t = strdup(crel), *f = strdup(clower);
			if (!t || !f) {
				free(t);
				free(f);
				r = -ENOMEM;
				break;
			}
			rs->v[rs->n++] = (struct redirect){.target = t, .source = f};
		} else if ((r = join_rel(lower, de->d_name, &clower)) < 0) {
			break;
		}
		r = collect_redirects(prefix, fd, crel, clower, rs, depth + 1);
	}
	closedir(d);
	return r;
}

/* Where the lower path p is now, after the renames applied so far (malloc'd). */
static char *moved_path(const struct redirects *rs, const char *p)
{
	char *cur = strdup(p);
	for (size_t o = 0; cur && o < rs->n_order; o++) {
		const struct redirect *e = &rs->v[rs->order[o]];
		const char *from = e->source, *to = e->target;
		size_t fl = strlen(from), tl = strlen(to);
		char *moved = NULL;
		if (strncmp(cur, from, fl) == 0 && (!cur[fl] || cur[fl] == '/')) {
			if (asprintf(&moved, "%s%s", to, cur + fl) < 0)
				moved = NULL;
		} else if (e->exchange && strncmp(cur, to, tl) == 0 &&
			   (!cur[tl] || cur[tl] == '/')) {
			if (asprintf(&moved, "%s%s", from, cur + tl) < 0)
				moved = NULL;
		} else {
			continue;
		}
		free(cur);
		cur = moved;
	}
	return cur;
}

/*
 * The directories above rel (a renamed directory's destination) that the workspace does not have
 * yet are made there as the command made them (the upper layer's mode, owner), each decided and
 * recorded as a creation: the merge proper then merges into them.
 */
static int make_parents(struct merge *m, int upper_fd, const char *rel)
{
	const char *ws = m->b->cfg.workspace;
	for (const char *slash = strchr(rel, '/'); slash; slash = strchr(slash + 1, '/')) {
		_cleanup_free_ char *sub = strndup(rel, (size_t)(slash - rel)), *real = NULL,
				    *parent = NULL;
		if (!sub || asprintf(&real, "%s/%s", ws, sub) < 0)
			return -ENOMEM;
		struct stat wst, ust;
		if (fstatat(m->b->root_fd, real + 1, &wst, AT_SYMLINK_NOFOLLOW) == 0) {
			if (!S_ISDIR(wst.st_mode))
				return -ENOTDIR;
			continue;
		}
		if (errno != ENOENT)
			return negative_errno();
		if (fstatat(upper_fd, sub, &ust, AT_SYMLINK_NOFOLLOW) < 0)
			return negative_errno();
		const char *name = strrchr(real, '/') + 1;
		if (!(parent = strndup(real + 1, (size_t)(name - 1 - (real + 1)))))
			return -ENOMEM;
		_cleanup_close_ int pfd =
		    openat(m->b->root_fd, parent, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (pfd < 0)
			return negative_errno();
		int r = decide_make(m, pfd, name, real, &ust, NULL, true, NULL);
		if (r <= 0)
			return r < 0 ? r : -EACCES;
		if (mkdirat(pfd, name, 0700) < 0 ||
		    fchownat(pfd, name, ust.st_uid, ust.st_gid, AT_SYMLINK_NOFOLLOW) < 0 ||
		    fchmodat(pfd, name, broker_setid_strip(m->b, ust.st_mode & 07777, true), 0) < 0)
			return negative_errno();
		m->res->changes++;
		if ((r = note_placed(m, real)) < 0)
			return r;
	}
	return 0;
}

/* 1 if the destination of entry i holds, strictly below it, where another entry's source is now
 * (it must move out before the destination is cleared), or is that source itself while entry i's
 * source is inside its destination or the other way round (no exchange then); 0 if not,
 * -ENOMEM. */
static int pending_below(const struct redirects *rs, size_t i)
{
	_cleanup_free_ char *src = moved_path(rs, rs->v[i].source);
	if (!src)
		return -ENOMEM;
	const char *dest = rs->v[i].target;
	bool nested = strictly_under(src, dest) || strictly_under(dest, src);
	for (size_t k = 0; k < rs->n; k++) {
		if (k == i || rs->v[k].done || rs->v[k].applied)
			continue;
		_cleanup_free_ char *ks = moved_path(rs, rs->v[k].source);
		if (!ks)
			return -ENOMEM;
		if (strictly_under(ks, dest) || (nested && strcmp(ks, dest) == 0))
			return 1;
	}
	return 0;
}

/* Rename the workspace's src (relative) to a name of its own next to near (src, or the directory
 * it is in that is about to be cleared), through the common rename code (the name is recorded as
 * absent, so undo leaves nothing there); *ret: the new relative name. */
static int step_aside(struct merge *m, const char *src, const char *near, size_t i, char **ret)
{
	const char *ws = m->b->cfg.workspace, *slash = strrchr(near, '/');
	_cleanup_free_ char *from = NULL, *to = NULL, *rel = NULL;
	if (asprintf(&rel, "%.*s%s.brokered-merge-%d-%zu", slash ? (int)(slash - near) : 0, near,
		     slash ? "/" : "", (int)getpid(), i) < 0 ||
	    asprintf(&from, "%s/%s", ws, src) < 0 || asprintf(&to, "%s/%s", ws, rel) < 0)
		return -ENOMEM;
	struct broker_req q = merge_req(BROKER_OP_RENAME, from);
	q.path2 = to;
	q.flags = RENAME_NOREPLACE;
	int r = merge_handle(m, &q);
	if (r != 0)
		return r < 0 ? r : -EACCES;
	*ret = TAKE_PTR(rel);
	return 0;
}

/*
 * Move each renamed directory into place in the workspace before the merge proper (whose
 * whiteout at the old name then finds nothing to remove), through the common rename code: the
 * source's tree recorded, the destination's paths recorded as absent. A source that an earlier
 * rename moved is followed. Two directories that swapped names are exchanged (RENAME_EXCHANGE);
 * what the workspace had at a destination otherwise is removed first (backed up), as the overlay
 * hid it.
 */
static int apply_redirects(struct merge *m, int upper_fd)
{
	/* An overlay made in a user namespace records no renamed directory (no redirect_dir with
	 * userxattr: such a rename fails with EXDEV), and its layer need not be walked for them. */
	if (m->user_ns)
		return 0;
	struct redirects rs = {0};
	int r = collect_redirects(m->xattr, upper_fd, "", "", &rs, 0);
	const char *ws = m->b->cfg.workspace;
	if (rs.n && !(rs.order = calloc(rs.n, sizeof *rs.order)))
		r = -ENOMEM;
	/* Passes: an entry whose destination still holds, below it, the source of another entry
	 * waits for that one to move out; when a pass moves nothing, the rest go anyway. */
	bool progress = true, patient = true;
	for (size_t i = 0; r >= 0; i++) {
		if (i == rs.n) {
			if (!progress && !patient)
				break;
			patient = progress;
			progress = false;
			i = SIZE_MAX; /* the loop's i++ makes it 0 */
			continue;
		}
		if (rs.v[i].done || rs.v[i].applied)
			continue;
		int w = patient ? pending_below(&rs, i) : 0;
		if (w < 0) {
			r = w;
			break;
		}
		if (w > 0)
			continue;
		progress = true;
		/* tried once, whatever comes of it (a failure is counted) */
		rs.v[i].done = true;
		_cleanup_free_ char *src = moved_path(&rs, rs.v[i].source);
		_cleanup_free_ char *from = NULL, *to = NULL;
		if (!src || asprintf(&from, "%s/%s", ws, src) < 0 ||
		    asprintf(&to, "%s/%s", ws, rs.v[i].target) < 0) {
			r = -ENOMEM;
			break;
		}
		/* Already where it belongs: moved back, or a rename that failed after the overlay
		 * had written the redirect (onto a file: ENOTDIR) left one naming the directory
		 * itself. */
		if (strcmp(src, rs.v[i].target) == 0) {
			if ((r = note_placed(m, to)) < 0)
				break;
			continue;
		}
		/* One inside the other (`mv a/sub s && rm -rf a && mv s a`, `mv a x && mkdir a &&
		 * mv x a/x`): the source steps aside to a name of its own first. */
		bool aside_used = false;
		if (strictly_under(src, rs.v[i].target) || strictly_under(rs.v[i].target, src)) {
			_cleanup_free_ char *aside = NULL;
			struct stat dst;
			if (placed_below(m, to) &&
			    fstatat(m->b->root_fd, to + 1, &dst, AT_SYMLINK_NOFOLLOW) == 0) {
				note_error(m, -EEXIST); /* as below: left to the upper layer */
				continue;
			}
			aside_used = true;
			if (step_aside(m, src,
				       strictly_under(src, rs.v[i].target) ? rs.v[i].target : src,
				       i, &aside) < 0)
				continue; /* counted */
			free(from);
			if (asprintf(&from, "%s/%s", ws, aside) < 0) {
				r = -ENOMEM;
				break;
			}
		}
		struct broker_req q = merge_req(BROKER_OP_RENAME, from);
		q.path2 = to;
		q.flags = RENAME_NOREPLACE;
		int pk = make_parents(m, upper_fd, rs.v[i].target);
		if (pk < 0) {
			note_error(m, pk);
			continue;
		}
		/* The workspace has something at the destination. If it is the source of an entry
		 * still to move (a swap, a rotation, a cycle), the two are exchanged: this one is
		 * in place, and that one moves on later from here (or is in place too: a swap).
		 * Else it is what the overlay hid: removed (backed up). */
		struct stat st;
		bool occupied = false;
		if (fstatat(m->b->root_fd, to + 1, &st, AT_SYMLINK_NOFOLLOW) == 0) {
			for (size_t k = 0; k < rs.n && !occupied; k++) {
				if (k == i || rs.v[k].done || rs.v[k].applied)
					continue;
				_cleanup_free_ char *ks = moved_path(&rs, rs.v[k].source);
				if (!ks) {
					r = -ENOMEM;
					break;
				}
				/* (not after a step aside: the exchange would leave the other one
				 * under that name, which the renames followed do not know) */
				occupied = !aside_used && strcmp(ks, rs.v[i].target) == 0;
			}
			if (r < 0)
				break;
			if (occupied) {
				q.flags = RENAME_EXCHANGE;
			} else if (placed_below(m, to)) {
				/* What an earlier rename of the merge put there would go with it:
				 * left to the upper layer (125), not removed. */
				note_error(m, -EEXIST);
				continue;
			} else if (remove_tree(m, m->b->root_fd, to + 1, to, 0) <= 0) {
				continue; /* refused or failed: counted, the rename would fail */
			}
		}
		if (merge_handle(m, &q) != 0)
			continue;
		m->res->changes++;
		if ((r = note_placed(m, to)) < 0)
			break;
		/* later sources below it are followed from its new place */
		free(rs.v[i].source);
		rs.v[i].source = TAKE_PTR(src);
		rs.v[i].applied = true;
		rs.v[i].exchange = occupied;
		rs.order[rs.n_order++] = i;
		/* an entry the exchange brought to its own destination is done (a swap) */
		for (size_t k = 0; occupied && r >= 0 && k < rs.n; k++) {
			if (rs.v[k].done || rs.v[k].applied)
				continue;
			_cleanup_free_ char *ks = moved_path(&rs, rs.v[k].source);
			if (!ks)
				r = -ENOMEM;
			else if (strcmp(ks, rs.v[k].target) == 0 && (r = note_placed(m, from)) >= 0)
				rs.v[k].done = true;
		}
	}
	redirects_done(&rs);
	return r;
}

int broker_merge(struct broker *b, int upper_fd, bool user_xattrs, struct broker_merge_result *ret)
{
	*ret = (struct broker_merge_result){0};
	struct merge m = {
	    .b = b,
	    .xattr = user_xattrs ? "user.overlay." : "trusted.overlay.",
	    .user_ns = user_xattrs,
	    .door = {.b = b,
		     .host = true,
		     .phase = "merge",
		     .extra = "door=copy-on-write",
		     .delete_mode = b->delete_mode},
	    .res = ret,
	};
	_cleanup_close_ int ws_fd =
	    openat(b->root_fd, b->cfg.workspace + 1, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (b->cfg.workspace[0] != '/' || ws_fd < 0)
		return ws_fd < 0 ? negative_errno() : -EINVAL;
	/* The workspace's own mode and owner, which its upper layer started with (the overlay
	 * shows the upper root's): as the command left them. */
	struct stat ust, wst;
	if (fstat(upper_fd, &ust) == 0 && fstat(ws_fd, &wst) == 0)
		merge_dir_meta(&m, b->cfg.workspace, &ust, &wst);
	int r = apply_redirects(&m, upper_fd);
	if (r >= 0)
		r = merge_dir(&m, upper_fd, ws_fd, b->cfg.workspace, 0);
	free(m.door.real);
	free(m.door.real_to);
	for (size_t i = 0; i < m.n_placed; i++)
		free(m.placed[i]);
	free(m.placed);
	free(m.reasons);
	if (r < 0)
		return r;
	return m.error;
}

void broker_merge_result_done(struct broker_merge_result *r)
{
	for (size_t i = 0; i < r->n_listed; i++)
		free(r->listed[i]);
	*r = (struct broker_merge_result){0};
}
