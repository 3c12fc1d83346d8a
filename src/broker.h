/* SPDX-License-Identifier: MIT */
/*
 * The broker (DESIGN section 2): one function per operation kind. It resolves paths as the target
 * would (resolve.c), decides by policy, takes the pre-image through one hook
 * (broker_before_change), performs the operation itself on fds, and writes one audit line per
 * decision. It never exits the process: every failure is the operation's -errno.
 *
 * Its files: broker.c (the core), broker-ops.c (the file operations), broker-door.c (the socket
 * door), broker-net.c (socket operations); broker-internal.h holds what they share.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

#include "resolve.h"

struct audit;
struct store_turn;
struct policy;
struct net;

enum broker_op {
	BROKER_OP_OPEN,	    /* open, openat, openat2, creat with write/create/truncate flags */
	BROKER_OP_TRUNCATE, /* truncate(path, len) */
	BROKER_OP_UNLINK,   /* unlink, unlinkat(0), rmdir, unlinkat(AT_REMOVEDIR) */
	BROKER_OP_RENAME,   /* rename, renameat, renameat2 */
	BROKER_OP_MKDIR,
	BROKER_OP_MKNOD,
	BROKER_OP_LINK, /* hard link */
	BROKER_OP_SYMLINK,
	BROKER_OP_CHMOD,
	BROKER_OP_CHOWN,
	BROKER_OP_UTIMES,
	BROKER_OP_SETXATTR,
	BROKER_OP_REMOVEXATTR,
	/* sockets (broker-net.c): the address is decided and the call performed on the socket
	 * itself, taken from the target with pidfd_getfd() */
	BROKER_OP_CONNECT,
	BROKER_OP_BIND,
	BROKER_OP_SENDTO,  /* sendto with an address */
	BROKER_OP_SENDMSG, /* sendmsg, and the first message of sendmmsg */
	_BROKER_OP_MAX,
};

const char *broker_op_name(enum broker_op op);

/* A decoded request. Paths are copies (read once from the target). */
struct broker_req {
	enum broker_op op;
	pid_t tid;
	const struct notif_ref *notif; /* the seccomp notification (NULL: the socket door) */
	const char *syscall_name;
	int dirfd;		    /* AT_FDCWD or the target's dir fd */
	const char *path;	    /* NULL for fd-based forms (fchmod, ...) */
	int fd;			    /* fd-based forms: the target's fd; else -1 */
	int dirfd2;		    /* rename/link: second dir fd */
	const char *path2;	    /* rename/link: destination; symlink: the link's path */
	const char *symlink_target; /* symlink: the content */
	uint64_t flags;		    /* open flags / AT_* flags / rename flags */
	uint64_t resolve;	    /* openat2 RESOLVE_* */
	mode_t mode;
	dev_t dev;
	uint64_t length; /* truncate */
	uid_t uid;	 /* chown */
	gid_t gid;
	bool times_now; /* utimes: NULL times */
	struct timespec times[2];
	const char *xattr_name;
	const void *xattr_value;
	size_t xattr_size;
	int xattr_flags;
	bool at_empty_path; /* *at with AT_EMPTY_PATH and "" path: acts on dirfd */
	/* sockets: fd is the target's socket */
	const void *addr; /* copy of the address (connect, bind, sendto, msg_name); may be NULL */
	unsigned addrlen;
	int msg_flags;	   /* send flags */
	uint64_t data;	   /* sendto: the buffer in the target; sendmsg: its msghdr */
	uint64_t data_len; /* sendto: its length */
	bool mmsg;	   /* sendmmsg: the result is one message, its msg_len written back */
};

enum broker_resp_kind {
	BROKER_RESP_ERROR,    /* value = -errno */
	BROKER_RESP_VALUE,    /* value = syscall result */
	BROKER_RESP_CONTINUE, /* let the kernel run the syscall (Landlock decides) */
	BROKER_RESP_FD,	      /* install fd in the target (ADDFD + SEND) */
	BROKER_RESP_DEFER,    /* a FIFO with no reader yet: fd is an O_PATH fd of it; the supervisor
			       * retries a non-blocking open with defer_flags until it succeeds */
	BROKER_RESP_RETRY,    /* batch mode: pre-images recorded, not yet durable; nothing was done.
			       * Handle the request again after broker_batch_sync(). */
};

struct broker_resp {
	enum broker_resp_kind kind;
	int64_t value;
	int fd; /* owned by the response */
	bool cloexec;
	int defer_flags;
	bool defer_connect; /* DEFER of a connect in progress: fd is the socket; answer its SO_ERROR
			     * once it is writable */
	int defer_unix_fd;  /* DEFER of a Unix connect that found the listener's backlog full: fd is
			     * the socket, this an O_PATH fd of the socket file; the supervisor
			     * connects again, blocking, as the target's own connect would wait */
	/* For BROKER_RESP_FD: a file the broker created, removed again if the fd cannot be
	 * installed (the target vanished). */
	int created_parent_fd;
	char *created_name;
};

