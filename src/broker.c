/* SPDX-License-Identifier: MIT */
#include "broker.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "audit.h"
#include "basic/escape.h"
#include "basic/json-write.h"
#include "basic/macro.h"
#include "basic/stat-util.h"
#include "basic/path-util.h"
#include "basic/strbuf.h"
#include "git-guard.h"
#include "policy.h"
#include "proc.h"
#include "sandbox.h"
#include "store.h"
#include "trash.h"

/* The socket door's state while it serves one request (see the end of this file); all zero while
 * the supervisor's requests are handled, so that path behaves exactly as without the door. */
struct op_log;
struct broker_door {
	bool host; /* a host operation: the broker performs even what the kernel would allow */
	const char *phase; /* audit phase instead of notify-* */
	const char *extra; /* escaped "ipcToolCall=... trace=..." for the audit line */
	bool capture;	   /* copy the outcome of each log_op() into the fields below */
	int decision;	   /* enum decision of the last operation logged */
	char *real, *real_to;
	const char *backup;
	bool logged;	 /* some operation was logged (decided or failed) */
	int delete_mode; /* enum broker_delete_mode for deletes that name none (persistent) */
};
static void door_capture(struct broker *b, const struct op_log *l);
struct resolved;
static int trash_move(struct broker *b, struct resolved *res, struct op_log *l, char **ret_trashed);

struct broker {
	struct broker_config cfg;
	struct audit *audit;
	struct store_turn *turn;
	bool batch;	  /* group commit: see broker_set_batch() */
	bool batch_dirty; /* a request of the batch recorded a pre-image that awaits the flush */
	const struct policy *policy;
	int root_fd;
	struct broker_stats stats;
	char **oversize; /* paths recorded as not backed up */
	size_t n_oversize;
	struct broker_prompt *prompts;
	size_t n_prompts;
	const char *cur_op;	 /* the operation being decided, for prompt blocks */
	dev_t volatile_dev;	 /* cache of is_volatile() */
	int volatile_known;	 /* 0 unknown, 1 volatile, -1 persistent */
	struct broker_door door; /* the socket door's per-request state (the end of this file) */
};

static const char *const op_names[_BROKER_OP_MAX] = {
    [BROKER_OP_OPEN] = "open",
    [BROKER_OP_TRUNCATE] = "truncate",
    [BROKER_OP_UNLINK] = "unlink",
    [BROKER_OP_RENAME] = "rename",
    [BROKER_OP_MKDIR] = "mkdir",
    [BROKER_OP_MKNOD] = "mknod",
    [BROKER_OP_LINK] = "link",
    [BROKER_OP_SYMLINK] = "symlink",
    [BROKER_OP_CHMOD] = "chmod",
    [BROKER_OP_CHOWN] = "chown",
    [BROKER_OP_UTIMES] = "utimes",
    [BROKER_OP_SETXATTR] = "setxattr",
    [BROKER_OP_REMOVEXATTR] = "removexattr",
    [BROKER_OP_CONNECT] = "connect",
    [BROKER_OP_BIND] = "bind",
    [BROKER_OP_SENDTO] = "sendto",
    [BROKER_OP_SENDMSG] = "sendmsg",
};

const char *broker_op_name(enum broker_op op)
{
	return op < _BROKER_OP_MAX && op_names[op] ? op_names[op] : "unknown";
}

int broker_new(const struct broker_config *cfg, struct audit *audit, struct store_turn *turn,
	       struct broker **ret)
{
	struct broker *b = calloc(1, sizeof *b);
	if (!b)
		return -ENOMEM;
	b->cfg = *cfg;
	b->audit = audit;
	b->turn = turn;
	b->root_fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (b->root_fd < 0) {
		int r = negative_errno();
		free(b);
		return r;
	}
	*ret = b;
	return 0;
}

void broker_free(struct broker *b)
{
	if (!b)
		return;
	safe_close(b->root_fd);
	for (size_t i = 0; i < b->n_oversize; i++)
		free(b->oversize[i]);
	free(b->oversize);
	for (size_t i = 0; i < b->n_prompts; i++) {
		free(b->prompts[i].path);
		free(b->prompts[i].op);
		free(b->prompts[i].rule);
	}
	free(b->prompts);
	free(b);
}

void broker_set_policy(struct broker *b, const struct policy *p)
{
	b->policy = p;
}

const struct broker_stats *broker_get_stats(const struct broker *b)
{
	return &b->stats;
}

char **broker_not_backed_up(const struct broker *b)
{
	return b->oversize;
}

const struct broker_prompt *broker_prompts(const struct broker *b, size_t *ret_n)
{
	*ret_n = b->n_prompts;
	return b->prompts;
}

#define MAX_PROMPTS 256

static void record_prompt(struct broker *b, const char *real, unsigned access, const char *rule)
{
	for (size_t i = 0; i < b->n_prompts; i++)
		if (strcmp(b->prompts[i].path, real) == 0) {
			b->prompts[i].access |= access;
			return;
		}
	if (b->n_prompts >= MAX_PROMPTS)
		return;
	struct broker_prompt *n = realloc(b->prompts, (b->n_prompts + 1) * sizeof *n);
	if (!n)
		return;
	b->prompts = n;
	struct broker_prompt *p = &n[b->n_prompts];
	p->path = strdup(real);
	p->op = strdup(b->cur_op ? b->cur_op : "-");
	p->rule = strdup(rule ? rule : "-");
	p->access = access;
	if (!p->path || !p->op || !p->rule) {
		free(p->path);
		free(p->op);
		free(p->rule);
		return;
	}
	b->n_prompts++;
}

void broker_add_prompt(struct broker *b, const char *path, unsigned access, const char *op,
		       const char *rule)
{
	const char *saved = b->cur_op;
	b->cur_op = op;
	record_prompt(b, path, access, rule);
	b->cur_op = saved;
}

void broker_resp_done(struct broker_resp *resp)
{
	resp->fd = safe_close(resp->fd);
	resp->created_parent_fd = safe_close(resp->created_parent_fd);
	free(resp->created_name);
	resp->created_name = NULL;
}

void broker_undo_creation(struct broker *b, struct broker_resp *resp)
{
	if (resp->created_parent_fd >= 0 && resp->created_name)
		(void)unlinkat(resp->created_parent_fd, resp->created_name, 0);
}

/* ---- decisions ---- */

enum decision {
	DECIDE_UNSET = -1, /* failed before the policy was asked */
	DECIDE_DENY,
	DECIDE_BROKER, /* allowed: the broker performs it (with backup) */
	DECIDE_KERNEL, /* allowed by Landlock: let the kernel run it */
	DECIDE_PROMPT, /* refused until the user approves (recorded as a prompt block) */
};

static bool refused(enum decision d)
{
	return d == DECIDE_DENY || d == DECIDE_PROMPT;
}

static const char *decision_name(enum decision d)
{
	switch (d) {
	case DECIDE_BROKER:
		return "allow";
	case DECIDE_KERNEL:
		return "sandbox";
	case DECIDE_PROMPT:
		return "prompt";
	case DECIDE_UNSET:
		return "none";
	case DECIDE_DENY:
	default:
		return "deny";
	}
}

/* Device nodes Landlock lets the target write by itself (the list sandbox.c grants). */
static bool is_kernel_writable_device(const char *real, const struct stat *st)
{
	if (!real)
		return false;
	for (size_t i = 0; i < sandbox_n_writable_devices; i++) {
		const char *d = sandbox_writable_devices[i];
		if (strcmp(d, "/dev/pts") == 0 ? path_is_under(real, d) : false)
			return true;
		if (strcmp(real, d) == 0)
			return !st || S_ISCHR(st->st_mode);
	}
	return false;
}

static enum decision decide(struct broker *b, const char *real, unsigned access,
			    const struct stat *st, const char **ret_reason)
{
	*ret_reason = NULL;
	if (!real)
		return DECIDE_DENY;
	/* Without Landlock nothing but the broker enforces: it performs everything itself (a
	 * CONTINUE would let a racing thread swap the path after the check). */
	enum decision kernel =
	    b->cfg.kernel_enforces && !b->door.host ? DECIDE_KERNEL : DECIDE_BROKER;
	if (path_is_under(real, b->cfg.scratch)) {
		*ret_reason = "scratch";
		return kernel;
	}
	if (access == POLICY_ACCESS_WRITE && is_kernel_writable_device(real, st)) {
		*ret_reason = "device";
		return kernel;
	}
	const char *reason = NULL;
	enum policy_decision d = policy_check(b->policy, real, access, &reason);
	*ret_reason = reason;
	if (d == POLICY_ALLOW)
		return DECIDE_BROKER;
	if (d == POLICY_PROMPT) {
		/* Refused now; the orchestrator asks once after the command and may rerun. */
		record_prompt(b, real, access, reason);
		return DECIDE_PROMPT;
	}
	return DECIDE_DENY;
}

/* ---- audit ---- */

struct op_log {
	const char *phase;
	const char *path, *real, *to, *real_to;
	enum decision decision;
	const char *reason;
	const char *backup; /* what the store did */
};

static const char *errno_name(int e)
{
	switch (e) {
	case 0:
		return "ok";
	case EACCES:
		return "EACCES";
	case EPERM:
		return "EPERM";
	case ENOENT:
		return "ENOENT";
	case EEXIST:
		return "EEXIST";
	case ENOTDIR:
		return "ENOTDIR";
	case EISDIR:
		return "EISDIR";
	case ENOTEMPTY:
		return "ENOTEMPTY";
	case ELOOP:
		return "ELOOP";
	case ENAMETOOLONG:
		return "ENAMETOOLONG";
	case ENOSPC:
		return "ENOSPC";
	case EIO:
		return "EIO";
	case EXDEV:
		return "EXDEV";
	case EINVAL:
		return "EINVAL";
	case EBADF:
		return "EBADF";
	case EFBIG:
		return "EFBIG";
	case ENXIO:
		return "ENXIO";
	case EROFS:
		return "EROFS";
	case EBUSY:
		return "EBUSY";
	case EOPNOTSUPP:
		return "EOPNOTSUPP";
	case EFAULT:
		return "EFAULT";
	default:
		return NULL;
	}
}

