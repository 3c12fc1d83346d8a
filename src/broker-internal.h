/* SPDX-License-Identifier: MIT */
/*
 * What the broker's files share, and nothing else includes (broker.h is the interface):
 *
 *   broker.c       the core: the object, decide, the audit line, prompts, before-change, dispatch
 *   broker-ops.c   the syscall operations, one per enum broker_op (sockets: broker-net.c)
 *   broker-door.c  the socket door: tokens, host operations, recursive copy and delete
 *
 * Every operation runs with a per-call context (struct broker_call) that holds what it resolved
 * and what its audit line will say; the socket door passes its own state (struct broker_door)
 * down with it instead of storing it in the broker.
 */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "broker.h"
#include "git-guard.h"
#include "resolve.h"

/* A file the broker created for a target, while it is among the last few (broker-ops.c). */
#define BROKER_CREATED_MAX 8
struct broker_created {
	int fd;	    /* our reference to the open file installed in the target; -1: a free slot */
	int tfd;    /* the fd number the target got; -1 until it is known */
	char *real; /* the path it was created at */
};

struct broker {
	struct broker_config cfg;
	struct audit *audit;
	struct store_turn *turn;
	bool batch;	  /* group commit: see broker_set_batch() */
	bool batch_dirty; /* a request of the batch recorded a pre-image that awaits the flush */
	bool flushed;	  /* a pre-image was flushed: group commit can pay from now on */
	const struct policy *policy;
	int root_fd;
	struct broker_stats stats;
	char **oversize; /* paths recorded as not backed up */
	size_t n_oversize;
	struct broker_prompt *prompts;
	size_t n_prompts;
	dev_t volatile_dev;		     /* cache of is_volatile() */
	int volatile_known;		     /* 0 unknown, 1 volatile, -1 persistent */
	enum broker_delete_mode delete_mode; /* deletes that name none: UNLINK or TRASH */
	struct {
		dev_t dev;
		ino_t ino;
	} * shm_own; /* the objects this run created in /dev/shm (broker-shm.c) */
	size_t n_shm_own, cap_shm_own;
	struct broker_created created[BROKER_CREATED_MAX];
	unsigned created_next; /* the slot the next one takes (the oldest) */
	pid_t pid;	       /* our own, for kcmp() */
	bool no_kcmp;	       /* kcmp() is not built in: nothing is remembered */
};

enum decision {
	DECIDE_UNSET = -1, /* failed before the policy was asked */
	DECIDE_DENY,
	DECIDE_BROKER, /* allowed: the broker performs it (with backup) */
	DECIDE_KERNEL, /* allowed by Landlock: let the kernel run it */
	DECIDE_PROMPT, /* refused until the user approves (recorded as a prompt block) */
};

static inline bool refused(enum decision d)
{
	return d == DECIDE_DENY || d == DECIDE_PROMPT;
}

/* What the audit line of one operation says. */
struct op_log {
	const char *phase;
	const char *path, *real, *to, *real_to;
	enum decision decision;
	const char *reason;
	const char *backup; /* what the store did */
	bool absent;	    /* the (last) pre-image taken recorded the path as absent */
};

/*
 * The socket door's state while it serves one request (broker-door.c). The seccomp door has
 * none (NULL): its requests are decided, performed and audited exactly as without the door.
 */
struct broker_door {
	struct broker *b;
	const struct broker_ipc_ctx *peer;
	bool host; /* a host operation: the broker performs even what the kernel would allow */
	const char *phase; /* audit phase instead of the operation's own */
	const char *extra; /* escaped "door=ipc ipcToolCall=... trace=..." for the audit line */
	enum broker_delete_mode delete_mode; /* what an unlink of this request does */
	/* The outcome of the last operation logged, copied by broker_log_op(). */
	bool logged;
	enum decision decision;
	char *real, *real_to;
	const char *backup;
};

/* One operation on its way through the broker: the per-call context. */
struct broker_call {
	struct broker *b;
	struct broker_door *door; /* NULL: the seccomp door */
	const struct broker_req *q;
	struct broker_resp *resp;
	struct resolved res, res2; /* what the operation resolved: alive until its audit line */
	bool res_open; /* res.obj_fd is an open file of ours (borrowed, not O_PATH): f*() on it */
	struct op_log log;
	struct timespec t0;
};

/* Start a call: the clock runs, nothing is resolved, the audit line names q->path. resp may be
 * NULL for calls that answer no syscall. */
void broker_call_begin(struct broker_call *c, struct broker *b, struct broker_door *door,
		       const struct broker_req *q, struct broker_resp *resp, const char *phase);
void broker_call_end(struct broker_call *c);

/* The resolve context of a call: the target thread, or the door's peer. */
static inline struct resolve_ctx broker_call_resolve_ctx(const struct broker_call *c)
{
	return (struct resolve_ctx){c->q->tid, c->b->root_fd, c->q->notif,
				    c->b->cfg.foreign_mounts};
}

