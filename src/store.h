/* SPDX-License-Identifier: MIT */
/*
 * The backup store (DESIGN section 7): per session, turns as backup cycles, one pre-image per path
 * per turn, content stored once by hash.
 *
 *   $XDG_STATE_HOME/brokered/sessions/<session-id>/modify_backup/   (the store root)
 *
 * The broker calls store_preimage() before every change of an existing path and before every
 * creation; if it fails, the broker denies the change. All functions return >= 0 or -errno and
 * never log (the caller logs once).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

struct stat;

struct strbuf;

struct store;
struct store_turn;
struct store_record;

struct store_options {
	bool enabled; /* sandbox.fileBackup.enabled; false: store_preimage() is a no-op */
	uint64_t max_size_bytes; /* maxSizeMB, already clamped */
	bool deny_oversize; /* files over the limit: deny the change instead of "not backed up" */
	bool sync;	    /* pre-images reach stable storage before store_sync() returns */
};

/* maxSizeMB clamping of the reference: absent/invalid → default; clamped to [min, max]. */
#define STORE_MAX_SIZE_MB_MIN	  1
#define STORE_MAX_SIZE_MB_MAX	  1024
#define STORE_MAX_SIZE_MB_DEFAULT 10
uint64_t store_clamp_max_size_mb(int64_t mb, bool present);

/* Flush the store's own files (turn metadata, directories) to stable storage; default on. */
void store_set_durable(bool durable);

/* $XDG_STATE_HOME/brokered (or ~/.local/state/brokered), created 0700. Caller frees. */
int store_state_dir(char **ret);
/* Validate a session or turn id (printable, no '/', bounded). */
bool store_id_valid(const char *id);

/* Open, creating if needed, the store of one session. */
int store_open(const char *state_dir, const char *session_id, struct store **ret);
void store_close(struct store *s);
/* .../sessions/<id> (owned by the store). */
const char *store_session_dir(const struct store *s);

/*
 * A run's turn: the session's explicitly begun turn (`brokered turn begin`) if one is open, else a
 * new turn private to this run (*ret_owned = true: the caller commits it with store_turn_commit()).
 */
int store_turn_join_or_begin(struct store *s, const struct store_options *o, const char *tool_call,
			     const char *message, struct store_turn **ret, bool *ret_owned);
/* The turn's id; a new lazy turn's is final once the turn is on disk (its first record): a turn
 * made meanwhile under the same id makes it take another. */
const char *store_turn_id(const struct store_turn *t);
/* False while a run's own turn has recorded nothing: it is then not on disk (and committing it
 * records no turn). */
bool store_turn_recorded(const struct store_turn *t);
/* Commit (closes the cycle, records the post-state of every touched path) and free. */
int store_turn_commit(struct store_turn *t, const char *message);
/*
 * What one lstat() of a path found, kept small: the fields of its post-state record. A caller
 * that has just looked at the turn's paths (the git check, when the command has ended) hands
 * what it saw to the commit, which then records those post-states without looking again.
 */
struct store_seen {
	char *path;
	uint64_t size, ino, dev, rdev, nlink;
	struct timespec mtime;
	uint32_t mode, uid, gid;
};
void store_seen_set(struct store_seen *s, const struct stat *st); /* all but path */
void store_seens_free(struct store_seen *v, size_t n);
/* store_turn_commit(), with the post-states of the paths in seen (sorted by path, strcmp) taken
 * from there; a path not in it is looked at, as always. */
int store_turn_commit_seen(struct store_turn *t, const char *message, const struct store_seen *seen,
			   size_t n_seen);
/* Free without committing (the turn stays open: found later by `brokered log`). */
void store_turn_free(struct store_turn *t);

