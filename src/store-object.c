/* SPDX-License-Identifier: MIT */
/*
 * Content objects: hashing (libcrypto, loaded on first use), copying a file into the store, keeping
 * a file by a hard link instead of a copy, and the copies waiting for the next store_sync().
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dlfcn.h>
#include <openssl/evp.h>

#include "basic/alloc-util.h"
#include "basic/fd-util.h"
#include "basic/fs-util.h"
#include "basic/hexdecoct.h"
#include "basic/macro.h"
#include "basic/stat-util.h"
#include "basic/strbuf.h"
#include "store-internal.h"
#include "store.h"

#define IO_BUF (128 * 1024)

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

/* Copy all of src (from offset 0) to the empty dst: reflink, else copy_file_range, else read. */
int store_copy_fd(int src, int dst)
{
	if (ioctl(dst, FICLONE, src) == 0)
		return 0;
	if (lseek(src, 0, SEEK_SET) < 0 || ftruncate(dst, 0) < 0 || lseek(dst, 0, SEEK_SET) < 0)
		return negative_errno();
	return copy_bytes(src, dst);
}

/* ---- objects ---- */

/* The objects/<xx>/ directory of a (checked, lower-case hex) hash as a number, 0 to 255. */
static unsigned prefix_index(const char *hash)
{
	return ((unsigned)unhexchar(hash[0]) << 4 | (unsigned)unhexchar(hash[1])) & 0xff;
}

/*
 * objects/<xx>/ for hash exists (made once, then remembered: nothing removes these directories) and
 * is marked for the next store_sync()'s fsync. Objects are then named "<xx>/<rest>" relative to
 * objects_fd, with no directory fd to open per object.
 */
