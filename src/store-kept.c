/* SPDX-License-Identifier: MIT */
/*
 * Kept names: pre-images of deleted and renamed-over files made durable by the file system's own
 * metadata ordering, without a flush per change.
 *
 * A file whose only name is about to be removed (unlink, rename over it) is kept by a hard link
 * into objects/ (store-object.c), and its record is appended to the manifest. Flushing that record
 * (fdatasync of the manifest: a journal commit and a cache flush) before every change was three
 * quarters of `rm -rf`'s cost. Instead, the file gets a second link, kept/<turn>/<its path,
 * encoded>, made before the change: the name *is* the record's path, and the inode carries the rest
 * of it (type, mode, owner, mtime, size, inode number; a kept file has one name, so its link count
 * was 1), and its content hashes to the object's name.
 *
 * Why this is as durable as the flush it replaces, on the file systems where it is used:
 *  - ext4 with a journal: every link, mkdir, unlink and rename joins the running jbd2 transaction
 * at the time of the call, transactions commit in order, and recovery replays whole committed
 *    transactions in order. So after a crash the metadata is a prefix of the operations in the
 *    order they were made: if the change (an unlink or rename, itself metadata) reached the disk,
 *    so did the object link and the kept name made before it. Used with data=ordered or
 *    data=journal and without fast_commit (a fast commit writes a subset of the changes, so the
 *    prefix argument is not made for it); data=writeback is left out too, as the issue asks,
 *    though it orders metadata alike (it may show stale blocks in recently written files): there
 *    only the directory fsyncs are skipped, as an fsync of the manifest commits them too.
 *  - XFS: metadata changes go through the log in order (CIL checkpoints are written and recovered
 *    in sequence): the same prefix property.
 *  - ext4 without a journal (as on this development machine's root file system): nothing is
 *    ordered, so a kept file's name is written out by one fsync of kept/<turn>/ before the
 *    change, in place of the flushes of the manifest and of the objects/ directory (the recovery
 *    links the object again from the kept name). Directories and symlinks are flushed as before.
 *  - Everything else keeps the flush: btrfs (an fsync of one file writes a log tree that can
 *    carry a later unlink in its directory without an earlier link elsewhere) and unknown file
 *    systems.
 * The file's own data is not flushed either way (it was not before: keeping a file by a link
 * writes no data); after a power cut the kept inode holds what the disk held for the file.
 *
 * Recovery: a turn's kept/ directory is "settled" when the turn commits (the manifest is flushed,
 * then the names go), and at store_open() for a turn that nobody holds (its broker was killed, the
 * machine lost power): each kept name whose path has no record in the manifest becomes a record
 * again (rebuilt from the inode, its content hashed and linked into objects/ if missing), the
 * manifest is flushed, and the names are removed. A kill without a power cut loses nothing even
 * before that: the records are in the page cache.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "basic/fd-util.h"
#include "basic/fs-util.h"
#include "basic/macro.h"
#include "basic/strbuf.h"
#include "store-internal.h"
#include "store.h"

#define EXT4_MAGIC 0xEF53
#define XFS_MAGIC  0x58465342

/* Read a small file of /proc or /sys into buf (NUL-terminated); false if it cannot be read. */
static bool read_small(const char *path, char *buf, size_t size)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t k = RETRY_EINTR(read(fd, buf, size - 1));
	if (k < 0)
		return false;
	buf[k] = '\0';
	return true;
}

/*
 * The ext4 file system on dev: -1 when it cannot be told, 0 without a journal, 1 with one (its
 * metadata is committed in order), 2 with one and data=ordered or data=journal.
 */