enum store_flags {
	/*
	 * The caller is about to remove this name (unlink, rmdir). A file is kept by a hard link
	 * where it can be (no copy); the caller removes the name after store_sync(). The store
	 * never takes the name itself here (only STORE_MOVE does).
	 */
	STORE_CONSUME = 1 << 0,
	/* The path is a directory about to be renamed: record every path below it too. The
	 * result is SAVED if a pre-image below was saved, whatever the directory's own. */
	STORE_TREE = 1 << 1,
	/* Only metadata will change (chmod, chown, utimes, xattr): content still needed for undo.
	 */
	STORE_METADATA = 1 << 2,
	/*
	 * A rename is about to replace this name. The store may keep the file by a hard link
	 * instead of a copy; the caller's rename then leaves the store's link the only one.
	 */
	STORE_REPLACE = 1 << 3,
	/* The caller has just found that the name does not exist (store_preimage_stat()). */
	STORE_ABSENT = 1 << 4,
	/*
	 * With STORE_REPLACE (the copy-on-write merge): a regular file may be moved into the store
	 * itself (store_keep_file()). *ret_consumed says whether it was: the name is then free,
	 * and the file's record needs no flush of its own.
	 */
	STORE_MOVE = 1 << 5,
	/* With STORE_MOVE: the name is on a file system a crash empties (tmpfs), no order to keep.
	 */
	STORE_VOLATILE = 1 << 6,
};

/* What store_preimage() did, for the audit log and the run's summary. */
enum store_result {
	STORE_RESULT_ALREADY,	    /* path touched earlier in this turn: nothing to do */
	STORE_RESULT_ABSENT,	    /* path did not exist: creation recorded */
	STORE_RESULT_SAVED,	    /* pre-image recorded (content copied or moved) */
	STORE_RESULT_NOT_BACKED_UP, /* over max size: recorded as not backed up */
	STORE_RESULT_DISABLED,	    /* backup disabled */
};

/*
 * Record the pre-image of dirfd/name, whose real absolute path is path, before the caller changes
 * it. Idempotent within a turn. On error (-ENOSPC, -EIO, -EFBIG when over the limit and
 * deny_oversize, ...) the caller must not perform the change.
 */
int store_preimage(struct store_turn *t, int dirfd, const char *name, const char *path,
		   unsigned flags, enum store_result *ret_result, bool *ret_consumed);
/*
 * The same, for a caller that has just looked at the name: st is its lstat(), or NULL with
 * STORE_ABSENT in flags. The store trusts it instead of looking again; whatever it then opens or
 * links is still checked against st's inode.
 */
int store_preimage_stat(struct store_turn *t, int dirfd, const char *name, const char *path,
			const struct stat *st, unsigned flags, enum store_result *ret_result,
			bool *ret_consumed);
/*
 * A directory about to be removed with everything below it, kept whole: every path recorded, then
 * the directory moved into the store by one rename (store-tree.c). 1: done, the records in *ret
 * (every path of the tree, for the caller's log; store_records_free() them); 0: not a tree to
 * keep whole, or it could not be moved, nothing changed (the caller removes it piece by piece);
 * -errno. st: dirfd/name's lstat(), just taken.
 */
struct store_tree_opts {
	/* asked for every path of the tree, which is kept whole only if each is allowed */
	bool (*allow)(const char *path, const struct stat *st, void *userdata);
	void *userdata;
	size_t max_entries; /* larger trees: 0 */
	bool durable;	    /* the tree's file system survives a crash (not tmpfs) */
};
int store_keep_tree(struct store_turn *t, int dirfd, const char *name, const char *path,
		    const struct stat *st, const struct store_tree_opts *o,
		    struct store_record **ret, size_t *ret_n);

/*
 * The pre-image of a regular file that is about to be replaced, kept by moving the file itself into
 * the store (turns/<turn>/trees/<the turn's file tree>/<path>) instead of a link and a hash: its
 * record names the tree. The move comes first, then the record; a broker killed between leaves a
 * file that the recovery finds in the tree and records (store_kept_recover_all()). Where the file
 * system does not order the move before the change that follows it (durable, with
 * sandbox.fileBackup.sync, on a file system without ordered metadata), or the file has another
 * name, is over the size limit, was recorded already or cannot be moved, nothing is done.
 * st: dirfd/name's lstat(), just made. 1: moved (dirfd/name is free: the caller puts the new file
 * there, or the old one back with store_unkeep_file()), 0: not kept this way, -errno.
 */