static void log_op(struct broker *b, const struct broker_req *q, const struct op_log *l, int result,
		   const struct timespec *t0)
{
	/* Failed before the policy was asked (EEXIST, ENOENT, ...): say what it would have
	 * decided, without recording prompts. */
	struct op_log fixed;
	if (l->decision == DECIDE_UNSET && l->real) {
		fixed = *l;
		unsigned acc = q->op == BROKER_OP_UNLINK ? POLICY_ACCESS_DELETE
			       : (q->op >= BROKER_OP_CHMOD && q->op <= BROKER_OP_REMOVEXATTR)
				   ? POLICY_ACCESS_METADATA
				   : POLICY_ACCESS_WRITE;
		if (path_is_under(l->real, b->cfg.scratch))
			fixed.decision = DECIDE_KERNEL;
		else
			fixed.decision =
			    policy_check(b->policy, l->real, acc, &fixed.reason) == POLICY_ALLOW
				? DECIDE_BROKER
				: DECIDE_DENY;
		l = &fixed;
	}
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	uint64_t us =
	    (uint64_t)((t1.tv_sec - t0->tv_sec) * 1000000 + (t1.tv_nsec - t0->tv_nsec) / 1000);
	char res[32];
	const char *rn = errno_name(-MIN(result, 0));
	if (!rn) {
		snprintf(res, sizeof res, "errno%d", -result);
		rn = res;
	}
	char extra[1024] = "";
	int n = 0;
	n += snprintf(extra + n, sizeof extra - (size_t)n, "syscall=%s",
		      q->syscall_name ? q->syscall_name : "-");
	if (l->reason)
		n += snprintf(extra + n, sizeof extra - (size_t)n, " rule=%s", l->reason);
	if (l->backup && n < (int)sizeof extra)
		n += snprintf(extra + n, sizeof extra - (size_t)n, " backup=%s", l->backup);
	if (b->door.extra && n < (int)sizeof extra)
		snprintf(extra + n, sizeof extra - (size_t)n, " %s", b->door.extra);
	door_capture(b, l);
	struct audit_record rec = {
	    .phase = b->door.phase ? b->door.phase : l->phase,
	    .op = broker_op_name(q->op),
	    .path = l->path,
	    .normalised = l->real,
	    .to = l->to,
	    .normalised_to = l->real_to,
	    .decision = decision_name(l->decision),
	    .result = rn,
	    .extra = extra,
	    .pid = q->tid,
	    .us = us,
	};
	audit_log(b->audit, &rec);
}

/* A ".git" entry or a hooks directory made any other way than git makes them (git-guard.h). */
static int check_git_guard(struct broker *b, const char *real, enum git_guard_make how,
			   struct op_log *l)
{
	if (!real || path_is_under(real, b->cfg.scratch) || git_guard_name_allowed(real, how))
		return 0;
	l->decision = DECIDE_DENY;
	l->reason = "protected:git";
	return -EACCES;
}

/* ---- the pre-modification hook ---- */

static const char *store_result_name(enum store_result r)
{
	switch (r) {
	case STORE_RESULT_ALREADY:
		return "already";
	case STORE_RESULT_ABSENT:
		return "absent";
	case STORE_RESULT_SAVED:
		return "saved";
	case STORE_RESULT_NOT_BACKED_UP:
		return "not-backed-up";
	case STORE_RESULT_DISABLED:
	default:
		return "disabled";
	}
}

static void remember_oversize(struct broker *b, const char *path)
{
	if (b->n_oversize >= 1000) /* the summary names the first thousand */
		return;
	char **n = realloc(b->oversize, (b->n_oversize + 2) * sizeof *n);
	if (!n)
		return;
	b->oversize = n;
	n[b->n_oversize] = strdup(path);
	if (n[b->n_oversize])
		b->n_oversize++;
	n[b->n_oversize] = NULL;
}

/*
 * A file on tmpfs or ramfs does not survive a crash, so neither needs its pre-image: it is
 * recorded without waiting for a flush (the record still precedes the change in memory). dev is the
 * parent's st_dev when the caller has it (0: look).
 */
static bool is_volatile(struct broker *b, int parent_fd, dev_t dev)
{
	if (!dev) {
		struct stat st;
		if (fstat(parent_fd, &st) < 0)
			return false;
		dev = st.st_dev;
	}
	if (b->volatile_known && dev == b->volatile_dev)
		return b->volatile_known > 0;
	struct statfs sf;
	bool v = fstatfs(parent_fd, &sf) == 0 &&
		 (sf.f_type == 0x01021994 /* TMPFS_MAGIC */ || sf.f_type == 0x858458f6 /* RAMFS */);
	b->volatile_dev = dev;
	b->volatile_known = v ? 1 : -1;
	return v;
}

/*
 * Every broker path that is about to change or create something at parent_fd/name calls this one
 * function first. Fails closed: if the pre-image cannot be recorded, the change must not happen.
 * st is the name's lstat() just taken by the caller, or NULL with STORE_ABSENT in flags, or NULL
 * (the store looks); dev the parent's st_dev, or 0.
 */
static int before_change(struct broker *b, int parent_fd, const char *name, const char *real,
			 const struct stat *st, dev_t dev, unsigned flags, bool *ret_consumed,
			 struct op_log *l)
{
	if (ret_consumed)
		*ret_consumed = false;
	if (!b->turn || !b->cfg.backup_enabled) {
		l->backup = "disabled";
		return 0;
	}
	enum store_result res = STORE_RESULT_DISABLED;
	bool consumed = false;
	int r = store_preimage_stat(b->turn, parent_fd, name, real, st, flags, &res, &consumed);
	if (r < 0) {
		l->backup = "failed";
		/* An oversize file under deny_oversize is a refusal, not an I/O error. */
		return r == -EFBIG ? -EACCES : r;
	}
	l->backup = store_result_name(res);
	switch (res) {
	case STORE_RESULT_SAVED:
		b->stats.backups_saved++;
		if (b->batch && !is_volatile(b, parent_fd, dev)) {
			b->batch_dirty = true;
			return -EINPROGRESS; /* recorded; flushed with the batch, then done again */
		}
		r = is_volatile(b, parent_fd, dev) ? store_flush(b->turn) : store_sync(b->turn);
		if (r < 0) {
			l->backup = "sync-failed";
			return r;
		}
		break;
	case STORE_RESULT_ABSENT:
		b->stats.backups_absent++;
		break;
	case STORE_RESULT_NOT_BACKED_UP:
		b->stats.not_backed_up++;
		remember_oversize(b, real);
		break;
	case STORE_RESULT_ALREADY:
		/* maybe recorded by an earlier request of this batch: not durable before its flush
		 */
		if (b->batch && b->batch_dirty)
			return -EINPROGRESS;
		break;
	case STORE_RESULT_DISABLED:
	default:
		break;
	}
	if (ret_consumed)
		*ret_consumed = consumed;
	return 0;
}

static int broker_before_change(struct broker *b, int parent_fd, const char *name, const char *real,
				unsigned flags, bool *ret_consumed, struct op_log *l)
{
	return before_change(b, parent_fd, name, real, NULL, 0, flags, ret_consumed, l);
}

/* The same for a name resolve_path() has just looked at: the store need not look again. */
static int before_change_res(struct broker *b, const struct resolved *res, unsigned flags,
			     bool *ret_consumed, struct op_log *l)
{
	return before_change(b, res->parent_fd, res->name, res->real, res->exists ? &res->st : NULL,
			     res->parent_dev, res->exists ? flags : flags | STORE_ABSENT,
			     ret_consumed, l);
}

/* ---- helpers ---- */

static void set_error(struct broker_resp *resp, int err)
{
	resp->kind = BROKER_RESP_ERROR;
	resp->value = err < 0 ? err : -EIO;
}

static void set_value(struct broker_resp *resp, int64_t v)
{
	resp->kind = BROKER_RESP_VALUE;
	resp->value = v;
}

static int target_umask(const struct broker_req *q, mode_t *ret)
{
	int r = proc_get_umask(q->tid, q->notif, ret);
	if (r < 0)
		*ret = 022;
	return r;
}

/*
 * Set-user-ID and set-group-ID bits outlive the sandbox: a command run as root could leave a
 * root-owned setuid program behind for anyone to run. Unless sandbox.allowSetid, they are dropped
 * from new files and refused (EPERM) by chmod when they would be added. A directory's
 * set-group-ID only passes its group on, and stays allowed.
 */
#define SETID_BITS ((mode_t)(S_ISUID | S_ISGID))

static mode_t setid_strip(const struct broker *b, mode_t mode, bool dir)
{
	return b->cfg.allow_setid || dir ? mode : mode & ~SETID_BITS;
}