static int ext4_journal_mode(dev_t dev)
{
	char link[PATH_MAX], path[PATH_MAX], target[PATH_MAX], buf[4096];
	snprintf(link, sizeof link, "/sys/dev/block/%u:%u", major(dev), minor(dev));
	ssize_t k = readlink(link, target, sizeof target - 1);
	if (k <= 0)
		return -1;
	target[k] = '\0';
	const char *name = strrchr(target, '/') ? strrchr(target, '/') + 1 : target;
	if (strlen(name) > NAME_MAX)
		return -1;
	/* "<none>" without a journal, else the pid of its jbd2 thread */
	if (snprintf(path, sizeof path, "/sys/fs/ext4/%s/journal_task", name) >= (int)sizeof path ||
	    !read_small(path, buf, sizeof buf))
		return -1;
	if (strncmp(buf, "<none>", 6) == 0)
		return 0;
	if (buf[0] < '0' || buf[0] > '9' ||
	    snprintf(path, sizeof path, "/proc/fs/ext4/%s/options", name) >= (int)sizeof path ||
	    !read_small(path, buf, sizeof buf))
		return -1;
	/* one option per line; fast commits show as "fc_debug_force" (the flag's token) */
	if (strstr(buf, "fc_debug_force") || strstr(buf, "fast_commit"))
		return -1;
	return strstr(buf, "\ndata=ordered\n") || strstr(buf, "\ndata=journal\n") ? 2 : 1;
}

void store_detect_ordering(struct store *s, int fd)
{
	struct statfs sf;
	s->ordered_metadata = s->ordered_records = s->kept_fsync = false;
	if (fstatfs(fd, &sf) < 0)
		return;
	if (sf.f_type == XFS_MAGIC) {
		s->ordered_metadata = s->ordered_records = true;
	} else if (sf.f_type == EXT4_MAGIC) {
		int m = ext4_journal_mode(s->dev);
		s->ordered_metadata = m >= 1;
		s->ordered_records = m >= 2;
		s->kept_fsync = m == 0;
	}
	/* Tests: force the flushes (directories and records), or assume an ordered file system
	 * on one that is not (to exercise recovery where no journaled file system is at hand). */
	if (getenv("BROKERED_STORE_FSYNC_DIRS"))
		s->ordered_metadata = s->ordered_records = s->kept_fsync = false;
	else if (getenv("BROKERED_STORE_ASSUME_ORDERED"))
		s->ordered_metadata = s->ordered_records = true;
}

/* ---- names ---- */

/* path (absolute) → a file name: the leading '/' dropped, '%' and '/' written as %25 and %2F. */
static int kept_name(const char *path, struct strbuf *out)
{
	strbuf_reset(out);
	int r = 0;
	for (const char *p = path + 1; r >= 0 && *p; p++)
		r = *p == '/'	? strbuf_appends(out, "%2F")
		    : *p == '%' ? strbuf_appends(out, "%25")
				: strbuf_appendc(out, *p);
	if (r >= 0 && (out->len == 0 || out->len > NAME_MAX))
		r = -ENAMETOOLONG;
	return r;
}

/* The inverse of kept_name(); -EINVAL for a name it cannot have made. */
static int kept_path(const char *name, struct strbuf *out)
{
	strbuf_reset(out);
	int r = strbuf_appendc(out, '/');
	for (const char *p = name; r >= 0 && *p; p++) {
		if (*p != '%') {
			r = strbuf_appendc(out, *p);
		} else if (strncmp(p, "%2F", 3) == 0 || strncmp(p, "%25", 3) == 0) {
			r = strbuf_appendc(out, p[2] == 'F' ? '/' : '%');
			p += 2;
		} else {
			r = -EINVAL;
		}
	}
	return r;
}

/* ---- writing ---- */

/* kept/<turn>/, made at the turn's first kept name (an ordered mkdir, before that name). */
static int kept_dir(struct store_turn *t)
{
	struct store *s = t->store;
	if (t->kept_fd >= 0)
		return 0;
	int r = store_mkdir_0700_at(s->kept_fd, t->id);
	if (r < 0)
		return r;
	t->kept_fd = store_open_dir_at(s->kept_fd, t->id);
	if (t->kept_fd < 0)
		return t->kept_fd;
	/* without a journal, its entry in kept/ (and kept/ in the store) are written out now */
	if (s->kept_fsync && (fsync(s->kept_fd) < 0 || fsync(s->root_fd) < 0))
		return negative_errno();
	return 0;
}

int store_kept_mark(struct store_turn *t)
{
	return kept_dir(t);
}

/* kept/<turn>/<name> → the inode of fd, made before the change it protects. */
static int kept_link(struct store_turn *t, int fd, const char *name)
{
	return linkat(AT_FDCWD, FORMAT_PROC_FD_PATH(fd), t->kept_fd, name, AT_SYMLINK_FOLLOW) < 0
		   ? negative_errno()
		   : 0;
}