int store_keep_file(struct store_turn *t, int dirfd, const char *name, const char *path,
		    const struct stat *st, bool durable);
/* The file store_keep_file() moved last back to dirfd/name (the change did not happen), unless
 * something is there meanwhile; its record stays, and undo finds it the very inode. */
int store_unkeep_file(struct store_turn *t, int dirfd, const char *name);

/* True if path was recorded by this turn (store_preimage() would do nothing). */
bool store_preimage_recorded(const struct store_turn *t, const char *path);
/*
 * Record that path does not exist yet (a path that a rename is about to bring into being below a
 * directory it replaces). No-op if the path was recorded already in this turn.
 */
int store_preimage_absent(struct store_turn *t, const char *path);

/*
 * Records of absent paths (store_preimage_absent()) made from now on wait in memory and go to the
 * manifest together (a write per 256 KiB) at store_records_release(), or at the next
 * store_sync(), store_flush() or commit: for the paths below a new directory that is not in place
 * yet, whose own record undo needs first (it removes the directory with all it holds). The caller
 * releases them before it puts the directory in place.
 */
void store_records_hold(struct store_turn *t);
int store_records_release(struct store_turn *t);

/*
 * Durability barrier: every pre-image recorded so far is on stable storage. The supervisor calls
 * it once per batch of notifications, before performing any of them (group commit).
 */
int store_sync(struct store_turn *t);
/*
 * Put recorded pre-images in place without waiting for stable storage, for changes to files that
 * would not survive a crash themselves (tmpfs): the next store_sync() makes them durable too.
 */
int store_flush(struct store_turn *t);

/* Are pre-images of this turn flushed to stable storage (sandbox.fileBackup.sync)? */
bool store_turn_durable(const struct store_turn *t);

/* Counters for the run's summary. */
struct store_stats {
	uint64_t saved, absent, not_backed_up, bytes_stored;
};
void store_turn_stats(const struct store_turn *t, struct store_stats *ret);

/* ---- Reading the store: records, turns, restore (CLI and tests). ---- */

enum store_kind {
	STORE_KIND_ABSENT,
	STORE_KIND_FILE,
	STORE_KIND_DIR,
	STORE_KIND_SYMLINK,
	STORE_KIND_OTHER, /* fifo, device, socket: type and mode recorded, no content */
};
const char *store_kind_to_string(enum store_kind k);

/* One manifest line: a pre-image (manifest) or a post-state (post, written at commit). */
struct store_record {
	enum store_kind kind;
	char *path;	    /* absolute real path, decoded */
	char *target;	    /* symlink target, or NULL */
	char *call;	    /* tool call that made the record, or NULL */
	char hash[65];	    /* hex SHA-256 of the content object, "" if none */
	bool not_backed_up; /* regular file over the size limit: no content */
	bool moved;	    /* the file itself was moved into the store (consumed) */
	/* A file of a tree kept whole (store_keep_tree()), or kept by a move (store_keep_file(),
	 * tree_at 0): its content is the file at turns/<turn>/trees/<tree>/<path + tree_at> (no
	 * hash); NULL for the others. */
	char *tree;
	uint64_t tree_at; /* where the tree's root path ends in path */
	uint64_t size, ino, rdev;
	uint64_t nlink; /* link count of a file when recorded, 0 (unknown) or >= 1 */
	/* when read (not stored): its index among the records read (those a filter kept), in
	 * manifest order: earlier is older */
	uint64_t seq;
	uint32_t mode; /* full st_mode, type bits included */
	uint32_t uid, gid;
	int64_t mtime_ns;
};
void store_record_done(struct store_record *r);
void store_records_free(struct store_record *r, size_t n);
/* Append r as one checksummed manifest line (with '\n'). */
int store_record_format(const struct store_record *r, struct strbuf *out);
/*
 * Parse a whole manifest buffer (any bytes). Lines that are torn, corrupt or unknown are skipped
 * and counted in *ret_bad. Returns records in file order.
 */
