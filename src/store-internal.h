/* SPDX-License-Identifier: MIT */
/* Internals shared by the store-*.c files. Not for other modules. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "basic/strbuf.h"
#include "store.h"

/*
 * On-disk layout under the session directory $XDG_STATE_HOME/brokered/sessions/<id>/:
 *
 *   lock                        flock: LOCK_SH while a store is open, LOCK_EX for gc
 *   current                     id of the explicitly begun open turn (`turn begin`), if any
 *   current.lock                flock: serialises begin/join/commit of the explicit turn
 *   modify_backup/objects/ab/<62 hex>   content, named by SHA-256, written once, 0600
 *   modify_backup/tmp/          temp files on their way into objects/ (stale ones: gc)
 *   modify_backup/kept/<id>/<path, encoded>   hard links of the files a turn kept, named by
 *                               their paths: records that ride on the journal (store-kept.c)
 *   modify_backup/turns/<id>/   one turn: meta (one record line: state, message, times),
 *                               manifest (append-only pre-images), post (post-states, at
 *                               commit), calls (tool call ids, one escaped id per line),
 *                               trees/<tree id>/ (directories removed whole; t*: the tree, f*: the
 *                               files replaced, at their absolute paths: store-tree.c)
 */

#define STORE_ID_MAX	   128
#define STORE_META_MAX	   (64 * 1024)
#define STORE_MANIFEST_MAX ((size_t)1 << 30)

struct store_kv {
	const char *key, *value;
};

struct store {
	char *session_id;
	char *session_dir;
	int session_fd, root_fd, objects_fd, tmp_fd, turns_fd, kept_fd;
	int lock_fd;
	dev_t dev; /* file system of the store, for moving consumed files in */
	/* A journaled ext4 or XFS commits metadata in order: an fsync of the manifest also makes
	 * every earlier rename and link durable, so directories need no fsync of their own. */
	bool ordered_metadata;
	/* ... and kept names carry the records of kept files (store-kept.c): no flush for them. */
	bool ordered_records;
	/* ext4 without a journal: a kept file's name is made durable by an fsync of its directory
	 */
	bool kept_fsync;
	uint8_t known_prefix[32]; /* bitset: objects/<xx>/ directories known to exist */
};

struct path_set {
	char **slots;
	size_t cap, n;
};

/* A copied object waiting for store_sync(): fdatasync, rename into objects/, then its record. */
struct pending {
	int fd;
	char *tmp_name;
	char hash[65];
	char *line;
	char *path; /* in the path set; dropped again if the sync fails */
};

struct store_turn {
	struct store *store;
	struct store_options opts;
	char *id;
	char *call;
	int dir_fd, manifest_fd;
	int kept_fd; /* kept/<id>/, once this turn kept a file there */
	struct path_set seen;
	struct pending *pending;
	size_t n_pending, cap_pending;
	bool dirty_manifest, dirty_objects;
	/* Only this process writes the turn (a run's own, not a joined one), and every path it
	 * recorded is in seen: commit lists the paths from memory. */
	bool exclusive, seen_incomplete;
	uint8_t dirty_prefix[32]; /* bitset: objects/<xx>/ directories to fsync */
	uint8_t kept_prefix[32];  /* ... of kept files: without a journal, fsync'd at commit */
	struct store_stats stats;
	/* store_records_hold(): records of absent paths waiting to be written together */
	bool holding;
	struct strbuf held;
	/* A run's private turn is created on disk at its first pre-image: a command that changes
	 * nothing leaves no empty turn and pays no directory creation and flushes. */
	bool lazy;
	char *lazy_message;
	int64_t lazy_begin_ns;
	/* store_keep_file(): this turn's tree of files kept by a move (trees/<id>/, the files at
	 * their paths below it), and its directory used last */
	char *file_tree;
	int file_tree_fd;
	char *file_tree_dir; /* the path that directory stands for */
	int file_tree_dir_fd;
};

uint32_t store_crc32(const void *data, size_t n);
int store_line_begin(struct strbuf *out, size_t *ret_start);
int store_line_kv(struct strbuf *out, const char *key, const char *value, size_t n);
int store_line_kvs(struct strbuf *out, const char *key, const char *value);
int store_line_kvu(struct strbuf *out, const char *key, uint64_t v);
int store_line_end(struct strbuf *out, size_t start);
int store_line_split(char *line, size_t n, struct store_kv *kv, size_t max, size_t *ret_n);
int store_unescape_dup(const char *s, char **ret);
int store_record_parse_line(char *line, size_t n, struct store_record *ret);
/* A store_record_fn gathering records (those whose path keep accepts; keep NULL: all) in v. */
struct store_records_collector {
	struct store_record *v;
	size_t n, cap;
	bool (*keep)(const char *path, void *userdata);
	void *userdata;
};
int store_records_collect(struct store_record *rec, void *userdata);
/* Stream dirfd/name (a manifest or post file) through fn; -ENOENT if it is missing. */
int store_manifest_foreach_at(int dirfd, const char *name, store_record_fn fn, void *userdata);

