/* SPDX-License-Identifier: MIT */
/*
 * Trees kept whole. A directory that a command removed with everything in it (`rm -rf dir`, as
 * the copy-on-write merge finds it: one whiteout) is moved into the store by one rename, to
 * turns/<turn>/trees/<id>, instead of being kept file by file (a link, a hash, a record and an
 * unlink for each: about eleven syscalls a file).
 *
 * Every path below still gets its own record (type, mode, owner, mtime, size, inode, a symlink's
 * target), all written before the rename. A file's record names its tree (kt=<id>) and where the
 * tree's root path ends in its own path (ka=<length>) instead of a content hash: its content is
 * trees/<id>/<the rest of its path>, the very inode that was removed, and undo copies it back from
 * there after checking that it is still the one recorded (inode, size, mtime).
 *
 * Records first, then the rename. A broker killed between leaves the tree where it was, with
 * records that name a tree the store does not have: readers skip those (store_tree_filter()), so
 * the paths count as untouched, which they are; so does a rename that fails. With
 * sandbox.fileBackup.sync the records are flushed before the rename (one flush for the tree),
 * and a tree is kept whole only where the file system orders metadata (journaled ext4, XFS:
 * store-kept.c) or does not survive a crash at all (tmpfs): elsewhere a rename could reach the
 * disk half done.
 *
 * A tree is kept whole only if nothing in it needs more than a move: every file has one name
 * (another would share the stored inode), is readable and within the size limit; every path is
 * on the tree's file system, allowed by the caller, and the tree is small enough to hold its
 * records in memory. Otherwise nothing is changed and the caller removes the tree piece by piece.
 *
 * Files kept by a move (store_keep_file()): a regular file that the copy-on-write merge replaces
 * goes to the turn's file tree, trees/f<id>/<its absolute path> (a record with ka=0), made
 * directory by directory as needed. Here the move comes first and the record after (held, written
 * with others): a broker killed between, or a crash that loses the record where metadata is
 * ordered, leaves a file in a file tree without a record, and the recovery of the turn
 * (store_kept_recover_all(), which kept/<turn>/ made before the first move points to) records it
 * from the file itself, which is all a record holds.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "basic/alloc-util.h"
#include "basic/kernel-compat.h"
#include "basic/fd-util.h"
#include "basic/fs-util.h"
#include "basic/macro.h"
#include "basic/path-util.h"
#include "basic/strbuf.h"
#include "store-internal.h"
#include "store.h"

#define TREE_DEPTH_MAX 256

struct walk {
	struct store_turn *t;
	const struct store_tree_opts *o;
	const char *id;
	size_t root_len;
	dev_t dev;
	uid_t euid;
	struct store_record *v;
	size_t n, cap;
};

/* May this process read the file (or search the directory) again later, from the store? */
static bool ours_to_read(const struct walk *w, const struct stat *st)
{
	if (w->euid == 0)
		return true;
	mode_t need = S_ISDIR(st->st_mode) ? S_IRUSR | S_IXUSR : S_IRUSR;
	return st->st_uid == w->euid && (st->st_mode & need) == need;
}

/*
 * lstat() of dirfd/name, by statx(2), which also tells a mount point (of any file system, a bind
 * mount of the tree's own too): 1, or 0 for a mount point or a name gone meanwhile, or -errno.
 */
