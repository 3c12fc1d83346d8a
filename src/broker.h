/* SPDX-License-Identifier: MIT */
/*
 * The broker (DESIGN section 2): one function per operation kind. It resolves paths as the target
 * would (resolve.c), decides by policy, takes the pre-image through one hook (broker_before_change),
 * performs the operation itself on fds, and writes one audit line per decision. It never exits the
 * process: every failure is the operation's -errno.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "resolve.h"

struct audit;
struct store_turn;
struct policy;

enum broker_op {
	BROKER_OP_OPEN,     /* open, openat, openat2, creat with write/create/truncate flags */
	BROKER_OP_TRUNCATE, /* truncate(path, len) */
	BROKER_OP_UNLINK,   /* unlink, unlinkat(0), rmdir, unlinkat(AT_REMOVEDIR) */
	BROKER_OP_RENAME,   /* rename, renameat, renameat2 */
	BROKER_OP_MKDIR,
	BROKER_OP_MKNOD,
	BROKER_OP_LINK,     /* hard link */
	BROKER_OP_SYMLINK,
	BROKER_OP_CHMOD,
	BROKER_OP_CHOWN,
	BROKER_OP_UTIMES,
	BROKER_OP_SETXATTR,
	BROKER_OP_REMOVEXATTR,
	_BROKER_OP_MAX,
};

const char *broker_op_name(enum broker_op op);

/* A decoded request. Paths are copies (read once from the target). */
struct broker_req {
	enum broker_op op;
	pid_t tid;
	const char *syscall_name;
	int dirfd;          /* AT_FDCWD or the target's dir fd */
	const char *path;   /* NULL for fd-based forms (fchmod, ...) */
	int fd;             /* fd-based forms: the target's fd; else -1 */
	int dirfd2;         /* rename/link: second dir fd */
	const char *path2;  /* rename/link: destination; symlink: the link's path */
	const char *symlink_target; /* symlink: the content */
	uint64_t flags;     /* open flags / AT_* flags / rename flags */
	uint64_t resolve;   /* openat2 RESOLVE_* */
	mode_t mode;
	dev_t dev;
	uint64_t length;    /* truncate */
	uid_t uid;          /* chown */
	gid_t gid;
	bool times_now;     /* utimes: NULL times */
	struct timespec times[2];
	const char *xattr_name;
	const void *xattr_value;
	size_t xattr_size;
	int xattr_flags;
	bool at_empty_path; /* *at with AT_EMPTY_PATH and "" path: acts on dirfd */
};

enum broker_resp_kind {
	BROKER_RESP_ERROR,    /* value = -errno */
	BROKER_RESP_VALUE,    /* value = syscall result */
	BROKER_RESP_CONTINUE, /* let the kernel run the syscall (Landlock decides) */
	BROKER_RESP_FD,       /* install fd in the target (ADDFD + SEND) */
	BROKER_RESP_DEFER,    /* a FIFO with no reader yet: fd is an O_PATH fd of it; the supervisor
			       * retries a non-blocking open with defer_flags until it succeeds */
};

struct broker_resp {
	enum broker_resp_kind kind;
	int64_t value;
	int fd;             /* owned by the response */
	bool cloexec;
	int defer_flags;
	/* For BROKER_RESP_FD: a file the broker created, removed again if the fd cannot be
	 * installed (the target vanished). */
	int created_parent_fd;
	char *created_name;
};

struct broker_config {
	const char *workspace;   /* real path */
	const char *scratch;     /* real path; writable by the kernel (Landlock) */
	const char *state_dir;   /* brokered's own state: never writable from inside */
	const char *home;
	bool backup_enabled;
	bool kernel_enforces;    /* Landlock is on: scratch and device writes may CONTINUE */
};

struct broker_stats {
	uint64_t requests, allowed, denied, continued, errors;
	uint64_t backups_saved, backups_absent, not_backed_up;
};

struct broker;

int broker_new(const struct broker_config *cfg, struct audit *audit, struct store_turn *turn,
	       struct broker **ret);
void broker_free(struct broker *b);
/* The policy to use (NULL: the built-in default). Borrowed. */
void broker_set_policy(struct broker *b, const struct policy *p);
void broker_handle(struct broker *b, const struct broker_req *req, struct broker_resp *resp);
/* Called after a BROKER_RESP_FD response could not be delivered. */
void broker_undo_creation(struct broker *b, struct broker_resp *resp);
void broker_resp_done(struct broker_resp *resp);
const struct broker_stats *broker_get_stats(const struct broker *b);

/* A refusal that the user may approve (policy decision "prompt"), merged per path. */
struct broker_prompt {
	char *path;     /* real path */
	unsigned access; /* POLICY_ACCESS_* bits asked for */
	char *op;       /* first operation that asked */
	char *rule;     /* what decided "prompt" */
};
const struct broker_prompt *broker_prompts(const struct broker *b, size_t *ret_n);
/* Paths over the backup size limit, for the run's summary (NULL-terminated, owned). */
char **broker_not_backed_up(const struct broker *b);