int store_manifest_parse(const char *buf, size_t n, struct store_record **ret, size_t *ret_n,
			 size_t *ret_bad);

/*
 * Called for each record of a manifest in file order (a path may have several records: its
 * earliest is its pre-image). fn may take the record (copy *rec, then zero it); what is left in it
 * is freed when fn returns. A negative return stops the walk and is returned.
 */
typedef int (*store_record_fn)(struct store_record *rec, void *userdata);
/* Stream the manifest read from fd through fn, 64 KiB at a time: memory for one
 * line, not the file. Torn, corrupt or unknown lines are skipped and counted in *ret_bad (may be
 * NULL); -EFBIG past max bytes. */
int store_manifest_foreach_fd(int fd, size_t max, store_record_fn fn, void *userdata,
			      size_t *ret_bad);

struct store_turn_info {
	char *id, *message;
	bool committed;
	bool current; /* the session's explicitly begun turn (`turn begin`) */
	bool running; /* open and a live process holds it; open and not running: interrupted */
	int64_t begin_ns, commit_ns;
	uint64_t max_size_bytes; /* 0: not set by `turn begin` */
	size_t n_paths;
};
void store_turn_infos_free(struct store_turn_info *t, size_t n);
/* All turns of the session, newest first. */
int store_list_turns(struct store *s, struct store_turn_info **ret, size_t *ret_n);
int store_turn_info_get(struct store *s, const char *id, struct store_turn_info *ret);
/* A turn id or "last" → id (malloc'd). -ENOENT if there is no such turn. */
int store_resolve_turn(struct store *s, const char *arg, char **ret_id);
/* The earliest pre-image per path of a turn, sorted by path (strcmp). */
int store_turn_records(struct store *s, const char *id, struct store_record **ret, size_t *ret_n);
/*
 * lstat() of the recorded (real) paths of a turn as they are now. A symlink or a non-directory
 * among a path's parents means the path is not there (-ENOENT): the tree changed there, and a walk
 * that follows no symlink, as restore's, finds nothing of it. It keeps the directory it looked in
 * last open (the next path in it is looked at from there: paths come a directory at a time) and
 * remembers the highest missing parent of a missing path (a path below it is missing without a
 * look): the same as looking at each path for a tree nobody changes meanwhile.
 * 0, or -errno.
 */
struct store_gone;
int store_gone_new(struct store_gone **ret);
void store_gone_free(struct store_gone *g);
int store_gone_lstat(struct store_gone *g, const char *path, struct stat *st);

/*
 * The same, of only the paths keep() accepts (asked for every record; it must judge by the path
 * alone): a caller that needs, say, the paths that exist now holds just those records, not the
 * turn's (the manifest is streamed).
 */
int store_turn_records_filter(struct store *s, const char *id,
			      bool (*keep)(const char *path, void *userdata), void *userdata,
			      struct store_record **ret, size_t *ret_n);
/* Every record of a turn's manifest, in file order, to fn (store_manifest_foreach_fd()). */
int store_turn_records_foreach(struct store *s, const char *id, store_record_fn fn, void *userdata);
/* The post-states written at commit, sorted by path; 0 records for an uncommitted turn. */
int store_turn_post(struct store *s, const char *id, struct store_record **ret, size_t *ret_n);
/* Open a content object read-only. */
int store_object_open(struct store *s, const char *hash);
/* The content of a file's pre-image recorded by turn turn_id: its object, or its file in a kept
 * tree, read-only (-EBADMSG: the kept file is no longer the one recorded); or its absolute path,
 * malloc'd. A record with neither: -ENOENT. */
