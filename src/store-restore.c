/* SPDX-License-Identifier: MIT */
/*
 * Restore and undo: put the paths a turn touched back to their pre-images.
 *
 * Planning reads the store and lstat()s the paths; applying works on fds only: every parent is
 * opened component by component with O_NOFOLLOW (a symlink anywhere in a recorded path, which
 * was a real path, means the tree changed: refuse), files are written to a temp file next to the
 * target and renamed over it. Every change is first recorded with store_preimage() into a new
 * turn, so a restore can itself be undone.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/fs-util.h"
#include "basic/macro.h"
#include "basic/path-util.h"
#include "basic/strbuf.h"
#include "store-internal.h"
#include "store.h"

const char *store_action_to_string(enum store_action a)
{
	switch (a) {
	case STORE_ACTION_NONE:
		return "unchanged";
	case STORE_ACTION_REMOVE:
		return "remove";
	case STORE_ACTION_CREATE:
		return "create";
	case STORE_ACTION_REPLACE:
		return "replace";
	case STORE_ACTION_META:
		return "metadata";
	case STORE_ACTION_COVERED:
		return "covered";
	case STORE_ACTION_LOST:
		return "not restorable";
	}
	return "?";
}

/* ---- directories locked against their owner ---- */

/* Give the owner rwx on every directory of theirs on the way to path's parent that lacks it, so a
 * restore can see and change what is inside. Best effort: what stays locked fails later with
 * EACCES, as it would have. */
