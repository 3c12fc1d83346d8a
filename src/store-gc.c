/* SPDX-License-Identifier: MIT */
/* gc: drop committed turns older than a limit, leftover temp files, then unreferenced objects. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/macro.h"
#include "store-internal.h"
#include "store.h"

/* ---- gc ---- */

int store_remove_tree_at(int dirfd, const char *name)
{
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	/* an empty directory we may not read (a kept likeness of a mode 0 one) goes by rmdir */
	if (fd < 0 && errno == EACCES && unlinkat(dirfd, name, AT_REMOVEDIR) >= 0)
		return 0;
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
		int k = store_remove_tree_at(fd, de->d_name);
		if (k < 0)
			r = k;
	}
	closedir(d);
	if (r >= 0 && unlinkat(dirfd, name, AT_REMOVEDIR) < 0)
		r = negative_errno();
	return r;
}

static int add_ref(struct store_record *rec, void *refs)
{
	int r = rec->hash[0] ? store_set_add(refs, rec->hash) : 0;
	return r < 0 ? r : 0;
}

static int gc_collect_refs(struct store *s, struct path_set *refs)
{
	struct store_turn_info *v = NULL;
	size_t n = 0;
	int r = store_list_turns(s, &v, &n);
	for (size_t i = 0; r >= 0 && i < n; i++) {
		_cleanup_close_ int tfd = store_open_dir_at(s->turns_fd, v[i].id);
		if (tfd < 0)
			continue;
		r = store_manifest_foreach_at(tfd, "manifest", add_ref, refs);
		if (r == -ENOENT)
			r = 0;
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
		_cleanup_close_ int pfd = store_open_dir_at(s->objects_fd, de->d_name);
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
			if (store_set_contains(refs, hash) || fstatat(pfd, oe->d_name, &ost, 0) < 0)
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
	int64_t limit = store_now_ns() -
			(int64_t)MIN(older_than_sec, (uint64_t)INT64_MAX / 2000000000) * 1000000000;
	int r = store_list_turns(s, &v, &n);
	for (size_t i = 0; r >= 0 && i < n; i++) {
		if (!v[i].committed || v[i].commit_ns > limit || (cur && strcmp(cur, v[i].id) == 0))
			continue;
		if ((r = store_remove_tree_at(s->turns_fd, v[i].id)) >= 0)
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
	store_set_free(&refs);
	(void)flock(s->lock_fd, LOCK_SH);
	if (r >= 0 && ret)
		*ret = st;
	return r;
}