#define BROKER_RESP_INIT(k, v)                                                                     \
	((struct broker_resp){                                                                     \
	    .kind = (k), .value = (v), .fd = -1, .defer_unix_fd = -1, .created_parent_fd = -1})

struct broker_config {
	const char *workspace; /* real path */
	const char *scratch;   /* real path; writable by the kernel (Landlock) */
	const char *state_dir; /* brokered's own state: never writable from inside */
	const char *home;
	bool backup_enabled;
	bool kernel_enforces; /* Landlock is on: scratch and device writes may CONTINUE */
	bool allow_setid;     /* sandbox.allowSetid: files may become set-user/group-ID */
	/* sandbox.readOnlyMounts in effect: the target's mounts are read-only copies of ours */
	bool foreign_mounts;
	struct net *net; /* socket policy (NULL: sockets are refused); borrowed */
};

struct broker_stats {
	uint64_t requests, allowed, denied, continued, errors;
	uint64_t backups_saved, backups_absent, not_backed_up;
	uint64_t batch_syncs, batched; /* group commit: flushes, requests that shared one */
};

struct broker;

int broker_new(const struct broker_config *cfg, struct audit *audit, struct store_turn *turn,
	       struct broker **ret);
void broker_free(struct broker *b);
/* The policy to use (NULL: the built-in default). Borrowed. */
void broker_set_policy(struct broker *b, const struct policy *p);
void broker_handle(struct broker *b, const struct broker_req *req, struct broker_resp *resp);
/* access(), faccessat(), faccessat2() with read-only mounts (foreign_mounts): the answer of the
 * file's own mount, with the target's ids; 0 or -errno for the target. */
int broker_access(struct broker *b, const struct broker_req *req);
/* Audit a request refused before it reached the broker (unreadable or invalid arguments). */
void broker_audit_invalid(struct broker *b, const struct broker_req *req, int err);
/*
 * Group commit. With batch mode on, a request that needs a pre-image flushed records it, does
 * nothing else and answers BROKER_RESP_RETRY; after one broker_batch_sync() for the whole batch
 * the supervisor hands each such request in again (batch mode off), which finds its pre-images
 * recorded and performs the operation. Only worth it when pre-images are flushed at all, and
 * useful only once one was (until then each request is handled alone, as batch mode would).
 */
bool broker_batch_useful(const struct broker *b);
void broker_set_batch(struct broker *b, bool on);
int broker_batch_sync(struct broker *b, size_t n_requests);
/* Called after a BROKER_RESP_FD response could not be delivered. */
void broker_undo_creation(struct broker *b, struct broker_resp *resp);
/* Called after it was: the fd number the target got. */
void broker_note_installed(struct broker *b, const struct broker_resp *resp, int target_fd);
/* The address that reaches the Unix socket file behind the O_PATH fd, whatever its path now is
 * (through /proc/self/fd: the broker's own process). */
struct sockaddr_un;
socklen_t broker_unix_fd_addr(int fd, struct sockaddr_un *u);
void broker_resp_done(struct broker_resp *resp);
const struct broker_stats *broker_get_stats(const struct broker *b);

/* A refusal that the user may approve (policy decision "prompt"), merged per path. */
struct broker_prompt {
	char *path;	 /* real path */
	unsigned access; /* POLICY_ACCESS_* bits asked for */
	char *op;	 /* first operation that asked */
	char *rule;	 /* what decided "prompt" */
};
const struct broker_prompt *broker_prompts(const struct broker *b, size_t *ret_n);
/* One more block found outside a syscall: a git change when the command ended (git-guard.h),
 * or a refusal of another kind ("unix:PATH", "net:HOST"; access 0, shown as "connect"). */
void broker_add_prompt(struct broker *b, const char *path, unsigned access, const char *op,
		       const char *rule);
/* Paths over the backup size limit, for the run's summary (NULL-terminated, owned). */
char **broker_not_backed_up(const struct broker *b);

/* ---- the merge of a copy-on-write run (sandbox.copyOnWrite; broker-merge.c) ---- */

struct broker_merge_result {
	size_t changes;	  /* entries of the upper layer applied */
	size_t refused;	  /* changes the policy refused (prompts are recorded as such too) */
	char *listed[20]; /* the first refused paths */
	size_t n_listed;
};
/*
 * Apply the upper layer upper_fd of the ended command's overlay to the workspace: each change
 * decided, backed up and logged (phase "merge"). 0 when every change was merged or refused;
 * -errno when one failed (what was not merged stays in the upper layer). user_xattrs: the overlay
 * was made in a user namespace and keeps its marks in user.overlay.* (userxattr), not trusted.*.
 */