static int object_prefix_ensure(struct store_turn *t, const char *hash)
{
	struct store *s = t->store;
	unsigned idx = prefix_index(hash);
	t->dirty_prefix[idx / 8] |= (uint8_t)(1u << (idx % 8));
	if (s->known_prefix[idx / 8] & (1u << (idx % 8)))
		return 0;
	char prefix[3] = {hash[0], hash[1], '\0'};
	int r = store_mkdir_0700_at(s->objects_fd, prefix);
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
	unsigned idx = prefix_index(hash);
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

/* An object with a name besides its own: see object_commit(). */
static bool object_shared(struct store *s, const char *obj)
{
	struct stat st;
	return fstatat(s->objects_fd, obj, &st, AT_SYMLINK_NOFOLLOW) >= 0 && st.st_nlink > 1;
}

/*
 * Put tmp/<tmp_name> under its hash; if the object already exists the temp file is dropped.
 * Returns 1 if a new object was stored.
 *
 * An existing object that has another name besides (st_nlink > 1) is replaced by the copy instead.
 * A broker killed between keeping a file by a link (store_file_link_in()) and the change leaves
 * that file sharing its inode with the object: the file's next backup, of the same content,
 * would find the object, and the change in place that follows would change the object with it.
 * A kept name of a live turn is also such a name; replacing that object by an equal copy
 * costs nothing more than dropping the copy would.
 */
static int object_commit(struct store_turn *t, const char *tmp_name, const char *hash,
			 uint64_t size)
{
	char obj[66];
	object_name(hash, obj);
	int r = object_prefix_ensure(t, hash);
	if (r < 0)
		return r;
	bool present = object_present(t->store, obj, size);
	if (present && !object_shared(t->store, obj)) {
		(void)unlinkat(t->store->tmp_fd, tmp_name, 0);
		return 0;
	}
	r = renameat(t->store->tmp_fd, tmp_name, t->store->objects_fd, obj);
	if (r < 0 && errno == ENOENT && object_prefix_forget(t, hash) >= 0)
		r = renameat(t->store->tmp_fd, tmp_name, t->store->objects_fd, obj);
	return r < 0 ? negative_errno() : !present;
}

int store_object_open(struct store *s, const char *hash)
{
	if (strlen(hash) != 64 || strchr(hash, '/'))
		return -EINVAL;
	char prefix[3] = {hash[0], hash[1], '\0'};
	_cleanup_close_ int pfd = store_open_dir_at(s->objects_fd, prefix);
	if (pfd < 0)
		return pfd;
	int fd = openat(pfd, hash + 2, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? negative_errno() : fd;
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
 * whose default action kills: brokered has no use for SIGIO and ignores it from the first probe
 * on (a command brokered starts gets every disposition back to the default: run-child.c; one
 * SIG_IGN instead of masking, waiting and unmasking around every probe).
 */
static bool maybe_open_for_writing(int fd)
{
	static bool sigio_ignored;
	if (!sigio_ignored) {
		struct sigaction sa = {.sa_handler = SIG_IGN};
		if (sigaction(SIGIO, &sa, NULL) < 0)
			return true;
		sigio_ignored = true;
	}
	int r = fcntl(fd, F_SETLEASE, F_RDLCK);
	if (r >= 0)
		(void)fcntl(fd, F_SETLEASE, F_UNLCK);
	return r < 0;
}

int store_file_link_in(struct store_turn *t, int dirfd, const char *name, const struct stat *st,
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
	char obj[66];
	const struct proc_fd_at self = proc_fd_at(fd);
	object_name(rec->hash, obj);
	/* objects/<xx>/ needs no fsync for this link if a kept name carries the record */
	unsigned idx = prefix_index(rec->hash);
	uint8_t dirty = t->dirty_prefix[idx / 8];
	if ((r = object_prefix_ensure(t, rec->hash)) < 0)
		return r;
	/* The kept name first: a broker killed after it finds the file unshared at the next start
	 * (store_kept_settle()), wherever it stopped. */
	bool kept = store_kept_name(t, rec, fd) > 0, created = false;
	r = linkat(self.dirfd, self.name, s->objects_fd, obj, AT_SYMLINK_FOLLOW);
	if (r < 0 && errno == ENOENT && object_prefix_forget(t, rec->hash) >= 0)
		r = linkat(self.dirfd, self.name, s->objects_fd, obj, AT_SYMLINK_FOLLOW);
	if (r >= 0) {
		created = true;
		/* A name added meanwhile would share the stored inode: take a copy instead. */
		if (fstat(fd, &st2) < 0 || st2.st_nlink != (kept ? 3u : 2u)) {
			(void)unlinkat(s->objects_fd, obj, 0);
			r = -EAGAIN;
		}
	} else if (errno == EEXIST) {
		r = object_present(s, obj, rec->size)
			? 0
			: -EAGAIN; /* a leftover under that name: the copy path replaces it */
	} else {
		r = negative_errno(); /* EXDEV, EPERM, EMLINK: the caller copies */
	}
	if (r < 0) {
		if (kept)
			store_kept_name_drop(t, rec);
		return r;
	}
	rec->moved = true;
	r = store_kept_append(t, rec, kept);
	if (r < 0 && kept)
		store_kept_name_drop(t, rec);
	if (r > 0) {
		t->dirty_prefix[idx / 8] = dirty;
		t->kept_prefix[idx / 8] |= (uint8_t)(1u << (idx % 8));
	}
	if (r < 0 && created)
		(void)unlinkat(s->objects_fd, obj, 0);
	if (r >= 0 && created)
		t->stats.bytes_stored += rec->size;
	return r < 0 ? r : 0;
}

static int pending_push(struct store_turn *t, int fd, char *tmp, const struct store_record *rec)
{
	if (ARRAY_GROW(t->pending, t->cap_pending, t->n_pending, 16) < 0)
		return -ENOMEM;
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
		store_set_remove(&t->seen, p->path);
	free(p->tmp_name);
	free(p->line);
	free(p->path);
	*p = (struct pending){.fd = -1};
}

/* Copy the file into a temp file of the store and hash the copy (the copy cannot change). */
int store_file_copy_in(struct store_turn *t, int dirfd, const char *name, const struct stat *st,
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
		if (r >= 0 && (r = store_record_append(t, rec)) >= 0) {
			free(tmp);
			return 0;
		}
	}
	safe_close(fd);
	(void)unlinkat(s->tmp_fd, tmp, 0);
	free(tmp);
	return r;
}

/* ---- durability ---- */

int store_sync_pending(struct store_turn *t, bool durable)
{
	int r = store_records_write_held(t);
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
		if ((r = store_manifest_append(t, p->line, strlen(p->line))) < 0)
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