static int look(int dirfd, const char *name, struct stat *st)
{
	struct statx x;
	if (statx(dirfd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_BASIC_STATS, &x) < 0)
		return errno == ENOENT ? 0 : negative_errno();
	if ((x.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
	    (x.stx_attributes & STATX_ATTR_MOUNT_ROOT))
		return 0;
	*st = (struct stat){
	    .st_dev = makedev(x.stx_dev_major, x.stx_dev_minor),
	    .st_ino = x.stx_ino,
	    .st_mode = x.stx_mode,
	    .st_nlink = x.stx_nlink,
	    .st_uid = x.stx_uid,
	    .st_gid = x.stx_gid,
	    .st_rdev = makedev(x.stx_rdev_major, x.stx_rdev_minor),
	    .st_size = (off_t)x.stx_size,
	    .st_mtim = {.tv_sec = x.stx_mtime.tv_sec, .tv_nsec = x.stx_mtime.tv_nsec},
	};
	return 1;
}

/* 1 kept in w, 0 not a tree to keep whole, -errno */
static int walk_entry(struct walk *w, int at, const char *name, const char *path,
		      const struct stat *st, unsigned depth)
{
	if (depth > TREE_DEPTH_MAX || w->n >= w->o->max_entries || st->st_dev != w->dev ||
	    !w->o->allow(path, st, w->o->userdata))
		return 0;
	if (S_ISREG(st->st_mode) &&
	    (st->st_nlink != 1 || (uint64_t)st->st_size > w->t->opts.max_size_bytes ||
	     !ours_to_read(w, st)))
		return 0;
	if (S_ISDIR(st->st_mode) && !ours_to_read(w, st))
		return 0;
	if (ARRAY_GROW(w->v, w->cap, w->n, 256) < 0)
		return -ENOMEM;
	struct store_record *rec = &w->v[w->n];
	*rec = (struct store_record){0};
	store_record_from_stat(rec, st);
	if (!(rec->path = strdup(path)))
		return -ENOMEM;
	w->n++;
	int r = 0;
	if (S_ISREG(st->st_mode)) {
		rec->ino = (uint64_t)st->st_ino;
		rec->tree_at = w->root_len;
		r = (rec->tree = strdup(w->id)) ? 1 : -ENOMEM;
	} else if (S_ISLNK(st->st_mode)) {
		r = store_readlink_at(at, name, (size_t)st->st_size, &rec->target);
		r = r < 0 ? (r == -ENOENT ? 0 : r) : 1;
	} else if (S_ISDIR(st->st_mode)) {
		int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return errno == ENOENT || errno == EACCES ? 0 : negative_errno();
		DIR *d = fdopendir(fd);
		if (!d) {
			safe_close(fd);
			return negative_errno();
		}
		struct strbuf child = STRBUF_INIT;
		struct dirent *de;
		r = 1;
		while (r > 0 && (errno = 0, de = readdir(d))) {
			if (dot_or_dot_dot(de->d_name))
				continue;
			struct stat cst;
			if ((r = look(dirfd(d), de->d_name, &cst)) > 0 &&
			    (r = path_join(path, de->d_name, &child)) >= 0)
				r = walk_entry(w, dirfd(d), de->d_name, child.buf, &cst, depth + 1);
		}
		if (r > 0 && errno)
			r = negative_errno();
		strbuf_free(&child);
		closedir(d);
	} else {
		r = 1; /* fifo, socket, device: type and mode recorded, as when kept one by one */
	}
	return r;
}

/* Are dirfd and the turn's directory on one mount (a rename between them cannot give EXDEV)? */
static bool same_mount(int a, int b)
{
	struct statx x, y;
	return statx(a, "", AT_EMPTY_PATH, STATX_MNT_ID, &x) == 0 &&
	       statx(b, "", AT_EMPTY_PATH, STATX_MNT_ID, &y) == 0 && (x.stx_mask & STATX_MNT_ID) &&
	       (y.stx_mask & STATX_MNT_ID) && x.stx_mnt_id == y.stx_mnt_id;
}

/* The records, not yet seen in this turn, in the manifest: one write per 256 KiB. */
static int append_records(struct store_turn *t, const struct walk *w)
{
	struct strbuf sb = STRBUF_INIT;
	int r = 0;
	for (size_t i = 0; i < w->n && r >= 0; i++) {
		if (store_set_contains(&t->seen, w->v[i].path))
			continue;
		struct store_record rec = w->v[i];
		rec.call = t->call;
		if (sb.len)
			r = strbuf_appends(&sb, "\n");
		if (r >= 0)
			r = store_record_format(&rec, &sb);
		if (r >= 0 && sb.len >= 256 * 1024) {
			r = store_manifest_append(t, sb.buf, sb.len);
			strbuf_reset(&sb);
		}
	}
	if (r >= 0 && sb.len)
		r = store_manifest_append(t, sb.buf, sb.len);
	strbuf_free(&sb);
	if (r >= 0)
		t->dirty_manifest = true;
	return r;
}

int store_keep_tree(struct store_turn *t, int dirfd, const char *name, const char *path,
		    const struct stat *st, const struct store_tree_opts *o,
		    struct store_record **ret, size_t *ret_n)
{
	*ret = NULL;
	*ret_n = 0;
	if (!t || !t->opts.enabled || !S_ISDIR(st->st_mode) || st->st_dev != t->store->dev)
		return 0;
	struct store *s = t->store;
	/* Where a rename may reach the disk half done, keep files one by one (their links). */
	if (o->durable && t->opts.sync && !s->ordered_metadata)
		return 0;
	uid_t euid = geteuid();
	/* moving a directory to another parent writes its ".." entry */
	if (euid != 0 && (st->st_uid != euid || !(st->st_mode & S_IWUSR)))
		return 0;
	int r;
	if (t->lazy && (r = store_turn_materialize(t)) < 0)
		return r;
	if (!same_mount(dirfd, t->dir_fd))
		return 0;
	_cleanup_free_ char *id = NULL;
	if ((r = store_random_name("t", &id)) < 0)
		return r;
	struct walk w = {
	    .t = t, .o = o, .id = id, .root_len = strlen(path), .dev = st->st_dev, .euid = euid};
	r = walk_entry(&w, dirfd, name, path, st, 0);
	if (r <= 0) {
		store_records_free(w.v, w.n);
		return r;
	}
	/* From here on a failure changes nothing the caller relies on: the records name a tree
	 * that is not in the store (they do not count), and the caller keeps the paths one by one.
	 */
	char to[8 + STORE_ID_MAX];
	snprintf(to, sizeof to, "trees/%s", id);
	r = store_mkdir_0700_at(t->dir_fd, "trees");
	if (r >= 0 || r == -EEXIST)
		r = append_records(t, &w);
	if (r >= 0)
		r = o->durable ? store_sync(t) : store_flush(t);
	if (r >= 0 && renameat(dirfd, name, t->dir_fd, to) < 0)
		r = negative_errno();
	if (r < 0) {
		store_records_free(w.v, w.n);
		return 0;
	}
	for (size_t i = 0; i < w.n; i++) {
		/* 1: a path the turn had not recorded before append_records() did */
		int k = store_set_add(&t->seen, w.v[i].path);
		if (k < 0)
			t->seen_incomplete = true;
		t->stats.saved += k != 0;
	}
	*ret = w.v;
	*ret_n = w.n;
	return 1;
}

/* ---- files kept by a move ---- */

/*
 * The directory of the turn's file tree that stands for dir (absolute, "" for "/"), made as
 * needed: an fd the turn holds (file_tree_dir_fd), or -errno.
 */
static int file_tree_dir(struct store_turn *t, const char *dir)
{
	if (t->file_tree_dir && strcmp(t->file_tree_dir, dir) == 0)
		return t->file_tree_dir_fd;
	int r;
	if (t->file_tree_fd < 0) {
		_cleanup_free_ char *id = NULL;
		char p[8 + STORE_ID_MAX];
		if ((r = store_random_name("f", &id)) < 0)
			return r;
		snprintf(p, sizeof p, "trees/%s", id);
		/* the mark first: a turn killed after its first move is looked at */
		if ((r = store_kept_mark(t)) < 0 || (r = store_mkdir_p_0700_at(t->dir_fd, p)) < 0)
			return r;
		if ((t->file_tree_fd = store_open_dir_at(t->dir_fd, p)) < 0)
			return t->file_tree_fd;
		t->file_tree = TAKE_PTR(id);
	}
	free(t->file_tree_dir);
	t->file_tree_dir = NULL;
	t->file_tree_dir_fd = safe_close(t->file_tree_dir_fd);
	/* one open where the directory is there already, else made first */
	const char *rel = dir[0] ? dir + 1 : ".";
	int fd = store_open_dir_at(t->file_tree_fd, rel);
	if (fd == -ENOENT && (r = store_mkdir_p_0700_at(t->file_tree_fd, rel)) < 0)
		return r;
	if (fd == -ENOENT)
		fd = store_open_dir_at(t->file_tree_fd, rel);
	if (fd < 0)
		return fd;
	if (!(t->file_tree_dir = strdup(dir))) {
		safe_close(fd);
		return -ENOMEM;
	}
	return t->file_tree_dir_fd = fd;
}

int store_keep_file(struct store_turn *t, int dirfd, const char *name, const char *path,
		    const struct stat *st, bool durable)
{
	if (!t || !t->opts.enabled || !S_ISREG(st->st_mode) || st->st_nlink != 1 ||
	    (uint64_t)st->st_size > t->opts.max_size_bytes || st->st_dev != t->store->dev ||
	    path[0] != '/' || store_set_contains(&t->seen, path))
		return 0;
	/* Where a crash may write the change out before the move, keep the file by a link. */
	if (durable && t->opts.sync && !t->store->ordered_metadata)
		return 0;
	static uid_t euid = (uid_t)-1;
	if (euid == (uid_t)-1)
		euid = geteuid();
	if (euid != 0 && (st->st_uid != euid || !(st->st_mode & S_IRUSR)))
		return 0; /* undo could not read it back */
	const char *slash = strrchr(path, '/');
	if (strcmp(slash + 1, name) != 0)
		return -EINVAL;
	_cleanup_free_ char *dir = strndup(path, (size_t)(slash - path));
	if (!dir)
		return -ENOMEM;
	int r = 0;
	if (t->lazy && (r = store_turn_materialize(t)) < 0)
		return r;
	/* Nothing changed yet: where the tree or the move fails (another mount of the file
	 * system: EXDEV, a mount point: EBUSY, the file gone: ENOENT), the caller keeps the file
	 * the other way, which looks again and says what is wrong. */
	int dfd = file_tree_dir(t, dir);
	if (dfd < 0)
		return dfd == -ENOMEM ? dfd : 0;
	if (renameat(dirfd, name, dfd, name) < 0)
		return 0;
	/* What was moved is recorded, whatever came in the place of what st saw meanwhile. */
	struct stat now;
	struct store_record rec = {
	    .path = (char *)path, .call = t->call, .tree = t->file_tree, .tree_at = 0};
	if (fstatat(dfd, name, &now, AT_SYMLINK_NOFOLLOW) < 0)
		r = negative_errno();
	else if (!S_ISREG(now.st_mode))
		r = -ESTALE;
	/* The record waits with the held ones (written together, a write per 256 KiB, at the next
	 * store_records_release(), flush or commit), and needs no flush of its own: a broker killed
	 * first, or a crash on a file system that orders metadata (the move reached the disk before
	 * the change that follows it), leaves the file in the tree, where the recovery finds it. */
	if (r >= 0) {
		store_record_from_stat(&rec, &now);
		rec.ino = (uint64_t)now.st_ino;
		if ((r = t->held.len ? strbuf_appendc(&t->held, '\n') : 0) >= 0)
			r = store_record_format(&rec, &t->held);
		if (r >= 0 && t->held.len >= 256 * 1024)
			r = store_records_write_held(t);
	}
	if (r < 0) {
		(void)renameat2(dfd, name, dirfd, name, RENAME_NOREPLACE);
		return r == -ESTALE ? 0 : r;
	}
	if (store_set_add(&t->seen, path) < 0)
		t->seen_incomplete = true;
	t->stats.saved++;
	return 1;
}

int store_unkeep_file(struct store_turn *t, int dirfd, const char *name)
{
	if (!t || t->file_tree_dir_fd < 0)
		return -EBADF;
	return renameat2(t->file_tree_dir_fd, name, dirfd, name, RENAME_NOREPLACE) < 0
		   ? negative_errno()
		   : 0;
}

/* The files below at/name (rel: its path, "" for the tree's root) with no record in seen. */
static int recover_dir(int at, const char *name, const char *tree, struct strbuf *rel,
		       const struct path_set *seen, struct strbuf *out, unsigned depth)
{
	if (depth > PATH_MAX / 2)
		return -ELOOP;
	DIR *d = opendir_at(at, name);
	if (!d)
		return negative_errno();
	size_t len = rel->len;
	int r = 0;
	for (struct dirent *de; r >= 0 && (errno = 0, de = readdir(d));) {
		if (dot_or_dot_dot(de->d_name))
			continue;
		struct stat st;
		strbuf_truncate(rel, len);
		if ((r = strbuf_printf(rel, "/%s", de->d_name)) < 0)
			break;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			r = errno == ENOENT ? 0 : negative_errno();
		} else if (S_ISDIR(st.st_mode)) {
			r = recover_dir(dirfd(d), de->d_name, tree, rel, seen, out, depth + 1);
		} else if (S_ISREG(st.st_mode) && !store_set_contains(seen, rel->buf)) {
			struct store_record rec = {.path = rel->buf, .tree = (char *)tree};
			store_record_from_stat(&rec, &st);
			rec.ino = (uint64_t)st.st_ino;
			r = strbuf_appendc(out, '\n');
			if (r >= 0)
				r = store_record_format(&rec, out);
		}
	}
	if (r >= 0 && errno)
		r = negative_errno();
	strbuf_truncate(rel, len);
	closedir(d);
	return r;
}