int broker_merge(struct broker *b, int upper_fd, bool user_xattrs, struct broker_merge_result *ret);
void broker_merge_result_done(struct broker_merge_result *r);

/* ---- the socket door (DESIGN section 5; served by ipc.c) ----
 *
 * Requests from cooperative clients over the Unix socket go through the same resolve, decide,
 * broker_before_change, perform and audit code as intercepted syscalls; these entry points only
 * translate. Paths must be absolute (a client's cwd is not ours): relative ones are -EINVAL.
 * The peer's pid (SO_PEERCRED) stands in for the target thread: its umask applies to creations
 * and /proc/self in a path means the peer. Unlike the seccomp door, host operations are always
 * performed by the broker (there is no syscall to let continue), scratch dir included.
 */

enum broker_ipc_decision {
	BROKER_IPC_NONE,	/* not reached (malformed path, missing file before any decision) */
	BROKER_IPC_GRANT_TOKEN, /* the broker opened the file: FD */
	BROKER_IPC_HOST_OP,	/* the broker performed the operation */
	BROKER_IPC_SANDBOX,	/* the sandbox allows it by itself (scratch dir, device nodes) */
	BROKER_IPC_DENY,
};
/* "grant-token", "host-op", "sandbox", "deny"; NULL for NONE. */
const char *broker_ipc_decision_name(enum broker_ipc_decision d);

struct broker_ipc_ctx {
	pid_t pid;	       /* the peer (SO_PEERCRED) */
	const char *tool_call; /* attribution in the audit log; may be NULL */
	const char *trace;     /* brokerTraceId; may be NULL */
};

struct broker_ipc_result {
	int error; /* 0 or -errno */
	enum broker_ipc_decision decision;
	char *real,
	    *real_to;	    /* normalisedPath / normalisedTo: the real paths acted on (malloc'd) */
	const char *backup; /* static: what the store did for the (last) path, or NULL */
	char *trashed;	    /* delete to trash: where the file went (malloc'd) */
	int fd;		    /* token: the opened file (owned), else -1 */
};
#define BROKER_IPC_RESULT_INIT                                                                     \
	{                                                                                          \
		.fd = -1                                                                           \
	}
void broker_ipc_result_done(struct broker_ipc_result *r);

/* Text token: open path as the broker would for the sandbox (a write backs the file up first). */
void broker_ipc_token(struct broker *b, const struct broker_ipc_ctx *c, const char *path,
		      bool write, int flags, mode_t mode, struct broker_ipc_result *ret);

enum broker_delete_mode {
	BROKER_DELETE_DEFAULT, /* the broker's configured mode (broker_set_delete_mode) */
	BROKER_DELETE_UNLINK,  /* remove (the store keeps the pre-image) */
	BROKER_DELETE_TRASH,   /* move to the freedesktop.org trash (the store records it too) */
};

enum broker_host_kind {
	BROKER_HOST_DELETE,
	BROKER_HOST_MKDIR,
	BROKER_HOST_RENAME,
	BROKER_HOST_COPY,
	BROKER_HOST_CHMOD,
	BROKER_HOST_LINK,
	BROKER_HOST_TOUCH,
	BROKER_HOST_MODIFY_BACKUP, /* ModifyBackup: record the pre-image now, the client writes */
};

struct broker_host_op {
	enum broker_host_kind kind;
	const char *path; /* path, or from (rename, copy, link; a symbolic link's content) */
	const char *to;
	bool recursive, force, symbolic;
	enum broker_delete_mode delete_mode;
	bool has_mode;
	mode_t mode;
	const char *report_path; /* safeDeleteReportPath: one JSON line per deleted path */
};

/* Limits of the recursive forms (delete -r, copy -r): deeper or bigger trees are -E2BIG/-ELOOP,
 * refused before anything is changed where the tree can be checked first. */
#define BROKER_TREE_MAX_ENTRIES 100000
#define BROKER_TREE_MAX_DEPTH	256

void broker_ipc_host_op(struct broker *b, const struct broker_ipc_ctx *c,
			const struct broker_host_op *op, struct broker_ipc_result *ret);

/* Where pre-images go from now on (NULL: nowhere). `brokered serve` switches turns on
 * EnableModifyBackup / CommitModifyBackup. Borrowed. */
void broker_set_turn(struct broker *b, struct store_turn *t);
struct store_turn *broker_get_turn(const struct broker *b);
/* The mode of deletes that name none: JSON without deleteMode, and intercepted unlink() (rmdir
 * stays rmdir; a file system without a trash falls back to unlink). Default UNLINK. */
void broker_set_delete_mode(struct broker *b, enum broker_delete_mode m);

/* ---- sockets (broker-net.c) ---- */
void broker_net_handle(const struct broker_config *cfg, struct audit *audit, int root_fd,
		       const struct broker_req *q, struct broker_resp *resp);