int store_record_content_open(struct store *s, const char *turn_id, const struct store_record *rec);
int store_record_content_path(struct store *s, const char *turn_id, const struct store_record *rec,
			      char **ret);

/* `turn begin`: a new explicit turn that later runs join. -EBUSY (and *ret_id) if one is open. */
int store_turn_begin_explicit(struct store *s, const struct store_options *o, const char *message,
			      char **ret_id);
/*
 * `turn begin` at the next prompt of an agent that never committed its turn (crash, Ctrl-C): an
 * explicit turn still open is committed first with its own message and " (interrupted)", its id
 * in *ret_committed (malloc'd; NULL if there was none), then the new turn begins. -EBUSY (and the
 * open turn's id in *ret_id) if a command still runs in the open turn: it is not left behind.
 */
int store_turn_begin_after_open(struct store *s, const struct store_options *o, const char *message,
				char **ret_id, char **ret_committed);
/* The explicitly begun open turn, or -ENOENT. */
int store_current_turn(struct store *s, char **ret_id);
/* Commit a turn by id (NULL: the explicit one); an interrupted turn can be committed too. */
int store_commit_id(struct store *s, const char *id, const char *message);

/* gc: drop committed turns that ended more than older_than_sec ago, then unreferenced objects. */
struct store_gc_stats {
	uint64_t turns_removed, objects_removed, bytes_freed;
};
int store_gc(struct store *s, uint64_t older_than_sec, struct store_gc_stats *ret);

/* ---- Restore and undo (store-restore.c) ---- */

enum store_action {
	STORE_ACTION_NONE,    /* already as before the turn */
	STORE_ACTION_REMOVE,  /* created by the turn: remove (recursively) */
	STORE_ACTION_CREATE,  /* (re)create from the pre-image */
	STORE_ACTION_REPLACE, /* remove what is there now, then recreate */
	STORE_ACTION_META,    /* directory: mode, owner, mtime only */
	STORE_ACTION_COVERED, /* below a path the turn created: goes with it */
	STORE_ACTION_LOST,    /* cannot be restored (not backed up, socket) */
};
const char *store_action_to_string(enum store_action a);

struct store_plan_item {
	struct store_record pre;
	enum store_action action;
	const char *conflict; /* static text: why the path changed after the turn, or NULL */
	int error;	      /* after apply: 0 or -errno */
	uint64_t cur_ino;     /* inode of the regular file at the path when planned, or 0 */
};
/* A directory of the user's that the turn left without owner rwx (`chmod 0444 dir`): the restore
 * gives the owner rwx while it works in it and sets the mode back (or to the pre-image's) after. */
struct store_unlocked {
	char *path;
	mode_t mode; /* the mode it had */
};
struct store_plan {
	char *turn_id;
	struct store_plan_item *items; /* sorted by path */
	size_t n_items, n_conflicts;
	size_t n_unrecorded; /* after apply: paths put back without a record (the store was full) */
	struct store_unlocked *unlocked; /* in the order unlocked: ancestors first */
	size_t n_unlocked;
	struct store_gone *look; /* planning: what was seen of the paths' parents */
};
/* Plan restoring paths (NULL/0: every path, i.e. undo) of a turn to their pre-images. */
int store_plan_restore(struct store *s, const char *turn_id, char *const *paths, size_t n_paths,
		       struct store_plan **ret);
/*
 * Apply a plan; the changes are themselves recorded as a new committed turn with message (so an
 * undo can be undone), whose id goes to *ret_turn_id. Returns the number of items that failed
 * (their .error says why), or -errno if nothing could be done.
 */
int store_plan_apply(struct store *s, struct store_plan *p, const struct store_options *o,
		     const char *message, char **ret_turn_id);
void store_plan_free(struct store_plan *p);
