/* SPDX-License-Identifier: MIT */
/*
 * Pre-images: the record of a path before its first change in a turn (absent, file, directory,
 * symlink, other), the manifest appends, and the durability barrier (store_sync()).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "basic/macro.h"
#include "basic/path-util.h"
#include "basic/strbuf.h"
#include "store-internal.h"
#include "store.h"

#define TREE_DEPTH_MAX 2048

/* ---- manifest appends ---- */

/*
 * One record, one write(2) with O_APPEND: the kernel appends each write whole, so concurrent
 * writers never interleave and need no lock. Every record starts with '\n': a tail torn by a crash
 * or by a failed (short) write is then a line of its own, which readers skip (its checksum does not
 * match), and it cannot swallow this record. Empty lines are skipped by readers too.
 */
int store_manifest_append(struct store_turn *t, const char *line, size_t n)
{
	struct iovec iov[2] = {{(void *)"\n", 1}, {(void *)line, n}};
	ssize_t k = RETRY_EINTR(writev(t->manifest_fd, iov, 2));
	if (k < 0)
		return negative_errno();
	return k == (ssize_t)(n + 1) ? 0 : -ENOSPC;
}

int store_record_append(struct store_turn *t, const struct store_record *rec)
{
	struct strbuf sb = STRBUF_INIT;
	int r = store_record_format(rec, &sb);
	if (r >= 0)
		r = store_manifest_append(t, sb.buf, sb.len);
	strbuf_free(&sb);
	if (r >= 0 && rec->kind != STORE_KIND_ABSENT)
		t->dirty_manifest = true;
	return r;
}

int store_records_write_held(struct store_turn *t)
{
	if (!t->held.len)
		return 0;
	int r = store_manifest_append(t, t->held.buf, t->held.len);
	strbuf_reset(&t->held);
	/* commit cannot go by the paths in memory: it rebuilds what it can from the store */
	if (r < 0)
		t->seen_incomplete = true;
	return r;
}

void store_records_hold(struct store_turn *t)
{
	if (t && t->opts.enabled)
		t->holding = true;
}

