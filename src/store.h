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
#include <sys/types.h>

struct store;
struct store_turn;

struct store_options {
	bool enabled;            /* sandbox.fileBackup.enabled; false: store_preimage() is a no-op */
	uint64_t max_size_bytes; /* maxSizeMB, already clamped */
	bool deny_oversize;      /* files over the limit: deny the change instead of "not backed up" */
	bool sync;               /* pre-images reach stable storage before store_sync() returns */
};

/* maxSizeMB clamping of the reference: absent/invalid → default; clamped to [min, max]. */
#define STORE_MAX_SIZE_MB_MIN 1
#define STORE_MAX_SIZE_MB_MAX 1024
#define STORE_MAX_SIZE_MB_DEFAULT 10
uint64_t store_clamp_max_size_mb(int64_t mb, bool present);

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
const char *store_turn_id(const struct store_turn *t);
/* Commit (closes the cycle, records the post-state of every touched path) and free. */
int store_turn_commit(struct store_turn *t, const char *message);
/* Free without committing (the turn stays open: found later by `brokered log`). */
void store_turn_free(struct store_turn *t);

enum store_flags {
	/*
	 * The caller is about to remove this name (unlink, rmdir, rename over it). The store may move
	 * the file into itself instead of copying it; *ret_consumed then says the name is gone and
	 * the caller must not remove it again.
	 */
	STORE_CONSUME = 1 << 0,
	/* The path is a directory about to be renamed: record every path below it too. */
	STORE_TREE = 1 << 1,
	/* Only metadata will change (chmod, chown, utimes, xattr): content still needed for undo. */
	STORE_METADATA = 1 << 2,
};

/* What store_preimage() did, for the audit log and the run's summary. */
enum store_result {
	STORE_RESULT_ALREADY,       /* path touched earlier in this turn: nothing to do */
	STORE_RESULT_ABSENT,        /* path did not exist: creation recorded */
	STORE_RESULT_SAVED,         /* pre-image recorded (content copied or moved) */
	STORE_RESULT_NOT_BACKED_UP, /* over max size: recorded as not backed up */
	STORE_RESULT_DISABLED,      /* backup disabled */
};

/*
 * Record the pre-image of dirfd/name, whose real absolute path is path, before the caller changes
 * it. Idempotent within a turn. On error (-ENOSPC, -EIO, -EFBIG when over the limit and
 * deny_oversize, ...) the caller must not perform the change.
 */
int store_preimage(struct store_turn *t, int dirfd, const char *name, const char *path,
		   unsigned flags, enum store_result *ret_result, bool *ret_consumed);
/*
 * Durability barrier: every pre-image recorded so far is on stable storage. The supervisor calls
 * it once per batch of notifications, before performing any of them (group commit).
 */
int store_sync(struct store_turn *t);

/* Counters for the run's summary. */
struct store_stats {
	uint64_t saved, absent, not_backed_up, bytes_stored;
};
void store_turn_stats(const struct store_turn *t, struct store_stats *ret);