/* The mode a new file gets: the target's umask applied, set-ID bits dropped unless allowed. */
static mode_t create_mode(const struct broker *b, const struct broker_req *q, bool dir)
{
	mode_t um;
	target_umask(q, &um);
	return setid_strip(b, q->mode & ~um & 07777, dir);
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

static void proc_fd_path(char *buf, size_t n, int fd)
{
	snprintf(buf, n, "/proc/self/fd/%d", fd);
}

/* ---- open ---- */

static int open_tmpfile(struct broker *b, const struct broker_req *q, struct broker_resp *resp,
			struct resolved *res, struct op_log *l)
{
	int r = resolve_path(&(struct resolve_ctx){q->tid, b->root_fd, q->notif}, q->dirfd, q->path,
			     RESOLVE_FOLLOW | RESOLVE_ALLOW_DOTDOT, res);
	if (r < 0)
		return r;
	l->real = res->real;
	if (!res->exists)
		return -ENOENT;
	if (!S_ISDIR(res->st.st_mode))
		return -ENOTDIR;
	/* An unnamed file in the directory: decide as for a new file in it (its name, if it gets
	 * one, is checked by linkat); "#tmpfile" cannot be a protected name. */
	_cleanup_strbuf_ struct strbuf child = STRBUF_INIT;
	if (path_join(res->real, "#tmpfile", &child) < 0)
		return -ENOMEM;
	l->decision = decide(b, child.buf, POLICY_ACCESS_WRITE, NULL, &l->reason);
	if (refused(l->decision))
		return -EACCES;
	if (l->decision == DECIDE_KERNEL) {
		resp->kind = BROKER_RESP_CONTINUE;
		return 0;
	}
	_cleanup_close_ int dfd =
	    openat(res->parent_fd, res->name, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return negative_errno();
	int fd = WITH_UMASK_0(
	    openat(dfd, ".", (int)(q->flags | O_CLOEXEC | O_NOCTTY), create_mode(b, q, false)));
	if (fd < 0)
		return negative_errno();
	resp->kind = BROKER_RESP_FD;
	resp->fd = fd;
	resp->cloexec = q->flags & O_CLOEXEC;
	return 0;
}

/* Open an existing non-regular file in the broker's zone without ever blocking. */
static int open_special(int parent_fd, const char *name, int flags)
{
	int fd = openat(parent_fd, name, flags | O_NONBLOCK | O_NOFOLLOW);
	if (fd < 0)
		return negative_errno();
	if (!(flags & O_NONBLOCK)) {
		int fl = fcntl(fd, F_GETFL);
		if (fl >= 0)
			(void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	}
	return fd;
}

static int do_open(struct broker *b, const struct broker_req *q, struct broker_resp *resp,
		   struct resolved *res, struct op_log *l)
{
	l->phase = "notify-open";
	if ((q->flags & O_TMPFILE) == O_TMPFILE)
		return open_tmpfile(b, q, resp, res, l);

	int acc = (int)(q->flags & O_ACCMODE);
	bool creat = q->flags & O_CREAT, excl = q->flags & O_EXCL;
	bool nofollow = q->flags & O_NOFOLLOW;
	unsigned rflags = (creat && excl) || nofollow ? 0 : RESOLVE_FOLLOW;
	rflags |= RESOLVE_ALLOW_DOTDOT;
	struct resolve_ctx ctx = {q->tid, b->root_fd, q->notif};

	for (int attempt = 0; attempt < 8; attempt++) {
		resolved_done(res);
		int r = resolve_path(&ctx, q->dirfd, q->path, rflags, res);
		if (r < 0)
			return r;
		l->real = res->real;

		if (res->obj_fd >= 0) {
			/* A magic link (/proc/PID/fd/N, /dev/stdout, ...): decide on what it names.
			 */
			if (!S_ISREG(res->st.st_mode) && !S_ISDIR(res->st.st_mode)) {
				l->decision = DECIDE_KERNEL;
				l->reason = "magic-link";
				resp->kind = BROKER_RESP_CONTINUE;
				return 0;
			}
			if (S_ISDIR(res->st.st_mode))
				return -EISDIR;
			l->decision =
			    decide(b, res->real, POLICY_ACCESS_WRITE, &res->st, &l->reason);
			if (refused(l->decision))
				return -EACCES;
			if (l->decision == DECIDE_KERNEL) {
				resp->kind = BROKER_RESP_CONTINUE;
				return 0;
			}
			/* Back up by the file's own name, then reopen the object itself. */
			_cleanup_free_ char *parent = NULL;
			const char *name;
			if (!res->real || path_split(res->real, &parent, &name) < 0)
				return -EACCES;
			_cleanup_close_ int pfd = open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
			struct stat st;
			if (pfd < 0 || fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
			    !stat_inode_same(&st, &res->st))
				return -EACCES;
			if (acc != O_RDONLY || (q->flags & O_TRUNC)) {
				r = broker_before_change(b, pfd, name, res->real, 0, NULL, l);
				if (r < 0)
					return r;
			}
			char p[64];
			proc_fd_path(p, sizeof p, res->obj_fd);
			int fd = open(p, (int)((q->flags & ~(uint64_t)(O_CREAT | O_EXCL)) |
					       O_CLOEXEC | O_NOCTTY));
			if (fd < 0)
				return negative_errno();
			resp->kind = BROKER_RESP_FD;
			resp->fd = fd;
			resp->cloexec = q->flags & O_CLOEXEC;
			return 0;
		}

		if (!res->exists) {
			if (!creat)
				return -ENOENT;
			if (res->trailing_slash)
				return -EISDIR;
			if ((r = check_git_guard(b, res->real, GIT_GUARD_MAKE_FILE, l)) < 0)
				return r;
			l->decision = decide(b, res->real, POLICY_ACCESS_WRITE, NULL, &l->reason);
			if (refused(l->decision))
				return -EACCES;
			if (l->decision == DECIDE_KERNEL) {
				resp->kind = BROKER_RESP_CONTINUE;
				return 0;
			}
			r = before_change_res(b, res, 0, NULL, l);
			if (r < 0)
				return r;
			int fd = WITH_UMASK_0(openat(
			    res->parent_fd, res->name,
			    (int)(q->flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY),
			    create_mode(b, q, false)));
			if (fd < 0) {
				/* Created meanwhile (from outside the sandbox): open the existing
				 * file again, unless this very call recorded the path as absent;
				 * then the file would be changed with no backup. Fail closed. */
				if (errno == EEXIST && !excl &&
				    !(l->backup &&
				      strcmp(l->backup, store_result_name(STORE_RESULT_ABSENT)) ==
					  0))
					continue;
				return negative_errno();
			}
			resp->kind = BROKER_RESP_FD;
			resp->fd = fd;
			resp->cloexec = q->flags & O_CLOEXEC;
			resp->created_parent_fd = TAKE_FD(res->parent_fd);
			resp->created_name = TAKE_PTR(res->name);
			return 0;
		}

		if (creat && excl)
			return -EEXIST;
		if (S_ISLNK(res->st.st_mode))
			return -ELOOP; /* O_NOFOLLOW on a symlink */
		l->decision = decide(b, res->real, POLICY_ACCESS_WRITE, &res->st, &l->reason);
		if (refused(l->decision))
			return -EACCES;
		if (l->decision == DECIDE_KERNEL) {
			resp->kind = BROKER_RESP_CONTINUE;
			return 0;
		}
		int oflags = (int)((q->flags & ~(uint64_t)(O_CREAT | O_EXCL)) | O_NOFOLLOW |
				   O_CLOEXEC | O_NOCTTY);
		if (!S_ISREG(res->st.st_mode)) {
			if (S_ISDIR(res->st.st_mode))
				return -EISDIR;
			int fd = open_special(res->parent_fd, res->name, oflags);
			if (fd == -ENXIO && S_ISFIFO(res->st.st_mode) && !(q->flags & O_NONBLOCK)) {
				/* Natively this blocks until a reader comes; the broker must not.
				 */
				fd = openat(res->parent_fd, res->name,
					    O_PATH | O_NOFOLLOW | O_CLOEXEC);
				if (fd < 0)
					return negative_errno();
				resp->kind = BROKER_RESP_DEFER;
				resp->fd = fd;
				resp->cloexec = q->flags & O_CLOEXEC;
				resp->defer_flags = oflags & ~O_NOFOLLOW;
				return 0;
			}
			if (fd < 0)
				return fd;
			resp->kind = BROKER_RESP_FD;
			resp->fd = fd;
			resp->cloexec = q->flags & O_CLOEXEC;
			return 0;
		}
		if (acc != O_RDONLY || (q->flags & O_TRUNC)) {
			r = before_change_res(b, res, 0, NULL, l);
			if (r < 0)
				return r;
		}
		int fd = openat(res->parent_fd, res->name, oflags);
		if (fd < 0) {
			if (errno == ELOOP || errno == ENOENT)
				continue; /* replaced meanwhile: resolve again */
			return negative_errno();
		}
		struct stat st;
		if (fstat(fd, &st) == 0 && (!stat_inode_same(&st, &res->st))) {
			close(fd);
			continue;
		}
		resp->kind = BROKER_RESP_FD;
		resp->fd = fd;
		resp->cloexec = q->flags & O_CLOEXEC;
		return 0;
	}
	return -EAGAIN;
}

/* ---- truncate ---- */

static int do_truncate(struct broker *b, const struct broker_req *q, struct broker_resp *resp,
		       struct resolved *res, struct op_log *l)
{
	int r = resolve_path(&(struct resolve_ctx){q->tid, b->root_fd, q->notif}, q->dirfd, q->path,
			     RESOLVE_FOLLOW, res);
	if (r < 0)
		return r;
	l->real = res->real;
	if (!res->exists)
		return -ENOENT;
	if (S_ISDIR(res->st.st_mode))
		return -EISDIR;
	if (!S_ISREG(res->st.st_mode))
		return -EINVAL;
	if ((int64_t)q->length < 0)
		return -EINVAL;
	l->decision = decide(b, res->real, POLICY_ACCESS_WRITE, &res->st, &l->reason);
	if (refused(l->decision))
		return -EACCES;
	if (l->decision == DECIDE_KERNEL) {
		resp->kind = BROKER_RESP_CONTINUE;
		return 0;
	}
	_cleanup_close_ int fd =
	    res->obj_fd >= 0
		? -1
		: openat(res->parent_fd, res->name, O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (res->obj_fd >= 0) {
		char p[64];
		proc_fd_path(p, sizeof p, res->obj_fd);
		fd = open(p, O_WRONLY | O_CLOEXEC | O_NONBLOCK);
	}
	if (fd < 0)
		return negative_errno();
	if (res->parent_fd >= 0) {
		r = before_change_res(b, res, 0, NULL, l);
		if (r < 0)
			return r;
	}
	if (ftruncate(fd, (off_t)q->length) < 0)
		return negative_errno();
	set_value(resp, 0);
	return 0;
}

/* ---- unlink / rmdir ---- */

static int do_unlink(struct broker *b, const struct broker_req *q, struct broker_resp *resp,
		     struct resolved *res, struct op_log *l)
{
	bool rmdir_ = q->flags & AT_REMOVEDIR;
	int r = resolve_path(&(struct resolve_ctx){q->tid, b->root_fd, q->notif}, q->dirfd, q->path,
			     0, res);
	if (r < 0)
		return r;
	l->real = res->real;
	if (!strcmp(res->name, "."))
		return -EINVAL;
	if (!strcmp(res->name, ".."))
		return -ENOTEMPTY;
	if (!res->exists)
		return -ENOENT;
	bool isdir = S_ISDIR(res->st.st_mode);
	if (rmdir_ && !isdir)
		return -ENOTDIR;
	if (!rmdir_ && isdir)
		return -EISDIR;
	if (!rmdir_ && res->trailing_slash)
		return -ENOTDIR;
	l->decision = decide(b, res->real, POLICY_ACCESS_DELETE, &res->st, &l->reason);
	if (refused(l->decision))
		return -EACCES;
	if (l->decision == DECIDE_KERNEL) {
		resp->kind = BROKER_RESP_CONTINUE;
		return 0;
	}
	if (rmdir_) {
		/* Only an empty directory can go; don't record a pre-image for a refusal. */
		_cleanup_close_ int dfd = openat(res->parent_fd, res->name,
						 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (dfd >= 0) {
			DIR *d = fdopendir(dfd);
			if (d) {
				(void)TAKE_FD(dfd);
				struct dirent *de;
				bool empty = true;
				while ((de = readdir(d)))
					if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
						empty = false;
						break;
					}
				closedir(d);
				if (!empty)
					return -ENOTEMPTY;
			}
		}
	}
	if (b->door.delete_mode == BROKER_DELETE_TRASH && !rmdir_) {
		/* Configured to trash deletes: a file system without a trash falls back to unlink.
		 */
		r = trash_move(b, res, l, NULL);
		if (r != -EXDEV) {
			if (r < 0)
				return r;
			set_value(resp, 0);
			return 0;
		}
	}
	/* A file is kept by a hard link in the store (no copy), recorded and flushed, and only
	 * then unlinked here: a broker killed at any point leaves it either in place or in the
	 * store with its record. */
	bool consumed = false;
	unsigned f = rmdir_ ? STORE_CONSUME : S_ISREG(res->st.st_mode) ? STORE_REPLACE : 0;
	r = before_change_res(b, res, f, &consumed, l);
	if (r < 0)
		return r;
	if (!consumed && unlinkat(res->parent_fd, res->name, rmdir_ ? AT_REMOVEDIR : 0) < 0)
		return negative_errno();
	set_value(resp, 0);
	return 0;
}

/* ---- rename ---- */

/*
 * A directory renamed brings every path of its tree into being below the destination. Those paths
 * did not exist (or were recorded already): record them as absent, or undo would restore a
 * destination directory the turn had (re)made and leave what the rename put in it.
 */
/* Is the directory empty? One that cannot be read counts as not empty: the rename is refused
 * (fail closed) rather than recording its tree as arriving over entries it cannot see. */
static bool dir_is_empty(int parent_fd, const char *name)
{
	int fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		safe_close(fd);
		return false;
	}
	bool empty = true;
	for (struct dirent *de; empty && (de = readdir(d));)
		empty = !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..");
	closedir(d);
	return empty;
}

static int record_tree_arrivals(struct broker *b, int src_dirfd, const char *src_name,
				const char *dst_real, int depth)
{
	if (depth > 256)
		return -ELOOP;
	int fd = openat(src_dirfd, src_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOTDIR ? 0 : negative_errno();
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return negative_errno();
	}
	int r = 0;
	struct dirent *de;
	struct strbuf sb = STRBUF_INIT;
	while (r >= 0 && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		strbuf_reset(&sb);
		if ((r = path_join(dst_real, de->d_name, &sb)) < 0)
			break;
		if ((r = store_preimage_absent(b->turn, sb.buf)) < 0)
			break;
		if (de->d_type == DT_DIR || de->d_type == DT_UNKNOWN) {
			_cleanup_free_ char *child = strdup(sb.buf);
			r = child ? record_tree_arrivals(b, dirfd(d), de->d_name, child, depth + 1)
				  : -ENOMEM;
		}
	}
	strbuf_free(&sb);
	closedir(d);
	return r;
}

static int do_rename(struct broker *b, const struct broker_req *q, struct broker_resp *resp,
		     struct resolved *res, struct op_log *l)
{
	struct resolve_ctx ctx = {q->tid, b->root_fd, q->notif};
	struct resolved dst = RESOLVED_INIT;
	int r = resolve_path(&ctx, q->dirfd, q->path, 0, res);
	if (r < 0)
		return r;
	l->real = res->real;
	r = resolve_path(&ctx, q->dirfd2, q->path2, 0, &dst);
	if (r < 0)
		goto out;
	l->real_to = dst.real;
	l->to = q->path2;
	if (!res->exists) {
		r = -ENOENT;
		goto out;
	}
	if (!strcmp(res->name, ".") || !strcmp(res->name, "..") || !strcmp(dst.name, ".") ||
	    !strcmp(dst.name, "..")) {
		r = -EBUSY;
		goto out;
	}
	bool exchange = q->flags & RENAME_EXCHANGE;
	if ((q->flags & RENAME_NOREPLACE) && dst.exists) {
		r = -EEXIST;
		goto out;
	}
	if (exchange && !dst.exists) {
		r = -ENOENT;
		goto out;
	}
	/* The kernel's type rules, checked before any pre-image is taken: a rename that fails after
	 * the target was linked into the store would leave it sharing its inode with the store. */
	if (!exchange && dst.exists && !stat_inode_same(&res->st, &dst.st)) {
		bool sdir = S_ISDIR(res->st.st_mode), ddir = S_ISDIR(dst.st.st_mode);
		if (sdir && !ddir) {
			r = -ENOTDIR;
			goto out;
		}
		if (!sdir && ddir) {
			r = -EISDIR;
			goto out;
		}
		if (res->st.st_dev != dst.st.st_dev) {
			r = -EXDEV;
			goto out;
		}
	}
	if ((r = check_git_guard(b, dst.real, git_guard_make_renamed(res->real, res->st.st_mode),
				 l)) < 0 ||
	    (exchange &&
	     (r = check_git_guard(b, res->real, git_guard_make_renamed(dst.real, dst.st.st_mode),
				  l)) < 0))
		goto out;
	/* Both names must be allowed: delete on the source, write on the target. */
	const char *reason2 = NULL;
	enum decision d1 =
	    decide(b, res->real,
		   exchange ? POLICY_ACCESS_WRITE | POLICY_ACCESS_DELETE : POLICY_ACCESS_DELETE,
		   &res->st, &l->reason);
	enum decision d2 =
	    decide(b, dst.real,
		   exchange ? POLICY_ACCESS_WRITE | POLICY_ACCESS_DELETE : POLICY_ACCESS_WRITE,
		   dst.exists ? &dst.st : NULL, &reason2);
	if (refused(d1) || refused(d2)) {
		l->decision = refused(d1) ? d1 : d2;
		if (!refused(d1))
			l->reason = reason2;
		r = -EACCES;
		goto out;
	}
	if (d1 == DECIDE_KERNEL && d2 == DECIDE_KERNEL) {
		l->decision = DECIDE_KERNEL;
		resp->kind = BROKER_RESP_CONTINUE;
		r = 0;
		goto out;
	}
	l->decision = DECIDE_BROKER;
	/* More of the kernel's rules, once policy allowed the rename and before any record: a
	 * directory goes only onto an empty one, and not below itself (its tree would be recorded
	 * as arriving where it cannot). */
	if (!exchange && dst.exists && S_ISDIR(dst.st.st_mode) && S_ISDIR(res->st.st_mode) &&
	    !stat_inode_same(&res->st, &dst.st) && !dir_is_empty(dst.parent_fd, dst.name)) {
		r = -ENOTEMPTY;
		goto out;
	}
	if (S_ISDIR(res->st.st_mode) && path_is_under(dst.real, res->real) &&
	    strcmp(dst.real, res->real) != 0) {
		r = -EINVAL;
		goto out;
	}
	/* Pre-images: the source lives on under the new name, so it is copied (a directory with its
	 * whole tree); the replaced target is recorded as well. Nothing is consumed: if the rename
	 * fails after this, both names are untouched. */
	if (d1 == DECIDE_BROKER) {
		r = before_change_res(b, res, S_ISDIR(res->st.st_mode) ? STORE_TREE : 0, NULL, l);
		if (r < 0)
			goto out;
	}
	if (d2 == DECIDE_BROKER) {
		unsigned f = exchange && dst.exists && S_ISDIR(dst.st.st_mode) ? STORE_TREE : 0;
		/* A file renamed over is gone from its name once the rename lands: the store may
		 * keep the file itself rather than a copy (sed -i, mv over). */
		if (!exchange && dst.exists && S_ISREG(dst.st.st_mode))
			f |= STORE_REPLACE;
		r = before_change_res(b, &dst, f, NULL, l);
		if (r < 0)
			goto out;
	}
	/* What a directory brings under its new name did not exist there (exchange: both ways);
	 * after both pre-images, so that a tree recorded in full keeps its records. */
	if (d2 == DECIDE_BROKER && b->turn && b->cfg.backup_enabled && S_ISDIR(res->st.st_mode)) {
		r = record_tree_arrivals(b, res->parent_fd, res->name, dst.real, 0);
		if (r < 0)
			goto out;
	}
	if (d1 == DECIDE_BROKER && b->turn && b->cfg.backup_enabled && exchange &&
	    S_ISDIR(dst.st.st_mode)) {
		r = record_tree_arrivals(b, dst.parent_fd, dst.name, res->real, 0);
		if (r < 0)
			goto out;
	}
	if (renameat2(res->parent_fd, res->name, dst.parent_fd, dst.name, (unsigned)q->flags) < 0) {
		r = negative_errno();
		goto out;
	}
	set_value(resp, 0);
	r = 0;
out:
	if (r < 0 || resp->kind != BROKER_RESP_CONTINUE) {
		/* keep dst's strings alive for the audit line: copy them over */
	}
	if (l->real_to == dst.real) {
		static __thread char buf[BROKERED_PATH_MAX + 1];
		if (dst.real) {
			snprintf(buf, sizeof buf, "%s", dst.real);
			l->real_to = buf;
		}
	}
	resolved_done(&dst);
	return r;
}

/* ---- mkdir, mknod, symlink: creations ---- */

static int create_common(struct broker *b, const struct broker_req *q, struct broker_resp *resp,
			 struct resolved *res, struct op_log *l, int dirfd, const char *path)
{
	/* "mkdir /", "mkdir ." name an existing directory: EEXIST, as the kernel says. */
	int r = resolve_path(&(struct resolve_ctx){q->tid, b->root_fd, q->notif}, dirfd, path,
			     RESOLVE_ALLOW_DOTDOT, res);
	if (r < 0)
		return r;
	l->real = res->real;
	if (res->exists)
		return -EEXIST;
	if (res->trailing_slash && q->op != BROKER_OP_MKDIR)
		return q->op == BROKER_OP_SYMLINK ? -ENOENT : -EISDIR;
	if ((r = check_git_guard(
		 b, res->real,
		 q->op == BROKER_OP_MKDIR ? GIT_GUARD_MAKE_MKDIR : GIT_GUARD_MAKE_OTHER, l)) < 0)
		return r;
	l->decision = decide(b, res->real, POLICY_ACCESS_WRITE, NULL, &l->reason);
	if (refused(l->decision))
		return -EACCES;
	if (l->decision == DECIDE_KERNEL) {
		resp->kind = BROKER_RESP_CONTINUE;
		return 1;
	}
	return before_change_res(b, res, 0, NULL, l);
}

static int do_mkdir(struct broker *b, const struct broker_req *q, struct broker_resp *resp,
		    struct resolved *res, struct op_log *l)
{
	int r = create_common(b, q, resp, res, l, q->dirfd, q->path);
	if (r != 0)
		return r < 0 ? r : 0;
	if (WITH_UMASK_0(mkdirat(res->parent_fd, res->name, create_mode(b, q, true))) < 0)
		return negative_errno();
	set_value(resp, 0);
	return 0;
}

static int do_mknod(struct broker *b, const struct broker_req *q, struct broker_resp *resp,
		    struct resolved *res, struct op_log *l)
{
	mode_t type = q->mode & S_IFMT;
	if (type == S_IFCHR || type == S_IFBLK)
		return -EPERM; /* a device node in the workspace would open the raw device */
	if (type != 0 && type != S_IFREG && type != S_IFIFO && type != S_IFSOCK)
		return -EINVAL;
	int r = create_common(b, q, resp, res, l, q->dirfd, q->path);
	if (r != 0)
		return r < 0 ? r : 0;
	if (WITH_UMASK_0(mknodat(res->parent_fd, res->name,
				 create_mode(b, q, false) | (type ? type : S_IFREG), 0)) < 0)
		return negative_errno();
	set_value(resp, 0);
	return 0;
}

static int do_symlink(struct broker *b, const struct broker_req *q, struct broker_resp *resp,
		      struct resolved *res, struct op_log *l)
{
	if (!q->symlink_target || !*q->symlink_target)
		return -ENOENT;
	l->to = q->symlink_target;
	int r = create_common(b, q, resp, res, l, q->dirfd2, q->path2);
	if (r != 0)
		return r < 0 ? r : 0;
	if (symlinkat(q->symlink_target, res->parent_fd, res->name) < 0)
		return negative_errno();
	set_value(resp, 0);
	return 0;
}

/* ---- link ---- */

static int do_link(struct broker *b, const struct broker_req *q, struct broker_resp *resp,
		   struct resolved *res, struct op_log *l)
{
	struct resolve_ctx ctx = {q->tid, b->root_fd, q->notif};
	struct resolved src = RESOLVED_INIT;
	int r;
	if (q->at_empty_path)
		r = resolve_target_fd(&ctx, q->dirfd, &src);
	else
		r = resolve_path(&ctx, q->dirfd, q->path,
				 (q->flags & AT_SYMLINK_FOLLOW) ? RESOLVE_FOLLOW : 0, &src);
	if (r < 0)
		goto out;
	if (!src.exists) {
		r = -ENOENT;
		goto out;
	}
	if (S_ISDIR(src.st.st_mode)) {
		r = -EPERM;
		goto out;
	}
	/* A hard link gives a second name to the same inode: the source must be writable by policy
	 * too, or a protected file could be written through its new name in the workspace. */
	const char *reason = NULL;
	enum decision sd =
	    src.real ? decide(b, src.real, POLICY_ACCESS_WRITE, &src.st, &reason) : DECIDE_BROKER;
	/* a second name of a git config file would change it unseen by the git guard */
	if (src.real && git_guard_classify(src.real) == GIT_GUARD_CONFIG)
		sd = DECIDE_DENY, reason = "protected:git";
	if (refused(sd)) {
		l->decision = sd;
		l->reason = reason;
		static __thread char buf[BROKERED_PATH_MAX + 1];
		snprintf(buf, sizeof buf, "%s", src.real);
		l->real = buf;
		r = -EACCES;
		goto out;
	}
	r = create_common(b, q, resp, res, l, q->dirfd2, q->path2);
	l->to = q->path2;
	l->real_to = res->real;
	if (r != 0) {
		r = r < 0 ? r : 0;
		goto out;
	}
	/* The source's inode gets a second name, and whatever is done to it through that name is
	 * done to the source: record the source now, or undo would remove the name and leave the
	 * source changed. */
	if (sd == DECIDE_BROKER && S_ISREG(src.st.st_mode) && src.st.st_nlink > 0 && src.real &&
	    src.parent_fd >= 0 && src.name && src.obj_fd < 0) {
		r = broker_before_change(b, src.parent_fd, src.name, src.real, 0, NULL, l);
		if (r < 0)
			goto out;
	}
	if (src.obj_fd >= 0) {
		char p[64];
		proc_fd_path(p, sizeof p, src.obj_fd);
		r = linkat(AT_FDCWD, p, res->parent_fd, res->name, AT_SYMLINK_FOLLOW);
	} else {
		assert(src.parent_fd >= 0 && src.name); /* resolved by its parent and name */
		r = linkat(src.parent_fd, src.name, res->parent_fd, res->name, 0);
	}
	if (r < 0) {
		r = negative_errno();
		goto out;
	}
	set_value(resp, 0);
	r = 0;
out:
	resolved_done(&src);
	return r;
}

/* ---- metadata: chmod, chown, utimes, xattrs ---- */

static int resolve_meta(struct broker *b, const struct broker_req *q, struct resolved *res,
			bool follow)
{
	struct resolve_ctx ctx = {q->tid, b->root_fd, q->notif};
	if (q->fd >= 0 || q->at_empty_path)
		return resolve_target_fd(&ctx, q->fd >= 0 ? q->fd : q->dirfd, res);
	return resolve_path(&ctx, q->dirfd, q->path,
			    (follow ? RESOLVE_FOLLOW : 0) | RESOLVE_ALLOW_DOTDOT, res);
}

static int do_meta(struct broker *b, const struct broker_req *q, struct broker_resp *resp,
		   struct resolved *res, struct op_log *l)
{
	bool follow = !(q->flags & AT_SYMLINK_NOFOLLOW);
	int r = resolve_meta(b, q, res, follow);
	if (r < 0)
		return r;
	l->real = res->real;
	if (!res->exists)
		return -ENOENT;
	if (res->obj_fd >= 0 && !res->real) {
		/* Pipes, sockets, unlinked files: nothing on disk to protect or back up, and
		 * Landlock does not see metadata calls — allow only where nothing is named. */
		l->decision = DECIDE_BROKER;
		l->reason = "unnamed";
	} else {
		l->decision = decide(b, res->real, POLICY_ACCESS_METADATA, &res->st, &l->reason);
		if (refused(l->decision))
			return -EACCES;
		/* Landlock does not cover metadata calls; the broker performs them everywhere. */
		if (l->decision == DECIDE_KERNEL)
			l->decision = DECIDE_BROKER;
	}
	if (q->op == BROKER_OP_CHMOD && !follow && S_ISLNK(res->st.st_mode))
		return -EOPNOTSUPP;
	/* A symlink is backed up and changed by its name; an fd of one (O_PATH) has none. */
	if (S_ISLNK(res->st.st_mode) && !res->name)
		return -EOPNOTSUPP;
	/* Set-ID bits the file does not have yet: refused, named files and unnamed ones alike (an
	 * O_TMPFILE made setuid would keep the bits when linked in). */
	if (q->op == BROKER_OP_CHMOD && (q->mode & SETID_BITS & ~res->st.st_mode) &&
	    setid_strip(b, q->mode, S_ISDIR(res->st.st_mode)) != q->mode) {
		l->reason = "setid";
		return -EPERM;
	}

	/* The object to act on: a path through our own fd of it (res owns a magic link's). */
	_cleanup_close_ int own_fd = -1;
	int ofd = res->obj_fd;
	if (ofd < 0) {
		own_fd = openat(res->parent_fd, res->name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		ofd = own_fd;
		struct stat st;
		if (ofd >= 0 && (fstat(ofd, &st) < 0 || !stat_inode_same(&st, &res->st)))
			return -EAGAIN;
	}
	if (ofd < 0)
		return negative_errno();
	char p[64];
	proc_fd_path(p, sizeof p, ofd);

	if (res->parent_fd >= 0 && res->name && res->real &&
	    !path_is_under(res->real, b->cfg.scratch)) {
		r = before_change_res(b, res, STORE_METADATA, NULL, l);
		if (r < 0)
			return r;
	} else if (res->real && res->obj_fd >= 0 && S_ISREG(res->st.st_mode) &&
		   !path_is_under(res->real, b->cfg.scratch) &&
		   store_preimage_recorded(b->turn, res->real) && b->cfg.backup_enabled) {
		/* fd form on a file this turn has recorded already (one it created, say: tar's
		 * futimens, fchmod, fchown after each file): nothing to back up, no name to look
		 * up; but a record of the current batch is not flushed yet. */
		if (b->batch && b->batch_dirty)
			return -EINPROGRESS;
		l->backup = "already";
	} else if (res->real && res->obj_fd >= 0 && S_ISREG(res->st.st_mode) &&
		   !path_is_under(res->real, b->cfg.scratch)) {
		/* fd form on a named file: back it up by its name. A name that no longer holds
		 * the file (renamed meanwhile) is no backup: refuse, never change it unbacked. */
		_cleanup_free_ char *parent = NULL;
		const char *name;
		if (path_split(res->real, &parent, &name) < 0)
			return -EACCES;
		_cleanup_close_ int pfd = open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
		struct stat st;
		if (pfd < 0 || fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !stat_inode_same(&st, &res->st)) {
			l->backup = "failed";
			return -EACCES;
		}
		r = broker_before_change(b, pfd, name, res->real, STORE_METADATA, NULL, l);
		if (r < 0)
			return r;
	}

	switch (q->op) {
	case BROKER_OP_CHMOD:
		r = S_ISLNK(res->st.st_mode)
			? fchmodat(res->parent_fd, res->name, q->mode, AT_SYMLINK_NOFOLLOW)
			: chmod(p, q->mode & 07777);
		break;
	case BROKER_OP_CHOWN:
		r = fchownat(ofd, "", q->uid, q->gid, AT_EMPTY_PATH);
		break;
	case BROKER_OP_UTIMES:
		if (S_ISLNK(res->st.st_mode))
			r = utimensat(res->parent_fd, res->name, q->times_now ? NULL : q->times,
				      AT_SYMLINK_NOFOLLOW);
		else
			r = utimensat(AT_FDCWD, p, q->times_now ? NULL : q->times, 0);
		break;
	case BROKER_OP_SETXATTR:
		r = setxattr(p, q->xattr_name, q->xattr_value, q->xattr_size, q->xattr_flags);
		break;
	case BROKER_OP_REMOVEXATTR:
		r = removexattr(p, q->xattr_name);
		break;
	default:
		return -ENOSYS;
	}
	if (r < 0)
		return negative_errno();
	set_value(resp, 0);
	return 0;
}

void broker_audit_invalid(struct broker *b, const struct broker_req *q, int err)
{
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	struct op_log l = {.phase = "notify-invalid",
			   .path = q->path ? q->path : q->path2,
			   .decision = DECIDE_DENY,
			   .reason = "invalid-arguments"};
	b->stats.requests++;
	b->stats.denied++;
	log_op(b, q, &l, err, &t0);
}

void broker_handle(struct broker *b, const struct broker_req *q, struct broker_resp *resp)
{
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	*resp = (struct broker_resp){
	    .kind = BROKER_RESP_ERROR, .value = -EACCES, .fd = -1, .created_parent_fd = -1};
	struct resolved res = RESOLVED_INIT;
	struct op_log l = {.phase = "notify-op", .path = q->path, .decision = DECIDE_UNSET};
	if (!q->path && q->path2 && q->op != BROKER_OP_SYMLINK)
		l.path = q->path2;
	if (q->op == BROKER_OP_SYMLINK)
		l.path = q->path2;
	b->stats.requests++;
	b->cur_op = broker_op_name(q->op);
	if (q->op >= BROKER_OP_CONNECT) { /* sockets: broker-net.c */
		broker_net_handle(&b->cfg, b->audit, b->root_fd, q, resp);
		b->stats.allowed += resp->kind != BROKER_RESP_ERROR;
		b->stats.denied += resp->kind == BROKER_RESP_ERROR;
		return;
	}

	int r;
	bool fd_form = q->fd >= 0 || q->at_empty_path;
	if ((!q->path && !fd_form && q->op != BROKER_OP_SYMLINK) ||
	    ((q->op == BROKER_OP_RENAME || q->op == BROKER_OP_SYMLINK || q->op == BROKER_OP_LINK) &&
	     !q->path2)) {
		r = -EFAULT; /* a decoder bug must not crash the broker */
		goto done;
	}
	switch (q->op) {
	case BROKER_OP_OPEN:
		r = do_open(b, q, resp, &res, &l);
		break;
	case BROKER_OP_TRUNCATE:
		r = do_truncate(b, q, resp, &res, &l);
		break;
	case BROKER_OP_UNLINK:
		r = do_unlink(b, q, resp, &res, &l);
		break;
	case BROKER_OP_RENAME:
		r = do_rename(b, q, resp, &res, &l);
		break;
	case BROKER_OP_MKDIR:
		r = do_mkdir(b, q, resp, &res, &l);
		break;
	case BROKER_OP_MKNOD:
		r = do_mknod(b, q, resp, &res, &l);
		break;
	case BROKER_OP_LINK:
		r = do_link(b, q, resp, &res, &l);
		break;
	case BROKER_OP_SYMLINK:
		r = do_symlink(b, q, resp, &res, &l);
		break;
	case BROKER_OP_CHMOD:
	case BROKER_OP_CHOWN:
	case BROKER_OP_UTIMES:
	case BROKER_OP_SETXATTR:
	case BROKER_OP_REMOVEXATTR:
		r = do_meta(b, q, resp, &res, &l);
		break;
	default:
		r = -ENOSYS;
		break;
	}
done:
	if (r == -EINPROGRESS && b->batch) {
		broker_resp_done(resp);
		*resp = (struct broker_resp){
		    .kind = BROKER_RESP_RETRY, .fd = -1, .created_parent_fd = -1};
		b->stats.requests--; /* counted when it is handled again */
		resolved_done(&res);
		return;
	}
	if (r < 0) {
		broker_resp_done(resp);
		set_error(resp, r);
		if (refused(l.decision))
			b->stats.denied++;
		else
			b->stats.errors++;
	} else if (resp->kind == BROKER_RESP_CONTINUE) {
		b->stats.continued++;
		l.decision = DECIDE_KERNEL;
	} else {
		b->stats.allowed++;
	}
	if (!l.path && (q->fd >= 0 || q->at_empty_path)) {
		static __thread char fdp[32];
		snprintf(fdp, sizeof fdp, "fd:%d", q->fd >= 0 ? q->fd : q->dirfd);
		l.path = fdp;
	}
	log_op(b, q, &l, r < 0 ? r : 0, &t0);
	resolved_done(&res);
}

/* ---- group commit ---- */

bool broker_batch_useful(const struct broker *b)
{
	return b->turn && b->cfg.backup_enabled && store_turn_durable(b->turn);
}

void broker_set_batch(struct broker *b, bool on)
{
	b->batch = on && broker_batch_useful(b);
}

int broker_batch_sync(struct broker *b, size_t n)
{
	b->stats.batch_syncs++;
	b->stats.batched += n;
	b->batch_dirty = false;
	return store_sync(b->turn);
}

/* ---- the socket door ---- */

const char *broker_ipc_decision_name(enum broker_ipc_decision d)
{
	switch (d) {
	case BROKER_IPC_GRANT_TOKEN:
		return "grant-token";
	case BROKER_IPC_HOST_OP:
		return "host-op";
	case BROKER_IPC_SANDBOX:
		return "sandbox";
	case BROKER_IPC_DENY:
		return "deny";
	case BROKER_IPC_NONE:
	default:
		return NULL;
	}
}

void broker_ipc_result_done(struct broker_ipc_result *r)
{
	free(r->real);
	free(r->real_to);
	free(r->trashed);
	safe_close(r->fd);
	*r = (struct broker_ipc_result)BROKER_IPC_RESULT_INIT;
}

void broker_set_turn(struct broker *b, struct store_turn *t)
{
	b->turn = t;
}

struct store_turn *broker_get_turn(const struct broker *b)
{
	return b->turn;
}

void broker_set_delete_mode(struct broker *b, enum broker_delete_mode m)
{
	b->door.delete_mode = m == BROKER_DELETE_TRASH ? BROKER_DELETE_TRASH : BROKER_DELETE_UNLINK;
}

static int dup_or_null(const char *s, char **ret)
{
	free(*ret);
	*ret = NULL;
	if (s && !(*ret = strdup(s)))
		return -ENOMEM;
	return 0;
}

static void door_capture(struct broker *b, const struct op_log *l)
{
	if (!b->door.capture)
		return;
	b->door.logged = true;
	b->door.decision = l->decision;
	b->door.backup = l->backup;
	(void)dup_or_null(l->real, &b->door.real);
	(void)dup_or_null(l->real_to, &b->door.real_to);
}

static void door_begin(struct broker *b, const struct broker_ipc_ctx *c, const char *phase,
		       bool host, struct strbuf *extra)
{
	strbuf_appends(extra, "door=ipc");
	if (c->tool_call && *c->tool_call) {
		strbuf_appends(extra, " ipcToolCall=");
		escape_appends(extra, c->tool_call);
	}
	if (c->trace && *c->trace) {
		strbuf_appends(extra, " trace=");
		escape_appends(extra, c->trace);
	}
	int dm = b->door.delete_mode;
	b->door = (struct broker_door){
	    .host = host,
	    .phase = phase,
	    .extra = extra->oom ? NULL : strbuf_cstr(extra),
	    .capture = true,
	    .delete_mode = dm,
	};
}

static void door_end(struct broker *b, int r, bool token, struct broker_ipc_result *ret)
{
	ret->error = r < 0 ? r : 0;
	if (!ret->real)
		ret->real = TAKE_PTR(b->door.real);
	if (!ret->real_to)
		ret->real_to = TAKE_PTR(b->door.real_to);
	if (!ret->backup)
		ret->backup = b->door.backup;
	enum decision d = b->door.decision;
	if (r >= 0)
		ret->decision = token ? (ret->fd >= 0 ? BROKER_IPC_GRANT_TOKEN : BROKER_IPC_SANDBOX)
				      : BROKER_IPC_HOST_OP;
	else if (b->door.logged && refused(d) && (r == -EACCES || r == -EPERM))
		ret->decision = BROKER_IPC_DENY;
	else if (b->door.logged && d != DECIDE_DENY)
		ret->decision = token ? BROKER_IPC_GRANT_TOKEN : BROKER_IPC_HOST_OP;
	else
		ret->decision = r == -EACCES ? BROKER_IPC_DENY : BROKER_IPC_NONE;
	free(b->door.real);
	free(b->door.real_to);
	int dm = b->door.delete_mode;
	b->door = (struct broker_door){.delete_mode = dm};
}

static struct broker_req door_req(const struct broker_ipc_ctx *c, enum broker_op op,
				  const char *syscall, const char *path)
{
	return (struct broker_req){
	    .op = op,
	    .tid = c->pid > 0 ? c->pid : getpid(),
	    .syscall_name = syscall,
	    .dirfd = AT_FDCWD,
	    .path = path,
	    .fd = -1,
	    .dirfd2 = AT_FDCWD,
	};
}

/* One request through the common broker code; -errno, or 0 with an fd in *ret_fd for opens. */
static int door_handle(struct broker *b, const struct broker_req *q, int *ret_fd)
{
	struct broker_resp resp;
	broker_handle(b, q, &resp);
	int r;
	switch (resp.kind) {
	case BROKER_RESP_VALUE:
		r = resp.value < 0 ? (int)resp.value : 0;
		break;
	case BROKER_RESP_FD:
		r = 0;
		if (ret_fd)
			*ret_fd = TAKE_FD(resp.fd);
		break;
	case BROKER_RESP_CONTINUE:
		r = 0; /* the kernel would allow it: only token opens get here (SANDBOX) */
		break;
	case BROKER_RESP_DEFER:
		r = -EAGAIN; /* a FIFO without a reader: never block the broker for a socket client
			      */
		break;
	case BROKER_RESP_ERROR:
	default:
		r = resp.value < 0 ? (int)resp.value : -EIO;
		break;
	}
	broker_resp_done(&resp);
	return r;
}

static struct resolve_ctx door_ctx(struct broker *b, const struct broker_ipc_ctx *c)
{
	return (struct resolve_ctx){c->pid > 0 ? c->pid : getpid(), b->root_fd, NULL};
}

static void now(struct timespec *t)
{
	clock_gettime(CLOCK_MONOTONIC, t);
}

/* Read token: the policy's read decision; the broker opens the file read-only (never blocking). */
static int door_read(struct broker *b, const struct broker_ipc_ctx *c, const char *path, int flags,
		     struct broker_ipc_result *ret)
{
	struct timespec t0;
	now(&t0);
	struct broker_req q = door_req(c, BROKER_OP_OPEN, "ipc-read", path);
	q.flags = (uint64_t)flags;
	struct resolved res = RESOLVED_INIT;
	struct op_log l = {.phase = "ipc-token", .path = path, .decision = DECIDE_DENY};
	struct resolve_ctx ctx = door_ctx(b, c);
	int r =
	    resolve_path(&ctx, AT_FDCWD, path,
			 ((flags & O_NOFOLLOW) ? 0 : RESOLVE_FOLLOW) | RESOLVE_ALLOW_DOTDOT, &res);
	if (r >= 0) {
		l.real = res.real;
		if (!res.exists)
			r = -ENOENT;
		else if (S_ISLNK(res.st.st_mode))
			r = -ELOOP;
	}
	if (r >= 0) {
		l.decision = decide(b, res.real, POLICY_ACCESS_READ, &res.st, &l.reason);
		if (refused(l.decision)) {
			r = -EACCES;
		} else if (l.decision == DECIDE_BROKER) {
			int fd;
			int of = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
			if (res.obj_fd >= 0) {
				char p[64];
				proc_fd_path(p, sizeof p, res.obj_fd);
				fd = open(p, of);
			} else {
				fd = openat(res.parent_fd, res.name, of | O_NOFOLLOW);
			}
			if (fd < 0) {
				r = negative_errno();
			} else {
				if (!(flags & O_NONBLOCK)) {
					int fl = fcntl(fd, F_GETFL);
					if (fl >= 0)
						(void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
				}
				ret->fd = fd;
			}
		}
	}
	log_op(b, &q, &l, r < 0 ? r : 0, &t0);
	resolved_done(&res);
	return r;
}

void broker_ipc_token(struct broker *b, const struct broker_ipc_ctx *c, const char *path,
		      bool write, int flags, mode_t mode, struct broker_ipc_result *ret)
{
	*ret = (struct broker_ipc_result)BROKER_IPC_RESULT_INIT;
	if (!path || path[0] != '/') {
		ret->error = -EINVAL;
		return;
	}
	_cleanup_strbuf_ struct strbuf extra = STRBUF_INIT;
	door_begin(b, c, "ipc-token", false, &extra);
	int r;
	if (!write) {
		r = door_read(b, c, path, flags, ret);
	} else {
		struct broker_req q = door_req(c, BROKER_OP_OPEN, "ipc-token", path);
		q.flags = (uint64_t)flags;
		q.mode = mode;
		r = door_handle(b, &q, &ret->fd);
	}
	door_end(b, r, true, ret);
}

/* Move an already resolved and allowed path to the trash, recording its pre-image first. */
static int trash_move(struct broker *b, struct resolved *res, struct op_log *l, char **ret_trashed)
{
	bool isdir = S_ISDIR(res->st.st_mode);
	/* Not consumed: the file lives on in the trash, so the store copies it (a tree with it). */
	int r = before_change_res(b, res, isdir ? STORE_TREE : 0, NULL, l);
	if (r < 0)
		return r;
	return trash_put_at(res->parent_fd, res->name, res->real, ret_trashed);
}

static int dir_is_empty_at(int parent_fd, const char *name)
{
	int fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return negative_errno();
	}
	struct dirent *de;
	int empty = 1;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
			empty = 0;
			break;
		}
	closedir(d);
	return empty;
}

static int door_trash(struct broker *b, const struct broker_ipc_ctx *c, const char *path,
		      bool recursive, struct broker_ipc_result *ret)
{
	struct timespec t0;
	now(&t0);
	struct broker_req q = door_req(c, BROKER_OP_UNLINK, "ipc-trash", path);
	struct resolved res = RESOLVED_INIT;
	struct op_log l = {.phase = "ipc-host-op", .path = path, .decision = DECIDE_DENY};
	struct resolve_ctx ctx = door_ctx(b, c);
	int r = resolve_path(&ctx, AT_FDCWD, path, 0, &res);
	if (r >= 0) {
		l.real = res.real;
		if (!strcmp(res.name, ".") || !strcmp(res.name, ".."))
			r = -EINVAL;
		else if (!res.exists)
			r = -ENOENT;
		else if (S_ISDIR(res.st.st_mode) && !recursive &&
			 (r = dir_is_empty_at(res.parent_fd, res.name)) >= 0)
			r = r ? 0 : -ENOTEMPTY;
	}
	if (r >= 0) {
		l.decision = decide(b, res.real, POLICY_ACCESS_DELETE, &res.st, &l.reason);
		if (refused(l.decision))
			r = -EACCES;
		else
			r = trash_move(b, &res, &l, &ret->trashed);
	}
	log_op(b, &q, &l, r < 0 ? r : 0, &t0);
	resolved_done(&res);
	return r;
}

/* Names in a directory (bounded), for the recursive forms. */
static int list_names_at(int parent_fd, const char *name, size_t *budget, char ***ret,
			 size_t *ret_n)
{
	int fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return negative_errno();
	}
	char **v = NULL;
	size_t n = 0;
	int r = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (*budget == 0) {
			r = -E2BIG;
			break;
		}
		(*budget)--;
		char **nv = realloc(v, (n + 1) * sizeof *nv);
		if (!nv || !(nv[n] = strdup(de->d_name))) {
			if (nv)
				v = nv;
			r = -ENOMEM;
			break;
		}
		v = nv;
		n++;
	}
	closedir(d);
	if (r < 0) {
		for (size_t i = 0; i < n; i++)
			free(v[i]);
		free(v);
		return r;
	}
	*ret = v;
	*ret_n = n;
	return 0;
}

static void names_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/*
 * rm -r: a first pass only checks the policy on every path (so a refusal changes nothing), the
 * second removes depth first, each path through the common unlink code (backed up, logged).
 */
static int door_rm_tree(struct broker *b, const struct broker_ipc_ctx *c, const char *path,
			bool check, unsigned depth, size_t *budget)
{
	if (depth > BROKER_TREE_MAX_DEPTH)
		return -ELOOP;
	struct resolved res = RESOLVED_INIT;
	struct resolve_ctx ctx = door_ctx(b, c);
	int r = resolve_path(&ctx, AT_FDCWD, path, 0, &res);
	if (r < 0)
		return r;
	if (!res.exists) {
		resolved_done(&res);
		return 0; /* gone meanwhile */
	}
	bool isdir = S_ISDIR(res.st.st_mode);
	if (check) {
		const char *reason = NULL;
		if (refused(decide(b, res.real, POLICY_ACCESS_DELETE, &res.st, &reason))) {
			resolved_done(&res);
			/* Let the common code refuse it, so that the refusal is logged as usual. */
			struct broker_req q = door_req(c, BROKER_OP_UNLINK, "ipc-delete", path);
			q.flags = isdir ? AT_REMOVEDIR : 0;
			r = door_handle(b, &q, NULL);
			return r < 0 ? r : -EACCES;
		}
	}
	_cleanup_free_ char *real = strdup(res.real);
	if (!real) {
		resolved_done(&res);
		return -ENOMEM;
	}
	char **names = NULL;
	size_t n = 0;
	if (isdir && (r = list_names_at(res.parent_fd, res.name, budget, &names, &n)) < 0) {
		resolved_done(&res);
		return r;
	}
	resolved_done(&res);
	for (size_t i = 0; r >= 0 && i < n; i++) {
		struct strbuf child = STRBUF_INIT;
		r = path_join(real, names[i], &child);
		if (r >= 0)
			r = door_rm_tree(b, c, strbuf_cstr(&child), check, depth + 1, budget);
		strbuf_free(&child);
	}
	names_free(names, n);
	if (r >= 0 && !check) {
		struct broker_req q = door_req(c, BROKER_OP_UNLINK, "ipc-delete", real);
		q.flags = isdir ? AT_REMOVEDIR : 0;
		r = door_handle(b, &q, NULL);
	}
	return r;
}

static int report_line(int fd, const char *target, const char *real, const char *mode,
		       const char *trashed)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_appendc(&sb, '{');
	json_kv_str(&sb, "target", target);
	if (real)
		json_kv_str(&sb, "normalisedPath", real);
	json_kv_str(&sb, "mode", mode);
	if (trashed)
		json_kv_str(&sb, "trashPath", trashed);
	strbuf_appends(&sb, "}\n");
	int r = sb.oom ? -ENOMEM : 0;
	for (size_t off = 0; r >= 0 && off < sb.len;) {
		ssize_t k = write(fd, sb.buf + off, sb.len - off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			r = k < 0 ? negative_errno() : -EIO;
		else
			off += (size_t)k;
	}
	strbuf_free(&sb);
	return r;
}

static int door_delete(struct broker *b, const struct broker_ipc_ctx *c,
		       const struct broker_host_op *op, struct broker_ipc_result *ret)
{
	enum broker_delete_mode mode = op->delete_mode == BROKER_DELETE_DEFAULT
					   ? (enum broker_delete_mode)b->door.delete_mode
					   : op->delete_mode;
	bool trash = mode == BROKER_DELETE_TRASH;
	_cleanup_close_ int report_fd = -1;
	int r;
	if (op->report_path) {
		/* Opened (policy-checked, backed up) before anything is deleted. */
		struct broker_req q = door_req(c, BROKER_OP_OPEN, "ipc-report", op->report_path);
		q.flags = O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK;
		q.mode = 0600;
		if ((r = door_handle(b, &q, &report_fd)) < 0)
			return r;
		if (report_fd < 0)
			return -EACCES; /* SANDBOX cannot happen for a host op; be safe */
	}
	struct resolved res = RESOLVED_INIT;
	struct resolve_ctx ctx = door_ctx(b, c);
	r = resolve_path(&ctx, AT_FDCWD, op->path, 0, &res);
	if (r < 0)
		return r;
	(void)dup_or_null(res.real, &ret->real);
	bool exists = res.exists, isdir = res.exists && S_ISDIR(res.st.st_mode);
	resolved_done(&res);
	if (!exists)
		return op->force ? 0 : -ENOENT;

	if (trash) {
		r = door_trash(b, c, op->path, op->recursive, ret);
	} else if (isdir && op->recursive) {
		size_t budget = BROKER_TREE_MAX_ENTRIES;
		r = door_rm_tree(b, c, op->path, true, 0, &budget);
		budget = BROKER_TREE_MAX_ENTRIES;
		if (r >= 0)
			r = door_rm_tree(b, c, op->path, false, 0, &budget);
	} else {
		struct broker_req q = door_req(c, BROKER_OP_UNLINK, "ipc-delete", op->path);
		q.flags = isdir ? AT_REMOVEDIR : 0;
		r = door_handle(b, &q, NULL);
	}
	if (r == -ENOENT && op->force)
		r = 0;
	if (r >= 0 && report_fd >= 0)
		(void)report_line(report_fd, op->path, ret->real, trash ? "trash" : "unlink",
				  ret->trashed);
	return r;
}

static int door_mkdir(struct broker *b, const struct broker_ipc_ctx *c,
		      const struct broker_host_op *op, struct broker_ipc_result *ret)
{
	mode_t mode = op->has_mode ? op->mode : 0777;
	if (!op->recursive) {
		struct broker_req q = door_req(c, BROKER_OP_MKDIR, "ipc-mkdir", op->path);
		q.mode = mode;
		return door_handle(b, &q, NULL);
	}
	_cleanup_strbuf_ struct strbuf norm = STRBUF_INIT;
	int r = path_normalise(op->path, &norm);
	if (r < 0)
		return r;
	char *p = norm.buf;
	struct resolve_ctx ctx = door_ctx(b, c);
	for (size_t i = 1; r >= 0 && i <= norm.len; i++) {
		if (p[i] != '/' && p[i] != '\0')
			continue;
		bool last = p[i] == '\0';
		char saved = p[i];
		p[i] = '\0';
		struct resolved res = RESOLVED_INIT;
		r = resolve_path(&ctx, AT_FDCWD, p, RESOLVE_FOLLOW, &res);
		if (r >= 0 && res.exists) {
			if (!S_ISDIR(res.st.st_mode))
				r = last ? -EEXIST : -ENOTDIR;
			if (last)
				(void)dup_or_null(res.real, &ret->real);
		} else if (r >= 0) {
			struct broker_req q = door_req(c, BROKER_OP_MKDIR, "ipc-mkdir", p);
			q.mode = last ? mode : 0777;
			r = door_handle(b, &q, NULL);
			if (r == -EEXIST)
				r = 0; /* made meanwhile */
		}
		resolved_done(&res);
		p[i] = saved;
	}
	return r;
}

static int copy_fd(int src, int dst)
{
	bool plain = false;
	char buf[65536];
	for (;;) {
		ssize_t k;
		if (!plain) {
			k = copy_file_range(src, NULL, dst, NULL, 1u << 30, 0);
			if (k < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS ||
				      errno == EOPNOTSUPP)) {
				plain = true;
				continue;
			}
		} else {
			k = read(src, buf, sizeof buf);
			if (k > 0) {
				for (ssize_t off = 0; off < k;) {
					ssize_t w = write(dst, buf + off, (size_t)(k - off));
					if (w < 0 && errno == EINTR)
						continue;
					if (w <= 0)
						return w < 0 ? negative_errno() : -EIO;
					off += w;
				}
			}
		}
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return negative_errno();
		if (k == 0)
			return 0;
	}
}