int store_records_release(struct store_turn *t)
{
	if (!t)
		return 0;
	t->holding = false;
	return store_records_write_held(t);
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

int store_readlink_at(int dirfd, const char *name, size_t hint, char **ret)
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

static int preimage_file(struct store_turn *t, int dirfd, const char *name, const struct stat *st,
			 unsigned flags, struct store_record *rec, enum store_result *res)
{
	if ((uint64_t)st->st_size > t->opts.max_size_bytes) {
		if (t->opts.deny_oversize)
			return -EFBIG;
		rec->not_backed_up = true;
		*res = STORE_RESULT_NOT_BACKED_UP;
		return store_record_append(t, rec);
	}
	*res = STORE_RESULT_SAVED;
	/* A file whose name is about to go (deleted, renamed over) is kept by a hard link,
	 * recorded, and only then removed by the caller: at no point is it neither in place nor
	 * recorded. */
	if ((flags & (STORE_CONSUME | STORE_REPLACE)) && st->st_nlink == 1 &&
	    st->st_dev == t->store->dev) {
		int r = store_file_link_in(t, dirfd, name, st, rec);
		if (r != -EXDEV && r != -EAGAIN && r != -EPERM && r != -EMLINK)
			return r;
	}
	return store_file_copy_in(t, dirfd, name, st, rec);
}

int store_preimage_absent(struct store_turn *t, const char *path)
{
	if (!t || !t->opts.enabled)
		return 0;
	if (!path || path[0] != '/')
		return -EINVAL;
	if (store_set_contains(&t->seen, path))
		return 0;
	int r;
	if (t->lazy && (r = store_turn_materialize(t)) < 0)
		return r;
	struct store_record rec = {
	    .path = (char *)path, .call = t->call, .kind = STORE_KIND_ABSENT};
	if (t->holding) {
		if ((r = t->held.len ? strbuf_appends(&t->held, "\n") : 0) < 0 ||
		    (r = store_record_format(&rec, &t->held)) < 0)
			return r;
		if (t->held.len >= 256 * 1024 && (r = store_records_write_held(t)) < 0)
			return r;
	} else if ((r = store_record_append(t, &rec)) < 0) {
		return r;
	}
	t->stats.absent++;
	if ((r = store_set_add(&t->seen, path)) < 0)
		t->seen_incomplete = true;
	return r;
}

static int preimage_one(struct store_turn *t, int dirfd, const char *name, const char *path,
			const struct stat *known, unsigned flags, enum store_result *res,
			bool *consumed)
{
	if (store_set_contains(&t->seen, path)) {
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
		r = store_record_append(t, &rec);
	} else {
		store_record_from_stat(&rec, &st);
		*res = STORE_RESULT_SAVED;
		/* the inode: names of one inode are made one again by undo */
		if (rec.kind == STORE_KIND_FILE)
			rec.ino = (uint64_t)st.st_ino;
		/* the file itself into the store: recorded and counted there */
		if (rec.kind == STORE_KIND_FILE && (flags & STORE_MOVE) &&
		    (r = store_keep_file(t, dirfd, name, path, &st, !(flags & STORE_VOLATILE))) !=
			0) {
			*consumed = r > 0;
			return MIN(r, 0);
		}
		if (rec.kind == STORE_KIND_FILE)
			r = preimage_file(t, dirfd, name, &st, flags, &rec, res);
		else if (rec.kind == STORE_KIND_SYMLINK &&
			 (r = store_readlink_at(dirfd, name, (size_t)st.st_size, &rec.target)) >= 0)
			r = MIN(store_kept_record(t, &rec, -1), 0);
		else if (rec.kind == STORE_KIND_DIR)
			r = MIN(store_kept_record(t, &rec, -1), 0);
		else if (rec.kind != STORE_KIND_SYMLINK)
			r = store_record_append(t, &rec);
		free(rec.target);
	}
	if (r < 0)
		return r;
	if ((r = store_set_add(&t->seen, path)) < 0) {
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
		enum store_result cres = STORE_RESULT_ALREADY;
		if ((r = path_join(path, de->d_name, &child)) < 0 ||
		    (r = preimage_tree(t, fd, de->d_name, child.buf, NULL, 0, depth + 1, &cres)) <
			0)
			break;
		/* A pre-image saved below is the tree's: the caller flushes before the change only
		 * then, even when the directory itself was recorded earlier (ALREADY). */
		if (cres == STORE_RESULT_SAVED)
			*res = STORE_RESULT_SAVED;
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
	if (t->lazy && !store_set_contains(&t->seen, path) && (r = store_turn_materialize(t)) < 0)
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
	return t && t->opts.enabled && path && store_set_contains(&t->seen, path);
}

/* ---- durability ---- */

bool store_turn_durable(const struct store_turn *t)
{
	return t && t->opts.enabled && t->opts.sync;
}

int store_flush(struct store_turn *t)
{
	if (!t || !t->opts.enabled)
		return 0;
	/* Records and objects in place, not yet flushed: a later store_sync() flushes them. */
	return store_sync_pending(t, false);
}

/* fsync the objects/<xx>/ directories in the bitset (not needed where metadata is ordered). */
int store_fsync_prefixes(struct store_turn *t, const uint8_t set[32])
{
	for (unsigned i = 0; i < 256 && !t->store->ordered_metadata; i++) {
		if (!(set[i / 8] & (1u << (i % 8))))
			continue;
		char prefix[3];
		snprintf(prefix, sizeof prefix, "%02x", i);
		_cleanup_close_ int pfd = store_open_dir_at(t->store->objects_fd, prefix);
		if (pfd < 0)
			return pfd;
		int r = store_fsync_dirfd(pfd);
		if (r < 0)
			return r;
	}
	return 0;
}

int store_sync(struct store_turn *t)
{
	if (!t || !t->opts.enabled)
		return 0;
	int r = store_sync_pending(t, true);
	if (r < 0)
		return r;
	if (!t->opts.sync) {
		t->dirty_manifest = t->dirty_objects = false;
		memset(t->dirty_prefix, 0, sizeof t->dirty_prefix);
		return 0;
	}
	if ((r = store_fsync_prefixes(t, t->dirty_prefix)) < 0)
		return r;
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