/* store.c: directories, small files, the path set */
int store_mkdir_0700_at(int dirfd, const char *name);
/* ... and every missing directory on the way to it (relative to dirfd, or absolute) */
int store_mkdir_p_0700_at(int dirfd, const char *path);
int store_open_dir_at(int dirfd, const char *name);
int64_t store_now_ns(void);
int store_random_name(const char *prefix, char **ret);
bool store_durable_enabled(void);
int store_fsync_dirfd(int fd);
int store_read_file_at(int dirfd, const char *name, size_t max, char **ret, size_t *ret_n);
/* Replace dirfd/name atomically with data: temp file, fsync, rename, fsync of the directory. */
int store_write_file_atomic_at(int dirfd, const char *name, const char *data, size_t n);
bool store_set_contains(const struct path_set *set, const char *p);
int store_set_add(struct path_set *set, const char *p);
/* A store_record_fn adding the record's path to the path set userdata. */
int store_set_add_record(struct store_record *rec, void *set);
void store_set_remove(struct path_set *set, const char *p);
void store_set_free(struct path_set *set);

/* store-object.c: content objects */
int store_hash_fd(int fd, char ret_hex[65]);
int store_copy_fd(int src, int dst);
int store_file_link_in(struct store_turn *t, int dirfd, const char *name, const struct stat *st,
		       struct store_record *rec);
int store_file_copy_in(struct store_turn *t, int dirfd, const char *name, const struct stat *st,
		       struct store_record *rec);
/* Put the copies waiting for a flush in place (durable: flushed first) and record them. */
int store_sync_pending(struct store_turn *t, bool durable);

/* store-preimage.c */
int store_manifest_append(struct store_turn *t, const char *line, size_t n);
int store_record_append(struct store_turn *t, const struct store_record *rec);
/* Write the held records (store_records_hold()), if any. */
int store_records_write_held(struct store_turn *t);
void store_record_from_stat(struct store_record *r, const struct stat *st);
int store_readlink_at(int dirfd, const char *name, size_t hint, char **ret);
int store_fsync_prefixes(struct store_turn *t, const uint8_t set[32]);

/* store-turn.c */
int store_meta_read(int turn_fd, struct store_turn_info *ret);
int store_turn_new_private(struct store *s, const struct store_options *o, const char *message,
			   struct store_turn **ret);
/* Create a run's lazy turn on disk (at its first pre-image). */
int store_turn_materialize(struct store_turn *t);

/* store-kept.c */
/* Which flushes the file system of the store lets us skip (fd: a directory of the store). */
void store_detect_ordering(struct store *s, int fd);
/* Append rec and make its kept name (a file kept by a link: fd open on it; a directory or a
 * symlink: fd -1, a likeness of it), or mark the manifest for the next store_sync()'s flush.
 * 1: the kept name carries the record (no flush of the manifest or of objects/ needed). */
int store_kept_record(struct store_turn *t, const struct store_record *rec, int fd);
/* The two halves of store_kept_record() for a file kept by a link, in the other order: its kept
 * name before its link into objects/ (1: made), so that a broker killed at any point between leaves
 * a name the recovery finds (store_kept_settle() unshares a file still at its path); then the
 * record, which the kept name carries if there is one. store_kept_name_drop() takes the name back
 * when the link or the record fails. */
int store_kept_name(struct store_turn *t, const struct store_record *rec, int fd);
void store_kept_name_drop(struct store_turn *t, const struct store_record *rec);
int store_kept_append(struct store_turn *t, const struct store_record *rec, bool kept);
/* Records for the turn's kept names (complete: the manifest has them all already), the manifest
 * flushed, the names removed. The caller holds the turn (exclusively, or as its only writer). */
int store_kept_settle(struct store *s, int turn_fd, const char *id, bool complete);
/* Settle the kept names of every turn nobody holds (a broker killed, a power cut). */
int store_kept_recover_all(struct store *s);

/* store-tree.c: a store_record_fn in front of fn that drops the records of kept trees that are
 * not in the store (their move never happened: the paths stayed where they were). */
struct store_tree_filter {
	int turn_fd;
	store_record_fn fn;
	void *userdata;
	char *last; /* the tree looked at last, and whether it is there */
	bool present;
};
int store_tree_filter(struct store_record *rec, void *userdata);
/* Records, appended to manifest_fd, for the files kept by a move (store_keep_file()) that have none
 * in the turn (seen: the paths it has records for): a broker killed between the move and the
 * record. */
int store_file_trees_recover(int turn_fd, const struct path_set *seen, int manifest_fd);
/* kept/<turn>/ made: the mark that makes a killed turn's recovery look at it */
int store_kept_mark(struct store_turn *t);
/* A turn's manifest through fn, without those records. */
int store_manifest_foreach_turn(int turn_fd, store_record_fn fn, void *userdata);

/* store-gc.c */
int store_remove_tree_at(int dirfd, const char *name);