int store_file_trees_recover(int turn_fd, const struct path_set *seen, int manifest_fd)
{
	DIR *d = opendir_at(turn_fd, "trees");
	if (!d)
		return errno == ENOENT ? 0 : negative_errno();
	struct strbuf rel = STRBUF_INIT, out = STRBUF_INIT;
	int r = 0;
	for (struct dirent *de; r >= 0 && (errno = 0, de = readdir(d));) {
		/* the trees of files kept by a move (those kept whole were recorded first) */
		if (de->d_name[0] != 'f' || !store_id_valid(de->d_name))
			continue;
		strbuf_reset(&rel);
		r = recover_dir(dirfd(d), de->d_name, de->d_name, &rel, seen, &out, 0);
	}
	if (r >= 0 && errno)
		r = negative_errno();
	closedir(d);
	if (r >= 0 && out.len)
		r = loop_write(manifest_fd, out.buf, out.len);
	strbuf_free(&rel);
	strbuf_free(&out);
	return r;
}

/* ---- reading ---- */

int store_tree_filter(struct store_record *rec, void *userdata)
{
	struct store_tree_filter *f = userdata;
	if (rec->tree) {
		if (!f->last || strcmp(f->last, rec->tree) != 0) {
			char p[8 + STORE_ID_MAX];
			snprintf(p, sizeof p, "trees/%s", rec->tree);
			struct stat st;
			free(f->last);
			f->last = strdup(rec->tree);
			f->present = fstatat(f->turn_fd, p, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
				     S_ISDIR(st.st_mode);
			if (!f->last)
				return -ENOMEM;
		}
		if (!f->present)
			return 0; /* a tree that never reached the store: the paths stayed */
	}
	return f->fn(rec, f->userdata);
}

int store_record_content_path(struct store *s, const char *turn_id, const struct store_record *rec,
			      char **ret)
{
	if (rec->tree) {
		if (!store_id_valid(turn_id) || !store_id_valid(rec->tree))
			return -EINVAL;
		return asprintf(ret, "%s/modify_backup/turns/%s/trees/%s%s", s->session_dir,
				turn_id, rec->tree, rec->path + rec->tree_at) < 0
			   ? -ENOMEM
			   : 0;
	}
	if (strlen(rec->hash) != 64)
		return -ENOENT;
	return asprintf(ret, "%s/modify_backup/objects/%.2s/%s", s->session_dir, rec->hash,
			rec->hash + 2) < 0
		   ? -ENOMEM
		   : 0;
}

int store_record_content_open(struct store *s, const char *turn_id, const struct store_record *rec)
{
	if (!rec->tree)
		return store_object_open(s, rec->hash);
	if (!store_id_valid(turn_id) || !store_id_valid(rec->tree))
		return -EINVAL;
	_cleanup_free_ char *rel = NULL;
	if (asprintf(&rel, "%s/trees/%s%s", turn_id, rec->tree, rec->path + rec->tree_at) < 0)
		return -ENOMEM;
	/* below the turn, through directories only (the tree as it was: nobody changes it) */
	struct open_how how = {.flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
			       .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
					  RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV};
	_cleanup_close_ int fd = (int)syscall(SYS_openat2, s->turns_fd, rel, &how, sizeof how);
	if (fd < 0)
		return negative_errno();
	struct stat st;
	if (fstat(fd, &st) < 0)
		return negative_errno();
	int64_t mtime = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	/* the inode that was kept, as it was: anything else is not the pre-image */
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_ino != rec->ino ||
	    (uint64_t)st.st_size != rec->size || mtime != rec->mtime_ns)
		return -EBADMSG;
	return TAKE_FD(fd);
}