/*
 * copy: the source is read with the policy's read decision, the destination is written through
 * the common open/mkdir/symlink code (policy, backup, audit). A directory needs recursive; inside
 * a tree symlinks are copied as symlinks (cp -r), the top-level source is followed.
 */
static int door_copy(struct broker *b, const struct broker_ipc_ctx *c, const char *from,
		     const char *to, bool recursive, unsigned depth, size_t *budget)
{
	if (depth > BROKER_TREE_MAX_DEPTH)
		return -ELOOP;
	if (*budget == 0)
		return -E2BIG;
	(*budget)--;
	struct timespec t0;
	now(&t0);
	struct broker_req rq = door_req(c, BROKER_OP_OPEN, "ipc-copy-read", from);
	struct op_log l = {.phase = "ipc-host-op", .path = from, .decision = DECIDE_DENY};
	struct resolved res = RESOLVED_INIT;
	struct resolve_ctx ctx = door_ctx(b, c);
	_cleanup_close_ int src = -1;
	int r = resolve_path(&ctx, AT_FDCWD, from, depth == 0 ? RESOLVE_FOLLOW : 0, &res);
	if (r >= 0) {
		l.real = res.real;
		if (!res.exists)
			r = -ENOENT;
		else if (res.obj_fd >= 0)
			r = -EINVAL; /* magic links: not copied */
	}
	if (r >= 0) {
		l.decision = decide(b, res.real, POLICY_ACCESS_READ, &res.st, &l.reason);
		if (refused(l.decision))
			r = -EACCES;
		else
			l.decision = DECIDE_BROKER;
	}
	mode_t mode = res.st.st_mode;
	if (r >= 0 && S_ISREG(mode)) {
		src =
		    openat(res.parent_fd, res.name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		struct stat st;
		if (src < 0)
			r = negative_errno();
		else if (fstat(src, &st) < 0 || !stat_inode_same(&st, &res.st))
			r = -EAGAIN;
	} else if (r >= 0 && S_ISDIR(mode) && !recursive) {
		r = -EISDIR;
	} else if (r >= 0 && !S_ISDIR(mode) && !S_ISLNK(mode)) {
		r = -EOPNOTSUPP; /* FIFOs, devices, sockets are not copied */
	}
	/* Only refusals and failures of the read side get a line of their own. */
	if (r < 0)
		log_op(b, &rq, &l, r, &t0);
	if (r < 0) {
		resolved_done(&res);
		return r;
	}
	if (S_ISREG(mode)) {
		resolved_done(&res);
		struct broker_req q = door_req(c, BROKER_OP_OPEN, "ipc-copy", to);
		q.flags = O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK;
		q.mode = mode & 07777;
		_cleanup_close_ int dst = -1;
		r = door_handle(b, &q, &dst);
		if (r >= 0 && dst < 0)
			r = -EACCES;
		if (r >= 0)
			r = copy_fd(src, dst);
		return r;
	}
	if (S_ISLNK(mode)) {
		char target[BROKERED_PATH_MAX + 1];
		ssize_t k = readlinkat(res.parent_fd, res.name, target, sizeof target);
		resolved_done(&res);
		if (k < 0)
			return negative_errno();
		if ((size_t)k >= sizeof target)
			return -ENAMETOOLONG;
		target[k] = '\0';
		struct broker_req q = door_req(c, BROKER_OP_SYMLINK, "ipc-copy", NULL);
		q.path2 = to;
		q.symlink_target = target;
		return door_handle(b, &q, NULL);
	}
	/* A directory: refuse copying it into itself, then mkdir and recurse. */
	_cleanup_free_ char *real = strdup(res.real);
	char **names = NULL;
	size_t n = 0;
	if (!real)
		r = -ENOMEM;
	if (r >= 0)
		r = list_names_at(res.parent_fd, res.name, budget, &names, &n);
	resolved_done(&res);
	if (r < 0)
		return r;
	struct resolved dst = RESOLVED_INIT;
	r = resolve_path(&ctx, AT_FDCWD, to, 0, &dst);
	if (r >= 0 && dst.real && path_is_under(dst.real, real))
		r = -EINVAL;
	bool exists = r >= 0 && dst.exists && S_ISDIR(dst.st.st_mode);
	if (r >= 0 && dst.exists && !exists)
		r = -ENOTDIR;
	resolved_done(&dst);
	if (r >= 0 && !exists) {
		struct broker_req q = door_req(c, BROKER_OP_MKDIR, "ipc-copy", to);
		q.mode = (mode & 07777) | 0700;
		r = door_handle(b, &q, NULL);
	}
	for (size_t i = 0; r >= 0 && i < n; i++) {
		struct strbuf sf = STRBUF_INIT, st = STRBUF_INIT;
		r = path_join(real, names[i], &sf);
		if (r >= 0)
			r = path_join(to, names[i], &st);
		if (r >= 0)
			r = door_copy(b, c, strbuf_cstr(&sf), strbuf_cstr(&st), true, depth + 1,
				      budget);
		strbuf_free(&sf);
		strbuf_free(&st);
	}
	names_free(names, n);
	return r;
}

static int door_touch(struct broker *b, const struct broker_ipc_ctx *c, const char *path)
{
	struct resolved res = RESOLVED_INIT;
	struct resolve_ctx ctx = door_ctx(b, c);
	int r = resolve_path(&ctx, AT_FDCWD, path, RESOLVE_FOLLOW, &res);
	bool exists = r >= 0 && res.exists;
	resolved_done(&res);
	if (r < 0)
		return r;
	if (exists) {
		struct broker_req q = door_req(c, BROKER_OP_UTIMES, "ipc-touch", path);
		q.times_now = true;
		return door_handle(b, &q, NULL);
	}
	struct broker_req q = door_req(c, BROKER_OP_OPEN, "ipc-touch", path);
	q.flags = O_WRONLY | O_CREAT | O_NONBLOCK;
	q.mode = 0666;
	_cleanup_close_ int fd = -1;
	return door_handle(b, &q, &fd);
}

/* ModifyBackup: the client is about to write path itself; record its pre-image (or absence). */
static int door_modify_backup(struct broker *b, const struct broker_ipc_ctx *c, const char *path)
{
	struct timespec t0;
	now(&t0);
	struct broker_req q = door_req(c, BROKER_OP_OPEN, "ipc-modify-backup", path);
	struct op_log l = {.phase = "host-modify-backup", .path = path, .decision = DECIDE_DENY};
	struct resolved res = RESOLVED_INIT;
	struct resolve_ctx ctx = door_ctx(b, c);
	int r = resolve_path(&ctx, AT_FDCWD, path, RESOLVE_FOLLOW | RESOLVE_ALLOW_DOTDOT, &res);
	if (r >= 0) {
		l.real = res.real;
		if (res.obj_fd >= 0 || !res.name)
			r = -EINVAL;
		else if (res.exists && S_ISDIR(res.st.st_mode))
			r = -EISDIR;
	}
	if (r >= 0) {
		l.decision = decide(b, res.real, POLICY_ACCESS_WRITE, res.exists ? &res.st : NULL,
				    &l.reason);
		if (refused(l.decision))
			r = -EACCES;
		else if (res.exists && !S_ISREG(res.st.st_mode))
			l.backup = "not-regular";
		else
			r = before_change_res(b, &res, 0, NULL, &l);
	}
	log_op(b, &q, &l, r < 0 ? r : 0, &t0);
	resolved_done(&res);
	return r;
}

void broker_ipc_host_op(struct broker *b, const struct broker_ipc_ctx *c,
			const struct broker_host_op *op, struct broker_ipc_result *ret)
{
	*ret = (struct broker_ipc_result)BROKER_IPC_RESULT_INIT;
	bool two = op->kind == BROKER_HOST_RENAME || op->kind == BROKER_HOST_COPY ||
		   op->kind == BROKER_HOST_LINK;
	bool sym = op->kind == BROKER_HOST_LINK && op->symbolic;
	if (!op->path || !*op->path || (!sym && op->path[0] != '/') ||
	    (two && (!op->to || op->to[0] != '/')) ||
	    (op->report_path && op->report_path[0] != '/')) {
		ret->error = -EINVAL;
		return;
	}
	_cleanup_strbuf_ struct strbuf extra = STRBUF_INIT;
	door_begin(b, c,
		   op->kind == BROKER_HOST_MODIFY_BACKUP ? "host-modify-backup" : "ipc-host-op",
		   true, &extra);
	struct broker_req q;
	size_t budget = BROKER_TREE_MAX_ENTRIES;
	int r;
	switch (op->kind) {
	case BROKER_HOST_DELETE:
		r = door_delete(b, c, op, ret);
		break;
	case BROKER_HOST_MKDIR:
		r = door_mkdir(b, c, op, ret);
		break;
	case BROKER_HOST_RENAME:
		q = door_req(c, BROKER_OP_RENAME, "ipc-rename", op->path);
		q.path2 = op->to;
		r = door_handle(b, &q, NULL);
		break;
	case BROKER_HOST_COPY:
		r = door_copy(b, c, op->path, op->to, op->recursive, 0, &budget);
		if (r >= 0) {
			/* The answer names the top-level paths, not the last file copied. */
			struct resolved a = RESOLVED_INIT, z = RESOLVED_INIT;
			struct resolve_ctx ctx = door_ctx(b, c);
			if (resolve_path(&ctx, AT_FDCWD, op->path, RESOLVE_FOLLOW, &a) >= 0)
				(void)dup_or_null(a.real, &ret->real);
			if (resolve_path(&ctx, AT_FDCWD, op->to, 0, &z) >= 0)
				(void)dup_or_null(z.real, &ret->real_to);
			resolved_done(&a);
			resolved_done(&z);
		}
		break;
	case BROKER_HOST_CHMOD:
		q = door_req(c, BROKER_OP_CHMOD, "ipc-chmod", op->path);
		q.mode = op->has_mode ? op->mode : 0;
		r = op->has_mode ? door_handle(b, &q, NULL) : -EINVAL;
		break;
	case BROKER_HOST_LINK:
		if (op->symbolic) {
			q = door_req(c, BROKER_OP_SYMLINK, "ipc-symlink", NULL);
			q.path2 = op->to;
			q.symlink_target = op->path;
			r = door_handle(b, &q, NULL);
			/* The link itself is the "to" side of the answer. */
			ret->real_to = TAKE_PTR(b->door.real);
		} else {
			q = door_req(c, BROKER_OP_LINK, "ipc-link", op->path);
			q.path2 = op->to;
			r = door_handle(b, &q, NULL);
			/* The audit line names the new link; the answer names both sides. */
			ret->real_to = TAKE_PTR(b->door.real);
			struct resolved a = RESOLVED_INIT;
			struct resolve_ctx ctx = door_ctx(b, c);
			if (resolve_path(&ctx, AT_FDCWD, op->path, 0, &a) >= 0)
				(void)dup_or_null(a.real, &ret->real);
			resolved_done(&a);
		}
		break;
	case BROKER_HOST_TOUCH:
		r = door_touch(b, c, op->path);
		break;
	case BROKER_HOST_MODIFY_BACKUP:
		r = door_modify_backup(b, c, op->path);
		break;
	default:
		r = -EOPNOTSUPP;
		break;
	}
	door_end(b, r, false, ret);
}