/*
 * kept/<turn>/<name>: a likeness of the directory (empty) or symlink of rec, with its mode, owner
 * and mtime, so that the name and the inode carry the whole record. A symlink only while its
 * target fits in the inode (ext4: under 60 bytes), where it is metadata; an owner other than ours
 * only where we may chown (root). Anything that does not come out exact is undone: -EXDEV.
 */
static int kept_likeness(struct store_turn *t, const struct store_record *rec, const char *name)
{
	int fd = t->kept_fd;
	if (rec->kind == STORE_KIND_DIR) {
		if (mkdirat(fd, name, 0700) < 0)
			return negative_errno();
	} else if (!rec->target || strlen(rec->target) >= 60) {
		return -EXDEV;
	} else if (symlinkat(rec->target, fd, name) < 0) {
		return negative_errno();
	}
	struct timespec ts[2] = {
	    {.tv_nsec = UTIME_OMIT},
	    {.tv_sec = rec->mtime_ns / 1000000000, .tv_nsec = rec->mtime_ns % 1000000000}};
	struct stat st;
	int r = 0;
	if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		r = negative_errno();
	/* chown first: it may clear set-id bits that the chmod then sets */
	if (r >= 0 && (st.st_uid != rec->uid || st.st_gid != rec->gid) &&
	    fchownat(fd, name, rec->uid, rec->gid, AT_SYMLINK_NOFOLLOW) < 0)
		r = negative_errno();
	if (r >= 0 && rec->kind == STORE_KIND_DIR && fchmodat(fd, name, rec->mode & 07777, 0) < 0)
		r = negative_errno();
	if (r >= 0 && (rec->mtime_ns < 0 || utimensat(fd, name, ts, AT_SYMLINK_NOFOLLOW) < 0))
		r = -EXDEV;
	if (r >= 0 && fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		r = negative_errno();
	if (r >= 0 &&
	    ((uint32_t)st.st_mode != rec->mode || st.st_uid != rec->uid || st.st_gid != rec->gid ||
	     (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec != rec->mtime_ns))
		r = -EXDEV;
	if (r < 0)
		(void)unlinkat(fd, name, rec->kind == STORE_KIND_DIR ? AT_REMOVEDIR : 0);
	return r;
}

int store_kept_name(struct store_turn *t, const struct store_record *rec, int fd)
{
	struct store *s = t->store;
	struct strbuf sb = STRBUF_INIT;
	bool kept = false;
	if (t->opts.sync && (s->ordered_records || (s->kept_fsync && fd >= 0)) &&
	    kept_dir(t) >= 0 && kept_name(rec->path, &sb) >= 0)
		kept = (fd >= 0 ? kept_link(t, fd, sb.buf) : kept_likeness(t, rec, sb.buf)) >= 0;
	strbuf_free(&sb);
	/* Without a journal, nothing orders the kept name before the change: one fsync of the
	 * turn's kept/ directory writes it out (in place of the manifest's flush and of the
	 * objects/ directory's, whose link the recovery makes again from the kept name). */
	if (kept && s->kept_fsync && !s->ordered_records && fsync(t->kept_fd) < 0)
		kept = false;
	return kept;
}

void store_kept_name_drop(struct store_turn *t, const struct store_record *rec)
{
	struct strbuf sb = STRBUF_INIT;
	if (t->kept_fd >= 0 && kept_name(rec->path, &sb) >= 0)
		(void)unlinkat(t->kept_fd, sb.buf, 0);
	strbuf_free(&sb);
}

static int append_record(struct store_turn *t, const struct store_record *rec)
{
	struct strbuf sb = STRBUF_INIT;
	int r = store_record_format(rec, &sb);
	if (r >= 0)
		r = store_manifest_append(t, sb.buf, sb.len);
	strbuf_free(&sb);
	return r;
}

int store_kept_append(struct store_turn *t, const struct store_record *rec, bool kept)
{
	int r = append_record(t, rec);
	/* Where the kept name cannot carry the record (no ordering, a path too long for one name,
	 * the same path kept by another run of the turn, an owner we cannot give), the manifest is
	 * flushed as before. */
	if (r >= 0 && !kept)
		t->dirty_manifest = true;
	return r < 0 ? r : kept;
}

int store_kept_record(struct store_turn *t, const struct store_record *rec, int fd)
{
	int r = append_record(t, rec);
	if (r < 0)
		return r;
	bool kept = store_kept_name(t, rec, fd) > 0;
	if (!kept)
		t->dirty_manifest = true;
	return kept;
}

/* ---- recovery ---- */

/* The paths that have a record in the turn's manifest. */
static int manifest_paths(int turn_fd, struct path_set *ret)
{
	int r = store_manifest_foreach_turn(turn_fd, store_set_add_record, ret);
	return r == -ENOENT ? 0 : r;
}

/* objects/<hash> for the kept file kdir/name: linked from it unless an object of that size is
 * there. */
static int kept_object(struct store *s, int kdir, const char *name, const char *hash, uint64_t size)
{
	char prefix[3] = {hash[0], hash[1], '\0'}, obj[66] = {hash[0], hash[1], '/'};
	memcpy(obj + 3, hash + 2, 63);
	struct stat st;
	int r = 0;
	if (fstatat(s->objects_fd, obj, &st, AT_SYMLINK_NOFOLLOW) >= 0 && S_ISREG(st.st_mode) &&
	    (uint64_t)st.st_size == size) {
		if (s->ordered_metadata)
			return 0; /* there, and on disk if its kept name is */
	} else {
		if ((r = store_mkdir_0700_at(s->objects_fd, prefix)) < 0)
			return r;
		(void)unlinkat(s->objects_fd, obj, 0); /* a leftover of another size */
		if (linkat(kdir, name, s->objects_fd, obj, 0) < 0)
			return negative_errno();
	}
	/* written out before the kept name that now holds it goes */
	if (r > 0 && store_fsync_dirfd(s->objects_fd) < 0)
		return negative_errno();
	_cleanup_close_ int pfd = store_open_dir_at(s->objects_fd, prefix);
	return pfd < 0 ? pfd : store_fsync_dirfd(pfd);
}

/* The record of the kept file kdir/name for path, appended to the manifest (manifest_fd -1: its
 * object only). */
static int kept_recover_one(struct store *s, int kdir, const char *name, const char *path,
			    int manifest_fd)
{
	_cleanup_close_ int fd = -1;
	struct stat st;
	if (fstatat(kdir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return negative_errno();
	if (S_ISREG(st.st_mode) &&
	    ((fd = openat(kdir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)) <
		 0 ||
	     fstat(fd, &st) < 0))
		return negative_errno();
	struct store_record rec = {.path = (char *)path};
	store_record_from_stat(&rec, &st);
	int r = 0;
	if (S_ISREG(st.st_mode)) {
		rec.ino = (uint64_t)st.st_ino;
		rec.nlink = 1; /* only a file with one name is kept by a link */
		rec.moved = true;
		r = store_hash_fd(fd, rec.hash);
		if (r >= 0)
			r = kept_object(s, kdir, name, rec.hash, rec.size);
	} else if (S_ISLNK(st.st_mode)) {
		r = store_readlink_at(kdir, name, (size_t)st.st_size, &rec.target);
	} else if (!S_ISDIR(st.st_mode)) {
		return 0;
	}
	if (manifest_fd < 0) { /* the record is there: the object only */
		free(rec.target);
		return r;
	}
	struct strbuf sb = STRBUF_INIT;
	if (r >= 0)
		r = strbuf_appendc(&sb, '\n');
	if (r >= 0)
		r = store_record_format(&rec, &sb);
	if (r >= 0)
		r = loop_write(manifest_fd, sb.buf, sb.len);
	strbuf_free(&sb);
	free(rec.target);
	return r;
}

/*
 * A kept file that is still at its path (the broker was killed, or the change failed, between the
 * link and the change): the change never happened, and the object must not share the inode that
 * the path goes on changing. If objects/ links it, the link is replaced by a copy. 1: unchanged.
 */
static int kept_unshare(struct store *s, int kdir, const char *name, const char *path)
{
	struct stat kst, pst, ost;
	if (fstatat(kdir, name, &kst, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(kst.st_mode) ||
	    lstat(path, &pst) < 0 || pst.st_dev != kst.st_dev || pst.st_ino != kst.st_ino)
		return 0;
	_cleanup_close_ int fd = openat(kdir, name, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
	char hash[65], obj[66];
	int r = fd < 0 ? negative_errno() : store_hash_fd(fd, hash);
	if (r < 0)
		return r;
	obj[0] = hash[0], obj[1] = hash[1], obj[2] = '/';
	memcpy(obj + 3, hash + 2, 63);
	if (fstatat(s->objects_fd, obj, &ost, AT_SYMLINK_NOFOLLOW) < 0 || ost.st_ino != kst.st_ino)
		return 1;
	_cleanup_free_ char *tmp = NULL;
	if ((r = store_random_name("cp-", &tmp)) < 0)
		return r;
	int tfd = openat(s->tmp_fd, tmp, O_CREAT | O_EXCL | O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (tfd < 0)
		return negative_errno();
	r = store_copy_fd(fd, tfd);
	if (r >= 0 && store_durable_enabled() && fdatasync(tfd) < 0)
		r = negative_errno();
	safe_close(tfd);
	if (r >= 0 && renameat(s->tmp_fd, tmp, s->objects_fd, obj) < 0)
		r = negative_errno();
	if (r < 0)
		(void)unlinkat(s->tmp_fd, tmp, 0);
	return r < 0 ? r : 1;
}

/* Records for the kept names of kdir whose paths have none in the turn's manifest. */
static int kept_recover(struct store *s, int turn_fd, int kdir, int manifest_fd)
{
	struct path_set seen = {0};
	int r = manifest_paths(turn_fd, &seen);
	int fd = r < 0 ? -1 : dup(kdir);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (r >= 0 && !d) {
		safe_close(fd);
		r = -ENOMEM;
	}
	struct strbuf path = STRBUF_INIT;
	for (struct dirent *de; r >= 0 && d && (de = readdir(d));) {
		if (de->d_name[0] == '.' &&
		    (!de->d_name[1] || (de->d_name[1] == '.' && !de->d_name[2])))
			continue;
		if (kept_path(de->d_name, &path) < 0)
			continue;
		if ((r = kept_unshare(s, kdir, de->d_name, path.buf)) != 0)
			continue; /* unchanged (or an error, which ends the loop) */
		/* Without ordered metadata the object's link may be what was lost: made again
		 * for every kept file, its record appended only where it is missing. */
		if (!store_set_contains(&seen, path.buf))
			r = kept_recover_one(s, kdir, de->d_name, path.buf, manifest_fd);
		else if (!s->ordered_metadata)
			r = kept_recover_one(s, kdir, de->d_name, path.buf, -1);
	}
	if (d)
		closedir(d);
	strbuf_free(&path);
	if (r >= 0)
		r = store_file_trees_recover(turn_fd, &seen, manifest_fd);
	store_set_free(&seen);
	return r;
}

int store_kept_settle(struct store *s, int turn_fd, const char *id, bool complete)
{
	_cleanup_close_ int kdir = store_open_dir_at(s->kept_fd, id);
	if (kdir == -ENOENT)
		return 0;
	if (kdir < 0)
		return kdir;
	_cleanup_close_ int mfd = openat(
	    turn_fd, "manifest", O_CREAT | O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (mfd < 0)
		return negative_errno();
	int r = complete ? 0 : kept_recover(s, turn_fd, kdir, mfd);
	if (r >= 0 && fdatasync(mfd) < 0)
		r = negative_errno();
	/* Every kept name has a flushed record now: the names can go. */
	return r < 0 ? r : store_remove_tree_at(s->kept_fd, id);
}

int store_kept_recover_all(struct store *s)
{
	int fd = dup(s->kept_fd);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		safe_close(fd);
		return -ENOMEM;
	}
	int r = 0;
	for (struct dirent *de; (de = readdir(d));) {
		if (!store_id_valid(de->d_name))
			continue;
		_cleanup_close_ int tfd = store_open_dir_at(s->turns_fd, de->d_name);
		if (tfd == -ENOENT) { /* the turn is gone (gc): so are its objects' records */
			(void)store_remove_tree_at(s->kept_fd, de->d_name);
			continue;
		}
		/* A turn in use (a live run holds it shared, a commit exclusively) is not ours. */
		if (tfd < 0 || flock(tfd, LOCK_EX | LOCK_NB) < 0)
			continue;
		int k = store_kept_settle(s, tfd, de->d_name, false);
		if (k < 0 && r >= 0)
			r = k;
		(void)flock(tfd, LOCK_UN);
	}
	closedir(d);
	return r;
}