enum decision broker_decide(struct broker_call *c, const char *real, unsigned access,
			    const struct stat *st, const char **ret_reason);

/* POSIX shared memory and semaphores in /dev/shm (broker-shm.c). */
bool broker_is_shm(const struct broker *b, const char *real);
/* The decision on real (in /dev/shm): the broker's for the command's own objects and new ones,
 * DENY for the others', DECIDE_UNSET for a read (the policy's). */
enum decision broker_shm_decide(struct broker *b, const char *real, unsigned access,
				const char **ret_reason);
/* After an operation: real, if it is in /dev/shm and exists, is the command's own. */
void broker_shm_note(struct broker *b, const char *real);
/* Before a removal: real (its last name) is no longer one. */
void broker_shm_forget(struct broker *b, const char *real);
/* The audit line of the call (and the door's copy of its outcome). */
void broker_log_op(struct broker_call *c, int result);
/* A ".git" entry or a hooks directory made any other way than git makes them (git-guard.h). */
int broker_check_git_guard(struct broker_call *c, const char *real, enum git_guard_make how);

/*
 * Every broker path that is about to change or create something at parent_fd/name calls this one
 * function first. Fails closed: if the pre-image cannot be recorded, the change must not happen.
 * -EINPROGRESS: recorded in batch mode, the request is to be handled again after the flush.
 */
int broker_before_change(struct broker_call *c, int parent_fd, const char *name, const char *real,
			 unsigned flags);
/* The same for a name the caller has just looked at (st: its lstat(), NULL: absent). With
 * STORE_REPLACE | STORE_MOVE, a regular file may go into the store itself (the copy-on-write
 * merge): 1, and parent_fd/name is free (broker_unkeep_file() puts it back). */
int broker_before_change_st(struct broker_call *c, int parent_fd, const char *name,
			    const char *real, const struct stat *st, unsigned flags);
/* A directory about to be removed with all it holds, kept whole by the store (store_keep_tree(),
 * which o->durable is set for): 1 kept and moved, 0 not (nothing changed), -errno. */
struct store_tree_opts;
struct store_record;
int broker_keep_tree(struct broker *b, int parent_fd, const char *name, const char *real,
		     const struct stat *st, struct store_tree_opts *o, struct store_record **ret,
		     size_t *ret_n);
/* A file broker_before_change_st(..., STORE_REPLACE | STORE_MOVE) moved into the store back in
 * its place (the change did not happen). */
int broker_unkeep_file(struct broker *b, int parent_fd, const char *name);
/* The same for a name resolve_path() has just looked at: the store need not look again. */
int broker_before_change_res(struct broker_call *c, const struct resolved *res, unsigned flags);

/* Forget the files broker_created remembers (a rename or an unlink: their paths may change). */
void broker_created_forget(struct broker *b);

/* Handle one request; door is NULL for the seccomp door. */
void broker_handle_call(struct broker *b, struct broker_door *door, const struct broker_req *q,
			struct broker_resp *resp);

/*
 * Set-user-ID and set-group-ID bits outlive the sandbox: a command run as root could leave a
 * root-owned setuid program behind for anyone to run. Unless sandbox.allowSetid, they are dropped
 * from new files and refused (EPERM) by chmod when they would be added. A directory's
 * set-group-ID only passes its group on, and stays allowed.
 */
#define SETID_BITS ((mode_t)(S_ISUID | S_ISGID))
mode_t broker_setid_strip(const struct broker *b, mode_t mode, bool dir);
/* The mode a new file gets: the target's umask applied, set-ID bits dropped unless allowed. */
mode_t broker_create_mode(const struct broker_call *c, bool dir);

/* ---- broker-ops.c ---- */

/* Perform c->q (a file operation) into c->resp; -errno, or -EINPROGRESS (see before_change). */
int broker_ops_perform(struct broker_call *c);
/* Move an already resolved and allowed path to the trash, recording its pre-image first. */
int broker_trash_move(struct broker_call *c, struct resolved *res, char **ret_trashed);

/* ---- broker-door.c ---- */

/* Copy the outcome of an operation just logged into the door's state (its answer names it). */
void broker_door_capture(struct broker_door *d, const struct op_log *l);

/* ---- small helpers ---- */

static inline void set_error(struct broker_resp *resp, int err)
{
	resp->kind = BROKER_RESP_ERROR;
	resp->value = err < 0 ? err : -EIO;
}

static inline void set_value(struct broker_resp *resp, int64_t v)
{
	resp->kind = BROKER_RESP_VALUE;
	resp->value = v;
}

/* The broker's own umask must not apply on top of the target's: clear it around a creating
 * call that passes the target's mode (the broker's other threads only open FIFOs). */
#define WITH_UMASK_0(call)                                                                         \
	({                                                                                         \
		mode_t _old = umask(0);                                                            \
		__typeof__(call) _r = (call);                                                      \
		umask(_old);                                                                       \
		_r;                                                                                \
	})