static void unlock_ancestors(struct store_plan *p, const char *path)
{
	_cleanup_free_ char *parent = NULL;
	const char *name;
	if (path_split(path, &parent, &name) < 0)
		return;
	_cleanup_free_ char *walked = malloc(strlen(parent) + 2);
	int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (!walked || fd < 0) {
		safe_close(fd);
		return;
	}
	walked[0] = '\0';
	char *save = NULL;
	for (char *c = strtok_r(parent, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		strcat(strcat(walked, "/"), c);
		struct stat st;
		if (!path_component_valid(c) || fstatat(fd, c, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISDIR(st.st_mode))
			break;
		if ((st.st_mode & S_IRWXU) != S_IRWXU && st.st_uid == geteuid()) {
			struct store_unlocked *nv =
			    reallocarray(p->unlocked, p->n_unlocked + 1, sizeof *nv);
			char *dup = strdup(walked);
			if (nv)
				p->unlocked = nv;
			if (!nv || !dup || fchmodat(fd, c, (st.st_mode | S_IRWXU) & 07777, 0) < 0) {
				free(dup);
				break;
			}
			p->unlocked[p->n_unlocked++] =
			    (struct store_unlocked){.path = dup, .mode = st.st_mode & 07777};
		}
		int nfd = openat(fd, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		safe_close(fd);
		if (nfd < 0)
			return;
		fd = nfd;
	}
	safe_close(fd);
}

/* lstat() that unlocks the way when a locked directory of the user's is in it; st_mode is the
 * mode the path had before any unlocking. */
static int lstat_unlocking(struct store_plan *p, const char *path, struct stat *st)
{
	if (!p->look && store_gone_new(&p->look) < 0)
		return -1;
	int r = store_gone_lstat(p->look, path, st);
	if (r == -EACCES) {
		unlock_ancestors(p, path);
		r = store_gone_lstat(p->look, path, st);
	}
	if (r < 0)
		return -1;
	for (size_t i = 0; i < p->n_unlocked; i++)
		if (strcmp(p->unlocked[i].path, path) == 0)
			st->st_mode = (st->st_mode & S_IFMT) | p->unlocked[i].mode;
	return 0;
}

static int open_parent(const char *path, const char **ret_name);

/* chmod a directory by a path walked without following symlinks. */
static int chmod_dir(const char *path, mode_t mode)
{
	const char *name;
	_cleanup_close_ int pfd = open_parent(path, &name);
	struct stat st;
	if (pfd < 0)
		return pfd;
	if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return negative_errno();
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	return fchmodat(pfd, name, mode, 0) < 0 ? negative_errno() : 0;
}

/* Give back the modes of unlocked directories, deepest first. */
static void relock_all(struct store_plan *p)
{
	for (size_t i = p->n_unlocked; i-- > 0;) {
		(void)chmod_dir(p->unlocked[i].path, p->unlocked[i].mode);
		free(p->unlocked[i].path);
	}
	free(p->unlocked);
	p->unlocked = NULL;
	p->n_unlocked = 0;
}

void store_plan_free(struct store_plan *p)
{
	if (!p)
		return;
	relock_all(p);
	store_gone_free(p->look);
	for (size_t i = 0; i < p->n_items; i++)
		store_record_done(&p->items[i].pre);
	free(p->items);
	free(p->turn_id);
	free(p);
}

static int cmp_record_path(const void *key, const void *elem)
{
	return strcmp(key, ((const struct store_record *)elem)->path);
}

static const struct store_record *find_record(const struct store_record *v, size_t n,
					      const char *path)
{
	return n ? bsearch(path, v, n, sizeof *v, cmp_record_path) : NULL;
}

static int cmp_item_path(const void *key, const void *elem)
{
	return strcmp(key, ((const struct store_plan_item *)elem)->pre.path);
}

static struct store_plan_item *find_item(struct store_plan *p, const char *path)
{
	return p->n_items ? bsearch(path, p->items, p->n_items, sizeof *p->items, cmp_item_path)
			  : NULL;
}

/* ---- planning ---- */

static bool selected(const char *path, char *const *paths, size_t n)
{
	if (n == 0)
		return true;
	for (size_t i = 0; i < n; i++)
		if (path_is_under(path, paths[i]))
			return true;
	return false;
}

/* An ancestor directory of a selected path that is gone now must come back first. */
static bool needed_ancestor(struct store_plan *p, const struct store_record *r, char *const *paths,
			    size_t n)
{
	struct stat st;
	if (r->kind != STORE_KIND_DIR)
		return false;
	if (!p->look && store_gone_new(&p->look) < 0)
		return false;
	if (store_gone_lstat(p->look, r->path, &st) >= 0 && S_ISDIR(st.st_mode))
		return false;
	for (size_t i = 0; i < n; i++)
		if (path_is_under(paths[i], r->path))
			return true;
	return false;
}

static int plan_select(struct store_plan *p, struct store_record *v, size_t n, char *const *paths,
		       size_t n_paths)
{
	p->items = calloc(n ? n : 1, sizeof *p->items);
	if (!p->items)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if (!selected(v[i].path, paths, n_paths) &&
		    !needed_ancestor(p, &v[i], paths, n_paths))
			continue;
		p->items[p->n_items++].pre = v[i];
		v[i] = (struct store_record){0};
	}
	return 0;
}

/* Is the regular file at path exactly the pre-image (metadata, then content)? */
static bool file_matches(struct store *s, const char *turn_id, const struct store_record *pre,
			 const struct stat *st)
{
	struct store_record cur = {0};
	store_record_from_stat(&cur, st);
	if (cur.size != pre->size || cur.mode != pre->mode || cur.mtime_ns != pre->mtime_ns ||
	    cur.uid != pre->uid || cur.gid != pre->gid)
		return false;
	/* a kept tree's file: the very inode (its move never happened), or the same bytes */
	if (pre->tree) {
		if ((uint64_t)st->st_ino == pre->ino)
			return true;
		_cleanup_close_ int a = store_record_content_open(s, turn_id, pre);
		_cleanup_close_ int b =
		    open(pre->path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		return a >= 0 && b >= 0 && fd_equal_contents(a, b) > 0;
	}
	_cleanup_close_ int fd = open(pre->path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	char hash[65];
	return fd >= 0 && store_hash_fd(fd, hash) >= 0 && strcmp(hash, pre->hash) == 0;
}

static bool target_matches(const char *path, const char *target)
{
	size_t n = strlen(target);
	_cleanup_free_ char *buf = malloc(n + 2);
	ssize_t k = buf ? readlink(path, buf, n + 1) : -1;
	return k >= 0 && (size_t)k == n && memcmp(buf, target, n) == 0;
}

static enum store_action action_for(struct store *s, struct store_plan *p,
				    const struct store_record *pre, uint64_t *ret_ino)
{
	struct stat st;
	bool exists = lstat_unlocking(p, pre->path, &st) >= 0;
	*ret_ino = exists && S_ISREG(st.st_mode) ? (uint64_t)st.st_ino : 0;
	uint32_t type = pre->mode & S_IFMT;
	switch (pre->kind) {
	case STORE_KIND_ABSENT:
		return exists ? STORE_ACTION_REMOVE : STORE_ACTION_NONE;
	case STORE_KIND_FILE:
		if (pre->not_backed_up || (!pre->hash[0] && !pre->tree))
			return STORE_ACTION_LOST;
		if (exists && S_ISREG(st.st_mode) && file_matches(s, p->turn_id, pre, &st))
			return STORE_ACTION_NONE;
		break;
	case STORE_KIND_DIR:
		if (exists && S_ISDIR(st.st_mode))
			return st.st_mode == pre->mode && st.st_uid == pre->uid &&
				       st.st_gid == pre->gid &&
				       (int64_t)st.st_mtim.tv_sec * 1000000000 +
					       st.st_mtim.tv_nsec ==
					   pre->mtime_ns
				   ? STORE_ACTION_NONE
				   : STORE_ACTION_META;
		break;
	case STORE_KIND_SYMLINK:
		if (exists && S_ISLNK(st.st_mode) && target_matches(pre->path, pre->target))
			return STORE_ACTION_NONE;
		break;
	case STORE_KIND_OTHER:
		if (type == S_IFSOCK)
			return STORE_ACTION_LOST;
		if (exists && st.st_mode == pre->mode && (uint64_t)st.st_rdev == pre->rdev)
			return STORE_ACTION_NONE;
		break;
	}
	return exists ? STORE_ACTION_REPLACE : STORE_ACTION_CREATE;
}

/* A path below one the turn created is removed together with it. */
static bool covered(struct store_plan *p, const char *path)
{
	_cleanup_free_ char *a = strdup(path);
	if (!a)
		return false;
	for (char *slash; (slash = strrchr(a, '/')) && slash != a;) {
		*slash = '\0';
		struct store_plan_item *it = find_item(p, a);
		if (it)
			return it->action == STORE_ACTION_COVERED ||
			       it->pre.kind == STORE_KIND_ABSENT;
	}
	return false;
}

static bool post_differs(struct store_plan *p, const struct store_record *post)
{
	struct stat st;
	if (lstat_unlocking(p, post->path, &st) < 0)
		return post->kind != STORE_KIND_ABSENT;
	struct store_record cur = {0};
	store_record_from_stat(&cur, &st);
	return post->kind != cur.kind || cur.size != post->size || cur.mode != post->mode ||
	       cur.mtime_ns != post->mtime_ns || (uint64_t)st.st_ino != post->ino;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted paths touched by turns that began after the given one. */
static int later_paths(struct store *s, const struct store_turn_info *turn, char ***ret,
		       size_t *ret_n)
{
	struct store_turn_info *v;
	size_t n, np = 0, cap = 0;
	char **paths = NULL;
	int r = store_list_turns(s, &v, &n);
	if (r < 0)
		return r;
	for (size_t i = 0; r >= 0 && i < n; i++) {
		if (v[i].begin_ns < turn->begin_ns ||
		    (v[i].begin_ns == turn->begin_ns && strcmp(v[i].id, turn->id) <= 0))
			continue;
		struct store_record *recs;
		size_t nrec;
		if (store_turn_records(s, v[i].id, &recs, &nrec) < 0)
			continue;
		for (size_t k = 0; r >= 0 && k < nrec; k++) {
			if (np == cap) {
				size_t ncap = cap ? cap * 2 : 64;
				char **nv = reallocarray(paths, ncap, sizeof *nv);
				if (!nv) {
					r = -ENOMEM;
					break;
				}
				paths = nv;
				cap = ncap;
			}
			paths[np++] = TAKE_PTR(recs[k].path);
		}
		store_records_free(recs, nrec);
	}
	store_turn_infos_free(v, n);
	if (np)
		qsort(paths, np, sizeof *paths, cmp_str);
	*ret = paths;
	*ret_n = np;
	return r;
}

static void strv_free(char **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

static int plan_conflicts(struct store *s, struct store_plan *p, const struct store_turn_info *ti)
{
	struct store_record *post = NULL;
	size_t npost = 0, nlater = 0;
	char **later = NULL;
	int r = ti->committed ? store_turn_post(s, p->turn_id, &post, &npost) : 0;
	if (r >= 0)
		r = later_paths(s, ti, &later, &nlater);
	for (size_t i = 0; r >= 0 && i < p->n_items; i++) {
		struct store_plan_item *it = &p->items[i];
		if (it->action == STORE_ACTION_NONE || it->action == STORE_ACTION_LOST)
			continue;
		const struct store_record *pr = find_record(post, npost, it->pre.path);
		const char *key = it->pre.path;
		if (pr && post_differs(p, pr))
			it->conflict = "changed since the turn";
		else if (nlater && bsearch(&key, later, nlater, sizeof *later, cmp_str))
			it->conflict = "touched by a later turn";
		if (it->conflict)
			p->n_conflicts++;
	}
	store_records_free(post, npost);
	strv_free(later, nlater);
	return r;
}

/* Without root, a change inside a directory of the user's that lacks write or search rights for
 * them (a command that made it read-only once it had filled it) needs them back for the moment:
 * such directories are unlocked now, recorded as they were and given their modes back last. */
static void unlock_changed_parents(struct store_plan *p)
{
	if (geteuid() == 0)
		return;
	const char *last = NULL;
	size_t last_len = 0;
	for (size_t i = 0; i < p->n_items; i++) {
		const struct store_plan_item *it = &p->items[i];
		if (it->action != STORE_ACTION_REMOVE && it->action != STORE_ACTION_CREATE &&
		    it->action != STORE_ACTION_REPLACE)
			continue;
		const char *slash = strrchr(it->pre.path, '/');
		size_t len = slash ? (size_t)(slash - it->pre.path) : 0;
		if (!len || (last && len == last_len && strncmp(it->pre.path, last, len) == 0))
			continue; /* at the root, or the same parent as the one before */
		last = it->pre.path;
		last_len = len;
		_cleanup_free_ char *parent = strndup(it->pre.path, len);
		struct stat st;
		if (parent && lstat(parent, &st) == 0 && S_ISDIR(st.st_mode) &&
		    (st.st_mode & (S_IWUSR | S_IXUSR)) != (S_IWUSR | S_IXUSR) &&
		    st.st_uid == geteuid())
			unlock_ancestors(p, it->pre.path);
	}
}

int store_plan_restore(struct store *s, const char *turn_id, char *const *paths, size_t n_paths,
		       struct store_plan **ret)
{
	struct store_turn_info ti;
	int r = store_turn_info_get(s, turn_id, &ti);
	if (r < 0)
		return r;
	struct store_plan *p = calloc(1, sizeof *p);
	struct store_record *v = NULL;
	size_t n = 0;
	if (!p || !(p->turn_id = strdup(turn_id)))
		r = -ENOMEM;
	if (r >= 0)
		r = store_turn_records(s, turn_id, &v, &n);
	if (r >= 0)
		r = plan_select(p, v, n, paths, n_paths);
	store_records_free(v, n);
	/* Ascending order: an ancestor's action is known before its descendants'. */
	for (size_t i = 0; r >= 0 && i < p->n_items; i++) {
		struct store_plan_item *it = &p->items[i];
		it->action = covered(p, it->pre.path) ? STORE_ACTION_COVERED
						      : action_for(s, p, &it->pre, &it->cur_ino);
	}
	if (r >= 0)
		r = plan_conflicts(s, p, &ti);
	if (r >= 0)
		unlock_changed_parents(p);
	/* what planning saw: applying changes the tree */
	store_gone_free(p ? p->look : NULL);
	if (p)
		p->look = NULL;
	free(ti.id);
	free(ti.message);
	if (r < 0) {
		store_plan_free(p);
		return r;
	}
	*ret = p;
	return 0;
}

/* ---- applying ---- */

struct restored_inode {
	uint64_t ino; /* as recorded in the pre-image */
	const char *path;
};

struct applier {
	struct store *s;
	struct store_plan *p;
	struct store_turn *u; /* the turn recording what the restore changes */
	bool sync;
	/* files put back so far, by recorded inode: a later name of the same inode becomes a hard
	 * link to the first, as the names were when recorded */
	struct restored_inode *inodes;
	size_t n_inodes;
	/* inodes recorded with more than one name (sorted), and the plan's files of those inodes:
	 * built once per apply, so the per-file lookups stay off plans without hard links */
	uint64_t *group_inos;
	size_t n_group_inos;
	const struct store_record **group_files;
	size_t n_group_files;
};

/* Open the parent of an absolute path without following any symlink; *ret_name points into path. */
static int open_parent(const char *path, const char **ret_name)
{
	_cleanup_free_ char *parent = NULL;
	const char *name;
	int r = path_split(path, &parent, &name);
	if (r < 0)
		return r;
	if (!path_component_valid(name))
		return -EINVAL;
	int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	char *save = NULL;
	for (char *c = strtok_r(parent, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		if (!path_component_valid(c)) {
			safe_close(fd);
			return -EINVAL;
		}
		int nfd = openat(fd, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		r = nfd < 0 ? negative_errno() : 0;
		safe_close(fd);
		if (r < 0)
			return r == -ENOTDIR ? -ELOOP : r;
		fd = nfd;
	}
	*ret_name = name;
	return fd;
}

/*
 * A name of a hard-linked file is about to go: the plan's other names of that inode, which the
 * restore leaves as they are, are recorded too, so that undoing the restore can link the name
 * back to them.
 */
static void record_other_names(struct applier *a, int pfd, const char *name, const char *path)
{
	struct stat st;
	if (!a->p || !a->u || fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISREG(st.st_mode) || st.st_nlink < 2)
		return;
	for (size_t i = 0; i < a->p->n_items; i++) {
		const struct store_plan_item *it = &a->p->items[i];
		if (it->action != STORE_ACTION_NONE || it->cur_ino != (uint64_t)st.st_ino ||
		    strcmp(it->pre.path, path) == 0)
			continue;
		const char *oname;
		enum store_result res;
		int ofd = open_parent(it->pre.path, &oname);
		if (ofd >= 0)
			(void)store_preimage(a->u, ofd, oname, it->pre.path, 0, &res, NULL);
		safe_close(ofd);
	}
}

/* Record the current state in the undo turn, durably, before touching it. */
static int record(struct applier *a, int pfd, const char *name, const char *path, unsigned flags,
		  bool *ret_consumed)
{
	enum store_result res;
	bool consumed = false;
	if (flags & STORE_CONSUME)
		record_other_names(a, pfd, name, path);
	int r = store_preimage(a->u, pfd, name, path, flags, &res, &consumed);
	if (r >= 0 && a->sync)
		r = store_sync(a->u);
	if (ret_consumed)
		*ret_consumed = consumed;
	return r;
}

static int remove_recorded(struct applier *a, int pfd, const char *name, const char *path,
			   int depth)
{
	struct stat st;
	if (depth > 2048)
		return -ELOOP;
	if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : negative_errno();
	bool consumed = false;
	if (!S_ISDIR(st.st_mode)) {
		int r = record(a, pfd, name, path, STORE_CONSUME, &consumed);
		if (r >= 0 && !consumed && unlinkat(pfd, name, 0) < 0)
			r = negative_errno();
		return r;
	}
	/* The directory first: its mtime is still the one to give back. */
	int r = record(a, pfd, name, path, 0, NULL);
	if (r < 0)
		return r;
	if ((st.st_mode & S_IRWXU) != S_IRWXU && st.st_uid == geteuid() &&
	    fchmodat(pfd, name, (st.st_mode | S_IRWXU) & 07777, 0) < 0)
		return negative_errno();
	int fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		r = negative_errno();
		safe_close(fd);
		return r;
	}
	struct strbuf child = STRBUF_INIT;
	for (struct dirent *de; r >= 0 && (de = readdir(d));) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		r = path_join(path, de->d_name, &child);
		if (r >= 0)
			r = remove_recorded(a, fd, de->d_name, child.buf, depth + 1);
	}
	strbuf_free(&child);
	closedir(d);
	if (r >= 0 && unlinkat(pfd, name, AT_REMOVEDIR) < 0)
		r = negative_errno();
	return r;
}

static int set_owner_mode_times(int fd, const struct store_record *pre)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return negative_errno();
	/* Owner first: chown clears set-id bits. Not being root is no reason to fail. */
	if ((st.st_uid != pre->uid || st.st_gid != pre->gid) &&
	    fchown(fd, pre->uid, pre->gid) < 0 && errno != EPERM)
		return negative_errno();
	if (fchmod(fd, pre->mode & 07777) < 0)
		return negative_errno();
	struct timespec ts[2] = {
	    {.tv_nsec = UTIME_OMIT},
	    {.tv_sec = pre->mtime_ns / 1000000000, .tv_nsec = pre->mtime_ns % 1000000000}};
	if (futimens(fd, ts) < 0)
		return negative_errno();
	return 0;
}

static int write_object_tmp(struct applier *a, int pfd, const char *tmp,
			    const struct store_record *pre)
{
	_cleanup_close_ int ofd = store_record_content_open(a->s, a->p->turn_id, pre);
	if (ofd < 0)
		return ofd;
	_cleanup_close_ int fd =
	    openat(pfd, tmp, O_CREAT | O_EXCL | O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return negative_errno();
	char hash[65];
	int r = store_copy_fd(ofd, fd);
	/* the object is damaged: never restore wrong content (a kept tree's file was checked
	 * when opened: the inode recorded, unchanged) */
	if (r >= 0 && !pre->tree && (r = store_hash_fd(fd, hash)) >= 0 &&
	    strcmp(hash, pre->hash) != 0)
		r = -EBADMSG;
	if (r >= 0)
		r = set_owner_mode_times(fd, pre);
	if (r >= 0 && a->sync && fdatasync(fd) < 0)
		r = negative_errno();
	return r;
}

/* Prepare the pre-image under a temp name, record what it replaces, rename it into place. */
static int create_by_rename(struct applier *a, int pfd, const char *name,
			    const struct store_record *pre)
{
	_cleanup_free_ char *tmp = NULL;
	int r = store_random_name(".brokered-restore-", &tmp);
	if (r < 0)
		return r;
	if (pre->kind == STORE_KIND_FILE) {
		r = write_object_tmp(a, pfd, tmp, pre);
	} else if (symlinkat(pre->target, pfd, tmp) < 0) {
		return negative_errno();
	} else {
		struct timespec ts[2] = {
		    {.tv_nsec = UTIME_OMIT},
		    {.tv_sec = pre->mtime_ns / 1000000000, .tv_nsec = pre->mtime_ns % 1000000000}};
		(void)!fchownat(pfd, tmp, pre->uid, pre->gid, AT_SYMLINK_NOFOLLOW);
		(void)utimensat(pfd, tmp, ts, AT_SYMLINK_NOFOLLOW);
	}
	if (r >= 0)
		r = record(a, pfd, name, pre->path, STORE_CONSUME, NULL);
	if (r >= 0 && renameat(pfd, tmp, pfd, name) < 0)
		r = negative_errno();
	if (r < 0)
		(void)unlinkat(pfd, tmp, 0);
	return r;
}

/* Another name of the same recorded inode was put back already: link to it. */
static int create_by_link(struct applier *a, int pfd, const char *name,
			  const struct store_record *pre, const char *other)
{
	const char *oname;
	_cleanup_close_ int ofd = open_parent(other, &oname);
	if (ofd < 0)
		return ofd;
	struct stat ost;
	if (fstatat(ofd, oname, &ost, AT_SYMLINK_NOFOLLOW) < 0)
		return negative_errno();
	if (!S_ISREG(ost.st_mode))
		return -EAGAIN;
	_cleanup_free_ char *tmp = NULL;
	int r = store_random_name(".brokered-restore-", &tmp);
	if (r < 0)
		return r;
	if (linkat(ofd, oname, pfd, tmp, 0) < 0)
		return errno == EXDEV || errno == EMLINK || errno == EPERM ? -EAGAIN
									   : negative_errno();
	r = record(a, pfd, name, pre->path, STORE_CONSUME, NULL);
	if (r >= 0 && renameat(pfd, tmp, pfd, name) < 0)
		r = negative_errno();
	/* gone after a rename; still there if name was this inode already (rename did nothing) */
	(void)unlinkat(pfd, tmp, 0);
	return r;
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return a < b ? -1 : a > b;
}

/* Is the record's inode one that had several names? */
static bool in_group(const struct applier *a, const struct store_record *pre)
{
	return pre->kind == STORE_KIND_FILE && pre->ino && a->n_group_inos &&
	       bsearch(&pre->ino, a->group_inos, a->n_group_inos, sizeof *a->group_inos, cmp_u64);
}

static void groups_build(struct applier *a, const struct store_plan *p)
{
	uint64_t *v = calloc(p->n_items + 1, sizeof *v);
	const struct store_record **f = calloc(p->n_items + 1, sizeof *f);
	size_t n = 0, k = 0;
	if (!v || !f) { /* only link identity is lost */
		free(v);
		free(f);
		return;
	}
	for (size_t i = 0; i < p->n_items; i++)
		if (p->items[i].pre.kind == STORE_KIND_FILE && p->items[i].pre.ino &&
		    p->items[i].pre.nlink > 1)
			v[n++] = p->items[i].pre.ino;
	qsort(v, n, sizeof *v, cmp_u64);
	size_t u = 0;
	for (size_t i = 0; i < n; i++)
		if (u == 0 || v[u - 1] != v[i])
			v[u++] = v[i];
	a->group_inos = v;
	a->n_group_inos = u;
	for (size_t i = 0; u && i < p->n_items; i++)
		if (in_group(a, &p->items[i].pre))
			f[k++] = &p->items[i].pre;
	a->group_files = f;
	a->n_group_files = k;
}

static void groups_free(struct applier *a)
{
	free(a->group_inos);
	free(a->group_files);
	free(a->inodes);
}

static const struct restored_inode *restored_find(const struct applier *a,
						  const struct store_record *pre)
{
	for (size_t i = 0; in_group(a, pre) && i < a->n_inodes; i++)
		if (a->inodes[i].ino == pre->ino)
			return &a->inodes[i];
	return NULL;
}

static void restored_add(struct applier *a, const struct store_record *pre)
{
	if (!in_group(a, pre) || restored_find(a, pre))
		return;
	struct restored_inode *nv = reallocarray(a->inodes, a->n_inodes + 1, sizeof *nv);
	if (!nv)
		return; /* only link identity is lost */
	a->inodes = nv;
	a->inodes[a->n_inodes++] = (struct restored_inode){.ino = pre->ino, .path = pre->path};
}

/*
 * The name still holds the recorded inode and that inode had other names: put the content back
 * into it, so that names the turn never recorded (another hard link) get it back too. -EAGAIN:
 * not possible (not writable, another inode), rename a copy into place instead.
 */
static int restore_in_place(struct applier *a, int pfd, const char *name,
			    const struct store_record *pre)
{
	_cleanup_close_ int ofd = store_record_content_open(a->s, a->p->turn_id, pre);
	if (ofd < 0)
		return ofd;
	char hash[65];
	int r = pre->tree ? 0 : store_hash_fd(ofd, hash);
	if (r < 0)
		return r;
	if (!pre->tree && strcmp(hash, pre->hash) != 0)
		return -EBADMSG; /* the object is damaged: never restore wrong content */
	_cleanup_close_ int fd =
	    openat(pfd, name, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_ino != pre->ino)
		return -EAGAIN;
	r = record(a, pfd, name, pre->path, 0, NULL); /* a copy: the inode stays in use */
	if (r >= 0)
		r = store_copy_fd(ofd, fd);
	if (r >= 0)
		r = set_owner_mode_times(fd, pre);
	if (r >= 0 && a->sync && fdatasync(fd) < 0)
		r = negative_errno();
	return r;
}

/*
 * The names of one recorded inode were recorded at different times, the later ones maybe after a
 * change through an earlier name: the content, mode and times to give back are the earliest.
 */
static struct store_record group_source(const struct applier *a, const struct store_record *pre)
{
	struct store_record v = *pre;
	const struct store_record *src = pre;
	for (size_t i = 0; in_group(a, pre) && i < a->n_group_files; i++) {
		const struct store_record *o = a->group_files[i];
		if (o->ino == pre->ino && o->seq < src->seq && !o->not_backed_up && o->hash[0])
			src = o;
	}
	memcpy(v.hash, src->hash, sizeof v.hash);
	v.size = src->size;
	v.mode = src->mode;
	v.uid = src->uid;
	v.gid = src->gid;
	v.mtime_ns = src->mtime_ns;
	return v;
}

static int create_file(struct applier *a, int pfd, const char *name,
		       const struct store_plan_item *it)
{
	const struct store_record group = group_source(a, &it->pre);
	const struct store_record *pre = it->pre.kind == STORE_KIND_FILE ? &group : &it->pre;
	const struct restored_inode *other =
	    pre->kind == STORE_KIND_FILE ? restored_find(a, pre) : NULL;
	int r;
	if (other) {
		r = create_by_link(a, pfd, name, pre, other->path);
		if (r != -EAGAIN)
			return r;
	}
	if (pre->kind == STORE_KIND_FILE && it->action == STORE_ACTION_REPLACE && pre->ino &&
	    pre->nlink > 1 && it->cur_ino == pre->ino) {
		r = restore_in_place(a, pfd, name, pre);
		if (r >= 0)
			restored_add(a, pre);
		if (r != -EAGAIN)
			return r;
	}
	r = create_by_rename(a, pfd, name, pre);
	if (r >= 0 && pre->kind == STORE_KIND_FILE)
		restored_add(a, pre);
	return r;
}

static int create_item(struct applier *a, const struct store_plan_item *it)
{
	const struct store_record *pre = &it->pre;
	const char *name;
	_cleanup_close_ int pfd = open_parent(pre->path, &name);
	if (pfd < 0)
		return pfd;
	if (it->action == STORE_ACTION_REPLACE) {
		struct stat st;
		bool in_place = (pre->kind == STORE_KIND_FILE || pre->kind == STORE_KIND_SYMLINK) &&
				fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) >= 0 &&
				!S_ISDIR(st.st_mode);
		int r = in_place ? 0 : remove_recorded(a, pfd, name, pre->path, 0);
		if (r < 0)
			return r;
	}
	if (pre->kind == STORE_KIND_FILE || pre->kind == STORE_KIND_SYMLINK)
		return create_file(a, pfd, name, it);
	int r = record(a, pfd, name, pre->path, 0, NULL);
	if (r < 0)
		return r;
	if (pre->kind == STORE_KIND_DIR)
		return mkdirat(pfd, name, 0700) < 0 ? negative_errno() : 0;
	if (mknodat(pfd, name, pre->mode, (dev_t)pre->rdev) < 0)
		return negative_errno();
	(void)!fchownat(pfd, name, pre->uid, pre->gid, AT_SYMLINK_NOFOLLOW);
	return fchmodat(pfd, name, pre->mode & 07777, 0) < 0 ? negative_errno() : 0;
}

static int remove_item(struct applier *a, const struct store_plan_item *it)
{
	const char *name;
	_cleanup_close_ int pfd = open_parent(it->pre.path, &name);
	if (pfd < 0)
		return pfd == -ENOENT ? 0 : pfd;
	return remove_recorded(a, pfd, name, it->pre.path, 0);
}

static int dir_meta_item(struct applier *a, const struct store_plan_item *it)
{
	const char *name;
	_cleanup_close_ int pfd = open_parent(it->pre.path, &name);
	if (pfd < 0)
		return pfd;
	int r = record(a, pfd, name, it->pre.path, STORE_METADATA, NULL);
	if (r < 0)
		return r;
	_cleanup_close_ int fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	return set_owner_mode_times(fd, &it->pre);
}

static int cmp_final_step(const void *a, const void *b)
{
	/* descending: a descendant ("d/x") sorts after its ancestor ("d") ascending */
	return -strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void apply_phases(struct applier *a, struct store_plan *p)
{
	groups_build(a, p);
	/* Names left as they are whose inode is still the recorded one: others link to them. */
	for (size_t i = 0; i < p->n_items; i++) {
		const struct store_plan_item *it = &p->items[i];
		if (it->action == STORE_ACTION_NONE && it->pre.kind == STORE_KIND_FILE &&
		    it->pre.ino && it->cur_ino == it->pre.ino)
			restored_add(a, &it->pre);
	}
	/* Removals deepest first (descendants sort after their ancestors). */
	for (size_t i = p->n_items; i-- > 0;)
		if (p->items[i].action == STORE_ACTION_REMOVE)
			p->items[i].error = remove_item(a, &p->items[i]);
	/* Creations shallowest first; names that still hold their hard-linked inode before the
	 * others, which then link to it. */
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < p->n_items; i++) {
			struct store_plan_item *it = &p->items[i];
			bool holder = it->action == STORE_ACTION_REPLACE &&
				      it->pre.kind == STORE_KIND_FILE && it->pre.nlink > 1 &&
				      it->pre.ino && it->cur_ino == it->pre.ino;
			if ((it->action == STORE_ACTION_CREATE ||
			     it->action == STORE_ACTION_REPLACE) &&
			    holder == (pass == 0))
				it->error = create_item(a, it);
		}
	/* Directory metadata last, once nothing changes inside them any more, deepest first;
	 * with it the directories unlocked on the way get their own modes back. */
	struct final_step {
		const char *path;
		struct store_plan_item *it;
		struct store_unlocked *u;
	};
	struct final_step *v = calloc(p->n_items + p->n_unlocked + 1, sizeof *v);
	size_t n = 0;
	if (!v) {
		relock_all(p);
		return;
	}
	for (size_t i = 0; i < p->n_items; i++) {
		struct store_plan_item *it = &p->items[i];
		if (it->pre.kind == STORE_KIND_DIR &&
		    (it->action == STORE_ACTION_META || it->action == STORE_ACTION_CREATE ||
		     it->action == STORE_ACTION_REPLACE))
			v[n++] = (struct final_step){.path = it->pre.path, .it = it};
	}
	for (size_t i = 0; i < p->n_unlocked; i++) {
		struct store_plan_item *it = find_item(p, p->unlocked[i].path);
		if (!it || it->pre.kind != STORE_KIND_DIR || it->error < 0 ||
		    (it->action != STORE_ACTION_META && it->action != STORE_ACTION_CREATE &&
		     it->action != STORE_ACTION_REPLACE))
			v[n++] =
			    (struct final_step){.path = p->unlocked[i].path, .u = &p->unlocked[i]};
	}
	qsort(v, n, sizeof *v, cmp_final_step);
	for (size_t i = 0; i < n; i++) {
		if (v[i].u)
			(void)chmod_dir(v[i].u->path, v[i].u->mode);
		else if (v[i].it->error == 0)
			v[i].it->error = dir_meta_item(a, v[i].it);
	}
	free(v);
	for (size_t i = 0; i < p->n_unlocked; i++)
		free(p->unlocked[i].path);
	free(p->unlocked);
	p->unlocked = NULL;
	p->n_unlocked = 0;
}

/* The undo turn records the unlocked directories as they were, before anything else. */
static void record_unlocked(struct applier *a, struct store_plan *p)
{
	for (size_t i = p->n_unlocked; i-- > 0;) {
		const struct store_unlocked *u = &p->unlocked[i];
		const char *name;
		if (chmod_dir(u->path, u->mode) < 0)
			continue;
		int pfd = open_parent(u->path, &name);
		if (pfd >= 0)
			(void)record(a, pfd, name, u->path, STORE_METADATA, NULL);
		safe_close(pfd);
		(void)chmod_dir(u->path, u->mode | S_IRWXU);
	}
}

static bool is_full(int e)
{
	return e == -ENOSPC || e == -EDQUOT;
}

int store_plan_apply(struct store *s, struct store_plan *p, const struct store_options *o,
		     const char *message, char **ret_turn_id)
{
	struct store_options uo = *o;
	uo.enabled = true;
	uo.deny_oversize = false;
	struct applier a = {.s = s, .p = p, .sync = uo.sync};
	_cleanup_free_ char *id = NULL;
	int r = store_turn_new_private(s, &uo, message, &a.u);
	if (r < 0 && !is_full(r))
		return r;
	if (a.u && !(id = strdup(store_turn_id(a.u)))) {
		store_turn_free(a.u);
		return -ENOMEM;
	}
	/* A full store must not keep the user's files hostage: what cannot be recorded is put
	 * back all the same, unrecorded (the caller says so; that part cannot be undone again). */
	p->n_unrecorded = 0;
	if (a.u) {
		record_unlocked(&a, p);
		apply_phases(&a, p);
		groups_free(&a);
	}
	enum store_action *saved = calloc(p->n_items + 1, sizeof *saved);
	if (!saved) {
		store_turn_free(a.u);
		return -ENOMEM;
	}
	for (size_t i = 0; i < p->n_items; i++) {
		saved[i] = p->items[i].action;
		bool again = !a.u || is_full(p->items[i].error);
		if (again) {
			p->items[i].error = 0;
			p->n_unrecorded++;
		} else {
			p->items[i].action = STORE_ACTION_NONE;
		}
	}
	if (p->n_unrecorded) {
		struct applier b = {.s = s, .p = p, .sync = uo.sync, .u = NULL};
		apply_phases(&b, p);
		groups_free(&b);
	}
	for (size_t i = 0; i < p->n_items; i++)
		p->items[i].action = saved[i];
	free(saved);
	if (a.u && (r = store_turn_commit(a.u, message)) < 0 && !is_full(r))
		return r;
	int failed = 0;
	for (size_t i = 0; i < p->n_items; i++)
		if (p->items[i].error < 0)
			failed++;
	if (ret_turn_id)
		*ret_turn_id = TAKE_PTR(id);
	return failed;
}
